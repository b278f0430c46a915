//! resample2d: the GPU against the float64 reference over random shapes, axes, scales and
//! sizes in both modes; the spec's worked example; and the validation errors.
#![cfg(not(target_arch = "wasm32"))] // native: `wasm-pack test` builds every test target for wasm32

mod common;
use common::*;
use webnn_wgpu::graph::{DataType, OperandDescriptor};
use webnn_wgpu::ops::resample2d::*;
use webnn_wgpu::ops::{self, HostTensor, Op};
use webnn_wgpu::Error;

#[test]
fn resample2d_matches_reference() {
    let ctx = context();
    let mut rng = Rng::new(41);
    for data_type in [DataType::Float32, DataType::Float16] {
        for mode in [InterpolationMode::NearestNeighbor, InterpolationMode::Linear] {
            for case in 0..12 {
                let shape = rng.shape(4, 7);
                let axes = match rng.below(4) {
                    0 => None,
                    _ => {
                        let a = rng.below(4);
                        let b = (a + 1 + rng.below(3)) % 4;
                        Some(vec![a, b])
                    }
                };
                let (scales, sizes) = if case % 2 == 0 {
                    let pick = |r: &mut Rng| [0.5, 1.0, 1.5, 2.0, 3.0, 0.75, 1.3][r.below(7) as usize];
                    (Some(vec![pick(&mut rng), pick(&mut rng)]), None)
                } else {
                    (None, Some(vec![1 + rng.below(12), 1 + rng.below(12)]))
                };
                let options = Resample2dOptions { mode, scales, sizes, axes };
                let input = rng.tensor(data_type, &shape, -4.0, 4.0);
                let op = Op::Resample2d(options.clone());
                let descriptors = [&input.descriptor];
                // A scale can round an axis down to size 0: a validation error, skipped here.
                if ops::validate(&op, &descriptors).is_err() {
                    continue;
                }
                let (ulp, abs) = if data_type == DataType::Float16 { (2, 2e-3) } else { (4, 2e-6) };
                check_op(&ctx, &op, &[input], ulp, abs);
            }
        }
    }
}

/// The spec's example: linear upsampling of a [4, 4] tensor to [8, 8].
#[test]
fn resample2d_spec_example() {
    let ctx = context();
    let rows = [0.0, 0.0, 12.0, 12.0];
    let data: Vec<f64> = rows.iter().flat_map(|&r| (0..4).map(move |c| r + c as f64)).collect();
    let input = HostTensor::new(OperandDescriptor::new(DataType::Float32, vec![1, 1, 4, 4]), data).unwrap();
    let options = Resample2dOptions { mode: InterpolationMode::Linear, sizes: Some(vec![8, 8]), ..Default::default() };
    let out = run_op(&ctx, &Op::Resample2d(options), &[input], &[false]).unwrap().remove(0);
    let columns = [0.0, 0.25, 0.75, 1.25, 1.75, 2.25, 2.75, 3.0];
    let starts = [0.0, 0.0, 0.0, 3.0, 9.0, 12.0, 12.0, 12.0];
    let expected: Vec<f64> = starts.iter().flat_map(|&s| columns.iter().map(move |&c| s + c)).collect();
    assert_eq!(out.descriptor.shape, vec![1, 1, 8, 8]);
    assert_eq!(out.data, expected);
}

/// Nearest-neighbor by hand: downsampling hits ties (`inputCoordinate = 2o + 0.5`), which the
/// spec's `ceil(x - 0.5)` rounds down; upsampling repeats each element.
#[test]
fn resample2d_nearest_by_hand() {
    let ctx = context();
    let input = HostTensor::new(
        OperandDescriptor::new(DataType::Float32, vec![1, 1, 1, 6]),
        (0..6).map(|v| v as f64).collect(),
    )
    .unwrap();
    // Downsampling 6 -> 3: ceil(2o + 0.5 - 0.5) = 2o.
    let down = Resample2dOptions { sizes: Some(vec![1, 3]), ..Default::default() };
    let out = run_op(&ctx, &Op::Resample2d(down), &[input.clone()], &[false]).unwrap().remove(0);
    assert_eq!(out.data, vec![0.0, 2.0, 4.0]);
    // Upsampling 6 -> 12 with scales: each element twice.
    let up = Resample2dOptions { scales: Some(vec![1.0, 2.0]), ..Default::default() };
    let out = run_op(&ctx, &Op::Resample2d(up), &[input], &[false]).unwrap().remove(0);
    assert_eq!(out.data, (0..12).map(|v| (v / 2) as f64).collect::<Vec<_>>());
}

