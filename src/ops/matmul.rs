//! matmul and gemm.

use crate::error::{Error, Result};
use crate::graph::OperandDescriptor;
use crate::ops::limits::OpLimits;
use crate::ops::reference::HostTensor;
use crate::ops::wgsl::{LowerContext, Lowering};

/// `MLGemmOptions`; `c` is passed as a third input when `has_c`.
#[derive(Debug, Clone, PartialEq)]
pub struct GemmOptions {
    pub alpha: f64,
    pub beta: f64,
    pub a_transpose: bool,
    pub b_transpose: bool,
    pub has_c: bool,
}

impl Default for GemmOptions {
    fn default() -> Self {
        GemmOptions { alpha: 1.0, beta: 1.0, a_transpose: false, b_transpose: false, has_c: false }
    }
}

pub fn limits() -> Vec<OpLimits> { Vec::new() }
pub fn validate_matmul(_inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> { Err(Error::NotSupported("matmul is not implemented yet".into())) }
pub fn validate_gemm(_o: &GemmOptions, _inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> { Err(Error::NotSupported("matmul is not implemented yet".into())) }
pub fn lower_matmul(_cx: &LowerContext) -> Result<Lowering> { Err(Error::NotSupported("matmul is not implemented yet".into())) }
pub fn lower_gemm(_o: &GemmOptions, _cx: &LowerContext) -> Result<Lowering> { Err(Error::NotSupported("matmul is not implemented yet".into())) }
pub fn reference_matmul(_inputs: &[HostTensor], _outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> { Err(Error::NotSupported("matmul is not implemented yet".into())) }
pub fn reference_gemm(_o: &GemmOptions, _inputs: &[HostTensor], _outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> { Err(Error::NotSupported("matmul is not implemented yet".into())) }
