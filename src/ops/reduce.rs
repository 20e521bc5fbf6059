//! Reductions: the value reductions of the op table (sum, mean, max, min, prod), argmax and argmin, over all
//! elements or along any axis; and prod's gradient, for the tape.
//!
//! Edge cases follow NumPy: a NaN makes every value reduction NaN and is where argmax and argmin point (the
//! first one); max of a row of −inf is −inf; over an empty axis each row's `empty` answers (sum 0, prod 1,
//! mean NaN), while max, min, argmax and argmin of nothing are errors.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::reduce::{self, ZeroSplit};
use crate::op::reduce::{for_each_reduce_op, ReduceOp, Reduction};
use crate::shape::{self, lanes, reduction_name};
use crate::tensor::Tensor;

fn reduce(input: &Tensor, axis: Option<usize>, reduction: Reduction) -> Result<Tensor> {
    let name = reduction_name(reduction);
    input.expect_dtype(name, DType::F32)?;
    let (view, out_shape) = shape::reduction(reduction, input.shape(), axis)?;
    let row = match reduction {
        Reduction::Value(op) => Some(op.row()),
        Reduction::Argmax | Reduction::Argmin => None,
    };
    let empty = row.and_then(|row| row.empty);
    let dtype = if reduction.is_arg() {
        DType::U32
    } else {
        DType::F32
    };
    let out = input.output(name, &out_shape, dtype)?;
    if let (0, Some(value)) = (view.len, empty) {
        out.fill_(value)?;
        return Ok(out);
    }
    if out.is_empty() {
        return Ok(out);
    }
    let scale = match row {
        Some(row) if row.divide_by_count => (1.0 / view.len as f64) as f32,
        _ => 1.0,
    };
    let (source, target) = (input.range()?, out.range()?);
    input.with_runtime(|runtime| {
        reduce::reduce(runtime, name, reduction, source, view, scale, target)
    })?;
    Ok(out)
}

/// Reductions. `axis: None` reduces over all elements into a 0-d tensor; `Some(axis)` removes that axis. The
/// result's shape is [`reduce_shape`](crate::shape::reduce_shape)'s (or [`argmax_shape`](crate::shape::argmax_shape)'s,
/// [`argmin_shape`](crate::shape::argmin_shape)'s), checked the same way.
impl Tensor {
    /// Any row of the value-reduction table, by value (see [`ReduceOp`]).
    pub fn reduce(&self, op: ReduceOp, axis: Option<usize>) -> Result<Tensor> {
        reduce(self, axis, Reduction::Value(op))
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
        let lane_scale = upstream.reshape(&out_shape)?.mul(&non_zero_product)?;
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
