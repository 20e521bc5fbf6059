//! The benchmark rows of `wgcompute bench` and `cargo bench` (feature `bench`): every row measures one figure
//! beside a baseline in the same run, since the machines these run on are shared and noisy, and reports both
//! and their ratio. The CPU baselines come from one set of references in [`cpu`]; the device workloads they
//! race are in [`workload`].
//!
//! ```no_run
//! use wgcompute::bench::{self, BenchPlan};
//! # fn main() -> wgcompute::Result<()> {
//! let plan = BenchPlan {
//!     quick: true,
//!     only: vec!["matmul".to_string()],
//! };
//! // The child-process baseline is the caller's to run; no `session_open_close` row here needs one.
//! let report = bench::run(&wgcompute::SessionOptions::default(), &plan, || Ok(()))?;
//! print!("{}", bench::format_table(&report));
//! # Ok(()) }
//! ```

pub mod conv;
pub mod cpu;
pub mod min_cap;
mod report;
pub mod rows;
pub mod workload;

use std::time::Duration;

pub use report::{format_table, BenchAdapter, BenchReport, BenchRow, Better};
pub use rows::{child_job, small_job};

use crate::{Error, Result, Session, SessionOptions};
use workload::MlpConfig;

/// (m, k, n) of the `matmul` rows; a quick run leaves out 2048.
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
/// Sizes the `pool_alloc_free` rows cover: 4 KiB to 64 MiB in steps of 4×.
pub const POOL_SIZES: [u64; 8] = [
    4 << 10,
    16 << 10,
    64 << 10,
    256 << 10,
    1 << 20,
    4 << 20,
    16 << 20,
    64 << 20,
];
/// Parameters of the `adam` row.
pub const ADAM_LEN: usize = 10_000_000;

/// Empty dispatches per submission in the `empty_dispatch` rows, and whether they share one compute pass: one
/// alone (a dispatch that waits for itself); as many as a step of a small model records, a pass each (a batch,
/// as the command stream submits them); the same in one pass (what merging passes would save); and 10,000 in one
/// pass, where the wait is a small share and the figure is the host's time per recorded op.
pub const EMPTY_DISPATCH_BATCHES: [(usize, bool); 4] =
    [(1, false), (64, false), (64, true), (10_000, true)];

/// Elements of the `elementwise` rows.
pub const ELEMENTWISE_LEN: usize = 16 << 20;
/// Elements of the `elementwise` rows in a quick run: a row per op makes them most of the run at 16M (on a
/// 2-core lavapipe, 0.8 s an op, 5.5 of the quick run's minutes).
pub const QUICK_ELEMENTWISE_LEN: usize = 1 << 20;

/// Elements of the `sort` and `top_k` rows, and the k of `top_k`.
pub const SORT_LEN: usize = 1 << 20;
pub const TOP_K: usize = 10;

/// Every row's name, in the order [`run`] runs them.
pub const ROWS: [&str; 22] = [
    "session_open_close",
    "suspend_resume",
    "pool_alloc_free",
    "empty_dispatch",
    "matmul",
    "seed_products",
    "seed_product_rate",
    "unchecked_matmul",
    "sum",
    "elementwise",
    "sum_axis",
    "softmax_xent",
    "sort",
    "top_k",
    "adam",
    "optimizer_step",
    "conv2d",
    "seed_step",
    "mlp_step",
    "mlp_small_step",
    "mlp_fit_epoch",
    "min_cap",
];

/// Which rows [`run`] measures, and how long it spends on each.
#[derive(Clone, Debug, Default)]
pub struct BenchPlan {
    /// Fewer repetitions, no 2048³ product and smaller elementwise rows: about two minutes on a 2-core lavapipe.
    pub quick: bool,
    /// Only these rows, by the names in [`ROWS`]; empty: every row.
    pub only: Vec<String>,
}

impl BenchPlan {
    /// The first name in `only` that no row has.
    pub fn unknown_row(&self) -> Option<&str> {
        self.only
            .iter()
            .map(String::as_str)
            .find(|name| !ROWS.contains(name))
    }

    fn wants(&self, row: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|name| name == row)
    }

    fn pick<T>(&self, quick: T, full: T) -> T {
        if self.quick {
            quick
        } else {
            full
        }
    }
}

