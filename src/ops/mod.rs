//! The operator registry. Each operator family lives in one file with its options, its
//! validation (the spec's steps, returning the output descriptors), its WGSL lowering, its float64
//! reference and its `opSupportLimits()` entry. This file routes [`Op`] to the family, and runs
//! the references of data movement on int64/uint64 values one 32-bit word at a time.

pub mod activation;
pub mod arg_min_max;
pub mod batch_normalization;
pub mod cast;
pub mod concat;
pub mod conv2d;
pub mod cumulative_sum;
pub mod elementwise_binary;
pub mod elementwise_unary;
pub mod fusion;
pub mod gather;
pub mod limits;
pub mod logical;
pub mod matmul;
pub mod movement;
pub mod normalization;
pub mod pad;
pub mod pool2d;
pub mod quantization;
pub mod recurrent;
pub mod reduce;
pub mod reference;
pub mod resample2d;
pub mod reshape;
pub mod reverse;
pub mod scatter;
pub mod slice;
pub mod softmax;
pub mod tile;
pub mod transpose;
pub mod triangular;
pub mod wgsl;
pub mod where_op;

use crate::error::Result;
use crate::operand::OperandDescriptor;
pub use limits::{OpLimits, TensorLimits};
pub use reference::HostTensor;
pub use wgsl::{BufRef, Launch, LowerRequest, Lowering};

/// One operator with its options. Optional operand inputs (gemm's `c`, normalization's
/// `scale`/`bias`) are flagged in the options and appended to the operator's input list.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Op {
    Binary(elementwise_binary::BinaryOp),
    Logical(logical::LogicalOp),
    Unary(elementwise_unary::UnaryOp),
    Activation(activation::Activation),
    Matmul,
    Gemm(matmul::GemmOptions),
    Reshape { new_shape: Vec<u32> },
    Expand { new_shape: Vec<u32> },
    Transpose { permutation: Option<Vec<u32>> },
    Concat { axis: u32 },
    Split { splits: concat::Splits, axis: u32 },
    Slice(slice::SliceOptions),
    Gather { axis: u32 },
    Softmax { axis: u32 },
    Reduce(reduce::ReduceOp, reduce::ReduceOptions),
    LayerNormalization(normalization::LayerNormalizationOptions),
    Cast { data_type: crate::operand::DataType },
    Where,
    Conv2d(conv2d::Conv2dOptions),
    ConvTranspose2d(conv2d::ConvTranspose2dOptions),
    Pool2d(pool2d::PoolKind, pool2d::Pool2dOptions),
    BatchNormalization(batch_normalization::BatchNormalizationOptions),
    InstanceNormalization(batch_normalization::InstanceNormalizationOptions),
    Resample2d(resample2d::Resample2dOptions),
    QuantizeLinear,
    DequantizeLinear,
    Gru(recurrent::GruOptions),
    GruCell(recurrent::GruCellOptions),
    Lstm(recurrent::LstmOptions),
    LstmCell(recurrent::LstmCellOptions),
    GatherElements { axis: u32 },
    GatherNd,
    ScatterElements { axis: u32 },
    ScatterNd,
    CumulativeSum(cumulative_sum::CumulativeSumOptions),
    Triangular(triangular::TriangularOptions),
    Tile { repetitions: Vec<u32> },
    Reverse { axes: Option<Vec<u32>> },
    Pad(pad::PadOptions),
    ArgMinMax(arg_min_max::ArgKind, arg_min_max::ArgMinMaxOptions),
}

