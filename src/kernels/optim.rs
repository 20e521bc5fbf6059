//! Optimizer updates (shaders/optim.wgsl): Adam in one fused in-place pass over param, grad, m and v, with
//! TensorFlow's or Kingma & Ba's epsilon placement and AdamW's decoupled weight decay; SGD with momentum; and
//! every rule of the table in src/op/optim.rs, whose WGSL and entry points are generated here from its row.
//! Operands are bound in windows, so parameters larger than one storage binding update too.
//!
//! A step over many tensors (an optimizer's, `adam_tensors`, `sgd_tensors`) is one dispatch per combination of
//! pool slabs the operands lie in, not one per tensor: the kernel binds those slabs whole and walks a table of
//! each tensor's offsets, a workgroup serving one tensor. Tensors in a slab too large to bind whole are updated on
//! their own, and tensors that alias (one written by another's update) one at a time in order, so the result is
//! always the per-tensor updates' bits.
//!
//! Each update comes in variants the tuner picks from (family `optim`): one element per invocation, one vec4, or
//! four vec4s. Every variant computes each element the same way, so they all give the same bits. The updates are
//! in place, so the tuner times them on scratch operands of the same size, never on the real ones.

use bytemuck::{Pod, Zeroable};

use std::collections::HashMap;
use std::sync::OnceLock;

use super::{dispatch_vec4_windows, plan, vec4s_per_invocation, SCALAR, VEC4, VEC4X4};
use crate::error::{Error, Result};
use crate::op::optim::{Kept, MAX_NUMBERS, MAX_SLOTS, RULES};
use crate::pool::{Allocation, SlabId};
use crate::runtime::{
    size_bucket, wgsl_constants, BufferRange, Kernel, Runtime, Shader, WORKGROUP_SIZE,
};

static OPTIM: Shader = Shader {
    proven_bounds: false,
    name: "optim",
    source: include_str!("../../shaders/optim.wgsl"),
    generated: || {
        wgsl_constants(&[
            ("MODE_TENSORFLOW", AdamMode::TensorFlow as u32),
            ("MODE_KINGMA_BA", AdamMode::KingmaBa as u32),
            ("MODE_ADAMW", AdamMode::AdamW as u32),
            ("SGD_NESTEROV", SGD_NESTEROV),
            ("SLOT_SECOND", SLOT_SECOND),
            ("SLOT_THIRD", SLOT_THIRD),
        ]) + &rules_wgsl()
    },
};

/// Where Adam adds epsilon and how it decays weights; the discriminant is the shader's mode code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AdamMode {
    /// `p −= lr·sqrt(1−β2^t)/(1−β1^t) · m/(sqrt(v)+ε)`.
    TensorFlow = 0,
    /// `p −= lr/(1−β1^t) · m/(sqrt(v)/sqrt(1−β2^t)+ε)`.
    KingmaBa = 1,
    /// Kingma & Ba's placement after decoupled decay `p ·= 1 − lr·wd`.
    AdamW = 2,
}

static ADAM: Kernel = Kernel::new(&OPTIM, "adam", &[1, 2, 3, 4]);
static ADAM_VEC4: Kernel = Kernel::new(&OPTIM, "adam_vec4", &[1, 2, 3, 4]);
static SGD_VEC4: Kernel = Kernel::new(&OPTIM, "sgd_vec4", &[1, 2, 3]);
static SGD: Kernel = Kernel::new(&OPTIM, "sgd", &[1, 2, 3]);
// Every rule's kernels bind all three state operands (those a rule does not keep go unused), so that one
// dispatch path serves them all; their entry points are generated from the rows (`rules_wgsl`).
static RULE: Kernel = Kernel::new(&OPTIM, "rule", &[1, 2, 3, 4, 6]);
static ADAM_TENSORS: Kernel = Kernel::new(&OPTIM, "adam_tensors", &[1, 2, 3, 4, 5]);
static SGD_TENSORS: Kernel = Kernel::new(&OPTIM, "sgd_tensors", &[1, 2, 3, 5]);

#[repr(C)]
#[derive(Clone, Copy, Default, Pod, Zeroable)]
struct Params {
    count: u32,
    mode: u32,
    lr: f32,
    beta1: f32,
    beta2: f32,
    epsilon: f32,
    step_size: f32,
    bias2_sqrt: f32,
    decay: f32,
    momentum: f32,
    start: u32,
    vec4s: u32,
    table: u32,
    entries: u32,
    gradient_step: f32,
    slots: u32,
}

/// The family's name in tuning records, the cache and `SessionOptions::force_variant`.
pub(crate) const FAMILY: &str = "optim";
/// The first is the default.
pub(crate) const VARIANTS: &[&str] = &[VEC4X4, VEC4, SCALAR];

