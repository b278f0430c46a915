// The WebNN interfaces (ML, MLContext, MLGraphBuilder, MLOperand, MLGraph, MLTensor, and the
// MLWeightFile extension) over the webnn-wgpu wasm backend. This file does what WebIDL bindings
// do -- argument conversion with the spec's names, defaults and TypeErrors, overload resolution,
// internal slots -- and hands the converted values to the Rust handles (src/api), which validate
// with the spec's steps and throw TypeError or DOMException. It is a wasm-bindgen snippet of the
// crate: it must not import other files, and the build exposes it as pkg/webnn.js.

const INTERNAL = Symbol('webnn-wgpu');

const DATA_TYPES = ['float32', 'float16', 'int32', 'uint32', 'int64', 'uint64', 'int8', 'uint8'];
const BYTES_PER_ELEMENT = { float32: 4, float16: 2, int32: 4, uint32: 4, int64: 8, uint64: 8, int8: 1, uint8: 1 };
// The spec's MLOperandDataType / ArrayBufferView table; Uint8Array matches every type, and
// Uint16Array carries float16 bits where Float16Array is missing (the spec's note).
const VIEW_TYPES = {
  float32: ['Float32Array'],
  float16: ['Float16Array', 'Uint16Array'],
  int32: ['Int32Array'],
  uint32: ['Uint32Array'],
  int64: ['BigInt64Array'],
  uint64: ['BigUint64Array'],
  int8: ['Int8Array'],
  uint8: ['Uint8Array'],
};

// Internal slots of every object, keyed by the object: the brand check of each interface.
const slots = new WeakMap();

function slotOf(value, kind, what) {
  const slot = slots.get(Object(value));
  if (slot === undefined || slot.kind !== kind) {
    throw new TypeError(`${what} is not an ${kind}`);
  }
  return slot;
}

function domException(name, message) {
  return new DOMException(message, name);
}

// ---- WebIDL conversions ----

function toDictionary(value, what) {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' && typeof value !== 'function') {
    throw new TypeError(`${what} must be a dictionary`);
  }
  return value;
}

// A dictionary's members as WebIDL converts them: each read once, in code-unit order of the
// names (an inherited dictionary's members come first: callers read those before), and
// converted as it is read. `members` maps a name to [convert, default]; an undefined member
// gets the default.
function readMembers(value, what, members) {
  const dictionary = toDictionary(value, what);
  const values = {};
  for (const key of Object.keys(members).sort()) {
    const [convert, fallback] = members[key];
    const v = dictionary[key];
    values[key] = v === undefined ? fallback : convert(v, `${what}.${key}`);
  }
  return values;
}

// WebIDL's ToString of a Symbol, and ToNumber of a Symbol or a BigInt, throw a TypeError (also
// when an object converts to one, e.g. an array holding a Symbol): thrown here, naming the
// argument, rather than by the engine.
function convertPrimitive(value, what, kind, convert) {
  try {
    return convert(value);
  } catch (e) {
    if (e instanceof TypeError) throw new TypeError(`${what} cannot be converted to a ${kind}: ${e.message}`);
    throw e;
  }
}

function primitiveString(value, what) {
  if (typeof value === 'symbol') throw new TypeError(`${what} is a Symbol, which is not a string`);
  return convertPrimitive(value, what, 'string', (v) => `${v}`);
}

function toNumber(value, what) {
  if (typeof value === 'symbol' || typeof value === 'bigint') {
    throw new TypeError(`${what} is a ${typeof value === 'symbol' ? 'Symbol' : 'BigInt'}, which is not a number`);
  }
  return convertPrimitive(value, what, 'number', (v) => +v);
}

function toString(value, what) {
  const s = primitiveString(value, what);
  return typeof s.toWellFormed === 'function' ? s.toWellFormed() : s;
}

function toEnum(value, values, what) {
  const s = primitiveString(value, what);
  if (!values.includes(s)) {
    throw new TypeError(`${what}: '${s}' is not one of ${values.map((v) => `'${v}'`).join(', ')}`);
  }
  return s;
}

function toFiniteNumber(value, what) {
  const x = toNumber(value, what);
  if (!Number.isFinite(x)) throw new TypeError(`${what} must be a finite number`);
  return x;
}

// [EnforceRange] integers.
function enforceRange(value, min, max, what) {
  const x = Math.trunc(toFiniteNumber(value, what)) + 0;
  if (x < min || x > max) throw new TypeError(`${what} is out of range: ${x}`);
  return x;
}

const CONVERT = {
  ulong: (v, what) => enforceRange(v, 0, 0xffffffff, what),
  long: (v, what) => enforceRange(v, -0x80000000, 0x7fffffff, what),
  // unsigned long without [EnforceRange]: ECMAScript ToUint32.
  uint: (v, what) => toNumber(v, what) >>> 0,
  double: toFiniteNumber,
  float: (v, what) => {
    const x = Math.fround(toFiniteNumber(v, what));
    if (!Number.isFinite(x)) throw new TypeError(`${what} is out of the float range`);
    return x;
  },
  boolean: (v) => !!v,
  // MLNumber is (bigint or unrestricted double): WebIDL's ToNumeric (unary minus applies it),
  // so an object whose valueOf gives a bigint is a bigint; a bigint reaches the backend exact.
  // A Symbol (or an object converting to one) is our TypeError, naming the argument.
  MLNumber: (v, what) => {
    if (typeof v === 'symbol') throw new TypeError(`${what} is a Symbol, which is not a number`);
    return convertPrimitive(v, what, 'number', (x) => -(-x));
  },
  dataType: (v, what) => toEnum(v, DATA_TYPES, what),
  recurrentNetworkActivation: (v, what) => toEnum(v, ['relu', 'sigmoid', 'tanh'], what),
};

function toSequence(value, what, convert) {
  if (value === null || (typeof value !== 'object' && typeof value !== 'function') ||
      typeof value[Symbol.iterator] !== 'function') {
    throw new TypeError(`${what} must be a sequence`);
  }
  return Array.from(value, (item, i) => convert(item, `${what}[${i}]`));
}

// record<USVString, T>: own enumerable string keys, in property order.
function toRecord(value, what, convert) {
  if (value === null || (typeof value !== 'object' && typeof value !== 'function')) {
    throw new TypeError(`${what} must be a record`);
  }
  const entries = [];
  for (const key of Reflect.ownKeys(value)) {
    if (typeof key !== 'string') continue;
    const descriptor = Reflect.getOwnPropertyDescriptor(value, key);
    if (descriptor === undefined || !descriptor.enumerable) continue;
    entries.push([toString(key, `${what} key`), convert(value[key], `${what}['${key}']`)]);
  }
  return entries;
}

// A converter for one kind of the operator table, by name: 'ulong', 'ulongs' (a sequence),
// or an array of enum values.
function converter(kind) {
  if (Array.isArray(kind)) return (v, what) => toEnum(v, kind, what);
  if (kind.endsWith('s') && CONVERT[kind.slice(0, -1)]) {
    const item = CONVERT[kind.slice(0, -1)];
    return (v, what) => toSequence(v, what, item);
  }
  if (kind === 'splits') {
    // (unsigned long or sequence<unsigned long>): an object is the sequence.
    return (v, what) => (v !== null && typeof v === 'object' ? toSequence(v, what, CONVERT.ulong) : CONVERT.ulong(v, what));
  }
  if (CONVERT[kind] === undefined) throw new Error(`unknown argument kind ${kind}`);
  return CONVERT[kind];
}

function required(dictionary, key, what) {
  const v = dictionary[key];
  if (v === undefined) throw new TypeError(`${what}.${key} is required`);
  return v;
}

function toOperandDescriptor(value, what) {
  const d = toDictionary(value, what);
  const dataType = toEnum(required(d, 'dataType', what), DATA_TYPES, `${what}.dataType`);
  const shape = toSequence(required(d, 'shape', what), `${what}.shape`, CONVERT.ulong);
  return { dataType, shape };
}

function toTensorDescriptor(value, what) {
  const d = toDictionary(value, what);
  const { dataType, shape } = toOperandDescriptor(d, what);
  const { readable, writable } = readMembers(d, what, { readable: [CONVERT.boolean, false], writable: [CONVERT.boolean, false] });
  return { dataType, shape, readable, writable };
}

const arrayBufferByteLength = Object.getOwnPropertyDescriptor(ArrayBuffer.prototype, 'byteLength').get;
const sharedByteLength = typeof SharedArrayBuffer === 'function'
  ? Object.getOwnPropertyDescriptor(SharedArrayBuffer.prototype, 'byteLength').get
  : undefined;

function isBufferOf(getter, value) {
  if (getter === undefined) return false;
  try {
    getter.call(value);
    return true;
  } catch {
    return false;
  }
}

// AllowSharedBufferSource, as a Uint8Array over the same bytes (no copy).
function toBytes(value, what) {
  if (ArrayBuffer.isView(value)) return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  if (isBufferOf(arrayBufferByteLength, value) || isBufferOf(sharedByteLength, value)) return new Uint8Array(value);
  throw new TypeError(`${what} must be an ArrayBuffer, a SharedArrayBuffer or an ArrayBufferView`);
}

function byteLength(descriptor) {
  return descriptor.shape.reduce((n, d) => n * d, 1) * BYTES_PER_ELEMENT[descriptor.dataType];
}

// The spec's "validate buffer with descriptor".
function validateBuffer(source, bytes, descriptor, what) {
  if (bytes.byteLength !== byteLength(descriptor)) {
    throw new TypeError(`${what} holds ${bytes.byteLength} bytes but ${descriptor.dataType}[${descriptor.shape}] needs ${byteLength(descriptor)}`);
  }
  if (ArrayBuffer.isView(source)) {
    const type = Object.prototype.toString.call(source).slice(8, -1);
    if (type !== 'Uint8Array' && !VIEW_TYPES[descriptor.dataType].includes(type)) {
      throw new TypeError(`${what} is a ${type}, which does not match data type ${descriptor.dataType}`);
    }
  }
}

// ---- Backend ----

let backendPromise;
let backendLoader;

function getBackend() {
  if (backendPromise === undefined) {
    if (backendLoader === undefined) {
      return Promise.reject(domException('NotSupportedError', 'the webnn-wgpu backend is not loaded'));
    }
    backendPromise = Promise.resolve().then(backendLoader);
    // A failed load can be retried.
    backendPromise.catch(() => { backendPromise = undefined; });
  }
  return backendPromise;
}

// What WebIDL's bindings make of an interface (class syntax differs): operations and attributes
// are enumerable, an operation's length is its shortest overload's count of required arguments
// (`lengths` for those where the JS parameter list says otherwise), the interface object's length
// is its constructor's (0 without one) and its name and Symbol.toStringTag are the interface's
// name, explicitly, since minifiers rename classes.
function defineInterface(cls, name, { length = 0, lengths = {} } = {}) {
  const proto = cls.prototype;
  for (const key of Object.getOwnPropertyNames(proto)) {
    if (key === 'constructor') continue;
    const descriptor = Object.getOwnPropertyDescriptor(proto, key);
    Object.defineProperty(proto, key, { ...descriptor, enumerable: true });
    if (Object.hasOwn(lengths, key)) Object.defineProperty(descriptor.value, 'length', { value: lengths[key] });
  }
  Object.defineProperty(cls, 'length', { value: length });
  Object.defineProperty(cls, 'name', { value: name });
  Object.defineProperty(proto, Symbol.toStringTag, { value: name, configurable: true });
}

