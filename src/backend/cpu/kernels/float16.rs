//! matmul and gemm on float16 operands with a rank-2 B, computed in float32 without a float32
//! copy of B per call: a constant B is packed once, widened into the float32 panels of
//! [`gemm`]'s kernels (kept while the graph is resident and counted, as a float32 constant's
//! packing is); where there is none (B an input, or no room under the memory budget) a single
//! row streams B's float16 bits and widens them as it multiplies.

use std::rc::Rc;

use crate::backend::cpu::threads::{self, Disjoint};
use crate::error::{Error, Result};
use crate::operand::f16_to_f32;
use crate::ops::Op;

use super::gemm::{self, Matrix, Packed};

/// Columns of the output a single row accumulates at a time (in L1).
const COLUMNS: usize = 2048;

/// The product's shape: rows of A (matmul's batch dimensions folded in, as B has none), depth,
/// columns, and whether B is stored `[N, K]` (gemm's bTranspose).
pub fn dims(product: &Op, a_shape: &[u32], b_shape: &[u32]) -> Result<(usize, usize, usize, bool)> {
    let (&[b0, b1], Some((&k, rows))) = (b_shape, a_shape.split_last()) else {
        return Err(Error::Operation(format!("float16 product: a {a_shape:?} and b {b_shape:?} need ranks >= 1 and 2")));
    };
    let (b0, b1, k) = (b0 as usize, b1 as usize, k as usize);
    let m = rows.iter().map(|&d| d as usize).product::<usize>();
    let transposed = matches!(product, Op::Gemm(o) if o.b_transpose);
    let (depth, n) = if transposed { (b1, b0) } else { (b0, b1) };
    if depth != k || (matches!(product, Op::Gemm(_)) && a_shape.len() != 2) || a_shape.len() < 2 {
        return Err(Error::Operation(format!("float16 product: a {a_shape:?} and b {b_shape:?} do not multiply")));
    }
    Ok((m, k, n, transposed))
}

/// B (`[K, N]`, or `[N, K]` when `transposed`) widened and packed as the right operand.
pub fn pack(b: &[u16], (k, n): (usize, usize), transposed: bool) -> Result<Packed> {
    let wide = widened(b, k * n)?;
    let view = Matrix::row_major(&wide, if transposed { n } else { k }, if transposed { k } else { n });
    Packed::right(if transposed { view.t() } else { view })
}

fn widened(b: &[u16], len: usize) -> Result<Vec<f32>> {
    let b = b.get(..len).ok_or_else(|| Error::Operation(format!("float16 product: b has fewer than {len} elements")))?;
    let mut wide = Vec::new();
    wide.try_reserve_exact(len).map_err(|_| Error::Operation(format!("float16 product: cannot allocate {len} floats")))?;
    wide.resize(len, 0.0);
    crate::operand::widen_f16(b, &mut wide);
    Ok(wide)
}

/// `out (+)= alpha * A B` for the `m x k` A (float32, widened by the caller), the float16 bits of
/// B and an `m x n` out; `packed` gives B packed ([`pack`]) when the product uses it, `None` when
/// it did not fit the memory budget (B is then widened for this call only).
#[allow(clippy::too_many_arguments)]
pub fn product(
    a: &[f32],
    b: &[u16],
    (m, k, n, transposed): (usize, usize, usize, bool),
    packed: &dyn Fn() -> Result<Option<Rc<Packed>>>,
    alpha: f32,
    out: &mut [f32],
    accumulate: bool,
) -> Result<()> {
    let (a_len, b_len, out_len) = (m.checked_mul(k), k.checked_mul(n), m.checked_mul(n));
    if a_len.is_none_or(|l| l > a.len()) || b_len.is_none_or(|l| l > b.len()) || out_len.is_none_or(|l| l > out.len()) {
        return Err(Error::Operation(format!("float16 product: {m} x {k} x {n} exceeds its operands")));
    }
    if m > 0 && n > 1 && k > 0 {
        if let Some(b) = packed()? {
            return gemm::gemm_packed_b(Matrix::row_major(a, m, k), &b, alpha, out, n, accumulate);
        }
    }
    if m == 1 && k > 0 {
        return row(&a[..k], &b[..k * n], k, n, transposed, alpha, &mut out[..n], accumulate);
    }
    let a = Matrix::row_major(a, m, k);
    let wide = widened(b, k * n)?;
    let view = Matrix::row_major(&wide, if transposed { n } else { k }, if transposed { k } else { n });
    gemm::gemm(a, if transposed { view.t() } else { view }, alpha, out, n, accumulate)
}

/// One row: `y (+)= alpha * x B`, B's float16 bits widened as they stream; the CPU threads take
/// ranges of y.
#[allow(clippy::too_many_arguments)]
fn row(x: &[f32], b: &[u16], k: usize, n: usize, transposed: bool, alpha: f32, y: &mut [f32], accumulate: bool) -> Result<()> {
    let parts = gemm::gemv_parts(k, n);
    let y = Disjoint::new(y);
    threads::try_for_each(parts.len(), &|t| {
        let part = parts[t].clone();
        // SAFETY: the parts are disjoint ranges of y.
        let y = unsafe { y.segment(part.start, part.len()) };
        if transposed {
            // B's rows are y's outputs: one dot product each along K.
            for (j, out) in part.clone().zip(y.iter_mut()) {
                let value = alpha * dot(x, &b[j * k..][..k]);
                *out = if accumulate { *out + value } else { value };
            }
            return Ok(());
        }
        if !accumulate {
            y.fill(0.0);
        }
        let len = y.len();
        for j0 in (0..len).step_by(COLUMNS) {
            let y = &mut y[j0..len.min(j0 + COLUMNS)];
            let width = y.len();
            let row = |p: usize| &b[p * n + part.start + j0..][..width];
            let mut p = 0;
            while p + 4 <= k {
                let (x0, x1, x2, x3) = (alpha * x[p], alpha * x[p + 1], alpha * x[p + 2], alpha * x[p + 3]);
                let (r0, r1, r2, r3) = (row(p), row(p + 1), row(p + 2), row(p + 3));
                for (j, out) in y.iter_mut().enumerate() {
                    *out += x0 * f16_to_f32(r0[j]) + x1 * f16_to_f32(r1[j]) + x2 * f16_to_f32(r2[j]) + x3 * f16_to_f32(r3[j]);
                }
                p += 4;
            }
            for p in p..k {
                let xp = alpha * x[p];
                y.iter_mut().zip(row(p)).for_each(|(out, &h)| *out += xp * f16_to_f32(h));
            }
        }
        Ok(())
    })
}

/// A dot product of float32 `x` and float16 bits `h` over 16 independent lanes.
fn dot(x: &[f32], h: &[u16]) -> f32 {
    let mut lanes = [0.0f32; 16];
    let (xc, hc) = (x.chunks_exact(16), h.chunks_exact(16));
    let tail: f32 = xc.remainder().iter().zip(hc.remainder()).map(|(a, &b)| a * f16_to_f32(b)).sum();
    for (xs, hs) in xc.zip(hc) {
        for ((l, a), &b) in lanes.iter_mut().zip(xs).zip(hs) {
            *l += a * f16_to_f32(b);
        }
    }
    lanes.iter().sum::<f32>() + tail
}
