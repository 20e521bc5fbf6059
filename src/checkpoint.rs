//! Checkpoints in the safetensors format (the one Hugging Face, candle and Burn share): an [`Mlp`]'s parameters
//! named `layers.0.weight` ([inputs, outputs]), `layers.0.bias` and so on, the architecture in the file's
//! metadata, and optionally an optimizer's state (`optimizer.m.layers.0.weight`, ...). A file loads into a new
//! session on any adapter, and Python reads it with `safetensors.numpy.load_file`. Any other model saves its
//! tensors by name with [`save_tensors`] and reads them back with [`Checkpoint::tensor`] or
//! [`Checkpoint::load_tensor_into`].
//!
//! A file is read as untrusted input: only a regular file (or a link to one) is opened, its header length
//! must fit the file and safetensors' 100 MB limit, and no more than its size is read. A file of ours
//! (format=wgcompute.mlp) must agree with itself when it is read, or it is refused naming what disagrees:
//! activation "relu"; `sizes` in plain digits; exactly the tensors `layers.<i>.weight` `[sizes[i],
//! sizes[i+1]]` and `layers.<i>.bias` `[sizes[i+1]]`, F32, plus `optimizer.<slot>.<parameter>` of the same
//! shapes; `optimizer.steps` in plain digits wherever `optimizer` is named; each slot present for every
//! parameter or for none, none at step 0, every slot of the optimizer after a step; every value finite, and
//! Adam's second moments not negative.
//!
//! ```
//! use wgcompute::{checkpoint, Mlp, Session, SessionOptions};
//! # fn main() -> wgcompute::Result<()> {
//! let path = std::env::temp_dir().join(format!("doc-{}.safetensors", std::process::id()));
//! let session = Session::open(SessionOptions::default())?;
//! let model = Mlp::new(&session, 4, &[8], 3, 1)?;
//! checkpoint::save(&path, &model, None)?;
//! let loaded = checkpoint::Checkpoint::read(&path)?.model(&session)?;
//! assert_eq!(loaded.sizes(), vec![4, 8, 3]);
//! # std::fs::remove_file(&path).ok();
//! # Ok(()) }
//! ```

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::Path;

use safetensors::tensor::{Dtype, SafeTensors};

use crate::error::{Error, Result};
use crate::nn::{Linear, Mlp};
use crate::optim::Optimizer;
use crate::session::Session;
use crate::tensor::{DType, Tensor};

/// The metadata key and value that mark a file as one of ours.
const FORMAT_KEY: &str = "format";
const FORMAT: &str = "wgcompute.mlp";
/// `[inputs, hidden…, outputs]`, comma-separated.
const SIZES_KEY: &str = "sizes";
const ACTIVATION_KEY: &str = "activation";
const OPTIMIZER_KEY: &str = "optimizer";
const OPTIMIZER_STEPS_KEY: &str = "optimizer.steps";
/// The most header bytes a file may announce: the safetensors crate's own limit, checked before anything
/// past the length is read, so a damaged length cannot make the reader hold more than the format allows.
const MAX_HEADER_BYTES: u64 = 100_000_000;
/// The header's length leads the file as a little-endian u64.
const HEADER_LENGTH_BYTES: u64 = 8;
/// The only activation an [`Mlp`] applies between its layers.
const ACTIVATION: &str = "relu";
const LAYER_PREFIX: &str = "layers.";
const SLOT_PREFIX: &str = "optimizer.";
/// What to do about a file whose parts disagree: nothing in it can be trusted to say which part is right.
const DAMAGED: &str =
    "the file was damaged or altered; use an earlier copy, or save the model again";

fn failure(path: &Path, message: impl Into<String>) -> Error {
    Error::Checkpoint {
        path: path.display().to_string(),
        message: message.into(),
    }
}

/// Writes `model`'s parameters (and `optimizer`'s state, if given) to `path` in the safetensors format. The
/// file is written beside `path` first and renamed over it, so a failed save leaves an older file whole.
pub fn save(path: impl AsRef<Path>, model: &Mlp, optimizer: Option<&dyn Optimizer>) -> Result<()> {
    save_with_metadata(path, model, optimizer, &[])
}

/// [`save`] with extra metadata entries (the command line keeps its training settings there).
pub fn save_with_metadata(
    path: impl AsRef<Path>,
    model: &Mlp,
    optimizer: Option<&dyn Optimizer>,
    extra: &[(&str, String)],
) -> Result<()> {
    let path = path.as_ref();
    let bytes = encode(path, model, optimizer, extra)?;
    write_whole(path, &bytes)
}

