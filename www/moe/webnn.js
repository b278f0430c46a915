// The demo MoE model on WebNN graphs, token by token with a KV cache held in MLTensors.
//
// Graphs: per layer an attention graph (rmsnorm, q/k/v, RoPE, GQA attention over the cache,
// wo, residual) and a router graph (rmsnorm, router logits; read back: top-2 and their softmax
// run in JS, model.js route()); one graph per expert that adds its weighted SwiGLU output to the
// residual stream, x + weight * w2(silu(w1 h) * w3 h), so the two selected experts run one after
// the other in the same order as the CPU reference sums them; a final norm + lm_head graph.
// Weights: the float16 file is widened to float32 constants on load (SwiftShader, the test GPU,
// has no shader-f16, and float32 keeps the results within the reference tolerance), transposed to
// [in, out] so that every projection is a plain matmul.
//
// Memory modes for the expert graphs (the other graphs stay resident):
// - "resident": every graph resident, no budget.
// - "lru": the context's memoryBudget = non-expert bytes + fraction x expert bytes; the runtime
//   evicts the least recently dispatched graphs (the EXTENSIONS.md budget).
// - "explicit": the page manages it: swapIn() before an expert's use, and after each layer
//   swapOut() of the least recently used experts until the context is within the same budget
//   (USE-CASES.md case 2's load / predict / unload loop; fraction 0 unloads after every use).
// - "rebuild": the standard API only: each expert use builds its graph from JS ArrayBuffers,
//   dispatches it and destroys it.
import { checkTensors, tensorFloat32, route, ropeAngles } from "./model.js";

export const MODES = ["resident", "lru", "explicit", "rebuild"];
const MASKED = -1e9; // additive attention mask for cache rows after the current position

const desc = (shape) => ({ dataType: "float32", shape });

// W [out, in] row-major -> [in, out] so that y = x @ Wt.
function transposed(W, out, inner) {
  const t = new Float32Array(W.length);
  for (let o = 0; o < out; o++) for (let i = 0; i < inner; i++) t[i * out + o] = W[o * inner + i];
  return t;
}

class Graphs {
  constructor(builder) {
    this.b = builder;
  }
  scalar(v) {
    return this.b.constant(desc([1]), new Float32Array([v]));
  }
  weight(shape, data) {
    return this.b.constant(desc(shape), data);
  }
  rmsnorm(x, w, eps) {
    const b = this.b;
    const meanSquare = b.reduceMean(b.mul(x, x), { axes: [1], keepDimensions: true });
    return b.mul(b.div(x, b.sqrt(b.add(meanSquare, this.scalar(eps)))), w);
  }
  // rotate_half RoPE on t [n, head_dim] with cos, sin [1, head_dim / 2].
  rope(t, cos, sin) {
    const b = this.b;
    const [x1, x2] = b.split(t, 2, { axis: 1 });
    return b.concat([b.sub(b.mul(x1, cos), b.mul(x2, sin)), b.add(b.mul(x2, cos), b.mul(x1, sin))], 1);
  }
}

export class WebnnMoe {
  /**
   * options: { ml, config, file (parseSafetensors result), mode, budgetFraction (0..1),
   * onProgress(done, total) }.
   */
  static async create(options) {
    const m = new WebnnMoe(options);
    await m.init();
    return m;
  }

  constructor({ ml = globalThis.navigator?.ml, MLGraphBuilder = globalThis.MLGraphBuilder, config, file,
    mode = "resident", budgetFraction = 1, onProgress }) {
    if (!ml) throw new TypeError("WebNN is not available (navigator.ml is undefined)");
    if (!MODES.includes(mode)) throw new TypeError(`mode must be one of ${MODES.join(", ")}`);
    checkTensors(file, config);
    Object.assign(this, { ml, MLGraphBuilder, file, mode, budgetFraction, onProgress });
    this.c = config;
    this.pos = 0;
    this.builds = 0; // expert graph builds (rebuild mode)
    this.expertUses = 0;
    this.expertMisses = 0; // uses that found the expert's graph off the GPU
    this.sharedMisses = 0; // dispatches that found a non-expert graph off the GPU (lru evicts any graph)
    this.explicitSwapIns = 0;
    this.explicitSwapOuts = 0;
    this.lastRoutes = [];
    this.clock = 0;
    const E = config.n_experts;
    this.experts = Array.from({ length: config.n_layers }, () =>
      Array.from({ length: E }, () => ({ graph: null, hits: 0, lastUsed: 0 })));
  }

  get extensions() {
    return typeof this.context?.memoryInfo === "function";
  }

  tensorOf(name) {
    return tensorFloat32(this.file, name);
  }

