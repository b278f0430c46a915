//! The entry point of the kernels on raw bytes: operators whose operands are not all float32
//! (gather, where, cast, the logical operators, dequantizeLinear) or that have several outputs
//! (split, the recurrent networks). Each result equals the float64 reference's bit for bit,
//! except the recurrent networks, which round to float32 at every step.
//!
//! Operands are little-endian bytes, 4-byte aligned (the backend's buffers are words), viewed as
//! typed slices with `bytemuck`; int64/uint64 values are read from byte chunks, since only 4-byte
//! alignment is guaranteed. Before a kernel runs, the operator is validated again on the given
//! descriptors and every operand's byte length is checked, so that a mismatch is an
//! `OperationError`, never a panic.

use crate::error::{Error, Result};
use crate::operand::{DataType, OperandDescriptor};
use crate::ops::logical::LogicalOp;
use crate::ops::Op;

use super::{gather, recurrent};

/// Whether a kernel exists for `op` on operands of these descriptors.
pub fn handles(op: &Op, inputs: &[&OperandDescriptor], outputs: &[&OperandDescriptor]) -> bool {
    use DataType::*;
    let t = |k: usize| inputs.get(k).map(|d| d.data_type);
    match op {
        Op::Gather { .. } | Op::GatherElements { .. } | Op::GatherNd => matches!(t(1), Some(Int32 | Uint32 | Int64)),
        Op::Split { .. } | Op::Cast { .. } => true,
        Op::Where => t(0) == Some(Uint8),
        Op::Logical(l) => t(0).is_some_and(|t| logical_handles(*l, t)),
        Op::DequantizeLinear => matches!(t(0), Some(Int8 | Uint8 | Int32 | Uint32)) && t(1) == Some(Float32),
        Op::Gru(_) | Op::GruCell(_) | Op::Lstm(_) | Op::LstmCell(_) => {
            inputs.iter().chain(outputs).all(|d| d.data_type == Float32)
        }
        _ => false,
    }
}

fn logical_handles(op: LogicalOp, t: DataType) -> bool {
    use DataType::*;
    match op {
        LogicalOp::LogicalNot | LogicalOp::LogicalAnd | LogicalOp::LogicalOr | LogicalOp::LogicalXor => t == Uint8,
        LogicalOp::IsNaN | LogicalOp::IsInfinite => t == Float32,
        _ => matches!(t, Float32 | Int32 | Uint32 | Int8 | Uint8),
    }
}

/// Runs `op` when a kernel exists for it and these data types; `None` otherwise (the caller then
/// uses the float64 reference). `inputs[i]` is the i-th operand (descriptor and bytes,
/// row-major), `outputs` the outputs' descriptors and bytes (pre-sized, contents unspecified).
pub fn run(
    op: &Op,
    inputs: &[(&OperandDescriptor, &[u8])],
    outputs: &mut [(&OperandDescriptor, &mut [u8])],
) -> Option<Result<()>> {
    let descriptors: Vec<&OperandDescriptor> = inputs.iter().map(|(d, _)| *d).collect();
    let output_descriptors: Vec<&OperandDescriptor> = outputs.iter().map(|(d, _)| *d).collect();
    if !handles(op, &descriptors, &output_descriptors) {
        return None;
    }
    Some(check(op, inputs, outputs).and_then(|()| dispatch(op, inputs, outputs)))
}

/// The operator validates on these inputs, with these outputs, and every operand has the byte
/// length of its descriptor.
fn check(op: &Op, inputs: &[(&OperandDescriptor, &[u8])], outputs: &[(&OperandDescriptor, &mut [u8])]) -> Result<()> {
    let descriptors: Vec<&OperandDescriptor> = inputs.iter().map(|(d, _)| *d).collect();
    let expected = crate::ops::validate(op, &descriptors)?;
    if expected.len() != outputs.len() || expected.iter().zip(outputs).any(|(e, (d, _))| e != *d) {
        return Err(Error::Operation(format!("{}: the outputs differ from the operator's {expected:?}", op.name())));
    }
    let lengths = inputs.iter().map(|(d, b)| (*d, b.len())).chain(outputs.iter().map(|(d, b)| (*d, b.len())));
    for (d, len) in lengths {
        if len as u64 != d.byte_length() {
            return Err(Error::Operation(format!("{}: {len} bytes for {d}", op.name())));
        }
    }
    Ok(())
}

