//! Differential tests of int64 and uint64 (two 32-bit words per element on the GPU) against the
//! exact reference: random values beyond 2^32 and 2^53, negative ones, the extremes and
//! overflowing sums and products (which wrap), through every operator that lists the 64-bit types
//! in `opSupportLimits()`; and a check that the list is exactly those operators.
#![cfg(not(target_arch = "wasm32"))] // native: `wasm-pack test` builds every test target for wasm32

mod common;
use common::*;
use webnn_wgpu::graph::{DataType, Number, OperandDescriptor};
use webnn_wgpu::ops::activation::Activation;
use webnn_wgpu::ops::concat::Splits;
use webnn_wgpu::ops::elementwise_binary::BinaryOp;
use webnn_wgpu::ops::elementwise_unary::UnaryOp;
use webnn_wgpu::ops::logical::LogicalOp;
use webnn_wgpu::ops::pad::{PadOptions, PaddingMode};
use webnn_wgpu::ops::slice::SliceOptions;
use webnn_wgpu::ops::triangular::TriangularOptions;
use webnn_wgpu::ops::{self, HostTensor, Op};

const WIDE: [DataType; 2] = [DataType::Int64, DataType::Uint64];

fn exact(data_type: DataType, values: &[i128]) -> HostTensor {
    let d = OperandDescriptor::new(data_type, vec![values.len() as u32]);
    HostTensor::from_exact(d, values.to_vec()).unwrap()
}

#[test]
fn arithmetic_wraps_and_compares_exactly() {
    let ctx = context();
    let mut rng = Rng::new(64);
    for t in WIDE {
        let a = rng.wide_tensor(t, &[3, 17]);
        let b = rng.wide_tensor(t, &[17]);
        for op in [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Max, BinaryOp::Min] {
            check_op(&ctx, &Op::Binary(op), &[a.clone(), b.clone()], 0, 0.0);
        }
        for op in [
            LogicalOp::Equal,
            LogicalOp::NotEqual,
            LogicalOp::Greater,
            LogicalOp::GreaterOrEqual,
            LogicalOp::Lesser,
            LogicalOp::LesserOrEqual,
        ] {
            check_op(&ctx, &Op::Logical(op), &[a.clone(), b.clone()], 0, 0.0);
            // Equal operands, and values 1 apart above 2^53 (the same double).
            check_op(&ctx, &Op::Logical(op), &[a.clone(), a.clone()], 0, 0.0);
            let above = exact(t, &[(1 << 53) + 1, (1 << 60) + 3, 5]);
            let below = exact(t, &[1 << 53, (1 << 60) + 4, 5]);
            check_op(&ctx, &Op::Logical(op), &[above, below], 0, 0.0);
        }
        check_op(&ctx, &Op::Unary(UnaryOp::Identity), &[a.clone()], 0, 0.0);
        let bound = |v: i128| Some(Number::BigInt(v));
        for (min_value, max_value) in [
            (bound(-(1 << 53) - 7), bound((1 << 53) + 3)),
            (Some(Number::Double(-5.0)), None),
            (None, bound(1 << 40)),
            (None, None),
        ] {
            check_op(&ctx, &Op::Activation(Activation::Clamp { min_value, max_value }), &[a.clone()], 0, 0.0);
        }
    }
    // The signed-only operators (the spec's lists have int64 but not uint64).
    let a = rng.wide_tensor(DataType::Int64, &[2, 33]);
    for op in [UnaryOp::Abs, UnaryOp::Neg, UnaryOp::Sign] {
        check_op(&ctx, &Op::Unary(op), &[a.clone()], 0, 0.0);
    }
    check_op(&ctx, &Op::Activation(Activation::Relu), &[a], 0, 0.0);
}

