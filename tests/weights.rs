//! The weight loader: safetensors and GGUF headers, streaming to the GPU with type conversion,
//! bounded host memory, and bad files that must fail with messages naming file, tensor, problem.
#![cfg(not(target_arch = "wasm32"))] // native: `wasm-pack test` builds every test target for wasm32

mod common;

use common::weight_files::{read_back, safetensors, safetensors_raw, Gguf};
use common::{block_on, context, Rng};
use std::rc::Rc;

use half::f16;
use webnn_wgpu::graph::DataType;
use webnn_wgpu::backend::webgpu::{Context, Tensor};
use webnn_wgpu::weights::{BytesSource, LoadOptions, StoredType, WeightFile};
use webnn_wgpu::Error;

fn open(name: &str, bytes: Vec<u8>) -> (Rc<BytesSource>, webnn_wgpu::Result<WeightFile>) {
    let source = Rc::new(BytesSource::new(name, bytes));
    let file = block_on(WeightFile::open(&*source));
    (source, file)
}

fn load(
    ctx: &Context,
    source: &Rc<BytesSource>,
    file: &WeightFile,
    name: &str,
    options: &LoadOptions,
) -> webnn_wgpu::Result<Vec<u8>> {
    let (tensor, _) = block_on(file.constant_tensor(ctx, source, name, options, &mut |_, _| {}))?;
    Ok(read_back(ctx, &tensor))
}

fn small_chunks(float_type: Option<DataType>) -> LoadOptions {
    LoadOptions { float_type, chunk_bytes: 64, max_chunks_in_flight: 2, widen_on_gpu: None }
}

fn le<T: Copy, const N: usize>(values: &[T], f: impl Fn(T) -> [u8; N]) -> Vec<u8> {
    values.iter().flat_map(|&v| f(v)).collect()
}

#[test]
fn safetensors_types_stream_and_convert() {
    let ctx = context();
    let mut rng = Rng::new(7);
    let n = 100usize;
    let f32s: Vec<f32> = (0..n).map(|_| rng.uniform(-3.0, 3.0) as f32).collect();
    let f16s: Vec<f16> = f32s.iter().map(|&x| f16::from_f32(x)).collect();
    let bf16_bits: Vec<u16> = f32s.iter().map(|&x| (x.to_bits() >> 16) as u16).collect();
    let i32s: Vec<i32> = (0..n as i32).map(|i| i * 1_000_003 - 7).collect();
    let i64s: Vec<i64> = (0..n as i64).map(|i| i * -21_000_000).collect();
    let bools: Vec<u8> = (0..n).map(|i| [0u8, 1, 2][i % 3]).collect();
    let u8s: Vec<u8> = (0..n).map(|i| (i * 7) as u8).collect();
    let bytes = safetensors(&[
        ("f32", "F32", vec![10, 10], le(&f32s, f32::to_le_bytes)),
        ("f16", "F16", vec![100], le(&f16s, f16::to_le_bytes)),
        ("bf16", "BF16", vec![4, 25], le(&bf16_bits, u16::to_le_bytes)),
        ("i32", "I32", vec![100], le(&i32s, i32::to_le_bytes)),
        ("u32", "U32", vec![100], le(&i32s, |v| (v as u32).to_le_bytes())),
        ("i8", "I8", vec![100], u8s.clone()),
        ("u8", "U8", vec![100], u8s.clone()),
        ("i64", "I64", vec![100], le(&i64s, i64::to_le_bytes)),
        ("bool", "BOOL", vec![100], bools.clone()),
    ]);
    let (source, file) = open("types.safetensors", bytes);
    let file = file.unwrap();
    assert_eq!(file.tensors.len(), 9);
    assert_eq!(file.tensor("bf16").unwrap().shape, vec![4, 25]);
    assert_eq!(file.tensor("bf16").unwrap().stored, Some(StoredType::BF16));
    let opts = small_chunks(None);
    assert_eq!(load(&ctx, &source, &file, "f32", &opts).unwrap(), le(&f32s, f32::to_le_bytes));
    assert_eq!(load(&ctx, &source, &file, "f16", &opts).unwrap(), le(&f16s, f16::to_le_bytes));
    // floatType float32 widens float16 exactly (float32 graphs, adapters without shader-f16).
    let f16_as_f32: Vec<f32> = f16s.iter().map(|x| x.to_f32()).collect();
    let widen = small_chunks(Some(DataType::Float32));
    assert_eq!(file.descriptor(&ctx, file.tensor("f16").unwrap(), &widen).unwrap().data_type, DataType::Float32);
    assert_eq!(load(&ctx, &source, &file, "f16", &widen).unwrap(), le(&f16_as_f32, f32::to_le_bytes));
    let bf16_as_f32: Vec<f32> = bf16_bits.iter().map(|&b| f32::from_bits((b as u32) << 16)).collect();
    assert_eq!(load(&ctx, &source, &file, "bf16", &opts).unwrap(), le(&bf16_as_f32, f32::to_le_bytes));
    let bf16_as_f16: Vec<f16> = bf16_as_f32.iter().map(|&x| f16::from_f64(x as f64)).collect();
    assert_eq!(
        load(&ctx, &source, &file, "bf16", &small_chunks(Some(DataType::Float16))).unwrap(),
        le(&bf16_as_f16, f16::to_le_bytes)
    );
    assert_eq!(load(&ctx, &source, &file, "i32", &opts).unwrap(), le(&i32s, i32::to_le_bytes));
    assert_eq!(load(&ctx, &source, &file, "u32", &opts).unwrap(), le(&i32s, i32::to_le_bytes));
    assert_eq!(load(&ctx, &source, &file, "i8", &opts).unwrap(), u8s);
    assert_eq!(load(&ctx, &source, &file, "u8", &opts).unwrap(), u8s);
    let i64_as_i32: Vec<i32> = i64s.iter().map(|&v| v as i32).collect();
    assert_eq!(load(&ctx, &source, &file, "i64", &opts).unwrap(), le(&i64_as_i32, i32::to_le_bytes));
    let (bool_tensor, _) = block_on(file.constant_tensor(&ctx, &source, "bool", &opts, &mut |_, _| {})).unwrap();
    assert_eq!(bool_tensor.descriptor().data_type, DataType::Uint8);
    assert_eq!(read_back(&ctx, &bool_tensor), bools.iter().map(|&b| (b != 0) as u8).collect::<Vec<_>>());
}

#[test]
fn every_float16_widens_to_float32_on_the_gpu_as_the_cpu_does() {
    let ctx = context();
    // Every bit pattern (zeros, subnormals, infinities, NaNs) and one more: an odd count.
    let bits: Vec<u16> = (0..=u16::MAX).chain([0x3c00]).collect();
    let want: Vec<u8> = bits.iter().flat_map(|&b| f16::from_bits(b).to_f32().to_bits().to_le_bytes()).collect();
    let bytes = safetensors(&[("all", "F16", vec![bits.len() as u64], le(&bits, u16::to_le_bytes))]);
    let (source, file) = open("all.safetensors", bytes);
    let file = file.unwrap();
    let widen = Some(DataType::Float32);
    for on_gpu in [Some(true), Some(false), None] {
        for chunk_bytes in [64, 4 << 20] {
            let options = LoadOptions { float_type: widen, chunk_bytes, max_chunks_in_flight: 2, widen_on_gpu: on_gpu };
            let got = load(&ctx, &source, &file, "all", &options).unwrap();
            assert!(got == want, "widen_on_gpu {on_gpu:?}, chunk_bytes {chunk_bytes}: not the CPU's float32 bits");
        }
    }
}

