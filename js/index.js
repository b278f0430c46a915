// The package entry (copied to pkg/index.js by scripts/build-wasm.sh).
//
//   import { install } from './pkg/index.js';
//   install();                       // defines navigator.ml unless the browser has WebNN
//   const context = await navigator.ml.createContext();
//
// install() is synchronous: the wasm module is fetched and compiled on the first
// createContext(), or earlier by awaiting init().

import initWasm, { backend, preferBackend } from './webnn_wgpu.js';
import { install as installInterfaces } from './webnn.js';

let ready;

/**
 * Loads the wasm module once; resolves to its backend. `moduleOrPath` is what wasm-bindgen's
 * init accepts (a URL, a Response, a WebAssembly.Module); the default is the .wasm file beside
 * this module.
 */
export function init(moduleOrPath) {
  ready ??= initWasm(moduleOrPath === undefined ? undefined : { module_or_path: moduleOrPath }).then(() => backend());
  // A failed load can be retried.
  ready.catch(() => { ready = undefined; });
  return ready;
}

const BACKENDS = ['auto', 'webgpu', 'cpu'];

/**
 * Defines `navigator.ml` and the WebNN interfaces on globalThis (a Window or a dedicated, shared
 * or service Worker), in a secure context only. A native WebNN implementation is left alone
 * unless `force` is true. `backend` says what contexts run on: `'auto'` (the default) is WebGPU
 * on a hardware GPU and the CPU backend where there is none or the only adapter is a software
 * one (SwiftShader, llvmpipe); `'webgpu'` takes any WebGPU adapter; `'cpu'` is always the CPU.
 * `createContext({accelerated: false})` is the CPU backend in every case. Returns whether the
 * polyfill was installed.
 */
export function install({ force = false, backend: preference = 'auto' } = {}) {
  if (!BACKENDS.includes(preference)) {
    throw new TypeError(`install(): backend must be one of ${BACKENDS.join(', ')}, not ${String(preference)}`);
  }
  return installInterfaces({
    force,
    loader: () => init().then((b) => {
      preferBackend(preference);
      return b;
    }),
  });
}

export { ML, MLContext, MLGraphBuilder, MLOperand, MLGraph, MLTensor, MLWeightFile } from './webnn.js';
