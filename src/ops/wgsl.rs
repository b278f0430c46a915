//! Shared pieces of WGSL generation: how each data type is stored and loaded, index arithmetic
//! with the shapes baked in as literals, and the generic "one invocation per output word"
//! element-wise kernel most operators lower to.
//!
//! Storage: float32, int32 and uint32 are stored natively. float16 is stored as 16-bit halves
//! packed in `u32` words, computed in f32 and rounded to nearest even on store, so it works
//! without the `shader-f16` feature; int8/uint8 are packed four to a word. Packed outputs are
//! written one whole word per invocation, so no two invocations write the same word. int64 and
//! uint64 are two words per element (low, high), computed as `vec2<u32>` with the two-word
//! arithmetic of [`WIDE_HELPERS`].

use crate::error::Result;
use crate::operand::{DataType, OperandDescriptor};

/// Invocations per workgroup of the generic kernels.
pub const WORKGROUP_SIZE: u32 = 256;

/// What the runtime gives an operator's lowering.
pub struct LowerRequest<'a> {
    pub inputs: Vec<&'a OperandDescriptor>,
    pub outputs: Vec<&'a OperandDescriptor>,
    /// The adapter has `shader-f16`.
    pub shader_f16: bool,
    /// What kernels with a choice of shape (matmul's tiles) are tuned for.
    pub device: DeviceTraits,
}

/// The adapter traits kernel selection depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceTraits {
    /// A CPU emulating a GPU (llvmpipe, SwiftShader): small workgroups and tiles win there.
    pub cpu: bool,
    /// The device's `maxComputeWorkgroupStorageSize` and `maxComputeInvocationsPerWorkgroup`.
    pub workgroup_storage: u32,
    pub invocations: u32,
    /// The device has wgpu's `SUBGROUP` feature (native only: wgpu 30's web backend does not
    /// request WebGPU's "subgroups"), so reductions can use subgroup operations.
    pub subgroups: bool,
}

impl Default for DeviceTraits {
    /// WebGPU's default limits on a GPU.
    fn default() -> Self {
        DeviceTraits { cpu: false, workgroup_storage: 16384, invocations: 256, subgroups: false }
    }
}

/// A buffer a launch binds: an operand of the operator or a scratch buffer of the lowering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BufRef {
    Input(usize),
    Output(usize),
    Scratch(usize),
}

/// One compute dispatch. Bindings are `reads` (read-only storage, bindings 0..) followed by
/// `writes` (read-write storage). The kernel's entry point is `main` and it reads its linear
/// invocation index as `gid.x + gid.y * num_workgroups.x * workgroup_size`.
#[derive(Debug, Clone)]
pub struct Launch {
    pub source: String,
    pub reads: Vec<BufRef>,
    pub writes: Vec<BufRef>,
    /// Total invocations needed (the runtime turns this into a 2D grid of workgroups).
    pub invocations: u64,
    pub workgroup_size: u32,
}

/// How an operator runs on the GPU.
#[derive(Debug, Clone)]
pub enum Lowering {
    /// The single output has exactly the bytes of input 0 (reshape): no GPU work.
    Alias,
    /// Launches run in order; `scratch` gives the byte sizes of temporary buffers.
    Kernels { scratch: Vec<u64>, launches: Vec<Launch> },
}

impl Lowering {
    pub fn single(launch: Launch) -> Lowering {
        Lowering::Kernels { scratch: Vec::new(), launches: vec![launch] }
    }
}

/// The WGSL type values of a data type are computed in.
pub fn value_type(data_type: DataType) -> Result<&'static str> {
    match data_type {
        DataType::Float32 | DataType::Float16 => Ok("f32"),
        DataType::Int32 | DataType::Int8 => Ok("i32"),
        DataType::Uint32 | DataType::Uint8 => Ok("u32"),
        DataType::Int64 | DataType::Uint64 => Ok("vec2<u32>"),
    }
}

