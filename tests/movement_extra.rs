//! Differential tests of tile, reverse, pad and triangular for every supported data type. Pure
//! copies (tile, reverse, edge and reflection pad) are checked bit-exact through the harness of
//! `common::moved`; constant pad and triangular, which also write values, are checked by value
//! against the float64 reference. Spec examples are checked by value on their own.
#![cfg(not(target_arch = "wasm32"))] // native: `wasm-pack test` builds every test target for wasm32

mod common;
use common::moved::*;
use common::*;
use webnn_wgpu::graph::DataType;
use webnn_wgpu::ops::pad::{PadOptions, PaddingMode};
use webnn_wgpu::ops::triangular::TriangularOptions;
use webnn_wgpu::ops::{HostTensor, Op};

/// Random values of a type, within the range of its smallest sibling (int8/uint8).
fn values(rng: &mut Rng, t: DataType, shape: &[u32]) -> HostTensor {
    if t.is_signed() {
        rng.tensor(t, shape, -100.0, 100.0)
    } else {
        rng.tensor(t, shape, 0.0, 200.0)
    }
}

#[test]
fn tile_all_types() {
    let ctx = context();
    let mut rng = Rng::new(41);
    for t in TYPES {
        check_moved(
            &ctx,
            &mut rng,
            Op::Tile {
                repetitions: vec![],
            },
            &[desc(t, &[])],
            &[],
        );
        for rank in 1..=5 {
            let shape = rng.shape(rank, 4);
            let repetitions = rng.shape(rank, 3);
            check_moved(
                &ctx,
                &mut rng,
                Op::Tile { repetitions },
                &[desc(t, &shape)],
                &[],
            );
        }
        check_moved(
            &ctx,
            &mut rng,
            Op::Tile {
                repetitions: vec![1, 1],
            },
            &[desc(t, &[3, 5])],
            &[],
        );
        check_moved(
            &ctx,
            &mut rng,
            Op::Tile {
                repetitions: vec![13, 1, 3],
            },
            &[desc(t, &[1, 7, 3])],
            &[],
        );
    }
}

#[test]
fn reverse_all_types() {
    let ctx = context();
    let mut rng = Rng::new(42);
    for t in TYPES {
        check_moved(
            &ctx,
            &mut rng,
            Op::Reverse { axes: None },
            &[desc(t, &[])],
            &[],
        );
        check_moved(
            &ctx,
            &mut rng,
            Op::Reverse { axes: Some(vec![]) },
            &[desc(t, &[])],
            &[],
        );
        for rank in 1..=5 {
            let shape = rng.shape(rank, 5);
            check_moved(
                &ctx,
                &mut rng,
                Op::Reverse { axes: None },
                &[desc(t, &shape)],
                &[],
            );
            let axes: Vec<u32> = (0..rank as u32)
                .rev()
                .filter(|_| rng.below(2) == 0)
                .collect();
            check_moved(
                &ctx,
                &mut rng,
                Op::Reverse { axes: Some(axes) },
                &[desc(t, &shape)],
                &[],
            );
        }
        check_moved(
            &ctx,
            &mut rng,
            Op::Reverse { axes: Some(vec![]) },
            &[desc(t, &[3, 5])],
            &[],
        );
        check_moved(
            &ctx,
            &mut rng,
            Op::Reverse {
                axes: Some(vec![1]),
            },
            &[desc(t, &[1, 67])],
            &[],
        );
    }
}

fn pad(mode: PaddingMode, begin: Vec<u32>, end: Vec<u32>, value: f64) -> Op {
    Op::Pad(PadOptions {
        beginning_padding: begin,
        ending_padding: end,
        mode,
        value: value.into(),
    })
}

#[test]
fn pad_edge_and_reflection_all_types() {
    let ctx = context();
    let mut rng = Rng::new(43);
    for t in TYPES {
        for mode in [PaddingMode::Edge, PaddingMode::Reflection] {
            check_moved(
                &ctx,
                &mut rng,
                pad(mode, vec![], vec![], 0.0),
                &[desc(t, &[])],
                &[],
            );
            for rank in 1..=5 {
                let shape = rng.shape(rank, 5);
                // Reflection needs paddings below the dimension; edge takes any.
                let limit = |rng: &mut Rng, d: u32| {
                    if mode == PaddingMode::Edge {
                        rng.below(5)
                    } else {
                        rng.below(d)
                    }
                };
                let begin: Vec<u32> = shape.iter().map(|&d| limit(&mut rng, d)).collect();
                let end: Vec<u32> = shape.iter().map(|&d| limit(&mut rng, d)).collect();
                check_moved(
                    &ctx,
                    &mut rng,
                    pad(mode, begin, end, 0.0),
                    &[desc(t, &shape)],
                    &[],
                );
            }
            check_moved(
                &ctx,
                &mut rng,
                pad(mode, vec![0, 4], vec![0, 4], 0.0),
                &[desc(t, &[1, 5])],
                &[],
            );
        }
        check_moved(
            &ctx,
            &mut rng,
            pad(PaddingMode::Edge, vec![3, 9], vec![2, 0], 0.0),
            &[desc(t, &[1, 1])],
            &[],
        );
    }
}

