//! The format of a file of ours (format=wgcompute.mlp): the metadata keys and tensor names an [`Mlp`] is saved
//! under, and the checks that a file read agrees with itself.
//!
//! [`Mlp`]: crate::nn::Mlp

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use safetensors::tensor::Dtype;

use crate::error::Result;

use super::reader::{first_f32_where, StoredLayout, TensorSource};
use super::{failure, DAMAGED};

/// The metadata key and value that mark a file as one of ours.
pub(super) const FORMAT_KEY: &str = "format";
pub(super) const FORMAT: &str = "wgcompute.mlp";
/// `[inputs, hidden…, outputs]`, comma-separated.
pub(super) const SIZES_KEY: &str = "sizes";
pub(super) const ACTIVATION_KEY: &str = "activation";
pub(super) const OPTIMIZER_KEY: &str = "optimizer";
pub(super) const OPTIMIZER_STEPS_KEY: &str = "optimizer.steps";

/// The only activation an [`Mlp`] applies between its layers.
pub(super) const ACTIVATION: &str = "relu";
const LAYER_PREFIX: &str = "layers.";
pub(super) const SLOT_PREFIX: &str = "optimizer.";
/// A copy of every parameter as it was at a fit's best epoch, for early stopping to restore.
pub(super) const BEST_PREFIX: &str = "best.";
/// The per-feature mean and scale a fit standardised its inputs with, [inputs] each.
pub(super) const STANDARDIZE_MEAN: &str = "standardize.mean";
pub(super) const STANDARDIZE_SCALE: &str = "standardize.scale";

pub(super) fn join(sizes: &[usize]) -> String {
    sizes
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

pub(super) struct MlpContents {
    pub(super) sizes: Vec<usize>,
    pub(super) optimizer: Option<SavedOptimizer>,
    /// Whether it holds `standardize.mean` and `standardize.scale`.
    pub(super) standardized: bool,
    /// Whether it holds a best-epoch copy of every parameter.
    pub(super) best: bool,
}

pub(super) struct SavedOptimizer {
    pub(super) kind: String,
    pub(super) steps: u64,
    /// The slots with tensors in the file; each holds one for every parameter.
    pub(super) slots: BTreeSet<String>,
}

#[derive(Clone, Copy)]
pub(super) enum Part {
    Weight,
    Bias,
}

impl Part {
    const BOTH: [Part; 2] = [Part::Weight, Part::Bias];

    fn name(self) -> &'static str {
        match self {
            Part::Weight => "weight",
            Part::Bias => "bias",
        }
    }
}

/// What a tensor name of ours means: a parameter of one layer, or one slot of optimizer state for it.
pub(super) struct TensorRole<'a> {
    pub(super) slot: Option<&'a str>,
    /// A best-epoch copy of the parameter rather than the parameter.
    pub(super) best: bool,
    layer: usize,
    part: Part,
}

/// `None` for a name that save never writes. Only the spelling save writes is taken ("layers.1", never
/// "layers.01"), so that two tensors cannot both claim one parameter.
pub(super) fn role_of(name: &str) -> Option<TensorRole<'_>> {
    let (best, name) = match name.strip_prefix(BEST_PREFIX) {
        Some(parameter) if !parameter.starts_with(SLOT_PREFIX) => (true, parameter),
        Some(_) => return None,
        None => (false, name),
    };
    let (slot, parameter) = match name.strip_prefix(SLOT_PREFIX) {
        Some(rest) => {
            let (slot, parameter) = rest.split_once('.')?;
            (Some(slot), parameter)
        }
        None => (None, name),
    };
    if slot == Some("") {
        return None;
    }
    let (index, part) = parameter.strip_prefix(LAYER_PREFIX)?.split_once('.')?;
    let part = match part {
        "weight" => Part::Weight,
        "bias" => Part::Bias,
        _ => return None,
    };
    if index.len() > 1 && index.starts_with('0') {
        return None;
    }
    Some(TensorRole {
        slot,
        best,
        layer: plain_decimal(index)?,
        part,
    })
}

pub(super) fn parameter_name(layer: usize, part: Part) -> String {
    format!("{LAYER_PREFIX}{layer}.{}", part.name())
}

