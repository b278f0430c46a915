//! batchNormalization (with given mean and variance along one axis) and instanceNormalization
//! (mean and variance computed over the spatial dimensions of each sample and channel).
//!
//! Both compute `scale * (x - mean) / sqrt(variance + epsilon) + bias`, with `epsilon` first
//! cast to the input's data type as the spec says.

use crate::error::{Error, Result};
use crate::operand::MAX_RANK;
use crate::operand::{DataType, OperandDescriptor};
use crate::ops::conv2d::InputLayout;
use crate::ops::limits::{self, OpLimits, FLOATS};
use crate::ops::movement::outer_inner;
use crate::ops::reference::{round_to, HostTensor};
use crate::ops::wgsl::{
    binding, literal, load_fn, BufRef, ElementwiseKernel, Launch, LowerRequest, Lowering, F16_HELPERS, WORKGROUP_SIZE,
};
use crate::ops::{not_this_family, MethodOptions, Op, OpFamily};
use std::ops::RangeInclusive;

/// `MLBatchNormalizationOptions`; `scale` then `bias` follow `input`, `mean` and `variance`
/// when present.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BatchNormalizationOptions {
    pub axis: u32,
    pub epsilon: f64,
    pub has_scale: bool,
    pub has_bias: bool,
}

impl Default for BatchNormalizationOptions {
    fn default() -> Self {
        BatchNormalizationOptions { axis: 1, epsilon: 1e-5, has_scale: false, has_bias: false }
    }
}

/// `MLInstanceNormalizationOptions`; `scale` then `bias` follow `input` when present.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct InstanceNormalizationOptions {
    pub epsilon: f64,
    pub layout: InputLayout,
    pub has_scale: bool,
    pub has_bias: bool,
}

impl Default for InstanceNormalizationOptions {
    fn default() -> Self {
        InstanceNormalizationOptions { epsilon: 1e-5, layout: InputLayout::Nchw, has_scale: false, has_bias: false }
    }
}

pub fn limits() -> Vec<OpLimits> {
    vec![
        OpLimits {
            name: "batchNormalization",
            operands: vec![
                limits::tensor("input", FLOATS, 1, MAX_RANK as u32),
                limits::tensor("mean", FLOATS, 1, 1),
                limits::tensor("variance", FLOATS, 1, 1),
                limits::tensor("scale", FLOATS, 1, 1),
                limits::tensor("bias", FLOATS, 1, 1),
                limits::tensor("output", FLOATS, 1, MAX_RANK as u32),
            ],
        },
        OpLimits {
            name: "instanceNormalization",
            operands: vec![
                limits::tensor("input", FLOATS, 4, 4),
                limits::tensor("scale", FLOATS, 1, 1),
                limits::tensor("bias", FLOATS, 1, 1),
                limits::tensor("output", FLOATS, 4, 4),
            ],
        },
    ]
}

/// A per-channel operand: the input's data type and the shape `[channels]`.
fn check_channel_operand(name: &str, d: &OperandDescriptor, input: &OperandDescriptor, channels: u32) -> Result<()> {
    if d.data_type != input.data_type {
        return Err(Error::Type(format!("{name} is {} but input is {}", d.data_type, input.data_type)));
    }
    if d.shape != [channels] {
        return Err(Error::Type(format!("{name} has shape {:?} but must have shape [{channels}]", d.shape)));
    }
    Ok(())
}

pub fn validate_batch_normalization(
    o: &BatchNormalizationOptions,
    inputs: &[&OperandDescriptor],
) -> Result<Vec<OperandDescriptor>> {
    let input = inputs[0];
    limits::check(&limits::of("batchNormalization")?.operands[0], input)?;
    let axis = o.axis as usize;
    if axis >= input.rank() {
        return Err(Error::Type(format!("axis {axis} is out of range for input of rank {}", input.rank())));
    }
    let channels = input.shape[axis];
    check_channel_operand("mean", inputs[1], input, channels)?;
    check_channel_operand("variance", inputs[2], input, channels)?;
    let mut next = 3;
    for (present, name) in [(o.has_scale, "scale"), (o.has_bias, "bias")] {
        if present {
            check_channel_operand(name, inputs[next], input, channels)?;
            next += 1;
        }
    }
    Ok(vec![input.clone()])
}

pub fn validate_instance_normalization(
    o: &InstanceNormalizationOptions,
    inputs: &[&OperandDescriptor],
) -> Result<Vec<OperandDescriptor>> {
    let input = inputs[0];
    limits::check(&limits::of("instanceNormalization")?.operands[0], input)?;
    let channels = input.shape[o.layout.channel_axis()];
    let mut next = 1;
    for (present, name) in [(o.has_scale, "scale"), (o.has_bias, "bias")] {
        if present {
            check_channel_operand(name, inputs[next], input, channels)?;
            next += 1;
        }
    }
    Ok(vec![input.clone()])
}

