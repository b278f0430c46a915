//! Differential tests of the element-wise binary and unary families against the float64
//! reference: every broadcasting case, rank 0, size-1 dimensions, each supported data type.
#![cfg(not(target_arch = "wasm32"))] // native: `wasm-pack test` builds every test target for wasm32

mod common;
use common::*;
use webnn_wgpu::graph::DataType;
use webnn_wgpu::ops::elementwise_binary::BinaryOp;
use webnn_wgpu::ops::elementwise_unary::UnaryOp;
use webnn_wgpu::ops::{HostTensor, Op};

const BROADCAST_CASES: &[(&[u32], &[u32])] = &[
    (&[], &[]),
    (&[5], &[5]),
    (&[], &[3, 2]),
    (&[2, 3], &[]),
    (&[2, 1, 4], &[3, 1]),
    (&[1], &[4, 2]),
    (&[3, 1, 1], &[1, 4, 5]),
    (&[2, 3, 4, 5], &[5]),
    (&[1, 2, 1, 3, 1], &[2, 1, 3, 1, 2]),
];

#[test]
fn binary_float_types_all_broadcasts() {
    let ctx = context();
    let mut rng = Rng::new(1);
    for op in BinaryOp::ALL {
        for data_type in [DataType::Float32, DataType::Float16] {
            for (a, b) in BROADCAST_CASES {
                let (lo, hi) = if op == BinaryOp::Pow {
                    (0.1, 3.0)
                } else {
                    (-10.0, 10.0)
                };
                let x = rng.tensor(data_type, a, lo, hi);
                let y = rng.tensor(
                    data_type,
                    b,
                    if op == BinaryOp::Pow { -2.0 } else { lo },
                    hi,
                );
                let ulp = if op == BinaryOp::Pow { 4 } else { 1 };
                check_op(&ctx, &Op::Binary(op), &[x, y], ulp, 0.0);
            }
        }
    }
}

#[test]
fn binary_integer_types() {
    let ctx = context();
    let mut rng = Rng::new(2);
    for op in BinaryOp::ALL {
        for data_type in [
            DataType::Int32,
            DataType::Uint32,
            DataType::Int8,
            DataType::Uint8,
        ] {
            let (lo, hi): (f64, f64) = match (op, data_type) {
                (BinaryOp::Pow, _) => (0.0, 4.0),
                (_, DataType::Int8) => (-10.0, 10.0),
                (_, DataType::Uint8 | DataType::Uint32) => (1.0, 12.0),
                _ => (-100.0, 100.0),
            };
            let (lo_b, hi_b) = if op == BinaryOp::Div {
                (1.0, hi.max(2.0))
            } else {
                (lo, hi)
            };
            let x = rng.tensor(data_type, &[2, 3, 5], lo, hi);
            let y = rng.tensor(data_type, &[3, 1], lo_b, hi_b);
            // Unsigned subtraction below zero wraps on the GPU; the spec leaves overflow unspecified.
            if op == BinaryOp::Sub && matches!(data_type, DataType::Uint32 | DataType::Uint8) {
                continue;
            }
            check_op(&ctx, &Op::Binary(op), &[x, y], 0, 0.0);
        }
    }
}

#[test]
fn binary_rejects_mismatched_types_and_shapes() {
    let f32_ = webnn_wgpu::OperandDescriptor::new(DataType::Float32, vec![2, 3]);
    let i32_ = webnn_wgpu::OperandDescriptor::new(DataType::Int32, vec![2, 3]);
    let bad = webnn_wgpu::OperandDescriptor::new(DataType::Float32, vec![4]);
    let op = Op::Binary(BinaryOp::Add);
    assert!(matches!(
        webnn_wgpu::ops::validate(&op, &[&f32_, &i32_]),
        Err(webnn_wgpu::Error::Type(_))
    ));
    assert!(matches!(
        webnn_wgpu::ops::validate(&op, &[&f32_, &bad]),
        Err(webnn_wgpu::Error::Type(_))
    ));
}

