//! A layer's configuration as Keras writes it in a model's config: `{"class_name": "Conv2D", "config":
//! {"filters": 16, "kernel_size": 3, "padding": "same"}}`, Keras's argument names and defaults, every argument
//! left out taking its default and an unknown one refused (a misspelt argument is an error, not a default).

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::op::window::Padding;

/// One layer of a [`Sequential`](super::Sequential), by Keras's class name.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "class_name", content = "config", try_from = "TaggedLayer")]
pub enum LayerConfig {
    Dense(DenseConfig),
    Conv2D(Conv2DConfig),
    Conv1D(Conv1DConfig),
    MaxPooling1D(Pooling1DConfig),
    AveragePooling1D(Pooling1DConfig),
    GlobalAveragePooling1D,
    GlobalMaxPooling1D,
    GlobalMaxPooling2D,
    MaxPooling2D(PoolingConfig),
    AveragePooling2D(PoolingConfig),
    GlobalAveragePooling2D,
    Flatten,
    Reshape(ReshapeConfig),
    Dropout(DropoutConfig),
    Activation(ActivationConfig),
    LayerNormalization(LayerNormalizationConfig),
    BatchNormalization(BatchNormalizationConfig),
    GroupNormalization(GroupNormalizationConfig),
    Embedding(EmbeddingConfig),
    /// Keras's merging layers, of a graph's two inputs or more ([`SequentialConfig::inputs`](super::SequentialConfig::inputs)):
    /// the inputs' elementwise sum.
    Add,
    /// The first input less the second.
    Subtract,
    /// The inputs' elementwise product.
    Multiply,
    /// The inputs' elementwise mean.
    Average,
    /// The inputs joined along an axis.
    Concatenate(ConcatenateConfig),
}

/// A layer as read, before its class is known: its config may be left out where every argument has a
/// default, as Keras's `Flatten()` takes none.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TaggedLayer {
    class_name: String,
    #[serde(default)]
    config: Option<serde_json::Value>,
}

const CLASS_NAMES: &str =
    "Dense, Conv2D, Conv1D, MaxPooling1D, AveragePooling1D, GlobalAveragePooling1D, GlobalMaxPooling1D, \
                           GlobalMaxPooling2D, MaxPooling2D, AveragePooling2D, GlobalAveragePooling2D, Flatten, \
                           Reshape, Dropout, Activation, LayerNormalization, BatchNormalization, \
                           GroupNormalization, Embedding, Add, Subtract, Multiply, Average or Concatenate";

impl TryFrom<TaggedLayer> for LayerConfig {
    type Error = String;

    fn try_from(layer: TaggedLayer) -> std::result::Result<Self, String> {
        let class = layer.class_name.as_str();
        let config = layer
            .config
            .unwrap_or_else(|| serde_json::Value::Object(Default::default()));
        fn read<T: serde::de::DeserializeOwned>(
            class: &str,
            config: serde_json::Value,
        ) -> std::result::Result<T, String> {
            serde_json::from_value(config).map_err(|error| format!("{class}: {error}"))
        }
        let no_arguments = |config: serde_json::Value, layer: LayerConfig| match config {
            serde_json::Value::Object(map) if map.is_empty() => Ok(layer),
            other => Err(format!("{class} takes no arguments; got {other}")),
        };
        Ok(match class {
            "Dense" => LayerConfig::Dense(read(class, config)?),
            "Conv2D" => LayerConfig::Conv2D(read(class, config)?),
            "Conv1D" => LayerConfig::Conv1D(read(class, config)?),
            "MaxPooling1D" => LayerConfig::MaxPooling1D(read(class, config)?),
            "AveragePooling1D" => LayerConfig::AveragePooling1D(read(class, config)?),
            "GlobalAveragePooling1D" => no_arguments(config, LayerConfig::GlobalAveragePooling1D)?,
            "GlobalMaxPooling1D" => no_arguments(config, LayerConfig::GlobalMaxPooling1D)?,
            "GlobalMaxPooling2D" => no_arguments(config, LayerConfig::GlobalMaxPooling2D)?,
            "MaxPooling2D" => LayerConfig::MaxPooling2D(read(class, config)?),
            "AveragePooling2D" => LayerConfig::AveragePooling2D(read(class, config)?),
            "GlobalAveragePooling2D" => no_arguments(config, LayerConfig::GlobalAveragePooling2D)?,
            "Flatten" => no_arguments(config, LayerConfig::Flatten)?,
            "Reshape" => LayerConfig::Reshape(read(class, config)?),
            "Dropout" => LayerConfig::Dropout(read(class, config)?),
            "Activation" => LayerConfig::Activation(read(class, config)?),
            "LayerNormalization" => LayerConfig::LayerNormalization(read(class, config)?),
            "BatchNormalization" => LayerConfig::BatchNormalization(read(class, config)?),
            "GroupNormalization" => LayerConfig::GroupNormalization(read(class, config)?),
            "Embedding" => LayerConfig::Embedding(read(class, config)?),
            "Add" => no_arguments(config, LayerConfig::Add)?,
            "Subtract" => no_arguments(config, LayerConfig::Subtract)?,
            "Multiply" => no_arguments(config, LayerConfig::Multiply)?,
            "Average" => no_arguments(config, LayerConfig::Average)?,
            "Concatenate" => LayerConfig::Concatenate(read(class, config)?),
            other => {
                return Err(format!(
                    "unknown layer class_name '{other}': one of {CLASS_NAMES}"
                ))
            }
        })
    }
}