fn dispatch(
    op: &Op,
    inputs: &[(&OperandDescriptor, &[u8])],
    outputs: &mut [(&OperandDescriptor, &mut [u8])],
) -> Result<()> {
    let input =
        |k: usize| inputs.get(k).copied().ok_or_else(|| Error::Operation(format!("{}: no input {k}", op.name())));
    let (out_descriptor, out) = match outputs.first_mut() {
        Some((d, b)) => (*d, &mut **b),
        None => return Err(Error::Operation(format!("{}: no output", op.name()))),
    };
    match op {
        Op::Gather { axis } => gather::gather(*axis as usize, input(0)?, input(1)?, out),
        Op::GatherElements { axis } => gather::gather_elements(*axis as usize, input(0)?, input(1)?, out),
        Op::GatherNd => gather::gather_nd(input(0)?, input(1)?, out),
        Op::Split { axis, .. } => gather::split(*axis as usize, input(0)?, outputs),
        Op::Where => select(input(0)?, input(1)?, input(2)?, (out_descriptor, out)),
        Op::Cast { .. } => cast(input(0)?, (out_descriptor, out)),
        Op::Logical(l) => logical(*l, inputs, (out_descriptor, out)),
        Op::DequantizeLinear => dequantize_linear(input(0)?, input(1)?, input(2)?, out),
        Op::Gru(_) | Op::GruCell(_) | Op::Lstm(_) | Op::LstmCell(_) => {
            let values = inputs.iter().map(|(d, b)| Ok((*d, view::<f32>(b)?))).collect::<Result<Vec<_>>>()?;
            let mut results = outputs.iter_mut().map(|(_, b)| view_mut::<f32>(b)).collect::<Result<Vec<_>>>()?;
            recurrent::run(op, &values, &mut results)
        }
        _ => Err(Error::Operation(format!("{}: no typed kernel", op.name()))),
    }
}

/// `bytes` as values of `T`; an error when they are not aligned for it.
pub fn view<T: bytemuck::Pod>(bytes: &[u8]) -> Result<&[T]> {
    bytemuck::try_cast_slice(bytes).map_err(|e| Error::Operation(format!("an operand's bytes cannot be read: {e:?}")))
}

pub fn view_mut<T: bytemuck::Pod>(bytes: &mut [u8]) -> Result<&mut [T]> {
    bytemuck::try_cast_slice_mut(bytes)
        .map_err(|e| Error::Operation(format!("an operand's bytes cannot be written: {e:?}")))
}

/// An int64/uint64 element's bits (only 4-byte alignment is guaranteed, so no `u64` view).
#[inline(always)]
pub fn u64_at(chunk: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&chunk[..8]);
    u64::from_le_bytes(b)
}

/// Calls `f` with the element type of `size` bytes (an 8-byte one as two words, as it is
/// 4-byte aligned only).
macro_rules! by_size {
    ($size:expr, $f:ident($($arg:expr),*)) => {
        match $size {
            1 => $f::<u8>($($arg),*),
            2 => $f::<u16>($($arg),*),
            4 => $f::<u32>($($arg),*),
            _ => $f::<[u32; 2]>($($arg),*),
        }
    };
}
pub(crate) use by_size;

/// The output shape with the strides of several inputs broadcast to it (0 along broadcast axes),
/// size-1 axes dropped and neighbouring axes merged where every input is contiguous across them.
struct Strided {
    dims: Vec<usize>,
    /// Per input, per merged axis.
    strides: Vec<Vec<usize>>,
}

