//! Differential tests of the element-wise logical operations and where against the float64
//! reference: every broadcasting case, rank 0, each allowed data type, values drawn from a
//! small set so that equal elements are common, NaN and infinities.
#![cfg(not(target_arch = "wasm32"))] // native: `wasm-pack test` builds every test target for wasm32

mod common;
use common::*;
use webnn_wgpu::graph::{DataType, OperandDescriptor};
use webnn_wgpu::ops::logical::LogicalOp;
use webnn_wgpu::ops::{self, HostTensor, Op};
use webnn_wgpu::Error;

const BROADCAST_CASES: &[(&[u32], &[u32])] = &[
    (&[], &[]),
    (&[5], &[5]),
    (&[], &[3, 2]),
    (&[2, 3], &[]),
    (&[2, 1, 4], &[3, 1]),
    (&[3, 1, 1], &[1, 4, 5]),
    (&[1, 2, 1, 3, 1], &[2, 1, 3, 1, 2]),
    (&[700], &[1]),
];

const TYPES: [DataType; 6] =
    [DataType::Float32, DataType::Float16, DataType::Int32, DataType::Uint32, DataType::Int8, DataType::Uint8];

/// A tensor of values from a small pool (plus the type's extremes), so comparisons see ties.
fn pooled(rng: &mut Rng, data_type: DataType, shape: &[u32]) -> HostTensor {
    let pool: &[f64] = match data_type {
        DataType::Float32 | DataType::Float16 => {
            &[-2.5, -1.0, -0.0, 0.0, 0.5, 3.0, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 65504.0]
        }
        DataType::Int32 => &[-2147483648.0, -7.0, -1.0, 0.0, 1.0, 3.0, 2147483647.0],
        DataType::Uint32 => &[0.0, 1.0, 3.0, 2147483648.0, 4294967295.0],
        DataType::Int8 => &[-128.0, -1.0, 0.0, 1.0, 3.0, 127.0],
        _ => &[0.0, 1.0, 2.0, 128.0, 255.0],
    };
    let d = OperandDescriptor::new(data_type, shape.to_vec());
    let data = (0..d.element_count()).map(|_| pool[rng.below(pool.len() as u32) as usize]).collect();
    HostTensor::new(d, data).unwrap()
}

#[test]
fn comparisons_every_type_and_broadcast() {
    let ctx = context();
    let mut rng = Rng::new(21);
    for op in &LogicalOp::ALL[..6] {
        for data_type in TYPES {
            for (a, b) in BROADCAST_CASES {
                let x = pooled(&mut rng, data_type, a);
                let y = pooled(&mut rng, data_type, b);
                check_op(&ctx, &Op::Logical(*op), &[x, y], 0, 0.0);
            }
        }
    }
}

#[test]
fn logical_and_or_xor_not() {
    let ctx = context();
    let mut rng = Rng::new(22);
    for op in [LogicalOp::LogicalAnd, LogicalOp::LogicalOr, LogicalOp::LogicalXor] {
        for (a, b) in BROADCAST_CASES {
            let x = pooled(&mut rng, DataType::Uint8, a);
            let y = pooled(&mut rng, DataType::Uint8, b);
            check_op(&ctx, &Op::Logical(op), &[x, y], 0, 0.0);
        }
    }
    for (shape, _) in BROADCAST_CASES {
        let x = pooled(&mut rng, DataType::Uint8, shape);
        check_op(&ctx, &Op::Logical(LogicalOp::LogicalNot), &[x], 0, 0.0);
    }
}

#[test]
fn is_nan_and_is_infinite() {
    let ctx = context();
    let mut rng = Rng::new(23);
    for op in [LogicalOp::IsNaN, LogicalOp::IsInfinite] {
        for data_type in [DataType::Float32, DataType::Float16] {
            for (shape, _) in BROADCAST_CASES {
                let x = pooled(&mut rng, data_type, shape);
                check_op(&ctx, &Op::Logical(op), &[x], 0, 0.0);
            }
        }
    }
    // float32 values beyond float16's range and the largest finite float32.
    let d = OperandDescriptor::new(DataType::Float32, vec![4]);
    let x = HostTensor::new(d, vec![1e30, f32::MAX as f64, f64::NAN, f64::NEG_INFINITY]).unwrap();
    let out = run_op(&ctx, &Op::Logical(LogicalOp::IsInfinite), &[x], &[false]).unwrap();
    assert_eq!(out[0].data, vec![0.0, 0.0, 0.0, 1.0]);
}

