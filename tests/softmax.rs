//! Differential tests of softmax against the float64 reference: every axis of several ranks,
//! size-1 and long axes (one workgroup per row), large inputs that overflow exp without the max
//! subtraction, float16, and the spec's validation errors.

mod common;
use common::*;
use webnn_wgpu::graph::{DataType, OperandDescriptor};
use webnn_wgpu::ops::{self, HostTensor, Op};
use webnn_wgpu::Error;

#[test]
fn softmax_every_axis() {
    let ctx = context();
    let mut rng = Rng::new(31);
    let shapes: &[&[u32]] = &[
        &[1],
        &[7],
        &[3, 1],
        &[2, 5],
        &[2, 3, 4],
        &[1, 4, 1, 3],
        &[2, 300],
        &[3, 257, 2],
    ];
    for data_type in [DataType::Float32, DataType::Float16] {
        for shape in shapes {
            for axis in 0..shape.len() as u32 {
                let x = rng.tensor(data_type, shape, -10.0, 10.0);
                // WPT's budget: 3 * size(axis) + 3 ULP.
                let ulp = 3 * shape[axis as usize] as u64 + 3;
                check_op(&ctx, &Op::Softmax { axis }, &[x], ulp, 1e-7);
            }
        }
    }
}

#[test]
fn softmax_subtracts_the_max() {
    let ctx = context();
    let d = OperandDescriptor::new(DataType::Float32, vec![2, 3]);
    let x = HostTensor::new(d, vec![1000.0, 1001.0, 1002.0, -1000.0, -1001.0, -1002.0]).unwrap();
    let gpu = run_op(&ctx, &Op::Softmax { axis: 1 }, &[x.clone()], &[false]).unwrap();
    assert!(
        gpu[0].data.iter().all(|v| v.is_finite()),
        "{:?}",
        gpu[0].data
    );
    assert_close(
        &gpu,
        &reference_op(&Op::Softmax { axis: 1 }, &[x]).unwrap(),
        12,
        0.0,
        "softmax large inputs",
    );
}

#[test]
fn softmax_validation() {
    let d = |t, s: &[u32]| OperandDescriptor::new(t, s.to_vec());
    let err = |axis, x: &OperandDescriptor| {
        matches!(
            ops::validate(&Op::Softmax { axis }, &[x]),
            Err(Error::Type(_))
        )
    };
    assert_eq!(
        ops::validate(&Op::Softmax { axis: 1 }, &[&d(DataType::Float16, &[2, 3])]).unwrap()[0],
        d(DataType::Float16, &[2, 3])
    );
    assert!(err(2, &d(DataType::Float32, &[2, 3])), "axis out of range");
    assert!(err(0, &d(DataType::Float32, &[])), "scalar");
    assert!(err(0, &d(DataType::Int32, &[4])), "int32");
}
