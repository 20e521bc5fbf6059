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
//! A [`Sequential`](crate::nn::Sequential) is saved by [`save_sequential`] (format=wgcompute.sequential): its
//! configuration as JSON in `model.config`, its weights and state by their names; [`Checkpoint::sequential`]
//! builds it again.
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

mod reader;
mod schema;
mod sequential;
#[cfg(test)]
mod tests;
mod writer;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use safetensors::tensor::Dtype;

use crate::error::{Error, Result};
use crate::nn::{Linear, Mlp};
use crate::optim::Optimizer;
use crate::session::Session;
use crate::tensor::{DType, Tensor};

use reader::{
    f32_values, first_f32_where, read_safetensors, u32_values, FileData, StoredLayout, StoredView,
};
use schema::{
    check_mlp, check_slots, parameter_name, role_of, shown, MlpContents, Part, BEST_PREFIX, FORMAT,
    FORMAT_KEY, OPTIMIZER_KEY, SLOT_PREFIX, STANDARDIZE_MEAN, STANDARDIZE_SCALE,
};
use writer::{encode, encode_tensors, write_whole};

pub use sequential::{
    save_sequential, sequential_to_bytes, sequential_to_bytes_with_extras, MODEL_CONFIG_KEY,
    SEQUENTIAL_FORMAT,
};

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
            other @ (DType::I32 | DType::Bool) => {
                return Err(failure(
                    &self.path,
                    format!("cannot load '{name}' into a {other} tensor; checkpoints hold float32 and uint32 tensors"),
                ))
            }
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
        self.expect_optimizer_kind(&saved.kind, state.kind)?;
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
        self.restore_slots(
            session,
            &model.named_parameters(),
            &kept,
            saved.steps,
            optimizer,
        )?;
        Ok(true)
    }

    /// Errors unless the file's optimizer state, of kind `held`, is of the optimizer's kind.
    fn expect_optimizer_kind(&self, held: &str, kind: &str) -> Result<()> {
        if held == kind {
            return Ok(());
        }
        Err(failure(
            &self.path,
            format!(
                "it holds the state of a '{}' optimizer, not of '{kind}': resume with the same optimizer",
                shown(held)
            ),
        ))
    }

    /// Gives `optimizer` the file's state of `steps` steps for `parameters`: each kept slot's tensor
    /// `optimizer.<slot>.<parameter>`, of the parameter's shape and finite, in the parameters' order. A state
    /// that does not fit the optimizer is an error naming the file, and the optimizer is unchanged.
    fn restore_slots(
        &self,
        session: &Session,
        parameters: &[(String, Arc<Tensor>)],
        kept: &[&'static str],
        steps: u64,
        optimizer: &mut dyn Optimizer,
    ) -> Result<()> {
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
        let parameters: Vec<Arc<Tensor>> = parameters
            .iter()
            .map(|(_, tensor)| Arc::clone(tensor))
            .collect();
        optimizer
            .restore(&parameters, steps, slots)
            .map_err(|error| match error {
                Error::InvalidArgument { .. } => failure_caused(
                    &self.path,
                    format!("its optimizer state does not fit the optimizer ({error}); {DAMAGED}"),
                    error,
                ),
                other => other,
            })?;
        Ok(())
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