/// The `slots` bits: whether a rule reads and writes its second and third state operand (the first it always
/// does).
pub(crate) const SLOT_SECOND: u32 = 2;
pub(crate) const SLOT_THIRD: u32 = 4;

/// One step of a rule of the table (`op::optim::RULES`), its numbers as the shader takes them, folded on the
/// host.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RuleStep {
    /// The row's position in the table: the shader's mode code.
    pub rule: usize,
    pub lr: f32,
    /// `1 − lr·weight_decay`, exactly 1 without weight decay.
    pub decay: f32,
    /// The row's `numbers`, in its order.
    pub numbers: [f32; MAX_NUMBERS],
    /// `SLOT_SECOND | SLOT_THIRD` as the rule keeps them.
    pub slots: u32,
}

/// The fields of the parameter block that carry a row's numbers, in the order of its `numbers`.
const NUMBER_FIELDS: [&str; MAX_NUMBERS] = [
    "beta1",
    "beta2",
    "epsilon",
    "step_size",
    "bias2_sqrt",
    "momentum",
    "gradient_step",
];

fn rule_params(step: RuleStep) -> Params {
    let [beta1, beta2, epsilon, step_size, bias2_sqrt, momentum, gradient_step] = step.numbers;
    Params {
        mode: step.rule as u32,
        lr: step.lr,
        beta1,
        beta2,
        epsilon,
        step_size,
        bias2_sqrt,
        momentum,
        gradient_step,
        decay: step.decay,
        slots: step.slots,
        ..Params::default()
    }
}

/// How the generated kernels reach a row's slot by its position.
struct SlotOperand {
    /// The scalar binding, which is also the slot's field of `Rule4`.
    scalar: &'static str,
    vec4: &'static str,
    /// Where a table entry gives its vec4 offset.
    offset: &'static str,
    /// The `slots` bit that says whether a slot kept only under some settings is kept (the first slot is kept
    /// always).
    bit: &'static str,
}

#[rustfmt::skip]
const SLOT_OPERANDS: [SlotOperand; MAX_SLOTS] = [
    SlotOperand { scalar: "m", vec4: "m4", offset: "o.z", bit: "" },
    SlotOperand { scalar: "v", vec4: "v4", offset: "o.w", bit: "SLOT_SECOND" },
    SlotOperand { scalar: "w", vec4: "w4", offset: "part.fifth", bit: "SLOT_THIRD" },
];

