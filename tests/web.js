// Browser tests of the WebNN JavaScript API (driven by tests/web.rs). Each test uses only the
// standard globals that install() defines, as a page would, and throws on failure.

function assert(condition, message) {
  if (!condition) throw new Error(`assertion failed: ${message}`);
}

function assertArrayEquals(actual, expected, message) {
  const a = Array.from(actual);
  const e = Array.from(expected);
  assert(a.length === e.length && a.every((x, i) => Object.is(x, e[i])), `${message}: got [${a}], expected [${e}]`);
}

// Runs `f` and checks it throws synchronously an error of constructor `type` and `name`.
function assertThrows(f, name, message) {
  let error;
  try {
    f();
  } catch (e) {
    error = e;
  }
  assert(error !== undefined, `${message}: nothing thrown`);
  assert(error.name === name, `${message}: threw ${error.name} (${error.message}), expected ${name}`);
  if (name !== 'TypeError') assert(error instanceof DOMException, `${message}: ${name} is not a DOMException`);
  return error;
}

async function assertRejects(promise, name, message) {
  let error;
  try {
    await promise;
  } catch (e) {
    error = e;
  }
  assert(error !== undefined, `${message}: did not reject`);
  assert(error.name === name, `${message}: rejected with ${error.name} (${error.message}), expected ${name}`);
  if (name !== 'TypeError') assert(error instanceof DOMException, `${message}: ${name} is not a DOMException`);
  return error;
}

async function tensors(context, graphInputs, outputDescriptor) {
  const inputs = {};
  for (const [name, { descriptor, data }] of Object.entries(graphInputs)) {
    inputs[name] = await context.createTensor({ ...descriptor, writable: true });
    context.writeTensor(inputs[name], data);
  }
  const output = await context.createTensor({ ...outputDescriptor, readable: true });
  return { inputs, output };
}

