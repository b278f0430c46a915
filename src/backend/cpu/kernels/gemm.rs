//! Float32 matrix products: a packed, register-blocked GEMM (the BLIS loop order: B blocks of
//! `KC x NC` and A blocks of `MC x KC` packed into panels, an `MR x NR` micro-kernel over them),
//! streaming GEMV paths for a single row or column, and WebNN's `matmul` and `gemm` on top.
//!
//! The micro-kernel is `core::arch::wasm32` SIMD128 when the wasm build enables `simd128`, and
//! plain Rust over fixed-size arrays that LLVM vectorises otherwise. Every entry point checks
//! that its views stay inside their slices and returns an error instead of panicking.

use std::ops::Range;

use crate::backend::cpu::threads::{self, Disjoint};
use crate::error::{Error, Result};

use super::scratch::{self, Slot};

/// Rows of the micro-kernel's output tile: 4 x 2 vector accumulators, which V8 keeps in
/// registers (six rows spill; see BENCHMARKS.md).
pub(super) const MR: usize = 4;
/// Columns of the micro-kernel's output tile: two 4-lane vectors.
pub(super) const NR: usize = 8;
/// Depth of a packed block: an `MR x KC` A panel and a `KC x NR` B panel stay in L1.
const KC: usize = 256;
/// Rows of a packed A block (a multiple of `MR`), which stays in L2.
pub(super) const MC: usize = 64;
/// Columns of a packed B block (a multiple of `NR`).
const NC: usize = 1024;
/// Columns of the output that the row-streaming GEMV accumulates at a time (in L1).
const GEMV_COLUMNS: usize = 2048;

/// A read-only matrix view: element (i, j) is `data[offset + i*row_stride + j*col_stride]`.
#[derive(Debug, Clone, Copy)]
pub struct Matrix<'a> {
    pub data: &'a [f32],
    pub offset: usize,
    pub rows: usize,
    pub cols: usize,
    pub row_stride: usize,
    pub col_stride: usize,
}

impl<'a> Matrix<'a> {
    /// A dense row-major `rows x cols` matrix at the start of `data`.
    pub fn row_major(data: &'a [f32], rows: usize, cols: usize) -> Matrix<'a> {
        Matrix { data, offset: 0, rows, cols, row_stride: cols, col_stride: 1 }
    }

    /// The transpose, without copying.
    pub fn t(self) -> Matrix<'a> {
        Matrix { rows: self.cols, cols: self.rows, row_stride: self.col_stride, col_stride: self.row_stride, ..self }
    }

    /// Checks that every element lies inside `data`.
    pub(super) fn check(&self, what: &str) -> Result<()> {
        if self.rows == 0 || self.cols == 0 {
            return Ok(());
        }
        let last = (self.rows - 1)
            .checked_mul(self.row_stride)
            .and_then(|r| (self.cols - 1).checked_mul(self.col_stride).and_then(|c| r.checked_add(c)))
            .and_then(|i| i.checked_add(self.offset));
        match last {
            Some(last) if last < self.data.len() => Ok(()),
            _ => Err(Error::Operation(format!(
                "gemm: {what} ({} x {} at offset {}, strides {} and {}) exceeds its {} elements",
                self.rows,
                self.cols,
                self.offset,
                self.row_stride,
                self.col_stride,
                self.data.len()
            ))),
        }
    }

    pub(super) fn index(&self, i: usize, j: usize) -> usize {
        self.offset + i * self.row_stride + j * self.col_stride
    }
}

/// `C[m x n] (+)= alpha * A[m x k] * B[k x n]`, C row-major with row stride `ldc`; with
/// `accumulate` the product is added to C (gemm's `beta * C`, filled in by the caller), otherwise
/// C is overwritten.
pub fn gemm(a: Matrix, b: Matrix, alpha: f32, c: &mut [f32], ldc: usize, accumulate: bool) -> Result<()> {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    if b.rows != k {
        return Err(Error::Operation(format!("gemm: a has {k} columns but b has {} rows", b.rows)));
    }
    a.check("a")?;
    b.check("b")?;
    if m == 0 || n == 0 {
        return Ok(());
    }
    let fits = (m - 1).checked_mul(ldc).and_then(|i| i.checked_add(n)).is_some_and(|end| end <= c.len());
    if (m > 1 && ldc < n) || !fits {
        return Err(Error::Operation(format!("gemm: a {m} x {n} output with row stride {ldc} exceeds {} elements", c.len())));
    }
    if k == 0 {
        if !accumulate {
            (0..m).for_each(|i| c[i * ldc..i * ldc + n].fill(0.0));
        }
        return Ok(());
    }
    // One output row: x = that row of A, streamed against B; one output column: the transposed
    // problem, x = the column of B against A's transpose, written down C's column.
    if m == 1 && gemv(a.offset, a.col_stride, a.data, b, alpha, c, 1, accumulate)? {
        return Ok(());
    }
    if n == 1 && gemv(b.offset, b.row_stride, b.data, a.t(), alpha, c, ldc, accumulate)? {
        return Ok(());
    }
    packed(a, None, b, None, alpha, c, ldc, accumulate)
}

/// An operand packed once for the products it takes part in again (a constant weight): its
/// blocks laid out as [`packed`] reads them, so that a product skips packing it. A left operand
/// (A) holds, for each depth block at `pc`, its `MC`-row blocks at `m_pad * pc + ic * kc`; a
/// right operand (B) holds, for each `NC`-column block at `jc`, its depth blocks at
/// `jc * k + pc * nc_pad`.
#[derive(Debug, Clone)]
pub struct Packed {
    rows: usize,
    cols: usize,
    left: bool,
    data: Vec<f32>,
}

