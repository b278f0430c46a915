//! Operator fusion at `build()`: chains of element-wise operators (unary, activations, binary with
//! broadcasting, cast) become one kernel computing the whole expression per element, and such a
//! chain after a matmul, gemm, conv2d or convTranspose2d is applied in that kernel's store (its
//! epilogue) instead of writing the intermediate. A reduction read only by a chain of its input's
//! shape (RMSNorm: `x / sqrt(reduceSumSquare(x) / n + eps) * w`) becomes one kernel too: each
//! row is reduced, then the chain is written for every element of the row, the row's value as
//! the reduction's output.
//!
//! An operator joins its consumer's group when its single output is read by that one operator only
//! and is not a graph output. Each fused operator contributes the WGSL expression of its own
//! lowering (`expression()` of its family) as a function; the kernel calls them in order on values
//! loaded once per element. Intermediates are rounded to their type's storage (float16, int8, uint8
//! wrap) exactly as a store and load would, so results keep their unfused rounding. int64/uint64
//! operands are not fused. `WEBNN_WGPU_FUSION=0` (native) turns fusion off, for measurements.

use std::collections::BTreeSet;

use crate::error::{Error, Result};
use crate::graph::builder::{GraphDescription, Operator};
use crate::graph::{DataType, OperandDescriptor};
use crate::ops::wgsl::{broadcast_offset_fn, coords_fn, value_type, ElementwiseKernel, LowerRequest, Lowering};
use crate::ops::{activation, cast, conv2d, elementwise_binary, elementwise_unary, matmul, reduce, Op};

/// Binding names of the chain's own inputs (after the producer's, in an epilogue).
const NAMES: [&str; 8] = ["e0", "e1", "e2", "e3", "e4", "e5", "e6", "e7"];

/// One kernel of the plan `build()` lowers: an operator of the graph, or several fused into one.
pub struct OpGroup<'a> {
    /// Operand indices read and written, in the order the lowering binds them.
    pub inputs: Vec<usize>,
    pub outputs: Vec<usize>,
    pub label: String,
    pub kind: OpGroupKind<'a>,
}

/// A group's operators: one, lowered by its family, or a fused chain lowered as one kernel.
pub enum OpGroupKind<'a> {
    Op(&'a Op),
    Fused(Fused<'a>),
}

/// A fused group: an optional producer (matmul, gemm, conv2d, convTranspose2d, a reduction) whose
/// inputs are the group's first inputs, then element-wise nodes in execution order, the last one
/// the output.
pub struct Fused<'a> {
    producer: Option<(&'a Op, OperandDescriptor)>,
    /// The group's inputs read by the chain: after the producer's.
    chain_inputs: Vec<OperandDescriptor>,
    nodes: Vec<Node<'a>>,
}

struct Node<'a> {
    op: &'a Op,
    args: Vec<Arg>,
    input_type: DataType,
    output: OperandDescriptor,
}

#[derive(Clone, Copy, PartialEq)]
enum Arg {
    /// The chain's input k (binding `e<k>`).
    Input(usize),
    Node(usize),
    Producer,
    /// A reduction's input, read by the chain too: of the output's shape, loaded at its index.
    ProducerInput,
}

/// The epilogue a producer's kernel applies at its store: bindings `e0..` after its own, and
/// WGSL defining `fn epilogue_at(v: f32, i: u32) -> T` applying the chain to value `v` of output
/// element `i` (`T` the output's value type), and for a matmul or gemm
/// `fn epilogue_mn(v: f32, m: u32, n: u32) -> f32` at row `m`, column `n`. A reduction's `v` is
/// of its value type.
pub struct Epilogue<'a> {
    pub inputs: Vec<&'a OperandDescriptor>,
    pub wgsl: String,
}

impl Epilogue<'_> {
    pub fn names(&self) -> impl Iterator<Item = (&'static str, &OperandDescriptor)> {
        NAMES.iter().copied().zip(self.inputs.iter().copied())
    }
}

fn enabled() -> bool {
    cfg!(target_arch = "wasm32") || std::env::var("WEBNN_WGPU_FUSION").map(|v| v != "0").unwrap_or(true)
}

