//! averagePool2d, l2Pool2d and maxPool2d: the GPU against the float64 reference over random
//! shapes and options (both layouts, windows, padding, strides, dilations, rounding,
//! outputSizes), small cases worked by hand, and the spec's validation errors.
#![cfg(not(target_arch = "wasm32"))] // native: `wasm-pack test` builds every test target for wasm32

mod common;
use common::*;
use webnn_wgpu::graph::{DataType, OperandDescriptor};
use webnn_wgpu::ops::conv2d::InputLayout;
use webnn_wgpu::ops::pool2d::*;
use webnn_wgpu::ops::{self, HostTensor, Op};
use webnn_wgpu::Error;

fn nchw_to_nhwc(t: &HostTensor) -> HostTensor {
    let op = Op::Transpose { permutation: Some(vec![0, 2, 3, 1]) };
    reference_op(&op, &[t.clone()]).unwrap().remove(0)
}

/// Random options over an input of spatial size `[h, w]`, valid by construction.
fn random_options(rng: &mut Rng, h: u32, w: u32) -> Pool2dOptions {
    let dilations = [1 + rng.below(2), 1 + rng.below(2)];
    let window = [1 + rng.below((h - 1) / dilations[0] + 1), 1 + rng.below((w - 1) / dilations[1] + 1)];
    let window = [window[0].min(3), window[1].min(3)];
    let strides = [1 + rng.below(3), 1 + rng.below(3)];
    let padding: Vec<u32> = (0..4).map(|k| rng.below(window[k / 2])).collect();
    let mut options = Pool2dOptions {
        window_dimensions: Some(window.to_vec()),
        padding: Some(padding.clone()),
        strides: Some(strides.to_vec()),
        dilations: Some(dilations.to_vec()),
        layout: if rng.below(2) == 0 { InputLayout::Nchw } else { InputLayout::Nhwc },
        output_shape_rounding: if rng.below(2) == 0 { RoundingType::Floor } else { RoundingType::Ceil },
        output_sizes: None,
    };
    if rng.below(4) == 0 {
        // outputSizes take the floor or the ceiling of the computed sizes, whatever the rounding.
        let size = |input: u32, k: usize| {
            let (floor, ceil) = ops::conv2d::conv_output_size(
                input,
                window[k],
                padding[2 * k],
                padding[2 * k + 1],
                strides[k],
                dilations[k],
            );
            (floor as u32, ceil as u32)
        };
        let ((fh, ch), (fw, cw)) = (size(h, 0), size(w, 1));
        options.output_sizes = Some(if rng.below(2) == 0 { vec![fh, fw] } else { vec![ch, cw] });
    }
    if rng.below(5) == 0 {
        // The default window is the whole spatial extent.
        options.window_dimensions = None;
        options.padding = None;
        options.dilations = None;
        options.output_sizes = None;
    }
    options
}

#[test]
fn pools_match_reference() {
    let ctx = context();
    let mut rng = Rng::new(21);
    let cases = [
        (PoolKind::Average, DataType::Float32),
        (PoolKind::Average, DataType::Float16),
        (PoolKind::L2, DataType::Float32),
        (PoolKind::L2, DataType::Float16),
        (PoolKind::Max, DataType::Float32),
        (PoolKind::Max, DataType::Float16),
        (PoolKind::Max, DataType::Int32),
        (PoolKind::Max, DataType::Uint32),
        (PoolKind::Max, DataType::Int8),
        (PoolKind::Max, DataType::Uint8),
    ];
    for (kind, data_type) in cases {
        for _ in 0..8 {
            let (h, w) = (1 + rng.below(7), 1 + rng.below(7));
            let shape = [1 + rng.below(2), 1 + rng.below(4), h, w];
            let (lo, hi) = if data_type.is_signed() { (-100.0, 100.0) } else { (0.0, 200.0) };
            let (lo, hi) = if data_type.is_float() { (-4.0, 4.0) } else { (lo, hi) };
            let input = rng.tensor(data_type, &shape, lo, hi);
            let options = random_options(&mut rng, h, w);
            let input = if options.layout == InputLayout::Nhwc { nchw_to_nhwc(&input) } else { input };
            let (ulp, abs) = if data_type == DataType::Float16 { (2, 0.0) } else { (4, 1e-6) };
            check_op(&ctx, &Op::Pool2d(kind, options), &[input], ulp, abs);
        }
    }
}

fn tensor(shape: &[u32], data: Vec<f64>) -> HostTensor {
    HostTensor::new(OperandDescriptor::new(DataType::Float32, shape.to_vec()), data).unwrap()
}

