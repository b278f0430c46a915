//! The reference backend: runs a whole graph on the host with each operator family's float64
//! reference ([`ops::reference`]). Every tensor is stored in its data type between operators, as
//! a device backend stores it, so rounding to float32/float16 and integer wrapping happen where
//! they would on a device. Exact rather than fast: it checks the other backends and the
//! conformance cases, and is the behaviour a CPU backend must reproduce.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::graph::{ConstantValue, GraphDescription, OperandDescriptor, OperandSource};
use crate::ops::{self, HostTensor};

/// A graph compiled for the reference backend: its description with the constants' values.
pub struct ReferenceGraph {
    description: GraphDescription,
    constants: BTreeMap<usize, HostTensor>,
}

impl ReferenceGraph {
    /// Takes the constants' bytes from their host copies. A constant held only on a device (a
    /// constant `MLTensor`, or one streamed from a weight file) is a `NotSupportedError`.
    pub fn compile(description: GraphDescription) -> Result<ReferenceGraph> {
        let mut constants = BTreeMap::new();
        for (index, source) in description.sources.iter().enumerate() {
            let OperandSource::Constant(value) = source else { continue };
            let descriptor = description.descriptors[index].clone();
            let bytes = match value {
                ConstantValue::Bytes(shared) => shared.host_copy(),
                ConstantValue::Tensor(_) => None,
            }
            .ok_or_else(|| {
                Error::NotSupported(format!("the reference backend needs a host copy of constant {descriptor}"))
            })?;
            let length = descriptor.byte_length() as usize;
            let bytes = bytes.get(..length).ok_or_else(|| Error::Operation(format!("constant {descriptor}: short copy")))?;
            constants.insert(index, HostTensor::from_bytes(descriptor, bytes)?);
        }
        Ok(ReferenceGraph { description, constants })
    }

    pub fn input_descriptors(&self) -> BTreeMap<&str, &OperandDescriptor> {
        self.named(&self.description.inputs)
    }

    pub fn output_descriptors(&self) -> BTreeMap<&str, &OperandDescriptor> {
        self.named(&self.description.outputs)
    }

    fn named<'a>(&'a self, names: &'a BTreeMap<String, usize>) -> BTreeMap<&'a str, &'a OperandDescriptor> {
        names.iter().map(|(name, &index)| (name.as_str(), &self.description.descriptors[index])).collect()
    }

    /// Runs the graph on `inputs` (every input by name, each with its descriptor) and returns
    /// every output by name.
    pub fn dispatch(&self, inputs: &BTreeMap<String, HostTensor>) -> Result<BTreeMap<String, HostTensor>> {
        let d = &self.description;
        if inputs.len() != d.inputs.len() {
            return Err(Error::Type(format!("{} inputs given, the graph has {}", inputs.len(), d.inputs.len())));
        }
        let mut values: Vec<Option<HostTensor>> = vec![None; d.descriptors.len()];
        for (name, &index) in &d.inputs {
            let input = inputs.get(name).ok_or_else(|| Error::Type(format!("input '{name}' is missing")))?;
            if input.descriptor != d.descriptors[index] {
                return Err(Error::Type(format!(
                    "input '{name}' is {}, the graph expects {}",
                    input.descriptor, d.descriptors[index]
                )));
            }
            values[index] = Some(input.clone());
        }
        for (&index, constant) in &self.constants {
            values[index] = Some(constant.clone());
        }
        for operator in &d.operators {
            let operands = operator
                .inputs
                .iter()
                .map(|&i| values[i].clone().ok_or_else(|| Error::Operation(format!("operand {i} has no value yet"))))
                .collect::<Result<Vec<_>>>()?;
            let descriptors: Vec<OperandDescriptor> = operator.outputs.iter().map(|&o| d.descriptors[o].clone()).collect();
            let results = ops::reference(&operator.op, &operands, &descriptors)?;
            for (&o, result) in operator.outputs.iter().zip(results) {
                values[o] = Some(stored(result)?);
            }
        }
        d.outputs
            .iter()
            .map(|(name, &index)| {
                let value = values[index].clone().ok_or_else(|| Error::Operation(format!("output '{name}' was not computed")))?;
                Ok((name.clone(), value))
            })
            .collect()
    }
}

/// The tensor as a device holds it: its values in its data type.
fn stored(tensor: HostTensor) -> Result<HostTensor> {
    let bytes = tensor.to_bytes();
    HostTensor::from_bytes(tensor.descriptor, &bytes)
}
