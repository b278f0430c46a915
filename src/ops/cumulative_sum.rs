//! cumulativeSum: running sums along one axis, inclusive or exclusive, forward or reversed.
//!
//! Seen with the axis as the middle of `[outer, N, inner]`, one invocation scans one row
//! `(o, ·, r)` in order, accumulating in f32 (float types) or wrapping 32-bit integers. float16
//! sums go to an f32 scratch buffer first and are then rounded and packed by an element-wise
//! pass, so no two invocations write one packed word.

use crate::error::{Error, Result};
use crate::operand::MAX_RANK;
use crate::operand::{DataType, OperandDescriptor};
use crate::ops::limits::{self, OpLimits};
use crate::ops::movement::outer_inner;
use crate::ops::reference::{round_to, HostTensor};
use crate::ops::wgsl::{
    binding, load_fn, value_type, BufRef, ElementwiseKernel, Launch, LowerRequest, Lowering, F16_HELPERS,
    WORKGROUP_SIZE,
};
use crate::ops::{not_this_family, MethodOptions, Op, OpFamily};

/// `cumulativeSum`'s `axis` and `MLCumulativeSumOptions`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct CumulativeSumOptions {
    pub axis: u32,
    pub exclusive: bool,
    pub reversed: bool,
}

/// The spec's allowed types less the 64-bit integers, which the kernels do not store.
const TYPES: &[DataType] = &[DataType::Float32, DataType::Float16, DataType::Int32, DataType::Uint32];

pub fn limits() -> Vec<OpLimits> {
    vec![OpLimits {
        name: "cumulativeSum",
        operands: vec![
            limits::tensor("input", TYPES, 1, MAX_RANK as u32),
            limits::tensor("output", TYPES, 1, MAX_RANK as u32),
        ],
    }]
}

pub fn validate(o: &CumulativeSumOptions, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
    let input = inputs[0];
    limits::check(&limits::of("cumulativeSum")?.operands[0], input)?;
    if o.axis as usize >= input.rank() {
        return Err(Error::Type(format!("axis {} is out of range for input of rank {}", o.axis, input.rank())));
    }
    Ok(vec![input.clone()])
}

pub fn lower(o: &CumulativeSumOptions, request: &LowerRequest) -> Result<Lowering> {
    let (input, out) = (request.inputs[0], request.outputs[0]);
    let axis = o.axis as usize;
    let (outer, inner) = outer_inner(&input.shape, axis);
    let n = input.shape[axis];
    let rows = outer * inner;
    let vt = value_type(input.data_type)?;
    let packed = input.data_type == DataType::Float16;
    // float16 sums are stored as f32 in scratch first.
    let sums_type = if packed { DataType::Float32 } else { input.data_type };
    let step = if o.reversed { format!("{}u - k", n - 1) } else { "k".to_string() };
    let accumulate = if o.exclusive {
        "        out[e] = acc;\n        acc = acc + load_input(e);"
    } else {
        "        acc = acc + load_input(e);\n        out[e] = acc;"
    };
    let source = format!(
        "{F16_HELPERS}{}{}{}@compute @workgroup_size({WORKGROUP_SIZE})\nfn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{\n    let t = gid.x + gid.y * nwg.x * {WORKGROUP_SIZE}u;\n    if (t >= {rows}u) {{ return; }}\n    let base = (t / {inner}u) * {}u + t % {inner}u;\n    var acc = {vt}(0);\n    for (var k = 0u; k < {n}u; k++) {{\n        let e = base + ({step}) * {inner}u;\n{accumulate}\n    }}\n}}\n",
        binding(0, "input", input.data_type, false),
        load_fn("input", input.data_type)?,
        binding(1, "out", sums_type, true),
        n as u64 * inner,
    );
    let scan = |target: BufRef| Launch {
        source: source.clone(),
        reads: vec![BufRef::Input(0)],
        writes: vec![target],
        invocations: rows,
        workgroup_size: WORKGROUP_SIZE,
    };
    if !packed {
        return Ok(Lowering::single(scan(BufRef::Output(0))));
    }
    let sums = OperandDescriptor::new(DataType::Float32, input.shape.clone());
    let mut pack = ElementwiseKernel {
        inputs: vec![("sums", &sums)],
        output: out,
        helpers: String::new(),
        body: "    return load_sums(i);".into(),
    }
    .build()?;
    pack.reads = vec![BufRef::Scratch(0)];
    Ok(Lowering::Kernels { scratch: vec![sums.byte_length()], launches: vec![scan(BufRef::Scratch(0)), pack] })
}

/// Running sums in float64, rounded to the output type.
pub fn reference(
    o: &CumulativeSumOptions,
    inputs: &[HostTensor],
    outputs: &[OperandDescriptor],
) -> Result<Vec<HostTensor>> {
    let input = &inputs[0];
    let axis = o.axis as usize;
    let (outer, inner) = outer_inner(input.shape(), axis);
    let (outer, inner) = (outer as usize, inner as usize);
    let n = input.shape()[axis] as usize;
    let data_type = outputs[0].data_type;
    let mut data = vec![0.0; input.data.len()];
    for row in 0..outer * inner {
        let base = (row / inner) * n * inner + row % inner;
        let mut acc = 0.0;
        for k in 0..n {
            let position = if o.reversed { n - 1 - k } else { k };
            let e = base + position * inner;
            if o.exclusive {
                data[e] = round_to(acc, data_type);
                acc += input.data[e];
            } else {
                acc += input.data[e];
                data[e] = round_to(acc, data_type);
            }
        }
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
            "cumulativeSum" => Op::CumulativeSum(CumulativeSumOptions {
                axis: p.u32("axis")?,
                exclusive: p.bool("exclusive")?,
                reversed: p.bool("reversed")?,
            }),
            other => return Err(crate::ops::unknown_method(other)),
        })
    }

    fn name(&self, op: &Op) -> &'static str {
        match op {
            Op::CumulativeSum(_) => "cumulativeSum",
            _ => "",
        }
    }

    fn validate(&self, op: &Op, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
        match op {
            Op::CumulativeSum(o) => validate(o, inputs),
            _ => Err(not_this_family(op)),
        }
    }

    fn lower(&self, op: &Op, request: &LowerRequest) -> Result<Lowering> {
        match op {
            Op::CumulativeSum(o) => lower(o, request),
            _ => Err(not_this_family(op)),
        }
    }

    fn reference(&self, op: &Op, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
        match op {
            Op::CumulativeSum(o) => reference(o, inputs, outputs),
            _ => Err(not_this_family(op)),
        }
    }
}
