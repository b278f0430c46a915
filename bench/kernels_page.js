// In-page half of the kernel benchmark (bench/kernels.mjs, page kernels.html):
// one shape on one implementation per call of window.bench.cell(shape, impl). Every
// implementation gets the same float32 data, is warmed up, then timed over repeated runs ending
// with one read back to the CPU; the read-back result is checked against a float64 CPU reference.
//   impl: 'ours' (navigator.ml from pkg/, a WebGPU context), 'cpu' (navigator.ml, a CPU context:
//   createContext({accelerated: false})), 'ort' (onnxruntime-web, webgpu EP), 'ortwasm'
//   (onnxruntime-web, wasm EP, one thread), 'tfjs' (tfjs, webgpu backend), 'wgsl' (a plain
//   hand-written WGSL kernel on the page's own GPUDevice).
import { onnxModel } from '../tests/browser/onnx.js';

const F32 = 'float32';
const EPS = 1e-5; // layerNormalization epsilon
// ORT's wasm threads: the page's ?threads=N (1 unless it is cross-origin isolated).
const THREADS = Number(new URLSearchParams(location.search).get('threads') ?? 1);

export const SHAPES = {
  mm256: { kind: 'matmul', M: 256, K: 256, N: 256 },
  mm512: { kind: 'matmul', M: 512, K: 512, N: 512 },
  mm1024: { kind: 'matmul', M: 1024, K: 1024, N: 1024 },
  mm2048: { kind: 'matmul', M: 2048, K: 2048, N: 2048 },
  mm4096: { kind: 'matmul', M: 4096, K: 4096, N: 4096 },
  gemv: { kind: 'matmul', M: 1, K: 4096, N: 4096 },
  gemv8192: { kind: 'matmul', M: 1, K: 8192, N: 8192 },
  // The same products in float16 (inputs, weight and output; ours accumulates in float32).
  mm1024h: { kind: 'matmul', half: true, M: 1024, K: 1024, N: 1024 },
  mm2048h: { kind: 'matmul', half: true, M: 2048, K: 2048, N: 2048 },
  mm4096h: { kind: 'matmul', half: true, M: 4096, K: 4096, N: 4096 },
  gemvh: { kind: 'matmul', half: true, M: 1, K: 4096, N: 4096 },
  gemv8192h: { kind: 'matmul', half: true, M: 1, K: 8192, N: 8192 },
  mlp: { kind: 'mlp', D: 512, H: 2048 },
  // A transformer's feed-forward product with int8 weights, a scale per column:
  // x W with W = dequantizeLinear(q, scale, 0), one token and sixteen (all-MiniLM-L6's sizes).
  qgemv: { kind: 'matmul', quantized: true, M: 1, K: 384, N: 1536 },
  qmm16: { kind: 'matmul', quantized: true, M: 16, K: 384, N: 1536 },
  // Convolutions (nchw, oihw filters, bias): a mobile net's depthwise 3x3 and pointwise 1x1
  // (MobileNetV2 at 56x56), and a detector's 3x3 (YOLOv8n's 64 channels at 80x80).
  convdw: { kind: 'conv', N: 1, C: 96, H: 56, W: 56, O: 96, k: 3, groups: 96, pad: 1 },
  convpw: { kind: 'conv', N: 1, C: 144, H: 56, W: 56, O: 24, k: 1, groups: 1, pad: 0 },
  convdet: { kind: 'conv', N: 1, C: 64, H: 80, W: 80, O: 64, k: 3, groups: 1, pad: 1 },
  // YOLOv8n's other 3x3 layers (not in the default set: `--shapes convyolo32,...`).
  convyolo32: { kind: 'conv', N: 1, C: 32, H: 80, W: 80, O: 64, k: 3, groups: 1, pad: 1 },
  convyolo40: { kind: 'conv', N: 1, C: 64, H: 40, W: 40, O: 64, k: 3, groups: 1, pad: 1 },
  convyolo20: { kind: 'conv', N: 1, C: 128, H: 20, W: 20, O: 128, k: 3, groups: 1, pad: 1 },
  convyolo10: { kind: 'conv', N: 1, C: 256, H: 10, W: 10, O: 256, k: 3, groups: 1, pad: 1 },
  // MobileNetV2's and the PP-OCR detector's downsampling depthwise layers: stride 2.
  convdw2: { kind: 'conv', N: 1, C: 144, H: 56, W: 56, O: 144, k: 3, groups: 144, pad: 1, stride: 2 },
};

