//! conv2d and convTranspose2d: the GPU against the float64 reference over random shapes and
//! options (every layout, groups and depthwise, strides, dilations, padding, outputPadding and
//! outputSizes, bias), checks of the reference itself that do not reuse its formulas (layouts
//! are transposes of each other; convTranspose2d is the adjoint of conv2d), and the spec's
//! validation errors.
#![cfg(not(target_arch = "wasm32"))] // native: `wasm-pack test` builds every test target for wasm32

mod common;
use common::*;
use webnn_wgpu::graph::{DataType, OperandDescriptor};
use webnn_wgpu::ops::conv2d::*;
use webnn_wgpu::ops::{self, HostTensor, Op};
use webnn_wgpu::Error;

const CONV2D_FILTER_LAYOUTS: [Conv2dFilterLayout; 4] =
    [Conv2dFilterLayout::Oihw, Conv2dFilterLayout::Hwio, Conv2dFilterLayout::Ohwi, Conv2dFilterLayout::Ihwo];
const TRANSPOSE_FILTER_LAYOUTS: [ConvTranspose2dFilterLayout; 3] =
    [ConvTranspose2dFilterLayout::Iohw, ConvTranspose2dFilterLayout::Hwoi, ConvTranspose2dFilterLayout::Ohwi];
const INPUT_LAYOUTS: [InputLayout; 2] = [InputLayout::Nchw, InputLayout::Nhwc];

/// `tensor` (stored in `from`) transposed to `to`, both spelled with the same letters.
fn relayout(tensor: &HostTensor, from: &str, to: &str) -> HostTensor {
    let permutation: Vec<u32> = to.chars().map(|a| from.find(a).unwrap() as u32).collect();
    let op = Op::Transpose { permutation: Some(permutation) };
    reference_op(&op, &[tensor.clone()]).unwrap().remove(0)
}

fn tolerance(data_type: DataType, terms: u32) -> (u64, f64) {
    match data_type {
        DataType::Float16 => (2, 1e-3),
        _ => (4 * terms as u64, 2e-6 * terms as f64),
    }
}

/// A random conv2d: canonical tensors (nchw input, oihw filter) and options with random layouts.
struct Conv2dCase {
    input: HostTensor,
    filter: HostTensor,
    bias: Option<HostTensor>,
    options: Conv2dOptions,
}

fn random_conv2d(rng: &mut Rng, data_type: DataType) -> Conv2dCase {
    let groups = match rng.below(3) {
        0 => 1,
        1 => 2,
        _ => 1 + rng.below(4),
    };
    let depthwise = rng.below(3) == 0;
    let input_per_group = if depthwise { 1 } else { 1 + rng.below(3) };
    let output_per_group = if depthwise { 1 } else { 1 + rng.below(3) };
    let (ic, oc) = (groups * input_per_group, groups * output_per_group);
    let kernel = [1 + rng.below(3), 1 + rng.below(3)];
    let dilations = [1 + rng.below(2), 1 + rng.below(3)];
    let strides = [1 + rng.below(3), 1 + rng.below(2)];
    let padding: Vec<u32> = (0..4).map(|_| rng.below(3)).collect();
    // Big enough for at least one output row and column.
    let mut size = |k: usize| (kernel[k] - 1) * dilations[k] + 1 + rng.below(6);
    let (h, w) = (size(0), size(1));
    let batches = 1 + rng.below(2);
    let input = rng.tensor(data_type, &[batches, ic, h, w], -1.0, 1.0);
    let filter = rng.tensor(data_type, &[oc, input_per_group, kernel[0], kernel[1]], -1.0, 1.0);
    let bias = (rng.below(2) == 0).then(|| rng.tensor(data_type, &[oc], -1.0, 1.0));
    let options = Conv2dOptions {
        padding: Some(padding),
        strides: Some(strides.to_vec()),
        dilations: Some(dilations.to_vec()),
        groups,
        input_layout: INPUT_LAYOUTS[rng.below(2) as usize],
        filter_layout: CONV2D_FILTER_LAYOUTS[rng.below(4) as usize],
        has_bias: bias.is_some(),
    };
    Conv2dCase { input, filter, bias, options }
}