impl Strided {
    fn new(out: &[u32], shapes: &[&[u32]]) -> Result<Strided> {
        let rank = out.len();
        let mut aligned = Vec::with_capacity(shapes.len());
        for shape in shapes {
            let fits = shape.len() <= rank
                && shape.iter().enumerate().all(|(k, &d)| d == 1 || d == out[rank - shape.len() + k]);
            if !fits {
                return Err(Error::Operation(format!("shape {shape:?} does not broadcast to {out:?}")));
            }
            let mut s = vec![0usize; rank];
            let mut step = 1usize;
            for (k, &d) in shape.iter().enumerate().rev() {
                if d != 1 {
                    s[rank - shape.len() + k] = step;
                }
                step = step.saturating_mul(d as usize);
            }
            aligned.push(s);
        }
        let mut dims: Vec<usize> = Vec::with_capacity(rank);
        let mut strides: Vec<Vec<usize>> = vec![Vec::with_capacity(rank); shapes.len()];
        for k in 0..rank {
            let d = out[k] as usize;
            if d == 1 {
                continue;
            }
            if let Some(last) = dims.len().checked_sub(1) {
                if strides.iter().zip(&aligned).all(|(s, a)| s[last] == a[k].saturating_mul(d)) {
                    dims[last] *= d;
                    strides.iter_mut().zip(&aligned).for_each(|(s, a)| s[last] = a[k]);
                    continue;
                }
            }
            dims.push(d);
            strides.iter_mut().zip(&aligned).for_each(|(s, a)| s.push(a[k]));
        }
        if dims.is_empty() {
            dims.push(1);
            strides.iter_mut().for_each(|s| s.push(1));
        }
        Ok(Strided { dims, strides })
    }

    /// The length of a run of the last axis, and each input's stride along it.
    fn inner(&self) -> (usize, Vec<usize>) {
        (*self.dims.last().unwrap_or(&1), self.strides.iter().map(|s| *s.last().unwrap_or(&1)).collect())
    }

    /// Calls `f(offsets)` with each input's offset at the start of each run of the last axis, in
    /// output order.
    fn for_each_row(&self, mut f: impl FnMut(&[usize]) -> Result<()>) -> Result<()> {
        let n = self.dims.len() - 1;
        let rows: usize = self.dims[..n].iter().product();
        let mut index = vec![0usize; n];
        let mut offsets = vec![0usize; self.strides.len()];
        for _ in 0..rows {
            f(&offsets)?;
            for k in (0..n).rev() {
                index[k] += 1;
                offsets.iter_mut().zip(&self.strides).for_each(|(o, s)| *o += s[k]);
                if index[k] < self.dims[k] {
                    break;
                }
                offsets.iter_mut().zip(&self.strides).for_each(|(o, s)| *o -= s[k] * self.dims[k]);
                index[k] = 0;
            }
        }
        Ok(())
    }
}

/// Checks that a run of `len` values from `offset` by `stride` lies inside `count` values.
fn run_fits(offset: usize, stride: usize, len: usize, count: usize) -> Result<()> {
    match len.checked_sub(1).map(|l| l.checked_mul(stride).and_then(|s| s.checked_add(offset))) {
        Some(Some(last)) if last < count => Ok(()),
        Some(None) | Some(Some(_)) => Err(Error::Operation("an operand has fewer values than its shape".into())),
        None => Ok(()),
    }
}

