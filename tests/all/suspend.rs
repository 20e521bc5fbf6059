//! Suspend and resume: every byte of device memory given back mid-job, every handle kept, the job continued on
//! the same adapter (bit for bit) or another one.

use std::sync::Arc;

use crate::common::{across_backends, per_backend, resident, vulkan_only, Backend, Rng, MIB};
use wgcompute::{
    Adam, AdamConfig, BinaryOp, Error, GradientTape, Gradients, MemoryLimit, Mlp, Optimizer,
    Session, Tensor, Transpose, UnaryOp,
};

fn random(rng: &mut Rng, count: usize) -> Vec<f32> {
    rng.vec(count, -3.0, 3.0)
}

fn bits(values: &[f32]) -> Vec<u32> {
    values.iter().map(|value| value.to_bits()).collect()
}

per_backend!(every_handle_reads_back_bit_identical_after_a_resume);
fn every_handle_reads_back_bit_identical_after_a_resume(backend: &Backend) {
    let mut session = backend.poisoned();
    let mut rng = Rng::fresh("suspend contents");
    // Awkward sizes: one element, a prime, just over a workgroup, and one over the 64 MiB that one staging
    // buffer carries, so that it is read back and written again in pieces.
    let shapes: [&[usize]; 6] = [&[1], &[7], &[257], &[3, 1009], &[300_007], &[17_000_003]];
    let mut kept: Vec<(Tensor, Vec<f32>)> = Vec::new();
    for shape in shapes {
        let data = random(&mut rng, shape.iter().product());
        let tensor = session.upload(&data, shape).expect("upload");
        kept.push((tensor, data));
    }
    // An op output and a u32 tensor, so that work recorded just before the suspend is part of what is kept.
    let scaled = kept[3].0.mul_scalar(3.0).expect("scale");
    let argmax = kept[3].0.argmax(Some(1)).expect("argmax");
    let scaled_before = scaled.to_vec().expect("read scaled");
    let argmax_before = argmax.to_vec_u32().expect("read argmax");
    // A tensor dropped before the suspend is not kept.
    drop(session.zeros(&[4096]).expect("zeros"));
    // Work recorded and not yet run when the suspend comes is part of what is kept.
    let pending = kept[2].0.mul_scalar(2.0).expect("pending op");
    let pending_want: Vec<f32> = kept[2].1.iter().map(|value| value * 2.0).collect();

    let report = session.suspend().expect("suspend");
    let live_bytes: u64 = kept
        .iter()
        .map(|(_, data)| 4 * data.len() as u64)
        .sum::<u64>()
        + 4 * (scaled_before.len() + argmax_before.len() + pending_want.len()) as u64;
    assert_eq!(report.tensors, kept.len() as u64 + 3, "{}", backend.name);
    assert!(
        report.host_bytes >= live_bytes && report.host_bytes < live_bytes + 256 * 8,
        "{}: {} bytes kept for {live_bytes} live",
        backend.name,
        report.host_bytes
    );
    assert!(session.is_suspended());

    let resumed = session.resume().expect("resume");
    assert_eq!(resumed.tensors, report.tensors);
    assert_eq!(resumed.bytes_uploaded, report.host_bytes);
    assert!(!session.is_suspended());
    for (tensor, data) in &kept {
        assert_eq!(
            bits(&tensor.to_vec().expect("read after resume")),
            bits(data),
            "{}: shape {:?}",
            backend.name,
            tensor.shape()
        );
    }
    assert_eq!(
        bits(&scaled.to_vec().expect("scaled")),
        bits(&scaled_before)
    );
    assert_eq!(argmax.to_vec_u32().expect("argmax"), argmax_before);
    assert_eq!(
        bits(&pending.to_vec().expect("pending")),
        bits(&pending_want)
    );
    // The resumed session computes, and new tensors do not land on kept ones.
    let fresh = session.full(&[300_007], 2.0).expect("new tensor");
    let sum = kept[4].0.add(&fresh).expect("add after resume");
    assert_eq!(
        kept[5].0.read_range(16_999_990..17_000_003).expect("tail"),
        kept[5].1[16_999_990..]
    );
    let expected: Vec<f32> = kept[4].1.iter().map(|value| value + 2.0).collect();
    assert_eq!(bits(&sum.to_vec().expect("sum")), bits(&expected));
    assert_eq!(bits(&kept[0].0.to_vec().expect("first")), bits(&kept[0].1));
}

