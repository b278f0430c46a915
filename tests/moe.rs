//! The MoE demo model natively (examples/moe): a few greedy tokens in the lru mode under a 25%
//! expert budget, where experts go to the "disk" tier and stream back from the weight file,
//! must be the PyTorch reference's tokens (www/models/moe/reference.json).

#[allow(dead_code)]
#[path = "../examples/moe/model.rs"]
mod model;

use model::{argmax, read_reference, relative_error, Config, Mode, Moe, Weights};
use std::path::Path;

#[test]
fn lru_under_a_quarter_budget_decodes_the_reference_tokens() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("www/models/moe");
    let json = |name: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(dir.join(name)).expect("read")).expect("json")
    };
    let config = Config::from_json(&json("config.json")).unwrap();
    let (prompts, tolerance) = read_reference(&json("reference.json")).unwrap();
    let weights = Weights::open(&dir.join("model.safetensors"), &config).unwrap();
    let mut m = Moe::new(config, &weights, Mode::Lru, 0.25).unwrap();
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
    assert_eq!(out, p.greedy_tokens[..6]);
    let info = m.ctx.memory_info();
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
