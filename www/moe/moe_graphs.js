// The demo MoE model on WebNN graphs, token by token with a KV cache held in MLTensors.
//
// Graphs: per layer an attention graph (the first layer's starts from the token's embedding row,
// gathered on the GPU; rmsnorm, q/k/v, RoPE, GQA attention over the cache, wo, residual) that goes on with the router (rmsnorm,
// router logits; read back: top-2 and their softmax run in JS, model.js route()); one graph per expert
// that adds its weighted SwiGLU output to the residual stream, x + weight * w2(silu(w1 h) * w3 h),
// so the two selected experts run one after the other in the same order as the CPU reference
// sums them; a final norm + lm_head graph. examples/moe/model.rs builds the same graphs natively.
// Linear weights stay [out, in] as stored: gemm(h, W, {bTranspose: true}).
//
// Weights: with the extensions, every constant comes from the weight loader:
// context.openWeights(source, {floatType: "float32"}) (source: a FileSystemFileHandle, e.g. the
// OPFS copy, or a File) and MLWeightFile.constantTensor(name), which streams the float16 file to
// the GPU widened to float32 (SwiftShader, the test GPU, has no shader-f16, and float32 keeps the
// results within the reference tolerance). Expert graphs then hold only file-backed constants, so
// an evicted expert goes to the "disk" tier and streams back from the file, unless the context
// keeps host copies (hostMemoryBudget, "lru-host"). Without the extensions (and in the rebuild
// baseline) the constants are JS Float32Arrays from the bytes.
//
// Memory modes for the expert graphs (the other graphs, which every token runs, have the "high"
// evictionPriority, so a budget evicts experts first):
// - "resident": every graph resident, no budget.
// - "fused": every weight resident, and the routing on the GPU: one graph a token runs every
//   layer's attention, picks the top-2 experts (argMax, then where() to take the first pick out),
//   their weights (softmax over the two logits) and gathers the chosen experts' weights from
//   per-layer stacks [n_experts, out, in] built from the file's bytes (routedExperts()). A token
//   is one dispatch and one read back, where the other modes read every layer's router logits
//   back to choose which expert graphs to dispatch: the way to decode when all experts fit. The
//   graph also picks the next token (argMax of the logits), which the next token's dispatch
//   takes as its input on the GPU, so decodeGreedy() dispatches steps ahead of their reads.
// - "lru": the context's memoryBudget = non-expert bytes + fraction x expert bytes; the runtime
//   evicts the least recently dispatched graphs (docs/EXTENSIONS.md's budget). Evicted experts go to
//   the "disk" tier: a miss re-reads the expert from the file.
// - "lru-host": "lru" with a hostMemoryBudget that has room for a float32 copy of every weight
//   (non-expert + all expert bytes): the streamed constants keep host copies in GPU-copyable
//   memory, so evicted experts go to the "host" tier and a miss is one GPU copy, without reading
//   the file (memoryInfo().bytesStreamedFromDisk stays at its value after loading).
// - "explicit": the page manages it: swapIn() before an expert's use, and after each layer
//   swapOut() of the least recently used experts until the context is within the same budget
//   (USE-CASES.md case 2's load / predict / unload loop; fraction 0 unloads after every use).
// - "rebuild": the standard API only: each expert use builds its graph from JS ArrayBuffers
//   (float32 copies of every expert, read once and held: the native example's "rebuild-host"),
//   dispatches it and destroys it.
import { checkTensors, tensorFloat32, route, ropeAngles, parseSafetensors } from "./model.js";

export const MODES = ["resident", "fused", "lru", "lru-host", "explicit", "rebuild"];
const MASKED = -1e9; // additive attention mask for cache rows after the current position

const desc = (shape) => ({ dataType: "float32", shape });

