//! `wgcompute bench`: every row beside a baseline measured in the same run.

use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use wgcompute::Session;

use crate::rows::{self, BenchReport};
use crate::rows_fit;
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
    let runs = if args.quick { 5 } else { 15 };
    let mut results = vec![rows::session_open_close(&options, runs, || {
        rows::child_job(&exe, global.adapter.as_deref())
    })?];
    results.push(rows::suspend_resume(
        &options,
        if args.quick { 3 } else { 7 },
    )?);
    let session = Session::open(options)?;
    let budget = Duration::from_millis(if args.quick { 150 } else { 600 });
    results.extend(rows::pool_alloc_free(&session, &rows::POOL_SIZES, budget)?);
    let mut shapes = vec![(256, 256, 256), (512, 512, 512), (1024, 1024, 1024)];
    if !args.quick {
        shapes.push((2048, 2048, 2048));
    }
    shapes.push((10, 10000, 1000));
    let runs = if args.quick { 3 } else { 7 };
    results.extend(rows::matmul(&session, &shapes, runs)?);
    results.push(rows::sum(&session, 16 << 20, runs)?);
    results.push(rows::adam(&session, 10_000_000, runs)?);
    results.push(rows::seed_step(&session, if args.quick { 3 } else { 10 })?);
    results.push(rows_fit::mlp_fit_epoch(
        &session,
        if args.quick { 1 } else { 3 },
    )?);
    let report = BenchReport::new(&session, results);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", rows::format_table(&report));
    }
    Ok(())
}
