//! Layers and models. Their parameters are `Arc<Tensor>`s in the session's pool, watched by a
//! [`GradientTape`] during a training pass, so that the ops of the pass record themselves; `infer` runs the same
//! pass with no tape, for inference, where nothing is kept for a backward.
//!
//! - [`Module`]: what every trainer needs of a model (the training step in [`crate::train`] and the fit loop in
//!   [`crate::fit`] take one).
//! - [`Linear`] and [`Mlp`]: the estimators' and the command's MLPs.
//! - [`Layer`]s by Keras's names and arguments, each built from its [`LayerConfig`] (`Dense`, `Conv2D`, the
//!   poolings, `Conv1D` and the poolings of sequences, `Flatten`, `Reshape`, `Dropout`, `Activation`, the
//!   normalisations, `Embedding`, the merging layers), stacked in a [`Sequential`] whose whole configuration
//!   is one JSON document ([`SequentialConfig`]) of Keras's class names and arguments: a chain, or a graph as a
//!   Keras functional model's ([`SequentialConfig::inputs`]).
//!
//! ```
//! use wgcompute::nn::{LayerConfig, Sequential, SequentialConfig};
//! use wgcompute::{Module, Session, SessionOptions};
//! # fn main() -> wgcompute::Result<()> {
//! let session = Session::open(SessionOptions::default())?;
//! let config = SequentialConfig::from_json(
//!     r#"{"input_shape": [8, 8, 1], "layers": [
//!         {"class_name": "Conv2D", "config": {"filters": 4, "kernel_size": 3, "activation": "relu"}},
//!         {"class_name": "MaxPooling2D"},
//!         {"class_name": "Flatten"},
//!         {"class_name": "Dense", "config": {"units": 10}}]}"#,
//! )?;
//! let model = Sequential::new(&session, config, 7)?;
//! assert_eq!(model.output_shape(), &[10]);
//! // Rows of 64 pixels are taken as the [8, 8, 1] images they hold.
//! let logits = model.infer(&session.rand(&[5, 64], 1)?)?;
//! assert_eq!(logits.shape(), &[5, 10]);
//! # Ok(()) }
//! ```

mod config;
mod group_norm;
mod layers;
mod linear;
mod merging;
mod sequence;
mod sequential;

use std::sync::Arc;

use crate::autograd::GradientTape;
use crate::error::Result;
use crate::tensor::Tensor;

pub use config::{
    ActivationConfig, BatchNormalizationConfig, ConcatenateConfig, Conv1DConfig, Conv2DConfig,
    DenseConfig, DropoutConfig, EmbeddingConfig, GroupNormalizationConfig, LayerConfig,
    LayerNormalizationConfig, Length, Pair, Pooling1DConfig, PoolingConfig, ReshapeConfig,
};
pub use group_norm::group_normalization;
pub use layers::Layer;
pub use linear::{ActivatedMlp, Activation, Linear, Mlp};
pub use sequential::{Sequential, SequentialConfig};

/// A model a training step can run: its forward pass on a tape, the same pass without one, and the parameters
/// an optimizer updates (in the same order on every call, since optimizers keep their state by position).
pub trait Module {
    /// The forward pass of `x` with the parameters watched by `tape`, so that its ops record themselves there.
    fn forward(&self, tape: &GradientTape, x: &Tensor) -> Result<Tensor>;
    /// The forward pass on tensors, without a tape.
    fn infer(&self, x: &Tensor) -> Result<Tensor>;
    fn parameters(&self) -> Vec<Arc<Tensor>>;
}

/// A borrowed model is a model: what owns one (a fit, say) lends it to a step as `&model`.
impl<M: Module + ?Sized> Module for &M {
    fn forward(&self, tape: &GradientTape, x: &Tensor) -> Result<Tensor> {
        (**self).forward(tape, x)
    }

    fn infer(&self, x: &Tensor) -> Result<Tensor> {
        (**self).infer(x)
    }

    fn parameters(&self) -> Vec<Arc<Tensor>> {
        (**self).parameters()
    }
}
