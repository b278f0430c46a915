//! The demo Mixture-of-Experts model (www/models/moe) on the Rust core: the same graphs as
//! www/moe/moe_graphs.js, built with the core's builder. Weights come from the safetensors file
//! through the weight loader (float16 widened to float32 while streaming), so evicted experts
//! go to the "disk" tier; the KV cache lives in tensors; the router runs on the GPU and the
//! top-2 choice in host code, which then dispatches one graph per selected expert.
//!
//! Memory modes for the expert graphs (the other graphs, which every token runs, have the
//! `High` eviction priority, so a budget evicts experts first):
//! - `Resident`: every graph resident, no budget.
//! - `Fused`: every weight resident and the routing on the GPU: one graph a token picks the top-k
//!   experts (argMax, where), their softmax weights, and gathers the chosen experts' weights from
//!   per-layer stacks, so a token is one dispatch and one read back (www/moe's "fused").
//! - `Lru`: the context's memory budget = non-expert bytes + fraction x expert bytes; the runtime
//!   evicts the least recently dispatched graphs.
//! - `Explicit`: the caller manages it: `swap_in()` before an expert's use and, after each layer,
//!   `swap_out()` of the least recently used experts until the context is within the same budget.
//! - `Rebuild`: the standard API only, for experts that do not fit in memory: every expert use
//!   reads the expert's float16 bytes from the file, widens them to float32 on the CPU,
//!   `constant(desc, bytes)` for each weight, `build()`, dispatches and `destroy()`s the graph.
//!   Nothing is held between uses.
//! - `RebuildHost`: the same, but from float32 copies of every expert read once and held in host
//!   memory (all the expert bytes; the use case's experts would not fit there).

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::Path;
use std::rc::Rc;

use webnn_wgpu::graph::{DataType, GraphBuilder, Operand, OperandDescriptor};
use webnn_wgpu::memory::{EvictionPriority, Residency};
use webnn_wgpu::ops::activation::Activation;
use webnn_wgpu::ops::arg_min_max::{ArgKind, ArgMinMaxOptions};
use webnn_wgpu::ops::logical::LogicalOp;
use webnn_wgpu::ops::slice::SliceOptions;
use webnn_wgpu::ops::elementwise_binary::BinaryOp;
use webnn_wgpu::ops::elementwise_unary::UnaryOp;
use webnn_wgpu::ops::matmul::GemmOptions;
use webnn_wgpu::ops::reduce::{ReduceOp, ReduceOptions};
use webnn_wgpu::ops::Op;
use webnn_wgpu::backend::webgpu::{Context, ContextOptions, Graph, Tensor, TensorDescriptor};
use webnn_wgpu::weights::convert::convert_chunk;
use webnn_wgpu::weights::{FileSource, LoadOptions, Source, WeightFile};
use webnn_wgpu::{Error, Result};

/// Additive attention mask for cache rows after the current position.
const MASKED: f32 = -1e9;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Resident,
    /// Every weight resident and the routing on the GPU: one graph a token (see
    /// [`build_token_graph`]), one dispatch and one read back.
    Fused,
    Lru,
    /// `lru` with a `hostMemoryBudget` that holds every weight: evicted experts go to their
    /// host copies (the "host" tier) instead of their file.
    LruHost,
    Explicit,
    Rebuild,
    RebuildHost,
}

impl Mode {
    pub const ALL: [Mode; 7] =
        [Mode::Resident, Mode::Fused, Mode::Lru, Mode::LruHost, Mode::Explicit, Mode::Rebuild, Mode::RebuildHost];

    pub fn name(self) -> &'static str {
        match self {
            Mode::Resident => "resident",
            Mode::Fused => "fused",
            Mode::Lru => "lru",
            Mode::LruHost => "lru-host",
            Mode::Explicit => "explicit",
            Mode::Rebuild => "rebuild",
            Mode::RebuildHost => "rebuild-host",
        }
    }

    /// The standard-only baselines, which build an expert graph for every use.
    pub fn rebuilds(self) -> bool {
        matches!(self, Mode::Rebuild | Mode::RebuildHost)
    }

    pub fn from_name(name: &str) -> Result<Mode> {
        Mode::ALL
            .into_iter()
            .find(|m| m.name() == name)
            .ok_or_else(|| Error::Type(format!("mode '{name}': expected resident, fused, lru, lru-host, explicit, rebuild or rebuild-host")))
    }
}

/// config.json's model dimensions.
#[derive(Debug, Clone)]
pub struct Config {
    pub vocab: u32,
    pub d_model: u32,
    pub n_layers: u32,
    pub n_heads: u32,
    pub n_kv_heads: u32,
    pub head_dim: u32,
    pub d_ff: u32,
    pub n_experts: u32,
    pub top_k: u32,
    pub rope_theta: f64,
    pub norm_eps: f64,
    pub max_seq: u32,
}

impl Config {
    pub fn from_json(json: &serde_json::Value) -> Result<Config> {
        let int = |key: &str| -> Result<u32> {
            json.get(key)
                .and_then(|v| v.as_u64())
                .and_then(|v| u32::try_from(v).ok())
                .filter(|&v| v > 0)
                .ok_or_else(|| Error::Type(format!("config.json: '{key}' is missing or not a positive integer")))
        };
        let float = |key: &str| -> Result<f64> {
            json.get(key)
                .and_then(|v| v.as_f64())
                .ok_or_else(|| Error::Type(format!("config.json: '{key}' is missing or not a number")))
        };
        let c = Config {
            vocab: int("vocab")?,
            d_model: int("d_model")?,
            n_layers: int("n_layers")?,
            n_heads: int("n_heads")?,
            n_kv_heads: int("n_kv_heads")?,
            head_dim: int("head_dim")?,
            d_ff: int("d_ff")?,
            n_experts: int("n_experts")?,
            top_k: int("top_k")?,
            rope_theta: float("rope_theta")?,
            norm_eps: float("norm_eps")?,
            max_seq: int("max_seq")?,
        };
        if !c.n_heads.is_multiple_of(c.n_kv_heads) || !c.head_dim.is_multiple_of(2) || c.top_k > c.n_experts {
            return Err(Error::Type(format!(
                "config.json: n_heads {} must be a multiple of n_kv_heads {}, head_dim {} even, top_k {} <= n_experts {}",
                c.n_heads, c.n_kv_heads, c.head_dim, c.top_k, c.n_experts
            )));
        }
        Ok(c)
    }

    /// Tensor names and shapes the config promises (`[out, in]` for linear weights).
    pub fn expected_tensors(&self) -> Vec<(String, Vec<u64>)> {
        let (d, ff) = (self.d_model as u64, self.d_ff as u64);
        let (q, kv) = ((self.n_heads * self.head_dim) as u64, (self.n_kv_heads * self.head_dim) as u64);
        let mut want = vec![
            ("embed.weight".to_string(), vec![self.vocab as u64, d]),
            ("norm.weight".to_string(), vec![d]),
            ("lm_head.weight".to_string(), vec![self.vocab as u64, d]),
        ];
        for l in 0..self.n_layers {
            let p = format!("layers.{l}.");
            for (name, shape) in [
                ("attn_norm.weight", vec![d]),
                ("moe_norm.weight", vec![d]),
                ("attn.wq.weight", vec![q, d]),
                ("attn.wk.weight", vec![kv, d]),
                ("attn.wv.weight", vec![kv, d]),
                ("attn.wo.weight", vec![d, q]),
                ("moe.router.weight", vec![self.n_experts as u64, d]),
            ] {
                want.push((format!("{p}{name}"), shape));
            }
            for e in 0..self.n_experts {
                for (name, shape) in [("w1", vec![ff, d]), ("w3", vec![ff, d]), ("w2", vec![d, ff])] {
                    want.push((format!("{p}moe.experts.{e}.{name}.weight"), shape));
                }
            }
        }
        want
    }
}

