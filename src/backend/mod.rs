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

pub mod cpu;
pub mod oneshot;
pub mod read_ahead;
pub mod reference;
pub mod saved;
pub mod webgpu;

use std::collections::BTreeMap;
use std::future::Future;
use std::rc::Rc;

use crate::error::{Error, Result};
use crate::graph::{BuilderContext, ConstantTensor, GraphDescription};
use crate::memory::{EvictionPriority, HostBytes, MemoryInfo, Residency, SharedConstant};
use crate::operand::OperandDescriptor;

/// `MLPowerPreference`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PowerPreference {
    #[default]
    Default,
    HighPerformance,
    LowPower,
}

/// `MLContextOptions`, with the `memoryBudget` extension.
#[derive(Debug, Clone)]
pub struct ContextOptions {
    pub power_preference: PowerPreference,
    pub accelerated: bool,
    /// Device bytes the context may hold before evicting least recently used graphs.
    pub memory_budget: Option<u64>,
    /// Host bytes of copies the context may keep of constants streamed from weight files, so
    /// that an evicted graph comes back from host memory instead of its file (`"host"` tier).
    pub host_memory_budget: Option<u64>,
}

impl Default for ContextOptions {
    fn default() -> Self {
        ContextOptions {
            power_preference: PowerPreference::Default,
            accelerated: true,
            memory_budget: None,
            host_memory_budget: None,
        }
    }
}

/// `MLTensorDescriptor`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorDescriptor {
    pub operand: OperandDescriptor,
    pub readable: bool,
    pub writable: bool,
}


/// The spec's "validating buffer with descriptor": the byte length must match exactly.
pub fn check_byte_length(descriptor: &OperandDescriptor, len: usize) -> Result<()> {
    if len as u64 != descriptor.byte_length() {
        return Err(Error::Type(format!(
            "the buffer holds {len} bytes but {descriptor} needs {}",
            descriptor.byte_length()
        )));
    }
    Ok(())
}

/// What the API needs of a backend's context: the seam the WebGPU and CPU backends implement.
/// Validation of the builder's operators is shared (in [`crate::ops`]); a backend validates
/// only what is its own (limits, its objects' contexts and states) and runs the graphs.
pub trait Backend: BuilderContext + Clone + 'static {
    type Tensor: BackendTensor + ConstantTensor + Clone + 'static;
    type Graph: BackendGraph + Clone + 'static;

    /// `MLContext.accelerated`: whether the context runs on a hardware GPU.
    fn accelerated(&self) -> bool;
    /// Resolves with the loss message once the context is lost or destroyed.
    fn lost(&self) -> impl Future<Output = String> + 'static;
    fn destroy(&self);
    fn max_tensor_byte_length(&self) -> u64;
    fn memory_info(&self) -> MemoryInfo;
    fn create_tensor(&self, descriptor: TensorDescriptor) -> impl Future<Output = Result<Self::Tensor>> + 'static;
    /// `createConstantTensor` from a host copy the caller made.
    fn create_constant_tensor(&self, descriptor: OperandDescriptor, host: HostBytes) -> impl Future<Output = Result<Self::Tensor>> + 'static;
    fn write_tensor(&self, tensor: &Self::Tensor, bytes: &[u8]) -> Result<()>;
    /// The synchronous checks of `readTensor`.
    fn check_read(&self, tensor: &Self::Tensor) -> Result<()>;
    /// `readTensor`: the read is issued now, in order with the calls around it.
    fn read_tensor(&self, tensor: &Self::Tensor) -> impl Future<Output = Result<Vec<u8>>> + 'static;
    /// Plans and lowers a built graph once.
    fn compile(&self, description: GraphDescription) -> impl Future<Output = Result<Self::Graph>> + 'static;
    fn dispatch(&self, graph: &Self::Graph, inputs: &[(String, Self::Tensor)], outputs: &[(String, Self::Tensor)]) -> Result<()>;
}

