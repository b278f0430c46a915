// Second visits: cold against warm page loads of the MoE demo and the pipeline page in headless
// Chromium, on the WebGPU backend (SwiftShader here) and the CPU backend. Cold is a first visit
// with an empty origin-private file system (the MoE page streams its model from the local server
// to the device and into OPFS in one pass, and every graph is built and saved to the graph cache);
// warm is a reload (every graph loaded from the cache). Printed beside them, measured in the same
// browser: the time to stream the MoE model's weights from its OPFS copy alone (openWeights and
// constantTensor of every tensor on a fresh context), the floor a warm load is compared with.
//   node bench/cache.mjs            (RUNS=3 warm reloads per row; the median is printed)
import { start, openPage } from '../tests/browser/browser.mjs';

const RUNS = Number(process.env.RUNS ?? 3);
const median = (v) => v.slice().sort((a, b) => a - b)[v.length >> 1];
const { browser, url, close } = await start();
const rows = [];
try {
  for (const backend of ['webgpu', 'cpu']) {
    const page = await openPage(browser, 'about:blank', `cache ${backend}`);
    for (const mode of ['resident', 'lru']) {
      const visit = async (fresh) => {
        await page.goto(`${url}/www/moe/index.html?mode=${mode}&budget=0.25&backend=${backend}${fresh ? '&fresh=1' : ''}`);
        await page.waitForFunction(() => ['ready', 'error'].includes(document.body.dataset.state), null, { timeout: 300000 });
        return page.evaluate(async () => {
          if (document.body.dataset.state !== 'ready') throw new Error(document.getElementById('status').textContent);
          const ready = window.moe.readySeconds();
          const r = await window.moe.generate('ROMEO:', 1);
          const stats = window.moe.stats();
          return { ready, firstToken: ready + r.prefillSeconds + r.decodeSeconds, loads: stats.cacheLoads, saves: stats.cacheSaves };
        });
      };
      const cold = await visit(true);
      const warm = [];
      for (let i = 0; i < RUNS; i++) warm.push(await visit(false));
      if (warm.some((w) => w.saves !== 0)) throw new Error(`${backend} ${mode}: a warm visit built graphs`);
      const stream = await page.evaluate(async () => {
        const root = await navigator.storage.getDirectory();
        const handle = await (await root.getDirectoryHandle('webnn-wgpu-weights')).getFileHandle('model.safetensors');
        const times = [];
        for (let i = 0; i < 3; i++) {
          const context = await navigator.ml.createContext();
          const t0 = performance.now();
          const file = await context.openWeights(handle);
          await Promise.all(file.tensors.map((t) => file.constantTensor(t.name)));
          times.push((performance.now() - t0) / 1000);
          context.destroy();
        }
        return times.sort((a, b) => a - b)[1];
      });
      rows.push({
        page: `MoE ${mode}`, backend, graphs: warm[0].loads,
        coldReady: cold.ready, coldFirst: cold.firstToken,
        warmReady: median(warm.map((w) => w.ready)), warmFirst: median(warm.map((w) => w.firstToken)), stream,
      });
    }
    await page.goto(`${url}/www/pipeline/?steps=1&backend=${backend}`);
    const pipeline = [];
    for (let i = 0; i <= RUNS; i++) {
      if (i > 0) await page.reload();
      await page.waitForFunction(() => ['done', 'error', 'mismatch'].includes(document.body.dataset.state), null, { timeout: 300000 });
      pipeline.push(await page.evaluate(() => JSON.parse(document.body.dataset.summary)));
    }
    rows.push({
      page: 'pipeline', backend, graphs: 3,
      coldReady: pipeline[0].resident.readyMs / 1000, warmReady: median(pipeline.slice(1).map((s) => s.resident.readyMs / 1000)),
    });
    await page.close();
  }
} finally {
  await close();
}
const s = (x) => (x === undefined ? '–' : `${x.toFixed(2)} s`);
console.log('| page | backend | graphs | cold: ready | cold: first token | warm: ready | warm: first token | cold / warm (ready) | weights from OPFS alone | warm / OPFS |');
console.log('|---|---|---|---|---|---|---|---|---|---|');
for (const r of rows) {
  console.log(`| ${r.page} | ${r.backend} | ${r.graphs} | ${s(r.coldReady)} | ${s(r.coldFirst)} | ${s(r.warmReady)} | ${s(r.warmFirst)} | ` +
    `${(r.coldReady / r.warmReady).toFixed(1)}x | ${s(r.stream)} | ${r.stream ? `${(r.warmReady / r.stream).toFixed(1)}x` : '–'} |`);
}
