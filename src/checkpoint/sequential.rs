//! A [`Sequential`] in a checkpoint (format=wgcompute.sequential): its configuration as JSON in the metadata
//! (`model.config`), its weights and state by their names (`layers.<i>.kernel`, `layers.<i>.moving_mean`, ...),
//! each dropout layer's count of draws (`layers.<i>.draws`), and where saved with one, its optimizer's state
//! (`optimizer`, `optimizer.steps`, `optimizer.<slot>.<parameter>`), as an MLP's file holds it.

use std::path::Path;

use crate::error::Result;
use crate::nn::{Sequential, SequentialConfig};
use crate::optim::Optimizer;
use crate::session::Session;
use crate::tensor::Tensor;

use super::reader::f32_values;
use super::schema::{
    check_slots, parse_optimizer, plain_decimal, shown, BEST_PREFIX, FORMAT_KEY, SLOT_PREFIX,
    STANDARDIZE_MEAN, STANDARDIZE_SCALE,
};
use super::writer::{encode_fitted, metadata_of, write_whole, Fitted};
use super::{failure, Checkpoint, FitExtras, DAMAGED};

/// The format a [`Sequential`] is saved in.
pub const SEQUENTIAL_FORMAT: &str = "wgcompute.sequential";
/// The metadata key of its configuration.
pub const MODEL_CONFIG_KEY: &str = "model.config";

/// The metadata key of layer `index`'s count of draws.
fn draws_key(index: usize) -> String {
    format!("layers.{index}.draws")
}

/// Writes `model` (its configuration, weights and state, and `optimizer`'s state where given) to `path`, whole
/// or not at all, with the metadata entries `extra` beside; [`Checkpoint::sequential`] reads the model back and
/// [`Checkpoint::restore_sequential_optimizer`] the optimizer's state.
pub fn save_sequential(
    path: impl AsRef<Path>,
    model: &Sequential,
    optimizer: Option<&dyn Optimizer>,
    extra: &[(&str, String)],
) -> Result<()> {
    let path = path.as_ref();
    let bytes = encode_sequential(path, model, optimizer, extra, &FitExtras::default())?;
    write_whole(path, &bytes)
}

/// The bytes [`save_sequential`] writes.
pub fn sequential_to_bytes(
    model: &Sequential,
    optimizer: Option<&dyn Optimizer>,
    extra: &[(&str, String)],
) -> Result<Vec<u8>> {
    encode_sequential(
        Path::new("(in memory)"),
        model,
        optimizer,
        extra,
        &FitExtras::default(),
    )
}

/// [`sequential_to_bytes`] with a fit's extras: the standardisation of the inputs (`standardize.mean` and
/// `standardize.scale`, one of each per input value) and the best epoch's copy of every variable
/// (`best.<name>`), which [`Checkpoint::sequential_standardization`] and [`Checkpoint::sequential_best`] read.
pub fn sequential_to_bytes_with_extras(
    model: &Sequential,
    optimizer: Option<&dyn Optimizer>,
    extra: &[(&str, String)],
    extras: &FitExtras<'_>,
) -> Result<Vec<u8>> {
    encode_sequential(Path::new("(in memory)"), model, optimizer, extra, extras)
}

fn encode_sequential(
    path: &Path,
    model: &Sequential,
    optimizer: Option<&dyn Optimizer>,
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
    let mut metadata = metadata_of(extra);
    metadata.insert(FORMAT_KEY.into(), SEQUENTIAL_FORMAT.into());
    metadata.insert(MODEL_CONFIG_KEY.into(), model.config().to_json());
    for (index, layer) in model.layers().iter().enumerate() {
        if let Some(draws) = layer.draws() {
            metadata.insert(draws_key(index), draws.to_string());
        }
    }
    let fitted = Fitted {
        variables: &model.named_variables(),
        parameters: &model.named_parameters(),
        inputs: model.input_values(),
    };
    encode_fitted(path, &fitted, optimizer, metadata, extras)
}

