// Kernel benchmark in headless Chromium (WebGPU on SwiftShader), one run: matmul 256..2048
// square, GEMV 1x4096x4096 and a small MLP through navigator.ml (pkg/), beside onnxruntime-web's
// webgpu execution provider, tfjs's webgpu backend and a plain hand-written WGSL kernel, all on
// the same data in the same browser; then MoE decode tokens/s (www/moe, ours only). Every
// result is checked against a float64 CPU reference; a failed check is shown and not counted.
// Prints a markdown table and writes out/kernels.json.
//   npm run bench:kernels [-- --shapes mm256,gemv,mlp] [--impls ours,ort,tfjs,wgsl]
//                         [--budget-ms 3000] [--moe-tokens 8]
// --budget-ms: time each cell aims at after its warm-up (at least one timed run, at most 50).
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { start, openPage, writeOut, ROOT } from '../tests/browser/browser.mjs';

const { values: args } = parseArgs({
  options: {
    shapes: { type: 'string', default: 'mm256,mm512,mm1024,mm2048,gemv,mlp' },
    impls: { type: 'string', default: 'ours,ort,tfjs,wgsl' },
    'budget-ms': { type: 'string', default: '3000' },
    'moe-tokens': { type: 'string', default: '8' },
  },
});
for (const f of ['pkg/index.js', 'node_modules/onnxruntime-web/dist/ort.webgpu.min.js',
  'node_modules/@tensorflow/tfjs-backend-webgpu/dist/tf-backend-webgpu.min.js']) {
  if (!fs.existsSync(path.join(ROOT, f))) {
    console.error(`${f} is missing: run scripts/setup.sh and scripts/build-wasm.sh first`);
    process.exit(1);
  }
}
const shapes = args.shapes.split(',').filter(Boolean);
const impls = args.impls.split(',').filter(Boolean);
const LIBS = ['ort', 'tfjs'];
const NAMES = { ours: 'ours (navigator.ml)', cpu: 'ours (navigator.ml, CPU context)', ort: 'onnxruntime-web', tfjs: 'tfjs', wgsl: 'raw WGSL' };
const opts = { budgetMs: Number(args['budget-ms']), maxIters: 50 };

const DIMS = {
  mm256: { M: 256, K: 256, N: 256 }, mm512: { M: 512, K: 512, N: 512 }, mm1024: { M: 1024, K: 1024, N: 1024 },
  mm2048: { M: 2048, K: 2048, N: 2048 }, mm4096: { M: 4096, K: 4096, N: 4096 }, gemv: { M: 1, K: 4096, N: 4096 },
  gemv8192: { M: 1, K: 8192, N: 8192 },
};
// The float16 shapes (suffix h) of kernels_page.js: the same products, float16 throughout.
for (const s of Object.keys(DIMS)) DIMS[`${s}h`] = { ...DIMS[s], half: true };
const LABEL = {
  mm256: 'matmul 256x256x256', mm512: 'matmul 512x512x512', mm1024: 'matmul 1024x1024x1024',
  mm2048: 'matmul 2048x2048x2048', mm4096: 'matmul 4096x4096x4096', gemv: 'GEMV 1x4096x4096',
  gemv8192: 'GEMV 1x8192x8192', mlp: 'MLP 1x512 -> 2048 -> gelu -> 512 -> add -> layerNorm',
};
for (const s of Object.keys(DIMS).filter((s) => DIMS[s].half)) LABEL[s] = `${LABEL[s.slice(0, -1)]} float16`;
const gflops = (s, ms) => (2 * DIMS[s].M * DIMS[s].N * DIMS[s].K) / (ms * 1e6);
const gbs = (s, ms) => ((DIMS[s].half ? 2 : 4) * (DIMS[s].K * DIMS[s].N + DIMS[s].M * (DIMS[s].K + DIMS[s].N))) / (ms * 1e6);
// Higher is better: GFLOP/s for the matmuls, runs per second for the MLP.
const speed = (s, ms) => (s === 'mlp' ? 1000 / ms : gflops(s, ms));
const figure = (s, r) => {
  if (!r) return '–';
  if (r.error) return `error: ${r.error.slice(0, 80)}`;
  const base = s === 'mlp' ? `${r.ms.toFixed(2)} ms`
    : DIMS[s].M === 1 ? `${gflops(s, r.ms).toFixed(3)} GFLOP/s, ${gbs(s, r.ms).toFixed(3)} GB/s (${r.ms.toFixed(0)} ms)`
      : `${gflops(s, r.ms).toFixed(3)} GFLOP/s (${r.ms.toFixed(0)} ms)`;
  return `${base}${r.check.ok ? '' : ` **FAIL** (error ${r.check.worst.toPrecision(2)}x tolerance)`}`;
};