// ---- ML ----

class ML {
  constructor(token) {
    if (token !== INTERNAL) throw new TypeError('Illegal constructor');
    slots.set(this, { kind: 'ML' });
  }

  async createContext(options = {}) {
    slotOf(this, 'ML', 'this');
    if (typeof GPUDevice === 'function' && options instanceof GPUDevice) {
      throw domException('NotSupportedError', 'createContext(gpuDevice) is not supported: wgpu cannot use a GPUDevice it did not create');
    }
    const bytes = (v, what) => enforceRange(v, 0, Number.MAX_SAFE_INTEGER, what);
    const { accelerated, hostMemoryBudget, memoryBudget, powerPreference } = readMembers(options, 'createContext(): options', {
      accelerated: [CONVERT.boolean, true],
      hostMemoryBudget: [bytes, undefined],
      memoryBudget: [bytes, undefined],
      powerPreference: [(v, what) => toEnum(v, ['default', 'high-performance', 'low-power'], what), 'default'],
    });
    const backend = await getBackend();
    const handle = await backend.createContext(powerPreference, accelerated, memoryBudget, hostMemoryBudget);
    return new MLContext(INTERNAL, handle);
  }
}
defineInterface(ML, 'ML');

// ---- The graph cache (experimental; docs/EXTENSIONS.md, "Graph cache") ----
// Origin-private storage under `webnn-wgpu-graph-cache/`: `graphs/<sha256 of the key>.graph` is
// one JSON line `{key, constants: [{hash, byteLength}]}` followed by the core's record of the
// graph, and `constants/<sha256>.bin` holds each constant's bytes once for every graph that uses
// them. A graph file is written last, and every file atomically (a writable commits on close),
// so an interrupted save leaves no entry. Operations hold a Web Lock so that the origin's pages
// and workers do not interleave them, and run in call order within this realm.

const CACHE_DIRECTORY = 'webnn-wgpu-graph-cache';
// Constants of one save kept in memory between hashing and writing, rather than read twice.
const CACHE_KEEP_BYTES = 64 << 20;
let cacheQueue = Promise.resolve();

function cacheOperation(work) {
  const run = () => (globalThis.navigator?.locks ? navigator.locks.request(CACHE_DIRECTORY, () => work()) : work());
  const result = cacheQueue.then(run, run);
  cacheQueue = result.catch(() => {
    cacheDirectoryHandles = null;
  });
  return result;
}

// The cache's directories, opened once per realm (each OPFS call is a round trip to the browser
// process); forgotten when an operation fails, in case another page removed them.
let cacheDirectoryHandles = null;

async function cacheDirectories(what) {
  if (typeof globalThis.navigator?.storage?.getDirectory !== 'function') {
    throw domException('NotSupportedError', `${what}: the graph cache needs origin-private storage (navigator.storage.getDirectory)`);
  }
  cacheDirectoryHandles ??= (async () => {
    const root = await navigator.storage.getDirectory();
    const cache = await root.getDirectoryHandle(CACHE_DIRECTORY, { create: true });
    return {
      graphs: await cache.getDirectoryHandle('graphs', { create: true }),
      constants: await cache.getDirectoryHandle('constants', { create: true }),
    };
  })();
  return cacheDirectoryHandles;
}

async function sha256Hex(bytes) {
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', bytes));
  return Array.from(digest, (b) => b.toString(16).padStart(2, '0')).join('');
}

async function graphFileName(key) {
  return `${await sha256Hex(new TextEncoder().encode(key))}.graph`;
}

// The file, or null where there is none.
async function existingFile(directory, name) {
  try {
    return await (await directory.getFileHandle(name)).getFile();
  } catch (e) {
    if (e.name === 'NotFoundError' || e.name === 'TypeMismatchError') return null;
    throw e;
  }
}

