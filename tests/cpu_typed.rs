#![cfg(not(target_arch = "wasm32"))]
//! The CPU backend's kernels on raw bytes (`kernels::typed`) against the float64 reference,
//! every element: gather, gatherElements, gatherND, split, where and cast of every data type,
//! the logical operators, dequantizeLinear exactly (bit for bit; NaN as any NaN); gru, gruCell,
//! lstm and lstmCell within `|got - expected| <= 2e-6 + 2e-6 |expected|` (float32 GEMMs and
//! states rounded to float32 at every step, against float64 throughout).

mod common;

use common::Rng;
use webnn_wgpu::backend::cpu::kernels::typed;
use webnn_wgpu::operand::{DataType, OperandDescriptor};
use webnn_wgpu::ops::concat::Splits;
use webnn_wgpu::ops::logical::LogicalOp;
use webnn_wgpu::ops::recurrent::{
    GruCellOptions, GruOptions, GruWeightLayout, LstmCellOptions, LstmOptions, LstmWeightLayout, RecurrentActivation,
    RecurrentDirection,
};
use webnn_wgpu::ops::reference::decode;
use webnn_wgpu::ops::{self, HostTensor, Op};

fn count(shape: &[u32]) -> usize {
    shape.iter().map(|&d| d as usize).product()
}

/// Random values of `data_type` (float ones in `lo..hi`), stored as that type.
fn tensor(rng: &mut Rng, data_type: DataType, shape: &[u32], lo: f64, hi: f64) -> HostTensor {
    let d = OperandDescriptor::new(data_type, shape);
    let n = count(shape);
    match data_type {
        DataType::Float32 | DataType::Float16 => {
            HostTensor::new(d, (0..n).map(|_| rng.uniform(lo, hi)).collect()).unwrap().reencoded()
        }
        _ => HostTensor::from_exact(d, (0..n).map(|_| integer(rng, data_type)).collect()).unwrap(),
    }
}

/// Any value of an integer type, often a boundary one.
fn integer(rng: &mut Rng, t: DataType) -> i128 {
    let (min, max): (i128, i128) = match t {
        DataType::Int32 => (i32::MIN as i128, i32::MAX as i128),
        DataType::Uint32 => (0, u32::MAX as i128),
        DataType::Int64 => (i64::MIN as i128, i64::MAX as i128),
        DataType::Uint64 => (0, u64::MAX as i128),
        DataType::Int8 => (-128, 127),
        _ => (0, 255),
    };
    match rng.below(6) {
        0 => min + rng.below(3) as i128,
        1 => max - rng.below(3) as i128,
        2 => rng.below(600) as i128 - 300,
        _ => min + (rng.next_u64() as i128 % (max - min + 1)).abs(),
    }
    .clamp(min, max)
}

trait Reencode {
    fn reencoded(self) -> Self;
}

impl Reencode for HostTensor {
    /// The tensor as the backend sees it: its bytes read back.
    fn reencoded(self) -> HostTensor {
        HostTensor::from_bytes(self.descriptor.clone(), &self.to_bytes()).unwrap()
    }
}

/// The bytes of `t` in a word-aligned buffer, as the backend's are.
fn words(bytes: &[u8]) -> Vec<u32> {
    let mut w = vec![0u32; bytes.len().div_ceil(4)];
    bytemuck::cast_slice_mut::<u32, u8>(&mut w)[..bytes.len()].copy_from_slice(bytes);
    w
}

#[derive(Clone, Copy, Debug)]
enum Tol {
    Exact,
    Close(f64),
}

