// Vite needs no setup for webnn-wgpu: the glue's new URL('webnn_wgpu_bg.wasm', import.meta.url)
// becomes a hashed asset. The top-level await in src/main.js needs an es2022 target.
export default {
  build: { target: 'es2022' },
};