fn run(kind: PoolKind, options: Pool2dOptions, input: &HostTensor) -> Vec<f64> {
    let ctx = context();
    let gpu = run_op(&ctx, &Op::Pool2d(kind, options.clone()), &[input.clone()], &[false]).unwrap().remove(0);
    let reference = reference_op(&Op::Pool2d(kind, options), &[input.clone()]).unwrap();
    assert_close(std::slice::from_ref(&gpu), &reference, 2, 0.0, kind.name());
    gpu.data
}

#[test]
fn small_cases_by_hand() {
    // 0 1 2 3 / 4 5 6 7 / 8 9 10 11 / 12 13 14 15
    let input = tensor(&[1, 1, 4, 4], (0..16).map(f64::from).collect());
    let blocks = Pool2dOptions { window_dimensions: Some(vec![2, 2]), strides: Some(vec![2, 2]), ..Default::default() };
    assert_eq!(run(PoolKind::Max, blocks.clone(), &input), vec![5.0, 7.0, 13.0, 15.0]);
    assert_eq!(run(PoolKind::Average, blocks.clone(), &input), vec![2.5, 4.5, 10.5, 12.5]);
    let l2 = run(PoolKind::L2, blocks, &input);
    assert!((l2[0] - (0.0f64 + 1.0 + 16.0 + 25.0).sqrt()).abs() < 1e-5);
    // Global pooling by default.
    assert_eq!(run(PoolKind::Average, Pool2dOptions::default(), &input), vec![7.5]);
    assert_eq!(run(PoolKind::Max, Pool2dOptions::default(), &input), vec![15.0]);
    // Padding is not counted: the corner 3x3 window with padding 1 averages 4 elements.
    let padded = Pool2dOptions {
        window_dimensions: Some(vec![3, 3]),
        padding: Some(vec![1, 1, 1, 1]),
        strides: Some(vec![3, 3]),
        ..Default::default()
    };
    assert_eq!(run(PoolKind::Average, padded.clone(), &input), vec![2.5, 4.5, 10.5, 12.5]);
    // Dilation 2 reads every other element: the window at 0 reads 0, 2, 8, 10.
    let dilated =
        Pool2dOptions { window_dimensions: Some(vec![2, 2]), dilations: Some(vec![2, 2]), ..Default::default() };
    assert_eq!(run(PoolKind::Average, dilated, &input), vec![5.0, 6.0, 9.0, 10.0]);
    // Ceil rounding adds a partial window: 1 + (4 - 3) / 2 = 1.5 -> 2.
    let ceil = Pool2dOptions {
        window_dimensions: Some(vec![3, 3]),
        strides: Some(vec![2, 2]),
        output_shape_rounding: RoundingType::Ceil,
        ..Default::default()
    };
    assert_eq!(run(PoolKind::Max, ceil.clone(), &input), vec![10.0, 11.0, 14.0, 15.0]);
    assert_eq!(run(PoolKind::Average, ceil, &input), vec![5.0, 6.5, 11.0, 12.5]);
}

fn desc(shape: &[u32]) -> OperandDescriptor {
    OperandDescriptor::new(DataType::Float32, shape.to_vec())
}

fn output_shape(kind: PoolKind, options: Pool2dOptions, input: &OperandDescriptor) -> webnn_wgpu::Result<Vec<u32>> {
    Ok(ops::validate(&Op::Pool2d(kind, options), &[input])?.remove(0).shape)
}

#[test]
fn output_shapes() {
    let input = desc(&[1, 3, 7, 5]);
    let o = Pool2dOptions {
        window_dimensions: Some(vec![3, 2]),
        padding: Some(vec![1, 0, 0, 1]),
        strides: Some(vec![2, 2]),
        ..Default::default()
    };
    // Height 1 + (7 - 3 + 1) / 2 = 3.5, width 1 + (5 - 2 + 1) / 2 = 3.
    assert_eq!(output_shape(PoolKind::Max, o.clone(), &input).unwrap(), vec![1, 3, 3, 3]);
    let ceil = Pool2dOptions { output_shape_rounding: RoundingType::Ceil, ..o.clone() };
    assert_eq!(output_shape(PoolKind::Max, ceil, &input).unwrap(), vec![1, 3, 4, 3]);
    // outputSizes override the rounding.
    let sizes = Pool2dOptions { output_sizes: Some(vec![4, 3]), ..o.clone() };
    assert_eq!(output_shape(PoolKind::Average, sizes, &input).unwrap(), vec![1, 3, 4, 3]);
    let nhwc = Pool2dOptions { layout: InputLayout::Nhwc, ..Default::default() };
    assert_eq!(output_shape(PoolKind::L2, nhwc, &desc(&[2, 7, 5, 3])).unwrap(), vec![2, 1, 1, 3]);
}