/// `out = f(a, b)` over `a` and `b` broadcast to `out`'s shape.
fn broadcast2<A: Copy, B: Copy, O>(
    a: (&[u32], &[A]),
    b: (&[u32], &[B]),
    out: (&[u32], &mut [O]),
    f: impl Fn(A, B) -> O,
) -> Result<()> {
    let plan = Strided::new(out.0, &[a.0, b.0])?;
    let (inner, s) = plan.inner();
    let (sa, sb) = (s[0], s[1]);
    let mut rows = out.1.chunks_exact_mut(inner);
    plan.for_each_row(|o| {
        let row = rows.next().ok_or_else(|| Error::Operation("the output has fewer values than its shape".into()))?;
        run_fits(o[0], sa, inner, a.1.len())?;
        run_fits(o[1], sb, inner, b.1.len())?;
        if (sa, sb) == (1, 1) {
            for ((r, &x), &y) in row.iter_mut().zip(&a.1[o[0]..o[0] + inner]).zip(&b.1[o[1]..o[1] + inner]) {
                *r = f(x, y);
            }
            return Ok(());
        }
        for (k, r) in row.iter_mut().enumerate() {
            *r = f(a.1[o[0] + k * sa], b.1[o[1] + k * sb]);
        }
        Ok(())
    })
}

/// where: `condition != 0 ? trueValue : falseValue`, of any element size, broadcast.
fn select(
    condition: (&OperandDescriptor, &[u8]),
    on_true: (&OperandDescriptor, &[u8]),
    on_false: (&OperandDescriptor, &[u8]),
    out: (&OperandDescriptor, &mut [u8]),
) -> Result<()> {
    fn typed<T: bytemuck::Pod>(
        c: (&OperandDescriptor, &[u8]),
        t: (&OperandDescriptor, &[u8]),
        f: (&OperandDescriptor, &[u8]),
        out: (&OperandDescriptor, &mut [u8]),
    ) -> Result<()> {
        let (tv, fv, ov) = (view::<T>(t.1)?, view::<T>(f.1)?, view_mut::<T>(out.1)?);
        let plan = Strided::new(&out.0.shape, &[&c.0.shape, &t.0.shape, &f.0.shape])?;
        let (inner, s) = plan.inner();
        let mut rows = ov.chunks_exact_mut(inner);
        plan.for_each_row(|o| {
            let row = rows.next().ok_or_else(|| Error::Operation("where: the output is short".into()))?;
            run_fits(o[0], s[0], inner, c.1.len())?;
            run_fits(o[1], s[1], inner, tv.len())?;
            run_fits(o[2], s[2], inner, fv.len())?;
            if s.iter().all(|&s| s == 1) {
                // Contiguous runs: a loop without index arithmetic, which vectorises.
                let (cr, tr, fr) = (&c.1[o[0]..o[0] + inner], &tv[o[1]..o[1] + inner], &fv[o[2]..o[2] + inner]);
                for (((r, &c), &t), &f) in row.iter_mut().zip(cr).zip(tr).zip(fr) {
                    *r = if c != 0 { t } else { f };
                }
                return Ok(());
            }
            for (k, r) in row.iter_mut().enumerate() {
                *r = if c.1[o[0] + k * s[0]] != 0 { tv[o[1] + k * s[1]] } else { fv[o[2] + k * s[2]] };
            }
            Ok(())
        })
    }
    by_size!(out.0.data_type.byte_size(), typed(condition, on_true, on_false, out))
}

/// Elements converted per pass of [`cast`]: an intermediate block that stays in L1.
const CAST_BLOCK: usize = 256;

/// cast, with the reference's semantics: floats round to nearest even (to float16 through
/// float32 from integers, as the reference does); float to integer truncates toward zero and
/// saturates, NaN giving 0 (Rust's `as`); integer to integer keeps the low bits of the two's
/// complement value. Each block of elements is widened to f32 (float inputs, exact) or to the
/// bits of an i64 (integer inputs), then narrowed to the output type.
fn cast(input: (&OperandDescriptor, &[u8]), out: (&OperandDescriptor, &mut [u8])) -> Result<()> {
    let (from, to) = (input.0.data_type, out.0.data_type);
    let count = input.0.element_count() as usize;
    let mut start = 0;
    while start < count {
        let len = CAST_BLOCK.min(count - start);
        if from.is_float() {
            let mut values = [0f32; CAST_BLOCK];
            read_floats(from, input.1, start, &mut values[..len])?;
            write_floats(to, &values[..len], out.1, start)?;
        } else {
            let mut values = [0i64; CAST_BLOCK];
            read_integers(from, input.1, start, &mut values[..len])?;
            write_integers(to, &values[..len], from == DataType::Uint64, out.1, start)?;
        }
        start += len;
    }
    Ok(())
}

