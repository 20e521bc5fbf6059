//! Every integration test of the library, in one binary: it links once rather than once per file, and the files
//! are its modules. `common` holds what they share: the backends to run on, seeded random data, f64 comparisons
//! and the memory lock; the command's tests (cli/tests/cli) share it too.

mod common;

mod architecture;
mod autograd_gradient;
mod autograd_layout;
mod autograd_ops;
mod checkpoint;
mod counters;
mod data;
mod examples;
mod fit;
mod gradient_tape;
mod large_sizes;
mod layering;
mod lifecycle;
mod nn_layers;
mod ops_creation;
mod ops_edges;
mod ops_elementwise;
mod ops_index;
mod ops_integer;
mod ops_layout;
mod ops_linear;
mod ops_logic;
mod ops_manipulate;
mod ops_matmul;
mod ops_neural;
mod ops_optim;
mod ops_random;
mod ops_reduce;
mod ops_softmax;
mod ops_sort;
mod ops_window;
mod optimizers;
mod pool;
mod suspend;
mod training;
mod tuning;
