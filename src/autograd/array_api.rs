//! The Array API's reductions, statistics, scans, shape ops and triangles on the tape. Reductions over several
//! axes, scans, broadcasts, triangles and constant padding are ops of their own (their rules in rules.rs); the
//! rest are made of ops the tape already records (reshape, permute, narrow, concat, gather_rows and the
//! elementwise ops), so their gradients follow from those.

use crate::error::{Error, Result};
use crate::op::reduce::ReduceOp;
use crate::ops::manipulate::{
    moveaxis_order, pad_sources, padded_shape, repeat_counts, repeat_sources, split_bounds,
    tiled_shape, PadMode, Repeats, Split,
};
use crate::ops::reduce::{degrees_of_freedom_scale, lane_count, reciprocal_count, scan_axis};
use crate::shape::reduced_axes;

use super::rules::reduce_gradient_rule;
use super::tape::{Op, Tape, Var};

impl Tape {
    /// Records `op` over the `axes` (`None`: all), kept as 1s with `keepdims` (see [`Tensor::reduce_axes`]).
    /// Max and min are refused where a gradient would flow, as [`Tape::reduce`] refuses them.
    ///
    /// [`Tensor::reduce_axes`]: crate::Tensor::reduce_axes
    pub fn reduce_axes(
        &mut self,
        op: ReduceOp,
        x: Var,
        axes: Option<&[usize]>,
        keepdims: bool,
    ) -> Result<Var> {
        let wants = self.wants(&[x])?;
        if wants && reduce_gradient_rule(op).is_none() {
            return Err(Error::InvalidArgument {
                what: "reduction on the tape",
                given: op.name().to_string(),
                expected:
                    "a reduction with a gradient (sum, mean, prod); record it on tensors that need \
                           no gradient, or reduce the tensor outside the tape"
                        .to_string(),
            });
        }
        let input = self.value(x)?;
        let value = input.reduce_axes(op, axes, keepdims)?;
        let axes = reduced_axes(op.name(), input.shape(), axes)?;
        let op = Op::ReduceAxes {
            op,
            x: x.index,
            axes,
        };
        Ok(self.push(value, op, wants))
    }

    /// The variance over `axes` with `correction` (see [`Tensor::var`](crate::Tensor::var)), recorded as its
    /// corrected two passes: `Σd² − (Σd)²/N` over the deviations `d` from the mean. That is the variance
    /// whatever the shift, so the mean is a constant of the tape (no gradient flows through it), and the
    /// gradient is still `2 (x − mean) / (N − correction)`.
    pub fn var(
        &mut self,
        x: Var,
        axes: Option<&[usize]>,
        correction: f64,
        keepdims: bool,
    ) -> Result<Var> {
        let shape = self.value(x)?.shape().to_vec();
        let sorted = reduced_axes("var", &shape, axes)?;
        let count = lane_count(&shape, &sorted);
        let mean = self.value(x)?.reduce_axes(ReduceOp::Mean, axes, true)?;
        let mean = self.input(mean);
        let deviation = self.sub(x, mean)?;
        let squares = self.square(deviation)?;
        let squares = self.reduce_axes(ReduceOp::Sum, squares, axes, keepdims)?;
        let drift = self.reduce_axes(ReduceOp::Sum, deviation, axes, keepdims)?;
        let drift = self.square(drift)?;
        let drift = self.mul_scalar(drift, reciprocal_count(count))?;
        let corrected = self.sub(squares, drift)?;
        self.mul_scalar(corrected, degrees_of_freedom_scale(count, correction))
    }

    /// The standard deviation, the square root of [`Tape::var`].
    pub fn std(
        &mut self,
        x: Var,
        axes: Option<&[usize]>,
        correction: f64,
        keepdims: bool,
    ) -> Result<Var> {
        let var = self.var(x, axes, correction, keepdims)?;
        self.sqrt(var)
    }

