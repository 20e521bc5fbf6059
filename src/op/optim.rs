//! Keras's optimizers beside Adam and SGD, each declared once as a row of [`RULES`]: its names, its settings
//! with Keras's names and defaults, its state slots, the numbers the host folds for a step and the WGSL of its
//! update. The rule's enum-free handle (`OptimizerRule`), its checks, its saved slots, its three kernel entry
//! points (the generated code in `kernels::optim`), the command's `--optimizer` names and the Python classes
//! (`wgcompute.optim`, made from `_wgcompute.optimizer_rules()`) all follow from the row; an f64 reference in
//! tests/all/optimizers.rs and one in python/tests/test_optimizers.py complete a new rule.

/// What a setting may be (every one finite).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SettingRange {
    /// In [0, 1): a decay rate (β, ρ).
    Unit,
    /// In (0, 1]: Lion's β1.
    UnitAboveZero,
    /// 0 or more: an epsilon, a momentum, an initial value.
    NonNegative,
    /// 0 or less: FTRL's learning-rate power.
    NonPositive,
    /// A flag: 0 (false) or 1 (true), a `bool` in Python.
    Flag,
}

impl SettingRange {
    /// Whether `value` lies in the range (finiteness aside).
    pub fn holds(self, value: f32) -> bool {
        match self {
            SettingRange::Unit => (0.0..1.0).contains(&value),
            SettingRange::UnitAboveZero => value > 0.0 && value <= 1.0,
            SettingRange::NonNegative => value >= 0.0,
            SettingRange::NonPositive => value <= 0.0,
            SettingRange::Flag => value == 0.0 || value == 1.0,
        }
    }

    /// The range in words, for an error.
    pub fn describe(self) -> &'static str {
        match self {
            SettingRange::Unit => "a number in [0, 1)",
            SettingRange::UnitAboveZero => "a number in (0, 1]",
            SettingRange::NonNegative => "a finite number ≥ 0",
            SettingRange::NonPositive => "a finite number ≤ 0",
            SettingRange::Flag => "true or false",
        }
    }
}

/// A hyperparameter of a rule, by Keras's name, with Keras's default.
#[derive(Clone, Copy, Debug)]
pub struct Setting {
    pub name: &'static str,
    pub default: f32,
    pub range: SettingRange,
}

/// When a state slot is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kept {
    Always,
    /// Only where the setting of this name is above 0 (RMSprop's momentum buffer, its average gradient when
    /// centered).
    WhenPositive(&'static str),
}

/// A tensor of state per parameter, by the name Keras and the checkpoints give it.
#[derive(Clone, Copy, Debug)]
pub struct Slot {
    pub name: &'static str,
    /// Whether every value is at least 0 (a running mean of squares, say): a checkpoint holding a negative
    /// one is refused, since only damage makes one, and its square root would be NaN.
    pub non_negative: bool,
    /// The setting whose value a fresh slot starts from (Adagrad's accumulator); `None`: 0.
    pub initial: Option<&'static str>,
    pub kept: Kept,
}

/// What the host knows when it folds one step's numbers.
#[derive(Clone, Copy, Debug)]
pub struct StepInput<'a> {
    /// The rule's settings, in the order of its row's.
    pub settings: &'a [f32],
    pub lr: f64,
    /// The step's number, from 1.
    pub step: u64,
    /// What the rule carried over from the step before (1 before the first; see [`Rule::carry_after`]).
    pub carry: f64,
}

/// The most numbers a rule's shader reads beside `lr` and `decay`.
pub const MAX_NUMBERS: usize = 7;

/// The most settings and slots a rule has.
pub const MAX_SETTINGS: usize = 6;
pub const MAX_SLOTS: usize = 3;

