//! Element-wise unary operations: abs, ceil, cos, erf, exp, floor, identity, log, neg,
//! reciprocal, roundEven, sin, sign, sqrt, tan.

use crate::operand::{DataType, OperandDescriptor};
use crate::error::{Error, Result};
use crate::ops::limits::{self, OpLimits, ALL_TYPES, FLOATS};
use crate::ops::reference::{map_broadcast, map_broadcast_exact, HostTensor};
use crate::ops::wgsl::{literal, value_type, ElementwiseKernel, LowerRequest, Lowering};
use crate::ops::{not_this_family, MethodOptions, Op, OpFamily};

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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

    /// The spec's allowed types.
    fn data_types(self) -> &'static [DataType] {
        const SIGNED: &[DataType] =
            &[DataType::Float32, DataType::Float16, DataType::Int32, DataType::Int64, DataType::Int8];
        match self {
            UnaryOp::Abs | UnaryOp::Neg | UnaryOp::Sign => SIGNED,
            UnaryOp::Identity => ALL_TYPES,
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

/// `exp` with Cody-Waite argument reduction: `x = n ln2 + r`, `n ln2` exact in two parts, so large
/// arguments lose no accuracy to the rounding of `x * log2(e)` inside a GPU's `exp`; `exp(r)` for
/// `|r| <= ln2 / 2` is its Taylor polynomial (truncation below 0.05 ULP), so the result does not
/// depend on the GPU's `exp`. `2^n` is applied in two halves: `ldexp` is undefined beyond 2^128.
/// Beyond +-104 the result is 0 or infinity (and infinities and NaN go straight to `exp`).
pub const EXP_R: &str = "fn exp_r(x: f32) -> f32 {
    if (!(abs(x) < 104.0)) { return exp(x); }
    let n = round(x * 1.4426950);
    let r = (x - n * 0.693145751953125) - n * 1.4286068e-6;
    let p = 1.0 + r * (1.0 + r * (0.5 + r * (0.16666667 + r * (0.041666668 + r * (0.008333334 + r * (0.0013888889 + r * 0.0001984127))))));
    let k = i32(n);
    return ldexp(ldexp(p, k / 2), k - k / 2);
}
";

/// `erfc` from Numerical Recipes' Chebyshev fit (relative error < 1.2e-7 for every x), using
/// `exp_r` ([`EXP_R`]). `erfc_pos(a, s, s2)` is erfc(s a) for a >= 0 and s = 1 or 1/sqrt(2): the
/// exponent -s^2 a^2 is formed from a 12-bit head of `a`, whose square is exact in f32, and a
/// tail, so large arguments lose no accuracy to the rounding of a square (or of `s a`).
pub const ERFC: &str = "fn erfc_pos(a: f32, s: f32, s2: f32) -> f32 {
    if (s * a > 10.5) { return 0.0; }
    let t = 1.0 / (1.0 + 0.5 * s * a);
    let p = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))));
    let ah = bitcast<f32>(bitcast<u32>(a) & 0xfffff000u);
    return t * exp_r(-s2 * ah * ah) * exp_r(p - s2 * (a - ah) * (a + ah));
}
fn erfc_f(x: f32) -> f32 {
    let r = erfc_pos(abs(x), 1.0, 1.0);
    return select(r, 2.0 - r, x < 0.0);
}
";

/// `erf`: its Taylor series for |x| < 0.5, where `1 - erfc` would cancel, `1 - erfc(|x|)` beyond.
const ERF: &str = "fn erf_f(x: f32) -> f32 {
    let a = abs(x);
    if (a < 0.5) {
        let x2 = x * x;
        return x * (1.1283791671 + x2 * (-0.3761263890 + x2 * (0.1128379167 + x2 * (-0.0268661706 + x2 * (0.0052239776 + x2 * -0.0008548327)))));
    }
    let y = 1.0 - erfc_f(a);
    return select(y, -y, x < 0.0);
}
";