fn short() -> Error {
    Error::Operation("cast: an operand has fewer bytes than its shape".into())
}

/// Elements `start..start + values.len()` of a float operand, as f32 (exact).
fn read_floats(t: DataType, bytes: &[u8], start: usize, values: &mut [f32]) -> Result<()> {
    let end = start + values.len();
    match t {
        DataType::Float32 => values.copy_from_slice(view::<f32>(bytes)?.get(start..end).ok_or_else(short)?),
        _ => {
            let source = view::<u16>(bytes)?.get(start..end).ok_or_else(short)?;
            crate::operand::widen_f16(source, values);
        }
    }
    Ok(())
}

/// Elements `start..start + values.len()` of an integer operand, as the bits of an i64 (sign- or
/// zero-extended; uint64 reinterpreted).
fn read_integers(t: DataType, bytes: &[u8], start: usize, values: &mut [i64]) -> Result<()> {
    fn widen<T: bytemuck::Pod>(bytes: &[u8], start: usize, values: &mut [i64], f: impl Fn(T) -> i64) -> Result<()> {
        let source = view::<T>(bytes)?.get(start..start + values.len()).ok_or_else(short)?;
        values.iter_mut().zip(source).for_each(|(v, &x)| *v = f(x));
        Ok(())
    }
    match t {
        DataType::Int32 => widen(bytes, start, values, |x: i32| x as i64),
        DataType::Uint32 => widen(bytes, start, values, |x: u32| x as i64),
        DataType::Int8 => widen(bytes, start, values, |x: i8| x as i64),
        DataType::Uint8 => widen(bytes, start, values, |x: u8| x as i64),
        _ => {
            let source = bytes.get(start * 8..(start + values.len()) * 8).ok_or_else(short)?;
            values.iter_mut().zip(source.chunks_exact(8)).for_each(|(v, c)| *v = u64_at(c) as i64);
            Ok(())
        }
    }
}

/// Stores `values` as elements `start..` of an output of type `t`, converting each with `f`.
fn store<T: bytemuck::Pod, V: Copy>(bytes: &mut [u8], start: usize, values: &[V], f: impl Fn(V) -> T) -> Result<()> {
    let target = view_mut::<T>(bytes)?.get_mut(start..start + values.len()).ok_or_else(short)?;
    target.iter_mut().zip(values).for_each(|(o, &v)| *o = f(v));
    Ok(())
}

/// Stores 64-bit values as little-endian byte chunks.
fn store_wide<V: Copy>(bytes: &mut [u8], start: usize, values: &[V], f: impl Fn(V) -> u64) -> Result<()> {
    let target = bytes.get_mut(start * 8..(start + values.len()) * 8).ok_or_else(short)?;
    target.chunks_exact_mut(8).zip(values).for_each(|(o, &v)| o.copy_from_slice(&f(v).to_le_bytes()));
    Ok(())
}

fn write_floats(t: DataType, values: &[f32], bytes: &mut [u8], start: usize) -> Result<()> {
    match t {
        DataType::Float32 => store(bytes, start, values, |v| v),
        DataType::Float16 => store(bytes, start, values, |v| half::f16::from_f32(v).to_bits()),
        DataType::Int32 => store(bytes, start, values, |v| v as i32),
        DataType::Uint32 => store(bytes, start, values, |v| v as u32),
        DataType::Int8 => store(bytes, start, values, |v| v as i8),
        DataType::Uint8 => store(bytes, start, values, |v| v as u8),
        DataType::Int64 => store_wide(bytes, start, values, |v| v as i64 as u64),
        DataType::Uint64 => store_wide(bytes, start, values, |v| v as u64),
    }
}