#[test]
fn int64_that_int32_cannot_hold_is_a_type_error_naming_the_element() {
    let ctx = context();
    let values = [1i64, 2, 1 << 40];
    let (source, file) =
        open("big.safetensors", safetensors(&[("ids", "I64", vec![3], le(&values, i64::to_le_bytes))]));
    let err = load(&ctx, &source, &file.unwrap(), "ids", &LoadOptions::default()).unwrap_err();
    assert_eq!(err.name(), "TypeError", "{err}");
    for part in ["big.safetensors", "'ids'", "element 2", "1099511627776", "int32"] {
        assert!(err.message().contains(part), "{err} lacks {part}");
    }
}

#[test]
fn unsupported_types_are_listed_and_rejected_on_load() {
    let ctx = context();
    let (source, file) = open("f64.safetensors", safetensors(&[("w", "F64", vec![2], vec![0; 16])]));
    let file = file.unwrap();
    assert_eq!(file.tensor("w").unwrap().stored, None);
    let err = load(&ctx, &source, &file, "w", &LoadOptions::default()).unwrap_err();
    assert_eq!(err.name(), "TypeError");
    assert!(
        err.message().contains("f64.safetensors") && err.message().contains("'w'") && err.message().contains("F64"),
        "{err}"
    );

    let gguf = Gguf::default().tensor("blk.0.q6", &[256], 14, vec![0; 210]).build();
    let (source, file) = open("q6.gguf", gguf);
    let file = file.unwrap();
    let err = load(&ctx, &source, &file, "blk.0.q6", &LoadOptions::default()).unwrap_err();
    assert_eq!(err.name(), "TypeError");
    assert!(
        err.message().contains("q6.gguf") && err.message().contains("'blk.0.q6'") && err.message().contains("Q6_K"),
        "{err}"
    );
    let err = load(&ctx, &source, &file, "missing", &LoadOptions::default()).unwrap_err();
    assert!(err.name() == "TypeError" && err.message().contains("'missing'"), "{err}");
}

/// Random ggml blocks and their values computed in float64 from the block layout.
fn random_blocks(rng: &mut Rng, t: StoredType, blocks: usize) -> (Vec<u8>, Vec<f64>) {
    let mut bytes = Vec::new();
    let mut values = Vec::new();
    for _ in 0..blocks {
        let d = f16::from_f64(rng.uniform(-0.05, 0.05));
        bytes.extend_from_slice(&d.to_le_bytes());
        let d = d.to_f64();
        match t {
            StoredType::Q8_0 => {
                for _ in 0..32 {
                    let q = rng.below(256) as u8;
                    bytes.push(q);
                    values.push(d * (q as i8) as f64);
                }
            }
            StoredType::Q4_0 | StoredType::Q4_1 => {
                let m = if t == StoredType::Q4_1 {
                    let m = f16::from_f64(rng.uniform(-0.5, 0.5));
                    bytes.extend_from_slice(&m.to_le_bytes());
                    m.to_f64()
                } else {
                    0.0
                };
                let qs: Vec<u8> = (0..16).map(|_| rng.below(256) as u8).collect();
                bytes.extend_from_slice(&qs);
                let value = |nibble: u8| match t {
                    StoredType::Q4_0 => (nibble as f64 - 8.0) * d,
                    _ => nibble as f64 * d + m,
                };
                values.extend(qs.iter().map(|&q| value(q & 0x0F)));
                values.extend(qs.iter().map(|&q| value(q >> 4)));
            }
            _ => unreachable!(),
        }
    }
    (bytes, values)
}

#[test]
fn gguf_types_dequantize_to_float32_and_float16() {
    let ctx = context();
    let mut rng = Rng::new(3);
    let plain: Vec<f32> = (0..96).map(|_| rng.uniform(-1.0, 1.0) as f32).collect();
    let halves: Vec<f16> = plain.iter().map(|&x| f16::from_f32(x)).collect();
    let mut builder = Gguf::default()
        .kv_string("general.architecture", "test")
        .kv("test.array", 9, &[&5u32.to_le_bytes()[..], &2u64.to_le_bytes(), &[0, 0, 0, 0, 1, 0, 0, 0]].concat())
        .alignment(64)
        .tensor("plain.f32", &[32, 3], 0, le(&plain, f32::to_le_bytes))
        .tensor("plain.f16", &[96], 1, le(&halves, f16::to_le_bytes));
    let mut expected = Vec::new();
    for (name, t, code) in [("q8_0", StoredType::Q8_0, 8), ("q4_0", StoredType::Q4_0, 2), ("q4_1", StoredType::Q4_1, 3)]
    {
        let (bytes, values) = random_blocks(&mut rng, t, 12);
        builder = builder.tensor(name, &[64, 6], code, bytes);
        expected.push((name, values));
    }
    let (source, file) = open("quant.gguf", builder.build());
    let file = file.unwrap();
    assert_eq!(file.tensors.len(), 5);
    assert_eq!(file.tensor("q4_1").unwrap().shape, vec![6, 64], "ggml's ne order is reversed to row-major");
    assert_eq!(file.tensor("plain.f32").unwrap().offset % 64, 0);
    assert!(matches!(file.metadata("test.array"), Some(webnn_wgpu::weights::MetadataValue::Array(a)) if a.len() == 2));
    let f32_opts = small_chunks(Some(DataType::Float32));
    let f16_opts = small_chunks(Some(DataType::Float16));
    assert_eq!(load(&ctx, &source, &file, "plain.f32", &f32_opts).unwrap(), le(&plain, f32::to_le_bytes));
    assert_eq!(load(&ctx, &source, &file, "plain.f16", &f16_opts).unwrap(), le(&halves, f16::to_le_bytes));
    let widened: Vec<f32> = halves.iter().map(|x| x.to_f32()).collect();
    assert_eq!(load(&ctx, &source, &file, "plain.f16", &f32_opts).unwrap(), le(&widened, f32::to_le_bytes));
    for (name, values) in expected {
        let as_f32: Vec<f32> = values.iter().map(|&v| v as f32).collect();
        assert_eq!(load(&ctx, &source, &file, name, &f32_opts).unwrap(), le(&as_f32, f32::to_le_bytes), "{name}");
        let as_f16: Vec<f16> = as_f32.iter().map(|&v| f16::from_f32(v)).collect();
        assert_eq!(load(&ctx, &source, &file, name, &f16_opts).unwrap(), le(&as_f16, f16::to_le_bytes), "{name}");
    }
}