/// `tan` with its own argument reduction: `x = k pi/2 + r`, `pi/2` in three parts (`k` times the
/// first two exact for `|k| < 2^13`), so `r` keeps its relative accuracy next to the poles, where a
/// GPU's `tan` (often `sin / cos` with a coarse reduction) loses it. `tan(r)` for `|r| <= pi/4` is
/// Cephes' `tanf` polynomial, `-1 / tan(r)` for odd `k`. Beyond `|x| = 8192` the GPU's `tan`.
const TAN: &str = "fn tan_f(x: f32) -> f32 {
    if (!(abs(x) <= 8192.0)) { return tan(x); }
    let k = round(x * 0.63661975);
    let r = ((x - k * 1.5703125) - k * 4.837512969970703125e-4) - k * 7.549789954891882e-8;
    let z = r * r;
    let t = r + r * z * (0.333331568548 + z * (0.133387994085 + z * (0.0534112807005 + z * (0.0244301354525 + z * (0.00311992232697 + z * 0.00938540185543)))));
    return select(t, -1.0 / t, (i32(k) & 1) != 0);
}
";

/// `log` with IEEE's special values, -infinity at 0 and NaN below: a GPU's `log` is undefined
/// there (SwiftShader's `log(0)` is finite).
pub fn log_helper() -> String {
    format!(
        "fn log_f(x: f32) -> f32 {{
    if (x == 0.0) {{ return {}; }}
    if (!(x > 0.0)) {{ return {}; }}
    return log(x);
}}
",
        literal(f64::NEG_INFINITY, "f32"),
        literal(f64::NAN, "f32")
    )
}

/// A WGSL expression of `x` computing `op`, with any helper it needs.
pub fn expression(op: UnaryOp) -> (String, String) {
    let e = match op {
        UnaryOp::Abs => "abs(x)".to_string(),
        UnaryOp::Ceil => "ceil(x)".to_string(),
        UnaryOp::Cos => "cos(x)".to_string(),
        UnaryOp::Erf => return ("erf_f(x)".to_string(), format!("{EXP_R}{ERFC}{ERF}")),
        UnaryOp::Exp => return ("exp_r(x)".to_string(), EXP_R.to_string()),
        UnaryOp::Floor => "floor(x)".to_string(),
        UnaryOp::Identity => "x".to_string(),
        UnaryOp::Log => return ("log_f(x)".to_string(), log_helper()),
        UnaryOp::Neg => "-x".to_string(),
        UnaryOp::Reciprocal => "1.0 / x".to_string(),
        UnaryOp::RoundEven => "round(x)".to_string(),
        UnaryOp::Sin => "sin(x)".to_string(),
        UnaryOp::Sign => "sign(x)".to_string(),
        UnaryOp::Sqrt => "sqrt(x)".to_string(),
        UnaryOp::Tan => return ("tan_f(x)".to_string(), TAN.to_string()),
    };
    (e, String::new())
}

/// abs, neg, sign and identity of two-word values (int64; identity also uint64).
fn wide_expression(op: UnaryOp) -> Result<&'static str> {
    Ok(match op {
        UnaryOp::Abs => "select(x, neg64(x), is_neg64(x))",
        UnaryOp::Neg => "neg64(x)",
        UnaryOp::Sign => {
            "select(select(vec2<u32>(0u, 0u), vec2<u32>(1u, 0u), !eq64(x, vec2<u32>(0u, 0u))), vec2<u32>(0xffffffffu, 0xffffffffu), is_neg64(x))"
        }
        UnaryOp::Identity => "x",
        _ => return Err(Error::NotSupported(format!("{} of 64-bit integers is not supported", op.name()))),
    })
}

