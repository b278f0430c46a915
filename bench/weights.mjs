// Weight streaming benchmark in headless Chromium (WebGPU on SwiftShader). Writes safetensors
// files (SIZES_MIB="256 1024", tensors of 64 MiB) to OPFS, then moves every tensor of the file
// to GPU buffers along each path below, REPEATS times interleaved (path after path, then again in reverse order;
// the median time counts, the machine being shared and noisy; so does the median over
// repetitions of each repetition's ratio, which compares runs made under the same load):
//   ours      openWeights(handle) + constantTensor() per tensor, each awaited (the extension)
//   ours-all  the same, every constantTensor() call made at once and awaited with Promise.all:
//             the loader streams two tensors at a time (see src/backend/webgpu/lanes.rs)
//   slices    plain JS: blob.slice() of 8 MiB chunks, .arrayBuffer(), GPUQueue.writeBuffer
//   stream    plain JS: blob.stream() chunks coalesced into one reused 8 MiB buffer, writeBuffer
//   byob      plain JS: blob.stream() with a BYOB reader filling one reused 8 MiB buffer
//   byob2     plain JS: `byob` twice at once, over the first and the second half of the tensors
//   bounded   `byob` with its queued writes bounded as the loader bounds its own: after every
//             4 chunks an onSubmittedWorkDone() mark, waiting for the mark 3 before (128 MiB);
//             each buffer created at its tensor's first write (created all at once, they made
//             the first wait as long as the GPU process took to allocate them, 0.3-0.4 s);
//             `byob` bounds nothing and queues what the GPU process has not copied yet in the
//             renderer and the GPU process (see their RSS columns)
//   standard  standard WebNN only: blob.arrayBuffer() of the whole file, builder.constant(desc,
//             view) per tensor, build() of a graph reducing each constant
//   ours-worker  `ours` in a dedicated Worker (tensors read through sync access handles)
//   sync-worker  plain JS in a dedicated Worker: createSyncAccessHandle(), read(view, {at}) of
//             8 MiB into one reused buffer, writeBuffer, a wait every 4 chunks (see
//             weights_worker.js)
// The download paths read the same file from the test server (Node writes it to out/, the
// server serves it from there over loopback):
//   net       plain JS: fetch() and read the whole body, nothing else
//   writes    plain JS: the file's tensor bytes written with writeBuffer from one reused 8 MiB
//             buffer already in memory (the upload alone), each buffer created at its first write
//   net-opfs  plain JS: fetch() piped into an OPFS file (createWritable, closed): the download
//             into OPFS alone, which the one-pass path must also do
//   ours-fetch  openWeights(await fetch(url)) + constantTensor() per tensor, each awaited, and a
//             GPU round trip: the download read once, into the GPU and (on its way) into OPFS
//   ours-cached  `ours-fetch` with the clock stopped at `cached` instead: the OPFS file committed,
//             hashed (SHA-256 in a Worker, after the commit) and its record written
// The target: ours-fetch at least 0.9x the slower of net and writes.
// Every path creates its GPU buffers (or constants) and ends with a GPU round trip inside the
// timed span, so the time covers allocation and the bytes reaching the GPU; `ours` keeps one
// MLContext across runs as the plain paths keep one GPUDevice. Memory (Window paths only):
// the peak growth over a garbage-collected start of performance.memory.usedJSHeapSize (exact
// under --enable-precise-memory-info), of the wasm memory, and of CDP Runtime.getHeapUsage's
// usedSize + backingStorageSize (ArrayBuffer backing stores), sampled from Node every few ms.
// The peak growth of the resident memory (VmRSS) of the renderer processes and of the GPU
// process is sampled from /proc as well: a path that writes faster than the GPU process copies
// queues the difference there, which no JS counter sees.
// Before each run a child process touches WARM_GIB (default 2; 0 turns it off) GiB and exits.
// This VM's balloon reports freed memory to the host (virtio-balloon free page reporting), and
// the first touch of a reported page costs a slow fault: a run that allocated its 1 GiB of GPU
// buffers from reported pages took 2.4-3.5 s against 1.0-1.6 s otherwise, whatever the path.
// Memory just touched and freed is not reported yet, as on a machine without a balloon.
// PATHS="byob ours" runs a subset. Prints a markdown table; exits non-zero when a path failed.
import { execSync } from 'node:child_process';
import fs from 'node:fs';
import { start, openHarness, withTimeout } from '../tests/browser/browser.mjs';

