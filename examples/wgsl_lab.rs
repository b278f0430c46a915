//! One kernel text, two compilers: our matmul and GEMV kernels as generated for several shapes
//! (tile shapes forced the way `WEBNN_WGPU_MATMUL_TILES`, `WEBNN_WGPU_MATMUL_SPLITS` and
//! `WEBNN_WGPU_GEMV` force them), timed natively through naga here and in Chromium through Dawn
//! and Tint by `bench/lab_page.js` (`bench/gpu.html?lab=PATH`), so where the browser loses to
//! native wgpu is found kernel by kernel.
//!
//!   cargo run --release --example wgsl_lab -- write out/lab.json   # the kernels, as JSON
//!   cargo run --release --example wgsl_lab -- run out/lab.json [mm1024,gemvh]  # each (of those
//!                                                                 shapes) timed here, checked
//!
//! The JSON: a list of `{shape, variant, dataType, M, K, N, scratch: [bytes], launches: [{wgsl,
//! bind: ["in0" | "in1" | "out0" | "s0", ...], groups, workgroupSize}]}`; a launch's bindings are
//! its reads then its writes, and its workgroups run as a grid of `min(groups, 65535)` by the rest,
//! as the backend dispatches them. Inputs are those of `bench/kernels_page.js`'s shape of the same
//! name on the page; here, deterministic values whose products are checked on 66 elements.
//! Probes that take a phase out of a kernel, to find which phase the browser slows, say what
//! their output must be instead: `kStride: s` (the product over every s-th k only), `kTile: t`
//! (K/t times the product over the first t k), `expect: v`
//! (every element exactly v), with `flops` (the work done, for the rate) where it is not 2MNK.
use serde_json::{json, Value};
use std::time::Instant;
use webnn_wgpu::graph::{DataType, OperandDescriptor};
use webnn_wgpu::ops::wgsl::{BufRef, DeviceTraits, LowerRequest, Lowering};
use webnn_wgpu::ops::Op;
use webnn_wgpu::backend::webgpu::{Context, ContextOptions};

/// (page shape, M, K, N, float16)
const SHAPES: &[(&str, u32, u32, u32, bool)] = &[
    ("mm1024", 1024, 1024, 1024, false),
    ("mm2048", 2048, 2048, 2048, false),
    ("mm4096", 4096, 4096, 4096, false),
    ("mm4096h", 4096, 4096, 4096, true),
    ("gemv", 1, 4096, 4096, false),
    ("gemv8192", 1, 8192, 8192, false),
    ("gemvh", 1, 4096, 4096, true),
    ("gemv8192h", 1, 8192, 8192, true),
];

/// Tile shapes (wx, wy, tm, tn, bk) tried on the products; the first is the default's.
const TILES: &[[u32; 5]] = &[
    [16, 16, 8, 8, 16],
    [16, 16, 8, 8, 8],
    [16, 16, 8, 8, 32],
    [16, 16, 4, 8, 16],
    [16, 16, 8, 4, 16],
    [16, 16, 4, 4, 16],
    [16, 16, 4, 4, 32],
    [32, 8, 4, 8, 16],
    [8, 8, 8, 8, 16],
    [8, 16, 8, 8, 16],
];
/// GEMV shapes (wx, wk, splits) tried beside the default choice.
const GEMVS: &[[u32; 3]] = &[[64, 4, 8], [64, 4, 1], [32, 8, 8], [64, 8, 16]];

/// The float16 widening with branches that this commit's kernels replaced, for the before/after.
const BRANCHY_F16: &str = "fn f16_to_f32(h: u32) -> f32 {
    let s = (h & 0x8000u) << 16u;
    let e = (h >> 10u) & 0x1fu;
    let m = h & 0x3ffu;
    if (e == 0u) {
        return bitcast<f32>(s | 0x3f800000u) * f32(m) * 5.9604644775390625e-8;
    }
    if (e == 31u) {
        return bitcast<f32>(s | 0x7f800000u | (m << 13u));
    }
    return bitcast<f32>(s | ((e + 112u) << 23u) | (m << 13u));
}
";

