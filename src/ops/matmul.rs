//! matmul and gemm.
//!
//! Both lower to one matrix-product generator:
//! `out[batch, m, n] = alpha * sum_k A[m, k] * B[k, n] + beta * C[m, n]`, with A and B read
//! through strides (which covers gemm's transposes) and batch offsets broadcast from the
//! output's batch index (matmul). Accumulation is in f32 for float32 and float16 alike (float16
//! stored packed two to a u32 word, so no `shader-f16` is needed). Kernels, chosen by shape and
//! adapter:
//! - tiled (M, N >= 16), on a GPU: register-blocked tiles of A and B in workgroup memory, loaded
//!   in quads (vec4 for aligned float32), each invocation accumulating a `tm x tn` block in vec4
//!   registers with the k-loop unrolled; no bounds checks when M, N, K divide the tile. 128x128
//!   tiles (8x8 per invocation) when they give enough workgroups, else 64x64.
//! - registers (M, N >= 16, and M <= 8 with B contiguous along N), on a CPU-emulated adapter
//!   (SwiftShader, llvmpipe: a workgroup's invocations are SIMD lanes of a CPU thread, barriers
//!   and workgroup memory are slow, caches are large): no workgroup memory, each invocation an
//!   8x8 block (or all M <= 8 rows by 8 columns) straight from the operands, K in quads.
//! - GEMV (M <= 8, B contiguous along N: token decoding), on a GPU: coalesced quad loads across
//!   N, K split over the workgroup's invocations and over workgroups (partial sums added by a
//!   second launch), so the weight is streamed once at memory bandwidth.
//! - dot (A and B contiguous along K: N = 1, or gemm with bTranspose and small M): on a GPU a
//!   group of invocations per output, reduced in workgroup memory; on a CPU adapter each
//!   invocation sums its own block of outputs along K in quads.
//! - direct: the remaining small shapes (9..15 rows, or 2..8 columns with B strided along K):
//!   each output word summed by 8 invocations over interleaved slices of K.
//!
//! With subgroup operations (the device's `SUBGROUP` feature, unless `WEBNN_WGPU_SUBGROUPS=0`)
//! the GEMV and dot kernels sum an output's K shares inside each subgroup (`subgroup_sum_fn`:
//! `subgroupAdd`, or a `subgroupShuffleXor` butterfly when the subgroup spans several outputs)
//! and only the per-subgroup sums meet in workgroup memory, behind one barrier; the subgroup
//! size (4..128) is read at run time. The GEMV kernel then lays a column's K shares on
//! neighbouring invocations, so a subgroup still reads whole rows of B (several K rows at once).
//!
//! Every kernel applies `finish(acc, m, n)` (alpha, beta * C) to each output, most of them
//! through `store(quad, row, col, o)`: the place an epilogue goes.

use crate::error::{Error, Result};
use crate::graph::operand::{broadcast_shapes, is_unidirectionally_broadcastable, MAX_RANK};
use crate::graph::{DataType, OperandDescriptor};
use crate::ops::fusion::Epilogue;
use crate::ops::limits::{self, OpLimits, FLOATS};
use crate::ops::reference::{coords, round_to, HostTensor};
use crate::ops::wgsl::{
    binding, broadcast_offset_fn, coords_fn, elements_per_word, literal, load_fn, BufRef, DeviceTraits, ElementwiseKernel,
    Launch, LowerContext, Lowering, F16_HELPERS,
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
    device: DeviceTraits,
    /// Fused element-wise operators applied by `finish` (`out` is then their output).
    epilogue: Option<&'a Epilogue<'a>>,
}

/// The tiled kernel's shape: a workgroup of `wx * wy` invocations computes a
/// `(wy * tm) x (wx * tn)` output tile, each invocation a `tm x tn` block, stepping K by `bk`
/// through tiles of A and B staged in workgroup memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tiles {
    pub wx: u32,
    pub wy: u32,
    pub tm: u32,
    pub tn: u32,
    pub bk: u32,
}

impl Tiles {
    const fn new(wx: u32, wy: u32, tm: u32, tn: u32, bk: u32) -> Tiles {
        Tiles { wx, wy, tm, tn, bk }
    }
    fn bm(&self) -> u32 {
        self.wy * self.tm
    }
    fn bn(&self) -> u32 {
        self.wx * self.tn
    }
    fn threads(&self) -> u32 {
        self.wx * self.wy
    }
    /// Usable on the device: within its limits, blocks and k-steps in whole vec4s.
    fn fits(&self, d: &DeviceTraits) -> bool {
        let whole = self.wx > 0 && self.wy > 0 && [self.tm, self.tn, self.bk].iter().all(|&v| v > 0 && v % 4 == 0);
        whole && self.threads() <= d.invocations && 4 * self.bk * (self.bm() + self.bn()) <= d.workgroup_storage
    }
}

/// Tile shapes from largest to smallest, for a GPU: many outputs per invocation reuse registers
/// (128x128 tiles, 8x8 each, 16-deep when workgroup storage allows: 34 TFLOP/s at 4096^3 on an
/// H200, against 31 for 8-deep and 29 for 64x64 tiles). CPU adapters use [`Product::registers`]
/// unless a shape is forced.
const GPU_TILES: &[Tiles] = &[
    Tiles::new(16, 16, 8, 8, 16),
    Tiles::new(16, 16, 8, 8, 8),
    Tiles::new(16, 16, 4, 4, 16),
    Tiles::new(8, 8, 4, 4, 16),
];
/// A kernel for the general (tiled) case.
enum Kernel {
    Tiles(Tiles),
    Regs(Regs),
}

/// The largest tile is taken when it still gives this many workgroups (a GPU has up to ~150
/// compute units).
const GPU_MIN_GROUPS: u64 = 120;

/// The GEMV kernel's shape: `wx` invocations along N (4 columns each) times `wk` along K, with
/// K split over `splits` workgroups (whose partial sums a second launch adds) when the columns
/// alone would give too few workgroups to keep a GPU's memory system busy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gemv {
    pub wx: u32,
    pub wk: u32,
    pub splits: u32,
}

/// Workgroups the GEMV kernel aims for: enough loads in flight to saturate a GPU's bandwidth.
/// H200, 1x8192x8192: 512 (16 splits) 3150 GB/s, 1024 (32 splits) 2990 GB/s, 2048 2430 GB/s.
const GPU_GEMV_GROUPS: u64 = 512;
/// M up to this uses the GEMV or dot kernel (every row in registers, the weight read once).
const GEMV_ROWS: u32 = 8;
/// Outputs with fewer rows or columns than this use the direct kernel when no other fits (on a
/// GPU adapter).
const DIRECT_BELOW: u32 = 16;
/// The direct kernel's output words per workgroup and the k-slices each word is split into.
const DIRECT_WORDS: u64 = 32;
const DIRECT_SLICES: u32 = 8;
/// The register kernel's shape for CPU adapters ([`Product::registers`]): a workgroup of
/// `wx * wy` invocations, each computing a `tm x tn` block straight from the operands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Regs {
    pub wx: u32,
    pub wy: u32,
    pub tm: u32,
    pub tn: u32,
}

