//! The reader of untrusted files: a safetensors file opened without blocking, its header length checked against
//! the file's size before the header is read and the header parsed before the data, and each tensor read (and
//! hashed) on its own, never the whole file at once.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::Path;

use safetensors::tensor::{Dtype, Metadata as SafetensorsHeader};

use crate::error::{Error, Result};
use crate::files::{Refusal, RegularFile};

use super::{failure, failure_caused};

#[cfg(test)]
thread_local! {
    /// Headers parsed on this thread, counted for the tests: a file's header is parsed once, when it is read.
    pub(super) static HEADERS_PARSED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// The most header bytes a file may announce: the safetensors crate's own limit, checked before anything
/// past the length is read, so a damaged length cannot make the reader hold more than the format allows.
const MAX_HEADER_BYTES: u64 = 100_000_000;
/// The header's length leads the file as a little-endian u64.
pub(super) const HEADER_LENGTH_BYTES: u64 = 8;

pub(super) fn f32_values(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|word| f32::from_le_bytes([word[0], word[1], word[2], word[3]]))
        .collect()
}

pub(super) fn u32_values(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|word| u32::from_le_bytes([word[0], word[1], word[2], word[3]]))
        .collect()
}

/// The first element of little-endian f32 `bytes` for which `bad` holds, with its flat index.
pub(super) fn first_f32_where(bytes: &[u8], bad: impl Fn(f32) -> bool) -> Option<(usize, f32)> {
    bytes
        .chunks_exact(4)
        .map(|word| f32::from_le_bytes([word[0], word[1], word[2], word[3]]))
        .enumerate()
        .find(|&(_, value)| bad(value))
}

/// What a file for [`Checkpoint::read`] must be and is not.
const GIVE_A_CHECKPOINT: &str = "give a file written by checkpoint::save or `wgcompute fit --save`";