/// Every `fma(x, y, z)` of the tiled kernel's inner loop (arguments without commas or
/// parentheses but the splat `vec4<f32>(a0.x)`) written `z + x * y`, as the plain kernel does.
fn unfused(wgsl: String) -> String {
    let mut out = String::new();
    let mut rest = wgsl.as_str();
    while let Some(at) = rest.find("fma(") {
        out += &rest[..at];
        let args_end = rest[at..].find(");").map(|e| at + e).unwrap_or(rest.len());
        let args: Vec<&str> = rest[at + 4..args_end].rsplitn(3, ", ").collect();
        match args[..] {
            [z, y, x] => out += &format!("{z} + {x} * {y}"),
            _ => out += &rest[at..(args_end + 1).min(rest.len())],
        }
        rest = &rest[(args_end + 1).min(rest.len())..];
    }
    out + rest
}

/// The tiled kernel with its loads from A and B taken out of the K loop: the first tiles are
/// loaded once and every step multiplies them again (output: K/bk times the product over the
/// first bk k), timing the arithmetic and barriers alone. (A loop over tiles never written, the
/// zero-initialised ones, is folded away by a compiler that sees it.)
fn loads_once(wgsl: String) -> String {
    let head = wgsl.find("    for (var k0").expect("a K loop");
    let body = head + wgsl[head..].find('\n').unwrap() + 1;
    let barrier = "        workgroupBarrier();\n";
    let first = body + wgsl[body..].find(barrier).unwrap();
    let (before, loads, after) = (&wgsl[..head], &wgsl[body..first], &wgsl[first + barrier.len()..]);
    format!("{before}    {{\n        let k0 = 0u;\n{loads}    }}\n    workgroupBarrier();\n{}{after}", &wgsl[head..body])
}

/// The tiled kernel with only the first of each tile's `bk` multiply steps kept: the loads and
/// barriers at full cost, 1/bk of the arithmetic (output: the product over every bk-th k).
fn first_step_only(wgsl: String) -> String {
    let after = "        workgroupBarrier();\n";
    let first = wgsl.find(after).expect("a barrier") + after.len();
    let second = first + wgsl[first..].find(after).unwrap();
    let step_end = first + wgsl[first..].find("        }\n").unwrap() + "        }\n".len();
    format!("{}{}", &wgsl[..step_end], &wgsl[second..])
}

/// The tiled kernel with A's workgroup tile as scalars (`array<f32>`): each store one word
/// instead of one component of a vec4 picked at run time, each read four words. Same result.
fn a_tile_scalars(wgsl: String) -> String {
    let mut out = String::new();
    for line in wgsl.lines() {
        let t = line.trim_start();
        let indent = &line[..line.len() - t.len()];
        if let Some(decl) = t.strip_prefix("var<workgroup> sa: array<vec4<f32>, ") {
            let n: u32 = decl.trim_end_matches(">;").parse().expect("a tile length");
            out += &format!("var<workgroup> sa: array<f32, {}>;\n", 4 * n);
        } else if let (Some(rest), true) = (t.strip_prefix("sa["), t.contains("][")) {
            // sa[I][J] = v;  ->  sa[(I) * 4u + J] = v;
            let (i, tail) = rest.split_once("][").unwrap();
            let (j, value) = tail.split_once("] = ").unwrap();
            out += &format!("{indent}sa[({i}) * 4u + {j}] = {value}\n");
        } else if let (Some(name), Some(at)) = (t.strip_prefix("let ").and_then(|r| r.split_once(" = sa[")).map(|(n, _)| n), t.find("sa[")) {
            let index = t[at + 3..].trim_end_matches("];");
            let words: Vec<String> = (0..4).map(|c| format!("sa[({index}) * 4u + {c}u]")).collect();
            out += &format!("{indent}let {name} = vec4<f32>({});\n", words.join(", "));
        } else {
            out += line;
            out += "\n";
        }
    }
    out
}

