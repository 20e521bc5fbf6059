//! Planning from an adapter's limits alone, never a live device, so that it is tested without a GPU: how
//! elements split into windows that each fit one storage binding, and how workgroups spread over a grid.
//! Kernel families plan their own variants and stages the same way (matmul's kernel choice and passes,
//! reduction stages), each beside its kernels.

use crate::error::{Error, Result};
use crate::runtime::{BufferRange, WORKGROUP_SIZE};

/// What planning needs to know of an adapter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Limits {
    /// The most 4-byte values one storage binding may hold, rounded down to the storage offset alignment so
    /// that every window after the first starts aligned.
    pub max_binding_elements: u64,
    /// Workgroups along one dispatch dimension (65,535 on most adapters).
    pub max_workgroups_per_dimension: u32,
}

impl Limits {
    pub fn of(limits: &wgpu::Limits) -> Self {
        let alignment = u64::from(limits.min_storage_buffer_offset_alignment).max(4);
        let max_bytes = limits.max_storage_buffer_binding_size;
        Self {
            max_binding_elements: (max_bytes - max_bytes % alignment).max(alignment) / 4,
            max_workgroups_per_dimension: limits.max_compute_workgroups_per_dimension.max(1),
        }
    }

    /// Spreads `groups` workgroups over x and y, since one dimension stops at the limit. Kernels rebuild the
    /// linear index from `num_workgroups` and must bounds-check it: x·y can exceed `groups`.
    pub fn grid(&self, groups: u32) -> [u32; 3] {
        let max = self.max_workgroups_per_dimension;
        if groups <= max {
            [groups.max(1), 1, 1]
        } else {
            [max, groups.div_ceil(max), 1]
        }
    }

    /// Workgroups for a kernel with one invocation per `per_invocation` elements. Each invocation handles its
    /// own elements and nothing more: on llvmpipe a loop striding over the grid ran three times slower.
    pub fn per_element(&self, elements: u64, per_invocation: u64) -> [u32; 3] {
        let invocations = elements.div_ceil(per_invocation.max(1));
        self.grid(invocations.div_ceil(u64::from(WORKGROUP_SIZE)) as u32)
    }

    /// Splits `elements` 4-byte values into windows that each bind within one storage binding: (first element,
    /// element count), in order, covering every element once.
    pub fn windows(&self, elements: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut first = 0;
        while first < elements {
            let count = self.max_binding_elements.min(elements - first);
            out.push((first, count));
            first += count;
        }
        out
    }

    /// Errors unless a range bound whole fits one storage binding.
    pub fn expect_bindable(&self, op: &'static str, range: BufferRange) -> Result<()> {
        if range.bytes / 4 <= self.max_binding_elements {
            Ok(())
        } else {
            Err(Error::Shape {
                op,
                message: format!(
                    "an operand of {} bytes is larger than one storage binding ({} bytes) on this adapter, and \
                     this operand cannot be split into windows; split the data",
                    range.bytes,
                    self.max_binding_elements * 4
                ),
            })
        }
    }
}

/// The most loop iterations a kernel plans for one invocation in one dispatch, over all of its loops. llvmpipe
/// (lavapipe, and Mesa's GL) gives each invocation a single budget of 65,535 loop iterations, shared by every
/// loop it runs, nested or not, and once it is spent cuts every loop short without a word. A kernel whose loop
/// follows the data (picks of a scatter, a lane's length) runs in passes of at most this many iterations, one
/// dispatch each, carrying its state from one pass to the next.
pub(crate) const PASS_ITERATIONS: u64 = 16_384;

