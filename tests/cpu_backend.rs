//! The CPU backend's memory and residency: device bytes (its buffers in wasm memory) exact at
//! every step, swapOut/swapIn, constants shared between graphs counted once, the budget with
//! least-recently-used eviction, and the copy-on-write of a graph output that shares its input's
//! bytes. Results are checked against values computed here.
#![cfg(not(target_arch = "wasm32"))] // native: `wasm-pack test` builds every test target for wasm32

mod common;

use common::block_on;
use webnn_wgpu::backend::cpu::{CpuContext, CpuGraph, CpuTensor};
use webnn_wgpu::backend::{ContextOptions, TensorDescriptor};
use webnn_wgpu::graph::{DataType, GraphBuilder, OperandDescriptor};
use webnn_wgpu::memory::{HostBytes, Residency};
use webnn_wgpu::ops::elementwise_binary::BinaryOp;
use webnn_wgpu::Op;

const N: u32 = 256; // elements of each constant: 1 KiB

fn f32_descriptor(shape: &[u32]) -> OperandDescriptor {
    OperandDescriptor::new(DataType::Float32, shape.to_vec())
}

fn bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn floats(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
}

fn tensor(ctx: &CpuContext, readable: bool, writable: bool) -> CpuTensor {
    ctx.create_tensor(TensorDescriptor { operand: f32_descriptor(&[N]), readable, writable }).unwrap()
}

/// `y = x + c` with a constant `c` of `N` values `k`.
fn add_constant(ctx: &CpuContext, k: f32) -> CpuGraph {
    let mut b = GraphBuilder::new(ctx).unwrap();
    let x = b.input("x", f32_descriptor(&[N])).unwrap();
    let c = b.constant(f32_descriptor(&[N]), &bytes(&vec![k; N as usize])).unwrap();
    let y = b.operator1(Op::Binary(BinaryOp::Add), &[x, c], "").unwrap();
    CpuGraph::compile(ctx, b.prepare_build(&[("y".into(), y)]).unwrap()).unwrap()
}

/// Dispatches `graph` on x = 0, 1, 2, ... and returns y.
fn run(ctx: &CpuContext, graph: &CpuGraph) -> Vec<f32> {
    let (x, y) = (tensor(ctx, false, true), tensor(ctx, true, false));
    ctx.write_tensor(&x, &bytes(&(0..N).map(|i| i as f32).collect::<Vec<_>>())).unwrap();
    ctx.dispatch(graph, &[("x".into(), x)], &[("y".into(), y.clone())]).unwrap();
    floats(&block_on(ctx.read_tensor(&y)).unwrap())
}

fn expected(k: f32) -> Vec<f32> {
    (0..N).map(|i| i as f32 + k).collect()
}

#[test]
fn device_bytes_follow_tensors_graphs_and_swaps() {
    let ctx = CpuContext::new(ContextOptions::default());
    assert_eq!(ctx.memory_info().device_bytes, 0);
    let t = tensor(&ctx, true, true);
    assert_eq!(ctx.memory_info().device_bytes, 4 * N as u64);
    t.destroy();
    assert_eq!(ctx.memory_info().device_bytes, 0);

    let graph = add_constant(&ctx, 3.0);
    let constant = 4 * N as u64;
    assert_eq!((graph.residency(), graph.device_bytes()), (Residency::Device, constant));
    assert_eq!(ctx.memory_info().device_bytes, constant, "a built graph holds its constants, nothing else");
    // The constant's host copy stays, counted as host bytes.
    assert_eq!(ctx.memory_info().host_bytes, constant);

    graph.swap_out(Residency::Host).unwrap();
    assert_eq!((graph.residency(), graph.device_bytes(), ctx.memory_info().device_bytes), (Residency::Host, 0, 0));
    assert_eq!(graph.swap_out(Residency::Disk).unwrap_err().name(), "TypeError", "no constant comes from a weight file");

    block_on(graph.swap_in()).unwrap();
    assert_eq!(ctx.memory_info().device_bytes, constant);
    assert_eq!(run(&ctx, &graph), expected(3.0));
    let info = ctx.memory_info();
    assert_eq!((info.swap_ins, info.swap_outs), (2, 1), "the build's swap-in, then one cycle");

    // A dispatch of a swapped-out graph swaps it in first.
    graph.swap_out(Residency::Host).unwrap();
    assert_eq!(run(&ctx, &graph), expected(3.0));
    assert_eq!(graph.residency(), Residency::Device);

    graph.destroy();
    assert_eq!(ctx.memory_info().device_bytes, 0, "destroy() releases the constants at once");
    assert_eq!(ctx.dispatch(&graph, &[], &[]).unwrap_err().name(), "InvalidStateError");
}

