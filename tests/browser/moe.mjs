// The MoE demo page in headless Chromium (WebGPU on SwiftShader): generates greedily from every
// reference prompt, prints the text, tokens/s and swap counts, checks the greedy tokens against
// www/models/moe/reference.json and prompt 0's per-step logits within its tolerance, and saves
// out/moe.png. The first load starts with an empty origin-private file system (?fresh=1): the
// page must fetch model.safetensors once, streamed to the GPU and into OPFS in one pass by
// context.openWeights(response), and save its graphs; after a reload it must load every graph
// from the graph cache and open the OPFS copy without fetching the
// file, and decode the same tokens. Then the file input of "Open a model…" gets an incompatible
// file (a clear error, the model kept) and the demo model with its config.json (loaded and
// decoding the reference tokens). In the lru-host mode (hostMemoryBudget) expert misses must come
// back from host copies: no bytes streamed from the file after loading.
//   node tests/browser/moe.mjs [--mode lru|lru-host|resident|fused|explicit|rebuild] [--budget 0.25] [--tokens 64] [--webnn cpu]
//   node tests/browser/moe.mjs --sweep [--tokens 16]   every mode at budgets 1, 0.5, 0.25, 0.125
// --webnn cpu runs the page on the CPU stand-in (www/moe/cpu_standin.mjs) instead of the
// wasm package. Exit status 0 when every check passes.
import path from "node:path";
import fs from "node:fs";
import { parseArgs } from "node:util";
import { start, openPage, writeOut, ROOT } from "./browser.mjs";
import { relativeError } from "../../www/moe/model.js";

const { values: args } = parseArgs({
  options: {
    mode: { type: "string", default: "lru" },
    budget: { type: "string", default: "0.25" },
    tokens: { type: "string", default: "64" },
    webnn: { type: "string", default: "wasm" },
    sweep: { type: "boolean", default: false },
  },
});
const tokens = Number(args.tokens);
const reference = JSON.parse(fs.readFileSync(path.join(ROOT, "www/models/moe/reference.json"), "utf8"));
const tolerance = 1e-3;
if (args.webnn === "wasm" && !fs.existsSync(path.join(ROOT, "pkg/index.js"))) {
  console.error("pkg/index.js is missing: run scripts/build-wasm.sh first");
  process.exit(1);
}

