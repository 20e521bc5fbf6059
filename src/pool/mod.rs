//! The per-session memory pool: carves small tensors out of shared slabs and gives each large one a buffer of
//! its own, enforces the session's cap on the working set, keeps the statistics, and gives idle buffers back.
//!
//! Policy (which range, which slab, whether the cap allows it) lives here; storage (creating and destroying the
//! buffers themselves) sits behind the crate-private `SlabStorage` trait, so the whole policy is tested on a CPU
//! stand-in without a GPU. Ranges within a slab are handed out best-fit by exact size (`ranges`), at multiples
//! of the adapter's storage offset alignment.
//!
//! What a cap means: the free space inside the pool's buffers is bounded, so a request is refused only when the
//! live bytes plus the request come within a tenth of the cap; below that it always succeeds (empty buffers are
//! given back first if need be). The bound comes from three rules:
//! - large requests (over a quarter of a shared slab) get buffers of their own, cut to their size, so they never
//!   strand free space; a freed one is kept to serve the next request of its size (within 1/32: a training step
//!   asks for the same sizes each time) until it stays unused through a whole batch;
//! - shared slabs are small beside the cap (a 32nd of it, at most 2 MiB), and under a cap they hold at most a
//!   16th of it in all: past that a small tensor too gets a buffer of its own;
//! - so the free space inside buffers that hold tensors is at most a 16th of the cap plus a 32nd of the live
//!   bytes: under a tenth of the cap whenever the live bytes are under 90% of it.
//!
//! The pool never destroys a buffer on `free`: destroying is for `trim`, `retire_idle`, a lower cap and a request
//! that needs the room, and the runtime allows the last only when no recorded command can still use a buffer.

mod ranges;
#[cfg(test)]
pub(crate) mod tests;

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use ranges::FreeRanges;

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
    /// The largest a shared slab may be: no larger than the adapter's max storage binding, so that any range
    /// carved from it binds in one window. Slabs reserved up front have this size; slabs that grow with the
    /// work are smaller (see `Pool::shared_slab_bytes`).
    pub slab_bytes: u64,
    /// Every range starts at a multiple of this: 256 bytes, or the adapter's
    /// `min_storage_buffer_offset_alignment` if that is coarser (see `PORTABLE_ALIGNMENT`).
    pub alignment: u64,
    /// The adapter's largest single buffer.
    pub max_buffer_bytes: u64,
    /// The session's cap on the bytes its tensors hold, if any; the pool's buffers never exceed it either.
    pub limit: Option<u64>,
}

impl PoolConfig {
    /// The shape a session's pool takes on an adapter with these limits, before any cap.
    pub fn for_limits(limits: &wgpu::Limits) -> Self {
        let alignment =
            u64::from(limits.min_storage_buffer_offset_alignment).max(PORTABLE_ALIGNMENT);
        let slab_bytes = limits
            .max_storage_buffer_binding_size
            .min(limits.max_buffer_size)
            .min(MAX_RESERVED_SLAB_BYTES);
        Self {
            slab_bytes: slab_bytes - slab_bytes % alignment,
            alignment,
            max_buffer_bytes: limits.max_buffer_size,
            limit: None,
        }
    }
}

/// Ranges start at multiples of at least this: the coarsest offset alignment WebGPU lets an adapter demand, so
/// that a suspended session's layout is valid on whichever adapter it resumes on. It costs a small tensor at
/// most 252 bytes more than the adapter's own alignment would.
const PORTABLE_ALIGNMENT: u64 = 256;

/// Slabs reserved up front are as large as one storage binding allows (so that any range in them binds whole),
/// but no larger than this.
const MAX_RESERVED_SLAB_BYTES: u64 = 256 << 20;