/** A conv shape's output height and width (symmetric padding, stride 1 when not given). */
function convOut(s) {
  const st = s.stride ?? 1;
  return [Math.floor((s.H + 2 * s.pad - s.k) / st) + 1, Math.floor((s.W + 2 * s.pad - s.k) / st) + 1];
}

/** Multiply-adds of a shape, times 2. */
export function flops(name) {
  const s = SHAPES[name];
  if (s.kind === 'matmul') return 2 * s.M * s.N * s.K;
  if (s.kind === 'conv') return 2 * s.N * s.O * convOut(s)[0] * convOut(s)[1] * (s.C / s.groups) * s.k * s.k;
  return 2 * 2 * s.D * s.H;
}

// Deterministic data (mulberry32), uniform in [-1, 1).
function random(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
function fill(n, rnd, scale = 1, offset = 0) {
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = offset + scale * (2 * rnd() - 1);
  return a;
}

// float16 bits of a float32 value, rounded to nearest even (finite values of |v| < 65504).
const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);
function halfBits(v) {
  f32[0] = v;
  const x = u32[0];
  const sign = (x >>> 16) & 0x8000;
  const e = ((x >>> 23) & 0xff) - 127 + 15;
  if (e <= 0) { // subnormal half: shift the mantissa with its hidden bit, round to even
    if (e < -10) return sign;
    const m = (x & 0x7fffff) | 0x800000;
    const shift = 14 - e;
    const half = m >>> shift;
    const rest = m & ((1 << shift) - 1);
    const mid = 1 << (shift - 1);
    return sign | (half + (rest > mid || (rest === mid && (half & 1)) ? 1 : 0));
  }
  const m = x & 0x7fffff;
  const bits = (e << 10) | (m >>> 13);
  const rest = m & 0x1fff;
  return sign | (bits + (rest > 0x1000 || (rest === 0x1000 && (bits & 1)) ? 1 : 0));
}
export function halfValue(h) {
  const e = (h >>> 10) & 0x1f;
  const m = h & 0x3ff;
  const v = e === 0 ? m * 2 ** -24 : e === 31 ? (m ? NaN : Infinity) : (1 + m / 1024) * 2 ** (e - 15);
  return h & 0x8000 ? -v : v;
}
/** float16 bits of `a`, and `a` rounded to those values (what the float64 check reads). */
function toHalf(a) {
  const bits = Uint16Array.from(a, halfBits);
  return [bits, Float32Array.from(bits, halfValue)];
}

const cache = new Map();
export function data(name) {
  if (cache.has(name)) return cache.get(name);
  const s = SHAPES[name];
  const rnd = random(name.length * 7919 + (s.N ?? s.H));
  let d;
  if (s.kind === 'matmul' && s.quantized) {
    // B holds the dequantized values, which the float64 check reads.
    const Q = Int8Array.from({ length: s.K * s.N }, () => Math.round(254 * rnd() - 127));
    const S = Float32Array.from({ length: s.N }, () => (0.5 + rnd()) / 127 / Math.sqrt(s.K));
    d = { A: fill(s.M * s.K, rnd), Q, S, B: Float32Array.from(Q, (q, i) => q * S[i % s.N]) };
  } else if (s.kind === 'matmul' && s.half) {
    const [[Ah, A], [Bh, B]] = [toHalf(fill(s.M * s.K, rnd)), toHalf(fill(s.K * s.N, rnd))];
    d = { A, B, Ah, Bh };
  } else if (s.kind === 'matmul') {
    d = { A: fill(s.M * s.K, rnd), B: fill(s.K * s.N, rnd) };
  } else if (s.kind === 'conv') {
    const fanIn = (s.C / s.groups) * s.k * s.k;
    d = { x: fill(s.N * s.C * s.H * s.W, rnd), F: fill(s.O * fanIn, rnd, 1 / Math.sqrt(fanIn)), bias: fill(s.O, rnd, 0.1) };
  } else {
    // Weights scaled like a trained layer's (1/sqrt(fan-in)) so gelu sees values around 1.
    d = {
      x: fill(s.D, rnd), W1: fill(s.D * s.H, rnd, 1 / Math.sqrt(s.D)), W2: fill(s.H * s.D, rnd, 1 / Math.sqrt(s.H)),
      b2: fill(s.D, rnd, 0.1), gamma: fill(s.D, rnd, 0.5, 1), beta: fill(s.D, rnd, 0.1),
    };
  }
  cache.clear(); // one shape at a time: the 2048 and GEMV inputs are 32 and 64 MiB
  cache.set(name, d);
  return d;
}

