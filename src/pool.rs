//! The per-session memory pool: carves tensors out of a few large slabs, enforces the session's cap, keeps the
//! statistics, and gives empty slabs back on `trim`.
//!
//! Policy (which range, which slab, whether the cap allows it) lives here; storage (creating and destroying the
//! buffers themselves) sits behind the crate-private `SlabStorage` trait, so the whole policy is tested on a CPU
//! stand-in without a GPU. Ranges within a slab come from `offset-allocator`, a TLSF-style allocator with O(1)
//! allocate and free that coalesces neighbours, counted in units of the adapter's storage offset alignment so
//! every range is aligned.

use std::collections::BTreeMap;

use crate::error::{Error, Result};

/// Why storage could not create a slab.
#[derive(Debug)]
pub(crate) enum SlabError {
    /// The driver has no memory for it; the pool reports this with its own figures.
    OutOfMemory,
    /// Anything else the driver said.
    Other(Error),
}

/// Creates and destroys the large buffers the pool carves up.
pub(crate) trait SlabStorage {
    type Buffer;
    /// Creates a buffer of exactly `bytes`.
    fn create(&mut self, bytes: u64) -> Result<Self::Buffer, SlabError>;
    /// Gives the buffer's memory back to the driver now, whoever else still refers to it.
    fn destroy(&mut self, buffer: Self::Buffer);
}

/// Identifies a slab for the lifetime of its pool; never reused, so caches keyed by it cannot alias.
pub(crate) type SlabId = u64;

/// How a pool is shaped, from the adapter's limits and the session's options.
#[derive(Clone, Copy, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct PoolConfig {
    /// Size of a shared slab. No larger than the adapter's max storage binding, so that any range carved
    /// from it binds in one window.
    pub slab_bytes: u64,
    /// Every range starts at a multiple of this (the adapter's `min_storage_buffer_offset_alignment`).
    pub alignment: u64,
    /// The adapter's largest single buffer.
    pub max_buffer_bytes: u64,
    /// The session's cap on reserved bytes, if any.
    pub limit: Option<u64>,
}

impl PoolConfig {
    /// The shape a session's pool takes on an adapter with these limits, before any cap.
    pub fn for_limits(limits: &wgpu::Limits) -> Self {
        let alignment = u64::from(limits.min_storage_buffer_offset_alignment).max(4);
        let slab_bytes = limits
            .max_storage_buffer_binding_size
            .min(limits.max_buffer_size)
            .min(MAX_SHARED_SLAB_BYTES);
        Self {
            slab_bytes: slab_bytes - slab_bytes % alignment,
            alignment,
            max_buffer_bytes: limits.max_buffer_size,
            limit: None,
        }
    }
}

/// Shared slabs are as large as one storage binding allows (so that any range in them binds whole), but no
/// larger than this, so that a session grows in steps a small job does not notice.
const MAX_SHARED_SLAB_BYTES: u64 = 256 << 20;

/// A range of a slab, owned by one tensor (or one temporary).
pub(crate) struct Allocation {
    pub slab: SlabId,
    pub offset: u64,
    /// Bytes the range covers (the request rounded up to the alignment).
    pub bytes: u64,
    handle: offset_allocator::Allocation,
}

impl std::fmt::Debug for Allocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "slab {} [{}..{})",
            self.slab,
            self.offset,
            self.offset + self.bytes
        )
    }
}

struct Slab<B> {
    buffer: B,
    bytes: u64,
    /// A slab made for one request larger than a shared slab; destroyed as soon as that request is freed.
    dedicated: bool,
    ranges: offset_allocator::Allocator,
    live: u32,
}

/// The pool's figures, as `Session::memory_stats` reports them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct MemoryStats {
    /// Bytes held by live tensors (each rounded up to the alignment).
    pub in_use: u64,
    /// Bytes of GPU buffers the pool holds, used or not.
    pub reserved: u64,
    pub peak_in_use: u64,
    pub peak_reserved: u64,
    /// Live allocations.
    pub allocations: u64,
    /// Allocations made since the session opened.
    pub total_allocations: u64,
    pub slabs: u64,
    /// The largest request that would succeed without a new slab (approximate from below: the
    /// allocator bins free ranges).
    pub largest_free_range: u64,
    /// The session's cap, if any.
    pub limit: Option<u64>,
}

