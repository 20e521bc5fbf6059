//! Window kernels (shaders/window.wgsl): the patches of an NHWC image (im2col) that convolutions and pooling
//! reduce or multiply, and their adjoint (col2im), the gradient of the patches and the transposed convolution.
//! The output is written in windows that each fit one binding; the input is bound whole. Each comes in two
//! variants the tuner picks from (family `window`): runs of channels per invocation, or one element.

use bytemuck::{Pod, Zeroable};

use super::plan::Limits;
use crate::error::{Error, Result};
use crate::runtime::{size_bucket, BufferRange, Kernel, Runtime, Shader};
use crate::shape::window::Windows;

static WINDOW: Shader = Shader {
    name: "window",
    source: include_str!("../../shaders/window.wgsl"),
    generated: String::new,
};

static PATCHES: Kernel = Kernel::new(&WINDOW, "patches", &[1, 3]);
static PATCHES_ADJOINT: Kernel = Kernel::new(&WINDOW, "patches_adjoint", &[1, 3]);
static PATCHES_RUNS: Kernel = Kernel::new(&WINDOW, "patches_runs", &[1, 3]);
static PATCHES_ADJOINT_RUNS: Kernel = Kernel::new(&WINDOW, "patches_adjoint_runs", &[1, 3]);

/// The family's name in tuning records, the cache and `SessionOptions::force_variant`.
pub(crate) const FAMILY: &str = "window";
/// Up to `RUN` consecutive elements per invocation (a run of channels shares its pixel and taps): the default.
const RUNS: &str = "runs";
/// One element per invocation.
const ELEMENTS: &str = "elements";
/// The first is the default.
pub(crate) const VARIANTS: &[&str] = &[RUNS, ELEMENTS];
/// The shader's `RUN`.
const RUN: u64 = 16;
/// The tuner times a variant on the output's first elements only: enough to show a steady rate.
const TIMED_ELEMENTS: u64 = 1 << 20;

/// The two forms of one window kernel.
struct Forms {
    name: &'static str,
    runs: &'static Kernel,
    elements: &'static Kernel,
}

const PATCHES_FORMS: Forms = Forms {
    name: "patches",
    runs: &PATCHES_RUNS,
    elements: &PATCHES,
};
const PATCHES_ADJOINT_FORMS: Forms = Forms {
    name: "patches_adjoint",
    runs: &PATCHES_ADJOINT_RUNS,
    elements: &PATCHES_ADJOINT,
};

#[repr(C)]
#[derive(Clone, Copy, Default, Pod, Zeroable)]
struct Params {
    count: u32,
    base: u32,
    batch: u32,
    in_h: u32,
    in_w: u32,
    channels: u32,
    group_channels: u32,
    out_h: u32,
    out_w: u32,
    kh: u32,
    kw: u32,
    stride_h: u32,
    stride_w: u32,
    dilation_h: u32,
    dilation_w: u32,
    pad_top: u32,
    pad_left: u32,
    fill: f32,
}

/// Errors unless every size the kernels compute with, the positions they reach on the padded input
/// included, fits their u32 arithmetic.
fn expect_indexable(op: &'static str, windows: &Windows) -> Result<()> {
    let [groups, positions, row] = windows.patches_shape();
    let patches = (groups as u64) * (positions as u64) * (row as u64);
    let image = windows
        .input_shape()
        .iter()
        .map(|&d| d as u64)
        .product::<u64>();
    let reach = (0..2)
        .map(|axis| {
            let last = windows.output[axis].saturating_sub(1) as u64;
            last * windows.stride[axis] as u64
                + (windows.window[axis] as u64 - 1) * windows.dilation[axis] as u64
                + windows.pads[axis][0] as u64
        })
        .max()
        .unwrap_or(0);
    let largest = patches.max(image).max(reach);
    if largest < u64::from(i32::MAX as u32) {
        Ok(())
    } else {
        Err(Error::Shape {
            op,
            message: format!(
                "{largest} is more than the 2^31 - 1 the window kernels index: split the batch"
            ),
        })
    }
}

