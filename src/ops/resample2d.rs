//! resample2d: nearest-neighbor or bilinear resampling of two axes of a 4-D tensor.
//!
//! The coordinate transformation is the spec's: `scale = outputSize / inputSize` (the sizes
//! after the output shape is computed, so given `scales` only determine the output size),
//! `inputCoordinate = clamp((outputCoordinate + 0.5) / scale - 0.5, 0, inputSize - 1)`;
//! nearest-neighbor takes `ceil(inputCoordinate - 0.5)` (ties round down), linear interpolates
//! between `floor` and `ceil` of the coordinate.

use crate::error::{Error, Result};
use crate::operand::strides;
use crate::operand::OperandDescriptor;
use crate::ops::conv2d::valid_dimension;
use crate::ops::limits::{self, OpLimits, FLOATS};
use crate::ops::reference::{coords, round_to, HostTensor};
use crate::ops::wgsl::{coords_fn, ElementwiseKernel, LowerRequest, Lowering};
use crate::ops::{not_this_family, MethodOptions, Op, OpFamily};

/// `MLInterpolationMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum InterpolationMode {
    #[default]
    NearestNeighbor,
    Linear,
}

impl InterpolationMode {
    pub fn from_name(name: &str) -> Result<InterpolationMode> {
        match name {
            "nearest-neighbor" => Ok(InterpolationMode::NearestNeighbor),
            "linear" => Ok(InterpolationMode::Linear),
            _ => Err(Error::Type(format!("'{name}' is not a valid MLInterpolationMode"))),
        }
    }
}

/// `MLResample2dOptions`; absent lists are `None`.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct Resample2dOptions {
    pub mode: InterpolationMode,
    pub scales: Option<Vec<f64>>,
    pub sizes: Option<Vec<u32>>,
    pub axes: Option<Vec<u32>>,
}

impl Resample2dOptions {
    fn axes(&self) -> [usize; 2] {
        match self.axes.as_deref() {
            Some([a, b]) => [*a as usize, *b as usize],
            _ => [2, 3],
        }
    }
}

pub fn limits() -> Vec<OpLimits> {
    vec![OpLimits {
        name: "resample2d",
        operands: vec![limits::tensor("input", FLOATS, 4, 4), limits::tensor("output", FLOATS, 4, 4)],
    }]
}

pub fn validate(o: &Resample2dOptions, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
    let input = inputs[0];
    limits::check(&limits::of("resample2d")?.operands[0], input)?;
    let scales = o.scales.clone().unwrap_or_else(|| vec![1.0, 1.0]);
    // NaN scales are rejected with the non-positive ones.
    if scales.len() != 2 || scales.iter().any(|&s| s.is_nan() || s <= 0.0) {
        return Err(Error::Type(format!("resample2d: scales {scales:?} must be 2 positive values")));
    }
    if let Some(sizes) = &o.sizes {
        if sizes.len() != 2 || sizes.contains(&0) {
            return Err(Error::Type(format!("resample2d: sizes {sizes:?} must be 2 positive values")));
        }
    }
    if let Some(axes) = &o.axes {
        // The options say "a list of length 2"; every later step indexes two axes.
        if axes.len() != 2 {
            return Err(Error::Type(format!("resample2d: axes {axes:?} must have 2 values")));
        }
        if axes[0] == axes[1] {
            return Err(Error::Type(format!("resample2d: axes {axes:?} has duplicate values")));
        }
        if let Some(a) = axes.iter().find(|&&a| a as usize >= input.rank()) {
            return Err(Error::Type(format!("resample2d: axis {a} is out of the range 0 to {}", input.rank())));
        }
    }
    let mut shape = input.shape.clone();
    for (index, axis) in o.axes().into_iter().enumerate() {
        let size = match &o.sizes {
            Some(sizes) => sizes[index] as i128,
            None => {
                let s = (input.shape[axis] as f64 * scales[index] as f32 as f64).floor();
                if s.is_finite() { s.min(i64::MAX as f64) as i128 } else { i128::MAX }
            }
        };
        shape[axis] = valid_dimension("resample2d output size", size)?;
    }
    Ok(vec![OperandDescriptor::new(input.data_type, shape)])
}

