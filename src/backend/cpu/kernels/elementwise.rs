//! Element-wise float32 kernels: binary operations with numpy broadcasting, unary operations and
//! activations, and the f32 math they share.
//!
//! The math functions are branch-free (selects only) and inline, so that a loop over a slice
//! vectorises for wasm simd128: `exp` is Cody-Waite reduction and a polynomial with `2^n` built
//! from bits, not a libm call. Where the spec's formula cancels (`exp(x) - 1`, `1 + erf(x)`,
//! `ln(1 + exp(x))`) the kernels use the forms of the WGSL kernels in `crate::ops::activation`,
//! which keep the results within WPT's ULP budgets. Cheap formulas whose f32 evaluation would
//! cancel (linear, hardSigmoid, hardSwish, softsign) run in f64 in the reference's order, so
//! their results equal the reference's.

use crate::error::{Error, Result};
use crate::operand::{DataType, OperandDescriptor};
use crate::ops::activation::Activation;
use crate::ops::elementwise_binary::BinaryOp;
use crate::ops::elementwise_unary::UnaryOp;

const LOG2E: f32 = std::f32::consts::LOG2_E;
/// ln 2 in two parts; `n * LN2_HI` is exact for `|n| < 2^9`.
const LN2_HI: f32 = 0.693_145_751_953_125;
const LN2_LO: f32 = 1.428_606_8e-6;

/// `e^x` within 2 ULP for every f32 (NaN, infinities, overflow and subnormal results included).
/// `x = n ln2 + r` with `|r| <= ln2 / 2`; `e^r` is its Taylor polynomial (truncation below 0.1
/// ULP); `2^n` is applied in two halves so that subnormal results round once.
#[inline(always)]
pub fn exp_f(x: f32) -> f32 {
    // NaN passes the clamp and stays NaN; beyond the bounds the result is 0 or infinity anyway.
    let c = x.clamp(-104.0, 89.0);
    let n = (c * LOG2E).round_ties_even();
    let r = (c - n * LN2_HI) - n * LN2_LO;
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0 + r * (1.0 / 5040.0)))))));
    let k = n as i32;
    let h = k >> 1;
    let s1 = f32::from_bits(((h + 127) << 23) as u32);
    let s2 = f32::from_bits(((k - h + 127) << 23) as u32);
    p * s1 * s2
}

/// `e^(x - m)` with the rounding error of the subtraction restored (Knuth's two-sum): where `x`
/// and `m` differ in magnitude, `x - m` rounds by up to half an ULP of the difference, which
/// `exp` turns into a relative error of that size (64 ULP at a difference of 100).
#[inline(always)]
pub fn exp_diff(x: f32, m: f32) -> f32 {
    let s = x - m;
    let bb = s - x;
    let err = (x - (s - bb)) + (-m - bb);
    let err = if err.abs() < f32::INFINITY { err } else { 0.0 };
    let e = exp_f(s);
    e + e * err
}

/// `e^x - 1`, accurate near 0 (its Taylor polynomial for `|x| < 0.5`, where `exp - 1` cancels).
#[inline(always)]
pub fn expm1_f(x: f32) -> f32 {
    let t = x
        * (1.0
            + x * (0.5
                + x * (1.0 / 6.0
                    + x * (1.0 / 24.0
                        + x * (1.0 / 120.0
                            + x * (1.0 / 720.0 + x * (1.0 / 5040.0 + x * (1.0 / 40320.0 + x * (1.0 / 362880.0)))))))));
    let e = exp_f(x) - 1.0;
    if x.abs() < 0.5 {
        t
    } else {
        e
    }
}

/// `tanh` as `expm1(2|x|) / (expm1(2|x|) + 2)` with the sign of `x`.
#[inline(always)]
pub fn tanh_f(x: f32) -> f32 {
    let a = x.abs();
    // Beyond 10, tanh rounds to 1; the comparison keeps NaN.
    let a = if a > 10.0 { 10.0 } else { a };
    let e = expm1_f(2.0 * a);
    (e / (e + 2.0)).copysign(x)
}

/// `1 / (1 + e^-x)`, as `e^x / (1 + e^x)` for negative `x` so that no exponent overflows.
#[inline(always)]
pub fn sigmoid_f(x: f32) -> f32 {
    let e = exp_f(-x.abs());
    let s = 1.0 / (1.0 + e);
    if x >= 0.0 {
        s
    } else {
        e * s
    }
}

