//! Every integration test, in one binary: it links once rather than once per file, and the files are its
//! modules. `common` holds what they share: the backends to run on, seeded random data, f64 comparisons, the
//! memory lock, and running the `wgcompute` binary. The tests of the binary need its `cli` feature (on by
//! default); without it, `cargo test --no-default-features` runs the library's tests alone.

mod common;

mod autograd_layout;
mod autograd_ops;
mod checkpoint;
#[cfg(feature = "cli")]
mod cli;
#[cfg(feature = "cli")]
mod cli_fit;
#[cfg(feature = "cli")]
mod cli_hardening;
#[cfg(feature = "cli")]
mod cli_input;
#[cfg(feature = "cli")]
mod cli_op;
#[cfg(feature = "cli")]
mod cli_train;
mod data;
mod lifecycle;
mod ops_edges;
mod ops_elementwise;
mod ops_layout;
mod ops_matmul;
mod ops_optim;
mod ops_random;
mod ops_reduce;
mod ops_softmax;
mod pool;
mod suspend;
mod training;
mod tuning;
