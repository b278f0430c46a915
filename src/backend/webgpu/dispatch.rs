//! `dispatch()`: validates the tensors against the graph (the spec's order), swaps the graph in
//! when it is not resident, and replays its plan into one command buffer, building bind groups
//! only when the bound buffers change.

use std::rc::Rc;

use crate::backend::check_dispatch;
use crate::error::{Error, Result};
use crate::backend::webgpu::allocation::Attempt;
use crate::memory::buffer::DeviceBuffer;
use crate::backend::webgpu::context::Context;
use crate::backend::webgpu::graph::{out_of_memory_unknown, Graph, Slot, Step};
use crate::backend::webgpu::queue::DeferredOp;
use crate::backend::webgpu::tensor::Tensor;

/// The bind groups of one set of bound buffers (`None` for a copy step).
pub(super) struct BindCache {
    key: Vec<u64>,
    groups: Vec<Option<wgpu::BindGroup>>,
}

/// Bind group sets a graph keeps, most recently used first: one per binding of its inputs and
/// outputs, so that tensors used in turns (a KV cache written to the other of two tensors at each
/// token, a residual stream in two) find their bind groups again. Creating them took about a
/// sixth of a MoE token's CPU time on the H200 when only the last set was kept.
const BIND_CACHE_ENTRIES: usize = 4;

/// The bound tensors' buffers, in the graph's descriptor order.
fn buffers(tensors: Vec<&Tensor>) -> Result<Vec<Rc<DeviceBuffer>>> {
    tensors.into_iter().map(|t| t.buffer().ok_or_else(|| Error::Type("an MLTensor passed to dispatch() is destroyed".into()))).collect()
}

impl Context {
    /// `dispatch(graph, inputs, outputs)`: validates synchronously (spec order), then records
    /// the graph's plan into one command buffer and submits it.
    pub fn dispatch(&self, graph: &Graph, inputs: &[(String, Tensor)], outputs: &[(String, Tensor)]) -> Result<()> {
        if !graph.context().same(self) {
            return Err(Error::Type("the MLGraph belongs to another MLContext".into()));
        }
        if graph.is_destroyed() {
            return Err(Error::InvalidState("the MLGraph is destroyed".into()));
        }
        let (inputs, outputs) =
            check_dispatch(inputs, outputs, graph.input_descriptors(), graph.output_descriptors(), |t| t.context().same(self))?;
        let (input_buffers, output_buffers) = (buffers(inputs)?, buffers(outputs)?);
        if self.is_lost() {
            return Ok(());
        }
        graph.inner.last_used.set(self.inner.memory.tick());
        let waits = self.is_deferring() || self.has_unconfirmed_allocations();
        if !waits && !graph.needs_allocation() && !graph.needs_stream() {
            return graph.record(&input_buffers, &output_buffers);
        }
        // Buffers are bound only once the GPU confirmed their allocation (this swap-in's, and
        // those of a build or swap-in in progress, which may have replaced pool buffers), and
        // constants back from the "disk" tier are streamed first: the recording, and every queue
        // operation after it, waits (at once natively, where these complete within the call).
        // Behind other work the swap-in is made in order with it; otherwise at once, so that a
        // budget error throws here.
        let first = if waits || !graph.needs_allocation() {
            None
        } else {
            let (was, last) = (graph.inner.residency.get(), self.buffers().last_id());
            let Attempt { result, out_of_memory, unconfirmed } = self.try_allocate(true, || graph.swap_in_now());
            result?;
            Some((Attempt { result: Ok(()), out_of_memory, unconfirmed }, was, last))
        };
        // Its files are read now, in flight while the work before it runs.
        let ahead = Some(graph.read_ahead(true));
        // The graph is in flight, not evictable, from its swap-in for this recording to the
        // recording; while the dispatch only waits in the queue it may be evicted, since it is
        // swapped in again when its turn comes.
        let g = graph.clone();
        let swapped_in = first.is_some();
        if swapped_in {
            g.inner.in_flight.set(g.inner.in_flight.get() + 1);
        }
        self.defer(DeferredOp::Await(Box::pin(async move {
            if !swapped_in {
                g.inner.in_flight.set(g.inner.in_flight.get() + 1);
            }
            let ready = async {
                if g.inner.destroyed.get() {
                    return Err(Error::InvalidState("the MLGraph was destroyed before its dispatch ran".into()));
                }
                g.make_resident(first, out_of_memory_unknown).await?;
                g.stream_constants(ahead).await?;
                g.context().allocations_confirmed().await;
                Ok(())
            }
            .await;
            g.inner.in_flight.set(g.inner.in_flight.get() - 1);
            ready?;
            g.record(&input_buffers, &output_buffers)
        })));
        Ok(())
    }
}