/// The WGSL every row of the table of rules gives: its numbers' struct, its update `KIND4`, its vec4 and
/// table entry points; and the scalar entry `rule`, every row by `mode`.
fn rules_wgsl() -> String {
    let mut out = String::from("\n// --- the rules of src/op/optim.rs ---\n");
    let mut cases = String::new();
    for (index, rule) in RULES.iter().enumerate() {
        let kind = rule.kind;
        let fields: String = rule
            .numbers
            .iter()
            .map(|name| format!("    {name}: f32,\n"))
            .collect();
        let reads: String = NUMBER_FIELDS[..rule.numbers.len()]
            .iter()
            .map(|field| format!(", params.{field}"))
            .collect();
        out += &format!(
            "struct {kind}_numbers {{\n    lr: f32,\n    decay: f32,\n{fields}}}\n\n\
             fn {kind}_numbers_now() -> {kind}_numbers {{\n    \
             return {kind}_numbers(params.lr, params.decay{reads});\n}}\n\n"
        );
        let olds: String = rule
            .slots
            .iter()
            .map(|slot| format!(", {}_old: vec4<f32>", slot.name))
            .collect();
        out += &format!(
            "fn {kind}4(h: {kind}_numbers, p: vec4<f32>, g: vec4<f32>{olds}) -> Rule4 {{{}\n}}\n\n",
            rule.wgsl
        );
        // Whether each slot is read and written: always, or where its `slots` bit is set.
        let guards: Vec<Option<&str>> = rule
            .slots
            .iter()
            .enumerate()
            .map(|(at, slot)| match slot.kept {
                Kept::Always => None,
                Kept::WhenPositive(_) => Some(SLOT_OPERANDS[at].bit),
            })
            .collect();
        let kept_flags: String = guards
            .iter()
            .enumerate()
            .filter_map(|(at, guard)| {
                guard.map(|bit| format!("    let kept_{at} = has_slot({bit});\n"))
            })
            .collect();
        let arguments: String = (0..rule.slots.len()).map(|at| format!(", s{at}")).collect();
        let load = |at: usize, expression: String| match guards[at] {
            None => format!("        let s{at} = {expression};\n"),
            Some(_) => format!(
                "        var s{at} = ZERO4;\n        if (kept_{at}) {{\n            \
                 s{at} = {expression};\n        }}\n"
            ),
        };
        let store = |at: usize, statement: String| match guards[at] {
            None => format!("        {statement}\n"),
            Some(_) => format!("        if (kept_{at}) {{\n            {statement}\n        }}\n"),
        };
        let mut vec4_body = String::from("        let p = param4[i] * h.decay;\n");
        let mut table_body = String::from("        let p_old = param4[o.x + i];\n");
        for (at, operand) in SLOT_OPERANDS.iter().enumerate().take(rule.slots.len()) {
            let (vec4, offset) = (operand.vec4, operand.offset);
            vec4_body += &load(at, format!("{vec4}[i]"));
            table_body += &load(at, format!("{vec4}[{offset} + i]"));
        }
        vec4_body += &format!("        let step = {kind}4(h, p, grad4[i]{arguments});\n");
        table_body += &format!(
            "        let step = {kind}4(h, p_old * h.decay, grad4[o.y + i]{arguments});\n        \
             let own = own_lanes(i, part.count);\n"
        );
        for (at, operand) in SLOT_OPERANDS.iter().enumerate().take(rule.slots.len()) {
            let (vec4, offset, field) = (operand.vec4, operand.offset, operand.scalar);
            vec4_body += &store(at, format!("{vec4}[i] = step.{field};"));
            table_body += &store(
                at,
                format!("{vec4}[{offset} + i] = select(s{at}, step.{field}, own);"),
            );
        }
        vec4_body += "        param4[i] = step.param;\n";
        table_body += "        param4[o.x + i] = select(p_old, step.param, own);\n";
        out += &format!(
            "@compute @workgroup_size(WORKGROUP_SIZE)\n\
             fn {kind}_vec4(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {{\n    \
             let span = vec4_span(id, groups);\n    let h = {kind}_numbers_now();\n{kept_flags}    \
             for (var i = span.x; i < span.y; i = i + 1u) {{\n{vec4_body}    }}\n}}\n\n\
             @compute @workgroup_size(WORKGROUP_SIZE)\n\
             fn {kind}_tensors(\n    @builtin(workgroup_id) workgroup: vec3<u32>,\n    \
             @builtin(num_workgroups) groups: vec3<u32>,\n    @builtin(local_invocation_index) local: u32,\n) {{\n    \
             let h = {kind}_numbers_now();\n{kept_flags}    let part = part_of(workgroup, groups, local);\n    \
             let o = part.offsets;\n    for (var i = part.first; i < part.end; i = i + 1u) {{\n{table_body}    }}\n}}\n\n"
        );
        // The scalar kernel loads the first slot itself and the others under their bits, before the switch.
        let scalar_arguments: String = SLOT_OPERANDS
            .iter()
            .take(rule.slots.len())
            .map(|operand| match operand.bit {
                "" => format!(", vec4<f32>({}[i])", operand.scalar),
                _ => format!(", vec4<f32>({}_old)", operand.scalar),
            })
            .collect();
        cases += &format!(
            "        case {index}u: {{\n            \
             step = {kind}4({kind}_numbers_now(), decayed, vec4<f32>(grad[i]){scalar_arguments});\n        }}\n"
        );
    }
    out += &format!(
        "// Every rule one element per invocation, the row by `mode`; the second and third slots by `slots`.\n\
         @compute @workgroup_size(WORKGROUP_SIZE)\n\
         fn rule(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {{\n    \
         let i = params.start + linear_index(id, groups);\n    if (i >= params.count) {{\n        return;\n    }}\n    \
         let second = has_slot(SLOT_SECOND);\n    let third = has_slot(SLOT_THIRD);\n    \
         var v_old = 0.0;\n    if (second) {{\n        v_old = v[i];\n    }}\n    \
         var w_old = 0.0;\n    if (third) {{\n        w_old = w[i];\n    }}\n    \
         let decayed = vec4<f32>(param[i]) * params.decay;\n    var step = Rule4(vec4<f32>(nan()), ZERO4, ZERO4, ZERO4);\n    \
         switch params.mode {{\n{cases}        default: {{}}\n    }}\n    \
         m[i] = step.m.x;\n    if (second) {{\n        v[i] = step.v.x;\n    }}\n    \
         if (third) {{\n        w[i] = step.w.x;\n    }}\n    param[i] = step.param.x;\n}}\n"
    );
    out
}

/// The vec4 and table entry points of each row, in the table's order: built once, their names made from the
/// rows.
fn rule_kernels() -> &'static [(Kernel, Kernel)] {
    static KERNELS: OnceLock<Vec<(Kernel, Kernel)>> = OnceLock::new();
    KERNELS.get_or_init(|| {
        RULES
            .iter()
            .map(|rule| {
                let entry = |suffix: &str| -> &'static str {
                    Box::leak(format!("{}_{suffix}", rule.kind).into_boxed_str())
                };
                (
                    Kernel::new(&OPTIM, entry("vec4"), &[1, 2, 3, 4, 6]),
                    Kernel::new(&OPTIM, entry("tensors"), &[1, 2, 3, 4, 6, 5]),
                )
            })
            .collect()
    })
}

