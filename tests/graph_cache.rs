//! The graph cache on the WebGPU backend: a saved graph loads on a fresh context without
//! building, gives bit-identical results, keeps its constants in the `"disk"` tier until used,
//! shares constants of the same bytes, and refuses records of another version or adapter and
//! corrupt records or constant files with the right error, never a wrong result.
#![cfg(not(target_arch = "wasm32"))] // native: `wasm-pack test` builds every test target for wasm32

mod common;
use std::rc::Rc;

use common::weight_files::safetensors;
use common::*;
use webnn_wgpu::backend::webgpu::{Context, ContextOptions, Graph, Tensor, TensorDescriptor};
use webnn_wgpu::graph::{DataType, GraphBuilder, OperandDescriptor};
use webnn_wgpu::memory::Residency;
use webnn_wgpu::ops::elementwise_binary::BinaryOp;
use webnn_wgpu::ops::elementwise_unary::UnaryOp;
use webnn_wgpu::ops::{HostTensor, Op};
use webnn_wgpu::weights::{BytesSource, LoadOptions, WeightFile};
use webnn_wgpu::Error;

const N: u32 = 6;

fn tensor(ctx: &Context, shape: &[u32], readable: bool) -> Tensor {
    let operand = OperandDescriptor::new(DataType::Float32, shape.to_vec());
    block_on(ctx.create_tensor(TensorDescriptor { operand, readable, writable: !readable })).unwrap()
}

/// `y = relu(x @ w + b)` and `z = exp(y) * b2` (two outputs; matmul, fused element-wise, a
/// second kernel), with `b` read by two operators.
fn build(ctx: &Context, w: &[f32], b: &[f32]) -> Graph {
    let mut g = GraphBuilder::new(ctx).unwrap();
    let x = g.input("x", OperandDescriptor::new(DataType::Float32, vec![2, N])).unwrap();
    let w = g.constant(OperandDescriptor::new(DataType::Float32, vec![N, N]), bytemuck::cast_slice(w)).unwrap();
    let bias = g.constant(OperandDescriptor::new(DataType::Float32, vec![N]), bytemuck::cast_slice(b)).unwrap();
    let m = g.operator1(Op::Matmul, &[x, w], "").unwrap();
    let a = g.operator1(Op::Binary(BinaryOp::Add), &[m, bias], "").unwrap();
    let y = g.operator1(Op::Unary(UnaryOp::Abs), &[a], "").unwrap();
    let e = g.operator1(Op::Unary(UnaryOp::Exp), &[y], "").unwrap();
    let z = g.operator1(Op::Binary(BinaryOp::Mul), &[e, bias], "").unwrap();
    block_on(g.build(&[("y".to_string(), y), ("z".to_string(), z)])).unwrap()
}

/// The outputs `y`, `z` of a dispatch with input `x`.
fn run(ctx: &Context, graph: &Graph, x: &[f32]) -> (Vec<u8>, Vec<u8>) {
    let input = tensor(ctx, &[2, N], false);
    let (y, z) = (tensor(ctx, &[2, N], true), tensor(ctx, &[2, N], true));
    ctx.write_tensor(&input, bytemuck::cast_slice(x)).unwrap();
    ctx.dispatch(graph, &[("x".into(), input)], &[("y".into(), y.clone()), ("z".into(), z.clone())]).unwrap();
    (block_on(ctx.read_tensor(&y)).unwrap(), block_on(ctx.read_tensor(&z)).unwrap())
}

/// What `saveGraph` stores: the record, and each constant's bytes under a content key.
struct Saved {
    record: Vec<u8>,
    constants: Vec<(String, Vec<u8>)>,
}

fn save(graph: &Graph) -> Saved {
    let (record, constants) = graph.save().unwrap();
    let constants = constants
        .iter()
        .map(|c| {
            let bytes = block_on(graph.saved_constant_bytes(c)).unwrap();
            // A stand-in for the content hash the page computes: the bytes themselves.
            (format!("{bytes:?}"), bytes)
        })
        .collect();
    Saved { record, constants }
}

fn sources(saved: &Saved) -> Vec<(String, Rc<BytesSource>)> {
    saved.constants.iter().map(|(key, bytes)| (key.clone(), Rc::new(BytesSource::new("constant", bytes.clone())))).collect()
}

