//! float32 pooling (averagePool2d, l2Pool2d, maxPool2d) and resample2d.
//!
//! Pooling takes its geometry from `crate::ops::pool2d::geometry` (the validated options).
//! Padding is not data: average and l2 use the input elements in the window only (a window
//! without any gives 0), max starts from -infinity. nchw loops over each window; nhwc
//! accumulates whole rows of channels per window position, vectorised across channels. Sums
//! accumulate in f64.
//!
//! resample2d computes the spec's input coordinates in f64 per output row and column once, and
//! interpolates in f64 in the reference's order, so that its results equal the reference's.

use crate::error::{Error, Result};
use crate::operand::{strides, OperandDescriptor};
use crate::ops::conv2d::InputLayout;
use crate::ops::pool2d::{geometry, Pool2dOptions, PoolKind};
use crate::ops::resample2d::{InterpolationMode, Resample2dOptions};

fn bad(what: &str) -> Error {
    Error::Operation(format!("{what}: operand lengths differ from their shapes"))
}

/// The valid window positions `k` (with the input coordinate) along one axis of output position `o`.
fn taps(o: usize, stride: u32, pad: u32, dilation: u32, window: u32, size: u32) -> impl Iterator<Item = usize> {
    let start = o as i64 * stride as i64 - pad as i64;
    (0..window as i64)
        .map(move |k| start + k * dilation as i64)
        .filter(move |&i| i >= 0 && i < size as i64)
        .map(|i| i as usize)
}

