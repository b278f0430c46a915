//! conv2d and convTranspose2d over 4-D tensors in either input layout and every filter layout.
//!
//! Validation resolves the options to a [`ConvGeometry`] (sizes, padding, strides, dilations and
//! the element strides of each logical axis), which the WGSL lowering reads: every tensor is
//! addressed through logical axes. The float64 reference reads the options itself.

use crate::error::{Error, Result};
use crate::operand::strides;
use crate::operand::OperandDescriptor;
use crate::ops::limits::{self, OpLimits, FLOATS};
use crate::ops::reference::{round_to, HostTensor};
use crate::ops::fusion::Epilogue;
use crate::ops::wgsl::{ElementwiseKernel, LowerRequest, Lowering};
use crate::ops::{not_this_family, MethodOptions, Op, OpFamily};
use std::ops::RangeInclusive;

/// `MLInputOperandLayout`, shared by the convolution, pooling and normalization families.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum InputLayout {
    #[default]
    Nchw,
    Nhwc,
}

impl InputLayout {
    pub fn from_name(name: &str) -> Result<InputLayout> {
        match name {
            "nchw" => Ok(InputLayout::Nchw),
            "nhwc" => Ok(InputLayout::Nhwc),
            _ => Err(Error::Type(format!("'{name}' is not a valid MLInputOperandLayout"))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            InputLayout::Nchw => "nchw",
            InputLayout::Nhwc => "nhwc",
        }
    }

    /// The index of the channel axis.
    pub fn channel_axis(self) -> usize {
        match self {
            InputLayout::Nchw => 1,
            InputLayout::Nhwc => 3,
        }
    }
}

/// `MLConv2dFilterOperandLayout`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum Conv2dFilterLayout {
    #[default]
    Oihw,
    Hwio,
    Ohwi,
    Ihwo,
}

impl Conv2dFilterLayout {
    pub fn from_name(name: &str) -> Result<Conv2dFilterLayout> {
        match name {
            "oihw" => Ok(Conv2dFilterLayout::Oihw),
            "hwio" => Ok(Conv2dFilterLayout::Hwio),
            "ohwi" => Ok(Conv2dFilterLayout::Ohwi),
            "ihwo" => Ok(Conv2dFilterLayout::Ihwo),
            _ => Err(Error::Type(format!("'{name}' is not a valid MLConv2dFilterOperandLayout"))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Conv2dFilterLayout::Oihw => "oihw",
            Conv2dFilterLayout::Hwio => "hwio",
            Conv2dFilterLayout::Ohwi => "ohwi",
            Conv2dFilterLayout::Ihwo => "ihwo",
        }
    }
}

/// `MLConvTranspose2dFilterOperandLayout`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum ConvTranspose2dFilterLayout {
    #[default]
    Iohw,
    Hwoi,
    Ohwi,
}

impl ConvTranspose2dFilterLayout {
    pub fn from_name(name: &str) -> Result<ConvTranspose2dFilterLayout> {
        match name {
            "iohw" => Ok(ConvTranspose2dFilterLayout::Iohw),
            "hwoi" => Ok(ConvTranspose2dFilterLayout::Hwoi),
            "ohwi" => Ok(ConvTranspose2dFilterLayout::Ohwi),
            _ => Err(Error::Type(format!("'{name}' is not a valid MLConvTranspose2dFilterOperandLayout"))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ConvTranspose2dFilterLayout::Iohw => "iohw",
            ConvTranspose2dFilterLayout::Hwoi => "hwoi",
            ConvTranspose2dFilterLayout::Ohwi => "ohwi",
        }
    }
}

/// `MLConv2dOptions`; absent lists are `None` (the spec's "does not exist"). `bias` follows
/// `input` and `filter` when present.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Conv2dOptions {
    pub padding: Option<Vec<u32>>,
    pub strides: Option<Vec<u32>>,
    pub dilations: Option<Vec<u32>>,
    pub groups: u32,
    pub input_layout: InputLayout,
    pub filter_layout: Conv2dFilterLayout,
    pub has_bias: bool,
}

/// The spec's defaults.
impl Default for Conv2dOptions {
    fn default() -> Self {
        Conv2dOptions {
            padding: None,
            strides: None,
            dilations: None,
            groups: 1,
            input_layout: InputLayout::Nchw,
            filter_layout: Conv2dFilterLayout::Oihw,
            has_bias: false,
        }
    }
}

/// `MLConvTranspose2dOptions`; `bias` follows `input` and `filter` when present.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ConvTranspose2dOptions {
    pub padding: Option<Vec<u32>>,
    pub strides: Option<Vec<u32>>,
    pub dilations: Option<Vec<u32>>,
    pub output_padding: Option<Vec<u32>>,
    pub output_sizes: Option<Vec<u32>>,
    pub groups: u32,
    pub input_layout: InputLayout,
    pub filter_layout: ConvTranspose2dFilterLayout,
    pub has_bias: bool,
}

