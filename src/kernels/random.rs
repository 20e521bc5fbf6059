//! Seeded random tensors on the device (shaders/random.wgsl): Philox4x32-10, keyed by the seed and counted by
//! element, so a seed gives the same numbers on every adapter and however the tensor is split into windows.

use bytemuck::{Pod, Zeroable};

use super::plan::Limits;
use crate::error::Result;
use crate::runtime::{wgsl_constants, BufferRange, Kernel, Runtime, Shader};

static RANDOM: Shader = Shader {
    proven_bounds: false,
    name: "random",
    source: include_str!("../../shaders/random.wgsl"),
    generated: || wgsl_constants(&[("UNIFORM", UNIFORM), ("NORMAL", NORMAL)]),
};

/// The shader's distribution codes.
const UNIFORM: u32 = 0;
const NORMAL: u32 = 1;

static FILL_RANDOM: Kernel = Kernel::new(&RANDOM, "random", &[1]);

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

/// Which distribution a fill draws from.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Distribution {
    /// In `[low, high)`.
    Uniform {
        low: f32,
        high: f32,
    },
    Normal {
        mean: f32,
        std: f32,
    },
}

/// Fills `elements` elements of `range` from the seed, counted by element from the start of the range.
pub(crate) fn fill(
    runtime: &mut Runtime,
    range: BufferRange,
    elements: u64,
    seed: u64,
    distribution: Distribution,
) -> Result<()> {
    let (op, low, high, below_high) = match distribution {
        Distribution::Uniform { low, high } => (UNIFORM, low, high, next_below(high)),
        Distribution::Normal { mean, std } => (NORMAL, mean, std, f32::MAX),
    };
    // Windows start at aligned offsets, which are multiples of 4 elements, as the counter needs.
    for (first, count) in Limits::of(runtime.limits()).windows(elements) {
        let params = Params {
            count: count as u32,
            base: first as u32,
            seed_lo: seed as u32,
            seed_hi: (seed >> 32) as u32,
            op,
            low,
            high,
            below_high,
        };
        let workgroups = Limits::of(runtime.limits()).per_element(count, 4);
        runtime.dispatch(
            &FILL_RANDOM,
            bytemuck::bytes_of(&params),
            &[range.elements(first, count)],
            workgroups,
        )?;
    }
    Ok(())
}

reflected_layout!(
    kernels: [
        FILL_RANDOM
    ],
    params: {
        count, base, seed_lo, seed_hi, op, low, high, below_high
    }
);
