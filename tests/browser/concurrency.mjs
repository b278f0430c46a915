// Many dispatches in flight in headless Chromium, in the page and in a dedicated module Worker
// (tests/browser/concurrency_cases.js): chained through tensors with no await in between, with
// interleaved writes and reads, on several contexts at once; every read must be exact.
// SEED=n picks the seed (printed); STEPS=n the operations per context.
import { start, openHarness, writeOut } from './browser.mjs';

const seed = Number(process.env.SEED ?? Math.floor(Math.random() * 1e6));
const steps = Number(process.env.STEPS ?? 300);
console.log(`concurrency: seed ${seed}, ${steps} steps per context`);
const { browser, url, close } = await start();
const results = [];
try {
  const page = await openHarness(browser, url, 'concurrency');
  const t0 = Date.now();
  const inPage = await page.evaluate(async (options) => {
    const { runMany } = await import('./concurrency_cases.js');
    return runMany(options);
  }, { seed, steps });
  results.push({ where: 'page', ...inPage, seconds: (Date.now() - t0) / 1000 });
  const t1 = Date.now();
  const inWorker = await page.evaluate((options) => new Promise((resolve) => {
    const worker = new Worker('./concurrency_worker.js', { type: 'module' });
    worker.onmessage = (e) => { resolve(e.data); worker.terminate(); };
    worker.onerror = (e) => resolve({ ok: false, message: `worker error: ${e.message}` });
    worker.postMessage(options);
  }), { seed: seed + 100, steps });
  results.push({ where: 'worker', ...inWorker, seconds: (Date.now() - t1) / 1000 });
} catch (e) {
  results.push({ where: 'harness', ok: false, message: e.message.split('\n')[0] });
} finally {
  await close();
}
for (const r of results) {
  console.log(`${r.ok ? 'ok  ' : 'FAIL'} ${r.where}: ${r.dispatches ?? 0} dispatches, ${r.reads ?? 0} reads checked in ${r.seconds ?? 0} s ${r.message ?? ''}`);
}
writeOut('concurrency.json', { seed, steps, results });
const failed = results.filter((r) => !r.ok).length;
console.log(`concurrency: ${results.length - failed} passed, ${failed} failed (seed ${seed})`);
process.exit(failed === 0 && results.length === 2 ? 0 : 1);