/// One step of a rule over many tensors, each `[param, grad, first, second, third state]` (a state the rule does
/// not keep given as the gradient's range): the same bits as the per-tensor kernels on each in turn, in one
/// dispatch per combination of slabs.
pub(crate) fn rule_tensors(
    runtime: &mut Runtime,
    tensors: &[[BufferRange; 5]],
    step: RuleStep,
) -> Result<()> {
    let (vec4, table_kernel) =
        rule_kernels()
            .get(step.rule)
            .ok_or_else(|| Error::InvalidArgument {
                what: "optimizer rule",
                given: step.rule.to_string(),
                expected: format!("a row of the {} rules", RULES.len()),
            })?;
    let forms = Forms {
        name: RULES[step.rule].kind,
        scalar: &RULE,
        vec4,
        tensors: table_kernel,
    };
    let operands: Vec<&[BufferRange]> = tensors.iter().map(|tensor| &tensor[..]).collect();
    run_tensors(runtime, forms, &operands, rule_params(step))
}

/// One Adam step's numbers, as the shader takes them; the host has folded the bias corrections into
/// `step_size` and `bias2_sqrt`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AdamStep {
    pub mode: AdamMode,
    pub lr: f32,
    pub beta1: f32,
    pub beta2: f32,
    pub epsilon: f32,
    pub step_size: f32,
    pub bias2_sqrt: f32,
    pub decay: f32,
}

/// An update in its scalar form (one element per invocation, from `start`) and its vec4 form.
#[derive(Clone, Copy)]
struct Forms {
    name: &'static str,
    scalar: &'static Kernel,
    vec4: &'static Kernel,
    /// The form over many tensors at once, through a table (see `plan_tensors`).
    tensors: &'static Kernel,
}

/// Records the update over windows of same-sized operands in `variant`: the vec4 kernel over the whole vec4s
/// of each window (none for the scalar variant), the scalar kernel over the rest.
fn record(
    runtime: &mut Runtime,
    forms: Forms,
    ranges: &[BufferRange],
    elements: u64,
    base: Params,
    variant: &str,
) -> Result<()> {
    let windowed: Vec<(BufferRange, bool)> = ranges.iter().map(|&range| (range, true)).collect();
    let vec4s = vec4s_per_invocation(variant);
    dispatch_vec4_windows(
        runtime,
        (forms.vec4, forms.scalar),
        &windowed,
        elements,
        vec4s,
        |_, count| Params {
            count: count as u32,
            vec4s,
            ..base
        },
        |body, start| Params { start, ..body },
    )
}

/// `operands` scratch allocations of `elements` floats each, or None if the session has no room for them.
fn scratch(runtime: &mut Runtime, operands: usize, elements: u64) -> Option<Vec<Allocation>> {
    let mut allocations = Vec::with_capacity(operands);
    for _ in 0..operands {
        match runtime.allocate(elements * 4) {
            Ok(allocation) => allocations.push(allocation),
            Err(_) => {
                allocations
                    .into_iter()
                    .for_each(|allocation| runtime.release(allocation));
                return None;
            }
        }
    }
    Some(allocations)
}

/// Runs the update in the variant the tuner picks; when it must time them, it does so on zeroed scratch
/// operands (a zero state stays finite under both updates), or takes the default where there is no room.
fn run(
    runtime: &mut Runtime,
    forms: Forms,
    ranges: &[BufferRange],
    elements: u64,
    base: Params,
) -> Result<()> {
    let class = format!("{} n<={}", forms.name, size_bucket(elements as usize));
    let variant = if !runtime.would_time_variants(FAMILY, &class, VARIANTS) {
        // Forced, cached, pinned or decided already: the closure that would time is never called.
        runtime.choose_variant(FAMILY, class, VARIANTS, |_, _| Ok(()))
    } else if let Some(allocations) = scratch(runtime, ranges.len(), elements) {
        let scratch_ranges: Vec<BufferRange> = allocations
            .iter()
            .map(|allocation| BufferRange {
                slab: allocation.slab,
                offset: allocation.offset,
                bytes: elements * 4,
            })
            .collect();
        let cleared = scratch_ranges
            .iter()
            .try_for_each(|&range| runtime.clear(range));
        let variant = cleared.map(|()| {
            runtime.choose_variant(FAMILY, class, VARIANTS, |runtime, variant| {
                record(runtime, forms, &scratch_ranges, elements, base, variant)
            })
        });
        allocations
            .into_iter()
            .for_each(|allocation| runtime.release(allocation));
        variant?
    } else {
        runtime.peek_variant(FAMILY, &class, VARIANTS)
    };
    record(runtime, forms, ranges, elements, base, variant)
}