    /// `log Σ exp(x)` over `axes` (see [`Tensor::logsumexp`](crate::Tensor::logsumexp)). The shift by the max
    /// is a constant of the tape: the result does not depend on it, so no gradient flows through it, and the
    /// gradient is the softmax over the axes.
    pub fn logsumexp(&mut self, x: Var, axes: Option<&[usize]>, keepdims: bool) -> Result<Var> {
        let (shift, out_shape) = self.value(x)?.logsumexp_shift(axes, keepdims)?;
        let shift_out = shift.reshape(&out_shape)?;
        let shift = self.input(shift);
        let shifted = self.sub(x, shift)?;
        let exp = self.exp(shifted)?;
        let sum = self.reduce_axes(ReduceOp::Sum, exp, axes, keepdims)?;
        let log = self.log(sum)?;
        let shift_out = self.input(shift_out);
        self.add(log, shift_out)
    }

    /// Running sums along `axis` (see [`Tensor::cumulative_sum`](crate::Tensor::cumulative_sum)).
    pub fn cumulative_sum(
        &mut self,
        x: Var,
        axis: Option<usize>,
        include_initial: bool,
    ) -> Result<Var> {
        self.scan(ReduceOp::Sum, x, axis, include_initial)
    }

    /// Running products along `axis` (see [`Tensor::cumulative_prod`](crate::Tensor::cumulative_prod)). The
    /// gradient divides by no element, so it is exact where a lane holds zeros.
    pub fn cumulative_prod(
        &mut self,
        x: Var,
        axis: Option<usize>,
        include_initial: bool,
    ) -> Result<Var> {
        self.scan(ReduceOp::Prod, x, axis, include_initial)
    }

    fn scan(&mut self, op: ReduceOp, x: Var, axis: Option<usize>, initial: bool) -> Result<Var> {
        let input = self.value(x)?;
        let value = match op {
            ReduceOp::Sum => input.cumulative_sum(axis, initial)?,
            _ => input.cumulative_prod(axis, initial)?,
        };
        let axis = scan_axis("cumulative", input.shape(), axis)?;
        let wants = self.wants(&[x])?;
        let op = Op::Scan {
            op,
            x: x.index,
            axis,
            initial,
        };
        Ok(self.push(value, op, wants))
    }

    /// `x` broadcast to `shape` (see [`Tensor::broadcast_to`](crate::Tensor::broadcast_to)); the gradient is
    /// summed back over the broadcast axes.
    pub fn broadcast_to(&mut self, x: Var, shape: &[usize]) -> Result<Var> {
        let value = self.value(x)?.broadcast_to(shape)?;
        let wants = self.wants(&[x])?;
        Ok(self.push(value, Op::BroadcastTo { x: x.index }, wants))
    }

    /// The variables broadcast to their common shape.
    pub fn broadcast_arrays(&mut self, xs: &[Var]) -> Result<Vec<Var>> {
        let values = xs
            .iter()
            .map(|&x| self.value(x))
            .collect::<Result<Vec<_>>>()?;
        let shape = crate::ops::manipulate::broadcast_all("broadcast_arrays", &values)?;
        xs.iter().map(|&x| self.broadcast_to(x, &shape)).collect()
    }

    /// An axis of length 1 inserted at `axis` (from 0 to the rank).
    pub fn expand_dims(&mut self, x: Var, axis: usize) -> Result<Var> {
        let value = self.value(x)?;
        // Checked as the tensor's method checks it.
        let shape = value.expand_dims_shape(axis)?;
        self.reshape(x, &shape)
    }

    /// The `axes`, each of length 1, removed.
    pub fn squeeze(&mut self, x: Var, axes: &[usize]) -> Result<Var> {
        let shape = self.value(x)?.squeezed_shape(axes)?;
        self.reshape(x, &shape)
    }

    /// The elements in one axis.
    pub fn flatten(&mut self, x: Var) -> Result<Var> {
        let len = self.value(x)?.len();
        self.reshape(x, &[len])
    }

    /// The Array API's name for [`Tape::permute`].
    pub fn permute_dims(&mut self, x: Var, axes: &[usize]) -> Result<Var> {
        self.permute(x, axes)
    }

    /// Axes `first` and `second` swapped.
    pub fn swapaxes(&mut self, x: Var, first: usize, second: usize) -> Result<Var> {
        self.transpose(x, first, second)
    }

    /// Axes `source` moved to `destination` (`numpy.moveaxis`).
    pub fn moveaxis(&mut self, x: Var, source: &[usize], destination: &[usize]) -> Result<Var> {
        let rank = self.value(x)?.shape().len();
        let order = moveaxis_order("moveaxis", rank, source, destination)?;
        self.permute(x, &order)
    }

