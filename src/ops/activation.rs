//! Activations: clamp, elu, gelu, hardSigmoid, hardSwish, leakyRelu, linear, prelu, relu, sigmoid,
//! softplus, softsign, tanh.
//!
//! Float activations are computed in f32 (float16 is rounded on store). Where the spec's
//! expression cancels (`exp(x) - 1`, `1 + erf(x)`, `ln(1 + exp(x))`), the kernels use forms that
//! keep the relative error small, so the results stay within WPT's ULP budgets everywhere.

use crate::error::{Error, Result};
use crate::operand::broadcast_shapes;
use crate::operand::{DataType, Number, OperandDescriptor};
use crate::ops::elementwise_binary::{broadcast_pair_kernel, wide_less};
use crate::ops::elementwise_unary::{erfc, ERFC, EXP_R};
use crate::ops::limits::{self, OpLimits, ALL_TYPES, FLOATS};
use crate::ops::reference::{cast_number, map_broadcast, map_broadcast_exact, HostTensor};
use crate::ops::wgsl::{literal, value_type, wide_literal, ElementwiseKernel, LowerRequest, Lowering};
use crate::ops::{not_this_family, MethodOptions, Op, OpFamily};
use std::ops::RangeInclusive;

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Activation {
    Relu,
    Sigmoid,
    Tanh,
    Gelu,
    LeakyRelu { alpha: f64 },
    /// `MLClampOptions`: bounds are `MLNumber`s, absent meaning unbounded.
    Clamp { min_value: Option<Number>, max_value: Option<Number> },
    Elu { alpha: f64 },
    HardSigmoid { alpha: f64, beta: f64 },
    HardSwish,
    Linear { alpha: f64, beta: f64 },
    Softplus,
    Softsign,
    /// Inputs `input` and `slope`, broadcast bidirectionally.
    Prelu,
}

/// The spec's allowed types of relu and prelu (prelu's int64 is not implemented).
const SIGNED: &[DataType] = &[DataType::Float32, DataType::Float16, DataType::Int32, DataType::Int8];
const SIGNED_AND_INT64: &[DataType] =
    &[DataType::Float32, DataType::Float16, DataType::Int32, DataType::Int64, DataType::Int8];

impl Activation {
    pub fn name(&self) -> &'static str {
        match self {
            Activation::Relu => "relu",
            Activation::Sigmoid => "sigmoid",
            Activation::Tanh => "tanh",
            Activation::Gelu => "gelu",
            Activation::LeakyRelu { .. } => "leakyRelu",
            Activation::Clamp { .. } => "clamp",
            Activation::Elu { .. } => "elu",
            Activation::HardSigmoid { .. } => "hardSigmoid",
            Activation::HardSwish => "hardSwish",
            Activation::Linear { .. } => "linear",
            Activation::Softplus => "softplus",
            Activation::Softsign => "softsign",
            Activation::Prelu => "prelu",
        }
    }

    /// One activation of each kind with its default options.
    pub fn defaults() -> Vec<Activation> {
        vec![
            Activation::Clamp { min_value: None, max_value: None },
            Activation::Elu { alpha: 1.0 },
            Activation::Gelu,
            Activation::HardSigmoid { alpha: 0.2, beta: 0.5 },
            Activation::HardSwish,
            Activation::LeakyRelu { alpha: 0.01 },
            Activation::Linear { alpha: 1.0, beta: 0.0 },
            Activation::Prelu,
            Activation::Relu,
            Activation::Sigmoid,
            Activation::Softplus,
            Activation::Softsign,
            Activation::Tanh,
        ]
    }

    fn data_types(&self) -> &'static [DataType] {
        match self {
            Activation::Relu => SIGNED_AND_INT64,
            Activation::Prelu => SIGNED,
            Activation::Clamp { .. } => ALL_TYPES,
            _ => FLOATS,
        }
    }
}

pub fn limits() -> Vec<OpLimits> {
    Activation::defaults()
        .iter()
        .map(|op| {
            let types = op.data_types();
            let mut operands = vec![limits::tensor("input", types, 0, 8)];
            if *op == Activation::Prelu {
                operands.push(limits::tensor("slope", types, 0, 8));
            }
            operands.push(limits::tensor("output", types, 0, 8));
            OpLimits { name: op.name(), operands }
        })
        .collect()
}