/// The safetensors file at `path` as its parsed header and the tensors' bytes. Only a regular file is opened,
/// and without blocking (see crate::files); the header length is checked against the file's size and
/// safetensors' limit before the header is read, and the header is parsed before the data is read, so that a
/// file whose size is not the one its header gives is refused before memory is reserved for its data.
pub(super) fn read_safetensors(path: &Path) -> Result<(StoredLayout, FileData)> {
    let cannot_read = |error: std::io::Error| {
        failure_caused(
            path,
            format!("cannot read it ({error}); check the path and that it is readable"),
            error,
        )
    };
    let mut file = RegularFile::open(path).map_err(|refusal| match refusal {
        Refusal::NotRegular { kind } => failure(
            path,
            format!("is {kind}, not a regular file; {GIVE_A_CHECKPOINT}"),
        ),
        Refusal::Io(error) => cannot_read(error),
    })?;
    let size = file.size();
    if size < HEADER_LENGTH_BYTES {
        return Err(failure(
            path,
            format!(
                "is {size} bytes, too short for a safetensors file (which starts with an 8-byte header length); \
                 {GIVE_A_CHECKPOINT}"
            ),
        ));
    }
    let changed = |read: u64, expected: u64| {
        failure(
            path,
            format!(
                "gave {read} bytes where {expected} were due: it changed while being read; read it again once \
                 nothing is writing it"
            ),
        )
    };
    let mut read_exactly = |count: u64, into: &mut Vec<u8>| -> Result<()> {
        let read = file.read_at_most(count, into).map_err(cannot_read)?;
        if read != count {
            return Err(changed(read, count));
        }
        Ok(())
    };

    let mut length = Vec::with_capacity(HEADER_LENGTH_BYTES as usize);
    read_exactly(HEADER_LENGTH_BYTES, &mut length)?;
    let mut length_bytes = [0u8; HEADER_LENGTH_BYTES as usize];
    length_bytes.copy_from_slice(&length);
    let header_bytes = u64::from_le_bytes(length_bytes);
    let after_length = size - HEADER_LENGTH_BYTES;
    if header_bytes > after_length {
        return Err(failure(
            path,
            format!(
                "its safetensors header length says {header_bytes} bytes, but only {after_length} follow: it is \
                 truncated or not a safetensors file; give a whole file written by checkpoint::save or \
                 `wgcompute fit --save`"
            ),
        ));
    }
    if header_bytes > MAX_HEADER_BYTES {
        return Err(failure(
            path,
            format!(
                "its safetensors header length says {header_bytes} bytes, over the {MAX_HEADER_BYTES} the format \
                 allows: it is damaged or not a checkpoint"
            ),
        ));
    }
    let needs = |bytes: u64| {
        format!(
            "needs {bytes} bytes in memory, more than this process can hold; free memory, or use a smaller file"
        )
    };
    let too_large = |bytes: u64| failure(path, needs(bytes));
    let refused = |bytes: u64, error: std::collections::TryReserveError| {
        failure_caused(path, needs(bytes), error)
    };
    let mut header = Vec::new();
    // At most MAX_HEADER_BYTES, which fits in memory wherever the crate builds.
    header
        .try_reserve_exact(header_bytes as usize)
        .map_err(|error| refused(header_bytes, error))?;
    read_exactly(header_bytes, &mut header)?;
    let layout = StoredLayout::parse(&header).map_err(|problem| Error::Checkpoint {
        path: path.display().to_string(),
        message: format!("not a valid safetensors file ({problem}); {GIVE_A_CHECKPOINT}"),
        source: Some(problem.cause),
    })?;
    drop(header);

    let data_bytes = layout.data_bytes;
    // A sum that overflows is a length no file can have.
    let implied = data_bytes
        .checked_add(HEADER_LENGTH_BYTES + header_bytes)
        .filter(|&implied| implied == size);
    if implied.is_none() {
        return Err(failure(
            path,
            format!(
                "not a valid safetensors file: it is {size} bytes, but its header gives its tensors {data_bytes} \
                 bytes after the {header_bytes}-byte header, a file of {} bytes; it is truncated, extended or \
                 damaged; {GIVE_A_CHECKPOINT}",
                (HEADER_LENGTH_BYTES + header_bytes).saturating_add(data_bytes)
            ),
        ));
    }
    // Each tensor's range must be one this process can address; the data itself is read a tensor at a time.
    usize::try_from(data_bytes).map_err(|_| too_large(data_bytes))?;
    let data = FileData {
        path: path.to_path_buf(),
        file: std::sync::Mutex::new(file),
        start: HEADER_LENGTH_BYTES + header_bytes,
        seen: std::sync::Mutex::new(HashMap::new()),
    };
    Ok((layout, data))
}

/// A file's safetensors header, parsed once when it is read: the metadata, and each tensor's dtype, shape and
/// byte range within the data, found by name without parsing the JSON again.
pub(super) struct StoredLayout {
    pub(super) header: SafetensorsHeader,
    /// Where the last tensor's bytes end: the data's whole length, as the format keeps tensors contiguous.
    pub(super) data_bytes: u64,
}

impl StoredLayout {
    /// Parsed and checked as the safetensors crate does (`SafeTensors::read_metadata`): UTF-8 JSON whose
    /// tensors, sorted by offset, tile the data from 0 with no gap or overlap, each as long as its dtype and
    /// shape make it. The crate checks the data's length against a buffer holding the whole file; here the
    /// caller checks it against the file's size, before reading the data.
    pub(super) fn parse(header: &[u8]) -> std::result::Result<Self, HeaderProblem> {
        let text = std::str::from_utf8(header).map_err(|error| HeaderProblem {
            text: format!("its header is not UTF-8: {error}"),
            cause: Box::new(error),
        })?;
        let header: SafetensorsHeader =
            serde_json::from_str(text).map_err(|error| HeaderProblem {
                text: format!("its header is not valid: {error}"),
                cause: Box::new(error),
            })?;
        #[cfg(test)]
        HEADERS_PARSED.with(|count| count.set(count.get() + 1));
        let data_bytes = header.data_len() as u64;
        Ok(Self { header, data_bytes })
    }

    pub(super) fn metadata(&self) -> HashMap<String, String> {
        self.header.metadata().clone().unwrap_or_default()
    }

