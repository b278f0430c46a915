//! Builder method name -> [`Op`]: one arm per operator. `js/webnn.js`'s operator table converts
//! the arguments and options (with the spec's defaults filled in) into one plain object; an
//! optional operand option (gemm's `c`) arrives as `true` when given, and the operand itself is
//! appended to the operator's inputs in table order.

use wasm_bindgen::{JsCast, JsValue};

use crate::error::{Error, Result};
use crate::graph::DataType;
use crate::ops::activation::Activation;
use crate::ops::concat::Splits;
use crate::ops::elementwise_binary::BinaryOp;
use crate::ops::elementwise_unary::UnaryOp;
use crate::ops::logical::LogicalOp;
use crate::ops::matmul::GemmOptions;
use crate::ops::normalization::LayerNormalizationOptions;
use crate::ops::reduce::{ReduceOp, ReduceOptions};
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

    /// An optional number (`undefined` when absent).
    pub fn opt_f64(&self, key: &str) -> Result<Option<f64>> {
        let v = self.get(key);
        if v.is_undefined() {
            return Ok(None);
        }
        v.as_f64().map(Some).ok_or_else(|| Params::missing(key))
    }

    pub fn u32(&self, key: &str) -> Result<u32> {
        let v = self.f64(key)?;
        if v.fract() != 0.0 || !(0.0..=u32::MAX as f64).contains(&v) {
            return Err(Error::Type(format!("'{key}' must be an unsigned long, got {v}")));
        }
        Ok(v as u32)
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
}

/// The operator a builder method records. Extending the API with an operator is one entry in
/// `js/webnn.js`'s `OPERATORS` table plus one arm here.
pub fn op_from_js(name: &str, p: &Params) -> Result<Op> {
    let reduce = |op| -> Result<Op> {
        Ok(Op::Reduce(op, ReduceOptions { axes: p.opt_u32s("axes")?, keep_dimensions: p.bool("keepDimensions")? }))
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
        "clamp" => Op::Activation(Activation::Clamp { min_value: p.opt_f64("minValue")?, max_value: p.opt_f64("maxValue")? }),
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
        "cast" => Op::Cast { data_type: p.data_type("dataType")? },
        "where" => Op::Where,

        other => return Err(Error::NotSupported(format!("{other}() is not supported by this implementation yet"))),
    })
}
