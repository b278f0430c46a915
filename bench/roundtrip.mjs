// Round-trip latency in headless Chromium: a small tensor's dispatch + readTensor through
// navigator.ml beside the same work done with plain WebGPU in the same page (a trivial kernel,
// a copy to a mappable buffer, mapAsync). The median over batches of
// 20 round trips (REPEATS in all) of each batch's mean, after a warm-up.
//   node bench/roundtrip.mjs [--repeats 120] [--bytes 256]
// Prints a markdown table and writes out/roundtrip.json.
import { parseArgs } from 'node:util';
import { start, openHarness, writeOut } from '../tests/browser/browser.mjs';

const { values: args } = parseArgs({
  options: { repeats: { type: 'string', default: '120' }, bytes: { type: 'string', default: '256' } },
});
const repeats = Number(args.repeats);
const elements = Number(args.bytes) / 4;

const { browser, url, close } = await start();
try {
  const page = await openHarness(browser, url, 'roundtrip');
  const rows = await page.evaluate(async (opts) => {
    const { run } = await import('/bench/roundtrip_page.js');
    return run(opts);
  }, { repeats, elements });
  const plain = rows.find(([n]) => n.startsWith('plain: writeBuffer'))[1];
  console.log(`\nRound trips of a ${elements * 4}-byte tensor, median of ${repeats} (ms):\n`);
  console.log('| path | ms | × plain write+dispatch+read |\n| --- | ---: | ---: |');
  for (const [name, ms] of rows) console.log(`| ${name} | ${ms.toFixed(3)} | ${(ms / plain).toFixed(2)} |`);
  writeOut('roundtrip.json', { date: new Date().toISOString(), repeats, bytes: elements * 4, rows });
} finally {
  await close();
}
