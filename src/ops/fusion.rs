//! Fused kernels: a chain of element-wise operators (unary, activations, binary with
//! broadcasting, cast) computed as one expression per element, alone or in the store of a matmul,
//! gemm, conv2d or convTranspose2d kernel (its epilogue), or after a reduction whose rows it reads
//! (RMSNorm). Which operators form a chain is decided by `plan::fusion`; this file lowers a chain.
//! Each fused operator contributes the WGSL expression of its own lowering (`expression()` of its
//! family) as a function; the kernel calls them in order on values loaded once per element.
//! Intermediates are rounded to their type's storage (float16, int8, uint8 wrap) exactly as a
//! store and load would, so results keep their unfused rounding.

use crate::error::{Error, Result};
use crate::operand::{DataType, OperandDescriptor};
use crate::ops::wgsl::{broadcast_offset_fn, coords_fn, value_type, ElementwiseKernel, LowerRequest, Lowering};
use crate::ops::{activation, cast, conv2d, elementwise_binary, elementwise_unary, matmul, reduce, Op};

/// Binding names of the chain's own inputs (after the producer's, in an epilogue).
pub(crate) const NAMES: [&str; 8] = ["e0", "e1", "e2", "e3", "e4", "e5", "e6", "e7"];

/// A fused group: an optional producer (matmul, gemm, conv2d, convTranspose2d, a reduction) whose
/// inputs are the group's first inputs, then element-wise nodes in execution order, the last one
/// the output (a matmul or gemm reading a gathered B may have none).
pub struct Fused<'a> {
    pub(crate) producer: Option<(&'a Op, OperandDescriptor)>,
    /// The group's inputs read by the chain: after the producer's.
    pub(crate) chain_inputs: Vec<OperandDescriptor>,
    pub(crate) nodes: Vec<Node<'a>>,
    /// A matmul or gemm producer's B gathered from a stack: the group's B input is the stack and
    /// its last input the gather's indices.
    pub(crate) gathered_b: Option<GatheredB>,
}

/// B of a matmul or gemm producer as one entry of a stack (see [`matmul::Gathered`]).
pub(crate) struct GatheredB {
    /// B as the producer reads it (the gathered entry, reshaped).
    pub(crate) b: OperandDescriptor,
    /// The stack's first dimension.
    pub(crate) rows: u32,
}

/// An element-wise operator of the chain.
pub(crate) struct Node<'a> {
    pub(crate) op: &'a Op,
    pub(crate) args: Vec<Arg>,
    pub(crate) input_type: DataType,
    pub(crate) output: OperandDescriptor,
}

/// Where a node reads an argument.
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Arg {
    /// The chain's input k (binding `e<k>`).
    Input(usize),
    Node(usize),
    Producer,
    /// A reduction's input, read by the chain too: of the output's shape, loaded at its index.
    ProducerInput,
}

/// The epilogue a producer's kernel applies at its store: bindings `e0..` after its own, and
/// WGSL defining `fn epilogue_at(v: f32, i: u32) -> T` applying the chain to value `v` of output
/// element `i` (`T` the output's value type), and for a matmul or gemm
/// `fn epilogue_mn(v: f32, m: u32, n: u32) -> f32` at row `m`, column `n`. A reduction's `v` is
/// of its value type.
pub struct Epilogue<'a> {
    pub inputs: Vec<&'a OperandDescriptor>,
    pub wgsl: String,
}

impl Epilogue<'_> {
    pub fn names(&self) -> impl Iterator<Item = (&'static str, &OperandDescriptor)> {
        NAMES.iter().copied().zip(self.inputs.iter().copied())
    }
}

/// Helper WGSL functions, each once; two different definitions of one name fail.
#[derive(Default)]
struct Helpers {
    items: Vec<(String, String)>,
}

impl Helpers {
    /// Adds the top-level functions of `source` (comments before a function belong to it).
    fn add(&mut self, source: &str) -> Result<()> {
        let mut item = String::new();
        for line in source.split_inclusive('\n') {
            item += line;
            let complete = line.starts_with('}') || (line.starts_with("fn ") && line.trim_end().ends_with('}'));
            if complete {
                self.push(std::mem::take(&mut item))?;
            }
        }
        if !item.trim().is_empty() {
            self.push(item)?;
        }
        Ok(())
    }

