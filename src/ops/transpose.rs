//! transpose.

use crate::error::{Error, Result};
use crate::graph::OperandDescriptor;
use crate::ops::limits::OpLimits;
use crate::ops::reference::HostTensor;
use crate::ops::wgsl::{LowerContext, Lowering};

pub fn limits() -> Vec<OpLimits> { Vec::new() }
pub fn validate(_permutation: Option<&[u32]>, _inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> { Err(Error::NotSupported("transpose is not implemented yet".into())) }
pub fn lower(_permutation: Option<&[u32]>, _cx: &LowerContext) -> Result<Lowering> { Err(Error::NotSupported("transpose is not implemented yet".into())) }
pub fn reference(_permutation: Option<&[u32]>, _inputs: &[HostTensor], _outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> { Err(Error::NotSupported("transpose is not implemented yet".into())) }