/// A tensor's float32 bytes in host memory, with its shape.
type HostCopy = Rc<(Vec<u32>, Vec<u8>)>;

/// The weight file, opened once; each context streams its constants from it.
pub struct Weights {
    pub file: WeightFile,
    source: Rc<FileSource>,
    options: LoadOptions,
    /// float32 host copies for the rebuild-host baseline, which keeps its weights in host memory.
    host: RefCell<HashMap<String, HostCopy>>,
    /// The rebuild baseline's buffers for a tensor as read and widened, reused between reads.
    scratch: RefCell<(Vec<u8>, Vec<u8>)>,
}

impl Weights {
    /// Opens the file and checks it holds exactly the config's tensors, as float types;
    /// `widen_on_gpu` is the loader's choice of where float16 becomes float32 (`None`: on the
    /// GPU unless the adapter is a CPU).
    pub fn open(path: &Path, config: &Config, widen_on_gpu: Option<bool>) -> Result<Weights> {
        let source = Rc::new(FileSource::open(path)?);
        let file = pollster::block_on(WeightFile::open(&*source))?;
        let want = config.expected_tensors();
        for (name, shape) in &want {
            let t = file.tensor(name)?;
            if &t.shape != shape || !matches!(t.type_name.as_str(), "F16" | "F32" | "BF16") {
                return Err(Error::Type(format!(
                    "{}: tensor '{name}' is {} {:?}, config.json expects a float {shape:?}",
                    file.file_name, t.type_name, t.shape
                )));
            }
        }
        if let Some(extra) = file.tensors.iter().find(|t| !want.iter().any(|(n, _)| n == &t.name)) {
            return Err(Error::Type(format!("{}: unexpected tensor '{}'", file.file_name, extra.name)));
        }
        let options = LoadOptions { float_type: Some(DataType::Float32), widen_on_gpu, ..LoadOptions::default() };
        Ok(Weights { file, source, options, host: RefCell::default(), scratch: RefCell::default() })
    }

    /// A float32 constant tensor streamed from the file (it can go to the "disk" tier).
    pub fn tensor(&self, ctx: &Context, name: &str) -> Result<Tensor> {
        let (t, _) =
            pollster::block_on(self.file.constant_tensor(ctx, &self.source, name, &self.options, &mut |_, _| {}))?;
        Ok(t)
    }

    /// The tensor as float32 bytes in host memory, with its shape (the rebuild-host baseline's
    /// copy, read and converted once).
    pub fn host(&self, name: &str) -> Result<HostCopy> {
        if let Some(copy) = self.host.borrow().get(name) {
            return Ok(copy.clone());
        }
        let copy = Rc::new(self.read(name, |shape, bytes| Ok((shape.to_vec(), bytes.to_vec())))?);
        self.host.borrow_mut().insert(name.to_string(), copy.clone());
        Ok(copy)
    }

    /// `use_it(shape, float32 bytes)` of the tensor read from the file and widened on the CPU
    /// (half's slice conversion, F16C where the CPU has it) into reused buffers: what a
    /// standard-only page does for each weight it builds from the file.
    pub fn read<R>(&self, name: &str, use_it: impl FnOnce(&[u32], &[u8]) -> Result<R>) -> Result<R> {
        let info = self.file.tensor(name)?;
        let stored = info.stored.ok_or_else(|| Error::Type(format!("tensor '{name}': unsupported type")))?;
        let mut scratch = self.scratch.borrow_mut();
        let (raw, out) = &mut *scratch;
        raw.resize(info.byte_length as usize, 0);
        pollster::block_on(self.source.read_at(info.offset, raw))?;
        convert_chunk(self.source.name(), name, stored, DataType::Float32, 0, raw, out)?;
        let shape: Vec<u32> = info.shape.iter().map(|&d| d as u32).collect();
        use_it(&shape, out)
    }
}

/// A constant's origin: streamed from the file by the weight loader (the extensions), or, with
/// the standard API only, `constant(desc, bytes)` of bytes read from the file at each build
/// (`Reread`) or of float32 copies held in host memory (`Host`).
#[derive(Clone, Copy)]
enum Constants<'w> {
    File(&'w Weights),
    Reread(&'w Weights),
    Host(&'w Weights),
}

/// A graph builder with the model's building blocks.
struct G<'w> {
    ctx: Context,
    b: GraphBuilder,
    weights: Constants<'w>,
}

fn f32s(shape: &[u32]) -> OperandDescriptor {
    OperandDescriptor::new(DataType::Float32, shape.to_vec())
}

impl<'w> G<'w> {
    fn new(ctx: &Context, weights: Constants<'w>) -> Result<G<'w>> {
        Ok(G { ctx: ctx.clone(), b: GraphBuilder::new(ctx)?, weights })
    }
    fn input(&mut self, name: &str, shape: &[u32]) -> Result<Operand> {
        self.b.input(name, f32s(shape))
    }
    fn weight(&mut self, name: &str) -> Result<Operand> {
        match self.weights {
            Constants::File(w) => {
                let t = w.tensor(&self.ctx, name)?;
                self.b.constant_tensor(&t)
            }
            Constants::Reread(w) => w.read(name, |shape, bytes| self.b.constant(f32s(shape), bytes)),
            Constants::Host(w) => {
                let copy = w.host(name)?;
                self.b.constant(f32s(&copy.0), &copy.1)
            }
        }
    }
    fn scalar(&mut self, v: f64) -> Result<Operand> {
        self.b.constant_scalar(DataType::Float32, webnn_wgpu::graph::Number::Double(v))
    }
    fn bin(&mut self, op: BinaryOp, a: Operand, b: Operand) -> Result<Operand> {
        self.b.operator1(Op::Binary(op), &[a, b], "")
    }
    fn add(&mut self, a: Operand, b: Operand) -> Result<Operand> {
        self.bin(BinaryOp::Add, a, b)
    }
    fn mul(&mut self, a: Operand, b: Operand) -> Result<Operand> {
        self.bin(BinaryOp::Mul, a, b)
    }
    fn reshape(&mut self, a: Operand, shape: &[u32]) -> Result<Operand> {
        self.b.operator1(Op::Reshape { new_shape: shape.to_vec() }, &[a], "")
    }
    /// x @ W^T for W [out, in] as stored (gemm's bTranspose: no transposed copy of the weight).
    fn linear(&mut self, x: Operand, name: &str) -> Result<Operand> {
        let w = self.weight(name)?;
        self.b.operator1(Op::Gemm(GemmOptions { b_transpose: true, ..GemmOptions::default() }), &[x, w], "")
    }
    /// x / sqrt(mean(x^2) + eps) * w, the mean of squares as reduceSumSquare / n (one kernel
    /// fewer than squaring first).
    fn rmsnorm(&mut self, x: Operand, name: &str, eps: f64) -> Result<Operand> {
        let n = self.b.descriptor(x)?.shape[1];
        let sum = self.b.operator1(
            Op::Reduce(ReduceOp::SumSquare, ReduceOptions { axes: Some(vec![1]), keep_dimensions: true }),
            &[x],
            "",
        )?;
        let inv_n = self.scalar(1.0 / n as f64)?;
        let mean = self.mul(sum, inv_n)?;
        let eps = self.scalar(eps)?;
        let sum = self.add(mean, eps)?;
        let root = self.b.operator1(Op::Unary(UnaryOp::Sqrt), &[sum], "")?;
        let normed = self.bin(BinaryOp::Div, x, root)?;
        let w = self.weight(name)?;
        self.mul(normed, w)
    }
    /// rotate_half RoPE on t [n, head_dim] with cos = [cos, cos] and sin = [-sin, sin], each
    /// [1, head_dim]: t * cos + swap_halves(t) * sin, the halves swapped by a matmul with the
    /// permutation `swap` (see [`G::half_swap`]), which takes the products and the sum as its
    /// epilogue: one kernel, where reverse and a fused product kernel took two (exact: each output
    /// is one input times 1 plus zeros).
    fn rope(&mut self, t: Operand, cos: Operand, sin: Operand, swap: Operand) -> Result<Operand> {
        let swapped = self.b.operator1(Op::Matmul, &[t, swap], "")?;
        let (a, b) = (self.mul(t, cos)?, self.mul(swapped, sin)?);
        self.add(a, b)
    }
    /// The [head_dim, head_dim] permutation matrix P with (t P)[j] = t[(j + head_dim/2) % head_dim].
    fn half_swap(&mut self, hd: u32) -> Result<Operand> {
        let mut p = vec![0f32; (hd * hd) as usize];
        for j in 0..hd {
            p[(((j + hd / 2) % hd) * hd + j) as usize] = 1.0;
        }
        self.b.constant(f32s(&[hd, hd]), &bytes(&p))
    }
    fn build(mut self, outputs: &[(&str, Operand)]) -> Result<Graph> {
        let outputs: Vec<(String, Operand)> = outputs.iter().map(|(n, o)| (n.to_string(), *o)).collect();
        pollster::block_on(self.b.build(&outputs))
    }
}

/// `{expert, weight}` pairs: the top-k logits (ties: lower index), weights the softmax over them.
pub fn route(logits: &[f32], top_k: usize) -> Vec<(usize, f32)> {
    let mut order: Vec<usize> = (0..logits.len()).collect();
    order.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]).then(a.cmp(&b)));
    let top = &order[..top_k.min(order.len())];
    let max = logits[top[0]] as f64;
    let exps: Vec<f64> = top.iter().map(|&e| (logits[e] as f64 - max).exp()).collect();
    let sum: f64 = exps.iter().sum();
    top.iter().zip(&exps).map(|(&e, &x)| (e, (x / sum) as f32)).collect()
}