impl Packed {
    /// `a` packed as the left operand of products.
    pub fn left(a: Matrix) -> Result<Packed> {
        a.check("a")?;
        let (m, k) = (a.rows, a.cols);
        let kc_max = depth_block(k);
        let m_pad = m.next_multiple_of(MR);
        let mut data = allocate(m_pad * k)?;
        for pc in (0..k).step_by(kc_max.max(1)) {
            let kc = kc_max.min(k - pc);
            for ic in (0..m).step_by(MC) {
                let mc = MC.min(m - ic);
                pack_a(&a, ic, mc, pc, kc, &mut data[m_pad * pc + ic * kc..][..mc.next_multiple_of(MR) * kc]);
            }
        }
        Ok(Packed { rows: m, cols: k, left: true, data })
    }

    /// `b` packed as the right operand of products.
    pub fn right(b: Matrix) -> Result<Packed> {
        b.check("b")?;
        let (k, n) = (b.rows, b.cols);
        let kc_max = depth_block(k);
        let mut data = allocate(n.next_multiple_of(NR) * k)?;
        for jc in (0..n).step_by(NC) {
            let nc = NC.min(n - jc);
            let nc_pad = nc.next_multiple_of(NR);
            for pc in (0..k).step_by(kc_max.max(1)) {
                let kc = kc_max.min(k - pc);
                pack_b(&b, pc, kc, jc, nc, &mut data[jc * k + pc * nc_pad..][..nc_pad * kc]);
            }
        }
        Ok(Packed { rows: k, cols: n, left: false, data })
    }

    /// Bytes it holds.
    pub fn bytes(&self) -> u64 {
        (self.data.len() * 4) as u64
    }

    /// Bytes [`Packed::right`] of a `rows x cols` matrix holds.
    pub fn right_bytes(rows: usize, cols: usize) -> u64 {
        (cols.next_multiple_of(NR) * rows * 4) as u64
    }
}

fn allocate(len: usize) -> Result<Vec<f32>> {
    let mut data = Vec::new();
    data.try_reserve_exact(len).map_err(|_| Error::Operation(format!("gemm: cannot allocate {len} floats of packed weights")))?;
    data.resize(len, 0.0);
    Ok(data)
}

/// Depth of the blocks of a product of depth `k`: equal blocks, so that k = KC + 1 does not
/// leave a block of depth 1.
pub(super) fn depth_block(k: usize) -> usize {
    k.div_ceil(k.div_ceil(KC).max(1))
}

/// [`gemm`] where A or B (or both) may also come packed ([`Packed`] of the same matrix): the
/// products that pack use the packed copy; single rows and columns stream the views.
#[allow(clippy::too_many_arguments)]
pub fn gemm_prepacked(
    a: Matrix,
    a_packed: Option<&Packed>,
    b: Matrix,
    b_packed: Option<&Packed>,
    alpha: f32,
    c: &mut [f32],
    ldc: usize,
    accumulate: bool,
) -> Result<()> {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    if a_packed.is_some_and(|p| !p.left || (p.rows, p.cols) != (m, k)) || b_packed.is_some_and(|p| p.left || (p.rows, p.cols) != (k, n)) {
        return Err(Error::Operation("gemm: a packed operand was built for another shape".into()));
    }
    if let (1, Some(b_packed)) = (m, b_packed) {
        if n > 1 && k > 0 {
            a.check("a")?;
            if c.len() < n {
                return Err(Error::Operation(format!("gemm: a 1 x {n} output exceeds {} elements", c.len())));
            }
            return packed_gemv(&a, &b_packed.data, n, alpha, &mut c[..n], accumulate);
        }
    }
    if m <= 1 || n <= 1 || k == 0 || (a_packed.is_none() && b_packed.is_none()) {
        return gemm(a, b, alpha, c, ldc, accumulate);
    }
    if b.rows != k {
        return Err(Error::Operation(format!("gemm: a has {k} columns but b has {} rows", b.rows)));
    }
    a.check("a")?;
    b.check("b")?;
    let fits = (m - 1).checked_mul(ldc).and_then(|i| i.checked_add(n)).is_some_and(|end| end <= c.len());
    if ldc < n || !fits {
        return Err(Error::Operation(format!("gemm: a {m} x {n} output with row stride {ldc} exceeds {} elements", c.len())));
    }
    packed(a, a_packed.map(|p| &p.data[..]), b, b_packed.map(|p| &p.data[..]), alpha, c, ldc, accumulate)
}

