//! Normalisation, dropout and attention, each made of ops the library already has (reductions over axes,
//! broadcasting arithmetic, `rsqrt`, the device's random fill, batched matmul and softmax), so that the tape's
//! versions (`autograd::neural`) get their gradients from those ops' rules. Layouts and defaults follow Keras.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::logic::LogicBinaryOp;
use crate::op::matmul::Transpose;
use crate::op::reduce::ReduceOp;
use crate::tensor::Tensor;

/// What a masked attention score becomes: far below any real score, so that its weight is exactly 0, yet
/// finite, so that a row with nothing to attend gives a uniform row rather than NaN.
pub(crate) const MASKED_SCORE: f32 = -1e30;

/// How [`Tensor::batch_norm`] normalises: Keras's `BatchNormalization` defaults.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BatchNormOptions {
    /// Training: normalise by the batch's statistics and move the running ones toward them; otherwise
    /// normalise by the running statistics.
    pub training: bool,
    /// `moving = moving · momentum + batch · (1 − momentum)`.
    pub momentum: f32,
    pub epsilon: f32,
}

impl Default for BatchNormOptions {
    fn default() -> Self {
        BatchNormOptions {
            training: false,
            momentum: 0.99,
            epsilon: 1e-3,
        }
    }
}

/// What batch normalisation gives: its output (a tensor, or a tape's variable) and the running statistics
/// to keep for the next step (the given ones, unchanged, when not training).
#[derive(Debug)]
pub struct BatchNormOutput<T> {
    pub output: T,
    pub moving_mean: Tensor,
    pub moving_variance: Tensor,
}

fn invalid(what: &'static str, given: String, expected: &str) -> Error {
    Error::InvalidArgument {
        what,
        given,
        expected: expected.to_string(),
    }
}

pub(crate) fn expect_epsilon(op: &'static str, epsilon: f32) -> Result<()> {
    if epsilon.is_finite() && epsilon >= 0.0 {
        Ok(())
    } else {
        Err(invalid(
            op,
            format!("epsilon {epsilon}"),
            "a finite epsilon of at least 0",
        ))
    }
}

/// The last axis of `x`, an f32 tensor of at least one axis: the one layer and RMS norms normalise over.
pub(crate) fn features_axis(op: &'static str, x: &Tensor) -> Result<usize> {
    x.expect_dtype(op, DType::F32)?;
    x.shape().len().checked_sub(1).ok_or_else(|| Error::Shape {
        op,
        message: "normalises over the last axis; a 0-d tensor has none".to_string(),
    })
}

/// Errors unless `parameter` (gamma, beta, a running statistic) is an f32 vector of `features`.
pub(crate) fn expect_vector(
    op: &'static str,
    what: &str,
    parameter: Option<&Tensor>,
    features: usize,
) -> Result<()> {
    let Some(parameter) = parameter else {
        return Ok(());
    };
    parameter.expect_dtype(op, DType::F32)?;
    if parameter.shape() != [features] {
        return Err(Error::Shape {
            op,
            message: format!(
                "{what} must have shape [{features}] (the normalised axis); got {:?}",
                parameter.shape()
            ),
        });
    }
    Ok(())
}

/// Checks batch normalisation's operands; gives the channels (the last axis) and the axes reduced over.
pub(crate) fn batch_norm_plan(
    x: &Tensor,
    moving_mean: &Tensor,
    moving_variance: &Tensor,
    [gamma, beta]: [Option<&Tensor>; 2],
    options: &BatchNormOptions,
) -> Result<(usize, Vec<usize>)> {
    const NAME: &str = "batch_norm";
    let last = features_axis(NAME, x)?;
    let channels = x.shape()[last];
    for (what, tensor) in [
        ("moving_mean", Some(moving_mean)),
        ("moving_variance", Some(moving_variance)),
        ("gamma", gamma),
        ("beta", beta),
    ] {
        expect_vector(NAME, what, tensor, channels)?;
    }
    expect_epsilon(NAME, options.epsilon)?;
    if !(0.0..=1.0).contains(&options.momentum) {
        return Err(invalid(
            NAME,
            format!("momentum {}", options.momentum),
            "a momentum in [0, 1]",
        ));
    }
    if options.training && last == 0 {
        // A vector of channels alone is one example: its batch variance is 0 and says nothing.
        return Err(Error::Shape {
            op: NAME,
            message: format!(
                "training needs a batch axis before the channels; got shape {:?}",
                x.shape()
            ),
        });
    }
    Ok((channels, (0..last).collect()))
}

