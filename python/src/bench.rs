//! The same-run baselines of the Python bench (python/benches/overhead.py): the bench's work done by a loop in
//! Rust on the same session and tensors, so that the ratio to the Python loop is the bindings' overhead alone.

use std::time::{Duration, Instant};

use pyo3::prelude::*;

use crate::errors::OrRaise;
use crate::tensor::Tensor;

fn median(mut times: Vec<Duration>) -> f64 {
    times.sort();
    times[times.len() / 2].as_secs_f64()
}

/// Median seconds of the seed's forward pass and loss, read back: `mean(xent(x·W, y)).item()`.
#[pyfunction]
pub fn seed_forward_seconds(
    py: Python<'_>,
    x: &Tensor,
    w: &Tensor,
    y: &Tensor,
    runs: usize,
) -> PyResult<f64> {
    let (x, w, y) = (&*x.inner, &*w.inner, &*y.inner);
    let times = py
        .detach(|| {
            (0..runs.max(1))
                .map(|_| {
                    let start = Instant::now();
                    let logits = x.matmul(w)?;
                    let (losses, _gradient) = logits.softmax_cross_entropy_with_logits(y)?;
                    losses.mean(None)?.item()?;
                    Ok(start.elapsed())
                })
                .collect::<wgcompute::Result<Vec<_>>>()
        })
        .or_raise()?;
    Ok(median(times))
}

/// Median seconds of one small op read back: `(a + b)` to the host.
#[pyfunction]
pub fn small_op_seconds(py: Python<'_>, a: &Tensor, b: &Tensor, runs: usize) -> PyResult<f64> {
    let (a, b) = (&*a.inner, &*b.inner);
    let times = py
        .detach(|| {
            (0..runs.max(1))
                .map(|_| {
                    let start = Instant::now();
                    a.add(b)?.to_vec()?;
                    Ok(start.elapsed())
                })
                .collect::<wgcompute::Result<Vec<_>>>()
        })
        .or_raise()?;
    Ok(median(times))
}
