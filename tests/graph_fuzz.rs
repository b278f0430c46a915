//! Graph fuzzer: random operator sequences over random shapes (rank 0 to 4, size-1 dimensions),
//! data types and options, some deliberately invalid. Every builder call must give an operand or
//! the spec's `TypeError`, never a panic; every graph whose operators were accepted must build,
//! dispatch and read back, and where its values are well conditioned match the float64
//! reference of each operator family within a tolerance that grows with the inexact operators
//! on the path. Every case runs on the WebGPU backend and on the CPU backend.
//!
//! `GRAPH_FUZZ_CASES` sets the number of random cases (default 256: 5 to 30 s on 2 cores,
//! depending on load). Failures proptest finds are saved in
//! `tests/graph_fuzz.proptest-regressions` (commit it) and replayed first; `regressions()` runs an
//! explicit corpus of edge cases every time.
#![cfg(not(target_arch = "wasm32"))] // native: `wasm-pack test` builds every test target for wasm32

mod common;

use webnn_wgpu::graph::Number;
use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};

use common::{block_on, context, Rng};
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, TestCaseError, TestRunner};
use webnn_wgpu::graph::{DataType, GraphBuilder, OperandDescriptor};
use webnn_wgpu::ops::activation::Activation;
use webnn_wgpu::ops::conv2d::{Conv2dFilterLayout, Conv2dOptions, InputLayout};
use webnn_wgpu::ops::elementwise_binary::BinaryOp;
use webnn_wgpu::ops::elementwise_unary::UnaryOp;
use webnn_wgpu::ops::pad::{PadOptions, PaddingMode};
use webnn_wgpu::ops::pool2d::{Pool2dOptions, PoolKind, RoundingType};
use webnn_wgpu::ops::reduce::{ReduceOp, ReduceOptions};
use webnn_wgpu::ops::slice::SliceOptions;
use webnn_wgpu::ops::{self, HostTensor, Op};
use webnn_wgpu::backend::cpu::CpuContext;
use webnn_wgpu::backend::webgpu::Context;
use webnn_wgpu::backend::{Backend, BackendTensor, ContextOptions, TensorDescriptor};
use webnn_wgpu::Operand;

/// A graph input: a data type selector, a shape (a 0 is an invalid dimension), and whether it is
/// a constant rather than an `input()`.
#[derive(Debug, Clone)]
struct InputSpec {
    data_type: u8,
    shape: Vec<u32>,
    constant: bool,
}

/// One builder call: an operator family, the operands it takes (indices into the operands made
/// so far), knobs its options are derived from, and whether to corrupt an option.
#[derive(Debug, Clone)]
struct Step {
    family: u8,
    a: u8,
    b: u8,
    knobs: [u16; 6],
    corrupt: bool,
}

#[derive(Debug, Clone)]
struct Case {
    inputs: Vec<InputSpec>,
    steps: Vec<Step>,
    seed: u64,
}

const FAMILIES: u8 = 15;

fn case_strategy() -> impl Strategy<Value = Case> {
    let dim = prop_oneof![40 => 1u32..=4, 1 => Just(0u32)];
    let input = (0u8..100, prop::collection::vec(dim, 0..=4), prop::bool::weighted(0.3))
        .prop_map(|(data_type, shape, constant)| InputSpec { data_type, shape, constant });
    let step = (0..FAMILIES, any::<u8>(), any::<u8>(), any::<[u16; 6]>(), prop::bool::weighted(0.1))
        .prop_map(|(family, a, b, knobs, corrupt)| Step { family, a, b, knobs, corrupt });
    (prop::collection::vec(input, 1..=3), prop::collection::vec(step, 1..=6), any::<u64>())
        .prop_map(|(inputs, steps, seed)| Case { inputs, steps, seed })
}

fn data_type(selector: u8) -> DataType {
    match selector {
        0..=59 => DataType::Float32,
        60..=74 => DataType::Float16,
        75..=86 => DataType::Int32,
        87..=89 => DataType::Uint32,
        90..=93 => DataType::Int8,
        94..=96 => DataType::Uint8,
        97..=98 => DataType::Int64,
        _ => DataType::Uint64,
    }
}

/// An operand of the case with its reference value and what the comparison needs to know.
#[derive(Clone)]
struct Value {
    operand: Operand,
    host: HostTensor,
    /// Produced by an operator (a graph output may not be an input or constant).
    computed: bool,
    /// The value is well conditioned: finite, far from integer saturation, and not a
    /// discontinuous function of a rounded value; only such outputs are compared.
    comparable: bool,
    /// Inexact operators on the path from the inputs (the tolerance grows with them).
    depth: u32,
}

