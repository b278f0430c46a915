//! Element-wise unary operations: abs, ceil, cos, erf, exp, floor, identity, log, neg,
//! reciprocal, roundEven, sin, sign, sqrt, tan.

use crate::error::Result;
use crate::graph::{DataType, OperandDescriptor};
use crate::ops::limits::{self, OpLimits, FLOATS, SUPPORTED};
use crate::ops::reference::{map_broadcast, HostTensor};
use crate::ops::wgsl::{value_type, ElementwiseKernel, LowerContext, Lowering};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnaryOp {
    Abs,
    Ceil,
    Cos,
    Erf,
    Exp,
    Floor,
    Identity,
    Log,
    Neg,
    Reciprocal,
    RoundEven,
    Sin,
    Sign,
    Sqrt,
    Tan,
}

impl UnaryOp {
    pub const ALL: [UnaryOp; 15] = [
        UnaryOp::Abs,
        UnaryOp::Ceil,
        UnaryOp::Cos,
        UnaryOp::Erf,
        UnaryOp::Exp,
        UnaryOp::Floor,
        UnaryOp::Identity,
        UnaryOp::Log,
        UnaryOp::Neg,
        UnaryOp::Reciprocal,
        UnaryOp::RoundEven,
        UnaryOp::Sin,
        UnaryOp::Sign,
        UnaryOp::Sqrt,
        UnaryOp::Tan,
    ];

    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Abs => "abs",
            UnaryOp::Ceil => "ceil",
            UnaryOp::Cos => "cos",
            UnaryOp::Erf => "erf",
            UnaryOp::Exp => "exp",
            UnaryOp::Floor => "floor",
            UnaryOp::Identity => "identity",
            UnaryOp::Log => "log",
            UnaryOp::Neg => "neg",
            UnaryOp::Reciprocal => "reciprocal",
            UnaryOp::RoundEven => "roundEven",
            UnaryOp::Sin => "sin",
            UnaryOp::Sign => "sign",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Tan => "tan",
        }
    }

    /// The spec's allowed types, less the 64-bit integers the kernels do not store.
    fn data_types(self) -> &'static [DataType] {
        const SIGNED: &[DataType] = &[DataType::Float32, DataType::Float16, DataType::Int32, DataType::Int8];
        match self {
            UnaryOp::Abs | UnaryOp::Neg | UnaryOp::Sign => SIGNED,
            UnaryOp::Identity => SUPPORTED,
            _ => FLOATS,
        }
    }
}

pub fn limits() -> Vec<OpLimits> {
    UnaryOp::ALL
        .iter()
        .map(|op| OpLimits {
            name: op.name(),
            operands: vec![limits::tensor("input", op.data_types(), 0, 8), limits::tensor("output", op.data_types(), 0, 8)],
        })
        .collect()
}

pub fn validate(op: UnaryOp, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
    limits::check(&limits::tensor("input", op.data_types(), 0, 8), inputs[0])?;
    Ok(vec![inputs[0].clone()])
}

/// Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7), odd-extended.
const ERF: &str = "fn erf_f(x: f32) -> f32 {\n    let t = 1.0 / (1.0 + 0.3275911 * abs(x));\n    let y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * exp(-x * x);\n    return select(y, -y, x < 0.0);\n}\n";

/// A WGSL expression of `x` computing `op`, with any helper it needs.
pub fn expression(op: UnaryOp) -> (String, &'static str) {
    let e = match op {
        UnaryOp::Abs => "abs(x)".to_string(),
        UnaryOp::Ceil => "ceil(x)".to_string(),
        UnaryOp::Cos => "cos(x)".to_string(),
        UnaryOp::Erf => return ("erf_f(x)".to_string(), ERF),
        UnaryOp::Exp => "exp(x)".to_string(),
        UnaryOp::Floor => "floor(x)".to_string(),
        UnaryOp::Identity => "x".to_string(),
        UnaryOp::Log => "log(x)".to_string(),
        UnaryOp::Neg => "-x".to_string(),
        UnaryOp::Reciprocal => "1.0 / x".to_string(),
        UnaryOp::RoundEven => "round(x)".to_string(),
        UnaryOp::Sin => "sin(x)".to_string(),
        UnaryOp::Sign => "sign(x)".to_string(),
        UnaryOp::Sqrt => "sqrt(x)".to_string(),
        UnaryOp::Tan => "tan(x)".to_string(),
    };
    (e, "")
}

pub fn lower(op: UnaryOp, cx: &LowerContext) -> Result<Lowering> {
    value_type(cx.inputs[0].data_type)?;
    let (e, helpers) = expression(op);
    let launch = ElementwiseKernel {
        inputs: vec![("input", cx.inputs[0])],
        output: cx.outputs[0],
        helpers: helpers.to_string(),
        body: format!("    let x = load_input(i);\n    return {e};"),
    }
    .build()?;
    Ok(Lowering::single(launch))
}

/// Round half to even, as WGSL's `round` and the spec's roundEven.
fn round_even(x: f64) -> f64 {
    let r = x.round();
    if (x - x.trunc()).abs() == 0.5 {
        2.0 * (x / 2.0).round()
    } else {
        r
    }
}

fn erf(x: f64) -> f64 {
    // Series for small |x|, continued fraction tail otherwise: accurate to ~1e-15.
    let ax = x.abs();
    let y = if ax < 2.5 {
        let mut sum = ax;
        let mut term = ax;
        let x2 = ax * ax;
        let mut n = 0.0;
        while term.abs() > 1e-17 * sum.abs() {
            n += 1.0;
            term *= -x2 / n;
            sum += term / (2.0 * n + 1.0);
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    } else {
        let mut f = 0.0;
        for k in (1..60).rev() {
            f = k as f64 / 2.0 / (ax + f);
        }
        1.0 - (-ax * ax).exp() / std::f64::consts::PI.sqrt() / (ax + f)
    };
    if x < 0.0 {
        -y
    } else {
        y
    }
}

pub fn reference(op: UnaryOp, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
    map_broadcast(inputs, &outputs[0], |v| {
        let x = v[0];
        match op {
            UnaryOp::Abs => x.abs(),
            UnaryOp::Ceil => x.ceil(),
            UnaryOp::Cos => x.cos(),
            UnaryOp::Erf => erf(x),
            UnaryOp::Exp => x.exp(),
            UnaryOp::Floor => x.floor(),
            UnaryOp::Identity => x,
            UnaryOp::Log => x.ln(),
            UnaryOp::Neg => -x,
            UnaryOp::Reciprocal => 1.0 / x,
            UnaryOp::RoundEven => round_even(x),
            UnaryOp::Sin => x.sin(),
            UnaryOp::Sign => {
                if x > 0.0 {
                    1.0
                } else if x < 0.0 {
                    -1.0
                } else {
                    x
                }
            }
            UnaryOp::Sqrt => x.sqrt(),
            UnaryOp::Tan => x.tan(),
        }
    })
}
