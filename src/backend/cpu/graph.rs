//! The CPU backend's `MLGraph`: each operator gets a kernel once at compile time (a float32
//! kernel where one exists, else the operator's float64 reference), constants are copied into
//! the backend's memory while the graph is resident (from host copies, or read from their files
//! in the `"disk"` tier), and `dispatch()` runs the operators in order, freeing each
//! intermediate after its last use.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use crate::backend::cpu::buffer::Buffer;
use crate::backend::cpu::context::CpuContext;
use crate::backend::cpu::kernel::{Kernel, Memory};
use crate::backend::cpu::kernels::chain::{Chain, ChainArg, ChainNode, PARALLEL_ELEMENTS};
use crate::backend::cpu::threads;
use crate::backend::cpu::tensor::CpuTensor;
use crate::backend::check_dispatch;
use crate::error::{Error, Result};
use crate::graph::{ConstantValue, GraphDescription, OperandSource, Operator};
use crate::memory::budget::Evictable;
use crate::backend::read_ahead::ReadAhead;
use crate::memory::read_ahead::{FileRange, Windows};
use crate::memory::{EvictionPriority, FileBacked, Residency, SharedConstant};
use crate::ops::Op;
use crate::operand::{DataType, OperandDescriptor};

/// One operator with its kernel.
pub(super) struct Step {
    pub(super) operator: Operator,
    kernel: Kernel,
}

pub(super) struct GraphInner {
    id: u64,
    context: CpuContext,
    pub(super) descriptors: Vec<OperandDescriptor>,
    pub(super) steps: Vec<Step>,
    /// Sorted by name, with their operand indices.
    pub(super) inputs: Vec<(String, OperandDescriptor)>,
    pub(super) outputs: Vec<(String, OperandDescriptor)>,
    pub(super) input_operands: Vec<usize>,
    pub(super) output_operands: Vec<usize>,
    /// Operand index and bytes of each constant.
    pub(super) constants: Vec<(usize, Rc<SharedConstant>)>,
    /// The constants' buffers while resident, in the order of `constants`.
    resident: RefCell<Vec<Rc<Buffer>>>,
    /// For each operand, the last step that reads it (`usize::MAX` for graph outputs).
    last_use: Vec<usize>,
    residency: Cell<Residency>,
    /// Changed by every eviction and `destroy()`: a swap-in that read files meanwhile lets its
    /// copies go instead of making the graph resident.
    generation: Cell<u64>,
    priority: Cell<EvictionPriority>,
    last_used: Cell<u64>,
    destroyed: Cell<bool>,
}

/// A compiled CPU graph; clones share it.
#[derive(Clone)]
pub struct CpuGraph {
    pub(super) inner: Rc<GraphInner>,
}