pub(crate) struct Pool<S: SlabStorage> {
    storage: S,
    config: PoolConfig,
    slabs: BTreeMap<SlabId, Slab<S::Buffer>>,
    next_slab: SlabId,
    in_use: u64,
    reserved: u64,
    peak_in_use: u64,
    peak_reserved: u64,
    total_allocations: u64,
}

/// offset-allocator counts in u32 units; this many allocation units fit one allocator.
const MAX_UNITS: u64 = u32::MAX as u64;

impl<S: SlabStorage> Pool<S> {
    pub fn new(storage: S, config: PoolConfig) -> Self {
        Self {
            storage,
            config,
            slabs: BTreeMap::new(),
            next_slab: 0,
            in_use: 0,
            reserved: 0,
            peak_in_use: 0,
            peak_reserved: 0,
            total_allocations: 0,
        }
    }

    /// The buffer behind a slab, if the slab still exists.
    pub fn buffer(&self, slab: SlabId) -> Option<&S::Buffer> {
        self.slabs.get(&slab).map(|slab| &slab.buffer)
    }

    fn units(&self, bytes: u64) -> u64 {
        bytes.max(1).div_ceil(self.config.alignment)
    }

    fn out_of_memory(&self, requested: u64) -> Error {
        self.refusal(requested, false)
    }

    fn refusal(&self, requested: u64, by_driver: bool) -> Error {
        Error::OutOfMemory {
            requested,
            in_use: self.in_use,
            reserved: self.reserved,
            limit: self.config.limit,
            by_driver,
        }
    }

    /// Reserves slabs up front until the cap is covered (TensorFlow's behaviour without allow_growth).
    pub fn reserve_up_to_limit(&mut self) -> Result<()> {
        let Some(limit) = self.config.limit else {
            return Err(Error::InvalidArgument {
                what: "memory option",
                given: "reserve up front".to_string(),
                expected: "a memory limit, since the pool reserves exactly the limit".to_string(),
            });
        };
        while self.reserved + self.config.alignment <= limit {
            let bytes = self.config.slab_bytes.min(limit - self.reserved);
            let bytes = bytes - bytes % self.config.alignment;
            self.add_slab(bytes, false, bytes)?;
        }
        Ok(())
    }

    /// Creates a slab of `bytes` for a request of `requested` bytes. When the driver is out of memory, empty
    /// slabs are given back and the creation is tried once more before the request is refused.
    fn add_slab(&mut self, bytes: u64, dedicated: bool, requested: u64) -> Result<SlabId> {
        let buffer = match self.storage.create(bytes) {
            Ok(buffer) => buffer,
            Err(SlabError::OutOfMemory) if !self.release_empty_slabs().is_empty() => self
                .storage
                .create(bytes)
                .map_err(|error| self.slab_error(error, requested))?,
            Err(error) => return Err(self.slab_error(error, requested)),
        };
        let id = self.next_slab;
        self.next_slab += 1;
        let mut units = (bytes / self.config.alignment).min(MAX_UNITS);
        if dedicated {
            // The allocator bins sizes, so a request exactly as large as an odd-sized allocator can miss it; a
            // dedicated slab serves one request only, so its bookkeeping may be larger than the buffer.
            units = units.next_power_of_two().min(MAX_UNITS);
        }
        let units = units as u32;
        self.slabs.insert(
            id,
            Slab {
                buffer,
                bytes,
                dedicated,
                ranges: offset_allocator::Allocator::new(units),
                live: 0,
            },
        );
        self.reserved += bytes;
        self.peak_reserved = self.peak_reserved.max(self.reserved);
        Ok(id)
    }

    fn slab_error(&self, error: SlabError, requested: u64) -> Error {
        match error {
            SlabError::OutOfMemory => self.refusal(requested, true),
            SlabError::Other(error) => error,
        }
    }

    fn take_from(&mut self, id: SlabId, units: u64) -> Option<Allocation> {
        let alignment = self.config.alignment;
        let slab = self.slabs.get_mut(&id)?;
        let handle = slab.ranges.allocate(units as u32)?;
        slab.live += 1;
        Some(self.account(id, handle, alignment, units))
    }

    fn account(
        &mut self,
        slab: SlabId,
        handle: offset_allocator::Allocation,
        alignment: u64,
        units: u64,
    ) -> Allocation {
        let bytes = units * alignment;
        self.in_use += bytes;
        self.peak_in_use = self.peak_in_use.max(self.in_use);
        self.total_allocations += 1;
        Allocation {
            slab,
            offset: u64::from(handle.offset) * alignment,
            bytes,
            handle,
        }
    }

