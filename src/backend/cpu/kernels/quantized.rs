//! Float32 matmul and gemm whose B is `dequantizeLinear` of an 8-bit constant with one scale and
//! zero point for the whole tensor or one per output column:
//! `op(B)[p, j] = (q[p, j] - zeroPoint[j]) * scale[j]`. The differences `q - zeroPoint` are
//! packed once as integers (int8 where every one fits, as symmetric weights do, else int16) in
//! panels of `NR` columns; the kernels widen them to float32 as they read them, accumulate
//! `A * (q - zeroPoint)` in float32 and multiply each column by its scale once, at the end. The
//! weight stays a quarter (or a half) of its float32 size in memory and in the caches.
//!
//! The products split between the CPU threads as the float32 GEMM's do (tiles of C, output
//! ranges of a GEMV), so every result is the single-thread one.

use crate::backend::cpu::threads::{self, Disjoint};
use crate::error::{Error, Result};
use crate::operand::{DataType, OperandDescriptor};

use super::gemm::{self, depth_block, pack_a, Matrix, MC, MR, NR};
use super::scratch::{self, Slot};

/// `q - zeroPoint` of `op(B)` (`rows x cols`): panel `t` (columns `t * NR..`) at `t * rows * NR`,
/// stored row by row (`NR` values per step of k), the last panel padded with zero columns.
enum Differences {
    Int8(Vec<i8>),
    Int16(Vec<i16>),
}

/// `op(B)` of `dequantizeLinear(q, scale, zeroPoint)`, packed for [`product`].
pub struct QuantizedB {
    rows: usize,
    cols: usize,
    differences: Differences,
    /// The scale of each column.
    scale: Vec<f32>,
}

impl QuantizedB {
    /// `q` is int8 or uint8 of shape `[rows, cols]` (`[cols, rows]` when `transposed`, gemm's
    /// bTranspose); `scale` (float32) and `zeroPoint` (q's type) have one element, or one per
    /// column along the column axis.
    pub fn new(q: (&OperandDescriptor, &[u8]), scale: (&OperandDescriptor, &[f32]), zero_point: &[u8], transposed: bool) -> Result<QuantizedB> {
        let (descriptor, bytes) = q;
        let signed = match descriptor.data_type {
            DataType::Int8 => true,
            DataType::Uint8 => false,
            other => return Err(Error::Operation(format!("dequantized B: {other} is not an 8-bit type"))),
        };
        let (&[d0, d1], &[s0, s1]) = (descriptor.shape.as_slice(), scale.0.shape.as_slice()) else {
            return Err(Error::Operation("dequantized B: q and scale must have rank 2".into()));
        };
        let (rows, cols, row_params, params) =
            if transposed { (d1 as usize, d0 as usize, s1, scale.1.len()) } else { (d0 as usize, d1 as usize, s0, scale.1.len()) };
        if rows.checked_mul(cols) != Some(bytes.len()) || row_params != 1 || !(params == 1 || params == cols) || zero_point.len() != params {
            return Err(Error::Operation(format!(
                "dequantized B: q {:?} ({} bytes) with scale {:?} ({params} values) and {} zero points",
                descriptor.shape,
                bytes.len(),
                scale.0.shape,
                zero_point.len()
            )));
        }
        let value = |byte: u8| if signed { byte as i8 as i32 } else { byte as i32 };
        let param = |j: usize| if params == 1 { 0 } else { j };
        let difference = |p: usize, j: usize| value(bytes[if transposed { j * rows + p } else { p * cols + j }]) - value(zero_point[param(j)]);
        let fits = (0..rows).all(|p| (0..cols).all(|j| i8::try_from(difference(p, j)).is_ok()));
        let differences = if fits {
            Differences::Int8(pack(rows, cols, |p, j| difference(p, j) as i8)?)
        } else {
            Differences::Int16(pack(rows, cols, |p, j| difference(p, j) as i16)?)
        };
        let mut column_scale = Vec::new();
        column_scale.try_reserve_exact(cols).map_err(|_| Error::Operation("dequantized B: cannot allocate its scales".into()))?;
        column_scale.extend((0..cols).map(|j| scale.1[param(j)]));
        Ok(QuantizedB { rows, cols, differences, scale: column_scale })
    }