  linear(name) {
    const t = this.file.tensors.get(name);
    const [out, inner] = t.shape;
    return { data: transposed(this.tensorOf(name), out, inner), shape: [inner, out] };
  }

  expertWeights(l, e) {
    const q = `layers.${l}.moe.experts.${e}.`;
    return { w1: this.linear(q + "w1.weight"), w3: this.linear(q + "w3.weight"), w2: this.linear(q + "w2.weight") };
  }

  async newContext(budget) {
    return budget === undefined ? this.ml.createContext() : this.ml.createContext({ memoryBudget: budget });
  }

  async init() {
    const c = this.c;
    const count = c.n_layers * c.n_experts;
    const total = c.n_layers * 2 + 1 + count;
    let done = 0;
    const progress = () => this.onProgress?.(++done, total);
    const budgetOf = () => Math.round(this.nonExpertBytes + this.budgetFraction * this.expertGraphBytes * count);

    // Bytes are measured, not guessed: they include the runtime's intermediate pool. lru needs
    // them before its context exists (memoryBudget is a context option), so a probe context
    // builds the non-expert graphs and one expert first.
    this.context = await this.newContext();
    if (this.mode === "lru" && this.extensions) {
      await this.buildShared(() => {});
      this.nonExpertBytes = this.context.memoryInfo().deviceBytes;
      const probe = await this.buildExpert(0, 0, this.expertWeights(0, 0));
      this.expertGraphBytes = this.context.memoryInfo().deviceBytes - this.nonExpertBytes;
      probe.destroy();
      this.context.destroy();
      this.budgetBytes = budgetOf();
      this.context = await this.newContext(this.budgetBytes);
    }
    await this.buildShared(progress);
    if (this.extensions) this.nonExpertBytes ??= this.context.memoryInfo().deviceBytes;

    for (let l = 0; l < c.n_layers; l++) {
      for (let e = 0; e < c.n_experts; e++) {
        const slot = this.experts[l][e];
        const weights = this.expertWeights(l, e);
        if (this.mode === "rebuild") {
          // The standard-API baseline keeps the weights in JS and copies them in at every build.
          slot.weights = weights;
          if (this.extensions && this.expertGraphBytes === undefined) {
            const probe = await this.buildExpert(l, e, weights);
            this.expertGraphBytes = this.context.memoryInfo().deviceBytes - this.nonExpertBytes;
            probe.destroy();
          }
        } else {
          const before = this.extensions ? this.context.memoryInfo().deviceBytes : 0;
          slot.graph = await this.buildExpert(l, e, weights);
          if (this.extensions) this.expertGraphBytes ??= this.context.memoryInfo().deviceBytes - before;
        }
        if (this.extensions) this.budgetBytes ??= budgetOf();
        if (this.mode === "explicit" && this.extensions) await this.fitBudget(new Set());
        progress();
      }
    }
    await this.reset();
  }