/// [`gemm_prepacked`] of `a` by a `k x n` B that `rows(range, values)` writes a depth block at a
/// time (rows `range`, `n` floats each, one after another: im2col's rows), each block packed
/// while it is in the cache: B is never stored whole. Needs `m` and `n` above 1 (a GEMV reads B
/// as it lies).
#[allow(clippy::too_many_arguments)]
pub fn gemm_packed_rows(
    a: Matrix,
    a_packed: Option<&Packed>,
    (k, n): (usize, usize),
    rows: &dyn Fn(Range<usize>, &mut [f32]),
    alpha: f32,
    c: &mut [f32],
    ldc: usize,
    accumulate: bool,
) -> Result<()> {
    let m = a.rows;
    if a.cols != k || a_packed.is_some_and(|p| !p.left || (p.rows, p.cols) != (m, k)) {
        return Err(Error::Operation("gemm: a packed operand was built for another shape".into()));
    }
    if m <= 1 || n <= 1 || k == 0 {
        return Err(Error::Operation("gemm: B by rows needs a product of at least two rows, two columns and depth 1".into()));
    }
    a.check("a")?;
    let fits = (m - 1).checked_mul(ldc).and_then(|i| i.checked_add(n)).is_some_and(|end| end <= c.len());
    if ldc < n || !fits {
        return Err(Error::Operation(format!("gemm: a {m} x {n} output with row stride {ldc} exceeds {} elements", c.len())));
    }
    let kc_max = depth_block(k);
    let too_large = || Error::NotSupported("gemm: B exceeds this platform's memory".into());
    let packed_len = n.next_multiple_of(NR).checked_mul(k).ok_or_else(too_large)?;
    let block_len = kc_max.checked_mul(n).ok_or_else(too_large)?;
    scratch::with(Slot::Columns, packed_len.checked_add(block_len).ok_or_else(too_large)?, |buffer| {
        let (data, values) = buffer.split_at_mut(packed_len);
        for pc in (0..k).step_by(kc_max) {
            let kc = kc_max.min(k - pc);
            rows(pc..pc + kc, &mut values[..kc * n]);
            let block = Matrix::row_major(values, kc, n);
            for jc in (0..n).step_by(NC) {
                let nc = NC.min(n - jc);
                let nc_pad = nc.next_multiple_of(NR);
                pack_b(&block, 0, kc, jc, nc, &mut data[jc * k + pc * nc_pad..][..nc_pad * kc]);
            }
        }
        // B's shape for the blocking; its values are only read packed.
        let b = Matrix { data: &[], offset: 0, rows: k, cols: n, row_stride: 0, col_stride: 0 };
        packed(a, a_packed.map(|p| &p.data[..]), b, Some(data), alpha, c, ldc, accumulate)
    })
}

/// `y[j * y_stride] (+)= alpha * sum_p x[p] * mat[p, j]` where `x[p]` is
/// `x_data[x_offset + p * x_stride]`. Returns false (nothing done) when `mat` has no unit stride
/// to stream along, leaving the product to the packed path.
#[allow(clippy::too_many_arguments)]
fn gemv(
    x_offset: usize,
    x_stride: usize,
    x_data: &[f32],
    mat: Matrix,
    alpha: f32,
    y: &mut [f32],
    y_stride: usize,
    accumulate: bool,
) -> Result<bool> {
    let (k, n) = (mat.rows, mat.cols);
    if mat.col_stride == 1 && y_stride == 1 {
        // Rows of `mat` are contiguous: y += (alpha * x[p]) * row p, four rows per pass over a
        // block of y that stays in L1; the CPU threads take column ranges of y.
        let y = Disjoint::new(&mut y[..n]);
        let x = |p: usize| alpha * x_data[x_offset + p * x_stride];
        let parts = gemv_parts(k, n);
        return threads::try_for_each(parts.len(), &|t| {
            let part = parts[t].clone();
            // SAFETY: the parts are disjoint ranges of y.
            let y = unsafe { y.segment(part.start, part.len()) };
            if !accumulate {
                y.fill(0.0);
            }
            let len = y.len();
            for j0 in (0..len).step_by(GEMV_COLUMNS) {
                let y = &mut y[j0..len.min(j0 + GEMV_COLUMNS)];
                let width = y.len();
                let row = |p: usize| &mat.data[mat.index(p, part.start + j0)..][..width];
                let mut p = 0;
                while p + 4 <= k {
                    let (x0, x1, x2, x3) = (x(p), x(p + 1), x(p + 2), x(p + 3));
                    let (r0, r1, r2, r3) = (row(p), row(p + 1), row(p + 2), row(p + 3));
                    for (j, out) in y.iter_mut().enumerate() {
                        *out += x0 * r0[j] + x1 * r1[j] + x2 * r2[j] + x3 * r3[j];
                    }
                    p += 4;
                }
                for p in p..k {
                    let (xp, r) = (x(p), row(p));
                    y.iter_mut().zip(r).for_each(|(out, &v)| *out += xp * v);
                }
            }
            Ok(())
        })
        .map(|()| true);
    }
    if mat.row_stride == 1 {
        // Columns of `mat` are contiguous: one dot product per output, x gathered once; the CPU
        // threads take ranges of outputs.
        return scratch::with(Slot::Pack, k, |xs| {
            for (p, v) in xs.iter_mut().enumerate() {
                *v = x_data[x_offset + p * x_stride];
            }
            let xs = &*xs;
            let y = Disjoint::new(y);
            let parts = gemv_parts(k, n);
            threads::try_for_each(parts.len(), &|t| {
                for j in parts[t].clone() {
                    let column = &mat.data[mat.index(0, j)..][..k];
                    let value = alpha * dot(xs, column);
                    // SAFETY: each output j belongs to one part.
                    if let [out] = unsafe { y.segment(j * y_stride, 1) } {
                        *out = if accumulate { *out + value } else { value };
                    }
                }
                Ok(())
            })?;
            Ok(true)
        });
    }
    Ok(false)
}