/// [`sigmoid_f`] of every element; on SIMD128 four at a time, with the same operations in the
/// same order ([`exp_f`]'s included), so bit for bit the same results (LLVM leaves the scalar
/// loop unvectorised).
fn sigmoid(x: &[f32], out: &mut [f32]) {
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    let done = {
        use core::arch::wasm32::*;
        let (lo, hi) = (f32x4_splat(-104.0), f32x4_splat(89.0));
        let exp = |x: v128| {
            // clamp, NaN kept: x < lo ? lo : (x > hi ? hi : x).
            let c = v128_bitselect(lo, v128_bitselect(hi, x, f32x4_gt(x, hi)), f32x4_lt(x, lo));
            let n = f32x4_nearest(f32x4_mul(c, f32x4_splat(LOG2E)));
            let r = f32x4_sub(f32x4_sub(c, f32x4_mul(n, f32x4_splat(LN2_HI))), f32x4_mul(n, f32x4_splat(LN2_LO)));
            let term = |t: f32, inner: v128| f32x4_add(f32x4_splat(t), f32x4_mul(r, inner));
            let p = term(1.0 / 720.0, f32x4_splat(1.0 / 5040.0));
            let p = term(1.0, term(1.0, term(0.5, term(1.0 / 6.0, term(1.0 / 24.0, term(1.0 / 120.0, p))))));
            let k = i32x4_trunc_sat_f32x4(n);
            let h = i32x4_shr(k, 1);
            let s1 = i32x4_shl(i32x4_add(h, i32x4_splat(127)), 23);
            let s2 = i32x4_shl(i32x4_add(i32x4_sub(k, h), i32x4_splat(127)), 23);
            f32x4_mul(f32x4_mul(p, s1), s2)
        };
        let (xs, outs) = (x.chunks_exact(4), out.chunks_exact_mut(4));
        let done = xs.len().min(outs.len()) * 4;
        for (x, o) in xs.zip(outs) {
            // SAFETY: both chunks hold 4 floats, so the unaligned 16-byte load and store are in bounds.
            unsafe {
                let v = v128_load(x.as_ptr().cast::<v128>());
                let e = exp(f32x4_neg(f32x4_abs(v)));
                let s = f32x4_div(f32x4_splat(1.0), f32x4_add(f32x4_splat(1.0), e));
                let y = v128_bitselect(s, f32x4_mul(e, s), f32x4_ge(v, f32x4_splat(0.0)));
                v128_store(o.as_mut_ptr().cast::<v128>(), y);
            }
        }
        done
    };
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    let done = 0;
    let tail = done.min(out.len());
    map(&x[done.min(x.len())..], &mut out[tail..], sigmoid_f);
}

/// erfc(s a) for `a >= 0` and `s = 1` or `1/sqrt(2)` (`s2 = s^2`), Numerical Recipes' Chebyshev
/// fit (relative error < 1.2e-7). The exponent `-s2 a^2` is formed from a 12-bit head of `a`,
/// whose square is exact, and a tail, so large `a` lose nothing to the rounding of a square.
#[inline(always)]
fn erfc_pos(a: f32, s: f32, s2: f32) -> f32 {
    let t = 1.0 / (1.0 + 0.5 * s * a);
    let p = -1.265_512_2
        + t * (1.000_023_7
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98 + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let ah = f32::from_bits(a.to_bits() & 0xffff_f000);
    let r = t * exp_f(p - s2 * (a - ah) * (a + ah)) * exp_f(-s2 * ah * ah);
    if s * a > 10.5 {
        0.0
    } else {
        r
    }
}

/// `erf`: its Taylor series for `|x| < 0.5`, where `1 - erfc` would cancel, `1 - erfc(|x|)` beyond.
#[inline(always)]
pub fn erf_f(x: f32) -> f32 {
    let x2 = x * x;
    let series = x
        * (1.128_379_2
            + x2 * (-0.376_126_4
                + x2 * (0.112_837_92 + x2 * (-0.026_866_17 + x2 * (0.005_223_978 + x2 * -0.000_854_832_7)))));
    let a = x.abs();
    let y = (1.0 - erfc_pos(a, 1.0, 1.0)).copysign(x);
    if a < 0.5 {
        series
    } else {
        y
    }
}

/// gelu, `0.5 x (1 + erf(x / sqrt 2))`, with `1 + erf(z) = erfc(-z)` so that `x < 0` does not cancel.
#[inline(always)]
pub fn gelu_f(x: f32) -> f32 {
    const S: f32 = std::f32::consts::FRAC_1_SQRT_2;
    let positive = 2.0 - erfc_pos(x, S, 0.5);
    let negative = erfc_pos(x.abs(), S, 0.5);
    0.5 * x * if x > 0.0 { positive } else { negative }
}

/// `ln(1 + u)` for `u` in [0, 1] as `2 atanh(u / (2 + u))`, a series in `s <= 1/3`.
#[inline(always)]
fn log1p_unit(u: f32) -> f32 {
    let s = u / (2.0 + u);
    let s2 = s * s;
    2.0 * s
        * (1.0
            + s2 * (1.0 / 3.0
                + s2 * (0.2
                    + s2 * (1.0 / 7.0
                        + s2 * (1.0 / 9.0
                            + s2 * (1.0 / 11.0 + s2 * (1.0 / 13.0 + s2 * (1.0 / 15.0 + s2 * (1.0 / 17.0)))))))))
}

/// `ln(1 + e^x) = max(x, 0) + ln(1 + e^-|x|)`: no overflow, no loss for `x << 0`.
#[inline(always)]
pub fn softplus_f(x: f32) -> f32 {
    x.max(0.0) + log1p_unit(exp_f(-x.abs()))
}

/// IEEE maxNum: the larger value, a NaN operand ignored (as `f64::max` in the reference).
#[inline(always)]
fn max_num(a: f32, b: f32) -> f32 {
    if a > b || b.is_nan() {
        a
    } else {
        b
    }
}

#[inline(always)]
fn min_num(a: f32, b: f32) -> f32 {
    if a < b || b.is_nan() {
        a
    } else {
        b
    }
}

/// Applies `f` to every element.
#[inline(always)]
fn map(x: &[f32], out: &mut [f32], f: impl Fn(f32) -> f32) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o = f(v);
    }
}

