//! Native benchmarks (wgpu on Vulkan): `cargo run --release --example bench_native -- [memory] [matmul] [dispatch] [chains]`.
//! Prints a table per benchmark with the physical reference measured in the same run.
//! chains: the CPU backend's element-wise chains (gelu as 0.5 x (1 + erf(x / sqrt 2)), as ONNX
//! exports write it, and a bias + sigmoid + mul) run as one kernel against the same graphs one
//! operator at a time (`WEBNN_WGPU_FUSION=0`), interleaved, beside a plain copy of the tensor.
//! dispatch: the CPU cost of `dispatch`, `writeTensor` and `readTensor` on small tensors (the
//! token loop of a decoder) against the same work in plain wgpu, the floor under them.
//! matmul sizes: `BENCH_MATMUL=256,512 BENCH_GEMV=1024` (defaults 1024,4096 and 4096,8192);
//! `CUBLAS_TFLOPS=48.5` adds the ratio to a cuBLAS figure measured beside it, and
//! `DEVICE_COPY_GBS=3943` a device copy bandwidth measured beside it (PyTorch's).

use std::time::Instant;
use webnn_wgpu::graph::{DataType, GraphBuilder, OperandDescriptor};
use webnn_wgpu::memory::Residency;
use webnn_wgpu::ops::elementwise_binary::BinaryOp;
use webnn_wgpu::ops::Op;
use webnn_wgpu::backend::webgpu::{Context, ContextOptions, Graph, TensorDescriptor};

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
fn time_dispatch(ctx: &Context, graph: &Graph, inputs: &[(String, webnn_wgpu::backend::webgpu::Tensor)], outputs: &[(String, webnn_wgpu::backend::webgpu::Tensor)], reps: usize) -> f64 {
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

/// matmul [m,k] x [k,n] of `dtype` (float32 or float16) with the weight as a constant, as a
/// model holds it; with `transposed` the weight is stored [n,k] and multiplied through gemm's
/// bTranspose.
fn matmul_seconds(ctx: &Context, dtype: DataType, m: u32, k: u32, n: u32, transposed: bool, reps: usize) -> f64 {
    use webnn_wgpu::ops::matmul::GemmOptions;
    use webnn_wgpu::backend::webgpu::TensorDescriptor;
    let a = OperandDescriptor::new(dtype, vec![m, k]);
    let value = |i: u64| ((i % 17) as f32 - 8.0) / 64.0;
    let w: Vec<u8> = if dtype == DataType::Float16 {
        (0..k as u64 * n as u64).flat_map(|i| half::f16::from_f32(value(i)).to_le_bytes()).collect()
    } else {
        (0..k as u64 * n as u64).flat_map(|i| value(i).to_le_bytes()).collect()
    };
    let mut b = GraphBuilder::new(ctx).unwrap();
    let x = b.input("x", a.clone()).unwrap();
    let (shape, op) = if transposed {
        (vec![n, k], Op::Gemm(GemmOptions { b_transpose: true, ..Default::default() }))
    } else {
        (vec![k, n], Op::Matmul)
    };
    let c = b.constant(OperandDescriptor::new(dtype, shape), &w).unwrap();
    let y = b.operator1(op, &[x, c], "").unwrap();
    let graph = pollster::block_on(b.build(&[("y".into(), y)])).unwrap();
    let tensor = |d: OperandDescriptor| pollster::block_on(ctx.create_tensor(TensorDescriptor { operand: d, readable: true, writable: true })).unwrap();
    let input = tensor(a);
    let output = tensor(OperandDescriptor::new(dtype, vec![m, n]));
    time_dispatch(ctx, &graph, &[("x".into(), input)], &[("y".into(), output)], reps)
}

/// Device copy bandwidth (read + write bytes per second) of `bytes`, the bound a
/// bandwidth-limited kernel such as GEMV is measured against: the faster of
/// `copy_buffer_to_buffer` (on NVIDIA it reached only ~20% of the memory bandwidth) and a vec4
/// copy kernel, each timed over `reps` copies in one submission.
fn copy_bandwidth(ctx: &Context, bytes: u64) -> f64 {
    const WORKGROUP: u64 = 256;
    let device = ctx.device();
    let buffer = |usage| device.create_buffer(&wgpu::BufferDescriptor { label: None, size: bytes, usage, mapped_at_creation: false });
    let storage = wgpu::BufferUsages::STORAGE;
    let (src, dst) = (buffer(storage | wgpu::BufferUsages::COPY_SRC), buffer(storage | wgpu::BufferUsages::COPY_DST));
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("copy"),
        source: wgpu::ShaderSource::Wgsl(
            "@group(0) @binding(0) var<storage, read> src: array<vec4<f32>>;
             @group(0) @binding(1) var<storage, read_write> dst: array<vec4<f32>>;
             @compute @workgroup_size(256)
             fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) n: vec3<u32>) {
                 let i = id.x + id.y * n.x * 256u;
                 if (i < arrayLength(&src)) { dst[i] = src[i]; }
             }"
            .into(),
        ),
    });
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some("copy"),
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &pipeline.get_bind_group_layout(0),
        entries: &[
            wgpu::BindGroupEntry { binding: 0, resource: src.as_entire_binding() },
            wgpu::BindGroupEntry { binding: 1, resource: dst.as_entire_binding() },
        ],
    });
    let groups = bytes / 16 / WORKGROUP;
    let (gx, gy) = (groups.min(32768) as u32, groups.div_ceil(32768) as u32);
    let run = |kernel: bool, reps: usize| {
        let t = Instant::now();
        let mut encoder = device.create_command_encoder(&Default::default());
        for _ in 0..reps {
            if kernel {
                let mut pass = encoder.begin_compute_pass(&Default::default());
                pass.set_pipeline(&pipeline);
                pass.set_bind_group(0, &bind_group, &[]);
                pass.dispatch_workgroups(gx, gy, 1);
            } else {
                encoder.copy_buffer_to_buffer(&src, 0, &dst, 0, bytes);
            }
        }
        ctx.queue().submit([encoder.finish()]);
        pollster::block_on(ctx.flush()).unwrap();
        t.elapsed().as_secs_f64() / reps as f64
    };
    let measure = |kernel: bool| {
        run(kernel, 1);
        2.0 * bytes as f64 / median((0..3).map(|_| run(kernel, 20)).collect())
    };
    let (copy, kernel) = (measure(false), measure(true));
    println!("device copy {} MiB: copy_buffer_to_buffer {:.0} GB/s, vec4 copy kernel {:.0} GB/s (read + write)", bytes / MIB, copy / 1e9, kernel / 1e9);
    copy.max(kernel)
}