/// The spec's defaults.
impl Default for ConvTranspose2dOptions {
    fn default() -> Self {
        ConvTranspose2dOptions {
            padding: None,
            strides: None,
            dilations: None,
            output_padding: None,
            output_sizes: None,
            groups: 1,
            input_layout: InputLayout::Nchw,
            filter_layout: ConvTranspose2dFilterLayout::Iohw,
            has_bias: false,
        }
    }
}

pub fn limits() -> Vec<OpLimits> {
    ["conv2d", "convTranspose2d"]
        .into_iter()
        .map(|name| OpLimits {
            name,
            operands: vec![
                limits::tensor("input", FLOATS, 4, 4),
                limits::tensor("filter", FLOATS, 4, 4),
                limits::tensor("bias", FLOATS, 1, 1),
                limits::tensor("output", FLOATS, 4, 4),
            ],
        })
        .collect()
}

/// A convolution with its options resolved and its layouts turned into element strides.
#[derive(Debug, Clone, PartialEq)]
pub struct ConvGeometry {
    pub transpose: bool,
    pub batches: u32,
    pub input_channels: u32,
    pub input_size: [u32; 2],
    pub output_channels: u32,
    pub output_size: [u32; 2],
    pub filter_size: [u32; 2],
    /// `[beginningHeight, endingHeight, beginningWidth, endingWidth]`.
    pub padding: [u32; 4],
    pub strides: [u32; 2],
    pub dilations: [u32; 2],
    pub groups: u32,
    pub input_layout: InputLayout,
    /// Element strides of the input's `n, c, h, w` axes.
    pub input_strides: [u64; 4],
    /// Element strides of the output's `n, c, h, w` axes.
    pub output_strides: [u64; 4],
    /// Element strides of the filter's `o, i, h, w` axes (conv2d) or `i, o, h, w` axes
    /// (convTranspose2d, `o` counting within a group).
    pub filter_strides: [u64; 4],
}

impl ConvGeometry {
    pub fn output_shape(&self) -> Vec<u32> {
        let [h, w] = self.output_size;
        match self.input_layout {
            InputLayout::Nchw => vec![self.batches, self.output_channels, h, w],
            InputLayout::Nhwc => vec![self.batches, h, w, self.output_channels],
        }
    }
}

/// The element strides of the logical axes `order` of a tensor whose layout is `layout`
/// (both spelled with one letter per axis, e.g. `"oihw"` of a `"hwio"` filter).
fn logical_strides(shape: &[u32], layout: &str, order: &str) -> [u64; 4] {
    let physical = strides(shape);
    let mut out = [0u64; 4];
    for (k, axis) in order.chars().enumerate() {
        if let Some(p) = layout.chars().position(|c| c == axis) {
            out[k] = physical[p];
        }
    }
    out
}

/// The dimensions of the logical axes `order` of a tensor of layout `layout`.
fn logical_dims(shape: &[u32], layout: &str, order: &str) -> [u32; 4] {
    let mut out = [0u32; 4];
    for (k, axis) in order.chars().enumerate() {
        if let Some(p) = layout.chars().position(|c| c == axis) {
            out[k] = shape[p];
        }
    }
    out
}

/// A list option of `len` items, or its default when absent.
pub fn list_or(name: &str, list: &Option<Vec<u32>>, default: &[u32]) -> Result<Vec<u32>> {
    match list {
        None => Ok(default.to_vec()),
        Some(l) if l.len() == default.len() => Ok(l.clone()),
        Some(l) => Err(Error::Type(format!("{name} has {} items but must have {}", l.len(), default.len()))),
    }
}

/// A pair option such as `strides` or `dilations`: two items, none 0, or `default` when absent.
pub fn positive_pair(name: &str, list: &Option<Vec<u32>>, default: [u32; 2]) -> Result<[u32; 2]> {
    let l = list_or(name, list, &default)?;
    if l.contains(&0) {
        return Err(Error::Type(format!("{name} {l:?} must not contain 0")));
    }
    Ok([l[0], l[1]])
}

/// The spec's "valid dimension" of a computed size.
pub fn valid_dimension(what: &str, size: i128) -> Result<u32> {
    if size >= 1 && size <= i32::MAX as i128 {
        Ok(size as u32)
    } else {
        Err(Error::Type(format!("the {what} {size} is not a valid dimension")))
    }
}

/// `(filterSize - 1) * dilation + 1`.
pub fn effective_size(filter: u32, dilation: u32) -> i128 {
    (filter as i128 - 1) * dilation as i128 + 1
}