class Graphs {
  /** weight(name) resolves to the named constant operand of this builder. */
  constructor(builder, weight) {
    this.b = builder;
    this.weight = weight;
  }
  scalar(v) {
    return this.b.constant(desc([1]), new Float32Array([v]));
  }
  /** x @ W^T with W [out, in] as stored. */
  async linear(x, name) {
    return this.b.gemm(x, await this.weight(this.b, name), { bTranspose: true });
  }
  // x / sqrt(mean(x^2) + eps) * w, the mean of squares as reduceSumSquare / n (one kernel fewer
  // than squaring first).
  async rmsnorm(x, name, eps) {
    const b = this.b;
    const sumSquare = b.reduceSumSquare(x, { axes: [1], keepDimensions: true });
    const meanSquare = b.mul(sumSquare, this.scalar(1 / x.shape[1]));
    return b.mul(b.div(x, b.sqrt(b.add(meanSquare, this.scalar(eps)))), await this.weight(b, name));
  }
  // rotate_half RoPE on t [n, head_dim] with cos = [cos, cos] and sin = [-sin, sin], each
  // [1, head_dim] (see ropeInputs): t * cos + swapHalves(t) * sin, the halves swapped by a matmul
  // with a permutation matrix, which takes the products and the sum as its epilogue: one kernel,
  // where reverse and a fused product kernel took two (exact: each output is one input times 1
  // plus zeros).
  rope(t, cos, sin) {
    const b = this.b;
    const hd = t.shape[1];
    if (!this.halfSwap) {
      // P with (t P)[j] = t[(j + hd/2) % hd], one per builder.
      const p = new Float32Array(hd * hd);
      for (let j = 0; j < hd; j++) p[((j + hd / 2) % hd) * hd + j] = 1;
      this.halfSwap = b.constant(desc([hd, hd]), p);
    }
    return b.add(b.mul(t, cos), b.mul(b.matmul(t, this.halfSwap), sin));
  }
}

/** The rope() inputs at `pos`: [cos, cos] and [-sin, sin] of ropeAngles. */
function ropeInputs(config, pos) {
  const { cos, sin } = ropeAngles(config, pos);
  const half = cos.length;
  const full = { cos: new Float32Array(2 * half), sin: new Float32Array(2 * half) };
  full.cos.set(cos);
  full.cos.set(cos, half);
  full.sin.set(sin.map((v) => -v));
  full.sin.set(sin, half);
  return full;
}

/** Tensor names and shapes of an MLWeightFile as the { tensors: Map } checkTensors() reads. */
function listing(weightFile) {
  return { tensors: new Map(weightFile.tensors.map((t) => [t.name, t])) };
}

export class WebnnMoe {
  /**
   * options: { ml, MLGraphBuilder, config, mode, budgetFraction (0..1), onProgress(done, total),
   * the weights: source (a FileSystemFileHandle, File or Blob of model.safetensors, a promise of
   * one, or a function resolving to a fetch() Response: a download that openWeights streams to
   * the GPU and into OPFS in one pass) and/or file (its parseSafetensors result; read from source
   * when needed and absent), and cacheKey: where set, every graph is loaded from the context's
   * graph cache under `${cacheKey}/<graph>` when it is there, else built and saved there }.
   */
  static async create(options) {
    const m = new WebnnMoe(options);
    await m.init();
    return m;
  }

  constructor({ ml = globalThis.navigator?.ml, MLGraphBuilder = globalThis.MLGraphBuilder, config, source, file,
    mode = "resident", budgetFraction = 1, onProgress, cacheKey }) {
    if (!ml) throw new TypeError("WebNN is not available (navigator.ml is undefined)");
    if (!MODES.includes(mode)) throw new TypeError(`mode must be one of ${MODES.join(", ")}`);
    if (!source && !file) throw new TypeError("no weights: pass source (a file handle, File or Blob) or file");
    if (file) checkTensors(file, config);
    Object.assign(this, { ml, MLGraphBuilder, source, file, mode, budgetFraction, onProgress, cacheKey });
    this.cacheLoads = 0; // graphs loaded from the graph cache
    this.cacheSaves = 0;
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
    this.weightFile = null; // the MLWeightFile of the current context
    const E = config.n_experts;
    this.experts = Array.from({ length: config.n_layers }, () =>
      Array.from({ length: E }, () => ({ graph: null, hits: 0, lastUsed: 0 })));
  }

  get extensions() {
    return typeof this.context?.memoryInfo === "function";
  }

  /** Whether constants come from the weight loader: the extensions, a source, and not rebuild. */
  get streamed() {
    return this.mode !== "rebuild" && Boolean(this.source) && typeof this.context?.openWeights === "function";
  }

  /** The weights as JS arrays (rebuild, or WebNN without the extensions): read once. */
  async jsFile() {
    if (!this.file) {
      const source = typeof this.source === "function" ? await (await this.source()).blob() : await this.source;
      const blob = typeof source.getFile === "function" ? await source.getFile() : source;
      this.file = parseSafetensors(await blob.arrayBuffer(), blob.name ?? "model.safetensors");
      checkTensors(this.file, this.c);
    }
    return this.file;
  }

  /**
   * The context's MLWeightFile, opened at the first weight a build needs (graphs loaded from the
   * cache need none). A download is opened once; later contexts open its OPFS copy.
   */
  async openedWeights() {
    if (!this.weightFile) {
      if (typeof this.source === "function") {
        this.weightFile = await this.context.openWeights(await this.source(), { floatType: "float32" });
        this.source = this.weightFile.cached;
      } else {
        this.weightFile = await this.context.openWeights(await this.source, { floatType: "float32" });
      }
      checkTensors(listing(this.weightFile), this.c);
    }
    return this.weightFile;
  }

