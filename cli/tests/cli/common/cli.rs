//! Running the `wgcompute` binary in tests: a private scratch directory per test, .npy files in and out.

use std::ffi::OsStr;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use npyz::WriterBuilder;

/// A private directory for one test's files (data/) and its XDG_RUNTIME_DIR (xdg/), removed on drop.
pub struct Scratch {
    root: PathBuf,
    pub data: PathBuf,
    pub xdg: PathBuf,
}

impl Scratch {
    pub fn new(test: &str) -> Self {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|elapsed| elapsed.as_nanos())
            .unwrap_or(0);
        let root = std::env::temp_dir().join(format!(
            "wgcompute-cli-{test}-{}-{nanos}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let data = root.join("data");
        let xdg = root.join("xdg");
        fs::create_dir_all(&data).expect("creating the scratch directory");
        fs::create_dir_all(&xdg).expect("creating the runtime directory");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(&xdg, fs::Permissions::from_mode(0o700))
                .expect("making the runtime directory private");
        }
        Self { root, data, xdg }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.data.join(name)
    }

    /// Writes a float32 .npy and returns its path.
    pub fn write(&self, name: &str, shape: &[usize], data: &[f32]) -> PathBuf {
        let path = self.path(name);
        write_npy(&path, shape, data, npyz::Order::C);
        path
    }

    /// Writes raw bytes (a crafted file) and returns the path.
    pub fn write_bytes(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let path = self.path(name);
        fs::write(&path, bytes).expect("writing a crafted file");
        path
    }

    /// Runs the binary, killing it and failing the test if it runs past `limit`. With `file_blocks`, runs it
    /// under `ulimit -f` (512-byte blocks with dash, 1024 with bash), so that writing a large file fails.
    pub fn run_within<S: AsRef<OsStr>>(
        &self,
        args: &[S],
        limit: Duration,
        file_blocks: Option<u64>,
    ) -> Output {
        let mut command = match file_blocks {
            Some(blocks) => {
                let mut command = Command::new("sh");
                command
                    .arg("-c")
                    .arg(format!("ulimit -f {blocks} && exec \"$0\" \"$@\""))
                    .arg(env!("CARGO_BIN_EXE_wgcompute"));
                command
            }
            None => Command::new(env!("CARGO_BIN_EXE_wgcompute")),
        };
        let mut child = command
            .args(args)
            .env("WGCOMPUTE_ADAPTER", "vulkan")
            .env("WGCOMPUTE_TUNING", "defaults")
            .env("XDG_RUNTIME_DIR", &self.xdg)
            .env("MESA_SHADER_CACHE_DISABLE", "true")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the binary starts");
        let drain = |pipe: Option<Box<dyn Read + Send>>| {
            std::thread::spawn(move || {
                let mut bytes = Vec::new();
                if let Some(mut pipe) = pipe {
                    let _ = pipe.read_to_end(&mut bytes);
                }
                bytes
            })
        };
        let stdout = drain(child.stdout.take().map(|pipe| Box::new(pipe) as _));
        let stderr = drain(child.stderr.take().map(|pipe| Box::new(pipe) as _));
        let start = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().expect("waiting for the binary") {
                break status;
            }
            if start.elapsed() > limit {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{:?} ran past {limit:?}", shown(args));
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        Output {
            status,
            stdout: stdout.join().expect("stdout"),
            stderr: stderr.join().expect("stderr"),
        }
    }

    /// Runs a command that must fail within `limit` with exit status 1 (not a signal: no abort), no panic, and
    /// exactly one error line, naming each of `names`; returns that line.
    pub fn fails_within<S: AsRef<OsStr>>(
        &self,
        args: &[S],
        limit: Duration,
        names: &[&str],
    ) -> String {
        self.fails_checked(self.run_within(args, limit, None), args, names)
    }

    /// As `fails_within`, for an output already obtained.
    pub fn fails_checked<S: AsRef<OsStr>>(
        &self,
        output: Output,
        args: &[S],
        names: &[&str],
    ) -> String {
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert_eq!(
            output.status.code(),
            Some(1),
            "{:?}: {:?}, {stderr}",
            shown(args),
            output.status
        );
        assert!(!stderr.contains("panicked"), "{:?}: {stderr}", shown(args));
        let errors: Vec<&str> = stderr
            .lines()
            .filter(|line| line.starts_with("wgcompute:"))
            .collect();
        assert_eq!(errors.len(), 1, "{:?}: {stderr}", shown(args));
        for name in names {
            assert!(
                errors[0].contains(name),
                "{:?}: the error does not name {name}: {stderr}",
                shown(args)
            );
        }
        errors[0].to_string()
    }

    pub fn run<S: AsRef<OsStr>>(&self, args: &[S]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_wgcompute"))
            .args(args)
            .env("WGCOMPUTE_ADAPTER", "vulkan")
            .env("WGCOMPUTE_TUNING", "defaults")
            .env("XDG_RUNTIME_DIR", &self.xdg)
            .output()
            .expect("the binary runs")
    }

    /// Starts a command as `run` would, without waiting for it: for a test that interrupts it.
    pub fn spawn<S: AsRef<OsStr>>(&self, args: &[S]) -> std::process::Child {
        Command::new(env!("CARGO_BIN_EXE_wgcompute"))
            .args(args)
            .env("WGCOMPUTE_ADAPTER", "vulkan")
            .env("WGCOMPUTE_TUNING", "defaults")
            .env("XDG_RUNTIME_DIR", &self.xdg)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("the binary starts")
    }

    /// Runs a command that must succeed; returns its output.
    pub fn succeeds<S: AsRef<OsStr>>(&self, args: &[S]) -> Output {
        succeeded(self.run(args), args)
    }

    /// As `succeeds`, failing the test if it runs past `limit`.
    pub fn succeeds_within<S: AsRef<OsStr>>(&self, args: &[S], limit: Duration) -> Output {
        succeeded(self.run_within(args, limit, None), args)
    }

    /// Runs a command that must succeed quietly.
    pub fn ok<S: AsRef<OsStr>>(&self, args: &[S]) {
        let output = self.succeeds(args);
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            stdout.lines().count() <= 1,
            "{:?}: more than a one-line summary on stdout: {stdout}",
            shown(args)
        );
    }

