//! matmul and gemm.
//!
//! Both lower to one matrix-product generator: `out[batch, m, n] = alpha * sum_k A[m, k] * B[k, n]
//! + beta * C[m, n]`, with A and B read through strides (which covers gemm's transposes) and batch
//! offsets broadcast from the output's batch index (matmul). Accumulation is in f32 for float32 and
//! float16 alike. Two kernels:
//! - tiled: 64x64 output tile per workgroup of 256 invocations, each computing a 4x4 block from
//!   16-deep tiles of A and B staged in workgroup memory;
//! - direct: for small M or N (M = 1 decoding), where a 64x64 tile would mostly compute padding:
//!   each output word is summed by 8 invocations over interleaved slices of K.

use crate::error::{Error, Result};
use crate::graph::operand::{broadcast_shapes, is_unidirectionally_broadcastable, MAX_RANK};
use crate::graph::{DataType, OperandDescriptor};
use crate::ops::limits::{self, OpLimits, FLOATS};
use crate::ops::reference::{coords, round_to, HostTensor};
use crate::ops::wgsl::{
    binding, broadcast_offset_fn, coords_fn, elements_per_word, literal, load_fn, BufRef, ElementwiseKernel, Launch,
    LowerContext, Lowering, F16_HELPERS,
};

/// `MLGemmOptions`; `c` is passed as a third input when `has_c`.
#[derive(Debug, Clone, PartialEq)]
pub struct GemmOptions {
    pub alpha: f64,
    pub beta: f64,
    pub a_transpose: bool,
    pub b_transpose: bool,
    pub has_c: bool,
}

impl Default for GemmOptions {
    fn default() -> Self {
        GemmOptions { alpha: 1.0, beta: 1.0, a_transpose: false, b_transpose: false, has_c: false }
    }
}

pub fn limits() -> Vec<OpLimits> {
    let rank = MAX_RANK as u32;
    vec![
        OpLimits {
            name: "matmul",
            operands: vec![
                limits::tensor("a", FLOATS, 2, rank),
                limits::tensor("b", FLOATS, 2, rank),
                limits::tensor("output", FLOATS, 2, rank),
            ],
        },
        OpLimits {
            name: "gemm",
            operands: vec![
                limits::tensor("a", FLOATS, 2, 2),
                limits::tensor("b", FLOATS, 2, 2),
                limits::tensor("c", FLOATS, 0, 2),
                limits::tensor("output", FLOATS, 2, 2),
            ],
        },
    ]
}

/// Checks `b` (and `c`) have `a`'s data type: their allowed data types are "same as a".
fn check_same_type(name: &str, what: &str, a: &OperandDescriptor, other: &OperandDescriptor) -> Result<()> {
    if other.data_type != a.data_type {
        return Err(Error::Type(format!(
            "{name}: {what} is {} but a is {}: the data types must match",
            other.data_type, a.data_type
        )));
    }
    Ok(())
}

pub fn validate_matmul(inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
    let l = limits::of("matmul")?;
    let (a, b) = (inputs[0], inputs[1]);
    limits::check(&l.operands[0], a)?;
    check_same_type("matmul", "b", a, b)?;
    limits::check(&l.operands[1], b)?;
    let (ra, rb) = (a.rank(), b.rank());
    let (rows_a, cols_a) = (a.shape[ra - 2], a.shape[ra - 1]);
    let (rows_b, cols_b) = (b.shape[rb - 2], b.shape[rb - 1]);
    if cols_a != rows_b {
        return Err(Error::Type(format!(
            "matmul: a {:?} has {cols_a} columns but b {:?} has {rows_b} rows",
            a.shape, b.shape
        )));
    }
    let mut shape = broadcast_shapes(&a.shape[..ra - 2], &b.shape[..rb - 2]).ok_or_else(|| {
        Error::Type(format!(
            "matmul: the batch dimensions of a {:?} and b {:?} cannot be broadcast together",
            a.shape, b.shape
        ))
    })?;
    shape.extend([rows_a, cols_b]);
    Ok(vec![OperandDescriptor::new(a.data_type, shape)])
}

/// Gemm's `[M, K]` and `[K, N]` after the optional transposes.
fn gemm_shapes(o: &GemmOptions, a: &OperandDescriptor, b: &OperandDescriptor) -> ([u32; 2], [u32; 2]) {
    let flip = |s: &[u32], t: bool| if t { [s[1], s[0]] } else { [s[0], s[1]] };
    (flip(&a.shape, o.a_transpose), flip(&b.shape, o.b_transpose))
}

