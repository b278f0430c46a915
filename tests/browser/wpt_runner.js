// Runs the WPT-derived conformance cases (tests/conformance/wpt/*.json) through the standard
// WebNN JavaScript API (navigator.ml) inside the page. Mirrors the native runner
// tests/common/wpt.rs: same data, same per-operator tolerances, same skip rule (operand data
// types or ranks that opSupportLimits() does not list, tensors over its maxTensorByteLength).
// An operator the builder lacks, or one that throws NotSupportedError, is reported as
// "unsupported", never as a pass.

const files = new Map();
let context = null;

async function load(file) {
  if (!files.has(file)) {
    const res = await fetch(`/tests/conformance/wpt/${file}`);
    if (!res.ok) throw new Error(`${file}: HTTP ${res.status}`);
    files.set(file, await res.json());
  }
  return files.get(file);
}

async function getContext() {
  if (context === null || context.lostInfo) {
    context = await navigator.ml.createContext();
    context.lost.then((info) => { context.lostInfo = info; });
  }
  return context;
}

/** The number of cases in one file. */
export async function caseCount(file) {
  return (await load(file)).tests.length;
}

const ARRAY = {
  float32: Float32Array,
  float16: globalThis.Float16Array,
  int32: Int32Array,
  uint32: Uint32Array,
  int64: BigInt64Array,
  uint64: BigUint64Array,
  int8: Int8Array,
  uint8: Uint8Array,
};
const is64 = (t) => t === 'int64' || t === 'uint64';
// The spec exposes MLOperand as an interface; fall back to its attributes where it is not global.
const isOperand = (x) => (globalThis.MLOperand ? x instanceof MLOperand
  : x !== null && typeof x === 'object' && typeof x.dataType === 'string' && Array.isArray(x.shape));

/** A JSON number: numbers, or strings for infinities, NaN and bigints ("100n"). */
function number(v) {
  if (typeof v === 'number') return v;
  if (typeof v === 'boolean') return v ? 1 : 0;
  if (v === 'Infinity') return Infinity;
  if (v === '-Infinity') return -Infinity;
  if (v === 'NaN') return NaN;
  if (typeof v === 'string' && /^-?\d+n$/.test(v)) return BigInt(v.slice(0, -1));
  return Number(v);
}

function elementCount(shape) {
  return shape.reduce((a, b) => a * b, 1);
}

/** The typed array of a tensor; a single number for a larger shape fills it. */
function typedArray(descriptor, data) {
  const Ctor = ARRAY[descriptor.dataType];
  if (!Ctor) throw new Error(`no typed array for ${descriptor.dataType}`);
  const count = elementCount(descriptor.shape);
  const conv = is64(descriptor.dataType)
    ? (v) => (typeof v === 'bigint' ? v : BigInt(Math.trunc(v)))
    : (v) => (typeof v === 'bigint' ? Number(v) : v);
  if (!Array.isArray(data)) return new Ctor(count).fill(conv(number(data)));
  const out = new Ctor(count);
  for (let i = 0; i < count; i++) out[i] = conv(number(data[i]));
  return out;
}

/** An argument value: operand ids become operands, numeric strings numbers. */
function argument(v, operands) {
  if (typeof v === 'string') return operands.has(v) ? operands.get(v) : v;
  if (Array.isArray(v)) {
    return v.every((x) => typeof x === 'string' && operands.has(x)) ? v.map((x) => operands.get(x)) : v;
  }
  return v;
}

function options(o, operands) {
  const out = {};
  for (const [k, v] of Object.entries(o)) {
    if (typeof v === 'string' && operands.has(v)) out[k] = operands.get(v);
    else if (typeof v === 'string' && /^(-?Infinity|NaN|-?\d+n)$/.test(v)) out[k] = number(v);
    else out[k] = v;
  }
  return out;
}

