//! transpose: permutes the dimensions of the input.

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
        name: "transpose",
        operands: vec![
            limits::tensor("input", ALL_TYPES, 0, MAX_RANK as u32),
            limits::tensor("output", ALL_TYPES, 0, MAX_RANK as u32),
        ],
    }]
}

/// The permutation, defaulting to the reversed axes.
fn permutation_or_default(permutation: Option<&[u32]>, rank: usize) -> Vec<usize> {
    match permutation {
        Some(p) => p.iter().map(|&a| a as usize).collect(),
        None => (0..rank).rev().collect(),
    }
}

pub fn validate(permutation: Option<&[u32]>, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
    let input = inputs[0];
    limits::check(&limits::of("transpose")?.operands[0], input)?;
    let rank = input.rank();
    if let Some(p) = permutation {
        if p.len() != rank {
            return Err(Error::Type(format!(
                "transpose: permutation {p:?} has {} values but input has rank {rank}",
                p.len()
            )));
        }
        if let Some(a) = p.iter().find(|&&a| a as usize >= rank) {
            return Err(Error::Type(format!("transpose: permutation {p:?} has {a}, out of the range 0 to {rank}")));
        }
        if (1..p.len()).any(|i| p[..i].contains(&p[i])) {
            return Err(Error::Type(format!("transpose: permutation {p:?} has duplicate values")));
        }
    }
    let shape = permutation_or_default(permutation, rank).iter().map(|&a| input.shape[a]).collect::<Vec<u32>>();
    Ok(vec![OperandDescriptor::new(input.data_type, shape)])
}

pub fn lower(permutation: Option<&[u32]>, request: &LowerRequest) -> Result<Lowering> {
    let (input, out) = (request.inputs[0], request.outputs[0]);
    let perm = permutation_or_default(permutation, input.rank());
    let input_strides = strides(&input.shape);
    // Output axis `k` walks input axis `perm[k]`.
    let terms: Vec<String> = perm
        .iter()
        .enumerate()
        .filter(|&(k, _)| out.shape[k] != 1)
        .map(|(k, &a)| format!("c[{k}] * {}u", input_strides[a]))
        .collect();
    lower_index_map(request, &terms)
}

/// `output[c] = input[d]` where `d[permutation[k]] = c[k]`.
pub fn reference(
    permutation: Option<&[u32]>,
    inputs: &[HostTensor],
    outputs: &[OperandDescriptor],
) -> Result<Vec<HostTensor>> {
    let input = &inputs[0];
    let out = &outputs[0];
    let perm = permutation_or_default(permutation, input.shape().len());
    let in_strides = strides(input.shape());
    let data = (0..out.element_count() as usize)
        .map(|i| {
            let c = coords(i, &out.shape);
            let index: u64 = perm.iter().zip(&c).map(|(&a, &ck)| ck as u64 * in_strides[a]).sum();
            input.data[index as usize]
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
            "transpose" => Op::Transpose { permutation: p.opt_u32s("permutation")? },
            other => return Err(crate::ops::unknown_method(other)),
        })
    }

    fn name(&self, op: &Op) -> &'static str {
        match op {
            Op::Transpose { .. } => "transpose",
            _ => "",
        }
    }

    fn validate(&self, op: &Op, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
        match op {
            Op::Transpose { permutation } => validate(permutation.as_deref(), inputs),
            _ => Err(not_this_family(op)),
        }
    }

    fn lower(&self, op: &Op, request: &LowerRequest) -> Result<Lowering> {
        match op {
            Op::Transpose { permutation } => lower(permutation.as_deref(), request),
            _ => Err(not_this_family(op)),
        }
    }

    fn reference(&self, op: &Op, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
        match op {
            Op::Transpose { permutation } => reference(permutation.as_deref(), inputs, outputs),
            _ => Err(not_this_family(op)),
        }
    }

    fn moves_input(&self, op: &Op, _index: usize) -> bool {
        match op {
            Op::Transpose { .. } => true,
            _ => false,
        }
    }
}