/// Shared slabs that grow with the work are at most this large (PyTorch's small-block segments are 2 MiB too):
/// the free space a slab leaves is space no large request can use.
const MAX_SHARED_SLAB_BYTES: u64 = 2 << 20;
/// ... and at least this large, so that a tiny cap does not cut small tensors into a slab each.
const MIN_SHARED_SLAB_BYTES: u64 = 64 << 10;
/// Under a cap, shared slabs are at most this fraction of it.
const SHARED_SLABS_PER_CAP: u64 = 32;
/// A request over this fraction of a shared slab is large: it gets a buffer of its own.
const LARGE_FRACTION_OF_SLAB: u64 = 4;
/// Under a cap, shared slabs take at most this fraction of it in all.
const SHARED_BUDGET_PER_CAP: u64 = 16;
/// No range is larger than this (256 TiB, beyond any adapter), whatever an adapter claims, so that sums of
/// ranges and slabs stay far from overflowing.
const MAX_RANGE_BYTES: u64 = 1 << 48;
/// A kept buffer serves a request that it exceeds by at most this fraction of the request.
const REUSE_SLACK_FRACTION: u64 = 32;

/// A range of a slab, owned by one tensor (or one temporary).
pub(crate) struct Allocation {
    pub slab: SlabId,
    pub offset: u64,
    /// Bytes the range covers (the request rounded up to the alignment).
    pub bytes: u64,
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
    /// Made for one large request: holds one range at a time, and serves large requests of about its size.
    dedicated: bool,
    free: FreeRanges,
    /// Offset → bytes of every live range, so that a suspend can copy exactly what tensors hold.
    live: BTreeMap<u64, u64>,
    /// Empty at the last `retire_idle` and unused since: the next one destroys it.
    idle: bool,
}

impl<B> Slab<B> {
    fn new(buffer: B, bytes: u64, dedicated: bool) -> Self {
        Slab {
            buffer,
            bytes,
            dedicated,
            free: FreeRanges::new(bytes),
            live: BTreeMap::new(),
            idle: false,
        }
    }

    /// The slab's buffer, and its layout around `buffer` instead.
    fn replace_buffer<C>(self, buffer: C) -> (B, Slab<C>) {
        let slab = Slab {
            buffer,
            bytes: self.bytes,
            dedicated: self.dedicated,
            free: self.free,
            live: self.live,
            idle: self.idle,
        };
        (self.buffer, slab)
    }

    fn with_buffer<C>(self, buffer: C) -> Slab<C> {
        self.replace_buffer(buffer).1
    }

    /// The buffer, and the slab's layout without it.
    fn split(self) -> (B, Slab<()>) {
        self.replace_buffer(())
    }

    fn is_empty(&self) -> bool {
        self.live.is_empty()
    }
}

/// The host-side figures of a pool, kept across a suspend.
#[derive(Clone, Copy, Default)]
struct Counters {
    in_use: u64,
    reserved: u64,
    peak_in_use: u64,
    peak_reserved: u64,
    fragmentation_at_peak: u64,
    total_allocations: u64,
}

/// The pool's figures, as `Session::memory_stats` reports them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct MemoryStats {
    /// Bytes held by live tensors (each rounded up to the alignment): the working set the cap bounds.
    pub in_use: u64,
    /// Bytes of GPU buffers the pool holds, used or not.
    pub reserved: u64,
    /// The most bytes live tensors held at once (since open or `reset_peak`).
    pub peak_in_use: u64,
    /// The most bytes of buffers the pool held at once; above `peak_in_use` by the free space inside buffers
    /// and the emptied buffers kept for reuse.
    pub peak_reserved: u64,
    /// At the moment `peak_in_use` was reached: the free bytes inside buffers that held live tensors, which no
    /// request larger than their gaps could use (emptied buffers kept for reuse are not counted).
    pub fragmentation_at_peak: u64,
    /// Live allocations.
    pub allocations: u64,
    /// Allocations made since the session opened.
    pub total_allocations: u64,
    pub slabs: u64,
    /// The largest request that would succeed without a new buffer.
    pub largest_free_range: u64,
    /// The session's cap, if any.
    pub limit: Option<u64>,
}

pub(crate) struct Pool<S: SlabStorage> {
    storage: S,
    config: PoolConfig,
    slabs: BTreeMap<SlabId, Slab<S::Buffer>>,
    next_slab: SlabId,
    counters: Counters,
    /// Set once the cap was reserved up front: every request is carved from those slabs first.
    reserved_up_front: bool,
    /// Slabs destroyed since the owner last asked (`take_released`), so that caches over them can forget them:
    /// every method that destroys a slab records it here.
    released: Vec<SlabId>,
}

