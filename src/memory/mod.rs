//! Device memory primitives: host copies of constants, constants shared by several graphs with
//! their residency, the context-wide pool of intermediate buffers, and the memory budget with
//! least-recently-used eviction of graphs.

pub mod budget;
pub mod constant;
pub mod host;
pub mod pool;

pub use budget::{MemoryInfo, MemoryState};
pub use constant::{Restream, SharedConstant};
pub use host::HostBytes;
pub use pool::IntermediatePool;

/// Where a graph's constants are (`MLGraph.residency`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Residency {
    /// In GPU buffers, ready to dispatch.
    Device,
    /// Only in host copies; no GPU memory held.
    Host,
    /// Only in the weight file they came from.
    Disk,
}

impl Residency {
    pub fn name(self) -> &'static str {
        match self {
            Residency::Device => "device",
            Residency::Host => "host",
            Residency::Disk => "disk",
        }
    }
}