  /** The named weight as a constant operand of `builder`: streamed from the file, or JS bytes. */
  async weight(builder, name) {
    if (this.streamed) return builder.constant(await (await this.openedWeights()).constantTensor(name));
    const t = this.file.tensors.get(name);
    return builder.constant(desc(t.shape), tensorFloat32(this.file, name));
  }

  graphs() {
    return new Graphs(new this.MLGraphBuilder(this.context), (b, name) => this.weight(b, name));
  }

  /**
   * The context (with `budget` as its memoryBudget and `hostBudget` as its hostMemoryBudget) and,
   * when streamed, its MLWeightFile.
   */
  async newContext(budget, hostBudget) {
    const options = {};
    if (budget !== undefined) options.memoryBudget = budget;
    if (hostBudget !== undefined) options.hostMemoryBudget = hostBudget;
    this.context = await this.ml.createContext(options);
    this.weightFile = null;
    if (!this.streamed) await this.jsFile();
  }

  /** Whether graphs go through the graph cache: a key, the context's cache, and not rebuild. */
  get cached() {
    return Boolean(this.cacheKey) && this.mode !== "rebuild" && typeof this.context?.loadGraph === "function";
  }

  /**
   * The graph `name`: loaded from the graph cache, or built by `build()` and saved to the cache
   * for the next visit. A loaded graph starts in the "disk" tier; it is made resident (as a build
   * leaves it) when `resident`, else its first dispatch streams it in, as an evicted one's does.
   */
  async graph(name, build, { resident = true } = {}) {
    if (this.cached) {
      try {
        const graph = await this.context.loadGraph(`${this.cacheKey}/${name}`);
        if (resident) await graph.swapIn();
        this.cacheLoads++;
        return graph;
      } catch (e) {
        // Not saved yet, or saved by another version or adapter: built and saved again.
        if (e.name !== "NotFoundError" && e.name !== "DataError") throw e;
      }
    }
    const graph = await build();
    if (this.cached) {
      await this.context.saveGraph(`${this.cacheKey}/${name}`, graph);
      this.cacheSaves++;
    }
    return graph;
  }

  async init() {
    const c = this.c;
    const count = c.n_layers * c.n_experts;
    const total = this.mode === "fused" ? 2 : c.n_layers + 1 + count;
    let done = 0;
    const progress = () => this.onProgress?.(++done, total);
    const budgetOf = () => Math.round(this.nonExpertBytes + this.budgetFraction * this.expertGraphBytes * count);

    // Bytes are measured, not guessed: they include the runtime's intermediate pool. lru and
    // lru-host need them before their context exists (the budgets are context options), so a
    // probe context builds the non-expert graphs and one expert first.
    await this.newContext();
    if ((this.mode === "lru" || this.mode === "lru-host") && this.extensions) {
      await this.buildShared(() => {});
      this.nonExpertBytes = this.context.memoryInfo().deviceBytes;
      const probe = await this.buildExpert(0, 0);
      this.expertGraphBytes = this.context.memoryInfo().deviceBytes - this.nonExpertBytes;
      probe.destroy();
      this.context.destroy();
      this.budgetBytes = budgetOf();
      // Room for a float32 copy of every weight: the device bytes include the intermediates too.
      if (this.mode === "lru-host") this.hostBudgetBytes = this.nonExpertBytes + this.expertGraphBytes * count;
      await this.newContext(this.budgetBytes, this.hostBudgetBytes);
    }
    await this.buildShared(progress);
    if (this.extensions) this.nonExpertBytes ??= this.context.memoryInfo().deviceBytes;

    for (let l = 0; l < c.n_layers && this.mode !== "fused"; l++) {
      for (let e = 0; e < c.n_experts; e++) {
        const slot = this.experts[l][e];
        if (this.mode === "rebuild") {
          // The standard-API baseline keeps the weights in JS and copies them in at every build.
          const q = `layers.${l}.moe.experts.${e}.`;
          slot.weights = new Map(["w1", "w3", "w2"].map((w) => [q + w + ".weight", tensorFloat32(this.file, q + w + ".weight")]));
          if (this.extensions && this.expertGraphBytes === undefined) {
            const probe = await this.buildExpert(l, e, slot.weights);
            this.expertGraphBytes = this.context.memoryInfo().deviceBytes - this.nonExpertBytes;
            probe.destroy();
          }
        } else {
          const before = this.extensions ? this.context.memoryInfo().deviceBytes : 0;
          // Under lru most experts live off the GPU: a loaded one stays in the "disk" tier.
          // (lru-host streams each once at load, as a build does, to keep its host copy.)
          const resident = this.mode !== "lru" || this.expertGraphBytes === undefined;
          slot.graph = await this.buildExpert(l, e, undefined, { resident });
          if (this.extensions) this.expertGraphBytes ??= this.context.memoryInfo().deviceBytes - before;
        }
        if (this.extensions) this.budgetBytes ??= budgetOf();
        if (this.mode === "explicit" && this.extensions) await this.fitBudget(new Set());
        progress();
      }
    }
    // Every weight has been read once; what a miss reads from the file counts from here.
    this.loadedBytesStreamed = this.extensions ? this.context.memoryInfo().bytesStreamedFromDisk : 0;
    await this.reset();
  }