let failures = 0;
let passes = 0;
const check = (ok, what) => {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}`);
  if (ok) passes++;
  else failures++;
};

// Requests of model.safetensors, counted per page.
const modelFetches = new WeakMap();

async function waitReady(page, what) {
  await page.waitForFunction(() => document.body.dataset.state, null, { timeout: 600000 });
  const state = await page.evaluate(() => document.body.dataset.state);
  check(state === "ready", `${what}: page ${state}: ${await page.textContent("#status")}`);
  return state === "ready";
}

/** Greedy tokens of reference prompt `pi` (first `n`) compared with the reference. */
async function checkPrompt(page, pi, n, what) {
  const prompt = reference.prompts[pi];
  const r = await page.evaluate(([text, count]) => window.moe.generate(text, count), [prompt.text, n]);
  const want = prompt.greedy_tokens.slice(0, n);
  const first = r.ids.findIndex((t, i) => t !== want[i]);
  check(first < 0 && r.ids.length === want.length, `${what}: ${JSON.stringify(prompt.text)} -> ${JSON.stringify(r.text)}` +
    (first < 0 ? "" : ` (first difference at step ${first})`));
  return r;
}

/**
 * The weights must come through the loader (the first visit) or the graph cache (a reload: every
 * graph loaded, none built), except in the standard-API baseline and on the CPU stand-in.
 */
function checkWeightPath(stats, mode, what, { reload = false } = {}) {
  const loader = mode !== "rebuild" && args.webnn === "wasm";
  const want = !loader ? "JS arrays" : reload ? "graph cache" : "weight loader";
  check(stats.weights.startsWith(want), `${what}: weights through ${stats.weights} ` +
    `(${stats.cacheLoads} graphs loaded from the graph cache, ${stats.cacheSaves} saved)`);
}

async function runConfiguration(browser, url, mode, budget, screenshot) {
  const query = new URLSearchParams({ mode, budget: String(budget), fresh: "1" });
  if (args.webnn === "cpu") query.set("webnn", "cpu");
  query.set("backend", process.env.WEBNN_BACKEND || "webgpu");
  const page = await openPage(browser, "about:blank", `moe ${mode} ${budget}`);
  modelFetches.set(page, 0);
  page.on("request", (r) => { if (r.url().endsWith("/model.safetensors")) modelFetches.set(page, modelFetches.get(page) + 1); });
  page.on("console", (m) => { if (m.type() === "error") console.error(`[console] ${m.text()}`); });
  await page.goto(`${url}/www/moe/index.html?${query}`);
  const row = { mode, budget, tokensPerSecond: [], swapIns: 0, swapOuts: 0, builds: 0 };
  if (!await waitReady(page, `${mode} ${budget}`)) return row;
  const source = await page.evaluate(() => window.moe.source());
  check(source.origin === "fetched" && source.kind === "FileSystemFileHandle" && modelFetches.get(page) === 1,
    `${mode} ${budget}: first load fetched model.safetensors once into OPFS (${source.origin}, ${source.kind}, ` +
    `${modelFetches.get(page)} fetch)`);
  checkWeightPath(await page.evaluate(() => window.moe.stats()), mode, `${mode} ${budget}`);
  const sl = reference.step_logits;
  for (const [pi, prompt] of reference.prompts.entries()) {
    const r = await page.evaluate(([text, n, collect]) => window.moe.generate(text, n, { collectLogits: collect }),
      [prompt.text, tokens, pi === sl.prompt_index]);
    const want = prompt.greedy_tokens.slice(0, tokens);
    const first = r.ids.findIndex((t, i) => t !== want[i]);
    check(first < 0 && r.ids.length === want.length,
      `${mode} ${budget}: ${JSON.stringify(prompt.text)} -> ${JSON.stringify(r.text)} ` +
      `(${r.tokensPerSecond.toFixed(2)} tokens/s` + (first < 0 ? ")" : `; first difference at step ${first})`));
    row.tokensPerSecond.push(r.tokensPerSecond);
    if (pi === sl.prompt_index) {
      const worst = r.logits.reduce((m, l, i) => Math.max(m, relativeError(l, sl.logits[i])), 0);
      check(r.logits.length === Math.min(tokens, sl.logits.length) && worst <= tolerance,
        `${mode} ${budget}: ${JSON.stringify(prompt.text)} logits at ${r.logits.length} steps, worst rel err ${worst.toExponential(2)}`);
    }
    Object.assign(row, { swapIns: r.stats.swapIns, swapOuts: r.stats.swapOuts, builds: r.stats.builds,
      expertUses: r.stats.expertUses, expertMisses: r.stats.expertMisses, sharedMisses: r.stats.sharedMisses,
      deviceBytes: r.stats.deviceBytes, budgetBytes: r.stats.budgetBytes, hostBytes: r.stats.hostBytes,
      streamedAfterLoad: r.stats.bytesStreamedAfterLoad });
  }
  console.log(`     ${mode} ${budget}: swap-ins ${row.swapIns}, swap-outs ${row.swapOuts}, builds ${row.builds}, ` +
    `expert misses ${row.expertMisses} of ${row.expertUses} uses, non-expert graph misses ${row.sharedMisses}, ` +
    `device ${(row.deviceBytes / 1e6).toFixed(1)} MB of budget ${(row.budgetBytes / 1e6).toFixed(1)} MB, ` +
    `host copies ${(row.hostBytes / 1e6).toFixed(1)} MB, streamed from the file after loading ${row.streamedAfterLoad} bytes`);
  // lru-host: the misses come back from host copies, so the file is not read again (where the
  // weights come through the loader: not on the CPU stand-in); under 100% experts must miss.
  if (mode === "lru-host" && args.webnn === "wasm" && row.deviceBytes !== null) {
    check(row.streamedAfterLoad === 0 && (budget >= 1 || row.expertMisses > 0), `${mode} ${budget}: ${row.expertMisses} expert misses, ` +
      `${row.streamedAfterLoad} bytes streamed from the file after loading (host copies ${(row.hostBytes / 1e6).toFixed(1)} MB)`);
  }
  // lru: the disk tier, so an expert that missed was read from the file again, and no host
  // copy was kept.
  if (mode === "lru" && args.webnn === "wasm" && row.deviceBytes !== null && row.expertMisses > 0) {
    check(row.streamedAfterLoad > 0 && row.hostBytes === 0, `${mode} ${budget}: ${row.expertMisses} expert misses, ` +
      `${row.streamedAfterLoad} bytes read from the file after loading, host copies ${row.hostBytes} bytes`);
  }
  if (screenshot) {
    const png = writeOut("moe.png", "");
    await page.screenshot({ path: png, fullPage: true });
    console.log(`screenshot: ${path.relative(ROOT, png)}`);
    await reloadAndPick(page, url, query, mode, budget);
  }
  await page.close();
  return row;
}

/** A reload opens the OPFS copy (no fetch); then the picker's file input, bad file and good. */
async function reloadAndPick(page, url, query, mode, budget) {
  const what = `${mode} ${budget} reload`;
  const first = await page.evaluate(() => window.moe.readySeconds());
  query.delete("fresh");
  modelFetches.set(page, 0);
  await page.goto(`${url}/www/moe/index.html?${query}`);
  if (!await waitReady(page, what)) return;
  const source = await page.evaluate(() => window.moe.source());
  check(source.origin === "opfs" && source.kind === "FileSystemFileHandle" && modelFetches.get(page) === 0,
    `${what}: the OPFS copy, no download (${source.origin}, ${source.kind}, ${modelFetches.get(page)} fetches)`);
  checkWeightPath(await page.evaluate(() => window.moe.stats()), mode, what, { reload: true });
  console.log(`     ready in ${first.toFixed(2)} s on the first visit, ${(await page.evaluate(() => window.moe.readySeconds())).toFixed(2)} s after the reload`);
  await checkPrompt(page, 1, 16, what);

  // An incompatible file: a valid safetensors file holding another model's tensor.
  const header = Buffer.from(JSON.stringify({ "wte.weight": { dtype: "F32", shape: [2, 2], data_offsets: [0, 16] } }));
  const length = Buffer.alloc(8);
  length.writeBigUInt64LE(BigInt(header.length));
  const other = Buffer.concat([length, header, Buffer.alloc(16)]);
  await page.setInputFiles("#pickInput", [{ name: "other.safetensors", mimeType: "application/octet-stream", buffer: other }]);
  const bad = await page.evaluate(() => window.moe.picked);
  const status = await page.textContent("#status");
  check(!bad.ok && /other\.safetensors does not fit/.test(bad.error) && /embed\.weight is missing/.test(bad.error) &&
    status.includes("other.safetensors"), `picker: an incompatible file is refused with a clear error: ${status}`);

  // The demo model and its config.json, picked from disk (File objects: the <input> fallback).
  const dir = path.join(ROOT, "www/models/moe");
  await page.setInputFiles("#pickInput", [path.join(dir, "model.safetensors"), path.join(dir, "config.json")]);
  const good = await page.evaluate(() => window.moe.picked);
  check(good.ok, `picker: model.safetensors + config.json load${good.ok ? "" : `: ${good.error}`}`);
  if (!good.ok) return;
  const picked = await page.evaluate(() => window.moe.source());
  check(picked.origin === "picked" && picked.kind === "File", `picker: weights from the picked File (${picked.kind})`);
  await checkPrompt(page, 2, 8, "picked model");
}

const { browser, url, close } = await start(ROOT);
const rows = [];
try {
  if (args.sweep) {
    for (const mode of ["resident", "fused", "lru", "lru-host", "explicit", "rebuild"]) {
      for (const budget of ["resident", "fused", "rebuild"].includes(mode) ? [1] : [1, 0.5, 0.25, 0.125]) {
        rows.push(await runConfiguration(browser, url, mode, budget, false));
      }
    }
  } else {
    rows.push(await runConfiguration(browser, url, args.mode, Number(args.budget), true));
  }
} catch (e) {
  check(false, `moe page: ${e.message.split("\n")[0]}`);
} finally {
  await close();
}
const mean = (a) => a.reduce((s, x) => s + x, 0) / Math.max(1, a.length);
console.log("mode      budget  tokens/s  swap-ins  swap-outs  builds  expert misses / uses  non-expert misses  read after load");
for (const r of rows) {
  console.log(`${r.mode.padEnd(9)} ${String(r.budget * 100).padStart(5)}%  ${mean(r.tokensPerSecond).toFixed(2).padStart(8)}` +
    `  ${String(r.swapIns).padStart(8)}  ${String(r.swapOuts).padStart(9)}  ${String(r.builds).padStart(6)}` +
    `  ${`${r.expertMisses} / ${r.expertUses}`.padStart(20)}  ${String(r.sharedMisses).padStart(17)}` +
    `  ${`${((r.streamedAfterLoad ?? 0) / 1e6).toFixed(1)} MB`.padStart(15)}`);
}
writeOut("moe.json", rows);
console.log(`moe: ${passes} passed, ${failures} failed`);
process.exit(failures === 0 ? 0 : 1);
