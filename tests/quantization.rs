//! quantizeLinear and dequantizeLinear: the GPU against the float64 reference over random
//! shapes, block-wise scale shapes and every integer type; rounding half to even and
//! saturation by hand; and the validation errors.
#![cfg(not(target_arch = "wasm32"))] // native: `wasm-pack test` builds every test target for wasm32

mod common;
use common::*;
use webnn_wgpu::graph::{DataType, OperandDescriptor};
use webnn_wgpu::ops::{self, HostTensor, Op};
use webnn_wgpu::Error;

const INTEGERS: [DataType; 4] = [DataType::Int8, DataType::Uint8, DataType::Int32, DataType::Uint32];

/// A random shape and a block-wise broadcastable scale shape (each dimension a divisor).
fn shapes(rng: &mut Rng) -> (Vec<u32>, Vec<u32>) {
    let rank = rng.below(5) as usize;
    let shape = rng.shape(rank, 8);
    let scale = shape
        .iter()
        .map(|&d| {
            let divisors: Vec<u32> = (1..=d).filter(|k| d % k == 0).collect();
            divisors[rng.below(divisors.len() as u32) as usize]
        })
        .collect();
    (shape, scale)
}

fn range(t: DataType) -> (f64, f64) {
    match t {
        DataType::Int8 => (-128.0, 128.0),
        DataType::Uint8 => (0.0, 256.0),
        DataType::Int32 => (-100000.0, 100000.0),
        _ => (0.0, 200000.0),
    }
}

#[test]
fn dequantize_linear_matches_reference() {
    let ctx = context();
    let mut rng = Rng::new(51);
    for float in [DataType::Float32, DataType::Float16] {
        for int in INTEGERS {
            for _ in 0..6 {
                let (shape, scale_shape) = shapes(&mut rng);
                let (lo, hi) = range(int);
                let inputs = vec![
                    rng.tensor(int, &shape, lo, hi),
                    rng.tensor(float, &scale_shape, 0.01, 2.0),
                    rng.tensor(int, &scale_shape, lo, hi),
                ];
                check_op(&ctx, &Op::DequantizeLinear, &inputs, 1, 0.0);
            }
        }
    }
}

#[test]
fn quantize_linear_matches_reference() {
    let ctx = context();
    let mut rng = Rng::new(52);
    for float in [DataType::Float32, DataType::Float16] {
        for int in INTEGERS {
            for _ in 0..6 {
                let (shape, scale_shape) = shapes(&mut rng);
                // Values past the type's range saturate.
                let (lo, hi) = range(int);
                let zero = match int {
                    DataType::Int8 | DataType::Int32 => (-20.0, 20.0),
                    _ => (0.0, 40.0),
                };
                // float16 stays finite: infinities saturate too, but not to the same int32 bound.
                let limit = if float == DataType::Float16 { 60000.0 } else { f64::MAX };
                let inputs = vec![
                    rng.tensor(float, &shape, (1.5 * lo - 50.0).max(-limit), (1.5 * hi + 50.0).min(limit)),
                    rng.tensor(float, &scale_shape, 0.5, 3.0),
                    rng.tensor(int, &scale_shape, zero.0, zero.1),
                ];
                check_op(&ctx, &Op::QuantizeLinear, &inputs, 0, 0.0);
            }
        }
    }
}

fn t(data_type: DataType, shape: &[u32], data: Vec<f64>) -> HostTensor {
    HostTensor::new(OperandDescriptor::new(data_type, shape.to_vec()), data).unwrap()
}

#[test]
fn quantize_rounds_half_to_even_and_saturates() {
    let ctx = context();
    let input = t(DataType::Float32, &[8], vec![0.5, 1.5, 2.5, -0.5, -1.5, 300.0, -300.0, 2.4]);
    let scale = t(DataType::Float32, &[1], vec![1.0]);
    let int8 = run_op(&ctx, &Op::QuantizeLinear, &[input.clone(), scale.clone(), t(DataType::Int8, &[1], vec![0.0])], &[false; 3]).unwrap();
    assert_eq!(int8[0].data, vec![0.0, 2.0, 2.0, -0.0, -2.0, 127.0, -128.0, 2.0]);
    let uint8 = run_op(&ctx, &Op::QuantizeLinear, &[input, scale, t(DataType::Uint8, &[1], vec![10.0])], &[false; 3]).unwrap();
    assert_eq!(uint8[0].data, vec![10.0, 12.0, 12.0, 10.0, 8.0, 255.0, 0.0, 12.0]);
}