/// A rule: one row.
#[derive(Debug)]
pub struct Rule {
    /// Lower case: the command's `--optimizer`, the checkpoint's kind, Python's string for `compile`.
    pub kind: &'static str,
    /// Keras's class name, which errors use.
    pub class: &'static str,
    /// The update in words, Keras's formulas.
    pub doc: &'static str,
    pub settings: &'static [Setting],
    /// The first is always kept; the kernels bind them as their first, second and third state operands.
    pub slots: &'static [Slot],
    /// The names the WGSL reads as `h.NAME` besides `h.lr` and `h.decay`, in the order `fold` gives them.
    pub numbers: &'static [&'static str],
    /// A step's numbers (in `numbers`' order, the rest 0) and the carry for the next step. Folded on the host in
    /// f64 and rounded once.
    pub fold: fn(&StepInput<'_>) -> ([f32; MAX_NUMBERS], f64),
    /// The carry after `steps` steps, for a restored checkpoint: `fold`'s carry, replayed.
    pub carry_after: fn(settings: &[f32], steps: u64) -> f64,
    /// The body of `fn KIND4(h: KIND_numbers, p: vec4<f32>, g: vec4<f32>, SLOT_old: vec4<f32>, ...) -> Rule4`
    /// (one `SLOT_old` per slot, by name): `p` is the parameter after the decay, the result is
    /// `Rule4(param, first slot, second, third)`, a slot the rule lacks given as `ZERO4`.
    pub wgsl: &'static str,
}

impl Rule {
    /// The rule whose [`kind`](Self::kind) this is.
    pub fn named(kind: &str) -> Option<&'static Rule> {
        RULES.iter().find(|rule| rule.kind == kind)
    }

    /// The position of the setting named `name`.
    pub fn setting(&self, name: &str) -> Option<usize> {
        self.settings
            .iter()
            .position(|setting| setting.name == name)
    }
}

/// The numbers of a step: the given values first, the rest 0.
fn numbers<const N: usize>(given: [f32; N]) -> [f32; MAX_NUMBERS] {
    let mut numbers = [0.0; MAX_NUMBERS];
    numbers[..N].copy_from_slice(&given);
    numbers
}

/// The settings as they are, for a rule whose shader reads nothing the host folds.
fn settings_as_numbers(input: &StepInput<'_>) -> ([f32; MAX_NUMBERS], f64) {
    let mut numbers = [0.0; MAX_NUMBERS];
    numbers[..input.settings.len()].copy_from_slice(input.settings);
    (numbers, input.carry)
}

/// No carry.
fn no_carry(_: &[f32], _: u64) -> f64 {
    1.0
}

/// The step as the power a bias correction takes.
fn power(step: u64) -> i32 {
    step.min(i32::MAX as u64) as i32
}

/// Keras's Nadam momentum schedule `u_t = β1(1 − 0.5·0.96^(0.004t))`.
fn nadam_momentum(beta_1: f64, step: u64) -> f64 {
    beta_1 * (1.0 - 0.5 * 0.96f64.powf(step as f64 * 0.004))
}

/// `u_1 … u_steps`: every factor is below 1, so the product reaches 0 (where it stays) long before a
/// checkpoint's count could make the loop slow.
fn nadam_product(settings: &[f32], steps: u64) -> f64 {
    let beta_1 = settings[0] as f64;
    let mut product = 1.0;
    let mut step = 1;
    while step <= steps && product != 0.0 {
        product *= nadam_momentum(beta_1, step);
        step += 1;
    }
    product
}

/// Adagrad's numbers: its epsilon.
fn adagrad_numbers(input: &StepInput<'_>) -> ([f32; MAX_NUMBERS], f64) {
    (numbers([input.settings[1]]), input.carry)
}

/// Adamax's: β1, β2, ε and the step size `lr / (1 − β1^t)`.
fn adamax_numbers(input: &StepInput<'_>) -> ([f32; MAX_NUMBERS], f64) {
    let [beta_1, beta_2, epsilon] = [input.settings[0], input.settings[1], input.settings[2]];
    let step_size = (input.lr / (1.0 - (beta_1 as f64).powi(power(input.step)))) as f32;
    (numbers([beta_1, beta_2, epsilon, step_size]), input.carry)
}

/// Nadam's: β1, β2, and, multiplied through by `b = sqrt(1 − β2^t)` so that the shader divides once per
/// element, ε·b, the step along the momentum `b·lr·u_{t+1}/(1 − u_1…u_{t+1})` and the step along the gradient
/// `b·lr·(1 − u_t)/(1 − u_1…u_t)`. The carry is the product `u_1…u_t`.
fn nadam_numbers(input: &StepInput<'_>) -> ([f32; MAX_NUMBERS], f64) {
    let [beta_1, beta_2, epsilon] = [input.settings[0], input.settings[1], input.settings[2]];
    let wide_beta_1 = beta_1 as f64;
    let now = nadam_momentum(wide_beta_1, input.step);
    let next = nadam_momentum(wide_beta_1, input.step.saturating_add(1));
    let product = input.carry * now;
    let bias2_sqrt = (1.0 - (beta_2 as f64).powi(power(input.step))).sqrt();
    let step_size = (bias2_sqrt * input.lr * next / (1.0 - product * next)) as f32;
    let gradient_step = (bias2_sqrt * input.lr * (1.0 - now) / (1.0 - product)) as f32;
    let epsilon = (epsilon as f64 * bias2_sqrt) as f32;
    (
        numbers([beta_1, beta_2, epsilon, step_size, gradient_step]),
        product,
    )
}

