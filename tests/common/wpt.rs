//! A native runner for the WPT-derived conformance cases in `tests/conformance/wpt`: builds each
//! case's graph through the core builder, runs it on a backend (WebGPU, or the float64 reference
//! backend) and compares with WPT's tolerances.
//! Cases whose operand types or ranks `opSupportLimits()` does not list are skipped, as WPT and
//! the browser runner do; anything else that does not pass, an operator this runner cannot map
//! included, is a failure.

use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashMap};
use webnn_wgpu::backend::reference::ReferenceGraph;
use webnn_wgpu::graph::{DataType, GraphBuilder, Number, Operand, OperandDescriptor};
use webnn_wgpu::ops::{self, HostTensor, Op};
use webnn_wgpu::backend::cpu::CpuContext;
use webnn_wgpu::backend::webgpu::Context;
use webnn_wgpu::backend::{ContextOptions, TensorDescriptor};
use webnn_wgpu::{Error, Result};

use super::{block_on, ulp_distance};

/// The outcome of one case.
pub enum Outcome {
    Pass,
    Skip(String),
    Fail(String),
}

/// A number of the JSON data: numbers, or strings for infinities, NaN and bigints ("100n").
pub fn number(v: &Value) -> f64 {
    match v {
        Value::Number(n) => n.as_f64().unwrap_or(f64::NAN),
        Value::String(s) => match s.as_str() {
            "Infinity" => f64::INFINITY,
            "-Infinity" => f64::NEG_INFINITY,
            "NaN" => f64::NAN,
            s => s.trim_end_matches('n').parse::<f64>().unwrap_or(f64::NAN),
        },
        Value::Bool(b) => *b as u8 as f64,
        _ => f64::NAN,
    }
}

/// An integer of the JSON data exactly (a number, or a string like "9007199254740995n" or
/// "102"), for int64/uint64 values beyond 2^53; other values through [`number`].
pub fn integer(v: &Value) -> i128 {
    match v {
        Value::Number(n) => n.as_i64().map(|i| i as i128).or(n.as_u64().map(|u| u as i128)),
        Value::String(s) => s.trim_end_matches('n').parse::<i128>().ok(),
        _ => None,
    }
    .unwrap_or_else(|| number(v) as i128)
}

/// An `MLNumber` option: a bigint string ("100n") stays exact.
pub fn ml_number(v: &Value) -> Number {
    match v {
        Value::String(s) if s.ends_with('n') => Number::BigInt(integer(v)),
        other => Number::Double(number(other)),
    }
}

/// The values of a tensor; a single number for a larger shape fills it (WPT's large-input cases).
fn numbers(v: &Value, count: u64) -> Vec<f64> {
    match v {
        Value::Array(a) => a.iter().map(number).collect(),
        other => vec![number(other); count.max(1) as usize],
    }
}

/// A tensor of the JSON data, int64/uint64 values exact.
fn host_tensor(d: &OperandDescriptor, v: &Value) -> Result<HostTensor> {
    if !d.data_type.is_wide() {
        return HostTensor::new(d.clone(), numbers(v, d.element_count()));
    }
    let values = match v {
        Value::Array(a) => a.iter().map(integer).collect(),
        other => vec![integer(other); d.element_count().max(1) as usize],
    };
    HostTensor::from_exact(d.clone(), values)
}

fn descriptor(v: &Value) -> Result<OperandDescriptor> {
    let data_type = DataType::from_name(v["dataType"].as_str().unwrap_or(""))?;
    let shape: Vec<u32> = v["shape"]
        .as_array()
        .map(|a| a.iter().map(|d| d.as_u64().unwrap_or(0) as u32).collect())
        .unwrap_or_default();
    Ok(OperandDescriptor::new(data_type, shape))
}

/// The arguments of one operator: positional names and the options dictionary.
pub struct Args<'a> {
    pub map: Map<String, Value>,
    pub operands: &'a HashMap<String, Operand>,
}

