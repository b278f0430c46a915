// Benchmark of the memory primitives in headless Chromium (WebGPU on SwiftShader), one run:
// for graphs holding 16, 64 and 256 MiB of constants, swapIn from the host tier against a raw
// GPUQueue.writeBuffer of the same bytes (the physical reference), against what the standard
// allows today (destroy, then rebuild from JS ArrayBuffers), and swapOut latency. Two swap-ins:
// after an explicit swapOut() (its buffers were freed, so it creates them again) and at the
// memory budget (it evicts a graph of the same shapes and writes into that graph's buffers).
// Prints a markdown table.
//   node bench/memory.mjs
import { start, openPage, harnessUrl, writeOut } from '../tests/browser/browser.mjs';

const { browser, url, close } = await start();
try {
  const page = await openPage(browser, harnessUrl(url), 'bench');
  await page.evaluate(() => window.harness.ready);
  const rows = await page.evaluate(async () => (await import('/bench/memory_page.js')).run());
  const gbs = (mib, ms) => ((mib * (1 << 20)) / (ms / 1e3) / 1e9).toFixed(2);
  const cell = (mib, ms) => `${gbs(mib, ms)} GB/s (${ms.toFixed(1)} ms)`;
  const pct = (reference, ms) => `${((100 * reference) / ms).toFixed(0)}%`;
  const lines = [
    `## swapIn / swapOut in headless Chromium (WebGPU adapter: ${rows.adapter})`,
    'Every timed path ends with the same readback of one word (a 4-byte copy into a mappable buffer and its',
    'mapAsync, queued after the writes): the bytes are on the GPU when the clock stops. The raw columns write',
    'the page\'s own copies (one per 16 MiB buffer, two sets in turn) through its own GPUDevice: "raw',
    'writeBuffer" into buffers created before the clock, "raw create + writeBuffer" into buffers it creates,',
    'as a swap-in after swapOut() must. "swapIn at the budget" evicts a graph of the same shapes and writes',
    'into its buffers.',
    '',
    '| constants | raw writeBuffer | raw create + writeBuffer | swapIn after swapOut | swapIn / raw | swapIn / (create + raw) | swapIn at the budget | at the budget / raw | destroy + rebuild | swapIn speed-up | swapOut |',
    '|---|---|---|---|---|---|---|---|---|---|---|',
    ...rows.rows.map((r) =>
      `| ${r.mib} MiB | ${cell(r.mib, r.raw)} | ${cell(r.mib, r.rawCreate)} | ${cell(r.mib, r.swapIn)} | ${pct(r.raw, r.swapIn)} | ` +
      `${pct(r.rawCreate, r.swapIn)} | ${cell(r.mib, r.swapInBudget)} | ${pct(r.raw, r.swapInBudget)} | ${r.rebuild.toFixed(1)} ms | ` +
      `${(r.rebuild / r.swapIn).toFixed(1)}x | ${r.swapOut.toFixed(2)} ms |`),
  ];
  console.log(lines.join('\n'));
  writeOut('bench_memory.md', lines.join('\n') + '\n');
} finally {
  await close();
}
