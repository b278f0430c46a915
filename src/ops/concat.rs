//! concat and split along one axis.
//!
//! Seen with the axis as the middle of `[outer, axis, inner]`, concat copies each input's
//! `[outer, size_k, inner]` block to the axis range `offset_k .. offset_k + size_k` of the
//! output, and split does the reverse.

use crate::error::{Error, Result};
use crate::operand::MAX_RANK;
use crate::operand::OperandDescriptor;
use crate::ops::limits::{self, OpLimits, ALL_TYPES};
use crate::ops::movement::{outer_inner, MoveKernel, Source, MAX_BINDINGS};
use crate::ops::reference::HostTensor;
use crate::ops::wgsl::{buffer_size, BufRef, LowerRequest, Lowering};
use crate::ops::{not_this_family, MethodOptions, Op, OpFamily};
use std::ops::RangeInclusive;

/// `split`'s `splits`: a number of equal parts, or the sizes of the parts.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Splits {
    Count(u32),
    Sizes(Vec<u32>),
}

/// The spec's "valid tensor count" bound.
const MAX_TENSOR_COUNT: usize = 8192;

pub fn limits() -> Vec<OpLimits> {
    vec![
        OpLimits {
            name: "concat",
            operands: vec![
                limits::tensor("inputs", ALL_TYPES, 1, MAX_RANK as u32),
                limits::tensor("output", ALL_TYPES, 1, MAX_RANK as u32),
            ],
        },
        OpLimits {
            name: "split",
            operands: vec![
                limits::tensor("input", ALL_TYPES, 1, MAX_RANK as u32),
                limits::tensor("outputs", ALL_TYPES, 1, MAX_RANK as u32),
            ],
        },
    ]
}

pub fn validate_concat(axis: u32, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
    let l = limits::of("concat")?;
    if inputs.is_empty() || inputs.len() > MAX_TENSOR_COUNT {
        return Err(Error::Type(format!("concat: got {} inputs but takes 1 to {MAX_TENSOR_COUNT}", inputs.len())));
    }
    let first = inputs[0];
    for input in inputs {
        limits::check(&l.operands[0], input)?;
    }
    let axis = axis as usize;
    if axis >= first.rank() {
        return Err(Error::Type(format!("concat: axis {axis} is out of range for inputs of rank {}", first.rank())));
    }
    let mut size = first.shape[axis] as u64;
    for (index, input) in inputs.iter().enumerate().skip(1) {
        if input.data_type != first.data_type {
            return Err(Error::Type(format!(
                "concat: inputs[{index}] is {} but inputs[0] is {}",
                input.data_type, first.data_type
            )));
        }
        if input.rank() != first.rank() {
            return Err(Error::Type(format!(
                "concat: inputs[{index}] has rank {} but inputs[0] has rank {}",
                input.rank(),
                first.rank()
            )));
        }
        if let Some(dim) = (0..first.rank()).find(|&d| d != axis && input.shape[d] != first.shape[d]) {
            return Err(Error::Type(format!(
                "concat: inputs[{index}] shape {:?} differs from inputs[0] shape {:?} in dimension {dim}",
                input.shape, first.shape
            )));
        }
        size += input.shape[axis] as u64;
        if size > i32::MAX as u64 {
            return Err(Error::Type(format!(
                "concat: the output size {size} along axis {axis} is not a valid dimension"
            )));
        }
    }
    let mut shape = first.shape.clone();
    shape[axis] = size as u32;
    Ok(vec![OperandDescriptor::new(first.data_type, shape)])
}

/// The sizes of split's outputs along the axis.
fn split_sizes(splits: &Splits, dim: u32) -> Result<Vec<u32>> {
    match splits {
        Splits::Count(n) => {
            if *n == 0 || *n as usize > MAX_TENSOR_COUNT {
                return Err(Error::Type(format!("split: splits {n} is not a count of 1 to {MAX_TENSOR_COUNT}")));
            }
            if dim % n != 0 {
                return Err(Error::Type(format!("split: splits {n} does not divide the axis dimension {dim}")));
            }
            Ok(vec![dim / n; *n as usize])
        }
        Splits::Sizes(sizes) => {
            if sizes.is_empty() || sizes.len() > MAX_TENSOR_COUNT {
                return Err(Error::Type(format!(
                    "split: splits has {} sizes but must have 1 to {MAX_TENSOR_COUNT}",
                    sizes.len()
                )));
            }
            if sizes.contains(&0) {
                return Err(Error::Type(format!("split: splits {sizes:?} contain 0")));
            }
            let sum: u64 = sizes.iter().map(|&s| s as u64).sum();
            if sum != dim as u64 {
                return Err(Error::Type(format!(
                    "split: splits {sizes:?} sum to {sum} but the axis dimension is {dim}"
                )));
            }
            Ok(sizes.clone())
        }
    }
}

