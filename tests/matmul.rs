//! Differential tests of matmul and gemm against the float64 reference: both kernels (direct for
//! small M or N, tiled otherwise), sizes that are not tile multiples, broadcast batch dimensions,
//! gemm's transposes and `c` broadcasts, float16, and the spec's validation errors.
#![cfg(not(target_arch = "wasm32"))] // native: `wasm-pack test` builds every test target for wasm32

mod common;
#[path = "common/product.rs"]
mod product;
use common::*;
use product::check_product;
use webnn_wgpu::graph::{DataType, OperandDescriptor};
use webnn_wgpu::ops::matmul::GemmOptions;
use webnn_wgpu::ops::{self, Op};
use webnn_wgpu::Error;

const MATMUL_CASES: &[(&[u32], &[u32])] = &[
    (&[1, 1], &[1, 1]),
    (&[1, 1, 1], &[1, 1]),
    (&[3, 65], &[65, 67]),
    (&[129, 1], &[1, 130]),
    (&[1, 300], &[300, 200]),
    (&[200, 300], &[300, 1]),
    (&[70, 33], &[33, 130]),
    (&[64, 64], &[64, 64]),
    (&[130, 257], &[257, 65]),
    (&[40, 30], &[30, 33]),
    (&[2, 1, 17, 20], &[3, 20, 18]),
    (&[5, 16, 16], &[16, 16]),
    (&[16, 16], &[4, 16, 20]),
    (&[2, 3, 20, 24], &[2, 3, 24, 17]),
    (&[3, 1, 70, 8], &[1, 2, 8, 66]),
    (&[1, 2, 1, 2, 5, 3], &[2, 1, 2, 1, 3, 4]),
];

#[test]
fn matmul_against_reference() {
    let ctx = context();
    let mut rng = Rng::new(11);
    for data_type in [DataType::Float32, DataType::Float16] {
        for (a, b) in MATMUL_CASES {
            let x = rng.tensor(data_type, a, -1.0, 1.0);
            let y = rng.tensor(data_type, b, -1.0, 1.0);
            check_product(&ctx, &Op::Matmul, &[x, y], a[a.len() - 1] as usize);
        }
    }
}

#[test]
fn matmul_random_shapes() {
    let ctx = context();
    let mut rng = Rng::new(12);
    for round in 0..12 {
        let data_type = if round % 3 == 2 {
            DataType::Float16
        } else {
            DataType::Float32
        };
        let (m, k, n) = (1 + rng.below(90), 1 + rng.below(70), 1 + rng.below(90));
        let batch_rank = rng.below(3) as usize;
        let batch = rng.shape(batch_rank, 3);
        // Each input keeps a random suffix of the batch shape, with random dimensions set to 1.
        let side = |rng: &mut Rng| -> Vec<u32> {
            let keep = rng.below(batch_rank as u32 + 1) as usize;
            batch[batch_rank - keep..]
                .iter()
                .map(|&d| if rng.below(3) == 0 { 1 } else { d })
                .collect()
        };
        let mut sa = side(&mut rng);
        let mut sb = side(&mut rng);
        sa.extend([m, k]);
        sb.extend([k, n]);
        let x = rng.tensor(data_type, &sa, -2.0, 2.0);
        let y = rng.tensor(data_type, &sb, -2.0, 2.0);
        check_product(&ctx, &Op::Matmul, &[x, y], k as usize);
    }
}

#[test]
fn gemm_options_against_reference() {
    let ctx = context();
    let mut rng = Rng::new(13);
    for data_type in [DataType::Float32, DataType::Float16] {
        for &(m, k, n) in &[
            (1u32, 1u32, 1u32),
            (3, 65, 67),
            (70, 33, 130),
            (65, 17, 33),
            (2, 40, 80),
        ] {
            for a_transpose in [false, true] {
                for b_transpose in [false, true] {
                    let c_shapes: [Option<Vec<u32>>; 6] = [
                        None,
                        Some(vec![]),
                        Some(vec![n]),
                        Some(vec![1, n]),
                        Some(vec![m, 1]),
                        Some(vec![m, n]),
                    ];
                    for (ci, c_shape) in c_shapes.iter().enumerate() {
                        // Every `c` shape without transposes; two of them with each transpose.
                        if (a_transpose || b_transpose) && ci != 2 && ci != 5 {
                            continue;
                        }
                        let sa = if a_transpose { [k, m] } else { [m, k] };
                        let sb = if b_transpose { [n, k] } else { [k, n] };
                        let mut inputs = vec![
                            rng.tensor(data_type, &sa, -1.0, 1.0),
                            rng.tensor(data_type, &sb, -1.0, 1.0),
                        ];
                        if let Some(cs) = c_shape {
                            inputs.push(rng.tensor(data_type, cs, -1.0, 1.0));
                        }
                        let options = GemmOptions {
                            alpha: if ci % 2 == 0 { 1.0 } else { 0.3 },
                            beta: if ci % 3 == 0 { 1.0 } else { -2.5 },
                            a_transpose,
                            b_transpose,
                            has_c: c_shape.is_some(),
                        };
                        check_product(&ctx, &Op::Gemm(options), &inputs, k as usize);
                    }
                }
            }
        }
    }
}