/// Runs `op` through `typed::run` and the reference (both on the tensors' bytes) and compares
/// every element of every output.
fn check(op: &Op, inputs: &[HostTensor], tol: Tol, what: &str) {
    let inputs: Vec<HostTensor> = inputs.iter().map(|t| t.clone().reencoded()).collect();
    let descriptors: Vec<&OperandDescriptor> = inputs.iter().map(|t| &t.descriptor).collect();
    let outputs = ops::validate(op, &descriptors).unwrap_or_else(|e| panic!("{what}: {op:?} does not validate: {e}"));
    let output_refs: Vec<&OperandDescriptor> = outputs.iter().collect();
    assert!(typed::handles(op, &descriptors, &output_refs), "{what}: {op:?} is not handled");
    let expected = ops::reference(op, &inputs, &outputs).unwrap_or_else(|e| panic!("{what}: reference failed: {e}"));
    let input_words: Vec<Vec<u32>> = inputs.iter().map(|t| words(&t.to_bytes())).collect();
    let kernel_inputs: Vec<(&OperandDescriptor, &[u8])> = inputs
        .iter()
        .zip(&input_words)
        .map(|(t, w)| (&t.descriptor, &bytemuck::cast_slice::<u32, u8>(w)[..t.descriptor.byte_length() as usize]))
        .collect();
    // Garbage in the outputs, which every kernel must overwrite.
    let mut output_words: Vec<Vec<u32>> =
        outputs.iter().map(|d| vec![0x7fc0_dead; (d.byte_length() as usize).div_ceil(4)]).collect();
    let mut kernel_outputs: Vec<(&OperandDescriptor, &mut [u8])> = outputs
        .iter()
        .zip(&mut output_words)
        .map(|(d, w)| (d, &mut bytemuck::cast_slice_mut::<u32, u8>(w)[..d.byte_length() as usize]))
        .collect();
    let result =
        typed::run(op, &kernel_inputs, &mut kernel_outputs).unwrap_or_else(|| panic!("{what}: {op:?} returned None"));
    result.unwrap_or_else(|e| panic!("{what}: {op:?} failed: {e}"));
    for (k, (d, e)) in outputs.iter().zip(&expected).enumerate() {
        let got = &kernel_outputs[k].1;
        let want = e.to_bytes();
        if tol_ok(d.data_type, got, &want, tol) {
            continue;
        }
        let (g, w) = (decode(got, d.data_type), decode(&want, d.data_type));
        let i = (0..g.len()).find(|&i| !same(g[i], w[i], d.data_type, tol)).unwrap_or(0);
        let size = d.data_type.byte_size() as usize;
        panic!(
            "{what}: {op:?} output {k} {d} element {i}: got {} ({:?}), expected {} ({:?}); inputs {:?}",
            g[i],
            &got[i * size..(i + 1) * size],
            w[i],
            &want[i * size..(i + 1) * size],
            descriptors
        );
    }
}

fn same(g: f64, w: f64, t: DataType, tol: Tol) -> bool {
    match tol {
        _ if t.is_float() && g.is_nan() && w.is_nan() => true,
        Tol::Exact => g == w && g.is_sign_negative() == w.is_sign_negative(),
        Tol::Close(a) => g == w || (g - w).abs() <= a + a * w.abs(),
    }
}

fn tol_ok(t: DataType, got: &[u8], want: &[u8], tol: Tol) -> bool {
    if got == want {
        return true;
    }
    if !t.is_float() {
        return false;
    }
    let (g, w) = (decode(got, t), decode(want, t));
    g.len() == w.len() && g.iter().zip(&w).all(|(&g, &w)| same(g, w, t, tol))
}

const INDEX_TYPES: [DataType; 3] = [DataType::Int32, DataType::Uint32, DataType::Int64];

/// Index values of `t` in `-n - 2 ..= n + 1` and a few far beyond (clamped by the operators).
fn indices(rng: &mut Rng, t: DataType, shape: &[u32], n: u32) -> HostTensor {
    let n = n as i128;
    let values = (0..count(shape))
        .map(|_| {
            let v = match rng.below(8) {
                0 => i32::MAX as i128 + 5,
                1 => -(1i128 << 40),
                2 => 1i128 << 40,
                3 => i32::MIN as i128,
                _ => rng.below(2 * n as u32 + 4) as i128 - n - 2,
            };
            match t {
                DataType::Int32 => v.clamp(i32::MIN as i128, i32::MAX as i128),
                DataType::Uint32 => v.clamp(0, u32::MAX as i128),
                _ => v,
            }
        })
        .collect();
    HostTensor::from_exact(OperandDescriptor::new(t, shape), values).unwrap()
}

