//! reverse: flips the input along the given axes (all of them when `axes` is absent).

use crate::error::{Error, Result};
use crate::operand::{strides, MAX_RANK};
use crate::operand::OperandDescriptor;
use crate::ops::limits::{self, OpLimits, ALL_TYPES};
use crate::ops::movement::lower_index_map;
use crate::ops::reference::{coords, linear, HostTensor};
use crate::ops::wgsl::{LowerRequest, Lowering};
use crate::ops::{not_this_family, MethodOptions, Op, OpFamily};

pub fn limits() -> Vec<OpLimits> {
    vec![OpLimits {
        name: "reverse",
        operands: vec![
            limits::tensor("input", ALL_TYPES, 0, MAX_RANK as u32),
            limits::tensor("output", ALL_TYPES, 0, MAX_RANK as u32),
        ],
    }]
}

/// Whether each axis is reversed.
fn reversed(axes: Option<&[u32]>, rank: usize) -> Vec<bool> {
    match axes {
        Some(axes) => (0..rank).map(|k| axes.contains(&(k as u32))).collect(),
        None => vec![true; rank],
    }
}

pub fn validate(axes: Option<&[u32]>, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
    let input = inputs[0];
    limits::check(&limits::of("reverse")?.operands[0], input)?;
    if let Some(axes) = axes {
        // The spec says "return failure" here, which the builder method turns into a TypeError.
        if let Some(a) = axes.iter().find(|&&a| a as usize >= input.rank()) {
            return Err(Error::Type(format!("axes {axes:?} has {a}, out of the range 0 to {}", input.rank())));
        }
        if (1..axes.len()).any(|i| axes[..i].contains(&axes[i])) {
            return Err(Error::Type(format!("axes {axes:?} has duplicate values")));
        }
    }
    Ok(vec![input.clone()])
}

pub fn lower(axes: Option<&[u32]>, request: &LowerRequest) -> Result<Lowering> {
    let input = request.inputs[0];
    let flip = reversed(axes, input.rank());
    let s = strides(&input.shape);
    let terms: Vec<String> = (0..input.rank())
        .filter(|&k| input.shape[k] != 1)
        .map(|k| {
            if flip[k] {
                format!("({}u - c[{k}]) * {}u", input.shape[k] - 1, s[k])
            } else {
                format!("c[{k}] * {}u", s[k])
            }
        })
        .collect();
    lower_index_map(request, &terms)
}

pub fn reference(
    axes: Option<&[u32]>,
    inputs: &[HostTensor],
    outputs: &[OperandDescriptor],
) -> Result<Vec<HostTensor>> {
    let input = &inputs[0];
    let shape = input.shape();
    let flip = reversed(axes, shape.len());
    let data = (0..input.data.len())
        .map(|i| {
            let c: Vec<usize> = coords(i, shape)
                .iter()
                .enumerate()
                .map(|(k, &c)| if flip[k] { shape[k] as usize - 1 - c } else { c })
                .collect();
            input.data[linear(&c, shape)]
        })
        .collect();
    Ok(vec![HostTensor::new(outputs[0].clone(), data)?])
}

/// The registry's entry for this file's operators (see [`OpFamily`]).
pub struct Family;

impl OpFamily for Family {
    fn limits(&self) -> Vec<OpLimits> {
        limits()
    }

    fn from_options(&self, name: &str, p: &dyn MethodOptions) -> Result<Op> {
        Ok(match name {
            "reverse" => Op::Reverse { axes: p.opt_u32s("axes")? },
            other => return Err(crate::ops::unknown_method(other)),
        })
    }

    fn name(&self, op: &Op) -> &'static str {
        match op {
            Op::Reverse { .. } => "reverse",
            _ => "",
        }
    }

    fn validate(&self, op: &Op, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
        match op {
            Op::Reverse { axes } => validate(axes.as_deref(), inputs),
            _ => Err(not_this_family(op)),
        }
    }

    fn lower(&self, op: &Op, request: &LowerRequest) -> Result<Lowering> {
        match op {
            Op::Reverse { axes } => lower(axes.as_deref(), request),
            _ => Err(not_this_family(op)),
        }
    }

    fn reference(&self, op: &Op, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
        match op {
            Op::Reverse { axes } => reference(axes.as_deref(), inputs, outputs),
            _ => Err(not_this_family(op)),
        }
    }

    fn moves_input(&self, op: &Op, _index: usize) -> bool {
        match op {
            Op::Reverse { .. } => true,
            _ => false,
        }
    }
}
