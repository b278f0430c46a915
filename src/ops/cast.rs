//! cast: conversion between data types, with the spec's table of behaviours.
//!
//! - to a float type: the nearest representable value (ties to even), out of range to infinity;
//!   integers above 2^24 are rounded to float32 explicitly, since WGSL leaves the rounding
//!   direction of integer-to-float conversion to the implementation;
//! - float to integer: truncation toward zero; out of range is implementation-defined in the
//!   spec, here saturation to the target's range, NaN giving 0;
//! - integer to integer: the lowest bits of the two's complement value, reinterpreted (int64 and
//!   uint64 are two words; narrower integers are sign- or zero-extended to them).

use crate::error::{Error, Result};
use crate::operand::{DataType, OperandDescriptor};
use crate::ops::limits::{self, OpLimits, ALL_TYPES};
use crate::ops::reference::{round_to, HostTensor};
use crate::ops::wgsl::{value_type, ElementwiseKernel, LowerRequest, Lowering};
use crate::ops::{not_this_family, MethodOptions, Op, OpFamily};

pub fn limits() -> Vec<OpLimits> {
    vec![OpLimits {
        name: "cast",
        operands: vec![limits::tensor("input", ALL_TYPES, 0, 8), limits::tensor("output", ALL_TYPES, 0, 8)],
    }]
}

pub fn validate(data_type: DataType, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
    let l = limits::of("cast")?;
    limits::check(&l.operands[0], inputs[0])?;
    if !l.operands[1].data_types.contains(&data_type) {
        return Err(Error::Type(format!("cannot cast to {data_type}: it is not an allowed output data type")));
    }
    Ok(vec![OperandDescriptor::new(data_type, inputs[0].shape.clone())])
}

/// Exact round-to-nearest-even integer to f32 conversions.
const INT_TO_F32: &str = "fn u32_to_f32(v: u32) -> f32 {
    if (v < 0x1000000u) { return f32(v); }
    let shift = 8u - countLeadingZeros(v);
    var m = v >> shift;
    let rem = v & ((1u << shift) - 1u);
    let half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (m & 1u) == 1u)) { m = m + 1u; }
    return ldexp(f32(m), i32(shift));
}
fn i32_to_f32(v: i32) -> f32 {
    let m = u32_to_f32(select(bitcast<u32>(v), 0u - bitcast<u32>(v), v < 0));
    return select(m, -m, v < 0);
}
";

/// Saturating truncations of f32 to the integer types; NaN (tested on the bits, which no
/// fast-math assumption can remove) gives 0.
const F32_TO_INT: &str = "fn is_nan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
fn f32_to_i32(x: f32) -> i32 {
    if (is_nan(x)) { return 0; }
    if (x >= 2147483648.0) { return 2147483647; }
    if (x <= -2147483648.0) { return -2147483647 - 1; }
    return i32(x);
}
fn f32_to_u32(x: f32) -> u32 {
    if (x >= 4294967296.0) { return 4294967295u; }
    if (!(x > 0.0)) { return 0u; }
    return u32(x);
}
fn f32_to_i8(x: f32) -> i32 {
    if (is_nan(x)) { return 0; }
    return i32(clamp(x, -128.0, 127.0));
}
fn f32_to_u8(x: f32) -> u32 {
    if (is_nan(x)) { return 0u; }
    return u32(clamp(x, 0.0, 255.0));
}
";

pub fn lower(request: &LowerRequest) -> Result<Lowering> {
    let (e, helpers) = expression(request.inputs[0].data_type, request.outputs[0].data_type)?;
    let launch = ElementwiseKernel {
        inputs: vec![("input", request.inputs[0])],
        output: request.outputs[0],
        helpers: helpers.to_string(),
        body: format!("    let x = load_input(i);\n    return {e};"),
    }
    .build()?;
    Ok(Lowering::single(launch))
}

