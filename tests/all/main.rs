//! Every integration test, in one binary: it links once rather than once per file, and the files are its
//! modules. `common` holds what they share: the backends to run on, seeded random data, f64 comparisons, the
//! memory lock, and running the `wgcompute` binary. The tests of the binary need its `cli` feature (on by
//! default); without it, `cargo test --no-default-features` runs the library's tests alone.

mod common;

/// The command's tests. Each runs `wgcompute` with WGCOMPUTE_ADAPTER=vulkan (tests/all/common/cli.rs), so their
/// names say so (`command::vulkan::cli_fit::…`), as the per-backend tests' do.
// The files stay beside the others: `path = "."` keeps the modules from meaning folders.
#[cfg(feature = "cli")]
#[path = "."]
mod command {
    #[path = "."]
    mod vulkan {
        #[path = "cli.rs"]
        mod cli;
        #[path = "cli_fit.rs"]
        mod cli_fit;
        #[path = "cli_hardening.rs"]
        mod cli_hardening;
        #[path = "cli_input.rs"]
        mod cli_input;
        #[path = "cli_op.rs"]
        mod cli_op;
        #[path = "cli_train.rs"]
        mod cli_train;
    }
}

mod autograd_gradient;
mod autograd_layout;
mod autograd_ops;
mod checkpoint;
mod counters;
mod data;
mod fit;
mod layering;
mod lifecycle;
mod ops_edges;
mod ops_elementwise;
mod ops_layout;
mod ops_linear;
mod ops_matmul;
mod ops_optim;
mod ops_random;
mod ops_reduce;
mod ops_softmax;
mod pool;
mod suspend;
mod training;
mod tuning;