vulkan_only!(every_use_of_a_suspended_session_answers_suspended_and_nothing_is_lost);
fn every_use_of_a_suspended_session_answers_suspended_and_nothing_is_lost(backend: &Backend) {
    let mut session = backend.open();
    let a = Arc::new(session.upload(&[1.0, 2.0, 3.0, 4.0], &[2, 2]).expect("a"));
    let b = session.upload(&[0.5, -1.0], &[2]).expect("b");
    let labels = session
        .upload(&[1.0, 0.0, 0.0, 1.0], &[2, 2])
        .expect("labels");
    let dropped_while_suspended = session.full(&[1 << 20], 1.0).expect("big");
    let ids = a.argmax(Some(1)).expect("u32 ids");
    session.suspend().expect("suspend");

    let suspended = |outcome: Result<Tensor, Error>, what: &str| match outcome {
        Err(Error::Suspended) => {}
        Err(other) => panic!("{what}: expected Suspended, got {other}"),
        Ok(_) => panic!("{what}: ran on a suspended session"),
    };
    suspended(a.add(&b), "add");
    suspended(a.add_scalar(1.0), "add_scalar");
    suspended(a.matmul(&a), "matmul");
    suspended(a.sum(Some(0)), "sum");
    suspended(a.max(None), "max");
    suspended(a.softmax(), "softmax");
    suspended(
        a.softmax_cross_entropy_with_logits(&labels)
            .map(|pair| pair.0),
        "softmax_cross_entropy_with_logits",
    );
    for op in UnaryOp::all() {
        suspended(a.unary(op, 0.5), op.name());
    }
    for op in BinaryOp::all() {
        suspended(a.binary(op, &b), op.name());
    }
    suspended(a.argmax(Some(1)), "argmax");
    suspended(a.argmin(Some(1)), "argmin");
    suspended(a.min(None), "min");
    suspended(a.mean(Some(1)), "mean");
    suspended(a.log_softmax(), "log_softmax");
    suspended(a.matmul_t(&a, Transpose::Left), "matmul_t");
    suspended(a.relu_backward(&a), "relu_backward");
    suspended(a.try_clone(), "try_clone");
    suspended(a.reshape(&[4]), "reshape");
    suspended(session.upload(&[1.0], &[1]), "upload");
    suspended(session.zeros(&[3]), "zeros");
    suspended(session.empty(&[3]), "empty");
    suspended(session.rand(&[3], 1), "rand");
    assert!(matches!(a.to_vec(), Err(Error::Suspended)));
    assert!(matches!(a.read_range(0..1), Err(Error::Suspended)));
    assert!(matches!(a.write(&[0.0; 4]), Err(Error::Suspended)));
    assert!(matches!(a.copy_from(&labels), Err(Error::Suspended)));
    assert!(matches!(a.fill_(0.0), Err(Error::Suspended)));
    assert!(matches!(a.scale_add_(2.0, 0.0), Err(Error::Suspended)));
    assert!(matches!(a.fill_normal_(1, 0.0, 1.0), Err(Error::Suspended)));
    assert!(matches!(
        a.fill_uniform_(1, 0.0, 1.0),
        Err(Error::Suspended)
    ));
    assert!(matches!(ids.to_vec_u32(), Err(Error::Suspended)));
    let (m, v) = (&labels, &labels);
    assert!(matches!(
        a.adam_update_(&labels, m, v, 1, &AdamConfig::default()),
        Err(Error::Suspended)
    ));
    assert!(matches!(
        a.sgd_update_(&labels, m, 0.1, 0.0),
        Err(Error::Suspended)
    ));
    assert!(matches!(session.memory_stats(), Err(Error::Suspended)));
    assert!(matches!(session.sync(), Err(Error::Suspended)));
    assert!(matches!(session.trim(), Err(Error::Suspended)));
    assert!(matches!(session.suspend(), Err(Error::Suspended)));
    let tape = GradientTape::new();
    let x = tape.watch_parameter(&a).expect("watch");
    assert!(matches!(x.relu(), Err(Error::Suspended)));
    // A tensor dropped while suspended is not brought back.
    drop(dropped_while_suspended);
    // Shapes need no device.
    assert_eq!(a.shape(), &[2, 2]);

    session.resume().expect("resume");
    assert!(matches!(session.resume(), Err(Error::NotSuspended)));
    let stats = session.memory_stats().expect("stats");
    assert_eq!(stats.allocations, 4, "{stats:?}");
    assert_eq!(ids.to_vec_u32().expect("ids"), vec![1, 1]);
    assert_eq!(
        stats.in_use,
        4 * 256,
        "the tensor dropped while suspended is gone"
    );
    assert_eq!(
        a.add(&b).expect("add").to_vec().expect("read"),
        vec![1.5, 1.0, 3.5, 3.0]
    );
}

