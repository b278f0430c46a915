// CPU benchmark in headless Chromium, one run: our CPU context (createContext({accelerated:
// false}), the backend a visitor without a hardware GPU gets) beside onnxruntime-web's wasm EP at
// the same thread count (--threads N, default 1; above 1 the pages are served cross-origin
// isolated, so both get SharedArrayBuffer and their threaded builds) and beside our WebGPU context on the browser's software adapter (SwiftShader, what
// this machine has), on matmul, GEMV, the MLP and convolution layers (bench/kernels_page.js,
// every result checked against a float64 reference); then the real ONNX models of the clients
// test through ORT's WebNN EP on our CPU context beside ORT's own wasm EP
// (tests/browser/clients.mjs, outputs checked against ORT wasm), and MoE decode tokens/s on both
// of our backends. Prints markdown tables and writes out/cpu.json.
//   npm run bench:cpu [-- --shapes mm256,convdet] [--impls cpu,ortwasm,ours] [--budget-ms 2000]
//                     [--moe-tokens 32] [--no-models] [--threads 2]
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { parseArgs } from 'node:util';
import { start, openPage, writeOut, ROOT } from '../tests/browser/browser.mjs';

const { values: args } = parseArgs({
  options: {
    shapes: { type: 'string', default: 'mm256,mm512,mm1024,mm2048,gemv,mlp,qgemv,qmm16,convdw,convdw2,convpw,convdet' },
    impls: { type: 'string', default: 'cpu,ortwasm,ours' },
    'budget-ms': { type: 'string', default: '2000' },
    'moe-tokens': { type: 'string', default: '32' },
    'no-models': { type: 'boolean', default: false },
    threads: { type: 'string', default: '1' },
  },
});
const threads = Number(args.threads);
if (!(Number.isInteger(threads) && threads >= 1)) {
  console.error(`--threads must be a positive integer, not ${args.threads}`);
  process.exit(2);
}
// browser.mjs serves cross-origin isolated pages when WEBNN_THREADS is set; clients.mjs passes
// it on to its page.
if (threads > 1) process.env.WEBNN_THREADS = String(threads);
else delete process.env.WEBNN_THREADS;
for (const f of ['pkg/index.js', 'node_modules/onnxruntime-web/dist/ort.webgpu.min.js']) {
  if (!fs.existsSync(path.join(ROOT, f))) {
    console.error(`${f} is missing: run scripts/setup.sh and scripts/build-wasm.sh first`);
    process.exit(1);
  }
}
const shapes = args.shapes.split(',').filter(Boolean);
const impls = args.impls.split(',').filter(Boolean);
const THREADS = threads === 1 ? '1 thread' : `${threads} threads`;
const NAMES = { cpu: `ours, CPU context (${THREADS})`, ortwasm: `onnxruntime-web wasm (${THREADS})`, ours: 'ours, WebGPU on SwiftShader' };
const LABEL = {
  mm256: 'matmul 256³', mm512: 'matmul 512³', mm1024: 'matmul 1024³', mm2048: 'matmul 2048³',
  gemv: 'GEMV 1×4096×4096', mlp: 'MLP 1×512 → 2048 → gelu → 512 → add → layerNorm',
  qgemv: 'int8 weights: 1×384 · dequantizeLinear(384×1536)', qmm16: 'int8 weights: 16×384 · dequantizeLinear(384×1536)',
  convdw: 'depthwise conv 3×3, 96 ch, 56² (MobileNetV2)', convdw2: 'depthwise conv 3×3 stride 2, 144 ch, 56² → 28² (MobileNetV2)',
  convpw: 'pointwise conv 1×1, 144 → 24 ch, 56² (MobileNetV2)',
  convdet: 'conv 3×3, 64 → 64 ch, 80² (YOLOv8n)', convyolo32: 'conv 3×3, 32 → 64 ch, 80²', convyolo40: 'conv 3×3, 64 → 64 ch, 40²',
  convyolo20: 'conv 3×3, 128 → 128 ch, 20²', convyolo10: 'conv 3×3, 256 → 256 ch, 10²',
};
const opts = { budgetMs: Number(args['budget-ms']), maxIters: 50 };
const results = { date: new Date().toISOString(), opts, cells: {}, backends: {}, models: null, moe: {} };
let failures = 0;

