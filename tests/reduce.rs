//! Differential tests of the ten reductions against the float64 reference: every allowed data
//! type, rank 0, absent / empty / unsorted axes, keepDimensions, short rows (one invocation per
//! row) and long rows (one workgroup per row), and the spec's validation errors.
#![cfg(not(target_arch = "wasm32"))] // native: `wasm-pack test` builds every test target for wasm32

mod common;
use common::*;
use webnn_wgpu::graph::{DataType, OperandDescriptor};
use webnn_wgpu::ops::reduce::{ReduceOp, ReduceOptions};
use webnn_wgpu::ops::{self, HostTensor, Op};
use webnn_wgpu::backend::webgpu::Context;
use webnn_wgpu::Error;

/// (shape, axes, keepDimensions).
const CASES: &[(&[u32], Option<&[u32]>, bool)] = &[
    (&[], None, false),
    (&[], Some(&[]), true),
    (&[5], None, false),
    (&[1], Some(&[0]), true),
    (&[2, 3, 4], Some(&[1]), false),
    (&[2, 3, 4], Some(&[2, 0]), true),
    (&[4, 1, 5], Some(&[]), false),
    (&[2, 3, 4], None, true),
    (&[3, 300], Some(&[1]), false),
    (&[2, 260, 3], Some(&[1]), true),
    (&[600], None, false),
    (&[2, 1, 3, 2, 5], Some(&[3, 1, 4]), false),
];

/// Values that keep every reduction finite and away from cancellation traps.
fn range(op: ReduceOp, data_type: DataType) -> (f64, f64) {
    match (op, data_type.is_float()) {
        (ReduceOp::Product, true) => (0.95, 1.05),
        (ReduceOp::Product, false) => (-3.0, 3.0),
        (ReduceOp::LogSum, true) => (0.1, 2.0),
        (ReduceOp::LogSumExp, _) => (-5.0, 5.0),
        (_, true) => (-2.0, 2.0),
        (_, false) => match data_type {
            DataType::Uint32 | DataType::Uint8 => (0.0, 100.0),
            _ => (-100.0, 100.0),
        },
    }
}

/// Compares with the reference within the f32 error of an `n`-term reduction, relative to the
/// sum of magnitudes of the terms, plus the output's rounding; integers exactly.
fn check_reduce(ctx: &Context, op: ReduceOp, options: &ReduceOptions, input: &HostTensor) {
    let what = format!("{} {options:?} on {}", op.name(), input.descriptor);
    let reduce = Op::Reduce(op, options.clone());
    let reference =
        reference_op(&reduce, &[input.clone()]).unwrap_or_else(|e| panic!("{what}: {e}"));
    let rows = reference[0].data.len().max(1);
    let n = (input.data.len() / rows) as f64;
    let data_type = input.descriptor.data_type;
    // Sum of the magnitudes of the terms of each output.
    let magnitude = |squares: bool| {
        let d = OperandDescriptor::new(DataType::Float32, input.descriptor.shape.clone());
        let t = HostTensor::new(
            d,
            input
                .data
                .iter()
                .map(|v| if squares { v * v } else { v.abs() })
                .collect(),
        )
        .unwrap();
        reference_op(&Op::Reduce(ReduceOp::Sum, options.clone()), &[t]).unwrap()[0]
            .data
            .clone()
    };
    let bound = match op {
        ReduceOp::L1 | ReduceOp::Sum => magnitude(false),
        ReduceOp::Mean => magnitude(false).iter().map(|b| b / n).collect(),
        ReduceOp::SumSquare => magnitude(true),
        _ => vec![0.0; rows],
    };
    let eps = 2f64.powi(-23);
    let out_ulp = if data_type == DataType::Float16 {
        2f64.powi(-10)
    } else {
        eps
    };
    for constant in [false, true] {
        let gpu = run_op(ctx, &reduce, &[input.clone()], &[constant])
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(
            gpu[0].descriptor, reference[0].descriptor,
            "{what}: descriptor"
        );
        for (i, (&g, &r)) in gpu[0].data.iter().zip(&reference[0].data).enumerate() {
            if !data_type.is_float() || matches!(op, ReduceOp::Max | ReduceOp::Min) {
                assert_eq!(g, r, "{what}: element {i}");
                continue;
            }
            let log = matches!(op, ReduceOp::LogSum | ReduceOp::LogSumExp) as u8 as f64;
            let tol = (n + 8.0) * eps * (bound[i] + 2.0 * r.abs() + log)
                + out_ulp * r.abs()
                + 2f64.powi(-24);
            assert!((g - r).abs() <= tol, "{what} (constant {constant}): element {i}: gpu {g} vs reference {r} (tolerance {tol})");
        }
    }
}