impl<S: SlabStorage> Pool<S> {
    pub fn new(storage: S, config: PoolConfig) -> Self {
        Self {
            storage,
            config,
            slabs: BTreeMap::new(),
            next_slab: 0,
            counters: Counters::default(),
            reserved_up_front: false,
            released: Vec::new(),
        }
    }

    /// The buffer behind a slab, if the slab still exists.
    pub fn buffer(&self, slab: SlabId) -> Option<&S::Buffer> {
        self.slabs.get(&slab).map(|slab| &slab.buffer)
    }

    /// The ids of slabs destroyed since the last call.
    pub fn take_released(&mut self) -> Vec<SlabId> {
        std::mem::take(&mut self.released)
    }

    fn out_of_memory(&self, requested: u64) -> Error {
        self.refusal(requested, false)
    }

    fn refusal(&self, requested: u64, by_driver: bool) -> Error {
        Error::OutOfMemory {
            requested,
            in_use: self.counters.in_use,
            reserved: self.counters.reserved,
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
        self.reserved_up_front = true;
        while self
            .counters
            .reserved
            .checked_add(self.config.alignment)
            .is_some_and(|reserved| reserved <= limit)
        {
            let bytes = self.config.slab_bytes.min(limit - self.counters.reserved);
            let bytes = bytes - bytes % self.config.alignment;
            self.add_slab(bytes, false, bytes)
                .map_err(|error| self.slab_error(error, bytes))?;
        }
        Ok(())
    }

    /// The size of a new shared slab: small beside the cap, so that the space it strands stays small.
    fn shared_slab_bytes(&self) -> u64 {
        let by_cap = self
            .config
            .limit
            .map_or(MAX_SHARED_SLAB_BYTES, |limit| limit / SHARED_SLABS_PER_CAP);
        let bytes = by_cap
            .clamp(MIN_SHARED_SLAB_BYTES, MAX_SHARED_SLAB_BYTES)
            .min(self.config.slab_bytes);
        (bytes - bytes % self.config.alignment).max(self.config.alignment)
    }

    /// Creates a slab of `bytes` (the caller has checked the cap).
    fn add_slab(
        &mut self,
        bytes: u64,
        dedicated: bool,
        requested: u64,
    ) -> Result<SlabId, SlabError> {
        let Some(reserved) = self.counters.reserved.checked_add(bytes) else {
            return Err(SlabError::Other(self.out_of_memory(requested)));
        };
        let buffer = self.storage.create(bytes)?;
        let id = self.next_slab;
        self.next_slab += 1;
        self.slabs.insert(id, Slab::new(buffer, bytes, dedicated));
        self.counters.reserved = reserved;
        self.counters.peak_reserved = self.counters.peak_reserved.max(reserved);
        Ok(id)
    }

    fn slab_error(&self, error: SlabError, requested: u64) -> Error {
        match error {
            SlabError::OutOfMemory => self.refusal(requested, true),
            SlabError::Other(error) => error,
        }
    }

    /// A range of `aligned` bytes from slab `id`, if it has one free.
    fn take_from(&mut self, id: SlabId, aligned: u64) -> Option<Allocation> {
        let slab = self.slabs.get_mut(&id)?;
        let offset = slab.free.allocate(aligned)?;
        slab.live.insert(offset, aligned);
        slab.idle = false;
        // No overflow: every live range lies within a slab, so in_use stays at most reserved, which `add_slab`
        // keeps within u64.
        self.counters.in_use += aligned;
        if self.counters.in_use > self.counters.peak_in_use {
            self.counters.peak_in_use = self.counters.in_use;
            self.counters.fragmentation_at_peak = self.fragmentation();
        }
        self.counters.total_allocations += 1;
        Some(Allocation {
            slab: id,
            offset,
            bytes: aligned,
        })
    }

    /// Free bytes inside slabs that hold live ranges.
    fn fragmentation(&self) -> u64 {
        self.slabs
            .values()
            .filter(|slab| !slab.is_empty())
            .map(|slab| slab.free.total())
            .sum()
    }

    /// Bytes the cap leaves for new slabs (all of them without a cap), at the alignment.
    fn room(&self) -> u64 {
        self.config.limit.map_or(u64::MAX, |limit| {
            let room = limit.saturating_sub(self.counters.reserved);
            room - room % self.config.alignment
        })
    }

    /// The shared slab whose best-fitting free range for `aligned` bytes is the smallest.
    fn best_shared(&self, aligned: u64) -> Option<SlabId> {
        self.slabs
            .iter()
            .filter(|(_, slab)| !slab.dedicated)
            .filter_map(|(&id, slab)| Some((slab.free.best_fit(aligned)?, id)))
            .min()
            .map(|(_, id)| id)
    }

    /// The smallest empty dedicated slab of `min..=max` bytes.
    fn empty_dedicated(&self, min: u64, max: u64) -> Option<SlabId> {
        self.slabs
            .iter()
            .filter(|(_, slab)| slab.dedicated && slab.is_empty())
            .filter(|(_, slab)| (min..=max).contains(&slab.bytes))
            .map(|(&id, slab)| (slab.bytes, id))
            .min()
            .map(|(_, id)| id)
    }

    /// Whether any slab is empty: a request refused without `may_release` might succeed with it.
    pub fn has_empty_slabs(&self) -> bool {
        self.slabs.values().any(Slab::is_empty)
    }

    /// Changes the cap. Empty slabs are given back if that makes room; if the slabs still reserved exceed the
    /// new cap, it is refused and the old one stays.
    pub fn set_limit(&mut self, limit: Option<u64>) -> Result<()> {
        if let Some(limit) = limit {
            if self.counters.reserved > limit {
                self.release_empty_slabs();
            }
            if self.counters.reserved > limit {
                return Err(Error::OutOfMemory {
                    requested: self.counters.reserved,
                    in_use: self.counters.in_use,
                    reserved: self.counters.reserved,
                    limit: Some(limit),
                    by_driver: false,
                });
            }
        }
        self.config.limit = limit;
        Ok(())
    }

    /// The aligned size of a request of `bytes`, or the error `allocate` would give for it without looking
    /// for room: larger than any buffer can be, or over the cap with what is in use. Nothing is allocated, so a
    /// caller can refuse a request before the work of preparing its contents.
    pub fn check_request(&self, bytes: u64) -> Result<u64> {
        // Checked first, so that a request no buffer can ever hold is reported as such, not as out of memory.
        let largest = self.config.max_buffer_bytes.min(MAX_RANGE_BYTES);
        // A request near u64::MAX rounded up to the alignment would wrap to a tiny range.
        let Some(aligned) = bytes
            .max(1)
            .div_ceil(self.config.alignment)
            .checked_mul(self.config.alignment)
            .filter(|&aligned| aligned <= largest)
        else {
            return Err(Error::BufferTooBig {
                requested: bytes,
                max: largest,
            });
        };
        if let Some(limit) = self.config.limit {
            if self
                .counters
                .in_use
                .checked_add(aligned)
                .is_none_or(|in_use| in_use > limit)
            {
                return Err(self.out_of_memory(bytes));
            }
        }
        Ok(aligned)
    }

    /// Hands out an aligned range of at least `bytes`. With `may_release`, empty slabs are given back when that
    /// is the only way to make room; without it (recorded commands may still use them), such a request is
    /// refused, and `has_empty_slabs` tells the caller whether it might succeed once it may.
    pub fn allocate(&mut self, bytes: u64, may_release: bool) -> Result<Allocation> {
        let aligned = self.check_request(bytes)?;
        let retry = match self.place(bytes, aligned) {
            Ok(Some(allocation)) => return Ok(allocation),
            Ok(None) => None,
            Err(SlabError::OutOfMemory) => Some(self.refusal(bytes, true)),
            Err(SlabError::Other(error)) => return Err(error),
        };
        if may_release && self.has_empty_slabs() {
            self.release_empty_slabs();
            match self.place(bytes, aligned) {
                Ok(Some(allocation)) => return Ok(allocation),
                Ok(None) => {}
                Err(error) => return Err(self.slab_error(error, bytes)),
            }
        } else if let Some(refused_by_driver) = retry {
            return Err(refused_by_driver);
        }
        Err(self.out_of_memory(bytes))
    }

    /// Finds or makes a range for `aligned` bytes without destroying anything: `None` when the cap leaves no
    /// room for it.
    fn place(&mut self, bytes: u64, aligned: u64) -> Result<Option<Allocation>, SlabError> {
        let shared_slab = self.shared_slab_bytes();
        let large = aligned > self.config.slab_bytes
            || (!self.reserved_up_front && aligned > shared_slab / LARGE_FRACTION_OF_SLAB);
        if !large {
            if let Some(id) = self.best_shared(aligned) {
                return Ok(self.take_from(id, aligned));
            }
            if self.shared_reserved() + shared_slab <= self.shared_budget()
                && shared_slab <= self.room()
            {
                let id = self.add_slab(shared_slab, false, bytes)?;
                return Ok(self.take_from(id, aligned));
            }
        }
        // A buffer of its own: a kept one of about its size, else a new one cut to it while the cap has room.
        let slack = aligned / REUSE_SLACK_FRACTION;
        if let Some(id) = self.empty_dedicated(aligned, aligned.saturating_add(slack)) {
            return Ok(self.take_from(id, aligned));
        }
        if aligned <= self.room() {
            let id = self.add_slab(aligned, true, bytes)?;
            return Ok(self.take_from(id, aligned));
        }
        // Under pressure a large request takes a shared slab's free range too (a slab cut at a resume has one).
        Ok(self
            .best_shared(aligned)
            .and_then(|id| self.take_from(id, aligned)))
    }

    /// Bytes of shared slabs.
    fn shared_reserved(&self) -> u64 {
        self.slabs
            .values()
            .filter(|slab| !slab.dedicated)
            .map(|slab| slab.bytes)
            .sum()
    }

    /// How many bytes of shared slabs a cap allows (without a cap, any): beyond them a small tensor gets a
    /// buffer of its own, so that the free space shared slabs strand stays a small part of the cap.
    fn shared_budget(&self) -> u64 {
        self.config.limit.map_or(u64::MAX, |limit| {
            (limit / SHARED_BUDGET_PER_CAP).max(self.shared_slab_bytes())
        })
    }

    /// Returns a range. The slab stays, even when emptied: destroying is `trim`'s, `retire_idle`'s and a
    /// request's that needs the room.
    pub fn free(&mut self, allocation: Allocation) {
        free_range(&mut self.slabs, &mut self.counters, allocation);
    }

    fn remove_slab(&mut self, id: SlabId) {
        if let Some(slab) = self.slabs.remove(&id) {
            self.counters.reserved -= slab.bytes;
            self.storage.destroy(slab.buffer);
            self.released.push(id);
        }
    }

    fn release_empty_slabs(&mut self) {
        let empty: Vec<SlabId> = self
            .slabs
            .iter()
            .filter(|(_, slab)| slab.is_empty())
            .map(|(id, _)| *id)
            .collect();
        for id in empty {
            self.remove_slab(id);
        }
    }

    /// Called after each submission: destroys the slabs that were already empty at the last call and have not
    /// been used since, and marks the ones empty now. A buffer kept for reuse lives through one whole batch.
    pub fn retire_idle(&mut self) {
        let mut idle = Vec::new();
        for (&id, slab) in &mut self.slabs {
            if !slab.is_empty() {
                slab.idle = false;
            } else if slab.idle {
                idle.push(id);
            } else {
                slab.idle = true;
            }
        }
        for id in idle {
            self.remove_slab(id);
        }
    }

    /// The live ranges of each slab, in slab and offset order: (slab, offset, bytes).
    pub fn live_ranges(&self) -> impl Iterator<Item = (SlabId, u64, u64)> + '_ {
        live_ranges(&self.slabs)
    }