impl CpuGraph {
    /// Chooses every operator's kernel and makes the constants resident.
    pub fn compile(context: &CpuContext, description: GraphDescription) -> Result<CpuGraph> {
        context.check_not_lost()?;
        let GraphDescription { descriptors, sources, operators, inputs, outputs } = description;
        let mut constants = Vec::new();
        for (index, source) in sources.iter().enumerate() {
            let OperandSource::Constant(value) = source else { continue };
            let shared = match value {
                ConstantValue::Bytes(shared) => Some(shared.clone()),
                ConstantValue::Tensor(tensor) => tensor.shared_constant(),
            }
            .ok_or_else(|| Error::Type("a constant MLTensor used by the graph is destroyed".into()))?;
            constants.push((index, shared));
        }
        // Constants, and reshapes of them (the same bytes): their kernels may keep them packed.
        let mut constant: Vec<bool> = sources.iter().map(|s| matches!(s, OperandSource::Constant(_))).collect();
        for operator in &operators {
            if let (Op::Reshape { .. }, [input], [output]) = (&operator.op, &operator.inputs[..], &operator.outputs[..]) {
                constant[*output] = constant[*input];
            }
        }
        let graph_outputs: Vec<usize> = outputs.values().copied().collect();
        let links = Links::new(&descriptors, &operators);
        let groups = chains(&descriptors, &operators, &graph_outputs, &links);
        // The step that reads each operator's inputs: a chain's last operator reads those of
        // every operator of the chain.
        let mut reader: Vec<usize> = (0..operators.len()).collect();
        for group in groups.iter().filter(|g| g.len() > 1) {
            let last = group[group.len() - 1];
            group.iter().for_each(|&m| reader[m] = last);
        }
        // Products reading a B gathered from a stack: the gather and reshape are read by them.
        let gathered: Vec<Option<(Vec<usize>, Vec<usize>)>> =
            (0..operators.len()).map(|i| gathered_b(&descriptors, &operators, &graph_outputs, &links, i)).collect();
        for (i, found) in gathered.iter().enumerate() {
            if let Some((members, _)) = found {
                members.iter().for_each(|&m| reader[m] = i);
            }
        }
        // Products reading a B dequantized from an 8-bit constant: the dequantizeLinear is read
        // by them.
        let dequantized: Vec<Option<(usize, Vec<usize>)>> =
            (0..operators.len()).map(|i| dequantized_b(&descriptors, &operators, &graph_outputs, &links, &constant, i)).collect();
        for (i, found) in dequantized.iter().enumerate() {
            if let Some((member, _)) = found {
                reader[*member] = i;
            }
        }
        let mut last_use = vec![0usize; descriptors.len()];
        for (i, operator) in operators.iter().enumerate() {
            for &input in &operator.inputs {
                last_use[input] = last_use[input].max(reader[i]);
            }
        }
        for &output in outputs.values() {
            last_use[output] = usize::MAX;
        }
        let kernels = (0..operators.len())
            .map(|i| {
                let group = &groups[i];
                // An element-wise operator alone runs as a chain too where the chain kernel would
                // split it between the CPU threads (the same per-element code, the same results);
                // not with the chains turned off.
                let alone_parallel = group.len() == 1
                    && crate::plan::fusion::enabled()
                    && threads::count() > 1
                    && descriptors[operators[i].outputs[0]].element_count() >= PARALLEL_ELEMENTS as u64
                    && chainable(&descriptors, &operators[i]);
                if group.len() > 1 || alone_parallel {
                    return Ok(chain_kernel(&operators, group));
                }
                if reader[i] != i {
                    return Ok(Kernel::Absorbed);
                }
                let operator = &operators[i];
                if let Some((_, reads)) = &gathered[i] {
                    let b_shape = descriptors[operator.inputs[1]].shape.clone();
                    return Ok(Kernel::Gathered { product: operator.op.clone(), reads: reads.clone(), b_shape });
                }
                if let Some((_, reads)) = &dequantized[i] {
                    return Ok(Kernel::Dequantized { product: operator.op.clone(), reads: reads.clone(), packed: Default::default() });
                }
                let input_descriptors: Vec<&OperandDescriptor> = operator.inputs.iter().map(|&i| &descriptors[i]).collect();
                let output_descriptors: Vec<&OperandDescriptor> = operator.outputs.iter().map(|&o| &descriptors[o]).collect();
                let constant: Vec<bool> = operator.inputs.iter().map(|&i| constant[i]).collect();
                Kernel::choose(&operator.op, &input_descriptors, &output_descriptors, &constant)
            })
            .collect::<Result<Vec<_>>>()?;
        let steps = operators.into_iter().zip(kernels).map(|(operator, kernel)| Step { operator, kernel }).collect();
        let named = |map: &std::collections::BTreeMap<String, usize>| -> Vec<(String, OperandDescriptor)> {
            map.iter().map(|(name, &i)| (name.clone(), descriptors[i].clone())).collect()
        };
        let graph = CpuGraph {
            inner: Rc::new(GraphInner {
                id: context.next_id(),
                context: context.clone(),
                inputs: named(&inputs),
                outputs: named(&outputs),
                input_operands: inputs.values().copied().collect(),
                output_operands: outputs.values().copied().collect(),
                descriptors,
                steps,
                constants,
                resident: RefCell::default(),
                last_use,
                residency: Cell::new(Residency::Host),
                generation: Cell::new(0),
                priority: Cell::new(EvictionPriority::Normal),
                last_used: Cell::new(0),
                destroyed: Cell::new(false),
            }),
        };
        let weak: std::rc::Weak<dyn Evictable> = Rc::downgrade(&(graph.inner.clone() as Rc<dyn Evictable>));
        context.inner.memory.register(weak);
        // Constants still to be read from their files wait for the first swap-in.
        if graph.needs_read() {
            graph.inner.residency.set(graph.inner.off_device_tier());
        } else {
            graph.swap_in_now()?;
        }
        Ok(graph)
    }