/// `y (+)= alpha * x * B` for the one row `x` (`1 x k`) and B packed ([`Packed::right`], `k x n`):
/// each thread takes ranges of B's column panels, which in every depth block lie one after
/// another, so that it reads one contiguous run of B per block rather than a piece of every
/// row (the row-streaming GEMV's pattern, which two threads stream more slowly).
fn packed_gemv(x: &Matrix, b: &[f32], n: usize, alpha: f32, y: &mut [f32], accumulate: bool) -> Result<()> {
    let k = x.cols;
    let kc_max = depth_block(k);
    if b.len() < n.next_multiple_of(NR) * k {
        return Err(Error::Operation("gemm: the packed operand is too short".into()));
    }
    scratch::with(Slot::Pack, k, |xs| {
        for (p, v) in xs.iter_mut().enumerate() {
            *v = alpha * x.data[x.index(0, p)];
        }
        let xs = &*xs;
        let y = Disjoint::new(y);
        let parts = gemv_parts(k, n);
        threads::try_for_each(parts.len(), &|t| {
            let part = parts[t].clone();
            // SAFETY: the parts are disjoint ranges of y.
            let y = unsafe { y.segment(part.start, part.len()) };
            if !accumulate {
                y.fill(0.0);
            }
            let mut j = part.start;
            while j < part.end {
                // The `NC`-column block of the packed B that column j lies in.
                let block_start = j / NC * NC;
                let block_pad = NC.min(n - block_start).next_multiple_of(NR);
                let end = part.end.min(block_start + NC);
                for pc in (0..k).step_by(kc_max) {
                    let kc = kc_max.min(k - pc);
                    let x = &xs[pc..pc + kc];
                    let block = &b[block_start * k + pc * block_pad..][..block_pad * kc];
                    let panel = |jr: usize| &block[(jr - block_start) * kc..][..NR * kc];
                    let mut jr = j;
                    while jr < end {
                        let out = &mut y[jr - part.start..(end - part.start).min(jr - part.start + GEMV_PANELS * NR)];
                        let sums = if out.len() > (GEMV_PANELS - 1) * NR {
                            gemv_panels(x, std::array::from_fn(|i| panel(jr + i * NR)))
                        } else {
                            let mut sums = [[0.0; NR]; GEMV_PANELS];
                            for (i, jp) in (jr..jr + out.len()).step_by(NR).enumerate() {
                                sums[i] = gemv_panels(x, [panel(jp)])[0];
                            }
                            sums
                        };
                        out.iter_mut().zip(sums.as_flattened()).for_each(|(o, s)| *o += s);
                        jr += out.len();
                    }
                }
                j = end;
            }
            Ok(())
        })
    })
}

/// Column panels of a packed B that [`packed_gemv`] reads at once.
const GEMV_PANELS: usize = 4;

/// `sum_p x[p] * panel[p]` for `P` packed panels of `NR` columns (`NR` values per step of depth).
#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
#[allow(clippy::needless_range_loop)]
fn gemv_panels<const P: usize>(x: &[f32], panels: [&[f32]; P]) -> [[f32; NR]; P] {
    let mut acc = [[0.0f32; NR]; P];
    for (p, &xp) in x.iter().enumerate() {
        for (acc, panel) in acc.iter_mut().zip(&panels) {
            let Some(Ok(b)) = panel.get(p * NR..(p + 1) * NR).map(<&[f32; NR]>::try_from) else { continue };
            for j in 0..NR {
                acc[j] += xp * b[j];
            }
        }
    }
    acc
}

/// `sum_p x[p] * panel[p]` for `P` packed panels of `NR` columns (`NR` values per step of depth):
/// two vector accumulators a panel, one splat of x per step.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
fn gemv_panels<const P: usize>(x: &[f32], panels: [&[f32]; P]) -> [[f32; NR]; P] {
    use core::arch::wasm32::{f32x4_add, f32x4_mul, f32x4_splat, v128, v128_load, v128_store};
    const _: () = assert!(NR == 8, "a panel's row is two vectors");
    let mut acc = [[f32x4_splat(0.0); 2]; P];
    let steps = panels.iter().map(|panel| panel.len() / NR).fold(x.len(), usize::min);
    for (p, &xp) in x.iter().enumerate().take(steps) {
        let xp = f32x4_splat(xp);
        for (acc, panel) in acc.iter_mut().zip(&panels) {
            // SAFETY: p < steps, so the panel holds the NR = 8 floats at p * NR: both unaligned
            // 16-byte loads are in bounds.
            let (b0, b1) = unsafe {
                let b = panel.as_ptr().add(p * NR);
                (v128_load(b.cast::<v128>()), v128_load(b.add(4).cast::<v128>()))
            };
            acc[0] = f32x4_add(acc[0], f32x4_mul(xp, b0));
            acc[1] = f32x4_add(acc[1], f32x4_mul(xp, b1));
        }
    }
    let mut sums = [[0.0f32; NR]; P];
    for (out, acc) in sums.iter_mut().zip(&acc) {
        // SAFETY: `out` holds 8 floats, so both unaligned 16-byte stores are in bounds.
        unsafe {
            v128_store(out.as_mut_ptr().cast::<v128>(), acc[0]);
            v128_store(out.as_mut_ptr().add(4).cast::<v128>(), acc[1]);
        }
    }
    sums
}

/// Streamed products of at least this many elements of the matrix are split between the CPU
/// threads.
const PARALLEL_GEMV: usize = 1 << 17;

/// The output ranges of a GEMV over a `k x n` matrix for the CPU threads: about two per thread,
/// multiples of 64 outputs.
pub(super) fn gemv_parts(k: usize, n: usize) -> Vec<Range<usize>> {
    threads::ranges(n, k.saturating_mul(n) >= PARALLEL_GEMV, 2, 64)
}

/// A dot product over 16 independent lanes, which LLVM turns into four vector accumulators.
fn dot(x: &[f32], y: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 16];
    let (xc, yc) = (x.chunks_exact(16), y.chunks_exact(16));
    let tail: f32 = xc.remainder().iter().zip(yc.remainder()).map(|(a, b)| a * b).sum();
    for (xs, ys) in xc.zip(yc) {
        for ((l, a), b) in lanes.iter_mut().zip(xs).zip(ys) {
            *l += a * b;
        }
    }
    lanes.iter().sum::<f32>() + tail
}

