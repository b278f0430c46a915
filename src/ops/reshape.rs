//! reshape (a view: no GPU work) and expand.

use crate::error::{Error, Result};
use crate::graph::OperandDescriptor;
use crate::ops::limits::OpLimits;
use crate::ops::reference::HostTensor;
use crate::ops::wgsl::{LowerContext, Lowering};

pub fn limits() -> Vec<OpLimits> { Vec::new() }
pub fn validate_reshape(_new_shape: &[u32], _inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> { Err(Error::NotSupported("reshape is not implemented yet".into())) }
pub fn validate_expand(_new_shape: &[u32], _inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> { Err(Error::NotSupported("reshape is not implemented yet".into())) }
pub fn lower_expand(_cx: &LowerContext) -> Result<Lowering> { Err(Error::NotSupported("reshape is not implemented yet".into())) }
pub fn reference_reshape(_inputs: &[HostTensor], _outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> { Err(Error::NotSupported("reshape is not implemented yet".into())) }
pub fn reference_expand(_inputs: &[HostTensor], _outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> { Err(Error::NotSupported("reshape is not implemented yet".into())) }