    fn fits_under_limit(&self, bytes: u64) -> bool {
        self.config
            .limit
            .is_none_or(|limit| self.reserved + bytes <= limit)
    }

    /// Hands out an aligned range of at least `bytes`.
    pub fn allocate(&mut self, bytes: u64) -> Result<Allocation> {
        let units = self.units(bytes);
        let aligned = units * self.config.alignment;
        if aligned > self.config.max_buffer_bytes {
            return Err(Error::BufferTooBig {
                requested: bytes,
                max: self.config.max_buffer_bytes,
            });
        }
        if let Some(limit) = self.config.limit {
            if self.in_use + aligned > limit {
                return Err(self.out_of_memory(bytes));
            }
        }
        if aligned > self.config.slab_bytes {
            return self.allocate_dedicated(bytes, aligned, units);
        }
        let alignment = self.config.alignment;
        for (&id, slab) in self.slabs.iter_mut().filter(|(_, slab)| !slab.dedicated) {
            if let Some(handle) = slab.ranges.allocate(units as u32) {
                slab.live += 1;
                return Ok(self.account(id, handle, alignment, units));
            }
        }
        // No room: a new shared slab, shrunk if the cap leaves less than a full one.
        let mut slab_bytes = self.config.slab_bytes;
        if let Some(limit) = self.config.limit {
            if !self.fits_under_limit(slab_bytes) {
                self.release_empty_slabs();
                let room = limit.saturating_sub(self.reserved);
                slab_bytes = (room - room % self.config.alignment).min(slab_bytes);
                if slab_bytes < aligned {
                    return Err(self.out_of_memory(bytes));
                }
            }
        }
        let id = self.add_slab(slab_bytes, false, bytes)?;
        self.take_from(id, units)
            .ok_or_else(|| self.out_of_memory(bytes))
    }

    fn allocate_dedicated(&mut self, bytes: u64, aligned: u64, units: u64) -> Result<Allocation> {
        if !self.fits_under_limit(aligned) {
            self.release_empty_slabs();
            if !self.fits_under_limit(aligned) {
                return Err(self.out_of_memory(bytes));
            }
        }
        if units > MAX_UNITS {
            return Err(Error::BufferTooBig {
                requested: bytes,
                max: MAX_UNITS * self.config.alignment,
            });
        }
        let id = self.add_slab(aligned, true, bytes)?;
        self.take_from(id, units)
            .ok_or_else(|| self.out_of_memory(bytes))
    }

    /// Returns a range. A dedicated slab goes back to the driver with it; its id is returned so that caches
    /// over it can forget it.
    pub fn free(&mut self, allocation: Allocation) -> Option<SlabId> {
        let slab = self.slabs.get_mut(&allocation.slab)?;
        slab.ranges.free(allocation.handle);
        slab.live -= 1;
        self.in_use -= allocation.bytes;
        if slab.dedicated && slab.live == 0 {
            self.remove_slab(allocation.slab);
            return Some(allocation.slab);
        }
        None
    }

    fn remove_slab(&mut self, id: SlabId) {
        if let Some(slab) = self.slabs.remove(&id) {
            self.reserved -= slab.bytes;
            self.storage.destroy(slab.buffer);
        }
    }

    fn release_empty_slabs(&mut self) -> Vec<SlabId> {
        let empty: Vec<SlabId> = self
            .slabs
            .iter()
            .filter(|(_, slab)| slab.live == 0)
            .map(|(id, _)| *id)
            .collect();
        for id in &empty {
            self.remove_slab(*id);
        }
        empty
    }

    /// Destroys every empty slab and returns the ids that are gone.
    pub fn trim(&mut self) -> Vec<SlabId> {
        self.release_empty_slabs()
    }

    /// Destroys every slab, live or not: the session is closing.
    pub fn destroy_all(&mut self) {
        let ids: Vec<SlabId> = self.slabs.keys().copied().collect();
        for id in ids {
            self.remove_slab(id);
        }
        self.in_use = 0;
    }

    pub fn reset_peak(&mut self) {
        self.peak_in_use = self.in_use;
        self.peak_reserved = self.reserved;
    }