/// The spec's "calculate conv output size" before rounding, as `floor` and `ceil`.
pub fn conv_output_size(input: u32, filter: u32, begin: u32, end: u32, stride: u32, dilation: u32) -> (i128, i128) {
    let span = input as i128 - effective_size(filter, dilation) + begin as i128 + end as i128;
    let s = stride as i128;
    (span.div_euclid(s) + 1, -(-span).div_euclid(s) + 1)
}

/// The type and rank checks of input and filter (the spec orders them differently for the two
/// operators, but every one of them is a `TypeError`).
fn check_operands(name: &str, inputs: &[&OperandDescriptor]) -> Result<()> {
    let l = limits::of(name)?;
    let (input, filter) = (inputs[0], inputs[1]);
    limits::check(&l.operands[0], input)?;
    limits::check(&l.operands[1], filter)?;
    if filter.data_type != input.data_type {
        return Err(Error::Type(format!("filter is {} but input is {}", filter.data_type, input.data_type)));
    }
    Ok(())
}

fn check_bias(inputs: &[&OperandDescriptor], has_bias: bool, output_channels: u32) -> Result<()> {
    if has_bias {
        let bias = inputs[2];
        if bias.shape != [output_channels] {
            return Err(Error::Type(format!(
                "bias has shape {:?} but must have shape [{output_channels}]",
                bias.shape
            )));
        }
        if bias.data_type != inputs[0].data_type {
            return Err(Error::Type(format!("bias is {} but input is {}", bias.data_type, inputs[0].data_type)));
        }
    }
    Ok(())
}

/// padding, strides, dilations and groups: the options both convolutions check first.
struct Window {
    padding: [u32; 4],
    strides: [u32; 2],
    dilations: [u32; 2],
}

fn window(padding: &Option<Vec<u32>>, strides: &Option<Vec<u32>>, dilations: &Option<Vec<u32>>) -> Result<Window> {
    let padding = list_or("padding", padding, &[0, 0, 0, 0])?;
    Ok(Window {
        padding: [padding[0], padding[1], padding[2], padding[3]],
        strides: positive_pair("strides", strides, [1, 1])?,
        dilations: positive_pair("dilations", dilations, [1, 1])?,
    })
}

fn check_groups(groups: u32) -> Result<()> {
    if groups == 0 {
        return Err(Error::Type("groups must not be 0".into()));
    }
    Ok(())
}

impl ConvGeometry {
    /// The geometry of validated operands: `filter_order` names the filter's logical axes.
    #[allow(clippy::too_many_arguments)]
    fn new(
        transpose: bool,
        input: &OperandDescriptor,
        filter: &OperandDescriptor,
        (input_layout, filter_layout, filter_order): (InputLayout, &str, &str),
        window: Window,
        groups: u32,
        output_channels: u32,
        output_size: [u32; 2],
    ) -> ConvGeometry {
        let layout = input_layout.name();
        let [batches, input_channels, input_height, input_width] = logical_dims(&input.shape, layout, "nchw");
        let filter_dims = logical_dims(&filter.shape, filter_layout, filter_order);
        let mut geometry = ConvGeometry {
            transpose,
            batches,
            input_channels,
            input_size: [input_height, input_width],
            output_channels,
            output_size,
            filter_size: [filter_dims[2], filter_dims[3]],
            padding: window.padding,
            strides: window.strides,
            dilations: window.dilations,
            groups,
            input_layout,
            input_strides: logical_strides(&input.shape, layout, "nchw"),
            output_strides: [0; 4],
            filter_strides: logical_strides(&filter.shape, filter_layout, filter_order),
        };
        geometry.output_strides = logical_strides(&geometry.output_shape(), layout, "nchw");
        geometry
    }
}

/// Runs conv2d's validation steps and resolves its geometry.
pub fn conv2d_geometry(o: &Conv2dOptions, inputs: &[&OperandDescriptor]) -> Result<ConvGeometry> {
    check_operands("conv2d", inputs)?;
    let (input, filter) = (inputs[0], inputs[1]);
    let window = window(&o.padding, &o.strides, &o.dilations)?;
    check_groups(o.groups)?;
    let layout = o.input_layout.name();
    let [_, input_channels, input_height, input_width] = logical_dims(&input.shape, layout, "nchw");
    let filter_layout = o.filter_layout.name();
    let [output_channels, filter_input_channels, filter_height, filter_width] =
        logical_dims(&filter.shape, filter_layout, "oihw");
    if input_channels % o.groups != 0 {
        return Err(Error::Type(format!("input channels {input_channels} are not divisible by groups {}", o.groups)));
    }
    if input_channels / o.groups != filter_input_channels {
        return Err(Error::Type(format!(
            "input channels {input_channels} / groups {} is not the filter's input channels {filter_input_channels}",
            o.groups
        )));
    }
    if output_channels % o.groups != 0 {
        return Err(Error::Type(format!("output channels {output_channels} are not divisible by groups {}", o.groups)));
    }
    check_bias(inputs, o.has_bias, output_channels)?;
    let Window { padding, strides, dilations } = &window;
    let (h, _) = conv_output_size(input_height, filter_height, padding[0], padding[1], strides[0], dilations[0]);
    let (w, _) = conv_output_size(input_width, filter_width, padding[2], padding[3], strides[1], dilations[1]);
    let output_size = [valid_dimension("output height", h)?, valid_dimension("output width", w)?];
    let layouts = (o.input_layout, filter_layout, "oihw");
    Ok(ConvGeometry::new(false, input, filter, layouts, window, o.groups, output_channels, output_size))
}

