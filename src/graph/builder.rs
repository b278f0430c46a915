//! `MLGraphBuilder`'s core: records inputs, constants and operators after validating each one with
//! the spec's steps, and hands the reachable part of the graph (the IR, [`GraphDescription`]) to a
//! backend on `build()` (the WebGPU backend's `build` is in `runtime::graph`). What it needs of
//! its context and of constant tensors is behind [`BuilderContext`] and [`ConstantTensor`].

use std::any::Any;
use std::cell::Cell;
use std::collections::{BTreeMap, HashSet};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};
use crate::operand::{DataType, Number, OperandDescriptor};
use crate::memory::{HostBytes, SharedConstant};
use crate::ops::wgsl::buffer_size;
use crate::ops::{self, Op};

static NEXT_BUILDER_ID: AtomicU64 = AtomicU64::new(1);

/// A handle to an operand of one builder (the core of `MLOperand`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Operand {
    pub(crate) builder_id: u64,
    pub(crate) index: usize,
}

/// What the builder needs from the context it builds for (`runtime::Context` implements it).
pub trait BuilderContext: Any {
    fn is_lost(&self) -> bool;
    /// `TypeError` when a tensor of `descriptor` is over `maxTensorByteLength`.
    fn check_tensor_byte_length(&self, descriptor: &OperandDescriptor) -> Result<()>;
    /// The counter that host copies of constants add to (`memoryInfo().hostBytes`).
    fn host_byte_counter(&self) -> &Rc<Cell<u64>>;
}

/// A constant `MLTensor`, as the builder checks it and a graph holds it.
pub trait ConstantTensor {
    fn belongs_to(&self, context: &dyn BuilderContext) -> bool;
    fn descriptor(&self) -> &OperandDescriptor;
    fn is_constant(&self) -> bool;
    fn is_destroyed(&self) -> bool;
    /// Its bytes, shared with the graphs that use it (`None` once destroyed).
    fn shared_constant(&self) -> Option<Rc<SharedConstant>>;
}

/// The value of a constant operand.
#[derive(Clone)]
pub enum ConstantValue {
    /// Bytes copied from the caller's buffer at `constant()` time, held as a host copy.
    Bytes(Rc<SharedConstant>),
    /// A constant `MLTensor`, whose bytes the graph shares.
    Tensor(Rc<dyn ConstantTensor>),
}

/// Where an operand's value comes from.
#[derive(Clone)]
pub enum OperandSource {
    Input(String),
    Constant(ConstantValue),
    /// Output `output_index` of operator `operator`.
    Operator { operator: usize, output_index: usize },
}

/// One recorded operator.
#[derive(Debug, Clone)]
pub struct Operator {
    pub op: Op,
    pub inputs: Vec<usize>,
    pub outputs: Vec<usize>,
    pub label: String,
}

/// The reachable graph that `build()` hands to the runtime. Operand indices are those of the
/// builder; `operators` are in a valid execution order.
#[derive(Clone)]
pub struct GraphDescription {
    pub descriptors: Vec<OperandDescriptor>,
    pub sources: Vec<OperandSource>,
    pub operators: Vec<Operator>,
    /// Input name -> operand index.
    pub inputs: BTreeMap<String, usize>,
    /// Output name -> operand index.
    pub outputs: BTreeMap<String, usize>,
}

/// `MLGraphBuilder`.
pub struct GraphBuilder {
    id: u64,
    context: Rc<dyn BuilderContext>,
    descriptors: Vec<OperandDescriptor>,
    sources: Vec<OperandSource>,
    operators: Vec<Operator>,
    input_names: HashSet<String>,
    has_built: bool,
}

impl GraphBuilder {
    /// The spec's constructor: fails with `InvalidStateError` on a lost context.
    pub fn new<C: BuilderContext + Clone>(context: &C) -> Result<GraphBuilder> {
        if context.is_lost() {
            return Err(Error::InvalidState("the MLContext is lost".into()));
        }
        Ok(GraphBuilder {
            id: NEXT_BUILDER_ID.fetch_add(1, Ordering::Relaxed),
            context: Rc::new(context.clone()),
            descriptors: Vec::new(),
            sources: Vec::new(),
            operators: Vec::new(),
            input_names: HashSet::new(),
            has_built: false,
        })
    }

    pub fn context(&self) -> &dyn BuilderContext {
        &*self.context
    }

