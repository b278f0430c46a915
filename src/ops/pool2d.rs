//! The pooling operations averagePool2d, l2Pool2d and maxPool2d over 4-D tensors.
//!
//! Padding is not data: averagePool2d divides by the number of input elements in the window
//! (as WPT expects), l2Pool2d sums the squares of those elements, and maxPool2d takes their
//! maximum. A window holding no input element (possible with large padding or `"ceil"`
//! rounding) gives 0 for averagePool2d and l2Pool2d and the lowest value of the data type for
//! maxPool2d.

use crate::error::{Error, Result};
use crate::operand::{DataType, OperandDescriptor};
use crate::ops::conv2d::{conv_output_size, list_or, positive_pair, valid_dimension, InputLayout};
use crate::ops::limits::{self, OpLimits, FLOATS, SUPPORTED};
use crate::ops::reference::{round_to, HostTensor};
use crate::ops::wgsl::{literal, value_type, ElementwiseKernel, LowerRequest, Lowering};
use crate::ops::{not_this_family, MethodOptions, Op, OpFamily};

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum PoolKind {
    Average,
    L2,
    Max,
}

impl PoolKind {
    pub const ALL: [PoolKind; 3] = [PoolKind::Average, PoolKind::L2, PoolKind::Max];

    pub fn name(self) -> &'static str {
        match self {
            PoolKind::Average => "averagePool2d",
            PoolKind::L2 => "l2Pool2d",
            PoolKind::Max => "maxPool2d",
        }
    }
}

/// `MLRoundingType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum RoundingType {
    #[default]
    Floor,
    Ceil,
}

impl RoundingType {
    pub fn from_name(name: &str) -> Result<RoundingType> {
        match name {
            "floor" => Ok(RoundingType::Floor),
            "ceil" => Ok(RoundingType::Ceil),
            _ => Err(Error::Type(format!("'{name}' is not a valid MLRoundingType"))),
        }
    }
}

/// `MLPool2dOptions`; absent lists are `None` (the spec's "does not exist").
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct Pool2dOptions {
    pub window_dimensions: Option<Vec<u32>>,
    pub padding: Option<Vec<u32>>,
    pub strides: Option<Vec<u32>>,
    pub dilations: Option<Vec<u32>>,
    pub layout: InputLayout,
    pub output_shape_rounding: RoundingType,
    pub output_sizes: Option<Vec<u32>>,
}

pub fn limits() -> Vec<OpLimits> {
    PoolKind::ALL
        .iter()
        .map(|kind| {
            // maxPool2d only compares, so it takes any type the kernels store.
            let types = if *kind == PoolKind::Max { SUPPORTED } else { FLOATS };
            OpLimits {
                name: kind.name(),
                operands: vec![limits::tensor("input", types, 4, 4), limits::tensor("output", types, 4, 4)],
            }
        })
        .collect()
}

/// A pooling operation with its options resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolGeometry {
    pub batches: u32,
    pub channels: u32,
    pub input_size: [u32; 2],
    pub output_size: [u32; 2],
    pub window: [u32; 2],
    /// `[beginningHeight, endingHeight, beginningWidth, endingWidth]`.
    pub padding: [u32; 4],
    pub strides: [u32; 2],
    pub dilations: [u32; 2],
    pub layout: InputLayout,
}

impl PoolGeometry {
    pub fn output_shape(&self) -> Vec<u32> {
        let [h, w] = self.output_size;
        match self.layout {
            InputLayout::Nchw => vec![self.batches, self.channels, h, w],
            InputLayout::Nhwc => vec![self.batches, h, w, self.channels],
        }
    }

    /// Element strides of the `n, c, h, w` axes of a tensor of spatial size `[h, w]`.
    fn strides(&self, [h, w]: [u32; 2]) -> [u64; 4] {
        let (c, h, w) = (self.channels as u64, h as u64, w as u64);
        match self.layout {
            InputLayout::Nchw => [c * h * w, h * w, w, 1],
            InputLayout::Nhwc => [h * w * c, 1, w * c, c],
        }
    }
}