/// Measures the plan's rows on sessions opened with `options`, in the order of [`ROWS`]. `child` runs the
/// small job in a new process and waits for it ([`child_job`] does, given the `wgcompute` executable): the
/// baseline of `session_open_close`, called only when that row runs.
pub fn run(
    options: &SessionOptions,
    plan: &BenchPlan,
    child: impl FnMut() -> Result<()>,
) -> Result<BenchReport> {
    if let Some(unknown) = plan.unknown_row() {
        return Err(Error::InvalidArgument {
            what: "bench row",
            given: unknown.to_string(),
            expected: format!("one of {}", ROWS.join(", ")),
        });
    }
    let mut results = Vec::new();
    if plan.wants("session_open_close") {
        results.push(rows::session_open_close(options, plan.pick(5, 15), child)?);
    }
    if plan.wants("suspend_resume") {
        results.push(rows::suspend_resume(options, plan.pick(3, 7))?);
    }
    let session = Session::open(options.clone())?;
    if plan.wants("pool_alloc_free") {
        let budget = Duration::from_millis(plan.pick(150, 600));
        results.extend(rows::pool_alloc_free(&session, &POOL_SIZES, budget)?);
    }
    if plan.wants("empty_dispatch") {
        let budget = Duration::from_millis(plan.pick(200, 800));
        for (per_submission, one_pass) in EMPTY_DISPATCH_BATCHES {
            results.push(rows::empty_dispatch(
                &session,
                per_submission,
                one_pass,
                budget,
            )?);
        }
    }
    let runs = plan.pick(3, 7);
    if plan.wants("matmul") {
        let shapes: Vec<_> = MATMUL_SHAPES
            .into_iter()
            .filter(|&(m, _, _)| !plan.quick || m < 2048)
            .collect();
        results.extend(rows::matmul(&session, &shapes, runs)?);
    }
    if plan.wants("seed_products") {
        results.extend(rows::seed_products(&session, runs)?);
    }
    if plan.wants("seed_product_rate") {
        results.push(rows::seed_product_rate(&session, 1024, runs)?);
    }
    if plan.wants("unchecked_matmul") {
        let square = plan.pick(512, 1024);
        let shapes = [(square, square, square), (10, 10_000, 1_000)];
        results.extend(rows::unchecked_matmul(&session, options, &shapes, runs)?);
    }
    if plan.wants("sum") {
        results.push(rows::sum(&session, SUM_LEN, runs)?);
    }
    if plan.wants("elementwise") {
        let len = plan.pick(QUICK_ELEMENTWISE_LEN, ELEMENTWISE_LEN);
        results.extend(rows::elementwise(&session, len, runs)?);
    }
    if plan.wants("sum_axis") {
        for (rows_, cols) in SUM_AXIS_SHAPES {
            results.push(rows::sum_axis(&session, rows_, cols, runs)?);
        }
    }
    if plan.wants("softmax_xent") {
        for (rows_, cols) in SOFTMAX_XENT_SHAPES {
            results.push(rows::softmax_xent(&session, rows_, cols, runs)?);
        }
    }
    if plan.wants("sort") {
        results.push(rows::sort(&session, SORT_LEN, runs)?);
    }
    if plan.wants("top_k") {
        results.push(rows::top_k(&session, SORT_LEN, TOP_K, runs)?);
    }
    if plan.wants("adam") {
        results.push(rows::adam(&session, ADAM_LEN, runs)?);
    }
    if plan.wants("optimizer_step") {
        results.extend(rows::optimizer_steps(&session, ADAM_LEN, runs)?);
    }
    if plan.wants("conv2d") {
        let case = plan.pick(conv::ConvCase::QUICK, conv::ConvCase::FULL);
        results.push(conv::conv2d(&session, case, runs)?);
    }
    if plan.wants("seed_step") {
        results.push(rows::seed_step(&session, plan.pick(3, 10))?);
    }
    if plan.wants("mlp_step") {
        let config = MlpConfig::default();
        results.push(rows::mlp_step(
            &session,
            "mlp_step",
            config,
            plan.pick(3, 10),
        )?);
    }
    if plan.wants("mlp_small_step") {
        let config = MlpConfig::small();
        let runs = plan.pick(30, 200);
        results.push(rows::mlp_step(&session, "mlp_small_step", config, runs)?);
    }
    if plan.wants("mlp_fit_epoch") {
        results.push(rows::mlp_fit_epoch(&session, plan.pick(1, 3))?);
    }
    if plan.wants("min_cap") {
        // Each try opens a session of its own; this one's memory is not theirs to share.
        session.trim()?;
        for job in min_cap::CapJob::ALL {
            results.push(min_cap::min_cap(
                options,
                job,
                plan.pick(4, 20),
                plan.pick(4, 7),
            )?);
        }
    }
    Ok(BenchReport::new(&session, results))
}