    /// The size of a slab's buffer, if the slab exists.
    pub fn slab_bytes(&self, slab: SlabId) -> Option<u64> {
        self.slabs.get(&slab).map(|slab| slab.bytes)
    }

    /// Destroys every empty slab.
    pub fn trim(&mut self) {
        self.release_empty_slabs();
    }

    /// Destroys every slab, live or not: the session is closing.
    pub fn destroy_all(&mut self) {
        let ids: Vec<SlabId> = self.slabs.keys().copied().collect();
        for id in ids {
            self.remove_slab(id);
        }
        self.released.clear();
        self.counters.in_use = 0;
    }

    pub fn reset_peak(&mut self) {
        self.counters.peak_in_use = self.counters.in_use;
        self.counters.peak_reserved = self.counters.reserved;
        self.counters.fragmentation_at_peak = self.fragmentation();
    }

    pub fn stats(&self) -> MemoryStats {
        let largest_free_range = self
            .slabs
            .values()
            .map(|slab| match slab.dedicated {
                true if slab.is_empty() => slab.bytes,
                true => 0,
                false => slab.free.largest(),
            })
            .max()
            .unwrap_or(0);
        MemoryStats {
            in_use: self.counters.in_use,
            reserved: self.counters.reserved,
            peak_in_use: self.counters.peak_in_use,
            peak_reserved: self.counters.peak_reserved,
            fragmentation_at_peak: self.counters.fragmentation_at_peak,
            allocations: self.slabs.values().map(|slab| slab.live.len() as u64).sum(),
            total_allocations: self.counters.total_allocations,
            slabs: self.slabs.len() as u64,
            largest_free_range,
            limit: self.config.limit,
        }
    }
}