pub fn lower(o: &Resample2dOptions, request: &LowerRequest) -> Result<Lowering> {
    let (input, out) = (request.inputs[0], request.outputs[0]);
    let in_strides = strides(&input.shape);
    let mut helpers = coords_fn("out", &out.shape);
    let offset: Vec<String> = (0..4).map(|a| format!("d[{a}] * {}u", in_strides[a])).collect();
    helpers += &format!("fn offset_in(d: array<u32, 4>) -> u32 {{ return {}; }}\n", offset.join(" + "));
    // Source coordinate along one axis: `inputCoordinate + 0.5 = (2o + 1) * in / (2 out)`,
    // divided exactly in 64 bits (the product passes 2^32 for long axes): nearest-neighbor's
    // `ceil(inputCoordinate - 0.5)` is the quotient rounded up, less 1; linear's coordinate is
    // quotient and remainder as f32.
    helpers += "// (q, r) with (2o + 1) * inp = q * 2 outp + r.
fn scaled(o: u32, inp: u32, outp: u32) -> vec2<u32> {
    let a = 2u * o + 1u;
    let d = 2u * outp;
    let al = a & 0xffffu; let ah = a >> 16u;
    let bl = inp & 0xffffu; let bh = inp >> 16u;
    let ll = al * bl; let lh = al * bh; let hl = ah * bl;
    let mid = (ll >> 16u) + (lh & 0xffffu) + (hl & 0xffffu);
    var lo = (ll & 0xffffu) | (mid << 16u);
    var r = ah * bh + (lh >> 16u) + (hl >> 16u) + (mid >> 16u);
    if (r == 0u) {
        return vec2<u32>(lo / d, lo % d);
    }
    // Long division of r:lo by d; r < d throughout, as a < d makes the quotient below inp.
    var q = 0u;
    for (var i = 0u; i < 32u; i++) {
        let carry = r >> 31u;
        r = (r << 1u) | (lo >> 31u);
        lo = lo << 1u;
        q = q << 1u;
        if (carry == 1u || r >= d) {
            r = r - d;
            q = q | 1u;
        }
    }
    return vec2<u32>(q, r);
}
fn nearest(o: u32, inp: u32, outp: u32) -> u32 {
    let s = scaled(o, inp, outp);
    // The product is at least 1, so the rounded-up quotient is too.
    return min(s.x + select(0u, 1u, s.y != 0u) - 1u, inp - 1u);
}
fn source(o: u32, inp: u32, outp: u32) -> f32 {
    let s = scaled(o, inp, outp);
    return clamp(f32(s.x) + f32(s.y) / f32(2u * outp) - 0.5, 0.0, f32(inp - 1u));
}
";
    let [a0, a1] = o.axes();
    let (i0, i1, o0, o1) = (input.shape[a0], input.shape[a1], out.shape[a0], out.shape[a1]);
    let body = match o.mode {
        InterpolationMode::NearestNeighbor => format!(
            "    var d = coords_out(i);
    d[{a0}] = nearest(d[{a0}], {i0}u, {o0}u);
    d[{a1}] = nearest(d[{a1}], {i1}u, {o1}u);
    return load_input(offset_in(d));"
        ),
        InterpolationMode::Linear => format!(
            "    let c = coords_out(i);
    let x = source(c[{a0}], {i0}u, {o0}u);
    let y = source(c[{a1}], {i1}u, {o1}u);
    let x0 = u32(floor(x)); let x1 = u32(ceil(x));
    let y0 = u32(floor(y)); let y1 = u32(ceil(y));
    let tx = x - floor(x); let ty = y - floor(y);
    var d = c;
    d[{a0}] = x0; d[{a1}] = y0; let v00 = load_input(offset_in(d));
    d[{a0}] = x1; let v10 = load_input(offset_in(d));
    d[{a1}] = y1; let v11 = load_input(offset_in(d));
    d[{a0}] = x0; let v01 = load_input(offset_in(d));
    let vy0 = v00 * (1.0 - tx) + v10 * tx;
    let vy1 = v01 * (1.0 - tx) + v11 * tx;
    return vy0 * (1.0 - ty) + vy1 * ty;"
        ),
    };
    let launch = ElementwiseKernel { inputs: vec![("input", input)], output: out, helpers, body }.build()?;
    Ok(Lowering::single(launch))
}

