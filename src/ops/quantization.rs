//! quantizeLinear and dequantizeLinear with block-wise broadcast scale and zero point: each
//! dimension of `scale` (and of `zeroPoint`, of the same shape) divides the input's, and one
//! scale value covers a block of `input / scale` elements along each axis.
//!
//! quantizeLinear computes `clamp(roundEven(input / scale) + zeroPoint)` to the range of the
//! zero point's type, the division rounded to the input's type first as the spec's emulation
//! does; dequantizeLinear computes `(input - zeroPoint) * scale`.

use crate::error::{Error, Result};
use crate::operand::{strides, MAX_RANK};
use crate::operand::{DataType, OperandDescriptor};
use crate::ops::limits::{self, OpLimits, FLOATS};
use crate::ops::reference::{coords, round_to, HostTensor};
use crate::ops::wgsl::{coords_fn, ElementwiseKernel, LowerRequest, Lowering};
use crate::ops::{not_this_family, MethodOptions, Op, OpFamily};
use std::ops::RangeInclusive;

/// The integer types of the quantized side (int4/uint4 are not supported by this implementation).
const QUANTIZED: &[DataType] = &[DataType::Uint8, DataType::Int8, DataType::Uint32, DataType::Int32];

pub fn limits() -> Vec<OpLimits> {
    let rank = MAX_RANK as u32;
    vec![
        OpLimits {
            name: "dequantizeLinear",
            operands: vec![
                limits::tensor("input", QUANTIZED, 0, rank),
                limits::tensor("scale", FLOATS, 0, rank),
                limits::tensor("zeroPoint", QUANTIZED, 0, rank),
                limits::tensor("output", FLOATS, 0, rank),
            ],
        },
        OpLimits {
            name: "quantizeLinear",
            operands: vec![
                limits::tensor("input", FLOATS, 0, rank),
                limits::tensor("scale", FLOATS, 0, rank),
                limits::tensor("zeroPoint", QUANTIZED, 0, rank),
                limits::tensor("output", QUANTIZED, 0, rank),
            ],
        },
    ]
}

/// The spec's "blockwise broadcasting": equal ranks and each dimension of `from` divides the
/// dimension of `to`.
fn blockwise_broadcastable(from: &[u32], to: &[u32]) -> bool {
    from.len() == to.len() && from.iter().zip(to).all(|(&f, &t)| f != 0 && t % f == 0)
}

fn validate_common(name: &str, inputs: &[&OperandDescriptor]) -> Result<()> {
    let (input, scale, zero_point) = (inputs[0], inputs[1], inputs[2]);
    let l = limits::of(name)?;
    // Types first, in the spec's order, then ranks (the table's "same rank as input").
    for (limit, d) in l.operands.iter().zip([input, scale, zero_point]) {
        if !limit.data_types.contains(&d.data_type) {
            return Err(Error::Type(format!("{name}: {} has data type {} which is not allowed", limit.name, d.data_type)));
        }
    }
    limits::check(&l.operands[0], input)?;
    if scale.rank() != input.rank() || zero_point.rank() != input.rank() {
        return Err(Error::Type(format!(
            "{name}: scale {scale} and zeroPoint {zero_point} must have the rank of input {input}"
        )));
    }
    if scale.shape != zero_point.shape {
        return Err(Error::Type(format!("{name}: scale {scale} and zeroPoint {zero_point} must have the same shape")));
    }
    if !blockwise_broadcastable(&scale.shape, &input.shape) {
        return Err(Error::Type(format!(
            "{name}: scale shape {:?} is not blockwise broadcastable to input shape {:?}",
            scale.shape, input.shape
        )));
    }
    Ok(())
}

pub fn validate_dequantize_linear(inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
    let (input, scale, zero_point) = (inputs[0], inputs[1], inputs[2]);
    if zero_point.data_type != input.data_type {
        return Err(Error::Type(format!(
            "dequantizeLinear: zeroPoint is {} but input is {}",
            zero_point.data_type, input.data_type
        )));
    }
    validate_common("dequantizeLinear", inputs)?;
    Ok(vec![OperandDescriptor::new(scale.data_type, input.shape.clone())])
}

pub fn validate_quantize_linear(inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
    let (input, scale, zero_point) = (inputs[0], inputs[1], inputs[2]);
    if scale.data_type != input.data_type {
        return Err(Error::Type(format!(
            "quantizeLinear: scale is {} but input is {}",
            scale.data_type, input.data_type
        )));
    }
    validate_common("quantizeLinear", inputs)?;
    Ok(vec![OperandDescriptor::new(zero_point.data_type, input.shape.clone())])
}

/// WGSL `fn param_index(i: u32) -> u32`: the scale/zeroPoint element of input element `i`.
fn param_index_fn(input: &[u32], scale: &[u32]) -> String {
    let scale_strides = strides(scale);
    let terms: Vec<String> = (0..input.len())
        .filter(|&a| scale[a] != 1)
        .map(|a| format!("(c[{a}] / {}u) * {}u", input[a] / scale[a], scale_strides[a]))
        .collect();
    let expr = if terms.is_empty() { "0u".to_string() } else { terms.join(" + ") };
    format!("{}fn param_index(i: u32) -> u32 {{ let c = coords_in(i); return {expr}; }}\n", coords_fn("in", input))
}

fn param_index(i: usize, input: &[u32], scale: &[u32]) -> usize {
    let c = coords(i, input);
    let s = strides(scale);
    (0..input.len()).map(|a| c[a] / (input[a] / scale[a]) as usize * s[a] as usize).sum()
}

