//! Reductions: reduceSum, reduceMean, reduceMax and the other reduce* operators, and the row
//! reduction kernel that softmax and layerNormalization share with them.
//!
//! A reduction over a set of axes sees the input as rows: one row per combination of the kept
//! axes (in order, so row `r` is output element `r`), each row holding the elements along the
//! reduced axes. [`RowReduction`] computes one or two statistics per row, the second able to use
//! the first (max then sum of exp(x - max); mean then sum of squared deviations), with one
//! workgroup per long row or one invocation per short row. [`lower_fused`] then runs an
//! element-wise chain over each reduced row, for fusion.rs.

use crate::error::{Error, Result};
use crate::operand::{strides, MAX_RANK};
use crate::operand::{DataType, OperandDescriptor};
use crate::ops::fusion::Epilogue;
use crate::ops::limits::{self, OpLimits, FLOATS, SUPPORTED};
use crate::ops::reference::{coords, round_to, HostTensor};
use crate::ops::wgsl::{
    binding, buffer_size, elements_per_word, literal, load_fn, packed_bits, value_type, BufRef, ElementwiseKernel,
    Launch, LowerRequest, Lowering, F16_HELPERS,
};
use crate::ops::{not_this_family, MethodOptions, Op, OpFamily};

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ReduceOp {
    L1,
    L2,
    LogSum,
    LogSumExp,
    Max,
    Mean,
    Min,
    Product,
    Sum,
    SumSquare,
}

impl ReduceOp {
    pub const ALL: [ReduceOp; 10] = [
        ReduceOp::L1,
        ReduceOp::L2,
        ReduceOp::LogSum,
        ReduceOp::LogSumExp,
        ReduceOp::Max,
        ReduceOp::Mean,
        ReduceOp::Min,
        ReduceOp::Product,
        ReduceOp::Sum,
        ReduceOp::SumSquare,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::L1 => "reduceL1",
            ReduceOp::L2 => "reduceL2",
            ReduceOp::LogSum => "reduceLogSum",
            ReduceOp::LogSumExp => "reduceLogSumExp",
            ReduceOp::Max => "reduceMax",
            ReduceOp::Mean => "reduceMean",
            ReduceOp::Min => "reduceMin",
            ReduceOp::Product => "reduceProduct",
            ReduceOp::Sum => "reduceSum",
            ReduceOp::SumSquare => "reduceSumSquare",
        }
    }

    /// The spec's allowed data types, less the 64-bit integers the kernels do not store.
    pub fn data_types(self) -> &'static [DataType] {
        const NUMBERS: &[DataType] = &[DataType::Float32, DataType::Float16, DataType::Int32, DataType::Uint32];
        match self {
            ReduceOp::L1 | ReduceOp::Product | ReduceOp::Sum | ReduceOp::SumSquare => NUMBERS,
            ReduceOp::L2 | ReduceOp::LogSum | ReduceOp::LogSumExp | ReduceOp::Mean => FLOATS,
            ReduceOp::Max | ReduceOp::Min => SUPPORTED,
        }
    }
}

/// `MLReduceOptions`: `axes` absent means every axis.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct ReduceOptions {
    pub axes: Option<Vec<u32>>,
    pub keep_dimensions: bool,
}

pub fn limits() -> Vec<OpLimits> {
    ReduceOp::ALL
        .iter()
        .map(|op| OpLimits {
            name: op.name(),
            operands: vec![
                limits::tensor("input", op.data_types(), 0, MAX_RANK as u32),
                limits::tensor("output", op.data_types(), 0, MAX_RANK as u32),
            ],
        })
        .collect()
}

/// Checks a list of axes of an input of rank `rank`: no duplicates, each below the rank.
pub fn check_axes(name: &str, axes: &[u32], rank: usize) -> Result<()> {
    if let Some(a) = axes.iter().find(|&&a| a as usize >= rank) {
        return Err(Error::Type(format!("{name}: axis {a} of {axes:?} is out of range for an input of rank {rank}")));
    }
    if (1..axes.len()).any(|i| axes[..i].contains(&axes[i])) {
        return Err(Error::Type(format!("{name}: axes {axes:?} contain duplicates")));
    }
    Ok(())
}

