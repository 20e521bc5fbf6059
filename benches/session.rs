//! Session open + small kernel + read-back + close, in this process, beside the same job in a child process
//! (the workaround users have today). Run: cargo bench --bench session

use std::path::Path;

use wgcompute::bench::{self, BenchReport};
use wgcompute::{Session, SessionOptions};

fn main() -> anyhow::Result<()> {
    let options = SessionOptions::default();
    let exe = Path::new(env!("CARGO_BIN_EXE_wgcompute"));
    let row = bench::session_open_close(&options, 15, || bench::child_job(exe, None))?;
    let session = Session::open(options)?;
    print!(
        "{}",
        bench::format_table(&BenchReport::new(&session, vec![row]))
    );
    Ok(())
}
