//! Reductions: sum, mean, max, min, argmax and argmin over all elements or along any axis.
//!
//! Edge cases follow NumPy: a NaN makes max and min NaN and is where argmax and argmin point (the first one);
//! max of a row of −inf is −inf; the sum over an empty axis is 0 and the mean NaN, while max, min, argmax and
//! argmin of nothing are errors.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::reduce::{self, Op};
use crate::shape::lanes;
use crate::tensor::Tensor;

fn reduce(
    input: &Tensor,
    axis: Option<usize>,
    op: Op,
    mean: bool,
    name: &'static str,
) -> Result<Tensor> {
    input.expect_dtype(name, DType::F32)?;
    let (view, out_shape) = lanes(name, input.shape(), axis)?;
    if view.len == 0 && op != Op::Sum {
        return Err(Error::Shape {
            op: name,
            message: format!(
                "{name} of nothing is undefined (shape {:?}, axis {axis:?}); only sum (0) and mean (NaN) \
                 reduce an empty axis",
                input.shape()
            ),
        });
    }
    let dtype = if op.is_arg() { DType::U32 } else { DType::F32 };
    let out = input.output(name, &out_shape, dtype)?;
    if view.len == 0 {
        // NumPy's answers: the empty sum is 0, and the mean of nothing is 0/0.
        out.fill_(if mean { f32::NAN } else { 0.0 })?;
        return Ok(out);
    }
    if out.is_empty() {
        return Ok(out);
    }
    let scale = if mean {
        (1.0 / view.len as f64) as f32
    } else {
        1.0
    };
    let (source, target) = (input.range()?, out.range()?);
    input.with_runtime(|runtime| reduce::reduce(runtime, name, op, source, view, scale, target))?;
    Ok(out)
}

/// Reductions. `axis: None` reduces over all elements into a 0-d tensor; `Some(axis)` removes that axis.
impl Tensor {
    pub fn sum(&self, axis: Option<usize>) -> Result<Tensor> {
        reduce(self, axis, Op::Sum, false, "sum")
    }

    pub fn mean(&self, axis: Option<usize>) -> Result<Tensor> {
        reduce(self, axis, Op::Sum, true, "mean")
    }

    pub fn max(&self, axis: Option<usize>) -> Result<Tensor> {
        reduce(self, axis, Op::Max, false, "max")
    }

    pub fn min(&self, axis: Option<usize>) -> Result<Tensor> {
        reduce(self, axis, Op::Min, false, "min")
    }

    /// Index of the largest element (the first on ties, the first NaN if any), as a u32 tensor.
    pub fn argmax(&self, axis: Option<usize>) -> Result<Tensor> {
        reduce(self, axis, Op::Argmax, false, "argmax")
    }

    /// Index of the smallest element (the first on ties, the first NaN if any), as a u32 tensor.
    pub fn argmin(&self, axis: Option<usize>) -> Result<Tensor> {
        reduce(self, axis, Op::Argmin, false, "argmin")
    }
}
