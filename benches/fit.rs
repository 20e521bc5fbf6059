//! One epoch of `fit`'s training (MLP classifier, Adam, minibatches gathered on the device) beside the same epoch
//! on the CPU. Run: cargo bench --bench fit

use wgcompute::{Session, SessionOptions};

// The command's bench rows (and what they use), so both report the same rows the same way.
#[allow(dead_code)]
#[path = "../src/bin/wgcompute/rows.rs"]
mod rows;
// Its unit test runs with the command's; here, without a test harness, the test module's import is unused.
#[allow(dead_code, unused_imports)]
#[path = "../src/bin/wgcompute/rows_fit.rs"]
mod rows_fit;
#[allow(dead_code)]
#[path = "../src/bin/wgcompute/workload.rs"]
mod workload;

use rows::BenchReport;

fn main() -> anyhow::Result<()> {
    // matrixmultiply reads this once; the command sets it the same way, so the baselines agree.
    if std::env::var_os("MATMUL_NUM_THREADS").is_none() {
        let threads = std::thread::available_parallelism().map_or(1, |count| count.get());
        std::env::set_var("MATMUL_NUM_THREADS", threads.to_string());
    }
    let session = Session::open(SessionOptions::default())?;
    let row = rows_fit::mlp_fit_epoch(&session, 3)?;
    print!(
        "{}",
        rows::format_table(&BenchReport::new(&session, vec![row]))
    );
    Ok(())
}
