//! The command's tests, in one binary as the library's are (tests/all): each runs the `wgcompute` binary, which
//! cargo builds for this package's tests alone, on .npy files in a scratch directory. `common` is the library's
//! test helpers (tests/all/common) and the binary runner (common/cli.rs).

mod common;

/// Each runs `wgcompute` with WGCOMPUTE_ADAPTER=vulkan (common/cli.rs), so their names say so
/// (`command::vulkan::cli_fit::…`), as the library's per-backend tests' do.
// The files stay beside main.rs: `path = "."` keeps the modules from meaning folders.
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
        #[path = "cli_negative.rs"]
        mod cli_negative;
        #[path = "cli_op.rs"]
        mod cli_op;
        #[path = "cli_plot.rs"]
        mod cli_plot;
        #[path = "cli_train.rs"]
        mod cli_train;
        #[path = "cli_tuning.rs"]
        mod cli_tuning;
    }
}
