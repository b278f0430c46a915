//! Differential tests of cast between every pair of supported types against the float64
//! reference: rounding to nearest even into float types (integers above 2^24 included), truncation
//! and saturation of floats into integers, two's complement wrap between integers, NaN and
//! infinities.
#![cfg(not(target_arch = "wasm32"))] // native: `wasm-pack test` builds every test target for wasm32

mod common;
use common::*;
use webnn_wgpu::graph::{DataType, OperandDescriptor};
use webnn_wgpu::ops::{self, HostTensor, Op};

const TYPES: [DataType; 6] =
    [DataType::Float32, DataType::Float16, DataType::Int32, DataType::Uint32, DataType::Int8, DataType::Uint8];

/// Edge values of each input type: extremes, halfway points, values around 2^24 and 2^31.
fn edge_values(data_type: DataType) -> Vec<f64> {
    match data_type {
        DataType::Float32 => vec![
            0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, 127.9, -128.9, 255.5, 256.0, -129.0, 65504.0, 65519.0, 65520.0,
            -65520.0, 1e-8, 2147483520.0, 2147483648.0, -2147483648.0, -2147483904.0, 4294967040.0, 4294967296.0,
            1e30, -1e30, f64::INFINITY, f64::NEG_INFINITY, f64::NAN,
        ],
        DataType::Float16 => {
            vec![0.0, -0.0, 0.5, -2.5, 127.5, -128.5, 255.0, 300.0, -300.0, 65504.0, f64::INFINITY, f64::NAN]
        }
        DataType::Int32 => vec![
            0.0, 1.0, -1.0, 127.0, 128.0, -128.0, -129.0, 255.0, 256.0, 2049.0, 65519.0, 65520.0, 16777217.0,
            16777219.0, -16777219.0, 33554434.0, 33554438.0, 2147483647.0, -2147483648.0,
        ],
        DataType::Uint32 => {
            vec![0.0, 1.0, 127.0, 128.0, 255.0, 256.0, 16777217.0, 16777219.0, 2147483648.0, 4294967295.0, 4294967167.0]
        }
        DataType::Int8 => vec![0.0, 1.0, -1.0, 127.0, -128.0, -7.0],
        _ => vec![0.0, 1.0, 127.0, 128.0, 255.0],
    }
}

#[test]
fn cast_every_pair_edge_values() {
    let ctx = context();
    for from in TYPES {
        let values: Vec<f64> = edge_values(from).into_iter().map(|v| ops::reference::round_to(v, from)).collect();
        let d = OperandDescriptor::new(from, vec![values.len() as u32]);
        let x = HostTensor::new(d, values).unwrap();
        for to in TYPES {
            check_op(&ctx, &Op::Cast { data_type: to }, &[x.clone()], 0, 0.0);
        }
    }
}

/// Every float16 bit pattern widened to float32: the branch-free widening every float16 kernel
/// loads through, subnormals, infinities and NaN included.
#[test]
fn cast_every_float16_to_float32() {
    let ctx = context();
    let values: Vec<f64> = (0..=u16::MAX).map(|b| half::f16::from_bits(b).to_f64()).collect();
    let x = HostTensor::new(OperandDescriptor::new(DataType::Float16, vec![values.len() as u32]), values).unwrap();
    check_op(&ctx, &Op::Cast { data_type: DataType::Float32 }, &[x], 0, 0.0);
}

#[test]
fn cast_every_pair_random_shapes() {
    let ctx = context();
    let mut rng = Rng::new(31);
    let shapes: &[&[u32]] = &[&[], &[1], &[5], &[2, 1, 3], &[1, 4, 1, 3, 2], &[1031]];
    for from in TYPES {
        let (lo, hi) = match from {
            DataType::Float32 => (-3.0e9, 5.0e9),
            DataType::Float16 => (-70000.0, 70000.0),
            DataType::Int32 => (-2.1e9, 2.1e9),
            DataType::Uint32 => (0.0, 4.2e9),
            DataType::Int8 => (-128.0, 128.0),
            _ => (0.0, 256.0),
        };
        for shape in shapes {
            let x = rng.tensor(from, shape, lo, hi);
            for to in TYPES {
                check_op(&ctx, &Op::Cast { data_type: to }, &[x.clone()], 0, 0.0);
            }
        }
    }
}

/// The spec's example: int8 -1 to uint8 is 255; and other wraps, checked against literal values.
#[test]
fn integer_wrap_examples() {
    let ctx = context();
    let cases: &[(DataType, f64, DataType, f64)] = &[
        (DataType::Int8, -1.0, DataType::Uint8, 255.0),
        (DataType::Int8, -1.0, DataType::Uint32, 4294967295.0),
        (DataType::Int32, 300.0, DataType::Uint8, 44.0),
        (DataType::Int32, -129.0, DataType::Int8, 127.0),
        (DataType::Uint32, 4294967295.0, DataType::Int32, -1.0),
        (DataType::Uint8, 200.0, DataType::Int8, -56.0),
        (DataType::Float32, -1.0, DataType::Uint8, 0.0),
        (DataType::Float32, 16777217.0, DataType::Int32, 16777216.0),
        (DataType::Int32, 16777217.0, DataType::Float32, 16777216.0),
        (DataType::Int32, 16777219.0, DataType::Float32, 16777220.0),
        (DataType::Int32, 70000.0, DataType::Float16, f64::INFINITY),
    ];
    for &(from, v, to, want) in cases {
        let x = HostTensor::new(OperandDescriptor::new(from, vec![]), vec![v]).unwrap();
        let out = run_op(&ctx, &Op::Cast { data_type: to }, &[x], &[true]).unwrap();
        assert_eq!(out[0].data, vec![want], "{from} {v} to {to}");
    }
}

#[test]
fn validation() {
    let d = OperandDescriptor::new(DataType::Float32, vec![2, 3]);
    let cast = |t| ops::validate(&Op::Cast { data_type: t }, &[&d]);
    assert_eq!(cast(DataType::Uint8).unwrap(), vec![OperandDescriptor::new(DataType::Uint8, vec![2, 3])]);
    assert_eq!(cast(DataType::Int64).unwrap(), vec![OperandDescriptor::new(DataType::Int64, vec![2, 3])]);
    let i64d = OperandDescriptor::new(DataType::Int64, vec![2]);
    assert!(ops::validate(&Op::Cast { data_type: DataType::Float32 }, &[&i64d]).is_ok());
}