fn adam_params(step: AdamStep) -> Params {
    Params {
        mode: step.mode as u32,
        lr: step.lr,
        beta1: step.beta1,
        beta2: step.beta2,
        epsilon: step.epsilon,
        step_size: step.step_size,
        bias2_sqrt: step.bias2_sqrt,
        decay: step.decay,
        ..Params::default()
    }
}

const ADAM_FORMS: Forms = Forms {
    name: "adam",
    scalar: &ADAM,
    vec4: &ADAM_VEC4,
    tensors: &ADAM_TENSORS,
};

/// The shader's `mode` for SGD with Nesterov's momentum (0: the plain momentum form).
const SGD_NESTEROV: u32 = 1;

/// One SGD step's numbers, as the shader takes them.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SgdStep {
    pub lr: f32,
    pub momentum: f32,
    /// `1 − lr·weight_decay`, computed in f64 and rounded once: exactly 1 without weight decay.
    pub decay: f32,
    pub nesterov: bool,
}

fn sgd_params(step: SgdStep) -> Params {
    Params {
        lr: step.lr,
        momentum: step.momentum,
        decay: step.decay,
        mode: if step.nesterov { SGD_NESTEROV } else { 0 },
        ..Params::default()
    }
}

const SGD_FORMS: Forms = Forms {
    name: "sgd",
    scalar: &SGD,
    vec4: &SGD_VEC4,
    tensors: &SGD_TENSORS,
};

/// Adam over `elements` elements of param, grad, m and v, in place.
pub(crate) fn adam(
    runtime: &mut Runtime,
    ranges: [BufferRange; 4],
    elements: u64,
    step: AdamStep,
) -> Result<()> {
    run(runtime, ADAM_FORMS, &ranges, elements, adam_params(step))
}

/// SGD with momentum over `elements` elements of param, grad and the momentum buffer, in place.
pub(crate) fn sgd(
    runtime: &mut Runtime,
    ranges: [BufferRange; 3],
    elements: u64,
    step: SgdStep,
) -> Result<()> {
    run(runtime, SGD_FORMS, &ranges, elements, sgd_params(step))
}

/// One Adam step over many tensors, each `[param, grad, m, v]` of as many elements as its param's range holds:
/// the same bits as [`adam`] on each in turn, in one dispatch per combination of slabs the operands lie in.
pub(crate) fn adam_tensors(
    runtime: &mut Runtime,
    tensors: &[[BufferRange; 4]],
    step: AdamStep,
) -> Result<()> {
    let operands: Vec<&[BufferRange]> = tensors.iter().map(|tensor| &tensor[..]).collect();
    run_tensors(runtime, ADAM_FORMS, &operands, adam_params(step))
}

/// One SGD step over many tensors, each `[param, grad, momentum buffer]`: the same bits as [`sgd`] on each in
/// turn, in one dispatch per combination of slabs.
pub(crate) fn sgd_tensors(
    runtime: &mut Runtime,
    tensors: &[[BufferRange; 3]],
    step: SgdStep,
) -> Result<()> {
    let operands: Vec<&[BufferRange]> = tensors.iter().map(|tensor| &tensor[..]).collect();
    run_tensors(runtime, SGD_FORMS, &operands, sgd_params(step))
}

/// A table entry: the vec4 offsets of (param, grad, state 1, state 2), then (elements, first workgroup, state 3,
/// 0), as `shaders/optim.wgsl` reads them.
type Entry = [u32; 8];

/// Bytes of one vec4: the unit of the table's offsets, which the pool's alignment (256 bytes) is a multiple of.
const VEC4_BYTES: u64 = 16;

/// The tensors whose operands lie in one combination of slabs: one dispatch, binding each of those slabs whole.
#[derive(Debug, PartialEq)]
struct Group {
    /// The slab of each operand, in the kernel's binding order.
    slabs: Vec<SlabId>,
    entries: Vec<Entry>,
    workgroups: u32,
}

/// How an update over many tensors is recorded.
#[derive(Debug, PartialEq)]
enum TensorsPlan {
    /// One dispatch per group; the tensors of `alone` (by position) have an operand that cannot be bound as
    /// part of a whole slab (one in a slab larger than a storage binding) and are updated on their own.
    Grouped {
        groups: Vec<Group>,
        alone: Vec<usize>,
    },
    /// A tensor written by one update is an operand of another (a parameter passed twice, a gradient that is
    /// another parameter): updated one at a time, in order, as the per-tensor updates would.
    InOrder,
}

