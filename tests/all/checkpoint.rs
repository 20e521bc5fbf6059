//! Inference without a tape, and safetensors checkpoints: a model and its optimizer saved and loaded into a new
//! session give the same outputs and the same next step; the file read back by the safetensors crate's own
//! parser holds our names, shapes, values and metadata; files that do not fit are errors naming the tensor.

use std::sync::Arc;

use crate::common::{for_each_backend, on_vulkan, relative_error, widen, Rng};
use wgcompute::checkpoint::{self, Checkpoint};
use wgcompute::{Adam, AdamConfig, Error, Mlp, Optimizer, Session, Sgd, Tape};

fn temp_path(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!(
        "wgcompute-{name}-{}-{:?}.safetensors",
        std::process::id(),
        std::thread::current().id()
    ))
}

/// (x, one-hot labels) of a small random problem.
fn problem(rng: &mut Rng, batch: usize, inputs: usize, classes: usize) -> (Vec<f32>, Vec<f32>) {
    let x = rng.vec(batch * inputs, -1.0, 1.0);
    let mut labels = vec![0.0; batch * classes];
    for row in 0..batch {
        labels[row * classes + (rng.next_u64() % classes as u64) as usize] = 1.0;
    }
    (x, labels)
}

/// One step of softmax cross-entropy on (x, labels); returns the loss before it.
fn step(
    session: &Session,
    model: &Mlp,
    optimizer: &mut dyn Optimizer,
    x: &[f32],
    labels: &[f32],
    batch: usize,
) -> f32 {
    let inputs = x.len() / batch;
    let classes = labels.len() / batch;
    let mut tape = Tape::new();
    let xv = tape.input(session.upload(x, &[batch, inputs]).expect("x"));
    let yv = tape.input(session.upload(labels, &[batch, classes]).expect("labels"));
    let logits = model.forward(&mut tape, xv).expect("forward");
    let losses = tape.softmax_cross_entropy(logits, yv).expect("xent");
    let cost = tape.mean(losses).expect("mean");
    let loss = tape.value(cost).expect("cost").item().expect("item");
    let gradients = tape.backward(cost).expect("backward");
    optimizer
        .step(&model.parameters(), &gradients)
        .expect("step");
    loss
}

#[test]
fn infer_gives_the_tapes_forward_values() {
    let mut rng = Rng::fresh("infer");
    for_each_backend(|backend| {
        let session = backend.poisoned();
        let model = Mlp::new(&session, 13, &[33, 7], 5, 3).expect("model");
        let x = rng.vec(9 * 13, -1.0, 1.0);
        let input = Arc::new(session.upload(&x, &[9, 13]).expect("x"));
        let mut tape = Tape::new();
        let xv = tape.constant(&input);
        let y = model.forward(&mut tape, xv).expect("forward");
        let taped = tape.value(y).expect("y").to_vec().expect("read");
        let inferred = model.infer(&input).expect("infer").to_vec().expect("read");
        assert_eq!(taped, inferred);
        assert_eq!(model.sizes(), vec![13, 33, 7, 5]);
        session.close();
    });
}

#[test]
fn a_saved_model_and_optimizer_load_into_a_new_session_and_continue_identically() {
    let mut rng = Rng::fresh("checkpoint round trip");
    let path = temp_path("round-trip");
    for_each_backend(|backend| {
        let (batch, inputs, classes) = (8, 6, 3);
        let (x, labels) = problem(&mut rng, batch, inputs, classes);
        let (x2, labels2) = problem(&mut rng, batch, inputs, classes);
        for use_adam in [true, false] {
            let session = backend.open();
            let model = Mlp::new(&session, inputs, &[10], classes, 11).expect("model");
            let mut optimizer: Box<dyn Optimizer> = if use_adam {
                Box::new(Adam::new(AdamConfig {
                    lr: 0.05,
                    ..AdamConfig::default()
                }))
            } else {
                Box::new(Sgd::new(0.1, 0.9))
            };
            for _ in 0..3 {
                step(&session, &model, optimizer.as_mut(), &x, &labels, batch);
            }
            checkpoint::save(&path, &model, Some(optimizer.as_ref())).expect("save");
            let input = session.upload(&x2, &[batch, inputs]).expect("x2");
            let before = model.infer(&input).expect("infer").to_vec().expect("read");
            step(&session, &model, optimizer.as_mut(), &x2, &labels2, batch);
            let continued = model.infer(&input).expect("infer").to_vec().expect("read");
            session.close();

            let fresh = backend.poisoned();
            let file = Checkpoint::read(&path).expect("read");
            let loaded = file.model(&fresh).expect("model");
            let input = fresh.upload(&x2, &[batch, inputs]).expect("x2");
            assert_eq!(
                loaded.infer(&input).expect("infer").to_vec().expect("read"),
                before
            );
            let mut resumed: Box<dyn Optimizer> = if use_adam {
                Box::new(Adam::new(AdamConfig {
                    lr: 0.05,
                    ..AdamConfig::default()
                }))
            } else {
                Box::new(Sgd::new(0.1, 0.9))
            };
            assert!(file
                .restore_optimizer(&fresh, &loaded, resumed.as_mut())
                .expect("restore"));
            if use_adam {
                assert_eq!(resumed.state().steps, 3);
            }
            step(&fresh, &loaded, resumed.as_mut(), &x2, &labels2, batch);
            let after = loaded.infer(&input).expect("infer").to_vec().expect("read");
            let error = relative_error(&after, &widen(&continued));
            assert!(
                error < 1e-6,
                "adam {use_adam}: resumed step differs by {error:e}"
            );
            fresh.close();
        }
    });
    std::fs::remove_file(&path).ok();
}

