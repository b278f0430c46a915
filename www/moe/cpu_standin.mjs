// A float32 CPU stand-in for navigator.ml that covers only the operators and the memory
// extensions (docs/EXTENSIONS.md) the MoE demo uses. It lets Node check www/moe/moe_graphs.js's graph
// wiring and its memory modes against reference.json without a browser or a GPU; the real
// implementation is checked by tests/browser/moe.mjs in Chromium.

const size = (shape) => shape.reduce((a, b) => a * b, 1);
const stridesOf = (shape) => {
  const s = new Array(shape.length).fill(1);
  for (let i = shape.length - 2; i >= 0; i--) s[i] = s[i + 1] * shape[i + 1];
  return s;
};

function broadcastShape(a, b) {
  const n = Math.max(a.length, b.length);
  const out = [];
  for (let i = 0; i < n; i++) {
    const x = a[a.length - n + i] ?? 1;
    const y = b[b.length - n + i] ?? 1;
    if (x !== y && x !== 1 && y !== 1) throw new TypeError(`cannot broadcast [${a}] and [${b}]`);
    out.push(Math.max(x, y));
  }
  return out;
}

// Offsets into a tensor of `shape` broadcast to `out`, for every element of `out` in order.
function broadcastOffsets(shape, out) {
  const n = out.length;
  const full = [...new Array(n - shape.length).fill(1), ...shape];
  const st = stridesOf(full).map((s, i) => (full[i] === 1 ? 0 : s));
  const offsets = new Int32Array(size(out));
  const idx = new Array(n).fill(0);
  for (let k = 0; k < offsets.length; k++) {
    let o = 0;
    for (let i = 0; i < n; i++) o += idx[i] * st[i];
    offsets[k] = o;
    for (let i = n - 1; i >= 0; i--) {
      if (++idx[i] < out[i]) break;
      idx[i] = 0;
    }
  }
  return offsets;
}

class Operand {
  constructor(builder, shape, evaluate, inputs = []) {
    Object.assign(this, { builder, shape, evaluate, inputs, dataType: "float32" });
  }
}

