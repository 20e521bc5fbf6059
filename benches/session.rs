//! Session open + small kernel + read-back + close, in this process, beside the same job in a child process
//! (the workaround users have today); and suspend + resume of the seed workload's state beside close, reopen
//! and upload. Run: cargo bench --bench session

use std::path::Path;

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
    let options = SessionOptions::default();
    let exe = Path::new(env!("CARGO_BIN_EXE_wgcompute"));
    let rows = vec![
        rows::session_open_close(&options, 15, || rows::child_job(exe, None))?,
        rows::suspend_resume(&options, 7)?,
    ];
    let session = Session::open(options)?;
    print!("{}", rows::format_table(&BenchReport::new(&session, rows)));
    Ok(())
}