/// The GPU's float32 multiply-add rate with nothing else: 65,536 workgroups of 256 invocations,
/// each running 16 independent vec4 chains of 256 `fma`s by 1 + s and s, where s is the first
/// word of a zero-initialised scratch buffer (so no compiler folds them); every output is 544.
const FMA_PEAK: &str = "@group(0) @binding(0) var<storage, read> z: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let g = wid.x + wid.y * nwg.x;
    if (g >= 65536u) { return; }
    let s = z[0];
    let m = vec4<f32>(1.0 + s);
    let a = vec4<f32>(s);
CHAINS_INIT    for (var i = 0u; i < 256u; i++) {
CHAINS_STEP    }
    out[g * 256u + lid] = dot(CHAINS_SUM, vec4<f32>(1.0));
}
";

fn fma_peak() -> Value {
    let init: String = (0..16).map(|j| format!("    var c{j} = vec4<f32>({}.0);\n", j + 1)).collect();
    let step: String = (0..16).map(|j| format!("        c{j} = fma(c{j}, m, a);\n")).collect();
    let sum = (0..16).map(|j| format!("c{j}")).collect::<Vec<_>>().join(" + ");
    let wgsl = FMA_PEAK.replace("CHAINS_INIT", &init).replace("CHAINS_STEP", &step).replace("CHAINS_SUM", &sum);
    json!({"shape": "mm4096", "variant": "probe: fma peak (registers only)", "dataType": "float32", "M": 4096, "K": 4096, "N": 4096,
           "expect": 544.0, "flops": 65536.0 * 256.0 * 256.0 * 16.0 * 4.0 * 2.0, "scratch": [4],
           "launches": [{"wgsl": wgsl, "bind": ["s0", "out0"], "groups": 65536, "workgroupSize": 256}]})
}

fn lowered(m: u32, k: u32, n: u32, half: bool) -> Lowering {
    let dt = if half { DataType::Float16 } else { DataType::Float32 };
    let (a, b, out) = (OperandDescriptor::new(dt, vec![m, k]), OperandDescriptor::new(dt, vec![k, n]), OperandDescriptor::new(dt, vec![m, n]));
    // A browser's device: wgpu's web backend requests no subgroups.
    let device = DeviceTraits { cpu: false, workgroup_storage: 32768, invocations: 1024, subgroups: false };
    let request = LowerRequest { inputs: vec![&a, &b], outputs: vec![&out], shader_f16: false, device };
    match webnn_wgpu::ops::lower(&Op::Matmul, &request) {
        Ok(l) => l,
        Err(e) => panic!("matmul {m}x{k}x{n} did not lower: {}", e.message()),
    }
}

fn entry(shape: &str, variant: String, (m, k, n, half): (u32, u32, u32, bool), lowering: Lowering, edit: &dyn Fn(String) -> String) -> Value {
    entry_with(shape, variant, (m, k, n, half), lowering, edit, json!({}))
}

/// [`entry`] with `extra`'s fields (a probe's `expect`, `kStride` or `kTile`) added.
fn entry_with(shape: &str, variant: String, (m, k, n, half): (u32, u32, u32, bool), lowering: Lowering, edit: &dyn Fn(String) -> String, extra: Value) -> Value {
    let Lowering::Kernels { scratch, launches } = lowering else { panic!("a matmul is never an alias") };
    let name = |r: &BufRef| match r {
        BufRef::Input(i) => format!("in{i}"),
        BufRef::Output(i) => format!("out{i}"),
        BufRef::Scratch(i) => format!("s{i}"),
    };
    let launches: Vec<Value> = launches
        .into_iter()
        .map(|l| {
            json!({
                "wgsl": edit(l.source),
                "bind": l.reads.iter().chain(&l.writes).map(name).collect::<Vec<_>>(),
                "groups": l.invocations.div_ceil(l.workgroup_size as u64),
                "workgroupSize": l.workgroup_size,
            })
        })
        .collect();
    let mut e = json!({"shape": shape, "variant": variant, "dataType": if half { "float16" } else { "float32" },
           "M": m, "K": k, "N": n, "scratch": scratch, "launches": launches});
    if let (Value::Object(e), Value::Object(extra)) = (&mut e, extra) {
        e.extend(extra);
    }
    e
}

