//! Operator fusion at build(): element-wise chains in one kernel, chains after matmul, gemm and
//! conv2d applied in their store, and reductions with the chain reading them back over their rows.
//! Every graph is checked against the float64 reference of its operators run one by one, and its
//! dispatch count against what fusion should leave.
#![cfg(not(target_arch = "wasm32"))] // native: `wasm-pack test` builds every test target for wasm32

mod common;

use common::{assert_close, block_on, context, reference_op, Rng};
use webnn_wgpu::graph::{DataType, GraphBuilder, Number, OperandDescriptor};
use webnn_wgpu::ops::activation::Activation;
use webnn_wgpu::ops::conv2d::Conv2dOptions;
use webnn_wgpu::ops::elementwise_binary::BinaryOp;
use webnn_wgpu::ops::elementwise_unary::UnaryOp;
use webnn_wgpu::ops::matmul::GemmOptions;
use webnn_wgpu::ops::normalization::LayerNormalizationOptions;
use webnn_wgpu::ops::reduce::{ReduceOp, ReduceOptions};
use webnn_wgpu::ops::reference::round_to;
use webnn_wgpu::ops::{HostTensor, Op};
use webnn_wgpu::backend::webgpu::{Context, Tensor, TensorDescriptor};

/// A graph: operands 0..inputs.len() are the inputs (or constants), then one per operator.
struct Case {
    inputs: Vec<(HostTensor, bool)>,
    ops: Vec<(Op, Vec<usize>)>,
    outputs: Vec<usize>,
}

/// Runs the graph; returns the GPU outputs, the reference outputs and the dispatch count.
fn run(ctx: &Context, case: &Case) -> (Vec<HostTensor>, Vec<HostTensor>, usize) {
    let mut host: Vec<HostTensor> = case.inputs.iter().map(|(t, _)| t.clone()).collect();
    for (op, args) in &case.ops {
        let inputs: Vec<HostTensor> = args.iter().map(|&a| host[a].clone()).collect();
        let out = reference_op(op, &inputs).unwrap_or_else(|e| panic!("reference of {}: {e}", op.name()));
        host.push(out.into_iter().next().unwrap());
    }
    let reference: Vec<HostTensor> = case.outputs.iter().map(|&o| host[o].clone()).collect();
    let (gpu, steps) = block_on(async {
        let mut b = GraphBuilder::new(ctx).unwrap();
        let mut operands = Vec::new();
        let mut feeds: Vec<(String, Tensor)> = Vec::new();
        for (k, (t, constant)) in case.inputs.iter().enumerate() {
            if *constant {
                operands.push(b.constant(t.descriptor.clone(), &t.to_bytes()).unwrap());
            } else {
                let name = format!("in{k}");
                operands.push(b.input(&name, t.descriptor.clone()).unwrap());
                let tensor = ctx
                    .create_tensor(TensorDescriptor { operand: t.descriptor.clone(), readable: false, writable: true })
                    .await
                    .unwrap();
                ctx.write_tensor(&tensor, &t.to_bytes()).unwrap();
                feeds.push((name, tensor));
            }
        }
        for (op, args) in &case.ops {
            let inputs: Vec<_> = args.iter().map(|&a| operands[a]).collect();
            operands.push(b.operator1(op.clone(), &inputs, "").unwrap());
        }
        let named: Vec<_> = case.outputs.iter().enumerate().map(|(k, &o)| (format!("out{k}"), operands[o])).collect();
        let graph = b.build(&named).await.unwrap();
        let mut outs = Vec::new();
        for (k, r) in reference.iter().enumerate() {
            let t = ctx
                .create_tensor(TensorDescriptor { operand: r.descriptor.clone(), readable: true, writable: false })
                .await
                .unwrap();
            outs.push((format!("out{k}"), t));
        }
        ctx.dispatch(&graph, &feeds, &outs).unwrap();
        let mut gpu = Vec::new();
        for (r, (_, t)) in reference.iter().zip(&outs) {
            gpu.push(HostTensor::from_bytes(r.descriptor.clone(), &ctx.read_tensor(t).await.unwrap()).unwrap());
        }
        (gpu, graph.step_count())
    });
    (gpu, reference, steps)
}

fn check(ctx: &Context, case: &Case, steps: usize, ulp: u64, abs: f64, what: &str) {
    let (gpu, reference, got) = run(ctx, case);
    assert_close(&gpu, &reference, ulp, abs, what);
    assert_eq!(got, steps, "{what}: dispatches");
}