/// Digits only: `str::parse` would also take a sign, and a lenient reader of sizes or step counts hides
/// a file that was edited by hand or damaged. Too large for `T` is `None`, never a wrapped or clamped value.
pub(super) fn plain_decimal<T: std::str::FromStr>(text: &str) -> Option<T> {
    if text.is_empty() || !text.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// A metadata value for an error message: a file can hold a value of megabytes.
pub(super) fn shown(value: &str) -> String {
    const SHOWN_CHARS: usize = 40;
    if value.chars().count() <= SHOWN_CHARS {
        value.to_string()
    } else {
        let start: String = value.chars().take(SHOWN_CHARS).collect();
        format!("{start}… ({} bytes)", value.len())
    }
}

/// The architecture a file of ours names, checked against its tensors: every tensor is a parameter of
/// that architecture or optimizer state for one, F32 of the parameter's shape, and finite; every parameter
/// is there; the optimizer's step count is consistent with the state it holds. Shapes are compared before
/// anything is allocated in proportion to the sizes, so absurd sizes cost nothing.
pub(super) fn check_mlp(
    path: &Path,
    layout: &StoredLayout,
    data: &dyn TensorSource,
    metadata: &HashMap<String, String>,
) -> Result<MlpContents> {
    match metadata.get(ACTIVATION_KEY) {
        Some(activation) if activation == ACTIVATION => {}
        Some(activation) => {
            return Err(failure(
                path,
                format!(
                    "metadata '{ACTIVATION_KEY}' is '{}', but an Mlp has only '{ACTIVATION}' between its layers; \
                     {DAMAGED}",
                    shown(activation)
                ),
            ))
        }
        None => {
            return Err(failure(
                path,
                format!(
                    "its metadata has no '{ACTIVATION_KEY}' (wgcompute writes '{ACTIVATION}'), so how its layers \
                     connect is unknown; {DAMAGED}"
                ),
            ))
        }
    }
    let sizes = parse_sizes(path, metadata)?;
    let optimizer = parse_optimizer(path, metadata)?;
    let layers = sizes.len() - 1;
    let parameters = 2 * layers;
    let sizes_shown = shown(metadata.get(SIZES_KEY).map(String::as_str).unwrap_or(""));
    let slot_rules = optimizer
        .as_ref()
        .and_then(|(kind, _)| crate::optim::saved_slots(kind));

    // Sorted, so that of several problems the same one is reported every time.
    let mut names = layout.names();
    names.sort_unstable();
    let mut parameters_found = 0usize;
    let mut best_found = 0usize;
    let mut standardization_found = 0usize;
    let mut slot_tensors: BTreeMap<&str, usize> = BTreeMap::new();
    for name in &names {
        if name == STANDARDIZE_MEAN || name == STANDARDIZE_SCALE {
            check_standardization(path, layout, data, name, sizes[0])?;
            standardization_found += 1;
            continue;
        }
        let Some(role) = role_of(name) else {
            return Err(failure(
                path,
                format!(
                    "holds a tensor '{name}', which is neither a parameter of an Mlp ({LAYER_PREFIX}<i>.weight, \
                     {LAYER_PREFIX}<i>.bias) nor optimizer state for one ({SLOT_PREFIX}<slot>.<parameter>); \
                     {DAMAGED}"
                ),
            ));
        };
        if role.layer >= layers {
            return Err(failure(
                path,
                format!(
                    "holds a tensor '{name}' of layer {}, but metadata '{SIZES_KEY}' = '{sizes_shown}' gives \
                     {layers} layer(s): the metadata and the tensors disagree; {DAMAGED}",
                    role.layer
                ),
            ));
        }
        let inputs = sizes[role.layer];
        let outputs = sizes[role.layer + 1];
        let expected: &[usize] = match role.part {
            Part::Weight => &[inputs, outputs],
            Part::Bias => &[outputs],
        };
        let view = layout
            .tensor(data, name)?
            .ok_or_else(|| failure(path, format!("has no tensor '{name}'")))?;
        if view.dtype != Dtype::F32 || view.shape != expected {
            return Err(failure(
                path,
                format!(
                    "tensor '{name}' is {:?} {:?}, but metadata '{SIZES_KEY}' = '{sizes_shown}' makes it F32 \
                     {expected:?}: the metadata and the tensors disagree; {DAMAGED}",
                    view.dtype,
                    view.shape
                ),
            ));
        }
        if let Some((index, value)) = first_f32_where(&view.data, |value| !value.is_finite()) {
            return Err(failure(
                path,
                format!(
                    "tensor '{name}' holds {value} at flat index {index}, but a checkpoint's parameters and \
                     optimizer state must be finite; if training diverged, train again with a lower learning rate \
                     or use an earlier checkpoint; otherwise {DAMAGED}"
                ),
            ));
        }
        if role.best {
            best_found += 1;
            continue;
        }
        let Some(slot) = role.slot else {
            parameters_found += 1;
            continue;
        };
        let rule = slot_rules.and_then(|rules| rules.iter().find(|rule| rule.name == slot));
        if rule.is_some_and(|rule| rule.non_negative) {
            if let Some((index, value)) = first_f32_where(&view.data, |value| value < 0.0) {
                return Err(failure(
                    path,
                    format!(
                        "tensor '{name}' holds {value} at flat index {index}, but its optimizer's '{slot}' state \
                         is never negative; {DAMAGED}"
                    ),
                ));
            }
        }
        *slot_tensors.entry(slot).or_default() += 1;
    }

    // Names are unique and each role is one parameter, so counting finds a missing one.
    if parameters_found != parameters {
        let missing = (0..layers)
            .flat_map(|layer| Part::BOTH.map(|part| parameter_name(layer, part)))
            .find(|name| !layout.has(name))
            .unwrap_or_default();
        return Err(failure(
            path,
            format!(
                "has no tensor '{missing}', which metadata '{SIZES_KEY}' = '{sizes_shown}' needs: the metadata \
                 and the tensors disagree; {DAMAGED}"
            ),
        ));
    }
    if best_found != 0 && best_found != parameters {
        let missing = (0..layers)
            .flat_map(|layer| Part::BOTH.map(|part| parameter_name(layer, part)))
            .map(|parameter| format!("{BEST_PREFIX}{parameter}"))
            .find(|name| !layout.has(name))
            .unwrap_or_default();
        return Err(failure(
            path,
            format!("holds best-epoch copies of some parameters but has no '{missing}'; {DAMAGED}"),
        ));
    }
    if standardization_found == 1 {
        let missing = if layout.has(STANDARDIZE_MEAN) {
            STANDARDIZE_SCALE
        } else {
            STANDARDIZE_MEAN
        };
        return Err(failure(
            path,
            format!(
                "holds one of '{STANDARDIZE_MEAN}' and '{STANDARDIZE_SCALE}' but has no '{missing}', so its inputs' \
                 standardization is unknown; {DAMAGED}"
            ),
        ));
    }
    let optimizer = match optimizer {
        None => {
            if let Some(slot) = slot_tensors.keys().next() {
                return Err(failure(
                    path,
                    format!(
                        "holds optimizer state ('{slot}' tensors) but its metadata names no '{OPTIMIZER_KEY}', so \
                         whose state it is is unknown; {DAMAGED}"
                    ),
                ));
            }
            None
        }
        Some((kind, steps)) => {
            if steps == 0 {
                if let Some(slot) = slot_tensors.keys().next() {
                    return Err(failure(
                        path,
                        format!(
                            "metadata '{OPTIMIZER_STEPS_KEY}' is 0, but it holds '{slot}' optimizer state, which \
                             only a step makes; {DAMAGED}"
                        ),
                    ));
                }
            }
            for (slot, &count) in &slot_tensors {
                if count != parameters {
                    let missing = (0..layers)
                        .flat_map(|layer| Part::BOTH.map(|part| parameter_name(layer, part)))
                        .map(|parameter| format!("{SLOT_PREFIX}{slot}.{parameter}"))
                        .find(|name| !layout.has(name))
                        .unwrap_or_default();
                    return Err(failure(
                        path,
                        format!(
                            "holds '{slot}' optimizer state for some parameters but has no '{missing}'; {DAMAGED}"
                        ),
                    ));
                }
            }
            if let Some(rules) = slot_rules {
                check_slots(
                    path,
                    &kind,
                    steps,
                    rules.iter().map(|rule| rule.name),
                    slot_tensors.keys().copied(),
                )?;
            }
            Some(SavedOptimizer {
                kind,
                steps,
                slots: slot_tensors.keys().map(|slot| slot.to_string()).collect(),
            })
        }
    };
    Ok(MlpContents {
        sizes,
        optimizer,
        standardized: standardization_found == 2,
        best: best_found == parameters,
    })
}

/// A standardization tensor must be F32 `[inputs]` of finite values, and a scale above 0 (inputs are divided
/// by it).
fn check_standardization(
    path: &Path,
    layout: &StoredLayout,
    data: &dyn TensorSource,
    name: &str,
    inputs: usize,
) -> Result<()> {
    let view = layout
        .tensor(data, name)?
        .ok_or_else(|| failure(path, format!("has no tensor '{name}'")))?;
    if view.dtype != Dtype::F32 || view.shape != [inputs] {
        return Err(failure(
            path,
            format!(
                "tensor '{name}' is {:?} {:?}, but the model's {inputs} inputs make it F32 [{inputs}]; {DAMAGED}",
                view.dtype, view.shape
            ),
        ));
    }
    let bad = |value: f32| !value.is_finite() || (name == STANDARDIZE_SCALE && value <= 0.0);
    if let Some((index, value)) = first_f32_where(&view.data, bad) {
        return Err(failure(
            path,
            format!(
                "tensor '{name}' holds {value} at flat index {index}, but a standardization's means are finite \
                 and its scales finite and above 0; {DAMAGED}"
            ),
        ));
    }
    Ok(())
}

/// Refuses state the optimizer does not keep, and, once it has stepped, state it keeps but the file lacks:
/// restored without it, the optimizer would restart from fresh state and say nothing.
pub(super) fn check_slots<'a>(
    path: &Path,
    kind: &str,
    steps: u64,
    kept: impl Iterator<Item = &'a str> + Clone,
    saved: impl Iterator<Item = &'a str> + Clone,
) -> Result<()> {
    let kept_list = || kept.clone().collect::<Vec<_>>().join(", ");
    for slot in saved.clone() {
        if !kept.clone().any(|name| name == slot) {
            return Err(failure(
                path,
                format!(
                    "holds '{slot}' optimizer state, which the '{kind}' optimizer does not keep (it keeps: {}); \
                     {DAMAGED}",
                    kept_list()
                ),
            ));
        }
    }
    if steps > 0 {
        for slot in kept.clone() {
            if !saved.clone().any(|name| name == slot) {
                return Err(failure(
                    path,
                    format!(
                        "metadata '{OPTIMIZER_STEPS_KEY}' is {steps}, but it holds no '{slot}' state of its '{kind}' \
                         optimizer, which every step keeps; load the model alone (without its optimizer's state), \
                         or use a whole checkpoint"
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn parse_sizes(path: &Path, metadata: &HashMap<String, String>) -> Result<Vec<usize>> {
    let Some(text) = metadata.get(SIZES_KEY) else {
        return Err(failure(
            path,
            format!("its metadata has no '{SIZES_KEY}', so its architecture is unknown; {DAMAGED}"),
        ));
    };
    let sizes: Option<Vec<usize>> = text
        .split(',')
        .map(|part| plain_decimal(part).filter(|&width| width > 0))
        .collect();
    match sizes {
        Some(sizes) if sizes.len() >= 2 => Ok(sizes),
        _ => Err(failure(
            path,
            format!(
                "metadata '{SIZES_KEY}' is '{}', not two or more positive widths in digits between commas (such \
                 as '8,32,4'); {DAMAGED}",
                shown(text)
            ),
        )),
    }
}

/// The optimizer's kind and step count, if the file names one.
pub(super) fn parse_optimizer(
    path: &Path,
    metadata: &HashMap<String, String>,
) -> Result<Option<(String, u64)>> {
    let steps = metadata.get(OPTIMIZER_STEPS_KEY);
    let Some(kind) = metadata.get(OPTIMIZER_KEY) else {
        return match steps {
            Some(steps) => Err(failure(
                path,
                format!(
                    "metadata '{OPTIMIZER_STEPS_KEY}' is '{}', but no '{OPTIMIZER_KEY}' says whose steps they are; \
                     {DAMAGED}",
                    shown(steps)
                ),
            )),
            None => Ok(None),
        };
    };
    let Some(steps) = steps else {
        return Err(failure(
            path,
            format!(
                "its metadata names the optimizer '{}' but has no '{OPTIMIZER_STEPS_KEY}', so how far it trained \
                 is unknown; {DAMAGED}",
                shown(kind)
            ),
        ));
    };
    match plain_decimal::<u64>(steps) {
        Some(count) => Ok(Some((kind.clone(), count))),
        None => Err(failure(
            path,
            format!(
                "metadata '{OPTIMIZER_STEPS_KEY}' is '{}', not a step count (digits only, at most {}); {DAMAGED}",
                shown(steps),
                u64::MAX
            ),
        )),
    }
}
