//! The graph IR: operand descriptors, the builder that validates and records operators, and the
//! description of a graph handed to the runtime by `build()`.

pub mod builder;

pub use builder::{BuilderContext, ConstantTensor, ConstantValue, GraphBuilder, GraphDescription, Operand, OperandSource, Operator};
pub use crate::operand::{DataType, Number, OperandDescriptor};
