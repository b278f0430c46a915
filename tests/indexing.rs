//! Differential tests of gatherElements, gatherND, scatterElements and scatterND for every
//! supported data type, bit-exact through the harness of `common::moved` (moved data is random
//! bit patterns; the reference runs on position tensors). Indices are random with negative and
//! out-of-range values (clamped to `-N ..= N-1`), both index types, rank-1 and size-1 shapes;
//! scatter indices repeat, so the "last update wins" rule is checked too. Spec examples are
//! checked by value, independently of the reference.
#![cfg(not(target_arch = "wasm32"))] // native: `wasm-pack test` builds every test target for wasm32

mod common;
use common::moved::*;
use common::*;
use webnn_wgpu::graph::{DataType, OperandDescriptor};
use webnn_wgpu::ops::{HostTensor, Op};
use webnn_wgpu::backend::webgpu::Context;

/// Random index values for a dimension of size `n`: mostly in range, some negative, some out of
/// range both ways, and the extremes of the type.
fn random_indices(rng: &mut Rng, data_type: DataType, shape: &[u32], n: u32) -> HostTensor {
    let d = OperandDescriptor::new(data_type, shape.to_vec());
    let signed = data_type == DataType::Int32;
    let data = (0..d.element_count())
        .map(|_| {
            let n = n as f64;
            match rng.below(10) {
                0 if signed => [i32::MIN as f64, i32::MAX as f64, -n - 1.0][rng.below(3) as usize],
                0 => [u32::MAX as f64, n][rng.below(2) as usize],
                1 => n + rng.below(3) as f64,
                2 | 3 if signed => -(1.0 + rng.below(n as u32 + 2) as f64),
                _ => rng.below(n as u32) as f64,
            }
        })
        .collect();
    HostTensor::new(d, data).unwrap()
}

/// Indices for gatherND/scatterND: rows of `k` coordinates into `shape`.
fn random_nd_indices(
    rng: &mut Rng,
    data_type: DataType,
    leading: &[u32],
    shape: &[u32],
    k: usize,
) -> HostTensor {
    let mut ishape = leading.to_vec();
    ishape.push(k as u32);
    let rows: u32 = leading.iter().product();
    let mut data = Vec::new();
    for _ in 0..rows {
        for &n in &shape[..k] {
            data.extend(random_indices(rng, data_type, &[1], n).data);
        }
    }
    HostTensor::new(OperandDescriptor::new(data_type, ishape), data).unwrap()
}

/// A graph of one operator whose arguments are, in order, moved data (`Some(descriptor)`) or
/// index values (`None`, taken from `indices`), checked with inputs and with constants.
fn check_args(
    ctx: &Context,
    rng: &mut Rng,
    op: &Op,
    args: &[Option<OperandDescriptor>],
    indices: &HostTensor,
) {
    for constant in [false, true] {
        let mut g = TestGraph::default();
        let vals: Vec<Val> = args
            .iter()
            .map(|a| match a {
                Some(d) => {
                    let bytes = random_bytes(rng, d);
                    g.input(d.clone(), bytes, constant, true)
                }
                None => g.input(
                    indices.descriptor.clone(),
                    indices.to_bytes(),
                    constant,
                    false,
                ),
            })
            .collect();
        let out = g.node(op.clone(), vals);
        g.outputs = vec![out];
        g.check(
            ctx,
            &format!(
                "{op:?} on {args:?}, indices {:?} (constant {constant})",
                indices.data
            ),
        );
    }
}

const INDEX_TYPES: [DataType; 2] = [DataType::Int32, DataType::Uint32];

