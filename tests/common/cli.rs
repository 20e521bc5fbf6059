//! Running the `wgcompute` binary in tests: a private scratch directory per test, .npy files in and out.

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

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

    pub fn run<S: AsRef<OsStr>>(&self, args: &[S]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_wgcompute"))
            .args(args)
            .env("WGCOMPUTE_ADAPTER", "vulkan")
            .env("XDG_RUNTIME_DIR", &self.xdg)
            .output()
            .expect("the binary runs")
    }

    /// Runs a command that must succeed quietly.
    pub fn ok<S: AsRef<OsStr>>(&self, args: &[S]) {
        let output = self.run(args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "{:?} failed: {stderr}",
            shown(args)
        );
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