/// Runs convTranspose2d's validation steps and resolves its geometry.
pub fn conv_transpose2d_geometry(o: &ConvTranspose2dOptions, inputs: &[&OperandDescriptor]) -> Result<ConvGeometry> {
    check_operands("convTranspose2d", inputs)?;
    let (input, filter) = (inputs[0], inputs[1]);
    let window = window(&o.padding, &o.strides, &o.dilations)?;
    let Window { padding, strides, dilations } = &window;
    let output_padding = list_or("outputPadding", &o.output_padding, &[0, 0])?;
    match &o.output_sizes {
        Some(sizes) if sizes.len() != 2 => {
            return Err(Error::Type(format!("outputSizes has {} items but must have 2", sizes.len())))
        }
        Some(_) => {}
        None => {
            if output_padding[0] >= strides[0] || output_padding[1] >= strides[1] {
                return Err(Error::Type(format!(
                    "outputPadding {output_padding:?} must be smaller than strides {strides:?}"
                )));
            }
        }
    }
    check_groups(o.groups)?;
    let layout = o.input_layout.name();
    let [_, input_channels, input_height, input_width] = logical_dims(&input.shape, layout, "nchw");
    let filter_layout = o.filter_layout.name();
    let [filter_input_channels, filter_output_channels, filter_height, filter_width] =
        logical_dims(&filter.shape, filter_layout, "iohw");
    if input_channels != filter_input_channels {
        return Err(Error::Type(format!(
            "input channels {input_channels} differ from the filter's input channels {filter_input_channels}"
        )));
    }
    let output_channels = valid_dimension("output channels", filter_output_channels as i128 * o.groups as i128)?;
    check_bias(inputs, o.has_bias, output_channels)?;
    let calculated = |size: u32, k: usize| -> i128 {
        (size as i128 - 1) * strides[k] as i128 + effective_size([filter_height, filter_width][k], dilations[k])
            - padding[2 * k] as i128
            - padding[2 * k + 1] as i128
    };
    let (calculated_height, calculated_width) = (calculated(input_height, 0), calculated(input_width, 1));
    let (h, w) = match &o.output_sizes {
        Some(sizes) => {
            let (h, w) = (sizes[0] as i128, sizes[1] as i128);
            if h < calculated_height || h >= calculated_height + strides[0] as i128 {
                return Err(Error::Type(format!(
                    "outputSizes height {h} must be in {calculated_height} to {} exclusive",
                    calculated_height + strides[0] as i128
                )));
            }
            if w < calculated_width || w >= calculated_width + strides[1] as i128 {
                return Err(Error::Type(format!(
                    "outputSizes width {w} must be in {calculated_width} to {} exclusive",
                    calculated_width + strides[1] as i128
                )));
            }
            (h, w)
        }
        None => (calculated_height + output_padding[0] as i128, calculated_width + output_padding[1] as i128),
    };
    let output_size = [valid_dimension("output height", h)?, valid_dimension("output width", w)?];
    let layouts = (o.input_layout, filter_layout, "iohw");
    Ok(ConvGeometry::new(true, input, filter, layouts, window, o.groups, output_channels, output_size))
}

pub fn validate_conv2d(o: &Conv2dOptions, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
    let g = conv2d_geometry(o, inputs)?;
    Ok(vec![OperandDescriptor::new(inputs[0].data_type, g.output_shape())])
}

pub fn validate_conv_transpose2d(
    o: &ConvTranspose2dOptions,
    inputs: &[&OperandDescriptor],
) -> Result<Vec<OperandDescriptor>> {
    let g = conv_transpose2d_geometry(o, inputs)?;
    Ok(vec![OperandDescriptor::new(inputs[0].data_type, g.output_shape())])
}

