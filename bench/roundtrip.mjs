// Round-trip latency in headless Chromium: a small tensor's dispatch + readTensor through
// navigator.ml beside the same work done with plain WebGPU in the same page (a trivial kernel,
// a copy to a mappable buffer, mapAsync). The median over batches of
// 20 round trips (REPEATS in all) of each batch's mean, after a warm-up. Then what one more
// kernel in a dispatch costs, ours and plain (bench/kernel_chain_page.js; --chain lengths).
//   node bench/roundtrip.mjs [--repeats 120] [--bytes 256] [--chain 1,32,128]
// Prints a markdown table and writes out/roundtrip.json.
import { parseArgs } from 'node:util';
import { start, openHarness, writeOut } from '../tests/browser/browser.mjs';

const { values: args } = parseArgs({
  options: {
    repeats: { type: 'string', default: '120' },
    bytes: { type: 'string', default: '256' },
    chain: { type: 'string', default: '1,32,128' },
  },
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
  const lengths = args.chain.split(',').map(Number);
  const chain = await page.evaluate(async (lengths) => {
    const { run } = await import('/bench/kernel_chain_page.js');
    return run({ lengths });
  }, lengths);
  console.log(`\nChains of ${lengths.join(', ')} dependent kernels in one dispatch, read back (median ms), and what one more kernel costs:\n`);
  console.log(`| path | ${lengths.map((l) => `${l} kernels`).join(' | ')} | µs per kernel |\n| --- |${lengths.map(() => ' ---: |').join('')} ---: |`);
  for (const [path, ms] of Object.entries(chain.ms)) {
    console.log(`| ${path} | ${ms.map((t) => t.toFixed(3)).join(' | ')} | ${chain.usPerKernel[path]} |`);
  }
  writeOut('roundtrip.json', { date: new Date().toISOString(), repeats, bytes: elements * 4, rows, chain });
} finally {
  await close();
}
