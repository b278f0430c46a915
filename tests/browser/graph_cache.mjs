// The graph cache (saveGraph, loadGraph, listGraphs, deleteGraph) in headless Chromium, across a
// real reload of the page: a graph built from host constants and from a weight file in OPFS is
// saved, the page reloads, and loadGraph gives a graph whose constants are in the "disk" tier
// and whose results are bit-identical to the first visit's (and to a float64 reference). Then
// what must never give a wrong result: a record of another package version (NotFoundError), a
// truncated graph file (DataError, entry removed), a deleted constant file (NotFoundError, entry
// removed), a full quota before and during a save (QuotaExceededError naming the bytes, nothing
// left behind); deleteGraph frees exactly the constant files no other saved graph uses. The
// CPU context saves and loads too, and refuses a WebGPU context's record.
import { start, openHarness, harnessReady, withTimeout } from './browser.mjs';

const { browser, url, close } = await start();
let failed = 0;
const report = (results) => {
  for (const r of results) {
    if (!r.ok) failed++;
    console.log(`${r.ok ? 'ok  ' : 'FAIL'} ${r.name}${r.detail ? `: ${r.detail}` : ''}`);
  }
};

// Runs in the page: the graph `y = relu(x @ w + b)`, `z = y * s` with `w` from a weight file in
// OPFS and `b`, `s` host constants; returns the outputs for fixed inputs as arrays.
const setup = async () => {
  window.check = (out) => (ok, name, detail = '') => out.push({ ok: !!ok, name, detail });
  window.n = 16;
  window.inputs = new Float32Array(2 * n).map((_, i) => Math.cos(i) * 3);
  window.weights = new Float32Array(n * n).map((_, i) => Math.sin(i * 0.7));
  window.bias = new Float32Array(n).map((_, i) => (i % 5) - 2);
  window.scale = new Float32Array(n).map((_, i) => 1 + i / 8);
  window.run = async (context, graph) => {
    const desc = (shape, extra) => ({ dataType: 'float32', shape, ...extra });
    const x = await context.createTensor(desc([2, n], { writable: true }));
    const y = await context.createTensor(desc([2, n], { readable: true }));
    const z = await context.createTensor(desc([2, n], { readable: true }));
    context.writeTensor(x, inputs);
    context.dispatch(graph, { x }, { y, z });
    return [Array.from(new Float32Array(await context.readTensor(y))), Array.from(new Float32Array(await context.readTensor(z)))];
  };
  window.build = async (context, { biasValues = bias } = {}) => {
    const root = await navigator.storage.getDirectory();
    const header = new TextEncoder().encode(JSON.stringify({ w: { dtype: 'F32', shape: [n, n], data_offsets: [0, 4 * n * n] } }));
    const file = new Uint8Array(8 + header.length + 4 * n * n);
    new DataView(file.buffer).setBigUint64(0, BigInt(header.length), true);
    file.set(header, 8);
    file.set(new Uint8Array(weights.buffer), 8 + header.length);
    const handle = await root.getFileHandle('cache-test.safetensors', { create: true });
    const writable = await handle.createWritable();
    await writable.write(file);
    await writable.close();
    const w = await (await context.openWeights(handle)).constantTensor('w');
    const b = new MLGraphBuilder(context);
    const x = b.input('x', { dataType: 'float32', shape: [2, n] });
    const y = b.relu(b.add(b.matmul(x, b.constant(w)), b.constant({ dataType: 'float32', shape: [n] }, biasValues)));
    const z = b.mul(y, b.constant({ dataType: 'float32', shape: [n] }, scale));
    return b.build({ y, z });
  };
  // The float64 reference of y and z, rounded to float32.
  window.reference = () => {
    const y = [], z = [];
    for (let r = 0; r < 2; r++) {
      for (let j = 0; j < n; j++) {
        let sum = 0;
        for (let k = 0; k < n; k++) sum += inputs[r * n + k] * weights[k * n + j];
        const v = Math.max(0, sum + bias[j]);
        y.push(v);
        z.push(v * scale[j]);
      }
    }
    return [y, z];
  };
  window.cacheFiles = async () => {
    const root = await navigator.storage.getDirectory();
    const cache = await root.getDirectoryHandle('webnn-wgpu-graph-cache', { create: true });
    const list = async (name) => {
      const names = [];
      for await (const key of (await cache.getDirectoryHandle(name, { create: true })).keys()) names.push(key);
      return names.sort();
    };
    return { graphs: await list('graphs'), constants: await list('constants') };
  };
  window.errorName = async (promise) => {
    try {
      await promise;
      return 'resolved';
    } catch (e) {
      return `${e.name}: ${e.message}`;
    }
  };
};

