//! Every matmul kernel variant against the float64 reference, whatever adapter runs the tests:
//! the GPU tile shapes, GEMV splits and register-kernel blocks are forced through the
//! benchmarking overrides (one test function, so the environment is not shared with concurrent
//! tests). Shapes that divide the tiles (unchecked loads) and ones that do not, M = 1, N = 1,
//! K = 1, broadcast batches, K split over workgroups, float16 with even and odd N, gemm
//! transposes with `c`. The GPU GEMV and dot kernels run with their subgroup reduction (when the
//! adapter has subgroups) and with `WEBNN_WGPU_SUBGROUPS=0` (workgroup memory only). Each
//! variant also reads a B gathered from a stack in place (matmul and gemm with bTranspose, as the
//! MoE token graph applies its experts).
#![cfg(not(target_arch = "wasm32"))] // native: `wasm-pack test` builds every test target for wasm32

mod common;
#[path = "common/product.rs"]
mod product;
use common::*;
use product::check_product;
use webnn_wgpu::graph::{DataType, OperandDescriptor};
use webnn_wgpu::ops::matmul::GemmOptions;
use webnn_wgpu::ops::wgsl::{DeviceTraits, LowerRequest, Lowering};
use webnn_wgpu::ops::{HostTensor, Op};

const MATMULS: &[(&[u32], &[u32])] = &[
    (&[128, 32], &[32, 128]),
    (&[64, 16], &[16, 64]),
    (&[130, 33], &[33, 67]),
    (&[20, 1], &[1, 24]),
    (&[2, 1, 40, 20], &[3, 20, 36]),
    (&[1, 300], &[300, 200]),
    (&[3, 64], &[64, 130]),
    (&[2, 1, 50], &[2, 50, 40]),
    (&[1, 1], &[1, 9]),
    (&[70, 64], &[64, 1]),
    (&[5, 37], &[37, 1]),
    // Decoding attention: probabilities x values (N = head_dim) and a narrow odd N.
    (&[2, 4, 256], &[2, 256, 32]),
    (&[3, 200], &[200, 6]),
    // Whole 32x32 tiles with K to share out (the split-K kernel when forced), B broadcast.
    (&[2, 64, 64], &[64, 64]),
];

fn gemms(rng: &mut Rng, data_type: DataType) -> Vec<(GemmOptions, Vec<webnn_wgpu::ops::HostTensor>, u32)> {
    let mut v = Vec::new();
    for &(m, k, n) in &[(64u32, 32u32, 128u32), (33, 17, 40), (1, 64, 48), (2, 30, 9)] {
        for (a_transpose, b_transpose) in [(false, false), (true, false), (false, true), (true, true)] {
            let sa = if a_transpose { [k, m] } else { [m, k] };
            let sb = if b_transpose { [n, k] } else { [k, n] };
            let inputs = vec![
                rng.tensor(data_type, &sa, -1.0, 1.0),
                rng.tensor(data_type, &sb, -1.0, 1.0),
                rng.tensor(data_type, &[n], -1.0, 1.0),
            ];
            let o = GemmOptions { alpha: 0.5, beta: -1.5, a_transpose, b_transpose, has_c: true };
            v.push((o, inputs, k));
        }
    }
    v
}

fn run_all(rng: &mut Rng) {
    let ctx = context();
    for data_type in [DataType::Float32, DataType::Float16] {
        for (a, b) in MATMULS {
            let x = rng.tensor(data_type, a, -1.0, 1.0);
            let y = rng.tensor(data_type, b, -1.0, 1.0);
            check_product(&ctx, &Op::Matmul, &[x, y], a[a.len() - 1] as usize);
        }
        for (o, inputs, k) in gemms(rng, data_type) {
            check_product(&ctx, &Op::Gemm(o), &inputs, k as usize);
        }
        gathered(&ctx, rng, data_type);
    }
}