#[test]
fn gather_every_type_axis_and_index_type() {
    let mut rng = Rng::new(1);
    let cases: &[(&[u32], &[u32])] = &[
        (&[30, 16], &[5]),
        (&[30, 16], &[2, 3]),
        (&[7], &[]),
        (&[7], &[4]),
        (&[2, 3, 4], &[]),
        (&[2, 3, 4], &[3, 2]),
        (&[3, 1, 5, 2], &[6]),
    ];
    for data_type in DataType::ALL {
        for &(shape, index_shape) in cases {
            for axis in 0..shape.len() {
                for t in INDEX_TYPES {
                    let input = tensor(&mut rng, data_type, shape, -100.0, 100.0);
                    let idx = indices(&mut rng, t, index_shape, shape[axis]);
                    let op = Op::Gather { axis: axis as u32 };
                    check(&op, &[input, idx], Tol::Exact, &format!("gather {data_type} {shape:?} axis {axis} {t}"));
                }
            }
        }
    }
}

#[test]
fn gather_elements_and_nd() {
    let mut rng = Rng::new(2);
    for data_type in [DataType::Float32, DataType::Float16, DataType::Int64, DataType::Uint8] {
        for t in INDEX_TYPES {
            let shape = [3u32, 4, 5];
            for axis in 0..3 {
                for m in [1u32, 2, 6] {
                    let mut index_shape = shape;
                    index_shape[axis] = m;
                    let input = tensor(&mut rng, data_type, &shape, -10.0, 10.0);
                    let idx = indices(&mut rng, t, &index_shape, shape[axis]);
                    let op = Op::GatherElements { axis: axis as u32 };
                    check(&op, &[input, idx], Tol::Exact, &format!("gatherElements {data_type} axis {axis} {t}"));
                }
            }
            let nd: &[&[u32]] = &[&[2, 3, 1], &[7, 2], &[3], &[2, 3], &[1], &[4, 1, 2]];
            for &index_shape in nd {
                let input = tensor(&mut rng, data_type, &shape, -10.0, 10.0);
                // The largest dimension's range: beyond a smaller one, values clamp.
                let idx = indices(&mut rng, t, index_shape, 5);
                check(&Op::GatherNd, &[input, idx], Tol::Exact, &format!("gatherND {data_type} {index_shape:?} {t}"));
            }
        }
    }
}

#[test]
fn split_every_type_and_axis() {
    let mut rng = Rng::new(3);
    for data_type in DataType::ALL {
        let shape = [4u32, 6, 3];
        for axis in 0..3u32 {
            let dim = shape[axis as usize];
            let mut variants = vec![Splits::Count(1), Splits::Count(2)];
            variants.push(Splits::Sizes(vec![1, dim - 1]));
            if dim > 3 {
                variants.push(Splits::Sizes(vec![1, 2, dim - 3]));
            }
            for splits in variants {
                let input = tensor(&mut rng, data_type, &shape, -10.0, 10.0);
                let op = Op::Split { splits: splits.clone(), axis };
                if ops::validate(&op, &[&input.descriptor]).is_err() {
                    continue;
                }
                check(&op, &[input], Tol::Exact, &format!("split {data_type} axis {axis} {splits:?}"));
            }
        }
    }
}

/// uint8 conditions: 0, 1 and other non-zero values.
fn condition(rng: &mut Rng, shape: &[u32]) -> HostTensor {
    let values = (0..count(shape)).map(|_| [0.0, 1.0, 0.0, 7.0, 255.0][rng.below(5) as usize]).collect();
    HostTensor::new(OperandDescriptor::new(DataType::Uint8, shape), values).unwrap()
}

