// Device loss in headless Chromium: the GPUDevice behind an MLContext is destroyed (what a
// driver reset or a GPU process crash does). MLContext.lost must resolve with a message, a
// pending readTensor must reject with InvalidStateError, later calls must fail as the spec's
// steps say (the context's graphs and tensors are destroyed by the loss), and
// navigator.ml.createContext() must give a new context that computes. Also out of memory: a
// tensor over maxTensorByteLength is a TypeError, one of exactly maxTensorByteLength bytes is
// allocated (its last bytes written and read back by graphs), one over a memoryBudget a QuotaExceededError,
// and a GPU allocation failure (injected through testing.failNextAllocations) evicts the least
// recently dispatched graph and retries, or with nothing to evict is OperationError for
// build, QuotaExceededError for swapIn, UnknownError for createTensor and the read after a dispatch, never a wrong
// result; deviceBytes stays exact and the context keeps working.
import { start, openHarness, writeOut } from './browser.mjs';

const { browser, url, close } = await start();
let checks = [];
try {
  const page = await openHarness(browser, url, 'device_loss');
  checks = await page.evaluate(async () => {
    const { testing } = await import('/pkg/webnn.js');
    const results = [];
    const check = (name, ok, detail) => results.push({ name, ok: !!ok, detail: String(detail) });
    const outcome = async (f) => {
      try {
        await f();
        return 'ok';
      } catch (e) {
        return e instanceof DOMException ? e.name : e?.constructor?.name ?? String(e);
      }
    };
    const desc = { dataType: 'float32', shape: [4] };
    const graphOn = async (ctx, k = [1, 2, 3, 4]) => {
      const b = new MLGraphBuilder(ctx);
      const y = b.add(b.input('x', desc), b.constant(desc, new Float32Array(k)));
      return b.build({ y });
    };
    const ctx = await navigator.ml.createContext();
    const graph = await graphOn(ctx);
    const x = await ctx.createTensor({ ...desc, writable: true });
    const y = await ctx.createTensor({ ...desc, readable: true });
    ctx.writeTensor(x, new Float32Array([10, 10, 10, 10]));
    ctx.dispatch(graph, { x }, { y });
    const before = Array.from(new Float32Array(await ctx.readTensor(y)));
    check('computes before the loss', before.join() === '11,12,13,14', before);

    const builder = new MLGraphBuilder(ctx);
    const input = builder.input('x', desc);
    // Work in flight when the device goes: a dispatch and the read of its output.
    ctx.dispatch(graph, { x }, { y });
    const pending = ctx.readTensor(y).then(() => 'resolved', (e) => (e instanceof DOMException ? e.name : e.constructor.name));
    const device = testing.gpuDevice(ctx);
    check('the test hook reaches the GPUDevice', device && typeof device.destroy === 'function', device);
    device.destroy();

    const timeout = new Promise((resolve) => setTimeout(() => resolve(null), 10000));
    const info = await Promise.race([ctx.lost, timeout]);
    check('lost resolves with a message', info && typeof info.message === 'string' && info.message.length > 0, info?.message);
    check('the pending readTensor rejects with InvalidStateError', (await pending) === 'InvalidStateError', await pending);
    check('readTensor afterwards rejects with TypeError (the tensor is destroyed)',
      (await outcome(() => ctx.readTensor(y))) === 'TypeError', await outcome(() => ctx.readTensor(y)));
    check('writeTensor afterwards throws TypeError',
      (await outcome(() => ctx.writeTensor(x, new Float32Array(4)))) === 'TypeError', await outcome(() => ctx.writeTensor(x, new Float32Array(4))));
    check('dispatch afterwards throws InvalidStateError (the graph is destroyed)',
      (await outcome(() => ctx.dispatch(graph, { x }, { y }))) === 'InvalidStateError', await outcome(() => ctx.dispatch(graph, { x }, { y })));
    check('createTensor afterwards rejects with InvalidStateError',
      (await outcome(() => ctx.createTensor(desc))) === 'InvalidStateError', await outcome(() => ctx.createTensor(desc)));
    check('createConstantTensor afterwards rejects with InvalidStateError',
      (await outcome(() => ctx.createConstantTensor(desc, new Float32Array(4)))) === 'InvalidStateError', '');
    check('new MLGraphBuilder afterwards throws InvalidStateError',
      (await outcome(() => new MLGraphBuilder(ctx))) === 'InvalidStateError', await outcome(() => new MLGraphBuilder(ctx)));
    check('an existing builder\'s operator throws InvalidStateError',
      (await outcome(() => builder.relu(input))) === 'InvalidStateError', await outcome(() => builder.relu(input)));
    check('an existing builder\'s build rejects with InvalidStateError',
      (await outcome(() => builder.build({ out: input }))) === 'InvalidStateError', await outcome(() => builder.build({ out: input })));
    check('destroy() of the lost context is a no-op', (await outcome(() => ctx.destroy())) === 'ok', '');

    const fresh = await navigator.ml.createContext();
    const g2 = await graphOn(fresh);
    const x2 = await fresh.createTensor({ ...desc, writable: true });
    const y2 = await fresh.createTensor({ ...desc, readable: true });
    fresh.writeTensor(x2, new Float32Array([1, 1, 1, 1]));
    fresh.dispatch(g2, { x: x2 }, { y: y2 });
    const after = Array.from(new Float32Array(await fresh.readTensor(y2)));
    check('a new context computes', after.join() === '2,3,4,5', after);
    fresh.destroy();

    // Out of memory: a tensor over the adapter's limit is a TypeError at createTensor, and an
    // allocation over a memory budget a QuotaExceededError; the context keeps working.
    const budgeted = await navigator.ml.createContext({ memoryBudget: 4096 });
    const max = budgeted.opSupportLimits().maxTensorByteLength;
    const huge = { dataType: 'float32', shape: [Math.min(2 ** 31 - 1, Math.floor(max / 4) + 1)] };
    const hugeOutcome = await outcome(() => budgeted.createTensor(huge));
    check(`a tensor over maxTensorByteLength (${max}) rejects with TypeError`, huge.shape[0] * 4 <= max || hugeOutcome === 'TypeError', hugeOutcome);
    const big = { dataType: 'float32', shape: [768], readable: true, writable: true };
    const first = await budgeted.createTensor(big);
    const overBudget = await outcome(() => budgeted.createTensor(big));
    check('a tensor over the memoryBudget rejects with QuotaExceededError', overBudget === 'QuotaExceededError', overBudget);
    first.destroy();
    const again = await outcome(() => budgeted.createTensor(big));
    check('once memory is freed the same tensor is created', again === 'ok', again);
    const g3 = await graphOn(budgeted);
    const x3 = await budgeted.createTensor({ ...desc, writable: true });
    const y3 = await budgeted.createTensor({ ...desc, readable: true });
    budgeted.writeTensor(x3, new Float32Array([2, 2, 2, 2]));
    budgeted.dispatch(g3, { x: x3 }, { y: y3 });
    const computed = Array.from(new Float32Array(await budgeted.readTensor(y3)));
    check('the budgeted context computes', computed.join() === '3,4,5,6', computed);
    budgeted.destroy();

    // GPU out of memory, injected: these one-operator graphs hold only their 16-byte constant.
    const oom = await navigator.ml.createContext();
    const ox = await oom.createTensor({ ...desc, writable: true });
    const oy = await oom.createTensor({ ...desc, readable: true, writable: true });
    oom.writeTensor(ox, new Float32Array([1, 1, 1, 1]));
    const compute = async (g) => {
      oom.dispatch(g, { x: ox }, { y: oy });
      return Array.from(new Float32Array(await oom.readTensor(oy))).join();
    };
    let tensorBytes = 32;
    const exact = (graphs) => oom.memoryInfo().deviceBytes === tensorBytes + graphs.reduce((n, g) => n + g.deviceBytes, 0);
    const oa = await graphOn(oom, [1, 2, 3, 4]);
    const ob = await graphOn(oom, [10, 20, 30, 40]);
    check('graphs compute before the failures', (await compute(oa)) === '2,3,4,5' && (await compute(ob)) === '11,21,31,41', '');
    testing.failNextAllocations(oom, 1);
    let oc;
    const gc = await outcome(async () => { oc = await graphOn(oom, [100, 200, 300, 400]); });
    check('build() with the GPU out of memory evicts the least recently used graph and succeeds',
      gc === 'ok' && oa.residency === 'host' && ob.residency === 'device' && oc.residency === 'device', `${gc} ${oa.residency} ${ob.residency}`);
    check('deviceBytes is exact after the retried build', exact([oa, ob, oc]), oom.memoryInfo().deviceBytes);
    check('the new graph computes', (await compute(oc)) === '101,201,301,401', '');
    testing.failNextAllocations(oom, 1);
    const swapped = await compute(oa);
    check('a dispatch that swaps in with the GPU out of memory evicts and computes',
      swapped === '2,3,4,5' && oa.residency === 'device' && ob.residency === 'host', `${swapped} ${ob.residency}`);
    // A tensor of a size not read yet: its read needs a new staging buffer (reads of a size read
    // before reuse one).
    const oz = await oom.createTensor({ dataType: 'float32', shape: [8], readable: true, writable: true });
    oom.writeTensor(oz, new Float32Array(8).fill(3));
    tensorBytes += 32;
    testing.failNextAllocations(oom, 1e6);
    const builds = await outcome(() => graphOn(oom));
    check('build() with nothing left to evict rejects with OperationError', builds === 'OperationError', builds);
    const swapIn = await outcome(() => ob.swapIn());
    check('swapIn() with nothing left to evict rejects with QuotaExceededError', swapIn === 'QuotaExceededError' && ob.residency === 'host', swapIn);
    const tensor = await outcome(() => oom.createTensor(desc));
    check('createTensor() with the GPU out of memory rejects with UnknownError', tensor === 'UnknownError', tensor);
    oom.writeTensor(oy, new Float32Array([7, 7, 7, 7]));
    const read = await outcome(() => compute(ob));
    const staging = await outcome(() => oom.readTensor(oz));
    check('readTensor() with the GPU out of memory (its staging buffer) rejects with UnknownError', staging === 'UnknownError', staging);
    testing.failNextAllocations(oom, 0);
    const kept = Array.from(new Float32Array(await oom.readTensor(oy))).join();
    check('a dispatch that cannot swap in is not run: its read rejects with UnknownError, the output keeps its bytes',
      read === 'UnknownError' && kept === '7,7,7,7', `${read} ${kept}`);
    check('deviceBytes is exact after the failures', exact([oa, ob, oc]), oom.memoryInfo().deviceBytes);
    const recovered = [await compute(oa), await compute(ob), await compute(oc)].join(' ');
    check('with memory again every graph computes', recovered === '2,3,4,5 11,21,31,41 101,201,301,401', recovered);
    check('deviceBytes is exact at the end', exact([oa, ob, oc]), oom.memoryInfo().deviceBytes);
    oom.destroy();

    // A tensor of exactly maxTensorByteLength bytes is allocated: a graph writes its last bytes
    // (pad of a 4-byte input to the whole length) and another reads them back (a slice of the
    // last 8), so no buffer of that size passes through JavaScript or wasm memory. One element
    // more is a TypeError.
    const wide = await navigator.ml.createContext();
    const limit = wide.opSupportLimits().maxTensorByteLength;
    const u8 = (shape) => ({ dataType: 'uint8', shape });
    const over = await outcome(() => wide.createTensor({ ...u8([limit + 1]), readable: true }));
    check(`createTensor of maxTensorByteLength (${limit}) + 1 bytes rejects with TypeError`, over === 'TypeError', over);
    let whole;
    const exactly = await outcome(async () => { whole = await wide.createTensor({ ...u8([limit]), readable: true, writable: true }); });
    check(`createTensor of exactly maxTensorByteLength (${limit}) bytes resolves`, exactly === 'ok', exactly);
    if (whole) {
      const wb = new MLGraphBuilder(wide);
      const fill = await wb.build({ whole: wb.pad(wb.input('end', u8([4])), [limit - 4], [0]) });
      const rb = new MLGraphBuilder(wide);
      const tail = await rb.build({ tail: rb.slice(rb.input('whole', u8([limit])), [limit - 8], [8]) });
      const end = await wide.createTensor({ ...u8([4]), writable: true });
      const last = await wide.createTensor({ ...u8([8]), readable: true });
      wide.writeTensor(end, new Uint8Array([1, 2, 3, 250]));
      wide.dispatch(fill, { end }, { whole });
      wide.dispatch(tail, { whole }, { tail: last });
      const bytes = Array.from(new Uint8Array(await wide.readTensor(last))).join();
      check('its last bytes are written and read back by graphs', bytes === '0,0,0,0,1,2,3,250', bytes);
      for (const o of [fill, tail, end, last, whole]) o.destroy();
    }
    wide.destroy();
    const destroyed = await Promise.race([fresh.lost, timeout]);
    check('destroy() resolves lost with a message', destroyed && destroyed.message.length > 0, destroyed?.message);
    return results;
  });
} catch (e) {
  checks.push({ name: 'harness', ok: false, detail: e.message.split('\n')[0] });
} finally {
  await close();
}
for (const c of checks) console.log(`${c.ok ? 'ok  ' : 'FAIL'} ${c.name}: ${c.detail}`);
writeOut('device_loss.json', checks);
const failed = checks.filter((c) => !c.ok).length;
console.log(`device_loss: ${checks.length - failed} passed, ${failed} failed`);
process.exit(failed === 0 && checks.length >= 30 ? 0 : 1);
