#![cfg(not(target_arch = "wasm32"))]
//! The CPU backend's float32 kernels against the float64 reference: every element of every
//! operator and option variant the kernels handle, on random inputs (and special values) of
//! scalar, 1-D, 4-D, broadcast and odd shapes, within the stated tolerances.

mod common;

use common::Rng;
use webnn_wgpu::backend::cpu::kernels::float32;
use webnn_wgpu::operand::{DataType, Number, OperandDescriptor};
use webnn_wgpu::ops::activation::Activation;
use webnn_wgpu::ops::batch_normalization::{BatchNormalizationOptions, InstanceNormalizationOptions};
use webnn_wgpu::ops::conv2d::InputLayout;
use webnn_wgpu::ops::elementwise_binary::BinaryOp;
use webnn_wgpu::ops::elementwise_unary::UnaryOp;
use webnn_wgpu::ops::normalization::LayerNormalizationOptions;
use webnn_wgpu::ops::pad::{PadOptions, PaddingMode};
use webnn_wgpu::ops::pool2d::{Pool2dOptions, PoolKind, RoundingType};
use webnn_wgpu::ops::reduce::{ReduceOp, ReduceOptions};
use webnn_wgpu::ops::resample2d::{InterpolationMode, Resample2dOptions};
use webnn_wgpu::ops::slice::SliceOptions;
use webnn_wgpu::ops::{self, HostTensor, Op};

#[derive(Clone, Copy, Debug)]
enum Tol {
    Ulp(u64),
    Abs(f64),
}

fn ulp_distance(a: f32, b: f32) -> u64 {
    if a == b || (a.is_nan() && b.is_nan()) {
        return 0;
    }
    let key = |v: f32| -> i64 {
        let b = v.to_bits() as i64;
        if b & 0x8000_0000 != 0 {
            -(b & 0x7fff_ffff)
        } else {
            b
        }
    };
    (key(a) - key(b)).unsigned_abs()
}

fn count(shape: &[u32]) -> usize {
    shape.iter().map(|&d| d as usize).product()
}

/// Runs `op` through the float32 kernel and the reference and compares every element.
fn check(op: &Op, inputs: &[(Vec<u32>, Vec<f32>)], tol: Tol, what: &str) {
    let descriptors: Vec<OperandDescriptor> =
        inputs.iter().map(|(s, _)| OperandDescriptor::new(DataType::Float32, s.clone())).collect();
    let refs: Vec<&OperandDescriptor> = descriptors.iter().collect();
    let outputs = ops::validate(op, &refs).unwrap_or_else(|e| panic!("{what}: {op:?} does not validate: {e}"));
    assert_eq!(outputs.len(), 1);
    let host: Vec<HostTensor> = descriptors
        .iter()
        .zip(inputs)
        .map(|(d, (_, v))| HostTensor::new(d.clone(), v.iter().map(|&x| x as f64).collect()).unwrap())
        .collect();
    let expected = ops::reference(op, &host, &outputs).unwrap();
    let mut got = vec![f32::from_bits(0x7fc0_dead); outputs[0].element_count() as usize];
    let kernel_inputs: Vec<(&OperandDescriptor, &[f32])> =
        descriptors.iter().zip(inputs).map(|(d, (_, v))| (d, v.as_slice())).collect();
    let result = float32::run(op, &kernel_inputs, (&outputs[0], &mut got));
    let result = result.unwrap_or_else(|| panic!("{what}: {op:?} returned None"));
    result.unwrap_or_else(|e| panic!("{what}: {op:?} failed: {e}"));
    for (i, (&g, &e)) in got.iter().zip(&expected[0].data).enumerate() {
        let e = e as f32;
        let ok = match tol {
            Tol::Ulp(u) => ulp_distance(g, e) <= u,
            Tol::Abs(a) => ulp_distance(g, e) == 0 || (g as f64 - e as f64).abs() <= a,
        };
        if !ok {
            let input: Vec<String> = inputs
                .iter()
                .map(|(s, v)| {
                    let flat = if count(s) == count(&outputs[0].shape) { v.get(i).copied() } else { None };
                    format!("{s:?} (same index: {flat:?})")
                })
                .collect();
            panic!(
                "{what}: {op:?} element {i} of {:?}: got {g:e}, expected {e:e} ({} ULP, tolerance {tol:?}); inputs {input:?}",
                outputs[0].shape,
                ulp_distance(g, e)
            );
        }
    }
}

