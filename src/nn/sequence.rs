//! Keras's layers over sequences, [batch, steps, features]: `Conv1D` (its padding "valid", "same" or "causal"),
//! `MaxPooling1D`, `AveragePooling1D`, `GlobalAveragePooling1D` and `GlobalMaxPooling1D`; and
//! `GlobalMaxPooling2D` over images. Each runs the ops the Python package's Keras layer of the same name runs, in
//! the same layout, so that both give the same bits.

use std::sync::Arc;

use crate::autograd::GradientTape;
use crate::error::{Error, Result};
use crate::op::reduce::ReduceOp;
use crate::op::window::{Conv1dOptions, Padding, Padding1d};
use crate::session::Session;
use crate::tensor::Tensor;

use super::config::{invalid, padding, positive, Conv1DConfig, Pooling1DConfig};
use super::layers::{
    biased_and_activated, features, filled, glorot, kernel_and_bias, kernel_and_bias_mut, watched,
    Activation, Layer,
};

/// Keras's `Conv1D`: a kernel [kernel_size, channels / groups, filters] and a bias [filters].
pub(super) struct Conv1D {
    kernel: Arc<Tensor>,
    bias: Option<Arc<Tensor>>,
    options: Conv1dOptions,
    activation: Activation,
}

impl Conv1D {
    pub(super) fn new(
        session: &Session,
        config: &Conv1DConfig,
        input_shape: &[usize],
        seed: u64,
    ) -> Result<Self> {
        let filters = positive("filters", config.filters)?;
        let groups = positive("groups", config.groups)?;
        let channels = features("Conv1D", input_shape)?;
        if input_shape.len() != 2 || channels % groups != 0 || filters % groups != 0 {
            return Err(Error::Shape {
                op: "Conv1D",
                message: format!(
                    "takes [steps, channels] sequences whose channels and filters ({filters}) are multiples of \
                     the groups ({groups}); got samples of shape {input_shape:?}"
                ),
            });
        }
        let size = positive("kernel_size", config.kernel_size.size())?;
        let padding = Padding1d::from_name(&config.padding).ok_or_else(|| {
            invalid(
                "padding",
                &config.padding,
                "\"valid\", \"same\" or \"causal\"",
            )
        })?;
        let dilation = positive("dilation_rate", config.dilation_rate.size())?;
        // A window must be countable (causal padding is its reach), and a valid one must fit the sequence:
        // checked before the kernel takes any memory.
        let Some(reach) = (size - 1)
            .checked_mul(dilation)
            .and_then(|span| span.checked_add(1))
        else {
            return Err(invalid(
                "kernel_size",
                format!("{size} dilated by {dilation}"),
                "a window whose reach is a countable number of steps",
            ));
        };
        if padding == Padding1d::Valid && reach > input_shape[0] {
            return Err(Error::Shape {
                op: "Conv1D",
                message: format!(
                    "a kernel of {size} dilated by {dilation} does not fit the sequences' {} steps with \
                     padding \"valid\"",
                    input_shape[0]
                ),
            });
        }
        let in_group = channels / groups;
        Ok(Conv1D {
            kernel: glorot(
                session,
                &[size, in_group, filters],
                // The fans in f64: no size can overflow them.
                [in_group as f64 * size as f64, filters as f64 * size as f64],
                seed,
            )?,
            bias: config
                .use_bias
                .then(|| filled(session, filters, 0.0))
                .transpose()?,
            options: Conv1dOptions {
                stride: positive("strides", config.strides.size())?,
                padding,
                dilation,
                groups,
            },
            activation: Activation::from_name(&config.activation)?,
        })
    }
}

impl Layer for Conv1D {
    fn call(&self, x: &Tensor, tape: Option<&GradientTape>) -> Result<Tensor> {
        let output = x.conv1d(&watched(tape, &self.kernel)?, &self.options)?;
        biased_and_activated(output, tape, self.bias.as_ref(), self.activation)
    }

