//! Operand data types and descriptors (the spec's `MLOperandDataType` and `MLOperandDescriptor`).

use crate::error::{Error, Result};

/// `MLOperandDataType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub enum DataType {
    Float32,
    Float16,
    Int32,
    Uint32,
    Int64,
    Uint64,
    Int8,
    Uint8,
}

impl DataType {
    /// Every data type, in the spec's order.
    pub const ALL: [DataType; 8] = [
        DataType::Float32,
        DataType::Float16,
        DataType::Int32,
        DataType::Uint32,
        DataType::Int64,
        DataType::Uint64,
        DataType::Int8,
        DataType::Uint8,
    ];

    /// The spec's name of the type, e.g. `"float32"`.
    pub fn name(self) -> &'static str {
        match self {
            DataType::Float32 => "float32",
            DataType::Float16 => "float16",
            DataType::Int32 => "int32",
            DataType::Uint32 => "uint32",
            DataType::Int64 => "int64",
            DataType::Uint64 => "uint64",
            DataType::Int8 => "int8",
            DataType::Uint8 => "uint8",
        }
    }

    /// Parses a spec name; unknown names are a `TypeError` (as the IDL enum conversion is).
    pub fn from_name(name: &str) -> Result<DataType> {
        DataType::ALL
            .into_iter()
            .find(|t| t.name() == name)
            .ok_or_else(|| Error::Type(format!("'{name}' is not a valid MLOperandDataType")))
    }

    /// Bytes of one element (the element size of the matching ArrayBufferView).
    pub fn byte_size(self) -> u64 {
        match self {
            DataType::Float32 | DataType::Int32 | DataType::Uint32 => 4,
            DataType::Float16 => 2,
            DataType::Int64 | DataType::Uint64 => 8,
            DataType::Int8 | DataType::Uint8 => 1,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, DataType::Float32 | DataType::Float16)
    }

    pub fn is_signed(self) -> bool {
        matches!(self, DataType::Float32 | DataType::Float16 | DataType::Int32 | DataType::Int64 | DataType::Int8)
    }

    /// int64 or uint64: stored as two 32-bit words (low, high) on the GPU and kept exact (not as
    /// f64) by the reference.
    pub fn is_wide(self) -> bool {
        matches!(self, DataType::Int64 | DataType::Uint64)
    }
}

/// `MLNumber` (`bigint or unrestricted double`): a bigint stays exact, so that 64-bit integer
/// options beyond 2^53 keep their value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Number {
    Double(f64),
    BigInt(i128),
}

/// As the graph cache stores it: a finite double as a JSON number, NaN and the infinities as
/// strings (JSON has no such numbers), a bigint as `{"BigInt": "<decimal>"}`.
impl serde::Serialize for Number {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match *self {
            Number::Double(x) if x.is_finite() => serializer.serialize_f64(x),
            Number::Double(x) => serializer.serialize_str(if x.is_nan() { "NaN" } else if x > 0.0 { "Infinity" } else { "-Infinity" }),
            Number::BigInt(i) => {
                let mut map = serializer.serialize_map(Some(1))?;
                map.serialize_entry("BigInt", &i.to_string())?;
                map.end()
            }
        }
    }
}

impl<'de> serde::Deserialize<'de> for Number {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<Number, D::Error> {
        #[derive(serde::Deserialize)]
        #[serde(untagged)]
        enum Stored {
            Finite(f64),
            Special(String),
            BigInt { #[serde(rename = "BigInt")] value: String },
        }
        let invalid = |v: &str| serde::de::Error::custom(format!("not an MLNumber: {v}"));
        match Stored::deserialize(deserializer)? {
            Stored::Finite(x) => Ok(Number::Double(x)),
            Stored::Special(s) => match s.as_str() {
                "NaN" => Ok(Number::Double(f64::NAN)),
                "Infinity" => Ok(Number::Double(f64::INFINITY)),
                "-Infinity" => Ok(Number::Double(f64::NEG_INFINITY)),
                _ => Err(invalid(&s)),
            },
            Stored::BigInt { value } => value.parse().map(Number::BigInt).map_err(|_| invalid(&value)),
        }
    }
}

impl Default for Number {
    fn default() -> Number {
        Number::Double(0.0)
    }
}

impl From<f64> for Number {
    fn from(x: f64) -> Number {
        Number::Double(x)
    }
}

impl Number {
    /// The nearest double.
    pub fn to_f64(self) -> f64 {
        match self {
            Number::Double(x) => x,
            Number::BigInt(v) => v as f64,
        }
    }

