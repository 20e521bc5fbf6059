//! The crate's one error type: every failure a user or a driver can cause, each message saying what to do next.

use std::fmt;

use crate::dtype::DType;

/// Bytes shown the way people read them (`1.50 GiB`), used in error messages and reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ByteSize(pub u64);

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
        let mut value = self.0 as f64;
        let mut unit = 0;
        while value >= 1024.0 && unit + 1 < UNITS.len() {
            value /= 1024.0;
            unit += 1;
        }
        if unit == 0 {
            write!(f, "{} B", self.0)
        } else {
            write!(f, "{value:.2} {}", UNITS[unit])
        }
    }
}

fn limit_text(limit: &Option<u64>) -> String {
    match limit {
        Some(bytes) => ByteSize(*bytes).to_string(),
        None => "none".to_string(),
    }
}

/// Everything that can go wrong in wgcompute.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    // --- session state ---
    /// The session this object belongs to was closed or dropped; its memory has been released.
    #[error("the session was closed; its GPU memory has been released. Open a new session and upload the data again")]
    SessionClosed,
    /// The session is suspended: its tensors are kept in host memory and it holds no device. Resume it first.
    #[error("the session is suspended: its tensors are kept in host memory and it holds no GPU memory. Call Session::resume() (or resume_on) before using them")]
    Suspended,
    /// `resume` was called on a session that is not suspended.
    #[error("the session is not suspended, so there is nothing to resume; call Session::suspend() first")]
    NotSuspended,
    /// The GPU device was lost (driver reset, device removed, or destroyed). Close the session; its memory is still released.
    #[error("the GPU device was lost ({reason}); close this session and open a new one")]
    DeviceLost {
        reason: String,
        /// What the driver reported, where it reported an error rather than only a reason.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    },

    // --- adapters ---
    /// No adapter matched, or none exists at all.
    #[error("no GPU adapter {wanted}. {advice}")]
    NoAdapter { wanted: String, advice: String },
    /// The device could not be created on the chosen adapter.
    #[error("could not open a device on adapter '{adapter}': {reason}")]
    RequestDevice {
        adapter: String,
        reason: String,
        /// The driver's refusal (a `wgpu::RequestDeviceError`), whose text `reason` holds.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    },
    /// An adapter selector or a memory limit could not be parsed.
    #[error("invalid {what} '{given}': {expected}")]
    InvalidArgument {
        what: &'static str,
        given: String,
        expected: String,
    },

    // --- memory ---
    /// A request did not fit under the session's memory cap, or the driver refused the buffer the pool needed
    /// for it (`by_driver`). Freeing memory may help.
    #[error(
        "out of GPU memory{refused}: requested {requested}, in use {in_use}, reserved {reserved}, limit {limit}; \
         the empty buffers were already given back, as Session::trim() would. Drop tensors you no longer need, \
         or open the session with a larger memory limit",
        refused = if *by_driver { " (the driver refused a new buffer)" } else { "" },
        requested = ByteSize(*requested), in_use = ByteSize(*in_use), reserved = ByteSize(*reserved),
        limit = limit_text(limit)
    )]
    OutOfMemory {
        /// The bytes the caller asked for.
        requested: u64,
        in_use: u64,
        reserved: u64,
        limit: Option<u64>,
        /// The cap allowed the request, but the driver had no memory for the slab that would hold it.
        by_driver: bool,
    },
    /// A single buffer larger than the adapter can ever create; retrying will not help.
    #[error("a single buffer of {} exceeds this adapter's maximum buffer size of {}; split the data", ByteSize(*requested), ByteSize(*max))]
    BufferTooBig { requested: u64, max: u64 },
    /// Device memory size is unknown on this adapter, so a fractional cap cannot be honoured.
    #[error("cannot use a memory limit of {fraction} of device memory: this adapter does not report its memory size. Give the limit in bytes (for example 2GiB)")]
    DeviceMemoryUnknown { fraction: f64 },

    // --- tensors and ops ---
    /// Shapes that do not fit the operation.
    #[error("shape error in {op}: {message}")]
    Shape { op: &'static str, message: String },
    /// A tensor of another element type than the operation takes.
    #[error("{op} takes {expected} tensors, but was given a {found} tensor")]
    DType {
        op: &'static str,
        expected: DType,
        found: DType,
    },
    /// Operands whose dtypes the Array API standard's promotion does not join (int32 with uint32, which would
    /// need int64; bool with a number; an integer with a float).
    #[error("{op} cannot combine a {lhs} tensor with a {rhs} tensor: type promotion has no common dtype for them (int32 with uint32 would need int64; bool, integer and float kinds do not mix). Convert one with astype first")]
    Promotion {
        op: &'static str,
        lhs: DType,
        rhs: DType,
    },
    /// A tensor of a dtype the operation does not take, where it takes several (every integer dtype, say).
    #[error("{op} takes {expected} tensors, but was given a {found} tensor")]
    DTypes {
        op: &'static str,
        expected: &'static str,
        found: DType,
    },
    /// A tensor from another session was passed to this one.
    #[error(
        "{op}: the tensors belong to different sessions; move data with to_vec() and upload it"
    )]
    SessionMismatch { op: &'static str },
    /// An index that does not fit the tensor it indexes: an integer past the end of its axis (named, with the
    /// axis' size), too many indices, a mask of the wrong shape.
    #[error("index error in {op}: {message}")]
    Index { op: &'static str, message: String },

    // --- training ---
    /// A training step's loss was NaN or infinite: the model's parameters are no longer numbers worth keeping.
    #[error("training diverged: the loss of step {step} of the epoch is {loss}; lower the learning rate, or look for huge values in the inputs")]
    Diverged { step: usize, loss: f32 },
    /// The caller stopped the work between two steps (a step callback's signal check, Ctrl-C): every step
    /// before it is complete, none after it began.
    #[error("interrupted between training steps; the model holds its last complete step")]
    Interrupted,
    /// The caller stopped a wait for the GPU (the interrupt check, Ctrl-C): the work already submitted still
    /// runs to its end, and the session goes on.
    #[error("interrupted while waiting for the GPU; the work already submitted finishes in the background")]
    WaitInterrupted,

    // --- checkpoints ---
    /// A checkpoint could not be written or read, or does not fit the model it is loaded into.
    #[error("checkpoint {path}: {message}")]
    Checkpoint {
        path: String,
        message: String,
        /// What refused the file, where something else did: an `std::io::Error` reading or writing it, a
        /// `serde_json::Error` for a header that is not valid JSON or not a valid safetensors layout (the
        /// safetensors crate reports a bad layout through the JSON parser, so its own error is only text
        /// there), an `std::str::Utf8Error`, a `std::collections::TryReserveError` for a file too large to
        /// hold, or the optimizer's own [`Error`] for state that does not fit it.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    },

    // --- tuning ---
    /// The tuning cache file could not be written (`Session::write_tuning_cache`). Tuned picks still hold for
    /// the session; the next process times its kernels again.
    #[error(
        "could not write the tuning cache {}: {message}. Point WGCOMPUTE_CACHE_DIR at a directory you can write \
         (or remove what is in the way of that file); until then every process times its kernels again",
        .path.display()
    )]
    TuningCache {
        path: std::path::PathBuf,
        message: String,
        /// The `std::io::Error` that stopped the write, whose text `message` holds.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    },

    // --- driver ---
    /// The driver reported an error wgcompute did not expect (a validation or internal error).
    #[error("GPU driver error in {op}: {message}")]
    Driver {
        op: &'static str,
        message: String,
        /// The driver's own error (a `wgpu::Error`, a mapping failure), where there is one.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    },

    // --- benchmarks ---
    /// A bench row's own check failed (`wgcompute::bench`, behind the `bench` feature): a wrong result, a CPU
    /// reference given operands that do not fit, or a child process that failed.
    #[error("bench row {row}: {message}")]
    Bench { row: String, message: String },
}

/// What kind of failure an [`Error`] is, for a caller that answers each kind its own way (a binding raising one
/// exception class per kind). Every variant of [`Error`] has exactly one kind; the enum is exhaustive, so a
/// new kind cannot go unmapped where a caller matches on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// Over the cap, over what the driver could give, or larger than any buffer may be.
    OutOfMemory,
    Shape,
    DType,
    /// An argument out of its range, or a fraction of device memory that is not known.
    InvalidArgument,
    SessionMismatch,
    /// An index out of its axis' bounds, or an index that does not fit the tensor's shape.
    Index,
    SessionClosed,
    Suspended,
    NotSuspended,
    DeviceLost,
    /// No adapter matched, or it would not open a device.
    Adapter,
    Checkpoint,
    TuningCache,
    Diverged,
    Interrupted,
    Driver,
    Bench,
}

impl ErrorKind {
    /// Every kind, for a caller that checks it maps them all.
    pub const ALL: &'static [ErrorKind] = &[
        ErrorKind::OutOfMemory,
        ErrorKind::Shape,
        ErrorKind::DType,
        ErrorKind::InvalidArgument,
        ErrorKind::SessionMismatch,
        ErrorKind::Index,
        ErrorKind::SessionClosed,
        ErrorKind::Suspended,
        ErrorKind::NotSuspended,
        ErrorKind::DeviceLost,
        ErrorKind::Adapter,
        ErrorKind::Checkpoint,
        ErrorKind::TuningCache,
        ErrorKind::Diverged,
        ErrorKind::Interrupted,
        ErrorKind::Driver,
        ErrorKind::Bench,
    ];
}