/// Runs `f`, turning a panic into a test failure that names the call.
fn no_panic<T>(what: &str, f: impl FnOnce() -> T) -> Result<T, TestCaseError> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|p| {
        let message = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        TestCaseError::fail(format!("{what} panicked: {message}"))
    })
}

/// Random values for a tensor: small integers for integer types, [-2, 2) for floats.
fn random_tensor(rng: &mut Rng, d: &OperandDescriptor) -> HostTensor {
    let (lo, hi) = match d.data_type {
        DataType::Uint32 | DataType::Uint8 | DataType::Uint64 => (0.0, 5.0),
        t if t.is_float() => (-2.0, 2.0),
        _ => (-4.0, 5.0),
    };
    rng.tensor(d.data_type, &d.shape, lo, hi)
}

struct Fuzz {
    builder: GraphBuilder,
    rng: Rng,
    values: Vec<Value>,
    /// Graph inputs with their values.
    feeds: Vec<(String, HostTensor)>,
    log: Vec<String>,
}

impl Fuzz {
    fn add_constant(&mut self, host: HostTensor) -> Result<Value, TestCaseError> {
        let d = host.descriptor.clone();
        let bytes = host.to_bytes();
        let result = no_panic("constant()", || self.builder.constant(d.clone(), &bytes))?;
        let operand = result.map_err(|e| TestCaseError::fail(format!("constant({d}) failed: {e}")))?;
        Ok(Value { operand, host, computed: false, comparable: true, depth: 0 })
    }

    /// A constant of `data_type` whose shape broadcasts with `shape` (trailing dims kept or 1).
    fn broadcastable(&mut self, shape: &[u32], data_type: DataType, k: u16) -> Result<Value, TestCaseError> {
        let keep = (k as usize) % (shape.len() + 1);
        let s: Vec<u32> = shape[shape.len() - keep..]
            .iter()
            .enumerate()
            .map(|(i, &d)| if (k >> (i + 3)) & 1 == 1 { 1 } else { d })
            .collect();
        let host = random_tensor(&mut self.rng, &OperandDescriptor::new(data_type, s));
        self.add_constant(host)
    }

    /// Reshapes `x` to rank 4 with leading 1s (the 2-D windowed families take 4-D inputs); `x`
    /// itself when its type cannot be reshaped.
    fn to_4d(&mut self, x: Value) -> Result<Value, TestCaseError> {
        if x.host.descriptor.rank() >= 4 {
            return Ok(x);
        }
        let mut shape = vec![1u32; 4 - x.host.descriptor.rank()];
        shape.extend_from_slice(&x.host.descriptor.shape);
        let op = Op::Reshape { new_shape: shape };
        Ok(self.apply(op, vec![x.clone()], Kind::Exact)?.unwrap_or(x))
    }

    /// Records `op` on `inputs`: a spec error must be a `TypeError`; an accepted operator's
    /// reference is computed and its output becomes a new operand.
    fn apply(&mut self, op: Op, inputs: Vec<Value>, kind: Kind) -> Result<Option<Value>, TestCaseError> {
        let operands: Vec<Operand> = inputs.iter().map(|v| v.operand).collect();
        let shapes: Vec<String> = inputs.iter().map(|v| v.host.descriptor.to_string()).collect();
        let what = format!("{op:?} on {shapes:?}");
        self.log.push(what.clone());
        let result = no_panic(&what, || self.builder.operator(op.clone(), &operands, ""))?;
        let outputs = match result {
            Err(e) => {
                prop_assert_eq!(e.name(), "TypeError", "{}: {}", what, e);
                self.log.push(format!("  -> {e}"));
                return Ok(None);
            }
            Ok(o) => o,
        };
        let descriptors: Vec<OperandDescriptor> =
            outputs.iter().map(|&o| self.builder.descriptor(o).map(|d| d.clone())).collect::<Result<_, _>>().map_err(|e| TestCaseError::fail(e.to_string()))?;
        let hosts: Vec<HostTensor> = inputs.iter().map(|v| v.host.clone()).collect();
        let reference = no_panic(&format!("reference of {what}"), || ops::reference(&op, &hosts, &descriptors))?
            .map_err(|e| TestCaseError::fail(format!("reference of {what} failed: {e}")))?;
        let host = reference.into_iter().next().ok_or_else(|| TestCaseError::fail("no reference output"))?;
        prop_assert_eq!(&host.descriptor, &descriptors[0], "{}: reference descriptor", what);
        let exact_inputs = inputs.iter().all(|v| v.depth == 0);
        let comparable = inputs.iter().all(|v| v.comparable)
            && well_conditioned(&host)
            && (exact_inputs || !matches!(kind, Kind::Discontinuous | Kind::Singular));
        let depth = inputs.iter().map(|v| v.depth).max().unwrap_or(0) + u32::from(kind != Kind::Exact);
        self.log.push(format!("  -> {}", host.descriptor));
        Ok(Some(Value { operand: outputs[0], host, computed: true, comparable, depth }))
    }
}

