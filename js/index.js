// The package entry (copied to pkg/index.js by scripts/build-wasm.sh).
//
//   import { install } from './pkg/index.js';
//   install();                       // defines navigator.ml unless the browser has WebNN
//   const context = await navigator.ml.createContext();
//
// install() is synchronous: the wasm module is fetched and compiled on the first
// createContext(), or earlier by awaiting init().

import initPlain, * as plain from './webnn_wgpu.js';
import { install as installInterfaces } from './webnn.js';

let ready;
let chosenThreads = 'auto';

/**
 * The CPU backend's threads for `threads` ('auto' or a count): 1 unless the page is
 * cross-origin isolated (SharedArrayBuffer), where 'auto' is what onnxruntime-web's wasm EP
 * takes by default, min(4, ceil(hardwareConcurrency / 2)).
 */
function threadCount(threads) {
  if (globalThis.crossOriginIsolated !== true || typeof SharedArrayBuffer !== 'function' || typeof Worker !== 'function') return 1;
  if (threads === 'auto') return Math.min(4, Math.ceil((globalThis.navigator?.hardwareConcurrency || 1) / 2));
  return threads;
}

/**
 * Loads the atomics build and starts `threads - 1` Web Workers on its shared memory; each runs
 * kernel tasks of the CPU backend (js/cpu_worker.js). Resolves to the build's glue once the
 * workers that started have joined the pool (one that fails to start is left out).
 */
async function loadThreaded(threads) {
  const glue = await import('./webnn_wgpu_threads.js');
  const module = await WebAssembly.compileStreaming(fetch(new URL('./webnn_wgpu_threads_bg.wasm', import.meta.url)));
  const exports = await glue.default({ module_or_path: module });
  const started = await Promise.all(Array.from({ length: threads - 1 }, (_, i) => new Promise((resolve) => {
    const worker = new Worker(new URL('./cpu_worker.js', import.meta.url), { type: 'module', name: `webnn-cpu-${i + 1}` });
    worker.addEventListener('message', () => resolve(true), { once: true });
    worker.addEventListener('error', () => resolve(false), { once: true });
    worker.postMessage({ module, memory: exports.memory });
  })));
  // A worker says it is ready just before it joins; wait for the pool to count it.
  const expected = 1 + started.filter(Boolean).length;
  for (let i = 0; i < 1000 && glue.cpuThreads() < expected; i++) await new Promise((r) => setTimeout(r, 1));
  return glue;
}

/**
 * Loads the wasm module once; resolves to its backend. `moduleOrPath` is what wasm-bindgen's
 * init accepts (a URL, a Response, a WebAssembly.Module) for the plain build; the default is the
 * .wasm file beside this module. A cross-origin isolated page gets the atomics build with CPU
 * threads (see install's `threads`), or the plain build where that fails to load.
 */
export function init(moduleOrPath) {
  ready ??= (async () => {
    const threads = moduleOrPath === undefined ? threadCount(chosenThreads) : 1;
    let glue;
    if (threads > 1) {
      glue = await loadThreaded(threads).catch((e) => {
        console.warn(`webnn-wgpu: the threaded build did not load (${e?.message ?? e}); the CPU backend runs on one thread`);
      });
    }
    if (glue === undefined) {
      // Imported statically: a ServiceWorker may not import() (the atomics build is for pages
      // and Workers that can start Workers).
      await initPlain(moduleOrPath === undefined ? undefined : { module_or_path: moduleOrPath });
      glue = plain;
    }
    return { glue, backend: glue.backend() };
  })();
  // A failed load can be retried.
  ready.catch(() => { ready = undefined; });
  return ready.then((loaded) => loaded.backend);
}

const BACKENDS = ['auto', 'webgpu', 'cpu'];

/**
 * Defines `navigator.ml` and the WebNN interfaces on globalThis (a Window or a dedicated, shared
 * or service Worker), in a secure context only. A native WebNN implementation is left alone
 * unless `force` is true. `backend` says what contexts run on: `'auto'` (the default) is WebGPU
 * on a hardware GPU and the CPU backend where there is none or the only adapter is a software
 * one (SwiftShader, llvmpipe); `'webgpu'` takes any WebGPU adapter; `'cpu'` is always the CPU.
 * `createContext({accelerated: false})` is the CPU backend in every case. `threads` is the CPU
 * backend's thread count where the page is cross-origin isolated (`'auto'`, the default, is
 * min(4, ceil(hardwareConcurrency / 2)); elsewhere it runs on the page's thread). It takes effect
 * when the module loads (the first createContext() or init()). Returns whether the polyfill was
 * installed.
 */
export function install({ force = false, backend: preference = 'auto', threads = 'auto' } = {}) {
  if (!BACKENDS.includes(preference)) {
    throw new TypeError(`install(): backend must be one of ${BACKENDS.join(', ')}, not ${String(preference)}`);
  }
  if (threads !== 'auto' && !(Number.isInteger(threads) && threads >= 1 && threads <= 64)) {
    throw new TypeError(`install(): threads must be 'auto' or an integer from 1 to 64, not ${String(threads)}`);
  }
  chosenThreads = threads;
  return installInterfaces({
    force,
    loader: () => init().then(async (b) => {
      (await ready).glue.preferBackend(preference);
      return b;
    }),
  });
}

/** The CPU backend's threads in this page (1 until the module has loaded, or without threads). */
export async function cpuThreads() {
  return ready === undefined ? 1 : (await ready).glue.cpuThreads();
}

export { ML, MLContext, MLGraphBuilder, MLOperand, MLGraph, MLTensor, MLWeightFile } from './webnn.js';