impl Error {
    /// The kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::OutOfMemory { .. } | Error::BufferTooBig { .. } => ErrorKind::OutOfMemory,
            Error::Shape { .. } => ErrorKind::Shape,
            Error::DType { .. } | Error::Promotion { .. } | Error::DTypes { .. } => {
                ErrorKind::DType
            }
            Error::InvalidArgument { .. } | Error::DeviceMemoryUnknown { .. } => {
                ErrorKind::InvalidArgument
            }
            Error::SessionMismatch { .. } => ErrorKind::SessionMismatch,
            Error::Index { .. } => ErrorKind::Index,
            Error::SessionClosed => ErrorKind::SessionClosed,
            Error::Suspended => ErrorKind::Suspended,
            Error::NotSuspended => ErrorKind::NotSuspended,
            Error::DeviceLost { .. } => ErrorKind::DeviceLost,
            Error::NoAdapter { .. } | Error::RequestDevice { .. } => ErrorKind::Adapter,
            Error::Checkpoint { .. } => ErrorKind::Checkpoint,
            Error::TuningCache { .. } => ErrorKind::TuningCache,
            Error::Diverged { .. } => ErrorKind::Diverged,
            Error::Interrupted | Error::WaitInterrupted => ErrorKind::Interrupted,
            Error::Driver { .. } => ErrorKind::Driver,
            Error::Bench { .. } => ErrorKind::Bench,
        }
    }

    /// A driver error that no error below it explains.
    pub(crate) fn driver(op: &'static str, message: impl Into<String>) -> Self {
        Error::Driver {
            op,
            message: message.into(),
            source: None,
        }
    }

    /// A driver error caused by `cause`; `message` says what failed, and includes the cause's text.
    pub(crate) fn driver_caused(
        op: &'static str,
        message: impl Into<String>,
        cause: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error::Driver {
            op,
            message: message.into(),
            source: Some(Box::new(cause)),
        }
    }

    /// A checkpoint refused for a reason of wgcompute's own: the file's contents, or the model it is loaded into.
    pub(crate) fn checkpoint(path: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Checkpoint {
            path: path.into(),
            message: message.into(),
            source: None,
        }
    }

    /// A checkpoint that `cause` kept from being read or written; `message` says what failed, and includes the
    /// cause's text.
    pub(crate) fn checkpoint_caused(
        path: impl Into<String>,
        message: impl Into<String>,
        cause: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error::Checkpoint {
            path: path.into(),
            message: message.into(),
            source: Some(Box::new(cause)),
        }
    }

    /// A lost device the driver gave only a reason for.
    pub(crate) fn device_lost(reason: impl Into<String>) -> Self {
        Error::DeviceLost {
            reason: reason.into(),
            source: None,
        }
    }
}