vulkan_only!(a_tensor_dropped_while_suspended_gives_back_its_host_copy);
/// A tensor dropped while suspended gives back its host copy even when its slab is shared with live tensors, so
/// resume writes back only what is still held; the neighbours come back whole.
fn a_tensor_dropped_while_suspended_gives_back_its_host_copy(backend: &Backend) {
    let mut session = backend.open();
    let mut rng = Rng::fresh("drop while suspended");
    // 64 KiB each: small enough to share a slab (larger tensors get buffers of their own).
    let piece = 64 << 10;
    let quarter = piece / 4;
    let values: Vec<Vec<f32>> = (0..3).map(|_| random(&mut rng, quarter)).collect();
    let mut tensors: Vec<Option<Tensor>> = values
        .iter()
        .map(|data| Some(session.upload(data, &[quarter]).expect("upload")))
        .collect();
    let small = session.upload(&[7.0], &[1]).expect("small");
    let stats = session.memory_stats().expect("stats");
    assert_eq!(stats.slabs, 1, "one shared slab holds them all: {stats:?}");
    let suspended = session.suspend().expect("suspend");
    assert_eq!(suspended.host_bytes, 3 * piece as u64 + 256);

    // The middle one: its neighbours no longer join through it.
    tensors[1] = None;
    // A small one in a large piece keeps its bytes until resume (cutting it out would copy the piece).
    drop(small);
    let resumed = session.resume().expect("resume");
    assert_eq!(resumed.bytes_uploaded, 2 * piece as u64 + 256);
    for (index, tensor) in tensors.iter().enumerate() {
        if let Some(tensor) = tensor {
            assert_eq!(
                bits(&tensor.to_vec().expect("read")),
                bits(&values[index]),
                "tensor {index}"
            );
        }
    }
    let stats = session.memory_stats().expect("stats");
    assert_eq!(stats.in_use, 2 * piece as u64, "{stats:?}");
    // The freed range is usable again.
    let again = session.upload(&values[1], &[quarter]).expect("upload");
    assert_eq!(bits(&again.to_vec().expect("read")), bits(&values[1]));
}

/// A small classifier's job: an MLP, Adam, fixed data.
struct Job {
    model: Mlp,
    adam: Adam,
    inputs: Arc<Tensor>,
    labels: Arc<Tensor>,
}

