//! The CPU backend's `"disk"` tier: constants of a weight file are read into the backend's
//! memory, leave it with `swapOut({to: "disk"})` or an eviction (no copy stays in host memory
//! without a host budget), and are read from the file again, converted as the first time; under
//! `hostMemoryBudget` they come back from host copies without a read. Results are checked
//! against values computed here from the file's own numbers.
#![cfg(not(target_arch = "wasm32"))] // native: `wasm-pack test` builds every test target for wasm32

mod common;

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use common::block_on;
use common::weight_files::safetensors;
use half::f16;
use webnn_wgpu::backend::cpu::{loader, CpuContext, CpuGraph, CpuTensor};
use webnn_wgpu::backend::{BackendGraph, ContextOptions, TensorDescriptor};
use webnn_wgpu::graph::{DataType, GraphBuilder, OperandDescriptor};
use webnn_wgpu::memory::Residency;
use webnn_wgpu::ops::elementwise_binary::BinaryOp;
use webnn_wgpu::weights::{BytesSource, LoadOptions, Source, WeightFile};
use webnn_wgpu::Op;

const N: u32 = 256;
const BYTES: u64 = N as u64 * 4;

/// Tensor `a` (float32, 0.5 i) and tensor `b` (float16, (i mod 17) - 8, exact in float16).
fn a(i: u32) -> f32 {
    i as f32 * 0.5
}

fn b(i: u32) -> f32 {
    (i % 17) as f32 - 8.0
}

fn weight_bytes() -> Vec<u8> {
    let a: Vec<u8> = (0..N).flat_map(|i| a(i).to_le_bytes()).collect();
    let b: Vec<u8> = (0..N).flat_map(|i| f16::from_f32(b(i)).to_le_bytes()).collect();
    safetensors(&[("a", "F32", vec![N as u64], a), ("b", "F16", vec![N as u64], b)])
}

/// A source that counts its reads, logs them (offset and length) and can be made to fail.
struct Flaky {
    inner: BytesSource,
    reads: Cell<u32>,
    log: RefCell<Vec<(u64, u64)>>,
    fail: Cell<bool>,
}

impl Flaky {
    fn new(name: &str, bytes: Vec<u8>) -> Flaky {
        Flaky { inner: BytesSource::new(name, bytes), reads: Cell::new(0), log: RefCell::default(), fail: Cell::new(false) }
    }

    /// The reads since the last call that touched bytes `start..end`.
    fn reads_of(&self, start: u64, end: u64) -> Vec<(u64, u64)> {
        self.log.take().into_iter().filter(|&(at, len)| at < end && start < at + len).collect()
    }
}

impl Source for Flaky {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }

    async fn read_at(&self, offset: u64, buf: &mut [u8]) -> webnn_wgpu::Result<()> {
        if self.fail.get() {
            return Err(webnn_wgpu::Error::Data("weights.safetensors: the file could not be read".into()));
        }
        self.reads.set(self.reads.get() + 1);
        self.log.borrow_mut().push((offset, buf.len() as u64));
        self.inner.read_at(offset, buf).await
    }
    /// Read ahead as the browser's `Blob` is, so the merged reads show here natively.
    fn reads_ahead(&self) -> bool {
        true
    }
}

fn open() -> (Rc<Flaky>, WeightFile) {
    let source = Rc::new(Flaky::new("weights.safetensors", weight_bytes()));
    let file = block_on(WeightFile::open(&*source)).unwrap();
    (source, file)
}

/// `constantTensor(name)` as float32 (the float16 tensor widened).
fn constant(ctx: &CpuContext, source: &Rc<Flaky>, file: &WeightFile, name: &str) -> webnn_wgpu::Result<CpuTensor> {
    let options = LoadOptions { float_type: Some(DataType::Float32), chunk_bytes: 100, ..LoadOptions::default() };
    let info = file.tensor(name)?;
    let descriptor = file.load_descriptor(info, &options, false, ctx.max_tensor_byte_length())?;
    block_on(loader::constant_tensor(ctx, file, source, info, descriptor, &options))
}