#[test]
fn reductions_against_reference() {
    let ctx = context();
    let mut rng = Rng::new(21);
    for op in ReduceOp::ALL {
        for &data_type in op.data_types() {
            for (shape, axes, keep_dimensions) in CASES {
                let options = ReduceOptions {
                    axes: axes.map(|a| a.to_vec()),
                    keep_dimensions: *keep_dimensions,
                };
                let length: u64 = match axes {
                    None => shape.iter().map(|&d| d as u64).product(),
                    Some(a) => a.iter().map(|&x| shape[x as usize] as u64).product(),
                };
                // Integer products of long rows overflow float64's exact integers.
                if op == ReduceOp::Product && !data_type.is_float() && length > 24 {
                    continue;
                }
                let (lo, hi) = range(op, data_type);
                let input = rng.tensor(data_type, shape, lo, hi);
                check_reduce(&ctx, op, &options, &input);
            }
        }
    }
}

#[test]
fn integer_sums_wrap() {
    let ctx = context();
    let d = OperandDescriptor::new(DataType::Int32, vec![3]);
    let input = HostTensor::new(d, vec![2147483647.0, 1.0, 5.0]).unwrap();
    let op = Op::Reduce(ReduceOp::Sum, ReduceOptions::default());
    let gpu = run_op(&ctx, &op, &[input.clone()], &[false]).unwrap();
    assert_eq!(gpu[0].data, vec![-2147483643.0]);
    assert_eq!(
        reference_op(&op, &[input]).unwrap()[0].data,
        vec![-2147483643.0]
    );
}

#[test]
fn log_sum_exp_is_stable_and_handles_infinities() {
    let ctx = context();
    let d = OperandDescriptor::new(DataType::Float32, vec![3, 2]);
    let inf = f64::INFINITY;
    let input = HostTensor::new(d, vec![1000.0, 1000.0, -inf, -inf, inf, 1.0]).unwrap();
    let op = Op::Reduce(
        ReduceOp::LogSumExp,
        ReduceOptions {
            axes: Some(vec![1]),
            keep_dimensions: false,
        },
    );
    let gpu = run_op(&ctx, &op, &[input], &[false]).unwrap();
    assert!(
        (gpu[0].data[0] - (1000.0 + 2f64.ln())).abs() < 1e-3,
        "{:?}",
        gpu[0].data
    );
    assert_eq!(gpu[0].data[1], -inf);
    assert_eq!(gpu[0].data[2], inf);
}

fn is_type_error(op: ReduceOp, axes: Option<&[u32]>, d: &OperandDescriptor) -> bool {
    let o = ReduceOptions {
        axes: axes.map(|a| a.to_vec()),
        keep_dimensions: false,
    };
    matches!(ops::validate(&Op::Reduce(op, o), &[d]), Err(Error::Type(_)))
}

