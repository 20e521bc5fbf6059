//! Seeded random fills: Philox4x32-10, keyed by the seed and counted by element, so a seed gives the same
//! numbers on every adapter and however the tensor is split into windows.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::random::{self, Distribution};
use crate::tensor::Tensor;

/// Random fills, in place.
impl Tensor {
    /// Fills with uniform numbers in `[low, high)` from the seed.
    pub fn fill_uniform_(&self, seed: u64, low: f32, high: f32) -> Result<()> {
        if !(low.is_finite() && high.is_finite() && low <= high) {
            return Err(Error::InvalidArgument {
                what: "uniform range",
                given: format!("[{low}, {high})"),
                expected: "finite bounds with low ≤ high".to_string(),
            });
        }
        self.fill_random(seed, Distribution::Uniform { low, high }, "fill_uniform")
    }

    /// Fills with normal numbers of this mean and standard deviation from the seed.
    pub fn fill_normal_(&self, seed: u64, mean: f32, std: f32) -> Result<()> {
        if !(mean.is_finite() && std.is_finite() && std >= 0.0) {
            return Err(Error::InvalidArgument {
                what: "normal distribution",
                given: format!("mean {mean}, standard deviation {std}"),
                expected: "a finite mean and a finite standard deviation ≥ 0".to_string(),
            });
        }
        self.fill_random(seed, Distribution::Normal { mean, std }, "fill_normal")
    }

    fn fill_random(&self, seed: u64, distribution: Distribution, name: &'static str) -> Result<()> {
        self.expect_dtype(name, DType::F32)?;
        let range = self.range()?;
        let elements = self.len() as u64;
        self.with_runtime(|runtime| random::fill(runtime, range, elements, seed, distribution))
    }
}