  async buildShared(progress) {
    const c = this.c;
    const ctx = this.context;
    const { d_model: d, n_kv_heads: Hkv, head_dim: hd, max_seq: S } = c;
    const kvWidth = Hkv * hd;
    const tensor = (shape, flags, dataType = "float32") => ctx.createTensor({ dataType, shape, ...flags });
    const rw = { readable: true, writable: true };
    this.t = {
      token: await tensor([1], { writable: true }, "int32"),
      x: [await tensor([1, d], rw), await tensor([1, d], rw)],
      h: await tensor([1, d], {}),
      routerLogits: await tensor([1, c.n_experts], { readable: true }),
      expertWeight: [await tensor([1, 1], { writable: true }), await tensor([1, 1], { writable: true })],
      cos: await tensor([1, hd], { writable: true }),
      sin: await tensor([1, hd], { writable: true }),
      mask: await tensor([1, S], { writable: true }),
      // 1 at the position (the cache entry written) and its complement.
      onehot: await tensor([1, S], { writable: true }),
      keep: await tensor([1, S], { writable: true }),
      logits: await tensor([1, c.vocab], { readable: true }),
      // The fused mode's output: the logits, the chosen experts of every layer, the next token.
      out: this.mode === "fused" ? await tensor([1, c.vocab + c.n_layers * c.top_k + 1], { readable: true }) : null,
      // The fused mode's next token (argMax of the logits), one step's output and the next one's
      // input, in turn.
      next: this.mode === "fused" ? [await tensor([1], {}, "int32"), await tensor([1], {}, "int32")] : null,
      keys: [],
      values: [],
    };
    // The caches are laid out as the attention's matmuls read them: keys [kvWidth, S], values
    // [Hkv, S, hd].
    for (let l = 0; l < c.n_layers; l++) {
      this.t.keys.push([await tensor([kvWidth, S], { writable: true }), await tensor([kvWidth, S], { writable: true })]);
      this.t.values.push([await tensor([Hkv, S, hd], { writable: true }), await tensor([Hkv, S, hd], { writable: true })]);
    }

    // Per layer one graph: attention, then the router's norm and logits (a dispatch fewer a layer
    // than two graphs: a dispatch costs about 50 µs of wgpu CPU time on the H200).
    this.attention = [];
    for (let l = 0; l < c.n_layers; l++) {
      if (this.mode === "fused") break;
      this.attention.push(await this.graph(`attention.${l}`, async () => {
        const g = this.graphs();
        const b = g.b;
        const ins = this.stepInputs(b, [l]);
        // The first layer's graph starts from the token's embedding row, gathered on the GPU (a
        // dispatch fewer a token than a graph of its own).
        const x = l === 0 ? await this.embedding(g, ins.token) : b.input("x", desc([1, d]));
        const { xOut, keys, values, h, logits } = await this.attentionBlock(g, l, x, ins, ins.keys[l], ins.values[l]);
        return b.build({ x: xOut, keys, values, h, logits });
      }));
      progress();
    }
    if (this.mode === "fused") {
      this.token = await this.graph("decode", () => this.buildTokenGraph());
      progress();
    }

    this.final = this.mode === "fused" ? null : await this.graph("final", async () => {
      const g = this.graphs();
      const b = g.b;
      return b.build({ logits: await this.lmHead(g, b.input("x", desc([1, d]))) });
    });
    // Every token runs these: under a memoryBudget the runtime evicts experts before them.
    for (const graph of [...this.attention, this.final ?? this.token]) {
      if ("evictionPriority" in graph) graph.evictionPriority = "high";
    }
    progress();
  }