    /// Bytes it holds.
    pub fn bytes(&self) -> u64 {
        let differences = match &self.differences {
            Differences::Int8(d) => d.len(),
            Differences::Int16(d) => d.len() * 2,
        };
        (differences + self.scale.len() * 4) as u64
    }

    /// The most bytes [`QuantizedB::new`] of this `q` holds.
    pub fn bound(q: &OperandDescriptor, transposed: bool) -> u64 {
        let (rows, cols) = match (q.shape.as_slice(), transposed) {
            (&[d0, d1], false) => (d0 as u64, d1 as u64),
            (&[d0, d1], true) => (d1 as u64, d0 as u64),
            _ => (0, 0),
        };
        cols.next_multiple_of(NR as u64) * rows * 2 + cols * 4
    }
}

/// `rows x cols` values `f(p, j)` in panels of `NR` columns.
fn pack<T: Copy + Default>(rows: usize, cols: usize, f: impl Fn(usize, usize) -> T) -> Result<Vec<T>> {
    let len = cols.next_multiple_of(NR) * rows;
    let mut data = Vec::new();
    data.try_reserve_exact(len).map_err(|_| Error::Operation(format!("dequantized B: cannot allocate {len} packed values")))?;
    data.resize(len, T::default());
    for (t, panel) in data.chunks_exact_mut((rows * NR).max(1)).enumerate() {
        for (p, row) in panel.chunks_exact_mut(NR).enumerate() {
            for (jj, value) in row.iter_mut().enumerate().take(cols.saturating_sub(t * NR)) {
                *value = f(p, t * NR + jj);
            }
        }
    }
    Ok(data)
}

/// `C[m x n] (+)= alpha * A[m x k] * op(B)`, C row-major `m x n`; with `accumulate` the product
/// is added to C (gemm's `beta * C`, filled in by the caller), otherwise C is overwritten.
pub fn product(a: Matrix, b: &QuantizedB, alpha: f32, c: &mut [f32], accumulate: bool) -> Result<()> {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    if b.rows != k || m.checked_mul(n) != Some(c.len()) {
        return Err(Error::Operation(format!("dequantized B: a {m} x {k}, b {} x {n} and {} outputs do not match", b.rows, c.len())));
    }
    a.check("a")?;
    if m == 0 || n == 0 {
        return Ok(());
    }
    if k == 0 {
        if !accumulate {
            c.fill(0.0);
        }
        return Ok(());
    }
    match &b.differences {
        Differences::Int8(d) => run(&a, d, &b.scale, alpha, c, accumulate),
        Differences::Int16(d) => run(&a, d, &b.scale, alpha, c, accumulate),
    }
}

fn run<D: Difference>(a: &Matrix, d: &[D], scale: &[f32], alpha: f32, c: &mut [f32], accumulate: bool) -> Result<()> {
    let (m, k, n) = (a.rows, a.cols, scale.len());
    if d.len() != n.next_multiple_of(NR) * k {
        return Err(Error::Operation("dequantized B: its panels do not match its shape".into()));
    }
    let out = Disjoint::new(c);
    if m == 1 {
        // One row: a dot product of the row with each panel, the row gathered once; the CPU
        // threads take ranges of columns.
        return scratch::with(Slot::Pack, k, |x| {
            for (p, v) in x.iter_mut().enumerate() {
                *v = a.data[a.index(0, p)];
            }
            let x = &*x;
            let parts = gemm::gemv_parts(k, n);
            threads::try_for_each(parts.len(), &|t| {
                let cols = parts[t].clone();
                for j0 in cols.clone().step_by(NR) {
                    let sums = panel_dot(x, &d[j0 / NR * k * NR..][..k * NR]);
                    let width = NR.min(cols.end - j0);
                    store(&[sums], alpha, &scale[j0..j0 + width], &out, j0, n, 1, accumulate);
                }
                Ok(())
            })
        });
    }
    // The float32 GEMM's blocking: tiles of C for the threads, A packed in `MC x KC` blocks, each
    // `KC x NR` block of a B panel used by every `MR`-row panel of the A block.
    let tiles = gemm::tiles(m, n, k);
    let kc_max = depth_block(k);
    threads::try_for_each(tiles.len(), &|t| {
        let (rows, cols) = tiles[t].clone();
        let mc_max = rows.len().min(MC).next_multiple_of(MR);
        scratch::with(Slot::Pack, mc_max * kc_max, |a_pack| {
            for pc in (0..k).step_by(kc_max) {
                let kc = kc_max.min(k - pc);
                // Depth blocks after the first add to what the first wrote.
                let add = accumulate || pc > 0;
                for ic in rows.clone().step_by(MC) {
                    let mc = MC.min(rows.end - ic);
                    pack_a(a, ic, mc, pc, kc, a_pack);
                    for j0 in cols.clone().step_by(NR) {
                        let panel = &d[j0 / NR * k * NR + pc * NR..][..kc * NR];
                        let width = NR.min(cols.end - j0);
                        for ir in (0..mc).step_by(MR) {
                            let tile = micro_kernel(&a_pack[ir * kc..(ir + MR) * kc], panel);
                            store(&tile, alpha, &scale[j0..j0 + width], &out, (ic + ir) * n + j0, n, MR.min(mc - ir), add);
                        }
                    }
                }
            }
            Ok(())
        })
    })
}

