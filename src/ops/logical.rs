//! Element-wise logical operations (spec: "create an element-wise logical operation"): the
//! comparisons, logicalNot/And/Or/Xor and isNaN/isInfinite. Outputs are uint8 0 or 1.

use crate::error::{Error, Result};
use crate::operand::{DataType, OperandDescriptor};
use crate::ops::elementwise_binary::{broadcast_pair_kernel, validate_broadcast_pair, wide_less};
use crate::ops::limits::{self, OpLimits, ALL_TYPES, FLOATS};
use crate::ops::reference::{map_broadcast, map_broadcast_exact, HostTensor};
use crate::ops::wgsl::{value_type, ElementwiseKernel, LowerRequest, Lowering};
use crate::ops::{not_this_family, MethodOptions, Op, OpFamily};
use std::ops::RangeInclusive;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum LogicalOp {
    Equal,
    NotEqual,
    Greater,
    GreaterOrEqual,
    Lesser,
    LesserOrEqual,
    LogicalNot,
    LogicalAnd,
    LogicalOr,
    LogicalXor,
    IsNaN,
    IsInfinite,
}

const UINT8: &[DataType] = &[DataType::Uint8];

impl LogicalOp {
    pub const ALL: [LogicalOp; 12] = [
        LogicalOp::Equal,
        LogicalOp::NotEqual,
        LogicalOp::Greater,
        LogicalOp::GreaterOrEqual,
        LogicalOp::Lesser,
        LogicalOp::LesserOrEqual,
        LogicalOp::LogicalNot,
        LogicalOp::LogicalAnd,
        LogicalOp::LogicalOr,
        LogicalOp::LogicalXor,
        LogicalOp::IsNaN,
        LogicalOp::IsInfinite,
    ];

    pub fn name(self) -> &'static str {
        match self {
            LogicalOp::Equal => "equal",
            LogicalOp::NotEqual => "notEqual",
            LogicalOp::Greater => "greater",
            LogicalOp::GreaterOrEqual => "greaterOrEqual",
            LogicalOp::Lesser => "lesser",
            LogicalOp::LesserOrEqual => "lesserOrEqual",
            LogicalOp::LogicalNot => "logicalNot",
            LogicalOp::LogicalAnd => "logicalAnd",
            LogicalOp::LogicalOr => "logicalOr",
            LogicalOp::LogicalXor => "logicalXor",
            LogicalOp::IsNaN => "isNaN",
            LogicalOp::IsInfinite => "isInfinite",
        }
    }

    /// Operand inputs: `a`, and `b` for the binary operations.
    pub fn input_count(self) -> usize {
        match self {
            LogicalOp::LogicalNot | LogicalOp::IsNaN | LogicalOp::IsInfinite => 1,
            _ => 2,
        }
    }

    /// The allowed types of `a` (and `b`).
    fn data_types(self) -> &'static [DataType] {
        match self {
            LogicalOp::LogicalNot | LogicalOp::LogicalAnd | LogicalOp::LogicalOr | LogicalOp::LogicalXor => UINT8,
            LogicalOp::IsNaN | LogicalOp::IsInfinite => FLOATS,
            _ => ALL_TYPES,
        }
    }
}

pub fn limits() -> Vec<OpLimits> {
    LogicalOp::ALL
        .iter()
        .map(|&op| {
            let mut operands = vec![limits::tensor("a", op.data_types(), 0, 8)];
            if op.input_count() == 2 {
                operands.push(limits::tensor("b", op.data_types(), 0, 8));
            }
            operands.push(limits::tensor("output", UINT8, 0, 8));
            OpLimits { name: op.name(), operands }
        })
        .collect()
}

pub fn validate(op: LogicalOp, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
    limits::check(&limits::tensor("a", op.data_types(), 0, 8), inputs[0])?;
    let shape = if op.input_count() == 2 {
        limits::check(&limits::tensor("b", op.data_types(), 0, 8), inputs[1])?;
        validate_broadcast_pair(op.name(), inputs)?
    } else {
        inputs[0].shape.clone()
    };
    Ok(vec![OperandDescriptor::new(DataType::Uint8, shape)])
}

/// The comparisons of two-word values (`lt` from [`wide_less`]).
fn lower_wide(op: LogicalOp, request: &LowerRequest) -> Result<Lowering> {
    let e = match op {
        LogicalOp::Equal => "eq64(a, b)",
        LogicalOp::NotEqual => "!eq64(a, b)",
        LogicalOp::Greater => "lt(b, a)",
        LogicalOp::GreaterOrEqual => "!lt(a, b)",
        LogicalOp::Lesser => "lt(a, b)",
        LogicalOp::LesserOrEqual => "!lt(b, a)",
        _ => return Err(Error::NotSupported(format!("{} of 64-bit integers is not supported", op.name()))),
    };
    broadcast_pair_kernel(request, &format!("select(0u, 1u, {e})"), wide_less(request.inputs[0].data_type))
}

