//! Device memory primitives: swapOut/swapIn, residency, exact accounting, the shared
//! intermediate pool and the memory budget with least-recently-used eviction.
#![cfg(not(target_arch = "wasm32"))] // native: `wasm-pack test` builds every test target for wasm32

mod common;
use common::*;
use webnn_wgpu::graph::{DataType, GraphBuilder, OperandDescriptor};
use webnn_wgpu::memory::{EvictionPriority, Residency};
use webnn_wgpu::ops::elementwise_binary::BinaryOp;
use webnn_wgpu::ops::elementwise_unary::UnaryOp;
use webnn_wgpu::ops::{HostTensor, Op};
use webnn_wgpu::backend::webgpu::{Context, ContextOptions, Graph, Tensor, TensorDescriptor};
use webnn_wgpu::Error;

/// A graph `y = exp(transpose(x * w1 + w2)) * w3` over `n` float32 values with three constants,
/// plus its float64 reference. The transpose (an identity copy) keeps two intermediates apart
/// from operator fusion: `mul+add`, `transpose` and `exp+mul` are three kernels.
struct Fixture {
    graph: Graph,
    input: Tensor,
    output: Tensor,
    x: HostTensor,
    expected: HostTensor,
}

fn fixture(ctx: &Context, n: u32, seed: u64) -> webnn_wgpu::Result<Fixture> {
    let mut rng = Rng::new(seed);
    let d = OperandDescriptor::new(DataType::Float32, vec![n]);
    let x = rng.tensor(DataType::Float32, &[n], -1.0, 1.0);
    let w: Vec<HostTensor> = (0..3)
        .map(|_| rng.tensor(DataType::Float32, &[n], -1.0, 1.0))
        .collect();
    let mut b = GraphBuilder::new(ctx)?;
    let xi = b.input("x", d.clone())?;
    let c: Vec<_> = w
        .iter()
        .map(|t| b.constant(d.clone(), &t.to_bytes()))
        .collect::<Result<_, _>>()?;
    let m = b.operator1(Op::Binary(BinaryOp::Mul), &[xi, c[0]], "")?;
    let a = b.operator1(Op::Binary(BinaryOp::Add), &[m, c[1]], "")?;
    let t = b.operator1(Op::Transpose { permutation: None }, &[a], "")?;
    let e = b.operator1(Op::Unary(UnaryOp::Exp), &[t], "")?;
    let y = b.operator1(Op::Binary(BinaryOp::Mul), &[e, c[2]], "")?;
    let graph = block_on(b.build(&[("y".to_string(), y)]))?;
    let input = block_on(ctx.create_tensor(TensorDescriptor {
        operand: d.clone(),
        readable: false,
        writable: true,
    }))?;
    let output = block_on(ctx.create_tensor(TensorDescriptor {
        operand: d.clone(),
        readable: true,
        writable: false,
    }))?;
    ctx.write_tensor(&input, &x.to_bytes())?;
    let r = |op, ins: &[HostTensor]| reference_op(&op, ins).unwrap().remove(0);
    let m = r(Op::Binary(BinaryOp::Mul), &[x.clone(), w[0].clone()]);
    let a = r(Op::Binary(BinaryOp::Add), &[m, w[1].clone()]);
    let t = r(Op::Transpose { permutation: None }, &[a]);
    let e = r(Op::Unary(UnaryOp::Exp), &[t]);
    let expected = r(Op::Binary(BinaryOp::Mul), &[e, w[2].clone()]);
    Ok(Fixture {
        graph,
        input,
        output,
        x,
        expected,
    })
}

fn run(ctx: &Context, f: &Fixture) -> Vec<u8> {
    ctx.dispatch(
        &f.graph,
        &[("x".into(), f.input.clone())],
        &[("y".into(), f.output.clone())],
    )
    .unwrap();
    block_on(ctx.read_tensor(&f.output)).unwrap()
}

