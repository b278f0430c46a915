//! slice.

use crate::error::{Error, Result};
use crate::graph::OperandDescriptor;
use crate::ops::limits::OpLimits;
use crate::ops::reference::HostTensor;
use crate::ops::wgsl::{LowerContext, Lowering};

/// `slice`'s arguments and `MLSliceOptions`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceOptions {
    pub starts: Vec<u32>,
    pub sizes: Vec<u32>,
    pub strides: Option<Vec<u32>>,
}

pub fn limits() -> Vec<OpLimits> { Vec::new() }
pub fn validate(_o: &SliceOptions, _inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> { Err(Error::NotSupported("slice is not implemented yet".into())) }
pub fn lower(_o: &SliceOptions, _cx: &LowerContext) -> Result<Lowering> { Err(Error::NotSupported("slice is not implemented yet".into())) }
pub fn reference(_o: &SliceOptions, _inputs: &[HostTensor], _outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> { Err(Error::NotSupported("slice is not implemented yet".into())) }