/// Options baked into WGSL as `i32` literals must fit one.
fn check_i32(name: &str, values: &[u32]) -> Result<()> {
    if values.iter().any(|&v| v > i32::MAX as u32) {
        return Err(Error::NotSupported(format!("{name} {values:?} exceed the kernel's 32-bit signed indices")));
    }
    Ok(())
}

/// The kernels compute input rows and columns in i32: conv2d and the pools as `o * stride -
/// beginPadding + k * dilation`, whose values lie within `-beginPadding` and `input + endPadding
/// + stride`; convTranspose2d as `o + beginPadding - k * dilation` (then divided by the stride),
/// within `-(filter - 1) * dilation` and `output + beginPadding`. Past i32 a value would wrap
/// and read the wrong input, or skip one that exists, so such an axis is not supported.
pub(crate) fn check_index_range(name: &str, axis: usize, low: u64, high: u64) -> Result<()> {
    if low > i32::MAX as u64 || high > i32::MAX as u64 {
        let axis = ["height", "width"][axis.min(1)];
        return Err(Error::NotSupported(format!(
            "{name}: the {axis}'s sizes, padding, stride and dilation reach input positions from -{low} to {high}, beyond the kernel's 32-bit signed indices"
        )));
    }
    Ok(())
}

/// One invocation per output element: the sum over its group's input channels and the filter
/// window, accumulated in f32 (float16 is widened on load and rounded once on store).
fn lower(g: &ConvGeometry, has_bias: bool, request: &LowerRequest, epilogue: Option<&Epilogue>) -> Result<Lowering> {
    check_i32("padding", &g.padding)?;
    check_i32("strides", &g.strides)?;
    check_i32("dilations", &g.dilations)?;
    for axis in 0..2 {
        let (begin, end) = (g.padding[2 * axis] as u64, g.padding[2 * axis + 1] as u64);
        let (low, high) = if g.transpose {
            let window = (g.filter_size[axis] as u64).saturating_sub(1) * g.dilations[axis] as u64;
            (window, g.output_size[axis] as u64 + begin)
        } else {
            (begin, g.input_size[axis] as u64 + end + g.strides[axis] as u64)
        };
        check_index_range(if g.transpose { "convTranspose2d" } else { "conv2d" }, axis, low, high)?;
    }
    let [osn, osc, osh, osw] = g.output_strides;
    let [isn, isc, ish, isw] = g.input_strides;
    let [fs0, fs1, fsh, fsw] = g.filter_strides;
    let [ih, iw] = g.input_size;
    let [oh, ow] = g.output_size;
    let [kh, kw] = g.filter_size;
    let [sh, sw] = g.strides;
    let [dh, dw] = g.dilations;
    let (pt, pl) = (g.padding[0], g.padding[2]);
    let ocg = g.output_channels / g.groups;
    // conv2d's input channels are a multiple of groups (a validation step): `icg` per group.
    let icg = g.input_channels / g.groups;
    // convTranspose2d's input channels `c` of group `g` are those with
    // `floor(c * groups / inputChannels) == g` (the spec does not require them to divide).
    let (ci, groups) = (g.input_channels, g.groups);
    if ci as u64 * groups as u64 > u32::MAX as u64 {
        return Err(Error::NotSupported(format!("input channels {ci} times groups {groups} exceed the kernel's 32-bit indices")));
    }
    let mut body = format!(
        "    let n = (i / {osn}u) % {}u;\n    let oc = (i / {osc}u) % {}u;\n    let oh = i32((i / {osh}u) % {oh}u);\n    let ow = i32((i / {osw}u) % {ow}u);\n    let g = oc / {ocg}u;\n    var acc = 0.0;\n",
        g.batches, g.output_channels
    );
    // A 1x1 filter without padding reads one input pixel, always in range: no window loops or
    // bounds checks, which a CPU adapter (SwiftShader) pays for per channel.
    let pointwise = !g.transpose && g.filter_size == [1, 1] && g.padding == [0; 4];
    if pointwise {
        body += &format!(
            "    let ib = n * {isn}u + g * {icg}u * {isc}u + u32(oh) * {sh}u * {ish}u + u32(ow) * {sw}u * {isw}u;\n    let wb = oc * {fs0}u;\n    for (var ic = 0u; ic < {icg}u; ic++) {{\n        acc += load_input(ib + ic * {isc}u) * load_weight(wb + ic * {fs1}u);\n    }}\n"
        );
    } else if !g.transpose {
        // The window outside, channels inside: each in-range filter tap checks its bounds once,
        // then sums over the group's channels.
        body += &format!(
            "    for (var kh = 0u; kh < {kh}u; kh++) {{\n        let sh = oh * {sh} - {pt} + i32(kh) * {dh};\n        if (sh < 0 || sh >= {ih}) {{ continue; }}\n        for (var kw = 0u; kw < {kw}u; kw++) {{\n            let sw = ow * {sw} - {pl} + i32(kw) * {dw};\n            if (sw < 0 || sw >= {iw}) {{ continue; }}\n            let ib = n * {isn}u + g * {icg}u * {isc}u + u32(sh) * {ish}u + u32(sw) * {isw}u;\n            let wb = oc * {fs0}u + kh * {fsh}u + kw * {fsw}u;\n            for (var ic = 0u; ic < {icg}u; ic++) {{\n                acc += load_input(ib + ic * {isc}u) * load_weight(wb + ic * {fs1}u);\n            }}\n        }}\n    }}\n"
        );
    } else {
        // convTranspose2d is conv2d's adjoint, reading the input row `ih` with
        // `ih * stride - padding + kh * dilation == oh`.
        body += &format!(
            "    let first = (g * {ci}u + {groups}u - 1u) / {groups}u;\n    let end = ((g + 1u) * {ci}u + {groups}u - 1u) / {groups}u;\n    for (var c = first; c < end; c++) {{\n        for (var kh = 0u; kh < {kh}u; kh++) {{\n            let th = oh + {pt} - i32(kh) * {dh};\n            if (th < 0 || th % {sh} != 0 || th / {sh} >= {ih}) {{ continue; }}\n            let ih = u32(th / {sh});\n            for (var kw = 0u; kw < {kw}u; kw++) {{\n                let tw = ow + {pl} - i32(kw) * {dw};\n                if (tw < 0 || tw % {sw} != 0 || tw / {sw} >= {iw}) {{ continue; }}\n                let iw = u32(tw / {sw});\n                acc += load_input(n * {isn}u + c * {isc}u + ih * {ish}u + iw * {isw}u) * load_weight(c * {fs0}u + (oc % {ocg}u) * {fs1}u + kh * {fsh}u + kw * {fsw}u);\n            }}\n        }}\n    }}\n"
        );
    }
    let mut inputs = vec![("input", request.inputs[0]), ("weight", request.inputs[1])];
    let mut value = "acc".to_string();
    if has_bias {
        inputs.push(("bias", request.inputs[2]));
        value += " + load_bias(oc)";
    }
    let helpers = match epilogue {
        Some(ep) => {
            inputs.extend(ep.names());
            value = format!("epilogue_at({value}, i)");
            ep.wgsl.clone()
        }
        None => String::new(),
    };
    body += &format!("    return {value};");
    let launch = ElementwiseKernel { inputs, output: request.outputs[0], helpers, body }.build()?;
    Ok(Lowering::single(launch))
}

