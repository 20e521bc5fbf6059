//! Per-feature standardisation of a fit's inputs, fitted on the training rows only and kept in its checkpoint.

use crate::error::Result;

use super::settings::invalid;

/// Per-feature `(x - mean) / scale`, with the mean and the standard deviation (numpy's, ddof 0) of the rows it
/// was fitted on; a feature that does not vary gets scale 1 (scikit-learn's `StandardScaler` rule), so it
/// becomes 0 rather than NaN.
#[derive(Clone, Debug, PartialEq)]
pub struct Standardizer {
    mean: Vec<f32>,
    scale: Vec<f32>,
}

impl Standardizer {
    /// Fitted on the rows of `inputs` (row-major, `features` wide) picked by `rows`, or on every row for `None`.
    /// Sums run in f64, so the statistics do not depend on the row count's rounding.
    pub fn fit(inputs: &[f32], features: usize, rows: Option<&[u32]>) -> Result<Self> {
        if features == 0 || !inputs.len().is_multiple_of(features) || inputs.is_empty() {
            return Err(invalid(
                "standardization inputs",
                format!("{} values in rows of {features}", inputs.len()),
                "a whole number of rows, at least one, of at least one feature",
            ));
        }
        let all: Vec<u32>;
        let rows = match rows {
            Some(rows) => rows,
            None => {
                all = (0..(inputs.len() / features) as u32).collect();
                &all
            }
        };
        let samples = inputs.len() / features;
        if rows.is_empty() || rows.iter().any(|&row| row as usize >= samples) {
            return Err(invalid(
                "standardization rows",
                format!("{} rows", rows.len()),
                format!("at least one row, each below the {samples} samples"),
            ));
        }
        let row = |index: u32| &inputs[index as usize * features..(index as usize + 1) * features];
        let count = rows.len() as f64;
        let mut mean = vec![0.0f64; features];
        for &index in rows {
            for (total, &value) in mean.iter_mut().zip(row(index)) {
                *total += value as f64;
            }
        }
        mean.iter_mut().for_each(|total| *total /= count);
        let mut variance = vec![0.0f64; features];
        for &index in rows {
            for ((total, &value), mean) in variance.iter_mut().zip(row(index)).zip(&mean) {
                let deviation = value as f64 - mean;
                *total += deviation * deviation;
            }
        }
        let scale = variance
            .iter()
            .map(|total| {
                let deviation = (total / count).sqrt() as f32;
                if deviation > 0.0 && deviation.is_finite() {
                    deviation
                } else {
                    1.0
                }
            })
            .collect();
        Self::from_parts(mean.iter().map(|&mean| mean as f32).collect(), scale)
    }

    /// A standardizer of given means and scales (as a checkpoint holds them): finite, scales above 0.
    pub fn from_parts(mean: Vec<f32>, scale: Vec<f32>) -> Result<Self> {
        if mean.len() != scale.len() || mean.is_empty() {
            return Err(invalid(
                "standardization",
                format!("{} means and {} scales", mean.len(), scale.len()),
                "one of each per feature, at least one feature",
            ));
        }
        if let Some(bad) = mean.iter().find(|mean| !mean.is_finite()) {
            return Err(invalid("standardization mean", bad, "a finite number"));
        }
        if let Some(bad) = scale
            .iter()
            .find(|scale| !(scale.is_finite() && **scale > 0.0))
        {
            return Err(invalid(
                "standardization scale",
                bad,
                "a finite number above 0",
            ));
        }
        Ok(Self { mean, scale })
    }

    pub fn features(&self) -> usize {
        self.mean.len()
    }

    pub fn mean(&self) -> &[f32] {
        &self.mean
    }

    pub fn scale(&self) -> &[f32] {
        &self.scale
    }

    /// `inputs` (rows of `features()` values) standardised, in f32: `(x - mean) / scale`.
    pub fn apply(&self, inputs: &[f32]) -> Result<Vec<f32>> {
        let features = self.features();
        if !inputs.len().is_multiple_of(features) {
            return Err(invalid(
                "standardized inputs",
                format!("{} values", inputs.len()),
                format!("whole rows of the {features} features the standardization was fitted on"),
            ));
        }
        Ok(inputs
            .chunks(features)
            .flat_map(|row| {
                row.iter()
                    .zip(&self.mean)
                    .zip(&self.scale)
                    .map(|((&value, &mean), &scale)| (value - mean) / scale)
            })
            .collect())
    }
}