    fn push(&mut self, item: String) -> Result<()> {
        let name = item
            .lines()
            .find_map(|l| l.strip_prefix("fn "))
            .and_then(|l| l.split('(').next())
            .unwrap_or("")
            .to_string();
        match self.items.iter().find(|(n, _)| *n == name) {
            Some((_, existing)) if *existing == item => Ok(()),
            Some(_) => Err(Error::NotSupported(format!("two definitions of the WGSL helper {name}"))),
            None => {
                self.items.push((name, item));
                Ok(())
            }
        }
    }

    fn text(&self) -> String {
        self.items.iter().map(|(_, s)| s.as_str()).collect()
    }
}

/// `v` of value type of `data_type` as the next operator would load it after a store.
fn stored(data_type: DataType, v: &str) -> String {
    match data_type {
        DataType::Float16 => format!("f16_to_f32(f32_to_f16({v}))"),
        DataType::Int8 => format!("extractBits({v}, 0u, 8u)"),
        DataType::Uint8 => format!("({v} & 0xffu)"),
        _ => v.to_string(),
    }
}

impl Fused<'_> {
    /// The helpers and one `fused_<j>` function per node.
    pub(crate) fn functions(&self) -> Result<String> {
        let mut helpers = Helpers::default();
        let mut fns = String::new();
        for (j, node) in self.nodes.iter().enumerate() {
            let vt = value_type(node.input_type)?;
            let out_vt = value_type(node.output.data_type)?;
            let (e, h, binary) = match node.op {
                Op::Unary(op) => {
                    let (e, h) = elementwise_unary::expression(*op);
                    (e, h, false)
                }
                Op::Activation(op) => {
                    let (e, h) = activation::expression(op, node.input_type)?;
                    (e, h, *op == activation::Activation::Prelu)
                }
                Op::Binary(op) => {
                    let (e, h) = elementwise_binary::expression(*op, vt);
                    (e, h.to_string(), true)
                }
                Op::Cast { .. } => {
                    let (e, h) = cast::expression(node.input_type, node.output.data_type)?;
                    (e.to_string(), h.to_string(), false)
                }
                _ => return Err(Error::NotSupported(format!("{} is not fused", node.op.name()))),
            };
            helpers.add(&h)?;
            let params = if binary { format!("a: {vt}, b: {vt}") } else { format!("x: {vt}") };
            fns += &format!("fn fused_{j}({params}) -> {out_vt} {{ return {e}; }}\n");
        }
        Ok(helpers.text() + &fns)
    }

    /// Offset functions of the chain's inputs, `fn epilogue(v, fc, fi) -> T` computing the nodes
    /// at output coordinates `fc`, linear index `fi` (`v` the producer's value, of its value
    /// type, unused without one), and `fn epilogue_at(v, i: u32) -> T` at linear index `i`.
    fn chain(&self, out: &OperandDescriptor) -> Result<String> {
        let rank = out.rank().max(1);
        let mut s = self.functions()? + &coords_fn("fused", &out.shape);
        let mut body = String::new();
        let mut coords = false;
        for (k, d) in self.chain_inputs.iter().enumerate() {
            // Inputs of the output's shape load at the linear index: no coordinates needed.
            if d.shape == out.shape {
                body += &format!("    let {0} = load_{0}(fi);\n", NAMES[k]);
            } else {
                s += &broadcast_offset_fn(NAMES[k], &d.shape, out.rank());
                body += &format!("    let {0} = load_{0}(offset_{0}(fc));\n", NAMES[k]);
                coords = true;
            }
        }
        let mut producer_type = "f32";
        if let Some((_, produced)) = &self.producer {
            producer_type = value_type(produced.data_type)?;
            body += &format!("    let p = {};\n", stored(produced.data_type, "v"));
        }
        if self.nodes.iter().any(|n| n.args.contains(&Arg::ProducerInput)) {
            body += "    let px = load_input(fi);\n";
        }
        let last = self.nodes.len() - 1;
        for (j, node) in self.nodes.iter().enumerate() {
            let args: Vec<String> = node
                .args
                .iter()
                .map(|a| match a {
                    Arg::Input(k) => NAMES[*k].to_string(),
                    Arg::Node(x) => format!("v{x}"),
                    Arg::Producer => "p".to_string(),
                    Arg::ProducerInput => "px".to_string(),
                })
                .collect();
            let call = format!("fused_{j}({})", args.join(", "));
            let value = if j == last { call } else { stored(node.output.data_type, &call) };
            body += &format!("    let v{j} = {value};\n");
        }
        let out_vt = value_type(out.data_type)?;
        s += &format!(
            "fn epilogue(v: {producer_type}, fc: array<u32, {rank}>, fi: u32) -> {out_vt} {{\n{body}    return v{last};\n}}\n"
        );
        let at = if coords { "coords_fused(i)".to_string() } else { format!("array<u32, {rank}>()") };
        s += &format!("fn epilogue_at(v: {producer_type}, i: u32) -> {out_vt} {{ return epilogue(v, {at}, i); }}\n");
        Ok(s)
    }

    pub fn lower(&self, request: &LowerRequest) -> Result<Lowering> {
        let out = request.outputs[0];
        let gathered = self.gathered_b.is_some() as usize;
        let own = request.inputs.len() - self.chain_inputs.len() - gathered;
        let Some(op) = self.producer.as_ref().map(|p| p.0) else {
            let launch = ElementwiseKernel {
                inputs: NAMES.iter().copied().zip(request.inputs.iter().copied()).collect(),
                output: out,
                helpers: self.chain(out)?,
                body: "    return epilogue_at(0.0, i);".into(),
            }
            .build()?;
            return Ok(Lowering::single(launch));
        };
        let mut producer_inputs = request.inputs[..own].to_vec();
        let gathered = match (&self.gathered_b, request.inputs.last()) {
            (Some(g), Some(&indices)) if own >= 2 => {
                producer_inputs[1] = &g.b;
                Some(matmul::Gathered { rows: g.rows, indices })
            }
            _ => None,
        };
        let producer_request =
            LowerRequest { inputs: producer_inputs, outputs: vec![out], shader_f16: request.shader_f16, device: request.device };
        if self.nodes.is_empty() {
            return match op {
                Op::Matmul => matmul::lower_matmul(&producer_request, None, gathered),
                Op::Gemm(o) => matmul::lower_gemm(o, &producer_request, None, gathered),
                _ => Err(Error::NotSupported(format!("{} alone is not a fused kernel", op.name()))),
            };
        }
        let mut wgsl = self.chain(out)?;
        if matches!(op, Op::Matmul | Op::Gemm(_)) {
            // The matmul kernels store by row and column. Chain inputs are the same for every
            // batch, so one of the output's shape has a single batch: its index is m N + n.
            let rank = out.rank();
            wgsl += &format!(
                "fn epilogue_mn(v: f32, m: u32, n: u32) -> f32 {{ var fc: array<u32, {rank}>; fc[{}] = m; fc[{}] = n; return epilogue(v, fc, m * {}u + n); }}\n",
                rank - 2,
                rank - 1,
                out.shape[rank - 1]
            );
        }
        let epilogue = Epilogue { inputs: request.inputs[own..own + self.chain_inputs.len()].to_vec(), wgsl };
        match op {
            Op::Matmul => matmul::lower_matmul(&producer_request, Some(&epilogue), gathered),
            Op::Gemm(o) => matmul::lower_gemm(o, &producer_request, Some(&epilogue), gathered),
            Op::Conv2d(o) => conv2d::lower_conv2d(o, &producer_request, Some(&epilogue)),
            Op::ConvTranspose2d(o) => conv2d::lower_conv_transpose2d(o, &producer_request, Some(&epilogue)),
            Op::Reduce(kind, o) => reduce::lower_fused(*kind, o, &producer_request, &epilogue),
            _ => Err(Error::NotSupported(format!("{} has no epilogue", op.name()))),
        }
    }
}