/// FTRL's: the power `−learning_rate_power`, the L1 strength, `2·(l2 + β/(2·lr))` and twice the shrinkage.
fn ftrl_numbers(input: &StepInput<'_>) -> ([f32; MAX_NUMBERS], f64) {
    let [power, _, l1, l2, shrinkage, beta] = [
        input.settings[0],
        input.settings[1],
        input.settings[2],
        input.settings[3],
        input.settings[4],
        input.settings[5],
    ];
    let l2_twice = (2.0 * (l2 as f64 + beta as f64 / (2.0 * input.lr))) as f32;
    (
        numbers([-power, l1, l2_twice, 2.0 * shrinkage]),
        input.carry,
    )
}

/// Every rule, in the order of the shader's mode codes.
#[rustfmt::skip]
pub static RULES: &[Rule] = &[
    Rule {
        kind: "rmsprop",
        class: "RMSprop",
        doc: "Keras's RMSprop: `v = ρv + (1−ρ)g²`; centered, `a = ρa + (1−ρ)g` and `d = v − a² + ε`, else \
              `d = v + ε`; `inc = lr·g/sqrt(d)`; with momentum `b = momentum·b + inc; p −= b`, else `p −= inc`.",
        settings: &[
            Setting { name: "rho", default: 0.9, range: SettingRange::Unit },
            Setting { name: "momentum", default: 0.0, range: SettingRange::NonNegative },
            Setting { name: "epsilon", default: 1e-7, range: SettingRange::NonNegative },
            Setting { name: "centered", default: 0.0, range: SettingRange::Flag },
        ],
        slots: &[
            Slot { name: "velocity", non_negative: true, initial: None, kept: Kept::Always },
            Slot { name: "momentum", non_negative: false, initial: None, kept: Kept::WhenPositive("momentum") },
            Slot { name: "average_gradient", non_negative: false, initial: None, kept: Kept::WhenPositive("centered") },
        ],
        numbers: &["rho", "momentum", "epsilon", "centered"],
        fold: settings_as_numbers,
        carry_after: no_carry,
        wgsl: "
    let velocity_new = h.rho * velocity_old + (1.0 - h.rho) * g * g;
    var momentum_new = momentum_old;
    var average_new = average_gradient_old;
    var denominator = velocity_new + h.epsilon;
    if (h.centered != 0.0) {
        average_new = h.rho * average_gradient_old + (1.0 - h.rho) * g;
        denominator = velocity_new - average_new * average_new + h.epsilon;
    }
    let increment = h.lr * g / sqrt(denominator);
    var p_new = p - increment;
    if (h.momentum > 0.0) {
        momentum_new = h.momentum * momentum_old + increment;
        p_new = p - momentum_new;
    }
    return Rule4(p_new, velocity_new, momentum_new, average_new);",
    },
    Rule {
        kind: "adagrad",
        class: "Adagrad",
        doc: "Keras's Adagrad: `acc += g²` (from `initial_accumulator_value`); `p −= lr·g/sqrt(acc + ε)`.",
        settings: &[
            Setting { name: "initial_accumulator_value", default: 0.1, range: SettingRange::NonNegative },
            Setting { name: "epsilon", default: 1e-7, range: SettingRange::NonNegative },
        ],
        slots: &[Slot {
            name: "accumulator",
            non_negative: true,
            initial: Some("initial_accumulator_value"),
            kept: Kept::Always,
        }],
        numbers: &["epsilon"],
        fold: adagrad_numbers,
        carry_after: no_carry,
        wgsl: "
    let accumulator_new = accumulator_old + g * g;
    return Rule4(p - h.lr * g / sqrt(accumulator_new + h.epsilon), accumulator_new, ZERO4, ZERO4);",
    },
    Rule {
        kind: "adamax",
        class: "Adamax",
        doc: "Keras's Adamax: `m += (g − m)(1−β1)`; `u = max(β2·u, |g|)`; `p −= lr·m/((1−β1^t)(u + ε))`.",
        settings: &[
            Setting { name: "beta_1", default: 0.9, range: SettingRange::Unit },
            Setting { name: "beta_2", default: 0.999, range: SettingRange::Unit },
            Setting { name: "epsilon", default: 1e-7, range: SettingRange::NonNegative },
        ],
        slots: &[
            Slot { name: "m", non_negative: false, initial: None, kept: Kept::Always },
            Slot { name: "u", non_negative: true, initial: None, kept: Kept::Always },
        ],
        numbers: &["beta_1", "beta_2", "epsilon", "step_size"],
        fold: adamax_numbers,
        carry_after: no_carry,
        wgsl: "
    let m_new = m_old + (g - m_old) * (1.0 - h.beta_1);
    let u_new = max(h.beta_2 * u_old, abs(g));
    return Rule4(p - h.step_size * m_new / (u_new + h.epsilon), m_new, u_new, ZERO4);",
    },
    Rule {
        kind: "nadam",
        class: "Nadam",
        doc: "Keras's Nadam: Adam with Nesterov's momentum and Keras's momentum schedule \
              `u_t = β1(1 − 0.5·0.96^(0.004t))`: `m̂ = u_{t+1}m/(1 − u_1…u_{t+1}) + (1 − u_t)g/(1 − u_1…u_t)`, \
              `p −= lr·m̂/(sqrt(v/(1−β2^t)) + ε)`.",
        settings: &[
            Setting { name: "beta_1", default: 0.9, range: SettingRange::Unit },
            Setting { name: "beta_2", default: 0.999, range: SettingRange::Unit },
            Setting { name: "epsilon", default: 1e-7, range: SettingRange::NonNegative },
        ],
        slots: &[
            Slot { name: "m", non_negative: false, initial: None, kept: Kept::Always },
            Slot { name: "v", non_negative: true, initial: None, kept: Kept::Always },
        ],
        numbers: &["beta_1", "beta_2", "epsilon", "step_size", "gradient_step"],
        fold: nadam_numbers,
        carry_after: nadam_product,
        wgsl: "
    let m_new = m_old + (g - m_old) * (1.0 - h.beta_1);
    let v_new = v_old + (g * g - v_old) * (1.0 - h.beta_2);
    let p_new = p - (h.step_size * m_new + h.gradient_step * g) / (sqrt(v_new) + h.epsilon);
    return Rule4(p_new, m_new, v_new, ZERO4);",
    },
    Rule {
        kind: "lion",
        class: "Lion",
        doc: "Keras's Lion: `p −= lr·sign(β1·m + (1−β1)g)`; `m = β2·m + (1−β2)g` (β1 in (0, 1]).",
        settings: &[
            Setting { name: "beta_1", default: 0.9, range: SettingRange::UnitAboveZero },
            Setting { name: "beta_2", default: 0.99, range: SettingRange::Unit },
        ],
        slots: &[Slot { name: "momentum", non_negative: false, initial: None, kept: Kept::Always }],
        numbers: &["beta_1", "beta_2"],
        fold: settings_as_numbers,
        carry_after: no_carry,
        wgsl: "
    let p_new = p - h.lr * sign(h.beta_1 * momentum_old + (1.0 - h.beta_1) * g);
    return Rule4(p_new, h.beta_2 * momentum_old + (1.0 - h.beta_2) * g, ZERO4, ZERO4);",
    },
    Rule {
        kind: "adadelta",
        class: "Adadelta",
        doc: "Keras's Adadelta: `a = ρa + (1−ρ)g²`; `d = −sqrt(δ + ε)·g/sqrt(a + ε)`; `δ = ρδ + (1−ρ)d²`; `p += lr·d`.",
        settings: &[
            Setting { name: "rho", default: 0.95, range: SettingRange::Unit },
            Setting { name: "epsilon", default: 1e-7, range: SettingRange::NonNegative },
        ],
        slots: &[
            Slot { name: "accumulated_grad", non_negative: true, initial: None, kept: Kept::Always },
            Slot { name: "accumulated_delta_var", non_negative: true, initial: None, kept: Kept::Always },
        ],
        numbers: &["rho", "epsilon"],
        fold: settings_as_numbers,
        carry_after: no_carry,
        wgsl: "
    let grad_new = h.rho * accumulated_grad_old + (1.0 - h.rho) * g * g;
    let delta = -(sqrt(accumulated_delta_var_old + h.epsilon) * g / sqrt(grad_new + h.epsilon));
    let delta_new = h.rho * accumulated_delta_var_old + (1.0 - h.rho) * delta * delta;
    return Rule4(p + h.lr * delta, grad_new, delta_new, ZERO4);",
    },
    Rule {
        kind: "ftrl",
        class: "Ftrl",
        doc: "Keras's FTRL-proximal: `n' = n + g²`; `z += g + 2·s·p − (n'^(−c) − n^(−c))/lr·p`; \
              `p = (clip(z, −l1, l1) − z)/(n'^(−c)/lr + 2·(l2 + β/(2·lr)))`, with `c` the learning-rate power and \
              `s` the L2 shrinkage.",
        settings: &[
            Setting { name: "learning_rate_power", default: -0.5, range: SettingRange::NonPositive },
            Setting { name: "initial_accumulator_value", default: 0.1, range: SettingRange::NonNegative },
            Setting { name: "l1_regularization_strength", default: 0.0, range: SettingRange::NonNegative },
            Setting { name: "l2_regularization_strength", default: 0.0, range: SettingRange::NonNegative },
            Setting { name: "l2_shrinkage_regularization_strength", default: 0.0, range: SettingRange::NonNegative },
            Setting { name: "beta", default: 0.0, range: SettingRange::NonNegative },
        ],
        slots: &[
            Slot { name: "accumulator", non_negative: true, initial: Some("initial_accumulator_value"), kept: Kept::Always },
            Slot { name: "linear", non_negative: false, initial: None, kept: Kept::Always },
        ],
        numbers: &["power", "l1", "l2_twice", "shrinkage_twice"],
        fold: ftrl_numbers,
        carry_after: no_carry,
        // pow(0, c) as its limit (0, or 1 where c is 0): WGSL's pow is exp2(c·log2(x)), NaN at 0^0.
        wgsl: "
    let power = vec4<f32>(h.power);
    let at_zero = vec4<f32>(select(0.0, 1.0, h.power == 0.0));
    let accumulator_new = accumulator_old + g * g;
    let scaled_new = select(pow(accumulator_new, power), at_zero, accumulator_new == ZERO4);
    let scaled_old = select(pow(accumulator_old, power), at_zero, accumulator_old == ZERO4);
    let linear_new = linear_old + (g + h.shrinkage_twice * p - (scaled_new - scaled_old) / h.lr * p);
    let quadratic = scaled_new / h.lr + h.l2_twice;
    let clipped = clamp(linear_new, vec4<f32>(-h.l1), vec4<f32>(h.l1));
    return Rule4((clipped - linear_new) / quadratic, accumulator_new, linear_new, ZERO4);",
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_fits_the_kernels_and_names_what_it_uses() {
        for rule in RULES {
            assert!(rule.settings.len() <= MAX_SETTINGS, "{}", rule.kind);
            assert!(rule.numbers.len() <= MAX_NUMBERS, "{}", rule.kind);
            assert!((1..=MAX_SLOTS).contains(&rule.slots.len()), "{}", rule.kind);
            assert_eq!(rule.slots[0].kept, Kept::Always, "{}", rule.kind);
            assert_eq!(rule.kind, rule.kind.to_lowercase());
            for slot in rule.slots {
                for named in [
                    slot.initial,
                    match slot.kept {
                        Kept::WhenPositive(name) => Some(name),
                        Kept::Always => None,
                    },
                ]
                .into_iter()
                .flatten()
                {
                    assert!(rule.setting(named).is_some(), "{}: {named}", rule.kind);
                }
                assert!(
                    rule.wgsl.contains(&format!("{}_old", slot.name)),
                    "{}: the update reads no {}_old",
                    rule.kind,
                    slot.name
                );
            }
            for setting in rule.settings {
                assert!(setting.range.holds(setting.default), "{}", rule.kind);
            }
            assert_eq!(
                RULES.iter().filter(|other| other.kind == rule.kind).count(),
                1
            );
        }
    }
}