/// The WGSL element type of the storage array holding a data type.
fn storage_type(data_type: DataType) -> &'static str {
    match data_type {
        DataType::Float32 => "f32",
        DataType::Int32 => "i32",
        _ => "u32",
    }
}

/// Elements per storage word (1, 2 or 4).
pub fn elements_per_word(data_type: DataType) -> u64 {
    match data_type {
        DataType::Float16 => 2,
        DataType::Int8 | DataType::Uint8 => 4,
        _ => 1,
    }
}

/// Byte size of the GPU buffer holding a descriptor: rounded up to whole 4-byte words.
pub fn buffer_size(descriptor: &OperandDescriptor) -> u64 {
    descriptor.byte_length().max(4).saturating_add(3) / 4 * 4
}

/// Conversions between f32 and float16 bits, with round-to-nearest-even. Widening has no
/// branches, so a kernel can issue its next loads before converting (a float16 GEMV with
/// branches in it ran at a seventh of the float32 one's bandwidth on an H100).
pub const F16_HELPERS: &str = r#"
fn f16_to_f32(h: u32) -> f32 {
    let s = (h & 0x8000u) << 16u;
    let e = (h >> 10u) & 0x1fu;
    let m = h & 0x3ffu;
    let subnormal = bitcast<f32>(s | 0x3f800000u) * f32(m) * 5.9604644775390625e-8;
    let other = bitcast<f32>(s | select((e + 112u) << 23u, 0x7f800000u, e == 31u) | (m << 13u));
    return select(other, subnormal, e == 0u);
}
fn f16x2_to_f32(w: u32) -> vec2<f32> {
    return vec2<f32>(f16_to_f32(w & 0xffffu), f16_to_f32(w >> 16u));
}
fn f32_to_f16(v: f32) -> u32 {
    let x = bitcast<u32>(v);
    let s = (x >> 16u) & 0x8000u;
    let e = i32((x >> 23u) & 0xffu);
    let m = x & 0x7fffffu;
    if (e == 255) {
        return s | 0x7c00u | select(0u, 0x200u | (m >> 13u), m != 0u);
    }
    let h_exp = e - 112;
    if (h_exp >= 31) {
        return s | 0x7c00u;
    }
    if (h_exp <= 0) {
        if (h_exp < -10) {
            return s;
        }
        let full = m | 0x800000u;
        let shift = u32(14 - h_exp);
        var h = full >> shift;
        let rem = full & ((1u << shift) - 1u);
        let half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (h & 1u) == 1u)) {
            h = h + 1u;
        }
        return s | h;
    }
    var h = (u32(h_exp) << 10u) | (m >> 13u);
    let rem = m & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u) == 1u)) {
        h = h + 1u;
    }
    return s | h;
}
"#;

/// Declaration of a storage binding named `name`.
pub fn binding(index: usize, name: &str, data_type: DataType, writable: bool) -> String {
    let access = if writable { "read_write" } else { "read" };
    format!(
        "@group(0) @binding({index}) var<storage, {access}> {name}: array<{}>;\n",
        storage_type(data_type)
    )
}

/// `fn load_<name>(i: u32) -> <value type>` reading element `i` of binding `name`.
pub fn load_fn(name: &str, data_type: DataType) -> Result<String> {
    let vt = value_type(data_type)?;
    let body = match data_type {
        DataType::Float32 | DataType::Int32 | DataType::Uint32 => format!("return {name}[i];"),
        DataType::Float16 => format!(
            "let w = {name}[i >> 1u]; return f16_to_f32(select(w & 0xffffu, w >> 16u, (i & 1u) == 1u));"
        ),
        DataType::Uint8 => format!("return ({name}[i >> 2u] >> ((i & 3u) * 8u)) & 0xffu;"),
        DataType::Int8 => format!("return extractBits(bitcast<i32>({name}[i >> 2u]), (i & 3u) * 8u, 8u);"),
        DataType::Int64 | DataType::Uint64 => format!("return vec2<u32>({name}[2u * i], {name}[2u * i + 1u]);"),
    };
    Ok(format!("fn load_{name}(i: u32) -> {vt} {{ {body} }}\n"))
}