#[test]
fn unary_float_ops() {
    let ctx = context();
    let mut rng = Rng::new(3);
    for op in UnaryOp::ALL {
        for data_type in [DataType::Float32, DataType::Float16] {
            for shape in [
                &[][..],
                &[1][..],
                &[7][..],
                &[2, 3, 5][..],
                &[1, 4, 1, 3][..],
            ] {
                let (lo, hi) = match op {
                    UnaryOp::Log | UnaryOp::Sqrt => (0.01, 50.0),
                    UnaryOp::Exp => (-5.0, 5.0),
                    UnaryOp::Tan => (-1.2, 1.2),
                    _ => (-8.0, 8.0),
                };
                let x = rng.tensor(data_type, shape, lo, hi);
                // Transcendental functions: WPT's absolute tolerance 1/1024 (f32) or 1/512 (f16).
                let abs = if data_type == DataType::Float16 {
                    1.0 / 512.0
                } else {
                    1.0 / 1024.0
                };
                let (ulp, abs) = match op {
                    UnaryOp::Sin
                    | UnaryOp::Cos
                    | UnaryOp::Tan
                    | UnaryOp::Erf
                    | UnaryOp::Exp
                    | UnaryOp::Log
                    | UnaryOp::Sqrt => (2, abs),
                    UnaryOp::Reciprocal => (2, 0.0),
                    _ => (0, 0.0),
                };
                if op == UnaryOp::Exp {
                    // WPT's budget: 32 ULP (float32), 1 ULP (float16).
                    let ulp = if data_type == DataType::Float16 { 1 } else { 32 };
                    check_op(&ctx, &Op::Unary(op), &[x], ulp, 0.0);
                } else {
                    check_op(&ctx, &Op::Unary(op), &[x], ulp, abs);
                }
            }
        }
    }
}

#[test]
fn unary_integer_ops() {
    let ctx = context();
    let mut rng = Rng::new(4);
    for op in [UnaryOp::Abs, UnaryOp::Neg, UnaryOp::Sign, UnaryOp::Identity] {
        for data_type in [DataType::Int32, DataType::Int8] {
            let x = rng.tensor(data_type, &[3, 4], -100.0, 100.0);
            check_op(&ctx, &Op::Unary(op), &[x], 0, 0.0);
        }
    }
}

/// erf within a few ULP everywhere: near 0 (where 1 - erfc would cancel), in the tails (where
/// erf is within an ULP of 1) and at the special values.
#[test]
fn erf_is_accurate() {
    use webnn_wgpu::graph::OperandDescriptor;
    use webnn_wgpu::ops::HostTensor;
    let ctx = context();
    let mut values: Vec<f64> = (-600..=600).map(|k| k as f64 / 100.0).collect();
    values.extend([1e-30, -1e-20, 1e-7, -3e-4, 0.4999, 0.5001, 9.0, -12.0, f64::INFINITY, f64::NEG_INFINITY]);
    for data_type in [DataType::Float32, DataType::Float16] {
        let d = OperandDescriptor::new(data_type, vec![values.len() as u32]);
        let data = values.iter().map(|&v| webnn_wgpu::ops::reference::round_to(v, data_type)).collect();
        let x = HostTensor::new(d, data).unwrap();
        check_op(&ctx, &Op::Unary(UnaryOp::Erf), &[x], 4, f32::MIN_POSITIVE as f64);
    }
}

/// Integer exponents (WPT's pow cases) are within 1 ULP of the float64 result over the whole
/// normal range, negative bases and exponents included.
#[test]
fn pow_integer_exponents_are_accurate() {
    let ctx = context();
    let mut rng = Rng::new(7);
    let base = rng.tensor(DataType::Float32, &[4096], -20.0, 20.0);
    let exponent = rng.tensor(DataType::Float32, &[4096], -12.0, 13.0);
    let exponent = HostTensor::new(exponent.descriptor.clone(), exponent.data.iter().map(|e| e.floor()).collect()).unwrap();
    check_op(&ctx, &Op::Binary(BinaryOp::Pow), &[base, exponent], 1, 0.0);
}

