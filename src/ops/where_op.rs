//! where: element-wise select by a uint8 condition, with broadcasting of all three inputs.

use crate::error::{Error, Result};
use crate::operand::broadcast_shapes;
use crate::operand::{DataType, OperandDescriptor};
use crate::ops::limits::{self, OpLimits, ALL_TYPES};
use crate::ops::reference::{map_broadcast, HostTensor};
use crate::ops::wgsl::{broadcast_offset_fn, coords_fn, ElementwiseKernel, LowerRequest, Lowering};
use crate::ops::{not_this_family, MethodOptions, Op, OpFamily};
use std::ops::RangeInclusive;

pub fn limits() -> Vec<OpLimits> {
    vec![OpLimits {
        name: "where",
        operands: vec![
            limits::tensor("condition", &[DataType::Uint8], 0, 8),
            limits::tensor("trueValue", ALL_TYPES, 0, 8),
            limits::tensor("falseValue", ALL_TYPES, 0, 8),
            limits::tensor("output", ALL_TYPES, 0, 8),
        ],
    }]
}

pub fn validate(inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
    let l = limits::of("where")?;
    let (condition, true_value, false_value) = (inputs[0], inputs[1], inputs[2]);
    limits::check(&l.operands[0], condition)?;
    limits::check(&l.operands[1], true_value)?;
    limits::check(&l.operands[2], false_value)?;
    if false_value.data_type != true_value.data_type {
        return Err(Error::Type(format!(
            "falseValue is {} but trueValue is {}: the data types must match",
            false_value.data_type, true_value.data_type
        )));
    }
    let shape = broadcast_shapes(&true_value.shape, &false_value.shape).ok_or_else(|| {
        Error::Type(format!(
            "trueValue shape {:?} and falseValue shape {:?} cannot be broadcast together",
            true_value.shape, false_value.shape
        ))
    })?;
    let shape = broadcast_shapes(&condition.shape, &shape).ok_or_else(|| {
        Error::Type(format!(
            "condition shape {:?} cannot be broadcast with the values' shape {shape:?}",
            condition.shape
        ))
    })?;
    Ok(vec![OperandDescriptor::new(true_value.data_type, shape)])
}

pub fn lower(request: &LowerRequest) -> Result<Lowering> {
    let out = request.outputs[0];
    let rank = out.rank();
    let names = ["condition", "true_value", "false_value"];
    let mut helpers = coords_fn("out", &out.shape);
    for (name, input) in names.iter().zip(&request.inputs) {
        helpers += &broadcast_offset_fn(name, &input.shape, rank);
    }
    let body = "    let c = coords_out(i);\n    if (load_condition(offset_condition(c)) != 0u) {\n        return load_true_value(offset_true_value(c));\n    }\n    return load_false_value(offset_false_value(c));".to_string();
    let launch = ElementwiseKernel {
        inputs: names.iter().copied().zip(request.inputs.iter().copied()).collect(),
        output: out,
        helpers,
        body,
    }
    .build()?;
    Ok(Lowering::single(launch))
}

pub fn reference(inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
    map_broadcast(inputs, &outputs[0], |v| if v[0] != 0.0 { v[1] } else { v[2] })
}

/// The registry's entry for this file's operators (see [`OpFamily`]).
pub struct Family;

impl OpFamily for Family {
    fn limits(&self) -> Vec<OpLimits> {
        limits()
    }

    fn from_options(&self, name: &str, _: &dyn MethodOptions) -> Result<Op> {
        Ok(match name {
            "where" => Op::Where,
            other => return Err(crate::ops::unknown_method(other)),
        })
    }

    fn name(&self, op: &Op) -> &'static str {
        match op {
            Op::Where => "where",
            _ => "",
        }
    }

    fn input_count(&self, op: &Op) -> RangeInclusive<usize> {
        match op {
            Op::Where => 3..=3,
            _ => 1..=1,
        }
    }

    fn validate(&self, op: &Op, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
        match op {
            Op::Where => validate(inputs),
            _ => Err(not_this_family(op)),
        }
    }

    fn lower(&self, op: &Op, request: &LowerRequest) -> Result<Lowering> {
        match op {
            Op::Where => lower(request),
            _ => Err(not_this_family(op)),
        }
    }

    fn reference(&self, op: &Op, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
        match op {
            Op::Where => reference(inputs, outputs),
            _ => Err(not_this_family(op)),
        }
    }

    fn moves_input(&self, op: &Op, index: usize) -> bool {
        match op {
            Op::Where => index == 1 || index == 2,
            _ => false,
        }
    }
}