    /// The descriptor of one of this builder's operands.
    pub fn descriptor(&self, operand: Operand) -> Result<&OperandDescriptor> {
        self.check_operand(operand)?;
        Ok(&self.descriptors[operand.index])
    }

    fn check_can_build(&self) -> Result<()> {
        if self.has_built {
            return Err(Error::InvalidState("the MLGraphBuilder has already built a graph".into()));
        }
        if self.context.is_lost() {
            return Err(Error::InvalidState("the MLContext is lost".into()));
        }
        Ok(())
    }

    /// The spec's "validate operand": the operand must come from this builder.
    fn check_operand(&self, operand: Operand) -> Result<()> {
        if operand.builder_id != self.id || operand.index >= self.descriptors.len() {
            return Err(Error::Type("the MLOperand was created by another MLGraphBuilder".into()));
        }
        Ok(())
    }

    fn push(&mut self, descriptor: OperandDescriptor, source: OperandSource) -> Operand {
        self.descriptors.push(descriptor);
        self.sources.push(source);
        Operand { builder_id: self.id, index: self.descriptors.len() - 1 }
    }

    /// `input(name, descriptor)`.
    pub fn input(&mut self, name: &str, descriptor: OperandDescriptor) -> Result<Operand> {
        self.check_can_build()?;
        if name.is_empty() {
            return Err(Error::Type("input name must not be empty".into()));
        }
        if self.input_names.contains(name) {
            return Err(Error::Type(format!("duplicate input name '{name}'")));
        }
        descriptor.check_dimensions()?;
        self.context.check_tensor_byte_length(&descriptor)?;
        self.input_names.insert(name.to_string());
        Ok(self.push(descriptor, OperandSource::Input(name.to_string())))
    }

    /// `constant(descriptor, buffer)`: the bytes must be exactly the descriptor's byte length.
    pub fn constant(&mut self, descriptor: OperandDescriptor, bytes: &[u8]) -> Result<Operand> {
        self.check_can_build()?;
        descriptor.check_dimensions()?;
        self.context.check_tensor_byte_length(&descriptor)?;
        if bytes.len() as u64 != descriptor.byte_length() {
            return Err(Error::Type(format!(
                "constant buffer holds {} bytes but {descriptor} needs {}",
                bytes.len(),
                descriptor.byte_length()
            )));
        }
        let host = HostBytes::from_slice(bytes, self.context.host_byte_counter());
        Ok(self.push_constant(descriptor, host))
    }

    /// `constant(descriptor, buffer)` with a host copy the caller already made (on the web, a
    /// JS-owned copy that never enters wasm memory).
    pub fn constant_host(&mut self, descriptor: OperandDescriptor, host: HostBytes) -> Result<Operand> {
        self.check_can_build()?;
        descriptor.check_dimensions()?;
        self.context.check_tensor_byte_length(&descriptor)?;
        if host.len() != descriptor.byte_length() {
            return Err(Error::Type(format!(
                "constant buffer holds {} bytes but {descriptor} needs {}",
                host.len(),
                descriptor.byte_length()
            )));
        }
        Ok(self.push_constant(descriptor, host))
    }

    fn push_constant(&mut self, descriptor: OperandDescriptor, host: HostBytes) -> Operand {
        let shared = Rc::new(SharedConstant::new(buffer_size(&descriptor), host));
        self.push(descriptor, OperandSource::Constant(ConstantValue::Bytes(shared)))
    }

    /// `constant(dataType, value)`: a scalar, cast to the data type.
    pub fn constant_scalar(&mut self, data_type: DataType, value: Number) -> Result<Operand> {
        self.check_can_build()?;
        let bytes = value.cast_bytes(data_type);
        let descriptor = OperandDescriptor::new(data_type, Vec::new());
        let host = HostBytes::from_slice(&bytes, self.context.host_byte_counter());
        Ok(self.push_constant(descriptor, host))
    }

