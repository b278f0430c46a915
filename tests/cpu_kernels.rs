#![cfg(not(target_arch = "wasm32"))] // native: `wasm-pack test` builds every test target for wasm32
//! The CPU backend's float32 GEMM and convolution kernels against the crate's float64 references
//! (`ops::reference`), over many shapes, every layout and option, and hostile lengths.
//!
//! Tolerance: a sum of `k` float32 products rounds once per product and once per addition, each
//! error at most `u = 2^-24` times a partial sum, itself at most `S = sum |a_p * b_p|` (plus
//! `|beta * c|` or `|bias|`). Those errors are independent roundings, so their sum stays within a
//! few `sqrt(k) * u * S`; the check allows `(4 * sqrt(k) + 2) * u * S` per element, with `S`
//! computed by the same reference on the inputs' absolute values. A dropped or repeated term
//! (about `|a_p * b_p|`, typically 0.25) exceeds that by orders of magnitude.

mod common;

use common::Rng;
use webnn_wgpu::backend::cpu::kernels::conv2d::{self as conv, PackedFilter};
use webnn_wgpu::backend::cpu::kernels::gemm::{self, Matrix};
use webnn_wgpu::ops::conv2d::*;
use webnn_wgpu::ops::matmul::{validate_gemm, validate_matmul, GemmOptions};
use webnn_wgpu::ops::{self, HostTensor, Op};
use webnn_wgpu::{DataType, OperandDescriptor};

const SIZES: [usize; 12] = [1, 2, 3, 5, 7, 8, 16, 17, 33, 64, 100, 257];

/// xorshift64*: deterministic values in [-1, 1].
fn descriptor(shape: &[u32]) -> OperandDescriptor {
    OperandDescriptor::new(DataType::Float32, shape.to_vec())
}

fn tensor(shape: &[u32], values: &[f32], absolute: bool) -> HostTensor {
    let data = values.iter().map(|&v| if absolute { v.abs() as f64 } else { v as f64 }).collect();
    HostTensor::new(descriptor(shape), data).unwrap()
}

/// The reference's output, and its output on absolute values (the error scale `S`).
fn reference(op: &Op, abs_op: &Op, inputs: &[(&[u32], &[f32])], output: &OperandDescriptor) -> (Vec<f64>, Vec<f64>) {
    let run = |op: &Op, absolute: bool| {
        let tensors: Vec<HostTensor> = inputs.iter().map(|(s, v)| tensor(s, v, absolute)).collect();
        ops::reference(op, &tensors, std::slice::from_ref(output)).unwrap().remove(0).data
    };
    (run(op, false), run(abs_op, true))
}

/// The first element outside the tolerance, if any.
fn mismatch(got: &[f32], expected: &[f64], scale: &[f64], k: usize) -> Option<String> {
    if got.len() != expected.len() {
        return Some(format!("{} elements, expected {}", got.len(), expected.len()));
    }
    let factor = (4.0 * (k as f64).sqrt() + 2.0) * f64::powi(2.0, -24);
    (0..got.len()).find_map(|i| {
        let error = (got[i] as f64 - expected[i]).abs();
        // NaN errors fail too.
        (error.is_nan() || error > factor * scale[i]).then(|| {
            format!("element {i}: got {}, expected {} (error {error:e}, allowed {:e})", got[i], expected[i], factor * scale[i])
        })
    })
}

fn assert_close(what: &str, got: &[f32], expected: &[f64], scale: &[f64], k: usize) {
    if let Some(m) = mismatch(got, expected, scale, k) {
        panic!("{what}: {m}");
    }
}

#[test]
fn the_check_catches_one_wrong_element() {
    let expected = vec![0.5, -0.25, 1.0];
    let scale = vec![1.0; 3];
    assert!(mismatch(&[0.5, -0.25, 1.0], &expected, &scale, 100).is_none());
    assert!(mismatch(&[0.5, -0.2499, 1.0], &expected, &scale, 100).is_some());
    assert!(mismatch(&[0.5, f32::NAN, 1.0], &expected, &scale, 100).is_some());
}

/// Runs matmul of the given shapes against the reference.
fn check_matmul(rng: &mut Rng, a_shape: &[u32], b_shape: &[u32]) {
    let output = validate_matmul(&[&descriptor(a_shape), &descriptor(b_shape)]).unwrap().remove(0);
    let a = rng.floats(descriptor(a_shape).element_count() as usize, -1.0, 1.0);
    let b = rng.floats(descriptor(b_shape).element_count() as usize, -1.0, 1.0);
    let mut out = vec![f32::NAN; output.element_count() as usize];
    gemm::matmul(&a, a_shape, &b, b_shape, &mut out).unwrap();
    let (expected, scale) = reference(&Op::Matmul, &Op::Matmul, &[(a_shape, &a), (b_shape, &b)], &output);
    let k = a_shape[a_shape.len() - 1] as usize;
    assert_close(&format!("matmul {a_shape:?} x {b_shape:?}"), &out, &expected, &scale, k);
    if let [k, n] = *b_shape {
        // B packed once, as a constant weight is.
        let packed = gemm::Packed::right(gemm::Matrix::row_major(&b, k as usize, n as usize)).unwrap();
        let mut again = vec![f32::NAN; out.len()];
        gemm::matmul_prepacked(&a, a_shape, &b, b_shape, Some(&packed), &mut again).unwrap();
        assert_close(&format!("matmul {a_shape:?} x packed {b_shape:?}"), &again, &expected, &scale, k as usize);
    }
}

#[test]
fn matmul_every_size() {
    let mut rng = Rng::new(1);
    for m in SIZES {
        for n in SIZES {
            for k in SIZES {
                check_matmul(&mut rng, &[m as u32, k as u32], &[k as u32, n as u32]);
            }
        }
    }
}