  async buildShared(progress) {
    const c = this.c;
    const ctx = this.context;
    const { d_model: d, n_heads: H, n_kv_heads: Hkv, head_dim: hd, max_seq: S } = c;
    const kvWidth = Hkv * hd;
    const rep = H / Hkv;
    const tensor = (shape, flags) => ctx.createTensor({ ...desc(shape), ...flags });
    const rw = { readable: true, writable: true };
    this.t = {
      x: [await tensor([1, d], rw), await tensor([1, d], rw)],
      h: await tensor([1, d], {}),
      routerLogits: await tensor([1, c.n_experts], { readable: true }),
      expertWeight: [await tensor([1, 1], { writable: true }), await tensor([1, 1], { writable: true })],
      cos: await tensor([1, hd / 2], { writable: true }),
      sin: await tensor([1, hd / 2], { writable: true }),
      mask: await tensor([1, S], { writable: true }),
      onehot: await tensor([S, 1], { writable: true }),
      logits: await tensor([1, c.vocab], { readable: true }),
      keys: [],
      values: [],
    };
    for (let l = 0; l < c.n_layers; l++) {
      this.t.keys.push([await tensor([S, kvWidth], { writable: true }), await tensor([S, kvWidth], { writable: true })]);
      this.t.values.push([await tensor([S, kvWidth], { writable: true }), await tensor([S, kvWidth], { writable: true })]);
    }

    this.attention = [];
    this.router = [];
    for (let l = 0; l < c.n_layers; l++) {
      const p = `layers.${l}.`;
      let g = new Graphs(new this.MLGraphBuilder(ctx));
      let b = g.b;
      const x = b.input("x", desc([1, d]));
      const cos = b.input("cos", desc([1, hd / 2]));
      const sin = b.input("sin", desc([1, hd / 2]));
      const mask = b.input("mask", desc([1, S]));
      const onehot = b.input("onehot", desc([S, 1]));
      const kIn = b.input("keys", desc([S, kvWidth]));
      const vIn = b.input("values", desc([S, kvWidth]));
      const h = g.rmsnorm(x, g.weight([1, d], this.tensorOf(p + "attn_norm.weight")), c.norm_eps);
      const proj = (name) => {
        const w = this.linear(p + name);
        return b.matmul(h, g.weight(w.shape, w.data));
      };
      const q = g.rope(b.reshape(proj("attn.wq.weight"), [H, hd]), cos, sin);
      const k = b.reshape(g.rope(b.reshape(proj("attn.wk.weight"), [Hkv, hd]), cos, sin), [1, kvWidth]);
      const v = proj("attn.wv.weight");
      // The cache row at this position takes the new k / v; every other row is kept (exact: 0/1).
      const keep = b.sub(g.scalar(1), onehot);
      const keys = b.add(b.mul(kIn, keep), b.mul(onehot, k));
      const values = b.add(b.mul(vIn, keep), b.mul(onehot, v));
      // GQA: query head i = kv head i / rep, so [H, hd] -> [Hkv, rep, hd] against [Hkv, hd, S].
      const q3 = b.reshape(q, [Hkv, rep, hd]);
      const k3 = b.transpose(b.reshape(keys, [S, Hkv, hd]), { permutation: [1, 2, 0] });
      const v3 = b.transpose(b.reshape(values, [S, Hkv, hd]), { permutation: [1, 0, 2] });
      const scores = b.add(b.mul(b.matmul(q3, k3), g.scalar(1 / Math.sqrt(hd))), mask);
      const heads = b.reshape(b.matmul(b.softmax(scores, 2), v3), [1, H * hd]);
      const wo = this.linear(p + "attn.wo.weight");
      const xOut = b.add(x, b.matmul(heads, g.weight(wo.shape, wo.data)));
      this.attention.push(await b.build({ x: xOut, keys, values }));
      progress();

      g = new Graphs(new this.MLGraphBuilder(ctx));
      b = g.b;
      const xr = b.input("x", desc([1, d]));
      const hr = g.rmsnorm(xr, g.weight([1, d], this.tensorOf(p + "moe_norm.weight")), c.norm_eps);
      const router = this.linear(p + "moe.router.weight");
      const logits = b.matmul(hr, g.weight(router.shape, router.data));
      this.router.push(await b.build({ h: hr, logits }));
      progress();
    }

    const g = new Graphs(new this.MLGraphBuilder(ctx));
    const b = g.b;
    const x = b.input("x", desc([1, d]));
    const head = this.linear("lm_head.weight");
    const normed = g.rmsnorm(x, g.weight([1, d], this.tensorOf("norm.weight")), c.norm_eps);
    this.final = await b.build({ logits: b.matmul(normed, g.weight(head.shape, head.data)) });
    progress();
  }

  /** x + weight * w2(silu(w1 h) * w3 h); silu(a) = a / (1 + exp(-a)). */
  async buildExpert(l, e, w) {
    const c = this.c;
    const g = new Graphs(new this.MLGraphBuilder(this.context));
    const b = g.b;
    const x = b.input("x", desc([1, c.d_model]));
    const h = b.input("h", desc([1, c.d_model]));
    const weight = b.input("weight", desc([1, 1]));
    const gate = b.matmul(h, g.weight(w.w1.shape, w.w1.data));
    const up = b.matmul(h, g.weight(w.w3.shape, w.w3.data));
    const silu = b.div(gate, b.add(g.scalar(1), b.exp(b.neg(gate))));
    const down = b.matmul(b.mul(silu, up), g.weight(w.w2.shape, w.w2.data));
    return b.build({ x: b.add(x, b.mul(weight, down)) });
  }

  /** Forgets the sequence: position 0, cleared caches. */
  async reset() {
    const c = this.c;
    const zeros = new Float32Array(c.max_seq * c.n_kv_heads * c.head_dim);
    for (let l = 0; l < c.n_layers; l++) {
      for (const t of [...this.t.keys[l], ...this.t.values[l]]) this.context.writeTensor(t, zeros);
    }
    this.pos = 0;
  }

  /** Experts swapped out, least recently used first, until the context is within the budget. */
  async fitBudget(inUse) {
    const candidates = this.experts.flat()
      .filter((s) => s.graph && s.graph.residency === "device" && !inUse.has(s))
      .sort((a, b) => a.lastUsed - b.lastUsed);
    for (const s of candidates) {
      if (this.context.memoryInfo().deviceBytes <= this.budgetBytes) break;
      await s.graph.swapOut();
      this.explicitSwapOuts++;
    }
  }