// erf by Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7), enough for a 1e-3 check.
function erf(x) {
  const t = 1 / (1 + 0.3275911 * Math.abs(x));
  const y = 1 - ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * Math.exp(-x * x);
  return x < 0 ? -y : y;
}

/** Checks `out` against a float64 reference; returns { ok, checked, worst } (worst: error / tolerance). */
export function check(name, out) {
  const s = SHAPES[name];
  const d = data(name);
  let worst = 0;
  let checked = 0;
  const [oh, ow] = s.kind === 'conv' ? convOut(s) : [0, 0];
  const length = { matmul: s.M * s.N, conv: s.N * s.O * oh * ow, mlp: s.D }[s.kind];
  let bad = !(out && out.length === length);
  if (!bad && s.kind === 'conv') {
    // 64 random outputs; the tolerance scales with sum |x w|.
    const rnd = random(54321);
    const cpg = s.C / s.groups;
    const opg = s.O / s.groups;
    for (let p = 0; p < 64; p++) {
      const [o, y, x] = [Math.floor(rnd() * s.O), Math.floor(rnd() * oh), Math.floor(rnd() * ow)];
      const st = s.stride ?? 1;
      const g = Math.floor(o / opg);
      let ref = d.bias[o];
      let mag = Math.abs(ref);
      for (let c = 0; c < cpg; c++) {
        for (let i = 0; i < s.k; i++) {
          for (let j = 0; j < s.k; j++) {
            const [yy, xx] = [y * st + i - s.pad, x * st + j - s.pad];
            if (yy < 0 || yy >= s.H || xx < 0 || xx >= s.W) continue;
            const v = d.x[((g * cpg + c) * s.H + yy) * s.W + xx] * d.F[((o * cpg + c) * s.k + i) * s.k + j];
            ref += v;
            mag += Math.abs(v);
          }
        }
      }
      const e = Math.abs(out[(o * oh + y) * ow + x] - ref) / (1e-4 * mag + 1e-6);
      worst = Math.max(worst, Number.isNaN(e) ? Infinity : e);
      checked++;
    }
  } else if (!bad && s.kind === 'matmul') {
    // 64 random elements and the two corners; the tolerance scales with sum |a b| (float32 sums).
    const rnd = random(12345);
    const picks = [[0, 0], [s.M - 1, s.N - 1]];
    for (let p = 0; p < 64; p++) picks.push([Math.floor(rnd() * s.M), Math.floor(rnd() * s.N)]);
    for (const [i, j] of picks) {
      let ref = 0;
      let mag = 0;
      for (let k = 0; k < s.K; k++) {
        const v = d.A[i * s.K + k] * d.B[k * s.N + j];
        ref += v;
        mag += Math.abs(v);
      }
      // A float16 output is also rounded once (relative 2^-11).
      const e = Math.abs(out[i * s.N + j] - ref) / (1e-4 * mag + (s.half ? 1e-3 * Math.abs(ref) : 0) + 1e-6);
      worst = Math.max(worst, Number.isNaN(e) ? Infinity : e);
      checked++;
    }
  } else if (!bad) {
    const { D, H } = s;
    const h = new Float64Array(H);
    for (let k = 0; k < D; k++) for (let j = 0; j < H; j++) h[j] += d.x[k] * d.W1[k * H + j];
    for (let j = 0; j < H; j++) h[j] = 0.5 * h[j] * (1 + erf(h[j] / Math.SQRT2));
    const y = Float64Array.from(d.b2);
    for (let k = 0; k < H; k++) for (let j = 0; j < D; j++) y[j] += h[k] * d.W2[k * D + j];
    const mean = y.reduce((a, v) => a + v, 0) / D;
    const variance = y.reduce((a, v) => a + (v - mean) ** 2, 0) / D;
    for (let j = 0; j < D; j++) {
      const ref = ((y[j] - mean) / Math.sqrt(variance + EPS)) * d.gamma[j] + d.beta[j];
      const e = Math.abs(out[j] - ref) / (1e-3 + 1e-3 * Math.abs(ref));
      worst = Math.max(worst, Number.isNaN(e) ? Infinity : e);
      checked++;
    }
  }
  bad ||= !(worst <= 1);
  return { ok: !bad, checked, worst };
}

