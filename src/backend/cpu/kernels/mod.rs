//! The CPU backend's kernels: float32 ones, and byte-level ones for other data types and multi-output operators.

pub mod chain;
pub mod conv2d;
pub mod gemm;
pub mod scratch;
pub mod elementwise;
pub mod float16;
pub mod float32;
pub mod gather;
pub mod movement;
pub mod normalization;
pub mod quantized;
pub mod recurrent;
pub mod reduce;
pub mod spatial;
pub mod typed;
mod winograd;
