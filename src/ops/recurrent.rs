//! The recurrent networks gru, gruCell, lstm and lstmCell.
//!
//! All four lower to one plan: the hidden (and cell) states of every step live in f32 scratch
//! buffers `[steps + 1, numDirections, batchSize, hiddenSize]` (slot 0 the initial state, slot
//! `s + 1` the state after processing step `s`), and each step is three launches whose sources
//! do not depend on the step, so they compile once: `gates` computes the input and recurrent
//! matrix products of every gate row, `update` applies the gate activations and writes the next
//! state, `advance` increments the step counter the other two read. The outputs are copied out
//! of the state buffers at the end. A cell operator is the network with one step, one direction,
//! and the given states as initial states.
//!
//! The lstm peephole weights are ordered input, output, forget, and each peephole term reads
//! the cell state before the step, as the spec's emulation does.

use crate::error::{Error, Result};
use crate::graph::{DataType, OperandDescriptor};
use crate::ops::conv2d::valid_dimension;
use crate::ops::limits::{self, OpLimits, TensorLimits, FLOATS};
use crate::ops::reference::{round_to, HostTensor};
use crate::ops::wgsl::{
    binding, load_fn, BufRef, ElementwiseKernel, Launch, LowerContext, Lowering, F16_HELPERS, WORKGROUP_SIZE,
};
use crate::ops::Op;

/// `MLRecurrentNetworkActivation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecurrentActivation {
    Relu,
    Sigmoid,
    Tanh,
}

impl RecurrentActivation {
    pub fn from_name(name: &str) -> Result<RecurrentActivation> {
        match name {
            "relu" => Ok(RecurrentActivation::Relu),
            "sigmoid" => Ok(RecurrentActivation::Sigmoid),
            "tanh" => Ok(RecurrentActivation::Tanh),
            _ => Err(Error::Type(format!("'{name}' is not a valid MLRecurrentNetworkActivation"))),
        }
    }

    fn apply(self, v: f64) -> f64 {
        match self {
            RecurrentActivation::Relu => v.max(0.0),
            RecurrentActivation::Sigmoid => 1.0 / (1.0 + (-v).exp()),
            RecurrentActivation::Tanh => v.tanh(),
        }
    }

    fn wgsl(self) -> &'static str {
        match self {
            RecurrentActivation::Relu => "act_relu",
            RecurrentActivation::Sigmoid => "act_sigmoid",
            RecurrentActivation::Tanh => "act_tanh",
        }
    }
}

/// `MLRecurrentNetworkDirection`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RecurrentDirection {
    #[default]
    Forward,
    Backward,
    Both,
}

impl RecurrentDirection {
    pub fn from_name(name: &str) -> Result<RecurrentDirection> {
        match name {
            "forward" => Ok(RecurrentDirection::Forward),
            "backward" => Ok(RecurrentDirection::Backward),
            "both" => Ok(RecurrentDirection::Both),
            _ => Err(Error::Type(format!("'{name}' is not a valid MLRecurrentNetworkDirection"))),
        }
    }

    fn count(self) -> u32 {
        if self == RecurrentDirection::Both { 2 } else { 1 }
    }
}

/// `MLGruWeightLayout`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GruWeightLayout {
    #[default]
    Zrn,
    Rzn,
}

impl GruWeightLayout {
    pub fn from_name(name: &str) -> Result<GruWeightLayout> {
        match name {
            "zrn" => Ok(GruWeightLayout::Zrn),
            "rzn" => Ok(GruWeightLayout::Rzn),
            _ => Err(Error::Type(format!("'{name}' is not a valid MLGruWeightLayout"))),
        }
    }
}

/// `MLLstmWeightLayout`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LstmWeightLayout {
    #[default]
    Iofg,
    Ifgo,
}

impl LstmWeightLayout {
    pub fn from_name(name: &str) -> Result<LstmWeightLayout> {
        match name {
            "iofg" => Ok(LstmWeightLayout::Iofg),
            "ifgo" => Ok(LstmWeightLayout::Ifgo),
            _ => Err(Error::Type(format!("'{name}' is not a valid MLLstmWeightLayout"))),
        }
    }
}

/// gru's `steps` and `hiddenSize` arguments and `MLGruOptions`; the optional operands present
/// follow `input`, `weight` and `recurrentWeight` in the order bias, recurrentBias,
/// initialHiddenState.
#[derive(Debug, Clone, PartialEq)]
pub struct GruOptions {
    pub steps: u32,
    pub hidden_size: u32,
    pub has_bias: bool,
    pub has_recurrent_bias: bool,
    pub has_initial_hidden_state: bool,
    pub reset_after: bool,
    pub return_sequence: bool,
    pub direction: RecurrentDirection,
    pub layout: GruWeightLayout,
    pub activations: Option<Vec<RecurrentActivation>>,
}

