// Loads the built demo page (www/ with www/dist from webpack), waits for it to finish, checks
// the probabilities it displays against the float64 reference of www/mlp.js computed here in
// Node, and saves a screenshot to out/demo.png.
import fs from 'node:fs';
import path from 'node:path';
import { start, openPage, writeOut, ROOT } from './browser.mjs';
import { reference } from '../../www/mlp.js';

if (!fs.existsSync(path.join(ROOT, 'www/dist/demo.js'))) {
  console.error('www/dist/demo.js is missing: run scripts/build-wasm.sh and npx webpack first');
  process.exit(1);
}
const { browser, url, close } = await start(path.join(ROOT, 'www'));
let failures = 0;
const check = (ok, what) => {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (!ok) failures++;
};
try {
  const page = await openPage(browser, `${url}/?backend=${process.env.WEBNN_BACKEND || 'webgpu'}`, 'demo');
  await page.waitForFunction(() => document.body.dataset.state !== 'running', null, { timeout: 120000 });
  const state = await page.evaluate(() => document.body.dataset.state);
  const status = await page.textContent('#status');
  check(state === 'done', `page state "${state}": ${status}`);
  const shown = await page.evaluate(() => JSON.parse(document.getElementById('result').dataset.values ?? '[]'));
  const want = reference();
  check(shown.length === want.length, `${shown.length} probabilities displayed (expected ${want.length})`);
  const maxError = want.reduce((m, v, i) => Math.max(m, Math.abs((shown[i] ?? NaN) - v)), 0);
  check(maxError < 1e-5, `largest difference from the float64 reference: ${maxError.toExponential(2)}`);
  // The table shows the same numbers as its data attribute, to 6 decimals.
  const cells = await page.$$eval('#result td', (tds) => tds.map((td) => Number(td.textContent)));
  check(cells.length === want.length && cells.every((c, i) => Math.abs(c - want[i]) < 2e-6), 'displayed table matches the reference');
  const timings = await page.$$eval('#timings tr', (rows) => rows.map((r) => [...r.cells].map((c) => c.textContent).join(': ')));
  check(timings.length >= 4, `${timings.length} timings shown`);
  for (const t of timings) console.log(`     ${t}`);
  const png = writeOut('demo.png', '');
  await page.screenshot({ path: png, fullPage: true });
  console.log(`screenshot: ${path.relative(ROOT, png)}`);
} catch (e) {
  check(false, `demo page: ${e.message.split('\n')[0]}`);
} finally {
  await close();
}
console.log(`demo: ${failures === 0 ? 1 : 0} passed, ${failures === 0 ? 0 : 1} failed`);
process.exit(failures === 0 ? 0 : 1);
