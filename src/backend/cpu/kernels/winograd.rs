//! conv2d by Winograd's F(2x2, 3x3) (Lavin and Gray, "Fast Algorithms for Convolutional Neural
//! Networks", 2015): each 2x2 block of output pixels of a 3x3, stride-1 convolution is
//! `A^T [ sum_ic (G g G^T) .* (B^T d B) ] A` over the 4x4 input tile `d` under it, so the
//! multiply-adds become 16 GEMMs `U[xi] [Cout x Cin] * V[xi] [Cin x tiles]`, 2.25x fewer than
//! im2col's `[Cout x 9 Cin] * [9 Cin x pixels]`, plus transforms linear in the input and output.
//! The transforms run along rows of tiles on contiguous arrays (the input's even and odd columns
//! apart), which the compiler vectorises.

use crate::error::{Error, Result};

use super::gemm::{gemm_prepacked, Matrix, Packed};
use super::scratch::{self, Slot};

/// The transformed tile's 16 positions.
pub(super) const POSITIONS: usize = 16;

/// Floats of transformed input (or product) per chunk of tile rows, 4 MiB.
const CHUNK_FLOATS: usize = 1 << 20;

/// `U[xi][oc][ic] = (G g G^T)[xi]` for the 3x3 filter `g` of `(oc, ic)` read through `filter`
/// with element strides `[oc, ic, kh, kw]`; `weights` holds `16 * out_c * in_c` floats.
pub(super) fn transform_filter(filter: &[f32], strides: [usize; 4], out_c: usize, in_c: usize, weights: &mut [f32]) {
    let [s_o, s_i, s_h, s_w] = strides;
    for oc in 0..out_c {
        for ic in 0..in_c {
            let g = |h: usize, w: usize| filter[oc * s_o + ic * s_i + h * s_h + w * s_w];
            // G g: rows g0, (g0 + g1 + g2) / 2, (g0 - g1 + g2) / 2, g2.
            let mut gg = [[0.0f32; 3]; 4];
            for w in 0..3 {
                let (a, b, c) = (g(0, w), g(1, w), g(2, w));
                gg[0][w] = a;
                gg[1][w] = 0.5 * (a + b + c);
                gg[2][w] = 0.5 * (a - b + c);
                gg[3][w] = c;
            }
            // (G g) G^T, row by row.
            for (k, [a, b, c]) in gg.into_iter().enumerate() {
                let row = [a, 0.5 * (a + b + c), 0.5 * (a - b + c), c];
                for (l, v) in row.into_iter().enumerate() {
                    weights[((k * 4 + l) * out_c + oc) * in_c + ic] = v;
                }
            }
        }
    }
}

/// The filter's 16 transformed matrices, each packed as a GEMM's left operand.
pub(super) fn pack_transformed(weights: &[f32], out_c: usize, in_c: usize) -> Result<Vec<Packed>> {
    (0..POSITIONS).map(|xi| Packed::left(Matrix::row_major(&weights[xi * out_c * in_c..][..out_c * in_c], out_c, in_c))).collect()
}

/// What [`conv2d`] needs of the geometry: nchw, one group, a 3x3 filter at stride 1 and
/// dilation 1. Strides are elements of `[n, c, h, w]`; `padding` is the top and left padding.
pub(super) struct Shape {
    pub batches: usize,
    pub in_c: usize,
    pub out_c: usize,
    pub input_size: [usize; 2],
    pub output_size: [usize; 2],
    pub padding: [i64; 2],
    pub input_strides: [usize; 4],
    pub output_strides: [usize; 4],
}