impl GruOptions {
    /// The spec's defaults for the given arguments.
    pub fn new(steps: u32, hidden_size: u32) -> GruOptions {
        GruOptions {
            steps,
            hidden_size,
            has_bias: false,
            has_recurrent_bias: false,
            has_initial_hidden_state: false,
            reset_after: true,
            return_sequence: false,
            direction: RecurrentDirection::Forward,
            layout: GruWeightLayout::Zrn,
            activations: None,
        }
    }
}

/// gruCell's `hiddenSize` argument and `MLGruCellOptions`; bias then recurrentBias follow
/// `input`, `weight`, `recurrentWeight` and `hiddenState` when present.
#[derive(Debug, Clone, PartialEq)]
pub struct GruCellOptions {
    pub hidden_size: u32,
    pub has_bias: bool,
    pub has_recurrent_bias: bool,
    pub reset_after: bool,
    pub layout: GruWeightLayout,
    pub activations: Option<Vec<RecurrentActivation>>,
}

impl GruCellOptions {
    pub fn new(hidden_size: u32) -> GruCellOptions {
        GruCellOptions {
            hidden_size,
            has_bias: false,
            has_recurrent_bias: false,
            reset_after: true,
            layout: GruWeightLayout::Zrn,
            activations: None,
        }
    }
}

/// lstm's `steps` and `hiddenSize` arguments and `MLLstmOptions`; the optional operands present
/// follow in the order bias, recurrentBias, peepholeWeight, initialHiddenState,
/// initialCellState.
#[derive(Debug, Clone, PartialEq)]
pub struct LstmOptions {
    pub steps: u32,
    pub hidden_size: u32,
    pub has_bias: bool,
    pub has_recurrent_bias: bool,
    pub has_peephole_weight: bool,
    pub has_initial_hidden_state: bool,
    pub has_initial_cell_state: bool,
    pub return_sequence: bool,
    pub direction: RecurrentDirection,
    pub layout: LstmWeightLayout,
    pub activations: Option<Vec<RecurrentActivation>>,
}

impl LstmOptions {
    pub fn new(steps: u32, hidden_size: u32) -> LstmOptions {
        LstmOptions {
            steps,
            hidden_size,
            has_bias: false,
            has_recurrent_bias: false,
            has_peephole_weight: false,
            has_initial_hidden_state: false,
            has_initial_cell_state: false,
            return_sequence: false,
            direction: RecurrentDirection::Forward,
            layout: LstmWeightLayout::Iofg,
            activations: None,
        }
    }
}

/// lstmCell's `hiddenSize` argument and `MLLstmCellOptions`; bias, recurrentBias and
/// peepholeWeight follow `input`, `weight`, `recurrentWeight`, `hiddenState` and `cellState`
/// when present.
#[derive(Debug, Clone, PartialEq)]
pub struct LstmCellOptions {
    pub hidden_size: u32,
    pub has_bias: bool,
    pub has_recurrent_bias: bool,
    pub has_peephole_weight: bool,
    pub layout: LstmWeightLayout,
    pub activations: Option<Vec<RecurrentActivation>>,
}

impl LstmCellOptions {
    pub fn new(hidden_size: u32) -> LstmCellOptions {
        LstmCellOptions {
            hidden_size,
            has_bias: false,
            has_recurrent_bias: false,
            has_peephole_weight: false,
            layout: LstmWeightLayout::Iofg,
            activations: None,
        }
    }
}

pub fn limits() -> Vec<OpLimits> {
    let t = |name, rank| limits::tensor(name, FLOATS, rank, rank);
    vec![
        OpLimits {
            name: "gru",
            operands: vec![
                t("input", 3),
                t("weight", 3),
                t("recurrentWeight", 3),
                t("bias", 2),
                t("recurrentBias", 2),
                t("initialHiddenState", 3),
                t("output0", 3),
                t("output1", 4),
            ],
        },
        OpLimits {
            name: "gruCell",
            operands: vec![
                t("input", 2),
                t("weight", 2),
                t("recurrentWeight", 2),
                t("hiddenState", 2),
                t("bias", 1),
                t("recurrentBias", 1),
                t("output", 2),
            ],
        },
        OpLimits {
            name: "lstm",
            operands: vec![
                t("input", 3),
                t("weight", 3),
                t("recurrentWeight", 3),
                t("bias", 2),
                t("recurrentBias", 2),
                t("peepholeWeight", 2),
                t("initialHiddenState", 3),
                t("initialCellState", 3),
                t("output0", 3),
                t("output1", 3),
                t("output2", 4),
            ],
        },
        OpLimits {
            name: "lstmCell",
            operands: vec![
                t("input", 2),
                t("weight", 2),
                t("recurrentWeight", 2),
                t("hiddenState", 2),
                t("cellState", 2),
                t("bias", 1),
                t("recurrentBias", 1),
                t("peepholeWeight", 1),
                t("output0", 2),
                t("output1", 2),
            ],
        },
    ]
}