fn write(path: &str) {
    let mut all = Vec::new();
    let same = |s: String| s;
    for &(shape, m, k, n, half) in SHAPES {
        let dims = (m, k, n, half);
        if m == 1 {
            std::env::remove_var("WEBNN_WGPU_GEMV");
            all.push(entry(shape, "default".into(), dims, lowered(m, k, n, half), &same));
            if half {
                let before = |s: String| s.replacen(&s[s.find("fn f16_to_f32").unwrap()..s.find("fn f16x2_to_f32").unwrap()], BRANCHY_F16, 1);
                all.push(entry(shape, "default, f16 widening with branches".into(), dims, lowered(m, k, n, half), &before));
            }
            for g in GEMVS {
                std::env::set_var("WEBNN_WGPU_GEMV", g.map(|v| v.to_string()).join(","));
                all.push(entry(shape, format!("gemv {}x{} threads, {} splits", g[0], g[1], g[2]), dims, lowered(m, k, n, half), &same));
            }
            std::env::remove_var("WEBNN_WGPU_GEMV");
        } else {
            for t in TILES {
                std::env::set_var("WEBNN_WGPU_MATMUL_TILES", t.map(|v| v.to_string()).join(","));
                let variant = format!("tiles {}x{} threads, {}x{} each, bk {}", t[0], t[1], t[2], t[3], t[4]);
                all.push(entry(shape, variant.clone(), dims, lowered(m, k, n, half), &same));
                if t == &TILES[0] {
                    all.push(entry(shape, format!("{variant}, a * b + c for fma"), dims, lowered(m, k, n, half), &unfused));
                }
                // The natively fastest tile and the browser's: which phase does Tint slow?
                if !half && m >= 2048 && (t == &TILES[0] || t == &[8, 16, 8, 8, 16]) {
                    all.push(entry_with(shape, format!("{variant}, probe: tiles loaded once"), dims, lowered(m, k, n, half), &loads_once, json!({"kTile": t[4]})));
                    all.push(entry_with(shape, format!("{variant}, probe: 1 of {} steps", t[4]), dims, lowered(m, k, n, half), &first_step_only, json!({"kStride": t[4]})));
                    all.push(entry(shape, format!("{variant}, A tile as scalars"), dims, lowered(m, k, n, half), &a_tile_scalars));
                }
            }
            // K shared out over more workgroups where the largest tiles are too few.
            if !half && m <= 2048 {
                for t in [&TILES[0], &[8, 16, 8, 8, 16]] {
                    std::env::set_var("WEBNN_WGPU_MATMUL_TILES", t.map(|v| v.to_string()).join(","));
                    for splits in [2, 4, 8] {
                        std::env::set_var("WEBNN_WGPU_MATMUL_SPLITS", splits.to_string());
                        let variant = format!("tiles {}x{} threads, {}x{} each, bk {}, K split {splits} ways", t[0], t[1], t[2], t[3], t[4]);
                        // (A split whose partial sums would be too large is not made.)
                        let l = lowered(m, k, n, half);
                        if matches!(&l, Lowering::Kernels { launches, .. } if launches.len() == 2) {
                            all.push(entry(shape, variant, dims, l, &same));
                        }
                    }
                }
                std::env::remove_var("WEBNN_WGPU_MATMUL_SPLITS");
            }
            std::env::remove_var("WEBNN_WGPU_MATMUL_TILES");
        }
    }
    all.push(fma_peak());
    std::fs::write(path, serde_json::to_string(&all).unwrap()).unwrap_or_else(|e| panic!("{path}: {e}"));
    println!("{} kernels written to {path}", all.len());
}