/// A WGSL `vec2<u32>` literal of a 64-bit integer (its two's complement low and high words).
pub fn wide_literal(value: i128) -> String {
    let bits = value as u64;
    format!("vec2<u32>({}u, {}u)", bits as u32, (bits >> 32) as u32)
}

/// Two-word (int64/uint64) arithmetic on `vec2<u32>` values (x the low word, y the high one):
/// wrapping add, sub, neg and mul (32x32 -> 64-bit products from 16-bit halves), comparisons in
/// two's complement (`_i64`) or unsigned (`_u64`), and conversions from and to f32.
pub const WIDE_HELPERS: &str = r#"
fn add64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let lo = a.x + b.x;
    return vec2<u32>(lo, a.y + b.y + select(0u, 1u, lo < a.x));
}
fn sub64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    return vec2<u32>(a.x - b.x, a.y - b.y - select(0u, 1u, a.x < b.x));
}
fn neg64(a: vec2<u32>) -> vec2<u32> { return sub64(vec2<u32>(0u, 0u), a); }
fn mul32x32(a: u32, b: u32) -> vec2<u32> {
    let al = a & 0xffffu; let ah = a >> 16u; let bl = b & 0xffffu; let bh = b >> 16u;
    let ll = al * bl; let lh = al * bh; let hl = ah * bl; let hh = ah * bh;
    let mid = (ll >> 16u) + (lh & 0xffffu) + (hl & 0xffffu);
    return vec2<u32>((mid << 16u) | (ll & 0xffffu), hh + (lh >> 16u) + (hl >> 16u) + (mid >> 16u));
}
fn mul64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let p = mul32x32(a.x, b.x);
    return vec2<u32>(p.x, p.y + a.x * b.y + a.y * b.x);
}
fn eq64(a: vec2<u32>, b: vec2<u32>) -> bool { return a.x == b.x && a.y == b.y; }
fn lt_u64(a: vec2<u32>, b: vec2<u32>) -> bool { return a.y < b.y || (a.y == b.y && a.x < b.x); }
fn lt_i64(a: vec2<u32>, b: vec2<u32>) -> bool {
    let ah = bitcast<i32>(a.y); let bh = bitcast<i32>(b.y);
    return ah < bh || (ah == bh && a.x < b.x);
}
fn is_neg64(a: vec2<u32>) -> bool { return (a.y & 0x80000000u) != 0u; }
// The value as f32, rounded to nearest even once (not via f32(hi) * 2^32 + f32(lo), which rounds
// twice): the leading 32 bits, a sticky bit for the rest.
fn u64_to_f32(a: vec2<u32>) -> f32 {
    if (a.y == 0u && a.x < 0x1000000u) { return f32(a.x); }
    var top: u32;
    var sticky: bool;
    var scale: i32;
    if (a.y == 0u) {
        let lz = countLeadingZeros(a.x);
        top = a.x << lz;
        sticky = false;
        scale = -i32(lz);
    } else {
        let lz = countLeadingZeros(a.y);
        top = (a.y << lz) | select(a.x >> (32u - lz), 0u, lz == 0u);
        sticky = (a.x << lz) != 0u;
        scale = 32 - i32(lz);
    }
    var m = top >> 8u;
    let rem = top & 0xffu;
    if (rem > 0x80u || (rem == 0x80u && (sticky || (m & 1u) == 1u))) { m = m + 1u; }
    return ldexp(f32(m), scale + 8);
}
fn i64_to_f32(a: vec2<u32>) -> f32 {
    let m = u64_to_f32(select(a, neg64(a), is_neg64(a)));
    return select(m, -m, is_neg64(a));
}
// Truncation toward zero of a finite |x| < 2^64 to its magnitude's two words: above 2^32, x is a
// multiple of 2^9 and x - hi 2^32 is exact.
fn f32_to_u64_mag(x: f32) -> vec2<u32> {
    let t = trunc(abs(x));
    let hi = floor(t / 4294967296.0);
    return vec2<u32>(u32(t - hi * 4294967296.0), u32(hi));
}
fn f32_to_i64(x: f32) -> vec2<u32> {
    if ((bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u) { return vec2<u32>(0u, 0u); }
    if (x >= 9223372036854775808.0) { return vec2<u32>(0xffffffffu, 0x7fffffffu); }
    if (x <= -9223372036854775808.0) { return vec2<u32>(0u, 0x80000000u); }
    let m = f32_to_u64_mag(x);
    return select(m, neg64(m), x < 0.0);
}
fn f32_to_u64(x: f32) -> vec2<u32> {
    if (x >= 18446744073709551616.0) { return vec2<u32>(0xffffffffu, 0xffffffffu); }
    if (!(x > 0.0)) { return vec2<u32>(0u, 0u); }
    return f32_to_u64_mag(x);
}
"#;
/// An expression converting value `v` (of the value type) to the bits stored for one element of
/// a packed type.
pub fn packed_bits(data_type: DataType, v: &str) -> String {
    match data_type {
        DataType::Float16 => format!("f32_to_f16({v})"),
        DataType::Uint8 => format!("({v} & 0xffu)"),
        DataType::Int8 => format!("(bitcast<u32>({v}) & 0xffu)"),
        _ => v.to_string(),
    }
}

/// `fn coords_<name>(i: u32) -> array<u32, R>`: the multi-index of linear index `i` in `shape`.
pub fn coords_fn(name: &str, shape: &[u32]) -> String {
    let rank = shape.len().max(1);
    let mut s = format!("fn coords_{name}(i: u32) -> array<u32, {rank}> {{\n    var c: array<u32, {rank}>;\n    var r = i;\n");
    for (axis, &dim) in shape.iter().enumerate().rev() {
        s += &format!("    c[{axis}] = r % {dim}u; r = r / {dim}u;\n");
    }
    if shape.is_empty() {
        s += "    c[0] = 0u;\n";
    }
    s += "    return c;\n}\n";
    s
}

/// `fn offset_<name>(c: array<u32, R>) -> u32`: the linear index in row-major `shape` of the
/// multi-index `c` of an output of rank `R = out_rank`, right-aligned with numpy broadcasting
/// (dimensions of size 1 in `shape` read index 0).
pub fn broadcast_offset_fn(name: &str, shape: &[u32], out_rank: usize) -> String {
    let rank = out_rank.max(1);
    let strides = crate::operand::strides(shape);
    let mut terms = Vec::new();
    let offset = out_rank - shape.len();
    for (axis, &dim) in shape.iter().enumerate() {
        if dim != 1 {
            terms.push(format!("c[{}] * {}u", axis + offset, strides[axis]));
        }
    }
    let expr = if terms.is_empty() { "0u".to_string() } else { terms.join(" + ") };
    format!("fn offset_{name}(c: array<u32, {rank}>) -> u32 {{ return {expr}; }}\n")
}

/// The generic element-wise kernel: one invocation per output storage word, each computing
/// `compute(i)` for the elements of its word.
pub struct ElementwiseKernel<'a> {
    /// Binding names and descriptors of the inputs, in operator input order.
    pub inputs: Vec<(&'a str, &'a OperandDescriptor)>,
    pub output: &'a OperandDescriptor,
    /// Extra WGSL (helper functions) placed before `compute`.
    pub helpers: String,
    /// Body of `fn compute(i: u32) -> <output value type>`, `i` being the output's linear index.
    pub body: String,
}

