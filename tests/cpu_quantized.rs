#![cfg(not(target_arch = "wasm32"))] // native: `wasm-pack test` builds every test target for wasm32
//! The CPU backend's matmul and gemm whose B is `dequantizeLinear` of an 8-bit constant
//! (`Kernel::Dequantized`: the integers packed once, widened in the kernel, each column scaled at
//! the end) against a float64 reference of dequantize-then-multiply written from the spec's
//! formulas: int8 and uint8, a scale per tensor and per column, zero points whose differences fit
//! int8 and ones that do not, odd depths and widths, one row (GEMV), batches of A, gemm with
//! aTranspose, bTranspose and C, scales reshaped from one dimension (as ORT's WebNN EP builds
//! them), products large enough to split between the threads. Every graph
//! also runs one operator at a time (`WEBNN_WGPU_FUSION=0`, the float32 dequantizeLinear then
//! the float32 product) within the same bound; scales that are not per column, and a B read
//! twice, keep the operators apart. One test: the variable is process-wide.

mod common;

use common::{block_on, Rng};
use webnn_wgpu::backend::cpu::{CpuContext, CpuGraph};
use webnn_wgpu::backend::TensorDescriptor;
use webnn_wgpu::graph::GraphBuilder;
use webnn_wgpu::operand::{DataType, OperandDescriptor};
use webnn_wgpu::ops::elementwise_binary::BinaryOp;
use webnn_wgpu::ops::matmul::GemmOptions;
use webnn_wgpu::ops::Op;
use webnn_wgpu::ContextOptions;

/// One product: A of `a_shape`, B = dequantizeLinear(q, scale, zeroPoint) with q of `q_shape`,
/// scale and zero point of `param_shape`; `gemm` holds gemm's options and C's shape.
struct Case {
    a_shape: Vec<u32>,
    q_type: DataType,
    q_shape: [u32; 2],
    param_shape: [u32; 2],
    /// q and the zero points are drawn from these ranges.
    q_range: (i32, i32),
    zero_point_range: (i32, i32),
    gemm: Option<(GemmOptions, Vec<u32>)>,
    /// Scale and zero point as constants of one dimension reshaped to `param_shape`, as ORT's
    /// WebNN EP gives them.
    reshaped: bool,
}

struct Data {
    a: Vec<f32>,
    q: Vec<i32>,
    scale: Vec<f32>,
    zero_point: Vec<i32>,
    c: Vec<f32>,
}

fn draw(case: &Case, rng: &mut Rng) -> Data {
    let count = |shape: &[u32]| shape.iter().product::<u32>() as usize;
    let ints = |rng: &mut Rng, n: usize, (lo, hi): (i32, i32)| (0..n).map(|_| lo + rng.below((hi - lo + 1) as u32) as i32).collect();
    let params = count(&case.param_shape);
    Data {
        a: rng.floats(count(&case.a_shape), -1.0, 1.0),
        q: ints(rng, count(&case.q_shape), case.q_range),
        scale: rng.floats(params, 0.001, 0.05),
        zero_point: ints(rng, params, case.zero_point_range),
        c: case.gemm.as_ref().map_or(Vec::new(), |(_, c_shape)| rng.floats(count(c_shape), -1.0, 1.0)),
    }
}

fn bytes_of(data_type: DataType, values: &[i32]) -> Vec<u8> {
    match data_type {
        DataType::Int8 => values.iter().map(|&v| v as i8 as u8).collect(),
        _ => values.iter().map(|&v| v as u8).collect(),
    }
}