/// `unsigned`: the bits are a uint64's, whose value is `bits as u64`.
fn write_integers(t: DataType, values: &[i64], unsigned: bool, bytes: &mut [u8], start: usize) -> Result<()> {
    let to_f32 = |v: i64| if unsigned { v as u64 as f32 } else { v as f32 };
    match t {
        DataType::Float32 => store(bytes, start, values, to_f32),
        DataType::Float16 => store(bytes, start, values, |v| half::f16::from_f32(to_f32(v)).to_bits()),
        DataType::Int32 => store(bytes, start, values, |v| v as i32),
        DataType::Uint32 => store(bytes, start, values, |v| v as u32),
        DataType::Int8 => store(bytes, start, values, |v| v as i8),
        DataType::Uint8 => store(bytes, start, values, |v| v as u8),
        DataType::Int64 | DataType::Uint64 => store_wide(bytes, start, values, |v| v as u64),
    }
}

/// The logical operators, to uint8 0 or 1: comparisons of any 32-bit-or-narrower type (exact, as
/// the reference's f64 comparisons of these values are), logicalNot/And/Or/Xor of uint8, and
/// isNaN/isInfinite of float32.
fn logical(op: LogicalOp, inputs: &[(&OperandDescriptor, &[u8])], out: (&OperandDescriptor, &mut [u8])) -> Result<()> {
    let (ad, a) = *inputs.first().ok_or_else(|| Error::Operation(format!("{}: no input", op.name())))?;
    let (od, out) = out;
    if op.input_count() == 1 {
        if a.len() as u64 != ad.byte_length() || out.len() != a.len() / ad.data_type.byte_size() as usize {
            return Err(Error::Operation(format!("{}: operand lengths differ from their shapes", op.name())));
        }
        match op {
            LogicalOp::LogicalNot => out.iter_mut().zip(a).for_each(|(o, &x)| *o = (x == 0) as u8),
            LogicalOp::IsNaN => out.iter_mut().zip(view::<f32>(a)?).for_each(|(o, x)| *o = x.is_nan() as u8),
            _ => out.iter_mut().zip(view::<f32>(a)?).for_each(|(o, x)| *o = x.is_infinite() as u8),
        }
        return Ok(());
    }
    let (bd, b) = *inputs.get(1).ok_or_else(|| Error::Operation(format!("{}: no second input", op.name())))?;
    fn compare<T: bytemuck::Pod + PartialOrd>(
        op: LogicalOp,
        a: (&[u32], &[u8]),
        b: (&[u32], &[u8]),
        out: (&[u32], &mut [u8]),
    ) -> Result<()> {
        let (a, b) = ((a.0, view::<T>(a.1)?), (b.0, view::<T>(b.1)?));
        match op {
            LogicalOp::Equal => broadcast2(a, b, out, |x, y| (x == y) as u8),
            LogicalOp::NotEqual => broadcast2(a, b, out, |x, y| (x != y) as u8),
            LogicalOp::Greater => broadcast2(a, b, out, |x, y| (x > y) as u8),
            LogicalOp::GreaterOrEqual => broadcast2(a, b, out, |x, y| (x >= y) as u8),
            LogicalOp::Lesser => broadcast2(a, b, out, |x, y| (x < y) as u8),
            LogicalOp::LesserOrEqual => broadcast2(a, b, out, |x, y| (x <= y) as u8),
            LogicalOp::LogicalAnd => broadcast2(a, b, out, |x, y| (x != T::zeroed() && y != T::zeroed()) as u8),
            LogicalOp::LogicalOr => broadcast2(a, b, out, |x, y| (x != T::zeroed() || y != T::zeroed()) as u8),
            LogicalOp::LogicalXor => broadcast2(a, b, out, |x, y| ((x != T::zeroed()) != (y != T::zeroed())) as u8),
            _ => Err(Error::Operation(format!("{} takes one input", op.name()))),
        }
    }
    let (a, b, out) = ((ad.shape.as_slice(), a), (bd.shape.as_slice(), b), (od.shape.as_slice(), out));
    match ad.data_type {
        DataType::Float32 => compare::<f32>(op, a, b, out),
        DataType::Int32 => compare::<i32>(op, a, b, out),
        DataType::Uint32 => compare::<u32>(op, a, b, out),
        DataType::Int8 => compare::<i8>(op, a, b, out),
        _ => compare::<u8>(op, a, b, out),
    }
}