fn live_ranges<B>(
    slabs: &BTreeMap<SlabId, Slab<B>>,
) -> impl Iterator<Item = (SlabId, u64, u64)> + '_ {
    slabs.iter().flat_map(|(&id, slab)| {
        slab.live
            .iter()
            .map(move |(&offset, &bytes)| (id, offset, bytes))
    })
}

/// Where a slab's last live range ends.
fn high_water<B>(slab: &Slab<B>) -> u64 {
    slab.live
        .last_key_value()
        .map_or(0, |(offset, bytes)| offset + bytes)
}

/// Returns a range to its slab and the counters; false if the slab is gone.
fn free_range<B>(
    slabs: &mut BTreeMap<SlabId, Slab<B>>,
    counters: &mut Counters,
    allocation: Allocation,
) -> bool {
    let Some(slab) = slabs.get_mut(&allocation.slab) else {
        return false;
    };
    if slab.live.remove(&allocation.offset).is_none() {
        return false;
    }
    slab.free.free(allocation.offset, allocation.bytes);
    counters.in_use -= allocation.bytes;
    true
}

/// A pool whose storage is gone: every slab's size and free ranges, kept on the host while a session is
/// suspended. Restored onto new storage, its slabs get the same ids, sizes and ranges, so every `Allocation`
/// (and so every tensor handle) is valid again without being told.
pub(crate) struct PoolLayout {
    config: PoolConfig,
    slabs: BTreeMap<SlabId, Slab<()>>,
    next_slab: SlabId,
    counters: Counters,
    reserved_up_front: bool,
}