#[test]
fn resample2d_validation() {
    let input = OperandDescriptor::new(DataType::Float32, vec![1, 2, 4, 4]);
    let ok = |o: Resample2dOptions| ops::validate(&Op::Resample2d(o), &[&input]);
    assert_eq!(ok(Resample2dOptions::default()).unwrap()[0].shape, vec![1, 2, 4, 4]);
    let o = Resample2dOptions { scales: Some(vec![0.5, 2.0]), axes: Some(vec![3, 1]), ..Default::default() };
    assert_eq!(ok(o).unwrap()[0].shape, vec![1, 4, 4, 2]);
    // sizes wins over scales.
    let o = Resample2dOptions { scales: Some(vec![3.0, 3.0]), sizes: Some(vec![5, 7]), ..Default::default() };
    assert_eq!(ok(o).unwrap()[0].shape, vec![1, 2, 5, 7]);
    let bad = |o: Resample2dOptions, d: &OperandDescriptor| matches!(ops::validate(&Op::Resample2d(o), &[d]), Err(Error::Type(_)));
    let d = Resample2dOptions::default;
    let cases: Vec<(&str, Resample2dOptions, OperandDescriptor)> = vec![
        ("rank 3", d(), OperandDescriptor::new(DataType::Float32, vec![2, 4, 4])),
        ("int32 input", d(), OperandDescriptor::new(DataType::Int32, vec![1, 2, 4, 4])),
        ("one scale", Resample2dOptions { scales: Some(vec![2.0]), ..d() }, input.clone()),
        ("zero scale", Resample2dOptions { scales: Some(vec![0.0, 1.0]), ..d() }, input.clone()),
        ("negative scale", Resample2dOptions { scales: Some(vec![1.0, -2.0]), ..d() }, input.clone()),
        ("three sizes", Resample2dOptions { sizes: Some(vec![2, 2, 2]), ..d() }, input.clone()),
        ("zero size", Resample2dOptions { sizes: Some(vec![0, 2]), ..d() }, input.clone()),
        ("duplicate axes", Resample2dOptions { axes: Some(vec![2, 2]), ..d() }, input.clone()),
        ("axis out of range", Resample2dOptions { axes: Some(vec![2, 4]), ..d() }, input.clone()),
        ("one axis", Resample2dOptions { axes: Some(vec![2]), ..d() }, input.clone()),
        ("scaled to zero", Resample2dOptions { scales: Some(vec![0.1, 1.0]), ..d() }, input.clone()),
        ("scaled too large", Resample2dOptions { scales: Some(vec![1e10, 1.0]), ..d() }, input.clone()),
    ];
    for (what, o, desc) in cases {
        assert!(bad(o, &desc), "{what}");
    }
}

/// Shapes where `(2 * outputCoordinate + 1) * inputSize` passes 2^32 (one long axis, the others
/// 1): the kernel's coordinates must still be the spec's. Input element `i` holds `i`, so
/// nearest-neighbor returns the input coordinate it picked and linear returns the coordinate
/// itself; both are checked at probed positions against the spec's formula in float64.
#[test]
fn resample2d_long_axes_past_32_bit_products() {
    let ctx = context();
    let max_elements = ctx.max_tensor_byte_length() / 4;
    for (input_size, output_size) in [(4096u32, 1u32 << 20), (1 << 21, 3000), (65536, 1 << 22)] {
        if input_size.max(output_size) as u64 > max_elements {
            panic!("maxTensorByteLength {} is too small for {input_size} -> {output_size}", max_elements * 4);
        }
        let input = HostTensor::new(
            OperandDescriptor::new(DataType::Float32, vec![1, 1, 1, input_size]),
            (0..input_size).map(|v| v as f64).collect(),
        )
        .unwrap();
        let (i, o) = (input_size as f64, output_size as f64);
        // The spec's inputCoordinate with scale = outputSize / inputSize.
        let coordinate = |x: u32| ((x as f64 + 0.5) / (o / i) - 0.5).clamp(0.0, i - 1.0);
        let last = output_size - 1;
        let mut probes = vec![0, 1, last / 3, last / 2, last / 2 + 1, last - 1, last];
        probes.extend((1..16u64).map(|k| (last as u64 * k / 16 + k) as u32));
        for mode in [InterpolationMode::NearestNeighbor, InterpolationMode::Linear] {
            let options = Resample2dOptions { mode, sizes: Some(vec![1, output_size]), ..Default::default() };
            let out = run_op(&ctx, &Op::Resample2d(options), &[input.clone()], &[false]).unwrap().remove(0);
            for &x in &probes {
                let c = coordinate(x);
                let (want, tolerance) = match mode {
                    InterpolationMode::NearestNeighbor => ((c - 0.5).ceil().clamp(0.0, i - 1.0), 0.0),
                    InterpolationMode::Linear => (c, c * 2e-7 + 1e-6),
                };
                let got = out.data[x as usize];
                assert!(
                    (got - want).abs() <= tolerance,
                    "{mode:?} {input_size} -> {output_size}: output {x} is {got}, the spec gives {want}"
                );
            }
        }
    }
}
