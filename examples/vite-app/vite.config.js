// Vite needs no setup for webnn-wgpu: the glue's new URL('webnn_wgpu_bg.wasm', import.meta.url)
// becomes a hashed asset, in the page's chunk and in the worker's. Top-level await needs an
// es2022 target; the module worker is bundled as an ES module.
export default {
  build: { target: 'es2022' },
  worker: { format: 'es' },
};
