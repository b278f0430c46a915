// A plain webpack 5 setup: webnn-wgpu's glue references its .wasm with
// new URL('webnn_wgpu_bg.wasm', import.meta.url), which webpack emits as an asset by itself.
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));

export default {
  mode: 'production',
  entry: path.join(here, 'src/main.js'),
  output: { path: path.join(here, 'dist'), filename: 'main.js', clean: true },
  performance: { hints: false },
};
