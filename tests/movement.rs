//! Differential tests of the data-movement families (reshape, expand, transpose, slice, concat,
//! split, gather) for every supported data type, bit-exact through the harness of
//! `common::moved`.
#![cfg(not(target_arch = "wasm32"))] // native: `wasm-pack test` builds every test target for wasm32

mod common;
use common::*;
use common::moved::*;
use webnn_wgpu::graph::{DataType, OperandDescriptor};
use webnn_wgpu::ops::concat::Splits;
use webnn_wgpu::ops::slice::SliceOptions;
use webnn_wgpu::ops::{self, HostTensor, Op};

#[test]
fn reshape_all_types() {
    let ctx = context();
    let mut rng = Rng::new(11);
    let cases: &[(&[u32], &[u32])] = &[
        (&[], &[1, 1, 1]),
        (&[1, 1], &[]),
        (&[2, 3, 4], &[4, 6]),
        (&[7], &[7, 1]),
        (&[3, 1, 5], &[5, 3]),
        (&[2, 2, 2, 2, 2], &[32]),
    ];
    for t in TYPES {
        for (from, to) in cases {
            let op = Op::Reshape {
                new_shape: to.to_vec(),
            };
            check_moved(&ctx, &mut rng, op.clone(), &[desc(t, from)], &[]);
            // A reshape inside a graph: transpose -> reshape -> slice.
            let mut g = TestGraph::default();
            let x = g.input(
                desc(t, from),
                random_bytes(&mut rng, &desc(t, from)),
                false,
                true,
            );
            let y = g.node(Op::Transpose { permutation: None }, vec![x]);
            let mut to_t = to.to_vec();
            to_t.reverse();
            let z = g.node(
                Op::Reshape {
                    new_shape: to_t.clone(),
                },
                vec![y],
            );
            let starts = vec![0; to_t.len()];
            let w = g.node(
                Op::Slice(SliceOptions {
                    starts,
                    sizes: to_t,
                    strides: None,
                }),
                vec![z],
            );
            g.outputs = vec![w, z];
            g.check(&ctx, &format!("transpose -> reshape {to:?} -> slice, {t}"));
        }
    }
}

#[test]
fn reshape_validation() {
    let x = desc(DataType::Float32, &[2, 3]);
    assert!(validate(
        &Op::Reshape {
            new_shape: vec![3, 2]
        },
        &[x.clone()]
    )
    .is_ok());
    assert!(is_type_error(validate(
        &Op::Reshape { new_shape: vec![5] },
        &[x.clone()]
    )));
    assert!(is_type_error(validate(
        &Op::Reshape {
            new_shape: vec![6, 0]
        },
        &[x.clone()]
    )));
    assert!(is_type_error(validate(
        &Op::Reshape {
            new_shape: vec![1; 9].into_iter().chain([6]).collect()
        },
        &[x.clone()]
    )));
    // A product that overflows 64 bits is not equal to 6.
    assert!(is_type_error(validate(
        &Op::Reshape {
            new_shape: vec![i32::MAX as u32; 8]
        },
        &[x]
    )));
    assert!(validate(&Op::Reshape { new_shape: vec![2] }, &[desc(DataType::Int64, &[2])]).is_ok());
}

#[test]
fn expand_all_types() {
    let ctx = context();
    let mut rng = Rng::new(12);
    let cases: &[(&[u32], &[u32])] = &[
        (&[], &[]),
        (&[], &[5]),
        (&[1], &[3, 7]),
        (&[3, 1], &[2, 3, 5]),
        (&[2, 1, 3], &[2, 4, 3]),
        (&[1, 2, 1, 3, 1], &[2, 1, 2, 2, 3, 3]),
        (&[4, 5], &[4, 5]),
        (&[5], &[1, 1, 5]),
    ];
    for t in TYPES {
        for (from, to) in cases {
            check_moved(
                &ctx,
                &mut rng,
                Op::Expand {
                    new_shape: to.to_vec(),
                },
                &[desc(t, from)],
                &[],
            );
        }
    }
}