pub fn lower(op: UnaryOp, request: &LowerRequest) -> Result<Lowering> {
    value_type(request.inputs[0].data_type)?;
    let (e, helpers) =
        if request.inputs[0].data_type.is_wide() { (wide_expression(op)?.to_string(), String::new()) } else { expression(op) };
    let launch = ElementwiseKernel {
        inputs: vec![("input", request.inputs[0])],
        output: request.outputs[0],
        helpers,
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

/// erf of |x| < 2.5 by its Taylor series (accurate to ~1e-16).
fn erf_series(ax: f64) -> f64 {
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
}

/// erfc of x >= 2.5 by its continued fraction, computed directly so that it keeps its relative
/// accuracy where erfc is tiny.
fn erfc_fraction(ax: f64) -> f64 {
    let mut f = 0.0;
    for k in (1..60).rev() {
        f = k as f64 / 2.0 / (ax + f);
    }
    (-ax * ax).exp() / std::f64::consts::PI.sqrt() / (ax + f)
}

fn erf(x: f64) -> f64 {
    let ax = x.abs();
    let y = if ax < 2.5 { erf_series(ax) } else { 1.0 - erfc_fraction(ax) };
    if x < 0.0 {
        -y
    } else {
        y
    }
}

/// The complementary error function in float64, with full relative accuracy for large x.
pub fn erfc(x: f64) -> f64 {
    let ax = x.abs();
    let y = if ax < 2.5 { 1.0 - erf_series(ax) } else { erfc_fraction(ax) };
    if x < 0.0 {
        2.0 - y
    } else {
        y
    }
}

pub fn reference(op: UnaryOp, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
    if outputs[0].data_type.is_wide() {
        // Exact; abs and neg of the most negative int64 wrap to itself.
        let f: fn(i128) -> i128 = match op {
            UnaryOp::Abs => |x| x.abs(),
            UnaryOp::Neg => |x| -x,
            UnaryOp::Sign => |x| x.signum(),
            UnaryOp::Identity => |x| x,
            _ => return Err(Error::NotSupported(format!("{} of 64-bit integers is not supported", op.name()))),
        };
        return map_broadcast_exact(inputs, &outputs[0], |v| f(v[0]));
    }
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

/// The registry's entry for this file's operators (see [`OpFamily`]).
pub struct Family;

impl OpFamily for Family {
    fn limits(&self) -> Vec<OpLimits> {
        limits()
    }

    fn from_options(&self, name: &str, _: &dyn MethodOptions) -> Result<Op> {
        Ok(match name {
            "abs" => Op::Unary(UnaryOp::Abs),
            "ceil" => Op::Unary(UnaryOp::Ceil),
            "cos" => Op::Unary(UnaryOp::Cos),
            "erf" => Op::Unary(UnaryOp::Erf),
            "exp" => Op::Unary(UnaryOp::Exp),
            "floor" => Op::Unary(UnaryOp::Floor),
            "identity" => Op::Unary(UnaryOp::Identity),
            "log" => Op::Unary(UnaryOp::Log),
            "neg" => Op::Unary(UnaryOp::Neg),
            "reciprocal" => Op::Unary(UnaryOp::Reciprocal),
            "roundEven" => Op::Unary(UnaryOp::RoundEven),
            "sin" => Op::Unary(UnaryOp::Sin),
            "sign" => Op::Unary(UnaryOp::Sign),
            "sqrt" => Op::Unary(UnaryOp::Sqrt),
            "tan" => Op::Unary(UnaryOp::Tan),
            other => return Err(crate::ops::unknown_method(other)),
        })
    }

    fn name(&self, op: &Op) -> &'static str {
        match op {
            Op::Unary(op) => op.name(),
            _ => "",
        }
    }

    fn validate(&self, op: &Op, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
        match op {
            Op::Unary(o) => validate(*o, inputs),
            _ => Err(not_this_family(op)),
        }
    }

    fn lower(&self, op: &Op, request: &LowerRequest) -> Result<Lowering> {
        match op {
            Op::Unary(o) => lower(*o, request),
            _ => Err(not_this_family(op)),
        }
    }

    fn reference(&self, op: &Op, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
        match op {
            Op::Unary(o) => reference(*o, inputs, outputs),
            _ => Err(not_this_family(op)),
        }
    }

    fn moves_input(&self, op: &Op, _index: usize) -> bool {
        match op {
            Op::Unary(UnaryOp::Identity) => true,
            _ => false,
        }
    }
}
