// What the "disk" tier costs in the browser, beside what the browser's file reading allows: a
// file of 80 tensors of one MoE expert's size (0.8 MB float32) in OPFS, read back in a
// scattered order, per tensor. The references read the same ranges with the page's own code:
// `Blob.slice().arrayBuffer()` one after the other and all at once, a BYOB stream, and a
// FileSystemSyncAccessHandle in a dedicated Worker (a page cannot use one), alone and with each
// range transferred to the page.
// Ours: a graph per tensor built from `openWeights(handle)`, `swapOut({to: 'disk'})`, then
// `swapIn()` one after the other, on a CPU context (into wasm memory) and a WebGPU context
// (SwiftShader here), each swap-in ending in the bytes being usable. Median of 3 rounds.
//   node bench/disk_reads.mjs [--size-kib 800] [--count 80]
import { parseArgs } from 'node:util';
import { start, openPage } from '../tests/browser/browser.mjs';

const { values: args } = parseArgs({ options: { 'size-kib': { type: 'string', default: '800' }, count: { type: 'string', default: '80' } } });
const size = Number(args['size-kib']) * 1024;
const count = Number(args.count);

const { browser, url, close } = await start();
try {
  const page = await openPage(browser, `${url}/tests/browser/harness.html?backend=webgpu`, 'bench');
  await page.evaluate(() => window.harness.ready);
  const rows = await page.evaluate(async ({ size, count }) => {
    const median = (v) => v.slice().sort((a, b) => a - b)[v.length >> 1];
    const root = await navigator.storage.getDirectory();
    const name = 'disk-reads.safetensors';
    // A safetensors file of `count` float32 tensors of `size` bytes.
    const header = {};
    for (let k = 0; k < count; k++) header[`t${k}`] = { dtype: 'F32', shape: [size / 4], data_offsets: [k * size, (k + 1) * size] };
    const json = new TextEncoder().encode(JSON.stringify(header));
    const file = new Uint8Array(8 + json.length + count * size);
    new DataView(file.buffer).setBigUint64(0, BigInt(json.length), true);
    file.set(json, 8);
    for (let i = 8 + json.length, v = 0; i < file.length; i++, v = (v + 13) % 251) file[i] = v;
    const handle = await root.getFileHandle(name, { create: true });
    const writable = await handle.createWritable();
    await writable.write(file);
    await writable.close();
    const base = 8 + json.length;
    // A scattered order, as experts miss.
    const order = Array.from({ length: count }, (_, i) => (i * 37) % count);
    const ranges = order.map((k) => base + k * size);
    const perRead = async (f) => {
      const times = [];
      for (let round = 0; round < 3; round++) {
        const t = performance.now();
        await f();
        times.push((performance.now() - t) / count);
      }
      return median(times);
    };
    const out = [];
    const blob = await handle.getFile();
    out.push(['Blob.slice().arrayBuffer(), one after the other', await perRead(async () => {
      for (const o of ranges) await blob.slice(o, o + size).arrayBuffer();
    })]);
    out.push(['Blob.slice().arrayBuffer(), all at once', await perRead(async () => {
      await Promise.all(ranges.map((o) => blob.slice(o, o + size).arrayBuffer()));
    })]);
    out.push(['Blob BYOB stream (256 KiB reads), one after the other', await perRead(async () => {
      let buffer = new ArrayBuffer(256 << 10);
      for (const o of ranges) {
        const reader = blob.slice(o, o + size).stream().getReader({ mode: 'byob' });
        for (let got = 0; got < size;) {
          const { value, done } = await reader.read(new Uint8Array(buffer, 0, Math.min(buffer.byteLength, size - got)));
          if (done) break;
          got += value.byteLength;
          buffer = value.buffer;
        }
      }
    })]);
    const worker = new Worker(URL.createObjectURL(new Blob([`
      onmessage = async ({ data: { name, ranges, size } }) => {
        const root = await navigator.storage.getDirectory();
        const access = await (await root.getFileHandle(name)).createSyncAccessHandle();
        const buffer = new Uint8Array(size);
        const times = [];
        for (let round = 0; round < 3; round++) {
          const t = performance.now();
          for (const o of ranges) access.read(buffer, { at: o });
          times.push((performance.now() - t) / ranges.length);
        }
        access.close();
        postMessage(times.sort((a, b) => a - b)[1]);
      };`], { type: 'text/javascript' })));
    out.push(['FileSystemSyncAccessHandle.read() in a Worker, one after the other', await new Promise((resolve) => {
      worker.onmessage = (e) => resolve(e.data);
      worker.postMessage({ name, ranges, size });
    })]);
    worker.terminate();
    // What a page gets from one: each range read there and transferred back.
    const server = new Worker(URL.createObjectURL(new Blob([`
      let access;
      onmessage = async ({ data: [name, o, n] }) => {
        access ??= await (await (await navigator.storage.getDirectory()).getFileHandle(name)).createSyncAccessHandle();
        const buffer = new ArrayBuffer(n);
        if (n > 0) access.read(new Uint8Array(buffer), { at: o });
        postMessage(buffer, [buffer]);
      };`], { type: 'text/javascript' })));
    const ask = (o, n) => new Promise((resolve) => {
      server.onmessage = (e) => resolve(e.data);
      server.postMessage([name, o, n]);
    });
    await ask(0, 0);
    out.push(['the same in a Worker, each range transferred to the page', await perRead(async () => {
      for (const o of ranges) await ask(o, size);
    })]);
    server.terminate();
    // The handle's lock goes with the Worker.
    await new Promise((resolve) => setTimeout(resolve, 200));

    for (const accelerated of [false, true]) {
      const { install } = await import('/pkg/index.js');
      install({ force: true, backend: accelerated ? 'webgpu' : 'cpu' });
      const context = await navigator.ml.createContext();
      const weights = await context.openWeights(handle);
      const desc = { dataType: 'float32', shape: [size / 4] };
      const graphs = [];
      for (let k = 0; k < count; k++) {
        const b = new MLGraphBuilder(context);
        graphs.push(await b.build({ y: b.add(b.input('x', desc), b.constant(await weights.constantTensor(`t${k}`))) }));
      }
      const x = await context.createTensor({ ...desc, writable: true });
      const y = await context.createTensor({ ...desc, readable: true });
      context.writeTensor(x, new Float32Array(size / 4));
      // Every swap-in is used: one dispatch after all, read back, checked against the file.
      const streamed = context.memoryInfo().bytesStreamedFromDisk;
      const ms = await perRead(async () => {
        for (const g of graphs) await g.swapOut({ to: 'disk' });
        const t = performance.now();
        for (const k of order) await graphs[k].swapIn();
        context.dispatch(graphs[order.at(-1)], { x }, { y });
        await context.readTensor(y);
        return performance.now() - t;
      });
      const got = new Uint8Array(await context.readTensor(y));
      const k = order.at(-1);
      const want = file.subarray(base + k * size, base + (k + 1) * size);
      // y = 0 + t: the tensor's float32 values, compared as numbers (bytes differ only for NaN).
      const wantFloats = new Float32Array(want.slice().buffer);
      const exact = got.length === want.length && new Float32Array(got.buffer).every((v, i) => Object.is(v, wantFloats[i]) || (v !== v && wantFloats[i] !== wantFloats[i]));
      const read = context.memoryInfo().bytesStreamedFromDisk - streamed;
      out.push([`ours: swapIn() from "disk", ${accelerated ? 'WebGPU' : 'CPU'} context${exact ? '' : ' (WRONG BYTES)'}${read >= 3 * count * size ? '' : ' (FILE NOT READ)'}`, ms]);
      context.destroy();
    }
    await root.removeEntry(name);
    return out;
  }, { size, count });
  console.log(`| reading ${count} ranges of ${(size / 1e6).toFixed(2)} MB from an OPFS file | ms per range | MB/s |`);
  console.log('|---|---:|---:|');
  for (const [what, ms] of rows) console.log(`| ${what} | ${ms.toFixed(2)} | ${(size / 1e3 / ms).toFixed(0)} |`);
} finally {
  await close();
}
