//! Element-wise binary operations: add, sub, mul, div, max, min, pow, with bidirectional
//! broadcasting (spec: "create an element-wise binary operation").

use crate::error::{Error, Result};
use crate::operand::broadcast_shapes;
use crate::operand::{DataType, OperandDescriptor};
use crate::ops::limits::{self, OpLimits, ALL_TYPES, SUPPORTED};
use crate::ops::reference::{map_broadcast, map_broadcast_exact, HostTensor};
use crate::ops::wgsl::{broadcast_offset_fn, coords_fn, value_type, ElementwiseKernel, LowerRequest, Lowering};
use crate::ops::{not_this_family, MethodOptions, Op, OpFamily};
use std::ops::RangeInclusive;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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

    /// The spec allows every type; div and pow are not implemented for int64/uint64.
    fn data_types(self) -> &'static [DataType] {
        match self {
            BinaryOp::Div | BinaryOp::Pow => SUPPORTED,
            _ => ALL_TYPES,
        }
    }
}

/// `fn lt(a, b) -> bool` for two-word values: signed for int64, unsigned for uint64.
pub fn wide_less(data_type: DataType) -> &'static str {
    if data_type == DataType::Int64 {
        "fn lt(a: vec2<u32>, b: vec2<u32>) -> bool { return lt_i64(a, b); }\n"
    } else {
        "fn lt(a: vec2<u32>, b: vec2<u32>) -> bool { return lt_u64(a, b); }\n"
    }
}

