//! `opSupportLimits()`: what each operator accepts, in one table that validation also reads, so
//! that a page can trust what it advertises.

use crate::error::{Error, Result};
use crate::operand::{DataType, OperandDescriptor};
use crate::ops::Op;

/// `MLTensorLimits` of one operand of one operator.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorLimits {
    pub name: &'static str,
    pub data_types: Vec<DataType>,
    pub rank_min: u32,
    pub rank_max: u32,
}

/// The limits of one operator (one member of `MLOpSupportLimits`).
#[derive(Debug, Clone, PartialEq)]
pub struct OpLimits {
    pub name: &'static str,
    pub operands: Vec<TensorLimits>,
}

pub const FLOATS: &[DataType] = &[DataType::Float32, DataType::Float16];
pub const FLOATS_AND_INT32: &[DataType] = &[DataType::Float32, DataType::Float16, DataType::Int32];
/// Every type except the 64-bit integers: what operators computing on values support.
pub const SUPPORTED: &[DataType] = &[
    DataType::Float32,
    DataType::Float16,
    DataType::Int32,
    DataType::Uint32,
    DataType::Int8,
    DataType::Uint8,
];
/// Every data type: what data movement (raw bits, int64/uint64 as two words) supports.
pub const ALL_TYPES: &[DataType] = &DataType::ALL;
pub const NUMERIC_SIGNED: &[DataType] = &[DataType::Float32, DataType::Float16, DataType::Int32, DataType::Int8];
pub const INDICES: &[DataType] = &[DataType::Int32, DataType::Uint32, DataType::Int64];

pub fn tensor(name: &'static str, data_types: &[DataType], rank_min: u32, rank_max: u32) -> TensorLimits {
    TensorLimits { name, data_types: data_types.to_vec(), rank_min, rank_max }
}

/// Checks an operand's type and rank against its limits, with the operand's name in the error.
pub fn check(limits: &TensorLimits, descriptor: &OperandDescriptor) -> Result<()> {
    if !limits.data_types.contains(&descriptor.data_type) {
        let allowed: Vec<&str> = limits.data_types.iter().map(|t| t.name()).collect();
        return Err(Error::Type(format!(
            "{} has data type {} but must be one of [{}]",
            limits.name,
            descriptor.data_type,
            allowed.join(", ")
        )));
    }
    let rank = descriptor.rank() as u32;
    if rank < limits.rank_min || rank > limits.rank_max {
        return Err(Error::Type(format!(
            "{} has rank {rank} but must have rank {} to {}",
            limits.name, limits.rank_min, limits.rank_max
        )));
    }
    Ok(())
}

/// Every operator's limits, sorted by name (the order of a WebIDL dictionary's members), built
/// once.
pub fn all() -> &'static [OpLimits] {
    crate::ops::all_limits()
}


/// The limits of one operator by its spec name.
pub fn of(name: &str) -> Result<&'static OpLimits> {
    let all = all();
    all.binary_search_by(|l| l.name.cmp(name))
        .map(|i| &all[i])
        .map_err(|_| Error::NotSupported(format!("{name} is not supported")))
}

/// Checks that an operator got the number of operand inputs its options call for.
pub fn check_input_count(op: &Op, count: usize) -> Result<()> {
    let expected = op.family().input_count(op);
    if expected.contains(&count) {
        Ok(())
    } else {
        Err(Error::Type(format!("{} got {count} operands", op.name())))
    }
}