/// Two saves of one model with the same settings give the same bytes (the header lists metadata in key order,
/// not a hash map's), and metadata with quotes, backslashes, control and non-ASCII characters reads back whole.
#[test]
fn saves_are_byte_identical_and_metadata_survives_escaping() {
    on_vulkan(|backend| {
        let session = backend.open();
        let model = Mlp::new(&session, 6, &[5, 4], 3, 9).expect("model");
        let tricky = "a \"quoted\" C:\\path\n\ttab \u{1} ünïcødé ✓".to_string();
        let extra = [
            ("zeta", "last".to_string()),
            ("alpha", tricky.clone()),
            ("mid", String::new()),
        ];
        let first = checkpoint::to_bytes(&model, None, &extra).expect("bytes");
        let reordered = [extra[2].clone(), extra[0].clone(), extra[1].clone()];
        for _ in 0..3 {
            let again = checkpoint::to_bytes(&model, None, &reordered).expect("bytes");
            assert!(again == first, "a second save gave other bytes");
        }
        let (_, header) = safetensors::SafeTensors::read_metadata(&first).expect("header");
        let metadata = header.metadata().clone().expect("metadata");
        assert_eq!(metadata.get("alpha"), Some(&tricky));
        assert_eq!(metadata.get("mid").map(String::as_str), Some(""));
        assert_eq!(metadata.get("zeta").map(String::as_str), Some("last"));
        // The tensors start 8-byte aligned, as the format's readers expect.
        let header_length = u64::from_le_bytes(first[..8].try_into().expect("8 bytes"));
        assert_eq!(header_length % 8, 0);
        session.close();
    });
}

