//! Output shapes and data types of the operators without WPT cases, through the builder, against
//! shapes written here from the formulas of the WebNN specification (not computed by the crate),
//! and the float64 reference's outputs against the same shapes.
#![cfg(not(target_arch = "wasm32"))] // native: `wasm-pack test` builds every test target for wasm32

mod common;

use webnn_wgpu::graph::{DataType, GraphBuilder, Number, OperandDescriptor};
use webnn_wgpu::ops::arg_min_max::{ArgKind, ArgMinMaxOptions};
use webnn_wgpu::ops::cumulative_sum::CumulativeSumOptions;
use webnn_wgpu::ops::pad::{PadOptions, PaddingMode};
use webnn_wgpu::ops::recurrent::{GruCellOptions, GruOptions, LstmCellOptions, LstmOptions, RecurrentDirection};
use webnn_wgpu::ops::resample2d::{InterpolationMode, Resample2dOptions};
use webnn_wgpu::ops::triangular::TriangularOptions;
use webnn_wgpu::ops::{HostTensor, Op};

use DataType::{Float32, Int32, Int64, Uint8};

fn d(data_type: DataType, shape: &[u32]) -> OperandDescriptor {
    OperandDescriptor::new(data_type, shape.to_vec())
}

/// Builds `op` on inputs of `inputs` and checks its outputs against `expected`, in order; then
/// the reference's outputs on zeros (valid indices) of the same inputs.
fn check(op: Op, inputs: &[OperandDescriptor], expected: &[OperandDescriptor]) {
    let ctx = common::context();
    let mut builder = GraphBuilder::new(&ctx).unwrap();
    let operands: Vec<_> = inputs
        .iter()
        .enumerate()
        .map(|(i, d)| builder.input(&format!("x{i}"), d.clone()).unwrap())
        .collect();
    let outputs = builder
        .operator(op.clone(), &operands, "")
        .unwrap_or_else(|e| panic!("{op:?} on {inputs:?}: {e}"));
    let got: Vec<OperandDescriptor> = outputs.iter().map(|&o| builder.descriptor(o).unwrap().clone()).collect();
    assert_eq!(got, expected, "{op:?} on {inputs:?}: builder");
    let zeros: Vec<HostTensor> = inputs
        .iter()
        .map(|d| {
            if d.data_type.is_wide() {
                HostTensor::from_exact(d.clone(), vec![0; d.element_count() as usize]).unwrap()
            } else {
                HostTensor::new(d.clone(), vec![0.0; d.element_count() as usize]).unwrap()
            }
        })
        .collect();
    let reference = common::reference_op(&op, &zeros).unwrap();
    let shapes: Vec<OperandDescriptor> = reference.iter().map(|t| t.descriptor.clone()).collect();
    assert_eq!(shapes, expected, "{op:?} on {inputs:?}: reference");
    for t in &reference {
        assert_eq!(t.data.len().max(t.exact.len()) as u64, t.descriptor.element_count(), "{op:?}: reference element count");
    }
}

#[test]
fn resample2d() {
    let x = d(Float32, &[2, 3, 5, 7]);
    // sizes replace the axes' dimensions; scales give floor(dimension * scale).
    let sizes = Resample2dOptions { sizes: Some(vec![4, 9]), ..Default::default() };
    check(Op::Resample2d(sizes), &[x.clone()], &[d(Float32, &[2, 3, 4, 9])]);
    let scales = Resample2dOptions { mode: InterpolationMode::Linear, scales: Some(vec![1.5, 0.5]), ..Default::default() };
    check(Op::Resample2d(scales), &[x.clone()], &[d(Float32, &[2, 3, 7, 3])]);
    let axes = Resample2dOptions { scales: Some(vec![2.0, 3.0]), axes: Some(vec![0, 1]), ..Default::default() };
    check(Op::Resample2d(axes), &[x], &[d(Float32, &[4, 9, 5, 7])]);
}