fn budget_context(budget: u64) -> Context {
    block_on(Context::new(ContextOptions {
        memory_budget: Some(budget),
        ..Default::default()
    }))
    .unwrap()
}

#[test]
fn swaps_keep_results_bit_identical_and_release_device_memory() {
    let ctx = context();
    let f = fixture(&ctx, 1000, 1).unwrap();
    let first = run(&ctx, &f);
    let got = HostTensor::from_bytes(f.expected.descriptor.clone(), &first).unwrap();
    assert_close(
        &[got],
        &[f.expected.clone()],
        0,
        1.0 / 1024.0 * 4.0,
        "fixture",
    );
    assert_eq!(f.x.data.len(), 1000);

    let resident = ctx.memory_info().device_bytes;
    assert_eq!(f.graph.residency(), Residency::Device);
    assert_eq!(f.graph.device_bytes(), 3 * 4000);
    block_on(f.graph.swap_out(Residency::Host)).unwrap();
    assert_eq!(f.graph.residency(), Residency::Host);
    assert_eq!(f.graph.device_bytes(), 0);
    let swapped = ctx.memory_info().device_bytes;
    // The three constants and the graph's two intermediate slots are released.
    assert_eq!(resident - swapped, 3 * 4000 + 2 * 4096);
    assert_eq!(f.graph.host_bytes(), 3 * 4000);

    // dispatch() of a swapped-out graph swaps it in first.
    assert_eq!(run(&ctx, &f), first);
    assert_eq!(f.graph.residency(), Residency::Device);
    assert_eq!(ctx.memory_info().device_bytes, resident);

    block_on(f.graph.swap_out(Residency::Host)).unwrap();
    block_on(f.graph.swap_in()).unwrap();
    block_on(f.graph.swap_in()).unwrap();
    assert_eq!(ctx.memory_info().device_bytes, resident);
    assert_eq!(run(&ctx, &f), first);
    let info = ctx.memory_info();
    assert_eq!(info.swap_outs, 2);
    assert_eq!(info.swap_ins, 3);
}

#[test]
fn a_thousand_swap_cycles_leave_memory_where_it_started() {
    let ctx = context();
    let f = fixture(&ctx, 256, 2).unwrap();
    let first = run(&ctx, &f);
    let start = ctx.memory_info();
    for i in 0..1000 {
        block_on(f.graph.swap_out(Residency::Host)).unwrap();
        block_on(f.graph.swap_in()).unwrap();
        if i % 250 == 0 {
            assert_eq!(run(&ctx, &f), first);
        }
    }
    let end = ctx.memory_info();
    assert_eq!(end.device_bytes, start.device_bytes);
    assert_eq!(end.host_bytes, start.host_bytes);
    // 2 tensors + 3 constants + 2 intermediate slots (mul+add -> transpose -> exp+mul).
    assert_eq!(ctx.buffers().live_buffers(), 7);
}

#[test]
fn device_bytes_equal_the_buffers_the_runtime_holds() {
    let ctx = context();
    assert_eq!(ctx.memory_info().device_bytes, 0);
    let f = fixture(&ctx, 1000, 3).unwrap();
    // Tensors (4000 bytes each), constants (3 x 4000), two pool slots of 4096 (rounded to 256).
    assert_eq!(
        ctx.memory_info().device_bytes,
        2 * 4000 + 3 * 4000 + 2 * 4096
    );
    let g = fixture(&ctx, 1000, 4).unwrap();
    // The second graph shares the first one's pool slots.
    assert_eq!(
        ctx.memory_info().device_bytes,
        4 * 4000 + 6 * 4000 + 2 * 4096
    );
    f.graph.destroy();
    assert_eq!(
        ctx.memory_info().device_bytes,
        4 * 4000 + 3 * 4000 + 2 * 4096
    );
    f.input.destroy();
    f.output.destroy();
    g.graph.destroy();
    assert_eq!(ctx.memory_info().device_bytes, 2 * 4000);
    assert_eq!(ctx.buffers().live_bytes(), ctx.memory_info().device_bytes);
}

