//! Chains of float32 element-wise operators (unary, activations, binary) run as one kernel: the
//! output is computed a block of elements at a time, every operator of the chain on the block
//! before the next, so that the intermediates stay in the cache instead of each being a whole
//! tensor written and read back. Each operator runs the same per-element code as on its own
//! ([`elementwise`]), in the same order, so the results are bit for bit those of the unfused
//! graph.
//!
//! Every operand of a chain has the output's shape, one element (a scalar), or a shape the output
//! ends with (a row broadcast along the leading axes, such as a bias); [`Chain::operand_fits`]
//! says which operands qualify.

use crate::backend::cpu::threads;
use crate::error::{Error, Result};
use crate::operand::{DataType, OperandDescriptor};
use crate::ops::activation::Activation;
use crate::ops::Op;

use super::elementwise;

/// Elements computed at a time.
const BLOCK: usize = 2048;
/// Chains of at least this many elements are split between the CPU threads.
pub const PARALLEL_ELEMENTS: usize = 1 << 16;

/// An operand of a chain's operator: one of the chain's inputs, or an earlier operator's output.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ChainArg {
    Input(usize),
    Node(usize),
}

#[derive(Debug, Clone)]
pub struct ChainNode {
    pub op: Op,
    pub args: Vec<ChainArg>,
}

/// The operators of a chain in execution order; the last one's output is the chain's.
#[derive(Debug, Clone)]
pub struct Chain {
    pub nodes: Vec<ChainNode>,
}

/// How an input maps onto the output's elements.
#[derive(Clone, Copy)]
enum Layout {
    Full,
    Scalar,
    /// Element `i` of the output reads element `i % len`.
    Rows(usize),
}

impl Chain {
    /// Whether `op` can be an operator of a chain: float32 element-wise with one output.
    pub fn handles(op: &Op, inputs: &[&OperandDescriptor], outputs: &[&OperandDescriptor]) -> bool {
        let float32 = inputs.iter().chain(outputs).all(|d| d.data_type == DataType::Float32);
        let element_wise = matches!(op, Op::Unary(_) | Op::Binary(_)) || matches!(op, Op::Activation(a) if *a != Activation::Prelu);
        float32 && element_wise && outputs.len() == 1
    }

    /// Whether an operand of shape `operand` can feed a chain whose output has shape `output`.
    pub fn operand_fits(operand: &[u32], output: &[u32]) -> bool {
        layout(operand, output).is_some()
    }

    /// Computes the chain into `out` (the output's values) from its inputs' descriptors and values.
    pub fn run(&self, inputs: &[(&OperandDescriptor, &[f32])], output: &OperandDescriptor, out: &mut [f32]) -> Result<()> {
        let total = out.len();
        if total as u64 != output.element_count() {
            return Err(Error::Operation("a chain's output has fewer values than its shape".into()));
        }
        let layouts = inputs
            .iter()
            .map(|(d, values)| match layout(&d.shape, &output.shape) {
                Some(l) if values.len() as u64 == d.element_count() => Ok(l),
                _ => Err(Error::Operation(format!("a chain's input {d} does not fit its output {output}"))),
            })
            .collect::<Result<Vec<_>>>()?;
        if self.nodes.is_empty() {
            return Err(Error::Operation("an empty chain".into()));
        }
        for (j, node) in self.nodes.iter().enumerate() {
            for arg in &node.args {
                let fine = match *arg {
                    ChainArg::Input(k) => k < inputs.len(),
                    ChainArg::Node(i) => i < j,
                };
                if !fine {
                    return Err(Error::Operation(format!("operator {j} of a chain reads {arg:?}")));
                }
            }
        }
        // Parts of whole blocks for the CPU threads; one part when the chain is short.
        let part = if total >= PARALLEL_ELEMENTS { total.div_ceil(2 * threads::count()).next_multiple_of(BLOCK) } else { total };
        threads::try_for_each_chunk(out, part, &|index, out| self.run_part(inputs, &layouts, index * part, out))
    }

