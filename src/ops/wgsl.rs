//! Shared pieces of WGSL generation: how each data type is stored and loaded, index arithmetic
//! with the shapes baked in as literals, and the generic "one invocation per output word"
//! element-wise kernel most operators lower to.
//!
//! Storage: float32, int32 and uint32 are stored natively. float16 is stored as 16-bit halves
//! packed in `u32` words, computed in f32 and rounded to nearest even on store, so it works
//! without the `shader-f16` feature; int8/uint8 are packed four to a word. Packed outputs are
//! written one whole word per invocation, so no two invocations write the same word.

use crate::error::{Error, Result};
use crate::graph::{DataType, OperandDescriptor};

/// Invocations per workgroup of the generic kernels.
pub const WORKGROUP_SIZE: u32 = 256;

/// What the runtime gives an operator's lowering.
pub struct LowerContext<'a> {
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
}

impl Default for DeviceTraits {
    /// WebGPU's default limits on a GPU.
    fn default() -> Self {
        DeviceTraits { cpu: false, workgroup_storage: 16384, invocations: 256 }
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
        DataType::Int64 | DataType::Uint64 => {
            Err(Error::NotSupported(format!("{data_type} is not supported by the WebGPU kernels")))
        }
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
    (descriptor.byte_length().max(4) + 3) / 4 * 4
}

/// Conversions between f32 and float16 bits, with round-to-nearest-even.
pub const F16_HELPERS: &str = r#"
fn f16_to_f32(h: u32) -> f32 {
    let s = (h & 0x8000u) << 16u;
    let e = (h >> 10u) & 0x1fu;
    let m = h & 0x3ffu;
    if (e == 0u) {
        return bitcast<f32>(s | 0x3f800000u) * f32(m) * 5.9604644775390625e-8;
    }
    if (e == 31u) {
        return bitcast<f32>(s | 0x7f800000u | (m << 13u));
    }
    return bitcast<f32>(s | ((e + 112u) << 23u) | (m << 13u));
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
        DataType::Int64 | DataType::Uint64 => unreachable_type(data_type)?,
    };
    Ok(format!("fn load_{name}(i: u32) -> {vt} {{ {body} }}\n"))
}

fn unreachable_type(data_type: DataType) -> Result<String> {
    Err(Error::NotSupported(format!("{data_type} is not supported by the WebGPU kernels")))
}

/// An expression converting value `v` (of the value type) to the bits stored for one element of
/// a packed type.
fn packed_bits(data_type: DataType, v: &str) -> String {
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
    let strides = crate::graph::operand::strides(shape);
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
        let store = if per_word == 1 {
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
