//! The graph cache's record of a compiled graph (`saveGraph`/`loadGraph`): what every backend's
//! record starts with, so that a record written by another package version, another format,
//! another backend or for another kind of adapter is recognised and refused before its body is
//! read. A backend's body is its own (the WebGPU plan with its WGSL, the CPU backend's IR).
//! Constants are not in the record: they are numbered, and the caller stores each one's bytes
//! (in the backend's buffer layout) beside it and hands them back on load.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::operand::{DataType, OperandDescriptor};

/// Bumped whenever a record's layout or meaning changes.
pub const FORMAT: u32 = 1;

/// What a record must match to be used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    pub format: u32,
    /// The package version that wrote it.
    pub package: String,
    /// `"webgpu"` or `"cpu"`.
    pub backend: String,
    /// The traits of the adapter its kernels were chosen for (see each backend).
    pub adapter: String,
}

impl Header {
    pub fn new(backend: &str, adapter: String) -> Header {
        Header { format: FORMAT, package: env!("CARGO_PKG_VERSION").into(), backend: backend.into(), adapter }
    }

    /// `NotFoundError` naming the difference when `saved` was written for something else: the
    /// caller builds the graph again, as for a key never saved.
    pub fn check(&self, saved: &Header) -> Result<()> {
        let differs = |what: &str, saved: &dyn std::fmt::Display, ours: &dyn std::fmt::Display| {
            Err(Error::NotFound(format!("the saved graph was written {what} {saved}, this one is {ours}: build it again")))
        };
        if saved.format != self.format {
            return differs("in cache format", &saved.format, &self.format);
        }
        if saved.package != self.package {
            return differs("by webnn-wgpu", &saved.package, &self.package);
        }
        if saved.backend != self.backend {
            return differs("for the backend", &saved.backend, &self.backend);
        }
        if saved.adapter != self.adapter {
            return differs("for the adapter", &saved.adapter, &self.adapter);
        }
        Ok(())
    }
}

/// A graph input or output: its name and descriptor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedOperand {
    pub name: String,
    pub data_type: String,
    pub shape: Vec<u32>,
}

impl SavedOperand {
    pub fn new(name: &str, descriptor: &OperandDescriptor) -> SavedOperand {
        SavedOperand { name: name.into(), data_type: descriptor.data_type.name().into(), shape: descriptor.shape.clone() }
    }

    /// The descriptor, checked as the builder checks an input's (`maxTensorByteLength` by `check`).
    pub fn descriptor(&self, check: impl Fn(&OperandDescriptor) -> Result<()>) -> Result<(String, OperandDescriptor)> {
        let data_type = DataType::from_name(&self.data_type).map_err(|e| Error::Data(e.message().into()))?;
        let descriptor = OperandDescriptor::new(data_type, self.shape.clone());
        descriptor.check_dimensions().map_err(|e| Error::Data(e.message().into()))?;
        check(&descriptor).map_err(|e| Error::Data(e.message().into()))?;
        Ok((self.name.clone(), descriptor))
    }
}

/// The named operands of a record, in the order graphs keep them (sorted by name, no repeats).
pub fn named_operands(
    operands: &[SavedOperand],
    what: &str,
    check: impl Fn(&OperandDescriptor) -> Result<()>,
) -> Result<Vec<(String, OperandDescriptor)>> {
    let named = operands.iter().map(|o| o.descriptor(&check)).collect::<Result<Vec<_>>>()?;
    if named.windows(2).any(|w| w[0].0 >= w[1].0) {
        return Err(Error::Data(format!("the saved graph's {what}s are not sorted by unique names")));
    }
    Ok(named)
}

/// Reads a record: its header first (checked against `ours`), then the whole record.
pub fn read<T: for<'de> Deserialize<'de>>(record: &[u8], ours: &Header) -> Result<T> {
    #[derive(Deserialize)]
    struct Head {
        header: Header,
    }
    let corrupt = |e: serde_json::Error| Error::Data(format!("the saved graph is corrupt: {e}"));
    let head: Head = serde_json::from_slice(record).map_err(corrupt)?;
    ours.check(&head.header)?;
    serde_json::from_slice(record).map_err(corrupt)
}

/// Writes a record.
pub fn write<T: Serialize>(record: &T) -> Result<Vec<u8>> {
    serde_json::to_vec(record).map_err(|e| Error::Operation(format!("the graph could not be saved: {e}")))
}