#[test]
fn shared_constant_tensor_stays_while_a_user_is_resident() {
    let ctx = context();
    let d = OperandDescriptor::new(DataType::Float32, vec![64]);
    let values: Vec<f64> = (0..64).map(|i| i as f64 * 0.5).collect();
    let bytes = HostTensor::new(d.clone(), values.clone())
        .unwrap()
        .to_bytes();
    let weights = block_on(ctx.create_constant_tensor(d.clone(), &bytes)).unwrap();
    let build = |op| {
        let mut b = GraphBuilder::new(&ctx).unwrap();
        let x = b.input("x", d.clone()).unwrap();
        let w = b.constant_tensor(&weights).unwrap();
        let y = b.operator1(Op::Binary(op), &[x, w], "").unwrap();
        block_on(b.build(&[("y".to_string(), y)])).unwrap()
    };
    let add = build(BinaryOp::Add);
    let mul = build(BinaryOp::Mul);
    weights.destroy(); // legal after build: the graphs keep the bytes
    let x = block_on(ctx.create_tensor(TensorDescriptor {
        operand: d.clone(),
        readable: false,
        writable: true,
    }))
    .unwrap();
    let y = block_on(ctx.create_tensor(TensorDescriptor {
        operand: d.clone(),
        readable: true,
        writable: false,
    }))
    .unwrap();
    ctx.write_tensor(
        &x,
        &HostTensor::new(d.clone(), vec![2.0; 64])
            .unwrap()
            .to_bytes(),
    )
    .unwrap();
    let check = |g: &Graph, f: fn(f64) -> f64| {
        ctx.dispatch(g, &[("x".into(), x.clone())], &[("y".into(), y.clone())])
            .unwrap();
        let got =
            HostTensor::from_bytes(d.clone(), &block_on(ctx.read_tensor(&y)).unwrap()).unwrap();
        let want: Vec<f64> = values.iter().map(|&v| f(v)).collect();
        assert_eq!(got.data, want);
    };
    check(&add, |v| v + 2.0);
    let both = ctx.memory_info().device_bytes;
    block_on(add.swap_out(Residency::Host)).unwrap();
    // mul still uses the weights: they stay on the GPU.
    assert_eq!(ctx.memory_info().device_bytes, both);
    check(&mul, |v| v * 2.0);
    block_on(mul.swap_out(Residency::Host)).unwrap();
    // Nobody resident: the weights (256 bytes) are released (one-operator graphs have no
    // intermediates).
    assert_eq!(ctx.memory_info().device_bytes, both - 256);
    check(&add, |v| v + 2.0);
    check(&mul, |v| v * 2.0);
}

#[test]
fn budget_evicts_least_recently_used_and_is_never_exceeded() {
    // Each graph: 3 constants x 4000 bytes + two 4096-byte pool slots shared by all graphs.
    let tensors = 2 * 4000;
    let per_graph = 3 * 4000;
    let budget = (tensors * 8 + 2 * 4096 + 3 * per_graph) as u64;
    let ctx = budget_context(budget);
    let graphs: Vec<Fixture> = (0..8)
        .map(|i| fixture(&ctx, 1000, 10 + i).unwrap())
        .collect();
    assert!(ctx.memory_info().device_bytes <= budget);
    let expected: Vec<Vec<u8>> = graphs.iter().map(|f| run(&ctx, f)).collect();
    let mut rng = Rng::new(99);
    for step in 0..300 {
        let k = rng.below(8) as usize;
        match rng.below(4) {
            0 => block_on(graphs[k].graph.swap_out(Residency::Host)).unwrap(),
            1 => block_on(graphs[k].graph.swap_in()).unwrap(),
            _ => assert_eq!(run(&ctx, &graphs[k]), expected[k], "step {step}"),
        }
        let info = ctx.memory_info();
        assert!(
            info.device_bytes <= budget,
            "step {step}: {} > {budget}",
            info.device_bytes
        );
        let resident = graphs
            .iter()
            .filter(|f| f.graph.residency() == Residency::Device)
            .count();
        assert!(resident <= 3, "step {step}: {resident} resident graphs");
    }
    // Least recently used goes first: touch 0, 1, 2 in order, then 3 evicts 0.
    for k in [0, 1, 2, 3] {
        run(&ctx, &graphs[k]);
    }
    assert_eq!(graphs[0].graph.residency(), Residency::Host);
    assert!(graphs[1..4]
        .iter()
        .all(|f| f.graph.residency() == Residency::Device));
}