impl Job {
    fn new(session: &Session) -> Job {
        let mut rng = Rng::new(0x5eed);
        let (batch, features, classes) = (33, 17, 5);
        let inputs = session
            .upload(&rng.vec(batch * features, -1.0, 1.0), &[batch, features])
            .expect("inputs");
        let mut one_hot = vec![0.0; batch * classes];
        for row in 0..batch {
            one_hot[row * classes + (rng.next_u64() % classes as u64) as usize] = 1.0;
        }
        let labels = session.upload(&one_hot, &[batch, classes]).expect("labels");
        Job {
            model: Mlp::new(session, features, &[23], classes, 11).expect("model"),
            adam: Adam::new(AdamConfig {
                lr: 0.01,
                ..AdamConfig::default()
            }),
            inputs: Arc::new(inputs),
            labels: Arc::new(labels),
        }
    }

    /// One step; returns the cost before the update and the gradients.
    fn step(&mut self) -> (f32, Gradients) {
        let tape = GradientTape::new();
        let x = &self.inputs;
        let y = &self.labels;
        let logits = self.model.forward(&tape, x).expect("forward");
        let losses = logits.softmax_cross_entropy_with_logits(y).expect("loss").0;
        let cost = losses.mean(None).expect("mean");
        let value = cost.to_vec().expect("read cost")[0];
        let gradients = tape.backward(&cost).expect("backward");
        self.adam
            .step(&self.model.parameters(), &gradients)
            .expect("adam");
        (value, gradients)
    }

    /// Every parameter and Adam moment, read back.
    fn state(&self) -> Vec<Vec<f32>> {
        let parameters = self.model.parameters();
        let moments = self.adam.moments().iter().flat_map(|(m, v)| [m, v]);
        parameters
            .iter()
            .map(|tensor| tensor.as_ref())
            .chain(moments)
            .map(|tensor| tensor.to_vec().expect("read state"))
            .collect()
    }
}

const STEPS: usize = 12;

fn uninterrupted(backend: &Backend) -> (Vec<f32>, Vec<Vec<f32>>) {
    let session = backend.open();
    let mut job = Job::new(&session);
    let losses = (0..STEPS).map(|_| job.step().0).collect();
    (losses, job.state())
}

vulkan_only!(training_suspended_every_few_steps_matches_an_uninterrupted_run_bit_for_bit);
fn training_suspended_every_few_steps_matches_an_uninterrupted_run_bit_for_bit(backend: &Backend) {
    let (want_losses, want_state) = uninterrupted(backend);
    let mut session = backend.open();
    let mut job = Job::new(&session);
    let mut losses = Vec::new();
    for step in 0..STEPS {
        let (loss, gradients) = job.step();
        losses.push(loss);
        if step % 3 == 2 {
            let held: Vec<Vec<f32>> = gradients
                .iter()
                .map(|(_, gradient)| gradient.to_vec().expect("gradient"))
                .collect();
            let state = job.state();
            session.suspend().expect("suspend");
            session.resume().expect("resume");
            // Handles held across the suspend: gradients, parameters and Adam's moments.
            let after: Vec<Vec<f32>> = gradients
                .iter()
                .map(|(_, gradient)| gradient.to_vec().expect("gradient after resume"))
                .collect();
            assert_eq!(held.len(), 4);
            assert!(held.iter().zip(&after).all(|(a, b)| bits(a) == bits(b)));
            assert!(state
                .iter()
                .zip(job.state())
                .all(|(a, b)| bits(a) == bits(&b)));
        }
    }
    assert_eq!(bits(&losses), bits(&want_losses), "losses differ");
    assert!(
        want_losses[STEPS - 1] < want_losses[0],
        "the job learns: {want_losses:?}"
    );
    for (index, (got, want)) in job.state().iter().zip(&want_state).enumerate() {
        assert_eq!(bits(got), bits(want), "state tensor {index} differs");
    }
}