/// `epsilon` cast to the input's data type.
fn epsilon(value: f64, data_type: DataType) -> f64 {
    round_to(value, data_type)
}

/// The WGSL applying optional scale and bias to `v` of channel `c`, and the bindings they need.
fn scale_bias<'a>(
    request: &LowerRequest<'a>,
    first: usize,
    has_scale: bool,
    has_bias: bool,
) -> (Vec<(&'static str, &'a OperandDescriptor)>, String) {
    let mut inputs = Vec::new();
    let mut expression = "v".to_string();
    let mut next = first;
    if has_scale {
        inputs.push(("scale", request.inputs[next]));
        expression = format!("{expression} * load_scale(c)");
        next += 1;
    }
    if has_bias {
        inputs.push(("bias", request.inputs[next]));
        expression = format!("{expression} + load_bias(c)");
    }
    (inputs, expression)
}

/// Error-free transformations of f32 values: Knuth's two-sum and Dekker's product with Veltkamp's
/// split (its partial products are exact, so contracting them into `fma` changes nothing). A
/// compiler may rewrite `(a + b) - a` as `b` (Mesa does for inexact operations; WGSL cannot mark
/// them exact), which loses the error terms: `hide` passes each intermediate through a `select`
/// on `g`, a condition false at run time that the compiler cannot know, for [`BATCH_NORM`].
const TWO_FLOAT: &str = "fn hide(v: f32, g: bool) -> f32 {
    return select(v, 0.0, g);
}
fn two_sum(a: f32, b: f32, g: bool) -> vec2<f32> {
    let s = hide(a + b, g);
    let bb = hide(s - a, g);
    return vec2<f32>(s, (a - hide(s - bb, g)) + (b - bb));
}
fn split(a: f32, g: bool) -> vec2<f32> {
    let c = hide(4097.0 * a, g);
    let h = c - hide(c - a, g);
    return vec2<f32>(h, a - h);
}
fn two_prod(a: f32, b: f32, g: bool) -> vec2<f32> {
    let p = hide(a * b, g);
    let x = split(a, g);
    let y = split(b, g);
    return vec2<f32>(p, ((x.x * y.x - p) + x.x * y.y + x.y * y.x) + x.y * y.y);
}
";

/// `(x - mean) / sqrt(variance + epsilon) * scale + bias` with every step carried in two f32
/// words (the quotient and the square root corrected from their exact residuals), so that the
/// result is the float64 value rounded once: an activation after it (gelu, whose relative
/// condition grows as x^2) would multiply the few ULP of the plain f32 steps. Where the split
/// overflows (|values| near 1e35) the plain f32 formula.
const BATCH_NORM: &str = "fn batch_norm(x: f32, mean: f32, variance: f32, epsilon: f32, scale: f32, bias: f32, g: bool) -> f32 {
    let plain = (x - mean) / sqrt(variance + epsilon) * scale + bias;
    let d = two_sum(x, -mean, g);
    let v = two_sum(variance, epsilon, g);
    let r = hide(sqrt(v.x), g);
    let rr = two_prod(r, r, g);
    let r_lo = (((v.x - rr.x) - rr.y) + v.y) / (2.0 * r);
    let q = hide(d.x / r, g);
    let qr = two_prod(q, r, g);
    let q_lo = ((((d.x - qr.x) - qr.y) + d.y) - q * r_lo) / r;
    let p = two_prod(q, scale, g);
    let s = two_sum(p.x, bias, g);
    let y = s.x + (s.y + (p.y + q_lo * scale));
    return select(plain, y, abs(y) <= bitcast<f32>(0x7f7fffffu));
}
";

pub fn lower_batch_normalization(o: &BatchNormalizationOptions, request: &LowerRequest) -> Result<Lowering> {
    let input = request.inputs[0];
    let axis = o.axis as usize;
    let (_, inner) = outer_inner(&input.shape, axis);
    let channels = input.shape[axis];
    let eps = literal(epsilon(o.epsilon, input.data_type), "f32");
    let mut inputs = vec![("input", input), ("mean", request.inputs[1]), ("variance", request.inputs[2])];
    let mut next = 3;
    let mut scale = "1.0".to_string();
    let mut bias = "0.0".to_string();
    if o.has_scale {
        inputs.push(("scale", request.inputs[next]));
        scale = "load_scale(c)".into();
        next += 1;
    }
    if o.has_bias {
        inputs.push(("bias", request.inputs[next]));
        bias = "load_bias(c)".into();
    }
    let body = format!(
        "    let c = (i / {inner}u) % {channels}u;\n    return batch_norm(load_input(i), load_mean(c), load_variance(c), {eps}, {scale}, {bias}, i == 0xffffffffu);"
    );
    let helpers = format!("{TWO_FLOAT}{BATCH_NORM}");
    let launch = ElementwiseKernel { inputs, output: request.outputs[0], helpers, body }.build()?;
    Ok(Lowering::single(launch))
}

