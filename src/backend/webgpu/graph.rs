//! Compiled graphs: `build()` fuses element-wise chains ([`fusion`]), lowers every operator to
//! WGSL kernels, compiles them through the pipeline cache, assigns intermediates to slots of the
//! context's shared pool by lifetime (a slot is reused once its last reader has run) and records
//! an execution plan, which `dispatch()` replays (`dispatch.rs`). `swap_out()`/`swap_in()` release and restore the graph's
//! device memory without recompiling (uploading host copies, or streaming file-backed constants
//! from their files); the memory budget evicts least recently dispatched graphs.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use crate::error::{Error, Result};
use crate::graph::{ConstantValue, GraphBuilder, GraphDescription, Operand, OperandDescriptor, OperandSource};
use crate::memory::budget::Evictable;
use crate::backend::read_ahead::ReadAhead;
use crate::memory::read_ahead::{FileRange, Windows};
use crate::memory::{EvictionPriority, FileBacked, Residency, SharedConstant};
use crate::ops::wgsl::buffer_size;
use crate::plan::fusion::{self, OpGroupKind};
use crate::ops::{self, BufRef, LowerRequest, Lowering};
use crate::backend::webgpu::dispatch::BindCache;
use crate::backend::webgpu::allocation::Attempt;
use crate::backend::webgpu::context::Context;
use crate::backend::webgpu::pipeline::Pipeline;

/// Where a value of the plan lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) enum Slot {
    Input(usize),
    Output(usize),
    Constant(usize),
    Intermediate(usize),
}

pub(super) enum Step {
    Kernel { pipeline: Rc<Pipeline>, slots: Vec<Slot>, grid: [u32; 2] },
    Copy { from: Slot, to: Slot, size: u64 },
}

static NEXT_GRAPH_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

pub(super) struct GraphInner {
    pub(super) id: u64,
    pub(super) context: Context,
    pub(super) inputs: Vec<(String, OperandDescriptor)>,
    pub(super) outputs: Vec<(String, OperandDescriptor)>,
    pub(super) constants: Vec<Rc<SharedConstant>>,
    /// Sizes of the pool slots the plan uses, largest first.
    pub(super) slot_sizes: Vec<u64>,
    pub(super) steps: Vec<Step>,
    pub(super) bind_cache: RefCell<Vec<BindCache>>,
    pub(super) residency: Cell<Residency>,
    /// Bumped at every swap-in: constant buffers are new, bind groups must be rebuilt.
    pub(super) epoch: Cell<u64>,
    pub(super) last_used: Cell<u64>,
    /// Dispatches between their swap-in and their recording; the graph is not evicted meanwhile.
    pub(super) in_flight: Cell<u32>,
    pub(super) priority: Cell<EvictionPriority>,
    pub(super) destroyed: Cell<bool>,
}

/// A compiled graph (`MLGraph`'s core); clones share it.
#[derive(Clone)]
pub struct Graph {
    pub(super) inner: Rc<GraphInner>,
}

/// A value of the plan before buffers are assigned.
#[derive(Clone, Copy)]
enum Value {
    Fixed(Slot),
    Intermediate { size: u64 },
}

enum PlannedStep {
    Kernel { pipeline: Rc<Pipeline>, values: Vec<usize>, grid: [u32; 2] },
    Copy { from: usize, to: usize, size: u64 },
}

impl GraphBuilder {
    /// `build(outputs)`: validates synchronously, then compiles on the builder's WebGPU context.
    pub async fn build(&mut self, outputs: &[(String, Operand)]) -> Result<Graph> {
        let description = self.prepare_build(outputs)?;
        let context: &dyn std::any::Any = self.context();
        let context = context
            .downcast_ref::<Context>()
            .ok_or_else(|| Error::NotSupported("the builder's context is not a WebGPU context".into()))?;
        Graph::compile(context, description).await
    }
}

