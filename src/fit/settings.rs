//! The error every check of a fit's settings returns, and the `name:key=value` spelling that schedules and
//! early stopping are written in.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};
use crate::nn::Sequential;

pub(super) fn invalid(
    what: &'static str,
    given: impl fmt::Display,
    expected: impl Into<String>,
) -> Error {
    Error::InvalidArgument {
        what,
        given: given.to_string(),
        expected: expected.into(),
    }
}

/// The width of `model`'s outputs where each sample gives one vector (the logits, labels or targets a fit
/// and a prediction take); an error naming the shape otherwise.
pub(super) fn output_width(model: &Sequential) -> Result<usize> {
    match *model.output_shape() {
        [outputs] => Ok(outputs),
        ref shape => Err(invalid(
            "model",
            format!("samples out of shape {shape:?}"),
            "one vector per sample: the logits, labels or targets",
        )),
    }
}

/// `key=value` settings after a name's colon; each key at most once, every one known.
pub(super) fn settings(
    what: &'static str,
    text: &str,
    known: &[(&str, &str)],
) -> Result<HashMap<String, String>> {
    let mut found = HashMap::new();
    let usage = || {
        let keys: Vec<String> = known
            .iter()
            .map(|(key, default)| format!("{key}={default}"))
            .collect();
        format!("settings among {}", keys.join(","))
    };
    for (key, default) in known {
        found.insert(key.to_string(), default.to_string());
    }
    if text.is_empty() {
        return Ok(found);
    }
    let mut seen = Vec::new();
    for part in text.split(',') {
        let (key, value) = part
            .split_once('=')
            .ok_or_else(|| invalid(what, part, usage()))?;
        if !known.iter().any(|(name, _)| *name == key) || seen.contains(&key) {
            return Err(invalid(what, part, usage()));
        }
        seen.push(key);
        found.insert(key.to_string(), value.to_string());
    }
    Ok(found)
}

pub(super) fn parse_setting<T: FromStr>(
    what: &'static str,
    values: &HashMap<String, String>,
    key: &str,
) -> Result<T> {
    let text = values.get(key).map(String::as_str).unwrap_or("");
    text.parse()
        .map_err(|_| invalid(what, format!("{key}={text}"), format!("a number for {key}")))
}