/// WGSL converting f32 `q` to a quantized type, saturating to its range. The 32-bit maxima
/// are not f32 values: anything from 2^31 (2^32) up gives the maximum exactly.
fn saturate(data_type: DataType) -> &'static str {
    match data_type {
        DataType::Int8 => "i32(clamp(q, -128.0, 127.0))",
        DataType::Uint8 => "u32(clamp(q, 0.0, 255.0))",
        DataType::Int32 => "select(i32(clamp(q, -2147483648.0, 2147483520.0)), 2147483647, q >= 2147483648.0)",
        _ => "select(u32(clamp(q, 0.0, 4294967040.0)), 4294967295u, q >= 4294967296.0)",
    }
}

pub fn lower_dequantize_linear(request: &LowerRequest) -> Result<Lowering> {
    let (input, scale, zero_point) = (request.inputs[0], request.inputs[1], request.inputs[2]);
    let body = "    let p = param_index(i);\n    return (f32(load_input(i)) - f32(load_zero_point(p))) * load_scale(p);".to_string();
    let launch = ElementwiseKernel {
        inputs: vec![("input", input), ("scale", scale), ("zero_point", zero_point)],
        output: request.outputs[0],
        helpers: param_index_fn(&input.shape, &scale.shape),
        body,
    }
    .build()?;
    Ok(Lowering::single(launch))
}

pub fn lower_quantize_linear(request: &LowerRequest) -> Result<Lowering> {
    let (input, scale, zero_point) = (request.inputs[0], request.inputs[1], request.inputs[2]);
    let out = request.outputs[0];
    let quotient = match input.data_type {
        DataType::Float16 => "f16_to_f32(f32_to_f16(load_input(i) / load_scale(p)))",
        _ => "load_input(i) / load_scale(p)",
    };
    let body = format!(
        "    let p = param_index(i);\n    let q = round({quotient}) + f32(load_zero_point(p));\n    return {};",
        saturate(out.data_type)
    );
    let launch = ElementwiseKernel {
        inputs: vec![("input", input), ("scale", scale), ("zero_point", zero_point)],
        output: out,
        helpers: param_index_fn(&input.shape, &scale.shape),
        body,
    }
    .build()?;
    Ok(Lowering::single(launch))
}

pub fn reference_dequantize_linear(inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
    let (input, scale, zero_point) = (&inputs[0], &inputs[1], &inputs[2]);
    let out = &outputs[0];
    let data = (0..input.data.len())
        .map(|i| {
            let p = param_index(i, input.shape(), scale.shape());
            round_to((input.data[i] - zero_point.data[p]) * scale.data[p], out.data_type)
        })
        .collect();
    Ok(vec![HostTensor::new(out.clone(), data)?])
}

/// Rounds half to even (`roundEven`).
fn round_even(v: f64) -> f64 {
    let r = v.round();
    if (v - v.trunc()).abs() == 0.5 { 2.0 * (v / 2.0).round() } else { r }
}

pub fn reference_quantize_linear(inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
    let (input, scale, zero_point) = (&inputs[0], &inputs[1], &inputs[2]);
    let out = &outputs[0];
    let data = (0..input.data.len())
        .map(|i| {
            let p = param_index(i, input.shape(), scale.shape());
            let quotient = round_to(input.data[i] / scale.data[p], input.descriptor.data_type);
            // round_to saturates to the output type's range.
            round_to(round_even(quotient) + zero_point.data[p], out.data_type)
        })
        .collect();
    Ok(vec![HostTensor::new(out.clone(), data)?])
}

/// The registry's entry for this file's operators (see [`OpFamily`]).
pub struct Family;

impl OpFamily for Family {
    fn limits(&self) -> Vec<OpLimits> {
        limits()
    }

    fn from_options(&self, name: &str, _: &dyn MethodOptions) -> Result<Op> {
        Ok(match name {
            "quantizeLinear" => Op::QuantizeLinear,
            "dequantizeLinear" => Op::DequantizeLinear,
            other => return Err(crate::ops::unknown_method(other)),
        })
    }

    fn name(&self, op: &Op) -> &'static str {
        match op {
            Op::QuantizeLinear => "quantizeLinear",
            Op::DequantizeLinear => "dequantizeLinear",
            _ => "",
        }
    }

    fn input_count(&self, op: &Op) -> RangeInclusive<usize> {
        match op {
            Op::QuantizeLinear | Op::DequantizeLinear => 3..=3,
            _ => 1..=1,
        }
    }

    fn validate(&self, op: &Op, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
        match op {
            Op::QuantizeLinear => validate_quantize_linear(inputs),
            Op::DequantizeLinear => validate_dequantize_linear(inputs),
            _ => Err(not_this_family(op)),
        }
    }

    fn lower(&self, op: &Op, request: &LowerRequest) -> Result<Lowering> {
        match op {
            Op::QuantizeLinear => lower_quantize_linear(request),
            Op::DequantizeLinear => lower_dequantize_linear(request),
            _ => Err(not_this_family(op)),
        }
    }

    fn reference(&self, op: &Op, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
        match op {
            Op::QuantizeLinear => reference_quantize_linear(inputs, outputs),
            Op::DequantizeLinear => reference_dequantize_linear(inputs, outputs),
            _ => Err(not_this_family(op)),
        }
    }
}
