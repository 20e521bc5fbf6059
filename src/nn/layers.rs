//! The layers a [`Sequential`](super::Sequential) stacks, each a thin map of Keras's arguments onto the tensor
//! ops (which record themselves on a tape): the arithmetic is the ops', written once in `src/ops/`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::autograd::GradientTape;
use crate::error::{Error, Result};
use crate::op::elementwise::UnaryOp;
use crate::op::window::{Conv2dOptions, Padding};
use crate::ops::neural::BatchNormOptions;
use crate::session::Session;
use crate::tensor::{DType, Tensor};

use super::config::{
    invalid, padding, positive, BatchNormalizationConfig, Conv2DConfig, DenseConfig, DropoutConfig,
    EmbeddingConfig, LayerNormalizationConfig, PoolingConfig, ReshapeConfig,
};

/// One layer of a [`Sequential`](super::Sequential).
pub trait Layer: Send + Sync {
    /// The pass over `x` (a batch: its first axis the samples). With `tape`, a training pass (Keras's
    /// `training=True`: dropout drops, batch normalisation takes the batch's statistics and moves its own),
    /// the layer's weights watched there; without, inference.
    fn call(&self, x: &Tensor, tape: Option<&GradientTape>) -> Result<Tensor>;
    /// The pass over a graph's inputs of this layer ([`SequentialConfig::inputs`](super::SequentialConfig::inputs)):
    /// a merging layer's two or more; any other layer takes one, its [`Layer::call`].
    fn call_inputs(&self, inputs: &[Tensor], tape: Option<&GradientTape>) -> Result<Tensor> {
        match inputs {
            [x] => self.call(x, tape),
            _ => Err(Error::Shape {
                op: "Layer::call_inputs",
                message: format!(
                    "a layer other than a merging one takes one input; got {}",
                    inputs.len()
                ),
            }),
        }
    }
    /// The weights an optimizer trains, by Keras's names (kernel, bias, gamma, beta, embeddings), in a fixed
    /// order.
    fn weights(&self) -> Vec<(&'static str, Arc<Tensor>)> {
        Vec::new()
    }
    /// The values a training pass moves and no optimizer trains (batch normalisation's moving statistics).
    fn state(&self) -> Vec<(&'static str, Arc<Tensor>)> {
        Vec::new()
    }
    /// The tensors of [`Layer::weights`] and [`Layer::state`], by the same names, to be replaced by ones a caller
    /// holds ([`Sequential::share_variables`](super::Sequential::share_variables)).
    fn variables_mut(&mut self) -> Vec<(&'static str, &mut Arc<Tensor>)> {
        Vec::new()
    }
    /// How many training passes have drawn from the layer's seed (dropout's), which a saved model keeps so that
    /// a loaded one goes on with the draws the first would have made (Keras keeps its seed generator's state so);
    /// `None` for a layer that draws nothing.
    fn draws(&self) -> Option<u64> {
        None
    }
    /// Sets the count [`Layer::draws`] gives; nothing for a layer that draws nothing.
    fn set_draws(&self, _draws: u64) {}
}

/// A parameter as a pass takes it: watched by `tape` when training, else an untraced handle of its data.
pub(super) fn watched(tape: Option<&GradientTape>, parameter: &Arc<Tensor>) -> Result<Tensor> {
    match tape {
        Some(tape) => tape.watch_parameter(parameter),
        None => Ok(parameter.share()),
    }
}

/// A kernel and an optional bias by Keras's names, in that order: the weights of `Dense` and the convolutions.
pub(super) fn kernel_and_bias(
    kernel: &Arc<Tensor>,
    bias: &Option<Arc<Tensor>>,
) -> Vec<(&'static str, Arc<Tensor>)> {
    std::iter::once(("kernel", Arc::clone(kernel)))
        .chain(bias.iter().map(|bias| ("bias", Arc::clone(bias))))
        .collect()
}

/// [`kernel_and_bias`]'s tensors, to be replaced.
pub(super) fn kernel_and_bias_mut<'a>(
    kernel: &'a mut Arc<Tensor>,
    bias: &'a mut Option<Arc<Tensor>>,
) -> Vec<(&'static str, &'a mut Arc<Tensor>)> {
    std::iter::once(("kernel", kernel))
        .chain(bias.iter_mut().map(|bias| ("bias", bias)))
        .collect()
}

