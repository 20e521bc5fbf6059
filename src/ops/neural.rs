//! Normalisation, dropout, embedding and attention, each made of ops the library already has (reductions over axes,
//! broadcasting arithmetic, `rsqrt`, the device's random fill, batched matmul and softmax), so that the tape's
//! versions (`autograd::neural`) get their gradients from those ops' rules. Layouts and defaults follow Keras.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::logic::LogicBinaryOp;
use crate::op::matmul::Transpose;
use crate::op::reduce::ReduceOp;
use crate::shape::broadcast;
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
    /// `moving = moving · momentum + batch · (1 − momentum)`, `1 − momentum` taken in double precision (as
    /// Keras's Python does) before each factor is rounded to f32.
    pub momentum: f64,
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

/// `axes` of an f32 `x`, sorted: at least one, each in range and named once.
fn normalised_axes(op: &'static str, x: &Tensor, axes: &[usize]) -> Result<Vec<usize>> {
    x.expect_dtype(op, DType::F32)?;
    let mut sorted = axes.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let rank = x.shape().len();
    if sorted.is_empty() || sorted.len() != axes.len() || sorted.iter().any(|&axis| axis >= rank) {
        return Err(Error::Shape {
            op,
            message: format!(
                "normalises over distinct axes of the input (at least one) and its shape {:?} has {rank}; got \
                 {axes:?}",
                x.shape()
            ),
        });
    }
    Ok(sorted)
}

