//! Builder method name -> [`Op`]: one arm per builder method. `js/webnn.js`'s operator table converts
//! the arguments and options (with the spec's defaults filled in) into one plain object; an
//! optional operand option (gemm's `c`) arrives as `true` when given, and the operand itself is
//! appended to the operator's inputs in table order.

use wasm_bindgen::{JsCast, JsValue};

use crate::error::{Error, Result};
use crate::graph::{DataType, Number};
use crate::ops::activation::Activation;
use crate::ops::batch_normalization::{BatchNormalizationOptions, InstanceNormalizationOptions};
use crate::ops::arg_min_max::{ArgKind, ArgMinMaxOptions};
use crate::ops::cumulative_sum::CumulativeSumOptions;
use crate::ops::pad::{PadOptions, PaddingMode};
use crate::ops::triangular::TriangularOptions;
use crate::ops::concat::Splits;
use crate::ops::conv2d::{Conv2dFilterLayout, Conv2dOptions, ConvTranspose2dFilterLayout, ConvTranspose2dOptions, InputLayout};
use crate::ops::elementwise_binary::BinaryOp;
use crate::ops::elementwise_unary::UnaryOp;
use crate::ops::logical::LogicalOp;
use crate::ops::matmul::GemmOptions;
use crate::ops::normalization::LayerNormalizationOptions;
use crate::ops::pool2d::{Pool2dOptions, PoolKind, RoundingType};
use crate::ops::recurrent::{
    GruCellOptions, GruOptions, GruWeightLayout, LstmCellOptions, LstmOptions, LstmWeightLayout, RecurrentActivation,
    RecurrentDirection,
};
use crate::ops::reduce::{ReduceOp, ReduceOptions};
use crate::ops::resample2d::{InterpolationMode, Resample2dOptions};
use crate::ops::slice::SliceOptions;
use crate::ops::Op;

/// The converted arguments of one builder call.
pub struct Params(pub JsValue);

impl Params {
    fn get(&self, key: &str) -> JsValue {
        js_sys::Reflect::get(&self.0, &JsValue::from_str(key)).unwrap_or(JsValue::UNDEFINED)
    }

    fn missing(key: &str) -> Error {
        Error::Type(format!("'{key}' is missing or has the wrong type"))
    }

    pub fn f64(&self, key: &str) -> Result<f64> {
        self.get(key).as_f64().ok_or_else(|| Params::missing(key))
    }

    /// An optional `MLNumber` (`undefined` when absent): a bigint stays exact.
    pub fn opt_number(&self, key: &str) -> Result<Option<Number>> {
        let v = self.get(key);
        if v.is_undefined() {
            return Ok(None);
        }
        number(&v).map(Some).ok_or_else(|| Params::missing(key))
    }

    pub fn number(&self, key: &str) -> Result<Number> {
        self.opt_number(key)?.ok_or_else(|| Params::missing(key))
    }

    pub fn u32(&self, key: &str) -> Result<u32> {
        let v = self.f64(key)?;
        if v.fract() != 0.0 || !(0.0..=u32::MAX as f64).contains(&v) {
            return Err(Error::Type(format!("'{key}' must be an unsigned long, got {v}")));
        }
        Ok(v as u32)
    }

    /// A `long` (the table's converter already enforced its range).
    pub fn i32(&self, key: &str) -> Result<i32> {
        let v = self.f64(key)?;
        if v.fract() != 0.0 || !(i32::MIN as f64..=i32::MAX as f64).contains(&v) {
            return Err(Error::Type(format!("'{key}' must be a long, got {v}")));
        }
        Ok(v as i32)
    }

    pub fn bool(&self, key: &str) -> Result<bool> {
        self.get(key).as_bool().ok_or_else(|| Params::missing(key))
    }

    /// A string; absent means empty (the default of `label`).
    pub fn string(&self, key: &str) -> Result<String> {
        let v = self.get(key);
        if v.is_undefined() {
            return Ok(String::new());
        }
        v.as_string().ok_or_else(|| Params::missing(key))
    }

    pub fn data_type(&self, key: &str) -> Result<DataType> {
        DataType::from_name(&self.string(key)?)
    }