/// The running statistics moved toward the batch's.
pub(crate) fn moved(moving: &Tensor, batch: &Tensor, momentum: f32) -> Result<Tensor> {
    moving
        .mul_scalar(momentum)?
        .add(&batch.mul_scalar(1.0 - momentum)?)
}

/// The kept elements' scale (`1 / (1 − rate)`) where the device's uniform draw from `seed` is at least `rate`,
/// else 0: inverted dropout's mask for a tensor like `x`. None where `rate` is 0 (nothing dropped).
pub(crate) fn dropout_mask(x: &Tensor, rate: f32, seed: u64) -> Result<Option<Tensor>> {
    const NAME: &str = "dropout";
    x.expect_dtype(NAME, DType::F32)?;
    if !(0.0..1.0).contains(&rate) {
        return Err(invalid(NAME, format!("rate {rate}"), "a rate in [0, 1)"));
    }
    if rate == 0.0 {
        return Ok(None);
    }
    let uniform = x.output(NAME, x.shape(), DType::F32)?;
    uniform.fill_uniform_(seed, 0.0, 1.0)?;
    let threshold = x.upload_beside(&[rate], &[])?;
    let kept = uniform
        .logic_binary(LogicBinaryOp::GreaterEqual, &threshold)?
        .cast(DType::F32)?;
    Ok(Some(kept.mul_scalar(1.0 / (1.0 - rate))?))
}

/// The sizes of an attention over `[batch, heads, seq, dim]` operands.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AttentionPlan {
    pub batch: usize,
    pub heads: usize,
    pub queries: usize,
    pub keys: usize,
    pub dim: usize,
    pub value_dim: usize,
}

impl AttentionPlan {
    pub fn new(q: &Tensor, k: &Tensor, v: &Tensor, mask: Option<&Tensor>) -> Result<AttentionPlan> {
        const NAME: &str = "scaled_dot_product_attention";
        for operand in [q, k, v] {
            operand.expect_dtype(NAME, DType::F32)?;
        }
        let shape_error = |message: String| Error::Shape { op: NAME, message };
        let (&[batch, heads, queries, dim], &[kb, kh, keys, kd], &[vb, vh, value_keys, value_dim]) =
            (q.shape(), k.shape(), v.shape())
        else {
            return Err(shape_error(format!(
                "q, k and v are [batch, heads, seq, dim]; got {:?}, {:?} and {:?}",
                q.shape(),
                k.shape(),
                v.shape()
            )));
        };
        if [kb, vb] != [batch; 2] || [kh, vh] != [heads; 2] || kd != dim || value_keys != keys {
            return Err(shape_error(format!(
                "k must be [{batch}, {heads}, keys, {dim}] and v [{batch}, {heads}, keys, value_dim] with the \
                 keys of k; got {:?} and {:?}",
                k.shape(),
                v.shape()
            )));
        }
        if let Some(mask) = mask {
            mask.expect_dtype(NAME, DType::Bool)?;
            let scores = [batch, heads, queries, keys];
            let fits = mask.shape().len() <= 4
                && mask
                    .shape()
                    .iter()
                    .rev()
                    .zip(scores.iter().rev())
                    .all(|(&m, &s)| m == s || m == 1);
            if !fits {
                return Err(shape_error(format!(
                    "the mask {:?} must broadcast to the scores' {scores:?}",
                    mask.shape()
                )));
            }
        }
        Ok(AttentionPlan {
            batch,
            heads,
            queries,
            keys,
            dim,
            value_dim,
        })
    }