/// Index of the largest value; ties go to the lowest index (torch.argmax).
pub fn argmax(values: &[f32]) -> usize {
    let mut best = 0;
    for (i, &v) in values.iter().enumerate() {
        if v > values[best] {
            best = i;
        }
    }
    best
}

/// cos and sin of pos * theta^(-2j/head_dim), j < head_dim / 2, in float32 like the reference,
/// laid out for [`G::rope`]: [cos, cos] and [-sin, sin].
fn rope_angles(c: &Config, pos: u32) -> (Vec<f32>, Vec<f32>) {
    let half = c.head_dim / 2;
    let (cos, sin): (Vec<f32>, Vec<f32>) = (0..half)
        .map(|j| {
            let exponent = (2 * j) as f32 / c.head_dim as f32;
            let inv_freq = 1.0f32 / (c.rope_theta.powf(exponent as f64) as f32);
            let a = pos as f32 * inv_freq;
            ((a as f64).cos() as f32, (a as f64).sin() as f32)
        })
        .unzip();
    ([&cos[..], &cos[..]].concat(), sin.iter().map(|s| -s).chain(sin.iter().copied()).collect())
}

fn bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn floats(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
}

struct Slot {
    graph: Option<Graph>,
    last_used: u64,
}

/// The tensors a token step reads and writes.
struct Tensors {
    token: Tensor,
    x: [Tensor; 2],
    h: Tensor,
    router_logits: Tensor,
    expert_weight: [Tensor; 2],
    cos: Tensor,
    sin: Tensor,
    mask: Tensor,
    /// [1, max_seq]: 1 at the position (the cache entry written), and its complement.
    onehot: Tensor,
    keep: Tensor,
    logits: Tensor,
    /// The fused mode's output: the logits, the experts chosen in every layer, the next token.
    out: Tensor,
    /// The fused mode's next token (argMax of the logits): one step's output and the next one's
    /// input, in turn.
    next: [Tensor; 2],
    /// Per layer, two ping-pong copies of the key and value caches, laid out as the attention's
    /// matmuls read them: keys [kv_heads * head_dim, max_seq], values [kv_heads, max_seq, head_dim].
    keys: Vec<[Tensor; 2]>,
    values: Vec<[Tensor; 2]>,
}

/// What [`Moe::decode_greedy`] returns.
pub struct Decoded {
    pub tokens: Vec<u32>,
    /// The logits of the prompt's last position (those that picked the first token).
    pub first_logits: Vec<f32>,
    pub seconds: f64,
}

/// Seconds per expert use by where the expert is (see [`Moe::expert_costs`]).
pub struct ExpertCosts {
    pub hit: f64,
    pub from_disk: f64,
    pub from_host: f64,
    pub rebuild_host: f64,
    pub rebuild_file: f64,
}

/// Counters the benchmark prints.
#[derive(Debug, Default, Clone, Copy)]
pub struct Stats {
    pub expert_uses: u64,
    /// Uses that found the expert's graph off the GPU.
    pub expert_misses: u64,
    pub builds: u64,
    pub explicit_swap_ins: u64,
    pub explicit_swap_outs: u64,
}

pub struct Moe<'w> {
    pub c: Config,
    pub mode: Mode,
    pub ctx: Context,
    weights: &'w Weights,
    t: Tensors,
    attention: Vec<Graph>,
    final_graph: Graph,
    experts: Vec<Vec<Slot>>,
    pub pos: u32,
    clock: u64,
    pub stats: Stats,
    /// Device bytes of the non-expert graphs and of one expert graph (measured), and the budget.
    pub non_expert_bytes: u64,
    pub expert_bytes: u64,
    pub budget_bytes: u64,
}

