#!/usr/bin/env bash
# Builds the wasm module (release) and the npm package `webnn-wgpu` in pkg/:
#   pkg/index.js      exports install({force}) and init(); what pages, workers and bundlers import
#   pkg/index.d.ts    the hand-written declarations (js/index.d.ts): WebNN's IDL and the extensions
#   pkg/webnn.js      the WebNN interfaces (the wasm-bindgen snippet js/webnn.js, re-exported)
#   pkg/webnn_wgpu.js + pkg/webnn_wgpu_bg.wasm   the wasm-bindgen output (--target web): the glue
#                     finds the .wasm with new URL('webnn_wgpu_bg.wasm', import.meta.url), which
#                     works in a plain <script type="module"> and in webpack 5, Vite and esbuild
#   pkg/webnn_wgpu_threads.js + pkg/webnn_wgpu_threads_bg.wasm + pkg/cpu_worker.js   the atomics
#                     build (shared memory; CPU kernels on Web Workers), which index.js loads in a
#                     cross-origin isolated page. It needs the nightly toolchain with rust-src
#                     (std rebuilt with atomics), which scripts/setup.sh installs; without them it
#                     is left out with a warning, and every page runs the plain build
#   pkg/package.json  generated below from the crate's version; `npm pack pkg` makes the tarball
# This is what `wasm-pack build --target web` produces (wasm-pack runs the same wasm-bindgen),
# without needing wasm-pack installed or wasm-opt downloaded.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --target wasm32-unknown-unknown --release --lib
rm -rf pkg
wasm-bindgen --target web --out-dir pkg target/wasm32-unknown-unknown/release/webnn_wgpu.wasm

# The atomics build: std rebuilt with atomics (nightly's -Z build-std), memory imported, shared
# and up to 4 GiB; wasm-bindgen sees the shared memory and emits the thread-aware glue.
threads=no
if cargo +nightly --version >/dev/null 2>&1 && [ -d "$(rustc +nightly --print sysroot)/lib/rustlib/src/rust/library" ]; then
  RUSTFLAGS="-C target-feature=+simd128,+atomics,+bulk-memory,+mutable-globals -C link-arg=--shared-memory \
-C link-arg=--import-memory -C link-arg=--max-memory=4294967296 -C link-arg=--export=__wasm_init_tls \
-C link-arg=--export=__tls_size -C link-arg=--export=__tls_align -C link-arg=--export=__tls_base" \
    cargo +nightly build --target wasm32-unknown-unknown --release --lib -Z build-std=panic_abort,std \
    --target-dir target/threads &&
    wasm-bindgen --target web --out-dir pkg --out-name webnn_wgpu_threads target/threads/wasm32-unknown-unknown/release/webnn_wgpu.wasm &&
    cp js/cpu_worker.js pkg/cpu_worker.js && threads=yes
  # A nightly that cannot build it costs the threads (tests/browser/cpu_threads.mjs fails), not the
  # plain build.
  if [ $threads = no ]; then
    echo "build-wasm.sh: WARNING: the threaded build failed: pkg/ has the plain build only" >&2
    rm -f pkg/webnn_wgpu_threads* pkg/cpu_worker.js
  fi
else
  echo "build-wasm.sh: WARNING: no nightly toolchain with rust-src (scripts/setup.sh installs them): pkg/ has no threaded build" >&2
fi

# The glue imports js/webnn.js from pkg/snippets/<crate>-<hash>/; index.js must reach the same
# module instance, so it imports it through a stable re-export.
snippet=$(cd pkg && find snippets -path '*/js/webnn.js' | head -n 1)
if [ -z "$snippet" ]; then
  echo "build-wasm.sh: js/webnn.js is missing from pkg/snippets" >&2
  exit 1
fi
printf "export * from './%s';\n" "$snippet" > pkg/webnn.js
cp js/index.js pkg/index.js
cp js/index.d.ts pkg/index.d.ts
cp LICENSE-MIT LICENSE-APACHE pkg/
# wasm-bindgen's own declarations describe the internal handles; index.d.ts replaces them.
rm -f pkg/webnn_wgpu.d.ts pkg/webnn_wgpu_bg.wasm.d.ts pkg/webnn_wgpu_threads.d.ts pkg/webnn_wgpu_threads_bg.wasm.d.ts

version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
cat > pkg/package.json <<JSON
{
  "name": "webnn-wgpu",
  "version": "$version",
  "description": "A WebNN polyfill (navigator.ml) in Rust on WebGPU through wgpu, with device memory extensions: swapOut/swapIn, memory budgets, streamed weight files",
  "license": "MIT OR Apache-2.0",
  "type": "module",
  "main": "./index.js",
  "module": "./index.js",
  "types": "./index.d.ts",
  "exports": {
    ".": {
      "types": "./index.d.ts",
      "default": "./index.js"
    },
    "./webnn_wgpu_bg.wasm": "./webnn_wgpu_bg.wasm",
    "./webnn_wgpu_threads_bg.wasm": "./webnn_wgpu_threads_bg.wasm",
    "./package.json": "./package.json"
  },
  "files": [
    "index.js",
    "index.d.ts",
    "webnn.js",
    "webnn_wgpu.js",
    "webnn_wgpu_bg.wasm",
    "webnn_wgpu_threads.js",
    "webnn_wgpu_threads_bg.wasm",
    "cpu_worker.js",
    "snippets/",
    "README.md",
    "LICENSE-MIT",
    "LICENSE-APACHE"
  ],
  "sideEffects": false,
  "keywords": ["webnn", "webgpu", "wgpu", "wasm", "polyfill", "machine-learning"]
}
JSON
cat > pkg/README.md <<'MD'
# webnn-wgpu

A polyfill of the [WebNN API](https://www.w3.org/TR/webnn/) (`navigator.ml`) written in Rust on
WebGPU through wgpu and compiled to WebAssembly, with experimental device memory extensions
(`MLGraph.swapOut()`/`swapIn()`, `createContext({ memoryBudget })`, `memoryInfo()`,
`openWeights()` for safetensors/GGUF files streamed to the GPU).

```js
import { install } from 'webnn-wgpu';

install();
const context = await navigator.ml.createContext();
const builder = new MLGraphBuilder(context);
```

Works from bundlers (webpack 5, Vite) and from a plain `<script type="module">`; types in
`index.d.ts`. See the repository's README.md, docs/API.md and docs/EXTENSIONS.md.
MD
echo "pkg/ ready (threaded build: $threads): import { install } from './pkg/index.js'; npm pack pkg makes the tarball"
