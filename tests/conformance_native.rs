//! The WPT-derived conformance cases run natively through the core API, on the WebGPU backend
//! (llvmpipe or a GPU), on the CPU backend and on the float64 reference backend. Set `WPT_FILES=add.json,relu.json`
//! to run a subset. The same cases run in headless Chromium through the JavaScript API in
//! `tests/browser/`.
#![cfg(not(target_arch = "wasm32"))] // native: `wasm-pack test` builds every test target for wasm32

mod common;

use common::wpt::Backend;

/// Cases that must run (pass or fail, not skipped) when every file runs: of the 1,479, only
/// those whose types or ranks `opSupportLimits()` does not list may be skipped.
const MIN_CASES_RUN: usize = 1400;

#[test]
fn wpt_conformance_native() {
    run_every_file(Backend::WebGpu);
}

/// The reference backend runs every case the WebGPU backend runs, within the same tolerances:
/// the families' float64 references (which the other tests compare kernels with) agree with
/// WPT's data, operator by operator and across whole graphs.
#[test]
fn wpt_conformance_reference_backend() {
    run_every_file(Backend::Reference);
}

#[test]
fn wpt_conformance_cpu_backend() {
    run_every_file(Backend::Cpu);
}

/// Every case's graph saved to the graph cache's record and loaded back before it runs: the
/// records hold every operator's options and every kernel the lowering makes.
#[test]
fn wpt_conformance_through_the_graph_cache() {
    run_every_file(Backend::WebGpuSaved);
    run_every_file(Backend::CpuSaved);
}

fn run_every_file(backend: Backend) {
    let ctx = common::context();
    let dir = format!("{}/tests/conformance/wpt", env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().to_string()))
        .filter(|f| f.ends_with(".json"))
        .collect();
    files.sort();
    let only = std::env::var("WPT_FILES").ok();
    if let Some(only) = &only {
        let listed: Vec<&str> = only.split(',').map(str::trim).filter(|f| !f.is_empty()).collect();
        let unknown: Vec<&&str> = listed.iter().filter(|f| !files.iter().any(|g| g == **f)).collect();
        assert!(!listed.is_empty() && unknown.is_empty(), "WPT_FILES={only:?}: no such files {unknown:?} in {dir}");
        files.retain(|f| listed.contains(&f.as_str()));
    }
    let (mut passed, mut skipped, mut failed) = (0, 0, 0);
    let mut report = Vec::new();
    for file in &files {
        let (p, s, failures) = common::wpt::run_file(&ctx, file, backend);
        println!(
            "{file:32} pass {p:4}  skip {s:4}  fail {:4}",
            failures.len()
        );
        for f in failures.iter().take(5) {
            println!("    {f}");
        }
        // Two files hold no cases (their WPT sources did not convert); a listed file must run one.
        if p + failures.len() == 0 && (p + s + failures.len() > 0 || only.is_some()) {
            report.push(format!("{file}: no case ran ({s} skipped)"));
        }
        passed += p;
        skipped += s;
        failed += failures.len();
        report.extend(failures.into_iter().map(|f| format!("{file}: {f}")));
    }
    println!("{passed} passed, {failed} failed, {skipped} skipped");
    if only.is_none() && passed + failed < MIN_CASES_RUN {
        report.push(format!("only {} cases ran, fewer than {MIN_CASES_RUN}", passed + failed));
    }
    assert!(report.is_empty(), "{} conformance failures:\n{}", report.len(), report.join("\n"));
}