    pub fn context(&self) -> &CpuContext {
        &self.inner.context
    }

    pub fn input_descriptors(&self) -> &[(String, OperandDescriptor)] {
        &self.inner.inputs
    }

    pub fn output_descriptors(&self) -> &[(String, OperandDescriptor)] {
        &self.inner.outputs
    }

    /// How many operators run on a float32 kernel, and how many on the float64 reference.
    pub fn kernel_counts(&self) -> (usize, usize) {
        let reference = self.inner.steps.iter().filter(|s| matches!(s.kernel, Kernel::Reference)).count();
        (self.inner.steps.len() - reference, reference)
    }

    /// How many operators run inside the chain kernel of a later one.
    pub fn fused_operators(&self) -> usize {
        self.inner.steps.iter().filter(|s| matches!(s.kernel, Kernel::Absorbed)).count()
    }

    /// `deviceBytes`: bytes of the constants this graph holds resident (shared constants count
    /// for every graph using them).
    pub fn device_bytes(&self) -> u64 {
        self.inner.resident.borrow().iter().map(|b| b.size()).sum()
    }

    /// `hostBytes`: bytes of the host copies of this graph's constants.
    pub fn host_bytes(&self) -> u64 {
        self.inner.constants.iter().map(|(_, c)| c.host_bytes()).sum()
    }

    pub fn residency(&self) -> Residency {
        self.inner.residency.get()
    }

    pub fn eviction_priority(&self) -> EvictionPriority {
        self.inner.priority.get()
    }

    pub fn set_eviction_priority(&self, priority: EvictionPriority) {
        self.inner.priority.set(priority);
    }

    pub fn is_destroyed(&self) -> bool {
        self.inner.destroyed.get() || self.inner.context.is_lost()
    }

    pub(super) fn check_usable(&self) -> Result<()> {
        if self.inner.destroyed.get() {
            return Err(Error::InvalidState("the MLGraph is destroyed".into()));
        }
        self.inner.context.check_not_lost()
    }

    /// Whether a constant must be read from its file to make the graph resident.
    pub(super) fn needs_read(&self) -> bool {
        let inner = &self.inner;
        inner.residency.get() != Residency::Device
            && inner.constants.iter().any(|(_, c)| c.reread().is_some() && !c.has_host_copy() && !inner.context.holds(c))
    }

