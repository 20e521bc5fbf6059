//! Pool allocate+free against create_buffer+destroy, 4 KiB to 64 MiB, in one run. Run: cargo bench --bench pool

use std::time::Duration;

use wgcompute::bench::{format_table, rows, BenchReport, POOL_SIZES};
use wgcompute::{Session, SessionOptions};

fn main() -> wgcompute::Result<()> {
    let session = Session::open(SessionOptions::default())?;
    let results = rows::pool_alloc_free(&session, &POOL_SIZES, Duration::from_millis(600))?;
    print!("{}", format_table(&BenchReport::new(&session, results)));
    Ok(())
}