impl Args<'_> {
    pub fn operand(&self, key: &str) -> Result<Operand> {
        let id = self
            .map
            .get(key)
            .and_then(|v| v.as_str())
            .ok_or_else(|| Error::Type(format!("missing {key}")))?;
        self.operands
            .get(id)
            .copied()
            .ok_or_else(|| Error::Type(format!("unknown operand {id}")))
    }
    pub fn options(&self) -> Map<String, Value> {
        self.map
            .get("options")
            .and_then(|o| o.as_object())
            .cloned()
            .unwrap_or_default()
    }
    pub fn option_operand(&self, key: &str) -> Option<Operand> {
        let id = self.options().get(key)?.as_str()?.to_string();
        self.operands.get(&id).copied()
    }
    pub fn u32_list(v: Option<&Value>) -> Option<Vec<u32>> {
        v?.as_array().map(|a| {
            a.iter()
                .map(|d| d.as_u64().unwrap_or(u64::MAX).min(u32::MAX as u64) as u32)
                .collect()
        })
    }
    pub fn f64_option(&self, key: &str) -> Option<f64> {
        self.options().get(key).map(number)
    }
    pub fn number_option(&self, key: &str) -> Option<Number> {
        self.options().get(key).map(ml_number)
    }
    pub fn bool_option(&self, key: &str) -> Option<bool> {
        self.options().get(key)?.as_bool()
    }
}