pub fn validate_gemm(o: &GemmOptions, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
    let l = limits::of("gemm")?;
    let (a, b) = (inputs[0], inputs[1]);
    limits::check(&l.operands[0], a)?;
    check_same_type("gemm", "b", a, b)?;
    limits::check(&l.operands[1], b)?;
    let (sa, sb) = gemm_shapes(o, a, b);
    if sa[1] != sb[0] {
        return Err(Error::Type(format!(
            "gemm: a {:?} (aTranspose {}) has {} columns but b {:?} (bTranspose {}) has {} rows",
            a.shape, o.a_transpose, sa[1], b.shape, o.b_transpose, sb[0]
        )));
    }
    let out = [sa[0], sb[1]];
    if o.has_c {
        let c = inputs[2];
        if !is_unidirectionally_broadcastable(&c.shape, &out) {
            return Err(Error::Type(format!("gemm: c {:?} cannot be broadcast to the output shape {out:?}", c.shape)));
        }
        check_same_type("gemm", "c", a, c)?;
        limits::check(&l.operands[2], c)?;
    }
    Ok(vec![OperandDescriptor::new(a.data_type, out.to_vec())])
}

/// One matrix product, in elements of the row-major operands.
struct Product<'a> {
    data_type: DataType,
    a: &'a OperandDescriptor,
    b: &'a OperandDescriptor,
    c: Option<&'a OperandDescriptor>,
    out: &'a OperandDescriptor,
    m: u32,
    n: u32,
    k: u32,
    /// Element strides of A along m and k, and of B along k and n.
    a_strides: [u32; 2],
    b_strides: [u32; 2],
    /// The output's batch shape and the inputs' batch shapes (broadcast to it).
    batch: Vec<u32>,
    a_batch: Vec<u32>,
    b_batch: Vec<u32>,
    /// Already cast to the data type.
    alpha: f64,
    beta: f64,
}

/// Outputs with fewer rows or columns than this use the direct kernel.
const DIRECT_BELOW: u32 = 16;
/// The direct kernel's output words per workgroup and the k-slices each word is split into.
const DIRECT_WORDS: u64 = 32;
const DIRECT_SLICES: u32 = 8;
const TILE: u32 = 64;