/// Block-wise: a [2, 4] input with a [1, 2] scale uses scale[0] for columns 0-1 and scale[1]
/// for columns 2-3.
#[test]
fn dequantize_blockwise_by_hand() {
    let ctx = context();
    let input = t(DataType::Uint8, &[2, 4], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
    let scale = t(DataType::Float32, &[1, 2], vec![2.0, 0.5]);
    let zero = t(DataType::Uint8, &[1, 2], vec![1.0, 4.0]);
    let out = run_op(&ctx, &Op::DequantizeLinear, &[input, scale, zero], &[false; 3]).unwrap();
    assert_eq!(out[0].data, vec![0.0, 2.0, -0.5, 0.0, 8.0, 10.0, 1.5, 2.0]);
}

fn type_error(op: &Op, inputs: &[OperandDescriptor]) -> bool {
    let refs: Vec<&OperandDescriptor> = inputs.iter().collect();
    matches!(ops::validate(op, &refs), Err(Error::Type(_)))
}

#[test]
fn quantization_validation() {
    let d = |t: DataType, s: &[u32]| OperandDescriptor::new(t, s.to_vec());
    use DataType::*;
    let ok_q = [d(Float32, &[4, 6]), d(Float32, &[2, 3]), d(Int8, &[2, 3])];
    assert_eq!(ops::validate(&Op::QuantizeLinear, &ok_q.iter().collect::<Vec<_>>()).unwrap()[0], d(Int8, &[4, 6]));
    let ok_d = [d(Uint8, &[4, 6]), d(Float16, &[4, 1]), d(Uint8, &[4, 1])];
    assert_eq!(ops::validate(&Op::DequantizeLinear, &ok_d.iter().collect::<Vec<_>>()).unwrap()[0], d(Float16, &[4, 6]));
    let q_cases = [
        ("int input", [d(Int32, &[4]), d(Float32, &[1]), d(Int8, &[1])]),
        ("scale type differs", [d(Float32, &[4]), d(Float16, &[1]), d(Int8, &[1])]),
        ("float zero point", [d(Float32, &[4]), d(Float32, &[1]), d(Float32, &[1])]),
        ("scale rank", [d(Float32, &[4]), d(Float32, &[1, 1]), d(Int8, &[1, 1])]),
        ("zero point shape", [d(Float32, &[4]), d(Float32, &[2]), d(Int8, &[1])]),
        ("not a divisor", [d(Float32, &[6]), d(Float32, &[4]), d(Int8, &[4])]),
        ("larger than input", [d(Float32, &[2]), d(Float32, &[4]), d(Int8, &[4])]),
    ];
    for (what, inputs) in q_cases {
        assert!(type_error(&Op::QuantizeLinear, &inputs), "quantizeLinear {what}");
    }
    let d_cases = [
        ("float input", [d(Float32, &[4]), d(Float32, &[1]), d(Float32, &[1])]),
        ("int scale", [d(Int8, &[4]), d(Int8, &[1]), d(Int8, &[1])]),
        ("zero point type differs", [d(Int8, &[4]), d(Float32, &[1]), d(Uint8, &[1])]),
        ("zero point rank", [d(Int8, &[4]), d(Float32, &[1]), d(Int8, &[])]),
        ("zero point shape", [d(Int8, &[4]), d(Float32, &[2]), d(Int8, &[4])]),
        ("not a divisor", [d(Int8, &[4, 3]), d(Float32, &[4, 2]), d(Int8, &[4, 2])]),
    ];
    for (what, inputs) in d_cases {
        assert!(type_error(&Op::DequantizeLinear, &inputs), "dequantizeLinear {what}");
    }
    assert!(type_error(&Op::QuantizeLinear, &ok_q[..2]), "two operands");
}