/// A convolution's output with its bias (watched by `tape` when training) added, then its activation.
pub(super) fn biased_and_activated(
    output: Tensor,
    tape: Option<&GradientTape>,
    bias: Option<&Arc<Tensor>>,
    activation: Activation,
) -> Result<Tensor> {
    let output = match bias {
        Some(bias) => output.add(&watched(tape, bias)?)?,
        None => output,
    };
    activation.apply(output)
}

/// Glorot-uniform weights (Keras's default kernel initializer): uniform in ±sqrt(6 / (fan_in + fan_out)).
pub(super) fn glorot(
    session: &Session,
    shape: &[usize],
    fans: [f64; 2],
    seed: u64,
) -> Result<Arc<Tensor>> {
    // The fans in f64: no size can overflow them.
    let limit = (6.0 / (fans[0] + fans[1]).max(1.0)).sqrt() as f32;
    let weight = session.empty(shape)?;
    weight.fill_uniform_(seed, -limit, limit)?;
    Ok(Arc::new(weight))
}

/// A vector of `size` elements all `value` (Keras's zeros and ones initializers).
pub(super) fn filled(session: &Session, size: usize, value: f32) -> Result<Arc<Tensor>> {
    Ok(Arc::new(session.full(&[size], value)?))
}

/// The last axis of a sample: the features (channels) a layer's weights are sized by.
pub(super) fn features(layer: &'static str, input_shape: &[usize]) -> Result<usize> {
    match input_shape.last() {
        Some(&features) if features > 0 => Ok(features),
        _ => Err(Error::Shape {
            op: layer,
            message: format!(
                "takes samples with a last axis of at least one feature; got samples of shape {input_shape:?}"
            ),
        }),
    }
}

/// An activation by Keras's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Activation {
    Linear,
    Softmax,
    Elementwise(UnaryOp),
}

impl Activation {
    const NAMES: &'static str =
        "linear, relu, sigmoid, tanh, softmax, gelu, silu (swish) or softplus";

    pub(super) fn from_name(name: &str) -> Result<Self> {
        let op = match name {
            "linear" => return Ok(Activation::Linear),
            "softmax" => return Ok(Activation::Softmax),
            "relu" => UnaryOp::Relu,
            "sigmoid" => UnaryOp::Sigmoid,
            "tanh" => UnaryOp::Tanh,
            "gelu" => UnaryOp::Gelu,
            "silu" | "swish" => UnaryOp::Silu,
            "softplus" => UnaryOp::Softplus,
            _ => return Err(invalid("activation", name, Self::NAMES)),
        };
        Ok(Activation::Elementwise(op))
    }

    pub(super) fn apply(self, x: Tensor) -> Result<Tensor> {
        match self {
            Activation::Linear => Ok(x),
            Activation::Softmax => x.softmax(),
            Activation::Elementwise(op) => x.unary(op, 0.0),
        }
    }
}

/// Keras's `Dense`: `activation(x · kernel + bias)` over the last axis, kernel [inputs, units].
pub(super) struct Dense {
    kernel: Arc<Tensor>,
    bias: Option<Arc<Tensor>>,
    activation: Activation,
}

impl Dense {
    pub(super) fn new(
        session: &Session,
        config: &DenseConfig,
        input_shape: &[usize],
        seed: u64,
    ) -> Result<Self> {
        let units = positive("units", config.units)?;
        let inputs = features("Dense", input_shape)?;
        Ok(Dense {
            kernel: glorot(
                session,
                &[inputs, units],
                [inputs as f64, units as f64],
                seed,
            )?,
            bias: config
                .use_bias
                .then(|| filled(session, units, 0.0))
                .transpose()?,
            activation: Activation::from_name(&config.activation)?,
        })
    }
}