impl ElementwiseKernel<'_> {
    pub fn build(self) -> Result<Launch> {
        let out_type = self.output.data_type;
        let out_vt = value_type(out_type)?;
        let mut src = String::from(F16_HELPERS);
        if out_type.is_wide() || self.inputs.iter().any(|(_, d)| d.data_type.is_wide()) {
            src += WIDE_HELPERS;
        }
        for (index, (name, desc)) in self.inputs.iter().enumerate() {
            src += &binding(index, name, desc.data_type, false);
            src += &load_fn(name, desc.data_type)?;
        }
        src += &binding(self.inputs.len(), "out", out_type, true);
        src += &self.helpers;
        src += &format!("fn compute(i: u32) -> {out_vt} {{\n{}\n}}\n", self.body);
        let count = self.output.element_count();
        let per_word = elements_per_word(out_type);
        let words = count.div_ceil(per_word);
        let store = if out_type.is_wide() {
            // One invocation per element, writing its two words.
            "let v = compute(t);\n    out[2u * t] = v.x;\n    out[2u * t + 1u] = v.y;".to_string()
        } else if per_word == 1 {
            "out[t] = compute(t);".to_string()
        } else {
            let bits = 32 / per_word;
            format!(
                "var word = 0u;\n    for (var k = 0u; k < {per_word}u; k++) {{\n        let i = t * {per_word}u + k;\n        if (i < {count}u) {{ word = word | ({} << (k * {bits}u)); }}\n    }}\n    out[t] = word;",
                packed_bits(out_type, "compute(i)")
            )
        };
        src += &format!(
            "@compute @workgroup_size({WORKGROUP_SIZE})\nfn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{\n    let t = gid.x + gid.y * nwg.x * {WORKGROUP_SIZE}u;\n    if (t >= {words}u) {{ return; }}\n    {store}\n}}\n"
        );
        Ok(Launch {
            source: src,
            reads: (0..self.inputs.len()).map(BufRef::Input).collect(),
            writes: vec![BufRef::Output(0)],
            invocations: words,
            workgroup_size: WORKGROUP_SIZE,
        })
    }
}

