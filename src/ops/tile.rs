//! tile: repeats the input along each dimension; output element `c` is input element
//! `c mod input.shape`.

use crate::error::{Error, Result};
use crate::operand::{strides, MAX_RANK};
use crate::operand::OperandDescriptor;
use crate::ops::limits::{self, OpLimits, ALL_TYPES};
use crate::ops::movement::lower_index_map;
use crate::ops::reference::{coords, HostTensor};
use crate::ops::wgsl::{LowerRequest, Lowering};
use crate::ops::{not_this_family, MethodOptions, Op, OpFamily};

pub fn limits() -> Vec<OpLimits> {
    vec![OpLimits {
        name: "tile",
        operands: vec![
            limits::tensor("input", ALL_TYPES, 0, MAX_RANK as u32),
            limits::tensor("output", ALL_TYPES, 0, MAX_RANK as u32),
        ],
    }]
}

pub fn validate(repetitions: &[u32], inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
    let input = inputs[0];
    limits::check(&limits::of("tile")?.operands[0], input)?;
    if repetitions.len() != input.rank() {
        return Err(Error::Type(format!("repetitions {repetitions:?} must have the input's rank {}", input.rank())));
    }
    if repetitions.contains(&0) {
        return Err(Error::Type(format!("repetitions {repetitions:?} contain 0")));
    }
    let shape = input
        .shape
        .iter()
        .zip(repetitions)
        .map(|(&d, &r)| {
            u32::try_from(d as u64 * r as u64)
                .map_err(|_| Error::Type(format!("dimension {d} repeated {r} times is too large")))
        })
        .collect::<Result<Vec<u32>>>()?;
    // The builder then checks every dimension is valid (at most i32::MAX).
    Ok(vec![OperandDescriptor::new(input.data_type, shape)])
}

pub fn lower(request: &LowerRequest) -> Result<Lowering> {
    let input = request.inputs[0];
    let s = strides(&input.shape);
    let terms: Vec<String> = (0..input.rank())
        .filter(|&k| input.shape[k] != 1)
        .map(|k| format!("(c[{k}] % {}u) * {}u", input.shape[k], s[k]))
        .collect();
    lower_index_map(request, &terms)
}

pub fn reference(inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
    let input = &inputs[0];
    let out = &outputs[0];
    let data = (0..out.element_count() as usize)
        .map(|i| {
            let c: Vec<usize> =
                coords(i, &out.shape).iter().zip(input.shape()).map(|(&c, &d)| c % d as usize).collect();
            input.data[crate::ops::reference::linear(&c, input.shape())]
        })
        .collect();
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
            "tile" => Op::Tile { repetitions: p.u32s("repetitions")? },
            other => return Err(crate::ops::unknown_method(other)),
        })
    }

    fn name(&self, op: &Op) -> &'static str {
        match op {
            Op::Tile { .. } => "tile",
            _ => "",
        }
    }

    fn validate(&self, op: &Op, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
        match op {
            Op::Tile { repetitions } => validate(repetitions, inputs),
            _ => Err(not_this_family(op)),
        }
    }

    fn lower(&self, op: &Op, request: &LowerRequest) -> Result<Lowering> {
        match op {
            Op::Tile { .. } => lower(request),
            _ => Err(not_this_family(op)),
        }
    }

    fn reference(&self, op: &Op, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
        match op {
            Op::Tile { .. } => reference(inputs, outputs),
            _ => Err(not_this_family(op)),
        }
    }

    fn moves_input(&self, op: &Op, _index: usize) -> bool {
        match op {
            Op::Tile { .. } => true,
            _ => false,
        }
    }
}