/// An `MLTensor` of a backend.
pub trait BackendTensor {
    /// Unique within its context.
    fn id(&self) -> u64;
    fn descriptor(&self) -> &OperandDescriptor;
    fn is_constant(&self) -> bool;
    fn is_destroyed(&self) -> bool;
    fn destroy(&self);
}

/// An `MLGraph` of a backend, with the residency of the memory extensions.
pub trait BackendGraph {
    fn destroy(&self);
    /// `swapOut({to})`: `Host` or `Disk`.
    fn swap_out(&self, to: Residency) -> impl Future<Output = Result<()>> + 'static;
    fn swap_in(&self) -> impl Future<Output = Result<()>> + 'static;
    fn residency(&self) -> Residency;
    fn device_bytes(&self) -> u64;
    fn host_bytes(&self) -> u64;
    fn eviction_priority(&self) -> EvictionPriority;
    fn set_eviction_priority(&self, priority: EvictionPriority);
    /// The graph cache's record of the graph (see [`saved`]) and its constants, in the order
    /// the record numbers them.
    fn save(&self) -> Result<(Vec<u8>, Vec<Rc<SharedConstant>>)>;
    /// The bytes saved for one of [`save`](Self::save)'s constants.
    fn saved_constant_bytes(&self, constant: Rc<SharedConstant>) -> impl Future<Output = Result<Vec<u8>>> + 'static;
}

/// The spec's checks of `dispatch(graph, inputs, outputs)` on its tensors, in its order (the
/// graph's own are the backend's): no tensor twice, each of this context (`ours`) and alive, and
/// "validate tensors with descriptors" for the inputs and the outputs. Returns the tensors in
/// the order of the graph's (sorted) descriptors.
pub fn check_dispatch<'a, T: BackendTensor>(
    inputs: &'a [(String, T)],
    outputs: &'a [(String, T)],
    input_descriptors: &[(String, OperandDescriptor)],
    output_descriptors: &[(String, OperandDescriptor)],
    ours: impl Fn(&T) -> bool,
) -> Result<(Vec<&'a T>, Vec<&'a T>)> {
    let all: Vec<&T> = inputs.iter().chain(outputs).map(|(_, t)| t).collect();
    for (i, a) in all.iter().enumerate() {
        if all[..i].iter().any(|b| b.id() == a.id() && ours(b) == ours(a)) {
            return Err(Error::Type("the same MLTensor is passed twice to dispatch()".into()));
        }
    }
    for tensor in &all {
        if !ours(tensor) {
            return Err(Error::Type("an MLTensor belongs to another MLContext".into()));
        }
        if tensor.is_destroyed() {
            return Err(Error::Type("an MLTensor passed to dispatch() is destroyed".into()));
        }
    }
    Ok((bind_named("input", inputs, input_descriptors)?, bind_named("output", outputs, output_descriptors)?))
}

/// The spec's "validate tensors with descriptors".
fn bind_named<'a, T: BackendTensor>(kind: &str, named: &'a [(String, T)], descriptors: &[(String, OperandDescriptor)]) -> Result<Vec<&'a T>> {
    if named.len() != descriptors.len() {
        return Err(Error::Type(format!("the graph has {} {kind}s but {} were given", descriptors.len(), named.len())));
    }
    let by_name: BTreeMap<&str, &T> = named.iter().map(|(n, t)| (n.as_str(), t)).collect();
    if by_name.len() != named.len() {
        return Err(Error::Type(format!("duplicate {kind} name")));
    }
    descriptors
        .iter()
        .map(|(name, descriptor)| {
            let tensor = *by_name.get(name.as_str()).ok_or_else(|| Error::Type(format!("missing {kind} '{name}'")))?;
            if tensor.is_constant() {
                return Err(Error::Type(format!("{kind} '{name}' is a constant MLTensor")));
            }
            if tensor.descriptor() != descriptor {
                return Err(Error::Type(format!(
                    "{kind} '{name}' is {} but the graph expects {descriptor}",
                    tensor.descriptor()
                )));
            }
            Ok(tensor)
        })
        .collect()
}
