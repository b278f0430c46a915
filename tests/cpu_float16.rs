#![cfg(not(target_arch = "wasm32"))] // native: `wasm-pack test` builds every test target for wasm32
//! The CPU backend's matmul and gemm on float16 operands (`Kernel::Float16Product`: a constant
//! B packed widened once; B an input streamed as float16 bits by one row, widened for the call
//! by larger products) against a float64 reference of the spec's formulas on the float16
//! values: one row and many, batches of A, B `[K, N]` and gemm's bTranspose `[N, K]`, alpha,
//! beta and C broadcast, B a constant and B an input, a single column, odd sizes, products large
//! enough to split between the threads. Each output is float16: rounded once from float32.

mod common;

use common::{block_on, Rng};
use half::f16;
use webnn_wgpu::backend::cpu::{CpuContext, CpuGraph};
use webnn_wgpu::backend::TensorDescriptor;
use webnn_wgpu::graph::GraphBuilder;
use webnn_wgpu::operand::{DataType, OperandDescriptor};
use webnn_wgpu::ops::matmul::GemmOptions;
use webnn_wgpu::ops::Op;
use webnn_wgpu::ContextOptions;

struct Case {
    a_shape: Vec<u32>,
    b_shape: [u32; 2],
    /// gemm's options and C's shape; `None`: matmul.
    gemm: Option<(GemmOptions, Vec<u32>)>,
    /// B an input of the graph rather than a constant.
    b_input: bool,
}

fn halves(rng: &mut Rng, n: usize) -> Vec<u16> {
    rng.floats(n, -1.0, 1.0).into_iter().map(|v| f16::from_f32(v).to_bits()).collect()
}

fn value(h: u16) -> f64 {
    f16::from_bits(h).to_f64()
}

/// The spec's formulas in float64 on the float16 values: the output's values and the sums of
/// the magnitudes of their terms.
fn reference(case: &Case, a: &[u16], b: &[u16], c: &[u16]) -> (Vec<f64>, Vec<f64>) {
    let k = *case.a_shape.last().unwrap() as usize;
    let rows = a.len() / k;
    let (options, c_shape) = case.gemm.clone().unwrap_or((GemmOptions::default(), vec![]));
    let [b0, b1] = case.b_shape.map(|d| d as usize);
    let n = if options.b_transpose { b0 } else { b1 };
    let op_b = |p: usize, j: usize| value(if options.b_transpose { b[j * b1 + p] } else { b[p * b1 + j] });
    let (mut values, mut magnitudes) = (Vec::new(), Vec::new());
    for i in 0..rows {
        for j in 0..n {
            let terms = (0..k).map(|p| value(a[i * k + p]) * op_b(p, j));
            let (mut sum, mut magnitude) = terms.fold((0.0, 0.0), |(s, m), t| (s + t, m + t.abs()));
            if case.gemm.is_some() {
                let c_value = value(match c_shape.as_slice() {
                    [] => c[0],
                    [cols] => c[if *cols == 1 { 0 } else { j }],
                    [r, cols] => c[if *r == 1 { 0 } else { i * *cols as usize } + if *cols == 1 { 0 } else { j }],
                    _ => unreachable!("C has rank 2 at most"),
                });
                sum = options.alpha * sum + options.beta * c_value;
                magnitude = options.alpha.abs() * magnitude + (options.beta * c_value).abs();
            }
            values.push(sum);
            magnitudes.push(magnitude);
        }
    }
    (values, magnitudes)
}

