//! The files a command writes. They are checked before any work starts (each one's directory exists, none is a
//! directory, no two name the same file), and written at the end all or none: every output goes to a temporary
//! file beside its target, and only when all of them are complete are they renamed over their targets. A failure
//! before that leaves every target as it was and removes the temporaries. A checkpoint that a long command
//! rewrites as it goes (`write_one`) is whole each time, through the same temporary and rename.

use std::fs;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use tempfile::NamedTempFile;

use crate::npy;

/// One result, waiting to be written.
pub enum Contents {
    F32(Vec<usize>, Vec<f32>),
    I64(Vec<usize>, Vec<i64>),
    /// A file in another format, already encoded (a safetensors checkpoint).
    Bytes(Vec<u8>),
}

impl Contents {
    fn write(&self, writer: &mut impl Write) -> std::io::Result<()> {
        match self {
            Contents::F32(shape, data) => npy::write(writer, shape, data),
            Contents::I64(shape, data) => npy::write(writer, shape, data),
            Contents::Bytes(bytes) => writer.write_all(bytes),
        }
    }
}

struct Target {
    /// The option that named it, for errors: "-o", "--losses".
    option: String,
    /// As given, for messages.
    given: PathBuf,
    /// Where it is written: symbolic links followed, the directory made absolute.
    resolved: PathBuf,
}

impl Target {
    fn named(&self) -> String {
        format!("{} {}", self.option, self.given.display())
    }
}

/// A command's outputs, checked and waiting for their contents.
pub struct Outputs {
    targets: Vec<Target>,
}

impl Outputs {
    /// Checks each (option, path) a command will write, before the command does any work.
    pub fn plan(outputs: &[(String, &Path)]) -> Result<Outputs> {
        let mut targets: Vec<Target> = Vec::with_capacity(outputs.len());
        for (option, path) in outputs {
            let target = Target {
                option: option.clone(),
                given: path.to_path_buf(),
                resolved: resolve(option, path)?,
            };
            if let Some(earlier) = targets
                .iter()
                .find(|earlier| earlier.resolved == target.resolved)
            {
                bail!(
                    "{} and {} name the same file; each output needs its own",
                    earlier.named(),
                    target.named()
                );
            }
            targets.push(target);
        }
        Ok(Outputs { targets })
    }

    /// Writes `contents` (one per planned output, in order): all to temporaries first, then each renamed over its
    /// target.
    pub fn write(self, contents: &[Contents]) -> Result<()> {
        if contents.len() != self.targets.len() {
            bail!(
                "{} results for {} output files",
                contents.len(),
                self.targets.len()
            );
        }
        // Dropping a NamedTempFile removes it: any error from here on leaves no temporary behind.
        let staged = self
            .targets
            .iter()
            .zip(contents)
            .map(|(target, contents)| stage(target, contents))
            .collect::<Result<Vec<_>>>()?;
        // A target may have changed while the command ran; a directory in the way would fail the rename.
        for target in &self.targets {
            if target.resolved.is_dir() {
                bail!("cannot write {}: it is a directory", target.named());
            }
        }
        let mut written: Vec<String> = Vec::new();
        for (target, temporary) in self.targets.iter().zip(staged) {
            temporary.persist(&target.resolved).map_err(|error| {
                let done = if written.is_empty() {
                    String::new()
                } else {
                    format!(" ({} already written)", written.join(", "))
                };
                anyhow!("cannot write {}: {}{done}", target.named(), error.error)
            })?;
            written.push(target.given.display().to_string());
        }
        Ok(())
    }
}

impl Outputs {
    /// Writes the output planned at `index` now, whole or not at all (a temporary renamed over it): a
    /// checkpoint a long command rewrites as it goes.
    pub fn write_one(&self, index: usize, contents: &Contents) -> Result<()> {
        let target = self
            .targets
            .get(index)
            .with_context(|| format!("no output planned at {index}"))?;
        let temporary = stage(target, contents)?;
        temporary
            .persist(&target.resolved)
            .map_err(|error| anyhow!("cannot write {}: {}", target.named(), error.error))?;
        Ok(())
    }
}