/// clamp's bounds cast to the input type. An absent bound is unbounded, and so is a NaN bound of
/// a float type (IEEE minNum/maxNum ignore a NaN operand; WPT's cases); the spec's cast makes a
/// NaN bound of an integer type 0.
fn clamp_bounds(min_value: Option<Number>, max_value: Option<Number>, data_type: DataType) -> (f64, f64) {
    let bound = |v: Option<Number>, default: f64| match v.filter(|v| !(v.is_nan() && data_type.is_float())) {
        Some(v) => v.cast_f64(data_type),
        None => cast_number(default, data_type),
    };
    (bound(min_value, f64::NEG_INFINITY), bound(max_value, f64::INFINITY))
}

/// clamp's bounds of an int64/uint64 input, exact (absent bounds are the type's range).
fn wide_clamp_bounds(min_value: Option<Number>, max_value: Option<Number>, data_type: DataType) -> (i128, i128) {
    let bound = |v: Option<Number>, default: f64| v.unwrap_or(Number::Double(default)).to_integer(data_type);
    (bound(min_value, f64::NEG_INFINITY), bound(max_value, f64::INFINITY))
}

pub fn validate(op: &Activation, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
    let input = inputs[0];
    limits::check(&limits::tensor("input", op.data_types(), 0, 8), input)?;
    match op {
        Activation::Clamp { min_value, max_value } if input.data_type.is_wide() => {
            let (lo, hi) = wide_clamp_bounds(*min_value, *max_value, input.data_type);
            if lo > hi {
                return Err(Error::Type(format!("minValue {lo} is greater than maxValue {hi}")));
            }
            Ok(vec![input.clone()])
        }
        Activation::Clamp { min_value, max_value } => {
            let (lo, hi) = clamp_bounds(*min_value, *max_value, input.data_type);
            if lo > hi {
                return Err(Error::Type(format!("minValue {lo} is greater than maxValue {hi}")));
            }
            Ok(vec![input.clone()])
        }
        Activation::Prelu => {
            let slope = inputs[1];
            limits::check(&limits::tensor("slope", op.data_types(), 0, 8), slope)?;
            if slope.data_type != input.data_type {
                return Err(Error::Type(format!(
                    "slope is {} but input is {}: the data types must match",
                    slope.data_type, input.data_type
                )));
            }
            let shape = broadcast_shapes(&slope.shape, &input.shape).ok_or_else(|| {
                Error::Type(format!(
                    "slope shape {:?} and input shape {:?} cannot be broadcast together",
                    slope.shape, input.shape
                ))
            })?;
            Ok(vec![OperandDescriptor::new(input.data_type, shape)])
        }
        _ => Ok(vec![input.clone()]),
    }
}

/// `expm1` accurate near 0 (a Taylor polynomial there), where `exp(x) - 1` cancels.
const EXPM1: &str = "fn expm1_f(x: f32) -> f32 {\n    if (abs(x) < 0.5) {\n        return x * (1.0 + x * (0.5 + x * (0.16666667 + x * (0.041666668 + x * (0.008333334 + x * (0.0013888889 + x * (0.0001984127 + x * (0.0000248016 + x * 0.0000027557))))))));\n    }\n    return exp(x) - 1.0;\n}\n";

/// `log1p(u)` for `u` in [0, 1] as `2 atanh(u / (2 + u))`, a series in `s <= 1/3`: WGSL's `log`
/// only has an absolute error bound near 1.
const LOG1P: &str = "fn log1p_f(u: f32) -> f32 {\n    let s = u / (2.0 + u);\n    let s2 = s * s;\n    return 2.0 * s * (1.0 + s2 * (0.33333334 + s2 * (0.2 + s2 * (0.14285715 + s2 * (0.11111111 + s2 * (0.09090909 + s2 * (0.07692308 + s2 * (0.06666667 + s2 * 0.05882353))))))));\n}\n";

/// `tanh` as `expm1(2|x|) / (expm1(2|x|) + 2)`, exact in sign and accurate near 0.
const TANH: &str = "fn tanh_f(x: f32) -> f32 {\n    let a = abs(x);\n    if (a > 10.0) { return sign(x); }\n    let e = expm1_f(2.0 * a);\n    let r = e / (e + 2.0);\n    return select(r, -r, x < 0.0);\n}\n";

/// relu and clamp of two-word values.
fn lower_wide(op: &Activation, request: &LowerRequest) -> Result<Lowering> {
    let data_type = request.inputs[0].data_type;
    let e = match op {
        Activation::Relu => "select(x, vec2<u32>(0u, 0u), is_neg64(x))".to_string(),
        Activation::Clamp { min_value, max_value } => {
            let (lo, hi) = wide_clamp_bounds(*min_value, *max_value, data_type);
            let (lo, hi) = (wide_literal(lo), wide_literal(hi));
            format!("select(select(x, {lo}, lt(x, {lo})), {hi}, lt({hi}, x))")
        }
        _ => return Err(Error::NotSupported(format!("{} of {data_type} is not supported", op.name()))),
    };
    let launch = ElementwiseKernel {
        inputs: vec![("input", request.inputs[0])],
        output: request.outputs[0],
        helpers: wide_less(data_type).to_string(),
        body: format!("    let x = load_input(i);\n    return {e};"),
    }
    .build()?;
    Ok(Lowering::single(launch))
}

