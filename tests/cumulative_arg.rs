//! Differential tests of cumulativeSum and argMin/argMax against the float64 reference: random
//! shapes (size-1 dimensions included), every axis and option, every allowed data type, int32
//! and int64 outputs of argMin/argMax; spec examples by value; validation.
#![cfg(not(target_arch = "wasm32"))] // native: `wasm-pack test` builds every test target for wasm32

mod common;
use common::moved::{desc, is_type_error, validate, TYPES};
use common::*;
use webnn_wgpu::graph::DataType;
use webnn_wgpu::ops::arg_min_max::{ArgKind, ArgMinMaxOptions};
use webnn_wgpu::ops::cumulative_sum::CumulativeSumOptions;
use webnn_wgpu::ops::{HostTensor, Op};

#[test]
fn cumulative_sum_all_types() {
    let ctx = context();
    let mut rng = Rng::new(51);
    for t in [
        DataType::Float32,
        DataType::Float16,
        DataType::Int32,
        DataType::Uint32,
    ] {
        let (lo, hi) = if t == DataType::Uint32 {
            (0.0, 1000.0)
        } else {
            (-1000.0, 1000.0)
        };
        for rank in 1..=5 {
            let shape = rng.shape(rank, if rank == 1 { 300 } else { 6 });
            for axis in 0..rank as u32 {
                for (exclusive, reversed) in
                    [(false, false), (true, false), (false, true), (true, true)]
                {
                    let x = rng.tensor(t, &shape, lo, hi);
                    let op = Op::CumulativeSum(CumulativeSumOptions {
                        axis,
                        exclusive,
                        reversed,
                    });
                    // f32 sums of up to 300 values of magnitude 1000 carry rounding of a few ulp
                    // of the running sum; float16 outputs round once from an f32 sum.
                    check_op(&ctx, &op, &[x], 2, 0.05);
                }
            }
        }
    }
}

#[test]
fn arg_min_max_all_types() {
    let ctx = context();
    let mut rng = Rng::new(52);
    for t in TYPES {
        // Narrow integer ranges make ties frequent: the first index must win.
        let (lo, hi) = if t.is_float() {
            (-50.0, 50.0)
        } else if t.is_signed() {
            (-4.0, 4.0)
        } else {
            (0.0, 5.0)
        };
        for rank in 1..=5 {
            let shape = rng.shape(rank, 6);
            for axis in 0..rank as u32 {
                for kind in [ArgKind::Min, ArgKind::Max] {
                    for keep_dimensions in [false, true] {
                        for output_data_type in [DataType::Int32, DataType::Int64] {
                            let x = rng.tensor(t, &shape, lo, hi);
                            let o = ArgMinMaxOptions {
                                axis,
                                keep_dimensions,
                                output_data_type,
                            };
                            check_op(&ctx, &Op::ArgMinMax(kind, o), &[x], 0, 0.0);
                        }
                    }
                }
            }
        }
        // A long axis (the scan of one invocation) and float16 ties after rounding.
        let x = rng.tensor(t, &[3, 517], lo, hi);
        let o = ArgMinMaxOptions {
            axis: 1,
            ..Default::default()
        };
        check_op(&ctx, &Op::ArgMinMax(ArgKind::Max, o), &[x], 0, 0.0);
    }
}

#[test]
fn spec_examples() {
    let ctx = context();
    let run = |op: Op, x: &HostTensor| run_op(&ctx, &op, &[x.clone()], &[]).unwrap().remove(0).data;
    let x = HostTensor::new(desc(DataType::Float32, &[4]), vec![1., 2., 3., 4.]).unwrap();
    let cs = |exclusive, reversed| {
        Op::CumulativeSum(CumulativeSumOptions {
            axis: 0,
            exclusive,
            reversed,
        })
    };
    assert_eq!(run(cs(false, false), &x), vec![1., 3., 6., 10.]);
    assert_eq!(run(cs(true, false), &x), vec![0., 1., 3., 6.]);
    assert_eq!(run(cs(false, true), &x), vec![10., 9., 7., 4.]);
    assert_eq!(run(cs(true, true), &x), vec![9., 7., 4., 0.]);
    let m = HostTensor::new(desc(DataType::Int32, &[2, 3]), vec![3., 7., 7., 5., 1., 5.]).unwrap();
    let arg = |kind, axis, keep_dimensions| {
        Op::ArgMinMax(
            kind,
            ArgMinMaxOptions {
                axis,
                keep_dimensions,
                output_data_type: DataType::Int32,
            },
        )
    };
    // Ties give the first index.
    assert_eq!(run(arg(ArgKind::Max, 1, false), &m), vec![1., 0.]);
    assert_eq!(run(arg(ArgKind::Min, 1, true), &m), vec![0., 1.]);
    assert_eq!(run(arg(ArgKind::Max, 0, false), &m), vec![1., 0., 0.]);
    let v = HostTensor::new(desc(DataType::Float32, &[5]), vec![2., -1., 9., -1., 9.]).unwrap();
    let o64 = ArgMinMaxOptions {
        output_data_type: DataType::Int64,
        ..Default::default()
    };
    assert_eq!(run(Op::ArgMinMax(ArgKind::Max, o64), &v), vec![2.]);
    assert_eq!(run(Op::ArgMinMax(ArgKind::Min, o64), &v), vec![1.]);
}

#[test]
fn validation() {
    let f = |s: &[u32]| desc(DataType::Float32, s);
    let cs = |axis| {
        Op::CumulativeSum(CumulativeSumOptions {
            axis,
            ..Default::default()
        })
    };
    assert_eq!(validate(&cs(1), &[f(&[4, 5])]).unwrap()[0], f(&[4, 5]));
    assert!(is_type_error(validate(&cs(2), &[f(&[4, 5])])));
    assert!(is_type_error(validate(&cs(0), &[f(&[])])));
    assert!(is_type_error(validate(
        &cs(0),
        &[desc(DataType::Int8, &[4])]
    )));

    let arg = |axis, keep_dimensions, output_data_type| {
        Op::ArgMinMax(
            ArgKind::Max,
            ArgMinMaxOptions {
                axis,
                keep_dimensions,
                output_data_type,
            },
        )
    };
    let out = |op: Op, s: &[u32]| validate(&op, &[f(s)]).map(|d| d[0].clone());
    assert_eq!(
        out(arg(1, false, DataType::Int32), &[4, 5, 6]).unwrap(),
        desc(DataType::Int32, &[4, 6])
    );
    assert_eq!(
        out(arg(1, true, DataType::Int64), &[4, 5, 6]).unwrap(),
        desc(DataType::Int64, &[4, 1, 6])
    );
    assert_eq!(
        out(arg(0, false, DataType::Int32), &[7]).unwrap(),
        desc(DataType::Int32, &[])
    );
    assert!(is_type_error(out(
        arg(3, false, DataType::Int32),
        &[4, 5, 6]
    )));
    assert!(is_type_error(out(arg(0, false, DataType::Int32), &[])));
    // outputDataType must be one of the spec's allowed int32 and int64.
    for t in [
        DataType::Uint32,
        DataType::Float32,
        DataType::Uint64,
        DataType::Int8,
    ] {
        assert!(is_type_error(out(arg(0, false, t), &[4])), "{t}");
    }
}