pub fn lower(op: LogicalOp, request: &LowerRequest) -> Result<Lowering> {
    if request.inputs[0].data_type.is_wide() {
        return lower_wide(op, request);
    }
    value_type(request.inputs[0].data_type)?;
    let e = match op {
        LogicalOp::Equal => "a == b",
        // Not `!=`: some backends lower it to an ordered comparison, false for NaN.
        LogicalOp::NotEqual => "!(a == b)",
        LogicalOp::Greater => "a > b",
        LogicalOp::GreaterOrEqual => "a >= b",
        LogicalOp::Lesser => "a < b",
        LogicalOp::LesserOrEqual => "a <= b",
        LogicalOp::LogicalNot => "x == 0u",
        LogicalOp::LogicalAnd => "a != 0u && b != 0u",
        LogicalOp::LogicalOr => "a != 0u || b != 0u",
        LogicalOp::LogicalXor => "(a != 0u) != (b != 0u)",
        // On the bits: shader compilers may assume no NaN or infinity in float arithmetic.
        LogicalOp::IsNaN => "(bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u",
        LogicalOp::IsInfinite => "(bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u",
    };
    let result = format!("select(0u, 1u, {e})");
    if op.input_count() == 2 {
        return broadcast_pair_kernel(request, &result, "");
    }
    let launch = ElementwiseKernel {
        inputs: vec![("input", request.inputs[0])],
        output: request.outputs[0],
        helpers: String::new(),
        body: format!("    let x = load_input(i);\n    return {result};"),
    }
    .build()?;
    Ok(Lowering::single(launch))
}

pub fn reference(op: LogicalOp, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
    if inputs.len() != op.input_count() {
        return Err(Error::Type(format!("{} takes {} inputs", op.name(), op.input_count())));
    }
    if inputs[0].descriptor.data_type.is_wide() {
        // Exact (two int64/uint64 beyond 2^53 may round to the same double).
        let f: fn(i128, i128) -> bool = match op {
            LogicalOp::Equal => |a, b| a == b,
            LogicalOp::NotEqual => |a, b| a != b,
            LogicalOp::Greater => |a, b| a > b,
            LogicalOp::GreaterOrEqual => |a, b| a >= b,
            LogicalOp::Lesser => |a, b| a < b,
            LogicalOp::LesserOrEqual => |a, b| a <= b,
            _ => return Err(Error::NotSupported(format!("{} of 64-bit integers is not supported", op.name()))),
        };
        return map_broadcast_exact(inputs, &outputs[0], |v| f(v[0], v[1]) as i128);
    }
    map_broadcast(inputs, &outputs[0], |v| {
        let a = v[0];
        let b = v.get(1).copied().unwrap_or(0.0);
        let r = match op {
            LogicalOp::Equal => a == b,
            LogicalOp::NotEqual => a != b,
            LogicalOp::Greater => a > b,
            LogicalOp::GreaterOrEqual => a >= b,
            LogicalOp::Lesser => a < b,
            LogicalOp::LesserOrEqual => a <= b,
            LogicalOp::LogicalNot => a == 0.0,
            LogicalOp::LogicalAnd => a != 0.0 && b != 0.0,
            LogicalOp::LogicalOr => a != 0.0 || b != 0.0,
            LogicalOp::LogicalXor => (a != 0.0) != (b != 0.0),
            LogicalOp::IsNaN => a.is_nan(),
            LogicalOp::IsInfinite => a.is_infinite(),
        };
        r as u8 as f64
    })
}

/// The registry's entry for this file's operators (see [`OpFamily`]).
pub struct Family;

impl OpFamily for Family {
    fn limits(&self) -> Vec<OpLimits> {
        limits()
    }

    fn from_options(&self, name: &str, _: &dyn MethodOptions) -> Result<Op> {
        Ok(match name {
            "equal" => Op::Logical(LogicalOp::Equal),
            "notEqual" => Op::Logical(LogicalOp::NotEqual),
            "greater" => Op::Logical(LogicalOp::Greater),
            "greaterOrEqual" => Op::Logical(LogicalOp::GreaterOrEqual),
            "lesser" => Op::Logical(LogicalOp::Lesser),
            "lesserOrEqual" => Op::Logical(LogicalOp::LesserOrEqual),
            "logicalNot" => Op::Logical(LogicalOp::LogicalNot),
            "logicalAnd" => Op::Logical(LogicalOp::LogicalAnd),
            "logicalOr" => Op::Logical(LogicalOp::LogicalOr),
            "logicalXor" => Op::Logical(LogicalOp::LogicalXor),
            "isNaN" => Op::Logical(LogicalOp::IsNaN),
            "isInfinite" => Op::Logical(LogicalOp::IsInfinite),
            other => return Err(crate::ops::unknown_method(other)),
        })
    }

    fn name(&self, op: &Op) -> &'static str {
        match op {
            Op::Logical(op) => op.name(),
            _ => "",
        }
    }

    fn input_count(&self, op: &Op) -> RangeInclusive<usize> {
        match op {
            Op::Logical(o) => o.input_count()..=o.input_count(),
            _ => 1..=1,
        }
    }

    fn validate(&self, op: &Op, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
        match op {
            Op::Logical(o) => validate(*o, inputs),
            _ => Err(not_this_family(op)),
        }
    }

    fn lower(&self, op: &Op, request: &LowerRequest) -> Result<Lowering> {
        match op {
            Op::Logical(o) => lower(*o, request),
            _ => Err(not_this_family(op)),
        }
    }

    fn reference(&self, op: &Op, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
        match op {
            Op::Logical(o) => reference(*o, inputs, outputs),
            _ => Err(not_this_family(op)),
        }
    }
}
