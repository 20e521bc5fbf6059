//! The pool on a real device: ranges stay intact under churn, freed ranges are not reused too early, the cap
//! holds and the session survives hitting it, and trim gives memory back.

use crate::common::{per_backend, resident, vulkan_only, Backend, Rng, MIB};
use wgcompute::{Error, MemoryLimit, Session, Tensor};

fn capped(backend: &Backend, limit: MemoryLimit) -> Session {
    Session::open(backend.options().memory_limit(limit)).expect("open capped")
}

per_backend!(interleaved_tensors_keep_their_data_when_neighbours_come_and_go);
fn interleaved_tensors_keep_their_data_when_neighbours_come_and_go(backend: &Backend) {
    let session = backend.open();
    let mut rng = Rng::fresh("interleaved");
    let mut live: Vec<(Tensor, Vec<f32>)> = (0..300)
        .map(|_| {
            let len = 1 + (rng.next_u64() % 20_000) as usize;
            let data = rng.vec(len, -100.0, 100.0);
            (session.upload(&data, &[len]).expect("upload"), data)
        })
        .collect();
    let freed: Vec<usize> = live
        .iter()
        .step_by(2)
        .map(|(tensor, _)| tensor.len())
        .collect();
    let mut index = 0;
    live.retain(|_| {
        index += 1;
        index % 2 == 0
    });
    let reserved_before = session.memory_stats().expect("stats").reserved;
    for len in freed {
        let len = 1 + (rng.next_u64() as usize % len);
        let data = rng.vec(len, -100.0, 100.0);
        live.push((
            session.upload(&data, &[len]).expect("upload into a hole"),
            data,
        ));
    }
    assert_eq!(
        session.memory_stats().expect("stats").reserved,
        reserved_before,
        "new tensors no larger than the freed ones fit in the holes"
    );
    for (tensor, data) in &live {
        assert_eq!(
            &tensor.to_vec().expect("read"),
            data,
            "a tensor's data changed"
        );
    }
}

per_backend!(a_range_freed_under_recorded_work_is_not_overwritten_by_an_upload);
fn a_range_freed_under_recorded_work_is_not_overwritten_by_an_upload(backend: &Backend) {
    let session = backend.open();
    let mut rng = Rng::fresh("ordering");
    let len = 4099;
    let first = rng.vec(len, -1.0, 1.0);
    let second = rng.vec(len, -1.0, 1.0);
    let a = session.upload(&first, &[len]).expect("upload a");
    // Recorded, not yet submitted: it will run when the batch is submitted.
    a.scale_add_(2.0, 1.0).expect("record");
    drop(a);
    // b takes a's range at once (the stream runs b's work after a's), but the queue writes uploads before the
    // batch runs: written that way, b's data would then be scaled by the work recorded for a.
    let b = session.upload(&second, &[len]).expect("upload b");
    let stats = session.memory_stats().expect("stats");
    assert_eq!(
        stats.peak_in_use, stats.in_use,
        "b reuses a's bytes at once: {stats:?}"
    );
    assert_eq!(
        b.to_vec().expect("read b"),
        second,
        "b was overwritten by work recorded for a"
    );

    // The same hazard when overwriting a live tensor: the write must land after the recorded work.
    b.scale_add_(3.0, 0.0).expect("record");
    b.write(&first).expect("write");
    assert_eq!(
        b.to_vec().expect("read b"),
        first,
        "recorded work ran after the write"
    );
}

