//! Optimizer updates (shaders/optim.wgsl): Adam in one fused in-place pass over param, grad, m and v, with
//! TensorFlow's or Kingma & Ba's epsilon placement and AdamW's decoupled weight decay; SGD with momentum.
//! Operands are bound in windows, so parameters larger than one storage binding update too.

use bytemuck::{Pod, Zeroable};

use super::dispatch_windows;
use crate::error::Result;
use crate::runtime::{wgsl_constants, BufferRange, Kernel, Runtime, Shader};

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

static ADAM: Kernel = Kernel {
    shader: &OPTIM,
    entry: "adam",
    bindings: &[1, 2, 3, 4],
};
static ADAM_VEC4: Kernel = Kernel {
    shader: &OPTIM,
    entry: "adam_vec4",
    bindings: &[1, 2, 3, 4],
};
static SGD_VEC4: Kernel = Kernel {
    shader: &OPTIM,
    entry: "sgd_vec4",
    bindings: &[1, 2, 3],
};
static SGD: Kernel = Kernel {
    shader: &OPTIM,
    entry: "sgd",
    bindings: &[1, 2, 3],
};

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
    _pad: [u32; 2],
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

/// Windows of same-sized operands, vec4 when the element count allows.
fn run(
    runtime: &mut Runtime,
    (vec4, scalar): (&'static Kernel, &'static Kernel),
    ranges: &[BufferRange],
    elements: u64,
    base: Params,
) -> Result<()> {
    let (kernel, per_invocation) = if elements.is_multiple_of(4) {
        (vec4, 4)
    } else {
        (scalar, 1)
    };
    dispatch_windows(
        runtime,
        kernel,
        ranges,
        elements,
        per_invocation,
        |_, count| Params {
            count: count as u32,
            ..base
        },
    )
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
    run(
        runtime,
        (&ADAM_VEC4, &ADAM),
        &[param, grad, m, v],
        elements,
        base,
    )
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
    run(
        runtime,
        (&SGD_VEC4, &SGD),
        &[param, grad, buffer],
        elements,
        base,
    )
}

reflected_layout!(
    kernels: [
        ADAM, ADAM_VEC4, SGD_VEC4, SGD
    ],
    params: {
        count, mode, lr, beta1, beta2, epsilon, step_size, bias2_sqrt, decay, momentum
    }
);