/// Result with the crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_sizes_read_naturally() {
        assert_eq!(ByteSize(512).to_string(), "512 B");
        assert_eq!(ByteSize(1536).to_string(), "1.50 KiB");
        assert_eq!(ByteSize(3 << 30).to_string(), "3.00 GiB");
    }

    /// Bindings in other languages hand errors across threads.
    #[test]
    fn errors_cross_threads() {
        fn send_sync_static<T: Send + Sync + 'static>() {}
        send_sync_static::<Error>();
    }

    #[test]
    fn a_driver_error_keeps_its_cause_as_its_source() {
        let cause = std::io::Error::other("mapping refused");
        let error = Error::driver_caused("read-back", format!("mapping failed: {cause}"), cause);
        assert_eq!(
            error.to_string(),
            "GPU driver error in read-back: mapping failed: mapping refused"
        );
        let source = std::error::Error::source(&error).expect("the cause");
        assert_eq!(source.to_string(), "mapping refused");
        assert!(source.downcast_ref::<std::io::Error>().is_some());
        assert!(std::error::Error::source(&Error::driver("bind", "gone")).is_none());
    }

    #[test]
    fn a_lost_device_keeps_the_poll_error_as_its_source() {
        let cause = wgpu::PollError::Timeout;
        let error = Error::DeviceLost {
            reason: cause.to_string(),
            source: Some(Box::new(cause)),
        };
        assert!(error
            .to_string()
            .contains(&wgpu::PollError::Timeout.to_string()));
        let source = std::error::Error::source(&error).expect("the cause");
        assert!(matches!(
            source.downcast_ref::<wgpu::PollError>(),
            Some(wgpu::PollError::Timeout)
        ));
        assert!(std::error::Error::source(&Error::device_lost("reset")).is_none());
    }

    #[test]
    fn a_checkpoint_error_keeps_its_cause_as_its_source() {
        let cause = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let text = format!("cannot write it ({cause})");
        let error = Error::checkpoint_caused("model.safetensors", text.clone(), cause);
        assert_eq!(
            error.to_string(),
            format!("checkpoint model.safetensors: {text}")
        );
        let source = std::error::Error::source(&error).expect("the cause");
        assert_eq!(
            source
                .downcast_ref::<std::io::Error>()
                .map(std::io::Error::kind),
            Some(std::io::ErrorKind::PermissionDenied)
        );

        let cause = serde_json::from_str::<serde_json::Value>("{").expect_err("not JSON");
        let error = Error::checkpoint_caused("model.safetensors", format!("({cause})"), cause);
        let source = std::error::Error::source(&error).expect("the cause");
        assert!(source
            .downcast_ref::<serde_json::Error>()
            .is_some_and(serde_json::Error::is_eof));

        assert!(std::error::Error::source(&Error::checkpoint(
            "model.safetensors",
            "of another model"
        ))
        .is_none());
    }

    #[test]
    fn a_tuning_cache_error_keeps_the_io_error_as_its_source() {
        let cause = std::io::Error::from(std::io::ErrorKind::StorageFull);
        let error = Error::TuningCache {
            path: "cache/tuning.txt".into(),
            message: cause.to_string(),
            source: Some(Box::new(cause)),
        };
        assert!(error
            .to_string()
            .starts_with("could not write the tuning cache cache/tuning.txt: "));
        assert_eq!(
            std::error::Error::source(&error)
                .and_then(|source| source.downcast_ref::<std::io::Error>())
                .map(std::io::Error::kind),
            Some(std::io::ErrorKind::StorageFull)
        );
    }

    #[test]
    fn out_of_memory_message_carries_the_figures() {
        let text = Error::OutOfMemory {
            requested: 512 << 20,
            in_use: 10,
            reserved: 128 << 20,
            limit: Some(256 << 20),
            by_driver: false,
        }
        .to_string();
        assert!(
            text.contains("512.00 MiB") && text.contains("256.00 MiB"),
            "{text}"
        );
    }
}
