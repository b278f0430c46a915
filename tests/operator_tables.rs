//! The places an operator is listed besides its family file agree with `opSupportLimits()`'s
//! table (`ops::limits::all()`): `js/webnn.js`'s `OPERATORS` table, the builder methods and the
//! `MLOpSupportLimits` members of `js/index.d.ts`, and the method arms of `src/api/ops.rs`. An
//! operator added to one and not the others fails here, natively, before any browser stage.
#![cfg(not(target_arch = "wasm32"))] // native: `wasm-pack test` builds every test target for wasm32

use std::collections::BTreeSet;

use webnn_wgpu::ops::limits;

fn read(path: &str) -> String {
    let path = format!("{}/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The lines of `text` from the line starting with `start` to the first line equal to `end`.
fn block<'a>(text: &'a str, start: &str, end: &str) -> Vec<&'a str> {
    let lines: Vec<&str> = text.lines().collect();
    let first = lines.iter().position(|l| l.trim_start().starts_with(start)).unwrap_or_else(|| panic!("no '{start}'"));
    let last = first + lines[first..].iter().position(|l| *l == end).unwrap_or_else(|| panic!("no end of '{start}'"));
    lines[first + 1..last].to_vec()
}

/// The identifier at the start of a trimmed line, when followed by `after`.
fn leading_name(line: &str, after: &str) -> Option<String> {
    let line = line.trim_start();
    let name: String = line.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
    (!name.is_empty() && line[name.len()..].starts_with(after)).then_some(name)
}

fn limits_names() -> BTreeSet<String> {
    limits::all().iter().map(|l| l.name.to_string()).collect()
}

fn differences(what: &str, listed: &BTreeSet<String>) -> Vec<String> {
    let table = limits_names();
    let mut out = Vec::new();
    for name in table.difference(listed) {
        out.push(format!("{name} is in opSupportLimits() but not in {what}"));
    }
    for name in listed.difference(&table) {
        out.push(format!("{name} is in {what} but not in opSupportLimits()"));
    }
    out
}

#[test]
fn the_js_operator_table_lists_every_operator_of_op_support_limits() {
    let js = read("js/webnn.js");
    let names: BTreeSet<String> =
        block(&js, "const OPERATORS = {", "};").iter().filter(|l| l.starts_with("  ") && !l.starts_with("   ")).filter_map(|l| leading_name(l, ": ")).collect();
    assert!(names.len() > 90, "only {} entries parsed from OPERATORS", names.len());
    let problems = differences("js/webnn.js OPERATORS", &names);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn index_d_ts_declares_every_operator_and_its_limits() {
    let dts = read("js/index.d.ts");
    let members: BTreeSet<String> = block(&dts, "interface MLOpSupportLimits {", "  }")
        .iter()
        .filter(|l| l.contains("SupportLimits;"))
        .filter_map(|l| leading_name(l, "?:"))
        .collect();
    let problems = differences("index.d.ts MLOpSupportLimits", &members);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    let methods: BTreeSet<String> =
        block(&dts, "interface MLGraphBuilder {", "  }").iter().filter_map(|l| leading_name(l, "(")).collect();
    let missing: Vec<String> = limits_names().into_iter().filter(|n| !methods.contains(n)).collect();
    assert!(missing.is_empty(), "no MLGraphBuilder method in index.d.ts for {missing:?}");
}

#[test]
fn the_api_maps_every_builder_method_to_an_operator() {
    let api = read("src/api/ops.rs");
    // Arms read `"name" => ...` or `"a" | "b" => ...`.
    let arms: BTreeSet<String> = block(&api, "pub fn op_from_js(", "}")
        .iter()
        .filter(|l| l.trim_start().starts_with('"'))
        .filter_map(|l| l.split("=>").next())
        .flat_map(|pattern| pattern.split('|').map(|p| p.trim().trim_matches('"').to_string()).collect::<Vec<_>>())
        .collect();
    let missing: Vec<String> = limits_names().into_iter().filter(|n| !arms.contains(n)).collect();
    assert!(missing.is_empty(), "no arm in src/api/ops.rs (op_from_js) for {missing:?}");
}
