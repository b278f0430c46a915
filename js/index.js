// The package entry (copied to pkg/index.js by scripts/build-wasm.sh).
//
//   import { install } from './pkg/index.js';
//   install();                       // defines navigator.ml unless the browser has WebNN
//   const context = await navigator.ml.createContext();
//
// install() is synchronous: the wasm module is fetched and compiled on the first
// createContext(), or earlier by awaiting init().

import initWasm, { backend } from './webnn_wgpu.js';
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

/**
 * Defines `navigator.ml` and the WebNN interfaces on globalThis (a Window or a dedicated, shared
 * or service Worker), in a secure context only. A native WebNN implementation is left alone
 * unless `force` is true. Returns whether the polyfill was installed.
 */
export function install({ force = false } = {}) {
  return installInterfaces({ force, loader: () => init() });
}

export { ML, MLContext, MLGraphBuilder, MLOperand, MLGraph, MLTensor, MLWeightFile } from './webnn.js';