#[test]
fn a_constant_tensor_shared_by_graphs_is_held_once() {
    let ctx = CpuContext::new(ContextOptions::default());
    let host = HostBytes::from_slice(&bytes(&vec![2.0; N as usize]), ctx.host_byte_counter());
    let c = ctx.create_constant_tensor(f32_descriptor(&[N]), host).unwrap();
    assert_eq!(ctx.memory_info().device_bytes, 0, "a constant tensor enters memory with its first graph");
    let graphs: Vec<CpuGraph> = (0..3)
        .map(|_| {
            let mut b = GraphBuilder::new(&ctx).unwrap();
            let x = b.input("x", f32_descriptor(&[N])).unwrap();
            let k = b.constant_tensor(&c).unwrap();
            let y = b.operator1(Op::Binary(BinaryOp::Add), &[x, k], "").unwrap();
            CpuGraph::compile(&ctx, b.prepare_build(&[("y".into(), y)]).unwrap()).unwrap()
        })
        .collect();
    assert_eq!(ctx.memory_info().device_bytes, 4 * N as u64, "one copy for the three graphs");
    c.destroy();
    for g in &graphs {
        assert_eq!(run(&ctx, g), expected(2.0), "a graph keeps a destroyed constant tensor's bytes");
    }
    drop(graphs);
    assert_eq!(ctx.memory_info().device_bytes, 0);
}

#[test]
fn the_budget_evicts_the_least_recently_used_graph() {
    let constant = 4 * N as u64;
    // Room for the two tensors and two graphs' constants.
    let ctx = CpuContext::new(ContextOptions { memory_budget: Some(4 * constant), ..Default::default() });
    let (x, y) = (tensor(&ctx, false, true), tensor(&ctx, true, false));
    ctx.write_tensor(&x, &bytes(&(0..N).map(|i| i as f32).collect::<Vec<_>>())).unwrap();
    let graphs: Vec<CpuGraph> = (0..3).map(|k| add_constant(&ctx, k as f32)).collect();
    let resident = || graphs.iter().map(|g| g.residency() == Residency::Device).collect::<Vec<_>>();
    assert_eq!(resident(), [false, true, true], "building the third evicted the first");
    ctx.dispatch(&graphs[0], &[("x".into(), x.clone())], &[("y".into(), y.clone())]).unwrap();
    assert_eq!(floats(&block_on(ctx.read_tensor(&y)).unwrap()), expected(0.0));
    assert_eq!(resident(), [true, false, true], "graph 1 was the least recently used");
    ctx.dispatch(&graphs[2], &[("x".into(), x.clone())], &[("y".into(), y.clone())]).unwrap();
    ctx.dispatch(&graphs[1], &[("x".into(), x)], &[("y".into(), y.clone())]).unwrap();
    assert_eq!(floats(&block_on(ctx.read_tensor(&y)).unwrap()), expected(1.0));
    assert_eq!(resident(), [false, true, true], "graph 0 was the least recently dispatched");
    let info = ctx.memory_info();
    assert!(info.device_bytes <= info.budget_bytes.unwrap());
    assert_eq!(info.swap_outs, 3, "one eviction for the build, one for each swap-in");

    let tight = CpuContext::new(ContextOptions { memory_budget: Some(constant / 2), ..Default::default() });
    let mut b = GraphBuilder::new(&tight).unwrap();
    let x = b.input("x", f32_descriptor(&[N])).unwrap();
    let c = b.constant(f32_descriptor(&[N]), &bytes(&vec![1.0; N as usize])).unwrap();
    let y = b.operator1(Op::Binary(BinaryOp::Add), &[x, c], "").unwrap();
    let error = CpuGraph::compile(&tight, b.prepare_build(&[("y".into(), y)]).unwrap()).err().unwrap();
    assert_eq!(error.name(), "QuotaExceededError");
}

