// Compiled with `tsc --noEmit -p tests/types` (the `types` CI stage): every call below must
// type-check against js/index.d.ts (the package's index.d.ts; the consumers stage checks it
// again through the packed tarball), and the @ts-expect-error lines must not.
import { install, init, MLGraph as MLGraphClass, type MLContext, type MLOperand } from 'webnn-wgpu';

export async function run(file: Blob): Promise<Float32Array> {
  install({ force: false });
  await init();
  const context: MLContext = await navigator.ml.createContext({ powerPreference: 'high-performance', memoryBudget: 64 << 20, hostMemoryBudget: 256 << 20 });
  const builder = new MLGraphBuilder(context);
  const desc = { dataType: 'float32', shape: [2, 2] } as const;
  const a = builder.input('a', desc);
  const w = builder.constant(desc, new Float32Array([1, 2, 3, 4]));
  const s = builder.constant('float32', 2);
  const conv = builder.conv2d(builder.reshape(a, [1, 1, 2, 2]), builder.reshape(w, [1, 1, 2, 2]), {
    padding: [0, 1, 0, 1],
    inputLayout: 'nchw',
    filterLayout: 'oihw',
  });
  const [h0, h1]: MLOperand[] = builder.split(a, 2, { axis: 1 });
  const gru = builder.gru(a, w, w, 1, 2, { direction: 'both', activations: ['sigmoid', 'tanh'] });
  const y = builder.gemm(builder.mul(a, s), w, { c: h0, bTranspose: true, label: 'gemm' });
  const z = builder.clamp(y, { minValue: 0, maxValue: 10n });
  // @ts-expect-error: layout is an enum
  builder.conv2d(a, w, { inputLayout: 'nwhc' });
  // @ts-expect-error: dataType is required
  builder.input('x', { shape: [1] });
  const graph = await builder.build({ z, conv, h1, g: gru[0] });
  const limits = context.opSupportLimits();
  const ok: boolean = limits.matmul?.a?.dataTypes?.includes('float32') ?? false;
  const ta = await context.createTensor({ ...desc, writable: true });
  const out = await context.createTensor({ ...desc, readable: true });
  context.writeTensor(ta, new Float32Array(4));
  context.dispatch(graph, { a: ta }, { z: out });
  // Extensions.
  await graph.swapOut({ to: 'host' });
  const where: 'device' | 'host' | 'disk' = graph.residency;
  await graph.swapIn();
  const info = context.memoryInfo();
  const budget: number | null = info.budgetBytes;
  const bytes: number = graph.deviceBytes + graph.hostBytes + info.deviceBytes + info.bytesStreamedFromDisk;
  const weights = await context.openWeights(file, { floatType: 'float16', onProgress: (loaded, total) => console.log(loaded / total) });
  const t = await weights.constantTensor(weights.tensors[0].name);
  const downloaded = await context.openWeights(await fetch('/model.safetensors'), { onProgress: (loaded, total) => console.log(loaded / total) });
  const cached: FileSystemFileHandle | null = await downloaded.cached;
  if (cached) await context.openWeights(cached);
  await context.openWeights(new ReadableStream<Uint8Array>(), { byteLength: 1024, cacheName: 'model.safetensors' });
  builder.constant(t);
  // @ts-expect-error: only "host" and "disk"
  await graph.swapOut({ to: 'device' });
  // The graph cache.
  await context.saveGraph('model', graph);
  const keys: string[] = await context.listGraphs();
  const loaded = await context.loadGraph(keys[0]);
  const shape: readonly number[] = loaded.inputs.a.shape;
  context.deleteGraph('model');
  console.log(shape, loaded.outputs);
  console.log(ok, where, budget, bytes, graph instanceof MLGraphClass, t.constant, await context.lost);
  return new Float32Array(await context.readTensor(out));
}

// @ts-expect-error: the interfaces have no public constructor (except MLGraphBuilder)
new MLContext();
