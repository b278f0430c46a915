//! Register-blocked tiles through workgroup memory: the GPU kernel for the general case.

use super::*;

impl Product<'_> {
    /// Register-blocked tiles: each invocation accumulates `tm x tn` outputs in vec4 registers
    /// from `bk`-deep tiles of A and B that the workgroup loads in quads (vec4 for aligned
    /// float32) into workgroup memory, A transposed so an invocation reads its rows as vec4s.
    /// When M, N and K are tile multiples no load or store is bounds-checked. With `splits` > 1
    /// (whole tiles: [`Product::splits_fit`]) each tile's K is shared by that many workgroups,
    /// each storing its partial sums unfinished, one output's worth after another.
    pub(super) fn tiled(&self, t: Tiles, splits: u32, out_type: DataType, target: BufRef) -> Result<Launch> {
        let (m, n, k) = (self.m, self.n, self.k);
        let [a_stride_m, a_stride_k] = self.a_strides;
        let [b_stride_k, b_stride_n] = self.b_strides;
        let (bm, bn, bk, threads) = (t.bm(), t.bn(), t.bk, t.threads());
        let (bm4, bn4, bk4) = (bm / 4, bn / 4, bk / 4);
        let (a_k, b_n) = (a_stride_k == 1, b_stride_n == 1);
        let a_al = if a_k { k % 4 == 0 } else { m % 4 == 0 };
        let b_al = if b_n { n % 4 == 0 } else { k % 4 == 0 };
        let checked = m % bm != 0 || n % bn != 0 || k % bk != 0;
        let tiles_n = n.div_ceil(bn) as u64;
        let per_batch = m.div_ceil(bm) as u64 * tiles_n;
        let groups = per_batch * self.batch_count() * splits as u64;
        self.groups_fit(groups)?;
        let kc = k / splits;
        let out_vec = out_type == DataType::Float32 && n % 4 == 0;
        let mut src = self.prologue([(true, a_al), (true, b_al)], out_type, out_vec)?;

        let loads = |total: u32, body: &dyn Fn() -> String| {
            let mut s = String::new();
            for r in 0..total.div_ceil(threads) {
                let guard = (r + 1) * threads > total;
                s += &format!("        {{\n            let q = lid + {}u;\n", r * threads);
                if guard {
                    s += &format!("            if (q < {total}u) {{\n");
                }
                s += &body();
                if guard {
                    s += "            }\n";
                }
                s += "        }\n";
            }
            s
        };
        let load_a = loads(bm * bk4, &|| {
            if a_k {
                let v = quad("a", a_al, checked, "ab + gm * SAMu + gk", &format!("gm < {m}u"), "gk", k);
                let mut s = format!(
                    "            let row = q / {bk4}u; let kq = (q % {bk4}u) * 4u; let gm = m0 + row; let gk = k0 + kq;\n\
                     \x20           let v = {};\n",
                    v.replace("SAM", &a_stride_m.to_string())
                );
                for (i, c) in XYZW.iter().enumerate() {
                    s += &format!("            sa[(kq + {i}u) * {bm4}u + row / 4u][row % 4u] = v.{c};\n");
                }
                s
            } else {
                let v = quad("a", a_al, checked, &format!("ab + gk * {a_stride_k}u + gm"), &format!("gk < {k}u"), "gm", m);
                format!(
                    "            let kk = q / {bm4}u; let mq = (q % {bm4}u) * 4u; let gm = m0 + mq; let gk = k0 + kk;\n\
                     \x20           sa[kk * {bm4}u + mq / 4u] = {v};\n"
                )
            }
        });
        let load_b = loads(bn * bk4, &|| {
            if b_n {
                let v = quad("b", b_al, checked, &format!("bb + gk * {b_stride_k}u + gn"), &format!("gk < {k}u"), "gn", n);
                format!(
                    "            let kk = q / {bn4}u; let nq = (q % {bn4}u) * 4u; let gn = n0 + nq; let gk = k0 + kk;\n\
                     \x20           sb[kk * {bn4}u + nq / 4u] = {v};\n"
                )
            } else {
                let v = quad("b", b_al, checked, &format!("bb + gn * {b_stride_n}u + gk"), &format!("gn < {n}u"), "gk", k);
                let mut s = format!(
                    "            let col = q / {bk4}u; let kq = (q % {bk4}u) * 4u; let gn = n0 + col; let gk = k0 + kq;\n\
                     \x20           let v = {v};\n"
                );
                for (i, c) in XYZW.iter().enumerate() {
                    s += &format!("            sb[(kq + {i}u) * {bn4}u + col / 4u][col % 4u] = v.{c};\n");
                }
                s
            }
        });
        let (qm, qn) = (t.tm / 4, t.tn / 4);
        // The split's share of K (its workgroups are the tile's neighbours), stored unfinished.
        let (put, split, gi, part, k_start, k_end) = if splits > 1 {
            src += &format!("fn store_part(c: vec4<f32>, row: u32, col: u32, o: u32) {{ out4[(o + row * {n}u + col) >> 2u] = c; }}\n");
            (
                "store_part",
                format!("    let split = g % {splits}u;\n    let gt = g / {splits}u;\n"),
                "gt",
                format!("split * {}u + ", self.out.element_count()),
                format!("split * {kc}u"),
                format!("split * {kc}u + {kc}u"),
            )
        } else {
            ("store", String::new(), "g", String::new(), "0u".into(), format!("{k}u"))
        };
        let mut acc = String::new();
        let mut compute = String::new();
        let mut store = String::new();
        for i in 0..qm {
            for r in 0..4 {
                for j in 0..qn {
                    acc += &format!("    var c{i}_{r}_{j} = vec4<f32>(0.0);\n");
                    store += &format!(
                        "    {put}(c{i}_{r}_{j}, m0 + ({}u + ty) * 4u + {r}u, n0 + ({}u + tx) * 4u, o);\n",
                        i * t.wy,
                        j * t.wx
                    );
                }
            }
        }
        for kk in 0..bk {
            compute += "        {\n";
            for i in 0..qm {
                compute += &format!("            let a{i} = sa[{}u + ty];\n", kk * bm4 + i * t.wy);
            }
            for j in 0..qn {
                compute += &format!("            let b{j} = sb[{}u + tx];\n", kk * bn4 + j * t.wx);
            }
            for i in 0..qm {
                for (r, c) in XYZW.iter().enumerate() {
                    for j in 0..qn {
                        compute += &format!("            c{i}_{r}_{j} = fma(vec4<f32>(a{i}.{c}), b{j}, c{i}_{r}_{j});\n");
                    }
                }
            }
            compute += "        }\n";
        }
        src += &format!(
            r#"var<workgroup> sa: array<vec4<f32>, {sa_len}>;
var<workgroup> sb: array<vec4<f32>, {sb_len}>;
@compute @workgroup_size({threads})
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
    let g = wid.x + wid.y * nwg.x;
    if (g >= {groups}u) {{ return; }}
{split}    let batch = {gi} / {per_batch}u;
    let tile = {gi} % {per_batch}u;
    let m0 = (tile / {tiles_n}u) * {bm}u;
    let n0 = (tile % {tiles_n}u) * {bn}u;
    let ab = a_base(batch);
    let bb = b_base(batch);
    let o = {part}batch * {mn}u;
    let tx = lid % {wx}u;
    let ty = lid / {wx}u;
{acc}    for (var k0 = {k_start}; k0 < {k_end}; k0 += {bk}u) {{
{load_a}{load_b}        workgroupBarrier();
{compute}        workgroupBarrier();
    }}
{store}}}
"#,
            sa_len = bk * bm4,
            sb_len = bk * bn4,
            wx = t.wx,
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