/// The reduced axes, sorted: all of them when `axes` is absent.
fn reduced_axes(axes: Option<&[u32]>, rank: usize) -> Vec<usize> {
    match axes {
        None => (0..rank).collect(),
        Some(a) => {
            let mut v: Vec<usize> = a.iter().map(|&x| x as usize).collect();
            v.sort_unstable();
            v
        }
    }
}

/// The spec's "calculate reduction output sizes".
pub fn validate(op: ReduceOp, o: &ReduceOptions, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
    let input = inputs[0];
    limits::check(&limits::tensor("input", op.data_types(), 0, MAX_RANK as u32), input)?;
    let rank = input.rank();
    if let Some(axes) = &o.axes {
        check_axes(op.name(), axes, rank)?;
    }
    let axes = reduced_axes(o.axes.as_deref(), rank);
    let shape: Vec<u32> = if o.keep_dimensions {
        input.shape.iter().enumerate().map(|(i, &d)| if axes.contains(&i) { 1 } else { d }).collect()
    } else {
        input.shape.iter().enumerate().filter(|(i, _)| !axes.contains(i)).map(|(_, &d)| d).collect()
    };
    Ok(vec![OperandDescriptor::new(input.data_type, shape)])
}

/// One statistic of a row: `acc = combine(acc, map(x))` from `init`, then `finish(acc)`. The
/// expressions are WGSL of the value type; `map` and `finish` may use `s1`, the first statistic,
/// and `count`, the row length as f32.
pub struct Stat {
    pub init: String,
    pub map: String,
    /// An expression of `a` and `b`.
    pub combine: String,
    pub finish: String,
}

impl Stat {
    fn sum(map: &str, finish: &str) -> Stat {
        Stat { init: "0".into(), map: map.into(), combine: "a + b".into(), finish: finish.into() }
    }
}

/// Computes per-row statistics of `input` over `axes` and stores them with `store`.
pub struct RowReduction<'a> {
    pub input: &'a OperandDescriptor,
    /// Sorted reduced axes.
    pub axes: &'a [usize],
    pub first: Stat,
    pub second: Option<Stat>,
    /// The written binding's data type and buffer.
    pub out_type: DataType,
    pub target: BufRef,
    /// WGSL statements writing row `row` of binding `out` from `s1` (and `s2`).
    pub store: String,
}

/// Rows at least this long get a workgroup each.
const WIDE_ROW: u64 = 256;

/// `fn <name>(i: u32) -> u32`: the offset in the input of the `i`-th combination of `axes`.
fn offset_fn(name: &str, shape: &[u32], axes: &[usize]) -> String {
    let st = strides(shape);
    let mut s = format!("fn {name}(i: u32) -> u32 {{\n    var r = i;\n    var o = 0u;\n");
    for &a in axes.iter().rev() {
        if shape[a] != 1 {
            s += &format!("    o = o + (r % {d}u) * {}u; r = r / {d}u;\n", st[a], d = shape[a]);
        }
    }
    s += "    return o;\n}\n";
    s
}