/// Maps one JSON operator to the core operator and its operand inputs.
pub fn parse_operator(name: &str, a: &Args) -> Result<(Op, Vec<Operand>)> {
    use webnn_wgpu::ops::activation::Activation;
    use webnn_wgpu::ops::elementwise_binary::BinaryOp;
    use webnn_wgpu::ops::elementwise_unary::UnaryOp;
    use webnn_wgpu::ops::logical::LogicalOp;
    use webnn_wgpu::ops::reduce::{ReduceOp, ReduceOptions};
    let o = a.options();
    let binary = |op| Ok((op, vec![a.operand("a")?, a.operand("b")?]));
    let unary = |op| Ok((op, vec![a.operand("input")?]));
    if let Some(op) = BinaryOp::ALL.into_iter().find(|op| op.name() == name) {
        return binary(Op::Binary(op));
    }
    if let Some(op) = UnaryOp::ALL.into_iter().find(|op| op.name() == name) {
        return unary(Op::Unary(op));
    }
    if let Some(op) = LogicalOp::ALL.into_iter().find(|op| op.name() == name) {
        return if op.input_count() == 1 {
            Ok((Op::Logical(op), vec![a.operand("a").or_else(|_| a.operand("input"))?]))
        } else {
            binary(Op::Logical(op))
        };
    }
    let reduce = [
        ReduceOp::L1,
        ReduceOp::L2,
        ReduceOp::LogSum,
        ReduceOp::LogSumExp,
        ReduceOp::Max,
        ReduceOp::Mean,
        ReduceOp::Min,
        ReduceOp::Product,
        ReduceOp::Sum,
        ReduceOp::SumSquare,
    ];
    if let Some(op) = reduce.into_iter().find(|op| op.name() == name) {
        let options = ReduceOptions {
            axes: Args::u32_list(o.get("axes")),
            keep_dimensions: o
                .get("keepDimensions")
                .and_then(|v| v.as_bool())
                .unwrap_or(false),
        };
        return unary(Op::Reduce(op, options));
    }
    let input = || a.operand("input");
    match name {
        "relu" => unary(Op::Activation(Activation::Relu)),
        "sigmoid" => unary(Op::Activation(Activation::Sigmoid)),
        "tanh" => unary(Op::Activation(Activation::Tanh)),
        "gelu" => unary(Op::Activation(Activation::Gelu)),
        "leakyRelu" => unary(Op::Activation(Activation::LeakyRelu {
            alpha: a.f64_option("alpha").unwrap_or(0.01),
        })),
        "clamp" => unary(Op::Activation(Activation::Clamp {
            min_value: a.number_option("minValue"),
            max_value: a.number_option("maxValue"),
        })),
        "elu" => unary(Op::Activation(Activation::Elu {
            alpha: a.f64_option("alpha").unwrap_or(1.0),
        })),
        "hardSigmoid" => unary(Op::Activation(Activation::HardSigmoid {
            alpha: a.f64_option("alpha").unwrap_or(0.2),
            beta: a.f64_option("beta").unwrap_or(0.5),
        })),
        "hardSwish" => unary(Op::Activation(Activation::HardSwish)),
        "linear" => unary(Op::Activation(Activation::Linear {
            alpha: a.f64_option("alpha").unwrap_or(1.0),
            beta: a.f64_option("beta").unwrap_or(0.0),
        })),
        "softplus" => unary(Op::Activation(Activation::Softplus)),
        "softsign" => unary(Op::Activation(Activation::Softsign)),
        "prelu" => Ok((
            Op::Activation(Activation::Prelu),
            vec![input()?, a.operand("slope")?],
        )),
        "matmul" => binary(Op::Matmul),
        "gemm" => {
            let c = a.option_operand("c");
            let options = webnn_wgpu::ops::matmul::GemmOptions {
                alpha: a.f64_option("alpha").unwrap_or(1.0),
                beta: a.f64_option("beta").unwrap_or(1.0),
                a_transpose: a.bool_option("aTranspose").unwrap_or(false),
                b_transpose: a.bool_option("bTranspose").unwrap_or(false),
                has_c: c.is_some(),
            };
            let mut inputs = vec![a.operand("a")?, a.operand("b")?];
            inputs.extend(c);
            Ok((Op::Gemm(options), inputs))
        }
        "reshape" => Ok((
            Op::Reshape {
                new_shape: Args::u32_list(a.map.get("newShape")).unwrap_or_default(),
            },
            vec![input()?],
        )),
        "expand" => Ok((
            Op::Expand {
                new_shape: Args::u32_list(a.map.get("newShape")).unwrap_or_default(),
            },
            vec![input()?],
        )),
        "transpose" => Ok((
            Op::Transpose {
                permutation: Args::u32_list(o.get("permutation")),
            },
            vec![input()?],
        )),
        "concat" => {
            let ids = a
                .map
                .get("inputs")
                .and_then(|v| v.as_array())
                .cloned()
                .unwrap_or_default();
            let inputs = ids
                .iter()
                .map(|id| {
                    a.operands
                        .get(id.as_str().unwrap_or(""))
                        .copied()
                        .ok_or_else(|| Error::Type("unknown operand".into()))
                })
                .collect::<Result<Vec<_>>>()?;
            Ok((
                Op::Concat {
                    axis: a.map.get("axis").and_then(|v| v.as_u64()).unwrap_or(0) as u32,
                },
                inputs,
            ))
        }
        "split" => {
            let splits = match a.map.get("splits") {
                Some(Value::Array(_)) => webnn_wgpu::ops::concat::Splits::Sizes(
                    Args::u32_list(a.map.get("splits")).unwrap_or_default(),
                ),
                Some(v) => webnn_wgpu::ops::concat::Splits::Count(v.as_u64().unwrap_or(0) as u32),
                None => return Err(Error::Type("missing splits".into())),
            };
            let axis = o.get("axis").and_then(|v| v.as_u64()).unwrap_or(0) as u32;
            Ok((Op::Split { splits, axis }, vec![input()?]))
        }
        "slice" => Ok((
            Op::Slice(webnn_wgpu::ops::slice::SliceOptions {
                starts: Args::u32_list(a.map.get("starts")).unwrap_or_default(),
                sizes: Args::u32_list(a.map.get("sizes")).unwrap_or_default(),
                strides: Args::u32_list(o.get("strides")),
            }),
            vec![input()?],
        )),
        "gather" => Ok((
            Op::Gather {
                axis: o.get("axis").and_then(|v| v.as_u64()).unwrap_or(0) as u32,
            },
            vec![input()?, a.operand("indices")?],
        )),
        "softmax" => Ok((
            Op::Softmax {
                axis: a.map.get("axis").and_then(|v| v.as_u64()).unwrap_or(0) as u32,
            },
            vec![input()?],
        )),
        "layerNormalization" => {
            let scale = a.option_operand("scale");
            let bias = a.option_operand("bias");
            let options = webnn_wgpu::ops::normalization::LayerNormalizationOptions {
                axes: Args::u32_list(o.get("axes")),
                epsilon: a.f64_option("epsilon").unwrap_or(1e-5),
                has_scale: scale.is_some(),
                has_bias: bias.is_some(),
            };
            let mut inputs = vec![input()?];
            inputs.extend(scale);
            inputs.extend(bias);
            Ok((Op::LayerNormalization(options), inputs))
        }
        "cast" => {
            let t = a.map.get("type").and_then(|v| v.as_str()).unwrap_or("");
            Ok((
                Op::Cast {
                    data_type: DataType::from_name(t)?,
                },
                vec![input()?],
            ))
        }
        "where" => Ok((
            Op::Where,
            vec![
                a.operand("condition")?,
                a.operand("trueValue")?,
                a.operand("falseValue")?,
            ],
        )),
        "conv2d" | "convTranspose2d" => {
            use webnn_wgpu::ops::conv2d::*;
            let bias = a.option_operand("bias");
            let groups = o.get("groups").and_then(|v| v.as_u64()).unwrap_or(1) as u32;
            let layout = o.get("inputLayout").and_then(|v| v.as_str()).unwrap_or("nchw");
            let input_layout = InputLayout::from_name(layout)?;
            let filter_layout = o.get("filterLayout").and_then(|v| v.as_str());
            let op = if name == "conv2d" {
                Op::Conv2d(Conv2dOptions {
                    padding: Args::u32_list(o.get("padding")),
                    strides: Args::u32_list(o.get("strides")),
                    dilations: Args::u32_list(o.get("dilations")),
                    groups,
                    input_layout,
                    filter_layout: Conv2dFilterLayout::from_name(filter_layout.unwrap_or("oihw"))?,
                    has_bias: bias.is_some(),
                })
            } else {
                Op::ConvTranspose2d(ConvTranspose2dOptions {
                    padding: Args::u32_list(o.get("padding")),
                    strides: Args::u32_list(o.get("strides")),
                    dilations: Args::u32_list(o.get("dilations")),
                    output_padding: Args::u32_list(o.get("outputPadding")),
                    output_sizes: Args::u32_list(o.get("outputSizes")),
                    groups,
                    input_layout,
                    filter_layout: ConvTranspose2dFilterLayout::from_name(
                        filter_layout.unwrap_or("iohw"),
                    )?,
                    has_bias: bias.is_some(),
                })
            };
            let mut inputs = vec![input()?, a.operand("filter")?];
            inputs.extend(bias);
            Ok((op, inputs))
        }
        "averagePool2d" | "l2Pool2d" | "maxPool2d" => {
            use webnn_wgpu::ops::pool2d::*;
            let kind = PoolKind::ALL
                .into_iter()
                .find(|k| k.name() == name)
                .unwrap_or(PoolKind::Max);
            let layout = o.get("layout").and_then(|v| v.as_str()).unwrap_or("nchw");
            let rounding = o.get("outputShapeRounding").and_then(|v| v.as_str());
            let options = Pool2dOptions {
                window_dimensions: Args::u32_list(o.get("windowDimensions")),
                padding: Args::u32_list(o.get("padding")),
                strides: Args::u32_list(o.get("strides")),
                dilations: Args::u32_list(o.get("dilations")),
                layout: webnn_wgpu::ops::conv2d::InputLayout::from_name(layout)?,
                output_shape_rounding: RoundingType::from_name(rounding.unwrap_or("floor"))?,
                output_sizes: Args::u32_list(o.get("outputSizes")),
            };
            Ok((Op::Pool2d(kind, options), vec![input()?]))
        }
        "batchNormalization" => {
            let scale = a.option_operand("scale");
            let bias = a.option_operand("bias");
            let options = webnn_wgpu::ops::batch_normalization::BatchNormalizationOptions {
                axis: o.get("axis").and_then(|v| v.as_u64()).unwrap_or(1) as u32,
                epsilon: a.f64_option("epsilon").unwrap_or(1e-5),
                has_scale: scale.is_some(),
                has_bias: bias.is_some(),
            };
            let mut inputs = vec![input()?, a.operand("mean")?, a.operand("variance")?];
            inputs.extend(scale);
            inputs.extend(bias);
            Ok((Op::BatchNormalization(options), inputs))
        }
        "instanceNormalization" => {
            let scale = a.option_operand("scale");
            let bias = a.option_operand("bias");
            let layout = o.get("layout").and_then(|v| v.as_str()).unwrap_or("nchw");
            let options = webnn_wgpu::ops::batch_normalization::InstanceNormalizationOptions {
                epsilon: a.f64_option("epsilon").unwrap_or(1e-5),
                layout: webnn_wgpu::ops::conv2d::InputLayout::from_name(layout)?,
                has_scale: scale.is_some(),
                has_bias: bias.is_some(),
            };
            let mut inputs = vec![input()?];
            inputs.extend(scale);
            inputs.extend(bias);
            Ok((Op::InstanceNormalization(options), inputs))
        }
        other => Err(Error::NotSupported(format!(
            "operator {other} is not implemented"
        ))),
    }
}

