//! gather.

use crate::error::{Error, Result};
use crate::graph::OperandDescriptor;
use crate::ops::limits::OpLimits;
use crate::ops::reference::HostTensor;
use crate::ops::wgsl::{LowerContext, Lowering};

pub fn limits() -> Vec<OpLimits> { Vec::new() }
pub fn validate(_axis: u32, _inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> { Err(Error::NotSupported("gather is not implemented yet".into())) }
pub fn lower(_axis: u32, _cx: &LowerContext) -> Result<Lowering> { Err(Error::NotSupported("gather is not implemented yet".into())) }
pub fn reference(_axis: u32, _inputs: &[HostTensor], _outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> { Err(Error::NotSupported("gather is not implemented yet".into())) }
