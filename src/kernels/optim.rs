//! Optimizer updates (shaders/optim.wgsl): Adam in one fused in-place pass over param, grad, m and v, with
//! TensorFlow's or Kingma & Ba's epsilon placement and AdamW's decoupled weight decay; SGD with momentum.
//! Operands are bound in windows, so parameters larger than one storage binding update too.
//!
//! Each update comes in variants the tuner picks from (family `optim`): one element per invocation, one vec4, or
//! four vec4s. Every variant computes each element the same way, so they all give the same bits. The updates are
//! in place, so the tuner times them on scratch operands of the same size, never on the real ones.

use bytemuck::{Pod, Zeroable};

use super::{dispatch_vec4_windows, vec4s_per_invocation, SCALAR, VEC4, VEC4X4};
use crate::error::Result;
use crate::pool::Allocation;
use crate::runtime::{size_bucket, wgsl_constants, BufferRange, Kernel, Runtime, Shader};

static OPTIM: Shader = Shader {
    name: "optim",
    source: include_str!("../../shaders/optim.wgsl"),
    generated: || {
        wgsl_constants(&[
            ("MODE_TENSORFLOW", AdamMode::TensorFlow as u32),
            ("MODE_KINGMA_BA", AdamMode::KingmaBa as u32),
            ("MODE_ADAMW", AdamMode::AdamW as u32),
        ])
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
}

/// The family's name in tuning records, the cache and `SessionOptions::force_variant`.
pub(crate) const FAMILY: &str = "optim";
/// The first is the default.
pub(crate) const VARIANTS: &[&str] = &[VEC4, SCALAR, VEC4X4];

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

/// Adam over `elements` elements of param, grad, m and v, in place.
pub(crate) fn adam(
    runtime: &mut Runtime,
    [param, grad, m, v]: [BufferRange; 4],
    elements: u64,
    step: AdamStep,
) -> Result<()> {
    let base = Params {
        mode: step.mode as u32,
        lr: step.lr,
        beta1: step.beta1,
        beta2: step.beta2,
        epsilon: step.epsilon,
        step_size: step.step_size,
        bias2_sqrt: step.bias2_sqrt,
        decay: step.decay,
        ..Params::default()
    };
    let forms = Forms {
        name: "adam",
        scalar: &ADAM,
        vec4: &ADAM_VEC4,
    };
    run(runtime, forms, &[param, grad, m, v], elements, base)
}

/// SGD with momentum over `elements` elements of param, grad and the momentum buffer, in place.
pub(crate) fn sgd(
    runtime: &mut Runtime,
    [param, grad, buffer]: [BufferRange; 3],
    elements: u64,
    lr: f32,
    momentum: f32,
) -> Result<()> {
    let base = Params {
        lr,
        momentum,
        ..Params::default()
    };
    let forms = Forms {
        name: "sgd",
        scalar: &SGD,
        vec4: &SGD_VEC4,
    };
    run(runtime, forms, &[param, grad, buffer], elements, base)
}

reflected_layout!(
    kernels: [
        ADAM, ADAM_VEC4, SGD_VEC4, SGD
    ],
    params: {
        count, mode, lr, beta1, beta2, epsilon, step_size, bias2_sqrt, decay, momentum, start, vec4s
    }
);
