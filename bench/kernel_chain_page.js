// What one more kernel costs in this browser: a chain of L dependent kernels dispatched at once
// and read back, for several L, through navigator.ml (L reduceSum operators over an axis of size
// 1, which leave the values as they are and do not fuse: one trivial kernel each; and L GEMVs by a
// 256 x 256 identity, a kernel that streams a weight as the MoE token graph's do, also with six
// writeTensor() calls before each dispatch, as a MoE step makes) and in plain WebGPU on the page's own device (L dispatches of a one-binding
// kernel in one compute pass, and of a kernel reading one buffer and writing another, as our
// kernels do). The cost of a kernel is the slope between the shortest and the longest chain, so
// the round trip around the chain drops out. Every chain's result is checked against float64.
// Used by bench/gpu.html (?chain=1,32,128) on the GPU machine and by bench/roundtrip.mjs here.

const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[s.length >> 1]; };

/** Median ms of `fn()` over `repeats` runs after 3 warm-ups. */
async function time(fn, repeats) {
  for (let i = 0; i < 3; i++) await fn();
  const ms = [];
  for (let i = 0; i < repeats; i++) {
    const t0 = performance.now();
    await fn();
    ms.push(performance.now() - t0);
  }
  return median(ms);
}

function check(got, want, what) {
  for (let i = 0; i < want.length; i++) {
    if (!(Math.abs(got[i] - want[i]) <= 1e-5 * Math.max(1, Math.abs(want[i])))) {
      throw new Error(`${what}: element ${i} is ${got[i]}, float64 gives ${want[i]}`);
    }
  }
}

const N = 256;

