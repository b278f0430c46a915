//! The float64 CPU reference: tensors as `f64` values, conversion from and to the bytes of each
//! data type, and helpers the families' reference implementations share. int64 and uint64 values
//! are also kept exactly (`i128`), since f64 holds integers only up to 2^53.

use crate::error::{Error, Result};
use crate::operand::strides;
use crate::operand::{DataType, Number, OperandDescriptor};

/// A tensor on the host with its values widened to `f64`.
#[derive(Debug, Clone, PartialEq)]
pub struct HostTensor {
    pub descriptor: OperandDescriptor,
    /// The values; int64/uint64 ones beyond 2^53 are the nearest doubles.
    pub data: Vec<f64>,
    /// int64/uint64 only (empty for other types): the exact values.
    pub exact: Vec<i128>,
}

impl HostTensor {
    /// A tensor of `data` (int64/uint64 values are taken as doubles, saturated to the type).
    pub fn new(descriptor: OperandDescriptor, data: Vec<f64>) -> Result<HostTensor> {
        if data.len() as u64 != descriptor.element_count() {
            return Err(Error::Type(format!("{} values for {descriptor}", data.len())));
        }
        let exact = match descriptor.data_type {
            DataType::Int64 => data.iter().map(|&v| v as i64 as i128).collect(),
            DataType::Uint64 => data.iter().map(|&v| v as u64 as i128).collect(),
            _ => Vec::new(),
        };
        Ok(HostTensor { descriptor, data, exact })
    }

    /// A tensor of exact integers, wrapped to an int64/uint64 type; other types get the values as
    /// doubles rounded to the type.
    pub fn from_exact(descriptor: OperandDescriptor, values: Vec<i128>) -> Result<HostTensor> {
        let t = descriptor.data_type;
        if !t.is_wide() {
            return HostTensor::new(descriptor, values.iter().map(|&v| round_to(v as f64, t)).collect());
        }
        if values.len() as u64 != descriptor.element_count() {
            return Err(Error::Type(format!("{} values for {descriptor}", values.len())));
        }
        let exact: Vec<i128> = values.into_iter().map(|v| wrap(v, t)).collect();
        let data = exact.iter().map(|&v| v as f64).collect();
        Ok(HostTensor { descriptor, data, exact })
    }

    pub fn from_bytes(descriptor: OperandDescriptor, bytes: &[u8]) -> Result<HostTensor> {
        if bytes.len() as u64 != descriptor.byte_length() {
            return Err(Error::Type(format!("{} bytes for {descriptor}", bytes.len())));
        }
        let t = descriptor.data_type;
        if t.is_wide() {
            let values = bytes
                .chunks_exact(8)
                .map(|b| u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]) as i128)
                .collect();
            return HostTensor::from_exact(descriptor, values);
        }
        let data = decode(bytes, t);
        Ok(HostTensor { descriptor, data, exact: Vec::new() })
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        if self.descriptor.data_type.is_wide() {
            return self.exact.iter().flat_map(|&v| (v as u64).to_le_bytes()).collect();
        }
        encode(&self.data, self.descriptor.data_type)
    }

    /// The exact integer at linear index `i`: int64/uint64 values, or others truncated.
    pub fn integer(&self, i: usize) -> i128 {
        if self.descriptor.data_type.is_wide() {
            self.exact[i]
        } else {
            self.data[i] as i128
        }
    }

    pub fn shape(&self) -> &[u32] {
        &self.descriptor.shape
    }

    /// The value at a multi-index with numpy broadcasting to an output of rank `coords.len()`.
    pub fn at_broadcast(&self, coords: &[usize]) -> f64 {
        self.data[self.broadcast_index(coords)]
    }

    fn broadcast_index(&self, coords: &[usize]) -> usize {
        let shape = &self.descriptor.shape;
        let offset = coords.len() - shape.len();
        let strides = strides(shape);
        let mut index = 0u64;
        for (axis, &dim) in shape.iter().enumerate() {
            if dim != 1 {
                index += coords[axis + offset] as u64 * strides[axis];
            }
        }
        index as usize
    }
}

/// `v` wrapped to the two's complement range of an int64/uint64 type (unchanged for others).
pub fn wrap(v: i128, data_type: DataType) -> i128 {
    match data_type {
        DataType::Int64 => v as i64 as i128,
        DataType::Uint64 => v as u64 as i128,
        _ => v,
    }
}

/// The multi-index of linear index `index` in `shape`.
pub fn coords(mut index: usize, shape: &[u32]) -> Vec<usize> {
    let mut c = vec![0usize; shape.len()];
    for axis in (0..shape.len()).rev() {
        c[axis] = index % shape[axis] as usize;
        index /= shape[axis] as usize;
    }
    c
}