/// Applies `f` in f64 to every element, rounding the results to f32.
#[inline(always)]
fn map64(x: &[f32], out: &mut [f32], f: impl Fn(f64) -> f64) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o = f(v as f64) as f32;
    }
}

fn same_length(x: &[f32], out: &[f32]) -> Result<()> {
    if x.len() != out.len() {
        return Err(Error::Operation(format!("{} input values for {} output values", x.len(), out.len())));
    }
    Ok(())
}

pub fn unary(op: UnaryOp, x: &[f32], out: &mut [f32]) -> Result<()> {
    same_length(x, out)?;
    match op {
        UnaryOp::Abs => map(x, out, f32::abs),
        UnaryOp::Ceil => map(x, out, f32::ceil),
        UnaryOp::Cos => map(x, out, f32::cos),
        UnaryOp::Erf => map(x, out, erf_f),
        UnaryOp::Exp => map(x, out, exp_f),
        UnaryOp::Floor => map(x, out, f32::floor),
        UnaryOp::Identity => out.copy_from_slice(x),
        UnaryOp::Log => map(x, out, f32::ln),
        UnaryOp::Neg => map(x, out, |v| -v),
        UnaryOp::Reciprocal => map(x, out, |v| 1.0 / v),
        UnaryOp::RoundEven => map(x, out, f32::round_ties_even),
        UnaryOp::Sin => map(x, out, f32::sin),
        // 1, -1, or the input itself (zeros keep their sign, NaN stays NaN).
        UnaryOp::Sign => map(x, out, |v| {
            if v > 0.0 {
                1.0
            } else if v < 0.0 {
                -1.0
            } else {
                v
            }
        }),
        UnaryOp::Sqrt => map(x, out, f32::sqrt),
        UnaryOp::Tan => map(x, out, f32::tan),
    }
    Ok(())
}

/// An option cast to float32 as the spec does, as a double.
fn cast(v: f64) -> f64 {
    v as f32 as f64
}

/// clamp's bounds: absent or NaN bounds are unbounded (as `crate::ops::activation` reads them).
fn clamp_bounds(min: Option<crate::operand::Number>, max: Option<crate::operand::Number>) -> (f32, f32) {
    let bound = |v: Option<crate::operand::Number>, default: f32| match v.filter(|v| !v.is_nan()) {
        Some(v) => v.cast_f64(DataType::Float32) as f32,
        None => default,
    };
    (bound(min, f32::NEG_INFINITY), bound(max, f32::INFINITY))
}

