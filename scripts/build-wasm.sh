#!/usr/bin/env bash
# Builds the wasm module (release) and the JavaScript package in pkg/:
#   pkg/index.js      exports install({force}) and init(); what pages, workers and bundlers import
#   pkg/webnn.js      the WebNN interfaces (the wasm-bindgen snippet js/webnn.js, re-exported)
#   pkg/webnn_wgpu.js + pkg/webnn_wgpu_bg.wasm   the wasm-bindgen output (--target web)
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --target wasm32-unknown-unknown --release --lib
rm -rf pkg
wasm-bindgen --target web --out-dir pkg target/wasm32-unknown-unknown/release/webnn_wgpu.wasm

# The glue imports js/webnn.js from pkg/snippets/<crate>-<hash>/; index.js must reach the same
# module instance, so it imports it through a stable re-export.
snippet=$(cd pkg && find snippets -path '*/js/webnn.js' | head -n 1)
if [ -z "$snippet" ]; then
  echo "build-wasm.sh: js/webnn.js is missing from pkg/snippets" >&2
  exit 1
fi
printf "export * from './%s';\n" "$snippet" > pkg/webnn.js
cp js/index.js pkg/index.js
echo "pkg/ ready: import { install } from './pkg/index.js'"