fn add(a: usize, b: usize) -> (Op, Vec<usize>) {
    (Op::Binary(BinaryOp::Add), vec![a, b])
}
fn binary(op: BinaryOp, a: usize, b: usize) -> (Op, Vec<usize>) {
    (Op::Binary(op), vec![a, b])
}
fn act(op: Activation, a: usize) -> (Op, Vec<usize>) {
    (Op::Activation(op), vec![a])
}
fn unary(op: UnaryOp, a: usize) -> (Op, Vec<usize>) {
    (Op::Unary(op), vec![a])
}
fn cast(data_type: DataType, a: usize) -> (Op, Vec<usize>) {
    (Op::Cast { data_type }, vec![a])
}
fn reduce(op: ReduceOp, axes: &[u32], keep_dimensions: bool, a: usize) -> (Op, Vec<usize>) {
    (Op::Reduce(op, ReduceOptions { axes: Some(axes.to_vec()), keep_dimensions }), vec![a])
}
fn clamp(lo: f64, hi: f64) -> Activation {
    Activation::Clamp { min_value: Some(Number::Double(lo)), max_value: Some(Number::Double(hi)) }
}

#[test]
fn element_wise_chain_with_broadcasting_is_one_kernel() {
    let ctx = context();
    let mut rng = Rng::new(1);
    for constant in [false, true] {
        let case = Case {
            inputs: vec![
                (rng.tensor(DataType::Float32, &[2, 3, 4], -2.0, 2.0), false),
                (rng.tensor(DataType::Float32, &[4], -1.0, 1.0), constant),
                (rng.tensor(DataType::Float32, &[3, 1], 0.5, 2.0), constant),
                (rng.tensor(DataType::Float32, &[], 0.5, 2.0), constant),
            ],
            // ((x + b) relu * c) sigmoid - s, then exp and tanh: the ops' own expressions.
            ops: vec![
                add(0, 1),
                act(Activation::Relu, 4),
                binary(BinaryOp::Mul, 5, 2),
                act(Activation::Sigmoid, 6),
                binary(BinaryOp::Sub, 7, 3),
                unary(UnaryOp::Exp, 8),
                act(Activation::Tanh, 9),
            ],
            outputs: vec![10],
        };
        check(&ctx, &case, 1, 8, 1e-6, "float32 chain");
    }
    // A chain whose first operands are smaller than the output: broadcast late.
    let case = Case {
        inputs: vec![
            (rng.tensor(DataType::Float32, &[4], -2.0, 2.0), false),
            (rng.tensor(DataType::Float32, &[1, 4], -2.0, 2.0), false),
            (rng.tensor(DataType::Float32, &[3, 2, 1], -2.0, 2.0), false),
        ],
        ops: vec![binary(BinaryOp::Max, 0, 1), act(Activation::LeakyRelu { alpha: 0.2 }, 3), add(4, 2), act(Activation::Gelu, 5)],
        outputs: vec![6],
    };
    check(&ctx, &case, 1, 8, 1e-6, "late broadcast");
    // The same intermediate twice in one operator, and prelu (two inputs) in the chain.
    let case = Case {
        inputs: vec![
            (rng.tensor(DataType::Float32, &[5, 6], -2.0, 2.0), false),
            (rng.tensor(DataType::Float32, &[6], 0.0, 0.5), false),
        ],
        ops: vec![unary(UnaryOp::Neg, 0), binary(BinaryOp::Mul, 2, 2), (Op::Activation(Activation::Prelu), vec![3, 1])],
        outputs: vec![4],
    };
    check(&ctx, &case, 1, 2, 0.0, "square and prelu");
}

#[test]
fn chains_split_at_the_binding_limit() {
    let ctx = context();
    let mut rng = Rng::new(9);
    // x0 + x1 + ... + x9: ten inputs do not fit one kernel's storage bindings (8 by default, at
    // most 8 chain inputs): two kernels.
    let inputs: Vec<(HostTensor, bool)> = (0..10).map(|_| (rng.tensor(DataType::Float32, &[3, 4], -1.0, 1.0), false)).collect();
    let mut ops = vec![add(0, 1)];
    for k in 2..10 {
        ops.push(add(10 + k - 2, k));
    }
    let case = Case { inputs, ops, outputs: vec![18] };
    check(&ctx, &case, 2, 4, 1e-6, "ten inputs");
}

#[test]
fn shared_intermediates_and_outputs_are_not_fused() {
    let ctx = context();
    let mut rng = Rng::new(2);
    let x = rng.tensor(DataType::Float32, &[3, 7], -2.0, 2.0);
    // t = exp(x) has two consumers: it is written, and u and v read it (3 dispatches).
    let case = Case {
        inputs: vec![(x.clone(), false)],
        ops: vec![unary(UnaryOp::Exp, 0), act(Activation::Relu, 1), binary(BinaryOp::Mul, 1, 0)],
        outputs: vec![2, 3],
    };
    check(&ctx, &case, 3, 4, 0.0, "two consumers");
    // t = relu(x) is an output and the input of tanh: both kernels stay, the rest fuses.
    let case = Case {
        inputs: vec![(x, false)],
        ops: vec![act(Activation::Relu, 0), act(Activation::Tanh, 1), unary(UnaryOp::Abs, 2), unary(UnaryOp::Sqrt, 3)],
        outputs: vec![1, 4],
    };
    check(&ctx, &case, 2, 4, 1e-7, "intermediate output");
}

