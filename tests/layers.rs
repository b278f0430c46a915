//! The crate's layers (docs/DESIGN.md, "Layers and backends"): every module imports only modules
//! below it in `ORDER`, so the folders form no cycle. Reads the sources' `crate::` paths.
#![cfg(not(target_arch = "wasm32"))] // native: `wasm-pack test` builds every test target for wasm32

use std::collections::BTreeSet;
use std::path::Path;

/// Bottom first. The backends share a rank: neither imports the other; both import the seam.
const ORDER: &[&[&str]] = &[
    &["error"],
    &["operand"],
    &["memory"],
    &["ops"],
    &["graph"],
    &["weights"],
    &["plan"],
    &["backend"],
    &["backend/cpu", "backend/webgpu"],
    &["api"],
];

fn rank(module: &str) -> Option<usize> {
    ORDER.iter().position(|layer| layer.contains(&module))
}

/// The module a source file belongs to: its top folder, or `backend/<name>` inside `backend/`.
fn module_of(relative: &Path) -> String {
    let parts: Vec<String> = relative.iter().map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string()).collect();
    match parts.as_slice() {
        [top, name, ..] if top == "backend" && parts.len() > 2 => format!("backend/{name}"),
        [top, ..] => top.clone(),
        [] => String::new(),
    }
}

/// The modules a source names through `crate::` paths (comments ignored).
fn imports(source: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for line in source.lines() {
        let code = line.split("//").next().unwrap_or("");
        for (i, _) in code.match_indices("crate::") {
            let rest = &code[i + "crate::".len()..];
            let mut names = rest.split("::").map(|n| n.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect::<String>());
            let first = names.next().unwrap_or_default();
            let module = match (first.as_str(), names.next()) {
                ("backend", Some(second)) if ["cpu", "webgpu"].contains(&second.as_str()) => format!("backend/{second}"),
                _ => first,
            };
            found.insert(module);
        }
    }
    found
}

fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_module_imports_only_the_layers_below_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut upward = Vec::new();
    let mut checked = 0;
    for file in files {
        let module = module_of(file.strip_prefix(&src).unwrap());
        let Some(own) = rank(&module) else { continue }; // lib.rs
        for import in imports(&std::fs::read_to_string(&file).unwrap()) {
            checked += 1;
            match rank(&import) {
                Some(r) if r < own || import == module => {}
                Some(_) => upward.push(format!("{} imports {import}", file.display())),
                None => upward.push(format!("{} imports {import}, which is in no layer", file.display())),
            }
        }
    }
    assert!(checked > 100, "only {checked} imports were found: the scan is broken");
    assert!(upward.is_empty(), "imports against the layers:\n{}", upward.join("\n"));
}
