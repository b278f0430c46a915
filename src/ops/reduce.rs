//! Reductions: reduceSum, reduceMean, reduceMax and the other reduce* operators.

use crate::error::{Error, Result};
use crate::graph::OperandDescriptor;
use crate::ops::limits::OpLimits;
use crate::ops::reference::HostTensor;
use crate::ops::wgsl::{LowerContext, Lowering};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReduceOp {
    L1,
    L2,
    LogSum,
    LogSumExp,
    Max,
    Mean,
    Min,
    Product,
    Sum,
    SumSquare,
}

impl ReduceOp {
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::L1 => "reduceL1",
            ReduceOp::L2 => "reduceL2",
            ReduceOp::LogSum => "reduceLogSum",
            ReduceOp::LogSumExp => "reduceLogSumExp",
            ReduceOp::Max => "reduceMax",
            ReduceOp::Mean => "reduceMean",
            ReduceOp::Min => "reduceMin",
            ReduceOp::Product => "reduceProduct",
            ReduceOp::Sum => "reduceSum",
            ReduceOp::SumSquare => "reduceSumSquare",
        }
    }
}

/// `MLReduceOptions`: `axes` absent means every axis.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReduceOptions {
    pub axes: Option<Vec<u32>>,
    pub keep_dimensions: bool,
}

pub fn limits() -> Vec<OpLimits> { Vec::new() }
pub fn validate(_op: ReduceOp, _o: &ReduceOptions, _inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> { Err(Error::NotSupported("reduce is not implemented yet".into())) }
pub fn lower(_op: ReduceOp, _o: &ReduceOptions, _cx: &LowerContext) -> Result<Lowering> { Err(Error::NotSupported("reduce is not implemented yet".into())) }
pub fn reference(_op: ReduceOp, _o: &ReduceOptions, _inputs: &[HostTensor], _outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> { Err(Error::NotSupported("reduce is not implemented yet".into())) }
