// Runs every WPT-derived conformance case (tests/conformance/wpt/*.json) through the JavaScript
// API in headless Chromium (WebGPU on SwiftShader). One page per file, every case of the file
// in that page; a crashed page, a hung case or a dead wasm module reloads the page. Prints
// per-file counts and a total, writes out/conformance.json, and exits non-zero when a case
// fails or its operator is unsupported. WPT_FILES=add.json,relu.json runs a subset.
import fs from 'node:fs';
import path from 'node:path';
import { start, openHarness, withTimeout, writeOut, ROOT } from './browser.mjs';

const CASE_TIMEOUT_MS = Number(process.env.CASE_TIMEOUT_MS || 120000);
const dir = path.join(ROOT, 'tests/conformance/wpt');
let files = fs.readdirSync(dir).filter((f) => f.endsWith('.json')).sort();
// As tests/conformance_native.rs: a mistyped WPT_FILES name is an error, every listed file (and
// every file with cases) must run at least one case, and all files at least MIN_CASES_RUN.
const MIN_CASES_RUN = 1400;
const only = process.env.WPT_FILES ? process.env.WPT_FILES.split(',').map((f) => f.trim()).filter(Boolean) : null;
if (only) {
  const unknown = only.filter((f) => !files.includes(f));
  if (only.length === 0 || unknown.length > 0) {
    console.log(`WPT_FILES=${process.env.WPT_FILES}: no such files ${JSON.stringify(unknown)} in ${dir}`);
    process.exit(1);
  }
  files = files.filter((f) => only.includes(f));
}
const gateFailures = [];

const { browser, url, close } = await start();


const report = { files: {}, totals: { pass: 0, fail: 0, unsupported: 0, skip: 0 } };
const t0 = Date.now();
// A harness that cannot start fails every case at once instead of timing each one out.
let setupError = null;
try {
  const page = await openHarness(browser, url, 'setup');
  // The backend asked for is the one the cases run on: the CPU backend's contexts are not accelerated.
  const accelerated = await page.evaluate(async () => (await navigator.ml.createContext()).accelerated);
  const backend = process.env.WEBNN_BACKEND || 'webgpu';
  console.log(`backend ${backend}: MLContext.accelerated is ${accelerated}`);
  if (backend === 'cpu' && accelerated !== false) setupError = 'a CPU context reports accelerated: true';
  await page.close();
} catch (e) {
  setupError = e.message.split('\n')[0];
}
for (const file of files) {
  const cases = JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8')).tests;
  const counts = { pass: 0, fail: 0, unsupported: 0, skip: 0 };
  const results = [];
  const started = Date.now();
  let page = null;
  for (let i = 0; i < cases.length; i++) {
    let r;
    try {
      if (setupError) throw new Error(`harness: ${setupError}`);
      if (!page) page = await openHarness(browser, url, file);
      r = await withTimeout(page.evaluate(([f, k]) => window.harness.wpt.runCase(f, k), [file, i]), CASE_TIMEOUT_MS, cases[i].name);
    } catch (e) {
      r = { status: 'fail', message: e.message.split('\n')[0], fatal: true };
    }
    if (r.fatal && page) {
      await page.close().catch(() => {});
      page = null;
    }
    counts[r.status]++;
    results.push({ name: cases[i].name, status: r.status, ...(r.message ? { message: r.message } : {}) });
  }
  if (page) await page.close().catch(() => {});
  const ms = Date.now() - started;
  report.files[file] = { ...counts, ms, cases: results };
  if (counts.pass + counts.fail + counts.unsupported === 0 && (cases.length > 0 || only)) {
    gateFailures.push(`${file}: no case ran (${counts.skip} skipped)`);
  }
  for (const k of Object.keys(counts)) report.totals[k] += counts[k];
  console.log(`${file.padEnd(32)} pass ${String(counts.pass).padStart(4)}  fail ${String(counts.fail).padStart(4)}  unsupported ${String(counts.unsupported).padStart(4)}  skip ${String(counts.skip).padStart(4)}  ${(ms / 1000).toFixed(1)} s`);
  const notable = results.filter((r) => r.status === 'fail' || r.status === 'unsupported');
  const shown = new Set();
  for (const r of notable) {
    // Unsupported operators repeat one message per case: show each distinct message once.
    const key = r.status === 'unsupported' ? r.message : r.name;
    if (shown.has(key) || shown.size >= 3) continue;
    shown.add(key);
    console.log(`    ${r.status}: ${r.name}: ${r.message}`);
  }
}
await close();

const t = report.totals;
report.seconds = (Date.now() - t0) / 1000;
const file = writeOut('conformance.json', report);
console.log(`${t.pass + t.fail + t.unsupported + t.skip} cases in ${report.seconds.toFixed(0)} s; details in ${path.relative(ROOT, file)}`);
console.log(`unsupported (operator missing or NotSupportedError): ${t.unsupported}; skipped (data type or rank not in opSupportLimits()): ${t.skip}`);
console.log(`conformance: ${t.pass} passed, ${t.fail + t.unsupported} failed, ${t.skip} skipped`);
if (setupError) console.log(`harness error: ${setupError}`);
if (!only && t.pass + t.fail + t.unsupported < MIN_CASES_RUN) {
  gateFailures.push(`only ${t.pass + t.fail + t.unsupported} cases ran, fewer than ${MIN_CASES_RUN}`);
}
for (const f of gateFailures) console.log(`FAIL ${f}`);
process.exit(t.fail + t.unsupported > 0 || t.pass === 0 || gateFailures.length > 0 ? 1 : 0);
