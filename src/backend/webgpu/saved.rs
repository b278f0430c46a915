//! The graph cache on the WebGPU backend. A saved graph is its finished plan: the WGSL and
//! binding counts of every distinct kernel, the steps with their buffer slots and grids, the
//! sizes of the intermediate slots, and the graph's inputs and outputs. Loading it creates the
//! pipelines from the stored WGSL (so the browser's shader cache can hit) and nothing else: no
//! validation, fusion or lowering. Its constants come back file-backed, in the `"disk"` tier,
//! each streamed from its saved file when the graph is first made resident.
//!
//! A record comes from storage the page does not control, so everything in it is checked
//! against the plan's own invariants and the device's limits before use: a corrupt record is a
//! `DataError`, never a panic or a kernel bound to the wrong buffer.

use std::collections::HashMap;
use std::rc::Rc;

use serde::{Deserialize, Serialize};

use crate::backend::saved::{self, named_operands, Header, SavedOperand};
use crate::backend::webgpu::context::Context;
use crate::backend::webgpu::graph::{Graph, Slot, Step};
use crate::backend::webgpu::loader::saved_constant;
use crate::error::{Error, Result};
use crate::memory::SharedConstant;
use crate::ops::wgsl::buffer_size;
use crate::weights::Source;

#[derive(Serialize, Deserialize)]
struct Record {
    header: Header,
    inputs: Vec<SavedOperand>,
    outputs: Vec<SavedOperand>,
    /// The byte size of each constant's buffer: the length of its saved bytes.
    constants: Vec<u64>,
    kernels: Vec<SavedKernel>,
    slot_sizes: Vec<u64>,
    steps: Vec<SavedStep>,
}

#[derive(Serialize, Deserialize)]
struct SavedKernel {
    source: String,
    reads: usize,
    writes: usize,
}

#[derive(Serialize, Deserialize)]
enum SavedStep {
    Kernel { kernel: usize, slots: Vec<Slot>, grid: [u32; 2] },
    Copy { from: Slot, to: Slot, size: u64 },
}

impl Context {
    /// What kernel choice depends on: the adapter's identity, the traits lowering reads and the
    /// limits a plan is checked against. A record for another value is refused.
    fn cache_adapter(&self) -> String {
        let (info, limits, traits) = (self.adapter_info(), self.limits(), self.device_traits());
        format!(
            "{} ({:?}, {:?}, vendor {:#x}, device {:#x}, driver {} {}); cpu {}, subgroups {}, shader-f16 {}; \
             workgroup storage {}, invocations {}, storage buffers {}, workgroups {}, binding {}, buffer {}",
            info.name,
            info.backend,
            info.device_type,
            info.vendor,
            info.device,
            info.driver,
            info.driver_info,
            traits.cpu,
            traits.subgroups,
            self.has_shader_f16(),
            traits.workgroup_storage,
            traits.invocations,
            limits.max_storage_buffers_per_shader_stage,
            limits.max_compute_workgroups_per_dimension,
            limits.max_storage_buffer_binding_size,
            limits.max_buffer_size,
        )
    }

    fn cache_header(&self) -> Header {
        Header::new("webgpu", self.cache_adapter())
    }
}

impl Graph {
    /// `saveGraph`: the record of this graph and its constants, in the order the record numbers
    /// them (their bytes come from [`saved_constant_bytes`](Self::saved_constant_bytes)).
    pub fn save(&self) -> Result<(Vec<u8>, Vec<Rc<SharedConstant>>)> {
        self.check_usable()?;
        let inner = &self.inner;
        let mut kernels: Vec<SavedKernel> = Vec::new();
        let mut kernel_of: HashMap<*const crate::backend::webgpu::pipeline::Pipeline, usize> = HashMap::new();
        let steps = inner
            .steps
            .iter()
            .map(|step| match step {
                Step::Kernel { pipeline, slots, grid } => {
                    let kernel = *kernel_of.entry(Rc::as_ptr(pipeline)).or_insert_with(|| {
                        kernels.push(SavedKernel { source: pipeline.source.to_string(), reads: pipeline.reads, writes: pipeline.writes });
                        kernels.len() - 1
                    });
                    SavedStep::Kernel { kernel, slots: slots.clone(), grid: *grid }
                }
                &Step::Copy { from, to, size } => SavedStep::Copy { from, to, size },
            })
            .collect();
        let named = |list: &[(String, crate::operand::OperandDescriptor)]| list.iter().map(|(n, d)| SavedOperand::new(n, d)).collect();
        let record = Record {
            header: inner.context.cache_header(),
            inputs: named(&inner.inputs),
            outputs: named(&inner.outputs),
            constants: inner.constants.iter().map(|c| c.buffer_size).collect(),
            kernels,
            slot_sizes: inner.slot_sizes.clone(),
            steps,
        };
        Ok((saved::write(&record)?, inner.constants.clone()))
    }

    /// The bytes saved for `constant` (one of [`save`](Self::save)'s): its buffer's bytes. A
    /// host copy is used as it is (zero-padded to whole words); a constant streamed from a
    /// weight file is read back from the GPU, after making this graph resident if it is not.
    pub async fn saved_constant_bytes(&self, constant: &SharedConstant) -> Result<Vec<u8>> {
        self.check_usable()?;
        if let Some(mut bytes) = constant.host_copy() {
            bytes.resize(constant.buffer_size as usize, 0);
            return Ok(bytes);
        }
        self.swap_in().await?;
        let buffer = constant
            .device()
            .ok_or_else(|| Error::InvalidState("the constant left the GPU while it was being saved".into()))?;
        self.inner.context.read_buffer(&buffer.buffer, constant.buffer_size).await
    }