  /** Feeds one token at this.pos; resolves to its logits (Float32Array [vocab]). */
  async step(token) {
    const c = this.c;
    const ctx = this.context;
    const { d_model: d, max_seq: S } = c;
    if (this.pos >= S) throw new RangeError(`sequence longer than max_seq ${S}`);
    const T = this.t;
    const { cos, sin } = ropeAngles(c, this.pos);
    const mask = new Float32Array(S).fill(MASKED);
    mask.fill(0, 0, this.pos + 1);
    const onehot = new Float32Array(S);
    onehot[this.pos] = 1;
    ctx.writeTensor(T.cos, cos);
    ctx.writeTensor(T.sin, sin);
    ctx.writeTensor(T.mask, mask);
    ctx.writeTensor(T.onehot, onehot);
    const embed = this.embed ??= this.tensorOf("embed.weight");
    let cur = 0; // T.x[cur] holds the residual stream
    ctx.writeTensor(T.x[cur], embed.subarray(token * d, (token + 1) * d));
    const toDestroy = [];
    this.lastRoutes = [];
    const now = this.pos % 2;
    for (let l = 0; l < c.n_layers; l++) {
      this.countMiss(this.attention[l]);
      ctx.dispatch(this.attention[l], {
        x: T.x[cur], cos: T.cos, sin: T.sin, mask: T.mask, onehot: T.onehot,
        keys: T.keys[l][now], values: T.values[l][now],
      }, { x: T.x[1 - cur], keys: T.keys[l][1 - now], values: T.values[l][1 - now] });
      cur = 1 - cur;
      this.countMiss(this.router[l]);
      ctx.dispatch(this.router[l], { x: T.x[cur] }, { h: T.h, logits: T.routerLogits });
      const logits = new Float32Array(await ctx.readTensor(T.routerLogits));
      while (toDestroy.length) toDestroy.pop().destroy(); // the previous layer's work is done
      const routes = route(logits, c.top_k);
      this.lastRoutes.push(routes);
      const inUse = new Set();
      for (const [i, { expert, weight }] of routes.entries()) {
        const slot = this.experts[l][expert];
        slot.hits++;
        slot.lastUsed = ++this.clock;
        inUse.add(slot);
        let graph = slot.graph;
        this.expertUses++;
        if (this.extensions && graph && graph.residency !== "device") this.expertMisses++;
        if (this.mode === "rebuild") {
          graph = await this.buildExpert(l, expert, slot.weights);
          this.builds++;
          toDestroy.push(graph);
        } else if (this.mode === "explicit" && this.extensions && graph.residency !== "device") {
          await graph.swapIn();
          this.explicitSwapIns++;
        }
        ctx.writeTensor(T.expertWeight[i], new Float32Array([weight]));
        ctx.dispatch(graph, { x: T.x[cur], h: T.h, weight: T.expertWeight[i] }, { x: T.x[1 - cur] });
        cur = 1 - cur;
      }
      if (this.mode === "explicit" && this.extensions) await this.fitBudget(inUse);
    }
    this.countMiss(this.final);
    ctx.dispatch(this.final, { x: T.x[cur] }, { logits: T.logits });
    const out = new Float32Array(await ctx.readTensor(T.logits));
    while (toDestroy.length) toDestroy.pop().destroy();
    this.pos += 1;
    return out;
  }

  countMiss(graph) {
    if (this.extensions && graph.residency !== "device") this.sharedMisses++;
  }

  /** What the page shows: per-expert residency and hits, memory and swap counters. */
  stats() {
    const info = this.extensions ? this.context.memoryInfo() : null;
    const residency = (s) => {
      if (this.mode === "rebuild") return "js";
      return s.graph?.residency ?? "device";
    };
    return {
      mode: this.mode,
      experts: this.experts.map((row) => row.map((s) => ({ residency: residency(s), hits: s.hits }))),
      deviceBytes: info?.deviceBytes ?? null,
      hostBytes: info?.hostBytes ?? null,
      budgetBytes: this.budgetBytes ?? null,
      runtimeBudgetBytes: info?.budgetBytes ?? null,
      nonExpertBytes: this.nonExpertBytes ?? null,
      expertGraphBytes: this.expertGraphBytes ?? null,
      swapIns: info?.swapIns ?? 0,
      swapOuts: info?.swapOuts ?? 0,
      bytesUploaded: info?.bytesUploaded ?? 0,
      builds: this.builds,
      expertUses: this.expertUses,
      expertMisses: this.expertMisses,
      sharedMisses: this.sharedMisses,
      explicitSwapIns: this.explicitSwapIns,
      explicitSwapOuts: this.explicitSwapOuts,
    };
  }

  destroy() {
    this.context?.destroy?.();
  }
}