#[test]
fn matmul_broadcasts_batches() {
    let mut rng = Rng::new(2);
    let cases: [(&[u32], &[u32]); 10] = [
        (&[3, 5, 7], &[7, 4]),
        (&[2, 3, 1, 17], &[17, 9]),
        (&[5, 7], &[4, 7, 6]),
        (&[2, 1, 5, 8], &[1, 3, 8, 6]),
        (&[1, 4, 3], &[2, 3, 33]),
        (&[2, 3, 4, 5], &[2, 3, 5, 2]),
        (&[3, 1, 1, 2, 16], &[4, 1, 16, 1]),
        (&[6, 1, 9], &[6, 9, 17]),
        (&[2, 64, 100], &[2, 100, 1]),
        (&[1, 1, 1, 3, 2], &[2, 5]),
    ];
    for (a, b) in cases {
        check_matmul(&mut rng, a, b);
    }
}

#[test]
fn gemm_every_transpose_alpha_beta_and_c() {
    let mut rng = Rng::new(3);
    for (m, k, n) in [(5, 7, 3), (1, 33, 17), (17, 33, 1), (1, 1, 1), (64, 100, 33), (8, 257, 16)] {
        let c_shapes: [Option<Vec<u32>>; 8] = [
            None,
            Some(vec![]),
            Some(vec![1]),
            Some(vec![n]),
            Some(vec![1, n]),
            Some(vec![m, 1]),
            Some(vec![m, n]),
            Some(vec![1, 1]),
        ];
        for (a_transpose, b_transpose) in [(false, false), (true, false), (false, true), (true, true)] {
            for (alpha, beta) in [(1.0, 1.0), (0.5, 0.0), (-2.0, -0.75)] {
                for c_shape in &c_shapes {
                    let a_shape = if a_transpose { [k, m] } else { [m, k] };
                    let b_shape = if b_transpose { [n, k] } else { [k, n] };
                    let options = GemmOptions { alpha, beta, a_transpose, b_transpose, has_c: c_shape.is_some() };
                    let abs_options = GemmOptions { alpha: alpha.abs(), beta: beta.abs(), ..options.clone() };
                    let mut descriptors = vec![descriptor(&a_shape), descriptor(&b_shape)];
                    descriptors.extend(c_shape.iter().map(|s| descriptor(s)));
                    let refs: Vec<&OperandDescriptor> = descriptors.iter().collect();
                    let output = validate_gemm(&options, &refs).unwrap().remove(0);
                    let a = rng.floats((m * k) as usize, -1.0, 1.0);
                    let b = rng.floats((k * n) as usize, -1.0, 1.0);
                    let c = c_shape.as_ref().map(|s| rng.floats(descriptor(s).element_count() as usize, -1.0, 1.0));
                    let mut out = vec![f32::NAN; (m * n) as usize];
                    let c_arg = c.as_deref().zip(c_shape.as_deref());
                    let (alpha32, beta32) = (alpha as f32, beta as f32);
                    gemm::gemm_op(&a, &a_shape, &b, &b_shape, c_arg, alpha32, beta32, a_transpose, b_transpose, &mut out)
                        .unwrap();
                    let mut inputs: Vec<(&[u32], &[f32])> = vec![(&a_shape, &a), (&b_shape, &b)];
                    inputs.extend(c_arg.map(|(c, s)| (s, c)));
                    let (expected, scale) = reference(&Op::Gemm(options), &Op::Gemm(abs_options), &inputs, &output);
                    let what = format!("gemm {m}x{k}x{n} aT {a_transpose} bT {b_transpose} alpha {alpha} beta {beta} c {c_shape:?}");
                    assert_close(&what, &out, &expected, &scale, k as usize);
                    // op(B) packed once, as a constant weight is.
                    let packed = gemm::Packed::right(gemm::gemm_b(&b, &b_shape, b_transpose).unwrap()).unwrap();
                    let mut again = vec![f32::NAN; out.len()];
                    gemm::gemm_op_prepacked(&a, &a_shape, &b, &b_shape, Some(&packed), c_arg, alpha32, beta32, a_transpose, b_transpose, &mut again)
                        .unwrap();
                    assert_close(&format!("{what} (packed B)"), &again, &expected, &scale, k as usize);
                }
            }
        }
    }
}

/// Products large enough to be split between the CPU threads (natively, one per core up to 8):
/// row and column tiles, column tiles across a packed B's `NC` blocks, both GEMV paths, an
/// accumulated product, and convolution tiles, against the reference.
#[test]
fn products_split_between_threads() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert_eq!(webnn_wgpu::backend::cpu::threads::count() > 1, cores > 1 && std::env::var("WEBNN_WGPU_CPU_THREADS").as_deref() != Ok("1"));
    let mut rng = Rng::new(11);
    for (m, k, n) in [(1, 700, 3001), (1, 300, 1061), (3, 300, 2500), (9, 130, 2300), (200, 70, 1100), (333, 257, 129), (70, 1100, 33), (1100, 300, 1)] {
        check_matmul(&mut rng, &[m, k], &[k, n]);
    }
    // bTranspose with one row streams B's columns: the dot-product GEMV.
    let (m, k, n) = (1u32, 900u32, 1500u32);
    let options = GemmOptions { alpha: 0.5, beta: 1.0, a_transpose: false, b_transpose: true, has_c: true };
    let abs_options = GemmOptions { alpha: 0.5, ..options.clone() };
    let (a_shape, b_shape, c_shape) = ([m, k], [n, k], [n]);
    let output = validate_gemm(&options, &[&descriptor(&a_shape), &descriptor(&b_shape), &descriptor(&c_shape)]).unwrap().remove(0);
    let a = rng.floats((m * k) as usize, -1.0, 1.0);
    let b = rng.floats((k * n) as usize, -1.0, 1.0);
    let c = rng.floats(n as usize, -1.0, 1.0);
    let mut out = vec![f32::NAN; (m * n) as usize];
    gemm::gemm_op(&a, &a_shape, &b, &b_shape, Some((&c, &c_shape)), 0.5, 1.0, false, true, &mut out).unwrap();
    let inputs: Vec<(&[u32], &[f32])> = vec![(&a_shape, &a), (&b_shape, &b), (&c_shape, &c)];
    let (expected, scale) = reference(&Op::Gemm(options), &Op::Gemm(abs_options), &inputs, &output);
    assert_close("gemm 1x900 by 1500x900 transposed", &out, &expected, &scale, k as usize);
    // conv2d tiles run on the threads at once: two batches, two groups, uneven padding, a stride,
    // with a bias (accumulated onto) and without.
    // Depthwise convolutions split by output planes (nchw) or rows (nhwc), with a channel
    // multiplier of 2 too.
    let convolutions = [
        case(2, [32, 48], [41, 37], [3, 3], 2).window([1, 2, 1, 0], [2, 1], [1, 1]),
        case(2, [64, 64], [41, 45], [3, 3], 64).window([1, 1, 1, 1], [1, 1], [1, 1]),
        case(1, [32, 64], [98, 96], [3, 3], 32).window([0, 1, 1, 1], [1, 2], [1, 1]),
    ];
    for c in &convolutions {
        for input_layout in INPUT_LAYOUTS {
            for with_bias in [true, false] {
                check_conv2d(&mut rng, c, input_layout, Conv2dFilterLayout::Oihw, with_bias);
            }
        }
    }
}