impl Conv2dCase {
    /// The operator's inputs in its layouts.
    fn inputs(&self) -> Vec<HostTensor> {
        let mut inputs = vec![
            relayout(&self.input, "nchw", self.options.input_layout.name()),
            relayout(&self.filter, "oihw", self.options.filter_layout.name()),
        ];
        inputs.extend(self.bias.clone());
        inputs
    }
}

#[test]
fn conv2d_matches_reference() {
    let ctx = context();
    let mut rng = Rng::new(11);
    for data_type in [DataType::Float32, DataType::Float16] {
        for _ in 0..24 {
            let case = random_conv2d(&mut rng, data_type);
            let terms = case.filter.descriptor.element_count() as u32 / case.filter.shape()[0];
            let (ulp, abs) = tolerance(data_type, terms);
            check_op(&ctx, &Op::Conv2d(case.options.clone()), &case.inputs(), ulp, abs);
        }
    }
}

/// Every layout pair gives the canonical (nchw, oihw) result, transposed.
#[test]
fn conv2d_reference_layouts_are_transposes() {
    let mut rng = Rng::new(12);
    for _ in 0..20 {
        let mut case = random_conv2d(&mut rng, DataType::Float32);
        case.options.input_layout = InputLayout::Nchw;
        case.options.filter_layout = Conv2dFilterLayout::Oihw;
        let canonical = reference_op(&Op::Conv2d(case.options.clone()), &case.inputs()).unwrap().remove(0);
        for input_layout in INPUT_LAYOUTS {
            for filter_layout in CONV2D_FILTER_LAYOUTS {
                case.options.input_layout = input_layout;
                case.options.filter_layout = filter_layout;
                let out = reference_op(&Op::Conv2d(case.options.clone()), &case.inputs()).unwrap().remove(0);
                assert_eq!(
                    relayout(&out, input_layout.name(), "nchw"),
                    canonical,
                    "{input_layout:?} {filter_layout:?}"
                );
            }
        }
    }
}

fn dot(a: &HostTensor, b: &HostTensor) -> f64 {
    a.data.iter().zip(&b.data).map(|(x, y)| x * y).sum()
}

/// `<conv2d(x, W), y> == <x, convTranspose2d(y, W)>`: an oihw conv2d filter read as iohw is the
/// filter of the adjoint, with the same groups, strides, dilations and padding, and outputSizes
/// giving back the input size.
#[test]
fn conv_transpose2d_reference_is_the_adjoint_of_conv2d() {
    let mut rng = Rng::new(13);
    for _ in 0..30 {
        let mut case = random_conv2d(&mut rng, DataType::Float32);
        case.options.input_layout = InputLayout::Nchw;
        case.options.filter_layout = Conv2dFilterLayout::Oihw;
        case.options.has_bias = false;
        case.bias = None;
        let y_shape = reference_op(&Op::Conv2d(case.options.clone()), &case.inputs()).unwrap().remove(0);
        let y = rng.tensor(DataType::Float32, y_shape.shape(), -1.0, 1.0);
        let conv = reference_op(&Op::Conv2d(case.options.clone()), &case.inputs()).unwrap().remove(0);
        let transpose = ConvTranspose2dOptions {
            padding: case.options.padding.clone(),
            strides: case.options.strides.clone(),
            dilations: case.options.dilations.clone(),
            output_sizes: Some(case.input.shape()[2..].to_vec()),
            groups: case.options.groups,
            ..ConvTranspose2dOptions::default()
        };
        let back = reference_op(&Op::ConvTranspose2d(transpose), &[y.clone(), case.filter.clone()]).unwrap().remove(0);
        let (lhs, rhs) = (dot(&conv, &y), dot(&case.input, &back));
        // Both references round their outputs to float32.
        let scale: f64 = y.data.len() as f64 + case.input.data.len() as f64;
        assert!((lhs - rhs).abs() <= 1e-6 * scale, "{lhs} vs {rhs}");
    }
}

