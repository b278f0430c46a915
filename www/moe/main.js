// The MoE demo page: gets the model file, builds it on WebNN in the chosen memory mode, streams
// greedy text and shows each expert's residency, hits, the memory bar and the swap counters.
// The first visit streams model.safetensors from the server through the weight loader
// (context.openWeights(response)) to the GPU and, in the same pass, into the origin-private file
// system (OPFS), and saves every graph to the graph cache (context.saveGraph). Later visits load
// the graphs from the cache (context.loadGraph: no build, no download) and, for a graph the cache
// lacks, open the OPFS copy. "Open a model…" loads any compatible model from the user's disk (the
// .safetensors and its config.json). ?fresh=1 deletes the OPFS copy and the saved graphs first.
// window.moe is what tests/browser/moe.mjs drives.
import { argmax, decodeBytes, parseSafetensors, checkTensors } from "./model.js";
import { WebnnMoe } from "./moe_graphs.js";

const $ = (id) => document.getElementById(id);
const MB = (n) => `${(n / 1e6).toFixed(1)} MB`;
const modelUrl = (name) => new URL(`../models/moe/${name}`, import.meta.url);
const params = new URLSearchParams(location.search);

// navigator.ml from the wasm package; ?webnn=cpu takes the CPU stand-in the Node tests use.
async function loadWebnn() {
  if (params.get("webnn") === "cpu") {
    const m = await import(/* webpackIgnore: true */ new URL("./cpu_standin.mjs", import.meta.url).href);
    return { ml: m.ml, MLGraphBuilder: m.MLGraphBuilder, name: "CPU stand-in (www/moe/cpu_standin.mjs)" };
  }
  const { install, init } = await import("../../pkg/index.js");
  install({ force: true, backend: params.get("backend") ?? "auto", threads: params.has("threads") ? Number(params.get("threads")) : "auto" });
  await init(); // loads the wasm module now rather than at the first createContext()
  return { ml: navigator.ml, MLGraphBuilder: globalThis.MLGraphBuilder, name: "navigator.ml (webnn-wgpu)" };
}

const state = { model: null, running: false, stop: false, loading: null, source: null };
// The name openWeights(response) gives the download's OPFS copy: its URL's last segment.
const OPFS_NAME = "model.safetensors";
// Where openWeights(response) keeps a download (docs/EXTENSIONS.md, "Downloads").
const DOWNLOADS = "webnn-wgpu-weights";
// The demo's graphs in the graph cache: `${CACHE_KEY}/attention.0`, …
const CACHE_KEY = "moe-demo";

/** The model as a fetch() Response (the download the loader streams), counted for the status. */
async function download() {
  const response = await fetch(modelUrl("model.safetensors"));
  if (!response.ok) throw new Error(`model.safetensors: HTTP ${response.status}`);
  return response;
}

/**
 * The demo model: its OPFS copy from an earlier visit ({ source: handle, origin: "opfs" }), or
 * on the first visit a download ({ source: download, origin: "fetched" }) that the weight loader
 * streams to the GPU and into OPFS (as OPFS_NAME) in one pass.
 */
async function demoModel() {
  const root = await navigator.storage.getDirectory();
  if (params.get("fresh") === "1") {
    const dir = await root.getDirectoryHandle(DOWNLOADS, { create: true });
    await dir.removeEntry(OPFS_NAME).catch(() => {});
    const context = await state.webnn.ml.createContext();
    for (const key of await context.listGraphs?.() ?? []) if (key.startsWith(`${CACHE_KEY}/`)) context.deleteGraph(key);
    await context.listGraphs?.(); // waits for the deletions
    context.destroy?.();
  }
  try {
    const handle = await (await root.getDirectoryHandle(DOWNLOADS)).getFileHandle(OPFS_NAME);
    const file = await handle.getFile();
    if (file.size > 0) return { source: handle, origin: "opfs", bytes: file.size };
  } catch (e) {
    if (e.name !== "NotFoundError") throw e;
  }
  const source = () => download().then((response) => {
    const total = Number(response.headers.get("Content-Length"));
    state.source.bytes = total;
    return response;
  });
  return { source, origin: "fetched", bytes: undefined };
}

/** The config's dimensions must be positive integers that fit the graphs. */
function checkConfig(config, name) {
  const keys = ["vocab", "d_model", "n_layers", "n_heads", "n_kv_heads", "head_dim", "d_ff", "n_experts", "top_k", "max_seq"];
  for (const k of keys) {
    if (!Number.isInteger(config?.[k]) || config[k] <= 0) throw new TypeError(`${name}: "${k}" is missing or not a positive integer`);
  }
  if (typeof config.rope_theta !== "number" || typeof config.norm_eps !== "number") {
    throw new TypeError(`${name}: "rope_theta" and "norm_eps" must be numbers`);
  }
  if (config.n_heads % config.n_kv_heads || config.head_dim % 2 || config.top_k > config.n_experts) {
    throw new TypeError(`${name}: n_heads must be a multiple of n_kv_heads, head_dim even, top_k <= n_experts`);
  }
}