/// Lowers conv2d, applying `epilogue` (fused element-wise operators) to each output.
pub fn lower_conv2d(o: &Conv2dOptions, request: &LowerRequest, epilogue: Option<&Epilogue>) -> Result<Lowering> {
    let g = conv2d_geometry(o, &request.inputs)?;
    lower(&g, o.has_bias, request, epilogue)
}

pub fn lower_conv_transpose2d(o: &ConvTranspose2dOptions, request: &LowerRequest, epilogue: Option<&Epilogue>) -> Result<Lowering> {
    let g = conv_transpose2d_geometry(o, &request.inputs)?;
    lower(&g, o.has_bias, request, epilogue)
}

/// The spec's definitions summed in float64, with its own reading of the options, layouts and
/// output sizes (not [`ConvGeometry`], which the kernel uses), so that a mistake there shows as a
/// difference: conv2d gathers `input[ih, iw] * filter[kh, kw]` over
/// `ih = oh * stride - padding + kh * dilation`; convTranspose2d scatters each input element to
/// `oh = ih * stride - padding + kh * dilation`.
fn reference(
    transpose: bool,
    options: (&Option<Vec<u32>>, &Option<Vec<u32>>, &Option<Vec<u32>>, u32, InputLayout, &str),
    transpose_sizes: (&Option<Vec<u32>>, &Option<Vec<u32>>),
    inputs: &[HostTensor],
    outputs: &[OperandDescriptor],
) -> Result<Vec<HostTensor>> {
    let (padding, strides, dilations, groups, layout, filter_layout) = options;
    let name = if transpose { "convTranspose2d" } else { "conv2d" };
    let fail = |what: String| Error::Type(format!("{name} reference: {what}"));
    let (input, filter) = match inputs {
        [input, filter, ..] => (input, filter),
        _ => return Err(fail("missing operands".into())),
    };
    let out = outputs.first().ok_or_else(|| fail("no output".into()))?;
    let list = |v: &Option<Vec<u32>>, default: &[i64]| -> Result<Vec<i64>> {
        match v {
            None => Ok(default.to_vec()),
            Some(v) if v.len() == default.len() => Ok(v.iter().map(|&x| x as i64).collect()),
            Some(v) => Err(fail(format!("{v:?} has the wrong length"))),
        }
    };
    let (pad, stride, dilation) = (list(padding, &[0; 4])?, list(strides, &[1, 1])?, list(dilations, &[1, 1])?);
    if input.shape().len() != 4 || filter.shape().len() != 4 || groups == 0 || stride.contains(&0) {
        return Err(fail("invalid operands or options".into()));
    }
    let is: Vec<i64> = input.shape().iter().map(|&d| d as i64).collect();
    let fs: Vec<i64> = filter.shape().iter().map(|&d| d as i64).collect();
    let (batches, in_c, in_h, in_w) = match layout {
        InputLayout::Nchw => (is[0], is[1], is[2], is[3]),
        InputLayout::Nhwc => (is[0], is[3], is[1], is[2]),
    };
    // The filter's dimension named by `axis` (o, i, h or w) and the linear index of an element.
    let axis = |a: char| filter_layout.find(a).ok_or_else(|| fail(format!("no axis {a} in {filter_layout}")));
    let (o_axis, i_axis, h_axis, w_axis) = (axis('o')?, axis('i')?, axis('h')?, axis('w')?);
    let (k_h, k_w) = (fs[h_axis], fs[w_axis]);
    let filter_at = |o: i64, i: i64, h: i64, w: i64| -> usize {
        let mut c = [0i64; 4];
        (c[o_axis], c[i_axis], c[h_axis], c[w_axis]) = (o, i, h, w);
        (((c[0] * fs[1] + c[1]) * fs[2] + c[2]) * fs[3] + c[3]) as usize
    };
    // Output channels, and the filter's output channels per group.
    let (out_c, per_group) = if transpose { (fs[o_axis] * groups as i64, fs[o_axis]) } else { (fs[o_axis], fs[o_axis] / groups as i64) };
    let effective = |k: i64, d: i64| (k - 1) * d + 1;
    let [out_h, out_w] = if transpose {
        let calculated = |x: i64, k: usize, f: i64| (x - 1) * stride[k] + effective(f, dilation[k]) - pad[2 * k] - pad[2 * k + 1];
        let (output_padding, output_sizes) = transpose_sizes;
        match output_sizes {
            Some(_) => {
                let s = list(output_sizes, &[0, 0])?;
                [s[0], s[1]]
            }
            None => {
                let p = list(output_padding, &[0, 0])?;
                [calculated(in_h, 0, k_h) + p[0], calculated(in_w, 1, k_w) + p[1]]
            }
        }
    } else {
        let size = |x: i64, k: usize, f: i64| (x + pad[2 * k] + pad[2 * k + 1] - dilation[k] * (f - 1) - 1).div_euclid(stride[k]) + 1;
        [size(in_h, 0, k_h), size(in_w, 1, k_w)]
    };
    let expected = match layout {
        InputLayout::Nchw => vec![batches, out_c, out_h, out_w],
        InputLayout::Nhwc => vec![batches, out_h, out_w, out_c],
    };
    if out.shape.iter().map(|&d| d as i64).ne(expected.iter().copied()) {
        return Err(fail(format!("output shape {:?}, the reference's is {expected:?}", out.shape)));
    }
    let at = |n: i64, c: i64, h: i64, w: i64, channels: i64, [hs, ws]: [i64; 2]| -> usize {
        (match layout {
            InputLayout::Nchw => ((n * channels + c) * hs + h) * ws + w,
            InputLayout::Nhwc => ((n * hs + h) * ws + w) * channels + c,
        }) as usize
    };
    let bias = inputs.get(2).map(|b| &b.data);
    let mut data = vec![0.0f64; out.element_count() as usize];
    for n in 0..batches {
        for oc in 0..out_c {
            let group = oc / per_group;
            // The input channels of the group: c with floor(c * groups / inputChannels) == group.
            let channels: Vec<i64> = (0..in_c).filter(|c| c * groups as i64 / in_c == group).collect();
            for oh in 0..out_h {
                for ow in 0..out_w {
                    let mut sum = bias.map_or(0.0, |b| b[oc as usize]);
                    for (ic, &c) in channels.iter().enumerate() {
                        for kh in 0..k_h {
                            for kw in 0..k_w {
                                let w = if transpose {
                                    filter_at(oc % per_group, c, kh, kw)
                                } else {
                                    filter_at(oc, ic as i64, kh, kw)
                                };
                                let (ih, iw) = if transpose {
                                    // oh = ih * stride - padding + kh * dilation, for an integer ih.
                                    let (th, tw) = (oh + pad[0] - kh * dilation[0], ow + pad[2] - kw * dilation[1]);
                                    if th % stride[0] != 0 || tw % stride[1] != 0 {
                                        continue;
                                    }
                                    (th.div_euclid(stride[0]), tw.div_euclid(stride[1]))
                                } else {
                                    (oh * stride[0] - pad[0] + kh * dilation[0], ow * stride[1] - pad[2] + kw * dilation[1])
                                };
                                if (0..in_h).contains(&ih) && (0..in_w).contains(&iw) {
                                    sum += input.data[at(n, c, ih, iw, in_c, [in_h, in_w])] * filter.data[w];
                                }
                            }
                        }
                    }
                    data[at(n, oc, oh, ow, out_c, [out_h, out_w])] = round_to(sum, out.data_type);
                }
            }
        }
    }
    Ok(vec![HostTensor::new(out.clone(), data)?])
}

