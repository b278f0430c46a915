//! Robustness of the runtime: no leaks over many build -> dispatch -> read -> destroy cycles
//! (device and host bytes return exactly to where they started), allocation failures and
//! budgets as spec errors, and context loss.
//!
//! `LEAK_CYCLES` sets the graph/tensor cycles (default 10,000, about 10 s on llvmpipe) and
//! `LEAK_CONTEXT_CYCLES` the context cycles (default 50: a Vulkan device on llvmpipe takes about
//! 90 ms to create).

mod common;

use common::{block_on, context};
use webnn_wgpu::graph::{DataType, GraphBuilder, OperandDescriptor};
use webnn_wgpu::ops::elementwise_binary::BinaryOp;
use webnn_wgpu::ops::elementwise_unary::UnaryOp;
use webnn_wgpu::ops::Op;
use webnn_wgpu::runtime::{Context, ContextOptions, Graph, Tensor, TensorDescriptor};

fn env(name: &str, default: u32) -> u32 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn f32s(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn tensor(ctx: &Context, d: &OperandDescriptor, readable: bool, writable: bool) -> webnn_wgpu::Result<Tensor> {
    block_on(ctx.create_tensor(TensorDescriptor { operand: d.clone(), readable, writable }))
}

/// `y = exp(x + c) * c` over [4] float32 with a constant `c`: a constant, an intermediate and
/// two kernels, the parts of a graph that hold memory.
fn small_graph(ctx: &Context, c: f32) -> webnn_wgpu::Result<Graph> {
    let d = OperandDescriptor::new(DataType::Float32, vec![4]);
    let mut b = GraphBuilder::new(ctx)?;
    let x = b.input("x", d.clone())?;
    let k = b.constant(d, &f32s(&[c; 4]))?;
    let s = b.operator1(Op::Binary(BinaryOp::Add), &[x, k], "")?;
    let e = b.operator1(Op::Unary(UnaryOp::Exp), &[s], "")?;
    let y = b.operator1(Op::Binary(BinaryOp::Mul), &[e, k], "")?;
    block_on(b.build(&[("y".to_string(), y)]))
}

/// One cycle: build, create tensors, write, dispatch, read, check, destroy everything.
fn cycle(ctx: &Context, i: u32) {
    let d = OperandDescriptor::new(DataType::Float32, vec![4]);
    let c = (i % 7) as f32 * 0.25;
    let graph = small_graph(ctx, c).unwrap();
    let x = tensor(ctx, &d, false, true).unwrap();
    let y = tensor(ctx, &d, true, false).unwrap();
    let xs = [0.0f32, 0.5, -0.5, 1.0];
    ctx.write_tensor(&x, &f32s(&xs)).unwrap();
    ctx.dispatch(&graph, &[("x".into(), x.clone())], &[("y".into(), y.clone())]).unwrap();
    let bytes = block_on(ctx.read_tensor(&y)).unwrap();
    for (k, chunk) in bytes.chunks_exact(4).enumerate() {
        let got = f32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]) as f64;
        let want = ((xs[k] + c) as f64).exp() * c as f64;
        assert!((got - want).abs() <= 1e-5 * want.abs().max(1.0), "cycle {i}: {got} vs {want}");
    }
    x.destroy();
    y.destroy();
    graph.destroy();
}

#[test]
fn ten_thousand_graph_and_tensor_cycles_return_memory_exactly() {
    let ctx = context();
    let cycles = env("LEAK_CYCLES", 10_000);
    // Warm-up: the pipeline cache fills once.
    cycle(&ctx, 0);
    let start = ctx.memory_info();
    let pipelines = ctx.pipeline_count();
    let buffers = ctx.buffers().live_buffers();
    let t0 = std::time::Instant::now();
    for i in 1..=cycles {
        cycle(&ctx, i);
        let m = ctx.memory_info();
        assert_eq!(m.device_bytes, start.device_bytes, "device bytes after cycle {i}");
        assert_eq!(m.host_bytes, start.host_bytes, "host bytes after cycle {i}");
    }
    assert_eq!(ctx.buffers().live_buffers(), buffers, "live buffers");
    assert_eq!(ctx.pipeline_count(), pipelines, "the pipeline cache grew");
    assert!(ctx.take_uncaptured_error().is_none());
    eprintln!(
        "{cycles} cycles in {:.1} s; device bytes {} and host bytes {} throughout",
        t0.elapsed().as_secs_f64(),
        start.device_bytes,
        start.host_bytes
    );
}

#[test]
fn context_cycles_free_their_devices() {
    let cycles = env("LEAK_CONTEXT_CYCLES", 50);
    let t0 = std::time::Instant::now();
    for i in 0..cycles {
        let ctx = context();
        cycle(&ctx, i);
        let m = ctx.memory_info();
        // The destroyed graph's intermediate slots are trimmed from the pool: nothing is held.
        assert_eq!(m.device_bytes, 0, "context {i}");
        assert_eq!(m.host_bytes, 0, "context {i}");
        if i % 2 == 0 {
            ctx.destroy();
        }
    }
    eprintln!("{cycles} context cycles in {:.1} s", t0.elapsed().as_secs_f64());
}