#[test]
fn pad_constant_all_types() {
    let ctx = context();
    let mut rng = Rng::new(44);
    for t in TYPES {
        // Values are cast to the type: truncated and saturated for integers, NaN kept for floats.
        for value in [0.0, -7.75, 300.5, f64::NAN, f64::INFINITY] {
            let x = values(&mut rng, t, &[]);
            check_op(
                &ctx,
                &pad(PaddingMode::Constant, vec![], vec![], value),
                &[x],
                0,
                0.0,
            );
            for rank in 1..=4 {
                let shape = rng.shape(rank, 4);
                let begin: Vec<u32> = shape.iter().map(|_| rng.below(3)).collect();
                let end: Vec<u32> = shape.iter().map(|_| rng.below(3)).collect();
                let x = values(&mut rng, t, &shape);
                check_op(
                    &ctx,
                    &pad(PaddingMode::Constant, begin, end, value),
                    &[x],
                    0,
                    0.0,
                );
            }
        }
    }
}

#[test]
fn triangular_all_types() {
    let ctx = context();
    let mut rng = Rng::new(45);
    for t in TYPES {
        for rank in 2..=5 {
            let shape = rng.shape(rank, 6);
            for upper in [true, false] {
                for diagonal in [0, 1, -1, 3, -4, 100, -100, i32::MAX, i32::MIN] {
                    let x = values(&mut rng, t, &shape);
                    check_op(
                        &ctx,
                        &Op::Triangular(TriangularOptions { upper, diagonal }),
                        &[x],
                        0,
                        0.0,
                    );
                }
            }
        }
        let x = values(&mut rng, t, &[1, 67]);
        check_op(
            &ctx,
            &Op::Triangular(TriangularOptions {
                upper: false,
                diagonal: 2,
            }),
            &[x],
            0,
            0.0,
        );
    }
}

/// The spec's pad and triangular examples, by value.
#[test]
fn spec_examples() {
    let ctx = context();
    let run = |op: Op, x: &HostTensor| run_op(&ctx, &op, &[x.clone()], &[]).unwrap().remove(0).data;
    let x = HostTensor::new(
        desc(DataType::Float32, &[2, 3]),
        vec![1., 2., 3., 4., 5., 6.],
    )
    .unwrap();
    let p = |mode| pad(mode, vec![1, 2], vec![1, 2], 0.0);
    assert_eq!(
        run(p(PaddingMode::Constant), &x),
        [
            [0., 0., 0., 0., 0., 0., 0.],
            [0., 0., 1., 2., 3., 0., 0.],
            [0., 0., 4., 5., 6., 0., 0.],
            [0.; 7]
        ]
        .concat()
    );
    assert_eq!(
        run(p(PaddingMode::Edge), &x),
        [
            [1., 1., 1., 2., 3., 3., 3.],
            [1., 1., 1., 2., 3., 3., 3.],
            [4., 4., 4., 5., 6., 6., 6.],
            [4., 4., 4., 5., 6., 6., 6.]
        ]
        .concat()
    );
    assert_eq!(
        run(p(PaddingMode::Reflection), &x),
        [
            [6., 5., 4., 5., 6., 5., 4.],
            [3., 2., 1., 2., 3., 2., 1.],
            [6., 5., 4., 5., 6., 5., 4.],
            [3., 2., 1., 2., 3., 2., 1.]
        ]
        .concat()
    );
    let m = HostTensor::new(
        desc(DataType::Float32, &[3, 3]),
        vec![7., 1., 2., 9., 4., 8., 2., 6., 3.],
    )
    .unwrap();
    let tri = |upper, diagonal| Op::Triangular(TriangularOptions { upper, diagonal });
    assert_eq!(
        run(tri(true, 0), &m),
        vec![7., 1., 2., 0., 4., 8., 0., 0., 3.]
    );
    assert_eq!(
        run(tri(true, 1), &m),
        vec![0., 1., 2., 0., 0., 8., 0., 0., 0.]
    );
    assert_eq!(
        run(tri(true, -1), &m),
        vec![7., 1., 2., 9., 4., 8., 0., 6., 3.]
    );
    assert_eq!(
        run(tri(false, 0), &m),
        vec![7., 0., 0., 9., 4., 0., 2., 6., 3.]
    );
    assert_eq!(
        run(tri(false, 1), &m),
        vec![7., 1., 0., 9., 4., 8., 2., 6., 3.]
    );
    assert_eq!(
        run(tri(false, -1), &m),
        vec![0., 0., 0., 9., 0., 0., 2., 6., 0.]
    );
    let v = HostTensor::new(desc(DataType::Int32, &[2, 3]), vec![1., 2., 3., 4., 5., 6.]).unwrap();
    assert_eq!(
        run(
            Op::Tile {
                repetitions: vec![2, 1]
            },
            &v
        ),
        vec![1., 2., 3., 4., 5., 6., 1., 2., 3., 4., 5., 6.]
    );
    assert_eq!(
        run(
            Op::Reverse {
                axes: Some(vec![1])
            },
            &v
        ),
        vec![3., 2., 1., 6., 5., 4.]
    );
    assert_eq!(
        run(Op::Reverse { axes: None }, &v),
        vec![6., 5., 4., 3., 2., 1.]
    );
}