fn halves(v: &[f32]) -> Vec<u16> {
    v.iter().map(|&x| half::f16::from_f32(x).to_bits()).collect()
}

fn run(path: &str, only: Option<&String>) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let list: Vec<Value> = serde_json::from_str(&text).expect("a lab file");
    let ctx = pollster::block_on(Context::new(ContextOptions::default())).expect("a WebGPU adapter");
    let device = ctx.device();
    let max = ctx.limits().max_compute_workgroups_per_dimension as u64;
    println!("adapter: {}", ctx.adapter_info().name);
    println!("| shape | variant | ms (median of 3) | TFLOP/s or GB/s | worst error / tolerance |");
    println!("|---|---|---:|---:|---:|");
    let picked = |e: &&Value| only.is_none_or(|o| o.split(',').any(|s| e["shape"] == s));
    for e in list.iter().filter(picked) {
        let u = |k: &str| e[k].as_u64().unwrap() as usize;
        let (m, k, n) = (u("M"), u("K"), u("N"));
        let half = e["dataType"] == "float16";
        // Values exact in float16, so both types multiply the same numbers.
        let value = |i: usize, salt: usize| ((i * 7 + salt * 13) % 17) as f32 / 16.0 - 0.5;
        let a: Vec<f32> = (0..m * k).map(|i| value(i, 1)).collect();
        let b: Vec<f32> = (0..k * n).map(|i| value(i, 2)).collect();
        let upload = |v: &[f32], usage| {
            let bytes: Vec<u8> = if half { bytemuck::cast_slice(&halves(v)).to_vec() } else { bytemuck::cast_slice(v).to_vec() };
            let buf = device.create_buffer(&wgpu::BufferDescriptor { label: None, size: bytes.len().max(4).next_multiple_of(4) as u64, usage, mapped_at_creation: false });
            ctx.queue().write_buffer(&buf, 0, &bytes);
            buf
        };
        let st = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC;
        let (ba, bb) = (upload(&a, st), upload(&b, st));
        let out_bytes = (m * n * if half { 2 } else { 4 }).next_multiple_of(4) as u64;
        let bo = device.create_buffer(&wgpu::BufferDescriptor { label: None, size: out_bytes, usage: st, mapped_at_creation: false });
        let scratch: Vec<wgpu::Buffer> = e["scratch"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| device.create_buffer(&wgpu::BufferDescriptor { label: None, size: s.as_u64().unwrap().max(4), usage: st, mapped_at_creation: false }))
            .collect();
        let steps: Vec<(wgpu::ComputePipeline, wgpu::BindGroup, [u32; 2])> = e["launches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| {
                let module = device.create_shader_module(wgpu::ShaderModuleDescriptor { label: None, source: wgpu::ShaderSource::Wgsl(l["wgsl"].as_str().unwrap().into()) });
                let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                    label: None, layout: None, module: &module, entry_point: Some("main"), compilation_options: Default::default(), cache: None,
                });
                let buffers: Vec<&wgpu::Buffer> = l["bind"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|b| match b.as_str().unwrap() {
                        "in0" => &ba,
                        "in1" => &bb,
                        "out0" => &bo,
                        s => &scratch[s[1..].parse::<usize>().unwrap()],
                    })
                    .collect();
                let entries: Vec<wgpu::BindGroupEntry> =
                    buffers.iter().enumerate().map(|(i, b)| wgpu::BindGroupEntry { binding: i as u32, resource: b.as_entire_binding() }).collect();
                let group = device.create_bind_group(&wgpu::BindGroupDescriptor { label: None, layout: &pipeline.get_bind_group_layout(0), entries: &entries });
                let groups = l["groups"].as_u64().unwrap().max(1);
                let x = groups.min(max);
                (pipeline, group, [x as u32, groups.div_ceil(x) as u32])
            })
            .collect();
        let time = |reps: usize| {
            let t = Instant::now();
            let mut encoder = device.create_command_encoder(&Default::default());
            for _ in 0..reps {
                for (p, g, grid) in &steps {
                    let mut pass = encoder.begin_compute_pass(&Default::default());
                    pass.set_pipeline(p);
                    pass.set_bind_group(0, g, &[]);
                    pass.dispatch_workgroups(grid[0], grid[1], 1);
                }
            }
            ctx.queue().submit([encoder.finish()]);
            pollster::block_on(ctx.flush()).unwrap();
            t.elapsed().as_secs_f64() / reps as f64
        };
        let once = time(1);
        let reps = ((0.3 / once.max(1e-6)) as usize).clamp(3, 200);
        let mut ts: Vec<f64> = (0..3).map(|_| time(reps)).collect();
        ts.sort_by(f64::total_cmp);
        let t = ts[1];
        let out = read_back(&ctx, &bo, out_bytes, half);
        let mut worst = 0f64;
        if let Some(v) = e["expect"].as_f64() {
            // A probe's output: every element exactly `v`.
            if out.iter().take(m * n).any(|&x| x as f64 != v) {
                worst = f64::INFINITY;
            }
        } else {
            let stride = e["kStride"].as_u64().unwrap_or(1) as usize;
            // `kTile: t`: K/t times the product over the first t k.
            let (depth, times) = e["kTile"].as_u64().map_or((k, 1.0), |t| (t as usize, (k / t as usize) as f64));
            for p in 0..66usize {
                let (i, j) = match p {
                    0 => (0, 0),
                    1 => (m - 1, n - 1),
                    _ => ((p * 7919) % m, (p * 104_729) % n),
                };
                let (mut r, mut mag) = (0f64, 0f64);
                for kk in (0..depth).step_by(stride) {
                    let v = times * a[i * k + kk] as f64 * b[kk * n + j] as f64;
                    r += v;
                    mag += v.abs();
                }
                let tol = 1e-4 * mag + if half { 1e-3 * r.abs() } else { 0.0 } + 1e-6;
                worst = worst.max(((out[i * n + j] as f64 - r).abs() / tol).max(if out[i * n + j].is_nan() { f64::INFINITY } else { 0.0 }));
            }
        }
        let rate = if let Some(f) = e["flops"].as_f64() {
            format!("{:.1} TFLOP/s", f / t / 1e12)
        } else if m == 1 { format!("{:.0} GB/s", (k * n * if half { 2 } else { 4 }) as f64 / t / 1e9) } else { format!("{:.1} TFLOP/s", 2.0 * (m * n * k) as f64 / t / 1e12) };
        println!("| {} | {} | {:.3} | {rate} | {worst:.2}{} |", e["shape"].as_str().unwrap(), e["variant"].as_str().unwrap(), t * 1e3, if worst <= 1.0 { "" } else { " WRONG" });
    }
}