#[test]
fn overflow_wraps_to_64_bits() {
    let ctx = context();
    let max = i64::MAX as i128;
    let min = i64::MIN as i128;
    let a = exact(DataType::Int64, &[max, min, min, 1 << 32, -(1 << 40), 0xffff_ffff]);
    let b = exact(DataType::Int64, &[1, -1, -1, 1 << 32, 1 << 30, 0xffff_ffff]);
    let reference = reference_op(&Op::Binary(BinaryOp::Add), &[a.clone(), b.clone()]).unwrap();
    assert_eq!(reference[0].exact, vec![min, max, max, 1 << 33, -(1 << 40) + (1 << 30), 0x1_ffff_fffe]);
    let product = reference_op(&Op::Binary(BinaryOp::Mul), &[a.clone(), b.clone()]).unwrap();
    assert_eq!(product[0].exact[3], 0, "2^32 * 2^32 wraps to 0");
    assert_eq!(product[0].exact[5], 0xffff_fffe_0000_0001u64 as i64 as i128, "(2^32 - 1)^2 wraps negative");
    for op in [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul] {
        check_op(&ctx, &Op::Binary(op), &[a.clone(), b.clone()], 0, 0.0);
    }
    // abs and neg of the most negative value wrap to itself.
    check_op(&ctx, &Op::Unary(UnaryOp::Neg), &[exact(DataType::Int64, &[min, max, 0])], 0, 0.0);
    check_op(&ctx, &Op::Unary(UnaryOp::Abs), &[exact(DataType::Int64, &[min, max, -1])], 0, 0.0);
    let u = exact(DataType::Uint64, &[0, 1, u64::MAX as i128]);
    let v = exact(DataType::Uint64, &[1, u64::MAX as i128, u64::MAX as i128]);
    check_op(&ctx, &Op::Binary(BinaryOp::Sub), &[u.clone(), v.clone()], 0, 0.0);
    check_op(&ctx, &Op::Binary(BinaryOp::Add), &[u, v], 0, 0.0);
}

#[test]
fn cast_to_and_from_every_type() {
    let ctx = context();
    let mut rng = Rng::new(7);
    let narrow = [DataType::Float32, DataType::Float16, DataType::Int32, DataType::Uint32, DataType::Int8, DataType::Uint8];
    for t in WIDE {
        let x = rng.wide_tensor(t, &[5, 13]);
        for to in DataType::ALL {
            check_op(&ctx, &Op::Cast { data_type: to }, &[x.clone()], 0, 0.0);
        }
        // float32 rounding of integers between 2^24 and 2^64: ties and sticky bits.
        let ties = exact(t, &[(1 << 24) + 1, (1 << 24) + 3, (1 << 40) + (1 << 16), (1 << 40) + (1 << 16) + 1, (1 << 53) + 1]);
        check_op(&ctx, &Op::Cast { data_type: DataType::Float32 }, &[ties], 0, 0.0);
        for from in narrow {
            // Floats beyond +-2^64 saturate, NaN gives 0; integers sign- or zero-extend.
            let (lo, hi) = if from.is_float() { (-3e19, 3e19) } else { (-3e9, 5e9) };
            let mut x = rng.tensor(from, &[4, 16], lo, hi);
            if from.is_float() {
                x.data[..6].copy_from_slice(&[f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.5, -2.5, 12345.75]);
                x = HostTensor::new(x.descriptor.clone(), x.data.iter().map(|&v| ops::reference::round_to(v, from)).collect())
                    .unwrap();
            }
            check_op(&ctx, &Op::Cast { data_type: t }, &[x], 0, 0.0);
        }
    }
}

#[test]
fn data_movement_keeps_every_bit() {
    let ctx = context();
    let mut rng = Rng::new(11);
    for t in WIDE {
        let x = rng.wide_tensor(t, &[3, 4, 5]);
        let y = rng.wide_tensor(t, &[3, 2, 5]);
        let ops = [
            Op::Reshape { new_shape: vec![12, 5] },
            Op::Expand { new_shape: vec![2, 3, 4, 5] },
            Op::Transpose { permutation: Some(vec![2, 0, 1]) },
            Op::Slice(SliceOptions { starts: vec![1, 0, 1], sizes: vec![2, 3, 3], strides: Some(vec![1, 2, 1]) }),
            Op::Tile { repetitions: vec![1, 2, 2] },
            Op::Reverse { axes: Some(vec![0, 2]) },
            Op::Triangular(TriangularOptions { upper: false, diagonal: 1 }),
            Op::Pad(PadOptions {
                beginning_padding: vec![1, 0, 2],
                ending_padding: vec![0, 1, 1],
                mode: PaddingMode::Constant,
                value: Number::BigInt((1 << 53) + 1),
            }),
            Op::Pad(PadOptions {
                beginning_padding: vec![1, 2, 0],
                ending_padding: vec![2, 1, 3],
                mode: PaddingMode::Reflection,
                value: Number::Double(0.0),
            }),
        ];
        for op in &ops {
            check_op(&ctx, op, &[x.clone()], 0, 0.0);
        }
        check_op(&ctx, &Op::Concat { axis: 1 }, &[x.clone(), y.clone(), x.clone()], 0, 0.0);
        check_op(&ctx, &Op::Split { splits: Splits::Sizes(vec![1, 3]), axis: 1 }, &[x.clone()], 0, 0.0);
        let condition = rng.tensor(DataType::Uint8, &[4, 1], 0.0, 2.0);
        check_op(&ctx, &Op::Where, &[condition, x.clone(), rng.wide_tensor(t, &[5])], 0, 0.0);
        for indices_type in [DataType::Int32, DataType::Uint32, DataType::Int64] {
            let lo = if indices_type == DataType::Uint32 { 0.0 } else { -4.0 };
            let indices = rng.tensor(indices_type, &[2, 3], lo, 4.0);
            check_op(&ctx, &Op::Gather { axis: 1 }, &[x.clone(), indices.clone()], 0, 0.0);
            let elements = rng.tensor(indices_type, &[3, 2, 5], lo, 4.0);
            check_op(&ctx, &Op::GatherElements { axis: 1 }, &[x.clone(), elements.clone()], 0, 0.0);
            let updates = rng.wide_tensor(t, &[3, 2, 5]);
            check_op(&ctx, &Op::ScatterElements { axis: 1 }, &[x.clone(), elements, updates], 0, 0.0);
            let nd = rng.tensor(indices_type, &[4, 2], if lo < 0.0 { -3.0 } else { 0.0 }, 3.0);
            check_op(&ctx, &Op::GatherNd, &[x.clone(), nd.clone()], 0, 0.0);
            check_op(&ctx, &Op::ScatterNd, &[x.clone(), nd, rng.wide_tensor(t, &[4, 5])], 0, 0.0);
        }
    }
    // int64 indices far outside the i32 range clamp to the ends of the axis.
    let x = rng.tensor(DataType::Float32, &[6], -10.0, 10.0);
    let indices = exact(DataType::Int64, &[i64::MIN as i128, -(1 << 40), -6, -1, 5, 1 << 40, i64::MAX as i128]);
    check_op(&ctx, &Op::Gather { axis: 0 }, &[x, indices], 0, 0.0);
}