export async function buildDispatchRead() {
  assert(typeof navigator.ml.createContext === 'function', 'navigator.ml.createContext exists');
  const context = await navigator.ml.createContext({ powerPreference: 'low-power' });
  assert(context instanceof MLContext, 'createContext resolves to an MLContext');
  assert(typeof context.accelerated === 'boolean', 'accelerated is a boolean');
  const builder = new MLGraphBuilder(context);
  const desc = { dataType: 'float32', shape: [2, 3] };
  const a = builder.input('a', desc);
  const b = builder.input('b', desc);
  assert(a instanceof MLOperand && a.dataType === 'float32', 'input operand');
  assertArrayEquals(a.shape, [2, 3], 'input shape');
  assert(Object.isFrozen(a.shape) && a.shape === a.shape, 'shape is a FrozenArray');
  // c = transpose((a * b + [10, 20, 30]) - 0.5) with a broadcast constant and a scalar constant.
  const bias = builder.constant({ dataType: 'float32', shape: [3] }, new Float32Array([10, 20, 30]));
  const half = builder.constant('float32', 0.5);
  assertArrayEquals(half.shape, [], 'scalar constant shape');
  const sum = builder.add(builder.mul(a, b, { label: 'product' }), bias);
  const c = builder.transpose(builder.sub(sum, half));
  assertArrayEquals(c.shape, [3, 2], 'transpose output shape');
  const [left, right] = builder.split(a, [1, 2], { axis: 1 });
  assertArrayEquals(right.shape, [2, 2], 'split output shape');
  const graph = await builder.build({ c, right });
  assert(graph instanceof MLGraph, 'build resolves to an MLGraph');
  assert(left instanceof MLOperand, 'split returns operands');

  const { inputs, output } = await tensors(context, {
    a: { descriptor: desc, data: new Float32Array([1, 2, 3, 4, 5, 6]) },
    b: { descriptor: desc, data: new Float32Array([2, 2, 2, -1, -1, -1]).buffer },
  }, { dataType: 'float32', shape: [3, 2] });
  const rightOut = await context.createTensor({ dataType: 'float32', shape: [2, 2], readable: true });
  assert(output.readable && !output.writable && !output.constant, 'tensor flags');
  context.dispatch(graph, inputs, { c: output, right: rightOut });

  // a * b + bias - 0.5 = [[11.5, 23.5, 35.5], [5.5, 14.5, 23.5]], transposed.
  const result = new Float32Array(await context.readTensor(output));
  assertArrayEquals(result, [11.5, 5.5, 23.5, 14.5, 35.5, 23.5], 'c');
  const byob = new Float32Array(4);
  assert(await context.readTensor(rightOut, byob) === undefined, 'readTensor(tensor, outputData) resolves undefined');
  assertArrayEquals(byob, [2, 3, 5, 6], 'right');
  // A Uint8Array view is accepted for any data type.
  const bytes = new Uint8Array(16);
  await context.readTensor(rightOut, bytes);
  assertArrayEquals(new Float32Array(bytes.buffer), [2, 3, 5, 6], 'right through Uint8Array');

  // A constant tensor shared through constant(tensor).
  const constantTensor = await context.createConstantTensor({ dataType: 'int32', shape: [2] }, new Int32Array([7, -8]));
  assert(constantTensor.constant && !constantTensor.readable, 'constant tensor flags');
  const builder2 = new MLGraphBuilder(context);
  const x = builder2.input('x', { dataType: 'int32', shape: [2] });
  // MLNumber accepts a bigint.
  const three = builder2.constant('int32', 3n);
  const graph2 = await builder2.build({ y: builder2.sub(builder2.mul(x, builder2.constant(constantTensor)), three) });
  const { inputs: in2, output: out2 } = await tensors(context, {
    x: { descriptor: { dataType: 'int32', shape: [2] }, data: new Int32Array([3, 4]) },
  }, { dataType: 'int32', shape: [2] });
  context.dispatch(graph2, in2, { y: out2 });
  assertArrayEquals(new Int32Array(await context.readTensor(out2)), [18, -35], 'constant tensor product');
  // The graph keeps the constant tensor's bytes after destroy() (the spec's note on dispatch).
  constantTensor.destroy();
  context.dispatch(graph2, in2, { y: out2 });
  assertArrayEquals(new Int32Array(await context.readTensor(out2)), [18, -35], 'after the constant tensor is destroyed');
  // SharedArrayBuffer sources, where the page may create them (cross-origin isolated).
  if (typeof SharedArrayBuffer === 'function') {
    const shared = new Int32Array(new SharedArrayBuffer(8));
    shared.set([1, 2]);
    context.writeTensor(in2.x, shared);
    context.dispatch(graph2, in2, { y: out2 });
    const sharedOut = new Int32Array(new SharedArrayBuffer(8));
    await context.readTensor(out2, sharedOut);
    assertArrayEquals(sharedOut, [4, -19], 'through SharedArrayBuffers');
  }

  const limits = context.opSupportLimits();
  assert(limits.maxTensorByteLength > 0, 'maxTensorByteLength');
  assert(limits.add.a.dataTypes.includes('float32'), 'add limits');
  assert(typeof limits.input.rankRange.max === 'number', 'input rank range');
}

export async function float16ViaUint16Array() {
  const context = await navigator.ml.createContext();
  const builder = new MLGraphBuilder(context);
  const desc = { dataType: 'float16', shape: [4] };
  const x = builder.input('x', desc);
  // float16 bits: 1.0 = 0x3c00, 2.0 = 0x4000, 0.5 = 0x3800, -3.0 = 0xc200, 0.25 = 0x3400.
  const constant = builder.constant(desc, new Uint16Array([0x3c00, 0x3c00, 0x4000, 0x3400]));
  const graph = await builder.build({ y: builder.add(x, constant) });
  const { inputs, output } = await tensors(context, {
    x: { descriptor: desc, data: new Uint16Array([0x3c00, 0x3800, 0xc200, 0x3400]) },
  }, desc);
  context.dispatch(graph, inputs, { y: output });
  // [1 + 1, 0.5 + 1, -3 + 2, 0.25 + 0.25] = [2, 1.5, -1, 0.5].
  const bits = new Uint16Array(4);
  await context.readTensor(output, bits);
  assertArrayEquals(bits, [0x4000, 0x3e00, 0xbc00, 0x3800], 'float16 sum bits');
  // Float32Array data for a float16 operand does not match the type.
  assertThrows(() => builder.constant(desc, new Float32Array(2)), 'InvalidStateError', 'constant after build');
  const builder2 = new MLGraphBuilder(context);
  assertThrows(() => builder2.constant(desc, new Float32Array(2)), 'TypeError', 'Float32Array for float16');
  assertThrows(() => context.writeTensor(inputs.x, new Int16Array(4)), 'TypeError', 'Int16Array for float16');
  if (typeof Float16Array === 'function') {
    context.writeTensor(inputs.x, new Float16Array([1, 2, 3, 4]));
  }
}