impl RowReduction<'_> {
    pub fn rows_and_length(&self) -> (u64, u64) {
        let length: u64 = self.axes.iter().map(|&a| self.input.shape[a] as u64).product();
        (self.input.element_count() / length.max(1), length)
    }

    pub fn build(&self) -> Result<Launch> {
        self.kernel(&binding(1, "out", self.out_type, true), None)
    }

    /// A kernel that, once a row's statistics are known, runs `each` (WGSL statements of `s1`
    /// (`s2`), `row`, `base`, the row's offset in the input, and `j`) for every `j` below
    /// `count`, spread over the row's invocations; `store` is not used. `declarations` follow
    /// the input's binding 0 (the caller sets the launch's bindings to match).
    pub fn build_each(&self, declarations: &str, count: u64, each: &str) -> Result<Launch> {
        self.kernel(declarations, Some((count, each)))
    }

    fn kernel(&self, declarations: &str, each: Option<(u64, &str)>) -> Result<Launch> {
        let vt = value_type(self.input.data_type)?;
        let (rows, length) = self.rows_and_length();
        let kept: Vec<usize> = (0..self.input.rank()).filter(|a| !self.axes.contains(a)).collect();
        let mut src = String::from(F16_HELPERS);
        src += &binding(0, "input", self.input.data_type, false);
        src += &load_fn("input", self.input.data_type)?;
        src += declarations;
        src += &offset_fn("row_base", &self.input.shape, &kept);
        src += &offset_fn("row_offset", &self.input.shape, self.axes);
        let count = format!("f32({length}u)");
        let cast = |e: &str| format!("{vt}({e})");
        let stat_fns = |k: u32, s: &Stat| {
            format!(
                "fn map{k}(x: {vt}, s1: {vt}) -> {vt} {{ let count = {count}; return {}; }}\n\
                 fn combine{k}(a: {vt}, b: {vt}) -> {vt} {{ return {}; }}\n\
                 fn finish{k}(acc: {vt}, s1: {vt}) -> {vt} {{ let count = {count}; return {}; }}\n",
                s.map, s.combine, s.finish
            )
        };
        src += &stat_fns(1, &self.first);
        let init1 = cast(&self.first.init);
        let second = self.second.as_ref();
        if let Some(s) = second {
            src += &stat_fns(2, s);
        }
        let zero = cast("0");
        if length >= WIDE_ROW {
            let pass = |k: u32, init: &str, s1: &str| {
                format!(
                    "    acc = {init};\n    for (var j = lid; j < {length}u; j += 256u) {{ acc = combine{k}(acc, map{k}(load_input(base + row_offset(j)), {s1})); }}\n\
                     \x20   partial[lid] = acc;\n    workgroupBarrier();\n\
                     \x20   for (var h = 128u; h > 0u; h = h >> 1u) {{\n        if (lid < h) {{ partial[lid] = combine{k}(partial[lid], partial[lid + h]); }}\n        workgroupBarrier();\n    }}\n\
                     \x20   let s{k} = finish{k}(partial[0], {s1});\n    workgroupBarrier();\n"
                )
            };
            let mut body = format!("    var acc: {vt};\n");
            body += &pass(1, &init1, &zero);
            if let Some(s) = second {
                body += &pass(2, &cast(&s.init), "s1");
            }
            src += &format!(
                "var<workgroup> partial: array<{vt}, 256>;\n@compute @workgroup_size(256)\n\
                 fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{\n\
                 \x20   let row = wid.x + wid.y * nwg.x;\n    if (row >= {rows}u) {{ return; }}\n    let base = row_base(row);\n\
                 {body}{}\n}}\n",
                match each {
                    Some((count, each)) => format!("    for (var j = lid; j < {count}u; j += 256u) {{\n        {each}\n    }}"),
                    None => format!("    if (lid == 0u) {{\n{}\n    }}", self.store),
                }
            );
            return Ok(self.launch(src, rows * 256, 256));
        }
        let pass = |k: u32, init: &str, s1: &str| {
            format!(
                "    acc = {init};\n    for (var j = 0u; j < {length}u; j++) {{ acc = combine{k}(acc, map{k}(load_input(base + row_offset(j)), {s1})); }}\n\
                 \x20   let s{k} = finish{k}(acc, {s1});\n"
            )
        };
        let mut body = format!("    var acc: {vt};\n");
        body += &pass(1, &init1, &zero);
        if let Some(s) = second {
            body += &pass(2, &cast(&s.init), "s1");
        }
        src += &format!(
            "@compute @workgroup_size(64)\n\
             fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{\n\
             \x20   let row = gid.x + gid.y * nwg.x * 64u;\n    if (row >= {rows}u) {{ return; }}\n    let base = row_base(row);\n\
             {body}{}\n}}\n",
            match each {
                Some((count, each)) => format!("    for (var j = 0u; j < {count}u; j++) {{\n        {each}\n    }}"),
                None => self.store.clone(),
            }
        );
        Ok(self.launch(src, rows, 64))
    }

    fn launch(&self, source: String, invocations: u64, workgroup_size: u32) -> Launch {
        Launch { source, reads: vec![BufRef::Input(0)], writes: vec![self.target], invocations, workgroup_size }
    }
}

