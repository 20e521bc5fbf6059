//! `wgcompute bench`: every row beside a baseline measured in the same run.

use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use wgcompute::bench::{self, BenchAdapter, BenchReport};
use wgcompute::Session;

use crate::GlobalOptions;

#[derive(Args)]
pub struct BenchArgs {
    /// Fewer repetitions: the whole run stays under a minute on lavapipe.
    #[arg(long)]
    quick: bool,
    /// Print one JSON document instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(global: &GlobalOptions, args: &BenchArgs) -> Result<()> {
    let options = global.session_options()?;
    let exe = std::env::current_exe()
        .context("finding this executable for the child-process baseline")?;
    let mut child = || -> wgcompute::Result<()> {
        let mut command = Command::new(&exe);
        if let Some(adapter) = &global.adapter {
            command.args(["--adapter", adapter]);
        }
        let status = command
            .arg("job")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        match status {
            Ok(status) if status.success() => Ok(()),
            other => Err(wgcompute::Error::Driver {
                op: "bench child",
                message: format!("{other:?}"),
            }),
        }
    };
    let runs = if args.quick { 5 } else { 15 };
    let mut results = vec![bench::session_open_close(&options, runs, &mut child)?];
    let session = Session::open(options)?;
    let budget = Duration::from_millis(if args.quick { 150 } else { 600 });
    results.extend(bench::pool_alloc_free(
        &session,
        &bench::POOL_SIZES,
        budget,
    )?);
    let adapter = session.adapter();
    let report = BenchReport {
        adapter: BenchAdapter {
            name: adapter.name.clone(),
            backend: adapter.backend,
            device_type: adapter.device_type,
        },
        results,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", bench::format_table(&report));
    }
    Ok(())
}