#[test]
fn conv_transpose2d_matches_reference() {
    let ctx = context();
    let mut rng = Rng::new(14);
    for data_type in [DataType::Float32, DataType::Float16] {
        for _ in 0..24 {
            let groups = 1 + rng.below(3);
            let depthwise = rng.below(3) == 0;
            let input_per_group = if depthwise { 1 } else { 1 + rng.below(3) };
            let output_per_group = if depthwise { 1 } else { 1 + rng.below(3) };
            let ic = groups * input_per_group;
            let kernel = [1 + rng.below(3), 1 + rng.below(3)];
            let dilations = [1 + rng.below(2), 1 + rng.below(3)];
            let strides = [1 + rng.below(3), 1 + rng.below(3)];
            let (h, w) = (1 + rng.below(4), 1 + rng.below(4));
            let span = |k: usize, size: u32| (size - 1) * strides[k] + (kernel[k] - 1) * dilations[k] + 1;
            // Padding keeps at least one output row and column.
            let pad = |rng: &mut Rng, span: u32| -> [u32; 2] {
                let total = rng.below(span.min(4));
                let begin = rng.below(total + 1);
                [begin, total - begin]
            };
            let (ph, pw) = (pad(&mut rng, span(0, h)), pad(&mut rng, span(1, w)));
            let mut options = ConvTranspose2dOptions {
                padding: Some(vec![ph[0], ph[1], pw[0], pw[1]]),
                strides: Some(strides.to_vec()),
                dilations: Some(dilations.to_vec()),
                groups,
                input_layout: INPUT_LAYOUTS[rng.below(2) as usize],
                filter_layout: TRANSPOSE_FILTER_LAYOUTS[rng.below(3) as usize],
                ..ConvTranspose2dOptions::default()
            };
            match rng.below(3) {
                0 => options.output_padding = Some(vec![rng.below(strides[0]), rng.below(strides[1])]),
                1 => {
                    let calculated = [span(0, h) - ph[0] - ph[1], span(1, w) - pw[0] - pw[1]];
                    options.output_sizes =
                        Some(vec![calculated[0] + rng.below(strides[0]), calculated[1] + rng.below(strides[1])]);
                }
                _ => {}
            }
            let batches = 1 + rng.below(2);
            let input = rng.tensor(data_type, &[batches, ic, h, w], -1.0, 1.0);
            let filter = rng.tensor(data_type, &[ic, output_per_group, kernel[0], kernel[1]], -1.0, 1.0);
            let mut inputs = vec![
                relayout(&input, "nchw", options.input_layout.name()),
                relayout(&filter, "iohw", options.filter_layout.name()),
            ];
            if rng.below(2) == 0 {
                options.has_bias = true;
                inputs.push(rng.tensor(data_type, &[groups * output_per_group], -1.0, 1.0));
            }
            let (ulp, abs) = tolerance(data_type, input_per_group * kernel[0] * kernel[1]);
            check_op(&ctx, &Op::ConvTranspose2d(options), &inputs, ulp, abs);
        }
    }
}

/// A 1x1x3x3 input convolved with a 2x2 all-ones filter sums each 2x2 block; the transpose
/// spreads each input element over a 2x2 block.
#[test]
fn small_cases_by_hand() {
    let ctx = context();
    let input =
        HostTensor::new(OperandDescriptor::new(DataType::Float32, vec![1, 1, 3, 3]), (1..=9).map(f64::from).collect())
            .unwrap();
    let ones = HostTensor::new(OperandDescriptor::new(DataType::Float32, vec![1, 1, 2, 2]), vec![1.0; 4]).unwrap();
    let out =
        run_op(&ctx, &Op::Conv2d(Conv2dOptions::default()), &[input.clone(), ones.clone()], &[false, true]).unwrap();
    assert_eq!(out[0].data, vec![12.0, 16.0, 24.0, 28.0]);
    let padded =
        Conv2dOptions { padding: Some(vec![1, 1, 1, 1]), strides: Some(vec![2, 2]), ..Conv2dOptions::default() };
    let out = run_op(&ctx, &Op::Conv2d(padded), &[input.clone(), ones.clone()], &[false, true]).unwrap();
    assert_eq!(out[0].data, vec![1.0, 5.0, 11.0, 28.0]);
    let small =
        HostTensor::new(OperandDescriptor::new(DataType::Float32, vec![1, 1, 2, 2]), vec![1.0, 2.0, 3.0, 4.0]).unwrap();
    let out =
        run_op(&ctx, &Op::ConvTranspose2d(ConvTranspose2dOptions::default()), &[small, ones], &[false, true]).unwrap();
    assert_eq!(out[0].data, vec![1.0, 3.0, 2.0, 4.0, 10.0, 6.0, 3.0, 7.0, 4.0]);
}