/// Awkward float32 values: zeros, infinities, NaN, subnormals, extremes.
fn specials() -> Vec<f32> {
    vec![
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        1e-40,
        -1e-40,
        f32::MIN_POSITIVE,
        1e-30,
        -1e-30,
        1e-7,
        -1e-7,
        0.4999,
        0.5,
        -0.5,
        0.5001,
        1.0,
        -1.0,
        2.5,
        -2.5,
        9.9,
        10.1,
        -10.1,
        14.0,
        -14.0,
        15.0,
        -15.0,
        30.0,
        -30.0,
        80.0,
        -80.0,
        88.0,
        88.72,
        88.73,
        89.5,
        -87.0,
        -88.0,
        -95.0,
        -103.0,
        -104.0,
        -110.0,
        1e10,
        -1e10,
        f32::MAX,
        f32::MIN,
    ]
}

const SHAPES: &[&[u32]] = &[&[], &[1], &[7], &[33], &[2, 3, 4, 5], &[3, 1, 13]];

// ---------------------------------------------------------------- binary

#[test]
fn binary_broadcasting() {
    let mut rng = Rng::new(1);
    let pairs: &[(&[u32], &[u32])] = &[
        (&[], &[]),
        (&[7], &[7]),
        (&[33], &[33]),
        (&[2, 3, 4, 5], &[2, 3, 4, 5]),
        (&[2, 3, 4, 5], &[]),
        (&[], &[2, 3, 4, 5]),
        (&[13], &[1]),
        (&[2, 3, 4, 5], &[5]),
        (&[2, 3, 4, 5], &[4, 5]),
        (&[2, 3, 4, 5], &[3, 1, 1]),
        (&[3, 1, 1], &[2, 3, 4, 5]),
        (&[2, 3, 4, 5], &[1, 3, 1, 5]),
        (&[33, 1], &[1, 7]),
        (&[1, 13], &[7, 1]),
        (&[2, 1, 4, 1], &[3, 1, 5]),
        (&[4, 1, 6], &[4, 5, 1]),
        (&[1, 1], &[1]),
        (&[2, 1, 3], &[1, 1, 1]),
    ];
    for op in BinaryOp::ALL {
        for &(a, b) in pairs {
            let (lo, hi) = match op {
                BinaryOp::Pow => (0.05, 3.0),
                _ => (-10.0, 10.0),
            };
            let av = rng.floats(count(a), lo, hi);
            let bv = match op {
                BinaryOp::Pow => rng.floats(count(b), -4.0, 4.0),
                BinaryOp::Div => rng
                    .floats(count(b), 0.1, 5.0)
                    .into_iter()
                    .map(|v| if rng.next_u64() & 1 == 0 { v } else { -v })
                    .collect(),
                _ => rng.floats(count(b), -10.0, 10.0),
            };
            let tol = if op == BinaryOp::Pow { Tol::Ulp(2) } else { Tol::Ulp(0) };
            check(&Op::Binary(op), &[(a.to_vec(), av), (b.to_vec(), bv)], tol, &format!("{} {a:?} {b:?}", op.name()));
        }
    }
}

#[test]
fn binary_special_values() {
    let s = specials();
    let n = s.len() as u32;
    // Every pair of special values.
    let a: Vec<f32> = s.iter().flat_map(|&x| std::iter::repeat_n(x, s.len())).collect();
    let b: Vec<f32> = (0..s.len()).flat_map(|_| s.iter().copied()).collect();
    for op in BinaryOp::ALL {
        let tol = if op == BinaryOp::Pow { Tol::Ulp(2) } else { Tol::Ulp(0) };
        check(&Op::Binary(op), &[(vec![n, n], a.clone()), (vec![n, n], b.clone())], tol, op.name());
    }
}

#[test]
fn pow_exponents() {
    let mut rng = Rng::new(2);
    let mut a = rng.floats(33, -5.0, 5.0);
    a.extend(specials());
    let n = a.len() as u32;
    for e in [2.0f32, 0.5, 1.0, 3.0, -1.0, -2.0, 0.0, 1.5] {
        check(&Op::Binary(BinaryOp::Pow), &[(vec![n], a.clone()), (vec![], vec![e])], Tol::Ulp(2), &format!("pow {e}"));
    }
}

// ---------------------------------------------------------------- unary

/// The range random inputs of a unary operation come from, and its tolerance (tighter than WPT's
/// where the kernel is).
fn unary_case(op: UnaryOp) -> ((f32, f32), Tol) {
    match op {
        UnaryOp::Exp => ((-105.0, 90.0), Tol::Ulp(3)),
        UnaryOp::Log => ((1e-6, 1e6), Tol::Ulp(1)),
        UnaryOp::Sqrt => ((0.0, 1e6), Tol::Ulp(0)),
        UnaryOp::Reciprocal => ((-100.0, 100.0), Tol::Ulp(0)),
        UnaryOp::Erf => ((-6.0, 6.0), Tol::Abs(2e-7)),
        UnaryOp::Sin | UnaryOp::Cos => ((-100.0, 100.0), Tol::Ulp(1)),
        UnaryOp::Tan => ((-10.0, 10.0), Tol::Ulp(2)),
        _ => ((-100.0, 100.0), Tol::Ulp(0)),
    }
}

