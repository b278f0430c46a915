import { start, openPage } from './browser.mjs';
const { browser, url, close } = await start(undefined, ['--js-flags=--expose-gc']);
try {
  const page = await openPage(browser, `${url}/tests/browser/harness.html`, 'exp');
  await page.waitForFunction(() => window.harness !== undefined, null, { timeout: 60000 });
  await page.evaluate(() => window.harness.ready);
  const out = await page.evaluate(async () => {
    const root = await navigator.storage.getDirectory();
    const count = 16, tensorBytes = 64 << 20;
    const header = {};
    for (let i = 0; i < count; i++) header[`t${i}`] = { dtype: 'F32', shape: [tensorBytes / 4], data_offsets: [i * tensorBytes, (i + 1) * tensorBytes] };
    let json = JSON.stringify(header); json += ' '.repeat((8 - ((8 + json.length) % 8)) % 8);
    const prefix = new Uint8Array(8 + json.length);
    new DataView(prefix.buffer).setBigUint64(0, BigInt(json.length), true);
    prefix.set(new TextEncoder().encode(json), 8);
    const handle = await root.getFileHandle('e2.safetensors', { create: true });
    const w = await handle.createWritable(); await w.write(prefix);
    const chunk = new Float32Array(tensorBytes / 4).map((_, i) => i);
    for (let i = 0; i < count; i++) await w.write(chunk);
    await w.close();
    const context = await navigator.ml.createContext();
    const lines = [];
    const adapter = await navigator.gpu.requestAdapter();
    const { maxBufferSize, maxStorageBufferBindingSize } = adapter.limits;
    const d = await adapter.requestDevice({ requiredLimits: { maxBufferSize, maxStorageBufferBindingSize } });
    const byob = async (tag, copySrc, fence) => {
      const blob = await handle.getFile();
      const t0 = performance.now();
      const buffers = Array.from({ length: count }, () => d.createBuffer({ size: tensorBytes, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | (copySrc ? GPUBufferUsage.COPY_SRC : 0) }));
      const reader = blob.slice(prefix.length).stream().getReader({ mode: 'byob' });
      let staging = new ArrayBuffer(8 << 20); let at = 0; const ts = []; let prev = null;
      for (;;) {
        let filled = 0;
        while (filled < staging.byteLength) {
          const { value, done } = await reader.read(new Uint8Array(staging, filled, staging.byteLength - filled));
          if (value) staging = value.buffer;
          if (done) break;
          filled += value.byteLength;
        }
        if (!filled) break;
        const t = Math.floor(at / tensorBytes);
        d.queue.writeBuffer(buffers[t], at - t * tensorBytes, staging, 0, filled);
        at += filled;
        if (fence && (at / (8 << 20)) % 4 === 0) { const m = d.queue.onSubmittedWorkDone(); if (prev) await prev; prev = m; }
        if (at % tensorBytes === 0) ts.push(performance.now());
      }
      await d.queue.onSubmittedWorkDone();
      const t1 = performance.now();
      buffers.forEach((b) => b.destroy());
      lines.push(tag + ' ' + ts.map((v, i) => (v - (i ? ts[i - 1] : t0)).toFixed(0)).join(' ') + ' end ' + (t1 - ts.at(-1)).toFixed(0) + ' total ' + (t1 - t0).toFixed(0));
    };
    for (let r = 0; r < 3; r++) {
      gc();
      await byob('byob', false, false);
      gc();
      await byob('byob+copysrc', true, false);
      gc();
      await byob('byob+fence', false, true);
      gc();
      const t = [performance.now()];
      const weights = await context.openWeights(handle);
      t.push(performance.now());
      const tensors = [];
      for (const x of weights.tensors) { tensors.push(await weights.constantTensor(x.name)); t.push(performance.now()); }
      const probe = await context.createTensor({ dataType: 'float32', shape: [1], readable: true });
      await context.readTensor(probe);
      t.push(performance.now());
      tensors.forEach((x) => x.destroy()); probe.destroy(); 
      lines.push('ours ' + t.slice(1).map((v, i) => (v - t[i]).toFixed(0)).join(' ') + ' total ' + (t.at(-1) - t[0]).toFixed(0));
    }
    return lines;
  });
  console.log(out.join('\n'));
} finally { await close(); }