/// A WGSL expression of `x` (of `input`'s value type) converting it to `output`'s value type,
/// with the helpers it needs.
pub fn expression(input: DataType, output: DataType) -> Result<(&'static str, &'static str)> {
    let from = value_type(input)?;
    value_type(output)?;
    // Packed int8/uint8 outputs keep the low 8 bits of the returned word: the integer wrap.
    let e = match (input, from, output) {
        // Two-word values (the kernel includes the two-word helpers).
        (DataType::Int64, _, DataType::Float32 | DataType::Float16) => "i64_to_f32(x)",
        (DataType::Uint64, _, DataType::Float32 | DataType::Float16) => "u64_to_f32(x)",
        (DataType::Int64 | DataType::Uint64, _, DataType::Int64 | DataType::Uint64) => "x",
        (DataType::Int64 | DataType::Uint64, _, DataType::Int32 | DataType::Int8) => "bitcast<i32>(x.x)",
        (DataType::Int64 | DataType::Uint64, _, _) => "x.x",
        (_, "f32", DataType::Int64) => "f32_to_i64(x)",
        (_, "f32", DataType::Uint64) => "f32_to_u64(x)",
        (_, "i32", DataType::Int64 | DataType::Uint64) => "vec2<u32>(bitcast<u32>(x), select(0u, 0xffffffffu, x < 0))",
        (_, _, DataType::Int64 | DataType::Uint64) => "vec2<u32>(x, 0u)",
        _ => narrow_expression(from, output),
    };
    Ok((e, if from == "f32" { F32_TO_INT } else { INT_TO_F32 }))
}

/// The conversion of `x` (of WGSL value type `from`) to a type of 32 bits or less.
fn narrow_expression(from: &str, output: DataType) -> &'static str {
    match (from, output) {
        ("f32", DataType::Float32 | DataType::Float16) => "x",
        ("i32", DataType::Float32 | DataType::Float16) => "i32_to_f32(x)",
        (_, DataType::Float32 | DataType::Float16) => "u32_to_f32(x)",
        ("f32", DataType::Int32) => "f32_to_i32(x)",
        ("f32", DataType::Uint32) => "f32_to_u32(x)",
        ("f32", DataType::Int8) => "f32_to_i8(x)",
        ("f32", _) => "f32_to_u8(x)",
        ("i32", DataType::Int32 | DataType::Int8) | ("u32", DataType::Uint32 | DataType::Uint8) => "x",
        ("u32", _) => "bitcast<i32>(x)",
        _ => "bitcast<u32>(x)",
    }
}

pub fn reference(inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
    let input = &inputs[0];
    let out = &outputs[0];
    if input.descriptor.data_type.is_float() {
        // Rounded to a float type; truncated and saturated to an integer type.
        return Ok(vec![HostTensor::new(out.clone(), input.data.iter().map(|&v| round_to(v, out.data_type)).collect())?]);
    }
    let values = (0..input.data.len()).map(|i| input.integer(i));
    if out.data_type.is_float() {
        // `i128 as f32` rounds once to nearest even; float16 through float32 is exact below 2^24,
        // beyond which float16 is infinite anyway.
        let data = values.map(|v| round_to(v as f32 as f64, out.data_type)).collect();
        return Ok(vec![HostTensor::new(out.clone(), data)?]);
    }
    // The lowest bits of the two's complement value (int64/uint64 wrap in `from_exact`).
    let data = values
        .map(|v| match out.data_type {
            DataType::Int32 => v as i32 as i128,
            DataType::Uint32 => v as u32 as i128,
            DataType::Int8 => v as i8 as i128,
            DataType::Uint8 => v as u8 as i128,
            _ => v,
        })
        .collect();
    Ok(vec![HostTensor::from_exact(out.clone(), data)?])
}

/// The registry's entry for this file's operators (see [`OpFamily`]).
pub struct Family;

impl OpFamily for Family {
    fn limits(&self) -> Vec<OpLimits> {
        limits()
    }

    fn from_options(&self, name: &str, p: &dyn MethodOptions) -> Result<Op> {
        Ok(match name {
            "cast" => Op::Cast { data_type: p.data_type("dataType")? },
            other => return Err(crate::ops::unknown_method(other)),
        })
    }

    fn name(&self, op: &Op) -> &'static str {
        match op {
            Op::Cast { .. } => "cast",
            _ => "",
        }
    }

    fn validate(&self, op: &Op, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
        match op {
            Op::Cast { data_type } => validate(*data_type, inputs),
            _ => Err(not_this_family(op)),
        }
    }

    fn lower(&self, op: &Op, request: &LowerRequest) -> Result<Lowering> {
        match op {
            Op::Cast { .. } => lower(request),
            _ => Err(not_this_family(op)),
        }
    }

    fn reference(&self, op: &Op, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
        match op {
            Op::Cast { .. } => reference(inputs, outputs),
            _ => Err(not_this_family(op)),
        }
    }
}
