//! Element-wise comparisons (and, in a later step, the logical operators); outputs are uint8.

use crate::error::{Error, Result};
use crate::graph::OperandDescriptor;
use crate::ops::limits::OpLimits;
use crate::ops::reference::HostTensor;
use crate::ops::wgsl::{LowerContext, Lowering};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareOp {
    Equal,
    NotEqual,
    Greater,
    GreaterOrEqual,
    Lesser,
    LesserOrEqual,
}

impl CompareOp {
    pub fn name(self) -> &'static str {
        match self {
            CompareOp::Equal => "equal",
            CompareOp::NotEqual => "notEqual",
            CompareOp::Greater => "greater",
            CompareOp::GreaterOrEqual => "greaterOrEqual",
            CompareOp::Lesser => "lesser",
            CompareOp::LesserOrEqual => "lesserOrEqual",
        }
    }
}

pub fn limits() -> Vec<OpLimits> { Vec::new() }
pub fn validate(_op: CompareOp, _inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> { Err(Error::NotSupported("logical is not implemented yet".into())) }
pub fn lower(_op: CompareOp, _cx: &LowerContext) -> Result<Lowering> { Err(Error::NotSupported("logical is not implemented yet".into())) }
pub fn reference(_op: CompareOp, _inputs: &[HostTensor], _outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> { Err(Error::NotSupported("logical is not implemented yet".into())) }