/// The graph `product(a, dequantizeLinear(q, scale, zeroPoint))`; with `twice`, a second
/// product also reads the dequantized B (its output added to the first's).
fn build(ctx: &CpuContext, case: &Case, data: &Data, twice: bool) -> CpuGraph {
    let f32s = |shape: &[u32]| OperandDescriptor::new(DataType::Float32, shape.to_vec());
    let ints = |shape: &[u32]| OperandDescriptor::new(case.q_type, shape.to_vec());
    let mut g = GraphBuilder::new(ctx).unwrap();
    let a = g.input("a", f32s(&case.a_shape)).unwrap();
    let q = g.constant(ints(&case.q_shape), &bytes_of(case.q_type, &data.q)).unwrap();
    let stored = if case.reshaped { vec![case.param_shape.iter().product()] } else { case.param_shape.to_vec() };
    let mut scale = g.constant(f32s(&stored), bytemuck::cast_slice(&data.scale)).unwrap();
    let mut zero_point = g.constant(ints(&stored), &bytes_of(case.q_type, &data.zero_point)).unwrap();
    if case.reshaped {
        let reshape = Op::Reshape { new_shape: case.param_shape.to_vec() };
        scale = g.operator1(reshape.clone(), &[scale], "").unwrap();
        zero_point = g.operator1(reshape, &[zero_point], "").unwrap();
    }
    let b = g.operator1(Op::DequantizeLinear, &[q, scale, zero_point], "").unwrap();
    let product = |g: &mut GraphBuilder| match &case.gemm {
        Some((options, c_shape)) => {
            let c = g.constant(f32s(c_shape), bytemuck::cast_slice(&data.c)).unwrap();
            g.operator1(Op::Gemm(options.clone()), &[a, b, c], "").unwrap()
        }
        None => g.operator1(Op::Matmul, &[a, b], "").unwrap(),
    };
    let mut y = product(&mut g);
    if twice {
        let again = product(&mut g);
        y = g.operator1(Op::Binary(BinaryOp::Add), &[y, again], "").unwrap();
    }
    CpuGraph::compile(ctx, g.prepare_build(&[("y".to_string(), y)]).unwrap()).unwrap()
}

fn run(ctx: &CpuContext, graph: &CpuGraph, a_shape: &[u32], a: &[f32], out_shape: &[u32]) -> Vec<f32> {
    let tensor = |shape: &[u32], readable| {
        let operand = OperandDescriptor::new(DataType::Float32, shape.to_vec());
        ctx.create_tensor(TensorDescriptor { operand, readable, writable: !readable }).unwrap()
    };
    let a_tensor = tensor(a_shape, false);
    ctx.write_tensor(&a_tensor, bytemuck::cast_slice(a)).unwrap();
    let y = tensor(out_shape, true);
    ctx.dispatch(graph, &[("a".into(), a_tensor)], &[("y".into(), y.clone())]).unwrap();
    bytemuck::cast_slice(&block_on(ctx.read_tensor(&y)).unwrap()).to_vec()
}