#[test]
fn float16_int32_int8_and_casts_fuse_with_their_storage_rounding() {
    let ctx = context();
    let mut rng = Rng::new(3);
    // float16: intermediates rounded to float16 as between separate kernels.
    let case = Case {
        inputs: vec![
            (rng.tensor(DataType::Float16, &[4, 33], -3.0, 3.0), false),
            (rng.tensor(DataType::Float16, &[33], -1.0, 1.0), false),
        ],
        ops: vec![act(Activation::Gelu, 0), add(2, 1), act(clamp(-0.5, 1.5), 3), binary(BinaryOp::Mul, 4, 4)],
        outputs: vec![5],
    };
    check(&ctx, &case, 1, 1, 0.0, "float16 chain");
    // int32: exact.
    let case = Case {
        inputs: vec![
            (rng.tensor(DataType::Int32, &[3, 5], -100.0, 100.0), false),
            (rng.tensor(DataType::Int32, &[5], -10.0, 10.0), false),
        ],
        ops: vec![
            binary(BinaryOp::Mul, 0, 1),
            add(2, 0),
            act(Activation::Relu, 3),
            binary(BinaryOp::Min, 4, 1),
            act(clamp(-3.0, 7.0), 5),
            unary(UnaryOp::Neg, 6),
        ],
        outputs: vec![7],
    };
    check(&ctx, &case, 1, 0, 0.0, "int32 chain");
    // Casts in the middle: float32 -> int32 (truncation) -> float16, and int8 sums that wrap
    // before the cast to float32 reads them.
    let case = Case {
        inputs: vec![
            (rng.tensor(DataType::Float32, &[2, 9], -50.0, 50.0), false),
            (rng.tensor(DataType::Int32, &[9], -5.0, 5.0), false),
        ],
        ops: vec![
            binary(BinaryOp::Mul, 0, 0),
            cast(DataType::Int32, 2),
            add(3, 1),
            cast(DataType::Float16, 4),
            unary(UnaryOp::Sqrt, 5),
        ],
        outputs: vec![6],
    };
    check(&ctx, &case, 1, 1, 0.0, "casts in the middle");
    // The reference saturates int8 overflow, the kernels wrap it (both allowed): the fused
    // kernel must wrap the intermediate as a store would.
    let (a, b) = (rng.tensor(DataType::Int8, &[37], -127.0, 127.0), rng.tensor(DataType::Int8, &[37], 60.0, 127.0));
    let wrapped: Vec<f64> = a.data.iter().zip(&b.data).map(|(&x, &y)| ((x + y) as i32 as i8 as f64).max(0.0)).collect();
    let case = Case {
        inputs: vec![(a, false), (b, false)],
        ops: vec![add(0, 1), cast(DataType::Float32, 2), act(Activation::Relu, 3)],
        outputs: vec![4],
    };
    let (gpu, _, steps) = run(&ctx, &case);
    assert_eq!(gpu[0].data, wrapped, "int8 wrap then cast");
    assert!(wrapped.iter().any(|&v| v == 0.0) && wrapped.iter().any(|&v| v > 0.0));
    assert_eq!(steps, 1);
}

/// The dispatches of a graph holding only `op` on these inputs.
fn alone(ctx: &Context, op: &Op, inputs: &[HostTensor]) -> usize {
    let n = inputs.len();
    let case = Case {
        inputs: inputs.iter().map(|t| (t.clone(), false)).collect(),
        ops: vec![(op.clone(), (0..n).collect())],
        outputs: vec![n],
    };
    run(ctx, &case).2
}