impl<'w> Moe<'w> {
    /// Builds the model in `mode`; `fraction` of the expert bytes may be resident (lru, explicit).
    pub fn new(config: Config, weights: &'w Weights, mode: Mode, fraction: f64) -> Result<Moe<'w>> {
        let count = (config.n_layers * config.n_experts) as u64;
        // Bytes are measured, not guessed (they include the runtime's intermediate pool): a probe
        // context builds the shared graphs and one expert, since the budget is a context option.
        let probe = Context::new(ContextOptions::default());
        let probe = pollster::block_on(probe)?;
        let shared = Shared::build(&probe, &config, Constants::File(weights), false)?;
        // Flushed first: staging buffers of float16 widened on the GPU live until a submission.
        pollster::block_on(probe.flush())?;
        let non_expert_bytes = probe.memory_info().device_bytes;
        let expert = build_expert(&probe, &config, Constants::File(weights), 0, 0)?;
        pollster::block_on(probe.flush())?;
        let expert_bytes = probe.memory_info().device_bytes - non_expert_bytes;
        drop((shared, expert));
        probe.destroy();
        let budget_bytes = non_expert_bytes + (fraction * (expert_bytes * count) as f64).round() as u64;
        let lru = matches!(mode, Mode::Lru | Mode::LruHost);
        let options = ContextOptions {
            memory_budget: lru.then_some(budget_bytes),
            // Room for a float32 copy of every weight (what the GPU buffers hold).
            host_memory_budget: (mode == Mode::LruHost).then_some(non_expert_bytes + expert_bytes * count),
            ..ContextOptions::default()
        };
        let ctx = pollster::block_on(Context::new(options))?;
        let constants = match mode {
            Mode::Rebuild => Constants::Reread(weights),
            Mode::RebuildHost => Constants::Host(weights),
            _ => Constants::File(weights),
        };
        let Shared { t, attention, final_graph } = Shared::build(&ctx, &config, constants, mode == Mode::Fused)?;
        // Every token runs these: the budget evicts experts before them.
        for g in attention.iter().chain([&final_graph]) {
            g.set_eviction_priority(EvictionPriority::High);
        }
        let mut m = Moe {
            experts: Vec::new(),
            c: config,
            mode,
            ctx,
            weights,
            t,
            attention,
            final_graph,
            pos: 0,
            clock: 0,
            stats: Stats::default(),
            non_expert_bytes,
            expert_bytes,
            budget_bytes,
        };
        for l in 0..m.c.n_layers {
            let mut row = Vec::new();
            for e in 0..m.c.n_experts {
                let graph = match mode {
                    Mode::Rebuild | Mode::Fused => None,
                    Mode::RebuildHost => {
                        for w in ["w1", "w3", "w2"] {
                            weights.host(&format!("layers.{l}.moe.experts.{e}.{w}.weight"))?;
                        }
                        None
                    }
                    _ => Some(build_expert(&m.ctx, &m.c, Constants::File(weights), l, e)?),
                };
                row.push(Slot { graph, last_used: 0 });
            }
            m.experts.push(row);
            if mode == Mode::Explicit {
                m.fit_budget(None)?;
            }
        }
        m.reset()?;
        Ok(m)
    }

    /// Forgets the sequence: position 0, cleared caches.
    pub fn reset(&mut self) -> Result<()> {
        let zeros = vec![0u8; (self.c.max_seq * self.c.n_kv_heads * self.c.head_dim * 4) as usize];
        for pair in self.t.keys.iter().chain(&self.t.values) {
            for t in pair {
                self.ctx.write_tensor(t, &zeros)?;
            }
        }
        self.pos = 0;
        Ok(())
    }

    /// Experts swapped out to disk, least recently used first, until the context is within the
    /// budget; `in_use` (layer, experts) stays.
    fn fit_budget(&mut self, in_use: Option<(usize, &[usize])>) -> Result<()> {
        let mut candidates: Vec<(u64, usize, usize)> = Vec::new();
        for (l, row) in self.experts.iter().enumerate() {
            for (e, slot) in row.iter().enumerate() {
                let busy = in_use.is_some_and(|(il, es)| il == l && es.contains(&e));
                if !busy && slot.graph.as_ref().is_some_and(|g| g.residency() == Residency::Device) {
                    candidates.push((slot.last_used, l, e));
                }
            }
        }
        candidates.sort();
        for (_, l, e) in candidates {
            if self.ctx.memory_info().device_bytes <= self.budget_bytes {
                break;
            }
            if let Some(g) = &self.experts[l][e].graph {
                pollster::block_on(g.swap_out(Residency::Disk))?;
                self.stats.explicit_swap_outs += 1;
            }
        }
        Ok(())
    }

    /// Writes the step inputs of position `self.pos`: the RoPE rows and the attention's masks.
    fn write_position(&self) -> Result<()> {
        let (c, t, ctx) = (&self.c, &self.t, &self.ctx);
        let s = c.max_seq as usize;
        let (cos, sin) = rope_angles(c, self.pos);
        let mut mask = vec![MASKED; s];
        mask[..=self.pos as usize].fill(0.0);
        let mut onehot = vec![0f32; s];
        onehot[self.pos as usize] = 1.0;
        let keep: Vec<f32> = onehot.iter().map(|v| 1.0 - v).collect();
        ctx.write_tensor(&t.cos, &bytes(&cos))?;
        ctx.write_tensor(&t.sin, &bytes(&sin))?;
        ctx.write_tensor(&t.mask, &bytes(&mask))?;
        ctx.write_tensor(&t.onehot, &bytes(&onehot))?;
        ctx.write_tensor(&t.keep, &bytes(&keep))
    }

    /// Feeds one token at `self.pos`; returns its logits.
    pub fn step(&mut self, token: u32) -> Result<Vec<f32>> {
        let c = self.c.clone();
        let (s, ctx) = (c.max_seq, self.ctx.clone());
        if self.pos >= s {
            return Err(Error::Type(format!("sequence longer than max_seq {s}")));
        }
        if token >= c.vocab {
            return Err(Error::Type(format!("token {token} is outside the vocabulary of {}", c.vocab)));
        }
        self.write_position()?;
        let t = &self.t;
        ctx.write_tensor(&t.token, &(token as i32).to_le_bytes())?;
        let io = |name: &str, t: &Tensor| (name.to_string(), t.clone());
        let now = (self.pos % 2) as usize;
        if self.mode == Mode::Fused {
            return self.fused_step(now);
        }
        let mut cur = 0;
        for l in 0..c.n_layers as usize {
            let t = &self.t;
            let residual = if l == 0 { io("token", &t.token) } else { io("x", &t.x[cur]) };
            ctx.dispatch(
                &self.attention[l],
                &[
                    residual,
                    io("cos", &t.cos),
                    io("sin", &t.sin),
                    io("mask", &t.mask),
                    io("onehot", &t.onehot),
                    io("keep", &t.keep),
                    io("keys", &t.keys[l][now]),
                    io("values", &t.values[l][now]),
                ],
                &[
                    io("x", &t.x[1 - cur]),
                    io("keys", &t.keys[l][1 - now]),
                    io("values", &t.values[l][1 - now]),
                    io("h", &t.h),
                    io("logits", &t.router_logits),
                ],
            )?;
            cur = 1 - cur;
            let logits = floats(&pollster::block_on(ctx.read_tensor(&t.router_logits))?);
            let routes = route(&logits, c.top_k as usize);
            let chosen: Vec<usize> = routes.iter().map(|r| r.0).collect();
            for (i, &(e, weight)) in routes.iter().enumerate() {
                self.clock += 1;
                self.stats.expert_uses += 1;
                let slot = &mut self.experts[l][e];
                slot.last_used = self.clock;
                let built;
                let graph = match &slot.graph {
                    Some(g) => {
                        if g.residency() != Residency::Device {
                            self.stats.expert_misses += 1;
                            if self.mode == Mode::Explicit {
                                pollster::block_on(g.swap_in())?;
                                self.stats.explicit_swap_ins += 1;
                            }
                        }
                        g
                    }
                    None => {
                        let constants = match self.mode {
                            Mode::RebuildHost => Constants::Host(self.weights),
                            _ => Constants::Reread(self.weights),
                        };
                        built = build_expert(&ctx, &c, constants, l as u32, e as u32)?;
                        self.stats.builds += 1;
                        &built
                    }
                };
                let t = &self.t;
                ctx.write_tensor(&t.expert_weight[i], &weight.to_le_bytes())?;
                ctx.dispatch(
                    graph,
                    &[io("x", &t.x[cur]), io("h", &t.h), io("weight", &t.expert_weight[i])],
                    &[io("x", &t.x[1 - cur])],
                )?;
                if self.mode.rebuilds() {
                    graph.destroy();
                }
                cur = 1 - cur;
            }
            if self.mode == Mode::Explicit {
                self.fit_budget(Some((l, &chosen)))?;
            }
        }
        let t = &self.t;
        ctx.dispatch(&self.final_graph, &[io("x", &t.x[cur])], &[io("logits", &t.logits)])?;
        let logits = floats(&pollster::block_on(ctx.read_tensor(&t.logits))?);
        self.pos += 1;
        Ok(logits)
    }

    /// The token graph's inputs and outputs for a step at a position of parity `now`, reading its
    /// token from `token` and writing the next one to `next`.
    fn fused_bindings(&self, now: usize, token: &Tensor, next: &Tensor) -> (Vec<(String, Tensor)>, Vec<(String, Tensor)>) {
        let t = &self.t;
        let io = |name: String, t: &Tensor| (name, t.clone());
        let mut inputs = vec![
            io("token".into(), token),
            io("cos".into(), &t.cos),
            io("sin".into(), &t.sin),
            io("mask".into(), &t.mask),
            io("onehot".into(), &t.onehot),
            io("keep".into(), &t.keep),
        ];
        let mut outputs = vec![io("out".into(), &t.out), io("next".into(), next)];
        for l in 0..self.c.n_layers as usize {
            inputs.push(io(format!("keys.{l}"), &t.keys[l][now]));
            inputs.push(io(format!("values.{l}"), &t.values[l][now]));
            outputs.push(io(format!("keys.{l}"), &t.keys[l][1 - now]));
            outputs.push(io(format!("values.{l}"), &t.values[l][1 - now]));
        }
        (inputs, outputs)
    }

    /// The fused mode's token (inputs written by `step`): one dispatch, one read back.
    fn fused_step(&mut self, now: usize) -> Result<Vec<f32>> {
        let (inputs, outputs) = self.fused_bindings(now, &self.t.token, &self.t.next[0]);
        self.ctx.dispatch(&self.final_graph, &inputs, &outputs)?;
        let out = floats(&pollster::block_on(self.ctx.read_tensor(&self.t.out))?);
        self.stats.expert_uses += (self.c.n_layers * self.c.top_k) as u64;
        self.pos += 1;
        Ok(out[..self.c.vocab as usize].to_vec())
    }

    /// Greedy decoding in the fused mode: feeds the prompt `ids`, then generates `count` tokens,
    /// each step taking the token the step before picked on the GPU (its "next" output) as its
    /// input, so that steps are issued without waiting for their reads (up to `ahead` in flight;
    /// each read's copy is issued at once, in order with the dispatches). Returns the tokens, the
    /// logits of the prompt's last position, and the seconds from the first generated token to
    /// the last (what `step()` takes for `count - 1` tokens).
    pub fn decode_greedy(&mut self, ids: &[u32], count: usize, ahead: usize) -> Result<Decoded> {
        let c = self.c.clone();
        if self.mode != Mode::Fused {
            return Err(Error::Type("decode_greedy: the fused mode picks tokens on the GPU".into()));
        }
        if self.pos as usize + ids.len() > c.max_seq as usize {
            return Err(Error::Type(format!("sequence longer than max_seq {}", c.max_seq)));
        }
        if let Some(&t) = ids.iter().find(|&&t| t >= c.vocab) {
            return Err(Error::Type(format!("token {t} is outside the vocabulary of {}", c.vocab)));
        }
        let mut decoded = Decoded { tokens: Vec::new(), first_logits: Vec::new(), seconds: 0.0 };
        if ids.is_empty() || count == 0 {
            return Ok(decoded);
        }
        let steps = (ids.len() + count - 1).min((c.max_seq - self.pos) as usize);
        let vocab = c.vocab as usize;
        let mut reads = std::collections::VecDeque::new();
        let mut first = None;
        let mut take = |bytes: Vec<u8>, decoded: &mut Decoded| {
            let out = floats(&bytes);
            decoded.tokens.push(out[vocab + (c.n_layers * c.top_k) as usize] as u32);
            if first.is_none() {
                first = Some(std::time::Instant::now());
                decoded.first_logits = out[..vocab].to_vec();
            }
            decoded.seconds = first.map_or(0.0, |t| t.elapsed().as_secs_f64());
        };
        for s in 0..steps {
            self.write_position()?;
            let token = if s < ids.len() {
                self.ctx.write_tensor(&self.t.token, &(ids[s] as i32).to_le_bytes())?;
                self.t.token.clone()
            } else {
                self.t.next[(s + 1) % 2].clone()
            };
            let (inputs, outputs) = self.fused_bindings((self.pos % 2) as usize, &token, &self.t.next[s % 2]);
            self.ctx.dispatch(&self.final_graph, &inputs, &outputs)?;
            self.stats.expert_uses += (c.n_layers * c.top_k) as u64;
            self.pos += 1;
            if s + 1 >= ids.len() {
                reads.push_back(self.ctx.read_tensor(&self.t.out));
            }
            if reads.len() >= ahead.max(1) {
                if let Some(read) = reads.pop_front() {
                    take(pollster::block_on(read)?, &mut decoded);
                }
            }
        }
        while let Some(read) = reads.pop_front() {
            take(pollster::block_on(read)?, &mut decoded);
        }
        Ok(decoded)
    }

    /// What one expert use costs outside the token loop, in seconds (median of `reps`), each
    /// from the expert's state to its dispatch done on the GPU: a hit (resident), a miss from the
    /// disk tier (file read, upload of the float16 bytes, widening on the GPU), a miss from the
    /// host tier (upload of float32 copies), and the standard-only rebuild, from host copies and
    /// re-reading the file (constant() of each weight, build(): validation, lowering, pipelines
    /// from the context's cache, upload).
    pub fn expert_costs(&self, reps: usize) -> Result<ExpertCosts> {
        let median = |mut v: Vec<f64>| {
            v.sort_by(|a, b| a.total_cmp(b));
            v[v.len() / 2]
        };
        let ctx = &self.ctx;
        let io = |name: &str, t: &Tensor| (name.to_string(), t.clone());
        let t = &self.t;
        let run = |g: &Graph| -> Result<()> {
            ctx.dispatch(g, &[io("x", &t.x[0]), io("h", &t.h), io("weight", &t.expert_weight[0])], &[io("x", &t.x[1])])?;
            pollster::block_on(ctx.flush())
        };
        let time = |before: &dyn Fn() -> Result<()>, use_it: &dyn Fn() -> Result<()>| -> Result<f64> {
            let mut times = Vec::new();
            for _ in 0..reps {
                before()?;
                pollster::block_on(ctx.flush())?;
                let start = std::time::Instant::now();
                use_it()?;
                times.push(start.elapsed().as_secs_f64());
            }
            Ok(median(times))
        };
        let streamed = build_expert(ctx, &self.c, Constants::File(self.weights), 0, 0)?;
        let hit = time(&|| Ok(()), &|| run(&streamed))?;
        let from_disk = time(&|| pollster::block_on(streamed.swap_out(Residency::Disk)), &|| run(&streamed))?;
        streamed.destroy();
        let hosted = build_expert(ctx, &self.c, Constants::Host(self.weights), 0, 0)?;
        let from_host = time(&|| pollster::block_on(hosted.swap_out(Residency::Host)), &|| run(&hosted))?;
        hosted.destroy();
        let rebuild = |constants: Constants| {
            time(&|| Ok(()), &|| {
                let g = build_expert(ctx, &self.c, constants, 0, 0)?;
                run(&g)?;
                g.destroy();
                Ok(())
            })
        };
        let rebuild_host = rebuild(Constants::Host(self.weights))?;
        let rebuild_file = rebuild(Constants::Reread(self.weights))?;
        Ok(ExpertCosts { hit, from_disk, from_host, rebuild_host, rebuild_file })
    }

    /// What one expert miss costs in the LRU loop, in seconds (median of `reps`): more expert
    /// graphs (streamed from the file) than the budget holds, used in turn, so that each use
    /// swaps its graph in from the "disk" tier evicting the least recently used expert, until
    /// its dispatch is done on the GPU. Needs a model in LRU mode.
    pub fn evicting_miss(&self, reps: usize) -> Result<f64> {
        let ctx = &self.ctx;
        let io = |name: &str, t: &Tensor| (name.to_string(), t.clone());
        let t = &self.t;
        let room = (self.budget_bytes.saturating_sub(self.non_expert_bytes) / self.expert_bytes.max(1)) as u32;
        let ring = (0..room + 4)
            .map(|i| build_expert(ctx, &self.c, Constants::File(self.weights), i / self.c.n_experts % self.c.n_layers, i % self.c.n_experts))
            .collect::<Result<Vec<_>>>()?;
        let mut times = Vec::new();
        for i in 0..ring.len() + reps {
            let g = &ring[i % ring.len()];
            let was = g.residency();
            pollster::block_on(ctx.flush())?;
            let start = std::time::Instant::now();
            ctx.dispatch(g, &[io("x", &t.x[0]), io("h", &t.h), io("weight", &t.expert_weight[0])], &[io("x", &t.x[1])])?;
            pollster::block_on(ctx.flush())?;
            if was != Residency::Device && i >= ring.len() {
                times.push(start.elapsed().as_secs_f64());
            }
        }
        ring.iter().for_each(|g| g.destroy());
        times.sort_by(|a, b| a.total_cmp(b));
        Ok(times.get(times.len() / 2).copied().unwrap_or(f64::NAN))
    }

    /// GPU dispatches and copies a token records: the token graph's in the fused mode, the
    /// shared graphs' and `top_k` experts' a layer otherwise.
    pub fn steps_per_token(&self) -> usize {
        let experts = self.experts.iter().flatten().find_map(|s| s.graph.as_ref()).map_or(0, |g| g.step_count());
        let shared: usize = self.attention.iter().map(|g| g.step_count()).sum::<usize>() + self.final_graph.step_count();
        shared + experts * (self.c.n_layers * self.c.top_k) as usize
    }

    /// (resident expert graphs, all expert graphs).
    pub fn resident_experts(&self) -> (usize, usize) {
        let all = self.experts.iter().flatten();
        let resident = all.clone().filter(|s| s.graph.as_ref().is_some_and(|g| g.residency() == Residency::Device));
        (resident.count(), all.count())
    }
}

/// The graphs every token uses and the tensors they work on.
struct Shared {
    t: Tensors,
    /// Per layer: attention (the first layer's from the token's embedding), then the router's
    /// norm and logits; one graph, one dispatch fewer a layer than two: a dispatch costs about
    /// 50 µs of wgpu CPU time on the H200.
    attention: Vec<Graph>,
    final_graph: Graph,
}

impl Shared {
    /// `fused`: the token graph of the fused mode instead of the per-layer graphs.
    fn build(ctx: &Context, c: &Config, constants: Constants, fused: bool) -> Result<Shared> {
        let (d, hkv, hd, s) = (c.d_model, c.n_kv_heads, c.head_dim, c.max_seq);
        let kv_width = hkv * hd;
        let tensor = |data_type: DataType, shape: &[u32], readable: bool, writable: bool| {
            let operand = OperandDescriptor::new(data_type, shape.to_vec());
            pollster::block_on(ctx.create_tensor(TensorDescriptor { operand, readable, writable }))
        };
        let f = DataType::Float32;
        let mut keys = Vec::new();
        let mut values = Vec::new();
        for _ in 0..c.n_layers {
            keys.push([tensor(f, &[kv_width, s], false, true)?, tensor(f, &[kv_width, s], false, true)?]);
            values.push([tensor(f, &[hkv, s, hd], false, true)?, tensor(f, &[hkv, s, hd], false, true)?]);
        }
        let t = Tensors {
            token: tensor(DataType::Int32, &[1], false, true)?,
            x: [tensor(f, &[1, d], true, true)?, tensor(f, &[1, d], true, true)?],
            h: tensor(f, &[1, d], false, false)?,
            router_logits: tensor(f, &[1, c.n_experts], true, false)?,
            expert_weight: [tensor(f, &[1, 1], false, true)?, tensor(f, &[1, 1], false, true)?],
            cos: tensor(f, &[1, hd], false, true)?,
            sin: tensor(f, &[1, hd], false, true)?,
            mask: tensor(f, &[1, s], false, true)?,
            onehot: tensor(f, &[1, s], false, true)?,
            keep: tensor(f, &[1, s], false, true)?,
            logits: tensor(f, &[1, c.vocab], true, false)?,
            out: tensor(f, &[1, c.vocab + c.n_layers * c.top_k + 1], true, false)?,
            next: [tensor(DataType::Int32, &[1], false, false)?, tensor(DataType::Int32, &[1], false, false)?],
            keys,
            values,
        };

        if let (true, Constants::File(weights)) = (fused, constants) {
            let final_graph = build_token_graph(ctx, c, weights)?;
            return Ok(Shared { t, attention: Vec::new(), final_graph });
        }
        let mut attention = Vec::new();
        for l in 0..c.n_layers {
            let mut g = G::new(ctx, constants)?;
            let ins = StepInputs::new(&mut g, c, &[l])?;
            // The first layer's graph starts from the token's embedding row, gathered on the GPU
            // (a dispatch fewer a token than a graph of its own).
            let x = match ins.token {
                Some(token) => g.embedding(token)?,
                None => g.input("x", &[1, d])?,
            };
            let a = g.attention(c, l, x, &ins, ins.keys[0], ins.values[0])?;
            attention.push(g.build(&[("x", a.x), ("keys", a.keys), ("values", a.values), ("h", a.h), ("logits", a.logits)])?);
        }

        let mut g = G::new(ctx, constants)?;
        let x = g.input("x", &[1, d])?;
        let logits = g.lm_head(c, x)?;
        let final_graph = g.build(&[("logits", logits)])?;
        Ok(Shared { t, attention, final_graph })
    }
}

/// x + weight * w2(silu(w1 h) * w3 h), silu(a) = a * sigmoid(a): the expert's only constants are
/// its three weights, so with file-backed weights the whole graph can go to the "disk" tier.
fn build_expert(ctx: &Context, c: &Config, constants: Constants, l: u32, e: u32) -> Result<Graph> {
    let q = format!("layers.{l}.moe.experts.{e}.");
    let mut g = G::new(ctx, constants)?;
    let x = g.input("x", &[1, c.d_model])?;
    let h = g.input("h", &[1, c.d_model])?;
    let weight = g.input("weight", &[1, 1])?;
    let gate = g.linear(h, &format!("{q}w1.weight"))?;
    let up = g.linear(h, &format!("{q}w3.weight"))?;
    let sigmoid = g.b.operator1(Op::Activation(Activation::Sigmoid), &[gate], "")?;
    let silu = g.mul(gate, sigmoid)?;
    let inner = g.mul(silu, up)?;
    let down = g.linear(inner, &format!("{q}w2.weight"))?;
    let scaled = g.mul(weight, down)?;
    let y = g.add(x, scaled)?;
    g.build(&[("x", y)])
}

/// The inputs a token's step reads: the token (in layer 0's graph), the RoPE and mask rows, and
/// the key and value caches of `layers` (named keys/values for one layer, keys.<l>/values.<l>
/// for several).
struct StepInputs {
    token: Option<Operand>,
    cos: Operand,
    sin: Operand,
    mask: Operand,
    onehot: Operand,
    keep: Operand,
    keys: Vec<Operand>,
    values: Vec<Operand>,
}

impl StepInputs {
    fn new(g: &mut G, c: &Config, layers: &[u32]) -> Result<StepInputs> {
        let (hkv, hd, s) = (c.n_kv_heads, c.head_dim, c.max_seq);
        let token = match layers.first() {
            Some(0) => Some(g.b.input("token", OperandDescriptor::new(DataType::Int32, vec![1]))?),
            _ => None,
        };
        let (cos, sin) = (g.input("cos", &[1, hd])?, g.input("sin", &[1, hd])?);
        let (mask, onehot, keep) = (g.input("mask", &[1, s])?, g.input("onehot", &[1, s])?, g.input("keep", &[1, s])?);
        let name = |what: &str, l: u32| if layers.len() == 1 { what.to_string() } else { format!("{what}.{l}") };
        let (mut keys, mut values) = (Vec::new(), Vec::new());
        for &l in layers {
            keys.push(g.input(&name("keys", l), &[hkv * hd, s])?);
            values.push(g.input(&name("values", l), &[hkv, s, hd])?);
        }
        Ok(StepInputs { token, cos, sin, mask, onehot, keep, keys, values })
    }
}

/// What a layer's attention block gives: the residual stream after it, the caches with this
/// position's entry, the experts' normed input and the router logits.
struct Attention {
    x: Operand,
    keys: Operand,
    values: Operand,
    h: Operand,
    logits: Operand,
}

impl G<'_> {
    /// The token's embedding row [1, d_model], gathered on the GPU.
    fn embedding(&mut self, token: Operand) -> Result<Operand> {
        let table = self.weight("embed.weight")?;
        self.b.operator1(Op::Gather { axis: 0 }, &[table, token], "")
    }

