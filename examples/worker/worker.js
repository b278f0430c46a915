// A dedicated module Worker that uses the whole API: the polyfill installs navigator.ml on the
// WorkerGlobalScope, exactly as on a Window. Messages in: { type: 'run', values: number[] };
// messages out: { type: 'step', what } while running, then { type: 'result', ... } or
// { type: 'error', name, message }.
import { install, init } from '../../pkg/index.js';

const step = (what) => postMessage({ type: 'step', what });
let ready;

async function setUp() {
  install();
  await init();
  step('installed navigator.ml in the worker');
  const context = await navigator.ml.createContext({ memoryBudget: 1 << 20 });
  const builder = new MLGraphBuilder(context);
  // y = softmax(x · W + b) over 4 classes: a 1x8 input, an 8x4 weight.
  const x = builder.input('x', { dataType: 'float32', shape: [1, 8] });
  const w = builder.constant(
    { dataType: 'float32', shape: [8, 4] },
    Float32Array.from({ length: 32 }, (_, i) => ((i * 7) % 11) / 10 - 0.5),
  );
  const b = builder.constant({ dataType: 'float32', shape: [4] }, new Float32Array([0.1, -0.2, 0.3, 0]));
  const graph = await builder.build({ y: builder.softmax(builder.add(builder.matmul(x, w), b), 1) });
  step(`built the graph (${graph.deviceBytes} device bytes of constants)`);
  const input = await context.createTensor({ dataType: 'float32', shape: [1, 8], writable: true });
  const output = await context.createTensor({ dataType: 'float32', shape: [1, 4], readable: true });
  return { context, graph, input, output, supported: Object.keys(context.opSupportLimits()).length };
}

async function run(values) {
  ready ??= setUp();
  const { context, graph, input, output, supported } = await ready;
  context.writeTensor(input, Float32Array.from(values));
  context.dispatch(graph, { x: input }, { y: output });
  const first = Array.from(new Float32Array(await context.readTensor(output)));
  step('dispatched and read the result');

  // The extensions: release the graph's device memory, then dispatch again (it swaps back in).
  await graph.swapOut();
  const swappedOut = { residency: graph.residency, deviceBytes: graph.deviceBytes, hostBytes: graph.hostBytes };
  step(`swapOut(): residency ${swappedOut.residency}, ${swappedOut.deviceBytes} device bytes`);
  await graph.swapIn();
  context.dispatch(graph, { x: input }, { y: output });
  const again = Array.from(new Float32Array(await context.readTensor(output)));
  step(`swapIn() and dispatch again: residency ${graph.residency}`);
  return { first, again, swappedOut, residency: graph.residency, memoryInfo: context.memoryInfo(), supported };
}

onmessage = async ({ data }) => {
  if (data?.type !== 'run') return;
  try {
    postMessage({ type: 'result', ...(await run(data.values)) });
  } catch (e) {
    postMessage({ type: 'error', name: e?.name ?? 'Error', message: String(e?.message ?? e) });
  }
};
