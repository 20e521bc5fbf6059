//! Reductions: the value reductions of the op table (sum, mean, max, min, prod), argmax and argmin, over all
//! elements or along any axis; and prod's gradient, for the tape.
//!
//! Edge cases follow NumPy: a NaN makes every value reduction NaN and is where argmax and argmin point (the
//! first one); max of a row of −inf is −inf; over an empty axis each row's `empty` answers (sum 0, prod 1,
//! mean NaN), while max, min, argmax and argmin of nothing are errors.
//!
//! int32 and uint32 tensors reduce exactly, on their words (the table's word columns): sum and prod wrap as
//! NumPy's fixed-width integers do and keep the dtype; a bool tensor's sum and prod give int32 (the default
//! integer dtype; NumPy's int64 is no dtype here); max, min, argmax and argmin take numbers, not bools; mean takes
//! floats only, as the Array API standard defines it. The running sums and products follow the same rules.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::reduce::{self, ZeroSplit};
use crate::op::reduce::{for_each_reduce_op, ReduceOp, Reduction};
use crate::shape::{self, element_count, lanes, reduction_name, Lanes};
use crate::tensor::{Op, Tensor};

/// The dtype of `reduction`'s result over `input`, or the error naming the dtypes it takes: the one home of
/// which reductions take which dtypes ([`ReduceOp::output`] for the value ones; argmax and argmin take every
/// numeric dtype and give u32 indices).
fn reduced_dtype(input: &Tensor, name: &'static str, reduction: Reduction) -> Result<DType> {
    let dtype = input.dtype();
    let output = match reduction {
        Reduction::Value(op) => op.output(dtype),
        Reduction::Argmax | Reduction::Argmin => (dtype != DType::Bool).then_some(DType::U32),
    };
    output.ok_or(Error::DTypes {
        op: name,
        expected: match reduction {
            Reduction::Value(op) if op.row().word_combine.is_empty() => {
                "floating-point (float32) tensors only: the Array API standard defines it for floating-point \
                 dtypes; convert an integer one with astype(float32) first. It takes float32"
            }
            Reduction::Value(op) if !op.row().word_order => "float32, int32, uint32 or bool",
            _ => "float32, int32 or uint32",
        },
        found: dtype,
    })
}

fn reduce(input: &Tensor, axis: Option<usize>, reduction: Reduction) -> Result<Tensor> {
    let name = reduction_name(reduction);
    reduced_dtype(input, name, reduction)?;
    let (view, out_shape) = shape::reduction(reduction, input.shape(), axis)?;
    reduce_lanes(input, name, reduction, view, &out_shape)
}

/// Reduces `input` seen as `view` along its middle axis into a new tensor of `out_shape` (checked already).
fn reduce_lanes(
    input: &Tensor,
    name: &'static str,
    reduction: Reduction,
    view: Lanes,
    out_shape: &[usize],
) -> Result<Tensor> {
    let row = match reduction {
        Reduction::Value(op) => Some(op.row()),
        Reduction::Argmax | Reduction::Argmin => None,
    };
    let empty = row.and_then(|row| row.empty);
    let dtype = reduced_dtype(input, name, reduction)?;
    let out = input.output(name, out_shape, dtype)?;
    if input.dtype() != DType::F32 {
        // Integer and bool words, exactly (an empty axis gives the row's word identity).
        if out.is_empty() {
            return Ok(out);
        }
        let (source, target) = (input.range()?, out.range()?);
        let signed = input.dtype() == DType::I32;
        input.with_runtime(|runtime| {
            reduce::reduce_words(runtime, name, reduction, signed, source, view, target)
        })?;
        return Ok(out);
    }
    if let (0, Some(value)) = (view.len, empty) {
        out.fill_(value)?;
        return Ok(out);
    }
    if out.is_empty() {
        return Ok(out);
    }
    let scale = match row {
        Some(row) if row.divide_by_count => reciprocal_count(view.len as usize),
        _ => 1.0,
    };
    let (source, target) = (input.range()?, out.range()?);
    input.with_runtime(|runtime| {
        reduce::reduce(runtime, name, reduction, source, view, scale, target)
    })?;
    Ok(out)
}