    pub fn is_nan(self) -> bool {
        matches!(self, Number::Double(x) if x.is_nan())
    }

    /// The spec's cast of the number to an integer type, exactly: clamped to the type's range,
    /// a double rounded to nearest even first (NaN becoming 0).
    pub fn to_integer(self, data_type: DataType) -> i128 {
        let (lo, hi): (i128, i128) = match data_type {
            DataType::Int64 => (i64::MIN as i128, i64::MAX as i128),
            DataType::Uint64 => (0, u64::MAX as i128),
            DataType::Int32 => (i32::MIN as i128, i32::MAX as i128),
            // The spec's table casts uint32 as "signed", which contradicts its own note (the
            // result is representable in the type) and MLNumber's text (cast to unsigned long).
            DataType::Uint32 => (0, u32::MAX as i128),
            DataType::Int8 => (i8::MIN as i128, i8::MAX as i128),
            DataType::Uint8 => (0, u8::MAX as i128),
            DataType::Float32 | DataType::Float16 => (i128::MIN, i128::MAX),
        };
        match self {
            Number::BigInt(v) => v.clamp(lo, hi),
            // Rounding then clamping equals the spec's clamping then rounding, as the bounds are
            // integers; `as` saturates (NaN to 0), so the clamp is exact where the bounds are
            // not doubles.
            Number::Double(x) => (x.round_ties_even() as i128).clamp(lo, hi),
        }
    }

    /// The spec's cast (ConvertToFloat / ConvertToInt) to `data_type`, as a double. Exact for
    /// every type but int64/uint64 beyond 2^53 (use [`Number::to_integer`] or
    /// [`Number::cast_bytes`] for those).
    pub fn cast_f64(self, data_type: DataType) -> f64 {
        match data_type {
            DataType::Float32 => self.to_f32() as f64,
            DataType::Float16 => half::f16::from_bits(self.to_f16_bits()).to_f64(),
            _ => self.to_integer(data_type) as f64,
        }
    }

    /// The spec's cast to `data_type`, as the little-endian bytes of one element.
    pub fn cast_bytes(self, data_type: DataType) -> Vec<u8> {
        let v = self.to_integer(data_type);
        match data_type {
            DataType::Float32 => self.to_f32().to_le_bytes().to_vec(),
            DataType::Float16 => self.to_f16_bits().to_le_bytes().to_vec(),
            DataType::Int32 | DataType::Uint32 => (v as u32).to_le_bytes().to_vec(),
            DataType::Int64 | DataType::Uint64 => (v as u64).to_le_bytes().to_vec(),
            DataType::Int8 | DataType::Uint8 => vec![v as u8],
        }
    }

    /// ConvertToFloat(x, 32): round to nearest even, overflowing to an infinity. Both `as` casts
    /// round once from the exact value.
    fn to_f32(self) -> f32 {
        match self {
            Number::Double(x) => x as f32,
            Number::BigInt(v) => v as f32,
        }
    }

