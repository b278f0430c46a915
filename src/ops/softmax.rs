//! softmax along one axis: a row reduction of the max and of the sum of exp(x - max) per row of
//! the axis, then `exp(x - max) / sum` (the max keeps exp from overflowing). Where rows are
//! contiguous the reducing kernel writes its rows itself (one launch); otherwise the statistics
//! go through a scratch buffer to an element-wise launch.

use crate::error::{Error, Result};
use crate::operand::MAX_RANK;
use crate::operand::{DataType, OperandDescriptor};
use crate::ops::limits::{self, OpLimits, FLOATS};
use crate::ops::movement::outer_inner;
use crate::ops::reduce::{RowReduction, Stat};
use crate::ops::reference::{round_to, HostTensor};
use crate::ops::wgsl::{binding, buffer_size, literal, BufRef, ElementwiseKernel, LowerRequest, Lowering};
use crate::ops::{not_this_family, MethodOptions, Op, OpFamily};

pub fn limits() -> Vec<OpLimits> {
    vec![OpLimits {
        name: "softmax",
        operands: vec![
            limits::tensor("input", FLOATS, 1, MAX_RANK as u32),
            limits::tensor("output", FLOATS, 1, MAX_RANK as u32),
        ],
    }]
}

pub fn validate(axis: u32, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
    let input = inputs[0];
    limits::check(&limits::of("softmax")?.operands[0], input)?;
    if axis as usize >= input.rank() {
        return Err(Error::Type(format!("softmax: axis {axis} is out of range for an input of rank {}", input.rank())));
    }
    Ok(vec![input.clone()])
}

/// `exp(x - max) / sum` of input element `i`, from the row's max `s1` and sum `s2`.
fn normalized(i: &str) -> String {
    format!("exp(load_input({i}) - s1) / s2")
}

pub fn lower(axis: u32, request: &LowerRequest) -> Result<Lowering> {
    let (input, out) = (request.inputs[0], request.outputs[0]);
    let axis = axis as usize;
    let axes = [axis];
    let (_, inner) = outer_inner(&input.shape, axis);
    let size = input.shape[axis] as u64;
    let mut reduction = RowReduction {
        input,
        axes: &axes,
        first: Stat {
            init: literal(f64::NEG_INFINITY, "f32"),
            map: "x".into(),
            combine: "max(a, b)".into(),
            finish: "acc".into(),
        },
        second: Some(Stat {
            init: "0".into(),
            map: "exp(x - s1)".into(),
            combine: "a + b".into(),
            finish: "acc".into(),
        }),
        out_type: DataType::Float32,
        target: BufRef::Scratch(0),
        store: "        out[row * 2u] = s1;\n        out[row * 2u + 1u] = s2;".into(),
    };
    // Contiguous rows (every axis after the softmax axis has size 1): the invocations reducing a
    // row write it too, in one launch. Not for float16 rows of odd length, where a packed output
    // word would hold elements of two rows reduced by different invocations.
    if inner == 1 && (out.data_type != DataType::Float16 || size % 2 == 0) {
        reduction.target = BufRef::Output(0);
        let out_binding = binding(1, "out", out.data_type, true);
        let launch = if out.data_type == DataType::Float16 {
            let each = format!(
                "let i = base + 2u * j;\n        out[i >> 1u] = f32_to_f16({}) | (f32_to_f16({}) << 16u);",
                normalized("i"),
                normalized("i + 1u")
            );
            reduction.build_each(&out_binding, size / 2, &each)?
        } else {
            reduction.build_each(&out_binding, size, &format!("out[base + j] = {};", normalized("base + j")))?
        };
        return Ok(Lowering::single(launch));
    }
    let (rows, _) = reduction.rows_and_length();
    let stats = OperandDescriptor::new(DataType::Float32, vec![rows as u32 * 2]);
    let body = format!(
        "    let row = (i / {}u) * {inner}u + i % {inner}u;\n    let s1 = load_stats(row * 2u);\n    let s2 = load_stats(row * 2u + 1u);\n    return {};",
        size * inner,
        normalized("i")
    );
    let mut apply = ElementwiseKernel {
        inputs: vec![("input", input), ("stats", &stats)],
        output: out,
        helpers: String::new(),
        body,
    }
    .build()?;
    apply.reads = vec![BufRef::Input(0), BufRef::Scratch(0)];
    Ok(Lowering::Kernels { scratch: vec![buffer_size(&stats)], launches: vec![reduction.build()?, apply] })
}

/// `exp(x - max) / sum(exp(x - max))` over each row of the axis.
pub fn reference(axis: u32, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
    let input = &inputs[0];
    let out = &outputs[0];
    let axis = axis as usize;
    let (outer, inner) = outer_inner(input.shape(), axis);
    let (outer, inner, size) = (outer as usize, inner as usize, input.shape()[axis] as usize);
    let mut data = vec![0.0; input.data.len()];
    for o in 0..outer {
        for r in 0..inner {
            let index = |a: usize| (o * size + a) * inner + r;
            let m = (0..size).map(|a| input.data[index(a)]).fold(f64::NEG_INFINITY, f64::max);
            let sum: f64 = (0..size).map(|a| (input.data[index(a)] - m).exp()).sum();
            for a in 0..size {
                data[index(a)] = round_to((input.data[index(a)] - m).exp() / sum, out.data_type);
            }
        }
    }
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
            "softmax" => Op::Softmax { axis: p.u32("axis")? },
            other => return Err(crate::ops::unknown_method(other)),
        })
    }

    fn name(&self, op: &Op) -> &'static str {
        match op {
            Op::Softmax { .. } => "softmax",
            _ => "",
        }
    }

    fn validate(&self, op: &Op, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
        match op {
            Op::Softmax { axis } => validate(*axis, inputs),
            _ => Err(not_this_family(op)),
        }
    }

    fn lower(&self, op: &Op, request: &LowerRequest) -> Result<Lowering> {
        match op {
            Op::Softmax { axis } => lower(*axis, request),
            _ => Err(not_this_family(op)),
        }
    }

    fn reference(&self, op: &Op, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
        match op {
            Op::Softmax { axis } => reference(*axis, inputs, outputs),
            _ => Err(not_this_family(op)),
        }
    }
}