/// How an operator treats rounding error in its inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Moves or selects values: exact.
    Exact,
    /// Continuous arithmetic: adds rounding error.
    Inexact,
    /// Jumps (floor, sign, cast to an integer): compared only on exact inputs.
    Discontinuous,
    /// Has poles or a restricted domain (div, log, pow): compared only on exact inputs.
    Singular,
}

/// Finite, not huge, and for integer types strictly inside the range (the reference saturates
/// where the GPU wraps, which the spec leaves to the implementation).
fn well_conditioned(t: &HostTensor) -> bool {
    let (lo, hi) = match t.descriptor.data_type {
        DataType::Float32 | DataType::Float16 => (-1e4, 1e4),
        DataType::Int32 | DataType::Int64 => (-1e6, 1e6),
        DataType::Uint32 | DataType::Uint64 => (0.0, 1e6),
        DataType::Int8 => (-128.0, 127.0),
        DataType::Uint8 => (0.0, 255.0),
    };
    let strict = !t.descriptor.data_type.is_float();
    t.data.iter().all(|&v| v.is_finite() && if strict { v > lo && v < hi } else { v >= lo && v <= hi })
}

fn unary_kind(op: UnaryOp) -> Kind {
    match op {
        UnaryOp::Abs | UnaryOp::Neg | UnaryOp::Identity => Kind::Exact,
        UnaryOp::Ceil | UnaryOp::Floor | UnaryOp::RoundEven | UnaryOp::Sign => Kind::Discontinuous,
        UnaryOp::Log | UnaryOp::Reciprocal | UnaryOp::Sqrt | UnaryOp::Tan => Kind::Singular,
        _ => Kind::Inexact,
    }
}

fn binary_kind(op: BinaryOp, data_type: DataType) -> Kind {
    match op {
        BinaryOp::Max | BinaryOp::Min => Kind::Exact,
        BinaryOp::Div | BinaryOp::Pow => Kind::Singular,
        _ if !data_type.is_float() => Kind::Exact,
        _ => Kind::Inexact,
    }
}

fn activation(k: u16, k2: u16) -> Activation {
    let f = |v: u16| (v % 7) as f64 * 0.25 - 0.5;
    match k % 13 {
        0 => Activation::Relu,
        1 => Activation::Sigmoid,
        2 => Activation::Tanh,
        3 => Activation::Gelu,
        4 => Activation::LeakyRelu { alpha: f(k2) },
        5 => Activation::Clamp { min_value: Some(Number::Double(-f(k2).abs())), max_value: if k2 % 2 == 0 { Some(Number::Double(1.0)) } else { None } },
        6 => Activation::Elu { alpha: f(k2) },
        7 => Activation::HardSigmoid { alpha: f(k2), beta: 0.5 },
        8 => Activation::HardSwish,
        9 => Activation::Linear { alpha: f(k2), beta: f(k2 / 7) },
        10 => Activation::Softplus,
        11 => Activation::Softsign,
        _ => Activation::Prelu,
    }
}

/// A permutation of `0..rank` from `k` (a Lehmer code).
fn permutation(rank: usize, mut k: u32) -> Vec<u32> {
    let mut left: Vec<u32> = (0..rank as u32).collect();
    let mut p = Vec::with_capacity(rank);
    while !left.is_empty() {
        let i = (k as usize) % left.len();
        k /= left.len() as u32;
        p.push(left.remove(i));
    }
    p
}