#[test]
fn expand_validation() {
    let x = desc(DataType::Float32, &[3, 1]);
    assert_eq!(
        validate(
            &Op::Expand {
                new_shape: vec![2, 3, 4]
            },
            &[x.clone()]
        )
        .unwrap()[0]
            .shape,
        vec![2, 3, 4]
    );
    // Unidirectional: the input's 3 cannot become 1, and the rank cannot shrink.
    assert!(is_type_error(validate(
        &Op::Expand {
            new_shape: vec![1, 4]
        },
        &[x.clone()]
    )));
    assert!(is_type_error(validate(
        &Op::Expand { new_shape: vec![4] },
        &[x.clone()]
    )));
    assert!(is_type_error(validate(
        &Op::Expand {
            new_shape: vec![2, 4]
        },
        &[x.clone()]
    )));
    assert!(is_type_error(validate(
        &Op::Expand {
            new_shape: vec![3, 0]
        },
        &[x.clone()]
    )));
    assert!(is_type_error(validate(
        &Op::Expand {
            new_shape: vec![1, 1, 1, 1, 1, 1, 1, 3, 4]
        },
        &[x]
    )));
}

#[test]
fn transpose_all_types() {
    let ctx = context();
    let mut rng = Rng::new(13);
    for t in TYPES {
        for rank in 0..=6 {
            let shape = rng.shape(rank, 4);
            let mut perm: Vec<u32> = (0..rank as u32).collect();
            for i in (1..rank).rev() {
                perm.swap(i, rng.below(i as u32 + 1) as usize);
            }
            check_moved(
                &ctx,
                &mut rng,
                Op::Transpose {
                    permutation: Some(perm),
                },
                &[desc(t, &shape)],
                &[],
            );
            check_moved(
                &ctx,
                &mut rng,
                Op::Transpose { permutation: None },
                &[desc(t, &shape)],
                &[],
            );
        }
        // Size-1 dimensions and odd sizes that cross packed words.
        check_moved(
            &ctx,
            &mut rng,
            Op::Transpose {
                permutation: Some(vec![2, 0, 1]),
            },
            &[desc(t, &[1, 3, 7])],
            &[],
        );
        check_moved(
            &ctx,
            &mut rng,
            Op::Transpose { permutation: None },
            &[desc(t, &[67, 5])],
            &[],
        );
    }
}

#[test]
fn transpose_validation() {
    let x = desc(DataType::Float32, &[2, 3, 4]);
    assert_eq!(
        validate(&Op::Transpose { permutation: None }, &[x.clone()]).unwrap()[0].shape,
        vec![4, 3, 2]
    );
    assert_eq!(
        validate(
            &Op::Transpose {
                permutation: Some(vec![1, 2, 0])
            },
            &[x.clone()]
        )
        .unwrap()[0]
            .shape,
        vec![3, 4, 2]
    );
    assert!(is_type_error(validate(
        &Op::Transpose {
            permutation: Some(vec![0, 1])
        },
        &[x.clone()]
    )));
    assert!(is_type_error(validate(
        &Op::Transpose {
            permutation: Some(vec![0, 1, 3])
        },
        &[x.clone()]
    )));
    assert!(is_type_error(validate(
        &Op::Transpose {
            permutation: Some(vec![0, 1, 1])
        },
        &[x]
    )));
}

#[test]
fn slice_all_types() {
    let ctx = context();
    let mut rng = Rng::new(14);
    for t in TYPES {
        check_moved(
            &ctx,
            &mut rng,
            Op::Slice(SliceOptions {
                starts: vec![],
                sizes: vec![],
                strides: None,
            }),
            &[desc(t, &[])],
            &[],
        );
        for rank in 1..=5 {
            for with_strides in [false, true] {
                let shape = rng.shape(rank, 7);
                let mut starts = Vec::new();
                let mut sizes = Vec::new();
                let mut strides = Vec::new();
                for &d in &shape {
                    let start = rng.below(d);
                    starts.push(start);
                    sizes.push(1 + rng.below(d - start));
                    strides.push(1 + rng.below(3));
                }
                let strides = with_strides.then_some(strides);
                check_moved(
                    &ctx,
                    &mut rng,
                    Op::Slice(SliceOptions {
                        starts,
                        sizes,
                        strides,
                    }),
                    &[desc(t, &shape)],
                    &[],
                );
            }
        }
        // A stride larger than the size: one element per axis.
        let o = SliceOptions {
            starts: vec![3, 1],
            sizes: vec![2, 5],
            strides: Some(vec![9, 4]),
        };
        check_moved(&ctx, &mut rng, Op::Slice(o), &[desc(t, &[5, 9])], &[]);
    }
}