/// A size per axis of an image, Keras's `int or tuple`: one number for both axes, or `[height, width]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    untagged,
    expecting = "a size of an image's axes (kernel_size, strides, dilation_rate, pool_size): an int, or [height, width]"
)]
pub enum Pair {
    Both(usize),
    Each([usize; 2]),
}

impl Pair {
    pub fn sizes(self) -> [usize; 2] {
        match self {
            Pair::Both(size) => [size, size],
            Pair::Each(sizes) => sizes,
        }
    }
}

fn one() -> Pair {
    Pair::Both(1)
}

fn yes() -> bool {
    true
}

fn linear() -> String {
    "linear".to_string()
}

fn valid() -> String {
    "valid".to_string()
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DenseConfig {
    pub units: usize,
    #[serde(default = "linear")]
    pub activation: String,
    #[serde(default = "yes")]
    pub use_bias: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Conv2DConfig {
    pub filters: usize,
    pub kernel_size: Pair,
    #[serde(default = "one")]
    pub strides: Pair,
    /// "valid" or "same".
    #[serde(default = "valid")]
    pub padding: String,
    #[serde(default = "one")]
    pub dilation_rate: Pair,
    #[serde(default = "one_group")]
    pub groups: usize,
    #[serde(default = "linear")]
    pub activation: String,
    #[serde(default = "yes")]
    pub use_bias: bool,
}

fn one_group() -> usize {
    1
}

/// A size along a sequence, Keras's `int or tuple` of one: a number, or `[size]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    untagged,
    expecting = "a size along a sequence (kernel_size, strides, dilation_rate, pool_size): an int, or [size]"
)]
pub enum Length {
    One(usize),
    Tuple([usize; 1]),
}

impl Length {
    pub fn size(self) -> usize {
        match self {
            Length::One(size) | Length::Tuple([size]) => size,
        }
    }
}

fn one_step() -> Length {
    Length::One(1)
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Conv1DConfig {
    pub filters: usize,
    pub kernel_size: Length,
    #[serde(default = "one_step")]
    pub strides: Length,
    /// "valid", "same" or "causal" (all padding before, so that no output sees a later step).
    #[serde(default = "valid")]
    pub padding: String,
    #[serde(default = "one_step")]
    pub dilation_rate: Length,
    #[serde(default = "one_group")]
    pub groups: usize,
    #[serde(default = "linear")]
    pub activation: String,
    #[serde(default = "yes")]
    pub use_bias: bool,
}

/// Every argument has a default, Keras's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Pooling1DConfig {
    pub pool_size: Length,
    /// The pool size where left out.
    pub strides: Option<Length>,
    pub padding: String,
}

impl Default for Pooling1DConfig {
    fn default() -> Self {
        Pooling1DConfig {
            pool_size: Length::One(2),
            strides: None,
            padding: valid(),
        }
    }
}

/// Every argument has a default, Keras's, stated once in `Default` (serde fills what a document leaves out from
/// it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PoolingConfig {
    pub pool_size: Pair,
    /// The pool size where left out.
    pub strides: Option<Pair>,
    pub padding: String,
}