/// Interprets one step against the operands made so far.
fn step(f: &mut Fuzz, s: &Step) -> Result<(), TestCaseError> {
    let n = f.values.len();
    let x = f.values[s.a as usize % n].clone();
    let y = f.values[s.b as usize % n].clone();
    let k = s.knobs;
    let d = x.host.descriptor.clone();
    let rank = d.rank();
    let dt = d.data_type;
    let bad = s.corrupt;
    let out = match s.family {
        0 => {
            let op = BinaryOp::ALL[k[0] as usize % 7];
            let other = if bad { y } else { f.broadcastable(&d.shape, dt, k[1])? };
            let (a, b) = if k[2] % 2 == 0 { (x, other) } else { (other, x) };
            f.apply(Op::Binary(op), vec![a, b], binary_kind(op, dt))?
        }
        1 => {
            let op = UnaryOp::ALL[k[0] as usize % UnaryOp::ALL.len()];
            f.apply(Op::Unary(op), vec![x], unary_kind(op))?
        }
        2 => {
            let a = activation(k[0], k[1]);
            let kind = if matches!(a, Activation::Relu | Activation::Clamp { .. }) { Kind::Exact } else { Kind::Inexact };
            if a == Activation::Prelu {
                let slope = if bad { y } else { f.broadcastable(&d.shape, dt, k[2])? };
                f.apply(Op::Activation(a), vec![x, slope], Kind::Inexact)?
            } else {
                f.apply(Op::Activation(a), vec![x], kind)?
            }
        }
        3 => {
            let op = ReduceOp::ALL[k[0] as usize % ReduceOp::ALL.len()];
            let mut axes: Vec<u32> = (0..rank as u32).filter(|i| (k[1] >> i) & 1 == 1).collect();
            if bad {
                axes.push(if k[3] % 2 == 0 { rank as u32 } else { axes.first().copied().unwrap_or(0) });
            }
            let options = ReduceOptions { axes: if k[2] % 4 == 0 && !bad { None } else { Some(axes) }, keep_dimensions: k[3] % 2 == 1 };
            let kind = match op {
                ReduceOp::Max | ReduceOp::Min => Kind::Exact,
                ReduceOp::LogSum => Kind::Singular,
                ReduceOp::Sum | ReduceOp::Product | ReduceOp::SumSquare | ReduceOp::L1 if !dt.is_float() => Kind::Exact,
                _ => Kind::Inexact,
            };
            f.apply(Op::Reduce(op, options), vec![x], kind)?
        }
        4 => {
            let mut p = permutation(rank, k[1] as u32);
            if bad {
                p.push(0);
            }
            let permutation = if k[2] % 4 == 0 && !bad { None } else { Some(p) };
            f.apply(Op::Transpose { permutation }, vec![x], Kind::Exact)?
        }
        5 => {
            let mut starts = Vec::new();
            let mut sizes = Vec::new();
            let mut strides = Vec::new();
            for (i, &dim) in d.shape.iter().enumerate() {
                let start = (k[1] >> i) as u32 % dim;
                let stride = 1 + (k[2] >> (2 * i)) as u32 % 2;
                let max_size = (dim - start).div_ceil(stride);
                starts.push(start);
                sizes.push(1 + (k[3] >> (2 * i)) as u32 % max_size);
                strides.push(stride);
            }
            if bad {
                match k[4] % 3 {
                    0 => sizes.push(1),
                    1 if rank > 0 => sizes[0] = d.shape[0] + 1,
                    _ if rank > 0 => strides[0] = 0,
                    _ => starts.push(0),
                }
            }
            let options = SliceOptions { starts, sizes, strides: if k[5] % 2 == 0 { None } else { Some(strides) } };
            f.apply(Op::Slice(options), vec![x], Kind::Exact)?
        }
        6 => {
            let count = d.element_count() as u32;
            let mut shape = match k[1] % 4 {
                0 => vec![count],
                1 => vec![],
                2 => {
                    let first = (1..=count).filter(|v| count % v == 0).nth(k[2] as usize % 3).unwrap_or(1);
                    vec![first, count / first]
                }
                _ => vec![1, count, 1],
            };
            if shape.is_empty() && count != 1 {
                shape = vec![count, 1];
            }
            if bad {
                shape.push(2);
            }
            f.apply(Op::Reshape { new_shape: shape }, vec![x], Kind::Exact)?
        }
        7 => {
            let axis = if bad { rank as u32 } else { k[1] as u32 % rank.max(1) as u32 };
            let mut parts = vec![x];
            for i in 0..(1 + k[2] % 2) {
                let mut shape = d.shape.clone();
                if let Some(s) = shape.get_mut(axis as usize) {
                    *s = 1 + (k[3] >> i) as u32 % 3;
                }
                let host = random_tensor(&mut f.rng, &OperandDescriptor::new(dt, shape));
                parts.push(f.add_constant(host)?);
            }
            if k[4] % 2 == 0 {
                parts.reverse();
            }
            f.apply(Op::Concat { axis }, parts, Kind::Exact)?
        }
        8 => {
            let cols = if rank >= 1 { d.shape[rank - 1] } else { 1 };
            let rows = if bad { cols + 1 } else { cols };
            let mut shape: Vec<u32> = if rank >= 2 && k[1] % 2 == 0 { d.shape[..rank - 2].to_vec() } else { vec![] };
            shape.extend([rows, 1 + k[2] as u32 % 4]);
            let host = random_tensor(&mut f.rng, &OperandDescriptor::new(dt, shape));
            let b = f.add_constant(host)?;
            let kind = if dt.is_float() { Kind::Inexact } else { Kind::Exact };
            f.apply(Op::Matmul, vec![x, b], kind)?
        }
        9 => {
            let axis = if bad { rank as u32 } else { k[1] as u32 % rank.max(1) as u32 };
            f.apply(Op::Softmax { axis }, vec![x], Kind::Inexact)?
        }
        10 => {
            let x = if bad { x } else { f.to_4d(x)? };
            let shape = x.host.descriptor.shape.clone();
            let nhwc = k[1] % 2 == 1;
            let (c, h, w) = match shape.as_slice() {
                [_, c, h, w] if !nhwc => (*c, *h, *w),
                [_, h, w, c] => (*h, *w, *c),
                _ => (1, 1, 1),
            };
            let (c, h, w) = if nhwc { (w, c, h) } else { (c, h, w) };
            let groups = if c % 2 == 0 && k[2] % 2 == 0 { 2 } else { 1 };
            let pad = (k[3] % 2) as u32;
            let kh = 1 + k[4] as u32 % (h + 2 * pad);
            let kw = 1 + (k[4] >> 4) as u32 % (w + 2 * pad);
            let out_channels = groups * (1 + k[5] as u32 % 2);
            let filter_layout = [Conv2dFilterLayout::Oihw, Conv2dFilterLayout::Hwio, Conv2dFilterLayout::Ohwi, Conv2dFilterLayout::Ihwo][(k[5] >> 2) as usize % 4];
            let (o, i) = (out_channels, c / groups + u32::from(bad && k[0] % 2 == 0));
            let filter_shape = match filter_layout {
                Conv2dFilterLayout::Oihw => vec![o, i, kh, kw],
                Conv2dFilterLayout::Hwio => vec![kh, kw, i, o],
                Conv2dFilterLayout::Ohwi => vec![o, kh, kw, i],
                Conv2dFilterLayout::Ihwo => vec![i, kh, kw, o],
            };
            let filter = random_tensor(&mut f.rng, &OperandDescriptor::new(dt, filter_shape));
            let filter = f.add_constant(filter)?;
            let has_bias = k[0] % 3 == 0;
            let mut inputs = vec![x, filter];
            if has_bias {
                let bias = random_tensor(&mut f.rng, &OperandDescriptor::new(dt, vec![o]));
                inputs.push(f.add_constant(bias)?);
            }
            let options = Conv2dOptions {
                padding: Some(vec![pad; 4]),
                strides: Some(vec![1 + (k[2] >> 2) as u32 % 2, 1]),
                dilations: Some(vec![1, 1 + u32::from(bad && k[0] % 2 == 1) * 9]),
                groups,
                input_layout: if nhwc { InputLayout::Nhwc } else { InputLayout::Nchw },
                filter_layout,
                has_bias,
            };
            f.apply(Op::Conv2d(options), inputs, Kind::Inexact)?
        }
        11 => {
            let x = if bad { x } else { f.to_4d(x)? };
            let shape = x.host.descriptor.shape.clone();
            let nhwc = k[1] % 2 == 1;
            let (h, w) = match shape.as_slice() {
                [_, _, h, w] if !nhwc => (*h, *w),
                [_, h, w, _] => (*h, *w),
                _ => (1, 1),
            };
            let kind = PoolKind::ALL[k[0] as usize % 3];
            let window = [1 + k[2] as u32 % h, 1 + (k[2] >> 3) as u32 % w + u32::from(bad) * 8];
            let options = Pool2dOptions {
                window_dimensions: if k[3] % 3 == 0 && !bad { None } else { Some(window.to_vec()) },
                padding: Some(vec![0, (k[4] % 2) as u32, 0, 0]),
                strides: Some(vec![1 + (k[4] >> 1) as u32 % 2, 1]),
                dilations: None,
                layout: if nhwc { InputLayout::Nhwc } else { InputLayout::Nchw },
                output_shape_rounding: if k[5] % 2 == 0 { RoundingType::Floor } else { RoundingType::Ceil },
                output_sizes: None,
            };
            let op_kind = if kind == PoolKind::Max { Kind::Exact } else { Kind::Inexact };
            f.apply(Op::Pool2d(kind, options), vec![x], op_kind)?
        }
        12 => {
            let axis = if bad && k[3] % 2 == 0 { rank as u32 } else { k[1] as u32 % rank.max(1) as u32 };
            let n = d.shape.get(axis as usize).copied().unwrap_or(1);
            let irank = (k[2] % 3) as usize;
            let ishape: Vec<u32> = (0..irank).map(|i| 1 + (k[4] >> (2 * i)) as u32 % 3).collect();
            let itype = if bad && k[3] % 2 == 1 { DataType::Float32 } else if k[5] % 2 == 0 { DataType::Int32 } else { DataType::Uint32 };
            let count = ishape.iter().product::<u32>() as usize;
            let values: Vec<f64> = (0..count).map(|_| f.rng.below(n) as f64).collect();
            let indices = HostTensor::new(OperandDescriptor::new(itype, ishape), values).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let indices = f.add_constant(indices)?;
            f.apply(Op::Gather { axis }, vec![x, indices], Kind::Exact)?
        }
        13 => {
            let mode = [PaddingMode::Constant, PaddingMode::Edge, PaddingMode::Reflection][k[0] as usize % 3];
            let limit = |dim: u32, v: u16| if mode == PaddingMode::Reflection { v as u32 % dim } else { v as u32 % 3 };
            let mut begin: Vec<u32> = d.shape.iter().enumerate().map(|(i, &n)| limit(n, k[1] >> (2 * i))).collect();
            let end: Vec<u32> = d.shape.iter().enumerate().map(|(i, &n)| limit(n, k[2] >> (2 * i))).collect();
            if bad {
                begin.push(1);
            }
            let options = PadOptions { beginning_padding: begin, ending_padding: end, mode, value: Number::Double((k[3] % 5) as f64 - 2.0) };
            f.apply(Op::Pad(options), vec![x], Kind::Exact)?
        }
        _ => {
            let to = data_type(k[1] as u8 % 100);
            let kind = if to.is_float() { if to == DataType::Float16 && dt != DataType::Float16 { Kind::Inexact } else { Kind::Exact } } else { Kind::Discontinuous };
            f.apply(Op::Cast { data_type: to }, vec![x], kind)?
        }
    };
    if let Some(v) = out {
        f.values.push(v);
    }
    Ok(())
}