    pub fn scale(&self) -> f32 {
        1.0 / (self.dim.max(1) as f32).sqrt()
    }

    /// Scores as a batch of matrices: `[batch · heads, queries, keys]`.
    pub fn scores3(&self) -> [usize; 3] {
        [self.batch * self.heads, self.queries, self.keys]
    }

    pub fn scores4(&self) -> [usize; 4] {
        [self.batch, self.heads, self.queries, self.keys]
    }

    pub fn output_shape(&self) -> [usize; 4] {
        [self.batch, self.heads, self.queries, self.value_dim]
    }
}

/// What is added to the scores before the softmax: 0 where a query may attend, [`MASKED_SCORE`] where the
/// mask is false or (causal) the key comes after the query (PyTorch's top-left alignment). None: no mask.
pub(crate) fn attention_bias(
    q: &Tensor,
    plan: &AttentionPlan,
    mask: Option<&Tensor>,
    causal: bool,
) -> Result<Option<Tensor>> {
    let masked = match mask {
        Some(mask) => {
            let open = q.upload_beside(&[0.0], &[])?;
            let shut = q.upload_beside(&[MASKED_SCORE], &[])?;
            Some(mask.where_(&open, &shut)?)
        }
        None => None,
    };
    let ordered = if causal {
        let (queries, keys) = (plan.queries, plan.keys);
        let bias: Vec<f32> = (0..queries * keys)
            .map(|at| {
                if at % keys > at / keys {
                    MASKED_SCORE
                } else {
                    0.0
                }
            })
            .collect();
        Some(q.upload_beside(&bias, &[queries, keys])?)
    } else {
        None
    };
    match (masked, ordered) {
        (Some(masked), Some(ordered)) => Ok(Some(masked.add(&ordered)?)),
        (masked, ordered) => Ok(masked.or(ordered)),
    }
}

impl Tensor {
    /// Layer normalisation over the last axis: `(x − mean) / sqrt(variance + epsilon) · gamma + beta`, the
    /// variance biased (Keras's `LayerNormalization`, PyTorch's `LayerNorm`); `gamma` and `beta` vectors of
    /// the last axis, either left out.
    pub fn layer_norm(
        &self,
        gamma: Option<&Tensor>,
        beta: Option<&Tensor>,
        epsilon: f32,
    ) -> Result<Tensor> {
        const NAME: &str = "layer_norm";
        let axis = features_axis(NAME, self)?;
        expect_epsilon(NAME, epsilon)?;
        expect_vector(NAME, "gamma", gamma, self.shape()[axis])?;
        expect_vector(NAME, "beta", beta, self.shape()[axis])?;
        let mean = self.reduce_axes(ReduceOp::Mean, Some(&[axis]), true)?;
        let centered = self.sub(&mean)?;
        let variance = centered
            .square()?
            .reduce_axes(ReduceOp::Mean, Some(&[axis]), true)?;
        let normal = centered.mul(&variance.add_scalar(epsilon)?.rsqrt()?)?;
        affine(normal, gamma, beta)
    }

    /// Root-mean-square normalisation over the last axis: `x / sqrt(mean(x²) + epsilon) · gamma`.
    pub fn rms_norm(&self, gamma: Option<&Tensor>, epsilon: f32) -> Result<Tensor> {
        const NAME: &str = "rms_norm";
        let axis = features_axis(NAME, self)?;
        expect_epsilon(NAME, epsilon)?;
        expect_vector(NAME, "gamma", gamma, self.shape()[axis])?;
        let power = self
            .square()?
            .reduce_axes(ReduceOp::Mean, Some(&[axis]), true)?;
        affine(self.mul(&power.add_scalar(epsilon)?.rsqrt()?)?, gamma, None)
    }