/**
 * Warm-up, then `iters` runs timed up to the end of the final read back. The first run compiles;
 * a second untimed one sizes `iters` to about `budgetMs` unless the first already exceeded it.
 * With `slope`, also the steady time a run (`slopeMs`): batches of n and 2n runs, each ended by
 * one read, three times; the median of (t(2n) - t(n)) / n leaves the read's latency out, which in
 * Chromium on a GPU can exceed the runs themselves when n is small.
 */
// `convert` (float16 words to numbers, for the check) runs after the clock stops: widening 16M
// halves in JavaScript takes longer than the product it checks.
export async function measure(step, finish, { budgetMs, maxIters, slope = false }, convert = (out) => out) {
  const batch = async (n) => {
    const t0 = performance.now();
    for (let i = 0; i < n; i++) await step();
    const out = await finish();
    return { ms: performance.now() - t0, out };
  };
  let one = (await batch(1)).ms;
  // Warm-up: wasm engines optimise hot functions after they have run for a while (each
  // library's alike), so short products run for up to 300 ms more before the timed runs.
  const warm = performance.now();
  for (let i = 0; i < 200 && one < budgetMs && performance.now() - warm < Math.min(300, budgetMs); i++) {
    one = (await batch(1)).ms;
  }
  let iters = Math.max(1, Math.min(maxIters, Math.round(budgetMs / one)));
  if (slope) {
    // Sized by the steady time a run, not by one run and its read.
    const per = Math.max(((await batch(8)).ms - (await batch(4)).ms) / 4, 1e-3);
    iters = Math.max(4, Math.min(8 * maxIters, Math.round(budgetMs / 3 / per)));
  }
  // window: the timed runs in wall-clock ms, to match against GPU clock samples (nvidia-smi).
  const start = Date.now();
  const timed = await batch(iters);
  const result = { ms: timed.ms / iters, iters, out: convert(timed.out) };
  if (slope) {
    const slopes = [];
    for (let i = 0; i < 3; i++) {
      const n = i === 0 ? timed.ms : (await batch(iters)).ms;
      slopes.push(((await batch(2 * iters)).ms - n) / iters);
    }
    result.slopeMs = slopes.sort((a, b) => a - b)[1];
  }
  result.window = [start, Date.now()];
  return result;
}