fn load(ctx: &Context, saved: &Saved) -> webnn_wgpu::Result<Graph> {
    block_on(Graph::load(ctx, &saved.record, sources(saved)))
}

fn inputs(seed: u64) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let mut rng = Rng::new(seed);
    (rng.floats(2 * N as usize, -1.0, 1.0), rng.floats((N * N) as usize, -1.0, 1.0), rng.floats(N as usize, -1.0, 1.0))
}

#[test]
fn a_loaded_graph_gives_bit_identical_results_and_starts_on_disk() {
    let (x, w, b) = inputs(1);
    let ctx = context();
    let graph = build(&ctx, &w, &b);
    let expected = run(&ctx, &graph, &x);
    let saved = save(&graph);
    assert_eq!(saved.constants.len(), 2);

    // A fresh context, as on a second visit.
    let fresh = context();
    let loaded = load(&fresh, &saved).unwrap();
    assert_eq!(loaded.residency(), Residency::Disk);
    assert_eq!(loaded.device_bytes(), 0);
    assert_eq!(fresh.memory_info().device_bytes, 0, "nothing is uploaded before the first dispatch");
    assert_eq!(fresh.pipeline_count(), ctx.pipeline_count(), "the saved kernels, compiled from their WGSL");
    assert_eq!(loaded.input_descriptors(), graph.input_descriptors());
    assert_eq!(loaded.output_descriptors(), graph.output_descriptors());
    assert_eq!(loaded.step_count(), graph.step_count());

    assert_eq!(run(&fresh, &loaded, &x), expected);
    assert_eq!(loaded.residency(), Residency::Device);
    assert_eq!(loaded.device_bytes(), 4 * (N * N + N) as u64);
    assert_eq!(fresh.memory_info().bytes_streamed_from_disk, 4 * (N * N + N) as u64);

    // The disk tier works as for any weight file: out and back, same results.
    block_on(loaded.swap_out(Residency::Disk)).unwrap();
    assert_eq!(loaded.residency(), Residency::Disk);
    assert_eq!(run(&fresh, &loaded, &x), expected);

    // The reference: y = |x @ w + b|, z = exp(y) * b, in float64.
    let host = |shape: &[u32], v: &[f32]| {
        HostTensor::new(OperandDescriptor::new(DataType::Float32, shape.to_vec()), v.iter().map(|&f| f as f64).collect()).unwrap()
    };
    let r = |op: Op, ins: &[HostTensor]| reference_op(&op, ins).unwrap().remove(0);
    let m = r(Op::Matmul, &[host(&[2, N], &x), host(&[N, N], &w)]);
    let y = r(Op::Unary(UnaryOp::Abs), &[r(Op::Binary(BinaryOp::Add), &[m, host(&[N], &b)])]);
    let z = r(Op::Binary(BinaryOp::Mul), &[r(Op::Unary(UnaryOp::Exp), &[y.clone()]), host(&[N], &b)]);
    let got = |bytes: &[u8], shape: &[u32]| host(shape, bytemuck::cast_slice(bytes));
    assert_close(&[got(&expected.0, &[2, N]), got(&expected.1, &[2, N])], &[y, z], 4, 1e-5, "the saved graph");
}

#[test]
fn graphs_loaded_with_the_same_bytes_share_their_constants() {
    let (x, w, b) = inputs(2);
    let ctx = context();
    let graph = build(&ctx, &w, &b);
    let expected = run(&ctx, &graph, &x);
    let saved = save(&graph);
    let fresh = context();
    let (first, second) = (load(&fresh, &saved).unwrap(), load(&fresh, &saved).unwrap());
    assert_eq!(run(&fresh, &first, &x), expected);
    assert_eq!(run(&fresh, &second, &x), expected);
    let constants = 4 * (N * N + N) as u64;
    // Each graph counts the constants it holds; the context holds them once.
    assert_eq!(first.device_bytes(), constants);
    assert_eq!(fresh.memory_info().bytes_streamed_from_disk, constants, "streamed once for both graphs");
    let both = fresh.memory_info().device_bytes;
    block_on(first.swap_out(Residency::Disk)).unwrap();
    assert_eq!(fresh.memory_info().device_bytes, both, "the constants are still held by the second graph");
    block_on(second.swap_out(Residency::Disk)).unwrap();
    assert!(both - fresh.memory_info().device_bytes >= constants);
}