/// Whether an operator can be a node of a chain: its element-wise families, on types of 32 bits
/// or less.
fn is_node(d: &GraphDescription, op: &Operator) -> bool {
    let narrow = op.inputs.iter().chain(&op.outputs).all(|&i| !d.descriptors[i].data_type.is_wide());
    narrow && matches!(op.op, Op::Unary(_) | Op::Activation(_) | Op::Binary(_) | Op::Cast { .. })
}

fn label(op: &Operator) -> String {
    if op.label.is_empty() {
        op.op.name().to_string()
    } else {
        op.label.clone()
    }
}

fn is_producer(op: &Op) -> bool {
    matches!(op, Op::Matmul | Op::Gemm(_) | Op::Conv2d(_) | Op::ConvTranspose2d(_))
}

fn is_reduction(op: &Op) -> bool {
    matches!(op, Op::Reduce(..))
}

/// Groups the graph's operators into the kernels `build()` lowers, in a valid execution order. `max_bindings` is the
/// device's storage buffers per shader stage.
pub fn plan(d: &GraphDescription, max_bindings: u32) -> Vec<OpGroup<'_>> {
    let ops = &d.operators;
    fn single(op: &Operator) -> OpGroup<'_> {
        OpGroup { inputs: op.inputs.clone(), outputs: op.outputs.clone(), label: label(op), kind: OpGroupKind::Op(&op.op) }
    }
    if !enabled() {
        return ops.iter().map(single).collect();
    }
    let max_bindings = max_bindings.clamp(2, NAMES.len() as u32 + 1) as usize;
    let mut producer_of = vec![None; d.descriptors.len()];
    let mut consumers: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); d.descriptors.len()];
    for (k, op) in ops.iter().enumerate() {
        op.outputs.iter().for_each(|&o| producer_of[o] = Some(k));
        op.inputs.iter().for_each(|&i| {
            consumers[i].insert(k);
        });
    }
    let outputs: BTreeSet<usize> = d.outputs.values().copied().collect();
    // group[k]: the members of the group whose root is k (k last); absorbed groups are emptied.
    let mut group: Vec<Vec<usize>> = Vec::with_capacity(ops.len());
    for (c, op) in ops.iter().enumerate() {
        group.push(vec![c]);
        if !is_node(d, op) {
            continue;
        }
        for &o in &op.inputs {
            let Some(j) = producer_of[o] else { continue };
            let fusable = ops[j].outputs.len() == 1
                && !outputs.contains(&o)
                && consumers[o].len() == 1
                && !group[j].is_empty()
                && (is_node(d, &ops[j]) || is_producer(&ops[j].op));
            if !fusable {
                continue;
            }
            merge(d, &mut group, j, c, max_bindings);
        }
    }
    // A reduction joins the chain reading it, once the chain is complete: only its final output
    // shows whether every element of a row is written.
    for k in 0..ops.len() {
        if group[k].is_empty() || !is_node(d, &ops[k]) {
            continue;
        }
        let reads: Vec<usize> = group[k].iter().flat_map(|&m| ops[m].inputs.iter().copied()).collect();
        for o in reads {
            let Some(j) = producer_of[o] else { continue };
            let fusable = is_reduction(&ops[j].op)
                && !outputs.contains(&o)
                && consumers[o].len() == 1
                && group[j].len() == 1;
            if !fusable {
                continue;
            }
            if merge(d, &mut group, j, k, max_bindings) {
                break;
            }
        }
    }
    let mut member = vec![false; ops.len()];
    group.iter().filter(|g| g.len() > 1).flatten().for_each(|&k| member[k] = true);
    let mut groups = Vec::new();
    for (k, op) in ops.iter().enumerate() {
        if group[k].len() > 1 {
            let Some((inputs, fused)) = fusion(d, &group[k], max_bindings) else {
                // Checked when the group was formed.
                group[k].iter().for_each(|&m| groups.push(single(&ops[m])));
                continue;
            };
            let label = group[k].iter().map(|&m| label(&ops[m])).collect::<Vec<_>>().join("+");
            groups.push(OpGroup { inputs, outputs: op.outputs.clone(), label, kind: OpGroupKind::Fused(fused) });
        } else if !member[k] {
            groups.push(single(op));
        }
    }
    groups
}

