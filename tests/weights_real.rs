//! Real weight files through the loader to the GPU and back, against the statistics the Python
//! readers (safetensors/numpy, gguf-py) wrote: `tools/fetch_test_models.sh` fetches the files
//! and runs `tools/dump_weights.py`. Skipped with a message when the files are missing, unless
//! `WEBNN_REAL_WEIGHTS=required` (the CI stage `real_weights`), where missing files fail.

mod common;

use std::path::Path;

use common::weight_files::read_back;
use common::{block_on, context};
use half::f16;
use webnn_wgpu::graph::DataType;
use webnn_wgpu::runtime::Context;
use webnn_wgpu::weights::{FileSource, LoadOptions, WeightFile};

/// Values as float64 and their 32-bit patterns (float32 bits, int32 bits), from WebNN bytes.
fn decode(data_type: DataType, bytes: &[u8]) -> (Vec<f64>, Vec<u32>) {
    match data_type {
        DataType::Float32 => bytes
            .chunks_exact(4)
            .map(|b| {
                let bits = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                (f32::from_bits(bits) as f64, bits)
            })
            .unzip(),
        DataType::Float16 => bytes
            .chunks_exact(2)
            .map(|b| {
                let x = f16::from_le_bytes([b[0], b[1]]).to_f32();
                (x as f64, x.to_bits())
            })
            .unzip(),
        DataType::Int32 => bytes
            .chunks_exact(4)
            .map(|b| {
                let v = i32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                (v as f64, v as u32)
            })
            .unzip(),
        other => panic!("unexpected type {other}"),
    }
}

#[derive(Default, Debug)]
struct Summary {
    tensors: usize,
    exact: usize,
    elements: u64,
    max_first_error: f64,
    max_first_relative_error: f64,
    max_sum_error_ratio: f64,
    peak_host_bytes: u64,
}

/// Loads every tensor of `path` with `options` and compares it with `path.json`.
fn compare(ctx: &Context, path: &Path, options: &LoadOptions, only_quantized: bool) -> Summary {
    let reference: serde_json::Value = serde_json::from_slice(
        &std::fs::read(path.with_extension(format!("{}.json", path.extension().unwrap().to_str().unwrap())))
            .expect("run tools/fetch_test_models.sh"),
    )
    .unwrap();
    let source = std::rc::Rc::new(FileSource::open(path).unwrap());
    let file = block_on(WeightFile::open(&*source)).unwrap();
    let expected = reference["tensors"].as_object().unwrap();
    assert_eq!(file.tensors.len(), expected.len(), "tensor count");
    let mut summary = Summary::default();
    for info in &file.tensors {
        let stored = info.stored.expect("every tensor of the test files has a supported type");
        if only_quantized && !stored.is_quantized() {
            continue;
        }
        let want = &expected[&info.name];
        let shape: Vec<u64> = want["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap()).collect();
        assert_eq!(info.shape, shape, "{}", info.name);
        let (tensor, stats) =
            block_on(file.constant_tensor(ctx, &source, &info.name, options, &mut |_, _| {})).unwrap();
        assert!(stats.peak_host_bytes <= 2 * options.chunk_bytes, "{}: {stats:?}", info.name);
        let data_type = tensor.descriptor().data_type;
        let (values, bits) = decode(data_type, &read_back(ctx, &tensor));
        tensor.destroy();
        assert_eq!(values.len() as u64, want["count"].as_u64().unwrap(), "{}", info.name);
        let sum: f64 = values.iter().sum();
        let sum_abs: f64 = want["sum_abs"].as_f64().unwrap();
        let first: Vec<f64> = want["first"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        summary.tensors += 1;
        summary.elements += values.len() as u64;
        summary.peak_host_bytes = summary.peak_host_bytes.max(stats.peak_host_bytes);
        // float16 rounds to 11 significant bits: half an ulp is 2^-11 of the magnitude, or half
        // the smallest subnormal (2^-25) near zero.
        let (tolerance, floor) =
            if data_type == DataType::Float16 { (2f64.powi(-11), 2f64.powi(-25)) } else { (0.0, 0.0) };
        for (i, (&got, &w)) in values.iter().zip(&first).enumerate() {
            // The JSON reader may be an ulp off in float64; the values are float32.
            let w = w as f32 as f64;
            let error = (got - w).abs();
            summary.max_first_error = summary.max_first_error.max(error);
            if w != 0.0 {
                summary.max_first_relative_error = summary.max_first_relative_error.max(error / w.abs());
            }
            assert!(error <= tolerance * w.abs() + floor, "{} value {i}: {got} vs {w}", info.name);
        }
        let sum_error = (sum - want["sum"].as_f64().unwrap()).abs();
        summary.max_sum_error_ratio = summary.max_sum_error_ratio.max(sum_error / sum_abs.max(f64::MIN_POSITIVE));
        if data_type == DataType::Float16 {
            assert!(
                sum_error <= tolerance * sum_abs + floor * values.len() as f64,
                "{}: sum {sum} vs {}",
                info.name,
                want["sum"]
            );
        } else {
            // Exact: the same 32-bit values in every position.
            let checksum = bits
                .iter()
                .enumerate()
                .fold(0u64, |acc, (i, &b)| acc.wrapping_add((b as u64).wrapping_mul(i as u64 % 65521 + 1)));
            assert_eq!(checksum, want["checksum"].as_u64().unwrap(), "{}: checksum", info.name);
            assert!(sum_error <= 1e-9 * sum_abs.max(1.0), "{}: sum {sum} vs {}", info.name, want["sum"]);
            summary.exact += 1;
        }
    }
    summary
}

#[test]
fn real_files_match_the_python_readers() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("models-cache");
    let safetensors = dir.join("all-MiniLM-L6-v2.safetensors");
    let gguf = dir.join("SmolLM2-135M-Instruct.Q4_1.gguf");
    if !safetensors.exists() || !gguf.exists() || !dir.join("SmolLM2-135M-Instruct.Q4_1.gguf.json").exists() {
        let message = "the real weight files are missing: run tools/fetch_test_models.sh";
        assert!(std::env::var("WEBNN_REAL_WEIGHTS").as_deref() != Ok("required"), "{message}");
        println!("skipped: {message}");
        return;
    }
    let ctx = context();
    let options = |float_type| LoadOptions { float_type, chunk_bytes: 1 << 20, max_chunks_in_flight: 4, widen_on_gpu: None };
    let st = compare(&ctx, &safetensors, &options(None), false);
    println!("all-MiniLM-L6-v2.safetensors: {st:?}");
    let exact = compare(&ctx, &gguf, &options(Some(DataType::Float32)), false);
    println!("SmolLM2-135M-Instruct.Q4_1.gguf as float32: {exact:?}");
    let halves = compare(&ctx, &gguf, &options(Some(DataType::Float16)), true);
    println!("SmolLM2-135M-Instruct.Q4_1.gguf quantized tensors as float16: {halves:?}");
    assert_eq!(st.exact, 104);
    assert_eq!(exact.exact, 272);
    assert_eq!(halves.tensors, 211);
}
