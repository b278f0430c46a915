//! float32 data movement: reshape, expand, transpose, slice, concat, pad, tile and reverse.
//!
//! All but concat and pad are one strided gather ([`gather`]): output element `c` (row-major
//! over `dims`) copies input element `base + sum(c[k] * strides[k])`, with strides that may be 0
//! (expand, tile) or negative (reverse). Axes of size 1 are dropped and neighbours merged where
//! the input is contiguous across them; the last axis then runs as a copy, a fill, or a strided
//! loop, and a transposed last pair of axes runs in cache tiles.

use crate::error::{Error, Result};
use crate::operand::{strides, OperandDescriptor};
use crate::ops::pad::{PadOptions, PaddingMode};
use crate::ops::slice::SliceOptions;

fn bad(what: &str) -> Error {
    Error::Operation(format!("{what}: operand lengths or options differ from the shapes"))
}

/// A strided view of an input: the output's dims, each with its input stride.
struct View {
    dims: Vec<usize>,
    strides: Vec<isize>,
    base: isize,
}

impl View {
    /// Drops size-1 axes and merges neighbours the input is contiguous across.
    fn simplify(mut self) -> View {
        let mut dims: Vec<usize> = Vec::new();
        let mut st: Vec<isize> = Vec::new();
        for (&d, &s) in self.dims.iter().zip(&self.strides) {
            if d == 1 {
                continue;
            }
            match (dims.last_mut(), st.last_mut()) {
                (Some(pd), Some(ps)) if *ps == s * d as isize => {
                    *pd *= d;
                    *ps = s;
                }
                _ => {
                    dims.push(d);
                    st.push(s);
                }
            }
        }
        if dims.is_empty() {
            dims.push(1);
            st.push(1);
        }
        self.dims = dims;
        self.strides = st;
        self
    }

    /// The lowest and highest input offsets the view reads.
    fn range(&self) -> (isize, isize) {
        let (mut lo, mut hi) = (self.base, self.base);
        for (&d, &s) in self.dims.iter().zip(&self.strides) {
            let span = (d as isize - 1) * s;
            if span < 0 {
                lo += span;
            } else {
                hi += span;
            }
        }
        (lo, hi)
    }
}

/// Copies the view of `input` into `out` (its element count).
fn gather(view: View, input: &[f32], out: &mut [f32], what: &str) -> Result<()> {
    let v = view.simplify();
    let count: usize = v.dims.iter().product();
    let (lo, hi) = v.range();
    if count != out.len() || (count > 0 && (lo < 0 || hi as usize >= input.len())) {
        return Err(bad(what));
    }
    if count == 0 {
        return Ok(());
    }
    let n = v.dims.len();
    // A transpose of the last two axes: tiles keep both sides in cache.
    if n >= 2 && v.strides[n - 2] == 1 && v.strides[n - 1] > 1 {
        let (rows, cols) = (v.dims[n - 2], v.dims[n - 1]);
        let col_stride = v.strides[n - 1] as usize;
        let outer = View { dims: v.dims[..n - 2].to_vec(), strides: v.strides[..n - 2].to_vec(), base: v.base };
        const TILE: usize = 16;
        return for_each_offset(&outer, out.chunks_exact_mut(rows * cols), |block, offset| {
            for r0 in (0..rows).step_by(TILE) {
                for c0 in (0..cols).step_by(TILE) {
                    for r in r0..(r0 + TILE).min(rows) {
                        let orow = &mut block[r * cols..][c0..(c0 + TILE).min(cols)];
                        for (j, o) in orow.iter_mut().enumerate() {
                            *o = input[offset + r + (c0 + j) * col_stride];
                        }
                    }
                }
            }
        });
    }
    let inner = v.dims[n - 1];
    let step = v.strides[n - 1];
    let outer = View { dims: v.dims[..n - 1].to_vec(), strides: v.strides[..n - 1].to_vec(), base: v.base };
    for_each_offset(&outer, out.chunks_exact_mut(inner), |row, offset| match step {
        1 => row.copy_from_slice(&input[offset..offset + inner]),
        0 => row.fill(input[offset]),
        s if s > 0 => {
            for (o, &x) in row.iter_mut().zip(input[offset..].iter().step_by(s as usize)) {
                *o = x;
            }
        }
        s => {
            // Negative: the elements from `offset` down.
            let s = (-s) as usize;
            let first = offset - (inner - 1) * s;
            for (o, &x) in row.iter_mut().zip(input[first..=offset].iter().rev().step_by(s)) {
                *o = x;
            }
        }
    })
}

/// Calls `f(chunk, offset)` for each output chunk with the input offset of the outer view's
/// coordinates (offsets already checked to be in range by [`gather`]).
fn for_each_offset<'a>(
    outer: &View,
    chunks: impl Iterator<Item = &'a mut [f32]>,
    mut f: impl FnMut(&mut [f32], usize),
) -> Result<()> {
    let n = outer.dims.len();
    let mut index = vec![0usize; n];
    let mut offset = outer.base;
    for chunk in chunks {
        f(chunk, offset as usize);
        for k in (0..n).rev() {
            index[k] += 1;
            offset += outer.strides[k];
            if index[k] < outer.dims[k] {
                break;
            }
            offset -= outer.strides[k] * outer.dims[k] as isize;
            index[k] = 0;
        }
    }
    Ok(())
}