/// Matmul on a CPU adapter: 8x8 blocks in workgroups of 8x8 invocations. SwiftShader, 1024^3:
/// 3.2 GFLOP/s against 0.5 for 64x64 tiles through workgroup memory (4x4 blocks 1.0, 4x8 1.9;
/// workgroups of 16 invocations 2.4).
const CPU_REGS: Regs = Regs { wx: 8, wy: 8, tm: 8, tn: 8 };
/// GEMV on a CPU adapter: 8 columns per invocation, 16 invocations a workgroup (SwiftShader,
/// 1x4096x4096: 0.5-0.8 GFLOP/s against 0.25 for 4 columns in workgroups of 64).
const CPU_GEMV_COLS: u32 = 8;
const CPU_GEMV_THREADS: u32 = 16;

/// Benchmarking override of the tile or GEMV shape (`WEBNN_WGPU_MATMUL_TILES=wx,wy,tm,tn,bk`,
/// `WEBNN_WGPU_GEMV=wx,wk,splits`; the register kernel with `WEBNN_WGPU_MATMUL_REGS=wx,wy,tm,tn`,
/// which also applies to M <= 8 when B is contiguous along N), so shapes can be tuned on a device
/// without rebuilding, and every variant tested on any adapter.
fn shape_override(name: &str) -> Option<Vec<u32>> {
    if cfg!(target_arch = "wasm32") {
        return None;
    }
    let v = std::env::var(name).ok()?;
    v.split(',').map(|s| s.trim().parse().ok()).collect()
}

/// The `subgroup_sum_{ty}(v, sg)` WGSL helper: the sum of `v` over the aligned segment of
/// `lanes` invocations (a power of two) that shares one output, within the invocation's
/// subgroup of `sg`. A subgroup inside the segment is summed whole by `subgroupAdd`; one spanning
/// several segments sums each by a butterfly of `subgroupShuffleXor`. Subgroups are the aligned
/// runs of `sg` consecutive `local_invocation_index` (as every GPU forms them for a 1D workgroup).
fn subgroup_sum_fn(ty: &str, lanes: u32) -> String {
    let mut butterfly = String::new();
    let mut o = lanes / 2;
    while o > 0 {
        butterfly += &format!(" s = s + subgroupShuffleXor(s, {o}u);");
        o /= 2;
    }
    format!(
        "fn subgroup_sum_{ty}(v: {ty}, sg: u32) -> {ty} {{ if (sg > {lanes}u) {{ var s = v;{butterfly} return s; }} return subgroupAdd(v); }}\n"
    )
}

/// How a kernel reads an operand: element by element, or in quads of 4 elements consecutive in
/// memory (`aligned`: the contiguous axis is a multiple of 4, so a quad never straddles rows and
/// float32 loads as one vec4).
fn operand_access(index: usize, name: &str, data_type: DataType, quads: bool, aligned: bool) -> Result<String> {
    if !quads {
        return Ok(binding(index, name, data_type, false) + &load_fn(name, data_type)?);
    }
    if aligned {
        let mut s = match data_type {
            DataType::Float16 => binding(index, name, data_type, false) + &format!(
                "fn quad_{name}(e: u32) -> vec4<f32> {{ let w = e >> 1u; let lo = {name}[w]; let hi = {name}[w + 1u]; \
                 return vec4<f32>(f16_to_f32(lo & 0xffffu), f16_to_f32(lo >> 16u), f16_to_f32(hi & 0xffffu), f16_to_f32(hi >> 16u)); }}\n"
            ),
            _ => format!(
                "@group(0) @binding({index}) var<storage, read> {name}4: array<vec4<f32>>;\n\
                 fn quad_{name}(e: u32) -> vec4<f32> {{ return {name}4[e >> 2u]; }}\n"
            ),
        };
        s += &format!(
            "fn quadc_{name}(e: u32, ok: bool) -> vec4<f32> {{ if (ok) {{ return quad_{name}(e); }} return vec4<f32>(0.0); }}\n"
        );
        return Ok(s);
    }
    Ok(binding(index, name, data_type, false)
        + &load_fn(name, data_type)?
        + &format!(
            "fn quadn_{name}(e: u32, n: u32) -> vec4<f32> {{ var v = vec4<f32>(0.0); for (var i = 0u; i < min(n, 4u); i++) {{ v[i] = load_{name}(e + i); }} return v; }}\n"
        ))
}

/// The quad of operand `name` starting at element `e`: `ok` says the row is in range and `c0` is
/// the quad's first index along the contiguous axis of length `len`. Unchecked quads are in range.
fn quad(name: &str, aligned: bool, checked: bool, e: &str, ok: &str, c0: &str, len: u32) -> String {
    match (aligned, checked) {
        (true, false) => format!("quad_{name}({e})"),
        (true, true) => format!("quadc_{name}({e}, {ok} && {c0} < {len}u)"),
        (false, _) => format!("quadn_{name}({e}, select(0u, {len}u - {c0}, {ok} && {c0} < {len}u))"),
    }
}

const XYZW: [&str; 4] = ["x", "y", "z", "w"];