/// Where `path` is written: an existing file (or link to one) by its canonical path, a new one as its canonical
/// directory joined with its name.
fn resolve(option: &str, path: &Path) -> Result<PathBuf> {
    let named = format!("{option} {}", path.display());
    match fs::symlink_metadata(path) {
        Ok(_) => {
            let resolved =
                fs::canonicalize(path).with_context(|| format!("cannot write {named}"))?;
            let metadata =
                fs::metadata(&resolved).with_context(|| format!("cannot write {named}"))?;
            if metadata.is_dir() {
                bail!("cannot write {named}: it is a directory");
            }
            if metadata.permissions().readonly() {
                bail!("cannot write {named}: it is read-only");
            }
            Ok(resolved)
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            let file_name = path
                .file_name()
                .with_context(|| format!("cannot write {named}: it does not name a file"))?;
            let parent = match path.parent() {
                Some(parent) if !parent.as_os_str().is_empty() => parent,
                _ => Path::new("."),
            };
            let directory = fs::canonicalize(parent).with_context(|| {
                format!("cannot write {named}: no directory {}", parent.display())
            })?;
            if !directory.is_dir() {
                bail!(
                    "cannot write {named}: {} is not a directory",
                    parent.display()
                );
            }
            Ok(directory.join(file_name))
        }
        Err(error) => Err(error).with_context(|| format!("cannot write {named}")),
    }
}

