//! Differential tests of the activations against the float64 reference: random shapes with rank
//! 0 and size-1 dimensions, every allowed data type, wide input ranges including the regions
//! where the naive formulas cancel or overflow, NaN and infinities, and validation errors.
#![cfg(not(target_arch = "wasm32"))] // native: `wasm-pack test` builds every test target for wasm32

mod common;
use common::*;
use webnn_wgpu::graph::{DataType, OperandDescriptor};
use webnn_wgpu::ops::activation::Activation;
use webnn_wgpu::ops::{self, HostTensor, Op};
use webnn_wgpu::Error;

const SHAPES: &[&[u32]] = &[&[], &[1], &[7], &[3, 1, 4], &[2, 3, 1, 5], &[1, 1, 2, 1, 3], &[600]];

/// Results below float32's normal range may be flushed to zero by the GPU.
const FLUSH: f64 = f32::MIN_POSITIVE as f64;

/// WPT's ULP budgets.
fn ulp(op: &Activation) -> u64 {
    match op {
        Activation::Sigmoid => 34,
        Activation::Tanh => 16,
        Activation::Elu { .. } | Activation::Gelu | Activation::Softplus => 18,
        Activation::HardSigmoid { .. } | Activation::Linear { .. } => 2,
        Activation::HardSwish => 4,
        Activation::Softsign => 3,
        _ => 1,
    }
}

fn float_ops() -> Vec<Activation> {
    vec![
        Activation::Relu,
        Activation::Sigmoid,
        Activation::Tanh,
        Activation::Gelu,
        Activation::LeakyRelu { alpha: 0.01 },
        Activation::LeakyRelu { alpha: -1.7 },
        Activation::Clamp { min_value: None, max_value: None },
        Activation::Clamp { min_value: Some((-1.5).into()), max_value: None },
        Activation::Clamp { min_value: None, max_value: Some(2.25.into()) },
        Activation::Clamp { min_value: Some((-3.0).into()), max_value: Some(0.1.into()) },
        Activation::Clamp { min_value: Some(f64::NAN.into()), max_value: Some(2.0.into()) },
        Activation::Elu { alpha: 1.0 },
        Activation::Elu { alpha: 0.3 },
        Activation::HardSigmoid { alpha: 0.2, beta: 0.5 },
        Activation::HardSigmoid { alpha: -1.1, beta: 0.25 },
        Activation::HardSwish,
        Activation::Linear { alpha: 1.0, beta: 0.0 },
        Activation::Linear { alpha: -2.5, beta: 0.75 },
        Activation::Softplus,
        Activation::Softsign,
    ]
}

#[test]
fn float_activations_random_shapes() {
    let ctx = context();
    let mut rng = Rng::new(11);
    for op in float_ops() {
        for data_type in [DataType::Float32, DataType::Float16] {
            for (k, shape) in SHAPES.iter().enumerate() {
                let range = [1.0, 8.0, 30.0][k % 3];
                let x = rng.tensor(data_type, shape, -range, range);
                check_op(&ctx, &Op::Activation(op.clone()), &[x], ulp(&op), abs(&op));
            }
        }
    }
}

/// Absolute slack: flushed subnormals, and for alpha x + beta the rounding of alpha x where the
/// sum cancels (where the GPU's fma is not fused).
fn abs(op: &Activation) -> f64 {
    match op {
        Activation::HardSigmoid { .. } => 2.4e-7,
        Activation::Linear { .. } => 1.6e-5,
        _ => FLUSH,
    }
}

/// Values where `exp(x) - 1`, `1 + erf(x)`, `ln(1 + exp(x))` or `exp(2x)` lose accuracy or
/// overflow, and the special values.
#[test]
fn float_activations_edge_values() {
    let ctx = context();
    let values = [
        0.0, -0.0, 1e-6, -1e-6, 1e-3, -1e-3, 0.3, -0.3, 0.5, -0.5, 2.0, -2.0, 5.0, -5.0, 9.0, -9.0, 12.0, -12.0,
        20.0, -20.0, 50.0, -50.0, 90.0, -90.0, 1e30, -1e30, f64::INFINITY, f64::NEG_INFINITY,
    ];
    for op in float_ops() {
        for data_type in [DataType::Float32, DataType::Float16] {
            let d = OperandDescriptor::new(data_type, vec![values.len() as u32]);
            let data = values.iter().map(|&v| ops::reference::round_to(v, data_type)).collect();
            let x = HostTensor::new(d, data).unwrap();
            check_op(&ctx, &Op::Activation(op.clone()), &[x], ulp(&op), abs(&op));
        }
    }
}

/// NaN propagates through the activations the spec defines with IEEE arithmetic.
#[test]
fn nan_propagates() {
    let ctx = context();
    for op in [
        Activation::Relu,
        Activation::Sigmoid,
        Activation::Tanh,
        Activation::Gelu,
        Activation::LeakyRelu { alpha: 0.01 },
        Activation::Clamp { min_value: None, max_value: None },
        Activation::Elu { alpha: 1.0 },
        Activation::Linear { alpha: 2.0, beta: 1.0 },
        Activation::Softplus,
        Activation::Softsign,
    ] {
        let x = HostTensor::new(OperandDescriptor::new(DataType::Float32, vec![3]), vec![f64::NAN, 1.0, -1.0]).unwrap();
        let out = run_op(&ctx, &Op::Activation(op.clone()), &[x], &[false]).unwrap();
        assert!(out[0].data[0].is_nan(), "{}: NaN gave {}", op.name(), out[0].data[0]);
    }
}

