// Weight files in headless Chromium: a safetensors file written to OPFS is opened from its
// FileSystemFileHandle (and as a File and a Blob), its tensors stream into constants of a graph
// whose results are checked exactly; a corrupt file rejects with a DataError naming the file and
// the page keeps working; swapOut({to: 'disk'}) then dispatch gives identical results, and with
// a hostMemoryBudget swapOut({to: 'host'}) keeps host copies that come back without a file read.
// constantTensor(name, {wait: false}) lets a graph build while the bytes stream (the first
// dispatch waits), and a dedicated Worker loads from OPFS the same way, through sync access
// handles that it closes afterwards, streaming instead when another sync handle locks the file.
// Tensors asked for together (Promise.all) stream in two lanes with exact values.
// With WEBNN_BACKEND=cpu the same runs on the CPU backend, whose "device" is wasm memory: its
// constants are read whole (wait: false changes nothing there), come back from the file after
// swapOut({to: 'disk'}), and 20 disk round trips of a 16 MiB graph do not grow wasm memory.
import { start, openHarness } from './browser.mjs';

const { browser, url, close } = await start();
let failed = 0;
try {
  const page = await openHarness(browser, url, 'weights');
  const results = await page.evaluate(async () => {
    const out = [];
    const check = (ok, name, detail = '') => out.push({ ok: !!ok, name, detail });
    // safetensors: 8-byte little-endian header length, JSON header, data.
    const safetensors = (tensors) => {
      let offset = 0;
      const header = {};
      for (const [name, dtype, shape, bytes] of tensors) {
        header[name] = { dtype, shape, data_offsets: [offset, offset + bytes.byteLength] };
        offset += bytes.byteLength;
      }
      const json = new TextEncoder().encode(JSON.stringify(header));
      const file = new Uint8Array(8 + json.length + offset);
      new DataView(file.buffer).setBigUint64(0, BigInt(json.length), true);
      file.set(json, 8);
      let at = 8 + json.length;
      for (const [, , , bytes] of tensors) {
        file.set(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength), at);
        at += bytes.byteLength;
      }
      return file;
    };
    const w = new Float32Array(1000).map((_, i) => Math.sin(i) * 100);
    // bfloat16 bits of -2.5 .. (bf16 is converted to float32 while streaming).
    const bf = new Float32Array(1000).map((_, i) => (i % 7) - 2.5);
    const bfBits = new Uint16Array(1000).map((_, i) => new Uint32Array(bf.buffer)[i] >>> 16);
    const bytes = safetensors([['w', 'F32', [1000], w], ['b', 'BF16', [1000], bfBits]]);
    const root = await navigator.storage.getDirectory();
    const handle = await root.getFileHandle('small.safetensors', { create: true });
    const writable = await handle.createWritable();
    await writable.write(bytes);
    await writable.close();

    const context = await navigator.ml.createContext();
    const cpu = new URLSearchParams(location.search).get('backend') === 'cpu';
    const run = async (file) => {
      check(file instanceof MLWeightFile, 'openWeights resolves to an MLWeightFile');
      const names = file.tensors.map((t) => `${t.name}:${t.dataType}[${t.shape}]:${t.byteLength}`).sort().join(' ');
      check(names === 'b:float32[1000]:4000 w:float32[1000]:4000', 'tensors', names);
      const builder = new MLGraphBuilder(context);
      const desc = { dataType: 'float32', shape: [1000] };
      const x = builder.input('x', desc);
      const wt = await file.constantTensor('w');
      const bt = await file.constantTensor('b');
      check(wt.constant && wt.dataType === 'float32', 'constant tensor');
      const graph = await builder.build({ y: builder.add(builder.mul(x, builder.constant(wt)), builder.constant(bt)) });
      const xs = new Float32Array(1000).map((_, i) => i / 8);
      const xt = await context.createTensor({ ...desc, writable: true });
      const yt = await context.createTensor({ ...desc, readable: true });
      context.writeTensor(xt, xs);
      const want = new Float32Array(1000).map((_, i) => Math.fround(xs[i] * w[i]) + bf[i]);
      const dispatch = async () => {
        context.dispatch(graph, { x: xt }, { y: yt });
        return new Float32Array(await context.readTensor(yt));
      };
      const got = await dispatch();
      check(got.every((v, i) => Object.is(v, Math.fround(want[i]))), 'exact values');
      const before = context.memoryInfo();
      await graph.swapOut({ to: 'disk' });
      const after = context.memoryInfo();
      check(graph.residency === 'disk' && graph.deviceBytes === 0 && graph.hostBytes === 0, 'disk tier',
        `${graph.residency} ${graph.deviceBytes} ${graph.hostBytes}`);
      check(after.deviceBytes <= before.deviceBytes - 8000, 'device bytes freed', `${before.deviceBytes} -> ${after.deviceBytes}`);
      const again = await dispatch();
      check(again.every((v, i) => Object.is(v, got[i])), 'identical after a disk round trip');
      check(context.memoryInfo().bytesStreamedFromDisk === after.bytesStreamedFromDisk + 6000, 'bytes streamed again',
        `${after.bytesStreamedFromDisk} -> ${context.memoryInfo().bytesStreamedFromDisk}`);
      await graph.swapOut({ to: 'disk' });
      await graph.swapIn();
      check(graph.residency === 'device', 'swapIn streams back');
      const third = await dispatch();
      check(third.every((v, i) => Object.is(v, got[i])), 'identical after swapIn');
    };
    const progress = [];
    await run(await context.openWeights(handle, { onProgress: (a, b) => progress.push([a, b]) }));
    check(progress.length > 0 && progress.at(-1)[0] === progress.at(-1)[1], 'onProgress reaches the total');
    await run(await context.openWeights(await handle.getFile()));
    await run(await context.openWeights(new Blob([bytes])));

    // hostMemoryBudget: the constants keep host copies, so the "host" tier brings them back
    // with a GPU copy and no file read; swapOut({to: 'disk'}) drops the copies.
    {
      const cached = await navigator.ml.createContext({ hostMemoryBudget: 1 << 20 });
      const file = await cached.openWeights(handle);
      const builder = new MLGraphBuilder(cached);
      const desc = { dataType: 'float32', shape: [1000] };
      const x = builder.input('x', desc);
      const wc = builder.constant(await file.constantTensor('w'));
      const bc = builder.constant(await file.constantTensor('b'));
      const graph = await builder.build({ y: builder.add(builder.mul(x, wc), bc) });
      const xt = await cached.createTensor({ ...desc, writable: true });
      const yt = await cached.createTensor({ ...desc, readable: true });
      cached.writeTensor(xt, new Float32Array(1000).fill(1));
      const want = new Float32Array(1000).map((_, i) => Math.fround(w[i] + bf[i]));
      const same = async () => {
        cached.dispatch(graph, { x: xt }, { y: yt });
        const got = new Float32Array(await cached.readTensor(yt));
        return got.every((v, i) => Object.is(v, want[i]));
      };
      check(await same(), 'host copies: exact values');
      const loaded = cached.memoryInfo();
      check(loaded.hostBytes === 8000 && loaded.bytesStreamedFromDisk === 6000, 'host copies counted in hostBytes',
        JSON.stringify(loaded));
      await graph.swapOut({ to: 'host' });
      check(graph.residency === 'host' && graph.deviceBytes === 0 && graph.hostBytes === 8000, 'host tier',
        `${graph.residency} ${graph.deviceBytes} ${graph.hostBytes}`);
      check(await same(), 'identical after a host round trip');
      await graph.swapOut({ to: 'host' });
      await graph.swapIn();
      check(await same(), 'identical after swapIn from host');
      check(cached.memoryInfo().bytesStreamedFromDisk === 6000, 'no file read from the host tier',
        JSON.stringify(cached.memoryInfo()));
      await graph.swapOut({ to: 'disk' });
      check(graph.residency === 'disk' && cached.memoryInfo().hostBytes === 0, 'disk drops the host copies',
        `${graph.residency} ${cached.memoryInfo().hostBytes}`);
      check(await same(), 'identical after a disk round trip with host copies');
      cached.destroy();
    }

    // Reads from the "disk" tier: a graph's constants adjacent in the file come back in one
    // Blob read, and two graphs dispatched one after the other without awaiting have their reads
    // in flight at once (each Blob.arrayBuffer() counted while it is pending).
    {
      const file = await context.openWeights(handle);
      const desc = { dataType: 'float32', shape: [1000] };
      const graphOf = async (build) => {
        const builder = new MLGraphBuilder(context);
        return builder.build({ y: await build(builder, builder.input('x', desc)) });
      };
      const both = await graphOf(async (b, x) =>
        b.add(b.mul(x, b.constant(await file.constantTensor('w'))), b.constant(await file.constantTensor('b'))));
      const onlyW = await graphOf(async (b, x) => b.mul(x, b.constant(await file.constantTensor('w'))));
      const onlyB = await graphOf(async (b, x) => b.add(x, b.constant(await file.constantTensor('b'))));
      const xt = await context.createTensor({ ...desc, writable: true });
      context.writeTensor(xt, new Float32Array(1000).fill(1));
      const outputs = await Promise.all([0, 1].map(() => context.createTensor({ ...desc, readable: true })));
      const reads = { calls: 0, pending: 0, most: 0, streams: 0 };
      const { arrayBuffer, stream } = Blob.prototype;
      Blob.prototype.arrayBuffer = function () {
        reads.calls++;
        reads.most = Math.max(reads.most, ++reads.pending);
        return arrayBuffer.call(this).finally(() => reads.pending--);
      };
      Blob.prototype.stream = function () {
        reads.streams++;
        return stream.call(this);
      };
      try {
        const counted = async (graphs) => {
          for (const g of graphs) await g.swapOut({ to: 'disk' });
          Object.assign(reads, { calls: 0, most: 0, streams: 0 });
          graphs.forEach((g, i) => context.dispatch(g, { x: xt }, { y: outputs[i] }));
          const got = await Promise.all(graphs.map((_, i) => context.readTensor(outputs[i])));
          return got.map((y) => new Float32Array(y));
        };
        const [y] = await counted([both]);
        check(y.every((v, i) => Object.is(v, Math.fround(w[i] + bf[i]))) && reads.calls === 1 && reads.streams === 0,
          'two constants adjacent in the file come back from "disk" in one read', JSON.stringify(reads));
        const [yw, yb] = await counted([onlyW, onlyB]);
        const exact = yw.every((v, i) => Object.is(v, Math.fround(w[i]))) && yb.every((v, i) => Object.is(v, Math.fround(1 + bf[i])));
        check(exact && reads.calls === 2 && reads.most === 2, 'two dispatches queued together read their constants at once',
          JSON.stringify(reads));
      } finally {
        Object.assign(Blob.prototype, { arrayBuffer, stream });
      }
    }

    // A corrupt file: the header claims more bytes than the file has.
    const bad = bytes.slice(0, bytes.length - 100);
    const badFile = new File([bad], 'corrupt.safetensors');
    let error;
    try {
      const file = await context.openWeights(badFile);
      await file.constantTensor('b');
    } catch (e) {
      error = e;
    }
    check(error instanceof DOMException && error.name === 'DataError' && /corrupt\.safetensors/.test(error.message),
      'a corrupt file rejects with a DataError naming it', error && `${error.name}: ${error.message}`);
    try {
      await context.openWeights('not a file');
    } catch (e) {
      error = e;
    }
    check(error instanceof TypeError, 'a string source is a TypeError');
    await run(await context.openWeights(handle));

    // Weightless build: constantTensor(name, {wait: false}) resolves before the bytes stream;
    // the graph is built meanwhile and its first dispatch waits for them.
    const big = new Float32Array(4 << 20).map((_, i) => (i % 1000) - 500.5);
    const bigHandle = await root.getFileHandle('big.safetensors', { create: true });
    const bigWritable = await bigHandle.createWritable();
    await bigWritable.write(safetensors([['w', 'F32', [big.length], big]]));
    await bigWritable.close();
    const loaded = [];
    const bigFile = await context.openWeights(bigHandle, { onProgress: (a) => loaded.push(a) });
    const bw = await bigFile.constantTensor('w', { wait: false });
    const atResolve = loaded.at(-1) ?? 0;
    if (cpu) check(atResolve === big.byteLength, 'wait: false on the CPU backend resolves once the tensor is read', `${atResolve} of ${big.byteLength}`);
    else check(atResolve < big.byteLength, 'wait: false resolves before the stream ends', `${atResolve} of ${big.byteLength}`);
    const bigDesc = { dataType: 'float32', shape: [big.length] };
    const b2 = new MLGraphBuilder(context);
    const bx = b2.input('x', bigDesc);
    const bigGraph = await b2.build({ y: b2.mul(bx, b2.constant(bw)) });
    const atBuild = loaded.at(-1) ?? 0;
    check(true, 'built while streaming', `${atBuild} of ${big.byteLength} bytes streamed when build() resolved`);
    const bxt = await context.createTensor({ ...bigDesc, writable: true });
    const byt = await context.createTensor({ ...bigDesc, readable: true });
    context.writeTensor(bxt, new Float32Array(big.length).fill(2));
    context.dispatch(bigGraph, { x: bxt }, { y: byt });
    const bigGot = new Float32Array(await context.readTensor(byt));
    check(bigGot.every((v, i) => v === big[i] * 2), 'the first dispatch waits for the stream: exact values');
    check(loaded.at(-1) === big.byteLength, 'the background stream reports progress to the end');
    if (cpu) {
      // The disk tier in wasm memory: freed space is reused, so round trips do not grow it.
      const { testing } = await import('/pkg/webnn.js');
      const cycle = async () => {
        await bigGraph.swapOut({ to: 'disk' });
        context.dispatch(bigGraph, { x: bxt }, { y: byt });
        return new Float32Array(await context.readTensor(byt));
      };
      await cycle();
      const wasmBefore = testing.wasmMemoryBytes(context);
      const streamed = context.memoryInfo().bytesStreamedFromDisk;
      let exact = true;
      for (let i = 0; i < 20; i++) exact &&= (await cycle()).every((v, k) => v === big[k] * 2);
      const wasmAfter = testing.wasmMemoryBytes(context);
      check(exact, '20 disk round trips of a 16 MiB constant: exact values');
      check(context.memoryInfo().bytesStreamedFromDisk === streamed + 20 * big.byteLength, 'each read the file again',
        `${context.memoryInfo().bytesStreamedFromDisk - streamed} bytes`);
      check(wasmAfter === wasmBefore, 'wasm memory did not grow over them', `${wasmBefore} -> ${wasmAfter} bytes`);
    }
    await root.removeEntry('big.safetensors');

    // Tensors asked for together stream two at a time, each lane over a contiguous run of the
    // file whose stream it continues from tensor to tensor: exact values with and without wait.
    const { readerStats } = await import('/pkg/webnn.js');
    const parts = [3, 1, 2, 5, 1, 4, 2, 3].map((mib, k) => new Float32Array(mib << 18).map((_, i) => k * 1000 + (i % 997)));
    const manyHandle = await root.getFileHandle('many.safetensors', { create: true });
    const manyWritable = await manyHandle.createWritable();
    await manyWritable.write(safetensors(parts.map((p, k) => [`t${k}`, 'F32', [p.length], p])));
    await manyWritable.close();
    for (const wait of [true, false]) {
      const file = await context.openWeights(manyHandle);
      readerStats.maxOpen = readerStats.open;
      const before = { ...readerStats };
      const tensors = await Promise.all(parts.map((_, k) => file.constantTensor(`t${k}`, { wait })));
      const builder = new MLGraphBuilder(context);
      const one = builder.input('one', { dataType: 'float32', shape: [1] });
      const graph = await builder.build(Object.fromEntries(tensors.map((t, k) => [`y${k}`, builder.mul(builder.constant(t), one)])));
      const onet = await context.createTensor({ dataType: 'float32', shape: [1], writable: true });
      context.writeTensor(onet, new Float32Array([1]));
      const outs = await Promise.all(parts.map((p) => context.createTensor({ dataType: 'float32', shape: [p.length], readable: true })));
      context.dispatch(graph, { one: onet }, Object.fromEntries(outs.map((t, k) => [`y${k}`, t])));
      const got = await Promise.all(outs.map(async (t) => new Float32Array(await context.readTensor(t))));
      check(got.every((g, k) => g.length === parts[k].length && g.every((v, i) => v === parts[k][i])),
        `tensors asked for together (wait: ${wait}): exact values`);
      const streams = readerStats.streams - before.streams;
      const continued = readerStats.continued - before.continued;
      // What holds under any timing: both lanes start on the batch (the lanes are handed out
      // once every call of the turn has asked), never more than two tensors read at once, and
      // each tensor opens a stream or continues its lane's. How many streams open depends on
      // timing: a lane that finishes its run first takes over the middle of the other's rest,
      // and a parked stream not continued within a macrotask is closed. (The CPU backend has
      // no lanes: each tensor reads its own range.)
      if (!cpu) check(streams >= 2 && readerStats.maxOpen === 2 && streams + continued === parts.length,
        `two lanes, each opening or continuing a stream per tensor (wait: ${wait})`,
        `${streams} streams opened, ${continued} continued, at most ${readerStats.maxOpen} tensors read at once`);
      graph.destroy();
    }
    await root.removeEntry('many.safetensors');

    // A dedicated Worker: OPFS handle, openWeights, a graph, exact values.
    const source = `
      import { install, init } from '${location.origin}/pkg/index.js';
      import { readerStats } from '${location.origin}/pkg/webnn.js';
      install({ force: true, backend: 'webgpu' });
      await init();
      const root = await navigator.storage.getDirectory();
      const handle = await root.getFileHandle('small.safetensors');
      const context = await navigator.ml.createContext();
      const file = await context.openWeights(handle);
      const builder = new MLGraphBuilder(context);
      const desc = { dataType: 'float32', shape: [1000] };
      const x = builder.input('x', desc);
      const w = await file.constantTensor('w');
      const b = await file.constantTensor('b', { wait: false });
      const graph = await builder.build({ y: builder.add(builder.mul(x, builder.constant(w)), builder.constant(b)) });
      const xt = await context.createTensor({ ...desc, writable: true });
      const yt = await context.createTensor({ ...desc, readable: true });
      context.writeTensor(xt, new Float32Array(1000).map((_, i) => i / 8));
      context.dispatch(graph, { x: xt }, { y: yt });
      const y = new Float32Array(await context.readTensor(yt));
      const viaSync = readerStats.syncHandles;
      // The loader closed its sync handles: the file can be locked again.
      let released = true;
      try { (await handle.createSyncAccessHandle()).close(); } catch { released = false; }
      // A file locked by another sync handle is streamed instead.
      const held = await handle.createSyncAccessHandle();
      const streams = readerStats.streams;
      let locked;
      try {
        const w2 = await file.constantTensor('w');
        const b3 = new MLGraphBuilder(context);
        const g2 = await b3.build({ y: b3.mul(b3.input('x', desc), b3.constant(w2)) });
        context.dispatch(g2, { x: xt }, { y: yt });
        locked = { y: new Float32Array(await context.readTensor(yt)), streamed: readerStats.streams - streams };
      } catch (e) {
        locked = { error: e.message };
      } finally {
        held.close();
      }
      postMessage({ y, viaSync, released, locked, global: self.constructor.name });
    `;
    const worker = new Worker(URL.createObjectURL(new Blob([source], { type: 'text/javascript' })), { type: 'module' });
    const reply = await new Promise((resolve) => {
      worker.onmessage = (e) => resolve(e.data);
      worker.onerror = (e) => resolve({ error: e.message });
      setTimeout(() => resolve({ error: 'timed out' }), 60000);
    });
    worker.terminate();
    const xs = new Float32Array(1000).map((_, i) => i / 8);
    const want = new Float32Array(1000).map((_, i) => Math.fround(xs[i] * w[i]) + bf[i]);
    check(reply.y && reply.y.every((v, i) => Object.is(v, Math.fround(want[i]))),
      'a dedicated Worker loads from OPFS and gets exact values', reply.error ?? reply.global);
    check(reply.viaSync >= 2, 'the Worker read the tensors through sync access handles', `${reply.viaSync} handles`);
    check(reply.released === true, 'the loader closed its sync access handles');
    const wantW = new Float32Array(1000).map((_, i) => Math.fround(xs[i] * w[i]));
    check(reply.locked?.y && reply.locked.streamed >= 1 && reply.locked.y.every((v, i) => Object.is(v, wantW[i])),
      'a file locked by another sync access handle is streamed instead: exact values',
      reply.locked?.error ?? `${reply.locked?.streamed} streams`);
    return out;
  });
  for (const r of results) {
    if (!r.ok) failed++;
    console.log(`${r.ok ? 'ok  ' : 'FAIL'} ${r.name}${r.detail ? `: ${r.detail}` : ''}`);
  }
  console.log(`weights: ${results.length - failed} passed, ${failed} failed`);
} catch (e) {
  failed++;
  console.log(`FAIL harness: ${e.message.split('\n')[0]}`);
} finally {
  await close();
}
process.exit(failed === 0 ? 0 : 1);