/**
 * Checks the tensors of `source` against `config`; throws a TypeError naming the file.
 * openWeights() reads only the header; a navigator.ml without it (the CPU stand-in) reads the file.
 */
async function checkModel(source, config, name) {
  const { ml } = state.webnn;
  const context = await ml.createContext();
  try {
    let tensors;
    if (typeof context.openWeights === "function") {
      const weights = await context.openWeights(source, { floatType: "float32" });
      tensors = new Map(weights.tensors.map((t) => [t.name, t]));
    } else {
      const blob = typeof source.getFile === "function" ? await source.getFile() : source;
      tensors = parseSafetensors(await blob.arrayBuffer(), name).tensors;
    }
    checkTensors({ tensors }, config);
  } catch (e) {
    throw new TypeError(`${name} does not fit ${config === state.demoConfig ? "the demo's config.json" : "its config.json"}: ${e.message}`);
  } finally {
    context.destroy?.();
  }
}

/**
 * A model picked by the user: `files` are FileSystemFileHandles (showOpenFilePicker) or Files
 * (<input type=file>): one .safetensors and optionally its config.json (else the demo's config).
 * Loads it when it fits; otherwise shows the error and keeps the current model.
 */
async function openPicked(files) {
  try {
    const named = await Promise.all(files.map(async (f) => ({ f, name: f.name ?? (await f.getFile()).name })));
    const model = named.filter((x) => x.name.endsWith(".safetensors"));
    const json = named.filter((x) => x.name.endsWith(".json"));
    if (model.length !== 1 || json.length > 1 || named.length !== model.length + json.length) {
      throw new TypeError(`pick one .safetensors file and, optionally, its config.json (got ${named.map((x) => x.name).join(", ") || "nothing"})`);
    }
    let config = state.demoConfig;
    if (json.length) {
      const file = typeof json[0].f.getFile === "function" ? await json[0].f.getFile() : json[0].f;
      try {
        config = JSON.parse(await file.text());
      } catch (e) {
        throw new TypeError(`${json[0].name} is not JSON: ${e.message}`);
      }
      checkConfig(config, json[0].name);
    }
    await checkModel(model[0].f, config, model[0].name);
    state.config = config;
    state.source = { source: model[0].f, origin: "picked", name: model[0].name };
    $("modelName").textContent = `${model[0].name} (picked${json.length ? `, with ${json[0].name}` : ", the demo's config.json"})`;
    await reload();
    return { ok: true };
  } catch (e) {
    setStatus(`error: ${e.name}: ${e.message}`, true);
    return { ok: false, error: `${e.name}: ${e.message}` };
  }
}

async function pickModel() {
  if (typeof window.showOpenFilePicker === "function") {
    let handles;
    try {
      handles = await window.showOpenFilePicker({
        multiple: true,
        types: [{ description: "a safetensors model and its config.json",
          accept: { "application/octet-stream": [".safetensors"], "application/json": [".json"] } }],
      });
    } catch (e) {
      if (e.name === "AbortError") return; // the user closed the picker
      throw e;
    }
    await openPicked(handles);
  } else {
    $("pickInput").click(); // its change event calls openPicked with Files
  }
}

function setStatus(text, error = false) {
  $("status").textContent = text;
  $("status").className = error ? "error" : "";
}

function drawGrid() {
  const s = state.model.stats();
  const active = new Set();
  state.model.lastRoutes.forEach((routes, l) => routes.forEach((r) => active.add(`${l}:${r.expert}`)));
  const head = `<tr><th></th>${s.experts[0].map((_, e) => `<th>expert ${e}</th>`).join("")}</tr>`;
  const rows = s.experts.map((row, l) => `<tr><th>layer ${l}</th>${row.map((x, e) =>
    `<td class="${x.residency}${active.has(`${l}:${e}`) ? " active" : ""}" title="${x.residency}">${x.hits}<br>` +
    `<small>${x.residency}</small></td>`).join("")}</tr>`);
  $("grid").innerHTML = head + rows.join("");
}