impl Layer for Dense {
    fn call(&self, x: &Tensor, tape: Option<&GradientTape>) -> Result<Tensor> {
        let kernel = watched(tape, &self.kernel)?;
        let bias = self
            .bias
            .as_ref()
            .map(|bias| watched(tape, bias))
            .transpose()?;
        // The product takes rows; a batch of sequences is its rows, and then its shape again.
        let shape = x.shape();
        let inputs = *shape.last().unwrap_or(&0);
        let rows = if shape.len() == 2 {
            x.handle()
        } else {
            x.view_as(&[x.len() / inputs.max(1), inputs])?
        };
        // Relu goes into the product's pass; the other activations follow it.
        let (fused, after) = match self.activation {
            Activation::Elementwise(UnaryOp::Relu) => (Some(UnaryOp::Relu), Activation::Linear),
            other => (None, other),
        };
        let output = after.apply(rows.linear(&kernel, bias.as_ref(), fused)?)?;
        if shape.len() == 2 {
            return Ok(output);
        }
        let mut output_shape = shape.to_vec();
        if let Some(last) = output_shape.last_mut() {
            *last = self.kernel.shape()[1];
        }
        output.view_as(&output_shape)
    }

    fn weights(&self) -> Vec<(&'static str, Arc<Tensor>)> {
        kernel_and_bias(&self.kernel, &self.bias)
    }

    fn variables_mut(&mut self) -> Vec<(&'static str, &mut Arc<Tensor>)> {
        kernel_and_bias_mut(&mut self.kernel, &mut self.bias)
    }
}

/// Keras's `Conv2D` over NHWC images: kernel [kh, kw, in / groups, filters], then the bias and activation.
pub(super) struct Conv2D {
    kernel: Arc<Tensor>,
    bias: Option<Arc<Tensor>>,
    options: Conv2dOptions,
    activation: Activation,
}

impl Conv2D {
    pub(super) fn new(
        session: &Session,
        config: &Conv2DConfig,
        input_shape: &[usize],
        seed: u64,
    ) -> Result<Self> {
        let filters = positive("filters", config.filters)?;
        let groups = positive("groups", config.groups)?;
        let channels = features("Conv2D", input_shape)?;
        if input_shape.len() != 3 || channels % groups != 0 || filters % groups != 0 {
            return Err(Error::Shape {
                op: "Conv2D",
                message: format!(
                    "takes [height, width, channels] images whose channels and filters ({filters}) are \
                     multiples of the groups ({groups}); got samples of shape {input_shape:?}"
                ),
            });
        }
        let [kh, kw] = config.kernel_size.sizes();
        let in_group = channels / groups;
        let shape = [
            positive("kernel_size", kh)?,
            positive("kernel_size", kw)?,
            in_group,
            filters,
        ];
        let padding = padding(&config.padding)?;
        let dilation = config.dilation_rate.sizes();
        // A valid window must fit the image: checked before the kernel takes any memory.
        for (axis, side) in ["height", "width"].into_iter().enumerate() {
            let reach = (shape[axis] - 1)
                .checked_mul(positive("dilation_rate", dilation[axis])?)
                .and_then(|span| span.checked_add(1));
            if padding == Padding::Valid && reach.is_none_or(|reach| reach > input_shape[axis]) {
                return Err(Error::Shape {
                    op: "Conv2D",
                    message: format!(
                        "a kernel of {:?} dilated by {dilation:?} does not fit the images' {side} of {} with \
                         padding \"valid\"",
                        [kh, kw],
                        input_shape[axis]
                    ),
                });
            }
        }
        let receptive = kh as f64 * kw as f64;
        Ok(Conv2D {
            kernel: glorot(
                session,
                &shape,
                [in_group as f64 * receptive, filters as f64 * receptive],
                seed,
            )?,
            bias: config
                .use_bias
                .then(|| filled(session, filters, 0.0))
                .transpose()?,
            options: Conv2dOptions {
                stride: config.strides.sizes(),
                padding,
                dilation,
                groups,
            },
            activation: Activation::from_name(&config.activation)?,
        })
    }
}

impl Layer for Conv2D {
    fn call(&self, x: &Tensor, tape: Option<&GradientTape>) -> Result<Tensor> {
        let output = x.conv2d(&watched(tape, &self.kernel)?, &self.options)?;
        biased_and_activated(output, tape, self.bias.as_ref(), self.activation)
    }

    fn weights(&self) -> Vec<(&'static str, Arc<Tensor>)> {
        kernel_and_bias(&self.kernel, &self.bias)
    }

    fn variables_mut(&mut self) -> Vec<(&'static str, &mut Arc<Tensor>)> {
        kernel_and_bias_mut(&mut self.kernel, &mut self.bias)
    }
}