/// The [begin, end) ranges of at most [`PASS_ITERATIONS`] that cover `0..len` in order: one empty range for an
/// empty `len`, so that a first pass always runs.
pub(crate) fn passes(len: u64) -> Vec<(u64, u64)> {
    if len == 0 {
        return vec![(0, 0)];
    }
    (0..len.div_ceil(PASS_ITERATIONS))
        .map(|pass| {
            let begin = pass * PASS_ITERATIONS;
            (begin, (begin + PASS_ITERATIONS).min(len))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// lavapipe's limits: a 128 MiB binding, 256-byte alignment, 65,535 workgroups per dimension.
    fn lavapipe() -> Limits {
        Limits::of(&wgpu::Limits {
            max_storage_buffer_binding_size: 128 << 20,
            min_storage_buffer_offset_alignment: 256,
            max_compute_workgroups_per_dimension: 65_535,
            ..wgpu::Limits::default()
        })
    }

    #[test]
    fn passes_cover_every_iteration_once_in_order_within_the_budget() {
        assert_eq!(passes(0), vec![(0, 0)]);
        for len in [
            1,
            7,
            PASS_ITERATIONS - 1,
            PASS_ITERATIONS,
            PASS_ITERATIONS + 1,
            100_000,
            1 << 24,
        ] {
            let ranges = passes(len);
            let mut next = 0;
            for &(begin, end) in &ranges {
                assert_eq!(begin, next, "{len}: passes are contiguous");
                assert!(
                    end > begin && end - begin <= PASS_ITERATIONS,
                    "{len}: {begin}..{end}"
                );
                next = end;
            }
            assert_eq!(next, len);
        }
        // A pass leaves room under llvmpipe's budget of 65,535 iterations an invocation for the loops of a
        // kernel's own (a rank's strides, a few steps of its setup).
        const _: () = assert!(2 * PASS_ITERATIONS < 65_535);
    }

    #[test]
    fn windows_cover_every_element_once_each_within_a_binding_and_aligned() {
        let limits = lavapipe();
        assert_eq!(limits.max_binding_elements, 1 << 25);
        for elements in [
            0,
            1,
            7,
            (1 << 25) - 1,
            1 << 25,
            (1 << 25) + 1,
            3 << 25,
            (5 << 25) + 12_345,
        ] {
            let windows = limits.windows(elements);
            let mut next = 0;
            for &(first, count) in &windows {
                assert_eq!(first, next, "{elements}: windows are contiguous");
                assert!(
                    count >= 1 && count <= limits.max_binding_elements,
                    "{elements}: {count}"
                );
                assert_eq!(
                    (first * 4) % 256,
                    0,
                    "{elements}: window at {first} is aligned"
                );
                next = first + count;
            }
            assert_eq!(next, elements, "{elements}: every element is covered");
        }
    }

    #[test]
    fn an_odd_binding_size_is_rounded_down_to_the_alignment() {
        let limits = Limits::of(&wgpu::Limits {
            max_storage_buffer_binding_size: (1 << 20) + 100,
            min_storage_buffer_offset_alignment: 256,
            ..wgpu::Limits::default()
        });
        assert_eq!(limits.max_binding_elements, (1 << 20) / 4);
    }

    #[test]
    fn grids_hold_enough_workgroups_and_stay_within_a_dimension() {
        let limits = lavapipe();
        for groups in [0, 1, 255, 65_535, 65_536, 1 << 20, u32::MAX / 2] {
            let [x, y, z] = limits.grid(groups);
            assert!(x <= 65_535 && y <= 65_535 && z == 1, "{groups}: {x}×{y}");
            assert!(
                u64::from(x) * u64::from(y) >= u64::from(groups.max(1)),
                "{groups}: {x}×{y}"
            );
        }
        let [x, y, _] = limits.per_element(10_000_001, 4);
        assert!(u64::from(x * y) * 256 * 4 >= 10_000_001);
    }

    #[test]
    fn only_ranges_within_one_binding_are_bindable() {
        let limits = lavapipe();
        let range = |bytes| BufferRange {
            slab: 0,
            offset: 0,
            bytes,
        };
        assert!(limits.expect_bindable("t", range(128 << 20)).is_ok());
        assert!(limits.expect_bindable("t", range((128 << 20) + 4)).is_err());
    }
}