    /// Computes the output's elements from `first` on into `out`, a block at a time.
    fn run_part(&self, inputs: &[(&OperandDescriptor, &[f32])], layouts: &[Layout], first: usize, out: &mut [f32]) -> Result<()> {
        let last = self.nodes.len() - 1;
        // One block per operator but the last (which writes the output), and one per row input;
        // allocated fallibly, since a worker thread that aborted would leave its caller waiting.
        let block = || -> Result<Vec<f32>> {
            let mut b = Vec::new();
            b.try_reserve_exact(BLOCK).map_err(|_| Error::Operation("a chain cannot allocate its blocks".into()))?;
            b.resize(BLOCK, 0f32);
            Ok(b)
        };
        let mut blocks = (0..last).map(|_| block()).collect::<Result<Vec<_>>>()?;
        let mut rows = layouts.iter().map(|l| if matches!(l, Layout::Rows(_)) { block() } else { Ok(Vec::new()) }).collect::<Result<Vec<_>>>()?;
        let mut done_elements = 0;
        while done_elements < out.len() {
            let n = BLOCK.min(out.len() - done_elements);
            let start = first + done_elements;
            for (k, layout) in layouts.iter().enumerate() {
                if let Layout::Rows(len) = *layout {
                    let values = inputs[k].1;
                    for (i, v) in rows[k][..n].iter_mut().enumerate() {
                        *v = values[(start + i) % len];
                    }
                }
            }
            for (j, node) in self.nodes.iter().enumerate() {
                let (done, rest) = blocks.split_at_mut(j.min(last));
                let target: &mut [f32] = if j == last { &mut out[done_elements..done_elements + n] } else { &mut rest[0][..n] };
                let operand = |arg: ChainArg| -> (bool, &[f32]) {
                    match arg {
                        ChainArg::Node(i) => (false, &done[i][..n]),
                        ChainArg::Input(k) => match layouts[k] {
                            Layout::Full => (false, &inputs[k].1[start..start + n]),
                            Layout::Scalar => (true, &inputs[k].1[..1]),
                            Layout::Rows(_) => (false, &rows[k][..n]),
                        },
                    }
                };
                compute(&node.op, &node.args, &operand, target, n)?;
            }
            done_elements += n;
        }
        Ok(())
    }
}

/// One operator on a block of `n` elements; `operand(arg)` gives an operand's block (or its one
/// value, flagged `true`).
fn compute<'a>(op: &Op, args: &[ChainArg], operand: &dyn Fn(ChainArg) -> (bool, &'a [f32]), out: &mut [f32], n: usize) -> Result<()> {
    let arg = |i: usize| args.get(i).copied().ok_or_else(|| Error::Operation(format!("{}: an operand is missing", op.name())));
    // A one-operand operator's operand has its output's shape, the chain's: always a block (a
    // single value could only be a length mismatch, which the kernels report).
    match op {
        Op::Unary(u) => elementwise::unary(*u, operand(arg(0)?).1, out),
        Op::Activation(a) => elementwise::activation(a, operand(arg(0)?).1, out),
        Op::Binary(b) => {
            let (a_values, b_values) = (operand(arg(0)?), operand(arg(1)?));
            let shape = |scalar: bool| OperandDescriptor::new(DataType::Float32, vec![if scalar { 1 } else { n as u32 }]);
            let (ad, bd, od) = (shape(a_values.0), shape(b_values.0), shape(false));
            elementwise::binary(*b, (&ad, a_values.1), (&bd, b_values.1), (&od, out))
        }
        _ => Err(Error::Operation(format!("{} is not an element-wise operator of a chain", op.name()))),
    }
}

/// How an operand of shape `operand` maps onto an output of shape `output`.
fn layout(operand: &[u32], output: &[u32]) -> Option<Layout> {
    let count = |s: &[u32]| s.iter().map(|&d| d as usize).product::<usize>();
    if operand == output {
        return Some(Layout::Full);
    }
    if count(operand) == 1 {
        return Some(Layout::Scalar);
    }
    // Leading ones dropped, the output must end with the operand's shape.
    let first = operand.iter().position(|&d| d != 1).unwrap_or(operand.len());
    let tail = &operand[first..];
    if tail.len() <= output.len() && output.ends_with(tail) {
        return Some(if tail.len() == output.len() { Layout::Full } else { Layout::Rows(count(tail)) });
    }
    None
}
