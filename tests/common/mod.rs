//! Shared helpers of the native tests: a context on the machine's adapter, running one operator
//! on the GPU, and comparing against the float64 reference.
#![allow(dead_code)]

use webnn_wgpu::graph::{DataType, GraphBuilder, OperandDescriptor};
use webnn_wgpu::ops::{self, HostTensor, Op};
use webnn_wgpu::backend::webgpu::{Context, ContextOptions, Tensor, TensorDescriptor};
use webnn_wgpu::Result;

pub mod weight_files;
pub mod wpt;

pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    pollster::block_on(f)
}

pub fn context() -> Context {
    block_on(Context::new(ContextOptions::default())).expect("a WebGPU adapter (llvmpipe or a GPU)")
}

/// A small deterministic generator (xorshift) so tests need no extra crate.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E3779B97F4A7C15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// Uniform in [lo, hi).
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// `n` float32 values uniform in [lo, hi).
    pub fn floats(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n).map(|_| self.uniform(lo as f64, hi as f64) as f32).collect()
    }
    pub fn below(&mut self, n: u32) -> u32 {
        (self.next_u64() % n as u64) as u32
    }
    /// A random shape of the given rank with dimensions in 1..=max_dim.
    pub fn shape(&mut self, rank: usize, max_dim: u32) -> Vec<u32> {
        (0..rank).map(|_| 1 + self.below(max_dim)).collect()
    }
    /// A random int64/uint64 tensor mixing small values, values near 2^32 and 2^53 and beyond,
    /// the type's extremes and full-range bit patterns (negative ones for int64), so that carries,
    /// borrows, sign handling and the words above f64's precision are all exercised.
    pub fn wide_tensor(&mut self, data_type: DataType, shape: &[u32]) -> HostTensor {
        let d = OperandDescriptor::new(data_type, shape.to_vec());
        let values = (0..d.element_count())
            .map(|_| {
                let r = self.next_u64();
                let small = (r >> 8) as i128 % 201 - 100;
                match self.below(7) {
                    0 => small,
                    1 => (1i128 << 32) + small,
                    2 => (1i128 << 53) + small,
                    3 => -(1i128 << 53) + small,
                    4 => (if self.below(2) == 0 { i64::MIN as i128 } else { u64::MAX as i128 }) + small.rem_euclid(3),
                    5 => (r >> self.below(64)) as i128,
                    _ => r as i128,
                }
            })
            .collect();
        HostTensor::from_exact(d, values).unwrap()
    }
    /// A tensor of random values in [lo, hi), rounded to the data type.
    pub fn tensor(&mut self, data_type: DataType, shape: &[u32], lo: f64, hi: f64) -> HostTensor {
        let d = OperandDescriptor::new(data_type, shape.to_vec());
        let data = (0..d.element_count())
            .map(|_| {
                let v = self.uniform(lo, hi);
                ops::reference::round_to(
                    if data_type.is_float() { v } else { v.floor() },
                    data_type,
                )
            })
            .collect();
        HostTensor::new(d, data).unwrap()
    }
}

/// Builds a graph of one operator over `inputs` (graph inputs, or constants where `constant[i]`),
/// dispatches it and reads every output back.
pub fn run_op(
    ctx: &Context,
    op: &Op,
    inputs: &[HostTensor],
    constant: &[bool],
) -> Result<Vec<HostTensor>> {
    block_on(async {
        let mut builder = GraphBuilder::new(ctx)?;
        let mut operands = Vec::new();
        let mut feeds = Vec::new();
        for (i, input) in inputs.iter().enumerate() {
            if constant.get(i).copied().unwrap_or(false) {
                operands.push(builder.constant(input.descriptor.clone(), &input.to_bytes())?);
            } else {
                let name = format!("in{i}");
                operands.push(builder.input(&name, input.descriptor.clone())?);
                let t = ctx
                    .create_tensor(TensorDescriptor {
                        operand: input.descriptor.clone(),
                        readable: false,
                        writable: true,
                    })
                    .await?;
                ctx.write_tensor(&t, &input.to_bytes())?;
                feeds.push((name, t));
            }
        }
        let outputs = builder.operator(op.clone(), &operands, "")?;
        let named: Vec<(String, webnn_wgpu::Operand)> = outputs
            .iter()
            .enumerate()
            .map(|(i, &o)| (format!("out{i}"), o))
            .collect();
        let descriptors: Vec<OperandDescriptor> = outputs
            .iter()
            .map(|&o| builder.descriptor(o).unwrap().clone())
            .collect();
        let graph = builder.build(&named).await?;
        let mut results: Vec<(String, Tensor)> = Vec::new();
        for (i, d) in descriptors.iter().enumerate() {
            let t = ctx
                .create_tensor(TensorDescriptor {
                    operand: d.clone(),
                    readable: true,
                    writable: false,
                })
                .await?;
            results.push((format!("out{i}"), t));
        }
        ctx.dispatch(&graph, &feeds, &results)?;
        let mut out = Vec::new();
        for (d, (_, t)) in descriptors.iter().zip(&results) {
            let bytes = ctx.read_tensor(t).await?;
            out.push(HostTensor::from_bytes(d.clone(), &bytes)?);
        }
        Ok(out)
    })
}

