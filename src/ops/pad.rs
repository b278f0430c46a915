//! pad: grows each dimension by `beginningPadding` and `endingPadding` elements filled with a
//! constant, the nearest edge element, or the mirror image of the input (without repeating the
//! edge).
//!
//! Output coordinate `c` along a dimension of input size `n` maps to `x = c - begin`; inside
//! `0 .. n` it copies input `x`. Outside, "edge" clamps `x` to `0 ..= n-1`, "reflection" takes
//! `-x` below and `2(n-1) - x` above (validation keeps both paddings below `n`, so one reflection
//! suffices), and "constant" writes the value cast to the input's type. Copies are raw bits.

use crate::error::{Error, Result};
use crate::operand::{strides, MAX_RANK};
use crate::operand::{Number, OperandDescriptor};
use crate::ops::limits::{self, OpLimits, ALL_TYPES};
use crate::ops::movement::{MoveKernel, Source};
use crate::ops::reference::{coords, linear, HostTensor};
use crate::ops::wgsl::{coords_fn, wide_literal, BufRef, LowerRequest, Lowering};
use crate::ops::{not_this_family, MethodOptions, Op, OpFamily};

/// `MLPaddingMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum PaddingMode {
    #[default]
    Constant,
    Edge,
    Reflection,
}

impl PaddingMode {
    pub fn from_name(name: &str) -> Result<PaddingMode> {
        match name {
            "constant" => Ok(PaddingMode::Constant),
            "edge" => Ok(PaddingMode::Edge),
            "reflection" => Ok(PaddingMode::Reflection),
            other => Err(Error::Type(format!("'{other}' is not a valid MLPaddingMode"))),
        }
    }
}

/// `pad`'s paddings and `MLPadOptions`.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct PadOptions {
    pub beginning_padding: Vec<u32>,
    pub ending_padding: Vec<u32>,
    pub mode: PaddingMode,
    pub value: Number,
}

pub fn limits() -> Vec<OpLimits> {
    vec![OpLimits {
        name: "pad",
        operands: vec![
            limits::tensor("input", ALL_TYPES, 0, MAX_RANK as u32),
            limits::tensor("output", ALL_TYPES, 0, MAX_RANK as u32),
        ],
    }]
}

pub fn validate(o: &PadOptions, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
    let input = inputs[0];
    limits::check(&limits::of("pad")?.operands[0], input)?;
    let rank = input.rank();
    if o.beginning_padding.len() != rank || o.ending_padding.len() != rank {
        return Err(Error::Type(format!(
            "beginningPadding {:?} and endingPadding {:?} must both have the input's rank {rank}",
            o.beginning_padding, o.ending_padding
        )));
    }
    let mut shape = Vec::with_capacity(rank);
    for (k, &n) in input.shape.iter().enumerate() {
        let (begin, end) = (o.beginning_padding[k], o.ending_padding[k]);
        if o.mode == PaddingMode::Reflection && (begin >= n || end >= n) {
            return Err(Error::Type(format!(
                "reflection padding of dimension {k} ({begin} and {end}) must be smaller than its size {n}"
            )));
        }
        let size = begin as u64 + n as u64 + end as u64;
        if size > i32::MAX as u64 {
            return Err(Error::Type(format!("the padded dimension {k} of size {size} is not a valid dimension")));
        }
        shape.push(size as u32);
    }
    Ok(vec![OperandDescriptor::new(input.data_type, shape)])
}

/// The input position output position `c` of a dimension reads, or `None` for the constant.
fn source(mode: PaddingMode, c: i64, begin: u32, n: u32) -> Option<usize> {
    let (x, last) = (c - begin as i64, n as i64 - 1);
    let x = match mode {
        _ if (0..=last).contains(&x) => x,
        PaddingMode::Constant => return None,
        PaddingMode::Edge => x.clamp(0, last),
        PaddingMode::Reflection if x < 0 => -x,
        PaddingMode::Reflection => 2 * last - x,
    };
    Some(x as usize)
}