/// `op(a, reshape(gather(stack, index, {axis: 0})))`, fused so that the kernel reads the stack
/// in place, against the float64 reference of the operators one by one.
fn gathered(ctx: &webnn_wgpu::backend::webgpu::Context, rng: &mut Rng, data_type: DataType) {
    let (e, k, n) = (3u32, 24u32, 20u32);
    let (ulp, abs) = if data_type == DataType::Float16 { (2, 2e-3) } else { (16, 1e-5) };
    for (m, b_transpose, index) in [(1u32, false, 2.0), (1, true, -1.0), (3, true, 1.0), (9, false, 0.0), (40, false, 7.0)] {
        let a = rng.tensor(data_type, &[m, k], -1.0, 1.0);
        let stack = rng.tensor(data_type, &[e, k * n], -1.0, 1.0);
        let index = HostTensor::new(OperandDescriptor::new(DataType::Int32, vec![]), vec![index]).unwrap();
        let b_shape = if b_transpose { vec![n, k] } else { vec![k, n] };
        let product = if b_transpose {
            Op::Gemm(GemmOptions { b_transpose, ..GemmOptions::default() })
        } else {
            Op::Matmul
        };
        let ops = vec![
            (Op::Gather { axis: 0 }, vec![1, 2]),
            (Op::Reshape { new_shape: b_shape }, vec![3]),
            (product.clone(), vec![0, 4]),
        ];
        let inputs = [a, stack, index];
        let mut host = inputs.to_vec();
        for (op, args) in &ops {
            let args: Vec<HostTensor> = args.iter().map(|&i| host[i].clone()).collect();
            host.push(reference_op(op, &args).unwrap().remove(0));
        }
        let got = run_graph(ctx, &inputs, &ops).unwrap();
        let what = format!("{} [{m}, {k}] x gathered {data_type} B (bTranspose {b_transpose}, index {})", product.name(), inputs[2].data[0]);
        assert_close(&[got], &[host.pop().unwrap()], ulp, abs, &what);
    }
}

/// The workgroups of each launch a float32 `[m, k] x [k, n]` lowers to on a large GPU (as the
/// overrides force it).
fn gpu_launches(m: u32, k: u32, n: u32) -> Vec<u64> {
    let d = |s: Vec<u32>| OperandDescriptor::new(DataType::Float32, s);
    let (a, b, out) = (d(vec![m, k]), d(vec![k, n]), d(vec![m, n]));
    let device = DeviceTraits { cpu: false, workgroup_storage: 32768, invocations: 1024, subgroups: false };
    let request = LowerRequest { inputs: vec![&a, &b], outputs: vec![&out], shader_f16: false, device };
    match webnn_wgpu::ops::lower(&Op::Matmul, &request) {
        Ok(Lowering::Kernels { launches, .. }) => launches.iter().map(|l| l.invocations / l.workgroup_size as u64).collect(),
        _ => panic!("matmul {m}x{k}x{n} did not lower to kernels"),
    }
}

#[test]
fn every_kernel_variant_against_reference() {
    let mut rng = Rng::new(21);
    // The adapter's own choice first, then forced shapes.
    run_all(&mut rng);
    let ctx = context();
    eprintln!("adapter {}: subgroups {}", ctx.adapter_info().name, ctx.has_subgroups());
    // GEMV K shares (and dot lanes per output: the same `wk`) narrower than, as wide as and
    // wider than a subgroup (llvmpipe's is 8).
    let gemvs = [
        ("16,16,8,8,16", "64,4,4"),
        ("16,16,4,4,16", "16,16,1"),
        ("8,8,4,4,16", "8,2,3"),
        ("16,16,4,4,16", "2,128,2"),
        ("16,16,8,8,16", "32,8,2"),
        // The browser's tile for large products; float16's GEMV shape at N = 8192.
        ("8,16,8,8,16", "32,8,8"),
        // The GPU's own choice for narrow outputs (N <= 4, N = 32).
        ("16,16,4,4,16", "1,64,1"),
        ("16,16,4,4,16", "8,32,1"),
    ];
    for subgroups in ["1", "0"] {
        std::env::set_var("WEBNN_WGPU_SUBGROUPS", subgroups);
        for (tiles, gemv) in gemvs {
            std::env::set_var("WEBNN_WGPU_MATMUL_TILES", tiles);
            std::env::set_var("WEBNN_WGPU_GEMV", gemv);
            run_all(&mut rng);
        }
    }
    std::env::remove_var("WEBNN_WGPU_SUBGROUPS");
    // K split over workgroups, the partial sums added (and C, alpha, beta applied) by a second
    // launch; products the tiles do not divide take the unsplit kernel.
    std::env::remove_var("WEBNN_WGPU_GEMV");
    for (tiles, splits) in [("8,8,4,4,16", "2"), ("8,8,4,4,16", "4"), ("16,16,4,4,16", "2"), ("16,16,8,8,16", "2")] {
        std::env::set_var("WEBNN_WGPU_MATMUL_TILES", tiles);
        std::env::set_var("WEBNN_WGPU_MATMUL_SPLITS", splits);
        assert_eq!(gpu_launches(128, 64, 128).len(), 2, "tiles {tiles}, K split {splits} ways");
        run_all(&mut rng);
    }
    std::env::remove_var("WEBNN_WGPU_MATMUL_SPLITS");
    // The register kernel (the default on CPU adapters), for matmul and M <= 8 alike.
    std::env::remove_var("WEBNN_WGPU_MATMUL_TILES");
    std::env::remove_var("WEBNN_WGPU_GEMV");
    for regs in ["8,8,8,8", "4,2,3,4", "16,1,4,16"] {
        std::env::set_var("WEBNN_WGPU_MATMUL_REGS", regs);
        run_all(&mut rng);
    }
}