#[test]
fn validation() {
    let f = |s: &[u32]| desc(DataType::Float32, s);
    assert_eq!(
        validate(
            &Op::Tile {
                repetitions: vec![2, 3]
            },
            &[f(&[4, 5])]
        )
        .unwrap()[0]
            .shape,
        vec![8, 15]
    );
    assert!(is_type_error(validate(
        &Op::Tile {
            repetitions: vec![2]
        },
        &[f(&[4, 5])]
    )));
    assert!(is_type_error(validate(
        &Op::Tile {
            repetitions: vec![2, 0]
        },
        &[f(&[4, 5])]
    )));
    assert!(is_type_error(validate(
        &Op::Tile {
            repetitions: vec![1 << 30, 1]
        },
        &[f(&[4, 5])]
    )));
    assert!(is_type_error(validate(
        &Op::Tile {
            repetitions: vec![u32::MAX]
        },
        &[f(&[4])]
    )));

    assert!(validate(
        &Op::Reverse {
            axes: Some(vec![1, 0])
        },
        &[f(&[4, 5])]
    )
    .is_ok());
    assert!(is_type_error(validate(
        &Op::Reverse {
            axes: Some(vec![2])
        },
        &[f(&[4, 5])]
    )));
    assert!(is_type_error(validate(
        &Op::Reverse {
            axes: Some(vec![1, 1])
        },
        &[f(&[4, 5])]
    )));
    assert!(validate(&Op::Reverse { axes: None }, &[desc(DataType::Int64, &[4])]).is_ok());

    let p = |mode, b: Vec<u32>, e: Vec<u32>| pad(mode, b, e, 0.0);
    assert_eq!(
        validate(
            &p(PaddingMode::Constant, vec![1, 2], vec![3, 4]),
            &[f(&[4, 5])]
        )
        .unwrap()[0]
            .shape,
        vec![8, 11]
    );
    assert!(is_type_error(validate(
        &p(PaddingMode::Constant, vec![1], vec![3, 4]),
        &[f(&[4, 5])]
    )));
    assert!(is_type_error(validate(
        &p(PaddingMode::Constant, vec![1, 2], vec![3]),
        &[f(&[4, 5])]
    )));
    assert!(is_type_error(validate(
        &p(PaddingMode::Edge, vec![i32::MAX as u32, 0], vec![0, 0]),
        &[f(&[4, 5])]
    )));
    // Reflection paddings must be below the dimension; edge ones need not be.
    assert!(validate(
        &p(PaddingMode::Reflection, vec![3, 4], vec![3, 4]),
        &[f(&[4, 5])]
    )
    .is_ok());
    assert!(is_type_error(validate(
        &p(PaddingMode::Reflection, vec![4, 0], vec![0, 0]),
        &[f(&[4, 5])]
    )));
    assert!(is_type_error(validate(
        &p(PaddingMode::Reflection, vec![0, 0], vec![0, 5]),
        &[f(&[4, 5])]
    )));
    assert!(validate(&p(PaddingMode::Edge, vec![9, 9], vec![9, 9]), &[f(&[1, 1])]).is_ok());
    assert!(PaddingMode::from_name("symmetric").is_err());

    let tri = Op::Triangular(TriangularOptions::default());
    assert!(validate(&tri, &[f(&[2, 3])]).is_ok());
    assert!(is_type_error(validate(&tri, &[f(&[3])])));
    assert!(is_type_error(validate(&tri, &[f(&[])])));
}
