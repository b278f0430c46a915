//! scatterElements and scatterND: a copy of the input with elements replaced by `updates` at
//! positions given by an indices tensor.
//!
//! - scatterElements: update `c` (a position in `indices`, which `updates` shares) goes to output
//!   element `c` with `c[axis]` replaced by `indices[c]`.
//! - scatterND: each row `j` of `indices` (its last dimension) is the leading coordinates of an
//!   output slice; update `(j, r)` goes to element `r` of that slice.
//!
//! Index values are clamped and wrapped as gather does (see [`crate::ops::gather`]). When several
//! updates target one element the spec names no winner; here the last of them in row-major order
//! of `updates` wins, on the GPU as in the reference, so results are deterministic.
//!
//! GPU: three launches. A scratch word per output element is cleared, then every update claims
//! its target with `atomicMax(winner, update index + 1)`, then every output word is written by a
//! copy kernel taking each element from its winning update, or from the input where none won.
//! Packed types (float16, int8, uint8) never see two writers of a word that way.

use crate::error::{Error, Result};
use crate::operand::MAX_RANK;
use crate::operand::{DataType, OperandDescriptor};
use crate::ops::gather::{
    check_elements_indices, elements_offset, elements_target, nd_base, nd_slice_start, nd_slices_shape, position,
    position_fn,
};
use crate::ops::limits::{self, OpLimits, INDICES, ALL_TYPES};
use crate::ops::movement::{bits_fn, MoveKernel, Source};
use crate::ops::reference::{coords, HostTensor};
use crate::ops::wgsl::{coords_fn, BufRef, Launch, LowerRequest, Lowering, WORKGROUP_SIZE};
use crate::ops::{not_this_family, MethodOptions, Op, OpFamily};
use std::ops::RangeInclusive;

pub fn limits() -> Vec<OpLimits> {
    let max = MAX_RANK as u32;
    vec![
        OpLimits {
            name: "scatterElements",
            operands: vec![
                limits::tensor("input", ALL_TYPES, 1, max),
                limits::tensor("indices", INDICES, 1, max),
                limits::tensor("updates", ALL_TYPES, 1, max),
                limits::tensor("output", ALL_TYPES, 1, max),
            ],
        },
        OpLimits {
            name: "scatterND",
            operands: vec![
                limits::tensor("input", ALL_TYPES, 1, max),
                limits::tensor("indices", INDICES, 1, max),
                limits::tensor("updates", ALL_TYPES, 0, max),
                limits::tensor("output", ALL_TYPES, 1, max),
            ],
        },
    ]
}

/// The checks both operators start with: operand limits and `updates` typed as `input`.
fn check_operands(name: &str, inputs: &[&OperandDescriptor]) -> Result<()> {
    let l = limits::of(name)?;
    let (input, indices, updates) = (inputs[0], inputs[1], inputs[2]);
    limits::check(&l.operands[1], indices)?;
    if updates.data_type != input.data_type {
        return Err(Error::Type(format!(
            "updates is {} but input is {}: the data types must match",
            updates.data_type, input.data_type
        )));
    }
    limits::check(&l.operands[0], input)?;
    limits::check(&l.operands[2], updates)?;
    Ok(())
}

pub fn validate_elements(axis: u32, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
    check_operands("scatterElements", inputs)?;
    let (input, indices, updates) = (inputs[0], inputs[1], inputs[2]);
    check_elements_indices(axis, input, indices)?;
    if updates.shape != indices.shape {
        return Err(Error::Type(format!(
            "updates shape {:?} must equal the indices shape {:?}",
            updates.shape, indices.shape
        )));
    }
    Ok(vec![input.clone()])
}

pub fn validate_nd(inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
    check_operands("scatterND", inputs)?;
    let (input, indices, updates) = (inputs[0], inputs[1], inputs[2]);
    let expected = nd_slices_shape(input, indices)?;
    if updates.shape != expected {
        return Err(Error::Type(format!(
            "updates shape {:?} must be {expected:?} (indices' leading dimensions, then the input's after the coordinates)",
            updates.shape
        )));
    }
    Ok(vec![input.clone()])
}

