//! Pool allocate+free against create_buffer+destroy, 4 KiB to 64 MiB, in one run. Run: cargo bench --bench pool

use std::time::Duration;

use wgcompute::{Session, SessionOptions};

// The command's bench rows (and the seed workload they use), so both report the same rows the same way.
#[allow(dead_code)]
#[path = "../src/bin/wgcompute/rows.rs"]
mod rows;
#[allow(dead_code)]
#[path = "../src/bin/wgcompute/workload.rs"]
mod workload;

use rows::BenchReport;

fn main() -> anyhow::Result<()> {
    let session = Session::open(SessionOptions::default())?;
    let results = rows::pool_alloc_free(&session, &rows::POOL_SIZES, Duration::from_millis(600))?;
    print!(
        "{}",
        rows::format_table(&BenchReport::new(&session, results))
    );
    Ok(())
}