function drawMemory() {
  const s = state.model.stats();
  $("swaps").textContent = `${s.swapIns} / ${s.swapOuts}`;
  $("builds").textContent = String(s.builds);
  $("hits").textContent = s.expertUses && s.mode !== "rebuild"
    ? `${(100 * (1 - s.expertMisses / s.expertUses)).toFixed(0)}% of ${s.expertUses}` : "–";
  $("afterLoad").textContent = s.deviceBytes === null ? "–" : MB(s.bytesStreamedAfterLoad);
  if (s.deviceBytes === null) {
    $("memoryText").textContent = "memoryInfo() is not available (standard WebNN without the extensions)";
    return;
  }
  const all = s.nonExpertBytes + s.expertGraphBytes * s.experts.length * s.experts[0].length;
  const scale = Math.max(all, s.deviceBytes, s.budgetBytes);
  const pct = (n) => `${(100 * n) / scale}%`;
  const nonExpert = Math.min(s.nonExpertBytes, s.deviceBytes);
  document.querySelector("#memory .nonexpert").style.width = pct(nonExpert);
  document.querySelector("#memory .expert").style.left = pct(nonExpert);
  document.querySelector("#memory .expert").style.width = pct(s.deviceBytes - nonExpert);
  document.querySelector("#memory .budget").style.left = pct(s.budgetBytes);
  const resident = s.experts.flat().filter((x) => x.residency === "device").length;
  $("memoryText").textContent = `${MB(s.deviceBytes)} on the GPU (${resident} of ${s.experts.flat().length} experts ` +
    `resident, ${MB(s.expertGraphBytes)} each; non-expert ${MB(s.nonExpertBytes)}); budget ${MB(s.budgetBytes)}` +
    (s.runtimeBudgetBytes ? " (the context's memoryBudget)" : " (kept by the page)") +
    `; host copies ${MB(s.hostBytes)}` + (s.hostBudgetBytes ? ` of ${MB(s.hostBudgetBytes)} (the context's hostMemoryBudget)` : "") +
    `; uploaded ${MB(s.bytesUploaded)}; streamed from the file ${MB(s.bytesStreamedFromDisk)}`;
}

function draw() {
  drawGrid();
  drawMemory();
}

async function loadModel() {
  const mode = $("mode").value;
  const budgetFraction = mode === "resident" || mode === "fused" ? 1 : Number($("budget").value);
  state.model?.destroy();
  state.model = null;
  $("generate").disabled = true;
  const t0 = performance.now();
  setStatus(`building the ${mode} model…`);
  const model = await WebnnMoe.create({
    ...state.webnn, config: state.config, source: state.source.source, mode, budgetFraction,
    cacheKey: state.source.origin === "picked" ? undefined : CACHE_KEY,
    onProgress: (done, total) => setStatus(`building the ${mode} model: ${done} of ${total} graphs`),
  });
  state.model = model;
  // Later contexts, and a reload, open the download's OPFS copy.
  if (typeof state.source.source === "function" && typeof model.source !== "function") {
    state.source.source = await model.source;
  }
  const stats = model.stats();
  state.readySeconds = (performance.now() - t0) / 1000;
  const how = stats.cacheLoads && !stats.cacheSaves ? "loaded from the graph cache" : "built";
  setStatus(`ready: ${state.webnn.name}, mode ${mode}, expert budget ${Math.round(budgetFraction * 1000) / 10}%; ` +
    `weights through ${stats.weights}; ${how} in ${state.readySeconds.toFixed(2)} s`);
  $("generate").disabled = false;
  draw();
  return model;
}

function reload() {
  if (state.running) state.stop = true;
  state.loading = (state.loading ?? Promise.resolve()).catch(() => {}).then(loadModel);
  state.loading.catch((e) => setStatus(`error: ${e.name}: ${e.message}`, true));
  return state.loading;
}

/**
 * Greedy generation from `prompt`, streamed into the page. Resolves to { ids, text, logits
 * (per generated token, when collectLogits), prefillSeconds, decodeSeconds, tokensPerSecond }.
 */
