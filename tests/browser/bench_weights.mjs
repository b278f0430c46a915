// Weight streaming benchmark in headless Chromium (WebGPU on SwiftShader): writes safetensors
// files of 256 MiB and 1 GiB (SIZES_MIB="256 1024") to OPFS, then times openWeights() +
// constantTensor() for every tensor beside a plain-JS baseline (file.arrayBuffer() per tensor
// + GPUQueue.writeBuffer on the page's own device) in the same run, and samples the wasm
// memory size and performance.memory.usedJSHeapSize while streaming. Prints a markdown table.
import { start, openPage } from './browser.mjs';

const sizes = (process.env.SIZES_MIB || '256 1024').split(/\s+/).filter(Boolean).map(Number);
const TENSOR_MIB = 64;
const { browser, url, close } = await start();
const rows = [];
try {
  const page = await openPage(browser, `${url}/tests/browser/harness.html`, 'bench');
  await page.waitForFunction(() => window.harness !== undefined, null, { timeout: 60000 });
  await page.evaluate(() => window.harness.ready);
  for (const mib of sizes) {
    const row = await page.evaluate(async ({ mib, tensorMib }) => {
      const count = mib / tensorMib;
      const tensorBytes = tensorMib << 20;
      const header = {};
      for (let i = 0; i < count; i++) {
        header[`t${i}`] = { dtype: 'F32', shape: [tensorBytes / 4], data_offsets: [i * tensorBytes, (i + 1) * tensorBytes] };
      }
      const json = new TextEncoder().encode(JSON.stringify(header));
      const prefix = new Uint8Array(8 + json.length);
      new DataView(prefix.buffer).setBigUint64(0, BigInt(json.length), true);
      prefix.set(json, 8);
      const root = await navigator.storage.getDirectory();
      const name = `bench-${mib}.safetensors`;
      const handle = await root.getFileHandle(name, { create: true });
      const writable = await handle.createWritable();
      await writable.write(prefix);
      const chunk = new Float32Array(tensorBytes / 4).map((_, i) => i);
      for (let i = 0; i < count; i++) await writable.write(chunk);
      await writable.close();

      // The wasm module's memory export: the glue's init resolves to the instance's exports.
      const exports = await (await import('/pkg/webnn_wgpu.js')).default();
      const wasmBytes = () => exports.memory.buffer.byteLength;
      const heap = () => performance.memory?.usedJSHeapSize ?? NaN;
      let peakWasm = wasmBytes();
      let peakHeap = heap();
      const sample = () => {
        peakWasm = Math.max(peakWasm, wasmBytes());
        peakHeap = Math.max(peakHeap, heap());
      };
      const context = await navigator.ml.createContext();
      const wasmBefore = wasmBytes();
      const t0 = performance.now();
      const file = await context.openWeights(handle, { onProgress: sample });
      const tensors = [];
      for (const t of file.tensors) tensors.push(await file.constantTensor(t.name));
      // One dispatch-free round trip so the timing includes the writes reaching the GPU.
      const probe = await context.createTensor({ dataType: 'float32', shape: [1], readable: true });
      await context.readTensor(probe);
      const streamMs = performance.now() - t0;
      const info = context.memoryInfo();
      tensors.forEach((t) => t.destroy());
      context.destroy();

      // Baseline: plain JS, same bytes, a WebGPU device of the page's own.
      const adapter = await navigator.gpu.requestAdapter();
      const device = await adapter.requestDevice({ requiredLimits: { maxBufferSize: adapter.limits.maxBufferSize, maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize } });
      let baseHeap = heap();
      const t1 = performance.now();
      const blob = await handle.getFile();
      const buffers = [];
      for (let i = 0; i < count; i++) {
        const start = prefix.length + i * tensorBytes;
        const bytes = await blob.slice(start, start + tensorBytes).arrayBuffer();
        baseHeap = Math.max(baseHeap, heap());
        const b = device.createBuffer({ size: tensorBytes, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST });
        device.queue.writeBuffer(b, 0, bytes);
        buffers.push(b);
      }
      await device.queue.onSubmittedWorkDone();
      const baseMs = performance.now() - t1;
      buffers.forEach((b) => b.destroy());
      device.destroy();
      await root.removeEntry(name);
      return {
        mib, count, streamMs, baseMs, wasmBefore, peakWasm, peakHeap, baseHeap,
        streamed: info.bytesStreamedFromDisk, device: info.deviceBytes,
      };
    }, { mib, tensorMib: TENSOR_MIB }).catch((e) => ({ mib, error: e.message.split('\n')[0] }));
    rows.push(row);
    console.error(JSON.stringify(row));
  }
} finally {
  await close();
}
const mb = (b) => (b / 2 ** 20).toFixed(1);
const gbs = (bytes, ms) => (bytes / 1e9 / (ms / 1000)).toFixed(2);
console.log('| file | tensors | openWeights + constantTensor | GB/s | plain JS arrayBuffer + writeBuffer | GB/s | wasm memory before → peak (MiB) | peak JS heap streaming / baseline (MiB) |');
console.log('| --- | --- | --- | --- | --- | --- | --- | --- |');
for (const r of rows) {
  if (r.error) {
    console.log(`| ${r.mib} MiB | - | failed: ${r.error} | | | | | |`);
    continue;
  }
  const bytes = r.mib * 2 ** 20;
  console.log(`| ${r.mib} MiB | ${r.count} × 64 MiB | ${r.streamMs.toFixed(0)} ms | ${gbs(bytes, r.streamMs)} | ${r.baseMs.toFixed(0)} ms | ${gbs(bytes, r.baseMs)} | ${mb(r.wasmBefore)} → ${mb(r.peakWasm)} | ${mb(r.peakHeap)} / ${mb(r.baseHeap)} |`);
}
process.exit(rows.some((r) => r.error) ? 1 : 0);
