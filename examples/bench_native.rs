//! Native benchmarks (wgpu on Vulkan): `cargo run --release --example bench_native -- [memory]`.
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
            graph.swap_in().unwrap();
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

fn main() {
    let which: Vec<String> = std::env::args().skip(1).collect();
    let ctx = pollster::block_on(Context::new(ContextOptions::default())).expect("a WebGPU adapter");
    let info = ctx.adapter_info();
    println!("adapter: {} ({:?}, {:?})", info.name, info.device_type, info.backend);
    if which.is_empty() || which.iter().any(|w| w == "memory") {
        memory(&ctx);
    }
}