    /// An optional sequence of unsigned longs (`undefined` when absent).
    pub fn opt_u32s(&self, key: &str) -> Result<Option<Vec<u32>>> {
        let v = self.get(key);
        if v.is_undefined() {
            return Ok(None);
        }
        let array: &js_sys::Array = v.dyn_ref().ok_or_else(|| Params::missing(key))?;
        let mut out = Vec::with_capacity(array.length() as usize);
        for item in array.iter() {
            let x = item.as_f64().ok_or_else(|| Params::missing(key))?;
            if x.fract() != 0.0 || !(0.0..=u32::MAX as f64).contains(&x) {
                return Err(Error::Type(format!("'{key}' must hold unsigned longs, got {x}")));
            }
            out.push(x as u32);
        }
        Ok(Some(out))
    }

    pub fn u32s(&self, key: &str) -> Result<Vec<u32>> {
        self.opt_u32s(key)?.ok_or_else(|| Params::missing(key))
    }

    /// An optional sequence of numbers (`undefined` when absent).
    pub fn opt_f64s(&self, key: &str) -> Result<Option<Vec<f64>>> {
        let v = self.get(key);
        if v.is_undefined() {
            return Ok(None);
        }
        let array: &js_sys::Array = v.dyn_ref().ok_or_else(|| Params::missing(key))?;
        array.iter().map(|item| item.as_f64().ok_or_else(|| Params::missing(key))).collect::<Result<Vec<f64>>>().map(Some)
    }

    /// An optional sequence of strings (`undefined` when absent).
    pub fn opt_strings(&self, key: &str) -> Result<Option<Vec<String>>> {
        let v = self.get(key);
        if v.is_undefined() {
            return Ok(None);
        }
        let array: &js_sys::Array = v.dyn_ref().ok_or_else(|| Params::missing(key))?;
        array.iter().map(|item| item.as_string().ok_or_else(|| Params::missing(key))).collect::<Result<Vec<String>>>().map(Some)
    }

    /// `activations`: an optional sequence of `MLRecurrentNetworkActivation`.
    fn activations(&self) -> Result<Option<Vec<RecurrentActivation>>> {
        self.opt_strings("activations")?
            .map(|names| names.iter().map(|n| RecurrentActivation::from_name(n)).collect())
            .transpose()
    }
}

/// An `MLNumber` from JavaScript: a number, or a bigint kept exact. A bigint beyond the `i128`
/// range (at least 2^127 in magnitude) saturates every integer type and is an infinity in
/// float16, so only its float32 cast depends on its value: it is kept as that float32 value.
pub fn number(v: &JsValue) -> Option<Number> {
    if let Some(x) = v.as_f64() {
        return Some(Number::Double(x));
    }
    let big: &js_sys::BigInt = v.dyn_ref()?;
    let text = String::from(big.to_string(10).ok()?);
    if let Ok(v) = text.parse::<i128>() {
        return Some(Number::BigInt(v));
    }
    let (negative, digits) = match text.strip_prefix('-') {
        Some(digits) => (true, digits),
        None => (false, text.as_str()),
    };
    // u128 saturates at 2^128 - 1, beyond float32's overflow threshold 2^128 - 2^103; `as`
    // rounds to nearest even, overflowing to infinity.
    let magnitude = digits.parse::<u128>().unwrap_or(u128::MAX) as f32;
    Some(Number::Double(if negative { -magnitude } else { magnitude } as f64))
}

