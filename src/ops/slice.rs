//! slice: a strided window of the input.

use crate::error::{Error, Result};
use crate::operand::{strides, MAX_RANK};
use crate::operand::OperandDescriptor;
use crate::ops::limits::{self, OpLimits, ALL_TYPES};
use crate::ops::movement::lower_index_map;
use crate::ops::reference::{coords, HostTensor};
use crate::ops::wgsl::{LowerRequest, Lowering};
use crate::ops::{not_this_family, MethodOptions, Op, OpFamily};

/// `slice`'s arguments and `MLSliceOptions`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SliceOptions {
    pub starts: Vec<u32>,
    pub sizes: Vec<u32>,
    pub strides: Option<Vec<u32>>,
}

impl SliceOptions {
    /// The strides, defaulting to 1 on every axis.
    fn strides_or_default(&self) -> Vec<u32> {
        self.strides.clone().unwrap_or_else(|| vec![1; self.starts.len()])
    }
}

pub fn limits() -> Vec<OpLimits> {
    vec![OpLimits {
        name: "slice",
        operands: vec![
            limits::tensor("input", ALL_TYPES, 0, MAX_RANK as u32),
            limits::tensor("output", ALL_TYPES, 0, MAX_RANK as u32),
        ],
    }]
}

pub fn validate(o: &SliceOptions, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
    let input = inputs[0];
    limits::check(&limits::of("slice")?.operands[0], input)?;
    let rank = input.rank();
    if o.sizes.contains(&0) {
        return Err(Error::Type(format!("slice: sizes {:?} contain 0", o.sizes)));
    }
    if o.starts.len() != rank || o.sizes.len() != rank {
        return Err(Error::Type(format!(
            "slice: starts {:?} and sizes {:?} must both have the input's rank {rank}",
            o.starts, o.sizes
        )));
    }
    if let Some(s) = &o.strides {
        if s.len() != rank {
            return Err(Error::Type(format!("slice: strides {s:?} must have the input's rank {rank}")));
        }
    }
    let strides = o.strides_or_default();
    let mut shape = Vec::with_capacity(rank);
    for axis in 0..rank {
        let (dim, start, size, stride) = (input.shape[axis], o.starts[axis], o.sizes[axis], strides[axis]);
        if stride < 1 {
            return Err(Error::Type(format!("slice: strides[{axis}] is {stride} but must be at least 1")));
        }
        if start as u64 + size as u64 > dim as u64 {
            return Err(Error::Type(format!(
                "slice: starts[{axis}] {start} + sizes[{axis}] {size} exceed the input dimension {dim}"
            )));
        }
        shape.push(size.div_ceil(stride));
    }
    Ok(vec![OperandDescriptor::new(input.data_type, shape)])
}

pub fn lower(o: &SliceOptions, request: &LowerRequest) -> Result<Lowering> {
    let (input, out) = (request.inputs[0], request.outputs[0]);
    let input_strides = strides(&input.shape);
    let steps = o.strides_or_default();
    // Element `c[axis]` of an axis reads input index `start + c[axis] * stride`.
    let mut base = 0u64;
    let mut terms = Vec::new();
    for axis in 0..input.rank() {
        base += o.starts[axis] as u64 * input_strides[axis];
        if out.shape[axis] != 1 {
            terms.push(format!("c[{axis}] * {}u", steps[axis] as u64 * input_strides[axis]));
        }
    }
    terms.push(format!("{base}u"));
    lower_index_map(request, &terms)
}

/// `output[c] = input[starts + c * strides]`.
pub fn reference(o: &SliceOptions, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
    let input = &inputs[0];
    let out = &outputs[0];
    let steps = o.strides_or_default();
    let in_strides = strides(input.shape());
    let data = (0..out.element_count() as usize)
        .map(|i| {
            let c = coords(i, &out.shape);
            let index: u64 = (0..c.len())
                .map(|axis| (o.starts[axis] as u64 + c[axis] as u64 * steps[axis] as u64) * in_strides[axis])
                .sum();
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
            "slice" => Op::Slice(SliceOptions { starts: p.u32s("starts")?, sizes: p.u32s("sizes")?, strides: p.opt_u32s("strides")? }),
            other => return Err(crate::ops::unknown_method(other)),
        })
    }

    fn name(&self, op: &Op) -> &'static str {
        match op {
            Op::Slice(_) => "slice",
            _ => "",
        }
    }

    fn validate(&self, op: &Op, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
        match op {
            Op::Slice(o) => validate(o, inputs),
            _ => Err(not_this_family(op)),
        }
    }

    fn lower(&self, op: &Op, request: &LowerRequest) -> Result<Lowering> {
        match op {
            Op::Slice(o) => lower(o, request),
            _ => Err(not_this_family(op)),
        }
    }

    fn reference(&self, op: &Op, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
        match op {
            Op::Slice(o) => reference(o, inputs, outputs),
            _ => Err(not_this_family(op)),
        }
    }

    fn moves_input(&self, op: &Op, _index: usize) -> bool {
        match op {
            Op::Slice(_) => true,
            _ => false,
        }
    }
}
