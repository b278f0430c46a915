#!/usr/bin/env python3
"""Train the small Mixtral-style byte-level MoE used by the in-browser token loop demo,
then export float16 weights + config + a float32 reference for the browser to check against.

    python3 tools/train_moe.py --minutes 6 --out www/models/moe     # CUDA, bf16 autocast
    python3 tools/train_moe.py --smoke                              # tiny config on CPU, few steps
    python3 tools/check_reference.py www/models/moe                 # independent numpy re-check

Architecture (the exact math is also written out, without torch, in tools/check_reference.py):
  tokens      bytes 0..255, no BOS/EOS; embed.weight [256, d_model]
  per layer   x += attn(rmsnorm(x));  x += moe(rmsnorm(x))
  rmsnorm     y = x / sqrt(mean(x^2) + eps) * weight      (float32, eps 1e-5)
  attention   q = wq h, k = wk h, v = wv h; heads are contiguous slices of head_dim;
              RoPE on q,k ("rotate half", see rope_tables); GQA: query head i uses kv head
              i // (n_heads / n_kv_heads); causal softmax(q.k / sqrt(head_dim)); out = wo concat(heads)
  moe         router logits r = router h (no bias); experts = the 2 largest r (ties: lower index);
              weights = softmax over those 2 logits (== softmax over all 8, top-2, renormalised);
              out = sum_i w_i * w2_e(silu(w1_e h) * w3_e h)
  head        logits = lm_head(rmsnorm(x)), untied from embed (one plain matmul in the browser)
All Linear weights are stored [out, in] (y = x @ W^T), no biases anywhere.
"""
import argparse
import contextlib
import json
import math
import os
import struct
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
PROMPTS = ["ROMEO:", "In the beginning", "The king"]
GREEDY_TOKENS = 64


@dataclass
class Config:
    vocab: int = 256
    d_model: int = 256
    n_layers: int = 4
    n_heads: int = 8
    n_kv_heads: int = 2
    head_dim: int = 32
    d_ff: int = 512
    n_experts: int = 8
    top_k: int = 2
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    max_seq: int = 256  # context length trained on (RoPE itself works past it, the model doesn't)


# Tiny config for --smoke: exercises every code path on CPU in seconds.
SMOKE = dict(d_model=64, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=16, d_ff=128, max_seq=128)


# ----------------------------------------------------------------------------------------------
# Model


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        xf = x.float()  # always normalise in float32, also under autocast
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (y * self.weight.float()).to(x.dtype)


def rope_tables(seq_len, head_dim, theta, device):
    """cos/sin tables [seq_len, head_dim] for the "rotate half" (GPT-NeoX / HF Llama) convention.

    inv_freq[j] = theta ** (-2j / head_dim), j = 0 .. head_dim/2-1; angle[p, j] = p * inv_freq[j]
    (positions p start at 0). Pairs are (x[j], x[j + head_dim/2]), NOT interleaved (x[2j], x[2j+1]):
      out[j]            = x[j] * cos(angle[p, j]) - x[j + half] * sin(angle[p, j])
      out[j + half]     = x[j + half] * cos(angle[p, j]) + x[j] * sin(angle[p, j])
    """
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32, device=device) / head_dim))
    pos = torch.arange(seq_len, dtype=torch.float32, device=device)
    ang = torch.outer(pos, inv_freq)
    ang = torch.cat([ang, ang], dim=-1)
    return ang.cos(), ang.sin()


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


def apply_rope(x, cos, sin):  # x [B, H, T, hd]; cos/sin [T, hd] broadcast
    return x * cos + rotate_half(x) * sin