/// Element strides of the `n, c` axes and of a spatial position, and the spatial size, of a
/// 4-D tensor in `layout`.
fn instance_strides(shape: &[u32], layout: InputLayout) -> (u64, u64, u64, u64) {
    let [_, a, b, c] = [shape[0], shape[1], shape[2], shape[3]].map(|d| d as u64);
    match layout {
        InputLayout::Nchw => (a * b * c, b * c, 1, b * c),
        InputLayout::Nhwc => (a * b * c, 1, c, a * b),
    }
}

/// Two launches: one invocation per (sample, channel) computes the mean and the reciprocal
/// standard deviation (two passes over the spatial elements, for accuracy) into a scratch
/// buffer of f32 pairs; then one invocation per output word normalizes.
pub fn lower_instance_normalization(o: &InstanceNormalizationOptions, request: &LowerRequest) -> Result<Lowering> {
    let input = request.inputs[0];
    let batches = input.shape[0];
    let channels = input.shape[o.layout.channel_axis()];
    let (sn, sc, ss, spatial) = instance_strides(&input.shape, o.layout);
    let pairs = batches as u64 * channels as u64;
    let eps = literal(epsilon(o.epsilon, input.data_type), "f32");
    let mut stats = String::from(F16_HELPERS);
    stats += &binding(0, "input", input.data_type, false);
    stats += &load_fn("input", input.data_type)?;
    stats += "@group(0) @binding(1) var<storage, read_write> stats: array<f32>;\n";
    stats += &format!(
        "@compute @workgroup_size({WORKGROUP_SIZE})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
    let t = gid.x + gid.y * nwg.x * {WORKGROUP_SIZE}u;
    if (t >= {pairs}u) {{ return; }}
    let base = (t / {channels}u) * {sn}u + (t % {channels}u) * {sc}u;
    var sum = 0.0;
    for (var s = 0u; s < {spatial}u; s++) {{ sum += load_input(base + s * {ss}u); }}
    let mean = sum / {spatial}.0;
    var squares = 0.0;
    for (var s = 0u; s < {spatial}u; s++) {{ let d = load_input(base + s * {ss}u) - mean; squares += d * d; }}
    stats[2u * t] = mean;
    stats[2u * t + 1u] = 1.0 / sqrt(squares / {spatial}.0 + {eps});
}}
"
    );
    let stats_launch = Launch {
        source: stats,
        reads: vec![BufRef::Input(0)],
        writes: vec![BufRef::Scratch(0)],
        invocations: pairs,
        workgroup_size: WORKGROUP_SIZE,
    };
    let stats_descriptor = OperandDescriptor::new(DataType::Float32, vec![2 * pairs as u32]);
    let (extra, expression) = scale_bias(request, 1, o.has_scale, o.has_bias);
    let mut inputs = vec![("input", input), ("stats", &stats_descriptor)];
    inputs.extend(extra);
    // The channel of element `i` and its (sample, channel) pair.
    let (channel, pair) = match o.layout {
        InputLayout::Nchw => (format!("(i / {spatial}u) % {channels}u"), format!("i / {spatial}u")),
        InputLayout::Nhwc => (format!("i % {channels}u"), format!("(i / {sn}u) * {channels}u + c")),
    };
    let body = format!(
        "    let c = {channel};\n    let p = {pair};\n    let v = (load_input(i) - load_stats(2u * p)) * load_stats(2u * p + 1u);\n    return {expression};"
    );
    let mut apply = ElementwiseKernel { inputs, output: request.outputs[0], helpers: String::new(), body }.build()?;
    // The statistics come from the first launch's scratch buffer, not from an operator input.
    apply.reads[1] = BufRef::Scratch(0);
    for read in apply.reads.iter_mut().skip(2) {
        if let BufRef::Input(k) = read {
            *k -= 1;
        }
    }
    Ok(Lowering::Kernels { scratch: vec![8 * pairs], launches: vec![stats_launch, apply] })
}

fn scale_bias_values<'a>(
    inputs: &'a [HostTensor],
    first: usize,
    has_scale: bool,
    has_bias: bool,
) -> (Option<&'a [f64]>, Option<&'a [f64]>) {
    let scale = has_scale.then(|| inputs[first].data.as_slice());
    let bias = has_bias.then(|| inputs[first + has_scale as usize].data.as_slice());
    (scale, bias)
}