/// The fused group of `members` (operator indices, ascending, the last one the root), with its
/// input operands, or `None` where the group cannot be one kernel.
/// Moves group `j` into group `k` when their members fuse into one kernel; whether they did.
fn merge(d: &GraphDescription, group: &mut [Vec<usize>], j: usize, k: usize, max_bindings: usize) -> bool {
    let mut candidate: Vec<usize> = group[j].iter().chain(&group[k]).copied().collect();
    candidate.sort_unstable();
    if fusion(d, &candidate, max_bindings).is_none() {
        return false;
    }
    group[k] = candidate;
    group[j].clear();
    true
}

fn fusion<'a>(d: &'a GraphDescription, members: &[usize], max_bindings: usize) -> Option<(Vec<usize>, Fused<'a>)> {
    let ops = &d.operators;
    let root = &ops[*members.last()?];
    let out = &d.descriptors[root.outputs[0]];
    let producers: Vec<usize> =
        members.iter().copied().filter(|&m| is_producer(&ops[m].op) || is_reduction(&ops[m].op)).collect();
    let producer = match producers[..] {
        [] => None,
        [p] => Some(p),
        _ => return None,
    };
    let mut inputs: Vec<usize> = Vec::new();
    let mut chain_inputs: Vec<usize> = Vec::new();
    if let Some(p) = producer {
        let produced = &d.descriptors[ops[p].outputs[0]];
        let fits = match &ops[p].op {
            // The chain runs once per element of the reduced rows.
            Op::Reduce(_, o) => reduce::fusable(o, &d.descriptors[ops[p].inputs[0]], produced, out),
            // The epilogue runs once per element the producer stores.
            op => {
                let conv = matches!(op, Op::Conv2d(_) | Op::ConvTranspose2d(_));
                produced.shape == out.shape && (conv || out.data_type.is_float())
            }
        };
        if !fits {
            return None;
        }
        inputs.extend(&ops[p].inputs);
    }
    let reduced_input = producer.filter(|&p| is_reduction(&ops[p].op)).map(|p| ops[p].inputs[0]);
    // Nodes are the members in order, without the producer.
    let node_ops: Vec<usize> = members.iter().copied().filter(|&m| Some(m) != producer).collect();
    let mut nodes = Vec::new();
    for &m in &node_ops {
        let op = &ops[m];
        let mut args = Vec::new();
        for &o in &op.inputs {
            args.push(match producer_of(d, members, o) {
                Some(x) if Some(x) == producer => Arg::Producer,
                Some(x) => Arg::Node(node_ops.iter().position(|&y| y == x)?),
                None if Some(o) == reduced_input => Arg::ProducerInput,
                None => {
                    let k = match chain_inputs.iter().position(|&i| i == o) {
                        Some(k) => k,
                        None => {
                            chain_inputs.push(o);
                            chain_inputs.len() - 1
                        }
                    };
                    Arg::Input(k)
                }
            });
        }
        nodes.push(Node {
            op: &op.op,
            args,
            input_type: d.descriptors[op.inputs[0]].data_type,
            output: d.descriptors[op.outputs[0]].clone(),
        });
    }
    if chain_inputs.len() > NAMES.len() || inputs.len() + chain_inputs.len() + 1 > max_bindings {
        return None;
    }
    if let Some(p) = producer {
        if matches!(ops[p].op, Op::Matmul | Op::Gemm(_)) {
            // The matmul kernels' store knows the row and column, not the batch: chain inputs
            // must be the same for every batch.
            let per_batch = chain_inputs.iter().all(|&i| {
                let s = &d.descriptors[i].shape;
                s.len() <= 2 || s[..s.len() - 2].iter().all(|&x| x == 1)
            });
            if !per_batch {
                return None;
            }
        }
    }
    let fused = Fused {
        producer: producer.map(|p| (&ops[p].op, d.descriptors[ops[p].outputs[0]].clone())),
        chain_inputs: chain_inputs.iter().map(|&i| d.descriptors[i].clone()).collect(),
        nodes,
    };
    // Every expression must exist and their helpers agree.
    fused.functions().ok()?;
    inputs.extend(chain_inputs);
    Some((inputs, fused))
}

