// A randomized test of the JavaScript API in headless Chromium: random calls of every
// MLGraphBuilder operator and of input/constant/build and the MLContext methods, with random and
// often invalid arguments (wrong JS types, strings, negative numbers, NaN, huge arrays, null,
// missing or odd options). Every call must return, or throw / reject with a TypeError or a
// DOMException; never a wasm trap (RuntimeError "unreachable", "memory access out of bounds"), a
// Rust panic, another error type or a hang; and the page must still compute a graph correctly
// afterwards. A TypeError counts only when our code made it on purpose: its stack's top frame is
// a `new TypeError(` expression in our JS (js/webnn.js, or the wasm-bindgen glue for the
// backend's errors). One the engine made in our code ("Cannot read properties of undefined",
// "x is not a function", a WebGPU call's argument check) is a bug. Uncaught page errors and
// unhandled rejections are failures too.
// SEED=n replays a run (the seed is printed); SECONDS (default 45) bounds it; CALLS caps it.
import { start, openPage, harnessReady, harnessUrl, writeOut } from './browser.mjs';

const seed = Number(process.env.SEED ?? Math.floor(Math.random() * 1e9));
const seconds = Number(process.env.SECONDS ?? 45);
const maxCalls = Number(process.env.CALLS ?? 1e9);
console.log(`fuzz: seed ${seed}, up to ${seconds} s`);

