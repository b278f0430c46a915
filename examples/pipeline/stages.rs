//! Case 1 of USE-CASES.md at a small scale: a text encoder, a denoiser and a decoder, three
//! graphs run in sequence. Shared by `examples/pipeline` and `tests/pipeline.rs`.

use webnn_wgpu::graph::{DataType, GraphBuilder, Operand, OperandDescriptor};
use webnn_wgpu::memory::Residency;
use webnn_wgpu::ops::activation::Activation;
use webnn_wgpu::ops::elementwise_binary::BinaryOp;
use webnn_wgpu::ops::reduce::{ReduceOp, ReduceOptions};
use webnn_wgpu::ops::Op;
use webnn_wgpu::backend::webgpu::{Context, Graph, Tensor, TensorDescriptor};
use webnn_wgpu::Result;

pub const TOKENS: u32 = 77;
pub const VOCAB: u32 = 1024;
pub const WIDTH: u32 = 256;
pub const LATENTS: u32 = 64;
/// Decoded pixels per latent: a 4x4 RGB patch.
pub const PATCH: u32 = 48;

/// Deterministic weights in [-scale, scale) (xorshift), so every run builds the same model.
fn weights(seed: u64, n: usize, scale: f32) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x9E3779B97F4A7C15) | 1;
    let mut out = Vec::with_capacity(n * 4);
    for _ in 0..n {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        let v = ((s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale;
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

fn f32d(shape: &[u32]) -> OperandDescriptor {
    OperandDescriptor::new(DataType::Float32, shape.to_vec())
}

struct Stage<'a> {
    b: GraphBuilder,
    seed: &'a mut u64,
}

impl Stage<'_> {
    fn weight(&mut self, shape: &[u32]) -> Result<Operand> {
        *self.seed += 1;
        let n = shape.iter().product::<u32>() as usize;
        let scale = 1.0 / (shape[0] as f32).sqrt();
        self.b.constant(f32d(shape), &weights(*self.seed, n, scale))
    }

    fn op(&mut self, op: Op, inputs: &[Operand]) -> Result<Operand> {
        self.b.operator1(op, inputs, "")
    }

    /// x + W2 gelu(W1 x + b1): the feed-forward block of a transformer layer.
    fn mlp(&mut self, x: Operand, hidden: u32) -> Result<Operand> {
        let w1 = self.weight(&[WIDTH, hidden])?;
        let b1 = self.weight(&[hidden])?;
        let w2 = self.weight(&[hidden, WIDTH])?;
        let h = self.op(Op::Matmul, &[x, w1])?;
        let h = self.op(Op::Binary(BinaryOp::Add), &[h, b1])?;
        let h = self.op(Op::Activation(Activation::Gelu), &[h])?;
        let y = self.op(Op::Matmul, &[h, w2])?;
        self.op(Op::Binary(BinaryOp::Add), &[x, y])
    }
}

/// The three stages; each is one graph whose constants are its weights.
pub struct Pipeline {
    pub encoder: Graph,
    pub denoiser: Graph,
    pub decoder: Graph,
}

impl Pipeline {
    pub async fn build(context: &Context) -> Result<Pipeline> {
        let mut seed = 0;
        // Text encoder: token embedding, then two feed-forward blocks (CLIP/T5 stand-in).
        let mut s = Stage { b: GraphBuilder::new(context)?, seed: &mut seed };
        let ids = s.b.input("ids", OperandDescriptor::new(DataType::Int32, vec![TOKENS]))?;
        let table = s.weight(&[VOCAB, WIDTH])?;
        let mut x = s.op(Op::Gather { axis: 0 }, &[table, ids])?;
        for _ in 0..2 {
            x = s.mlp(x, 4 * WIDTH)?;
        }
        let encoder = s.b.build(&[("embedding".into(), x)]).await?;

        // Denoiser: latents conditioned on the mean text embedding, four wide blocks (the largest).
        let mut s = Stage { b: GraphBuilder::new(context)?, seed: &mut seed };
        let latents = s.b.input("latents", f32d(&[LATENTS, WIDTH]))?;
        let text = s.b.input("embedding", f32d(&[TOKENS, WIDTH]))?;
        let mean = ReduceOptions { axes: Some(vec![0]), keep_dimensions: true };
        let cond = s.op(Op::Reduce(ReduceOp::Mean, mean), &[text])?;
        let mut x = s.op(Op::Binary(BinaryOp::Add), &[latents, cond])?;
        for _ in 0..4 {
            x = s.mlp(x, 8 * WIDTH)?;
        }
        let denoiser = s.b.build(&[("latents".into(), x)]).await?;

        // Decoder: one block, then a projection of every latent to a 4x4 RGB patch (VAE stand-in).
        let mut s = Stage { b: GraphBuilder::new(context)?, seed: &mut seed };
        let latents = s.b.input("latents", f32d(&[LATENTS, WIDTH]))?;
        let x = s.mlp(latents, 2 * WIDTH)?;
        let w = s.weight(&[WIDTH, PATCH])?;
        let pixels = s.op(Op::Matmul, &[x, w])?;
        let pixels = s.op(Op::Activation(Activation::Sigmoid), &[pixels])?;
        let decoder = s.b.build(&[("pixels".into(), pixels)]).await?;
        Ok(Pipeline { encoder, denoiser, decoder })
    }

    pub fn stages(&self) -> [&Graph; 3] {
        [&self.encoder, &self.denoiser, &self.decoder]
    }
}

/// Device bytes of the tensors a run creates (inputs, outputs and the latents ping-pong).
pub fn tensor_bytes() -> u64 {
    4 * (TOKENS + TOKENS * WIDTH + 2 * LATENTS * WIDTH + LATENTS * PATCH) as u64
}

async fn tensor(context: &Context, descriptor: OperandDescriptor, readable: bool) -> Result<Tensor> {
    context.create_tensor(TensorDescriptor { operand: descriptor, readable, writable: true }).await
}

/// What one run of the pipeline did: the decoded pixels and the peak device bytes, read from the
/// runtime's own accounting after every stage.
pub struct Run {
    pub pixels: Vec<u8>,
    pub peak_device_bytes: u64,
}

/// Runs encoder → denoiser (`steps` times) → decoder. With `unload`, each stage is swapped out
/// after use (load, compute, unload); under a memory budget the runtime evicts by itself.
pub async fn run(context: &Context, p: &Pipeline, steps: u32, unload: bool) -> Result<Run> {
    let ids: Vec<u8> = (0..TOKENS).flat_map(|i| ((i * 37 + 11) % VOCAB).to_le_bytes()).collect();
    let ids_t = tensor(context, OperandDescriptor::new(DataType::Int32, vec![TOKENS]), false).await?;
    context.write_tensor(&ids_t, &ids)?;
    let text = tensor(context, f32d(&[TOKENS, WIDTH]), false).await?;
    let a = tensor(context, f32d(&[LATENTS, WIDTH]), false).await?;
    let b = tensor(context, f32d(&[LATENTS, WIDTH]), false).await?;
    context.write_tensor(&a, &weights(99, (LATENTS * WIDTH) as usize, 1.0))?;
    let pixels = tensor(context, f32d(&[LATENTS, PATCH]), true).await?;
    let device_bytes = || context.memory_info().device_bytes;
    let mut peak = device_bytes();

    context.dispatch(&p.encoder, &[("ids".into(), ids_t.clone())], &[("embedding".into(), text.clone())])?;
    peak = peak.max(device_bytes());
    if unload {
        p.encoder.swap_out(Residency::Host).await?;
    }
    let (mut src, mut dst) = (a, b);
    for _ in 0..steps {
        context.dispatch(
            &p.denoiser,
            &[("latents".into(), src.clone()), ("embedding".into(), text.clone())],
            &[("latents".into(), dst.clone())],
        )?;
        peak = peak.max(device_bytes());
        std::mem::swap(&mut src, &mut dst);
    }
    if unload {
        p.denoiser.swap_out(Residency::Host).await?;
    }
    context.dispatch(&p.decoder, &[("latents".into(), src.clone())], &[("pixels".into(), pixels.clone())])?;
    peak = peak.max(device_bytes());
    let pixels = context.read_tensor(&pixels).await?;
    if unload {
        p.decoder.swap_out(Residency::Host).await?;
    }
    Ok(Run { pixels, peak_device_bytes: peak })
}