fn run(ctx: &CpuContext, case: &Case, a: &[u16], b: &[u16], c: &[u16]) -> Vec<f64> {
    let halves = |shape: &[u32]| OperandDescriptor::new(DataType::Float16, shape.to_vec());
    let mut g = GraphBuilder::new(ctx).unwrap();
    let a_operand = g.input("a", halves(&case.a_shape)).unwrap();
    let b_operand = if case.b_input {
        g.input("b", halves(&case.b_shape)).unwrap()
    } else {
        g.constant(halves(&case.b_shape), bytemuck::cast_slice(b)).unwrap()
    };
    let y = match &case.gemm {
        Some((options, c_shape)) => {
            let c_operand = g.constant(halves(c_shape), bytemuck::cast_slice(c)).unwrap();
            g.operator1(Op::Gemm(options.clone()), &[a_operand, b_operand, c_operand], "").unwrap()
        }
        None => g.operator1(Op::Matmul, &[a_operand, b_operand], "").unwrap(),
    };
    let out_shape = g.descriptor(y).unwrap().shape.clone();
    let graph = CpuGraph::compile(ctx, g.prepare_build(&[("y".to_string(), y)]).unwrap()).unwrap();
    let tensor = |shape: &[u32], readable, bytes: &[u16]| {
        let t = ctx.create_tensor(TensorDescriptor { operand: halves(shape), readable, writable: !readable }).unwrap();
        if !readable {
            ctx.write_tensor(&t, bytemuck::cast_slice(bytes)).unwrap();
        }
        t
    };
    let mut inputs = vec![("a".to_string(), tensor(&case.a_shape, false, a))];
    if case.b_input {
        inputs.push(("b".to_string(), tensor(&case.b_shape, false, b)));
    }
    let y_tensor = tensor(&out_shape, true, &[]);
    // Twice: the second dispatch finds B packed (a constant) or packs it again (an input).
    let mut out = Vec::new();
    for _ in 0..2 {
        ctx.dispatch(&graph, &inputs, &[("y".into(), y_tensor.clone())]).unwrap();
        let bytes = block_on(ctx.read_tensor(&y_tensor)).unwrap();
        out = bytes.chunks_exact(2).map(|h| value(u16::from_le_bytes([h[0], h[1]]))).collect();
    }
    out
}

#[test]
fn float16_products_match_the_float64_reference() {
    let ctx = CpuContext::new(ContextOptions::default());
    let gemm = |b_transpose, alpha, beta, c_shape: &[u32]| {
        Some((GemmOptions { b_transpose, alpha, beta, has_c: true, ..GemmOptions::default() }, c_shape.to_vec()))
    };
    let matmul = |a_shape: &[u32], b_shape: [u32; 2]| Case { a_shape: a_shape.to_vec(), b_shape, gemm: None, b_input: false };
    let cases = [
        matmul(&[1, 37], [37, 20]),
        matmul(&[2, 3, 37], [37, 21]),
        matmul(&[1, 512], [512, 600]),
        matmul(&[64, 300], [300, 70]),
        matmul(&[7, 16], [16, 1]),
        matmul(&[3, 5], [5, 3]),
        Case { b_input: true, ..matmul(&[5, 16], [16, 9]) },
        Case { b_input: true, ..matmul(&[1, 16], [16, 9]) },
        Case { b_input: true, ..matmul(&[1, 512], [512, 600]) },
        Case { b_input: true, gemm: gemm(true, 0.5, 2.0, &[24]), ..matmul(&[1, 37], [24, 37]) },
        Case { gemm: gemm(true, 0.5, 2.0, &[24]), ..matmul(&[1, 37], [24, 37]) },
        Case { gemm: gemm(true, 1.5, -1.0, &[13, 1]), ..matmul(&[13, 37], [24, 37]) },
        Case { gemm: gemm(false, 1.0, 0.5, &[]), ..matmul(&[13, 37], [37, 24]) },
        Case { gemm: gemm(true, 1.0, 1.0, &[1, 700]), ..matmul(&[1, 300], [700, 300]) },
    ];
    for (seed, case) in cases.iter().enumerate() {
        let mut rng = Rng::new(seed as u64 + 160);
        let count = |shape: &[u32]| shape.iter().product::<u32>() as usize;
        let a = halves(&mut rng, count(&case.a_shape));
        let b = halves(&mut rng, count(&case.b_shape));
        let c = halves(&mut rng, case.gemm.as_ref().map_or(0, |(_, s)| count(s)));
        let (expected, magnitudes) = reference(case, &a, &b, &c);
        let got = run(&ctx, case, &a, &b, &c);
        let what = format!("{} a {:?} b {:?}{}", if case.gemm.is_some() { "gemm" } else { "matmul" }, case.a_shape, case.b_shape, if case.b_input { " (input)" } else { "" });
        assert_eq!(got.len(), expected.len(), "{what}: output length");
        let k = *case.a_shape.last().unwrap() as f64;
        for (index, ((&g, &e), &m)) in got.iter().zip(&expected).zip(&magnitudes).enumerate() {
            // float32 accumulation (Higham, both orders), then one rounding to float16.
            let bound = (k + 4.0) * f64::from(f32::EPSILON) * m + e.abs() / 2048.0 + 2f64.powi(-25);
            assert!((g - e).abs() <= bound, "{what}: element {index} is {g}, the reference {e} (bound {bound})");
        }
        assert!(got.iter().any(|&v| v != 0.0), "{what}: degenerate");
    }
}