// ---- ours: navigator.ml (the polyfill installed from pkg/) ----
async function ours(name, opts, contextOptions = {}) {
  const s = SHAPES[name];
  const d = data(name);
  const context = await navigator.ml.createContext(contextOptions);
  const b = new MLGraphBuilder(context);
  const c = (shape, values) => b.constant({ dataType: F32, shape }, values);
  const dataType = s.half ? 'float16' : F32;
  let inShape;
  let outShape;
  let outputs;
  let input;
  if (s.kind === 'matmul' && s.half) {
    [inShape, outShape, input] = [[s.M, s.K], [s.M, s.N], d.Ah];
    const w = b.constant({ dataType, shape: [s.K, s.N] }, d.Bh);
    outputs = { y: b.matmul(b.input('x', { dataType, shape: inShape }), w) };
  } else if (s.kind === 'matmul') {
    [inShape, outShape, input] = [[s.M, s.K], [s.M, s.N], d.A];
    const w = s.quantized
      ? b.dequantizeLinear(b.constant({ dataType: 'int8', shape: [s.K, s.N] }, d.Q), c([1, s.N], d.S),
        b.constant({ dataType: 'int8', shape: [1, s.N] }, new Int8Array(s.N)))
      : c([s.K, s.N], d.B);
    outputs = { y: b.matmul(b.input('x', { dataType: F32, shape: inShape }), w) };
  } else if (s.kind === 'conv') {
    [inShape, outShape, input] = [[s.N, s.C, s.H, s.W], [s.N, s.O, ...convOut(s)], d.x];
    const filter = c([s.O, s.C / s.groups, s.k, s.k], d.F);
    outputs = { y: b.conv2d(b.input('x', { dataType: F32, shape: inShape }), filter, {
      padding: [s.pad, s.pad, s.pad, s.pad], strides: [s.stride ?? 1, s.stride ?? 1], groups: s.groups, bias: c([s.O], d.bias),
    }) };
  } else {
    [inShape, outShape, input] = [[1, s.D], [1, s.D], d.x];
    const h = b.gelu(b.matmul(b.input('x', { dataType: F32, shape: inShape }), c([s.D, s.H], d.W1)));
    const y = b.add(b.matmul(h, c([s.H, s.D], d.W2)), c([s.D], d.b2));
    outputs = { y: b.layerNormalization(y, { axes: [1], epsilon: EPS, scale: c([s.D], d.gamma), bias: c([s.D], d.beta)}) };
  }
  const graph = await b.build(outputs);
  const x = await context.createTensor({ dataType, shape: inShape, writable: true });
  const y = await context.createTensor({ dataType, shape: outShape, readable: true });
  context.writeTensor(x, input);
  const values = (bytes) => (s.half ? Float32Array.from(new Uint16Array(bytes), halfValue) : new Float32Array(bytes));
  try {
    const r = await measure(() => context.dispatch(graph, { x }, { y }), () => context.readTensor(y), opts, values);
    return { ...r, backend: `navigator.ml (webnn-wgpu, pkg/), MLContext.accelerated ${context.accelerated}` };
  } finally {
    graph.destroy();
    x.destroy();
    y.destroy();
    context.destroy();
  }
}

// ---- onnxruntime-web, webgpu execution provider, input and output kept on the GPU ----
async function ortModel(name) {
  const s = SHAPES[name];
  const d = data(name);
  if (s.kind === 'matmul' && s.quantized) {
    return onnxModel({
      inputs: [['x', [s.M, s.K]]], outputs: [['y', [s.M, s.N]]],
      initializers: [['Q', [s.K, s.N], d.Q], ['S', [s.N], d.S], ['Z', [s.N], new Int8Array(s.N)]],
      nodes: [['DequantizeLinear', ['Q', 'S', 'Z'], ['W'], { axis: 1 }], ['MatMul', ['x', 'W'], ['y']]],
    });
  }
  if (s.kind === 'matmul') {
    return onnxModel({
      inputs: [['x', [s.M, s.K]]], outputs: [['y', [s.M, s.N]]],
      initializers: [['W', [s.K, s.N], d.B]], nodes: [['MatMul', ['x', 'W'], ['y']]],
    });
  }
  if (s.kind === 'conv') {
    return onnxModel({
      inputs: [['x', [s.N, s.C, s.H, s.W]]], outputs: [['y', [s.N, s.O, ...convOut(s)]]],
      initializers: [['F', [s.O, s.C / s.groups, s.k, s.k], d.F], ['B', [s.O], d.bias]],
      nodes: [['Conv', ['x', 'F', 'B'], ['y'], { group: s.groups, pads: [s.pad, s.pad, s.pad, s.pad], kernel_shape: [s.k, s.k], strides: [s.stride ?? 1, s.stride ?? 1] }]],
    });
  }
  // gelu as 0.5 x (1 + erf(x / sqrt 2)): opset 17 has no Gelu (ORT fuses the pattern itself).
  return onnxModel({
    inputs: [['x', [1, s.D]]], outputs: [['y', [1, s.D]]],
    initializers: [
      ['W1', [s.D, s.H], d.W1], ['W2', [s.H, s.D], d.W2], ['b2', [s.D], d.b2], ['gamma', [s.D], d.gamma],
      ['beta', [s.D], d.beta], ['sqrt2', [], Float32Array.of(Math.SQRT2)], ['one', [], Float32Array.of(1)],
      ['half', [], Float32Array.of(0.5)],
    ],
    nodes: [
      ['MatMul', ['x', 'W1'], ['h']], ['Div', ['h', 'sqrt2'], ['hs']], ['Erf', ['hs'], ['e']],
      ['Add', ['e', 'one'], ['e1']], ['Mul', ['h', 'e1'], ['he']], ['Mul', ['he', 'half'], ['g']],
      ['MatMul', ['g', 'W2'], ['m']], ['Add', ['m', 'b2'], ['z']],
      ['LayerNormalization', ['z', 'gamma', 'beta'], ['y'], { axis: -1, epsilon: EPS }],
    ],
  });
}