impl Graph {
    /// Compiles a validated graph description for a context.
    pub async fn compile(context: &Context, description: GraphDescription) -> Result<Graph> {
        if context.is_lost() {
            return Err(Error::InvalidState("the MLContext is lost".into()));
        }
        let d = &description;
        let device = context.device();
        let mut values: Vec<Value> = Vec::new();
        let mut value_of: Vec<Option<usize>> = vec![None; d.descriptors.len()];
        let new_value = |values: &mut Vec<Value>, v: Value| {
            values.push(v);
            values.len() - 1
        };

        let inputs: Vec<(String, OperandDescriptor)> =
            d.inputs.iter().map(|(name, &i)| (name.clone(), d.descriptors[i].clone())).collect();
        for (k, &operand) in d.inputs.values().enumerate() {
            value_of[operand] = Some(new_value(&mut values, Value::Fixed(Slot::Input(k))));
        }
        let outputs: Vec<(String, OperandDescriptor)> =
            d.outputs.iter().map(|(name, &i)| (name.clone(), d.descriptors[i].clone())).collect();
        let mut extra_output_copies = Vec::new();
        for (k, &operand) in d.outputs.values().enumerate() {
            let v = new_value(&mut values, Value::Fixed(Slot::Output(k)));
            match value_of[operand] {
                None => value_of[operand] = Some(v),
                // The same operand under a second name: copied once computed.
                Some(first) => extra_output_copies.push((first, v, buffer_size(&d.descriptors[operand]))),
            }
        }

        // Constants: upload bytes, or share a constant tensor's buffer.
        let mut constants = Vec::new();
        for operator in &d.operators {
            for &operand in &operator.inputs {
                if value_of[operand].is_some() {
                    continue;
                }
                let OperandSource::Constant(value) = &d.sources[operand] else { continue };
                let constant = match value {
                    ConstantValue::Bytes(shared) => shared.clone(),
                    ConstantValue::Tensor(tensor) => tensor
                        .shared_constant()
                        .ok_or_else(|| Error::Type("a constant MLTensor used by the graph is destroyed".into()))?,
                };
                constants.push(constant);
                value_of[operand] = Some(new_value(&mut values, Value::Fixed(Slot::Constant(constants.len() - 1))));
            }
        }

        // Lower every operator, compiling its kernels inside an error scope.
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let max_groups = context.limits().max_compute_workgroups_per_dimension.max(1);
        let mut planned = Vec::new();
        for operator in fusion::plan(d, context.limits().max_storage_buffers_per_shader_stage) {
            let request = LowerRequest {
                inputs: operator.inputs.iter().map(|&i| &d.descriptors[i]).collect(),
                outputs: operator.outputs.iter().map(|&i| &d.descriptors[i]).collect(),
                shader_f16: context.has_shader_f16(),
                device: context.device_traits(),
            };
            let label = || operator.label.clone();
            let lowering = match &operator.kind {
                OpGroupKind::Op(op) => ops::lower(op, &request),
                OpGroupKind::Fused(fused) => fused.lower(&request),
            }
            .map_err(|e| Error::Operation(format!("{}: {}", label(), e.message())))?;
            let input_values: Vec<Option<usize>> = operator.inputs.iter().map(|&i| value_of[i]).collect();
            let input_value = |i: usize| input_values[i].ok_or_else(|| Error::Operation("missing input value".into()));
            match lowering {
                Lowering::Alias => {
                    let from = input_value(0)?;
                    let out = operator.outputs[0];
                    match value_of[out] {
                        Some(to) => planned.push(PlannedStep::Copy { from, to, size: buffer_size(&d.descriptors[out]) }),
                        None => value_of[out] = Some(from),
                    }
                }
                Lowering::Kernels { scratch, launches } => {
                    for &out in &operator.outputs {
                        if value_of[out].is_none() {
                            let size = buffer_size(&d.descriptors[out]);
                            value_of[out] = Some(new_value(&mut values, Value::Intermediate { size }));
                        }
                    }
                    let scratch_values: Vec<usize> = scratch
                        .iter()
                        .map(|&size| new_value(&mut values, Value::Intermediate { size: size.max(4) }))
                        .collect();
                    for launch in launches {
                        let mut launch_values = Vec::new();
                        for r in launch.reads.iter().chain(&launch.writes) {
                            launch_values.push(match *r {
                                BufRef::Input(i) => input_value(i)?,
                                BufRef::Output(i) => value_of[operator.outputs[i]]
                                    .ok_or_else(|| Error::Operation("missing output value".into()))?,
                                BufRef::Scratch(i) => *scratch_values
                                    .get(i)
                                    .ok_or_else(|| Error::Operation("missing scratch buffer".into()))?,
                            });
                        }
                        let groups = launch.invocations.div_ceil(launch.workgroup_size.max(1) as u64).max(1);
                        let x = groups.min(max_groups as u64);
                        let y = groups.div_ceil(x);
                        if y > max_groups as u64 {
                            return Err(Error::Operation(format!(
                                "{}: {groups} workgroups exceed maxComputeWorkgroupsPerDimension ({max_groups}) squared",
                                label()
                            )));
                        }
                        let pipeline = context
                            .inner
                            .pipelines
                            .get(device, &launch.source, launch.reads.len(), launch.writes.len())
                            .await
                            .map_err(|e| Error::Operation(format!("{}: {}", label(), e.message())))?;
                        planned.push(PlannedStep::Kernel { pipeline, values: launch_values, grid: [x as u32, y as u32] });
                    }
                }
            }
        }
        for (from, to, size) in extra_output_copies {
            planned.push(PlannedStep::Copy { from, to, size });
        }
        // Popped now, awaited after the allocations below: one GPU round trip answers both.
        let compiled = scope.pop();

        // Assign intermediate buffers by lifetime.
        let mut last_use = vec![0usize; values.len()];
        for (s, step) in planned.iter().enumerate() {
            match step {
                PlannedStep::Kernel { values: vs, .. } => vs.iter().for_each(|&v| last_use[v] = s),
                PlannedStep::Copy { from, to, .. } => {
                    last_use[*from] = s;
                    last_use[*to] = s;
                }
            }
        }
        let mut slot_of: Vec<Option<Slot>> =
            values.iter().map(|v| if let Value::Fixed(s) = v { Some(*s) } else { None }).collect();
        let mut slot_sizes: Vec<u64> = Vec::new();
        let mut free: Vec<usize> = Vec::new();
        let mut steps = Vec::with_capacity(planned.len());
        for (s, step) in planned.into_iter().enumerate() {
            let used: Vec<usize> = match &step {
                PlannedStep::Kernel { values: vs, .. } => vs.clone(),
                PlannedStep::Copy { from, to, .. } => vec![*from, *to],
            };
            for &v in &used {
                if slot_of[v].is_some() {
                    continue;
                }
                let Value::Intermediate { size } = values[v] else { continue };
                let size = size.div_ceil(256) * 256;
                let best = free
                    .iter()
                    .enumerate()
                    .filter(|(_, &b)| slot_sizes[b] >= size)
                    .min_by_key(|(_, &b)| slot_sizes[b])
                    .map(|(i, _)| i);
                let slot_index = match best {
                    Some(i) => free.swap_remove(i),
                    // No free slot is large enough: grow the largest free one, or add a slot.
                    None => match free.iter().enumerate().max_by_key(|(_, &b)| slot_sizes[b]).map(|(i, _)| i) {
                        Some(i) => {
                            let b = free.swap_remove(i);
                            slot_sizes[b] = size;
                            b
                        }
                        None => {
                            slot_sizes.push(size);
                            slot_sizes.len() - 1
                        }
                    },
                };
                slot_of[v] = Some(Slot::Intermediate(slot_index));
            }
            let slot = |v: usize| slot_of[v].ok_or_else(|| Error::Operation("unassigned value".into()));
            steps.push(match step {
                PlannedStep::Kernel { pipeline, values: vs, grid } => {
                    Step::Kernel { pipeline, slots: vs.iter().map(|&v| slot(v)).collect::<Result<_>>()?, grid }
                }
                PlannedStep::Copy { from, to, size } => Step::Copy { from: slot(from)?, to: slot(to)?, size },
            });
            for &v in &used {
                if let (Value::Intermediate { .. }, Some(Slot::Intermediate(b))) = (values[v], slot_of[v]) {
                    if last_use[v] == s && !free.contains(&b) {
                        free.push(b);
                    }
                }
            }
        }

        // Slots are numbered largest first so that graphs sharing the pool line up their big
        // buffers on the same slots.
        let mut order: Vec<usize> = (0..slot_sizes.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(slot_sizes[i]));
        let mut renumber = vec![0; slot_sizes.len()];
        for (new, &old) in order.iter().enumerate() {
            renumber[old] = new;
        }
        let slot_sizes: Vec<u64> = order.iter().map(|&i| slot_sizes[i]).collect();
        let renumbered = |slot: Slot| if let Slot::Intermediate(i) = slot { Slot::Intermediate(renumber[i]) } else { slot };
        for step in &mut steps {
            match step {
                Step::Kernel { slots, .. } => slots.iter_mut().for_each(|s| *s = renumbered(*s)),
                Step::Copy { from, to, .. } => {
                    *from = renumbered(*from);
                    *to = renumbered(*to);
                }
            }
        }

        let graph = Graph::assemble(context, inputs, outputs, constants, slot_sizes, steps)?;
        graph.make_resident(None, out_of_memory_operation).await?;
        if let Some(e) = compiled.await {
            graph.destroy();
            return Err(Error::Operation(format!("a kernel failed to compile: {e}")));
        }
        Ok(graph)
    }