/** WPT's tolerance of one operator: [ulp, absolute]. */
function tolerance(name, args) {
  const input = args.input ?? args.a ?? Object.values(args).flat().find((x) => isOperand(x));
  const t = input?.dataType ?? 'float32';
  const shape = input?.shape ?? [];
  const abs = t === 'float16' ? 1 / 512 : 1 / 1024;
  const o = args.options ?? {};
  const reduced = () => {
    const axes = o.axes ?? shape.map((_, i) => i);
    return axes.reduce((n, a) => n * (shape[a] ?? 1), 1);
  };
  switch (name) {
    case 'add': case 'sub': case 'mul': case 'div': case 'leakyRelu': case 'prelu':
      return [1, 0];
    case 'pow': case 'reciprocal': case 'hardSigmoid': case 'linear':
      return [2, 0];
    case 'matmul':
      return [2 * (shape[shape.length - 1] ?? 1), 0];
    case 'gemm': {
      const k = o.aTranspose ? shape[0] : shape[1];
      const alpha = o.alpha !== undefined && o.alpha !== 1;
      const beta = o.beta !== undefined && o.beta !== 1;
      return [2 * k + alpha + (o.c !== undefined) + beta, 0];
    }
    case 'softmax':
      return [3 * (shape[args.axis] ?? 1) + 3, 0];
    case 'reduceL1': case 'reduceSum': case 'reduceProduct': return [reduced(), 0];
    case 'reduceL2': return [2 * reduced() + 2, 0];
    case 'reduceMean': return [reduced() + 2, 0];
    case 'reduceLogSum': return [reduced() + 18, 0];
    case 'reduceLogSumExp': return [2 * reduced() + 18, 0];
    case 'reduceSumSquare': return [2 * reduced(), 0];
    case 'sigmoid': return [t === 'float16' ? 10 : 34, 0];
    case 'tanh': return [16, 0];
    case 'elu': case 'gelu': case 'softplus': return [18, 0];
    case 'hardSwish': return [4, 0];
    case 'softsign': return [3, 0];
    case 'batchNormalization': return [6, 0];
    case 'gru': case 'gruCell': case 'lstm': return [3, 0];
    case 'lstmCell': return [1, 0];
    case 'conv2d': case 'convTranspose2d': {
      // 2 * kH * kW * (inputChannels / groups).
      const f = args.filter?.shape ?? [1, 1, 1, 1];
      const layout = o.filterLayout ?? (name === 'conv2d' ? 'oihw' : 'iohw');
      const channels = (o.inputLayout ?? 'nchw') === 'nchw' ? shape[1] : shape[3];
      return [2 * f[layout.indexOf('h')] * f[layout.indexOf('w')] * (channels / (o.groups ?? 1)), 0];
    }
    case 'averagePool2d': case 'l2Pool2d': {
      const layout = o.layout ?? 'nchw';
      const [h, w] = o.windowDimensions ?? (layout === 'nchw' ? shape.slice(2) : shape.slice(1, 3));
      return [h * w + 2, 0];
    }
    case 'exp': return [t === 'float16' ? 1 : 32, 0];
    case 'sqrt': return [1, 0];
    case 'sin': case 'cos': case 'tan': case 'erf': case 'log':
    case 'layerNormalization': case 'instanceNormalization':
      return [0, abs];
    default:
      return [0, 0];
  }
}

/** Distance in units of the last place between two values of a float type. */
function ulpDistance(a, b, dataType) {
  if (a === b || (Number.isNaN(a) && Number.isNaN(b))) return 0;
  const half = dataType === 'float16';
  const buf = half ? new Float16Array(2) : new Float32Array(2);
  const bits = half ? new Uint16Array(buf.buffer) : new Uint32Array(buf.buffer);
  buf[0] = a;
  buf[1] = b;
  const sign = half ? 0x8000 : 0x80000000;
  const lin = (x) => (x >= sign ? -(x - sign) : x);
  return Math.abs(lin(bits[0]) - lin(bits[1]));
}

function round(v, dataType) {
  if (dataType === 'float16') return new Float16Array([v])[0];
  return Math.fround(v);
}

/** The reason a case must be skipped, from opSupportLimits(); null when it is supported. */
function unsupportedTypes(limits, name, args, outputOperands) {
  const opLimits = limits[name];
  for (const [key, value] of Object.entries(args)) {
    const list = Array.isArray(value) ? value : [value];
    for (const operand of list) {
      if (!isOperand(operand)) continue;
      const l = opLimits[key] ?? opLimits.input;
      if (!l) continue;
      if (l.dataTypes && !l.dataTypes.includes(operand.dataType)) {
        return `${name}.${key}: ${operand.dataType} is not in opSupportLimits()`;
      }
      const r = l.rankRange;
      if (r && (operand.shape.length < r.min || operand.shape.length > r.max)) {
        return `${name}.${key}: rank ${operand.shape.length} is outside opSupportLimits() ${r.min}..${r.max}`;
      }
    }
  }
  for (const d of outputOperands) {
    if (opLimits.output?.dataTypes && !opLimits.output.dataTypes.includes(d.dataType)) {
      return `${name}.output: ${d.dataType} is not in opSupportLimits()`;
    }
  }
  return null;
}

/** Runs case `index` of `file`: {status: pass|fail|skip|unsupported, message}. */
export async function runCase(file, index) {
  const testCase = (await load(file)).tests[index];
  const created = [];
  try {
    return await run(testCase, created);
  } catch (e) {
    if (e?.name === 'NotSupportedError') return { status: 'unsupported', message: `NotSupportedError: ${e.message}` };
    return { status: 'fail', message: `${e?.name ?? 'Error'}: ${e?.message ?? e}`, fatal: e instanceof WebAssembly.RuntimeError };
  } finally {
    for (const x of created) {
      try { x.destroy(); } catch { /* already gone */ }
    }
  }
}

