//! The one set of rules for every file wgcompute writes — a command's outputs, a saved checkpoint, the tuning
//! cache. Each target is checked before any work starts (its directory exists, it is a regular file or not
//! there yet, no two name the same file, none is one of the writer's inputs), and written whole or not at all:
//! every output goes to a temporary file beside its target, and only when all of them are complete are they
//! renamed over their targets. A failure before that leaves every target as it was and removes the
//! temporaries. A file rewritten as a long job goes (`write_one`) is whole each time, through the same
//! temporary and rename.
//!
//! Files are compared by what they are, not by how their paths are spelled: a symbolic link, a `..` or a hard
//! link to an input is that input, and a link is followed to the regular file it names, which is what is
//! replaced. A device, FIFO or socket is refused and left as it was, since the rename would put a file where
//! the device was (as root, saving to `/dev/null` would replace the system's).

use std::fmt;
use std::fs;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use tempfile::NamedTempFile;

use crate::files::kind_of;

/// Why an output was refused or could not be written; the message names the output as its writer was told it.
#[derive(Debug)]
pub struct OutputError {
    message: String,
    source: Option<std::io::Error>,
}

impl fmt::Display for OutputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for OutputError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_ref()
            .map(|error| error as &(dyn std::error::Error + 'static))
    }
}

impl OutputError {
    fn refused(message: String) -> Self {
        OutputError {
            message,
            source: None,
        }
    }

    fn io(message: String, source: std::io::Error) -> Self {
        OutputError {
            message: format!("{message}: {source}"),
            source: Some(source),
        }
    }

    /// The message, and the `std::io::Error` behind it where the system refused (none where these rules did).
    pub fn into_parts(self) -> (String, Option<std::io::Error>) {
        (self.message, self.source)
    }
}

type Result<T> = std::result::Result<T, OutputError>;

/// What an output holds, written to it when every output is ready.
pub trait Encode {
    fn encode(&self, writer: &mut dyn Write) -> std::io::Result<()>;
}

impl Encode for [u8] {
    fn encode(&self, writer: &mut dyn Write) -> std::io::Result<()> {
        writer.write_all(self)
    }
}

impl<T: Encode + ?Sized> Encode for &T {
    fn encode(&self, writer: &mut dyn Write) -> std::io::Result<()> {
        (**self).encode(writer)
    }
}

impl Encode for Vec<u8> {
    fn encode(&self, writer: &mut dyn Write) -> std::io::Result<()> {
        writer.write_all(self)
    }
}

/// Writes `bytes` to `path` under the rules above, as the only output of its writer: a regular file (a link
/// to one is followed) or a new name in an existing directory, replaced whole.
pub fn write_whole(path: &Path, bytes: &[u8]) -> Result<()> {
    Outputs::plan(&[(String::new(), path)], &[])?.write(&[bytes])
}

struct Target {
    /// The option that named it, for errors: "-o", "--losses".
    option: String,
    /// As given, for messages.
    given: PathBuf,
    /// Where it is written: symbolic links followed, the directory made absolute.
    resolved: PathBuf,
    /// The file it names today, if it exists.
    identity: Option<FileIdentity>,
}

/// What a file is, whatever path reaches it: its device and inode where the platform has them.
#[derive(Clone, Debug, PartialEq, Eq)]
enum FileIdentity {
    #[cfg(unix)]
    Inode { device: u64, inode: u64 },
    #[cfg(not(unix))]
    Canonical(PathBuf),
}

impl FileIdentity {
    /// The identity of the file at `path` (links followed), or None if there is none.
    fn of(path: &Path) -> Option<FileIdentity> {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let metadata = fs::metadata(path).ok()?;
            Some(FileIdentity::Inode {
                device: metadata.dev(),
                inode: metadata.ino(),
            })
        }
        #[cfg(not(unix))]
        {
            fs::canonicalize(path).ok().map(FileIdentity::Canonical)
        }
    }
}

