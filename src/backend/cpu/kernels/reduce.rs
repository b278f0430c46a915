//! float32 reductions (reduceSum, reduceMean, reduceMax and the other reduce* operators) and the
//! row helpers softmax and the normalizations share.
//!
//! The reduced and kept axes are first merged into groups (size-1 axes dropped). With one group
//! of reduced axes the input is `[outer, length, inner]`: `inner == 1` gives contiguous rows,
//! reduced with lane accumulators; otherwise whole `inner`-long rows are accumulated
//! element-wise. Several reduced groups gather each row through a table of offsets. Sums and
//! products accumulate in f64 (vectorised as f64x2), so that they stay within a ULP or two of
//! the float64 reference however long the row is or however much it cancels.

use crate::error::{Error, Result};
use crate::operand::OperandDescriptor;
use crate::ops::reduce::{ReduceOp, ReduceOptions};

use super::elementwise::exp_f;

/// Sum of `f(x)` over a row, in f64 with four accumulators.
#[inline(always)]
pub fn sum_by(row: &[f32], f: impl Fn(f64) -> f64) -> f64 {
    let mut acc = [0.0f64; 4];
    let mut chunks = row.chunks_exact(4);
    for c in &mut chunks {
        for k in 0..4 {
            acc[k] += f(c[k] as f64);
        }
    }
    let mut s = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    for &x in chunks.remainder() {
        s += f(x as f64);
    }
    s
}

/// The largest value of a row, NaN ignored (-infinity for a row of NaN), as `f64::max` folds.
#[inline(always)]
pub fn max_row(row: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; 8];
    let mut chunks = row.chunks_exact(8);
    for c in &mut chunks {
        for k in 0..8 {
            acc[k] = if c[k] > acc[k] { c[k] } else { acc[k] };
        }
    }
    let mut m = f32::NEG_INFINITY;
    for &x in acc.iter().chain(chunks.remainder()) {
        m = if x > m { x } else { m };
    }
    m
}

#[inline(always)]
fn min_row(row: &[f32]) -> f32 {
    let mut acc = [f32::INFINITY; 8];
    let mut chunks = row.chunks_exact(8);
    for c in &mut chunks {
        for k in 0..8 {
            acc[k] = if c[k] < acc[k] { c[k] } else { acc[k] };
        }
    }
    let mut m = f32::INFINITY;
    for &x in acc.iter().chain(chunks.remainder()) {
        m = if x < m { x } else { m };
    }
    m
}

/// The reduction of one contiguous row.
fn reduce_row(op: ReduceOp, row: &[f32]) -> f32 {
    let n = row.len() as f64;
    let r = match op {
        ReduceOp::L1 => sum_by(row, f64::abs),
        ReduceOp::L2 => sum_by(row, |x| x * x).sqrt(),
        ReduceOp::LogSum => sum_by(row, |x| x).ln(),
        ReduceOp::LogSumExp => {
            let m = max_row(row);
            if m.is_infinite() {
                return m;
            }
            let mut acc = [0.0f64; 4];
            let mut chunks = row.chunks_exact(4);
            for c in &mut chunks {
                for k in 0..4 {
                    acc[k] += exp_f(c[k] - m) as f64;
                }
            }
            let mut s = (acc[0] + acc[1]) + (acc[2] + acc[3]);
            for &x in chunks.remainder() {
                s += exp_f(x - m) as f64;
            }
            m as f64 + s.ln()
        }
        ReduceOp::Max => return max_row(row),
        ReduceOp::Min => return min_row(row),
        ReduceOp::Mean => sum_by(row, |x| x) / n,
        ReduceOp::Product => {
            let mut acc = [1.0f64; 4];
            let mut chunks = row.chunks_exact(4);
            for c in &mut chunks {
                for k in 0..4 {
                    acc[k] *= c[k] as f64;
                }
            }
            let mut p = (acc[0] * acc[1]) * (acc[2] * acc[3]);
            for &x in chunks.remainder() {
                p *= x as f64;
            }
            p
        }
        ReduceOp::Sum => sum_by(row, |x| x),
        ReduceOp::SumSquare => sum_by(row, |x| x * x),
    };
    r as f32
}

