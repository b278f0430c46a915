//! The operator registry. Each operator family lives in one file with its options, its
//! validation (the spec's steps, returning the output descriptors), its WGSL lowering, its float64
//! reference, its `opSupportLimits()` entry and its [`OpFamily`]; `operators!` below lists the
//! families, one line each with the [`Op`] variants they define. This file routes an operator to
//! its family and a builder method to the family that records it, and runs the references of data
//! movement on int64/uint64 values one 32-bit word at a time.

pub mod fusion;
pub mod limits;
pub mod movement;
pub mod reference;
pub mod wgsl;

use std::ops::RangeInclusive;

use crate::error::{Error, Result};
use crate::operand::{DataType, Number, OperandDescriptor};
pub use limits::{OpLimits, TensorLimits};
pub use reference::HostTensor;
pub use wgsl::{BufRef, Launch, LowerRequest, Lowering};

/// What an operator family (one file of `ops/`) provides for its operators: the registry routes
/// every [`Op`] to its family through [`Op::family`], and every builder method to the family
/// whose `limits()` name it. Adding an operator is its family file plus its family's line of
/// `operators!` below (docs/DESIGN.md, "Adding an operator").
pub trait OpFamily: Sync {
    /// The family's `opSupportLimits()` members; their names are its builder methods.
    fn limits(&self) -> Vec<OpLimits>;
    /// The operator builder method `name` records, its options read from `options` (with the
    /// spec's defaults already filled in by the JS layer).
    fn from_options(&self, name: &str, options: &dyn MethodOptions) -> Result<Op>;
    /// The spec's method name of the operator.
    fn name(&self, op: &Op) -> &'static str;
    /// How many operand inputs the operator takes, optional operands included.
    fn input_count(&self, _op: &Op) -> RangeInclusive<usize> {
        1..=1
    }
    /// The spec's validation steps; the output descriptors.
    fn validate(&self, op: &Op, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>>;
    /// The GPU work of a validated operator.
    fn lower(&self, op: &Op, request: &LowerRequest) -> Result<Lowering>;
    /// The float64 reference from the spec's definition.
    fn reference(&self, op: &Op, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>>;
    /// Whether input `index` is one whose elements the operator only copies (data movement), as
    /// opposed to indices or conditions that select them.
    fn moves_input(&self, _op: &Op, _index: usize) -> bool {
        false
    }
}

/// The options of one builder call, read by member name (the api layer reads them from a
/// JavaScript object); a missing or mistyped member is a `TypeError` naming it.
pub trait MethodOptions {
    fn f64(&self, key: &str) -> Result<f64>;
    /// An optional `MLNumber` (`None` when absent).
    fn opt_number(&self, key: &str) -> Result<Option<Number>>;
    fn u32(&self, key: &str) -> Result<u32>;
    fn i32(&self, key: &str) -> Result<i32>;
    fn bool(&self, key: &str) -> Result<bool>;
    /// A string; absent means empty (the default of `label`).
    fn string(&self, key: &str) -> Result<String>;
    fn opt_u32s(&self, key: &str) -> Result<Option<Vec<u32>>>;
    fn opt_f64s(&self, key: &str) -> Result<Option<Vec<f64>>>;
    fn opt_strings(&self, key: &str) -> Result<Option<Vec<String>>>;

    fn number(&self, key: &str) -> Result<Number> {
        self.opt_number(key)?.ok_or_else(|| missing(key))
    }
    fn u32s(&self, key: &str) -> Result<Vec<u32>> {
        self.opt_u32s(key)?.ok_or_else(|| missing(key))
    }
    fn data_type(&self, key: &str) -> Result<DataType> {
        DataType::from_name(&self.string(key)?)
    }
}

/// The error of a missing or mistyped option member.
pub fn missing(key: &str) -> Error {
    Error::Type(format!("'{key}' is missing or has the wrong type"))
}

/// The operator a builder method records.
pub fn from_options(name: &str, options: &dyn MethodOptions) -> Result<Op> {
    let registry = registry();
    match registry.limits.binary_search_by(|l| l.name.cmp(name)) {
        Ok(i) => registry.families[i].from_options(name, options),
        Err(_) => Err(unknown_method(name)),
    }
}

/// Every builder method's limits (`opSupportLimits()`), sorted by name, and the family that
/// declares each: built once, from the families' `limits()`.
struct Registry {
    limits: Vec<OpLimits>,
    families: Vec<&'static dyn OpFamily>,
}

fn registry() -> &'static Registry {
    static REGISTRY: std::sync::OnceLock<Registry> = std::sync::OnceLock::new();
    REGISTRY.get_or_init(|| {
        let mut all: Vec<(OpLimits, &'static dyn OpFamily)> =
            FAMILIES.iter().flat_map(|&family| family.limits().into_iter().map(move |l| (l, family))).collect();
        all.sort_by_key(|(l, _)| l.name);
        let (limits, families) = all.into_iter().unzip();
        Registry { limits, families }
    })
}

/// Every operator's limits (`opSupportLimits()`), sorted by name.
pub(crate) fn all_limits() -> &'static [OpLimits] {
    &registry().limits
}

pub(crate) fn unknown_method(name: &str) -> Error {
    Error::NotSupported(format!("{name}() is not supported by this implementation yet"))
}

/// What a family answers for another family's operator; [`Op::family`] routes every operator to
/// its own, so only a registry mistake reaches it.
pub(crate) fn not_this_family(op: &Op) -> Error {
    Error::Unknown(format!("internal error: {op:?} was routed to another operator family"))
}

/// Declares the operator families, one line each: the family's file in `ops/` and the [`Op`]
/// variants it defines; the routing from an operator to its family follows.
macro_rules! operators {
    ($($family:ident: $($variant:ident $(($($tuple:ty),*))? $({$($field:ident: $field_type:ty),*})?),+;)*) => {
        $(pub mod $family;)*

        /// One operator with its options. Optional operand inputs (gemm's `c`, normalization's
        /// `scale`/`bias`) are flagged in the options and appended to the operator's input list.
        #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
        pub enum Op {
            $($($variant $(($($tuple),*))? $({$($field: $field_type),*})?,)+)*
        }

        impl Op {
            /// The family that defines the operator.
            pub fn family(&self) -> &'static dyn OpFamily {
                match self {
                    $($(Op::$variant { .. } => &$family::Family,)+)*
                }
            }
        }

        /// Every family.
        const FAMILIES: &[&dyn OpFamily] = &[$(&$family::Family,)*];
    };
}