/// Whether `a` and `b` name one existing file, by what it is rather than how its paths are spelled.
pub fn same_file(a: &Path, b: &Path) -> bool {
    match (FileIdentity::of(a), FileIdentity::of(b)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

/// A file the command reads or writes other than through its outputs (an input, or what its standard streams
/// are connected to), which no output may name.
struct Input {
    /// For errors: "the input --inputs x.npy", "standard output".
    described: String,
    identity: FileIdentity,
}

/// What the standard streams are connected to: `-o /dev/stdout` resolves to the file stdout is redirected to,
/// and renaming over it would replace that file.
fn standard_streams() -> Vec<Input> {
    #[cfg(unix)]
    {
        use std::os::fd::AsFd;
        use std::os::unix::fs::MetadataExt;
        let identity = |stream: std::os::fd::BorrowedFd<'_>| -> Option<FileIdentity> {
            let metadata = fs::File::from(stream.try_clone_to_owned().ok()?)
                .metadata()
                .ok()?;
            Some(FileIdentity::Inode {
                device: metadata.dev(),
                inode: metadata.ino(),
            })
        };
        [
            ("standard input", identity(std::io::stdin().as_fd())),
            ("standard output", identity(std::io::stdout().as_fd())),
            ("standard error", identity(std::io::stderr().as_fd())),
        ]
        .into_iter()
        .filter_map(|(described, identity)| {
            Some(Input {
                described: described.to_string(),
                identity: identity?,
            })
        })
        .collect()
    }
    #[cfg(not(unix))]
    {
        Vec::new()
    }
}

impl Target {
    fn named(&self) -> String {
        described(&self.option, &self.given)
    }
}

/// A command's outputs, checked and waiting for their contents.
pub struct Outputs {
    targets: Vec<Target>,
    inputs: Vec<Input>,
}

impl Outputs {
    /// Checks each (option, path) a command will write against each other and against the (option, path) of
    /// every file it reads, before the command does any work. An input that does not exist is left for its
    /// reader to report.
    pub fn plan(outputs: &[(String, &Path)], inputs: &[(String, &Path)]) -> Result<Outputs> {
        let mut inputs: Vec<Input> = inputs
            .iter()
            .filter_map(|(option, path)| {
                Some(Input {
                    described: format!("the input {option} {}", path.display()),
                    identity: FileIdentity::of(path)?,
                })
            })
            .collect();
        inputs.extend(standard_streams());
        let mut targets: Vec<Target> = Vec::with_capacity(outputs.len());
        for (option, path) in outputs {
            let resolved = resolve(option, path)?;
            let target = Target {
                option: option.clone(),
                given: path.to_path_buf(),
                identity: FileIdentity::of(&resolved),
                resolved,
            };
            if let Some(earlier) = targets.iter().find(|earlier| {
                earlier.resolved == target.resolved
                    || (earlier.identity.is_some() && earlier.identity == target.identity)
            }) {
                return Err(OutputError::refused(format!(
                    "{} and {} name the same file; each output needs its own",
                    earlier.named(),
                    target.named()
                )));
            }
            check_not_an_input(&target, target.identity.as_ref(), &inputs)?;
            targets.push(target);
        }
        Ok(Outputs { targets, inputs })
    }

    /// The checks of `plan` again, on the targets as they are now: any of them may have been replaced while
    /// the command ran.
    fn recheck(&self, target: &Target) -> Result<()> {
        match fs::metadata(&target.resolved) {
            Ok(metadata) => {
                expect_regular(&target.named(), &metadata)?;
                check_not_an_input(
                    target,
                    FileIdentity::of(&target.resolved).as_ref(),
                    &self.inputs,
                )
            }
            Err(_) => Ok(()),
        }
    }

    /// Writes `contents` (one per planned output, in order): all to temporaries first, then each renamed over its
    /// target.
    pub fn write<E: Encode>(self, contents: &[E]) -> Result<()> {
        if contents.len() != self.targets.len() {
            return Err(OutputError::refused(format!(
                "{} results for {} output files",
                contents.len(),
                self.targets.len()
            )));
        }
        // Dropping a NamedTempFile removes it: any error from here on leaves no temporary behind.
        let staged = self
            .targets
            .iter()
            .zip(contents)
            .map(|(target, contents)| stage(target, contents))
            .collect::<Result<Vec<_>>>()?;
        for target in &self.targets {
            self.recheck(target)?;
        }
        let mut written: Vec<String> = Vec::new();
        for (target, temporary) in self.targets.iter().zip(staged) {
            temporary.persist(&target.resolved).map_err(|error| {
                let done = if written.is_empty() {
                    String::new()
                } else {
                    format!(" ({} already written)", written.join(", "))
                };
                OutputError::io(
                    format!("cannot write {}{done}", target.named()),
                    error.error,
                )
            })?;
            written.push(target.given.display().to_string());
        }
        Ok(())
    }
}

impl Outputs {
    /// Writes the output planned at `index` now, whole or not at all (a temporary renamed over it): a
    /// checkpoint a long command rewrites as it goes.
    pub fn write_one(&self, index: usize, contents: &impl Encode) -> Result<()> {
        let target = self
            .targets
            .get(index)
            .ok_or_else(|| OutputError::refused(format!("no output planned at {index}")))?;
        let temporary = stage(target, contents)?;
        self.recheck(target)?;
        temporary.persist(&target.resolved).map_err(|error| {
            OutputError::io(format!("cannot write {}", target.named()), error.error)
        })?;
        Ok(())
    }
}

/// An output as its writer was told it: the option that named it and the path ("-o out.npy"), or the path
/// alone for a writer that has no options (a save).
fn described(option: &str, path: &Path) -> String {
    if option.is_empty() {
        path.display().to_string()
    } else {
        format!("{option} {}", path.display())
    }
}

/// Where `path` is written: an existing file (or link to one) by its canonical path, a new one as its canonical
/// directory joined with its name.
fn resolve(option: &str, path: &Path) -> Result<PathBuf> {
    let named = described(option, path);
    match fs::symlink_metadata(path) {
        Ok(_) => {
            let resolved = fs::canonicalize(path)
                .map_err(|error| OutputError::io(format!("cannot write {named}"), error))?;
            let metadata = fs::metadata(&resolved)
                .map_err(|error| OutputError::io(format!("cannot write {named}"), error))?;
            expect_regular(&named, &metadata)?;
            if metadata.permissions().readonly() {
                return Err(OutputError::refused(format!(
                    "cannot write {named}: it is read-only"
                )));
            }
            Ok(resolved)
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            let file_name = path.file_name().ok_or_else(|| {
                OutputError::refused(format!("cannot write {named}: it does not name a file"))
            })?;
            let parent = match path.parent() {
                Some(parent) if !parent.as_os_str().is_empty() => parent,
                _ => Path::new("."),
            };
            let directory = fs::canonicalize(parent).map_err(|error| {
                OutputError::io(
                    format!("cannot write {named}: no directory {}", parent.display()),
                    error,
                )
            })?;
            if !directory.is_dir() {
                return Err(OutputError::refused(format!(
                    "cannot write {named}: {} is not a directory",
                    parent.display()
                )));
            }
            Ok(directory.join(file_name))
        }
        Err(error) => Err(OutputError::io(format!("cannot write {named}"), error)),
    }
}

/// Refuses anything but a regular file: a rename over a device, FIFO or socket would replace it.
fn expect_regular(named: &str, metadata: &fs::Metadata) -> Result<()> {
    if metadata.is_file() {
        return Ok(());
    }
    if metadata.is_dir() {
        return Err(OutputError::refused(format!(
            "cannot write {named}: it is a directory"
        )));
    }
    let kind = kind_of(&metadata.file_type());
    Err(OutputError::refused(format!(
        "cannot write {named}: it is {kind}, which is left as it is; outputs are regular files (written \
         whole, then renamed into place), so name a file"
    )))
}

/// Refuses a target that is one of the command's inputs.
fn check_not_an_input(
    target: &Target,
    identity: Option<&FileIdentity>,
    inputs: &[Input],
) -> Result<()> {
    let Some(identity) = identity else {
        return Ok(());
    };
    if let Some(input) = inputs.iter().find(|input| &input.identity == identity) {
        return Err(OutputError::refused(format!(
            "{} names the same file as {}; writing it would destroy that, so give the output another name",
            target.named(),
            input.described
        )));
    }
    Ok(())
}

/// Writes `contents` to a new temporary file beside `target`, flushed to disk.
fn stage(target: &Target, contents: &dyn Encode) -> Result<NamedTempFile> {
    let named = target.named();
    let directory = target.resolved.parent().ok_or_else(|| {
        OutputError::refused(format!("cannot write {named}: it has no directory"))
    })?;
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
    let mut temporary = builder.tempfile_in(directory).map_err(|error| {
        OutputError::io(
            format!(
                "cannot write {named}: cannot create a temporary file in {}",
                directory.display()
            ),
            error,
        )
    })?;
    let mut writer = BufWriter::new(temporary.as_file_mut());
    contents
        .encode(&mut writer)
        .and_then(|()| writer.flush())
        .map_err(|error| OutputError::io(format!("cannot write {named}"), error))?;
    drop(writer);
    temporary
        .as_file()
        .sync_all()
        .map_err(|error| OutputError::io(format!("cannot write {named}"), error))?;
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

    fn small() -> Vec<u8> {
        b"new contents".to_vec()
    }

    #[test]
    fn all_outputs_or_none() {
        let directory = tempfile::tempdir().expect("a scratch directory");
        let (first, second) = (
            directory.path().join("a.npy"),
            directory.path().join("b.npy"),
        );
        fs::write(&first, b"old contents").expect("an old file");
        let outputs = Outputs::plan(
            &[("-o".into(), &first), ("--grad-out".into(), &second)],
            &[],
        )
        .expect("plan");
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
        Outputs::plan(
            &[("-o".into(), &first), ("--grad-out".into(), &second)],
            &[],
        )
        .expect("plan")
        .write(&[small(), b"seven".to_vec()])
        .expect("writes");
        assert_eq!(listing(directory.path()), ["a.npy", "b.npy"]);
        assert_eq!(fs::read(&first).expect("a.npy"), small());
        assert_eq!(fs::read(&second).expect("b.npy"), b"seven");
    }

    #[test]
    fn a_failed_temporary_leaves_no_trace() {
        let directory = tempfile::tempdir().expect("a scratch directory");
        let first = directory.path().join("a.npy");
        let second = directory.path().join("sub").join("b.npy");
        fs::write(&first, b"old contents").expect("an old file");
        fs::create_dir(directory.path().join("sub")).expect("sub");
        let outputs = Outputs::plan(&[("-o".into(), &first), ("--m-out".into(), &second)], &[])
            .expect("plan");
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
            let message = match Outputs::plan(outputs, &[]) {
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
            Outputs::plan(&[("-o".into(), &link), ("--v-out".into(), &real)], &[])
                .err()
                .expect("the same file")
        );
        assert!(message.contains("same file"), "{message}");
        Outputs::plan(&[("-o".into(), &link)], &[])
            .expect("plan")
            .write(&[small()])
            .expect("writes");
        assert!(fs::symlink_metadata(&link)
            .expect("link")
            .file_type()
            .is_symlink());
        assert_eq!(fs::read(&real).expect("real"), small());
        assert_eq!(
            fs::metadata(&real).expect("real").permissions().mode() & 0o777,
            0o640
        );
    }

    #[cfg(unix)]
    #[test]
    fn inputs_devices_and_fifos_are_never_targets() {
        use std::os::unix::fs::symlink;
        let directory = tempfile::tempdir().expect("a scratch directory");
        let input = directory.path().join("x.npy");
        fs::write(&input, b"precious").expect("an input");
        let hard = directory.path().join("hard.npy");
        fs::hard_link(&input, &hard).expect("a hard link");
        let soft = directory.path().join("soft.npy");
        symlink(&input, &soft).expect("a symbolic link");
        let fifo = directory.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo runs");
        assert!(made.success(), "mkfifo failed");
        let to_null = directory.path().join("null.npy");
        symlink("/dev/null", &to_null).expect("a link to /dev/null");
        let inputs = [("--inputs".to_string(), input.as_path())];
        for (output, words) in [
            (&input, &["--inputs", "same file"][..]),
            (&hard, &["--inputs", "same file"]),
            (&soft, &["--inputs", "same file"]),
            (&fifo, &["FIFO"]),
            (&to_null, &["character device"]),
            (&PathBuf::from("/dev/null"), &["character device"]),
        ] {
            let message = match Outputs::plan(&[("-o".into(), output)], &inputs) {
                Ok(_) => panic!("{} was planned", output.display()),
                Err(error) => format!("{error:#}"),
            };
            for word in words {
                assert!(message.contains(word), "{message} lacks {word}");
            }
        }
        let other = directory.path().join("other.npy");
        let message = format!(
            "{:#}",
            Outputs::plan(&[("-o".into(), &input), ("--classes".into(), &hard)], &[])
                .err()
                .expect("two names of one file")
        );
        assert!(message.contains("same file"), "{message}");
        Outputs::plan(&[("-o".into(), &other)], &inputs)
            .expect("plan")
            .write(&[small()])
            .expect("writes");
        assert_eq!(fs::read(&input).expect("the input"), b"precious");
    }
}