#[test]
fn an_output_sharing_its_input_bytes_is_copied_on_write() {
    let ctx = CpuContext::new(ContextOptions::default());
    let mut b = GraphBuilder::new(&ctx).unwrap();
    let x = b.input("x", f32_descriptor(&[N])).unwrap();
    let y = b.operator1(Op::Reshape { new_shape: vec![N] }, &[x], "").unwrap();
    let graph = CpuGraph::compile(&ctx, b.prepare_build(&[("y".into(), y)]).unwrap()).unwrap();
    let (x, y) = (tensor(&ctx, true, true), tensor(&ctx, true, true));
    let first: Vec<f32> = (0..N).map(|i| i as f32).collect();
    ctx.write_tensor(&x, &bytes(&first)).unwrap();
    ctx.dispatch(&graph, &[("x".into(), x.clone())], &[("y".into(), y.clone())]).unwrap();
    ctx.write_tensor(&x, &bytes(&vec![7.0; N as usize])).unwrap();
    assert_eq!(floats(&block_on(ctx.read_tensor(&y)).unwrap()), first, "writing the input must not change the output");
    ctx.write_tensor(&y, &bytes(&vec![9.0; N as usize])).unwrap();
    assert_eq!(floats(&block_on(ctx.read_tensor(&x)).unwrap()), vec![7.0; N as usize]);
}

#[test]
fn a_destroyed_context_stops_its_objects() {
    let ctx = CpuContext::new(ContextOptions::default());
    let graph = add_constant(&ctx, 1.0);
    let t = tensor(&ctx, true, true);
    ctx.destroy();
    assert!(ctx.is_lost());
    assert_eq!(block_on(ctx.lost()), "the MLContext was destroyed with destroy()");
    assert_eq!(block_on(graph.swap_in()).unwrap_err().name(), "InvalidStateError");
    assert_eq!(ctx.create_tensor(TensorDescriptor { operand: f32_descriptor(&[1]), readable: true, writable: true }).err().unwrap().name(), "InvalidStateError");
    assert_eq!(block_on(ctx.read_tensor(&t)).unwrap_err().name(), "TypeError", "a lost context's tensors are destroyed");
}

#[test]
fn packed_weights_count_as_device_bytes_and_leave_with_the_graph() {
    let (tensors, constant) = (4 * (8 * 64 + 8 * 32), 4 * 64 * 32);
    for reshaped in [false, true] {
        let ctx = CpuContext::new(ContextOptions::default());
        assert_eq!(matmul_with_packed_weights(&ctx, reshaped), tensors + 2 * constant, "the packed copy counts");
        // Under a budget without room for the copy, B is packed per product, as without it.
        let ctx = CpuContext::new(ContextOptions { memory_budget: Some(tensors + constant + constant / 2), ..Default::default() });
        assert_eq!(matmul_with_packed_weights(&ctx, reshaped), tensors + constant, "no copy over the budget");
    }
}

/// Runs `y = x W` twice with a swap-out between, checking y; returns the device bytes after
/// the first dispatch. `reshaped`: W is a reshape of a flat constant (the same bytes).
fn matmul_with_packed_weights(ctx: &CpuContext, reshaped: bool) -> u64 {
    let (m, k, n) = (8u32, 64u32, 32u32);
    let weights: Vec<f32> = (0..k * n).map(|i| (i % 7) as f32 - 3.0).collect();
    let mut b = GraphBuilder::new(ctx).unwrap();
    let x = b.input("x", f32_descriptor(&[m, k])).unwrap();
    let w = match reshaped {
        false => b.constant(f32_descriptor(&[k, n]), &bytes(&weights)).unwrap(),
        true => {
            let flat = b.constant(f32_descriptor(&[k * n]), &bytes(&weights)).unwrap();
            b.operator1(Op::Reshape { new_shape: vec![k, n] }, &[flat], "").unwrap()
        }
    };
    let y = b.operator1(Op::Matmul, &[x, w], "").unwrap();
    let graph = CpuGraph::compile(&ctx, b.prepare_build(&[("y".into(), y)]).unwrap()).unwrap();
    let xs: Vec<f32> = (0..m * k).map(|i| (i % 5) as f32 - 2.0).collect();
    let expected: Vec<f32> = (0..m * n)
        .map(|e| (0..k).map(|p| xs[(e / n * k + p) as usize] * weights[(p * n + e % n) as usize]).sum())
        .collect();
    let input = ctx.create_tensor(TensorDescriptor { operand: f32_descriptor(&[m, k]), readable: false, writable: true }).unwrap();
    let output = ctx.create_tensor(TensorDescriptor { operand: f32_descriptor(&[m, n]), readable: true, writable: false }).unwrap();
    ctx.write_tensor(&input, &bytes(&xs)).unwrap();
    let tensors = 4 * (m * k + m * n) as u64;
    let constant = 4 * (k * n) as u64;
    assert_eq!(ctx.memory_info().device_bytes, tensors + constant);
    let mut after = Vec::new();
    for _ in 0..2 {
        ctx.dispatch(&graph, &[("x".into(), input.clone())], &[("y".into(), output.clone())]).unwrap();
        assert_eq!(floats(&block_on(ctx.read_tensor(&output)).unwrap()), expected);
        // B packed in panels of 8 columns (32 is a multiple): as many bytes again.
        after.push(ctx.memory_info().device_bytes);
        graph.swap_out(Residency::Host).unwrap();
        assert_eq!(ctx.memory_info().device_bytes, tensors, "swapOut() drops the packed copy too");
    }
    assert_eq!(after[0], after[1]);
    after[0]
}