/// conv2d of `input` by the transformed filter `weights` (and its packed copies, when given)
/// plus `bias` into `out`.
pub(super) fn conv2d(s: &Shape, input: &[f32], weights: &[f32], packed: Option<&[Packed]>, bias: Option<&[f32]>, out: &mut [f32]) -> Result<()> {
    let [out_h, out_w] = s.output_size;
    let (tiles_h, tiles_w) = (out_h.div_ceil(2), out_w.div_ceil(2));
    let too_large = || Error::NotSupported("conv2d: the Winograd tiles exceed this platform's memory".into());
    let per_row = POSITIONS.checked_mul(s.in_c.max(s.out_c)).and_then(|x| x.checked_mul(tiles_w)).ok_or_else(too_large)?;
    let rows_per_chunk = (CHUNK_FLOATS / per_row.max(1)).clamp(1, tiles_h);
    // Per row of tiles: the input's 4 rows, even and odd columns (each tiles_w + 1 long), the
    // row transform's 4 rows of each, one padded input row; or the output transform's sums and
    // one output row.
    let mut rows = Vec::new();
    let row_floats = 18 * (tiles_w + 1);
    rows.try_reserve_exact(row_floats).map_err(|_| too_large())?;
    rows.resize(row_floats, 0.0);
    for n in 0..s.batches {
        for ty0 in (0..tiles_h).step_by(rows_per_chunk) {
            let chunk_rows = rows_per_chunk.min(tiles_h - ty0);
            let tiles = chunk_rows * tiles_w;
            scratch::with(Slot::Columns, POSITIONS * s.in_c * tiles, |v| {
                for ic in 0..s.in_c {
                    for r in 0..chunk_rows {
                        transform_input_row(s, input, n, ic, ty0 + r, tiles_w, &mut rows, v, ic * tiles + r * tiles_w, s.in_c * tiles);
                    }
                }
                scratch::with(Slot::Product, POSITIONS * s.out_c * tiles, |m| {
                    for xi in 0..POSITIONS {
                        let u = Matrix::row_major(&weights[xi * s.out_c * s.in_c..][..s.out_c * s.in_c], s.out_c, s.in_c);
                        let vx = Matrix::row_major(&v[xi * s.in_c * tiles..][..s.in_c * tiles], s.in_c, tiles);
                        let mx = &mut m[xi * s.out_c * tiles..][..s.out_c * tiles];
                        gemm_prepacked(u, packed.map(|p| &p[xi]), vx, None, 1.0, mx, tiles, false)?;
                    }
                    for oc in 0..s.out_c {
                        let b = bias.map_or(0.0, |b| b[oc]);
                        for r in 0..chunk_rows {
                            transform_output_row(s, m, n, oc, ty0 + r, tiles_w, oc * tiles + r * tiles_w, s.out_c * tiles, b, &mut rows, out);
                        }
                    }
                    Ok(())
                })
            })?;
        }
    }
    Ok(())
}

/// `V = B^T d B` for the tiles of row `ty` of channel `ic`: `v[xi * position_stride + at + tx]`.
/// B^T = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]].
#[allow(clippy::too_many_arguments)]
fn transform_input_row(s: &Shape, input: &[f32], n: usize, ic: usize, ty: usize, tiles_w: usize, rows: &mut [f32], v: &mut [f32], at: usize, position_stride: usize) {
    let [is_n, is_c, is_h, is_w] = s.input_strides;
    let [in_h, in_w] = s.input_size;
    let len = tiles_w + 1;
    let (d, rest) = rows.split_at_mut(8 * len);
    let (t, padded) = rest.split_at_mut(8 * len);
    let padded = &mut padded[..2 * len];
    // The tile grid's columns q = x + left that hold input: the rest is padding.
    let left = s.padding[1];
    let first = left.clamp(0, 2 * len as i64) as usize;
    let end = (left + in_w as i64).clamp(first as i64, 2 * len as i64) as usize;
    // d[2r] and d[2r + 1]: input row 2 ty - top + r at the even and the odd columns of the tile
    // grid, zero in the padding.
    for r in 0..4 {
        let y = (2 * ty + r) as i64 - s.padding[0];
        let (even, odd) = d[2 * r * len..(2 * r + 2) * len].split_at_mut(len);
        if y < 0 || y >= in_h as i64 {
            even.fill(0.0);
            odd.fill(0.0);
            continue;
        }
        let base = n * is_n + ic * is_c + y as usize * is_h;
        padded[..first].fill(0.0);
        padded[end..].fill(0.0);
        // A row wholly in the padding (left >= the grid's width) copies nothing.
        let x0 = (first as i64 - left).max(0) as usize;
        if end > first && is_w == 1 {
            padded[first..end].copy_from_slice(&input[base + x0..][..end - first]);
        } else {
            padded[first..end].iter_mut().enumerate().for_each(|(i, p)| *p = input[base + (x0 + i) * is_w]);
        }
        for ((pair, e), o) in padded.chunks_exact(2).zip(even.iter_mut()).zip(odd.iter_mut()) {
            *e = pair[0];
            *o = pair[1];
        }
    }
    // B^T d, on the even and the odd columns alike: rows d0 - d2, d1 + d2, d2 - d1, d1 - d3.
    for phase in 0..2 {
        let row = |r: usize| &d[(2 * r + phase) * len..][..len];
        let (d0, d1, d2, d3) = (row(0), row(1), row(2), row(3));
        let (t0, rest) = t[phase * 4 * len..(phase + 1) * 4 * len].split_at_mut(len);
        let (t1, rest) = rest.split_at_mut(len);
        let (t2, t3) = rest.split_at_mut(len);
        for (j, (((t0, t1), t2), t3)) in t0.iter_mut().zip(t1.iter_mut()).zip(t2.iter_mut()).zip(t3.iter_mut()).enumerate() {
            (*t0, *t1, *t2, *t3) = (d0[j] - d2[j], d1[j] + d2[j], d2[j] - d1[j], d1[j] - d3[j]);
        }
    }
    // (B^T d) B along each row: tile tx reads columns 2tx..2tx+4, that is even[tx], odd[tx],
    // even[tx + 1], odd[tx + 1]; its four values are a - c, b + c, c - b, b - e.
    for k in 0..4 {
        let (a, b) = (&t[k * len..][..tiles_w], &t[(4 + k) * len..][..tiles_w]);
        let (c, e) = (&t[k * len + 1..][..tiles_w], &t[(4 + k) * len + 1..][..tiles_w]);
        let start = |l: usize| (k * 4 + l) * position_stride + at;
        let target = |v: &mut [f32], l: usize, x: &[f32], y: &[f32], f: fn(f32, f32) -> f32| {
            v[start(l)..][..tiles_w].iter_mut().zip(x.iter().zip(y)).for_each(|(o, (&x, &y))| *o = f(x, y));
        };
        target(v, 0, a, c, |a, c| a - c);
        target(v, 1, b, c, |b, c| b + c);
        target(v, 2, c, b, |c, b| c - b);
        target(v, 3, b, e, |b, e| b - e);
    }
}

