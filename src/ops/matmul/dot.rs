//! Dot products along K (A and B both contiguous along K): a group of invocations per output.

use super::*;

impl Product<'_> {
    /// Dot products along K when A and B are both contiguous along K (N = 1, or gemm with
    /// bTranspose): a group of invocations per output reads both rows in coalesced quads and
    /// adds its partial sums in workgroup memory.
    pub(super) fn dot(&self) -> Result<Launch> {
        let (m, n, k) = (self.m, self.n, self.k);
        let [a_stride_m, _] = self.a_strides;
        let [_, b_stride_n] = self.b_strides;
        // A forced GEMV shape's `wk` (a power of two up to 128) also sets the lanes per output, so
        // tests reach every subgroup case (lanes narrower and wider than the subgroup).
        let forced = shape_override("WEBNN_WGPU_GEMV").and_then(|v| v.get(1).copied()).filter(|&l| l.is_power_of_two() && l <= 128);
        let lanes: u32 = forced.unwrap_or(if self.device.cpu { 8 } else { 32 });
        let threads = 256u32.min(self.device.invocations).max(2 * lanes);
        let per_group = threads / lanes;
        let count = self.out.element_count();
        let groups = count.div_ceil(per_group as u64);
        self.groups_fit(groups)?;
        let al = k % 4 == 0;
        let mut src = self.prologue([(true, al), (true, al)], self.data_type, false)?;
        let qa = quad("a", al, false, "ae + q", "true", "q", k);
        let qb = quad("b", al, false, "be + q", "true", "q", k);
        // With subgroups, each subgroup sums its lanes' shares (per output when it spans several),
        // the sums meet in workgroup memory, and each output's total is shared for the float16
        // pairs: two barriers in all, against one per halving of `lanes` through workgroup memory.
        let sub = self.subgroups();
        let mut tree = String::new();
        let (total, next) = if sub {
            src += &subgroup_sum_fn("f32", lanes);
            tree += &format!(
                "    let step = min({lanes}u, sg);\n    let x = subgroup_sum_f32(red_in, sg);\n    if (t % step == 0u) {{ red[lid / step] = x; }}\n    workgroupBarrier();\n\
                 \x20   if (t == 0u) {{ var y = red[lid / step]; for (var j = 1u; j < {lanes}u / step; j++) {{ y = y + red[lid / step + j]; }} tot[r] = y; }}\n    workgroupBarrier();\n"
            );
            ("tot[r]", "tot[r + 1u]".to_string())
        } else {
            tree += "    red[lid] = red_in;\n    workgroupBarrier();\n";
            let mut stride = lanes / 2;
            while stride > 0 {
                tree += &format!("    if (t < {stride}u) {{ red[lid] = red[lid] + red[lid + {stride}u]; }}\n    workgroupBarrier();\n");
                stride /= 2;
            }
            ("red[lid]", format!("red[lid + {lanes}u]"))
        };
        let store = if self.data_type == DataType::Float16 {
            format!(
                "if (r % 2u == 0u) {{\n        var word = f32_to_f16(finish({total}, c.y, c.z));\n\
                 \x20       if (oi + 1u < {count}u) {{ let c1 = coords_out(oi + 1u); word = word | (f32_to_f16(finish({next}, c1.y, c1.z)) << 16u); }}\n\
                 \x20       out[oi >> 1u] = word;\n    }}"
            )
        } else {
            format!("out[oi] = finish({total}, c.y, c.z);")
        };
        // A subgroup holds at least 4 invocations: a slot per min(lanes, 4) of them.
        let (decl, sg_arg) = if sub {
            let len = threads / lanes.min(4);
            (format!("var<workgroup> red: array<f32, {len}>;\nvar<workgroup> tot: array<f32, {per_group}>;"), ", @builtin(subgroup_size) sg: u32")
        } else {
            (format!("var<workgroup> red: array<f32, {threads}>;"), "")
        };
        src += &format!(
            r#"fn coords_out(i: u32) -> vec3<u32> {{ let r = i / {n}u; return vec3<u32>(r / {m}u, r % {m}u, i % {n}u); }}
{decl}
@compute @workgroup_size({threads})
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>{sg_arg}) {{
    let g = wid.x + wid.y * nwg.x;
    if (g >= {groups}u) {{ return; }}
    let r = lid / {lanes}u;
    let t = lid % {lanes}u;
    let oi = g * {per_group}u + r;
    let c = coords_out(oi);
    var s = vec4<f32>(0.0);
    if (oi < {count}u) {{
        let ae = a_base(c.x) + c.y * {a_stride_m}u;
        let be = b_base(c.x) + c.z * {b_stride_n}u;
        for (var q = t * 4u; q < {k}u; q += {step}u) {{ s = fma({qa}, {qb}, s); }}
    }}
    let red_in = s.x + s.y + s.z + s.w;
{tree}    if (t == 0u && oi < {count}u) {{
    {store}
    }}
}}
"#,
            step = 4 * lanes,
        );
        Ok(Launch {
            source: src,
            reads: self.reads(),
            writes: vec![BufRef::Output(0)],
            invocations: groups * threads as u64,
            workgroup_size: threads,
        })
    }
}