#[test]
fn unary_operations() {
    let mut rng = Rng::new(3);
    for op in UnaryOp::ALL {
        let ((lo, hi), tol) = unary_case(op);
        for &shape in SHAPES {
            let v = rng.floats(count(shape), lo, hi);
            check(&Op::Unary(op), &[(shape.to_vec(), v)], tol, op.name());
        }
        // Narrow arguments, where relative accuracy matters.
        let v = rng.floats(1000, lo.max(-1.0), hi.min(1.0).max(lo + 1.0));
        check(&Op::Unary(op), &[(vec![1000], v)], tol, op.name());
        // Special values (libm's results for sin/cos/tan of huge arguments may differ in the last bit).
        let sp = specials();
        let tol = match op {
            UnaryOp::Sin | UnaryOp::Cos | UnaryOp::Tan => Tol::Abs(1.0 / 1024.0),
            _ => tol,
        };
        check(&Op::Unary(op), &[(vec![sp.len() as u32], sp)], tol, op.name());
    }
}

#[test]
fn exp_and_erf_dense_sweep() {
    // Every 97th float32 in the interesting ranges.
    let mut v = Vec::new();
    let mut bits = (-110.0f32).to_bits();
    while f32::from_bits(bits) < -1e-38 {
        v.push(f32::from_bits(bits));
        bits -= 9_700;
    }
    let mut bits = 1e-38f32.to_bits();
    while f32::from_bits(bits) < 100.0 {
        v.push(f32::from_bits(bits));
        bits += 9_700;
    }
    let n = v.len() as u32;
    check(&Op::Unary(UnaryOp::Exp), &[(vec![n], v.clone())], Tol::Ulp(3), "exp sweep");
    check(&Op::Unary(UnaryOp::Erf), &[(vec![n], v.clone())], Tol::Abs(2e-7), "erf sweep");
    check(&Op::Activation(Activation::Tanh), &[(vec![n], v.clone())], Tol::Ulp(6), "tanh sweep");
    check(&Op::Activation(Activation::Sigmoid), &[(vec![n], v.clone())], Tol::Ulp(6), "sigmoid sweep");
    check(&Op::Activation(Activation::Gelu), &[(vec![n], v.clone())], Tol::Ulp(18), "gelu sweep");
    check(&Op::Activation(Activation::Elu { alpha: 1.0 }), &[(vec![n], v.clone())], Tol::Ulp(6), "elu sweep");
    check(&Op::Activation(Activation::Softplus), &[(vec![n], v)], Tol::Ulp(6), "softplus sweep");
}

// ---------------------------------------------------------------- activations

fn activations() -> Vec<(Activation, Tol)> {
    let n = |x: f64| Some(Number::Double(x));
    vec![
        (Activation::Relu, Tol::Ulp(0)),
        (Activation::Sigmoid, Tol::Ulp(6)),
        (Activation::Tanh, Tol::Ulp(6)),
        (Activation::Gelu, Tol::Ulp(18)),
        (Activation::LeakyRelu { alpha: 0.01 }, Tol::Ulp(0)),
        (Activation::LeakyRelu { alpha: -1.7 }, Tol::Ulp(0)),
        (Activation::Clamp { min_value: None, max_value: None }, Tol::Ulp(0)),
        (Activation::Clamp { min_value: n(-1.5), max_value: n(2.25) }, Tol::Ulp(0)),
        (Activation::Clamp { min_value: n(0.0), max_value: n(6.0) }, Tol::Ulp(0)),
        (Activation::Clamp { min_value: None, max_value: n(0.1) }, Tol::Ulp(0)),
        (Activation::Clamp { min_value: n(-0.3), max_value: None }, Tol::Ulp(0)),
        (Activation::Clamp { min_value: n(f64::NAN), max_value: n(1.0) }, Tol::Ulp(0)),
        (Activation::Clamp { min_value: Some(Number::BigInt(-2)), max_value: n(0.1) }, Tol::Ulp(0)),
        (Activation::Elu { alpha: 1.0 }, Tol::Ulp(6)),
        (Activation::Elu { alpha: 0.3 }, Tol::Ulp(6)),
        (Activation::HardSigmoid { alpha: 0.2, beta: 0.5 }, Tol::Ulp(0)),
        (Activation::HardSigmoid { alpha: 1.0 / 6.0, beta: 0.5 }, Tol::Ulp(0)),
        (Activation::HardSwish, Tol::Ulp(0)),
        (Activation::Linear { alpha: 1.0, beta: 0.0 }, Tol::Ulp(0)),
        (Activation::Linear { alpha: 0.3, beta: -1.1 }, Tol::Ulp(0)),
        (Activation::Softplus, Tol::Ulp(6)),
        (Activation::Softsign, Tol::Ulp(0)),
    ]
}