across_backends!(a_job_moves_from_vulkan_to_gl_and_back_and_keeps_learning);
fn a_job_moves_from_vulkan_to_gl_and_back_and_keeps_learning(vulkan: &Backend, gl: &Backend) {
    let (want_losses, want_state) = uninterrupted(vulkan);
    let mut session = vulkan.open();
    let mut job = Job::new(&session);
    let mut losses = Vec::new();
    let mut on_gl = false;
    for step in 0..STEPS {
        losses.push(job.step().0);
        if step % 4 == 3 {
            let state = job.state();
            session.suspend().expect("suspend");
            let target = if on_gl { vulkan } else { gl };
            let report = session.resume_on(target.selector.clone()).expect("resume");
            on_gl = !on_gl;
            assert_eq!(report.adapter.backend, target.name);
            assert_eq!(session.adapter().backend, target.name);
            assert!(
                state
                    .iter()
                    .zip(job.state())
                    .all(|(a, b)| bits(a) == bits(&b)),
                "contents moved to {} bit for bit",
                target.name
            );
        }
    }
    let error = |got: &[f32], want: &[f32]| {
        got.iter()
            .zip(want)
            .map(|(g, w)| ((g - w).abs() / w.abs().max(1e-3)) as f64)
            .fold(0.0, f64::max)
    };
    assert!(
        error(&losses, &want_losses) < 1e-4,
        "{losses:?} vs {want_losses:?}"
    );
    for (got, want) in job.state().iter().zip(&want_state) {
        let worst = got
            .iter()
            .zip(want)
            .map(|(g, w)| (g - w).abs())
            .fold(0.0, f32::max);
        assert!(worst < 1e-4, "state differs by {worst}");
    }
}

per_backend!(a_resume_under_too_small_a_cap_fails_cleanly_and_a_later_one_with_room_succeeds);
fn a_resume_under_too_small_a_cap_fails_cleanly_and_a_later_one_with_room_succeeds(
    backend: &Backend,
) {
    let mut session = backend.open();
    let mut rng = Rng::fresh("suspend cap");
    let data = random(&mut rng, 3 << 18); // 3 MiB
    let tensor = session.upload(&data, &[3 << 18]).expect("upload");
    session.suspend().expect("suspend");
    session
        .set_memory_limit(Some(MemoryLimit::Bytes(2 << 20)))
        .expect("a cap is recorded while suspended");
    match session.resume() {
        Err(Error::OutOfMemory {
            requested, limit, ..
        }) => {
            assert!(requested >= 3 << 20);
            assert_eq!(limit, Some(2 << 20));
        }
        Err(other) => panic!("{}: expected OutOfMemory, got {other}", backend.name),
        Ok(_) => panic!("{}: resumed over the cap", backend.name),
    }
    assert!(
        session.is_suspended(),
        "a failed resume leaves the session suspended"
    );
    assert!(matches!(tensor.to_vec(), Err(Error::Suspended)));
    session
        .set_memory_limit(Some(MemoryLimit::Bytes(8 << 20)))
        .expect("a larger cap");
    session.resume().expect("resume with room");
    assert_eq!(bits(&tensor.to_vec().expect("read")), bits(&data));
    assert_eq!(session.memory_stats().expect("stats").limit, Some(8 << 20));
    // The cap holds on the resumed session.
    assert!(matches!(
        session.zeros(&[6 << 18]),
        Err(Error::OutOfMemory { .. })
    ));
    assert!(session.zeros(&[1 << 18]).is_ok());
}

vulkan_only!(
    a_suspended_session_closes_and_drops_cleanly_and_its_host_copies_go,
    measures_memory
);
fn a_suspended_session_closes_and_drops_cleanly_and_its_host_copies_go(backend: &Backend) {
    let mut session = backend.open();
    let tensor = session
        .full(&[(96 * MIB / 4) as usize], 1.5)
        .expect("96 MiB");
    session.sync().expect("sync");
    let report = session.suspend().expect("suspend");
    assert!(report.host_bytes >= 96 * MIB);
    assert_frees_host_copies("closing", || {
        let closed = session.close();
        assert!(!closed.device_lost);
    });
    assert!(matches!(tensor.to_vec(), Err(Error::SessionClosed)));
    drop(tensor);

    let mut dropped = backend.open();
    let _kept = dropped
        .full(&[(96 * MIB / 4) as usize], 2.0)
        .expect("96 MiB");
    dropped.suspend().expect("suspend");
    assert_frees_host_copies("dropping", || drop(dropped));
}

