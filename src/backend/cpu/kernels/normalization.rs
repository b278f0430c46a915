//! float32 softmax, layerNormalization, batchNormalization and instanceNormalization.
//!
//! Statistics (means, variances) accumulate in f64; softmax sums its exponentials in f32 lanes
//! (positive terms: no cancellation). batchNormalization applies `(x - mean) k + bias` in f64
//! with `k = scale / sqrt(variance + epsilon)`, so that a result near 0 keeps its relative
//! accuracy (an activation after it may amplify its error).

use crate::error::{Error, Result};
use crate::operand::OperandDescriptor;
use crate::ops::batch_normalization::{BatchNormalizationOptions, InstanceNormalizationOptions};
use crate::ops::conv2d::InputLayout;
use crate::ops::normalization::LayerNormalizationOptions;

use super::elementwise::exp_diff;
use super::reduce::{groups, max_row, offsets, outer_length_inner, sum_by};

fn mismatch(what: &str) -> Error {
    Error::Operation(format!("{what}: operand lengths differ from their shapes"))
}

/// `(outer, size, inner)` of `shape` around `axis`.
fn around(shape: &[u32], axis: usize) -> (usize, usize, usize) {
    let p = |s: &[u32]| s.iter().map(|&d| d as usize).product::<usize>();
    (p(&shape[..axis]), shape[axis] as usize, p(&shape[axis + 1..]))
}

/// `exp(x - max) / sum(exp(x - max))` along `axis`.
pub fn softmax(axis: usize, x: (&OperandDescriptor, &[f32]), out: &mut [f32]) -> Result<()> {
    let (d, x) = x;
    if axis >= d.rank() {
        return Err(Error::Operation(format!("softmax: axis {axis} out of range")));
    }
    let (outer, size, inner) = around(&d.shape, axis);
    if x.len() != outer * size * inner || out.len() != x.len() {
        return Err(mismatch("softmax"));
    }
    if inner == 1 {
        for (o, row) in out.chunks_exact_mut(size).zip(x.chunks_exact(size)) {
            let m = max_row(row);
            let mut acc = [0.0f32; 8];
            let mut oc = o.chunks_exact_mut(8);
            let mut xc = row.chunks_exact(8);
            for (oc, xc) in (&mut oc).zip(&mut xc) {
                for k in 0..8 {
                    let e = exp_diff(xc[k], m);
                    oc[k] = e;
                    acc[k] += e;
                }
            }
            let mut s = acc.iter().sum::<f32>();
            for (o, &v) in oc.into_remainder().iter_mut().zip(xc.remainder()) {
                *o = exp_diff(v, m);
                s += *o;
            }
            let r = 1.0 / s;
            for v in o.iter_mut() {
                *v *= r;
            }
        }
        return Ok(());
    }
    // Rows of `inner` elements: the statistics of each inner position, vectorised across them.
    let mut stats = vec![0.0f32; 2 * inner];
    for (o, block) in out.chunks_exact_mut(size * inner).zip(x.chunks_exact(size * inner)) {
        let (m, s) = stats.split_at_mut(inner);
        m.fill(f32::NEG_INFINITY);
        for row in block.chunks_exact(inner) {
            for (m, &v) in m.iter_mut().zip(row) {
                *m = if v > *m { v } else { *m };
            }
        }
        s.fill(0.0);
        for (orow, row) in o.chunks_exact_mut(inner).zip(block.chunks_exact(inner)) {
            for (((o, &v), &m), s) in orow.iter_mut().zip(row).zip(m.iter()).zip(s.iter_mut()) {
                let e = exp_diff(v, m);
                *o = e;
                *s += e;
            }
        }
        for s in s.iter_mut() {
            *s = 1.0 / *s;
        }
        for orow in o.chunks_exact_mut(inner) {
            for (o, &r) in orow.iter_mut().zip(s.iter()) {
                *o *= r;
            }
        }
    }
    Ok(())
}

/// Mean and `1 / sqrt(variance + epsilon)` of a row, two passes in f64.
#[inline(always)]
fn row_stats(row: &[f32], epsilon: f64) -> (f32, f32) {
    let n = row.len() as f64;
    let mean = sum_by(row, |v| v) / n;
    let variance = sum_by(row, |v| (v - mean) * (v - mean)) / n;
    (mean as f32, (1.0 / (variance + epsilon).sqrt()) as f32)
}