fn desc(shape: &[u32]) -> OperandDescriptor {
    OperandDescriptor::new(DataType::Float32, shape.to_vec())
}

fn type_error(op: Op, inputs: &[OperandDescriptor]) -> bool {
    let refs: Vec<&OperandDescriptor> = inputs.iter().collect();
    matches!(ops::validate(&op, &refs), Err(Error::Type(_)))
}

#[test]
fn conv2d_validation() {
    let (input, filter) = (desc(&[1, 4, 5, 5]), desc(&[6, 2, 3, 3]));
    let ok = Conv2dOptions { groups: 2, ..Conv2dOptions::default() };
    let refs = [&input, &filter];
    assert_eq!(ops::validate(&Op::Conv2d(ok.clone()), &refs).unwrap()[0].shape, vec![1, 6, 3, 3]);
    let with = |f: &dyn Fn(&mut Conv2dOptions)| {
        let mut o = ok.clone();
        f(&mut o);
        Op::Conv2d(o)
    };
    let cases: Vec<(&str, Op, Vec<OperandDescriptor>)> = vec![
        ("input rank", Op::Conv2d(ok.clone()), vec![desc(&[4, 5, 5]), filter.clone()]),
        ("filter rank", Op::Conv2d(ok.clone()), vec![input.clone(), desc(&[6, 2, 3])]),
        (
            "int input",
            Op::Conv2d(ok.clone()),
            vec![OperandDescriptor::new(DataType::Int32, vec![1, 4, 5, 5]), filter.clone()],
        ),
        (
            "filter type",
            Op::Conv2d(ok.clone()),
            vec![input.clone(), OperandDescriptor::new(DataType::Float16, vec![6, 2, 3, 3])],
        ),
        ("padding size", with(&|o| o.padding = Some(vec![1, 1])), vec![input.clone(), filter.clone()]),
        ("strides size", with(&|o| o.strides = Some(vec![1])), vec![input.clone(), filter.clone()]),
        ("zero stride", with(&|o| o.strides = Some(vec![0, 1])), vec![input.clone(), filter.clone()]),
        ("dilations size", with(&|o| o.dilations = Some(vec![1, 1, 1])), vec![input.clone(), filter.clone()]),
        ("zero dilation", with(&|o| o.dilations = Some(vec![1, 0])), vec![input.clone(), filter.clone()]),
        ("zero groups", with(&|o| o.groups = 0), vec![input.clone(), filter.clone()]),
        ("groups divide input channels", with(&|o| o.groups = 3), vec![input.clone(), desc(&[6, 1, 3, 3])]),
        ("filter input channels", Op::Conv2d(ok.clone()), vec![input.clone(), desc(&[6, 4, 3, 3])]),
        ("groups divide output channels", Op::Conv2d(ok.clone()), vec![input.clone(), desc(&[5, 2, 3, 3])]),
        ("bias shape", with(&|o| o.has_bias = true), vec![input.clone(), filter.clone(), desc(&[5])]),
        (
            "bias type",
            with(&|o| o.has_bias = true),
            vec![input.clone(), filter.clone(), OperandDescriptor::new(DataType::Float16, vec![6])],
        ),
        ("window larger than input", Op::Conv2d(ok.clone()), vec![desc(&[1, 4, 2, 5]), filter.clone()]),
        (
            "dilated window larger than input",
            with(&|o| o.dilations = Some(vec![3, 1])),
            vec![input.clone(), filter.clone()],
        ),
        ("nhwc channels", with(&|o| o.input_layout = InputLayout::Nhwc), vec![input.clone(), filter.clone()]),
    ];
    for (what, op, inputs) in cases {
        assert!(type_error(op, &inputs), "{what}");
    }
    let nhwc_hwio = Conv2dOptions {
        input_layout: InputLayout::Nhwc,
        filter_layout: Conv2dFilterLayout::Hwio,
        padding: Some(vec![1, 1, 0, 0]),
        strides: Some(vec![2, 1]),
        ..Conv2dOptions::default()
    };
    let out = ops::validate(&Op::Conv2d(nhwc_hwio), &[&desc(&[2, 7, 5, 3]), &desc(&[3, 3, 3, 8])]).unwrap();
    assert_eq!(out[0].shape, vec![2, 4, 3, 8]);
    // A missing bias operand is an input-count error.
    assert!(type_error(with(&|o| o.has_bias = true), &[input.clone(), filter.clone()]));
}