const { browser, url, close } = await start(ROOT);
const results = { date: new Date().toISOString(), adapter: null, opts, cells: {}, backends: {}, warnings: [], moe: null };
let failures = 0;
try {
  const page = await openPage(browser, `${url}/bench/kernels.html`, 'bench');
  const log = [];
  page.on('console', (m) => log.push(`${m.type()}: ${m.text()}`));
  await page.evaluate(() => window.bench.ready);
  results.adapter = await page.evaluate(() => window.bench.adapterInfo());
  console.log(`WebGPU adapter: ${JSON.stringify(results.adapter)}`);
  for (const s of shapes) {
    results.cells[s] = {};
    for (const impl of impls) {
      if (impl === 'wgsl' && s === 'mlp') continue;
      // float16: ours only (kernels_page.js says why the others have no cell).
      if (DIMS[s]?.half && impl !== 'ours' && impl !== 'cpu') continue;
      log.length = 0;
      const t = Date.now();
      const r = await page.evaluate(([s, impl, opts]) => window.bench.cell(s, impl, opts), [s, impl, opts]);
      if (impl === 'ort' && !r.error) {
        // ORT's verbose log of the partitioner: "All nodes placed on [WebGpuExecutionProvider].
        // Number of nodes: 4", or one "Node(s) placed on [EP]" line per EP.
        const placed = log.map((l) => l.match(/(?:All nodes|Node\(s\)) placed on \[(\w+)\]\. Number of nodes: (\d+)/))
          .filter(Boolean).map((m) => `${m[2]} on ${m[1]}`);
        r.placement = placed.length ? `nodes: ${placed.join(', ')}` : 'node placement not logged';
        if (!placed.length || placed.some((p) => !/WebGpu/.test(p))) {
          results.warnings.push(`${s}: onnxruntime-web ${r.placement}`);
        }
      }
      if (r.error || !r.check.ok) failures++;
      results.cells[s][impl] = r;
      if (r.backend) results.backends[impl] = r.backend;
      console.log(`${LABEL[s]} / ${NAMES[impl]}: ${figure(s, r)}` + (r.iters ? ` [${r.iters} runs, ${r.backend}` +
        `${r.placement ? `; ${r.placement}` : ''}; checked ${r.check.checked} elements]` : '') +
        ` (${((Date.now() - t) / 1000).toFixed(1)} s)`);
    }
  }
  await page.close();

  const tokens = Number(args['moe-tokens']);
  if (tokens > 0) {
    // The MoE demo page, all experts resident; its greedy tokens must match PyTorch's.
    const moe = await openPage(browser, `${url}/www/moe/index.html?mode=resident&budget=1`, 'moe');
    await moe.waitForFunction(() => document.body.dataset.state, null, { timeout: 600000 });
    const reference = JSON.parse(fs.readFileSync(path.join(ROOT, 'www/models/moe/reference.json'), 'utf8'));
    const prompt = reference.prompts[0];
    const r = await moe.evaluate(([text, n]) => window.moe.generate(text, n), [prompt.text, tokens]);
    const ok = JSON.stringify(r.ids) === JSON.stringify(prompt.greedy_tokens.slice(0, tokens));
    if (!ok) failures++;
    results.moe = { tokens, tokensPerSecond: r.tokensPerSecond, ok, text: r.text };
    console.log(`MoE decode (www/moe, resident): ${r.tokensPerSecond.toFixed(2)} tokens/s over ${tokens} tokens, ` +
      `greedy tokens ${ok ? 'match' : 'DO NOT match'} the reference`);
    await moe.close();
  }
} finally {
  await close();
}

const a = results.adapter ?? {};
const lines = [
  `## Kernels in headless Chromium (WebGPU adapter: ${a.vendor} ${a.architecture} ${a.description}; ${new Date().toISOString().slice(0, 10)})`,
  '',
  `| shape | ${impls.map((i) => NAMES[i]).join(' | ')} | ours / best library |`,
  `|---|${impls.map(() => '---|').join('')}---|`,
];
for (const s of shapes) {
  const c = results.cells[s];
  const good = (i) => c[i] && !c[i].error && c[i].check.ok;
  const libs = LIBS.filter(good);
  const best = libs.length ? Math.max(...libs.map((i) => speed(s, c[i].ms))) : null;
  const ratio = good('ours') && best ? `${(speed(s, c.ours.ms) / best).toFixed(2)}x` : '–';
  results.cells[s].ratio = ratio;
  lines.push(`| ${LABEL[s]} | ${impls.map((i) => figure(s, c[i])).join(' | ')} | ${ratio} |`);
}
if (results.moe) {
  const moe = `${results.moe.tokensPerSecond.toFixed(2)} tokens/s${results.moe.ok ? '' : ' **FAIL**'}`;
  lines.push(`| MoE decode (www/moe, resident, ${results.moe.tokens} tokens) | ` +
    `${impls.map((i) => (i === 'ours' ? moe : '–')).join(' | ')} | – |`);
}
lines.push('', 'Backends: ' + Object.entries(results.backends).map(([i, b]) => `${NAMES[i]} = ${b}`).join('; '));
for (const w of results.warnings) lines.push(`WARNING: ${w}`);
console.log('\n' + lines.join('\n'));
results.table = lines.join('\n');
writeOut('kernels.json', results);
console.log(`\nwritten: out/kernels.json${failures ? `; ${failures} cell(s) failed` : ''}`);
process.exit(failures ? 1 : 0);