impl Product<'_> {
    fn batch_count(&self) -> u64 {
        self.batch.iter().map(|&d| d as u64).product()
    }

    /// WGSL helpers shared by both kernels: batch offsets and the epilogue `finish(acc, m, n)`.
    fn helpers(&self) -> String {
        let rank = self.batch.len();
        let mut s = coords_fn("batch", &self.batch);
        s += &broadcast_offset_fn("abatch", &self.a_batch, rank);
        s += &broadcast_offset_fn("bbatch", &self.b_batch, rank);
        let (mk, kn) = (self.m as u64 * self.k as u64, self.k as u64 * self.n as u64);
        s += &format!(
            "fn a_base(batch: u32) -> u32 {{ return offset_abatch(coords_batch(batch)) * {mk}u; }}\n\
             fn b_base(batch: u32) -> u32 {{ return offset_bbatch(coords_batch(batch)) * {kn}u; }}\n"
        );
        let mut e = if self.alpha == 1.0 { "acc".to_string() } else { format!("{} * acc", literal(self.alpha, "f32")) };
        if let Some(c) = self.c {
            s += &broadcast_offset_fn("c", &c.shape, 2);
            e = format!("{e} + {} * load_c(offset_c(array<u32, 2>(m, n)))", literal(self.beta, "f32"));
        }
        s += &format!("fn finish(acc: f32, m: u32, n: u32) -> f32 {{ return {e}; }}\n");
        s
    }

    fn input_names(&self) -> Vec<(&'static str, &OperandDescriptor)> {
        let mut v = vec![("a", self.a), ("b", self.b)];
        if let Some(c) = self.c {
            v.push(("c", c));
        }
        v
    }

    fn lower(&self) -> Result<Lowering> {
        if self.m < DIRECT_BELOW || self.n < DIRECT_BELOW {
            return Ok(Lowering::single(self.direct()?));
        }
        // A float16 word holds two neighbouring outputs; with an odd N they can fall in different
        // tiles, so the tiles write f32 to scratch and a second launch packs the words.
        if self.data_type == DataType::Float16 && self.n % 2 == 1 {
            let scratch = OperandDescriptor::new(DataType::Float32, self.out.shape.clone());
            let tiled = self.tiled(DataType::Float32, BufRef::Scratch(0))?;
            let mut pack = ElementwiseKernel {
                inputs: vec![("s", &scratch)],
                output: self.out,
                helpers: String::new(),
                body: "    return load_s(i);".into(),
            }
            .build()?;
            pack.reads = vec![BufRef::Scratch(0)];
            return Ok(Lowering::Kernels {
                scratch: vec![crate::ops::wgsl::buffer_size(&scratch)],
                launches: vec![tiled, pack],
            });
        }
        Ok(Lowering::single(self.tiled(self.data_type, BufRef::Output(0))?))
    }

    /// Bindings (inputs, then `out` of `out_type`) and the shared helpers.
    fn prologue(&self, out_type: DataType) -> Result<String> {
        let mut src = String::from(F16_HELPERS);
        let names = self.input_names();
        for (index, (name, d)) in names.iter().enumerate() {
            src += &binding(index, name, d.data_type, false);
            src += &load_fn(name, d.data_type)?;
        }
        src += &binding(names.len(), "out", out_type, true);
        src += &self.helpers();
        Ok(src)
    }

    fn reads(&self) -> Vec<BufRef> {
        (0..2 + self.c.is_some() as usize).map(BufRef::Input).collect()
    }

    /// One workgroup per 32 output words, the 8 groups of 32 invocations each summing every
    /// 8th k (so M = 1 still spreads over many invocations, and neighbouring invocations read
    /// neighbouring columns of B), then adding the 8 partial sums. Each word is written whole.
    fn direct(&self) -> Result<Launch> {
        let (m, n, k) = (self.m, self.n, self.k);
        let [sam, sak] = self.a_strides;
        let [sbk, sbn] = self.b_strides;
        let count = self.out.element_count();
        let per_word = elements_per_word(self.data_type);
        let words = count.div_ceil(per_word);
        let groups = words.div_ceil(DIRECT_WORDS);
        let store = if per_word == 1 {
            "        let c0 = coords_out(t);\n        out[t] = finish(total.x, c0.y, c0.z);".to_string()
        } else {
            format!(
                "        let c0 = coords_out(t * 2u);\n        var word = f32_to_f16(finish(total.x, c0.y, c0.z));\n\
                 \x20       if (t * 2u + 1u < {count}u) {{\n            let c1 = coords_out(t * 2u + 1u);\n            word = word | (f32_to_f16(finish(total.y, c1.y, c1.z)) << 16u);\n        }}\n\
                 \x20       out[t] = word;"
            )
        };
        let mut src = self.prologue(self.data_type)?;
        src += &format!(
            r#"fn coords_out(i: u32) -> vec3<u32> {{ let r = i / {n}u; return vec3<u32>(r / {m}u, r % {m}u, i % {n}u); }}
var<workgroup> partial: array<vec2<f32>, 256>;
@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
    let g = wid.x + wid.y * nwg.x;
    if (g >= {groups}u) {{ return; }}
    let w = lid % {DIRECT_WORDS}u;
    let slice = lid / {DIRECT_WORDS}u;
    let t = g * {DIRECT_WORDS}u + w;
    var acc = vec2<f32>(0.0);
    for (var e = 0u; e < {per_word}u; e++) {{
        let i = t * {per_word}u + e;
        if (i < {count}u) {{
            let c = coords_out(i);
            let ab = a_base(c.x) + c.y * {sam}u;
            let bb = b_base(c.x) + c.z * {sbn}u;
            var s = 0.0;
            for (var kk = slice; kk < {k}u; kk += {DIRECT_SLICES}u) {{ s = s + load_a(ab + kk * {sak}u) * load_b(bb + kk * {sbk}u); }}
            acc[e] = s;
        }}
    }}
    partial[lid] = acc;
    workgroupBarrier();
    if (slice == 0u && t < {words}u) {{
        var total = partial[w];
        for (var j = 1u; j < {DIRECT_SLICES}u; j++) {{ total = total + partial[j * {DIRECT_WORDS}u + w]; }}
{store}
    }}
}}
"#
        );
        Ok(Launch {
            source: src,
            reads: self.reads(),
            writes: vec![BufRef::Output(0)],
            invocations: groups * 256,
            workgroup_size: 256,
        })
    }

    /// The tiled kernel writing `out_type` values to `target`.
    fn tiled(&self, out_type: DataType, target: BufRef) -> Result<Launch> {
        let (m, n, k) = (self.m, self.n, self.k);
        let [sam, sak] = self.a_strides;
        let [sbk, sbn] = self.b_strides;
        let tiles_n = n.div_ceil(TILE) as u64;
        let per_batch = m.div_ceil(TILE) as u64 * tiles_n;
        let groups = per_batch * self.batch_count();
        if groups > u32::MAX as u64 {
            return Err(Error::Operation(format!("matmul: {groups} workgroups do not fit a 32-bit index")));
        }
        let mut src = self.prologue(out_type)?;
        // Tile loads: consecutive invocations read consecutive addresses of the operand, so the
        // fast tile axis is the one with stride 1 in memory.
        let (a_k, a_m) = if sak == 1 { ("e % 16u", "e / 16u") } else { ("e / 64u", "e % 64u") };
        let (b_k, b_n) = if sbn == 1 { ("e / 64u", "e % 64u") } else { ("e % 16u", "e / 16u") };
        let store = match out_type {
            DataType::Float16 => format!(
                "        for (var j = 0u; j < 4u; j += 2u) {{\n\
                 \x20           let gn = n0 + tx * 4u + j;\n\
                 \x20           if (gm < {m}u && gn < {n}u) {{\n\
                 \x20               let lo = f32_to_f16(finish(acc[i][j], gm, gn));\n\
                 \x20               let hi = f32_to_f16(finish(acc[i][j + 1u], gm, gn + 1u));\n\
                 \x20               out[(o + gm * {n}u + gn) >> 1u] = lo | (hi << 16u);\n\
                 \x20           }}\n        }}\n"
            ),
            _ => format!(
                "        for (var j = 0u; j < 4u; j++) {{\n\
                 \x20           let gn = n0 + tx * 4u + j;\n\
                 \x20           if (gm < {m}u && gn < {n}u) {{ out[o + gm * {n}u + gn] = finish(acc[i][j], gm, gn); }}\n\
                 \x20       }}\n"
            ),
        };
        src += &format!(
            r#"var<workgroup> tile_a: array<vec4<f32>, 256>;
var<workgroup> tile_b: array<vec4<f32>, 256>;
@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
    let g = wid.x + wid.y * nwg.x;
    if (g >= {groups}u) {{ return; }}
    let batch = g / {per_batch}u;
    let tile = g % {per_batch}u;
    let m0 = (tile / {tiles_n}u) * 64u;
    let n0 = (tile % {tiles_n}u) * 64u;
    let ab = a_base(batch);
    let bb = b_base(batch);
    let o = batch * {mn}u;
    let tx = lid % 16u;
    let ty = lid / 16u;
    var acc: array<vec4<f32>, 4>;
    for (var k0 = 0u; k0 < {k}u; k0 += 16u) {{
        for (var r = 0u; r < 4u; r++) {{
            let e = lid + r * 256u;
            let ak = {a_k};
            let am = {a_m};
            var va = 0.0;
            if (m0 + am < {m}u && k0 + ak < {k}u) {{ va = load_a(ab + (m0 + am) * {sam}u + (k0 + ak) * {sak}u); }}
            tile_a[ak * 16u + am / 4u][am % 4u] = va;
            let bk = {b_k};
            let bn = {b_n};
            var vb = 0.0;
            if (k0 + bk < {k}u && n0 + bn < {n}u) {{ vb = load_b(bb + (k0 + bk) * {sbk}u + (n0 + bn) * {sbn}u); }}
            tile_b[bk * 16u + bn / 4u][bn % 4u] = vb;
        }}
        workgroupBarrier();
        for (var kk = 0u; kk < 16u; kk++) {{
            let av = tile_a[kk * 16u + ty];
            let bv = tile_b[kk * 16u + tx];
            acc[0] = fma(vec4<f32>(av.x), bv, acc[0]);
            acc[1] = fma(vec4<f32>(av.y), bv, acc[1]);
            acc[2] = fma(vec4<f32>(av.z), bv, acc[2]);
            acc[3] = fma(vec4<f32>(av.w), bv, acc[3]);
        }}
        workgroupBarrier();
    }}
    for (var i = 0u; i < 4u; i++) {{
        let gm = m0 + ty * 4u + i;
{store}    }}
}}
"#,
            mn = m as u64 * n as u64,
        );
        Ok(Launch {
            source: src,
            reads: self.reads(),
            writes: vec![target],
            invocations: groups * 256,
            workgroup_size: 256,
        })
    }
}