#[test]
fn constants_streamed_from_a_weight_file_are_saved_from_the_gpu() {
    let (x, w, b) = inputs(3);
    let ctx = context();
    let file = safetensors(&[
        ("w", "F32", vec![N as u64, N as u64], bytemuck::cast_slice(&w).to_vec()),
        ("b", "BF16", vec![N as u64], b.iter().flat_map(|v| half::bf16::from_f32(*v).to_le_bytes()).collect()),
    ]);
    let source = Rc::new(BytesSource::new("model.safetensors", file));
    let weights = block_on(WeightFile::open(&*source)).unwrap();
    let options = LoadOptions::default();
    let (wt, _) = block_on(weights.constant_tensor(&ctx, &source, "w", &options, &mut |_, _| {})).unwrap();
    let (bt, _) = block_on(weights.constant_tensor(&ctx, &source, "b", &options, &mut |_, _| {})).unwrap();
    let mut g = GraphBuilder::new(&ctx).unwrap();
    let xi = g.input("x", OperandDescriptor::new(DataType::Float32, vec![2, N])).unwrap();
    let (wo, bo) = (g.constant_tensor(&wt).unwrap(), g.constant_tensor(&bt).unwrap());
    let m = g.operator1(Op::Matmul, &[xi, wo], "").unwrap();
    let y = g.operator1(Op::Binary(BinaryOp::Add), &[m, bo], "").unwrap();
    let z = g.operator1(Op::Binary(BinaryOp::Sub), &[m, bo], "").unwrap();
    let graph = block_on(g.build(&[("y".to_string(), y), ("z".to_string(), z)])).unwrap();
    // Saved from the "disk" tier: the graph is made resident to read the bytes back.
    block_on(graph.swap_out(Residency::Disk)).unwrap();
    let saved = save(&graph);
    // bfloat16 was widened to float32 on load: the saved bytes are the buffer's.
    let b32: Vec<f32> = b.iter().map(|v| half::bf16::from_f32(*v).to_f32()).collect();
    assert!(saved.constants.iter().any(|(_, bytes)| bytes.as_slice() == bytemuck::cast_slice::<f32, u8>(&b32)));
    let expected = run(&ctx, &graph, &x);
    let loaded = load(&context(), &saved).unwrap();
    assert_eq!(run(loaded.context(), &loaded, &x), expected);
}

fn expect_error(result: webnn_wgpu::Result<Graph>, name: &str, part: &str) {
    match result {
        Err(e) => {
            assert_eq!(e.name(), name, "{e}");
            assert!(e.message().contains(part), "'{part}' not in: {e}");
        }
        Ok(_) => panic!("a {name} was expected ({part})"),
    }
}

fn edited(saved: &Saved, edit: impl Fn(&mut serde_json::Value)) -> Saved {
    let mut record: serde_json::Value = serde_json::from_slice(&saved.record).unwrap();
    edit(&mut record);
    Saved { record: serde_json::to_vec(&record).unwrap(), constants: saved.constants.clone() }
}

#[test]
fn records_of_another_version_or_adapter_are_not_found() {
    let (_, w, b) = inputs(4);
    let ctx = context();
    let saved = save(&build(&ctx, &w, &b));
    let other_version = edited(&saved, |r| r["header"]["package"] = "0.0.1".into());
    expect_error(load(&ctx, &other_version), "NotFoundError", "0.0.1");
    let other_adapter = edited(&saved, |r| r["header"]["adapter"] = "another GPU".into());
    expect_error(load(&ctx, &other_adapter), "NotFoundError", "another GPU");
    let other_format = edited(&saved, |r| r["header"]["format"] = 999.into());
    expect_error(load(&ctx, &other_format), "NotFoundError", "999");
    // A CPU context's record is refused too: another backend (its header says so).
    let other_backend = edited(&saved, |r| r["header"]["backend"] = "cpu".into());
    expect_error(load(&ctx, &other_backend), "NotFoundError", "cpu");
}