/// `input` with the sorted `axes` side by side, and the lanes that hold them as one middle axis: the input
/// itself where they already are, else a copy with them moved last (one pass).
fn lanes_over_axes(input: &Tensor, axes: &[usize]) -> Result<(Option<Tensor>, Lanes)> {
    let shape = input.shape();
    let count = |dims: &[usize]| dims.iter().product::<usize>() as u64;
    let Some((&first, _)) = axes.split_first() else {
        // No axis: each element is a lane of its own.
        return Ok((
            None,
            Lanes {
                outer: count(shape),
                len: 1,
                inner: 1,
            },
        ));
    };
    let last = axes[axes.len() - 1];
    if last - first + 1 == axes.len() {
        return Ok((
            None,
            Lanes {
                outer: count(&shape[..first]),
                len: count(&shape[first..=last]),
                inner: count(&shape[last + 1..]),
            },
        ));
    }
    let order: Vec<usize> = (0..shape.len())
        .filter(|axis| !axes.contains(axis))
        .chain(axes.iter().copied())
        .collect();
    let moved = input.permute(&order)?;
    let len = lane_count(shape, axes);
    let lanes = Lanes {
        outer: (input.len() / len.max(1)) as u64,
        len: len as u64,
        inner: 1,
    };
    Ok((Some(moved), lanes))
}

fn reduce_over_axes(
    input: &Tensor,
    axes: Option<&[usize]>,
    keepdims: bool,
    reduction: Reduction,
) -> Result<Tensor> {
    let name = reduction_name(reduction);
    reduced_dtype(input, name, reduction)?;
    let (axes, out_shape) = shape::reduction_over_axes(reduction, input.shape(), axes, keepdims)?;
    let (moved, view) = lanes_over_axes(input, &axes)?;
    reduce_lanes(
        moved.as_ref().unwrap_or(input),
        name,
        reduction,
        view,
        &out_shape,
    )
}

/// The element count of the lanes `axes` (`None`: all) of `shape` span, as a reduction over them divides by.
pub(crate) fn lane_count(shape: &[usize], axes: &[usize]) -> usize {
    axes.iter().map(|&axis| shape[axis]).product()
}

/// Reductions. `axis: None` reduces over all elements into a 0-d tensor; `Some(axis)` removes that axis. The
/// result's shape is [`reduce_shape`](crate::shape::reduce_shape)'s (or [`argmax_shape`](crate::shape::argmax_shape)'s,
/// [`argmin_shape`](crate::shape::argmin_shape)'s), checked the same way.
impl Tensor {
    /// Any row of the value-reduction table, by value (see [`ReduceOp`]).
    pub fn reduce(&self, op: ReduceOp, axis: Option<usize>) -> Result<Tensor> {
        let value = reduce(self, axis, Reduction::Value(op))?;
        Tensor::record(&[self], value, |nodes| Op::Reduce {
            op,
            x: nodes[0],
            axis,
        })
    }

    /// Index of the largest element (the first on ties, the first NaN if any), as a u32 tensor.
    pub fn argmax(&self, axis: Option<usize>) -> Result<Tensor> {
        reduce(self, axis, Reduction::Argmax)
    }

    /// Index of the smallest element (the first on ties, the first NaN if any), as a u32 tensor.
    pub fn argmin(&self, axis: Option<usize>) -> Result<Tensor> {
        reduce(self, axis, Reduction::Argmin)
    }

    /// Writes the sum of all elements (at least one) into element `slot` of `record` (f32), with the bits
    /// `self.sum(None)` has: a per-step total kept in one record, with no output and copy per step.
    pub(crate) fn sum_into_slot(&self, record: &Tensor, slot: usize) -> Result<()> {
        const NAME: &str = "sum into a record";
        self.expect_same_session(NAME, record)?;
        self.expect_dtype(NAME, DType::F32)?;
        record.expect_dtype(NAME, DType::F32)?;
        expect_slot(NAME, self, record, slot)?;
        let (source, target, elements) = (self.range()?, record.range()?, self.len() as u64);
        self.with_runtime(|runtime| {
            reduce::sum_into_slot(runtime, NAME, source, elements, (target, slot as u64))
        })
    }

