import { install } from 'webnn-wgpu';

install();
const context = await navigator.ml.createContext();
const builder = new MLGraphBuilder(context);
const desc = { dataType: 'float32', shape: [2, 2] } as const;
const x = builder.input('x', desc);
const w = builder.constant(desc, new Float32Array([1, 2, 3, 4]));
const graph = await builder.build({ y: builder.relu(builder.matmul(x, w)) });
const input = await context.createTensor({ ...desc, writable: true });
const output = await context.createTensor({ ...desc, readable: true });
context.writeTensor(input, new Float32Array([1, -1, 0.5, 2]));
context.dispatch(graph, { x: input }, { y: output });
const y = new Float32Array(await context.readTensor(output));
document.getElementById('result')!.textContent = Array.from(y).join(', ');

const worker = new Worker(new URL('./worker.ts', import.meta.url), { type: 'module' });
worker.onmessage = ({ data }: MessageEvent<number[]>) => {
  document.getElementById('worker-result')!.textContent = data.join(', ');
};
worker.postMessage([1, -1, 0.5, 2]);