#[test]
fn gather_elements_all_types() {
    let ctx = context();
    let mut rng = Rng::new(31);
    for t in TYPES {
        for it in INDEX_TYPES {
            for rank in 1..=5 {
                let shape = rng.shape(rank, 5);
                let axis = rng.below(rank as u32) as usize;
                let mut ishape = shape.clone();
                ishape[axis] = 1 + rng.below(6);
                let indices = random_indices(&mut rng, it, &ishape, shape[axis]);
                let op = Op::GatherElements { axis: axis as u32 };
                check_args(
                    &ctx,
                    &mut rng,
                    &op,
                    &[Some(desc(t, &shape)), None],
                    &indices,
                );
            }
            // Size-1 axis: every index selects element 0; odd sizes crossing packed words.
            let indices = random_indices(&mut rng, it, &[3, 7], 1);
            check_args(
                &ctx,
                &mut rng,
                &Op::GatherElements { axis: 0 },
                &[Some(desc(t, &[1, 7])), None],
                &indices,
            );
            let indices = random_indices(&mut rng, it, &[67], 13);
            check_args(
                &ctx,
                &mut rng,
                &Op::GatherElements { axis: 0 },
                &[Some(desc(t, &[13])), None],
                &indices,
            );
        }
    }
}

#[test]
fn gather_nd_all_types() {
    let ctx = context();
    let mut rng = Rng::new(32);
    for t in TYPES {
        for it in INDEX_TYPES {
            for rank in 1..=4 {
                let shape = rng.shape(rank, 5);
                for k in 1..=rank {
                    let lead_rank = rng.below(3) as usize;
                    let leading = rng.shape(lead_rank, 4);
                    let indices = random_nd_indices(&mut rng, it, &leading, &shape, k);
                    check_args(
                        &ctx,
                        &mut rng,
                        &Op::GatherNd,
                        &[Some(desc(t, &shape)), None],
                        &indices,
                    );
                }
            }
            // Full coordinates from rank-1 indices: a scalar output.
            let indices = random_nd_indices(&mut rng, it, &[], &[3, 1, 5], 3);
            check_args(
                &ctx,
                &mut rng,
                &Op::GatherNd,
                &[Some(desc(t, &[3, 1, 5])), None],
                &indices,
            );
        }
    }
}

#[test]
fn scatter_elements_all_types() {
    let ctx = context();
    let mut rng = Rng::new(33);
    for t in TYPES {
        for it in INDEX_TYPES {
            for rank in 1..=5 {
                let shape = rng.shape(rank, 5);
                let axis = rng.below(rank as u32) as usize;
                let mut ishape = shape.clone();
                ishape[axis] = 1 + rng.below(8);
                let indices = random_indices(&mut rng, it, &ishape, shape[axis]);
                let op = Op::ScatterElements { axis: axis as u32 };
                check_args(
                    &ctx,
                    &mut rng,
                    &op,
                    &[Some(desc(t, &shape)), None, Some(desc(t, &ishape))],
                    &indices,
                );
            }
            // Many updates onto few elements: heavy duplication, packed words shared.
            let indices = random_indices(&mut rng, it, &[37], 3);
            let op = Op::ScatterElements { axis: 0 };
            check_args(
                &ctx,
                &mut rng,
                &op,
                &[Some(desc(t, &[3])), None, Some(desc(t, &[37]))],
                &indices,
            );
        }
    }
}

#[test]
fn scatter_nd_all_types() {
    let ctx = context();
    let mut rng = Rng::new(34);
    for t in TYPES {
        for it in INDEX_TYPES {
            for rank in 1..=4 {
                let shape = rng.shape(rank, 5);
                for k in 1..=rank {
                    let lead_rank = 1 + rng.below(2) as usize;
                    let leading = rng.shape(lead_rank, 4);
                    let indices = random_nd_indices(&mut rng, it, &leading, &shape, k);
                    let mut ushape = leading.clone();
                    ushape.extend_from_slice(&shape[k..]);
                    let args = [Some(desc(t, &shape)), None, Some(desc(t, &ushape))];
                    check_args(&ctx, &mut rng, &Op::ScatterNd, &args, &indices);
                }
            }
            // Full coordinates from rank-1 indices: a scalar update.
            let indices = random_nd_indices(&mut rng, it, &[], &[2, 9], 2);
            let args = [Some(desc(t, &[2, 9])), None, Some(desc(t, &[]))];
            check_args(&ctx, &mut rng, &Op::ScatterNd, &args, &indices);
        }
    }
}