    /// A graph of a finished plan, off the GPU and registered with the memory budget: a
    /// `QuotaExceededError` when it could never fit the budget.
    pub(super) fn assemble(
        context: &Context,
        inputs: Vec<(String, OperandDescriptor)>,
        outputs: Vec<(String, OperandDescriptor)>,
        constants: Vec<Rc<SharedConstant>>,
        slot_sizes: Vec<u64>,
        steps: Vec<Step>,
    ) -> Result<Graph> {
        let graph = Graph {
            inner: Rc::new(GraphInner {
                id: NEXT_GRAPH_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
                context: context.clone(),
                inputs,
                outputs,
                constants,
                slot_sizes,
                steps,
                bind_cache: RefCell::new(Vec::new()),
                residency: Cell::new(Residency::Host),
                epoch: Cell::new(0),
                last_used: Cell::new(0),
                in_flight: Cell::new(0),
                priority: Cell::new(EvictionPriority::Normal),
                destroyed: Cell::new(false),
            }),
        };
        let total = graph.total_device_bytes();
        if let Some(budget) = context.inner.memory.budget.get() {
            if total > budget {
                return Err(Error::QuotaExceeded(format!(
                    "the graph needs {total} device bytes, more than the memory budget of {budget} bytes"
                )));
            }
        }
        let weak: std::rc::Weak<dyn Evictable> = Rc::downgrade(&graph.inner) as std::rc::Weak<dyn Evictable>;
        context.inner.memory.register(weak);
        Ok(graph)
    }

