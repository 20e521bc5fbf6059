//! A [`Sequential`] in a checkpoint (format=wgcompute.sequential): its configuration as JSON in the metadata
//! (`model.config`), its weights and state by their names (`layers.<i>.kernel`, `layers.<i>.moving_mean`, ...).

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::Result;
use crate::nn::{Sequential, SequentialConfig};
use crate::session::Session;
use crate::tensor::Tensor;

use super::reader::f32_values;
use super::schema::{BEST_PREFIX, FORMAT_KEY, STANDARDIZE_MEAN, STANDARDIZE_SCALE};
use super::writer::{encode_named, write_whole, Values};
use super::{failure, Checkpoint, FitExtras};

/// The format a [`Sequential`] is saved in.
pub const SEQUENTIAL_FORMAT: &str = "wgcompute.sequential";
/// The metadata key of its configuration.
pub const MODEL_CONFIG_KEY: &str = "model.config";

/// Writes `model` (its configuration, weights and state) to `path`, whole or not at all, with the metadata
/// entries `extra` beside; [`Checkpoint::sequential`] reads it back.
pub fn save_sequential(
    path: impl AsRef<Path>,
    model: &Sequential,
    extra: &[(&str, String)],
) -> Result<()> {
    let path = path.as_ref();
    let bytes = encode_sequential(path, model, extra, &FitExtras::default())?;
    write_whole(path, &bytes)
}

/// The bytes [`save_sequential`] writes.
pub fn sequential_to_bytes(model: &Sequential, extra: &[(&str, String)]) -> Result<Vec<u8>> {
    encode_sequential(
        Path::new("(in memory)"),
        model,
        extra,
        &FitExtras::default(),
    )
}

/// [`sequential_to_bytes`] with a fit's extras: the standardisation of the inputs (`standardize.mean` and
/// `standardize.scale`, one of each per input value) and the best epoch's copy of every variable
/// (`best.<name>`); [`Checkpoint::sequential_standardization`] reads the first.
pub fn sequential_to_bytes_with_extras(
    model: &Sequential,
    extra: &[(&str, String)],
    extras: &FitExtras<'_>,
) -> Result<Vec<u8>> {
    encode_sequential(Path::new("(in memory)"), model, extra, extras)
}

fn encode_sequential(
    path: &Path,
    model: &Sequential,
    extra: &[(&str, String)],
    extras: &FitExtras<'_>,
) -> Result<Vec<u8>> {
    if let Some((key, _)) = extra
        .iter()
        .find(|(key, _)| *key == FORMAT_KEY || *key == MODEL_CONFIG_KEY)
    {
        return Err(failure(
            path,
            format!("the metadata '{key}' is the model's own; give extra entries other names"),
        ));
    }
    let variables = model.named_variables();
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
        for ((name, _), tensor) in variables.iter().zip(best) {
            named.push((format!("{BEST_PREFIX}{name}"), tensor));
        }
    }
    let inputs: usize = model.input_shape().iter().product();
    let mut host: Vec<(&str, &[f32])> = Vec::new();
    if let Some((mean, scale)) = extras.standardization {
        if mean.len() != inputs || scale.len() != inputs {
            return Err(failure(
                path,
                format!(
                    "a standardization of {} means and {} scales was given for a model of {inputs} input values",
                    mean.len(),
                    scale.len()
                ),
            ));
        }
        host.push((STANDARDIZE_MEAN, mean));
        host.push((STANDARDIZE_SCALE, scale));
    }
    let mut metadata: BTreeMap<String, String> = extra
        .iter()
        .map(|(key, value)| (key.to_string(), value.clone()))
        .collect();
    metadata.insert(FORMAT_KEY.into(), SEQUENTIAL_FORMAT.into());
    metadata.insert(MODEL_CONFIG_KEY.into(), model.config().to_json());
    encode_named(path, &named, &host, &metadata, Values::Finite)
}

impl Checkpoint {
    /// The [`Sequential`] a file of format wgcompute.sequential holds, built in `session` from its
    /// configuration and given its weights and state. A file of another format, a configuration that does not
    /// build, or a missing tensor or one of another shape is an error naming it.
    pub fn sequential(&self, session: &Session) -> Result<Sequential> {
        let config = self.sequential_config()?;
        let model = Sequential::new(session, config, 0)
            .map_err(|error| failure(self.path(), format!("its model does not build: {error}")))?;
        for (name, tensor) in model.named_variables() {
            self.load_tensor_into(&name, &tensor)?;
        }
        Ok(model)
    }

    /// The configuration of the [`Sequential`] a file of format wgcompute.sequential holds, read without a
    /// session.
    pub fn sequential_config(&self) -> Result<SequentialConfig> {
        let format = self.metadata().get(FORMAT_KEY).map(String::as_str);
        if format != Some(SEQUENTIAL_FORMAT) {
            return Err(failure(
                self.path(),
                format!(
                    "its format is {}, not {SEQUENTIAL_FORMAT}: it does not hold a Sequential model",
                    format.unwrap_or("not given")
                ),
            ));
        }
        let text = self.metadata().get(MODEL_CONFIG_KEY).ok_or_else(|| {
            failure(
                self.path(),
                format!("it has no '{MODEL_CONFIG_KEY}': the file was altered"),
            )
        })?;
        SequentialConfig::from_json(text)
            .map_err(|error| failure(self.path(), format!("its '{MODEL_CONFIG_KEY}': {error}")))
    }

    /// The per-value (mean, scale) a fit of a Sequential standardised its inputs with, if it did (both
    /// vectors or neither, of the model's input count, every scale finite and above 0).
    pub fn sequential_standardization(&self) -> Result<Option<(Vec<f32>, Vec<f32>)>> {
        let names = self.names()?;
        let held = |name: &str| names.iter().any(|held| held == name);
        match (held(STANDARDIZE_MEAN), held(STANDARDIZE_SCALE)) {
            (false, false) => return Ok(None),
            (true, true) => {}
            _ => {
                return Err(failure(
                    self.path(),
                    "it holds one of standardize.mean and standardize.scale without the other: the file was \
                     altered",
                ))
            }
        }
        let inputs: usize = self.sequential_config()?.input_shape.iter().product();
        let read = |name: &str| -> Result<Vec<f32>> {
            let view = self.view(name)?;
            if view.shape != [inputs] {
                return Err(failure(
                    self.path(),
                    format!(
                        "'{name}' has shape {:?}, not the model's [{inputs}]",
                        view.shape
                    ),
                ));
            }
            Ok(f32_values(&view.data))
        };
        let (mean, scale) = (read(STANDARDIZE_MEAN)?, read(STANDARDIZE_SCALE)?);
        if mean.iter().any(|value| !value.is_finite())
            || scale
                .iter()
                .any(|value| !(value.is_finite() && *value > 0.0))
        {
            return Err(failure(
                self.path(),
                "its standardisation holds a mean that is not finite or a scale not above 0: the file was altered",
            ));
        }
        Ok(Some((mean, scale)))
    }
}
