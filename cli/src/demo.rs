//! `wgcompute demo`: the main job. The seed workload (x[10,10000]·W[10000,1000], softmax cross-entropy, Adam,
//! 100 steps) runs twice in this process, first in a session capped at 10% of device memory, then at 50%, and
//! the device memory before open, while open and after close shows that each session gives its memory back.
//! With `--suspend`, a third run suspends half way (device memory shown while suspended), resumes and must end
//! on the first run's loss, bit for bit.

use anyhow::{bail, Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use wgcompute::bench::workload::{run_seed, SeedConfig, SeedJob};
use wgcompute::{ByteSize, DeviceMemory, MemoryLimit, MemoryStats, Session};

use crate::GlobalOptions;

/// More steps than this would outlast any machine; the bound keeps the step counts far from overflow.
const MAX_STEPS: usize = 1_000_000_000;

#[derive(Args)]
pub struct DemoArgs {
    /// Training steps per run.
    #[arg(long, default_value_t = 100, allow_negative_numbers = true)]
    steps: usize,
    /// Add a third part: train half the steps, suspend (every byte of device memory given back, the state kept
    /// in host memory), resume, train the rest, and check the final loss against the first run's.
    #[arg(long)]
    suspend: bool,
    /// Print one JSON document instead of a report.
    #[arg(long)]
    json: bool,
}

/// The third part: one run of the workload with a suspend and resume half way.
#[derive(Serialize)]
struct SuspendedRun {
    memory_limit: u64,
    steps_before_suspend: usize,
    suspend: wgcompute::SuspendReport,
    resume: wgcompute::ResumeReport,
    last_loss: f32,
    /// Whether the last loss is bit-identical to the uninterrupted first run's.
    matches_uninterrupted: bool,
    memory_before_open: DeviceMemory,
    memory_after_close: DeviceMemory,
    /// After close minus before open, where memory is known.
    retained: Option<i64>,
}

fn suspended_run(
    global: &GlobalOptions,
    args: &DemoArgs,
    limit: u64,
    uninterrupted_last_loss: f32,
) -> Result<SuspendedRun> {
    let mut options = global.session_options()?;
    options.memory_limit = Some(MemoryLimit::Bytes(limit));
    let mut session = Session::open(options)?;
    let config = SeedConfig {
        steps: args.steps,
        ..SeedConfig::default()
    };
    let mut job = SeedJob::new(&session, config)?;
    let steps_before_suspend = args.steps / 2;
    let mut last_loss = f32::NAN;
    for _ in 0..steps_before_suspend {
        last_loss = job.step()?;
    }
    let suspend = session.suspend()?;
    let resume = session.resume()?;
    for _ in steps_before_suspend..args.steps {
        last_loss = job.step()?;
    }
    drop(job);
    let report = session.close();
    Ok(SuspendedRun {
        memory_limit: limit,
        steps_before_suspend,
        suspend,
        resume,
        last_loss,
        matches_uninterrupted: last_loss.to_bits() == uninterrupted_last_loss.to_bits(),
        retained: report
            .memory_before_open
            .used
            .zip(report.memory_after_close.used)
            .map(|(before, after)| after as i64 - before as i64),
        memory_before_open: report.memory_before_open,
        memory_after_close: report.memory_after_close,
    })
}

/// Memory after close may exceed memory before open by this much before the demo calls it a leak.
const RELEASE_TOLERANCE: u64 = 64 << 20;

#[derive(Serialize)]
struct Run {
    memory_limit: u64,
    memory_limit_rule: String,
    first_loss: f32,
    last_loss: f32,
    steps: usize,
    steps_per_second: f64,
    pool: MemoryStats,
    memory_before_open: DeviceMemory,
    memory_while_open: DeviceMemory,
    memory_after_close: DeviceMemory,
    /// After close minus before open, where memory is known.
    retained: Option<i64>,
}

/// The cap for a run: `--memory-limit` where it is given (every run then obeys it), else a fraction of device
/// memory, or a byte figure where the adapter does not report it.
fn cap(global: &GlobalOptions, fraction: f64, fallback: u64) -> Result<(u64, String)> {
    let probe = Session::open(global.session_options()?)?;
    let total = probe.device_memory_total();
    let given = probe.memory_stats().map(|stats| stats.limit);
    probe.close();
    if let Some(text) = &global.memory_limit {
        let limit = given?.context("--memory-limit gave the session no limit")?;
        return Ok((limit, format!("--memory-limit {text}")));
    }
    Ok(match total {
        Some(total) => (
            (total as f64 * fraction) as u64,
            format!("{:.0}% of device memory", fraction * 100.0),
        ),
        None => (
            fallback,
            format!("{} (device memory unknown)", ByteSize(fallback)),
        ),
    })
}

fn one_run(
    global: &GlobalOptions,
    args: &DemoArgs,
    fraction: f64,
    fallback: u64,
) -> Result<(Run, wgcompute::AdapterSummary)> {
    let (limit, rule) = cap(global, fraction, fallback)?;
    let mut options = global.session_options()?;
    options.memory_limit = Some(MemoryLimit::Bytes(limit));
    let session = Session::open(options)?;
    let adapter = session.adapter().clone();
    let bar = if args.json {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(args.steps as u64)
    };
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} steps, loss {msg} ({per_sec:1})")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let config = SeedConfig {
        steps: args.steps,
        ..SeedConfig::default()
    };
    let run = run_seed(&session, config, |_, cost| {
        bar.set_message(format!("{cost:.4}"));
        bar.inc(1);
    })?;
    bar.finish_and_clear();
    let pool = session.memory_stats()?;
    let memory_while_open = session.device_memory();
    let report = session.close();
    let retained = report
        .memory_before_open
        .used
        .zip(report.memory_after_close.used)
        .map(|(before, after)| after as i64 - before as i64);
    Ok((
        Run {
            memory_limit: limit,
            memory_limit_rule: rule,
            first_loss: run.losses.first().copied().unwrap_or(f32::NAN),
            last_loss: run.losses.last().copied().unwrap_or(f32::NAN),
            steps: args.steps,
            steps_per_second: run.steps_per_second,
            pool,
            memory_before_open: report.memory_before_open,
            memory_while_open,
            memory_after_close: report.memory_after_close,
            retained,
        },
        adapter,
    ))
}