#[test]
fn slice_validation() {
    let x = desc(DataType::Float32, &[4, 6]);
    let slice = |starts: Vec<u32>, sizes: Vec<u32>, strides: Option<Vec<u32>>| {
        Op::Slice(SliceOptions {
            starts,
            sizes,
            strides,
        })
    };
    assert_eq!(
        validate(
            &slice(vec![1, 0], vec![3, 6], Some(vec![2, 4])),
            &[x.clone()]
        )
        .unwrap()[0]
            .shape,
        vec![2, 2]
    );
    assert!(is_type_error(validate(
        &slice(vec![1, 0], vec![0, 6], None),
        &[x.clone()]
    )));
    assert!(is_type_error(validate(
        &slice(vec![1], vec![3], None),
        &[x.clone()]
    )));
    assert!(is_type_error(validate(
        &slice(vec![1, 0], vec![3, 6], Some(vec![1])),
        &[x.clone()]
    )));
    assert!(is_type_error(validate(
        &slice(vec![1, 0], vec![3, 6], Some(vec![1, 0])),
        &[x.clone()]
    )));
    assert!(is_type_error(validate(
        &slice(vec![2, 0], vec![3, 6], None),
        &[x.clone()]
    )));
    assert!(is_type_error(validate(
        &slice(vec![4, 0], vec![1, 6], None),
        &[x.clone()]
    )));
    assert!(is_type_error(validate(
        &slice(vec![u32::MAX, 0], vec![u32::MAX, 6], None),
        &[x]
    )));
}

#[test]
fn concat_all_types() {
    let ctx = context();
    let mut rng = Rng::new(15);
    for t in TYPES {
        for rank in 1..=5 {
            let axis = rng.below(rank as u32);
            let base = rng.shape(rank, 4);
            let count = 1 + rng.below(5) as usize;
            let inputs: Vec<OperandDescriptor> = (0..count)
                .map(|_| {
                    let mut shape = base.clone();
                    shape[axis as usize] = 1 + rng.below(5);
                    desc(t, &shape)
                })
                .collect();
            check_moved(&ctx, &mut rng, Op::Concat { axis }, &inputs, &[]);
        }
    }
}

/// More inputs than a launch can bind: concatenated in a tree through scratch buffers, with odd
/// sizes so packed words straddle the inputs.
#[test]
fn concat_many_inputs() {
    let ctx = context();
    let mut rng = Rng::new(16);
    for t in TYPES {
        for (count, axis) in [(8, 0), (20, 1), (57, 2)] {
            let inputs: Vec<OperandDescriptor> = (0..count)
                .map(|_| {
                    let mut shape = vec![3, 2, 3];
                    shape[axis] = 1 + rng.below(3);
                    desc(t, &shape)
                })
                .collect();
            check_moved(
                &ctx,
                &mut rng,
                Op::Concat { axis: axis as u32 },
                &inputs,
                &[],
            );
        }
    }
}