impl Checkpoint {
    /// The [`Sequential`] a file of format wgcompute.sequential holds, built in `session` from its
    /// configuration and given its weights and state. A file of another format, a configuration that does not
    /// build, or a missing tensor or one of another shape is an error naming it.
    pub fn sequential(&self, session: &Session) -> Result<Sequential> {
        let config = self.sequential_config()?;
        // The file's model tensors bound what its config may make: no layer is built past them.
        let held: u64 = self
            .layout
            .header
            .tensors()
            .iter()
            .filter(|(name, _)| name.starts_with("layers."))
            .map(|(_, info)| (info.data_offsets.1 - info.data_offsets.0) as u64 / 4)
            .sum();
        let model = Sequential::new_within(session, config, 0, held)
            .map_err(|error| failure(self.path(), format!("its model does not build: {error}")))?;
        for (name, tensor) in model.named_variables() {
            self.load_tensor_into(&name, &tensor)?;
        }
        for (index, layer) in model.layers().iter().enumerate() {
            if layer.draws().is_none() {
                continue;
            }
            let key = draws_key(index);
            let draws = match self.metadata().get(&key) {
                // A file saved before any training pass, or by another writer: no draws yet.
                None => 0,
                Some(text) => plain_decimal::<u64>(text).ok_or_else(|| {
                    failure(
                        self.path(),
                        format!(
                            "its metadata '{key}' is '{}', not a count; {DAMAGED}",
                            shown(text)
                        ),
                    )
                })?,
            };
            layer.set_draws(draws);
        }
        Ok(model)
    }

    /// Gives `optimizer` the state saved for `model` (built by [`Checkpoint::sequential`] from this file).
    /// Returns whether the file held any (false for a file saved without an optimizer, or before its first
    /// step). A file of another optimizer, state this optimizer does not keep, a step count without the state
    /// every step keeps, or a slot of another shape or not finite is an error, and the optimizer is unchanged.
    pub fn restore_sequential_optimizer(
        &self,
        session: &Session,
        model: &Sequential,
        optimizer: &mut dyn Optimizer,
    ) -> Result<bool> {
        let Some((kind, steps)) = parse_optimizer(self.path(), self.metadata())? else {
            return Ok(false);
        };
        let state = optimizer.state();
        self.expect_optimizer_kind(&kind, state.kind)?;
        let kept: Vec<&'static str> = state.slots.iter().map(|(name, _)| *name).collect();
        let names = self.names()?;
        let saved: Vec<&str> = names
            .iter()
            .filter_map(|name| name.strip_prefix(SLOT_PREFIX))
            .filter_map(|rest| rest.split_once(".layers.").map(|(slot, _)| slot))
            .collect();
        check_slots(
            self.path(),
            &kind,
            steps,
            kept.iter().copied(),
            saved.iter().copied(),
        )?;
        if steps == 0 {
            return Ok(false);
        }
        self.restore_slots(session, &model.named_parameters(), &kept, steps, optimizer)?;
        Ok(true)
    }

    /// The best-epoch copies of `model`'s variables a fit with early stopping keeps (`best.<name>`), in
    /// [`Sequential::named_variables`] order, in `session`; `None` if the file holds none, and an error if it
    /// holds some but not all.
    pub fn sequential_best(
        &self,
        session: &Session,
        model: &Sequential,
    ) -> Result<Option<Vec<Tensor>>> {
        let variables = model.named_variables();
        let names = self.names()?;
        let held = variables
            .iter()
            .filter(|(name, _)| names.contains(&format!("{BEST_PREFIX}{name}")))
            .count();
        if held == 0 {
            return Ok(None);
        }
        if held != variables.len() {
            return Err(failure(
                self.path(),
                format!(
                    "it holds best-epoch copies of {held} of the model's {} variables, not of all; {DAMAGED}",
                    variables.len()
                ),
            ));
        }
        variables
            .iter()
            .map(|(name, tensor)| {
                self.upload(session, &format!("{BEST_PREFIX}{name}"), tensor.shape())
            })
            .collect::<Result<Vec<_>>>()
            .map(Some)
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
        let inputs = self.sequential_config()?.input_values()?;
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
