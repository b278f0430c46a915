//! Backend-independent planning of a validated graph: which operators run as one kernel.

pub mod fusion;
