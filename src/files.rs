//! Reading a file a user names as untrusted input (a checkpoint, the tuning cache): regular files only, opened
//! without blocking, and never more of it read than the caller bounds. Writing is `outputs`' job.
//!
//! Whatever sits at the path may be swapped between any two looks at it, so the file as opened is what is
//! judged: it is opened so that a FIFO cannot make the open wait, and then its own status (fstat) decides.

use std::fs::File;
use std::io::Read as _;
use std::path::Path;

/// Why a path was not read as a regular file.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// Something other than a regular file is there; `kind` says what, such as "a FIFO".
    NotRegular { kind: &'static str },
    /// It could not be looked at, opened or read.
    Io(std::io::Error),
}

impl From<std::io::Error> for Refusal {
    fn from(error: std::io::Error) -> Self {
        Refusal::Io(error)
    }
}

/// A regular file opened for reading, with its size when it was opened.
pub(crate) struct RegularFile {
    file: File,
    size: u64,
}

impl RegularFile {
    /// Opens the regular file at `path` (a link to one is followed) without waiting on anything.
    pub(crate) fn open(path: &Path) -> Result<Self, Refusal> {
        // Looked at before opening, so that what is plainly not a file is never opened: opening a device can
        // act on it (a watchdog starts, a tape rewinds, a serial line's modem lines change).
        let looked_at = std::fs::metadata(path)?;
        if !looked_at.is_file() {
            return Err(Refusal::NotRegular {
                kind: kind_of(&looked_at.file_type()),
            });
        }
        Self::judge_opened(open_without_blocking(path)?)
    }

    /// The file as opened decides: the path may have been replaced since it was looked at.
    fn judge_opened(file: File) -> Result<Self, Refusal> {
        let opened = file.metadata()?;
        if !opened.is_file() {
            return Err(Refusal::NotRegular {
                kind: kind_of(&opened.file_type()),
            });
        }
        Ok(Self {
            file,
            size: opened.len(),
        })
    }

    /// The file's size when it was opened; a writer may still change it, so a reader checks what it gets.
    pub(crate) fn size(&self) -> u64 {
        self.size
    }

    /// Appends exactly `count` bytes from `offset` to `into`; a file that ends sooner is an `UnexpectedEof`
    /// error (it was cut after it was opened).
    pub(crate) fn read_exactly_at(
        &mut self,
        offset: u64,
        count: u64,
        into: &mut Vec<u8>,
    ) -> std::io::Result<()> {
        use std::io::Seek as _;
        self.file.seek(std::io::SeekFrom::Start(offset))?;
        let read = (&mut self.file).take(count).read_to_end(into)?;
        if read as u64 != count {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("{read} of {count} bytes were there"),
            ));
        }
        Ok(())
    }

    /// Appends at most `limit` bytes to `into` (fewer at the end of the file) and returns how many it read.
    pub(crate) fn read_at_most(&mut self, limit: u64, into: &mut Vec<u8>) -> std::io::Result<u64> {
        let read = (&mut self.file).take(limit).read_to_end(into)?;
        Ok(read as u64)
    }
}

/// O_NONBLOCK, because opening a FIFO for reading otherwise waits for a writer; it changes nothing for reading
/// a regular file, the only kind read. O_NOCTTY, so that a terminal swapped in does not become the process's
/// controlling terminal on being opened.
#[cfg(unix)]
fn open_without_blocking(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
}

/// Elsewhere a plain open: no FIFO can be opened through a file path there.
#[cfg(not(unix))]
fn open_without_blocking(path: &Path) -> std::io::Result<File> {
    File::open(path)
}

/// What a file that is not a regular one is, for a message ("is a FIFO, not a regular file"): public, so that
/// whatever refuses such a file (the command's outputs, a binding) says it in the same words.
#[cfg(unix)]
pub fn kind_of(kind: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_dir() {
        "a folder"
    } else {
        "something other than a file"
    }
}