    /// The sum of all elements (at least one) strictly left to right, as a 0-d tensor: the bits of a running
    /// total that starts from the first element and adds one element at a time, in one pass.
    pub(crate) fn sum_in_order(&self) -> Result<Tensor> {
        const NAME: &str = "sum in order";
        self.expect_dtype(NAME, DType::F32)?;
        let out = self.output(NAME, &[], DType::F32)?;
        expect_slot(NAME, self, &out, 0)?;
        let (source, target, elements) = (self.range()?, out.range()?, self.len() as u64);
        self.with_runtime(|runtime| {
            reduce::sum_in_order(runtime, NAME, source, elements, (target, 0))
        })?;
        Ok(out)
    }

    /// The gradient of `prod(self, axis)` weighted by `upstream` (of the reduced shape): each element's
    /// product of the others in its lane, times its lane's upstream value. Exact where lanes hold zeros, which
    /// `upstream · prod / self` is not.
    pub(crate) fn prod_backward(&self, axis: Option<usize>, upstream: &Tensor) -> Result<Tensor> {
        const NAME: &str = "prod backward";
        self.expect_dtype(NAME, DType::F32)?;
        upstream.expect_dtype(NAME, DType::F32)?;
        self.expect_same_session(NAME, upstream)?;
        let (view, out_shape) = lanes(NAME, self.shape(), axis)?;
        let out = self.output(NAME, self.shape(), DType::F32)?;
        if out.is_empty() {
            return Ok(out);
        }
        let split = |how: ZeroSplit| -> Result<Tensor> {
            let split = self.output(NAME, self.shape(), DType::F32)?;
            let (source, target) = (self.range()?, split.range()?);
            let elements = self.len() as u64;
            self.with_runtime(|runtime| {
                reduce::zero_split(runtime, how, source, target, elements)
            })?;
            Ok(split)
        };
        let non_zero_product = split(ZeroSplit::ZerosToOnes)?.prod(axis)?;
        let zero_count = split(ZeroSplit::Indicator)?.sum(axis)?;
        let lane_scale = upstream.view_as(&out_shape)?.mul(&non_zero_product)?;
        let (source, scale, zeros, target) = (
            self.range()?,
            lane_scale.range()?,
            zero_count.range()?,
            out.range()?,
        );
        self.with_runtime(|runtime| {
            reduce::prod_backward(runtime, NAME, source, view, (scale, zeros), target)
        })?;
        Ok(out)
    }
}

/// Reductions over several axes at once, with NumPy's and the Array API's `keepdims`, and the statistics
/// built on them. `axes: None` reduces every axis; axes are checked (in range, none twice) as
/// [`reduce_axes_shape`](crate::shape::reduce_axes_shape) checks them.
impl Tensor {
    /// `op` over the `axes` (`None`: all), each kept as a 1 with `keepdims`: axes next to one another reduce in
    /// place, others after one copy that moves them last.
    ///
    /// ```
    /// use wgcompute::{ReduceOp, Session, SessionOptions};
    /// # fn main() -> wgcompute::Result<()> {
    /// let session = Session::open(SessionOptions::default())?;
    /// let x = session.upload(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], &[2, 2, 2])?;
    /// let sums = x.reduce_axes(ReduceOp::Sum, Some(&[0, 2]), true)?;
    /// assert_eq!((sums.shape(), sums.to_vec()?), (&[1, 2, 1][..], vec![14.0, 22.0]));
    /// # Ok(()) }
    /// ```
    pub fn reduce_axes(
        &self,
        op: ReduceOp,
        axes: Option<&[usize]>,
        keepdims: bool,
    ) -> Result<Tensor> {
        let value = reduce_over_axes(self, axes, keepdims, Reduction::Value(op))?;
        if !self.is_traced() {
            return Ok(value);
        }
        let axes = shape::reduced_axes(op.name(), self.shape(), axes)?;
        Tensor::record(&[self], value, |nodes| Op::ReduceAxes {
            op,
            x: nodes[0],
            axes,
        })
    }