#[test]
fn matmul_bias_relu_in_the_epilogue() {
    let ctx = context();
    let mut rng = Rng::new(4);
    // Shapes for each matmul kernel: GEMV (M = 1), dot (N = 1), direct (M = 9), tiled (with and
    // without bounds checks), batched, float16 with an odd N (tiles then packing).
    let shapes: &[(DataType, &[u32], &[u32])] = &[
        (DataType::Float32, &[1, 64], &[64, 40]),
        (DataType::Float32, &[5, 24], &[24, 1]),
        (DataType::Float32, &[9, 20], &[20, 24]),
        (DataType::Float32, &[64, 32], &[32, 64]),
        (DataType::Float32, &[33, 20], &[20, 40]),
        (DataType::Float32, &[2, 17, 8], &[8, 20]),
        (DataType::Float16, &[3, 16], &[16, 12]),
        (DataType::Float16, &[20, 16], &[16, 21]),
    ];
    for &(t, a_shape, b_shape) in shapes {
        let a = rng.tensor(t, a_shape, -1.0, 1.0);
        let b = rng.tensor(t, b_shape, -1.0, 1.0);
        let n = *b_shape.last().unwrap();
        let bias = rng.tensor(t, &[n], -1.0, 1.0);
        let base = alone(&ctx, &Op::Matmul, &[a.clone(), b.clone()]);
        let case = Case {
            inputs: vec![(a, false), (b, true), (bias, true)],
            ops: vec![(Op::Matmul, vec![0, 1]), add(3, 2), act(Activation::Relu, 4)],
            outputs: vec![5],
        };
        let what = format!("matmul {a_shape:?} x {b_shape:?} {t} + bias, relu");
        let (ulp, abs) = if t == DataType::Float16 { (2, 2e-3) } else { (16, 1e-5) };
        check(&ctx, &case, base, ulp, abs, &what);
    }
    // Residuals of the output's shape (one batch) load at the element's linear index.
    for (a_shape, b_shape, r_shape) in [(&[33u32, 20][..], &[20u32, 40][..], &[33u32, 40][..]), (&[1, 9, 20], &[20, 24], &[1, 9, 24])] {
        let a = rng.tensor(DataType::Float32, a_shape, -1.0, 1.0);
        let b = rng.tensor(DataType::Float32, b_shape, -1.0, 1.0);
        let r = rng.tensor(DataType::Float32, r_shape, -1.0, 1.0);
        let base = alone(&ctx, &Op::Matmul, &[a.clone(), b.clone()]);
        let case = Case {
            inputs: vec![(a, false), (b, false), (r, false)],
            ops: vec![(Op::Matmul, vec![0, 1]), add(2, 3), act(Activation::Sigmoid, 4)],
            outputs: vec![5],
        };
        check(&ctx, &case, base, 16, 1e-6, &format!("matmul {a_shape:?} x {b_shape:?} + residual, sigmoid"));
    }
    // A residual of the full batched shape varies with the batch: it is not fused.
    let a = rng.tensor(DataType::Float32, &[2, 17, 8], -1.0, 1.0);
    let b = rng.tensor(DataType::Float32, &[8, 20], -1.0, 1.0);
    let r = rng.tensor(DataType::Float32, &[2, 17, 20], -1.0, 1.0);
    let base = alone(&ctx, &Op::Matmul, &[a.clone(), b.clone()]);
    let case = Case {
        inputs: vec![(a, false), (b, false), (r, false)],
        ops: vec![(Op::Matmul, vec![0, 1]), add(3, 2), act(Activation::Relu, 4)],
        outputs: vec![5],
    };
    check(&ctx, &case, base + 1, 16, 1e-5, "batched matmul + full residual");
}

#[test]
fn gemm_gelu_and_cast_in_the_epilogue() {
    let ctx = context();
    let mut rng = Rng::new(5);
    for (a_transpose, b_transpose, m) in [(false, false, 24), (true, false, 3), (false, true, 40)] {
        let (k, n) = (16, 20);
        let a = rng.tensor(DataType::Float32, &if a_transpose { [k, m] } else { [m, k] }, -1.0, 1.0);
        let b = rng.tensor(DataType::Float32, &if b_transpose { [n, k] } else { [k, n] }, -1.0, 1.0);
        let c = rng.tensor(DataType::Float32, &[1, n], -1.0, 1.0);
        let o = GemmOptions { alpha: 0.5, beta: 2.0, a_transpose, b_transpose, has_c: true };
        let base = alone(&ctx, &Op::Gemm(o.clone()), &[a.clone(), b.clone(), c.clone()]);
        let case = Case {
            inputs: vec![(a, false), (b, false), (c, false)],
            ops: vec![(Op::Gemm(o.clone()), vec![0, 1, 2]), act(Activation::Gelu, 3)],
            outputs: vec![4],
        };
        check(&ctx, &case, base, 16, 1e-5, &format!("gemm {o:?} + gelu"));
        // The epilogue's cast changes the stored type.
        let mut case = case;
        case.ops.push(cast(DataType::Float16, 4));
        case.outputs = vec![5];
        check(&ctx, &case, base, 1, 1e-3, &format!("gemm {o:?} + gelu + cast"));
    }
}

/// An index tensor of `data_type` and `shape` holding `values`.
fn indices(data_type: DataType, shape: &[u32], values: &[f64]) -> HostTensor {
    HostTensor::new(OperandDescriptor::new(data_type, shape.to_vec()), values.to_vec()).unwrap()
}

