//! Real weight files through the loader to the GPU and back, against the values the Python
//! readers (safetensors/numpy, gguf-py) read: `tools/fetch_test_models.sh` fetches the files and
//! runs `tools/dump_weights.py`, which writes per tensor a hash of every value, exact to the bit
//! (float32 or int32, and the values rounded to float16). Ignored by a plain `cargo test`: the
//! CI stage `real_weights` fetches the files and runs it with `--include-ignored`, and missing
//! files fail it.
#![cfg(not(target_arch = "wasm32"))] // native: `wasm-pack test` builds every test target for wasm32

mod common;

use std::path::Path;

use common::weight_files::read_back;
use common::{block_on, context};
use webnn_wgpu::graph::DataType;
use webnn_wgpu::backend::webgpu::Context;
use webnn_wgpu::weights::{FileSource, LoadOptions, WeightFile};

/// `tools/dump_weights.py`'s FORMAT: the JSON layout this test reads.
const FORMAT: u64 = 2;

/// `tools/dump_weights.py`'s key of position `i`: splitmix64(i) with the low bit set, so that a
/// change of any one value changes the hash.
fn key(i: u64) -> u64 {
    let mut z = (i + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) | 1
}

/// sum(bits[i] * key(i)) mod 2^64 over the little-endian words of `bytes` (4 or 2 bytes each).
fn value_hash(bytes: &[u8], word: usize) -> u64 {
    bytes.chunks_exact(word).enumerate().fold(0u64, |acc, (i, b)| {
        let bits = if word == 4 { u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as u64 } else { u16::from_le_bytes([b[0], b[1]]) as u64 };
        acc.wrapping_add(bits.wrapping_mul(key(i as u64)))
    })
}

#[derive(Default, Debug)]
struct Summary {
    tensors: usize,
    elements: u64,
    peak_host_bytes: u64,
}

/// Loads every tensor of `path` with `options` (`only_quantized`: its quantized tensors) and
/// compares every value with `path.json`: bit for bit, float32 and int32 values with `hash32`,
/// float16 ones with `hash16` (the reader's float32 values rounded to nearest even).
fn compare(ctx: &Context, path: &Path, options: &LoadOptions, only_quantized: bool) -> Summary {
    let json = path.with_extension(format!("{}.json", path.extension().unwrap().to_str().unwrap()));
    let reference: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).expect("run tools/fetch_test_models.sh")).unwrap();
    assert_eq!(reference["format"].as_u64(), Some(FORMAT), "{}: run tools/fetch_test_models.sh", json.display());
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
        let bytes = read_back(ctx, &tensor);
        tensor.destroy();
        let (word, hash) = match data_type {
            DataType::Float32 | DataType::Int32 => (4, "hash32"),
            DataType::Float16 => (2, "hash16"),
            other => panic!("{}: unexpected type {other}", info.name),
        };
        let count = want["count"].as_u64().unwrap();
        assert_eq!(bytes.len() as u64, count * word as u64, "{}: byte length", info.name);
        assert_eq!(Some(value_hash(&bytes, word)), want[hash].as_u64(), "{}: {hash} of every value", info.name);
        summary.tensors += 1;
        summary.elements += count;
        summary.peak_host_bytes = summary.peak_host_bytes.max(stats.peak_host_bytes);
    }
    summary
}

#[test]
#[ignore = "needs models-cache/ (tools/fetch_test_models.sh): the real_weights stage runs it"]
fn real_files_match_the_python_readers() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("models-cache");
    let safetensors = dir.join("all-MiniLM-L6-v2.safetensors");
    let gguf = dir.join("SmolLM2-135M-Instruct.Q4_1.gguf");
    for f in [&safetensors, &gguf] {
        assert!(f.exists(), "{} is missing: run tools/fetch_test_models.sh", f.display());
    }
    let ctx = context();
    let options = |float_type| LoadOptions { float_type, chunk_bytes: 1 << 20, max_chunks_in_flight: 4, widen_on_gpu: None };
    let st = compare(&ctx, &safetensors, &options(None), false);
    println!("all-MiniLM-L6-v2.safetensors: {st:?}");
    let exact = compare(&ctx, &gguf, &options(Some(DataType::Float32)), false);
    println!("SmolLM2-135M-Instruct.Q4_1.gguf as float32: {exact:?}");
    let halves = compare(&ctx, &gguf, &options(Some(DataType::Float16)), true);
    println!("SmolLM2-135M-Instruct.Q4_1.gguf quantized tensors as float16: {halves:?}");
    assert_eq!(st.tensors, 104);
    assert_eq!(exact.tensors, 272);
    assert_eq!(halves.tensors, 211);
}