/// The GEMM primitive over strided views (offsets, padded rows, transposed and column-strided
/// operands) into a strided C, overwriting and accumulating, against a float64 loop.
#[test]
fn gemm_strided_views() {
    let mut rng = Rng::new(4);
    for (m, k, n) in [(7, 300, 19), (1, 64, 33), (33, 64, 1), (100, 17, 257), (6, 8, 8)] {
        for (a_strides, b_strides) in [((k + 3, 1), (n + 1, 1)), ((1, m + 2), (1, k)), ((2 * k, 2), (3, 3 * k)), ((k, 1), (1, k + 5))] {
            fn view(rows: usize, cols: usize, (row_stride, col_stride): (usize, usize), data: &[f32]) -> Matrix<'_> {
                Matrix { data, offset: 5, rows, cols, row_stride, col_stride }
            }
            let a_data = rng.floats(5 + (m - 1) * a_strides.0 + (k - 1) * a_strides.1 + 1, -1.0, 1.0);
            let b_data = rng.floats(5 + (k - 1) * b_strides.0 + (n - 1) * b_strides.1 + 1, -1.0, 1.0);
            let (a, b) = (view(m, k, a_strides, &a_data), view(k, n, b_strides, &b_data));
            let ldc = n + 2;
            for accumulate in [false, true] {
                let initial = rng.floats(m * ldc, -1.0, 1.0);
                let mut c = initial.clone();
                gemm::gemm(a, b, -1.5, &mut c, ldc, accumulate).unwrap();
                let (mut expected, mut scale) = (Vec::new(), Vec::new());
                let mut got = Vec::new();
                for i in 0..m {
                    for j in 0..ldc {
                        let at = |x: &Matrix, r: usize, s: usize| x.data[x.offset + r * x.row_stride + s * x.col_stride] as f64;
                        let products = (0..k).map(|p| -1.5 * at(&a, i, p) * at(&b, p, j.min(n - 1)));
                        let (sum, abs) = products.fold((0.0, 0.0), |(s, t), v| (s + v, t + v.abs()));
                        let old = initial[i * ldc + j] as f64;
                        let (value, size) = match (j < n, accumulate) {
                            (false, _) => (old, 0.0),
                            (true, false) => (sum, abs),
                            (true, true) => (sum + old, abs + old.abs()),
                        };
                        expected.push(value);
                        scale.push(size);
                        got.push(c[i * ldc + j]);
                    }
                }
                let what = format!("gemm {m}x{k}x{n} strides {a_strides:?} {b_strides:?} accumulate {accumulate}");
                assert_close(&what, &got, &expected, &scale, k);
            }
        }
    }
}

#[test]
fn gemm_refuses_views_outside_their_slices() {
    let data = vec![0.0f32; 12];
    let a = Matrix::row_major(&data, 3, 4);
    let b = Matrix::row_major(&data, 4, 3);
    let mut c = vec![0.0f32; 9];
    assert!(gemm::gemm(a, b, 1.0, &mut c, 3, false).is_ok());
    assert!(gemm::gemm(Matrix { offset: 1, ..a }, b, 1.0, &mut c, 3, false).is_err());
    assert!(gemm::gemm(Matrix { row_stride: 5, ..a }, b, 1.0, &mut c, 3, false).is_err());
    assert!(gemm::gemm(a, Matrix { col_stride: usize::MAX, ..b }, 1.0, &mut c, 3, false).is_err());
    assert!(gemm::gemm(a, b, 1.0, &mut c[..8], 3, false).is_err());
    assert!(gemm::gemm(a, b, 1.0, &mut c, 2, false).is_err());
    assert!(gemm::gemm(a, a, 1.0, &mut c, 3, false).is_err());
    let mut out = vec![0.0f32; 9];
    assert!(gemm::matmul(&data, &[3, 4], &data, &[4, 3], &mut out).is_ok());
    assert!(gemm::matmul(&data[..11], &[3, 4], &data, &[4, 3], &mut out).is_err());
    assert!(gemm::matmul(&data, &[3, 4], &data, &[3, 4], &mut out).is_err());
    assert!(gemm::matmul(&data, &[2, 3, 2], &data, &[3, 2, 2], &mut out).is_err());
    assert!(gemm::matmul(&data, &[12], &data, &[12], &mut out).is_err());
    assert!(gemm::matmul(&data, &[3, 4], &data, &[4, 3], &mut out[..8]).is_err());
    let c_data = [1.0f32; 3];
    assert!(gemm::gemm_op(&data, &[3, 4], &data, &[4, 3], Some((&c_data, &[3, 1])), 1.0, 1.0, false, false, &mut out).is_ok());
    assert!(gemm::gemm_op(&data, &[3, 4], &data, &[4, 3], Some((&c_data, &[1, 2])), 1.0, 1.0, false, false, &mut out).is_err());
    assert!(gemm::gemm_op(&data, &[3, 4], &data, &[4, 3], Some((&c_data, &[3, 1, 1])), 1.0, 1.0, false, false, &mut out).is_err());
    assert!(gemm::gemm_op(&data, &[3, 4], &data, &[4, 3], None, 1.0, 1.0, true, false, &mut out).is_err());
}