#[test]
fn conv_transpose2d_validation() {
    let (input, filter) = (desc(&[1, 4, 3, 3]), desc(&[4, 3, 3, 3]));
    let ok = ConvTranspose2dOptions { groups: 2, strides: Some(vec![2, 2]), ..ConvTranspose2dOptions::default() };
    assert_eq!(ops::validate(&Op::ConvTranspose2d(ok.clone()), &[&input, &filter]).unwrap()[0].shape, vec![1, 6, 7, 7]);
    let with = |f: &dyn Fn(&mut ConvTranspose2dOptions)| {
        let mut o = ok.clone();
        f(&mut o);
        Op::ConvTranspose2d(o)
    };
    let out = ops::validate(&with(&|o| o.output_padding = Some(vec![1, 0])), &[&input, &filter]).unwrap();
    assert_eq!(out[0].shape, vec![1, 6, 8, 7]);
    let out = ops::validate(&with(&|o| o.output_sizes = Some(vec![8, 8])), &[&input, &filter]).unwrap();
    assert_eq!(out[0].shape, vec![1, 6, 8, 8]);
    // outputPadding is ignored (not checked against strides) when outputSizes is given.
    let out = ops::validate(
        &with(&|o| {
            o.output_sizes = Some(vec![7, 8]);
            o.output_padding = Some(vec![5, 5]);
        }),
        &[&input, &filter],
    )
    .unwrap();
    assert_eq!(out[0].shape, vec![1, 6, 7, 8]);
    let cases: Vec<(&str, Op, Vec<OperandDescriptor>)> = vec![
        ("input rank", Op::ConvTranspose2d(ok.clone()), vec![desc(&[4, 3, 3]), filter.clone()]),
        ("filter rank", Op::ConvTranspose2d(ok.clone()), vec![input.clone(), desc(&[4, 3, 3, 3, 1])]),
        (
            "filter type",
            Op::ConvTranspose2d(ok.clone()),
            vec![input.clone(), OperandDescriptor::new(DataType::Float16, vec![4, 3, 3, 3])],
        ),
        ("padding size", with(&|o| o.padding = Some(vec![0; 3])), vec![input.clone(), filter.clone()]),
        ("zero stride", with(&|o| o.strides = Some(vec![2, 0])), vec![input.clone(), filter.clone()]),
        ("zero dilation", with(&|o| o.dilations = Some(vec![0, 1])), vec![input.clone(), filter.clone()]),
        ("outputPadding size", with(&|o| o.output_padding = Some(vec![1])), vec![input.clone(), filter.clone()]),
        (
            "outputPadding not below strides",
            with(&|o| o.output_padding = Some(vec![2, 0])),
            vec![input.clone(), filter.clone()],
        ),
        ("outputSizes size", with(&|o| o.output_sizes = Some(vec![7])), vec![input.clone(), filter.clone()]),
        ("outputSizes too small", with(&|o| o.output_sizes = Some(vec![6, 7])), vec![input.clone(), filter.clone()]),
        ("outputSizes too large", with(&|o| o.output_sizes = Some(vec![7, 9])), vec![input.clone(), filter.clone()]),
        ("zero groups", with(&|o| o.groups = 0), vec![input.clone(), filter.clone()]),
        ("filter input channels", Op::ConvTranspose2d(ok.clone()), vec![input.clone(), desc(&[2, 3, 3, 3])]),
        ("bias shape", with(&|o| o.has_bias = true), vec![input.clone(), filter.clone(), desc(&[3])]),
        (
            "padding removes the output",
            with(&|o| o.padding = Some(vec![4, 4, 0, 0])),
            vec![input.clone(), filter.clone()],
        ),
    ];
    for (what, op, inputs) in cases {
        assert!(type_error(op, &inputs), "{what}");
    }
}

#[test]
fn limits_list_conv_operands() {
    for name in ["conv2d", "convTranspose2d"] {
        let l = ops::limits::of(name).unwrap();
        let names: Vec<&str> = l.operands.iter().map(|t| t.name).collect();
        assert_eq!(names, ["input", "filter", "bias", "output"]);
        assert_eq!(l.operands[0].data_types, [DataType::Float32, DataType::Float16]);
    }
}

