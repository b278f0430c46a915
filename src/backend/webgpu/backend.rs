//! The WebGPU backend behind the [`Backend`] seam.

use std::future::Future;
use std::rc::Rc;

use crate::backend::webgpu::{Context, Graph, Tensor};
use crate::backend::{Backend, BackendGraph, BackendTensor, TensorDescriptor};
use crate::error::Result;
use crate::graph::GraphDescription;
use crate::memory::{EvictionPriority, HostBytes, MemoryInfo, Residency, SharedConstant};
use crate::operand::OperandDescriptor;

impl Backend for Context {
    type Tensor = Tensor;
    type Graph = Graph;

    fn accelerated(&self) -> bool {
        Context::accelerated(self)
    }

    fn lost(&self) -> impl Future<Output = String> + 'static {
        Context::lost(self)
    }

    fn destroy(&self) {
        Context::destroy(self)
    }

    fn max_tensor_byte_length(&self) -> u64 {
        Context::max_tensor_byte_length(self)
    }

    fn memory_info(&self) -> MemoryInfo {
        Context::memory_info(self)
    }

    fn create_tensor(&self, descriptor: TensorDescriptor) -> impl Future<Output = Result<Tensor>> + 'static {
        let context = self.clone();
        async move { context.create_tensor(descriptor).await }
    }

    fn create_constant_tensor(&self, descriptor: OperandDescriptor, host: HostBytes) -> impl Future<Output = Result<Tensor>> + 'static {
        let context = self.clone();
        async move { context.create_constant_tensor_host(descriptor, host).await }
    }

    fn write_tensor(&self, tensor: &Tensor, bytes: &[u8]) -> Result<()> {
        Context::write_tensor(self, tensor, bytes)
    }

    fn check_read(&self, tensor: &Tensor) -> Result<()> {
        Context::check_read(self, tensor, None)
    }

    fn read_tensor(&self, tensor: &Tensor) -> impl Future<Output = Result<Vec<u8>>> + 'static {
        Context::read_tensor(self, tensor)
    }

    fn compile(&self, description: GraphDescription) -> impl Future<Output = Result<Graph>> + 'static {
        let context = self.clone();
        async move { Graph::compile(&context, description).await }
    }

    fn dispatch(&self, graph: &Graph, inputs: &[(String, Tensor)], outputs: &[(String, Tensor)]) -> Result<()> {
        Context::dispatch(self, graph, inputs, outputs)
    }
}

impl BackendTensor for Tensor {
    fn id(&self) -> u64 {
        Tensor::id(self)
    }

    fn descriptor(&self) -> &OperandDescriptor {
        Tensor::descriptor(self)
    }

    fn is_constant(&self) -> bool {
        Tensor::is_constant(self)
    }

    fn is_destroyed(&self) -> bool {
        Tensor::is_destroyed(self)
    }

    fn destroy(&self) {
        Tensor::destroy(self)
    }
}

impl BackendGraph for Graph {
    fn destroy(&self) {
        Graph::destroy(self)
    }

    fn swap_out(&self, to: Residency) -> impl Future<Output = Result<()>> + 'static {
        let graph = self.clone();
        async move { graph.swap_out(to).await }
    }

    fn swap_in(&self) -> impl Future<Output = Result<()>> + 'static {
        let graph = self.clone();
        async move { graph.swap_in().await }
    }

    fn residency(&self) -> Residency {
        Graph::residency(self)
    }

    fn device_bytes(&self) -> u64 {
        Graph::device_bytes(self)
    }

    fn host_bytes(&self) -> u64 {
        Graph::host_bytes(self)
    }

    fn eviction_priority(&self) -> EvictionPriority {
        Graph::eviction_priority(self)
    }

    fn save(&self) -> Result<(Vec<u8>, Vec<Rc<SharedConstant>>)> {
        Graph::save(self)
    }

    fn saved_constant_bytes(&self, constant: Rc<SharedConstant>) -> impl Future<Output = Result<Vec<u8>>> + 'static {
        let graph = self.clone();
        async move { graph.saved_constant_bytes(&constant).await }
    }

    fn set_eviction_priority(&self, priority: EvictionPriority) {
        Graph::set_eviction_priority(self, priority)
    }
}