/// A pooling's windows: their size, their steps (the size where left out) and padding.
fn pooling(config: &PoolingConfig) -> Result<([usize; 2], [usize; 2], Padding)> {
    let size = config.pool_size.sizes();
    let stride = config.strides.unwrap_or(config.pool_size).sizes();
    for value in size {
        positive("pool_size", value)?;
    }
    for value in stride {
        positive("strides", value)?;
    }
    Ok((size, stride, padding(&config.padding)?))
}

/// Keras's `MaxPooling2D`.
pub(super) struct MaxPooling2D {
    windows: ([usize; 2], [usize; 2], Padding),
}

impl MaxPooling2D {
    pub(super) fn new(config: &PoolingConfig) -> Result<Self> {
        Ok(MaxPooling2D {
            windows: pooling(config)?,
        })
    }
}

impl Layer for MaxPooling2D {
    fn call(&self, x: &Tensor, _: Option<&GradientTape>) -> Result<Tensor> {
        let (size, stride, padding) = self.windows;
        x.max_pool2d(size, stride, padding)
    }
}

/// Keras's `AveragePooling2D` (padding not counted).
pub(super) struct AveragePooling2D {
    windows: ([usize; 2], [usize; 2], Padding),
}

impl AveragePooling2D {
    pub(super) fn new(config: &PoolingConfig) -> Result<Self> {
        Ok(AveragePooling2D {
            windows: pooling(config)?,
        })
    }
}

impl Layer for AveragePooling2D {
    fn call(&self, x: &Tensor, _: Option<&GradientTape>) -> Result<Tensor> {
        let (size, stride, padding) = self.windows;
        x.avg_pool2d(size, stride, padding)
    }
}

/// Keras's `GlobalAveragePooling2D`: [batch, height, width, channels] to [batch, channels].
pub(super) struct GlobalAveragePooling2D;

impl Layer for GlobalAveragePooling2D {
    fn call(&self, x: &Tensor, _: Option<&GradientTape>) -> Result<Tensor> {
        x.global_avg_pool2d()
    }
}

/// Keras's `Flatten`: each sample one row, its data left where it is.
pub(super) struct Flatten;

impl Layer for Flatten {
    fn call(&self, x: &Tensor, _: Option<&GradientTape>) -> Result<Tensor> {
        let batch = x.shape().first().copied().unwrap_or(1);
        let row = x.shape().iter().skip(1).product();
        x.view_as(&[batch, row])
    }
}

/// Keras's `Reshape`: each sample to `target_shape`, its data left where it is.
pub(super) struct Reshape {
    target_shape: Vec<usize>,
}

impl Reshape {
    pub(super) fn new(config: &ReshapeConfig, input_shape: &[usize]) -> Result<Self> {
        let elements: usize = input_shape.iter().product();
        let target: Option<usize> = config
            .target_shape
            .iter()
            .try_fold(1usize, |count, &size| count.checked_mul(size));
        if config.target_shape.is_empty() || target != Some(elements) {
            return Err(Error::Shape {
                op: "Reshape",
                message: format!(
                    "target_shape {:?} does not hold a sample of shape {input_shape:?} ({elements} elements)",
                    config.target_shape
                ),
            });
        }
        Ok(Reshape {
            target_shape: config.target_shape.clone(),
        })
    }
}

impl Layer for Reshape {
    fn call(&self, x: &Tensor, _: Option<&GradientTape>) -> Result<Tensor> {
        let shape: Vec<usize> = x
            .shape()
            .first()
            .into_iter()
            .chain(&self.target_shape)
            .copied()
            .collect();
        x.view_as(&shape)
    }
}

/// Keras's `Dropout`: when training, each element kept with probability `1 − rate` and scaled by
/// `1 / (1 − rate)`, a fresh draw every pass (the seed and the count of passes so far); else the input.
pub(super) struct Dropout {
    rate: f64,
    seed: u64,
    passes: AtomicU64,
}

impl Dropout {
    pub(super) fn new(config: &DropoutConfig, seed: u64) -> Result<Self> {
        if !(0.0..1.0).contains(&config.rate) {
            return Err(invalid("dropout rate", config.rate, "a rate in [0, 1)"));
        }
        Ok(Dropout {
            rate: config.rate,
            seed: config.seed.unwrap_or(seed),
            passes: AtomicU64::new(0),
        })
    }
}