#[test]
fn integer_relu_and_clamp() {
    let ctx = context();
    let mut rng = Rng::new(12);
    let types = [DataType::Int32, DataType::Uint32, DataType::Int8, DataType::Uint8];
    for data_type in types {
        let (lo, hi) = match data_type {
            DataType::Int32 => (-2.0e9, 2.0e9),
            DataType::Uint32 => (0.0, 4.0e9),
            DataType::Int8 => (-128.0, 128.0),
            _ => (0.0, 256.0),
        };
        for shape in SHAPES {
            let x = rng.tensor(data_type, shape, lo, hi);
            if matches!(data_type, DataType::Int32 | DataType::Int8) {
                check_op(&ctx, &Op::Activation(Activation::Relu), &[x.clone()], 0, 0.0);
            }
            for (min_value, max_value) in [
                (None, None),
                (Some(5.0), Some(100.0)),
                (Some(-7.0), None),
                (None, Some(1e12)),
                (Some(f64::NEG_INFINITY), Some(3.0)),
                // Cast to the type first: rounds half to even, then saturates.
                (Some(2.5), Some(2.5)),
                // The spec's cast makes NaN 0 for integer types.
                (Some(f64::NAN), None),
            ] {
                let op = Op::Activation(Activation::Clamp {
                    min_value: min_value.map(Into::into),
                    max_value: max_value.map(Into::into),
                });
                check_op(&ctx, &op, &[x.clone()], 0, 0.0);
            }
        }
    }
}

#[test]
fn prelu_broadcasts_bidirectionally() {
    let ctx = context();
    let mut rng = Rng::new(13);
    let cases: &[(&[u32], &[u32])] =
        &[(&[], &[]), (&[5], &[5]), (&[2, 3, 4], &[4]), (&[2, 3, 4], &[3, 1]), (&[4], &[2, 1, 4]), (&[1, 3], &[2, 1])];
    for data_type in [DataType::Float32, DataType::Float16, DataType::Int32, DataType::Int8] {
        for (input, slope) in cases {
            let (lo, hi) = if data_type.is_float() { (-10.0, 10.0) } else { (-9.0, 10.0) };
            let x = rng.tensor(data_type, input, lo, hi);
            let s = rng.tensor(data_type, slope, lo, hi);
            check_op(&ctx, &Op::Activation(Activation::Prelu), &[x, s], 1, 0.0);
        }
    }
}

fn validate(op: Activation, inputs: &[OperandDescriptor]) -> Result<Vec<OperandDescriptor>, Error> {
    let refs: Vec<&OperandDescriptor> = inputs.iter().collect();
    ops::validate(&Op::Activation(op), &refs)
}

#[test]
fn validation_errors() {
    let f32d = |shape: &[u32]| OperandDescriptor::new(DataType::Float32, shape.to_vec());
    let typed = |t| OperandDescriptor::new(t, vec![2]);
    for t in [DataType::Int32, DataType::Uint8] {
        for op in [Activation::Sigmoid, Activation::Gelu, Activation::Elu { alpha: 1.0 }, Activation::Softplus] {
            assert!(matches!(validate(op, &[typed(t)]), Err(Error::Type(_))));
        }
    }
    assert!(matches!(validate(Activation::Relu, &[typed(DataType::Uint32)]), Err(Error::Type(_))));
    assert!(matches!(validate(Activation::Relu, &[typed(DataType::Uint64)]), Err(Error::Type(_))));
    // min > max after casting to the input type is a TypeError; equal bounds are fine.
    let clamp = |lo: f64, hi: f64| Activation::Clamp { min_value: Some(lo.into()), max_value: Some(hi.into()) };
    assert!(matches!(validate(clamp(2.0, 1.0), &[f32d(&[2])]), Err(Error::Type(_))));
    assert!(validate(clamp(1.0, 1.0), &[f32d(&[2])]).is_ok());
    // 1.2 and 1.4 both cast to int32 1.
    assert!(validate(clamp(1.4, 1.2), &[typed(DataType::Int32)]).is_ok());
    // -5 casts to uint8 0, 300 to 255.
    assert!(validate(clamp(300.0, -5.0), &[typed(DataType::Uint8)]).is_err());
    // prelu: types must match, shapes broadcast.
    let p = Activation::Prelu;
    assert!(matches!(validate(p.clone(), &[f32d(&[2, 3]), typed(DataType::Float16)]), Err(Error::Type(_))));
    assert!(matches!(validate(p.clone(), &[f32d(&[2, 3]), f32d(&[2])]), Err(Error::Type(_))));
    assert_eq!(validate(p.clone(), &[f32d(&[3]), f32d(&[2, 1])]).unwrap(), vec![f32d(&[2, 3])]);
    assert!(matches!(
        validate(p, &[typed(DataType::Uint8), typed(DataType::Uint8)]),
        Err(Error::Type(_))
    ));
}

#[test]
fn op_support_limits_list_every_activation() {
    for op in Activation::defaults() {
        let l = ops::limits::of(op.name()).unwrap();
        assert!(l.operands.iter().all(|o| o.data_types.contains(&DataType::Float32)), "{}", op.name());
    }
    let prelu = ops::limits::of("prelu").unwrap();
    assert_eq!(prelu.operands.iter().map(|o| o.name).collect::<Vec<_>>(), ["input", "slope", "output"]);
}