/// The spec's "create a pooling operation" steps, up to the output shape.
///
/// Two steps of the spec are not followed, as they contradict its own output-size check and
/// WPT: padding is kept (not reset to zeros) when `outputSizes` is given, and `outputSizes` is
/// not required to be smaller than `strides`.
pub fn geometry(kind: PoolKind, o: &Pool2dOptions, input: &OperandDescriptor) -> Result<PoolGeometry> {
    limits::check(&limits::of(kind.name())?.operands[0], input)?;
    let (batches, channels, input_height, input_width) = match o.layout {
        InputLayout::Nchw => (input.shape[0], input.shape[1], input.shape[2], input.shape[3]),
        InputLayout::Nhwc => (input.shape[0], input.shape[3], input.shape[1], input.shape[2]),
    };
    let window = positive_pair("windowDimensions", &o.window_dimensions, [input_height, input_width])?;
    let padding = list_or("padding", &o.padding, &[0; 4])?;
    let strides = positive_pair("strides", &o.strides, [1, 1])?;
    if let Some(sizes) = &o.output_sizes {
        if sizes.len() != 2 {
            return Err(Error::Type(format!("outputSizes has {} items but must have 2", sizes.len())));
        }
    }
    let dilations = positive_pair("dilations", &o.dilations, [1, 1])?;
    let (floor_h, ceil_h) = conv_output_size(input_height, window[0], padding[0], padding[1], strides[0], dilations[0]);
    let (floor_w, ceil_w) = conv_output_size(input_width, window[1], padding[2], padding[3], strides[1], dilations[1]);
    let (h, w) = match &o.output_sizes {
        Some(sizes) => {
            let (h, w) = (sizes[0] as i128, sizes[1] as i128);
            if !((h == floor_h && w == floor_w) || (h == ceil_h && w == ceil_w)) {
                return Err(Error::Type(format!(
                    "outputSizes {sizes:?} are neither the floor [{floor_h}, {floor_w}] nor the ceiling [{ceil_h}, {ceil_w}] of the computed sizes"
                )));
            }
            (h, w)
        }
        None => match o.output_shape_rounding {
            RoundingType::Floor => (floor_h, floor_w),
            RoundingType::Ceil => (ceil_h, ceil_w),
        },
    };
    Ok(PoolGeometry {
        batches,
        channels,
        input_size: [input_height, input_width],
        output_size: [valid_dimension("output height", h)?, valid_dimension("output width", w)?],
        window,
        padding: [padding[0], padding[1], padding[2], padding[3]],
        strides,
        dilations,
        layout: o.layout,
    })
}

pub fn validate(kind: PoolKind, o: &Pool2dOptions, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
    let g = geometry(kind, o, inputs[0])?;
    Ok(vec![OperandDescriptor::new(inputs[0].data_type, g.output_shape())])
}

/// The identity of max: the lowest value of the data type.
fn lowest(data_type: DataType) -> f64 {
    match data_type {
        DataType::Float32 | DataType::Float16 => f64::NEG_INFINITY,
        DataType::Int32 => i32::MIN as f64,
        DataType::Int8 => i8::MIN as f64,
        DataType::Int64 => i64::MIN as f64,
        DataType::Uint32 | DataType::Uint64 | DataType::Uint8 => 0.0,
    }
}

