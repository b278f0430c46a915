//! webnn-wgpu: the WebNN API on WebGPU through wgpu, with device memory primitives.
//!
//! Crate map (data flows downward):
//! - [`api`] (wasm32 only): wasm-bindgen classes with the spec's JavaScript names; maps
//!   [`error::Error`] to `TypeError`/`DOMException` in one place.
//! - [`graph`]: operand descriptors and the builder core that validates and records operators.
//! - [`ops`]: one file per operator family: options, validation, WGSL lowering, float64
//!   reference, `opSupportLimits` entry.
//! - [`runtime`]: wgpu device setup, buffer registry, pipeline cache, tensors, compiled graphs and
//!   dispatch.
//! - [`memory`]: residency of constants, the shared intermediate pool, the memory budget with
//!   least-recently-used eviction, host copies.
//! - [`weights`]: weight files (safetensors, GGUF): header readers and chunked streaming of
//!   tensors to the GPU with type conversion.
//! - [`error`]: the core error with the spec's error kinds.

pub mod error;
pub mod graph;
pub mod memory;
pub mod ops;
pub mod runtime;
pub mod weights;

#[cfg(target_arch = "wasm32")]
pub mod api;

pub use error::{Error, Result};
pub use graph::{DataType, GraphBuilder, Operand, OperandDescriptor};
pub use ops::Op;
pub use runtime::{Context, ContextOptions, Graph, Tensor, TensorDescriptor};