/// Writes the first `rows` rows of a tile, each column scaled by `alpha * scale[j]`, to C at
/// `start` (row stride `ldc`, `scale.len()` columns).
#[allow(clippy::too_many_arguments)]
fn store(tile: &[[f32; NR]], alpha: f32, scale: &[f32], c: &Disjoint, start: usize, ldc: usize, rows: usize, add: bool) {
    for (i, values) in tile.iter().enumerate().take(rows) {
        // SAFETY: the tiles and column ranges of one product are disjoint, and this row segment
        // is the only one of them in use on this thread.
        let out = unsafe { c.segment(start + i * ldc, scale.len()) };
        for ((o, &v), &s) in out.iter_mut().zip(values).zip(scale) {
            let v = alpha * s * v;
            *o = if add { *o + v } else { v };
        }
    }
}

/// A packed integer difference, widened to float32 as it is read.
trait Difference: Copy + Sync {
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    fn widen(self) -> f32;

    /// `NR` differences widened, as two vectors.
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    fn load(values: &[Self; NR]) -> (core::arch::wasm32::v128, core::arch::wasm32::v128);
}

#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
fn widen_i16x8(w: core::arch::wasm32::v128) -> (core::arch::wasm32::v128, core::arch::wasm32::v128) {
    use core::arch::wasm32::{f32x4_convert_i32x4, i32x4_extend_high_i16x8, i32x4_extend_low_i16x8};
    (f32x4_convert_i32x4(i32x4_extend_low_i16x8(w)), f32x4_convert_i32x4(i32x4_extend_high_i16x8(w)))
}

impl Difference for i8 {
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    fn widen(self) -> f32 {
        self as f32
    }

    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    fn load(values: &[i8; NR]) -> (core::arch::wasm32::v128, core::arch::wasm32::v128) {
        // SAFETY: `values` holds NR = 8 bytes, the 8 that the load reads.
        widen_i16x8(unsafe { core::arch::wasm32::i16x8_load_extend_i8x8(values.as_ptr()) })
    }
}

impl Difference for i16 {
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    fn widen(self) -> f32 {
        self as f32
    }

    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    fn load(values: &[i16; NR]) -> (core::arch::wasm32::v128, core::arch::wasm32::v128) {
        // SAFETY: `values` holds NR = 8 int16, the 16 bytes that the load reads.
        widen_i16x8(unsafe { core::arch::wasm32::v128_load(values.as_ptr().cast()) })
    }
}

/// The `MR x NR` product of an A panel (`MR` values per step) and a B panel (`NR` per step).
#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
#[inline(never)]
#[allow(clippy::needless_range_loop)]
fn micro_kernel<D: Difference>(a: &[f32], b: &[D]) -> [[f32; NR]; MR] {
    let mut acc = [[0.0f32; NR]; MR];
    for (a, b) in a.chunks_exact(MR).zip(b.chunks_exact(NR)) {
        let (Ok(a), Ok(b)) = (<&[f32; MR]>::try_from(a), <&[D; NR]>::try_from(b)) else { continue };
        let b = b.map(D::widen);
        for i in 0..MR {
            for j in 0..NR {
                acc[i][j] += a[i] * b[j];
            }
        }
    }
    acc
}