/// One invocation per output element, looping over its window.
pub fn lower(kind: PoolKind, o: &Pool2dOptions, request: &LowerRequest) -> Result<Lowering> {
    let g = geometry(kind, o, request.inputs[0])?;
    let all: Vec<u32> = g.padding.iter().chain(&g.strides).chain(&g.dilations).copied().collect();
    if all.iter().any(|&v| v > i32::MAX as u32) {
        return Err(Error::NotSupported(format!(
            "{}: padding, strides or dilations exceed the kernel's 32-bit signed indices",
            kind.name()
        )));
    }
    for axis in 0..2 {
        let (begin, end) = (g.padding[2 * axis] as u64, g.padding[2 * axis + 1] as u64);
        let high = g.input_size[axis] as u64 + end + g.strides[axis] as u64;
        crate::ops::conv2d::check_index_range(kind.name(), axis, begin, high)?;
    }
    let data_type = request.inputs[0].data_type;
    let vt = value_type(data_type)?;
    let [osn, osc, osh, osw] = g.strides(g.output_size);
    let [isn, isc, ish, isw] = g.strides(g.input_size);
    let [ih, iw] = g.input_size;
    let [oh, ow] = g.output_size;
    let [kh, kw] = g.window;
    let [sh, sw] = g.strides;
    let [dh, dw] = g.dilations;
    let (pt, pl) = (g.padding[0], g.padding[2]);
    let (init, accumulate, finish) = match kind {
        PoolKind::Average => (
            "var acc = 0.0;\n    var count = 0.0;".to_string(),
            "acc += x; count += 1.0;",
            "select(acc / count, 0.0, count == 0.0)",
        ),
        PoolKind::L2 => ("var acc = 0.0;".to_string(), "acc += x * x;", "sqrt(acc)"),
        PoolKind::Max => (format!("var acc = {};", literal(lowest(data_type), vt)), "acc = max(acc, x);", "acc"),
    };
    let body = format!(
        "    let n = (i / {osn}u) % {}u;
    let c = (i / {osc}u) % {}u;
    let oh = i32((i / {osh}u) % {oh}u);
    let ow = i32((i / {osw}u) % {ow}u);
    {init}
    for (var kh = 0; kh < {kh}; kh++) {{
        let ih = oh * {sh} - {pt} + kh * {dh};
        if (ih < 0 || ih >= {ih}) {{ continue; }}
        for (var kw = 0; kw < {kw}; kw++) {{
            let iw = ow * {sw} - {pl} + kw * {dw};
            if (iw < 0 || iw >= {iw}) {{ continue; }}
            let x = load_input(n * {isn}u + c * {isc}u + u32(ih) * {ish}u + u32(iw) * {isw}u);
            {accumulate}
        }}
    }}
    return {finish};",
        g.batches, g.channels
    );
    let launch = ElementwiseKernel {
        inputs: vec![("input", request.inputs[0])],
        output: request.outputs[0],
        helpers: String::new(),
        body,
    }
    .build()?;
    Ok(Lowering::single(launch))
}

/// The pooled values in float64, window by window, with its own reading of the options and
/// layouts and the spec's output-size formula rather than [`geometry`], so that a mistake there
/// shows as a difference.
pub fn reference(
    kind: PoolKind,
    o: &Pool2dOptions,
    inputs: &[HostTensor],
    outputs: &[OperandDescriptor],
) -> Result<Vec<HostTensor>> {
    let input = inputs.first().ok_or_else(|| Error::Type(format!("{}: no input", kind.name())))?;
    let out = outputs.first().ok_or_else(|| Error::Type(format!("{}: no output", kind.name())))?;
    let shape: Vec<i64> = input.shape().iter().map(|&d| d as i64).collect();
    if shape.len() != 4 {
        return Err(Error::Type(format!("{}: input of rank {}", kind.name(), shape.len())));
    }
    let (n_all, c_all, h_in, w_in) = match o.layout {
        InputLayout::Nchw => (shape[0], shape[1], shape[2], shape[3]),
        InputLayout::Nhwc => (shape[0], shape[3], shape[1], shape[2]),
    };
    let list = |v: &Option<Vec<u32>>, default: &[i64]| -> Result<Vec<i64>> {
        match v {
            None => Ok(default.to_vec()),
            Some(v) if v.len() == default.len() => Ok(v.iter().map(|&x| x as i64).collect()),
            Some(v) => Err(Error::Type(format!("{}: {v:?} has the wrong length", kind.name()))),
        }
    };
    let window = list(&o.window_dimensions, &[h_in, w_in])?;
    let strides = list(&o.strides, &[1, 1])?;
    let dilations = list(&o.dilations, &[1, 1])?;
    let padding = list(&o.padding, &[0; 4])?;
    if strides.contains(&0) {
        return Err(Error::Type(format!("{}: zero stride", kind.name())));
    }
    // floor or ceil of (in + padBegin + padEnd - dilation * (k - 1) - 1) / stride, plus 1.
    let size = |k: usize, input: i64, ceil: bool| {
        let span = input + padding[2 * k] + padding[2 * k + 1] - dilations[k] * (window[k] - 1) - 1;
        let q = span as f64 / strides[k] as f64;
        (if ceil { q.ceil() } else { q.floor() }) as i64 + 1
    };
    let ceil = o.output_shape_rounding == RoundingType::Ceil;
    let [h_out, w_out] = match &o.output_sizes {
        Some(_) => {
            let sizes = list(&o.output_sizes, &[0, 0])?;
            [sizes[0], sizes[1]]
        }
        None => [size(0, h_in, ceil), size(1, w_in, ceil)],
    };
    let index = |n: i64, c: i64, h: i64, w: i64, [hs, ws]: [i64; 2]| -> usize {
        (match o.layout {
            InputLayout::Nchw => ((n * c_all + c) * hs + h) * ws + w,
            InputLayout::Nhwc => ((n * hs + h) * ws + w) * c_all + c,
        }) as usize
    };
    let expected: Vec<i64> = match o.layout {
        InputLayout::Nchw => vec![n_all, c_all, h_out, w_out],
        InputLayout::Nhwc => vec![n_all, h_out, w_out, c_all],
    };
    if out.shape.iter().map(|&d| d as i64).ne(expected.iter().copied()) {
        return Err(Error::Type(format!("{}: output shape {:?}, the reference's is {expected:?}", kind.name(), out.shape)));
    }
    let mut data = vec![0.0; out.element_count() as usize];
    for n in 0..n_all {
        for c in 0..c_all {
            for oh in 0..h_out {
                for ow in 0..w_out {
                    let mut values = Vec::new();
                    for kh in 0..window[0] {
                        let ih = oh * strides[0] - padding[0] + kh * dilations[0];
                        for kw in 0..window[1] {
                            let iw = ow * strides[1] - padding[2] + kw * dilations[1];
                            if (0..h_in).contains(&ih) && (0..w_in).contains(&iw) {
                                values.push(input.data[index(n, c, ih, iw, [h_in, w_in])]);
                            }
                        }
                    }
                    let v = match kind {
                        PoolKind::Average if values.is_empty() => 0.0,
                        PoolKind::Average => values.iter().sum::<f64>() / values.len() as f64,
                        PoolKind::L2 => values.iter().map(|x| x * x).sum::<f64>().sqrt(),
                        PoolKind::Max => values.iter().copied().fold(lowest(out.data_type), f64::max),
                    };
                    data[index(n, c, oh, ow, [h_out, w_out])] = round_to(v, out.data_type);
                }
            }
        }
    }
    Ok(vec![HostTensor::new(out.clone(), data)?])
}

