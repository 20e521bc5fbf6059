//! `wgcompute memcheck`: the release promise, checked in a loop. Each cycle opens a session, fills a buffer
//! from the pool, runs a kernel over it, reads values back and closes; memory after each close must stay flat.

use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;
use wgcompute::{ByteSize, DeviceMemory, MemoryStats, Session};

use crate::GlobalOptions;

#[derive(Args)]
pub struct MemcheckArgs {
    /// Open–fill–compute–close cycles in this process.
    #[arg(long, default_value_t = 10)]
    cycles: u32,
    /// Bytes of the buffer each cycle fills (4GiB, 512MiB, 1000000).
    #[arg(long, default_value = "256MiB", value_parser = crate::parse_bytes)]
    size: u64,
    /// How far memory after the last close may exceed memory after the first close.
    #[arg(long, default_value = "16MiB", value_parser = crate::parse_bytes)]
    tolerance: u64,
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
    let mut cycles = Vec::new();
    let mut adapter = None;
    let mut before = None;
    for index in 1..=args.cycles {
        let (cycle, used, memory_before) = one_cycle(global, index, args.size)?;
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
