//! Hostile weight-file headers: each must be rejected with a `DataError` naming the problem
//! while the reader's allocations stay bounded. A counting global allocator measures the peak
//! bytes live during `WeightFile::open` (per thread, so parallel tests do not mix).

#![cfg(not(target_arch = "wasm32"))] // native: `wasm-pack test` builds every test target for wasm32

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use common::block_on;
use common::weight_files::{safetensors_raw, Gguf};
use webnn_wgpu::weights::{BytesSource, Source, WeightFile};

struct Counting;

thread_local! {
    static LIVE: Cell<i64> = const { Cell::new(0) };
    static PEAK: Cell<i64> = const { Cell::new(0) };
}

fn add(bytes: usize) {
    let _ = LIVE.try_with(|live| {
        live.set(live.get() + bytes as i64);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(live.get())));
    });
}

fn sub(bytes: usize) {
    let _ = LIVE.try_with(|live| live.set(live.get() - bytes as i64));
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            add(layout.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            add(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        unsafe { System.dealloc(p, layout) };
        sub(layout.size());
    }
    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let q = unsafe { System.realloc(p, layout, new_size) };
        if !q.is_null() {
            // Counted as a copy: both blocks live for a moment.
            add(new_size);
            sub(layout.size());
        }
        q
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Opens `source` and returns the error and the peak bytes allocated above those live before.
fn open_peak<S: Source>(source: &S) -> (webnn_wgpu::Error, u64) {
    let base = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(base));
    let result = block_on(WeightFile::open(source));
    let peak = (PEAK.with(Cell::get) - base) as u64;
    (result.expect_err("the hostile file must be rejected"), peak)
}

/// The file is rejected with a `DataError` naming `parts`, allocating at most `bound` bytes.
fn rejected(name: &str, bytes: Vec<u8>, parts: &[&str], bound: u64) {
    let source = BytesSource::new(name, bytes);
    let (err, peak) = open_peak(&source);
    assert_eq!(err.name(), "DataError", "{err}");
    for part in [name].iter().chain(parts) {
        assert!(err.message().contains(part), "'{err}' does not mention '{part}'");
    }
    assert!(peak <= bound, "{name}: {peak} bytes allocated, more than {bound}");
}

const MIB: u64 = 1 << 20;

#[test]
fn safetensors_of_a_hundred_megabytes_of_tiny_entries_is_rejected_without_a_json_tree() {
    // Zero-byte tensors are valid entries: only the count cap stops them.
    let mut header = String::with_capacity(100_000_000);
    header.push('{');
    let mut i = 0;
    while header.len() < 99_999_900 {
        if i > 0 {
            header.push(',');
        }
        header.push_str(&format!(r#""t{i}":{{"dtype":"F32","shape":[0],"data_offsets":[0,0]}}"#));
        i += 1;
    }
    header.push('}');
    let len = header.len() as u64;
    // The header is read into one buffer; parsing it adds at most a slack.
    rejected("tiny.safetensors", safetensors_raw(&header, &[]), &["more than 262144 tensors"], len + MIB);
}

#[test]
fn safetensors_arrays_strings_nesting_and_metadata_are_capped() {
    let shape = format!("[{}1]", "1,".repeat(5_000_000));
    let header = format!(r#"{{"w":{{"dtype":"F32","shape":{shape},"data_offsets":[0,4]}}}}"#);
    let len = header.len() as u64;
    rejected("dims.safetensors", safetensors_raw(&header, &[0; 4]), &["'w'", "at most 64"], len + MIB);

    let name = "n".repeat(20 << 20);
    let header = format!(r#"{{"{name}":{{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}}}"#);
    let len = header.len() as u64;
    rejected("name.safetensors", safetensors_raw(&header, &[0; 4]), &["1048576-byte limit"], len + MIB);

    let nested = format!("{}{}", "[".repeat(1_000_000), "]".repeat(1_000_000));
    let header = format!(r#"{{"w":{{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":{nested}}}}}"#);
    let len = header.len() as u64;
    rejected("nested.safetensors", safetensors_raw(&header, &[0; 4]), &["recursion limit"], len + MIB);

    let entries: Vec<String> = (0..70_000).map(|i| format!(r#""k{i}":"v""#)).collect();
    let header = format!(r#"{{"__metadata__":{{{}}}}}"#, entries.join(","));
    let len = header.len() as u64;
    // The header buffer and the parse's budget of 8 bytes per header byte and a slack.
    rejected("metadata.safetensors", safetensors_raw(&header, &[]), &["more than 65536 entries"], 9 * len + 2 * MIB);

    let good = safetensors_raw(r#"{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#, &[0; 8]);
    rejected("truncated.safetensors", good[..good.len() - 1].to_vec(), &["'w'", "past the end"], MIB);
}

/// A GGUF array metadata value of `count` elements of type `t` and `payload` bytes.
fn gguf_array(t: u32, count: u64, payload: &[u8]) -> Vec<u8> {
    [&t.to_le_bytes()[..], &count.to_le_bytes(), payload].concat()
}

#[test]
fn gguf_counts_and_lengths_are_capped_before_allocation() {
    // Four million one-byte values: accepted values, but tens of bytes each once parsed.
    let n = 4_000_000;
    let file = Gguf::default().kv("bytes", 9, &gguf_array(0, n, &vec![7; n as usize])).build();
    let len = file.len() as u64;
    // The growing read buffer (a copy on growth) and the budget of 8 bytes per header byte.
    rejected("bytes.gguf", file, &["'bytes'", "bytes of memory allowed"], 2 * len + 8 * len + 2 * MIB);

    let file = Gguf::default().kv("huge", 9, &gguf_array(0, 1 << 40, &[1, 2, 3])).build();
    rejected("count.gguf", file, &["'huge'", "claims 1099511627776 entries"], MIB);

    let long = "s".repeat(3 << 20);
    let file = Gguf::default().kv_string("general.name", &long).build();
    rejected("string.gguf", file, &["'general.name'", "claims 3145728 bytes", "1048576-byte limit"], 2 * MIB);

    let mut strings = Vec::new();
    for _ in 0..3 {
        strings.extend_from_slice(&(2u64 << 20).to_le_bytes());
        strings.extend_from_slice(&vec![b'x'; 2 << 20]);
    }
    let file = Gguf::default().kv("strings", 9, &gguf_array(8, 3, &strings)).build();
    rejected("strings.gguf", file, &["'strings'", "1048576-byte limit"], 2 * 8 * MIB);

    let good = Gguf::default().kv_string("general.name", "model").tensor("w", &[32], 0, vec![0; 128]).build();
    rejected("truncated.gguf", good[..good.len() - 1].to_vec(), &["'w'", "past the end"], 2 * MIB);
}

/// A terabyte file of zeros after its first bytes.
struct Terabyte(Vec<u8>);

impl Source for Terabyte {
    fn name(&self) -> &str {
        "terabyte.gguf"
    }
    fn len(&self) -> u64 {
        1 << 40
    }
    async fn read_at(&self, offset: u64, buf: &mut [u8]) -> webnn_wgpu::Result<()> {
        for (i, b) in buf.iter_mut().enumerate() {
            *b = self.0.get(offset as usize + i).copied().unwrap_or(0);
        }
        Ok(())
    }
}

#[test]
fn a_gguf_declaring_2_to_the_40_tensors_or_values_is_rejected_at_once() {
    let mut header = Gguf::default().build();
    header[8..16].copy_from_slice(&(1u64 << 35).to_le_bytes());
    let (err, peak) = open_peak(&Terabyte(header));
    assert!(err.name() == "DataError" && err.message().contains("34359738368 tensors, more than 262144"), "{err}");
    // The first megabyte of the file is read to parse the header.
    assert!(peak <= 2 * MIB, "{peak} bytes allocated");

    let mut header = Gguf::default().build();
    header[16..24].copy_from_slice(&(1u64 << 35).to_le_bytes());
    let (err, peak) = open_peak(&Terabyte(header));
    assert!(err.name() == "DataError" && err.message().contains("34359738368 metadata key/values"), "{err}");
    assert!(peak <= 2 * MIB, "{peak} bytes allocated");
}