/// The reduction of `length` rows of `inner` elements each (`x`, `length * inner` values), element
/// by element, into `out` (`inner` values).
fn reduce_rows(op: ReduceOp, x: &[f32], length: usize, out: &mut [f32], acc: &mut Vec<f64>) {
    let inner = out.len();
    let rows = || x.chunks_exact(inner).take(length);
    let n = length as f64;
    let fold = |acc: &mut Vec<f64>, init: f64, f: &dyn Fn(&mut [f64], &[f32])| {
        acc.clear();
        acc.resize(inner, init);
        for row in rows() {
            f(acc, row);
        }
    };
    match op {
        ReduceOp::Max | ReduceOp::Min | ReduceOp::LogSumExp => {
            let max = op != ReduceOp::Min;
            out.fill(if max { f32::NEG_INFINITY } else { f32::INFINITY });
            for row in rows() {
                for (m, &v) in out.iter_mut().zip(row) {
                    *m = if (max && v > *m) || (!max && v < *m) { v } else { *m };
                }
            }
            if op == ReduceOp::LogSumExp {
                fold(acc, 0.0, &|a, row| {
                    for ((a, &v), &m) in a.iter_mut().zip(row).zip(out.iter()) {
                        *a += exp_f(v - m) as f64;
                    }
                });
                for (m, &s) in out.iter_mut().zip(acc.iter()) {
                    if !m.is_infinite() {
                        *m = (*m as f64 + s.ln()) as f32;
                    }
                }
            }
            return;
        }
        ReduceOp::Product => fold(acc, 1.0, &|a, row| {
            for (a, &v) in a.iter_mut().zip(row) {
                *a *= v as f64;
            }
        }),
        ReduceOp::L1 => fold(acc, 0.0, &|a, row| {
            for (a, &v) in a.iter_mut().zip(row) {
                *a += (v as f64).abs();
            }
        }),
        ReduceOp::L2 | ReduceOp::SumSquare => fold(acc, 0.0, &|a, row| {
            for (a, &v) in a.iter_mut().zip(row) {
                *a += v as f64 * v as f64;
            }
        }),
        ReduceOp::LogSum | ReduceOp::Mean | ReduceOp::Sum => fold(acc, 0.0, &|a, row| {
            for (a, &v) in a.iter_mut().zip(row) {
                *a += v as f64;
            }
        }),
    }
    for (o, &a) in out.iter_mut().zip(acc.iter()) {
        *o = match op {
            ReduceOp::L2 => a.sqrt(),
            ReduceOp::LogSum => a.ln(),
            ReduceOp::Mean => a / n,
            _ => a,
        } as f32;
    }
}

/// Merged axes: `(size, reduced)` groups with size-1 axes dropped and neighbours of the same kind
/// merged.
pub fn groups(shape: &[u32], reduced: &[bool]) -> Vec<(usize, bool)> {
    let mut g: Vec<(usize, bool)> = Vec::new();
    for (&d, &r) in shape.iter().zip(reduced) {
        if d == 1 {
            continue;
        }
        match g.last_mut() {
            Some((size, kind)) if *kind == r => *size *= d as usize,
            _ => g.push((d as usize, r)),
        }
    }
    g
}

/// `[outer, length, inner]` when the reduced axes form at most one group.
pub fn outer_length_inner(groups: &[(usize, bool)]) -> Option<(usize, usize, usize)> {
    let reduced: Vec<usize> = (0..groups.len()).filter(|&k| groups[k].1).collect();
    match reduced[..] {
        [] => Some((groups.iter().map(|g| g.0).product(), 1, 1)),
        [k] => Some((
            groups[..k].iter().map(|g| g.0).product(),
            groups[k].0,
            groups[k + 1..].iter().map(|g| g.0).product(),
        )),
        _ => None,
    }
}

