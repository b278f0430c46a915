// The round-trip benchmark's page code (bench/roundtrip.mjs, and
// roundtrip.html for a browser driven without Node, such as on the GPU machine): a small
// tensor's dispatch + readTensor through navigator.ml beside the same work in plain WebGPU.

/** Resolves to [[path, ms], ...]: per path the median of three interleaved rounds, each the median
 * over batches of 20 round trips of each batch's mean. */
export async function run({ repeats, elements }) {
  const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[s.length >> 1]; };
  // performance.now() is coarse outside cross-origin isolation (0.1 ms): each sample is the
  // mean of a batch of 20 round trips; the figure is the median of the batches.
  const time = async (fn) => {
    for (let i = 0; i < 20; i++) await fn(i);
    const ms = [];
    for (let batch = 0; batch < Math.max(1, repeats / 20); batch++) {
      const t0 = performance.now();
      for (let i = 0; i < 20; i++) await fn(batch * 20 + i);
      ms.push((performance.now() - t0) / 20);
    }
    return median(ms);
  };
  const x = Float32Array.from({ length: elements }, (_, i) => i);
  const expect = (out, i) => {
    // y = x + 1 after writes of x + i: every value must be exact.
    for (let k = 0; k < elements; k++) if (out[k] !== x[k] + i + 1) throw new Error(`wrong value at ${k}: ${out[k]}`);
  };

  // Ours: y = x + 1 through navigator.ml.
  const context = await navigator.ml.createContext();
  const b = new MLGraphBuilder(context);
  const desc = { dataType: 'float32', shape: [elements] };
  const input = b.input('x', desc);
  const graph = await b.build({ y: b.add(input, b.constant('float32', 1)) });
  const xT = await context.createTensor({ ...desc, writable: true });
  const yT = await context.createTensor({ ...desc, readable: true });
  const shifted = (i) => x.map((v) => v + i);
  const paths = [];
  paths.push(['ours: readTensor', async () => { await context.readTensor(yT); }]);
  paths.push(['ours: dispatch + readTensor', async () => {
    context.dispatch(graph, { x: xT }, { y: yT });
    await context.readTensor(yT);
  }]);
  paths.push(['ours: writeTensor + dispatch + readTensor', async (i) => {
    context.writeTensor(xT, shifted(i));
    context.dispatch(graph, { x: xT }, { y: yT });
    expect(new Float32Array(await context.readTensor(yT)), i);
  }]);

  // Plain WebGPU: the same kernel and sizes on the page's own device.
  const adapter = await navigator.gpu.requestAdapter();
  const device = await adapter.requestDevice();
  const U = GPUBufferUsage;
  const bytes = elements * 4;
  const xb = device.createBuffer({ size: bytes, usage: U.STORAGE | U.COPY_DST });
  const yb = device.createBuffer({ size: bytes, usage: U.STORAGE | U.COPY_SRC });
  const readback = device.createBuffer({ size: bytes, usage: U.MAP_READ | U.COPY_DST });
  const pipeline = device.createComputePipeline({
    layout: 'auto',
    compute: {
      module: device.createShaderModule({ code: `
        @group(0) @binding(0) var<storage, read> x: array<f32>;
        @group(0) @binding(1) var<storage, read_write> y: array<f32>;
        @compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3u) {
          if (g.x < arrayLength(&y)) { y[g.x] = x[g.x] + 1.0; }
        }` }),
      entryPoint: 'main',
    },
  });
  const bind = device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries: [xb, yb].map((buffer, binding) => ({ binding, resource: { buffer } })) });
  const read = async (staging) => {
    const enc = device.createCommandEncoder();
    enc.copyBufferToBuffer(yb, 0, staging, 0, bytes);
    device.queue.submit([enc.finish()]);
    await staging.mapAsync(GPUMapMode.READ);
    const out = new Float32Array(staging.getMappedRange().slice(0));
    staging.unmap();
    return out;
  };
  const dispatch = () => {
    const enc = device.createCommandEncoder();
    const pass = enc.beginComputePass();
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, bind);
    pass.dispatchWorkgroups(Math.ceil(elements / 64));
    pass.end();
    device.queue.submit([enc.finish()]);
  };
  paths.push(['plain: copy + mapAsync (one staging buffer)', () => read(readback)]);
  paths.push(['plain: copy + mapAsync (new staging buffer each time)', async () => {
    const staging = device.createBuffer({ size: bytes, usage: U.MAP_READ | U.COPY_DST });
    await read(staging);
    staging.destroy();
  }]);
  paths.push(['plain: writeBuffer + dispatch + copy + mapAsync', async (i) => {
    device.queue.writeBuffer(xb, 0, shifted(i));
    dispatch();
    expect(await read(readback), i);
  }]);
  // Interleaved: every path once a round, three rounds, so that a change of load or of the
  // browser's pacing falls on all of them; the row is the median of its rounds.
  const rounds = paths.map(() => []);
  for (let round = 0; round < 3; round++) {
    for (const [k, [, fn]] of paths.entries()) rounds[k].push(await time(fn));
  }
  device.destroy();
  return paths.map(([name], k) => [name, median(rounds[k])]);
}