export async function errorTypes() {
  const context = await navigator.ml.createContext();
  const builder = new MLGraphBuilder(context);
  assertThrows(() => new MLContext(), 'TypeError', 'MLContext is not constructible');
  assertThrows(() => new MLGraphBuilder({}), 'TypeError', 'MLGraphBuilder of a non-context');
  assertThrows(() => builder.input('x', { dataType: 'float32', shape: [2, 0] }), 'TypeError', 'zero dimension');
  assertThrows(() => builder.input('x', { dataType: 'float32', shape: [-1] }), 'TypeError', 'negative dimension');
  assertThrows(() => builder.input('x', { dataType: 'float32', shape: [1.5e10] }), 'TypeError', 'dimension out of range');
  assertThrows(() => builder.input('x', { dataType: 'float64', shape: [2] }), 'TypeError', 'unknown data type');
  assertThrows(() => builder.input('x', { shape: [2] }), 'TypeError', 'missing dataType');
  assertThrows(() => builder.input('', { dataType: 'float32', shape: [2] }), 'TypeError', 'empty name');
  const a = builder.input('a', { dataType: 'float32', shape: [2, 3] });
  const b = builder.input('b', { dataType: 'float32', shape: [4] });
  assertThrows(() => builder.input('a', { dataType: 'float32', shape: [2] }), 'TypeError', 'duplicate input name');
  assertThrows(() => builder.add(a, b), 'TypeError', 'add of shapes that do not broadcast');
  assertThrows(() => builder.add(a), 'TypeError', 'add with one argument');
  assertThrows(() => builder.add(a, {}), 'TypeError', 'add of a non-operand');
  assertThrows(() => builder.reshape(a, [5]), 'TypeError', 'reshape to another element count');
  assertThrows(() => builder.transpose(a, { permutation: [0, 0] }), 'TypeError', 'transpose with a bad permutation');
  assertThrows(() => builder.slice(a, [0, 0], [1, 4]), 'TypeError', 'slice out of bounds');
  assertThrows(() => builder.constant({ dataType: 'float32', shape: [2] }, new Float32Array(3)), 'TypeError', 'constant of the wrong size');
  assertThrows(() => builder.constant({ dataType: 'float32', shape: [2] }, [1, 2]), 'TypeError', 'constant of a plain array');
  const other = new MLGraphBuilder(context);
  assertThrows(() => other.relu(a), 'TypeError', 'operand of another builder');
  await assertRejects(builder.build({}), 'TypeError', 'build without outputs');
  const builder2 = new MLGraphBuilder(context);
  const x = builder2.input('x', { dataType: 'float32', shape: [2] });
  await assertRejects(builder2.build({ x }), 'TypeError', 'build of an input as output');
  const y = builder2.neg(x);
  const graph = await builder2.build({ y });
  await assertRejects(builder2.build({ y }), 'InvalidStateError', 'second build');
  assertThrows(() => builder2.neg(x), 'InvalidStateError', 'operator after build');

  const t = await context.createTensor({ dataType: 'float32', shape: [2], writable: true, readable: true });
  const wrong = await context.createTensor({ dataType: 'float32', shape: [3], readable: true });
  assertThrows(() => context.dispatch(graph, { x: t }, { y: wrong }), 'TypeError', 'dispatch with the wrong shape');
  assertThrows(() => context.dispatch(graph, { x: t }, { y: t }), 'TypeError', 'dispatch with a tensor twice');
  assertThrows(() => context.writeTensor(wrong, new Float32Array(3)), 'TypeError', 'write to a tensor that is not writable');
  await assertRejects(context.readTensor(t, new Float32Array(3)), 'TypeError', 'readTensor into a buffer of the wrong size');

  // Destroyed objects.
  const pending = context.readTensor(t);
  t.destroy();
  await assertRejects(pending, 'InvalidStateError', 'read pending at destroy()');
  await assertRejects(context.readTensor(t), 'TypeError', 'read of a destroyed tensor');
  graph.destroy();
  assertThrows(() => context.dispatch(graph, { x: t }, { y: wrong }), 'InvalidStateError', 'dispatch of a destroyed graph');
  await assertRejects(graph.swapIn(), 'InvalidStateError', 'swapIn of a destroyed graph');
  await assertRejects(graph.swapOut(), 'InvalidStateError', 'swapOut of a destroyed graph');
  await assertRejects(graph.swapOut({ to: 'gpu' }), 'TypeError', 'swapOut to an unknown tier');

  const builder3 = new MLGraphBuilder(context);
  context.destroy();
  const info = await context.lost;
  assert(typeof info.message === 'string', 'lost resolves with a message');
  assert(context.lost === context.lost, 'lost is the same promise');
  await assertRejects(context.createTensor({ dataType: 'float32', shape: [2] }), 'InvalidStateError', 'createTensor after destroy');
  assertThrows(() => new MLGraphBuilder(context), 'InvalidStateError', 'MLGraphBuilder of a destroyed context');
  assertThrows(() => builder3.input('x', { dataType: 'float32', shape: [2] }), 'InvalidStateError', 'input() after destroy');

  await assertRejects(navigator.ml.createContext({ powerPreference: 'fast' }), 'TypeError', 'unknown powerPreference');
  if (navigator.gpu) {
    const adapter = await navigator.gpu.requestAdapter();
    if (adapter) {
      const device = await adapter.requestDevice();
      await assertRejects(navigator.ml.createContext(device), 'NotSupportedError', 'createContext(gpuDevice)');
      device.destroy();
    }
  }
}