#[test]
fn float16_runs_on_the_float32_kernels() {
    use webnn_wgpu::ops::{self, activation::Activation, HostTensor};
    let ctx = CpuContext::new(ContextOptions::default());
    let f16 = |shape: &[u32]| OperandDescriptor::new(DataType::Float16, shape.to_vec());
    let a = HostTensor::new(f16(&[3, 5]), (0..15).map(|i| (i as f64 - 7.0) / 8.0).collect()).unwrap();
    let w = HostTensor::new(f16(&[5, 4]), (0..20).map(|i| ((i * 7) % 11) as f64 / 4.0 - 1.0).collect()).unwrap();
    let mut b = GraphBuilder::new(&ctx).unwrap();
    let x = b.input("x", f16(&[3, 5])).unwrap();
    let k = b.constant(f16(&[5, 4]), &w.to_bytes()).unwrap();
    let m = b.operator1(Op::Matmul, &[x, k], "").unwrap();
    let y = b.operator1(Op::Activation(Activation::Relu), &[m], "").unwrap();
    let graph = CpuGraph::compile(&ctx, b.prepare_build(&[("y".into(), y)]).unwrap()).unwrap();
    assert_eq!(graph.kernel_counts(), (2, 0), "matmul and relu on float32 kernels, none on the reference");
    let xt = ctx.create_tensor(TensorDescriptor { operand: f16(&[3, 5]), readable: false, writable: true }).unwrap();
    let yt = ctx.create_tensor(TensorDescriptor { operand: f16(&[3, 4]), readable: true, writable: false }).unwrap();
    ctx.write_tensor(&xt, &a.to_bytes()).unwrap();
    ctx.dispatch(&graph, &[("x".into(), xt)], &[("y".into(), yt.clone())]).unwrap();
    let got = HostTensor::from_bytes(f16(&[3, 4]), &block_on(ctx.read_tensor(&yt)).unwrap()).unwrap();
    // The references, each rounding its output to float16 (these products are exact in float32).
    let m = ops::reference(&Op::Matmul, &[a, w], &[f16(&[3, 4])]).unwrap().remove(0);
    let want = ops::reference(&Op::Activation(Activation::Relu), &[m], &[f16(&[3, 4])]).unwrap().remove(0);
    assert_eq!(got.data, want.data);
}

/// Leak cycles natively (the browser's are in the `cpu` stage): build, create, write, dispatch,
/// read and destroy, 10,000 times on one context, then whole contexts; the device and host
/// bytes are back at zero after every cycle.
#[test]
fn leak_cycles_return_every_byte() {
    let ctx = CpuContext::new(ContextOptions::default());
    for i in 0..10_000u32 {
        let k = (i % 7) as f32;
        let graph = add_constant(&ctx, k);
        let (x, y) = (tensor(&ctx, false, true), tensor(&ctx, true, false));
        ctx.write_tensor(&x, &bytes(&vec![1.0; N as usize])).unwrap();
        ctx.dispatch(&graph, &[("x".into(), x.clone())], &[("y".into(), y.clone())]).unwrap();
        assert_eq!(floats(&block_on(ctx.read_tensor(&y)).unwrap())[0], 1.0 + k);
        x.destroy();
        y.destroy();
        graph.destroy();
        drop(graph);
        let info = ctx.memory_info();
        assert_eq!((info.device_bytes, info.host_bytes), (0, 0), "cycle {i}");
    }
    for _ in 0..50 {
        let ctx = CpuContext::new(ContextOptions::default());
        let graph = add_constant(&ctx, 1.0);
        assert_eq!(run(&ctx, &graph), expected(1.0));
        ctx.destroy();
    }
}