#[test]
fn where_every_type_and_broadcast() {
    let mut rng = Rng::new(4);
    let shapes: &[(&[u32], &[u32], &[u32])] = &[
        (&[], &[], &[]),
        (&[33], &[33], &[33]),
        (&[2, 3, 4], &[2, 3, 4], &[2, 3, 4]),
        (&[2, 3, 4], &[], &[4]),
        (&[4], &[2, 3, 4], &[3, 1]),
        (&[3, 1], &[1, 5], &[2, 1, 1]),
        (&[1], &[7, 1], &[1, 9]),
        (&[2, 1, 4, 1], &[3, 1, 5], &[1]),
    ];
    for data_type in DataType::ALL {
        for &(c, a, b) in shapes {
            let inputs = [
                condition(&mut rng, c),
                tensor(&mut rng, data_type, a, -100.0, 100.0),
                tensor(&mut rng, data_type, b, -100.0, 100.0),
            ];
            check(&Op::Where, &inputs, Tol::Exact, &format!("where {data_type} {c:?} {a:?} {b:?}"));
        }
    }
}

/// Float values that test rounding, saturation and NaN of every conversion.
fn float_specials() -> Vec<f64> {
    let mut v = vec![
        0.0,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        -f64::NAN,
        1e-40,
        -1e-45,
        6e-8,
        3e-8,
        0.5,
        -0.5,
        0.99,
        -0.99,
        1.5,
        2.5,
        -1.9,
        127.4,
        127.5,
        128.0,
        -128.9,
        -129.0,
        255.9,
        256.0,
        -1.0,
        2049.0,
        65504.0,
        65519.0,
        65520.0,
        1e6,
        16777217.0,
        2147483520.0,
        2147483648.0,
        -2147483648.0,
        -2147483904.0,
        4294967040.0,
        4294967296.0,
        9.223372e18,
        9.3e18,
        -9.3e18,
        1.8446743e19,
        1.9e19,
        1e30,
        -1e30,
        f32::MAX as f64,
    ];
    v.extend(v.clone().iter().map(|x| -x));
    v
}

#[test]
fn cast_every_pair() {
    let mut rng = Rng::new(5);
    for from in DataType::ALL {
        for to in DataType::ALL {
            let d = OperandDescriptor::new(from, [300u32]);
            let input = if from.is_float() {
                let mut values = float_specials();
                while values.len() < 300 {
                    values.push(rng.uniform(-1e4, 1e4) * if rng.below(2) == 0 { 1.0 } else { 1e-4 });
                }
                values.truncate(300);
                HostTensor::new(d, values).unwrap()
            } else {
                HostTensor::from_exact(d, (0..300).map(|_| integer(&mut rng, from)).collect()).unwrap()
            };
            check(&Op::Cast { data_type: to }, &[input], Tol::Exact, &format!("cast {from} to {to}"));
            // A scalar, and a length that is no multiple of the kernel's block.
            for shape in [&[][..], &[3, 259]] {
                let input = tensor(&mut rng, from, shape, -300.0, 300.0);
                check(&Op::Cast { data_type: to }, &[input], Tol::Exact, &format!("cast {from} to {to} {shape:?}"));
            }
        }
    }
}