/// The linear index of a multi-index in `shape`.
pub fn linear(coords: &[usize], shape: &[u32]) -> usize {
    coords.iter().zip(shape).fold(0usize, |acc, (&c, &d)| acc * d as usize + c)
}

/// Rounds a value to what `data_type` can hold, with the spec's cast semantics: floats round to
/// nearest (f32/f16), integers truncate toward zero and saturate (NaN becomes 0).
pub fn round_to(value: f64, data_type: DataType) -> f64 {
    match data_type {
        DataType::Float32 => value as f32 as f64,
        DataType::Float16 => half::f16::from_f64(value).to_f64(),
        DataType::Int32 => saturate(value, i32::MIN as f64, i32::MAX as f64),
        DataType::Uint32 => saturate(value, 0.0, u32::MAX as f64),
        DataType::Int64 => saturate(value, i64::MIN as f64, i64::MAX as f64),
        DataType::Uint64 => saturate(value, 0.0, u64::MAX as f64),
        DataType::Int8 => saturate(value, i8::MIN as f64, i8::MAX as f64),
        DataType::Uint8 => saturate(value, 0.0, u8::MAX as f64),
    }
}

fn saturate(value: f64, min: f64, max: f64) -> f64 {
    if value.is_nan() {
        0.0
    } else {
        value.trunc().clamp(min, max)
    }
}

/// Little-endian bytes of values converted to `data_type` (see [`round_to`]).
pub fn encode(values: &[f64], data_type: DataType) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() * data_type.byte_size() as usize);
    for &v in values {
        let v = round_to(v, data_type);
        match data_type {
            DataType::Float32 => out.extend_from_slice(&(v as f32).to_le_bytes()),
            DataType::Float16 => out.extend_from_slice(&half::f16::from_f64(v).to_le_bytes()),
            DataType::Int32 => out.extend_from_slice(&(v as i32).to_le_bytes()),
            DataType::Uint32 => out.extend_from_slice(&(v as u32).to_le_bytes()),
            DataType::Int64 => out.extend_from_slice(&(v as i64).to_le_bytes()),
            DataType::Uint64 => out.extend_from_slice(&(v as u64).to_le_bytes()),
            DataType::Int8 => out.push(v as i8 as u8),
            DataType::Uint8 => out.push(v as u8),
        }
    }
    out
}

/// Values of little-endian bytes of `data_type`. Trailing bytes short of an element are ignored.
pub fn decode(bytes: &[u8], data_type: DataType) -> Vec<f64> {
    let size = data_type.byte_size() as usize;
    bytes
        .chunks_exact(size)
        .map(|b| match data_type {
            DataType::Float32 => f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
            DataType::Float16 => half::f16::from_le_bytes([b[0], b[1]]).to_f64(),
            DataType::Int32 => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
            DataType::Uint32 => u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
            DataType::Int64 => i64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]) as f64,
            DataType::Uint64 => u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]) as f64,
            DataType::Int8 => b[0] as i8 as f64,
            DataType::Uint8 => b[0] as f64,
        })
        .collect()
}

/// Applies `f` element-wise over inputs broadcast to the output descriptor, rounding results to
/// the output type.
pub fn map_broadcast(
    inputs: &[HostTensor],
    output: &OperandDescriptor,
    f: impl Fn(&[f64]) -> f64,
) -> Result<Vec<HostTensor>> {
    let count = output.element_count() as usize;
    let mut data = Vec::with_capacity(count);
    let mut args = vec![0.0; inputs.len()];
    for i in 0..count {
        let c = coords(i, &output.shape);
        for (arg, input) in args.iter_mut().zip(inputs) {
            *arg = input.at_broadcast(&c);
        }
        data.push(round_to(f(&args), output.data_type));
    }
    Ok(vec![HostTensor::new(output.clone(), data)?])
}

/// [`map_broadcast`] on exact integers (see [`HostTensor::integer`]); an int64/uint64 result
/// wraps to its type.
pub fn map_broadcast_exact(
    inputs: &[HostTensor],
    output: &OperandDescriptor,
    f: impl Fn(&[i128]) -> i128,
) -> Result<Vec<HostTensor>> {
    let count = output.element_count() as usize;
    let mut values = Vec::with_capacity(count);
    let mut args = vec![0i128; inputs.len()];
    for i in 0..count {
        let c = coords(i, &output.shape);
        for (arg, input) in args.iter_mut().zip(inputs) {
            *arg = input.integer(input.broadcast_index(&c));
        }
        values.push(f(&args));
    }
    Ok(vec![HostTensor::from_exact(output.clone(), values)?])
}

/// The spec's "cast" of a number (an `MLNumber` or `double` option) to a data type: floats round
/// to nearest even (overflow to infinity), integers clamp to the type's range and then round to
/// nearest even, NaN becoming 0.
pub fn cast_number(x: f64, data_type: DataType) -> f64 {
    Number::Double(x).cast_f64(data_type)
}
