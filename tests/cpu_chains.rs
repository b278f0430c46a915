#![cfg(not(target_arch = "wasm32"))] // native: `wasm-pack test` builds every test target for wasm32
//! The CPU backend's chains of element-wise operators (backend/cpu/kernels/chain.rs): graphs of
//! unary, activation and binary operators with full-shape, scalar and row-broadcast operands, over
//! outputs smaller than a block and over several blocks with a partial last one, give bit for bit
//! the results of the same graphs run one operator at a time (`WEBNN_WGPU_FUSION=0`), whose
//! kernels the float32 kernel tests check against the float64 references; and the chains do form.
//! Large enough, a chain is split between the CPU threads, with the same results.
//! One test: the variable is process-wide.

mod common;

use common::{block_on, Rng};
use webnn_wgpu::backend::cpu::{CpuContext, CpuGraph};
use webnn_wgpu::backend::TensorDescriptor;
use webnn_wgpu::graph::{GraphBuilder, Operand};
use webnn_wgpu::operand::{DataType, OperandDescriptor};
use webnn_wgpu::ops::activation::Activation;
use webnn_wgpu::ops::elementwise_binary::BinaryOp;
use webnn_wgpu::ops::elementwise_unary::UnaryOp;
use webnn_wgpu::ops::Op;
use webnn_wgpu::ContextOptions;

fn f32s(shape: &[u32]) -> OperandDescriptor {
    OperandDescriptor::new(DataType::Float32, shape.to_vec())
}

/// Builds a graph on input x of `shape` (the last axis `row` long): chains through every kind of
/// operand, a value read twice, pow's special exponent, and one intermediate that is also a graph
/// output (which must end its chain). Returns the graph and its outputs' shapes by name.
fn build(ctx: &CpuContext, shape: &[u32], rng: &mut Rng) -> CpuGraph {
    let row = *shape.last().unwrap();
    let mut g = GraphBuilder::new(ctx).unwrap();
    let x = g.input("x", f32s(shape)).unwrap();
    let constant = |g: &mut GraphBuilder, shape: &[u32], rng: &mut Rng| -> Operand {
        let count = shape.iter().product::<u32>() as usize;
        g.constant(f32s(shape), bytemuck::cast_slice(&rng.floats(count, -2.0, 2.0))).unwrap()
    };
    let scale = constant(&mut g, &[1], rng);
    let bias = constant(&mut g, &[row], rng);
    let bias2 = constant(&mut g, &[1, row], rng);
    let two = g.constant(f32s(&[1]), bytemuck::cast_slice(&[2f32])).unwrap();
    let bin = |g: &mut GraphBuilder, op: BinaryOp, a: Operand, b: Operand| g.operator1(Op::Binary(op), &[a, b], "").unwrap();
    let a1 = bin(&mut g, BinaryOp::Mul, x, scale);
    let a2 = bin(&mut g, BinaryOp::Add, a1, bias);
    let a3 = g.operator1(Op::Activation(Activation::Gelu), &[a2], "").unwrap();
    let a4 = g.operator1(Op::Activation(Activation::Tanh), &[a3], "").unwrap();
    let a5 = bin(&mut g, BinaryOp::Sub, a4, x);
    let a6 = bin(&mut g, BinaryOp::Pow, a5, two);
    let a7 = bin(&mut g, BinaryOp::Div, bias2, a6);
    let a8 = g.operator1(Op::Unary(UnaryOp::Exp), &[a7], "").unwrap();
    let a9 = bin(&mut g, BinaryOp::Max, a8, a8);
    // A second chain after an intermediate that is a graph output.
    let b1 = g.operator1(Op::Unary(UnaryOp::Neg), &[a4], "").unwrap();
    let b2 = bin(&mut g, BinaryOp::Min, b1, scale);
    let outputs = [("y".to_string(), a9), ("t".to_string(), a4), ("z".to_string(), b2)];
    CpuGraph::compile(ctx, g.prepare_build(&outputs).unwrap()).unwrap()
}

fn run(ctx: &CpuContext, graph: &CpuGraph, shape: &[u32], x: &[f32]) -> Vec<Vec<u8>> {
    let d = |readable| TensorDescriptor { operand: f32s(shape), readable, writable: !readable };
    let input = ctx.create_tensor(d(false)).unwrap();
    ctx.write_tensor(&input, bytemuck::cast_slice(x)).unwrap();
    let outputs: Vec<_> = ["t", "y", "z"].iter().map(|&n| (n.to_string(), ctx.create_tensor(d(true)).unwrap())).collect();
    ctx.dispatch(graph, &[("x".into(), input)], &outputs).unwrap();
    outputs.iter().map(|(_, t)| block_on(ctx.read_tensor(t)).unwrap()).collect()
}

#[test]
fn chains_give_the_results_of_the_operators_one_at_a_time() {
    let ctx = CpuContext::new(ContextOptions::default());
    // [37, 2111] is split between the CPU threads (natively one per core) in parts of whole
    // blocks, the last part short.
    for (seed, shape) in [(1u64, vec![3u32, 5, 7]), (2, vec![64, 100]), (3, vec![1, 2049]), (4, vec![1, 1]), (5, vec![37, 2111])] {
        let count = shape.iter().product::<u32>() as usize;
        let x = Rng::new(seed + 100).floats(count, -3.0, 3.0);
        std::env::set_var("WEBNN_WGPU_FUSION", "0");
        let alone = build(&ctx, &shape, &mut Rng::new(seed));
        std::env::remove_var("WEBNN_WGPU_FUSION");
        let fused = build(&ctx, &shape, &mut Rng::new(seed));
        assert_eq!(alone.fused_operators(), 0);
        // Three chains, each ending at a graph output or at the operator before one: mul..tanh
        // (t), sub..max (y) and neg, min (z); all but their last operators are absorbed.
        assert_eq!(fused.fused_operators(), 3 + 4 + 1, "shape {shape:?}");
        let (expected, got) = (run(&ctx, &alone, &shape, &x), run(&ctx, &fused, &shape, &x));
        for (name, (e, g)) in ["t", "y", "z"].iter().zip(expected.iter().zip(&got)) {
            assert!(e == g, "shape {shape:?}: output {name} differs from the operators run one at a time");
        }
        let values: &[f32] = bytemuck::cast_slice(&got[1]);
        assert!(values.iter().any(|v| v.is_finite() && *v != 0.0), "shape {shape:?}: y is degenerate");
    }
}