    /// The parts, all of one shape, joined along a new axis at `axis`.
    pub fn stack(&mut self, parts: &[Var], axis: usize) -> Result<Var> {
        let values = parts
            .iter()
            .map(|&part| self.value(part))
            .collect::<Result<Vec<_>>>()?;
        // Checked whole first, so that an error names the stack, not one of its steps.
        let shape = crate::tensor::Tensor::stack_shape(&values, axis)?;
        let mut part_shape = shape;
        part_shape[axis] = 1;
        let expanded = parts
            .iter()
            .map(|&part| self.reshape(part, &part_shape))
            .collect::<Result<Vec<_>>>()?;
        self.concat(&expanded, axis)
    }

    /// The slices along `axis`, each without it.
    pub fn unstack(&mut self, x: Var, axis: usize) -> Result<Vec<Var>> {
        let shape = self.value(x)?.shape().to_vec();
        expect_axis("unstack", &shape, axis)?;
        let mut part_shape = shape.clone();
        part_shape.remove(axis);
        (0..shape[axis])
            .map(|index| {
                let slice = self.narrow(x, axis, index, 1)?;
                self.reshape(slice, &part_shape)
            })
            .collect()
    }

    /// The parts of `axis` cut as `how` says; sections must divide the axis (NumPy's `split`).
    pub fn split(&mut self, x: Var, how: &Split, axis: usize) -> Result<Vec<Var>> {
        self.split_parts("split", x, how, axis, true)
    }

    /// The parts of `axis` cut as `how` says, sections allowed not to divide it (NumPy's `array_split`).
    pub fn array_split(&mut self, x: Var, how: &Split, axis: usize) -> Result<Vec<Var>> {
        self.split_parts("array_split", x, how, axis, false)
    }

    fn split_parts(
        &mut self,
        name: &'static str,
        x: Var,
        how: &Split,
        axis: usize,
        strict: bool,
    ) -> Result<Vec<Var>> {
        let shape = self.value(x)?.shape().to_vec();
        expect_axis(name, &shape, axis)?;
        split_bounds(name, shape[axis], how, strict)?
            .into_iter()
            .map(|(start, len)| self.narrow(x, axis, start, len))
            .collect()
    }

    /// The parts' elements joined in one axis, each flattened (`concat` with `axis=None`).
    pub fn concat_flat(&mut self, parts: &[Var]) -> Result<Var> {
        let flat = parts
            .iter()
            .map(|&part| self.flatten(part))
            .collect::<Result<Vec<_>>>()?;
        self.concat(&flat, 0)
    }

    /// `x` repeated `reps[i]` times along axis i (`numpy.tile`), each tiled axis a broadcast whose gradient
    /// sums the copies.
    pub fn tile(&mut self, x: Var, reps: &[usize]) -> Result<Var> {
        let (mut shape, reps) = tiled_shape(self.value(x)?.shape(), reps);
        let out_shape: Vec<usize> = shape.iter().zip(&reps).map(|(a, b)| a * b).collect();
        crate::shape::element_count("tile", &out_shape)?;
        let mut current = x;
        for axis in 0..shape.len() {
            if reps[axis] == 1 {
                continue;
            }
            let outer: usize = shape[..axis].iter().product();
            let block: usize = shape[axis..].iter().product();
            let lifted = self.reshape(current, &[outer, 1, block])?;
            let copies = self.broadcast_to(lifted, &[outer, reps[axis], block])?;
            shape[axis] *= reps[axis];
            current = self.reshape(copies, &shape)?;
        }
        self.reshape(current, &out_shape)
    }

