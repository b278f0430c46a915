//! The CPU backend: runs graphs in the page's thread (wasm, SIMD128) where no hardware GPU is
//! available or `accelerated: false` asks for it. Its "device" memory is buffers in wasm memory;
//! constants keep their host copies (JS-owned on the web) so that `swapOut()` frees that memory
//! and `swapIn()` copies them back, and constants from weight files are read from their files
//! again (the `"disk"` tier), under the same budget and eviction as the WebGPU backend.

pub mod backend;
pub mod buffer;
pub mod context;
pub mod graph;
pub mod kernel;
pub mod kernels;
pub mod loader;
pub mod saved;
pub mod tensor;
pub mod threads;

pub use context::CpuContext;
pub use graph::CpuGraph;
pub use tensor::CpuTensor;