    /// Layer l's attention on the residual stream x, then the router's norm and logits.
    fn attention(&mut self, c: &Config, l: u32, x: Operand, ins: &StepInputs, k_in: Operand, v_in: Operand) -> Result<Attention> {
        let g = self;
        let (h, hkv, hd, s) = (c.n_heads, c.n_kv_heads, c.head_dim, c.max_seq);
        let (kv_width, rep) = (hkv * hd, h / hkv);
        let (cos, sin, mask, onehot, keep) = (ins.cos, ins.sin, ins.mask, ins.onehot, ins.keep);
        let p = format!("layers.{l}.");
        let hn = g.rmsnorm(x, &format!("{p}attn_norm.weight"), c.norm_eps)?;
        let q = g.linear(hn, &format!("{p}attn.wq.weight"))?;
        let swap = g.half_swap(hd)?;
        let q = g.reshape(q, &[h, hd])?;
        let q = g.rope(q, cos, sin, swap)?;
        let k = g.linear(hn, &format!("{p}attn.wk.weight"))?;
        let k = g.reshape(k, &[hkv, hd])?;
        let k = g.rope(k, cos, sin, swap)?;
        let k = g.reshape(k, &[kv_width, 1])?;
        let v = g.linear(hn, &format!("{p}attn.wv.weight"))?;
        let v = g.reshape(v, &[hkv, 1, hd])?;
        // The cache entry at this position takes the new k / v; every other entry is kept (0/1).
        let (kk, kn) = (g.mul(k_in, keep)?, g.mul(k, onehot)?);
        let keys = g.add(kk, kn)?;
        let (keep3, onehot3) = (g.reshape(keep, &[1, s, 1])?, g.reshape(onehot, &[1, s, 1])?);
        let (vk, vn) = (g.mul(v_in, keep3)?, g.mul(v, onehot3)?);
        let values = g.add(vk, vn)?;
        // GQA: query head i = kv head i / rep, so [H, hd] -> [Hkv, rep, hd] against [Hkv, hd, S].
        let q3 = g.reshape(q, &[hkv, rep, hd])?;
        let k3 = g.reshape(keys, &[hkv, hd, s])?;
        let scores = g.b.operator1(Op::Matmul, &[q3, k3], "")?;
        let scale = g.scalar(1.0 / (hd as f64).sqrt())?;
        let scores = g.mul(scores, scale)?;
        let scores = g.add(scores, mask)?;
        let probs = g.b.operator1(Op::Softmax { axis: 2 }, &[scores], "")?;
        let heads = g.b.operator1(Op::Matmul, &[probs, values], "")?;
        let heads = g.reshape(heads, &[1, h * hd])?;
        let o = g.linear(heads, &format!("{p}attn.wo.weight"))?;
        let x_out = g.add(x, o)?;
        let hr = g.rmsnorm(x_out, &format!("{p}moe_norm.weight"), c.norm_eps)?;
        let logits = g.linear(hr, &format!("{p}moe.router.weight"))?;
        Ok(Attention { x: x_out, keys, values, h: hr, logits })
    }