per_backend!(under_90_percent_of_the_cap_no_request_fails_and_no_tensor_sees_another_s_bytes);
/// Random churn without read-backs: uploads and op outputs of mixed sizes (shared slabs and buffers of their
/// own), in-place updates, and frees in random order, all recorded into the same batches, so that ranges are
/// reused while earlier work on them is still unsubmitted. Whatever the order, every tensor reads back its
/// own values, and while the live bytes stay under 90% of the cap nothing is refused.
fn under_90_percent_of_the_cap_no_request_fails_and_no_tensor_sees_another_s_bytes(
    backend: &Backend,
) {
    let cap = 24 * MIB;
    let session = capped(backend, MemoryLimit::Bytes(cap));
    let mut rng = Rng::fresh("churn under the cap");
    let mut live: Vec<(Tensor, Vec<f64>)> = Vec::new();
    let aligned = |len: usize| (len as u64 * 4).div_ceil(256) * 256;
    for event in 0..400 {
        let in_use: u64 = live.iter().map(|(tensor, _)| aligned(tensor.len())).sum();
        // Log-uniform from 1 to 2^18 floats (4 B to 1 MiB).
        let len = (2f64.powf(f64::from(rng.uniform(0.0, 18.0))) as usize).max(1);
        let room = in_use + aligned(len) <= cap / 10 * 9;
        match rng.next_u64() % 4 {
            _ if !room || (live.len() > 30 && rng.next_u64().is_multiple_of(2)) => {
                let index = (rng.next_u64() % live.len() as u64) as usize;
                drop(live.swap_remove(index));
            }
            0 => {
                let data = rng.vec(len, -1.0, 1.0);
                let tensor = session.upload(&data, &[len]).unwrap_or_else(|error| {
                    panic!("event {event}: upload of {len} with {in_use} live under {cap}: {error}")
                });
                live.push((tensor, data.iter().map(|&v| f64::from(v)).collect()));
            }
            1 if !live.is_empty() => {
                let index = (rng.next_u64() % live.len() as u64) as usize;
                let (tensor, values) = &mut live[index];
                tensor.scale_add_(2.0, 0.5).expect("scale_add_");
                values
                    .iter_mut()
                    .for_each(|value| *value = *value * 2.0 + 0.5);
            }
            _ if !live.is_empty() => {
                // An op's output, then its input freed: the output may land where recorded work still reads.
                let index = (rng.next_u64() % live.len() as u64) as usize;
                let source = &live[index].0;
                if in_use + aligned(source.len()) <= cap / 10 * 9 {
                    // neg is exact on every backend, so any difference is another tensor's bytes.
                    let output = source.neg().unwrap_or_else(|error| {
                        panic!("event {event}: neg output with {in_use} live under {cap}: {error}")
                    });
                    let values = live[index].1.iter().map(|value| -value).collect();
                    live.swap_remove(index);
                    live.push((output, values));
                }
            }
            _ => {}
        }
    }
    for (index, (tensor, want)) in live.iter().enumerate() {
        let got = tensor.to_vec().expect("read");
        for (position, (&got, &wanted)) in got.iter().zip(want).enumerate() {
            assert!(
                (f64::from(got) - wanted).abs() <= 1e-5 * (1.0 + wanted.abs()),
                "tensor {index} of {} elements, element {position}: {got} where {wanted} was written",
                want.len()
            );
        }
    }
    let stats = session.memory_stats().expect("stats");
    assert!(stats.peak_reserved <= cap, "{stats:?}");
}

vulkan_only!(a_request_over_the_cap_fails_with_figures_and_the_session_goes_on);
fn a_request_over_the_cap_fails_with_figures_and_the_session_goes_on(backend: &Backend) {
    let session = capped(backend, MemoryLimit::Bytes(64 * MIB));
    let first = session
        .zeros(&[(40 * MIB / 4) as usize])
        .expect("40 MiB under a 64 MiB cap");
    match session.zeros(&[(40 * MIB / 4) as usize]) {
        Err(Error::OutOfMemory {
            requested,
            in_use,
            limit,
            ..
        }) => {
            assert_eq!(requested, 40 * MIB);
            assert!(in_use >= 40 * MIB);
            assert_eq!(limit, Some(64 * MIB));
        }
        other => panic!("expected OutOfMemory, got {other:?}"),
    }
    let small = session
        .full(&[5], 2.0)
        .expect("small allocations still work");
    assert_eq!(small.to_vec().expect("read"), vec![2.0; 5]);
    drop(first);
    let second = session
        .full(&[(40 * MIB / 4) as usize], 1.0)
        .expect("after freeing, the same request succeeds");
    assert_eq!(second.read_range(0..2).expect("read"), vec![1.0, 1.0]);
    let stats = session.memory_stats().expect("stats");
    assert!(stats.reserved <= 64 * MIB, "{stats:?}");
    assert!(stats.peak_in_use >= 40 * MIB, "{stats:?}");
}

