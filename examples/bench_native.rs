//! Native benchmarks (wgpu on Vulkan): `cargo run --release --example bench_native -- [memory] [matmul]`.
//! Prints a table per benchmark with the physical reference measured in the same run.

use std::time::Instant;
use webnn_wgpu::graph::{DataType, GraphBuilder, OperandDescriptor};
use webnn_wgpu::memory::Residency;
use webnn_wgpu::ops::elementwise_binary::BinaryOp;
use webnn_wgpu::ops::Op;
use webnn_wgpu::runtime::{Context, ContextOptions, Graph};

const MIB: u64 = 1 << 20;
/// Constants are split into 16 MiB tensors so any adapter can bind them.
const CHUNK: u64 = 16 * MIB;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// y = x + c1 + ... + cN with N constants of 16 MiB.
fn build(ctx: &Context, total: u64, bytes: &[u8]) -> Graph {
    let n = (total / CHUNK) as usize;
    let d = OperandDescriptor::new(DataType::Float32, vec![(CHUNK / 4) as u32]);
    let mut b = GraphBuilder::new(ctx).unwrap();
    let mut y = b.input("x", d.clone()).unwrap();
    for _ in 0..n {
        let c = b.constant(d.clone(), bytes).unwrap();
        y = b.operator1(Op::Binary(BinaryOp::Add), &[y, c], "").unwrap();
    }
    pollster::block_on(b.build(&[("y".into(), y)])).unwrap()
}

fn memory(ctx: &Context) {
    println!("## swapIn / swapOut (native wgpu, {})", ctx.adapter_info().name);
    println!("| constants | raw write_buffer | swapIn | swapIn / raw | destroy + rebuild | swapIn speed-up | swapOut |");
    println!("|---|---|---|---|---|---|---|");
    let bytes: Vec<u8> = (0..CHUNK).map(|i| (i % 251) as u8).collect();
    for total in [16 * MIB, 64 * MIB, 256 * MIB] {
        let n = (total / CHUNK) as usize;
        // The physical reference: the same bytes through queue.write_buffer into live buffers.
        let raw: Vec<f64> = (0..5)
            .map(|_| {
                let buffers: Vec<_> = (0..n).map(|_| ctx.device().create_buffer(&wgpu::BufferDescriptor {
                    label: None,
                    size: CHUNK,
                    usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                })).collect();
                pollster::block_on(ctx.flush()).unwrap();
                let t = Instant::now();
                for b in &buffers {
                    ctx.queue().write_buffer(b, 0, &bytes);
                }
                pollster::block_on(ctx.flush()).unwrap();
                t.elapsed().as_secs_f64()
            })
            .collect();
        let graph = build(ctx, total, &bytes);
        let mut swap_in = Vec::new();
        let mut swap_out = Vec::new();
        for _ in 0..5 {
            let t = Instant::now();
            pollster::block_on(graph.swap_out(Residency::Host)).unwrap();
            swap_out.push(t.elapsed().as_secs_f64());
            let t = Instant::now();
            pollster::block_on(graph.swap_in()).unwrap();
            pollster::block_on(ctx.flush()).unwrap();
            swap_in.push(t.elapsed().as_secs_f64());
        }
        graph.destroy();
        // What the standard allows: destroy, then rebuild from the host bytes.
        let rebuild: Vec<f64> = (0..3)
            .map(|_| {
                let t = Instant::now();
                let g = build(ctx, total, &bytes);
                pollster::block_on(ctx.flush()).unwrap();
                let s = t.elapsed().as_secs_f64();
                g.destroy();
                s
            })
            .collect();
        let (raw, swap_in, swap_out, rebuild) = (median(raw), median(swap_in), median(swap_out), median(rebuild));
        let gbs = |s: f64| total as f64 / s / 1e9;
        println!(
            "| {} MiB | {:.2} GB/s ({:.1} ms) | {:.2} GB/s ({:.1} ms) | {:.0}% | {:.1} ms | {:.1}x | {:.2} ms |",
            total / MIB,
            gbs(raw),
            raw * 1e3,
            gbs(swap_in),
            swap_in * 1e3,
            100.0 * raw / swap_in,
            rebuild * 1e3,
            rebuild / swap_in,
            swap_out * 1e3
        );
    }
}

