//! cast: conversion between data types.

use crate::error::{Error, Result};
use crate::graph::OperandDescriptor;
use crate::ops::limits::OpLimits;
use crate::ops::reference::HostTensor;
use crate::ops::wgsl::{LowerContext, Lowering};

pub fn limits() -> Vec<OpLimits> { Vec::new() }
pub fn validate(_data_type: crate::graph::DataType, _inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> { Err(Error::NotSupported("cast is not implemented yet".into())) }
pub fn lower(_cx: &LowerContext) -> Result<Lowering> { Err(Error::NotSupported("cast is not implemented yet".into())) }
pub fn reference(_inputs: &[HostTensor], _outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> { Err(Error::NotSupported("cast is not implemented yet".into())) }
