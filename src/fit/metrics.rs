//! Prediction with a trained model, and the figures (accuracy, log-loss, a confusion matrix) of what it predicts.

use crate::data::check_class_ids;
use crate::error::Result;
use crate::nn::{ActivatedMlp, Activation, Mlp, Module, Sequential};
use crate::session::Session;

use super::settings::{invalid, output_width};
use super::standardize::Standardizer;

/// Rows evaluated or predicted per batch: bounds the device memory of inference, whatever the dataset.
pub const INFERENCE_BATCH: usize = 4096;
/// The most classes [`Metrics`] counts a confusion matrix for: its size grows with their square.
pub const MAX_CONFUSION_CLASSES: usize = 1024;

/// Class probabilities `[samples, classes]` (row-major) of `inputs` (rows of the model's input width), after
/// `standardizer` where there is one, [`INFERENCE_BATCH`] rows at a time.
pub fn predict_probabilities(
    session: &Session,
    model: &Mlp,
    standardizer: Option<&Standardizer>,
    inputs: &[f32],
) -> Result<Vec<f32>> {
    predict_outputs_of(session, model, Activation::Relu, standardizer, inputs, true)
}

/// [`predict_probabilities`] of a [`Sequential`] whose samples are rows of `product(input_shape)` values and
/// whose outputs are logits, one vector per sample.
pub fn predict_sequential_probabilities(
    session: &Session,
    model: &Sequential,
    standardizer: Option<&Standardizer>,
    inputs: &[f32],
) -> Result<Vec<f32>> {
    let features = model.input_values();
    predict_rows(
        session,
        model,
        (features, output_width(model)?),
        standardizer,
        inputs,
        true,
    )
}

/// The outputs `[samples, outputs]` (row-major, before any output activation) of `model` with `activation`
/// between its hidden layers, for `inputs` as [`predict_probabilities`] takes them.
pub fn predict_outputs(
    session: &Session,
    model: &Mlp,
    activation: Activation,
    standardizer: Option<&Standardizer>,
    inputs: &[f32],
) -> Result<Vec<f32>> {
    predict_outputs_of(session, model, activation, standardizer, inputs, false)
}

fn predict_outputs_of(
    session: &Session,
    mlp: &Mlp,
    activation: Activation,
    standardizer: Option<&Standardizer>,
    inputs: &[f32],
    softmax: bool,
) -> Result<Vec<f32>> {
    let sizes = mlp.sizes();
    let shape = (sizes[0], *sizes.last().unwrap_or(&0));
    let module = ActivatedMlp { mlp, activation };
    predict_rows(session, &module, shape, standardizer, inputs, softmax)
}

/// The outputs of `model`, of `features` inputs and `classes` outputs, for rows of `inputs`.
fn predict_rows(
    session: &Session,
    model: &dyn Module,
    (features, classes): (usize, usize),
    standardizer: Option<&Standardizer>,
    inputs: &[f32],
    softmax: bool,
) -> Result<Vec<f32>> {
    if inputs.is_empty() || !inputs.len().is_multiple_of(features) {
        return Err(invalid(
            "inputs",
            format!("{} values", inputs.len()),
            format!("one or more whole rows of the model's {features} features"),
        ));
    }
    let standardized;
    let inputs = match standardizer {
        Some(standardizer) => {
            if standardizer.features() != features {
                return Err(invalid(
                    "standardization",
                    format!("{} features", standardizer.features()),
                    format!("the model's {features}"),
                ));
            }
            standardized = standardizer.apply(inputs)?;
            &standardized[..]
        }
        None => inputs,
    };
    let samples = inputs.len() / features;
    let mut probabilities = Vec::with_capacity(samples * classes);
    for first in (0..samples).step_by(INFERENCE_BATCH) {
        let rows = INFERENCE_BATCH.min(samples - first);
        let batch = session.upload(
            &inputs[first * features..(first + rows) * features],
            &[rows, features],
        )?;
        let outputs = model.infer(&batch)?;
        let rows = if softmax { outputs.softmax()? } else { outputs };
        probabilities.extend(rows.to_vec()?);
    }
    Ok(probabilities)
}

/// The most probable class of each row of `probabilities` (the first on ties).
pub fn most_probable(probabilities: &[f32], classes: usize) -> Vec<u32> {
    probabilities
        .chunks(classes.max(1))
        .map(|row| {
            row.iter().enumerate().fold(
                0,
                |best, (index, &value)| if value > row[best] { index } else { best },
            ) as u32
        })
        .collect()
}

/// Figures of predicted probabilities against true class ids.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Metrics {
    pub samples: usize,
    pub accuracy: f64,
    /// Mean of `−ln p(true class)`, each probability clipped below at f32's epsilon (scikit-learn's
    /// `log_loss` for float32 probabilities).
    pub log_loss: f64,
    /// `confusion[true][predicted]`: how many samples of each class were predicted as each; `None` for more
    /// than [`MAX_CONFUSION_CLASSES`] classes, whose matrix would outgrow memory.
    pub confusion: Option<Vec<Vec<u64>>>,
}

impl Metrics {
    /// The figures of `probabilities` (`[samples, classes]`) for true class ids `truth`.
    pub fn of(probabilities: &[f32], classes: usize, truth: &[u32]) -> Result<Self> {
        if classes == 0 || probabilities.len() != truth.len() * classes {
            return Err(invalid(
                "metrics",
                format!(
                    "{} probabilities for {} samples",
                    probabilities.len(),
                    truth.len()
                ),
                format!("{classes} per sample"),
            ));
        }
        check_class_ids("metrics", truth, classes)?;
        let predicted = most_probable(probabilities, classes);
        let mut confusion =
            (classes <= MAX_CONFUSION_CLASSES).then(|| vec![vec![0u64; classes]; classes]);
        let mut right = 0usize;
        let mut loss = 0.0f64;
        for ((row, &want), &got) in probabilities.chunks(classes).zip(truth).zip(&predicted) {
            if let Some(confusion) = &mut confusion {
                confusion[want as usize][got as usize] += 1;
            }
            right += usize::from(want == got);
            loss -= (row[want as usize].max(f32::EPSILON) as f64).ln();
        }
        let samples = truth.len();
        let count = samples.max(1) as f64;
        Ok(Self {
            samples,
            accuracy: right as f64 / count,
            log_loss: loss / count,
            confusion,
        })
    }
}
