//! gather, gatherElements, gatherND and split on elements of any data type: copies of whole
//! elements (one to eight bytes, see [`by_size`]), runs of them where the layout allows.
//!
//! Index values are clamped as the reference's [`position`](crate::ops::gather::position) does:
//! to `-N ..= N-1`, negative ones counting from the end of the dimension.

use crate::error::{Error, Result};
use crate::operand::{strides, DataType, OperandDescriptor};
use crate::ops::movement::outer_inner;

use super::typed::{by_size, u64_at, view, view_mut};

fn bad(what: &str) -> Error {
    Error::Operation(format!("{what}: an operand has fewer values than its shape"))
}

/// The index values of an int32, uint32 or int64 operand.
fn index_values(indices: (&OperandDescriptor, &[u8])) -> Result<Vec<i64>> {
    Ok(match indices.0.data_type {
        DataType::Int32 => view::<i32>(indices.1)?.iter().map(|&v| v as i64).collect(),
        DataType::Uint32 => view::<u32>(indices.1)?.iter().map(|&v| v as i64).collect(),
        DataType::Int64 => indices.1.chunks_exact(8).map(|c| u64_at(c) as i64).collect(),
        t => return Err(Error::Operation(format!("gather: indices of type {t}"))),
    })
}

/// The position the first value of `indices` (int32, uint32 or int64) selects along a dimension
/// of size `n`: the stack entry a gathered matmul B reads in place.
pub fn first_position(indices: (&OperandDescriptor, &[u8]), n: usize) -> Result<usize> {
    let bytes = indices.1.get(..indices.0.data_type.byte_size() as usize).ok_or_else(|| bad("gather"))?;
    let first = index_values((indices.0, bytes))?.first().copied().ok_or_else(|| bad("gather"))?;
    Ok(position(first, n.max(1)))
}

/// The position an index value selects along a dimension of size `n` (at least 1).
#[inline(always)]
fn position(index: i64, n: usize) -> usize {
    let n = n as i64;
    let v = index.clamp(-n, n - 1);
    (if v < 0 { v + n } else { v }) as usize
}

/// gather: seen with the axis as the middle of `[outer, N, inner]`, output run `(o, j)` of
/// `inner` elements is input run `(o, position(indices[j]))`.
pub fn gather(
    axis: usize,
    input: (&OperandDescriptor, &[u8]),
    indices: (&OperandDescriptor, &[u8]),
    out: &mut [u8],
) -> Result<()> {
    fn typed<T: bytemuck::Pod>(
        inner: usize,
        n: usize,
        positions: &[usize],
        input: &[u8],
        out: &mut [u8],
    ) -> Result<()> {
        let (x, out) = (view::<T>(input)?, view_mut::<T>(out)?);
        if inner == 0 || positions.is_empty() {
            return Ok(());
        }
        for (o, rows) in out.chunks_exact_mut(positions.len() * inner).enumerate() {
            for (&p, row) in positions.iter().zip(rows.chunks_exact_mut(inner)) {
                let start = (o * n + p) * inner;
                row.copy_from_slice(x.get(start..start + inner).ok_or_else(|| bad("gather"))?);
            }
        }
        Ok(())
    }
    let n = *input.0.shape.get(axis).ok_or_else(|| bad("gather"))? as usize;
    let (_, inner) = outer_inner(&input.0.shape, axis);
    let positions: Vec<usize> = index_values(indices)?.into_iter().map(|v| position(v, n)).collect();
    by_size!(input.0.data_type.byte_size(), typed(inner as usize, n, &positions, input.1, out))
}