/// The number of operand inputs an operator's options call for.
pub fn input_count(op: &Op) -> usize {
    let count = |flags: &[bool]| flags.iter().filter(|&&f| f).count();
    match op {
        Op::Gru(o) => 3 + count(&[o.has_bias, o.has_recurrent_bias, o.has_initial_hidden_state]),
        Op::GruCell(o) => 4 + count(&[o.has_bias, o.has_recurrent_bias]),
        Op::Lstm(o) => {
            3 + count(&[
                o.has_bias,
                o.has_recurrent_bias,
                o.has_peephole_weight,
                o.has_initial_hidden_state,
                o.has_initial_cell_state,
            ])
        }
        Op::LstmCell(o) => 5 + count(&[o.has_bias, o.has_recurrent_bias, o.has_peephole_weight]),
        _ => 0,
    }
}

/// The gate rows of the weights, in units of `hiddenSize`.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Cell {
    Gru { z: u32, r: u32, n: u32, reset_after: bool },
    /// `i, o, f, g`.
    Lstm { i: u32, o: u32, f: u32, g: u32 },
}

impl Cell {
    fn gates(self) -> u32 {
        match self {
            Cell::Gru { .. } => 3,
            Cell::Lstm { .. } => 4,
        }
    }
    fn is_lstm(self) -> bool {
        matches!(self, Cell::Lstm { .. })
    }
}

fn gru_cell(layout: GruWeightLayout, reset_after: bool) -> Cell {
    match layout {
        GruWeightLayout::Zrn => Cell::Gru { z: 0, r: 1, n: 2, reset_after },
        GruWeightLayout::Rzn => Cell::Gru { z: 1, r: 0, n: 2, reset_after },
    }
}

fn lstm_cell(layout: LstmWeightLayout) -> Cell {
    match layout {
        LstmWeightLayout::Iofg => Cell::Lstm { i: 0, o: 1, f: 2, g: 3 },
        LstmWeightLayout::Ifgo => Cell::Lstm { i: 0, f: 1, g: 2, o: 3 },
    }
}

/// Everything the lowering and the reference need, in the network's terms (a cell is a network
/// of one step and one direction).
#[derive(Debug, Clone)]
struct Plan {
    cell: Cell,
    steps: u32,
    directions: u32,
    /// Direction 0 runs backward ("backward"); with "both", direction 1 runs backward.
    first_backward: bool,
    batch: u32,
    input_size: u32,
    hidden: u32,
    /// Indices of the optional inputs, when present.
    bias: Option<usize>,
    recurrent_bias: Option<usize>,
    peephole: Option<usize>,
    initial_hidden: Option<usize>,
    initial_cell: Option<usize>,
    activations: Vec<RecurrentActivation>,
    /// The sequence output's index, when returned.
    sequence: Option<usize>,
}

impl Plan {
    fn backward(&self, direction: u32) -> bool {
        if direction == 0 { self.first_backward } else { true }
    }
    /// The time index direction `d` processes at step `s`.
    fn time(&self, d: u32, s: u32) -> u32 {
        if self.backward(d) { self.steps - 1 - s } else { s }
    }
    fn state_len(&self) -> u64 {
        self.directions as u64 * self.batch as u64 * self.hidden as u64
    }
}

/// Indices of optional operands present, assigned in order from `first`.
fn assign(first: usize, flags: &[bool]) -> Vec<Option<usize>> {
    let mut next = first;
    flags
        .iter()
        .map(|&present| {
            present.then(|| {
                next += 1;
                next - 1
            })
        })
        .collect()
}

fn activations(given: &Option<Vec<RecurrentActivation>>, default: &[RecurrentActivation]) -> Result<Vec<RecurrentActivation>> {
    match given {
        Some(list) if list.len() != default.len() => Err(Error::Type(format!(
            "activations has {} values but must have {}",
            list.len(),
            default.len()
        ))),
        Some(list) => Ok(list.clone()),
        None => Ok(default.to_vec()),
    }
}

const GRU_ACTIVATIONS: [RecurrentActivation; 2] = [RecurrentActivation::Sigmoid, RecurrentActivation::Tanh];
const LSTM_ACTIVATIONS: [RecurrentActivation; 3] =
    [RecurrentActivation::Sigmoid, RecurrentActivation::Tanh, RecurrentActivation::Tanh];

/// Checks an operand's type (allowed and the input's) and its exact shape.
fn check_operand(op: &str, limit: &TensorLimits, d: &OperandDescriptor, input: DataType, shape: &[u64]) -> Result<()> {
    limits::check(limit, d).map_err(|e| Error::Type(format!("{op}: {}", e.message())))?;
    if d.data_type != input {
        return Err(Error::Type(format!("{op}: {} is {} but input is {input}", limit.name, d.data_type)));
    }
    if d.shape.len() != shape.len() || d.shape.iter().zip(shape).any(|(&a, &b)| a as u64 != b) {
        return Err(Error::Type(format!("{op}: {} has shape {:?} but must have shape {shape:?}", limit.name, d.shape)));
    }
    Ok(())
}