class Attention(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.c = c
        self.wq = nn.Linear(c.d_model, c.n_heads * c.head_dim, bias=False)
        self.wk = nn.Linear(c.d_model, c.n_kv_heads * c.head_dim, bias=False)
        self.wv = nn.Linear(c.d_model, c.n_kv_heads * c.head_dim, bias=False)
        self.wo = nn.Linear(c.n_heads * c.head_dim, c.d_model, bias=False)

    def forward(self, x, cos, sin):
        c = self.c
        B, T, _ = x.shape
        q = self.wq(x).view(B, T, c.n_heads, c.head_dim).transpose(1, 2)
        k = self.wk(x).view(B, T, c.n_kv_heads, c.head_dim).transpose(1, 2)
        v = self.wv(x).view(B, T, c.n_kv_heads, c.head_dim).transpose(1, 2)
        # cos/sin are float32: cast back so SDPA sees one dtype under autocast.
        q = apply_rope(q, cos, sin).to(v.dtype)
        k = apply_rope(k, cos, sin).to(v.dtype)
        # GQA: kv head j serves query heads j*rep .. j*rep+rep-1 (HF repeat_kv convention).
        rep = c.n_heads // c.n_kv_heads
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # scale 1/sqrt(head_dim)
        y = y.transpose(1, 2).reshape(B, T, c.n_heads * c.head_dim)
        return self.wo(y)


class Expert(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.w1 = nn.Linear(c.d_model, c.d_ff, bias=False)  # gate
        self.w3 = nn.Linear(c.d_model, c.d_ff, bias=False)  # up
        self.w2 = nn.Linear(c.d_ff, c.d_model, bias=False)  # down

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class MoE(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.c = c
        self.router = nn.Linear(c.d_model, c.n_experts, bias=False)
        self.experts = nn.ModuleList(Expert(c) for _ in range(c.n_experts))

    def forward(self, x):
        c = self.c
        B, T, D = x.shape
        xf = x.reshape(-1, D)
        N = xf.shape[0]
        probs = self.router(xf).float().softmax(-1)  # [N, E]
        # Mixtral: softmax over all experts, keep top-k, renormalise. Identical to softmax over
        # the k selected logits (the common denominator cancels).
        topw, topi = probs.topk(c.top_k, dim=-1)  # [N, k]
        topw = topw / topw.sum(-1, keepdim=True)
        out = torch.zeros(N, D, dtype=torch.float32, device=x.device)
        for e, expert in enumerate(self.experts):
            tok, slot = torch.where(topi == e)  # tokens routed to e, and in which top-k slot
            if tok.numel() == 0:
                continue
            y = expert(xf[tok]).float() * topw[tok, slot, None]
            out.index_add_(0, tok, y)
        # Switch-Transformer load-balancing loss: E * sum_e (fraction of routed slots to e) *
        # (mean router probability of e); equals 1 when routing is perfectly uniform.
        frac = F.one_hot(topi, c.n_experts).float().sum(dim=(0, 1)) / (N * c.top_k)
        aux = c.n_experts * (frac * probs.mean(0)).sum()
        return out.view(B, T, D).to(x.dtype), aux


class Block(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.attn_norm = RMSNorm(c.d_model, c.norm_eps)
        self.attn = Attention(c)
        self.moe_norm = RMSNorm(c.d_model, c.norm_eps)
        self.moe = MoE(c)

    def forward(self, x, cos, sin):
        x = x + self.attn(self.attn_norm(x), cos, sin)
        m, aux = self.moe(self.moe_norm(x))
        return x + m, aux


class MoETransformer(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.c = c
        self.embed = nn.Embedding(c.vocab, c.d_model)
        self.layers = nn.ModuleList(Block(c) for _ in range(c.n_layers))
        self.norm = RMSNorm(c.d_model, c.norm_eps)
        self.lm_head = nn.Linear(c.d_model, c.vocab, bias=False)
        self.apply(self._init)
        # GPT-2 style: shrink the residual-branch output projections with depth.
        for name, p in self.named_parameters():
            if name.endswith("attn.wo.weight") or name.endswith(".w2.weight"):
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * c.n_layers))

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)

    def forward(self, idx):
        c = self.c
        T = idx.shape[1]
        cos, sin = rope_tables(T, c.head_dim, c.rope_theta, idx.device)
        x = self.embed(idx)  # float32 residual stream, also under autocast
        aux = 0.0
        for layer in self.layers:
            x, a = layer(x, cos, sin)
            aux = aux + a
        logits = self.lm_head(self.norm(x))
        return logits, aux / c.n_layers


# ----------------------------------------------------------------------------------------------
# Parameter accounting


def param_breakdown(model):
    groups = {"embed": 0, "lm_head": 0, "attention": 0, "norms": 0, "routers": 0, "experts": 0}
    for name, p in model.named_parameters():
        if name.startswith("embed."):
            g = "embed"
        elif name.startswith("lm_head."):
            g = "lm_head"
        elif ".attn." in name:
            g = "attention"
        elif ".experts." in name:
            g = "experts"
        elif ".router." in name:
            g = "routers"
        else:
            g = "norms"
        groups[g] += p.numel()
    total = sum(groups.values())
    return groups, total


def print_breakdown(model, c: Config):
    groups, total = param_breakdown(model)
    print(f"parameters: {total:,} total")
    for g, n in groups.items():
        print(f"  {g:10s} {n:>12,}  {100 * n / total:5.1f}%")
    per_expert = 3 * c.d_model * c.d_ff
    active = total - groups["experts"] + c.n_layers * c.top_k * per_expert
    print(f"  active per token (top-{c.top_k} of {c.n_experts} experts): {active:,}")
    print(f"  float16 weights: {2 * total / 1e6:.1f} MB")
    return groups, total


# ----------------------------------------------------------------------------------------------
# safetensors (written by hand: no dependency on the safetensors package)


def write_safetensors(path, tensors, metadata):
    """tensors: ordered dict name -> float16 CPU tensor. Offsets are relative to the byte
    buffer that follows the header, contiguous, in insertion order."""
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        assert t.dtype == torch.float16
        b = t.contiguous().numpy().astype("<f2", copy=False).tobytes()
        header[name] = {"dtype": "F16", "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    hb = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hb += b" " * (-len(hb) % 8)  # pad with spaces (allowed by the format) so data starts 8-aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for b in blobs:
            f.write(b)
    return 8 + len(hb) + off


def read_safetensors(path):
    with open(path, "rb") as f:
        buf = f.read()
    (n,) = struct.unpack("<Q", buf[:8])
    header = json.loads(buf[8 : 8 + n])
    header.pop("__metadata__", None)
    out = {}
    for name, h in header.items():
        assert h["dtype"] == "F16"
        s, e = h["data_offsets"]
        a = np.frombuffer(buf, dtype="<f2", count=(e - s) // 2, offset=8 + n + s)
        out[name] = torch.from_numpy(a.reshape(h["shape"]).copy())
    return out


# ----------------------------------------------------------------------------------------------
# Data


def load_corpus(corpus_dir):
    """Each text is split 90/10 by position (so validation holds both Shakespeare and the Bible,
    not just whichever file came last); the train parts and the val parts are concatenated."""
    train, val = [], []
    for name in ("shakespeare.txt", "kjv.txt"):
        with open(os.path.join(corpus_dir, name), "rb") as f:
            data = np.frombuffer(f.read(), dtype=np.uint8)
        cut = int(len(data) * 0.9)
        train.append(data[:cut])
        val.append(data[cut:])
    return torch.from_numpy(np.concatenate(train)), torch.from_numpy(np.concatenate(val))


def get_batch(data, batch, seq, gen):
    """Random seq+1 byte windows; inputs are the first seq bytes, targets the last seq."""
    starts = torch.randint(0, len(data) - seq - 1, (batch,), device=data.device, generator=gen)
    w = data[starts[:, None] + torch.arange(seq + 1, device=data.device)].long()
    return w[:, :-1], w[:, 1:]


def autocast(device, dtype):
    """bf16/fp16 autocast on CUDA; plain float32 on CPU or when dtype is None."""
    if device == "cuda" and dtype is not None:
        return torch.autocast("cuda", dtype=dtype)
    return contextlib.nullcontext()


@torch.no_grad()
def evaluate(model, data, args, device, amp_dtype):
    gen = torch.Generator(device=device).manual_seed(1234)  # same windows every time: comparable
    total = 0.0
    for _ in range(args.eval_batches):
        x, y = get_batch(data, args.batch, args.seq, gen)
        with autocast(device, amp_dtype):
            logits, _ = model(x)
        total += F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1)).item()
    return total / args.eval_batches


# ----------------------------------------------------------------------------------------------
# Training


def train(model, train_data, val_data, args, device, amp_dtype):
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]  # norm weights
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": args.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=args.lr, betas=(0.9, 0.95), fused=(device == "cuda"),
    )
    fwd = torch.compile(model) if args.compile else model
    gen = torch.Generator(device=device).manual_seed(args.seed)
    budget = args.minutes * 60.0
    t0 = time.time()
    step, best_val, best_state, best_step = 0, float("inf"), None, 0
    run_loss = run_aux = 0.0
    run_n = 0
    while True:
        # Progress is whichever of the step and time budgets is further along, so the cosine
        # schedule ends at its floor exactly when training stops.
        elapsed = time.time() - t0
        progress = elapsed / budget if budget > 0 else 0.0
        if args.steps:
            progress = max(progress, step / args.steps)
        done = progress >= 1.0
        if step % args.eval_every == 0 or done:
            val = evaluate(fwd, val_data, args, device, amp_dtype)
            tr = run_loss / max(run_n, 1)
            print(f"step {step:6d}  train {tr:.4f}  aux {run_aux / max(run_n, 1):.3f}  val {val:.4f}  "
                  f"({val / math.log(2):.3f} bits/byte)  lr {opt.param_groups[0]['lr']:.2e}  "
                  f"{elapsed:6.1f}s  {step * args.batch * args.seq / max(elapsed, 1e-9) / 1e3:.0f}k tok/s",
                  flush=True)
            run_loss = run_aux = 0.0
            run_n = 0
            if val < best_val:  # keep the best weights: the corpus is small enough to overfit
                best_val, best_step = val, step
                best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        if done:
            break
        warm = min(1.0, (step + 1) / args.warmup)
        cos = 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0)))
        lr = args.lr * warm * (args.min_lr_ratio + (1.0 - args.min_lr_ratio) * cos)
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = get_batch(train_data, args.batch, args.seq, gen)
        with autocast(device, amp_dtype):
            logits, aux = fwd(x)
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1))
        (loss + args.aux_coef * aux).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        run_loss += loss.item()
        run_aux += float(aux)
        run_n += 1
        step += 1
    tokens = step * args.batch * args.seq
    print(f"trained {step} steps, {tokens / 1e6:.1f}M tokens in {time.time() - t0:.0f}s; "
          f"best val {best_val:.4f} at step {best_step}")
    model.load_state_dict(best_state)
    return {"steps": step, "tokens": tokens, "best_step": best_step, "val_loss_training": best_val}