// Builds y = x + w + w2 with two 1 KiB constants and returns what a dispatch reads.
async function constantGraph(context) {
  const builder = new MLGraphBuilder(context);
  const desc = { dataType: 'float32', shape: [256] };
  const w = new Float32Array(256).map((_, i) => Math.sin(i) * 1000);
  const w2 = new Float32Array(256).map((_, i) => 1 / (i + 1));
  const x = builder.input('x', desc);
  const y = builder.add(builder.add(x, builder.constant(desc, w)), builder.constant(desc, w2));
  const graph = await builder.build({ y });
  const { inputs, output } = await tensors(context, {
    x: { descriptor: desc, data: new Float32Array(256).map((_, i) => i * 0.37) },
  }, desc);
  const run = async () => {
    context.dispatch(graph, inputs, { y: output });
    return new Uint8Array(await context.readTensor(output));
  };
  return { graph, run };
}

export async function swapRoundTrip() {
  const context = await navigator.ml.createContext();
  const { graph, run } = await constantGraph(context);
  const before = await run();
  assert(graph.residency === 'device', `residency after build: ${graph.residency}`);
  assert(graph.deviceBytes === 2048, `graph.deviceBytes: ${graph.deviceBytes}`);
  assert(graph.hostBytes === 2048, `graph.hostBytes: ${graph.hostBytes}`);
  const resident = context.memoryInfo();
  for (const key of ['deviceBytes', 'hostBytes', 'budgetBytes', 'swapIns', 'swapOuts', 'bytesUploaded', 'bytesStreamedFromDisk']) {
    assert(key in resident, `memoryInfo().${key}`);
  }

  assert(await graph.swapOut() === undefined, 'swapOut resolves undefined');
  const out = context.memoryInfo();
  assert(graph.residency === 'host', `residency after swapOut: ${graph.residency}`);
  assert(graph.deviceBytes === 0, `graph.deviceBytes after swapOut: ${graph.deviceBytes}`);
  assert(out.deviceBytes <= resident.deviceBytes - 2048, `memoryInfo().deviceBytes ${resident.deviceBytes} -> ${out.deviceBytes}`);
  assert(out.swapOuts === resident.swapOuts + 1, 'swapOuts counted');

  await graph.swapIn();
  const back = context.memoryInfo();
  assert(graph.residency === 'device', `residency after swapIn: ${graph.residency}`);
  assert(back.deviceBytes === resident.deviceBytes, `memoryInfo().deviceBytes back to ${resident.deviceBytes}: ${back.deviceBytes}`);
  assert(back.swapIns === out.swapIns + 1, 'swapIns counted');
  assertArrayEquals(await run(), before, 'result after swapIn is bit-identical');

  // Dispatch of a swapped-out graph swaps it in first.
  await graph.swapOut({ to: 'host' });
  assertArrayEquals(await run(), before, 'result of a dispatch while swapped out');
  assert(graph.residency === 'device', 'dispatch made the graph resident');
  await assertRejects(graph.swapOut({ to: 'disk' }), 'TypeError', 'swapOut to disk without a weight file');
}