/// The `MR x NR` product of an A panel (`MR` values per step) and a B panel (`NR` per step):
/// `MR x 2` vector accumulators, the B row widened once per step for the `MR` rows.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
#[inline(never)]
fn micro_kernel<D: Difference>(a: &[f32], b: &[D]) -> [[f32; NR]; MR] {
    use core::arch::wasm32::{f32x4_add, f32x4_mul, f32x4_splat, v128, v128_store};
    let mut acc = [[f32x4_splat(0.0); 2]; MR];
    for (a, b) in a.chunks_exact(MR).zip(b.chunks_exact(NR)) {
        let Ok(b) = <&[D; NR]>::try_from(b) else { continue };
        let (b0, b1) = D::load(b);
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

/// `sum_p x[p] * panel[p, j]` for the `NR` columns of a panel, over two independent
/// accumulators (even and odd steps) so that the additions overlap.
#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
fn panel_dot<D: Difference>(x: &[f32], panel: &[D]) -> [f32; NR] {
    let mut acc = [[0.0f32; NR]; 2];
    for (xs, rows) in x.chunks(2).zip(panel.chunks(2 * NR)) {
        for ((acc, &xp), row) in acc.iter_mut().zip(xs).zip(rows.chunks_exact(NR)) {
            acc.iter_mut().zip(row).for_each(|(s, &v)| *s += xp * v.widen());
        }
    }
    std::array::from_fn(|j| acc[0][j] + acc[1][j])
}

/// `sum_p x[p] * panel[p, j]` for the `NR` columns of a panel: even and odd steps in separate
/// vector accumulators so that the additions overlap.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
fn panel_dot<D: Difference>(x: &[f32], panel: &[D]) -> [f32; NR] {
    use core::arch::wasm32::{f32x4_add, f32x4_mul, f32x4_splat, v128, v128_store};
    let mut acc = [[f32x4_splat(0.0); 2]; 2];
    for (xs, rows) in x.chunks(2).zip(panel.chunks(2 * NR)) {
        for ((acc, &xp), row) in acc.iter_mut().zip(xs).zip(rows.chunks_exact(NR)) {
            let Ok(row) = <&[D; NR]>::try_from(row) else { continue };
            let (b0, b1) = D::load(row);
            let xp = f32x4_splat(xp);
            acc[0] = f32x4_add(acc[0], f32x4_mul(xp, b0));
            acc[1] = f32x4_add(acc[1], f32x4_mul(xp, b1));
        }
    }
    let mut sums = [0.0f32; NR];
    // SAFETY: `sums` holds 8 floats, so both unaligned 16-byte stores are in bounds.
    unsafe {
        v128_store(sums.as_mut_ptr().cast::<v128>(), f32x4_add(acc[0][0], acc[1][0]));
        v128_store(sums.as_mut_ptr().add(4).cast::<v128>(), f32x4_add(acc[0][1], acc[1][1]));
    }
    sums
}

/// WebNN matmul of `a` (`[..., M, K]`) and a rank-2 dequantized B: every row of A against B.
pub fn matmul(a: &[f32], a_shape: &[u32], b: &QuantizedB, out: &mut [f32]) -> Result<()> {
    let Some((&k, leading)) = a_shape.split_last().filter(|(_, leading)| !leading.is_empty()) else {
        return Err(Error::Operation(format!("matmul: a {a_shape:?} must have rank 2 or more")));
    };
    let count = gemm::check_len("matmul a", a_shape, a.len())?;
    let rows = count.checked_div(k as usize).unwrap_or_else(|| leading.iter().map(|&d| d as usize).product());
    product(Matrix::row_major(a, rows, k as usize), b, 1.0, out, false)
}

/// WebNN gemm (2-D) with a dequantized `op(B)`: `out = alpha * op(A) * op(B) + beta * C`.
#[allow(clippy::too_many_arguments)]
pub fn gemm_op(a: &[f32], a_shape: &[u32], b: &QuantizedB, c: Option<(&[f32], &[u32])>, alpha: f32, beta: f32, a_transpose: bool, out: &mut [f32]) -> Result<()> {
    let &[a0, a1] = a_shape else {
        return Err(Error::Operation(format!("gemm: a {a_shape:?} must have rank 2")));
    };
    gemm::check_len("gemm a", a_shape, a.len())?;
    let a = Matrix::row_major(a, a0 as usize, a1 as usize);
    let a = if a_transpose { a.t() } else { a };
    gemm::check_len("gemm output", &[a.rows as u32, b.cols as u32], out.len())?;
    if let Some(c) = c {
        gemm::fill_c(c, beta, a.rows, b.cols, out)?;
    }
    product(a, b, alpha, out, c.is_some())
}
