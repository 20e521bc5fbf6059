//! Pool allocate+free against create_buffer+destroy, 4 KiB to 64 MiB, in one run. Run: cargo bench --bench pool

use std::time::Duration;

use wgcompute::bench::{self, BenchReport};
use wgcompute::{Session, SessionOptions};

fn main() -> anyhow::Result<()> {
    let session = Session::open(SessionOptions::default())?;
    let results = bench::pool_alloc_free(&session, &bench::POOL_SIZES, Duration::from_millis(600))?;
    print!(
        "{}",
        bench::format_table(&BenchReport::new(&session, results))
    );
    Ok(())
}
