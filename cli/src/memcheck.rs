//! `wgcompute memcheck`: the release promise, checked in a loop. Each cycle opens a session, fills a buffer
//! from the pool, runs a kernel over it, reads values back and closes; memory after each close must stay flat.
//! `--plot` draws it: device memory before, while and after each session, and the pool the session held.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;
use wgcompute::{ByteSize, DeviceMemory, MemorySource, MemoryStats, Session};

use crate::outputs::Contents;
use crate::plot::{self, Panel, Series};
use crate::GlobalOptions;

#[derive(Args)]
pub struct MemcheckArgs {
    /// Open–fill–compute–close cycles in this process.
    #[arg(long, default_value_t = 10, allow_negative_numbers = true)]
    cycles: u32,
    /// Bytes of the buffer each cycle fills (4GiB, 512MiB, 1000000).
    #[arg(long, default_value = "256MiB", value_parser = crate::parse_bytes, allow_negative_numbers = true)]
    size: u64,
    /// How far memory after the last close may exceed memory after the first close.
    #[arg(long, default_value = "16MiB", value_parser = crate::parse_bytes, allow_negative_numbers = true)]
    tolerance: u64,
    /// Also write an SVG of device memory before, while and after each session, and of the pool each session
    /// reserved, with the limit memory after the last close must stay under. Written whenever every cycle
    /// ran, so a failed check comes with its picture.
    #[arg(long, value_name = "MEMORY.svg")]
    plot: Option<PathBuf>,
    /// Print one JSON document instead of lines.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Cycle {
    cycle: u32,
    milliseconds: f64,
    memory_while_open: DeviceMemory,
    memory_after_close: DeviceMemory,
    pool: MemoryStats,
}

#[derive(Serialize)]
struct Report {
    adapter: wgcompute::AdapterSummary,
    size: u64,
    tolerance: u64,
    memory_before_first_open: Option<DeviceMemory>,
    cycles: Vec<Cycle>,
    /// Memory after the last close minus memory after the first close, where memory is known. Wider than the
    /// figures, so that neither the difference nor its comparison with any tolerance can wrap.
    growth: Option<i128>,
    passed: bool,
}

fn one_cycle(
    global: &GlobalOptions,
    cycle: u32,
    bytes: u64,
) -> Result<(Cycle, wgcompute::AdapterSummary, DeviceMemory)> {
    let start = Instant::now();
    let elements = usize::try_from(bytes / 4)
        .with_context(|| format!("--size {bytes}: more elements than this machine can count"))?;
    if elements == 0 {
        bail!("--size must be at least 4 bytes");
    }
    let session = Session::open(global.session_options()?)?;
    let adapter = session.adapter().clone();
    let value = cycle as f32;
    // The pool refuses a size no buffer can hold before anything is allocated for it.
    let tensor = session
        .full(&[elements], value)
        .with_context(|| format!("--size {bytes}"))?;
    tensor.scale_add_(2.0, 1.0)?;
    let want = 2.0 * value + 1.0;
    for index in [0, elements / 2, elements - 1] {
        let got = tensor.read_range(index..index + 1)?[0];
        if got != want {
            bail!("cycle {cycle}: element {index} is {got}, expected {want}");
        }
    }
    let pool = session.memory_stats()?;
    // Sampled while the buffer is alive: a dedicated slab leaves as soon as its tensor is dropped.
    let memory_while_open = session.device_memory();
    drop(tensor);
    let report = session.close();
    let cycle = Cycle {
        cycle,
        milliseconds: start.elapsed().as_secs_f64() * 1e3,
        memory_while_open,
        memory_after_close: report.memory_after_close,
        pool,
    };
    Ok((cycle, adapter, report.memory_before_open))
}