pub fn layer_normalization(
    o: &LayerNormalizationOptions,
    inputs: &[(&OperandDescriptor, &[f32])],
    out: &mut [f32],
) -> Result<()> {
    let (d, x) = *inputs.first().ok_or_else(|| mismatch("layerNormalization"))?;
    let rank = d.rank();
    let axes: Vec<usize> = match &o.axes {
        Some(a) => a.iter().map(|&a| a as usize).collect(),
        None => (1..rank.max(1)).collect(),
    };
    if axes.iter().any(|&a| a >= rank) {
        return Err(Error::Operation(format!("layerNormalization: axes {axes:?} out of range")));
    }
    let length: usize = axes.iter().map(|&a| d.shape[a] as usize).product();
    let param = |present: bool, index: usize| -> Result<Option<&[f32]>> {
        if !present {
            return Ok(None);
        }
        match inputs.get(index) {
            Some((_, v)) if v.len() == length => Ok(Some(v)),
            _ => Err(mismatch("layerNormalization")),
        }
    };
    let scale = param(o.has_scale, 1)?;
    let bias = param(o.has_bias, 1 + o.has_scale as usize)?;
    if x.len() as u64 != d.element_count() || out.len() != x.len() {
        return Err(mismatch("layerNormalization"));
    }
    let epsilon = o.epsilon as f32 as f64;
    let apply = |orow: &mut [f32], row: &[f32], mean: f32, inv: f32| match (scale, bias) {
        (Some(s), Some(b)) => {
            for (((o, &v), &s), &b) in orow.iter_mut().zip(row).zip(s).zip(b) {
                *o = (v - mean) * inv * s + b;
            }
        }
        (Some(s), None) => {
            for ((o, &v), &s) in orow.iter_mut().zip(row).zip(s) {
                *o = (v - mean) * inv * s;
            }
        }
        (None, Some(b)) => {
            for ((o, &v), &b) in orow.iter_mut().zip(row).zip(b) {
                *o = (v - mean) * inv + b;
            }
        }
        (None, None) => {
            for (o, &v) in orow.iter_mut().zip(row) {
                *o = (v - mean) * inv;
            }
        }
    };
    // The axes, in increasing order, are the last of the non-trivial ones: contiguous rows.
    let reduced: Vec<bool> = (0..rank).map(|a| axes.contains(&a)).collect();
    let g = groups(&d.shape, &reduced);
    let sorted = axes.windows(2).all(|w| w[0] < w[1]);
    if let (true, Some((_, len, 1))) = (sorted, outer_length_inner(&g)) {
        if len == length && length > 0 {
            for (orow, row) in out.chunks_exact_mut(length).zip(x.chunks_exact(length)) {
                let (mean, inv) = row_stats(row, epsilon);
                apply(orow, row, mean, inv);
            }
            return Ok(());
        }
    }
    // Otherwise gather each row in the order of `axes` (that of scale and bias), and scatter it.
    let kept: Vec<usize> = (0..rank).filter(|a| !reduced[*a]).collect();
    let (within, bases) = (offsets(&d.shape, &axes), offsets(&d.shape, &kept));
    if within.len() * bases.len() != x.len() {
        return Err(mismatch("layerNormalization"));
    }
    let mut row = vec![0.0f32; within.len()];
    let mut result = vec![0.0f32; within.len()];
    let bad = || Error::Operation("layerNormalization: index out of range".into());
    for &base in &bases {
        for (r, &w) in row.iter_mut().zip(&within) {
            *r = *x.get(base + w).ok_or_else(bad)?;
        }
        let (mean, inv) = row_stats(&row, epsilon);
        apply(&mut result, &row, mean, inv);
        for (&r, &w) in result.iter().zip(&within) {
            *out.get_mut(base + w).ok_or_else(bad)? = r;
        }
    }
    Ok(())
}