/// Sizes from `BENCH_MATMUL` ("1024,4096" squares) and `BENCH_GEMV` ("4096,8192": 1xKxN with
/// K = N), so a CPU adapter can run small ones.
fn sizes(var: &str, default: &[u32]) -> Vec<u32> {
    match std::env::var(var) {
        Ok(v) => v.split(',').filter_map(|s| s.trim().parse().ok()).collect(),
        Err(_) => default.to_vec(),
    }
}

fn matmul(ctx: &Context) {
    let info = ctx.adapter_info();
    println!("## matmul (native wgpu, {}, {:?}; per dispatch, back-to-back dispatches)", info.name, info.device_type);
    // 128 MiB: within every adapter's storage-binding limit (llvmpipe's is 128 MiB).
    let measured = copy_bandwidth(ctx, 128 * MIB);
    // A faster copy measured beside this run (PyTorch's `y.copy_(x)`) is the better bound.
    let copy = match std::env::var("DEVICE_COPY_GBS").ok().and_then(|v| v.parse::<f64>().ok()) {
        Some(gbs) => {
            println!("device copy bound: {gbs:.0} GB/s from DEVICE_COPY_GBS");
            measured.max(gbs * 1e9)
        }
        None => measured,
    };
    let torch = std::env::var("CUBLAS_TFLOPS").ok().and_then(|v| v.parse::<f64>().ok());
    println!("| shape | time | throughput | ratio |");
    println!("|---|---|---|---|");
    for s in sizes("BENCH_MATMUL", &[1024, 4096]) {
        let reps = if s >= 4096 { 5 } else { 20 };
        let t32 = matmul_seconds(ctx, DataType::Float32, s, s, s, false, reps);
        for (kind, t) in [
            ("f32", t32),
            ("f16 (stored as float16, computed in f32)", matmul_seconds(ctx, DataType::Float16, s, s, s, false, reps)),
            ("f32, the plain WGSL kernel of bench/kernels_page.js", plain_matmul_seconds(ctx, s, reps)),
        ] {
            let tflops = 2.0 * (s as f64).powi(3) / t / 1e12;
            let ratio = if kind == "f32" {
                torch.map(|r| format!("{:.0}% of cuBLAS {r}", 100.0 * tflops / r)).unwrap_or_default()
            } else {
                format!("{:.2}x our f32", t32 / t)
            };
            println!("| {s}x{s}x{s} {kind} | {:.3} ms | {tflops:.3} TFLOP/s | {ratio} |", t * 1e3);
        }
    }
    // GEMV reads the whole weight once: bandwidth is what bounds it. With subgroups on the
    // GPU (and WEBNN_WGPU_SUBGROUPS unset), each shape runs with the subgroup reduction and with
    // workgroup memory only, side by side; a CPU adapter uses its register kernels (unless
    // WEBNN_WGPU_GEMV forces the GPU kernels).
    let cpu = ctx.device_traits().cpu && std::env::var("WEBNN_WGPU_GEMV").is_err();
    let both = !cpu && ctx.has_subgroups() && std::env::var("WEBNN_WGPU_SUBGROUPS").is_err();
    let reductions: &[Option<&str>] = if both { &[None, Some("0")] } else { &[None] };
    let default = if cpu {
        "register kernel"
    } else if ctx.has_subgroups() && std::env::var("WEBNN_WGPU_SUBGROUPS").map_or(true, |v| v.trim() != "0") {
        "subgroups"
    } else {
        "workgroup memory"
    };
    for s in sizes("BENCH_GEMV", &[4096, 8192]) {
        for transposed in [false, true] {
            for &reduction in reductions {
                match reduction {
                    Some(v) => std::env::set_var("WEBNN_WGPU_SUBGROUPS", v),
                    None => std::env::remove_var("WEBNN_WGPU_SUBGROUPS"),
                }
                let t = matmul_seconds(ctx, DataType::Float32, 1, s, s, transposed, 50);
                let gbs = 4.0 * s as f64 * s as f64 / t;
                let layout = if transposed { "weight [N,K], gemm bTranspose" } else { "weight [K,N]" };
                let reduce = if reduction.is_some() { "workgroup memory" } else { default };
                println!(
                    "| 1x{s}x{s} f32 GEMV, {layout}, {reduce} | {:.3} ms | {:.1} GB/s of weights | {:.0}% of device copy |",
                    t * 1e3,
                    gbs / 1e9,
                    100.0 * gbs / copy
                );
            }
            if both {
                std::env::remove_var("WEBNN_WGPU_SUBGROUPS");
            }
            let t = matmul_seconds(ctx, DataType::Float16, 1, s, s, transposed, 50);
            let gbs = 2.0 * s as f64 * s as f64 / t;
            let layout = if transposed { "weight [N,K], gemm bTranspose" } else { "weight [K,N]" };
            println!(
                "| 1x{s}x{s} f16 GEMV, {layout}, {default} | {:.3} ms | {:.1} GB/s of weights | {:.0}% of device copy |",
                t * 1e3,
                gbs / 1e9,
                100.0 * gbs / copy
            );
        }
    }
}

