//! The float32 kernels' entry point: routes an operator to its family's kernel, or says that none
//! exists so that the caller runs the float64 reference.
//!
//! Families: [`super::elementwise`] (binary with broadcasting, unary, activations),
//! [`super::normalization`] (softmax and the normalizations), [`super::reduce`] (reductions and
//! cumulativeSum), [`super::movement`] (reshape, expand, transpose, slice, concat, pad, tile,
//! reverse, triangular) and [`super::spatial`] (pool2d, resample2d). Before a kernel runs, the
//! operator is validated again on the given descriptors, and the output descriptor and every
//! length are checked, so that a kernel's index arithmetic can trust the shapes: a mismatch is
//! an `OperationError`, never a panic.

use crate::error::{Error, Result};
use crate::operand::{DataType, OperandDescriptor};
use crate::ops::Op;

use super::{elementwise, movement, normalization, reduce, spatial};

/// Whether a float32 kernel exists for `op`.
pub fn handles(op: &Op) -> bool {
    matches!(
        op,
        Op::Binary(_)
            | Op::Unary(_)
            | Op::Activation(_)
            | Op::Softmax { .. }
            | Op::LayerNormalization(_)
            | Op::BatchNormalization(_)
            | Op::InstanceNormalization(_)
            | Op::Reduce(..)
            | Op::Reshape { .. }
            | Op::Expand { .. }
            | Op::Transpose { .. }
            | Op::Concat { .. }
            | Op::Slice(_)
            | Op::Pad(_)
            | Op::Tile { .. }
            | Op::Reverse { .. }
            | Op::Pool2d(..)
            | Op::Resample2d(_)
            | Op::Triangular(_)
            | Op::CumulativeSum(_)
    )
}

/// Runs `op` on float32 inputs into its single float32 output when a fast kernel exists for it;
/// `None` when not (the caller then uses the float64 reference). `inputs[i]` is the i-th operand
/// (descriptor and values, row-major), `output` the output's descriptor and values (pre-sized,
/// contents unspecified on entry).
pub fn run(
    op: &Op,
    inputs: &[(&OperandDescriptor, &[f32])],
    output: (&OperandDescriptor, &mut [f32]),
) -> Option<Result<()>> {
    if !handles(op)
        || output.0.data_type != DataType::Float32
        || inputs.iter().any(|(d, _)| d.data_type != DataType::Float32)
    {
        return None;
    }
    Some(check(op, inputs, &output).and_then(|()| dispatch(op, inputs, output)))
}

/// The operator validates on these inputs, with this output descriptor, and every operand has
/// as many values as its shape.
fn check(op: &Op, inputs: &[(&OperandDescriptor, &[f32])], output: &(&OperandDescriptor, &mut [f32])) -> Result<()> {
    let descriptors: Vec<&OperandDescriptor> = inputs.iter().map(|(d, _)| *d).collect();
    let outputs = crate::ops::validate(op, &descriptors)?;
    if outputs.len() != 1 || outputs[0] != *output.0 {
        return Err(Error::Operation(format!(
            "{}: the output is {} but the operator gives {outputs:?}",
            op.name(),
            output.0
        )));
    }
    let counts = inputs.iter().map(|(d, v)| (*d, v.len())).chain(std::iter::once((output.0, output.1.len())));
    for (d, len) in counts {
        if len as u64 != d.element_count() {
            return Err(Error::Operation(format!("{}: {len} values for {d}", op.name())));
        }
    }
    Ok(())
}

fn dispatch(op: &Op, inputs: &[(&OperandDescriptor, &[f32])], output: (&OperandDescriptor, &mut [f32])) -> Result<()> {
    let first = *inputs.first().ok_or_else(|| Error::Operation(format!("{}: no input", op.name())))?;
    let second = || inputs.get(1).copied().ok_or_else(|| Error::Operation(format!("{}: no second input", op.name())));
    match op {
        Op::Binary(b) => elementwise::binary(*b, first, second()?, output),
        Op::Unary(u) => elementwise::unary(*u, first.1, output.1),
        Op::Activation(crate::ops::activation::Activation::Prelu) => elementwise::prelu(first, second()?, output),
        Op::Activation(a) => elementwise::activation(a, first.1, output.1),
        Op::Softmax { axis } => normalization::softmax(*axis as usize, first, output.1),
        Op::LayerNormalization(o) => normalization::layer_normalization(o, inputs, output.1),
        Op::BatchNormalization(o) => normalization::batch_normalization(o, inputs, output.1),
        Op::InstanceNormalization(o) => normalization::instance_normalization(o, inputs, output.1),
        Op::Reduce(kind, o) => reduce::reduce(*kind, o, first, output.1),
        Op::Reshape { .. } => movement::reshape(first.1, output.1),
        Op::Expand { .. } => movement::expand(first, output),
        Op::Transpose { permutation } => movement::transpose(permutation.as_deref(), first, output),
        Op::Concat { axis } => movement::concat(*axis as usize, inputs, output),
        Op::Slice(o) => movement::slice(o, first, output),
        Op::Pad(o) => movement::pad(o, first, output),
        Op::Tile { .. } => movement::tile(first, output),
        Op::Reverse { axes } => movement::reverse(axes.as_deref(), first, output.1),
        Op::Pool2d(kind, o) => spatial::pool2d(*kind, o, first, output),
        Op::Resample2d(o) => spatial::resample2d(o, first, output),
        Op::Triangular(o) => movement::triangular(o, first, output.1),
        Op::CumulativeSum(o) => reduce::cumulative_sum(o, first, output.1),
        _ => Err(Error::Operation(format!("{}: no float32 kernel", op.name()))),
    }
}