#[test]
fn a_second_reader_finds_our_names_shapes_values_and_metadata() {
    let path = temp_path("second-reader");
    on_vulkan(|backend| {
        let session = backend.open();
        let model = Mlp::new(&session, 5, &[7], 3, 2).expect("model");
        checkpoint::save(&path, &model, None).expect("save");
        let bytes = std::fs::read(&path).expect("the file");
        let file = safetensors::SafeTensors::deserialize(&bytes).expect("safetensors parses it");
        let mut names = file.names();
        names.sort_unstable();
        assert_eq!(
            names,
            vec![
                "layers.0.bias",
                "layers.0.weight",
                "layers.1.bias",
                "layers.1.weight"
            ]
        );
        for (name, tensor) in model.named_parameters() {
            let view = file.tensor(&name).expect("named");
            assert_eq!(view.dtype(), safetensors::Dtype::F32, "{name}");
            assert_eq!(view.shape(), tensor.shape(), "{name}");
            let values: Vec<f32> = view
                .data()
                .chunks_exact(4)
                .map(|bytes| f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
                .collect();
            assert_eq!(values, tensor.to_vec().expect("read"), "{name}");
        }
        let (_, header) = safetensors::SafeTensors::read_metadata(&bytes).expect("header");
        let metadata = header.metadata().clone().expect("metadata");
        assert_eq!(metadata.get("sizes").map(String::as_str), Some("5,7,3"));
        assert_eq!(
            metadata.get("format").map(String::as_str),
            Some("wgcompute.mlp")
        );
        session.close();
    });
    std::fs::remove_file(&path).ok();
}

#[test]
fn files_that_do_not_fit_are_errors_naming_the_tensor() {
    let path = temp_path("mismatch");
    on_vulkan(|backend| {
        let session = backend.open();
        let model = Mlp::new(&session, 5, &[7], 3, 2).expect("model");
        checkpoint::save(&path, &model, None).expect("save");
        let file = Checkpoint::read(&path).expect("read");
        let other = Mlp::new(&session, 5, &[8], 3, 2).expect("another architecture");
        let before = other.layers[0].weight.to_vec().expect("read");
        match file.load_into(&other) {
            Err(Error::Checkpoint { message, .. }) => {
                assert!(
                    message.contains("layers.0.weight") && message.contains("[5, 7]"),
                    "{message}"
                )
            }
            other => panic!("expected a checkpoint error, got {other:?}"),
        }
        assert_eq!(
            other.layers[0].weight.to_vec().expect("read"),
            before,
            "nothing changed"
        );
        let deeper = Mlp::new(&session, 5, &[7, 4], 3, 2).expect("deeper");
        assert!(
            matches!(file.load_into(&deeper), Err(Error::Checkpoint { message, .. }) if message.contains("layers.1.weight"))
        );
        let mut sgd = Sgd::new(0.1, 0.0);
        assert!(!file
            .restore_optimizer(&session, &model, &mut sgd)
            .expect("no optimizer state"));

        std::fs::write(&path, b"not a checkpoint at all").expect("write junk");
        assert!(matches!(
            Checkpoint::read(&path),
            Err(Error::Checkpoint { .. })
        ));
        assert!(matches!(
            Checkpoint::read(temp_path("missing")),
            Err(Error::Checkpoint { .. })
        ));
        // Still working.
        assert_eq!(model.sizes(), vec![5, 7, 3]);
        session.close();
    });
    std::fs::remove_file(&path).ok();
}

/// Any model's tensors (f32 and u32, any shapes) save by name and load back bit for bit, into a session on
/// another backend or into tensors that exist; names, dtypes and shapes that do not fit are errors naming the
/// tensor, and nothing changes.
#[test]
fn named_tensors_of_any_model_save_and_load_bit_for_bit() {
    let path = temp_path("named");
    let refused = temp_path("named-refused");
    let mut rng = Rng::fresh("named tensors");
    let last = crate::common::backends().pop().expect("a backend");
    on_vulkan(|vulkan| {
        let source = vulkan.poisoned();
        let values = [
            ("embedding", vec![7, 3], rng.vec(21, -1.0, 1.0)),
            ("scale", vec![1], rng.vec(1, -1.0, 1.0)),
            ("blocks.0.cube", vec![2, 3, 4], rng.vec(24, -1e30, 1e30)),
        ];
        let floats: Vec<wgcompute::Tensor> = values
            .iter()
            .map(|(_, shape, data)| source.upload(data, shape).expect("upload"))
            .collect();
        let ids = source
            .upload_u32(&[4, 0, 6, 2, u32::MAX], &[5])
            .expect("ids");
        let mut named: Vec<(&str, &wgcompute::Tensor)> = values
            .iter()
            .zip(&floats)
            .map(|((name, _, _), tensor)| (*name, tensor))
            .collect();
        named.push(("ids", &ids));
        checkpoint::save_tensors(&path, &named, &[("model", "toy".to_string())]).expect("save");
        let file = Checkpoint::read(&path).expect("read");
        assert_eq!(
            file.names().expect("names"),
            ["blocks.0.cube", "embedding", "ids", "scale"]
        );
        assert_eq!(
            file.metadata().get("model").map(String::as_str),
            Some("toy")
        );
        // The crate's own parser sees the u32 tensor as U32.
        let bytes = std::fs::read(&path).expect("bytes");
        let parsed = safetensors::SafeTensors::deserialize(&bytes).expect("parses");
        assert_eq!(
            parsed.tensor("ids").expect("ids").dtype(),
            safetensors::Dtype::U32
        );

        // Into a session on the last backend (GL where present).
        let target = last.poisoned();
        for (name, shape, data) in &values {
            let loaded = file.tensor(&target, name).expect("load");
            assert_eq!(loaded.shape(), &shape[..], "{name}");
            let got = loaded.to_vec().expect("read");
            assert!(
                got.iter()
                    .zip(data)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "{name} changed"
            );
        }
        assert_eq!(
            file.tensor(&target, "ids")
                .expect("ids")
                .to_vec_u32()
                .expect("read"),
            vec![4, 0, 6, 2, u32::MAX]
        );
        let existing = target.zeros(&[7, 3]).expect("zeros");
        file.load_tensor_into("embedding", &existing)
            .expect("load into");
        assert_eq!(existing.to_vec().expect("read"), values[0].2);

        // What does not fit is refused, naming the tensor, and the target keeps its values.
        let wrong_shape = target.zeros(&[3, 7]).expect("zeros");
        let wrong_dtype = target.upload_u32(&[0; 21], &[7, 3]).expect("u32");
        for (name, tensor) in [("embedding", &wrong_shape), ("embedding", &wrong_dtype)] {
            match file.load_tensor_into(name, tensor) {
                Err(Error::Checkpoint { message, .. }) => {
                    assert!(message.contains(name), "{message}")
                }
                other => panic!("expected a checkpoint error, got {other:?}"),
            }
        }
        assert!(wrong_shape
            .to_vec()
            .expect("read")
            .iter()
            .all(|&v| v == 0.0));
        assert!(matches!(
            file.tensor(&target, "missing"),
            Err(Error::Checkpoint { message, .. }) if message.contains("missing")
        ));
        for bad in [
            vec![("twice", &floats[0]), ("twice", &floats[1])],
            vec![("", &floats[0])],
            vec![("__metadata__", &floats[0])],
        ] {
            assert!(matches!(
                checkpoint::save_tensors(&refused, &bad, &[]),
                Err(Error::Checkpoint { .. })
            ));
            assert!(!refused.exists(), "a refused save wrote a file");
        }
        // The session goes on.
        assert_eq!(
            target
                .upload(&[1.0], &[1])
                .expect("upload")
                .item()
                .expect("item"),
            1.0
        );
    });
    std::fs::remove_file(&path).ok();
}