/// Activations of one input (prelu, of two, is [`prelu`]).
pub fn activation(op: &Activation, x: &[f32], out: &mut [f32]) -> Result<()> {
    same_length(x, out)?;
    match *op {
        // NaN and -0 stay as they are.
        Activation::Relu => map(x, out, |v| if v < 0.0 { 0.0 } else { v }),
        Activation::Sigmoid => sigmoid(x, out),
        Activation::Tanh => map(x, out, tanh_f),
        Activation::Gelu => map(x, out, gelu_f),
        Activation::LeakyRelu { alpha } => {
            let alpha = alpha as f32;
            map(x, out, |v| if v >= 0.0 { v } else { alpha * v })
        }
        Activation::Clamp { min_value, max_value } => {
            let (lo, hi) = clamp_bounds(min_value, max_value);
            map(x, out, |v| {
                let c = if v < lo { lo } else { v };
                if c > hi {
                    hi
                } else {
                    c
                }
            })
        }
        Activation::Elu { alpha } => {
            let alpha = alpha as f32;
            map(x, out, |v| if v >= 0.0 { v } else { alpha * expm1_f(v) })
        }
        Activation::HardSigmoid { alpha, beta } => {
            let (alpha, beta) = (cast(alpha), cast(beta));
            map64(x, out, |v| {
                let y = alpha * v + beta;
                let y = if y < 0.0 { 0.0 } else { y };
                if y > 1.0 {
                    1.0
                } else {
                    y
                }
            })
        }
        Activation::HardSwish => map64(x, out, |v| {
            let t = v + 3.0;
            let t = if t < 0.0 { 0.0 } else { t };
            let t = if t > 6.0 { 6.0 } else { t };
            v * t / 6.0
        }),
        Activation::Linear { alpha, beta } => {
            let (alpha, beta) = (cast(alpha), cast(beta));
            map64(x, out, |v| alpha * v + beta)
        }
        Activation::Softplus => map(x, out, softplus_f),
        Activation::Softsign => map64(x, out, |v| v / (1.0 + v.abs())),
        Activation::Prelu => {
            return Err(Error::Operation("prelu takes an input and a slope".into()));
        }
    }
    Ok(())
}

/// prelu: `x >= 0 ? x : slope * x` with `input` and `slope` broadcast to the output.
pub fn prelu(
    input: (&OperandDescriptor, &[f32]),
    slope: (&OperandDescriptor, &[f32]),
    out: (&OperandDescriptor, &mut [f32]),
) -> Result<()> {
    broadcast2(input, slope, out, |x, s| if x >= 0.0 { x } else { s * x })
}

pub fn binary(
    op: BinaryOp,
    a: (&OperandDescriptor, &[f32]),
    b: (&OperandDescriptor, &[f32]),
    out: (&OperandDescriptor, &mut [f32]),
) -> Result<()> {
    match op {
        BinaryOp::Add => broadcast2(a, b, out, |a, b| a + b),
        BinaryOp::Sub => broadcast2(a, b, out, |a, b| a - b),
        BinaryOp::Mul => broadcast2(a, b, out, |a, b| a * b),
        BinaryOp::Div => broadcast2(a, b, out, |a, b| a / b),
        BinaryOp::Max => broadcast2(a, b, out, max_num),
        BinaryOp::Min => broadcast2(a, b, out, min_num),
        BinaryOp::Pow => match b.1 {
            // Common exponents, correctly rounded as pow is (pow(-0, 0.5) is +0, pow(-inf,
            // 0.5) is +inf, unlike sqrt).
            [e] if *e == 2.0 => broadcast2(a, b, out, |a, _| a * a),
            [e] if *e == 1.0 => broadcast2(a, b, out, |a, _| a),
            [e] if *e == 0.5 => {
                broadcast2(a, b, out, |a, _| if a == f32::NEG_INFINITY { f32::INFINITY } else { a.sqrt() + 0.0 })
            }
            _ => broadcast2(a, b, out, f32::powf),
        },
    }
}

/// The output shape with the strides of two inputs broadcast to it (0 along broadcast axes),
/// size-1 axes dropped and neighbouring axes merged where both inputs are contiguous across them.
pub struct Broadcast {
    pub dims: Vec<usize>,
    pub strides: [Vec<usize>; 2],
}

/// Row-major strides of `shape` aligned to the last axes of a shape of rank `rank`, 0 along axes
/// it broadcasts (size 1 or missing).
fn aligned_strides(shape: &[u32], rank: usize) -> Vec<usize> {
    let mut s = vec![0usize; rank];
    let mut step = 1usize;
    for (k, &d) in shape.iter().enumerate().rev() {
        let axis = rank - shape.len() + k;
        if d != 1 {
            s[axis] = step;
        }
        step = step.saturating_mul(d as usize);
    }
    s
}

