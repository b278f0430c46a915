// Checks the MoE demo's model code against the PyTorch numbers in www/models/moe/reference.json,
// before any GPU is involved:
//   node tests/browser/moe_reference.mjs                      the float32 CPU reference (model.js)
//   node tests/browser/moe_reference.mjs --webnn-cpu [--mode M] [--budget F] [--tokens N]
//        the WebNN graphs of webnn.js on a CPU stand-in for navigator.ml (www/moe/cpu_standin.mjs)
// Exit status 0 when every check passes.
import { readFileSync } from "node:fs";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { parseSafetensors, CpuModel, checkAgainstReference } from "../../www/moe/model.js";

const { values: args } = parseArgs({
  options: {
    "webnn-cpu": { type: "boolean", default: false },
    mode: { type: "string", default: "resident" },
    budget: { type: "string", default: "1" },
    tokens: { type: "string", default: "64" },
    dir: { type: "string" },
  },
});
const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const dir = args.dir ?? join(root, "www", "models", "moe");
const config = JSON.parse(readFileSync(join(dir, "config.json"), "utf8"));
const reference = JSON.parse(readFileSync(join(dir, "reference.json"), "utf8"));
const bytes = readFileSync(join(dir, "model.safetensors"));
const file = parseSafetensors(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength));

const started = performance.now();
let model;
if (args["webnn-cpu"]) {
  const { ml, MLGraphBuilder } = await import("../../www/moe/cpu_standin.mjs");
  const { WebnnMoe } = await import("../../www/moe/moe_graphs.js");
  model = await WebnnMoe.create({ ml, MLGraphBuilder, config, file, mode: args.mode, budgetFraction: Number(args.budget) });
} else {
  model = new CpuModel(config, file);
}
let steps = 0;
const counted = { reset: () => model.reset(), step: (t) => { steps++; return model.step(t); } };
const results = await checkAgainstReference(counted, reference, { tokens: Number(args.tokens) });
const seconds = (performance.now() - started) / 1000;
for (const r of results) console.log(`${r.ok ? "PASS" : "FAIL"} ${r.what}`);
if (model.stats) {
  const s = model.stats();
  console.log(`mode ${s.mode}: swap-ins ${s.swapIns}, swap-outs ${s.swapOuts}, builds ${s.builds}, ` +
    `expert misses ${s.expertMisses} of ${s.expertUses} uses, non-expert graph misses ${s.sharedMisses}, ` +
    `device bytes ${s.deviceBytes} of budget ${s.budgetBytes}; residency ` +
    s.experts.map((row) => row.map((e) => e.residency[0]).join("")).join(" "));
}
const failed = results.filter((r) => !r.ok).length;
console.log(`${results.length - failed} passed, ${failed} failed; ${steps} steps in ${seconds.toFixed(1)} s ` +
  `(${(steps / seconds).toFixed(1)} tokens/s)`);
process.exit(failed ? 1 : 0);