/// `release` (`what`: a close or a drop of a suspended session holding 96 MiB) gives back most of that memory.
fn assert_frees_host_copies(what: &str, release: impl FnOnce()) {
    let suspended = resident();
    release();
    let after = resident();
    assert!(
        after + 64 * MIB < suspended,
        "{what} a suspended session kept its host copies: {} MiB resident before, {} MiB after",
        suspended / MIB,
        after / MIB
    );
}

vulkan_only!(
    two_hundred_suspend_resume_cycles_keep_resident_memory_flat,
    measures_memory
);
fn two_hundred_suspend_resume_cycles_keep_resident_memory_flat(backend: &Backend) {
    let mut session = backend.open();
    let mut rng = Rng::fresh("suspend cycles");
    let data = random(&mut rng, (16 * MIB / 4) as usize);
    let tensor = session.upload(&data, &[data.len()]).expect("16 MiB");
    let cycle = |session: &mut Session| {
        session.suspend().expect("suspend");
        session.resume().expect("resume");
        tensor.scale_add_(1.0, 0.0).expect("compute after resume");
        session.sync().expect("sync");
        let stats = session.memory_stats().expect("stats");
        (resident(), stats.reserved, stats.slabs)
    };
    for _ in 0..10 {
        cycle(&mut session);
    }
    let (after_warm_up, reserved, slabs) = cycle(&mut session);
    let mut after_last = after_warm_up;
    for _ in 0..200 {
        let figures = cycle(&mut session);
        assert_eq!(
            (figures.1, figures.2),
            (reserved, slabs),
            "the pool grew across cycles"
        );
        after_last = figures.0;
    }
    eprintln!(
        "200 suspend/resume cycles of 16 MiB: resident after warm-up {} MiB, after the last {} MiB",
        after_warm_up / MIB,
        after_last / MIB
    );
    assert!(
        (after_last as i64 - after_warm_up as i64) < (16 * MIB) as i64,
        "resident memory grew from {after_warm_up} to {after_last} bytes"
    );
    assert_eq!(bits(&tensor.to_vec().expect("read")), bits(&data));
}

vulkan_only!(a_lost_device_cannot_be_suspended_and_its_session_still_closes);
fn a_lost_device_cannot_be_suspended_and_its_session_still_closes(backend: &Backend) {
    let mut session = backend.open();
    let tensor = session.full(&[1000], 1.0).expect("tensor");
    session.simulate_device_loss();
    assert!(matches!(session.suspend(), Err(Error::DeviceLost { .. })));
    assert!(!session.is_suspended());
    assert!(matches!(session.resume(), Err(Error::NotSuspended)));
    assert!(matches!(tensor.to_vec(), Err(Error::DeviceLost { .. })));
    let report = session.close();
    assert!(report.device_lost);
}

vulkan_only!(the_cap_of_an_open_session_changes_unless_live_tensors_need_more);
fn the_cap_of_an_open_session_changes_unless_live_tensors_need_more(backend: &Backend) {
    let mut session = backend.open();
    let kept = session.zeros(&[1 << 20]).expect("4 MiB");
    match session.set_memory_limit(Some(MemoryLimit::Bytes(2 << 20))) {
        Err(Error::OutOfMemory { limit, .. }) => assert_eq!(limit, Some(2 << 20)),
        other => panic!("a cap below the live tensors: {other:?}"),
    }
    assert_eq!(session.memory_stats().expect("stats").limit, None);
    drop(kept);
    session
        .set_memory_limit(Some(MemoryLimit::Bytes(2 << 20)))
        .expect("room once the tensor is gone");
    assert_eq!(session.memory_stats().expect("stats").limit, Some(2 << 20));
    assert!(matches!(
        session.zeros(&[1 << 20]),
        Err(Error::OutOfMemory { .. })
    ));
    session.set_memory_limit(None).expect("uncapped");
    assert!(session.zeros(&[1 << 20]).is_ok());
}
