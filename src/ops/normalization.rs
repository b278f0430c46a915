//! layerNormalization (instance and batch normalization come with the remaining operators): a row
//! reduction of the mean and then of the variance (two passes, for accuracy) over the axes, then
//! `scale * (x - mean) / sqrt(variance + epsilon) + bias` element-wise.

use crate::error::{Error, Result};
use crate::operand::{strides, MAX_RANK};
use crate::operand::{DataType, OperandDescriptor};
use crate::ops::limits::{self, OpLimits, FLOATS};
use crate::ops::reduce::{check_axes, RowReduction, Stat};
use crate::ops::reference::{coords, linear, round_to, HostTensor};
use crate::ops::wgsl::{buffer_size, coords_fn, literal, BufRef, ElementwiseKernel, LowerRequest, Lowering};
use crate::ops::{not_this_family, MethodOptions, Op, OpFamily};
use std::ops::RangeInclusive;

/// `MLLayerNormalizationOptions`; `scale` then `bias` follow the input when present.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LayerNormalizationOptions {
    pub axes: Option<Vec<u32>>,
    pub epsilon: f64,
    pub has_scale: bool,
    pub has_bias: bool,
}

impl Default for LayerNormalizationOptions {
    fn default() -> Self {
        LayerNormalizationOptions { axes: None, epsilon: 1e-5, has_scale: false, has_bias: false }
    }
}

pub fn limits() -> Vec<OpLimits> {
    let rank = MAX_RANK as u32;
    vec![OpLimits {
        name: "layerNormalization",
        operands: vec![
            limits::tensor("input", FLOATS, 0, rank),
            limits::tensor("scale", FLOATS, 0, rank),
            limits::tensor("bias", FLOATS, 0, rank),
            limits::tensor("output", FLOATS, 0, rank),
        ],
    }]
}

/// The axes, defaulting to all but the first (none for rank 0 and 1).
fn axes_or_default(o: &LayerNormalizationOptions, rank: usize) -> Vec<usize> {
    match &o.axes {
        Some(a) => a.iter().map(|&x| x as usize).collect(),
        None => (1..rank.max(1)).collect(),
    }
}

pub fn validate_layer_normalization(
    o: &LayerNormalizationOptions,
    inputs: &[&OperandDescriptor],
) -> Result<Vec<OperandDescriptor>> {
    let l = limits::of("layerNormalization")?;
    let input = inputs[0];
    limits::check(&l.operands[0], input)?;
    if let Some(axes) = &o.axes {
        check_axes("layerNormalization", axes, input.rank())?;
    }
    let axes = axes_or_default(o, input.rank());
    let mut optional = Vec::new();
    if o.has_scale {
        optional.push(("scale", inputs[1]));
    }
    if o.has_bias {
        optional.push(("bias", inputs[1 + o.has_scale as usize]));
    }
    for (name, d) in &optional {
        if d.data_type != input.data_type {
            return Err(Error::Type(format!(
                "layerNormalization: {name} is {} but input is {}: the data types must match",
                d.data_type, input.data_type
            )));
        }
        if d.rank() != axes.len() {
            return Err(Error::Type(format!(
                "layerNormalization: {name} has rank {} but there are {} axes",
                d.rank(),
                axes.len()
            )));
        }
        for (index, &axis) in axes.iter().enumerate() {
            if d.shape[index] != input.shape[axis] {
                return Err(Error::Type(format!(
                    "layerNormalization: {name} shape {:?} differs from the input's dimensions {:?} along axes {axes:?}",
                    d.shape, input.shape
                )));
            }
        }
    }
    Ok(vec![input.clone()])
}