fn f32_descriptor() -> OperandDescriptor {
    OperandDescriptor::new(DataType::Float32, vec![N])
}

/// `y = x + c`.
fn add(ctx: &CpuContext, c: &CpuTensor) -> CpuGraph {
    let mut g = GraphBuilder::new(ctx).unwrap();
    let x = g.input("x", f32_descriptor()).unwrap();
    let c = g.constant_tensor(c).unwrap();
    let y = g.operator1(Op::Binary(BinaryOp::Add), &[x, c], "").unwrap();
    CpuGraph::compile(ctx, g.prepare_build(&[("y".into(), y)]).unwrap()).unwrap()
}

/// Dispatches `graph` on x = i and reads y: `Err` when the read reports a failure.
fn run(ctx: &CpuContext, graph: &CpuGraph) -> webnn_wgpu::Result<Vec<f32>> {
    let x = ctx.create_tensor(TensorDescriptor { operand: f32_descriptor(), readable: false, writable: true }).unwrap();
    let y = ctx.create_tensor(TensorDescriptor { operand: f32_descriptor(), readable: true, writable: false }).unwrap();
    let input: Vec<u8> = (0..N).flat_map(|i| (i as f32).to_le_bytes()).collect();
    ctx.write_tensor(&x, &input).unwrap();
    ctx.dispatch(graph, &[("x".into(), x)], &[("y".into(), y.clone())]).unwrap();
    let bytes = block_on(ctx.read_tensor(&y))?;
    Ok(bytes.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect())
}

fn expected(f: fn(u32) -> f32) -> Vec<f32> {
    (0..N).map(|i| i as f32 + f(i)).collect()
}

#[test]
fn swap_out_to_disk_frees_both_memories_and_reads_the_file_again() {
    let ctx = CpuContext::new(ContextOptions::default());
    let (source, file) = open();
    let (ta, tb) = (constant(&ctx, &source, &file, "a").unwrap(), constant(&ctx, &source, &file, "b").unwrap());
    let (ga, gb) = (add(&ctx, &ta), add(&ctx, &tb));
    assert_eq!(ctx.memory_info().bytes_streamed_from_disk, BYTES + BYTES / 2, "each tensor read once: a as stored, b as float16");
    let reads = source.reads.get();
    assert_eq!((ga.residency(), ctx.memory_info().device_bytes), (Residency::Device, 2 * BYTES), "the graphs took over the tensors' copies");
    assert_eq!(run(&ctx, &ga).unwrap(), expected(a));
    assert_eq!(run(&ctx, &gb).unwrap(), expected(b));
    assert_eq!(source.reads.get(), reads, "no read while resident");

    block_on(BackendGraph::swap_out(&ga, Residency::Disk)).unwrap();
    block_on(BackendGraph::swap_out(&gb, Residency::Host)).unwrap();
    let info = ctx.memory_info();
    assert_eq!((ga.residency(), gb.residency()), (Residency::Disk, Residency::Disk), "no host copy: both are in the file only");
    assert_eq!((info.device_bytes, info.host_bytes, ga.device_bytes(), ga.host_bytes()), (0, 0, 0, 0));

    assert_eq!(run(&ctx, &gb).unwrap(), expected(b), "float16 widened again on the way back");
    assert_eq!(run(&ctx, &ga).unwrap(), expected(a));
    let info = ctx.memory_info();
    assert_eq!(info.bytes_streamed_from_disk, 2 * (BYTES + BYTES / 2), "both read from the file again");
    assert_eq!((ga.residency(), info.device_bytes, info.swap_ins), (Residency::Device, 2 * BYTES, 4));

    block_on(BackendGraph::swap_out(&ga, Residency::Disk)).unwrap();
    block_on(ga.swap_in()).unwrap();
    assert_eq!((ga.residency(), ctx.memory_info().bytes_streamed_from_disk), (Residency::Device, 2 * (BYTES + BYTES / 2) + BYTES));
}