pub fn validate_split(splits: &Splits, axis: u32, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
    let input = inputs[0];
    limits::check(&limits::of("split")?.operands[0], input)?;
    let axis = axis as usize;
    if axis >= input.rank() {
        return Err(Error::Type(format!("split: axis {axis} is out of range for input of rank {}", input.rank())));
    }
    let sizes = split_sizes(splits, input.shape[axis])?;
    Ok(sizes
        .into_iter()
        .map(|size| {
            let mut shape = input.shape.clone();
            shape[axis] = size;
            OperandDescriptor::new(input.data_type, shape)
        })
        .collect())
}

/// Binding names of the sources of one concat launch.
const SOURCE_NAMES: [&str; MAX_BINDINGS - 1] = ["in0", "in1", "in2", "in3", "in4", "in5", "in6"];

/// One launch concatenating up to `MAX_BINDINGS - 1` sources into `output`.
fn concat_launch(
    axis: usize,
    sources: &[(BufRef, OperandDescriptor)],
    output: BufRef,
    out: &OperandDescriptor,
) -> Result<crate::ops::Launch> {
    let (_, inner) = outer_inner(&out.shape, axis);
    let total = out.shape[axis];
    let mut body = format!(
        "    let a = (i / {inner}u) % {total}u;\n    let o = i / {}u;\n    let r = i % {inner}u;\n",
        inner * total as u64
    );
    let mut offset = 0u32;
    for ((_, d), name) in sources.iter().zip(SOURCE_NAMES) {
        let size = d.shape[axis];
        body += &format!(
            "    if (a < {}u) {{ return bits_{name}((o * {size}u + a - {offset}u) * {inner}u + r); }}\n",
            offset + size
        );
        offset += size;
    }
    body += "    return Bits();";
    MoveKernel {
        sources: sources
            .iter()
            .zip(SOURCE_NAMES)
            .map(|((buffer, descriptor), name)| Source { name, buffer: *buffer, descriptor })
            .collect(),
        output,
        output_descriptor: out,
        helpers: String::new(),
        body,
    }
    .build()
}

/// A launch binds at most `MAX_BINDINGS - 1` inputs, so more inputs are concatenated in a tree:
/// consecutive groups go to scratch buffers (each a concat along the same axis), whose results
/// are concatenated in turn. Every launch writes a whole buffer of its own, so packed words never
/// have two writers.
pub fn lower_concat(axis: u32, request: &LowerRequest) -> Result<Lowering> {
    let axis = axis as usize;
    let group = MAX_BINDINGS - 1;
    let mut sources: Vec<(BufRef, OperandDescriptor)> =
        request.inputs.iter().enumerate().map(|(i, d)| (BufRef::Input(i), (*d).clone())).collect();
    let mut scratch = Vec::new();
    let mut launches = Vec::new();
    while sources.len() > group {
        let mut next = Vec::with_capacity(sources.len().div_ceil(group));
        for chunk in sources.chunks(group) {
            if let [single] = chunk {
                next.push(single.clone());
                continue;
            }
            let mut shape = chunk[0].1.shape.clone();
            shape[axis] = chunk.iter().map(|(_, d)| d.shape[axis]).sum();
            let descriptor = OperandDescriptor::new(chunk[0].1.data_type, shape);
            scratch.push(buffer_size(&descriptor));
            let buffer = BufRef::Scratch(scratch.len() - 1);
            launches.push(concat_launch(axis, chunk, buffer, &descriptor)?);
            next.push((buffer, descriptor));
        }
        sources = next;
    }
    launches.push(concat_launch(axis, &sources, BufRef::Output(0), request.outputs[0])?);
    Ok(Lowering::Kernels { scratch, launches })
}