    /// Runs a command that must fail with a message naming each of `names`, and no panic.
    pub fn fails<S: AsRef<OsStr>>(&self, args: &[S], names: &[&str]) -> String {
        let output = self.run(args);
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(!output.status.success(), "{:?} succeeded", shown(args));
        assert!(!stderr.contains("panicked"), "{:?}: {stderr}", shown(args));
        for name in names {
            assert!(
                stderr.contains(name),
                "{:?}: the error does not name {name}: {stderr}",
                shown(args)
            );
        }
        stderr
    }

    /// The names of the files in data/, sorted.
    pub fn files(&self) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(&self.data)
            .expect("listing the scratch directory")
            .map(|entry| {
                entry
                    .expect("a directory entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        names.sort();
        names
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.root);
    }
}

/// Checks that the command `args` exited with success, naming it and its stderr where it did not; returns its
/// output.
pub fn succeeded<S: AsRef<OsStr>>(output: Output, args: &[S]) -> Output {
    assert!(
        output.status.success(),
        "{:?} failed: {}",
        shown(args),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Makes a FIFO at `path`.
pub fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("mkfifo runs");
    assert!(status.success(), "mkfifo {} failed", path.display());
}

/// A version 1.0 .npy with exactly this header text, then `data`.
pub fn npy_bytes(header: &str, data: &[u8]) -> Vec<u8> {
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    let length = u16::try_from(header.len()).expect("a header under 64 KiB");
    bytes.extend_from_slice(&length.to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(data);
    bytes
}

/// The header NumPy writes, with `descr` and `shape` as Python source: `'<f4'`, `(2, 3)`.
pub fn npy_header(descr: &str, shape: &str) -> String {
    format!("{{'descr': {descr}, 'fortran_order': False, 'shape': {shape}, }}\n")
}

pub fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values
        .iter()
        .flat_map(|value| value.to_le_bytes())
        .collect()
}

pub fn shown<S: AsRef<OsStr>>(args: &[S]) -> Vec<String> {
    args.iter()
        .map(|arg| arg.as_ref().to_string_lossy().into_owned())
        .collect()
}

pub fn write_npy<T: npyz::AutoSerialize + Copy>(
    path: &Path,
    shape: &[usize],
    data: &[T],
    order: npyz::Order,
) {
    let shape: Vec<u64> = shape.iter().map(|&dim| dim as u64).collect();
    let file = fs::File::create(path).expect("creating an input file");
    let mut writer = npyz::WriteOptions::<T>::new()
        .default_dtype()
        .shape(&shape)
        .order(order)
        .writer(std::io::BufWriter::new(file))
        .begin_nd()
        .expect("starting an input file");
    writer.extend(data.iter().copied()).expect("writing data");
    writer.finish().expect("finishing an input file");
}

/// Reads an output file, checking its dtype is `descr` and its order C; returns its shape and data.
pub fn read_npy<T: npyz::Deserialize>(path: &Path, descr: &str) -> (Vec<usize>, Vec<T>) {
    let bytes = fs::read(path).unwrap_or_else(|error| panic!("reading {path:?}: {error}"));
    let file = npyz::NpyFile::new(&bytes[..]).expect("an output is a .npy file");
    assert_eq!(
        file.dtype().descr(),
        format!("'{descr}'"),
        "dtype of {path:?}"
    );
    assert_eq!(file.order(), npyz::Order::C, "order of {path:?}");
    let shape = file.shape().iter().map(|&dim| dim as usize).collect();
    (shape, file.into_vec().expect("the data of an output"))
}

pub fn read_f32(path: &Path) -> (Vec<usize>, Vec<f32>) {
    read_npy(path, "<f4")
}