/// Plans an update over `tensors` (each its operands, param first, all of one length), `vec4s` vec4s per
/// invocation; `bindable(slab)` says whether a slab binds whole. Empty tensors need nothing. Pure, so it is
/// tested without a device.
fn plan_tensors(
    tensors: &[&[BufferRange]],
    bindable: impl Fn(SlabId) -> bool,
    vec4s: u32,
) -> TensorsPlan {
    // Every tensor owns its allocation, so two operands overlap only if they start at the same place.
    let mut written: HashMap<(SlabId, u64), usize> = HashMap::new();
    for (position, operands) in tensors.iter().enumerate() {
        // The gradient (index 1) is only read; the param and the state are written.
        for (index, range) in operands.iter().enumerate() {
            if index != 1 && range.bytes > 0 {
                if let Some(&other) = written.get(&(range.slab, range.offset)) {
                    if other != position {
                        return TensorsPlan::InOrder;
                    }
                }
                written.insert((range.slab, range.offset), position);
            }
        }
    }
    for (position, operands) in tensors.iter().enumerate() {
        if let Some(grad) = operands.get(1).filter(|grad| grad.bytes > 0) {
            if written
                .get(&(grad.slab, grad.offset))
                .is_some_and(|&owner| owner != position)
            {
                return TensorsPlan::InOrder;
            }
        }
    }
    let per_workgroup = u64::from(WORKGROUP_SIZE) * u64::from(vec4s.max(1));
    let mut groups: Vec<Group> = Vec::new();
    let mut alone = Vec::new();
    for (position, operands) in tensors.iter().enumerate() {
        let elements = operands[0].bytes / 4;
        if elements == 0 {
            continue;
        }
        let offsets: Option<Vec<u32>> = operands
            .iter()
            .map(|range| {
                let whole = range.offset % VEC4_BYTES == 0 && bindable(range.slab);
                whole
                    .then(|| u32::try_from(range.offset / VEC4_BYTES).ok())
                    .flatten()
            })
            .collect();
        let (Some(offsets), Ok(count)) = (offsets, u32::try_from(elements)) else {
            alone.push(position);
            continue;
        };
        let slabs: Vec<SlabId> = operands.iter().map(|range| range.slab).collect();
        let group = match groups.iter().position(|group| group.slabs == slabs) {
            Some(index) => &mut groups[index],
            None => {
                groups.push(Group {
                    slabs,
                    entries: Vec::new(),
                    workgroups: 0,
                });
                groups.last_mut().expect("just pushed")
            }
        };
        let mut entry: Entry = [0; 8];
        let (first_four, fifth) = offsets.split_at(offsets.len().min(4));
        entry[..first_four.len()].copy_from_slice(first_four);
        if let Some(&fifth) = fifth.first() {
            entry[6] = fifth;
        }
        entry[4] = count;
        entry[5] = group.workgroups;
        // Within one slab the tensors are disjoint, so a group's workgroups stay below a slab's vec4s / 256.
        group.workgroups += elements.div_ceil(4).div_ceil(per_workgroup) as u32;
        group.entries.push(entry);
    }
    TensorsPlan::Grouped { groups, alone }
}

/// Runs an update over many tensors in the variant the tuner picks for their total size; when it must time
/// the variants, it does so on zeroed scratch tensors of the same lengths.
fn run_tensors(
    runtime: &mut Runtime,
    forms: Forms,
    tensors: &[&[BufferRange]],
    base: Params,
) -> Result<()> {
    let lengths: Vec<u64> = tensors
        .iter()
        .map(|operands| operands[0].bytes / 4)
        .collect();
    let total: u64 = lengths.iter().sum();
    if total == 0 {
        return Ok(());
    }
    let operands = tensors[0].len();
    let class = format!("{} tensors n<={}", forms.name, size_bucket(total as usize));
    let variant = if !runtime.would_time_variants(FAMILY, &class, VARIANTS) {
        runtime.choose_variant(FAMILY, class, VARIANTS, |_, _| Ok(()))
    } else {
        let mut allocations = Vec::new();
        let mut enough = true;
        for &elements in lengths.iter().filter(|&&elements| elements > 0) {
            match scratch(runtime, operands, elements) {
                Some(more) => allocations.push((elements, more)),
                None => {
                    enough = false;
                    break;
                }
            }
        }
        let variant = if enough {
            let scratch_tensors: Vec<Vec<BufferRange>> = allocations
                .iter()
                .map(|(elements, tensor)| {
                    tensor
                        .iter()
                        .map(|allocation| BufferRange {
                            slab: allocation.slab,
                            offset: allocation.offset,
                            bytes: elements * 4,
                        })
                        .collect()
                })
                .collect();
            let cleared = scratch_tensors
                .iter()
                .flatten()
                .try_for_each(|&range| runtime.clear(range));
            let scratch_refs: Vec<&[BufferRange]> =
                scratch_tensors.iter().map(Vec::as_slice).collect();
            cleared.map(|()| {
                runtime.choose_variant(FAMILY, class, VARIANTS, |runtime, variant| {
                    record_tensors(runtime, forms, &scratch_refs, base, variant)
                })
            })
        } else {
            Ok(runtime.peek_variant(FAMILY, &class, VARIANTS))
        };
        allocations
            .into_iter()
            .flat_map(|(_, tensor)| tensor)
            .for_each(|allocation| runtime.release(allocation));
        variant?
    };
    record_tensors(runtime, forms, tensors, base, variant)
}

