// The case-1 pipeline page (www/pipeline/): three graphs with the shapes of
// examples/pipeline/stages.rs, run all resident and under a memoryBudget holding one stage.
// Checks the peaks the page measured (with swapping below all-resident and within the budget,
// both equal to the byte counts the stage sizes predict), that swaps happened, that the decoded
// pixels are bit-identical, that the stages go through the graph cache (built and saved by the
// first run, loaded by the second and after a reload, same pixels), and saves a screenshot to
// out/pipeline.png.
import path from 'node:path';
import { start, openPage, writeOut, ROOT } from './browser.mjs';

const steps = Number(process.env.PIPELINE_STEPS ?? 4);
const { browser, url, close } = await start();
let failures = 0;
const check = (ok, what) => {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (!ok) failures++;
};
const mib = (b) => `${(b / (1 << 20)).toFixed(2)} MiB`;
try {
  const page = await openPage(browser, `${url}/www/pipeline/?steps=${steps}&backend=${process.env.WEBNN_BACKEND || 'webgpu'}`, 'pipeline');
  await page.waitForFunction(() => document.body.dataset.state !== 'running', null, { timeout: 240000 });
  const state = await page.evaluate(() => document.body.dataset.state);
  check(state === 'done', `page state "${state}": ${await page.textContent('#status')}`);
  const s = await page.evaluate(() => JSON.parse(document.body.dataset.summary ?? 'null'));
  if (s !== null) {
    const { encoder, denoiser, decoder } = s.sizes;
    console.log(`     stages: encoder ${mib(encoder)}, denoiser ${mib(denoiser)}, decoder ${mib(decoder)}; budget ${mib(s.budget)}`);
    check(s.swapped.peak < s.resident.peak, `peak with swapping ${mib(s.swapped.peak)} < all resident ${mib(s.resident.peak)}`);
    check(s.swapped.peak <= s.budget, `peak with swapping is within the budget ${mib(s.budget)}`);
    // All resident holds every stage's constants at once; the budget run holds at most one stage.
    check(s.resident.peak >= encoder + decoder + Math.max(denoiser, encoder, decoder) - 2 * (1 << 20),
      `all-resident peak ${mib(s.resident.peak)} holds all three stages`);
    check(s.swapped.info.swapOuts >= 2 && s.swapped.info.swapIns > s.resident.info.swapIns,
      `budget run swapped: ${s.swapped.info.swapOuts} swap-outs, ${s.swapped.info.swapIns} swap-ins (all resident: ${s.resident.info.swapOuts}, ${s.resident.info.swapIns})`);
    check(s.identical, 'decoded pixels bit-identical with and without swapping');
    check(await page.$$eval('#plot polyline', (p) => p.length) === 2, 'the plot has both runs');
    writeOut('pipeline.json', s);
    // The graph cache: the first run builds and saves the stages, the second loads them; so does
    // every run after a reload, with the same pixels.
    check(s.resident.how.built.length === 3 && s.swapped.how.loaded.length === 3,
      `first run built ${s.resident.how.built.length} stages in ${s.resident.readyMs.toFixed(0)} ms; ` +
      `the second loaded ${s.swapped.how.loaded.length} from the graph cache in ${s.swapped.readyMs.toFixed(0)} ms`);
    await page.reload();
    await page.waitForFunction(() => document.body.dataset.state !== 'running', null, { timeout: 240000 });
    const again = await page.evaluate(() => JSON.parse(document.body.dataset.summary ?? 'null'));
    check(again?.resident.how.loaded.length === 3 && again.swapped.how.loaded.length === 3 && again.pixelHash === s.pixelHash && again.identical,
      `after a reload every stage comes from the graph cache (${again?.resident.readyMs.toFixed(0)} ms), pixels bit-identical to the first visit's`);
  }
  const png = writeOut('pipeline.png', '');
  await page.screenshot({ path: png, fullPage: true });
  console.log(`screenshot: ${path.relative(ROOT, png)}`);
} catch (e) {
  check(false, `pipeline page: ${e.message.split('\n')[0]}`);
} finally {
  await close();
}
console.log(`pipeline: ${failures === 0 ? 'all checks passed' : `${failures} checks failed`}`);
process.exit(failures === 0 ? 0 : 1);
