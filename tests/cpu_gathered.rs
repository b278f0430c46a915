#![cfg(not(target_arch = "wasm32"))] // native: `wasm-pack test` builds every test target for wasm32
//! The CPU backend's matmul and gemm reading a B gathered from a stack in place
//! (`Kernel::Gathered`): graphs of `product(a, reshape(gather(stack, index, {axis: 0})))` give bit
//! for bit the results of the same graphs run one operator at a time (`WEBNN_WGPU_FUSION=0`, the
//! gather copying the entry), for every index type and for negative and out-of-range indices
//! (clamped), and the gather and reshape are absorbed. One test: the variable is process-wide.

mod common;

use common::{block_on, Rng};
use webnn_wgpu::backend::cpu::{CpuContext, CpuGraph};
use webnn_wgpu::backend::TensorDescriptor;
use webnn_wgpu::graph::GraphBuilder;
use webnn_wgpu::operand::{DataType, OperandDescriptor};
use webnn_wgpu::ops::matmul::GemmOptions;
use webnn_wgpu::ops::Op;
use webnn_wgpu::ContextOptions;

const E: u32 = 5;
const K: u32 = 24;
const N: u32 = 20;

/// `product(a, reshape(gather(stack, index)))` with A [m, K], the stack [E, K * N] a constant and
/// the index an input of `index_type`; gemm with bTranspose and a C when `gemm`.
fn build(ctx: &CpuContext, m: u32, gemm: bool, index_type: DataType, rng: &mut Rng) -> CpuGraph {
    let f32s = |shape: &[u32]| OperandDescriptor::new(DataType::Float32, shape.to_vec());
    let mut g = GraphBuilder::new(ctx).unwrap();
    let a = g.input("a", f32s(&[m, K])).unwrap();
    let index = g.input("index", OperandDescriptor::new(index_type, vec![])).unwrap();
    let stack = rng.floats((E * K * N) as usize, -1.0, 1.0);
    let stack = g.constant(f32s(&[E, K * N]), bytemuck::cast_slice(&stack)).unwrap();
    let entry = g.operator1(Op::Gather { axis: 0 }, &[stack, index], "").unwrap();
    let y = if gemm {
        let w = g.operator1(Op::Reshape { new_shape: vec![N, K] }, &[entry], "").unwrap();
        let c = g.constant(f32s(&[N]), bytemuck::cast_slice(&rng.floats(N as usize, -1.0, 1.0))).unwrap();
        let o = GemmOptions { b_transpose: true, has_c: true, alpha: 0.5, beta: 2.0, ..GemmOptions::default() };
        g.operator1(Op::Gemm(o), &[a, w, c], "").unwrap()
    } else {
        let w = g.operator1(Op::Reshape { new_shape: vec![K, N] }, &[entry], "").unwrap();
        g.operator1(Op::Matmul, &[a, w], "").unwrap()
    };
    CpuGraph::compile(ctx, g.prepare_build(&[("y".to_string(), y)]).unwrap()).unwrap()
}

fn run(ctx: &CpuContext, graph: &CpuGraph, m: u32, a: &[f32], index_type: DataType, index: i64) -> Vec<u8> {
    let tensor = |data_type, shape: Vec<u32>, readable| {
        let operand = OperandDescriptor::new(data_type, shape);
        ctx.create_tensor(TensorDescriptor { operand, readable, writable: !readable }).unwrap()
    };
    let a_tensor = tensor(DataType::Float32, vec![m, K], false);
    ctx.write_tensor(&a_tensor, bytemuck::cast_slice(a)).unwrap();
    let index_tensor = tensor(index_type, vec![], false);
    let bytes = match index_type {
        DataType::Int64 => index.to_le_bytes().to_vec(),
        DataType::Uint32 => (index as u32).to_le_bytes().to_vec(),
        _ => (index as i32).to_le_bytes().to_vec(),
    };
    ctx.write_tensor(&index_tensor, &bytes).unwrap();
    let y = tensor(DataType::Float32, vec![m, N], true);
    ctx.dispatch(graph, &[("a".into(), a_tensor), ("index".into(), index_tensor)], &[("y".into(), y.clone())]).unwrap();
    block_on(ctx.read_tensor(&y)).unwrap()
}

#[test]
fn gathered_weights_give_the_results_of_the_copied_ones() {
    let ctx = CpuContext::new(ContextOptions::default());
    let cases = [(DataType::Int32, 3i64), (DataType::Int32, -2), (DataType::Uint32, 9), (DataType::Int64, -7), (DataType::Int64, 1 << 40)];
    for (seed, (index_type, index)) in cases.into_iter().enumerate() {
        for (m, gemm) in [(1u32, false), (1, true), (9, false), (40, true)] {
            let a = Rng::new(seed as u64 + 50).floats((m * K) as usize, -1.0, 1.0);
            std::env::set_var("WEBNN_WGPU_FUSION", "0");
            let alone = build(&ctx, m, gemm, index_type, &mut Rng::new(seed as u64));
            std::env::remove_var("WEBNN_WGPU_FUSION");
            let fused = build(&ctx, m, gemm, index_type, &mut Rng::new(seed as u64));
            let what = format!("{} [{m}, {K}] x gathered B, index {index} ({index_type})", if gemm { "gemm" } else { "matmul" });
            assert_eq!(alone.fused_operators(), 0, "{what}");
            assert_eq!(fused.fused_operators(), 2, "{what}: the gather and reshape are absorbed");
            let (expected, got) = (run(&ctx, &alone, m, &a, index_type, index), run(&ctx, &fused, m, &a, index_type, index));
            assert!(expected == got, "{what}: differs from the gather's copy");
            let values: &[f32] = bytemuck::cast_slice(&got);
            assert!(values.iter().any(|v| *v != 0.0), "{what}: degenerate");
        }
    }
}
