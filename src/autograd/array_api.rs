//! The Array API's reductions, statistics, scans, shape ops and triangles on the tape: each the `Tensor` op
//! of its name run on the variables' values, which records itself (or the ops it is made of), so that its
//! gradient follows from theirs.

use crate::error::Result;
use crate::op::reduce::ReduceOp;
use crate::ops::manipulate::{PadMode, Repeats, Split};
use crate::tensor::{Tape, Tensor, Var};

impl Tape {
    /// Records `op` over the `axes` (`None`: all), kept as 1s with `keepdims` (see [`Tensor::reduce_axes`]).
    /// Max and min are refused where a gradient would flow, as [`Tape::reduce`] refuses them.
    pub fn reduce_axes(
        &mut self,
        op: ReduceOp,
        x: Var,
        axes: Option<&[usize]>,
        keepdims: bool,
    ) -> Result<Var> {
        self.record_one(&[x], |v| v[0].reduce_axes(op, axes, keepdims))
    }

    /// The variance over `axes` with `correction` (see [`Tensor::var`]).
    pub fn var(
        &mut self,
        x: Var,
        axes: Option<&[usize]>,
        correction: f64,
        keepdims: bool,
    ) -> Result<Var> {
        self.record_one(&[x], |v| v[0].var(axes, correction, keepdims))
    }

    /// The standard deviation, the square root of [`Tape::var`].
    pub fn std(
        &mut self,
        x: Var,
        axes: Option<&[usize]>,
        correction: f64,
        keepdims: bool,
    ) -> Result<Var> {
        self.record_one(&[x], |v| v[0].std(axes, correction, keepdims))
    }

    /// `log Σ exp(x)` over `axes` (see [`Tensor::logsumexp`]); its gradient is the softmax over the axes.
    pub fn logsumexp(&mut self, x: Var, axes: Option<&[usize]>, keepdims: bool) -> Result<Var> {
        self.record_one(&[x], |v| v[0].logsumexp(axes, keepdims))
    }

    /// Running sums along `axis` (see [`Tensor::cumulative_sum`]).
    pub fn cumulative_sum(
        &mut self,
        x: Var,
        axis: Option<usize>,
        include_initial: bool,
    ) -> Result<Var> {
        self.record_one(&[x], |v| v[0].cumulative_sum(axis, include_initial))
    }

    /// Running products along `axis` (see [`Tensor::cumulative_prod`]). The gradient divides by no element,
    /// so it is exact where a lane holds zeros.
    pub fn cumulative_prod(
        &mut self,
        x: Var,
        axis: Option<usize>,
        include_initial: bool,
    ) -> Result<Var> {
        self.record_one(&[x], |v| v[0].cumulative_prod(axis, include_initial))
    }

    /// `x` broadcast to `shape` (see [`Tensor::broadcast_to`]); the gradient is summed back over the
    /// broadcast axes.
    pub fn broadcast_to(&mut self, x: Var, shape: &[usize]) -> Result<Var> {
        self.record_one(&[x], |v| v[0].broadcast_to(shape))
    }

    /// The variables broadcast to their common shape.
    pub fn broadcast_arrays(&mut self, xs: &[Var]) -> Result<Vec<Var>> {
        self.record_composite(xs, |v| {
            Tensor::broadcast_arrays(&v.iter().collect::<Vec<_>>())
        })
    }

    /// An axis of length 1 inserted at `axis` (from 0 to the rank).
    pub fn expand_dims(&mut self, x: Var, axis: usize) -> Result<Var> {
        self.record_one(&[x], |v| v[0].expand_dims(axis))
    }

    /// The `axes`, each of length 1, removed.
    pub fn squeeze(&mut self, x: Var, axes: &[usize]) -> Result<Var> {
        self.record_one(&[x], |v| v[0].squeeze(axes))
    }

    /// The elements in one axis.
    pub fn flatten(&mut self, x: Var) -> Result<Var> {
        self.record_one(&[x], |v| v[0].flatten())
    }

    /// The Array API's name for [`Tape::permute`].
    pub fn permute_dims(&mut self, x: Var, axes: &[usize]) -> Result<Var> {
        self.record_one(&[x], |v| v[0].permute_dims(axes))
    }

    /// Axes `first` and `second` swapped.
    pub fn swapaxes(&mut self, x: Var, first: usize, second: usize) -> Result<Var> {
        self.record_one(&[x], |v| v[0].swapaxes(first, second))
    }

    /// Axes `source` moved to `destination` (`numpy.moveaxis`).
    pub fn moveaxis(&mut self, x: Var, source: &[usize], destination: &[usize]) -> Result<Var> {
        self.record_one(&[x], |v| v[0].moveaxis(source, destination))
    }

    /// The parts, all of one shape, joined along a new axis at `axis`.
    pub fn stack(&mut self, parts: &[Var], axis: usize) -> Result<Var> {
        self.record_one(parts, |v| {
            Tensor::stack(&v.iter().collect::<Vec<_>>(), axis)
        })
    }

    /// The slices along `axis`, each without it.
    pub fn unstack(&mut self, x: Var, axis: usize) -> Result<Vec<Var>> {
        self.record_composite(&[x], |v| v[0].unstack(axis))
    }

    /// The parts of `axis` cut as `how` says; sections must divide the axis (NumPy's `split`).
    pub fn split(&mut self, x: Var, how: &Split, axis: usize) -> Result<Vec<Var>> {
        self.record_composite(&[x], |v| v[0].split(how, axis))
    }

    /// The parts of `axis` cut as `how` says, sections allowed not to divide it (NumPy's `array_split`).
    pub fn array_split(&mut self, x: Var, how: &Split, axis: usize) -> Result<Vec<Var>> {
        self.record_composite(&[x], |v| v[0].array_split(how, axis))
    }

    /// The parts' elements joined in one axis, each flattened (`concat` with `axis=None`).
    pub fn concat_flat(&mut self, parts: &[Var]) -> Result<Var> {
        self.record_one(parts, |v| {
            Tensor::concat_flat(&v.iter().collect::<Vec<_>>())
        })
    }

    /// `x` repeated `reps[i]` times along axis i (`numpy.tile`), each tiled axis a broadcast whose gradient
    /// sums the copies.
    pub fn tile(&mut self, x: Var, reps: &[usize]) -> Result<Var> {
        self.record_one(&[x], |v| v[0].tile(reps))
    }

    /// Each element repeated along `axis` (`None`: of the flattened tensor) as `repeats` says
    /// (`numpy.repeat`): one count for all as a broadcast, counts per element as a row gather.
    pub fn repeat(&mut self, x: Var, repeats: &Repeats, axis: Option<usize>) -> Result<Var> {
        self.record_one(&[x], |v| v[0].repeat(repeats, axis))
    }

    /// `x` padded by `widths` along each axis as `mode` says (`numpy.pad`): a constant border is an op of its
    /// own (its gradient the interior), edge and reflect borders row gathers along each padded axis.
    pub fn pad(&mut self, x: Var, widths: &[(usize, usize)], mode: PadMode) -> Result<Var> {
        self.record_one(&[x], |v| v[0].pad(widths, mode))
    }

    /// The lower triangle of each matrix from diagonal `k` (see [`Tensor::tril`]).
    pub fn tril(&mut self, x: Var, k: i64) -> Result<Var> {
        self.record_one(&[x], |v| v[0].tril(k))
    }

    /// The upper triangle of each matrix from diagonal `k` (see [`Tensor::triu`]).
    pub fn triu(&mut self, x: Var, k: i64) -> Result<Var> {
        self.record_one(&[x], |v| v[0].triu(k))
    }
}