#[cfg(not(unix))]
pub fn kind_of(kind: &std::fs::FileType) -> &'static str {
    if kind.is_dir() {
        "a folder"
    } else {
        "something other than a file"
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::time::Duration;

    fn scratch(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!(
            "wgcompute-files-{name}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ))
    }

    /// Runs `work` on a thread; fails the test if it has not finished within a few seconds, so a blocking
    /// open fails the test rather than hanging it. Gives back the thread, still blocked, on failure.
    #[cfg(unix)]
    fn within_seconds<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Option<T> {
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = sender.send(work());
        });
        receiver.recv_timeout(Duration::from_secs(5)).ok()
    }

    /// A FIFO at `path` (replacing what is there), for the tests of every reader of untrusted files.
    #[cfg(unix)]
    pub(crate) fn make_fifo(path: &Path) {
        let _ = std::fs::remove_file(path);
        let status = std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .expect("mkfifo runs");
        assert!(status.success(), "mkfifo {path:?}");
    }

    /// A FIFO swapped in after the path was looked at and found a regular file: the open must return at once
    /// (a plain open waits for a writer that never comes), and the opened file is refused as a FIFO.
    #[cfg(unix)]
    #[test]
    fn a_fifo_swapped_in_before_the_open_does_not_block_and_is_refused() {
        let fifo = scratch("swapped-fifo");
        make_fifo(&fifo);
        let opened_at = fifo.clone();
        let outcome = within_seconds(move || {
            let file = open_without_blocking(&opened_at).map_err(Refusal::Io)?;
            RegularFile::judge_opened(file).map(|_| ())
        });
        let outcome = match outcome {
            Some(outcome) => outcome,
            None => {
                // A writer lets the blocked open go, so the thread ends.
                let _ = std::fs::OpenOptions::new().write(true).open(&fifo);
                let _ = std::fs::remove_file(&fifo);
                panic!("opening a FIFO blocked");
            }
        };
        assert!(
            matches!(outcome, Err(Refusal::NotRegular { kind: "a FIFO" })),
            "{outcome:?}"
        );
        let whole_path = fifo.clone();
        let outcome = within_seconds(move || RegularFile::open(&whole_path).map(|_| ()));
        let _ = std::fs::remove_file(&fifo);
        assert!(
            matches!(outcome, Some(Err(Refusal::NotRegular { kind: "a FIFO" }))),
            "{outcome:?}"
        );
    }

    #[cfg(unix)]
    #[test]
    fn devices_and_folders_are_refused_naming_their_kind() {
        for (path, kind) in [
            (Path::new("/dev/null"), "a character device"),
            (std::env::temp_dir().as_path(), "a folder"),
        ] {
            match RegularFile::open(path) {
                Err(Refusal::NotRegular { kind: refused }) => assert_eq!(refused, kind, "{path:?}"),
                Err(Refusal::Io(error)) => panic!("{path:?}: {error}"),
                Ok(_) => panic!("{path:?} opened as a regular file"),
            }
            let file = File::open(path).expect("open for the fstat check");
            let judged = RegularFile::judge_opened(file);
            let refused_as = match &judged {
                Err(Refusal::NotRegular { kind }) => Some(*kind),
                _ => None,
            };
            assert_eq!(refused_as, Some(kind), "{path:?} once opened");
        }
        assert!(matches!(
            RegularFile::open(&scratch("missing")),
            Err(Refusal::Io(error)) if error.kind() == std::io::ErrorKind::NotFound
        ));
    }

    #[test]
    fn a_regular_file_is_read_no_further_than_asked() {
        let path = scratch("bounded");
        std::fs::write(&path, [7u8; 100]).expect("write");
        let mut file = RegularFile::open(&path).expect("a regular file");
        assert_eq!(file.size(), 100);
        let mut bytes = vec![1u8];
        assert_eq!(file.read_at_most(10, &mut bytes).expect("read"), 10);
        assert_eq!(bytes.len(), 11);
        assert_eq!(file.read_at_most(1000, &mut bytes).expect("read"), 90);
        assert_eq!(file.read_at_most(1000, &mut bytes).expect("read"), 0);
        assert_eq!(bytes.len(), 101);
        let _ = std::fs::remove_file(&path);
    }
}