    pub(super) fn names(&self) -> Vec<String> {
        self.header.offset_keys()
    }

    pub(super) fn has(&self, name: &str) -> bool {
        self.header.info(name).is_some()
    }

    /// Tensor `name`, its bytes read from `data` (what follows the header this layout was parsed from); None
    /// where the file has no such tensor.
    pub(super) fn tensor<'a>(
        &'a self,
        data: &'a dyn TensorSource,
        name: &str,
    ) -> Result<Option<StoredView<'a>>> {
        let Some(info) = self.header.info(name) else {
            return Ok(None);
        };
        Ok(Some(StoredView {
            dtype: info.dtype,
            shape: &info.shape,
            data: data.bytes(name, info.data_offsets)?,
        }))
    }
}

/// Why a header was refused: the words for the message, and the parser's error, kept as the message's source.
#[derive(Debug)]
pub(super) struct HeaderProblem {
    pub(super) text: String,
    pub(super) cause: Box<dyn std::error::Error + Send + Sync + 'static>,
}

impl std::fmt::Display for HeaderProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// One tensor as a file holds it.
pub(super) struct StoredView<'a> {
    pub(super) dtype: Dtype,
    pub(super) shape: &'a [usize],
    pub(super) data: Cow<'a, [u8]>,
}

/// Where a file's tensor bytes come from, one tensor at a time: the bytes a save is about to write, or the
/// file a load opened, which is never held whole in memory.
pub(super) trait TensorSource {
    /// The bytes of tensor `name` at `range` (start, end) of the data after the header.
    fn bytes(&self, name: &str, range: (usize, usize)) -> Result<Cow<'_, [u8]>>;
}

/// The whole file in memory, as a save encoded it.
pub(super) struct InMemory<'a> {
    pub(super) path: &'a Path,
    pub(super) data: &'a [u8],
}

impl TensorSource for InMemory<'_> {
    fn bytes(&self, name: &str, (start, end): (usize, usize)) -> Result<Cow<'_, [u8]>> {
        self.data
            .get(start..end)
            .map(Cow::Borrowed)
            .ok_or_else(|| failure(self.path, format!("tensor '{name}' lies past the data")))
    }
}

/// The data of an opened file, read a tensor at a time. Each tensor's bytes are hashed when first read (the
/// checks of `Checkpoint::read` read every tensor of a file of ours), and a later read that hashes otherwise
/// is refused: the file changed after it was checked, and what it holds now was never checked.
pub(super) struct FileData {
    path: std::path::PathBuf,
    file: std::sync::Mutex<RegularFile>,
    /// Where the data starts: after the header's length and the header.
    start: u64,
    seen: std::sync::Mutex<HashMap<(usize, usize), u64>>,
}

impl TensorSource for FileData {
    fn bytes(&self, name: &str, (start, end): (usize, usize)) -> Result<Cow<'_, [u8]>> {
        let length = end.saturating_sub(start);
        let mut bytes = Vec::new();
        bytes.try_reserve_exact(length).map_err(|error| {
            failure_caused(
                &self.path,
                format!(
                    "tensor '{name}' needs {length} bytes in memory, more than this process can hold; free \
                     memory, or use a smaller file"
                ),
                error,
            )
        })?;
        let mut file = self
            .file
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        file.read_exactly_at(self.start + start as u64, length as u64, &mut bytes)
            .map_err(|error| {
                failure_caused(
                    &self.path,
                    format!(
                        "cannot read tensor '{name}' ({error}): the file changed or went away after it was \
                         opened; read it again once nothing is writing it"
                    ),
                    error,
                )
            })?;
        drop(file);
        let hash = {
            use std::hash::{Hash, Hasher};
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            bytes.hash(&mut hasher);
            hasher.finish()
        };
        let mut seen = self
            .seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match seen.insert((start, end), hash) {
            Some(earlier) if earlier != hash => Err(failure(
                &self.path,
                format!(
                    "tensor '{name}' changed after the file was read and checked; read it again once nothing is \
                     writing it"
                ),
            )),
            _ => Ok(Cow::Owned(bytes)),
        }
    }
}
