//! Activations: relu, sigmoid, tanh, gelu, leakyRelu, clamp.

use crate::error::{Error, Result};
use crate::graph::OperandDescriptor;
use crate::ops::limits::OpLimits;
use crate::ops::reference::HostTensor;
use crate::ops::wgsl::{LowerContext, Lowering};

#[derive(Debug, Clone, PartialEq)]
pub enum Activation {
    Relu,
    Sigmoid,
    Tanh,
    Gelu,
    LeakyRelu { alpha: f64 },
    /// `MLClampOptions`: bounds are `MLNumber`s, absent meaning unbounded.
    Clamp { min_value: Option<f64>, max_value: Option<f64> },
}

impl Activation {
    pub fn name(&self) -> &'static str {
        match self {
            Activation::Relu => "relu",
            Activation::Sigmoid => "sigmoid",
            Activation::Tanh => "tanh",
            Activation::Gelu => "gelu",
            Activation::LeakyRelu { .. } => "leakyRelu",
            Activation::Clamp { .. } => "clamp",
        }
    }
}

pub fn limits() -> Vec<OpLimits> { Vec::new() }
pub fn validate(_op: &Activation, _inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> { Err(Error::NotSupported("activation is not implemented yet".into())) }
pub fn lower(_op: &Activation, _cx: &LowerContext) -> Result<Lowering> { Err(Error::NotSupported("activation is not implemented yet".into())) }
pub fn reference(_op: &Activation, _inputs: &[HostTensor], _outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> { Err(Error::NotSupported("activation is not implemented yet".into())) }
