// The npm package as its users get it: `npm pack pkg/` makes out/webnn-wgpu-VERSION.tgz, which
// is installed into examples/webpack-app and examples/vite-app (their package.json depends on
// the tarball), type-checked (the Vite app is TypeScript, resolved through the package's
// "types"), built with webpack 5 and with Vite, served from dist/ and run in headless Chromium:
// each page must show relu(x · W) computed on WebGPU (the Vite app also in a bundled module
// Worker). Then examples/worker (the whole API in a
// dedicated module Worker, loading pkg/ without a bundler) is checked against a float64
// reference, before and after swapOut()/swapIn().
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { start, openPage, ROOT } from './browser.mjs';
import { serve } from '../../scripts/serve.mjs';

const bin = (name) => path.join(ROOT, 'node_modules/.bin', name);
let failures = 0;
const check = (ok, what) => {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (!ok) failures++;
  return ok;
};
function sh(cmd, args, cwd = ROOT) {
  const t0 = Date.now();
  const r = spawnSync(cmd, args, { cwd, encoding: 'utf8', env: { ...process.env, NODE_ENV: 'production' } });
  const ok = r.status === 0;
  check(ok, `${path.relative(ROOT, cwd) || '.'}: ${path.basename(cmd)} ${args.join(' ')} (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
  if (!ok) console.log(`${r.stdout}\n${r.stderr}`.trim().split('\n').slice(-30).join('\n'));
  return ok ? r.stdout : null;
}

if (!fs.existsSync(path.join(ROOT, 'pkg/package.json'))) {
  console.error('pkg/package.json is missing: run scripts/build-wasm.sh first');
  process.exit(1);
}
const { version } = JSON.parse(fs.readFileSync(path.join(ROOT, 'pkg/package.json'), 'utf8'));
const tarball = path.join(ROOT, `out/webnn-wgpu-${version}.tgz`);
fs.mkdirSync(path.join(ROOT, 'out'), { recursive: true });
fs.rmSync(tarball, { force: true });
const packed = sh('npm', ['pack', '--json', '--pack-destination', path.join(ROOT, 'out')], path.join(ROOT, 'pkg'));
if (packed !== null) {
  const files = JSON.parse(packed)[0].files.map((f) => f.path).sort();
  console.log(`     ${path.relative(ROOT, tarball)}: ${files.join(', ')}`);
  check(['index.js', 'index.d.ts', 'webnn_wgpu_bg.wasm', 'webnn_wgpu.js', 'package.json'].every((f) => files.includes(f)), 'the tarball holds the entry, the declarations, the glue and the .wasm');
}

const apps = [
  { name: 'webpack-app', build: [bin('webpack'), ['--mode', 'production', '--no-stats', '--config', 'webpack.config.js']], serve: '.' },
  { name: 'vite-app', typecheck: true, outputs: ['result', 'worker-result'], build: [bin('vite'), ['build', '--logLevel', 'warn']], serve: 'dist' },
];
const built = [];
for (const app of apps) {
  const dir = path.join(ROOT, 'examples', app.name);
  for (const d of ['node_modules', 'dist']) fs.rmSync(path.join(dir, d), { recursive: true, force: true });
  // The tarball is the only dependency; build tools come from the repository's node_modules.
  if (sh('npm', ['install', '--no-package-lock', '--no-audit', '--no-fund', '--prefer-offline'], dir) === null) continue;
  if (app.typecheck && sh(bin('tsc'), ['-p', '.'], dir) === null) continue;
  if (sh(...app.build, dir) === null) continue;
  built.push({ ...app, root: path.join(dir, app.serve) });
}

const want = [0, 0, 6.5, 9]; // relu([[1, -1], [0.5, 2]] · [[1, 2], [3, 4]])
const { browser, url, close } = await start(ROOT);
try {
  for (const app of built) {
    const server = await serve(app.root, 0);
    try {
      const page = await openPage(browser, `http://localhost:${server.address().port}/`, app.name);
      for (const id of app.outputs ?? ['result']) {
        const text = await page
          .waitForFunction((id) => { const t = document.getElementById(id).textContent; return t !== '…' && t; }, id, { timeout: 60000 })
          .then((h) => h.jsonValue())
          .catch((e) => `timeout: ${e.message.split('\n')[0]}`);
        const got = text.split(',').map(Number);
        check(got.length === 4 && got.every((v, i) => v === want[i]), `${app.name} #${id} in Chromium shows "${text}" (expected ${want.join(', ')})`);
      }
      await page.close();
    } finally {
      server.close();
    }
  }

  // The Worker example, served from the repository (it imports ../../pkg/index.js).
  const page = await openPage(browser, `${url}/examples/worker/`, 'worker');
  await page.waitForFunction(() => document.body.dataset.state !== 'running', null, { timeout: 60000 }).catch(() => {});
  const state = await page.evaluate(() => document.body.dataset.state);
  const steps = await page.$$eval('#log li', (li) => li.map((l) => l.textContent));
  for (const s of steps) console.log(`     worker: ${s}`);
  if (check(state === 'done', `worker page state "${state}"`)) {
    const r = await page.evaluate(() => JSON.parse(document.getElementById('result').dataset.result));
    const x = [0.5, -1, 2, 0, 1, -0.5, 0.25, 3];
    const w = Array.from({ length: 32 }, (_, i) => ((i * 7) % 11) / 10 - 0.5);
    const b = [0.1, -0.2, 0.3, 0];
    const logits = b.map((bj, j) => x.reduce((s, xi, i) => s + xi * w[i * 4 + j], bj));
    const e = logits.map((l) => Math.exp(l - Math.max(...logits)));
    const ref = e.map((v) => v / e.reduce((s, u) => s + u, 0));
    const err = Math.max(...ref.map((v, i) => Math.abs(v - r.first[i])));
    check(err < 1e-6, `worker softmax(x · W + b) within ${err.toExponential(2)} of the float64 reference`);
    check(r.swappedOut.residency === 'host' && r.swappedOut.deviceBytes === 0 && r.swappedOut.hostBytes > 0,
      `after swapOut() in the worker: residency ${r.swappedOut.residency}, ${r.swappedOut.deviceBytes} device bytes, ${r.swappedOut.hostBytes} host bytes`);
    check(r.residency === 'device' && r.again.every((v, i) => v === r.first[i]), 'after swapIn() the same dispatch gives bit-identical results');
    check(r.memoryInfo.swapOuts >= 1 && r.memoryInfo.swapIns >= 1 && r.memoryInfo.budgetBytes === 1 << 20,
      `memoryInfo() in the worker: ${JSON.stringify(r.memoryInfo)}`);
    check(r.supported >= 95, `opSupportLimits() lists ${r.supported} entries`);
  }
} finally {
  await close();
}
console.log(`consumers: ${failures === 0 ? 'all checks passed' : `${failures} checks failed`}`);
process.exit(failures === 0 ? 0 : 1);
