//! matmul and gemm.
//!
//! Both lower to one matrix-product generator:
//! `out[batch, m, n] = alpha * sum_k A[m, k] * B[k, n] + beta * C[m, n]`, with A and B read
//! through strides (which covers gemm's transposes) and batch offsets broadcast from the output's
//! batch index (matmul). Accumulation is in f32 for float32 and
//! float16 alike (float16 stored packed two to a u32 word, so no `shader-f16` is needed). Kernels,
//! chosen by shape and adapter, one file each:
//! - tiled (`tiles.rs`; M, N >= 16), on a GPU: register-blocked tiles of A and B in workgroup
//!   memory, loaded in quads (vec4 for aligned float32), each invocation accumulating a `tm x tn`
//!   block in vec4 registers with the k-loop unrolled; no bounds checks when M, N, K divide the
//!   tile. 128x128 tiles (8x8 per invocation) when they give enough workgroups, else 64x64.
//!   Forced (`WEBNN_WGPU_MATMUL_SPLITS`, natively: the WGSL lab's variants), the tiles share K
//!   over several workgroups and a second launch adds the partial sums: for products with too
//!   few large tiles (1024^3), not chosen by default until a GPU run has timed it.
//! - registers (`registers.rs`; M, N >= 16, and M <= 8 with B contiguous along N), on a CPU-
//!   emulated adapter (SwiftShader, llvmpipe: a workgroup's invocations are SIMD lanes of a CPU
//!   thread, barriers and workgroup memory are slow, caches are large): no workgroup memory, each
//!   invocation an 8x8 block (or all M <= 8 rows by 8 columns) straight from the operands, K in
//!   quads.
//! - GEMV (`gemv.rs`; M <= 8, B contiguous along N: token decoding), on a GPU: coalesced quad loads
//!   across N, K split over the workgroup's invocations and over workgroups (partial sums added by
//!   a second launch), so the weight is streamed once at memory bandwidth.
//! - dot (`dot.rs`; A and B contiguous along K: N = 1, or gemm with bTranspose and small M): on a
//!   GPU a group of invocations per output, reduced in workgroup memory; on a CPU adapter each
//!   invocation sums its own block of outputs along K in quads.
//! - direct (`direct.rs`): the remaining small shapes (9..15 rows, or 2..8 columns with B strided
//!   along K): each output word summed by 8 invocations over interleaved slices of K.
//!
//! With subgroup operations (the device's `SUBGROUP` feature, unless `WEBNN_WGPU_SUBGROUPS=0`)
//! the GEMV and dot kernels sum an output's K shares inside each subgroup (`subgroup_sum_fn`:
//! `subgroupAdd`, or a `subgroupShuffleXor` butterfly when the subgroup spans several outputs)
//! and only the per-subgroup sums meet in workgroup memory, behind one barrier; the subgroup
//! size (4..128) is read at run time. The GEMV kernel then lays a column's K shares on
//! neighbouring invocations, so a subgroup still reads whole rows of B (several K rows at once).
//!
//! Every kernel applies `finish(acc, m, n)` (alpha, beta * C) to each output, most of them
//! through `store(quad, row, col, o)`: the place an epilogue goes. Every kernel finds B through
//! `b_base(batch)`: with B gathered from a stack ([`Gathered`]) that adds the gathered index's
//! offset, so the kernel reads the stack in place of a copy of one of its entries.

mod direct;
mod dot;
mod gemv;
mod registers;
mod tiles;

use crate::error::{Error, Result};
use crate::operand::{broadcast_shapes, is_unidirectionally_broadcastable, MAX_RANK};
use crate::operand::{DataType, OperandDescriptor};
use crate::ops::fusion::Epilogue;
use crate::ops::limits::{self, OpLimits, FLOATS};
use crate::ops::reference::{coords, round_to, HostTensor};
use crate::ops::wgsl::{
    binding, broadcast_offset_fn, coords_fn, elements_per_word, literal, load_fn, BufRef, DeviceTraits, ElementwiseKernel,
    Launch, LowerRequest, Lowering, F16_HELPERS,
};
use crate::ops::{not_this_family, MethodOptions, Op, OpFamily};
use std::ops::RangeInclusive;

/// `MLGemmOptions`; `c` is passed as a third input when `has_c`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
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
    gathered: Option<Gathered<'a>>,
}

/// B as `gather(stack, indices, {axis: 0})` of one index (reshaped or not): the kernel binds the
/// stack in B's place and the indices after every other input (`bi`), and reads B from the entry
/// the index selects, clamped as gather clamps it.
#[derive(Clone, Copy)]
pub struct Gathered<'a> {
    /// The stack's first dimension.
    pub rows: u32,
    pub indices: &'a OperandDescriptor,
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
/// The tile for large products in a browser: 128x64, 8x8 per invocation, 128 invocations. Under
/// Dawn and Tint on an NVIDIA GPU the 128x128 tile that is fastest natively falls behind it from
/// 2048^3 up (BENCHMARKS.md, "The WGSL lab"); natively the two are level at 4096^3 and the
/// larger one ahead below, so native builds keep [`GPU_TILES`].
const BROWSER_LARGE_TILES: Tiles = Tiles::new(8, 16, 8, 8, 16);
/// Products of at least this many such tiles take [`BROWSER_LARGE_TILES`] (2048^3 and up);
/// smaller ones, whose browser timings did not favour it, choose from [`GPU_TILES`].
const BROWSER_LARGE_MIN_GROUPS: u64 = 512;
/// A kernel for the general (tiled) case: tiles with K split over this many workgroups, or
/// register blocks.
enum Kernel {
    Tiles(Tiles, u32),
    Regs(Regs),
}