const sizes = (process.env.SIZES_MIB || '256 1024').split(/\s+/).filter(Boolean).map(Number);
const REPEATS = Number(process.env.REPEATS || 5);
const TENSOR_MIB = 64;
const WARM_GIB = Number(process.env.WARM_GIB ?? 2);
const PATHS = (process.env.PATHS || 'slices stream byob byob2 bounded ours ours-all sync-worker ours-worker standard net writes net-opfs ours-fetch ours-cached').split(' ');
const { browser, url, close } = await start(undefined, ['--enable-precise-memory-info', '--js-flags=--expose-gc']);
const results = [];
const ratios = {};
let failed = false;
// The plain Window paths, the best of which `ours` is held against.
const PLAIN = ['slices', 'stream', 'byob', 'byob2'];
const median = (sorted) => (sorted.length % 2 ? sorted[(sorted.length - 1) / 2]
  : (sorted[sorted.length / 2 - 1] + sorted[sorted.length / 2]) / 2);
// A run past this limit counts as failed and the page is replaced: when SwiftShader's GPU process
// dies mid-run, a pending onSubmittedWorkDone() sometimes never settles, or the page crashes.
const RUN_LIMIT_MS = 60000;
let page;
let cdp;
// One context for every page, so that the OPFS files outlive a replaced page.
const pages = await browser.newContext();
// Opens the harness page and installs window.bench; again after a hung or crashed run.
const openBench = async () => {
  await page?.close().catch(() => {});
  page = await openHarness(pages, url, 'bench');
  cdp = await page.context().newCDPSession(page);
  await page.evaluate(async () => {
    // The wasm module's memory export: the glue's init resolves to the instance's exports.
    const exports = await (await import('/pkg/webnn_wgpu.js')).default();
    const wasmBytes = () => exports.memory.buffer.byteLength;
    const heap = () => performance.memory.usedJSHeapSize;
    const meter = () => {
      const heap0 = heap();
      const wasm0 = wasmBytes();
      let peakHeap = heap0;
      let peakWasm = wasm0;
      const sample = () => {
        peakHeap = Math.max(peakHeap, heap());
        peakWasm = Math.max(peakWasm, wasmBytes());
      };
      const timer = setInterval(sample, 1);
      return {
        sample,
        done() {
          clearInterval(timer);
          sample();
          return { heapGrowth: peakHeap - heap0, wasmGrowth: peakWasm - wasm0 };
        },
      };
    };
    const CHUNK = 8 << 20;
    let device;
    let context;
    // The worker paths: a module Worker per run answering {path, file} with {ms} or {error},
    // terminated after it so that its GPU device goes with it (SwiftShader's GPU process
    // does not survive several devices holding 1 GiB each next to the standard path's 2 GiB).
    const inWorker = async (path, file) => {
      const worker = new Worker('/bench/weights_worker.js', { type: 'module' });
      const reply = await new Promise((resolve) => {
        worker.onmessage = (e) => resolve(e.data);
        worker.onerror = (e) => resolve({ error: e.message });
        worker.postMessage({ path, file });
      });
      worker.terminate();
      if (reply.error) throw new Error(reply.error);
      return { ms: reply.ms, heapGrowth: NaN, wasmGrowth: NaN };
    };
    const gpu = async () => {
      if (!device) {
        const adapter = await navigator.gpu.requestAdapter();
        const { maxBufferSize, maxStorageBufferBindingSize } = adapter.limits;
        device = await adapter.requestDevice({ requiredLimits: { maxBufferSize, maxStorageBufferBindingSize } });
      }
      return device;
    };
    const fileHandle = async (name) => (await navigator.storage.getDirectory()).getFileHandle(name);
    // The plain paths: `fill(blob, buffers, m)` writes the tensors into `buffers`.
    // `lazy`: each buffer is created when its tensor's first chunk is written (as the loader
    // does), not all before the first write.
    const plain = async (file, fill, lazy = false) => {
      const d = await gpu();
      const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST;
      const handle = await fileHandle(file.name);
      const m = meter();
      const t0 = performance.now();
      // As for `ours` (openWeights), the clock covers opening the file and reading its layout
      // from the safetensors header (8-byte length, JSON), which a page must do as well.
      const blob = await handle.getFile();
      const length = Number(new DataView(await blob.slice(0, 8).arrayBuffer()).getBigUint64(0, true));
      const header = JSON.parse(await blob.slice(8, 8 + length).text());
      const names = Object.keys(header).filter((k) => k !== '__metadata__');
      if (8 + length !== file.prefixBytes || names.length !== file.count) throw new Error('header does not match the file');
      const create = () => d.createBuffer({ size: file.tensorBytes, usage });
      const buffers = lazy ? [] : Array.from({ length: file.count }, create);
      buffers.of = (t) => (buffers[t] ??= create());
      await fill(d, blob, buffers, m);
      await d.queue.onSubmittedWorkDone();
      const ms = performance.now() - t0;
      buffers.forEach((b) => b.destroy());
      const mem = m.done();
      // Lets the device release the destroyed buffers' memory before the next path runs.
      await d.queue.onSubmittedWorkDone();
      return { ms, ...mem };
    };
    // Writes the stream of the data section to the tensors through one reused buffer.
    const fromStream = async (d, file, buffers, staging, next) => {
      let at = 0;
      for (;;) {
        const filled = await next();
        if (filled === 0) break;
        const t = Math.floor(at / file.tensorBytes);
        d.queue.writeBuffer(buffers.of(t), at - t * file.tensorBytes, staging(), 0, filled);
        at += filled;
      }
      if (at !== file.count * file.tensorBytes) throw new Error(`streamed ${at} bytes`);
    };
    // A BYOB reader of the data section filling one reused buffer: `next()` reads the next chunk
    // into `staging()` and resolves to its length.
    const byobChunks = (blob, file, m) => {
      const reader = blob.slice(file.prefixBytes).stream().getReader({ mode: 'byob' });
      let staging = new ArrayBuffer(CHUNK);
      return {
        staging: () => staging,
        async next() {
          let filled = 0;
          while (filled < CHUNK) {
            const { value, done } = await reader.read(new Uint8Array(staging, filled, CHUNK - filled));
            if (value) staging = value.buffer;
            if (done) break;
            filled += value.byteLength;
          }
          m.sample();
          return filled;
        },
      };
    };
    window.bench = {
      // After a lost device (SwiftShader's GPU process sometimes dies after several GiB of
      // buffers come and go), the next run starts a new device and context.
      reset() {
        device = undefined;
        context = undefined;
      },
      async write(name, mib, tensorMib) {
        const count = mib / tensorMib;
        const tensorBytes = tensorMib << 20;
        const header = {};
        for (let i = 0; i < count; i++) {
          header[`t${i}`] = { dtype: 'F32', shape: [tensorBytes / 4], data_offsets: [i * tensorBytes, (i + 1) * tensorBytes] };
        }
        // Padded with spaces so the data starts 8-byte aligned, as safetensors writers do.
        let json = JSON.stringify(header);
        json += ' '.repeat((8 - ((8 + json.length) % 8)) % 8);
        const prefix = new Uint8Array(8 + json.length);
        new DataView(prefix.buffer).setBigUint64(0, BigInt(json.length), true);
        prefix.set(new TextEncoder().encode(json), 8);
        const root = await navigator.storage.getDirectory();
        const handle = await root.getFileHandle(name, { create: true });
        const writable = await handle.createWritable();
        await writable.write(prefix);
        const chunk = new Float32Array(tensorBytes / 4);
        for (let i = 0; i < chunk.length; i++) chunk[i] = i;
        for (let i = 0; i < count; i++) await writable.write(chunk);
        await writable.close();
        return { name, mib, count, tensorBytes, prefixBytes: prefix.length };
      },
      async remove(name) {
        await (await navigator.storage.getDirectory()).removeEntry(name);
      },
      'ours-all': (file) => window.bench.ours(file, true),
      async ours(file, together = false) {
        const handle = await fileHandle(file.name);
        context ??= await navigator.ml.createContext();
        const m = meter();
        const streamedBefore = context.memoryInfo().bytesStreamedFromDisk;
        // Created before the clock starts: reading it back is the one GPU round trip at the end,
        // as onSubmittedWorkDone() is for the plain paths.
        const probe = await context.createTensor({ dataType: 'float32', shape: [1], readable: true });
        const t0 = performance.now();
        const weights = await context.openWeights(handle, { onProgress: m.sample });
        const tensors = [];
        if (together) tensors.push(...await Promise.all(weights.tensors.map((t) => weights.constantTensor(t.name))));
        else for (const t of weights.tensors) tensors.push(await weights.constantTensor(t.name));
        await context.readTensor(probe);
        const ms = performance.now() - t0;
        const streamed = context.memoryInfo().bytesStreamedFromDisk;
        tensors.forEach((t) => t.destroy());
        const mem = m.done();
        // A GPU round trip lets the device release the destroyed buffers' memory.
        await context.readTensor(probe);
        probe.destroy();
        if (streamed - streamedBefore !== file.count * file.tensorBytes) throw new Error(`streamed ${streamed} bytes`);
        return { ms, ...mem };
      },
      slices: (file) => plain(file, async (d, blob, buffers, m) => {
        for (let t = 0; t < file.count; t++) {
          for (let o = 0; o < file.tensorBytes; o += CHUNK) {
            const start = file.prefixBytes + t * file.tensorBytes + o;
            d.queue.writeBuffer(buffers[t], o, await blob.slice(start, start + CHUNK).arrayBuffer());
            m.sample();
          }
        }
      }),
      stream: (file) => plain(file, async (d, blob, buffers, m) => {
        const reader = blob.slice(file.prefixBytes).stream().getReader();
        const staging = new Uint8Array(CHUNK);
        let pending = null;
        await fromStream(d, file, buffers, () => staging, async () => {
          let filled = 0;
          while (filled < CHUNK) {
            if (pending === null) {
              const { value, done } = await reader.read();
              if (done) break;
              pending = value;
            }
            const take = Math.min(pending.byteLength, CHUNK - filled);
            staging.set(pending.subarray(0, take), filled);
            filled += take;
            pending = take < pending.byteLength ? pending.subarray(take) : null;
          }
          m.sample();
          return filled;
        });
      }),
      byob: (file) => plain(file, async (d, blob, buffers, m) => {
        const chunks = byobChunks(blob, file, m);
        await fromStream(d, file, buffers, chunks.staging, chunks.next);
      }),
      bounded: (file) => plain(file, async (d, blob, buffers, m) => {
        const chunks = byobChunks(blob, file, m);
        const marks = [];
        let count = 0;
        await fromStream(d, file, buffers, chunks.staging, async () => {
          if (count > 0 && count % 4 === 0) {
            marks.push(d.queue.onSubmittedWorkDone());
            if (marks.length > 3) await marks.shift();
          }
          count++;
          return chunks.next();
        });
      }, true),
      byob2: (file) => plain(file, async (d, blob, buffers, m) => {
        const half = Math.ceil(file.count / 2) * file.tensorBytes;
        const total = file.count * file.tensorBytes;
        await Promise.all([[0, half], [half, total]].map(async ([from, to]) => {
          const chunks = byobChunks(blob.slice(0, file.prefixBytes + to), { prefixBytes: file.prefixBytes + from }, m);
          let at = from;
          for (let filled; (filled = await chunks.next()) > 0; at += filled) {
            const t = Math.floor(at / file.tensorBytes);
            d.queue.writeBuffer(buffers.of(t), at - t * file.tensorBytes, chunks.staging(), 0, filled);
          }
          if (at !== to) throw new Error(`streamed ${at - from} bytes of ${to - from}`);
        }));
      }, true),
      async net(file) {
        const m = meter();
        const t0 = performance.now();
        const reader = (await fetch(file.url, { cache: 'no-store' })).body.getReader();
        let received = 0;
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          received += value.byteLength;
          m.sample();
        }
        const ms = performance.now() - t0;
        if (received !== file.prefixBytes + file.count * file.tensorBytes) throw new Error(`received ${received} bytes`);
        return { ms, ...m.done() };
      },
      async 'net-opfs'(file) {
        const root = await navigator.storage.getDirectory();
        const m = meter();
        const t0 = performance.now();
        const writable = await (await root.getFileHandle('bench-net-opfs.bin', { create: true })).createWritable();
        const reader = (await fetch(file.url, { cache: 'no-store' })).body.getReader();
        let received = 0;
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          await writable.write(value);
          received += value.byteLength;
          m.sample();
        }
        await writable.close();
        const ms = performance.now() - t0;
        const written = (await (await root.getFileHandle('bench-net-opfs.bin')).getFile()).size;
        await root.removeEntry('bench-net-opfs.bin');
        if (received !== file.prefixBytes + file.count * file.tensorBytes || written !== received) throw new Error(`received ${received}, wrote ${written} bytes`);
        return { ms, ...m.done() };
      },
      async writes(file) {
        const d = await gpu();
        const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST;
        const staging = new Float32Array(CHUNK / 4).map((_, i) => i);
        const m = meter();
        const t0 = performance.now();
        const buffers = [];
        for (let t = 0; t < file.count; t++) {
          buffers.push(d.createBuffer({ size: file.tensorBytes, usage }));
          for (let o = 0; o < file.tensorBytes; o += CHUNK) d.queue.writeBuffer(buffers[t], o, staging, 0, Math.min(CHUNK, file.tensorBytes - o) / 4);
          m.sample();
        }
        await d.queue.onSubmittedWorkDone();
        const ms = performance.now() - t0;
        buffers.forEach((b) => b.destroy());
        const mem = m.done();
        await d.queue.onSubmittedWorkDone();
        return { ms, ...mem };
      },
      'ours-cached': (file) => window.bench['ours-fetch'](file, true),
      async 'ours-fetch'(file, untilCached = false) {
        context ??= await navigator.ml.createContext();
        const m = meter();
        const probe = await context.createTensor({ dataType: 'float32', shape: [1], readable: true });
        const t0 = performance.now();
        const weights = await context.openWeights(await fetch(file.url, { cache: 'no-store' }),
          { cacheName: 'bench-download.safetensors', onProgress: m.sample });
        const tensors = [];
        for (const t of weights.tensors) tensors.push(await weights.constantTensor(t.name));
        await context.readTensor(probe);
        let ms = performance.now() - t0;
        const cached = await (await weights.cached).getFile();
        if (untilCached) ms = performance.now() - t0;
        tensors.forEach((t) => t.destroy());
        const mem = m.done();
        await context.readTensor(probe);
        probe.destroy();
        await (await navigator.storage.getDirectory()).removeEntry('webnn-wgpu-weights', { recursive: true });
        if (cached.size !== file.prefixBytes + file.count * file.tensorBytes) throw new Error(`cached ${cached.size} bytes`);
        return { ms, ...mem };
      },
      'ours-worker': (file) => inWorker('ours', file),
      'sync-worker': (file) => inWorker('sync', file),
      async standard(file) {
        const handle = await fileHandle(file.name);
        const context = await navigator.ml.createContext();
        const m = meter();
        const t0 = performance.now();
        const all = await (await handle.getFile()).arrayBuffer();
        m.sample();
        const builder = new MLGraphBuilder(context);
        const outputs = {};
        for (let i = 0; i < file.count; i++) {
          const view = new Float32Array(all, file.prefixBytes + i * file.tensorBytes, file.tensorBytes / 4);
          outputs[`y${i}`] = builder.reduceSum(builder.constant({ dataType: 'float32', shape: [view.length] }, view));
          m.sample();
        }
        const graph = await builder.build(outputs);
        const probe = await context.createTensor({ dataType: 'float32', shape: [1], readable: true });
        await context.readTensor(probe);
        const ms = performance.now() - t0;
        const mem = m.done();
        graph.destroy();
        context.destroy();
        return { ms, ...mem };
      },
    };
  });
};
try {
  await openBench();
  const heapUsage = async () => {
    const u = await cdp.send('Runtime.getHeapUsage');
    return u.usedSize + (u.backingStorageSize ?? 0);
  };

  // The summed VmRSS of the processes whose command line has `type` (looked up per run: the GPU
  // process comes back after a crash).
  const rss = (type) => {
    const pids = execSync(`pgrep -f -- '[-]-type=${type}' || true`).toString().split(/\s+/).filter(Boolean);
    return () => pids.reduce((sum, pid) => {
      try {
        return sum + Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) * 1024;
      } catch {
        return sum; // gone
      }
    }, 0);
  };
  // Runs one path with the CDP heap and the processes' RSS sampled from Node meanwhile.
  const measure = async (path, file) => {
    await page.evaluate(() => { gc(); gc(); });
    if (WARM_GIB > 0) execSync(`node -e "Buffer.alloc(${WARM_GIB} * 2 ** 30, 1)"`);
    const before = await heapUsage();
    let peak = before;
    const processes = { rendererGrowth: rss('renderer'), gpuGrowth: rss('gpu-process') };
    const base = Object.fromEntries(Object.entries(processes).map(([k, f]) => [k, f()]));
    const peaks = { ...base };
    const rssTimer = setInterval(() => {
      for (const [k, f] of Object.entries(processes)) peaks[k] = Math.max(peaks[k], f());
    }, 3);
    let running = true;
    const sampler = (async () => {
      while (running) {
        peak = Math.max(peak, await heapUsage().catch(() => peak));
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    try {
      const r = await withTimeout(page.evaluate(({ path, file }) => window.bench[path](file), { path, file }),
        RUN_LIMIT_MS, path);
      const growth = Object.fromEntries(Object.keys(processes).map((k) => [k, peaks[k] - base[k]]));
      return { ...r, cdpGrowth: path.endsWith('-worker') ? NaN : peak - before, ...growth };
    } finally {
      clearInterval(rssTimer);
      running = false;
      await sampler;
    }
  };

  for (const mib of sizes) {
    const file = await page.evaluate(({ mib, tensorMib }) => window.bench.write(`bench-${mib}.safetensors`, mib, tensorMib),
      { mib, tensorMib: TENSOR_MIB });
    // The same file for the download paths, served from out/.
    const served = await page.evaluate(async (name) => {
      const blob = await (await (await navigator.storage.getDirectory()).getFileHandle(name)).getFile();
      return Array.from(new Uint8Array(await blob.slice(0, 8 + Number(new DataView(await blob.slice(0, 8).arrayBuffer()).getBigUint64(0, true))).arrayBuffer()));
    }, file.name);
    const netName = `bench-net-${mib}.safetensors`;
    fs.mkdirSync('out', { recursive: true });
    const out = fs.openSync(`out/${netName}`, 'w');
    fs.writeSync(out, Uint8Array.from(served));
    const tensor = Buffer.from(Float32Array.from({ length: file.tensorBytes / 4 }, (_, i) => i).buffer);
    for (let t = 0; t < file.count; t++) fs.writeSync(out, tensor);
    fs.closeSync(out);
    file.url = `/out/${netName}`;
    const runs = Object.fromEntries(PATHS.map((p) => [p, []]));
    ratios[mib] = { plain: [], all: [], bounded: [], worker: [], download: [] };
    for (let r = 0; r < REPEATS; r++) {
      // The order alternates, so that no path always runs right after another's buffers were freed.
      for (const path of r % 2 ? [...PATHS].reverse() : PATHS) {
        const run = await measure(path, file).catch((e) => ({ error: e.message.split('\n')[0] }));
        if (run.error) {
          if (page.isClosed() || run.error.includes(': timed out after')) await openBench();
          else await page.evaluate(() => window.bench.reset());
        }
        console.error(JSON.stringify({ mib, path, ...run }));
        runs[path].push(run);
      }
      // This repetition's best plain Window path over ours, and sync-worker over ours-worker.
      const ms = (p) => (runs[p]?.[r] && !runs[p][r].error ? runs[p][r].ms : NaN);
      const measured = PLAIN.map(ms).filter((t) => !Number.isNaN(t));
      const plain = measured.length ? Math.min(...measured) : NaN;
      ratios[mib].plain.push(plain / ms('ours'));
      ratios[mib].all.push(plain / ms('ours-all'));
      ratios[mib].bounded.push(ms('bounded') / ms('ours'));
      ratios[mib].worker.push(ms('sync-worker') / ms('ours-worker'));
      ratios[mib].download.push(Math.max(ms('net'), ms('writes')) / ms('ours-fetch'));
    }
    await page.evaluate((name) => window.bench.remove(name), file.name);
    fs.rmSync(`out/${netName}`);
    for (const path of PATHS) {
      const ok = runs[path].filter((r) => !r.error);
      if (ok.length === 0) {
        failed = true;
        results.push({ mib, path, count: file.count, error: runs[path][0].error });
        continue;
      }
      const max = (k) => Math.max(...ok.map((r) => r[k]));
      const times = ok.map((r) => r.ms).sort((a, b) => a - b);
      results.push({
        mib, path, count: file.count, ms: median(times), times,
        heapGrowth: max('heapGrowth'), wasmGrowth: max('wasmGrowth'), cdpGrowth: max('cdpGrowth'),
        rendererGrowth: max('rendererGrowth'), gpuGrowth: max('gpuGrowth'),
      });
    }
  }
} finally {
  await close();
}
const mb = (b) => (Number.isNaN(b) ? 'n/a' : `${(b / 2 ** 20).toFixed(1)} MiB`);
const gbs = (r) => (r.mib * 2 ** 20 / 1e9 / (r.ms / 1000)).toFixed(2);
console.log(`| file | path | median of ${REPEATS} | GB/s | all runs (ms, sorted) | peak growth: JS heap (performance.memory) | wasm memory | JS heap + ArrayBuffers (CDP) | renderer RSS | GPU process RSS |`);
console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |');
for (const r of results) {
  const file = `${r.mib} MiB (${r.count} × ${TENSOR_MIB} MiB)`;
  if (r.error) {
    console.log(`| ${file} | ${r.path} | failed: ${r.error} | | | | | | | |`);
    continue;
  }
  const all = r.times.map((t) => t.toFixed(0)).join(' ');
  console.log(`| ${file} | ${r.path} | ${r.ms.toFixed(0)} ms | ${gbs(r)} | ${all} | ${mb(r.heapGrowth)} | ${mb(r.wasmGrowth)} | ${mb(r.cdpGrowth)} | ${mb(r.rendererGrowth)} | ${mb(r.gpuGrowth)} |`);
}
const medianOf = (values) => {
  const ok = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  return ok.length ? median(ok) : NaN;
};
for (const mib of sizes) {
  const of = (p) => results.find((r) => r.mib === mib && r.path === p && !r.error);
  const best = PLAIN.map(of).filter(Boolean).sort((a, b) => a.ms - b.ms)[0];
  const pair = (k) => ratios[mib][k].map((v) => v.toFixed(2)).join(' ');
  if (of('ours') && best) {
    console.log(`\n${mib} MiB: ours at ${(best.ms / of('ours').ms).toFixed(2)}× the best plain Window path (${best.path}), `
      + `medians; median of per-repetition ratios (best plain / ours) ${medianOf(ratios[mib].plain).toFixed(2)} (${pair('plain')}).`);
  }
  if (of('ours-all') && best) {
    console.log(`${mib} MiB: ours-all at ${(best.ms / of('ours-all').ms).toFixed(2)}× the best plain Window path (${best.path}), `
      + `medians; median of per-repetition ratios (best plain / ours-all) ${medianOf(ratios[mib].all).toFixed(2)} (${pair('all')}).`);
  }
  if (of('ours') && of('bounded')) {
    console.log(`${mib} MiB: ours at ${(of('bounded').ms / of('ours').ms).toFixed(2)}× bounded (the best plain path with the same bound on queued writes), medians; `
      + `median of per-repetition ratios ${medianOf(ratios[mib].bounded).toFixed(2)} (${pair('bounded')}).`);
  }
  if (of('ours-fetch') && of('net') && of('writes')) {
    const slower = of('net').ms > of('writes').ms ? of('net') : of('writes');
    console.log(`${mib} MiB: ours-fetch at ${(slower.ms / of('ours-fetch').ms).toFixed(2)}× the slower of net and writes (${slower.path}), `
      + `medians; median of per-repetition ratios ${medianOf(ratios[mib].download).toFixed(2)} (${pair('download')}).`);
    if (of('net-opfs')) {
      console.log(`${mib} MiB: ours-fetch at ${(of('net-opfs').ms / of('ours-fetch').ms).toFixed(2)}× net-opfs (the download into OPFS alone), medians.`);
    }
  }
  if (of('ours-worker') && of('sync-worker')) {
    console.log(`${mib} MiB: ours-worker at ${(of('sync-worker').ms / of('ours-worker').ms).toFixed(2)}× sync-worker, `
      + `medians; median of per-repetition ratios ${medianOf(ratios[mib].worker).toFixed(2)} (${pair('worker')}).`);
  }
}
process.exit(failed ? 1 : 0);