/// dequantizeLinear: `(input - zeroPoint) * scale` with scale and zeroPoint repeated over blocks
/// of the input (`input.shape[a] / scale.shape[a]` along each axis). For 8-bit inputs the
/// difference and the product are exact in f32 before its one rounding, as in the reference's
/// f64; 32-bit differences need f64, as there.
fn dequantize_linear(
    input: (&OperandDescriptor, &[u8]),
    scale: (&OperandDescriptor, &[u8]),
    zero_point: (&OperandDescriptor, &[u8]),
    out: &mut [u8],
) -> Result<()> {
    fn typed<T: bytemuck::Pod + Into<f64>>(
        input: (&OperandDescriptor, &[u8]),
        scale: (&OperandDescriptor, &[u8]),
        zero_point: &[u8],
        out: &mut [u8],
        narrow: bool,
    ) -> Result<()> {
        let (x, s, z, out) =
            (view::<T>(input.1)?, view::<f32>(scale.1)?, view::<T>(zero_point)?, view_mut::<f32>(out)?);
        let (shape, scale_shape) = (&input.0.shape, &scale.0.shape);
        if x.len() != out.len() || s.len() != z.len() || scale_shape.len() != shape.len() {
            return Err(Error::Operation("dequantizeLinear: operand lengths differ from their shapes".into()));
        }
        // Rows of the last axis, each with `row / block` parameter runs.
        let (row, params) = (*shape.last().unwrap_or(&1) as usize, *scale_shape.last().unwrap_or(&1) as usize);
        let block = row / params.max(1);
        let outer = &shape[..shape.len().saturating_sub(1)];
        let scale_strides = crate::operand::strides(scale_shape);
        let mut index = vec![0usize; outer.len()];
        for (r, (xs, os)) in x.chunks_exact(row.max(1)).zip(out.chunks_exact_mut(row.max(1))).enumerate() {
            if r > 0 {
                for k in (0..outer.len()).rev() {
                    index[k] += 1;
                    if index[k] < outer[k] as usize {
                        break;
                    }
                    index[k] = 0;
                }
            }
            let base: usize = (0..outer.len())
                .map(|a| index[a] / (shape[a] / scale_shape[a]).max(1) as usize * scale_strides[a] as usize)
                .sum();
            for (p, (xb, ob)) in xs.chunks(block.max(1)).zip(os.chunks_mut(block.max(1))).enumerate() {
                let (sv, zv) = match (s.get(base + p), z.get(base + p)) {
                    (Some(&s), Some(&z)) => (s, z.into()),
                    _ => {
                        return Err(Error::Operation("dequantizeLinear: scale has fewer values than its shape".into()))
                    }
                };
                if narrow {
                    let zf = zv as f32;
                    ob.iter_mut().zip(xb).for_each(|(o, &v)| *o = (v.into() as f32 - zf) * sv);
                } else {
                    ob.iter_mut().zip(xb).for_each(|(o, &v)| *o = ((v.into() - zv) * sv as f64) as f32);
                }
            }
        }
        Ok(())
    }
    match input.0.data_type {
        DataType::Int8 => typed::<i8>(input, scale, zero_point.1, out, true),
        DataType::Uint8 => typed::<u8>(input, scale, zero_point.1, out, true),
        DataType::Int32 => typed::<i32>(input, scale, zero_point.1, out, false),
        _ => typed::<u32>(input, scale, zero_point.1, out, false),
    }
}