/// Records an update over many tensors in `variant`: the table kernel for the vec4 variants where the adapter
/// binds enough storage buffers, else (and for the scalar variant) the per-tensor kernels one tensor at a time.
fn record_tensors(
    runtime: &mut Runtime,
    forms: Forms,
    tensors: &[&[BufferRange]],
    base: Params,
    variant: &str,
) -> Result<()> {
    let vec4s = vec4s_per_invocation(variant);
    let storage_bindings = forms.tensors.bindings.len() as u32;
    let plan =
        if vec4s == 0 || runtime.limits().max_storage_buffers_per_shader_stage < storage_bindings {
            TensorsPlan::InOrder
        } else {
            let max_binding = runtime.limits().max_storage_buffer_binding_size;
            let slab_bytes: HashMap<SlabId, Option<u64>> = tensors
                .iter()
                .flat_map(|operands| operands.iter())
                .map(|range| (range.slab, runtime.slab_bytes(range.slab)))
                .collect();
            plan_tensors(
                tensors,
                |slab| {
                    slab_bytes
                        .get(&slab)
                        .copied()
                        .flatten()
                        .is_some_and(|bytes| bytes <= max_binding)
                },
                vec4s,
            )
        };
    let (groups, alone): (Vec<Group>, Vec<usize>) = match plan {
        TensorsPlan::InOrder => (Vec::new(), (0..tensors.len()).collect()),
        TensorsPlan::Grouped { groups, alone } => (groups, alone),
    };
    for position in alone {
        let operands = tensors[position];
        record(
            runtime,
            forms,
            operands,
            operands[0].bytes / 4,
            base,
            variant,
        )?;
    }
    if groups.is_empty() {
        return Ok(());
    }
    // Every group's table in one fresh range, written without a flush (`write_fresh` orders it behind any
    // recorded work on those bytes).
    let words: Vec<u32> = groups
        .iter()
        .flat_map(|group| group.entries.iter().flatten().copied())
        .collect();
    let table = runtime.allocate(words.len() as u64 * 4)?;
    let outcome = dispatch_groups(runtime, forms, &groups, &table, &words, base, vec4s);
    runtime.release(table);
    outcome
}

/// Writes the groups' tables into `table` and records one dispatch per group.
fn dispatch_groups(
    runtime: &mut Runtime,
    forms: Forms,
    groups: &[Group],
    table: &Allocation,
    words: &[u32],
    base: Params,
    vec4s: u32,
) -> Result<()> {
    let exact = BufferRange {
        slab: table.slab,
        offset: table.offset,
        bytes: words.len() as u64 * 4,
    };
    runtime.write_fresh(exact, bytemuck::cast_slice(words))?;
    // The table's whole slab where it binds, so that the bind group is the same from one step to the next.
    let (table_binding, table_start) = match whole_slab(runtime, table.slab) {
        Some(whole) => (whole, (table.offset / VEC4_BYTES) as u32),
        None => (exact, 0),
    };
    let limits = plan::Limits::of(runtime.limits());
    let mut start = table_start;
    for group in groups {
        let mut ranges = Vec::with_capacity(group.slabs.len() + 1);
        for &slab in &group.slabs {
            ranges.push(whole_slab(runtime, slab).ok_or_else(|| {
                Error::driver(
                    forms.tensors.entry,
                    format!("slab {slab} no longer binds whole"),
                )
            })?);
        }
        ranges.push(table_binding);
        let params = Params {
            vec4s,
            table: start,
            entries: group.entries.len() as u32,
            ..base
        };
        runtime.dispatch(
            forms.tensors,
            bytemuck::bytes_of(&params),
            &ranges,
            limits.grid(group.workgroups),
        )?;
        start += (group.entries.len() * 2) as u32;
    }
    Ok(())
}

/// A whole slab as one binding, if it fits one.
fn whole_slab(runtime: &Runtime, slab: SlabId) -> Option<BufferRange> {
    let bytes = runtime.slab_bytes(slab)?;
    (bytes <= runtime.limits().max_storage_buffer_binding_size).then_some(BufferRange {
        slab,
        offset: 0,
        bytes,
    })
}

reflected_layout!(
    kernels: [ADAM, ADAM_VEC4, SGD_VEC4, SGD, ADAM_TENSORS, SGD_TENSORS, RULE],
    generated: rule_kernels().iter().flat_map(|(vec4, table)| [vec4, table]),
    params: {
        count, mode, lr, beta1, beta2, epsilon, step_size, bias2_sqrt, decay, momentum, start, vec4s,
        table, entries, gradient_step, slots
    }
);