    /// Batch normalisation over every axis but the last (channels-last, Keras's `BatchNormalization`):
    /// training, by the batch's mean and biased variance, with the running statistics moved toward them;
    /// otherwise by the running statistics.
    pub fn batch_norm(
        &self,
        moving_mean: &Tensor,
        moving_variance: &Tensor,
        gamma: Option<&Tensor>,
        beta: Option<&Tensor>,
        options: &BatchNormOptions,
    ) -> Result<BatchNormOutput<Tensor>> {
        let (_, axes) =
            batch_norm_plan(self, moving_mean, moving_variance, [gamma, beta], options)?;
        if !options.training {
            let normal = self
                .sub(moving_mean)?
                .mul(&moving_variance.add_scalar(options.epsilon)?.rsqrt()?)?;
            return Ok(BatchNormOutput {
                output: affine(normal, gamma, beta)?,
                moving_mean: moving_mean.try_clone()?,
                moving_variance: moving_variance.try_clone()?,
            });
        }
        let mean = self.reduce_axes(ReduceOp::Mean, Some(&axes), false)?;
        let centered = self.sub(&mean)?;
        let variance = centered
            .square()?
            .reduce_axes(ReduceOp::Mean, Some(&axes), false)?;
        let normal = centered.mul(&variance.add_scalar(options.epsilon)?.rsqrt()?)?;
        Ok(BatchNormOutput {
            output: affine(normal, gamma, beta)?,
            // State, not recorded: a tape tracing `x` keeps no ops of the running statistics.
            moving_mean: moved(moving_mean, &mean.share(), options.momentum)?,
            moving_variance: moved(moving_variance, &variance.share(), options.momentum)?,
        })
    }

    /// Inverted dropout: each element kept where the device's uniform draw from `seed` is at least `rate`
    /// (the same seed, the same mask, on every backend) and scaled by `1 / (1 − rate)`, the rest 0.
    pub fn dropout(&self, rate: f32, seed: u64) -> Result<Tensor> {
        match dropout_mask(self, rate, seed)? {
            Some(mask) => self.mul(&mask),
            // Traced, the tensor itself, as the node it is.
            None if self.is_traced() => Ok(self.handle()),
            None => self.try_clone(),
        }
    }

    /// `softmax(q · kᵀ / sqrt(dim) + bias) · v` over `[batch, heads, seq, dim]` operands (this tensor is `q`):
    /// `mask` a bool tensor broadcasting to `[batch, heads, queries, keys]`, true where a query may attend;
    /// `causal` hides the keys after each query. The softmax subtracts each row's maximum.
    pub fn scaled_dot_product_attention(
        &self,
        k: &Tensor,
        v: &Tensor,
        mask: Option<&Tensor>,
        causal: bool,
    ) -> Result<Tensor> {
        let plan = AttentionPlan::new(self, k, v, mask)?;
        let [groups, _, _] = plan.scores3();
        let q3 = self.view_as(&[groups, plan.queries, plan.dim])?;
        let k3 = k.view_as(&[groups, plan.keys, plan.dim])?;
        let v3 = v.view_as(&[groups, plan.keys, plan.value_dim])?;
        let mut scores = q3
            .matmul_t(&k3, Transpose::Right)?
            .mul_scalar(plan.scale())?;
        if let Some(bias) = attention_bias(self, &plan, mask, causal)? {
            scores = scores
                .into_shape(&plan.scores4())?
                .add(&bias)?
                .into_shape(&plan.scores3())?;
        }
        scores
            .softmax()?
            .matmul(&v3)?
            .into_shape(&plan.output_shape())
    }
}

fn affine(normal: Tensor, gamma: Option<&Tensor>, beta: Option<&Tensor>) -> Result<Tensor> {
    let scaled = match gamma {
        Some(gamma) => normal.mul(gamma)?,
        None => normal,
    };
    match beta {
        Some(beta) => scaled.add(beta),
        None => Ok(scaled),
    }
}