#[test]
fn concat_validation() {
    let a = desc(DataType::Float32, &[2, 3]);
    assert_eq!(
        validate(
            &Op::Concat { axis: 1 },
            &[a.clone(), desc(DataType::Float32, &[2, 5])]
        )
        .unwrap()[0]
            .shape,
        vec![2, 8]
    );
    assert!(is_type_error(validate(&Op::Concat { axis: 0 }, &[])));
    assert!(is_type_error(validate(
        &Op::Concat { axis: 2 },
        &[a.clone()]
    )));
    assert!(is_type_error(validate(
        &Op::Concat { axis: 0 },
        &[a.clone(), desc(DataType::Int32, &[2, 3])]
    )));
    assert!(is_type_error(validate(
        &Op::Concat { axis: 0 },
        &[a.clone(), desc(DataType::Float32, &[2, 3, 1])]
    )));
    assert!(is_type_error(validate(
        &Op::Concat { axis: 0 },
        &[a.clone(), desc(DataType::Float32, &[2, 4])]
    )));
    assert!(is_type_error(validate(
        &Op::Concat { axis: 0 },
        &[desc(DataType::Float32, &[])]
    )));
    let big = desc(DataType::Float32, &[i32::MAX as u32 - 1]);
    assert!(is_type_error(validate(
        &Op::Concat { axis: 0 },
        &[big.clone(), big]
    )));
    assert!(is_type_error(validate(
        &Op::Concat { axis: 0 },
        &vec![desc(DataType::Float32, &[1]); 8193]
    )));
}

#[test]
fn split_all_types() {
    let ctx = context();
    let mut rng = Rng::new(17);
    for t in TYPES {
        for rank in 1..=5 {
            let axis = rng.below(rank as u32);
            let mut shape = rng.shape(rank, 4);
            shape[axis as usize] = 6;
            check_moved(
                &ctx,
                &mut rng,
                Op::Split {
                    splits: Splits::Count(3),
                    axis,
                },
                &[desc(t, &shape)],
                &[],
            );
            check_moved(
                &ctx,
                &mut rng,
                Op::Split {
                    splits: Splits::Sizes(vec![1, 4, 1]),
                    axis,
                },
                &[desc(t, &shape)],
                &[],
            );
        }
        check_moved(
            &ctx,
            &mut rng,
            Op::Split {
                splits: Splits::Count(1),
                axis: 0,
            },
            &[desc(t, &[5])],
            &[],
        );
        check_moved(
            &ctx,
            &mut rng,
            Op::Split {
                splits: Splits::Sizes(vec![3, 1, 5, 2]),
                axis: 1,
            },
            &[desc(t, &[3, 11])],
            &[],
        );
    }
}

#[test]
fn split_validation() {
    let x = desc(DataType::Float32, &[2, 6]);
    let split = |splits, axis| Op::Split { splits, axis };
    let outputs = validate(&split(Splits::Sizes(vec![1, 5]), 1), &[x.clone()]).unwrap();
    assert_eq!(
        outputs.iter().map(|d| d.shape.clone()).collect::<Vec<_>>(),
        vec![vec![2, 1], vec![2, 5]]
    );
    assert_eq!(
        validate(&split(Splits::Count(3), 1), &[x.clone()])
            .unwrap()
            .len(),
        3
    );
    assert!(is_type_error(validate(
        &split(Splits::Count(4), 1),
        &[x.clone()]
    )));
    assert!(is_type_error(validate(
        &split(Splits::Count(0), 1),
        &[x.clone()]
    )));
    assert!(is_type_error(validate(
        &split(Splits::Count(2), 2),
        &[x.clone()]
    )));
    assert!(is_type_error(validate(
        &split(Splits::Sizes(vec![2, 3]), 1),
        &[x.clone()]
    )));
    assert!(is_type_error(validate(
        &split(Splits::Sizes(vec![0, 6]), 1),
        &[x.clone()]
    )));
    assert!(is_type_error(validate(
        &split(Splits::Sizes(vec![]), 1),
        &[x.clone()]
    )));
    assert!(is_type_error(validate(
        &split(Splits::Sizes(vec![u32::MAX, 7]), 1),
        &[x]
    )));
    assert!(is_type_error(validate(
        &split(Splits::Count(1), 0),
        &[desc(DataType::Float32, &[])]
    )));
}

/// Indices of a type with values in `lo..hi`.
fn indices(rng: &mut Rng, data_type: DataType, shape: &[u32], lo: i64, hi: i64) -> HostTensor {
    let d = desc(data_type, shape);
    let data = (0..d.element_count())
        .map(|_| (lo + rng.below((hi - lo) as u32) as i64) as f64)
        .collect();
    HostTensor::new(d, data).unwrap()
}