/// Shapes spanning many workgroups, in float32 and float16.
#[test]
fn larger_shapes() {
    let ctx = context();
    let mut rng = Rng::new(15);
    for data_type in [DataType::Float32, DataType::Float16] {
        let input = rng.tensor(data_type, &[2, 24, 20, 8], -1.0, 1.0);
        let filter = rng.tensor(data_type, &[3, 3, 8, 12], -1.0, 1.0);
        let options = Conv2dOptions {
            input_layout: InputLayout::Nhwc,
            filter_layout: Conv2dFilterLayout::Hwio,
            padding: Some(vec![1, 1, 1, 1]),
            ..Conv2dOptions::default()
        };
        let (ulp, abs) = tolerance(data_type, 72);
        check_op(&ctx, &Op::Conv2d(options), &[input.clone(), filter], ulp, abs);
        let filter = rng.tensor(data_type, &[6, 3, 3, 8], -1.0, 1.0);
        let options = ConvTranspose2dOptions {
            input_layout: InputLayout::Nhwc,
            filter_layout: ConvTranspose2dFilterLayout::Ohwi,
            strides: Some(vec![2, 2]),
            groups: 2,
            ..ConvTranspose2dOptions::default()
        };
        let (ulp, abs) = tolerance(data_type, 36);
        check_op(&ctx, &Op::ConvTranspose2d(options), &[input, filter], ulp, abs);
    }
}

/// convTranspose2d with a stride of 2^20 and paddings near 2^31 (a valid 16-wide output): the
/// kernel's `o + padding - k * dilation` would pass i32 and read no input where output 1 reads
/// input 2048, so build() rejects it with OperationError rather than compute a wrong result.
#[test]
fn conv_transpose2d_beyond_the_kernels_32_bit_indices_is_not_supported() {
    let ctx = context();
    let (stride, begin) = (1u32 << 20, i32::MAX as u32);
    // outputSize = (4096 - 1) * stride + 1 - begin - end = 16.
    let end = (4095u64 * stride as u64 + 1 - begin as u64 - 16) as u32;
    let options = ConvTranspose2dOptions {
        padding: Some(vec![0, 0, begin, end]),
        strides: Some(vec![1, stride]),
        ..ConvTranspose2dOptions::default()
    };
    let input = OperandDescriptor::new(DataType::Float32, vec![1, 1, 1, 4096]);
    let filter = OperandDescriptor::new(DataType::Float32, vec![1, 1, 1, 1]);
    let op = Op::ConvTranspose2d(options);
    assert_eq!(ops::validate(&op, &[&input, &filter]).unwrap()[0].shape, vec![1, 1, 1, 16]);
    let x = HostTensor::new(input, (0..4096).map(|v| v as f64).collect()).unwrap();
    let w = HostTensor::new(filter, vec![1.0]).unwrap();
    let e = run_op(&ctx, &op, &[x, w], &[false, true]).unwrap_err();
    assert_eq!(e.name(), "OperationError", "{e}");
}

/// 1x1 filters without padding take the pointwise kernel (no window loops): every input and
/// filter layout, groups, strides and dilations, with and without bias, batch 2.
#[test]
fn pointwise_conv2d_matches_reference() {
    let ctx = context();
    let mut rng = Rng::new(16);
    for data_type in [DataType::Float32, DataType::Float16] {
        for (i, &filter_layout) in CONV2D_FILTER_LAYOUTS.iter().enumerate() {
            for (j, &input_layout) in INPUT_LAYOUTS.iter().enumerate() {
                let groups = 1 + (i as u32 + j as u32) % 2;
                let (ic, oc) = (6 * groups, 4 * groups);
                let stride = 1 + j as u32;
                let case = Conv2dCase {
                    input: rng.tensor(data_type, &[2, ic, 5, 7], -1.0, 1.0),
                    filter: rng.tensor(data_type, &[oc, ic / groups, 1, 1], -1.0, 1.0),
                    bias: (i % 2 == 0).then(|| rng.tensor(data_type, &[oc], -1.0, 1.0)),
                    options: Conv2dOptions {
                        strides: Some(vec![stride, 1]),
                        dilations: Some(vec![1, 1 + i as u32 % 2]),
                        groups,
                        input_layout,
                        filter_layout,
                        has_bias: i % 2 == 0,
                        ..Conv2dOptions::default()
                    },
                };
                let (ulp, abs) = tolerance(data_type, ic / groups);
                check_op(&ctx, &Op::Conv2d(case.options.clone()), &case.inputs(), ulp, abs);
            }
        }
    }
}

