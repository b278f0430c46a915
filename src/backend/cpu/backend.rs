//! The CPU backend behind the [`Backend`] seam.

use std::future::Future;
use std::rc::Rc;

use crate::backend::cpu::{CpuContext, CpuGraph, CpuTensor};
use crate::backend::{Backend, BackendGraph, BackendTensor, TensorDescriptor};
use crate::error::Result;
use crate::graph::GraphDescription;
use crate::memory::{EvictionPriority, HostBytes, MemoryInfo, Residency, SharedConstant};
use crate::operand::OperandDescriptor;

impl Backend for CpuContext {
    type Tensor = CpuTensor;
    type Graph = CpuGraph;

    fn accelerated(&self) -> bool {
        false
    }

    fn lost(&self) -> impl Future<Output = String> + 'static {
        CpuContext::lost(self)
    }

    fn destroy(&self) {
        CpuContext::destroy(self)
    }

    fn max_tensor_byte_length(&self) -> u64 {
        CpuContext::max_tensor_byte_length(self)
    }

    fn memory_info(&self) -> MemoryInfo {
        CpuContext::memory_info(self)
    }

    fn create_tensor(&self, descriptor: TensorDescriptor) -> impl Future<Output = Result<CpuTensor>> + 'static {
        std::future::ready(CpuContext::create_tensor(self, descriptor))
    }

    fn create_constant_tensor(&self, descriptor: OperandDescriptor, host: HostBytes) -> impl Future<Output = Result<CpuTensor>> + 'static {
        std::future::ready(CpuContext::create_constant_tensor(self, descriptor, host))
    }

    fn write_tensor(&self, tensor: &CpuTensor, bytes: &[u8]) -> Result<()> {
        CpuContext::write_tensor(self, tensor, bytes)
    }

    fn check_read(&self, tensor: &CpuTensor) -> Result<()> {
        CpuContext::check_read(self, tensor, None)
    }

    fn read_tensor(&self, tensor: &CpuTensor) -> impl Future<Output = Result<Vec<u8>>> + 'static {
        CpuContext::read_tensor(self, tensor)
    }

    /// Constants still in their files are read before the graph is returned.
    fn compile(&self, description: GraphDescription) -> impl Future<Output = Result<CpuGraph>> + 'static {
        let graph = CpuGraph::compile(self, description);
        async move {
            let graph = graph?;
            graph.swap_in().await?;
            Ok(graph)
        }
    }

    fn dispatch(&self, graph: &CpuGraph, inputs: &[(String, CpuTensor)], outputs: &[(String, CpuTensor)]) -> Result<()> {
        CpuContext::dispatch(self, graph, inputs, outputs)
    }
}

impl BackendTensor for CpuTensor {
    fn id(&self) -> u64 {
        CpuTensor::id(self)
    }

    fn descriptor(&self) -> &OperandDescriptor {
        CpuTensor::descriptor(self)
    }

    fn is_constant(&self) -> bool {
        CpuTensor::is_constant(self)
    }

    fn is_destroyed(&self) -> bool {
        CpuTensor::is_destroyed(self)
    }

    fn destroy(&self) {
        CpuTensor::destroy(self)
    }
}

impl BackendGraph for CpuGraph {
    fn destroy(&self) {
        CpuGraph::destroy(self)
    }

    /// After the dispatches already issued, which would swap the graph in again.
    fn swap_out(&self, to: Residency) -> impl Future<Output = Result<()>> + 'static {
        let graph = self.clone();
        async move {
            graph.check_usable()?;
            graph.context().settled().await;
            CpuGraph::swap_out(&graph, to)
        }
    }

    fn swap_in(&self) -> impl Future<Output = Result<()>> + 'static {
        let graph = self.clone();
        async move { CpuGraph::swap_in(&graph).await }
    }

    fn residency(&self) -> Residency {
        CpuGraph::residency(self)
    }

    fn device_bytes(&self) -> u64 {
        CpuGraph::device_bytes(self)
    }

    fn host_bytes(&self) -> u64 {
        CpuGraph::host_bytes(self)
    }

    fn eviction_priority(&self) -> EvictionPriority {
        CpuGraph::eviction_priority(self)
    }

    fn save(&self) -> Result<(Vec<u8>, Vec<Rc<SharedConstant>>)> {
        CpuGraph::save(self)
    }

    fn saved_constant_bytes(&self, constant: Rc<SharedConstant>) -> impl Future<Output = Result<Vec<u8>>> + 'static {
        let graph = self.clone();
        async move { graph.saved_constant_bytes(&constant).await }
    }

    fn set_eviction_priority(&self, priority: EvictionPriority) {
        CpuGraph::set_eviction_priority(self, priority)
    }
}