# ----------------------------------------------------------------------------------------------
# Reference (float16 weights evaluated in float32 on CPU: no autocast, no TF32)


@torch.no_grad()
def last_logits(model, ids):
    logits, _ = model(torch.tensor([ids], dtype=torch.long))
    return logits[0, -1].float()


@torch.no_grad()
def greedy(model, prompt_ids, n):
    """Full recompute each step. Ties in argmax go to the lowest token id (torch and numpy agree)."""
    ids, steps = list(prompt_ids), []
    for _ in range(n):
        lg = last_logits(model, ids)
        steps.append(lg)
        ids.append(int(lg.argmax()))
    return ids[len(prompt_ids):], steps


@torch.no_grad()
def sample(model, prompt_ids, n, temperature, seed):
    g = torch.Generator().manual_seed(seed)
    ids = list(prompt_ids)
    for _ in range(n):
        p = (last_logits(model, ids) / temperature).softmax(-1)
        ids.append(int(torch.multinomial(p, 1, generator=g)))
    return ids


def to_text(ids):
    return bytes(ids).decode("utf-8", errors="replace")


def floats(t):
    return [float("%.8g" % v) for v in t.tolist()]  # 8 significant digits: far below tolerance


def export(model, c: Config, out_dir, val_loss, train_info, args):
    os.makedirs(out_dir, exist_ok=True)
    st_path = os.path.join(out_dir, "model.safetensors")
    sd16 = {k: v.detach().to("cpu", torch.float16).contiguous() for k, v in model.state_dict().items()}
    size = write_safetensors(st_path, sd16, {"format": "pt", "dtype": "float16", "model": "webnn-wgpu-moe"})
    print(f"wrote {st_path}: {size:,} bytes ({size / 1e6:.1f} MB), {len(sd16)} tensors")

    # Reload from the file itself, so the reference is computed from exactly the bytes shipped.
    ref = MoETransformer(c).eval()
    loaded = read_safetensors(st_path)
    assert set(loaded) == set(sd16)
    ref.load_state_dict({k: v.float() for k, v in loaded.items()})

    prompts = []
    for i, text in enumerate(PROMPTS):
        ids = list(text.encode("utf-8"))
        assert len(ids) + GREEDY_TOKENS <= c.max_seq
        toks, steps = greedy(ref, ids, GREEDY_TOKENS)
        margins = [float(s.topk(2).values[0] - s.topk(2).values[1]) for s in steps]
        prompts.append({
            "text": text,
            "ids": ids,
            "last_logits": floats(steps[0]),  # == logits of the last prompt position
            "greedy_tokens": toks,
            "greedy_text": to_text(toks),
            # smallest gap between the two best logits over the 64 steps: if tiny, an fp32
            # implementation may legitimately pick the other token there
            "min_top2_margin": min(margins),
        })
        if i == 0:
            step_logits = [floats(s) for s in steps]
        print(f"greedy {text!r} -> {to_text(toks)!r}")

    sample_ids = sample(ref, list(PROMPTS[0].encode()), c.max_seq - len(PROMPTS[0]), 0.8, 0)
    sample_text = to_text(sample_ids)

    cfg = {
        "architecture": "mixtral-style sparse MoE decoder (pre-norm), byte-level",
        "vocab": c.vocab, "d_model": c.d_model, "n_layers": c.n_layers, "n_heads": c.n_heads,
        "n_kv_heads": c.n_kv_heads, "head_dim": c.head_dim, "d_ff": c.d_ff,
        "n_experts": c.n_experts, "top_k": c.top_k, "rope_theta": c.rope_theta,
        "norm_eps": c.norm_eps, "max_seq": c.max_seq,
        "tokenizer": "bytes: token id = UTF-8 byte value 0..255; no BOS/EOS; decode bytes as UTF-8",
        "tie_embeddings": False,
        "bias": False,
        "weights": {"file": "model.safetensors", "dtype": "float16",
                    "layout": "Linear weights [out, in]: y = x @ W^T; embed.weight [vocab, d_model]"},
        "tensors": ["embed.weight",
                    "layers.{l}.attn_norm.weight", "layers.{l}.attn.wq.weight",
                    "layers.{l}.attn.wk.weight", "layers.{l}.attn.wv.weight",
                    "layers.{l}.attn.wo.weight", "layers.{l}.moe_norm.weight",
                    "layers.{l}.moe.router.weight", "layers.{l}.moe.experts.{e}.w1.weight",
                    "layers.{l}.moe.experts.{e}.w2.weight", "layers.{l}.moe.experts.{e}.w3.weight",
                    "norm.weight", "lm_head.weight"],
        "block": "x = x + attn(attn_norm(x)); x = x + moe(moe_norm(x)); logits = lm_head(norm(x))",
        "norm": "rmsnorm: x / sqrt(mean(x^2) + norm_eps) * weight, in float32",
        "attention": ("q,k,v = wq h, wk h, wv h; head i = elements [i*head_dim, (i+1)*head_dim); "
                      "rope on q and k; query head i uses kv head i // (n_heads / n_kv_heads); "
                      "causal; scores scaled by 1/sqrt(head_dim); output heads concatenated in "
                      "order, then wo"),
        "rope": ("rotate_half (GPT-NeoX / HF Llama): inv_freq[j] = rope_theta^(-2j/head_dim), "
                 "j < head_dim/2; a = pos * inv_freq[j], pos from 0; "
                 "out[j] = x[j] cos a - x[j+head_dim/2] sin a; "
                 "out[j+head_dim/2] = x[j+head_dim/2] cos a + x[j] sin a"),
        "routing": ("logits = router h (no bias); pick the top_k largest logits (ties: lower expert "
                    "index); weights = softmax over the top_k selected logits (identical to "
                    "softmax over all experts then renormalising the top_k); "
                    "moe(h) = sum_i weight_i * expert_i(h)"),
        "expert": "w2(silu(w1 h) * w3 h); silu(x) = x / (1 + exp(-x)); w1 gate, w3 up, w2 down",
        "training": {**train_info, "val_loss": val_loss, "minutes": args.minutes,
                     "batch": args.batch, "seq": args.seq, "lr": args.lr,
                     "aux_coef": args.aux_coef, "smoke": args.smoke},
    }
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)

    reference = {
        "description": ("float16 weights from model.safetensors evaluated in float32 (CPU torch, "
                        "full recompute per step, no autocast/TF32)"),
        "tolerance": {"logits": "max |a - b| <= 1e-3 * max |reference logit| per position"},
        "val_loss": val_loss,
        "val_bits_per_byte": val_loss / math.log(2),
        "prompts": prompts,
        "step_logits": {
            "prompt_index": 0,
            "note": ("step i = logits that produced greedy_tokens[i] of prompt 0, i.e. after the "
                     "prompt plus greedy_tokens[:i]; step 0 == last_logits"),
            "logits": step_logits,
        },
        "sample": {"prompt": PROMPTS[0], "temperature": 0.8, "seed": 0,
                   "method": "torch.multinomial with torch.Generator().manual_seed(0)",
                   "text": sample_text},
    }
    with open(os.path.join(out_dir, "reference.json"), "w") as f:
        json.dump(reference, f, separators=(",", ":"))
    print(f"wrote {out_dir}/config.json, {out_dir}/reference.json")
    print("---- sample (temperature 0.8) ----")
    print(sample_text)
    print("----------------------------------")