/// The pointwise kernel has no filter-window loops or bounds checks; a 3x3 filter keeps them,
/// outside the channel loop (bounds checked once per filter tap, not per channel).
#[test]
fn conv2d_kernel_loops() {
    use webnn_wgpu::ops::wgsl::DeviceTraits;
    use webnn_wgpu::ops::{LowerRequest, Lowering};
    let source = |k: u32| {
        let (input, filter) = (desc(&[1, 240, 12, 20]), desc(&[240, 240, k, k]));
        let options = Conv2dOptions { padding: Some(vec![k / 2; 4]), ..Conv2dOptions::default() };
        let output = desc(&[1, 240, 12, 20]);
        let request = LowerRequest { inputs: vec![&input, &filter], outputs: vec![&output], shader_f16: false, device: DeviceTraits::default() };
        match ops::lower(&Op::Conv2d(options), &request).unwrap() {
            Lowering::Kernels { launches, .. } => launches[0].source.clone(),
            Lowering::Alias => panic!("conv2d lowered to an alias"),
        }
    };
    assert!(!source(1).contains("for (var kh"), "1x1: no window loop");
    let general = source(3);
    let (window, channels) = (general.find("for (var kh").unwrap(), general.find("for (var ic").unwrap());
    assert!(window < channels, "3x3: the channel loop inside the window loops");
}

/// The spec's convTranspose2d steps do not ask input channels to divide by groups (only that
/// they equal the filter's, output channels being the filter's times groups). Input channel c is
/// in group floor(c * groups / inputChannels); hand-computed values for 3 channels in 2 groups
/// and 2 channels in 3 groups (the third group has no input channel: zeros).
#[test]
fn conv_transpose2d_groups_need_not_divide_input_channels() {
    let ctx = context();
    let t = |shape: &[u32], data: Vec<f64>| HostTensor::new(desc(shape), data).unwrap();
    let options = |groups| ConvTranspose2dOptions { groups, ..ConvTranspose2dOptions::default() };
    // Groups {c0, c1} and {c2}: out0 = 10 x0 + 100 x1, out1 = 1000 x2.
    let input = t(&[1, 3, 1, 2], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let filter = t(&[3, 1, 1, 1], vec![10.0, 100.0, 1000.0]);
    let op = Op::ConvTranspose2d(options(2));
    let gpu = run_op(&ctx, &op, &[input.clone(), filter.clone()], &[false, false]).unwrap();
    assert_eq!(gpu[0].descriptor.shape, vec![1, 2, 1, 2]);
    assert_eq!(gpu[0].data, vec![310.0, 420.0, 5000.0, 6000.0]);
    assert_eq!(reference_op(&op, &[input, filter]).unwrap()[0].data, gpu[0].data);
    // Groups {c0}, {c1}, {}, with a 2x1 filter per channel in nhwc / ohwi.
    let op = Op::ConvTranspose2d(ConvTranspose2dOptions {
        input_layout: InputLayout::Nhwc,
        filter_layout: ConvTranspose2dFilterLayout::Ohwi,
        ..options(3)
    });
    let input = t(&[1, 1, 2, 2], vec![1.0, 3.0, 2.0, 4.0]);
    let filter = t(&[1, 2, 1, 2], vec![10.0, 100.0, 20.0, 200.0]);
    let gpu = run_op(&ctx, &op, &[input.clone(), filter.clone()], &[false, false]).unwrap();
    assert_eq!(gpu[0].descriptor.shape, vec![1, 2, 2, 3]);
    // out[h][w][g]: h = 0 is the filter's first row, h = 1 its second.
    assert_eq!(gpu[0].data, vec![10.0, 300.0, 0.0, 20.0, 400.0, 0.0, 20.0, 600.0, 0.0, 40.0, 800.0, 0.0]);
    assert_eq!(reference_op(&op, &[input, filter]).unwrap()[0].data, gpu[0].data);
}
