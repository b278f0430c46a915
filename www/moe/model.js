// The demo Mixture-of-Experts model: safetensors reading, the routing rule shared by every
// backend, and a float32 CPU reference of the forward pass with a KV cache (token by token).
// The math follows www/models/moe/config.json; tools/check_reference.py is its numpy twin.
// Plain ES module with no dependencies: it runs in the page and in Node.

/** Reads a safetensors header and checks the layout against the file's length. */
export function parseSafetensors(buffer, fileName = "model.safetensors") {
  const bytes = buffer instanceof ArrayBuffer ? buffer : buffer.buffer;
  const base = buffer instanceof ArrayBuffer ? 0 : buffer.byteOffset;
  const length = buffer.byteLength;
  const fail = (what) => { throw new TypeError(`${fileName}: ${what}`); };
  if (length < 8) fail(`${length} bytes, too short for a header`);
  const view = new DataView(bytes, base, length);
  const headerBytes = Number(view.getBigUint64(0, true));
  if (headerBytes > length - 8) fail(`header of ${headerBytes} bytes exceeds the file`);
  let header;
  try {
    header = JSON.parse(new TextDecoder().decode(new Uint8Array(bytes, base + 8, headerBytes)));
  } catch (e) {
    fail(`header is not JSON (${e.message})`);
  }
  const metadata = header.__metadata__ ?? {};
  delete header.__metadata__;
  const dataStart = 8 + headerBytes;
  const elementBytes = { F16: 2, BF16: 2, F32: 4, I32: 4, I64: 8, U8: 1, I8: 1 };
  const tensors = new Map();
  const spans = [];
  for (const [name, h] of Object.entries(header)) {
    const size = elementBytes[h.dtype];
    if (!size) fail(`tensor ${name}: unsupported dtype ${h.dtype}`);
    if (!Array.isArray(h.shape) || !h.shape.every((d) => Number.isInteger(d) && d >= 0)) {
      fail(`tensor ${name}: bad shape ${JSON.stringify(h.shape)}`);
    }
    const [begin, end] = h.data_offsets ?? [];
    const count = h.shape.reduce((a, b) => a * b, 1);
    if (!Number.isInteger(begin) || !Number.isInteger(end) || end - begin !== count * size) {
      fail(`tensor ${name}: offsets ${JSON.stringify(h.data_offsets)} do not hold shape ${JSON.stringify(h.shape)} of ${h.dtype}`);
    }
    if (dataStart + end > length) fail(`tensor ${name}: ends at ${dataStart + end}, file has ${length} bytes`);
    tensors.set(name, { name, dtype: h.dtype, shape: h.shape, byteOffset: base + dataStart + begin, byteLength: end - begin });
    spans.push([begin, end, name]);
  }
  spans.sort((a, b) => a[0] - b[0]);
  let pos = 0;
  for (const [begin, end, name] of spans) {
    if (begin !== pos) fail(`tensor ${name}: starts at ${begin}, expected ${pos} (overlap or gap)`);
    pos = end;
  }
  if (dataStart + pos !== length) fail(`${length} bytes, header accounts for ${dataStart + pos}`);
  return { buffer: bytes, tensors, metadata };
}

// float16 -> float32 is exact; a 65536-entry table makes it one lookup per element.
let halfTable = null;
function halfToFloatTable() {
  if (halfTable) return halfTable;
  halfTable = new Float32Array(65536);
  for (let h = 0; h < 65536; h++) {
    const sign = h & 0x8000 ? -1 : 1;
    const exponent = (h >> 10) & 0x1f;
    const mantissa = h & 0x3ff;
    let v;
    if (exponent === 0) v = mantissa * 2 ** -24; // subnormal
    else if (exponent === 31) v = mantissa ? NaN : Infinity;
    else v = (1 + mantissa / 1024) * 2 ** (exponent - 15);
    halfTable[h] = sign * v;
  }
  return halfTable;
}