fn checked(d: &OperandDescriptor, x: &[f32], what: &str) -> Result<()> {
    if x.len() as u64 != d.element_count() {
        return Err(bad(what));
    }
    Ok(())
}

fn istrides(shape: &[u32]) -> Vec<isize> {
    strides(shape).into_iter().map(|s| s as isize).collect()
}

fn udims(shape: &[u32]) -> Vec<usize> {
    shape.iter().map(|&d| d as usize).collect()
}

pub fn reshape(x: &[f32], out: &mut [f32]) -> Result<()> {
    if x.len() != out.len() {
        return Err(bad("reshape"));
    }
    out.copy_from_slice(x);
    Ok(())
}

pub fn expand(x: (&OperandDescriptor, &[f32]), out: (&OperandDescriptor, &mut [f32])) -> Result<()> {
    let ((d, x), (od, out)) = (x, out);
    checked(d, x, "expand")?;
    let rank = od.rank();
    if d.rank() > rank {
        return Err(bad("expand"));
    }
    let s = istrides(&d.shape);
    let mut st = vec![0isize; rank];
    for (k, &dim) in d.shape.iter().enumerate() {
        let axis = rank - d.rank() + k;
        if dim != 1 {
            if dim != od.shape[axis] {
                return Err(bad("expand"));
            }
            st[axis] = s[k];
        }
    }
    gather(View { dims: udims(&od.shape), strides: st, base: 0 }, x, out, "expand")
}

pub fn transpose(
    permutation: Option<&[u32]>,
    x: (&OperandDescriptor, &[f32]),
    out: (&OperandDescriptor, &mut [f32]),
) -> Result<()> {
    let ((d, x), (od, out)) = (x, out);
    checked(d, x, "transpose")?;
    let rank = d.rank();
    let perm: Vec<usize> = match permutation {
        Some(p) => p.iter().map(|&a| a as usize).collect(),
        None => (0..rank).rev().collect(),
    };
    if perm.len() != rank || od.rank() != rank || perm.iter().any(|&a| a >= rank) {
        return Err(bad("transpose"));
    }
    let s = istrides(&d.shape);
    let st = perm.iter().map(|&a| s[a]).collect();
    let dims = perm.iter().map(|&a| d.shape[a] as usize).collect();
    gather(View { dims, strides: st, base: 0 }, x, out, "transpose")
}

pub fn slice(o: &SliceOptions, x: (&OperandDescriptor, &[f32]), out: (&OperandDescriptor, &mut [f32])) -> Result<()> {
    let ((d, x), (od, out)) = (x, out);
    checked(d, x, "slice")?;
    let rank = d.rank();
    let steps = o.strides.clone().unwrap_or_else(|| vec![1; rank]);
    if o.starts.len() != rank || steps.len() != rank || od.rank() != rank {
        return Err(bad("slice"));
    }
    let s = istrides(&d.shape);
    let base = (0..rank).map(|k| o.starts[k] as isize * s[k]).sum();
    let st = (0..rank).map(|k| steps[k] as isize * s[k]).collect();
    gather(View { dims: udims(&od.shape), strides: st, base }, x, out, "slice")
}

/// The output as `[rep_0, d_0, rep_1, d_1, ...]` (the same row-major order), stride 0 on the
/// repetitions.
pub fn tile(x: (&OperandDescriptor, &[f32]), out: (&OperandDescriptor, &mut [f32])) -> Result<()> {
    let ((d, x), (od, out)) = (x, out);
    checked(d, x, "tile")?;
    if od.rank() != d.rank() || d.shape.iter().zip(&od.shape).any(|(&i, &o)| i == 0 || o % i != 0) {
        return Err(bad("tile"));
    }
    let s = istrides(&d.shape);
    let mut dims = Vec::new();
    let mut st = Vec::new();
    for k in 0..d.rank() {
        dims.extend([(od.shape[k] / d.shape[k]) as usize, d.shape[k] as usize]);
        st.extend([0, s[k]]);
    }
    gather(View { dims, strides: st, base: 0 }, x, out, "tile")
}

pub fn reverse(axes: Option<&[u32]>, x: (&OperandDescriptor, &[f32]), out: &mut [f32]) -> Result<()> {
    let (d, x) = x;
    checked(d, x, "reverse")?;
    let rank = d.rank();
    let s = istrides(&d.shape);
    let mut st = s.clone();
    let mut base = 0isize;
    for k in 0..rank {
        if axes.is_none_or(|a| a.contains(&(k as u32))) {
            st[k] = -s[k];
            base += (d.shape[k] as isize - 1) * s[k];
        }
    }
    gather(View { dims: udims(&d.shape), strides: st, base }, x, out, "reverse")
}