const { browser, url, close } = await start();
const panics = [];
let summary = null;
try {
  const page = await openPage(browser, harnessUrl(url), 'fuzz');
  page.on('console', (m) => {
    if (m.type() === 'error' && /panicked|unreachable|RuntimeError|memory access out of bounds/.test(m.text())) panics.push(m.text().slice(0, 500));
  });
  page.on('pageerror', (e) => panics.push(`uncaught ${e.name}: ${e.message}`.slice(0, 500)));
  await harnessReady(page);
  summary = await page.evaluate(async ({ seed, seconds, maxCalls }) => {
    let s = seed >>> 0 || 1;
    const random = () => {
      s ^= s << 13; s >>>= 0;
      s ^= s >>> 17;
      s ^= s << 5; s >>>= 0;
      return s / 4294967296;
    };
    const pick = (list) => list[Math.floor(random() * list.length)];
    const chance = (p) => random() < p;

    const TYPES = ['float32', 'float16', 'int32', 'uint32', 'int64', 'uint64', 'int8', 'uint8'];
    const VIEWS = { float32: Float32Array, float16: Uint16Array, int32: Int32Array, uint32: Uint32Array, int64: BigInt64Array, uint64: BigUint64Array, int8: Int8Array, uint8: Uint8Array };
    const OPERATORS = Object.getOwnPropertyNames(MLGraphBuilder.prototype)
      .filter((n) => n !== 'constructor' && typeof MLGraphBuilder.prototype[n] === 'function');
    const OPTION_KEYS = ['axes', 'axis', 'keepDimensions', 'padding', 'strides', 'dilations', 'groups', 'inputLayout',
      'filterLayout', 'layout', 'windowDimensions', 'roundingType', 'outputSizes', 'outputPadding', 'bias', 'scale',
      'epsilon', 'alpha', 'beta', 'minValue', 'maxValue', 'mode', 'value', 'permutation', 'label', 'aTranspose',
      'bTranspose', 'c', 'sizes', 'scales', 'exclusive', 'reversed', 'upper', 'diagonal', 'outputDataType',
      'keepDims', 'recurrentBias', 'initialHiddenState', 'direction', 'layout', 'activations', 'returnSequence',
      'resetAfter', 'weightLayout'];
    const ODD = () => pick([undefined, null, NaN, -1, 0, 1, 2, 3.5, -0, 2 ** 32, -(2 ** 31), 2 ** 53, 1e300, Infinity,
      -Infinity, '', '1', 'abc', 'float32', 'nchw', 'nhwc', 'edge', true, false, {}, [], [1, 2], [0], [-1], [NaN],
      [1, 1, 1, 1, 1, 1, 1, 1, 1, 1], 1n, () => 1, Symbol('s'), new ArrayBuffer(3), new Float32Array(5),
      new Array(1000).fill(1), { length: 2 }, 'x'.repeat(1000)]);

    let ctx = await navigator.ml.createContext();
    let builder = new MLGraphBuilder(ctx);
    let operands = [];
    const tensors = [];
    const graphs = [];
    const other = new MLGraphBuilder(ctx);
    const foreign = other.input('foreign', { dataType: 'float32', shape: [2] });

    const shape = () => (chance(0.1) ? ODD() : Array.from({ length: Math.floor(random() * 5) }, () => (chance(0.05) ? pick([0, -1, 2 ** 31, NaN]) : 1 + Math.floor(random() * 4))));
    const descriptor = () => (chance(0.1) ? ODD() : { dataType: chance(0.9) ? pick(TYPES) : ODD(), shape: shape(), ...(chance(0.3) ? { readable: chance(0.5), writable: chance(0.5) } : {}) });
    const bufferFor = (d) => {
      const count = Array.isArray(d?.shape) && d.shape.every((v) => v >= 1 && v <= 8) ? d.shape.reduce((a, b) => a * b, 1) : 4;
      const View = VIEWS[d?.dataType] ?? Float32Array;
      const view = new View(chance(0.85) ? count : Math.floor(random() * 10));
      if (View !== BigInt64Array && View !== BigUint64Array) for (let i = 0; i < view.length; i++) view[i] = Math.floor(random() * 7) - 3;
      return chance(0.1) ? view.buffer : view;
    };
    const operand = () => {
      if (operands.length === 0 || chance(0.05)) return chance(0.5) ? foreign : ODD();
      return pick(operands);
    };
    const options = () => {
      if (chance(0.15)) return ODD();
      const o = {};
      for (let i = Math.floor(random() * 4); i > 0; i--) {
        const key = pick(OPTION_KEYS);
        o[key] = chance(0.3) ? operand() : chance(0.5) ? ODD() : Array.from({ length: Math.floor(random() * 5) }, () => Math.floor(random() * 4));
      }
      return o;
    };
    const arg = () => {
      const r = random();
      if (r < 0.55) return operand();
      if (r < 0.65) return Array.from({ length: 1 + Math.floor(random() * 3) }, operand);
      if (r < 0.75) return Math.floor(random() * 4);
      if (r < 0.85) return Array.from({ length: Math.floor(random() * 5) }, () => Math.floor(random() * 4));
      return ODD();
    };

    // Our sources, by URL, for telling our TypeErrors from the engine's.
    const sources = new Map();
    const sourceLines = async (url) => {
      if (!sources.has(url)) sources.set(url, (await (await fetch(url)).text()).split('\n'));
      return sources.get(url);
    };
    // Whether `e`'s stack starts at a `new TypeError(` expression of our webnn.js or glue.
    const deliberate = async (e) => {
      const top = String(e.stack ?? '').split('\n').find((l) => /^\s+at /.test(l)) ?? '';
      const m = /(https?:\/\/[^\s()]+\/(?:webnn|webnn_wgpu|webnn_wgpu_threads)\.js):(\d+):(\d+)\)?\s*$/.exec(top);
      if (!m) return false;
      const line = (await sourceLines(m[1]))[Number(m[2]) - 1] ?? '';
      return line.slice(Number(m[3]) - 1).startsWith('new TypeError(');
    };
    // What a call did: 'ok', 'TypeError' or a DOMException name; anything else is a failure.
    const classify = async (e) => {
      if (e instanceof TypeError) {
        return (await deliberate(e)) ? 'TypeError' : `BAD:engine TypeError:${e.message}:${String(e.stack).split('\n').slice(1, 3).join(' <')}`;
      }
      if (e instanceof DOMException) return `DOMException:${e.name}`;
      return `BAD:${e?.constructor?.name}:${e?.message ?? e}`;
    };
    const settle = async (value) => {
      if (!(value instanceof Promise)) return value;
      const hang = new Promise((_, reject) => setTimeout(() => reject(new Error('hang: no settlement in 15 s')), 15000));
      return Promise.race([value, hang]);
    };
    const counts = {};
    const failures = [];
    const record = (name, outcome, detail) => {
      const key = outcome.startsWith('BAD') ? outcome.split(':').slice(0, 2).join(':') : outcome;
      counts[key] = (counts[key] ?? 0) + 1;
      if (outcome.startsWith('BAD') && failures.length < 20) failures.push(`${name}: ${outcome} ${detail}`);
    };
    const call = async (name, f, describe) => {
      try {
        const v = await settle(f());
        record(name, 'ok', '');
        return v;
      } catch (e) {
        record(name, e?.message?.startsWith('hang') ? 'BAD:hang' : await classify(e), describe());
        return undefined;
      }
    };
    const show = (args) => {
      try {
        return JSON.stringify(args, (k, v) => (typeof v === 'bigint' ? `${v}n` : typeof v === 'symbol' ? String(v) : v instanceof MLOperand ? `MLOperand(${v.dataType}${JSON.stringify(v.shape)})` : v)).slice(0, 300);
      } catch {
        return '(unprintable)';
      }
    };
    // The page must still compute: a fresh graph on a fresh builder gives exact results.
    const alive = async () => {
      const d = { dataType: 'float32', shape: [3] };
      const b = new MLGraphBuilder(ctx);
      const g = await b.build({ y: b.add(b.input('x', d), b.constant(d, new Float32Array([1, 2, 3]))) });
      const x = await ctx.createTensor({ ...d, writable: true });
      const y = await ctx.createTensor({ ...d, readable: true });
      ctx.writeTensor(x, new Float32Array([1, 1, 1]));
      ctx.dispatch(g, { x }, { y });
      const got = Array.from(new Float32Array(await ctx.readTensor(y)));
      g.destroy(); x.destroy(); y.destroy();
      return got.join() === '2,3,4' ? '' : `alive check computed ${got}`;
    };

    // Calls the fuzzer once found failing with an engine TypeError (a Symbol or BigInt reaching
    // a string or number conversion of js/webnn.js): each must throw our TypeError.
    const x = builder.input('regression', { dataType: 'float32', shape: [2, 2] });
    const regressions = [
      ['input', () => builder.input(Symbol('s'), { dataType: 'float32', shape: [1] })],
      ['input', () => builder.input([1, Symbol('s')], { dataType: 'float32', shape: [1] })],
      ['input', () => builder.input('r1', { dataType: Symbol('s'), shape: [1] })],
      ['constant', () => builder.constant('float32', Symbol('s'))],
      ['constant', () => builder.constant({ dataType: Symbol('s'), shape: [1] }, new Float32Array(1))],
      ['split', () => builder.split(x, 1n)],
      ['cumulativeSum', () => builder.cumulativeSum(x, 1n)],
      ['argMin', () => builder.argMin(x, Symbol('s'))],
      ['createTensor', () => ctx.createTensor({ dataType: Symbol('s'), shape: [1] })],
    ];
    for (const [name, f] of regressions) {
      let outcome = 'no error';
      try {
        await settle(f());
      } catch (e) {
        outcome = await classify(e);
      }
      record(name, outcome === 'TypeError' ? outcome : `BAD:regression:${outcome}`, String(f));
    }

    const t0 = performance.now();
    let calls = 0;
    let inputs = 0;
    while (calls < maxCalls && performance.now() - t0 < seconds * 1000) {
      calls++;
      const r = random();
      if (r < 0.6) {
        const name = pick(OPERATORS);
        const args = Array.from({ length: Math.floor(random() * 4) }, arg);
        if (chance(0.6)) args.push(options());
        const result = await call(name, () => builder[name](...args), () => show(args));
        for (const v of [result].flat()) if (v instanceof MLOperand) operands.push(v);
      } else if (r < 0.72) {
        const d = descriptor();
        const name = chance(0.9) ? `in${inputs++}` : ODD();
        const v = await call('input', () => builder.input(name, d), () => show([name, d]));
        if (v instanceof MLOperand) operands.push(v);
      } else if (r < 0.82) {
        const d = descriptor();
        const args = chance(0.8) ? [d, bufferFor(d)] : chance(0.5) ? [pick(TYPES), ODD()] : [ODD()];
        const v = await call('constant', () => builder.constant(...args), () => show(args));
        if (v instanceof MLOperand) operands.push(v);
      } else if (r < 0.87) {
        const outs = {};
        for (let i = Math.floor(random() * 3); i >= 0; i--) outs[chance(0.95) ? `o${i}` : ''] = operand();
        const g = await call('build', () => builder.build(chance(0.9) ? outs : ODD()), () => show(outs));
        if (g instanceof MLGraph) graphs.push(g);
        builder = new MLGraphBuilder(ctx);
        operands = [];
      } else if (r < 0.92) {
        const d = descriptor();
        const t = await call('createTensor', () => (chance(0.8) ? ctx.createTensor(d) : ctx.createConstantTensor(d, bufferFor(d))), () => show([d]));
        if (t instanceof MLTensor) tensors.push(t);
      } else if (r < 0.98 && tensors.length > 0) {
        const t = pick(tensors);
        const which = Math.floor(random() * 4);
        if (which === 0) await call('writeTensor', () => ctx.writeTensor(t, bufferFor({ dataType: t.dataType, shape: t.shape })), () => show([t.dataType, t.shape]));
        else if (which === 1) await call('readTensor', () => ctx.readTensor(t), () => show([t.dataType, t.shape]));
        else if (which === 2 && graphs.length > 0) {
          const named = () => Object.fromEntries(Array.from({ length: Math.floor(random() * 3) }, (_, i) => [chance(0.7) ? pick(['x', 'y', 'in0', 'in1', 'o0', 'o1']) : `n${i}`, chance(0.9) ? pick(tensors) : ODD()]));
          await call('dispatch', () => ctx.dispatch(pick(graphs), named(), named()), () => 'dispatch');
        } else await call('destroy', () => (chance(0.5) ? t.destroy() : graphs.length && pick(graphs).destroy()), () => 'destroy');
      } else {
        const error = await alive().catch(async (e) => `alive check failed: ${await classify(e)}`);
        if (error) failures.push(`after ${calls} calls: ${error}`);
      }
      if (tensors.length > 40) tensors.splice(0, 20).forEach((t) => t.destroy());
      if (graphs.length > 20) graphs.splice(0, 10).forEach((g) => g.destroy());
    }
    const finalAlive = await alive().catch(async (e) => `alive check failed: ${await classify(e)}`);
    if (finalAlive) failures.push(`at the end: ${finalAlive}`);
    return { calls, seconds: (performance.now() - t0) / 1000, counts, failures };
  }, { seed, seconds, maxCalls });
} catch (e) {
  summary = { failures: [`harness: ${e.message.split('\n')[0]}`], counts: {}, calls: 0 };
} finally {
  await close();
}
const failures = [...summary.failures, ...panics.map((p) => `page: ${p}`)];
const counts = Object.entries(summary.counts).sort((a, b) => b[1] - a[1]).map(([k, v]) => `${k} ${v}`).join(', ');
console.log(`fuzz: ${summary.calls} calls in ${summary.seconds?.toFixed(1)} s (seed ${seed}): ${counts}`);
for (const f of failures) console.log(`FAIL ${f}`);
writeOut('fuzz.json', { seed, ...summary, failures });
console.log(`fuzz: ${failures.length === 0 ? 'ok' : `${failures.length} failures`} (replay with SEED=${seed})`);
process.exit(failures.length === 0 && summary.calls >= 500 ? 0 : 1);
