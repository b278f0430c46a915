// Leaks in headless Chromium: 10,000 cycles of build -> createTensor -> write -> dispatch ->
// read -> destroy on one context, then cycles of whole contexts. The graph cycles run in groups
// of 1 to 8 at once (Promise.all; the GPU round trips of one cycle overlap those of the others,
// about 5x faster than one at a time on SwiftShader, and builds, dispatches and reads of
// different graphs interleave); after every group memoryInfo().deviceBytes must be back where it
// started. After a warm-up of 2,000 cycles and a garbage collection (the wasm-bindgen handles
// are freed by a FinalizationRegistry), the wasm memory may grow by at most one 64 KiB page
// over the remaining 8,000 cycles (a new high-water mark of cycles in flight at once; a leak of
// 17 bytes a cycle would take two) and the JS heap must stay within a bound.
// CYCLES (default 10000) sets the graph cycles, all of which must run within SECONDS (default
// 100); CONTEXT_CYCLES (default 30) sets the context cycles. WEBNN_BACKEND=cpu runs them on the
// CPU backend.
import { start, ROOT, openHarness, writeOut } from './browser.mjs';

const maxCycles = Number(process.env.CYCLES ?? 10000);
const seconds = Number(process.env.SECONDS ?? 100);
const contextCycles = Number(process.env.CONTEXT_CYCLES ?? 30);
// Cycles per page.evaluate, each followed by a memory sample; groups in a batch are of 1 to
// GROUP cycles at once.
const BATCH = 500;
const GROUP = 8;
// WARMUP_CYCLES (default 2000): the cycles before the baseline. On the CPU backend, whose
// buffers are in wasm memory, the allocator reaches its high-water mark later (one growth of two
// pages near cycle 4,000, then none over 36,000 more): its stage runs 20,000 after 10,000.
const WARMUP_BATCHES = Math.max(1, Math.round(Number(process.env.WARMUP_CYCLES ?? 2000) / BATCH));
const WASM_PAGE = 65536;
// The JS heap may move by this much between collections (V8's own bookkeeping, code caches).
const HEAP_SLACK = 4 << 20;