    /// `constant(tensor)`: a constant `MLTensor` of the same context.
    pub fn constant_tensor<T: ConstantTensor + Clone + 'static>(&mut self, tensor: &T) -> Result<Operand> {
        if !tensor.belongs_to(&*self.context) {
            return Err(Error::Type("the MLTensor belongs to another MLContext".into()));
        }
        if tensor.is_destroyed() {
            return Err(Error::Type("the MLTensor is destroyed".into()));
        }
        if !tensor.is_constant() {
            return Err(Error::Type("the MLTensor is not a constant tensor".into()));
        }
        self.check_can_build()?;
        let descriptor = tensor.descriptor().clone();
        Ok(self.push(descriptor, OperandSource::Constant(ConstantValue::Tensor(Rc::new(tensor.clone())))))
    }

    /// Validates and records an operator; returns its output operands.
    pub fn operator(&mut self, op: Op, inputs: &[Operand], label: &str) -> Result<Vec<Operand>> {
        self.check_can_build()?;
        for &input in inputs {
            self.check_operand(input)?;
        }
        let input_descriptors: Vec<&OperandDescriptor> =
            inputs.iter().map(|o| &self.descriptors[o.index]).collect();
        let output_descriptors = ops::validate(&op, &input_descriptors).map_err(|e| with_label(e, &op, label))?;
        for descriptor in &output_descriptors {
            descriptor.check_dimensions().map_err(|e| with_label(e, &op, label))?;
            self.context.check_tensor_byte_length(descriptor).map_err(|e| with_label(e, &op, label))?;
        }
        let operator = self.operators.len();
        let outputs: Vec<Operand> = output_descriptors
            .into_iter()
            .enumerate()
            .map(|(output_index, d)| self.push(d, OperandSource::Operator { operator, output_index }))
            .collect();
        self.operators.push(Operator {
            op,
            inputs: inputs.iter().map(|o| o.index).collect(),
            outputs: outputs.iter().map(|o| o.index).collect(),
            label: label.to_string(),
        });
        Ok(outputs)
    }

    /// Like [`operator`](Self::operator) for the common single-output case.
    pub fn operator1(&mut self, op: Op, inputs: &[Operand], label: &str) -> Result<Operand> {
        let outputs = self.operator(op, inputs, label)?;
        outputs.into_iter().next().ok_or_else(|| Error::Operation("operator produced no output".into()))
    }

    /// The synchronous part of `build(outputs)`: validates the outputs, marks the builder built and
    /// returns the reachable graph.
    pub fn prepare_build(&mut self, outputs: &[(String, Operand)]) -> Result<GraphDescription> {
        self.check_can_build()?;
        if outputs.is_empty() {
            return Err(Error::Type("build() needs at least one output".into()));
        }
        let mut named = BTreeMap::new();
        for (name, operand) in outputs {
            if name.is_empty() {
                return Err(Error::Type("output name must not be empty".into()));
            }
            self.check_operand(*operand)?;
            match &self.sources[operand.index] {
                OperandSource::Input(_) | OperandSource::Constant(_) => {
                    return Err(Error::Type(format!(
                        "output '{name}' is an input or constant operand; use identity()"
                    )))
                }
                OperandSource::Operator { .. } => {}
            }
            named.insert(name.clone(), operand.index);
        }
        // Walk back from the outputs (the spec's queue) to find the reachable operands.
        let mut reachable = vec![false; self.descriptors.len()];
        let mut queue: Vec<usize> = named.values().copied().collect();
        while let Some(index) = queue.pop() {
            if std::mem::replace(&mut reachable[index], true) {
                continue;
            }
            if let OperandSource::Operator { operator, .. } = self.sources[index] {
                queue.extend(self.operators[operator].inputs.iter().copied());
            }
        }
        for index in 0..reachable.len() {
            if let (true, OperandSource::Constant(ConstantValue::Tensor(t))) = (reachable[index], &self.sources[index]) {
                if t.is_destroyed() {
                    return Err(Error::Type("a constant MLTensor used by the graph is destroyed".into()));
                }
            }
        }
        let operators: Vec<Operator> = self
            .operators
            .iter()
            .filter(|op| op.outputs.iter().any(|&o| reachable[o]))
            .cloned()
            .collect();
        let inputs = self
            .sources
            .iter()
            .enumerate()
            .filter_map(|(i, s)| match s {
                OperandSource::Input(name) if reachable[i] => Some((name.clone(), i)),
                _ => None,
            })
            .collect();
        self.has_built = true;
        // The graph takes the constants: the builder can make no other graph, so it keeps no copy.
        let sources = std::mem::take(&mut self.sources);
        self.operators.clear();
        Ok(GraphDescription { descriptors: self.descriptors.clone(), sources, operators, inputs, outputs: named })
    }
}

fn with_label(error: Error, op: &Op, label: &str) -> Error {
    let prefix = if label.is_empty() { format!("{}: ", op.name()) } else { format!("{} [{label}]: ", op.name()) };
    match error {
        Error::Type(m) => Error::Type(prefix + &m),
        other => other,
    }
}
