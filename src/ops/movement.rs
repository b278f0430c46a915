//! The kernel shared by the data-movement families (expand, transpose, concat, split, slice,
//! gather): every output element is a copy of one source element, moved as raw bits. Going
//! through the value loaders of [`crate::ops::wgsl`] would round-trip float16 through f32 and
//! quiet signaling NaNs; moving bits keeps every payload exact for every data type.
//!
//! All bindings are `array<u32>`; float16 elements are 16-bit halves and int8/uint8 bytes of
//! those words, and each invocation writes one whole output word, so packed outputs never race.
//! int64/uint64 elements are two words, moved as a `vec2<u32>`; the kernel's `Bits` type is the
//! output's element bits (`u32` or `vec2<u32>`), and `Bits()` is zero.

use crate::error::{Error, Result};
use crate::operand::{DataType, OperandDescriptor};
use crate::ops::wgsl::{coords_fn, elements_per_word, BufRef, Launch, LowerRequest, Lowering, WORKGROUP_SIZE};

/// WebGPU's default `maxStorageBuffersPerShaderStage`: a launch binds at most this many buffers.
pub const MAX_BINDINGS: usize = 8;

/// Bits of one stored element.
fn element_bits(data_type: DataType) -> u64 {
    match data_type {
        DataType::Int64 | DataType::Uint64 => 64,
        DataType::Float32 | DataType::Int32 | DataType::Uint32 => 32,
        DataType::Float16 => 16,
        DataType::Int8 | DataType::Uint8 => 8,
    }
}

/// The WGSL type holding the bits of one element.
fn bits_type(data_type: DataType) -> &'static str {
    if data_type.is_wide() {
        "vec2<u32>"
    } else {
        "u32"
    }
}

/// `fn bits_<name>(i: u32) -> u32` (`vec2<u32>` for int64/uint64): the raw bits of element `i`
/// of the `array<u32>` binding `name`.
pub fn bits_fn(name: &str, data_type: DataType) -> String {
    let body = match element_bits(data_type) {
        64 => format!("return vec2<u32>({name}[2u * i], {name}[2u * i + 1u]);"),
        32 => format!("return {name}[i];"),
        16 => format!("return ({name}[i >> 1u] >> ((i & 1u) * 16u)) & 0xffffu;"),
        _ => format!("return ({name}[i >> 2u] >> ((i & 3u) * 8u)) & 0xffu;"),
    };
    format!("fn bits_{name}(i: u32) -> {} {{ {body} }}\n", bits_type(data_type))
}

/// A read-only binding of a move kernel.
pub struct Source<'a> {
    pub name: &'a str,
    pub buffer: BufRef,
    pub descriptor: &'a OperandDescriptor,
}

/// One launch writing every element of `output` with one invocation per output word.
pub struct MoveKernel<'a> {
    pub sources: Vec<Source<'a>>,
    pub output: BufRef,
    pub output_descriptor: &'a OperandDescriptor,
    /// Extra WGSL placed before `source_bits`.
    pub helpers: String,
    /// Body of `fn source_bits(i: u32) -> u32` returning the raw bits of output element `i`,
    /// read with the `bits_<name>` functions of the sources.
    pub body: String,
}

impl MoveKernel<'_> {
    pub fn build(self) -> Result<Launch> {
        if self.sources.len() + 1 > MAX_BINDINGS {
            return Err(Error::Operation(format!(
                "a kernel binds {} buffers, more than the {MAX_BINDINGS} allowed",
                self.sources.len() + 1
            )));
        }
        let out_type = self.output_descriptor.data_type;
        let mut src = format!("alias Bits = {};\n", bits_type(out_type));
        for (index, s) in self.sources.iter().enumerate() {
            src += &format!("@group(0) @binding({index}) var<storage, read> {}: array<u32>;\n", s.name);
            src += &bits_fn(s.name, s.descriptor.data_type);
        }
        src += &format!("@group(0) @binding({}) var<storage, read_write> out: array<u32>;\n", self.sources.len());
        src += &self.helpers;
        src += &format!("fn source_bits(i: u32) -> Bits {{\n{}\n}}\n", self.body);
        let bits = element_bits(out_type);
        let per_word = elements_per_word(out_type);
        let count = self.output_descriptor.element_count();
        let words = count.div_ceil(per_word);
        let store = if bits == 64 {
            "let v = source_bits(t);\n    out[2u * t] = v.x;\n    out[2u * t + 1u] = v.y;".to_string()
        } else if per_word == 1 {
            "out[t] = source_bits(t);".to_string()
        } else {
            format!(
                "var word = 0u;\n    for (var k = 0u; k < {per_word}u; k++) {{\n        let i = t * {per_word}u + k;\n        if (i < {count}u) {{ word = word | (source_bits(i) << (k * {bits}u)); }}\n    }}\n    out[t] = word;"
            )
        };
        src += &format!(
            "@compute @workgroup_size({WORKGROUP_SIZE})\nfn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{\n    let t = gid.x + gid.y * nwg.x * {WORKGROUP_SIZE}u;\n    if (t >= {words}u) {{ return; }}\n    {store}\n}}\n"
        );
        Ok(Launch {
            source: src,
            reads: self.sources.iter().map(|s| s.buffer).collect(),
            writes: vec![self.output],
            invocations: words,
            workgroup_size: WORKGROUP_SIZE,
        })
    }
}

/// The one-input move of transpose, tile, reverse and slice: output element `c` (its coordinates
/// `c[k]` in WGSL) copies input element `terms.join(" + ")`; no terms means element 0.
pub fn lower_index_map(request: &LowerRequest, terms: &[String]) -> Result<Lowering> {
    let (input, out) = (request.inputs[0], request.outputs[0]);
    let offset = if terms.is_empty() { "0u".to_string() } else { terms.join(" + ") };
    let launch = MoveKernel {
        sources: vec![Source { name: "input", buffer: BufRef::Input(0), descriptor: input }],
        output: BufRef::Output(0),
        output_descriptor: out,
        helpers: coords_fn("out", &out.shape),
        body: format!("    let c = coords_out(i);\n    return bits_input({offset});"),
    }
    .build()?;
    Ok(Lowering::single(launch))
}

/// `(outer, inner)`: the element counts of the dimensions before and after `axis`.
pub fn outer_inner(shape: &[u32], axis: usize) -> (u64, u64) {
    let product = |dims: &[u32]| dims.iter().fold(1u64, |acc, &d| acc.saturating_mul(d as u64));
    let (before, after) = shape.split_at(axis.min(shape.len()));
    (product(before), product(after.get(1..).unwrap_or(&[])))
}

/// The spec's "valid dimension" (1 ..= i32::MAX) for every item of a shape argument.
pub fn check_valid_dimensions(what: &str, shape: &[u32]) -> Result<()> {
    match shape.iter().find(|&&d| d == 0 || d > i32::MAX as u32) {
        Some(d) => Err(Error::Type(format!("{what} {shape:?} has the invalid dimension {d}"))),
        None => Ok(()),
    }
}
