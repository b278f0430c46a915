//! gather, gatherElements and gatherND: copies of input elements selected by an indices tensor.
//!
//! - gather: seen with the axis as the middle of `[outer, N, inner]`, output element `(o, j, r)`
//!   (`j` the linear position in `indices`) is input element `(o, indices[j], r)`.
//! - gatherElements: output element `c` (a position in `indices`) is input element `c` with
//!   `c[axis]` replaced by `indices[c]`.
//! - gatherND: each row of `indices` (its last dimension) is the leading coordinates of an input
//!   slice; output element `(j, r)` is element `r` of the slice of row `j`.
//!
//! Index values must lie in `-N .. N`; a negative one counts from the end of the dimension. Values
//! are only known at dispatch, so out-of-range ones are clamped to `-N ..= N-1` (the spec's note:
//! implementations clamp) instead of reading out of bounds.

use crate::error::{Error, Result};
use crate::operand::MAX_RANK;
use crate::operand::{DataType, OperandDescriptor};
use crate::ops::limits::{self, OpLimits, INDICES, ALL_TYPES};
use crate::ops::movement::{outer_inner, MoveKernel, Source};
use crate::operand::strides;
use crate::ops::reference::{coords, HostTensor};
use crate::ops::wgsl::{coords_fn, BufRef, LowerRequest, Lowering};
use crate::ops::{not_this_family, MethodOptions, Op, OpFamily};
use std::ops::RangeInclusive;