pub fn pool2d(
    kind: PoolKind,
    o: &Pool2dOptions,
    x: (&OperandDescriptor, &[f32]),
    out: (&OperandDescriptor, &mut [f32]),
) -> Result<()> {
    let ((d, x), (od, out)) = (x, out);
    let g = geometry(kind, o, d)?;
    let name = kind.name();
    if x.len() as u64 != d.element_count() || out.len() as u64 != od.element_count() || g.output_shape() != od.shape {
        return Err(bad(name));
    }
    let (n_all, c_all) = (g.batches as usize, g.channels as usize);
    let [ih, iw] = g.input_size.map(|v| v as usize);
    let [oh, ow] = g.output_size.map(|v| v as usize);
    let rows: Vec<Vec<usize>> = (0..oh)
        .map(|y| taps(y, g.strides[0], g.padding[0], g.dilations[0], g.window[0], g.input_size[0]).collect())
        .collect();
    let cols: Vec<Vec<usize>> = (0..ow)
        .map(|v| taps(v, g.strides[1], g.padding[2], g.dilations[1], g.window[1], g.input_size[1]).collect())
        .collect();
    match g.layout {
        InputLayout::Nchw => {
            for (plane, oplane) in x.chunks_exact(ih * iw).zip(out.chunks_exact_mut(oh * ow)) {
                for (y, orow) in oplane.chunks_exact_mut(ow).enumerate() {
                    let ry = &rows[y];
                    for (v, o) in orow.iter_mut().enumerate() {
                        let cx = &cols[v];
                        *o = match kind {
                            PoolKind::Max => {
                                let mut m = f32::NEG_INFINITY;
                                for &r in ry {
                                    let line = &plane[r * iw..(r + 1) * iw];
                                    for &c in cx {
                                        m = if line[c] > m { line[c] } else { m };
                                    }
                                }
                                m
                            }
                            PoolKind::Average | PoolKind::L2 => {
                                let mut s = 0.0f64;
                                for &r in ry {
                                    let line = &plane[r * iw..(r + 1) * iw];
                                    for &c in cx {
                                        let t = line[c] as f64;
                                        s += if kind == PoolKind::L2 { t * t } else { t };
                                    }
                                }
                                let count = ry.len() * cx.len();
                                match kind {
                                    PoolKind::L2 => s.sqrt() as f32,
                                    _ if count == 0 => 0.0,
                                    _ => (s / count as f64) as f32,
                                }
                            }
                        };
                    }
                }
            }
        }
        InputLayout::Nhwc => {
            let mut acc = vec![0.0f64; c_all];
            for n in 0..n_all {
                let image = &x[n * ih * iw * c_all..(n + 1) * ih * iw * c_all];
                for (y, ry) in rows.iter().enumerate() {
                    for (v, cx) in cols.iter().enumerate() {
                        let at = ((n * oh + y) * ow + v) * c_all;
                        let o = &mut out[at..at + c_all];
                        if kind == PoolKind::Max {
                            o.fill(f32::NEG_INFINITY);
                            for &r in ry {
                                for &c in cx {
                                    let p = (r * iw + c) * c_all;
                                    for (m, &t) in o.iter_mut().zip(&image[p..p + c_all]) {
                                        *m = if t > *m { t } else { *m };
                                    }
                                }
                            }
                            continue;
                        }
                        acc.fill(0.0);
                        for &r in ry {
                            for &c in cx {
                                let p = (r * iw + c) * c_all;
                                let line = &image[p..p + c_all];
                                if kind == PoolKind::L2 {
                                    for (a, &t) in acc.iter_mut().zip(line) {
                                        *a += t as f64 * t as f64;
                                    }
                                } else {
                                    for (a, &t) in acc.iter_mut().zip(line) {
                                        *a += t as f64;
                                    }
                                }
                            }
                        }
                        let count = (ry.len() * cx.len()) as f64;
                        for (o, &a) in o.iter_mut().zip(&acc) {
                            *o = match kind {
                                PoolKind::L2 => a.sqrt() as f32,
                                _ if count == 0.0 => 0.0,
                                _ => (a / count) as f32,
                            };
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

pub fn resample2d(
    o: &Resample2dOptions,
    x: (&OperandDescriptor, &[f32]),
    out: (&OperandDescriptor, &mut [f32]),
) -> Result<()> {
    let ((d, x), (od, out)) = (x, out);
    if d.rank() != 4 || od.rank() != 4 || x.len() as u64 != d.element_count() || out.len() as u64 != od.element_count()
    {
        return Err(bad("resample2d"));
    }
    let axes = match o.axes.as_deref() {
        Some(&[a, b]) => [a as usize, b as usize],
        _ => [2, 3],
    };
    if axes[0] == axes[1]
        || axes.iter().any(|&a| a >= 4)
        || (0..4).any(|a| !axes.contains(&a) && d.shape[a] != od.shape[a])
    {
        return Err(bad("resample2d"));
    }
    let s = strides(&d.shape);
    // Per axis and output coordinate: the offsets of the lower and upper source positions, and
    // the weight of the upper one.
    let mut lo: Vec<Vec<usize>> = Vec::with_capacity(4);
    let mut hi: Vec<Vec<usize>> = Vec::with_capacity(4);
    let mut weight: Vec<Vec<f64>> = Vec::with_capacity(4);
    for a in 0..4 {
        let (n, m, st) = (d.shape[a], od.shape[a] as usize, s[a] as usize);
        if !axes.contains(&a) {
            lo.push((0..m).map(|c| c * st).collect());
            hi.push(lo[a].clone());
            weight.push(vec![0.0; m]);
            continue;
        }
        let coordinate = |c: usize| ((c as f64 + 0.5) * n as f64 / m as f64 - 0.5).clamp(0.0, n as f64 - 1.0);
        let (mut l, mut h, mut w) = (Vec::with_capacity(m), Vec::with_capacity(m), Vec::with_capacity(m));
        for c in 0..m {
            let p = coordinate(c);
            let (low, high, t) = match o.mode {
                InterpolationMode::NearestNeighbor => {
                    let q = (p - 0.5).ceil();
                    (q, q, 0.0)
                }
                InterpolationMode::Linear => (p.floor(), p.ceil(), p - p.floor()),
            };
            l.push(low as usize * st);
            h.push(high as usize * st);
            w.push(t);
        }
        lo.push(l);
        hi.push(h);
        weight.push(w);
    }
    let [a0, a1] = axes;
    let [d0, d1, d2, d3] = [0, 1, 2, 3].map(|a| od.shape[a] as usize);
    // The offsets along the other two axes; zero along the resampled ones.
    let fixed: Vec<Vec<usize>> =
        (0..4).map(|a| if axes.contains(&a) { vec![0; lo[a].len()] } else { lo[a].clone() }).collect();
    let mut i = 0;
    let mut c = [0usize; 4];
    for c0 in 0..d0 {
        c[0] = c0;
        for c1 in 0..d1 {
            c[1] = c1;
            let b01 = fixed[0][c0] + fixed[1][c1];
            for c2 in 0..d2 {
                c[2] = c2;
                let b012 = b01 + fixed[2][c2];
                for c3 in 0..d3 {
                    c[3] = c3;
                    let base = b012 + fixed[3][c3];
                    let (x0, x1, tx) = (lo[a0][c[a0]], hi[a0][c[a0]], weight[a0][c[a0]]);
                    let (y0, y1, ty) = (lo[a1][c[a1]], hi[a1][c[a1]], weight[a1][c[a1]]);
                    let at = |p: usize| x.get(base + p).copied().map(f64::from).ok_or_else(|| bad("resample2d"));
                    let v = match o.mode {
                        InterpolationMode::NearestNeighbor => at(x0 + y0)?,
                        InterpolationMode::Linear => {
                            let (v00, v10, v01, v11) = (at(x0 + y0)?, at(x1 + y0)?, at(x0 + y1)?, at(x1 + y1)?);
                            let vy0 = v00 * (1.0 - tx) + v10 * tx;
                            let vy1 = v01 * (1.0 - tx) + v11 * tx;
                            vy0 * (1.0 - ty) + vy1 * ty
                        }
                    };
                    if let Some(slot) = out.get_mut(i) {
                        *slot = v as f32;
                    }
                    i += 1;
                }
            }
        }
    }
    Ok(())
}
