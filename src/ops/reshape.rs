//! reshape (a view of the same bytes: no GPU work) and expand (numpy-style broadcast of the input
//! to a new shape).

use crate::error::{Error, Result};
use crate::operand::is_unidirectionally_broadcastable;
use crate::operand::OperandDescriptor;
use crate::ops::limits::{self, OpLimits, ALL_TYPES};
use crate::ops::movement::{check_valid_dimensions, MoveKernel, Source};
use crate::ops::reference::{coords, HostTensor};
use crate::ops::wgsl::{broadcast_offset_fn, coords_fn, BufRef, LowerRequest, Lowering};
use crate::ops::{not_this_family, MethodOptions, Op, OpFamily};

const MAX_RANK: u32 = crate::operand::MAX_RANK as u32;

fn single_input_limits(name: &'static str) -> OpLimits {
    OpLimits {
        name,
        operands: vec![
            limits::tensor("input", ALL_TYPES, 0, MAX_RANK),
            limits::tensor("output", ALL_TYPES, 0, MAX_RANK),
        ],
    }
}

pub fn limits() -> Vec<OpLimits> {
    vec![single_input_limits("reshape"), single_input_limits("expand")]
}

/// The output rank check of the spec's steps, against the output's allowed ranks.
fn check_output_rank(l: &OpLimits, rank: usize) -> Result<()> {
    let output = &l.operands[1];
    if (rank as u32) < output.rank_min || rank as u32 > output.rank_max {
        return Err(Error::Type(format!(
            "{}: newShape has rank {rank} but the output must have rank {} to {}",
            l.name, output.rank_min, output.rank_max
        )));
    }
    Ok(())
}

pub fn validate_reshape(new_shape: &[u32], inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
    let l = limits::of("reshape")?;
    let input = inputs[0];
    limits::check(&l.operands[0], input)?;
    check_output_rank(&l, new_shape.len())?;
    check_valid_dimensions("reshape: newShape", new_shape)?;
    let count = new_shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d as u64));
    if count != Some(input.element_count()) {
        return Err(Error::Type(format!(
            "reshape: newShape {new_shape:?} does not have the {} elements of input {input}",
            input.element_count()
        )));
    }
    Ok(vec![OperandDescriptor::new(input.data_type, new_shape)])
}

pub fn validate_expand(new_shape: &[u32], inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
    let l = limits::of("expand")?;
    let input = inputs[0];
    limits::check(&l.operands[0], input)?;
    check_valid_dimensions("expand: newShape", new_shape)?;
    if !is_unidirectionally_broadcastable(&input.shape, new_shape) {
        return Err(Error::Type(format!(
            "expand: input shape {:?} is not unidirectionally broadcastable to newShape {new_shape:?}",
            input.shape
        )));
    }
    check_output_rank(&l, new_shape.len())?;
    Ok(vec![OperandDescriptor::new(input.data_type, new_shape)])
}

pub fn lower_expand(request: &LowerRequest) -> Result<Lowering> {
    let (input, out) = (request.inputs[0], request.outputs[0]);
    let helpers = coords_fn("out", &out.shape) + &broadcast_offset_fn("input", &input.shape, out.rank());
    let launch = MoveKernel {
        sources: vec![Source { name: "input", buffer: BufRef::Input(0), descriptor: input }],
        output: BufRef::Output(0),
        output_descriptor: out,
        helpers,
        body: "    return bits_input(offset_input(coords_out(i)));".into(),
    }
    .build()?;
    Ok(Lowering::single(launch))
}

/// The output's values are the input's, in the same row-major order.
pub fn reference_reshape(inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
    Ok(vec![HostTensor::new(outputs[0].clone(), inputs[0].data.clone())?])
}

/// Each output element reads the input at its coordinates, with size-1 input dimensions (and
/// the missing leading ones) read at index 0.
pub fn reference_expand(inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
    let out = &outputs[0];
    let data = (0..out.element_count() as usize).map(|i| inputs[0].at_broadcast(&coords(i, &out.shape))).collect();
    Ok(vec![HostTensor::new(out.clone(), data)?])
}

/// The registry's entry for this file's operators (see [`OpFamily`]).
pub struct Family;

impl OpFamily for Family {
    fn limits(&self) -> Vec<OpLimits> {
        limits()
    }

    fn from_options(&self, name: &str, p: &dyn MethodOptions) -> Result<Op> {
        Ok(match name {
            "reshape" => Op::Reshape { new_shape: p.u32s("newShape")? },
            "expand" => Op::Expand { new_shape: p.u32s("newShape")? },
            other => return Err(crate::ops::unknown_method(other)),
        })
    }

    fn name(&self, op: &Op) -> &'static str {
        match op {
            Op::Reshape { .. } => "reshape",
            Op::Expand { .. } => "expand",
            _ => "",
        }
    }

    fn validate(&self, op: &Op, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
        match op {
            Op::Reshape { new_shape } => validate_reshape(new_shape, inputs),
            Op::Expand { new_shape } => validate_expand(new_shape, inputs),
            _ => Err(not_this_family(op)),
        }
    }

    fn lower(&self, op: &Op, request: &LowerRequest) -> Result<Lowering> {
        match op {
            Op::Reshape { .. } => Ok(Lowering::Alias),
            Op::Expand { .. } => lower_expand(request),
            _ => Err(not_this_family(op)),
        }
    }

    fn reference(&self, op: &Op, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
        match op {
            Op::Reshape { .. } => reference_reshape(inputs, outputs),
            Op::Expand { .. } => reference_expand(inputs, outputs),
            _ => Err(not_this_family(op)),
        }
    }

    fn moves_input(&self, op: &Op, _index: usize) -> bool {
        match op {
            Op::Reshape { .. } | Op::Expand { .. } => true,
            _ => false,
        }
    }
}