/// Validates an operator, returning its plan and output descriptors.
fn plan(op: &Op, inputs: &[&OperandDescriptor]) -> Result<(Plan, Vec<OperandDescriptor>)> {
    let name = op.name();
    let l = limits::of(name)?;
    let operand = |n: &str| l.operands.iter().find(|t| t.name == n).ok_or_else(|| Error::Type(format!("{name} has no operand {n}")));
    let input = inputs[0];
    let is_cell = matches!(op, Op::GruCell(_) | Op::LstmCell(_));
    // Types and ranks of the required operands first, as the spec does.
    let required = if is_cell { if matches!(op, Op::LstmCell(_)) { 5 } else { 4 } } else { 3 };
    for (limit, d) in l.operands.iter().zip(&inputs[..required]) {
        limits::check(limit, d).map_err(|e| Error::Type(format!("{name}: {}", e.message())))?;
    }
    let (steps, hidden, direction, cell, gates) = match op {
        Op::Gru(o) => (o.steps, o.hidden_size, o.direction, gru_cell(o.layout, o.reset_after), 3u64),
        Op::GruCell(o) => (1, o.hidden_size, RecurrentDirection::Forward, gru_cell(o.layout, o.reset_after), 3),
        Op::Lstm(o) => (o.steps, o.hidden_size, o.direction, lstm_cell(o.layout), 4),
        Op::LstmCell(o) => (1, o.hidden_size, RecurrentDirection::Forward, lstm_cell(o.layout), 4),
        _ => return Err(Error::Type(format!("{name} is not a recurrent operator"))),
    };
    let dirs = direction.count() as u64;
    let h = hidden as u64;
    let (batch, input_size) = if is_cell {
        (input.shape[0], input.shape[1])
    } else {
        if steps == 0 {
            return Err(Error::Type(format!("{name}: steps must be greater than 0")));
        }
        if input.shape[0] != steps {
            return Err(Error::Type(format!("{name}: input's first dimension {} is not steps {steps}", input.shape[0])));
        }
        (input.shape[1], input.shape[2])
    };
    let (b, i) = (batch as u64, input_size as u64);
    let t = input.data_type;
    let lead = |shape: &[u64]| -> Vec<u64> { if is_cell { shape.to_vec() } else { [&[dirs], shape].concat() } };
    check_operand(name, operand("weight")?, inputs[1], t, &lead(&[gates * h, i]))?;
    check_operand(name, operand("recurrentWeight")?, inputs[2], t, &lead(&[gates * h, h]))?;
    if is_cell {
        check_operand(name, operand("hiddenState")?, inputs[3], t, &[b, h])?;
        if matches!(op, Op::LstmCell(_)) {
            check_operand(name, operand("cellState")?, inputs[4], t, &[b, h])?;
        }
    }
    valid_dimension(&format!("{name} hiddenSize * {}", 2 * gates), (2 * gates * h) as i128)?;
    let mut p = Plan {
        cell,
        steps,
        directions: dirs as u32,
        first_backward: direction == RecurrentDirection::Backward,
        batch,
        input_size,
        hidden,
        bias: None,
        recurrent_bias: None,
        peephole: None,
        initial_hidden: None,
        initial_cell: None,
        activations: Vec::new(),
        sequence: None,
    };
    let state = [dirs, b, h];
    let return_sequence = match op {
        Op::Gru(o) => {
            let ix = assign(3, &[o.has_bias, o.has_recurrent_bias, o.has_initial_hidden_state]);
            (p.bias, p.recurrent_bias, p.initial_hidden) = (ix[0], ix[1], ix[2]);
            p.activations = activations(&o.activations, &GRU_ACTIVATIONS)?;
            o.return_sequence
        }
        Op::GruCell(o) => {
            let ix = assign(4, &[o.has_bias, o.has_recurrent_bias]);
            (p.bias, p.recurrent_bias, p.initial_hidden) = (ix[0], ix[1], Some(3));
            p.activations = activations(&o.activations, &GRU_ACTIVATIONS)?;
            false
        }
        Op::Lstm(o) => {
            let ix = assign(
                3,
                &[
                    o.has_bias,
                    o.has_recurrent_bias,
                    o.has_peephole_weight,
                    o.has_initial_hidden_state,
                    o.has_initial_cell_state,
                ],
            );
            (p.bias, p.recurrent_bias, p.peephole, p.initial_hidden, p.initial_cell) = (ix[0], ix[1], ix[2], ix[3], ix[4]);
            p.activations = activations(&o.activations, &LSTM_ACTIVATIONS)?;
            o.return_sequence
        }
        Op::LstmCell(o) => {
            let ix = assign(5, &[o.has_bias, o.has_recurrent_bias, o.has_peephole_weight]);
            (p.bias, p.recurrent_bias, p.peephole) = (ix[0], ix[1], ix[2]);
            (p.initial_hidden, p.initial_cell) = (Some(3), Some(4));
            p.activations = activations(&o.activations, &LSTM_ACTIVATIONS)?;
            false
        }
        _ => false,
    };
    for (index, limit, shape) in [
        (p.bias, "bias", lead(&[gates * h])),
        (p.recurrent_bias, "recurrentBias", lead(&[gates * h])),
        (p.peephole, "peepholeWeight", lead(&[3 * h])),
    ] {
        if let Some(k) = index {
            check_operand(name, operand(limit)?, inputs[k], t, &shape)?;
        }
    }
    if !is_cell {
        for (index, limit) in [(p.initial_hidden, "initialHiddenState"), (p.initial_cell, "initialCellState")] {
            if let Some(k) = index {
                check_operand(name, operand(limit)?, inputs[k], t, &state)?;
            }
        }
    }
    let mut outputs = if is_cell {
        vec![OperandDescriptor::new(t, vec![batch, hidden])]
    } else {
        vec![OperandDescriptor::new(t, vec![dirs as u32, batch, hidden])]
    };
    if cell.is_lstm() {
        outputs.push(outputs[0].clone());
    }
    if return_sequence {
        p.sequence = Some(outputs.len());
        outputs.push(OperandDescriptor::new(t, vec![steps, dirs as u32, batch, hidden]));
    }
    for d in &outputs {
        d.check_dimensions()?;
    }
    Ok((p, outputs))
}