/// WPT's tolerance for one operator: ULPs, or an absolute error for some float ops.
#[derive(Clone, Copy, Debug)]
pub enum Tolerance {
    Ulp(u64),
    Abs(f64),
}

pub fn tolerance(name: &str, op: &Op, inputs: &[&OperandDescriptor]) -> Tolerance {
    let t = inputs
        .first()
        .map(|d| d.data_type)
        .unwrap_or(DataType::Float32);
    let abs = if t == DataType::Float16 {
        1.0 / 512.0
    } else {
        1.0 / 1024.0
    };
    let reduced = |axes: &Option<Vec<u32>>| -> u64 {
        let shape = &inputs[0].shape;
        match axes {
            None => shape.iter().map(|&d| d as u64).product(),
            Some(ax) => ax
                .iter()
                .map(|&a| shape.get(a as usize).copied().unwrap_or(1) as u64)
                .product(),
        }
    };
    match (name, op) {
        ("add" | "sub" | "mul" | "div" | "leakyRelu" | "prelu", _) => Tolerance::Ulp(1),
        ("pow", _) => Tolerance::Ulp(2),
        ("matmul", _) => Tolerance::Ulp(2 * inputs[0].shape.last().copied().unwrap_or(1) as u64),
        ("gemm", Op::Gemm(g)) => {
            let k = if g.a_transpose {
                inputs[0].shape[0]
            } else {
                inputs[0].shape[1]
            } as u64;
            Tolerance::Ulp(
                2 * k + (g.alpha != 1.0) as u64 + g.has_c as u64 + (g.beta != 1.0) as u64,
            )
        }
        ("softmax", Op::Softmax { axis }) => {
            Tolerance::Ulp(3 * inputs[0].shape.get(*axis as usize).copied().unwrap_or(1) as u64 + 3)
        }
        (_, Op::Reduce(kind, o)) => {
            use webnn_wgpu::ops::reduce::ReduceOp::*;
            let n = reduced(&o.axes);
            Tolerance::Ulp(match kind {
                L1 | Sum | Product => n,
                L2 => 2 * n + 2,
                Mean => n + 2,
                LogSum => n + 18,
                LogSumExp => 2 * n + 18,
                SumSquare => 2 * n,
                Max | Min => 0,
            })
        }
        ("sigmoid", _) => Tolerance::Ulp(if t == DataType::Float16 { 10 } else { 34 }),
        ("tanh", _) => Tolerance::Ulp(16),
        ("elu" | "gelu" | "softplus", _) => Tolerance::Ulp(18),
        ("hardSigmoid" | "linear", _) => Tolerance::Ulp(2),
        ("hardSwish", _) => Tolerance::Ulp(4),
        ("softsign", _) => Tolerance::Ulp(3),
        ("batchNormalization", _) => Tolerance::Ulp(6),
        ("gru" | "gruCell" | "lstm", _) => Tolerance::Ulp(3),
        ("lstmCell", _) => Tolerance::Ulp(1),
        // WPT: twice the number of products summed for each output element.
        ("conv2d", Op::Conv2d(c)) => conv_tolerance(webnn_wgpu::ops::conv2d::conv2d_geometry(c, inputs)),
        ("convTranspose2d", Op::ConvTranspose2d(c)) => {
            conv_tolerance(webnn_wgpu::ops::conv2d::conv_transpose2d_geometry(c, inputs))
        }
        // WPT: the window size (twice for l2Pool2d) plus 2.
        ("averagePool2d" | "l2Pool2d", Op::Pool2d(kind, p)) => {
            let window = webnn_wgpu::ops::pool2d::geometry(*kind, p, inputs[0])
                .map_or(0, |g| g.window[0] as u64 * g.window[1] as u64);
            Tolerance::Ulp(if name == "l2Pool2d" { 2 * window } else { window } + 2)
        }
        (
            "sin"
            | "cos"
            | "tan"
            | "erf"
            | "log"
            | "layerNormalization"
            | "instanceNormalization",
            _,
        ) => Tolerance::Abs(abs),
        ("reciprocal", _) => Tolerance::Ulp(2),
        ("exp", _) => Tolerance::Ulp(if t == DataType::Float16 { 1 } else { 32 }),
        ("sqrt", _) => Tolerance::Ulp(1),
        _ => Tolerance::Ulp(0),
    }
}

