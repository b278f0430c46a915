//! concat and split.

use crate::error::{Error, Result};
use crate::graph::OperandDescriptor;
use crate::ops::limits::OpLimits;
use crate::ops::reference::HostTensor;
use crate::ops::wgsl::{LowerContext, Lowering};

/// `split`'s `splits`: a number of equal parts, or the sizes of the parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Splits {
    Count(u32),
    Sizes(Vec<u32>),
}

pub fn limits() -> Vec<OpLimits> { Vec::new() }
pub fn validate_concat(_axis: u32, _inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> { Err(Error::NotSupported("concat is not implemented yet".into())) }
pub fn validate_split(_splits: &Splits, _axis: u32, _inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> { Err(Error::NotSupported("concat is not implemented yet".into())) }
pub fn lower_concat(_axis: u32, _cx: &LowerContext) -> Result<Lowering> { Err(Error::NotSupported("concat is not implemented yet".into())) }
pub fn lower_split(_axis: u32, _cx: &LowerContext) -> Result<Lowering> { Err(Error::NotSupported("concat is not implemented yet".into())) }
pub fn reference_concat(_axis: u32, _inputs: &[HostTensor], _outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> { Err(Error::NotSupported("concat is not implemented yet".into())) }
pub fn reference_split(_axis: u32, _inputs: &[HostTensor], _outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> { Err(Error::NotSupported("concat is not implemented yet".into())) }