impl Graph {
    fn record(&self, inputs: &[Rc<DeviceBuffer>], outputs: &[Rc<DeviceBuffer>]) -> Result<()> {
        let context = &self.inner.context;
        let device = context.device();
        let pool = &context.inner.memory.pool;
        let missing = || Error::InvalidState("a buffer of the graph is not resident".into());
        let constants: Vec<Rc<DeviceBuffer>> =
            self.inner.constants.iter().map(|c| c.device().ok_or_else(missing)).collect::<Result<_>>()?;
        let slots: Vec<Rc<DeviceBuffer>> =
            (0..self.inner.slot_sizes.len()).map(|i| pool.get(i).ok_or_else(missing)).collect::<Result<_>>()?;
        let buffer_of = |slot: Slot| -> &DeviceBuffer {
            match slot {
                Slot::Input(i) => &inputs[i],
                Slot::Output(i) => &outputs[i],
                Slot::Constant(i) => &constants[i],
                Slot::Intermediate(i) => &slots[i],
            }
        };
        let mut key: Vec<u64> = inputs.iter().chain(outputs).map(|b| b.id).collect();
        key.push(pool.generation());
        key.push(self.inner.epoch.get());
        let mut cache = self.inner.bind_cache.borrow_mut();
        // Sets from before a pool change or a swap-in bind buffers that are gone.
        let current = key.len() - 2;
        cache.retain(|c| c.key[current..] == key[current..]);
        let entry = match cache.iter().position(|c| c.key == key) {
            Some(i) => cache.remove(i),
            None => {
                let groups = self
                    .inner
                    .steps
                    .iter()
                    .map(|step| match step {
                        Step::Kernel { pipeline, slots, .. } => {
                            let entries: Vec<wgpu::BindGroupEntry> = slots
                                .iter()
                                .enumerate()
                                .map(|(i, &slot)| wgpu::BindGroupEntry {
                                    binding: i as u32,
                                    resource: buffer_of(slot).buffer.as_entire_binding(),
                                })
                                .collect();
                            Some(device.create_bind_group(&wgpu::BindGroupDescriptor {
                                label: Some("webnn"),
                                layout: &pipeline.layout,
                                entries: &entries,
                            }))
                        }
                        Step::Copy { .. } => None,
                    })
                    .collect();
                BindCache { key, groups }
            }
        };
        cache.insert(0, entry);
        cache.truncate(BIND_CACHE_ENTRIES);
        let cache = &cache[0];
        let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("dispatch") });
        let recorded = context.record_pending(&mut encoder);
        let mut index = 0;
        while index < self.inner.steps.len() {
            if let Step::Copy { from, to, size } = &self.inner.steps[index] {
                encoder.copy_buffer_to_buffer(&buffer_of(*from).buffer, 0, &buffer_of(*to).buffer, 0, *size);
                index += 1;
                continue;
            }
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some("graph"), timestamp_writes: None });
            while let Some(Step::Kernel { pipeline, grid, .. }) = self.inner.steps.get(index) {
                pass.set_pipeline(&pipeline.pipeline);
                pass.set_bind_group(0, cache.groups[index].as_ref(), &[]);
                pass.dispatch_workgroups(grid[0], grid[1], 1);
                index += 1;
            }
        }
        context.queue().submit([encoder.finish()]);
        drop(recorded);
        Ok(())
    }
}