/// One conv2d configuration; channel counts are totals.
#[derive(Clone)]
struct ConvCase {
    batches: u32,
    input_channels: u32,
    output_channels: u32,
    size: [u32; 2],
    filter: [u32; 2],
    groups: u32,
    padding: Option<Vec<u32>>,
    strides: Option<Vec<u32>>,
    dilations: Option<Vec<u32>>,
}

fn case(batches: u32, channels: [u32; 2], size: [u32; 2], filter: [u32; 2], groups: u32) -> ConvCase {
    ConvCase {
        batches,
        input_channels: channels[0],
        output_channels: channels[1],
        size,
        filter,
        groups,
        padding: None,
        strides: None,
        dilations: None,
    }
}

impl ConvCase {
    fn window(mut self, padding: [u32; 4], strides: [u32; 2], dilations: [u32; 2]) -> ConvCase {
        (self.padding, self.strides, self.dilations) = (Some(padding.to_vec()), Some(strides.to_vec()), Some(dilations.to_vec()));
        self
    }
}

fn conv2d_cases() -> Vec<ConvCase> {
    vec![
        case(1, [3, 4], [5, 6], [1, 1], 1),
        case(2, [16, 33], [7, 9], [1, 1], 1),
        case(2, [6, 4], [5, 5], [1, 1], 2),
        case(1, [3, 5], [9, 8], [1, 1], 1).window([0, 0, 0, 0], [2, 2], [1, 1]),
        case(1, [3, 8], [9, 8], [3, 3], 1).window([1, 1, 1, 1], [1, 1], [1, 1]),
        case(2, [4, 6], [11, 10], [3, 3], 1).window([1, 1, 1, 1], [2, 2], [1, 1]),
        case(1, [5, 7], [12, 13], [3, 2], 1).window([0, 2, 1, 0], [1, 3], [2, 3]),
        case(1, [2, 3], [3, 4], [5, 5], 1).window([2, 2, 3, 1], [1, 1], [1, 1]),
        case(1, [6, 6], [8, 7], [3, 3], 2).window([1, 1, 1, 1], [1, 1], [1, 1]),
        case(2, [6, 9], [7, 7], [2, 3], 3).window([0, 1, 2, 0], [2, 1], [1, 2]),
        // Depthwise, then depthwise with channel multiplier 2.
        case(2, [8, 8], [9, 10], [3, 3], 8).window([1, 1, 1, 1], [1, 1], [1, 1]),
        case(1, [8, 8], [11, 12], [3, 3], 8).window([1, 0, 2, 1], [2, 2], [2, 1]),
        case(1, [4, 8], [7, 9], [3, 3], 4).window([1, 1, 1, 1], [1, 2], [1, 1]),
        case(1, [3, 6], [6, 6], [5, 5], 3).window([2, 2, 2, 2], [1, 1], [2, 2]),
        case(1, [5, 5], [4, 4], [1, 1], 5),
        // Enough for the GEMM's blocks.
        case(1, [16, 40], [20, 20], [3, 3], 1).window([1, 1, 1, 1], [1, 1], [1, 1]),
        // Small images (YOLO's last stages): 9 and 36 pixels, whose last column panel is at most
        // half full; a depth of two blocks; groups and batches; an output row count not a
        // multiple of the micro-kernel's.
        case(1, [64, 20], [3, 3], [3, 3], 1).window([1, 1, 1, 1], [1, 1], [1, 1]),
        case(2, [32, 12], [6, 6], [3, 3], 2).window([1, 1, 1, 1], [2, 2], [1, 1]),
        case(1, [24, 18], [6, 6], [3, 3], 1).window([1, 1, 1, 1], [1, 1], [1, 1]),
        case(2, [8, 10], [5, 3], [2, 2], 1).window([0, 1, 1, 0], [1, 1], [1, 1]),
        // More pixels than one packed column block holds.
        case(1, [2, 8], [60, 120], [3, 3], 1).window([1, 1, 1, 1], [1, 1], [1, 1]),
    ]
}

/// The shape of a tensor with logical dims `dims` (spelled by `order`) in `layout`.
fn shape_in(layout: &str, order: &str, dims: [u32; 4]) -> Vec<u32> {
    layout.chars().map(|a| dims[order.find(a).unwrap()]).collect()
}

/// conv2d of one case and layout against the reference, through [`conv::conv2d`] and a
/// [`PackedFilter`].
fn check_conv2d(rng: &mut Rng, c: &ConvCase, input_layout: InputLayout, filter_layout: Conv2dFilterLayout, with_bias: bool) {
    let [h, w] = c.size;
    let input_shape = shape_in(input_layout.name(), "nchw", [c.batches, c.input_channels, h, w]);
    let filter_dims = [c.output_channels, c.input_channels / c.groups, c.filter[0], c.filter[1]];
    let filter_shape = shape_in(filter_layout.name(), "oihw", filter_dims);
    let bias_shape = [c.output_channels];
    let options = Conv2dOptions {
        padding: c.padding.clone(),
        strides: c.strides.clone(),
        dilations: c.dilations.clone(),
        groups: c.groups,
        input_layout,
        filter_layout,
        has_bias: with_bias,
    };
    let mut descriptors = vec![descriptor(&input_shape), descriptor(&filter_shape)];
    if with_bias {
        descriptors.push(descriptor(&bias_shape));
    }
    let refs: Vec<&OperandDescriptor> = descriptors.iter().collect();
    let geometry = conv2d_geometry(&options, &refs).unwrap();
    let output = validate_conv2d(&options, &refs).unwrap().remove(0);
    let input = rng.floats(descriptors[0].element_count() as usize, -1.0, 1.0);
    let filter = rng.floats(descriptors[1].element_count() as usize, -1.0, 1.0);
    let bias = rng.floats(c.output_channels as usize, -1.0, 1.0);
    let bias = with_bias.then_some(&bias[..]);
    let mut out = vec![f32::NAN; output.element_count() as usize];
    conv::conv2d(&geometry, &input, &filter, bias, &mut out).unwrap();
    let mut inputs: Vec<(&[u32], &[f32])> = vec![(&input_shape, &input), (&filter_shape, &filter)];
    inputs.extend(bias.map(|b| (&bias_shape[..], b)));
    let op = Op::Conv2d(options);
    let (expected, scale) = reference(&op, &op, &inputs, &output);
    let what = format!(
        "conv2d {input_shape:?} * {filter_shape:?} ({} {}) groups {} padding {:?} strides {:?} dilations {:?} bias {with_bias}",
        input_layout.name(),
        filter_layout.name(),
        c.groups,
        c.padding,
        c.strides,
        c.dilations
    );
    let k = (filter_dims[1] * c.filter[0] * c.filter[1]) as usize;
    assert_close(&what, &out, &expected, &scale, k);
    let packed = PackedFilter::new(&geometry, &filter).unwrap();
    let mut again = vec![f32::NAN; out.len()];
    conv::conv2d_packed(&geometry, &input, &packed, bias, &mut again).unwrap();
    assert_close(&format!("{what} (packed)"), &again, &expected, &scale, k);
}

