//! Compiled graphs: `build()` lowers every operator to WGSL kernels, compiles them through the
//! pipeline cache, assigns intermediate buffers by lifetime (a buffer is reused once its last
//! reader has run) and records an execution plan; `dispatch()` replays the plan into one command
//! buffer, building bind groups only when the bound tensors change.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

use crate::error::{Error, Result};
use crate::graph::{ConstantValue, GraphDescription, OperandDescriptor, OperandSource};
use crate::ops::{self, BufRef, LowerContext, Lowering};
use crate::ops::wgsl::buffer_size;
use crate::runtime::buffer::DeviceBuffer;
use crate::runtime::context::Context;
use crate::runtime::pipeline::Pipeline;
use crate::runtime::tensor::Tensor;

/// Where a value of the plan lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Input(usize),
    Output(usize),
    Constant(usize),
    Intermediate(usize),
}

enum Step {
    Kernel { pipeline: Rc<Pipeline>, slots: Vec<Slot>, grid: [u32; 2] },
    Copy { from: Slot, to: Slot, size: u64 },
}

struct BindCache {
    key: Vec<u64>,
    groups: Vec<Option<wgpu::BindGroup>>,
}

struct GraphInner {
    context: Context,
    inputs: Vec<(String, OperandDescriptor)>,
    outputs: Vec<(String, OperandDescriptor)>,
    constants: Vec<Rc<DeviceBuffer>>,
    intermediates: Vec<Rc<DeviceBuffer>>,
    steps: Vec<Step>,
    bind_cache: RefCell<Option<BindCache>>,
    destroyed: Cell<bool>,
}

/// A compiled graph (`MLGraph`'s core); clones share it.
#[derive(Clone)]
pub struct Graph {
    inner: Rc<GraphInner>,
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
                let OperandSource::Constant(value) = &d.sources[operand] else {
                    return Err(Error::Operation(format!("operand {operand} has no producer")));
                };
                let buffer = match value {
                    ConstantValue::Bytes(bytes) => {
                        let buffer = context.create_buffer(buffer_size(&d.descriptors[operand]), "constant").await?;
                        context.upload(&buffer.buffer, bytes);
                        Rc::new(buffer)
                    }
                    ConstantValue::Tensor(tensor) => tensor
                        .buffer()
                        .ok_or_else(|| Error::Type("a constant MLTensor used by the graph is destroyed".into()))?,
                };
                constants.push(buffer);
                value_of[operand] = Some(new_value(&mut values, Value::Fixed(Slot::Constant(constants.len() - 1))));
            }
        }

        // Lower every operator, compiling its kernels inside an error scope.
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let max_groups = context.limits().max_compute_workgroups_per_dimension.max(1);
        let mut planned = Vec::new();
        for operator in &d.operators {
            let cx = LowerContext {
                inputs: operator.inputs.iter().map(|&i| &d.descriptors[i]).collect(),
                outputs: operator.outputs.iter().map(|&i| &d.descriptors[i]).collect(),
                shader_f16: context.has_shader_f16(),
            };
            let label = || if operator.label.is_empty() { operator.op.name().to_string() } else { operator.label.clone() };
            let lowering = ops::lower(&operator.op, &cx).map_err(|e| Error::Operation(format!("{}: {}", label(), e.message())))?;
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
                        let pipeline =
                            context.inner.pipelines.get(device, &launch.source, launch.reads.len(), launch.writes.len());
                        planned.push(PlannedStep::Kernel { pipeline, values: launch_values, grid: [x as u32, y as u32] });
                    }
                }
            }
        }
        for (from, to, size) in extra_output_copies {
            planned.push(PlannedStep::Copy { from, to, size });
        }
        if let Some(e) = scope.pop().await {
            return Err(Error::Operation(format!("a kernel failed to compile: {e}")));
        }

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
        let mut intermediates: Vec<Rc<DeviceBuffer>> = Vec::new();
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
                let best = free
                    .iter()
                    .enumerate()
                    .filter(|(_, &b)| intermediates[b].size >= size)
                    .min_by_key(|(_, &b)| intermediates[b].size)
                    .map(|(i, _)| i);
                let buffer_index = match best {
                    Some(i) => free.swap_remove(i),
                    None => {
                        intermediates.push(Rc::new(context.create_buffer(size.div_ceil(256) * 256, "intermediate").await?));
                        intermediates.len() - 1
                    }
                };
                slot_of[v] = Some(Slot::Intermediate(buffer_index));
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

        Ok(Graph {
            inner: Rc::new(GraphInner {
                context: context.clone(),
                inputs,
                outputs,
                constants,
                intermediates,
                steps,
                bind_cache: RefCell::new(None),
                destroyed: Cell::new(false),
            }),
        })
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

    /// Device bytes of the buffers this graph owns (constants it uploaded and intermediates).
    pub fn device_bytes(&self) -> u64 {
        self.inner.constants.iter().chain(&self.inner.intermediates).map(|b| b.size).sum()
    }

    /// Number of GPU dispatches and copies one `dispatch()` records.
    pub fn step_count(&self) -> usize {
        self.inner.steps.len()
    }

    pub fn is_destroyed(&self) -> bool {
        self.inner.destroyed.get()
    }

    /// `destroy()`: the graph can no longer be dispatched; its buffers go when the last handle
    /// is dropped (queued work keeps them alive on the GPU side).
    pub fn destroy(&self) {
        self.inner.destroyed.set(true);
        self.inner.bind_cache.borrow_mut().take();
    }

    fn buffer_of<'a>(&'a self, slot: Slot, inputs: &'a [Rc<DeviceBuffer>], outputs: &'a [Rc<DeviceBuffer>]) -> &'a DeviceBuffer {
        match slot {
            Slot::Input(i) => &inputs[i],
            Slot::Output(i) => &outputs[i],
            Slot::Constant(i) => &self.inner.constants[i],
            Slot::Intermediate(i) => &self.inner.intermediates[i],
        }
    }
}

