//! The wgpu runtime: device and context setup, device buffers with exact accounting, the
//! pipeline cache, tensors, and compiled graphs with their execution plans.

pub mod allocation;
pub mod backend;
pub mod context;
pub mod dispatch;
pub mod graph;
pub mod lanes;
pub mod loader;
pub mod pipeline;
pub mod queue;
pub mod read;
pub mod saved;
pub mod tensor;

pub use crate::memory::buffer::{BufferRegistry, DeviceBuffer};
pub use crate::backend::{ContextOptions, PowerPreference, TensorDescriptor};
pub use context::Context;
pub use graph::Graph;
pub use tensor::Tensor;
