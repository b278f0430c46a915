//! The WPT-derived conformance cases run natively (llvmpipe or a GPU) through the core API.
//! Set `WPT_FILES=add.json,relu.json` to run a subset. The same cases run in headless Chromium
//! through the JavaScript API in `tests/browser/`.

mod common;

#[test]
fn wpt_conformance_native() {
    let ctx = common::context();
    let dir = format!("{}/tests/conformance/wpt", env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().to_string()))
        .filter(|f| f.ends_with(".json"))
        .collect();
    files.sort();
    if let Ok(only) = std::env::var("WPT_FILES") {
        files.retain(|f| only.split(',').any(|o| o == f));
    }
    let (mut passed, mut skipped, mut failed) = (0, 0, 0);
    let mut report = Vec::new();
    for file in &files {
        let (p, s, failures) = common::wpt::run_file(&ctx, file);
        println!(
            "{file:32} pass {p:4}  skip {s:4}  fail {:4}",
            failures.len()
        );
        for f in failures.iter().take(5) {
            println!("    {f}");
        }
        passed += p;
        skipped += s;
        failed += failures.len();
        report.extend(failures.into_iter().map(|f| format!("{file}: {f}")));
    }
    println!("{passed} passed, {failed} failed, {skipped} skipped");
    assert!(report.is_empty(), "{} conformance failures", report.len());
}