#[test]
fn swap_in_under_the_budget_reuses_the_evicted_buffers() {
    // Room for a high-priority graph (which keeps the pool's slots) and one more: each swap-in
    // evicts the other normal graph and takes over its three constant buffers (same sizes), so
    // after the first eviction no buffer is created, and the device bytes stay exactly the live
    // buffers: tensors, pool slots and two graphs' constants.
    let tensors = 3 * 2 * 4000;
    let per_graph = 3 * 4000;
    let budget = (tensors + 2 * 4096 + 2 * per_graph) as u64;
    let ctx = budget_context(budget);
    let kept = fixture(&ctx, 1000, 3).unwrap();
    kept.graph.set_eviction_priority(EvictionPriority::High);
    let graphs = [fixture(&ctx, 1000, 1).unwrap(), fixture(&ctx, 1000, 2).unwrap()];
    let expected: Vec<Vec<u8>> = graphs.iter().map(|f| run(&ctx, f)).collect();
    assert_eq!(graphs[0].graph.residency(), Residency::Host);
    assert_eq!(kept.graph.residency(), Residency::Device);
    let (last, swap_ins) = (ctx.buffers().last_id(), ctx.memory_info().swap_ins);
    for step in 0..20 {
        let k = step % 2;
        assert_eq!(run(&ctx, &graphs[k]), expected[k], "step {step}");
        assert_eq!(graphs[1 - k].graph.residency(), Residency::Host, "step {step}");
        assert_eq!(ctx.memory_info().device_bytes, budget, "step {step}");
        assert_eq!(ctx.buffers().live_bytes(), budget, "step {step}");
    }
    assert_eq!(ctx.buffers().last_id(), last, "a swap-in created buffers");
    assert_eq!(ctx.memory_info().swap_ins, swap_ins + 20);
    assert_eq!(kept.graph.residency(), Residency::Device);
}

#[test]
fn swap_in_at_the_budget_keeps_the_pool_slots_it_needs() {
    // Room for one graph: each swap-in (by swapIn() or by a dispatch) evicts the other graph,
    // whose pool slots have the sizes it needs; they stay, so no buffer is created.
    let budget = (2 * 2 * 4000 + 2 * 4096 + 3 * 4000) as u64;
    let ctx = budget_context(budget);
    let graphs = [fixture(&ctx, 1000, 1).unwrap(), fixture(&ctx, 1000, 2).unwrap()];
    let expected: Vec<Vec<u8>> = graphs.iter().map(|f| run(&ctx, f)).collect();
    let last = ctx.buffers().last_id();
    for step in 0..10 {
        let k = step % 2;
        if step % 4 < 2 {
            block_on(graphs[k].graph.swap_in()).unwrap();
        }
        assert_eq!(run(&ctx, &graphs[k]), expected[k], "step {step}");
        assert_eq!(graphs[1 - k].graph.residency(), Residency::Host, "step {step}");
        assert_eq!(ctx.buffers().live_bytes(), budget, "step {step}");
    }
    assert_eq!(ctx.buffers().last_id(), last, "a swap-in created buffers");
}