/// Prepended to every kernel: the bits of NaN, +inf and -inf in a private variable. A constant
/// expression that evaluates to a non-finite float is a shader-creation error in WGSL (Chromium's
/// Tint rejects `bitcast<f32>(0xff800000u)`), so [`literal`] reads these bits at run time.
pub const PRELUDE: &str =
    "var<private> webnn_non_finite_bits: array<u32, 3> = array<u32, 3>(0x7fc00000u, 0x7f800000u, 0xff800000u);\n";

/// `source` with [`PRELUDE`] after its directives (`enable`, `requires`, `diagnostic`), which
/// must come first in a WGSL module.
pub fn with_prelude(source: &str) -> String {
    let mut split = 0;
    for line in source.split_inclusive('\n') {
        let t = line.trim_start();
        if !(t.is_empty() || t.starts_with("enable ") || t.starts_with("requires ") || t.starts_with("diagnostic")) {
            break;
        }
        split += line.len();
    }
    format!("{}{PRELUDE}{}", &source[..split], &source[split..])
}

/// A WGSL literal of value type `vt` for a number (used for baked-in options like `alpha`).
pub fn literal(value: f64, vt: &str) -> String {
    match vt {
        "f32" => {
            let v = value as f32;
            if v.is_nan() {
                "bitcast<f32>(webnn_non_finite_bits[0])".into()
            } else if v.is_infinite() {
                if v > 0.0 { "bitcast<f32>(webnn_non_finite_bits[1])".into() } else { "bitcast<f32>(webnn_non_finite_bits[2])".into() }
            } else {
                format!("bitcast<f32>({}u)", v.to_bits())
            }
        }
        "i32" => format!("i32({})", value.clamp(i32::MIN as f64, i32::MAX as f64) as i64),
        _ => format!("{}u", value.clamp(0.0, u32::MAX as f64) as u64),
    }
}