fn d(data_type: DataType, shape: &[u32]) -> OperandDescriptor {
    OperandDescriptor::new(data_type, shape.to_vec())
}

fn is_type_error(op: &Op, inputs: &[&OperandDescriptor]) -> bool {
    matches!(ops::validate(op, inputs), Err(Error::Type(_)))
}

#[test]
fn matmul_validation() {
    let f = DataType::Float32;
    let ok = ops::validate(&Op::Matmul, &[&d(f, &[2, 1, 3, 4]), &d(f, &[5, 4, 6])]).unwrap();
    assert_eq!(ok[0], d(f, &[2, 5, 3, 6]));
    assert!(
        is_type_error(&Op::Matmul, &[&d(f, &[4]), &d(f, &[4, 2])]),
        "rank 1"
    );
    assert!(
        is_type_error(&Op::Matmul, &[&d(f, &[2, 4]), &d(f, &[4])]),
        "rank 1 b"
    );
    assert!(
        is_type_error(&Op::Matmul, &[&d(f, &[]), &d(f, &[])]),
        "scalars"
    );
    assert!(
        is_type_error(&Op::Matmul, &[&d(f, &[2, 3]), &d(f, &[4, 2])]),
        "K mismatch"
    );
    assert!(
        is_type_error(&Op::Matmul, &[&d(f, &[2, 2, 3]), &d(f, &[3, 3, 2])]),
        "batch mismatch"
    );
    assert!(
        is_type_error(
            &Op::Matmul,
            &[&d(f, &[2, 3]), &d(DataType::Float16, &[3, 2])]
        ),
        "types differ"
    );
    assert!(
        is_type_error(
            &Op::Matmul,
            &[&d(DataType::Int32, &[2, 3]), &d(DataType::Int32, &[3, 2])]
        ),
        "int32"
    );
}

#[test]
fn gemm_validation() {
    let f = DataType::Float32;
    let g = |a_transpose, b_transpose, has_c| {
        Op::Gemm(GemmOptions {
            a_transpose,
            b_transpose,
            has_c,
            ..Default::default()
        })
    };
    let ok = ops::validate(
        &g(true, true, true),
        &[&d(f, &[3, 2]), &d(f, &[5, 3]), &d(f, &[5])],
    )
    .unwrap();
    assert_eq!(ok[0], d(f, &[2, 5]));
    assert!(
        is_type_error(
            &g(false, false, false),
            &[&d(f, &[2, 3, 4]), &d(f, &[4, 2])]
        ),
        "rank 3 a"
    );
    assert!(
        is_type_error(&g(false, false, false), &[&d(f, &[3]), &d(f, &[3, 2])]),
        "rank 1 a"
    );
    assert!(
        is_type_error(&g(false, false, false), &[&d(f, &[2, 3]), &d(f, &[2, 3])]),
        "K mismatch"
    );
    assert!(ops::validate(&g(false, true, false), &[&d(f, &[2, 3]), &d(f, &[4, 3])]).is_ok());
    assert!(
        is_type_error(&g(true, false, false), &[&d(f, &[2, 3]), &d(f, &[3, 4])]),
        "aTranspose K"
    );
    assert!(
        is_type_error(
            &g(false, false, true),
            &[&d(f, &[2, 3]), &d(f, &[3, 4]), &d(f, &[4, 2])]
        ),
        "c shape"
    );
    assert!(
        is_type_error(
            &g(false, false, true),
            &[&d(f, &[2, 3]), &d(f, &[3, 4]), &d(f, &[1, 2, 4])]
        ),
        "c rank"
    );
    assert!(
        is_type_error(
            &g(false, false, true),
            &[&d(f, &[2, 3]), &d(f, &[3, 4]), &d(f, &[3])]
        ),
        "c broadcast"
    );
    assert!(
        is_type_error(
            &g(false, false, true),
            &[&d(f, &[2, 3]), &d(f, &[3, 4]), &d(DataType::Float16, &[4])]
        ),
        "c type"
    );
    assert!(
        is_type_error(
            &g(false, false, false),
            &[&d(f, &[2, 3]), &d(DataType::Float16, &[3, 4])]
        ),
        "b type"
    );
    assert!(
        is_type_error(
            &g(false, false, false),
            &[&d(DataType::Int32, &[2, 3]), &d(DataType::Int32, &[3, 4])]
        ),
        "int32"
    );
}

