// The same graph in a dedicated module Worker bundled by Vite: the glue's wasm URL resolves
// inside the worker chunk too.
import { install } from 'webnn-wgpu';

install();
onmessage = async ({ data }: MessageEvent<number[]>) => {
  const context = await navigator.ml.createContext();
  const builder = new MLGraphBuilder(context);
  const desc = { dataType: 'float32', shape: [2, 2] } as const;
  const w = builder.constant(desc, new Float32Array([1, 2, 3, 4]));
  const graph = await builder.build({ y: builder.relu(builder.matmul(builder.input('x', desc), w)) });
  const input = await context.createTensor({ ...desc, writable: true });
  const output = await context.createTensor({ ...desc, readable: true });
  context.writeTensor(input, Float32Array.from(data));
  context.dispatch(graph, { x: input }, { y: output });
  postMessage(Array.from(new Float32Array(await context.readTensor(output))));
};