/// The bytes [`save_with_metadata`] writes, for a caller that writes files its own way.
pub fn to_bytes(
    model: &Mlp,
    optimizer: Option<&dyn Optimizer>,
    extra: &[(&str, String)],
) -> Result<Vec<u8>> {
    encode(Path::new("(in memory)"), model, optimizer, extra)
}

fn encode(
    path: &Path,
    model: &Mlp,
    optimizer: Option<&dyn Optimizer>,
    extra: &[(&str, String)],
) -> Result<Vec<u8>> {
    let mut named: Vec<(String, &Tensor)> = Vec::new();
    let parameters = model.named_parameters();
    for (name, tensor) in &parameters {
        named.push((name.clone(), tensor));
    }
    let mut metadata: BTreeMap<String, String> = extra
        .iter()
        .map(|(key, value)| (key.to_string(), value.clone()))
        .collect();
    metadata.insert(FORMAT_KEY.into(), FORMAT.into());
    metadata.insert(SIZES_KEY.into(), join(&model.sizes()));
    metadata.insert(ACTIVATION_KEY.into(), ACTIVATION.into());
    let state = optimizer.map(|optimizer| optimizer.state());
    if let Some(state) = &state {
        metadata.insert(OPTIMIZER_KEY.into(), state.kind.into());
        metadata.insert(OPTIMIZER_STEPS_KEY.into(), state.steps.to_string());
        for (slot, tensors) in &state.slots {
            if tensors.is_empty() {
                continue;
            }
            if tensors.len() != parameters.len() {
                return Err(failure(
                    path,
                    format!(
                        "the optimizer holds {} '{slot}' tensors for {} parameters: save it with the model it \
                         trained",
                        tensors.len(),
                        parameters.len()
                    ),
                ));
            }
            for ((name, _), tensor) in parameters.iter().zip(tensors) {
                named.push((format!("{SLOT_PREFIX}{slot}.{name}"), tensor));
            }
        }
    }
    encode_named(path, &named, &metadata)
}

/// Writes named tensors (f32 or u32: the parameters and state of any model built on the tape) and metadata to
/// `path` in the safetensors format, whole or not at all. Names must be unique, non-empty and not
/// `__metadata__`; [`Checkpoint::tensor`] reads them back.
pub fn save_tensors(
    path: impl AsRef<Path>,
    tensors: &[(&str, &Tensor)],
    metadata: &[(&str, String)],
) -> Result<()> {
    let path = path.as_ref();
    let bytes = encode_tensors(path, tensors, metadata)?;
    write_whole(path, &bytes)
}

/// The bytes [`save_tensors`] writes.
pub fn tensors_to_bytes(
    tensors: &[(&str, &Tensor)],
    metadata: &[(&str, String)],
) -> Result<Vec<u8>> {
    encode_tensors(Path::new("(in memory)"), tensors, metadata)
}

fn encode_tensors(
    path: &Path,
    tensors: &[(&str, &Tensor)],
    metadata: &[(&str, String)],
) -> Result<Vec<u8>> {
    let named: Vec<(String, &Tensor)> = tensors
        .iter()
        .map(|&(name, tensor)| (name.to_string(), tensor))
        .collect();
    let metadata: BTreeMap<String, String> = metadata
        .iter()
        .map(|(key, value)| (key.to_string(), value.clone()))
        .collect();
    encode_named(path, &named, &metadata)
}

fn encode_named(
    path: &Path,
    named: &[(String, &Tensor)],
    metadata: &BTreeMap<String, String>,
) -> Result<Vec<u8>> {
    let mut seen = std::collections::HashSet::new();
    let mut data = Vec::with_capacity(named.len());
    for (name, tensor) in named {
        if name.is_empty() || name == "__metadata__" {
            return Err(failure(
                path,
                format!("'{name}' cannot name a tensor in safetensors"),
            ));
        }
        if !seen.insert(name.as_str()) {
            return Err(failure(
                path,
                format!("two tensors are named '{name}'; each needs its own name"),
            ));
        }
        let (dtype, bytes): (&'static str, Vec<u8>) = match tensor.dtype() {
            DType::F32 => (
                "F32",
                tensor
                    .to_vec()?
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect(),
            ),
            DType::U32 => (
                "U32",
                tensor
                    .to_vec_u32()?
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect(),
            ),
        };
        data.push(StoredTensor {
            name: name.clone(),
            dtype,
            shape: tensor.shape().to_vec(),
            bytes,
        });
    }
    Ok(serialize(metadata, &data))
}

/// One tensor as the file stores it: its elements' little-endian bytes.
struct StoredTensor {
    name: String,
    dtype: &'static str,
    shape: Vec<usize>,
    bytes: Vec<u8>,
}