#[test]
fn corrupt_records_and_constant_files_are_data_errors() {
    let (_, w, b) = inputs(5);
    let ctx = context();
    let saved = save(&build(&ctx, &w, &b));
    let truncated = Saved { record: saved.record[..saved.record.len() / 2].to_vec(), constants: saved.constants.clone() };
    expect_error(load(&ctx, &truncated), "DataError", "corrupt");

    let mut short = Saved { record: saved.record.clone(), constants: saved.constants.clone() };
    short.constants[0].1.truncate(8);
    expect_error(load(&ctx, &short), "DataError", "holds 8 bytes");
    let mut missing = Saved { record: saved.record.clone(), constants: saved.constants.clone() };
    missing.constants.pop();
    expect_error(load(&ctx, &missing), "DataError", "constants");

    let corrupt_edits: Vec<(&str, Box<dyn Fn(&mut serde_json::Value)>)> = vec![
        ("a slot out of range", Box::new(|r| r["steps"][0]["Kernel"]["slots"][0] = serde_json::json!({ "Intermediate": 99 }))),
        ("an unknown kernel", Box::new(|r| r["steps"][0]["Kernel"]["kernel"] = 99.into())),
        ("a binding count that differs", Box::new(|r| r["kernels"][0]["reads"] = 7.into())),
        ("an empty grid", Box::new(|r| r["steps"][0]["Kernel"]["grid"] = serde_json::json!([0, 1]))),
        ("a huge slot", Box::new(|r| r["slot_sizes"] = serde_json::json!([1u64 << 60]))),
        ("an input of no type", Box::new(|r| r["inputs"][0]["data_type"] = "float99".into())),
        ("a kernel that does not compile", Box::new(|r| r["kernels"][0]["source"] = "fn main( {".into())),
        ("a written buffer bound twice", Box::new(|r| {
            let slots = r["steps"][0]["Kernel"]["slots"].as_array().unwrap().clone();
            let last = slots.len() - 1;
            r["steps"][0]["Kernel"]["slots"][last] = slots[0].clone();
        })),
    ];
    for (what, edit) in corrupt_edits {
        match load(&ctx, &edited(&saved, edit)) {
            Err(Error::Data(_)) => {}
            Err(e) => panic!("{what}: {e}, not a DataError"),
            Ok(_) => panic!("{what}: loaded"),
        }
    }
    assert!(ctx.take_uncaptured_error().is_none());
}

#[test]
fn a_loaded_graph_respects_the_memory_budget() {
    let (x, w, b) = inputs(6);
    let ctx = context();
    let graph = build(&ctx, &w, &b);
    let expected = run(&ctx, &graph, &x);
    let saved = save(&graph);
    let tight = block_on(Context::new(ContextOptions { memory_budget: Some(64), ..ContextOptions::default() })).unwrap();
    expect_error(load(&tight, &saved), "QuotaExceededError", "budget");
    let roomy = block_on(Context::new(ContextOptions { memory_budget: Some(1 << 20), ..ContextOptions::default() })).unwrap();
    let loaded = load(&roomy, &saved).unwrap();
    assert_eq!(run(&roomy, &loaded, &x), expected);
}

mod cpu {
    //! The graph cache on the CPU backend: the record is the IR, checked again on load.
    use super::*;
    use webnn_wgpu::backend::cpu::{CpuContext, CpuGraph};
    use webnn_wgpu::backend::{BackendGraph, TensorDescriptor};
    use webnn_wgpu::graph::Number;
    use webnn_wgpu::weights::BytesSource;
    use std::rc::Rc;
    use webnn_wgpu::ops::activation::Activation;
    use webnn_wgpu::ops::pad::{PadOptions, PaddingMode};

    /// `y = clamp(pad(x, NaN) @ w, -inf, 0.5)`: options that JSON cannot hold as numbers.
    fn build(ctx: &CpuContext, w: &[f32]) -> CpuGraph {
        let mut g = GraphBuilder::new(ctx).unwrap();
        let x = g.input("x", OperandDescriptor::new(DataType::Float32, vec![2, N - 1])).unwrap();
        let pad = PadOptions { beginning_padding: vec![0, 1], ending_padding: vec![0, 0], mode: PaddingMode::Constant, value: Number::Double(f64::NAN) };
        let p = g.operator1(Op::Pad(pad), &[x], "").unwrap();
        let w = g.constant(OperandDescriptor::new(DataType::Float32, vec![N, N]), bytemuck::cast_slice(w)).unwrap();
        let m = g.operator1(Op::Matmul, &[p, w], "").unwrap();
        let clamp = Activation::Clamp { min_value: Some(Number::Double(f64::NEG_INFINITY)), max_value: Some(Number::Double(0.5)) };
        let y = g.operator1(Op::Activation(clamp), &[m], "").unwrap();
        CpuGraph::compile(ctx, g.prepare_build(&[("y".to_string(), y)]).unwrap()).unwrap()
    }