pub fn reference_batch_normalization(
    o: &BatchNormalizationOptions,
    inputs: &[HostTensor],
    outputs: &[OperandDescriptor],
) -> Result<Vec<HostTensor>> {
    let input = &inputs[0];
    let out = &outputs[0];
    let axis = o.axis as usize;
    let (_, inner) = outer_inner(input.shape(), axis);
    let channels = input.shape()[axis] as usize;
    let eps = epsilon(o.epsilon, input.descriptor.data_type);
    let (mean, variance) = (&inputs[1].data, &inputs[2].data);
    let (scale, bias) = scale_bias_values(inputs, 3, o.has_scale, o.has_bias);
    let data = input
        .data
        .iter()
        .enumerate()
        .map(|(i, &x)| {
            let c = (i / inner as usize) % channels;
            let v = (x - mean[c]) / (variance[c] + eps).sqrt();
            let v = v * scale.map_or(1.0, |s| s[c]) + bias.map_or(0.0, |b| b[c]);
            round_to(v, out.data_type)
        })
        .collect();
    Ok(vec![HostTensor::new(out.clone(), data)?])
}

pub fn reference_instance_normalization(
    o: &InstanceNormalizationOptions,
    inputs: &[HostTensor],
    outputs: &[OperandDescriptor],
) -> Result<Vec<HostTensor>> {
    let input = &inputs[0];
    let out = &outputs[0];
    let shape = input.shape();
    let channels = shape[o.layout.channel_axis()] as usize;
    let (sn, sc, ss, spatial) = instance_strides(shape, o.layout);
    let (sn, sc, ss, spatial) = (sn as usize, sc as usize, ss as usize, spatial as usize);
    let eps = epsilon(o.epsilon, input.descriptor.data_type);
    let (scale, bias) = scale_bias_values(inputs, 1, o.has_scale, o.has_bias);
    let mut data = vec![0.0; input.data.len()];
    for n in 0..shape[0] as usize {
        for c in 0..channels {
            let index = |s: usize| n * sn + c * sc + s * ss;
            let mean = (0..spatial).map(|s| input.data[index(s)]).sum::<f64>() / spatial as f64;
            let variance = (0..spatial).map(|s| (input.data[index(s)] - mean).powi(2)).sum::<f64>() / spatial as f64;
            for s in 0..spatial {
                let v = (input.data[index(s)] - mean) / (variance + eps).sqrt();
                let v = v * scale.map_or(1.0, |k| k[c]) + bias.map_or(0.0, |b| b[c]);
                data[index(s)] = round_to(v, out.data_type);
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
        Ok(match name {
            "batchNormalization" => Op::BatchNormalization(BatchNormalizationOptions {
                axis: p.u32("axis")?,
                epsilon: p.f64("epsilon")?,
                has_scale: p.bool("scale")?,
                has_bias: p.bool("bias")?,
            }),
            "instanceNormalization" => Op::InstanceNormalization(InstanceNormalizationOptions {
                epsilon: p.f64("epsilon")?,
                layout: InputLayout::from_name(&p.string("layout")?)?,
                has_scale: p.bool("scale")?,
                has_bias: p.bool("bias")?,
            }),
            other => return Err(crate::ops::unknown_method(other)),
        })
    }

    fn name(&self, op: &Op) -> &'static str {
        match op {
            Op::BatchNormalization(_) => "batchNormalization",
            Op::InstanceNormalization(_) => "instanceNormalization",
            _ => "",
        }
    }

    fn input_count(&self, op: &Op) -> RangeInclusive<usize> {
        match op {
            Op::BatchNormalization(o) => {
                let n = 3 + o.has_scale as usize + o.has_bias as usize;
                n..=n
            }
            Op::InstanceNormalization(o) => {
                let n = 1 + o.has_scale as usize + o.has_bias as usize;
                n..=n
            }
            _ => 1..=1,
        }
    }

    fn validate(&self, op: &Op, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
        match op {
            Op::BatchNormalization(o) => validate_batch_normalization(o, inputs),
            Op::InstanceNormalization(o) => validate_instance_normalization(o, inputs),
            _ => Err(not_this_family(op)),
        }
    }

    fn lower(&self, op: &Op, request: &LowerRequest) -> Result<Lowering> {
        match op {
            Op::BatchNormalization(o) => lower_batch_normalization(o, request),
            Op::InstanceNormalization(o) => lower_instance_normalization(o, request),
            _ => Err(not_this_family(op)),
        }
    }

    fn reference(&self, op: &Op, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
        match op {
            Op::BatchNormalization(o) => reference_batch_normalization(o, inputs, outputs),
            Op::InstanceNormalization(o) => reference_instance_normalization(o, inputs, outputs),
            _ => Err(not_this_family(op)),
        }
    }
}