fn f32s(shape: &[u32], v: &[f64]) -> HostTensor {
    HostTensor::new(desc(DataType::Float32, shape), v.to_vec()).unwrap()
}

fn idx(data_type: DataType, shape: &[u32], v: &[f64]) -> HostTensor {
    HostTensor::new(desc(data_type, shape), v.to_vec()).unwrap()
}

fn run(ctx: &Context, op: Op, inputs: &[HostTensor]) -> Vec<f64> {
    run_op(ctx, &op, inputs, &[]).unwrap().remove(0).data
}

/// The spec's examples, by value; negative indices count from the end.
#[test]
fn spec_examples() {
    let ctx = context();
    let input = f32s(
        &[4, 3],
        &[0., 1., 2., 10., 11., 12., 20., 21., 22., 30., 31., 32.],
    );
    let u = DataType::Uint32;
    let i = DataType::Int32;
    assert_eq!(
        run(
            &ctx,
            Op::GatherElements { axis: 0 },
            &[input.clone(), idx(u, &[2, 3], &[3., 1., 1., 2., 0., 3.])]
        ),
        vec![30., 11., 12., 20., 1., 32.]
    );
    assert_eq!(
        run(
            &ctx,
            Op::GatherElements { axis: 1 },
            &[input.clone(), idx(i, &[4, 1], &[-1., 1., -3., 2.])]
        ),
        vec![2., 11., 20., 32.]
    );
    let square = f32s(&[2, 2], &[0., 1., 2., 3.]);
    assert_eq!(
        run(
            &ctx,
            Op::GatherNd,
            &[square.clone(), idx(u, &[3, 2], &[0., 0., 1., 1., 1., 0.])]
        ),
        vec![0., 3., 2.]
    );
    assert_eq!(
        run(
            &ctx,
            Op::GatherNd,
            &[square.clone(), idx(i, &[2, 1], &[-1., 0.])]
        ),
        vec![2., 3., 0., 1.]
    );
    let cube = f32s(&[2, 2, 2], &[0., 1., 2., 3., 4., 5., 6., 7.]);
    assert_eq!(
        run(
            &ctx,
            Op::GatherNd,
            &[cube.clone(), idx(u, &[2, 2], &[0., 1., 1., 0.])]
        ),
        vec![2., 3., 4., 5.]
    );
    assert_eq!(
        run(
            &ctx,
            Op::ScatterElements { axis: 0 },
            &[
                input.clone(),
                idx(u, &[2, 3], &[3., 1., 1., 2., 0., 3.]),
                f32s(&[2, 3], &[-1., -2., -3., -4., -5., -6.])
            ]
        ),
        vec![0., -5., 2., 10., -2., -3., -4., 21., 22., -1., 31., -6.]
    );
    assert_eq!(
        run(
            &ctx,
            Op::ScatterElements { axis: 1 },
            &[
                input.clone(),
                idx(i, &[4, 1], &[2., -2., 0., 2.]),
                f32s(&[4, 1], &[-1., -2., -3., -4.])
            ]
        ),
        vec![0., 1., -1., 10., -2., 12., -3., 21., 22., 30., 31., -4.]
    );
    let eight = f32s(&[8], &[0., 1., 2., 3., 4., 5., 6., 7.]);
    assert_eq!(
        run(
            &ctx,
            Op::ScatterNd,
            &[
                eight,
                idx(u, &[4, 1], &[4., 3., 1., 7.]),
                f32s(&[4], &[-1., -2., -3., -4.])
            ]
        ),
        vec![0., -3., 2., -2., -1., 5., 6., -4.]
    );
    assert_eq!(
        run(
            &ctx,
            Op::ScatterNd,
            &[
                cube,
                idx(u, &[2, 2], &[0., 1., 1., 0.]),
                f32s(&[2, 2], &[-1., -2., -3., -4.])
            ]
        ),
        vec![0., 1., -1., -2., -3., -4., 6., 7.]
    );
    // Duplicates: the last update in row-major order wins.
    assert_eq!(
        run(
            &ctx,
            Op::ScatterNd,
            &[
                square,
                idx(i, &[3, 1], &[1., -1., 0.]),
                f32s(&[3, 2], &[1., 2., 3., 4., 5., 6.])
            ]
        ),
        vec![5., 6., 3., 4.]
    );
}