fn conv_tolerance(geometry: Result<webnn_wgpu::ops::conv2d::ConvGeometry>) -> Tolerance {
    Tolerance::Ulp(geometry.map_or(0, |g| {
        2 * g.filter_size[0] as u64 * g.filter_size[1] as u64 * (g.input_channels / g.groups) as u64
    }))
}

/// The reason a case must be skipped, or `None`: the browser runner's rule
/// (`unsupportedTypes` in `tests/browser/wpt_runner.js`) on the same table that
/// `opSupportLimits()` is made from. Each operand argument (`operand_args`: the argument's or
/// option's key, with one or several operands) is checked against the limits of the same name,
/// or else `input`: data type and rank; each expected output's data type against `output`.
/// An operator without limits is an error, not a skip.
fn unsupported_types(
    name: &str,
    operand_args: &[(String, Vec<OperandDescriptor>)],
    outputs: &[OperandDescriptor],
) -> Result<Option<String>> {
    let limits = ops::limits::of(name)
        .map_err(|_| Error::NotSupported(format!("opSupportLimits() has no {name}")))?;
    let by_name = |key: &str| limits.operands.iter().find(|l| l.name == key);
    for (key, descriptors) in operand_args {
        let Some(l) = by_name(key).or_else(|| by_name("input")) else {
            continue;
        };
        for d in descriptors {
            if !l.data_types.contains(&d.data_type) {
                return Ok(Some(format!("{name}.{key}: {} is not in opSupportLimits()", d.data_type)));
            }
            let rank = d.rank() as u32;
            if rank < l.rank_min || rank > l.rank_max {
                return Ok(Some(format!(
                    "{name}.{key}: rank {rank} is outside opSupportLimits() {}..{}",
                    l.rank_min, l.rank_max
                )));
            }
        }
    }
    if let Some(l) = by_name("output") {
        if let Some(d) = outputs.iter().find(|d| !l.data_types.contains(&d.data_type)) {
            return Ok(Some(format!("{name}.output: {} is not in opSupportLimits()", d.data_type)));
        }
    }
    Ok(None)
}

