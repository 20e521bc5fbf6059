//! A classifier's user labels, which need not be `0..K-1`, mapped to class ids and back.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

use super::settings::invalid;

/// The user's integer label of each class id, in increasing order: labels `1, 2, 3` become ids `0, 1, 2` and
/// come back as they were, so a model never has a class no label names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassLabels {
    labels: Vec<i64>,
}

impl ClassLabels {
    /// The classes of `labels` (their distinct values, sorted) and each label's class id. Fewer than two
    /// distinct labels is an error: a classifier of one class learns nothing.
    pub fn from_labels(labels: &[i64]) -> Result<(Self, Vec<u32>)> {
        let mut distinct = labels.to_vec();
        distinct.sort_unstable();
        distinct.dedup();
        if distinct.len() < 2 {
            return Err(invalid(
                "class labels",
                format!("{} distinct label(s)", distinct.len()),
                "at least 2 classes among the labels",
            ));
        }
        if distinct.len() > u32::MAX as usize {
            return Err(invalid(
                "class labels",
                format!("{} distinct labels", distinct.len()),
                "at most 2^32 - 1 classes",
            ));
        }
        let classes = Self { labels: distinct };
        let ids = classes.ids(labels)?;
        Ok((classes, ids))
    }

    /// Classes labelled `0..classes`.
    pub fn identity(classes: usize) -> Self {
        Self {
            labels: (0..classes as i64).collect(),
        }
    }

    /// Classes of given labels, which must be distinct and increasing (as a checkpoint holds them).
    pub fn from_sorted(labels: Vec<i64>) -> Result<Self> {
        if labels.len() < 2 || labels.windows(2).any(|pair| pair[0] >= pair[1]) {
            return Err(invalid(
                "class labels",
                format!("{labels:?}"),
                "two or more distinct labels in increasing order",
            ));
        }
        Ok(Self { labels })
    }

    pub fn len(&self) -> usize {
        self.labels.len()
    }

    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// Whether each class id is its own label.
    pub fn is_identity(&self) -> bool {
        self.labels
            .iter()
            .enumerate()
            .all(|(id, &label)| id as i64 == label)
    }

    pub fn labels(&self) -> &[i64] {
        &self.labels
    }

    /// The class id of each label; a label of no class is an error naming it.
    pub fn ids(&self, labels: &[i64]) -> Result<Vec<u32>> {
        labels
            .iter()
            .enumerate()
            .map(|(index, label)| {
                self.labels
                    .binary_search(label)
                    .map(|id| id as u32)
                    .map_err(|_| {
                        invalid(
                            "class label",
                            format!("{label} at index {index}"),
                            format!("one of the model's classes {}", self),
                        )
                    })
            })
            .collect()
    }

    /// The label of class `id`.
    pub fn label(&self, id: u32) -> Option<i64> {
        self.labels.get(id as usize).copied()
    }
}

impl fmt::Display for ClassLabels {
    /// The labels between commas, as a checkpoint's metadata keeps them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown: Vec<String> = self.labels.iter().map(i64::to_string).collect();
        f.write_str(&shown.join(","))
    }
}

impl FromStr for ClassLabels {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self> {
        let labels = text
            .split(',')
            .map(|part| part.parse::<i64>())
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|_| invalid("class labels", text, "integers between commas"))?;
        Self::from_sorted(labels)
    }
}