    /// Each element repeated along `axis` (`None`: of the flattened tensor) as `repeats` says
    /// (`numpy.repeat`): one count for all as a broadcast, counts per element as a row gather.
    pub fn repeat(&mut self, x: Var, repeats: &Repeats, axis: Option<usize>) -> Result<Var> {
        const NAME: &str = "repeat";
        let full_shape = self.value(x)?.shape().to_vec();
        let (shape, axis) = match axis {
            Some(axis) => {
                expect_axis(NAME, &full_shape, axis)?;
                (full_shape, axis)
            }
            None => (vec![full_shape.iter().product()], 0),
        };
        let counts = repeat_counts(NAME, shape[axis], repeats)?;
        let mut out_shape = shape.clone();
        out_shape[axis] = counts.iter().sum();
        crate::shape::element_count(NAME, &out_shape)?;
        let uniform = counts
            .first()
            .copied()
            .filter(|&first| counts.iter().all(|&count| count == first));
        if let Some(count) = uniform {
            let outer: usize = shape[..axis].iter().product();
            let inner: usize = shape[axis + 1..].iter().product();
            let len = shape[axis];
            let lifted = self.reshape(x, &[outer, len, 1, inner])?;
            let copies = self.broadcast_to(lifted, &[outer, len, count, inner])?;
            return self.reshape(copies, &out_shape);
        }
        let picked = self.gather_along(x, &shape, axis, &repeat_sources(&counts))?;
        self.reshape(picked, &out_shape)
    }

    /// `x` padded by `widths` along each axis as `mode` says (`numpy.pad`): a constant border is an op of its
    /// own (its gradient the interior), edge and reflect borders row gathers along each padded axis.
    pub fn pad(&mut self, x: Var, widths: &[(usize, usize)], mode: PadMode) -> Result<Var> {
        const NAME: &str = "pad";
        let input_shape = self.value(x)?.shape().to_vec();
        let out_shape = padded_shape(NAME, &input_shape, widths, mode)?;
        if let PadMode::Constant(_) = mode {
            let value = self.value(x)?.pad(widths, mode)?;
            let wants = self.wants(&[x])?;
            let op = Op::PadConstant {
                x: x.index,
                widths: widths.to_vec(),
            };
            return Ok(self.push(value, op, wants));
        }
        let mut current = x;
        let mut shape = input_shape;
        for (axis, &width) in widths.iter().enumerate() {
            if width == (0, 0) {
                continue;
            }
            let sources = pad_sources(shape[axis], width, mode);
            let picked = self.gather_along(current, &shape, axis, &sources)?;
            shape[axis] = sources.len();
            current = self.reshape(picked, &shape)?;
        }
        self.reshape(current, &out_shape)
    }

    /// The entries at `sources` along `axis` of `x` seen as `shape`, as rows [sources, inner] or a tensor
    /// [outer, sources, inner]: the axis moved first where it is not, a row gather, and moved back.
    fn gather_along(
        &mut self,
        x: Var,
        shape: &[usize],
        axis: usize,
        sources: &[u32],
    ) -> Result<Var> {
        let outer: usize = shape[..axis].iter().product();
        let len = shape[axis];
        let inner: usize = shape[axis + 1..].iter().product();
        let indices = self.value(x)?.upload_u32_beside(sources)?;
        let indices = self.input(indices);
        if outer == 1 {
            let rows = self.reshape(x, &[len, inner])?;
            return self.gather_rows(rows, indices);
        }
        let lanes = self.reshape(x, &[outer, len, inner])?;
        let moved = self.permute(lanes, &[1, 0, 2])?;
        let picked = self.gather_rows(moved, indices)?;
        self.permute(picked, &[1, 0, 2])
    }

    /// The lower triangle of each matrix from diagonal `k` (see [`Tensor::tril`](crate::Tensor::tril)).
    pub fn tril(&mut self, x: Var, k: i64) -> Result<Var> {
        self.triangle(x, k, true)
    }

    /// The upper triangle of each matrix from diagonal `k` (see [`Tensor::triu`](crate::Tensor::triu)).
    pub fn triu(&mut self, x: Var, k: i64) -> Result<Var> {
        self.triangle(x, k, false)
    }

    fn triangle(&mut self, x: Var, k: i64, lower: bool) -> Result<Var> {
        let input = self.value(x)?;
        let value = if lower {
            input.tril(k)?
        } else {
            input.triu(k)?
        };
        let wants = self.wants(&[x])?;
        Ok(self.push(
            value,
            Op::Triangle {
                x: x.index,
                k,
                lower,
            },
            wants,
        ))
    }
}

fn expect_axis(op: &'static str, shape: &[usize], axis: usize) -> Result<()> {
    if axis < shape.len() {
        Ok(())
    } else {
        Err(Error::Shape {
            op,
            message: format!(
                "axis {axis} is out of range for shape {shape:?}, which has {} axes",
                shape.len()
            ),
        })
    }
}