    /// ConvertToFloat(x, 16), as binary16 bits: round to nearest even from the exact value
    /// (through f32 or f64 rounding would round twice), |x| >= 65520 overflowing to infinity.
    fn to_f16_bits(self) -> u16 {
        let x = match self {
            Number::Double(x) => x,
            // Exact below 2^53; beyond, the result is an infinity either way.
            Number::BigInt(v) => v as f64,
        };
        let sign = if x.is_sign_negative() { 0x8000u16 } else { 0 };
        let a = x.abs();
        if a.is_nan() {
            return 0x7e00;
        }
        if a >= 65520.0 {
            return sign | 0x7c00;
        }
        if a < f64::powi(2.0, -14) {
            // Below 2^-14: a multiple of the subnormal step 2^-24 (1024 steps is the smallest
            // normal, whose bits are 0x0400 as well). Scaling by a power of two is exact.
            return sign | (a * 16_777_216.0).round_ties_even() as u16;
        }
        let exponent = ((a.to_bits() >> 52) as i32) - 1023;
        // The significand in units of the last place: 1024 ..= 2048 after rounding.
        let units = (a * f64::powi(2.0, 10 - exponent)).round_ties_even() as u16;
        // A significand rounded up to 2048 carries into the exponent through the addition.
        sign | ((((exponent + 15) as u16) << 10) + (units - 1024))
    }
}

impl std::fmt::Display for DataType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The largest rank this implementation accepts (the spec lets implementations bound it).
pub const MAX_RANK: usize = 8;

/// `MLOperandDescriptor`: a data type and a shape (empty for scalars).
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct OperandDescriptor {
    pub data_type: DataType,
    pub shape: Vec<u32>,
}

impl OperandDescriptor {
    pub fn new(data_type: DataType, shape: impl Into<Vec<u32>>) -> Self {
        OperandDescriptor { data_type, shape: shape.into() }
    }

    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// The spec's element count (1 for scalars); `u64::MAX` when it overflows, which
    /// [`check_dimensions`](Self::check_dimensions) and every byte limit reject.
    pub fn element_count(&self) -> u64 {
        self.shape.iter().fold(1u64, |acc, &d| acc.saturating_mul(d as u64))
    }

    /// The spec's byte length; `u64::MAX` when it overflows, as [`element_count`](Self::element_count).
    pub fn byte_length(&self) -> u64 {
        self.element_count().saturating_mul(self.data_type.byte_size())
    }

    /// The byte length against a backend's `maxTensorByteLength`: a `TypeError` naming the limit
    /// when over it.
    pub fn check_byte_length_limit(&self, max: u64) -> Result<()> {
        let size = self.byte_length();
        if size > max {
            return Err(Error::Type(format!("{self} has {size} bytes, more than maxTensorByteLength ({max} bytes)")));
        }
        Ok(())
    }

    /// The spec's "check dimensions": every dimension and the element count are valid
    /// dimensions (1 ..= i32::MAX), and the rank is supported.
    pub fn check_dimensions(&self) -> Result<()> {
        if self.shape.len() > MAX_RANK {
            return Err(Error::Type(format!(
                "rank {} is larger than the supported maximum of {MAX_RANK}",
                self.shape.len()
            )));
        }
        if let Some(d) = self.shape.iter().find(|&&d| d == 0 || d > i32::MAX as u32) {
            return Err(Error::Type(format!("invalid dimension {d} in shape {:?}", self.shape)));
        }
        let count = self.shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d as u64));
        match count {
            Some(c) if c <= i32::MAX as u64 => Ok(()),
            _ => Err(Error::Type(format!("the element count of shape {:?} is too large", self.shape))),
        }
    }
}

impl std::fmt::Display for OperandDescriptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{:?}", self.data_type, self.shape)
    }
}

/// float16 values (their bits) widened to float32, exactly as IEEE 754 and the `half` crate
/// convert them (NaNs quieted), in a form LLVM vectorizes: wasm has no F16C, and `half`'s
/// element-by-element fallback cost a streamed float16 model most of its load time there. The
/// exponent and mantissa move to float32's place and are scaled by 2^112, which is exact for
/// normal and subnormal halves; infinities and NaNs get float32's all-ones exponent instead.
pub fn widen_f16(bits: &[u16], out: &mut [f32]) {
    for (o, &h) in out.iter_mut().zip(bits) {
        *o = f16_to_f32(h);
    }
}