/// The registry's entry for this file's operators (see [`OpFamily`]).
pub struct Family;

impl OpFamily for Family {
    fn limits(&self) -> Vec<OpLimits> {
        limits()
    }

    fn from_options(&self, name: &str, p: &dyn MethodOptions) -> Result<Op> {
        let pool = |kind| -> Result<Op> {
            Ok(Op::Pool2d(
                kind,
                Pool2dOptions {
                    window_dimensions: p.opt_u32s("windowDimensions")?,
                    padding: p.opt_u32s("padding")?,
                    strides: p.opt_u32s("strides")?,
                    dilations: p.opt_u32s("dilations")?,
                    layout: InputLayout::from_name(&p.string("layout")?)?,
                    output_shape_rounding: RoundingType::from_name(&p.string("outputShapeRounding")?)?,
                    output_sizes: p.opt_u32s("outputSizes")?,
                },
            ))
        };
        Ok(match name {
            "averagePool2d" => pool(PoolKind::Average)?,
            "l2Pool2d" => pool(PoolKind::L2)?,
            "maxPool2d" => pool(PoolKind::Max)?,
            other => return Err(crate::ops::unknown_method(other)),
        })
    }

    fn name(&self, op: &Op) -> &'static str {
        match op {
            Op::Pool2d(kind, _) => kind.name(),
            _ => "",
        }
    }

    fn validate(&self, op: &Op, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
        match op {
            Op::Pool2d(kind, o) => validate(*kind, o, inputs),
            _ => Err(not_this_family(op)),
        }
    }

    fn lower(&self, op: &Op, request: &LowerRequest) -> Result<Lowering> {
        match op {
            Op::Pool2d(kind, o) => lower(*kind, o, request),
            _ => Err(not_this_family(op)),
        }
    }

    fn reference(&self, op: &Op, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
        match op {
            Op::Pool2d(kind, o) => reference(*kind, o, inputs, outputs),
            _ => Err(not_this_family(op)),
        }
    }
}