pub fn lower_matmul(cx: &LowerContext) -> Result<Lowering> {
    let (a, b, out) = (cx.inputs[0], cx.inputs[1], cx.outputs[0]);
    let (ra, rb, ro) = (a.rank(), b.rank(), out.rank());
    let (m, k, n) = (a.shape[ra - 2], a.shape[ra - 1], b.shape[rb - 1]);
    Product {
        data_type: a.data_type,
        a,
        b,
        c: None,
        out,
        m,
        n,
        k,
        a_strides: [k, 1],
        b_strides: [n, 1],
        batch: out.shape[..ro - 2].to_vec(),
        a_batch: a.shape[..ra - 2].to_vec(),
        b_batch: b.shape[..rb - 2].to_vec(),
        alpha: 1.0,
        beta: 0.0,
    }
    .lower()
}

pub fn lower_gemm(o: &GemmOptions, cx: &LowerContext) -> Result<Lowering> {
    let (a, b, out) = (cx.inputs[0], cx.inputs[1], cx.outputs[0]);
    let (sa, sb) = gemm_shapes(o, a, b);
    let (m, k, n) = (sa[0], sa[1], sb[1]);
    let t = a.data_type;
    Product {
        data_type: t,
        a,
        b,
        c: if o.has_c { Some(cx.inputs[2]) } else { None },
        out,
        m,
        n,
        k,
        a_strides: if o.a_transpose { [1, m] } else { [k, 1] },
        b_strides: if o.b_transpose { [1, k] } else { [n, 1] },
        batch: Vec::new(),
        a_batch: Vec::new(),
        b_batch: Vec::new(),
        alpha: round_to(o.alpha, t),
        beta: round_to(o.beta, t),
    }
    .lower()
}

