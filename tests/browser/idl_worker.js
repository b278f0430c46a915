// The SharedWorker and ServiceWorker of tests/browser/idl.mjs: installs the polyfill in its own
// global, checks the interfaces there (WorkerNavigator's ml included) and computes a small graph;
// posts the result to the page that asked.
import { install } from '/pkg/index.js';
import { checkInterfaces, computeSmallGraph } from './idl_check.js';

async function run(model, scopes) {
  try {
    const installed = install({ force: true });
    const result = await checkInterfaces(model, scopes);
    return { installed, global: self.constructor.name, ...result, output: await computeSmallGraph() };
  } catch (e) {
    return { error: `${e?.name}: ${e?.message}` };
  }
}

if (typeof SharedWorkerGlobalScope === 'function' && self instanceof SharedWorkerGlobalScope) {
  self.onconnect = ({ ports: [port] }) => {
    port.onmessage = async ({ data: model }) => port.postMessage(await run(model, ['Worker', 'SharedWorker']));
  };
} else {
  self.onmessage = (event) => {
    event.waitUntil(run(event.data, ['Worker', 'ServiceWorker']).then((result) => event.ports[0].postMessage(result)));
  };
}
