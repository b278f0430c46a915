//! Differential tests of softmax against the float64 reference: every axis of several ranks,
//! size-1 and long axes (one workgroup per row), large inputs that overflow exp without the max
//! subtraction, float16, -Infinity entries, the one-launch lowering of contiguous rows, and the
//! spec's validation errors.
#![cfg(not(target_arch = "wasm32"))] // native: `wasm-pack test` builds every test target for wasm32

mod common;
use common::*;
use webnn_wgpu::graph::{DataType, OperandDescriptor};
use webnn_wgpu::ops::wgsl::DeviceTraits;
use webnn_wgpu::ops::{self, HostTensor, LowerRequest, Lowering, Op};
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

/// The launches of softmax along `axis` of a `data_type` tensor of `shape`: (invocations,
/// workgroup size) each, and the scratch buffer count.
fn launches(data_type: DataType, shape: &[u32], axis: u32) -> (Vec<(u64, u32)>, usize) {
    let d = OperandDescriptor::new(data_type, shape.to_vec());
    let request = LowerRequest { inputs: vec![&d], outputs: vec![&d], shader_f16: false, device: DeviceTraits::default() };
    match ops::lower(&Op::Softmax { axis }, &request).unwrap() {
        Lowering::Kernels { scratch, launches } => {
            (launches.iter().map(|l| (l.invocations, l.workgroup_size)).collect(), scratch.len())
        }
        Lowering::Alias => panic!("softmax lowered to an alias"),
    }
}

#[test]
fn softmax_contiguous_rows_take_one_launch() {
    let f32 = DataType::Float32;
    // The MoE demo's attention scores: 8 rows of 256, a workgroup each, nothing in between.
    assert_eq!(launches(f32, &[2, 4, 256], 2), (vec![(8 * 256, 256)], 0));
    // Narrow rows: an invocation each.
    assert_eq!(launches(f32, &[3, 7], 1), (vec![(3, 64)], 0));
    // Trailing size-1 axes leave rows contiguous.
    assert_eq!(launches(f32, &[3, 300, 1, 1], 1), (vec![(3 * 256, 256)], 0));
    assert_eq!(launches(DataType::Float16, &[3, 8], 1), (vec![(3, 64)], 0));
    // Strided rows, and float16 rows of odd length, reduce to a scratch buffer, then apply.
    assert_eq!(launches(f32, &[3, 7], 0).0.len(), 2);
    assert_eq!(launches(f32, &[2, 300, 2], 1).0.len(), 2);
    assert_eq!(launches(DataType::Float16, &[3, 7], 1).0.len(), 2);
}

/// Rows below, at and above the workgroup size through the one-launch kernel (float16 rows of
/// odd length through the two launches): random rows, rows offset by +-1000 (exp overflows
/// without the max subtraction) and rows with -Infinity entries.
#[test]
fn softmax_contiguous_rows_match_the_reference() {
    let ctx = context();
    let mut rng = Rng::new(7);
    for data_type in [DataType::Float32, DataType::Float16] {
        for length in [1u32, 2, 7, 8, 255, 256, 257, 1000, 5000] {
            for outer in [&[4u32][..], &[2, 3]] {
                let mut shape = outer.to_vec();
                shape.push(length);
                let mut x = rng.tensor(data_type, &shape, -10.0, 10.0);
                let rows = x.data.chunks_mut(length as usize);
                for (r, row) in rows.enumerate() {
                    for (j, v) in row.iter_mut().enumerate() {
                        match r % 4 {
                            1 => *v += 1000.0,
                            2 => *v -= 1000.0,
                            3 if j % 5 == 3 => *v = f64::NEG_INFINITY,
                            _ => {}
                        }
                        *v = ops::reference::round_to(*v, data_type);
                    }
                }
                let axis = outer.len() as u32;
                // Tighter than WPT's 3 * length + 3 ULP, which lets a long row's sum be off by
                // 1e-3: WGSL bounds exp(x) to 3 + 2|x| ULP, |x - max| <= 20 here, and the
                // element and the sum carry it. llvmpipe is within 36 (float32) and 1 (float16).
                let ulp = if data_type == DataType::Float16 { 2 } else { 128 };
                check_op(&ctx, &Op::Softmax { axis }, &[x], ulp, 0.0);
            }
        }
    }
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
