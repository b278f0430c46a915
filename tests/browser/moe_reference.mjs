// Checks the JavaScript float32 CPU reference of the MoE model (www/moe/model.js) against the
// PyTorch numbers in www/models/moe/reference.json, before any GPU is involved:
//   node tests/browser/moe_reference.mjs [model dir]
// Exit status 0 when every check passes.
import { readFileSync } from "node:fs";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { parseSafetensors, CpuModel, checkAgainstReference } from "../../www/moe/model.js";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const dir = process.argv[2] ?? join(root, "www", "models", "moe");
const config = JSON.parse(readFileSync(join(dir, "config.json"), "utf8"));
const reference = JSON.parse(readFileSync(join(dir, "reference.json"), "utf8"));
const bytes = readFileSync(join(dir, "model.safetensors"));
const file = parseSafetensors(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength));

const started = performance.now();
const model = new CpuModel(config, file);
let steps = 0;
const counted = { reset: () => model.reset(), step: (t) => { steps++; return model.step(t); } };
const results = await checkAgainstReference(counted, reference);
const seconds = (performance.now() - started) / 1000;
for (const r of results) console.log(`${r.ok ? "PASS" : "FAIL"} ${r.what}`);
const failed = results.filter((r) => !r.ok).length;
console.log(`${results.length - failed} passed, ${failed} failed; ${steps} CPU steps in ${seconds.toFixed(1)} s ` +
  `(${(steps / seconds).toFixed(0)} tokens/s)`);
process.exit(failed ? 1 : 0);
