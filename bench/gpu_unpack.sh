#!/usr/bin/env bash
# On the GPU machine, from the repository root: joins the pieces of bench/gpu_pack.sh copied to
# /tmp/payload by earlier calls, and lays them where bench/gpu_machine.sh looks: Chromium's
# parts and ort/ in /tmp/payload, tfjs and serve.py in .gpu/ctl, pkg/ (and .gpu/pkg-old), and
# the native examples (wgsl_lab, moe) with the lab's kernels in /tmp/payload/bin; the MoE weights
# where the tree has none.
set -euo pipefail
P=/tmp/payload
cat $P/payload.* | tar -x -C $P
xz -d -f $P/ort/ort-wasm-simd-threaded.asyncify.wasm.xz $P/bin/wgsl_lab.xz $P/bin/moe.xz
chmod +x $P/bin/wgsl_lab $P/bin/moe
mkdir -p .gpu && rm -rf .gpu/ctl && cp -r $P/ctl .gpu/ctl
rm -rf pkg && xz -d -c $P/pkg.tar.xz | tar -x
if [ -f $P/pkg-old.tar.xz ]; then rm -rf .gpu/pkg-old && xz -d -c $P/pkg-old.tar.xz | tar -x -C .gpu; fi
mkdir -p out && cp $P/lab.json out/lab.json
[ -f $P/model.safetensors.xz ] && xz -d -f $P/model.safetensors.xz
[ -f www/models/moe/model.safetensors ] || cp $P/model.safetensors www/models/moe/