/// The operand arguments of one operator as the browser runner sees them: a value naming an
/// operand, or a list of only such values, under its argument's key; options naming operands
/// under the option's key.
fn operand_args(
    map: &Map<String, Value>,
    operands: &HashMap<String, Operand>,
    builder: &GraphBuilder,
) -> Result<Vec<(String, Vec<OperandDescriptor>)>> {
    let lookup = |v: &Value| v.as_str().and_then(|id| operands.get(id)).copied();
    let mut found: Vec<(String, Vec<Operand>)> = Vec::new();
    for (key, v) in map {
        match v {
            Value::Object(options) if key == "options" => {
                for (k, o) in options {
                    found.extend(lookup(o).map(|o| (k.clone(), vec![o])));
                }
            }
            Value::Array(list) => {
                let resolved: Option<Vec<Operand>> = list.iter().map(lookup).collect();
                found.extend(resolved.filter(|r| !r.is_empty()).map(|r| (key.clone(), r)));
            }
            other => found.extend(lookup(other).map(|o| (key.clone(), vec![o]))),
        }
    }
    found
        .into_iter()
        .map(|(k, list)| Ok((k, list.iter().map(|&o| builder.descriptor(o).cloned()).collect::<Result<_>>()?)))
        .collect()
}

/// Runs one case. Only the skip rule skips: an error, whatever it says, is a failure.
/// Which backend runs the cases' graphs (the builder and its validation are the same for both).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Backend {
    WebGpu,
    Cpu,
    Reference,
    /// The WebGPU and CPU backends with every graph saved to the graph cache's record and
    /// loaded back (on the same context) before it runs.
    WebGpuSaved,
    CpuSaved,
}

/// A graph through the graph cache: saved, then loaded from the record and constant bytes.
#[allow(async_fn_in_trait)]
pub trait Reload: webnn_wgpu::backend::Backend {
    async fn reload(&self, graph: &Self::Graph) -> Result<Self::Graph>;
}

impl Reload for Context {
    async fn reload(&self, graph: &webnn_wgpu::backend::webgpu::Graph) -> Result<webnn_wgpu::backend::webgpu::Graph> {
        let (record, constants) = graph.save()?;
        let mut sources = Vec::new();
        for (i, constant) in constants.iter().enumerate() {
            let bytes = graph.saved_constant_bytes(constant).await?;
            sources.push((i.to_string(), std::rc::Rc::new(webnn_wgpu::weights::BytesSource::new("constant", bytes))));
        }
        webnn_wgpu::backend::webgpu::Graph::load(self, &record, sources).await
    }
}

impl Reload for CpuContext {
    async fn reload(&self, graph: &webnn_wgpu::backend::cpu::CpuGraph) -> Result<webnn_wgpu::backend::cpu::CpuGraph> {
        use webnn_wgpu::backend::BackendGraph;
        let (record, constants) = graph.save()?;
        let mut sources = Vec::new();
        for (i, constant) in constants.into_iter().enumerate() {
            let bytes = BackendGraph::saved_constant_bytes(graph, constant).await?;
            sources.push((i.to_string(), std::rc::Rc::new(webnn_wgpu::weights::BytesSource::new("constant", bytes))));
        }
        let graph = webnn_wgpu::backend::cpu::CpuGraph::load(self, &record, sources)?;
        graph.swap_in().await?;
        Ok(graph)
    }
}