vulkan_only!(caps_as_fractions_and_reserved_up_front);
fn caps_as_fractions_and_reserved_up_front(backend: &Backend) {
    let session = capped(backend, MemoryLimit::Fraction(0.01));
    let total = session
        .device_memory_total()
        .expect("lavapipe reports host memory");
    let limit = session
        .memory_stats()
        .expect("stats")
        .limit
        .expect("a limit");
    assert_eq!(limit, (total as f64 * 0.01) as u64);
    drop(session);

    let reserved = Session::open(
        backend
            .options()
            .memory_limit(MemoryLimit::Bytes(300 * MIB))
            .reserve_up_front(true),
    )
    .expect("reserve up front");
    let stats = reserved.memory_stats().expect("stats");
    assert_eq!(stats.reserved, 300 * MIB);
    let tensor = reserved
        .zeros(&[(100 * MIB / 4) as usize])
        .expect("fits in the reservation");
    assert_eq!(
        reserved.memory_stats().expect("stats").slabs,
        stats.slabs,
        "no new slab"
    );
    drop(tensor);

    let no_limit = Session::open(backend.options().reserve_up_front(true));
    assert!(matches!(no_limit, Err(Error::InvalidArgument { .. })));
}

vulkan_only!(a_buffer_larger_than_the_adapter_allows_is_too_big);
fn a_buffer_larger_than_the_adapter_allows_is_too_big(backend: &Backend) {
    let session = backend.open();
    let huge = [1usize << 20, 1 << 20];
    assert!(matches!(
        session.zeros(&huge),
        Err(Error::BufferTooBig { .. })
    ));
    assert!(matches!(
        session.upload(&[1.0, 2.0], &[3]),
        Err(Error::Shape { .. })
    ));
    assert!(session.zeros(&[3]).is_ok(), "the session still works");
}

#[cfg(target_pointer_width = "64")]
vulkan_only!(a_tensor_of_nearly_u64_max_bytes_is_too_big_not_a_wrapped_range);
/// A request whose bytes, rounded up to the pool's alignment, pass u64::MAX is too big, never a wrapped small
/// range that a fill would then run over.
#[cfg(target_pointer_width = "64")]
fn a_tensor_of_nearly_u64_max_bytes_is_too_big_not_a_wrapped_range(backend: &Backend) {
    let session = backend.open();
    for elements in [(1usize << 62) - 1, 1 << 61, (1 << 62) - 64] {
        for created in [session.full(&[elements], 1.0), session.zeros(&[elements])] {
            match created {
                Err(Error::BufferTooBig { requested, .. }) => {
                    assert_eq!(requested, elements as u64 * 4)
                }
                other => panic!("{elements} elements: {:?}", other.map(|_| "a tensor")),
            }
        }
    }
    let stats = session.memory_stats().expect("stats");
    assert_eq!((stats.in_use, stats.allocations), (0, 0));
    let small = session.full(&[3], 2.0).expect("the session still works");
    assert_eq!(small.to_vec().expect("read"), [2.0; 3]);
}

vulkan_only!(trim_returns_empty_slabs_to_the_driver, measures_memory);
fn trim_returns_empty_slabs_to_the_driver(backend: &Backend) {
    let session = backend.open();
    let tensors: Vec<_> = (0..6)
        .map(|index| {
            session
                .full(&[(64 * MIB / 4) as usize], index as f32)
                .expect("fill")
        })
        .collect();
    session.sync().expect("sync");
    let stats = session.memory_stats().expect("stats");
    assert!(stats.reserved >= 384 * MIB, "{stats:?}");
    drop(tensors);
    let held = session.memory_stats().expect("stats");
    assert_eq!(held.in_use, 0);
    assert_eq!(
        held.reserved, stats.reserved,
        "freed ranges stay reserved until trim"
    );
    let resident_before = resident();
    session.trim().expect("trim");
    let trimmed = session.memory_stats().expect("stats");
    assert_eq!(trimmed.reserved, 0);
    assert_eq!(trimmed.slabs, 0);
    let resident_after = resident();
    assert!(
        resident_before.saturating_sub(resident_after) >= 300 * MIB,
        "trim should give back the slabs: resident {} MiB before, {} MiB after",
        resident_before / MIB,
        resident_after / MIB
    );
    let device = session.device_memory();
    assert_eq!(
        device.used.map(|used| used < resident_before),
        Some(true),
        "{device:?}"
    );
    session.reset_peak().expect("reset");
    assert_eq!(session.memory_stats().expect("stats").peak_reserved, 0);
}
