//! Case 1 of USE-CASES.md: a three-model text-to-image pipeline (stand-ins with real layer
//! shapes at a small scale), run all resident and then under a memory budget that holds only the
//! largest stage. `cargo run --release --example pipeline`.

mod stages;

use webnn_wgpu::backend::webgpu::{Context, ContextOptions};

const MIB: f64 = (1 << 20) as f64;

fn main() -> webnn_wgpu::Result<()> {
    pollster::block_on(async {
        let resident = Context::new(ContextOptions::default()).await?;
        let p = stages::Pipeline::build(&resident).await?;
        let sizes = p.stages().map(|g| g.total_device_bytes());
        let reference = stages::run(&resident, &p, 4, false).await?;

        // A budget that fits the largest stage (and the pipeline's own tensors), not the sum.
        let largest = *sizes.iter().max().unwrap_or(&0);
        let budget = largest + stages::tensor_bytes();
        let limited = Context::new(ContextOptions { memory_budget: Some(budget), ..Default::default() }).await?;
        let q = stages::Pipeline::build(&limited).await?;
        let swapped = stages::run(&limited, &q, 4, false).await?;

        println!("| stage | device bytes when resident |");
        println!("|---|---|");
        for (name, bytes) in ["text encoder", "denoiser", "decoder"].iter().zip(sizes) {
            println!("| {name} | {:.2} MiB |", bytes as f64 / MIB);
        }
        println!();
        println!("| run | peak device bytes | swap-ins | swap-outs | output |");
        println!("|---|---|---|---|---|");
        let info = limited.memory_info();
        println!("| all resident | {:.2} MiB | 0 | 0 | reference |", reference.peak_device_bytes as f64 / MIB);
        println!(
            "| budget {:.2} MiB (LRU) | {:.2} MiB | {} | {} | {} |",
            budget as f64 / MIB,
            swapped.peak_device_bytes as f64 / MIB,
            info.swap_ins,
            info.swap_outs,
            if swapped.pixels == reference.pixels { "bit-identical" } else { "DIFFERENT" }
        );
        Ok(())
    })
}
