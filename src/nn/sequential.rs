//! Keras's `Sequential`: layers applied in order, the whole model described by one JSON document.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::autograd::GradientTape;
use crate::error::{Error, ErrorKind, Result};
use crate::session::Session;
use crate::shape::element_count;
use crate::tensor::Tensor;

use super::config::{invalid, LayerConfig};
use super::group_norm::GroupNormalization;
use super::layers::{
    ActivationLayer, AveragePooling2D, BatchNormalization, Conv2D, Dense, Dropout, Embedding,
    Flatten, GlobalAveragePooling2D, Layer, LayerNormalization, MaxPooling2D, Reshape,
};
use super::Module;

impl LayerConfig {
    /// The layer, its weights made in `session` for samples of `input_shape` (the batch axis left out) and
    /// drawn from `seed`. Every argument is checked here; the shapes, by the layer's first pass.
    pub fn build(
        &self,
        session: &Session,
        input_shape: &[usize],
        seed: u64,
    ) -> Result<Box<dyn Layer>> {
        Ok(match self {
            LayerConfig::Dense(config) => Box::new(Dense::new(session, config, input_shape, seed)?),
            LayerConfig::Conv2D(config) => {
                Box::new(Conv2D::new(session, config, input_shape, seed)?)
            }
            LayerConfig::MaxPooling2D(config) => Box::new(MaxPooling2D::new(config)?),
            LayerConfig::AveragePooling2D(config) => Box::new(AveragePooling2D::new(config)?),
            LayerConfig::GlobalAveragePooling2D => Box::new(GlobalAveragePooling2D),
            LayerConfig::Flatten => Box::new(Flatten),
            LayerConfig::Reshape(config) => Box::new(Reshape::new(config, input_shape)?),
            LayerConfig::Dropout(config) => Box::new(Dropout::new(config, seed)?),
            LayerConfig::Activation(config) => Box::new(ActivationLayer::new(&config.activation)?),
            LayerConfig::LayerNormalization(config) => {
                Box::new(LayerNormalization::new(session, config, input_shape)?)
            }
            LayerConfig::BatchNormalization(config) => {
                Box::new(BatchNormalization::new(session, config, input_shape)?)
            }
            LayerConfig::GroupNormalization(config) => {
                Box::new(GroupNormalization::new(session, config, input_shape)?)
            }
            LayerConfig::Embedding(config) => Box::new(Embedding::new(session, config, seed)?),
        })
    }
}

/// What a [`Sequential`] is made of: each sample's shape (the batch axis left out) and the layers, by Keras's
/// class names and arguments.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SequentialConfig {
    pub input_shape: Vec<usize>,
    pub layers: Vec<LayerConfig>,
}

impl SequentialConfig {
    /// The configuration a JSON document gives; an unknown layer, argument or value is an error naming it.
    pub fn from_json(text: &str) -> Result<Self> {
        serde_json::from_str(text).map_err(|error| Error::InvalidArgument {
            what: "model config",
            given: error.to_string(),
            expected: "{\"input_shape\": [...], \"layers\": [{\"class_name\": ..., \"config\": {...}}, ...]} \
                       with Keras's class names and arguments"
                .to_string(),
        })
    }

    /// The values a sample holds, the product of `input_shape`: an error where it overflows, or where the shape
    /// is no sample's (empty, or a size of 0).
    pub fn input_values(&self) -> Result<usize> {
        let invalid = || Error::InvalidArgument {
            what: "input_shape",
            given: format!("{:?}", self.input_shape),
            expected: "a sample's shape: one size or more, each at least 1, of a countable product"
                .to_string(),
        };
        if self.input_shape.is_empty() || self.input_shape.contains(&0) {
            return Err(invalid());
        }
        element_count("input_shape", &self.input_shape).map_err(|_| invalid())
    }