/// The operator a builder method records (the places an operator touches are listed in
/// docs/DESIGN.md, "Adding an operator").
pub fn op_from_js(name: &str, p: &Params) -> Result<Op> {
    let reduce = |op| -> Result<Op> {
        Ok(Op::Reduce(op, ReduceOptions { axes: p.opt_u32s("axes")?, keep_dimensions: p.bool("keepDimensions")? }))
    };
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
        "add" => Op::Binary(BinaryOp::Add),
        "sub" => Op::Binary(BinaryOp::Sub),
        "mul" => Op::Binary(BinaryOp::Mul),
        "div" => Op::Binary(BinaryOp::Div),
        "max" => Op::Binary(BinaryOp::Max),
        "min" => Op::Binary(BinaryOp::Min),
        "pow" => Op::Binary(BinaryOp::Pow),

        "equal" => Op::Logical(LogicalOp::Equal),
        "notEqual" => Op::Logical(LogicalOp::NotEqual),
        "greater" => Op::Logical(LogicalOp::Greater),
        "greaterOrEqual" => Op::Logical(LogicalOp::GreaterOrEqual),
        "lesser" => Op::Logical(LogicalOp::Lesser),
        "lesserOrEqual" => Op::Logical(LogicalOp::LesserOrEqual),
        "logicalNot" => Op::Logical(LogicalOp::LogicalNot),
        "logicalAnd" => Op::Logical(LogicalOp::LogicalAnd),
        "logicalOr" => Op::Logical(LogicalOp::LogicalOr),
        "logicalXor" => Op::Logical(LogicalOp::LogicalXor),
        "isNaN" => Op::Logical(LogicalOp::IsNaN),
        "isInfinite" => Op::Logical(LogicalOp::IsInfinite),

        "abs" => Op::Unary(UnaryOp::Abs),
        "ceil" => Op::Unary(UnaryOp::Ceil),
        "cos" => Op::Unary(UnaryOp::Cos),
        "erf" => Op::Unary(UnaryOp::Erf),
        "exp" => Op::Unary(UnaryOp::Exp),
        "floor" => Op::Unary(UnaryOp::Floor),
        "identity" => Op::Unary(UnaryOp::Identity),
        "log" => Op::Unary(UnaryOp::Log),
        "neg" => Op::Unary(UnaryOp::Neg),
        "reciprocal" => Op::Unary(UnaryOp::Reciprocal),
        "roundEven" => Op::Unary(UnaryOp::RoundEven),
        "sin" => Op::Unary(UnaryOp::Sin),
        "sign" => Op::Unary(UnaryOp::Sign),
        "sqrt" => Op::Unary(UnaryOp::Sqrt),
        "tan" => Op::Unary(UnaryOp::Tan),

        "relu" => Op::Activation(Activation::Relu),
        "sigmoid" => Op::Activation(Activation::Sigmoid),
        "tanh" => Op::Activation(Activation::Tanh),
        "gelu" => Op::Activation(Activation::Gelu),
        "leakyRelu" => Op::Activation(Activation::LeakyRelu { alpha: p.f64("alpha")? }),
        "clamp" => {
            Op::Activation(Activation::Clamp { min_value: p.opt_number("minValue")?, max_value: p.opt_number("maxValue")? })
        }
        "elu" => Op::Activation(Activation::Elu { alpha: p.f64("alpha")? }),
        "hardSigmoid" => Op::Activation(Activation::HardSigmoid { alpha: p.f64("alpha")?, beta: p.f64("beta")? }),
        "hardSwish" => Op::Activation(Activation::HardSwish),
        "linear" => Op::Activation(Activation::Linear { alpha: p.f64("alpha")?, beta: p.f64("beta")? }),
        "prelu" => Op::Activation(Activation::Prelu),
        "softplus" => Op::Activation(Activation::Softplus),
        "softsign" => Op::Activation(Activation::Softsign),

        "matmul" => Op::Matmul,
        "gemm" => Op::Gemm(GemmOptions {
            alpha: p.f64("alpha")?,
            beta: p.f64("beta")?,
            a_transpose: p.bool("aTranspose")?,
            b_transpose: p.bool("bTranspose")?,
            has_c: p.bool("c")?,
        }),

        "reshape" => Op::Reshape { new_shape: p.u32s("newShape")? },
        "expand" => Op::Expand { new_shape: p.u32s("newShape")? },
        "transpose" => Op::Transpose { permutation: p.opt_u32s("permutation")? },
        "concat" => Op::Concat { axis: p.u32("axis")? },
        "split" => {
            let splits = match p.opt_u32s("splits") {
                Ok(Some(sizes)) => Splits::Sizes(sizes),
                _ => Splits::Count(p.u32("splits")?),
            };
            Op::Split { splits, axis: p.u32("axis")? }
        }
        "slice" => Op::Slice(SliceOptions { starts: p.u32s("starts")?, sizes: p.u32s("sizes")?, strides: p.opt_u32s("strides")? }),
        "gather" => Op::Gather { axis: p.u32("axis")? },
        "softmax" => Op::Softmax { axis: p.u32("axis")? },

        "reduceL1" => reduce(ReduceOp::L1)?,
        "reduceL2" => reduce(ReduceOp::L2)?,
        "reduceLogSum" => reduce(ReduceOp::LogSum)?,
        "reduceLogSumExp" => reduce(ReduceOp::LogSumExp)?,
        "reduceMax" => reduce(ReduceOp::Max)?,
        "reduceMean" => reduce(ReduceOp::Mean)?,
        "reduceMin" => reduce(ReduceOp::Min)?,
        "reduceProduct" => reduce(ReduceOp::Product)?,
        "reduceSum" => reduce(ReduceOp::Sum)?,
        "reduceSumSquare" => reduce(ReduceOp::SumSquare)?,

        "layerNormalization" => Op::LayerNormalization(LayerNormalizationOptions {
            axes: p.opt_u32s("axes")?,
            epsilon: p.f64("epsilon")?,
            has_scale: p.bool("scale")?,
            has_bias: p.bool("bias")?,
        }),
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
        "averagePool2d" => pool(PoolKind::Average)?,
        "l2Pool2d" => pool(PoolKind::L2)?,
        "maxPool2d" => pool(PoolKind::Max)?,
        "cast" => Op::Cast { data_type: p.data_type("dataType")? },
        "where" => Op::Where,
        "gatherElements" => Op::GatherElements { axis: p.u32("axis")? },
        "gatherND" => Op::GatherNd,
        "scatterElements" => Op::ScatterElements { axis: p.u32("axis")? },
        "scatterND" => Op::ScatterNd,
        "cumulativeSum" => Op::CumulativeSum(CumulativeSumOptions {
            axis: p.u32("axis")?,
            exclusive: p.bool("exclusive")?,
            reversed: p.bool("reversed")?,
        }),
        "triangular" => Op::Triangular(TriangularOptions { upper: p.bool("upper")?, diagonal: p.i32("diagonal")? }),
        "tile" => Op::Tile { repetitions: p.u32s("repetitions")? },
        "reverse" => Op::Reverse { axes: p.opt_u32s("axes")? },
        "pad" => Op::Pad(PadOptions {
            beginning_padding: p.u32s("beginningPadding")?,
            ending_padding: p.u32s("endingPadding")?,
            mode: PaddingMode::from_name(&p.string("mode")?)?,
            value: p.number("value")?,
        }),
        "argMin" | "argMax" => Op::ArgMinMax(
            if name == "argMin" { ArgKind::Min } else { ArgKind::Max },
            ArgMinMaxOptions {
                axis: p.u32("axis")?,
                keep_dimensions: p.bool("keepDimensions")?,
                output_data_type: p.data_type("outputDataType")?,
            },
        ),

        "resample2d" => Op::Resample2d(Resample2dOptions {
            mode: InterpolationMode::from_name(&p.string("mode")?)?,
            scales: p.opt_f64s("scales")?,
            sizes: p.opt_u32s("sizes")?,
            axes: p.opt_u32s("axes")?,
        }),
        "quantizeLinear" => Op::QuantizeLinear,
        "dequantizeLinear" => Op::DequantizeLinear,
        "gru" => Op::Gru(GruOptions {
            steps: p.u32("steps")?,
            hidden_size: p.u32("hiddenSize")?,
            has_bias: p.bool("bias")?,
            has_recurrent_bias: p.bool("recurrentBias")?,
            has_initial_hidden_state: p.bool("initialHiddenState")?,
            reset_after: p.bool("resetAfter")?,
            return_sequence: p.bool("returnSequence")?,
            direction: RecurrentDirection::from_name(&p.string("direction")?)?,
            layout: GruWeightLayout::from_name(&p.string("layout")?)?,
            activations: p.activations()?,
        }),
        "gruCell" => Op::GruCell(GruCellOptions {
            hidden_size: p.u32("hiddenSize")?,
            has_bias: p.bool("bias")?,
            has_recurrent_bias: p.bool("recurrentBias")?,
            reset_after: p.bool("resetAfter")?,
            layout: GruWeightLayout::from_name(&p.string("layout")?)?,
            activations: p.activations()?,
        }),
        "lstm" => Op::Lstm(LstmOptions {
            steps: p.u32("steps")?,
            hidden_size: p.u32("hiddenSize")?,
            has_bias: p.bool("bias")?,
            has_recurrent_bias: p.bool("recurrentBias")?,
            has_peephole_weight: p.bool("peepholeWeight")?,
            has_initial_hidden_state: p.bool("initialHiddenState")?,
            has_initial_cell_state: p.bool("initialCellState")?,
            return_sequence: p.bool("returnSequence")?,
            direction: RecurrentDirection::from_name(&p.string("direction")?)?,
            layout: LstmWeightLayout::from_name(&p.string("layout")?)?,
            activations: p.activations()?,
        }),
        "lstmCell" => Op::LstmCell(LstmCellOptions {
            hidden_size: p.u32("hiddenSize")?,
            has_bias: p.bool("bias")?,
            has_recurrent_bias: p.bool("recurrentBias")?,
            has_peephole_weight: p.bool("peepholeWeight")?,
            layout: LstmWeightLayout::from_name(&p.string("layout")?)?,
            activations: p.activations()?,
        }),

        other => return Err(Error::NotSupported(format!("{other}() is not supported by this implementation yet"))),
    })
}