#[test]
fn validation() {
    let f = |s: &[u32]| desc(DataType::Float32, s);
    let i = |s: &[u32]| desc(DataType::Int32, s);
    let ge = |axis| Op::GatherElements { axis };
    assert_eq!(
        validate(&ge(1), &[f(&[4, 3]), i(&[4, 7])]).unwrap()[0].shape,
        vec![4, 7]
    );
    assert!(is_type_error(validate(&ge(2), &[f(&[4, 3]), i(&[4, 3])])));
    assert!(is_type_error(validate(&ge(1), &[f(&[4, 3]), i(&[2, 3])])));
    assert!(is_type_error(validate(&ge(0), &[f(&[4, 3]), i(&[4])])));
    assert!(is_type_error(validate(&ge(0), &[f(&[4]), f(&[4])])));
    assert!(is_type_error(validate(
        &ge(0),
        &[f(&[4]), desc(DataType::Uint64, &[4])]
    )));
    assert!(is_type_error(validate(&ge(0), &[f(&[]), i(&[])])));

    assert_eq!(
        validate(&Op::GatherNd, &[f(&[2, 3, 4]), i(&[5, 2])]).unwrap()[0].shape,
        vec![5, 4]
    );
    assert_eq!(
        validate(&Op::GatherNd, &[f(&[2, 3]), i(&[2])]).unwrap()[0].shape,
        Vec::<u32>::new()
    );
    assert!(is_type_error(validate(
        &Op::GatherNd,
        &[f(&[2, 3]), i(&[5, 3])]
    )));
    assert!(is_type_error(validate(
        &Op::GatherNd,
        &[f(&[2, 3]), i(&[])]
    )));
    assert!(is_type_error(validate(
        &Op::GatherNd,
        &[f(&[2, 3]), desc(DataType::Uint8, &[1, 1])]
    )));
    // An output rank above the maximum.
    assert!(is_type_error(validate(
        &Op::GatherNd,
        &[f(&[2; 8]), i(&[2, 2, 2, 2, 2, 2, 2, 1])]
    )));

    let se = |axis| Op::ScatterElements { axis };
    assert_eq!(
        validate(&se(0), &[f(&[4, 3]), i(&[2, 3]), f(&[2, 3])]).unwrap()[0].shape,
        vec![4, 3]
    );
    assert!(is_type_error(validate(
        &se(0),
        &[f(&[4, 3]), i(&[2, 3]), f(&[3, 3])]
    )));
    assert!(is_type_error(validate(
        &se(0),
        &[f(&[4, 3]), i(&[2, 3]), i(&[2, 3])]
    )));
    assert!(is_type_error(validate(
        &se(0),
        &[f(&[4, 3]), i(&[2, 2]), f(&[2, 2])]
    )));
    assert!(is_type_error(validate(
        &se(2),
        &[f(&[4, 3]), i(&[4, 3]), f(&[4, 3])]
    )));
    assert!(is_type_error(validate(
        &se(0),
        &[f(&[4, 3]), f(&[4, 3]), f(&[4, 3])]
    )));

    assert_eq!(
        validate(&Op::ScatterNd, &[f(&[4, 3]), i(&[2, 1]), f(&[2, 3])]).unwrap()[0].shape,
        vec![4, 3]
    );
    assert_eq!(
        validate(&Op::ScatterNd, &[f(&[4, 3]), i(&[2]), f(&[])]).unwrap()[0].shape,
        vec![4, 3]
    );
    assert!(is_type_error(validate(
        &Op::ScatterNd,
        &[f(&[4, 3]), i(&[2, 1]), f(&[2, 4])]
    )));
    assert!(is_type_error(validate(
        &Op::ScatterNd,
        &[f(&[4, 3]), i(&[2, 3]), f(&[2])]
    )));
    assert!(is_type_error(validate(
        &Op::ScatterNd,
        &[f(&[4, 3]), i(&[2, 1]), i(&[2, 3])]
    )));
}