    /// The configuration as one line of JSON, which [`SequentialConfig::from_json`] reads back.
    pub fn to_json(&self) -> String {
        // A config of strings, numbers and lists: nothing in it can fail to serialise.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// Layers applied in order. A batch `[n, ...input_shape]` goes in (rows of `product(input_shape)` values are
/// taken as the samples they hold, so a dataset of flat rows trains an image model), a batch
/// `[n, ...output_shape]` comes out.
pub struct Sequential {
    config: SequentialConfig,
    layers: Vec<Box<dyn Layer>>,
    output_shape: Vec<usize>,
    /// The product of the input shape, checked when the model was built.
    input_values: usize,
}

impl Sequential {
    /// The model `config` describes, in `session`, layer `i`'s weights (and a dropout layer's draws, unless its
    /// config gives a seed; [`Sequential::config`] then does) drawn from `seed + i`. Each layer is
    /// built for the shape the layers before it give, found by running them on one zero sample, so a shape a
    /// layer cannot take is an error here, naming the layer.
    pub fn new(session: &Session, config: SequentialConfig, seed: u64) -> Result<Self> {
        Self::new_within(session, config, seed, u64::MAX)
    }

    /// [`Sequential::new`] refused, before any layer past it is made, where the weights and state of the
    /// layers would hold more than `most_values` values ([`LayerConfig::weight_values`]): what a loader of an
    /// untrusted file asks, whose tensors bound what its config may describe.
    pub fn new_within(
        session: &Session,
        config: SequentialConfig,
        seed: u64,
        most_values: u64,
    ) -> Result<Self> {
        let input_values = config.input_values()?;
        let mut config = config;
        // A dropout layer's seed is the model's (offset by its position) unless given, and kept in the config, so
        // that a model built again from its config (a loaded one) draws as this one does.
        for (index, layer) in config.layers.iter_mut().enumerate() {
            if let LayerConfig::Dropout(dropout) = layer {
                dropout.seed.get_or_insert(seed.wrapping_add(index as u64));
            }
        }
        let mut shape = config.input_shape.clone();
        let mut layers = Vec::with_capacity(config.layers.len());
        let mut values = 0u64;
        for (index, layer_config) in config.layers.iter().enumerate() {
            values = values.saturating_add(layer_config.weight_values(&shape));
            if values > most_values {
                return Err(Error::InvalidArgument {
                    what: "model config",
                    given: format!(
                        "layers up to {index} ({}) whose weights hold {values} values",
                        layer_config.class_name()
                    ),
                    expected: format!("weights of at most {most_values} values"),
                });
            }
            let in_layer = |error: Error| match error.kind() {
                // What the session or the device refused is not the config's fault: it keeps its kind, so that
                // a caller can tell a full pool or a closed session from a layer that cannot be.
                ErrorKind::OutOfMemory
                | ErrorKind::SessionClosed
                | ErrorKind::Suspended
                | ErrorKind::DeviceLost
                | ErrorKind::Driver
                | ErrorKind::Interrupted => error,
                _ => Error::InvalidArgument {
                    what: "model config",
                    given: format!(
                        "layer {index} ({}) on samples of shape {shape:?}",
                        layer_config.class_name()
                    ),
                    expected: error.to_string(),
                },
            };
            let layer = layer_config
                .build(session, &shape, seed.wrapping_add(index as u64))
                .map_err(in_layer)?;
            let sample: Vec<usize> = std::iter::once(1).chain(shape.iter().copied()).collect();
            let output = layer
                .call(&session.zeros(&sample)?, None)
                .map_err(in_layer)?;
            shape = output.shape()[1..].to_vec();
            layers.push(layer);
        }
        Ok(Sequential {
            config,
            layers,
            output_shape: shape,
            input_values,
        })
    }

    pub fn config(&self) -> &SequentialConfig {
        &self.config
    }

    /// Each sample's shape going in, the batch axis left out.
    pub fn input_shape(&self) -> &[usize] {
        &self.config.input_shape
    }

    /// The values one sample holds: the product of [`Sequential::input_shape`], a row's width.
    pub fn input_values(&self) -> usize {
        self.input_values
    }

    /// Each sample's shape coming out.
    pub fn output_shape(&self) -> &[usize] {
        &self.output_shape
    }

    pub fn layers(&self) -> &[Box<dyn Layer>] {
        &self.layers
    }

    /// The pass of a batch: training with `tape` (see [`Layer::call`]), else inference.
    pub fn call(&self, x: &Tensor, tape: Option<&GradientTape>) -> Result<Tensor> {
        let sample = self.input_values;
        let batch = x.shape().first().copied().unwrap_or(0);
        let mut current = if &x.shape()[1.min(x.shape().len())..] == self.input_shape() {
            x.handle()
        } else if x.shape().len() == 2 && x.shape()[1] == sample {
            let shape: Vec<usize> = std::iter::once(batch)
                .chain(self.config.input_shape.iter().copied())
                .collect();
            x.view_as(&shape)?
        } else {
            return Err(Error::Shape {
                op: "Sequential",
                message: format!(
                    "takes a batch of samples of shape {:?} (or rows of {sample} values); got shape {:?}",
                    self.config.input_shape,
                    x.shape()
                ),
            });
        };
        for layer in &self.layers {
            current = layer.call(&current, tape)?;
        }
        Ok(current)
    }

    /// The trained weights by name, `layers.<i>.<name>` (Keras's weight names: kernel, bias, gamma, ...), in
    /// [`Module::parameters`] order.
    pub fn named_parameters(&self) -> Vec<(String, Arc<Tensor>)> {
        self.named(|layer| layer.weights())
    }

    /// The state a training pass moves (batch normalisation's moving statistics), named as the parameters.
    pub fn named_state(&self) -> Vec<(String, Arc<Tensor>)> {
        self.named(|layer| layer.state())
    }

    /// The parameters and then the state: every value the model's outputs depend on.
    pub fn named_variables(&self) -> Vec<(String, Arc<Tensor>)> {
        let mut variables = self.named_parameters();
        variables.extend(self.named_state());
        variables
    }

    /// The model's variables (those [`Sequential::named_variables`] names) become `given`'s tensors, shared
    /// rather than copied, so that a caller holding them sees every step and every move of the statistics, and an
    /// optimizer that keys its state by those tensors goes on with it (the Python package's Keras layers,
    /// trained by the library's loop). `given` names each variable once, with its shape, as f32 in this model's
    /// session; otherwise nothing is replaced and the error names the first that differs.
    pub fn share_variables(&mut self, given: Vec<(String, Arc<Tensor>)>) -> Result<()> {
        let count = given.len();
        let mut given: std::collections::HashMap<String, Arc<Tensor>> = given.into_iter().collect();
        if given.len() != count {
            return Err(invalid("variables", "a name given twice", "each name once"));
        }
        let wanted = self.named_variables();
        if wanted.len() != given.len() {
            let mut extra: Vec<&String> = given
                .keys()
                .filter(|name| !wanted.iter().any(|(wanted, _)| wanted == *name))
                .collect();
            extra.sort();
            return Err(invalid(
                "variables",
                format!("{} tensors (not the model's: {extra:?})", given.len()),
                &format!(
                    "the model's {}: {:?}",
                    wanted.len(),
                    wanted.iter().map(|(name, _)| name).collect::<Vec<_>>()
                ),
            ));
        }
        for (name, own) in &wanted {
            let Some(tensor) = given.get(name) else {
                return Err(invalid(
                    "variables",
                    format!("none named {name:?}"),
                    "every variable of the model",
                ));
            };
            if tensor.shape() != own.shape() || tensor.dtype() != own.dtype() {
                return Err(invalid(
                    "variables",
                    format!(
                        "{name} of shape {:?} ({:?})",
                        tensor.shape(),
                        tensor.dtype()
                    ),
                    &format!("shape {:?} ({:?})", own.shape(), own.dtype()),
                ));
            }
            own.expect_same_session("Sequential::share_variables", tensor)?;
        }
        for (index, layer) in self.layers.iter_mut().enumerate() {
            for (name, slot) in layer.variables_mut() {
                if let Some(tensor) = given.remove(&format!("layers.{index}.{name}")) {
                    *slot = tensor;
                }
            }
        }
        // Every layer gives the same names to replace as it reports: a layer that did not would leave one behind.
        match given.keys().next() {
            None => Ok(()),
            Some(name) => Err(invalid(
                "variables",
                format!("{name} left unshared"),
                "a layer that replaces every variable it has",
            )),
        }
    }

    fn named(
        &self,
        of: impl Fn(&dyn Layer) -> Vec<(&'static str, Arc<Tensor>)>,
    ) -> Vec<(String, Arc<Tensor>)> {
        self.layers
            .iter()
            .enumerate()
            .flat_map(|(index, layer)| {
                of(layer.as_ref())
                    .into_iter()
                    .map(move |(name, tensor)| (format!("layers.{index}.{name}"), tensor))
            })
            .collect()
    }
}

impl std::fmt::Debug for Sequential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sequential")
            .field("config", &self.config)
            .field("output_shape", &self.output_shape)
            .finish_non_exhaustive()
    }
}

impl Module for Sequential {
    fn forward(&self, tape: &GradientTape, x: &Tensor) -> Result<Tensor> {
        self.call(x, Some(tape))
    }

    fn infer(&self, x: &Tensor) -> Result<Tensor> {
        self.call(x, None)
    }

    fn parameters(&self) -> Vec<Arc<Tensor>> {
        self.layers
            .iter()
            .flat_map(|layer| layer.weights())
            .map(|(_, tensor)| tensor)
            .collect()
    }
}