/// `inputCoordinate` of the spec. `(o + 0.5) * in` is exact, so a coordinate that is a whole
/// number plus one half comes out exact and nearest-neighbor's ties are decided exactly.
fn input_coordinate(o: usize, input_size: u32, output_size: u32) -> f64 {
    let unclamped = (o as f64 + 0.5) * input_size as f64 / output_size as f64 - 0.5;
    unclamped.clamp(0.0, input_size as f64 - 1.0)
}

pub fn reference(o: &Resample2dOptions, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
    let input = &inputs[0];
    let out = &outputs[0];
    let [a0, a1] = o.axes();
    let in_shape = input.shape();
    let in_strides = strides(in_shape);
    let at = |d: &[usize]| -> f64 {
        let index: u64 = d.iter().zip(&in_strides).map(|(&c, &s)| c as u64 * s).sum();
        input.data[index as usize]
    };
    let data = (0..out.element_count() as usize)
        .map(|i| {
            let c = coords(i, &out.shape);
            let x = input_coordinate(c[a0], in_shape[a0], out.shape[a0]);
            let y = input_coordinate(c[a1], in_shape[a1], out.shape[a1]);
            let mut d = c.clone();
            let v = match o.mode {
                InterpolationMode::NearestNeighbor => {
                    d[a0] = (x - 0.5).ceil() as usize;
                    d[a1] = (y - 0.5).ceil() as usize;
                    at(&d)
                }
                InterpolationMode::Linear => {
                    let (x0, x1, y0, y1) = (x.floor(), x.ceil(), y.floor(), y.ceil());
                    let (tx, ty) = (x - x0, y - y0);
                    let mut value = |xi: f64, yi: f64| {
                        d[a0] = xi as usize;
                        d[a1] = yi as usize;
                        at(&d)
                    };
                    let (v00, v10, v01, v11) = (value(x0, y0), value(x1, y0), value(x0, y1), value(x1, y1));
                    let vy0 = v00 * (1.0 - tx) + v10 * tx;
                    let vy1 = v01 * (1.0 - tx) + v11 * tx;
                    vy0 * (1.0 - ty) + vy1 * ty
                }
            };
            round_to(v, out.data_type)
        })
        .collect();
    Ok(vec![HostTensor::new(out.clone(), data)?])
}

/// The registry's entry for this file's operators (see [`OpFamily`]).
pub struct Family;

impl OpFamily for Family {
    fn limits(&self) -> Vec<OpLimits> {
        limits()
    }

    fn from_options(&self, name: &str, p: &dyn MethodOptions) -> Result<Op> {
        Ok(match name {
            "resample2d" => Op::Resample2d(Resample2dOptions {
                mode: InterpolationMode::from_name(&p.string("mode")?)?,
                scales: p.opt_f64s("scales")?,
                sizes: p.opt_u32s("sizes")?,
                axes: p.opt_u32s("axes")?,
            }),
            other => return Err(crate::ops::unknown_method(other)),
        })
    }

    fn name(&self, op: &Op) -> &'static str {
        match op {
            Op::Resample2d(_) => "resample2d",
            _ => "",
        }
    }

    fn validate(&self, op: &Op, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
        match op {
            Op::Resample2d(o) => validate(o, inputs),
            _ => Err(not_this_family(op)),
        }
    }

    fn lower(&self, op: &Op, request: &LowerRequest) -> Result<Lowering> {
        match op {
            Op::Resample2d(o) => lower(o, request),
            _ => Err(not_this_family(op)),
        }
    }

    fn reference(&self, op: &Op, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
        match op {
            Op::Resample2d(o) => reference(o, inputs, outputs),
            _ => Err(not_this_family(op)),
        }
    }
}
