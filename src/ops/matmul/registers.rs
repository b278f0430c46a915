//! Register kernels for CPU-emulated adapters (SwiftShader, llvmpipe): no workgroup memory, each
//! invocation a block of outputs straight from the operands.

use super::*;

impl Product<'_> {
    /// The register kernel, for CPU adapters (SwiftShader, llvmpipe run a workgroup's
    /// invocations as SIMD lanes of CPU threads, where barriers and workgroup memory cost more
    /// than the caches save): each invocation computes a `tm x tn` block straight from the
    /// operands, K in steps of 4 with A's rows read as quads along K (one load for all lanes,
    /// which share the rows) and B's as quads along N. Rows and columns past the edge read the
    /// last row or column, and `store` skips them, so the loop has no bounds checks.
    pub(super) fn registers(&self, r: Regs, out_type: DataType, target: BufRef) -> Result<Launch> {
        let (m, n, k) = (self.m, self.n, self.k);
        let [a_stride_m, a_stride_k] = self.a_strides;
        let [b_stride_k, b_stride_n] = self.b_strides;
        let (bm, bn) = (r.wy * r.tm, r.wx * r.tn);
        let tiles_n = n.div_ceil(bn) as u64;
        let per_batch = m.div_ceil(bm) as u64 * tiles_n;
        let groups = per_batch * self.batch_count();
        self.groups_fit(groups)?;
        let a_vec = a_stride_k == 1 && k % 4 == 0;
        let b_vec = b_stride_n == 1 && n % 4 == 0;
        let out_vec = out_type == DataType::Float32 && n % 4 == 0;
        let src = self.prologue([(a_vec, a_vec), (b_vec, b_vec)], out_type, out_vec)?;
        let qn = r.tn / 4;
        // A's 4 values along K from element `e`; B's 4 columns of row element `e` from column `c`.
        let quad_a = |e: &str| {
            if a_vec {
                format!("quad_a({e})")
            } else {
                format!("vec4<f32>({})", (0..4).map(|i| format!("load_a({e} + {}u)", i * a_stride_k)).collect::<Vec<_>>().join(", "))
            }
        };
        let quad_b = |e: &str, j: u32| {
            if b_vec {
                format!("quad_b({e} + cq{j})")
            } else {
                let l = (0..4).map(|i| format!("load_b({e} + min(c0 + {}u, {}u) * {b_stride_n}u)", 4 * j + i, n.saturating_sub(1)));
                format!("vec4<f32>({})", l.collect::<Vec<_>>().join(", "))
            }
        };
        let mut setup = String::new();
        let mut acc = String::new();
        let mut step = String::new();
        let mut tail = String::new();
        let mut store = String::new();
        for i in 0..r.tm {
            setup += &format!("    let ra{i} = ab + min(r0 + {i}u, {}u) * {a_stride_m}u;\n", m.saturating_sub(1));
        }
        if b_vec {
            for j in 0..qn {
                setup += &format!("    let cq{j} = min(c0 + {}u, {}u);\n", 4 * j, n.saturating_sub(4));
            }
        }
        for i in 0..r.tm {
            for j in 0..qn {
                acc += &format!("    var c{i}_{j} = vec4<f32>(0.0);\n");
                store += &format!("    store(c{i}_{j}, r0 + {i}u, c0 + {}u, o);\n", 4 * j);
            }
        }
        if self.epilogue.is_some() {
            // One store in a loop, not one per block: a CPU adapter compiles the epilogue into
            // every call (SwiftShader took 2 s for a 64-call gelu epilogue, 0.2 s without it).
            let blocks: Vec<String> = (0..r.tm).flat_map(|i| (0..qn).map(move |j| format!("c{i}_{j}"))).collect();
            store = format!(
                "    let blocks = array<vec4<f32>, {count}>({list});\n    for (var s = 0u; s < {count}u; s++) {{\n        \
                 store(blocks[s], r0 + s / {qn}u, c0 + (s % {qn}u) * 4u, o);\n    }}\n",
                count = blocks.len(),
                list = blocks.join(", ")
            );
        }
        for i in 0..r.tm {
            step += &format!("        let a{i} = {};\n", quad_a(&format!("ra{i} + k * {a_stride_k}u")));
        }
        for kk in 0..4 {
            for j in 0..qn {
                step += &format!("        let b{kk}_{j} = {};\n", quad_b(&format!("bb + (k + {kk}u) * {b_stride_k}u"), j));
            }
        }
        for (kk, c) in XYZW.iter().enumerate() {
            for i in 0..r.tm {
                for j in 0..qn {
                    step += &format!("        c{i}_{j} = c{i}_{j} + a{i}.{c} * b{kk}_{j};\n");
                }
            }
        }
        if k % 4 != 0 {
            for i in 0..r.tm {
                tail += &format!("        let a{i} = load_a(ra{i} + k * {a_stride_k}u);\n");
            }
            for j in 0..qn {
                tail += &format!("        let b{j} = {};\n", quad_b(&format!("bb + k * {b_stride_k}u"), j));
            }
            for i in 0..r.tm {
                for j in 0..qn {
                    tail += &format!("        c{i}_{j} = c{i}_{j} + a{i} * b{j};\n");
                }
            }
            tail = format!("    for (var k = {}u; k < {k}u; k++) {{\n{tail}    }}\n", k - k % 4);
        }
        self.register_launch(r, src, [&setup, &acc, &step, &tail, &store], target)
    }

    /// Dot products in registers when A and B are both contiguous along K (gemm with bTranspose,
    /// N = 1), for CPU adapters: each invocation sums a `tm x tn` block over K in quads, with no
    /// reduction across invocations. Edge rows and columns read the last one and are not stored;
    /// columns past N in every block are not computed.
    pub(super) fn dots(&self, r: Regs, out_type: DataType, target: BufRef) -> Result<Launch> {
        let (m, n, k) = (self.m, self.n, self.k);
        let [a_stride_m, _] = self.a_strides;
        let [_, b_stride_n] = self.b_strides;
        let (bm, bn) = (r.wy * r.tm, r.wx * r.tn);
        let tiles_n = n.div_ceil(bn) as u64;
        let per_batch = m.div_ceil(bm) as u64 * tiles_n;
        let groups = per_batch * self.batch_count();
        self.groups_fit(groups)?;
        let al = k % 4 == 0;
        let out_vec = out_type == DataType::Float32 && n % 4 == 0;
        let src = self.prologue([(al, al), (al, al)], out_type, out_vec)?;
        let quad = |name: &str, e: String| {
            if al {
                format!("quad_{name}({e})")
            } else {
                format!("vec4<f32>({})", (0..4).map(|i| format!("load_{name}({e} + {i}u)")).collect::<Vec<_>>().join(", "))
            }
        };
        let cols: Vec<u32> = (0..r.tn).filter(|&j| j < n).collect();
        let mut setup = String::new();
        let mut acc = String::new();
        let mut step = String::new();
        let mut tail = String::new();
        let mut store = String::new();
        for i in 0..r.tm {
            setup += &format!("    let ra{i} = ab + min(r0 + {i}u, {}u) * {a_stride_m}u;\n", m.saturating_sub(1));
            step += &format!("        let a{i} = {};\n", quad("a", format!("ra{i} + k")));
            tail += &format!("        let a{i} = load_a(ra{i} + k);\n");
        }
        for &j in &cols {
            setup += &format!("    let rb{j} = bb + min(c0 + {j}u, {}u) * {b_stride_n}u;\n", n.saturating_sub(1));
            step += &format!("        let b{j} = {};\n", quad("b", format!("rb{j} + k")));
            tail += &format!("        let b{j} = load_b(rb{j} + k);\n");
        }
        for i in 0..r.tm {
            for &j in &cols {
                acc += &format!("    var s{i}_{j} = vec4<f32>(0.0);\n");
                step += &format!("        s{i}_{j} = s{i}_{j} + a{i} * b{j};\n");
                tail += &format!("        s{i}_{j}.x = s{i}_{j}.x + a{i} * b{j};\n");
            }
            for q in 0..r.tn.div_ceil(4) {
                let v = (4 * q..4 * q + 4)
                    .map(|j| if cols.contains(&j) { format!("dot(s{i}_{j}, vec4<f32>(1.0))") } else { "0.0".into() });
                store += &format!("    store(vec4<f32>({}), r0 + {i}u, c0 + {}u, o);\n", v.collect::<Vec<_>>().join(", "), 4 * q);
            }
        }
        let tail = if k % 4 == 0 { String::new() } else { format!("    for (var k = {}u; k < {k}u; k++) {{\n{tail}    }}\n", k - k % 4) };
        self.register_launch(r, src, [&setup, &acc, &step, &tail, &store], target)
    }

    /// The `main` of the register kernels ([`registers`](Self::registers),
    /// [`dots`](Self::dots)) after `src`'s declarations: each invocation's `tm x tn` block of its
    /// workgroup's tile, then `setup`, `acc`, the K loop over quads (`step`), `tail` and `store`.
    pub(super) fn register_launch(&self, r: Regs, mut src: String, parts: [&str; 5], target: BufRef) -> Result<Launch> {
        let (m, n, k) = (self.m, self.n, self.k);
        let (bm, bn, threads) = (r.wy * r.tm, r.wx * r.tn, r.wx * r.wy);
        let tiles_n = n.div_ceil(bn) as u64;
        let per_batch = m.div_ceil(bm) as u64 * tiles_n;
        let groups = per_batch * self.batch_count();
        let [setup, acc, step, tail, store] = parts;
        src += &format!(
            r#"@compute @workgroup_size({threads})
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
    let g = wid.x + wid.y * nwg.x;
    if (g >= {groups}u) {{ return; }}
    let batch = g / {per_batch}u;
    let tile = g % {per_batch}u;
    let r0 = (tile / {tiles_n}u) * {bm}u + (lid / {wx}u) * {tm}u;
    let c0 = (tile % {tiles_n}u) * {bn}u + (lid % {wx}u) * {tn}u;
    if (r0 >= {m}u || c0 >= {n}u) {{ return; }}
    let ab = a_base(batch);
    let bb = b_base(batch);
    let o = batch * {mn}u;
{setup}{acc}    for (var k = 0u; k < {k4}u; k += 4u) {{
{step}    }}
{tail}{store}}}
"#,
            wx = r.wx,
            tm = r.tm,
            tn = r.tn,
            k4 = k - k % 4,
            mn = m as u64 * n as u64,
        );
        Ok(Launch {
            source: src,
            reads: self.reads(),
            writes: vec![target],
            invocations: groups * threads as u64,
            workgroup_size: threads,
        })
    }
}