/// The safetensors layout, written here rather than by the `safetensors` crate, whose header lists the
/// metadata in a hash map's order: the same model and settings then give the same bytes on every save, so a
/// checkpoint can be compared or hashed. The layout: the header's length (u64, little-endian), the header (JSON:
/// `__metadata__` in key order, then each tensor's dtype, shape and byte range in `tensors`' order, padded with
/// spaces to a multiple of 8 bytes), then the tensors' bytes.
fn serialize(metadata: &BTreeMap<String, String>, tensors: &[StoredTensor]) -> Vec<u8> {
    let mut header = String::from("{\"__metadata__\":{");
    for (index, (key, value)) in metadata.iter().enumerate() {
        if index > 0 {
            header.push(',');
        }
        push_json_string(&mut header, key);
        header.push(':');
        push_json_string(&mut header, value);
    }
    header.push('}');
    let mut offset = 0usize;
    for tensor in tensors {
        let bytes = tensor.bytes.len();
        header.push(',');
        push_json_string(&mut header, &tensor.name);
        let shape: Vec<String> = tensor.shape.iter().map(usize::to_string).collect();
        let _ = write!(
            header,
            ":{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{offset},{}]}}",
            tensor.dtype,
            shape.join(","),
            offset + bytes
        );
        offset += bytes;
    }
    header.push('}');
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut out = Vec::with_capacity(8 + header.len() + offset);
    out.extend_from_slice(&(header.len() as u64).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for tensor in tensors {
        out.extend_from_slice(&tensor.bytes);
    }
    out
}

/// `text` as a JSON string: quotes, backslashes and control characters escaped, everything else as UTF-8.
fn push_json_string(out: &mut String, text: &str) {
    out.push('"');
    for character in text.chars() {
        match character {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            control if (control as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", control as u32);
            }
            other => out.push(other),
        }
    }
    out.push('"');
}

fn write_whole(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut partial = path.as_os_str().to_owned();
    partial.push(format!(".partial-{}", std::process::id()));
    let partial = std::path::PathBuf::from(partial);
    let written = std::fs::write(&partial, bytes).and_then(|()| std::fs::rename(&partial, path));
    written.map_err(|error| {
        let _ = std::fs::remove_file(&partial);
        failure(
            path,
            format!("cannot write it ({error}); check the folder exists and is writable"),
        )
    })
}

fn f32_values(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|word| f32::from_le_bytes([word[0], word[1], word[2], word[3]]))
        .collect()
}

fn u32_values(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|word| u32::from_le_bytes([word[0], word[1], word[2], word[3]]))
        .collect()
}

fn join(sizes: &[usize]) -> String {
    sizes
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// A checkpoint file read into memory and checked to be safetensors. A file of ours (metadata
/// format=wgcompute.mlp) is also checked, when it is read, to agree with itself: the architecture its
/// metadata gives against the tensors' names, dtypes and shapes, the optimizer's step count against the
/// state it holds, and every parameter and moment to be finite.
pub struct Checkpoint {
    path: std::path::PathBuf,
    bytes: Vec<u8>,
    metadata: HashMap<String, String>,
    /// What a file of ours holds, as checked when it was read; `None` for any other safetensors file.
    mlp: Option<MlpContents>,
}

struct MlpContents {
    sizes: Vec<usize>,
    optimizer: Option<SavedOptimizer>,
}

struct SavedOptimizer {
    kind: String,
    steps: u64,
    /// The slots with tensors in the file; each holds one for every parameter.
    slots: BTreeSet<String>,
}

#[derive(Clone, Copy)]
enum Part {
    Weight,
    Bias,
}

impl Part {
    const BOTH: [Part; 2] = [Part::Weight, Part::Bias];

    fn name(self) -> &'static str {
        match self {
            Part::Weight => "weight",
            Part::Bias => "bias",
        }
    }
}

/// What a tensor name of ours means: a parameter of one layer, or one slot of optimizer state for it.
struct TensorRole<'a> {
    slot: Option<&'a str>,
    layer: usize,
    part: Part,
}

/// `None` for a name that save never writes. Only the spelling save writes is taken ("layers.1", never
/// "layers.01"), so that two tensors cannot both claim one parameter.
fn role_of(name: &str) -> Option<TensorRole<'_>> {
    let (slot, parameter) = match name.strip_prefix(SLOT_PREFIX) {
        Some(rest) => {
            let (slot, parameter) = rest.split_once('.')?;
            (Some(slot), parameter)
        }
        None => (None, name),
    };
    if slot == Some("") {
        return None;
    }
    let (index, part) = parameter.strip_prefix(LAYER_PREFIX)?.split_once('.')?;
    let part = match part {
        "weight" => Part::Weight,
        "bias" => Part::Bias,
        _ => return None,
    };
    if index.len() > 1 && index.starts_with('0') {
        return None;
    }
    Some(TensorRole {
        slot,
        layer: plain_decimal(index)?,
        part,
    })
}

