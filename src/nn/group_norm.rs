//! Keras's `GroupNormalization` (Wu and He 2018): the channels split into groups, each group of each sample
//! shifted to mean 0 and scaled to variance 1 over its positions and channels, then `· gamma + beta` per
//! channel. A composite of the one layer normalisation ([`Tensor::layer_norm_over`]), so its gradient is the
//! ops'.

use std::sync::Arc;

use crate::autograd::GradientTape;
use crate::error::{Error, Result};
use crate::session::Session;
use crate::tensor::Tensor;

use super::config::{positive, GroupNormalizationConfig};
use super::layers::{affine_mut, affine_weights, named_affine, watched, Layer};

pub(super) struct GroupNormalization {
    groups: usize,
    gamma: Option<Arc<Tensor>>,
    beta: Option<Arc<Tensor>>,
    epsilon: f32,
}

impl GroupNormalization {
    pub(super) fn new(
        session: &Session,
        config: &GroupNormalizationConfig,
        input_shape: &[usize],
    ) -> Result<Self> {
        let groups = positive("groups", config.groups)?;
        let channels = input_shape.last().copied().unwrap_or(0);
        if channels == 0 || channels % groups != 0 {
            return Err(Error::Shape {
                op: "GroupNormalization",
                message: format!(
                    "takes channels (the last axis) a multiple of the groups ({groups}); got samples of \
                     shape {input_shape:?}"
                ),
            });
        }
        let (gamma, beta) = affine_weights(session, channels, config.scale, config.center)?;
        Ok(GroupNormalization {
            groups,
            gamma,
            beta,
            epsilon: config.epsilon,
        })
    }
}

impl Layer for GroupNormalization {
    fn call(&self, x: &Tensor, tape: Option<&GradientTape>) -> Result<Tensor> {
        let gamma = self.gamma.as_ref().map(|g| watched(tape, g)).transpose()?;
        let beta = self.beta.as_ref().map(|b| watched(tape, b)).transpose()?;
        group_normalization(x, self.groups, gamma.as_ref(), beta.as_ref(), self.epsilon)
    }

    fn weights(&self) -> Vec<(&'static str, Arc<Tensor>)> {
        named_affine(&self.gamma, &self.beta)
    }

    fn variables_mut(&mut self) -> Vec<(&'static str, &mut Arc<Tensor>)> {
        affine_mut(&mut self.gamma, &mut self.beta)
    }
}

/// Group normalisation of `x` (its last axis the channels, its first the samples): the channels split into
/// `groups`, each group of each sample shifted to mean 0 and scaled to variance 1 over its positions and channels
/// (the variance biased, `epsilon` added to it), then `· gamma + beta` per channel where given (each of shape
/// `[channels]`). The layer's pass and the Python package's `GroupNormalization` are this function; its ops record
/// themselves on a tape, so its gradient is theirs.
pub fn group_normalization(
    x: &Tensor,
    groups: usize,
    gamma: Option<&Tensor>,
    beta: Option<&Tensor>,
    epsilon: f32,
) -> Result<Tensor> {
    let shape = x.shape().to_vec();
    let channels = shape.last().copied().unwrap_or(0);
    if shape.len() < 2 || groups == 0 || channels % groups != 0 {
        return Err(Error::Shape {
            op: "group_normalization",
            message: format!(
                "takes a batch of at least 2 axes whose channels (the last) are a multiple of the groups \
                 ({groups}, above 0); got shape {shape:?}"
            ),
        });
    }
    for (name, parameter) in [("gamma", gamma), ("beta", beta)] {
        if let Some(parameter) = parameter {
            if parameter.shape() != [channels] {
                return Err(Error::Shape {
                    op: "group_normalization",
                    message: format!(
                        "{name} has one value per channel, shape [{channels}]; got {:?}",
                        parameter.shape()
                    ),
                });
            }
        }
    }
    let mut grouped = shape[..shape.len() - 1].to_vec();
    grouped.extend([groups, channels / groups]);
    // Every axis but the batch's and the group's: the positions and the channels of a group.
    let axes: Vec<usize> = (1..grouped.len())
        .filter(|&axis| axis != grouped.len() - 2)
        .collect();
    let mut y = x
        .view_as(&grouped)?
        .layer_norm_over(&axes, None, None, epsilon)?
        .view_as(&shape)?;
    if let Some(gamma) = gamma {
        y = y.mul(gamma)?;
    }
    if let Some(beta) = beta {
        y = y.add(beta)?;
    }
    Ok(y)
}