/// One launch per output, each copying its axis range of the input.
pub fn lower_split(axis: u32, request: &LowerRequest) -> Result<Lowering> {
    let axis = axis as usize;
    let input = request.inputs[0];
    let (_, inner) = outer_inner(&input.shape, axis);
    let total = input.shape[axis];
    let mut offset = 0u32;
    let mut launches = Vec::with_capacity(request.outputs.len());
    for (k, out) in request.outputs.iter().enumerate() {
        let size = out.shape[axis];
        let body = format!(
            "    let a = (i / {inner}u) % {size}u;\n    let o = i / {}u;\n    let r = i % {inner}u;\n    return bits_input((o * {total}u + {offset}u + a) * {inner}u + r);",
            inner * size as u64
        );
        launches.push(
            MoveKernel {
                sources: vec![Source { name: "input", buffer: BufRef::Input(0), descriptor: input }],
                output: BufRef::Output(k),
                output_descriptor: out,
                helpers: String::new(),
                body,
            }
            .build()?,
        );
        offset += size;
    }
    Ok(Lowering::Kernels { scratch: Vec::new(), launches })
}

/// Each output row `o` (the dimensions before the axis) is the inputs' rows one after another.
pub fn reference_concat(axis: u32, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
    let out = &outputs[0];
    let axis = axis as usize;
    let (outer, _) = outer_inner(&out.shape, axis);
    let mut data = Vec::with_capacity(out.element_count() as usize);
    for o in 0..outer as usize {
        for input in inputs {
            let (_, inner) = outer_inner(input.shape(), axis);
            let row = input.shape()[axis] as usize * inner as usize;
            data.extend_from_slice(&input.data[o * row..(o + 1) * row]);
        }
    }
    Ok(vec![HostTensor::new(out.clone(), data)?])
}

/// Output `k` takes, from each input row, the axis range after the sizes of outputs `0..k`.
pub fn reference_split(axis: u32, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
    let input = &inputs[0];
    let axis = axis as usize;
    let (outer, inner) = outer_inner(input.shape(), axis);
    let (outer, inner) = (outer as usize, inner as usize);
    let row = input.shape()[axis] as usize * inner;
    let mut offset = 0usize;
    let mut result = Vec::with_capacity(outputs.len());
    for out in outputs {
        let len = out.shape[axis] as usize * inner;
        let mut data = Vec::with_capacity(out.element_count() as usize);
        for o in 0..outer {
            data.extend_from_slice(&input.data[o * row + offset..o * row + offset + len]);
        }
        offset += len;
        result.push(HostTensor::new(out.clone(), data)?);
    }
    Ok(result)
}

/// The registry's entry for this file's operators (see [`OpFamily`]).
pub struct Family;

impl OpFamily for Family {
    fn limits(&self) -> Vec<OpLimits> {
        limits()
    }

    fn from_options(&self, name: &str, p: &dyn MethodOptions) -> Result<Op> {
        Ok(match name {
            "concat" => Op::Concat { axis: p.u32("axis")? },
            "split" => {
                let splits = match p.opt_u32s("splits") {
                    Ok(Some(sizes)) => Splits::Sizes(sizes),
                    _ => Splits::Count(p.u32("splits")?),
                };
                Op::Split { splits, axis: p.u32("axis")? }
            }
            other => return Err(crate::ops::unknown_method(other)),
        })
    }

    fn name(&self, op: &Op) -> &'static str {
        match op {
            Op::Concat { .. } => "concat",
            Op::Split { .. } => "split",
            _ => "",
        }
    }

    fn input_count(&self, op: &Op) -> RangeInclusive<usize> {
        match op {
            Op::Concat { .. } => 1..=usize::MAX,
            _ => 1..=1,
        }
    }

    fn validate(&self, op: &Op, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
        match op {
            Op::Concat { axis } => validate_concat(*axis, inputs),
            Op::Split { splits, axis } => validate_split(splits, *axis, inputs),
            _ => Err(not_this_family(op)),
        }
    }

    fn lower(&self, op: &Op, request: &LowerRequest) -> Result<Lowering> {
        match op {
            Op::Concat { axis } => lower_concat(*axis, request),
            Op::Split { axis, .. } => lower_split(*axis, request),
            _ => Err(not_this_family(op)),
        }
    }

    fn reference(&self, op: &Op, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
        match op {
            Op::Concat { axis } => reference_concat(*axis, inputs, outputs),
            Op::Split { axis, .. } => reference_split(*axis, inputs, outputs),
            _ => Err(not_this_family(op)),
        }
    }

    fn moves_input(&self, op: &Op, _index: usize) -> bool {
        match op {
            Op::Concat { .. } | Op::Split { .. } => true,
            _ => false,
        }
    }
}