    /// [`Tensor::argmax`] with the reduced axis kept as a 1 (every axis, for `None`: a flat index, of shape
    /// `[1, …, 1]`).
    pub fn argmax_keepdims(&self, axis: Option<usize>) -> Result<Tensor> {
        let kept = arg_kept_shape(self.shape(), axis);
        self.argmax(axis)?.into_shape(&kept)
    }

    /// [`Tensor::argmin`] with the reduced axis kept as a 1, as [`Tensor::argmax_keepdims`].
    pub fn argmin_keepdims(&self, axis: Option<usize>) -> Result<Tensor> {
        let kept = arg_kept_shape(self.shape(), axis);
        self.argmin(axis)?.into_shape(&kept)
    }

    /// The variance over `axes` (`None`: all) with `correction` degrees of freedom taken off the count
    /// (the Array API's `var`; NumPy's `ddof`): `Σ (x − mean)² / (N − correction)`, NaN where
    /// `N − correction ≤ 0`. Two passes (the mean, then the deviations from it), so a large mean costs no
    /// accuracy, as the one-pass `E[x²] − E[x]²` would; and the deviations' own sum is taken off
    /// (`Σd² − (Σd)²/N`, the corrected two-pass form), because a float32 mean near 1e6 is itself off by up
    /// to half its ulp (0.03), which would add its square to a variance of 0.3.
    pub fn var(&self, axes: Option<&[usize]>, correction: f64, keepdims: bool) -> Result<Tensor> {
        const NAME: &str = "var";
        self.expect_dtype(NAME, DType::F32)?;
        let (sorted, _) = shape::reduction_over_axes(
            Reduction::Value(ReduceOp::Sum),
            self.shape(),
            axes,
            keepdims,
        )?;
        let count = lane_count(self.shape(), &sorted);
        // The mean is a constant of a tape that traces this tensor: the variance does not depend on the shift,
        // so the gradient, `2 (x − mean) / (N − correction)`, needs none through it.
        let deviation = self.sub(&self.share().reduce_axes(ReduceOp::Mean, axes, true)?)?;
        let squares = deviation
            .square()?
            .reduce_axes(ReduceOp::Sum, axes, keepdims)?;
        let drift = deviation
            .reduce_axes(ReduceOp::Sum, axes, keepdims)?
            .square()?
            .mul_scalar(reciprocal_count(count))?;
        squares
            .sub(&drift)?
            .mul_scalar(degrees_of_freedom_scale(count, correction))
    }

    /// The standard deviation: the square root of [`Tensor::var`].
    pub fn std(&self, axes: Option<&[usize]>, correction: f64, keepdims: bool) -> Result<Tensor> {
        self.var(axes, correction, keepdims)?.sqrt()
    }

    /// `log Σ exp(x)` over `axes` (`None`: all), computed as `m + log Σ exp(x − m)` with `m` the lane's max,
    /// so no exp overflows; a lane of −inf gives −inf, one holding +inf gives +inf, NaN gives NaN. Errors over
    /// an empty lane, as max does.
    pub fn logsumexp(&self, axes: Option<&[usize]>, keepdims: bool) -> Result<Tensor> {
        // The shift is a constant of a tape that traces this tensor: the result does not depend on it, and the
        // gradient is the softmax over the axes.
        let (shift, out_shape) = self.share().logsumexp_shift(axes, keepdims)?;
        let sum = self
            .sub(&shift)?
            .exp()?
            .reduce_axes(ReduceOp::Sum, axes, keepdims)?;
        sum.log()?.add(&shift.into_shape(&out_shape)?)
    }

