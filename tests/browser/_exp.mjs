import { start, openPage } from './browser.mjs';
const { browser, url, close } = await start(undefined, ['--js-flags=--expose-gc']);
const VARIANTS = JSON.parse(process.env.VARIANTS);
const REPEATS = Number(process.env.REPEATS || 5);
const sizes = (process.env.SIZES_MIB || '256 1024').split(' ').map(Number);
try {
  const page = await openPage(browser, `${url}/tests/browser/harness.html`, 'exp');
  await page.waitForFunction(() => window.harness !== undefined, null, { timeout: 60000 });
  await page.evaluate(() => window.harness.ready);
  await page.evaluate(async () => {
    const adapter = await navigator.gpu.requestAdapter();
    const { maxBufferSize, maxStorageBufferBindingSize } = adapter.limits;
    const d = await adapter.requestDevice({ requiredLimits: { maxBufferSize, maxStorageBufferBindingSize } });
    const fileHandle = async (name) => (await navigator.storage.getDirectory()).getFileHandle(name);
    window.exp = {
      async write(name, mib, tensorMib) {
        const count = mib / tensorMib; const tensorBytes = tensorMib << 20;
        const root = await navigator.storage.getDirectory();
        const handle = await root.getFileHandle(name, { create: true });
        const w = await handle.createWritable();
        const prefix = new Uint8Array(64); await w.write(prefix);
        const chunk = new Float32Array(tensorBytes / 4);
        for (let i = 0; i < chunk.length; i++) chunk[i] = i;
        for (let i = 0; i < count; i++) await w.write(chunk);
        await w.close();
        return { name, count, tensorBytes, prefixBytes: 64 };
      },
      async run(file, v) {
        gc();
        const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST;
        const buffers = Array.from({ length: file.count }, () => d.createBuffer({ size: file.tensorBytes, usage }));
        const blob = await (await fileHandle(file.name)).getFile();
        const CH = v.chunk << 20;
        let staging = new ArrayBuffer(CH);
        let prev = null; let n = 0;
        const t0 = performance.now();
        const fence = async () => {
          if (!v.fence) return;
          if (++n % v.fence) return;
          const next = d.queue.onSubmittedWorkDone();
          if (v.pipelined) { if (prev) await prev; prev = next; } else await next;
        };
        const readInto = async (reader, len) => {
          let filled = 0;
          while (filled < len) {
            const { value, done } = await reader.read(new Uint8Array(staging, filled, len - filled));
            if (value) staging = value.buffer;
            if (done) break;
            filled += value.byteLength;
          }
          return filled;
        };
        if (v.perTensor) {
          for (let t = 0; t < file.count; t++) {
            const s = file.prefixBytes + t * file.tensorBytes;
            const reader = blob.slice(s, s + file.tensorBytes).stream().getReader({ mode: 'byob' });
            for (let o = 0; o < file.tensorBytes; o += CH) {
              const len = Math.min(CH, file.tensorBytes - o);
              const f = await readInto(reader, len);
              if (f !== len) throw new Error('short');
              d.queue.writeBuffer(buffers[t], o, staging, 0, f);
              await fence();
            }
            reader.releaseLock();
          }
        } else {
          const reader = blob.slice(file.prefixBytes).stream().getReader({ mode: 'byob' });
          let at = 0;
          for (;;) {
            const f = await readInto(reader, CH);
            if (!f) break;
            const t = Math.floor(at / file.tensorBytes);
            d.queue.writeBuffer(buffers[t], at - t * file.tensorBytes, staging, 0, f);
            at += f;
            await fence();
          }
        }
        await d.queue.onSubmittedWorkDone();
        const ms = performance.now() - t0;
        buffers.forEach((b) => b.destroy());
        return ms;
      },
    };
  });
  for (const mib of sizes) {
    const file = await page.evaluate(({ mib }) => window.exp.write(`exp-${mib}.bin`, mib, 64), { mib });
    const times = VARIANTS.map(() => []);
    for (let r = 0; r < REPEATS; r++) {
      for (let i = 0; i < VARIANTS.length; i++) times[i].push(await page.evaluate(({ file, v }) => window.exp.run(file, v), { file, v: VARIANTS[i] }));
    }
    const med = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
    VARIANTS.forEach((v, i) => console.log(mib, JSON.stringify(v), 'median', med(times[i]).toFixed(0), 'all', times[i].map((x) => x.toFixed(0)).join(' ')));
  }
} finally { await close(); }