impl Layer for Dropout {
    fn call(&self, x: &Tensor, tape: Option<&GradientTape>) -> Result<Tensor> {
        if tape.is_none() || self.rate == 0.0 {
            return Ok(x.handle());
        }
        let pass = self.passes.fetch_add(1, Ordering::Relaxed);
        // Passes a golden-ratio step apart, so that neighbouring seeds' draws do not line up.
        x.dropout(
            self.rate,
            self.seed
                .wrapping_add(pass.wrapping_mul(0x9E37_79B9_7F4A_7C15)),
        )
    }

    fn draws(&self) -> Option<u64> {
        Some(self.passes.load(Ordering::Relaxed))
    }

    fn set_draws(&self, draws: u64) {
        self.passes.store(draws, Ordering::Relaxed);
    }
}

/// Keras's `Activation`.
pub(super) struct ActivationLayer {
    activation: Activation,
}

impl ActivationLayer {
    pub(super) fn new(name: &str) -> Result<Self> {
        Ok(ActivationLayer {
            activation: Activation::from_name(name)?,
        })
    }
}

impl Layer for ActivationLayer {
    fn call(&self, x: &Tensor, _: Option<&GradientTape>) -> Result<Tensor> {
        self.activation.apply(x.handle())
    }
}

/// A normalisation's `gamma` and `beta`, each where the layer has it.
pub(super) type Affine = (Option<Arc<Tensor>>, Option<Arc<Tensor>>);

/// `gamma` (ones) and `beta` (zeros) of `channels`, each where asked for.
pub(super) fn affine_weights(
    session: &Session,
    channels: usize,
    scale: bool,
    center: bool,
) -> Result<Affine> {
    Ok((
        scale.then(|| filled(session, channels, 1.0)).transpose()?,
        center.then(|| filled(session, channels, 0.0)).transpose()?,
    ))
}

/// `gamma` and `beta` by name, those there are.
/// [`named_affine`]'s tensors, to be replaced.
pub(super) fn affine_mut<'a>(
    gamma: &'a mut Option<Arc<Tensor>>,
    beta: &'a mut Option<Arc<Tensor>>,
) -> Vec<(&'static str, &'a mut Arc<Tensor>)> {
    gamma
        .iter_mut()
        .map(|gamma| ("gamma", gamma))
        .chain(beta.iter_mut().map(|beta| ("beta", beta)))
        .collect()
}

pub(super) fn named_affine(
    gamma: &Option<Arc<Tensor>>,
    beta: &Option<Arc<Tensor>>,
) -> Vec<(&'static str, Arc<Tensor>)> {
    gamma
        .iter()
        .map(|gamma| ("gamma", Arc::clone(gamma)))
        .chain(beta.iter().map(|beta| ("beta", Arc::clone(beta))))
        .collect()
}

/// Keras's `LayerNormalization` over the last axis.
pub(super) struct LayerNormalization {
    gamma: Option<Arc<Tensor>>,
    beta: Option<Arc<Tensor>>,
    epsilon: f32,
}

impl LayerNormalization {
    pub(super) fn new(
        session: &Session,
        config: &LayerNormalizationConfig,
        input_shape: &[usize],
    ) -> Result<Self> {
        let channels = features("LayerNormalization", input_shape)?;
        let (gamma, beta) = affine_weights(session, channels, config.scale, config.center)?;
        Ok(LayerNormalization {
            gamma,
            beta,
            epsilon: config.epsilon,
        })
    }
}

impl Layer for LayerNormalization {
    fn call(&self, x: &Tensor, tape: Option<&GradientTape>) -> Result<Tensor> {
        let gamma = self.gamma.as_ref().map(|g| watched(tape, g)).transpose()?;
        let beta = self.beta.as_ref().map(|b| watched(tape, b)).transpose()?;
        x.layer_norm(gamma.as_ref(), beta.as_ref(), self.epsilon)
    }

    fn weights(&self) -> Vec<(&'static str, Arc<Tensor>)> {
        named_affine(&self.gamma, &self.beta)
    }