fn read_back(ctx: &Context, buf: &wgpu::Buffer, bytes: u64, half: bool) -> Vec<f32> {
    let device = ctx.device();
    let staging = device.create_buffer(&wgpu::BufferDescriptor { label: None, size: bytes, usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST, mapped_at_creation: false });
    let mut encoder = device.create_command_encoder(&Default::default());
    encoder.copy_buffer_to_buffer(buf, 0, &staging, 0, bytes);
    ctx.queue().submit([encoder.finish()]);
    staging.slice(..).map_async(wgpu::MapMode::Read, |_| {});
    let _ = device.poll(wgpu::PollType::wait_indefinitely());
    let data = staging.slice(..).get_mapped_range().map(|m| m.to_vec()).unwrap_or_default();
    if half {
        bytemuck::cast_slice::<u8, u16>(&data).iter().map(|&h| half::f16::from_bits(h).to_f32()).collect()
    } else {
        bytemuck::cast_slice::<u8, f32>(&data).to_vec()
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match (args.first().map(String::as_str), args.get(1)) {
        (Some("write"), Some(path)) => write(path),
        (Some("run"), Some(path)) => run(path, args.get(2)),
        _ => eprintln!("usage: wgsl_lab write FILE | wgsl_lab run FILE [SHAPE,...]"),
    }
}