/** The raw float16 bits of a tensor (a copy, so the caller may keep or transfer it). */
export function tensorHalfBits(file, name) {
  const t = file.tensors.get(name);
  if (!t) throw new TypeError(`tensor ${name} is not in the file`);
  if (t.dtype !== "F16") throw new TypeError(`tensor ${name}: dtype ${t.dtype}, expected F16`);
  const bits = new Uint16Array(t.byteLength / 2);
  new Uint8Array(bits.buffer).set(new Uint8Array(file.buffer, t.byteOffset, t.byteLength));
  return bits; // safetensors is little-endian, as are all WebAssembly/WebGPU hosts
}

/** A float16 tensor widened to float32. */
export function tensorFloat32(file, name) {
  const bits = tensorHalfBits(file, name);
  const table = halfToFloatTable();
  const out = new Float32Array(bits.length);
  for (let i = 0; i < bits.length; i++) out[i] = table[bits[i]];
  return out;
}

/** Tensor names and shapes the config promises; throws a TypeError on any difference. */
export function expectedTensors(config) {
  const { d_model: d, head_dim: hd, n_heads: H, n_kv_heads: Hkv, d_ff: ff, n_experts: E, vocab: V } = config;
  const want = { "embed.weight": [V, d], "norm.weight": [d], "lm_head.weight": [V, d] };
  for (let l = 0; l < config.n_layers; l++) {
    const p = `layers.${l}.`;
    Object.assign(want, {
      [p + "attn_norm.weight"]: [d], [p + "moe_norm.weight"]: [d],
      [p + "attn.wq.weight"]: [H * hd, d], [p + "attn.wk.weight"]: [Hkv * hd, d],
      [p + "attn.wv.weight"]: [Hkv * hd, d], [p + "attn.wo.weight"]: [d, H * hd],
      [p + "moe.router.weight"]: [E, d],
    });
    for (let e = 0; e < E; e++) {
      const q = `${p}moe.experts.${e}.`;
      Object.assign(want, { [q + "w1.weight"]: [ff, d], [q + "w3.weight"]: [ff, d], [q + "w2.weight"]: [d, ff] });
    }
  }
  return want;
}

export function checkTensors(file, config) {
  const want = expectedTensors(config);
  for (const [name, shape] of Object.entries(want)) {
    const t = file.tensors.get(name);
    if (!t) throw new TypeError(`tensor ${name} is missing`);
    if (t.shape.join(",") !== shape.join(",")) {
      throw new TypeError(`tensor ${name}: shape [${t.shape}], expected [${shape}]`);
    }
  }
  for (const name of file.tensors.keys()) {
    if (!(name in want)) throw new TypeError(`unexpected tensor ${name}`);
  }
}

/**
 * Top-k experts by router logit (ties: lower expert index) and their weights, the softmax over
 * the k selected logits. Returns [{ expert, weight }] in selection order.
 */
export function route(logits, topK) {
  const order = Array.from(logits.keys()).sort((a, b) => logits[b] - logits[a] || a - b);
  const top = order.slice(0, topK);
  const max = logits[top[0]];
  const exps = top.map((e) => Math.exp(logits[e] - max));
  const sum = exps.reduce((a, b) => a + b, 0);
  return top.map((expert, i) => ({ expert, weight: exps[i] / sum }));
}

/** Index of the largest value; ties go to the lowest index, as torch.argmax. */
export function argmax(values) {
  let best = 0;
  for (let i = 1; i < values.length; i++) if (values[i] > values[best]) best = i;
  return best;
}

/** RoPE angles for one position: cos and sin of pos * theta^(-2j/head_dim), j < head_dim/2. */
export function ropeAngles(config, pos) {
  const half = config.head_dim / 2;
  const cos = new Float32Array(half);
  const sin = new Float32Array(half);
  for (let j = 0; j < half; j++) {
    // Computed in float32 like the reference: inv_freq is float32, then pos * inv_freq.
    const invFreq = Math.fround(1 / Math.fround(Math.pow(config.rope_theta, Math.fround((2 * j) / config.head_dim))));
    const a = Math.fround(pos * invFreq);
    cos[j] = Math.cos(a);
    sin[j] = Math.sin(a);
  }
  return { cos, sin };
}