/// What the cases did, printed at the end so that a fuzzer that stopped reaching the GPU shows.
#[derive(Default)]
struct Stats {
    accepted: Cell<u32>,
    rejected: Cell<u32>,
    graphs: Cell<u32>,
    compared: Cell<u32>,
    compared_elements: Cell<u32>,
}

fn bump(c: &Cell<u32>, by: usize) {
    c.set(c.get() + by as u32);
}

/// Runs one case: builds the operators, then builds, dispatches and checks the graph.
/// Runs `case` on both backends.
fn run_case(ctx: &Context, stats: &Stats, case: &Case) -> Result<(), TestCaseError> {
    run_case_on(ctx, stats, case, &|| ctx.take_uncaptured_error())?;
    run_case_on(&CpuContext::new(ContextOptions::default()), stats, case, &|| None)
}

/// Runs `case` on `ctx`; `device_error()` is an error the device reported outside the calls.
fn run_case_on<B: Backend>(ctx: &B, stats: &Stats, case: &Case, device_error: &dyn Fn() -> Option<String>) -> Result<(), TestCaseError> {
    let builder = GraphBuilder::new(ctx).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let mut f = Fuzz { builder, rng: Rng::new(case.seed), values: Vec::new(), feeds: Vec::new(), log: Vec::new() };
    for (i, spec) in case.inputs.iter().enumerate() {
        let d = OperandDescriptor::new(data_type(spec.data_type), spec.shape.clone());
        let host = if d.check_dimensions().is_ok() { Some(random_tensor(&mut f.rng, &d)) } else { None };
        let name = format!("x{i}");
        let result = if spec.constant {
            let bytes = host.as_ref().map(|h| h.to_bytes()).unwrap_or_default();
            no_panic("constant()", || f.builder.constant(d.clone(), &bytes))?
        } else {
            no_panic("input()", || f.builder.input(&name, d.clone()))?
        };
        match (result, host) {
            (Ok(operand), Some(host)) => {
                if !spec.constant {
                    f.feeds.push((name, host.clone()));
                }
                f.values.push(Value { operand, host, computed: false, comparable: true, depth: 0 });
            }
            (Ok(_), None) => return Err(TestCaseError::fail(format!("{d} was accepted"))),
            (Err(e), _) => prop_assert_eq!(e.name(), "TypeError", "{} {}: {}", name, d, e),
        }
    }
    if f.values.is_empty() {
        let host = random_tensor(&mut f.rng, &OperandDescriptor::new(DataType::Float32, vec![2, 3]));
        let operand = f.builder.input("fallback", host.descriptor.clone()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        f.feeds.push(("fallback".into(), host.clone()));
        f.values.push(Value { operand, host, computed: false, comparable: true, depth: 0 });
    }
    for s in &case.steps {
        step(&mut f, s)?;
    }
    let rejected = f.log.iter().filter(|l| l.starts_with("  -> ") && l.contains("Error")).count();
    bump(&stats.rejected, rejected);
    bump(&stats.accepted, f.values.iter().filter(|v| v.computed).count());
    // The last two computed operands are the outputs.
    let outputs: Vec<Value> = f.values.iter().filter(|v| v.computed).rev().take(2).cloned().collect();
    if outputs.is_empty() {
        return Ok(());
    }
    let named: Vec<(String, Operand)> = outputs.iter().enumerate().map(|(i, v)| (format!("y{i}"), v.operand)).collect();
    let log = f.log.join("\n");
    let Fuzz { mut builder, feeds, .. } = f;
    let description = builder.prepare_build(&named).map_err(|e| TestCaseError::fail(format!("build() of accepted operators failed: {e}\n{log}")))?;
    let reachable: Vec<String> = description.inputs.keys().cloned().collect();
    let graph = no_panic("build()", || block_on(ctx.compile(description)))?
        .map_err(|e| TestCaseError::fail(format!("build() of accepted operators failed: {e}\n{log}")))?;
    let run = || -> webnn_wgpu::Result<Vec<Vec<u8>>> {
        block_on(async {
            let mut inputs = Vec::new();
            for (name, host) in feeds.iter().filter(|(n, _)| reachable.contains(&n)) {
                let t = ctx.create_tensor(TensorDescriptor { operand: host.descriptor.clone(), readable: false, writable: true }).await?;
                ctx.write_tensor(&t, &host.to_bytes())?;
                inputs.push((name.clone(), t));
            }
            let mut results: Vec<(String, B::Tensor)> = Vec::new();
            for (i, v) in outputs.iter().enumerate() {
                let operand = v.host.descriptor.clone();
                results.push((format!("y{i}"), ctx.create_tensor(TensorDescriptor { operand, readable: true, writable: false }).await?));
            }
            ctx.dispatch(&graph, &inputs, &results)?;
            let mut bytes = Vec::new();
            for (_, t) in &results {
                bytes.push(ctx.read_tensor(t).await?);
            }
            for (_, t) in inputs.iter().chain(&results) {
                t.destroy();
            }
            Ok(bytes)
        })
    };
    let bytes = no_panic("dispatch()", run)?.map_err(|e| TestCaseError::fail(format!("dispatch failed: {e}\n{log}")))?;
    webnn_wgpu::backend::BackendGraph::destroy(&graph);
    if let Some(e) = device_error() {
        return Err(TestCaseError::fail(format!("GPU validation error: {e}\n{log}")));
    }
    bump(&stats.graphs, 1);
    for (i, (v, b)) in outputs.iter().zip(&bytes).enumerate() {
        if !v.comparable {
            continue;
        }
        let gpu = HostTensor::from_bytes(v.host.descriptor.clone(), b).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let elements = compare(&gpu, &v.host, v.depth).map_err(|m| TestCaseError::fail(format!("output y{i}: {m}\n{log}")))?;
        bump(&stats.compared, 1);
        bump(&stats.compared_elements, elements);
    }
    Ok(())
}

/// Compares every element: integers exactly (int64/uint64 as exact integers), floats within
/// `depth` times a per-type relative tolerance of the output's largest magnitude (at least 1).
/// Returns the number of elements compared.
fn compare(gpu: &HostTensor, reference: &HostTensor, depth: u32) -> Result<usize, String> {
    let t = gpu.descriptor.data_type;
    let count = reference.descriptor.element_count() as usize;
    if t.is_wide() {
        if gpu.exact.len() != count || reference.exact.len() != count {
            return Err(format!("{} elements from the GPU, {} in the reference, {count} expected", gpu.exact.len(), reference.exact.len()));
        }
        if let Some(i) = (0..count).find(|&i| gpu.exact[i] != reference.exact[i]) {
            return Err(format!("element {i} of {}: gpu {} vs reference {}", gpu.descriptor, gpu.exact[i], reference.exact[i]));
        }
        return Ok(count);
    }
    if gpu.data.len() != count || reference.data.len() != count {
        return Err(format!("{} elements from the GPU, {} in the reference, {count} expected", gpu.data.len(), reference.data.len()));
    }
    let scale = reference.data.iter().fold(1f64, |m, v| m.max(v.abs()));
    let rtol = if t == DataType::Float16 { 1e-2 } else { 1e-3 };
    let tol = rtol * depth.max(1) as f64 * scale;
    for (i, (&g, &r)) in gpu.data.iter().zip(&reference.data).enumerate() {
        let ok = if t.is_float() { (g - r).abs() <= tol } else { g == r };
        if !ok {
            return Err(format!("element {i} of {}: gpu {g} vs reference {r} (tolerance {tol})", gpu.descriptor));
        }
    }
    Ok(count)
}

/// Explicit cases kept as regression tests: shapes and types the random search reached that
/// once broke the fuzzer or are edge cases worth running on every run.
fn regression_corpus() -> Vec<Case> {
    let input = |data_type: u8, shape: &[u32], constant: bool| InputSpec { data_type, shape: shape.to_vec(), constant };
    let step = |family: u8, a: u8, b: u8, knobs: [u16; 6], corrupt: bool| Step { family, a, b, knobs, corrupt };
    let mut corpus = vec![
        // An int64 operand taken to rank 4 for conv2d: the reshape rejects the type, conv2d
        // must then reject the operand with a TypeError.
        Case { inputs: vec![input(0, &[], false), input(97, &[], false)], steps: vec![step(10, 151, 0, [0; 6], false)], seed: 0 },
        // A dimension of 0 is a TypeError at input(); the case falls back to a valid input.
        Case { inputs: vec![input(0, &[2, 0], false)], steps: vec![step(1, 0, 0, [4, 0, 0, 0, 0, 0], false)], seed: 1 },
        // Scalars through reduce (no axes), pad, gather (axis out of range) and matmul (rank 0).
        Case {
            inputs: vec![input(0, &[], false), input(75, &[], true)],
            steps: vec![step(3, 0, 0, [8, 0, 0, 1, 0, 0], false), step(13, 0, 0, [0; 6], false), step(12, 1, 0, [0; 6], false), step(8, 0, 0, [0; 6], false)],
            seed: 2,
        },
        // Size-1 dimensions everywhere: broadcasting, softmax and pooling over 1x1 windows.
        Case {
            inputs: vec![input(0, &[1, 1, 1, 1], false), input(60, &[1, 3, 1, 2], false)],
            steps: vec![step(0, 0, 1, [0, 7, 0, 0, 0, 0], false), step(9, 2, 0, [0, 3, 0, 0, 0, 0], false), step(11, 1, 0, [2, 1, 0, 1, 1, 1], false)],
            seed: 3,
        },
    ];
    // Every family once on a rank-3 float32 input, then corrupted.
    for corrupt in [false, true] {
        corpus.push(Case {
            inputs: vec![input(0, &[2, 3, 4], false), input(0, &[3, 4], true)],
            steps: (0..FAMILIES).map(|f| step(f, 0, 1, [f as u16 * 3 + 1, 5, 6, 7, 9, 11], corrupt)).collect(),
            seed: 4,
        });
    }
    corpus
}

#[test]
fn regressions() {
    let ctx = context();
    let stats = Stats::default();
    for (i, case) in regression_corpus().iter().enumerate() {
        if let Err(e) = run_case(&ctx, &stats, case) {
            panic!("regression case {i} failed: {e}\n{case:?}");
        }
    }
    assert!(stats.graphs.get() >= 4, "the corpus stopped reaching the GPU");
    assert!(stats.compared.get() >= 4 && stats.compared_elements.get() >= 24, "the corpus compared {} outputs, {} elements", stats.compared.get(), stats.compared_elements.get());
}

/// Lower bounds of what `random_graphs` compares (see the end of it).
const MIN_CASES_PER_COMPARED: u32 = 4;
const MIN_ELEMENTS_PER_OUTPUT: u32 = 2;

fn cases() -> u32 {
    std::env::var("GRAPH_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(256)
}

#[test]
fn random_graphs() {
    let config = Config {
        cases: cases(),
        failure_persistence: Some(Box::new(FileFailurePersistence::SourceParallel("proptest-regressions"))),
        source_file: Some(file!()),
        max_shrink_iters: 2000,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let start = std::time::Instant::now();
    let ctx = context();
    let stats = Stats::default();
    let result = runner.run(&case_strategy(), |case| run_case(&ctx, &stats, &case));
    eprintln!(
        "graph_fuzz: {} cases in {:.1} s: {} operators accepted, {} rejected with TypeError, {} graphs run, {} outputs compared ({} elements)",
        cases(),
        start.elapsed().as_secs_f64(),
        stats.accepted.get(),
        stats.rejected.get(),
        stats.graphs.get(),
        stats.compared.get(),
        stats.compared_elements.get()
    );
    if let Err(e) = result {
        panic!("{e}");
    }
    // A fuzzer whose outputs stopped being compared (all ill-conditioned, all rejected) must not
    // pass: at least one compared output per MIN_CASES_PER_COMPARED cases (the default 256
    // cases compare about six times as many), and MIN_ELEMENTS_PER_OUTPUT elements each.
    let min_outputs = cases() / MIN_CASES_PER_COMPARED;
    assert!(
        stats.compared.get() >= min_outputs && stats.compared_elements.get() >= min_outputs * MIN_ELEMENTS_PER_OUTPUT,
        "{} outputs ({} elements) compared over {} cases, fewer than {} outputs of {} elements",
        stats.compared.get(),
        stats.compared_elements.get(),
        cases(),
        min_outputs,
        MIN_ELEMENTS_PER_OUTPUT
    );
}