#[test]
fn gather_all_types() {
    let ctx = context();
    let mut rng = Rng::new(18);
    for t in TYPES {
        for rank in 1..=4 {
            let shape = rng.shape(rank, 5);
            let axis = rng.below(rank as u32);
            let n = shape[axis as usize] as i64;
            for index_rank in [0, 1, 2, 3] {
                let index_shape = rng.shape(index_rank, 4);
                // Negative and out-of-range indices: clamped to -n..=n-1, negatives from the end.
                let i32_indices = indices(&mut rng, DataType::Int32, &index_shape, -n - 3, n + 3);
                check_moved(
                    &ctx,
                    &mut rng,
                    Op::Gather { axis },
                    &[desc(t, &shape)],
                    &[i32_indices],
                );
                let u32_indices = indices(&mut rng, DataType::Uint32, &index_shape, 0, n + 3);
                check_moved(
                    &ctx,
                    &mut rng,
                    Op::Gather { axis },
                    &[desc(t, &shape)],
                    &[u32_indices],
                );
            }
        }
    }
}

#[test]
fn gather_extreme_indices() {
    let ctx = context();
    let mut rng = Rng::new(19);
    for t in [DataType::Float16, DataType::Int8] {
        let data = [i32::MIN as f64, i32::MAX as f64, -3.0, -4.0, 3.0, 0.0];
        let i32_indices = HostTensor::new(desc(DataType::Int32, &[6]), data.to_vec()).unwrap();
        check_moved(
            &ctx,
            &mut rng,
            Op::Gather { axis: 1 },
            &[desc(t, &[2, 3, 3])],
            &[i32_indices],
        );
        let u32_indices = HostTensor::new(
            desc(DataType::Uint32, &[3]),
            vec![u32::MAX as f64, 2.0, 1.0],
        )
        .unwrap();
        check_moved(
            &ctx,
            &mut rng,
            Op::Gather { axis: 0 },
            &[desc(t, &[3, 5])],
            &[u32_indices],
        );
    }
}

#[test]
fn gather_validation() {
    let x = desc(DataType::Float32, &[4, 3]);
    let idx = desc(DataType::Int32, &[2, 2]);
    assert_eq!(
        validate(&Op::Gather { axis: 1 }, &[x.clone(), idx.clone()]).unwrap()[0].shape,
        vec![4, 2, 2]
    );
    assert_eq!(
        validate(
            &Op::Gather { axis: 0 },
            &[desc(DataType::Int8, &[4]), desc(DataType::Uint32, &[])]
        )
        .unwrap()[0]
            .shape,
        Vec::<u32>::new()
    );
    assert!(is_type_error(validate(
        &Op::Gather { axis: 2 },
        &[x.clone(), idx.clone()]
    )));
    assert!(is_type_error(validate(
        &Op::Gather { axis: 0 },
        &[x.clone(), desc(DataType::Float32, &[2])]
    )));
    assert!(is_type_error(validate(
        &Op::Gather { axis: 0 },
        &[x.clone(), desc(DataType::Int8, &[2])]
    )));
    assert!(is_type_error(validate(
        &Op::Gather { axis: 0 },
        &[desc(DataType::Float32, &[]), idx]
    )));
    assert!(is_type_error(validate(
        &Op::Gather { axis: 0 },
        &[
            desc(DataType::Float32, &[2; 8]),
            desc(DataType::Int32, &[2; 2])
        ]
    )));
}