pub fn concat(
    axis: usize,
    inputs: &[(&OperandDescriptor, &[f32])],
    out: (&OperandDescriptor, &mut [f32]),
) -> Result<()> {
    let (od, out) = out;
    if axis >= od.rank() {
        return Err(bad("concat"));
    }
    let outer: usize = od.shape[..axis].iter().map(|&d| d as usize).product();
    let mut rows = Vec::with_capacity(inputs.len());
    for (d, x) in inputs {
        checked(d, x, "concat")?;
        if outer == 0 || x.len() % outer != 0 {
            return Err(bad("concat"));
        }
        rows.push(x.len() / outer);
    }
    if rows.iter().sum::<usize>() * outer != out.len() {
        return Err(bad("concat"));
    }
    let mut position = 0;
    for o in 0..outer {
        for ((_, x), &row) in inputs.iter().zip(&rows) {
            out[position..position + row].copy_from_slice(&x[o * row..(o + 1) * row]);
            position += row;
        }
    }
    Ok(())
}

/// The input position that output position `c` along an axis reads, or `None` for the constant
/// (the spec's modes; validation keeps reflection paddings below the size).
fn source(mode: PaddingMode, c: usize, begin: usize, n: usize) -> Option<usize> {
    let x = c as isize - begin as isize;
    let last = n as isize - 1;
    let x = match mode {
        _ if (0..=last).contains(&x) => x,
        PaddingMode::Constant => return None,
        PaddingMode::Edge => x.clamp(0, last),
        PaddingMode::Reflection if x < 0 => -x,
        PaddingMode::Reflection => 2 * last - x,
    };
    (0..=last).contains(&x).then_some(x as usize)
}

/// Each output row (last axis) is its source row's padding, middle and padding; a row whose
/// outer coordinates fall in a constant padding is the constant.
pub fn pad(o: &PadOptions, x: (&OperandDescriptor, &[f32]), out: (&OperandDescriptor, &mut [f32])) -> Result<()> {
    let ((d, x), (od, out)) = (x, out);
    checked(d, x, "pad")?;
    checked(od, out, "pad")?;
    let rank = d.rank();
    if o.beginning_padding.len() != rank || od.rank() != rank {
        return Err(bad("pad"));
    }
    let value = o.value.cast_f64(crate::operand::DataType::Float32) as f32;
    if rank == 0 {
        out.copy_from_slice(x);
        return Ok(());
    }
    let n = d.shape[rank - 1] as usize;
    let width = od.shape[rank - 1] as usize;
    let begin = o.beginning_padding[rank - 1] as usize;
    if begin + n > width {
        return Err(bad("pad"));
    }
    // The source position of every output column; `None` for the constant.
    let columns: Vec<Option<usize>> = (0..width).map(|c| source(o.mode, c, begin, n)).collect();
    let in_strides = strides(&d.shape);
    let mut index = vec![0usize; rank - 1];
    for row in out.chunks_exact_mut(width) {
        // The source row, or None if any outer coordinate is in a constant padding.
        let mut offset = Some(0usize);
        for k in 0..rank - 1 {
            offset = match (offset, source(o.mode, index[k], o.beginning_padding[k] as usize, d.shape[k] as usize)) {
                (Some(off), Some(p)) => Some(off + p * in_strides[k] as usize),
                _ => None,
            };
        }
        match offset {
            None => row.fill(value),
            Some(off) => {
                let src = x.get(off..off + n).ok_or_else(|| bad("pad"))?;
                row[begin..begin + n].copy_from_slice(src);
                for c in (0..begin).chain(begin + n..width) {
                    row[c] = columns[c].map_or(value, |p| src[p]);
                }
            }
        }
        for k in (0..rank - 1).rev() {
            index[k] += 1;
            if index[k] < od.shape[k] as usize {
                break;
            }
            index[k] = 0;
        }
    }
    Ok(())
}

/// triangular: each row of each matrix (the last two axes) keeps the columns `col - row >= d`
/// (upper) or `<= d` (lower) and zeroes the others.
pub fn triangular(
    o: &crate::ops::triangular::TriangularOptions,
    x: (&OperandDescriptor, &[f32]),
    out: &mut [f32],
) -> Result<()> {
    let (d, x) = x;
    checked(d, x, "triangular")?;
    let r = d.rank();
    if r < 2 || out.len() != x.len() {
        return Err(bad("triangular"));
    }
    let (rows, cols) = (d.shape[r - 2] as usize, d.shape[r - 1] as usize);
    let diagonal = o.diagonal as i64;
    for (i, (orow, row)) in out.chunks_exact_mut(cols).zip(x.chunks_exact(cols)).enumerate() {
        let row_index = (i % rows) as i64;
        // The kept columns are one range: from `row + d` on (upper) or up to it (lower).
        let edge = (row_index + diagonal).clamp(-1, cols as i64);
        let (keep, zero) = if o.upper {
            let start = edge.max(0) as usize;
            (start..cols, 0..start)
        } else {
            let end = (edge + 1).clamp(0, cols as i64) as usize;
            (0..end, end..cols)
        };
        orow[keep.clone()].copy_from_slice(&row[keep]);
        orow[zero].fill(0.0);
    }
    Ok(())
}
