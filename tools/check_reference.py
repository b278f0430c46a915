#!/usr/bin/env python3
"""Independent numpy re-implementation of the MoE forward pass (no torch), checked against the
reference.json written by tools/train_moe.py.

    python3 tools/check_reference.py www/models/moe

It reads model.safetensors + config.json, converts the float16 weights to float32 and computes
everything in float32 -- what the browser does. It decodes token by token with a KV cache (the
browser's token loop), which is a different code path from the reference's full recompute, and
also runs a whole-sequence forward (prefill form) as a cross-check. This file is meant to be the
readable spec of the math the WebGPU implementation must reproduce.

Exit status 0 when every check passes.
"""
import json
import os
import struct
import sys

import numpy as np

F32 = np.float32
np.seterr(over="ignore")  # exp overflow in silu of very negative inputs is harmless (-> 0)


def read_safetensors(path):
    """Parse the file by hand and verify the layout: offsets contiguous from 0, file fully used."""
    with open(path, "rb") as f:
        buf = f.read()
    (n,) = struct.unpack("<Q", buf[:8])
    header = json.loads(buf[8 : 8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    spans = sorted((h["data_offsets"][0], h["data_offsets"][1], name) for name, h in header.items())
    pos = 0
    for s, e, name in spans:
        assert s == pos, f"{name}: offset {s}, expected {pos} (offsets must be contiguous)"
        pos = e
    assert 8 + n + pos == len(buf), f"file is {len(buf)} bytes, header says {8 + n + pos}"
    weights = {}
    for name, h in header.items():
        assert h["dtype"] == "F16", f"{name}: dtype {h['dtype']}"
        s, e = h["data_offsets"]
        count = int(np.prod(h["shape"])) if h["shape"] else 1
        assert e - s == 2 * count, f"{name}: {e - s} bytes for shape {h['shape']}"
        a = np.frombuffer(buf, dtype="<f2", count=count, offset=8 + n + s).reshape(h["shape"])
        weights[name] = a.astype(F32)  # float16 -> float32 is exact
    return weights, meta


def rmsnorm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + F32(eps)) * w


def silu(x):
    return x / (F32(1) + np.exp(-x))


def softmax(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


class Model:
    def __init__(self, weights, cfg):
        self.W, self.c = weights, cfg
        c = cfg
        self.rep = c["n_heads"] // c["n_kv_heads"]
        hd = c["head_dim"]
        # RoPE, "rotate half": pairs (j, j + hd/2), inv_freq[j] = theta^(-2j/hd), pos from 0.
        self.inv_freq = (F32(1) / (F32(c["rope_theta"]) ** (np.arange(0, hd, 2, dtype=F32) / F32(hd)))).astype(F32)
        self.check_shapes()

    def check_shapes(self):
        c, W = self.c, self.W
        d, hd, H, Hkv, ff, E, V = (c["d_model"], c["head_dim"], c["n_heads"], c["n_kv_heads"],
                                   c["d_ff"], c["n_experts"], c["vocab"])
        want = {"embed.weight": (V, d), "norm.weight": (d,), "lm_head.weight": (V, d)}
        for l in range(c["n_layers"]):
            p = f"layers.{l}."
            want.update({
                p + "attn_norm.weight": (d,), p + "moe_norm.weight": (d,),
                p + "attn.wq.weight": (H * hd, d), p + "attn.wk.weight": (Hkv * hd, d),
                p + "attn.wv.weight": (Hkv * hd, d), p + "attn.wo.weight": (d, H * hd),
                p + "moe.router.weight": (E, d),
            })
            for e in range(E):
                q = f"{p}moe.experts.{e}."
                want.update({q + "w1.weight": (ff, d), q + "w3.weight": (ff, d), q + "w2.weight": (d, ff)})
        assert set(want) == set(W), f"tensor names differ: {sorted(set(want) ^ set(W))[:8]}"
        for k, s in want.items():
            assert W[k].shape == s, f"{k}: shape {W[k].shape}, expected {s}"

    def rope(self, x, pos):
        """x [..., T, hd] with positions pos [T]."""
        ang = np.outer(np.asarray(pos, dtype=F32), self.inv_freq).astype(F32)  # [T, hd/2]
        cos, sin = np.cos(ang), np.sin(ang)
        h = x.shape[-1] // 2
        x1, x2 = x[..., :h], x[..., h:]
        return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)

    def moe(self, l, h):
        """h [T, d] -> [T, d]. Top-k by router logit (ties: lower expert index), softmax over the k."""
        c, W = self.c, self.W
        p = f"layers.{l}.moe."
        logits = h @ W[p + "router.weight"].T  # [T, E]
        out = np.zeros_like(h)
        for t in range(h.shape[0]):
            top = np.argsort(-logits[t], kind="stable")[: c["top_k"]]
            w = softmax(logits[t, top])
            for wi, e in zip(w, top):
                q = f"{p}experts.{e}."
                g = silu(W[q + "w1.weight"] @ h[t]) * (W[q + "w3.weight"] @ h[t])
                out[t] += wi * (W[q + "w2.weight"] @ g)
        return out

    def attn_full(self, l, h):
        """Whole-sequence causal attention, h [T, d]."""
        c, W = self.c, self.W
        p = f"layers.{l}.attn."
        T, H, Hkv, hd = h.shape[0], c["n_heads"], c["n_kv_heads"], c["head_dim"]
        q = (h @ W[p + "wq.weight"].T).reshape(T, H, hd).transpose(1, 0, 2)  # [H, T, hd]
        k = (h @ W[p + "wk.weight"].T).reshape(T, Hkv, hd).transpose(1, 0, 2)
        v = (h @ W[p + "wv.weight"].T).reshape(T, Hkv, hd).transpose(1, 0, 2)
        q, k = self.rope(q, range(T)), self.rope(k, range(T))
        mask = np.triu(np.full((T, T), -np.inf, dtype=F32), 1)
        out = np.empty((T, H, hd), dtype=F32)
        for i in range(H):
            g = i // self.rep  # GQA: query head i reads kv head i // (H / Hkv)
            s = q[i] @ k[g].T / F32(np.sqrt(hd)) + mask
            out[:, i] = softmax(s) @ v[g]
        return out.reshape(T, H * hd) @ W[p + "wo.weight"].T

    def forward_full(self, ids):
        """Logits for every position [T, vocab] (prefill form)."""
        c, W = self.c, self.W
        x = W["embed.weight"][np.asarray(ids)]
        for l in range(c["n_layers"]):
            p = f"layers.{l}."
            x = x + self.attn_full(l, rmsnorm(x, W[p + "attn_norm.weight"], c["norm_eps"]))
            x = x + self.moe(l, rmsnorm(x, W[p + "moe_norm.weight"], c["norm_eps"]))
        return rmsnorm(x, W["norm.weight"], c["norm_eps"]) @ W["lm_head.weight"].T

    # --- token-by-token decoding with a KV cache (the browser's token loop) ---

    def reset(self):
        c = self.c
        self.pos = 0
        self.kc = [np.zeros((0, c["n_kv_heads"], c["head_dim"]), F32) for _ in range(c["n_layers"])]
        self.vc = [np.zeros((0, c["n_kv_heads"], c["head_dim"]), F32) for _ in range(c["n_layers"])]

    def step(self, token):
        """Feed one token at position self.pos; returns its logits [vocab]."""
        c, W = self.c, self.W
        H, Hkv, hd = c["n_heads"], c["n_kv_heads"], c["head_dim"]
        x = W["embed.weight"][token][None, :]  # [1, d]
        for l in range(c["n_layers"]):
            p = f"layers.{l}."
            h = rmsnorm(x, W[p + "attn_norm.weight"], c["norm_eps"])
            q = (h @ W[p + "attn.wq.weight"].T).reshape(H, 1, hd)
            k = (h @ W[p + "attn.wk.weight"].T).reshape(Hkv, 1, hd)
            v = (h @ W[p + "attn.wv.weight"].T).reshape(Hkv, hd)
            q, k = self.rope(q, [self.pos])[:, 0], self.rope(k, [self.pos])[:, 0]  # [H, hd], [Hkv, hd]
            self.kc[l] = np.concatenate([self.kc[l], k[None]])  # [pos+1, Hkv, hd]
            self.vc[l] = np.concatenate([self.vc[l], v[None]])
            o = np.empty((H, hd), F32)
            for i in range(H):
                g = i // self.rep
                s = self.kc[l][:, g] @ q[i] / F32(np.sqrt(hd))  # all cached positions: causal
                o[i] = softmax(s) @ self.vc[l][:, g]
            x = x + o.reshape(1, H * hd) @ W[p + "attn.wo.weight"].T
            x = x + self.moe(l, rmsnorm(x, W[p + "moe_norm.weight"], c["norm_eps"]))
        self.pos += 1
        return (rmsnorm(x, W["norm.weight"], c["norm_eps"]) @ W["lm_head.weight"].T)[0]


def rel_err(a, ref):
    ref = np.asarray(ref, dtype=np.float64)
    return float(np.max(np.abs(np.asarray(a, np.float64) - ref)) / np.max(np.abs(ref)))


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else "www/models/moe"
    tol = 1e-3
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    with open(os.path.join(d, "reference.json")) as f:
        ref = json.load(f)
    W, meta = read_safetensors(os.path.join(d, "model.safetensors"))
    total = sum(w.size for w in W.values())
    experts = sum(w.size for k, w in W.items() if ".experts." in k)
    size = os.path.getsize(os.path.join(d, "model.safetensors"))
    print(f"{len(W)} tensors, {total:,} parameters, experts {100 * experts / total:.1f}%, "
          f"file {size / 1e6:.1f} MB; validation loss {ref['val_loss']:.4f}")
    m = Model(W, cfg)
    passed = failed = 0

    def check(ok, what):
        nonlocal passed, failed
        passed, failed = passed + ok, failed + (not ok)
        print(("PASS " if ok else "FAIL ") + what)

    for pi, pr in enumerate(ref["prompts"]):
        ids = list(pr["text"].encode("utf-8"))
        check(ids == pr["ids"], f"prompt {pr['text']!r} bytes")
        # Prompt through the KV-cache path, then free-running greedy decoding.
        m.reset()
        for t in ids:
            lg = m.step(t)
        e = rel_err(lg, pr["last_logits"])
        check(e <= tol, f"{pr['text']!r} last-position logits, rel err {e:.2e}")
        if pi == 0:
            full = m.forward_full(ids)[-1]
            e2 = rel_err(full, lg)
            check(e2 <= 1e-5, f"{pr['text']!r} full-sequence forward vs KV cache, rel err {e2:.2e}")
        toks = []
        for _ in range(len(pr["greedy_tokens"])):
            t = int(np.argmax(lg))  # ties: lowest id, as torch.argmax
            toks.append(t)
            lg = m.step(t)
        same = toks == pr["greedy_tokens"]
        first = next((i for i, (a, b) in enumerate(zip(toks, pr["greedy_tokens"])) if a != b), None)
        why = "" if same else (f" (first difference at step {first}; reference min top-2 margin "
                               f"{pr['min_top2_margin']:.2e}: a near tie can flip legitimately)")
        check(same, f"{pr['text']!r} {len(toks)} greedy tokens: "
                     f"{bytes(toks).decode('utf-8', 'replace')!r}{why}")

    # Every step's logits for prompt 0, teacher-forced on the reference tokens so that one flipped
    # near-tie cannot cascade.
    sl = ref["step_logits"]
    pr = ref["prompts"][sl["prompt_index"]]
    m.reset()
    for t in pr["ids"]:
        lg = m.step(t)
    worst = 0.0
    for i, want in enumerate(sl["logits"]):
        worst = max(worst, rel_err(lg, want))
        if i + 1 < len(sl["logits"]):
            lg = m.step(pr["greedy_tokens"][i])
    check(worst <= tol, f"{pr['text']!r} logits at all {len(sl['logits'])} greedy steps, "
                        f"worst rel err {worst:.2e}")
    print("sample:", ref["sample"]["text"][:300].replace("\n", "\n        "))
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