// Without this flag performance.memory is a cached, bucketed figure that a 4 MiB bound cannot see.
const { browser, url, close } = await start(ROOT, ['--enable-precise-memory-info']);
const failures = [];
const report = { graphCycles: 0, contextCycles: 0, samples: [] };
try {
  const page = await openHarness(browser, url, 'leaks');
  const cdp = await page.context().newCDPSession(page);
  // Collects garbage, lets the FinalizationRegistry callbacks run, and samples the memory.
  const sample = async () => {
    await cdp.send('HeapProfiler.collectGarbage');
    await page.evaluate(() => new Promise((r) => setTimeout(r, 50)));
    await cdp.send('HeapProfiler.collectGarbage');
    const s = await page.evaluate(() => ({
      wasm: window.leaks.testing.wasmMemoryBytes(window.leaks.ctx),
      heap: performance.memory?.usedJSHeapSize,
      device: window.leaks.ctx.memoryInfo().deviceBytes,
      host: window.leaks.ctx.memoryInfo().hostBytes,
    }));
    if (!Number.isFinite(s.heap)) throw new Error('performance.memory.usedJSHeapSize is missing');
    return s;
  };
  await page.evaluate(async () => {
    const { testing } = await import('/pkg/webnn.js');
    const ctx = await navigator.ml.createContext();
    const desc = { dataType: 'float32', shape: [4] };
    const xs = new Float32Array([0, 0.5, -0.5, 1]);
    // One cycle: y = exp(x + c) * c; returns an error message or ''.
    const cycle = async (context, i) => {
      const c = (i % 7) * 0.25;
      const b = new MLGraphBuilder(context);
      const k = b.constant(desc, new Float32Array(4).fill(c));
      const y = b.mul(b.exp(b.add(b.input('x', desc), k)), k);
      const graph = await b.build({ y });
      const x = await context.createTensor({ ...desc, writable: true });
      const out = await context.createTensor({ ...desc, readable: true });
      context.writeTensor(x, xs);
      context.dispatch(graph, { x }, { y: out });
      const got = new Float32Array(await context.readTensor(out));
      x.destroy();
      out.destroy();
      graph.destroy();
      for (let j = 0; j < 4; j++) {
        const want = Math.exp(Math.fround(xs[j] + c)) * c;
        if (Math.abs(got[j] - want) > 1e-5 * Math.max(1, Math.abs(want))) return `cycle ${i}: ${got[j]} vs ${want}`;
      }
      return '';
    };
    window.leaks = { testing, ctx, cycle, baseline: ctx.memoryInfo().deviceBytes };
  });

  const t0 = Date.now();
  let base = null;
  let done = 0;
  for (let batch = 0; done < maxCycles && (Date.now() - t0) / 1000 < seconds; batch++) {
    const n = Math.min(BATCH, maxCycles - done);
    const error = await page.evaluate(async ({ from, n, group }) => {
      const { ctx, cycle, baseline } = window.leaks;
      for (let i = from, g = 0; i < from + n; g++) {
        const k = Math.min(1 + (g % group), from + n - i);
        const errors = await Promise.all(Array.from({ length: k }, (_, j) => cycle(ctx, i + j)));
        const e = errors.find((m) => m);
        if (e) return e;
        i += k;
        const device = ctx.memoryInfo().deviceBytes;
        if (device !== baseline) return `deviceBytes ${device} after cycle ${i - 1}, baseline ${baseline}`;
      }
      return '';
    }, { from: done, n, group: GROUP });
    done += n;
    if (error) {
      failures.push(error);
      break;
    }
    const s = await sample();
    report.samples.push({ cycles: done, ...s });
    if (batch + 1 === WARMUP_BATCHES) base = s;
  }
  report.graphCycles = done;
  report.graphSeconds = (Date.now() - t0) / 1000;
  const last = report.samples.at(-1);
  if (done < maxCycles) failures.push(`only ${done} of ${maxCycles} graph cycles ran in ${seconds} s`);
  if (base && last) {
    if (last.wasm > base.wasm + WASM_PAGE) failures.push(`wasm memory grew from ${base.wasm} to ${last.wasm} bytes after the warm-up`);
    if (last.heap > base.heap + HEAP_SLACK) failures.push(`JS heap grew from ${base.heap} to ${last.heap} bytes after the warm-up`);
    if (last.host !== base.host) failures.push(`hostBytes ${last.host}, ${base.host} after the warm-up`);
  }

  // Context cycles: create, compute, destroy (every other context is only dropped).
  const t1 = Date.now();
  const beforeContexts = await sample();
  const contextError = await page.evaluate(async (n) => {
    for (let i = 0; i < n; i++) {
      const context = await navigator.ml.createContext();
      const e = await window.leaks.cycle(context, i);
      if (e) return `context ${i}: ${e}`;
      if (context.memoryInfo().deviceBytes !== 0) return `context ${i} holds ${context.memoryInfo().deviceBytes} device bytes`;
      if (i % 2 === 0) context.destroy();
    }
    return '';
  }, contextCycles);
  if (contextError) failures.push(contextError);
  const afterContexts = await sample();
  const moreContexts = await page.evaluate(async (n) => {
    for (let i = 0; i < n; i++) {
      const context = await navigator.ml.createContext();
      const e = await window.leaks.cycle(context, i);
      if (e) return e;
      if (i % 2 === 0) context.destroy();
    }
    return '';
  }, contextCycles);
  if (moreContexts) failures.push(moreContexts);
  const end = await sample();
  report.contextCycles = 2 * contextCycles;
  report.contextSeconds = (Date.now() - t1) / 1000;
  report.contexts = { before: beforeContexts, afterFirst: afterContexts, afterSecond: end };
  // The first round may grow the wasm heap to its working size; the second must reuse it.
  if (end.wasm > afterContexts.wasm) failures.push(`wasm memory grew from ${afterContexts.wasm} to ${end.wasm} bytes over the second ${contextCycles} contexts`);
  if (end.heap > afterContexts.heap + HEAP_SLACK) failures.push(`JS heap grew from ${afterContexts.heap} to ${end.heap} bytes over the second ${contextCycles} contexts`);
  const still = await page.evaluate(async () => (await window.leaks.cycle(window.leaks.ctx, 1)) || 'ok');
  if (still !== 'ok') failures.push(`the first context no longer computes: ${still}`);
} catch (e) {
  failures.push(`harness: ${e.message.split('\n')[0]}`);
} finally {
  await close();
}
const first = report.samples[WARMUP_BATCHES - 1];
const last = report.samples.at(-1);
console.log(`graph cycles: ${report.graphCycles} in ${report.graphSeconds} s; after warm-up (${first?.cycles} cycles) wasm ${first?.wasm} B, JS heap ${first?.heap} B; at the end wasm ${last?.wasm} B, JS heap ${last?.heap} B, deviceBytes ${last?.device}`);
console.log(`context cycles: ${report.contextCycles} in ${report.contextSeconds} s; wasm ${report.contexts?.before.wasm} -> ${report.contexts?.afterFirst.wasm} -> ${report.contexts?.afterSecond.wasm} B, JS heap ${report.contexts?.before.heap} -> ${report.contexts?.afterFirst.heap} -> ${report.contexts?.afterSecond.heap} B`);
for (const f of failures) console.log(`FAIL ${f}`);
writeOut('leaks.json', { ...report, failures });
console.log(`leaks: ${failures.length === 0 ? 'ok' : `${failures.length} failed`}`);
process.exit(failures.length === 0 ? 0 : 1);