pub fn run(global: &GlobalOptions, args: &MemcheckArgs) -> Result<()> {
    if args.cycles == 0 {
        bail!("--cycles must be at least 1");
    }
    let outputs = args
        .plot
        .as_deref()
        .map(|path| crate::outputs::plan(&[("--plot".to_string(), path)], &[]))
        .transpose()?;
    let mut cycles = Vec::new();
    let mut adapter = None;
    let mut before = None;
    let mut befores = Vec::new();
    for index in 1..=args.cycles {
        let (cycle, used, memory_before) = one_cycle(global, index, args.size)?;
        befores.push(memory_before);
        if !args.json {
            if index == 1 {
                println!(
                    "adapter: {} ({}, {})",
                    used.name, used.backend, used.device_type
                );
                println!("memory before first open: {memory_before}");
            }
            println!(
                "cycle {:>4}: {:>8.1} ms  pool reserved {:>10}  while open: {}  after close: {}",
                cycle.cycle,
                cycle.milliseconds,
                ByteSize(cycle.pool.reserved).to_string(),
                cycle.memory_while_open,
                cycle.memory_after_close
            );
        }
        adapter.get_or_insert(used);
        before.get_or_insert(memory_before);
        cycles.push(cycle);
    }
    let first = cycles
        .first()
        .and_then(|cycle| cycle.memory_after_close.used);
    let last = cycles
        .last()
        .and_then(|cycle| cycle.memory_after_close.used);
    let growth = first
        .zip(last)
        .map(|(first, last)| i128::from(last) - i128::from(first));
    let passed = growth.is_none_or(|growth| growth <= i128::from(args.tolerance));
    if let Some(outputs) = outputs {
        let svg = memory_plot(&cycles, &befores, first, args.tolerance).context("--plot")?;
        outputs.write(&[Contents::Bytes(svg.into_bytes())])?;
    }
    let report = Report {
        adapter: adapter.expect("at least one cycle ran"),
        size: args.size,
        tolerance: args.tolerance,
        memory_before_first_open: before,
        cycles,
        growth,
        passed,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        match growth {
            Some(growth) => println!(
                "memory after last close minus after first close: {:+.2} MiB (tolerance {})",
                growth as f64 / (1 << 20) as f64,
                ByteSize(args.tolerance)
            ),
            None => {
                println!("this adapter does not report its memory; only correctness was checked")
            }
        }
    }
    if !passed {
        bail!(
            "memory grew by {} across {} cycles, over the tolerance of {}",
            ByteSize(u64::try_from(growth.unwrap_or(0).max(0)).unwrap_or(u64::MAX)),
            args.cycles,
            ByteSize(args.tolerance)
        );
    }
    Ok(())
}

const MIB: f64 = (1u64 << 20) as f64;

/// Cycle `c` spans `c - 1` (before its session opens) to `c` (after it closes), its buffer alive at the middle,
/// so the device line rises and falls once per session and what a session leaves behind shows as a step.
fn memory_plot(
    cycles: &[Cycle],
    befores: &[DeviceMemory],
    after_first_close: Option<u64>,
    tolerance: u64,
) -> Result<String> {
    let mib = |bytes: u64| bytes as f64 / MIB;
    let start = |cycle: &Cycle| f64::from(cycle.cycle) - 1.0;
    let mut device = Vec::new();
    for (cycle, before) in cycles.iter().zip(befores) {
        let phases = [
            (start(cycle), before.used),
            (start(cycle) + 0.5, cycle.memory_while_open.used),
            (start(cycle) + 1.0, cycle.memory_after_close.used),
        ];
        device.extend(
            phases
                .into_iter()
                .filter_map(|(x, used)| Some((x, mib(used?)))),
        );
    }
    let pool = cycles
        .iter()
        .flat_map(|cycle| {
            [
                (start(cycle), 0.0),
                (start(cycle) + 0.5, mib(cycle.pool.reserved)),
                (start(cycle) + 1.0, 0.0),
            ]
        })
        .collect();
    let mut series = Vec::new();
    let mut title = "device memory across sessions".to_string();
    if device.is_empty() {
        title.push_str(" (this adapter does not report its memory: the pool alone)");
    } else {
        // A CPU adapter's memory is the process's: say which figure the line is.
        let source = cycles.first().map(|cycle| cycle.memory_after_close.source);
        let name = match source {
            Some(MemorySource::ProcessResident) => "process resident memory (a CPU adapter's)",
            _ => "device-local memory in use",
        };
        series.push(Series {
            name: name.to_string(),
            points: device,
        });
    }
    series.push(Series {
        name: "pool the session reserved".to_string(),
        points: pool,
    });
    if let Some(first) = after_first_close {
        let limit = mib(first.saturating_add(tolerance));
        let last = cycles.last().map_or(1.0, |cycle| f64::from(cycle.cycle));
        series.push(Series {
            name: "limit after the last close".to_string(),
            points: vec![(1.0, limit), (last, limit)],
        });
    }
    plot::svg(&[Panel {
        title,
        x_label: "session (cycle)".to_string(),
        y_label: "MiB".to_string(),
        whole_x: true,
        series,
        y_range: None,
    }])
}