pub fn run(global: &GlobalOptions, args: &DemoArgs) -> Result<()> {
    if !(1..=MAX_STEPS).contains(&args.steps) {
        bail!("--steps must be from 1 to {MAX_STEPS}; got {}", args.steps);
    }
    let mut runs = Vec::new();
    let mut adapter = None;
    for (index, (fraction, fallback)) in [(0.10, 1u64 << 30), (0.50, 4u64 << 30)]
        .into_iter()
        .enumerate()
    {
        let (run, used) = one_run(global, args, fraction, fallback)?;
        if !args.json {
            if index == 0 {
                println!(
                    "adapter: {} ({}, {})",
                    used.name, used.backend, used.device_type
                );
            }
            println!(
                "run {}: session capped at {} ({})",
                index + 1,
                ByteSize(run.memory_limit),
                run.memory_limit_rule
            );
            println!(
                "  loss: first step {:.6}, last step {:.6}",
                run.first_loss, run.last_loss
            );
            println!(
                "  {:.2} steps/s over {} steps",
                run.steps_per_second, run.steps
            );
            println!(
                "  pool peak: {} in use, {} reserved",
                ByteSize(run.pool.peak_in_use),
                ByteSize(run.pool.peak_reserved)
            );
            println!("  device memory before open: {}", run.memory_before_open);
            println!("  device memory while open:  {}", run.memory_while_open);
            println!("  device memory after close: {}", run.memory_after_close);
        }
        adapter.get_or_insert(used);
        runs.push(run);
    }
    let suspended = if args.suspend {
        let first = &runs[0];
        let part = suspended_run(global, args, first.memory_limit, first.last_loss)?;
        if !args.json {
            println!(
                "run 3: session capped at {}, suspended after {} of {} steps",
                ByteSize(part.memory_limit),
                part.steps_before_suspend,
                args.steps
            );
            println!(
                "  suspend: {} of tensors kept in host memory, {:.3} s",
                ByteSize(part.suspend.host_bytes),
                part.suspend.seconds
            );
            println!(
                "  device memory before suspend:  {}",
                part.suspend.memory_before_suspend
            );
            println!(
                "  device memory while suspended: {}",
                part.suspend.memory_while_suspended
            );
            println!(
                "  device memory after resume:    {} ({:.3} s)",
                part.resume.memory_after_resume, part.resume.seconds
            );
            println!(
                "  loss: last step {:.6}, {} run 1's uninterrupted last step",
                part.last_loss,
                if part.matches_uninterrupted {
                    "bit-identical to"
                } else {
                    "DIFFERENT from"
                }
            );
            println!(
                "  device memory after close:     {}",
                part.memory_after_close
            );
        }
        Some(part)
    } else {
        None
    };
    let leaked: Vec<i64> = runs
        .iter()
        .filter_map(|run| run.retained)
        .chain(suspended.iter().filter_map(|part| part.retained))
        .filter(|&retained| retained > RELEASE_TOLERANCE as i64)
        .collect();
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({ "adapter": adapter, "runs": runs, "suspended_run": suspended })
            )?
        );
    } else {
        for (index, run) in runs.iter().enumerate() {
            match run.retained {
                Some(retained) => println!(
                    "run {}: memory after close minus before open: {:+.1} MiB",
                    index + 1,
                    retained as f64 / (1 << 20) as f64
                ),
                None => println!("run {}: this adapter does not report its memory", index + 1),
            }
        }
        if let Some(retained) = suspended.as_ref().and_then(|part| part.retained) {
            println!(
                "run 3: memory after close minus before open: {:+.1} MiB",
                retained as f64 / (1 << 20) as f64
            );
        }
    }
    if let Some(part) = &suspended {
        if !part.matches_uninterrupted {
            bail!(
                "the suspended run's last loss {} differs from the uninterrupted run's {}",
                part.last_loss,
                runs[0].last_loss
            );
        }
    }
    if !leaked.is_empty() {
        bail!(
            "a session kept {} MiB after close, over the {} tolerance",
            leaked[0] >> 20,
            ByteSize(RELEASE_TOLERANCE)
        );
    }
    Ok(())
}