pub fn lower(o: &PadOptions, request: &LowerRequest) -> Result<Lowering> {
    let (input, out) = (request.inputs[0], request.outputs[0]);
    let s = strides(&input.shape);
    let mut body = "    let c = coords_out(i);\n    var offset = 0u;\n".to_string();
    for (k, &n) in input.shape.iter().enumerate() {
        let begin = o.beginning_padding[k];
        let last = n - 1;
        // In i32: padded dimensions are valid dimensions (below 2^31).
        body += &format!("    let x{k} = i32(c[{k}]) - {begin};\n");
        let x = match o.mode {
            PaddingMode::Constant => {
                body += &format!("    if (x{k} < 0 || x{k} > {last}) {{ return {}; }}\n", constant_bits(o.value, input));
                format!("u32(x{k})")
            }
            PaddingMode::Edge => format!("u32(clamp(x{k}, 0, {last}))"),
            PaddingMode::Reflection => {
                format!("u32(select(select(x{k}, {} - x{k}, x{k} > {last}), -x{k}, x{k} < 0))", 2 * last as i64)
            }
        };
        body += &format!("    offset += {x} * {}u;\n", s[k]);
    }
    body += "    return bits_input(offset);";
    let launch = MoveKernel {
        sources: vec![Source { name: "input", buffer: BufRef::Input(0), descriptor: input }],
        output: BufRef::Output(0),
        output_descriptor: out,
        helpers: coords_fn("out", &out.shape),
        body,
    }
    .build()?;
    Ok(Lowering::single(launch))
}

/// WGSL of the raw bits of `value` cast to the input's type (the spec's casting of
/// `options.value`; a bigint stays exact for int64/uint64).
fn constant_bits(value: Number, input: &OperandDescriptor) -> String {
    if input.data_type.is_wide() {
        return wide_literal(value.to_integer(input.data_type));
    }
    let mut bytes = value.cast_bytes(input.data_type);
    bytes.resize(4, 0);
    format!("{}u", u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
}

pub fn reference(o: &PadOptions, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
    let input = &inputs[0];
    let out = &outputs[0];
    let value = o.value.cast_f64(input.descriptor.data_type);
    let data = (0..out.element_count() as usize)
        .map(|i| {
            let c = coords(i, &out.shape);
            let mut x = Vec::with_capacity(c.len());
            for (k, &n) in input.shape().iter().enumerate() {
                match source(o.mode, c[k] as i64, o.beginning_padding[k], n) {
                    Some(p) => x.push(p),
                    None => return value,
                }
            }
            input.data[linear(&x, input.shape())]
        })
        .collect();
    Ok(vec![HostTensor::new(out.clone(), data)?])
}

/// The registry's entry for this file's operators (see [`OpFamily`]).
pub struct Family;

impl OpFamily for Family {
    fn limits(&self) -> Vec<OpLimits> {
        limits()
    }

    fn from_options(&self, name: &str, p: &dyn MethodOptions) -> Result<Op> {
        Ok(match name {
            "pad" => Op::Pad(PadOptions {
                beginning_padding: p.u32s("beginningPadding")?,
                ending_padding: p.u32s("endingPadding")?,
                mode: PaddingMode::from_name(&p.string("mode")?)?,
                value: p.number("value")?,
            }),
            other => return Err(crate::ops::unknown_method(other)),
        })
    }

    fn name(&self, op: &Op) -> &'static str {
        match op {
            Op::Pad(_) => "pad",
            _ => "",
        }
    }

    fn validate(&self, op: &Op, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
        match op {
            Op::Pad(o) => validate(o, inputs),
            _ => Err(not_this_family(op)),
        }
    }

    fn lower(&self, op: &Op, request: &LowerRequest) -> Result<Lowering> {
        match op {
            Op::Pad(o) => lower(o, request),
            _ => Err(not_this_family(op)),
        }
    }

    fn reference(&self, op: &Op, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
        match op {
            Op::Pad(o) => reference(o, inputs, outputs),
            _ => Err(not_this_family(op)),
        }
    }

    fn moves_input(&self, op: &Op, _index: usize) -> bool {
        match op {
            Op::Pad(_) => true,
            _ => false,
        }
    }
}
