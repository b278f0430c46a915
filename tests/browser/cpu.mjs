// The CPU backend in headless Chromium, where no WebGPU adapter exists (Chromium started without
// WebGPU: navigator.gpu is absent): install() with its default backend ('auto') gives a working
// context with MLContext.accelerated false, whose results match float64 references computed
// here; createContext({accelerated: false}) is the CPU too; install() rejects an unknown backend
// with a TypeError; and the memory extensions behave on the CPU: swapOut() lowers
// memoryInfo().deviceBytes by exactly the graph's constant bytes and swapIn() restores them,
// and 20 swapOut/swapIn cycles of a 4 MiB graph do not grow the wasm memory (freed space is
// reused). Exits non-zero on any failure.
import { ROOT, openPage, harnessReady } from './browser.mjs';

// Without the WebGPU flags of CHROMIUM_ARGS, and with the feature off.
const { chromium } = await import('playwright-core');
const { serve } = await import('../../scripts/serve.mjs');
const server = await serve(ROOT, 0);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium', headless: true,
  args: ['--headless=new', '--no-sandbox', '--disable-features=WebGPU', '--no-first-run', '--disable-background-networking'],
});
const url = `http://localhost:${server.address().port}`;
let failures = 0;
const check = (ok, what) => {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (!ok) failures++;
};
try {
  const page = await harnessReady(await openPage(browser, `${url}/tests/browser/harness.html?backend=auto`, 'cpu'));
  const r = await page.evaluate(async () => {
    const out = { gpu: 'gpu' in navigator && (await navigator.gpu.requestAdapter()) !== null };
    const context = await navigator.ml.createContext();
    out.accelerated = context.accelerated;
    out.cpuAccelerated = (await navigator.ml.createContext({ accelerated: false })).accelerated;
    out.limits = Object.keys(context.opSupportLimits()).length;
    // y = softmax(relu(x W + b)) over rows: x [3, 5], W [5, 4].
    const rnd = (() => { let s = 7; return () => ((s = (s * 48271) % 2147483647) / 2147483647) * 2 - 1; })();
    const X = Float32Array.from({ length: 15 }, rnd);
    const W = Float32Array.from({ length: 20 }, rnd);
    const B = Float32Array.from({ length: 4 }, rnd);
    const b = new MLGraphBuilder(context);
    const x = b.input('x', { dataType: 'float32', shape: [3, 5] });
    const h = b.relu(b.add(b.matmul(x, b.constant({ dataType: 'float32', shape: [5, 4] }, W)), b.constant({ dataType: 'float32', shape: [4] }, B)));
    const graph = await b.build({ y: b.softmax(h, 1) });
    const xt = await context.createTensor({ dataType: 'float32', shape: [3, 5], writable: true });
    const yt = await context.createTensor({ dataType: 'float32', shape: [3, 4], readable: true });
    context.writeTensor(xt, X);
    context.dispatch(graph, { x: xt }, { y: yt });
    const got = new Float32Array(await context.readTensor(yt));
    let worst = 0;
    for (let i = 0; i < 3; i++) {
      const row = [0, 1, 2, 3].map((j) => Math.max(0, B[j] + [0, 1, 2, 3, 4].reduce((a, k) => a + X[i * 5 + k] * W[k * 4 + j], 0)));
      const m = Math.max(...row);
      const e = row.map((v) => Math.exp(v - m));
      const sum = e.reduce((a, v) => a + v, 0);
      e.forEach((v, j) => { worst = Math.max(worst, Math.abs(got[i * 4 + j] - v / sum)); });
    }
    out.worst = worst;
    try {
      const { install } = await import('/pkg/index.js');
      install({ force: true, backend: 'gpu-please' });
      out.badBackend = 'no error';
    } catch (e) {
      out.badBackend = e.name;
    }
    // The memory extensions: a graph of 4 MiB of constants swapped out and in.
    const big = new MLGraphBuilder(context);
    const bx = big.input('x', { dataType: 'float32', shape: [1, 1024] });
    const weights = new Float32Array(1024 * 1024).fill(0.001);
    const bgraph = await big.build({ y: big.matmul(bx, big.constant({ dataType: 'float32', shape: [1024, 1024] }, weights)) });
    const info = () => context.memoryInfo();
    const { testing } = await import('/pkg/webnn.js');
    const memory = () => testing.wasmMemoryBytes(context);
    out.residentBytes = info().deviceBytes;
    await bgraph.swapOut();
    out.swappedBytes = info().deviceBytes;
    out.residency = bgraph.residency;
    await bgraph.swapIn();
    out.backBytes = info().deviceBytes;
    const before = memory();
    for (let i = 0; i < 20; i++) {
      await bgraph.swapOut();
      await bgraph.swapIn();
    }
    out.wasmGrowth = memory() - before;
    out.hostBytes = info().hostBytes;
    return out;
  });
  check(!r.gpu, `no WebGPU adapter in this browser (navigator.gpu ${r.gpu ? 'has an adapter' : 'absent or without adapter'})`);
  check(r.accelerated === false && r.cpuAccelerated === false, `createContext() and createContext({accelerated: false}) are CPU contexts (accelerated ${r.accelerated}, ${r.cpuAccelerated})`);
  check(r.limits > 90, `opSupportLimits() lists ${r.limits} members`);
  check(r.worst < 1e-6, `softmax(relu(x W + b)) matches the float64 reference (worst |error| ${r.worst.toExponential(2)})`);
  check(r.badBackend === 'TypeError', `install({backend: 'gpu-please'}) throws ${r.badBackend}`);
  const constant = 4 * 1024 * 1024;
  check(r.residentBytes - r.swappedBytes === constant && r.residency === 'host',
    `swapOut() frees the graph's ${constant} constant bytes (deviceBytes ${r.residentBytes} -> ${r.swappedBytes}, residency ${r.residency})`);
  check(r.backBytes === r.residentBytes, `swapIn() brings them back (deviceBytes ${r.backBytes})`);
  check(r.wasmGrowth === 0, `20 swapOut/swapIn cycles grow the wasm memory by ${r.wasmGrowth} bytes`);
} finally {
  await browser.close().catch(() => {});
  server.close();
}
console.log(failures ? `cpu: ${failures} check(s) failed` : 'cpu: all checks passed');
process.exit(failures ? 1 : 0);