impl Op {
    /// The spec's method name of the operator, e.g. `"layerNormalization"`.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Binary(op) => op.name(),
            Op::Logical(op) => op.name(),
            Op::Unary(op) => op.name(),
            Op::Activation(op) => op.name(),
            Op::Matmul => "matmul",
            Op::Gemm(_) => "gemm",
            Op::Reshape { .. } => "reshape",
            Op::Expand { .. } => "expand",
            Op::Transpose { .. } => "transpose",
            Op::Concat { .. } => "concat",
            Op::Split { .. } => "split",
            Op::Slice(_) => "slice",
            Op::Gather { .. } => "gather",
            Op::Softmax { .. } => "softmax",
            Op::Reduce(op, _) => op.name(),
            Op::LayerNormalization(_) => "layerNormalization",
            Op::Cast { .. } => "cast",
            Op::Where => "where",
            Op::Conv2d(_) => "conv2d",
            Op::ConvTranspose2d(_) => "convTranspose2d",
            Op::Pool2d(kind, _) => kind.name(),
            Op::BatchNormalization(_) => "batchNormalization",
            Op::InstanceNormalization(_) => "instanceNormalization",
            Op::Resample2d(_) => "resample2d",
            Op::QuantizeLinear => "quantizeLinear",
            Op::DequantizeLinear => "dequantizeLinear",
            Op::Gru(_) => "gru",
            Op::GruCell(_) => "gruCell",
            Op::Lstm(_) => "lstm",
            Op::LstmCell(_) => "lstmCell",
            Op::GatherElements { .. } => "gatherElements",
            Op::GatherNd => "gatherND",
            Op::ScatterElements { .. } => "scatterElements",
            Op::ScatterNd => "scatterND",
            Op::CumulativeSum(_) => "cumulativeSum",
            Op::Triangular(_) => "triangular",
            Op::Tile { .. } => "tile",
            Op::Reverse { .. } => "reverse",
            Op::Pad(_) => "pad",
            Op::ArgMinMax(kind, _) => kind.name(),
        }
    }
}

/// Validates an operator against its inputs and returns its output descriptors.
pub fn validate(op: &Op, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
    limits::check_input_count(op, inputs.len())?;
    match op {
        Op::Binary(o) => elementwise_binary::validate(*o, inputs),
        Op::Logical(o) => logical::validate(*o, inputs),
        Op::Unary(o) => elementwise_unary::validate(*o, inputs),
        Op::Activation(o) => activation::validate(o, inputs),
        Op::Matmul => matmul::validate_matmul(inputs),
        Op::Gemm(o) => matmul::validate_gemm(o, inputs),
        Op::Reshape { new_shape } => reshape::validate_reshape(new_shape, inputs),
        Op::Expand { new_shape } => reshape::validate_expand(new_shape, inputs),
        Op::Transpose { permutation } => transpose::validate(permutation.as_deref(), inputs),
        Op::Concat { axis } => concat::validate_concat(*axis, inputs),
        Op::Split { splits, axis } => concat::validate_split(splits, *axis, inputs),
        Op::Slice(o) => slice::validate(o, inputs),
        Op::Gather { axis } => gather::validate(*axis, inputs),
        Op::Softmax { axis } => softmax::validate(*axis, inputs),
        Op::Reduce(kind, o) => reduce::validate(*kind, o, inputs),
        Op::LayerNormalization(o) => normalization::validate_layer_normalization(o, inputs),
        Op::Cast { data_type } => cast::validate(*data_type, inputs),
        Op::Where => where_op::validate(inputs),
        Op::Conv2d(o) => conv2d::validate_conv2d(o, inputs),
        Op::ConvTranspose2d(o) => conv2d::validate_conv_transpose2d(o, inputs),
        Op::Pool2d(kind, o) => pool2d::validate(*kind, o, inputs),
        Op::BatchNormalization(o) => batch_normalization::validate_batch_normalization(o, inputs),
        Op::InstanceNormalization(o) => batch_normalization::validate_instance_normalization(o, inputs),
        Op::Resample2d(o) => resample2d::validate(o, inputs),
        Op::QuantizeLinear => quantization::validate_quantize_linear(inputs),
        Op::DequantizeLinear => quantization::validate_dequantize_linear(inputs),
        Op::Gru(_) | Op::GruCell(_) | Op::Lstm(_) | Op::LstmCell(_) => recurrent::validate(op, inputs),
        Op::GatherElements { axis } => gather::validate_elements(*axis, inputs),
        Op::GatherNd => gather::validate_nd(inputs),
        Op::ScatterElements { axis } => scatter::validate_elements(*axis, inputs),
        Op::ScatterNd => scatter::validate_nd(inputs),
        Op::CumulativeSum(o) => cumulative_sum::validate(o, inputs),
        Op::Triangular(_) => triangular::validate(inputs),
        Op::Tile { repetitions } => tile::validate(repetitions, inputs),
        Op::Reverse { axes } => reverse::validate(axes.as_deref(), inputs),
        Op::Pad(o) => pad::validate(o, inputs),
        Op::ArgMinMax(kind, o) => arg_min_max::validate(*kind, o, inputs),
    }
}