    /// The shift of a log-sum-exp over `axes` (each lane's max, or 0 where that is not finite), with the
    /// reduced axes kept as 1s, and the shape of the log-sum-exp.
    pub(crate) fn logsumexp_shift(
        &self,
        axes: Option<&[usize]>,
        keepdims: bool,
    ) -> Result<(Tensor, Vec<usize>)> {
        const NAME: &str = "logsumexp";
        self.expect_dtype(NAME, DType::F32)?;
        // Shaped as a sum's: lanes of no element are allowed, their log-sum-exp being -inf.
        let (_, out_shape) = shape::reduction_over_axes(
            Reduction::Value(ReduceOp::Sum),
            self.shape(),
            axes,
            keepdims,
        )?;
        if self.is_empty() {
            // Lanes of no element: the sum of their exps is 0 and the log-sum-exp -inf, as NumPy's and SciPy's;
            // a shift of 0 gives that, where the max of nothing is undefined.
            let (_, kept) = shape::reduction_over_axes(
                Reduction::Value(ReduceOp::Sum),
                self.shape(),
                axes,
                true,
            )?;
            let shift = self.output(NAME, &kept, DType::F32)?;
            shift.fill_(0.0)?;
            return Ok((shift, out_shape));
        }
        let max = self.reduce_axes(ReduceOp::Max, axes, true)?;
        let shift = max.output(NAME, max.shape(), DType::F32)?;
        let (source, target, elements) = (max.range()?, shift.range()?, max.len() as u64);
        self.with_runtime(|runtime| {
            reduce::zero_split(runtime, ZeroSplit::InfiniteToZero, source, target, elements)
        })?;
        Ok((shift, out_shape))
    }

    /// The running sums along `axis` (the Array API's `cumulative_sum`): element i is the sum of elements
    /// 0..=i, added one at a time with a compensation (so a long axis's error stays near one rounding); with
    /// `include_initial` the axis is one longer and starts with 0. `axis` may be `None` for a 1-D tensor only.
    pub fn cumulative_sum(&self, axis: Option<usize>, include_initial: bool) -> Result<Tensor> {
        let value = self.scan(
            "cumulative_sum",
            ReduceOp::Sum,
            axis,
            (false, include_initial),
        )?;
        self.record_scan(value, ReduceOp::Sum, axis, include_initial)
    }

    /// Records running sums or products of this tensor where it is traced.
    fn record_scan(
        &self,
        value: Tensor,
        op: ReduceOp,
        axis: Option<usize>,
        initial: bool,
    ) -> Result<Tensor> {
        if !self.is_traced() {
            return Ok(value);
        }
        let axis = scan_axis("cumulative", self.shape(), axis)?;
        Tensor::record(&[self], value, |nodes| Op::Scan {
            op,
            x: nodes[0],
            axis,
            initial,
        })
    }

    /// The running products along `axis` (the Array API's `cumulative_prod`), as [`Tensor::cumulative_sum`]
    /// (1 first with `include_initial`), multiplied one at a time.
    pub fn cumulative_prod(&self, axis: Option<usize>, include_initial: bool) -> Result<Tensor> {
        let value = self.scan(
            "cumulative_prod",
            ReduceOp::Prod,
            axis,
            (false, include_initial),
        )?;
        self.record_scan(value, ReduceOp::Prod, axis, include_initial)
    }

    /// A scan of `op` along `axis`, forwards or in `reverse`, with or without the identity first.
    /// The gradient of `cumulative_prod(self, axis)` (no identity) weighted by `upstream`, of this tensor's
    /// shape: exact where a lane holds zeros.
    pub(crate) fn cumulative_prod_backward(
        &self,
        axis: usize,
        upstream: &Tensor,
    ) -> Result<Tensor> {
        const NAME: &str = "cumulative_prod backward";
        self.expect_dtype(NAME, DType::F32)?;
        upstream.expect_dtype(NAME, DType::F32)?;
        self.expect_same_session(NAME, upstream)?;
        if upstream.shape() != self.shape() {
            return Err(Error::Shape {
                op: NAME,
                message: format!(
                    "the upstream gradient has shape {:?}, the input {:?}",
                    upstream.shape(),
                    self.shape()
                ),
            });
        }
        let (view, _) = lanes(NAME, self.shape(), Some(axis))?;
        let gradient = upstream.copy_words_as(DType::F32)?;
        if gradient.is_empty() {
            return Ok(gradient);
        }
        let (source, target) = (self.range()?, gradient.range()?);
        self.with_runtime(|runtime| {
            reduce::scan_product_gradient(runtime, NAME, source, view, target)
        })?;
        Ok(gradient)
    }

