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
use crate::operand::{DataType, OperandDescriptor};
use crate::ops::conv2d::valid_dimension;
use crate::ops::limits::{self, OpLimits, TensorLimits, FLOATS};
use crate::ops::reference::{round_to, HostTensor};
use crate::ops::wgsl::{
    binding, load_fn, BufRef, ElementwiseKernel, Launch, LowerRequest, Lowering, F16_HELPERS, WORKGROUP_SIZE,
};
use crate::ops::{not_this_family, MethodOptions, Op, OpFamily};
use std::ops::RangeInclusive;

/// `MLRecurrentNetworkActivation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
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
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
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
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
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
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
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
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
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

/// The activations in forms that keep their relative error to a few ULP over the whole range:
/// `exp` only of non-positive arguments (its own range reduction, as WGSL's `exp` may be a coarse
/// approximation), sigmoid and tanh as 1 minus a small term where they approach 1, and tanh near
/// 0 as a polynomial (Cephes' tanhf), where `(1 - e) / (1 + e)` would cancel.
const ACTIVATIONS_WGSL: &str = "
fn exp_nonpositive(x: f32) -> f32 {
    if (x < -87.0) { return 0.0; }
    let k = round(x * 1.442695041);
    let r = (x - k * 0.693145752) - k * 1.42860677e-6;
    let p = 1.0 + r * (1.0 + r * (0.5 + r * (0.166666667 + r * (0.0416666667 + r * (0.00833333333 + r * (0.00138888889 + r * 0.000198412698))))));
    return ldexp(p, i32(k));
}
fn act_relu(v: f32) -> f32 { return max(v, 0.0); }
fn act_sigmoid(v: f32) -> f32 {
    let e = exp_nonpositive(-abs(v));
    let q = e / (1.0 + e);
    return select(q, 1.0 - q, v >= 0.0);
}
fn act_tanh(v: f32) -> f32 {
    let a = abs(v);
    if (a < 0.625) {
        let z = v * v;
        return ((((-5.70498872745e-3 * z + 2.06390887954e-2) * z - 5.37397155531e-2) * z + 1.33314422036e-1) * z - 3.33332819422e-1) * z * v + v;
    }
    let e = exp_nonpositive(-2.0 * a);
    return sign(v) * (1.0 - 2.0 * (e / (1.0 + e)));
}
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
    request: &'a LowerRequest<'a>,
}

