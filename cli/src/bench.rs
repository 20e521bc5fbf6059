//! `wgcompute bench`: the rows of `wgcompute::bench`, each beside a baseline measured in the same run.

use anyhow::{Context, Result};
use clap::Args;
use wgcompute::bench::{self, BenchPlan};

use crate::GlobalOptions;

#[derive(Args)]
pub struct BenchArgs {
    /// Fewer repetitions and smaller shapes: about two minutes on a 2-core lavapipe (release build).
    #[arg(long)]
    quick: bool,
    /// Print one JSON document instead of a table.
    #[arg(long)]
    json: bool,
    /// Only these rows (comma-separated names, such as `matmul,softmax_xent`); default: every row.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
}

/// `program`: the file the command was started as, where it was named by a path (the child-process baseline
/// runs it again); else this executable.
pub fn run(
    global: &GlobalOptions,
    args: &BenchArgs,
    program: Option<&std::path::Path>,
) -> Result<()> {
    let plan = BenchPlan {
        quick: args.quick,
        only: args.only.clone(),
    };
    if let Some(unknown) = plan.unknown_row() {
        anyhow::bail!(
            "--only: no row named {unknown:?}; the rows are {}",
            bench::ROWS.join(", ")
        );
    }
    let options = global.session_options()?;
    let exe = match program {
        Some(program) => program.to_path_buf(),
        None => std::env::current_exe()
            .context("finding this executable for the child-process baseline")?,
    };
    let report = bench::run(&options, &plan, || {
        bench::child_job(&exe, global.adapter.as_deref())
    })?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", bench::format_table(&report));
    }
    Ok(())
}