#[test]
fn gathered_weights_are_read_in_place() {
    let ctx = context();
    let mut rng = Rng::new(11);
    let fused = std::env::var("WEBNN_WGPU_FUSION").map(|v| v != "0").unwrap_or(true);
    let gather = |a: usize, b: usize| (Op::Gather { axis: 0 }, vec![a, b]);
    let reshape = |shape: &[u32], a: usize| (Op::Reshape { new_shape: shape.to_vec() }, vec![a]);
    let (e, k, n) = (5u32, 24u32, 20u32);
    // Indices of every type, negative ones from the end, and out-of-range ones clamped.
    let picks = [
        indices(DataType::Int32, &[], &[3.0]),
        indices(DataType::Int32, &[1], &[-2.0]),
        indices(DataType::Uint32, &[1, 1], &[9.0]),
        indices(DataType::Int64, &[], &[-7.0]),
    ];
    for (p, pick) in picks.iter().enumerate() {
        // One row (GEMV), a few rows (direct), many (tiled or registers), float16.
        for (t, m) in [(DataType::Float32, 1), (DataType::Float32, 9), (DataType::Float32, 40), (DataType::Float16, 3)] {
            let a = rng.tensor(t, &[m, k], -1.0, 1.0);
            let stack = rng.tensor(t, &[e, k, n], -1.0, 1.0);
            let (ulp, abs) = if t == DataType::Float16 { (2, 2e-3) } else { (16, 1e-5) };
            let b = reference_op(&Op::Gather { axis: 0 }, &[stack.clone(), pick.clone()]).unwrap()[0].clone();
            let b = HostTensor::new(OperandDescriptor::new(t, vec![k, n]), b.data).unwrap();
            let base = alone(&ctx, &Op::Matmul, &[a.clone(), b]);
            // matmul(a, reshape(gather(stack, i))) + bias, relu: gather, matmul and chain in one.
            let bias = rng.tensor(t, &[n], -1.0, 1.0);
            let shape_b: &[u32] = &[k, n];
            let case = Case {
                inputs: vec![(a.clone(), false), (stack.clone(), p % 2 == 0), (pick.clone(), false), (bias, true)],
                ops: if pick.descriptor.rank() == 0 {
                    vec![gather(1, 2), (Op::Matmul, vec![0, 4]), add(5, 3), act(Activation::Relu, 6)]
                } else {
                    vec![gather(1, 2), reshape(shape_b, 4), (Op::Matmul, vec![0, 5]), add(6, 3), act(Activation::Relu, 7)]
                },
                outputs: vec![4 + if pick.descriptor.rank() == 0 { 3 } else { 4 }],
            };
            let what = format!("matmul [{m}, {k}] x gather({e}x{k}x{n} {t}, {} {:?}) + bias, relu", pick.descriptor.data_type, pick.data);
            check(&ctx, &case, if fused { base } else { base + 3 }, ulp, abs, &what);
        }
    }
    // gemm(h, W, {bTranspose}) with W an expert's [out, in] weight, alone (no epilogue), as the
    // MoE token graph applies its experts; and the same weight also read as a graph output: then
    // the gather's copy stays.
    let h = rng.tensor(DataType::Float32, &[1, k], -1.0, 1.0);
    let stack = rng.tensor(DataType::Float32, &[e, n * k], -1.0, 1.0);
    let o = GemmOptions { b_transpose: true, ..GemmOptions::default() };
    let pick = indices(DataType::Int32, &[], &[1.0]);
    let w = HostTensor::new(OperandDescriptor::new(DataType::Float32, vec![n, k]), stack.data[(n * k) as usize..(2 * n * k) as usize].to_vec()).unwrap();
    let base = alone(&ctx, &Op::Gemm(o.clone()), &[h.clone(), w]);
    let mut case = Case {
        inputs: vec![(h, false), (stack, true), (pick, false)],
        ops: vec![gather(1, 2), reshape(&[n, k], 3), (Op::Gemm(o.clone()), vec![0, 4])],
        outputs: vec![5],
    };
    check(&ctx, &case, if fused { base } else { base + 1 }, 16, 1e-5, "gemm(h, gather(stack, 1), bTranspose)");
    case.outputs = vec![5, 4];
    let (gpu, reference, steps) = run(&ctx, &case);
    assert_close(&gpu, &reference, 16, 1e-5, "gathered weight as an output too");
    // The gather's kernel (and a copy for the reshape's alias of an output) stays.
    assert!(steps > base, "gathered weight as an output too: {steps} dispatches, the gemm alone {base}");
}

#[test]
fn conv2d_add_clamp_in_the_epilogue() {
    let ctx = context();
    let mut rng = Rng::new(6);
    for (t, has_bias) in [(DataType::Float32, true), (DataType::Float32, false), (DataType::Float16, true)] {
        let input = rng.tensor(t, &[1, 3, 6, 5], -1.0, 1.0);
        let filter = rng.tensor(t, &[4, 3, 3, 3], -1.0, 1.0);
        let bias = rng.tensor(t, &[4], -1.0, 1.0);
        // Broadcast per channel, or of the output's shape.
        let residual = rng.tensor(t, if has_bias { &[4, 1, 1] } else { &[1, 4, 6, 5] }, -1.0, 1.0);
        let o = Conv2dOptions { padding: Some(vec![1, 1, 1, 1]), has_bias, ..Default::default() };
        let mut inputs = vec![(input, false), (filter, true)];
        let mut conv_args = vec![0, 1];
        if has_bias {
            inputs.push((bias, true));
            conv_args.push(2);
        }
        let r = inputs.len();
        inputs.push((residual, false));
        let conv = r + 1;
        let case = Case {
            inputs,
            ops: vec![(Op::Conv2d(o), conv_args), add(conv, r), act(clamp(-0.5, 0.75), conv + 1)],
            outputs: vec![conv + 2],
        };
        let (ulp, abs) = if t == DataType::Float16 { (2, 2e-3) } else { (16, 1e-5) };
        check(&ctx, &case, 1, ulp, abs, &format!("conv2d {t} bias {has_bias} + add + clamp"));
    }
}

