// Invalid uses of the WebNN API, each with the exact error the spec's steps give
// (/work/shared/webnn-spec/index.bs): a TypeError or a DOMException name, thrown synchronously
// ("throw") or as a rejected promise ("reject"), as the method's IDL return type implies.
// Loaded in the page by tests/browser/harness.html; driven by tests/browser/invalid_use.mjs.

const f32 = (shape) => ({ dataType: 'float32', shape });
// The operator the setups build with: add is in the core, so the build() cases do not depend on
// which other operator families are implemented.
const twice = (b, x) => b.add(x, x);

/** Per-case state: a fresh context and builder, and everything to destroy afterwards. */
class Env {
  constructor() {
    this.owned = [];
  }
  async init() {
    this.ctx = await this.context();
    this.builder = new MLGraphBuilder(this.ctx);
    return this;
  }
  async context() {
    const c = await navigator.ml.createContext();
    this.owned.push(c);
    return c;
  }
  async tensor(descriptor, ctx = this.ctx) {
    const t = await ctx.createTensor(descriptor);
    this.owned.push(t);
    return t;
  }
  async constantTensor(descriptor, data, ctx = this.ctx) {
    const t = await ctx.createConstantTensor(descriptor, data);
    this.owned.push(t);
    return t;
  }
  /** A built graph out = x + y over f32 [2, 2] on `ctx`. */
  async addGraph(ctx = this.ctx) {
    const b = new MLGraphBuilder(ctx);
    const out = b.add(b.input('x', f32([2, 2])), b.input('y', f32([2, 2])));
    const g = await b.build({ out });
    this.owned.push(g);
    return g;
  }
  /** Tensors for addGraph(): x and y writable, out readable. */
  async addTensors(ctx = this.ctx) {
    return {
      x: await this.tensor({ ...f32([2, 2]), writable: true }, ctx),
      y: await this.tensor({ ...f32([2, 2]), writable: true }, ctx),
      out: await this.tensor({ ...f32([2, 2]), readable: true }, ctx),
    };
  }
  /** A builder that has built a graph already. */
  async builtBuilder() {
    const b = new MLGraphBuilder(this.ctx);
    const x = b.input('x', f32([2]));
    await b.build({ out: twice(b, x) });
    return b;
  }
  cleanup() {
    for (const o of this.owned.reverse()) {
      try { o.destroy(); } catch { /* already destroyed */ }
    }
  }
}

/** How many elements of `bytes` bytes fit maxTensorByteLength. */
const maxElements = (t, bytes) => Math.floor(t.ctx.opSupportLimits().maxTensorByteLength / bytes);

