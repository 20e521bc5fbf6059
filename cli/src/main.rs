//! The `wgcompute` binary: the command line of cli/src/lib.rs.

fn main() {
    std::process::exit(wgcompute_cli::run_command(std::env::args_os()));
}