#[test]
fn logical_comparisons_and_boolean_ops() {
    let mut rng = Rng::new(6);
    let pairs: &[(&[u32], &[u32])] = &[
        (&[], &[]),
        (&[33], &[33]),
        (&[2, 3, 4], &[4]),
        (&[3, 1], &[1, 5]),
        (&[1], &[2, 1, 3]),
        (&[2, 1, 4, 1], &[3, 1, 5]),
    ];
    let comparisons = [
        LogicalOp::Equal,
        LogicalOp::NotEqual,
        LogicalOp::Greater,
        LogicalOp::GreaterOrEqual,
        LogicalOp::Lesser,
        LogicalOp::LesserOrEqual,
    ];
    let specials = float_specials();
    for op in comparisons {
        for t in [DataType::Float32, DataType::Int32, DataType::Uint32, DataType::Int8, DataType::Uint8] {
            for &(a, b) in pairs {
                // Few distinct values, so that equal pairs are common.
                let mut pick = |shape: &[u32]| {
                    let d = OperandDescriptor::new(t, shape);
                    if t == DataType::Float32 {
                        let values = (0..count(shape)).map(|_| specials[rng.below(12) as usize * 2 % specials.len()]);
                        HostTensor::new(d, values.collect()).unwrap()
                    } else {
                        let values = (0..count(shape)).map(|_| integer(&mut Rng::new(rng.below(8) as u64), t));
                        HostTensor::from_exact(d, values.collect()).unwrap()
                    }
                };
                let inputs = [pick(a), pick(b)];
                check(&Op::Logical(op), &inputs, Tol::Exact, &format!("{} {t} {a:?} {b:?}", op.name()));
            }
        }
    }
    for op in [LogicalOp::LogicalAnd, LogicalOp::LogicalOr, LogicalOp::LogicalXor] {
        for &(a, b) in pairs {
            let inputs = [condition(&mut rng, a), condition(&mut rng, b)];
            check(&Op::Logical(op), &inputs, Tol::Exact, &format!("{} {a:?} {b:?}", op.name()));
        }
    }
    for &(shape, _) in pairs {
        check(&Op::Logical(LogicalOp::LogicalNot), &[condition(&mut rng, shape)], Tol::Exact, "logicalNot");
        for op in [LogicalOp::IsNaN, LogicalOp::IsInfinite] {
            let d = OperandDescriptor::new(DataType::Float32, shape);
            let values = (0..count(shape)).map(|_| specials[rng.below(specials.len() as u32) as usize]).collect();
            check(&Op::Logical(op), &[HostTensor::new(d, values).unwrap()], Tol::Exact, op.name());
        }
    }
}

#[test]
fn dequantize_linear_every_type_and_block() {
    let mut rng = Rng::new(7);
    let cases: &[(&[u32], &[u32])] = &[
        (&[], &[]),
        (&[16], &[1]),
        (&[16], &[16]),
        (&[16], &[4]),
        (&[3, 4, 6], &[1, 1, 1]),
        (&[3, 4, 6], &[3, 1, 1]),
        (&[3, 4, 6], &[1, 4, 1]),
        (&[3, 4, 6], &[1, 1, 6]),
        (&[3, 4, 6], &[3, 2, 3]),
        (&[2, 8, 32], &[2, 8, 1]),
        (&[2, 8, 32], &[1, 8, 4]),
    ];
    for t in [DataType::Int8, DataType::Uint8, DataType::Int32, DataType::Uint32] {
        for &(shape, scale_shape) in cases {
            let input = tensor(&mut rng, t, shape, 0.0, 0.0);
            let zero_point = tensor(&mut rng, t, scale_shape, 0.0, 0.0);
            let mut scale = tensor(&mut rng, DataType::Float32, scale_shape, 1e-3, 2.0);
            if let Some(v) = scale.data.first_mut() {
                *v = [1.0 / 3.0, f64::INFINITY, 1e-30][rng.below(3) as usize];
            }
            let scale = scale.reencoded();
            check(
                &Op::DequantizeLinear,
                &[input, scale, zero_point],
                Tol::Exact,
                &format!("dequantizeLinear {t} {shape:?} {scale_shape:?}"),
            );
        }
    }
}

const RECURRENT: Tol = Tol::Close(2e-6);

fn floats(rng: &mut Rng, shape: &[u32], scale: f64) -> HostTensor {
    tensor(rng, DataType::Float32, shape, -scale, scale)
}