#[test]
fn activation_operations() {
    let mut rng = Rng::new(4);
    for (op, tol) in activations() {
        for &shape in SHAPES {
            for (lo, hi) in [(-20.0, 20.0), (-1.0, 1.0), (-4.0, 4.0)] {
                let v = rng.floats(count(shape), lo, hi);
                check(&Op::Activation(op.clone()), &[(shape.to_vec(), v)], tol, op.name());
            }
        }
        let sp = specials();
        check(&Op::Activation(op.clone()), &[(vec![sp.len() as u32], sp)], tol, op.name());
    }
}

#[test]
fn prelu_broadcasting() {
    let mut rng = Rng::new(5);
    let pairs: &[(&[u32], &[u32])] = &[
        (&[], &[]),
        (&[33], &[33]),
        (&[33], &[]),
        (&[2, 3, 4, 5], &[3, 1, 1]),
        (&[2, 3, 4, 5], &[5]),
        (&[4, 5], &[2, 3, 1, 1]),
        (&[7, 1], &[1, 13]),
    ];
    for &(x, s) in pairs {
        let xv = rng.floats(count(x), -5.0, 5.0);
        let sv = rng.floats(count(s), -2.0, 2.0);
        check(&Op::Activation(Activation::Prelu), &[(x.to_vec(), xv), (s.to_vec(), sv)], Tol::Ulp(0), "prelu");
    }
}

// ---------------------------------------------------------------- softmax and normalizations

#[test]
fn softmax_axes() {
    let mut rng = Rng::new(6);
    let shapes: &[&[u32]] = &[&[1], &[7], &[1000], &[33, 5], &[2, 3, 13], &[2, 3, 4, 5], &[1, 1, 1], &[3, 1, 9]];
    for &shape in shapes {
        for axis in 0..shape.len() as u32 {
            for (lo, hi) in [(-5.0, 5.0), (-80.0, 80.0)] {
                let v = rng.floats(count(shape), lo, hi);
                // WPT allows 3N + 3 ULP; the kernel does far better.
                let n = shape[axis as usize] as u64;
                check(
                    &Op::Softmax { axis },
                    &[(shape.to_vec(), v)],
                    Tol::Ulp(4 + n.min(8)),
                    &format!("softmax {shape:?} {axis}"),
                );
            }
        }
    }
}

#[test]
fn layer_normalization_variants() {
    let mut rng = Rng::new(7);
    let cases: &[(&[u32], Option<&[u32]>)] = &[
        (&[2, 3, 13], None),
        (&[2, 3, 13], Some(&[2])),
        (&[2, 3, 13], Some(&[1, 2])),
        (&[2, 3, 13], Some(&[0])),
        (&[2, 3, 13], Some(&[1])),
        (&[2, 3, 13], Some(&[2, 1])),
        (&[2, 3, 13], Some(&[0, 2])),
        (&[2, 3, 13], Some(&[])),
        (&[7, 768], Some(&[1])),
        (&[33], None),
        (&[33], Some(&[0])),
        (&[], None),
        (&[2, 3, 4, 5], None),
        (&[2, 1, 4, 5], Some(&[1, 2, 3])),
    ];
    for &(shape, axes) in cases {
        for (has_scale, has_bias) in [(false, false), (true, false), (false, true), (true, true)] {
            let axes_v: Vec<u32> = axes.map(|a| a.to_vec()).unwrap_or_else(|| (1..shape.len().max(1) as u32).collect());
            let param_shape: Vec<u32> = axes_v.iter().map(|&a| shape[a as usize]).collect();
            let o = LayerNormalizationOptions { axes: axes.map(|a| a.to_vec()), epsilon: 1e-5, has_scale, has_bias };
            let mut inputs = vec![(shape.to_vec(), rng.floats(count(shape), -3.0, 5.0))];
            if has_scale {
                inputs.push((param_shape.clone(), rng.floats(count(&param_shape), -2.0, 2.0)));
            }
            if has_bias {
                inputs.push((param_shape.clone(), rng.floats(count(&param_shape), -2.0, 2.0)));
            }
            check(
                &Op::LayerNormalization(o),
                &inputs,
                Tol::Abs(2e-5),
                &format!("layerNormalization {shape:?} {axes:?}"),
            );
        }
    }
}