impl PoolLayout {
    /// The size a slab will have when restored, if it is still needed.
    pub fn slab_bytes(&self, slab: SlabId) -> Option<u64> {
        self.slabs.get(&slab).map(|slab| slab.bytes)
    }

    /// Cuts every slab to end with its last live range, so that a restore reserves only what tensors hold; a
    /// cut slab serves new ranges below its cut only.
    fn cut(&mut self) {
        for slab in self.slabs.values_mut() {
            let end = high_water(slab);
            self.counters.reserved -= slab.bytes - end;
            slab.bytes = end;
            slab.free.truncate(end);
        }
    }

    pub fn allocations(&self) -> u64 {
        self.slabs.values().map(|slab| slab.live.len() as u64).sum()
    }

    /// Returns a range freed while suspended; a slab left empty will not be recreated.
    pub fn free(&mut self, allocation: Allocation) {
        let id = allocation.slab;
        if !free_range(&mut self.slabs, &mut self.counters, allocation) {
            return;
        }
        let Some(slab) = self.slabs.get_mut(&id) else {
            return;
        };
        if slab.is_empty() {
            self.counters.reserved -= slab.bytes;
            self.slabs.remove(&id);
        }
    }
}

impl<S: SlabStorage> Pool<S> {
    /// Gives every slab back to storage, keeping the layout of their ranges on the host. Empty slabs are
    /// dropped from the layout, since nothing needs them back.
    pub fn detach(&mut self) -> PoolLayout {
        self.release_empty_slabs();
        self.released.clear();
        let mut slabs = BTreeMap::new();
        for (id, slab) in std::mem::take(&mut self.slabs) {
            let (buffer, layout) = slab.split();
            self.storage.destroy(buffer);
            slabs.insert(id, layout);
        }
        let layout = PoolLayout {
            config: self.config,
            slabs,
            next_slab: self.next_slab,
            counters: self.counters,
            reserved_up_front: self.reserved_up_front,
        };
        self.counters.in_use = 0;
        self.counters.reserved = 0;
        layout
    }