    /// The range of its file that `constant` must be read from to make the graph resident.
    fn file_read<'a>(&self, constant: &'a Rc<SharedConstant>) -> Option<(FileRange, &'a dyn FileBacked)> {
        constant.reread()?;
        constant.file_read().filter(|_| !self.inner.context.holds(constant))
    }

    /// Starts reading the constants that must come from their files, merged (see
    /// [`ReadAhead`]); `queued` for a dispatch waiting behind other work, whose reads then
    /// overlap that work's.
    pub(super) fn read_ahead(&self, queued: bool) -> Option<ReadAhead> {
        let inner = &self.inner;
        if inner.residency.get() == Residency::Device {
            return None;
        }
        let files = inner.constants.iter().filter_map(|(_, c)| self.file_read(c));
        Some(ReadAhead::start(files, &inner.context.inner.memory.read_ahead, queued))
    }

    /// Copies the constants in (sharing those already resident, reading those in the `"disk"`
    /// tier from their files, merged and from `ahead` if started), evicting other graphs under the
    /// budget first.
    async fn make_resident(&self, ahead: Option<ReadAhead>) -> Result<()> {
        let inner = &self.inner;
        if inner.residency.get() == Residency::Device {
            return Ok(());
        }
        let generation = inner.generation.get();
        let context = &inner.context;
        let needed = inner.constants.iter().map(|(_, c)| context.bytes_to_acquire(c)).sum();
        context.make_room(inner.id, needed)?;
        let mut windows = match ahead {
            Some(ahead) => ahead.finish().await?,
            None => Windows::default(),
        };
        let mut copied = 0;
        let mut resident = Vec::with_capacity(inner.constants.len());
        for (i, (_, constant)) in inner.constants.iter().enumerate() {
            if self.file_read(constant).is_some_and(|(range, _)| windows.wants(range)) {
                drop(std::mem::take(&mut windows));
                let files = inner.constants[i..].iter().filter_map(|(_, c)| self.file_read(c));
                windows = ReadAhead::start(files, &context.inner.memory.read_ahead, false).finish().await?;
            }
            let (buffer, bytes) = context.resident_constant(constant, &windows).await?;
            copied += bytes;
            resident.push(buffer);
        }
        // Swapped out or destroyed while it read: that stands.
        if inner.generation.get() != generation || inner.destroyed.get() {
            return Ok(());
        }
        *inner.resident.borrow_mut() = resident;
        inner.residency.set(Residency::Device);
        let memory = &context.inner.memory;
        memory.bytes_uploaded.set(memory.bytes_uploaded.get() + copied);
        memory.swap_ins.set(memory.swap_ins.get() + 1);
        Ok(())
    }

    /// [`make_resident`](Self::make_resident) where no file must be read, which completes at once.
    fn swap_in_now(&self) -> Result<()> {
        crate::backend::oneshot::now(self.make_resident(None))
            .unwrap_or_else(|| Err(Error::InvalidState("the graph's constants must be read from their files first".into())))
    }

    /// `swapIn()`.
    pub async fn swap_in(&self) -> Result<()> {
        self.check_usable()?;
        self.make_resident(None).await
    }

    /// `swapOut({to})`: the constants leave the backend's memory; their host copies stay, or
    /// with `"disk"`, constants from files keep none.
    pub fn swap_out(&self, to: Residency) -> Result<()> {
        self.check_usable()?;
        let inner = &self.inner;
        match to {
            Residency::Device => Err(Error::Type("swapOut() goes to \"host\" or \"disk\"".into())),
            Residency::Disk if !inner.file_backed() => Err(Error::Type(
                "swapOut({to: \"disk\"}) needs every constant to come from a weight file; this graph's constants do not".into(),
            )),
            Residency::Disk => {
                inner.evict();
                inner.constants.iter().for_each(|(_, c)| c.drop_host_copy());
                inner.residency.set(Residency::Disk);
                Ok(())
            }
            Residency::Host => {
                inner.evict();
                Ok(())
            }
        }
    }

    /// `destroy()`: the constants' memory goes at once.
    pub fn destroy(&self) {
        if !self.inner.destroyed.replace(true) {
            self.inner.generation.set(self.inner.generation.get() + 1);
            self.inner.resident.borrow_mut().clear();
            self.inner.steps.iter().for_each(|s| s.kernel.release());
        }
    }
}

impl GraphInner {
    fn file_backed(&self) -> bool {
        !self.constants.is_empty() && self.constants.iter().all(|(_, c)| c.is_file_backed())
    }

    /// The tier out of the backend's memory: `"disk"` when every constant comes from a file and
    /// one of them has no host copy (the host budget may have evicted it), else `"host"`.
    fn off_device_tier(&self) -> Residency {
        if self.file_backed() && !self.constants.iter().all(|(_, c)| c.has_host_copy()) {
            Residency::Disk
        } else {
            Residency::Host
        }
    }
}

impl Evictable for GraphInner {
    fn id(&self) -> u64 {
        self.id
    }

    fn is_resident(&self) -> bool {
        self.residency.get() == Residency::Device
    }