/// The statistic and the final expression (of `s1`, `s2`, `count`) of a reduction.
fn reduce_stats(op: ReduceOp, data_type: DataType) -> Result<(Stat, Option<Stat>)> {
    let vt = value_type(data_type)?;
    let (lowest, highest) = match vt {
        "f32" => (literal(f64::NEG_INFINITY, vt), literal(f64::INFINITY, vt)),
        "i32" => ("-2147483647 - 1".to_string(), "2147483647".to_string()),
        _ => ("0u".to_string(), "4294967295u".to_string()),
    };
    Ok(match op {
        ReduceOp::L1 => (Stat::sum("abs(x)", "acc"), None),
        ReduceOp::L2 => (Stat::sum("x * x", "sqrt(acc)"), None),
        // IEEE's log: a sum of 0 is -infinity, a negative one NaN (a GPU's `log` is undefined there).
        ReduceOp::LogSum => (
            Stat::sum(
                "x",
                &format!(
                    "select(select({}, log(acc), acc > 0.0), {}, acc == 0.0)",
                    literal(f64::NAN, "f32"),
                    literal(f64::NEG_INFINITY, "f32")
                ),
            ),
            None,
        ),
        // log(sum(exp(x))) = max + log(sum(exp(x - max))); an infinite max is the result itself.
        ReduceOp::LogSumExp => (
            Stat { init: lowest.clone(), map: "x".into(), combine: "max(a, b)".into(), finish: "acc".into() },
            Some(Stat::sum("exp(x - s1)", &format!("select(s1 + log(acc), s1, s1 == {lowest} || s1 == {highest})"))),
        ),
        ReduceOp::Max => {
            (Stat { init: lowest, map: "x".into(), combine: "max(a, b)".into(), finish: "acc".into() }, None)
        }
        ReduceOp::Min => {
            (Stat { init: highest, map: "x".into(), combine: "min(a, b)".into(), finish: "acc".into() }, None)
        }
        ReduceOp::Mean => (Stat::sum("x", "acc / count"), None),
        ReduceOp::Product => {
            (Stat { init: "1".into(), map: "x".into(), combine: "a * b".into(), finish: "acc".into() }, None)
        }
        ReduceOp::Sum => (Stat::sum("x", "acc"), None),
        ReduceOp::SumSquare => (Stat::sum("x * x", "acc"), None),
    })
}

/// One launch writing 32-bit outputs directly; packed outputs (float16, int8, uint8) go through a
/// scratch buffer of the value type and a packing launch, since one output word may hold
/// elements of rows reduced by different workgroups.
pub fn lower(op: ReduceOp, o: &ReduceOptions, request: &LowerRequest) -> Result<Lowering> {
    let (input, out) = (request.inputs[0], request.outputs[0]);
    let axes = reduced_axes(o.axes.as_deref(), input.rank());
    let (first, second) = reduce_stats(op, input.data_type)?;
    let result = if second.is_some() { "s2" } else { "s1" };
    let packed = elements_per_word(out.data_type) > 1;
    let value_descriptor = OperandDescriptor::new(
        match value_type(out.data_type)? {
            "f32" => DataType::Float32,
            "i32" => DataType::Int32,
            _ => DataType::Uint32,
        },
        out.shape.clone(),
    );
    let reduction = RowReduction {
        input,
        axes: &axes,
        first,
        second,
        out_type: value_descriptor.data_type,
        target: if packed { BufRef::Scratch(0) } else { BufRef::Output(0) },
        store: format!("        out[row] = {result};"),
    };
    let launch = reduction.build()?;
    if !packed {
        return Ok(Lowering::single(launch));
    }
    let mut pack = ElementwiseKernel {
        inputs: vec![("s", &value_descriptor)],
        output: out,
        helpers: String::new(),
        body: "    return load_s(i);".into(),
    }
    .build()?;
    pack.reads = vec![BufRef::Scratch(0)];
    Ok(Lowering::Kernels { scratch: vec![buffer_size(&value_descriptor)], launches: vec![launch, pack] })
}

/// Longest row [`lower_fused`] takes: its workgroup then writes at most 64 elements an
/// invocation. Longer rows keep the element-wise chain in a kernel of its own, spread over the
/// whole GPU rather than over one workgroup a row.
const MAX_FUSED_ROW: u64 = 16384;

