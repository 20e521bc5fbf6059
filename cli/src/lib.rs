//! The `wgcompute` command: one file per subcommand; this one parses the command line and dispatches. The
//! binary (main.rs) and the Python package's console script both run [`run_command`]. Shared by
//! several: npy.rs (.npy in and out), outputs.rs (outputs written all or none) and plot.rs (SVG charts). The
//! bench rows and the workloads of `demo`, `tune` and `bench` are the library's (`wgcompute::bench`).

mod bench;
mod demo;
mod devices;
mod fit;
mod memcheck;
mod npy;
mod op;
mod outputs;
mod plot;
mod train;
mod tune;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use wgcompute::{AdapterSelector, MemoryLimit, SessionOptions};

#[derive(Parser)]
#[command(
    name = "wgcompute",
    version,
    about = "GPU compute whose sessions give their memory back"
)]
struct Cli {
    #[command(flatten)]
    global: GlobalOptions,
    #[command(subcommand)]
    command: Command,
}

/// Options every subcommand that opens a session honours.
#[derive(Args, Clone, Debug)]
pub struct GlobalOptions {
    /// Adapter: an index from `devices`, a backend (vulkan, metal, dx12, gl), a type (discrete, integrated,
    /// virtual, cpu) or part of a name. Default: $WGCOMPUTE_ADAPTER, else the best adapter found.
    #[arg(long, global = true)]
    adapter: Option<String>,
    /// Cap on each session's GPU memory: bytes (2GiB, 512MiB) or a fraction of device memory (0.5).
    #[arg(long, global = true, allow_negative_numbers = true)]
    pub memory_limit: Option<String>,
}

impl GlobalOptions {
    pub fn session_options(&self) -> Result<SessionOptions> {
        let mut options = SessionOptions::default();
        if let Some(text) = &self.adapter {
            options.adapter = text.parse::<AdapterSelector>().context("--adapter")?;
        }
        if let Some(text) = &self.memory_limit {
            options.memory_limit = Some(text.parse::<MemoryLimit>().context("--memory-limit")?);
        }
        Ok(options)
    }
}

#[derive(Subcommand)]
enum Command {
    /// The main job: the seed workload twice in one process, under two memory caps, memory shown.
    Demo(demo::DemoArgs),
    /// List every adapter wgpu finds, on every backend.
    Devices(devices::DevicesArgs),
    /// Open, fill, compute and close sessions in a loop, and check that memory comes back after each close.
    Memcheck(memcheck::MemcheckArgs),
    /// Train on .npy data: X [steps, batch, in], Y [steps, batch, out], W0 [in, out].
    Train(train::TrainArgs),
    /// Train a classifier on a dataset (X [N, features], Y [N] class ids or [N, classes]) and save it as
    /// safetensors.
    Fit(fit::FitArgs),
    /// Class probabilities (and ids) for inputs, from a model saved by fit.
    Predict(fit::PredictArgs),
    /// Run one operation on .npy files.
    #[command(subcommand)]
    Op(op::OpCommand),
    /// Measure against same-run baselines.
    Bench(bench::BenchArgs),
    /// Draw the series of a CSV file (x first, one column per series) as an SVG line chart.
    Plot(plot::PlotArgs),
    /// Time the kernel variants of the bench's and the seed workload's shapes on this adapter, cache the picks.
    Tune(tune::TuneArgs),
    /// One small job (open, kernel, read back, close); the child-process side of `bench`.
    #[command(hide = true)]
    Job,
}

/// Runs the command line `args` (the program's name first, as `std::env::args_os` gives it) and returns the
/// process's exit status: what the `wgcompute` binary does, and what the Python package's `wgcompute` console
/// script runs through its extension. `--help`, `--version` and a command line clap refuses print and exit the
/// process, as they do in the binary.
pub fn run_command<I, T>(args: I) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    // The CPU sgemm baseline uses as many threads as this machine has, unless told otherwise; it reads this
    // once, so it is set before anything else runs.
    if std::env::var_os("MATMUL_NUM_THREADS").is_none() {
        let threads = std::thread::available_parallelism().map_or(1, |count| count.get());
        std::env::set_var("MATMUL_NUM_THREADS", threads.to_string());
    }
    ignore_file_size_signal();
    let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
    let program = args.first().and_then(|first| invoked_program(first));
    let cli = Cli::parse_from(args);
    let outcome = match &cli.command {
        Command::Demo(args) => demo::run(&cli.global, args),
        Command::Devices(args) => devices::run(args),
        Command::Memcheck(args) => memcheck::run(&cli.global, args),
        Command::Bench(args) => bench::run(&cli.global, args, program.as_deref()),
        Command::Tune(args) => tune::run(&cli.global, args),
        Command::Plot(args) => plot::run(args),
        Command::Op(command) => op::run(&cli.global, command),
        Command::Train(args) => train::run(&cli.global, args),
        Command::Fit(args) => fit::fit(&cli.global, args),
        Command::Predict(args) => fit::predict(&cli.global, args),
        Command::Job => cli
            .global
            .session_options()
            .and_then(|options| Ok(wgcompute::bench::small_job(&options)?)),
    };
    match outcome {
        Ok(()) => 0,
        Err(error) => {
            eprintln!("wgcompute: {}", described(&error));
            1
        }
    }
}

/// An error and its causes on one line, as `{:#}` writes them, except that a cause whose text its context
/// already ends with is not written again: the library's output errors (`wgcompute::outputs::OutputError`) give
/// their message with the system's error at its end, and that error as their source as well, which would read
/// "No such file or directory (os error 2): No such file or directory (os error 2)".
fn described(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let part = cause.to_string();
        if !text.is_empty() && text.ends_with(&part) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&part);
    }
    text
}

/// A write past the file size limit (`ulimit -f`) then fails with EFBIG, which is reported and leaves no
/// temporary file behind, instead of killing the process with SIGXFSZ halfway through an output.
/// The file this command line was started as, when its first argument names one by a path: the console script
/// of the Python package runs the command inside Python, whose executable (`current_exe`) is not the command.
/// A bare name (found on PATH by the shell) gives None, and the running executable stands for it.
fn invoked_program(first: &std::ffi::OsStr) -> Option<std::path::PathBuf> {
    let path = std::path::Path::new(first);
    let named_by_path = path.components().count() > 1;
    (named_by_path && path.is_file()).then(|| path.to_path_buf())
}

fn ignore_file_size_signal() {
    #[cfg(unix)]
    {
        // SAFETY: setting a signal's disposition to SIG_IGN installs no handler, and signal(2) may be called
        // from any thread.
        unsafe {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        }
    }
}

/// Parses a byte count with an optional unit (4GiB, 512MiB, 1000, 0). Unlike a memory limit, a bare integer
/// of any size is bytes here: nothing else could be meant.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    if let Ok(bytes) = text.trim().parse::<u64>() {
        return Ok(bytes);
    }
    match text.parse::<MemoryLimit>() {
        Ok(MemoryLimit::Bytes(bytes)) => Ok(bytes),
        Ok(MemoryLimit::Fraction(_)) => {
            Err(format!("'{text}' is a fraction; give bytes such as 512MiB"))
        }
        Err(error) => Err(error.to_string()),
    }
}