#[test]
fn pad() {
    // beginningPadding[i] + input[i] + endingPadding[i].
    for mode in [PaddingMode::Constant, PaddingMode::Edge, PaddingMode::Reflection] {
        let options = PadOptions { beginning_padding: vec![1, 0, 2], ending_padding: vec![0, 3, 1], mode, value: Number::Double(0.0) };
        check(Op::Pad(options), &[d(Float32, &[3, 4, 5])], &[d(Float32, &[4, 7, 8])]);
    }
}

#[test]
fn tile() {
    // input[i] * repetitions[i].
    check(Op::Tile { repetitions: vec![2, 1, 3] }, &[d(Int32, &[3, 4, 5])], &[d(Int32, &[6, 4, 15])]);
}

#[test]
fn scatter_and_gather_nd() {
    // scatterElements and scatterND: the input's shape and type.
    check(
        Op::ScatterElements { axis: 1 },
        &[d(Float32, &[3, 4]), d(Int32, &[3, 2]), d(Float32, &[3, 2])],
        &[d(Float32, &[3, 4])],
    );
    // scatterND: updates are indices.shape[:-1] + input.shape[indices.shape[-1]:].
    check(
        Op::ScatterNd,
        &[d(Float32, &[4, 5, 6]), d(Int32, &[2, 3, 2]), d(Float32, &[2, 3, 6])],
        &[d(Float32, &[4, 5, 6])],
    );
    // gatherND: indices.shape[:-1] + input.shape[indices.shape[-1]:].
    check(Op::GatherNd, &[d(Float32, &[4, 5, 6]), d(Int32, &[2, 3, 2])], &[d(Float32, &[2, 3, 6])]);
    check(Op::GatherNd, &[d(Float32, &[4, 5, 6]), d(Int64, &[7, 3])], &[d(Float32, &[7])]);
    check(Op::GatherNd, &[d(Float32, &[4, 5, 6]), d(Int32, &[1])], &[d(Float32, &[5, 6])]);
}

#[test]
fn cumulative_sum_and_triangular() {
    let options = CumulativeSumOptions { axis: 1, exclusive: true, reversed: true };
    check(Op::CumulativeSum(options), &[d(Float32, &[3, 4, 2])], &[d(Float32, &[3, 4, 2])]);
    let options = TriangularOptions { upper: false, diagonal: -1 };
    check(Op::Triangular(options), &[d(Int32, &[2, 3, 5])], &[d(Int32, &[2, 3, 5])]);
}

#[test]
fn arg_min_max() {
    // The axis is removed, or kept as 1; the type is outputDataType.
    for kind in [ArgKind::Min, ArgKind::Max] {
        let options = ArgMinMaxOptions { axis: 1, keep_dimensions: false, output_data_type: Int32 };
        check(Op::ArgMinMax(kind, options), &[d(Float32, &[3, 4, 5])], &[d(Int32, &[3, 5])]);
        let options = ArgMinMaxOptions { axis: 2, keep_dimensions: true, output_data_type: Int64 };
        check(Op::ArgMinMax(kind, options), &[d(Float32, &[3, 4, 5])], &[d(Int64, &[3, 4, 1])]);
        let options = ArgMinMaxOptions { axis: 0, keep_dimensions: false, output_data_type: Int32 };
        check(Op::ArgMinMax(kind, options), &[d(Float32, &[6])], &[d(Int32, &[])]);
    }
}

#[test]
fn quantize_and_dequantize_linear() {
    // quantizeLinear: the input's shape, zeroPoint's type; dequantizeLinear: the input's
    // shape, scale's type. Scale and zero point are blockwise: [2, 1] over [2, 6].
    check(
        Op::QuantizeLinear,
        &[d(Float32, &[2, 6]), d(Float32, &[2, 1]), d(Uint8, &[2, 1])],
        &[d(Uint8, &[2, 6])],
    );
    check(
        Op::DequantizeLinear,
        &[d(Uint8, &[2, 6]), d(Float32, &[1, 3]), d(Uint8, &[1, 3])],
        &[d(Float32, &[2, 6])],
    );
}

