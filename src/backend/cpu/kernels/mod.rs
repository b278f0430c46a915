//! The CPU backend's float32 kernels.