impl Broadcast {
    pub fn new(out: &[u32], a: &[u32], b: &[u32]) -> Result<Broadcast> {
        let rank = out.len();
        let fits =
            |s: &[u32]| s.len() <= rank && s.iter().enumerate().all(|(k, &d)| d == 1 || d == out[rank - s.len() + k]);
        if !fits(a) || !fits(b) {
            return Err(Error::Operation(format!("shapes {a:?} and {b:?} do not broadcast to {out:?}")));
        }
        let (sa, sb) = (aligned_strides(a, rank), aligned_strides(b, rank));
        let mut dims: Vec<usize> = Vec::with_capacity(rank);
        let mut strides: [Vec<usize>; 2] = [Vec::with_capacity(rank), Vec::with_capacity(rank)];
        for k in 0..rank {
            let d = out[k] as usize;
            if d == 1 {
                continue;
            }
            if let Some(&last) = dims.last() {
                let n = dims.len() - 1;
                let merge = |s: &[usize], t: usize| s[n] == t.saturating_mul(d);
                if merge(&strides[0], sa[k]) && merge(&strides[1], sb[k]) {
                    dims[n] = last * d;
                    strides[0][n] = sa[k];
                    strides[1][n] = sb[k];
                    continue;
                }
            }
            dims.push(d);
            strides[0].push(sa[k]);
            strides[1].push(sb[k]);
        }
        if dims.is_empty() {
            dims.push(1);
            strides[0].push(1);
            strides[1].push(1);
        }
        Ok(Broadcast { dims, strides })
    }

    /// Calls `f(row, offset_a, offset_b)` for each run of the last axis, in output order.
    pub fn for_each_row(&self, mut f: impl FnMut(usize, usize, usize) -> Result<()>) -> Result<()> {
        let n = self.dims.len() - 1;
        let rows: usize = self.dims[..n].iter().product();
        let mut index = vec![0usize; n];
        let (mut oa, mut ob) = (0usize, 0usize);
        for row in 0..rows {
            f(row, oa, ob)?;
            // Odometer over the outer axes.
            for k in (0..n).rev() {
                index[k] += 1;
                oa += self.strides[0][k];
                ob += self.strides[1][k];
                if index[k] < self.dims[k] {
                    break;
                }
                oa -= self.strides[0][k] * self.dims[k];
                ob -= self.strides[1][k] * self.dims[k];
                index[k] = 0;
            }
        }
        Ok(())
    }
}

fn out_of_range() -> Error {
    Error::Operation("an operand has fewer values than its shape".into())
}

/// `out = f(a, b)` with numpy broadcasting. The last merged axis runs as one of three
/// vectorisable loops: both inputs contiguous, or one of them a scalar along it.
#[inline(always)]
pub fn broadcast2(
    a: (&OperandDescriptor, &[f32]),
    b: (&OperandDescriptor, &[f32]),
    out: (&OperandDescriptor, &mut [f32]),
    f: impl Fn(f32, f32) -> f32 + Copy,
) -> Result<()> {
    let (ad, a) = a;
    let (bd, b) = b;
    let (od, out) = out;
    if a.len() as u64 != ad.element_count()
        || b.len() as u64 != bd.element_count()
        || out.len() as u64 != od.element_count()
    {
        return Err(Error::Operation("operand lengths differ from their shapes".into()));
    }
    // Same shape: one loop.
    if ad.shape == od.shape && bd.shape == od.shape {
        for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
            *o = f(x, y);
        }
        return Ok(());
    }
    let plan = Broadcast::new(&od.shape, &ad.shape, &bd.shape)?;
    let inner = *plan.dims.last().unwrap_or(&1);
    let (ia, ib) = (*plan.strides[0].last().unwrap_or(&1), *plan.strides[1].last().unwrap_or(&1));
    let mut rows = out.chunks_exact_mut(inner);
    plan.for_each_row(|_, oa, ob| {
        let row = rows.next().ok_or_else(out_of_range)?;
        match (ia, ib) {
            (0, _) => {
                let x = *a.get(oa).ok_or_else(out_of_range)?;
                let y = b.get(ob..ob + inner).ok_or_else(out_of_range)?;
                for (o, &y) in row.iter_mut().zip(y) {
                    *o = f(x, y);
                }
            }
            (_, 0) => {
                let x = a.get(oa..oa + inner).ok_or_else(out_of_range)?;
                let y = *b.get(ob).ok_or_else(out_of_range)?;
                for (o, &x) in row.iter_mut().zip(x) {
                    *o = f(x, y);
                }
            }
            _ => {
                let x = a.get(oa..oa + inner).ok_or_else(out_of_range)?;
                let y = b.get(ob..ob + inner).ok_or_else(out_of_range)?;
                for ((o, &x), &y) in row.iter_mut().zip(x).zip(y) {
                    *o = f(x, y);
                }
            }
        }
        Ok(())
    })
}
