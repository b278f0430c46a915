//! gather: takes the input's slices along an axis at the given indices.
//!
//! Seen with the axis as the middle of `[outer, N, inner]`, output element
//! `(o, j, r)` (`j` the linear position in `indices`) is input element `(o, indices[j], r)`.
//! Indices are clamped to `-N ..= N-1` (the spec's note: implementations clamp, as the values are
//! only known at dispatch), and a negative index counts from the end of the dimension.

use crate::error::{Error, Result};
use crate::graph::operand::MAX_RANK;
use crate::graph::{DataType, OperandDescriptor};
use crate::ops::limits::{self, OpLimits, INDICES, SUPPORTED};
use crate::ops::movement::{outer_inner, MoveKernel, Source};
use crate::ops::reference::HostTensor;
use crate::ops::wgsl::{BufRef, LowerContext, Lowering};

pub fn limits() -> Vec<OpLimits> {
    vec![OpLimits {
        name: "gather",
        operands: vec![
            limits::tensor("input", SUPPORTED, 1, MAX_RANK as u32),
            limits::tensor("indices", INDICES, 0, MAX_RANK as u32),
            // A scalar index into a 1-D input gives a scalar.
            limits::tensor("output", SUPPORTED, 0, MAX_RANK as u32),
        ],
    }]
}

pub fn validate(axis: u32, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
    let l = limits::of("gather")?;
    let (input, indices) = (inputs[0], inputs[1]);
    limits::check(&l.operands[0], input)?;
    limits::check(&l.operands[1], indices)?;
    let axis = axis as usize;
    if axis >= input.rank() {
        return Err(Error::Type(format!("gather: axis {axis} is out of range for input of rank {}", input.rank())));
    }
    let mut shape = input.shape[..axis].to_vec();
    shape.extend_from_slice(&indices.shape);
    shape.extend_from_slice(&input.shape[axis + 1..]);
    if shape.len() > MAX_RANK {
        return Err(Error::Type(format!(
            "gather: the output rank {} is larger than the supported maximum of {MAX_RANK}",
            shape.len()
        )));
    }
    Ok(vec![OperandDescriptor::new(input.data_type, shape)])
}

/// The input position an index value selects along an axis of size `n`.
fn position(index: f64, n: u32) -> usize {
    let clamped = index.clamp(-(n as f64), n as f64 - 1.0);
    (if clamped < 0.0 { clamped + n as f64 } else { clamped }) as usize
}

pub fn lower(axis: u32, cx: &LowerContext) -> Result<Lowering> {
    let (input, indices, out) = (cx.inputs[0], cx.inputs[1], cx.outputs[0]);
    let axis = axis as usize;
    let (_, inner) = outer_inner(&input.shape, axis);
    let n = input.shape[axis];
    let count = indices.element_count();
    let position = match indices.data_type {
        DataType::Int32 => {
            format!("    let v = clamp(bitcast<i32>(bits_indices(j)), -{n}, {});\n    let p = u32(select(v, v + {n}, v < 0));\n", n - 1)
        }
        _ => format!("    let p = min(bits_indices(j), {}u);\n", n - 1),
    };
    let body = format!(
        "    let r = i % {inner}u;\n    let j = (i / {inner}u) % {count}u;\n    let o = i / {}u;\n{position}    return bits_input((o * {n}u + p) * {inner}u + r);",
        inner * count
    );
    let launch = MoveKernel {
        sources: vec![
            Source { name: "input", buffer: BufRef::Input(0), descriptor: input },
            Source { name: "indices", buffer: BufRef::Input(1), descriptor: indices },
        ],
        output: BufRef::Output(0),
        output_descriptor: out,
        helpers: String::new(),
        body,
    }
    .build()?;
    Ok(Lowering::single(launch))
}

pub fn reference(axis: u32, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
    let (input, indices) = (&inputs[0], &inputs[1]);
    let axis = axis as usize;
    let (outer, inner) = outer_inner(input.shape(), axis);
    let (outer, inner) = (outer as usize, inner as usize);
    let n = input.shape()[axis];
    let mut data = Vec::with_capacity(outputs[0].element_count() as usize);
    for o in 0..outer {
        for &index in &indices.data {
            let start = (o * n as usize + position(index, n)) * inner;
            data.extend_from_slice(&input.data[start..start + inner]);
        }
    }
    Ok(vec![HostTensor::new(outputs[0].clone(), data)?])
}