#[test]
fn gru_and_gru_cell_every_option() {
    use RecurrentActivation::*;
    let mut rng = Rng::new(8);
    let (steps, batch, input_size, hidden) = (5u32, 3u32, 17u32, 9u32);
    let activation_sets = [None, Some(vec![Sigmoid, Relu]), Some(vec![Tanh, Sigmoid])];
    for direction in [RecurrentDirection::Forward, RecurrentDirection::Backward, RecurrentDirection::Both] {
        for layout in [GruWeightLayout::Zrn, GruWeightLayout::Rzn] {
            for reset_after in [true, false] {
                for flags in 0..8u32 {
                    let dirs = if direction == RecurrentDirection::Both { 2 } else { 1 };
                    let mut o = GruOptions::new(steps, hidden);
                    (o.direction, o.layout, o.reset_after) = (direction, layout, reset_after);
                    o.has_bias = flags & 1 != 0;
                    o.has_recurrent_bias = flags & 2 != 0;
                    o.has_initial_hidden_state = flags & 4 != 0;
                    o.return_sequence = flags & 3 != 0;
                    o.activations = activation_sets[flags as usize % 3].clone();
                    let mut inputs = vec![
                        floats(&mut rng, &[steps, batch, input_size], 1.0),
                        floats(&mut rng, &[dirs, 3 * hidden, input_size], 0.5),
                        floats(&mut rng, &[dirs, 3 * hidden, hidden], 0.5),
                    ];
                    if o.has_bias {
                        inputs.push(floats(&mut rng, &[dirs, 3 * hidden], 1.0));
                    }
                    if o.has_recurrent_bias {
                        inputs.push(floats(&mut rng, &[dirs, 3 * hidden], 1.0));
                    }
                    if o.has_initial_hidden_state {
                        inputs.push(floats(&mut rng, &[dirs, batch, hidden], 1.0));
                    }
                    check(&Op::Gru(o.clone()), &inputs, RECURRENT, &format!("gru {o:?}"));
                }
                for flags in 0..4u32 {
                    let mut o = GruCellOptions::new(hidden);
                    (o.layout, o.reset_after) = (layout, reset_after);
                    o.has_bias = flags & 1 != 0;
                    o.has_recurrent_bias = flags & 2 != 0;
                    o.activations = activation_sets[flags as usize % 3].clone();
                    let mut inputs = vec![
                        floats(&mut rng, &[batch, input_size], 1.0),
                        floats(&mut rng, &[3 * hidden, input_size], 0.5),
                        floats(&mut rng, &[3 * hidden, hidden], 0.5),
                        floats(&mut rng, &[batch, hidden], 1.0),
                    ];
                    for present in [o.has_bias, o.has_recurrent_bias] {
                        if present {
                            inputs.push(floats(&mut rng, &[3 * hidden], 1.0));
                        }
                    }
                    check(&Op::GruCell(o.clone()), &inputs, RECURRENT, &format!("gruCell {o:?}"));
                }
            }
        }
    }
}