/** Resolves to { lengths, ms: { path: [ms per chain length] }, usPerKernel: { path: µs } }. */
export async function run({ lengths = [1, 32, 128], repeats = 30 } = {}) {
  const x = Float64Array.from({ length: N }, (_, i) => Math.sin(i) * 4);
  const ms = { ours: [], 'ours, GEMV 256x256': [], 'ours, GEMV 256x256, 6 writes first': [], 'plain, one buffer': [], 'plain, two buffers': [], 'plain, two buffers, nudged': [] };

  // Ours: reduceSum over the axis of size 1 of [1, 256], L times.
  const context = await navigator.ml.createContext();
  const input = await context.createTensor({ dataType: 'float32', shape: [1, N], writable: true });
  context.writeTensor(input, Float32Array.from(x));
  for (const L of lengths) {
    const b = new MLGraphBuilder(context);
    let y = b.input('x', { dataType: 'float32', shape: [1, N] });
    for (let i = 0; i < L; i++) y = b.reduceSum(y, { axes: [0], keepDimensions: true });
    const graph = await b.build({ y });
    const output = await context.createTensor({ dataType: 'float32', shape: [1, N], readable: true });
    context.dispatch(graph, { x: input }, { y: output });
    check(new Float32Array(await context.readTensor(output)), Float32Array.from(x), `ours, ${L} reduceSum`);
    ms.ours.push(await time(async () => {
      context.dispatch(graph, { x: input }, { y: output });
      await context.readTensor(output);
    }, repeats));
    graph.destroy();
    output.destroy();
  }
  const identity = new Float32Array(N * N);
  for (let i = 0; i < N; i++) identity[i * N + i] = 1;
  for (const L of lengths) {
    const b = new MLGraphBuilder(context);
    const w = b.constant({ dataType: 'float32', shape: [N, N] }, identity);
    let y = b.input('x', { dataType: 'float32', shape: [1, N] });
    for (let i = 0; i < L; i++) y = b.matmul(y, w);
    const graph = await b.build({ y });
    const output = await context.createTensor({ dataType: 'float32', shape: [1, N], readable: true });
    context.dispatch(graph, { x: input }, { y: output });
    check(new Float32Array(await context.readTensor(output)), Float32Array.from(x), `ours, ${L} GEMVs`);
    ms['ours, GEMV 256x256'].push(await time(async () => {
      context.dispatch(graph, { x: input }, { y: output });
      await context.readTensor(output);
    }, repeats));
    const bytes = Float32Array.from(x);
    ms['ours, GEMV 256x256, 6 writes first'].push(await time(async () => {
      for (let i = 0; i < 6; i++) context.writeTensor(input, bytes);
      context.dispatch(graph, { x: input }, { y: output });
      await context.readTensor(output);
    }, repeats));
    graph.destroy();
    output.destroy();
  }
  context.destroy?.();

  // Plain WebGPU: x = x * 0.5 + 1 in place (one binding), and y = x * 0.5 + 1 between two
  // buffers in turn (two bindings, as our kernels read one buffer and write another).
  const adapter = await navigator.gpu.requestAdapter();
  const device = await adapter.requestDevice();
  const U = GPUBufferUsage;
  const bytes = N * 4;
  const kernel = (bindings) => device.createComputePipeline({
    layout: 'auto',
    compute: {
      entryPoint: 'main',
      module: device.createShaderModule({ code: bindings === 1 ? `
        @group(0) @binding(0) var<storage, read_write> x: array<f32>;
        @compute @workgroup_size(64) fn main(@builtin(global_invocation_id) i: vec3<u32>) {
          if (i.x < ${N}u) { x[i.x] = x[i.x] * 0.5 + 1.0; }
        }` : `
        @group(0) @binding(0) var<storage, read> x: array<f32>;
        @group(0) @binding(1) var<storage, read_write> y: array<f32>;
        @compute @workgroup_size(64) fn main(@builtin(global_invocation_id) i: vec3<u32>) {
          if (i.x < ${N}u) { y[i.x] = x[i.x] * 0.5 + 1.0; }
        }` }),
    },
  });
  const buffers = [0, 1].map(() => device.createBuffer({ size: bytes, usage: U.STORAGE | U.COPY_SRC | U.COPY_DST }));
  const readback = device.createBuffer({ size: bytes, usage: U.MAP_READ | U.COPY_DST });
  const start = Float32Array.from(x);
  // Nudged: while the read waits, an empty submit every 0.25 ms (polled on MessageChannel turns,
  // not 1 ms+ timers), to see whether the browser resolves the map sooner when the page keeps
  // sending it commands.
  const channel = new MessageChannel();
  const turn = () => new Promise((resolve) => { channel.port1.onmessage = resolve; channel.port2.postMessage(0); });
  for (const [bindings, nudged] of [[1, false], [2, false], [2, true]]) {
    const pipeline = kernel(bindings);
    const groups = bindings === 1
      ? [device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: buffers[0] } }] })]
      : [0, 1].map((k) => device.createBindGroup({
        layout: pipeline.getBindGroupLayout(0),
        entries: [{ binding: 0, resource: { buffer: buffers[k] } }, { binding: 1, resource: { buffer: buffers[1 - k] } }],
      }));
    const path = bindings === 1 ? 'plain, one buffer' : nudged ? 'plain, two buffers, nudged' : 'plain, two buffers';
    for (const L of lengths) {
      const chain = async () => {
        device.queue.writeBuffer(buffers[0], 0, start);
        const encoder = device.createCommandEncoder();
        const pass = encoder.beginComputePass();
        pass.setPipeline(pipeline);
        for (let i = 0; i < L; i++) {
          pass.setBindGroup(0, groups[i % groups.length]);
          pass.dispatchWorkgroups(N / 64);
        }
        pass.end();
        const last = bindings === 1 ? 0 : L % 2;
        encoder.copyBufferToBuffer(buffers[last], 0, readback, 0, bytes);
        device.queue.submit([encoder.finish()]);
        let mapped = false;
        const map = readback.mapAsync(GPUMapMode.READ).then(() => { mapped = true; });
        for (let last = performance.now(); nudged && !mapped; await turn()) {
          if (performance.now() - last >= 0.25) {
            device.queue.submit([]);
            last = performance.now();
          }
        }
        await map;
        const out = new Float32Array(readback.getMappedRange().slice(0));
        readback.unmap();
        return out;
      };
      let want = Array.from(start);
      for (let i = 0; i < L; i++) want = want.map((v) => Math.fround(Math.fround(v * 0.5) + 1));
      check(await chain(), want, `${path}, ${L} kernels`);
      ms[path].push(await time(chain, repeats));
    }
  }
  device.destroy();
  const span = lengths[lengths.length - 1] - lengths[0];
  const usPerKernel = Object.fromEntries(Object.entries(ms).map(([path, t]) => [path, +((t[t.length - 1] - t[0]) / span * 1000).toFixed(1)]));
  return { lengths, ms: Object.fromEntries(Object.entries(ms).map(([k, v]) => [k, v.map((t) => +t.toFixed(3))])), usPerKernel };
}