/// Seconds per dispatch of `graph`: `reps` dispatches queued back to back, then one wait, so
/// submission latency is amortised (median of 3 such runs, after a warm-up).
fn time_dispatch(ctx: &Context, graph: &Graph, inputs: &[(String, webnn_wgpu::runtime::Tensor)], outputs: &[(String, webnn_wgpu::runtime::Tensor)], reps: usize) -> f64 {
    ctx.dispatch(graph, inputs, outputs).unwrap();
    pollster::block_on(ctx.flush()).unwrap();
    median(
        (0..3)
            .map(|_| {
                let t = Instant::now();
                for _ in 0..reps {
                    ctx.dispatch(graph, inputs, outputs).unwrap();
                }
                pollster::block_on(ctx.flush()).unwrap();
                t.elapsed().as_secs_f64() / reps as f64
            })
            .collect(),
    )
}

/// f32 matmul [m,k] x [k,n] with the weight as a constant, as a model holds it.
fn matmul_seconds(ctx: &Context, m: u32, k: u32, n: u32, reps: usize) -> f64 {
    use webnn_wgpu::runtime::TensorDescriptor;
    let a = OperandDescriptor::new(DataType::Float32, vec![m, k]);
    let w: Vec<u8> = (0..k as u64 * n as u64).flat_map(|i| (((i % 17) as f32 - 8.0) / 64.0).to_le_bytes()).collect();
    let mut b = GraphBuilder::new(ctx).unwrap();
    let x = b.input("x", a.clone()).unwrap();
    let c = b.constant(OperandDescriptor::new(DataType::Float32, vec![k, n]), &w).unwrap();
    let y = b.operator1(Op::Matmul, &[x, c], "").unwrap();
    let graph = pollster::block_on(b.build(&[("y".into(), y)])).unwrap();
    let tensor = |d: OperandDescriptor| pollster::block_on(ctx.create_tensor(TensorDescriptor { operand: d, readable: true, writable: true })).unwrap();
    let input = tensor(a);
    let output = tensor(OperandDescriptor::new(DataType::Float32, vec![m, n]));
    time_dispatch(ctx, &graph, &[("x".into(), input)], &[("y".into(), output)], reps)
}

fn matmul(ctx: &Context) {
    println!("## matmul (native wgpu, {}; per dispatch, back-to-back dispatches)", ctx.adapter_info().name);
    println!("| shape | time | throughput |");
    println!("|---|---|---|");
    for (m, k, n) in [(1024, 1024, 1024), (4096, 4096, 4096)] {
        let s = matmul_seconds(ctx, m, k, n, if m >= 4096 { 5 } else { 20 });
        println!("| {m}x{k}x{n} f32 | {:.2} ms | {:.2} TFLOP/s |", s * 1e3, 2.0 * m as f64 * k as f64 * n as f64 / s / 1e12);
    }
    // GEMV reads the whole weight once: bandwidth is what bounds it.
    for (k, n) in [(4096, 4096), (8192, 8192)] {
        let s = matmul_seconds(ctx, 1, k, n, 50);
        println!("| 1x{k}x{n} f32 (GEMV) | {:.3} ms | {:.0} GB/s of weights |", s * 1e3, 4.0 * k as f64 * n as f64 / s / 1e9);
    }
}

fn main() {
    let which: Vec<String> = std::env::args().skip(1).collect();
    let ctx = pollster::block_on(Context::new(ContextOptions::default())).expect("a WebGPU adapter");
    let info = ctx.adapter_info();
    println!("adapter: {} ({:?}, {:?})", info.name, info.device_type, info.backend);
    if which.is_empty() || which.iter().any(|w| w == "memory") {
        memory(&ctx);
    }
    if which.is_empty() || which.iter().any(|w| w == "matmul") {
        matmul(&ctx);
    }
}
