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
use super::merging::{Merge, Merging};
use super::sequence::{Conv1D, GlobalAveragePooling1D, GlobalMaxPooling, Pooling1D};
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
            LayerConfig::Conv1D(config) => {
                Box::new(Conv1D::new(session, config, input_shape, seed)?)
            }
            LayerConfig::MaxPooling1D(config) => Box::new(Pooling1D::new(config, true)?),
            LayerConfig::AveragePooling1D(config) => Box::new(Pooling1D::new(config, false)?),
            LayerConfig::GlobalAveragePooling1D => Box::new(GlobalAveragePooling1D),
            LayerConfig::GlobalMaxPooling1D => Box::new(GlobalMaxPooling { images: false }),
            LayerConfig::GlobalMaxPooling2D => Box::new(GlobalMaxPooling { images: true }),
            LayerConfig::Add => Box::new(Merge::new(Merging::Add)),
            LayerConfig::Subtract => Box::new(Merge::new(Merging::Subtract)),
            LayerConfig::Multiply => Box::new(Merge::new(Merging::Multiply)),
            LayerConfig::Average => Box::new(Merge::new(Merging::Average)),
            LayerConfig::Concatenate(config) => Box::new(Merge::concatenate(config)),
        })
    }
}

/// What a [`Sequential`] is made of: each sample's shape (the batch axis left out) and the layers, by Keras's
/// class names and arguments; and, for a graph of layers (Keras's functional model), what each layer takes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SequentialConfig {
    pub input_shape: Vec<usize>,
    pub layers: Vec<LayerConfig>,
    /// Where the layers form a graph rather than a chain (a residual connection, branches merged by `Add` or
    /// `Concatenate`): layer `i`'s inputs, each `0` for the model's input or `j + 1` for the output of an
    /// earlier layer `j`. The last layer's output is the model's, and every other value feeds a later layer.
    /// Left out, each layer takes the output of the one before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<Vec<Vec<usize>>>,
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

    /// Each layer's inputs, as [`SequentialConfig::inputs`] numbers them (a chain's where it is left out): an
    /// error where a layer takes none, or a later layer's output, or where a value other than the model's
    /// output feeds no layer.
    pub fn layer_inputs(&self) -> Result<Vec<Vec<usize>>> {
        let Some(inputs) = &self.inputs else {
            return Ok((0..self.layers.len()).map(|index| vec![index]).collect());
        };
        let wrong = |given: String| {
            Err(Error::InvalidArgument {
                what: "model config inputs",
                given,
                expected: "a list per layer of the values it takes: 0 the model's input, j + 1 an earlier \
                           layer j's output; every value but the last layer's taken by some layer"
                    .to_string(),
            })
        };
        if inputs.len() != self.layers.len() {
            return wrong(format!(
                "{} lists for {} layers",
                inputs.len(),
                self.layers.len()
            ));
        }
        let mut used = vec![false; self.layers.len()];
        for (index, taken) in inputs.iter().enumerate() {
            if taken.is_empty() {
                return wrong(format!("no input for layer {index}"));
            }
            for &value in taken {
                if value > index {
                    return wrong(format!(
                        "layer {index} takes value {value}, not made before it"
                    ));
                }
                used[value] = true;
            }
        }
        match used.iter().position(|&used| !used) {
            Some(0) => wrong("no layer takes the model's input".to_string()),
            Some(value) => wrong(format!("the output of layer {} goes nowhere", value - 1)),
            None => Ok(inputs.clone()),
        }
    }

    /// The activation the model's outputs leave with: that of the layer that makes them, or where that layer
    /// only moves values (Flatten, Reshape, Dropout), of the layer before it (its input's, in a graph).
    pub fn output_activation(&self) -> Option<&str> {
        let inputs = self.layer_inputs().ok()?;
        let mut index = self.layers.len().checked_sub(1)?;
        loop {
            let layer = &self.layers[index];
            if !matches!(
                layer,
                LayerConfig::Flatten | LayerConfig::Reshape(_) | LayerConfig::Dropout(_)
            ) {
                return layer.activation();
            }
            index = inputs[index].first()?.checked_sub(1)?;
        }
    }

    /// The layers that take the model's input (the first, in a chain).
    pub fn input_layers(&self) -> Vec<&LayerConfig> {
        match self.layer_inputs() {
            Ok(inputs) => self
                .layers
                .iter()
                .zip(inputs)
                .filter(|(_, taken)| taken.contains(&0))
                .map(|(layer, _)| layer)
                .collect(),
            Err(_) => Vec::new(),
        }
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
    /// What each layer takes ([`SequentialConfig::layer_inputs`]), checked when the model was built.
    layer_inputs: Vec<Vec<usize>>,
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
        let layer_inputs = config.layer_inputs()?;
        let mut config = config;
        // A dropout layer's seed is the model's (offset by its position) unless given, and kept in the config, so
        // that a model built again from its config (a loaded one) draws as this one does.
        for (index, layer) in config.layers.iter_mut().enumerate() {
            if let LayerConfig::Dropout(dropout) = layer {
                dropout.seed.get_or_insert(seed.wrapping_add(index as u64));
            }
        }
        let mut layers: Vec<Box<dyn Layer>> = Vec::with_capacity(config.layers.len());
        let mut values = 0u64;
        // Each layer is built for the samples its (first) input holds, found by running the layers before it on
        // one zero sample.
        let sample: Vec<usize> = std::iter::once(1)
            .chain(config.input_shape.iter().copied())
            .collect();
        let output = run_graph(&layer_inputs, session.zeros(&sample)?, |index, inputs| {
            let layer_config = &config.layers[index];
            let shape = inputs[0].shape()[1..].to_vec();
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
                        "layer {index} ({}) on samples of shape {:?}",
                        layer_config.class_name(),
                        inputs
                            .iter()
                            .map(|input| &input.shape()[1..])
                            .collect::<Vec<_>>()
                    ),
                    expected: error.to_string(),
                },
            };
            let layer = layer_config
                .build(session, &shape, seed.wrapping_add(index as u64))
                .map_err(in_layer)?;
            let output = layer.call_inputs(inputs, None).map_err(in_layer)?;
            layers.push(layer);
            Ok(output)
        })?;
        let shape = output.shape()[1..].to_vec();
        Ok(Sequential {
            config,
            layers,
            output_shape: shape,
            input_values,
            layer_inputs,
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
        let current = if &x.shape()[1.min(x.shape().len())..] == self.input_shape() {
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
        // A chain is the graph whose layers each take the one before.
        run_graph(&self.layer_inputs, current, |index, inputs| {
            self.layers[index].call_inputs(inputs, tape)
        })
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

/// The value a graph of layers gives for `input`: `layer(index, its inputs)` run in order, each value dropped
/// once the last layer that takes it has run (`layer_inputs` as [`SequentialConfig::layer_inputs`] checked it).
fn run_graph(
    layer_inputs: &[Vec<usize>],
    input: Tensor,
    mut layer: impl FnMut(usize, &[Tensor]) -> Result<Tensor>,
) -> Result<Tensor> {
    let mut last_use = vec![0; layer_inputs.len() + 1];
    for (index, taken) in layer_inputs.iter().enumerate() {
        for &value in taken {
            last_use[value] = index;
        }
    }
    let mut values: Vec<Option<Tensor>> = Vec::with_capacity(layer_inputs.len() + 1);
    values.push(Some(input));
    for (index, taken) in layer_inputs.iter().enumerate() {
        let inputs = taken
            .iter()
            .map(|&value| {
                values[value]
                    .as_ref()
                    .map(Tensor::handle)
                    .ok_or(Error::Shape {
                        op: "Sequential",
                        message: format!(
                            "graph value {value} dropped before layer {index} takes it"
                        ),
                    })
            })
            .collect::<Result<Vec<Tensor>>>()?;
        let output = layer(index, &inputs)?;
        drop(inputs);
        for &value in taken {
            if last_use[value] == index {
                values[value] = None;
            }
        }
        values.push(Some(output));
    }
    values.pop().flatten().ok_or(Error::Shape {
        op: "Sequential",
        message: "a graph without an output".to_string(),
    })
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