pub fn lower(op: &Activation, request: &LowerRequest) -> Result<Lowering> {
    let data_type = request.inputs[0].data_type;
    if data_type.is_wide() {
        return lower_wide(op, request);
    }
    let (e, helpers) = expression(op, data_type)?;
    if *op == Activation::Prelu {
        return broadcast_pair_kernel(request, &e, "");
    }
    let launch = ElementwiseKernel {
        inputs: vec![("input", request.inputs[0])],
        output: request.outputs[0],
        helpers,
        body: format!("    let x = load_input(i);\n    return {e};"),
    }
    .build()?;
    Ok(Lowering::single(launch))
}

/// A WGSL expression of `x` computing `op` on a type of 32 bits or less (prelu: of `a`, the
/// input, and `b`, the slope), with the helpers it needs.
pub fn expression(op: &Activation, data_type: DataType) -> Result<(String, String)> {
    let vt = value_type(data_type)?;
    let lit = |v: f64| literal(cast_number(v, data_type), vt);
    let mut helpers = String::new();
    let e = match op {
        // NaN stays NaN, as in max(0, x) of IEEE maximum.
        Activation::Relu => format!("select(x, {0}, x < {0})", literal(0.0, vt)),
        Activation::Sigmoid => {
            helpers = EXP_R.to_string();
            "1.0 / (1.0 + exp_r(-x))".to_string()
        }
        Activation::Tanh => {
            helpers = format!("{EXPM1}{TANH}");
            "tanh_f(x)".to_string()
        }
        Activation::Gelu => {
            // 0.5 x (1 + erf(x / sqrt 2)), with 1 + erf(z) = erfc(-z) so that x < 0 does not cancel.
            helpers = format!("{EXP_R}{ERFC}");
            "0.5 * x * select(erfc_pos(abs(x), 0.70710677, 0.5), 2.0 - erfc_pos(x, 0.70710677, 0.5), x > 0.0)".to_string()
        }
        Activation::LeakyRelu { alpha } => format!("select({} * x, x, x >= 0.0)", lit(*alpha)),
        Activation::Clamp { min_value, max_value } => {
            let (lo, hi) = clamp_bounds(*min_value, *max_value, data_type);
            // An infinite bound clamps nothing; skipping it also keeps NaN inputs NaN.
            let mut e = "x".to_string();
            if lo != f64::NEG_INFINITY {
                e = format!("max({e}, {})", literal(lo, vt));
            }
            if hi != f64::INFINITY {
                e = format!("min({e}, {})", literal(hi, vt));
            }
            e
        }
        Activation::Elu { alpha } => {
            helpers = EXPM1.to_string();
            format!("select({} * expm1_f(x), x, x >= 0.0)", lit(*alpha))
        }
        Activation::HardSigmoid { alpha, beta } => {
            format!("max(min(fma({}, x, {}), 1.0), 0.0)", lit(*alpha), lit(*beta))
        }
        Activation::HardSwish => "x * max(0.0, min(6.0, x + 3.0)) / 6.0".to_string(),
        // fma: one rounding, where alpha x + beta cancels.
        Activation::Linear { alpha, beta } => format!("fma({}, x, {})", lit(*alpha), lit(*beta)),
        Activation::Softplus => {
            // ln(1 + e^x) = max(x, 0) + ln(1 + e^-|x|): no overflow, no loss for x << 0.
            helpers = format!("{EXP_R}{LOG1P}");
            "max(x, 0.0) + log1p_f(exp_r(-abs(x)))".to_string()
        }
        Activation::Softsign => "x / (1.0 + abs(x))".to_string(),
        // a = input, b = slope, both broadcast to the output.
        Activation::Prelu => format!("select(b * a, a, a >= {})", literal(0.0, vt)),
    };
    Ok((e, helpers))
}

