//! Normalisation, dropout and attention on the tape, recorded as the ops they are made of (see
//! `ops::neural`), so that every gradient (to the input, gamma, beta, q, k and v) follows from those ops' rules.

use crate::error::Result;
use crate::op::matmul::Transpose;
use crate::op::reduce::ReduceOp;
use crate::ops::neural::{
    attention_bias, batch_norm_plan, dropout_mask, expect_epsilon, expect_vector, features_axis,
    moved, AttentionPlan, BatchNormOptions, BatchNormOutput,
};
use crate::tensor::Tensor;

use super::tape::{Tape, Var};

impl Tape {
    fn affine(&mut self, normal: Var, gamma: Option<Var>, beta: Option<Var>) -> Result<Var> {
        let scaled = match gamma {
            Some(gamma) => self.mul(normal, gamma)?,
            None => normal,
        };
        match beta {
            Some(beta) => self.add(scaled, beta),
            None => Ok(scaled),
        }
    }

    fn optional_value(&self, var: Option<Var>) -> Result<Option<&Tensor>> {
        var.map(|var| self.value(var)).transpose()
    }

    /// `x · rsqrt(variance + epsilon)`, recorded.
    fn scaled_by_deviation(&mut self, x: Var, variance: Var, epsilon: f32) -> Result<Var> {
        let shifted = self.add_scalar(variance, epsilon)?;
        let inverse = self.rsqrt(shifted)?;
        self.mul(x, inverse)
    }

    /// See [`Tensor::layer_norm`]; gradients flow to `x`, `gamma` and `beta`.
    pub fn layer_norm(
        &mut self,
        x: Var,
        gamma: Option<Var>,
        beta: Option<Var>,
        epsilon: f32,
    ) -> Result<Var> {
        const NAME: &str = "layer_norm";
        let value = self.value(x)?;
        let axis = features_axis(NAME, value)?;
        let features = value.shape()[axis];
        expect_epsilon(NAME, epsilon)?;
        expect_vector(NAME, "gamma", self.optional_value(gamma)?, features)?;
        expect_vector(NAME, "beta", self.optional_value(beta)?, features)?;
        let mean = self.reduce_axes(ReduceOp::Mean, x, Some(&[axis]), true)?;
        let centered = self.sub(x, mean)?;
        let squares = self.square(centered)?;
        let variance = self.reduce_axes(ReduceOp::Mean, squares, Some(&[axis]), true)?;
        let normal = self.scaled_by_deviation(centered, variance, epsilon)?;
        self.affine(normal, gamma, beta)
    }

    /// See [`Tensor::rms_norm`]; gradients flow to `x` and `gamma`.
    pub fn rms_norm(&mut self, x: Var, gamma: Option<Var>, epsilon: f32) -> Result<Var> {
        const NAME: &str = "rms_norm";
        let value = self.value(x)?;
        let axis = features_axis(NAME, value)?;
        let features = value.shape()[axis];
        expect_epsilon(NAME, epsilon)?;
        expect_vector(NAME, "gamma", self.optional_value(gamma)?, features)?;
        let squares = self.square(x)?;
        let power = self.reduce_axes(ReduceOp::Mean, squares, Some(&[axis]), true)?;
        let normal = self.scaled_by_deviation(x, power, epsilon)?;
        self.affine(normal, gamma, None)
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
        let (_, axes) = batch_norm_plan(
            self.value(x)?,
            moving_mean,
            moving_variance,
            [self.optional_value(gamma)?, self.optional_value(beta)?],
            options,
        )?;
        if !options.training {
            let mean = self.input(moving_mean.try_clone()?);
            let variance = self.input(moving_variance.try_clone()?);
            let centered = self.sub(x, mean)?;
            let normal = self.scaled_by_deviation(centered, variance, options.epsilon)?;
            return Ok(BatchNormOutput {
                output: self.affine(normal, gamma, beta)?,
                moving_mean: moving_mean.try_clone()?,
                moving_variance: moving_variance.try_clone()?,
            });
        }
        let mean = self.reduce_axes(ReduceOp::Mean, x, Some(&axes), false)?;
        let centered = self.sub(x, mean)?;
        let squares = self.square(centered)?;
        let variance = self.reduce_axes(ReduceOp::Mean, squares, Some(&axes), false)?;
        let normal = self.scaled_by_deviation(centered, variance, options.epsilon)?;
        let output = self.affine(normal, gamma, beta)?;
        Ok(BatchNormOutput {
            output,
            moving_mean: moved(moving_mean, self.value(mean)?, options.momentum)?,
            moving_variance: moved(moving_variance, self.value(variance)?, options.momentum)?,
        })
    }

    /// See [`Tensor::dropout`]: the gradient flows to the kept elements, scaled as they are.
    pub fn dropout(&mut self, x: Var, rate: f32, seed: u64) -> Result<Var> {
        match dropout_mask(self.value(x)?, rate, seed)? {
            Some(mask) => {
                let mask = self.input(mask);
                self.mul(x, mask)
            }
            None => Ok(x),
        }
    }

    /// See [`Tensor::scaled_dot_product_attention`]; gradients flow to `q`, `k` and `v`.
    pub fn scaled_dot_product_attention(
        &mut self,
        q: Var,
        k: Var,
        v: Var,
        mask: Option<&Tensor>,
        causal: bool,
    ) -> Result<Var> {
        let plan = AttentionPlan::new(self.value(q)?, self.value(k)?, self.value(v)?, mask)?;
        let bias = attention_bias(self.value(q)?, &plan, mask, causal)?;
        let [groups, _, _] = plan.scores3();
        let q3 = self.reshape(q, &[groups, plan.queries, plan.dim])?;
        let k3 = self.reshape(k, &[groups, plan.keys, plan.dim])?;
        let v3 = self.reshape(v, &[groups, plan.keys, plan.value_dim])?;
        let products = self.matmul_t(q3, k3, Transpose::Right)?;
        let mut scores = self.mul_scalar(products, plan.scale())?;
        if let Some(bias) = bias {
            let bias = self.input(bias);
            let grid = self.reshape(scores, &plan.scores4())?;
            let biased = self.add(grid, bias)?;
            scores = self.reshape(biased, &plan.scores3())?;
        }
        let weights = self.softmax(scores)?;
        let attended = self.matmul(weights, v3)?;
        self.reshape(attended, &plan.output_shape())
    }
}