    pub fn context(&self) -> &Context {
        &self.inner.context
    }

    /// `[[inputDescriptors]]`, sorted by name.
    pub fn input_descriptors(&self) -> &[(String, OperandDescriptor)] {
        &self.inner.inputs
    }

    /// `[[outputDescriptors]]`, sorted by name.
    pub fn output_descriptors(&self) -> &[(String, OperandDescriptor)] {
        &self.inner.outputs
    }

    /// `deviceBytes`: bytes of the constants this graph holds on the GPU now (shared constants
    /// count for every graph using them). Intermediates live in the context's shared pool.
    pub fn device_bytes(&self) -> u64 {
        if self.inner.residency.get() != Residency::Device {
            return 0;
        }
        self.inner.constants.iter().map(|c| c.buffer_size).sum()
    }

    /// `hostBytes`: bytes of the host copies of this graph's constants.
    pub fn host_bytes(&self) -> u64 {
        self.inner.constants.iter().map(|c| c.host_bytes()).sum()
    }

    /// Device bytes the graph needs when resident: constants plus its intermediate slots.
    pub fn total_device_bytes(&self) -> u64 {
        self.inner.constants.iter().map(|c| c.buffer_size).sum::<u64>() + self.inner.slot_sizes.iter().sum::<u64>()
    }