try {
  const page = await openHarness(browser, url, 'graph_cache');
  await page.evaluate(setup);
  // First visit: build, run, save.
  const first = await withTimeout(page.evaluate(async () => {
    const out = [];
    const check = window.check(out);
    for (const key of await (await navigator.ml.createContext()).listGraphs()) (await navigator.ml.createContext()).deleteGraph(key);
    const context = await navigator.ml.createContext();
    const graph = await build(context);
    const results = await run(context, graph);
    const [y, z] = reference();
    const close = (got, want) => got.every((v, i) => Math.abs(v - want[i]) <= 1e-5 * Math.max(1, Math.abs(want[i])));
    check(close(results[0], y) && close(results[1], z), 'the graph agrees with the float64 reference');
    await graph.swapOut();
    check(await errorName(context.saveGraph('first', graph)) === 'resolved', 'saveGraph of a swapped-out graph resolves');
    check(JSON.stringify(await context.listGraphs()) === '["first"]', 'listGraphs', JSON.stringify(await context.listGraphs()));
    const files = await cacheFiles();
    check(files.graphs.length === 1 && files.constants.length === 3, 'one graph file, three constant files', JSON.stringify(files));
    check(JSON.stringify(graph.inputs) === '{"x":{"dataType":"float32","shape":[2,16]}}', 'MLGraph.inputs', JSON.stringify(graph.inputs));
    check(Object.keys(graph.outputs).join() === 'y,z' && Object.isFrozen(graph.outputs), 'MLGraph.outputs', JSON.stringify(graph.outputs));
    return { out, results };
  }), 120000, 'first visit');
  report(first.out);

  // Second visit: a reload, then loadGraph without building.
  await page.reload();
  await harnessReady(page);
  await page.evaluate(setup);
  const second = await withTimeout(page.evaluate(async (expected) => {
    const out = [];
    const check = window.check(out);
    const context = await navigator.ml.createContext();
    const started = performance.now();
    const graph = await context.loadGraph('first');
    const loadMs = performance.now() - started;
    check(graph instanceof MLGraph, 'loadGraph resolves to an MLGraph', `${loadMs.toFixed(1)} ms`);
    check(graph.residency === 'disk' && graph.deviceBytes === 0 && context.memoryInfo().deviceBytes === 0,
      'a loaded graph starts in the disk tier', `${graph.residency}, ${graph.deviceBytes} bytes`);
    const results = await run(context, graph);
    check(JSON.stringify(results) === JSON.stringify(expected), 'results after the reload are bit-identical to the first visit\'s');
    check(graph.residency === 'device' && context.memoryInfo().bytesStreamedFromDisk === 4 * (n * n + 2 * n),
      'the first dispatch streamed the constants from the cache', `${context.memoryInfo().bytesStreamedFromDisk} bytes`);
    await graph.swapOut({ to: 'disk' });
    check(JSON.stringify(await run(context, graph)) === JSON.stringify(expected), 'swapOut to disk and back: same results');
    check((await errorName(context.loadGraph('never saved'))).startsWith('NotFoundError'), 'an unknown key is a NotFoundError');

    // A second graph sharing w and the scale; deleting the first frees only its bias.
    const other = await build(context, { biasValues: new Float32Array(n).fill(0.25) });
    await context.saveGraph('second', other);
    let files = await cacheFiles();
    check(files.graphs.length === 2 && files.constants.length === 4, 'shared constants are stored once', JSON.stringify(files));
    context.deleteGraph('first');
    check(JSON.stringify(await context.listGraphs()) === '["second"]', 'deleteGraph removes the key');
    files = await cacheFiles();
    check(files.graphs.length === 1 && files.constants.length === 3, 'deleteGraph frees the constants no other graph uses', JSON.stringify(files));
    const second = await context.loadGraph('second');
    check(JSON.stringify(await run(context, second)) === JSON.stringify(await run(context, other)), 'the other graph still loads, same results');

    // Never a wrong result: another version, a truncated file, a lost constant.
    const root = await navigator.storage.getDirectory();
    const cache = await root.getDirectoryHandle('webnn-wgpu-graph-cache');
    const graphs = await cache.getDirectoryHandle('graphs');
    const [graphName] = (await cacheFiles()).graphs;
    const original = new Uint8Array(await (await (await graphs.getFileHandle(graphName)).getFile()).arrayBuffer());
    const rewrite = async (bytes) => {
      const w = await (await graphs.getFileHandle(graphName)).createWritable();
      await w.write(bytes);
      await w.close();
    };
    const text = new TextDecoder().decode(original);
    await rewrite(new TextEncoder().encode(text.replace(/"package":"[^"]*"/, '"package":"0.0.0-other"')));
    const version = await errorName(context.loadGraph('second'));
    check(version.startsWith('NotFoundError') && version.includes('0.0.0-other'), 'a record of another version is not found (build again)', version);
    await rewrite(original.subarray(0, original.length - 100));
    const truncated = await errorName(context.loadGraph('second'));
    check(truncated.startsWith('DataError') && truncated.includes('removed'), 'a truncated record is a DataError', truncated);
    check(JSON.stringify(await context.listGraphs()) === '[]', 'and its entry is removed');
    await context.saveGraph('second', other);
    check((await errorName(context.loadGraph('second'))) === 'resolved', 'saved again, it loads');
    const constants = await cache.getDirectoryHandle('constants');
    await constants.removeEntry((await cacheFiles()).constants[0]);
    const lost = await errorName(context.loadGraph('second'));
    check(lost.startsWith('NotFoundError') && lost.includes('missing'), 'a deleted constant file is a NotFoundError', lost);
    files = await cacheFiles();
    check(files.graphs.length === 0 && files.constants.length === 0, 'the broken entry and its files are removed', JSON.stringify(files));

    // A full quota: refused before writing, and a write that fails midway leaves nothing.
    const estimate = navigator.storage.estimate;
    navigator.storage.estimate = async () => ({ quota: 1000, usage: 900 });
    const early = await errorName(context.saveGraph('full', other));
    navigator.storage.estimate = estimate;
    check(early.startsWith('QuotaExceededError') && /needs \d+ bytes/.test(early), 'a quota too small is a QuotaExceededError naming the bytes', early);
    const createWritable = FileSystemFileHandle.prototype.createWritable;
    let writes = 0;
    FileSystemFileHandle.prototype.createWritable = async function (...args) {
      const writable = await createWritable.apply(this, args);
      if (++writes === 2) {
        await writable.abort();
        throw new DOMException('the quota is exhausted', 'QuotaExceededError');
      }
      return writable;
    };
    const midway = await errorName(context.saveGraph('full', other));
    FileSystemFileHandle.prototype.createWritable = createWritable;
    check(midway.startsWith('QuotaExceededError') && /needs \d+ bytes/.test(midway), 'a quota error while writing names the bytes', midway);
    files = await cacheFiles();
    check(files.graphs.length === 0 && files.constants.length === 0, 'and leaves no file behind', JSON.stringify(files));
    check(JSON.stringify(await context.listGraphs()) === '[]', 'and no entry');

    // Argument checks.
    check((await errorName(context.saveGraph('k', {}))).startsWith('TypeError'), 'saveGraph of a non-graph is a TypeError');
    other.destroy();
    check((await errorName(context.saveGraph('k', other))).startsWith('InvalidStateError'), 'saveGraph of a destroyed graph is an InvalidStateError');
    check((await errorName(context.loadGraph())).startsWith('TypeError'), 'loadGraph() without a key is a TypeError');

    // The CPU context: its own record, bit-identical after a load; a WebGPU record is not found there.
    const cpu = await navigator.ml.createContext({ accelerated: false });
    const onCpu = await build(cpu);
    const cpuResults = await run(cpu, onCpu);
    await cpu.saveGraph('cpu', onCpu);
    check(JSON.stringify(await run(cpu, await cpu.loadGraph('cpu'))) === JSON.stringify(cpuResults), 'a CPU graph loads with bit-identical results');
    if (new URLSearchParams(location.search).get('backend') !== 'cpu') {
      await context.saveGraph('gpu', await build(context));
      const across = await errorName(cpu.loadGraph('gpu'));
      check(across.startsWith('NotFoundError') && across.includes('webgpu'), 'a WebGPU record is not found on a CPU context', across);
    }
    for (const key of await context.listGraphs()) context.deleteGraph(key);
    check(JSON.stringify(await context.listGraphs()) === '[]', 'listGraphs waits for the deletions');
    check(JSON.stringify(await cacheFiles()) === '{"graphs":[],"constants":[]}', 'deleting every graph empties the cache');
    return out;
  }, first.results), 180000, 'second visit');
  report(second);
  console.log(`graph_cache: ${first.out.length + second.length - failed} passed, ${failed} failed`);
} catch (e) {
  failed++;
  console.log(`FAIL harness: ${e.message.split('\n')[0]}`);
} finally {
  await close();
}
process.exit(failed === 0 ? 0 : 1);
