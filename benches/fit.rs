//! One epoch of `fit`'s training (MLP classifier, Adam, minibatches gathered on the device) beside the same epoch
//! on the CPU. Run: cargo bench --bench fit

use wgcompute::bench::{format_table, rows, BenchReport};
use wgcompute::{Session, SessionOptions};

fn main() -> wgcompute::Result<()> {
    // matrixmultiply reads this once; the command sets it the same way, so the baselines agree.
    if std::env::var_os("MATMUL_NUM_THREADS").is_none() {
        let threads = std::thread::available_parallelism().map_or(1, |count| count.get());
        std::env::set_var("MATMUL_NUM_THREADS", threads.to_string());
    }
    let session = Session::open(SessionOptions::default())?;
    let row = rows::mlp_fit_epoch(&session, 3)?;
    print!("{}", format_table(&BenchReport::new(&session, vec![row])));
    Ok(())
}
