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
use super::layers::{affine_weights, named_affine, watched, Layer};

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
        let shape = x.shape().to_vec();
        let channels = shape.last().copied().unwrap_or(0);
        let mut grouped = shape[..shape.len().saturating_sub(1)].to_vec();
        grouped.extend([self.groups, channels / self.groups]);
        // Every axis but the batch's and the group's: the positions and the channels of a group.
        let axes: Vec<usize> = (1..grouped.len())
            .filter(|&axis| axis != grouped.len() - 2)
            .collect();
        let mut y = x
            .view_as(&grouped)?
            .layer_norm_over(&axes, None, None, self.epsilon)?
            .view_as(&shape)?;
        if let Some(gamma) = &self.gamma {
            y = y.mul(&watched(tape, gamma)?)?;
        }
        if let Some(beta) = &self.beta {
            y = y.add(&watched(tape, beta)?)?;
        }
        Ok(y)
    }

    fn weights(&self) -> Vec<(&'static str, Arc<Tensor>)> {
        named_affine(&self.gamma, &self.beta)
    }
}
