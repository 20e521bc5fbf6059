//! Tensors made from their positions (the Array API's `arange`, `linspace` and `eye`): the lengths they take,
//! checked, and the passes that write them into a fresh tensor. `Session` opens them (src/session.rs).

use crate::error::{Error, Result};
use crate::kernels::creation;
use crate::tensor::Tensor;

/// The length of `arange(start, stop, step)`: `ceil((stop − start) / step)`, 0 where the two differ in sign
/// (the Array API's rule); the step must be finite and non-zero, the ends finite.
pub(crate) fn arange_len(start: f64, stop: f64, step: f64) -> Result<usize> {
    if step == 0.0 || !step.is_finite() || !start.is_finite() || !stop.is_finite() {
        return Err(Error::InvalidArgument {
            what: "arange",
            given: format!("start {start}, stop {stop}, step {step}"),
            expected: "finite ends and a finite, non-zero step".to_string(),
        });
    }
    let len = ((stop - start) / step).ceil();
    if len > u32::MAX as f64 {
        return Err(Error::Shape {
            op: "arange",
            message: format!("{len} elements are more than a tensor of this library holds"),
        });
    }
    Ok(len.max(0.0) as usize)
}

/// The step of `linspace(start, stop, num, endpoint)`: the interval over `num − 1` parts with the endpoint,
/// `num` without it (0 for fewer than two points, where none is taken).
pub(crate) fn linspace_step(start: f64, stop: f64, num: usize, endpoint: bool) -> Result<f64> {
    if !start.is_finite() || !stop.is_finite() {
        return Err(Error::InvalidArgument {
            what: "linspace",
            given: format!("start {start}, stop {stop}"),
            expected: "finite ends".to_string(),
        });
    }
    let parts = if endpoint { num.saturating_sub(1) } else { num };
    Ok(if parts == 0 {
        0.0
    } else {
        (stop - start) / parts as f64
    })
}

impl Tensor {
    /// Writes `start + i · step` into element i of this f32 tensor, and `stop` into element `last` (where given).
    pub(crate) fn fill_ramp_(
        &self,
        start: f64,
        step: f64,
        stop: f64,
        last: Option<usize>,
    ) -> Result<()> {
        const NAME: &str = "arange";
        if self.is_empty() {
            return Ok(());
        }
        let (range, elements) = (self.range()?, self.len() as u64);
        self.with_runtime(|runtime| {
            creation::ramp(
                runtime,
                NAME,
                range,
                elements,
                (start as f32, step as f32, stop as f32),
                last.map(|last| last as u64),
            )
        })
    }

    /// Writes the identity's diagonal `k` into this f32 matrix: 1 where column − row is `k`, else 0.
    pub(crate) fn fill_eye_(&self, k: i64) -> Result<()> {
        const NAME: &str = "eye";
        if self.is_empty() {
            return Ok(());
        }
        let (rows, cols) = (self.shape()[0], self.shape()[1]);
        let (range, elements) = (self.range()?, self.len() as u64);
        self.with_runtime(|runtime| creation::eye(runtime, NAME, range, elements, (rows, cols), k))
    }
}
