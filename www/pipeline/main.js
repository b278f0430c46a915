// Case 1 of USE-CASES.md in the page: a text encoder, a denoiser and a decoder (the shapes of
// examples/pipeline/stages.rs, so the byte counts match the native example), run twice: with
// everything resident, and in a context whose memoryBudget holds the largest stage (plus the
// pipeline's own tensors) but not all three, where the runtime swaps the least recently used
// stage out to host memory. Device bytes (memoryInfo()) are sampled after every build and
// dispatch and plotted; the decoded pixels of both runs must be bit-identical. Each stage is
// saved to the graph cache (context.saveGraph) once built: later runs and visits load it
// (context.loadGraph) instead of building it; ?cache=0 builds every time.
import { install, init } from '../../pkg/index.js';

export const TOKENS = 77;
export const VOCAB = 1024;
export const WIDTH = 256;
export const LATENTS = 64;
export const PATCH = 48; // a 4x4 RGB patch per latent
const STEPS = Number(new URLSearchParams(location.search).get('steps') ?? 4);
const CACHE = new URLSearchParams(location.search).get('cache') !== '0';
const MIB = 1 << 20;
const $ = (id) => document.getElementById(id);
const f32 = (shape) => ({ dataType: 'float32', shape });

// Deterministic weights in [-scale, scale) (xorshift32).
function weights(seed, n, scale) {
  let s = (seed * 0x9e3779b9) >>> 0 || 1;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    s ^= s << 13; s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5; s >>>= 0;
    out[i] = (s / 2 ** 32 * 2 - 1) * scale;
  }
  return out;
}

class Stage {
  constructor(context, seed) {
    this.b = new MLGraphBuilder(context);
    this.seed = seed;
  }

  weight(shape) {
    const n = shape.reduce((a, d) => a * d, 1);
    return this.b.constant(f32(shape), weights(++this.seed.value, n, 1 / Math.sqrt(shape[0])));
  }

  // x + W2 gelu(W1 x + b1): the feed-forward block of a transformer layer.
  mlp(x, hidden) {
    const { b } = this;
    const w1 = this.weight([WIDTH, hidden]);
    const b1 = this.weight([hidden]);
    const w2 = this.weight([hidden, WIDTH]);
    return b.add(x, b.matmul(b.gelu(b.add(b.matmul(x, w1), b1)), w2));
  }
}

// The three stages, each a function of a Stage (its builder) that builds its graph.
const STAGES = {
  // Text encoder: token embedding, then two feed-forward blocks (CLIP/T5 stand-in).
  encoder(s) {
    let x = s.b.gather(s.weight([VOCAB, WIDTH]), s.b.input('ids', { dataType: 'int32', shape: [TOKENS] }));
    for (let i = 0; i < 2; i++) x = s.mlp(x, 4 * WIDTH);
    return s.b.build({ embedding: x });
  },
  // Denoiser: latents conditioned on the mean text embedding, four wide blocks (the largest).
  denoiser(s) {
    const text = s.b.input('embedding', f32([TOKENS, WIDTH]));
    let x = s.b.add(s.b.input('latents', f32([LATENTS, WIDTH])), s.b.reduceMean(text, { axes: [0], keepDimensions: true }));
    for (let i = 0; i < 4; i++) x = s.mlp(x, 8 * WIDTH);
    return s.b.build({ latents: x });
  },
  // Decoder: one block, then every latent projected to a 4x4 RGB patch (VAE stand-in).
  decoder(s) {
    const x = s.mlp(s.b.input('latents', f32([LATENTS, WIDTH])), 2 * WIDTH);
    return s.b.build({ pixels: s.b.sigmoid(s.b.matmul(x, s.weight([WIDTH, PATCH]))) });
  },
};

// The seed each stage's weights start from: the stages draw 7, 12 and 4 weights in this order,
// so that a stage built after others were loaded from the cache gets the same weights.
const SEEDS = { encoder: 0, denoiser: 7, decoder: 19 };

// The stage `name`: from the graph cache, made resident as a build leaves it, or built and saved.
async function stage(context, name, build, how) {
  const key = `pipeline-demo/${name}`;
  if (CACHE && typeof context.loadGraph === 'function') {
    try {
      const graph = await context.loadGraph(key);
      await graph.swapIn();
      how.loaded.push(name);
      return graph;
    } catch (e) {
      if (e.name !== 'NotFoundError' && e.name !== 'DataError') throw e;
    }
  }
  const graph = await build(new Stage(context, { value: SEEDS[name] }));
  if (CACHE && typeof context.saveGraph === 'function') await context.saveGraph(key, graph);
  how.built.push(name);
  return graph;
}

