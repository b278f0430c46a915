// Invalid uses of the WebNN API in headless Chromium (the table is tests/browser/invalid_cases.js):
// each must fail with the spec's exact error type, thrown or rejected as the spec says, and the
// page must still compute a correct graph afterwards (no dead wasm module, no poisoned state).
import { start, openHarness, writeOut } from './browser.mjs';

const { browser, url, close } = await start();
let page = null;
const results = [];
let failed = 0;
try {
  page = await openHarness(browser, url, 'invalid_use');
  const n = await page.evaluate(() => window.harness.invalid.count());
  for (let i = 0; i < n; i++) {
    const name = await page.evaluate((k) => window.harness.invalid.name(k), i);
    let r;
    try {
      r = await page.evaluate((k) => window.harness.invalid.run(k), i);
      await page.evaluate(() => window.harness.invalid.alive()).catch((e) => {
        r = { ok: false, message: `${r.message}; afterwards the page no longer works: ${e.message.split('\n')[0]}` };
      });
    } catch (e) {
      r = { ok: false, message: e.message.split('\n')[0] };
    }
    if (!r.ok) failed++;
    results.push({ name, ...r });
    console.log(`${r.ok ? 'ok  ' : 'FAIL'} ${name}: ${r.message}`);
  }
} catch (e) {
  failed++;
  console.log(`FAIL harness: ${e.message.split('\n')[0]}`);
} finally {
  await close();
}
writeOut('invalid_use.json', results);
const passed = results.filter((r) => r.ok).length;
console.log(`invalid_use: ${passed} passed, ${failed} failed`);
process.exit(failed === 0 && passed >= 40 ? 0 : 1);
