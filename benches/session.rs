//! Session open + small kernel + read-back + close, in this process, beside the same job in a child process
//! (the workaround users have today). Run: cargo bench --bench session

use std::process::{Command, Stdio};

use wgcompute::bench::{self, BenchAdapter, BenchReport};
use wgcompute::{Session, SessionOptions};

fn main() -> anyhow::Result<()> {
    let options = SessionOptions::default();
    let child = || -> wgcompute::Result<()> {
        let status = Command::new(env!("CARGO_BIN_EXE_wgcompute"))
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
    let row = bench::session_open_close(&options, 15, child)?;
    let session = Session::open(options)?;
    let adapter = session.adapter();
    let report = BenchReport {
        adapter: BenchAdapter {
            name: adapter.name.clone(),
            backend: adapter.backend,
            device_type: adapter.device_type,
        },
        results: vec![row],
    };
    print!("{}", bench::format_table(&report));
    Ok(())
}