/// One float16 value widened as [`widen_f16`] does, for kernels that widen while they compute.
#[inline(always)]
pub fn f16_to_f32(h: u16) -> f32 {
    const SCALE: f32 = f32::from_bits(0x7780_0000); // 2^112
    let h = h as u32;
    let magnitude = (h & 0x7fff) << 13;
    let finite = (f32::from_bits(magnitude) * SCALE).to_bits();
    let quiet = if h & 0x03ff != 0 { 0x0040_0000 } else { 0 };
    let special = magnitude | 0x7f80_0000 | quiet;
    let bits = if h & 0x7c00 == 0x7c00 { special } else { finite };
    f32::from_bits(bits | (h & 0x8000) << 16)
}

/// float32 values narrowed to float16 bits, rounded to nearest even, exactly as IEEE 754 and the
/// `half` crate convert them (NaNs quieted, the payload's top bits kept), in a form LLVM
/// vectorizes (`half`'s fallback goes element by element with branches). Normal results are
/// rebiased and rounded with integer adds; results below float16's smallest normal come from one
/// float32 addition of 0.5, whose rounding places the subnormal's bits.
pub fn narrow_f16(values: &[f32], out: &mut [u16]) {
    const HALF: u32 = 0x3f00_0000; // 0.5: its ulp is float16's smallest subnormal, 2^-24
    for (o, &v) in out.iter_mut().zip(values) {
        let x = v.to_bits();
        let a = x & 0x7fff_ffff;
        // Exponent rebiased by (15 - 127) << 23, plus just under half an ulp and the kept bit's
        // parity: ties go to even, and a carry out of the mantissa moves up the exponent.
        let normal = a.wrapping_add(0xc800_0fff).wrapping_add((a >> 13) & 1) >> 13;
        let subnormal = (f32::from_bits(a) + f32::from_bits(HALF)).to_bits().wrapping_sub(HALF);
        let nan = 0x7e00 | (a >> 13) & 0x03ff;
        let h = if a > 0x7f80_0000 {
            nan
        } else if a >= 0x4780_0000 {
            0x7c00 // at or beyond 2^16: infinity (65520 and up round there too, on the normal path)
        } else if a < 0x3880_0000 {
            subnormal
        } else {
            normal
        };
        *o = (h | (x >> 16) & 0x8000) as u16;
    }
}

/// Row-major strides of a shape, in elements; saturated at `u64::MAX` for shapes whose element
/// count overflows (which validation rejects).
pub fn strides(shape: &[u32]) -> Vec<u64> {
    let mut strides = vec![1u64; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1].saturating_mul(shape[i + 1] as u64);
    }
    strides
}

/// The spec's "bidirectionally broadcast the shapes": `None` if they cannot be broadcast.
pub fn broadcast_shapes(a: &[u32], b: &[u32]) -> Option<Vec<u32>> {
    let rank = a.len().max(b.len());
    let mut out = vec![0u32; rank];
    for i in 0..rank {
        let da = if i < rank - a.len() { 1 } else { a[i - (rank - a.len())] };
        let db = if i < rank - b.len() { 1 } else { b[i - (rank - b.len())] };
        out[i] = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            return None;
        };
    }
    Some(out)
}

/// The spec's "unidirectionally broadcastable": `from` can be broadcast to `to`.
pub fn is_unidirectionally_broadcastable(from: &[u32], to: &[u32]) -> bool {
    if from.len() > to.len() {
        return false;
    }
    let offset = to.len() - from.len();
    from.iter().enumerate().all(|(i, &d)| d == to[i + offset] || d == 1)
}