    fn last_used(&self) -> u64 {
        self.last_used.get()
    }

    fn in_flight(&self) -> bool {
        false
    }

    fn priority(&self) -> EvictionPriority {
        self.priority.get()
    }

    fn evict(&self) {
        self.generation.set(self.generation.get() + 1);
        if self.residency.get() == Residency::Device {
            self.resident.borrow_mut().clear();
            self.steps.iter().for_each(|s| s.kernel.release());
            self.residency.set(self.off_device_tier());
            let memory = &self.context.inner.memory;
            memory.swap_outs.set(memory.swap_outs.get() + 1);
        }
    }

    fn slot_sizes(&self) -> Vec<u64> {
        Vec::new()
    }
}

impl CpuContext {
    /// `dispatch(graph, inputs, outputs)`: validates (the spec's order), swaps the graph in when
    /// it is not resident, and runs it to completion; behind a read of its constants from their
    /// files (and the work issued after it) once they are read.
    pub fn dispatch(&self, graph: &CpuGraph, inputs: &[(String, CpuTensor)], outputs: &[(String, CpuTensor)]) -> Result<()> {
        if !graph.context().same(self) {
            return Err(Error::Type("the MLGraph belongs to another MLContext".into()));
        }
        if graph.inner.destroyed.get() {
            return Err(Error::InvalidState("the MLGraph is destroyed".into()));
        }
        let (inputs, outputs) = check_dispatch(inputs, outputs, graph.input_descriptors(), graph.output_descriptors(), |t| t.context().same(self))?;
        if self.is_lost() {
            return Ok(());
        }
        graph.inner.last_used.set(self.inner.memory.tick());
        if !self.is_deferring() && !graph.needs_read() {
            return self.run(graph, &inputs, &outputs);
        }
        let (context, graph) = (self.clone(), graph.clone());
        let (inputs, outputs): (Vec<CpuTensor>, Vec<CpuTensor>) = (inputs.into_iter().cloned().collect(), outputs.into_iter().cloned().collect());
        // Its files are read now, in flight while the work before it runs.
        let ahead = graph.read_ahead(true);
        self.defer(Box::pin(async move {
            if graph.inner.destroyed.get() {
                return Err(Error::InvalidState("the MLGraph was destroyed before its dispatch ran".into()));
            }
            if context.is_lost() {
                return Ok(());
            }
            graph.make_resident(ahead).await?;
            context.run(&graph, &inputs.iter().collect::<Vec<_>>(), &outputs.iter().collect::<Vec<_>>())
        }));
        Ok(())
    }

    /// Runs a validated dispatch now.
    fn run(&self, graph: &CpuGraph, inputs: &[&CpuTensor], outputs: &[&CpuTensor]) -> Result<()> {
        let inner = &graph.inner;
        graph.swap_in_now()?;
        let inputs = inputs
            .iter()
            .map(|t| t.buffer().ok_or_else(|| Error::InvalidState("an MLTensor of the dispatch was destroyed before it ran".into())))
            .collect::<Result<Vec<_>>>()?;
        let mut values: Vec<Option<Rc<Buffer>>> = vec![None; inner.descriptors.len()];
        for (&operand, buffer) in inner.input_operands.iter().zip(inputs) {
            values[operand] = Some(buffer);
        }
        for ((operand, _), buffer) in inner.constants.iter().zip(inner.resident.borrow().iter()) {
            values[*operand] = Some(buffer.clone());
        }
        for (i, step) in inner.steps.iter().enumerate() {
            let operator = &step.operator;
            let reads = match &step.kernel {
                Kernel::Absorbed => continue,
                Kernel::Chain(_, inputs) => inputs,
                Kernel::Gathered { reads, .. } | Kernel::Dequantized { reads, .. } => reads,
                _ => &operator.inputs,
            };
            let operands = reads
                .iter()
                .map(|&k| values[k].clone().map(|b| (&inner.descriptors[k], b)))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| Error::Operation(format!("{}: an input has no value", operator.op.name())))?;
            let output_descriptors: Vec<&OperandDescriptor> = operator.outputs.iter().map(|&o| &inner.descriptors[o]).collect();
            let memory = Memory { counter: self.device_counter(), budget: self.inner.memory.budget.get() };
            let results = step.kernel.run(&operator.op, &operands, &output_descriptors, &memory)?;
            drop(operands);
            for (&o, result) in operator.outputs.iter().zip(results) {
                values[o] = Some(result);
            }
            for &k in reads {
                if inner.last_use[k] == i {
                    values[k] = None;
                }
            }
        }
        for (&operand, tensor) in inner.output_operands.iter().zip(outputs) {
            let buffer = values[operand].clone().ok_or_else(|| Error::Operation("an output was not computed".into()))?;
            tensor.set_buffer(buffer);
        }
        Ok(())
    }
}