/// The plain hand-written WGSL matmul of `bench/kernels_page.js` (64x64 tiles, 4x4 per
/// invocation) on s x s x s: the same WGSL the browser page runs through Dawn and Tint, here
/// through naga, so the two compilers can be compared on one kernel.
fn plain_matmul_seconds(ctx: &Context, s: u32, reps: usize) -> f64 {
    let device = ctx.device();
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("plain matmul"),
        source: wgpu::ShaderSource::Wgsl(PLAIN_MATMUL_WGSL.into()),
    });
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some("plain matmul"),
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    let bytes = 4 * s as u64 * s as u64;
    let storage = |usage| device.create_buffer(&wgpu::BufferDescriptor { label: None, size: bytes, usage, mapped_at_creation: false });
    let (a, b, c) = (storage(wgpu::BufferUsages::STORAGE), storage(wgpu::BufferUsages::STORAGE), storage(wgpu::BufferUsages::STORAGE));
    let dims = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 16,
        usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    ctx.queue().write_buffer(&dims, 0, bytemuck::cast_slice(&[s, s, s, 0]));
    let group = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &pipeline.get_bind_group_layout(0),
        entries: &[
            wgpu::BindGroupEntry { binding: 0, resource: a.as_entire_binding() },
            wgpu::BindGroupEntry { binding: 1, resource: b.as_entire_binding() },
            wgpu::BindGroupEntry { binding: 2, resource: c.as_entire_binding() },
            wgpu::BindGroupEntry { binding: 3, resource: dims.as_entire_binding() },
        ],
    });
    let run = |reps: usize| {
        let t = Instant::now();
        let mut encoder = device.create_command_encoder(&Default::default());
        for _ in 0..reps {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &group, &[]);
            pass.dispatch_workgroups(s / 64, s / 64, 1);
        }
        ctx.queue().submit([encoder.finish()]);
        pollster::block_on(ctx.flush()).unwrap();
        t.elapsed().as_secs_f64() / reps as f64
    };
    run(1);
    median((0..3).map(|_| run(reps)).collect())
}

