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
    /// Every range starts at a multiple of this: 256 bytes, or the adapter's
    /// `min_storage_buffer_offset_alignment` if that is coarser (see `PORTABLE_ALIGNMENT`).
    pub alignment: u64,
    /// The adapter's largest single buffer.
    pub max_buffer_bytes: u64,
    /// The session's cap on reserved bytes, if any.
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
            .min(MAX_SHARED_SLAB_BYTES);
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
    /// Offset → bytes of every live range, so that a suspend can copy exactly what tensors hold.
    live: BTreeMap<u64, u64>,
    /// Where the allocator's ranges stop being backed by the buffer: at its end, unless the slab was cut at a
    /// suspend; then the ranges from the cut on are held by `fences` so that they are never handed out.
    fenced_from: u64,
    fences: Vec<offset_allocator::Allocation>,
}

impl<B> Slab<B> {
    /// The slab's buffer, and its layout around `buffer` instead.
    fn replace_buffer<C>(self, buffer: C) -> (B, Slab<C>) {
        let slab = Slab {
            buffer,
            bytes: self.bytes,
            dedicated: self.dedicated,
            ranges: self.ranges,
            live: self.live,
            fenced_from: self.fenced_from,
            fences: self.fences,
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
}

/// The host-side figures of a pool, kept across a suspend.
#[derive(Clone, Copy, Default)]
struct Counters {
    in_use: u64,
    reserved: u64,
    peak_in_use: u64,
    peak_reserved: u64,
    total_allocations: u64,
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
    counters: Counters,
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
            counters: Counters::default(),
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
        while self
            .counters
            .reserved
            .checked_add(self.config.alignment)
            .is_some_and(|reserved| reserved <= limit)
        {
            let bytes = self.config.slab_bytes.min(limit - self.counters.reserved);
            let bytes = bytes - bytes % self.config.alignment;
            self.add_slab(bytes, false, bytes)?;
        }
        Ok(())
    }

    /// Creates a slab of `bytes` for a request of `requested` bytes. When the driver is out of memory, empty
    /// slabs are given back and the creation is tried once more before the request is refused.
    fn add_slab(&mut self, bytes: u64, dedicated: bool, requested: u64) -> Result<SlabId> {
        if self.counters.reserved.checked_add(bytes).is_none() {
            return Err(self.out_of_memory(requested));
        }
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
                live: BTreeMap::new(),
                fenced_from: bytes,
                fences: Vec::new(),
            },
        );
        self.counters.reserved += bytes;
        self.counters.peak_reserved = self.counters.peak_reserved.max(self.counters.reserved);
        Ok(id)
    }

    fn slab_error(&self, error: SlabError, requested: u64) -> Error {
        match error {
            SlabError::OutOfMemory => self.refusal(requested, true),
            SlabError::Other(error) => error,
        }
    }

    /// A range of `units` (`aligned` bytes, their product, which the caller has checked) from slab `id`.
    fn take_from(&mut self, id: SlabId, units: u64, aligned: u64) -> Option<Allocation> {
        let alignment = self.config.alignment;
        let slab = self.slabs.get_mut(&id)?;
        let handle = slab.ranges.allocate(units as u32)?;
        slab.live
            .insert(u64::from(handle.offset) * alignment, aligned);
        Some(self.account(id, handle, alignment, aligned))
    }

    fn account(
        &mut self,
        slab: SlabId,
        handle: offset_allocator::Allocation,
        alignment: u64,
        aligned: u64,
    ) -> Allocation {
        // No overflow: every live range lies within a slab, so in_use stays at most reserved, which `add_slab`
        // keeps within u64.
        self.counters.in_use += aligned;
        self.counters.peak_in_use = self.counters.peak_in_use.max(self.counters.in_use);
        self.counters.total_allocations += 1;
        Allocation {
            slab,
            offset: u64::from(handle.offset) * alignment,
            bytes: aligned,
            handle,
        }
    }

    fn fits_under_limit(&self, bytes: u64) -> bool {
        self.config.limit.is_none_or(|limit| {
            self.counters
                .reserved
                .checked_add(bytes)
                .is_some_and(|reserved| reserved <= limit)
        })
    }

    /// Changes the cap. Empty slabs are given back if that makes room; if the slabs still reserved exceed the
    /// new cap, it is refused and the old one stays. Returns the ids of slabs given back.
    pub fn set_limit(&mut self, limit: Option<u64>) -> Result<Vec<SlabId>> {
        let mut gone = Vec::new();
        if let Some(limit) = limit {
            if self.counters.reserved > limit {
                gone = self.release_empty_slabs();
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
        Ok(gone)
    }

    /// Hands out an aligned range of at least `bytes`.
    pub fn allocate(&mut self, bytes: u64) -> Result<Allocation> {
        let units = self.units(bytes);
        // Checked first, so that a request no buffer can ever hold is reported as such, not as out of memory.
        // The largest range: the adapter's largest buffer, or what one allocator counts if that is less.
        let largest = self
            .config
            .max_buffer_bytes
            .min(MAX_UNITS.saturating_mul(self.config.alignment));
        // A request near u64::MAX rounded up to the alignment would wrap to a tiny range.
        let Some(aligned) = units
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
        if aligned > self.config.slab_bytes {
            return self.allocate_dedicated(bytes, aligned, units);
        }
        let alignment = self.config.alignment;
        for (&id, slab) in self.slabs.iter_mut().filter(|(_, slab)| !slab.dedicated) {
            if let Some(handle) = slab.ranges.allocate(units as u32) {
                slab.live
                    .insert(u64::from(handle.offset) * alignment, aligned);
                return Ok(self.account(id, handle, alignment, aligned));
            }
        }
        // No room: a new shared slab, shrunk if the cap leaves less than a full one.
        let mut slab_bytes = self.config.slab_bytes;
        if let Some(limit) = self.config.limit {
            if !self.fits_under_limit(slab_bytes) {
                self.release_empty_slabs();
                let room = limit.saturating_sub(self.counters.reserved);
                slab_bytes = (room - room % self.config.alignment).min(slab_bytes);
                if slab_bytes < aligned {
                    return Err(self.out_of_memory(bytes));
                }
            }
        }
        let id = self.add_slab(slab_bytes, false, bytes)?;
        self.take_from(id, units, aligned)
            .ok_or_else(|| self.out_of_memory(bytes))
    }

    fn allocate_dedicated(&mut self, bytes: u64, aligned: u64, units: u64) -> Result<Allocation> {
        if !self.fits_under_limit(aligned) {
            self.release_empty_slabs();
            if !self.fits_under_limit(aligned) {
                return Err(self.out_of_memory(bytes));
            }
        }
        // `allocate` refused more units than one allocator counts.
        let id = self.add_slab(aligned, true, bytes)?;
        self.take_from(id, units, aligned)
            .ok_or_else(|| self.out_of_memory(bytes))
    }

    /// Returns a range. A dedicated slab goes back to the driver with it; its id is returned so that caches
    /// over it can forget it.
    pub fn free(&mut self, allocation: Allocation) -> Option<SlabId> {
        let slab = allocation.slab;
        if free_range(&mut self.slabs, &mut self.counters, allocation)? {
            self.remove_slab(slab);
            return Some(slab);
        }
        None
    }

    fn remove_slab(&mut self, id: SlabId) {
        if let Some(slab) = self.slabs.remove(&id) {
            self.counters.reserved -= slab.bytes;
            self.storage.destroy(slab.buffer);
        }
    }

    fn release_empty_slabs(&mut self) -> Vec<SlabId> {
        let empty: Vec<SlabId> = self
            .slabs
            .iter()
            .filter(|(_, slab)| slab.live.is_empty())
            .map(|(id, _)| *id)
            .collect();
        for id in &empty {
            self.remove_slab(*id);
        }
        empty
    }

    /// The live ranges of each slab, in slab and offset order: (slab, offset, bytes).
    pub fn live_ranges(&self) -> impl Iterator<Item = (SlabId, u64, u64)> + '_ {
        live_ranges(&self.slabs)
    }

    /// The size of a slab's buffer, if the slab exists.
    pub fn slab_bytes(&self, slab: SlabId) -> Option<u64> {
        self.slabs.get(&slab).map(|slab| slab.bytes)
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
        self.counters.in_use = 0;
    }

    pub fn reset_peak(&mut self) {
        self.counters.peak_in_use = self.counters.in_use;
        self.counters.peak_reserved = self.counters.reserved;
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
            in_use: self.counters.in_use,
            reserved: self.counters.reserved,
            peak_in_use: self.counters.peak_in_use,
            peak_reserved: self.counters.peak_reserved,
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

/// Makes sure the allocator of a cut shared slab never hands out a range past the buffer's end: the free
/// range from the cut to the allocator's end is taken by fences. The allocator bins sizes, so the fences are
/// requested in power-of-two pieces, which it places exactly; and it picks which free range serves a request,
/// so if a piece does not land where the fence goes, the slab serves no new ranges at all (as a dedicated one).
fn fence_off_past_the_end<B>(slab: &mut Slab<B>, alignment: u64) {
    if slab.dedicated || slab.bytes >= slab.fenced_from {
        return;
    }
    let mut placed = Vec::new();
    let mut at = slab.bytes;
    while at < slab.fenced_from {
        let remaining = (slab.fenced_from - at) / alignment;
        let piece = 1u64 << (63 - remaining.leading_zeros());
        match slab.ranges.allocate(piece as u32) {
            Some(fence) if u64::from(fence.offset) * alignment == at => {
                placed.push(fence);
                at += piece * alignment;
            }
            other => {
                if let Some(elsewhere) = other {
                    slab.ranges.free(elsewhere);
                }
                for fence in placed {
                    slab.ranges.free(fence);
                }
                slab.dedicated = true;
                return;
            }
        }
    }
    slab.fences.extend(placed);
    slab.fenced_from = slab.bytes;
}

/// Where a slab's last live range ends.
fn high_water<B>(slab: &Slab<B>) -> u64 {
    slab.live
        .last_key_value()
        .map_or(0, |(offset, bytes)| offset + bytes)
}

/// Returns a range to its slab's allocator and the counters. `Some(true)` when the slab is now unneeded: a
/// dedicated slab is made for one range only.
fn free_range<B>(
    slabs: &mut BTreeMap<SlabId, Slab<B>>,
    counters: &mut Counters,
    allocation: Allocation,
) -> Option<bool> {
    let slab = slabs.get_mut(&allocation.slab)?;
    slab.ranges.free(allocation.handle);
    slab.live.remove(&allocation.offset);
    counters.in_use -= allocation.bytes;
    Some(slab.dedicated && slab.live.is_empty())
}

/// A pool whose storage is gone: every slab's size and allocator, kept on the host while a session is
/// suspended. Restored onto new storage, its slabs get the same ids, sizes and ranges, so every `Allocation`
/// (and so every tensor handle) is valid again without being told.
pub(crate) struct PoolLayout {
    config: PoolConfig,
    slabs: BTreeMap<SlabId, Slab<()>>,
    next_slab: SlabId,
    counters: Counters,
}

impl PoolLayout {
    /// The size a slab will have when restored, if it is still needed.
    pub fn slab_bytes(&self, slab: SlabId) -> Option<u64> {
        self.slabs.get(&slab).map(|slab| slab.bytes)
    }

    /// Cuts every slab to end with its last live range, so that a restore reserves only what tensors hold.
    fn cut(&mut self) {
        for slab in self.slabs.values_mut() {
            let end = high_water(slab);
            self.counters.reserved -= slab.bytes - end;
            slab.bytes = end;
        }
    }

    pub fn allocations(&self) -> u64 {
        self.slabs.values().map(|slab| slab.live.len() as u64).sum()
    }

    /// Returns a range freed while suspended; a slab left empty will not be recreated.
    pub fn free(&mut self, allocation: Allocation) {
        let id = allocation.slab;
        if free_range(&mut self.slabs, &mut self.counters, allocation).is_none() {
            return;
        }
        let Some(slab) = self.slabs.get_mut(&id) else {
            return;
        };
        if slab.live.is_empty() {
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
        };
        self.counters.in_use = 0;
        self.counters.reserved = 0;
        layout
    }

    /// A pool on `storage` with `layout`'s slabs recreated, under the limits of `fresh` (the new adapter's
    /// config and cap): as they were, or, when that would not fit under the cap or the adapter's largest
    /// buffer, each cut to end with its last live range. A cut shared slab goes on serving new ranges below its
    /// cut; the allocator's ranges past it are fenced off. On failure nothing is kept on the storage and the
    /// layout comes back, perhaps cut.
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
            for slab in slabs.values_mut() {
                fence_off_past_the_end(slab, alignment);
            }
            return Ok(Pool {
                storage,
                config,
                slabs,
                next_slab,
                counters,
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
            },
        ))
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

    impl HostStorage {
        /// A driver that has room for `bytes` of slabs at once.
        fn full_at(bytes: u64) -> Self {
            HostStorage {
                driver_capacity: Some(bytes),
                ..HostStorage::default()
            }
        }
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
        let storage = HostStorage::full_at(1 << 20);
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
        let storage = HostStorage::full_at(3 << 20);
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

    #[test]
    fn a_request_near_u64_max_is_too_big_not_a_wrapped_small_range() {
        let unbounded_adapter = PoolConfig {
            max_buffer_bytes: u64::MAX,
            ..config(None)
        };
        for pool_config in [
            config(None),
            config(Some(u64::MAX)),
            unbounded_adapter,
            PoolConfig {
                limit: Some(u64::MAX),
                ..unbounded_adapter
            },
        ] {
            let mut pool = Pool::new(HostStorage::default(), pool_config);
            let kept = pool.allocate(300).unwrap();
            for bytes in [u64::MAX, u64::MAX - 3, 1 << 63, u64::MAX - 255] {
                match pool.allocate(bytes) {
                    Err(Error::BufferTooBig { requested, .. }) => {
                        assert_eq!(requested, bytes, "{pool_config:?}")
                    }
                    other => panic!("{bytes} under {pool_config:?}: {other:?}"),
                }
            }
            let stats = pool.stats();
            assert_eq!(
                (stats.in_use, stats.reserved, stats.allocations),
                (512, 1 << 20, 1),
                "{pool_config:?}: the refusals took nothing"
            );
            assert_eq!(pool.storage.live_bytes, 1 << 20);
            let another = pool.allocate(256).unwrap();
            assert_eq!(another.bytes, 256);
            pool.free(another);
            pool.free(kept);
        }
    }

    #[test]
    fn a_detached_pool_restores_with_the_same_ranges_and_figures() {
        let mut pool = Pool::new(HostStorage::default(), config(None));
        let kept: Vec<Allocation> = [10, 300, 3 << 20, 4096]
            .iter()
            .map(|&bytes| pool.allocate(bytes).unwrap())
            .collect();
        let dropped = pool.allocate(256).unwrap();
        pool.free(dropped);
        let before = pool.stats();
        let ranges: Vec<_> = pool.live_ranges().collect();

        let layout = pool.detach();
        assert_eq!(
            pool.storage.live_buffers, 0,
            "detach gives every buffer back"
        );
        assert_eq!(pool.storage.live_bytes, 0);
        assert_eq!(layout.allocations(), kept.len() as u64);

        let mut restored = match Pool::restore(HostStorage::default(), layout, config(None)) {
            Ok(pool) => pool,
            Err((error, _)) => panic!("restore failed: {error}"),
        };
        assert_eq!(restored.live_ranges().collect::<Vec<_>>(), ranges);
        assert_eq!(
            restored.stats(),
            before,
            "with room, the slabs come back as they were"
        );
        assert_eq!(restored.storage.live_bytes, before.reserved);
        for allocation in &kept {
            assert!(restored.buffer(allocation.slab).is_some());
        }
        // New ranges do not land on restored ones, and the restored ones free as before.
        let fresh = restored.allocate(300).unwrap();
        assert_eq!(
            fresh.slab, kept[0].slab,
            "the shared slab serves new ranges"
        );
        assert!(kept.iter().all(|old| old.slab != fresh.slab
            || old.offset + old.bytes <= fresh.offset
            || fresh.offset + fresh.bytes <= old.offset));
        restored.free(fresh);
        for allocation in kept {
            restored.free(allocation);
        }
        assert_eq!(restored.stats().in_use, 0);
        assert_eq!(
            restored.stats().slabs,
            1,
            "the dedicated slab left with its range"
        );
    }

    #[test]
    fn ranges_freed_while_detached_are_not_restored_and_empty_slabs_not_recreated() {
        let mut pool = Pool::new(HostStorage::default(), config(None));
        let small = pool.allocate(300).unwrap();
        let big = pool.allocate(3 << 20).unwrap();
        let mut layout = pool.detach();
        assert_eq!(layout.counters.reserved, (3 << 20) + (1 << 20));
        layout.free(big);
        assert_eq!(
            layout.counters.reserved,
            1 << 20,
            "the dedicated slab is not needed"
        );
        layout.free(small);
        assert_eq!(layout.allocations(), 0);
        assert_eq!(layout.counters.reserved, 0);
        let restored = match Pool::restore(HostStorage::default(), layout, config(None)) {
            Ok(pool) => pool,
            Err((error, _)) => panic!("restore failed: {error}"),
        };
        assert_eq!(restored.stats().reserved, 0);
        assert_eq!(restored.storage.live_buffers, 0);
    }

    #[test]
    fn a_restore_that_does_not_fit_gives_the_layout_back_and_keeps_nothing() {
        let mut pool = Pool::new(HostStorage::default(), config(None));
        let kept = [pool.allocate(300).unwrap(), pool.allocate(3 << 20).unwrap()];
        let layout = pool.detach();
        // The dedicated slab, and the shared one cut to its one range.
        let reserved = (3 << 20) + 512;

        let layout = match Pool::restore(HostStorage::default(), layout, config(Some(reserved - 1)))
        {
            Err((
                Error::OutOfMemory {
                    requested,
                    limit,
                    by_driver: false,
                    ..
                },
                layout,
            )) => {
                assert_eq!((requested, limit), (reserved, Some(reserved - 1)));
                layout
            }
            Err((other, _)) => panic!("expected OutOfMemory, got {other}"),
            Ok(_) => panic!("a cap below the layout was accepted"),
        };
        let full_driver = HostStorage::full_at(reserved - 1);
        let layout = match Pool::restore(full_driver, layout, config(None)) {
            Err((
                Error::OutOfMemory {
                    by_driver: true, ..
                },
                layout,
            )) => layout,
            Err((other, _)) => panic!("expected OutOfMemory by the driver, got {other}"),
            Ok(_) => panic!("a full driver was not noticed"),
        };
        let coarse = PoolConfig {
            alignment: 512,
            ..config(None)
        };
        let layout = match Pool::restore(HostStorage::default(), layout, coarse) {
            Err((Error::InvalidArgument { .. }, layout)) => layout,
            Err((other, _)) => panic!("expected an alignment refusal, got {other}"),
            Ok(_) => panic!("a layout was restored onto a coarser alignment"),
        };
        let mut restored =
            match Pool::restore(HostStorage::default(), layout, config(Some(reserved))) {
                Ok(pool) => pool,
                Err((error, _)) => panic!("restore with room failed: {error}"),
            };
        assert_eq!(restored.stats().allocations, 2);
        assert_eq!(restored.stats().limit, Some(reserved));
        for allocation in kept {
            restored.free(allocation);
        }
    }

    #[test]
    fn a_cut_slab_serves_new_ranges_below_its_cut_and_none_past_it() {
        let mut pool = Pool::new(HostStorage::default(), config(Some(1 << 20)));
        let a = pool.allocate(300 << 10).unwrap();
        let b = pool.allocate(300 << 10).unwrap();
        let c = pool.allocate(100 << 10).unwrap();
        pool.free(c);
        let layout = pool.detach();
        // The slab as it was (1 MiB) does not fit a 700 KiB cap; cut to its last range (600 KiB), it does.
        let cap = 700 << 10;
        let mut pool = match Pool::restore(HostStorage::default(), layout, config(Some(cap))) {
            Ok(pool) => pool,
            Err((error, _)) => panic!("restore failed: {error}"),
        };
        let cut = pool.stats().reserved;
        assert_eq!(cut, b.offset + b.bytes);
        assert_eq!(pool.storage.live_bytes, cut);
        assert!(
            !pool.slabs[&b.slab].dedicated && !pool.slabs[&b.slab].fences.is_empty(),
            "the cut slab stays shared, fenced past its cut"
        );
        pool.free(a);
        // (An exact fit may miss: the allocator bins sizes, rounding requests up and free ranges down.)
        let again = pool
            .allocate(200 << 10)
            .expect("the hole below the cut is reused under the cap");
        assert_eq!(
            (again.slab, again.offset),
            (b.slab, 0),
            "the new range lands in the hole"
        );
        // Past the cut there is only a new slab, never a range of the fenced-off part.
        let past = pool.allocate(90 << 10).unwrap();
        assert!(past.slab != b.slab || past.offset + past.bytes <= cut);
        assert!(matches!(
            pool.allocate(200 << 10),
            Err(Error::OutOfMemory { .. })
        ));
        for allocation in [again, past, b] {
            pool.free(allocation);
        }
    }

    #[test]
    fn a_lower_cap_gives_empty_slabs_back_or_is_refused() {
        let mut pool = Pool::new(HostStorage::default(), config(None));
        let kept = pool.allocate(300).unwrap();
        let emptied = pool.allocate(3 << 20).unwrap();
        let spare = pool.allocate(900 << 10).unwrap();
        pool.free(spare);
        pool.free(emptied);
        assert!(matches!(
            pool.set_limit(Some(1000)),
            Err(Error::OutOfMemory { .. })
        ));
        assert_eq!(pool.stats().limit, None, "a refused cap leaves the old one");
        assert!(pool.set_limit(Some(1 << 20)).is_ok());
        assert_eq!(pool.stats().limit, Some(1 << 20));
        assert!(matches!(
            pool.allocate(1 << 20),
            Err(Error::OutOfMemory { .. })
        ));
        pool.free(kept);
    }

    #[derive(Debug, Clone)]
    enum Step {
        Allocate(u64),
        Free(usize),
        Trim,
        /// Detach (a suspend), free some ranges while detached, restore (under a cap so tight that every slab
        /// must be cut, when asked).
        SuspendResume(usize, bool),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            4 => (1u64..(3 << 20)).prop_map(Step::Allocate),
            1 => (1u64..4096).prop_map(Step::Allocate),
            4 => any::<usize>().prop_map(Step::Free),
            1 => Just(Step::Trim),
            1 => (0usize..3, any::<bool>()).prop_map(|(frees, tight)| Step::SuspendResume(frees, tight)),
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
                    Step::SuspendResume(frees, tight) => {
                        let mut layout = pool.detach();
                        prop_assert_eq!(pool.storage.live_buffers, 0);
                        for _ in 0..frees.min(live.len()) {
                            layout.free(live.swap_remove(0));
                        }
                        let cut: u64 = layout.slabs.values().map(high_water).sum();
                        let cap = if tight { Some(cut.max(1)) } else { limit };
                        pool = match Pool::restore(HostStorage::default(), layout, config(cap)) {
                            Ok(restored) => restored,
                            Err((error, _)) => {
                                prop_assert!(false, "restore failed: {error}");
                                unreachable!()
                            }
                        };
                        if tight {
                            prop_assert_eq!(pool.stats().reserved, cut);
                            prop_assert!(pool.set_limit(limit).is_ok());
                        }
                    }
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
