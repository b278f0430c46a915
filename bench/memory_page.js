// In-page half of bench/memory.mjs (also run by bench/gpu.html on a real GPU): for graphs holding
// 16, 64 and 256 MiB of constants, swapIn from the host tier against a raw GPUQueue.writeBuffer of
// the same bytes through the page's own GPUDevice, destroy + rebuild, and swapOut latency.
// Resolves to { rows: [{ mib, raw, rawCreate, swapIn, swapInBudget, swapOut, rebuild }], adapter }
// (medians in ms).
export async function run() {
  const MIB = 1 << 20;
  const CHUNK = 16 * MIB; // constants split in 16 MiB tensors, as a model's weights are
  const median = (v) => v.slice().sort((a, b) => a - b)[v.length >> 1];
  const bytes = new Uint8Array(CHUNK).map((_, i) => i % 251);
  const desc = { dataType: 'float32', shape: [CHUNK / 4] };
  // Every timed path ends with the same readback of one word: a 4-byte copy into a mappable
  // buffer and its mapAsync, queued after the writes, so the bytes are on the GPU (queue work
  // runs in order) when the clock stops.
  const word = { dataType: 'float32', shape: [1] };
  const setup = async (options) => {
    const context = await navigator.ml.createContext(options);
    const probe = await context.createTensor({ ...word, readable: true });
    await context.readTensor(probe);
    const build = async (n) => {
      const b = new MLGraphBuilder(context);
      let acc = b.input('x', desc);
      for (let k = 0; k < n; k++) acc = b.add(acc, b.constant(desc, bytes.buffer));
      return b.build({ y: acc });
    };
    return { context, build, readback: () => context.readTensor(probe) };
  };
  const plain = await setup();
  // The raw reference: the same bytes through the page's own GPUDevice.
  const adapter = await navigator.gpu.requestAdapter();
  const device = await adapter.requestDevice({ requiredLimits: { maxBufferSize: adapter.limits.maxBufferSize } });
  const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST;
  // One staging buffer for every raw readback, as the polyfill keeps its staging buffers.
  const staging = device.createBuffer({ size: 4, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const rawReadback = async (buffer) => {
    const encoder = device.createCommandEncoder();
    encoder.copyBufferToBuffer(buffer, 0, staging, 0, 4);
    device.queue.submit([encoder.finish()]);
    await staging.mapAsync(GPUMapMode.READ);
    staging.unmap();
  };
  const make = (n) => Array.from({ length: n }, () => device.createBuffer({ size: CHUNK, usage }));
  // Writes `sources` into `buffers`, or into n buffers created inside the clock (destroyed after it).
  const rawWrite = async (buffers, n, sources) => {
    await device.queue.onSubmittedWorkDone();
    const t = performance.now();
    const targets = buffers ?? make(n);
    targets.forEach((b, k) => device.queue.writeBuffer(b, 0, sources[k]));
    await rawReadback(targets[targets.length - 1]);
    const ms = performance.now() - t;
    if (!buffers) targets.forEach((b) => b.destroy());
    return ms;
  };
  // Warms the page's device up as the polyfill's already is (its first writes are slower).
  await rawWrite(null, 1, [bytes]);
  const rows = [];
  for (const total of [16 * MIB, 64 * MIB, 256 * MIB]) {
    const n = total / CHUNK;
    // Medians of more runs where a run is short: a millisecond of noise is 20% at 16 MiB.
    const runs = 2 * Math.max(3, 24 / n);
    // A copy per buffer, as each constant has its own host copy (one array written n times
    // would stay in the CPU's caches), and two sets used in turn, as the budget row swaps in
    // two graphs in turn.
    const copies = () => Array.from({ length: n }, () => bytes.slice());
    const sources = [copies(), copies()];
    // Into the same buffers every run, as a swap-in at the budget writes into recycled ones;
    // the runs that create their buffers come after, so no run waits for their destruction.
    const buffers = make(n);
    const raw = [];
    for (let r = 0; r < runs; r++) raw.push(await rawWrite(buffers, n, sources[r % 2]));
    buffers.forEach((b) => b.destroy());
    const rawCreate = [];
    for (let r = 0; r < runs; r++) rawCreate.push(await rawWrite(null, n, sources[r % 2]));

    const graph = await plain.build(n);
    await plain.readback();
    const swapIn = [];
    const swapOut = [];
    for (let r = 0; r < runs; r++) {
      let t = performance.now();
      await graph.swapOut();
      swapOut.push(performance.now() - t);
      t = performance.now();
      await graph.swapIn();
      await plain.readback();
      swapIn.push(performance.now() - t);
    }
    graph.destroy();

    // At the budget: room for one of two graphs of the same shapes, so each swapIn evicts the other.
    const first = await plain.build(n);
    await plain.readback();
    const needed = plain.context.memoryInfo().deviceBytes;
    first.destroy();
    const limited = await setup({ memoryBudget: needed + MIB });
    const pair = [await limited.build(n), await limited.build(n)];
    await limited.readback();
    const swapInBudget = [];
    const swapIns = limited.context.memoryInfo().swapIns;
    for (let r = 0; r < runs; r++) {
      const t = performance.now();
      await pair[r % 2].swapIn();
      await limited.readback();
      swapInBudget.push(performance.now() - t);
    }
    if (limited.context.memoryInfo().swapIns !== swapIns + runs) throw new Error('a swapIn at the budget found its graph resident');
    pair.forEach((g) => g.destroy());
    limited.context.destroy();

    const rebuild = [];
    for (let r = 0; r < 2; r++) {
      const t = performance.now();
      const g = await plain.build(n);
      await plain.readback();
      rebuild.push(performance.now() - t);
      g.destroy();
    }
    rows.push({
      mib: total / MIB, raw: median(raw), rawCreate: median(rawCreate), swapIn: median(swapIn),
      swapInBudget: median(swapInBudget), swapOut: median(swapOut), rebuild: median(rebuild),
    });
  }
  device.destroy();
  return { rows, adapter: adapter.info ? `${adapter.info.vendor} ${adapter.info.architecture} ${adapter.info.description}` : 'unknown' };
}
