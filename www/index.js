// The demo page: installs navigator.ml from the wasm package, builds the tiny MLP of mlp.js,
// runs it on the WebGPU adapter and shows the probabilities, the float64 reference and timings.
import { init, install } from '../pkg/index.js';
import { BATCH, OUT, x, buildGraph, reference } from './mlp.js';

const RUNS = 20;
const $ = (id) => document.getElementById(id);
const ms = (t) => `${t.toFixed(2)} ms`;

function table(values) {
  const rows = [];
  for (let i = 0; i < BATCH; i++) {
    const row = Array.from(values.slice(i * OUT, (i + 1) * OUT), (v) => v.toFixed(6));
    rows.push(`<tr><th>sample ${i}</th>${row.map((v) => `<td>${v}</td>`).join('')}</tr>`);
  }
  return `<tr><th></th>${Array.from({ length: OUT }, (_, j) => `<th>class ${j}</th>`).join('')}</tr>${rows.join('')}`;
}

async function main() {
  const timings = [];
  const time = async (what, f) => {
    const t0 = performance.now();
    const r = await f();
    timings.push([what, performance.now() - t0]);
    return r;
  };
  await time('install() and loading the wasm module', async () => {
    install({ force: true, backend: new URLSearchParams(location.search).get('backend') ?? 'auto' });
    await init();
  });
  const context = await time('navigator.ml.createContext()', () => navigator.ml.createContext());
  const builder = new MLGraphBuilder(context);
  const output = buildGraph(builder);
  const graph = await time('builder.build()', () => builder.build({ probabilities: output }));
  const input = await context.createTensor({ dataType: 'float32', shape: [BATCH, x.length / BATCH], writable: true });
  const result = await context.createTensor({ dataType: 'float32', shape: [BATCH, OUT], readable: true });
  context.writeTensor(input, x);
  const run = async () => {
    context.dispatch(graph, { x: input }, { probabilities: result });
    return new Float32Array(await context.readTensor(result));
  };
  const probabilities = await time('first dispatch + readTensor', run);
  const t0 = performance.now();
  for (let i = 0; i < RUNS; i++) await run();
  timings.push([`dispatch + readTensor, mean of ${RUNS}`, (performance.now() - t0) / RUNS]);

  const want = reference();
  const maxError = probabilities.reduce((m, v, i) => Math.max(m, Math.abs(v - want[i])), 0);
  $('result').innerHTML = table(probabilities);
  $('reference').innerHTML = table(want);
  $('error').textContent = maxError.toExponential(2);
  $('timings').innerHTML = timings.map(([w, t]) => `<tr><th>${w}</th><td>${ms(t)}</td></tr>`).join('');
  $('result').dataset.values = JSON.stringify(Array.from(probabilities));
  $('status').textContent = maxError < 1e-5 ? 'ok: matches the float64 reference' : 'mismatch with the float64 reference';
  document.body.dataset.state = maxError < 1e-5 ? 'done' : 'mismatch';
  for (const t of [input, result]) t.destroy();
  graph.destroy();
}

main().catch((e) => {
  $('status').textContent = `error: ${e?.name ?? 'Error'}: ${e?.message ?? e}`;
  document.body.dataset.state = 'error';
  console.error(e);
});