    /// A pool on `storage` with `layout`'s slabs recreated, under the limits of `fresh` (the new adapter's
    /// config and cap): as they were, or, when that would not fit under the cap or the adapter's largest
    /// buffer, each cut to end with its last live range. A cut shared slab goes on serving new ranges below its
    /// cut. On failure nothing is kept on the storage and the layout comes back, perhaps cut.
    #[allow(clippy::result_large_err)] // once per resume; the layout must come back whole on failure
    pub fn restore(
        mut storage: S,
        layout: PoolLayout,
        fresh: PoolConfig,
    ) -> std::result::Result<Self, (Error, PoolLayout)> {
        let alignment = layout.config.alignment;
        if !alignment.is_multiple_of(fresh.alignment) {
            let error = Error::InvalidArgument {
                what: "adapter to resume on",
                given: format!(
                    "one that aligns storage ranges to {} bytes",
                    fresh.alignment
                ),
                expected: format!(
                    "an adapter whose alignment divides {alignment} bytes, the session's layout"
                ),
            };
            return Err((error, layout));
        }
        let mut layout = layout;
        let largest = layout.slabs.values().map(|slab| slab.bytes).max();
        if fresh
            .limit
            .is_some_and(|limit| layout.counters.reserved > limit)
            || largest.is_some_and(|largest| largest > fresh.max_buffer_bytes)
        {
            layout.cut();
        }
        if let Some(largest) = layout.slabs.values().map(|slab| slab.bytes).max() {
            if largest > fresh.max_buffer_bytes {
                let error = Error::BufferTooBig {
                    requested: largest,
                    max: fresh.max_buffer_bytes,
                };
                return Err((error, layout));
            }
        }
        if fresh
            .limit
            .is_some_and(|limit| layout.counters.reserved > limit)
        {
            let error = Error::OutOfMemory {
                requested: layout.counters.reserved,
                in_use: 0,
                reserved: 0,
                limit: fresh.limit,
                by_driver: false,
            };
            return Err((error, layout));
        }
        let PoolLayout {
            config: saved_config,
            slabs: saved,
            next_slab,
            counters,
            reserved_up_front,
        } = layout;
        let mut slabs = BTreeMap::new();
        let mut failure = None;
        let mut pending = saved.into_iter();
        for (id, slab) in pending.by_ref() {
            match storage.create(slab.bytes) {
                Ok(buffer) => {
                    slabs.insert(id, slab.with_buffer(buffer));
                }
                Err(error) => {
                    failure = Some((id, slab, error));
                    break;
                }
            }
        }
        let config = PoolConfig {
            slab_bytes: fresh.slab_bytes - fresh.slab_bytes % alignment,
            alignment,
            ..fresh
        };
        let Some((failed_id, failed_slab, error)) = failure else {
            return Ok(Pool {
                storage,
                config,
                slabs,
                next_slab,
                counters,
                reserved_up_front,
                released: Vec::new(),
            });
        };
        let error = match error {
            SlabError::OutOfMemory => Error::OutOfMemory {
                requested: counters.reserved,
                in_use: 0,
                reserved: 0,
                limit: fresh.limit,
                by_driver: true,
            },
            SlabError::Other(error) => error,
        };
        let mut kept = BTreeMap::new();
        for (id, slab) in slabs {
            let (buffer, layout) = slab.split();
            storage.destroy(buffer);
            kept.insert(id, layout);
        }
        kept.insert(failed_id, failed_slab);
        kept.extend(pending);
        Err((
            error,
            PoolLayout {
                config: saved_config,
                slabs: kept,
                next_slab,
                counters,
                reserved_up_front,
            },
        ))
    }
}