#[test]
fn the_budget_evicts_to_disk_and_the_host_budget_keeps_copies() {
    for host_budget in [None, Some(4 * BYTES)] {
        // Room for one graph's constant beside the two tensors of a dispatch.
        let budget = 3 * BYTES + BYTES / 2;
        let options = ContextOptions { memory_budget: Some(budget), host_memory_budget: host_budget, ..ContextOptions::default() };
        let ctx = CpuContext::new(options);
        let (source, file) = open();
        let graphs: Vec<(CpuGraph, fn(u32) -> f32)> = vec![
            (add(&ctx, &constant(&ctx, &source, &file, "a").unwrap()), a),
            (add(&ctx, &constant(&ctx, &source, &file, "b").unwrap()), b),
        ];
        let after_load = ctx.memory_info().bytes_streamed_from_disk;
        for round in 0..6 {
            let (graph, f) = &graphs[round % 2];
            assert_eq!(run(&ctx, graph).unwrap(), expected(*f), "round {round}, host budget {host_budget:?}");
            let info = ctx.memory_info();
            assert!(info.device_bytes <= BYTES, "one graph resident after the dispatch: {info:?}");
            let other = &graphs[1 - round % 2].0;
            let tier = if host_budget.is_some() { Residency::Host } else { Residency::Disk };
            assert_eq!(other.residency(), tier, "round {round}: the other graph was evicted");
        }
        let info = ctx.memory_info();
        let read = info.bytes_streamed_from_disk - after_load;
        match host_budget {
            // The first reads kept a copy of each (b widened to float32): no read since.
            Some(_) => assert_eq!((info.host_bytes, read), (2 * BYTES, 0)),
            // Every round read its graph's tensor: a three times, b (float16) three times.
            None => assert_eq!((info.host_bytes, read), (0, 3 * BYTES + 3 * BYTES / 2)),
        }
    }
}

#[test]
fn a_tensor_no_graph_uses_holds_its_copy_until_destroyed() {
    let ctx = CpuContext::new(ContextOptions::default());
    let (source, file) = open();
    let t = constant(&ctx, &source, &file, "a").unwrap();
    assert_eq!(ctx.memory_info().device_bytes, BYTES);
    t.destroy();
    assert_eq!(ctx.memory_info().device_bytes, 0);
    // Under a budget, copies no graph uses make room (oldest first) before a budget error.
    let ctx = CpuContext::new(ContextOptions { memory_budget: Some(2 * BYTES), ..ContextOptions::default() });
    let (ta, tb) = (constant(&ctx, &source, &file, "a").unwrap(), constant(&ctx, &source, &file, "b").unwrap());
    assert_eq!(ctx.memory_info().device_bytes, 2 * BYTES);
    let x = ctx.create_tensor(TensorDescriptor { operand: f32_descriptor(), readable: false, writable: true }).unwrap();
    assert_eq!(ctx.memory_info().device_bytes, 2 * BYTES, "a's copy made room for the tensor");
    let streamed = ctx.memory_info().bytes_streamed_from_disk;
    let gb = add(&ctx, &tb);
    assert_eq!((gb.residency(), ctx.memory_info().bytes_streamed_from_disk), (Residency::Device, streamed), "b's copy was kept");
    let ga = add(&ctx, &ta);
    assert_eq!(ga.residency(), Residency::Disk, "a waits for its first swap-in");
    drop(x);
    block_on(ga.swap_in()).unwrap();
    assert_eq!((ga.residency(), ctx.memory_info().bytes_streamed_from_disk), (Residency::Device, streamed + BYTES), "a is read again");
}

