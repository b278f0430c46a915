// Invalid uses of the WebNN API in headless Chromium (the table is tests/browser/invalid_cases.js):
// each must fail with the spec's exact error type, thrown or rejected as the spec says, and the
// page must still compute a correct graph afterwards (no dead wasm module, no poisoned state).
// Then the audit of every MLGraphBuilder method with bad arguments (builder_audit.js) and the
// MLNumber casts of every data type (mlnumber_cases.js); no wasm trap, panic or uncaught error.
import { start, openHarness, writeOut } from './browser.mjs';

const { browser, url, close } = await start();
let page = null;
const results = [];
let failed = 0;
try {
  page = await openHarness(browser, url, 'invalid_use');
  const uncaught = [];
  page.on('pageerror', (e) => uncaught.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error' && /panicked|unreachable|RuntimeError/.test(m.text())) uncaught.push(`console: ${m.text().slice(0, 300)}`);
  });
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
  const audit = await page.evaluate(async () => (await import('/tests/browser/builder_audit.js')).run());
  const counts = Object.entries(audit.counts).map(([k, v]) => `${k} ${v}`).join(', ');
  const auditOk = audit.failures.length === 0 && audit.calls > 10000;
  results.push({ name: 'builder audit', ok: auditOk, message: `${audit.calls} calls: ${counts}`, failures: audit.failures });
  console.log(`${auditOk ? 'ok  ' : 'FAIL'} builder audit: ${audit.calls} calls of every MLGraphBuilder method: ${counts}`);
  for (const f of audit.failures) console.log(`FAIL   ${f}`);
  if (!auditOk) failed++;
  const numbers = await page.evaluate(async () => (await import('/tests/browser/mlnumber_cases.js')).run());
  for (const r of numbers) {
    if (!r.ok) failed++;
    results.push({ ...r, name: `MLNumber: ${r.name}` });
    if (!r.ok) console.log(`FAIL MLNumber ${r.name}: ${r.message}`);
  }
  console.log(`MLNumber casts: ${numbers.filter((r) => r.ok).length} of ${numbers.length} as the spec's cast steps give`);
  await page.evaluate(() => window.harness.invalid.alive()).catch((e) => {
    failed++;
    console.log(`FAIL after the audit the page no longer works: ${e.message.split('\n')[0]}`);
  });
  for (const u of uncaught) {
    failed++;
    console.log(`FAIL ${u}`);
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