#[test]
fn gru_and_gru_cell() {
    let (steps, batch, input_size, hidden) = (3, 2, 5, 4);
    for (direction, directions) in [(RecurrentDirection::Forward, 1), (RecurrentDirection::Both, 2)] {
        for return_sequence in [false, true] {
            let options = GruOptions {
                steps,
                hidden_size: hidden,
                has_bias: true,
                has_recurrent_bias: false,
                has_initial_hidden_state: true,
                reset_after: true,
                return_sequence,
                direction,
                layout: Default::default(),
                activations: None,
            };
            let inputs = [
                d(Float32, &[steps, batch, input_size]),
                d(Float32, &[directions, 3 * hidden, input_size]),
                d(Float32, &[directions, 3 * hidden, hidden]),
                d(Float32, &[directions, 3 * hidden]),
                d(Float32, &[directions, batch, hidden]),
            ];
            // [numDirections, batchSize, hiddenSize], then with returnSequence
            // [steps, numDirections, batchSize, hiddenSize].
            let mut expected = vec![d(Float32, &[directions, batch, hidden])];
            if return_sequence {
                expected.push(d(Float32, &[steps, directions, batch, hidden]));
            }
            check(Op::Gru(options), &inputs, &expected);
        }
    }
    let options = GruCellOptions {
        hidden_size: hidden,
        has_bias: false,
        has_recurrent_bias: true,
        reset_after: false,
        layout: Default::default(),
        activations: None,
    };
    let inputs = [
        d(Float32, &[batch, input_size]),
        d(Float32, &[3 * hidden, input_size]),
        d(Float32, &[3 * hidden, hidden]),
        d(Float32, &[batch, hidden]),
        d(Float32, &[3 * hidden]),
    ];
    check(Op::GruCell(options), &inputs, &[d(Float32, &[batch, hidden])]);
}

#[test]
fn lstm_and_lstm_cell() {
    let (steps, batch, input_size, hidden) = (2, 3, 4, 5);
    for (direction, directions) in [(RecurrentDirection::Backward, 1), (RecurrentDirection::Both, 2)] {
        for return_sequence in [false, true] {
            let options = LstmOptions {
                steps,
                hidden_size: hidden,
                has_bias: false,
                has_recurrent_bias: true,
                has_peephole_weight: true,
                has_initial_hidden_state: false,
                has_initial_cell_state: true,
                return_sequence,
                direction,
                layout: Default::default(),
                activations: None,
            };
            let inputs = [
                d(Float32, &[steps, batch, input_size]),
                d(Float32, &[directions, 4 * hidden, input_size]),
                d(Float32, &[directions, 4 * hidden, hidden]),
                d(Float32, &[directions, 4 * hidden]),
                d(Float32, &[directions, 3 * hidden]),
                d(Float32, &[directions, batch, hidden]),
            ];
            // Hidden and cell state [numDirections, batchSize, hiddenSize], then with
            // returnSequence [steps, numDirections, batchSize, hiddenSize].
            let mut expected = vec![d(Float32, &[directions, batch, hidden]), d(Float32, &[directions, batch, hidden])];
            if return_sequence {
                expected.push(d(Float32, &[steps, directions, batch, hidden]));
            }
            check(Op::Lstm(options), &inputs, &expected);
        }
    }
    let options = LstmCellOptions {
        hidden_size: hidden,
        has_bias: true,
        has_recurrent_bias: false,
        has_peephole_weight: false,
        layout: Default::default(),
        activations: None,
    };
    let inputs = [
        d(Float32, &[batch, input_size]),
        d(Float32, &[4 * hidden, input_size]),
        d(Float32, &[4 * hidden, hidden]),
        d(Float32, &[batch, hidden]),
        d(Float32, &[batch, hidden]),
        d(Float32, &[4 * hidden]),
    ];
    check(Op::LstmCell(options), &inputs, &[d(Float32, &[batch, hidden]), d(Float32, &[batch, hidden])]);
}