impl Product<'_> {
    fn batch_count(&self) -> u64 {
        self.batch.iter().map(|&d| d as u64).product()
    }

    /// WGSL helpers shared by all kernels: batch offsets and the epilogue `finish(acc, m, n)`.
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
        if let Some(ep) = self.epilogue {
            s += &ep.wgsl;
            e = format!("epilogue_mn({e}, m, n)");
        }
        s += &format!("fn finish(acc: f32, m: u32, n: u32) -> f32 {{ return {e}; }}\n");
        s
    }

    fn input_names(&self) -> Vec<(&'static str, &OperandDescriptor)> {
        let mut v = vec![("a", self.a), ("b", self.b)];
        if let Some(c) = self.c {
            v.push(("c", c));
        }
        v.extend(self.epilogue.iter().flat_map(|ep| ep.names()));
        v
    }

    fn lower(&self) -> Result<Lowering> {
        let (m, n) = (self.m, self.n);
        let ([_, sak], [sbk, sbn]) = (self.a_strides, self.b_strides);
        let along_k = sak == 1 && sbk == 1;
        if n <= GEMV_ROWS && along_k {
            return self.dot_for(Regs { wx: 1, wy: CPU_GEMV_THREADS, tm: 4, tn: 4 });
        }
        if m <= GEMV_ROWS && sbn == 1 {
            return match self.gemv_regs() {
                Some(r) => self.packed(|t, target| self.registers(r, t, target)),
                None => self.gemv(),
            };
        }
        if m <= GEMV_ROWS && along_k {
            return self.dot_for(Regs { wx: CPU_GEMV_THREADS, wy: 1, tm: m, tn: 4 });
        }
        // On a CPU adapter the register kernel (ragged blocks masked) instead: a CPU runs the
        // direct kernel's workgroups of 256 invocations meeting at a barrier slowest of all.
        // A forced tile shape stands for a GPU (tests of the GPU path).
        let gpu = !self.device.cpu || shape_override("WEBNN_WGPU_MATMUL_TILES").is_some();
        if (m < DIRECT_BELOW || n < DIRECT_BELOW) && gpu {
            return Ok(Lowering::single(self.direct()?));
        }
        match self.choose_tiles() {
            Kernel::Tiles(t) => self.packed(|ty, target| self.tiled(t, ty, target)),
            Kernel::Regs(r) => self.packed(|ty, target| self.registers(r, ty, target)),
        }
    }

    /// The dot kernel, or on a CPU adapter (or forced) dot products in registers with blocks
    /// shaped like `cpu`. A forced GEMV shape forces the dot kernel too (tests of the GPU path).
    fn dot_for(&self, cpu: Regs) -> Result<Lowering> {
        match self.regs_override() {
            Some(r) => self.packed(|t, target| self.dots(Regs { tm: r.tm.min(cpu.tm), ..r }, t, target)),
            None if self.device.cpu && shape_override("WEBNN_WGPU_GEMV").is_none() => {
                self.packed(|t, target| self.dots(cpu, t, target))
            }
            None => Ok(Lowering::single(self.dot()?)),
        }
    }

    /// One launch of a kernel writing whole quads (`kernel(out_type, target)`) to the output. A
    /// float16 word holds two neighbouring outputs; with an odd N they can fall to different
    /// invocations, so then the kernel writes f32 to scratch and a second launch packs the words.
    fn packed(&self, kernel: impl Fn(DataType, BufRef) -> Result<Launch>) -> Result<Lowering> {
        if self.data_type != DataType::Float16 || self.n.is_multiple_of(2) {
            return Ok(Lowering::single(kernel(self.data_type, BufRef::Output(0))?));
        }
        let scratch = OperandDescriptor::new(DataType::Float32, self.out.shape.clone());
        let first = kernel(DataType::Float32, BufRef::Scratch(0))?;
        let mut pack = ElementwiseKernel {
            inputs: vec![("s", &scratch)],
            output: self.out,
            helpers: String::new(),
            body: "    return load_s(i);".into(),
        }
        .build()?;
        pack.reads = vec![BufRef::Scratch(0)];
        Ok(Lowering::Kernels { scratch: vec![crate::ops::wgsl::buffer_size(&scratch)], launches: vec![first, pack] })
    }

    /// The largest tile (for the adapter kind) that still gives enough workgroups; the smallest
    /// that fits the device's limits otherwise. CPU adapters use the register kernel.
    fn choose_tiles(&self) -> Kernel {
        let d = &self.device;
        if let Some(v) = shape_override("WEBNN_WGPU_MATMUL_TILES") {
            if let [wx, wy, tm, tn, bk] = v[..] {
                let t = Tiles::new(wx, wy, tm, tn, bk);
                if t.fits(d) {
                    return Kernel::Tiles(t);
                }
            }
        }
        if let Some(r) = self.regs_override() {
            return Kernel::Regs(r);
        }
        if d.cpu {
            return Kernel::Regs(CPU_REGS);
        }
        let groups = |t: &Tiles| self.m.div_ceil(t.bm()) as u64 * self.n.div_ceil(t.bn()) as u64 * self.batch_count();
        let fitting: Vec<Tiles> = GPU_TILES.iter().copied().filter(|t| t.fits(d)).collect();
        // WebGPU's minimum limits (256 invocations, 16 KiB) fit every listed shape; the register
        // kernel (64 invocations, no workgroup memory) would fit any device.
        let t = fitting.iter().copied().find(|t| groups(t) >= GPU_MIN_GROUPS).or(fitting.last().copied());
        t.map_or(Kernel::Regs(CPU_REGS), Kernel::Tiles)
    }

    /// Reduce through subgroup operations: the device has them, unless `WEBNN_WGPU_SUBGROUPS=0`
    /// (a benchmarking and test switch; it cannot turn them on where the device lacks them).
    fn subgroups(&self) -> bool {
        let off = cfg!(not(target_arch = "wasm32")) && std::env::var("WEBNN_WGPU_SUBGROUPS").is_ok_and(|v| v.trim() == "0");
        self.device.subgroups && !off
    }

    fn regs_override(&self) -> Option<Regs> {
        match shape_override("WEBNN_WGPU_MATMUL_REGS")?[..] {
            [wx, wy, tm, tn] if wx > 0 && wy > 0 && tm > 0 && tn > 0 && tn % 4 == 0 => {
                (wx * wy <= self.device.invocations).then_some(Regs { wx, wy, tm, tn })
            }
            _ => None,
        }
    }

    /// The register kernel for M <= 8 (every row in one invocation) on a CPU adapter, where the
    /// GEMV kernel's reduction through workgroup memory costs more than it gains; `None` for the
    /// GEMV kernel (a GPU, or its shape forced).
    fn gemv_regs(&self) -> Option<Regs> {
        if shape_override("WEBNN_WGPU_GEMV").is_some() {
            return None;
        }
        if let Some(r) = self.regs_override() {
            return Some(Regs { wy: 1, tm: self.m, ..r });
        }
        self.device.cpu.then_some(Regs { wx: CPU_GEMV_THREADS, wy: 1, tm: self.m, tn: CPU_GEMV_COLS })
    }

    fn choose_gemv(&self) -> Gemv {
        let (n, k) = (self.n, self.k);
        if let Some(v) = shape_override("WEBNN_WGPU_GEMV") {
            if let [wx, wk, splits] = v[..] {
                if wx > 0 && wk > 0 && splits > 0 && wx * wk <= self.device.invocations {
                    return Gemv { wx, wk, splits: splits.min(k.max(1)) };
                }
            }
        }
        // 64 invocations along N (256 columns) by 4 along K; narrower outputs (attention's
        // probabilities x values, N = head_dim) give the idle columns' invocations to K: at N = 32
        // one 8x32 workgroup instead of 8 busy lanes of 64x4 (H200, [2,4,256]x[2,256,32]: 16.3 -> 7.7 µs).
        let wx = n.div_ceil(4).next_power_of_two().clamp(1, 64);
        let wk = (256 / wx).min(64).min(self.device.invocations / wx).max(1);
        let col_groups = n.div_ceil(4 * wx) as u64 * self.batch_count();
        // Each split keeps at least 64 rows of K per invocation row, so the partial sums stay
        // a small fraction of the traffic.
        let splits = (GPU_GEMV_GROUPS / col_groups.max(1)).clamp(1, (k / (wk * 64)).max(1) as u64) as u32;
        Gemv { wx, wk, splits }
    }

    /// Bindings of `a` and `b` (as `access` says), `c`, then `out` of `out_type` (as vec4s when
    /// `out_vec`), the shared helpers and `store(c, row, col, o)`, which writes the 4 outputs at
    /// `(row, col..col + 4)` of the matrix at element `o`, skipping those out of range.
    fn prologue(&self, access: [(bool, bool); 2], out_type: DataType, out_vec: bool) -> Result<String> {
        let mut src = String::from(F16_HELPERS);
        let names = self.input_names();
        for (index, (name, d)) in names.iter().enumerate() {
            src += &match index {
                0 | 1 => operand_access(index, name, d.data_type, access[index].0, access[index].1)?,
                _ => binding(index, name, d.data_type, false) + &load_fn(name, d.data_type)?,
            };
        }
        let index = names.len();
        if out_vec {
            src += &format!("@group(0) @binding({index}) var<storage, read_write> out4: array<vec4<f32>>;\n");
        } else {
            src += &binding(index, "out", out_type, true);
        }
        src += &self.helpers();
        let (m, n) = (self.m, self.n);
        let body = if out_vec {
            format!(
                "if (row < {m}u && col < {n}u) {{ out4[(o + row * {n}u + col) >> 2u] = vec4<f32>(finish(c.x, row, col), \
                 finish(c.y, row, col + 1u), finish(c.z, row, col + 2u), finish(c.w, row, col + 3u)); }}"
            )
        } else if out_type == DataType::Float16 {
            // N is even: each pair of outputs is one whole word.
            format!(
                "for (var p = 0u; p < 4u; p += 2u) {{ if (row < {m}u && col + p < {n}u) {{ \
                 out[(o + row * {n}u + col + p) >> 1u] = f32_to_f16(finish(c[p], row, col + p)) | (f32_to_f16(finish(c[p + 1u], row, col + p + 1u)) << 16u); }} }}"
            )
        } else {
            format!(
                "for (var e = 0u; e < 4u; e++) {{ if (row < {m}u && col + e < {n}u) {{ out[o + row * {n}u + col + e] = finish(c[e], row, col + e); }} }}"
            )
        };
        src += &format!("fn store(c: vec4<f32>, row: u32, col: u32, o: u32) {{ {body} }}\n");
        Ok(src)
    }

    fn reads(&self) -> Vec<BufRef> {
        (0..self.input_names().len()).map(BufRef::Input).collect()
    }

    fn groups_fit(&self, groups: u64) -> Result<()> {
        if groups > u32::MAX as u64 {
            return Err(Error::Operation(format!("matmul: {groups} workgroups do not fit a 32-bit index")));
        }
        Ok(())
    }

    /// Register-blocked tiles: each invocation accumulates `tm x tn` outputs in vec4 registers
    /// from `bk`-deep tiles of A and B that the workgroup loads in quads (vec4 for aligned
    /// float32) into workgroup memory, A transposed so an invocation reads its rows as vec4s.
    /// When M, N and K are tile multiples no load or store is bounds-checked.
    fn tiled(&self, t: Tiles, out_type: DataType, target: BufRef) -> Result<Launch> {
        let (m, n, k) = (self.m, self.n, self.k);
        let [sam, sak] = self.a_strides;
        let [sbk, sbn] = self.b_strides;
        let (bm, bn, bk, threads) = (t.bm(), t.bn(), t.bk, t.threads());
        let (bm4, bn4, bk4) = (bm / 4, bn / 4, bk / 4);
        let (a_k, b_n) = (sak == 1, sbn == 1);
        let a_al = if a_k { k % 4 == 0 } else { m % 4 == 0 };
        let b_al = if b_n { n % 4 == 0 } else { k % 4 == 0 };
        let checked = m % bm != 0 || n % bn != 0 || k % bk != 0;
        let tiles_n = n.div_ceil(bn) as u64;
        let per_batch = m.div_ceil(bm) as u64 * tiles_n;
        let groups = per_batch * self.batch_count();
        self.groups_fit(groups)?;
        let out_vec = out_type == DataType::Float32 && n % 4 == 0;
        let mut src = self.prologue([(true, a_al), (true, b_al)], out_type, out_vec)?;

        let loads = |total: u32, body: &dyn Fn() -> String| {
            let mut s = String::new();
            for r in 0..total.div_ceil(threads) {
                let guard = (r + 1) * threads > total;
                s += &format!("        {{\n            let q = lid + {}u;\n", r * threads);
                if guard {
                    s += &format!("            if (q < {total}u) {{\n");
                }
                s += &body();
                if guard {
                    s += "            }\n";
                }
                s += "        }\n";
            }
            s
        };
        let load_a = loads(bm * bk4, &|| {
            if a_k {
                let v = quad("a", a_al, checked, "ab + gm * SAMu + gk", &format!("gm < {m}u"), "gk", k);
                let mut s = format!(
                    "            let row = q / {bk4}u; let kq = (q % {bk4}u) * 4u; let gm = m0 + row; let gk = k0 + kq;\n\
                     \x20           let v = {};\n",
                    v.replace("SAM", &sam.to_string())
                );
                for (i, c) in XYZW.iter().enumerate() {
                    s += &format!("            sa[(kq + {i}u) * {bm4}u + row / 4u][row % 4u] = v.{c};\n");
                }
                s
            } else {
                let v = quad("a", a_al, checked, &format!("ab + gk * {sak}u + gm"), &format!("gk < {k}u"), "gm", m);
                format!(
                    "            let kk = q / {bm4}u; let mq = (q % {bm4}u) * 4u; let gm = m0 + mq; let gk = k0 + kk;\n\
                     \x20           sa[kk * {bm4}u + mq / 4u] = {v};\n"
                )
            }
        });
        let load_b = loads(bn * bk4, &|| {
            if b_n {
                let v = quad("b", b_al, checked, &format!("bb + gk * {sbk}u + gn"), &format!("gk < {k}u"), "gn", n);
                format!(
                    "            let kk = q / {bn4}u; let nq = (q % {bn4}u) * 4u; let gn = n0 + nq; let gk = k0 + kk;\n\
                     \x20           sb[kk * {bn4}u + nq / 4u] = {v};\n"
                )
            } else {
                let v = quad("b", b_al, checked, &format!("bb + gn * {sbn}u + gk"), &format!("gn < {n}u"), "gk", k);
                let mut s = format!(
                    "            let col = q / {bk4}u; let kq = (q % {bk4}u) * 4u; let gn = n0 + col; let gk = k0 + kq;\n\
                     \x20           let v = {v};\n"
                );
                for (i, c) in XYZW.iter().enumerate() {
                    s += &format!("            sb[(kq + {i}u) * {bn4}u + col / 4u][col % 4u] = v.{c};\n");
                }
                s
            }
        });
        let (qm, qn) = (t.tm / 4, t.tn / 4);
        let mut acc = String::new();
        let mut compute = String::new();
        let mut store = String::new();
        for i in 0..qm {
            for r in 0..4 {
                for j in 0..qn {
                    acc += &format!("    var c{i}_{r}_{j} = vec4<f32>(0.0);\n");
                    store += &format!(
                        "    store(c{i}_{r}_{j}, m0 + ({}u + ty) * 4u + {r}u, n0 + ({}u + tx) * 4u, o);\n",
                        i * t.wy,
                        j * t.wx
                    );
                }
            }
        }
        for kk in 0..bk {
            compute += "        {\n";
            for i in 0..qm {
                compute += &format!("            let a{i} = sa[{}u + ty];\n", kk * bm4 + i * t.wy);
            }
            for j in 0..qn {
                compute += &format!("            let b{j} = sb[{}u + tx];\n", kk * bn4 + j * t.wx);
            }
            for i in 0..qm {
                for (r, c) in XYZW.iter().enumerate() {
                    for j in 0..qn {
                        compute += &format!("            c{i}_{r}_{j} = fma(vec4<f32>(a{i}.{c}), b{j}, c{i}_{r}_{j});\n");
                    }
                }
            }
            compute += "        }\n";
        }
        src += &format!(
            r#"var<workgroup> sa: array<vec4<f32>, {sa_len}>;
var<workgroup> sb: array<vec4<f32>, {sb_len}>;
@compute @workgroup_size({threads})
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
    let g = wid.x + wid.y * nwg.x;
    if (g >= {groups}u) {{ return; }}
    let batch = g / {per_batch}u;
    let tile = g % {per_batch}u;
    let m0 = (tile / {tiles_n}u) * {bm}u;
    let n0 = (tile % {tiles_n}u) * {bn}u;
    let ab = a_base(batch);
    let bb = b_base(batch);
    let o = batch * {mn}u;
    let tx = lid % {wx}u;
    let ty = lid / {wx}u;
{acc}    for (var k0 = 0u; k0 < {k}u; k0 += {bk}u) {{
{load_a}{load_b}        workgroupBarrier();
{compute}        workgroupBarrier();
    }}
{store}}}
"#,
            sa_len = bk * bm4,
            sb_len = bk * bn4,
            wx = t.wx,
            mn = m as u64 * n as u64,
        );
        Ok(Launch {
            source: src,
            reads: self.reads(),
            writes: vec![target],
            invocations: groups * threads as u64,
            workgroup_size: threads,
        })
    }

    /// The register kernel, for CPU adapters (SwiftShader, llvmpipe run a workgroup's
    /// invocations as SIMD lanes of CPU threads, where barriers and workgroup memory cost more
    /// than the caches save): each invocation computes a `tm x tn` block straight from the
    /// operands, K in steps of 4 with A's rows read as quads along K (one load for all lanes,
    /// which share the rows) and B's as quads along N. Rows and columns past the edge read the
    /// last row or column, and `store` skips them, so the loop has no bounds checks.
    fn registers(&self, r: Regs, out_type: DataType, target: BufRef) -> Result<Launch> {
        let (m, n, k) = (self.m, self.n, self.k);
        let [sam, sak] = self.a_strides;
        let [sbk, sbn] = self.b_strides;
        let (bm, bn) = (r.wy * r.tm, r.wx * r.tn);
        let tiles_n = n.div_ceil(bn) as u64;
        let per_batch = m.div_ceil(bm) as u64 * tiles_n;
        let groups = per_batch * self.batch_count();
        self.groups_fit(groups)?;
        let a_vec = sak == 1 && k % 4 == 0;
        let b_vec = sbn == 1 && n % 4 == 0;
        let out_vec = out_type == DataType::Float32 && n % 4 == 0;
        let src = self.prologue([(a_vec, a_vec), (b_vec, b_vec)], out_type, out_vec)?;
        let qn = r.tn / 4;
        // A's 4 values along K from element `e`; B's 4 columns of row element `e` from column `c`.
        let quad_a = |e: &str| {
            if a_vec {
                format!("quad_a({e})")
            } else {
                format!("vec4<f32>({})", (0..4).map(|i| format!("load_a({e} + {}u)", i * sak)).collect::<Vec<_>>().join(", "))
            }
        };
        let quad_b = |e: &str, j: u32| {
            if b_vec {
                format!("quad_b({e} + cq{j})")
            } else {
                let l = (0..4).map(|i| format!("load_b({e} + min(c0 + {}u, {}u) * {sbn}u)", 4 * j + i, n.saturating_sub(1)));
                format!("vec4<f32>({})", l.collect::<Vec<_>>().join(", "))
            }
        };
        let mut setup = String::new();
        let mut acc = String::new();
        let mut step = String::new();
        let mut tail = String::new();
        let mut store = String::new();
        for i in 0..r.tm {
            setup += &format!("    let ra{i} = ab + min(r0 + {i}u, {}u) * {sam}u;\n", m.saturating_sub(1));
        }
        if b_vec {
            for j in 0..qn {
                setup += &format!("    let cq{j} = min(c0 + {}u, {}u);\n", 4 * j, n.saturating_sub(4));
            }
        }
        for i in 0..r.tm {
            for j in 0..qn {
                acc += &format!("    var c{i}_{j} = vec4<f32>(0.0);\n");
                store += &format!("    store(c{i}_{j}, r0 + {i}u, c0 + {}u, o);\n", 4 * j);
            }
        }
        for i in 0..r.tm {
            step += &format!("        let a{i} = {};\n", quad_a(&format!("ra{i} + k * {sak}u")));
        }
        for kk in 0..4 {
            for j in 0..qn {
                step += &format!("        let b{kk}_{j} = {};\n", quad_b(&format!("bb + (k + {kk}u) * {sbk}u"), j));
            }
        }
        for (kk, c) in XYZW.iter().enumerate() {
            for i in 0..r.tm {
                for j in 0..qn {
                    step += &format!("        c{i}_{j} = c{i}_{j} + a{i}.{c} * b{kk}_{j};\n");
                }
            }
        }
        if k % 4 != 0 {
            for i in 0..r.tm {
                tail += &format!("        let a{i} = load_a(ra{i} + k * {sak}u);\n");
            }
            for j in 0..qn {
                tail += &format!("        let b{j} = {};\n", quad_b(&format!("bb + k * {sbk}u"), j));
            }
            for i in 0..r.tm {
                for j in 0..qn {
                    tail += &format!("        c{i}_{j} = c{i}_{j} + a{i} * b{j};\n");
                }
            }
            tail = format!("    for (var k = {}u; k < {k}u; k++) {{\n{tail}    }}\n", k - k % 4);
        }
        self.register_launch(r, src, [&setup, &acc, &step, &tail, &store], target)
    }

    /// Dot products in registers when A and B are both contiguous along K (gemm with bTranspose,
    /// N = 1), for CPU adapters: each invocation sums a `tm x tn` block over K in quads, with no
    /// reduction across invocations. Edge rows and columns read the last one and are not stored;
    /// columns past N in every block are not computed.
    fn dots(&self, r: Regs, out_type: DataType, target: BufRef) -> Result<Launch> {
        let (m, n, k) = (self.m, self.n, self.k);
        let [sam, _] = self.a_strides;
        let [_, sbn] = self.b_strides;
        let (bm, bn) = (r.wy * r.tm, r.wx * r.tn);
        let tiles_n = n.div_ceil(bn) as u64;
        let per_batch = m.div_ceil(bm) as u64 * tiles_n;
        let groups = per_batch * self.batch_count();
        self.groups_fit(groups)?;
        let al = k % 4 == 0;
        let out_vec = out_type == DataType::Float32 && n % 4 == 0;
        let src = self.prologue([(al, al), (al, al)], out_type, out_vec)?;
        let quad = |name: &str, e: String| {
            if al {
                format!("quad_{name}({e})")
            } else {
                format!("vec4<f32>({})", (0..4).map(|i| format!("load_{name}({e} + {i}u)")).collect::<Vec<_>>().join(", "))
            }
        };
        let cols: Vec<u32> = (0..r.tn).filter(|&j| j < n).collect();
        let mut setup = String::new();
        let mut acc = String::new();
        let mut step = String::new();
        let mut tail = String::new();
        let mut store = String::new();
        for i in 0..r.tm {
            setup += &format!("    let ra{i} = ab + min(r0 + {i}u, {}u) * {sam}u;\n", m.saturating_sub(1));
            step += &format!("        let a{i} = {};\n", quad("a", format!("ra{i} + k")));
            tail += &format!("        let a{i} = load_a(ra{i} + k);\n");
        }
        for &j in &cols {
            setup += &format!("    let rb{j} = bb + min(c0 + {j}u, {}u) * {sbn}u;\n", n.saturating_sub(1));
            step += &format!("        let b{j} = {};\n", quad("b", format!("rb{j} + k")));
            tail += &format!("        let b{j} = load_b(rb{j} + k);\n");
        }
        for i in 0..r.tm {
            for &j in &cols {
                acc += &format!("    var s{i}_{j} = vec4<f32>(0.0);\n");
                step += &format!("        s{i}_{j} = s{i}_{j} + a{i} * b{j};\n");
                tail += &format!("        s{i}_{j}.x = s{i}_{j}.x + a{i} * b{j};\n");
            }
            for q in 0..r.tn.div_ceil(4) {
                let v = (4 * q..4 * q + 4)
                    .map(|j| if cols.contains(&j) { format!("dot(s{i}_{j}, vec4<f32>(1.0))") } else { "0.0".into() });
                store += &format!("    store(vec4<f32>({}), r0 + {i}u, c0 + {}u, o);\n", v.collect::<Vec<_>>().join(", "), 4 * q);
            }
        }
        let tail = if k % 4 == 0 { String::new() } else { format!("    for (var k = {}u; k < {k}u; k++) {{\n{tail}    }}\n", k - k % 4) };
        self.register_launch(r, src, [&setup, &acc, &step, &tail, &store], target)
    }

    /// The `main` of the register kernels ([`registers`](Self::registers),
    /// [`dots`](Self::dots)) after `src`'s declarations: each invocation's `tm x tn` block of its
    /// workgroup's tile, then `setup`, `acc`, the K loop over quads (`step`), `tail` and `store`.
    fn register_launch(&self, r: Regs, mut src: String, parts: [&str; 5], target: BufRef) -> Result<Launch> {
        let (m, n, k) = (self.m, self.n, self.k);
        let (bm, bn, threads) = (r.wy * r.tm, r.wx * r.tn, r.wx * r.wy);
        let tiles_n = n.div_ceil(bn) as u64;
        let per_batch = m.div_ceil(bm) as u64 * tiles_n;
        let groups = per_batch * self.batch_count();
        let [setup, acc, step, tail, store] = parts;
        src += &format!(
            r#"@compute @workgroup_size({threads})
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
    let g = wid.x + wid.y * nwg.x;
    if (g >= {groups}u) {{ return; }}
    let batch = g / {per_batch}u;
    let tile = g % {per_batch}u;
    let r0 = (tile / {tiles_n}u) * {bm}u + (lid / {wx}u) * {tm}u;
    let c0 = (tile % {tiles_n}u) * {bn}u + (lid % {wx}u) * {tn}u;
    if (r0 >= {m}u || c0 >= {n}u) {{ return; }}
    let ab = a_base(batch);
    let bb = b_base(batch);
    let o = batch * {mn}u;
{setup}{acc}    for (var k = 0u; k < {k4}u; k += 4u) {{
{step}    }}
{tail}{store}}}
"#,
            wx = r.wx,
            tm = r.tm,
            tn = r.tn,
            k4 = k - k % 4,
            mn = m as u64 * n as u64,
        );
        Ok(Launch {
            source: src,
            reads: self.reads(),
            writes: vec![target],
            invocations: groups * threads as u64,
            workgroup_size: threads,
        })
    }

    /// GEMV for M <= 8 with B contiguous along N: each invocation owns 4 neighbouring columns
    /// (coalesced quad loads of a row of B) and every row of A, and sums a strided share of K;
    /// the workgroup adds its K shares in workgroup memory. With K split over several
    /// workgroups, the partial sums go to scratch and a second launch adds them.
    fn gemv(&self) -> Result<Lowering> {
        let (m, n, k) = (self.m, self.n, self.k);
        let [sam, sak] = self.a_strides;
        let [sbk, _] = self.b_strides;
        let g = self.choose_gemv();
        let (wx, wk) = (g.wx, g.wk);
        let threads = wx * wk;
        let kc = k.div_ceil(g.splits).max(1);
        let splits = k.div_ceil(kc).max(1);
        let col_groups = n.div_ceil(4 * wx) as u64;
        let groups = col_groups * self.batch_count() * splits as u64;
        self.groups_fit(groups)?;
        let b_al = n % 4 == 0;
        // One pass stores finished outputs; float16 with an odd N needs the second pass's packing.
        let two_pass = splits > 1 || (self.data_type == DataType::Float16 && n % 2 == 1);
        let out_vec = !two_pass && self.data_type == DataType::Float32 && b_al;
        let out_type = if two_pass { DataType::Float32 } else { self.data_type };
        let mut src = self.prologue([(false, false), (true, b_al)], out_type, out_vec)?;
        let qb = |kk: &str| quad("b", b_al, false, &format!("bb + ({kk}) * {sbk}u + col"), "", "", 0);
        let qb = |kk: &str| if b_al { qb(kk) } else { format!("quadn_b(bb + ({kk}) * {sbk}u + col, {n}u - col)") };
        let fma_rows = |bv: &str, kk: &str| {
            (0..m)
                .map(|r| format!("            acc{r} = fma(vec4<f32>(load_a(ab + {} + ({kk}) * {sak}u)), {bv}, acc{r});\n", r * sam))
                .collect::<String>()
        };
        // With subgroups, a column's K shares are neighbouring invocations (a subgroup reads whole
        // rows of B, several K rows at once) summed in the subgroup; each subgroup's sums (one per
        // column when it spans several) meet in workgroup memory behind a single barrier. A
        // subgroup holds at least 4 invocations, so `red` needs a slot per min(wk, 4) of them.
        let per_slot = wk.min(4);
        let sub = self.subgroups() && wk.is_power_of_two() && 16 * m * threads / per_slot <= self.device.workgroup_storage;
        let slots = threads / per_slot;
        let mut decl = String::new();
        let mut reduce = String::new();
        let mut write = String::new();
        let rows = self.batch_count() * m as u64;
        if sub {
            reduce += &format!("    let step = min({wk}u, sg);\n    let lead = tk % step == 0u;\n");
        }
        for r in 0..m {
            decl += &format!("    var acc{r} = vec4<f32>(0.0);\n    var res{r} = vec4<f32>(0.0);\n");
            reduce += &if sub {
                format!("    let s{r} = subgroup_sum_vec4f(acc{r}, sg);\n    if (lead) {{ red[{o} + lid / step] = s{r}; }}\n", o = r * slots)
            } else {
                format!(
                    "    red[lid] = acc{r};\n    workgroupBarrier();\n\
                     \x20   if (tk == 0u) {{ res{r} = red[tx]; for (var j = 1u; j < {wk}u; j++) {{ res{r} = res{r} + red[j * {wx}u + tx]; }} }}\n\
                     \x20   workgroupBarrier();\n"
                )
            };
            write += &if two_pass {
                format!(
                    "        for (var e = 0u; e < 4u; e++) {{ if (col + e < {n}u) {{ out[(split * {rows}u + batch * {m}u + {r}u) * {n}u + col + e] = res{r}[e]; }} }}\n"
                )
            } else {
                format!("        store(res{r}, {r}u, col, batch * {mn}u);\n", mn = m as u64 * n as u64)
            };
        }
        let mut unrolled = String::new();
        for u in 0..4 {
            unrolled += &format!("            let b{u} = {};\n", qb(&format!("kk + {}u", u * wk)));
        }
        for u in 0..4 {
            unrolled += &fma_rows(&format!("b{u}"), &format!("kk + {}u", u * wk));
        }
        if sub {
            reduce += "    workgroupBarrier();\n    if (tk == 0u) {\n";
            for r in 0..m {
                reduce += &format!(
                    "        res{r} = red[{o} + lid / step];\n        for (var j = 1u; j < {wk}u / step; j++) {{ res{r} = res{r} + red[{o} + lid / step + j]; }}\n",
                    o = r * slots
                );
            }
            reduce += "    }\n";
            src += &subgroup_sum_fn("vec4f", wk);
        }
        let (red_len, sg_arg, tx, tk) = if sub {
            (m * slots, ", @builtin(subgroup_size) sg: u32", format!("lid / {wk}u"), format!("lid % {wk}u"))
        } else {
            (threads, "", format!("lid % {wx}u"), format!("lid / {wx}u"))
        };
        src += &format!(
            r#"var<workgroup> red: array<vec4<f32>, {red_len}>;
@compute @workgroup_size({threads})
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>{sg_arg}) {{
    let g = wid.x + wid.y * nwg.x;
    if (g >= {groups}u) {{ return; }}
    let split = g % {splits}u;
    let rest = g / {splits}u;
    let batch = rest / {col_groups}u;
    let tx = {tx};
    let tk = {tk};
    let col = ((rest % {col_groups}u) * {wx}u + tx) * 4u;
    let ab = a_base(batch);
    let bb = b_base(batch);
    let ke = min(split * {kc}u + {kc}u, {k}u);
{decl}    if (col < {n}u) {{
        var kk = split * {kc}u + tk;
        for (; kk + {w3}u < ke; kk += {w4}u) {{
{unrolled}        }}
        for (; kk < ke; kk += {wk}u) {{
            let b0 = {q0};
{f0}        }}
    }}
{reduce}    if (tk == 0u && col < {n}u) {{
{write}    }}
}}
"#,
            w3 = 3 * wk,
            w4 = 4 * wk,
            q0 = qb("kk"),
            f0 = fma_rows("b0", "kk"),
        );
        let main = Launch {
            source: src,
            reads: self.reads(),
            writes: vec![if two_pass { BufRef::Scratch(0) } else { BufRef::Output(0) }],
            invocations: groups * threads as u64,
            workgroup_size: threads,
        };
        if !two_pass {
            return Ok(Lowering::single(main));
        }
        let count = self.out.element_count();
        let partial = OperandDescriptor::new(DataType::Float32, vec![(count * splits as u64).min(u32::MAX as u64) as u32]);
        let inputs: Vec<_> = std::iter::once(("s", &partial)).chain(self.input_names().into_iter().skip(2)).collect();
        let mut sum = ElementwiseKernel {
            inputs,
            output: self.out,
            helpers: self.helpers(),
            body: format!(
                "    var acc = 0.0;\n    for (var s = 0u; s < {splits}u; s++) {{ acc = acc + load_s(s * {count}u + i); }}\n\
                 \x20   return finish(acc, (i / {n}u) % {m}u, i % {n}u);"
            ),
        }
        .build()?;
        sum.reads = std::iter::once(BufRef::Scratch(0)).chain(self.reads().into_iter().skip(2)).collect();
        Ok(Lowering::Kernels { scratch: vec![crate::ops::wgsl::buffer_size(&partial)], launches: vec![main, sum] })
    }

    /// Dot products along K when A and B are both contiguous along K (N = 1, or gemm with
    /// bTranspose): a group of invocations per output reads both rows in coalesced quads and
    /// adds its partial sums in workgroup memory.
    fn dot(&self) -> Result<Launch> {
        let (m, n, k) = (self.m, self.n, self.k);
        let [sam, _] = self.a_strides;
        let [_, sbn] = self.b_strides;
        // A forced GEMV shape's `wk` (a power of two up to 128) also sets the lanes per output, so
        // tests reach every subgroup case (lanes narrower and wider than the subgroup).
        let forced = shape_override("WEBNN_WGPU_GEMV").and_then(|v| v.get(1).copied()).filter(|&l| l.is_power_of_two() && l <= 128);
        let lanes: u32 = forced.unwrap_or(if self.device.cpu { 8 } else { 32 });
        let threads = 256u32.min(self.device.invocations).max(2 * lanes);
        let per_group = threads / lanes;
        let count = self.out.element_count();
        let groups = count.div_ceil(per_group as u64);
        self.groups_fit(groups)?;
        let al = k % 4 == 0;
        let mut src = self.prologue([(true, al), (true, al)], self.data_type, false)?;
        let qa = quad("a", al, false, "ae + q", "true", "q", k);
        let qb = quad("b", al, false, "be + q", "true", "q", k);
        // With subgroups, each subgroup sums its lanes' shares (per output when it spans several),
        // the sums meet in workgroup memory, and each output's total is shared for the float16
        // pairs: two barriers in all, against one per halving of `lanes` through workgroup memory.
        let sub = self.subgroups();
        let mut tree = String::new();
        let (total, next) = if sub {
            src += &subgroup_sum_fn("f32", lanes);
            tree += &format!(
                "    let step = min({lanes}u, sg);\n    let x = subgroup_sum_f32(red_in, sg);\n    if (t % step == 0u) {{ red[lid / step] = x; }}\n    workgroupBarrier();\n\
                 \x20   if (t == 0u) {{ var y = red[lid / step]; for (var j = 1u; j < {lanes}u / step; j++) {{ y = y + red[lid / step + j]; }} tot[r] = y; }}\n    workgroupBarrier();\n"
            );
            ("tot[r]", "tot[r + 1u]".to_string())
        } else {
            tree += "    red[lid] = red_in;\n    workgroupBarrier();\n";
            let mut stride = lanes / 2;
            while stride > 0 {
                tree += &format!("    if (t < {stride}u) {{ red[lid] = red[lid] + red[lid + {stride}u]; }}\n    workgroupBarrier();\n");
                stride /= 2;
            }
            ("red[lid]", format!("red[lid + {lanes}u]"))
        };
        let store = if self.data_type == DataType::Float16 {
            format!(
                "if (r % 2u == 0u) {{\n        var word = f32_to_f16(finish({total}, c.y, c.z));\n\
                 \x20       if (oi + 1u < {count}u) {{ let c1 = coords_out(oi + 1u); word = word | (f32_to_f16(finish({next}, c1.y, c1.z)) << 16u); }}\n\
                 \x20       out[oi >> 1u] = word;\n    }}"
            )
        } else {
            format!("out[oi] = finish({total}, c.y, c.z);")
        };
        // A subgroup holds at least 4 invocations: a slot per min(lanes, 4) of them.
        let (decl, sg_arg) = if sub {
            let len = threads / lanes.min(4);
            (format!("var<workgroup> red: array<f32, {len}>;\nvar<workgroup> tot: array<f32, {per_group}>;"), ", @builtin(subgroup_size) sg: u32")
        } else {
            (format!("var<workgroup> red: array<f32, {threads}>;"), "")
        };
        src += &format!(
            r#"fn coords_out(i: u32) -> vec3<u32> {{ let r = i / {n}u; return vec3<u32>(r / {m}u, r % {m}u, i % {n}u); }}
{decl}
@compute @workgroup_size({threads})
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>{sg_arg}) {{
    let g = wid.x + wid.y * nwg.x;
    if (g >= {groups}u) {{ return; }}
    let r = lid / {lanes}u;
    let t = lid % {lanes}u;
    let oi = g * {per_group}u + r;
    let c = coords_out(oi);
    var s = vec4<f32>(0.0);
    if (oi < {count}u) {{
        let ae = a_base(c.x) + c.y * {sam}u;
        let be = b_base(c.x) + c.z * {sbn}u;
        for (var q = t * 4u; q < {k}u; q += {step}u) {{ s = fma({qa}, {qb}, s); }}
    }}
    let red_in = s.x + s.y + s.z + s.w;
{tree}    if (t == 0u && oi < {count}u) {{
    {store}
    }}
}}
"#,
            step = 4 * lanes,
        );
        Ok(Launch {
            source: src,
            reads: self.reads(),
            writes: vec![BufRef::Output(0)],
            invocations: groups * threads as u64,
            workgroup_size: threads,
        })
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
        let mut src = self.prologue([(false, false), (false, false)], self.data_type, false)?;
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

}


pub fn lower_matmul(cx: &LowerContext, epilogue: Option<&Epilogue>) -> Result<Lowering> {
    let (a, b, out) = (cx.inputs[0], cx.inputs[1], cx.outputs[0]);
    let (ra, rb, ro) = (a.rank(), b.rank(), out.rank());
    let (m, k, n) = (a.shape[ra - 2], a.shape[ra - 1], b.shape[rb - 1]);
    Product {
        data_type: out.data_type,
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
        device: cx.device,
        epilogue,
    }
    .lower()
}

pub fn lower_gemm(o: &GemmOptions, cx: &LowerContext, epilogue: Option<&Epilogue>) -> Result<Lowering> {
    let (a, b, out) = (cx.inputs[0], cx.inputs[1], cx.outputs[0]);
    let (sa, sb) = gemm_shapes(o, a, b);
    let (m, k, n) = (sa[0], sa[1], sb[1]);
    let t = a.data_type;
    Product {
        data_type: out.data_type,
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
        device: cx.device,
        epilogue,
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