/// The blocked product, split into tiles of C for the CPU threads ([`tiles`]), each run by
/// [`block`]; `a_packed` and `b_packed`, where given, are the operands' data in [`Packed`]'s
/// layout.
#[allow(clippy::too_many_arguments)]
fn packed(a: Matrix, a_packed: Option<&[f32]>, b: Matrix, b_packed: Option<&[f32]>, alpha: f32, c: &mut [f32], ldc: usize, accumulate: bool) -> Result<()> {
    let (m, n) = (a.rows, b.cols);
    let out = Disjoint::new(c);
    let tiles = tiles(m, n, a.cols);
    threads::try_for_each(tiles.len(), &|t| {
        let (rows, cols) = tiles[t].clone();
        block(&a, a_packed, &b, b_packed, alpha, &out, ldc, accumulate, rows, cols)
    })
}

/// Products of at least this many multiply-adds are split between the CPU threads: a smaller one
/// gains less than the split costs (publishing the job, a worker joining late, its output moving
/// between the cores' caches).
const PARALLEL_MACS: usize = 1 << 21;

/// The tiles of an `m x n` product of depth `k` for the CPU threads: about four per thread (so
/// that tiles of unequal cost still even out), rows split at multiples of `MC` first (each tile
/// packs its own B block, so tall tiles pack least), columns at multiples of `NR` where the rows
/// are too few.
pub(super) fn tiles(m: usize, n: usize, k: usize) -> Vec<(Range<usize>, Range<usize>)> {
    let threads = if m.saturating_mul(n).saturating_mul(k) >= PARALLEL_MACS { threads::count() } else { 1 };
    let want = if threads > 1 { 4 * threads } else { 1 };
    let row_blocks = m.div_ceil(MC);
    let row_parts = row_blocks.clamp(1, want);
    let rows_per = row_blocks.div_ceil(row_parts) * MC;
    let col_parts = want.div_ceil(row_parts).min(n.div_ceil(NR * 8)).max(1);
    let cols_per = n.div_ceil(col_parts).next_multiple_of(NR);
    let mut tiles = Vec::new();
    for i in (0..m).step_by(rows_per.max(1)) {
        for j in (0..n).step_by(cols_per.max(1)) {
            tiles.push((i..m.min(i + rows_per), j..n.min(j + cols_per)));
        }
    }
    tiles
}

/// The blocked product of rows `rows` and columns `cols` of C: B blocks packed once per
/// `(jc, pc)`, A blocks once per `(jc, pc, ic)` (or taken from their [`Packed`] copies), the
/// micro-kernel over every `MR x NR` tile of the block. `rows` starts at a multiple of `MC` and
/// `cols` at a multiple of `NR`.
#[allow(clippy::too_many_arguments)]
fn block(
    a: &Matrix,
    a_packed: Option<&[f32]>,
    b: &Matrix,
    b_packed: Option<&[f32]>,
    alpha: f32,
    c: &Disjoint,
    ldc: usize,
    accumulate: bool,
    rows: Range<usize>,
    cols: Range<usize>,
) -> Result<()> {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    let kc_max = depth_block(k);
    let mc_max = if a_packed.is_some() { 0 } else { rows.len().min(MC).next_multiple_of(MR) };
    let nc_max = if b_packed.is_some() { 0 } else { cols.len().min(NC).next_multiple_of(NR) };
    let m_pad = m.next_multiple_of(MR);
    scratch::with(Slot::Pack, (mc_max + nc_max) * kc_max, |buffer| {
        let (a_pack, b_pack) = buffer.split_at_mut(mc_max * kc_max);
        let mut jc = cols.start;
        while jc < cols.end {
            // Column blocks end where a packed B's blocks end, at multiples of NC.
            let block_start = jc / NC * NC;
            let nc = cols.end.min(block_start + NC) - jc;
            let nc_pad = nc.next_multiple_of(NR);
            let block_pad = NC.min(n - block_start).next_multiple_of(NR);
            for pc in (0..k).step_by(kc_max) {
                let kc = kc_max.min(k - pc);
                let b_block: &[f32] = match b_packed {
                    Some(p) => &p[block_start * k + pc * block_pad + (jc - block_start) * kc..][..nc_pad * kc],
                    None => {
                        pack_b(b, pc, kc, jc, nc, b_pack);
                        b_pack
                    }
                };
                // Blocks after the first depth block add to what the first wrote.
                let add = accumulate || pc > 0;
                for ic in rows.clone().step_by(MC) {
                    let mc = MC.min(rows.end - ic);
                    let a_block: &[f32] = match a_packed {
                        Some(p) => &p[m_pad * pc + ic * kc..][..mc.next_multiple_of(MR) * kc],
                        None => {
                            pack_a(a, ic, mc, pc, kc, a_pack);
                            a_pack
                        }
                    };
                    for jr in (0..nc).step_by(NR) {
                        let b_panel = &b_block[jr * kc..(jr + NR) * kc];
                        let cols = NR.min(nc - jr);
                        for ir in (0..mc).step_by(MR) {
                            let a_panel = &a_block[ir * kc..(ir + MR) * kc];
                            // A last panel of at most half its columns (a small image's pixels)
                            // computes only that half.
                            let tile = if cols <= NR / 2 { micro_kernel_half(a_panel, b_panel) } else { micro_kernel(a_panel, b_panel) };
                            let rows = MR.min(mc - ir);
                            store(&tile, alpha, c, (ic + ir) * ldc + jc + jr, ldc, rows, cols, add);
                        }
                    }
                }
            }
            jc += nc;
        }
        Ok(())
    })
}

/// Packs rows `ic..ic + mc`, columns `pc..pc + kc` of A as panels of `MR` rows, each stored
/// column by column (`MR` values per step of k), the last panel padded with zero rows.
pub(super) fn pack_a(a: &Matrix, ic: usize, mc: usize, pc: usize, kc: usize, dst: &mut [f32]) {
    for (panel, i0) in (0..mc).step_by(MR).enumerate() {
        let dst = &mut dst[panel * MR * kc..(panel + 1) * MR * kc];
        let rows = MR.min(mc - i0);
        if rows < MR {
            dst.fill(0.0);
        }
        for i in 0..rows {
            let start = a.index(ic + i0 + i, pc);
            if a.col_stride == 1 {
                let src = &a.data[start..start + kc];
                dst.iter_mut().skip(i).step_by(MR).zip(src).for_each(|(d, &s)| *d = s);
            } else {
                for (p, d) in dst.iter_mut().skip(i).step_by(MR).enumerate() {
                    *d = a.data[start + p * a.col_stride];
                }
            }
        }
    }
}