// y[o] = sum_i W[o, i] x[i] for W [out, in] stored row-major.
function matvec(W, x, out) {
  const n = x.length;
  const y = new Float32Array(out);
  for (let o = 0; o < out; o++) {
    let s = 0;
    const row = o * n;
    for (let i = 0; i < n; i++) s += W[row + i] * x[i];
    y[o] = s;
  }
  return y;
}

function rmsnorm(x, w, eps) {
  let ss = 0;
  for (let i = 0; i < x.length; i++) ss += x[i] * x[i];
  const scale = 1 / Math.sqrt(ss / x.length + eps);
  const y = new Float32Array(x.length);
  for (let i = 0; i < x.length; i++) y[i] = x[i] * scale * w[i];
  return y;
}

function applyRope(v, heads, hd, cos, sin) {
  const half = hd / 2;
  for (let h = 0; h < heads; h++) {
    const o = h * hd;
    for (let j = 0; j < half; j++) {
      const a = v[o + j];
      const b = v[o + j + half];
      v[o + j] = a * cos[j] - b * sin[j];
      v[o + j + half] = b * cos[j] + a * sin[j];
    }
  }
}

/** Float32 CPU forward pass with a KV cache; the correctness reference for the WebNN path. */
export class CpuModel {
  constructor(config, file) {
    checkTensors(file, config);
    this.config = config;
    this.W = {};
    for (const name of file.tensors.keys()) this.W[name] = tensorFloat32(file, name);
    this.reset();
  }

  reset() {
    const c = this.config;
    const kvWidth = c.n_kv_heads * c.head_dim;
    this.pos = 0;
    this.keys = Array.from({ length: c.n_layers }, () => new Float32Array(c.max_seq * kvWidth));
    this.values = Array.from({ length: c.n_layers }, () => new Float32Array(c.max_seq * kvWidth));
    this.lastRoutes = [];
  }

  expert(l, e, h) {
    const c = this.config;
    const q = `layers.${l}.moe.experts.${e}.`;
    const gate = matvec(this.W[q + "w1.weight"], h, c.d_ff);
    const up = matvec(this.W[q + "w3.weight"], h, c.d_ff);
    for (let i = 0; i < c.d_ff; i++) gate[i] = (gate[i] / (1 + Math.exp(-gate[i]))) * up[i];
    return matvec(this.W[q + "w2.weight"], gate, c.d_model);
  }

  /** Feeds one token at position this.pos; returns its logits (Float32Array [vocab]). */
  step(token) {
    const c = this.config;
    const W = this.W;
    const { d_model: d, n_heads: H, n_kv_heads: Hkv, head_dim: hd } = c;
    if (this.pos >= c.max_seq) throw new RangeError(`sequence longer than max_seq ${c.max_seq}`);
    const rep = H / Hkv;
    const kvWidth = Hkv * hd;
    const { cos, sin } = ropeAngles(c, this.pos);
    const x = W["embed.weight"].slice(token * d, (token + 1) * d);
    this.lastRoutes = [];
    for (let l = 0; l < c.n_layers; l++) {
      const p = `layers.${l}.`;
      const h = rmsnorm(x, W[p + "attn_norm.weight"], c.norm_eps);
      const q = matvec(W[p + "attn.wq.weight"], h, H * hd);
      const k = matvec(W[p + "attn.wk.weight"], h, kvWidth);
      const v = matvec(W[p + "attn.wv.weight"], h, kvWidth);
      applyRope(q, H, hd, cos, sin);
      applyRope(k, Hkv, hd, cos, sin);
      this.keys[l].set(k, this.pos * kvWidth);
      this.values[l].set(v, this.pos * kvWidth);
      const T = this.pos + 1;
      const attn = new Float32Array(H * hd);
      const scores = new Float32Array(T);
      const scale = 1 / Math.sqrt(hd);
      for (let i = 0; i < H; i++) {
        const g = Math.floor(i / rep); // GQA: query head i reads kv head i / rep
        let max = -Infinity;
        for (let t = 0; t < T; t++) {
          let s = 0;
          for (let j = 0; j < hd; j++) s += this.keys[l][t * kvWidth + g * hd + j] * q[i * hd + j];
          scores[t] = s * scale;
          if (scores[t] > max) max = scores[t];
        }
        let sum = 0;
        for (let t = 0; t < T; t++) sum += (scores[t] = Math.exp(scores[t] - max));
        for (let t = 0; t < T; t++) {
          const w = scores[t] / sum;
          for (let j = 0; j < hd; j++) attn[i * hd + j] += w * this.values[l][t * kvWidth + g * hd + j];
        }
      }
      const o = matvec(W[p + "attn.wo.weight"], attn, d);
      for (let i = 0; i < d; i++) x[i] += o[i];
      const m = rmsnorm(x, W[p + "moe_norm.weight"], c.norm_eps);
      const routes = route(matvec(W[p + "moe.router.weight"], m, c.n_experts), c.top_k);
      this.lastRoutes.push(routes);
      for (const { expert, weight } of routes) {
        const y = this.expert(l, expert, m);
        for (let i = 0; i < d; i++) x[i] += weight * y[i];
      }
    }
    this.pos += 1;
    return matvec(W["lm_head.weight"], rmsnorm(x, W["norm.weight"], c.norm_eps), c.vocab);
  }
}