#[test]
fn batch_normalization_variants() {
    let mut rng = Rng::new(8);
    let cases: &[(&[u32], u32)] =
        &[(&[2, 3, 4, 5], 1), (&[2, 3, 4, 5], 3), (&[2, 3, 4, 5], 0), (&[7], 0), (&[13, 33], 1), (&[1, 13, 1, 1], 1)];
    for &(shape, axis) in cases {
        for (has_scale, has_bias) in [(false, false), (true, false), (false, true), (true, true)] {
            let c = shape[axis as usize];
            let o = BatchNormalizationOptions { axis, epsilon: 1e-3, has_scale, has_bias };
            let mut inputs = vec![
                (shape.to_vec(), rng.floats(count(shape), -5.0, 5.0)),
                (vec![c], rng.floats(c as usize, -1.0, 1.0)),
                (vec![c], rng.floats(c as usize, 0.0, 3.0)),
            ];
            if has_scale {
                inputs.push((vec![c], rng.floats(c as usize, -2.0, 2.0)));
            }
            if has_bias {
                inputs.push((vec![c], rng.floats(c as usize, -2.0, 2.0)));
            }
            check(&Op::BatchNormalization(o), &inputs, Tol::Ulp(1), &format!("batchNormalization {shape:?} {axis}"));
        }
    }
}

#[test]
fn instance_normalization_variants() {
    let mut rng = Rng::new(9);
    for layout in [InputLayout::Nchw, InputLayout::Nhwc] {
        for shape in [[2u32, 3, 4, 5], [1, 7, 13, 3], [2, 1, 1, 33]] {
            for (has_scale, has_bias) in [(false, false), (true, false), (false, true), (true, true)] {
                let c = shape[layout.channel_axis()];
                let o = InstanceNormalizationOptions { epsilon: 1e-5, layout, has_scale, has_bias };
                let mut inputs = vec![(shape.to_vec(), rng.floats(count(&shape), -4.0, 6.0))];
                if has_scale {
                    inputs.push((vec![c], rng.floats(c as usize, -2.0, 2.0)));
                }
                if has_bias {
                    inputs.push((vec![c], rng.floats(c as usize, -2.0, 2.0)));
                }
                check(
                    &Op::InstanceNormalization(o),
                    &inputs,
                    Tol::Abs(2e-5),
                    &format!("instanceNormalization {shape:?} {layout:?}"),
                );
            }
        }
    }
}

// ---------------------------------------------------------------- reductions

#[test]
fn reductions() {
    let mut rng = Rng::new(10);
    let cases: &[(&[u32], Option<&[u32]>)] = &[
        (&[], None),
        (&[], Some(&[])),
        (&[33], None),
        (&[1000], None),
        (&[7], Some(&[0])),
        (&[2, 3, 4, 5], None),
        (&[2, 3, 4, 5], Some(&[3])),
        (&[2, 3, 4, 5], Some(&[1])),
        (&[2, 3, 4, 5], Some(&[0])),
        (&[2, 3, 4, 5], Some(&[2, 3])),
        (&[2, 3, 4, 5], Some(&[0, 2])),
        (&[2, 3, 4, 5], Some(&[1, 3])),
        (&[2, 3, 4, 5], Some(&[3, 0, 1])),
        (&[2, 3, 4, 5], Some(&[])),
        (&[13, 1, 7], Some(&[1])),
        (&[13, 1, 7], Some(&[0, 1])),
        (&[33, 13], Some(&[0])),
    ];
    for op in ReduceOp::ALL {
        for &(shape, axes) in cases {
            for keep_dimensions in [false, true] {
                let (lo, hi) = match op {
                    ReduceOp::Product => (0.5, 1.5),
                    ReduceOp::LogSum => (0.0, 4.0),
                    _ => (-10.0, 10.0),
                };
                let v = rng.floats(count(shape), lo, hi);
                let o = ReduceOptions { axes: axes.map(|a| a.to_vec()), keep_dimensions };
                check(
                    &Op::Reduce(op, o),
                    &[(shape.to_vec(), v)],
                    Tol::Ulp(2),
                    &format!("{} {shape:?} {axes:?}", op.name()),
                );
            }
        }
        // Special values along rows.
        let sp = specials();
        let o = ReduceOptions { axes: Some(vec![1]), keep_dimensions: false };
        let n = sp.len() as u32;
        let row: Vec<f32> = sp.iter().flat_map(|&x| [x, 1.0, -2.0]).collect();
        check(&Op::Reduce(op, o.clone()), &[(vec![n, 3], row)], Tol::Ulp(2), &format!("{} specials", op.name()));
        let o = ReduceOptions { axes: Some(vec![0]), keep_dimensions: false };
        let col: Vec<f32> =
            [1.0, -2.0].iter().copied().chain(sp.iter().copied()).chain(sp.iter().rev().copied()).collect();
        check(&Op::Reduce(op, o), &[(vec![2 + 2 * n], col)], Tol::Ulp(2), &format!("{} specials", op.name()));
    }
}