/// Packs rows `pc..pc + kc`, columns `jc..jc + nc` of B as panels of `NR` columns, each stored
/// row by row (`NR` values per step of k), the last panel padded with zero columns.
fn pack_b(b: &Matrix, pc: usize, kc: usize, jc: usize, nc: usize, dst: &mut [f32]) {
    for (panel, j0) in (0..nc).step_by(NR).enumerate() {
        let dst = &mut dst[panel * NR * kc..(panel + 1) * NR * kc];
        let cols = NR.min(nc - j0);
        if b.col_stride == 1 {
            for (p, d) in dst.chunks_exact_mut(NR).enumerate() {
                let start = b.index(pc + p, jc + j0);
                let source = &b.data[start..start + cols];
                // A whole panel row is one fixed-size copy rather than a `memcpy` call.
                match (<&mut [f32; NR]>::try_from(&mut *d), <&[f32; NR]>::try_from(source)) {
                    (Ok(d), Ok(source)) => *d = *source,
                    _ => {
                        d[..cols].copy_from_slice(source);
                        d[cols..].fill(0.0);
                    }
                }
            }
        } else {
            if cols < NR {
                dst.fill(0.0);
            }
            for j in 0..cols {
                let start = b.index(pc, jc + j0 + j);
                for (p, d) in dst.iter_mut().skip(j).step_by(NR).enumerate() {
                    *d = b.data[start + p * b.row_stride];
                }
            }
        }
    }
}

/// Writes the `rows x cols` corner of a tile to C at `start`, scaled by alpha.
#[allow(clippy::too_many_arguments)]
fn store(tile: &[[f32; NR]; MR], alpha: f32, c: &Disjoint, start: usize, ldc: usize, rows: usize, cols: usize, add: bool) {
    for (i, values) in tile.iter().enumerate().take(rows) {
        // SAFETY: the tiles of one product cover disjoint rows or column ranges of C (`ldc` is at
        // least its width), and this row segment is the only one of them in use on this thread.
        let out = unsafe { c.segment(start + i * ldc, cols) };
        if add {
            out.iter_mut().zip(values).for_each(|(o, &v)| *o += alpha * v);
        } else {
            out.iter_mut().zip(values).for_each(|(o, &v)| *o = alpha * v);
        }
    }
}

/// The `MR x NR` product of an A panel (`MR` values per step) and a B panel (`NR` per step).
/// Constant-bound index loops (not iterators) are what LLVM reliably unrolls into `MR * NR / 4`
/// vector accumulators; not inlined, since inside the blocking loops it spills them.
#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
#[inline(never)]
#[allow(clippy::needless_range_loop)]
fn micro_kernel(a: &[f32], b: &[f32]) -> [[f32; NR]; MR] {
    let mut acc = [[0.0f32; NR]; MR];
    for (a, b) in a.chunks_exact(MR).zip(b.chunks_exact(NR)) {
        let (Ok(a), Ok(b)) = (<&[f32; MR]>::try_from(a), <&[f32; NR]>::try_from(b)) else { continue };
        for i in 0..MR {
            for j in 0..NR {
                acc[i][j] += a[i] * b[j];
            }
        }
    }
    acc
}

/// The `MR x NR` product of an A panel (`MR` values per step) and a B panel (`NR` per step):
/// `MR x 2` vector accumulators, one splat of A and two loads of B per row and step.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
#[inline(never)]
fn micro_kernel(a: &[f32], b: &[f32]) -> [[f32; NR]; MR] {
    use core::arch::wasm32::{f32x4_add, f32x4_mul, f32x4_splat, v128, v128_load, v128_store};
    const _: () = assert!(NR == 8, "the SIMD128 micro-kernel holds a row in two vectors");
    let mut acc = [[f32x4_splat(0.0); 2]; MR];
    for (a, b) in a.chunks_exact(MR).zip(b.chunks_exact(NR)) {
        // SAFETY: `b` holds NR = 8 floats, so both unaligned 16-byte loads are in bounds.
        let (b0, b1) = unsafe { (v128_load(b.as_ptr().cast::<v128>()), v128_load(b.as_ptr().add(4).cast::<v128>())) };
        for (row, &ai) in acc.iter_mut().zip(a) {
            let ai = f32x4_splat(ai);
            row[0] = f32x4_add(row[0], f32x4_mul(ai, b0));
            row[1] = f32x4_add(row[1], f32x4_mul(ai, b1));
        }
    }
    let mut tile = [[0.0f32; NR]; MR];
    for (out, row) in tile.iter_mut().zip(&acc) {
        // SAFETY: `out` holds 8 floats, so both unaligned 16-byte stores are in bounds.
        unsafe {
            v128_store(out.as_mut_ptr().cast::<v128>(), row[0]);
            v128_store(out.as_mut_ptr().add(4).cast::<v128>(), row[1]);
        }
    }
    tile
}