/// NaN compares unequal to everything, itself included: notEqual is 1, every other comparison 0.
#[test]
fn nan_comparisons() {
    let ctx = context();
    let d = OperandDescriptor::new(DataType::Float32, vec![3]);
    let a = HostTensor::new(d.clone(), vec![f64::NAN, f64::NAN, 1.0]).unwrap();
    let b = HostTensor::new(d, vec![f64::NAN, 1.0, f64::NAN]).unwrap();
    for op in &LogicalOp::ALL[..6] {
        let out = run_op(&ctx, &Op::Logical(*op), &[a.clone(), b.clone()], &[false, false]).unwrap();
        let want = if *op == LogicalOp::NotEqual { 1.0 } else { 0.0 };
        assert_eq!(out[0].data, vec![want; 3], "{}", op.name());
    }
}

#[test]
fn where_broadcasts_all_three() {
    let ctx = context();
    let mut rng = Rng::new(24);
    let cases: &[(&[u32], &[u32], &[u32])] = &[
        (&[], &[], &[]),
        (&[4], &[4], &[4]),
        (&[2, 1], &[3], &[1, 1, 3]),
        (&[1, 3, 1], &[2, 1, 4], &[4]),
        (&[5], &[], &[2, 5]),
        (&[2, 3, 4], &[1], &[3, 1]),
        (&[513], &[513], &[1]),
    ];
    for data_type in TYPES {
        for (c, t, f) in cases {
            let cond = pooled(&mut rng, DataType::Uint8, c);
            let tv = pooled(&mut rng, data_type, t);
            let fv = pooled(&mut rng, data_type, f);
            check_op(&ctx, &Op::Where, &[cond, tv, fv], 0, 0.0);
        }
    }
}

fn validate(op: &Op, inputs: &[OperandDescriptor]) -> Result<Vec<OperandDescriptor>, Error> {
    let refs: Vec<&OperandDescriptor> = inputs.iter().collect();
    ops::validate(op, &refs)
}

#[test]
fn validation_errors() {
    let d = |t, shape: &[u32]| OperandDescriptor::new(t, shape.to_vec());
    let f = DataType::Float32;
    let u8t = DataType::Uint8;
    let logical = |op| Op::Logical(op);
    // Output is uint8 with the broadcast shape.
    assert_eq!(validate(&logical(LogicalOp::Greater), &[d(f, &[2, 1]), d(f, &[3])]).unwrap(), vec![d(u8t, &[2, 3])]);
    assert!(matches!(validate(&logical(LogicalOp::Equal), &[d(f, &[2]), d(f, &[3])]), Err(Error::Type(_))));
    assert!(matches!(
        validate(&logical(LogicalOp::Equal), &[d(f, &[2]), d(DataType::Float16, &[2])]),
        Err(Error::Type(_))
    ));
    for op in [LogicalOp::LogicalAnd, LogicalOp::LogicalOr, LogicalOp::LogicalXor] {
        assert!(matches!(validate(&logical(op), &[d(f, &[2]), d(f, &[2])]), Err(Error::Type(_))));
    }
    assert!(matches!(validate(&logical(LogicalOp::LogicalNot), &[d(DataType::Int8, &[2])]), Err(Error::Type(_))));
    for op in [LogicalOp::IsNaN, LogicalOp::IsInfinite] {
        assert!(matches!(validate(&logical(op), &[d(DataType::Int32, &[2])]), Err(Error::Type(_))));
        assert_eq!(validate(&logical(op), &[d(DataType::Float16, &[])]).unwrap(), vec![d(u8t, &[])]);
    }
    // Wrong operand counts.
    assert!(validate(&logical(LogicalOp::LogicalNot), &[d(u8t, &[2]), d(u8t, &[2])]).is_err());
    assert!(validate(&logical(LogicalOp::Equal), &[d(f, &[2])]).is_err());
    // where: uint8 condition, matching value types, all three broadcast.
    assert!(matches!(validate(&Op::Where, &[d(f, &[2]), d(f, &[2]), d(f, &[2])]), Err(Error::Type(_))));
    assert!(matches!(
        validate(&Op::Where, &[d(u8t, &[2]), d(f, &[2]), d(DataType::Int32, &[2])]),
        Err(Error::Type(_))
    ));
    assert_eq!(validate(&Op::Where, &[d(u8t, &[2]), d(f, &[2, 1]), d(f, &[2])]).unwrap(), vec![d(f, &[2, 2])]);
    assert!(matches!(validate(&Op::Where, &[d(u8t, &[3]), d(f, &[2, 1]), d(f, &[2])]), Err(Error::Type(_))));
    assert_eq!(
        validate(&Op::Where, &[d(u8t, &[3, 1, 1]), d(f, &[2, 1]), d(f, &[5])]).unwrap(),
        vec![d(f, &[3, 2, 5])]
    );
}
