//! A small convolutional network on the 8×8 handwritten digits, trained by the library's fit loop: the model is
//! a JSON config of Keras's layers, the loop holds the validation split, the schedule and the history.
//! Run: cargo run --release --example digits_cnn [EPOCHS]
//!
//! The model, as examples/cnn_digits.py builds it in Python:
//!     Conv2D 16 3×3 same · BatchNormalization · relu · Conv2D 32 3×3 same relu · MaxPooling2D 2
//!     · Dropout 0.25 · Flatten · Dense 10
//! trained with Adam (lr 0.002, halved every 10 epochs) on minibatches of 32, a quarter of the images held out.

use wgcompute::data::Labels;
use wgcompute::fit::{FitConfig, Samples, Schedule, Trainer};
use wgcompute::nn::{Sequential, SequentialConfig};
use wgcompute::{Session, SessionOptions};

const MODEL: &str = r#"{"input_shape": [8, 8, 1], "layers": [
    {"class_name": "Conv2D", "config": {"filters": 16, "kernel_size": 3, "padding": "same"}},
    {"class_name": "BatchNormalization"},
    {"class_name": "Activation", "config": {"activation": "relu"}},
    {"class_name": "Conv2D", "config": {"filters": 32, "kernel_size": 3, "padding": "same", "activation": "relu"}},
    {"class_name": "MaxPooling2D", "config": {"pool_size": 2}},
    {"class_name": "Dropout", "config": {"rate": 0.25}},
    {"class_name": "Flatten"},
    {"class_name": "Dense", "config": {"units": 10}}]}"#;

/// The 1,797 images (pixels / 16, row by row) and their labels, from examples/data/digits.txt.
pub fn digits() -> (Vec<f32>, Vec<u32>) {
    let mut pixels = Vec::new();
    let mut labels = Vec::new();
    for line in include_str!("data/digits.txt").lines() {
        let Some((image, label)) = line.split_once(' ').filter(|_| !line.starts_with('#')) else {
            continue;
        };
        pixels.extend(
            image
                .chars()
                .filter_map(|digit| digit.to_digit(17))
                .map(|count| count as f32 / 16.0),
        );
        labels.extend(label.parse::<u32>().ok());
    }
    (pixels, labels)
}

/// The fit of the CNN for `epochs` epochs from `seed`: the trainer after its last epoch.
pub fn train(session: &Session, epochs: usize, seed: u64) -> wgcompute::Result<Trainer> {
    let (pixels, labels) = digits();
    let config = FitConfig {
        epochs,
        batch: 32,
        lr: 0.002,
        seed,
        standardize: false,
        val_split: 0.25,
        schedule: Schedule::Step {
            every: 10,
            factor: 0.5,
        },
        ..FitConfig::default()
    };
    let model = Sequential::new(session, SequentialConfig::from_json(MODEL)?, seed)?;
    let train = Samples {
        inputs: &pixels,
        features: 64,
        labels: Labels::Classes(&labels),
    };
    let mut trainer = Trainer::new_sequential(session, config, model, train, None)?;
    trainer.run()?;
    Ok(trainer)
}

fn main() -> wgcompute::Result<()> {
    let epochs = std::env::args()
        .nth(1)
        .and_then(|text| text.parse().ok())
        .unwrap_or(20);
    let session = Session::open(SessionOptions::default())?;
    let trainer = train(&session, epochs, 0)?;
    for epoch in trainer.history() {
        println!(
            "epoch {:2}: loss {:.4}, held-out accuracy {:.4} ({:.2} s)",
            epoch.epoch,
            epoch.loss,
            epoch.val_accuracy.unwrap_or(f64::NAN),
            epoch.seconds
        );
    }
    Ok(())
}