/// The member of `members` writing operand `o`.
fn producer_of(d: &GraphDescription, members: &[usize], o: usize) -> Option<usize> {
    members.iter().copied().find(|&m| d.operators[m].outputs.contains(&o))
}

/// Helper WGSL functions, each once; two different definitions of one name fail.
#[derive(Default)]
struct Helpers {
    items: Vec<(String, String)>,
}

impl Helpers {
    /// Adds the top-level functions of `source` (comments before a function belong to it).
    fn add(&mut self, source: &str) -> Result<()> {
        let mut item = String::new();
        for line in source.split_inclusive('\n') {
            item += line;
            let complete = line.starts_with('}') || (line.starts_with("fn ") && line.trim_end().ends_with('}'));
            if complete {
                self.push(std::mem::take(&mut item))?;
            }
        }
        if !item.trim().is_empty() {
            self.push(item)?;
        }
        Ok(())
    }

    fn push(&mut self, item: String) -> Result<()> {
        let name = item
            .lines()
            .find_map(|l| l.strip_prefix("fn "))
            .and_then(|l| l.split('(').next())
            .unwrap_or("")
            .to_string();
        match self.items.iter().find(|(n, _)| *n == name) {
            Some((_, existing)) if *existing == item => Ok(()),
            Some(_) => Err(Error::NotSupported(format!("two definitions of the WGSL helper {name}"))),
            None => {
                self.items.push((name, item));
                Ok(())
            }
        }
    }

    fn text(&self) -> String {
        self.items.iter().map(|(_, s)| s.as_str()).collect()
    }
}

/// `v` of value type of `data_type` as the next operator would load it after a store.
fn stored(data_type: DataType, v: &str) -> String {
    match data_type {
        DataType::Float16 => format!("f16_to_f32(f32_to_f16({v}))"),
        DataType::Int8 => format!("extractBits({v}, 0u, 8u)"),
        DataType::Uint8 => format!("({v} & 0xffu)"),
        _ => v.to_string(),
    }
}