fn parameter_name(layer: usize, part: Part) -> String {
    format!("{LAYER_PREFIX}{layer}.{}", part.name())
}

/// Digits only: `str::parse` would also take a sign, and a lenient reader of sizes or step counts hides
/// a file that was edited by hand or damaged. Too large for `T` is `None`, never a wrapped or clamped value.
fn plain_decimal<T: std::str::FromStr>(text: &str) -> Option<T> {
    if text.is_empty() || !text.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// A metadata value for an error message: a file can hold a value of megabytes.
fn shown(value: &str) -> String {
    const SHOWN_CHARS: usize = 40;
    if value.chars().count() <= SHOWN_CHARS {
        value.to_string()
    } else {
        let start: String = value.chars().take(SHOWN_CHARS).collect();
        format!("{start}… ({} bytes)", value.len())
    }
}

/// The first element of little-endian f32 `bytes` for which `bad` holds, with its flat index.
fn first_f32_where(bytes: &[u8], bad: impl Fn(f32) -> bool) -> Option<(usize, f32)> {
    bytes
        .chunks_exact(4)
        .map(|word| f32::from_le_bytes([word[0], word[1], word[2], word[3]]))
        .enumerate()
        .find(|&(_, value)| bad(value))
}

#[cfg(unix)]
fn file_kind(kind: &std::fs::FileType) -> &'static str {
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
fn file_kind(kind: &std::fs::FileType) -> &'static str {
    if kind.is_dir() {
        "a folder"
    } else {
        "something other than a file"
    }
}

/// The bytes of the regular file at `path`, no more than its size when it was opened. A FIFO or device is
/// refused before it is opened (opening a FIFO waits for a writer; `/dev/zero` never ends), and the header
/// length is checked against the file's size and safetensors' limit before the rest is read.
fn read_regular_file(path: &Path) -> Result<Vec<u8>> {
    use std::io::Read as _;
    let cannot_read = |error: std::io::Error| {
        failure(
            path,
            format!("cannot read it ({error}); check the path and that it is readable"),
        )
    };
    // fs::metadata follows symlinks, so a link is judged by what it points at.
    let described = std::fs::metadata(path).map_err(cannot_read)?;
    if !described.is_file() {
        return Err(failure(
            path,
            format!(
                "is {}, not a regular file; give the path of a checkpoint file written by checkpoint::save or \
                 `wgcompute fit --save`",
                file_kind(&described.file_type())
            ),
        ));
    }
    let size = described.len();
    if size < HEADER_LENGTH_BYTES {
        return Err(failure(
            path,
            format!(
                "is {size} bytes, too short for a safetensors file (which starts with an 8-byte header length); \
                 give a file written by checkpoint::save or `wgcompute fit --save`"
            ),
        ));
    }
    let mut file = std::fs::File::open(path).map_err(cannot_read)?;
    let opened = file.metadata().map_err(cannot_read)?;
    if !opened.is_file() || opened.len() != size {
        return Err(failure(
            path,
            "changed between being looked at and being opened; read it again once nothing is writing it",
        ));
    }
    let mut length = [0u8; HEADER_LENGTH_BYTES as usize];
    file.read_exact(&mut length).map_err(cannot_read)?;
    let header_bytes = u64::from_le_bytes(length);
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
    let too_large = || {
        failure(
            path,
            format!("is {size} bytes, more than this process can hold in memory; free memory, or use a smaller file"),
        )
    };
    let whole = usize::try_from(size).map_err(|_| too_large())?;
    let mut bytes = Vec::new();
    bytes.try_reserve_exact(whole).map_err(|_| too_large())?;
    bytes.extend_from_slice(&length);
    // One byte more than the size promised, so that a file growing as it is read is seen rather than cut.
    (&mut file)
        .take(after_length + 1)
        .read_to_end(&mut bytes)
        .map_err(cannot_read)?;
    if bytes.len() as u64 != size {
        return Err(failure(
            path,
            format!(
                "gave {} bytes where its size said {size}: it changed while being read; read it again once \
                 nothing is writing it",
                bytes.len()
            ),
        ));
    }
    Ok(bytes)
}