#[cfg(test)]
mod tests {
    use super::*;

    fn range(slab: SlabId, offset: u64, elements: u64) -> BufferRange {
        BufferRange {
            slab,
            offset,
            bytes: elements * 4,
        }
    }

    /// Param, grad, m and v of `elements` floats, each in its own slab, at the `index`-th 1 MiB of it.
    fn tensor(slabs: [SlabId; 4], index: u64, elements: u64) -> Vec<BufferRange> {
        slabs
            .iter()
            .map(|&slab| range(slab, index << 20, elements))
            .collect()
    }

    fn plan(tensors: &[Vec<BufferRange>], bindable: impl Fn(SlabId) -> bool) -> TensorsPlan {
        let refs: Vec<&[BufferRange]> = tensors.iter().map(Vec::as_slice).collect();
        plan_tensors(&refs, bindable, 1)
    }

    #[test]
    fn tensors_in_the_same_slabs_share_one_dispatch_each_from_a_fresh_workgroup() {
        let slabs = [1, 1, 2, 2];
        let tensors = vec![
            tensor(slabs, 0, 1),
            tensor(slabs, 1, 1025),
            tensor(slabs, 2, 0),
            tensor(slabs, 3, 7),
        ];
        let TensorsPlan::Grouped { groups, alone } = plan(&tensors, |_| true) else {
            panic!("disjoint tensors go in groups");
        };
        assert!(alone.is_empty());
        assert_eq!(groups.len(), 1);
        let group = &groups[0];
        assert_eq!(group.slabs, slabs);
        // 1 element: one workgroup; 1025: 257 vec4s, two workgroups of 256; 0: nothing; 7: one.
        let mib_in_vec4s = (1 << 20) / 16;
        assert_eq!(
            group.entries,
            vec![
                [0, 0, 0, 0, 1, 0, 0, 0],
                [mib_in_vec4s; 4]
                    .into_iter()
                    .chain([1025, 1, 0, 0])
                    .collect::<Vec<_>>()
                    .try_into()
                    .expect("8 words"),
                [3 * mib_in_vec4s; 4]
                    .into_iter()
                    .chain([7, 3, 0, 0])
                    .collect::<Vec<_>>()
                    .try_into()
                    .expect("8 words"),
            ]
        );
        assert_eq!(group.workgroups, 4);
    }

    #[test]
    fn other_slabs_make_other_groups_and_an_unbindable_slab_goes_alone() {
        let tensors = vec![
            tensor([1, 1, 1, 1], 0, 100),
            tensor([1, 2, 1, 1], 1, 100),
            tensor([1, 1, 1, 1], 2, 100),
            tensor([1, 1, 9, 1], 3, 100),
        ];
        let TensorsPlan::Grouped { groups, alone } = plan(&tensors, |slab| slab != 9) else {
            panic!("disjoint tensors go in groups");
        };
        assert_eq!(alone, vec![3]);
        let shapes: Vec<(Vec<SlabId>, usize, u32)> = groups
            .iter()
            .map(|group| (group.slabs.clone(), group.entries.len(), group.workgroups))
            .collect();
        assert_eq!(
            shapes,
            vec![(vec![1, 1, 1, 1], 2, 2), (vec![1, 2, 1, 1], 1, 1)]
        );
        // Four vec4s per invocation: a workgroup covers 4096 elements.
        let refs: Vec<&[BufferRange]> = tensors.iter().map(Vec::as_slice).collect();
        let big = [range(1, 8 << 20, 4097), range(1, 9 << 20, 4097)];
        let TensorsPlan::Grouped { groups, .. } = plan_tensors(&[&big, &refs[0][..2]], |_| true, 4)
        else {
            panic!("disjoint");
        };
        assert_eq!(groups[0].workgroups, 3);
    }

    #[test]
    fn a_tensor_written_twice_or_read_as_another_gradient_is_taken_in_order() {
        let a = tensor([1, 2, 3, 4], 0, 10);
        let b = tensor([1, 2, 3, 4], 1, 10);
        // The same param twice, with its own state each time.
        let mut twice = b.clone();
        twice[0] = a[0];
        assert_eq!(plan(&[a.clone(), twice], |_| true), TensorsPlan::InOrder);
        // b's gradient is a's param.
        let mut reads = b.clone();
        reads[1] = a[0];
        assert_eq!(
            plan(&[a.clone(), reads.clone()], |_| true),
            TensorsPlan::InOrder
        );
        assert_eq!(plan(&[reads, a.clone()], |_| true), TensorsPlan::InOrder);
        // Two params sharing one gradient only read it: one group.
        let mut shared = b.clone();
        shared[1] = a[1];
        assert!(matches!(
            plan(&[a, shared], |_| true),
            TensorsPlan::Grouped { ref groups, .. } if groups.len() == 1
        ));
    }
}