    fn run(ctx: &CpuContext, graph: &CpuGraph, x: &[f32]) -> Vec<u8> {
        let d = |shape: Vec<u32>, readable| TensorDescriptor { operand: OperandDescriptor::new(DataType::Float32, shape), readable, writable: !readable };
        let (input, y) = (ctx.create_tensor(d(vec![2, N - 1], false)).unwrap(), ctx.create_tensor(d(vec![2, N], true)).unwrap());
        ctx.write_tensor(&input, bytemuck::cast_slice(x)).unwrap();
        ctx.dispatch(graph, &[("x".into(), input)], &[("y".into(), y.clone())]).unwrap();
        block_on(ctx.read_tensor(&y)).unwrap()
    }

    fn save(graph: &CpuGraph) -> (Vec<u8>, Vec<Vec<u8>>) {
        let (record, constants) = BackendGraph::save(graph).unwrap();
        (record, constants.into_iter().map(|c| block_on(BackendGraph::saved_constant_bytes(graph, c))).collect::<Result<_, _>>().unwrap())
    }

    fn load(ctx: &CpuContext, record: &[u8], constants: &[Vec<u8>]) -> webnn_wgpu::Result<CpuGraph> {
        let constants = constants.iter().enumerate().map(|(i, c)| (i.to_string(), Rc::new(BytesSource::new("constant", c.clone())))).collect();
        CpuGraph::load(ctx, record, constants)
    }

    #[test]
    fn a_loaded_graph_gives_bit_identical_results() {
        let mut rng = Rng::new(7);
        let (x, w) = (rng.floats((2 * (N - 1)) as usize, -1.0, 1.0), rng.floats((N * N) as usize, -1.0, 1.0));
        let ctx = CpuContext::new(ContextOptions::default());
        let graph = build(&ctx, &w);
        let expected = run(&ctx, &graph, &x);
        // The padding is NaN, so the first column is NaN and the clamp keeps it: the options came back.
        assert!(bytemuck::cast_slice::<u8, f32>(&expected)[0].is_nan());
        let (record, constants) = save(&graph);
        let fresh = CpuContext::new(ContextOptions::default());
        let loaded = load(&fresh, &record, &constants).unwrap();
        assert_eq!(loaded.input_descriptors(), graph.input_descriptors());
        assert_eq!(loaded.output_descriptors(), graph.output_descriptors());
        assert_eq!(run(&fresh, &loaded, &x), expected);
        assert!(bytemuck::cast_slice::<u8, f32>(&expected).iter().all(|v| v.is_nan() || *v <= 0.5));
    }

    #[test]
    fn wrong_records_are_refused() {
        let ctx = CpuContext::new(ContextOptions::default());
        let (record, constants) = save(&build(&ctx, &vec![0.5; (N * N) as usize]));
        let edit = |f: &dyn Fn(&mut serde_json::Value)| {
            let mut r: serde_json::Value = serde_json::from_slice(&record).unwrap();
            f(&mut r);
            serde_json::to_vec(&r).unwrap()
        };
        let name = |r: webnn_wgpu::Result<CpuGraph>| r.err().map(|e| e.name()).unwrap_or("loaded");
        // A WebGPU record, or another version: not found (build again).
        assert_eq!(name(load(&ctx, &edit(&|r| r["header"]["backend"] = "webgpu".into()), &constants)), "NotFoundError");
        assert_eq!(name(load(&ctx, &edit(&|r| r["header"]["package"] = "9.9.9".into()), &constants)), "NotFoundError");
        // Shapes that do not follow from the operators, operands out of order, a short constant.
        assert_eq!(name(load(&ctx, &edit(&|r| r["descriptors"][1]["shape"] = serde_json::json!([2, 7])), &constants)), "DataError");
        assert_eq!(name(load(&ctx, &edit(&|r| r["operators"][0]["inputs"] = serde_json::json!([3])), &constants)), "DataError");
        assert_eq!(name(load(&ctx, &edit(&|r| r["outputs"][0][1] = 99.into()), &constants)), "DataError");
        assert_eq!(name(load(&ctx, &edit(&|r| r["inputs"] = serde_json::json!([["x", 0], ["x", 1]])), &constants)), "DataError");
        assert_eq!(name(load(&ctx, &record, &[constants[0][..12].to_vec()])), "DataError");
        assert_eq!(name(load(&ctx, &record[..record.len() - 9], &constants)), "DataError");
        assert_eq!(name(load(&ctx, &record, &constants)), "loaded");
    }
}

