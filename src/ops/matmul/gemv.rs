//! GEMV (M <= 8, B contiguous along N): the weight streamed once at memory bandwidth, K split over
//! invocations and workgroups.

use super::*;

impl Product<'_> {
    /// GEMV for M <= 8 with B contiguous along N: each invocation owns 4 neighbouring columns
    /// (coalesced quad loads of a row of B) and every row of A, and sums a strided share of K;
    /// the workgroup adds its K shares in workgroup memory. With K split over several
    /// workgroups, the partial sums go to scratch and a second launch adds them.
    pub(super) fn gemv(&self) -> Result<Lowering> {
        let (m, n, k) = (self.m, self.n, self.k);
        let [a_stride_m, a_stride_k] = self.a_strides;
        let [b_stride_k, _] = self.b_strides;
        let g = self.choose_gemv();
        let (wx, wk) = (g.wx, g.wk);
        let threads = wx * wk;
        let kc = k.div_ceil(g.splits).max(1);
        let splits = k.div_ceil(kc).max(1);
        let col_groups = n.div_ceil(4 * wx) as u64;
        let groups = col_groups * self.batch_count() * splits as u64;
        self.groups_fit(groups)?;
        let b_al = n % 4 == 0;
        // One pass stores finished outputs; float16 with an odd N needs the second pass's packing.
        let two_pass = splits > 1 || (self.data_type == DataType::Float16 && n % 2 == 1);
        let out_vec = !two_pass && self.data_type == DataType::Float32 && b_al;
        let out_type = if two_pass { DataType::Float32 } else { self.data_type };
        let mut src = self.prologue([(false, false), (true, b_al)], out_type, out_vec)?;
        let qb = |kk: &str| quad("b", b_al, false, &format!("bb + ({kk}) * {b_stride_k}u + col"), "", "", 0);
        let qb = |kk: &str| if b_al { qb(kk) } else { format!("quadn_b(bb + ({kk}) * {b_stride_k}u + col, {n}u - col)") };
        let fma_rows = |bv: &str, kk: &str| {
            (0..m)
                .map(|r| format!("            acc{r} = fma(vec4<f32>(load_a(ab + {} + ({kk}) * {a_stride_k}u)), {bv}, acc{r});\n", r * a_stride_m))
                .collect::<String>()
        };
        // With subgroups, a column's K shares are neighbouring invocations (a subgroup reads whole
        // rows of B, several K rows at once) summed in the subgroup; each subgroup's sums (one per
        // column when it spans several) meet in workgroup memory behind a single barrier. A
        // subgroup holds at least 4 invocations, so `red` needs a slot per min(wk, 4) of them.
        let per_slot = wk.min(4);
        let sub = self.subgroups() && wk.is_power_of_two() && 16 * m * threads / per_slot <= self.device.workgroup_storage;
        let slots = threads / per_slot;
        let mut decl = String::new();
        let mut reduce = String::new();
        let mut write = String::new();
        let rows = self.batch_count() * m as u64;
        if sub {
            reduce += &format!("    let step = min({wk}u, sg);\n    let lead = tk % step == 0u;\n");
        }
        for r in 0..m {
            decl += &format!("    var acc{r} = vec4<f32>(0.0);\n    var res{r} = vec4<f32>(0.0);\n");
            reduce += &if sub {
                format!("    let s{r} = subgroup_sum_vec4f(acc{r}, sg);\n    if (lead) {{ red[{o} + lid / step] = s{r}; }}\n", o = r * slots)
            } else {
                format!(
                    "    red[lid] = acc{r};\n    workgroupBarrier();\n\
                     \x20   if (tk == 0u) {{ res{r} = red[tx]; for (var j = 1u; j < {wk}u; j++) {{ res{r} = res{r} + red[j * {wx}u + tx]; }} }}\n\
                     \x20   workgroupBarrier();\n"
                )
            };
            write += &if two_pass {
                format!(
                    "        for (var e = 0u; e < 4u; e++) {{ if (col + e < {n}u) {{ out[(split * {rows}u + batch * {m}u + {r}u) * {n}u + col + e] = res{r}[e]; }} }}\n"
                )
            } else {
                format!("        store(res{r}, {r}u, col, batch * {mn}u);\n", mn = m as u64 * n as u64)
            };
        }
        let mut unrolled = String::new();
        for u in 0..4 {
            unrolled += &format!("            let b{u} = {};\n", qb(&format!("kk + {}u", u * wk)));
        }
        for u in 0..4 {
            unrolled += &fma_rows(&format!("b{u}"), &format!("kk + {}u", u * wk));
        }
        if sub {
            reduce += "    workgroupBarrier();\n    if (tk == 0u) {\n";
            for r in 0..m {
                reduce += &format!(
                    "        res{r} = red[{o} + lid / step];\n        for (var j = 1u; j < {wk}u / step; j++) {{ res{r} = res{r} + red[{o} + lid / step + j]; }}\n",
                    o = r * slots
                );
            }
            reduce += "    }\n";
            src += &subgroup_sum_fn("vec4f", wk);
        }
        let (red_len, sg_arg, tx, tk) = if sub {
            (m * slots, ", @builtin(subgroup_size) sg: u32", format!("lid / {wk}u"), format!("lid % {wk}u"))
        } else {
            (threads, "", format!("lid % {wx}u"), format!("lid / {wx}u"))
        };
        src += &format!(
            r#"var<workgroup> red: array<vec4<f32>, {red_len}>;
@compute @workgroup_size({threads})
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>{sg_arg}) {{
    let g = wid.x + wid.y * nwg.x;
    if (g >= {groups}u) {{ return; }}
    let split = g % {splits}u;
    let rest = g / {splits}u;
    let batch = rest / {col_groups}u;
    let tx = {tx};
    let tk = {tk};
    let col = ((rest % {col_groups}u) * {wx}u + tx) * 4u;
    let ab = a_base(batch);
    let bb = b_base(batch);
    let ke = min(split * {kc}u + {kc}u, {k}u);
{decl}    if (col < {n}u) {{
        var kk = split * {kc}u + tk;
        for (; kk + {w3}u < ke; kk += {w4}u) {{
{unrolled}        }}
        for (; kk < ke; kk += {wk}u) {{
            let b0 = {q0};
{f0}        }}
    }}
{reduce}    if (tk == 0u && col < {n}u) {{
{write}    }}
}}
"#,
            w3 = 3 * wk,
            w4 = 4 * wk,
            q0 = qb("kk"),
            f0 = fma_rows("b0", "kk"),
        );
        let main = Launch {
            source: src,
            reads: self.reads(),
            writes: vec![if two_pass { BufRef::Scratch(0) } else { BufRef::Output(0) }],
            invocations: groups * threads as u64,
            workgroup_size: threads,
        };
        if !two_pass {
            return Ok(Lowering::single(main));
        }
        self.split_sum(main, splits)
    }
}