pub fn limits() -> Vec<OpLimits> {
    let max = MAX_RANK as u32;
    vec![
        OpLimits {
            name: "gather",
            operands: vec![
                limits::tensor("input", ALL_TYPES, 1, max),
                limits::tensor("indices", INDICES, 0, max),
                // A scalar index into a 1-D input gives a scalar.
                limits::tensor("output", ALL_TYPES, 0, max),
            ],
        },
        OpLimits {
            name: "gatherElements",
            operands: vec![
                limits::tensor("input", ALL_TYPES, 1, max),
                limits::tensor("indices", INDICES, 1, max),
                limits::tensor("output", ALL_TYPES, 1, max),
            ],
        },
        OpLimits {
            name: "gatherND",
            operands: vec![
                limits::tensor("input", ALL_TYPES, 1, max),
                limits::tensor("indices", INDICES, 1, max),
                limits::tensor("output", ALL_TYPES, 0, max),
            ],
        },
    ]
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
pub fn position(index: f64, n: u32) -> usize {
    let clamped = index.clamp(-(n as f64), n as f64 - 1.0);
    (if clamped < 0.0 { clamped + n as f64 } else { clamped }) as usize
}

pub fn lower(axis: u32, request: &LowerRequest) -> Result<Lowering> {
    let (input, indices, out) = (request.inputs[0], request.inputs[1], request.outputs[0]);
    let axis = axis as usize;
    let (_, inner) = outer_inner(&input.shape, axis);
    let n = input.shape[axis];
    let count = indices.element_count();
    let body = format!(
        "    let r = i % {inner}u;\n    let j = (i / {inner}u) % {count}u;\n    let o = i / {}u;\n    let p = position(bits_indices(j), {n}u);\n    return bits_input((o * {n}u + p) * {inner}u + r);",
        inner * count
    );
    let launch = MoveKernel {
        sources: vec![
            Source { name: "input", buffer: BufRef::Input(0), descriptor: input },
            Source { name: "indices", buffer: BufRef::Input(1), descriptor: indices },
        ],
        output: BufRef::Output(0),
        output_descriptor: out,
        helpers: position_fn(indices.data_type),
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

/// WGSL `fn position(bits: u32, n: u32) -> u32`: the position the raw bits of an index of
/// `indices_type` (`vec2<u32>` for int64) select along a dimension of size `n`, clamped as
/// [`position`] does.
pub fn position_fn(indices_type: DataType) -> String {
    match indices_type {
        DataType::Int32 => "fn position(bits: u32, n: u32) -> u32 {\n    let v = clamp(bitcast<i32>(bits), -i32(n), i32(n) - 1);\n    return u32(select(v, v + i32(n), v < 0));\n}\n",
        // Beyond the i32 range the index clamps to an end; within it, as int32.
        DataType::Int64 => "fn position(bits: vec2<u32>, n: u32) -> u32 {\n    if (bits.y != select(0u, 0xffffffffu, (bits.x & 0x80000000u) != 0u)) {\n        return select(n - 1u, 0u, (bits.y & 0x80000000u) != 0u);\n    }\n    let v = clamp(bitcast<i32>(bits.x), -i32(n), i32(n) - 1);\n    return u32(select(v, v + i32(n), v < 0));\n}\n",
        _ => "fn position(bits: u32, n: u32) -> u32 { return min(bits, n - 1u); }\n",
    }
    .to_string()
}

/// The steps shared by gatherElements and scatterElements: `indices` has the rank of `input` and
/// its shape equals the input's except along `axis`.
pub fn check_elements_indices(axis: u32, input: &OperandDescriptor, indices: &OperandDescriptor) -> Result<usize> {
    let axis = axis as usize;
    if axis >= input.rank() {
        return Err(Error::Type(format!("axis {axis} is out of range for input of rank {}", input.rank())));
    }
    let mut expected = input.shape.clone();
    if let (Some(e), Some(&d)) = (expected.get_mut(axis), indices.shape.get(axis)) {
        *e = d;
    }
    if indices.shape != expected {
        return Err(Error::Type(format!(
            "indices shape {:?} must equal the input shape {:?} except along axis {axis}",
            indices.shape, input.shape
        )));
    }
    Ok(axis)
}

pub fn validate_elements(axis: u32, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
    let l = limits::of("gatherElements")?;
    let (input, indices) = (inputs[0], inputs[1]);
    limits::check(&l.operands[0], input)?;
    limits::check(&l.operands[1], indices)?;
    check_elements_indices(axis, input, indices)?;
    // The spec's steps copy the input's descriptor, but its examples (and every backend) give the
    // output the shape of `indices`, which the steps allow to differ along the axis.
    Ok(vec![OperandDescriptor::new(input.data_type, indices.shape.clone())])
}

/// The spec's gatherND/scatterND shape step: `indices.shape[..q-1] ++ input.shape[k..]` where
/// `k = indices.shape[q-1]` is the coordinate size.
pub fn nd_slices_shape(input: &OperandDescriptor, indices: &OperandDescriptor) -> Result<Vec<u32>> {
    let Some((&coordinate_size, leading)) = indices.shape.split_last() else {
        return Err(Error::Type("indices must have rank 1 or more".into()));
    };
    if coordinate_size as usize > input.rank() {
        return Err(Error::Type(format!(
            "indices' last dimension {coordinate_size} is larger than the input rank {}",
            input.rank()
        )));
    }
    let mut shape = leading.to_vec();
    shape.extend_from_slice(&input.shape[coordinate_size as usize..]);
    Ok(shape)
}

pub fn validate_nd(inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
    let l = limits::of("gatherND")?;
    let (input, indices) = (inputs[0], inputs[1]);
    limits::check(&l.operands[0], input)?;
    limits::check(&l.operands[1], indices)?;
    let shape = nd_slices_shape(input, indices)?;
    if shape.len() > MAX_RANK {
        return Err(Error::Type(format!(
            "the output rank {} is larger than the supported maximum of {MAX_RANK}",
            shape.len()
        )));
    }
    Ok(vec![OperandDescriptor::new(input.data_type, shape)])
}

/// WGSL offset of an element of `shape` at coordinates `c` (of the same rank) with `c[axis]`
/// replaced by the position `p`.
pub fn elements_offset(shape: &[u32], axis: usize) -> String {
    let s = strides(shape);
    let mut terms = vec![format!("p * {}u", s[axis])];
    for (k, &stride) in s.iter().enumerate() {
        if k != axis && shape[k] != 1 {
            terms.push(format!("c[{k}] * {stride}u"));
        }
    }
    terms.join(" + ")
}

pub fn lower_elements(axis: u32, request: &LowerRequest) -> Result<Lowering> {
    let (input, indices, out) = (request.inputs[0], request.inputs[1], request.outputs[0]);
    let axis = axis as usize;
    let body = format!(
        "    let c = coords_out(i);\n    let p = position(bits_indices(i), {}u);\n    return bits_input({});",
        input.shape[axis],
        elements_offset(&input.shape, axis)
    );
    let launch = MoveKernel {
        sources: vec![
            Source { name: "input", buffer: BufRef::Input(0), descriptor: input },
            Source { name: "indices", buffer: BufRef::Input(1), descriptor: indices },
        ],
        output: BufRef::Output(0),
        output_descriptor: out,
        helpers: coords_fn("out", &out.shape) + &position_fn(indices.data_type),
        body,
    }
    .build()?;
    Ok(Lowering::single(launch))
}

/// WGSL statements computing `base`, the offset in `shape` of the slice that row `j` of the
/// indices (`k` coordinates each) selects.
pub fn nd_base(shape: &[u32], k: usize) -> String {
    let s = strides(shape);
    let mut code = "    var base = 0u;\n".to_string();
    for d in 0..k {
        code += &format!("    base += position(bits_indices(j * {k}u + {d}u), {}u) * {}u;\n", shape[d], s[d]);
    }
    code
}

pub fn lower_nd(request: &LowerRequest) -> Result<Lowering> {
    let (input, indices, out) = (request.inputs[0], request.inputs[1], request.outputs[0]);
    let k = indices.shape[indices.rank() - 1] as usize;
    let inner: u64 = input.shape[k..].iter().map(|&d| d as u64).product();
    let body = format!(
        "    let j = i / {inner}u;\n    let r = i % {inner}u;\n{}    return bits_input(base + r);",
        nd_base(&input.shape, k)
    );
    let launch = MoveKernel {
        sources: vec![
            Source { name: "input", buffer: BufRef::Input(0), descriptor: input },
            Source { name: "indices", buffer: BufRef::Input(1), descriptor: indices },
        ],
        output: BufRef::Output(0),
        output_descriptor: out,
        helpers: position_fn(indices.data_type),
        body,
    }
    .build()?;
    Ok(Lowering::single(launch))
}

/// The linear offset in `shape` of coordinates `c` with `c[axis]` replaced by `position`.
pub fn elements_target(shape: &[u32], c: &[usize], axis: usize, position: usize) -> usize {
    let mut c = c.to_vec();
    c[axis] = position;
    crate::ops::reference::linear(&c, shape)
}

/// `output[c] = input[c with c[axis] = indices[c]]`.
pub fn reference_elements(axis: u32, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
    let (input, indices) = (&inputs[0], &inputs[1]);
    let axis = axis as usize;
    let n = input.shape()[axis];
    let data = (0..indices.data.len())
        .map(|i| {
            let c = coords(i, indices.shape());
            input.data[elements_target(input.shape(), &c, axis, position(indices.data[i], n))]
        })
        .collect();
    Ok(vec![HostTensor::new(outputs[0].clone(), data)?])
}

/// The offset in `shape` of the slice selected by the `k` coordinates of indices row `j`.
pub fn nd_slice_start(shape: &[u32], indices: &[f64], j: usize, k: usize) -> usize {
    let s = strides(shape);
    (0..k).map(|d| position(indices[j * k + d], shape[d]) * s[d] as usize).sum()
}

/// Output row `j` is the input slice that indices row `j` selects.
pub fn reference_nd(inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
    let (input, indices) = (&inputs[0], &inputs[1]);
    let k = *indices.shape().last().unwrap_or(&0) as usize;
    let inner: usize = input.shape()[k..].iter().map(|&d| d as usize).product();
    let rows = indices.data.len() / k.max(1);
    let mut data = Vec::with_capacity(rows * inner);
    for j in 0..rows {
        let start = nd_slice_start(input.shape(), &indices.data, j, k);
        data.extend_from_slice(&input.data[start..start + inner]);
    }
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
            "gather" => Op::Gather { axis: p.u32("axis")? },
            "gatherElements" => Op::GatherElements { axis: p.u32("axis")? },
            "gatherND" => Op::GatherNd,
            other => return Err(crate::ops::unknown_method(other)),
        })
    }

    fn name(&self, op: &Op) -> &'static str {
        match op {
            Op::Gather { .. } => "gather",
            Op::GatherElements { .. } => "gatherElements",
            Op::GatherNd => "gatherND",
            _ => "",
        }
    }

    fn input_count(&self, op: &Op) -> RangeInclusive<usize> {
        match op {
            Op::Gather { .. } => 2..=2,
            Op::GatherElements { .. } | Op::GatherNd => 2..=2,
            _ => 1..=1,
        }
    }

    fn validate(&self, op: &Op, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
        match op {
            Op::Gather { axis } => validate(*axis, inputs),
            Op::GatherElements { axis } => validate_elements(*axis, inputs),
            Op::GatherNd => validate_nd(inputs),
            _ => Err(not_this_family(op)),
        }
    }

    fn lower(&self, op: &Op, request: &LowerRequest) -> Result<Lowering> {
        match op {
            Op::Gather { axis } => lower(*axis, request),
            Op::GatherElements { axis } => lower_elements(*axis, request),
            Op::GatherNd => lower_nd(request),
            _ => Err(not_this_family(op)),
        }
    }

    fn reference(&self, op: &Op, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
        match op {
            Op::Gather { axis } => reference(*axis, inputs, outputs),
            Op::GatherElements { axis } => reference_elements(*axis, inputs, outputs),
            Op::GatherNd => reference_nd(inputs, outputs),
            _ => Err(not_this_family(op)),
        }
    }

    fn moves_input(&self, op: &Op, index: usize) -> bool {
        match op {
            Op::Gather { .. } | Op::GatherElements { .. } | Op::GatherNd => index == 0,
            _ => false,
        }
    }
}