pub fn run_case(ctx: &Context, case: &Value, backend: Backend) -> Outcome {
    block_on(run_case_inner(ctx, case, backend)).unwrap_or_else(|e| Outcome::Fail(e.to_string()))
}

async fn run_case_inner(ctx: &Context, case: &Value, backend: Backend) -> Result<Outcome> {
    let graph = &case["graph"];
    let cpu = CpuContext::new(ContextOptions::default());
    let mut builder = match backend {
        Backend::Cpu | Backend::CpuSaved => GraphBuilder::new(&cpu)?,
        Backend::WebGpu | Backend::WebGpuSaved | Backend::Reference => GraphBuilder::new(ctx)?,
    };
    let mut operands: HashMap<String, Operand> = HashMap::new();
    let mut host_feeds: BTreeMap<String, HostTensor> = BTreeMap::new();
    let empty = Map::new();
    let inputs = graph["inputs"].as_object().unwrap_or(&empty);
    // As the browser runner: the graph's inputs against `opSupportLimits()`'s `input` and
    // `constant` (every data type), and the tensors the case creates against its
    // `maxTensorByteLength`.
    let max_bytes = match backend {
        Backend::Cpu | Backend::CpuSaved => cpu.max_tensor_byte_length(),
        Backend::WebGpu | Backend::WebGpuSaved | Backend::Reference => ctx.max_tensor_byte_length(),
    };
    for (id, input) in inputs {
        let d = descriptor(&input["descriptor"])?;
        if !ops::limits::ALL_TYPES.contains(&d.data_type) {
            return Ok(Outcome::Skip(format!("{id}: {} is not in opSupportLimits()", d.data_type)));
        }
    }
    let expected_values = graph["expectedOutputs"].as_object().unwrap_or(&empty);
    for (id, v) in inputs.iter().chain(expected_values) {
        let d = descriptor(&v["descriptor"])?;
        if d.byte_length() > max_bytes {
            return Ok(Outcome::Skip(format!(
                "{id}: {} bytes, over opSupportLimits().maxTensorByteLength {max_bytes}",
                d.byte_length()
            )));
        }
    }
    for (id, input) in inputs {
        let d = descriptor(&input["descriptor"])?;
        let value = host_tensor(&d, &input["data"])?;
        let bytes = value.to_bytes();
        let operand = if input["constant"].as_bool().unwrap_or(false) {
            builder.constant(d.clone(), &bytes)?
        } else {
            host_feeds.insert(id.clone(), HostTensor::from_bytes(d.clone(), &bytes)?);
            builder.input(id, d)?
        };
        operands.insert(id.clone(), operand);
    }
    let mut total_ulp = 0u64;
    let mut abs_tolerance = 0.0f64;
    for operator in graph["operators"].as_array().cloned().unwrap_or_default() {
        let name = operator["name"].as_str().unwrap_or("");
        let mut map = Map::new();
        for arg in operator["arguments"]
            .as_array()
            .cloned()
            .unwrap_or_default()
        {
            if let Some(obj) = arg.as_object() {
                map.extend(obj.clone());
            }
        }
        let ids: Vec<String> = match &operator["outputs"] {
            Value::Array(a) => a
                .iter()
                .map(|v| v.as_str().unwrap_or("").to_string())
                .collect(),
            v => vec![v.as_str().unwrap_or("").to_string()],
        };
        let expected_outputs = ids
            .iter()
            .filter_map(|id| graph["expectedOutputs"].get(id))
            .map(|e| descriptor(&e["descriptor"]))
            .collect::<Result<Vec<_>>>()?;
        if let Some(why) = unsupported_types(name, &operand_args(&map, &operands, &builder)?, &expected_outputs)? {
            return Ok(Outcome::Skip(why));
        }
        let args = Args {
            map,
            operands: &operands,
        };
        // An operator this runner cannot map is an error (a failure), never a skip.
        let (op, inputs) = parse_operator(name, &args)?;
        let descs: Vec<OperandDescriptor> = inputs
            .iter()
            .map(|&o| builder.descriptor(o).cloned())
            .collect::<Result<_>>()?;
        let desc_refs: Vec<&OperandDescriptor> = descs.iter().collect();
        match tolerance(name, &op, &desc_refs) {
            Tolerance::Ulp(u) => total_ulp += u,
            Tolerance::Abs(a) => abs_tolerance += a,
        }
        let outputs = builder.operator(op, &inputs, "")?;
        for (id, o) in ids.into_iter().zip(outputs) {
            operands.insert(id, o);
        }
    }
    let expected = graph["expectedOutputs"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let mut named = Vec::new();
    let mut wanted = Vec::new();
    for (id, e) in &expected {
        let operand = *operands
            .get(id)
            .ok_or_else(|| Error::Type(format!("no operand {id}")))?;
        named.push((id.clone(), operand));
        let d = descriptor(&e["descriptor"])?;
        let want = host_tensor(&d, &e["data"])?;
        wanted.push((id.clone(), d, want));
    }
    let got = match backend {
        Backend::WebGpu => run_on(ctx, builder, &named, &host_feeds, &wanted, false).await?,
        Backend::Cpu => run_on(&cpu, builder, &named, &host_feeds, &wanted, false).await?,
        Backend::WebGpuSaved => run_on(ctx, builder, &named, &host_feeds, &wanted, true).await?,
        Backend::CpuSaved => run_on(&cpu, builder, &named, &host_feeds, &wanted, true).await?,
        Backend::Reference => {
            let graph = ReferenceGraph::compile(builder.prepare_build(&named)?)?;
            graph.dispatch(&host_feeds)?
        }
    };
    for (id, d, want) in &wanted {
        let got = got.get(id).ok_or_else(|| Error::Type(format!("no output {id}")))?;
        if &got.descriptor != d {
            return Ok(Outcome::Fail(format!("{id}: got {}, expected {d}", got.descriptor)));
        }
        if d.data_type.is_wide() {
            if let Some(i) = (0..got.exact.len()).find(|&i| got.exact[i] != want.exact[i]) {
                return Ok(Outcome::Fail(format!("{id}[{i}]: got {}, expected {}", got.exact[i], want.exact[i])));
            }
            continue;
        }
        for (i, (&g, &w)) in got.data.iter().zip(&want.data).enumerate() {
            let w = ops::reference::round_to(w, d.data_type);
            let ok = if d.data_type.is_float() {
                (g.is_nan() && w.is_nan())
                    || ulp_distance(g, w, d.data_type) <= total_ulp
                    || (abs_tolerance > 0.0 && (g - w).abs() <= abs_tolerance)
            } else {
                g == w
            };
            if !ok {
                return Ok(Outcome::Fail(format!("{id}[{i}]: got {g}, expected {w} (tolerance {total_ulp} ULP / {abs_tolerance})")));
            }
        }
    }
    Ok(Outcome::Pass)
}

/// Builds the graph on `backend` (through the graph cache when `saved`), writes the inputs to
/// tensors, dispatches it and reads every output back.
async fn run_on<B: Reload>(
    backend: &B,
    mut builder: GraphBuilder,
    named: &[(String, Operand)],
    feeds: &BTreeMap<String, HostTensor>,
    wanted: &[(String, OperandDescriptor, HostTensor)],
    saved: bool,
) -> Result<BTreeMap<String, HostTensor>> {
    let mut graph = backend.compile(builder.prepare_build(named)?).await?;
    if saved {
        graph = backend.reload(&graph).await?;
    }
    let mut inputs = Vec::new();
    for (id, value) in feeds {
        let t = backend.create_tensor(TensorDescriptor { operand: value.descriptor.clone(), readable: false, writable: true }).await?;
        backend.write_tensor(&t, &value.to_bytes())?;
        inputs.push((id.clone(), t));
    }
    let mut outs = Vec::new();
    for (id, d, _) in wanted {
        outs.push((id.clone(), backend.create_tensor(TensorDescriptor { operand: d.clone(), readable: true, writable: false }).await?));
    }
    backend.dispatch(&graph, &inputs, &outs)?;
    let mut got = BTreeMap::new();
    for ((id, t), (_, d, _)) in outs.iter().zip(wanted) {
        got.insert(id.clone(), HostTensor::from_bytes(d.clone(), &backend.read_tensor(t).await?)?);
    }
    Ok(got)
}

/// Runs every case of one JSON file; returns (passed, skipped, failures).
pub fn run_file(ctx: &Context, file: &str, backend: Backend) -> (usize, usize, Vec<String>) {
    let path = format!(
        "{}/tests/conformance/wpt/{file}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let json: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    let (mut passed, mut skipped, mut failures) = (0, 0, Vec::new());
    for case in json["tests"].as_array().cloned().unwrap_or_default() {
        let name = case["name"].as_str().unwrap_or("?").to_string();
        match run_case(ctx, &case, backend) {
            Outcome::Pass => passed += 1,
            Outcome::Skip(_) => skipped += 1,
            Outcome::Fail(why) => failures.push(format!("{name}: {why}")),
        }
    }
    (passed, skipped, failures)
}