// [name, expected error, "throw" | "reject", async (t) => the invalid call as a function]
export const CASES = [
  // ML.createContext
  ['createContext(GPUDevice) is not supported', 'NotSupportedError', 'reject', async () => {
    const adapter = await navigator.gpu.requestAdapter();
    const device = await adapter.requestDevice();
    return () => navigator.ml.createContext(device);
  }],
  ['createContext with an unknown powerPreference', 'TypeError', 'reject', async () =>
    () => navigator.ml.createContext({ powerPreference: 'turbo' })],

  // MLGraphBuilder constructor
  ['new MLGraphBuilder(plain object)', 'TypeError', 'throw', async () => () => new MLGraphBuilder({})],
  ['new MLGraphBuilder(destroyed context)', 'InvalidStateError', 'throw', async (t) => {
    const c = await t.context();
    c.destroy();
    return () => new MLGraphBuilder(c);
  }],

  // input()
  ['input with an empty name', 'TypeError', 'throw', async (t) => () => t.builder.input('', f32([2]))],
  ['input with a duplicate name', 'TypeError', 'throw', async (t) => {
    t.builder.input('x', f32([2]));
    return () => t.builder.input('x', f32([3]));
  }],
  ['input with a zero dimension', 'TypeError', 'throw', async (t) => () => t.builder.input('x', f32([2, 0]))],
  ['input with a negative dimension', 'TypeError', 'throw', async (t) => () => t.builder.input('x', f32([-1]))],
  ['input with an unknown data type', 'TypeError', 'throw', async (t) => () => t.builder.input('x', { dataType: 'float128', shape: [2] })],
  ['input without a data type', 'TypeError', 'throw', async (t) => () => t.builder.input('x', { shape: [2] })],

  // constant()
  ['constant with too few bytes', 'TypeError', 'throw', async (t) => () => t.builder.constant(f32([2, 2]), new Float32Array(3))],
  ['constant with too many bytes', 'TypeError', 'throw', async (t) => () => t.builder.constant(f32([2]), new ArrayBuffer(12))],
  ['constant with a view of the wrong type', 'TypeError', 'throw', async (t) => () => t.builder.constant(f32([4]), new Int32Array(4))],
  ['constant(tensor) of a tensor that is not constant', 'TypeError', 'throw', async (t) => {
    const x = await t.tensor({ ...f32([2]), writable: true });
    return () => t.builder.constant(x);
  }],
  ['constant(tensor) of a destroyed constant tensor', 'TypeError', 'throw', async (t) => {
    const x = await t.constantTensor(f32([2]), new Float32Array(2));
    x.destroy();
    return () => t.builder.constant(x);
  }],
  ['constant(tensor) of another context', 'TypeError', 'throw', async (t) => {
    const other = await t.context();
    const x = await t.constantTensor(f32([2]), new Float32Array(2), other);
    return () => t.builder.constant(x);
  }],

  // Operators
  ['add of shapes that do not broadcast', 'TypeError', 'throw', async (t) => () =>
    t.builder.add(t.builder.input('a', f32([2, 3])), t.builder.input('b', f32([4])))],
  ['add of mismatched data types', 'TypeError', 'throw', async (t) => () =>
    t.builder.add(t.builder.input('a', f32([2])), t.builder.input('b', { dataType: 'int32', shape: [2] }))],
  ['add of an operand from another builder', 'TypeError', 'throw', async (t) => {
    const other = new MLGraphBuilder(t.ctx);
    return () => t.builder.add(t.builder.input('a', f32([2])), other.input('b', f32([2])));
  }],
  ['matmul with mismatched inner dimensions', 'TypeError', 'throw', async (t) => () =>
    t.builder.matmul(t.builder.input('a', f32([2, 3])), t.builder.input('b', f32([4, 5])))],
  ['matmul of a rank-1 operand', 'TypeError', 'throw', async (t) => () =>
    t.builder.matmul(t.builder.input('a', f32([3])), t.builder.input('b', f32([3, 2])))],
  ['softmax with an axis out of range', 'TypeError', 'throw', async (t) => () => t.builder.softmax(t.builder.input('a', f32([2, 3])), 2)],
  ['transpose with a repeated permutation', 'TypeError', 'throw', async (t) => () =>
    t.builder.transpose(t.builder.input('a', f32([2, 3])), { permutation: [0, 0] })],
  ['reshape to another element count', 'TypeError', 'throw', async (t) => () => t.builder.reshape(t.builder.input('a', f32([2, 3])), [4, 2])],
  ['slice past the end', 'TypeError', 'throw', async (t) => () => t.builder.slice(t.builder.input('a', f32([4])), [2], [3])],
  ['concat of mismatched shapes', 'TypeError', 'throw', async (t) => () =>
    t.builder.concat([t.builder.input('a', f32([2, 3])), t.builder.input('b', f32([3, 4]))], 1)],
  ['concat of no inputs', 'TypeError', 'throw', async (t) => () => t.builder.concat([], 0)],
  ['split into parts that do not divide the axis', 'TypeError', 'throw', async (t) => () => t.builder.split(t.builder.input('a', f32([5])), 2)],
  ['gather with float32 indices', 'TypeError', 'throw', async (t) => () =>
    t.builder.gather(t.builder.input('a', f32([4])), t.builder.input('i', f32([2])))],
  ['expand to a shape that does not broadcast', 'TypeError', 'throw', async (t) => () => t.builder.expand(t.builder.input('a', f32([2, 3])), [4, 3])],
  ['cast to an unknown data type', 'TypeError', 'throw', async (t) => () => t.builder.cast(t.builder.input('a', f32([2])), 'float8')],
  ['clamp with minValue > maxValue', 'TypeError', 'throw', async (t) => () =>
    t.builder.clamp(t.builder.input('a', f32([2])), { minValue: 2, maxValue: 1 })],
  ['reduceSum with an axis out of range', 'TypeError', 'throw', async (t) => () =>
    t.builder.reduceSum(t.builder.input('a', f32([2, 3])), { axes: [2] })],
  ['reduceSum with a repeated axis', 'TypeError', 'throw', async (t) => () =>
    t.builder.reduceSum(t.builder.input('a', f32([2, 3])), { axes: [0, 0] })],
  ['pad of a 0-d operand with paddings of rank 1', 'TypeError', 'throw', async (t) => () =>
    t.builder.pad(t.builder.input('a', f32([])), [1], [1])],
  ['pad of a 0-d operand in reflection mode with paddings of rank 1', 'TypeError', 'throw', async (t) => () =>
    t.builder.pad(t.builder.constant('float32', 1), [1], [1], { mode: 'reflection' })],

  // The spec's "check dimensions": a descriptor whose byte length is over
  // opSupportLimits().maxTensorByteLength is a TypeError wherever it enters. Buffers of that
  // size are ArrayBuffers no one writes, so their pages are never touched.
  ['input one float32 over maxTensorByteLength', 'TypeError', 'throw', async (t) => () =>
    t.builder.input('a', f32([maxElements(t, 4) + 1]))],
  ['input one uint8 over maxTensorByteLength', 'TypeError', 'throw', async (t) => () =>
    t.builder.input('a', { dataType: 'uint8', shape: [maxElements(t, 1) + 1] })],
  ['constant(descriptor, buffer) one uint8 over maxTensorByteLength', 'TypeError', 'throw', async (t) => {
    const n = maxElements(t, 1) + 1;
    return () => t.builder.constant({ dataType: 'uint8', shape: [n] }, new ArrayBuffer(n));
  }],
  ['createTensor one uint8 over maxTensorByteLength', 'TypeError', 'reject', async (t) => () =>
    t.ctx.createTensor({ dataType: 'uint8', shape: [maxElements(t, 1) + 1], readable: true })],
  ['createConstantTensor one uint8 over maxTensorByteLength', 'TypeError', 'reject', async (t) => {
    const n = maxElements(t, 1) + 1;
    return () => t.ctx.createConstantTensor({ dataType: 'uint8', shape: [n] }, new ArrayBuffer(n));
  }],
  ['expand to one float32 over maxTensorByteLength', 'TypeError', 'throw', async (t) => () =>
    t.builder.expand(t.builder.input('a', f32([1])), [maxElements(t, 4) + 1])],
  ['tile to one float32 over maxTensorByteLength', 'TypeError', 'throw', async (t) => () =>
    t.builder.tile(t.builder.input('a', f32([1])), [maxElements(t, 4) + 1])],
  ['pad to one float32 over maxTensorByteLength', 'TypeError', 'throw', async (t) => () =>
    t.builder.pad(t.builder.input('a', f32([2])), [maxElements(t, 4) - 1], [0])],
  ['concat to one uint8 over maxTensorByteLength', 'TypeError', 'throw', async (t) => {
    const half = maxElements(t, 1) / 2;
    const a = t.builder.input('a', { dataType: 'uint8', shape: [half] });
    const b = t.builder.input('b', { dataType: 'uint8', shape: [1] });
    return () => t.builder.concat([a, a, b], 0);
  }],
  ['matmul to an output over maxTensorByteLength', 'TypeError', 'throw', async (t) => {
    const n = Math.ceil(Math.sqrt(maxElements(t, 4) + 1));
    return () => t.builder.matmul(t.builder.input('a', f32([n, 1])), t.builder.input('b', f32([1, n])));
  }],
  ['resample2d to an output over maxTensorByteLength', 'TypeError', 'throw', async (t) => {
    const n = Math.ceil(Math.sqrt(maxElements(t, 4) + 1));
    return () => t.builder.resample2d(t.builder.input('a', f32([1, 1, 2, 2])), { sizes: [n, n] });
  }],

  // build()
  ['build with no outputs', 'TypeError', 'reject', async (t) => () => t.builder.build({})],
  ['build with an empty output name', 'TypeError', 'reject', async (t) => {
    const out = twice(t.builder, t.builder.input('x', f32([2])));
    return () => t.builder.build({ '': out });
  }],
  ['build with an input as an output', 'TypeError', 'reject', async (t) => {
    const x = t.builder.input('x', f32([2]));
    return () => t.builder.build({ out: x });
  }],
  ['build with a constant as an output', 'TypeError', 'reject', async (t) => {
    const c = t.builder.constant(f32([2]), new Float32Array(2));
    return () => t.builder.build({ out: c });
  }],
  ['build with an operand of another builder', 'TypeError', 'reject', async (t) => {
    const other = new MLGraphBuilder(t.ctx);
    const out = twice(other, other.input('x', f32([2])));
    return () => t.builder.build({ out });
  }],
  ['build twice', 'InvalidStateError', 'reject', async (t) => {
    const b = new MLGraphBuilder(t.ctx);
    const out = twice(b, b.input('x', f32([2])));
    await b.build({ out });
    return () => b.build({ again: out });
  }],
  ['input() after build', 'InvalidStateError', 'throw', async (t) => {
    const b = await t.builtBuilder();
    return () => b.input('y', f32([2]));
  }],
  ['constant() after build', 'InvalidStateError', 'throw', async (t) => {
    const b = await t.builtBuilder();
    return () => b.constant(f32([2]), new Float32Array(2));
  }],
  ['an operator after build', 'InvalidStateError', 'throw', async (t) => {
    const b = new MLGraphBuilder(t.ctx);
    const x = b.input('x', f32([2]));
    await b.build({ out: twice(b, x) });
    return () => twice(b, x);
  }],

  // Tensors
  ['createTensor with an unknown data type', 'TypeError', 'reject', async (t) => () => t.ctx.createTensor({ dataType: 'float128', shape: [2] })],
  ['createConstantTensor with the wrong byte length', 'TypeError', 'reject', async (t) => () => t.ctx.createConstantTensor(f32([2]), new Float32Array(3))],
  ['createConstantTensor with a zero dimension', 'TypeError', 'reject', async (t) => () => t.ctx.createConstantTensor(f32([0]), new Float32Array(0))],
  ['writeTensor to a tensor that is not writable', 'TypeError', 'throw', async (t) => {
    const x = await t.tensor({ ...f32([2]), readable: true });
    return () => t.ctx.writeTensor(x, new Float32Array(2));
  }],
  ['writeTensor with the wrong byte length', 'TypeError', 'throw', async (t) => {
    const x = await t.tensor({ ...f32([2]), writable: true });
    return () => t.ctx.writeTensor(x, new Float32Array(3));
  }],
  ['writeTensor with a view of the wrong type', 'TypeError', 'throw', async (t) => {
    const x = await t.tensor({ ...f32([2]), writable: true });
    return () => t.ctx.writeTensor(x, new Int32Array(2));
  }],
  ['writeTensor to a destroyed tensor', 'TypeError', 'throw', async (t) => {
    const x = await t.tensor({ ...f32([2]), writable: true });
    x.destroy();
    return () => t.ctx.writeTensor(x, new Float32Array(2));
  }],
  ['writeTensor to a tensor of another context', 'TypeError', 'throw', async (t) => {
    const x = await t.tensor({ ...f32([2]), writable: true }, await t.context());
    return () => t.ctx.writeTensor(x, new Float32Array(2));
  }],
  ['readTensor of a tensor that is not readable', 'TypeError', 'reject', async (t) => {
    const x = await t.tensor({ ...f32([2]), writable: true });
    return () => t.ctx.readTensor(x);
  }],
  ['readTensor of a destroyed tensor', 'TypeError', 'reject', async (t) => {
    const x = await t.tensor({ ...f32([2]), readable: true });
    x.destroy();
    return () => t.ctx.readTensor(x);
  }],
  ['readTensor into a buffer of the wrong size', 'TypeError', 'reject', async (t) => {
    const x = await t.tensor({ ...f32([2]), readable: true });
    return () => t.ctx.readTensor(x, new Float32Array(3));
  }],
  ['readTensor of a tensor of another context', 'TypeError', 'reject', async (t) => {
    const x = await t.tensor({ ...f32([2]), readable: true }, await t.context());
    return () => t.ctx.readTensor(x);
  }],
  ['readTensor pending when the tensor is destroyed', 'InvalidStateError', 'reject', async (t) => {
    const x = await t.tensor({ ...f32([2]), readable: true });
    return () => {
      const p = t.ctx.readTensor(x);
      x.destroy();
      return p;
    };
  }],

  // dispatch()
  ['dispatch of a graph of another context', 'TypeError', 'throw', async (t) => {
    const g = await t.addGraph(await t.context());
    const io = await t.addTensors();
    return () => t.ctx.dispatch(g, { x: io.x, y: io.y }, { out: io.out });
  }],
  ['dispatch of a destroyed graph', 'InvalidStateError', 'throw', async (t) => {
    const g = await t.addGraph();
    const io = await t.addTensors();
    g.destroy();
    return () => t.ctx.dispatch(g, { x: io.x, y: io.y }, { out: io.out });
  }],
  ['dispatch with a missing input', 'TypeError', 'throw', async (t) => {
    const g = await t.addGraph();
    const io = await t.addTensors();
    return () => t.ctx.dispatch(g, { x: io.x }, { out: io.out });
  }],
  ['dispatch with an unknown input name', 'TypeError', 'throw', async (t) => {
    const g = await t.addGraph();
    const io = await t.addTensors();
    return () => t.ctx.dispatch(g, { x: io.x, z: io.y }, { out: io.out });
  }],
  ['dispatch with an input of the wrong shape', 'TypeError', 'throw', async (t) => {
    const g = await t.addGraph();
    const io = await t.addTensors();
    const y = await t.tensor({ ...f32([4]), writable: true });
    return () => t.ctx.dispatch(g, { x: io.x, y }, { out: io.out });
  }],
  ['dispatch with one tensor as input and output', 'TypeError', 'throw', async (t) => {
    const g = await t.addGraph();
    const io = await t.addTensors();
    return () => t.ctx.dispatch(g, { x: io.x, y: io.y }, { out: io.x });
  }],
  ['dispatch with a destroyed tensor', 'TypeError', 'throw', async (t) => {
    const g = await t.addGraph();
    const io = await t.addTensors();
    io.y.destroy();
    return () => t.ctx.dispatch(g, { x: io.x, y: io.y }, { out: io.out });
  }],
  ['dispatch with a constant tensor as input', 'TypeError', 'throw', async (t) => {
    const g = await t.addGraph();
    const io = await t.addTensors();
    const y = await t.constantTensor(f32([2, 2]), new Float32Array(4));
    return () => t.ctx.dispatch(g, { x: io.x, y }, { out: io.out });
  }],

  // After MLContext.destroy()
  ['createTensor after context destroy', 'InvalidStateError', 'reject', async (t) => {
    t.ctx.destroy();
    return () => t.ctx.createTensor({ ...f32([2]), readable: true });
  }],
  ['createConstantTensor after context destroy', 'InvalidStateError', 'reject', async (t) => {
    t.ctx.destroy();
    return () => t.ctx.createConstantTensor(f32([2]), new Float32Array(2));
  }],
  ['builder input() after context destroy', 'InvalidStateError', 'throw', async (t) => {
    t.ctx.destroy();
    return () => t.builder.input('x', f32([2]));
  }],
  ['build after context destroy', 'InvalidStateError', 'reject', async (t) => {
    const out = twice(t.builder, t.builder.input('x', f32([2])));
    t.ctx.destroy();
    return () => t.builder.build({ out });
  }],
  ['dispatch after context destroy (graph destroyed)', 'InvalidStateError', 'throw', async (t) => {
    const g = await t.addGraph();
    const io = await t.addTensors();
    t.ctx.destroy();
    return () => t.ctx.dispatch(g, { x: io.x, y: io.y }, { out: io.out });
  }],
  ['writeTensor after context destroy (tensor destroyed)', 'TypeError', 'throw', async (t) => {
    const x = await t.tensor({ ...f32([2]), writable: true });
    t.ctx.destroy();
    return () => t.ctx.writeTensor(x, new Float32Array(2));
  }],
  ['readTensor after context destroy (tensor destroyed)', 'TypeError', 'reject', async (t) => {
    const x = await t.tensor({ ...f32([2]), readable: true });
    t.ctx.destroy();
    return () => t.ctx.readTensor(x);
  }],
];

