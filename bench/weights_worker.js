// The dedicated-Worker paths of weights.mjs: answers {path, file} with {ms} or {error}.
//   ours  openWeights(OPFS handle) + constantTensor() per tensor (sync access handles in a Worker)
//   sync  plain JS: createSyncAccessHandle(), read(view, {at}) of 8 MiB into one reused buffer,
//         GPUQueue.writeBuffer; every 4 chunks it waits for the writes before the previous 4
//         (onSubmittedWorkDone): synchronous reads never yield otherwise, and the whole file
//         would be queued before any of it reaches the GPU process (about 2x slower here)
// Like the Window paths, the time covers allocation and ends with a GPU round trip.
import { install, init } from '/pkg/index.js';

install({ force: true, backend: 'webgpu' });
const ready = init();
const CHUNK = 8 << 20;
let context;
let device;

const fileHandle = async (name) => (await navigator.storage.getDirectory()).getFileHandle(name);

async function ours(file) {
  await ready;
  context ??= await navigator.ml.createContext();
  const handle = await fileHandle(file.name);
  const probe = await context.createTensor({ dataType: 'float32', shape: [1], readable: true });
  const t0 = performance.now();
  const weights = await context.openWeights(handle);
  const tensors = [];
  for (const t of weights.tensors) tensors.push(await weights.constantTensor(t.name));
  await context.readTensor(probe);
  const ms = performance.now() - t0;
  tensors.forEach((t) => t.destroy());
  probe.destroy();
  return ms;
}

async function sync(file) {
  if (!device) {
    const adapter = await navigator.gpu.requestAdapter();
    const { maxBufferSize, maxStorageBufferBindingSize } = adapter.limits;
    device = await adapter.requestDevice({ requiredLimits: { maxBufferSize, maxStorageBufferBindingSize } });
  }
  const handle = await fileHandle(file.name);
  const staging = new Uint8Array(CHUNK);
  const t0 = performance.now();
  const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST;
  const buffers = Array.from({ length: file.count }, () => device.createBuffer({ size: file.tensorBytes, usage }));
  const access = await handle.createSyncAccessHandle();
  let previous = null;
  let chunks = 0;
  try {
    // The layout comes from the safetensors header (8-byte length, JSON), as for `ours`.
    const prefix = new DataView(new ArrayBuffer(8));
    access.read(prefix, { at: 0 });
    const length = Number(prefix.getBigUint64(0, true));
    const json = new Uint8Array(length);
    access.read(json, { at: 8 });
    const names = Object.keys(JSON.parse(new TextDecoder().decode(json))).filter((k) => k !== '__metadata__');
    if (8 + length !== file.prefixBytes || names.length !== file.count) throw new Error('header does not match the file');
    for (let t = 0; t < file.count; t++) {
      for (let o = 0; o < file.tensorBytes; o += CHUNK) {
        const n = access.read(staging, { at: file.prefixBytes + t * file.tensorBytes + o });
        if (n !== CHUNK) throw new Error(`read ${n} bytes`);
        device.queue.writeBuffer(buffers[t], o, staging);
        if (++chunks % 4 === 0) {
          const next = device.queue.onSubmittedWorkDone();
          if (previous) await previous;
          previous = next;
        }
      }
    }
  } finally {
    access.close();
  }
  await device.queue.onSubmittedWorkDone();
  const ms = performance.now() - t0;
  buffers.forEach((b) => b.destroy());
  await device.queue.onSubmittedWorkDone();
  return ms;
}

onmessage = async (e) => {
  try {
    const ms = await (e.data.path === 'ours' ? ours : sync)(e.data.file);
    postMessage({ ms });
  } catch (err) {
    postMessage({ error: `${err.name}: ${err.message}` });
  }
};