    /// The final norm and the vocabulary logits [1, vocab].
    fn lm_head(&mut self, c: &Config, x: Operand) -> Result<Operand> {
        let normed = self.rmsnorm(x, "norm.weight", c.norm_eps)?;
        self.linear(normed, "lm_head.weight")
    }

    /// Layer l's experts as the router picks them, on the GPU (www/moe's routedExperts()): the
    /// top-k logits by argMax, each taken out of the next pick by `where`, their softmax as the
    /// weights, and each chosen expert's weights gathered from the layer's stacks and applied as
    /// the expert graphs apply theirs, in pick order. Returns x after the experts and the chosen
    /// indices [top_k] (int32).
    fn routed_experts(&mut self, c: &Config, weights: &Weights, l: u32, x: Operand, h: Operand, logits: Operand) -> Result<(Operand, Operand)> {
        let g = self;
        let (e, k) = (c.n_experts, c.top_k);
        let iota: Vec<u8> = (0..e as i32).flat_map(|i| i.to_le_bytes()).collect();
        let iota = g.b.constant(OperandDescriptor::new(DataType::Int32, vec![1, e]), &iota)?;
        let excluded = g.b.constant(f32s(&[1]), &bytes(&[f32::NEG_INFINITY]))?;
        let arg_max = ArgMinMaxOptions { axis: 1, keep_dimensions: false, output_data_type: DataType::Int32 };
        let (mut picks, mut rest) = (Vec::new(), logits);
        for i in 0..k {
            let pick = g.b.operator1(Op::ArgMinMax(ArgKind::Max, arg_max), &[rest], "")?;
            picks.push(pick);
            if i + 1 < k {
                let pick2 = g.reshape(pick, &[1, 1])?;
                let taken = g.b.operator1(Op::Logical(LogicalOp::Equal), &[iota, pick2], "")?;
                rest = g.b.operator1(Op::Where, &[taken, excluded, rest], "")?;
            }
        }
        let chosen = if k == 1 { picks[0] } else { g.b.operator1(Op::Concat { axis: 0 }, &picks, "")? };
        let picked = g.b.operator1(Op::Gather { axis: 1 }, &[logits, chosen], "")?;
        let route_weights = g.b.operator1(Op::Softmax { axis: 1 }, &[picked], "")?;
        let stacks = [g.expert_stack(c, weights, l, "w1")?, g.expert_stack(c, weights, l, "w3")?, g.expert_stack(c, weights, l, "w2")?];
        // An expert's weight [out, in], gathered: gemm(h, W, bTranspose) as linear() applies it.
        let linear = |g: &mut G, input: Operand, stack: Operand, pick: Operand| -> Result<Operand> {
            let shape = g.b.descriptor(stack)?.shape[1..].to_vec();
            let weight = g.b.operator1(Op::Gather { axis: 0 }, &[stack, pick], "")?;
            let weight = g.reshape(weight, &shape)?;
            g.b.operator1(Op::Gemm(GemmOptions { b_transpose: true, ..GemmOptions::default() }), &[input, weight], "")
        };
        let mut x = x;
        for (i, &pick) in picks.iter().enumerate() {
            let gate = linear(g, h, stacks[0], pick)?;
            let up = linear(g, h, stacks[1], pick)?;
            let sigmoid = g.b.operator1(Op::Activation(Activation::Sigmoid), &[gate], "")?;
            let silu = g.mul(gate, sigmoid)?;
            let inner = g.mul(silu, up)?;
            let down = linear(g, inner, stacks[2], pick)?;
            let slice = SliceOptions { starts: vec![0, i as u32], sizes: vec![1, 1], strides: None };
            let weight = g.b.operator1(Op::Slice(slice), &[route_weights], "")?;
            let scaled = g.mul(weight, down)?;
            x = g.add(x, scaled)?;
        }
        Ok((x, chosen))
    }