/// Whether [`lower_fused`] can reduce `input` into `reduced` and write a chain's `out`: `out` has
/// the input's shape and `reduced` broadcasts to it as the value of each element's own row (the
/// input's shape with the reduced axes 1, leading ones aside). A packed output's word must not
/// span two rows: the rows are then contiguous (the reduced axes last, size-1 axes aside) and
/// whole words.
pub fn fusable(o: &ReduceOptions, input: &OperandDescriptor, reduced: &OperandDescriptor, out: &OperandDescriptor) -> bool {
    let rank = input.rank();
    let axes = reduced_axes(o.axes.as_deref(), rank);
    let shape = &input.shape;
    let kept: Vec<u32> = shape.iter().enumerate().map(|(a, &d)| if axes.contains(&a) { 1 } else { d }).collect();
    let trim = |s: &[u32]| s[s.iter().position(|&d| d != 1).unwrap_or(s.len())..].to_vec();
    let length: u64 = axes.iter().map(|&a| shape[a] as u64).product();
    let last_kept = (0..rank).filter(|a| !axes.contains(a) && shape[*a] != 1).max();
    let first_reduced = axes.iter().copied().filter(|&a| shape[a] != 1).min();
    let contiguous = match (last_kept, first_reduced) {
        (Some(k), Some(r)) => k < r,
        _ => true,
    };
    let per_word = elements_per_word(out.data_type);
    out.shape == input.shape
        && !out.data_type.is_wide()
        && trim(&reduced.shape) == trim(&kept)
        && (1..=MAX_FUSED_ROW).contains(&length)
        && (per_word == 1 || (contiguous && length % per_word == 0))
}

/// Lowers a reduction whose only reader is `epilogue`, an element-wise chain it is [`fusable`]
/// with: one kernel reduces each row, then writes `epilogue_at(value, i)` for each element `i` of
/// the row. The chain's inputs are bound after the input (which it may read as `load_input`).
pub fn lower_fused(op: ReduceOp, o: &ReduceOptions, request: &LowerRequest, epilogue: &Epilogue) -> Result<Lowering> {
    let (input, out) = (request.inputs[0], request.outputs[0]);
    let axes = reduced_axes(o.axes.as_deref(), input.rank());
    let (first, second) = reduce_stats(op, input.data_type)?;
    let value = format!("epilogue_at({}, i)", if second.is_some() { "s2" } else { "s1" });
    let reduction = RowReduction {
        input,
        axes: &axes,
        first,
        second,
        out_type: out.data_type,
        target: BufRef::Output(0),
        store: String::new(),
    };
    let mut declarations = String::new();
    for (k, (name, d)) in epilogue.names().enumerate() {
        declarations += &binding(k + 1, name, d.data_type, false);
        declarations += &load_fn(name, d.data_type)?;
    }
    let chain_inputs = epilogue.inputs.len();
    declarations += &binding(chain_inputs + 1, "out", out.data_type, true);
    declarations += &epilogue.wgsl;
    let per_word = elements_per_word(out.data_type);
    let each = if per_word == 1 {
        format!("let i = base + row_offset(j);\n        out[i] = {value};")
    } else {
        // Contiguous rows of whole words: word j of a row holds its elements j * per_word...
        format!(
            "var word = 0u;\n        for (var k = 0u; k < {per_word}u; k++) {{\n            let i = base + j * {per_word}u + k;\n            word = word | ({} << (k * {}u));\n        }}\n        out[base / {per_word}u + j] = word;",
            packed_bits(out.data_type, &value),
            32 / per_word
        )
    };
    let (_, length) = reduction.rows_and_length();
    let mut launch = reduction.build_each(&declarations, length / per_word, &each)?;
    launch.reads = (0..=chain_inputs).map(BufRef::Input).collect();
    launch.writes = vec![BufRef::Output(0)];
    Ok(Lowering::single(launch))
}