/// `opSupportLimits()` lists int64/uint64 exactly where the kernels above handle them.
#[test]
fn support_limits_list_64_bit_types_where_they_work() {
    let mut listed: Vec<(&str, bool, bool)> = Vec::new();
    for op in ops::limits::all() {
        let first = &op.operands[0].data_types;
        let any_index = op.operands.iter().any(|l| l.name == "indices" && l.data_types.contains(&DataType::Int64));
        if first.contains(&DataType::Int64) || first.contains(&DataType::Uint64) || any_index {
            listed.push((op.name, first.contains(&DataType::Int64), first.contains(&DataType::Uint64)));
        }
    }
    let expected: Vec<(&str, bool, bool)> = vec![
        ("abs", true, false),
        ("add", true, true),
        ("cast", true, true),
        ("clamp", true, true),
        ("concat", true, true),
        ("equal", true, true),
        ("expand", true, true),
        ("gather", true, true),
        ("gatherElements", true, true),
        ("gatherND", true, true),
        ("greater", true, true),
        ("greaterOrEqual", true, true),
        ("identity", true, true),
        ("lesser", true, true),
        ("lesserOrEqual", true, true),
        ("max", true, true),
        ("min", true, true),
        ("mul", true, true),
        ("neg", true, false),
        ("notEqual", true, true),
        ("pad", true, true),
        ("relu", true, false),
        ("reshape", true, true),
        ("reverse", true, true),
        ("scatterElements", true, true),
        ("scatterND", true, true),
        ("sign", true, false),
        ("slice", true, true),
        ("split", true, true),
        ("sub", true, true),
        ("tile", true, true),
        ("transpose", true, true),
        ("triangular", true, true),
    ];
    assert_eq!(listed, expected);
}

/// `constant(dataType, value)` keeps a bigint beyond 2^53 exact (a double would round it).
#[test]
fn bigint_scalar_constant_is_exact() {
    use webnn_wgpu::graph::GraphBuilder;
    use webnn_wgpu::backend::webgpu::TensorDescriptor;
    let ctx = context();
    for (t, value) in [(DataType::Int64, -(1i128 << 53) - 1), (DataType::Uint64, u64::MAX as i128 - 2)] {
        let got = block_on(async {
            let mut builder = GraphBuilder::new(&ctx)?;
            let c = builder.constant_scalar(t, Number::BigInt(value))?;
            let out = builder.operator(Op::Unary(UnaryOp::Identity), &[c], "")?[0];
            let graph = builder.build(&[("out".to_string(), out)]).await?;
            let d = OperandDescriptor::new(t, vec![]);
            let tensor =
                ctx.create_tensor(TensorDescriptor { operand: d.clone(), readable: true, writable: false }).await?;
            ctx.dispatch(&graph, &[], &[("out".to_string(), tensor.clone())])?;
            HostTensor::from_bytes(d, &ctx.read_tensor(&tensor).await?)
        })
        .unwrap();
        assert_eq!(got.exact, vec![value], "{t}");
    }
}