/// The reference outputs of one operator.
pub fn reference_op(op: &Op, inputs: &[HostTensor]) -> Result<Vec<HostTensor>> {
    let descs: Vec<&OperandDescriptor> = inputs.iter().map(|t| &t.descriptor).collect();
    let outputs = ops::validate(op, &descs)?;
    ops::reference(op, inputs, &outputs)
}

/// Distance in units of the last place between two values of a float type.
pub fn ulp_distance(a: f64, b: f64, data_type: DataType) -> u64 {
    if a == b || (a.is_nan() && b.is_nan()) {
        return 0;
    }
    let bits = |v: f64| -> i64 {
        match data_type {
            DataType::Float16 => {
                let b = half::f16::from_f64(v).to_bits() as i64;
                if b & 0x8000 != 0 {
                    -(b & 0x7fff)
                } else {
                    b
                }
            }
            _ => {
                let b = (v as f32).to_bits() as i64;
                if b & 0x8000_0000 != 0 {
                    -(b & 0x7fff_ffff)
                } else {
                    b
                }
            }
        }
    };
    (bits(a) - bits(b)).unsigned_abs()
}

/// Asserts GPU results equal the reference within `ulp` units in the last place, or `abs`
/// absolute error, whichever is looser; integers must match exactly.
pub fn assert_close(gpu: &[HostTensor], reference: &[HostTensor], ulp: u64, abs: f64, what: &str) {
    assert_eq!(gpu.len(), reference.len(), "{what}: output count");
    for (k, (g, r)) in gpu.iter().zip(reference).enumerate() {
        assert_eq!(g.descriptor, r.descriptor, "{what}: output {k} descriptor");
        if g.descriptor.data_type.is_wide() {
            // Exact 64-bit values (their doubles may round several to the same value).
            assert_eq!(g.exact.len(), r.exact.len(), "{what}: output {k} element count");
            if let Some(i) = (0..g.exact.len()).find(|&i| g.exact[i] != r.exact[i]) {
                panic!(
                    "{what}: output {k} element {i}: gpu {} vs reference {} (shape {:?})",
                    g.exact[i], r.exact[i], g.descriptor.shape
                );
            }
            continue;
        }
        for (i, (&a, &b)) in g.data.iter().zip(&r.data).enumerate() {
            let t = g.descriptor.data_type;
            let ok = if t.is_float() {
                // The reference is float64: round it to the output type first.
                let b = ops::reference::round_to(b, t);
                ulp_distance(a, b, t) <= ulp || (a - b).abs() <= abs || (a.is_infinite() && a == b)
            } else {
                a == b
            };
            assert!(
                ok,
                "{what}: output {k} element {i}: gpu {a} vs reference {b} (shape {:?})",
                g.descriptor.shape
            );
        }
    }
}

/// Runs an operator on the GPU and checks it against the reference.
pub fn check_op(ctx: &Context, op: &Op, inputs: &[HostTensor], ulp: u64, abs: f64) {
    let what = format!(
        "{} on {:?}",
        op.name(),
        inputs
            .iter()
            .map(|t| t.descriptor.to_string())
            .collect::<Vec<_>>()
    );
    let reference =
        reference_op(op, inputs).unwrap_or_else(|e| panic!("{what}: reference failed: {e}"));
    for constant in [false, true] {
        let flags = vec![constant; inputs.len()];
        let gpu =
            run_op(ctx, op, inputs, &flags).unwrap_or_else(|e| panic!("{what}: gpu failed: {e}"));
        assert_close(&gpu, &reference, ulp, abs, &what);
    }
}
pub mod moved;

/// Builds a graph of `ops` (each over earlier operands: the `inputs`, all graph inputs, then one
/// operand per operator), dispatches it and reads back the last operator's output.
pub fn run_graph(ctx: &Context, inputs: &[HostTensor], ops: &[(Op, Vec<usize>)]) -> Result<HostTensor> {
    block_on(async {
        let mut builder = GraphBuilder::new(ctx)?;
        let mut operands = Vec::new();
        let mut feeds = Vec::new();
        for (i, input) in inputs.iter().enumerate() {
            let name = format!("in{i}");
            operands.push(builder.input(&name, input.descriptor.clone())?);
            let t = ctx
                .create_tensor(TensorDescriptor { operand: input.descriptor.clone(), readable: false, writable: true })
                .await?;
            ctx.write_tensor(&t, &input.to_bytes())?;
            feeds.push((name, t));
        }
        for (op, args) in ops {
            let args: Vec<_> = args.iter().map(|&a| operands[a]).collect();
            operands.push(builder.operator1(op.clone(), &args, "")?);
        }
        let Some(&last) = operands.last() else {
            return Err(webnn_wgpu::Error::Type("a graph needs an operand".into()));
        };
        let d = builder.descriptor(last)?.clone();
        let graph = builder.build(&[("out".to_string(), last)]).await?;
        let t = ctx.create_tensor(TensorDescriptor { operand: d.clone(), readable: true, writable: false }).await?;
        ctx.dispatch(&graph, &feeds, &[("out".to_string(), t.clone())])?;
        HostTensor::from_bytes(d, &ctx.read_tensor(&t).await?)
    })
}