impl Default for PoolingConfig {
    fn default() -> Self {
        PoolingConfig {
            pool_size: Pair::Both(2),
            strides: None,
            padding: valid(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReshapeConfig {
    /// Each sample's shape, without the batch axis.
    pub target_shape: Vec<usize>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DropoutConfig {
    pub rate: f64,
    /// The first draw's seed; where left out, the model's seed and the layer's position, which the built model's
    /// config then holds.
    #[serde(default)]
    pub seed: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActivationConfig {
    pub activation: String,
}

/// Keras's `epsilon` of its normalisations.
const KERAS_EPSILON: f32 = 1e-3;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LayerNormalizationConfig {
    pub epsilon: f32,
    pub center: bool,
    pub scale: bool,
}

impl Default for LayerNormalizationConfig {
    fn default() -> Self {
        LayerNormalizationConfig {
            epsilon: KERAS_EPSILON,
            center: true,
            scale: true,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BatchNormalizationConfig {
    pub momentum: f64,
    pub epsilon: f32,
    pub center: bool,
    pub scale: bool,
}

impl Default for BatchNormalizationConfig {
    fn default() -> Self {
        BatchNormalizationConfig {
            momentum: 0.99,
            epsilon: KERAS_EPSILON,
            center: true,
            scale: true,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GroupNormalizationConfig {
    pub groups: usize,
    pub epsilon: f32,
    pub center: bool,
    pub scale: bool,
}

impl Default for GroupNormalizationConfig {
    fn default() -> Self {
        GroupNormalizationConfig {
            groups: 32,
            epsilon: KERAS_EPSILON,
            center: true,
            scale: true,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbeddingConfig {
    pub input_dim: usize,
    pub output_dim: usize,
}

/// Every argument has a default, Keras's: the last axis.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConcatenateConfig {
    /// The axis of the batch (the batch axis 0, the samples' from 1), or counted from the end where negative.
    pub axis: i64,
}

impl Default for ConcatenateConfig {
    fn default() -> Self {
        ConcatenateConfig { axis: -1 }
    }
}

pub(super) fn invalid(what: &'static str, given: impl ToString, expected: &str) -> Error {
    Error::InvalidArgument {
        what,
        given: given.to_string(),
        expected: expected.to_string(),
    }
}

pub(super) fn padding(name: &str) -> Result<Padding> {
    Padding::from_name(name).ok_or_else(|| invalid("padding", name, "\"valid\" or \"same\""))
}

/// Errors unless `count` is at least 1.
pub(super) fn positive(what: &'static str, count: usize) -> Result<usize> {
    if count == 0 {
        return Err(invalid(what, count, "at least 1"));
    }
    Ok(count)
}

impl LayerConfig {
    /// The activation the layer ends with, for the layers that take one.
    pub fn activation(&self) -> Option<&str> {
        match self {
            LayerConfig::Dense(DenseConfig { activation, .. })
            | LayerConfig::Conv2D(Conv2DConfig { activation, .. })
            | LayerConfig::Conv1D(Conv1DConfig { activation, .. })
            | LayerConfig::Activation(ActivationConfig { activation }) => Some(activation),
            _ => None,
        }
    }

    /// The values the layer's weights and state hold for samples of `input_shape`, counted from its
    /// arguments before any is made (so that what a model would take can be bounded first); saturating.
    pub fn weight_values(&self, input_shape: &[usize]) -> u64 {
        let last = input_shape.last().copied().unwrap_or(0) as u64;
        let times = |sizes: &[u64]| {
            sizes
                .iter()
                .fold(1u64, |product, &size| product.saturating_mul(size))
        };
        let affine =
            |center: bool, scale: bool| last.saturating_mul(u64::from(center) + u64::from(scale));
        match self {
            LayerConfig::Dense(config) => {
                let units = config.units as u64;
                times(&[last, units]).saturating_add(if config.use_bias { units } else { 0 })
            }
            LayerConfig::Conv2D(config) => {
                let [kh, kw] = config.kernel_size.sizes();
                let filters = config.filters as u64;
                let in_group = last / (config.groups as u64).max(1);
                times(&[kh as u64, kw as u64, in_group, filters])
                    .saturating_add(if config.use_bias { filters } else { 0 })
            }
            LayerConfig::Conv1D(config) => {
                let filters = config.filters as u64;
                let in_group = last / (config.groups as u64).max(1);
                times(&[config.kernel_size.size() as u64, in_group, filters])
                    .saturating_add(if config.use_bias { filters } else { 0 })
            }
            LayerConfig::LayerNormalization(config) => affine(config.center, config.scale),
            LayerConfig::GroupNormalization(config) => affine(config.center, config.scale),
            LayerConfig::BatchNormalization(config) => {
                affine(config.center, config.scale).saturating_add(last.saturating_mul(2))
            }
            LayerConfig::Embedding(config) => {
                times(&[config.input_dim as u64, config.output_dim as u64])
            }
            _ => 0,
        }
    }

    /// Keras's class name.
    pub fn class_name(&self) -> &'static str {
        match self {
            LayerConfig::Dense(_) => "Dense",
            LayerConfig::Conv2D(_) => "Conv2D",
            LayerConfig::Conv1D(_) => "Conv1D",
            LayerConfig::MaxPooling1D(_) => "MaxPooling1D",
            LayerConfig::AveragePooling1D(_) => "AveragePooling1D",
            LayerConfig::GlobalAveragePooling1D => "GlobalAveragePooling1D",
            LayerConfig::GlobalMaxPooling1D => "GlobalMaxPooling1D",
            LayerConfig::GlobalMaxPooling2D => "GlobalMaxPooling2D",
            LayerConfig::MaxPooling2D(_) => "MaxPooling2D",
            LayerConfig::AveragePooling2D(_) => "AveragePooling2D",
            LayerConfig::GlobalAveragePooling2D => "GlobalAveragePooling2D",
            LayerConfig::Flatten => "Flatten",
            LayerConfig::Reshape(_) => "Reshape",
            LayerConfig::Dropout(_) => "Dropout",
            LayerConfig::Activation(_) => "Activation",
            LayerConfig::LayerNormalization(_) => "LayerNormalization",
            LayerConfig::BatchNormalization(_) => "BatchNormalization",
            LayerConfig::GroupNormalization(_) => "GroupNormalization",
            LayerConfig::Embedding(_) => "Embedding",
            LayerConfig::Add => "Add",
            LayerConfig::Subtract => "Subtract",
            LayerConfig::Multiply => "Multiply",
            LayerConfig::Average => "Average",
            LayerConfig::Concatenate(_) => "Concatenate",
        }
    }
}