pub fn lower_layer_normalization(o: &LayerNormalizationOptions, request: &LowerRequest) -> Result<Lowering> {
    let (input, out) = (request.inputs[0], request.outputs[0]);
    let rank = input.rank();
    let axes = axes_or_default(o, rank);
    let mut sorted = axes.clone();
    sorted.sort_unstable();
    let reduction = RowReduction {
        input,
        axes: &sorted,
        first: Stat { init: "0".into(), map: "x".into(), combine: "a + b".into(), finish: "acc / count".into() },
        second: Some(Stat {
            init: "0".into(),
            map: "(x - s1) * (x - s1)".into(),
            combine: "a + b".into(),
            finish: "acc / count".into(),
        }),
        out_type: DataType::Float32,
        target: BufRef::Scratch(0),
        store: "        out[row * 2u] = s1;\n        out[row * 2u + 1u] = s2;".into(),
    };
    let (rows, _) = reduction.rows_and_length();
    let stats = OperandDescriptor::new(DataType::Float32, vec![rows as u32 * 2]);
    // The row of an element is its index over the kept axes; scale and bias are indexed by the
    // coordinates along `axes`, in the order given.
    let kept: Vec<usize> = (0..rank).filter(|a| !sorted.contains(a)).collect();
    let kept_shape: Vec<u32> = kept.iter().map(|&a| input.shape[a]).collect();
    let kept_strides = strides(&kept_shape);
    let term = |(k, &a): (usize, &usize), st: &[u64]| format!("c[{a}] * {}u", st[k]);
    let sum = |terms: Vec<String>| if terms.is_empty() { "0u".to_string() } else { terms.join(" + ") };
    let row = sum(kept.iter().enumerate().map(|x| term(x, &kept_strides)).collect());
    let param_shape: Vec<u32> = axes.iter().map(|&a| input.shape[a]).collect();
    let param_strides = strides(&param_shape);
    let param = sum(axes.iter().enumerate().map(|x| term(x, &param_strides)).collect());
    let epsilon = literal(round_to(o.epsilon, input.data_type), "f32");
    let mut e = format!("(load_input(i) - mean) / sqrt(variance + {epsilon})");
    let mut inputs = vec![("input", input), ("stats", &stats)];
    let mut reads = vec![BufRef::Input(0), BufRef::Scratch(0)];
    if o.has_scale {
        e = format!("load_scale(p) * ({e})");
        inputs.push(("scale", request.inputs[1]));
        reads.push(BufRef::Input(1));
    }
    if o.has_bias {
        e = format!("{e} + load_bias(p)");
        let index = 1 + o.has_scale as usize;
        inputs.push(("bias", request.inputs[index]));
        reads.push(BufRef::Input(index));
    }
    let body = format!(
        "    let c = coords_in(i);\n    let row = {row};\n    let p = {param};\n    let mean = load_stats(row * 2u);\n    let variance = load_stats(row * 2u + 1u);\n    return {e};"
    );
    let mut apply = ElementwiseKernel { inputs, output: out, helpers: coords_fn("in", &input.shape), body }.build()?;
    apply.reads = reads;
    Ok(Lowering::Kernels { scratch: vec![buffer_size(&stats)], launches: vec![reduction.build()?, apply] })
}

/// The spec's emulation: mean and variance over the axes, then scale and bias.
pub fn reference_layer_normalization(
    o: &LayerNormalizationOptions,
    inputs: &[HostTensor],
    outputs: &[OperandDescriptor],
) -> Result<Vec<HostTensor>> {
    let input = &inputs[0];
    let out = &outputs[0];
    let shape = input.shape();
    let axes = axes_or_default(o, shape.len());
    let kept: Vec<usize> = (0..shape.len()).filter(|a| !axes.contains(a)).collect();
    let kept_shape: Vec<u32> = kept.iter().map(|&a| shape[a]).collect();
    let rows = kept_shape.iter().map(|&d| d as usize).product::<usize>();
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); rows];
    for i in 0..input.data.len() {
        let c = coords(i, shape);
        let k: Vec<usize> = kept.iter().map(|&a| c[a]).collect();
        members[linear(&k, &kept_shape)].push(i);
    }
    let epsilon = round_to(o.epsilon, out.data_type);
    let param_shape: Vec<u32> = axes.iter().map(|&a| shape[a]).collect();
    let scale = o.has_scale.then(|| &inputs[1]);
    let bias = o.has_bias.then(|| &inputs[1 + o.has_scale as usize]);
    let mut data = vec![0.0; input.data.len()];
    for group in &members {
        let n = group.len() as f64;
        let mean = group.iter().map(|&i| input.data[i]).sum::<f64>() / n;
        let variance = group.iter().map(|&i| (input.data[i] - mean).powi(2)).sum::<f64>() / n;
        for &i in group {
            let c = coords(i, shape);
            let p = linear(&axes.iter().map(|&a| c[a]).collect::<Vec<_>>(), &param_shape);
            let mut y = (input.data[i] - mean) / (variance + epsilon).sqrt();
            if let Some(s) = scale {
                y *= s.data[p];
            }
            if let Some(b) = bias {
                y += b.data[p];
            }
            data[i] = round_to(y, out.data_type);
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
            "layerNormalization" => Op::LayerNormalization(LayerNormalizationOptions {
                axes: p.opt_u32s("axes")?,
                epsilon: p.f64("epsilon")?,
                has_scale: p.bool("scale")?,
                has_bias: p.bool("bias")?,
            }),
            other => return Err(crate::ops::unknown_method(other)),
        })
    }

    fn name(&self, op: &Op) -> &'static str {
        match op {
            Op::LayerNormalization(_) => "layerNormalization",
            _ => "",
        }
    }

    fn input_count(&self, op: &Op) -> RangeInclusive<usize> {
        match op {
            Op::LayerNormalization(o) => {
                let n = 1 + o.has_scale as usize + o.has_bias as usize;
                n..=n
            }
            _ => 1..=1,
        }
    }

    fn validate(&self, op: &Op, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
        match op {
            Op::LayerNormalization(o) => validate_layer_normalization(o, inputs),
            _ => Err(not_this_family(op)),
        }
    }

    fn lower(&self, op: &Op, request: &LowerRequest) -> Result<Lowering> {
        match op {
            Op::LayerNormalization(o) => lower_layer_normalization(o, request),
            _ => Err(not_this_family(op)),
        }
    }

    fn reference(&self, op: &Op, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
        match op {
            Op::LayerNormalization(o) => reference_layer_normalization(o, inputs, outputs),
            _ => Err(not_this_family(op)),
        }
    }
}
