// The atomics build (nightly, scripts/build-wasm.sh) waits and wakes CPU threads with wasm atomics.
#![cfg_attr(all(target_arch = "wasm32", target_feature = "atomics"), feature(stdarch_wasm_atomic_wait))]
//! webnn-wgpu: the WebNN API on WebGPU through wgpu, with device memory primitives.
//!
//! Crate map (docs/DESIGN.md, "Layers and backends", says which imports still go upward):
//! - [`operand`]: data types, operand descriptors and `MLNumber`.
//! - [`ops`]: one file per operator family: options, validation, WGSL lowering, float64
//!   reference, `opSupportLimits` entry.
//! - [`graph`]: the builder core that validates and records operators into the IR a backend
//!   runs (`GraphDescription`).
//! - [`plan`]: backend-independent planning: which operators are fused into one kernel.
//! - [`backend`]: what a backend provides; the WebGPU backend (`backend::webgpu`: device setup,
//!   allocation, the queue, reads, tensors, compiled graphs and dispatch), the CPU backend
//!   (`backend::cpu`) and the float64 reference backend that runs whole graphs on the host (the
//!   independent check of the other two).
//! - [`memory`]: residency of constants, the shared intermediate pool, the memory budget with
//!   least-recently-used eviction, host copies.
//! - [`weights`]: weight files (safetensors, GGUF): header readers and chunked streaming of
//!   tensors to the GPU with type conversion.
//! - [`api`] (wasm32 only): wasm-bindgen classes with the spec's JavaScript names; maps
//!   [`error::Error`] to `TypeError`/`DOMException` in one place.
//! - [`error`]: the core error with the spec's error kinds.

pub mod backend;
pub mod error;
pub mod graph;
pub mod memory;
pub mod ops;
pub mod operand;
pub mod plan;
pub mod weights;

#[cfg(target_arch = "wasm32")]
pub mod api;

pub use error::{Error, Result};
pub use graph::{DataType, GraphBuilder, Operand, OperandDescriptor};
pub use ops::Op;
pub use backend::webgpu::{Context, ContextOptions, Graph, Tensor, TensorDescriptor};