    /// `residency`.
    pub fn residency(&self) -> Residency {
        if self.inner.residency.get() != Residency::Device {
            return self.inner.off_device_tier();
        }
        self.inner.residency.get()
    }

    /// `evictionPriority`.
    pub fn eviction_priority(&self) -> EvictionPriority {
        self.inner.priority.get()
    }

    /// Sets `evictionPriority`; it orders later evictions (nothing is evicted or loaded now).
    pub fn set_eviction_priority(&self, priority: EvictionPriority) {
        self.inner.priority.set(priority);
    }

    /// Makes the graph resident, evicting others under the budget: allocates and uploads host
    /// copies, no compile. File-backed constants are left for [`stream_constants`](Self::stream_constants).
    pub(super) fn swap_in_now(&self) -> Result<()> {
        let inner = &self.inner;
        let context = &inner.context;
        let memory = &context.inner.memory;
        if inner.residency.get() != Residency::Device {
            let needed = || {
                inner.constants.iter().map(|c| c.bytes_to_acquire()).sum::<u64>() + memory.pool.growth_for(&inner.slot_sizes)
            };
            // The constants evicted for room hand their buffers to this graph's constants.
            let registry = context.buffers();
            registry.begin_recycling();
            let acquired = context.make_room(inner.id, &needed).and_then(|()| {
                inner.constants.iter().try_fold(0, |uploaded, constant| Ok(uploaded + constant.acquire(context)?))
            });
            registry.end_recycling();
            let uploaded = acquired?;
            memory.bytes_uploaded.set(memory.bytes_uploaded.get() + uploaded);
            memory.swap_ins.set(memory.swap_ins.get() + 1);
            inner.residency.set(Residency::Device);
            inner.epoch.set(inner.epoch.get() + 1);
        } else {
            context.make_room(inner.id, &|| memory.pool.growth_for(&inner.slot_sizes))?;
        }
        memory.pool.ensure(context, &inner.slot_sizes);
        Ok(())
    }

    /// Whether a swap-in now would create buffers (constants or pool slots).
    pub(super) fn needs_allocation(&self) -> bool {
        let memory = &self.inner.context.inner.memory;
        self.inner.residency.get() != Residency::Device || memory.pool.growth_for(&self.inner.slot_sizes) > 0
    }

    /// [`swap_in_now`](Self::swap_in_now) with its allocations checked: when the GPU is out of
    /// memory, the attempt is undone, the least recently used other graph evicted and the
    /// swap-in tried again; with nothing left to evict, `exhausted(message)`. `first` is an
    /// attempt already made (by `dispatch()`, synchronously) with the residency before it and
    /// the registry's last buffer id then.
    pub(super) async fn make_resident(&self, first: Option<(Attempt<()>, Residency, u64)>, exhausted: fn(String) -> Error) -> Result<()> {
        let context = &self.inner.context;
        let (first, was, last) = match first {
            Some(first) => first,
            None if !self.needs_allocation() => return Ok(()),
            None => {
                let (was, last) = (self.inner.residency.get(), context.buffers().last_id());
                (context.try_allocate(true, || self.swap_in_now()), was, last)
            }
        };
        let attempt = || self.swap_in_now();
        context.confirm_allocation(first, self.inner.id, attempt, |()| self.undo_swap_in(was, last), exhausted).await
    }