#[test]
fn lstm_and_lstm_cell_every_option() {
    use RecurrentActivation::*;
    let mut rng = Rng::new(9);
    let (steps, batch, input_size, hidden) = (4u32, 2u32, 13u32, 11u32);
    let activation_sets = [None, Some(vec![Sigmoid, Relu, Tanh]), Some(vec![Sigmoid, Tanh, Relu])];
    for direction in [RecurrentDirection::Forward, RecurrentDirection::Backward, RecurrentDirection::Both] {
        for layout in [LstmWeightLayout::Iofg, LstmWeightLayout::Ifgo] {
            for flags in 0..32u32 {
                let dirs = if direction == RecurrentDirection::Both { 2 } else { 1 };
                let mut o = LstmOptions::new(steps, hidden);
                (o.direction, o.layout) = (direction, layout);
                o.has_bias = flags & 1 != 0;
                o.has_recurrent_bias = flags & 2 != 0;
                o.has_peephole_weight = flags & 4 != 0;
                o.has_initial_hidden_state = flags & 8 != 0;
                o.has_initial_cell_state = flags & 16 != 0;
                o.return_sequence = flags % 3 != 0;
                o.activations = activation_sets[flags as usize % 3].clone();
                let mut inputs = vec![
                    floats(&mut rng, &[steps, batch, input_size], 1.0),
                    floats(&mut rng, &[dirs, 4 * hidden, input_size], 0.5),
                    floats(&mut rng, &[dirs, 4 * hidden, hidden], 0.5),
                ];
                let optional = [
                    (o.has_bias, vec![dirs, 4 * hidden]),
                    (o.has_recurrent_bias, vec![dirs, 4 * hidden]),
                    (o.has_peephole_weight, vec![dirs, 3 * hidden]),
                    (o.has_initial_hidden_state, vec![dirs, batch, hidden]),
                    (o.has_initial_cell_state, vec![dirs, batch, hidden]),
                ];
                for (present, shape) in optional {
                    if present {
                        inputs.push(floats(&mut rng, &shape, 1.0));
                    }
                }
                check(&Op::Lstm(o.clone()), &inputs, RECURRENT, &format!("lstm {o:?}"));
            }
            for flags in 0..8u32 {
                let mut o = LstmCellOptions::new(hidden);
                o.layout = layout;
                o.has_bias = flags & 1 != 0;
                o.has_recurrent_bias = flags & 2 != 0;
                o.has_peephole_weight = flags & 4 != 0;
                o.activations = activation_sets[flags as usize % 3].clone();
                let mut inputs = vec![
                    floats(&mut rng, &[batch, input_size], 1.0),
                    floats(&mut rng, &[4 * hidden, input_size], 0.5),
                    floats(&mut rng, &[4 * hidden, hidden], 0.5),
                    floats(&mut rng, &[batch, hidden], 1.0),
                    floats(&mut rng, &[batch, hidden], 1.0),
                ];
                for (present, len) in [(o.has_bias, 4), (o.has_recurrent_bias, 4), (o.has_peephole_weight, 3)] {
                    if present {
                        inputs.push(floats(&mut rng, &[len * hidden], 1.0));
                    }
                }
                check(&Op::LstmCell(o.clone()), &inputs, RECURRENT, &format!("lstmCell {o:?}"));
            }
        }
    }
}

#[test]
fn mismatched_operands_are_errors() {
    let mut rng = Rng::new(10);
    let input = tensor(&mut rng, DataType::Float32, &[4, 3], -1.0, 1.0);
    let idx = indices(&mut rng, DataType::Int32, &[2], 4);
    let op = Op::Gather { axis: 0 };
    let (a, b) = (words(&input.to_bytes()), words(&idx.to_bytes()));
    let a = bytemuck::cast_slice::<u32, u8>(&a);
    let b = bytemuck::cast_slice::<u32, u8>(&b);
    let out_d = OperandDescriptor::new(DataType::Float32, [2u32, 3]);
    // A short input, a wrong output descriptor, a short output: errors, not panics.
    let mut out = vec![0u8; 24];
    let r = typed::run(&op, &[(&input.descriptor, &a[..40]), (&idx.descriptor, b)], &mut [(&out_d, &mut out)]);
    assert!(matches!(r, Some(Err(_))));
    let wrong = OperandDescriptor::new(DataType::Float32, [3u32, 2]);
    let r = typed::run(&op, &[(&input.descriptor, a), (&idx.descriptor, b)], &mut [(&wrong, &mut out)]);
    assert!(matches!(r, Some(Err(_))));
    let r = typed::run(&op, &[(&input.descriptor, a), (&idx.descriptor, b)], &mut [(&out_d, &mut out[..20])]);
    assert!(matches!(r, Some(Err(_))));
    // Misaligned bytes: an error.
    let mut shifted = vec![0u8; 49];
    shifted[1..].copy_from_slice(a);
    let r = typed::run(&op, &[(&input.descriptor, &shifted[1..]), (&idx.descriptor, b)], &mut [(&out_d, &mut out)]);
    assert!(matches!(r, Some(Err(_))));
}