impl Fused<'_> {
    /// The helpers and one `fused_<j>` function per node.
    fn functions(&self) -> Result<String> {
        let mut helpers = Helpers::default();
        let mut fns = String::new();
        for (j, node) in self.nodes.iter().enumerate() {
            let vt = value_type(node.input_type)?;
            let out_vt = value_type(node.output.data_type)?;
            let (e, h, binary) = match node.op {
                Op::Unary(op) => {
                    let (e, h) = elementwise_unary::expression(*op);
                    (e, h, false)
                }
                Op::Activation(op) => {
                    let (e, h) = activation::expression(op, node.input_type)?;
                    (e, h, *op == activation::Activation::Prelu)
                }
                Op::Binary(op) => {
                    let (e, h) = elementwise_binary::expression(*op, vt);
                    (e, h.to_string(), true)
                }
                Op::Cast { .. } => {
                    let (e, h) = cast::expression(node.input_type, node.output.data_type)?;
                    (e.to_string(), h.to_string(), false)
                }
                _ => return Err(Error::NotSupported(format!("{} is not fused", node.op.name()))),
            };
            helpers.add(&h)?;
            let params = if binary { format!("a: {vt}, b: {vt}") } else { format!("x: {vt}") };
            fns += &format!("fn fused_{j}({params}) -> {out_vt} {{ return {e}; }}\n");
        }
        Ok(helpers.text() + &fns)
    }

    /// Offset functions of the chain's inputs, `fn epilogue(v, fc, fi) -> T` computing the nodes
    /// at output coordinates `fc`, linear index `fi` (`v` the producer's value, of its value
    /// type, unused without one), and `fn epilogue_at(v, i: u32) -> T` at linear index `i`.
    fn chain(&self, out: &OperandDescriptor) -> Result<String> {
        let rank = out.rank().max(1);
        let mut s = self.functions()? + &coords_fn("fused", &out.shape);
        let mut body = String::new();
        let mut coords = false;
        for (k, d) in self.chain_inputs.iter().enumerate() {
            // Inputs of the output's shape load at the linear index: no coordinates needed.
            if d.shape == out.shape {
                body += &format!("    let {0} = load_{0}(fi);\n", NAMES[k]);
            } else {
                s += &broadcast_offset_fn(NAMES[k], &d.shape, out.rank());
                body += &format!("    let {0} = load_{0}(offset_{0}(fc));\n", NAMES[k]);
                coords = true;
            }
        }
        let mut producer_type = "f32";
        if let Some((_, produced)) = &self.producer {
            producer_type = value_type(produced.data_type)?;
            body += &format!("    let p = {};\n", stored(produced.data_type, "v"));
        }
        if self.nodes.iter().any(|n| n.args.contains(&Arg::ProducerInput)) {
            body += "    let px = load_input(fi);\n";
        }
        let last = self.nodes.len() - 1;
        for (j, node) in self.nodes.iter().enumerate() {
            let args: Vec<String> = node
                .args
                .iter()
                .map(|a| match a {
                    Arg::Input(k) => NAMES[*k].to_string(),
                    Arg::Node(x) => format!("v{x}"),
                    Arg::Producer => "p".to_string(),
                    Arg::ProducerInput => "px".to_string(),
                })
                .collect();
            let call = format!("fused_{j}({})", args.join(", "));
            let value = if j == last { call } else { stored(node.output.data_type, &call) };
            body += &format!("    let v{j} = {value};\n");
        }
        let out_vt = value_type(out.data_type)?;
        s += &format!(
            "fn epilogue(v: {producer_type}, fc: array<u32, {rank}>, fi: u32) -> {out_vt} {{\n{body}    return v{last};\n}}\n"
        );
        let at = if coords { "coords_fused(i)".to_string() } else { format!("array<u32, {rank}>()") };
        s += &format!("fn epilogue_at(v: {producer_type}, i: u32) -> {out_vt} {{ return epilogue(v, {at}, i); }}\n");
        Ok(s)
    }

    pub fn lower(&self, request: &LowerRequest) -> Result<Lowering> {
        let out = request.outputs[0];
        let own = request.inputs.len() - self.chain_inputs.len();
        let Some(op) = self.producer.as_ref().map(|p| p.0) else {
            let launch = ElementwiseKernel {
                inputs: NAMES.iter().copied().zip(request.inputs.iter().copied()).collect(),
                output: out,
                helpers: self.chain(out)?,
                body: "    return epilogue_at(0.0, i);".into(),
            }
            .build()?;
            return Ok(Lowering::single(launch));
        };
        let mut wgsl = self.chain(out)?;
        if matches!(op, Op::Matmul | Op::Gemm(_)) {
            // The matmul kernels store by row and column. Chain inputs are the same for every
            // batch, so one of the output's shape has a single batch: its index is m N + n.
            let rank = out.rank();
            wgsl += &format!(
                "fn epilogue_mn(v: f32, m: u32, n: u32) -> f32 {{ var fc: array<u32, {rank}>; fc[{}] = m; fc[{}] = n; return epilogue(v, fc, m * {}u + n); }}\n",
                rank - 2,
                rank - 1,
                out.shape[rank - 1]
            );
        }
        let epilogue = Epilogue { inputs: request.inputs[own..].to_vec(), wgsl };
        let producer_request = LowerRequest {
            inputs: request.inputs[..own].to_vec(),
            outputs: vec![out],
            shader_f16: request.shader_f16,
            device: request.device,
        };
        match op {
            Op::Matmul => matmul::lower_matmul(&producer_request, Some(&epilogue)),
            Op::Gemm(o) => matmul::lower_gemm(o, &producer_request, Some(&epilogue)),
            Op::Conv2d(o) => conv2d::lower_conv2d(o, &producer_request, Some(&epilogue)),
            Op::ConvTranspose2d(o) => conv2d::lower_conv_transpose2d(o, &producer_request, Some(&epilogue)),
            Op::Reduce(kind, o) => reduce::lower_fused(*kind, o, &producer_request, &epilogue),
            _ => Err(Error::NotSupported(format!("{} has no epilogue", op.name()))),
        }
    }
}