class MLGraphBuilder {
  constructor(context) {
    this.context = context;
    this.inputs = new Map();
    this.constantBytes = 0;
  }
  op(shape, inputs, fn) {
    for (const x of inputs) if (x.builder !== this) throw new TypeError("operand from another builder");
    return new Operand(this, shape, (values) => fn(...inputs.map((x) => values(x))), inputs);
  }
  input(name, { dataType, shape }) {
    if (dataType !== "float32" && dataType !== "int32") throw new TypeError(`input ${name}: ${dataType}`);
    const x = new Operand(this, shape, () => { throw new Error("unbound input"); });
    x.inputName = name;
    this.inputs.set(name, x);
    return x;
  }
  constant({ dataType, shape }, data) {
    if (dataType !== "float32" || data.length !== size(shape)) throw new TypeError(`constant [${shape}]`);
    const copy = Float32Array.from(data);
    this.constantBytes += copy.byteLength;
    return new Operand(this, shape, () => copy);
  }
  binary(a, b, f) {
    const out = broadcastShape(a.shape, b.shape);
    const oa = broadcastOffsets(a.shape, out);
    const ob = broadcastOffsets(b.shape, out);
    return this.op(out, [a, b], (x, y) => {
      const r = new Float32Array(oa.length);
      for (let i = 0; i < r.length; i++) r[i] = f(x[oa[i]], y[ob[i]]);
      return r;
    });
  }
  add(a, b) { return this.binary(a, b, (x, y) => x + y); }
  sub(a, b) { return this.binary(a, b, (x, y) => x - y); }
  mul(a, b) { return this.binary(a, b, (x, y) => x * y); }
  div(a, b) { return this.binary(a, b, (x, y) => x / y); }
  unary(a, f) { return this.op(a.shape, [a], (x) => x.map(f)); }
  sqrt(a) { return this.unary(a, Math.sqrt); }
  exp(a) { return this.unary(a, Math.exp); }
  sigmoid(a) { return this.unary(a, (x) => 1 / (1 + Math.exp(-x))); }
  neg(a) { return this.unary(a, (x) => -x); }
  reshape(a, shape) {
    if (size(shape) !== size(a.shape)) throw new TypeError(`reshape [${a.shape}] to [${shape}]`);
    return this.op(shape, [a], (x) => x);
  }
  transpose(a, { permutation }) {
    const shape = permutation.map((p) => a.shape[p]);
    const st = stridesOf(a.shape);
    const outStrides = stridesOf(shape);
    const perm = new Int32Array(size(shape));
    for (let k = 0; k < perm.length; k++) {
      let rem = k;
      for (let i = 0; i < shape.length; i++) {
        perm[k] += Math.floor(rem / outStrides[i]) * st[permutation[i]];
        rem %= outStrides[i];
      }
    }
    return this.op(shape, [a], (x) => Float32Array.from(perm, (o) => x[o]));
  }
  // Along `axis`: outer x [sizes] x inner.
  split(a, count, { axis }) {
    const part = a.shape[axis] / count;
    const outer = size(a.shape.slice(0, axis));
    const inner = size(a.shape.slice(axis + 1));
    return Array.from({ length: count }, (_, p) => {
      const shape = a.shape.map((d, i) => (i === axis ? part : d));
      return this.op(shape, [a], (x) => {
        const r = new Float32Array(size(shape));
        for (let o = 0; o < outer; o++) {
          r.set(x.subarray((o * a.shape[axis] + p * part) * inner, (o * a.shape[axis] + (p + 1) * part) * inner), o * part * inner);
        }
        return r;
      });
    });
  }
  concat(list, axis) {
    const total = list.reduce((s, t) => s + t.shape[axis], 0);
    const shape = list[0].shape.map((d, i) => (i === axis ? total : d));
    const outer = size(shape.slice(0, axis));
    const inner = size(shape.slice(axis + 1));
    return this.op(shape, list, (...xs) => {
      const r = new Float32Array(size(shape));
      let at = 0;
      for (const [j, x] of xs.entries()) {
        const n = list[j].shape[axis] * inner;
        for (let o = 0; o < outer; o++) r.set(x.subarray(o * n, (o + 1) * n), o * total * inner + at);
        at += n;
      }
      return r;
    });
  }
  // Reductions over the last axis only, which is all the demo uses.
  reduceLast(name, a, { axes, keepDimensions }, term, finish) {
    if (axes.length !== 1 || axes[0] !== a.shape.length - 1) throw new TypeError(`${name}: last axis only here`);
    const n = a.shape.at(-1);
    const shape = keepDimensions ? [...a.shape.slice(0, -1), 1] : a.shape.slice(0, -1);
    return this.op(shape, [a], (x) => {
      const r = new Float32Array(x.length / n);
      for (let i = 0; i < r.length; i++) {
        let s = 0;
        for (let j = 0; j < n; j++) s += term(x[i * n + j]);
        r[i] = finish(s, n);
      }
      return r;
    });
  }
  reduceMean(a, options) { return this.reduceLast("reduceMean", a, options, (v) => v, (s, n) => s / n); }
  reduceSumSquare(a, options) { return this.reduceLast("reduceSumSquare", a, options, (v) => v * v, (s) => s); }
  softmax(a, axis) {
    if (axis !== a.shape.length - 1) throw new TypeError("softmax: last axis only here");
    const n = a.shape.at(-1);
    return this.op(a.shape, [a], (x) => {
      const r = new Float32Array(x.length);
      for (let i = 0; i < x.length; i += n) {
        let max = -Infinity;
        for (let j = 0; j < n; j++) max = Math.max(max, x[i + j]);
        let s = 0;
        for (let j = 0; j < n; j++) s += (r[i + j] = Math.exp(x[i + j] - max));
        for (let j = 0; j < n; j++) r[i + j] /= s;
      }
      return r;
    });
  }
  matmul(a, b) {
    const [m, k] = a.shape.slice(-2);
    const [k2, n] = b.shape.slice(-2);
    if (k !== k2) throw new TypeError(`matmul [${a.shape}] x [${b.shape}]`);
    const batch = broadcastShape(a.shape.slice(0, -2), b.shape.slice(0, -2));
    const ba = broadcastOffsets(a.shape.slice(0, -2), batch);
    const bb = broadcastOffsets(b.shape.slice(0, -2), batch);
    return this.op([...batch, m, n], [a, b], (x, y) => {
      const r = new Float32Array(size(batch) * m * n);
      for (let q = 0; q < ba.length; q++) {
        for (let i = 0; i < m; i++) {
          for (let j = 0; j < n; j++) {
            let s = 0;
            for (let t = 0; t < k; t++) s += x[ba[q] * m * k + i * k + t] * y[bb[q] * k * n + t * n + j];
            r[(q * m + i) * n + j] = s;
          }
        }
      }
      return r;
    });
  }
  // alpha = 1, no c: a [m, k] x b [k, n], or b [n, k] with bTranspose.
  gemm(a, b, { bTranspose = false } = {}) {
    const [m, k] = a.shape;
    const [n, k2] = bTranspose ? b.shape : [b.shape[1], b.shape[0]];
    if (k !== k2) throw new TypeError(`gemm [${a.shape}] x [${b.shape}]`);
    return this.op([m, n], [a, b], (x, y) => {
      const r = new Float32Array(m * n);
      for (let i = 0; i < m; i++) {
        for (let j = 0; j < n; j++) {
          let s = 0;
          for (let t = 0; t < k; t++) s += x[i * k + t] * (bTranspose ? y[j * k + t] : y[t * n + j]);
          r[i * n + j] = s;
        }
      }
      return r;
    });
  }
  // Rows of a 2-D input at axis 0.
  gather(a, indices, { axis = 0 } = {}) {
    if (axis !== 0 || a.shape.length !== 2) throw new TypeError("gather: axis 0 of a matrix only");
    const width = a.shape[1];
    return this.op([...indices.shape, width], [a, indices], (x, idx) => {
      const r = new Float32Array(idx.length * width);
      idx.forEach((row, i) => r.set(x.subarray(row * width, (row + 1) * width), i * width));
      return r;
    });
  }
  async build(outputs) {
    return this.context.register(new MLGraph(this, outputs));
  }
}

