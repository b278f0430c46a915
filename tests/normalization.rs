//! Differential tests of layerNormalization against the float64 reference: default, empty,
//! unsorted and long axes, rank 0, with and without scale and bias, float16, and the spec's
//! validation errors.
#![cfg(not(target_arch = "wasm32"))] // native: `wasm-pack test` builds every test target for wasm32

mod common;
use common::*;
use webnn_wgpu::graph::{DataType, OperandDescriptor};
use webnn_wgpu::ops::normalization::LayerNormalizationOptions;
use webnn_wgpu::ops::{self, Op};
use webnn_wgpu::Error;

/// (input shape, axes).
const CASES: &[(&[u32], Option<&[u32]>)] = &[
    (&[], None),
    (&[5], None),
    (&[5], Some(&[0])),
    (&[2, 3], None),
    (&[2, 3, 4], None),
    (&[2, 3, 4], Some(&[])),
    (&[2, 3, 4], Some(&[0])),
    (&[2, 3, 4], Some(&[2, 0])),
    (&[1, 4, 1, 3], Some(&[1, 3])),
    (&[3, 400], Some(&[1])),
    (&[2, 20, 30], Some(&[1, 2])),
];

#[test]
fn layer_normalization_against_reference() {
    let ctx = context();
    let mut rng = Rng::new(41);
    for data_type in [DataType::Float32, DataType::Float16] {
        for (shape, axes) in CASES {
            let axes_list: Vec<u32> = match axes {
                Some(a) => a.to_vec(),
                None => (1..shape.len() as u32).collect(),
            };
            let param: Vec<u32> = axes_list.iter().map(|&a| shape[a as usize]).collect();
            for (has_scale, has_bias) in
                [(false, false), (true, false), (false, true), (true, true)]
            {
                let mut inputs = vec![rng.tensor(data_type, shape, -3.0, 5.0)];
                if has_scale {
                    inputs.push(rng.tensor(data_type, &param, -2.0, 2.0));
                }
                if has_bias {
                    inputs.push(rng.tensor(data_type, &param, -2.0, 2.0));
                }
                let options = LayerNormalizationOptions {
                    axes: axes.map(|a| a.to_vec()),
                    epsilon: if has_bias { 1e-3 } else { 1e-5 },
                    has_scale,
                    has_bias,
                };
                // WPT's absolute tolerance: 1/1024 (float32) or 1/512 (float16).
                let abs = if data_type == DataType::Float16 {
                    1.0 / 512.0
                } else {
                    1.0 / 1024.0
                };
                check_op(&ctx, &Op::LayerNormalization(options), &inputs, 2, abs);
            }
        }
    }
}

#[test]
fn layer_normalization_validation() {
    let f = |s: &[u32]| OperandDescriptor::new(DataType::Float32, s.to_vec());
    let op = |axes: Option<&[u32]>, has_scale, has_bias| {
        Op::LayerNormalization(LayerNormalizationOptions {
            axes: axes.map(|a| a.to_vec()),
            has_scale,
            has_bias,
            ..Default::default()
        })
    };
    let err = |op: &Op, inputs: &[&OperandDescriptor]| {
        matches!(ops::validate(op, inputs), Err(Error::Type(_)))
    };
    assert!(ops::validate(
        &op(None, true, true),
        &[&f(&[2, 3, 4]), &f(&[3, 4]), &f(&[3, 4])]
    )
    .is_ok());
    assert!(ops::validate(
        &op(Some(&[2, 0]), true, false),
        &[&f(&[2, 3, 4]), &f(&[4, 2])]
    )
    .is_ok());
    assert!(ops::validate(&op(None, true, false), &[&f(&[]), &f(&[])]).is_ok());
    assert!(
        err(
            &op(Some(&[2, 0]), true, false),
            &[&f(&[2, 3, 4]), &f(&[2, 4])]
        ),
        "scale in axes order"
    );
    assert!(
        err(&op(None, true, false), &[&f(&[2, 3, 4]), &f(&[12])]),
        "scale rank"
    );
    assert!(
        err(&op(None, false, true), &[&f(&[2, 3, 4]), &f(&[3, 5])]),
        "bias shape"
    );
    assert!(
        err(&op(Some(&[3]), false, false), &[&f(&[2, 3, 4])]),
        "axis out of range"
    );
    assert!(
        err(&op(Some(&[1, 1]), false, false), &[&f(&[2, 3, 4])]),
        "duplicate axes"
    );
    let h = OperandDescriptor::new(DataType::Float16, vec![3, 4]);
    assert!(
        err(&op(None, true, false), &[&f(&[2, 3, 4]), &h]),
        "scale type"
    );
    let i = OperandDescriptor::new(DataType::Int32, vec![2, 3]);
    assert!(err(&op(None, false, false), &[&i]), "int32 input");
}