#[test]
fn budget_evicts_lower_eviction_priorities_first() {
    // Room for three graphs (as above); graph 0 is "high", graph 1 "low", the rest "normal".
    let budget = (2 * 4000 * 6 + 2 * 4096 + 3 * 3 * 4000) as u64;
    let ctx = budget_context(budget);
    let graphs: Vec<Fixture> = (0..6).map(|i| fixture(&ctx, 1000, 20 + i).unwrap()).collect();
    let expected: Vec<Vec<u8>> = graphs.iter().map(|f| run(&ctx, f)).collect();
    assert_eq!(graphs[0].graph.eviction_priority(), EvictionPriority::Normal);
    graphs[0].graph.set_eviction_priority(EvictionPriority::High);
    graphs[1].graph.set_eviction_priority(EvictionPriority::Low);
    // 0 and 1 are used least recently, yet 1 ("low") goes first and 0 ("high") stays while
    // "normal" graphs cycle through the rest of the budget.
    for k in [0, 1, 2, 3, 4, 5, 2, 3, 4, 5] {
        assert_eq!(run(&ctx, &graphs[k]), expected[k]);
        assert_eq!(graphs[0].graph.residency(), Residency::Device, "after {k}");
    }
    assert_eq!(graphs[1].graph.residency(), Residency::Host);
    // "high" is still evicted when nothing else is left to evict, and swapOut() works on it.
    block_on(graphs[0].graph.swap_out(Residency::Host)).unwrap();
    assert_eq!(run(&ctx, &graphs[0]), expected[0]);
    assert!(ctx.memory_info().device_bytes <= budget);
}

#[test]
fn graph_larger_than_the_budget_is_a_quota_error() {
    let ctx = budget_context(10_000);
    match fixture(&ctx, 1000, 5) {
        Err(Error::QuotaExceeded(m)) => assert!(m.contains("10000"), "{m}"),
        Err(e) => panic!("expected QuotaExceededError, got {e}"),
        Ok(_) => panic!("expected QuotaExceededError"),
    }
}

#[test]
fn swap_out_waits_for_queued_dispatches() {
    let ctx = context();
    let f = fixture(&ctx, 4096, 6).unwrap();
    let outputs: Vec<Tensor> = (0..4)
        .map(|_| {
            block_on(ctx.create_tensor(TensorDescriptor {
                operand: f.output.descriptor().clone(),
                readable: true,
                writable: false,
            }))
            .unwrap()
        })
        .collect();
    for out in &outputs {
        ctx.dispatch(
            &f.graph,
            &[("x".into(), f.input.clone())],
            &[("y".into(), out.clone())],
        )
        .unwrap();
    }
    block_on(f.graph.swap_out(Residency::Host)).unwrap();
    let want = f.expected.clone();
    for out in &outputs {
        let got = HostTensor::from_bytes(
            want.descriptor.clone(),
            &block_on(ctx.read_tensor(out)).unwrap(),
        )
        .unwrap();
        assert_close(
            &[got],
            &[want.clone()],
            0,
            4.0 / 1024.0,
            "queued before swapOut",
        );
    }
}

#[test]
fn swaps_after_destroy_or_loss_are_invalid_state() {
    let ctx = context();
    let f = fixture(&ctx, 64, 7).unwrap();
    f.graph.destroy();
    assert!(matches!(block_on(f.graph.swap_in()), Err(Error::InvalidState(_))));
    assert!(matches!(
        block_on(f.graph.swap_out(Residency::Host)),
        Err(Error::InvalidState(_))
    ));
    let g = fixture(&ctx, 64, 8).unwrap();
    let pending = g.graph.swap_out(Residency::Host);
    ctx.destroy();
    // The swap started before the loss either completed or reports the loss; nothing panics.
    let _ = block_on(pending);
    assert!(matches!(block_on(g.graph.swap_in()), Err(Error::InvalidState(_))));
    assert!(matches!(
        block_on(g.graph.swap_out(Residency::Host)),
        Err(Error::InvalidState(_))
    ));
}