/// The chains of element-wise operators that run as one kernel (see [`Chain`]): for each
/// operator, the members of the chain it ends (itself alone when none), in execution order; an
/// operator of a chain that ends later has none. An operator joins the chain of the one reading
/// its output when it is the output's only reader, the output is not a graph output, both can be
/// chain operators and have the same output shape, and every operand fits the chain's shape.
/// `WEBNN_WGPU_FUSION=0` (native) turns this off as it does the WebGPU fusion.
fn chains(descriptors: &[OperandDescriptor], operators: &[Operator], graph_outputs: &[usize], links: &Links) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = (0..operators.len()).map(|i| vec![i]).collect();
    if !crate::plan::fusion::enabled() {
        return groups;
    }
    let Links { producer, readers } = links;
    let chainable: Vec<bool> = operators.iter().map(|operator| chainable(descriptors, operator)).collect();
    for (c, operator) in operators.iter().enumerate() {
        if !chainable[c] {
            continue;
        }
        let shape = &descriptors[operator.outputs[0]].shape;
        for &o in &operator.inputs {
            let Some(j) = producer[o] else { continue };
            let joins = chainable[j]
                && j != c
                && readers[o] == 1
                && !graph_outputs.contains(&o)
                && &descriptors[o].shape == shape
                && !groups[j].is_empty()
                && !groups[c].contains(&j);
            if joins {
                let members = std::mem::take(&mut groups[j]);
                groups[c].extend(members);
            }
        }
        groups[c].sort_unstable();
    }
    // An absorbed operator keeps an empty group; its chain's last operator lists it.
    groups
}

/// Which operator writes each operand, and how many operators read it.
struct Links {
    producer: Vec<Option<usize>>,
    readers: Vec<usize>,
}

impl Links {
    fn new(descriptors: &[OperandDescriptor], operators: &[Operator]) -> Links {
        let mut producer = vec![None; descriptors.len()];
        let mut readers = vec![0usize; descriptors.len()];
        for (i, operator) in operators.iter().enumerate() {
            operator.outputs.iter().for_each(|&o| producer[o] = Some(i));
            let mut distinct = operator.inputs.clone();
            distinct.sort_unstable();
            distinct.dedup();
            distinct.iter().for_each(|&k| readers[k] += 1);
        }
        Links { producer, readers }
    }
}

/// Whether `operator` can be an operator of a chain kernel.
fn chainable(descriptors: &[OperandDescriptor], operator: &Operator) -> bool {
    let inputs: Vec<&OperandDescriptor> = operator.inputs.iter().map(|&k| &descriptors[k]).collect();
    let outputs: Vec<&OperandDescriptor> = operator.outputs.iter().map(|&o| &descriptors[o]).collect();
    Chain::handles(&operator.op, &inputs, &outputs) && inputs.iter().all(|d| Chain::operand_fits(&d.shape, &outputs[0].shape))
}