async function generate(prompt, tokens, { collectLogits = false } = {}) {
  await state.loading;
  const model = state.model;
  state.running = true;
  state.stop = false;
  $("generate").disabled = true;
  $("stop").disabled = false;
  // A call through window.moe (the tests) shows its prompt and count in the form too.
  $("prompt").value = prompt;
  $("tokens").value = tokens;
  const ids = [...new TextEncoder().encode(prompt)];
  const out = [];
  const allLogits = [];
  const promptNode = document.createElement("span");
  promptNode.className = "prompt";
  promptNode.textContent = prompt;
  const textNode = document.createElement("span");
  $("output").replaceChildren(promptNode, textNode);
  try {
    await model.reset();
    const t0 = performance.now();
    let t1;
    let drawn = 0;
    // Each token shown as it comes; the grid and the memory bar at most every 50 ms (they cost
    // more than a fused token's GPU time), and after the last token.
    const show = (t, logits) => {
      t1 ??= performance.now();
      if (collectLogits) allLogits.push(Array.from(logits));
      out.push(t);
      textNode.textContent = decodeBytes(out);
      const seconds = (performance.now() - t1) / 1000;
      $("tps").textContent = seconds > 0 ? `${(out.length / seconds).toFixed(1)} tok/s` : "";
      $("count").textContent = String(out.length);
      if (performance.now() - drawn > 50) {
        draw();
        drawn = performance.now();
      }
      return !state.stop;
    };
    if (model.mode === "fused") {
      // The GPU picks each token and the next step starts from it: steps run ahead of reads.
      // ?ahead=N: steps in flight (1 waits for each read before the next dispatch).
      await model.decodeGreedy(ids, tokens, show, params.has("ahead") ? { ahead: Number(params.get("ahead")) } : {});
    } else {
      let logits;
      for (const t of ids) logits = await model.step(t);
      for (let i = 0; i < tokens; i++) {
        const t = argmax(logits);
        if (!show(t, logits) || i + 1 === tokens || model.pos >= state.config.max_seq) break;
        logits = await model.step(t);
      }
    }
    const decodeSeconds = (performance.now() - t1) / 1000;
    draw();
    const result = {
      ids: out, text: decodeBytes(out), logits: allLogits, prefillSeconds: (t1 - t0) / 1000, decodeSeconds,
      tokensPerSecond: out.length / decodeSeconds, stats: model.stats(),
    };
    setStatus(`generated ${out.length} tokens: ${result.tokensPerSecond.toFixed(2)} tokens/s ` +
      `(prompt ${ids.length} bytes in ${result.prefillSeconds.toFixed(2)} s)`);
    return result;
  } finally {
    state.running = false;
    $("generate").disabled = false;
    $("stop").disabled = true;
  }
}

async function main() {
  const [config, reference] = await Promise.all([
    fetch(modelUrl("config.json")).then((r) => r.json()),
    fetch(modelUrl("reference.json")).then((r) => r.json()),
  ]);
  checkConfig(config, "config.json");
  state.config = state.demoConfig = config;
  state.webnn = await loadWebnn();
  let model;
  try {
    model = await demoModel();
  } catch (e) {
    // No OPFS (an opaque origin, some private modes): the fetched Blob goes to the loader instead.
    console.warn(`OPFS unavailable (${e.name}: ${e.message}); loading the fetched file`);
    const blob = await download().then((r) => r.blob());
    model = { source: blob, origin: "fetched-no-opfs", bytes: blob.size };
  }
  state.source = { source: model.source, origin: model.origin, name: OPFS_NAME, bytes: model.bytes };
  const describe = () => `the demo model${state.source.bytes ? `, ${MB(state.source.bytes)}` : ""}: ` + {
    fetched: "streamed from the server to the GPU and into the origin-private file system (OPFS) in one pass",
    opfs: "the OPFS copy (no download)",
    "fetched-no-opfs": "fetched (this page has no origin-private file system; nothing is kept)",
  }[model.origin];
  $("modelName").textContent = describe();
  $("pick").onclick = () => pickModel().catch((e) => setStatus(`error: ${e.name}: ${e.message}`, true));
  $("pickInput").onchange = () => { window.moe.picked = openPicked([...$("pickInput").files]); };
  for (const p of reference.prompts) $("examples").add(new Option(p.text, p.text));
  $("examples").onchange = () => { $("prompt").value = $("examples").value; };
  // The backend is chosen when the polyfill is installed: another one reloads the page.
  $("backend").value = params.get("backend") ?? "auto";
  $("backend").onchange = () => {
    params.set("backend", $("backend").value);
    location.search = params.toString();
  };
  if (params.has("mode")) $("mode").value = params.get("mode");
  if (params.has("budget")) $("budget").value = params.get("budget");
  const showBudget = () => {
    $("budgetText").textContent = `${Number($("budget").value) * 100}% of the expert bytes`;
    $("budget").disabled = ["resident", "fused", "rebuild"].includes($("mode").value);
  };
  showBudget();
  $("mode").onchange = () => { showBudget(); reload(); };
  $("budget").onchange = () => { showBudget(); reload(); };
  $("generate").onclick = () => generate($("prompt").value, Number($("tokens").value))
    .catch((e) => setStatus(`error: ${e.name}: ${e.message}`, true));
  $("stop").onclick = () => { state.stop = true; };
  window.moe = {
    generate, reference, config, openPicked, stats: () => state.model.stats(), ready: reload(),
    source: () => ({ origin: state.source.origin, name: state.source.name, kind: state.source.source?.constructor?.name }),
    readySeconds: () => state.readySeconds,
    timeFusedDispatches: (n) => state.model.timeFusedDispatches(n),
  };
  await window.moe.ready;
  $("modelName").textContent = describe();
  document.body.dataset.state = "ready";
}

main().catch((e) => {
  setStatus(`error: ${e?.name ?? "Error"}: ${e?.message ?? e}`, true);
  document.body.dataset.state = "error";
  console.error(e);
});