/// The architecture a file of ours names, checked against its tensors: every tensor is a parameter of
/// that architecture or optimizer state for one, F32 of the parameter's shape, and finite; every parameter
/// is there; the optimizer's step count is consistent with the state it holds. Shapes are compared before
/// anything is allocated in proportion to the sizes, so absurd sizes cost nothing.
fn check_mlp(
    path: &Path,
    tensors: &SafeTensors<'_>,
    metadata: &HashMap<String, String>,
) -> Result<MlpContents> {
    match metadata.get(ACTIVATION_KEY) {
        Some(activation) if activation == ACTIVATION => {}
        Some(activation) => {
            return Err(failure(
                path,
                format!(
                    "metadata '{ACTIVATION_KEY}' is '{}', but an Mlp has only '{ACTIVATION}' between its layers; \
                     {DAMAGED}",
                    shown(activation)
                ),
            ))
        }
        None => {
            return Err(failure(
                path,
                format!(
                    "its metadata has no '{ACTIVATION_KEY}' (wgcompute writes '{ACTIVATION}'), so how its layers \
                     connect is unknown; {DAMAGED}"
                ),
            ))
        }
    }
    let sizes = parse_sizes(path, metadata)?;
    let optimizer = parse_optimizer(path, metadata)?;
    let layers = sizes.len() - 1;
    let parameters = 2 * layers;
    let sizes_shown = shown(metadata.get(SIZES_KEY).map(String::as_str).unwrap_or(""));
    let slot_rules = optimizer
        .as_ref()
        .and_then(|(kind, _)| crate::optim::saved_slots(kind));

    // Sorted, so that of several problems the same one is reported every time.
    let mut names = tensors.names();
    names.sort_unstable();
    let mut parameters_found = 0usize;
    let mut slot_tensors: BTreeMap<&str, usize> = BTreeMap::new();
    for name in names {
        let Some(role) = role_of(name) else {
            return Err(failure(
                path,
                format!(
                    "holds a tensor '{name}', which is neither a parameter of an Mlp ({LAYER_PREFIX}<i>.weight, \
                     {LAYER_PREFIX}<i>.bias) nor optimizer state for one ({SLOT_PREFIX}<slot>.<parameter>); \
                     {DAMAGED}"
                ),
            ));
        };
        if role.layer >= layers {
            return Err(failure(
                path,
                format!(
                    "holds a tensor '{name}' of layer {}, but metadata '{SIZES_KEY}' = '{sizes_shown}' gives \
                     {layers} layer(s): the metadata and the tensors disagree; {DAMAGED}",
                    role.layer
                ),
            ));
        }
        let inputs = sizes[role.layer];
        let outputs = sizes[role.layer + 1];
        let expected: &[usize] = match role.part {
            Part::Weight => &[inputs, outputs],
            Part::Bias => &[outputs],
        };
        let view = tensors
            .tensor(name)
            .map_err(|_| failure(path, format!("has no tensor '{name}'")))?;
        if view.dtype() != Dtype::F32 || view.shape() != expected {
            return Err(failure(
                path,
                format!(
                    "tensor '{name}' is {:?} {:?}, but metadata '{SIZES_KEY}' = '{sizes_shown}' makes it F32 \
                     {expected:?}: the metadata and the tensors disagree; {DAMAGED}",
                    view.dtype(),
                    view.shape()
                ),
            ));
        }
        if let Some((index, value)) = first_f32_where(view.data(), |value| !value.is_finite()) {
            return Err(failure(
                path,
                format!(
                    "tensor '{name}' holds {value} at flat index {index}, but a checkpoint's parameters and \
                     optimizer state must be finite; if training diverged, train again with a lower learning rate \
                     or use an earlier checkpoint; otherwise {DAMAGED}"
                ),
            ));
        }
        let Some(slot) = role.slot else {
            parameters_found += 1;
            continue;
        };
        let rule = slot_rules.and_then(|rules| rules.iter().find(|rule| rule.name == slot));
        if rule.is_some_and(|rule| rule.non_negative) {
            if let Some((index, value)) = first_f32_where(view.data(), |value| value < 0.0) {
                return Err(failure(
                    path,
                    format!(
                        "tensor '{name}' holds {value} at flat index {index}, but its optimizer's '{slot}' state \
                         is never negative; {DAMAGED}"
                    ),
                ));
            }
        }
        *slot_tensors.entry(slot).or_default() += 1;
    }

    // Names are unique and each role is one parameter, so counting finds a missing one.
    if parameters_found != parameters {
        let missing = (0..layers)
            .flat_map(|layer| Part::BOTH.map(|part| parameter_name(layer, part)))
            .find(|name| tensors.tensor(name).is_err())
            .unwrap_or_default();
        return Err(failure(
            path,
            format!(
                "has no tensor '{missing}', which metadata '{SIZES_KEY}' = '{sizes_shown}' needs: the metadata \
                 and the tensors disagree; {DAMAGED}"
            ),
        ));
    }
    let optimizer = match optimizer {
        None => {
            if let Some(slot) = slot_tensors.keys().next() {
                return Err(failure(
                    path,
                    format!(
                        "holds optimizer state ('{slot}' tensors) but its metadata names no '{OPTIMIZER_KEY}', so \
                         whose state it is is unknown; {DAMAGED}"
                    ),
                ));
            }
            None
        }
        Some((kind, steps)) => {
            if steps == 0 {
                if let Some(slot) = slot_tensors.keys().next() {
                    return Err(failure(
                        path,
                        format!(
                            "metadata '{OPTIMIZER_STEPS_KEY}' is 0, but it holds '{slot}' optimizer state, which \
                             only a step makes; {DAMAGED}"
                        ),
                    ));
                }
            }
            for (slot, &count) in &slot_tensors {
                if count != parameters {
                    let missing = (0..layers)
                        .flat_map(|layer| Part::BOTH.map(|part| parameter_name(layer, part)))
                        .map(|parameter| format!("{SLOT_PREFIX}{slot}.{parameter}"))
                        .find(|name| tensors.tensor(name).is_err())
                        .unwrap_or_default();
                    return Err(failure(
                        path,
                        format!(
                            "holds '{slot}' optimizer state for some parameters but has no '{missing}'; {DAMAGED}"
                        ),
                    ));
                }
            }
            if let Some(rules) = slot_rules {
                check_slots(
                    path,
                    &kind,
                    steps,
                    rules.iter().map(|rule| rule.name),
                    slot_tensors.keys().copied(),
                )?;
            }
            Some(SavedOptimizer {
                kind,
                steps,
                slots: slot_tensors.keys().map(|slot| slot.to_string()).collect(),
            })
        }
    };
    Ok(MlpContents { sizes, optimizer })
}