  /**
   * The inputs a token's step reads, on builder `b`: the token, the RoPE and mask rows, and the
   * key and value caches of `layers` (named keys/values for one layer, keys.<l>/values.<l> for
   * several).
   */
  stepInputs(b, layers) {
    const { n_kv_heads: Hkv, head_dim: hd, max_seq: S } = this.c;
    const name = (what, l) => (layers.length === 1 ? what : `${what}.${l}`);
    const ins = {
      token: layers[0] === 0 ? b.input("token", { dataType: "int32", shape: [1] }) : null,
      cos: b.input("cos", desc([1, hd])),
      sin: b.input("sin", desc([1, hd])),
      mask: b.input("mask", desc([1, S])),
      onehot: b.input("onehot", desc([1, S])),
      keep: b.input("keep", desc([1, S])),
      keys: [],
      values: [],
    };
    for (const l of layers) {
      ins.keys[l] = b.input(name("keys", l), desc([Hkv * hd, S]));
      ins.values[l] = b.input(name("values", l), desc([Hkv, S, hd]));
    }
    return ins;
  }

  /** The token's embedding row [1, d_model], gathered on the GPU. */
  async embedding(g, token) {
    return g.b.gather(await this.weight(g.b, "embed.weight"), token, { axis: 0 });
  }

  /**
   * Layer l's attention on the residual stream x, then the router's norm and logits: the new
   * residual xOut, the caches with this position's entry, h (the normed input of the experts) and
   * the router logits [1, n_experts].
   */
  async attentionBlock(g, l, x, ins, kIn, vIn) {
    const c = this.c;
    const b = g.b;
    const { n_heads: H, n_kv_heads: Hkv, head_dim: hd, max_seq: S } = c;
    const kvWidth = Hkv * hd;
    const rep = H / Hkv;
    const { cos, sin, mask, onehot, keep } = ins;
    const p = `layers.${l}.`;
    const h = await g.rmsnorm(x, p + "attn_norm.weight", c.norm_eps);
    const q = g.rope(b.reshape(await g.linear(h, p + "attn.wq.weight"), [H, hd]), cos, sin);
    const k = b.reshape(g.rope(b.reshape(await g.linear(h, p + "attn.wk.weight"), [Hkv, hd]), cos, sin), [kvWidth, 1]);
    const v = b.reshape(await g.linear(h, p + "attn.wv.weight"), [Hkv, 1, hd]);
    // The cache entry at this position takes the new k / v; every other entry is kept (exact: 0/1).
    const keys = b.add(b.mul(kIn, keep), b.mul(k, onehot));
    const values = b.add(b.mul(vIn, b.reshape(keep, [1, S, 1])), b.mul(v, b.reshape(onehot, [1, S, 1])));
    // GQA: query head i = kv head i / rep, so [H, hd] -> [Hkv, rep, hd] against [Hkv, hd, S].
    const q3 = b.reshape(q, [Hkv, rep, hd]);
    const k3 = b.reshape(keys, [Hkv, hd, S]);
    const scores = b.add(b.mul(b.matmul(q3, k3), g.scalar(1 / Math.sqrt(hd))), mask);
    const heads = b.reshape(b.matmul(b.softmax(scores, 2), values), [1, H * hd]);
    const xOut = b.add(x, await g.linear(heads, p + "attn.wo.weight"));
    const hr = await g.rmsnorm(xOut, p + "moe_norm.weight", c.norm_eps);
    const logits = await g.linear(hr, p + "moe.router.weight");
    return { xOut, keys, values, h: hr, logits };
  }

  /** The final norm and the vocabulary logits [1, vocab] of the residual stream x. */
  async lmHead(g, x) {
    return g.linear(await g.rmsnorm(x, "norm.weight", this.c.norm_eps), "lm_head.weight");
  }