/// The spec's formulas in float64: `B = (q - zeroPoint) * scale`, the scale and zero point of
/// element (r, c) at (r / (rows / paramRows), c / (cols / paramCols)); then
/// `matmul(A, B)` over every row of A, or gemm's `alpha * op(A) * op(B) + beta * C` with C
/// broadcast. Returns the output's shape, each element's value and the sum of the magnitudes of
/// its terms (the scale of its rounding error).
fn reference(case: &Case, data: &Data) -> (Vec<u32>, Vec<f64>, Vec<f64>) {
    let [r, c] = case.q_shape.map(|d| d as usize);
    let [pr, pc] = case.param_shape.map(|d| d as usize);
    let b = |i: usize, j: usize| {
        let p = (i / (r / pr)) * pc + j / (c / pc);
        (data.q[i * c + j] - data.zero_point[p]) as f64 * data.scale[p] as f64
    };
    let a_rank = case.a_shape.len();
    let (a0, a1) = (case.a_shape[a_rank - 2] as usize, case.a_shape[a_rank - 1] as usize);
    let batches = case.a_shape[..a_rank - 2].iter().product::<u32>() as usize;
    let (options, c_shape) = case.gemm.clone().unwrap_or((GemmOptions::default(), vec![]));
    let (m, k) = if options.a_transpose { (a1, a0) } else { (a0, a1) };
    let n = if options.b_transpose { r } else { c };
    let a = |batch: usize, i: usize, p: usize| {
        let index = if options.a_transpose { p * a1 + i } else { i * a1 + p };
        data.a[batch * a0 * a1 + index] as f64
    };
    let op_b = |p: usize, j: usize| if options.b_transpose { b(j, p) } else { b(p, j) };
    let (mut values, mut magnitudes) = (Vec::new(), Vec::new());
    for batch in 0..batches {
        for i in 0..m {
            for j in 0..n {
                let (mut sum, mut magnitude) = (0.0, 0.0);
                for p in 0..k {
                    sum += a(batch, i, p) * op_b(p, j);
                    magnitude += (a(batch, i, p) * op_b(p, j)).abs();
                }
                if case.gemm.is_some() {
                    let (alpha, beta) = (options.alpha, options.beta);
                    let c_value = match c_shape.as_slice() {
                        [] => data.c[0],
                        [cols] => data.c[if *cols == 1 { 0 } else { j }],
                        [rows, cols] => data.c[if *rows == 1 { 0 } else { i * *cols as usize } + if *cols == 1 { 0 } else { j }],
                        _ => unreachable!("C has rank 2 at most"),
                    } as f64;
                    sum = alpha * sum + beta * c_value;
                    magnitude = alpha.abs() * magnitude + (beta * c_value).abs();
                }
                values.push(sum);
                magnitudes.push(magnitude);
            }
        }
    }
    let mut shape = case.a_shape[..a_rank - 2].to_vec();
    shape.extend([m as u32, n as u32]);
    (shape, values, magnitudes)
}

/// float32 accumulation over k terms, the scaling and gemm's additions: at most (k + 4) roundings
/// of the terms' magnitude (Higham's bound, doubled for the two orders of summation).
fn check(what: &str, got: &[f32], expected: &[f64], magnitudes: &[f64], k: usize) {
    assert_eq!(got.len(), expected.len(), "{what}: output length");
    let bound = |magnitude: f64| 2.0 * (k + 4) as f64 * f64::from(f32::EPSILON) / 2.0 * magnitude + 1e-30;
    for (index, ((&g, &e), &magnitude)) in got.iter().zip(expected).zip(magnitudes).enumerate() {
        assert!((g as f64 - e).abs() <= bound(magnitude), "{what}: element {index} is {g}, the reference {e} (bound {})", bound(magnitude));
    }
    assert!(got.iter().any(|&v| v != 0.0), "{what}: degenerate");
}

fn matmul(a_shape: &[u32], q_type: DataType, q_shape: [u32; 2], per_column: bool, q_range: (i32, i32), zero_point_range: (i32, i32)) -> Case {
    let param_shape = if per_column { [1, q_shape[1]] } else { [1, 1] };
    Case { a_shape: a_shape.to_vec(), q_type, q_shape, param_shape, q_range, zero_point_range, gemm: None, reshaped: false }
}