const { browser, url, close } = await start(ROOT);
try {
  const page = await openPage(browser, `${url}/bench/kernels.html?threads=${threads}`, 'bench');
  await page.evaluate(() => window.bench.ready);
  results.threads = { requested: threads, isolated: await page.evaluate(() => crossOriginIsolated),
    ours: await page.evaluate(async () => (await import('/pkg/index.js')).cpuThreads()) };
  console.log(`threads: ${JSON.stringify(results.threads)}`);
  if (results.threads.ours !== threads) failures++;
  results.adapter = await page.evaluate(() => window.bench.adapterInfo());
  // One untimed cell per library first: a wasm module runs slower for its first second or so
  // (its functions are compiled lazily and optimised later), which would otherwise fall on
  // whichever cell comes first.
  for (const impl of impls) {
    await page.evaluate(([s, impl]) => window.bench.cell(s, impl, { budgetMs: 1000, maxIters: 50 }), [shapes[0], impl]);
  }
  for (const s of shapes) {
    results.cells[s] = {};
    for (const impl of impls) {
      const t = Date.now();
      const r = await page.evaluate(([s, impl, opts]) => window.bench.cell(s, impl, opts), [s, impl, opts]);
      if (r.error || !r.check.ok) failures++;
      results.cells[s][impl] = r;
      if (r.backend) results.backends[impl] = r.backend;
      console.log(`${LABEL[s]} / ${NAMES[impl]}: ${r.error ?? `${r.ms.toFixed(2)} ms${r.check.ok ? '' : ' FAILED CHECK'}`}` +
        ` (${((Date.now() - t) / 1000).toFixed(1)} s)`);
    }
  }
  results.flops = await page.evaluate((shapes) => Object.fromEntries(shapes.map((s) => [s, window.bench.flops(s)])), shapes);
  await page.close();

  const tokens = Number(args['moe-tokens']);
  const reference = JSON.parse(fs.readFileSync(path.join(ROOT, 'www/models/moe/reference.json'), 'utf8'));
  const prompt = reference.prompts[0];
  for (const backend of tokens > 0 ? ['cpu', 'webgpu'] : []) {
    const moe = await openPage(browser, `${url}/www/moe/index.html?mode=resident&budget=1&backend=${backend}&threads=${threads}`, 'moe');
    await moe.waitForFunction(() => document.body.dataset.state, null, { timeout: 600000 });
    await moe.evaluate(([text]) => window.moe.generate(text, 4), [prompt.text]); // warm-up
    const r = await moe.evaluate(([text, n]) => window.moe.generate(text, n), [prompt.text, tokens]);
    const ok = JSON.stringify(r.ids) === JSON.stringify(prompt.greedy_tokens.slice(0, tokens));
    if (!ok) failures++;
    results.moe[backend] = { tokens, tokensPerSecond: r.tokensPerSecond, ok };
    console.log(`MoE decode (${backend}): ${r.tokensPerSecond.toFixed(1)} tokens/s, greedy tokens ${ok ? 'match' : 'DO NOT match'} the reference`);
    await moe.close();
  }
} finally {
  await close();
}

if (!args['no-models']) {
  // The clients test on the CPU context: each model through ORT's WebNN EP on our navigator.ml,
  // checked against and timed beside ORT's wasm EP in the same page.
  execFileSync('node', ['tests/browser/clients.mjs'], { cwd: ROOT, stdio: 'inherit', env: { ...process.env, WEBNN_BACKEND: 'cpu', STEADY_RUNS: '15' } });
  results.models = JSON.parse(fs.readFileSync(path.join(ROOT, 'out/clients.json'), 'utf8'));
}

const ms = (r) => (r && !r.error && r.check.ok ? r.ms : null);
const gflops = (s, t) => (t === null ? '–' : s === 'mlp' ? `${t.toFixed(2)} ms` : `${(results.flops[s] / (t * 1e6)).toFixed(2)} GFLOP/s (${t.toFixed(t < 10 ? 2 : 0)} ms)`);
const ratio = (a, b) => (a !== null && b !== null ? `${(b / a).toFixed(2)}×` : '–');
const lines = [
  `## CPU context in headless Chromium (${new Date().toISOString().slice(0, 10)}, ${THREADS})`,
  '',
  `| work | ${impls.map((i) => NAMES[i]).join(' | ')} | CPU / ORT wasm | CPU / SwiftShader |`,
  `|---|${impls.map(() => '---|').join('')}---|---|`,
];
for (const s of shapes) {
  const c = results.cells[s];
  lines.push(`| ${LABEL[s]} | ${impls.map((i) => gflops(s, ms(c[i]))).join(' | ')} | ${ratio(ms(c.cpu), ms(c.ortwasm))} | ${ratio(ms(c.cpu), ms(c.ours))} |`);
}
if (results.moe.cpu) {
  const t = (b) => results.moe[b] ? `${results.moe[b].tokensPerSecond.toFixed(1)} tokens/s` : '–';
  const r = results.moe.webgpu ? `${(results.moe.cpu.tokensPerSecond / results.moe.webgpu.tokensPerSecond).toFixed(1)}×` : '–';
  lines.push(`| MoE decode (www/moe, resident, ${results.moe.cpu.tokens} tokens) | ${impls.map((i) => (i === 'cpu' ? t('cpu') : i === 'ours' ? t('webgpu') : '–')).join(' | ')} | – | ${r} |`);
}
if (results.models) {
  lines.push('', '| model (ORT WebNN EP on our CPU context vs ORT wasm EP) | ours: first / steady run | ORT wasm: first / steady run | steady: ours / ORT |', '|---|---|---|---|');
  for (const m of results.models) {
    const [w, o] = [m.webnn, m.wasm];
    lines.push(`| ${m.name} | ${w.firstMs.toFixed(0)} / ${w.steadyMs.toFixed(1)} ms | ${o.firstMs.toFixed(0)} / ${o.steadyMs.toFixed(1)} ms | ${(o.steadyMs / w.steadyMs).toFixed(2)}× |`);
  }
}
lines.push('', 'Backends: ' + Object.entries(results.backends).map(([i, b]) => `${NAMES[i]} = ${b}`).join('; '));
console.log('\n' + lines.join('\n'));
results.table = lines.join('\n');
writeOut('cpu.json', results);
console.log(`\nwritten: out/cpu.json${failures ? `; ${failures} cell(s) failed` : ''}`);
process.exit(failures ? 1 : 0);