/// The most bytes of partial sums a split of K may write.
const SPLIT_MAX_SCRATCH: u64 = 64 << 20;

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
/// with `WEBNN_WGPU_MATMUL_SPLITS=s` K split `s` ways where the tiles divide the product,
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
            // A quad of halves is one 8-byte load.
            DataType::Float16 => format!(
                "@group(0) @binding({index}) var<storage, read> {name}2: array<vec2<u32>>;\n\
                 fn quad_{name}(e: u32) -> vec4<f32> {{ let w = {name}2[e >> 2u]; return vec4<f32>(f16x2_to_f32(w.x), f16x2_to_f32(w.y)); }}\n"
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
        if let Some(g) = self.gathered {
            v.push(("bi", g.indices));
        }
        v
    }

    /// The inputs after A and B that `finish` reads (C and the epilogue's), and their bindings.
    fn finish_inputs(&self) -> (Vec<(&'static str, &OperandDescriptor)>, Vec<BufRef>) {
        let n = self.input_names().len() - 2 - self.gathered.is_some() as usize;
        (self.input_names().into_iter().skip(2).take(n).collect(), self.reads().into_iter().skip(2).take(n).collect())
    }

    /// `a_base(batch)` and `b_base(batch)`: where a batch's matrices start, B's in the gathered
    /// entry of its stack when gathered.
    fn bases(&self) -> String {
        let (mk, kn) = (self.m as u64 * self.k as u64, self.k as u64 * self.n as u64);
        let mut s = format!("fn a_base(batch: u32) -> u32 {{ return offset_abatch(coords_batch(batch)) * {mk}u; }}\n");
        let entry = match self.gathered {
            Some(g) => {
                s += &crate::ops::gather::position_fn(g.indices.data_type);
                let bits = if g.indices.data_type == DataType::Int64 { "vec2<u32>(bi[0], bi[1])" } else { "bi[0]" };
                format!(" + position({bits}, {}u) * {}u", g.rows, self.b.element_count())
            }
            None => String::new(),
        };
        s + &format!("fn b_base(batch: u32) -> u32 {{ return offset_bbatch(coords_batch(batch)) * {kn}u{entry}; }}\n")
    }

    fn lower(&self) -> Result<Lowering> {
        let (m, n) = (self.m, self.n);
        let ([_, a_stride_k], [b_stride_k, b_stride_n]) = (self.a_strides, self.b_strides);
        let along_k = a_stride_k == 1 && b_stride_k == 1;
        if n <= GEMV_ROWS && along_k {
            return self.dot_for(Regs { wx: 1, wy: CPU_GEMV_THREADS, tm: 4, tn: 4 });
        }
        if m <= GEMV_ROWS && b_stride_n == 1 {
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
            Kernel::Tiles(t, 1) => self.packed(|ty, target| self.tiled(t, 1, ty, target)),
            Kernel::Tiles(t, splits) => self.split_sum(self.tiled(t, splits, DataType::Float32, BufRef::Scratch(0))?, splits),
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
                    let forced = shape_override("WEBNN_WGPU_MATMUL_SPLITS").and_then(|v| v.first().copied()).unwrap_or(1);
                    return Kernel::Tiles(t, if forced > 1 && self.splits_fit(&t, forced) { forced } else { 1 });
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
        if cfg!(target_arch = "wasm32") && BROWSER_LARGE_TILES.fits(d) && groups(&BROWSER_LARGE_TILES) >= BROWSER_LARGE_MIN_GROUPS {
            return Kernel::Tiles(BROWSER_LARGE_TILES, 1);
        }
        let fitting: Vec<Tiles> = GPU_TILES.iter().copied().filter(|t| t.fits(d)).collect();
        // WebGPU's minimum limits (256 invocations, 16 KiB) fit every listed shape; the register
        // kernel (64 invocations, no workgroup memory) would fit any device.
        let t = fitting.iter().copied().find(|t| groups(t) >= GPU_MIN_GROUPS).or(fitting.last().copied());
        t.map_or(Kernel::Regs(CPU_REGS), |t| Kernel::Tiles(t, 1))
    }

    /// K can be split `splits` ways over tiles `t`: every tile whole (no bounds checks), every
    /// share a whole number of k-steps, the partial sums within [`SPLIT_MAX_SCRATCH`].
    fn splits_fit(&self, t: &Tiles, splits: u32) -> bool {
        let scratch = self.out.element_count() * splits as u64 * 4;
        self.m.is_multiple_of(t.bm()) && self.n.is_multiple_of(t.bn()) && self.k.is_multiple_of(t.bk * splits) && scratch <= SPLIT_MAX_SCRATCH
    }

    /// `main` wrote `splits` partial sums of every output to scratch 0 (float32, one output's
    /// worth after another); a second launch adds them and applies `finish`.
    fn split_sum(&self, main: Launch, splits: u32) -> Result<Lowering> {
        let (m, n) = (self.m, self.n);
        let count = self.out.element_count();
        let partial = OperandDescriptor::new(DataType::Float32, vec![(count * splits as u64).min(u32::MAX as u64) as u32]);
        let (finish_inputs, finish_reads) = self.finish_inputs();
        let inputs: Vec<_> = std::iter::once(("s", &partial)).chain(finish_inputs).collect();
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
        sum.reads = std::iter::once(BufRef::Scratch(0)).chain(finish_reads).collect();
        Ok(Lowering::Kernels { scratch: vec![crate::ops::wgsl::buffer_size(&partial)], launches: vec![main, sum] })
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
        // A float16 B (quads of halves widened in the kernel) streams fastest with 32 invocations
        // along N and 8 along K, natively and in Chromium alike (BENCHMARKS.md, "WGSL lab").
        let widest = if self.data_type == DataType::Float16 { 32 } else { 64 };
        let wx = n.div_ceil(4).next_power_of_two().clamp(1, widest);
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
                _ if *name == "bi" => format!("@group(0) @binding({index}) var<storage, read> bi: array<u32>;\n"),
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
        src += &self.bases();
        let (m, n) = (self.m, self.n);
        let body = if out_vec && self.epilogue.is_some() {
            // The epilogue once, in a loop over the lanes (see `registers`).
            format!(
                "if (row < {m}u && col < {n}u) {{ var v: vec4<f32>; for (var e = 0u; e < 4u; e++) {{ v[e] = finish(c[e], row, col + e); }} \
                 out4[(o + row * {n}u + col) >> 2u] = v; }}"
            )
        } else if out_vec {
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
}


pub fn lower_matmul(request: &LowerRequest, epilogue: Option<&Epilogue>, gathered: Option<Gathered>) -> Result<Lowering> {
    let (a, b, out) = (request.inputs[0], request.inputs[1], request.outputs[0]);
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
        device: request.device,
        epilogue,
        gathered,
    }
    .lower()
}

pub fn lower_gemm(
    o: &GemmOptions,
    request: &LowerRequest,
    epilogue: Option<&Epilogue>,
    gathered: Option<Gathered>,
) -> Result<Lowering> {
    let (a, b, out) = (request.inputs[0], request.inputs[1], request.outputs[0]);
    let (sa, sb) = gemm_shapes(o, a, b);
    let (m, k, n) = (sa[0], sa[1], sb[1]);
    let t = a.data_type;
    Product {
        data_type: out.data_type,
        a,
        b,
        c: if o.has_c { Some(request.inputs[2]) } else { None },
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
        device: request.device,
        epilogue,
        gathered,
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

/// The registry's entry for this file's operators (see [`OpFamily`]).
pub struct Family;

impl OpFamily for Family {
    fn limits(&self) -> Vec<OpLimits> {
        limits()
    }

    fn from_options(&self, name: &str, p: &dyn MethodOptions) -> Result<Op> {
        Ok(match name {
            "matmul" => Op::Matmul,
            "gemm" => Op::Gemm(GemmOptions {
                alpha: p.f64("alpha")?,
                beta: p.f64("beta")?,
                a_transpose: p.bool("aTranspose")?,
                b_transpose: p.bool("bTranspose")?,
                has_c: p.bool("c")?,
            }),
            other => return Err(crate::ops::unknown_method(other)),
        })
    }

    fn name(&self, op: &Op) -> &'static str {
        match op {
            Op::Matmul => "matmul",
            Op::Gemm(_) => "gemm",
            _ => "",
        }
    }

    fn input_count(&self, op: &Op) -> RangeInclusive<usize> {
        match op {
            Op::Matmul => 2..=2,
            Op::Gemm(o) => {
                let n = 2 + o.has_c as usize;
                n..=n
            }
            _ => 1..=1,
        }
    }

    fn validate(&self, op: &Op, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
        match op {
            Op::Matmul => validate_matmul(inputs),
            Op::Gemm(o) => validate_gemm(o, inputs),
            _ => Err(not_this_family(op)),
        }
    }

    fn lower(&self, op: &Op, request: &LowerRequest) -> Result<Lowering> {
        match op {
            Op::Matmul => lower_matmul(request, None, None),
            Op::Gemm(o) => lower_gemm(o, request, None, None),
            _ => Err(not_this_family(op)),
        }
    }

    fn reference(&self, op: &Op, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
        match op {
            Op::Matmul => reference_matmul(inputs, outputs),
            Op::Gemm(o) => reference_gemm(o, inputs, outputs),
            _ => Err(not_this_family(op)),
        }
    }
}