/// `sum_k a[.., m, k] * b[.., k, n]` with the batch dimensions broadcast.
pub fn reference_matmul(inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
    let (a, b, out) = (&inputs[0], &inputs[1], &outputs[0]);
    let ro = out.rank();
    let (m, n) = (out.shape[ro - 2] as usize, out.shape[ro - 1] as usize);
    let k = a.shape()[a.shape().len() - 1] as usize;
    let batch_shape = &out.shape[..ro - 2];
    let batches: usize = batch_shape.iter().map(|&d| d as usize).product();
    // The element of a matrix operand at (batch coordinates, row, column).
    let at = |t: &HostTensor, bc: &[usize], r: usize, c: usize| {
        let s = t.shape();
        let rank = s.len();
        let mut index = 0usize;
        let offset = bc.len() + 2 - rank;
        for axis in 0..rank - 2 {
            let coord = if s[axis] == 1 { 0 } else { bc[axis + offset] };
            index = index * s[axis] as usize + coord;
        }
        (index * s[rank - 2] as usize + r) * s[rank - 1] as usize + c
    };
    let mut data = Vec::with_capacity(batches * m * n);
    for batch in 0..batches {
        let bc = coords(batch, batch_shape);
        for i in 0..m {
            for j in 0..n {
                let sum: f64 = (0..k).map(|p| a.data[at(a, &bc, i, p)] * b.data[at(b, &bc, p, j)]).sum();
                data.push(round_to(sum, out.data_type));
            }
        }
    }
    Ok(vec![HostTensor::new(out.clone(), data)?])
}

/// `alpha * A' * B' + beta * C` with A', B' optionally transposed and C broadcast to [M, N].
pub fn reference_gemm(
    o: &GemmOptions,
    inputs: &[HostTensor],
    outputs: &[OperandDescriptor],
) -> Result<Vec<HostTensor>> {
    let (a, b, out) = (&inputs[0], &inputs[1], &outputs[0]);
    let t = out.data_type;
    let (alpha, beta) = (round_to(o.alpha, t), round_to(o.beta, t));
    let (m, n) = (out.shape[0] as usize, out.shape[1] as usize);
    let (sa, _) = gemm_shapes(o, &a.descriptor, &b.descriptor);
    let k = sa[1] as usize;
    let a_at = |i: usize, p: usize| if o.a_transpose { a.data[p * m + i] } else { a.data[i * k + p] };
    let b_at = |p: usize, j: usize| if o.b_transpose { b.data[j * k + p] } else { b.data[p * n + j] };
    let mut data = Vec::with_capacity(m * n);
    for i in 0..m {
        for j in 0..n {
            let sum: f64 = (0..k).map(|p| a_at(i, p) * b_at(p, j)).sum();
            let c = if o.has_c { beta * inputs[2].at_broadcast(&[i, j]) } else { 0.0 };
            data.push(round_to(alpha * sum + c, t));
        }
    }
    Ok(vec![HostTensor::new(out.clone(), data)?])
}