/// The MLP of the kernel benchmark: x[1x512] -> matmul 512x2048 -> gelu -> matmul 2048x512 ->
/// add -> layerNormalization. Fusion removes the gelu and add kernels. `FUSION_BENCH_RUNS=N`
/// times N dispatches (for BENCHMARKS.md; run once with `WEBNN_WGPU_FUSION=0` for the baseline).
#[test]
fn mlp_loses_two_dispatches() {
    let ctx = context();
    let mut rng = Rng::new(7);
    let (d, h) = (512, 2048);
    let s = 1.0 / (d as f64).sqrt();
    let case = Case {
        inputs: vec![
            (rng.tensor(DataType::Float32, &[1, d], -1.0, 1.0), false),
            (rng.tensor(DataType::Float32, &[d, h], -s, s), true),
            (rng.tensor(DataType::Float32, &[h, d], -s / 2.0, s / 2.0), true),
            (rng.tensor(DataType::Float32, &[d], -0.1, 0.1), true),
        ],
        ops: vec![
            (Op::Matmul, vec![0, 1]),
            act(Activation::Gelu, 4),
            (Op::Matmul, vec![5, 2]),
            add(6, 3),
            (Op::LayerNormalization(LayerNormalizationOptions { axes: Some(vec![1]), ..Default::default() }), vec![7]),
        ],
        outputs: vec![8],
    };
    let (gpu, reference, steps) = run(&ctx, &case);
    assert_close(&gpu, &reference, 64, 1e-4, "mlp");
    let unfused: usize = [
        alone(&ctx, &Op::Matmul, &[case.inputs[0].0.clone(), case.inputs[1].0.clone()]),
        1,
        alone(&ctx, &Op::Matmul, &[reference_op(&Op::Matmul, &[case.inputs[0].0.clone(), case.inputs[1].0.clone()]).unwrap()[0].clone(), case.inputs[2].0.clone()]),
        1,
        alone(&ctx, &case.ops[4].0, &[reference[0].clone()]),
    ]
    .iter()
    .sum();
    let fused = std::env::var("WEBNN_WGPU_FUSION").map(|v| v != "0").unwrap_or(true);
    assert_eq!(steps, if fused { unfused - 2 } else { unfused }, "mlp dispatches");
    if let Some(runs) = bench_runs() {
        let ms = time_graph(&ctx, &case, runs);
        println!("mlp: {steps} dispatches (unfused {unfused}), {ms:.3} ms per run over {runs} runs");
    }
}

fn bench_runs() -> Option<u32> {
    std::env::var("FUSION_BENCH_RUNS").ok().and_then(|v| v.parse().ok()).filter(|&n| n > 0)
}

/// A memory-bound chain on 1M elements: ((x + bias) gelu * y) tanh, 4 kernels or 1. Timed only
/// with `FUSION_BENCH_RUNS`.
#[test]
fn large_chain_timing() {
    let Some(runs) = bench_runs() else { return };
    let ctx = context();
    let mut rng = Rng::new(8);
    let case = Case {
        inputs: vec![
            (rng.tensor(DataType::Float32, &[256, 4096], -2.0, 2.0), false),
            (rng.tensor(DataType::Float32, &[4096], -1.0, 1.0), true),
            (rng.tensor(DataType::Float32, &[256, 4096], -1.0, 1.0), true),
        ],
        ops: vec![add(0, 1), act(Activation::Gelu, 3), binary(BinaryOp::Mul, 4, 2), act(Activation::Tanh, 5)],
        outputs: vec![6],
    };
    let (gpu, reference, steps) = run(&ctx, &case);
    assert_close(&gpu, &reference, 8, 1e-6, "large chain");
    let ms = time_graph(&ctx, &case, runs);
    println!("chain: {steps} dispatches, {ms:.3} ms per run over {runs} runs");
}

/// Mean milliseconds per dispatch and readback of a graph with one graph input (input 0, the
/// others constants), after one warm-up.
fn time_graph(ctx: &Context, case: &Case, runs: u32) -> f64 {
    block_on(async {
        let mut b = GraphBuilder::new(ctx).unwrap();
        let x = &case.inputs[0].0;
        let mut operands = vec![b.input("x", x.descriptor.clone()).unwrap()];
        for (t, _) in &case.inputs[1..] {
            operands.push(b.constant(t.descriptor.clone(), &t.to_bytes()).unwrap());
        }
        for (op, args) in &case.ops {
            let inputs: Vec<_> = args.iter().map(|&a| operands[a]).collect();
            operands.push(b.operator1(op.clone(), &inputs, "").unwrap());
        }
        let out = *operands.last().unwrap();
        let out_desc: OperandDescriptor = b.descriptor(out).unwrap().clone();
        let graph = b.build(&[("y".to_string(), out)]).await.unwrap();
        let xt = ctx.create_tensor(TensorDescriptor { operand: x.descriptor.clone(), readable: false, writable: true }).await.unwrap();
        ctx.write_tensor(&xt, &x.to_bytes()).unwrap();
        let yt = ctx.create_tensor(TensorDescriptor { operand: out_desc, readable: true, writable: false }).await.unwrap();
        let feeds = [("x".to_string(), xt)];
        let outs = [("y".to_string(), yt)];
        ctx.dispatch(&graph, &feeds, &outs).unwrap();
        ctx.read_tensor(&outs[0].1).await.unwrap();
        let start = std::time::Instant::now();
        for _ in 0..runs {
            ctx.dispatch(&graph, &feeds, &outs).unwrap();
            ctx.read_tensor(&outs[0].1).await.unwrap();
        }
        start.elapsed().as_secs_f64() * 1000.0 / runs as f64
    })
}

