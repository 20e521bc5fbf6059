//! Seeded random tensors on the device (shaders/random.wgsl): Philox4x32-10, keyed by the seed and counted by
//! element, so a seed gives the same numbers on every adapter and however the tensor is split into windows.

use bytemuck::{Pod, Zeroable};

use super::{dispatch, per_element, windows, Family, Kernel};
use crate::error::{Error, Result};
use crate::session::Session;
use crate::tensor::{DType, Tensor};

static RANDOM: Family = Family {
    name: "random",
    source: include_str!("../../shaders/random.wgsl"),
};

static FILL_RANDOM: Kernel = Kernel {
    family: &RANDOM,
    entry: "random",
    bindings: &[1],
};

#[repr(C)]
#[derive(Clone, Copy, Default, Pod, Zeroable)]
struct Params {
    count: u32,
    base: u32,
    seed_lo: u32,
    seed_hi: u32,
    op: u32,
    low: f32,
    high: f32,
    below_high: f32,
}

/// The largest f32 below `value` (for finite values).
fn next_below(value: f32) -> f32 {
    if value == 0.0 {
        -f32::from_bits(1)
    } else if value > 0.0 {
        f32::from_bits(value.to_bits() - 1)
    } else {
        f32::from_bits(value.to_bits() + 1)
    }
}

fn fill_random(
    tensor: &Tensor,
    seed: u64,
    op: u32,
    low: f32,
    high: f32,
    name: &'static str,
) -> Result<()> {
    tensor.expect_dtype(name, DType::F32)?;
    let range = tensor.range()?;
    let elements = tensor.len() as u64;
    tensor.with_gpu(|gpu| {
        // Windows start at aligned offsets, which are multiples of 4 elements, as the counter needs.
        for (first, count) in windows(gpu, elements) {
            let params = Params {
                count: count as u32,
                base: first as u32,
                seed_lo: seed as u32,
                seed_hi: (seed >> 32) as u32,
                op,
                low,
                high,
                below_high: if op == 0 { next_below(high) } else { f32::MAX },
            };
            let workgroups = per_element(gpu, count, 4);
            dispatch(
                gpu,
                &FILL_RANDOM,
                bytemuck::bytes_of(&params),
                &[range.elements(first, count)],
                workgroups,
            )?;
        }
        Ok(())
    })
}

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
        fill_random(self, seed, 0, low, high, "fill_uniform")
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
        fill_random(self, seed, 1, mean, std, "fill_normal")
    }
}

/// Random tensors.
impl Session {
    /// Uniform in [0, 1), the same numbers for the same seed on every adapter.
    pub fn rand(&self, shape: &[usize], seed: u64) -> Result<Tensor> {
        let tensor = self.empty(shape)?;
        tensor.fill_uniform_(seed, 0.0, 1.0)?;
        Ok(tensor)
    }

    /// Standard normal, from the same generator through Box–Muller.
    pub fn randn(&self, shape: &[usize], seed: u64) -> Result<Tensor> {
        let tensor = self.empty(shape)?;
        tensor.fill_normal_(seed, 0.0, 1.0)?;
        Ok(tensor)
    }
}
