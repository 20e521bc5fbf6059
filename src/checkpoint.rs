//! Checkpoints in the safetensors format (the one Hugging Face, candle and Burn share): an [`Mlp`]'s parameters
//! named `layers.0.weight` ([inputs, outputs]), `layers.0.bias` and so on, the architecture in the file's
//! metadata, and optionally an optimizer's state (`optimizer.m.layers.0.weight`, ...). A file loads into a new
//! session on any adapter, and Python reads it with `safetensors.numpy.load_file`. Any other model saves its
//! tensors by name with [`save_tensors`] and reads them back with [`Checkpoint::tensor`] or
//! [`Checkpoint::load_tensor_into`].
//!
//! A file is read as untrusted input: only a regular file (or a link to one) is opened, and without blocking;
//! its header length must fit the file and safetensors' 100 MB limit; and the file must be exactly as long as
//! its header says, which is checked before the tensors' bytes are read, so a file extended to any length costs
//! nothing. The header is parsed once, when the file is read. A file of ours
//! (format=wgcompute.mlp) must agree with itself when it is read, or it is refused naming what disagrees:
//! activation "relu"; `sizes` in plain digits; exactly the tensors `layers.<i>.weight` `[sizes[i],
//! sizes[i+1]]` and `layers.<i>.bias` `[sizes[i+1]]`, F32, plus `optimizer.<slot>.<parameter>` of the same
//! shapes; `optimizer.steps` in plain digits wherever `optimizer` is named; each slot present for every
//! parameter or for none, none at step 0, every slot of the optimizer after a step; every value finite, and
//! Adam's second moments not negative. A fit ([`crate::fit`]) may add `standardize.mean` and
//! `standardize.scale` (F32 `[sizes[0]]`, both or neither, scales above 0) and a best-epoch copy
//! `best.<parameter>` of every parameter or of none.
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

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use safetensors::tensor::{Dtype, Metadata as SafetensorsHeader};

use crate::error::{Error, Result};
use crate::files::{Refusal, RegularFile};
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
/// A copy of every parameter as it was at a fit's best epoch, for early stopping to restore.
const BEST_PREFIX: &str = "best.";
/// The per-feature mean and scale a fit standardised its inputs with, [inputs] each.
const STANDARDIZE_MEAN: &str = "standardize.mean";
const STANDARDIZE_SCALE: &str = "standardize.scale";
/// What to do about a file whose parts disagree: nothing in it can be trusted to say which part is right.
const DAMAGED: &str =
    "the file was damaged or altered; use an earlier copy, or save the model again";

fn failure(path: &Path, message: impl Into<String>) -> Error {
    Error::checkpoint(path.display().to_string(), message)
}

/// A failure that `cause` explains; `message` holds its text.
fn failure_caused(
    path: &Path,
    message: impl Into<String>,
    cause: impl std::error::Error + Send + Sync + 'static,
) -> Error {
    Error::checkpoint_caused(path.display().to_string(), message, cause)
}

/// Writes `model`'s parameters (and `optimizer`'s state, if given) to `path` in the safetensors format. The
/// file is written beside `path` first and renamed over it, so a failed save leaves an older file whole. A
/// parameter or optimizer state holding inf or NaN (training diverged) is an error naming the tensor and the
/// element, and nothing is written: the file could not be read back.
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
    let bytes = encode(path, model, optimizer, extra, &FitExtras::default())?;
    write_whole(path, &bytes)
}

/// The bytes [`save_with_metadata`] writes, for a caller that writes files its own way.
pub fn to_bytes(
    model: &Mlp,
    optimizer: Option<&dyn Optimizer>,
    extra: &[(&str, String)],
) -> Result<Vec<u8>> {
    encode(
        Path::new("(in memory)"),
        model,
        optimizer,
        extra,
        &FitExtras::default(),
    )
}

/// What a fit keeps beside a model's parameters and optimizer state (see [`crate::fit`]).
#[derive(Clone, Copy, Default)]
pub struct FitExtras<'a> {
    /// The per-feature mean and scale its inputs are standardised with, one of each per input.
    pub standardization: Option<(&'a [f32], &'a [f32])>,
    /// Every parameter as it was at the best epoch so far, in [`Mlp::named_parameters`] order.
    pub best: Option<&'a [Tensor]>,
}

/// [`to_bytes`] with a fit's extras, which [`Checkpoint::standardization`] and [`Checkpoint::best_parameters`]
/// read back.
pub fn to_bytes_with_extras(
    model: &Mlp,
    optimizer: Option<&dyn Optimizer>,
    extra: &[(&str, String)],
    extras: &FitExtras<'_>,
) -> Result<Vec<u8>> {
    encode(Path::new("(in memory)"), model, optimizer, extra, extras)
}

