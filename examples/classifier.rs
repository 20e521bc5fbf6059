//! A classifier of three interleaved spirals, trained with minibatches drawn on the device, then inference
//! without a tape, and a checkpoint saved and loaded into a new session. Run: cargo run --release --example classifier

use wgcompute::checkpoint::{self, Checkpoint};
use wgcompute::data::{Dataset, Labels};
use wgcompute::{Adam, AdamConfig, Mlp, Session, SessionOptions};

fn main() -> wgcompute::Result<()> {
    let session = Session::open(SessionOptions::default())?;

    // Host ↔ device: upload f32 or u32 data, read it back whole or as one value.
    let x = session.upload(&[1.0, 2.0, 3.0, 4.0], &[2, 2])?;
    let rows = session.upload_u32(&[1, 0], &[2])?;
    assert_eq!(x.gather_rows(&rows)?.to_vec()?, vec![3.0, 4.0, 1.0, 2.0]);
    assert_eq!(x.sum(None)?.item()?, 10.0);
    assert_eq!(x.argmax(Some(1))?.to_vec_u32()?, vec![1, 1]);

    // The dataset goes to the device once; each epoch uploads one shuffled order, and every minibatch is
    // gathered from it on the device.
    let (points, labels) = spirals(3, 600);
    let data = Dataset::upload(&session, &points, 2, Labels::Classes(&labels), 3)?;
    let model = Mlp::new(&session, 2, &[64, 64], 3, 1)?;
    let mut adam = Adam::new(AdamConfig {
        lr: 0.01,
        ..AdamConfig::default()
    });
    for epoch in 0..20 {
        let figures = data.train_epoch(&model, &mut adam, 32, 7, epoch, |_| {})?;
        if epoch % 5 == 4 {
            println!(
                "epoch {}: loss {:.3}, accuracy {:.1}%",
                epoch + 1,
                figures.loss,
                figures.accuracy * 100.0
            );
        }
    }

    // Inference needs no tape.
    let probe = session.upload(&points[..40], &[20, 2])?;
    let predicted = model.infer(&probe)?.argmax(Some(1))?.to_vec_u32()?;

    // Save the model (layers.0.weight, layers.0.bias, ...) with Adam's state; load both in a new session.
    let path = std::env::temp_dir().join("spirals.safetensors");
    checkpoint::save(&path, &model, Some(&adam))?;
    session.close();

    let session = Session::open(SessionOptions::default())?;
    let file = Checkpoint::read(&path)?;
    let loaded = file.model(&session)?;
    let mut resumed = Adam::new(AdamConfig {
        lr: 0.01,
        ..AdamConfig::default()
    });
    file.restore_optimizer(&session, &loaded, &mut resumed)?;
    let probe = session.upload(&points[..40], &[20, 2])?;
    assert_eq!(
        loaded.infer(&probe)?.argmax(Some(1))?.to_vec_u32()?,
        predicted
    );
    let accuracy = Dataset::upload(&session, &points, 2, Labels::Classes(&labels), 3)?
        .evaluate(&loaded, 1024)?;
    println!(
        "loaded from {}: accuracy {:.1}%",
        path.display(),
        accuracy.accuracy * 100.0
    );
    std::fs::remove_file(&path).ok();
    Ok(())
}

/// `classes` spirals of `per_class` points each, with a little seeded noise: points [n, 2] and labels [n].
fn spirals(classes: usize, per_class: usize) -> (Vec<f32>, Vec<u32>) {
    let mut state = 1u64;
    let mut noise = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.2
    };
    let (mut points, mut labels) = (Vec::new(), Vec::new());
    for class in 0..classes {
        for i in 0..per_class {
            let radius = i as f32 / per_class as f32;
            let angle = class as f32 * 4.0 + radius * 4.0 + noise();
            points.extend([radius * angle.sin(), radius * angle.cos()]);
            labels.push(class as u32);
        }
    }
    (points, labels)
}