fn params(windows: &Windows, fill: f32) -> Params {
    Params {
        batch: windows.batch as u32,
        in_h: windows.input[0] as u32,
        in_w: windows.input[1] as u32,
        channels: windows.channels as u32,
        group_channels: windows.group_channels() as u32,
        out_h: windows.output[0] as u32,
        out_w: windows.output[1] as u32,
        kh: windows.window[0] as u32,
        kw: windows.window[1] as u32,
        stride_h: windows.stride[0] as u32,
        stride_w: windows.stride[1] as u32,
        dilation_h: windows.dilation[0] as u32,
        dilation_w: windows.dilation[1] as u32,
        pad_top: windows.pads[0][0] as u32,
        pad_left: windows.pads[1][0] as u32,
        fill,
        ..Params::default()
    }
}

/// Runs `forms` in the variant the tuner picks (timed on the real operands' first elements: each run writes
/// only the output, from the input) with `source` bound whole and `target` (`elements` long) in windows.
fn dispatch(
    runtime: &mut Runtime,
    op: &'static str,
    forms: &Forms,
    (source, target, elements): (BufferRange, BufferRange, u64),
    base: Params,
) -> Result<()> {
    let limits = Limits::of(runtime.limits());
    limits.expect_bindable(op, source)?;
    let record = |runtime: &mut Runtime, variant: &str, elements: u64| -> Result<()> {
        let (kernel, per_invocation) = if variant == ELEMENTS {
            (forms.elements, 1)
        } else {
            (forms.runs, RUN)
        };
        for (first, count) in limits.windows(elements) {
            let params = Params {
                count: count as u32,
                base: first as u32,
                ..base
            };
            runtime.dispatch(
                kernel,
                bytemuck::bytes_of(&params),
                &[source, target.elements(first, count)],
                limits.per_element(count, per_invocation),
            )?;
        }
        Ok(())
    };
    let class = format!(
        "{} channels<={} n<={}",
        forms.name,
        size_bucket(base.group_channels as usize),
        size_bucket(elements as usize)
    );
    let variant = runtime.choose_variant(FAMILY, class, VARIANTS, |runtime, variant| {
        record(runtime, variant, elements.min(TIMED_ELEMENTS))
    });
    record(runtime, variant, elements)
}

/// `target` = the patches of the image `source` ([`Windows::patches_shape`]), `fill` off its edges.
pub(crate) fn patches(
    runtime: &mut Runtime,
    op: &'static str,
    (source, target): (BufferRange, BufferRange),
    windows: &Windows,
    fill: f32,
) -> Result<()> {
    expect_indexable(op, windows)?;
    let elements = windows.patches_shape().iter().map(|&d| d as u64).product();
    dispatch(
        runtime,
        op,
        &PATCHES_FORMS,
        (source, target, elements),
        params(windows, fill),
    )
}

/// `target` (the image) = the sum, per image element, of the entries of the patches `source` read from it.
pub(crate) fn patches_adjoint(
    runtime: &mut Runtime,
    op: &'static str,
    (source, target): (BufferRange, BufferRange),
    windows: &Windows,
) -> Result<()> {
    expect_indexable(op, windows)?;
    let elements = windows.input_shape().iter().map(|&d| d as u64).product();
    dispatch(
        runtime,
        op,
        &PATCHES_ADJOINT_FORMS,
        (source, target, elements),
        params(windows, 0.0),
    )
}

reflected_layout!(
    kernels: [PATCHES, PATCHES_ADJOINT],
    params: {
        count, base, batch, in_h, in_w, channels, group_channels, out_h, out_w, kh, kw, stride_h, stride_w,
        dilation_h, dilation_w, pad_top, pad_left, fill
    }
);