    fn variables_mut(&mut self) -> Vec<(&'static str, &mut Arc<Tensor>)> {
        affine_mut(&mut self.gamma, &mut self.beta)
    }
}

/// Keras's `BatchNormalization` over the last axis (channels last).
pub(super) struct BatchNormalization {
    gamma: Option<Arc<Tensor>>,
    beta: Option<Arc<Tensor>>,
    moving_mean: Arc<Tensor>,
    moving_variance: Arc<Tensor>,
    momentum: f64,
    epsilon: f32,
}

impl BatchNormalization {
    pub(super) fn new(
        session: &Session,
        config: &BatchNormalizationConfig,
        input_shape: &[usize],
    ) -> Result<Self> {
        let channels = features("BatchNormalization", input_shape)?;
        if !(0.0..=1.0).contains(&config.momentum) {
            return Err(invalid("momentum", config.momentum, "a momentum in [0, 1]"));
        }
        let (gamma, beta) = affine_weights(session, channels, config.scale, config.center)?;
        Ok(BatchNormalization {
            gamma,
            beta,
            moving_mean: filled(session, channels, 0.0)?,
            moving_variance: filled(session, channels, 1.0)?,
            momentum: config.momentum,
            epsilon: config.epsilon,
        })
    }
}

impl Layer for BatchNormalization {
    fn call(&self, x: &Tensor, tape: Option<&GradientTape>) -> Result<Tensor> {
        let gamma = self.gamma.as_ref().map(|g| watched(tape, g)).transpose()?;
        let beta = self.beta.as_ref().map(|b| watched(tape, b)).transpose()?;
        let normalized = x.batch_norm(
            &self.moving_mean,
            &self.moving_variance,
            gamma.as_ref(),
            beta.as_ref(),
            &BatchNormOptions {
                training: tape.is_some(),
                momentum: self.momentum,
                epsilon: self.epsilon,
            },
        )?;
        if tape.is_some() {
            self.moving_mean.copy_from(&normalized.moving_mean)?;
            self.moving_variance
                .copy_from(&normalized.moving_variance)?;
        }
        Ok(normalized.output)
    }

    fn weights(&self) -> Vec<(&'static str, Arc<Tensor>)> {
        named_affine(&self.gamma, &self.beta)
    }

    fn variables_mut(&mut self) -> Vec<(&'static str, &mut Arc<Tensor>)> {
        let mut variables = affine_mut(&mut self.gamma, &mut self.beta);
        variables.push(("moving_mean", &mut self.moving_mean));
        variables.push(("moving_variance", &mut self.moving_variance));
        variables
    }

    fn state(&self) -> Vec<(&'static str, Arc<Tensor>)> {
        vec![
            ("moving_mean", Arc::clone(&self.moving_mean)),
            ("moving_variance", Arc::clone(&self.moving_variance)),
        ]
    }
}

/// Keras's `Embedding`: the rows of a table [input_dim, output_dim] at each id. Float ids are truncated to
/// integers, as Keras casts them; an id outside the table is an error.
pub(super) struct Embedding {
    embeddings: Arc<Tensor>,
}

impl Embedding {
    pub(super) fn new(session: &Session, config: &EmbeddingConfig, seed: u64) -> Result<Self> {
        let shape = [
            positive("input_dim", config.input_dim)?,
            positive("output_dim", config.output_dim)?,
        ];
        // Keras's default: uniform in ±0.05.
        let embeddings = session.empty(&shape)?;
        embeddings.fill_uniform_(seed, -0.05, 0.05)?;
        Ok(Embedding {
            embeddings: Arc::new(embeddings),
        })
    }
}

impl Layer for Embedding {
    fn call(&self, x: &Tensor, tape: Option<&GradientTape>) -> Result<Tensor> {
        let table = watched(tape, &self.embeddings)?;
        match x.dtype() {
            DType::F32 => table.embedding(&x.cast(DType::I32)?),
            _ => table.embedding(x),
        }
    }

    fn weights(&self) -> Vec<(&'static str, Arc<Tensor>)> {
        vec![("embeddings", Arc::clone(&self.embeddings))]
    }

    fn variables_mut(&mut self) -> Vec<(&'static str, &mut Arc<Tensor>)> {
        vec![("embeddings", &mut self.embeddings)]
    }
}