// ---------------------------------------------------------------- data movement

#[test]
fn reshape_expand_tile_reverse() {
    let mut rng = Rng::new(11);
    let v = rng.floats(120, -1.0, 1.0);
    check(&Op::Reshape { new_shape: vec![4, 30] }, &[(vec![2, 3, 4, 5], v.clone())], Tol::Ulp(0), "reshape");
    let expands: &[(&[u32], &[u32])] = &[
        (&[], &[5, 7]),
        (&[1], &[33]),
        (&[3, 1], &[2, 3, 4]),
        (&[1, 13], &[7, 13]),
        (&[2, 1, 4, 1], &[2, 3, 4, 5]),
        (&[7], &[7]),
    ];
    for &(from, to) in expands {
        let v = rng.floats(count(from), -1.0, 1.0);
        check(
            &Op::Expand { new_shape: to.to_vec() },
            &[(from.to_vec(), v)],
            Tol::Ulp(0),
            &format!("expand {from:?} {to:?}"),
        );
    }
    for (shape, reps) in
        [(vec![2u32, 3], vec![2u32, 1]), (vec![7], vec![3]), (vec![2, 1, 3], vec![1, 4, 2]), (vec![], vec![])]
    {
        let v = rng.floats(count(&shape), -1.0, 1.0);
        check(
            &Op::Tile { repetitions: reps.clone() },
            &[(shape.clone(), v)],
            Tol::Ulp(0),
            &format!("tile {shape:?} {reps:?}"),
        );
    }
    for axes in [None, Some(vec![]), Some(vec![0]), Some(vec![3]), Some(vec![1, 2]), Some(vec![0, 3])] {
        check(
            &Op::Reverse { axes: axes.clone() },
            &[(vec![2, 3, 4, 5], v.clone())],
            Tol::Ulp(0),
            &format!("reverse {axes:?}"),
        );
    }
    check(&Op::Reverse { axes: None }, &[(vec![33], rng.floats(33, -1.0, 1.0))], Tol::Ulp(0), "reverse 1-D");
}

#[test]
fn transposes() {
    let mut rng = Rng::new(12);
    let v = rng.floats(120, -1.0, 1.0);
    // Every permutation of 4 axes.
    let mut perms = Vec::new();
    for a in 0..4u32 {
        for b in 0..4 {
            for c in 0..4 {
                for d in 0..4 {
                    let p = [a, b, c, d];
                    if (0..4).all(|k| p.contains(&k)) {
                        perms.push(p.to_vec());
                    }
                }
            }
        }
    }
    for p in perms {
        check(
            &Op::Transpose { permutation: Some(p.clone()) },
            &[(vec![2, 3, 4, 5], v.clone())],
            Tol::Ulp(0),
            &format!("transpose {p:?}"),
        );
    }
    check(&Op::Transpose { permutation: None }, &[(vec![2, 3, 4, 5], v.clone())], Tol::Ulp(0), "transpose default");
    check(&Op::Transpose { permutation: None }, &[(vec![], vec![1.5])], Tol::Ulp(0), "transpose scalar");
    for (r, c) in [(33u32, 13u32), (64, 48), (1, 7), (17, 1)] {
        let v = rng.floats((r * c) as usize, -1.0, 1.0);
        check(&Op::Transpose { permutation: None }, &[(vec![r, c], v)], Tol::Ulp(0), &format!("transpose {r}x{c}"));
    }
    let v = rng.floats(3 * 33 * 13, -1.0, 1.0);
    check(
        &Op::Transpose { permutation: Some(vec![0, 2, 1]) },
        &[(vec![3, 33, 13], v.clone())],
        Tol::Ulp(0),
        "batched transpose",
    );
    check(&Op::Transpose { permutation: Some(vec![1, 0, 2]) }, &[(vec![3, 33, 13], v)], Tol::Ulp(0), "head transpose");
}