const CONV2D_FILTER_LAYOUTS: [Conv2dFilterLayout; 4] =
    [Conv2dFilterLayout::Oihw, Conv2dFilterLayout::Hwio, Conv2dFilterLayout::Ohwi, Conv2dFilterLayout::Ihwo];
const INPUT_LAYOUTS: [InputLayout; 2] = [InputLayout::Nchw, InputLayout::Nhwc];

#[test]
fn conv2d_every_layout_and_window() {
    let mut rng = Rng::new(5);
    for c in conv2d_cases() {
        for input_layout in INPUT_LAYOUTS {
            for filter_layout in CONV2D_FILTER_LAYOUTS {
                for with_bias in [false, true] {
                    check_conv2d(&mut rng, &c, input_layout, filter_layout, with_bias);
                }
            }
        }
    }
}

/// Columns beyond one im2col tile: the output rows are split into several GEMMs.
#[test]
fn conv2d_tiles_large_columns() {
    let mut rng = Rng::new(6);
    let c = case(1, [64, 8], [40, 70], [3, 3], 1).window([1, 1, 1, 1], [1, 1], [1, 1]);
    for input_layout in INPUT_LAYOUTS {
        check_conv2d(&mut rng, &c, input_layout, Conv2dFilterLayout::Oihw, true);
    }
}

#[test]
fn conv2d_refuses_short_operands_and_other_geometries() {
    let options = Conv2dOptions { padding: Some(vec![1, 1, 1, 1]), ..Default::default() };
    let (input_d, filter_d) = (descriptor(&[1, 2, 4, 4]), descriptor(&[3, 2, 3, 3]));
    let geometry = conv2d_geometry(&options, &[&input_d, &filter_d]).unwrap();
    let (input, filter, bias) = (vec![0.5f32; 32], vec![0.25f32; 54], vec![1.0f32; 3]);
    let mut out = vec![0.0f32; 48];
    assert!(conv::conv2d(&geometry, &input, &filter, Some(&bias), &mut out).is_ok());
    assert!(conv::conv2d(&geometry, &input[..31], &filter, None, &mut out).is_err());
    assert!(conv::conv2d(&geometry, &input, &filter[..53], None, &mut out).is_err());
    assert!(conv::conv2d(&geometry, &input, &filter, Some(&bias[..2]), &mut out).is_err());
    assert!(conv::conv2d(&geometry, &input, &filter, None, &mut out[..47]).is_err());
    assert!(conv::conv_transpose2d(&geometry, &input, &filter, None, &mut out).is_err());
    let mut broken = geometry.clone();
    broken.strides = [0, 1];
    assert!(conv::conv2d(&broken, &input, &filter, None, &mut out).is_err());
    let packed = PackedFilter::new(&geometry, &filter).unwrap();
    let other = conv2d_geometry(&options, &[&input_d, &descriptor(&[2, 2, 3, 3])]).unwrap();
    assert!(conv::conv2d_packed(&other, &input, &packed, None, &mut out).is_err());
}

/// One convTranspose2d configuration.
struct TransposeCase {
    conv: ConvCase,
    output_padding: Option<Vec<u32>>,
    output_sizes: Option<Vec<u32>>,
}

fn transpose_cases() -> Vec<TransposeCase> {
    let plain = |conv| TransposeCase { conv, output_padding: None, output_sizes: None };
    vec![
        plain(case(1, [3, 4], [4, 5], [3, 3], 1)),
        plain(case(2, [4, 6], [5, 4], [3, 3], 1).window([1, 1, 1, 1], [2, 2], [1, 1])),
        TransposeCase {
            output_padding: Some(vec![1, 0]),
            ..plain(case(1, [3, 2], [4, 3], [3, 2], 1).window([1, 0, 0, 1], [2, 3], [1, 2]))
        },
        TransposeCase {
            output_sizes: Some(vec![10, 9]),
            ..plain(case(1, [2, 3], [4, 4], [3, 3], 1).window([0, 0, 0, 0], [2, 2], [1, 1]))
        },
        plain(case(1, [4, 6], [3, 5], [2, 2], 2).window([0, 1, 1, 0], [2, 1], [2, 1])),
        plain(case(1, [4, 6], [3, 3], [2, 2], 3)),
        plain(case(2, [6, 6], [4, 4], [3, 3], 6).window([1, 1, 1, 1], [2, 2], [1, 1])),
        plain(case(1, [16, 40], [9, 11], [4, 4], 1).window([1, 1, 1, 1], [2, 2], [1, 1])),
    ]
}

const TRANSPOSE_FILTER_LAYOUTS: [ConvTranspose2dFilterLayout; 3] =
    [ConvTranspose2dFilterLayout::Iohw, ConvTranspose2dFilterLayout::Hwoi, ConvTranspose2dFilterLayout::Ohwi];