pub fn reference_conv2d(
    o: &Conv2dOptions,
    inputs: &[HostTensor],
    outputs: &[OperandDescriptor],
) -> Result<Vec<HostTensor>> {
    let options = (&o.padding, &o.strides, &o.dilations, o.groups, o.input_layout, o.filter_layout.name());
    reference(false, options, (&None, &None), inputs, outputs)
}

pub fn reference_conv_transpose2d(
    o: &ConvTranspose2dOptions,
    inputs: &[HostTensor],
    outputs: &[OperandDescriptor],
) -> Result<Vec<HostTensor>> {
    // The transposed filter's "i" and "o" are the same letters in its layout's name.
    let options = (&o.padding, &o.strides, &o.dilations, o.groups, o.input_layout, o.filter_layout.name());
    reference(true, options, (&o.output_padding, &o.output_sizes), inputs, outputs)
}

/// The registry's entry for this file's operators (see [`OpFamily`]).
pub struct Family;

impl OpFamily for Family {
    fn limits(&self) -> Vec<OpLimits> {
        limits()
    }

    fn from_options(&self, name: &str, p: &dyn MethodOptions) -> Result<Op> {
        Ok(match name {
            "conv2d" => Op::Conv2d(Conv2dOptions {
                padding: p.opt_u32s("padding")?,
                strides: p.opt_u32s("strides")?,
                dilations: p.opt_u32s("dilations")?,
                groups: p.u32("groups")?,
                input_layout: InputLayout::from_name(&p.string("inputLayout")?)?,
                filter_layout: Conv2dFilterLayout::from_name(&p.string("filterLayout")?)?,
                has_bias: p.bool("bias")?,
            }),
            "convTranspose2d" => Op::ConvTranspose2d(ConvTranspose2dOptions {
                padding: p.opt_u32s("padding")?,
                strides: p.opt_u32s("strides")?,
                dilations: p.opt_u32s("dilations")?,
                output_padding: p.opt_u32s("outputPadding")?,
                output_sizes: p.opt_u32s("outputSizes")?,
                groups: p.u32("groups")?,
                input_layout: InputLayout::from_name(&p.string("inputLayout")?)?,
                filter_layout: ConvTranspose2dFilterLayout::from_name(&p.string("filterLayout")?)?,
                has_bias: p.bool("bias")?,
            }),
            other => return Err(crate::ops::unknown_method(other)),
        })
    }