/// The spec's expressions in float64, with options cast to the input type as the spec does.
pub fn reference(op: &Activation, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
    let data_type = inputs[0].descriptor.data_type;
    if data_type.is_wide() {
        let (lo, hi) = match op {
            Activation::Relu => (0, i128::MAX),
            Activation::Clamp { min_value, max_value } => wide_clamp_bounds(*min_value, *max_value, data_type),
            _ => return Err(Error::NotSupported(format!("{} of {data_type} is not supported", op.name()))),
        };
        return map_broadcast_exact(inputs, &outputs[0], |v| v[0].max(lo).min(hi));
    }
    let c = |v: f64| cast_number(v, data_type);
    let (lo, hi) = match op {
        Activation::Clamp { min_value, max_value } => clamp_bounds(*min_value, *max_value, data_type),
        _ => (f64::NEG_INFINITY, f64::INFINITY),
    };
    map_broadcast(inputs, &outputs[0], |v| {
        let x = v[0];
        match op {
            Activation::Relu => {
                if x < 0.0 {
                    0.0
                } else {
                    x
                }
            }
            Activation::Sigmoid => 1.0 / (1.0 + (-x).exp()),
            Activation::Tanh => x.tanh(),
            Activation::Gelu => 0.5 * x * erfc(-x / std::f64::consts::SQRT_2),
            Activation::LeakyRelu { alpha } => {
                if x >= 0.0 {
                    x
                } else {
                    c(*alpha) * x
                }
            }
            Activation::Clamp { .. } => {
                if x.is_nan() {
                    x
                } else {
                    x.max(lo).min(hi)
                }
            }
            Activation::Elu { alpha } => {
                if x >= 0.0 {
                    x
                } else {
                    c(*alpha) * x.exp_m1()
                }
            }
            Activation::HardSigmoid { alpha, beta } => (c(*alpha) * x + c(*beta)).clamp(0.0, 1.0),
            Activation::HardSwish => x * (x + 3.0).clamp(0.0, 6.0) / 6.0,
            Activation::Linear { alpha, beta } => c(*alpha) * x + c(*beta),
            Activation::Softplus => x.max(0.0) + (-x.abs()).exp().ln_1p(),
            Activation::Softsign => x / (1.0 + x.abs()),
            Activation::Prelu => {
                let slope = v[1];
                if x >= 0.0 {
                    x
                } else {
                    slope * x
                }
            }
        }
    })
}

/// The registry's entry for this file's operators (see [`OpFamily`]).
pub struct Family;

impl OpFamily for Family {
    fn limits(&self) -> Vec<OpLimits> {
        limits()
    }

    fn from_options(&self, name: &str, p: &dyn MethodOptions) -> Result<Op> {
        Ok(match name {
            "relu" => Op::Activation(Activation::Relu),
            "sigmoid" => Op::Activation(Activation::Sigmoid),
            "tanh" => Op::Activation(Activation::Tanh),
            "gelu" => Op::Activation(Activation::Gelu),
            "leakyRelu" => Op::Activation(Activation::LeakyRelu { alpha: p.f64("alpha")? }),
            "clamp" => {
                Op::Activation(Activation::Clamp { min_value: p.opt_number("minValue")?, max_value: p.opt_number("maxValue")? })
            }
            "elu" => Op::Activation(Activation::Elu { alpha: p.f64("alpha")? }),
            "hardSigmoid" => Op::Activation(Activation::HardSigmoid { alpha: p.f64("alpha")?, beta: p.f64("beta")? }),
            "hardSwish" => Op::Activation(Activation::HardSwish),
            "linear" => Op::Activation(Activation::Linear { alpha: p.f64("alpha")?, beta: p.f64("beta")? }),
            "prelu" => Op::Activation(Activation::Prelu),
            "softplus" => Op::Activation(Activation::Softplus),
            "softsign" => Op::Activation(Activation::Softsign),
            other => return Err(crate::ops::unknown_method(other)),
        })
    }

    fn name(&self, op: &Op) -> &'static str {
        match op {
            Op::Activation(op) => op.name(),
            _ => "",
        }
    }

    fn input_count(&self, op: &Op) -> RangeInclusive<usize> {
        match op {
            Op::Activation(Activation::Prelu) => 2..=2,
            _ => 1..=1,
        }
    }

    fn validate(&self, op: &Op, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
        match op {
            Op::Activation(o) => validate(o, inputs),
            _ => Err(not_this_family(op)),
        }
    }

    fn lower(&self, op: &Op, request: &LowerRequest) -> Result<Lowering> {
        match op {
            Op::Activation(o) => lower(o, request),
            _ => Err(not_this_family(op)),
        }
    }

    fn reference(&self, op: &Op, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
        match op {
            Op::Activation(o) => reference(o, inputs, outputs),
            _ => Err(not_this_family(op)),
        }
    }
}