impl Kernel<'_> {
    fn build(self) -> Result<Launch> {
        let mut src = String::from(F16_HELPERS);
        src += ACTIVATIONS_WGSL;
        let mut reads = Vec::new();
        let mut writes = Vec::new();
        let mut index = 0;
        for &(name, k) in &self.inputs {
            let d = self.request.inputs[k].data_type;
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

pub fn lower(op: &Op, request: &LowerRequest) -> Result<Lowering> {
    let inputs: Vec<&OperandDescriptor> = request.inputs.clone();
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
    launches.push(Kernel { inputs: init_inputs, scratch: init_scratch, invocations: state, body: init_body, request }.build()?);

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
    // The two products of every gate row, without biases: the update adds those in the spec's
    // order, `(bias + recurrentBias) + (x W^T + h R^T)`.
    let gate_inputs = vec![("input", 0), ("weight", 1), ("recurrent_weight", 2)];
    let gates_body = format!(
        "    let s = u32(gates[{counter}u]);
    let row = id % {gh}u;
    let db = id / {gh}u;
    let d = db / {batch}u;
    let b = db % {batch}u;
    let t = {time};
    var x = 0.0;
    let xi = (t * {batch}u + b) * {isz}u;
    let wi = (d * {gh}u + row) * {isz}u;
    for (var k = 0u; k < {isz}u; k++) {{ x += load_input(xi + k) * load_weight(wi + k); }}
    var r = 0.0;
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
        request,
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
    let mut update_inputs = Vec::new();
    if let Some(k) = p.bias {
        update_inputs.push(("bias", k));
    }
    if let Some(k) = p.recurrent_bias {
        update_inputs.push(("recurrent_bias", k));
    }
    // The products of gate row `gate` for unit `unit` (an expression) and its biases.
    let row = |gate: u32, unit: &str| format!("g0 + {}u + {unit}", gate as u64 * hidden);
    let x_part = |gate: u32, unit: &str| format!("gates[2u * ({})]", row(gate, unit));
    let h_part = |gate: u32, unit: &str| format!("gates[2u * ({}) + 1u]", row(gate, unit));
    let bias = |gate: u32, unit: &str| {
        p.bias.map(|_| format!("load_bias(d * {gh}u + {}u + {unit})", gate as u64 * hidden))
    };
    let recurrent_bias = |gate: u32, unit: &str| {
        p.recurrent_bias.map(|_| format!("load_recurrent_bias(d * {gh}u + {}u + {unit})", gate as u64 * hidden))
    };
    // `a + b` where an absent term is the spec's zero constant.
    let add = |a: Option<String>, b: String| match a {
        Some(a) => format!("({a} + {b})"),
        None => b,
    };
    let biases = |gate: u32, unit: &str| match (bias(gate, unit), recurrent_bias(gate, unit)) {
        (Some(b), Some(r)) => Some(format!("({b} + {r})")),
        (b, r) => b.or(r),
    };
    // The spec's `(bias + recurrentBias) + (x W^T + h R^T)` of a gate.
    let sum = |gate: u32, unit: &str| add(biases(gate, unit), format!("({} + {})", x_part(gate, unit), h_part(gate, unit)));
    let mut update_scratch = vec![("gates", GATES, false), ("hidden", HIDDEN, true)];
    let body = match p.cell {
        Cell::Gru { z, r, n, reset_after } => {
            let new_gate = if reset_after {
                // bias + (x W^T + r * (recurrentBias + h R^T)).
                let recurrent = add(recurrent_bias(n, "u"), h_part(n, "u"));
                format!("{}({})", act(1), add(bias(n, "u"), format!("({} + r * {recurrent})", x_part(n, "u"))))
            } else {
                // (bias + recurrentBias) + (x W^T + (r * h) R^T).
                update_inputs.push(("recurrent_weight", 2));
                let products = format!("({} + reset_dot(s, db, d, u, g0))", x_part(n, "u"));
                format!("{}({})", act(1), add(biases(n, "u"), products))
            };
            // 1 - sigmoid(v) is sigmoid(-v), without the cancellation of the subtraction.
            let one_minus_z = match p.activations[0] {
                RecurrentActivation::Sigmoid => "act_sigmoid(-zs)",
                _ => "1.0 - z",
            };
            format!(
                "{head}    let zs = {sz};
    let z = {a0}(zs);
    let r = {a0}({sr});
    let n = {new_gate};
    hidden[next] = z * hidden[prev] + n * ({one_minus_z});",
                a0 = act(0),
                sz = sum(z, "u"),
                sr = sum(r, "u"),
            )
        }
        Cell::Lstm { i, o, f, g } => {
            update_scratch.push(("cells", CELLS, true));
            // cellState * peepholeWeight + the gate's sum.
            let peep = |k: u64, gate: u32| match p.peephole {
                Some(_) => format!("c * load_peephole(d * {}u + {}u + u) + {}", 3 * hidden, k * hidden, sum(gate, "u")),
                None => sum(gate, "u"),
            };
            if let Some(k) = p.peephole {
                update_inputs.push(("peephole", k));
            }
            format!(
                "{head}    let c = cells[prev];
    let ig = {a0}({si});
    let fg = {a0}({sf});
    let gg = {a1}({sg});
    let og = {a0}({so});
    let cn = fg * c + ig * gg;
    cells[next] = cn;
    hidden[next] = og * {a2}(cn);",
                a0 = act(0),
                a1 = act(1),
                a2 = act(2),
                si = peep(0, i),
                sf = peep(2, f),
                sg = sum(g, "u"),
                so = peep(1, o),
            )
        }
    };
    let mut update = Kernel { inputs: update_inputs, scratch: update_scratch, invocations: state, body, request }.build()?;
    if let Cell::Gru { r, n, reset_after: false, .. } = p.cell {
        // Helper placed before `main`: the sum over units `j` of `(r_j * h_j) * R[d, n row u, j]`.
        let helper = format!(
            "fn reset_dot(s: u32, db: u32, d: u32, u: u32, g0: u32) -> f32 {{
    var acc = 0.0;
    let ri = (d * {gh}u + {n_row}u + u) * {hidden}u;
    for (var j = 0u; j < {hidden}u; j++) {{
        let rj = {a0}({sr});
        acc += (rj * hidden[s * {state}u + db * {hidden}u + j]) * load_recurrent_weight(ri + j);
    }}
    return acc;
}}
",
            n_row = n as u64 * hidden,
            a0 = act(0),
            sr = sum(r, "j"),
        );
        update.source = update.source.replacen("@compute", &format!("{helper}@compute"), 1);
    }
    let advance = Kernel {
        inputs: Vec::new(),
        scratch: vec![("gates", GATES, true)],
        invocations: 1,
        body: format!("    gates[{counter}u] = gates[{counter}u] + 1.0;"),
        request,
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
            output: request.outputs[output],
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

/// The operand index of each optional operand of a recurrent operator (`None` where absent):
/// those present follow each other from index `first`, in the order of the method's options.
pub fn optional_operands(first: usize, present: &[bool]) -> Vec<Option<usize>> {
    let mut next = first;
    present
        .iter()
        .map(|&p| {
            p.then(|| {
                next += 1;
                next - 1
            })
        })
        .collect()
}

/// The float64 reference: the spec's cell formulas step by step, with its own reading of the
/// arguments (operand order, gate rows of each layout, directions, shapes) instead of the
/// lowering's plan, so that a mistake there shows as a difference.
pub fn reference(op: &Op, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
    let operand = |k: usize| -> Result<&HostTensor> {
        inputs.get(k).ok_or_else(|| Error::Type(format!("{}: no operand {k}", op.name())))
    };
    // The optional operands present, in the order of the method's options, from index `first`.
    let optional = |first: usize, present: &[bool]| -> Result<Vec<Option<&[f64]>>> {
        optional_operands(first, present).into_iter().map(|k| k.map(|k| operand(k).map(|t| t.data.as_slice())).transpose()).collect()
    };
    let (x, w, rw) = (operand(0)?, &operand(1)?.data, &operand(2)?.data);
    let is_cell = matches!(op, Op::GruCell(_) | Op::LstmCell(_));
    let rank = x.shape().len();
    if rank != if is_cell { 2 } else { 3 } {
        return Err(Error::Type(format!("{}: input of rank {rank}", op.name())));
    }
    let (steps, batch, input_size) = if is_cell {
        (1, x.shape()[0] as usize, x.shape()[1] as usize)
    } else {
        (x.shape()[0] as usize, x.shape()[1] as usize, x.shape()[2] as usize)
    };
    let (hidden, direction, return_sequence) = match op {
        Op::Gru(o) => (o.hidden_size, o.direction, o.return_sequence),
        Op::Lstm(o) => (o.hidden_size, o.direction, o.return_sequence),
        Op::GruCell(o) => (o.hidden_size, RecurrentDirection::Forward, false),
        Op::LstmCell(o) => (o.hidden_size, RecurrentDirection::Forward, false),
        _ => return Err(Error::Type(format!("{} is not a recurrent operator", op.name()))),
    };
    let hidden = hidden as usize;
    let dirs = if direction == RecurrentDirection::Both { 2 } else { 1 };
    // Gate rows in units of hiddenSize, per the layout enums' definitions.
    enum Gates {
        Gru { z: usize, r: usize, n: usize, reset_after: bool },
        Lstm { i: usize, o: usize, f: usize, g: usize },
    }
    let (gates, bias, rbias, peephole, h0, c0, acts) = match op {
        Op::Gru(o) => {
            let v = optional(3, &[o.has_bias, o.has_recurrent_bias, o.has_initial_hidden_state])?;
            (gru_rows(o.layout, o.reset_after), v[0], v[1], None, v[2], None, (&o.activations, 2))
        }
        Op::GruCell(o) => {
            let v = optional(4, &[o.has_bias, o.has_recurrent_bias])?;
            let h = Some(operand(3)?.data.as_slice());
            (gru_rows(o.layout, o.reset_after), v[0], v[1], None, h, None, (&o.activations, 2))
        }
        Op::Lstm(o) => {
            let present = [
                o.has_bias,
                o.has_recurrent_bias,
                o.has_peephole_weight,
                o.has_initial_hidden_state,
                o.has_initial_cell_state,
            ];
            let v = optional(3, &present)?;
            (lstm_rows(o.layout), v[0], v[1], v[2], v[3], v[4], (&o.activations, 3))
        }
        Op::LstmCell(o) => {
            let v = optional(5, &[o.has_bias, o.has_recurrent_bias, o.has_peephole_weight])?;
            let (h, c) = (Some(operand(3)?.data.as_slice()), Some(operand(4)?.data.as_slice()));
            (lstm_rows(o.layout), v[0], v[1], v[2], h, c, (&o.activations, 3))
        }
        _ => unreachable!("matched above"),
    };
    fn gru_rows(layout: GruWeightLayout, reset_after: bool) -> Gates {
        match layout {
            GruWeightLayout::Zrn => Gates::Gru { z: 0, r: 1, n: 2, reset_after },
            GruWeightLayout::Rzn => Gates::Gru { r: 0, z: 1, n: 2, reset_after },
        }
    }
    fn lstm_rows(layout: LstmWeightLayout) -> Gates {
        match layout {
            LstmWeightLayout::Iofg => Gates::Lstm { i: 0, o: 1, f: 2, g: 3 },
            LstmWeightLayout::Ifgo => Gates::Lstm { i: 0, f: 1, g: 2, o: 3 },
        }
    }
    let act = |k: usize| -> RecurrentActivation {
        match acts.0 {
            Some(list) => list[k],
            None if k == 0 => RecurrentActivation::Sigmoid,
            None => RecurrentActivation::Tanh,
        }
    };
    if acts.0.as_ref().is_some_and(|l| l.len() != acts.1) {
        return Err(Error::Type(format!("{}: activations of the wrong length", op.name())));
    }
    let rows = match gates {
        Gates::Gru { .. } => 3 * hidden,
        Gates::Lstm { .. } => 4 * hidden,
    };
    let per_direction = |len: usize| dirs * len;
    for (what, data, len) in [
        ("weight", Some(w.as_slice()), rows * input_size),
        ("recurrentWeight", Some(rw.as_slice()), rows * hidden),
        ("bias", bias, rows),
        ("recurrentBias", rbias, rows),
        ("peepholeWeight", peephole, 3 * hidden),
        ("hidden state", h0, batch * hidden),
        ("cell state", c0, batch * hidden),
    ] {
        if data.is_some_and(|d| d.len() != per_direction(len)) {
            return Err(Error::Type(format!("{}: {what} has the wrong size", op.name())));
        }
    }
    let mut final_hidden = vec![0.0; dirs * batch * hidden];
    let mut final_cell = vec![0.0; dirs * batch * hidden];
    let mut sequence = vec![0.0; steps * dirs * batch * hidden];
    for d in 0..dirs {
        let backward = d == 1 || direction == RecurrentDirection::Backward;
        // Row `row` of direction d's weights, and element `k` of its biases.
        let w_row = |row: usize| &w[(d * rows + row) * input_size..(d * rows + row + 1) * input_size];
        let r_row = |row: usize| &rw[(d * rows + row) * hidden..(d * rows + row + 1) * hidden];
        let opt = |v: Option<&[f64]>, k: usize| v.map_or(0.0, |v| v[k]);
        let state = |v: Option<&[f64]>| v.map_or(vec![0.0; batch * hidden], |v| v[d * batch * hidden..(d + 1) * batch * hidden].to_vec());
        let (mut h, mut c) = (state(h0), state(c0));
        let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(a, b)| a * b).sum::<f64>();
        for step in 0..steps {
            let t = if backward { steps - 1 - step } else { step };
            let (mut next_h, mut next_c) = (h.clone(), c.clone());
            for b in 0..batch {
                let xt = &x.data[(t * batch + b) * input_size..(t * batch + b + 1) * input_size];
                let hb = &h[b * hidden..(b + 1) * hidden];
                // (bias + recurrentBias) + (x W^T + h R^T) of gate row `row`.
                let gate = |row: usize| {
                    opt(bias, d * rows + row) + opt(rbias, d * rows + row) + dot(xt, w_row(row)) + dot(hb, r_row(row))
                };
                for u in 0..hidden {
                    match gates {
                        Gates::Gru { z, r, n, reset_after } => {
                            let zu = act(0).apply(gate(z * hidden + u));
                            let nr = n * hidden + u;
                            let nu = if reset_after {
                                let ru = act(0).apply(gate(r * hidden + u));
                                opt(bias, d * rows + nr)
                                    + dot(xt, w_row(nr))
                                    + ru * (opt(rbias, d * rows + nr) + dot(hb, r_row(nr)))
                            } else {
                                let rh: Vec<f64> =
                                    (0..hidden).map(|j| act(0).apply(gate(r * hidden + j)) * hb[j]).collect();
                                opt(bias, d * rows + nr) + opt(rbias, d * rows + nr) + dot(xt, w_row(nr)) + dot(&rh, r_row(nr))
                            };
                            let nu = act(1).apply(nu);
                            next_h[b * hidden + u] = zu * hb[u] + nu * (1.0 - zu);
                        }
                        Gates::Lstm { i, o, f, g } => {
                            let cu = c[b * hidden + u];
                            // Peephole weights are ordered input, output, forget.
                            let peep = |k: usize| opt(peephole, d * 3 * hidden + k * hidden + u) * cu;
                            let iu = act(0).apply(gate(i * hidden + u) + peep(0));
                            let fu = act(0).apply(gate(f * hidden + u) + peep(2));
                            let gu = act(1).apply(gate(g * hidden + u));
                            let ou = act(0).apply(gate(o * hidden + u) + peep(1));
                            let cn = fu * cu + iu * gu;
                            next_c[b * hidden + u] = cn;
                            next_h[b * hidden + u] = ou * act(2).apply(cn);
                        }
                    }
                }
            }
            (h, c) = (next_h, next_c);
            // Output sequence [steps, directions, batch, hidden], in time order for both directions.
            let at = (t * dirs + d) * batch * hidden;
            sequence[at..at + batch * hidden].copy_from_slice(&h);
        }
        final_hidden[d * batch * hidden..(d + 1) * batch * hidden].copy_from_slice(&h);
        final_cell[d * batch * hidden..(d + 1) * batch * hidden].copy_from_slice(&c);
    }
    let state_shape = if is_cell { vec![batch, hidden] } else { vec![dirs, batch, hidden] };
    let mut results = vec![(state_shape.clone(), final_hidden)];
    if matches!(gates, Gates::Lstm { .. }) {
        results.push((state_shape, final_cell));
    }
    if return_sequence {
        results.push((vec![steps, dirs, batch, hidden], sequence));
    }
    if results.len() != outputs.len() {
        return Err(Error::Type(format!("{}: {} outputs, the reference has {}", op.name(), outputs.len(), results.len())));
    }
    results
        .into_iter()
        .zip(outputs)
        .map(|((shape, data), out)| {
            if out.shape.iter().map(|&d| d as usize).ne(shape.iter().copied()) {
                return Err(Error::Type(format!("{}: output shape {:?}, the reference's is {shape:?}", op.name(), out.shape)));
            }
            HostTensor::new(out.clone(), data.into_iter().map(|v| round_to(v, out.data_type)).collect())
        })
        .collect()
}

/// The registry's entry for this file's operators (see [`OpFamily`]).
pub struct Family;

impl OpFamily for Family {
    fn limits(&self) -> Vec<OpLimits> {
        limits()
    }

    fn from_options(&self, name: &str, p: &dyn MethodOptions) -> Result<Op> {
        Ok(match name {
            "gru" => Op::Gru(GruOptions {
                steps: p.u32("steps")?,
                hidden_size: p.u32("hiddenSize")?,
                has_bias: p.bool("bias")?,
                has_recurrent_bias: p.bool("recurrentBias")?,
                has_initial_hidden_state: p.bool("initialHiddenState")?,
                reset_after: p.bool("resetAfter")?,
                return_sequence: p.bool("returnSequence")?,
                direction: RecurrentDirection::from_name(&p.string("direction")?)?,
                layout: GruWeightLayout::from_name(&p.string("layout")?)?,
                activations: read_activations(p)?,
            }),
            "gruCell" => Op::GruCell(GruCellOptions {
                hidden_size: p.u32("hiddenSize")?,
                has_bias: p.bool("bias")?,
                has_recurrent_bias: p.bool("recurrentBias")?,
                reset_after: p.bool("resetAfter")?,
                layout: GruWeightLayout::from_name(&p.string("layout")?)?,
                activations: read_activations(p)?,
            }),
            "lstm" => Op::Lstm(LstmOptions {
                steps: p.u32("steps")?,
                hidden_size: p.u32("hiddenSize")?,
                has_bias: p.bool("bias")?,
                has_recurrent_bias: p.bool("recurrentBias")?,
                has_peephole_weight: p.bool("peepholeWeight")?,
                has_initial_hidden_state: p.bool("initialHiddenState")?,
                has_initial_cell_state: p.bool("initialCellState")?,
                return_sequence: p.bool("returnSequence")?,
                direction: RecurrentDirection::from_name(&p.string("direction")?)?,
                layout: LstmWeightLayout::from_name(&p.string("layout")?)?,
                activations: read_activations(p)?,
            }),
            "lstmCell" => Op::LstmCell(LstmCellOptions {
                hidden_size: p.u32("hiddenSize")?,
                has_bias: p.bool("bias")?,
                has_recurrent_bias: p.bool("recurrentBias")?,
                has_peephole_weight: p.bool("peepholeWeight")?,
                layout: LstmWeightLayout::from_name(&p.string("layout")?)?,
                activations: read_activations(p)?,
            }),
            other => return Err(crate::ops::unknown_method(other)),
        })
    }

    fn name(&self, op: &Op) -> &'static str {
        match op {
            Op::Gru(_) => "gru",
            Op::GruCell(_) => "gruCell",
            Op::Lstm(_) => "lstm",
            Op::LstmCell(_) => "lstmCell",
            _ => "",
        }
    }

    fn input_count(&self, op: &Op) -> RangeInclusive<usize> {
        match op {
            Op::Gru(_) | Op::GruCell(_) | Op::Lstm(_) | Op::LstmCell(_) => {
                let n = crate::ops::recurrent::input_count(op);
                n..=n
            }
            _ => 1..=1,
        }
    }

    fn validate(&self, op: &Op, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
        match op {
            Op::Gru(_) | Op::GruCell(_) | Op::Lstm(_) | Op::LstmCell(_) => validate(op, inputs),
            _ => Err(not_this_family(op)),
        }
    }

    fn lower(&self, op: &Op, request: &LowerRequest) -> Result<Lowering> {
        match op {
            Op::Gru(_) | Op::GruCell(_) | Op::Lstm(_) | Op::LstmCell(_) => lower(op, request),
            _ => Err(not_this_family(op)),
        }
    }

    fn reference(&self, op: &Op, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
        match op {
            Op::Gru(_) | Op::GruCell(_) | Op::Lstm(_) | Op::LstmCell(_) => reference(op, inputs, outputs),
            _ => Err(not_this_family(op)),
        }
    }
}

/// `activations`: an optional sequence of `MLRecurrentNetworkActivation`.
fn read_activations(p: &dyn MethodOptions) -> Result<Option<Vec<RecurrentActivation>>> {
    p.opt_strings("activations")?.map(|names| names.iter().map(|n| RecurrentActivation::from_name(n)).collect()).transpose()
}