/// The three launches; `dest` is WGSL computing `dest`, the output offset of update `i`.
fn lower_with_dest(request: &LowerRequest, helpers: String, dest: String) -> Result<Lowering> {
    let (input, updates, out) = (request.inputs[0], request.inputs[2], request.outputs[0]);
    let count = out.element_count();
    let main = |limit: u64, body: &str| {
        format!(
            "@compute @workgroup_size({WORKGROUP_SIZE})\nfn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{\n    let i = gid.x + gid.y * nwg.x * {WORKGROUP_SIZE}u;\n    if (i >= {limit}u) {{ return; }}\n{body}\n}}\n"
        )
    };
    let clear = Launch {
        source: format!(
            "@group(0) @binding(0) var<storage, read_write> winner: array<u32>;\n{}",
            main(count, "    winner[i] = 0u;")
        ),
        reads: vec![],
        writes: vec![BufRef::Scratch(0)],
        invocations: count,
        workgroup_size: WORKGROUP_SIZE,
    };
    let update_count = updates.element_count();
    let claim = Launch {
        source: format!(
            "@group(0) @binding(0) var<storage, read> indices: array<u32>;\n@group(0) @binding(1) var<storage, read_write> winner: array<atomic<u32>>;\n{}{helpers}{}",
            bits_fn("indices", request.inputs[1].data_type),
            main(update_count, &format!("{dest}    atomicMax(&winner[dest], i + 1u);"))
        ),
        reads: vec![BufRef::Input(1)],
        writes: vec![BufRef::Scratch(0)],
        invocations: update_count,
        workgroup_size: WORKGROUP_SIZE,
    };
    let winners = OperandDescriptor::new(DataType::Uint32, vec![count as u32]);
    let copy = MoveKernel {
        sources: vec![
            Source { name: "input", buffer: BufRef::Input(0), descriptor: input },
            Source { name: "updates", buffer: BufRef::Input(2), descriptor: updates },
            Source { name: "winner", buffer: BufRef::Scratch(0), descriptor: &winners },
        ],
        output: BufRef::Output(0),
        output_descriptor: out,
        helpers: String::new(),
        body:
            "    let w = bits_winner(i);\n    if (w == 0u) { return bits_input(i); }\n    return bits_updates(w - 1u);"
                .into(),
    }
    .build()?;
    Ok(Lowering::Kernels { scratch: vec![count * 4], launches: vec![clear, claim, copy] })
}

pub fn lower_elements(axis: u32, request: &LowerRequest) -> Result<Lowering> {
    let (input, indices) = (request.inputs[0], request.inputs[1]);
    let axis = axis as usize;
    let helpers = coords_fn("updates", &indices.shape) + &position_fn(indices.data_type);
    let dest = format!(
        "    let c = coords_updates(i);\n    let p = position(bits_indices(i), {}u);\n    let dest = {};\n",
        input.shape[axis],
        elements_offset(&input.shape, axis)
    );
    lower_with_dest(request, helpers, dest)
}

pub fn lower_nd(request: &LowerRequest) -> Result<Lowering> {
    let (input, indices) = (request.inputs[0], request.inputs[1]);
    let k = indices.shape[indices.rank() - 1] as usize;
    let inner: u64 = input.shape[k..].iter().map(|&d| d as u64).product();
    let dest = format!(
        "    let j = i / {inner}u;\n    let r = i % {inner}u;\n{}    let dest = base + r;\n",
        nd_base(&input.shape, k)
    );
    lower_with_dest(request, position_fn(indices.data_type), dest)
}

/// Applies the updates to a copy of the input one by one in row-major order (the last wins).
pub fn reference_elements(axis: u32, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
    let (input, indices, updates) = (&inputs[0], &inputs[1], &inputs[2]);
    let axis = axis as usize;
    let n = input.shape()[axis];
    let mut data = input.data.clone();
    for (u, &value) in updates.data.iter().enumerate() {
        let c = coords(u, indices.shape());
        data[elements_target(input.shape(), &c, axis, position(indices.data[u], n))] = value;
    }
    Ok(vec![HostTensor::new(outputs[0].clone(), data)?])
}

/// Writes the slice of each indices row, in order (the last wins).
pub fn reference_nd(inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
    let (input, indices, updates) = (&inputs[0], &inputs[1], &inputs[2]);
    let k = *indices.shape().last().unwrap_or(&0) as usize;
    let inner: usize = input.shape()[k..].iter().map(|&d| d as usize).product();
    let mut data = input.data.clone();
    for (j, slice) in updates.data.chunks(inner).enumerate() {
        let start = nd_slice_start(input.shape(), &indices.data, j, k);
        data[start..start + inner].copy_from_slice(slice);
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
            "scatterElements" => Op::ScatterElements { axis: p.u32("axis")? },
            "scatterND" => Op::ScatterNd,
            other => return Err(crate::ops::unknown_method(other)),
        })
    }

    fn name(&self, op: &Op) -> &'static str {
        match op {
            Op::ScatterElements { .. } => "scatterElements",
            Op::ScatterNd => "scatterND",
            _ => "",
        }
    }

    fn input_count(&self, op: &Op) -> RangeInclusive<usize> {
        match op {
            Op::ScatterElements { .. } | Op::ScatterNd => 3..=3,
            _ => 1..=1,
        }
    }

    fn validate(&self, op: &Op, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
        match op {
            Op::ScatterElements { axis } => validate_elements(*axis, inputs),
            Op::ScatterNd => validate_nd(inputs),
            _ => Err(not_this_family(op)),
        }
    }

    fn lower(&self, op: &Op, request: &LowerRequest) -> Result<Lowering> {
        match op {
            Op::ScatterElements { axis } => lower_elements(*axis, request),
            Op::ScatterNd => lower_nd(request),
            _ => Err(not_this_family(op)),
        }
    }

    fn reference(&self, op: &Op, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
        match op {
            Op::ScatterElements { axis } => reference_elements(*axis, inputs, outputs),
            Op::ScatterNd => reference_nd(inputs, outputs),
            _ => Err(not_this_family(op)),
        }
    }

    fn moves_input(&self, op: &Op, index: usize) -> bool {
        match op {
            Op::ScatterElements { .. } | Op::ScatterNd => index == 0 || index == 2,
            _ => false,
        }
    }
}