  /**
   * Layer l's experts as the router picks them, on the GPU (the fused mode): the top_k logits by
   * argMax, each taken out of the next pick by `where` (ties: argMax's choice, the lowest index
   * here), their softmax as the weights, and each chosen expert's weights gathered from the
   * layer's stacks [n_experts, out, in] and applied as the expert graphs apply theirs, in pick
   * order: x + weight_i * w2_i(silu(w1_i h) * w3_i h). Returns the new x and the chosen indices
   * [top_k] (int32).
   */
  async routedExperts(g, l, x, h, logits) {
    const c = this.c;
    const b = g.b;
    const E = c.n_experts;
    const k = c.top_k;
    const iota = b.constant({ dataType: "int32", shape: [1, E] }, Int32Array.from({ length: E }, (_, e) => e));
    const excluded = b.constant(desc([1]), new Float32Array([-Infinity]));
    const picks = [];
    let rest = logits;
    for (let i = 0; i < k; i++) {
      const pick = b.argMax(rest, 1); // [1] int32
      picks.push(pick);
      if (i + 1 < k) rest = b.where(b.equal(iota, b.reshape(pick, [1, 1])), excluded, rest);
    }
    const chosen = k === 1 ? picks[0] : b.concat(picks, 0); // [k]
    const weights = b.softmax(b.gather(logits, chosen, { axis: 1 }), 1); // [1, k]
    const stacks = Object.fromEntries(["w1", "w3", "w2"].map((w) => [w, this.expertStack(b, l, w)]));
    // An expert's weight [out, in], gathered: gemm(h, W, {bTranspose: true}) as linear() applies it.
    const linear = (input, w, pick) => {
      const stack = stacks[w];
      const weight = b.reshape(b.gather(stack, pick, { axis: 0 }), stack.shape.slice(1));
      return b.gemm(input, weight, { bTranspose: true });
    };
    for (let i = 0; i < k; i++) {
      const gate = linear(h, "w1", picks[i]);
      const up = linear(h, "w3", picks[i]);
      const down = linear(b.mul(b.mul(gate, b.sigmoid(gate)), up), "w2", picks[i]);
      x = b.add(x, b.mul(b.slice(weights, [0, i], [1, 1]), down));
    }
    return { x, chosen };
  }

  /** Layer l's expert weights `w` (w1, w3 or w2) of every expert, stacked: [n_experts, out, in]. */
  expertStack(b, l, w) {
    const c = this.c;
    const names = Array.from({ length: c.n_experts }, (_, e) => `layers.${l}.moe.experts.${e}.${w}.weight`);
    const shape = this.file.tensors.get(names[0]).shape;
    const size = shape[0] * shape[1];
    const data = new Float32Array(c.n_experts * size);
    names.forEach((name, e) => data.set(tensorFloat32(this.file, name), e * size));
    return b.constant(desc([c.n_experts, ...shape]), data);
  }

  /**
   * The fused mode's one graph a token: every layer's attention and routed experts, then the
   * final logits, with the chosen experts and the greedy next token appended: output "out" is
   * [1, vocab + n_layers * top_k + 1] (the indices as float32, exact), so that a token needs one
   * dispatch and one read back; output "next" is that token as the next step's int32 input.
   */
  async buildTokenGraph() {
    const c = this.c;
    // The expert stacks are built from the file's bytes: a download is read back from its OPFS
    // copy once it is committed.
    if (this.streamed) await this.openedWeights();
    const read = !this.file;
    await this.jsFile();
    const g = this.graphs();
    const b = g.b;
    const layers = Array.from({ length: c.n_layers }, (_, l) => l);
    const ins = this.stepInputs(b, layers);
    let x = await this.embedding(g, ins.token);
    const outputs = {};
    const chosen = [];
    for (const l of layers) {
      const a = await this.attentionBlock(g, l, x, ins, ins.keys[l], ins.values[l]);
      outputs[`keys.${l}`] = a.keys;
      outputs[`values.${l}`] = a.values;
      const routed = await this.routedExperts(g, l, a.xOut, a.h, a.logits);
      x = routed.x;
      chosen.push(routed.chosen);
    }
    const routes = b.cast(b.reshape(b.concat(chosen, 0), [1, c.n_layers * c.top_k]), "float32");
    const logits = await this.lmHead(g, x);
    // Greedy: ties go to the lowest index, as argmax() in model.js and torch.argmax.
    outputs.next = b.argMax(logits, 1);
    outputs.out = b.concat([logits, routes, b.cast(b.reshape(outputs.next, [1, 1]), "float32")], 1);
    const graph = await b.build(outputs);
    if (read && this.streamed) this.file = null; // the bytes are in the graph's constants now
    return graph;
  }

  /**
   * x + weight * w2(silu(w1 h) * w3 h), silu(a) = a * sigmoid(a): the expert's only constants
   * are its three weights, so a streamed expert can go to the "disk" tier. `jsWeights` (a Map of
   * name -> Float32Array) is the rebuild baseline's copy.
   */
  async buildExpert(l, e, jsWeights, { resident = true } = {}) {
    if (!jsWeights) return this.graph(`expert.${l}.${e}`, () => this.buildExpertGraph(l, e), { resident });
    return this.buildExpertGraph(l, e, jsWeights);
  }