/// `values` rounded to `data_type`, as one input tensor.
fn tensor_of(data_type: DataType, values: &[f64]) -> HostTensor {
    let d = webnn_wgpu::graph::OperandDescriptor::new(data_type, vec![values.len() as u32]);
    let data = values.iter().map(|&v| webnn_wgpu::ops::reference::round_to(v, data_type)).collect();
    HostTensor::new(d, data).unwrap()
}

/// tan next to its poles (k pi/2 for odd k, |x| up to 100, and WPT's 1.6, 4.7, -1.5), where its
/// value reaches 1e6 and a coarse argument reduction loses the digits of `x - k pi/2`: within 4
/// ULP of the float64 value (WPT's absolute 1/1024 would hide relative errors of large values).
#[test]
fn tan_is_accurate_near_its_poles() {
    let ctx = context();
    let mut values = vec![1.6, 4.7, -1.5, 1.5707, -1.5709, 0.0, -0.0, 0.7853982, 1e-30];
    for k in (-63..=63).step_by(2) {
        let pole = k as f64 * std::f64::consts::FRAC_PI_2;
        for offset in [0.3, 0.1, 3e-2, 1e-2, 3e-3, 1e-3, 1e-4, 2e-5] {
            values.extend([pole + offset, pole - offset]);
        }
    }
    for (data_type, ulp) in [(DataType::Float32, 4), (DataType::Float16, 1)] {
        check_op(&ctx, &Op::Unary(UnaryOp::Tan), &[tensor_of(data_type, &values)], ulp, 0.0);
    }
}

/// exp over its whole finite range, within WPT's 32 ULP (float32) and 1 ULP (float16); results
/// below float32's normal range may be flushed to zero.
#[test]
fn exp_is_accurate_over_its_range() {
    let ctx = context();
    for (data_type, lo, hi, ulp) in [(DataType::Float32, -87.0, 88.7, 32), (DataType::Float16, -17.0, 11.08, 1)] {
        let values: Vec<f64> = (0..=4000).map(|k| lo + (hi - lo) * k as f64 / 4000.0).collect();
        check_op(&ctx, &Op::Unary(UnaryOp::Exp), &[tensor_of(data_type, &values)], ulp, f32::MIN_POSITIVE as f64);
    }
    let special = [f64::INFINITY, f64::NEG_INFINITY, 100.0, -110.0, 0.0];
    for data_type in [DataType::Float32, DataType::Float16] {
        let out = run_op(&ctx, &Op::Unary(UnaryOp::Exp), &[tensor_of(data_type, &special)], &[false]).unwrap();
        assert_eq!(out[0].data, [f64::INFINITY, 0.0, f64::INFINITY, 0.0, 1.0], "{data_type}");
    }
}

/// log has IEEE's special values: log(+-0) = -infinity, log(x < 0) = NaN, log(+infinity) =
/// +infinity (a GPU's `log` is undefined at 0 and below).
#[test]
fn log_of_zero_is_negative_infinity() {
    let ctx = context();
    for data_type in [DataType::Float32, DataType::Float16] {
        let x = tensor_of(data_type, &[0.0, -0.0, -1.0, f64::INFINITY, f64::NAN, 1.0]);
        let out = run_op(&ctx, &Op::Unary(UnaryOp::Log), &[x], &[false]).unwrap();
        let y = &out[0].data;
        assert_eq!(y[..2], [f64::NEG_INFINITY; 2], "{data_type}: {y:?}");
        assert!(y[2].is_nan() && y[4].is_nan(), "{data_type}: {y:?}");
        assert_eq!(y[3..4], [f64::INFINITY], "{data_type}: {y:?}");
        assert_eq!(y[5], 0.0, "{data_type}: {y:?}");
    }
}