#[test]
fn reduce_validation() {
    let f = |s: &[u32]| OperandDescriptor::new(DataType::Float32, s.to_vec());
    let shape = |op, axes: Option<&[u32]>, keep, d: &OperandDescriptor| {
        let o = ReduceOptions {
            axes: axes.map(|a| a.to_vec()),
            keep_dimensions: keep,
        };
        ops::validate(&Op::Reduce(op, o), &[d]).unwrap()[0]
            .shape
            .clone()
    };
    assert_eq!(
        shape(ReduceOp::Sum, None, false, &f(&[2, 3])),
        Vec::<u32>::new()
    );
    assert_eq!(shape(ReduceOp::Sum, None, true, &f(&[2, 3])), vec![1, 1]);
    assert_eq!(
        shape(ReduceOp::Sum, Some(&[]), false, &f(&[2, 3])),
        vec![2, 3]
    );
    assert_eq!(
        shape(ReduceOp::Max, Some(&[0]), false, &f(&[2, 3])),
        vec![3]
    );
    assert_eq!(
        shape(ReduceOp::Min, Some(&[1]), true, &f(&[2, 3])),
        vec![2, 1]
    );
    assert_eq!(
        shape(ReduceOp::Mean, None, false, &f(&[])),
        Vec::<u32>::new()
    );
    assert!(
        is_type_error(ReduceOp::Sum, Some(&[2]), &f(&[2, 3])),
        "axis out of range"
    );
    assert!(
        is_type_error(ReduceOp::Sum, Some(&[0]), &f(&[])),
        "axis of a scalar"
    );
    assert!(
        is_type_error(ReduceOp::Sum, Some(&[1, 1]), &f(&[2, 3])),
        "duplicate axes"
    );
    let i32_ = OperandDescriptor::new(DataType::Int32, vec![2]);
    let i8_ = OperandDescriptor::new(DataType::Int8, vec![2]);
    for op in [
        ReduceOp::L2,
        ReduceOp::LogSum,
        ReduceOp::LogSumExp,
        ReduceOp::Mean,
    ] {
        assert!(is_type_error(op, None, &i32_), "{} int32", op.name());
    }
    for op in [
        ReduceOp::L1,
        ReduceOp::Sum,
        ReduceOp::SumSquare,
        ReduceOp::Product,
    ] {
        assert!(is_type_error(op, None, &i8_), "{} int8", op.name());
        assert!(!is_type_error(op, None, &i32_), "{} int32", op.name());
    }
    assert!(!is_type_error(ReduceOp::Max, None, &i8_));
}

/// More than 65535 workgroups of short rows: the runtime folds the grid into y.
#[test]
fn reduce_beyond_one_grid_dimension() {
    let ctx = context();
    let mut rng = Rng::new(22);
    let input = rng.tensor(DataType::Float32, &[4_200_000, 2], -2.0, 2.0);
    let options = ReduceOptions {
        axes: Some(vec![1]),
        keep_dimensions: false,
    };
    check_reduce(&ctx, ReduceOp::Sum, &options, &input);
}

/// reduceLogSum of a sum that is 0 (zeros, or values that cancel exactly) is IEEE's log(0) =
/// -infinity, of a negative sum NaN; reduceLogSumExp of only -infinity is -infinity.
#[test]
fn log_sum_of_zero_is_negative_infinity() {
    let ctx = context();
    let inf = f64::INFINITY;
    let rows = |op: ReduceOp, data_type: DataType, data: Vec<f64>| {
        let input = HostTensor::new(OperandDescriptor::new(data_type, vec![4, 3]), data).unwrap();
        let op = Op::Reduce(op, ReduceOptions { axes: Some(vec![1]), keep_dimensions: false });
        run_op(&ctx, &op, &[input], &[false]).unwrap().remove(0).data
    };
    for data_type in [DataType::Float32, DataType::Float16] {
        let y = rows(
            ReduceOp::LogSum,
            data_type,
            vec![0.0, 0.0, 0.0, 2.5, -1.5, -1.0, -0.0, 0.0, -0.0, -3.0, 1.0, 1.0],
        );
        assert_eq!(y[..3], [-inf; 3], "{data_type}: {y:?}");
        assert!(y[3].is_nan(), "{data_type}: {y:?}");
        let y = rows(ReduceOp::LogSumExp, data_type, vec![-inf, -inf, -inf, -inf, 0.0, -inf, 0.0, 0.0, 0.0, 1.0, 2.0, 3.0]);
        assert_eq!(y[..2], [-inf, 0.0], "{data_type}: {y:?}");
        assert!((y[2] - 3f64.ln()).abs() < 2e-3 && (y[3] - 3.4076059644443806).abs() < 4e-3, "{data_type}: {y:?}");
    }
}