/// Lowers a validated operator to GPU work.
pub fn lower(op: &Op, request: &LowerRequest) -> Result<Lowering> {
    match op {
        Op::Binary(o) => elementwise_binary::lower(*o, request),
        Op::Logical(o) => logical::lower(*o, request),
        Op::Unary(o) => elementwise_unary::lower(*o, request),
        Op::Activation(o) => activation::lower(o, request),
        Op::Matmul => matmul::lower_matmul(request, None),
        Op::Gemm(o) => matmul::lower_gemm(o, request, None),
        Op::Reshape { .. } => Ok(Lowering::Alias),
        Op::Expand { .. } => reshape::lower_expand(request),
        Op::Transpose { permutation } => transpose::lower(permutation.as_deref(), request),
        Op::Concat { axis } => concat::lower_concat(*axis, request),
        Op::Split { axis, .. } => concat::lower_split(*axis, request),
        Op::Slice(o) => slice::lower(o, request),
        Op::Gather { axis } => gather::lower(*axis, request),
        Op::Softmax { axis } => softmax::lower(*axis, request),
        Op::Reduce(kind, o) => reduce::lower(*kind, o, request),
        Op::LayerNormalization(o) => normalization::lower_layer_normalization(o, request),
        Op::Cast { .. } => cast::lower(request),
        Op::Where => where_op::lower(request),
        Op::Conv2d(o) => conv2d::lower_conv2d(o, request, None),
        Op::ConvTranspose2d(o) => conv2d::lower_conv_transpose2d(o, request, None),
        Op::Pool2d(kind, o) => pool2d::lower(*kind, o, request),
        Op::BatchNormalization(o) => batch_normalization::lower_batch_normalization(o, request),
        Op::InstanceNormalization(o) => batch_normalization::lower_instance_normalization(o, request),
        Op::Resample2d(o) => resample2d::lower(o, request),
        Op::QuantizeLinear => quantization::lower_quantize_linear(request),
        Op::DequantizeLinear => quantization::lower_dequantize_linear(request),
        Op::Gru(_) | Op::GruCell(_) | Op::Lstm(_) | Op::LstmCell(_) => recurrent::lower(op, request),
        Op::GatherElements { axis } => gather::lower_elements(*axis, request),
        Op::GatherNd => gather::lower_nd(request),
        Op::ScatterElements { axis } => scatter::lower_elements(*axis, request),
        Op::ScatterNd => scatter::lower_nd(request),
        Op::CumulativeSum(o) => cumulative_sum::lower(o, request),
        Op::Triangular(o) => triangular::lower(o, request),
        Op::Tile { .. } => tile::lower(request),
        Op::Reverse { axes } => reverse::lower(axes.as_deref(), request),
        Op::Pad(o) => pad::lower(o, request),
        Op::ArgMinMax(kind, o) => arg_min_max::lower(*kind, o, request),
    }
}

/// Whether operator input `index` is one whose elements the operator only copies (data movement),
/// as opposed to indices or conditions that select them.
fn moves_input(op: &Op, index: usize) -> bool {
    match op {
        Op::Reshape { .. }
        | Op::Expand { .. }
        | Op::Transpose { .. }
        | Op::Concat { .. }
        | Op::Split { .. }
        | Op::Slice(_)
        | Op::Tile { .. }
        | Op::Reverse { .. }
        | Op::Pad(_)
        | Op::Triangular(_)
        | Op::Unary(elementwise_unary::UnaryOp::Identity) => true,
        Op::Gather { .. } | Op::GatherElements { .. } | Op::GatherNd => index == 0,
        Op::ScatterElements { .. } | Op::ScatterNd => index == 0 || index == 2,
        Op::Where => index == 1 || index == 2,
        _ => false,
    }
}