    /// Undoes a swap-in whose allocations failed: the graph goes back to residency `was` and the
    /// buffers created after buffer id `last` are freed.
    pub(super) fn undo_swap_in(&self, was: Residency, last: u64) {
        let inner = &self.inner;
        let memory = &inner.context.inner.memory;
        if was != Residency::Device && inner.residency.get() == Residency::Device {
            inner.release();
            inner.residency.set(was);
            memory.swap_ins.set(memory.swap_ins.get().saturating_sub(1));
        }
        memory.pool.discard_newer_than(last);
        memory.pool.trim(&memory.resident_slot_needs());
    }

    /// Whether file-backed constants wait to be streamed from their files.
    pub(super) fn needs_stream(&self) -> bool {
        self.inner.constants.iter().any(|c| c.needs_stream())
    }

    /// Starts reading the constants that are not resident and must come from their files,
    /// merged (see [`ReadAhead`]); `queued` for a dispatch waiting behind other work, whose reads
    /// then overlap that work's.
    pub(super) fn read_ahead(&self, queued: bool) -> ReadAhead {
        let constants = &self.inner.constants;
        let files = constants.iter().filter(|c| !c.is_resident() || c.needs_stream()).filter_map(|c| c.file_read());
        let memory = &self.inner.context.inner.memory;
        ReadAhead::start(files, &memory.read_ahead, queued)
    }

    /// Streams the file-backed constants that [`swap_in_now`](Self::swap_in_now) allocated,
    /// those needing their files read merged, from `ahead` if started.
    pub(super) async fn stream_constants(&self, ahead: Option<ReadAhead>) -> Result<()> {
        let constants = &self.inner.constants;
        if !self.needs_stream() {
            return Ok(());
        }
        let mut windows = match ahead {
            Some(ahead) => ahead.finish().await?,
            None => Windows::default(),
        };
        let memory = &self.inner.context.inner.memory;
        fn file_read(c: &SharedConstant) -> Option<(FileRange, &dyn FileBacked)> {
            c.needs_stream().then(|| c.file_read()).flatten()
        }
        for (i, constant) in constants.iter().enumerate() {
            if file_read(constant).is_some_and(|(range, _)| windows.wants(range)) {
                drop(std::mem::take(&mut windows));
                let files = constants[i..].iter().filter_map(|c| file_read(c));
                windows = ReadAhead::start(files, &memory.read_ahead, false).finish().await?;
            }
            constant.stream_from(&mut |_, _| {}, &windows).await?;
        }
        Ok(())
    }

    /// `swapIn()`: makes the constants resident again, uploading host copies and streaming
    /// file-backed constants from their files (a no-op when resident).
    pub async fn swap_in(&self) -> Result<()> {
        self.check_usable()?;
        self.inner.context.settled().await;
        self.make_resident(None, out_of_memory_quota).await?;
        self.stream_constants(None).await
    }

    /// Whether every constant comes from a weight file, so the graph can go to the `"disk"` tier.
    fn file_backed(&self) -> bool {
        self.inner.file_backed()
    }

    /// `swapOut({to})`: releases the graph's GPU memory once the work already queued on it is
    /// done (buffers in use by queued work are freed by the GPU after that work completes).
    pub async fn swap_out(&self, to: Residency) -> Result<()> {
        self.check_usable()?;
        if to == Residency::Device {
            return Err(Error::Type("swapOut() goes to \"host\" or \"disk\"".into()));
        }
        if to == Residency::Disk && !self.file_backed() {
            return Err(Error::Type(
                "swapOut({to: \"disk\"}) needs every constant to come from a weight file; this graph's constants do not".into(),
            ));
        }
        self.inner.context.settled().await;
        self.inner.evict();
        if to == Residency::Disk {
            self.inner.constants.iter().for_each(|c| c.drop_host_copy());
            self.inner.residency.set(Residency::Disk);
        }
        let memory = &self.inner.context.inner.memory;
        memory.pool.trim(&memory.resident_slot_needs());
        self.inner.context.flush().await
    }