pub fn validate(op: &Op, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
    plan(op, inputs).map(|(_, outputs)| outputs)
}

const ACTIVATIONS_WGSL: &str = "
fn act_relu(v: f32) -> f32 { return max(v, 0.0); }
fn act_sigmoid(v: f32) -> f32 { return 1.0 / (1.0 + exp(-v)); }
fn act_tanh(v: f32) -> f32 { let e = exp(-2.0 * abs(v)); return sign(v) * (1.0 - e) / (1.0 + e); }
";

fn main_fn(invocations: u64, body: &str) -> String {
    format!(
        "@compute @workgroup_size({WORKGROUP_SIZE})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
    let id = gid.x + gid.y * nwg.x * {WORKGROUP_SIZE}u;
    if (id >= {invocations}u) {{ return; }}
{body}
}}
"
    )
}

/// A launch over `invocations` with operator inputs (name, index) read through `load_<name>`
/// and f32 scratch buffers (name, index, writable).
struct Kernel<'a> {
    inputs: Vec<(&'static str, usize)>,
    scratch: Vec<(&'static str, usize, bool)>,
    invocations: u64,
    body: String,
    cx: &'a LowerContext<'a>,
}

impl Kernel<'_> {
    fn build(self) -> Result<Launch> {
        let mut src = String::from(F16_HELPERS);
        src += ACTIVATIONS_WGSL;
        let mut reads = Vec::new();
        let mut writes = Vec::new();
        let mut index = 0;
        for &(name, k) in &self.inputs {
            let d = self.cx.inputs[k].data_type;
            src += &binding(index, name, d, false);
            src += &load_fn(name, d)?;
            reads.push(BufRef::Input(k));
            index += 1;
        }
        for &(name, k, writable) in self.scratch.iter().filter(|s| !s.2) {
            src += &binding(index, name, DataType::Float32, writable);
            reads.push(BufRef::Scratch(k));
            index += 1;
        }
        for &(name, k, writable) in self.scratch.iter().filter(|s| s.2) {
            src += &binding(index, name, DataType::Float32, writable);
            writes.push(BufRef::Scratch(k));
            index += 1;
        }
        src += &main_fn(self.invocations, &self.body);
        Ok(Launch { source: src, reads, writes, invocations: self.invocations.max(1), workgroup_size: WORKGROUP_SIZE })
    }
}

/// Scratch buffers: the hidden states, the cell states (lstm), and the gate sums followed by
/// the step counter.
const HIDDEN: usize = 0;
const CELLS: usize = 1;
const GATES: usize = 2;