    fn name(&self, op: &Op) -> &'static str {
        match op {
            Op::Conv2d(_) => "conv2d",
            Op::ConvTranspose2d(_) => "convTranspose2d",
            _ => "",
        }
    }

    fn input_count(&self, op: &Op) -> RangeInclusive<usize> {
        match op {
            Op::Conv2d(o) => {
                let n = 2 + o.has_bias as usize;
                n..=n
            }
            Op::ConvTranspose2d(o) => {
                let n = 2 + o.has_bias as usize;
                n..=n
            }
            _ => 1..=1,
        }
    }

    fn validate(&self, op: &Op, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
        match op {
            Op::Conv2d(o) => validate_conv2d(o, inputs),
            Op::ConvTranspose2d(o) => validate_conv_transpose2d(o, inputs),
            _ => Err(not_this_family(op)),
        }
    }

    fn lower(&self, op: &Op, request: &LowerRequest) -> Result<Lowering> {
        match op {
            Op::Conv2d(o) => lower_conv2d(o, request, None),
            Op::ConvTranspose2d(o) => lower_conv_transpose2d(o, request, None),
            _ => Err(not_this_family(op)),
        }
    }

    fn reference(&self, op: &Op, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
        match op {
            Op::Conv2d(o) => reference_conv2d(o, inputs, outputs),
            Op::ConvTranspose2d(o) => reference_conv_transpose2d(o, inputs, outputs),
            _ => Err(not_this_family(op)),
        }
    }
}