/// [`micro_kernel`] on the first `NR / 2` columns of the B panel; the other half of the tile is 0.
#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
#[inline(never)]
#[allow(clippy::needless_range_loop)]
fn micro_kernel_half(a: &[f32], b: &[f32]) -> [[f32; NR]; MR] {
    let mut acc = [[0.0f32; NR]; MR];
    for (a, b) in a.chunks_exact(MR).zip(b.chunks_exact(NR)) {
        let (Ok(a), Ok(b)) = (<&[f32; MR]>::try_from(a), <&[f32; NR]>::try_from(b)) else { continue };
        for i in 0..MR {
            for j in 0..NR / 2 {
                acc[i][j] += a[i] * b[j];
            }
        }
    }
    acc
}

/// [`micro_kernel`] on the first `NR / 2` columns of the B panel (one vector accumulator a row);
/// the other half of the tile is 0.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
#[inline(never)]
fn micro_kernel_half(a: &[f32], b: &[f32]) -> [[f32; NR]; MR] {
    use core::arch::wasm32::{f32x4_add, f32x4_mul, f32x4_splat, v128, v128_load, v128_store};
    let mut acc = [f32x4_splat(0.0); MR];
    for (a, b) in a.chunks_exact(MR).zip(b.chunks_exact(NR)) {
        // SAFETY: `b` holds NR = 8 floats, so the unaligned 16-byte load is in bounds.
        let b0 = unsafe { v128_load(b.as_ptr().cast::<v128>()) };
        for (row, &ai) in acc.iter_mut().zip(a) {
            *row = f32x4_add(*row, f32x4_mul(f32x4_splat(ai), b0));
        }
    }
    let mut tile = [[0.0f32; NR]; MR];
    for (out, row) in tile.iter_mut().zip(&acc) {
        // SAFETY: `out` holds 8 floats, so the unaligned 16-byte store is in bounds.
        unsafe { v128_store(out.as_mut_ptr().cast::<v128>(), *row) };
    }
    tile
}

/// The element count of `shape`, or an error if it overflows.
fn element_count(what: &str, shape: &[u32]) -> Result<usize> {
    shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d as usize))
        .ok_or_else(|| Error::Operation(format!("{what}: the shape {shape:?} has too many elements")))
}

pub(super) fn check_len(what: &str, shape: &[u32], len: usize) -> Result<usize> {
    let count = element_count(what, shape)?;
    if count != len {
        return Err(Error::Operation(format!("{what}: shape {shape:?} needs {count} elements but has {len}")));
    }
    Ok(count)
}

/// [`gemm`] of `a` by a B given only packed ([`Packed::right`]: float16 weights, never stored
/// whole as float32), for products of at least two columns.
pub fn gemm_packed_b(a: Matrix, b: &Packed, alpha: f32, c: &mut [f32], ldc: usize, accumulate: bool) -> Result<()> {
    let (m, k, n) = (a.rows, b.rows, b.cols);
    if b.left || a.cols != k || m == 0 || n <= 1 || k == 0 {
        return Err(Error::Operation(format!("gemm: a {m} x {} by a packed {k} x {n} B is not a product this path runs", a.cols)));
    }
    a.check("a")?;
    if m == 1 {
        if c.len() < n {
            return Err(Error::Operation(format!("gemm: a 1 x {n} output exceeds {} elements", c.len())));
        }
        return packed_gemv(&a, &b.data, n, alpha, &mut c[..n], accumulate);
    }
    let fits = (m - 1).checked_mul(ldc).and_then(|i| i.checked_add(n)).is_some_and(|end| end <= c.len());
    if ldc < n || !fits {
        return Err(Error::Operation(format!("gemm: a {m} x {n} output with row stride {ldc} exceeds {} elements", c.len())));
    }
    // B's shape for the blocking; its values are only read packed.
    let shape = Matrix { data: &[], offset: 0, rows: k, cols: n, row_stride: 0, col_stride: 0 };
    packed(a, None, shape, Some(&b.data), alpha, c, ldc, accumulate)
}

/// WebNN matmul: `a` of shape `[..., M, K]`, `b` of `[..., K, N]`, batch dimensions broadcast
/// (numpy rules, the shorter left-padded with 1s); `out` is the broadcast `[..., M, N]`.
pub fn matmul(a: &[f32], a_shape: &[u32], b: &[f32], b_shape: &[u32], out: &mut [f32]) -> Result<()> {
    matmul_prepacked(a, a_shape, b, b_shape, None, out)
}

/// [`matmul`] with a rank-2 `b` also given packed ([`Packed::right`]).
pub fn matmul_prepacked(a: &[f32], a_shape: &[u32], b: &[f32], b_shape: &[u32], b_packed: Option<&Packed>, out: &mut [f32]) -> Result<()> {
    let (ra, rb) = (a_shape.len(), b_shape.len());
    if ra < 2 || rb < 2 {
        return Err(Error::Operation(format!("matmul: a {a_shape:?} and b {b_shape:?} must have rank 2 or more")));
    }
    let (m, k) = (a_shape[ra - 2] as usize, a_shape[ra - 1] as usize);
    let n = b_shape[rb - 1] as usize;
    if b_shape[rb - 2] as usize != k {
        return Err(Error::Operation(format!("matmul: a {a_shape:?} and b {b_shape:?} differ in K")));
    }
    check_len("matmul a", a_shape, a.len())?;
    check_len("matmul b", b_shape, b.len())?;
    // The broadcast batch shape, with each operand's element stride along it (0 where broadcast).
    let rank = ra.max(rb) - 2;
    let mut batch = vec![1usize; rank];
    let (mut a_strides, mut b_strides) = (vec![0usize; rank], vec![0usize; rank]);
    let (mut a_step, mut b_step) = (m * k, k * n);
    for axis in (0..rank).rev() {
        let dim = |shape: &[u32]| (axis + shape.len()).checked_sub(rank + 2).map_or(1, |i| shape[i] as usize);
        let (da, db) = (dim(a_shape), dim(b_shape));
        if da != db && da != 1 && db != 1 {
            return Err(Error::Operation(format!("matmul: the batches of a {a_shape:?} and b {b_shape:?} do not broadcast")));
        }
        batch[axis] = if da == 1 { db } else { da };
        if da != 1 {
            a_strides[axis] = a_step;
        }
        if db != 1 {
            b_strides[axis] = b_step;
        }
        (a_step, b_step) = (a_step * da, b_step * db);
    }
    let mut out_shape: Vec<u32> = batch.iter().map(|&d| d as u32).collect();
    out_shape.extend([m as u32, n as u32]);
    check_len("matmul output", &out_shape, out.len())?;
    let batches: usize = batch.iter().product();
    // A single B (no batch of its own) against a batch of A is one product of all A's rows.
    if b_step == k * n && a_step == batches * m * k {
        return gemm_prepacked(Matrix::row_major(a, batches * m, k), None, Matrix::row_major(b, k, n), b_packed, 1.0, out, n, false);
    }
    for (index, c) in out.chunks_exact_mut((m * n).max(1)).enumerate().take(batches) {
        let (mut rest, mut a_offset, mut b_offset) = (index, 0, 0);
        for axis in (0..rank).rev() {
            let coord = rest % batch[axis];
            rest /= batch[axis];
            a_offset += coord * a_strides[axis];
            b_offset += coord * b_strides[axis];
        }
        let a = Matrix { offset: a_offset, ..Matrix::row_major(a, m, k) };
        let b = Matrix { offset: b_offset, ..Matrix::row_major(b, k, n) };
        gemm(a, b, 1.0, c, n, false)?;
    }
    Ok(())
}

