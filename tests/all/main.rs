//! Every integration test, in one binary: it links once rather than once per file, and the files are its
//! modules. `common` holds what they share: the backends to run on, seeded random data, f64 comparisons, the
//! memory lock, and running the `wgcompute` binary.

mod common;

mod autograd_ops;
mod cli;
mod cli_input;
mod cli_op;
mod cli_train;
mod example_seed;
mod lifecycle;
mod ops_edges;
mod ops_elementwise;
mod ops_matmul;
mod ops_optim;
mod ops_random;
mod ops_reduce;
mod ops_softmax;
mod pool;
mod training;