/// Refuses state the optimizer does not keep, and, once it has stepped, state it keeps but the file lacks:
/// restored without it, the optimizer would restart from fresh state and say nothing.
fn check_slots<'a>(
    path: &Path,
    kind: &str,
    steps: u64,
    kept: impl Iterator<Item = &'a str> + Clone,
    saved: impl Iterator<Item = &'a str> + Clone,
) -> Result<()> {
    let kept_list = || kept.clone().collect::<Vec<_>>().join(", ");
    for slot in saved.clone() {
        if !kept.clone().any(|name| name == slot) {
            return Err(failure(
                path,
                format!(
                    "holds '{slot}' optimizer state, which the '{kind}' optimizer does not keep (it keeps: {}); \
                     {DAMAGED}",
                    kept_list()
                ),
            ));
        }
    }
    if steps > 0 {
        for slot in kept.clone() {
            if !saved.clone().any(|name| name == slot) {
                return Err(failure(
                    path,
                    format!(
                        "metadata '{OPTIMIZER_STEPS_KEY}' is {steps}, but it holds no '{slot}' state of its '{kind}' \
                         optimizer, which every step keeps; load the model alone (without its optimizer's state), \
                         or use a whole checkpoint"
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn parse_sizes(path: &Path, metadata: &HashMap<String, String>) -> Result<Vec<usize>> {
    let Some(text) = metadata.get(SIZES_KEY) else {
        return Err(failure(
            path,
            format!("its metadata has no '{SIZES_KEY}', so its architecture is unknown; {DAMAGED}"),
        ));
    };
    let sizes: Option<Vec<usize>> = text
        .split(',')
        .map(|part| plain_decimal(part).filter(|&width| width > 0))
        .collect();
    match sizes {
        Some(sizes) if sizes.len() >= 2 => Ok(sizes),
        _ => Err(failure(
            path,
            format!(
                "metadata '{SIZES_KEY}' is '{}', not two or more positive widths in digits between commas (such \
                 as '8,32,4'); {DAMAGED}",
                shown(text)
            ),
        )),
    }
}

/// The optimizer's kind and step count, if the file names one.
fn parse_optimizer(
    path: &Path,
    metadata: &HashMap<String, String>,
) -> Result<Option<(String, u64)>> {
    let steps = metadata.get(OPTIMIZER_STEPS_KEY);
    let Some(kind) = metadata.get(OPTIMIZER_KEY) else {
        return match steps {
            Some(steps) => Err(failure(
                path,
                format!(
                    "metadata '{OPTIMIZER_STEPS_KEY}' is '{}', but no '{OPTIMIZER_KEY}' says whose steps they are; \
                     {DAMAGED}",
                    shown(steps)
                ),
            )),
            None => Ok(None),
        };
    };
    let Some(steps) = steps else {
        return Err(failure(
            path,
            format!(
                "its metadata names the optimizer '{}' but has no '{OPTIMIZER_STEPS_KEY}', so how far it trained \
                 is unknown; {DAMAGED}",
                shown(kind)
            ),
        ));
    };
    match plain_decimal::<u64>(steps) {
        Some(count) => Ok(Some((kind.clone(), count))),
        None => Err(failure(
            path,
            format!(
                "metadata '{OPTIMIZER_STEPS_KEY}' is '{}', not a step count (digits only, at most {}); {DAMAGED}",
                shown(steps),
                u64::MAX
            ),
        )),
    }
}

impl Checkpoint {
    /// Reads the safetensors file at `path`, which must be a regular file (a link to one is followed). A
    /// file of ours (format=wgcompute.mlp) must also agree with itself (see [`Checkpoint`]); anything else is
    /// [`Error::Checkpoint`] naming what is wrong, before any session work.
    pub fn read(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let bytes = read_regular_file(path)?;
        let not_safetensors = |error: safetensors::SafeTensorError| {
            failure(
                path,
                format!("not a valid safetensors file ({error}); give a file written by save or `wgcompute fit`"),
            )
        };
        let (_, header) = SafeTensors::read_metadata(&bytes).map_err(not_safetensors)?;
        let metadata = header.metadata().clone().unwrap_or_default();
        let mlp = {
            let tensors = SafeTensors::deserialize(&bytes).map_err(not_safetensors)?;
            if metadata.get(FORMAT_KEY).map(String::as_str) == Some(FORMAT) {
                Some(check_mlp(path, &tensors, &metadata)?)
            } else {
                None
            }
        };
        Ok(Self {
            path: path.to_path_buf(),
            bytes,
            metadata,
            mlp,
        })
    }

    fn tensors(&self) -> Result<SafeTensors<'_>> {
        SafeTensors::deserialize(&self.bytes).map_err(|error| {
            failure(
                &self.path,
                format!("not a valid safetensors file ({error})"),
            )
        })
    }

    /// The file's metadata.
    pub fn metadata(&self) -> &HashMap<String, String> {
        &self.metadata
    }

    /// The optimizer's step count in a file of ours saved with an optimizer; `None` otherwise.
    pub fn optimizer_steps(&self) -> Option<u64> {
        let saved = self.mlp.as_ref()?.optimizer.as_ref()?;
        Some(saved.steps)
    }

    /// The names of the file's tensors, sorted.
    pub fn names(&self) -> Result<Vec<String>> {
        let tensors = self.tensors()?;
        let mut names: Vec<String> = tensors.names().into_iter().map(str::to_string).collect();
        names.sort_unstable();
        Ok(names)
    }

    /// A new tensor in `session` holding the file's tensor `name` (F32 or U32, of the shape it has there).
    pub fn tensor(&self, session: &Session, name: &str) -> Result<Tensor> {
        let tensors = self.tensors()?;
        let view = self.view(&tensors, name)?;
        let shape = view.shape().to_vec();
        match view.dtype() {
            Dtype::F32 => session.upload(&f32_values(view.data()), &shape),
            Dtype::U32 => session.upload_u32(&u32_values(view.data()), &shape),
            other => Err(failure(
                &self.path,
                format!("tensor '{name}' is {other:?}; only F32 and U32 tensors load"),
            )),
        }
    }

    /// Overwrites `tensor` with the file's tensor `name`, which must have its dtype and shape; otherwise an
    /// error that names it, and `tensor` is unchanged.
    pub fn load_tensor_into(&self, name: &str, tensor: &Tensor) -> Result<()> {
        let tensors = self.tensors()?;
        let view = self.view(&tensors, name)?;
        let want = match tensor.dtype() {
            DType::F32 => Dtype::F32,
            DType::U32 => Dtype::U32,
        };
        if view.dtype() != want || view.shape() != tensor.shape() {
            return Err(failure(
                &self.path,
                format!(
                    "tensor '{name}' is {:?} {:?}, not the {want:?} {:?} it is loaded into",
                    view.dtype(),
                    view.shape(),
                    tensor.shape()
                ),
            ));
        }
        match want {
            Dtype::F32 => tensor.write(&f32_values(view.data())),
            _ => tensor.write_u32(&u32_values(view.data())),
        }
    }

    fn view<'a>(
        &self,
        tensors: &'a SafeTensors<'a>,
        name: &str,
    ) -> Result<safetensors::tensor::TensorView<'a>> {
        tensors
            .tensor(name)
            .map_err(|_| failure(&self.path, format!("has no tensor '{name}'")))
    }

    fn not_ours(&self) -> Error {
        failure(
            &self.path,
            format!(
                "its metadata does not say format={FORMAT}: it was not written by wgcompute, so its architecture \
                 is unknown; read its tensors by name with Checkpoint::tensor"
            ),
        )
    }

    /// The architecture the metadata names, `[inputs, hidden…, outputs]`, which the tensors were checked to
    /// have when the file was read.
    pub fn sizes(&self) -> Result<Vec<usize>> {
        self.mlp
            .as_ref()
            .map(|contents| contents.sizes.clone())
            .ok_or_else(|| self.not_ours())
    }

    /// A new model in `session` of the architecture the file names, holding its parameters.
    pub fn model(&self, session: &Session) -> Result<Mlp> {
        let sizes = self.sizes()?;
        let layers = sizes
            .windows(2)
            .enumerate()
            .map(|(index, pair)| {
                let weight = self.upload(session, &parameter_name(index, Part::Weight), pair)?;
                let bias = self.upload(session, &parameter_name(index, Part::Bias), &pair[1..])?;
                Ok(Linear::from_tensors(weight, Some(bias)))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Mlp { layers })
    }

    /// Overwrites `model`'s parameters with the file's; a tensor missing, of another shape or not finite is
    /// an error that names it, and then nothing has been changed.
    pub fn load_into(&self, model: &Mlp) -> Result<()> {
        let parameters = model.named_parameters();
        let mut values = Vec::with_capacity(parameters.len());
        for (name, tensor) in &parameters {
            values.push(self.values(name, tensor.shape())?);
        }
        for ((_, tensor), values) in parameters.iter().zip(values) {
            tensor.write(&values)?;
        }
        Ok(())
    }

    /// Gives `optimizer` the state saved for `model` (which must have the file's architecture). Returns
    /// whether the file held any (false for a file saved without an optimizer, or before its first step). A
    /// file of another optimizer, state this optimizer does not keep, or a step count without the state every
    /// step keeps, is an error.
    pub fn restore_optimizer(
        &self,
        session: &Session,
        model: &Mlp,
        optimizer: &mut dyn Optimizer,
    ) -> Result<bool> {
        let Some(contents) = &self.mlp else {
            if self.metadata.contains_key(OPTIMIZER_KEY) {
                return Err(self.not_ours());
            }
            return Ok(false);
        };
        let Some(saved) = &contents.optimizer else {
            return Ok(false);
        };
        let state = optimizer.state();
        if saved.kind != state.kind {
            return Err(failure(
                &self.path,
                format!(
                    "it holds the state of a '{}' optimizer, not of '{}': resume with the same optimizer",
                    shown(&saved.kind),
                    state.kind
                ),
            ));
        }
        let kept: Vec<&'static str> = state.slots.iter().map(|(name, _)| *name).collect();
        if model.sizes() != contents.sizes {
            return Err(failure(
                &self.path,
                format!(
                    "its optimizer state is for a model of sizes {:?}, not {:?}: restore it for the model \
                     Checkpoint::model gives",
                    contents.sizes,
                    model.sizes()
                ),
            ));
        }
        // A kind defined outside this crate was not checked when the file was read.
        check_slots(
            &self.path,
            &saved.kind,
            saved.steps,
            kept.iter().copied(),
            saved.slots.iter().map(String::as_str),
        )?;
        if saved.steps == 0 {
            return Ok(false);
        }
        let parameters = model.named_parameters();
        let mut slots = Vec::with_capacity(kept.len());
        for slot in kept {
            let restored = parameters
                .iter()
                .map(|(name, tensor)| {
                    self.upload(
                        session,
                        &format!("{SLOT_PREFIX}{slot}.{name}"),
                        tensor.shape(),
                    )
                })
                .collect::<Result<Vec<_>>>()?;
            slots.push((slot.to_string(), restored));
        }
        optimizer
            .restore(saved.steps, slots)
            .map_err(|error| match error {
                Error::InvalidArgument { .. } => failure(
                    &self.path,
                    format!("its optimizer state does not fit the optimizer ({error}); {DAMAGED}"),
                ),
                other => other,
            })?;
        Ok(true)
    }

    /// The values of tensor `name`, which must be finite f32 of `shape`.
    fn values(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>> {
        let tensors = self.tensors()?;
        let view = tensors.tensor(name).map_err(|_| {
            failure(
                &self.path,
                format!("has no tensor '{name}', which the model needs"),
            )
        })?;
        if view.dtype() != Dtype::F32 {
            return Err(failure(
                &self.path,
                format!("tensor '{name}' is {:?}, not F32", view.dtype()),
            ));
        }
        if view.shape() != shape {
            return Err(failure(
                &self.path,
                format!(
                    "tensor '{name}' has shape {:?} but the model's is {shape:?}: the file is of another \
                     architecture",
                    view.shape()
                ),
            ));
        }
        if let Some((index, value)) = first_f32_where(view.data(), |value| !value.is_finite()) {
            return Err(failure(
                &self.path,
                format!("tensor '{name}' holds {value} at flat index {index}; a model's parameters must be finite"),
            ));
        }
        Ok(f32_values(view.data()))
    }

    fn upload(&self, session: &Session, name: &str, shape: &[usize]) -> Result<Tensor> {
        let values = self.values(name, shape)?;
        session.upload(&values, shape)
    }
}
