//! Session open + small kernel + read-back + close, in this process, beside the same job in a child process
//! (the workaround users have today); and suspend + resume of the seed workload's state beside close, reopen
//! and upload. Run: cargo bench --bench session

use std::path::Path;

use wgcompute::bench::{child_job, format_table, rows, BenchReport};
use wgcompute::{Session, SessionOptions};

fn main() -> wgcompute::Result<()> {
    let options = SessionOptions::default();
    let exe = Path::new(env!("CARGO_BIN_EXE_wgcompute"));
    let rows = vec![
        rows::session_open_close(&options, 15, || child_job(exe, None))?,
        rows::suspend_resume(&options, 7)?,
    ];
    let session = Session::open(options)?;
    print!("{}", format_table(&BenchReport::new(&session, rows)));
    Ok(())
}