// float16 cells run on ours only: tfjs has no float16 type, and onnxruntime-web's WebGPU EP
// and the plain kernel would need WebGPU's "shader-f16" (not built here: the adapters this page
// has run on lack it, so the reason is reported with the adapter's answer).
async function noHalf(name, who) {
  if (!SHAPES[name].half) return;
  const adapter = await navigator.gpu?.requestAdapter();
  throw new Error(`${who}: no float16 cell (tfjs has no float16; ORT's WebGPU EP and plain WGSL need shader-f16; ` +
    `this adapter ${adapter?.features.has('shader-f16') ? 'has' : 'lacks'} it)`);
}

async function ortRun(name, opts) {
  await noHalf(name, 'onnxruntime-web');
  const ort = globalThis.ort;
  const s = SHAPES[name];
  const d = data(name);
  ort.env.wasm.wasmPaths = new URL('/node_modules/onnxruntime-web/dist/', location.href).href;
  ort.env.wasm.numThreads = THREADS;
  // At verbose level ORT logs where the partitioner placed the nodes ("All nodes placed on
  // [WebGpuExecutionProvider]"); the driver reads that from the console to tell whether any node
  // fell back to the CPU EP (wasm). The runs themselves log errors only.
  const session = await ort.InferenceSession.create(await ortModel(name), {
    executionProviders: ['webgpu'], preferredOutputLocation: 'gpu-buffer', graphOptimizationLevel: 'all',
    logSeverityLevel: 0, logVerbosityLevel: 1,
  });
  const runOptions = { logSeverityLevel: 3 };
  const [inShape, input] = { matmul: [[s.M, s.K], d.A], conv: [[s.N, s.C, s.H, s.W], d.x], mlp: [[1, s.D], d.x] }[s.kind];
  const device = await ort.env.webgpu.device;
  const buffer = device.createBuffer({
    size: input.byteLength, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST,
  });
  device.queue.writeBuffer(buffer, 0, input);
  const feeds = { x: ort.Tensor.fromGpuBuffer(buffer, { dataType: F32, dims: inShape }) };
  let y = null;
  let where = '';
  try {
    const r = await measure(async () => {
      y?.dispose();
      y = (await session.run(feeds, runOptions)).y;
      where = y.location;
    }, async () => new Float32Array(await y.getData()), opts);
    return { ...r, backend: `onnxruntime-web ${ort.env.versions?.web ?? ''} EP webgpu (output on ${where})` };
  } finally {
    y?.dispose();
    await session.release();
    buffer.destroy();
  }
}

// ---- onnxruntime-web, wasm execution provider (the CPU library a visitor without a GPU gets) ----
async function ortWasm(name, opts) {
  await noHalf(name, 'onnxruntime-web');
  const ort = globalThis.ort;
  const s = SHAPES[name];
  const d = data(name);
  ort.env.wasm.wasmPaths = new URL('/node_modules/onnxruntime-web/dist/', location.href).href;
  ort.env.wasm.numThreads = THREADS;
  const session = await ort.InferenceSession.create(await ortModel(name), {
    executionProviders: ['wasm'], graphOptimizationLevel: 'all',
  });
  const [inShape, input] = { matmul: [[s.M, s.K], d.A], conv: [[s.N, s.C, s.H, s.W], d.x], mlp: [[1, s.D], d.x] }[s.kind];
  const feeds = { x: new ort.Tensor(F32, input, inShape) };
  let y = null;
  try {
    const r = await measure(async () => { y = (await session.run(feeds)).y; }, async () => y.data, opts);
    return { ...r, backend: `onnxruntime-web ${ort.env.versions?.web ?? ''} EP wasm, ${ort.env.wasm.numThreads} thread(s)` };
  } finally {
    await session.release();
  }
}

