#!/usr/bin/env python3
"""Per-tensor statistics of a weight file, read with the reference Python readers (safetensors +
numpy, gguf-py), as JSON for the loader's real-file test: for each tensor its type, row-major
shape, float64 sum, sum of squares and sum of magnitudes, first 16 values, and an exact
checksum of the 32-bit values (float32 bits, or int32 for integer tensors):
sum(bits[i] * (i % 65521 + 1)) mod 2**64. Quantized GGUF tensors are dequantized with gguf-py
(float32).

usage: dump_weights.py FILE OUT.json
"""
import json
import sys

import numpy as np


def stats(values):
    flat = np.asarray(values).reshape(-1)
    as64 = flat.astype(np.float64)
    wide = flat.astype(np.float32) if flat.dtype.kind == "f" else flat.astype(np.int32)
    bits = wide.view(np.uint32).astype(np.uint64)
    weights = np.arange(flat.size, dtype=np.uint64) % np.uint64(65521) + np.uint64(1)
    return {
        "checksum": int((bits * weights).sum(dtype=np.uint64)),
        "sum_abs": float(np.abs(as64).sum()),
        "sum": float(as64.sum()),
        "sum_sq": float((as64 * as64).sum()),
        "first": [float(v) for v in as64[:16]],
        "count": int(flat.size),
    }


def dump_safetensors(path):
    from safetensors.numpy import load_file

    out = {}
    for name, array in load_file(path).items():
        out[name] = {"type": str(array.dtype), "shape": list(array.shape), **stats(array)}
    return out


def dump_gguf(path):
    from gguf import GGUFReader
    from gguf.quants import dequantize

    out = {}
    for t in GGUFReader(path).tensors:
        values = dequantize(t.data, t.tensor_type)
        shape = [int(d) for d in reversed(t.shape.tolist())]
        out[t.name] = {"type": t.tensor_type.name, "shape": shape, **stats(values)}
    return out


def main():
    path, dest = sys.argv[1], sys.argv[2]
    tensors = dump_gguf(path) if path.endswith(".gguf") else dump_safetensors(path)
    with open(dest, "w") as f:
        json.dump({"file": path, "tensors": tensors}, f)
    print(f"{path}: {len(tensors)} tensors -> {dest}")


if __name__ == "__main__":
    main()