fn encode(
    path: &Path,
    model: &Mlp,
    optimizer: Option<&dyn Optimizer>,
    extra: &[(&str, String)],
    extras: &FitExtras<'_>,
) -> Result<Vec<u8>> {
    check_saveable(path, model)?;
    let mut named: Vec<(String, &Tensor)> = Vec::new();
    let parameters = model.named_parameters();
    for (name, tensor) in &parameters {
        named.push((name.clone(), tensor));
    }
    if let Some(best) = extras.best {
        if best.len() != parameters.len() {
            return Err(failure(
                path,
                format!(
                    "{} best-epoch tensors were given for {} parameters: give one per parameter",
                    best.len(),
                    parameters.len()
                ),
            ));
        }
        for ((name, parameter), tensor) in parameters.iter().zip(best) {
            if tensor.shape() != parameter.shape() {
                return Err(failure(
                    path,
                    format!(
                        "the best-epoch copy of '{name}' has shape {:?}, not the parameter's {:?}",
                        tensor.shape(),
                        parameter.shape()
                    ),
                ));
            }
            named.push((format!("{BEST_PREFIX}{name}"), tensor));
        }
    }
    let mut host: Vec<(&str, &[f32])> = Vec::new();
    if let Some((mean, scale)) = extras.standardization {
        let inputs = model.sizes()[0];
        if mean.len() != inputs || scale.len() != inputs {
            return Err(failure(
                path,
                format!(
                    "a standardization of {} means and {} scales was given for a model of {inputs} inputs",
                    mean.len(),
                    scale.len()
                ),
            ));
        }
        if let Some(bad) = scale
            .iter()
            .find(|scale| !(scale.is_finite() && **scale > 0.0))
        {
            return Err(failure(
                path,
                format!("a standardization scale of {bad}: every scale must be finite and above 0"),
            ));
        }
        host.push((STANDARDIZE_MEAN, mean));
        host.push((STANDARDIZE_SCALE, scale));
    }
    let mut metadata: BTreeMap<String, String> = extra
        .iter()
        .map(|(key, value)| (key.to_string(), value.clone()))
        .collect();
    metadata.insert(FORMAT_KEY.into(), FORMAT.into());
    metadata.insert(SIZES_KEY.into(), join(&model.sizes()));
    metadata.insert(ACTIVATION_KEY.into(), ACTIVATION.into());
    let model_order: Vec<Arc<Tensor>> = parameters
        .iter()
        .map(|(_, parameter)| Arc::clone(parameter))
        .collect();
    // An optimizer that stepped the parameters in another order saves its state in the model's, since the
    // file pairs each slot's tensors with the parameters by name.
    let state = optimizer
        .map(|optimizer| optimizer.state().in_order_of(&model_order))
        .transpose()?;
    if let Some(state) = &state {
        metadata.insert(OPTIMIZER_KEY.into(), state.kind.into());
        metadata.insert(OPTIMIZER_STEPS_KEY.into(), state.steps.to_string());
        for (slot, tensors) in &state.slots {
            if tensors.is_empty() {
                continue;
            }
            for ((name, _), tensor) in parameters.iter().zip(tensors) {
                named.push((format!("{SLOT_PREFIX}{slot}.{name}"), tensor));
            }
        }
    }
    encode_named(path, &named, &host, &metadata, Values::Finite)
}

/// Refuses, before anything is read from the device, a model the format cannot describe: the file would be
/// written, and every load of it refused. An Mlp file holds at least one layer, each an F32 weight [inputs,
/// outputs] and an F32 bias [outputs], each layer's inputs the previous one's outputs.
fn check_saveable(path: &Path, model: &Mlp) -> Result<()> {
    let refuse = |reason: String| {
        failure(
            path,
            format!("not saved, since no load could read it back: {reason}"),
        )
    };
    if model.layers.is_empty() {
        return Err(refuse(
            "the Mlp has no layers; a wgcompute.mlp checkpoint holds at least one".into(),
        ));
    }
    let mut previous_outputs: Option<usize> = None;
    for (index, layer) in model.layers.iter().enumerate() {
        let weight = &layer.weight;
        let &[inputs, outputs] = weight.shape() else {
            return Err(refuse(format!(
                "layer {index}'s weight has shape {:?}, not [inputs, outputs]",
                weight.shape()
            )));
        };
        if weight.dtype() != DType::F32 {
            return Err(refuse(format!(
                "layer {index}'s weight is {}; an Mlp's parameters are float32",
                weight.dtype()
            )));
        }
        if let Some(previous) = previous_outputs.filter(|&previous| previous != inputs) {
            return Err(refuse(format!(
                "layer {index} takes {inputs} inputs, but layer {} gives {previous} outputs",
                index - 1
            )));
        }
        match &layer.bias {
            None => {
                return Err(refuse(format!(
                    "layer {index} has no bias; every layer of a wgcompute.mlp checkpoint has one (save the \
                     tensors by name instead, which keeps any set of layers)"
                )))
            }
            Some(bias) if bias.dtype() != DType::F32 || bias.shape() != [outputs] => {
                return Err(refuse(format!(
                    "layer {index}'s bias is {} {:?}, not float32 [{outputs}]",
                    bias.dtype(),
                    bias.shape()
                )))
            }
            Some(_) => {}
        }
        previous_outputs = Some(outputs);
    }
    Ok(())
}

