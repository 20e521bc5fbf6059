//! The writer: a model or named tensors encoded as safetensors bytes, the header in key order so one save
//! always gives the same bytes, each file read back as a load would before it is written.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use serde_json::ser::{CharEscape, CompactFormatter, Formatter};

use crate::error::{Error, Result};
use crate::nn::Mlp;
use crate::optim::Optimizer;
use crate::tensor::{DType, Tensor};

use super::reader::{InMemory, StoredLayout, HEADER_LENGTH_BYTES};
use super::schema::{
    check_mlp, join, ACTIVATION, ACTIVATION_KEY, BEST_PREFIX, FORMAT, FORMAT_KEY, OPTIMIZER_KEY,
    OPTIMIZER_STEPS_KEY, SIZES_KEY, SLOT_PREFIX, STANDARDIZE_MEAN, STANDARDIZE_SCALE,
};
use super::{failure, failure_caused, FitExtras, DAMAGED};

pub(super) fn encode(
    path: &Path,
    model: &Mlp,
    optimizer: Option<&dyn Optimizer>,
    extra: &[(&str, String)],
    extras: &FitExtras<'_>,
) -> Result<Vec<u8>> {
    check_saveable(path, model)?;
    let mut metadata = metadata_of(extra);
    metadata.insert(FORMAT_KEY.into(), FORMAT.into());
    metadata.insert(SIZES_KEY.into(), join(&model.sizes()));
    metadata.insert(ACTIVATION_KEY.into(), ACTIVATION.into());
    let parameters = model.named_parameters();
    let fitted = Fitted {
        variables: &parameters,
        parameters: &parameters,
        inputs: model.sizes()[0],
    };
    encode_fitted(path, &fitted, optimizer, metadata, extras)
}

/// The entries `extra` as a file's metadata, before a format adds its own.
pub(super) fn metadata_of(extra: &[(&str, String)]) -> BTreeMap<String, String> {
    extra
        .iter()
        .map(|(key, value)| (key.to_string(), value.clone()))
        .collect()
}

/// What a model file holds of a model: every variable it saves by name (an MLP's parameters; a Sequential's
/// parameters and state), those an optimizer trains, and the values one input row holds.
pub(super) struct Fitted<'a> {
    pub(super) variables: &'a [(String, Arc<Tensor>)],
    pub(super) parameters: &'a [(String, Arc<Tensor>)],
    pub(super) inputs: usize,
}