/// A scale or offset of a norm over `axes` of `x`, ready to broadcast: one shaped as those axes of `x` is laid
/// along them; any other shape must broadcast to `x`'s without growing it, as NumPy broadcasts it.
fn laid_along(
    op: &'static str,
    what: &str,
    x: &Tensor,
    parameter: Option<&Tensor>,
    axes: &[usize],
) -> Result<Option<Tensor>> {
    let Some(parameter) = parameter else {
        return Ok(None);
    };
    parameter.expect_dtype(op, DType::F32)?;
    let shape = x.shape();
    let along: Vec<usize> = axes.iter().map(|&axis| shape[axis]).collect();
    if parameter.shape() == along {
        let trailing = axes
            .iter()
            .enumerate()
            .all(|(at, &axis)| axis == shape.len() - axes.len() + at);
        if trailing {
            return Ok(Some(parameter.handle()));
        }
        let spread: Vec<usize> = (0..shape.len())
            .map(|axis| if axes.contains(&axis) { shape[axis] } else { 1 })
            .collect();
        return parameter.view_as(&spread).map(Some);
    }
    if !broadcasts_onto(parameter.shape(), shape) {
        return Err(Error::Shape {
            op,
            message: format!(
                "{what} of shape {:?} neither matches the normalised axes {along:?} nor broadcasts to x's shape \
                 {shape:?}",
                parameter.shape()
            ),
        });
    }
    Ok(Some(parameter.handle()))
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
pub(crate) fn moved(moving: &Tensor, batch: &Tensor, momentum: f64) -> Result<Tensor> {
    moving
        .mul_scalar(momentum as f32)?
        .add(&batch.mul_scalar((1.0 - momentum) as f32)?)
}

/// The kept elements' scale (`1 / (1 − rate)`, taken in double precision) where the device's uniform draw
/// from `seed` is at least `rate`, else 0: inverted dropout's mask, one draw per element of `noise_shape` (a size
/// per axis of `x`, each `x`'s or 1). None where `rate` is 0 (nothing dropped).
pub(crate) fn dropout_mask(
    x: &Tensor,
    rate: f64,
    seed: u64,
    noise_shape: &[usize],
) -> Result<Option<Tensor>> {
    const NAME: &str = "dropout";
    x.expect_dtype(NAME, DType::F32)?;
    if !(0.0..1.0).contains(&rate) {
        return Err(invalid(NAME, format!("rate {rate}"), "a rate in [0, 1)"));
    }
    let fits = noise_shape.len() == x.shape().len()
        && noise_shape
            .iter()
            .zip(x.shape())
            .all(|(&size, &length)| size == 1 || size == length);
    if !fits {
        return Err(Error::Shape {
            op: NAME,
            message: format!(
                "noise_shape has a size per axis of the input's {:?}, each that axis' length or 1; got \
                 {noise_shape:?}",
                x.shape()
            ),
        });
    }
    if rate == 0.0 {
        return Ok(None);
    }
    let uniform = x.output(NAME, noise_shape, DType::F32)?;
    uniform.fill_uniform_(seed, 0.0, 1.0)?;
    let threshold = x.upload_beside(&[rate as f32], &[])?;
    let kept = uniform
        .logic_binary(LogicBinaryOp::GreaterEqual, &threshold)?
        .cast(DType::F32)?;
    Ok(Some(kept.mul_scalar((1.0 / (1.0 - rate)) as f32)?))
}

/// Checks attention's operands (PyTorch's `scaled_dot_product_attention`); gives the scores' shape, `[batch,
/// heads, queries, keys]` with batch and heads broadcast.
fn attention_scores_shape(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<&Tensor>,
) -> Result<Vec<usize>> {
    const NAME: &str = "scaled_dot_product_attention";
    let shape_error = |message: String| Error::Shape { op: NAME, message };
    for operand in [q, k, v] {
        operand.expect_dtype(NAME, DType::F32)?;
        if operand.shape().len() != 4 {
            return Err(shape_error(format!(
                "q, k and v are [batch, heads, seq, dim]; got {:?}, {:?} and {:?}",
                q.shape(),
                k.shape(),
                v.shape()
            )));
        }
    }
    let (qs, ks, vs) = (q.shape(), k.shape(), v.shape());
    if ks[3] != qs[3] {
        return Err(shape_error(format!(
            "q and k end in the same dim; got shapes {qs:?} and {ks:?}"
        )));
    }
    if ks[2] != vs[2] {
        return Err(shape_error(format!(
            "k and v have one row per key; got shapes {ks:?} and {vs:?}"
        )));
    }
    let mut scores = broadcast(NAME, &qs[..2], &ks[..2])
        .and_then(|joined| broadcast(NAME, &joined, &vs[..2]))
        .map_err(|_| {
            shape_error(format!(
                "q, k and v's batch and heads must broadcast; got shapes {qs:?}, {ks:?}, {vs:?}"
            ))
        })?;
    scores.extend([qs[2], ks[2]]);
    if let Some(mask) = mask {
        mask.expect_dtype(NAME, DType::Bool)?;
        if !broadcasts_onto(mask.shape(), &scores) {
            return Err(shape_error(format!(
                "mask of shape {:?} does not broadcast to the scores' {scores:?}",
                mask.shape()
            )));
        }
    }
    Ok(scores)
}

impl Tensor {
    /// Layer normalisation over the last axis: `(x − mean) / sqrt(variance + epsilon) · gamma + beta`, the
    /// variance biased (Keras's `LayerNormalization`, PyTorch's `LayerNorm`); `gamma` and `beta` vectors of
    /// the last axis, either left out. [`Tensor::layer_norm_over`] the last axis.
    pub fn layer_norm(
        &self,
        gamma: Option<&Tensor>,
        beta: Option<&Tensor>,
        epsilon: f32,
    ) -> Result<Tensor> {
        let axis = features_axis("layer_norm", self)?;
        expect_vector("layer_norm", "gamma", gamma, self.shape()[axis])?;
        expect_vector("layer_norm", "beta", beta, self.shape()[axis])?;
        self.layer_norm_over(&[axis], gamma, beta, epsilon)
    }

    /// Layer normalisation over `axes` (distinct, in any order): each slice over them shifted to mean 0 and
    /// scaled to variance 1 (biased, divided by the count, as Keras's `LayerNormalization(axis=...)`), then
    /// `· gamma + beta`. A parameter shaped as the normalised axes (`x.shape[axes]`, Keras's) is laid along
    /// them; any other shape must broadcast to `x`'s without growing it.
    pub fn layer_norm_over(
        &self,
        axes: &[usize],
        gamma: Option<&Tensor>,
        beta: Option<&Tensor>,
        epsilon: f32,
    ) -> Result<Tensor> {
        const NAME: &str = "layer_norm";
        let axes = normalised_axes(NAME, self, axes)?;
        expect_epsilon(NAME, epsilon)?;
        let scale = laid_along(NAME, "gamma", self, gamma, &axes)?;
        let shift = laid_along(NAME, "beta", self, beta, &axes)?;
        let mean = self.reduce_axes(ReduceOp::Mean, Some(&axes), true)?;
        let centered = self.sub(&mean)?;
        let variance = square(&centered)?.reduce_axes(ReduceOp::Mean, Some(&axes), true)?;
        let normal = centered.mul(&variance.add_scalar(epsilon)?.rsqrt()?)?;
        affine(normal, scale.as_ref(), shift.as_ref())
    }

    /// Root-mean-square normalisation over the last axis: `x / sqrt(mean(x²) + epsilon) · gamma`.
    /// [`Tensor::rms_norm_over`] the last axis.
    pub fn rms_norm(&self, gamma: Option<&Tensor>, epsilon: f32) -> Result<Tensor> {
        let axis = features_axis("rms_norm", self)?;
        expect_vector("rms_norm", "gamma", gamma, self.shape()[axis])?;
        self.rms_norm_over(&[axis], gamma, epsilon)
    }

    /// Root-mean-square normalisation over `axes`: `x / sqrt(mean(x², axes) + epsilon) · gamma` (Zhang and
    /// Sennrich 2019; PyTorch's `rms_norm`, Keras's `ops.rms_normalization`), `gamma` shaped as
    /// [`Tensor::layer_norm_over`]'s.
    pub fn rms_norm_over(
        &self,
        axes: &[usize],
        gamma: Option<&Tensor>,
        epsilon: f32,
    ) -> Result<Tensor> {
        const NAME: &str = "rms_norm";
        let axes = normalised_axes(NAME, self, axes)?;
        expect_epsilon(NAME, epsilon)?;
        let scale = laid_along(NAME, "gamma", self, gamma, &axes)?;
        let power = square(self)?.reduce_axes(ReduceOp::Mean, Some(&axes), true)?;
        affine(
            self.mul(&power.add_scalar(epsilon)?.rsqrt()?)?,
            scale.as_ref(),
            None,
        )
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
        let (channels, axes) =
            batch_norm_plan(self, moving_mean, moving_variance, [gamma, beta], options)?;
        if !options.training {
            let normal = self
                .sub(moving_mean)?
                .mul(&moving_variance.add_scalar(options.epsilon)?.rsqrt()?)?;
            return Ok(BatchNormOutput {
                output: affine(normal, gamma, beta)?,
                // The given statistics themselves, unchanged: handles of the same values.
                moving_mean: moving_mean.share(),
                moving_variance: moving_variance.share(),
            });
        }
        let mean = self.reduce_axes(ReduceOp::Mean, Some(&axes), true)?;
        let centered = self.sub(&mean)?;
        let variance = square(&centered)?.reduce_axes(ReduceOp::Mean, Some(&axes), true)?;
        let normal = centered.mul(&variance.add_scalar(options.epsilon)?.rsqrt()?)?;
        // State, not recorded: untraced handles, so that a tape tracing `x` keeps no ops of the running
        // statistics.
        let per_channel = |batch: &Tensor| batch.share().into_shape(&[channels]);
        Ok(BatchNormOutput {
            output: affine(normal, gamma, beta)?,
            moving_mean: moved(&moving_mean.share(), &per_channel(&mean)?, options.momentum)?,
            moving_variance: moved(
                &moving_variance.share(),
                &per_channel(&variance)?,
                options.momentum,
            )?,
        })
    }

    /// Inverted dropout: each element kept where the device's uniform draw from `seed` is at least `rate`
    /// (the same seed, the same mask, on every backend) and scaled by `1 / (1 − rate)`, the rest 0.
    pub fn dropout(&self, rate: f64, seed: u64) -> Result<Tensor> {
        self.dropout_shaped(rate, seed, self.shape())
    }

    /// [`Tensor::dropout`] with one draw per element of `noise_shape` (Keras's: a size per axis, 1 where one
    /// draw serves the whole axis), the mask broadcast over the tensor: `[batch, 1, features]` drops whole
    /// features of a sequence.
    pub fn dropout_shaped(&self, rate: f64, seed: u64, noise_shape: &[usize]) -> Result<Tensor> {
        match dropout_mask(self, rate, seed, noise_shape)? {
            Some(mask) => self.mul(&mask),
            // Traced, the tensor itself, as the node it is.
            None if self.is_traced() => Ok(self.handle()),
            None => self.try_clone(),
        }
    }

    /// The rows of this table `[count, dim]` at `ids` (u32, or i32 read as its bits, of any shape): a tensor of
    /// shape `ids.shape + [dim]`, Keras's `Embedding` and PyTorch's `embedding`. On a tape the gradient goes to
    /// the table, rows picked more than once adding up theirs. An id outside `[0, count)` (a negative i32
    /// included: ids are not counted from the end here) is refused, as [`Tensor::take`] refuses it.
    pub fn embedding(&self, ids: &Tensor) -> Result<Tensor> {
        const NAME: &str = "embedding";
        self.expect_dtype(NAME, DType::F32)?;
        let &[_, dim] = self.shape() else {
            return Err(Error::Shape {
                op: NAME,
                message: format!("the table is [count, dim]; got shape {:?}", self.shape()),
            });
        };
        let ids = match ids.dtype() {
            DType::U32 => ids.share(),
            DType::I32 => ids.cast(DType::U32)?,
            found => {
                return Err(Error::DType {
                    op: NAME,
                    expected: DType::U32,
                    found,
                })
            }
        };
        let mut shape = ids.shape().to_vec();
        shape.push(dim);
        self.take(&ids.view_as(&[ids.len()])?, 0)?
            .into_shape(&shape)
    }

    /// `softmax(q · kᵀ · scale, masked) · v` (this tensor is `q`), PyTorch's `scaled_dot_product_attention`:
    /// `q` `[batch, heads, queries, dim]`, `k` `[batch, heads, keys, dim]`, `v` `[batch, heads, keys,
    /// value_dim]`, batch and heads broadcasting as products' do; `scale` by default `1 / sqrt(dim)`. `mask`
    /// is a bool tensor broadcasting to `[batch, heads, queries, keys]`, true where a query may attend;
    /// `causal` lets query i attend to keys j ≤ i (aligned to the top left); with both, a key must pass
    /// both. A masked score becomes [`MASKED_SCORE`] before the softmax (which subtracts each row's maximum), so
    /// that its weight is exactly 0 and a query with nothing to attend weighs all keys equally.
    pub fn scaled_dot_product_attention(
        &self,
        k: &Tensor,
        v: &Tensor,
        mask: Option<&Tensor>,
        causal: bool,
        scale: Option<f64>,
    ) -> Result<Tensor> {
        const NAME: &str = "scaled_dot_product_attention";
        let scores_shape = attention_scores_shape(self, k, v, mask)?;
        let factor = scale.unwrap_or_else(|| 1.0 / (self.shape()[3] as f64).sqrt());
        if !factor.is_finite() {
            return Err(invalid(NAME, format!("scale {factor}"), "a finite scale"));
        }
        let mut allowed = mask.map(Tensor::share);
        if causal {
            let (queries, keys) = (scores_shape[2], scores_shape[3]);
            let order: Vec<bool> = (0..queries * keys)
                .map(|at| at % keys <= at / keys)
                .collect();
            let lower = self.upload_bool_beside(&order, &[queries, keys])?;
            allowed = Some(match allowed {
                Some(mask) => mask.logic_binary(LogicBinaryOp::LogicalAnd, &lower)?,
                None => lower,
            });
        }
        let mut scores = self
            .matmul_t(k, Transpose::Right)?
            .mul_scalar(factor as f32)?;
        if let Some(allowed) = allowed {
            let masked = self.upload_beside(&[MASKED_SCORE], &[])?;
            scores = allowed.where_(&scores, &masked)?;
        }
        scores.softmax()?.matmul(v)
    }
}

/// Whether `shape` broadcasts to `target` without growing it (NumPy's rules).
fn broadcasts_onto(shape: &[usize], target: &[usize]) -> bool {
    broadcast("broadcast", shape, target).is_ok_and(|joined| joined == target)
}

/// `x · x` as a product of two operands: on a tape each factor's gradient is added on its own, as the Python
/// package's norms always recorded them, so that their gradients are the same bits.
fn square(x: &Tensor) -> Result<Tensor> {
    x.mul(x)
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
