//! Fuzzing the weight-file readers: arbitrary bytes, and valid files with mutated headers, must
//! give a validated header or a `DataError`/`TypeError`, never a panic, a hang or a huge
//! allocation; a header that is accepted describes tensors that lie inside the file and convert.
#![cfg(not(target_arch = "wasm32"))] // native: `wasm-pack test` builds every test target for wasm32

mod common;

use common::block_on;
use common::weight_files::{safetensors, safetensors_raw, Gguf};
use proptest::prelude::*;
use webnn_wgpu::graph::DataType;
use webnn_wgpu::weights::convert::convert_chunk;
use webnn_wgpu::weights::{BytesSource, Source, WeightFile};

/// Opens `bytes`, checks the error kind or the accepted header's invariants, and converts every
/// accepted tensor's bytes on the host.
fn check(bytes: Vec<u8>) -> Result<(), TestCaseError> {
    let len = bytes.len() as u64;
    let source = BytesSource::new("fuzz.bin", bytes);
    match block_on(WeightFile::open(&source)) {
        Err(e) => {
            prop_assert!(matches!(e.name(), "DataError" | "TypeError"), "{e}");
            prop_assert!(e.message().starts_with("fuzz.bin"), "{e}");
        }
        Ok(file) => {
            for t in &file.tensors {
                prop_assert!(t.offset.checked_add(t.byte_length).is_some_and(|end| end <= len), "{t:?}");
                let Some(stored) = t.stored else { continue };
                let mut data = vec![0u8; t.byte_length as usize];
                block_on(source.read_at(t.offset, &mut data)).map_err(|e| TestCaseError::fail(e.to_string()))?;
                let target = stored.webnn_type(DataType::Float16);
                let mut out = Vec::new();
                if let Err(e) = convert_chunk("fuzz.bin", &t.name, stored, target, 0, &data, &mut out) {
                    prop_assert_eq!(e.name(), "TypeError", "{}", e);
                    continue;
                }
                prop_assert_eq!(out.len() as u64, t.element_count() * target.byte_size());
            }
        }
    }
    Ok(())
}

fn valid_safetensors() -> Vec<u8> {
    safetensors(&[
        ("a", "F32", vec![2, 2], (0..16).collect()),
        ("b", "BF16", vec![3], vec![1; 6]),
        ("c", "I64", vec![1], vec![0xFF; 8]),
        ("d", "BOOL", vec![2], vec![0, 1]),
    ])
}

fn valid_gguf() -> Vec<u8> {
    Gguf::default()
        .kv_string("general.architecture", "llama")
        .kv("n", 4, &7u32.to_le_bytes())
        .kv("arr", 9, &[&8u32.to_le_bytes()[..], &1u64.to_le_bytes(), &2u64.to_le_bytes(), b"hi"].concat())
        .alignment(32)
        .tensor("f", &[4], 0, vec![0x3F; 16])
        .tensor("q8", &[32, 2], 8, vec![0x11; 68])
        .tensor("q4", &[32], 2, vec![0x22; 18])
        .tensor("q41", &[32], 3, vec![0x33; 20])
        .build()
}

/// A mutation: overwrite, insert or delete a byte, or truncate.
#[derive(Debug, Clone)]
enum Mutation {
    Set(usize, u8),
    Insert(usize, u8),
    Delete(usize),
    Truncate(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Set(i, b)),
        1 => (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Insert(i, b)),
        1 => any::<usize>().prop_map(Mutation::Delete),
        1 => any::<usize>().prop_map(Mutation::Truncate),
    ]
}

fn mutate(mut bytes: Vec<u8>, mutations: &[Mutation], limit: usize) -> Vec<u8> {
    for m in mutations {
        // Positions fall in the first `limit` bytes (the header).
        let n = bytes.len().min(limit);
        match *m {
            Mutation::Set(i, b) if n > 0 => bytes[i % n] = b,
            Mutation::Insert(i, b) => bytes.insert(i % (n + 1), b),
            Mutation::Delete(i) if n > 0 => {
                bytes.remove(i % n);
            }
            Mutation::Truncate(i) => bytes.truncate(i % (bytes.len() + 1)),
            _ => {}
        }
    }
    bytes
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(2000),
        ..ProptestConfig::default()
    })]

    #[test]
    fn arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        check(bytes.clone())?;
        // The same bytes behind each format's magic or length prefix reach the parsers' bodies.
        let mut gguf = b"GGUF\x03\0\0\0".to_vec();
        gguf.extend_from_slice(&bytes);
        check(gguf)?;
        let mut st = (bytes.len() as u64).to_le_bytes().to_vec();
        st.extend_from_slice(&bytes);
        check(st)?;
    }

    #[test]
    fn mutated_safetensors(mutations in proptest::collection::vec(mutation(), 1..6)) {
        let bytes = valid_safetensors();
        let header_len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        // Mostly inside the header, where the validation is.
        check(mutate(bytes, &mutations, 8 + header_len))?;
    }

    #[test]
    fn mutated_safetensors_json(mutations in proptest::collection::vec((any::<usize>(), prop::sample::select(b"0123456789,:[]{}\"-e.FIUBL ".to_vec())), 1..6)) {
        // Mutates the JSON text and keeps the length prefix consistent.
        let bytes = valid_safetensors();
        let header_len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        let mut header = bytes[8..8 + header_len].to_vec();
        for (i, c) in mutations {
            let i = i % header.len();
            header[i] = c;
        }
        let header = String::from_utf8_lossy(&header).into_owned();
        check(safetensors_raw(&header, &bytes[8 + header_len..]))?;
    }

    #[test]
    fn mutated_gguf(mutations in proptest::collection::vec(mutation(), 1..6)) {
        let bytes = valid_gguf();
        let header_len = bytes.len() - (68 + 18 + 20 + 16);
        check(mutate(bytes, &mutations, header_len))?;
    }

    #[test]
    fn mutated_gguf_fields(index in 0usize..40, value in prop_oneof![Just(u64::MAX), Just(1u64 << 40), Just(0u64), any::<u64>()]) {
        // Overwrites an aligned 8-byte window (counts, lengths, dims, offsets) with extreme values.
        let mut bytes = valid_gguf();
        let at = 8 + index * 4;
        if at + 8 <= bytes.len() {
            bytes[at..at + 8].copy_from_slice(&value.to_le_bytes());
        }
        check(bytes)?;
    }
}

#[test]
fn the_seed_files_are_valid() {
    for bytes in [valid_safetensors(), valid_gguf()] {
        let source = BytesSource::new("seed", bytes);
        let file = block_on(WeightFile::open(&source)).unwrap();
        assert_eq!(file.tensors.len(), 4);
    }
}
