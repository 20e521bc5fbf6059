//! A bench row's figures and the report that holds the rows, as a table or (through serde) as JSON.

use serde::Serialize;

use crate::{Session, SessionInfo};

/// One measured figure beside its same-run baseline.
#[derive(Clone, Debug, Serialize)]
pub struct BenchRow {
    pub name: &'static str,
    pub case: String,
    pub value: f64,
    pub unit: &'static str,
    pub baseline: String,
    pub baseline_value: f64,
    /// How many times faster than the baseline (above 1: faster), whichever the unit.
    pub speedup: f64,
    /// A further reference figure in the row's unit, for context only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_value: Option<f64>,
    /// Compute dispatches the session recorded per timed iteration of the measured figure (its counters before
    /// and after the timed iterations, divided by their number): what a step costs in passes, exact where the
    /// time is noisy. None for rows whose work is not the session's command stream.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dispatches: Option<f64>,
}

/// Which way a row's unit improves: a time is better lower, a rate higher.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Better {
    Lower,
    Higher,
}

impl BenchRow {
    /// A row; its speedup is how many times better than the baseline `value` is, in the direction `better`.
    pub fn new(
        better: Better,
        name: &'static str,
        case: String,
        unit: &'static str,
        value: f64,
        baseline: String,
        baseline_value: f64,
    ) -> Self {
        Self {
            name,
            case,
            value,
            unit,
            baseline,
            baseline_value,
            speedup: match better {
                Better::Lower => baseline_value / value,
                Better::Higher => value / baseline_value,
            },
            context: None,
            context_value: None,
            dispatches: None,
        }
    }

    /// The row with the dispatches its measured figure recorded per timed iteration.
    pub fn with_dispatches(mut self, dispatches: f64) -> Self {
        self.dispatches = Some(dispatches);
        self
    }

    /// The row with a further figure in its unit, shown for context and not compared.
    pub fn with_context(mut self, context: String, value: f64) -> Self {
        self.context = Some(context);
        self.context_value = Some(value);
        self
    }
}

/// The adapter a bench ran on.
#[derive(Clone, Debug, Serialize)]
pub struct BenchAdapter {
    pub name: String,
    pub backend: &'static str,
    pub device_type: &'static str,
}

/// What `wgcompute bench --json` prints.
#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    pub adapter: BenchAdapter,
    /// The session's adapter with its driver, what it offers products (cooperative matrices and their
    /// configurations, float16, subgroups) and the matmul precision in effect.
    pub info: SessionInfo,
    pub results: Vec<BenchRow>,
}

impl BenchReport {
    pub fn new(session: &Session, results: Vec<BenchRow>) -> Self {
        let adapter = session.adapter();
        Self {
            adapter: BenchAdapter {
                name: adapter.name.clone(),
                backend: adapter.backend,
                device_type: adapter.device_type,
            },
            info: session.info(),
            results,
        }
    }
}

/// The rows as an aligned table, with the adapter above them.
pub fn format_table(report: &BenchReport) -> String {
    let mut out = format!(
        "adapter: {} ({}, {})\n{:<20} {:>24} {:>12} {:<8} {:>10} {:>12}  {:>8}  baseline\n",
        report.adapter.name,
        report.adapter.backend,
        report.adapter.device_type,
        "name",
        "case",
        "value",
        "unit",
        "dispatches",
        "baseline",
        "speedup"
    );
    for row in &report.results {
        // Whole numbers as such: a step's dispatches are exact, a fraction means iterations differed.
        let dispatches = match row.dispatches {
            Some(count) if count.fract() == 0.0 => format!("{count:.0}"),
            Some(count) => format!("{count:.1}"),
            None => "-".to_string(),
        };
        out.push_str(&format!(
            "{:<20} {:>24} {:>12.3} {:<8} {:>10} {:>12.3}  {:>7.2}x  {}\n",
            row.name,
            row.case,
            row.value,
            row.unit,
            dispatches,
            row.baseline_value,
            row.speedup,
            row.baseline
        ));
        if let (Some(context), Some(value)) = (&row.context, row.context_value) {
            out.push_str(&format!(
                "{:>58.3} {:<8} ({context}, for context)\n",
                value, row.unit
            ));
        }
    }
    out
}
