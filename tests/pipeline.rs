//! Case 1 of USE-CASES.md: three stages under a budget that fits only the largest one keep the
//! peak device bytes at that stage, and give the same bits as the all-resident run.
#![cfg(not(target_arch = "wasm32"))] // native: `wasm-pack test` builds every test target for wasm32

mod common;
#[path = "../examples/pipeline/stages.rs"]
mod stages;

use common::block_on;
use webnn_wgpu::backend::webgpu::{Context, ContextOptions};

#[test]
fn pipeline_under_budget_peaks_at_largest_stage() {
    let resident = common::context();
    let p = block_on(stages::Pipeline::build(&resident)).unwrap();
    let sizes = p.stages().map(|g| g.total_device_bytes());
    let sum: u64 = sizes.iter().sum();
    let largest = *sizes.iter().max().unwrap();
    let weights: u64 = p.stages().iter().map(|g| g.host_bytes()).sum();
    let reference = block_on(stages::run(&resident, &p, 2, false)).unwrap();
    let tensors = stages::tensor_bytes();
    assert!(reference.peak_device_bytes >= weights + tensors, "all resident holds every stage's weights");

    // Explicit load-compute-unload, and the LRU budget: both peak at the largest stage.
    let explicit_ctx = common::context();
    let q = block_on(stages::Pipeline::build(&explicit_ctx)).unwrap();
    for g in q.stages() {
        block_on(g.swap_out(webnn_wgpu::memory::Residency::Host)).unwrap();
    }
    let explicit = block_on(stages::run(&explicit_ctx, &q, 2, true)).unwrap();

    let budget = largest + tensors;
    let lru_ctx = block_on(Context::new(ContextOptions { memory_budget: Some(budget), ..Default::default() })).unwrap();
    let r = block_on(stages::Pipeline::build(&lru_ctx)).unwrap();
    let lru = block_on(stages::run(&lru_ctx, &r, 2, false)).unwrap();

    for (name, run) in [("explicit", &explicit), ("lru", &lru)] {
        assert_eq!(run.pixels, reference.pixels, "{name}: output differs from the all-resident run");
        assert!(
            run.peak_device_bytes <= largest + tensors,
            "{name}: peak {} above largest stage {} + tensors {}",
            run.peak_device_bytes,
            largest,
            tensors
        );
        assert!(run.peak_device_bytes < sum, "{name}: peak must be below the sum of the stages");
    }
    assert!(lru_ctx.memory_info().swap_outs >= 2, "the budget evicted stages");
    let pixels: Vec<f32> = bytemuck::cast_slice(&reference.pixels).to_vec();
    assert!(pixels.iter().all(|v| v.is_finite() && *v > 0.0 && *v < 1.0), "sigmoid output in (0, 1)");
}
