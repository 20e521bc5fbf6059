//! `wgcompute tune`: times the kernel variants of every shape class the bench rows and the workloads use,
//! on this adapter, and caches the picks, so that later processes start tuned.

use anyhow::Result;
use clap::Args;
use wgcompute::{Session, Tuning, TuningRecord};

use crate::GlobalOptions;
use wgcompute::bench::workload::{MlpConfig, MlpJob, SeedConfig, SeedJob};
use wgcompute::bench::{MATMUL_SHAPES, SOFTMAX_XENT_SHAPES, SUM_AXIS_SHAPES, SUM_LEN};

#[derive(Args)]
pub struct TuneArgs {
    /// Print one JSON document instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(global: &GlobalOptions, args: &TuneArgs) -> Result<()> {
    let session = Session::open(global.session_options()?.tuning(Tuning::Retune))?;
    // Sessions ignore a cache they cannot write (it only costs the next process its timing), but the cache is
    // this command's whole point: its failure is the command's, found out before the timing rather than after.
    session.write_tuning_cache()?;
    for (rows, cols) in SOFTMAX_XENT_SHAPES {
        let logits = session.rand(&[rows, cols], 1)?;
        let labels = session.rand(&[rows, cols], 2)?;
        logits.softmax_cross_entropy_with_logits(&labels)?;
        logits.softmax()?;
    }
    for (rows, cols) in SUM_AXIS_SHAPES {
        session.rand(&[rows, cols], 3)?.sum(Some(1))?;
    }
    session.rand(&[SUM_LEN], 3)?.sum(None)?;
    for (m, k, n) in MATMUL_SHAPES {
        let a = session.rand(&[m, k], 4)?;
        let b = session.rand(&[k, n], 5)?;
        a.matmul(&b)?;
    }
    let mut seed = SeedJob::new(&session, SeedConfig::default())?;
    seed.step()?;
    MlpJob::new(&session, MlpConfig::default())?.step()?;
    // The workloads train with Adam; SGD, with momentum, over the MLP's weight and bias sizes.
    let mlp = MlpConfig::default();
    let widths = [mlp.inputs, mlp.hidden[0], mlp.hidden[1], mlp.classes];
    for pair in widths.windows(2) {
        for shape in [vec![pair[0], pair[1]], vec![pair[1]]] {
            let param = session.rand(&shape, 6)?;
            let grad = session.rand(&shape, 7)?;
            let buffer = session.zeros(&shape)?;
            param.sgd_update_(&grad, &buffer, 0.01, 0.9)?;
        }
    }
    session.sync()?;
    let records = session.tuning_report()?;
    let cache = session.write_tuning_cache()?;
    if args.json {
        let document = serde_json::json!({
            "adapter": session.adapter(),
            "tuning_cache_file": cache,
            "picks": records,
        });
        println!("{}", serde_json::to_string_pretty(&document)?);
    } else {
        let adapter = session.adapter();
        println!(
            "adapter: {} ({}, {})",
            adapter.name, adapter.backend, adapter.device_type
        );
        print!("{}", format_records(&records));
        match cache {
            Some(path) => println!("picks cached in {}", path.display()),
            None => println!("no cache directory: these picks hold for this process only"),
        }
    }
    session.close();
    Ok(())
}

/// One line per (family, shape class): the pick, where it came from, and each candidate's time.
fn format_records(records: &[TuningRecord]) -> String {
    let mut out = format!(
        "{:<10} {:<32} {:<22} {:<8} times (µs, best of a few runs)\n",
        "family", "shape class", "pick", "source"
    );
    for record in records {
        let times: Vec<String> = record
            .times
            .iter()
            .map(|time| match time.micros {
                Some(micros) => format!("{} {micros:.1}", time.variant),
                None => format!("{} failed", time.variant),
            })
            .collect();
        out.push_str(&format!(
            "{:<10} {:<32} {:<22} {:<8} {}\n",
            record.family,
            record.class,
            record.pick,
            format!("{:?}", record.source).to_lowercase(),
            times.join(", ")
        ));
    }
    out
}
