//! Device memory primitives: host copies of constants, constants shared by several graphs with
//! their residency, the context-wide pool of intermediate buffers, and the memory budget with
//! least-recently-used eviction of graphs, and device buffers with exact accounting. The device
//! itself is behind [`Allocator`], which the WebGPU context implements.

pub mod buffer;
pub mod budget;
pub mod constant;
pub mod host;
pub mod host_cache;
pub mod pool;
pub mod read_ahead;

pub use buffer::{BufferRegistry, DeviceBuffer};
pub use budget::{MemoryInfo, MemoryState};
pub use constant::{FileBacked, Reread, Restream, SharedConstant};
pub use host::HostBytes;
pub use host_cache::HostCache;
pub use pool::IntermediatePool;

/// What residency needs from a device: its buffer registry (freed buffers to reuse), buffers
/// created without waiting for the allocation's verdict (the caller holds the error scope), and
/// the queue that uploads host copies.
pub trait Allocator {
    fn buffers(&self) -> &BufferRegistry;
    fn create_buffer_unchecked(&self, size: u64, label: &str) -> DeviceBuffer;
    fn queue(&self) -> &wgpu::Queue;
}

/// Where a graph's constants are (`MLGraph.residency`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Residency {
    /// In GPU buffers, ready to dispatch.
    Device,
    /// Only in host copies (for constants from a weight file, the host budget's copies); no GPU
    /// memory held.
    Host,
    /// Only in the weight file they came from.
    Disk,
}

/// `MLGraph.evictionPriority`: under a memory budget, graphs of a lower priority are evicted
/// first, and the least recently dispatched first within one priority. A loop that runs some
/// graphs every step (attention, router) marks them `High` so that only the graphs it can afford
/// to reload (experts) cycle through the budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum EvictionPriority {
    Low,
    #[default]
    Normal,
    High,
}

impl EvictionPriority {
    pub fn name(self) -> &'static str {
        match self {
            EvictionPriority::Low => "low",
            EvictionPriority::Normal => "normal",
            EvictionPriority::High => "high",
        }
    }

    /// The priority an `MLEvictionPriority` string names, if it is one.
    pub fn from_name(name: &str) -> Option<EvictionPriority> {
        [EvictionPriority::Low, EvictionPriority::Normal, EvictionPriority::High].into_iter().find(|p| p.name() == name)
    }
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
