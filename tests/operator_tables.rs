//! The places an operator is listed besides its family file agree with `opSupportLimits()`'s
//! table (`ops::limits::all()`): `js/webnn.js`'s `OPERATORS` table, the builder methods and the
//! `MLOpSupportLimits` members of `js/index.d.ts`, and the registry's families (`ops::from_options`),
//! which must record an operator of each method's name. An operator added to one and not the
//! others fails here, natively, before any browser stage.
#![cfg(not(target_arch = "wasm32"))] // native: `wasm-pack test` builds every test target for wasm32

use std::collections::BTreeSet;

use webnn_wgpu::error::{Error, Result};
use webnn_wgpu::graph::Number;
use webnn_wgpu::ops::{self, limits, missing, MethodOptions};

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

/// Options where every member is missing: an operator without options is recorded, one with
/// required options is a TypeError naming the member, and only a method no family handles is
/// NotSupported.
struct NoOptions;

impl MethodOptions for NoOptions {
    fn f64(&self, key: &str) -> Result<f64> {
        Err(missing(key))
    }
    fn opt_number(&self, _: &str) -> Result<Option<Number>> {
        Ok(None)
    }
    fn u32(&self, key: &str) -> Result<u32> {
        Err(missing(key))
    }
    fn i32(&self, key: &str) -> Result<i32> {
        Err(missing(key))
    }
    fn bool(&self, key: &str) -> Result<bool> {
        Err(missing(key))
    }
    fn string(&self, _: &str) -> Result<String> {
        Ok(String::new())
    }
    fn opt_u32s(&self, _: &str) -> Result<Option<Vec<u32>>> {
        Ok(None)
    }
    fn opt_f64s(&self, _: &str) -> Result<Option<Vec<f64>>> {
        Ok(None)
    }
    fn opt_strings(&self, _: &str) -> Result<Option<Vec<String>>> {
        Ok(None)
    }
}

#[test]
fn the_registry_maps_every_builder_method_to_an_operator_of_that_name() {
    let names: Vec<&str> = limits::all().iter().map(|l| l.name).collect();
    assert_eq!(names.len(), limits_names().len(), "two families declare the same method: {names:?}");
    for name in limits_names() {
        match ops::from_options(&name, &NoOptions) {
            Ok(op) => assert_eq!(op.name(), name, "{name}() records {op:?}"),
            Err(Error::NotSupported(e)) => panic!("no operator family handles {name}(): {e}"),
            Err(_) => {}
        }
    }
    assert!(matches!(ops::from_options("noSuchMethod", &NoOptions), Err(Error::NotSupported(_))));
}
