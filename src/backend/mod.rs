//! Backends: what runs a validated graph. A backend takes a [`GraphDescription`] (the builder's
//! validated IR) and provides
//! - buffers for tensors and constants, with reads and writes of their bytes;
//! - a kernel for every operator it advertises in `opSupportLimits()` (with the same validation,
//!   which lives in [`crate::ops`], and results within the operators' tolerances);
//! - compile (plan and lower a description once) and dispatch (run it on bound tensors);
//! - residency hooks for the memory extensions: release and re-create a graph's buffers.
//!
//! Two backends exist: the WebGPU one in [`crate::runtime`] (wgpu; WGSL kernels from each
//! family's lowering) and [`reference`], which runs whole graphs with the families' float64
//! references on the host. The reference backend is the independent check the native tests run
//! every conformance case through, and the starting point of a CPU backend.

pub mod reference;
pub mod webgpu;