/// A constant scalar of type `t`.
fn scalar(t: DataType, v: f64) -> (HostTensor, bool) {
    (HostTensor::new(OperandDescriptor::new(t, vec![]), vec![round_to(v, t)]).unwrap(), true)
}

/// RMSNorm as examples/moe builds it, x / sqrt(reduceSumSquare(x) * (1 / n) + eps) * w over the
/// rows of x [rows, n]: operands x, 1 / n, eps, w, the reduction (4), the chain (5..9).
fn rms_norm(rng: &mut Rng, t: DataType, rows: u32, n: u32) -> Case {
    Case {
        inputs: vec![
            (rng.tensor(t, &[rows, n], -2.0, 2.0), false),
            scalar(t, 1.0 / n as f64),
            scalar(t, 1e-5),
            (rng.tensor(t, &[n], 0.5, 1.5), true),
        ],
        ops: vec![
            reduce(ReduceOp::SumSquare, &[1], true, 0),
            binary(BinaryOp::Mul, 4, 1),
            add(5, 2),
            unary(UnaryOp::Sqrt, 6),
            binary(BinaryOp::Div, 0, 7),
            binary(BinaryOp::Mul, 8, 3),
        ],
        outputs: vec![9],
    }
}

/// The case with every reduction's result a graph output too, which keeps it out of fusion: the
/// unfused dispatch count, and the same values for the original outputs.
fn reductions_as_outputs(case: &Case) -> Case {
    let n = case.inputs.len();
    let mut outputs = case.outputs.clone();
    outputs.extend((0..case.ops.len()).filter(|&k| matches!(case.ops[k].0, Op::Reduce(..))).map(|k| n + k));
    Case { inputs: case.inputs.clone(), ops: case.ops.clone(), outputs }
}

/// Checks `case` fused into `fused` dispatches and, with its reductions kept out of fusion, into
/// `unfused`.
fn check_row_fusion(ctx: &Context, case: &Case, fused: usize, unfused: usize, ulp: u64, abs: f64, what: &str) {
    check(ctx, case, fused, ulp, abs, what);
    check(ctx, &reductions_as_outputs(case), unfused, ulp, abs, &format!("{what}, reductions as outputs"));
}

#[test]
fn rms_norm_is_one_kernel() {
    let ctx = context();
    let mut rng = Rng::new(10);
    // Rows of a workgroup each (wider than 256: one row, several rows) and of an invocation each.
    for (rows, n) in [(1, 512), (4, 300), (37, 20)] {
        let case = rms_norm(&mut rng, DataType::Float32, rows, n);
        check_row_fusion(&ctx, &case, 1, 2, 64, 1e-5, &format!("rmsnorm [{rows}, {n}]"));
    }
    // float16: the reduction's own kernel packs its result in a second launch. The chain reads
    // the reduced value rounded to float16, as it would after that store.
    let case = rms_norm(&mut rng, DataType::Float16, 4, 300);
    check_row_fusion(&ctx, &case, 1, 3, 2, 2e-3, "float16 rmsnorm [4, 300]");
    // Rows of an odd float16 length share output words with their neighbours: not fused.
    let case = rms_norm(&mut rng, DataType::Float16, 3, 33);
    check(&ctx, &case, 3, 2, 2e-3, "float16 rmsnorm [3, 33]");
    // Rows longer than 16384 elements keep the chain in a kernel spread over the GPU.
    let case = rms_norm(&mut rng, DataType::Float32, 1, 20000);
    check(&ctx, &case, 2, 64, 1e-5, "rmsnorm [1, 20000]");
}