pub fn lower(op: &Op, cx: &LowerContext) -> Result<Lowering> {
    let inputs: Vec<&OperandDescriptor> = cx.inputs.clone();
    let (p, _) = plan(op, &inputs)?;
    let (steps, batch, hidden, isz) = (p.steps as u64, p.batch as u64, p.hidden as u64, p.input_size as u64);
    let state = p.state_len();
    let gh = p.cell.gates() as u64 * hidden;
    let gate_words = p.directions as u64 * batch * gh * 2;
    let counter = gate_words;
    let states_bytes = 4 * (steps + 1) * state;
    let scratch = vec![states_bytes, if p.cell.is_lstm() { states_bytes } else { 4 }, 4 * (gate_words + 1)];
    let mut launches = Vec::new();

    // Initial states and the step counter.
    let mut init_inputs = Vec::new();
    let mut init_body = String::new();
    let mut init_scratch = vec![("hidden", HIDDEN, true), ("gates", GATES, true)];
    match p.initial_hidden {
        Some(k) => {
            init_inputs.push(("initial_hidden", k));
            init_body += "    hidden[id] = load_initial_hidden(id);\n";
        }
        None => init_body += "    hidden[id] = 0.0;\n",
    }
    if p.cell.is_lstm() {
        init_scratch.push(("cells", CELLS, true));
        match p.initial_cell {
            Some(k) => {
                init_inputs.push(("initial_cell", k));
                init_body += "    cells[id] = load_initial_cell(id);\n";
            }
            None => init_body += "    cells[id] = 0.0;\n",
        }
    }
    init_body += &format!("    if (id == 0u) {{ gates[{counter}u] = 0.0; }}\n");
    launches.push(Kernel { inputs: init_inputs, scratch: init_scratch, invocations: state, body: init_body, cx }.build()?);

    // The time index of direction `d` at step `s`.
    let time = |d: &str| {
        format!(
            "select(s, {last}u - s, {d} == 1u || {first})",
            last = steps - 1,
            first = if p.first_backward { "true" } else { "false" }
        )
    };
    // gates: one invocation per (direction, batch, gate row).
    let skip_recurrent = match p.cell {
        Cell::Gru { n, reset_after: false, .. } => format!("row / {hidden}u == {n}u"),
        _ => "false".into(),
    };
    let mut gate_inputs = vec![("input", 0), ("weight", 1), ("recurrent_weight", 2)];
    let bias = match p.bias {
        Some(k) => {
            gate_inputs.push(("bias", k));
            format!("load_bias(d * {gh}u + row)")
        }
        None => "0.0".into(),
    };
    let recurrent_bias = match p.recurrent_bias {
        Some(k) => {
            gate_inputs.push(("recurrent_bias", k));
            format!("load_recurrent_bias(d * {gh}u + row)")
        }
        None => "0.0".into(),
    };
    let gates_body = format!(
        "    let s = u32(gates[{counter}u]);
    let row = id % {gh}u;
    let db = id / {gh}u;
    let d = db / {batch}u;
    let b = db % {batch}u;
    let t = {time};
    var x = {bias};
    let xi = (t * {batch}u + b) * {isz}u;
    let wi = (d * {gh}u + row) * {isz}u;
    for (var k = 0u; k < {isz}u; k++) {{ x += load_input(xi + k) * load_weight(wi + k); }}
    var r = {recurrent_bias};
    if (!({skip_recurrent})) {{
        let hi = s * {state}u + db * {hidden}u;
        let ri = (d * {gh}u + row) * {hidden}u;
        for (var j = 0u; j < {hidden}u; j++) {{ r += hidden[hi + j] * load_recurrent_weight(ri + j); }}
    }}
    gates[2u * id] = x;
    gates[2u * id + 1u] = r;",
        time = time("d"),
    );
    let gates_launch = Kernel {
        inputs: gate_inputs,
        scratch: vec![("hidden", HIDDEN, false), ("gates", GATES, true)],
        invocations: p.directions as u64 * batch * gh,
        body: gates_body,
        cx,
    }
    .build()?;

    // update: one invocation per (direction, batch, hidden unit).
    let act = |k: usize| p.activations[k].wgsl();
    let head = format!(
        "    let s = u32(gates[{counter}u]);
    let u = id % {hidden}u;
    let db = id / {hidden}u;
    let d = db / {batch}u;
    let prev = s * {state}u + id;
    let next = prev + {state}u;
    let g0 = db * {gh}u;
"
    );
    let sum = |gate: u32| format!("(gates[2u * (g0 + {o}u + u)] + gates[2u * (g0 + {o}u + u) + 1u])", o = gate as u64 * hidden);
    let x_part = |gate: u32| format!("gates[2u * (g0 + {o}u + u)]", o = gate as u64 * hidden);
    let h_part = |gate: u32| format!("gates[2u * (g0 + {o}u + u) + 1u]", o = gate as u64 * hidden);
    let mut update_inputs = Vec::new();
    let mut update_scratch = vec![("gates", GATES, false), ("hidden", HIDDEN, true)];
    let body = match p.cell {
        Cell::Gru { z, r, n, reset_after } => {
            let new_gate = if reset_after {
                format!("{}({} + r * {})", act(1), x_part(n), h_part(n))
            } else {
                // `(r * h) recurrentWeight_n^T`: every unit's reset gate times its state.
                update_inputs.push(("recurrent_weight", 2));
                format!(
                    "{a1}({x} + {h} + reset_dot(s, db, d, u, g0))",
                    a1 = act(1),
                    x = x_part(n),
                    h = h_part(n)
                )
            };
            format!(
                "{head}    let z = {a0}({sz});
    let r = {a0}({sr});
    let n = {new_gate};
    hidden[next] = z * hidden[prev] + (1.0 - z) * n;",
                a0 = act(0),
                sz = sum(z),
                sr = sum(r),
            )
        }
        Cell::Lstm { i, o, f, g } => {
            update_scratch.push(("cells", CELLS, true));
            let peep = |k: u64| match p.peephole {
                Some(_) => format!(" + load_peephole(d * {}u + {}u + u) * c", 3 * hidden, k * hidden),
                None => String::new(),
            };
            if let Some(k) = p.peephole {
                update_inputs.push(("peephole", k));
            }
            format!(
                "{head}    let c = cells[prev];
    let ig = {a0}({si}{pi});
    let fg = {a0}({sf}{pf});
    let gg = {a1}({sg});
    let og = {a0}({so}{po});
    let cn = fg * c + ig * gg;
    cells[next] = cn;
    hidden[next] = og * {a2}(cn);",
                a0 = act(0),
                a1 = act(1),
                a2 = act(2),
                si = sum(i),
                sf = sum(f),
                sg = sum(g),
                so = sum(o),
                pi = peep(0),
                po = peep(1),
                pf = peep(2),
            )
        }
    };
    let mut update = Kernel { inputs: update_inputs, scratch: update_scratch, invocations: state, body, cx }.build()?;
    if let Cell::Gru { r, n, reset_after: false, .. } = p.cell {
        // Helper placed before `main`: the sum over units `j` of `r_j * h_j * R[d, n row u, j]`.
        let helper = format!(
            "fn reset_dot(s: u32, db: u32, d: u32, u: u32, g0: u32) -> f32 {{
    var acc = 0.0;
    let ri = (d * {gh}u + {n_row}u + u) * {hidden}u;
    for (var j = 0u; j < {hidden}u; j++) {{
        let rj = {a0}(gates[2u * (g0 + {r_row}u + j)] + gates[2u * (g0 + {r_row}u + j) + 1u]);
        acc += rj * hidden[s * {state}u + db * {hidden}u + j] * load_recurrent_weight(ri + j);
    }}
    return acc;
}}
",
            n_row = n as u64 * hidden,
            r_row = r as u64 * hidden,
            a0 = act(0),
        );
        update.source = update.source.replacen("@compute", &format!("{helper}@compute"), 1);
    }
    let advance = Kernel {
        inputs: Vec::new(),
        scratch: vec![("gates", GATES, true)],
        invocations: 1,
        body: format!("    gates[{counter}u] = gates[{counter}u] + 1.0;"),
        cx,
    }
    .build()?;
    for _ in 0..steps {
        launches.push(gates_launch.clone());
        launches.push(update.clone());
        launches.push(advance.clone());
    }

    // Outputs, converted from the f32 states.
    let states = OperandDescriptor::new(DataType::Float32, vec![((steps + 1) * state) as u32]);
    let copy = |output: usize, buffer: usize, body: String| -> Result<Launch> {
        let mut launch = ElementwiseKernel {
            inputs: vec![("states", &states)],
            output: cx.outputs[output],
            helpers: String::new(),
            body,
        }
        .build()?;
        launch.reads = vec![BufRef::Scratch(buffer)];
        launch.writes = vec![BufRef::Output(output)];
        Ok(launch)
    };
    let last = format!("    return load_states({}u + i);", steps * state);
    launches.push(copy(0, HIDDEN, last.clone())?);
    if p.cell.is_lstm() {
        launches.push(copy(1, CELLS, last)?);
    }
    if let Some(k) = p.sequence {
        // Output [t, d, b, u] is the state after the step that processed time t in direction d.
        let body = format!(
            "    let t = i / {state}u;
    let rest = i % {state}u;
    let d = rest / {bh}u;
    let slot = select(t + 1u, {steps}u - t, d == 1u || {first});
    return load_states(slot * {state}u + rest);",
            bh = batch * hidden,
            first = if p.first_backward { "true" } else { "false" },
        );
        launches.push(copy(k, HIDDEN, body)?);
    }
    Ok(Lowering::Kernels { scratch, launches })
}