async function run(testCase, created) {
  const graph = testCase.graph;
  const ctx = await getContext();
  const limits = ctx.opSupportLimits();
  for (const op of graph.operators) {
    if (typeof MLGraphBuilder.prototype[op.name] !== 'function') {
      return { status: 'unsupported', message: `MLGraphBuilder.${op.name} is not implemented` };
    }
    if (!limits[op.name]) return { status: 'unsupported', message: `opSupportLimits() has no ${op.name}` };
  }
  for (const [id, input] of Object.entries(graph.inputs)) {
    const where = input.constant ? 'constant' : 'input';
    const l = limits[where];
    if (l?.dataTypes && !l.dataTypes.includes(input.descriptor.dataType)) {
      return { status: 'skip', message: `${where} ${id}: ${input.descriptor.dataType} is not in opSupportLimits()` };
    }
  }
  for (const [id, v] of [...Object.entries(graph.inputs), ...Object.entries(graph.expectedOutputs)]) {
    const bytes = elementCount(v.descriptor.shape) * ARRAY[v.descriptor.dataType].BYTES_PER_ELEMENT;
    if (bytes > limits.maxTensorByteLength) {
      return { status: 'skip', message: `${id}: ${bytes} bytes, over opSupportLimits().maxTensorByteLength ${limits.maxTensorByteLength}` };
    }
  }
  const builder = new MLGraphBuilder(ctx);
  const operands = new Map();
  const feeds = {};
  for (const [id, input] of Object.entries(graph.inputs)) {
    const d = { dataType: input.descriptor.dataType, shape: input.descriptor.shape };
    const data = typedArray(d, input.data);
    if (input.constant) {
      operands.set(id, builder.constant(d, data));
    } else {
      operands.set(id, builder.input(id, d));
      const t = await ctx.createTensor({ ...d, writable: true });
      created.push(t);
      ctx.writeTensor(t, data);
      feeds[id] = t;
    }
  }
  let ulp = 0;
  let abs = 0;
  for (const op of graph.operators) {
    const args = {};
    const positional = [];
    for (const a of op.arguments) {
      for (const [k, v] of Object.entries(a)) {
        const value = k === 'options' ? options(v, operands) : argument(v, operands);
        args[k] = value;
        positional.push(value);
      }
    }
    const outIds = Array.isArray(op.outputs) ? op.outputs : [op.outputs];
    const outDescs = outIds.filter((id) => graph.expectedOutputs[id]).map((id) => graph.expectedOutputs[id].descriptor);
    const operandArgs = Object.fromEntries(
      Object.entries(args).flatMap(([k, v]) =>
        k === 'options'
          ? Object.entries(v).filter(([, x]) => isOperand(x))
          : [[k, v]]),
    );
    const why = unsupportedTypes(limits, op.name, operandArgs, outDescs);
    if (why) return { status: 'skip', message: why };
    const [u, a] = tolerance(op.name, args);
    ulp += u;
    abs += a;
    const result = builder[op.name](...positional);
    const results = Array.isArray(result) ? result : [result];
    outIds.forEach((id, i) => operands.set(id, results[i]));
  }
  const named = {};
  const outputs = {};
  for (const [id, e] of Object.entries(graph.expectedOutputs)) {
    named[id] = operands.get(id);
    const t = await ctx.createTensor({ dataType: e.descriptor.dataType, shape: e.descriptor.shape, readable: true });
    created.push(t);
    outputs[id] = t;
  }
  const g = await builder.build(named);
  created.push(g);
  ctx.dispatch(g, feeds, outputs);
  for (const [id, e] of Object.entries(graph.expectedOutputs)) {
    const d = e.descriptor;
    const o = named[id];
    if (o.dataType !== d.dataType || o.shape.join() !== d.shape.join()) {
      return { status: 'fail', message: `${id}: operand is ${o.dataType}[${o.shape}], expected ${d.dataType}[${d.shape}]` };
    }
    const got = new ARRAY[d.dataType](await ctx.readTensor(outputs[id]));
    const want = typedArray(d, e.data);
    if (got.length !== want.length) return { status: 'fail', message: `${id}: ${got.length} elements, expected ${want.length}` };
    const float = d.dataType === 'float32' || d.dataType === 'float16';
    for (let i = 0; i < want.length; i++) {
      const g1 = got[i];
      const w = float ? round(want[i], d.dataType) : want[i];
      const ok = float
        ? (Number.isNaN(g1) && Number.isNaN(w)) || ulpDistance(g1, w, d.dataType) <= ulp || (abs > 0 && Math.abs(g1 - w) <= abs)
        : g1 === w;
      if (!ok) {
        return { status: 'fail', message: `${id}[${i}]: got ${g1}, expected ${w} (tolerance ${ulp} ULP / ${abs})` };
      }
    }
  }
  return { status: 'pass' };
}