#[test]
fn tensors_larger_than_the_device_allows_are_type_errors() {
    let ctx = context();
    let max = ctx.max_tensor_byte_length();
    // The largest valid shape whose bytes exceed maxBufferSize/maxStorageBufferBindingSize.
    let elements = (max / 4 + 1).min(i32::MAX as u64) as u32;
    let d = OperandDescriptor::new(DataType::Float32, vec![elements]);
    if d.byte_length() <= max {
        eprintln!("skipped: maxTensorByteLength {max} is beyond any valid shape");
        return;
    }
    let e = tensor(&ctx, &d, true, true).err().expect("a tensor over the limit");
    assert_eq!(e.name(), "TypeError", "{e}");
    let mut b = GraphBuilder::new(&ctx).unwrap();
    assert_eq!(b.input("x", d.clone()).unwrap_err().name(), "TypeError");
    // An operator whose output would exceed it fails at the builder call, not at build.
    let half = OperandDescriptor::new(DataType::Float32, vec![2, elements / 2 + 1]);
    let x = b.input("small", OperandDescriptor::new(DataType::Float32, vec![2, 1])).unwrap();
    let e = b.operator1(Op::Expand { new_shape: half.shape.clone() }, &[x], "").unwrap_err();
    assert_eq!(e.name(), "TypeError", "{e}");
    // The context still works.
    cycle(&ctx, 1);
}

#[test]
fn allocation_beyond_a_budget_is_a_quota_error_until_memory_is_freed() {
    let ctx = block_on(Context::new(ContextOptions { memory_budget: Some(4096), ..Default::default() })).unwrap();
    let d = OperandDescriptor::new(DataType::Float32, vec![768]);
    let a = tensor(&ctx, &d, true, true).unwrap();
    // Tensors cannot be evicted: a second one does not fit.
    let e = tensor(&ctx, &d, true, true).err().expect("a second 3 KiB tensor under a 4 KiB budget");
    assert_eq!(e.name(), "QuotaExceededError", "{e}");
    a.destroy();
    let b = tensor(&ctx, &d, true, true).unwrap();
    b.destroy();
    assert_eq!(ctx.memory_info().device_bytes, 0);
}

/// The raw allocation path: a buffer the device cannot create (over `maxBufferSize`, bypassing
/// the descriptor checks) is an `UnknownError` from the error scope, not a panic, and the
/// context keeps working.
#[test]
fn gpu_allocation_failure_is_an_unknown_error() {
    let ctx = context();
    let size = ctx.limits().max_buffer_size.saturating_add(4);
    let e = block_on(ctx.create_buffer(size, "too large")).err().expect("a buffer over maxBufferSize");
    assert_eq!(e.name(), "UnknownError", "{e}");
    assert_eq!(ctx.memory_info().device_bytes, 0, "a failed allocation is not counted");
    cycle(&ctx, 3);
}

#[test]
fn loss_rejects_reads_and_later_calls_and_a_new_context_works() {
    let ctx = context();
    let d = OperandDescriptor::new(DataType::Float32, vec![4]);
    let graph = small_graph(&ctx, 1.0).unwrap();
    let x = tensor(&ctx, &d, false, true).unwrap();
    let y = tensor(&ctx, &d, true, false).unwrap();
    ctx.write_tensor(&x, &f32s(&[1.0; 4])).unwrap();
    ctx.dispatch(&graph, &[("x".into(), x.clone())], &[("y".into(), y.clone())]).unwrap();
    let mut builder = GraphBuilder::new(&ctx).unwrap();
    let input = builder.input("x", d.clone()).unwrap();
    // Natively the device is lost by destroying it, as the browser's device.destroy() does.
    ctx.device().destroy();
    let _ = ctx.device().poll(wgpu::PollType::wait_indefinitely());
    let message = block_on(ctx.lost());
    assert!(!message.is_empty());
    assert_eq!(block_on(ctx.read_tensor(&y)).unwrap_err().name(), "TypeError", "the tensor is destroyed with the context");
    let e = ctx.dispatch(&graph, &[("x".into(), x.clone())], &[("y".into(), y.clone())]).unwrap_err();
    assert_eq!(e.name(), "InvalidStateError", "{e}");
    assert_eq!(tensor(&ctx, &d, true, false).err().map(|e| e.name()), Some("InvalidStateError"));
    assert_eq!(GraphBuilder::new(&ctx).err().map(|e| e.name()), Some("InvalidStateError"));
    let y2 = builder.operator1(Op::Unary(UnaryOp::Exp), &[input], "");
    assert_eq!(y2.err().map(|e| e.name()), Some("InvalidStateError"));
    assert!(graph.is_destroyed() && x.is_destroyed());
    let fresh = context();
    cycle(&fresh, 5);
}

/// A read returns the tensor as the work issued before it left it, even when more dispatches
/// and writes follow before it is awaited (the spec's timeline; reads were once issued late).
#[test]
fn reads_see_the_state_at_the_time_they_are_issued() {
    let ctx = context();
    let d = OperandDescriptor::new(DataType::Float32, vec![4]);
    let graph = small_graph(&ctx, 1.0).unwrap();
    let x = tensor(&ctx, &d, true, true).unwrap();
    let y = tensor(&ctx, &d, true, true).unwrap();
    ctx.write_tensor(&x, &f32s(&[0.0; 4])).unwrap();
    let first = ctx.read_tensor(&x);
    ctx.write_tensor(&x, &f32s(&[1.0; 4])).unwrap();
    ctx.dispatch(&graph, &[("x".into(), x.clone())], &[("y".into(), y.clone())]).unwrap();
    let second = ctx.read_tensor(&y);
    ctx.write_tensor(&y, &f32s(&[7.0; 4])).unwrap();
    assert_eq!(block_on(first).unwrap(), f32s(&[0.0; 4]));
    let want = ((2.0f64).exp() as f32).to_le_bytes();
    let got = block_on(second).unwrap();
    for chunk in got.chunks_exact(4) {
        let (g, w) = (f32::from_le_bytes(chunk.try_into().unwrap()), f32::from_le_bytes(want));
        assert!((g - w).abs() <= 1e-5 * w, "{g} vs {w}");
    }
    assert_eq!(block_on(ctx.read_tensor(&y)).unwrap(), f32s(&[7.0; 4]));
}