/// gatherElements: output element `(o, a, r)` (in the indices' shape `[outer, M, inner]`) is
/// input element `(o, position(indices[o, a, r]), r)`.
pub fn gather_elements(
    axis: usize,
    input: (&OperandDescriptor, &[u8]),
    indices: (&OperandDescriptor, &[u8]),
    out: &mut [u8],
) -> Result<()> {
    fn typed<T: bytemuck::Pod>(
        n: usize,
        m: usize,
        inner: usize,
        values: &[i64],
        input: &[u8],
        out: &mut [u8],
    ) -> Result<()> {
        let (x, out) = (view::<T>(input)?, view_mut::<T>(out)?);
        if out.len() != values.len() || m * inner == 0 {
            return Err(bad("gatherElements"));
        }
        for (i, (o, &v)) in out.iter_mut().zip(values).enumerate() {
            let (outer, r) = (i / (m * inner), i % inner);
            *o = *x.get((outer * n + position(v, n)) * inner + r).ok_or_else(|| bad("gatherElements"))?;
        }
        Ok(())
    }
    let n = *input.0.shape.get(axis).ok_or_else(|| bad("gatherElements"))? as usize;
    let m = *indices.0.shape.get(axis).ok_or_else(|| bad("gatherElements"))? as usize;
    let (_, inner) = outer_inner(&input.0.shape, axis);
    let values = index_values(indices)?;
    by_size!(input.0.data_type.byte_size(), typed(n, m, inner as usize, &values, input.1, out))
}

/// gatherND: each row of `k` index values (the indices' last dimension) gives the leading
/// coordinates of an input slice of `inner` elements; output run `j` is the slice of row `j`.
pub fn gather_nd(
    input: (&OperandDescriptor, &[u8]),
    indices: (&OperandDescriptor, &[u8]),
    out: &mut [u8],
) -> Result<()> {
    fn typed<T: bytemuck::Pod>(starts: &[usize], inner: usize, input: &[u8], out: &mut [u8]) -> Result<()> {
        let (x, out) = (view::<T>(input)?, view_mut::<T>(out)?);
        if out.len() != starts.len() * inner {
            return Err(bad("gatherND"));
        }
        for (&start, row) in starts.iter().zip(out.chunks_exact_mut(inner.max(1))) {
            row.copy_from_slice(x.get(start..start + inner).ok_or_else(|| bad("gatherND"))?);
        }
        Ok(())
    }
    let shape = &input.0.shape;
    let k = *indices.0.shape.last().ok_or_else(|| bad("gatherND"))? as usize;
    if k == 0 || k > shape.len() {
        return Err(Error::Operation(format!("gatherND: {k} coordinates for an input of rank {}", shape.len())));
    }
    let s = strides(shape);
    let inner: usize = shape[k..].iter().map(|&d| d as usize).product();
    let values = index_values(indices)?;
    let starts: Vec<usize> = values
        .chunks_exact(k)
        .map(|row| row.iter().enumerate().map(|(d, &v)| position(v, shape[d] as usize) * s[d] as usize).sum())
        .collect();
    by_size!(input.0.data_type.byte_size(), typed(&starts, inner, input.1, out))
}

/// split: output `k` takes, from each input row `[outer, axis * inner]`, the run after those of
/// outputs `0..k`.
pub fn split(
    axis: usize,
    input: (&OperandDescriptor, &[u8]),
    outputs: &mut [(&OperandDescriptor, &mut [u8])],
) -> Result<()> {
    let (outer, inner) = outer_inner(&input.0.shape, axis);
    let size = input.0.data_type.byte_size() as usize;
    let row = *input.0.shape.get(axis).ok_or_else(|| bad("split"))? as usize * inner as usize * size;
    let mut offset = 0usize;
    for (d, out) in outputs.iter_mut() {
        let len = *d.shape.get(axis).ok_or_else(|| bad("split"))? as usize * inner as usize * size;
        if len == 0 || out.len() != outer as usize * len {
            return Err(bad("split"));
        }
        for (o, chunk) in out.chunks_exact_mut(len).enumerate() {
            let start = o * row + offset;
            chunk.copy_from_slice(input.1.get(start..start + len).ok_or_else(|| bad("split"))?);
        }
        offset += len;
    }
    Ok(())
}