export async function quotaExceeded() {
  const context = await navigator.ml.createContext({ memoryBudget: 1024 });
  assert(context.memoryInfo().budgetBytes === 1024, 'budgetBytes');
  const error = await assertRejects(constantGraph(context), 'QuotaExceededError', 'graph larger than the budget');
  assert(/1024/.test(error.message), `the message names the budget: ${error.message}`);
  await assertRejects(navigator.ml.createContext({ memoryBudget: -1 }), 'TypeError', 'negative memoryBudget');
}

export async function installLeavesPolyfillInPlace() {
  const ml = navigator.ml;
  assert(Object.prototype.toString.call(ml) === '[object ML]', 'navigator.ml is an ML');
  for (const name of ['ML', 'MLContext', 'MLGraphBuilder', 'MLOperand', 'MLGraph', 'MLTensor']) {
    assert(typeof globalThis[name] === 'function', `${name} is defined`);
  }
  for (const name of ['add', 'matmul', 'gemm', 'conv2d', 'reduceMean', 'layerNormalization', 'where', 'cast']) {
    assert(typeof MLGraphBuilder.prototype[name] === 'function', `MLGraphBuilder.prototype.${name}`);
  }
}

// Distance in float32 ULPs (both values finite or equal).
function ulp32(a, b) {
  if (Object.is(a, b)) return 0;
  const bits = new Int32Array(new Float32Array([a, b]).buffer);
  const lin = (x) => (x < 0 ? -(x & 0x7fffffff) : x);
  return Math.abs(lin(bits[0]) - lin(bits[1]));
}

// One unary-op graph over `values`: the outputs as numbers.
async function unary(context, op, dataType, values, options) {
  const Ctor = dataType === 'float16' ? Float16Array : Float32Array;
  const builder = new MLGraphBuilder(context);
  const desc = { dataType, shape: options?.shape ?? [values.length] };
  const y = op(builder, builder.input('x', desc));
  const graph = await builder.build({ y });
  const { inputs, output } = await tensors(context, { x: { descriptor: desc, data: new Ctor(values) } },
    { dataType, shape: y.shape });
  context.dispatch(graph, inputs, { y: output });
  return Array.from(new Ctor(await context.readTensor(output)));
}

// The GPU's own log, tan and exp differ between adapters (SwiftShader's log(0) is finite, its tan
// loses digits next to the poles): the kernels must give IEEE's special values and stay within a
// few ULP of the float64 values on this adapter too.
export async function specialValues() {
  const context = await navigator.ml.createContext();
  for (const dataType of ['float32', 'float16']) {
    const log = await unary(context, (b, x) => b.log(x), dataType, [0, -0, -1, Infinity, 1]);
    assertArrayEquals(log.map((v) => (Number.isNaN(v) ? 'NaN' : v)), [-Infinity, -Infinity, 'NaN', Infinity, 0],
      `${dataType} log`);
    const sums = await unary(context, (b, x) => b.reduceLogSum(x, { axes: [1] }), dataType,
      [0, 0, 0, 2.5, -1.5, -1], { shape: [2, 3] });
    assertArrayEquals(sums, [-Infinity, -Infinity], `${dataType} reduceLogSum of sums 0`);
  }
  const poles = [1.6, 4.7, -1.5, 1.5707, -1.5709];
  for (let k = -63; k <= 63; k += 2) {
    for (const d of [0.1, 1e-2, 1e-3, 1e-4]) poles.push(k * Math.PI / 2 + d, k * Math.PI / 2 - d);
  }
  const tan = await unary(context, (b, x) => b.tan(x), 'float32', poles);
  poles.forEach((x, i) => {
    const want = Math.fround(Math.tan(Math.fround(x)));
    assert(ulp32(tan[i], want) <= 4, `tan(${Math.fround(x)}) = ${tan[i]}, expected ${want}`);
  });
  const xs = Array.from({ length: 2001 }, (_, i) => -87 + 175.7 * i / 2000);
  const exp = await unary(context, (b, x) => b.exp(x), 'float32', xs);
  xs.forEach((x, i) => {
    const want = Math.fround(Math.exp(Math.fround(x)));
    assert(ulp32(exp[i], want) <= 32 || Math.abs(exp[i] - want) < 1.2e-38, `exp(${Math.fround(x)}) = ${exp[i]}, expected ${want}`);
  });
}