/// For a float32 matmul or gemm `i` whose B is gathered from a float32 stack
/// ([`gathered_b`](crate::plan::fusion::gathered_b)): the gather and reshape, and the operands the
/// product reads instead of its own (A, the stack, the index, then C). `WEBNN_WGPU_FUSION=0`
/// (native) turns this off with the chains.
fn gathered_b(descriptors: &[OperandDescriptor], operators: &[Operator], graph_outputs: &[usize], links: &Links, i: usize) -> Option<(Vec<usize>, Vec<usize>)> {
    let product = &operators[i];
    let float32 = |k: &usize| descriptors[*k].data_type == DataType::Float32;
    if !crate::plan::fusion::enabled() || !product.inputs.iter().chain(&product.outputs).all(float32) {
        return None;
    }
    let producer = |o: usize| links.producer[o];
    let sole = |o: usize| !graph_outputs.contains(&o) && links.readers[o] == 1;
    let members = crate::plan::fusion::gathered_b(descriptors, operators, i, producer, sole)?;
    let gather = &operators[members[0]];
    let (stack, index) = (gather.inputs[0], gather.inputs[1]);
    if !float32(&stack) {
        return None;
    }
    let mut reads = vec![product.inputs[0], stack, index];
    reads.extend(product.inputs.get(2));
    Some((members, reads))
}

/// For a float32 matmul (B of rank 2) or gemm `i` whose B is `dequantizeLinear(q, scale,
/// zeroPoint)` of 8-bit constants with one scale per tensor or per column of `op(B)`, read by
/// nothing else: the dequantizeLinear, and the operands the product reads instead of its own (A,
/// q, scale, zeroPoint, then C). `WEBNN_WGPU_FUSION=0` (native) turns this off with the chains.
fn dequantized_b(
    descriptors: &[OperandDescriptor],
    operators: &[Operator],
    graph_outputs: &[usize],
    links: &Links,
    constant: &[bool],
    i: usize,
) -> Option<(usize, Vec<usize>)> {
    let product = &operators[i];
    let float32 = |k: &usize| descriptors[*k].data_type == DataType::Float32;
    let column_axis = match &product.op {
        Op::Matmul => 1,
        Op::Gemm(o) => usize::from(!o.b_transpose),
        _ => return None,
    };
    if !crate::plan::fusion::enabled() || !product.inputs.iter().chain(&product.outputs).all(float32) {
        return None;
    }
    let b = *product.inputs.get(1)?;
    let j = links.producer[b]?;
    let dequantize = &operators[j];
    let &[q, scale, zero_point] = dequantize.inputs.as_slice() else { return None };
    let (q_shape, scale_shape) = (&descriptors[q].shape, &descriptors[scale].shape);
    let per_column = q_shape.len() == 2
        && scale_shape.len() == 2
        && scale_shape[1 - column_axis] == 1
        && (scale_shape[column_axis] == 1 || scale_shape[column_axis] == q_shape[column_axis]);
    let fits = dequantize.op == Op::DequantizeLinear
        && matches!(descriptors[q].data_type, DataType::Int8 | DataType::Uint8)
        && float32(&scale)
        && [q, scale, zero_point].iter().all(|&k| constant[k])
        && per_column
        && links.readers[b] == 1
        && !graph_outputs.contains(&b);
    if !fits {
        return None;
    }
    let mut reads = vec![product.inputs[0], q, scale, zero_point];
    reads.extend(product.inputs.get(2));
    Some((j, reads))
}

/// The kernel of a chain's last operator: the chain's inputs are the operands its members read
/// that no member produces, in order of first use.
fn chain_kernel(operators: &[Operator], group: &[usize]) -> Kernel {
    let mut inputs: Vec<usize> = Vec::new();
    let mut nodes = Vec::with_capacity(group.len());
    for &m in group {
        let args = operators[m]
            .inputs
            .iter()
            .map(|&k| match group.iter().position(|&p| operators[p].outputs.contains(&k)) {
                Some(node) => ChainArg::Node(node),
                None => {
                    let index = inputs.iter().position(|&x| x == k).unwrap_or_else(|| {
                        inputs.push(k);
                        inputs.len() - 1
                    });
                    ChainArg::Input(index)
                }
            })
            .collect();
        nodes.push(ChainNode { op: operators[m].op.clone(), args });
    }
    Kernel::Chain(Chain { nodes }, inputs)
}