    pub(super) fn check_usable(&self) -> Result<()> {
        if self.inner.destroyed.get() {
            return Err(Error::InvalidState("the MLGraph is destroyed".into()));
        }
        if let Some(message) = self.inner.context.lost_message() {
            return Err(Error::InvalidState(message));
        }
        Ok(())
    }

    /// Number of GPU dispatches and copies one `dispatch()` records.
    pub fn step_count(&self) -> usize {
        self.inner.steps.len()
    }

    /// Destroyed by `destroy()`, or with its context (`MLContext.destroy()` or loss).
    pub fn is_destroyed(&self) -> bool {
        self.inner.destroyed.get() || self.inner.context.is_lost()
    }

    /// `destroy()`: the graph can no longer be dispatched; its buffers go when the last handle
    /// is dropped (queued work keeps them alive on the GPU side).
    pub fn destroy(&self) {
        if self.inner.destroyed.replace(true) {
            return;
        }
        self.inner.evict();
        let memory = &self.inner.context.inner.memory;
        memory.pool.trim(&memory.resident_slot_needs());
    }
}

impl GraphInner {
    fn file_backed(&self) -> bool {
        !self.constants.is_empty() && self.constants.iter().all(|c| c.is_file_backed())
    }

    /// The tier off the GPU: `"disk"` when every constant comes from a weight file and one of
    /// them has no host copy (the host budget may have evicted it since), else `"host"`.
    fn off_device_tier(&self) -> Residency {
        if self.file_backed() && !self.constants.iter().all(|c| c.has_host_copy()) {
            Residency::Disk
        } else {
            Residency::Host
        }
    }
}

impl GraphInner {
    /// Lets go of the constants' device buffers and the bind groups holding them.
    fn release(&self) {
        for constant in &self.constants {
            constant.release();
        }
        self.bind_cache.borrow_mut().clear();
    }
}

/// The error of `build()` when the GPU is out of memory and no graph is left to evict: the
/// spec's error for a graph the platform could not build.
fn out_of_memory_operation(message: String) -> Error {
    Error::Operation(format!("the GPU is out of memory for the graph and no other graph can be evicted: {message}"))
}

/// The error of `swapIn()` when the GPU is out of memory and no graph is left to evict: the
/// graph does not fit, as over a `memoryBudget`.
fn out_of_memory_quota(message: String) -> Error {
    Error::QuotaExceeded(format!("the GPU is out of memory for the graph and no other graph can be evicted: {message}"))
}

/// The error of a `dispatch()` that could not make its graph resident, reported by the next
/// `readTensor()` (the spec's error when a read fails).
pub(super) fn out_of_memory_unknown(message: String) -> Error {
    Error::Unknown(format!("the GPU is out of memory for the dispatched graph and no other graph can be evicted: {message}"))
}

impl Evictable for GraphInner {
    fn id(&self) -> u64 {
        self.id
    }

    fn is_resident(&self) -> bool {
        self.residency.get() == Residency::Device && !self.destroyed.get()
    }

    fn last_used(&self) -> u64 {
        self.last_used.get()
    }

    fn in_flight(&self) -> bool {
        self.in_flight.get() > 0
    }

    fn priority(&self) -> EvictionPriority {
        self.priority.get()
    }

    /// To `"disk"` when every constant can be streamed again from its file (they hold no host
    /// copy), else to `"host"`; file-backed constants of a mixed graph leave the GPU too.
    fn evict(&self) {
        if self.residency.get() != Residency::Device {
            return;
        }
        self.release();
        self.residency.set(self.off_device_tier());
        let memory = &self.context.inner.memory;
        memory.swap_outs.set(memory.swap_outs.get() + 1);
    }

    fn slot_sizes(&self) -> Vec<u64> {
        self.slot_sizes.clone()
    }
}