    pub(crate) fn scan(
        &self,
        name: &'static str,
        op: ReduceOp,
        axis: Option<usize>,
        (reverse, initial): (bool, bool),
    ) -> Result<Tensor> {
        let dtype = op.output(self.dtype()).ok_or(Error::DTypes {
            op: name,
            expected: "float32, int32, uint32 or bool",
            found: self.dtype(),
        })?;
        let axis = scan_axis(name, self.shape(), axis)?;
        let (view, _) = lanes(name, self.shape(), Some(axis))?;
        let mut out_shape = self.shape().to_vec();
        out_shape[axis] += usize::from(initial);
        element_count(name, &out_shape)?;
        let out = self.output(name, &out_shape, dtype)?;
        if out.is_empty() {
            return Ok(out);
        }
        if self.dtype() != DType::F32 {
            // Integer and bool words, exactly, wrapping (an empty axis gives the identity alone).
            let (source, target) = (self.range()?, out.range()?);
            self.with_runtime(|runtime| {
                reduce::scan_words(runtime, name, op, source, view, (reverse, initial), target)
            })?;
            return Ok(out);
        }
        if self.is_empty() {
            // An empty axis with the identity first: every lane is the identity alone.
            out.fill_(if op == ReduceOp::Prod { 1.0 } else { 0.0 })?;
            return Ok(out);
        }
        let (source, target) = (self.range()?, out.range()?);
        self.with_runtime(|runtime| {
            reduce::scan(runtime, name, op, source, view, (reverse, initial), target)
        })?;
        Ok(out)
    }
}

/// `1 / count` in float32, what a mean over `count` elements (and its gradient) multiplies a sum by; 0 for no
/// elements, which have nothing to scale (an empty mean is NaN by its row, an empty variance through
/// [`degrees_of_freedom_scale`]).
pub(crate) fn reciprocal_count(count: usize) -> f32 {
    if count == 0 {
        0.0
    } else {
        (1.0 / count as f64) as f32
    }
}

/// What a sum of squared deviations over `count` elements is multiplied by for a variance with `correction`:
/// `1 / (count − correction)`, NaN where that divisor is not positive (the Array API's rule).
pub(crate) fn degrees_of_freedom_scale(count: usize, correction: f64) -> f32 {
    let divisor = count as f64 - correction;
    if divisor > 0.0 {
        (1.0 / divisor) as f32
    } else {
        f32::NAN
    }
}

/// The shape of an arg reduction along `axis` (`None`: all) with the axis kept as a 1.
fn arg_kept_shape(shape: &[usize], axis: Option<usize>) -> Vec<usize> {
    let axes: Vec<usize> = match axis {
        Some(axis) => vec![axis],
        None => (0..shape.len()).collect(),
    };
    shape::kept_shape(shape, &axes, true)
}

/// The axis a scan runs along: the one given (in range), or the only one of a 1-D tensor.
pub(crate) fn scan_axis(name: &'static str, shape: &[usize], axis: Option<usize>) -> Result<usize> {
    match axis {
        Some(axis) if axis < shape.len() => Ok(axis),
        None if shape.len() == 1 => Ok(0),
        _ => Err(Error::Shape {
            op: name,
            message: match axis {
                Some(axis) => format!("axis {axis} is out of range for shape {shape:?}"),
                None => format!(
                    "needs an axis for a tensor of {} axes (shape {shape:?}); only a 1-D tensor may omit it",
                    shape.len()
                ),
            },
        }),
    }
}

/// Errors unless `input` holds an element and `slot` is one of `record`'s.
fn expect_slot(name: &'static str, input: &Tensor, record: &Tensor, slot: usize) -> Result<()> {
    if input.is_empty() || slot >= record.len() {
        return Err(Error::Shape {
            op: name,
            message: format!(
                "{:?} into slot {slot} of {:?}: needs at least one element, and a slot of the record",
                input.shape(),
                record.shape()
            ),
        });
    }
    Ok(())
}

macro_rules! reduce_methods {
    ($($variant:ident $method:ident { $($row:tt)* } $doc:literal;)*) => {
        /// Value reductions, one method per row of the op table.
        impl Tensor {
            $(
                #[doc = $doc]
                pub fn $method(&self, axis: Option<usize>) -> Result<Tensor> {
                    self.reduce(ReduceOp::$variant, axis)
                }
            )*
        }
    };
}

for_each_reduce_op!(reduce_methods);