/// Reads `bytes`, the whole file a save is about to write, as a load reads a file: a save never writes what a
/// load refuses. A refusal here is a bug in the writer, reported rather than written.
fn check_encoded(path: &Path, bytes: &[u8]) -> Result<()> {
    let refused = |reason: String| {
        failure(
            path,
            format!(
                "not saved, since a load would refuse what would be written: {}",
                reason.replace(&format!("; {DAMAGED}"), "")
            ),
        )
    };
    let header_end = bytes
        .get(..HEADER_LENGTH_BYTES as usize)
        .and_then(|length| <[u8; 8]>::try_from(length).ok())
        .map(u64::from_le_bytes)
        .and_then(|length| length.checked_add(HEADER_LENGTH_BYTES))
        .and_then(|end| usize::try_from(end).ok())
        .filter(|&end| end <= bytes.len())
        .ok_or_else(|| refused("its header length is wrong".into()))?;
    let layout = StoredLayout::parse(&bytes[HEADER_LENGTH_BYTES as usize..header_end])
        .map_err(|problem| refused(problem.text))?;
    let data = &bytes[header_end..];
    if layout.data_bytes != data.len() as u64 {
        return Err(refused(format!(
            "its header gives {} bytes of tensors, but {} follow",
            layout.data_bytes,
            data.len()
        )));
    }
    let metadata = layout.metadata();
    if metadata.get(FORMAT_KEY).map(String::as_str) == Some(FORMAT) {
        let data = InMemory { path, data };
        check_mlp(path, &layout, &data, &metadata).map_err(|error| match error {
            Error::Checkpoint { message, .. } => refused(message),
            other => other,
        })?;
    }
    Ok(())
}

/// Which values a file may hold.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Values {
    /// Any: a generic file's tensors mean whatever their model makes them mean.
    Any,
    /// Only finite ones: the reader refuses a model (format=wgcompute.mlp) holding anything else, so a save
    /// that wrote one would leave a file nothing can load.
    Finite,
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
    encode_named(path, &named, &[], &metadata, Values::Any)
}