// The three stages made one after the other; `after(label)` runs after each. Resolves to the
// graphs, how each was made and the time it took.
async function buildPipeline(context, after) {
  const graphs = {};
  const how = { loaded: [], built: [] };
  const t0 = performance.now();
  for (const [name, build] of Object.entries(STAGES)) {
    graphs[name] = await stage(context, name, build, how);
    after(`build ${name}`);
  }
  return { graphs, how, readyMs: performance.now() - t0 };
}

// Device bytes of the tensors a run creates (inputs, outputs and the latents ping-pong).
export const TENSOR_BYTES = 4 * (TOKENS + TOKENS * WIDTH + 2 * LATENTS * WIDTH + LATENTS * PATCH);

// Builds and runs the pipeline in `context`, sampling memoryInfo().deviceBytes after every step.
async function run(context) {
  const trace = [];
  const sample = (label) => trace.push({ label, deviceBytes: context.memoryInfo().deviceBytes });
  sample('start');
  const { graphs: p, how, readyMs } = await buildPipeline(context, sample);
  const tensor = (descriptor, readable = false) => context.createTensor({ ...descriptor, readable, writable: true });
  const ids = await tensor({ dataType: 'int32', shape: [TOKENS] });
  context.writeTensor(ids, Int32Array.from({ length: TOKENS }, (_, i) => (i * 37 + 11) % VOCAB));
  const text = await tensor(f32([TOKENS, WIDTH]));
  let src = await tensor(f32([LATENTS, WIDTH]));
  let dst = await tensor(f32([LATENTS, WIDTH]));
  context.writeTensor(src, weights(99, LATENTS * WIDTH, 1));
  const pixels = await tensor(f32([LATENTS, PATCH]), true);
  sample('tensors');
  const t0 = performance.now();
  context.dispatch(p.encoder, { ids }, { embedding: text });
  sample('encoder');
  for (let i = 0; i < STEPS; i++) {
    context.dispatch(p.denoiser, { latents: src, embedding: text }, { latents: dst });
    sample(`denoiser ${i + 1}`);
    [src, dst] = [dst, src];
  }
  context.dispatch(p.decoder, { latents: src }, { pixels });
  sample('decoder');
  const result = new Float32Array(await context.readTensor(pixels));
  const ms = performance.now() - t0;
  const stages = Object.fromEntries(Object.entries(p).map(([name, g]) => [name, g.residency]));
  const info = context.memoryInfo();
  for (const t of [ids, text, src, dst, pixels]) t.destroy();
  for (const g of Object.values(p)) g.destroy();
  return { trace, pixels: result, ms, stages, info, how, readyMs, peak: Math.max(...trace.map((t) => t.deviceBytes)) };
}

// Each stage's device bytes (constants plus intermediates): what a context holds after building
// it as its only graph.
async function stageSizes() {
  const sizes = {};
  for (const [name, build] of Object.entries(STAGES)) {
    const context = await navigator.ml.createContext();
    await build(new Stage(context, { value: SEEDS[name] }));
    sizes[name] = context.memoryInfo().deviceBytes;
    context.destroy();
  }
  return sizes;
}

function plot(runs, budget) {
  const W = 760, H = 320, L = 60, R = 150, T = 20, B = 70;
  const n = Math.max(...runs.map((r) => r.trace.length));
  const ymax = Math.ceil(Math.max(...runs.map((r) => r.peak)) / MIB / 5) * 5 + 5;
  const X = (i) => L + (i / (n - 1)) * (W - L - R);
  const Y = (bytes) => T + (1 - bytes / MIB / ymax) * (H - T - B);
  const svg = [`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" font-size="11" font-family="system-ui, sans-serif">`];
  for (let v = 0; v <= ymax; v += 5) {
    svg.push(`<line x1="${L}" x2="${W - R}" y1="${Y(v * MIB)}" y2="${Y(v * MIB)}" stroke="#eee"/>`);
    svg.push(`<text x="${L - 6}" y="${Y(v * MIB) + 4}" text-anchor="end">${v}</text>`);
  }
  svg.push(`<text x="14" y="${(T + H - B) / 2}" transform="rotate(-90 14 ${(T + H - B) / 2})" text-anchor="middle">device MiB</text>`);
  runs[0].trace.forEach((t, i) => {
    svg.push(`<text x="${X(i)}" y="${H - B + 12}" transform="rotate(40 ${X(i)} ${H - B + 12})">${t.label}</text>`);
  });
  svg.push(`<line x1="${L}" x2="${W - R}" y1="${Y(budget)}" y2="${Y(budget)}" stroke="#c60" stroke-dasharray="5 4"/>`);
  svg.push(`<text x="${W - R + 6}" y="${Y(budget) + 14}" fill="#c60">budget ${(budget / MIB).toFixed(2)}</text>`);
  for (const r of runs) {
    const pts = r.trace.map((t, i) => `${X(i)},${Y(t.deviceBytes)}`).join(' ');
    svg.push(`<polyline points="${pts}" fill="none" stroke="${r.color}" stroke-width="2"/>`);
    r.trace.forEach((t, i) => svg.push(`<circle cx="${X(i)}" cy="${Y(t.deviceBytes)}" r="2.5" fill="${r.color}"><title>${t.label}: ${(t.deviceBytes / MIB).toFixed(2)} MiB</title></circle>`));
    const at = r.trace.findIndex((t) => t.deviceBytes === r.peak);
    svg.push(`<text x="${W - R + 6}" y="${Y(r.peak) - 4}" fill="${r.color}">peak ${(r.peak / MIB).toFixed(2)}</text>`);
    svg.push(`<line x1="${X(at)}" x2="${W - R}" y1="${Y(r.peak)}" y2="${Y(r.peak)}" stroke="${r.color}" stroke-width=".5"/>`);
  }
  svg.push('</svg>');
  return svg.join('');
}