#[test]
fn a_failed_read_is_reported_by_the_next_read_and_the_graph_recovers() {
    let ctx = CpuContext::new(ContextOptions::default());
    let (source, file) = open();
    let graph = add(&ctx, &constant(&ctx, &source, &file, "a").unwrap());
    block_on(BackendGraph::swap_out(&graph, Residency::Disk)).unwrap();
    source.fail.set(true);
    let error = run(&ctx, &graph).unwrap_err();
    assert_eq!(error.name(), "DataError", "{error:?}");
    assert!(error.message().contains("weights.safetensors"), "{error:?}");
    assert_eq!((graph.residency(), ctx.memory_info().device_bytes), (Residency::Disk, 0), "nothing half-read stays");
    assert_eq!(block_on(graph.swap_in()).unwrap_err().name(), "DataError");
    source.fail.set(false);
    assert_eq!(run(&ctx, &graph).unwrap(), expected(a));
}

#[test]
fn constants_adjacent_in_their_file_come_back_from_the_disk_tier_in_one_read() {
    // An expert: three float16 matrices adjacent in the file, then one after a gap of more than
    // a merged read takes (an unused tensor).
    let names = ["w1", "w2", "w3", "w4"];
    let value = |t: usize, i: u32| ((i * 7 + t as u32 * 5) % 23) as f32 * 0.25 - 2.0;
    let mut tensors: Vec<(&str, &str, Vec<u64>, Vec<u8>)> = (0..4)
        .map(|t| (names[t], "F16", vec![N as u64], (0..N).flat_map(|i| f16::from_f32(value(t, i)).to_le_bytes()).collect()))
        .collect();
    tensors.insert(3, ("gap", "U8", vec![100 << 10], vec![0; 100 << 10]));
    let source = Rc::new(Flaky::new("expert.safetensors", safetensors(&tensors)));
    let file = block_on(WeightFile::open(&*source)).unwrap();
    let ctx = CpuContext::new(ContextOptions::default());
    let mut g = GraphBuilder::new(&ctx).unwrap();
    let x = g.input("x", f32_descriptor()).unwrap();
    let mut outputs = Vec::new();
    for name in names {
        let w = g.constant_tensor(&constant(&ctx, &source, &file, name).unwrap()).unwrap();
        outputs.push((name.to_string(), g.operator1(Op::Binary(BinaryOp::Add), &[x, w], "").unwrap()));
    }
    let graph = CpuGraph::compile(&ctx, g.prepare_build(&outputs).unwrap()).unwrap();
    let tensor = |readable, writable| ctx.create_tensor(TensorDescriptor { operand: f32_descriptor(), readable, writable }).unwrap();
    let x = tensor(false, true);
    ctx.write_tensor(&x, &(0..N).flat_map(|i| (i as f32).to_le_bytes()).collect::<Vec<u8>>()).unwrap();
    let ys: Vec<(String, CpuTensor)> = names.iter().map(|name| (name.to_string(), tensor(true, false))).collect();
    let run = || {
        ctx.dispatch(&graph, &[("x".into(), x.clone())], &ys).unwrap();
        for (t, (_, y)) in ys.iter().enumerate() {
            let want: Vec<u8> = (0..N).flat_map(|i| (i as f32 + value(t, i)).to_le_bytes()).collect();
            assert!(block_on(ctx.read_tensor(y)).unwrap() == want, "x + {} differs", names[t]);
        }
    };
    run();
    let streamed = ctx.memory_info().bytes_streamed_from_disk;
    let (w1, w3) = (file.tensor("w1").unwrap(), file.tensor("w3").unwrap());
    let expert = (w1.offset, w3.offset + w3.byte_length);
    for swap_in in [false, true] {
        block_on(BackendGraph::swap_out(&graph, Residency::Disk)).unwrap();
        source.log.take();
        if swap_in {
            block_on(graph.swap_in()).unwrap();
        }
        run();
        assert_eq!(source.reads_of(expert.0, expert.1), vec![(expert.0, expert.1 - expert.0)], "w1-w3 in one read (swapIn: {swap_in})");
    }
    let info = ctx.memory_info();
    assert_eq!(info.bytes_streamed_from_disk - streamed, 2 * 4 * BYTES / 2, "the tensors' bytes, not the gap's");
    assert_eq!(info.device_bytes, 4 * BYTES + 5 * BYTES, "the constants and the dispatch's tensors");
}