#[test]
fn validation() {
    let input = desc(&[1, 3, 7, 5]);
    let base = Pool2dOptions { window_dimensions: Some(vec![3, 3]), ..Default::default() };
    let with = |f: &dyn Fn(&mut Pool2dOptions)| {
        let mut o = base.clone();
        f(&mut o);
        o
    };
    let cases: Vec<(&str, Pool2dOptions, OperandDescriptor)> = vec![
        ("rank 3", base.clone(), desc(&[3, 7, 5])),
        ("window size", with(&|o| o.window_dimensions = Some(vec![3])), input.clone()),
        ("zero window", with(&|o| o.window_dimensions = Some(vec![0, 3])), input.clone()),
        ("padding size", with(&|o| o.padding = Some(vec![1, 1])), input.clone()),
        ("strides size", with(&|o| o.strides = Some(vec![1, 1, 1])), input.clone()),
        ("zero stride", with(&|o| o.strides = Some(vec![1, 0])), input.clone()),
        ("outputSizes size", with(&|o| o.output_sizes = Some(vec![5])), input.clone()),
        ("outputSizes neither floor nor ceil", with(&|o| o.output_sizes = Some(vec![4, 3])), input.clone()),
        (
            "outputSizes mixing floor and ceil",
            with(&|o| {
                o.strides = Some(vec![2, 2]);
                o.padding = Some(vec![0, 1, 0, 1]);
                o.output_sizes = Some(vec![3, 3]);
            }),
            input.clone(),
        ),
        ("dilations size", with(&|o| o.dilations = Some(vec![1])), input.clone()),
        ("zero dilation", with(&|o| o.dilations = Some(vec![0, 1])), input.clone()),
        ("window larger than input", with(&|o| o.window_dimensions = Some(vec![8, 1])), input.clone()),
        ("dilated window larger than input", with(&|o| o.dilations = Some(vec![1, 3])), input.clone()),
    ];
    for (what, options, input) in cases {
        for kind in PoolKind::ALL {
            let r = ops::validate(&Op::Pool2d(kind, options.clone()), &[&input]);
            assert!(matches!(r, Err(Error::Type(_))), "{what} {kind:?}: {r:?}");
        }
    }
    // averagePool2d and l2Pool2d take floats only; maxPool2d any stored type.
    let int = OperandDescriptor::new(DataType::Int32, vec![1, 1, 2, 2]);
    for kind in [PoolKind::Average, PoolKind::L2] {
        assert!(matches!(ops::validate(&Op::Pool2d(kind, Pool2dOptions::default()), &[&int]), Err(Error::Type(_))));
    }
    assert!(ops::validate(&Op::Pool2d(PoolKind::Max, Pool2dOptions::default()), &[&int]).is_ok());
}

/// Shapes spanning many workgroups.
#[test]
fn larger_shapes() {
    let ctx = context();
    let mut rng = Rng::new(22);
    for kind in PoolKind::ALL {
        for data_type in [DataType::Float32, DataType::Float16] {
            let input = rng.tensor(data_type, &[2, 6, 31, 29], -4.0, 4.0);
            let options = Pool2dOptions {
                window_dimensions: Some(vec![3, 3]),
                padding: Some(vec![1, 1, 1, 1]),
                strides: Some(vec![2, 2]),
                output_shape_rounding: RoundingType::Ceil,
                ..Default::default()
            };
            let (ulp, abs) = if data_type == DataType::Float16 { (2, 0.0) } else { (4, 1e-6) };
            check_op(&ctx, &Op::Pool2d(kind, options), &[input], ulp, abs);
        }
    }
}

/// maxPool2d with a stride and end padding of 2^31 - 1, rounded up: output 2's window reaches
/// `2 * stride + 2 = 2^32`, past the input, which the kernel's i32 arithmetic wraps to column 0.
/// build() rejects it with OperationError rather than compute a wrong result.
#[test]
fn pool2d_beyond_the_kernels_32_bit_indices_is_not_supported() {
    let ctx = context();
    let big = i32::MAX as u32;
    let options = Pool2dOptions {
        window_dimensions: Some(vec![1, 3]),
        padding: Some(vec![0, 0, 0, big]),
        strides: Some(vec![1, big]),
        output_shape_rounding: RoundingType::Ceil,
        ..Pool2dOptions::default()
    };
    let input = OperandDescriptor::new(DataType::Float32, vec![1, 1, 1, 8]);
    let op = Op::Pool2d(PoolKind::Max, options);
    assert_eq!(ops::validate(&op, &[&input]).unwrap()[0].shape, vec![1, 1, 1, 3]);
    let x = HostTensor::new(input, (1..=8).map(|v| v as f64).collect()).unwrap();
    let e = run_op(&ctx, &op, &[x], &[false]).unwrap_err();
    assert_eq!(e.name(), "OperationError", "{e}");
}