    /// Layer l's expert weights `w` (w1, w3 or w2) of every expert, stacked [n_experts, out, in]
    /// (float32, widened from the file on the CPU).
    fn expert_stack(&mut self, c: &Config, weights: &Weights, l: u32, w: &str) -> Result<Operand> {
        let (mut stack, mut shape) = (Vec::new(), Vec::new());
        for e in 0..c.n_experts {
            weights.read(&format!("layers.{l}.moe.experts.{e}.{w}.weight"), |s, b| {
                shape = s.to_vec();
                stack.extend_from_slice(b);
                Ok(())
            })?;
        }
        self.b.constant(f32s(&[[c.n_experts].as_slice(), &shape].concat()), &stack)
    }
}

/// The fused mode's one graph a token: every layer's attention and routed experts, then the final
/// logits, with the chosen experts and the greedy next token appended: output "out" is
/// [1, vocab + n_layers * top_k + 1] (the indices as float32, exact), so a token needs one
/// dispatch and one read back; output "next" is that token as the next step's int32 input.
fn build_token_graph(ctx: &Context, c: &Config, weights: &Weights) -> Result<Graph> {
    let mut g = G::new(ctx, Constants::File(weights))?;
    let layers: Vec<u32> = (0..c.n_layers).collect();
    let ins = StepInputs::new(&mut g, c, &layers)?;
    let token = ins.token.ok_or_else(|| Error::Type("the token graph starts at layer 0".into()))?;
    let mut x = g.embedding(token)?;
    let mut outputs = Vec::new();
    let mut chosen = Vec::new();
    for &l in &layers {
        let a = g.attention(c, l, x, &ins, ins.keys[l as usize], ins.values[l as usize])?;
        outputs.push((format!("keys.{l}"), a.keys));
        outputs.push((format!("values.{l}"), a.values));
        let (after, picks) = g.routed_experts(c, weights, l, a.x, a.h, a.logits)?;
        x = after;
        chosen.push(picks);
    }
    let routes = g.b.operator1(Op::Concat { axis: 0 }, &chosen, "")?;
    let routes = g.reshape(routes, &[1, c.n_layers * c.top_k])?;
    let routes = g.b.operator1(Op::Cast { data_type: DataType::Float32 }, &[routes], "")?;
    let logits = g.lm_head(c, x)?;
    // Greedy: ties go to the lowest index, as argmax() and torch.argmax.
    let arg_max = ArgMinMaxOptions { axis: 1, keep_dimensions: false, output_data_type: DataType::Int32 };
    let next = g.b.operator1(Op::ArgMinMax(ArgKind::Max, arg_max), &[logits], "")?;
    let next_float = g.reshape(next, &[1, 1])?;
    let next_float = g.b.operator1(Op::Cast { data_type: DataType::Float32 }, &[next_float], "")?;
    let out = g.b.operator1(Op::Concat { axis: 1 }, &[logits, routes, next_float], "")?;
    outputs.push(("out".to_string(), out));
    outputs.push(("next".to_string(), next));
    let named: Vec<(&str, Operand)> = outputs.iter().map(|(n, o)| (n.as_str(), *o)).collect();
    g.build(&named)
}

