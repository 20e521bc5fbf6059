//! Normalisation, dropout and attention on the tape: each the `Tensor` op of its name (see `ops::neural`) run
//! on the variables' values, recorded as the ops it is made of, so that every gradient (to the input, gamma,
//! beta, q, k and v) follows from those ops' rules.

use crate::error::Result;
use crate::ops::neural::{BatchNormOptions, BatchNormOutput};
use crate::tensor::{Tape, Tensor, Var};

/// The variables of `x` and the optional vectors after it, and where each optional one sits among them.
fn with_optional(x: Var, optional: [Option<Var>; 2]) -> (Vec<Var>, [Option<usize>; 2]) {
    let mut inputs = vec![x];
    let positions = optional.map(|var| {
        var.map(|var| {
            inputs.push(var);
            inputs.len() - 1
        })
    });
    (inputs, positions)
}

fn pick(values: &[Tensor], position: Option<usize>) -> Option<&Tensor> {
    position.map(|position| &values[position])
}

impl Tape {
    /// See [`Tensor::layer_norm`]; gradients flow to `x`, `gamma` and `beta`.
    pub fn layer_norm(
        &mut self,
        x: Var,
        gamma: Option<Var>,
        beta: Option<Var>,
        epsilon: f32,
    ) -> Result<Var> {
        let (inputs, [g, b]) = with_optional(x, [gamma, beta]);
        self.record_one(&inputs, |v| {
            v[0].layer_norm(pick(v, g), pick(v, b), epsilon)
        })
    }

    /// See [`Tensor::rms_norm`]; gradients flow to `x` and `gamma`.
    pub fn rms_norm(&mut self, x: Var, gamma: Option<Var>, epsilon: f32) -> Result<Var> {
        let (inputs, [g, _]) = with_optional(x, [gamma, None]);
        self.record_one(&inputs, |v| v[0].rms_norm(pick(v, g), epsilon))
    }

    /// See [`Tensor::batch_norm`]; gradients flow to `x`, `gamma` and `beta` (through the batch's statistics
    /// when training); the running statistics it gives back are values, not recorded.
    pub fn batch_norm(
        &mut self,
        x: Var,
        moving_mean: &Tensor,
        moving_variance: &Tensor,
        gamma: Option<Var>,
        beta: Option<Var>,
        options: &BatchNormOptions,
    ) -> Result<BatchNormOutput<Var>> {
        let (inputs, [g, b]) = with_optional(x, [gamma, beta]);
        let mut statistics = None;
        let output = self.record_one(&inputs, |v| {
            let out = v[0].batch_norm(
                moving_mean,
                moving_variance,
                pick(v, g),
                pick(v, b),
                options,
            )?;
            statistics = Some((out.moving_mean, out.moving_variance));
            Ok(out.output)
        })?;
        // `record_one` returned the output, so it ran the op, which set them.
        let (moving_mean, moving_variance) = statistics.expect("the op ran");
        Ok(BatchNormOutput {
            output,
            moving_mean,
            moving_variance,
        })
    }

    /// See [`Tensor::dropout`]: the gradient flows to the kept elements, scaled as they are.
    pub fn dropout(&mut self, x: Var, rate: f64, seed: u64) -> Result<Var> {
        self.record_one(&[x], |v| v[0].dropout(rate, seed))
    }

    /// See [`Tensor::scaled_dot_product_attention`]; gradients flow to `q`, `k` and `v`.
    pub fn scaled_dot_product_attention(
        &mut self,
        q: Var,
        k: Var,
        v: Var,
        mask: Option<&Tensor>,
        causal: bool,
        scale: Option<f64>,
    ) -> Result<Var> {
        self.record_one(&[q, k, v], |t| {
            t[0].scaled_dot_product_attention(&t[1], &t[2], mask, causal, scale)
        })
    }
}
