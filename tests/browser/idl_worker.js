// The SharedWorker of tests/browser/idl.mjs: installs the polyfill in its own global, checks the
// interfaces there (WorkerNavigator's ml included) and computes a small graph; posts the result
// to the page that connected.
import { install } from '/pkg/index.js';
import { checkInterfaces, computeSmallGraph } from './idl_check.js';

self.onconnect = ({ ports: [port] }) => {
  port.onmessage = async ({ data: model }) => {
    try {
      const installed = install({ force: true });
      const result = await checkInterfaces(model, ['Worker', 'SharedWorker']);
      port.postMessage({ installed, global: self.constructor.name, ...result, output: await computeSmallGraph() });
    } catch (e) {
      port.postMessage({ error: `${e?.name}: ${e?.message}` });
    }
  };
};