// ---- tfjs, webgpu backend ----
async function tfjs(name, opts) {
  await noHalf(name, 'tfjs');
  const tf = globalThis.tf;
  if (!(await tf.setBackend('webgpu'))) throw new Error('tf.setBackend("webgpu") failed');
  await tf.ready();
  if (tf.getBackend() !== 'webgpu') throw new Error(`tfjs backend is ${tf.getBackend()}, not webgpu`);
  const s = SHAPES[name];
  const d = data(name);
  const keep = [];
  if (s.kind === 'conv') throw new Error('the tfjs cell has no convolution');
  const t = (values, shape) => { const x = tf.tensor(values, shape, F32); keep.push(x); return x; };
  let run;
  if (s.kind === 'matmul') {
    const [x, w] = [t(d.A, [s.M, s.K]), t(d.B, [s.K, s.N])];
    run = () => tf.matMul(x, w);
  } else {
    const [x, W1, W2, b2, gamma, beta] = [t(d.x, [1, s.D]), t(d.W1, [s.D, s.H]), t(d.W2, [s.H, s.D]),
      t(d.b2, [s.D]), t(d.gamma, [s.D]), t(d.beta, [s.D])];
    run = () => tf.tidy(() => {
      const h = tf.matMul(x, W1);
      const g = tf.mul(tf.mul(h, 0.5), tf.add(tf.erf(tf.mul(h, Math.SQRT1_2)), 1));
      const z = tf.add(tf.matMul(g, W2), b2);
      const { mean, variance } = tf.moments(z, -1, true);
      return tf.add(tf.mul(tf.mul(tf.sub(z, mean), tf.rsqrt(tf.add(variance, EPS))), gamma), beta);
    });
  }
  let y = null;
  try {
    const r = await measure(() => { y?.dispose(); y = run(); }, async () => new Float32Array(await y.data()), opts);
    return { ...r, backend: `tfjs ${tf.version_core} backend ${tf.getBackend()}` };
  } finally {
    y?.dispose();
    keep.forEach((x) => x.dispose());
  }
}

// ---- a plain hand-written WGSL kernel on raw WebGPU (matmul and GEMV only) ----
// Matmul: 64x64 output tile per 16x16 workgroup, 4x4 per invocation, K in steps of 16 through
// workgroup memory. GEMV (M = 1): 4 adjacent columns per invocation, vec4 loads along a row of B.
const MATMUL_WGSL = `
struct Dims { M: u32, N: u32, K: u32 }
@group(0) @binding(0) var<storage, read> A: array<f32>;
@group(0) @binding(1) var<storage, read> B: array<f32>;
@group(0) @binding(2) var<storage, read_write> C: array<f32>;
@group(0) @binding(3) var<uniform> d: Dims;
var<workgroup> As: array<f32, 1024>; // [k][row], 16 x 64
var<workgroup> Bs: array<f32, 1024>; // [k][col], 16 x 64
@compute @workgroup_size(16, 16)
fn main(@builtin(local_invocation_id) l: vec3u, @builtin(workgroup_id) w: vec3u) {
  let tid = l.y * 16u + l.x;
  var acc: array<vec4f, 4>;
  for (var k0 = 0u; k0 < d.K; k0 += 16u) {
    for (var i = 0u; i < 4u; i++) {
      let e = tid + i * 256u;
      As[(e % 16u) * 64u + e / 16u] = A[(w.y * 64u + e / 16u) * d.K + k0 + e % 16u];
      Bs[e] = B[(k0 + e / 64u) * d.N + w.x * 64u + e % 64u];
    }
    workgroupBarrier();
    for (var k = 0u; k < 16u; k++) {
      let a = vec4f(As[k * 64u + l.y * 4u], As[k * 64u + l.y * 4u + 1u], As[k * 64u + l.y * 4u + 2u], As[k * 64u + l.y * 4u + 3u]);
      let b = vec4f(Bs[k * 64u + l.x * 4u], Bs[k * 64u + l.x * 4u + 1u], Bs[k * 64u + l.x * 4u + 2u], Bs[k * 64u + l.x * 4u + 3u]);
      acc[0] += a.x * b; acc[1] += a.y * b; acc[2] += a.z * b; acc[3] += a.w * b;
    }
    workgroupBarrier();
  }
  for (var r = 0u; r < 4u; r++) {
    let o = (w.y * 64u + l.y * 4u + r) * d.N + w.x * 64u + l.x * 4u;
    C[o] = acc[r].x; C[o + 1u] = acc[r].y; C[o + 2u] = acc[r].z; C[o + 3u] = acc[r].w;
  }
}`;
const GEMV_WGSL = `
struct Dims { M: u32, N: u32, K: u32 }
@group(0) @binding(0) var<storage, read> A: array<f32>;
@group(0) @binding(1) var<storage, read> B: array<vec4f>;
@group(0) @binding(2) var<storage, read_write> C: array<vec4f>;
@group(0) @binding(3) var<uniform> d: Dims;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3u) {
  let n4 = d.N / 4u;
  if (g.x >= n4) { return; }
  var acc = vec4f(0.0);
  for (var k = 0u; k < d.K; k++) { acc += A[k] * B[k * n4 + g.x]; }
  C[g.x] = acc;
}`;

