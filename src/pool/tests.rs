//! The pool's tests on a host stand-in for the GPU; compiled under `#[cfg(test)]` only (see mod.rs).

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
    let a = pool.allocate(10, true).unwrap();
    let b = pool.allocate(300, true).unwrap();
    assert_eq!(a.slab, b.slab);
    assert_eq!((a.bytes, b.bytes), (256, 512));
    let big = pool.allocate(3 << 20, true).unwrap();
    assert_ne!(big.slab, a.slab);
    assert_eq!(pool.slab_bytes(big.slab), Some(3 << 20), "cut to its size");
    assert_eq!(pool.stats().slabs, 2);
    let big_slab = big.slab;
    pool.free(big);
    let again = pool.allocate((3 << 20) - 1000, true).unwrap();
    assert_eq!(
        again.slab, big_slab,
        "a freed large buffer serves a request of about its size"
    );
    pool.free(again);
    pool.retire_idle();
    assert!(pool.take_released().is_empty(), "kept through one batch");
    pool.retire_idle();
    assert_eq!(
        pool.take_released(),
        vec![big_slab],
        "and given back after a batch unused"
    );
    assert_eq!(pool.storage.live_bytes, 1 << 20);
    pool.free(a);
    pool.free(b);
    assert_eq!(pool.stats().in_use, 0);
}

#[test]
fn the_cap_refuses_with_figures_and_freeing_makes_room() {
    let mut pool = Pool::new(HostStorage::default(), config(Some(2 << 20)));
    let first = pool.allocate(1 << 20, true).unwrap();
    let second = pool.allocate(1 << 20, true).unwrap();
    match pool.allocate(1 << 20, true) {
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
    let again = pool.allocate(1 << 20, true).unwrap();
    pool.free(again);
    pool.free(second);
}

#[test]
fn a_full_driver_is_out_of_memory_not_a_panic() {
    let storage = HostStorage::full_at(1 << 20);
    let mut pool = Pool::new(storage, config(None));
    let kept = pool.allocate(1 << 20, true).unwrap();
    match pool.allocate(300, true) {
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
    assert!(pool.allocate(256, true).is_ok());
}

#[test]
fn a_full_driver_gets_the_empty_slabs_back_before_the_request_is_refused() {
    let storage = HostStorage::full_at(3 << 20);
    let mut pool = Pool::new(storage, config(None));
    let shared = pool.allocate(256, true).unwrap();
    pool.free(shared);
    // An empty 1 MiB shared slab stays reserved; a 3 MiB dedicated slab only fits once it is gone.
    let big = pool
        .allocate(3 << 20, true)
        .expect("the empty slab makes room for the dedicated one");
    assert_eq!(pool.stats().slabs, 1);
    pool.free(big);
}

#[test]
fn trim_returns_empty_slabs() {
    let mut pool = Pool::new(HostStorage::default(), config(None));
    let allocations: Vec<_> = (0..8)
        .map(|_| pool.allocate(300 << 10, true).unwrap())
        .collect();
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
    let a = pool.allocate(1 << 20, true).unwrap();
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
        pool.allocate(2 << 30, true),
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
        let kept = pool.allocate(300, true).unwrap();
        for bytes in [u64::MAX, u64::MAX - 3, 1 << 63, u64::MAX - 255] {
            match pool.allocate(bytes, true) {
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
        let another = pool.allocate(256, true).unwrap();
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
        .map(|&bytes| pool.allocate(bytes, true).unwrap())
        .collect();
    let dropped = pool.allocate(256, true).unwrap();
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
    let fresh = restored.allocate(300, true).unwrap();
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
    restored.trim();
    assert_eq!(
        restored.stats().slabs,
        0,
        "trim gives every emptied slab back"
    );
}

#[test]
fn ranges_freed_while_detached_are_not_restored_and_empty_slabs_not_recreated() {
    let mut pool = Pool::new(HostStorage::default(), config(None));
    let small = pool.allocate(300, true).unwrap();
    let big = pool.allocate(3 << 20, true).unwrap();
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
    let kept = [
        pool.allocate(300, true).unwrap(),
        pool.allocate(3 << 20, true).unwrap(),
    ];
    let layout = pool.detach();
    // The dedicated slab, and the shared one cut to its one range.
    let reserved = (3 << 20) + 512;

    let layout = match Pool::restore(HostStorage::default(), layout, config(Some(reserved - 1))) {
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
    let mut restored = match Pool::restore(HostStorage::default(), layout, config(Some(reserved))) {
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
    let mut pool = Pool::new(HostStorage::default(), config(None));
    let a = pool.allocate(200 << 10, true).unwrap();
    let b = pool.allocate(200 << 10, true).unwrap();
    let c = pool.allocate(100 << 10, true).unwrap();
    assert!(a.slab == b.slab && b.slab == c.slab);
    pool.free(c);
    let layout = pool.detach();
    // The slab as it was (1 MiB) does not fit a 450 KiB cap; cut to its last range (400 KiB), it does.
    let cap = 450 << 10;
    let mut pool = match Pool::restore(HostStorage::default(), layout, config(Some(cap))) {
        Ok(pool) => pool,
        Err((error, _)) => panic!("restore failed: {error}"),
    };
    let cut = pool.stats().reserved;
    assert_eq!(cut, b.offset + b.bytes);
    assert_eq!(pool.storage.live_bytes, cut);
    assert!(!pool.slabs[&b.slab].dedicated, "the cut slab stays shared");
    pool.free(a);
    let again = pool
        .allocate(200 << 10, true)
        .expect("the hole below the cut is reused under the cap");
    assert_eq!(
        (again.slab, again.offset),
        (b.slab, 0),
        "the new range lands in the hole"
    );
    // Past the cut there is only a new slab, never a range of the part cut off.
    let past = pool.allocate(40 << 10, true).unwrap();
    assert!(past.slab != b.slab || past.offset + past.bytes <= cut);
    assert!(matches!(
        pool.allocate(200 << 10, true),
        Err(Error::OutOfMemory { .. })
    ));
    for allocation in [again, past, b] {
        pool.free(allocation);
    }
}

#[test]
fn a_lower_cap_gives_empty_slabs_back_or_is_refused() {
    let mut pool = Pool::new(HostStorage::default(), config(None));
    let kept = pool.allocate(300, true).unwrap();
    let emptied = pool.allocate(3 << 20, true).unwrap();
    let spare = pool.allocate(900 << 10, true).unwrap();
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
        pool.allocate(1 << 20, true),
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
                Step::Allocate(bytes) => match pool.allocate(bytes, true) {
                    Ok(allocation) => {
                        prop_assert!(allocation.bytes >= bytes);
                        prop_assert_eq!(allocation.offset % 256, 0);
                        live.push(allocation);
                    }
                    Err(Error::OutOfMemory { .. }) => {
                        let Some(limit) = limit else {
                            prop_assert!(false, "no limit, yet out of memory");
                            unreachable!()
                        };
                        // The cap's promise: below 90% of it in live bytes, every request succeeds.
                        let in_use = pool.stats().in_use;
                        prop_assert!(
                            in_use + bytes.div_ceil(256) * 256 > limit / 10 * 9,
                            "refused {} with {} live under a cap of {}: {:?}", bytes, in_use, limit, pool.stats()
                        );
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
