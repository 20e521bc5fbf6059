//! The free ranges of one slab, handed out best-fit: a request takes the smallest free range that holds it
//! (the lowest-addressed of equals), and a freed range merges with its free neighbours at once.
//!
//! Exact sizes, not binned ones: a range freed by a tensor serves the next request of the same size. That is
//! what a training loop asks for step after step; a binned allocator (TLSF, as offset-allocator is) rounds
//! requests up and free ranges down, so such a hole can be passed over and the request served from fresh space.
//! Every operation is O(log n) in the slab's free ranges.

use std::collections::{BTreeMap, BTreeSet};

#[derive(Clone, Debug, Default)]
pub(crate) struct FreeRanges {
    /// Offset → length of every free range; neighbours are always merged, so no two touch.
    by_offset: BTreeMap<u64, u64>,
    /// (length, offset) of the same ranges, for the best fit.
    by_size: BTreeSet<(u64, u64)>,
}

impl FreeRanges {
    /// Ranges over `[0, bytes)`, all free.
    pub fn new(bytes: u64) -> Self {
        let mut ranges = Self::default();
        ranges.insert(0, bytes);
        ranges
    }

    fn insert(&mut self, offset: u64, bytes: u64) {
        if bytes > 0 {
            self.by_offset.insert(offset, bytes);
            self.by_size.insert((bytes, offset));
        }
    }

    fn remove(&mut self, offset: u64, bytes: u64) {
        self.by_offset.remove(&offset);
        self.by_size.remove(&(bytes, offset));
    }

    /// The length of the free range that a request of `bytes` would take, if any.
    pub fn best_fit(&self, bytes: u64) -> Option<u64> {
        self.by_size
            .range((bytes, 0)..)
            .next()
            .map(|&(length, _)| length)
    }

    /// Takes `bytes` from the start of the best-fitting free range: its offset.
    pub fn allocate(&mut self, bytes: u64) -> Option<u64> {
        let &(length, offset) = self.by_size.range((bytes.max(1), 0)..).next()?;
        self.remove(offset, length);
        self.insert(offset + bytes, length - bytes);
        Some(offset)
    }

    /// Gives `[offset, offset + bytes)` back, merged with the free ranges on either side.
    pub fn free(&mut self, offset: u64, bytes: u64) {
        let (mut start, mut end) = (offset, offset + bytes);
        if let Some((&before, &length)) = self.by_offset.range(..offset).next_back() {
            if before + length == start {
                self.remove(before, length);
                start = before;
            }
        }
        if let Some(&length) = self.by_offset.get(&end) {
            self.remove(end, length);
            end += length;
        }
        self.insert(start, end - start);
    }

    /// The longest free range.
    pub fn largest(&self) -> u64 {
        self.by_size.last().map_or(0, |&(length, _)| length)
    }

    /// Bytes free in all.
    pub fn total(&self) -> u64 {
        self.by_offset.values().sum()
    }

    /// Forgets the free space from `end` on (a slab cut to its last live range): nothing past it is handed out.
    pub fn truncate(&mut self, end: u64) {
        let past: Vec<(u64, u64)> = self
            .by_offset
            .range(..)
            .filter(|&(&offset, &length)| offset + length > end)
            .map(|(&offset, &length)| (offset, length))
            .collect();
        for (offset, length) in past {
            self.remove(offset, length);
            if offset < end {
                self.insert(offset, end - offset);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_freed_range_serves_the_next_request_of_its_size() {
        let mut ranges = FreeRanges::new(10_000);
        let a = ranges.allocate(1000).unwrap();
        let b = ranges.allocate(3000).unwrap();
        let _c = ranges.allocate(1000).unwrap();
        ranges.free(b, 3000);
        assert_eq!(
            ranges.allocate(3000),
            Some(b),
            "the exact hole, not fresh space"
        );
        ranges.free(a, 1000);
        assert_eq!(ranges.allocate(600), Some(a), "the smallest hole that fits");
    }

    #[test]
    fn neighbours_merge_and_truncate_drops_the_tail() {
        let mut ranges = FreeRanges::new(4096);
        let offsets: Vec<u64> = (0..4).map(|_| ranges.allocate(1024).unwrap()).collect();
        assert_eq!(ranges.largest(), 0);
        ranges.free(offsets[1], 1024);
        ranges.free(offsets[3], 1024);
        ranges.free(offsets[2], 1024);
        assert_eq!((ranges.largest(), ranges.total()), (3072, 3072));
        ranges.truncate(2048);
        assert_eq!((ranges.largest(), ranges.total()), (1024, 1024));
        assert_eq!(ranges.allocate(2048), None);
        assert_eq!(ranges.allocate(1024), Some(1024));
    }

    proptest! {
        #[test]
        fn ranges_are_disjoint_and_free_space_adds_up(
            steps in proptest::collection::vec((1u64..5000, any::<bool>(), any::<usize>()), 1..300),
        ) {
            let capacity = 64 << 10;
            let mut ranges = FreeRanges::new(capacity);
            let mut live: Vec<(u64, u64)> = Vec::new();
            for (bytes, allocate, pick) in steps {
                if allocate || live.is_empty() {
                    let fits = ranges.best_fit(bytes).is_some();
                    match ranges.allocate(bytes) {
                        Some(offset) => {
                            prop_assert!(fits);
                            prop_assert!(offset + bytes <= capacity);
                            live.push((offset, bytes));
                        }
                        None => prop_assert!(!fits && ranges.largest() < bytes),
                    }
                } else {
                    let (offset, bytes) = live.swap_remove(pick % live.len());
                    ranges.free(offset, bytes);
                }
                let used: u64 = live.iter().map(|&(_, bytes)| bytes).sum();
                prop_assert_eq!(ranges.total() + used, capacity);
                let mut sorted = live.clone();
                sorted.sort();
                for pair in sorted.windows(2) {
                    prop_assert!(pair[0].0 + pair[0].1 <= pair[1].0);
                }
                for (&offset, &length) in &ranges.by_offset {
                    prop_assert!(live.iter().all(|&(o, b)| o + b <= offset || offset + length <= o));
                }
            }
        }
    }
}
