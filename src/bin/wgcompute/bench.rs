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
    /// Only these rows (comma-separated names, such as `matmul,softmax_xent`); default: every row.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
}

impl BenchArgs {
    fn wants(&self, row: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|name| name == row)
    }
}

/// (m, k, n) of the `matmul` rows; `--quick` leaves out 2048.
pub const MATMUL_SHAPES: [(usize, usize, usize); 5] = [
    (256, 256, 256),
    (512, 512, 512),
    (1024, 1024, 1024),
    (2048, 2048, 2048),
    (10, 10000, 1000),
];
/// Elements of the `sum` row.
pub const SUM_LEN: usize = 16 << 20;
/// [rows, cols] of the `sum_axis` rows: many narrow rows, and few wide ones.
pub const SUM_AXIS_SHAPES: [(usize, usize); 2] = [(4096, 16), (16, 1 << 20)];
/// [rows, cols] of the `softmax_xent` rows: a 4-class classifier's batch, and the seed workload's logits.
pub const SOFTMAX_XENT_SHAPES: [(usize, usize); 2] = [(1000, 4), (10, 1000)];

/// Every row's name, in the order they run.
const ROWS: [&str; 11] = [
    "session_open_close",
    "suspend_resume",
    "pool_alloc_free",
    "matmul",
    "sum",
    "sum_axis",
    "softmax_xent",
    "adam",
    "seed_step",
    "mlp_step",
    "mlp_fit_epoch",
];

pub fn run(global: &GlobalOptions, args: &BenchArgs) -> Result<()> {
    if let Some(unknown) = args.only.iter().find(|name| !ROWS.contains(&name.as_str())) {
        anyhow::bail!(
            "--only: no row named {unknown:?}; the rows are {}",
            ROWS.join(", ")
        );
    }
    let options = global.session_options()?;
    let exe = std::env::current_exe()
        .context("finding this executable for the child-process baseline")?;
    let runs = if args.quick { 5 } else { 15 };
    let mut results = Vec::new();
    if args.wants("session_open_close") {
        results.push(rows::session_open_close(&options, runs, || {
            rows::child_job(&exe, global.adapter.as_deref())
        })?);
    }
    if args.wants("suspend_resume") {
        results.push(rows::suspend_resume(
            &options,
            if args.quick { 3 } else { 7 },
        )?);
    }
    let session = Session::open(options)?;
    let budget = Duration::from_millis(if args.quick { 150 } else { 600 });
    if args.wants("pool_alloc_free") {
        results.extend(rows::pool_alloc_free(&session, &rows::POOL_SIZES, budget)?);
    }
    let shapes: Vec<_> = MATMUL_SHAPES
        .into_iter()
        .filter(|&(m, _, _)| !args.quick || m < 2048)
        .collect();
    let runs = if args.quick { 3 } else { 7 };
    if args.wants("matmul") {
        results.extend(rows::matmul(&session, &shapes, runs)?);
    }
    if args.wants("sum") {
        results.push(rows::sum(&session, SUM_LEN, runs)?);
    }
    if args.wants("sum_axis") {
        for (rows_, cols) in SUM_AXIS_SHAPES {
            results.push(rows::sum_axis(&session, rows_, cols, runs)?);
        }
    }
    if args.wants("softmax_xent") {
        for (rows_, cols) in SOFTMAX_XENT_SHAPES {
            results.push(rows::softmax_xent(&session, rows_, cols, runs)?);
        }
    }
    if args.wants("adam") {
        results.push(rows::adam(&session, 10_000_000, runs)?);
    }
    if args.wants("seed_step") {
        results.push(rows::seed_step(&session, if args.quick { 3 } else { 10 })?);
    }
    if args.wants("mlp_step") {
        results.push(rows::mlp_step(&session, if args.quick { 3 } else { 10 })?);
    }
    if args.wants("mlp_fit_epoch") {
        results.push(rows_fit::mlp_fit_epoch(
            &session,
            if args.quick { 1 } else { 3 },
        )?);
    }
    let report = BenchReport::new(&session, results);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", rows::format_table(&report));
    }
    Ok(())
}