/// Each output element reduces the input elements whose kept coordinates are its own.
pub fn reference(
    op: ReduceOp,
    o: &ReduceOptions,
    inputs: &[HostTensor],
    outputs: &[OperandDescriptor],
) -> Result<Vec<HostTensor>> {
    let input = &inputs[0];
    let out = &outputs[0];
    let shape = input.shape();
    let axes = reduced_axes(o.axes.as_deref(), shape.len());
    let kept_shape: Vec<u32> = (0..shape.len()).filter(|a| !axes.contains(a)).map(|a| shape[a]).collect();
    let rows = out.element_count() as usize;
    let mut groups: Vec<Vec<f64>> = vec![Vec::new(); rows];
    for (i, &x) in input.data.iter().enumerate() {
        let c = coords(i, shape);
        let kept: Vec<usize> = (0..shape.len()).filter(|a| !axes.contains(a)).map(|a| c[a]).collect();
        groups[crate::ops::reference::linear(&kept, &kept_shape)].push(x);
    }
    let integer = !input.descriptor.data_type.is_float();
    let data = groups
        .iter()
        .map(|v| {
            let n = v.len() as f64;
            let sum = |f: &dyn Fn(f64) -> f64| v.iter().map(|&x| f(x)).sum::<f64>();
            let r = match op {
                ReduceOp::L1 => sum(&|x| x.abs()),
                ReduceOp::L2 => sum(&|x| x * x).sqrt(),
                ReduceOp::LogSum => sum(&|x| x).ln(),
                ReduceOp::LogSumExp => {
                    let m = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    if m.is_infinite() {
                        m
                    } else {
                        m + sum(&|x| (x - m).exp()).ln()
                    }
                }
                ReduceOp::Max => v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                ReduceOp::Min => v.iter().copied().fold(f64::INFINITY, f64::min),
                ReduceOp::Mean => sum(&|x| x) / n,
                ReduceOp::Product => v.iter().product(),
                ReduceOp::Sum => sum(&|x| x),
                ReduceOp::SumSquare => sum(&|x| x * x),
            };
            // Integer results wrap like the GPU's 32-bit arithmetic.
            if integer {
                wrap(r, input.descriptor.data_type)
            } else {
                round_to(r, out.data_type)
            }
        })
        .collect();
    Ok(vec![HostTensor::new(out.clone(), data)?])
}

fn wrap(v: f64, data_type: DataType) -> f64 {
    let m = v.rem_euclid(4294967296.0);
    match data_type {
        DataType::Int32 => (m as u32 as i32) as f64,
        DataType::Uint32 => m,
        _ => round_to(v, data_type),
    }
}

/// The registry's entry for this file's operators (see [`OpFamily`]).
pub struct Family;

impl OpFamily for Family {
    fn limits(&self) -> Vec<OpLimits> {
        limits()
    }

    fn from_options(&self, name: &str, p: &dyn MethodOptions) -> Result<Op> {
        let reduce = |op| -> Result<Op> {
            Ok(Op::Reduce(op, ReduceOptions { axes: p.opt_u32s("axes")?, keep_dimensions: p.bool("keepDimensions")? }))
        };
        Ok(match name {
            "reduceL1" => reduce(ReduceOp::L1)?,
            "reduceL2" => reduce(ReduceOp::L2)?,
            "reduceLogSum" => reduce(ReduceOp::LogSum)?,
            "reduceLogSumExp" => reduce(ReduceOp::LogSumExp)?,
            "reduceMax" => reduce(ReduceOp::Max)?,
            "reduceMean" => reduce(ReduceOp::Mean)?,
            "reduceMin" => reduce(ReduceOp::Min)?,
            "reduceProduct" => reduce(ReduceOp::Product)?,
            "reduceSum" => reduce(ReduceOp::Sum)?,
            "reduceSumSquare" => reduce(ReduceOp::SumSquare)?,
            other => return Err(crate::ops::unknown_method(other)),
        })
    }

    fn name(&self, op: &Op) -> &'static str {
        match op {
            Op::Reduce(op, _) => op.name(),
            _ => "",
        }
    }

    fn validate(&self, op: &Op, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
        match op {
            Op::Reduce(kind, o) => validate(*kind, o, inputs),
            _ => Err(not_this_family(op)),
        }
    }

    fn lower(&self, op: &Op, request: &LowerRequest) -> Result<Lowering> {
        match op {
            Op::Reduce(kind, o) => lower(*kind, o, request),
            _ => Err(not_this_family(op)),
        }
    }

    fn reference(&self, op: &Op, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
        match op {
            Op::Reduce(kind, o) => reference(*kind, o, inputs, outputs),
            _ => Err(not_this_family(op)),
        }
    }
}