#[test]
fn layer_norm_and_softmax_from_primitives_fuse_each_reduction() {
    let ctx = context();
    let mut rng = Rng::new(11);
    // (x - mean) / sqrt(mean((x - mean)^2) + eps) * g + b: x - mean has two readers, so it and
    // its square stay kernels; each reduceMean joins the chain reading it (5 kernels, 3 fused).
    for (rows, n) in [(3, 300), (50, 24)] {
        let case = Case {
            inputs: vec![
                (rng.tensor(DataType::Float32, &[rows, n], -2.0, 2.0), false),
                scalar(DataType::Float32, 1e-5),
                (rng.tensor(DataType::Float32, &[n], 0.5, 1.5), true),
                (rng.tensor(DataType::Float32, &[n], -0.5, 0.5), true),
            ],
            ops: vec![
                reduce(ReduceOp::Mean, &[1], true, 0),
                binary(BinaryOp::Sub, 0, 4),
                binary(BinaryOp::Mul, 5, 5),
                reduce(ReduceOp::Mean, &[1], true, 6),
                add(7, 1),
                unary(UnaryOp::Sqrt, 8),
                binary(BinaryOp::Div, 5, 9),
                binary(BinaryOp::Mul, 10, 2),
                add(11, 3),
            ],
            outputs: vec![12],
        };
        check_row_fusion(&ctx, &case, 3, 5, 64, 1e-5, &format!("layer norm [{rows}, {n}]"));
    }
    // exp(x - max) / sum(exp(x - max)): the chain after reduceSum reads the reduction's input.
    let case = Case {
        inputs: vec![(rng.tensor(DataType::Float32, &[2, 3, 260], -4.0, 4.0), false)],
        ops: vec![
            reduce(ReduceOp::Max, &[2], true, 0),
            binary(BinaryOp::Sub, 0, 1),
            unary(UnaryOp::Exp, 2),
            reduce(ReduceOp::Sum, &[2], true, 3),
            binary(BinaryOp::Div, 3, 4),
        ],
        outputs: vec![5],
    };
    check_row_fusion(&ctx, &case, 2, 4, 16, 1e-7, "softmax [2, 3, 260]");
    // int32: x * sum(x) - min(x), exact (the chain's reduced value of the integer value type).
    let case = Case {
        inputs: vec![(rng.tensor(DataType::Int32, &[7, 9], -50.0, 50.0), false)],
        ops: vec![
            reduce(ReduceOp::Sum, &[1], true, 0),
            binary(BinaryOp::Mul, 0, 1),
            reduce(ReduceOp::Min, &[1], true, 0),
            binary(BinaryOp::Sub, 2, 3),
        ],
        outputs: vec![4],
    };
    check_row_fusion(&ctx, &case, 2, 3, 0, 0.0, "int32 sum and min");
}

#[test]
fn reductions_fuse_only_where_each_element_reads_its_own_row() {
    let ctx = context();
    let mut rng = Rng::new(12);
    let x = rng.tensor(DataType::Float32, &[5, 5], -2.0, 2.0);
    // A second reader of the sum: the reduction, the division and the product stay apart.
    let case = Case {
        inputs: vec![(x.clone(), false), scalar(DataType::Float32, 3.0)],
        ops: vec![reduce(ReduceOp::Sum, &[1], true, 0), binary(BinaryOp::Div, 0, 2), binary(BinaryOp::Mul, 2, 1)],
        outputs: vec![3, 4],
    };
    check(&ctx, &case, 3, 4, 1e-6, "two readers");
    // Without keepDimensions the sum [5] broadcasts along the last axis: element (i, j) reads the
    // sum of row j, not its own row's. Not fused, and still right.
    let case = Case {
        inputs: vec![(x, false)],
        ops: vec![reduce(ReduceOp::Sum, &[1], false, 0), binary(BinaryOp::Div, 0, 1)],
        outputs: vec![2],
    };
    check(&ctx, &case, 2, 4, 1e-6, "sum without keepDimensions broadcast across rows");
    // Without keepDimensions a single row's value [1] broadcasts to every element: fused.
    let case = Case {
        inputs: vec![(rng.tensor(DataType::Float32, &[1, 64], -2.0, 2.0), false)],
        ops: vec![reduce(ReduceOp::Mean, &[1], false, 0), binary(BinaryOp::Sub, 0, 1)],
        outputs: vec![2],
    };
    check(&ctx, &case, 1, 4, 1e-6, "mean of one row without keepDimensions");
    // Reductions over leading or middle axes: strided rows, fused for 32-bit outputs.
    for (shape, axes) in [(&[300u32, 6][..], &[0u32][..]), (&[3, 5, 4], &[1]), (&[4, 3, 70], &[0, 2])] {
        let case = Case {
            inputs: vec![(rng.tensor(DataType::Float32, shape, -2.0, 2.0), false)],
            ops: vec![reduce(ReduceOp::L2, axes, true, 0), binary(BinaryOp::Div, 0, 1), unary(UnaryOp::Abs, 2)],
            outputs: vec![3],
        };
        check_row_fusion(&ctx, &case, 1, 2, 16, 1e-7, &format!("reduceL2 {shape:?} over {axes:?}"));
    }
    // float16 rows along a leading axis interleave in the output's words: not fused (the
    // reduction's two launches, then the chain).
    let case = Case {
        inputs: vec![(rng.tensor(DataType::Float16, &[6, 40], -2.0, 2.0), false)],
        ops: vec![reduce(ReduceOp::Mean, &[0], true, 0), binary(BinaryOp::Sub, 0, 1)],
        outputs: vec![2],
    };
    check(&ctx, &case, 3, 2, 2e-3, "float16 mean over axis 0");
}
