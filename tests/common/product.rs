//! The differential check of matmul and gemm against the float64 reference, shared by the
//! matmul test binaries.

use crate::common::*;
use webnn_wgpu::graph::DataType;
use webnn_wgpu::ops::matmul::GemmOptions;
use webnn_wgpu::ops::{HostTensor, Op};
use webnn_wgpu::backend::webgpu::Context;

/// Runs `op` on the GPU (inputs as graph inputs, then as constants) and compares with the float64
/// reference. The bound is the f32 accumulation error over K terms, relative to the reference on
/// absolute values (so cancellation cannot hide errors or make them look large), plus one unit in
/// the last place of the output type.
pub fn check_product(ctx: &Context, op: &Op, inputs: &[HostTensor], k: usize) {
    let what = format!(
        "{} on {:?}",
        op.name(),
        inputs
            .iter()
            .map(|t| t.descriptor.to_string())
            .collect::<Vec<_>>()
    );
    let reference =
        reference_op(op, inputs).unwrap_or_else(|e| panic!("{what}: reference failed: {e}"));
    let abs_inputs: Vec<HostTensor> = inputs
        .iter()
        .map(|t| HostTensor {
            descriptor: t.descriptor.clone(),
            data: t.data.iter().map(|v| v.abs()).collect(),
            exact: Vec::new(),
        })
        .collect();
    let abs_op = match op {
        Op::Gemm(o) => Op::Gemm(GemmOptions {
            alpha: o.alpha.abs(),
            beta: o.beta.abs(),
            ..o.clone()
        }),
        other => other.clone(),
    };
    let mut bound_desc: Vec<HostTensor> = abs_inputs;
    for t in &mut bound_desc {
        t.descriptor.data_type = DataType::Float32;
    }
    let bound = reference_op(&abs_op, &bound_desc).unwrap();
    let t = reference[0].descriptor.data_type;
    let ulp_rel = if t == DataType::Float16 {
        2f64.powi(-10)
    } else {
        2f64.powi(-23)
    };
    for constant in [false, true] {
        let gpu = run_op(ctx, op, inputs, &vec![constant; inputs.len()])
            .unwrap_or_else(|e| panic!("{what}: gpu failed: {e}"));
        assert_eq!(
            gpu[0].descriptor, reference[0].descriptor,
            "{what}: descriptor"
        );
        for (i, ((&g, &r), &b)) in gpu[0]
            .data
            .iter()
            .zip(&reference[0].data)
            .zip(&bound[0].data)
            .enumerate()
        {
            let tol = (k as f64 + 2.0) * 2f64.powi(-23) * b + ulp_rel * r.abs() + 2f64.powi(-24);
            assert!(
                (g - r).abs() <= tol,
                "{what} (constant {constant}): element {i}: gpu {g} vs reference {r} (tolerance {tol})"
            );
        }
    }
}