/// Records with random bytes changed or cut short load or fail with an error, and a loaded one
/// dispatches: never a panic, on either backend.
#[test]
fn mutated_records_never_panic() {
    let (x, w, b) = inputs(8);
    let ctx = context();
    let saved = save(&build(&ctx, &w, &b));
    let cpu = webnn_wgpu::backend::cpu::CpuContext::new(ContextOptions::default());
    let cpu_graph = {
        let mut g = GraphBuilder::new(&cpu).unwrap();
        let xi = g.input("x", OperandDescriptor::new(DataType::Float32, vec![2, N])).unwrap();
        let wc = g.constant(OperandDescriptor::new(DataType::Float32, vec![N, N]), bytemuck::cast_slice(&w)).unwrap();
        let y = g.operator1(Op::Matmul, &[xi, wc], "").unwrap();
        let y = g.operator1(Op::Unary(UnaryOp::Abs), &[y], "").unwrap();
        webnn_wgpu::backend::cpu::CpuGraph::compile(&cpu, g.prepare_build(&[("y".to_string(), y)]).unwrap()).unwrap()
    };
    let (cpu_record, cpu_constants) = webnn_wgpu::backend::BackendGraph::save(&cpu_graph).unwrap();
    let cpu_bytes: Vec<Vec<u8>> = cpu_constants.iter().map(|c| c.host_copy().unwrap()).collect();
    let mut rng = Rng::new(99);
    let mut mutate = |record: &[u8]| {
        let mut r = record.to_vec();
        match rng.below(3) {
            0 => r.truncate(rng.below(r.len() as u32) as usize),
            _ => {
                for _ in 0..1 + rng.below(4) {
                    let i = rng.below(r.len() as u32) as usize;
                    // Digits and structure are where a change still parses.
                    r[i] = b"0123456789,:[]{}\"-eE"[rng.below(20) as usize];
                }
            }
        }
        r
    };
    let (mut loaded, mut refused) = (0, 0);
    for _ in 0..150 {
        let record = mutate(&saved.record);
        match block_on(Graph::load(&ctx, &record, sources(&saved))) {
            Ok(graph) => {
                loaded += 1;
                let input = tensor(&ctx, &[2, N], false);
                let (y, z) = (tensor(&ctx, &[2, N], true), tensor(&ctx, &[2, N], true));
                ctx.write_tensor(&input, bytemuck::cast_slice(&x)).unwrap();
                if ctx.dispatch(&graph, &[("x".into(), input)], &[("y".into(), y.clone()), ("z".into(), z)]).is_ok() {
                    let _ = block_on(ctx.read_tensor(&y));
                }
            }
            Err(_) => refused += 1,
        }
        let record = mutate(&cpu_record);
        let constants = cpu_bytes.iter().enumerate().map(|(i, c)| (i.to_string(), std::rc::Rc::new(webnn_wgpu::weights::BytesSource::new("constant", c.clone())))).collect();
        match webnn_wgpu::backend::cpu::CpuGraph::load(&cpu, &record, constants) {
            Ok(graph) => {
                loaded += 1;
                let d = |shape: Vec<u32>, readable| TensorDescriptor { operand: OperandDescriptor::new(DataType::Float32, shape), readable, writable: !readable };
                let (input, y) = (cpu.create_tensor(d(vec![2, N], false)).unwrap(), cpu.create_tensor(d(vec![2, N], true)).unwrap());
                if cpu.dispatch(&graph, &[("x".into(), input)], &[("y".into(), y.clone())]).is_ok() {
                    let _ = block_on(cpu.read_tensor(&y));
                }
            }
            Err(_) => refused += 1,
        }
    }
    assert!(refused > 0, "every mutation loaded ({loaded})");
    println!("{loaded} mutated records loaded, {refused} refused");
}