    /// `loadGraph`: the graph of `record`, with constant `i` streamed from `constants[i].1` when
    /// the graph is first made resident. `constants[i].0` names the bytes (a content hash):
    /// constants with the same name share one constant, in this graph and with other loaded
    /// graphs of the context. `NotFoundError` for a record of another version or adapter,
    /// `DataError` for a corrupt one or a constant file of the wrong length.
    pub async fn load<S: Source + 'static>(context: &Context, record: &[u8], constants: Vec<(String, Rc<S>)>) -> Result<Graph> {
        context.check_not_lost()?;
        let record: Record = saved::read(record, &context.cache_header())?;
        let check = |d: &crate::operand::OperandDescriptor| context.check_tensor_byte_length(d);
        let inputs = named_operands(&record.inputs, "input", check)?;
        let outputs = named_operands(&record.outputs, "output", check)?;
        let limits = context.limits();
        let corrupt = |what: String| Error::Data(format!("the saved graph is corrupt: {what}"));
        let buffer_ok = |size: u64| size > 0 && size % 4 == 0 && size <= limits.max_buffer_size;
        if constants.len() != record.constants.len() {
            return Err(corrupt(format!("it has {} constants but {} were given", record.constants.len(), constants.len())));
        }
        if let Some(size) = record.constants.iter().chain(&record.slot_sizes).find(|&&s| !buffer_ok(s)) {
            return Err(corrupt(format!("a buffer of {size} bytes")));
        }
        for kernel in &record.kernels {
            if kernel.reads + kernel.writes > limits.max_storage_buffers_per_shader_stage as usize {
                return Err(corrupt(format!("a kernel binds {} buffers", kernel.reads + kernel.writes)));
            }
        }
        let size_of = |slot: Slot| -> Option<u64> {
            match slot {
                Slot::Input(i) => inputs.get(i).map(|(_, d)| buffer_size(d)),
                Slot::Output(i) => outputs.get(i).map(|(_, d)| buffer_size(d)),
                Slot::Constant(i) => record.constants.get(i).copied(),
                Slot::Intermediate(i) => record.slot_sizes.get(i).copied(),
            }
        };
        let max_groups = limits.max_compute_workgroups_per_dimension.max(1);
        for (s, step) in record.steps.iter().enumerate() {
            let valid = match step {
                SavedStep::Kernel { kernel, slots, grid } => {
                    record.kernels.get(*kernel).is_some_and(|k| k.reads + k.writes == slots.len())
                        && slots.iter().all(|&slot| size_of(slot).is_some())
                        && record.kernels.get(*kernel).is_some_and(|k| {
                            // A written buffer is bound once; read-only bindings may repeat (`add(x, x)`).
                            (k.reads..slots.len()).all(|w| slots.iter().filter(|&&s| s == slots[w]).count() == 1)
                        })
                        && grid.iter().all(|&g| (1..=max_groups).contains(&g))
                }
                &SavedStep::Copy { from, to, size } => {
                    from != to && size % 4 == 0 && size_of(from).zip(size_of(to)).is_some_and(|(a, b)| size <= a.min(b))
                }
            };
            if !valid {
                return Err(corrupt(format!("step {s} does not fit the plan or the device")));
            }
        }
        for ((key, source), &size) in constants.iter().zip(&record.constants) {
            if source.len() != size {
                return Err(Error::Data(format!(
                    "the saved constant {key} ({}) holds {} bytes, the saved graph expects {size}",
                    source.name(),
                    source.len()
                )));
            }
        }

        let mut pipelines = Vec::with_capacity(record.kernels.len());
        for kernel in &record.kernels {
            let pipeline = context.inner.pipelines.get(context.device(), &kernel.source, kernel.reads, kernel.writes).await;
            pipelines.push(pipeline.map_err(|e| corrupt(e.message().into()))?);
        }
        let steps = record
            .steps
            .into_iter()
            .map(|step| match step {
                SavedStep::Kernel { kernel, slots, grid } => Step::Kernel { pipeline: pipelines[kernel].clone(), slots, grid },
                SavedStep::Copy { from, to, size } => Step::Copy { from, to, size },
            })
            .collect();
        let constants = constants
            .into_iter()
            .zip(record.constants)
            .map(|((key, source), size)| shared_saved_constant(context, key, &source, size))
            .collect();
        Graph::assemble(context, inputs, outputs, constants, record.slot_sizes, steps)
    }
}

/// The context's constant of saved bytes named `key`, made (in the `"disk"` tier) if no loaded
/// graph holds it.
fn shared_saved_constant<S: Source + 'static>(context: &Context, key: String, source: &Rc<S>, size: u64) -> Rc<SharedConstant> {
    let mut saved = context.inner.saved_constants.borrow_mut();
    saved.retain(|_, weak| weak.strong_count() > 0);
    if let Some(constant) = saved.get(&key).and_then(|weak| weak.upgrade()).filter(|c| c.buffer_size == size) {
        return constant;
    }
    let constant = saved_constant(context, source, size);
    saved.insert(key, Rc::downgrade(&constant));
    constant
}