class MLGraph {
  constructor(builder, outputs) {
    Object.assign(this, { context: builder.context, inputs: builder.inputs, outputs });
    this.constantBytes = builder.constantBytes;
    this.residency = "device";
    this.lastUsed = 0;
    this.destroyed = false;
  }
  get deviceBytes() { return this.residency === "device" ? this.constantBytes : 0; }
  get hostBytes() { return this.residency === "device" ? 0 : this.constantBytes; }
  async swapOut() {
    if (this.destroyed) throw new DOMException("graph destroyed", "InvalidStateError");
    if (this.residency === "device") {
      this.residency = "host";
      this.context.info.swapOuts++;
    }
  }
  async swapIn() {
    if (this.destroyed) throw new DOMException("graph destroyed", "InvalidStateError");
    if (this.residency !== "device") {
      this.context.makeRoom(this.constantBytes, this);
      this.residency = "device";
      this.context.info.swapIns++;
      this.context.info.bytesUploaded += this.constantBytes;
    }
  }
  destroy() {
    this.destroyed = true;
    this.context.graphs.delete(this);
  }
}

class MLContext {
  constructor(options) {
    this.budget = options.memoryBudget;
    this.graphs = new Set();
    this.tensorBytes = 0;
    this.clock = 0;
    this.info = { swapIns: 0, swapOuts: 0, bytesUploaded: 0 };
  }
  deviceBytes() {
    let n = this.tensorBytes;
    for (const g of this.graphs) n += g.deviceBytes;
    return n;
  }
  makeRoom(need, except) {
    if (this.budget === undefined) return;
    const lru = [...this.graphs].filter((g) => g !== except && g.residency === "device").sort((a, b) => a.lastUsed - b.lastUsed);
    while (this.deviceBytes() + need > this.budget) {
      const g = lru.shift();
      if (!g) throw new DOMException(`${need} bytes do not fit the budget ${this.budget}`, "QuotaExceededError");
      g.residency = "host";
      this.info.swapOuts++;
    }
  }
  register(graph) {
    this.makeRoom(graph.constantBytes, graph);
    this.graphs.add(graph);
    graph.lastUsed = ++this.clock;
    return graph;
  }
  memoryInfo() {
    let hostBytes = 0;
    for (const g of this.graphs) hostBytes += g.hostBytes;
    return { deviceBytes: this.deviceBytes(), hostBytes, budgetBytes: this.budget ?? null, ...this.info, bytesStreamedFromDisk: 0 };
  }
  async createTensor({ dataType, shape, readable = false, writable = false }) {
    if (dataType !== "float32" && dataType !== "int32") throw new TypeError(dataType);
    this.makeRoom(size(shape) * 4);
    this.tensorBytes += size(shape) * 4;
    const data = dataType === "int32" ? new Int32Array(size(shape)) : new Float32Array(size(shape));
    return { shape, readable, writable, data };
  }
  writeTensor(t, data) {
    if (!t.writable || data.length !== t.data.length) throw new TypeError("writeTensor");
    t.data.set(data);
  }
  async readTensor(t) {
    if (!t.readable) throw new TypeError("readTensor");
    return t.data.slice().buffer;
  }
  dispatch(graph, inputs, outputs) {
    if (graph.destroyed) throw new TypeError("dispatch of a destroyed graph");
    const ins = Object.values(inputs);
    if (Object.values(outputs).some((t) => ins.includes(t))) throw new TypeError("a tensor is both input and output");
    if (graph.residency !== "device") graph.swapIn();
    graph.lastUsed = ++this.clock;
    const cache = new Map();
    const value = (x) => {
      if (x.inputName !== undefined) {
        const t = inputs[x.inputName];
        if (!t || t.data.length !== size(x.shape)) throw new TypeError(`input ${x.inputName}`);
        return t.data;
      }
      if (!cache.has(x)) cache.set(x, x.evaluate(value));
      return cache.get(x);
    };
    const results = Object.entries(graph.outputs).map(([name, x]) => [name, value(x)]);
    for (const [name, r] of results) outputs[name].data.set(r);
  }
  destroy() {
    this.graphs.clear();
  }
}

export const ml = { createContext: async (options = {}) => new MLContext(options) };
export { MLGraphBuilder };
