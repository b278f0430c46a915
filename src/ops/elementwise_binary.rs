//! Element-wise binary operations: add, sub, mul, div, max, min, pow, with bidirectional
//! broadcasting (spec: "create an element-wise binary operation").

use crate::error::{Error, Result};
use crate::graph::operand::broadcast_shapes;
use crate::graph::{DataType, OperandDescriptor};
use crate::ops::limits::{self, OpLimits, SUPPORTED};
use crate::ops::reference::{map_broadcast, HostTensor};
use crate::ops::wgsl::{broadcast_offset_fn, coords_fn, value_type, ElementwiseKernel, LowerContext, Lowering};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Max,
    Min,
    Pow,
}

impl BinaryOp {
    pub const ALL: [BinaryOp; 7] =
        [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Max, BinaryOp::Min, BinaryOp::Pow];

    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::Max => "max",
            BinaryOp::Min => "min",
            BinaryOp::Pow => "pow",
        }
    }
}

pub fn limits() -> Vec<OpLimits> {
    BinaryOp::ALL
        .iter()
        .map(|op| OpLimits {
            name: op.name(),
            operands: vec![
                limits::tensor("a", SUPPORTED, 0, 8),
                limits::tensor("b", SUPPORTED, 0, 8),
                limits::tensor("output", SUPPORTED, 0, 8),
            ],
        })
        .collect()
}

/// Shared by binary and comparison operations: same types, broadcastable shapes.
pub fn validate_broadcast_pair(name: &str, inputs: &[&OperandDescriptor]) -> Result<Vec<u32>> {
    let (a, b) = (inputs[0], inputs[1]);
    if a.data_type != b.data_type {
        return Err(Error::Type(format!("a is {} but b is {}: the data types must match", a.data_type, b.data_type)));
    }
    broadcast_shapes(&a.shape, &b.shape).ok_or_else(|| {
        Error::Type(format!("{name}: shapes {:?} and {:?} cannot be broadcast together", a.shape, b.shape))
    })
}

pub fn validate(op: BinaryOp, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
    let l = limits::of(op.name())?;
    limits::check(&l.operands[0], inputs[0])?;
    limits::check(&l.operands[1], inputs[1])?;
    let shape = validate_broadcast_pair(op.name(), inputs)?;
    Ok(vec![OperandDescriptor::new(inputs[0].data_type, shape)])
}

/// WGSL helpers and `compute` body reading `a` and `b` broadcast to the output.
pub fn broadcast_pair_kernel(cx: &LowerContext, expression: &str, extra_helpers: &str) -> Result<Lowering> {
    let out = cx.outputs[0];
    let rank = out.rank();
    let mut helpers = coords_fn("out", &out.shape);
    helpers += &broadcast_offset_fn("a", &cx.inputs[0].shape, rank);
    helpers += &broadcast_offset_fn("b", &cx.inputs[1].shape, rank);
    helpers += extra_helpers;
    let body = format!(
        "    let c = coords_out(i);\n    let a = load_a(offset_a(c));\n    let b = load_b(offset_b(c));\n    return {expression};"
    );
    let launch = ElementwiseKernel { inputs: vec![("a", cx.inputs[0]), ("b", cx.inputs[1])], output: out, helpers, body }
        .build()?;
    Ok(Lowering::single(launch))
}

pub fn lower(op: BinaryOp, cx: &LowerContext) -> Result<Lowering> {
    let vt = value_type(cx.inputs[0].data_type)?;
    let float = vt == "f32";
    let expression = match op {
        BinaryOp::Add => "a + b".to_string(),
        BinaryOp::Sub => "a - b".to_string(),
        BinaryOp::Mul => "a * b".to_string(),
        // Integer division by zero is defined in WGSL (returns a); the spec leaves it undefined.
        BinaryOp::Div => "a / b".to_string(),
        BinaryOp::Max => "max(a, b)".to_string(),
        BinaryOp::Min => "min(a, b)".to_string(),
        BinaryOp::Pow if float => "pow_f(a, b)".to_string(),
        BinaryOp::Pow => "pow_i(a, b)".to_string(),
    };
    // WGSL's pow is undefined for negative bases; WebNN follows C's pow, so odd/even integer
    // exponents of negative bases are handled explicitly.
    let helpers = match (op, vt) {
        // Integer exponents multiply exactly (squaring) instead of going through exp2/log2, whose
        // error grows with the result's exponent; other exponents use WGSL's pow.
        (BinaryOp::Pow, "f32") => "fn pow_f(a: f32, b: f32) -> f32 {\n    if (b == floor(b) && abs(b) <= 1024.0) {\n        var base = a; var e = u32(abs(b)); var r = 1.0;\n        loop { if (e == 0u) { break; } if ((e & 1u) == 1u) { r = r * base; } base = base * base; e = e >> 1u; }\n        return select(r, 1.0 / r, b < 0.0);\n    }\n    return pow(a, b);\n}\n",
        (BinaryOp::Pow, "i32") => "fn pow_i(a: i32, b: i32) -> i32 {\n    if (b < 0) {\n        if (a == 1) { return 1; }\n        if (a == -1) { return select(1, -1, (b & 1) == 1); }\n        return 0;\n    }\n    var base = a; var e = b; var r = 1;\n    loop { if (e == 0) { break; } if ((e & 1) == 1) { r = r * base; } base = base * base; e = e >> 1u; }\n    return r;\n}\n",
        (BinaryOp::Pow, _) => "fn pow_i(a: u32, b: u32) -> u32 {\n    var base = a; var e = b; var r = 1u;\n    loop { if (e == 0u) { break; } if ((e & 1u) == 1u) { r = r * base; } base = base * base; e = e >> 1u; }\n    return r;\n}\n",
        _ => "",
    };
    broadcast_pair_kernel(cx, &expression, &helpers)
}

pub fn reference(op: BinaryOp, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
    let integer = !matches!(outputs[0].data_type, DataType::Float32 | DataType::Float16);
    map_broadcast(inputs, &outputs[0], |v| {
        let (a, b) = (v[0], v[1]);
        match op {
            BinaryOp::Add => a + b,
            BinaryOp::Sub => a - b,
            BinaryOp::Mul => a * b,
            BinaryOp::Div if integer => {
                if b == 0.0 {
                    a
                } else {
                    (a / b).trunc()
                }
            }
            BinaryOp::Div => a / b,
            BinaryOp::Max => a.max(b),
            BinaryOp::Min => a.min(b),
            BinaryOp::Pow => a.powf(b),
        }
    })
}
