// Bundles the demo page's script (www/index.js, which imports pkg/ from scripts/build-wasm.sh)
// into www/dist/demo.js; the .wasm it references with new URL(..., import.meta.url) is emitted
// beside it as an asset. Serve www/ with scripts/serve.mjs.
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.dirname(fileURLToPath(import.meta.url));

export default {
  mode: 'production',
  entry: path.join(root, 'www/index.js'),
  output: {
    path: path.join(root, 'www/dist'),
    filename: 'demo.js',
    assetModuleFilename: '[name][ext]',
    clean: true,
  },
  // pkg/ built for wasm-bindgen's bundler target imports the .wasm as a module instead.
  experiments: { asyncWebAssembly: true },
  performance: { hints: false },
  devtool: 'source-map',
};