/// `(x - mean) / sqrt(variance + epsilon) * scale + bias` with per-channel operands along `axis`.
pub fn batch_normalization(
    o: &BatchNormalizationOptions,
    inputs: &[(&OperandDescriptor, &[f32])],
    out: &mut [f32],
) -> Result<()> {
    let (d, x) = *inputs.first().ok_or_else(|| mismatch("batchNormalization"))?;
    let axis = o.axis as usize;
    if axis >= d.rank() {
        return Err(Error::Operation(format!("batchNormalization: axis {axis} out of range")));
    }
    let (outer, channels, inner) = around(&d.shape, axis);
    let channel = |index: usize| -> Result<&[f32]> {
        match inputs.get(index) {
            Some((_, v)) if v.len() == channels => Ok(v),
            _ => Err(mismatch("batchNormalization")),
        }
    };
    let (mean, variance) = (channel(1)?, channel(2)?);
    let scale = if o.has_scale { Some(channel(3)?) } else { None };
    let bias = if o.has_bias { Some(channel(3 + o.has_scale as usize)?) } else { None };
    if x.len() != outer * channels * inner || out.len() != x.len() {
        return Err(mismatch("batchNormalization"));
    }
    let epsilon = o.epsilon as f32 as f64;
    // Per channel: mean, k, bias.
    let params: Vec<(f64, f64, f64)> = (0..channels)
        .map(|c| {
            let k = scale.map_or(1.0, |s| s[c] as f64) / (variance[c] as f64 + epsilon).sqrt();
            (mean[c] as f64, k, bias.map_or(0.0, |b| b[c] as f64))
        })
        .collect();
    if inner == 1 {
        for (orow, row) in out.chunks_exact_mut(channels).zip(x.chunks_exact(channels)) {
            for ((o, &v), &(m, k, b)) in orow.iter_mut().zip(row).zip(&params) {
                *o = ((v as f64 - m) * k + b) as f32;
            }
        }
        return Ok(());
    }
    for (i, (orow, row)) in out.chunks_exact_mut(inner).zip(x.chunks_exact(inner)).enumerate() {
        let (m, k, b) = params[i % channels];
        for (o, &v) in orow.iter_mut().zip(row) {
            *o = ((v as f64 - m) * k + b) as f32;
        }
    }
    Ok(())
}

/// Mean and variance over the spatial positions of each sample and channel.
pub fn instance_normalization(
    o: &InstanceNormalizationOptions,
    inputs: &[(&OperandDescriptor, &[f32])],
    out: &mut [f32],
) -> Result<()> {
    let (d, x) = *inputs.first().ok_or_else(|| mismatch("instanceNormalization"))?;
    if d.rank() != 4 {
        return Err(Error::Operation("instanceNormalization: the input must be 4-D".into()));
    }
    let batches = d.shape[0] as usize;
    let channels = d.shape[o.layout.channel_axis()] as usize;
    let spatial = d.element_count() as usize / (batches * channels).max(1);
    let channel = |index: usize| -> Result<&[f32]> {
        match inputs.get(index) {
            Some((_, v)) if v.len() == channels => Ok(v),
            _ => Err(mismatch("instanceNormalization")),
        }
    };
    let scale = if o.has_scale { Some(channel(1)?) } else { None };
    let bias = if o.has_bias { Some(channel(1 + o.has_scale as usize)?) } else { None };
    if x.len() != batches * channels * spatial || out.len() != x.len() {
        return Err(mismatch("instanceNormalization"));
    }
    let epsilon = o.epsilon as f32 as f64;
    let factor = |c: usize, inv: f32| (scale.map_or(inv, |s| s[c] * inv), bias.map_or(0.0, |b| b[c]));
    match o.layout {
        InputLayout::Nchw => {
            for (i, (orow, row)) in out.chunks_exact_mut(spatial).zip(x.chunks_exact(spatial)).enumerate() {
                let (mean, inv) = row_stats(row, epsilon);
                let (k, b) = factor(i % channels, inv);
                for (o, &v) in orow.iter_mut().zip(row) {
                    *o = (v - mean) * k + b;
                }
            }
        }
        InputLayout::Nhwc => {
            // Channels are contiguous: accumulate whole rows of channels, in f64.
            let mut sum = vec![0.0f64; channels];
            let mut squares = vec![0.0f64; channels];
            let mut k = vec![0.0f32; channels];
            let mut b = vec![0.0f32; channels];
            let mut means = vec![0.0f32; channels];
            for (oblock, block) in out.chunks_exact_mut(spatial * channels).zip(x.chunks_exact(spatial * channels)) {
                sum.fill(0.0);
                for row in block.chunks_exact(channels) {
                    for (s, &v) in sum.iter_mut().zip(row) {
                        *s += v as f64;
                    }
                }
                for s in sum.iter_mut() {
                    *s /= spatial as f64;
                }
                squares.fill(0.0);
                for row in block.chunks_exact(channels) {
                    for ((q, &v), &m) in squares.iter_mut().zip(row).zip(&sum) {
                        let t = v as f64 - m;
                        *q += t * t;
                    }
                }
                for c in 0..channels {
                    let inv = (1.0 / (squares[c] / spatial as f64 + epsilon).sqrt()) as f32;
                    (k[c], b[c]) = factor(c, inv);
                    means[c] = sum[c] as f32;
                }
                for (orow, row) in oblock.chunks_exact_mut(channels).zip(block.chunks_exact(channels)) {
                    for ((((o, &v), &m), &k), &b) in orow.iter_mut().zip(row).zip(&means).zip(&k).zip(&b) {
                        *o = (v - m) * k + b;
                    }
                }
            }
        }
    }
    Ok(())
}