export function count() {
  return CASES.length;
}

export function name(i) {
  return CASES[i][0];
}

const describe = (e) => (e instanceof DOMException ? `DOMException ${e.name}` : `${e?.constructor?.name ?? typeof e}`) + `: ${e?.message ?? e}`;

// A TypeError the test itself caused (a missing method) must not count as the expected error.
const missingApi = (e) => e instanceof TypeError && /is not a (function|constructor)|Cannot read properties of (undefined|null)/.test(e.message);

function matches(e, expected) {
  if (expected === 'TypeError') return e instanceof TypeError && !missingApi(e);
  return e instanceof DOMException && e.name === expected;
}

/** Runs case `i`: {ok, message}. */
export async function run(i) {
  const [, expected, mode, setup] = CASES[i];
  const t = new Env();
  try {
    let call;
    try {
      await t.init();
      call = await setup(t);
    } catch (e) {
      return { ok: false, message: `setup failed: ${describe(e)}` };
    }
    let result;
    try {
      result = call();
    } catch (e) {
      if (mode !== 'throw') return { ok: false, message: `threw synchronously (${describe(e)}); expected a rejected promise` };
      return matches(e, expected) ? { ok: true, message: describe(e) } : { ok: false, message: `threw ${describe(e)}; expected ${expected}` };
    }
    if (!(result instanceof Promise)) return { ok: false, message: `returned without an error; expected ${expected}` };
    try {
      await result;
    } catch (e) {
      if (mode !== 'reject') return { ok: false, message: `rejected (${describe(e)}); expected a synchronous ${expected}` };
      return matches(e, expected) ? { ok: true, message: describe(e) } : { ok: false, message: `rejected with ${describe(e)}; expected ${expected}` };
    }
    return { ok: false, message: `resolved; expected ${expected}` };
  } finally {
    t.cleanup();
  }
}

let liveContext = null;

/** The page still works: a fresh graph computes [1, 2] + [10, 20] on a context kept across cases. */
export async function alive() {
  liveContext ??= await navigator.ml.createContext();
  const b = new MLGraphBuilder(liveContext);
  const out = b.add(b.input('x', f32([2])), b.constant(f32([2]), new Float32Array([10, 20])));
  const g = await b.build({ out });
  const x = await liveContext.createTensor({ ...f32([2]), writable: true });
  const y = await liveContext.createTensor({ ...f32([2]), readable: true });
  liveContext.writeTensor(x, new Float32Array([1, 2]));
  liveContext.dispatch(g, { x }, { out: y });
  const r = Array.from(new Float32Array(await liveContext.readTensor(y)));
  for (const o of [x, y, g]) o.destroy();
  if (r[0] !== 11 || r[1] !== 22) throw new Error(`computed [${r}], expected [11, 22]`);
  return true;
}