/** Largest |a - b| over the largest |ref|: the reference.json tolerance measure. */
export function relativeError(a, ref) {
  let diff = 0;
  let scale = 0;
  for (let i = 0; i < ref.length; i++) {
    diff = Math.max(diff, Math.abs(a[i] - ref[i]));
    scale = Math.max(scale, Math.abs(ref[i]));
  }
  return diff / scale;
}

/** Bytes -> text, as the tokenizer says: UTF-8, invalid sequences replaced. */
export function decodeBytes(ids) {
  return new TextDecoder("utf-8").decode(new Uint8Array(ids));
}

/**
 * Checks a model against reference.json: per-step logits of the step_logits prompt (teacher
 * forced on the reference tokens) and free-running greedy tokens for every prompt. The model
 * exposes async reset() and step(token) -> logits. Returns a list of { ok, what } results.
 */
export async function checkAgainstReference(model, reference, { tolerance = 1e-3, tokens = 64, onToken } = {}) {
  const results = [];
  const check = (ok, what) => results.push({ ok, what });
  for (const [pi, prompt] of reference.prompts.entries()) {
    await model.reset();
    let logits;
    for (const t of prompt.ids) logits = await model.step(t);
    const e = relativeError(logits, prompt.last_logits);
    check(e <= tolerance, `${JSON.stringify(prompt.text)} last-position logits, rel err ${e.toExponential(2)}`);
    const count = Math.min(tokens, prompt.greedy_tokens.length);
    const out = [];
    for (let i = 0; i < count; i++) {
      const t = argmax(logits);
      out.push(t);
      onToken?.(pi, t, out);
      if (i + 1 < count) logits = await model.step(t);
    }
    const want = prompt.greedy_tokens.slice(0, count);
    const first = out.findIndex((t, i) => t !== want[i]);
    check(first < 0, `${JSON.stringify(prompt.text)} ${count} greedy tokens: ${JSON.stringify(decodeBytes(out))}` +
      (first < 0 ? "" : ` (first difference at step ${first}; reference min top-2 margin ${prompt.min_top2_margin.toExponential(2)})`));
  }
  const sl = reference.step_logits;
  const prompt = reference.prompts[sl.prompt_index];
  await model.reset();
  let logits;
  for (const t of prompt.ids) logits = await model.step(t);
  const steps = Math.min(tokens, sl.logits.length);
  let worst = 0;
  for (let i = 0; i < steps; i++) {
    worst = Math.max(worst, relativeError(logits, sl.logits[i]));
    if (i + 1 < steps) logits = await model.step(prompt.greedy_tokens[i]);
  }
  check(worst <= tolerance, `${JSON.stringify(prompt.text)} logits at all ${steps} greedy steps, worst rel err ${worst.toExponential(2)}`);
  return results;
}