async function main() {
  const params = new URLSearchParams(location.search);
  // The backend is chosen when the polyfill is installed: another one reloads the page.
  $('backend').value = params.get('backend') ?? 'auto';
  $('backend').onchange = () => {
    params.set('backend', $('backend').value);
    location.search = params.toString();
  };
  install({ force: true, backend: $('backend').value });
  await init();
  $('status').textContent = 'measuring the stages…';
  const sizes = await stageSizes();
  const budget = Math.max(...Object.values(sizes)) + TENSOR_BYTES;
  $('status').textContent = 'running with everything resident…';
  const resident = await run(await navigator.ml.createContext());
  $('status').textContent = `running under a budget of ${(budget / MIB).toFixed(2)} MiB…`;
  const swapped = await run(await navigator.ml.createContext({ memoryBudget: budget }));
  const identical = resident.pixels.length === swapped.pixels.length && resident.pixels.every((v, i) => Object.is(v, swapped.pixels[i]));
  resident.color = '#36c';
  swapped.color = '#2a2';
  $('plot').innerHTML = plot([resident, swapped], budget);
  const mib = (b) => `${(b / MIB).toFixed(2)} MiB`;
  $('sizes').innerHTML = Object.entries(sizes).map(([k, v]) => `<tr><th>${k}</th><td>${mib(v)}</td></tr>`).join('');
  $('runs').innerHTML = [
    ['all resident', resident, '–'],
    [`budget ${mib(budget)} (LRU)`, swapped, mib(budget)],
  ].map(([name, r]) => `<tr><th><span style="color:${r.color}">■</span> ${name}</th><td>${mib(r.peak)}</td><td>${r.info.swapIns}</td><td>${r.info.swapOuts}</td><td>${(r.info.bytesUploaded / MIB).toFixed(2)} MiB</td><td>${r.ms.toFixed(0)} ms</td></tr>`).join('');
  $('identical').textContent = identical ? 'bit-identical' : 'DIFFERENT';
  // FNV-1a of the pixels' bytes: a reload's run must give the same.
  let pixelHash = 0x811c9dc5;
  for (const byte of new Uint8Array(resident.pixels.buffer)) pixelHash = Math.imul(pixelHash ^ byte, 0x01000193) >>> 0;
  const summary = {
    steps: STEPS, sizes, budget, tensorBytes: TENSOR_BYTES, identical, pixelHash,
    resident: { peak: resident.peak, trace: resident.trace, info: resident.info, ms: resident.ms, how: resident.how, readyMs: resident.readyMs },
    swapped: { peak: swapped.peak, trace: swapped.trace, info: swapped.info, ms: swapped.ms, how: swapped.how, readyMs: swapped.readyMs },
  };
  document.body.dataset.summary = JSON.stringify(summary);
  const made = ({ how, readyMs }) => `${how.loaded.length ? `${how.loaded.length} stages loaded from the graph cache` : ''}` +
    `${how.loaded.length && how.built.length ? ', ' : ''}${how.built.length ? `${how.built.length} built` : ''} in ${readyMs.toFixed(0)} ms`;
  $('status').textContent = `peak ${mib(swapped.peak)} with swapping vs ${mib(resident.peak)} all resident (${(100 * (1 - swapped.peak / resident.peak)).toFixed(0)}% less); outputs ${identical ? 'bit-identical' : 'DIFFERENT'}; ` +
    `first run: ${made(resident)}; second: ${made(swapped)}`;
  document.body.dataset.state = identical ? 'done' : 'mismatch';
}

main().catch((e) => {
  console.error(e);
  $('status').textContent = `${e.name}: ${e.message}`;
  document.body.dataset.state = 'error';
});
