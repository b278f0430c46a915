#!/usr/bin/env bash
# The GPU-browser benchmark (bench/gpu.html) in headless Chromium on the NVIDIA GPU machine, run
# from the repository root there; the machine has no browser, no Node and no network, so what it
# needs travels in device calls (docs: BENCHMARKS.md, "Real GPU in Chromium"):
#   /tmp/payload/chromium.part.*  ../shared/gpu-browser/pack.sh parts (one call per part)
#   /tmp/payload/ort/             onnxruntime-web's ort.webgpu.min.js and ort-wasm-simd-threaded.asyncify.{mjs,wasm}
#   /tmp/payload/model.safetensors  the MoE demo's weights, when the tree's copy is not there
#   .gl/*.deb                     libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2:
#                                 without glvnd, Vulkan finds no NVIDIA driver and WebGPU no adapter
#   .gpu/ctl/serve.py, .gpu/ctl/tf/  ../shared/gpu-browser/serve.py; tfjs-core and tfjs-backend-webgpu min.js
#   pkg/ and, for a before/after run, .gpu/pkg-old/ (another build of pkg/)
# Probes flag sets until one gives a hardware adapter, then runs the page twice per build,
# interleaved (old, new, old, new). Results (one JSON line per page, progress lines too) go to
# $OUT/results.jsonl. GPU_QUERY adds page parameters; GPU_SECONDS bounds each page; GPU_ROUNDS
# (default 2) sets the rounds. With
# GPU_FLAGS set (and no .gpu/pkg-old), the comparison is the chosen flag set without and with
# those flags (e.g. --enable-dawn-features=disable_robustness; several sets separated by '|',
# each its own page, tagged flags0, flags1, ...), interleaved the same way, the flagged pages
# with GPU_FLAGS_QUERY instead of GPU_QUERY when it is set. GPU_SKIP_PLAIN=1 runs only the
# flagged pages (a later call on the same warm machine). The GPU's SM clock, power and utilization
# are sampled every 0.1 s into $OUT/smi.csv (`gpu_table.py results.jsonl smi.csv` gives each
# cell's clock during its timed runs).
set -u
root=/tmp/chromium-gpu; P=/tmp/payload
ls $P/chromium.part.00 $P/ort >/dev/null || exit 3
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
if [ ! -x $root/chromium/chromium-headless-shell ]; then
  mkdir -p $root && cat $P/chromium.part.* | xz -d | tar -x -C $root || { echo "unpack failed"; exit 1; }
fi
[ -f $P/model.safetensors ] && cp $P/model.safetensors www/models/moe/model.safetensors
mkdir -p node_modules/onnxruntime-web/dist node_modules/@tensorflow/tfjs-core/dist node_modules/@tensorflow/tfjs-backend-webgpu/dist
cp $P/ort/* node_modules/onnxruntime-web/dist/
cp .gpu/ctl/tf/tf-core.min.js node_modules/@tensorflow/tfjs-core/dist/
cp .gpu/ctl/tf/tf-backend-webgpu.min.js node_modules/@tensorflow/tfjs-backend-webgpu/dist/
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
export LD_LIBRARY_PATH=$root/lib:$root/chromium
printf '<?xml version="1.0"?><fontconfig><dir>%s/fonts</dir><cachedir>%s/fc-cache</cachedir></fontconfig>\n' $root $root > $root/fonts.conf
export FONTCONFIG_FILE=$root/fonts.conf
nvidia-smi -L
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,utilization.gpu --format=csv,noheader,nounits -lms 100 > $OUT/smi.csv 2>/dev/null & smi=$!
here=$PWD/.gpu/ctl
serve() { kill ${srv:-} 2>/dev/null; sleep 0.3; python3 $here/serve.py 8131 $OUT/results.jsonl "$1" > /dev/null 2>&1 & srv=$!; sleep 0.5; }
builds=(new); serve .
if [ -d .gpu/pkg-old ]; then
  rm -rf /tmp/old && cp -r . /tmp/old && rm -rf /tmp/old/pkg && cp -r .gpu/pkg-old /tmp/old/pkg
  builds=(old new)
fi
base="--headless --no-sandbox --disable-gpu-sandbox --enable-unsafe-webgpu --ignore-gpu-blocklist --enable-gpu --disable-dev-shm-usage --no-first-run --enable-logging=stderr --ozone-platform=headless"
variants=(
  "--enable-features=Vulkan --disable-vulkan-surface --use-vulkan=native --use-angle=vulkan"
  "--enable-features=Vulkan --disable-vulkan-surface --use-vulkan=native --use-gl=disabled"
)
stages() { cat $OUT/results.jsonl 2>/dev/null | grep -c '"stage"'; }
page() { # flags page seconds tag
  local before; before=$(stages)
  $root/chromium/chromium-headless-shell $base $1 --user-data-dir=/tmp/prof-$4 "http://127.0.0.1:8131/$2" > $OUT/chrome-$4.log 2>&1 & local chr=$!
  for _ in $(seq 1 $(($3 * 2))); do [ "$(stages)" -gt "${before:-0}" ] && break; sleep 0.5; done
  kill $chr 2>/dev/null; wait $chr 2>/dev/null
}
chosen=
for i in "${!variants[@]}"; do
  page "${variants[$i]}" bench/gpu_probe.html 40 probe$i
  echo "variant $i: $(tail -1 $OUT/results.jsonl)"
  if tail -1 $OUT/results.jsonl | grep -qi nvidia; then chosen=${variants[$i]}; break; fi
done
[ -n "$chosen" ] || { echo "no flag set found the GPU"; kill $srv $smi; exit 1; }
sets=()
[ -n "${GPU_FLAGS:-}" ] && [ ${#builds[@]} = 1 ] && IFS='|' read -ra sets <<< "$GPU_FLAGS"
[ "${GPU_SKIP_PLAIN:-}" = 1 ] && [ ${#sets[@]} -gt 0 ] && builds=()
for i in "${!sets[@]}"; do builds+=("flags$i"); done
for round in $(seq 1 ${GPU_ROUNDS:-2}); do
  for tag in "${builds[@]}"; do
    if [ $tag = old ]; then serve /tmp/old; else serve .; fi
    flags=$chosen query=${GPU_QUERY:-}
    [[ $tag = flags* ]] && flags="$chosen ${sets[${tag#flags}]}" query=${GPU_FLAGS_QUERY:-$query}
    page "$flags" "bench/gpu.html?$query&tag=$tag$round" ${GPU_SECONDS:-200} bench-$tag$round
  done
done
kill $srv $smi
