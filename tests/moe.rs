//! The MoE demo model natively (examples/moe): a few greedy tokens in the lru mode under a 25%
//! expert budget, where experts go to the "disk" tier and stream back from the weight file
//! (float16 widened on the GPU), must be the PyTorch reference's tokens
//! (www/models/moe/reference.json); so must lru-host, where they come back from host copies
//! without reading the file, the standard-only rebuild baseline, and the fused mode (the routing
//! and the chosen experts in one graph a token).
#![cfg(not(target_arch = "wasm32"))] // native: `wasm-pack test` builds every test target for wasm32

#[allow(dead_code)]
#[path = "../examples/moe/model.rs"]
mod model;

use model::{argmax, read_reference, relative_error, Config, Mode, Moe, Weights};
use std::path::Path;

/// Six greedy tokens after the first prompt; returns the model and the swap-ins since its build.
fn decode(mode: Mode, widen_on_gpu: Option<bool>) -> (Moe<'static>, u64) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("www/models/moe");
    let json = |name: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(dir.join(name)).expect("read")).expect("json")
    };
    let config = Config::from_json(&json("config.json")).unwrap();
    let (prompts, tolerance) = read_reference(&json("reference.json")).unwrap();
    let weights = Box::leak(Box::new(Weights::open(&dir.join("model.safetensors"), &config, widen_on_gpu).unwrap()));
    let mut m = Moe::new(config, weights, mode, 0.25).unwrap();
    let built = m.ctx.memory_info().swap_ins;
    let p = &prompts[0];
    let mut logits = Vec::new();
    for &id in &p.ids {
        logits = m.step(id).unwrap();
    }
    let error = relative_error(&logits, &p.last_logits);
    assert!(error <= tolerance, "last-position logits rel err {error}");
    let mut out = Vec::new();
    for _ in 0..6 {
        let token = argmax(&logits) as u32;
        out.push(token);
        logits = m.step(token).unwrap();
    }
    assert_eq!(out, p.greedy_tokens[..6], "{}", mode.name());
    let swap_ins = m.ctx.memory_info().swap_ins - built;
    (m, swap_ins)
}

#[test]
fn lru_under_a_quarter_budget_decodes_the_reference_tokens() {
    let (m, swap_ins) = decode(Mode::Lru, Some(true));
    let info = m.ctx.memory_info();
    assert_eq!(
        swap_ins, m.stats.expert_misses,
        "only experts come back: the graphs every token runs have the high eviction priority"
    );
    assert!(info.swap_outs > 0 && info.bytes_streamed_from_disk > 0, "the budget evicted experts: {info:?}");
    assert!(
        info.device_bytes <= m.budget_bytes,
        "{} bytes resident over the budget {}",
        info.device_bytes,
        m.budget_bytes
    );
    let (resident, all) = m.resident_experts();
    assert!(resident < all, "{resident} of {all} experts resident");
}

#[test]
fn lru_with_host_copies_brings_experts_back_without_reading_the_file() {
    let (m, swap_ins) = decode(Mode::LruHost, Some(true));
    let info = m.ctx.memory_info();
    assert_eq!(swap_ins, m.stats.expert_misses);
    assert!(m.stats.expert_misses > 0, "the budget evicted experts");
    // Every weight was read once, when loaded, into its GPU buffer and its host copy.
    let file = std::fs::metadata(Path::new(env!("CARGO_MANIFEST_DIR")).join("www/models/moe/model.safetensors")).unwrap();
    assert!(info.bytes_streamed_from_disk < file.len(), "{info:?}");
    assert!(info.host_bytes >= 2 * info.bytes_streamed_from_disk, "float32 host copies of the float16 file: {info:?}");
    assert!(info.device_bytes <= m.budget_bytes);
}

#[test]
fn the_standard_only_rebuild_baseline_decodes_the_reference_tokens() {
    let (m, _) = decode(Mode::Rebuild, None);
    assert_eq!(m.stats.builds, m.stats.expert_uses);
    assert_eq!(m.ctx.memory_info().bytes_streamed_from_disk, 0, "the baseline reads the file itself");
}

#[test]
fn the_fused_mode_routes_on_the_gpu_and_decodes_the_reference_tokens() {
    // The router's top-2, their weights and the chosen experts' weights all come from one graph
    // a token: no expert graph exists, and the tokens and logits are the reference's.
    let (m, swap_ins) = decode(Mode::Fused, Some(true));
    assert_eq!(swap_ins, 0);
    assert_eq!(m.resident_experts(), (0, 32), "no expert graphs: the token graph holds every expert");
    assert_eq!(m.stats.expert_misses, 0);
}

#[test]
fn the_fused_mode_decodes_ahead_of_its_reads_with_the_gpus_greedy_tokens() {
    // decode_greedy: each step's token is the previous step's argMax on the GPU, with up to
    // `ahead` steps issued before their reads. Every prompt's tokens must be the reference's,
    // with one step in flight (each read waited for) and with several.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("www/models/moe");
    let json = |name: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(dir.join(name)).expect("read")).expect("json")
    };
    let config = Config::from_json(&json("config.json")).unwrap();
    let (prompts, tolerance) = read_reference(&json("reference.json")).unwrap();
    let weights = Weights::open(&dir.join("model.safetensors"), &config, Some(true)).unwrap();
    let mut m = Moe::new(config, &weights, Mode::Fused, 1.0).unwrap();
    for ahead in [1, 4] {
        for p in &prompts {
            m.reset().unwrap();
            let n = p.greedy_tokens.len().min(12);
            let d = m.decode_greedy(&p.ids, n, ahead).unwrap();
            assert_eq!(d.tokens, p.greedy_tokens[..n], "{:?}, {ahead} ahead", p.text);
            let error = relative_error(&d.first_logits, &p.last_logits);
            assert!(error <= tolerance, "last-position logits rel err {error}");
            assert_eq!(m.pos as usize, p.ids.len() + n - 1, "the last token is not fed");
        }
    }
    // Steps stop at max_seq: the prompt fills all but one position, which picks one more token.
    m.reset().unwrap();
    let ids: Vec<u32> = prompts[0].ids.iter().copied().cycle().take(m.c.max_seq as usize - 1).collect();
    assert_eq!(m.decode_greedy(&ids, 5, 4).unwrap().tokens.len(), 2);
    m.reset().unwrap();
    assert!(m.decode_greedy(&vec![1; m.c.max_seq as usize + 1], 1, 4).is_err(), "a prompt longer than max_seq");
}