#[test]
fn conv_transpose2d_every_layout_and_window() {
    let mut rng = Rng::new(7);
    for t in transpose_cases() {
        let c = &t.conv;
        for input_layout in INPUT_LAYOUTS {
            for filter_layout in TRANSPOSE_FILTER_LAYOUTS {
                for with_bias in [false, true] {
                    let [h, w] = c.size;
                    let input_shape = shape_in(input_layout.name(), "nchw", [c.batches, c.input_channels, h, w]);
                    let filter_dims = [c.input_channels, c.output_channels / c.groups, c.filter[0], c.filter[1]];
                    let filter_shape = shape_in(filter_layout.name(), "iohw", filter_dims);
                    let bias_shape = [c.output_channels];
                    let options = ConvTranspose2dOptions {
                        padding: c.padding.clone(),
                        strides: c.strides.clone(),
                        dilations: c.dilations.clone(),
                        output_padding: t.output_padding.clone(),
                        output_sizes: t.output_sizes.clone(),
                        groups: c.groups,
                        input_layout,
                        filter_layout,
                        has_bias: with_bias,
                    };
                    let mut descriptors = vec![descriptor(&input_shape), descriptor(&filter_shape)];
                    if with_bias {
                        descriptors.push(descriptor(&bias_shape));
                    }
                    let refs: Vec<&OperandDescriptor> = descriptors.iter().collect();
                    let geometry = conv_transpose2d_geometry(&options, &refs).unwrap();
                    let output = validate_conv_transpose2d(&options, &refs).unwrap().remove(0);
                    let input = rng.floats(descriptors[0].element_count() as usize, -1.0, 1.0);
                    let filter = rng.floats(descriptors[1].element_count() as usize, -1.0, 1.0);
                    let bias = rng.floats(c.output_channels as usize, -1.0, 1.0);
                    let bias = with_bias.then_some(&bias[..]);
                    let mut out = vec![f32::NAN; output.element_count() as usize];
                    conv::conv_transpose2d(&geometry, &input, &filter, bias, &mut out).unwrap();
                    let mut inputs: Vec<(&[u32], &[f32])> = vec![(&input_shape, &input), (&filter_shape, &filter)];
                    inputs.extend(bias.map(|b| (&bias_shape[..], b)));
                    let op = Op::ConvTranspose2d(options);
                    let (expected, scale) = reference(&op, &op, &inputs, &output);
                    let what = format!(
                        "convTranspose2d {input_shape:?} * {filter_shape:?} ({} {}) groups {} padding {:?} strides {:?} dilations {:?} outputPadding {:?} outputSizes {:?} bias {with_bias}",
                        input_layout.name(),
                        filter_layout.name(),
                        c.groups,
                        c.padding,
                        c.strides,
                        c.dilations,
                        t.output_padding,
                        t.output_sizes
                    );
                    let k = (c.input_channels * c.filter[0] * c.filter[1]) as usize;
                    assert_close(&what, &out, &expected, &scale, k);
                }
            }
        }
    }
}

/// Native throughput: `cargo test --release --test cpu_kernels -- --ignored --nocapture`.
#[test]
#[ignore]
fn throughput() {
    let mut rng = Rng::new(8);
    let seconds_per_run = |run: &mut dyn FnMut(), flops: f64| {
        run();
        let repeats = (2e9 / flops).clamp(3.0, 200.0) as usize;
        let start = std::time::Instant::now();
        (0..repeats).for_each(|_| run());
        let seconds = start.elapsed().as_secs_f64() / repeats as f64;
        format!("{:.2} ms, {:.1} GFLOP/s", seconds * 1e3, flops / seconds / 1e9)
    };
    for (m, k, n) in [(256, 256, 256), (512, 512, 512), (1024, 1024, 1024), (1, 4096, 4096)] {
        let (a, b) = (rng.floats(m * k, -1.0, 1.0), rng.floats(k * n, -1.0, 1.0));
        let mut c = vec![0.0f32; m * n];
        let shapes = ([m as u32, k as u32], [k as u32, n as u32]);
        let mut run = || gemm::matmul(&a, &shapes.0, &b, &shapes.1, &mut c).unwrap();
        println!("matmul {m}x{k}x{n}: {}", seconds_per_run(&mut run, 2.0 * (m * k * n) as f64));
    }
    // A ResNet 3x3 layer and a MobileNet depthwise layer, in both layouts.
    for (input_layout, name) in [(InputLayout::Nchw, "nchw"), (InputLayout::Nhwc, "nhwc")] {
        for (channels, size, groups) in [([64, 64], 56, 1), ([128, 128], 56, 128)] {
            let c = case(1, channels, [size, size], [3, 3], groups).window([1, 1, 1, 1], [1, 1], [1, 1]);
            let input_shape = shape_in(name, "nchw", [1, c.input_channels, size, size]);
            let filter_shape = [c.output_channels, c.input_channels / groups, 3, 3];
            let options = Conv2dOptions { padding: c.padding.clone(), groups, input_layout, ..Default::default() };
            let geometry = conv2d_geometry(&options, &[&descriptor(&input_shape), &descriptor(&filter_shape)]).unwrap();
            let input = rng.floats(descriptor(&input_shape).element_count() as usize, -1.0, 1.0);
            let filter = rng.floats(descriptor(&filter_shape).element_count() as usize, -1.0, 1.0);
            let packed = PackedFilter::new(&geometry, &filter).unwrap();
            let mut out = vec![0.0f32; input.len() / c.input_channels as usize * c.output_channels as usize];
            let flops = 2.0 * out.len() as f64 * filter.len() as f64 / c.output_channels as f64;
            let mut run = || conv::conv2d_packed(&geometry, &input, &packed, None, &mut out).unwrap();
            println!("conv2d {name} {input_shape:?} * {filter_shape:?} groups {groups}: {}", seconds_per_run(&mut run, flops));
        }
    }
}