/// bench/kernels_page.js's MATMUL_WGSL, verbatim.
const PLAIN_MATMUL_WGSL: &str = "
struct Dims { M: u32, N: u32, K: u32 }
@group(0) @binding(0) var<storage, read> A: array<f32>;
@group(0) @binding(1) var<storage, read> B: array<f32>;
@group(0) @binding(2) var<storage, read_write> C: array<f32>;
@group(0) @binding(3) var<uniform> d: Dims;
var<workgroup> As: array<f32, 1024>; // [k][row], 16 x 64
var<workgroup> Bs: array<f32, 1024>; // [k][col], 16 x 64
@compute @workgroup_size(16, 16)
fn main(@builtin(local_invocation_id) l: vec3u, @builtin(workgroup_id) w: vec3u) {
  let tid = l.y * 16u + l.x;
  var acc: array<vec4f, 4>;
  for (var k0 = 0u; k0 < d.K; k0 += 16u) {
    for (var i = 0u; i < 4u; i++) {
      let e = tid + i * 256u;
      As[(e % 16u) * 64u + e / 16u] = A[(w.y * 64u + e / 16u) * d.K + k0 + e % 16u];
      Bs[e] = B[(k0 + e / 64u) * d.N + w.x * 64u + e % 64u];
    }
    workgroupBarrier();
    for (var k = 0u; k < 16u; k++) {
      let a = vec4f(As[k * 64u + l.y * 4u], As[k * 64u + l.y * 4u + 1u], As[k * 64u + l.y * 4u + 2u], As[k * 64u + l.y * 4u + 3u]);
      let b = vec4f(Bs[k * 64u + l.x * 4u], Bs[k * 64u + l.x * 4u + 1u], Bs[k * 64u + l.x * 4u + 2u], Bs[k * 64u + l.x * 4u + 3u]);
      acc[0] += a.x * b; acc[1] += a.y * b; acc[2] += a.z * b; acc[3] += a.w * b;
    }
    workgroupBarrier();
  }
  for (var r = 0u; r < 4u; r++) {
    let o = (w.y * 64u + l.y * 4u + r) * d.N + w.x * 64u + l.x * 4u;
    C[o] = acc[r].x; C[o + 1u] = acc[r].y; C[o + 2u] = acc[r].z; C[o + 3u] = acc[r].w;
  }
}";

/// Microseconds per call of `op` (median of 5 batches of `n`), and per call once the GPU
/// finished the batch.
fn per_call(ctx: &Context, n: usize, op: &mut dyn FnMut(usize)) -> (f64, f64) {
    let idle = || {
        let _ = ctx.device().poll(wgpu::PollType::wait_indefinitely());
    };
    let (mut cpu, mut done) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        idle();
        let t = Instant::now();
        (0..n).for_each(&mut *op);
        cpu.push(t.elapsed().as_secs_f64() * 1e6 / n as f64);
        idle();
        done.push(t.elapsed().as_secs_f64() * 1e6 / n as f64);
    }
    (median(cpu), median(done))
}

