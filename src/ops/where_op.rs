//! where: element-wise select by a uint8 condition, with broadcasting of all three inputs.

use crate::error::{Error, Result};
use crate::graph::OperandDescriptor;
use crate::ops::limits::OpLimits;
use crate::ops::reference::HostTensor;
use crate::ops::wgsl::{LowerContext, Lowering};

pub fn limits() -> Vec<OpLimits> { Vec::new() }
pub fn validate(_inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> { Err(Error::NotSupported("where_op is not implemented yet".into())) }
pub fn lower(_cx: &LowerContext) -> Result<Lowering> { Err(Error::NotSupported("where_op is not implemented yet".into())) }
pub fn reference(_inputs: &[HostTensor], _outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> { Err(Error::NotSupported("where_op is not implemented yet".into())) }