/// Writes `contents` to a new temporary file beside `target`, flushed to disk.
fn stage(target: &Target, contents: &Contents) -> Result<NamedTempFile> {
    let named = target.named();
    let directory = target
        .resolved
        .parent()
        .with_context(|| format!("cannot write {named}: it has no directory"))?;
    let file_name = target
        .resolved
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let prefix = format!(".{file_name}.");
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix).suffix(".tmp");
    #[cfg(unix)]
    {
        // The mode a plain create would give (the umask applies), or the mode of the file being replaced.
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(&target.resolved)
            .map(|metadata| metadata.permissions().mode() & 0o777)
            .unwrap_or(0o666);
        builder.permissions(fs::Permissions::from_mode(mode));
    }
    let mut temporary = builder.tempfile_in(directory).with_context(|| {
        format!(
            "cannot write {named}: cannot create a temporary file in {}",
            directory.display()
        )
    })?;
    let mut writer = BufWriter::new(temporary.as_file_mut());
    contents
        .write(&mut writer)
        .and_then(|()| writer.flush())
        .with_context(|| format!("cannot write {named}"))?;
    drop(writer);
    temporary
        .as_file()
        .sync_all()
        .with_context(|| format!("cannot write {named}"))?;
    Ok(temporary)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing(directory: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(directory)
            .expect("listing")
            .map(|entry| {
                entry
                    .expect("entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        names.sort();
        names
    }

    fn small() -> Contents {
        Contents::F32(vec![2], vec![1.0, 2.0])
    }

    #[test]
    fn all_outputs_or_none() {
        let directory = tempfile::tempdir().expect("a scratch directory");
        let (first, second) = (
            directory.path().join("a.npy"),
            directory.path().join("b.npy"),
        );
        fs::write(&first, b"old contents").expect("an old file");
        let outputs =
            Outputs::plan(&[("-o".into(), &first), ("--grad-out".into(), &second)]).expect("plan");
        // Something gets in the way of the second output after the plan was made.
        fs::create_dir(&second).expect("a directory in the way");
        let message = format!(
            "{:#}",
            outputs.write(&[small(), small()]).expect_err("blocked")
        );
        assert!(
            message.contains("b.npy") && message.contains("directory"),
            "{message}"
        );
        assert_eq!(fs::read(&first).expect("the old file"), b"old contents");
        assert_eq!(
            listing(directory.path()),
            ["a.npy", "b.npy"],
            "no temporary left"
        );

        fs::remove_dir(&second).expect("clearing the way");
        Outputs::plan(&[("-o".into(), &first), ("--grad-out".into(), &second)])
            .expect("plan")
            .write(&[small(), Contents::I64(vec![], vec![7])])
            .expect("writes");
        assert_eq!(listing(directory.path()), ["a.npy", "b.npy"]);
        let (shape, values) = npy::parse(
            &mut fs::File::open(&second).expect("b.npy"),
            None,
            "b.npy",
            npy::Want::Integer,
        )
        .expect("b.npy reads back");
        assert_eq!(shape, Vec::<usize>::new());
        assert_eq!(values, npy::Values::I64(vec![7]));
    }

    #[test]
    fn a_failed_temporary_leaves_no_trace() {
        let directory = tempfile::tempdir().expect("a scratch directory");
        let first = directory.path().join("a.npy");
        let second = directory.path().join("sub").join("b.npy");
        fs::write(&first, b"old contents").expect("an old file");
        fs::create_dir(directory.path().join("sub")).expect("sub");
        let outputs =
            Outputs::plan(&[("-o".into(), &first), ("--m-out".into(), &second)]).expect("plan");
        // The second directory goes away: its temporary cannot be made, after the first one was.
        fs::remove_dir(directory.path().join("sub")).expect("removing sub");
        let message = format!(
            "{:#}",
            outputs.write(&[small(), small()]).expect_err("no sub")
        );
        assert!(message.contains("--m-out"), "{message}");
        assert_eq!(fs::read(&first).expect("the old file"), b"old contents");
        assert_eq!(listing(directory.path()), ["a.npy"], "no temporary left");
    }

    #[test]
    fn bad_targets_are_refused_before_work() {
        let directory = tempfile::tempdir().expect("a scratch directory");
        let file = directory.path().join("file.npy");
        fs::write(&file, b"x").expect("a file");
        let same = directory.path().join("sub").join("..").join("file.npy");
        fs::create_dir(directory.path().join("sub")).expect("sub");
        let new = directory.path().join("new.npy");
        let new_again = directory.path().join(".").join("new.npy");
        let refused = |outputs: &[(String, &Path)], names: &[&str]| {
            let message = match Outputs::plan(outputs) {
                Ok(_) => panic!("{names:?}: planned"),
                Err(error) => format!("{error:#}"),
            };
            for name in names {
                assert!(message.contains(name), "{message} lacks {name}");
            }
        };
        refused(
            &[("--save".into(), &file), ("--losses".into(), &same)],
            &["--save", "--losses", "same file"],
        );
        refused(
            &[("-o".into(), &new), ("--grad-out".into(), &new_again)],
            &["-o", "--grad-out", "same file"],
        );
        refused(
            &[("-o".into(), directory.path())],
            &["-o", "is a directory"],
        );
        refused(
            &[("-o".into(), &file.join("x.npy"))],
            &["-o", "file.npy/x.npy"],
        );
        refused(
            &[("-o".into(), &directory.path().join("missing").join("x.npy"))],
            &["no directory", "missing"],
        );
        assert_eq!(listing(directory.path()), ["file.npy", "sub"]);
    }

    #[cfg(unix)]
    #[test]
    fn links_are_followed_and_modes_kept() {
        use std::os::unix::fs::{symlink, PermissionsExt};
        let directory = tempfile::tempdir().expect("a scratch directory");
        let real = directory.path().join("real.npy");
        let link = directory.path().join("link.npy");
        fs::write(&real, b"old").expect("real");
        fs::set_permissions(&real, fs::Permissions::from_mode(0o640)).expect("chmod");
        symlink(&real, &link).expect("a link");
        let message = format!(
            "{:#}",
            Outputs::plan(&[("-o".into(), &link), ("--v-out".into(), &real)])
                .err()
                .expect("the same file")
        );
        assert!(message.contains("same file"), "{message}");
        Outputs::plan(&[("-o".into(), &link)])
            .expect("plan")
            .write(&[small()])
            .expect("writes");
        assert!(fs::symlink_metadata(&link)
            .expect("link")
            .file_type()
            .is_symlink());
        assert!(fs::read(&real).expect("real").starts_with(b"\x93NUMPY"));
        assert_eq!(
            fs::metadata(&real).expect("real").permissions().mode() & 0o777,
            0o640
        );
    }
}
