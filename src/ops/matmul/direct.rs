//! The direct kernel for the remaining small shapes: each output word summed by 8 invocations.

use super::*;

impl Product<'_> {
    /// One workgroup per 32 output words, the 8 groups of 32 invocations each summing every
    /// 8th k (so M = 1 still spreads over many invocations, and neighbouring invocations read
    /// neighbouring columns of B), then adding the 8 partial sums. Each word is written whole.
    pub(super) fn direct(&self) -> Result<Launch> {
        let (m, n, k) = (self.m, self.n, self.k);
        let [a_stride_m, a_stride_k] = self.a_strides;
        let [b_stride_k, b_stride_n] = self.b_strides;
        let count = self.out.element_count();
        let per_word = elements_per_word(self.data_type);
        let words = count.div_ceil(per_word);
        let groups = words.div_ceil(DIRECT_WORDS);
        let store = if per_word == 1 {
            "        let c0 = coords_out(t);\n        out[t] = finish(total.x, c0.y, c0.z);".to_string()
        } else {
            format!(
                "        let c0 = coords_out(t * 2u);\n        var word = f32_to_f16(finish(total.x, c0.y, c0.z));\n\
                 \x20       if (t * 2u + 1u < {count}u) {{\n            let c1 = coords_out(t * 2u + 1u);\n            word = word | (f32_to_f16(finish(total.y, c1.y, c1.z)) << 16u);\n        }}\n\
                 \x20       out[t] = word;"
            )
        };
        let mut src = self.prologue([(false, false), (false, false)], self.data_type, false)?;
        src += &format!(
            r#"fn coords_out(i: u32) -> vec3<u32> {{ let r = i / {n}u; return vec3<u32>(r / {m}u, r % {m}u, i % {n}u); }}
var<workgroup> partial: array<vec2<f32>, 256>;
@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
    let g = wid.x + wid.y * nwg.x;
    if (g >= {groups}u) {{ return; }}
    let w = lid % {DIRECT_WORDS}u;
    let slice = lid / {DIRECT_WORDS}u;
    let t = g * {DIRECT_WORDS}u + w;
    var acc = vec2<f32>(0.0);
    for (var e = 0u; e < {per_word}u; e++) {{
        let i = t * {per_word}u + e;
        if (i < {count}u) {{
            let c = coords_out(i);
            let ab = a_base(c.x) + c.y * {a_stride_m}u;
            let bb = b_base(c.x) + c.z * {b_stride_n}u;
            var s = 0.0;
            for (var kk = slice; kk < {k}u; kk += {DIRECT_SLICES}u) {{ s = s + load_a(ab + kk * {a_stride_k}u) * load_b(bb + kk * {b_stride_k}u); }}
            acc[e] = s;
        }}
    }}
    partial[lid] = acc;
    workgroupBarrier();
    if (slice == 0u && t < {words}u) {{
        var total = partial[w];
        for (var j = 1u; j < {DIRECT_SLICES}u; j++) {{ total = total + partial[j * {DIRECT_WORDS}u + w]; }}
{store}
    }}
}}
"#
        );
        Ok(Launch {
            source: src,
            reads: self.reads(),
            writes: vec![BufRef::Output(0)],
            invocations: groups * 256,
            workgroup_size: 256,
        })
    }

}
