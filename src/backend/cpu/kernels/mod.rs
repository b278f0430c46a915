//! The CPU backend's float32 kernels.

pub mod conv2d;
pub mod gemm;
pub mod scratch;
pub mod elementwise;
pub mod float32;
pub mod movement;
pub mod normalization;
pub mod reduce;
pub mod spatial;