fn dispatch(ctx: &Context) {
    println!("## dispatch, writeTensor, readTensor of small tensors ({}): µs per call, CPU / until the GPU is done", ctx.adapter_info().name);
    println!("| operation | webnn-wgpu | plain wgpu (the floor) | ratio (CPU) |");
    println!("|---|---|---|---|");
    let (device, queue) = (ctx.device(), ctx.queue());
    let d = OperandDescriptor::new(DataType::Float32, vec![1, 64]);
    let tensor = |readable| {
        pollster::block_on(ctx.create_tensor(TensorDescriptor { operand: d.clone(), readable, writable: true })).unwrap()
    };
    let (x, y) = (tensor(true), tensor(true));
    // Plain wgpu: one storage buffer and a kernel that reads and writes it, so that successive
    // kernels depend on each other as a graph's do.
    let buffer = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 256,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: None,
        source: wgpu::ShaderSource::Wgsl(
            "@group(0) @binding(0) var<storage, read_write> b: array<f32>;
             @compute @workgroup_size(64) fn main(@builtin(global_invocation_id) id: vec3<u32>) { b[id.x] = b[id.x] + 1.0; }"
                .into(),
        ),
    });
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: None,
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    let group = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &pipeline.get_bind_group_layout(0),
        entries: &[wgpu::BindGroupEntry { binding: 0, resource: buffer.as_entire_binding() }],
    });
    let row = |name: &str, ours: (f64, f64), plain: (f64, f64)| {
        println!("| {name} | {:.1} / {:.1} | {:.1} / {:.1} | {:.2}x |", ours.0, ours.1, plain.0, plain.1, ours.0 / plain.0);
    };
    for kernels in [1usize, 3, 17] {
        // reverse along the last axis: one kernel each, never fused.
        let mut b = GraphBuilder::new(ctx).unwrap();
        let mut v = b.input("x", d.clone()).unwrap();
        for _ in 0..kernels {
            v = b.operator1(Op::Reverse { axes: Some(vec![1]) }, &[v], "").unwrap();
        }
        let graph = pollster::block_on(b.build(&[("y".into(), v)])).unwrap();
        // Two output tensors in turns, as a token loop's residual stream.
        let ours = per_call(ctx, 1000, &mut |i| {
            let (from, to) = if i % 2 == 0 { (&x, &y) } else { (&y, &x) };
            ctx.dispatch(&graph, &[("x".into(), from.clone())], &[("y".into(), to.clone())]).unwrap();
        });
        let plain = per_call(ctx, 1000, &mut |_| {
            let mut encoder = device.create_command_encoder(&Default::default());
            {
                let mut pass = encoder.begin_compute_pass(&Default::default());
                for _ in 0..kernels {
                    pass.set_pipeline(&pipeline);
                    pass.set_bind_group(0, &group, &[]);
                    pass.dispatch_workgroups(1, 1, 1);
                }
            }
            queue.submit([encoder.finish()]);
        });
        row(&format!("dispatch of a graph of {kernels} kernels (plain: one submission of {kernels} dispatches)"), ours, plain);
    }
    let bytes = [0u8; 256];
    row(
        "writeTensor of 256 bytes (plain: queue.write_buffer)",
        per_call(ctx, 3000, &mut |_| ctx.write_tensor(&x, &bytes).unwrap()),
        per_call(ctx, 3000, &mut |_| queue.write_buffer(&buffer, 0, &bytes)),
    );
    let staging = |_| {
        device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: 256,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    };
    row(
        "readTensor of 256 bytes, GPU idle (plain: copy, map_async, blocking poll)",
        per_call(ctx, 500, &mut |_| {
            pollster::block_on(ctx.read_tensor(&x)).unwrap();
        }),
        per_call(ctx, 500, &mut |i| {
            let s = staging(i);
            let mut encoder = device.create_command_encoder(&Default::default());
            encoder.copy_buffer_to_buffer(&buffer, 0, &s, 0, 256);
            queue.submit([encoder.finish()]);
            s.slice(..).map_async(wgpu::MapMode::Read, |_| {});
            let _ = device.poll(wgpu::PollType::wait_indefinitely());
            let _ = s.slice(..).get_mapped_range().map(|m| m.to_vec());
            s.destroy();
        }),
    );
}