async function wgsl(name, opts) {
  await noHalf(name, 'plain WGSL');
  const s = SHAPES[name];
  if (s.kind !== 'matmul') throw new Error('no hand-written kernel for this shape');
  const d = data(name);
  const gemv = s.M === 1;
  if (gemv ? s.N % 4 : s.M % 64 || s.N % 64 || s.K % 16) throw new Error('shape not a multiple of the tile');
  const adapter = await navigator.gpu.requestAdapter();
  const device = await adapter.requestDevice({
    requiredLimits: { maxBufferSize: adapter.limits.maxBufferSize, maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize },
  });
  const U = GPUBufferUsage;
  const buffer = (size, usage, values) => {
    const b = device.createBuffer({ size, usage });
    if (values) device.queue.writeBuffer(b, 0, values);
    return b;
  };
  const a = buffer(d.A.byteLength, U.STORAGE | U.COPY_DST, d.A);
  const bw = buffer(d.B.byteLength, U.STORAGE | U.COPY_DST, d.B);
  const bytes = s.M * s.N * 4;
  const c = buffer(bytes, U.STORAGE | U.COPY_SRC);
  const readback = buffer(bytes, U.MAP_READ | U.COPY_DST);
  const dims = buffer(16, U.UNIFORM | U.COPY_DST, Uint32Array.of(s.M, s.N, s.K, 0));
  const pipeline = device.createComputePipeline({
    layout: 'auto', compute: { module: device.createShaderModule({ code: gemv ? GEMV_WGSL : MATMUL_WGSL }), entryPoint: 'main' },
  });
  const bindGroup = device.createBindGroup({
    layout: pipeline.getBindGroupLayout(0),
    entries: [a, bw, c, dims].map((b, binding) => ({ binding, resource: { buffer: b } })),
  });
  const step = () => {
    const enc = device.createCommandEncoder();
    const pass = enc.beginComputePass();
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, bindGroup);
    if (gemv) pass.dispatchWorkgroups(Math.ceil(s.N / 4 / 64));
    else pass.dispatchWorkgroups(s.N / 64, s.M / 64);
    pass.end();
    device.queue.submit([enc.finish()]);
  };
  const finish = async () => {
    const enc = device.createCommandEncoder();
    enc.copyBufferToBuffer(c, 0, readback, 0, bytes);
    device.queue.submit([enc.finish()]);
    await readback.mapAsync(GPUMapMode.READ);
    const out = new Float32Array(readback.getMappedRange().slice(0));
    readback.unmap();
    return out;
  };
  try {
    const r = await measure(step, finish, opts);
    return { ...r, backend: 'raw WebGPU (page GPUDevice)' };
  } finally {
    device.destroy();
  }
}

const IMPLS = { ours, cpu: (name, opts) => ours(name, opts, { accelerated: false }), ort: ortRun, ortwasm: ortWasm, tfjs, wgsl };

export async function adapterInfo() {
  const adapter = await navigator.gpu?.requestAdapter();
  if (!adapter) return null;
  const i = adapter.info ?? {};
  return { vendor: i.vendor, architecture: i.architecture, device: i.device, description: i.description, userAgent: navigator.userAgent };
}

/** Runs `impl` on shape `name`; resolves to { ms, iters, backend, check } or { error }. */
export async function cell(name, impl, opts) {
  try {
    const r = await IMPLS[impl](name, opts);
    const c = check(name, r.out);
    return { ms: r.ms, slopeMs: r.slopeMs, iters: r.iters, window: r.window, backend: r.backend, check: c };
  } catch (e) {
    return { error: `${e?.name ?? 'Error'}: ${e?.message ?? e}` };
  }
}