  async buildExpertGraph(l, e, jsWeights) {
    const c = this.c;
    const weight = jsWeights
      ? (b, name) => b.constant(desc(this.file.tensors.get(name).shape), jsWeights.get(name))
      : (b, name) => this.weight(b, name);
    const g = new Graphs(new this.MLGraphBuilder(this.context), weight);
    const b = g.b;
    const q = `layers.${l}.moe.experts.${e}.`;
    const x = b.input("x", desc([1, c.d_model]));
    const h = b.input("h", desc([1, c.d_model]));
    const w = b.input("weight", desc([1, 1]));
    const gate = await g.linear(h, q + "w1.weight");
    const up = await g.linear(h, q + "w3.weight");
    const down = await g.linear(b.mul(b.mul(gate, b.sigmoid(gate)), up), q + "w2.weight");
    return b.build({ x: b.add(x, b.mul(w, down)) });
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
      await s.graph.swapOut(this.streamed ? { to: "disk" } : undefined);
      this.explicitSwapOuts++;
    }
  }

  /** Writes the step inputs of position this.pos: the RoPE rows and the attention's masks. */
  writePosition() {
    const ctx = this.context;
    const T = this.t;
    const S = this.c.max_seq;
    const { cos, sin } = ropeInputs(this.c, this.pos);
    const mask = new Float32Array(S).fill(MASKED);
    mask.fill(0, 0, this.pos + 1);
    const onehot = new Float32Array(S);
    onehot[this.pos] = 1;
    ctx.writeTensor(T.cos, cos);
    ctx.writeTensor(T.sin, sin);
    ctx.writeTensor(T.mask, mask);
    ctx.writeTensor(T.onehot, onehot);
    ctx.writeTensor(T.keep, onehot.map((v) => 1 - v));
  }

  /** Feeds one token at this.pos; resolves to its logits (Float32Array [vocab]). */
  async step(token) {
    const c = this.c;
    const ctx = this.context;
    const S = c.max_seq;
    if (this.pos >= S) throw new RangeError(`sequence longer than max_seq ${S}`);
    const T = this.t;
    if (!Number.isInteger(token) || token < 0 || token >= c.vocab) throw new RangeError(`token ${token} is not in 0..${c.vocab - 1}`);
    this.writePosition();
    ctx.writeTensor(T.token, new Int32Array([token]));
    if (this.mode === "fused") return this.fusedStep();
    let cur = 0; // T.x[cur] holds the residual stream
    const toDestroy = [];
    this.lastRoutes = [];
    const now = this.pos % 2;
    for (let l = 0; l < c.n_layers; l++) {
      this.countMiss(this.attention[l]);
      ctx.dispatch(this.attention[l], {
        ...(l === 0 ? { token: T.token } : { x: T.x[cur] }), cos: T.cos, sin: T.sin, mask: T.mask, onehot: T.onehot, keep: T.keep,
        keys: T.keys[l][now], values: T.values[l][now],
      }, { x: T.x[1 - cur], keys: T.keys[l][1 - now], values: T.values[l][1 - now], h: T.h, logits: T.routerLogits });
      cur = 1 - cur;
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

  /**
   * The token graph's inputs and outputs for a step at a position of parity `now`, reading its
   * token from `token` and writing the next one to `next`.
   */
  fusedBindings(now, token, next) {
    const T = this.t;
    const inputs = { token, cos: T.cos, sin: T.sin, mask: T.mask, onehot: T.onehot, keep: T.keep };
    const outputs = { out: T.out, next };
    for (let l = 0; l < this.c.n_layers; l++) {
      inputs[`keys.${l}`] = T.keys[l][now];
      inputs[`values.${l}`] = T.values[l][now];
      outputs[`keys.${l}`] = T.keys[l][1 - now];
      outputs[`values.${l}`] = T.values[l][1 - now];
    }
    return { inputs, outputs };
  }

  /**
   * A fused step's output read back: its logits, and the chosen experts counted for the page's
   * grid (their weights stay on the GPU); `next` is the greedy next token the GPU picked.
   */
  fusedResult(bytes) {
    const c = this.c;
    const out = new Float32Array(bytes);
    this.lastRoutes = [];
    for (let l = 0; l < c.n_layers; l++) {
      const routes = [];
      for (let i = 0; i < c.top_k; i++) {
        const expert = out[c.vocab + l * c.top_k + i];
        routes.push({ expert, weight: null });
        const slot = this.experts[l][expert];
        slot.hits++;
        slot.lastUsed = ++this.clock;
        this.expertUses++;
      }
      this.lastRoutes.push(routes);
    }
    return { logits: out.subarray(0, c.vocab), next: out[c.vocab + c.n_layers * c.top_k] };
  }

  /** The fused mode's token: one dispatch, one read back (the inputs are written by step()). */
  async fusedStep() {
    const { inputs, outputs } = this.fusedBindings(this.pos % 2, this.t.token, this.t.next[0]);
    this.countMiss(this.token);
    this.context.dispatch(this.token, inputs, outputs);
    this.lastToken = this.t.token;
    const { logits } = this.fusedResult(await this.context.readTensor(this.t.out));
    this.pos += 1;
    return logits;
  }

  /**
   * Greedy decoding (the fused mode): feeds the prompt `ids`, then generates `count` tokens, each
   * step taking the token the step before picked on the GPU (its "next" output) as its input,
   * so that steps are dispatched without waiting for their reads: up to `ahead` of them are in
   * flight, and a token costs the GPU's time for its graph rather than a round trip.
   * onToken(id, logits) sees each generated token in order; when it returns false, decoding
   * stops (steps dispatched already run, unread). Resolves to the generated ids.
   */
  async decodeGreedy(ids, count, onToken, { ahead = 4 } = {}) {
    const c = this.c;
    const T = this.t;
    const ctx = this.context;
    if (this.mode !== "fused") throw new TypeError("decodeGreedy: the fused mode picks tokens on the GPU; use step()");
    for (const t of ids) {
      if (!Number.isInteger(t) || t < 0 || t >= c.vocab) throw new RangeError(`token ${t} is not in 0..${c.vocab - 1}`);
    }
    if (this.pos + ids.length > c.max_seq) throw new RangeError(`sequence longer than max_seq ${c.max_seq}`);
    if (ids.length === 0 || count < 1) return [];
    // The last generated token is not fed; the cache holds max_seq positions.
    const steps = Math.min(ids.length + count - 1, c.max_seq - this.pos);
    const reads = [];
    const generated = [];
    let stopped = false;
    const take = async () => {
      const { logits, next } = this.fusedResult(await reads.shift());
      generated.push(next);
      if (onToken?.(next, logits) === false) stopped = true;
    };
    try {
      for (let s = 0; s < steps && !stopped; s++) {
        this.writePosition();
        let token = T.next[(s + 1) % 2];
        if (s < ids.length) {
          token = T.token;
          ctx.writeTensor(T.token, new Int32Array([ids[s]]));
        }
        const { inputs, outputs } = this.fusedBindings(this.pos % 2, token, T.next[s % 2]);
        this.countMiss(this.token);
        ctx.dispatch(this.token, inputs, outputs);
        this.lastToken = token;
        this.pos += 1;
        // Reads are queued in order with the dispatches, so each sees its own step's output.
        if (s >= ids.length - 1) reads.push(ctx.readTensor(T.out));
        if (reads.length >= ahead) await take();
      }
      while (reads.length && !stopped) await take();
    } finally {
      for (const r of reads) r.catch(() => {});
    }
    return generated;
  }

  /**
   * For benchmarks (bench/gpu.html): the fused token graph dispatched `n` times on the inputs of
   * the last step, then one read; resolves to the milliseconds. Its slope over `n` is the GPU's
   * time for a token's graph without the read's wait. The keys and values it writes are those
   * the last step wrote already, so the next step's inputs are unchanged.
   */
  async timeFusedDispatches(n) {
    if (this.mode !== "fused" || this.pos === 0) throw new Error("timeFusedDispatches: a fused model after a step");
    const T = this.t;
    // The last step's token tensor, and a `next` it did not read.
    const next = T.next.find((t) => t !== this.lastToken);
    const { inputs, outputs } = this.fusedBindings((this.pos - 1) % 2, this.lastToken, next);
    const t0 = performance.now();
    for (let i = 0; i < n; i++) this.context.dispatch(this.token, inputs, outputs);
    await this.context.readTensor(T.out);
    return performance.now() - t0;
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
      hostBudgetBytes: this.hostBudgetBytes ?? null,
      runtimeBudgetBytes: info?.budgetBytes ?? null,
      nonExpertBytes: this.nonExpertBytes ?? null,
      expertGraphBytes: this.expertGraphBytes ?? null,
      swapIns: info?.swapIns ?? 0,
      swapOuts: info?.swapOuts ?? 0,
      bytesUploaded: info?.bytesUploaded ?? 0,
      bytesStreamedFromDisk: info?.bytesStreamedFromDisk ?? 0,
      bytesStreamedAfterLoad: (info?.bytesStreamedFromDisk ?? 0) - (this.loadedBytesStreamed ?? 0),
      weights: !this.streamed ? "JS arrays (builder.constant)"
        : this.cacheSaves === 0 && this.cacheLoads > 0 ? "graph cache (loadGraph)" : "weight loader (constantTensor)",
      cacheLoads: this.cacheLoads,
      cacheSaves: this.cacheSaves,
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