#[test]
fn dequantized_products_match_the_float64_reference() {
    use DataType::{Int8, Uint8};
    let ctx = CpuContext::new(ContextOptions::default());
    let gemm = |a_transpose, b_transpose, alpha, beta| GemmOptions { a_transpose, b_transpose, has_c: true, alpha, beta, ..GemmOptions::default() };
    // Differences q - zeroPoint that fit int8 (symmetric int8, uint8 around 128) and that do not.
    let (int8_fits, int8_wide) = (((-127, 127), (0, 0)), ((-128, 127), (-6, 6)));
    let (uint8_fits, uint8_wide) = (((0, 255), (128, 128)), ((0, 255), (0, 255)));
    let fused = [
        matmul(&[1, 37], Int8, [37, 20], true, int8_fits.0, int8_fits.1),
        matmul(&[9, 37], Int8, [37, 20], false, int8_wide.0, int8_wide.1),
        Case { reshaped: true, ..matmul(&[2, 3, 300], Uint8, [300, 8], true, uint8_fits.0, uint8_fits.1) },
        matmul(&[40, 300], Uint8, [300, 21], true, uint8_wide.0, uint8_wide.1),
        matmul(&[1, 1, 5], Uint8, [5, 3], false, uint8_wide.0, uint8_wide.1),
        // Large enough to split between the threads: the GEMV and the tiles.
        matmul(&[1, 512], Int8, [512, 600], true, int8_fits.0, int8_fits.1),
        matmul(&[64, 512], Uint8, [512, 600], true, uint8_wide.0, uint8_wide.1),
        Case { q_shape: [24, 37], param_shape: [24, 1], gemm: Some((gemm(false, true, 0.5, 2.0), vec![24])), reshaped: true, ..matmul(&[1, 37], Int8, [37, 24], false, int8_wide.0, int8_wide.1) },
        Case { q_shape: [24, 37], param_shape: [24, 1], gemm: Some((gemm(true, true, 1.5, -1.0), vec![13, 1])), ..matmul(&[37, 13], Uint8, [37, 24], false, uint8_fits.0, uint8_fits.1) },
        Case { gemm: Some((gemm(false, false, 1.0, 1.0), vec![1, 24])), ..matmul(&[13, 37], Int8, [37, 24], true, int8_fits.0, int8_fits.1) },
        Case { q_shape: [24, 37], param_shape: [1, 1], gemm: Some((gemm(false, true, 1.0, 0.5), vec![])), ..matmul(&[13, 37], Uint8, [37, 24], false, uint8_wide.0, uint8_wide.1) },
    ];
    // A scale per block of rows (along k), not per column, stays a separate dequantizeLinear.
    let apart = [Case { param_shape: [2, 20], ..matmul(&[3, 36], Int8, [36, 20], true, int8_fits.0, int8_fits.1) }];
    for (seed, (case, absorbed)) in fused.iter().map(|c| (c, 1)).chain(apart.iter().map(|c| (c, 0))).enumerate() {
        let data = draw(case, &mut Rng::new(seed as u64 + 70));
        let (shape, expected, magnitudes) = reference(case, &data);
        let k = *case.a_shape.last().unwrap() as usize;
        let k = if case.gemm.as_ref().is_some_and(|(o, _)| o.a_transpose) { case.a_shape[0] as usize } else { k };
        let what = format!(
            "{} a {:?} x dequantizeLinear({} {:?}, scale {:?})",
            if case.gemm.is_some() { "gemm" } else { "matmul" },
            case.a_shape,
            case.q_type,
            case.q_shape,
            case.param_shape
        );
        let graph = build(&ctx, case, &data, false);
        assert_eq!(graph.fused_operators(), absorbed, "{what}: the dequantizeLinear absorbed");
        check(&what, &run(&ctx, &graph, &case.a_shape, &data.a, &shape), &expected, &magnitudes, k);
        std::env::set_var("WEBNN_WGPU_FUSION", "0");
        let alone = build(&ctx, case, &data, false);
        std::env::remove_var("WEBNN_WGPU_FUSION");
        assert_eq!(alone.fused_operators(), 0, "{what}");
        check(&format!("{what}, unfused"), &run(&ctx, &alone, &case.a_shape, &data.a, &shape), &expected, &magnitudes, k);
        // A B read by two products is computed once, as a float32 operand.
        let twice = build(&ctx, case, &data, true);
        assert_eq!(twice.fused_operators(), 0, "{what}, B read twice");
        let doubled: Vec<f64> = expected.iter().map(|v| 2.0 * v).collect();
        let magnitudes: Vec<f64> = magnitudes.iter().map(|v| 2.0 * v).collect();
        check(&format!("{what}, B read twice"), &run(&ctx, &twice, &case.a_shape, &data.a, &shape), &doubled, &magnitudes, k);
    }
}
