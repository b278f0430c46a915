//! layerNormalization (instance and batch normalization come with the remaining operators).

use crate::error::{Error, Result};
use crate::graph::OperandDescriptor;
use crate::ops::limits::OpLimits;
use crate::ops::reference::HostTensor;
use crate::ops::wgsl::{LowerContext, Lowering};

/// `MLLayerNormalizationOptions`; `scale` then `bias` follow the input when present.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerNormalizationOptions {
    pub axes: Option<Vec<u32>>,
    pub epsilon: f64,
    pub has_scale: bool,
    pub has_bias: bool,
}

impl Default for LayerNormalizationOptions {
    fn default() -> Self {
        LayerNormalizationOptions { axes: None, epsilon: 1e-5, has_scale: false, has_bias: false }
    }
}

pub fn limits() -> Vec<OpLimits> { Vec::new() }
pub fn validate_layer_normalization(_o: &LayerNormalizationOptions, _inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> { Err(Error::NotSupported("normalization is not implemented yet".into())) }
pub fn lower_layer_normalization(_o: &LayerNormalizationOptions, _cx: &LowerContext) -> Result<Lowering> { Err(Error::NotSupported("normalization is not implemented yet".into())) }
pub fn reference_layer_normalization(_o: &LayerNormalizationOptions, _inputs: &[HostTensor], _outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> { Err(Error::NotSupported("normalization is not implemented yet".into())) }