pub fn limits() -> Vec<OpLimits> {
    BinaryOp::ALL
        .iter()
        .map(|op| OpLimits {
            name: op.name(),
            operands: vec![
                limits::tensor("a", op.data_types(), 0, 8),
                limits::tensor("b", op.data_types(), 0, 8),
                limits::tensor("output", op.data_types(), 0, 8),
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
pub fn broadcast_pair_kernel(request: &LowerRequest, expression: &str, extra_helpers: &str) -> Result<Lowering> {
    let out = request.outputs[0];
    let rank = out.rank();
    let mut helpers = coords_fn("out", &out.shape);
    helpers += &broadcast_offset_fn("a", &request.inputs[0].shape, rank);
    helpers += &broadcast_offset_fn("b", &request.inputs[1].shape, rank);
    helpers += extra_helpers;
    let body = format!(
        "    let c = coords_out(i);\n    let a = load_a(offset_a(c));\n    let b = load_b(offset_b(c));\n    return {expression};"
    );
    let launch = ElementwiseKernel { inputs: vec![("a", request.inputs[0]), ("b", request.inputs[1])], output: out, helpers, body }
        .build()?;
    Ok(Lowering::single(launch))
}

/// add, sub, mul (wrapping), max and min of two-word values.
fn lower_wide(op: BinaryOp, request: &LowerRequest) -> Result<Lowering> {
    let expression = match op {
        BinaryOp::Add => "add64(a, b)",
        BinaryOp::Sub => "sub64(a, b)",
        BinaryOp::Mul => "mul64(a, b)",
        BinaryOp::Max => "select(a, b, lt(a, b))",
        BinaryOp::Min => "select(a, b, lt(b, a))",
        BinaryOp::Div | BinaryOp::Pow => {
            return Err(Error::NotSupported(format!("{} of {} is not supported", op.name(), request.inputs[0].data_type)))
        }
    };
    broadcast_pair_kernel(request, expression, wide_less(request.inputs[0].data_type))
}

pub fn lower(op: BinaryOp, request: &LowerRequest) -> Result<Lowering> {
    if request.inputs[0].data_type.is_wide() {
        return lower_wide(op, request);
    }
    let (expression, helpers) = expression(op, value_type(request.inputs[0].data_type)?);
    broadcast_pair_kernel(request, &expression, helpers)
}

/// A WGSL expression of `a` and `b` of value type `vt` (not two-word) computing `op`, with the
/// helpers it needs.
pub fn expression(op: BinaryOp, vt: &str) -> (String, &'static str) {
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
        // Integer exponents multiply exactly instead of going through exp2/log2, whose error
        // grows with the result's exponent; other exponents use WGSL's pow.
        (BinaryOp::Pow, "f32") => POW_F32,
        (BinaryOp::Pow, "i32") => "fn pow_i(a: i32, b: i32) -> i32 {\n    if (b < 0) {\n        if (a == 1) { return 1; }\n        if (a == -1) { return select(1, -1, (b & 1) == 1); }\n        return 0;\n    }\n    var base = a; var e = b; var r = 1;\n    loop { if (e == 0) { break; } if ((e & 1) == 1) { r = r * base; } base = base * base; e = e >> 1u; }\n    return r;\n}\n",
        (BinaryOp::Pow, _) => "fn pow_i(a: u32, b: u32) -> u32 {\n    var base = a; var e = b; var r = 1u;\n    loop { if (e == 0u) { break; } if ((e & 1u) == 1u) { r = r * base; } base = base * base; e = e >> 1u; }\n    return r;\n}\n",
        _ => "",
    };
    (expression, helpers)
}

const POW_F32: &str = "// a * b of 32-bit mantissas (value m / 2^31) as the high 32 bits of the 64-bit product,
// renormalised; returns (mantissa, exponent increment).
fn mul_m(a: u32, b: u32) -> vec2<u32> {
    let al = a & 0xffffu; let ah = a >> 16u; let bl = b & 0xffffu; let bh = b >> 16u;
    let ll = al * bl; let lh = al * bh; let hl = ah * bl; let hh = ah * bh;
    let mid = (ll >> 16u) + (lh & 0xffffu) + (hl & 0xffffu);
    let hi = hh + (lh >> 16u) + (hl >> 16u) + (mid >> 16u);
    let lo = (mid << 16u) | (ll & 0xffffu);
    if ((hi & 0x80000000u) != 0u) { return vec2<u32>(hi, 1u); }
    return vec2<u32>((hi << 1u) | (lo >> 31u), 0u);
}
fn pow_f(a: f32, b: f32) -> f32 {
    // Integer exponents: square and multiply on 32-bit integer mantissas, rounded to f32 once at
    // the end, so the result is correctly rounded up to the truncation of the 32-bit products.
    // (Float tricks like Dekker's products do not survive shader compilers' algebraic rewrites.)
    if (b == floor(b) && abs(b) <= 1024.0 && a != 0.0 && abs(a) >= 1.17549435e-38 && abs(a) < 3.4e38) {
        let bits = bitcast<u32>(a);
        var base = ((bits & 0x7fffffu) | 0x800000u) << 8u;
        var base_e = i32((bits >> 23u) & 0xffu) - 127;
        var m = 0x80000000u;
        var m_e = 0;
        var n = u32(abs(b));
        loop {
            if (n == 0u) { break; }
            if ((n & 1u) == 1u) { let p = mul_m(m, base); m = p.x; m_e = m_e + base_e + i32(p.y); }
            n = n >> 1u;
            if (n != 0u) { let p = mul_m(base, base); base = p.x; base_e = 2 * base_e + i32(p.y); }
            if (abs(base_e) > 1000 || abs(m_e) > 1000) { break; }
        }
        if (n == 0u && m_e >= -126 && m_e <= 127) {
            // Round the 32-bit mantissa to 24 bits, to nearest even.
            var m24 = m >> 8u;
            let rest = m & 0xffu;
            if (rest > 0x80u || (rest == 0x80u && (m24 & 1u) == 1u)) { m24 = m24 + 1u; }
            var e = m_e;
            if (m24 == 0x1000000u) { m24 = m24 >> 1u; e = e + 1; }
            if (e <= 127) {
                let odd = (u32(abs(b)) & 1u) == 1u;
                let sign = select(0u, 0x80000000u, a < 0.0 && odd);
                let r = bitcast<f32>(sign | (u32(e + 127) << 23u) | (m24 & 0x7fffffu));
                return select(r, 1.0 / r, b < 0.0);
            }
        }
    }
    if (b == floor(b) && abs(b) <= 1024.0) {
        // Zero, subnormal or huge bases, and results outside the normal range: plain squaring.
        var base = a; var n = u32(abs(b)); var r = 1.0;
        loop { if (n == 0u) { break; } if ((n & 1u) == 1u) { r = r * base; } base = base * base; n = n >> 1u; }
        return select(r, 1.0 / r, b < 0.0);
    }
    return pow(a, b);
}
";

pub fn reference(op: BinaryOp, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
    if outputs[0].data_type.is_wide() {
        // Exact; the results wrap to 64 bits.
        let f: fn(i128, i128) -> i128 = match op {
            BinaryOp::Add => |a, b| a + b,
            BinaryOp::Sub => |a, b| a - b,
            BinaryOp::Mul => |a, b| a.wrapping_mul(b),
            BinaryOp::Max => |a, b| a.max(b),
            BinaryOp::Min => |a, b| a.min(b),
            BinaryOp::Div | BinaryOp::Pow => {
                return Err(Error::NotSupported(format!("{} of {} is not supported", op.name(), outputs[0].data_type)))
            }
        };
        return map_broadcast_exact(inputs, &outputs[0], |v| f(v[0], v[1]));
    }
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

/// The registry's entry for this file's operators (see [`OpFamily`]).
pub struct Family;

impl OpFamily for Family {
    fn limits(&self) -> Vec<OpLimits> {
        limits()
    }

    fn from_options(&self, name: &str, _: &dyn MethodOptions) -> Result<Op> {
        Ok(match name {
            "add" => Op::Binary(BinaryOp::Add),
            "sub" => Op::Binary(BinaryOp::Sub),
            "mul" => Op::Binary(BinaryOp::Mul),
            "div" => Op::Binary(BinaryOp::Div),
            "max" => Op::Binary(BinaryOp::Max),
            "min" => Op::Binary(BinaryOp::Min),
            "pow" => Op::Binary(BinaryOp::Pow),
            other => return Err(crate::ops::unknown_method(other)),
        })
    }

    fn name(&self, op: &Op) -> &'static str {
        match op {
            Op::Binary(op) => op.name(),
            _ => "",
        }
    }

    fn input_count(&self, op: &Op) -> RangeInclusive<usize> {
        match op {
            Op::Binary(_) => 2..=2,
            _ => 1..=1,
        }
    }

    fn validate(&self, op: &Op, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
        match op {
            Op::Binary(o) => validate(*o, inputs),
            _ => Err(not_this_family(op)),
        }
    }

    fn lower(&self, op: &Op, request: &LowerRequest) -> Result<Lowering> {
        match op {
            Op::Binary(o) => lower(*o, request),
            _ => Err(not_this_family(op)),
        }
    }

    fn reference(&self, op: &Op, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
        match op {
            Op::Binary(o) => reference(*o, inputs, outputs),
            _ => Err(not_this_family(op)),
        }
    }
}