# ----------------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=6.0, help="training time budget")
    ap.add_argument("--steps", type=int, default=0, help="step budget (0 = time budget only)")
    ap.add_argument("--out", default=None, help="output dir (default www/models/moe; smoke: out/moe-smoke)")
    ap.add_argument("--corpus", default=os.path.join(HERE, "corpus"))
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--lr", type=float, default=1.5e-3)
    ap.add_argument("--min-lr-ratio", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--aux-coef", type=float, default=0.01)
    ap.add_argument("--eval-every", type=int, default=250)
    ap.add_argument("--eval-batches", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dtype", choices=["bf16", "fp16"], default="bf16")
    ap.add_argument("--compile", action="store_true", help="torch.compile the training forward")
    ap.add_argument("--smoke", action="store_true", help="tiny config, CPU, a few steps")
    args = ap.parse_args()

    if args.smoke:
        c = Config(**SMOKE)
        device = "cpu"
        args.batch, args.seq, args.eval_batches, args.eval_every = 8, 64, 2, 10
        args.steps = args.steps or 20
        args.warmup = 5
        args.out = args.out or "out/moe-smoke"
    else:
        c = Config()
        device = "cuda" if torch.cuda.is_available() else "cpu"
        args.out = args.out or "www/models/moe"
        if device == "cpu":
            print("WARNING: no CUDA device; training on CPU will be very slow")
    args.seq = min(args.seq, c.max_seq)
    amp_dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float16
    if device == "cuda" and amp_dtype == torch.float16:
        # fp16 autocast would need a GradScaler; bf16 does not, and H100/H200 support it.
        print("note: fp16 autocast without GradScaler; prefer --dtype bf16")
    torch.manual_seed(args.seed)
    torch.set_float32_matmul_precision("high")  # TF32 for the few float32 matmuls in training
    print(f"config: {asdict(c)}")
    print(f"device: {device}" + (f" ({torch.cuda.get_device_name()})" if device == "cuda" else ""))

    model = MoETransformer(c).to(device)
    groups, total = print_breakdown(model, c)
    if not args.smoke:
        assert groups["experts"] >= 0.8 * total, "experts must hold >= 80% of the weights"
        assert 20e6 <= 2 * total <= 60e6, "float16 file must be 20-60 MB"

    train_data, val_data = load_corpus(args.corpus)
    print(f"corpus: {len(train_data):,} train bytes, {len(val_data):,} validation bytes")
    train_data, val_data = train_data.to(device), val_data.to(device)

    info = train(model, train_data, val_data, args, device, amp_dtype)
    # Round to the shipped float16 values, then record the validation loss of exactly those
    # weights in float32 (TF32 off), using the same fixed validation windows as during training.
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.half().float())
    torch.set_float32_matmul_precision("highest")
    val_loss = evaluate(model, val_data, args, device, None)
    print(f"validation loss, float16 weights in float32: {val_loss:.4f} "
          f"({val_loss / math.log(2):.3f} bits/byte)")

    model.to("cpu").eval()
    export(model, c, args.out, val_loss, info, args)


if __name__ == "__main__":
    main()