/// WebNN gemm (2-D): `out = alpha * op(A) * op(B) + beta * C`, op transposing when its flag is
/// set, C (shape `[]`, `[N]`, `[1, N]`, `[M, 1]`, `[M, N]`, ...) broadcast to `[M, N]`.
#[allow(clippy::too_many_arguments)]
pub fn gemm_op(
    a: &[f32],
    a_shape: &[u32],
    b: &[f32],
    b_shape: &[u32],
    c: Option<(&[f32], &[u32])>,
    alpha: f32,
    beta: f32,
    a_transpose: bool,
    b_transpose: bool,
    out: &mut [f32],
) -> Result<()> {
    gemm_op_prepacked(a, a_shape, b, b_shape, None, c, alpha, beta, a_transpose, b_transpose, out)
}

/// The matrix `op(B)` of WebNN gemm: `b` of shape `[b0, b1]`, transposed when `b_transpose`.
pub fn gemm_b<'a>(b: &'a [f32], b_shape: &[u32], b_transpose: bool) -> Result<Matrix<'a>> {
    let &[b0, b1] = b_shape else {
        return Err(Error::Operation(format!("gemm: b {b_shape:?} must have rank 2")));
    };
    check_len("gemm b", b_shape, b.len())?;
    let b = Matrix::row_major(b, b0 as usize, b1 as usize);
    Ok(if b_transpose { b.t() } else { b })
}

/// [`gemm_op`] with `op(B)` also given packed ([`Packed::right`] of [`gemm_b`]).
#[allow(clippy::too_many_arguments)]
pub fn gemm_op_prepacked(
    a: &[f32],
    a_shape: &[u32],
    b: &[f32],
    b_shape: &[u32],
    b_packed: Option<&Packed>,
    c: Option<(&[f32], &[u32])>,
    alpha: f32,
    beta: f32,
    a_transpose: bool,
    b_transpose: bool,
    out: &mut [f32],
) -> Result<()> {
    let &[a0, a1] = a_shape else {
        return Err(Error::Operation(format!("gemm: a {a_shape:?} must have rank 2")));
    };
    check_len("gemm a", a_shape, a.len())?;
    let (a0, a1) = (a0 as usize, a1 as usize);
    let a = if a_transpose { Matrix::row_major(a, a0, a1).t() } else { Matrix::row_major(a, a0, a1) };
    let b = gemm_b(b, b_shape, b_transpose)?;
    let (m, n) = (a.rows, b.cols);
    check_len("gemm output", &[m as u32, n as u32], out.len())?;
    if let Some(c) = c {
        fill_c(c, beta, m, n, out)?;
    }
    gemm_prepacked(a, None, b, b_packed, alpha, out, n, c.is_some())
}

/// Fills the `m x n` output with `beta * C`, C (shape `[]`, `[N]`, `[1, N]`, `[M, 1]`, `[M, N]`,
/// ...) broadcast to `[M, N]`: gemm's product is then added to it.
pub fn fill_c((c, c_shape): (&[f32], &[u32]), beta: f32, m: usize, n: usize, out: &mut [f32]) -> Result<()> {
    check_len("gemm c", c_shape, c.len())?;
    // C's shape left-padded to [rows, cols], each 1 (broadcast) or the output's.
    let dims = match *c_shape {
        [] => [1, 1],
        [cols] => [1, cols as usize],
        [rows, cols] => [rows as usize, cols as usize],
        _ => return Err(Error::Operation(format!("gemm: c {c_shape:?} has a rank above 2"))),
    };
    if !(dims[0] == 1 || dims[0] == m) || !(dims[1] == 1 || dims[1] == n) {
        return Err(Error::Operation(format!("gemm: c {c_shape:?} does not broadcast to [{m}, {n}]")));
    }
    if n > 0 {
        for (i, row) in out.chunks_exact_mut(n).enumerate() {
            let c_row = &c[if dims[0] == 1 { 0 } else { i * dims[1] }..][..dims[1]];
            match c_row {
                [value] => row.fill(beta * value),
                _ => row.iter_mut().zip(c_row).for_each(|(o, &v)| *o = beta * v),
            }
        }
    }
    Ok(())
}