/// The spec's "validate tensors with descriptors", returning the buffers in descriptor order.
fn bind_named(kind: &str, named: &[(String, Tensor)], descriptors: &[(String, OperandDescriptor)]) -> Result<Vec<Rc<DeviceBuffer>>> {
    if named.len() != descriptors.len() {
        return Err(Error::Type(format!("the graph has {} {kind}s but {} were given", descriptors.len(), named.len())));
    }
    let by_name: BTreeMap<&str, &Tensor> = named.iter().map(|(n, t)| (n.as_str(), t)).collect();
    if by_name.len() != named.len() {
        return Err(Error::Type(format!("duplicate {kind} name")));
    }
    descriptors
        .iter()
        .map(|(name, descriptor)| {
            let tensor = by_name.get(name.as_str()).ok_or_else(|| Error::Type(format!("missing {kind} '{name}'")))?;
            if tensor.is_constant() {
                return Err(Error::Type(format!("{kind} '{name}' is a constant MLTensor")));
            }
            if tensor.descriptor() != descriptor {
                return Err(Error::Type(format!(
                    "{kind} '{name}' is {} but the graph expects {descriptor}",
                    tensor.descriptor()
                )));
            }
            tensor.buffer().ok_or_else(|| Error::Type(format!("{kind} '{name}' is destroyed")))
        })
        .collect()
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
        let all: Vec<&Tensor> = inputs.iter().chain(outputs).map(|(_, t)| t).collect();
        for (i, a) in all.iter().enumerate() {
            if all[..i].iter().any(|b| b.id() == a.id() && b.context().same(a.context())) {
                return Err(Error::Type("the same MLTensor is passed twice to dispatch()".into()));
            }
        }
        for tensor in &all {
            if !tensor.context().same(self) {
                return Err(Error::Type("an MLTensor belongs to another MLContext".into()));
            }
            if tensor.is_destroyed() {
                return Err(Error::Type("an MLTensor passed to dispatch() is destroyed".into()));
            }
        }
        let input_buffers = bind_named("input", inputs, graph.input_descriptors())?;
        let output_buffers = bind_named("output", outputs, graph.output_descriptors())?;
        if self.is_lost() {
            return Ok(());
        }
        graph.record(&input_buffers, &output_buffers);
        Ok(())
    }
}

impl Graph {
    fn record(&self, inputs: &[Rc<DeviceBuffer>], outputs: &[Rc<DeviceBuffer>]) {
        let context = &self.inner.context;
        let device = context.device();
        let key: Vec<u64> = inputs.iter().chain(outputs).map(|b| b.id).collect();
        let mut cache = self.inner.bind_cache.borrow_mut();
        if cache.as_ref().map(|c| c.key != key).unwrap_or(true) {
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
                                resource: self.buffer_of(slot, inputs, outputs).buffer.as_entire_binding(),
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
            *cache = Some(BindCache { key, groups });
        }
        let Some(cache) = cache.as_ref() else { return };
        let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("dispatch") });
        let mut index = 0;
        while index < self.inner.steps.len() {
            if let Step::Copy { from, to, size } = &self.inner.steps[index] {
                let from = self.buffer_of(*from, inputs, outputs);
                let to = self.buffer_of(*to, inputs, outputs);
                encoder.copy_buffer_to_buffer(&from.buffer, 0, &to.buffer, 0, *size);
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
    }
}