pub fn reference(op: &Op, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
    let descriptors: Vec<&OperandDescriptor> = inputs.iter().map(|t| &t.descriptor).collect();
    let (p, _) = plan(op, &descriptors)?;
    let (steps, dirs, batch, hidden, isz) =
        (p.steps as usize, p.directions as usize, p.batch as usize, p.hidden as usize, p.input_size as usize);
    let gh = p.cell.gates() as usize * hidden;
    let x = &inputs[0].data;
    let w = &inputs[1].data;
    let rw = &inputs[2].data;
    let opt = |k: Option<usize>| k.map(|k| inputs[k].data.as_slice());
    let (bias, rbias, peephole) = (opt(p.bias), opt(p.recurrent_bias), opt(p.peephole));
    let state = dirs * batch * hidden;
    let mut final_hidden = vec![0.0; state];
    let mut final_cell = vec![0.0; state];
    let mut sequence = vec![0.0; steps * state];
    for d in 0..dirs {
        let base = d * batch * hidden;
        let mut h: Vec<f64> = opt(p.initial_hidden).map_or(vec![0.0; batch * hidden], |v| v[base..base + batch * hidden].to_vec());
        let mut c: Vec<f64> = opt(p.initial_cell).map_or(vec![0.0; batch * hidden], |v| v[base..base + batch * hidden].to_vec());
        for s in 0..steps {
            let t = p.time(d as u32, s as u32) as usize;
            let mut next_h = vec![0.0; batch * hidden];
            let mut next_c = vec![0.0; batch * hidden];
            for b in 0..batch {
                let hb = &h[b * hidden..(b + 1) * hidden];
                // Input and recurrent products of every gate row, with their biases.
                let xg: Vec<f64> = (0..gh)
                    .map(|row| {
                        let wr = &w[(d * gh + row) * isz..(d * gh + row + 1) * isz];
                        let xr = &x[(t * batch + b) * isz..(t * batch + b + 1) * isz];
                        xr.iter().zip(wr).map(|(a, b)| a * b).sum::<f64>() + bias.map_or(0.0, |v| v[d * gh + row])
                    })
                    .collect();
                let hg: Vec<f64> = (0..gh)
                    .map(|row| {
                        let r = &rw[(d * gh + row) * hidden..(d * gh + row + 1) * hidden];
                        hb.iter().zip(r).map(|(a, b)| a * b).sum::<f64>() + rbias.map_or(0.0, |v| v[d * gh + row])
                    })
                    .collect();
                let gate = |g: u32, u: usize| g as usize * hidden + u;
                let [a0, a1] = [p.activations[0], p.activations[1]];
                match p.cell {
                    Cell::Gru { z, r, n, reset_after } => {
                        let rs: Vec<f64> = (0..hidden).map(|u| a0.apply(xg[gate(r, u)] + hg[gate(r, u)])).collect();
                        for u in 0..hidden {
                            let zv = a0.apply(xg[gate(z, u)] + hg[gate(z, u)]);
                            let nv = if reset_after {
                                a1.apply(xg[gate(n, u)] + rs[u] * hg[gate(n, u)])
                            } else {
                                let row = d * gh + gate(n, u);
                                let dot: f64 = (0..hidden).map(|j| rs[j] * hb[j] * rw[row * hidden + j]).sum();
                                a1.apply(xg[gate(n, u)] + rbias.map_or(0.0, |v| v[row]) + dot)
                            };
                            next_h[b * hidden + u] = zv * hb[u] + (1.0 - zv) * nv;
                        }
                    }
                    Cell::Lstm { i, o, f, g } => {
                        let a2 = p.activations[2];
                        for u in 0..hidden {
                            let cv = c[b * hidden + u];
                            let peep = |k: usize| peephole.map_or(0.0, |v| v[d * 3 * hidden + k * hidden + u]) * cv;
                            let iv = a0.apply(xg[gate(i, u)] + hg[gate(i, u)] + peep(0));
                            let fv = a0.apply(xg[gate(f, u)] + hg[gate(f, u)] + peep(2));
                            let gv = a1.apply(xg[gate(g, u)] + hg[gate(g, u)]);
                            let ov = a0.apply(xg[gate(o, u)] + hg[gate(o, u)] + peep(1));
                            let cn = fv * cv + iv * gv;
                            next_c[b * hidden + u] = cn;
                            next_h[b * hidden + u] = ov * a2.apply(cn);
                        }
                    }
                }
            }
            h = next_h;
            c = next_c;
            sequence[t * state + base..t * state + base + batch * hidden].copy_from_slice(&h);
        }
        final_hidden[base..base + batch * hidden].copy_from_slice(&h);
        final_cell[base..base + batch * hidden].copy_from_slice(&c);
    }
    let tensor = |k: usize, data: Vec<f64>| {
        let data = data.into_iter().map(|v| round_to(v, outputs[k].data_type)).collect();
        HostTensor::new(outputs[k].clone(), data)
    };
    let mut result = vec![tensor(0, final_hidden)?];
    if p.cell.is_lstm() {
        result.push(tensor(1, final_cell)?);
    }
    if let Some(k) = p.sequence {
        result.push(tensor(k, sequence)?);
    }
    Ok(result)
}