/// Device tensors and host vectors (1-D f32) by name, then the metadata, as a file's bytes.
fn encode_named(
    path: &Path,
    named: &[(String, &Tensor)],
    host: &[(&str, &[f32])],
    metadata: &BTreeMap<String, String>,
    allowed: Values,
) -> Result<Vec<u8>> {
    let mut seen = std::collections::HashSet::new();
    let mut data = Vec::with_capacity(named.len() + host.len());
    for (name, values) in host {
        if !seen.insert(*name) || values.iter().any(|value| !value.is_finite()) {
            return Err(failure(
                path,
                format!("'{name}' is named twice or holds a value that is not finite"),
            ));
        }
        data.push(StoredTensor {
            name: name.to_string(),
            dtype: "F32",
            shape: vec![values.len()],
            bytes: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        });
    }
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
            DType::F32 => {
                let values = tensor.to_vec()?;
                if allowed == Values::Finite {
                    if let Some((index, value)) = values
                        .iter()
                        .enumerate()
                        .find(|(_, value)| !value.is_finite())
                    {
                        return Err(failure(
                            path,
                            format!(
                                "tensor '{name}' holds {value} at flat index {index}: the model is not finite, so \
                                 it is not saved; training diverged: lower the learning rate, or keep an earlier \
                                 checkpoint"
                            ),
                        ));
                    }
                }
                ("F32", values.iter().flat_map(|v| v.to_le_bytes()).collect())
            }
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
    let bytes = serialize(metadata, &data);
    check_encoded(path, &bytes)?;
    Ok(bytes)
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

/// Writes `bytes` to a temporary file beside `path`, then renames it over `path`: a reader never sees half a
/// file, a failed write leaves an older file whole, and saves racing to one path (from threads or processes)
/// each write their own temporary file, the last rename winning whole.
fn write_whole(path: &Path, bytes: &[u8]) -> Result<()> {
    crate::outputs::write_whole(path, bytes).map_err(|error| match error.into_parts() {
        (message, Some(cause)) => failure_caused(path, message, cause),
        (message, None) => failure(path, message),
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
    layout: StoredLayout,
    /// The tensors' bytes, read from the opened file a tensor at a time.
    data: FileData,
    metadata: HashMap<String, String>,
    /// What a file of ours holds, as checked when it was read; `None` for any other safetensors file.
    mlp: Option<MlpContents>,
}

struct MlpContents {
    sizes: Vec<usize>,
    optimizer: Option<SavedOptimizer>,
    /// Whether it holds `standardize.mean` and `standardize.scale`.
    standardized: bool,
    /// Whether it holds a best-epoch copy of every parameter.
    best: bool,
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
    /// A best-epoch copy of the parameter rather than the parameter.
    best: bool,
    layer: usize,
    part: Part,
}

/// `None` for a name that save never writes. Only the spelling save writes is taken ("layers.1", never
/// "layers.01"), so that two tensors cannot both claim one parameter.
fn role_of(name: &str) -> Option<TensorRole<'_>> {
    let (best, name) = match name.strip_prefix(BEST_PREFIX) {
        Some(parameter) if !parameter.starts_with(SLOT_PREFIX) => (true, parameter),
        Some(_) => return None,
        None => (false, name),
    };
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
        best,
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

/// What a file for [`Checkpoint::read`] must be and is not.
const GIVE_A_CHECKPOINT: &str = "give a file written by checkpoint::save or `wgcompute fit --save`";

/// The safetensors file at `path` as its parsed header and the tensors' bytes. Only a regular file is opened,
/// and without blocking (see crate::files); the header length is checked against the file's size and
/// safetensors' limit before the header is read, and the header is parsed before the data is read, so that a
/// file whose size is not the one its header gives is refused before memory is reserved for its data.
fn read_safetensors(path: &Path) -> Result<(StoredLayout, FileData)> {
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
struct StoredLayout {
    header: SafetensorsHeader,
    /// Where the last tensor's bytes end: the data's whole length, as the format keeps tensors contiguous.
    data_bytes: u64,
}

impl StoredLayout {
    /// Parsed and checked as the safetensors crate does (`SafeTensors::read_metadata`): UTF-8 JSON whose
    /// tensors, sorted by offset, tile the data from 0 with no gap or overlap, each as long as its dtype and
    /// shape make it. The crate checks the data's length against a buffer holding the whole file; here the
    /// caller checks it against the file's size, before reading the data.
    fn parse(header: &[u8]) -> std::result::Result<Self, HeaderProblem> {
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
        tests::HEADERS_PARSED.with(|count| count.set(count.get() + 1));
        let data_bytes = header.data_len() as u64;
        Ok(Self { header, data_bytes })
    }

    fn metadata(&self) -> HashMap<String, String> {
        self.header.metadata().clone().unwrap_or_default()
    }

    fn names(&self) -> Vec<String> {
        self.header.offset_keys()
    }

    fn has(&self, name: &str) -> bool {
        self.header.info(name).is_some()
    }

    /// Tensor `name`, its bytes read from `data` (what follows the header this layout was parsed from); None
    /// where the file has no such tensor.
    fn tensor<'a>(
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
struct HeaderProblem {
    text: String,
    cause: Box<dyn std::error::Error + Send + Sync + 'static>,
}

impl std::fmt::Display for HeaderProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// One tensor as a file holds it.
struct StoredView<'a> {
    dtype: Dtype,
    shape: &'a [usize],
    data: Cow<'a, [u8]>,
}

/// Where a file's tensor bytes come from, one tensor at a time: the bytes a save is about to write, or the
/// file a load opened, which is never held whole in memory.
trait TensorSource {
    /// The bytes of tensor `name` at `range` (start, end) of the data after the header.
    fn bytes(&self, name: &str, range: (usize, usize)) -> Result<Cow<'_, [u8]>>;
}

/// The whole file in memory, as a save encoded it.
struct InMemory<'a> {
    path: &'a Path,
    data: &'a [u8],
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
struct FileData {
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

/// The architecture a file of ours names, checked against its tensors: every tensor is a parameter of
/// that architecture or optimizer state for one, F32 of the parameter's shape, and finite; every parameter
/// is there; the optimizer's step count is consistent with the state it holds. Shapes are compared before
/// anything is allocated in proportion to the sizes, so absurd sizes cost nothing.
fn check_mlp(
    path: &Path,
    layout: &StoredLayout,
    data: &dyn TensorSource,
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
    let mut names = layout.names();
    names.sort_unstable();
    let mut parameters_found = 0usize;
    let mut best_found = 0usize;
    let mut standardization_found = 0usize;
    let mut slot_tensors: BTreeMap<&str, usize> = BTreeMap::new();
    for name in &names {
        if name == STANDARDIZE_MEAN || name == STANDARDIZE_SCALE {
            check_standardization(path, layout, data, name, sizes[0])?;
            standardization_found += 1;
            continue;
        }
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
        let view = layout
            .tensor(data, name)?
            .ok_or_else(|| failure(path, format!("has no tensor '{name}'")))?;
        if view.dtype != Dtype::F32 || view.shape != expected {
            return Err(failure(
                path,
                format!(
                    "tensor '{name}' is {:?} {:?}, but metadata '{SIZES_KEY}' = '{sizes_shown}' makes it F32 \
                     {expected:?}: the metadata and the tensors disagree; {DAMAGED}",
                    view.dtype,
                    view.shape
                ),
            ));
        }
        if let Some((index, value)) = first_f32_where(&view.data, |value| !value.is_finite()) {
            return Err(failure(
                path,
                format!(
                    "tensor '{name}' holds {value} at flat index {index}, but a checkpoint's parameters and \
                     optimizer state must be finite; if training diverged, train again with a lower learning rate \
                     or use an earlier checkpoint; otherwise {DAMAGED}"
                ),
            ));
        }
        if role.best {
            best_found += 1;
            continue;
        }
        let Some(slot) = role.slot else {
            parameters_found += 1;
            continue;
        };
        let rule = slot_rules.and_then(|rules| rules.iter().find(|rule| rule.name == slot));
        if rule.is_some_and(|rule| rule.non_negative) {
            if let Some((index, value)) = first_f32_where(&view.data, |value| value < 0.0) {
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
            .find(|name| !layout.has(name))
            .unwrap_or_default();
        return Err(failure(
            path,
            format!(
                "has no tensor '{missing}', which metadata '{SIZES_KEY}' = '{sizes_shown}' needs: the metadata \
                 and the tensors disagree; {DAMAGED}"
            ),
        ));
    }
    if best_found != 0 && best_found != parameters {
        let missing = (0..layers)
            .flat_map(|layer| Part::BOTH.map(|part| parameter_name(layer, part)))
            .map(|parameter| format!("{BEST_PREFIX}{parameter}"))
            .find(|name| !layout.has(name))
            .unwrap_or_default();
        return Err(failure(
            path,
            format!("holds best-epoch copies of some parameters but has no '{missing}'; {DAMAGED}"),
        ));
    }
    if standardization_found == 1 {
        let missing = if layout.has(STANDARDIZE_MEAN) {
            STANDARDIZE_SCALE
        } else {
            STANDARDIZE_MEAN
        };
        return Err(failure(
            path,
            format!(
                "holds one of '{STANDARDIZE_MEAN}' and '{STANDARDIZE_SCALE}' but has no '{missing}', so its inputs' \
                 standardization is unknown; {DAMAGED}"
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
                        .find(|name| !layout.has(name))
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
    Ok(MlpContents {
        sizes,
        optimizer,
        standardized: standardization_found == 2,
        best: best_found == parameters,
    })
}

/// A standardization tensor must be F32 `[inputs]` of finite values, and a scale above 0 (inputs are divided
/// by it).
fn check_standardization(
    path: &Path,
    layout: &StoredLayout,
    data: &dyn TensorSource,
    name: &str,
    inputs: usize,
) -> Result<()> {
    let view = layout
        .tensor(data, name)?
        .ok_or_else(|| failure(path, format!("has no tensor '{name}'")))?;
    if view.dtype != Dtype::F32 || view.shape != [inputs] {
        return Err(failure(
            path,
            format!(
                "tensor '{name}' is {:?} {:?}, but the model's {inputs} inputs make it F32 [{inputs}]; {DAMAGED}",
                view.dtype, view.shape
            ),
        ));
    }
    let bad = |value: f32| !value.is_finite() || (name == STANDARDIZE_SCALE && value <= 0.0);
    if let Some((index, value)) = first_f32_where(&view.data, bad) {
        return Err(failure(
            path,
            format!(
                "tensor '{name}' holds {value} at flat index {index}, but a standardization's means are finite \
                 and its scales finite and above 0; {DAMAGED}"
            ),
        ));
    }
    Ok(())
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
        let (layout, data) = read_safetensors(path)?;
        Self::checked(path, layout, data)
    }

    /// The checks of a file of ours (see [`Checkpoint`]), each tensor read once and let go.
    fn checked(path: &Path, layout: StoredLayout, data: FileData) -> Result<Self> {
        let metadata = layout.metadata();
        let mlp = if metadata.get(FORMAT_KEY).map(String::as_str) == Some(FORMAT) {
            Some(check_mlp(path, &layout, &data, &metadata)?)
        } else {
            None
        };
        Ok(Self {
            path: path.to_path_buf(),
            layout,
            data,
            metadata,
            mlp,
        })
    }

    /// [`Checkpoint::read`] for a load into `session`: before any tensor is read, the tensors a load would
    /// upload (a file of ours: the model's parameters; any other: every tensor) are checked against the room
    /// the session's cap leaves, so a file too large for the cap is refused ([`Error::OutOfMemory`]) at the
    /// cost of its header alone. The file is then read a tensor at a time, never whole.
    pub fn read_for(path: impl AsRef<Path>, session: &Session) -> Result<Self> {
        let path = path.as_ref();
        let (layout, data) = read_safetensors(path)?;
        let metadata = layout.metadata();
        let ours = metadata.get(FORMAT_KEY).map(String::as_str) == Some(FORMAT);
        let needed: u64 = layout
            .header
            .tensors()
            .iter()
            .filter(|(name, _)| {
                !ours || role_of(name).is_some_and(|role| role.slot.is_none() && !role.best)
            })
            .map(|(_, info)| (info.data_offsets.1 - info.data_offsets.0) as u64)
            .sum();
        let stats = session.memory_stats()?;
        if let Some(limit) = stats.limit {
            if stats.in_use.saturating_add(needed) > limit {
                return Err(Error::OutOfMemory {
                    requested: needed,
                    in_use: stats.in_use,
                    reserved: stats.reserved,
                    limit: Some(limit),
                    by_driver: false,
                });
            }
        }
        Self::checked(path, layout, data)
    }

    /// The path it was read from.
    pub fn path(&self) -> &Path {
        &self.path
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
        let mut names = self.layout.names();
        names.sort_unstable();
        Ok(names)
    }

    /// A new tensor in `session` holding the file's tensor `name` (F32 or U32, of the shape it has there).
    pub fn tensor(&self, session: &Session, name: &str) -> Result<Tensor> {
        let view = self.view(name)?;
        match view.dtype {
            Dtype::F32 => session.upload(&f32_values(&view.data), view.shape),
            Dtype::U32 => session.upload_u32(&u32_values(&view.data), view.shape),
            other => Err(failure(
                &self.path,
                format!("tensor '{name}' is {other:?}; only F32 and U32 tensors load"),
            )),
        }
    }

    /// Overwrites `tensor` with the file's tensor `name`, which must have its dtype and shape; otherwise an
    /// error that names it, and `tensor` is unchanged.
    pub fn load_tensor_into(&self, name: &str, tensor: &Tensor) -> Result<()> {
        let view = self.view(name)?;
        let want = match tensor.dtype() {
            DType::F32 => Dtype::F32,
            DType::U32 => Dtype::U32,
        };
        if view.dtype != want || view.shape != tensor.shape() {
            return Err(failure(
                &self.path,
                format!(
                    "tensor '{name}' is {:?} {:?}, not the {want:?} {:?} it is loaded into",
                    view.dtype,
                    view.shape,
                    tensor.shape()
                ),
            ));
        }
        match want {
            Dtype::F32 => tensor.write(&f32_values(&view.data)),
            _ => tensor.write_u32(&u32_values(&view.data)),
        }
    }

    fn view(&self, name: &str) -> Result<StoredView<'_>> {
        self.layout
            .tensor(&self.data, name)?
            .ok_or_else(|| failure(&self.path, format!("has no tensor '{name}'")))
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

    /// The per-feature (mean, scale) a fit standardised the model's inputs with, if it did: inputs go into the
    /// model as `(x - mean) / scale`. Checked when the file was read.
    pub fn standardization(&self) -> Result<Option<(Vec<f32>, Vec<f32>)>> {
        let contents = self.mlp.as_ref().ok_or_else(|| self.not_ours())?;
        if !contents.standardized {
            return Ok(None);
        }
        let inputs = [contents.sizes[0]];
        Ok(Some((
            self.values(STANDARDIZE_MEAN, &inputs)?,
            self.values(STANDARDIZE_SCALE, &inputs)?,
        )))
    }

    /// The best-epoch copies of the model's parameters a fit with early stopping keeps, in `session`, in
    /// [`Mlp::named_parameters`] order; `None` if the file holds none.
    pub fn best_parameters(&self, session: &Session) -> Result<Option<Vec<Tensor>>> {
        let contents = self.mlp.as_ref().ok_or_else(|| self.not_ours())?;
        if !contents.best {
            return Ok(None);
        }
        let mut tensors = Vec::new();
        for (index, pair) in contents.sizes.windows(2).enumerate() {
            for (part, shape) in [(Part::Weight, pair), (Part::Bias, &pair[1..])] {
                let name = format!("{BEST_PREFIX}{}", parameter_name(index, part));
                tensors.push(self.upload(session, &name, shape)?);
            }
        }
        Ok(Some(tensors))
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
        let model_order: Vec<Arc<Tensor>> = parameters
            .iter()
            .map(|(_, parameter)| Arc::clone(parameter))
            .collect();
        optimizer
            .restore(&model_order, saved.steps, slots)
            .map_err(|error| match error {
                Error::InvalidArgument { .. } => failure_caused(
                    &self.path,
                    format!("its optimizer state does not fit the optimizer ({error}); {DAMAGED}"),
                    error,
                ),
                other => other,
            })?;
        Ok(true)
    }

    /// The values of tensor `name`, which must be finite f32 of `shape`.
    fn values(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>> {
        let view = self.layout.tensor(&self.data, name)?.ok_or_else(|| {
            failure(
                &self.path,
                format!("has no tensor '{name}', which the model needs"),
            )
        })?;
        if view.dtype != Dtype::F32 {
            return Err(failure(
                &self.path,
                format!("tensor '{name}' is {:?}, not F32", view.dtype),
            ));
        }
        if view.shape != shape {
            return Err(failure(
                &self.path,
                format!(
                    "tensor '{name}' has shape {:?} but the model's is {shape:?}: the file is of another \
                     architecture",
                    view.shape
                ),
            ));
        }
        if let Some((index, value)) = first_f32_where(&view.data, |value| !value.is_finite()) {
            return Err(failure(
                &self.path,
                format!("tensor '{name}' holds {value} at flat index {index}; a model's parameters must be finite"),
            ));
        }
        Ok(f32_values(&view.data))
    }

    fn upload(&self, session: &Session, name: &str, shape: &[usize]) -> Result<Tensor> {
        let values = self.values(name, shape)?;
        session.upload(&values, shape)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    thread_local! {
        /// Headers parsed on this thread: a file's header is parsed once, when it is read.
        pub(super) static HEADERS_PARSED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    fn stored(name: String, shape: Vec<usize>) -> StoredTensor {
        let elements: usize = shape.iter().product();
        StoredTensor {
            name,
            dtype: "F32",
            bytes: (0..elements)
                .flat_map(|index| (index as f32 * 0.25).to_le_bytes())
                .collect(),
            shape,
        }
    }

    /// Every tensor of a file read, as model() and load_into read them, parses its header no more than the
    /// read did; before, each tensor re-parsed the whole JSON (a 90 MB metadata value made `predict` take 31 s).
    #[test]
    fn a_files_header_is_parsed_once_however_many_tensors_are_read() {
        const LAYERS: usize = 40;
        let sizes = vec![3; LAYERS + 1];
        let mut metadata = BTreeMap::new();
        metadata.insert(FORMAT_KEY.to_string(), FORMAT.to_string());
        metadata.insert(SIZES_KEY.to_string(), join(&sizes));
        metadata.insert(ACTIVATION_KEY.to_string(), ACTIVATION.to_string());
        metadata.insert("notes".to_string(), "x".repeat(1 << 20));
        let tensors: Vec<StoredTensor> = (0..LAYERS)
            .flat_map(|layer| {
                [
                    stored(parameter_name(layer, Part::Weight), vec![3, 3]),
                    stored(parameter_name(layer, Part::Bias), vec![3]),
                ]
            })
            .collect();
        let path = std::env::temp_dir().join(format!(
            "wgcompute-parsed-once-{}.safetensors",
            std::process::id()
        ));
        std::fs::write(&path, serialize(&metadata, &tensors)).expect("write");

        HEADERS_PARSED.with(|count| count.set(0));
        let checkpoint = Checkpoint::read(&path).expect("read");
        let _ = std::fs::remove_file(&path);
        assert_eq!(HEADERS_PARSED.with(std::cell::Cell::get), 1);
        assert_eq!(checkpoint.sizes().expect("ours"), sizes);
        assert_eq!(checkpoint.names().expect("names").len(), 2 * LAYERS);
        for tensor in &tensors {
            let values = checkpoint
                .values(&tensor.name, &tensor.shape)
                .expect("a parameter");
            assert_eq!(values, f32_values(&tensor.bytes), "{}", tensor.name);
        }
        assert_eq!(HEADERS_PARSED.with(std::cell::Cell::get), 1);
    }

    fn scratch_path(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!(
            "wgcompute-checkpoint-{name}-{}.safetensors",
            std::process::id()
        ))
    }

    /// The source of a checkpoint error on `path`, as the type the refusal came from.
    fn source_of<'a, T: std::error::Error + 'static>(error: &'a Error, path: &Path) -> &'a T {
        match error {
            Error::Checkpoint { path: named, .. } => {
                assert_eq!(named, &path.display().to_string())
            }
            other => panic!("expected a checkpoint error, got {other:?}"),
        }
        std::error::Error::source(error)
            .unwrap_or_else(|| panic!("no source: {error:?}"))
            .downcast_ref::<T>()
            .unwrap_or_else(|| panic!("a source of another type: {error:?}"))
    }

    #[test]
    fn a_file_that_cannot_be_read_or_written_keeps_the_io_error_as_its_source() {
        let missing = scratch_path("missing");
        let _ = std::fs::remove_file(&missing);
        let error = Checkpoint::read(&missing)
            .err()
            .expect("a missing file is refused");
        assert_eq!(
            source_of::<std::io::Error>(&error, &missing).kind(),
            std::io::ErrorKind::NotFound
        );
        assert!(error.to_string().contains("cannot read it"), "{error}");

        let nowhere = scratch_path("no-such-folder").join("model.safetensors");
        let error = write_whole(&nowhere, b"bytes").expect_err("no folder to write in");
        let cause = source_of::<std::io::Error>(&error, &nowhere);
        assert!(
            error.to_string().contains(&cause.to_string()),
            "{error} names {cause}"
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_save_follows_links_to_files_and_leaves_devices_and_fifos_as_they_were() {
        use std::os::unix::fs::FileTypeExt;
        let folder = tempfile::tempdir().expect("a scratch folder");
        let fifo = folder.path().join("fifo");
        crate::files::tests::make_fifo(&fifo);
        let to_null = folder.path().join("null.safetensors");
        std::os::unix::fs::symlink("/dev/null", &to_null).expect("a link to /dev/null");
        for (target, kind) in [
            (fifo.as_path(), "a FIFO"),
            (to_null.as_path(), "a character device"),
            (Path::new("/dev/null"), "a character device"),
        ] {
            let error = write_whole(target, b"bytes").expect_err("not a regular file");
            assert!(error.to_string().contains(kind), "{error}");
        }
        assert!(std::fs::symlink_metadata(&fifo)
            .expect("the FIFO")
            .file_type()
            .is_fifo());
        assert!(std::fs::metadata("/dev/null")
            .expect("/dev/null")
            .file_type()
            .is_char_device());
        let real = folder.path().join("real.safetensors");
        let link = folder.path().join("link.safetensors");
        std::fs::write(&real, b"old").expect("a file");
        std::os::unix::fs::symlink(&real, &link).expect("a link");
        write_whole(&link, b"new").expect("a link to a file is written through");
        assert!(std::fs::symlink_metadata(&link)
            .expect("the link")
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read(&real).expect("the file"), b"new");
    }

    #[test]
    fn a_malformed_header_keeps_the_parsers_error_as_its_source() {
        let file = |name: &str, header: &[u8]| {
            let path = scratch_path(name);
            let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
            bytes.extend_from_slice(header);
            std::fs::write(&path, bytes).expect("write");
            let error = Checkpoint::read(&path).err().expect("refused");
            let _ = std::fs::remove_file(&path);
            (path, error)
        };
        let (path, error) = file("broken-json", b"{\"a\":");
        let cause = source_of::<serde_json::Error>(&error, &path);
        assert!(cause.is_eof(), "{cause}");
        assert!(
            error.to_string().contains("not a valid safetensors file"),
            "{error}"
        );
        // The safetensors crate refuses a bad layout from within the JSON parser: a data error of its own.
        let (path, error) = file(
            "gap",
            br#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}"#,
        );
        assert!(source_of::<serde_json::Error>(&error, &path).is_data());
        let (path, error) = file("not-utf8", b"{\"\xff\":1}");
        source_of::<std::str::Utf8Error>(&error, &path);
    }

    fn layout_of(header: &str) -> std::result::Result<StoredLayout, HeaderProblem> {
        StoredLayout::parse(header.as_bytes())
    }

    /// The layout is checked as the safetensors crate checks it, with the header alone: tensors tile the data
    /// from 0, each as long as its dtype and shape make it.
    #[test]
    fn a_header_alone_gives_the_datas_length_or_is_refused() {
        let two = concat!(
            r#"{"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},"#,
            r#""a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}}"#
        );
        let layout = layout_of(two).expect("two contiguous tensors");
        assert_eq!(layout.data_bytes, 16);
        assert_eq!(layout.names(), ["a", "b"]);
        assert_eq!(
            layout_of(r#"{"__metadata__":{"k":"v"}}"#)
                .expect("no tensors")
                .data_bytes,
            0
        );
        for (header, problem) in [
            (
                r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}"#,
                "a gap before the first",
            ),
            (
                concat!(
                    r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"#,
                    r#""b":{"dtype":"F32","shape":[2],"data_offsets":[16,24]}}"#
                ),
                "a gap between two",
            ),
            (
                r#"{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}"#,
                "a length its shape does not make",
            ),
            (
                r#"{"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,8]}}"#,
                "a shape whose size overflows",
            ),
            ("{\"a\":", "broken JSON"),
        ] {
            assert!(layout_of(header).is_err(), "{problem}: {header}");
        }
        assert!(
            StoredLayout::parse(b"{\"\xff\":1}").is_err_and(|error| error.text.contains("UTF-8"))
        );
    }
}
