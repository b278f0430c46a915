#!/usr/bin/env bash
# Here (not on the GPU machine): everything one lease of bench/gpu_machine.sh needs, in pieces
# that each fit one device call beside the working tree (64 MiB in all). Run after
# scripts/setup.sh, scripts/build-wasm.sh and `cargo build --release --example wgsl_lab
# --example moe`. usage: bench/gpu_pack.sh [PIECE_MIB]   (default: what the tree leaves, minus 1)
# Writes .gpu/q0/payload.NN, .gpu/q1/payload.NN, ...: call i carries .gpu/qi and copies it to
# /tmp/payload; the last call also carries .gl and runs, on the GPU machine:
#   bash bench/gpu_unpack.sh && <native runs> && bash bench/gpu_machine.sh
# The pieces: Chromium (../shared/gpu-browser/pack.sh), onnxruntime-web's WebGPU files, tfjs,
# serve.py, pkg/ (and .gpu/pkg-old when there), the native examples and the WGSL lab's kernels
# (examples/wgsl_lab.rs write).
set -euo pipefail
cd "$(dirname "$0")/.."
tree=$(git ls-files -z | du -cb --files0-from=- | tail -1 | cut -f1)
piece=${1:-$(( (64 * 1048576 - tree) / 1048576 - 1 ))}
w=$(mktemp -d); trap 'rm -rf "$w"' EXIT
mkdir -p "$w/p/ort" "$w/p/ctl/tf" "$w/p/bin"
# CHROMIUM_XZ: an earlier pack.sh output joined into one file (pack.sh takes minutes)
if [ -n "${CHROMIUM_XZ:-}" ]; then
  cp "$CHROMIUM_XZ" "$w/p/chromium.part.00"
else
  bash ../shared/gpu-browser/pack.sh "$w/chromium" >/dev/null
  cat "$w"/chromium/chromium.part.* > "$w/p/chromium.part.00"
fi
ort=node_modules/onnxruntime-web/dist
cp $ort/ort.webgpu.min.js $ort/ort-wasm-simd-threaded.asyncify.mjs "$w/p/ort/"
xz -T0 -6 -c $ort/ort-wasm-simd-threaded.asyncify.wasm > "$w/p/ort/ort-wasm-simd-threaded.asyncify.wasm.xz"
cp node_modules/@tensorflow/tfjs-core/dist/tf-core.min.js node_modules/@tensorflow/tfjs-backend-webgpu/dist/tf-backend-webgpu.min.js "$w/p/ctl/tf/"
cp ../shared/gpu-browser/serve.py "$w/p/ctl/"
tar -cf - pkg | xz -T0 -6 > "$w/p/pkg.tar.xz"
# .gpu/pkg-old (another build of pkg/): gpu_machine.sh then runs both builds, interleaved.
[ -d .gpu/pkg-old ] && tar -cf - -C .gpu pkg-old | xz -T0 -6 > "$w/p/pkg-old.tar.xz"
cp target/release/examples/wgsl_lab target/release/examples/moe "$w/p/bin/"
target/release/examples/wgsl_lab write "$w/p/lab.json" >/dev/null
# GPU_PACK_MODEL=1: the MoE weights travel in the payload, for a lease whose working tree leaves
# them out (untracked for the run, so that each call carries a larger piece).
[ "${GPU_PACK_MODEL:-}" = 1 ] && xz -T0 -3 -c www/models/moe/model.safetensors > "$w/p/model.safetensors.xz"
(cd "$w/p/bin" && xz -T0 -6 wgsl_lab moe)
rm -rf .gpu/q*
tar -cf - -C "$w/p" . | split -b "${piece}m" -d -a 2 - "$w/payload."
i=0
for f in "$w"/payload.*; do mkdir -p .gpu/q$i && mv "$f" .gpu/q$i/; i=$((i + 1)); done
du -sh .gpu/q*
