//! Operator fusion at `build()`: which operators become one kernel. Chains of element-wise
//! operators become one kernel computing the whole expression per element, and such a chain after
//! a matmul, gemm, conv2d or convTranspose2d is applied in that kernel's store (its epilogue)
//! instead of writing the intermediate. A reduction read only by a chain of its input's shape
//! (RMSNorm: `x / sqrt(reduceSumSquare(x) / n + eps) * w`) becomes one kernel too: each row is
//! reduced, then the chain is written for every element of the row, the row's value as the
//! reduction's output.
//!
//! A matmul or gemm whose B is one entry gathered from a stack (`gather(stack, index, {axis: 0})`
//! with a single index, reshaped or not: a mixture of experts picking an expert's weight on the
//! GPU) reads that entry from the stack in place: the gather's copy is not made.
//!
//! An operator joins its consumer's group when its single output is read by that one operator only
//! and is not a graph output. int64/uint64 operands are not fused. `WEBNN_WGPU_FUSION=0` (native)
//! turns fusion off, for measurements. The fused kernels are lowered by `ops::fusion`.

use std::collections::BTreeSet;

use crate::graph::builder::{GraphDescription, Operator};
use crate::graph::DataType;
use crate::operand::OperandDescriptor;
use crate::ops::fusion::{Arg, Fused, GatheredB, Node, NAMES};
use crate::ops::{reduce, Op};

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

/// Whether operators are fused (both backends): `WEBNN_WGPU_FUSION=0` turns it off natively.
pub fn enabled() -> bool {
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
        if let Some(prologue) = gathered_b(&d.descriptors, ops, c, |o| producer_of[o], |o| {
            consumers[o].len() == 1 && !outputs.contains(&o)
        }) {
            let mut candidate: Vec<usize> = prologue.iter().copied().chain([c]).collect();
            candidate.sort_unstable();
            if prologue.iter().all(|&m| group[m] == [m]) && fusion(d, &candidate, max_bindings).is_some() {
                prologue.iter().for_each(|&m| group[m].clear());
                group[c] = candidate;
            }
        }
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
    // The operators gathering the producer's B, when they are members.
    let prologue = producer
        .and_then(|p| gathered_b(&d.descriptors, ops, p, |o| producer_of(d, members, o), |_| true))
        .unwrap_or_default();
    let gathered = prologue.iter().copied().find(|&m| matches!(ops[m].op, Op::Gather { .. }));
    if let (Some(g), Some(p)) = (gathered, producer) {
        // The stack in B's place; the indices are bound last.
        let stack = &d.descriptors[ops[g].inputs[0]];
        inputs[1] = ops[g].inputs[0];
        if stack.data_type != d.descriptors[ops[p].inputs[1]].data_type {
            return None;
        }
    }
    let reduced_input = producer.filter(|&p| is_reduction(&ops[p].op)).map(|p| ops[p].inputs[0]);
    // Nodes are the members in order, without the producer and its prologue.
    let node_ops: Vec<usize> = members.iter().copied().filter(|&m| Some(m) != producer && !prologue.contains(&m)).collect();
    if node_ops.iter().any(|&m| !is_node(d, &ops[m])) || (node_ops.is_empty() && gathered.is_none()) {
        return None;
    }
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
    let extra = gathered.is_some() as usize;
    if chain_inputs.len() > NAMES.len() || inputs.len() + chain_inputs.len() + extra + 1 > max_bindings {
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
        gathered_b: gathered.zip(producer).map(|(g, p)| GatheredB {
            b: d.descriptors[ops[p].inputs[1]].clone(),
            rows: d.descriptors[ops[g].inputs[0]].shape[0],
        }),
    };
    // Every expression must exist and their helpers agree.
    fused.functions().ok()?;
    inputs.extend(chain_inputs);
    inputs.extend(gathered.map(|g| ops[g].inputs[1]));
    Some((inputs, fused))
}

/// The operators that make operator `p`'s B one entry of a stack, if `p` is a matmul or gemm whose
/// B is `gather(stack, indices, {axis: 0})` with one index, possibly reshaped: the gather, then the
/// reshape if any. `producer(o)` is the operator writing operand `o` (where to look), and `sole(o)`
/// says that `o` is read by its one reader only and is no graph output. Both backends read such a
/// B in place (the CPU backend's `Kernel::Gathered`).
pub fn gathered_b(
    descriptors: &[OperandDescriptor],
    ops: &[Operator],
    p: usize,
    producer: impl Fn(usize) -> Option<usize>,
    sole: impl Fn(usize) -> bool,
) -> Option<Vec<usize>> {
    if !matches!(ops[p].op, Op::Matmul | Op::Gemm(_)) {
        return None;
    }
    let b = ops[p].inputs[1];
    // B read as A or C too would need the copy.
    if ops[p].inputs.iter().filter(|&&i| i == b).count() != 1 {
        return None;
    }
    let mut found = Vec::new();
    let mut o = b;
    loop {
        let j = producer(o)?;
        if !sole(o) || ops[j].outputs.len() != 1 {
            return None;
        }
        match &ops[j].op {
            Op::Reshape { .. } if found.is_empty() => {
                found.push(j);
                o = ops[j].inputs[0];
            }
            Op::Gather { axis: 0 } => {
                let indices = &descriptors[ops[j].inputs[1]];
                let stack = &descriptors[ops[j].inputs[0]];
                let one = indices.element_count() == 1 && stack.rank() >= 1;
                let typed = matches!(indices.data_type, DataType::Int32 | DataType::Uint32 | DataType::Int64);
                if !one || !typed {
                    return None;
                }
                found.insert(0, j);
                return Some(found);
            }
            _ => return None,
        }
    }
}

/// The member of `members` writing operand `o`.
fn producer_of(d: &GraphDescription, members: &[usize], o: usize) -> Option<usize> {
    members.iter().copied().find(|&m| d.operators[m].outputs.contains(&o))
}