/// conv2d from the spec's definition in float64, independent of the kernels and of
/// `ops::reference`: `input` in `layout` (`[n, c, h, w]` or `[n, h, w, c]`), `filter` oihw,
/// `padding` `[top, bottom, left, right]`; the output in `layout` too. With `absolute`, every
/// value enters as its magnitude (the error scale of [`mismatch`]).
#[allow(clippy::too_many_arguments)]
fn spec_conv2d(
    c: &ConvCase,
    layout: InputLayout,
    input: &[f32],
    filter: &[f32],
    bias: Option<&[f32]>,
    padding: [usize; 4],
    strides: [usize; 2],
    dilations: [usize; 2],
    absolute: bool,
) -> Vec<f64> {
    let value = |x: f32| if absolute { (x as f64).abs() } else { x as f64 };
    let (batches, in_c, out_c, groups) = (c.batches as usize, c.input_channels as usize, c.output_channels as usize, c.groups as usize);
    let [in_h, in_w] = c.size.map(|x| x as usize);
    let [k_h, k_w] = c.filter.map(|x| x as usize);
    let out_size = |size: usize, k: usize, before: usize, after: usize, stride: usize, dilation: usize| {
        (size + before + after - ((k - 1) * dilation + 1)) / stride + 1
    };
    let out_h = out_size(in_h, k_h, padding[0], padding[1], strides[0], dilations[0]);
    let out_w = out_size(in_w, k_w, padding[2], padding[3], strides[1], dilations[1]);
    let nchw = layout == InputLayout::Nchw;
    let at = |n: usize, ch: usize, y: usize, x: usize, (channels, h, w): (usize, usize, usize)| {
        if nchw {
            ((n * channels + ch) * h + y) * w + x
        } else {
            ((n * h + y) * w + x) * channels + ch
        }
    };
    let (in_per_group, out_per_group) = (in_c / groups, out_c / groups);
    let mut out = vec![0.0; batches * out_c * out_h * out_w];
    for n in 0..batches {
        for oc in 0..out_c {
            let group = oc / out_per_group;
            for oy in 0..out_h {
                for ox in 0..out_w {
                    let mut sum = bias.map_or(0.0, |b| value(b[oc]));
                    for ic in 0..in_per_group {
                        for fy in 0..k_h {
                            for fx in 0..k_w {
                                let y = (oy * strides[0] + fy * dilations[0]) as i64 - padding[0] as i64;
                                let x = (ox * strides[1] + fx * dilations[1]) as i64 - padding[2] as i64;
                                if y < 0 || x < 0 || y >= in_h as i64 || x >= in_w as i64 {
                                    continue;
                                }
                                let ch = group * in_per_group + ic;
                                let v = value(input[at(n, ch, y as usize, x as usize, (in_c, in_h, in_w))]);
                                let w = value(filter[((oc * in_per_group + ic) * k_h + fy) * k_w + fx]);
                                sum += v * w;
                            }
                        }
                    }
                    out[at(n, oc, oy, ox, (out_c, out_h, out_w))] = sum;
                }
            }
        }
    }
    out
}

/// Runs case `c` (its window, or none) through `conv::conv2d` and `conv2d_packed` and checks both
/// against [`spec_conv2d`]; returns the output's pixels per image.
fn check_against_spec(rng: &mut Rng, c: &ConvCase, input_layout: InputLayout, with_bias: bool) -> u32 {
    let padding = c.padding.clone().unwrap_or(vec![0; 4]);
    let strides = c.strides.clone().unwrap_or(vec![1, 1]);
    let dilations = c.dilations.clone().unwrap_or(vec![1, 1]);
    let [h, w] = c.size;
    let input_shape = shape_in(input_layout.name(), "nchw", [c.batches, c.input_channels, h, w]);
    let filter_shape = [c.output_channels, c.input_channels / c.groups, c.filter[0], c.filter[1]];
    let options = Conv2dOptions {
        padding: Some(padding.clone()),
        strides: Some(strides.clone()),
        dilations: Some(dilations.clone()),
        groups: c.groups,
        input_layout,
        filter_layout: Conv2dFilterLayout::Oihw,
        has_bias: with_bias,
    };
    let mut descriptors = vec![descriptor(&input_shape), descriptor(&filter_shape)];
    if with_bias {
        descriptors.push(descriptor(&[c.output_channels]));
    }
    let refs: Vec<&OperandDescriptor> = descriptors.iter().collect();
    let geometry = conv2d_geometry(&options, &refs).unwrap();
    let output = validate_conv2d(&options, &refs).unwrap().remove(0);
    let input = rng.floats(descriptors[0].element_count() as usize, -1.0, 1.0);
    let filter = rng.floats(descriptors[1].element_count() as usize, -1.0, 1.0);
    let bias = rng.floats(c.output_channels as usize, -1.0, 1.0);
    let bias = with_bias.then_some(&bias[..]);
    let p = [0, 1, 2, 3].map(|i| padding[i] as usize);
    let (s, d) = ([0, 1].map(|i| strides[i] as usize), [0, 1].map(|i| dilations[i] as usize));
    let spec = |absolute| spec_conv2d(c, input_layout, &input, &filter, bias, p, s, d, absolute);
    let (expected, scale) = (spec(false), spec(true));
    assert_eq!(expected.len() as u64, output.element_count());
    let what = format!("conv2d {input_shape:?} * {filter_shape:?} {} groups {} {options:?}", input_layout.name(), c.groups);
    let k = (filter_shape[1] * c.filter[0] * c.filter[1]) as usize;
    let mut out = vec![f32::NAN; expected.len()];
    conv::conv2d(&geometry, &input, &filter, bias, &mut out).unwrap();
    assert_close(&what, &out, &expected, &scale, k);
    let packed = PackedFilter::new(&geometry, &filter).unwrap();
    let mut again = vec![f32::NAN; expected.len()];
    conv::conv2d_packed(&geometry, &input, &packed, bias, &mut again).unwrap();
    assert_close(&format!("{what} (packed)"), &again, &expected, &scale, k);
    geometry.output_size[0] * geometry.output_size[1]
}