    fn weights(&self) -> Vec<(&'static str, Arc<Tensor>)> {
        kernel_and_bias(&self.kernel, &self.bias)
    }

    fn variables_mut(&mut self) -> Vec<(&'static str, &mut Arc<Tensor>)> {
        kernel_and_bias_mut(&mut self.kernel, &mut self.bias)
    }
}

/// [batch, steps, features], or an error naming `layer`.
fn sequences(layer: &'static str, x: &Tensor) -> Result<[usize; 3]> {
    match *x.shape() {
        [batch, steps, features] => Ok([batch, steps, features]),
        _ => Err(Error::Shape {
            op: layer,
            message: format!("takes [batch, steps, features]; got shape {:?}", x.shape()),
        }),
    }
}

/// Keras's `MaxPooling1D` and `AveragePooling1D`: windows of `pool_size` steps, `strides` apart (the pool size
/// where left out), run as the 2-D pooling of [batch, steps, 1, features].
pub(super) struct Pooling1D {
    size: usize,
    stride: usize,
    padding: Padding,
    largest: bool,
    name: &'static str,
}

impl Pooling1D {
    pub(super) fn new(config: &Pooling1DConfig, largest: bool) -> Result<Self> {
        let size = positive("pool_size", config.pool_size.size())?;
        Ok(Pooling1D {
            size,
            stride: positive(
                "strides",
                config.strides.map_or(size, |strides| strides.size()),
            )?,
            padding: padding(&config.padding)?,
            largest,
            name: if largest {
                "MaxPooling1D"
            } else {
                "AveragePooling1D"
            },
        })
    }
}

impl Layer for Pooling1D {
    fn call(&self, x: &Tensor, _: Option<&GradientTape>) -> Result<Tensor> {
        let [batch, steps, features] = sequences(self.name, x)?;
        let image = x.view_as(&[batch, steps, 1, features])?;
        let (size, stride) = ([self.size, 1], [self.stride, 1]);
        let pooled = if self.largest {
            image.max_pool2d(size, stride, self.padding)?
        } else {
            image.avg_pool2d(size, stride, self.padding)?
        };
        let steps = pooled.shape()[1];
        pooled.into_shape(&[batch, steps, features])
    }
}

/// Keras's `GlobalAveragePooling1D`: the mean over the steps, [batch, steps, features] to [batch, features].
pub(super) struct GlobalAveragePooling1D;

impl Layer for GlobalAveragePooling1D {
    fn call(&self, x: &Tensor, _: Option<&GradientTape>) -> Result<Tensor> {
        sequences("GlobalAveragePooling1D", x)?;
        x.reduce(ReduceOp::Mean, Some(1))
    }
}

/// Keras's `GlobalMaxPooling1D` (over the steps) and `GlobalMaxPooling2D` (over height and width): the largest,
/// as one window of max pooling over the whole, so that the gradient goes to its first maximum.
pub(super) struct GlobalMaxPooling {
    pub(super) images: bool,
}

impl Layer for GlobalMaxPooling {
    fn call(&self, x: &Tensor, _: Option<&GradientTape>) -> Result<Tensor> {
        let (image, size, batch, features) = match (self.images, x.shape()) {
            (true, &[batch, height, width, channels]) => {
                (x.handle(), [height, width], batch, channels)
            }
            (false, &[batch, steps, features]) => (
                x.view_as(&[batch, steps, 1, features])?,
                [steps, 1],
                batch,
                features,
            ),
            (images, shape) => {
                return Err(Error::Shape {
                    op: if images {
                        "GlobalMaxPooling2D"
                    } else {
                        "GlobalMaxPooling1D"
                    },
                    message: format!(
                        "takes {}; got shape {shape:?}",
                        if images {
                            "[batch, height, width, channels]"
                        } else {
                            "[batch, steps, features]"
                        }
                    ),
                })
            }
        };
        image
            .max_pool2d(size, size, Padding::Valid)?
            .into_shape(&[batch, features])
    }
}
