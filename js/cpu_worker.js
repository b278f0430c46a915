// A CPU thread of webnn-wgpu's atomics build (started by index.js in a cross-origin isolated
// page): instantiates the module the page sends over the page's shared memory, then runs the
// CPU backend's kernel tasks as the page publishes them (cpuWorker never returns, so the worker answers 'ready' before it).
import { initSync, cpuWorker } from './webnn_wgpu_threads.js';

self.addEventListener('message', ({ data }) => {
  initSync({ module: data.module, memory: data.memory });
  self.postMessage('ready');
  cpuWorker();
}, { once: true });