/// Computes an operator on the CPU in float64, from the spec's definition. Data movement of
/// int64/uint64 elements runs once on their low and once on their high 32-bit words (each exact
/// in f64), and the words are joined again, so that every value stays exact.
pub fn reference(op: &Op, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
    let wide = outputs.iter().any(|o| o.data_type.is_wide());
    if !(wide && (0..inputs.len()).any(|k| moves_input(op, k))) {
        return reference_values(op, inputs, outputs);
    }
    let mut words = Vec::new();
    for shift in [0u32, 32] {
        let word = |v: i128| ((v as u64 >> shift) & 0xffff_ffff) as f64;
        let split = inputs
            .iter()
            .enumerate()
            .map(|(k, t)| match moves_input(op, k) && t.descriptor.data_type.is_wide() {
                true => HostTensor::new(t.descriptor.clone(), t.exact.iter().map(|&v| word(v)).collect()),
                false => Ok(t.clone()),
            })
            .collect::<Result<Vec<_>>>()?;
        let op = match op {
            Op::Pad(o) => {
                let value = o.value.to_integer(inputs[0].descriptor.data_type);
                Op::Pad(pad::PadOptions { value: word(value).into(), ..o.clone() })
            }
            _ => op.clone(),
        };
        words.push(reference_values(&op, &split, outputs)?);
    }
    let (low, high) = (&words[0], &words[1]);
    low.iter()
        .zip(high)
        .map(|(l, h)| {
            let values = l.data.iter().zip(&h.data).map(|(&l, &h)| ((h as u64) << 32 | l as u64) as i128).collect();
            HostTensor::from_exact(l.descriptor.clone(), values)
        })
        .collect()
}

fn reference_values(op: &Op, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
    match op {
        Op::Binary(o) => elementwise_binary::reference(*o, inputs, outputs),
        Op::Logical(o) => logical::reference(*o, inputs, outputs),
        Op::Unary(o) => elementwise_unary::reference(*o, inputs, outputs),
        Op::Activation(o) => activation::reference(o, inputs, outputs),
        Op::Matmul => matmul::reference_matmul(inputs, outputs),
        Op::Gemm(o) => matmul::reference_gemm(o, inputs, outputs),
        Op::Reshape { .. } => reshape::reference_reshape(inputs, outputs),
        Op::Expand { .. } => reshape::reference_expand(inputs, outputs),
        Op::Transpose { permutation } => transpose::reference(permutation.as_deref(), inputs, outputs),
        Op::Concat { axis } => concat::reference_concat(*axis, inputs, outputs),
        Op::Split { axis, .. } => concat::reference_split(*axis, inputs, outputs),
        Op::Slice(o) => slice::reference(o, inputs, outputs),
        Op::Gather { axis } => gather::reference(*axis, inputs, outputs),
        Op::Softmax { axis } => softmax::reference(*axis, inputs, outputs),
        Op::Reduce(kind, o) => reduce::reference(*kind, o, inputs, outputs),
        Op::LayerNormalization(o) => normalization::reference_layer_normalization(o, inputs, outputs),
        Op::Cast { .. } => cast::reference(inputs, outputs),
        Op::Where => where_op::reference(inputs, outputs),
        Op::Conv2d(o) => conv2d::reference_conv2d(o, inputs, outputs),
        Op::ConvTranspose2d(o) => conv2d::reference_conv_transpose2d(o, inputs, outputs),
        Op::Pool2d(kind, o) => pool2d::reference(*kind, o, inputs, outputs),
        Op::BatchNormalization(o) => batch_normalization::reference_batch_normalization(o, inputs, outputs),
        Op::InstanceNormalization(o) => batch_normalization::reference_instance_normalization(o, inputs, outputs),
        Op::Resample2d(o) => resample2d::reference(o, inputs, outputs),
        Op::QuantizeLinear => quantization::reference_quantize_linear(inputs, outputs),
        Op::DequantizeLinear => quantization::reference_dequantize_linear(inputs, outputs),
        Op::Gru(_) | Op::GruCell(_) | Op::Lstm(_) | Op::LstmCell(_) => recurrent::reference(op, inputs, outputs),
        Op::GatherElements { axis } => gather::reference_elements(*axis, inputs, outputs),
        Op::GatherNd => gather::reference_nd(inputs, outputs),
        Op::ScatterElements { axis } => scatter::reference_elements(*axis, inputs, outputs),
        Op::ScatterNd => scatter::reference_nd(inputs, outputs),
        Op::CumulativeSum(o) => cumulative_sum::reference(o, inputs, outputs),
        Op::Triangular(o) => triangular::reference(o, inputs, outputs),
        Op::Tile { .. } => tile::reference(inputs, outputs),
        Op::Reverse { axes } => reverse::reference(axes.as_deref(), inputs, outputs),
        Op::Pad(o) => pad::reference(o, inputs, outputs),
        Op::ArgMinMax(kind, o) => arg_min_max::reference(*kind, o, inputs, outputs),
    }
}