#[test]
fn peak_host_memory_is_a_few_chunks_and_progress_reaches_the_total() {
    let ctx = context();
    let n = 1 << 20; // 2 MiB of bfloat16 becoming 4 MiB of float32
    let bits: Vec<u16> = (0..n).map(|i| (i as u16) & 0x7F7F).collect();
    let bytes = safetensors(&[("big", "BF16", vec![n as u64], le(&bits, u16::to_le_bytes))]);
    let (source, file) = open("big.safetensors", bytes);
    let file = file.unwrap();
    let chunk = 64 << 10;
    let options =
        LoadOptions { float_type: Some(DataType::Float32), chunk_bytes: chunk, max_chunks_in_flight: 3, widen_on_gpu: None };
    let mut calls = Vec::new();
    let (tensor, stats) =
        block_on(file.constant_tensor(&ctx, &source, "big", &options, &mut |a, b| calls.push((a, b)))).unwrap();
    let total = 2 * n as u64;
    // A chunk converted to float32 is the chunk size; as read, half of it.
    assert_eq!(stats.chunks, total / (chunk / 2));
    assert_eq!(stats.bytes_read, total);
    assert_eq!(stats.bytes_written, 2 * total);
    assert_eq!(stats.peak_host_bytes, chunk + chunk / 2, "{stats:?}");
    assert!(stats.peak_host_bytes * 10 < total);
    assert_eq!(calls.len() as u64, stats.chunks);
    assert!(calls.windows(2).all(|w| w[0].0 < w[1].0));
    assert_eq!(*calls.last().unwrap(), (total, total));
    let expected: Vec<f32> = bits.iter().map(|&b| f32::from_bits((b as u32) << 16)).collect();
    assert_eq!(read_back(&ctx, &tensor), le(&expected, f32::to_le_bytes));
    assert_eq!(ctx.memory_info().bytes_streamed_from_disk, total);
}

/// The error is a `DataError` (or `kind`) whose message names everything in `parts`.
fn assert_error(result: webnn_wgpu::Result<WeightFile>, kind: &str, parts: &[&str]) {
    let err: Error = result.expect_err("the file must be rejected");
    assert_eq!(err.name(), kind, "{err}");
    for part in parts {
        assert!(err.message().contains(part), "'{err}' does not mention '{part}'");
    }
}

fn open_err(name: &str, bytes: Vec<u8>, parts: &[&str]) {
    assert_error(open(name, bytes).1, "DataError", &[&[name][..], parts].concat());
}