/// `Y = A^T M A` (plus `bias`) for the tiles of row `ty` of output channel `oc`, written to the
/// output pixels that exist. A^T = [[1, 1, 1, 0], [0, 1, -1, -1]].
#[allow(clippy::too_many_arguments)]
fn transform_output_row(s: &Shape, m: &[f32], n: usize, oc: usize, ty: usize, tiles_w: usize, at: usize, position_stride: usize, bias: f32, rows: &mut [f32], out: &mut [f32]) {
    let [os_n, os_c, os_h, os_w] = s.output_strides;
    let [out_h, out_w] = s.output_size;
    let len = tiles_w + 1;
    let position = |k: usize, l: usize| &m[(k * 4 + l) * position_stride + at..][..tiles_w];
    // A^T M: row 0 = m0 + m1 + m2, row 1 = m1 - m2 - m3, per column l.
    let (sums, y) = rows.split_at_mut(8 * len);
    for l in 0..4 {
        let (m0, m1, m2, m3) = (position(0, l), position(1, l), position(2, l), position(3, l));
        let (s0, s1) = sums[2 * l * len..(2 * l + 2) * len].split_at_mut(len);
        for (tx, (s0, s1)) in s0[..tiles_w].iter_mut().zip(s1[..tiles_w].iter_mut()).enumerate() {
            *s0 = m0[tx] + m1[tx] + m2[tx];
            *s1 = m1[tx] - m2[tx] - m3[tx];
        }
    }
    // (A^T M) A per output row i: column 0 = s0 + s1 + s2, column 1 = s1 - s2 - s3.
    for i in 0..2 {
        let oy = 2 * ty + i;
        if oy >= out_h {
            break;
        }
        let col = |l: usize| &sums[(2 * l + i) * len..][..tiles_w];
        let (c0, c1, c2, c3) = (col(0), col(1), col(2), col(3));
        // The row's pixels in order: the tiles' left and right columns interleaved.
        let pixels = &mut y[..2 * tiles_w];
        for (tx, pair) in pixels.chunks_exact_mut(2).enumerate() {
            pair[0] = c0[tx] + c1[tx] + c2[tx] + bias;
            pair[1] = c1[tx] - c2[tx] - c3[tx] + bias;
        }
        let row = n * os_n + oc * os_c + oy * os_h;
        if os_w == 1 {
            out[row..][..out_w].copy_from_slice(&pixels[..out_w]);
        } else {
            pixels[..out_w].iter().enumerate().for_each(|(x, &p)| out[row + x * os_w] = p);
        }
    }
}