/// transpose -> slice -> concat (with another input) -> split, every type, the moved values
/// checked bit-exactly at each output of the chain.
#[test]
fn chain_transpose_slice_concat() {
    let ctx = context();
    let mut rng = Rng::new(20);
    for t in TYPES {
        for constant in [false, true] {
            let mut g = TestGraph::default();
            let a = desc(t, &[3, 5, 4]);
            let b = desc(t, &[4, 3, 2]);
            let x = g.input(a.clone(), random_bytes(&mut rng, &a), constant, true);
            let y = g.input(b.clone(), random_bytes(&mut rng, &b), false, true);
            // [3, 5, 4] -> [4, 3, 5] -> [4, 3, 3] (columns 0, 2, 4) -> concat with [4, 3, 2] -> [4, 3, 5]
            let tr = g.node(
                Op::Transpose {
                    permutation: Some(vec![2, 0, 1]),
                },
                vec![x],
            );
            let o = SliceOptions {
                starts: vec![0, 0, 0],
                sizes: vec![4, 3, 5],
                strides: Some(vec![1, 1, 2]),
            };
            let sl = g.node(Op::Slice(o), vec![tr]);
            let cat = g.node(Op::Concat { axis: 2 }, vec![sl, y]);
            g.nodes.push((
                Op::Split {
                    splits: Splits::Sizes(vec![1, 3]),
                    axis: 0,
                },
                vec![cat],
            ));
            let ex = g.node(
                Op::Expand {
                    new_shape: vec![2, 4, 3, 5],
                },
                vec![cat],
            );
            g.outputs = vec![cat, Val::Node(3, 0), Val::Node(3, 1), ex, tr];
            g.check(
                &ctx,
                &format!("transpose -> slice -> concat -> split/expand, {t} (constant {constant})"),
            );
        }
    }
}

/// What `opSupportLimits()` advertises for these operators is every data type (int64/uint64
/// included: `tests/int64.rs`).
#[test]
fn limits_list_every_supported_type() {
    for name in [
        "reshape",
        "expand",
        "transpose",
        "slice",
        "concat",
        "split",
        "gather",
    ] {
        let l = ops::limits::of(name).unwrap();
        let data = &l.operands[0];
        assert_eq!(data.data_types, DataType::ALL.to_vec(), "{name}");
        assert_eq!(
            l.operands.last().unwrap().data_types,
            DataType::ALL.to_vec(),
            "{name}"
        );
    }
    let gather = ops::limits::of("gather").unwrap();
    assert_eq!(gather.operands[1].name, "indices");
    assert_eq!(
        gather.operands[1].data_types,
        vec![DataType::Int32, DataType::Uint32, DataType::Int64]
    );
}

/// The value-level path of `common` (constants and inputs, float64 reference) on one case per
/// operator, so the families also pass the shared harness other tests use.
#[test]
fn value_checks_through_common_harness() {
    let ctx = context();
    let mut rng = Rng::new(21);
    let x = rng.tensor(DataType::Float16, &[2, 3, 4], -100.0, 100.0);
    check_op(
        &ctx,
        &Op::Transpose {
            permutation: Some(vec![1, 2, 0]),
        },
        &[x.clone()],
        0,
        0.0,
    );
    check_op(
        &ctx,
        &Op::Reshape {
            new_shape: vec![6, 4],
        },
        &[x.clone()],
        0,
        0.0,
    );
    check_op(
        &ctx,
        &Op::Slice(SliceOptions {
            starts: vec![1, 0, 1],
            sizes: vec![1, 3, 3],
            strides: Some(vec![1, 2, 2]),
        }),
        &[x.clone()],
        0,
        0.0,
    );
    let i = HostTensor::new(desc(DataType::Int32, &[3]), vec![-1.0, 0.0, 9.0]).unwrap();
    check_op(&ctx, &Op::Gather { axis: 2 }, &[x.clone(), i], 0, 0.0);
    let y = rng.tensor(DataType::Int8, &[2, 1, 3], -100.0, 100.0);
    check_op(
        &ctx,
        &Op::Expand {
            new_shape: vec![2, 5, 3],
        },
        &[y.clone()],
        0,
        0.0,
    );
    check_op(
        &ctx,
        &Op::Concat { axis: 1 },
        &[y.clone(), y.clone(), y.clone()],
        0,
        0.0,
    );
    check_op(
        &ctx,
        &Op::Split {
            splits: Splits::Count(3),
            axis: 2,
        },
        &[y],
        0,
        0.0,
    );
}