// Removes file `name` if it exists. A writable just aborted can hold the file's lock for a moment
// after abort() resolves (removeEntry then fails with NoModificationAllowedError): retried.
async function removeFile(directory, name) {
  for (let attempt = 0; ; attempt++) {
    try {
      await directory.removeEntry(name);
      return;
    } catch (e) {
      if (e.name === 'NotFoundError') return;
      if (e.name !== 'NoModificationAllowedError' || attempt === 50) throw e;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }
}

// Writes `parts` to file `name`: all of them or, on failure, no file.
async function writeFile(directory, name, parts) {
  const handle = await directory.getFileHandle(name, { create: true });
  let writable;
  try {
    writable = await handle.createWritable();
    for (const part of parts) await writable.write(part);
    await writable.close();
  } catch (e) {
    if (writable) await writable.abort().catch(() => {});
    await removeFile(directory, name).catch(() => {});
    throw e;
  }
}

// A graph file's JSON line and the record after it; null when it is not one.
function parseGraphFile(bytes) {
  const end = bytes.indexOf(10);
  if (end < 0) return null;
  try {
    const head = JSON.parse(new TextDecoder().decode(bytes.subarray(0, end)));
    const valid = typeof head?.key === 'string' && Array.isArray(head.constants)
      && head.constants.every((c) => typeof c?.hash === 'string' && /^[0-9a-f]{64}$/.test(c.hash) && Number.isSafeInteger(c.byteLength));
    return valid ? { head, record: bytes.subarray(end + 1) } : null;
  } catch {
    return null;
  }
}

async function savedGraphs(graphs) {
  const found = [];
  for await (const [name, handle] of graphs.entries()) {
    if (handle.kind !== 'file' || !name.endsWith('.graph')) continue;
    const parsed = parseGraphFile(new Uint8Array(await (await handle.getFile()).arrayBuffer()));
    found.push({ name, parsed });
  }
  return found;
}

// Removes the constants no saved graph uses (those of deleted graphs, and of saves cut short).
async function collectConstants(directories) {
  const used = new Set();
  for (const { parsed } of await savedGraphs(directories.graphs)) {
    parsed?.head.constants.forEach((c) => used.add(`${c.hash}.bin`));
  }
  const unused = [];
  for await (const name of directories.constants.keys()) {
    if (!used.has(name)) unused.push(name);
  }
  for (const name of unused) await removeFile(directories.constants, name).catch(() => {});
}

async function storeGraph(key, saved) {
  const directories = await cacheDirectories('saveGraph()');
  const record = saved.record();
  const constants = [];
  const missing = new Map(); // hash -> [index, bytes kept or null]
  let kept = 0;
  for (let i = 0; i < saved.constantCount(); i++) {
    const bytes = await saved.constantBytes(i);
    const hash = await sha256Hex(bytes);
    constants.push({ hash, byteLength: bytes.byteLength });
    if (missing.has(hash)) continue;
    const file = await existingFile(directories.constants, `${hash}.bin`);
    if (file?.size === bytes.byteLength) continue;
    const keep = kept + bytes.byteLength <= CACHE_KEEP_BYTES;
    kept += keep ? bytes.byteLength : 0;
    missing.set(hash, [i, keep ? bytes : null]);
  }
  const head = new TextEncoder().encode(`${JSON.stringify({ key, constants })}\n`);
  let needed = head.byteLength + record.byteLength;
  for (const [i] of missing.values()) needed += constants[i].byteLength;
  const quotaError = (detail) => domException('QuotaExceededError', `saveGraph(): the graph needs ${needed} bytes of origin-private storage; ${detail}`);
  const estimate = await navigator.storage.estimate?.().catch(() => undefined);
  if (estimate?.quota !== undefined && estimate.quota - (estimate.usage ?? 0) < needed) {
    throw quotaError(`${estimate.quota - (estimate.usage ?? 0)} are available`);
  }
  const written = [];
  try {
    for (const [hash, [i, bytes]] of missing) {
      await writeFile(directories.constants, `${hash}.bin`, [bytes ?? await saved.constantBytes(i)]);
      written.push(`${hash}.bin`);
    }
    const name = await graphFileName(key);
    const replaced = await existingFile(directories.graphs, name);
    await writeFile(directories.graphs, name, [head, record]);
    if (replaced) await collectConstants(directories);
  } catch (e) {
    for (const name of written) await removeFile(directories.constants, name).catch(() => {});
    if (e?.name === 'QuotaExceededError') throw quotaError(e.message);
    throw e;
  }
}

async function fetchGraph(key, handle) {
  const directories = await cacheDirectories('loadGraph()');
  const name = await graphFileName(key);
  const file = await existingFile(directories.graphs, name);
  if (!file) throw domException('NotFoundError', `loadGraph(): no graph is saved under '${key}'`);
  const parsed = parseGraphFile(new Uint8Array(await file.arrayBuffer()));
  if (!parsed || parsed.head.key !== key) {
    await removeFile(directories.graphs, name).catch(() => {});
    throw domException('DataError', `loadGraph(): the graph saved under '${key}' is corrupt; it was removed: build it again`);
  }
  const sizes = new Map(parsed.head.constants.map((c) => [c.hash, c.byteLength]));
  const found = await Promise.all([...sizes.keys()].map((hash) => existingFile(directories.constants, `${hash}.bin`)));
  const files = new Map([...sizes.keys()].map((hash, i) => [hash, found[i]]));
  for (const [hash, byteLength] of sizes) {
    if (files.get(hash)?.size !== byteLength) {
      await removeFile(directories.graphs, name).catch(() => {});
      await collectConstants(directories);
      throw domException('NotFoundError', `loadGraph(): a constant of the graph saved under '${key}' (${hash}) is missing or truncated; the entry was removed: build it again`);
    }
  }
  const hashes = parsed.head.constants.map((c) => c.hash);
  try {
    return await handle.loadGraph(parsed.record, hashes, hashes.map((h) => files.get(h)));
  } catch (e) {
    // A record the core finds corrupt can never load: its entry goes.
    if (e?.name !== 'DataError') throw e;
    await removeFile(directories.graphs, name).catch(() => {});
    await collectConstants(directories);
    throw domException('DataError', `loadGraph(): ${e.message}; the entry was removed: build it again`);
  }
}

async function removeGraph(key) {
  const directories = await cacheDirectories('deleteGraph()');
  await removeFile(directories.graphs, await graphFileName(key));
  await collectConstants(directories);
}

// ---- MLContext ----

function trackPending(tensorSlot, promise) {
  return new Promise((resolve, reject) => {
    tensorSlot.pending.add(reject);
    promise.then(
      (v) => { tensorSlot.pending.delete(reject); resolve(v); },
      (e) => { tensorSlot.pending.delete(reject); reject(e); },
    );
  });
}

// Chromium resolves a pending read when its GPU process next looks for finished GPU work: at once
// when commands from the page arrive, otherwise on a timer of about 2.5 ms (measured on
// SwiftShader and on an H100: a read of work that takes 0.5 ms waits ~3 ms), which grows while
// work runs long (on an H100, a read behind 170 ms of products resolved about 57 ms after them).
// So while reads of a context on a hardware adapter wait, one loop a context (not one a read:
// a decode with steps ahead has several reads waiting) sends an empty submission every NUDGE_MS,
// polled on MessageChannel turns (timers are coarser), until the oldest waiting read has waited
// NUDGE_FOR_MS, then every NUDGE_LATE_MS on timers, up to NUDGE_UNTIL_MS (beyond it the timer's
// lag is a small share of the wait); none while the page's own calls sent commands within
// NUDGE_MS. Not on a software adapter, whose GPU work needs the CPU the polling would take.
const NUDGE_MS = 0.25;
const NUDGE_FOR_MS = 20;
const NUDGE_LATE_MS = 2;
const NUDGE_UNTIL_MS = 10000;
let turns = null;
function nextTurn() {
  if (!turns) {
    const channel = new MessageChannel();
    const waiting = [];
    channel.port1.onmessage = () => waiting.shift()?.();
    turns = (resolve) => { waiting.push(resolve); channel.port2.postMessage(0); };
  }
  return new Promise(turns);
}

// `c`: the context's slot, which keeps the queue to nudge (null for none) after the first read,
// the start times of the reads waiting (`c.waiting`, oldest first) and when its calls last sent
// commands (`c.sent`).
function nudged(c, promise) {
  if (c.nudgeQueue === undefined) {
    c.nudgeQueue = (typeof MessageChannel === 'function' && c.handle.accelerated() && c.handle.gpuDevice()?.queue) || null;
    c.waiting = [];
    c.sent = 0;
  }
  if (!c.nudgeQueue) return promise;
  const read = { start: performance.now(), settled: false };
  const settle = () => { read.settled = true; };
  promise.then(settle, settle);
  c.waiting.push(read);
  // (A submission that throws, on a device being torn down, ends the nudging, not the read.)
  if (c.waiting.length === 1) nudgeWhileWaiting(c).catch(() => { c.waiting = []; });
  return promise;
}

async function nudgeWhileWaiting(c) {
  let last = performance.now();
  for (;;) {
    const now = performance.now();
    while (c.waiting.length && (c.waiting[0].settled || now - c.waiting[0].start > NUDGE_UNTIL_MS)) c.waiting.shift();
    if (!c.waiting.length) return;
    const late = now - c.waiting[0].start > NUDGE_FOR_MS;
    if (now - Math.max(last, c.sent) >= (late ? NUDGE_LATE_MS : NUDGE_MS)) {
      c.nudgeQueue.submit([]);
      last = now;
    }
    await (late ? new Promise((r) => setTimeout(r, NUDGE_LATE_MS)) : nextTurn());
  }
}

function namedTensors(record, what) {
  return toRecord(record, what, (v, w) => ({ object: v, slot: slotOf(v, 'MLTensor', w) }));
}

class MLContext {
  constructor(token, handle) {
    if (token !== INTERNAL) throw new TypeError('Illegal constructor');
    const lost = handle.lost().then((message) => ({ message }));
    slots.set(this, { kind: 'MLContext', handle, lost });
  }

  get accelerated() {
    return slotOf(this, 'MLContext', 'this').handle.accelerated();
  }

  // A promise attribute's getter rejects rather than throws, also on a foreign `this`.
  get lost() {
    try {
      return slotOf(this, 'MLContext', 'this').lost;
    } catch (e) {
      return Promise.reject(e);
    }
  }

  dispatch(graph, inputs, outputs) {
    const c = slotOf(this, 'MLContext', 'this');
    if (arguments.length < 3) throw new TypeError(`dispatch() needs 3 arguments, got ${arguments.length}`);
    const g = slotOf(graph, 'MLGraph', 'dispatch(): graph');
    const ins = namedTensors(inputs, 'dispatch(): inputs');
    const outs = namedTensors(outputs, 'dispatch(): outputs');
    if (g.context !== this) throw new TypeError('dispatch(): the MLGraph belongs to another MLContext');
    if (g.destroyed) throw domException('InvalidStateError', 'dispatch(): the MLGraph is destroyed');
    const all = [...ins, ...outs];
    if (new Set(all.map(([, t]) => t.object)).size !== all.length) {
      throw new TypeError('dispatch(): the same MLTensor is passed more than once');
    }
    for (const [name, t] of all) {
      if (t.slot.context !== this) throw new TypeError(`dispatch(): MLTensor '${name}' belongs to another MLContext`);
    }
    c.handle.dispatch(
      g.handle,
      ins.map(([name]) => name),
      Float64Array.from(ins, ([, t]) => t.slot.id),
      outs.map(([name]) => name),
      Float64Array.from(outs, ([, t]) => t.slot.id),
    );
    c.sent = performance.now();
  }

  async createTensor(descriptor) {
    const c = slotOf(this, 'MLContext', 'this');
    const d = toTensorDescriptor(descriptor, 'createTensor(): descriptor');
    if (c.handle.isLost()) throw domException('InvalidStateError', 'createTensor(): the MLContext is lost');
    const handle = await c.handle.createTensor(d.dataType, d.shape, d.readable, d.writable);
    return new MLTensor(INTERNAL, handle, this, d, false);
  }

  async createConstantTensor(descriptor, inputData) {
    const c = slotOf(this, 'MLContext', 'this');
    if (arguments.length < 2) throw new TypeError('createConstantTensor() needs 2 arguments');
    const d = toOperandDescriptor(descriptor, 'createConstantTensor(): descriptor');
    const bytes = toBytes(inputData, 'createConstantTensor(): inputData');
    if (c.handle.isLost()) throw domException('InvalidStateError', 'createConstantTensor(): the MLContext is lost');
    c.handle.checkDimensions(d.dataType, d.shape);
    validateBuffer(inputData, bytes, d, 'createConstantTensor(): inputData');
    // A JS-owned copy: it becomes the constant's host copy, outside wasm memory.
    const handle = await c.handle.createConstantTensor(d.dataType, d.shape, bytes.slice());
    return new MLTensor(INTERNAL, handle, this, { ...d, readable: false, writable: false }, true);
  }

  async readTensor(tensor, outputData) {
    const c = slotOf(this, 'MLContext', 'this');
    const byob = arguments.length >= 2;
    const t = slotOf(tensor, 'MLTensor', 'readTensor(): tensor');
    const target = byob ? toBytes(outputData, 'readTensor(): outputData') : undefined;
    if (t.context !== this) throw new TypeError('readTensor(): the MLTensor belongs to another MLContext');
    if (t.destroyed) throw new TypeError('readTensor(): the MLTensor is destroyed');
    if (!t.readable) throw new TypeError('readTensor(): the MLTensor was not created readable');
    if (byob) validateBuffer(outputData, target, t.descriptor, 'readTensor(): outputData');
    const bytes = await trackPending(t, nudged(c, c.handle.readTensor(t.handle)));
    if (!byob) return bytes.buffer;
    // The buffer may have been detached (transferred) while the read was pending.
    const now = toBytes(outputData, 'readTensor(): outputData');
    if (now.byteLength !== bytes.byteLength) throw new TypeError('readTensor(): outputData was detached');
    now.set(bytes);
    return undefined;
  }

  writeTensor(tensor, inputData) {
    const c = slotOf(this, 'MLContext', 'this');
    if (arguments.length < 2) throw new TypeError('writeTensor() needs 2 arguments');
    const t = slotOf(tensor, 'MLTensor', 'writeTensor(): tensor');
    const bytes = toBytes(inputData, 'writeTensor(): inputData');
    if (t.context !== this) throw new TypeError('writeTensor(): the MLTensor belongs to another MLContext');
    if (t.destroyed) throw new TypeError('writeTensor(): the MLTensor is destroyed');
    if (!t.writable) throw new TypeError('writeTensor(): the MLTensor was not created writable');
    validateBuffer(inputData, bytes, t.descriptor, 'writeTensor(): inputData');
    c.handle.writeTensor(t.handle, bytes);
    c.sent = performance.now();
  }

  opSupportLimits() {
    return slotOf(this, 'MLContext', 'this').handle.opSupportLimits();
  }

  destroy() {
    slotOf(this, 'MLContext', 'this').handle.destroy();
  }

  // Extension (docs/EXTENSIONS.md): device and host bytes, budget and swap statistics.
  memoryInfo() {
    return slotOf(this, 'MLContext', 'this').handle.memoryInfo();
  }

  // Extension (docs/EXTENSIONS.md, "MLContext"): reads only the header of a safetensors or GGUF
  // file; `source` is a FileSystemFileHandle, a File, a Blob, or a download (a Response, or a
  // ReadableStream with options.byteLength) read once into OPFS while its tensors stream.
  // `options.floatType` ('float32' or 'float16') is what bfloat16 and quantized tensors become.
  async openWeights(source, options = {}) {
    const c = slotOf(this, 'MLContext', 'this');
    if (arguments.length < 1) throw new TypeError('openWeights() needs a source');
    const isHandle = typeof FileSystemFileHandle === 'function' && source instanceof FileSystemFileHandle;
    const isDownload = (typeof Response === 'function' && source instanceof Response)
      || (typeof ReadableStream === 'function' && source instanceof ReadableStream);
    if (!isHandle && !isDownload && !(typeof Blob === 'function' && source instanceof Blob)) {
      throw new TypeError('openWeights(): source must be a FileSystemFileHandle, a File, a Blob, a Response or a ReadableStream');
    }
    const { byteLength, cacheName, floatType, onProgress } = readMembers(options, 'openWeights(): options', {
      byteLength: [(v, what) => enforceRange(v, 0, Number.MAX_SAFE_INTEGER, what), undefined],
      cacheName: [toCacheName, undefined],
      floatType: [(v, what) => toEnum(v, ['float32', 'float16'], what), undefined],
      onProgress: [(v, what) => {
        if (typeof v !== 'function') throw new TypeError(`${what} must be a function`);
        return v;
      }, undefined],
    });
    const download = isDownload ? checkDownload(source, byteLength, cacheName, onProgress) : null;
    let blob;
    let name;
    let fileHandle;
    let cached = Promise.resolve(null);
    if (download) {
      if (c.handle.isLost()) throw domException('InvalidStateError', 'openWeights(): the MLContext is lost');
      blob = download.download;
      name = blob.name;
      ({ done: cached } = await blob.start(download.body));
    } else if (isHandle) {
      name = source.name;
      // Kept for sync access handles: in a dedicated Worker, tensors are read through them.
      fileHandle = source;
      try {
        blob = await source.getFile();
      } catch (e) {
        throw domException('DataError', `${name}: cannot read the file: ${e.message}`);
      }
      const problem = await downloadRecordProblem(source, blob);
      if (problem) throw domException('DataError', problem);
    } else {
      blob = source;
      name = typeof File === 'function' && source instanceof File ? source.name : 'Blob';
    }
    let handle;
    try {
      if (c.handle.isLost()) throw domException('InvalidStateError', 'openWeights(): the MLContext is lost');
      handle = await c.handle.openWeights(blob, fileHandle, name, floatType);
    } catch (e) {
      // A download whose header does not read goes no further and leaves no file.
      if (download) await blob.abort(e);
      throw e;
    }
    // A download's onProgress reports the download; a file's, each tensor's streaming.
    return new MLWeightFile(INTERNAL, handle, this, download ? undefined : onProgress, cached);
  }

  // Extension (docs/EXTENSIONS.md, "Graph cache"): the working group's graph cache proposal.
  async saveGraph(key, graph) {
    const c = slotOf(this, 'MLContext', 'this');
    if (arguments.length < 2) throw new TypeError(`saveGraph() needs 2 arguments, got ${arguments.length}`);
    const k = toString(key, 'saveGraph(): key');
    const g = slotOf(graph, 'MLGraph', 'saveGraph(): graph');
    if (g.context !== this) throw new TypeError('saveGraph(): the MLGraph belongs to another MLContext');
    if (g.destroyed) throw domException('InvalidStateError', 'saveGraph(): the MLGraph is destroyed');
    if (c.handle.isLost()) throw domException('InvalidStateError', 'saveGraph(): the MLContext is lost');
    const saved = g.handle.save();
    await cacheOperation(() => storeGraph(k, saved));
  }

  async loadGraph(key) {
    const c = slotOf(this, 'MLContext', 'this');
    if (arguments.length < 1) throw new TypeError('loadGraph() needs a key');
    const k = toString(key, 'loadGraph(): key');
    if (c.handle.isLost()) throw domException('InvalidStateError', 'loadGraph(): the MLContext is lost');
    const handle = await cacheOperation(() => fetchGraph(k, c.handle));
    return new MLGraph(INTERNAL, handle, this);
  }

  async listGraphs() {
    slotOf(this, 'MLContext', 'this');
    return cacheOperation(async () => {
      const { graphs } = await cacheDirectories('listGraphs()');
      return (await savedGraphs(graphs)).filter((g) => g.parsed).map((g) => g.parsed.head.key).sort();
    });
  }

  // Returns at once (the proposal's IDL); later cache calls of this realm wait for the deletion.
  deleteGraph(key) {
    slotOf(this, 'MLContext', 'this');
    if (arguments.length < 1) throw new TypeError('deleteGraph() needs a key');
    const k = toString(key, 'deleteGraph(): key');
    cacheOperation(() => removeGraph(k)).catch((e) => console.warn(`deleteGraph('${k}'): ${e.message}`));
  }
}
// readTensor(tensor) is the shortest overload.
defineInterface(MLContext, 'MLContext', { lengths: { readTensor: 1 } });

// ---- MLTensor ----

class MLTensor {
  constructor(token, handle, context, descriptor, constant) {
    if (token !== INTERNAL) throw new TypeError('Illegal constructor');
    slots.set(this, {
      kind: 'MLTensor',
      handle,
      id: handle.id(),
      context,
      descriptor: { dataType: descriptor.dataType, shape: descriptor.shape },
      shape: Object.freeze([...descriptor.shape]),
      readable: descriptor.readable,
      writable: descriptor.writable,
      constant,
      destroyed: false,
      pending: new Set(),
    });
  }

  get dataType() { return slotOf(this, 'MLTensor', 'this').descriptor.dataType; }
  get shape() { return slotOf(this, 'MLTensor', 'this').shape; }
  get readable() { return slotOf(this, 'MLTensor', 'this').readable; }
  get writable() { return slotOf(this, 'MLTensor', 'this').writable; }
  get constant() { return slotOf(this, 'MLTensor', 'this').constant; }

  destroy() {
    const t = slotOf(this, 'MLTensor', 'this');
    t.destroyed = true;
    t.handle.destroy();
    for (const reject of t.pending) reject(domException('InvalidStateError', 'the MLTensor was destroyed'));
    t.pending.clear();
  }
}
defineInterface(MLTensor, 'MLTensor');

// ---- MLWeightFile ----

class MLWeightFile {
  constructor(token, handle, context, onProgress, cached) {
    if (token !== INTERNAL) throw new TypeError('Illegal constructor');
    const tensors = Object.freeze(handle.tensors().map((t) => Object.freeze({ ...t, shape: Object.freeze(t.shape) })));
    slots.set(this, { kind: 'MLWeightFile', handle, context, onProgress, tensors, cached });
  }

  // [{ name, dataType, shape, byteLength, storedType, fileByteLength }].
  get tensors() { return slotOf(this, 'MLWeightFile', 'this').tensors; }

  // A download's OPFS FileSystemFileHandle, once the file is committed and its record written
  // (rejects as the download fails); null for a file opened from a handle, a File or a Blob.
  // A promise attribute's getter rejects rather than throws, also on a foreign `this`.
  get cached() {
    try {
      return slotOf(this, 'MLWeightFile', 'this').cached;
    } catch (e) {
      return Promise.reject(e);
    }
  }

  // A constant MLTensor whose bytes are streamed from the file to the GPU in chunks. It resolves
  // once they are on the GPU; with `options.wait` false, once the GPU buffer is allocated, the
  // bytes streaming on in the background: a graph can be built with it meanwhile, and queue
  // work issued after the call (dispatch, writeTensor, readTensor) waits for the stream, whose
  // failure rejects the next readTensor.
  async constantTensor(name, options = {}) {
    const w = slotOf(this, 'MLWeightFile', 'this');
    if (arguments.length < 1) throw new TypeError('constantTensor() needs a tensor name');
    const n = toString(name, 'constantTensor(): name');
    const { wait } = readMembers(options, 'constantTensor(): options', { wait: [CONVERT.boolean, true] });
    const handle = await w.handle.constantTensor(n, w.onProgress, wait);
    const info = w.tensors.find((t) => t.name === n);
    const descriptor = { dataType: info.dataType, shape: info.shape, readable: false, writable: false };
    return new MLTensor(INTERNAL, handle, w.context, descriptor, true);
  }
}
defineInterface(MLWeightFile, 'MLWeightFile');

// The byte reader under MLWeightFile (imported by src/weights/source.rs): a file range read in
// order into one staging ArrayBuffer, reused for every chunk. In a dedicated Worker with an OPFS
// FileSystemFileHandle it reads through a sync access handle (read(view, {at}): no stream, no
// copy); elsewhere, or when the file is locked by another sync handle, through blob.stream()
// with a BYOB reader that fills the staging buffer in place (a default reader's chunks are
// copied in where the browser lacks BYOB). next(n) resolves to a view of the next n bytes,
// valid until the next call; writeTo() is the hot path of tensors that need no conversion:
// read a chunk, GPUQueue.writeBuffer it from the staging buffer, repeat, all in JS. Staging
// buffers go back to a small pool on close(), so loading tensor after tensor allocates nothing
// per chunk or per tensor. A stream reader closed at the end of its range parks its stream until
// the next macrotask: the next tensor of a file usually starts where the last one ended, and
// continuing the stream saves restarting it (a parked stream per lane: tensors asked for together
// stream side by side, see src/weights/lanes.rs). Sync handles close with their reader (they lock
// the file), and a read costs no more on a fresh one. readerStats counts how ranges were read,
// and the readers open at once (`open`, the most since a test last reset it: `maxOpen`).
export const readerStats = { syncHandles: 0, streams: 0, continued: 0, open: 0, maxOpen: 0 };
const stagingPool = [];
const STAGING_POOL_SIZE = 4;
const PARKED_STREAMS = 4;
const parked = [];

function releaseParked(entry) {
  const i = parked.indexOf(entry);
  if (i < 0) return;
  parked.splice(i, 1);
  clearTimeout(entry.timer);
  entry.reader.cancel().catch(() => {});
}

export class BlobRangeReader {
  constructor(blob, fileHandle, offset, length, stagingBytes) {
    this.blob = blob;
    this.fileHandle = fileHandle ?? null;
    this.position = offset;
    this.end = offset + length;
    this.reader = null;
    this.access = null;
    this.opening = null;
    this.closed = false;
    this.failed = false;
    this.byob = false;
    this.pending = null;
    const i = stagingPool.findIndex((b) => b.byteLength >= stagingBytes);
    this.staging = i >= 0 ? stagingPool.splice(i, 1)[0] : new ArrayBuffer(stagingBytes);
    readerStats.open++;
    readerStats.maxOpen = Math.max(readerStats.maxOpen, readerStats.open);
  }

  async open() {
    const i = parked.findIndex((p) => p.blob === this.blob && p.position === this.position);
    if (i >= 0) {
      const [p] = parked.splice(i, 1);
      clearTimeout(p.timer);
      ({ reader: this.reader, byob: this.byob, pending: this.pending } = p);
      readerStats.continued++;
      return;
    }
    if (this.fileHandle && typeof this.fileHandle.createSyncAccessHandle === 'function') {
      try {
        const access = await this.fileHandle.createSyncAccessHandle();
        // close() may have run meanwhile: the handle locks the file, so it must not outlive us.
        if (this.closed) access.close();
        else this.access = access;
        readerStats.syncHandles++;
        return;
      } catch {
        // Locked (another sync handle holds the file: NoModificationAllowedError) or not a
        // dedicated Worker: stream the Blob instead.
      }
    }
    if (this.closed) return;
    // To the end of the file, so that the next tensor can continue it.
    const stream = this.blob.slice(this.position).stream();
    readerStats.streams++;
    try {
      this.reader = stream.getReader({ mode: 'byob' });
      this.byob = true;
    } catch {
      this.reader = stream.getReader();
    }
  }

  // Fills staging[0, n) with the next n bytes (fewer at the end of the file); returns the count.
  async fill(n) {
    if (this.opening === null) this.opening = this.open();
    await this.opening;
    if (this.closed) throw new Error('the reader is closed');
    if (n > this.end - this.position) throw new Error(`reading ${n} bytes goes past the range`);
    // Cleared once the read completes: a reader closed after a failed read is not parked.
    this.failed = true;
    if (this.staging.byteLength < n) this.staging = new ArrayBuffer(n);
    let filled = 0;
    if (this.access) {
      while (filled < n) {
        const got = this.access.read(new Uint8Array(this.staging, filled, n - filled), { at: this.position + filled });
        if (got === 0) break;
        filled += got;
      }
    } else {
      while (filled < n) {
        if (this.byob) {
          // The read transfers the staging buffer; the view it resolves to holds it again.
          const { value, done } = await this.reader.read(new Uint8Array(this.staging, filled, n - filled));
          if (value) this.staging = value.buffer;
          if (done) break;
          filled += value.byteLength;
        } else {
          if (this.pending === null) {
            const { value, done } = await this.reader.read();
            if (done) break;
            this.pending = value;
          }
          const take = Math.min(this.pending.byteLength, n - filled);
          new Uint8Array(this.staging, filled, take).set(this.pending.subarray(0, take));
          filled += take;
          this.pending = take < this.pending.byteLength ? this.pending.subarray(take) : null;
        }
      }
    }
    this.position += filled;
    this.failed = false;
    return filled;
  }

  async next(n) {
    const filled = await this.fill(n);
    return new Uint8Array(this.staging, 0, filled);
  }

  // Writes the next `length` bytes to `buffer` (a GPUBuffer) at `bufferOffset` through `queue`,
  // in chunks of `chunkBytes` (a multiple of 4). writeBuffer copies before it returns, so the
  // staging buffer is free again at once. It takes whole words: the last 0-3 bytes of an odd
  // length come back as a Uint8Array for the caller to pad; a short file rejects.
  async writeTo(queue, buffer, bufferOffset, length, chunkBytes) {
    let done = 0;
    while (done < length) {
      const n = Math.min(chunkBytes, length - done);
      const filled = await this.fill(n);
      if (filled !== n) throw new Error(`reading ${n} bytes gave ${filled} bytes (the file changed?)`);
      const words = n - (n % 4);
      if (words > 0) queue.writeBuffer(buffer, bufferOffset + done, this.staging, 0, words);
      done += n;
      if (words < n) return new Uint8Array(this.staging.slice(words, n));
    }
    return new Uint8Array(0);
  }

  close() {
    if (!this.closed) readerStats.open--;
    this.closed = true;
    if (this.access) this.access.close();
    this.access = null;
    if (this.reader && !this.failed && this.position === this.end) {
      if (parked.length >= PARKED_STREAMS) releaseParked(parked[0]);
      const { blob, position, reader, byob, pending } = this;
      const entry = { blob, position, reader, byob, pending };
      entry.timer = setTimeout(() => releaseParked(entry), 0);
      parked.push(entry);
    } else if (this.reader) {
      this.reader.cancel().catch(() => {});
    }
    // A failed BYOB read leaves the buffer detached (byteLength 0): nothing to give back.
    if (this.staging && this.staging.byteLength > 0 && stagingPool.length < STAGING_POOL_SIZE) stagingPool.push(this.staging);
    this.staging = null;
    this.pending = null;
    this.reader = null;
  }
}

// ---- Downloads: openWeights() of a Response or a ReadableStream ----
//
// One pass over the network: each arrived chunk goes, in order, into a Blob piece (Chromium's
// blob system pages large blobs to disk) and an OPFS createWritable() stream. The
// Rust side reads a `WeightDownload` as it reads a Blob (`size`, `slice(a, b)`, whose
// `arrayBuffer()` and `stream()` wait for bytes that have not arrived), so the header is read
// as soon as its bytes are in and tensors stream to the GPU as their bytes arrive. Once the
// writable is closed (an atomic commit), reads switch to the OPFS File and the pieces go.
// OPFS layout (docs/EXTENSIONS.md): data files in WEIGHTS_DIRECTORY named by `cacheName`, and
// a record RECORDS_DIRECTORY/<cacheName>.json ({ byteLength, sha256, url }) written only after
// the data file is committed and hashed (sha256OfBlob): a file without a matching record (a crash mid-download) is never
// taken for a complete one by openWeights(handle).
const WEIGHTS_DIRECTORY = 'webnn-wgpu-weights';
const RECORDS_DIRECTORY = '.records';
// Network chunks (often 64 KiB) are gathered into pieces of this size: fewer Blobs and OPFS
// writes, and a reader waiting at the edge wakes at most once per piece.
const PIECE_BYTES = 4 << 20;
const STREAM_STEP_BYTES = 1 << 20;
// The last pieces' chunks stay in memory too: a reader at the edge of the download (a tensor
// streaming as it arrives) takes them from there rather than reading the Blob back.
const RECENT_PIECES = 3;
const RESUME_ATTEMPTS = 3;

// An incremental SHA-256 (FIPS 180-4); crypto.subtle has no streaming digest and wants the
// whole file in memory. Self-contained: its source also runs in the hashing Worker.
function createSha256() {
  const K = new Int32Array([
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
  ]);
  const h = new Int32Array([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]);
  const w = new Int32Array(64);
  const tail = new Uint8Array(64);
  let tailBytes = 0;
  let total = 0;
  // The 64-byte blocks of bytes[at, end). Sums are kept in int32 at every step and the state
  // lives in locals: V8 then keeps everything in registers (about twice as fast as otherwise).
  const blocks = (bytes, at, end) => {
    let h0 = h[0], h1 = h[1], h2 = h[2], h3 = h[3], h4 = h[4], h5 = h[5], h6 = h[6], h7 = h[7];
    for (; at < end; at += 64) {
      for (let i = 0; i < 16; i++) {
        const j = at + 4 * i;
        w[i] = (bytes[j] << 24) | (bytes[j + 1] << 16) | (bytes[j + 2] << 8) | bytes[j + 3];
      }
      for (let i = 16; i < 64; i++) {
        const x = w[i - 15];
        const y = w[i - 2];
        w[i] = (((((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3)) + w[i - 16]) | 0)
          + (((((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10)) + w[i - 7]) | 0) | 0;
      }
      let a = h0, b = h1, c = h2, d = h3, e = h4, f = h5, g = h6, k = h7;
      for (let i = 0; i < 64; i++) {
        const t1 = (((((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7))) + ((e & f) ^ (~e & g))) | 0)
          + ((k + ((K[i] + w[i]) | 0)) | 0) | 0;
        const t2 = ((((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10))) + ((a & b) ^ (a & c) ^ (b & c))) | 0;
        k = g; g = f; f = e; e = (d + t1) | 0; d = c; c = b; b = a; a = (t1 + t2) | 0;
      }
      h0 = (h0 + a) | 0; h1 = (h1 + b) | 0; h2 = (h2 + c) | 0; h3 = (h3 + d) | 0;
      h4 = (h4 + e) | 0; h5 = (h5 + f) | 0; h6 = (h6 + g) | 0; h7 = (h7 + k) | 0;
    }
    h[0] = h0; h[1] = h1; h[2] = h2; h[3] = h3; h[4] = h4; h[5] = h5; h[6] = h6; h[7] = h7;
  };
  return {
    update(bytes) {
      total += bytes.length;
      let at = 0;
      if (tailBytes > 0) {
        at = Math.min(64 - tailBytes, bytes.length);
        tail.set(bytes.subarray(0, at), tailBytes);
        tailBytes += at;
        if (tailBytes < 64) return;
        blocks(tail, 0, 64);
        tailBytes = 0;
      }
      const end = bytes.length - ((bytes.length - at) % 64);
      blocks(bytes, at, end);
      tail.set(bytes.subarray(end));
      tailBytes = bytes.length - end;
    },
    // The hex digest; the hash takes no more bytes after it.
    digest() {
      const last = new Uint8Array(tailBytes < 56 ? 64 : 128);
      last.set(tail.subarray(0, tailBytes));
      last[tailBytes] = 0x80;
      const view = new DataView(last.buffer);
      view.setUint32(last.length - 8, Math.floor(total / 2 ** 29));
      view.setUint32(last.length - 4, (total * 8) >>> 0);
      blocks(last, 0, last.length);
      return Array.from(h, (x) => (x >>> 0).toString(16).padStart(8, '0')).join('');
    },
  };
}

// The SHA-256 of a committed file, computed once after the download. Hashing in JS runs at about
// 100 MB/s, slower than the download and the GPU upload, so it stays off the pass that feeds the
// GPU: it runs in a Worker started from a Blob URL that reads the File itself, or inline where no
// Worker can start (a ServiceWorker, a CSP without blob: workers) or the Worker fails.
async function sha256OfBlob(blob) {
  // Self-contained, as createSha256 is (a minifier may rename either): both are sources too.
  const hashIn = async (read, sha256) => {
    const sha = sha256();
    const reader = read.stream().getReader();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return sha.digest();
      sha.update(value);
    }
  };
  let worker;
  try {
    const source = `onmessage = async (e) => postMessage(await (${hashIn})(e.data, ${createSha256}));`;
    const url = URL.createObjectURL(new Blob([source], { type: 'text/javascript' }));
    worker = new Worker(url);
    // The Worker has its script's URL already; revoking it now only stops later fetches.
    URL.revokeObjectURL(url);
  } catch {
    return hashIn(blob, createSha256);
  }
  try {
    return await new Promise((resolve, reject) => {
      worker.onmessage = (e) => resolve(e.data);
      worker.onerror = (e) => reject(new Error(e.message));
      worker.postMessage(blob);
    });
  } catch {
    return hashIn(blob, createSha256);
  } finally {
    worker.terminate();
  }
}

// The OPFS directory of downloaded weight files, created on demand.
async function weightsDirectory(create) {
  return (await navigator.storage.getDirectory()).getDirectoryHandle(WEIGHTS_DIRECTORY, { create });
}

// For openWeights(handle) of a file in WEIGHTS_DIRECTORY: why it cannot be taken for a complete
// download (no record, or a length the record does not give), or null. Files elsewhere pass.
async function downloadRecordProblem(handle, file) {
  let directory;
  try {
    directory = await weightsDirectory(false);
  } catch {
    return null; // no downloads in this origin
  }
  const path = await directory.resolve(handle);
  if (path === null || path.length !== 1) return null;
  let record;
  try {
    const records = await directory.getDirectoryHandle(RECORDS_DIRECTORY);
    record = JSON.parse(await (await (await records.getFileHandle(`${handle.name}.json`)).getFile()).text());
  } catch {
    return `${handle.name} is an incomplete download (no record of its completion)`;
  }
  if (record.byteLength !== file.size) {
    return `${handle.name} is ${file.size} bytes, its download record says ${record.byteLength}`;
  }
  return null;
}

function toCacheName(value, what) {
  const name = toString(value, what);
  if (name === '' || name.startsWith('.') || /[/\\\0]/.test(name) || name.length > 200) {
    throw new TypeError(`${what}: '${name}' is not a file name (1-200 characters, no '/', '\\' or leading '.')`);
  }
  return name;
}

// Reads `body` once into OPFS and into Blob pieces that WeightDownload's readers are served from.
// Built by openWeights() after its synchronous checks (see WeightDownload.start).
class WeightDownload {
  constructor(name, size, url, resumable, etag, onProgress) {
    this.name = name;
    this.size = size;
    this.url = url;
    this.resumable = resumable;
    this.etag = etag;
    this.onProgress = onProgress;
    this.pieces = [];
    this.starts = [];
    this.recent = [];
    this.available = 0;
    this.received = 0;
    this.waiters = [];
    this.error = null;
    this.file = null;
    this.reader = null;
  }

  // Checks space, creates the OPFS file and starts reading `body`; resolves once the download
  // runs, to { done }: a promise of the committed file's handle (`MLWeightFile.cached`), wrapped
  // so that this promise does not adopt it.
  async start(body) {
    this.reader = body.getReader();
    try {
      const { quota, usage } = await navigator.storage.estimate();
      if (quota - usage < this.size) {
        throw domException('QuotaExceededError',
          `${this.name}: caching the download needs ${this.size} bytes, the origin has ${quota - usage} left`);
      }
      this.directory = await weightsDirectory(true);
      const records = await this.directory.getDirectoryHandle(RECORDS_DIRECTORY, { create: true });
      // A record of an earlier download of this name goes first: until the new one is written,
      // the file is incomplete.
      await records.removeEntry(`${this.name}.json`).catch(() => {});
      this.handle = await this.directory.getFileHandle(this.name, { create: true });
      this.writer = (await this.handle.createWritable()).getWriter();
      this.records = records;
    } catch (e) {
      this.reader.cancel().catch(() => {});
      if (this.handle) await this.directory.removeEntry(this.name).catch(() => {});
      throw e instanceof DOMException ? e : domException('UnknownError', `${this.name}: cannot create the cache file: ${e.message}`);
    }
    const done = this.run().catch(async (e) => {
      await this.abort(e);
      throw this.error;
    });
    done.catch(() => {}); // `cached` may never be looked at
    return { done };
  }

  // Fails every read and pending wait with `error` (a DOMException), cancels the body, aborts
  // the writable (nothing is committed) and removes the file: no entry is left.
  async abort(error) {
    if (this.error) return;
    this.error = error instanceof DOMException ? error
      : domException('NetworkError', `${this.name}: the download failed after ${this.received} of ${this.size} bytes: ${error.message}`);
    for (const w of this.waiters) w.reject(this.error);
    this.waiters = [];
    this.pieces = [];
    this.starts = [];
    this.recent = [];
    this.reader.cancel().catch(() => {});
    await this.writer.abort().catch(() => {});
    await this.directory.removeEntry(this.name).catch(() => {});
    await this.records.removeEntry(`${this.name}.json`).catch(() => {});
  }

  async run() {
    let chunks = [];
    let gathered = 0;
    let writeError = null;
    let attempts = 0;
    const flush = () => {
      if (writeError) throw writeError;
      if (gathered === 0) return;
      const piece = new Blob(chunks);
      // Not awaited: OPFS writes (about 300 MB/s on the test VM) would hold the download and the
      // GPU upload to the disk's pace. The queue holds Blob pieces, kept until the commit anyway.
      this.writer.write(piece).catch((e) => { writeError ??= e; });
      this.pieces.push(piece);
      this.starts.push(this.available);
      this.recent.push({ start: this.available, chunks });
      if (this.recent.length > RECENT_PIECES) this.recent.shift();
      this.available += piece.size;
      this.waiters = this.waiters.filter((w) => (this.available >= w.end ? (w.resolve(), false) : true));
      chunks = [];
      gathered = 0;
    };
    try {
      for (;;) {
        let result;
        try {
          result = await this.reader.read();
        } catch (e) {
          if (attempts < RESUME_ATTEMPTS && this.resumable) {
            attempts++;
            // The bytes gathered so far count: the resumed body starts after them.
            this.reader = await this.resume();
            continue;
          }
          throw domException('NetworkError',
            `${this.name}: the download was interrupted after ${this.received} of ${this.size} bytes: ${e.message}`);
        }
        if (result.done) break;
        const chunk = result.value;
        if (!ArrayBuffer.isView(chunk) && !(chunk instanceof ArrayBuffer)) {
          throw domException('DataError', `${this.name}: the stream gave a chunk that is not bytes`);
        }
        const bytes = chunk instanceof ArrayBuffer ? new Uint8Array(chunk) : new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength);
        if (this.received + bytes.length > this.size) {
          throw domException('DataError', `${this.name}: the download is longer than its declared ${this.size} bytes`);
        }
        chunks.push(bytes);
        gathered += bytes.length;
        this.received += bytes.length;
        if (this.onProgress) {
          try { this.onProgress(this.received, this.size); } catch { /* a throwing callback does not stop the download */ }
        }
        // Also as soon as a reader waits for bytes gathered here (the header, the range a
        // tensor needs next), so that nothing waits for a piece to fill.
        if (gathered >= PIECE_BYTES || this.waiters.some((w) => w.end <= this.received)) flush();
      }
      if (this.received < this.size) {
        throw domException('NetworkError', `${this.name}: the download ended after ${this.received} of ${this.size} bytes`);
      }
      flush();
      await this.writer.close();
    } catch (e) {
      if (writeError?.name === 'QuotaExceededError' || e?.name === 'QuotaExceededError') {
        throw domException('QuotaExceededError', `${this.name}: caching the download needs ${this.size} bytes, `
          + `writing failed after ${this.available} bytes: ${(writeError ?? e).message}`);
      }
      if (writeError) {
        throw domException('UnknownError', `${this.name}: writing the cache file failed after ${this.available} bytes: ${writeError.message}`);
      }
      throw e;
    }
    const file = await this.handle.getFile();
    if (file.size !== this.size) {
      throw domException('DataError', `${this.name}: the committed file is ${file.size} bytes, not ${this.size}`);
    }
    const sha256 = await sha256OfBlob(file);
    if (this.error) throw this.error;
    const writable = await (await this.records.getFileHandle(`${this.name}.json`, { create: true })).createWritable();
    await writable.write(JSON.stringify({ byteLength: this.size, sha256, url: this.url }));
    await writable.close();
    this.file = file;
    this.pieces = [];
    this.starts = [];
    this.recent = [];
    return this.handle;
  }

  // A Range request for the rest of the body, with If-Range so that a changed file is not
  // spliced onto the old one; anything but a 206 for exactly the rest is an interruption.
  async resume() {
    const headers = { Range: `bytes=${this.received}-` };
    if (this.etag) headers['If-Range'] = this.etag;
    const interrupted = (why) => domException('NetworkError',
      `${this.name}: the download was interrupted after ${this.received} of ${this.size} bytes and could not resume: ${why}`);
    let response;
    try {
      response = await fetch(this.url, { headers, cache: 'no-store' });
    } catch (e) {
      throw interrupted(e.message);
    }
    const range = /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec(response.headers.get('content-range') ?? '');
    if (response.status !== 206 || !range || Number(range[1]) !== this.received || Number(range[2]) !== this.size - 1) {
      response.body?.cancel().catch(() => {});
      throw interrupted(`the server answered ${response.status} ${response.headers.get('content-range') ?? ''}`.trim());
    }
    return response.body.getReader();
  }

  // Resolves once bytes [0, end) have arrived.
  arrived(end) {
    if (this.error) return Promise.reject(this.error);
    if (this.available >= end) return Promise.resolve();
    return new Promise((resolve, reject) => this.waiters.push({ end, resolve, reject }));
  }

  // The arrived bytes [start, end) as a Blob: of the committed file, or of the pieces.
  blob(start, end) {
    if (this.error) throw this.error;
    if (this.file) return this.file.slice(start, end);
    let first = this.starts.length - 1;
    while (first > 0 && this.starts[first] > start) first--;
    let last = first;
    while (last < this.pieces.length && this.starts[last] < end) last++;
    const from = this.starts[first];
    return new Blob(this.pieces.slice(first, last)).slice(start - from, end - from);
  }

  // A view of arrived bytes from `start` (to `end` at most, within one chunk) still in memory,
  // or null.
  recentBytes(start, end) {
    for (const piece of this.recent) {
      let at = piece.start;
      for (const chunk of piece.chunks) {
        if (start >= at && start < at + chunk.length) return chunk.subarray(start - at, Math.min(chunk.length, end - at));
        at += chunk.length;
      }
    }
    return null;
  }

  // Blob's surface, as BlobSource and BlobRangeReader use it.
  slice(start = 0, end = this.size) {
    const download = this;
    end = Math.min(end, this.size);
    return {
      async arrayBuffer() {
        await download.arrived(end);
        return download.blob(start, end).arrayBuffer();
      },
      // The range as it arrives: each read waits for the next piece, then streams what is there.
      stream() {
        let at = start;
        let reader = null;
        return new ReadableStream({
          async pull(controller) {
            for (;;) {
              if (reader) {
                const { value, done } = await reader.read();
                if (!done) {
                  controller.enqueue(value);
                  return;
                }
                reader = null;
              }
              if (at >= end) {
                controller.close();
                return;
              }
              // A megabyte at a time (or the rest): the download gathers what a waiting
              // reader needs into a piece at once, and pieces of a few chunks would be many.
              await download.arrived(Math.min(end, at + STREAM_STEP_BYTES));
              const view = download.recentBytes(at, end);
              if (view) {
                at += view.length;
                controller.enqueue(view);
                return;
              }
              const to = Math.min(end, download.available);
              reader = download.blob(at, to).stream().getReader();
              at = to;
            }
          },
          cancel: () => reader?.cancel(),
        });
      },
    };
  }
}

// openWeights(Response or ReadableStream): the synchronous checks (TypeErrors); returns the
// WeightDownload (not started) and the body it reads.
function checkDownload(source, byteLength, cacheName, onProgress) {
  let url = null;
  let resumable = false;
  let etag = null;
  if (source instanceof Response) {
    if (source.bodyUsed || source.body === null || source.body.locked) {
      throw new TypeError('openWeights(): the Response has no unread body');
    }
    if (source.status !== 200) {
      throw new TypeError(`openWeights(): the Response's status is ${source.status}, not 200`);
    }
    url = source.url || null;
    const encoded = (source.headers.get('content-encoding') ?? 'identity') !== 'identity';
    const length = source.headers.get('content-length');
    // A compressed body's Content-Length is not the file's.
    if (byteLength === undefined && length !== null && !encoded && /^\d+$/.test(length)) byteLength = Number(length);
    if (byteLength === undefined) {
      throw new TypeError('openWeights(): the Response has no usable Content-Length: pass options.byteLength');
    }
    if (cacheName === undefined) {
      const segment = url ? new URL(url).pathname.split('/').pop() : '';
      cacheName = toCacheName(decodeURIComponent(segment), 'openWeights(): the last segment of the Response\'s URL');
    }
    resumable = url !== null && source.headers.get('accept-ranges') === 'bytes';
    etag = source.headers.get('etag');
  } else {
    if (source.locked) throw new TypeError('openWeights(): the ReadableStream is locked');
    if (byteLength === undefined) throw new TypeError('openWeights(): a ReadableStream needs options.byteLength');
    if (cacheName === undefined) throw new TypeError('openWeights(): a ReadableStream needs options.cacheName');
  }
  const download = new WeightDownload(cacheName, byteLength, url, resumable, etag, onProgress);
  return { download, body: source instanceof Response ? source.body : source };
}

// ---- MLGraph ----

function graphDescriptors(g) {
  if (!g.descriptors) {
    const { inputs, outputs } = g.handle.descriptors();
    const frozen = (record) => Object.freeze(Object.fromEntries(Object.entries(record).map(([name, d]) => [
      name, Object.freeze({ dataType: d.dataType, shape: Object.freeze(d.shape) })])));
    g.descriptors = { inputs: frozen(inputs), outputs: frozen(outputs) };
  }
  return g.descriptors;
}

class MLGraph {
  constructor(token, handle, context) {
    if (token !== INTERNAL) throw new TypeError('Illegal constructor');
    slots.set(this, { kind: 'MLGraph', handle, context, destroyed: false });
  }

  destroy() {
    const g = slotOf(this, 'MLGraph', 'this');
    g.destroyed = true;
    g.handle.destroy();
  }

  // The graph cache proposal's members: each input's and output's MLOperandDescriptor by name.
  get inputs() { return graphDescriptors(slotOf(this, 'MLGraph', 'this')).inputs; }
  get outputs() { return graphDescriptors(slotOf(this, 'MLGraph', 'this')).outputs; }

  // Extensions (docs/EXTENSIONS.md): device memory residency.
  async swapOut(options = {}) {
    const g = slotOf(this, 'MLGraph', 'this');
    const { to } = readMembers(options, 'swapOut(): options', { to: [(v, what) => toEnum(v, ['host', 'disk'], what), 'host'] });
    await g.handle.swapOut(to);
  }

  async swapIn() {
    await slotOf(this, 'MLGraph', 'this').handle.swapIn();
  }

  get residency() { return slotOf(this, 'MLGraph', 'this').handle.residency(); }
  get deviceBytes() { return slotOf(this, 'MLGraph', 'this').handle.deviceBytes(); }
  get hostBytes() { return slotOf(this, 'MLGraph', 'this').handle.hostBytes(); }
  // Under a memoryBudget, lower priorities are evicted first. A value that is not an
  // MLEvictionPriority is ignored, as WebIDL does for enum attributes.
  get evictionPriority() { return slotOf(this, 'MLGraph', 'this').handle.evictionPriority(); }
  set evictionPriority(value) {
    slotOf(this, 'MLGraph', 'this').handle.setEvictionPriority(String(value));
  }
}
defineInterface(MLGraph, 'MLGraph');

// ---- MLOperand ----

class MLOperand {
  constructor(token, builder, index, dataType, shape) {
    if (token !== INTERNAL) throw new TypeError('Illegal constructor');
    slots.set(this, { kind: 'MLOperand', builder, index, dataType, shape: Object.freeze([...shape]) });
  }

  get dataType() { return slotOf(this, 'MLOperand', 'this').dataType; }
  get shape() { return slotOf(this, 'MLOperand', 'this').shape; }
}
defineInterface(MLOperand, 'MLOperand');

// ---- MLGraphBuilder ----

// One entry per builder method that records an operator: `args` are the positional parameters
// as [name, kind] ('operand', 'operands' = sequence<MLOperand>, or a converter kind: 'ulong',
// 'ulongs', 'uint', 'uints', 'long', 'double', 'float', 'floats', 'boolean', 'MLNumber',
// 'dataType', 'splits', or an array of enum values); `options` maps each member of the options
// dictionary (beyond MLOperatorOptions.label) to [kind, default] -- an 'operand' member is
// appended to the operator's inputs in table order and passed as `true`; `sequence` marks a
// method returning sequence<MLOperand>. docs/DESIGN.md ("Adding an operator") lists the other
// places an operator touches.
const A = [['a', 'operand']];
const AB = [['a', 'operand'], ['b', 'operand']];
const INPUT = [['input', 'operand']];
const REDUCE = { args: INPUT, options: { axes: ['ulongs'], keepDimensions: ['boolean', false] } };
const LAYOUT = ['nchw', 'nhwc'];
const RNN_DIRECTIONS = ['forward', 'backward', 'both'];
const POOL = {
  args: INPUT,
  options: {
    windowDimensions: ['ulongs'],
    padding: ['ulongs'],
    strides: ['ulongs'],
    dilations: ['ulongs'],
    layout: [LAYOUT, 'nchw'],
    outputShapeRounding: [['floor', 'ceil'], 'floor'],
    outputSizes: ['ulongs'],
  },
};
const CONV_COMMON = {
  padding: ['ulongs'],
  strides: ['ulongs'],
  dilations: ['ulongs'],
  groups: ['ulong', 1],
  inputLayout: [LAYOUT, 'nchw'],
};

const OPERATORS = {
  // Element-wise binary.
  add: { args: AB },
  sub: { args: AB },
  mul: { args: AB },
  div: { args: AB },
  max: { args: AB },
  min: { args: AB },
  pow: { args: AB },
  // Element-wise logical.
  equal: { args: AB },
  notEqual: { args: AB },
  greater: { args: AB },
  greaterOrEqual: { args: AB },
  lesser: { args: AB },
  lesserOrEqual: { args: AB },
  logicalNot: { args: A },
  logicalAnd: { args: AB },
  logicalOr: { args: AB },
  logicalXor: { args: AB },
  isNaN: { args: A },
  isInfinite: { args: A },
  // Element-wise unary.
  abs: { args: INPUT },
  ceil: { args: INPUT },
  cos: { args: INPUT },
  erf: { args: INPUT },
  exp: { args: INPUT },
  floor: { args: INPUT },
  identity: { args: INPUT },
  log: { args: INPUT },
  neg: { args: INPUT },
  reciprocal: { args: INPUT },
  roundEven: { args: INPUT },
  sin: { args: INPUT },
  sign: { args: INPUT },
  sqrt: { args: INPUT },
  tan: { args: INPUT },
  // Activations.
  relu: { args: INPUT },
  sigmoid: { args: INPUT },
  tanh: { args: INPUT },
  gelu: { args: INPUT },
  leakyRelu: { args: INPUT, options: { alpha: ['double', 0.01] } },
  clamp: { args: INPUT, options: { minValue: ['MLNumber'], maxValue: ['MLNumber'] } },
  elu: { args: INPUT, options: { alpha: ['double', 1] } },
  hardSigmoid: { args: INPUT, options: { alpha: ['double', 0.2], beta: ['double', 0.5] } },
  hardSwish: { args: INPUT },
  linear: { args: INPUT, options: { alpha: ['double', 1], beta: ['double', 0] } },
  prelu: { args: [...INPUT, ['slope', 'operand']] },
  softplus: { args: INPUT },
  softsign: { args: INPUT },
  // Matrix multiplication.
  matmul: { args: AB },
  gemm: {
    args: AB,
    options: { c: ['operand'], alpha: ['double', 1], beta: ['double', 1], aTranspose: ['boolean', false], bTranspose: ['boolean', false] },
  },
  // Data movement.
  reshape: { args: [...INPUT, ['newShape', 'ulongs']] },
  expand: { args: [...INPUT, ['newShape', 'ulongs']] },
  transpose: { args: INPUT, options: { permutation: ['ulongs'] } },
  concat: { args: [['inputs', 'operands'], ['axis', 'ulong']] },
  split: { args: [...INPUT, ['splits', 'splits']], options: { axis: ['ulong', 0] }, sequence: true },
  slice: { args: [...INPUT, ['starts', 'ulongs'], ['sizes', 'ulongs']], options: { strides: ['ulongs'] } },
  gather: { args: [...INPUT, ['indices', 'operand']], options: { axis: ['ulong', 0] } },
  gatherElements: { args: [...INPUT, ['indices', 'operand']], options: { axis: ['ulong', 0] } },
  gatherND: { args: [...INPUT, ['indices', 'operand']] },
  scatterElements: { args: [...INPUT, ['indices', 'operand'], ['updates', 'operand']], options: { axis: ['ulong', 0] } },
  scatterND: { args: [...INPUT, ['indices', 'operand'], ['updates', 'operand']] },
  tile: { args: [...INPUT, ['repetitions', 'uints']] },
  reverse: { args: INPUT, options: { axes: ['ulongs'] } },
  pad: {
    args: [...INPUT, ['beginningPadding', 'ulongs'], ['endingPadding', 'ulongs']],
    options: { mode: [['constant', 'edge', 'reflection'], 'constant'], value: ['MLNumber', 0] },
  },
  triangular: { args: INPUT, options: { upper: ['boolean', true], diagonal: ['long', 0] } },
  cumulativeSum: { args: [...INPUT, ['axis', 'uint']], options: { exclusive: ['boolean', false], reversed: ['boolean', false] } },
  argMin: { args: [...INPUT, ['axis', 'ulong']], options: { keepDimensions: ['boolean', false], outputDataType: ['dataType', 'int32'] } },
  argMax: { args: [...INPUT, ['axis', 'ulong']], options: { keepDimensions: ['boolean', false], outputDataType: ['dataType', 'int32'] } },
  cast: { args: [...INPUT, ['dataType', 'dataType']] },
  where: { args: [['condition', 'operand'], ['trueValue', 'operand'], ['falseValue', 'operand']] },
  // Reductions and normalization.
  softmax: { args: [...INPUT, ['axis', 'ulong']] },
  reduceL1: REDUCE,
  reduceL2: REDUCE,
  reduceLogSum: REDUCE,
  reduceLogSumExp: REDUCE,
  reduceMax: REDUCE,
  reduceMean: REDUCE,
  reduceMin: REDUCE,
  reduceProduct: REDUCE,
  reduceSum: REDUCE,
  reduceSumSquare: REDUCE,
  layerNormalization: {
    args: INPUT,
    options: { scale: ['operand'], bias: ['operand'], axes: ['ulongs'], epsilon: ['double', 1e-5] },
  },
  batchNormalization: {
    args: [...INPUT, ['mean', 'operand'], ['variance', 'operand']],
    options: { scale: ['operand'], bias: ['operand'], axis: ['ulong', 1], epsilon: ['double', 1e-5] },
  },
  instanceNormalization: {
    args: INPUT,
    options: { scale: ['operand'], bias: ['operand'], epsilon: ['double', 1e-5], layout: [LAYOUT, 'nchw'] },
  },
  // Convolutions and pooling.
  conv2d: {
    args: [...INPUT, ['filter', 'operand']],
    options: { ...CONV_COMMON, filterLayout: [['oihw', 'hwio', 'ohwi', 'ihwo'], 'oihw'], bias: ['operand'] },
  },
  convTranspose2d: {
    args: [...INPUT, ['filter', 'operand']],
    options: {
      ...CONV_COMMON,
      outputPadding: ['ulongs'],
      outputSizes: ['ulongs'],
      filterLayout: [['iohw', 'hwoi', 'ohwi'], 'iohw'],
      bias: ['operand'],
    },
  },
  averagePool2d: POOL,
  l2Pool2d: POOL,
  maxPool2d: POOL,
  // Resampling and quantization.
  resample2d: {
    args: INPUT,
    options: { mode: [['nearest-neighbor', 'linear'], 'nearest-neighbor'], scales: ['floats'], sizes: ['ulongs'], axes: ['ulongs'] },
  },
  quantizeLinear: { args: [...INPUT, ['scale', 'operand'], ['zeroPoint', 'operand']] },
  dequantizeLinear: { args: [...INPUT, ['scale', 'operand'], ['zeroPoint', 'operand']] },
  // Recurrent networks.
  gru: {
    args: [...INPUT, ['weight', 'operand'], ['recurrentWeight', 'operand'], ['steps', 'ulong'], ['hiddenSize', 'ulong']],
    options: {
      bias: ['operand'],
      recurrentBias: ['operand'],
      initialHiddenState: ['operand'],
      resetAfter: ['boolean', true],
      returnSequence: ['boolean', false],
      direction: [RNN_DIRECTIONS, 'forward'],
      layout: [['zrn', 'rzn'], 'zrn'],
      activations: ['recurrentNetworkActivations'],
    },
    sequence: true,
  },
  gruCell: {
    args: [...INPUT, ['weight', 'operand'], ['recurrentWeight', 'operand'], ['hiddenState', 'operand'], ['hiddenSize', 'ulong']],
    options: {
      bias: ['operand'],
      recurrentBias: ['operand'],
      resetAfter: ['boolean', true],
      layout: [['zrn', 'rzn'], 'zrn'],
      activations: ['recurrentNetworkActivations'],
    },
  },
  lstm: {
    args: [...INPUT, ['weight', 'operand'], ['recurrentWeight', 'operand'], ['steps', 'ulong'], ['hiddenSize', 'ulong']],
    options: {
      bias: ['operand'],
      recurrentBias: ['operand'],
      peepholeWeight: ['operand'],
      initialHiddenState: ['operand'],
      initialCellState: ['operand'],
      returnSequence: ['boolean', false],
      direction: [RNN_DIRECTIONS, 'forward'],
      layout: [['iofg', 'ifgo'], 'iofg'],
      activations: ['recurrentNetworkActivations'],
    },
    sequence: true,
  },
  lstmCell: {
    args: [
      ...INPUT,
      ['weight', 'operand'],
      ['recurrentWeight', 'operand'],
      ['hiddenState', 'operand'],
      ['cellState', 'operand'],
      ['hiddenSize', 'ulong'],
    ],
    options: {
      bias: ['operand'],
      recurrentBias: ['operand'],
      peepholeWeight: ['operand'],
      layout: [['iofg', 'ifgo'], 'iofg'],
      activations: ['recurrentNetworkActivations'],
    },
    sequence: true,
  },
};

class MLGraphBuilder {
  constructor(context) {
    if (arguments.length < 1) throw new TypeError('MLGraphBuilder() needs an MLContext');
    slotOf(context, 'MLContext', 'MLGraphBuilder(): context');
    const handle = slots.get(context).handle.createBuilder();
    slots.set(this, { kind: 'MLGraphBuilder', handle, context, built: false });
  }

  input(name, descriptor) {
    const b = slotOf(this, 'MLGraphBuilder', 'this');
    if (arguments.length < 2) throw new TypeError('input() needs 2 arguments');
    const n = toString(name, 'input(): name');
    const d = toOperandDescriptor(descriptor, 'input(): descriptor');
    return this.#operand(b.handle.input(n, d.dataType, d.shape), d.dataType, d.shape);
  }

  constant(...args) {
    const b = slotOf(this, 'MLGraphBuilder', 'this');
    if (args.length === 0) throw new TypeError('constant() needs at least 1 argument');
    if (args.length === 1) {
      // constant(tensor)
      const t = slotOf(args[0], 'MLTensor', 'constant(): tensor');
      if (t.context !== b.context) throw new TypeError('constant(): the MLTensor belongs to another MLContext');
      if (t.destroyed) throw new TypeError('constant(): the MLTensor is destroyed');
      if (!t.constant) throw new TypeError('constant(): the MLTensor is not a constant tensor');
      const { dataType, shape } = t.descriptor;
      return this.#operand(b.handle.constantTensor(t.handle), dataType, shape);
    }
    const [first, second] = args;
    if (first === undefined || first === null || typeof first === 'object' || typeof first === 'function') {
      // constant(descriptor, buffer)
      const d = toOperandDescriptor(first, 'constant(): descriptor');
      const bytes = toBytes(second, 'constant(): buffer');
      this.#checkCanBuild(b);
      slots.get(b.context).handle.checkDimensions(d.dataType, d.shape);
      validateBuffer(second, bytes, d, 'constant(): buffer');
      // A JS-owned copy, kept as the constant's host copy outside wasm memory.
      return this.#operand(b.handle.constant(d.dataType, d.shape, bytes.slice()), d.dataType, d.shape);
    }
    // constant(dataType, value)
    const dataType = toEnum(first, DATA_TYPES, 'constant(): dataType');
    const number = CONVERT.MLNumber(second, 'constant(): value');
    return this.#operand(b.handle.constantScalar(dataType, number), dataType, []);
  }

  async build(outputs) {
    const b = slotOf(this, 'MLGraphBuilder', 'this');
    const named = toRecord(outputs, 'build(): outputs', (v, what) => this.#operandIndex(v, what));
    const promise = b.handle.build(named.map(([name]) => name), Uint32Array.from(named, ([, index]) => index));
    b.built = true;
    const handle = await promise;
    return new MLGraph(INTERNAL, handle, b.context);
  }

  #checkCanBuild(b) {
    if (b.built) throw domException('InvalidStateError', 'the MLGraphBuilder has already built a graph');
    if (slots.get(b.context).handle.isLost()) throw domException('InvalidStateError', 'the MLContext is lost');
  }

  #operand(index, dataType, shape) {
    return new MLOperand(INTERNAL, this, index, dataType, shape);
  }

  #operandIndex(value, what) {
    const o = slotOf(value, 'MLOperand', what);
    if (o.builder !== this) throw new TypeError(`${what} was created by another MLGraphBuilder`);
    return o.index;
  }

  #operator(name, spec, args) {
    const b = slotOf(this, 'MLGraphBuilder', 'this');
    const required = spec.args.length;
    if (args.length < required) throw new TypeError(`${name}() needs ${required} arguments, got ${args.length}`);
    const inputs = [];
    const params = {};
    spec.args.forEach(([argName, kind], i) => {
      const what = `${name}(): ${argName}`;
      if (kind === 'operand') inputs.push(this.#operandIndex(args[i], what));
      else if (kind === 'operands') inputs.push(...toSequence(args[i], what, (v, w) => this.#operandIndex(v, w)));
      else params[argName] = converter(kind)(args[i], what);
    });
    const options = toDictionary(args[required], `${name}(): options`);
    // MLOperatorOptions, the inherited dictionary, is read first.
    const { label } = readMembers(options, `${name}(): options`, { label: [toString, ''] });
    params.label = label;
    const members = Object.entries(spec.options ?? {});
    const values = readMembers(options, `${name}(): options`, Object.fromEntries(members.map(([key, [kind, fallback]]) => (
      [key, kind === 'operand' ? [(v, what) => this.#operandIndex(v, what), undefined] : [converter(kind), fallback]]))));
    // Operand members join the inputs in table order, which src/api/ops.rs expects.
    for (const [key, [kind]] of members) {
      if (kind === 'operand') {
        params[key] = values[key] !== undefined;
        if (values[key] !== undefined) inputs.push(values[key]);
      } else if (values[key] !== undefined) {
        params[key] = values[key];
      }
    }
    const outputs = b.handle.operator(name, Uint32Array.from(inputs), params);
    const operands = outputs.map((o) => this.#operand(o.index, o.dataType, o.shape));
    return spec.sequence ? operands : operands[0];
  }

  static {
    for (const [name, spec] of Object.entries(OPERATORS)) {
      const method = {
        [name](...args) {
          slotOf(this, 'MLGraphBuilder', 'this');
          return this.#operator(name, spec, args);
        },
      }[name];
      // A WebIDL operation's length is its count of required arguments.
      Object.defineProperty(method, 'length', { value: spec.args.length });
      Object.defineProperty(MLGraphBuilder.prototype, name, { value: method, writable: true, enumerable: true, configurable: true });
    }
  }
}
// constant(tensor) is the shortest overload.
defineInterface(MLGraphBuilder, 'MLGraphBuilder', { length: 1, lengths: { constant: 1 } });

// ---- install ----

const INTERFACES = { ML, MLContext, MLGraphBuilder, MLOperand, MLGraph, MLTensor, MLWeightFile };
let ml;

/**
 * Defines `navigator.ml` and the WebNN interfaces on `globalThis` (a Window or a dedicated,
 * shared or service Worker: the spec's `Exposed=(Window, Worker)`). Like them, it is
 * `[SecureContext]`: elsewhere nothing is installed. A browser's own WebNN is left alone unless
 * `force` is true. The backend is `backend` (an already loaded wasm module's) or what `loader()`
 * resolves to, loaded on the first `createContext()`. Returns whether the interfaces were
 * installed.
 */
export function install({ force = false, backend, loader } = {}) {
  const g = globalThis;
  if (g.isSecureContext === false) return false;
  const navigator = g.navigator;
  const nativeML = navigator !== undefined && 'ml' in navigator && !(navigator.ml instanceof ML);
  if (nativeML && !force) return false;
  if (backend !== undefined) {
    backendPromise = Promise.resolve(backend);
  } else if (loader !== undefined) {
    backendLoader = loader;
  }
  ml ??= new ML(INTERNAL);
  for (const [name, cls] of Object.entries(INTERFACES)) {
    Object.defineProperty(g, name, { value: cls, writable: true, enumerable: false, configurable: true });
  }
  if (navigator !== undefined) {
    // The NavigatorML mixin: an accessor on Navigator.prototype (WorkerNavigator.prototype in a
    // worker), [SameObject]. A navigator that is a plain object gets an own property instead of
    // one on Object.prototype.
    const proto = Object.getPrototypeOf(navigator);
    const target = proto === null || proto === Object.prototype ? navigator : proto;
    const { get } = Object.getOwnPropertyDescriptor({
      get ml() {
        if (this !== navigator) throw new TypeError('the ml getter needs a Navigator');
        return ml;
      },
    }, 'ml');
    Object.defineProperty(target, 'ml', { get, set: undefined, enumerable: true, configurable: true });
  }
  return true;
}

export { ML, MLContext, MLGraphBuilder, MLOperand, MLGraph, MLTensor, MLWeightFile };

/**
 * Internal hooks for the robustness tests, not part of WebNN: `gpuDevice(context)` is the
 * GPUDevice behind an MLContext (tests/browser/device_loss.mjs destroys it to simulate a lost
 * device); `wasmMemoryBytes(context)` the size of the wasm memory (tests/browser/leaks.mjs);
 * `failNextAllocations(context, n)` makes the next n GPU allocations report out of memory
 * (tests/browser/device_loss.mjs).
 */
export const testing = Object.freeze({
  gpuDevice(context) {
    return slotOf(context, 'MLContext', 'context').handle.gpuDevice();
  },
  failNextAllocations(context, n) {
    slotOf(context, 'MLContext', 'context').handle.failNextAllocations(n >>> 0);
  },
  // The byte length of the wasm module's memory (it only grows).
  wasmMemoryBytes(context) {
    return slotOf(context, 'MLContext', 'context').handle.wasmMemoryBytes();
  },
});