/// A model's file, whatever its format: its variables, a fit's extras (the best epoch's copy of every
/// variable as `best.<name>`, the standardisation of an input row) and the optimizer's state, beside
/// `metadata`; each extra checked against the model before anything is read from the device.
pub(super) fn encode_fitted(
    path: &Path,
    model: &Fitted<'_>,
    optimizer: Option<&dyn Optimizer>,
    mut metadata: BTreeMap<String, String>,
    extras: &FitExtras<'_>,
) -> Result<Vec<u8>> {
    let variables = model.variables;
    let mut named: Vec<(String, &Tensor)> = variables
        .iter()
        .map(|(name, tensor)| (name.clone(), tensor.as_ref()))
        .collect();
    if let Some(best) = extras.best {
        if best.len() != variables.len() {
            return Err(failure(
                path,
                format!(
                    "{} best-epoch tensors were given for the model's {} variables: give one per variable",
                    best.len(),
                    variables.len()
                ),
            ));
        }
        for ((name, variable), tensor) in variables.iter().zip(best) {
            if tensor.shape() != variable.shape() {
                return Err(failure(
                    path,
                    format!(
                        "the best-epoch copy of '{name}' has shape {:?}, not the variable's {:?}",
                        tensor.shape(),
                        variable.shape()
                    ),
                ));
            }
            named.push((format!("{BEST_PREFIX}{name}"), tensor));
        }
    }
    let mut host: Vec<(&str, &[f32])> = Vec::new();
    if let Some((mean, scale)) = extras.standardization {
        let inputs = model.inputs;
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
    if let Some(optimizer) = optimizer {
        gather_optimizer_state(optimizer, model.parameters, &mut metadata, &mut named)?;
    }
    encode_named(path, &named, &host, &metadata, Values::Finite)
}

/// The optimizer's state, as a save writes it: its kind and step count into `metadata`, and every slot's
/// tensors into `named` as `optimizer.<slot>.<parameter>`, in the model's order whatever order the steps named
/// the parameters in (the state is keyed by identity). The one place a save reads an optimizer's state.
fn gather_optimizer_state<'a>(
    optimizer: &'a dyn Optimizer,
    parameters: &[(String, Arc<Tensor>)],
    metadata: &mut BTreeMap<String, String>,
    named: &mut Vec<(String, &'a Tensor)>,
) -> Result<()> {
    let model_order: Vec<Arc<Tensor>> = parameters
        .iter()
        .map(|(_, parameter)| Arc::clone(parameter))
        .collect();
    let state = optimizer.state().in_order_of(&model_order)?;
    metadata.insert(OPTIMIZER_KEY.into(), state.kind.into());
    metadata.insert(OPTIMIZER_STEPS_KEY.into(), state.steps.to_string());
    for (slot, tensors) in state.slots {
        for ((name, _), tensor) in parameters.iter().zip(tensors) {
            named.push((format!("{SLOT_PREFIX}{slot}.{name}"), tensor));
        }
    }
    Ok(())
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

pub(super) fn encode_tensors(
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
            other @ (DType::I32 | DType::Bool) => {
                return Err(failure(
                    path,
                    format!(
                        "tensor '{name}' is {other}; checkpoints hold float32 and uint32 tensors, so convert it \
                         with astype first"
                    ),
                ))
            }
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
pub(super) struct StoredTensor {
    pub(super) name: String,
    pub(super) dtype: &'static str,
    pub(super) shape: Vec<usize>,
    pub(super) bytes: Vec<u8>,
}

/// The safetensors layout, written here rather than by the `safetensors` crate, whose header lists the
/// metadata in a hash map's order: the same model and settings then give the same bytes on every save, so a
/// checkpoint can be compared or hashed. The layout: the header's length (u64, little-endian), the header (JSON:
/// `__metadata__` in key order, then each tensor's dtype, shape and byte range in `tensors`' order, padded with
/// spaces to a multiple of 8 bytes), then the tensors' bytes.
pub(super) fn serialize(metadata: &BTreeMap<String, String>, tensors: &[StoredTensor]) -> Vec<u8> {
    let mut header = Vec::new();
    let mut serializer = serde_json::Serializer::with_formatter(&mut header, SavedEscapes);
    // Writing JSON into memory fails only on a value serde_json cannot write, and the header holds none.
    let written = Header { metadata, tensors }.serialize(&mut serializer);
    debug_assert!(written.is_ok(), "{written:?}");
    while header.len() % 8 != 0 {
        header.push(b' ');
    }
    let data: usize = tensors.iter().map(|tensor| tensor.bytes.len()).sum();
    let mut out = Vec::with_capacity(8 + header.len() + data);
    out.extend_from_slice(&(header.len() as u64).to_le_bytes());
    out.extend_from_slice(&header);
    for tensor in tensors {
        out.extend_from_slice(&tensor.bytes);
    }
    out
}

/// The header as safetensors lays it out: one JSON object, `__metadata__` first and then a member per tensor,
/// in `tensors`' order (a map type would sort them by name and so move their bytes).
struct Header<'a> {
    metadata: &'a BTreeMap<String, String>,
    tensors: &'a [StoredTensor],
}

#[derive(Serialize)]
struct TensorEntry<'a> {
    dtype: &'a str,
    shape: &'a [usize],
    data_offsets: [usize; 2],
}

impl Serialize for Header<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let mut header = serializer.serialize_map(Some(1 + self.tensors.len()))?;
        header.serialize_entry("__metadata__", self.metadata)?;
        let mut offset = 0usize;
        for tensor in self.tensors {
            let end = offset + tensor.bytes.len();
            let entry = TensorEntry {
                dtype: tensor.dtype,
                shape: &tensor.shape,
                data_offsets: [offset, end],
            };
            header.serialize_entry(&tensor.name, &entry)?;
            offset = end;
        }
        header.end()
    }
}

/// serde_json's compact JSON, with U+0008 and U+000C escaped as `\u0008` and `\u000c` (serde_json's own are
/// `\b` and `\f`), as every checkpoint saved so far holds them: the same save gives the same bytes.
struct SavedEscapes;

impl Formatter for SavedEscapes {
    fn write_char_escape<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        char_escape: CharEscape,
    ) -> std::io::Result<()> {
        match char_escape {
            CharEscape::Backspace => writer.write_all(b"\\u0008"),
            CharEscape::FormFeed => writer.write_all(b"\\u000c"),
            other => CompactFormatter.write_char_escape(writer, other),
        }
    }
}

/// Writes `bytes` to a temporary file beside `path`, then renames it over `path`: a reader never sees half a
/// file, a failed write leaves an older file whole, and saves racing to one path (from threads or processes)
/// each write their own temporary file, the last rename winning whole.
pub(super) fn write_whole(path: &Path, bytes: &[u8]) -> Result<()> {
    crate::outputs::write_whole(path, bytes).map_err(|error| match error.into_parts() {
        (message, Some(cause)) => failure_caused(path, message, cause),
        (message, None) => failure(path, message),
    })
}
