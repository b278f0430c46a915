#!/usr/bin/env python3
"""Per-tensor reference values of a weight file, read with the reference Python readers
(safetensors + numpy, gguf-py), as JSON for the loader's real-file test: for each tensor its
type, row-major shape, element count, float64 sum and sum of magnitudes, and two hashes of every
value, exact to the bit: `hash32` of the 32-bit values (float32 bits, or int32 for integer
tensors) and `hash16` of the values rounded to float16 (round to nearest even, as the loader's
float16 conversion), each sum(bits[i] * key(i)) mod 2**64 with key(i) the odd splitmix64 of i,
so a change of any one value changes the hash. Quantized GGUF tensors are dequantized with
gguf-py (float32).

usage: dump_weights.py FILE OUT.json
"""
import json
import sys

import numpy as np

# The JSON layout; tools/fetch_test_models.sh rewrites a cached file of another one.
FORMAT = 2
CHUNK = 1 << 22


def keys(start, count):
    """splitmix64(i) | 1 for i in start..start+count (uint64 arithmetic wraps)."""
    z = np.arange(start, start + count, dtype=np.uint64) + np.uint64(1)
    z = z * np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return (z ^ (z >> np.uint64(31))) | np.uint64(1)


def value_hash(bits):
    total = 0
    for start in range(0, bits.size, CHUNK):
        part = bits[start:start + CHUNK].astype(np.uint64)
        total = (total + int((part * keys(start, part.size)).sum(dtype=np.uint64))) % (1 << 64)
    return total


def stats(values):
    flat = np.asarray(values).reshape(-1)
    as64 = flat.astype(np.float64)
    wide = flat.astype(np.float32) if flat.dtype.kind == "f" else flat.astype(np.int32)
    out = {
        "count": int(flat.size),
        "sum": float(as64.sum()),
        "sum_abs": float(np.abs(as64).sum()),
        "hash32": value_hash(wide.view(np.uint32)),
    }
    if flat.dtype.kind == "f":
        with np.errstate(over="ignore"):
            out["hash16"] = value_hash(wide.astype(np.float16).view(np.uint16))
    return out


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
        json.dump({"format": FORMAT, "file": path, "tensors": tensors}, f)
    print(f"{path}: {len(tensors)} tensors -> {dest}")


if __name__ == "__main__":
    main()