/// The CPU backend's chains against the operators one at a time (see the module comment).
fn chains() {
    use webnn_wgpu::backend::cpu::{CpuContext, CpuGraph};
    use webnn_wgpu::backend::TensorDescriptor as CpuTensorDescriptor;
    use webnn_wgpu::ops::activation::Activation;
    use webnn_wgpu::ops::elementwise_unary::UnaryOp;
    let ctx = CpuContext::new(ContextOptions::default());
    let shape = vec![1024u32, 1024];
    let count = 1024 * 1024;
    let f32s = |shape: &[u32]| OperandDescriptor::new(DataType::Float32, shape.to_vec());
    let scalar = |b: &mut GraphBuilder, v: f32| b.constant(f32s(&[1]), &v.to_le_bytes()).unwrap();
    let bin = |b: &mut GraphBuilder, op: BinaryOp, x, y| b.operator1(Op::Binary(op), &[x, y], "").unwrap();
    let build = |which: &str| -> CpuGraph {
        let mut b = GraphBuilder::new(&ctx).unwrap();
        let x = b.input("x", f32s(&shape)).unwrap();
        let y = if which == "gelu" {
            let (root2, one, half) = (scalar(&mut b, std::f32::consts::SQRT_2), scalar(&mut b, 1.0), scalar(&mut b, 0.5));
            let d = bin(&mut b, BinaryOp::Div, x, root2);
            let e = b.operator1(Op::Unary(UnaryOp::Erf), &[d], "").unwrap();
            let a = bin(&mut b, BinaryOp::Add, e, one);
            let m = bin(&mut b, BinaryOp::Mul, x, a);
            bin(&mut b, BinaryOp::Mul, m, half)
        } else {
            let bias: Vec<u8> = (0..shape[1]).flat_map(|i| (i as f32 * 1e-3).to_le_bytes()).collect();
            let bias = b.constant(f32s(&shape[1..]), &bias).unwrap();
            let a = bin(&mut b, BinaryOp::Add, x, bias);
            let s = b.operator1(Op::Activation(Activation::Sigmoid), &[a], "").unwrap();
            bin(&mut b, BinaryOp::Mul, a, s)
        };
        CpuGraph::compile(&ctx, b.prepare_build(&[("y".to_string(), y)]).unwrap()).unwrap()
    };
    let x: Vec<u8> = (0..count).flat_map(|i| ((i % 4001) as f32 * 1e-3 - 2.0).to_le_bytes()).collect();
    let tensor = |readable| ctx.create_tensor(CpuTensorDescriptor { operand: f32s(&shape), readable, writable: !readable }).unwrap();
    let (input, output) = (tensor(false), tensor(true));
    ctx.write_tensor(&input, &x).unwrap();
    let time = |graph: &CpuGraph| {
        let run = || ctx.dispatch(graph, &[("x".into(), input.clone())], &[("y".into(), output.clone())]).unwrap();
        run();
        median((0..15).map(|_| {
            let t = Instant::now();
            run();
            t.elapsed().as_secs_f64() * 1e3
        }).collect())
    };
    let mut copy = vec![0u8; x.len()];
    let copy_ms = median((0..15).map(|_| {
        let t = Instant::now();
        copy.copy_from_slice(std::hint::black_box(&x));
        std::hint::black_box(&copy);
        t.elapsed().as_secs_f64() * 1e3
    }).collect());
    println!("## CPU backend: element-wise chains as one kernel ([1024, 1024] float32, median of 15, 3 interleaved rounds)");
    println!("| graph | operators | one at a time | chain | speed-up | plain copy of the tensor |");
    println!("|---|---|---|---|---|---|");
    for (which, operators) in [("gelu", "div, erf, add, mul, mul"), ("bias-silu", "add (bias row), sigmoid, mul")] {
        let (mut alone, mut fused) = (Vec::new(), Vec::new());
        for _ in 0..3 {
            std::env::set_var("WEBNN_WGPU_FUSION", "0");
            let g = build(which);
            std::env::remove_var("WEBNN_WGPU_FUSION");
            assert_eq!(g.fused_operators(), 0);
            alone.push(time(&g));
            let g = build(which);
            assert!(g.fused_operators() > 0, "{which}: no chain formed");
            fused.push(time(&g));
        }
        let (a, f) = (median(alone), median(fused));
        println!("| {which} | {operators} | {a:.2} ms | {f:.2} ms | {:.2}x | {copy_ms:.2} ms |", a / f);
    }
}

fn main() {
    let which: Vec<String> = std::env::args().skip(1).collect();
    if which.iter().any(|w| w == "chains") {
        chains();
        if which.len() == 1 {
            return;
        }
    }
    let ctx = pollster::block_on(Context::new(ContextOptions::default())).expect("a WebGPU adapter");
    let info = ctx.adapter_info();
    println!("adapter: {} ({:?}, {:?})", info.name, info.device_type, info.backend);
    if which.is_empty() || which.iter().any(|w| w == "memory") {
        memory(&ctx);
    }
    if which.is_empty() || which.iter().any(|w| w == "matmul") {
        matmul(&ctx);
    }
    if which.is_empty() || which.iter().any(|w| w == "dispatch") {
        dispatch(&ctx);
    }
}