operators! {
    elementwise_binary: Binary(elementwise_binary::BinaryOp);
    logical: Logical(logical::LogicalOp);
    elementwise_unary: Unary(elementwise_unary::UnaryOp);
    activation: Activation(activation::Activation);
    matmul: Matmul, Gemm(matmul::GemmOptions);
    reshape: Reshape { new_shape: Vec<u32> }, Expand { new_shape: Vec<u32> };
    transpose: Transpose { permutation: Option<Vec<u32>> };
    concat: Concat { axis: u32 }, Split { splits: concat::Splits, axis: u32 };
    slice: Slice(slice::SliceOptions);
    gather: Gather { axis: u32 }, GatherElements { axis: u32 }, GatherNd;
    softmax: Softmax { axis: u32 };
    reduce: Reduce(reduce::ReduceOp, reduce::ReduceOptions);
    normalization: LayerNormalization(normalization::LayerNormalizationOptions);
    cast: Cast { data_type: crate::operand::DataType };
    where_op: Where;
    conv2d: Conv2d(conv2d::Conv2dOptions), ConvTranspose2d(conv2d::ConvTranspose2dOptions);
    pool2d: Pool2d(pool2d::PoolKind, pool2d::Pool2dOptions);
    batch_normalization: BatchNormalization(batch_normalization::BatchNormalizationOptions),
        InstanceNormalization(batch_normalization::InstanceNormalizationOptions);
    resample2d: Resample2d(resample2d::Resample2dOptions);
    quantization: QuantizeLinear, DequantizeLinear;
    recurrent: Gru(recurrent::GruOptions), GruCell(recurrent::GruCellOptions), Lstm(recurrent::LstmOptions),
        LstmCell(recurrent::LstmCellOptions);
    scatter: ScatterElements { axis: u32 }, ScatterNd;
    cumulative_sum: CumulativeSum(cumulative_sum::CumulativeSumOptions);
    triangular: Triangular(triangular::TriangularOptions);
    tile: Tile { repetitions: Vec<u32> };
    reverse: Reverse { axes: Option<Vec<u32>> };
    pad: Pad(pad::PadOptions);
    arg_min_max: ArgMinMax(arg_min_max::ArgKind, arg_min_max::ArgMinMaxOptions);
}

impl Op {
    /// The spec's method name of the operator, e.g. `"layerNormalization"`.
    pub fn name(&self) -> &'static str {
        self.family().name(self)
    }
}

/// Validates an operator against its inputs and returns its output descriptors.
pub fn validate(op: &Op, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
    limits::check_input_count(op, inputs.len())?;
    op.family().validate(op, inputs)
}

/// Lowers a validated operator to GPU work.
pub fn lower(op: &Op, request: &LowerRequest) -> Result<Lowering> {
    op.family().lower(op, request)
}

/// Computes an operator on the CPU in float64, from the spec's definition. Data movement of
/// int64/uint64 elements runs once on their low and once on their high 32-bit words (each exact
/// in f64), and the words are joined again, so that every value stays exact.
pub fn reference(op: &Op, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
    let wide = outputs.iter().any(|o| o.data_type.is_wide());
    if !(wide && (0..inputs.len()).any(|k| op.family().moves_input(op, k))) {
        return reference_values(op, inputs, outputs);
    }
    let mut words = Vec::new();
    for shift in [0u32, 32] {
        let word = |v: i128| ((v as u64 >> shift) & 0xffff_ffff) as f64;
        let split = inputs
            .iter()
            .enumerate()
            .map(|(k, t)| match op.family().moves_input(op, k) && t.descriptor.data_type.is_wide() {
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
    op.family().reference(op, inputs, outputs)
}