    pub fn stats(&self) -> MemoryStats {
        let alignment = self.config.alignment;
        let largest_free_range = self
            .slabs
            .values()
            .filter(|slab| !slab.dedicated)
            .map(|slab| u64::from(slab.ranges.storage_report().largest_free_region) * alignment)
            .max()
            .unwrap_or(0);
        MemoryStats {
            in_use: self.in_use,
            reserved: self.reserved,
            peak_in_use: self.peak_in_use,
            peak_reserved: self.peak_reserved,
            allocations: self.slabs.values().map(|slab| u64::from(slab.live)).sum(),
            total_allocations: self.total_allocations,
            slabs: self.slabs.len() as u64,
            largest_free_range,
            limit: self.config.limit,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A stand-in storage: remembers which buffers exist, and can be told to fail like a full driver.
    #[derive(Default)]
    pub struct HostStorage {
        pub live_buffers: u64,
        pub live_bytes: u64,
        pub driver_capacity: Option<u64>,
    }

    impl SlabStorage for HostStorage {
        type Buffer = u64;
        fn create(&mut self, bytes: u64) -> Result<u64, SlabError> {
            if self
                .driver_capacity
                .is_some_and(|cap| self.live_bytes + bytes > cap)
            {
                return Err(SlabError::OutOfMemory);
            }
            self.live_buffers += 1;
            self.live_bytes += bytes;
            Ok(bytes)
        }
        fn destroy(&mut self, bytes: u64) {
            self.live_buffers -= 1;
            self.live_bytes -= bytes;
        }
    }

    fn config(limit: Option<u64>) -> PoolConfig {
        PoolConfig {
            slab_bytes: 1 << 20,
            alignment: 256,
            max_buffer_bytes: 1 << 30,
            limit,
        }
    }

    #[test]
    fn small_requests_share_a_slab_and_large_ones_get_their_own() {
        let mut pool = Pool::new(HostStorage::default(), config(None));
        let a = pool.allocate(10).unwrap();
        let b = pool.allocate(300).unwrap();
        assert_eq!(a.slab, b.slab);
        assert_eq!((a.bytes, b.bytes), (256, 512));
        let big = pool.allocate(3 << 20).unwrap();
        assert_ne!(big.slab, a.slab);
        assert_eq!(pool.stats().slabs, 2);
        assert_eq!(pool.free(big), Some(1));
        assert_eq!(
            pool.stats().slabs,
            1,
            "a dedicated slab leaves with its tensor"
        );
        assert_eq!(pool.storage.live_bytes, 1 << 20);
        pool.free(a);
        pool.free(b);
        assert_eq!(pool.stats().in_use, 0);
    }

    #[test]
    fn the_cap_refuses_with_figures_and_freeing_makes_room() {
        let mut pool = Pool::new(HostStorage::default(), config(Some(2 << 20)));
        let first = pool.allocate(1 << 20).unwrap();
        let second = pool.allocate(1 << 20).unwrap();
        match pool.allocate(1 << 20) {
            Err(Error::OutOfMemory {
                requested,
                in_use,
                limit,
                ..
            }) => {
                assert_eq!(
                    (requested, in_use, limit),
                    (1 << 20, 2 << 20, Some(2 << 20))
                );
            }
            other => panic!("expected OutOfMemory, got {other:?}"),
        }
        pool.free(first);
        let again = pool.allocate(1 << 20).unwrap();
        pool.free(again);
        pool.free(second);
    }

    #[test]
    fn a_full_driver_is_out_of_memory_not_a_panic() {
        let storage = HostStorage {
            driver_capacity: Some(1 << 20),
            ..HostStorage::default()
        };
        let mut pool = Pool::new(storage, config(None));
        let kept = pool.allocate(1 << 20).unwrap();
        match pool.allocate(300) {
            Err(Error::OutOfMemory {
                requested,
                in_use,
                reserved,
                limit,
                by_driver,
            }) => assert_eq!(
                (requested, in_use, reserved, limit, by_driver),
                (300, 1 << 20, 1 << 20, None, true),
                "the pool's own figures and the caller's request, not the slab's"
            ),
            other => panic!("expected OutOfMemory, got {other:?}"),
        }
        pool.free(kept);
        assert!(pool.allocate(256).is_ok());
    }

    #[test]
    fn a_full_driver_gets_the_empty_slabs_back_before_the_request_is_refused() {
        let storage = HostStorage {
            driver_capacity: Some(3 << 20),
            ..HostStorage::default()
        };
        let mut pool = Pool::new(storage, config(None));
        let shared = pool.allocate(256).unwrap();
        pool.free(shared);
        // An empty 1 MiB shared slab stays reserved; a 3 MiB dedicated slab only fits once it is gone.
        let big = pool
            .allocate(3 << 20)
            .expect("the empty slab makes room for the dedicated one");
        assert_eq!(pool.stats().slabs, 1);
        pool.free(big);
    }

    #[test]
    fn trim_returns_empty_slabs() {
        let mut pool = Pool::new(HostStorage::default(), config(None));
        let allocations: Vec<_> = (0..8).map(|_| pool.allocate(300 << 10).unwrap()).collect();
        assert!(pool.stats().slabs >= 3);
        for allocation in allocations {
            pool.free(allocation);
        }
        let reserved = pool.stats().reserved;
        assert!(reserved > 0);
        pool.trim();
        assert_eq!(pool.stats().reserved, 0);
        assert_eq!(pool.storage.live_buffers, 0);
        assert_eq!(pool.stats().peak_reserved, reserved);
        pool.reset_peak();
        assert_eq!(pool.stats().peak_reserved, 0);
    }

    #[test]
    fn reserving_up_front_covers_the_limit_exactly() {
        let mut pool = Pool::new(HostStorage::default(), config(Some((5 << 19) + 256)));
        pool.reserve_up_to_limit().unwrap();
        assert_eq!(pool.stats().reserved, (5 << 19) + 256);
        let slabs = pool.stats().slabs;
        let a = pool.allocate(1 << 20).unwrap();
        assert_eq!(
            pool.stats().slabs,
            slabs,
            "reserved slabs are used, not new ones"
        );
        pool.free(a);
    }

    #[test]
    fn a_request_over_the_buffer_limit_is_too_big_not_out_of_memory() {
        let mut pool = Pool::new(HostStorage::default(), config(None));
        assert!(matches!(
            pool.allocate(2 << 30),
            Err(Error::BufferTooBig { .. })
        ));
    }

    #[derive(Debug, Clone)]
    enum Step {
        Allocate(u64),
        Free(usize),
        Trim,
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            4 => (1u64..(3 << 20)).prop_map(Step::Allocate),
            1 => (1u64..4096).prop_map(Step::Allocate),
            4 => any::<usize>().prop_map(Step::Free),
            1 => Just(Step::Trim),
        ]
    }

    proptest! {
        #[test]
        fn live_ranges_never_overlap_and_stats_add_up(
            steps in proptest::collection::vec(step(), 1..200),
            limit in proptest::option::of((1u64 << 20)..(16 << 20)),
        ) {
            let mut pool = Pool::new(HostStorage::default(), config(limit));
            let mut live: Vec<Allocation> = Vec::new();
            for step in steps {
                match step {
                    Step::Allocate(bytes) => match pool.allocate(bytes) {
                        Ok(allocation) => {
                            prop_assert!(allocation.bytes >= bytes);
                            prop_assert_eq!(allocation.offset % 256, 0);
                            live.push(allocation);
                        }
                        Err(Error::OutOfMemory { .. }) => {
                            prop_assert!(limit.is_some(), "no limit, yet out of memory");
                        }
                        Err(other) => prop_assert!(false, "unexpected error {other}"),
                    },
                    Step::Free(index) if !live.is_empty() => {
                        let allocation = live.swap_remove(index % live.len());
                        pool.free(allocation);
                    }
                    Step::Free(_) => {}
                    Step::Trim => { pool.trim(); }
                }
                let stats = pool.stats();
                prop_assert_eq!(stats.in_use, live.iter().map(|a| a.bytes).sum::<u64>());
                prop_assert_eq!(stats.allocations, live.len() as u64);
                prop_assert_eq!(stats.reserved, pool.storage.live_bytes);
                prop_assert_eq!(stats.slabs, pool.storage.live_buffers);
                prop_assert!(stats.in_use <= stats.reserved);
                if let Some(limit) = limit {
                    prop_assert!(stats.reserved <= limit, "reserved {} over limit {}", stats.reserved, limit);
                }
                let mut ranges: Vec<(SlabId, u64, u64)> =
                    live.iter().map(|a| (a.slab, a.offset, a.offset + a.bytes)).collect();
                ranges.sort();
                for pair in ranges.windows(2) {
                    prop_assert!(pair[0].0 != pair[1].0 || pair[0].2 <= pair[1].1, "overlap {:?}", pair);
                }
                for (slab, _, end) in &ranges {
                    prop_assert!(*end <= pool.slabs[slab].bytes);
                }
            }
            for allocation in live.drain(..) {
                pool.free(allocation);
            }
            prop_assert_eq!(pool.stats().in_use, 0);
            prop_assert_eq!(pool.stats().allocations, 0);
        }
    }
}
