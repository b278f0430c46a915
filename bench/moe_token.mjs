// Where a MoE token's time goes in the page (headless Chromium): decodes N tokens of the demo
// (www/moe) in one memory mode and backend, with every MLContext call timed from the page and a
// CPU profile of the page's thread, and prints per token: the calls made, the time spent inside
// dispatch(), writeTensor() and readTensor() before they return, the wait for each read's promise,
// the page's own JavaScript (www/moe/*.js), and the time the page's thread was idle (waiting for
// the GPU process). Tokens must match the reference, as in tests/browser/moe.mjs.
//   node bench/moe_token.mjs [--mode resident|fused|lru|lru-host|explicit] [--backend webgpu|cpu] [--tokens 32] [--ahead N]
// (--ahead: the fused mode's steps in flight, the page's ?ahead=)
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { start, openPage, writeOut, ROOT } from '../tests/browser/browser.mjs';

const { values: args } = parseArgs({
  options: {
    mode: { type: 'string', default: 'resident' },
    backend: { type: 'string', default: 'webgpu' },
    tokens: { type: 'string', default: '32' },
    ahead: { type: 'string' },
  },
});
const tokens = Number(args.tokens);
const reference = JSON.parse(fs.readFileSync(path.join(ROOT, 'www/models/moe/reference.json'), 'utf8')).prompts[0];

const { browser, url, close } = await start();
try {
  const page = await openPage(browser, `${url}/www/moe/index.html?mode=${args.mode}&backend=${args.backend}&budget=0.25${args.ahead ? `&ahead=${args.ahead}` : ''}`, 'moe');
  await page.waitForFunction(() => document.body.dataset.state, null, { timeout: 600000 });
  const state = await page.evaluate(() => document.body.dataset.state);
  if (state !== 'ready') throw new Error(`the page is ${state}: ${await page.textContent('#status')}`);
  // Every MLContext method the token loop calls, timed (bench/call_timing.js).
  await page.evaluate(async () => {
    const { timeCalls } = await import('/bench/call_timing.js');
    const context = await navigator.ml.createContext();
    window.timing = timeCalls(Object.getPrototypeOf(context));
    context.destroy?.();
  });
  await page.evaluate((text) => window.moe.generate(text, 4), reference.text); // warm-up
  await page.evaluate(() => { for (const k in window.timing) window.timing[k] = [0, 0]; });
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Profiler.enable');
  await cdp.send('Profiler.setSamplingInterval', { interval: 100 });
  await cdp.send('Profiler.start');
  const result = await page.evaluate(([text, n]) => window.moe.generate(text, n), [reference.text, tokens]);
  const { profile } = await cdp.send('Profiler.stop');
  const timing = await page.evaluate(() => window.timing);
  const same = result.ids.every((t, i) => t === reference.greedy_tokens[i]);
  // Steps run: the prompt's, then one per generated token but the last.
  const steps = [...new TextEncoder().encode(reference.text)].length + result.ids.length - 1;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = { idle: 0, page: 0, total: 0 };
  profile.samples.forEach((id, i) => {
    const dt = profile.timeDeltas[i] ?? 0;
    const frame = byId.get(id).callFrame;
    self.total += dt;
    if (frame.functionName === '(idle)') self.idle += dt;
    else if (frame.url.includes('/www/moe/')) self.page += dt;
  });
  // Self time of the functions under MLContext.dispatch(), heaviest first: where a step's CPU
  // time inside the call goes (wasm functions by name, the WebGPU calls as the browser's natives).
  const parent = new Map();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const inDispatch = new Map();
  profile.samples.forEach((id, i) => {
    for (let a = id; a !== undefined; a = parent.get(a)) {
      const f = byId.get(a).callFrame;
      if (f.functionName === 'dispatch' && f.url.endsWith('webnn.js')) {
        const name = byId.get(id).callFrame.functionName || '(anonymous)';
        inDispatch.set(name, (inDispatch.get(name) ?? 0) + (profile.timeDeltas[i] ?? 0));
        break;
      }
    }
  });
  const perStep = (ms) => (ms / steps).toFixed(3);
  const ms = (us) => us / 1000;
  const rows = [
    ['steps (the prompt and the generated tokens)', String(steps)],
    ['tokens identical to the reference', same ? 'yes' : 'NO'],
    ['decode tokens/s', result.tokensPerSecond.toFixed(2)],
    ['wall time a step', perStep(ms(self.total))],
    ['dispatch() calls a step', (timing.dispatch[1] / steps).toFixed(1)],
    ['readTensor() calls a step', (timing.readTensor[1] / steps).toFixed(1)],
    ['writeTensor() calls a step', (timing.writeTensor[1] / steps).toFixed(1)],
    ['in dispatch() before it returns', perStep(timing.dispatch[0])],
    ['in writeTensor()', perStep(timing.writeTensor[0])],
    ['in readTensor() before it returns', perStep(timing.readTensor[0])],
    ['readTensor() until its promise resolves', perStep(timing.readWait[0])],
    ["the page's own JavaScript (www/moe)", perStep(ms(self.page))],
    ["the page's thread idle (waiting for the GPU process)", perStep(ms(self.idle))],
  ];
  console.log(`\n## One MoE step in the page: ${args.mode}, ${args.backend} (ms a step unless said)\n`);
  console.log('| measure | value |\n|---|---:|');
  for (const [k, v] of rows) console.log(`| ${k} | ${v} |`);
  console.log('\n| inside dispatch(): self time of | ms a step |\n|---|---:|');
  for (const [name, us] of [...inDispatch].sort((a, b) => b[1] - a[1]).slice(0, 15)) console.log(`| ${name} | ${perStep(ms(us))} |`);
  writeOut('moe_token.json', { date: new Date().toISOString(), mode: args.mode, backend: args.backend, tokens, rows });
  if (!same) process.exitCode = 1;
} finally {
  await close();
}
