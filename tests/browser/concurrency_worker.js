// A dedicated module Worker that installs the polyfill and runs tests/browser/concurrency_cases.js.
import { install, init } from '/pkg/index.js';
import { runMany } from './concurrency_cases.js';

self.onmessage = async (event) => {
  try {
    install({ force: true, backend: 'webgpu' });
    await init();
    self.postMessage(await runMany(event.data));
  } catch (e) {
    self.postMessage({ ok: false, message: `worker: ${e?.name}: ${e?.message ?? e}` });
  }
};