#[test]
fn bad_safetensors_files_are_data_errors_naming_file_tensor_and_problem() {
    let good = safetensors(&[("a", "F32", vec![2], vec![0; 8]), ("b", "F16", vec![2], vec![0; 4])]);
    open_err("short.safetensors", vec![1, 2, 3], &["too short"]);
    open_err("truncated.safetensors", good[..good.len() - 3].to_vec(), &["'b'", "past the end"]);
    let mut lying = good.clone();
    lying[..8].copy_from_slice(&(1u64 << 40).to_le_bytes());
    open_err("lying.safetensors", lying, &["claims 1099511627776 bytes"]);
    // A terabyte header length in a file that is really that long must not be allocated either.
    open_err("json.safetensors", safetensors_raw("{\"a\": [1, 2", &[]), &["not valid JSON"]);
    open_err("array.safetensors", safetensors_raw("[1, 2]", &[]), &["not an object"]);
    let data = vec![0u8; 16];
    open_err(
        "range.safetensors",
        safetensors_raw(r#"{"w":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}}"#, &data),
        &["'w'", "past the end"],
    );
    open_err(
        "overlap.safetensors",
        safetensors_raw(
            r#"{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}"#,
            &data,
        ),
        &["'b'", "overlap", "'a'"],
    );
    open_err(
        "gap.safetensors",
        safetensors_raw(r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}"#, &data),
        &["'a'", "not covered"],
    );
    open_err(
        "trailing.safetensors",
        safetensors_raw(r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#, &data),
        &["not covered"],
    );
    open_err(
        "shape.safetensors",
        safetensors_raw(r#"{"w":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}}"#, &data),
        &["'w'", "needs 12 bytes", "hold 16"],
    );
    open_err(
        "dtype.safetensors",
        safetensors_raw(r#"{"w":{"dtype":"Q9","shape":[4],"data_offsets":[0,16]}}"#, &data),
        &["'w'", "unknown dtype 'Q9'"],
    );
    open_err(
        "huge.safetensors",
        safetensors_raw(
            r#"{"w":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,16]}}"#,
            &data,
        ),
        &["'w'", "more elements than can be addressed"],
    );
    open_err(
        "terabytes.safetensors",
        safetensors_raw(r#"{"w":{"dtype":"F32","shape":[1099511627776],"data_offsets":[0,4398046511104]}}"#, &data),
        &["'w'", "past the end"],
    );
    open_err(
        "fields.safetensors",
        safetensors_raw(r#"{"w":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}}"#, &data),
        &["'w'", "shape"],
    );
    open_err("metadata.safetensors", safetensors_raw(r#"{"__metadata__":{"n":1}}"#, &[]), &["__metadata__", "'n'"]);
}

#[test]
fn bad_gguf_files_are_data_errors_naming_file_tensor_and_problem() {
    let good = Gguf::default().tensor("w", &[32], 0, vec![0; 128]).build();
    assert!(open("good.gguf", good.clone()).1.is_ok());
    let mut magic = good.clone();
    magic[..4].copy_from_slice(b"GGUX");
    // Not GGUF's magic, so it is read as safetensors and fails there; a GGUF magic with a bad
    // rest is checked by the GGUF reader.
    assert_error(open("magic.gguf", magic).1, "DataError", &["magic.gguf"]);
    assert!(webnn_wgpu::weights::gguf::parse_header("m.gguf", b"GGUXxxxxxxxxxxxxxxxxxxxx", 24)
        .unwrap_err()
        .message()
        .contains("not a GGUF file"));
    let mut version = good.clone();
    version[4..8].copy_from_slice(&1u32.to_le_bytes());
    open_err("version.gguf", version, &["unsupported GGUF version 1"]);
    let mut tensors = good.clone();
    tensors[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
    open_err("tensors.gguf", tensors, &["tensor count", "18446744073709551615"]);
    let mut kvs = good.clone();
    kvs[16..24].copy_from_slice(&(1u64 << 40).to_le_bytes());
    open_err("kvs.gguf", kvs, &["key/value count", "1099511627776"]);
    open_err("truncated.gguf", good[..good.len() - 1].to_vec(), &["'w'", "past the end"]);
    open_err("header.gguf", good[..30].to_vec(), &["tensor count claims 1 entries"]);
    open_err("info.gguf", good[..50].to_vec(), &["tensor 'w'", "past the end"]);
    let align = Gguf::default().kv("general.alignment", 4, &48u32.to_le_bytes()).tensor("w", &[32], 0, vec![0; 128]);
    open_err("align.gguf", align.build(), &["general.alignment", "power of two"]);
    let align = Gguf::default().kv("general.alignment", 10, &64u64.to_le_bytes());
    open_err("align64.gguf", align.build(), &["general.alignment", "uint32"]);
    let mut misaligned = Gguf::default().tensor("a", &[8], 0, vec![0; 32]).tensor("b", &[8], 0, vec![0; 32]).build();
    // b's offset is the last 8 bytes of its tensor info.
    let info_end = 24 + (8 + 1 + 4 + 8 + 4 + 8) * 2;
    misaligned[info_end - 8..info_end].copy_from_slice(&16u64.to_le_bytes());
    open_err("misaligned.gguf", misaligned, &["'b'", "not a multiple of the alignment 32"]);
    let mut overlap =
        Gguf::default().alignment(8).tensor("a", &[8], 0, vec![0; 32]).tensor("b", &[8], 0, vec![0; 32]).build();
    let kv_len = 8 + "general.alignment".len() + 4 + 4;
    let info_end = 24 + kv_len + (8 + 1 + 4 + 8 + 4 + 8) * 2;
    overlap[info_end - 8..info_end].copy_from_slice(&8u64.to_le_bytes());
    open_err("overlap.gguf", overlap, &["'b'", "overlaps", "'a'"]);
    open_err(
        "type.gguf",
        Gguf::default().tensor("w", &[32], 99, vec![0; 128]).build(),
        &["'w'", "unknown ggml type 99"],
    );
    open_err("blocks.gguf", Gguf::default().tensor("q", &[30], 8, vec![0; 34]).build(), &["'q'", "Q8_0 blocks"]);
    open_err(
        "dims.gguf",
        Gguf::default().tensor("w", &[1, 1, 1, 1, 1], 0, vec![0; 4]).build(),
        &["'w'", "5 dimensions"],
    );
    // A tensor claiming terabytes: rejected from the header, nothing allocated.
    open_err(
        "terabytes.gguf",
        Gguf::default().tensor("w", &[1 << 20, 1 << 20, 1 << 10], 0, vec![0; 128]).build(),
        &["'w'", "past the end"],
    );
    open_err(
        "overflow.gguf",
        Gguf::default().tensor("w", &[1 << 32, 1 << 32, 1 << 32], 0, vec![0; 128]).build(),
        &["'w'", "more elements than can be addressed"],
    );
    let mut string = Gguf::default().kv_string("general.name", "abc").build();
    string[24 + 8 + 12 + 4..24 + 8 + 12 + 4 + 8].copy_from_slice(&(1u64 << 50).to_le_bytes());
    open_err("string.gguf", string, &["'general.name'", "past the end"]);
    let mut array =
        Gguf::default().kv("a", 9, &[&4u32.to_le_bytes()[..], &1u64.to_le_bytes(), &[0; 4]].concat()).build();
    array[24 + 9 + 4 + 4..24 + 9 + 4 + 4 + 8].copy_from_slice(&(1u64 << 61).to_le_bytes());
    open_err("array.gguf", array, &["'a'", "claims 2305843009213693952 entries"]);
    open_err("value.gguf", Gguf::default().kv("k", 77, &[0; 8]).build(), &["'k'", "unknown value type 77"]);
}

#[test]
fn a_streamed_constant_goes_to_the_disk_tier_and_streams_back_bit_identical() {
    use webnn_wgpu::graph::{GraphBuilder, OperandDescriptor};
    use webnn_wgpu::memory::Residency;
    use webnn_wgpu::ops::elementwise_binary::BinaryOp;
    use webnn_wgpu::ops::Op;
    use webnn_wgpu::backend::webgpu::TensorDescriptor;

    let ctx = context();
    let mut rng = Rng::new(11);
    let (blocks, values) = random_blocks(&mut rng, StoredType::Q4_1, 2);
    let (source, file) = open("graph.gguf", Gguf::default().tensor("w", &[64], 3, blocks).build());
    let file = file.unwrap();
    let options = LoadOptions { float_type: Some(DataType::Float32), ..LoadOptions::default() };
    let (weights, _) = block_on(file.constant_tensor(&ctx, &source, "w", &options, &mut |_, _| {})).unwrap();
    let d = OperandDescriptor::new(DataType::Float32, vec![64]);
    assert_eq!(weights.descriptor(), &d);
    let mut b = GraphBuilder::new(&ctx).unwrap();
    let x = b.input("x", d.clone()).unwrap();
    let w = b.constant_tensor(&weights).unwrap();
    let y = b.operator1(Op::Binary(BinaryOp::Add), &[x, w], "").unwrap();
    let graph = block_on(b.build(&[("y".to_string(), y)])).unwrap();
    let tensor = |readable, writable| {
        block_on(ctx.create_tensor(TensorDescriptor { operand: d.clone(), readable, writable })).unwrap()
    };
    let (x, y) = (tensor(false, true), tensor(true, false));
    ctx.write_tensor(&x, &le(&[1.0f32; 64], f32::to_le_bytes)).unwrap();
    let want: Vec<f32> = values.iter().map(|&v| v as f32 + 1.0).collect();
    let run = || {
        ctx.dispatch(&graph, &[("x".into(), x.clone())], &[("y".into(), y.clone())]).unwrap();
        assert_eq!(block_on(ctx.read_tensor(&y)).unwrap(), le(&want, f32::to_le_bytes));
    };
    run();
    // The disk tier: no host copy, no device copy; dispatch and swapIn stream it again.
    let streamed = ctx.memory_info().bytes_streamed_from_disk;
    let device = ctx.memory_info().device_bytes;
    block_on(graph.swap_out(Residency::Disk)).unwrap();
    assert_eq!(graph.residency(), Residency::Disk);
    assert_eq!((graph.host_bytes(), graph.device_bytes()), (0, 0));
    assert!(weights.buffer().is_none(), "the constant left the GPU");
    assert_eq!(ctx.memory_info().device_bytes, device - 256, "its 256 device bytes are freed");
    assert_eq!(ctx.memory_info().host_bytes, 0);
    run();
    assert_eq!(graph.residency(), Residency::Device);
    let file_bytes = 2 * 20;
    assert_eq!(ctx.memory_info().bytes_streamed_from_disk, streamed + file_bytes);
    block_on(graph.swap_out(Residency::Disk)).unwrap();
    block_on(graph.swap_in()).unwrap();
    assert_eq!(ctx.memory_info().bytes_streamed_from_disk, streamed + 2 * file_bytes);
    run();
    // Under a budget the graph is evicted to disk and streamed again on its next dispatch.
    block_on(graph.swap_out(Residency::Host)).unwrap();
    assert_eq!(graph.residency(), Residency::Disk, "file-backed constants have no host tier");
    run();
}

#[test]
fn float16_widened_on_the_gpu_comes_back_from_the_disk_tier_bit_identical() {
    use webnn_wgpu::graph::{GraphBuilder, OperandDescriptor};
    use webnn_wgpu::memory::Residency;
    use webnn_wgpu::ops::elementwise_binary::BinaryOp;
    use webnn_wgpu::ops::Op;
    use webnn_wgpu::backend::webgpu::TensorDescriptor;

    let ctx = context();
    let mut rng = Rng::new(12);
    let n = 999u32;
    let halves: Vec<f16> = (0..n).map(|_| f16::from_f64(rng.uniform(-2.0, 2.0))).collect();
    let want: Vec<u8> = halves.iter().flat_map(|h| h.to_f32().to_le_bytes()).collect();
    let (source, file) = open("half.safetensors", safetensors(&[("w", "F16", vec![n as u64], le(&halves, f16::to_le_bytes))]));
    let file = file.unwrap();
    let options = LoadOptions { float_type: Some(DataType::Float32), widen_on_gpu: Some(true), ..LoadOptions::default() };
    let (weights, _) = block_on(file.constant_tensor(&ctx, &source, "w", &options, &mut |_, _| {})).unwrap();
    let d = OperandDescriptor::new(DataType::Float32, vec![n]);
    let mut b = GraphBuilder::new(&ctx).unwrap();
    let x = b.input("x", d.clone()).unwrap();
    let w = b.constant_tensor(&weights).unwrap();
    let y = b.operator1(Op::Binary(BinaryOp::Add), &[x, w], "").unwrap();
    let graph = block_on(b.build(&[("y".to_string(), y)])).unwrap();
    let tensor = |readable, writable| {
        block_on(ctx.create_tensor(TensorDescriptor { operand: d.clone(), readable, writable })).unwrap()
    };
    let (x, y) = (tensor(false, true), tensor(true, false));
    ctx.write_tensor(&x, &vec![0u8; 4 * n as usize]).unwrap();
    let run = || {
        ctx.dispatch(&graph, &[("x".into(), x.clone())], &[("y".into(), y.clone())]).unwrap();
        assert!(block_on(ctx.read_tensor(&y)).unwrap() == want, "x + w differs from the float16 weights widened");
    };
    run();
    let device = ctx.memory_info().device_bytes;
    for _ in 0..3 {
        // Back from the disk tier by dispatch (the widening rides on the dispatch's submission)
        // and by swapIn (it waits for the next submission, the read's).
        block_on(graph.swap_out(Residency::Disk)).unwrap();
        run();
        block_on(graph.swap_out(Residency::Disk)).unwrap();
        block_on(graph.swap_in()).unwrap();
        run();
    }
    assert_eq!(ctx.memory_info().device_bytes, device, "the staging buffers are gone");
}

#[test]
fn a_graph_evicted_while_its_widening_waits_does_not_spoil_the_next_submission() {
    use webnn_wgpu::graph::{GraphBuilder, OperandDescriptor};
    use webnn_wgpu::memory::Residency;
    use webnn_wgpu::ops::elementwise_binary::BinaryOp;
    use webnn_wgpu::ops::Op;
    use webnn_wgpu::backend::webgpu::{ContextOptions, TensorDescriptor};

    let n = 1000u32;
    let bytes = 4 * n as u64;
    // Room for the two tensors, one graph's constant and a staging buffer of float16 bytes.
    let budget = 3 * bytes + bytes / 2 + 64;
    let ctx = block_on(Context::new(ContextOptions { memory_budget: Some(budget), ..Default::default() })).unwrap();
    let mut rng = Rng::new(13);
    let mut halves = |_| (0..n).map(|_| f16::from_f64(rng.uniform(-2.0, 2.0))).collect::<Vec<f16>>();
    let (a, b) = (halves(0), halves(1));
    let file_bytes = safetensors(&[
        ("a", "F16", vec![n as u64], le(&a, f16::to_le_bytes)),
        ("b", "F16", vec![n as u64], le(&b, f16::to_le_bytes)),
    ]);
    let (source, file) = open("two.safetensors", file_bytes);
    let file = file.unwrap();
    let options = LoadOptions { float_type: Some(DataType::Float32), widen_on_gpu: Some(true), ..LoadOptions::default() };
    let d = OperandDescriptor::new(DataType::Float32, vec![n]);
    let tensor = |readable, writable| {
        block_on(ctx.create_tensor(TensorDescriptor { operand: d.clone(), readable, writable })).unwrap()
    };
    let (x, y) = (tensor(false, true), tensor(true, false));
    ctx.write_tensor(&x, &vec![0u8; bytes as usize]).unwrap();
    let graph = |name: &str| {
        let (w, _) = block_on(file.constant_tensor(&ctx, &source, name, &options, &mut |_, _| {})).unwrap();
        let mut builder = GraphBuilder::new(&ctx).unwrap();
        let input = builder.input("x", d.clone()).unwrap();
        let w = builder.constant_tensor(&w).unwrap();
        let sum = builder.operator1(Op::Binary(BinaryOp::Add), &[input, w], "").unwrap();
        block_on(builder.build(&[("y".to_string(), sum)])).unwrap()
    };
    let (ga, gb) = (graph("a"), graph("b"));
    let want = |h: &[f16]| h.iter().flat_map(|v| v.to_f32().to_le_bytes()).collect::<Vec<u8>>();
    block_on(ga.swap_out(Residency::Disk)).unwrap();
    block_on(gb.swap_out(Residency::Disk)).unwrap();
    // a's widening waits for the next submission; b's dispatch evicts a (the budget holds one
    // graph) and its submission records a's pass, which binds a's buffer: it must still be valid.
    block_on(ga.swap_in()).unwrap();
    ctx.dispatch(&gb, &[("x".into(), x.clone())], &[("y".into(), y.clone())]).unwrap();
    assert_eq!(ga.residency(), Residency::Disk, "b's dispatch evicted a");
    assert!(block_on(ctx.read_tensor(&y)).unwrap() == want(&b), "b's dispatch ran");
    ctx.dispatch(&ga, &[("x".into(), x.clone())], &[("y".into(), y.clone())]).unwrap();
    assert!(block_on(ctx.read_tensor(&y)).unwrap() == want(&a), "a streams back");
    assert!(ctx.take_uncaptured_error().is_none());
}

/// A graph `y = x + w` of a streamed constant, with its input and output tensors.
struct AddGraph {
    graph: webnn_wgpu::backend::webgpu::Graph,
    x: Tensor,
    y: Tensor,
}

impl AddGraph {
    fn new(ctx: &Context, source: &Rc<BytesSource>, file: &WeightFile, name: &str, options: &LoadOptions) -> AddGraph {
        use webnn_wgpu::graph::GraphBuilder;
        use webnn_wgpu::ops::elementwise_binary::BinaryOp;
        use webnn_wgpu::ops::Op;
        use webnn_wgpu::backend::webgpu::TensorDescriptor;
        let (w, _) = block_on(file.constant_tensor(ctx, source, name, options, &mut |_, _| {})).unwrap();
        let d = w.descriptor().clone();
        let mut b = GraphBuilder::new(ctx).unwrap();
        let x = b.input("x", d.clone()).unwrap();
        let c = b.constant_tensor(&w).unwrap();
        let sum = b.operator1(Op::Binary(BinaryOp::Add), &[x, c], "").unwrap();
        let graph = block_on(b.build(&[("y".to_string(), sum)])).unwrap();
        let tensor = |readable, writable| {
            block_on(ctx.create_tensor(TensorDescriptor { operand: d.clone(), readable, writable })).unwrap()
        };
        let (x, y) = (tensor(false, true), tensor(true, false));
        ctx.write_tensor(&x, &vec![0u8; d.byte_length() as usize]).unwrap();
        AddGraph { graph, x, y }
    }

    /// Dispatches the graph and reads `0 + w`.
    fn run(&self, ctx: &Context) -> Vec<u8> {
        ctx.dispatch(&self.graph, &[("x".into(), self.x.clone())], &[("y".into(), self.y.clone())]).unwrap();
        block_on(ctx.read_tensor(&self.y)).unwrap()
    }
}

#[test]
fn host_copies_bring_file_backed_graphs_back_without_reading_the_file() {
    use webnn_wgpu::memory::Residency;
    use webnn_wgpu::backend::webgpu::ContextOptions;

    let n = 1001usize; // odd: float16 bytes end in half a word
    let mut rng = Rng::new(21);
    let f32s: Vec<f32> = (0..n).map(|_| rng.uniform(-3.0, 3.0) as f32).collect();
    let halves: Vec<f16> = f32s.iter().map(|&x| f16::from_f32(x)).collect();
    let bf16_bits: Vec<u16> = f32s.iter().map(|&x| (x.to_bits() >> 16) as u16).collect();
    let bytes = safetensors(&[
        ("f16", "F16", vec![n as u64], le(&halves, f16::to_le_bytes)),
        ("bf16", "BF16", vec![n as u64], le(&bf16_bits, u16::to_le_bytes)),
        ("f32", "F32", vec![n as u64], le(&f32s, f32::to_le_bytes)),
    ]);
    let (source, file) = open("cached.safetensors", bytes);
    let file = file.unwrap();
    let widened: Vec<u8> = halves.iter().flat_map(|h| h.to_f32().to_le_bytes()).collect();
    let from_bf16: Vec<u8> = bf16_bits.iter().flat_map(|&b| f32::from_bits((b as u32) << 16).to_le_bytes()).collect();
    let cases = [
        // (tensor, widen on the GPU, the constant's bytes, bytes read from the file, host copy bytes)
        ("f16", Some(true), &widened, 2 * n, 4 * n),
        ("f16", Some(false), &widened, 2 * n, 4 * n),
        ("bf16", None, &from_bf16, 2 * n, 4 * n),
        ("f32", None, &le(&f32s, f32::to_le_bytes), 4 * n, 4 * n),
    ];
    for (name, widen_on_gpu, want, file_bytes, copy_bytes) in cases {
        let what = format!("{name} (widen on the GPU: {widen_on_gpu:?})");
        let options = LoadOptions { float_type: Some(DataType::Float32), chunk_bytes: 64, max_chunks_in_flight: 2, widen_on_gpu };
        let ctx = block_on(Context::new(ContextOptions { host_memory_budget: Some(1 << 20), ..Default::default() })).unwrap();
        let g = AddGraph::new(&ctx, &source, &file, name, &options);
        assert!(g.run(&ctx) == *want, "{what}: first load");
        let info = ctx.memory_info();
        assert_eq!(info.bytes_streamed_from_disk, file_bytes as u64, "{what}");
        assert_eq!(info.host_bytes, copy_bytes as u64, "{what}: the host copy is counted");
        // The "host" tier: device memory freed, the copy kept; back with no file read.
        block_on(g.graph.swap_out(Residency::Host)).unwrap();
        assert_eq!(g.graph.residency(), Residency::Host, "{what}");
        assert_eq!((g.graph.device_bytes(), g.graph.host_bytes()), (0, copy_bytes as u64), "{what}");
        for _ in 0..2 {
            assert!(g.run(&ctx) == *want, "{what}: back from the host copy by dispatch");
            block_on(g.graph.swap_out(Residency::Host)).unwrap();
            block_on(g.graph.swap_in()).unwrap();
            assert!(g.run(&ctx) == *want, "{what}: back from the host copy by swapIn");
            block_on(g.graph.swap_out(Residency::Host)).unwrap();
        }
        assert_eq!(ctx.memory_info().bytes_streamed_from_disk, file_bytes as u64, "{what}: no file read");
        assert_eq!(ctx.memory_info().bytes_uploaded, 4 * copy_bytes as u64, "{what}: four uploads of the copy");
        // The "disk" tier drops the copy; the next load reads the file and keeps one again.
        block_on(g.graph.swap_out(Residency::Disk)).unwrap();
        assert_eq!(g.graph.residency(), Residency::Disk, "{what}");
        assert_eq!(ctx.memory_info().host_bytes, 0, "{what}: the copy is gone");
        assert!(g.run(&ctx) == *want, "{what}: back from the file");
        assert_eq!(ctx.memory_info().bytes_streamed_from_disk, 2 * file_bytes as u64, "{what}");
        assert_eq!(ctx.memory_info().host_bytes, copy_bytes as u64, "{what}: a copy is kept again");
        assert!(ctx.take_uncaptured_error().is_none(), "{what}");
    }
}

/// The host copy's buffer is created inside an out-of-memory scope: when it fails (injected),
/// the constant streams straight to the GPU, keeps no copy, and computes the right values.
#[test]
fn a_host_copy_the_gpu_cannot_allocate_is_skipped() {
    use webnn_wgpu::backend::webgpu::ContextOptions;
    let n = 1000usize;
    let w: Vec<f32> = (0..n).map(|i| i as f32 * 0.5 - 100.0).collect();
    let (source, file) = open("copy.safetensors", safetensors(&[("w", "F32", vec![n as u64], le(&w, f32::to_le_bytes))]));
    let file = file.unwrap();
    let ctx = block_on(Context::new(ContextOptions { host_memory_budget: Some(1 << 20), ..Default::default() })).unwrap();
    let (weights, constant) = block_on(file.pending_constant_tensor(&ctx, &source, "w", &small_chunks(None))).unwrap();
    let device_bytes = ctx.memory_info().device_bytes;
    // The stream's first allocation is the host copy.
    ctx.fail_next_allocations(1);
    ctx.stream_in_background(constant.clone(), Box::new(|_, _| {}));
    assert!(!constant.needs_stream());
    ctx.fail_next_allocations(0);
    let info = ctx.memory_info();
    assert_eq!(info.host_bytes, 0, "no host copy is kept");
    assert_eq!(info.device_bytes, device_bytes);
    assert_eq!(info.bytes_streamed_from_disk, 4 * n as u64);
    assert_eq!(read_back(&ctx, &weights), le(&w, f32::to_le_bytes));
    assert!(ctx.take_uncaptured_error().is_none());
}

/// The staging buffer of float16 widened on the GPU is created inside an out-of-memory scope:
/// when it fails (injected), the stream fails with UnknownError instead of widening from a
/// buffer that does not exist, and a later stream computes the right values.
#[test]
fn a_float16_staging_buffer_the_gpu_cannot_allocate_fails_the_stream() {
    let n = 1000usize;
    let h: Vec<f16> = (0..n).map(|i| f16::from_f32(i as f32 * 0.25 - 60.0)).collect();
    let (source, file) = open("staging.safetensors", safetensors(&[("h", "F16", vec![n as u64], le(&h, f16::to_le_bytes))]));
    let file = file.unwrap();
    let ctx = context();
    let options = LoadOptions { float_type: Some(DataType::Float32), widen_on_gpu: Some(true), ..LoadOptions::default() };
    let (weights, constant) = block_on(file.pending_constant_tensor(&ctx, &source, "h", &options)).unwrap();
    // The stream's first allocation is the float16 staging buffer.
    ctx.fail_next_allocations(1);
    let e = block_on(constant.stream(&mut |_, _| {})).unwrap_err();
    ctx.fail_next_allocations(0);
    assert_eq!(e.name(), "UnknownError", "{e}");
    block_on(constant.stream(&mut |_, _| {})).unwrap();
    let want: Vec<u8> = h.iter().flat_map(|v| v.to_f32().to_le_bytes()).collect();
    assert_eq!(read_back(&ctx, &weights), want);
}

#[test]
fn the_memory_budget_evicts_to_host_copies_that_the_host_budget_evicts_to_disk() {
    use webnn_wgpu::memory::Residency;
    use webnn_wgpu::backend::webgpu::ContextOptions;

    let n = 1000usize;
    let mut rng = Rng::new(22);
    let mut halves = || (0..n).map(|_| f16::from_f64(rng.uniform(-2.0, 2.0))).collect::<Vec<f16>>();
    let (a, b) = (halves(), halves());
    let (source, file) = open(
        "two.safetensors",
        safetensors(&[("a", "F16", vec![n as u64], le(&a, f16::to_le_bytes)), ("b", "F16", vec![n as u64], le(&b, f16::to_le_bytes))]),
    );
    let file = file.unwrap();
    let want = |h: &[f16]| h.iter().flat_map(|v| v.to_f32().to_le_bytes()).collect::<Vec<u8>>();
    let options = LoadOptions { float_type: Some(DataType::Float32), widen_on_gpu: Some(true), ..LoadOptions::default() };
    let bytes = 4 * n as u64;
    // Device room for one graph's constant (besides the tensors and a staging buffer).
    let budget = 5 * bytes + bytes / 2 + 64;
    for (copies, host_budget) in [(2, 2 * 4 * n as u64), (1, 6 * n as u64)] {
        let options_ctx = ContextOptions { memory_budget: Some(budget), host_memory_budget: Some(host_budget), ..Default::default() };
        let ctx = block_on(Context::new(options_ctx)).unwrap();
        let (ga, gb) = (AddGraph::new(&ctx, &source, &file, "a", &options), AddGraph::new(&ctx, &source, &file, "b", &options));
        assert_eq!(ctx.memory_info().host_bytes, copies * 4 * n as u64, "{copies} host copies fit");
        let streamed = ctx.memory_info().bytes_streamed_from_disk;
        for round in 1..=3u64 {
            assert!(ga.run(&ctx) == want(&a), "a, round {round}");
            assert!(gb.run(&ctx) == want(&b), "b, round {round}");
            // b's dispatch evicted a: to its host copy if the host budget kept it.
            let tier = if copies == 2 { Residency::Host } else { Residency::Disk };
            assert_eq!(ga.graph.residency(), tier, "{copies} copies, round {round}");
            // With one copy, each load evicts the other graph's copy: both read their file.
            let reads = if copies == 2 { 0 } else { round * 2 * 2 * n as u64 };
            assert_eq!(ctx.memory_info().bytes_streamed_from_disk - streamed, reads, "{copies} copies, round {round}");
        }
        assert!(ctx.take_uncaptured_error().is_none());
    }
}

/// A terabyte file that exists only as its header: reads past the header are zeros, and the
/// largest read is recorded (the loader allocates exactly what it reads).
struct TerabyteFile {
    header: Vec<u8>,
    largest_read: std::cell::Cell<usize>,
}

impl webnn_wgpu::weights::Source for TerabyteFile {
    fn name(&self) -> &str {
        "terabyte.bin"
    }
    fn len(&self) -> u64 {
        1 << 40
    }
    async fn read_at(&self, offset: u64, buf: &mut [u8]) -> webnn_wgpu::Result<()> {
        self.largest_read.set(self.largest_read.get().max(buf.len()));
        for (i, b) in buf.iter_mut().enumerate() {
            *b = self.header.get(offset as usize + i).copied().unwrap_or(0);
        }
        Ok(())
    }
}

#[test]
fn headers_claiming_terabytes_are_rejected_without_allocating() {
    let check = |header: Vec<u8>, parts: &[&str]| {
        let file = TerabyteFile { header, largest_read: 0.into() };
        let err = block_on(WeightFile::open(&file)).unwrap_err();
        assert_eq!(err.name(), "DataError", "{err}");
        for part in [&["terabyte.bin"][..], parts].concat() {
            assert!(err.message().contains(part), "'{err}' does not mention '{part}'");
        }
        assert!(file.largest_read.get() <= 1 << 20, "read {} bytes", file.largest_read.get());
    };
    // A safetensors header length of half a terabyte, inside the file's claimed size.
    check((1u64 << 39).to_le_bytes().to_vec(), &["claims 549755813888 bytes", "limit"]);
    // A GGUF metadata string of half a terabyte.
    let mut gguf = Gguf::default().kv_string("general.name", "x").build();
    gguf[24 + 8 + 12 + 4..24 + 8 + 12 + 4 + 8].copy_from_slice(&(1u64 << 39).to_le_bytes());
    check(gguf, &["'general.name'", "claims 549755813888 bytes", "limit"]);
    // A GGUF tensor count of a billion in a terabyte of zeros: rejected before any info is read.
    let mut gguf = Gguf::default().build();
    gguf[8..16].copy_from_slice(&(1u64 << 30).to_le_bytes());
    check(gguf, &["1073741824 tensors, more than 262144"]);
}

#[test]
fn a_graph_builds_before_its_constants_are_streamed_and_its_dispatch_waits_for_them() {
    use webnn_wgpu::graph::{GraphBuilder, OperandDescriptor};
    use webnn_wgpu::ops::elementwise_binary::BinaryOp;
    use webnn_wgpu::ops::Op;
    use webnn_wgpu::backend::webgpu::TensorDescriptor;

    let ctx = context();
    let w: Vec<f32> = (0..1000).map(|i| (i as f32).sin() * 100.0).collect();
    let (source, file) = open("weightless.safetensors", safetensors(&[("w", "F32", vec![1000], le(&w, f32::to_le_bytes))]));
    let file = file.unwrap();
    let options = small_chunks(None);
    let d = OperandDescriptor::new(DataType::Float32, vec![1000]);
    let tensor = |readable, writable| {
        block_on(ctx.create_tensor(TensorDescriptor { operand: d.clone(), readable, writable })).unwrap()
    };
    let want: Vec<f32> = w.iter().map(|&v| v * 2.0).collect();
    let build_and_run = |weights: &Tensor| {
        let mut b = GraphBuilder::new(&ctx).unwrap();
        let x = b.input("x", d.clone()).unwrap();
        let c = b.constant_tensor(weights).unwrap();
        let y = b.operator1(Op::Binary(BinaryOp::Mul), &[x, c], "").unwrap();
        let graph = block_on(b.build(&[("y".to_string(), y)])).unwrap();
        let (x, y) = (tensor(false, true), tensor(true, false));
        ctx.write_tensor(&x, &le(&[2.0f32; 1000], f32::to_le_bytes)).unwrap();
        ctx.dispatch(&graph, &[("x".into(), x.clone())], &[("y".into(), y.clone())]).unwrap();
        block_on(ctx.read_tensor(&y)).unwrap()
    };

    // Built while nothing is streamed yet: the dispatch streams the constant first.
    let streamed = ctx.memory_info().bytes_streamed_from_disk;
    let (weights, constant) = block_on(file.pending_constant_tensor(&ctx, &source, "w", &options)).unwrap();
    assert!(constant.needs_stream());
    assert_eq!(build_and_run(&weights), le(&want, f32::to_le_bytes));
    assert!(!constant.needs_stream());
    assert_eq!(ctx.memory_info().bytes_streamed_from_disk, streamed + 4000);

    // Streamed as deferred queue work (natively it completes inside the call), with progress.
    let progress = Rc::new(std::cell::RefCell::new(Vec::new()));
    let (weights, constant) = block_on(file.pending_constant_tensor(&ctx, &source, "w", &options)).unwrap();
    let seen = progress.clone();
    ctx.stream_in_background(constant.clone(), Box::new(move |a, b| seen.borrow_mut().push((a, b))));
    assert!(!constant.needs_stream());
    assert_eq!(progress.borrow().last(), Some(&(4000, 4000)));
    assert_eq!(build_and_run(&weights), le(&want, f32::to_le_bytes));
    assert_eq!(ctx.memory_info().bytes_streamed_from_disk, streamed + 8000);
}

/// float16 widening (vectorized, used by the loader and the CPU backend) against the `half`
/// crate, bit for bit, for every one of the 65,536 halves: normals, subnormals, zeros, infinities
/// and NaNs (quieted, payload kept).
#[test]
fn float16_widening_matches_half_for_every_value() {
    let bits: Vec<u16> = (0..=u16::MAX).collect();
    let mut out = vec![0.0f32; bits.len()];
    webnn_wgpu::operand::widen_f16(&bits, &mut out);
    for (&h, &w) in bits.iter().zip(&out) {
        assert_eq!(w.to_bits(), f16::from_bits(h).to_f32().to_bits(), "half {h:#06x}");
    }
}

/// float16 narrowing (vectorized, used by the CPU backend's float16 outputs) against the `half`
/// crate, bit for bit: every float32 whose top 16 bits vary, with low bits at and around each
/// rounding point (ties, just below and above, for normal and subnormal results), and a million
/// pseudo-random bit patterns.
#[test]
fn float16_narrowing_matches_half() {
    let lows = [0u32, 1, 0x0fff, 0x1000, 0x1001, 0x1fff, 0x2000, 0x3000, 0x7fff, 0x8000, 0x8001, 0xffff, 0x4000, 0xc000, 0x0800, 0x1800];
    let mut bits: Vec<u32> = (0..=0xffffu32).flat_map(|hi| lows.iter().map(move |lo| hi << 16 | lo)).collect();
    let mut state = 0x2545_f491u32;
    bits.extend((0..1 << 20).map(|_| {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        state
    }));
    let values: Vec<f32> = bits.iter().map(|&b| f32::from_bits(b)).collect();
    let mut out = vec![0u16; values.len()];
    webnn_wgpu::operand::narrow_f16(&values, &mut out);
    for (&v, &h) in values.iter().zip(&out) {
        assert_eq!(h, f16::from_f32(v).to_bits(), "float32 {:#010x}", v.to_bits());
    }
}

/// A source that logs its reads (offset and length).
struct Counting {
    inner: BytesSource,
    reads: std::cell::RefCell<Vec<(u64, u64)>>,
}

impl Counting {
    /// The reads since the last call that touched bytes `start..end`.
    fn reads_of(&self, start: u64, end: u64) -> Vec<(u64, u64)> {
        self.reads.take().into_iter().filter(|&(at, len)| at < end && start < at + len).collect()
    }
}

impl webnn_wgpu::weights::Source for Counting {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }

    async fn read_at(&self, offset: u64, buf: &mut [u8]) -> webnn_wgpu::Result<()> {
        self.reads.borrow_mut().push((offset, buf.len() as u64));
        self.inner.read_at(offset, buf).await
    }
    /// Read ahead as the browser's `Blob` is, so the merged reads show here natively.
    fn reads_ahead(&self) -> bool {
        true
    }
}

#[test]
fn constants_adjacent_in_their_file_come_back_from_the_disk_tier_in_one_read() {
    use webnn_wgpu::backend::webgpu::TensorDescriptor;
    use webnn_wgpu::graph::{GraphBuilder, OperandDescriptor};
    use webnn_wgpu::memory::Residency;
    use webnn_wgpu::ops::elementwise_binary::BinaryOp;
    use webnn_wgpu::ops::Op;

    // An expert: three float16 matrices adjacent in the file, then one after a gap of more than
    // a merged read takes (an unused tensor).
    let n = 4097usize;
    let mut rng = Rng::new(31);
    let names = ["w1", "w2", "w3", "w4"];
    let halves: Vec<Vec<f16>> = names.iter().map(|_| (0..n).map(|_| f16::from_f64(rng.uniform(-2.0, 2.0))).collect()).collect();
    let gap = vec![0u8; 100 << 10];
    let mut tensors: Vec<(&str, &str, Vec<u64>, Vec<u8>)> =
        names.iter().zip(&halves).map(|(name, h)| (*name, "F16", vec![n as u64], le(h, f16::to_le_bytes))).collect();
    tensors.insert(3, ("gap", "U8", vec![gap.len() as u64], gap));
    let source = Rc::new(Counting { inner: BytesSource::new("expert.safetensors", safetensors(&tensors)), reads: Default::default() });
    let file = block_on(WeightFile::open(&*source)).unwrap();
    for widen_on_gpu in [Some(true), Some(false)] {
        let ctx = context();
        let options = LoadOptions { float_type: Some(DataType::Float32), widen_on_gpu, chunk_bytes: 1024, max_chunks_in_flight: 2 };
        let d = OperandDescriptor::new(DataType::Float32, vec![n as u32]);
        let mut b = GraphBuilder::new(&ctx).unwrap();
        let x = b.input("x", d.clone()).unwrap();
        let mut outputs = Vec::new();
        for name in names {
            let (w, _) = block_on(file.constant_tensor(&ctx, &source, name, &options, &mut |_, _| {})).unwrap();
            let w = b.constant_tensor(&w).unwrap();
            outputs.push((name.to_string(), b.operator1(Op::Binary(BinaryOp::Add), &[x, w], "").unwrap()));
        }
        let graph = block_on(b.build(&outputs)).unwrap();
        let tensor = |readable, writable| {
            block_on(ctx.create_tensor(TensorDescriptor { operand: d.clone(), readable, writable })).unwrap()
        };
        let x = tensor(false, true);
        ctx.write_tensor(&x, &vec![0u8; 4 * n]).unwrap();
        let ys: Vec<(String, Tensor)> = names.iter().map(|name| (name.to_string(), tensor(true, false))).collect();
        let run = || {
            ctx.dispatch(&graph, &[("x".into(), x.clone())], &ys).unwrap();
            for ((_, y), h) in ys.iter().zip(&halves) {
                let want: Vec<u8> = h.iter().flat_map(|h| h.to_f32().to_le_bytes()).collect();
                assert!(block_on(ctx.read_tensor(y)).unwrap() == want, "0 + w differs from the float16 weights widened");
            }
        };
        run();
        let streamed = ctx.memory_info().bytes_streamed_from_disk;
        let (w1, w3) = (file.tensor("w1").unwrap(), file.tensor("w3").unwrap());
        let expert = (w1.offset, w3.offset + w3.byte_length);
        for swap_in in [false, true] {
            block_on(graph.swap_out(Residency::Disk)).unwrap();
            source.reads.take();
            if swap_in {
                block_on(graph.swap_in()).unwrap();
            }
            run();
            let reads = source.reads_of(expert.0, expert.1);
            assert_eq!(reads, vec![(expert.0, expert.1 - expert.0)], "w1-w3 in one read ({widen_on_gpu:?}, swapIn: {swap_in})");
        }
        assert_eq!(ctx.memory_info().bytes_streamed_from_disk - streamed, 2 * 4 * 2 * n as u64, "the tensors' bytes, not the gap's");
    }
}