#[test]
fn slices_and_concats() {
    let mut rng = Rng::new(13);
    let v = rng.floats(2 * 7 * 13 * 5, -1.0, 1.0);
    let shape = vec![2u32, 7, 13, 5];
    let slices = [
        SliceOptions { starts: vec![0, 0, 0, 0], sizes: vec![2, 7, 13, 5], strides: None },
        SliceOptions { starts: vec![1, 2, 3, 1], sizes: vec![1, 4, 9, 3], strides: None },
        SliceOptions { starts: vec![0, 1, 0, 0], sizes: vec![2, 3, 5, 5], strides: Some(vec![1, 2, 3, 1]) },
        SliceOptions { starts: vec![0, 0, 12, 4], sizes: vec![2, 7, 1, 1], strides: Some(vec![1, 1, 1, 1]) },
        SliceOptions { starts: vec![1, 6, 0, 0], sizes: vec![1, 1, 13, 5], strides: Some(vec![2, 2, 1, 1]) },
        SliceOptions { starts: vec![0, 0, 0, 0], sizes: vec![1, 7, 13, 3], strides: Some(vec![1, 1, 1, 2]) },
    ];
    for o in slices {
        check(&Op::Slice(o.clone()), &[(shape.clone(), v.clone())], Tol::Ulp(0), &format!("slice {o:?}"));
    }
    check(
        &Op::Slice(SliceOptions { starts: vec![], sizes: vec![], strides: None }),
        &[(vec![], vec![2.0])],
        Tol::Ulp(0),
        "slice scalar",
    );
    for axis in 0..4u32 {
        let mut inputs = Vec::new();
        for extra in [1u32, 3, 2] {
            let mut s = vec![2u32, 3, 4, 5];
            s[axis as usize] = extra;
            inputs.push((s.clone(), rng.floats(count(&s), -1.0, 1.0)));
        }
        check(&Op::Concat { axis }, &inputs, Tol::Ulp(0), &format!("concat {axis}"));
    }
    check(&Op::Concat { axis: 0 }, &[(vec![7], rng.floats(7, -1.0, 1.0))], Tol::Ulp(0), "concat one");
}

#[test]
fn pads() {
    let mut rng = Rng::new(14);
    let cases: &[(&[u32], &[u32], &[u32])] = &[
        (&[7], &[2], &[3]),
        (&[3, 4], &[1, 2], &[2, 1]),
        (&[2, 3, 4, 5], &[0, 1, 2, 3], &[1, 2, 3, 4]),
        (&[2, 3, 4, 5], &[0, 0, 0, 0], &[0, 0, 0, 0]),
        (&[2, 3, 4, 5], &[1, 0, 3, 0], &[0, 2, 0, 0]),
        (&[1, 3, 13, 13], &[0, 0, 1, 1], &[0, 0, 1, 1]),
    ];
    for &(shape, begin, end) in cases {
        let v = rng.floats(count(shape), -1.0, 1.0);
        for mode in [PaddingMode::Constant, PaddingMode::Edge, PaddingMode::Reflection] {
            let ok = mode != PaddingMode::Reflection
                || shape.iter().zip(begin.iter().zip(end)).all(|(&n, (&b, &e))| b < n && e < n);
            if !ok {
                continue;
            }
            let o = PadOptions {
                beginning_padding: begin.to_vec(),
                ending_padding: end.to_vec(),
                mode,
                value: Number::Double(-2.5),
            };
            check(&Op::Pad(o), &[(shape.to_vec(), v.clone())], Tol::Ulp(0), &format!("pad {shape:?} {mode:?}"));
        }
    }
    let o = PadOptions {
        beginning_padding: vec![],
        ending_padding: vec![],
        mode: PaddingMode::Edge,
        value: Number::Double(0.0),
    };
    check(&Op::Pad(o), &[(vec![], vec![3.0])], Tol::Ulp(0), "pad scalar");
}

// ---------------------------------------------------------------- pooling and resampling

#[test]
fn pooling() {
    let mut rng = Rng::new(15);
    let geometries = [
        Pool2dOptions::default(),
        Pool2dOptions {
            window_dimensions: Some(vec![3, 3]),
            strides: Some(vec![2, 2]),
            padding: Some(vec![1, 1, 1, 1]),
            ..Default::default()
        },
        Pool2dOptions { window_dimensions: Some(vec![2, 2]), strides: Some(vec![2, 2]), ..Default::default() },
        Pool2dOptions {
            window_dimensions: Some(vec![3, 2]),
            dilations: Some(vec![2, 1]),
            padding: Some(vec![2, 0, 1, 3]),
            ..Default::default()
        },
        Pool2dOptions {
            window_dimensions: Some(vec![3, 3]),
            strides: Some(vec![2, 2]),
            output_shape_rounding: RoundingType::Ceil,
            ..Default::default()
        },
        Pool2dOptions { window_dimensions: Some(vec![5, 5]), padding: Some(vec![2, 2, 2, 2]), ..Default::default() },
    ];
    for kind in PoolKind::ALL {
        for layout in [InputLayout::Nchw, InputLayout::Nhwc] {
            for g in &geometries {
                let o = Pool2dOptions { layout, ..g.clone() };
                let shape = match layout {
                    InputLayout::Nchw => vec![2, 3, 7, 13],
                    InputLayout::Nhwc => vec![2, 7, 13, 3],
                };
                let v = rng.floats(count(&shape), -5.0, 5.0);
                let tol = if kind == PoolKind::Max { Tol::Ulp(0) } else { Tol::Ulp(1) };
                check(&Op::Pool2d(kind, o.clone()), &[(shape, v)], tol, &format!("{} {o:?}", kind.name()));
            }
        }
    }
}