/// Several batches of images with few output pixels, which run as one GEMM per group with the
/// batches' columns side by side (nchw then scatters each batch's columns to its planes):
/// against [`spec_conv2d`], with padding, strides, dilations, groups, a bias and without, a
/// filter of one output channel per group (a GEMV-shaped product), and more batches than one
/// product's columns hold.
#[test]
fn conv2d_batches_of_small_images() {
    let mut rng = Rng::new(7);
    let cases = [
        // silero-vad's STFT as a conv (258 filters of 256 taps, stride 128) and the conv after it.
        case(8, [1, 258], [1, 640], [1, 256], 1).window([0, 0, 0, 0], [1, 128], [1, 1]),
        case(8, [129, 128], [1, 4], [1, 3], 1).window([0, 0, 1, 1], [1, 1], [1, 1]),
        case(5, [6, 8], [4, 5], [3, 3], 2).window([1, 0, 2, 1], [2, 1], [1, 2]),
        case(3, [4, 2], [3, 3], [3, 3], 2),
        case(4, [12, 9], [7, 8], [1, 1], 3),
        case(6, [3, 16], [9, 9], [2, 3], 1).window([1, 1, 0, 2], [3, 2], [2, 1]),
        // 2048 deep and 63 pixels a batch: 8 batches a product, then a run of one.
        case(9, [512, 3], [8, 10], [2, 2], 1),
    ];
    for c in &cases {
        for input_layout in INPUT_LAYOUTS {
            for with_bias in [false, true] {
                let pixels = check_against_spec(&mut rng, c, input_layout, with_bias);
                assert!(pixels < 64, "{pixels} output pixels: not a small image");
            }
        }
    }
}

/// Depthwise nchw convolutions at horizontal stride 1, which read rows copied with their
/// padding as zeros (vectors of four outputs, blocks of four vectors): against [`spec_conv2d`],
/// over output widths around the vector and block sizes, padding wider than the window's reach
/// (columns of padding alone), horizontal dilation, vertical stride, a channel multiplier,
/// batches, and PP-OCR's 5x5 layers; and at horizontal stride 2 without horizontal dilation,
/// which splits each padded row into its even and odd columns.
#[test]
fn conv2d_depthwise_rows() {
    let mut rng = Rng::new(11);
    let cases = [
        // PP-OCRv4's recognizer: 240 channels of 12x20, 5x5, then at vertical stride 2.
        case(1, [240, 240], [12, 20], [5, 5], 240).window([2, 2, 2, 2], [1, 1], [1, 1]),
        case(1, [24, 24], [12, 20], [5, 5], 24).window([2, 2, 2, 2], [2, 1], [1, 1]),
        case(2, [3, 3], [5, 1], [3, 3], 3).window([1, 1, 1, 1], [1, 1], [1, 1]),
        case(1, [2, 2], [4, 3], [3, 3], 2).window([0, 1, 0, 0], [1, 1], [1, 1]),
        case(1, [4, 4], [6, 17], [3, 3], 4).window([1, 1, 1, 1], [1, 1], [1, 1]),
        case(1, [2, 2], [3, 33], [1, 5], 2).window([0, 0, 3, 1], [1, 1], [1, 2]),
        case(1, [2, 2], [7, 9], [3, 2], 2).window([2, 0, 6, 5], [3, 1], [2, 3]),
        case(2, [3, 6], [8, 16], [3, 3], 3).window([1, 1, 1, 1], [2, 1], [1, 1]),
        case(1, [5, 5], [9, 4], [2, 4], 5).window([0, 1, 0, 0], [1, 1], [3, 1]),
        // Horizontal stride 2 (even and odd phase rows): MobileNet's 3x3 and 5x5 downsampling
        // layers, odd and even widths, one-column and even-width windows, uneven padding,
        // vertical dilation, a channel multiplier, batches.
        case(1, [16, 16], [20, 20], [3, 3], 16).window([0, 1, 0, 1], [2, 2], [1, 1]),
        case(1, [8, 8], [21, 23], [5, 5], 8).window([2, 2, 2, 2], [2, 2], [1, 1]),
        case(2, [3, 3], [6, 9], [3, 3], 3).window([1, 1, 1, 1], [1, 2], [1, 1]),
        case(1, [2, 2], [5, 7], [1, 1], 2).window([0, 0, 0, 0], [2, 2], [1, 1]),
        case(1, [2, 4], [6, 10], [2, 2], 2).window([0, 1, 3, 0], [1, 2], [2, 1]),
        case(1, [3, 3], [4, 34], [3, 4], 3).window([1, 1, 5, 6], [2, 2], [1, 1]),
        case(1, [2, 2], [3, 2], [3, 3], 2).window([1, 1, 1, 1], [2, 2], [1, 1]),
    ];
    for c in &cases {
        for with_bias in [false, true] {
            check_against_spec(&mut rng, c, InputLayout::Nchw, with_bias);
        }
    }
}

/// 3x3 nchw convolutions at stride 1 with enough channels and output tiles for Winograd's
/// F(2x2, 3x3) (`c * o >= 20 * (c + o)`, 16 tiles): against [`spec_conv2d`], over odd output
/// sizes (tiles cut off at the right and bottom), no padding, uneven padding, padding wider than
/// the input, batches, odd channel counts, chunks of tile rows smaller than the image, and
/// YOLOv8n's 64-channel layer.
#[test]
fn conv2d_winograd_tiles() {
    let mut rng = Rng::new(13);
    let cases = [
        case(1, [40, 40], [8, 8], [3, 3], 1).window([1, 1, 1, 1], [1, 1], [1, 1]),
        case(1, [41, 47], [9, 11], [3, 3], 1).window([1, 1, 1, 1], [1, 1], [1, 1]),
        case(2, [40, 48], [10, 12], [3, 3], 1),
        case(1, [48, 40], [11, 10], [3, 3], 1).window([0, 2, 2, 0], [1, 1], [1, 1]),
        case(1, [40, 42], [7, 9], [3, 3], 1).window([2, 2, 2, 2], [1, 1], [1, 1]),
        case(3, [40, 40], [13, 8], [3, 3], 1).window([1, 0, 1, 0], [1, 1], [1, 1]),
        case(1, [64, 64], [20, 20], [3, 3], 1).window([1, 1, 1, 1], [1, 1], [1, 1]),
        case(1, [40, 40], [4, 4], [3, 3], 1).window([3, 3, 9, 9], [1, 1], [1, 1]),
        // 256 channels of 17 x 17 tiles: two chunks of tile rows.
        case(1, [256, 24], [34, 34], [3, 3], 1).window([1, 1, 1, 1], [1, 1], [1, 1]),
    ];
    for c in &cases {
        for with_bias in [false, true] {
            check_against_spec(&mut rng, c, InputLayout::Nchw, with_bias);
        }
    }
}
