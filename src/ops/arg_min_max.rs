//! argMin and argMax: the position of the smallest or largest value along one axis.
//!
//! Seen with the axis as the middle of `[outer, N, inner]`, one invocation scans one row
//! `(o, ·, r)` and keeps the first position whose value is strictly smaller (argMin) or larger
//! (argMax) than every earlier one, so ties give the first index (the spec leaves ties to the
//! implementation). A NaN never replaces the current best. int64 outputs are written as two
//! 32-bit words per element, the high word zero (positions are below 2^31).

use crate::error::{Error, Result};
use crate::operand::MAX_RANK;
use crate::operand::{DataType, OperandDescriptor};
use crate::ops::limits::{self, OpLimits, SUPPORTED};
use crate::ops::movement::outer_inner;
use crate::ops::reference::HostTensor;
use crate::ops::wgsl::{binding, load_fn, BufRef, Launch, LowerRequest, Lowering, F16_HELPERS, WORKGROUP_SIZE};
use crate::ops::{not_this_family, MethodOptions, Op, OpFamily};

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ArgKind {
    Min,
    Max,
}

impl ArgKind {
    pub fn name(self) -> &'static str {
        match self {
            ArgKind::Min => "argMin",
            ArgKind::Max => "argMax",
        }
    }
}

/// `argMin`/`argMax`'s `axis` and `MLArgMinMaxOptions`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ArgMinMaxOptions {
    pub axis: u32,
    pub keep_dimensions: bool,
    pub output_data_type: DataType,
}

impl Default for ArgMinMaxOptions {
    fn default() -> Self {
        ArgMinMaxOptions { axis: 0, keep_dimensions: false, output_data_type: DataType::Int32 }
    }
}

/// The spec's allowed output types.
const OUTPUT_TYPES: &[DataType] = &[DataType::Int32, DataType::Int64];

pub fn limits() -> Vec<OpLimits> {
    [ArgKind::Min, ArgKind::Max]
        .iter()
        .map(|kind| OpLimits {
            name: kind.name(),
            operands: vec![
                limits::tensor("input", SUPPORTED, 1, MAX_RANK as u32),
                limits::tensor("output", OUTPUT_TYPES, 0, MAX_RANK as u32),
            ],
        })
        .collect()
}

pub fn validate(kind: ArgKind, o: &ArgMinMaxOptions, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
    let l = limits::of(kind.name())?;
    let input = inputs[0];
    limits::check(&l.operands[0], input)?;
    let axis = o.axis as usize;
    if axis >= input.rank() {
        return Err(Error::Type(format!("axis {axis} is out of range for input of rank {}", input.rank())));
    }
    if !OUTPUT_TYPES.contains(&o.output_data_type) {
        return Err(Error::Type(format!("outputDataType {} must be int32 or int64", o.output_data_type)));
    }
    let max = if o.output_data_type == DataType::Int32 { i32::MAX as u64 } else { i64::MAX as u64 };
    if input.shape[axis] as u64 > max {
        return Err(Error::Type(format!(
            "the axis dimension {} exceeds the range of {}",
            input.shape[axis], o.output_data_type
        )));
    }
    let mut shape = input.shape.clone();
    if o.keep_dimensions {
        shape[axis] = 1;
    } else {
        shape.remove(axis);
    }
    Ok(vec![OperandDescriptor::new(o.output_data_type, shape)])
}

pub fn lower(kind: ArgKind, o: &ArgMinMaxOptions, request: &LowerRequest) -> Result<Lowering> {
    let input = request.inputs[0];
    let axis = o.axis as usize;
    let (outer, inner) = outer_inner(&input.shape, axis);
    let n = input.shape[axis];
    let rows = outer * inner;
    let better = match kind {
        ArgKind::Min => "v < best",
        ArgKind::Max => "v > best",
    };
    let store = match o.output_data_type {
        DataType::Int64 => "out[2u * t] = best_index;\n    out[2u * t + 1u] = 0u;",
        _ => "out[t] = best_index;",
    };
    let source = format!(
        "{F16_HELPERS}{}{}@group(0) @binding(1) var<storage, read_write> out: array<u32>;\n@compute @workgroup_size({WORKGROUP_SIZE})\nfn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{\n    let t = gid.x + gid.y * nwg.x * {WORKGROUP_SIZE}u;\n    if (t >= {rows}u) {{ return; }}\n    let base = (t / {inner}u) * {}u + t % {inner}u;\n    var best = load_input(base);\n    var best_index = 0u;\n    for (var k = 1u; k < {n}u; k++) {{\n        let v = load_input(base + k * {inner}u);\n        if ({better}) {{ best = v; best_index = k; }}\n    }}\n    {store}\n}}\n",
        binding(0, "input", input.data_type, false),
        load_fn("input", input.data_type)?,
        n as u64 * inner,
    );
    Ok(Lowering::single(Launch {
        source,
        reads: vec![BufRef::Input(0)],
        writes: vec![BufRef::Output(0)],
        invocations: rows,
        workgroup_size: WORKGROUP_SIZE,
    }))
}

pub fn reference(
    kind: ArgKind,
    o: &ArgMinMaxOptions,
    inputs: &[HostTensor],
    outputs: &[OperandDescriptor],
) -> Result<Vec<HostTensor>> {
    let input = &inputs[0];
    let axis = o.axis as usize;
    let (outer, inner) = outer_inner(input.shape(), axis);
    let (outer, inner) = (outer as usize, inner as usize);
    let n = input.shape()[axis] as usize;
    let data = (0..outer * inner)
        .map(|row| {
            let base = (row / inner) * n * inner + row % inner;
            let mut best = input.data[base];
            let mut best_index = 0;
            for k in 1..n {
                let v = input.data[base + k * inner];
                let better = match kind {
                    ArgKind::Min => v < best,
                    ArgKind::Max => v > best,
                };
                if better {
                    best = v;
                    best_index = k;
                }
            }
            best_index as f64
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
            "argMin" | "argMax" => Op::ArgMinMax(
                if name == "argMin" { ArgKind::Min } else { ArgKind::Max },
                ArgMinMaxOptions {
                    axis: p.u32("axis")?,
                    keep_dimensions: p.bool("keepDimensions")?,
                    output_data_type: p.data_type("outputDataType")?,
                },
            ),
            other => return Err(crate::ops::unknown_method(other)),
        })
    }

    fn name(&self, op: &Op) -> &'static str {
        match op {
            Op::ArgMinMax(kind, _) => kind.name(),
            _ => "",
        }
    }

    fn validate(&self, op: &Op, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
        match op {
            Op::ArgMinMax(kind, o) => validate(*kind, o, inputs),
            _ => Err(not_this_family(op)),
        }
    }

    fn lower(&self, op: &Op, request: &LowerRequest) -> Result<Lowering> {
        match op {
            Op::ArgMinMax(kind, o) => lower(*kind, o, request),
            _ => Err(not_this_family(op)),
        }
    }

    fn reference(&self, op: &Op, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
        match op {
            Op::ArgMinMax(kind, o) => reference(*kind, o, inputs, outputs),
            _ => Err(not_this_family(op)),
        }
    }
}