#[test]
fn resampling() {
    let mut rng = Rng::new(16);
    let options = [
        Resample2dOptions { scales: Some(vec![2.0, 2.0]), ..Default::default() },
        Resample2dOptions { sizes: Some(vec![13, 5]), ..Default::default() },
        Resample2dOptions { scales: Some(vec![0.5, 0.7]), ..Default::default() },
        Resample2dOptions { sizes: Some(vec![9, 33]), axes: Some(vec![1, 2]), ..Default::default() },
        Resample2dOptions { scales: Some(vec![1.5, 3.0]), axes: Some(vec![3, 0]), ..Default::default() },
        Resample2dOptions::default(),
    ];
    for mode in [InterpolationMode::NearestNeighbor, InterpolationMode::Linear] {
        for o in &options {
            let o = Resample2dOptions { mode, ..o.clone() };
            let v = rng.floats(2 * 3 * 7 * 6, -5.0, 5.0);
            check(&Op::Resample2d(o.clone()), &[(vec![2, 3, 7, 6], v)], Tol::Ulp(0), &format!("resample2d {o:?}"));
        }
    }
}

// ---------------------------------------------------------------- entry checks

#[test]
fn declines_and_errors() {
    let d = OperandDescriptor::new(DataType::Float32, vec![2, 2]);
    let i = OperandDescriptor::new(DataType::Int32, vec![2, 2]);
    let v = [1.0f32; 4];
    let mut out = [0.0f32; 4];
    // Operators without a kernel, and other data types.
    assert!(float32::run(&Op::Matmul, &[(&d, &v), (&d, &v)], (&d, &mut out)).is_none());
    assert!(float32::run(&Op::Binary(BinaryOp::Add), &[(&i, &v), (&i, &v)], (&i, &mut out)).is_none());
    // Lengths that disagree with the shapes, a wrong output shape, invalid options: errors.
    let short = [1.0f32; 3];
    let r = float32::run(&Op::Binary(BinaryOp::Add), &[(&d, &short), (&d, &v)], (&d, &mut out));
    assert!(matches!(r, Some(Err(_))));
    let wide = OperandDescriptor::new(DataType::Float32, vec![4]);
    let r = float32::run(&Op::Unary(UnaryOp::Exp), &[(&d, &v)], (&wide, &mut out));
    assert!(matches!(r, Some(Err(_))));
    let r = float32::run(&Op::Softmax { axis: 5 }, &[(&d, &v)], (&d, &mut out));
    assert!(matches!(r, Some(Err(_))));
    let mut small = [0.0f32; 2];
    let r = float32::run(
        &Op::Reduce(ReduceOp::Sum, ReduceOptions { axes: Some(vec![1]), keep_dimensions: false }),
        &[(&d, &v)],
        (&OperandDescriptor::new(DataType::Float32, vec![2]), &mut small[..1]),
    );
    assert!(matches!(r, Some(Err(_))));
    let r = float32::run(
        &Op::Concat { axis: 0 },
        &[(&d, &v), (&d, &short)],
        (&OperandDescriptor::new(DataType::Float32, vec![4, 2]), &mut [0.0; 8]),
    );
    assert!(matches!(r, Some(Err(_))));
}

#[test]
fn triangular_and_cumulative_sum() {
    use webnn_wgpu::ops::cumulative_sum::CumulativeSumOptions;
    use webnn_wgpu::ops::triangular::TriangularOptions;
    let mut rng = Rng::new(17);
    for shape in [vec![7u32, 13], vec![2, 3, 5, 4], vec![1, 33]] {
        let v = rng.floats(count(&shape), -3.0, 3.0);
        for upper in [true, false] {
            for diagonal in [0, 1, -1, 3, -4, 40, -40, i32::MAX, i32::MIN] {
                let o = TriangularOptions { upper, diagonal };
                check(
                    &Op::Triangular(o.clone()),
                    &[(shape.clone(), v.clone())],
                    Tol::Ulp(0),
                    &format!("triangular {shape:?} {o:?}"),
                );
            }
        }
    }
    for shape in [vec![33u32], vec![2, 3, 4, 5], vec![7, 1, 13]] {
        let v = rng.floats(count(&shape), -3.0, 3.0);
        for axis in 0..shape.len() as u32 {
            for (exclusive, reversed) in [(false, false), (true, false), (false, true), (true, true)] {
                let o = CumulativeSumOptions { axis, exclusive, reversed };
                check(
                    &Op::CumulativeSum(o.clone()),
                    &[(shape.clone(), v.clone())],
                    Tol::Ulp(0),
                    &format!("cumulativeSum {shape:?} {o:?}"),
                );
            }
        }
    }
}