/// More than 65535 workgroups: the runtime folds the grid into y, and the kernels rebuild the
/// linear workgroup index.
/// Every finite float16 value through a product's quad loads (four halves in one 8-byte word):
/// [1, 0, 0, 0] times a 4 x N matrix whose first row holds them all gives that row exactly.
#[test]
fn float16_products_widen_every_finite_half_exactly() {
    let ctx = context();
    let finite: Vec<f64> = (0..=u16::MAX).map(half::f16::from_bits).filter(|h| h.is_finite()).map(|h| h.to_f64()).collect();
    let n = finite.len();
    let b: Vec<f64> = finite.into_iter().chain(std::iter::repeat_n(0.5, 3 * n)).collect();
    let a = ops::HostTensor::new(OperandDescriptor::new(DataType::Float16, vec![1, 4]), vec![1.0, 0.0, 0.0, 0.0]).unwrap();
    let b = ops::HostTensor::new(OperandDescriptor::new(DataType::Float16, vec![4, n as u32]), b).unwrap();
    check_op(&ctx, &Op::Matmul, &[a, b], 0, 0.0);
}

#[test]
fn matmul_beyond_one_grid_dimension() {
    let ctx = context();
    let mut rng = Rng::new(14);
    // Direct kernel: 8 * 300000 outputs in 75000 workgroups of 32 words.
    let x = rng.tensor(DataType::Float32, &[8, 1], -1.0, 1.0);
    let y = rng.tensor(DataType::Float32, &[1, 300000], -1.0, 1.0);
    check_product(&ctx, &Op::Matmul, &[x, y], 1);
    // Tiled kernel: 66000 batches of one 16x16 tile.
    let x = rng.tensor(DataType::Float32, &[66000, 16, 2], -1.0, 1.0);
    let y = rng.tensor(DataType::Float32, &[2, 16], -1.0, 1.0);
    check_product(&ctx, &Op::Matmul, &[x, y], 2);
}

/// The kernel for an output of fewer than 16 rows (a recognizer's 10 time steps x 6625 classes):
/// on a GPU the direct kernel (partial sums through workgroup memory and a barrier); on a CPU
/// adapter the register kernel, which has no barrier (a CPU's slowest case).
#[test]
fn few_rows_on_a_cpu_adapter_take_the_register_kernel() {
    use webnn_wgpu::ops::wgsl::DeviceTraits;
    use webnn_wgpu::ops::{LowerRequest, Lowering};
    let a = OperandDescriptor::new(DataType::Float32, vec![10, 120]);
    let b = OperandDescriptor::new(DataType::Float32, vec![120, 6625]);
    let out = OperandDescriptor::new(DataType::Float32, vec![10, 6625]);
    let sources = |cpu: bool| {
        let device = DeviceTraits { cpu, ..DeviceTraits::default() };
        let request = LowerRequest { inputs: vec![&a, &b], outputs: vec![&out], shader_f16: false, device };
        match ops::lower(&Op::Matmul, &request).unwrap() {
            Lowering::Kernels { launches, .. } => launches.into_iter().map(|l| l.source).collect::<Vec<_>>(),
            Lowering::Alias => panic!("matmul lowered to an alias"),
        }
    };
    let gpu = sources(false);
    assert!(gpu.len() == 1 && gpu[0].contains("workgroupBarrier"), "GPU: the direct kernel");
    let cpu = sources(true);
    assert!(cpu.len() == 1 && !cpu[0].contains("workgroupBarrier"), "CPU adapter: no barrier");
}
