// The MoE demo page: loads the model, builds it on WebNN in the chosen memory mode, streams
// greedy text and shows each expert's residency, hits, the memory bar and the swap counters.
// window.moe is what tests/browser/moe.mjs drives.
import { parseSafetensors, argmax, decodeBytes } from "./model.js";
import { WebnnMoe } from "./webnn.js";

const $ = (id) => document.getElementById(id);
const MB = (n) => `${(n / 1e6).toFixed(1)} MB`;
const modelUrl = (name) => new URL(`../models/moe/${name}`, import.meta.url);
const params = new URLSearchParams(location.search);

// navigator.ml from the wasm package; ?webnn=cpu takes the CPU stand-in the Node tests use.
async function loadWebnn() {
  if (params.get("webnn") === "cpu") {
    const m = await import(/* webpackIgnore: true */ "/tests/browser/webnn_cpu.mjs");
    return { ml: m.ml, MLGraphBuilder: m.MLGraphBuilder, name: "CPU stand-in (tests/browser/webnn_cpu.mjs)" };
  }
  const { install, init } = await import("../../pkg/index.js");
  install({ force: true });
  await init(); // loads the wasm module now rather than at the first createContext()
  return { ml: navigator.ml, MLGraphBuilder: globalThis.MLGraphBuilder, name: "navigator.ml (webnn-wgpu)" };
}

const state = { model: null, running: false, stop: false, loading: null };

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
    `; host copies ${MB(s.hostBytes)}; uploaded ${MB(s.bytesUploaded)}`;
}

function draw() {
  drawGrid();
  drawMemory();
}

async function loadModel() {
  const mode = $("mode").value;
  const budgetFraction = mode === "resident" ? 1 : Number($("budget").value);
  state.model?.destroy();
  state.model = null;
  $("generate").disabled = true;
  const t0 = performance.now();
  setStatus(`building the ${mode} model…`);
  const model = await WebnnMoe.create({
    ...state.webnn, config: state.config, file: state.file, mode, budgetFraction,
    onProgress: (done, total) => setStatus(`building the ${mode} model: ${done} of ${total} graphs`),
  });
  state.model = model;
  setStatus(`ready: ${state.webnn.name}, mode ${mode}, expert budget ${Math.round(budgetFraction * 1000) / 10}%; ` +
    `built in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
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
    let logits;
    for (const t of ids) logits = await model.step(t);
    const t1 = performance.now();
    for (let i = 0; i < tokens && !state.stop; i++) {
      if (collectLogits) allLogits.push(Array.from(logits));
      const t = argmax(logits);
      out.push(t);
      textNode.textContent = decodeBytes(out);
      const seconds = (performance.now() - t1) / 1000;
      $("tps").textContent = `${(out.length / seconds).toFixed(1)} tok/s`;
      $("count").textContent = String(out.length);
      draw();
      if (i + 1 < tokens && model.pos < state.config.max_seq) logits = await model.step(t);
      else break;
    }
    const decodeSeconds = (performance.now() - t1) / 1000;
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
  const [config, reference, bytes] = await Promise.all([
    fetch(modelUrl("config.json")).then((r) => r.json()),
    fetch(modelUrl("reference.json")).then((r) => r.json()),
    fetch(modelUrl("model.safetensors")).then((r) => {
      if (!r.ok) throw new Error(`model.safetensors: HTTP ${r.status}`);
      return r.arrayBuffer();
    }),
  ]);
  state.config = config;
  state.file = parseSafetensors(bytes);
  state.webnn = await loadWebnn();
  for (const p of reference.prompts) $("examples").add(new Option(p.text, p.text));
  $("examples").onchange = () => { $("prompt").value = $("examples").value; };
  if (params.has("mode")) $("mode").value = params.get("mode");
  if (params.has("budget")) $("budget").value = params.get("budget");
  const showBudget = () => {
    $("budgetText").textContent = `${Number($("budget").value) * 100}% of the expert bytes`;
    $("budget").disabled = $("mode").value === "resident" || $("mode").value === "rebuild";
  };
  showBudget();
  $("mode").onchange = () => { showBudget(); reload(); };
  $("budget").onchange = () => { showBudget(); reload(); };
  $("generate").onclick = () => generate($("prompt").value, Number($("tokens").value))
    .catch((e) => setStatus(`error: ${e.name}: ${e.message}`, true));
  $("stop").onclick = () => { state.stop = true; };
  window.moe = { generate, reference, config, stats: () => state.model.stats(), ready: reload() };
  await window.moe.ready;
  document.body.dataset.state = "ready";
}

main().catch((e) => {
  setStatus(`error: ${e?.name ?? "Error"}: ${e?.message ?? e}`, true);
  document.body.dataset.state = "error";
  console.error(e);
});
