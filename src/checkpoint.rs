//! Checkpoints in the safetensors format (the one Hugging Face, candle and Burn share): an [`Mlp`]'s parameters
//! named `layers.0.weight` ([inputs, outputs]), `layers.0.bias` and so on, the architecture in the file's
//! metadata, and optionally an optimizer's state (`optimizer.m.layers.0.weight`, ...). A file loads into a new
//! session on any adapter, and Python reads it with `safetensors.numpy.load_file`. Any other model saves its
//! tensors by name with [`save_tensors`] and reads them back with [`Checkpoint::tensor`] or
//! [`Checkpoint::load_tensor_into`].
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

use std::collections::{BTreeMap, HashMap};
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
    metadata.insert(ACTIVATION_KEY.into(), "relu".into());
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
                named.push((format!("optimizer.{slot}.{name}"), tensor));
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

/// A checkpoint file read into memory and checked to be safetensors.
pub struct Checkpoint {
    path: std::path::PathBuf,
    bytes: Vec<u8>,
    metadata: HashMap<String, String>,
}

impl Checkpoint {
    pub fn read(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let bytes = std::fs::read(path)
            .map_err(|error| failure(path, format!("cannot read it ({error})")))?;
        let (_, header) = SafeTensors::read_metadata(&bytes).map_err(|error| {
            failure(
                path,
                format!("not a safetensors file ({error}); give a file written by save or `wgcompute fit`"),
            )
        })?;
        let metadata = header.metadata().clone().unwrap_or_default();
        let checkpoint = Self {
            path: path.to_path_buf(),
            bytes,
            metadata,
        };
        checkpoint.tensors()?;
        Ok(checkpoint)
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

    /// The architecture the metadata names: `[inputs, hidden…, outputs]`.
    pub fn sizes(&self) -> Result<Vec<usize>> {
        if self.metadata.get(FORMAT_KEY).map(String::as_str) != Some(FORMAT) {
            return Err(failure(
                &self.path,
                format!(
                    "its metadata does not say format={FORMAT}: it was not written by wgcompute, so its \
                     architecture is unknown"
                ),
            ));
        }
        let text = self
            .metadata
            .get(SIZES_KEY)
            .map(String::as_str)
            .unwrap_or("");
        let sizes: Option<Vec<usize>> = text
            .split(',')
            .map(|part| part.trim().parse().ok())
            .collect();
        match sizes {
            Some(sizes) if sizes.len() >= 2 && sizes.iter().all(|&size| size > 0) => Ok(sizes),
            _ => Err(failure(
                &self.path,
                format!(
                    "metadata '{SIZES_KEY}' is '{text}', not a list of two or more positive widths"
                ),
            )),
        }
    }

    /// A new model in `session` of the architecture the file names, holding its parameters.
    pub fn model(&self, session: &Session) -> Result<Mlp> {
        let sizes = self.sizes()?;
        let layers = sizes
            .windows(2)
            .enumerate()
            .map(|(index, pair)| {
                let weight = self.upload(session, &format!("layers.{index}.weight"), pair)?;
                let bias = self.upload(session, &format!("layers.{index}.bias"), &pair[1..])?;
                Ok(Linear::from_tensors(weight, Some(bias)))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Mlp { layers })
    }

    /// Overwrites `model`'s parameters with the file's; a tensor missing or of another shape is an error that
    /// names it, and then nothing has been changed.
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

    /// Gives `optimizer` the state saved for `model`'s parameters. Returns whether the file held any (false
    /// for a file saved without an optimizer, or before its first step). A file of another optimizer is an
    /// error.
    pub fn restore_optimizer(
        &self,
        session: &Session,
        model: &Mlp,
        optimizer: &mut dyn Optimizer,
    ) -> Result<bool> {
        let Some(kind) = self.metadata.get(OPTIMIZER_KEY) else {
            return Ok(false);
        };
        let state = optimizer.state();
        if kind != state.kind {
            return Err(failure(
                &self.path,
                format!(
                    "it holds the state of a '{kind}' optimizer, not of '{}': resume with the same optimizer",
                    state.kind
                ),
            ));
        }
        let slot_names: Vec<&'static str> = state.slots.iter().map(|(name, _)| *name).collect();
        let steps = self
            .metadata
            .get(OPTIMIZER_STEPS_KEY)
            .and_then(|text| text.parse().ok())
            .unwrap_or(0);
        let tensors = self.tensors()?;
        let names = tensors.names();
        let parameters = model.named_parameters();
        let mut slots = Vec::new();
        for slot in slot_names {
            let first = format!("optimizer.{slot}.{}", parameters[0].0);
            if !names.iter().any(|name| *name == first) {
                continue;
            }
            let restored = parameters
                .iter()
                .map(|(name, tensor)| {
                    self.upload(session, &format!("optimizer.{slot}.{name}"), tensor.shape())
                })
                .collect::<Result<Vec<_>>>()?;
            slots.push((slot.to_string(), restored));
        }
        if slots.is_empty() {
            return Ok(false);
        }
        optimizer.restore(steps, slots)?;
        Ok(true)
    }

    /// The values of tensor `name`, which must be f32 of `shape`.
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
        Ok(f32_values(view.data()))
    }

    fn upload(&self, session: &Session, name: &str, shape: &[usize]) -> Result<Tensor> {
        let values = self.values(name, shape)?;
        session.upload(&values, shape)
    }
}