/// reference.json: per prompt its ids, greedy tokens and last-position logits.
pub struct Prompt {
    pub text: String,
    pub ids: Vec<u32>,
    pub greedy_tokens: Vec<u32>,
    pub last_logits: Vec<f32>,
}

pub fn read_reference(json: &serde_json::Value) -> Result<(Vec<Prompt>, f64)> {
    let bad = |what: &str| Error::Type(format!("reference.json: {what}"));
    let ints = |v: &serde_json::Value, key: &str| -> Result<Vec<u32>> {
        v.get(key)
            .and_then(|a| a.as_array())
            .and_then(|a| a.iter().map(|x| x.as_u64().and_then(|x| u32::try_from(x).ok())).collect())
            .ok_or_else(|| bad(&format!("'{key}' is not a list of integers")))
    };
    let prompts = json.get("prompts").and_then(|p| p.as_array()).ok_or_else(|| bad("no 'prompts' list"))?;
    let prompts = prompts
        .iter()
        .map(|p| {
            let last_logits = p
                .get("last_logits")
                .and_then(|a| a.as_array())
                .and_then(|a| a.iter().map(|x| x.as_f64().map(|x| x as f32)).collect())
                .ok_or_else(|| bad("'last_logits' is not a list of numbers"))?;
            Ok(Prompt {
                text: p.get("text").and_then(|t| t.as_str()).unwrap_or("").to_string(),
                ids: ints(p, "ids")?,
                greedy_tokens: ints(p, "greedy_tokens")?,
                last_logits,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let tolerance = json.get("tolerance").and_then(|t| t.as_f64()).unwrap_or(1e-3);
    Ok((prompts, tolerance))
}

/// Largest |a - b| over the largest |reference|.
pub fn relative_error(a: &[f32], reference: &[f32]) -> f64 {
    let diff = a.iter().zip(reference).map(|(x, y)| (x - y).abs() as f64).fold(0.0, f64::max);
    let scale = reference.iter().map(|y| y.abs() as f64).fold(0.0, f64::max);
    diff / scale
}