/// The element offsets, in row-major order, of the sub-tensor over `axes` (in the given order)
/// of a tensor of `shape`.
pub fn offsets(shape: &[u32], axes: &[usize]) -> Vec<usize> {
    let strides = crate::operand::strides(shape);
    let mut out = vec![0usize];
    for &a in axes {
        let (d, s) = (shape[a] as usize, strides[a] as usize);
        out = out.iter().flat_map(|&o| (0..d).map(move |i| o + i * s)).collect();
    }
    out
}

pub fn reduce(op: ReduceOp, o: &ReduceOptions, x: (&OperandDescriptor, &[f32]), out: &mut [f32]) -> Result<()> {
    let (d, x) = x;
    let rank = d.rank();
    let axes: Vec<usize> = match &o.axes {
        Some(a) => a.iter().map(|&a| a as usize).collect(),
        None => (0..rank).collect(),
    };
    if axes.iter().any(|&a| a >= rank) {
        return Err(Error::Operation(format!("reduce: axes {axes:?} out of range")));
    }
    let reduced: Vec<bool> = (0..rank).map(|a| axes.contains(&a)).collect();
    let g = groups(&d.shape, &reduced);
    if let Some((outer, length, inner)) = outer_length_inner(&g) {
        if x.len() != outer * length * inner || out.len() != outer * inner {
            return Err(Error::Operation("reduce: operand lengths differ from their shapes".into()));
        }
        if inner == 1 {
            for (o, row) in out.iter_mut().zip(x.chunks_exact(length)) {
                *o = reduce_row(op, row);
            }
        } else {
            let mut acc = Vec::new();
            for (o, block) in out.chunks_exact_mut(inner).zip(x.chunks_exact(length * inner)) {
                reduce_rows(op, block, length, o, &mut acc);
            }
        }
        return Ok(());
    }
    // Several reduced groups: gather each row.
    let mut sorted = axes.clone();
    sorted.sort_unstable();
    let kept: Vec<usize> = (0..rank).filter(|a| !reduced[*a]).collect();
    let (within, bases) = (offsets(&d.shape, &sorted), offsets(&d.shape, &kept));
    if bases.len() != out.len() || within.len() * bases.len() != x.len() {
        return Err(Error::Operation("reduce: operand lengths differ from their shapes".into()));
    }
    let mut row = vec![0.0f32; within.len()];
    for (o, &base) in out.iter_mut().zip(&bases) {
        for (r, &w) in row.iter_mut().zip(&within) {
            *r = *x.get(base + w).ok_or_else(|| Error::Operation("reduce: index out of range".into()))?;
        }
        *o = reduce_row(op, &row);
    }
    Ok(())
}

/// cumulativeSum along an axis, accumulated in f64 (whole `inner`-long rows at a time).
pub fn cumulative_sum(
    o: &crate::ops::cumulative_sum::CumulativeSumOptions,
    x: (&OperandDescriptor, &[f32]),
    out: &mut [f32],
) -> Result<()> {
    let (d, x) = x;
    let axis = o.axis as usize;
    if axis >= d.rank() || x.len() as u64 != d.element_count() || out.len() != x.len() {
        return Err(Error::Operation("cumulativeSum: operand lengths differ from their shapes".into()));
    }
    let n = d.shape[axis] as usize;
    let inner: usize = d.shape[axis + 1..].iter().map(|&v| v as usize).product();
    let mut acc = vec![0.0f64; inner];
    for (oblock, block) in out.chunks_exact_mut(n * inner).zip(x.chunks_exact(n * inner)) {
        acc.fill(0.0);
        for k in 0..n {
            let p = if o.reversed { n - 1 - k } else { k };
            let (orow, row) = (&mut oblock[p * inner..(p + 1) * inner], &block[p * inner..(p + 1) * inner]);
            for ((o_, &v), a) in orow.iter_mut().zip(row).zip(acc.iter_mut()) {
                if o.exclusive {
                    *o_ = *a as f32;
                    *a += v as f64;
                } else {
                    *a += v as f64;
                    *o_ = *a as f32;
                }
            }
        }
    }
    Ok(())
}
