// Benchmark of the memory primitives in headless Chromium (WebGPU on SwiftShader), one run:
// for graphs holding 16, 64 and 256 MiB of constants, swapIn against a raw GPUQueue.writeBuffer
// of the same bytes (the physical reference), against what the standard allows today (destroy,
// then rebuild from JS ArrayBuffers), and swapOut latency. Prints a markdown table.
//   node bench/memory.mjs
import { start, openPage, harnessUrl, writeOut } from '../tests/browser/browser.mjs';

const { browser, url, close } = await start();
try {
  const page = await openPage(browser, harnessUrl(url), 'bench');
  await page.evaluate(() => window.harness.ready);
  const rows = await page.evaluate(async () => {
    const MIB = 1 << 20;
    const CHUNK = 16 * MIB; // constants split in 16 MiB tensors, as a model's weights are
    const median = (v) => v.slice().sort((a, b) => a - b)[v.length >> 1];
    const context = await navigator.ml.createContext();
    const bytes = new Uint8Array(CHUNK).map((_, i) => i % 251);
    const desc = { dataType: 'float32', shape: [CHUNK / 4] };
    const x = await context.createTensor({ ...desc, writable: true });
    const y = await context.createTensor({ ...desc, readable: true });
    context.writeTensor(x, new Float32Array(CHUNK / 4));
    // A dispatch and a read of one element make the queue's work complete before the clock stops.
    const small = await (async () => {
      const b = new MLGraphBuilder(context);
      const i = b.input('x', { dataType: 'float32', shape: [1] });
      return b.build({ y: b.add(i, i) });
    })();
    const sx = await context.createTensor({ dataType: 'float32', shape: [1], writable: true });
    const sy = await context.createTensor({ dataType: 'float32', shape: [1], readable: true });
    const settle = async () => {
      context.dispatch(small, { x: sx }, { y: sy });
      await context.readTensor(sy);
    };
    const build = async (n) => {
      const b = new MLGraphBuilder(context);
      let acc = b.input('x', desc);
      for (let k = 0; k < n; k++) acc = b.add(acc, b.constant(desc, bytes.buffer));
      return b.build({ y: acc });
    };
    // The raw reference: the same bytes through the page's own GPUDevice.
    const adapter = await navigator.gpu.requestAdapter();
    const device = await adapter.requestDevice({ requiredLimits: { maxBufferSize: adapter.limits.maxBufferSize } });
    const rows = [];
    for (const total of [16 * MIB, 64 * MIB, 256 * MIB]) {
      const n = total / CHUNK;
      const raw = [];
      for (let r = 0; r < 3; r++) {
        const buffers = Array.from({ length: n }, () =>
          device.createBuffer({ size: CHUNK, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST }));
        await device.queue.onSubmittedWorkDone();
        const t = performance.now();
        for (const b of buffers) device.queue.writeBuffer(b, 0, bytes);
        await device.queue.onSubmittedWorkDone();
        raw.push(performance.now() - t);
        buffers.forEach((b) => b.destroy());
      }
      const graph = await build(n);
      context.dispatch(graph, { x }, { y });
      await settle();
      const swapIn = [];
      const swapOut = [];
      for (let r = 0; r < 3; r++) {
        let t = performance.now();
        await graph.swapOut();
        swapOut.push(performance.now() - t);
        t = performance.now();
        await graph.swapIn();
        await settle();
        swapIn.push(performance.now() - t);
      }
      graph.destroy();
      const rebuild = [];
      for (let r = 0; r < 2; r++) {
        const t = performance.now();
        const g = await build(n);
        context.dispatch(g, { x }, { y });
        await settle();
        rebuild.push(performance.now() - t);
        g.destroy();
      }
      rows.push({ mib: total / MIB, raw: median(raw), swapIn: median(swapIn), swapOut: median(swapOut), rebuild: median(rebuild) });
    }
    device.destroy();
    return { rows, adapter: adapter.info ? `${adapter.info.vendor} ${adapter.info.architecture} ${adapter.info.description}` : 'unknown' };
  });
  const gbs = (mib, ms) => ((mib * (1 << 20)) / (ms / 1e3) / 1e9).toFixed(2);
  const lines = [
    `## swapIn / swapOut in headless Chromium (WebGPU adapter: ${rows.adapter})`,
    '| constants | raw writeBuffer | swapIn | swapIn / raw | destroy + rebuild | swapIn speed-up | swapOut |',
    '|---|---|---|---|---|---|---|',
    ...rows.rows.map((r) =>
      `| ${r.mib} MiB | ${gbs(r.mib, r.raw)} GB/s (${r.raw.toFixed(1)} ms) | ${gbs(r.mib, r.swapIn)} GB/s (${r.swapIn.toFixed(1)} ms) | ` +
      `${((100 * r.raw) / r.swapIn).toFixed(0)}% | ${r.rebuild.toFixed(1)} ms | ${(r.rebuild / r.swapIn).toFixed(1)}x | ${r.swapOut.toFixed(2)} ms |`),
  ];
  console.log(lines.join('\n'));
  writeOut('bench_memory.md', lines.join('\n') + '\n');
} finally {
  await close();
}
