//! Window kernels (shaders/window.wgsl): the patches of an NHWC image (im2col) that convolutions and pooling
//! reduce or multiply, and their adjoint (col2im), the gradient of the patches and the transposed convolution.
//! The output is written in windows that each fit one binding; the input is bound whole. Each comes in two
//! variants the tuner picks from (family `window`): runs of channels per invocation, or one element.

use bytemuck::{Pod, Zeroable};

use super::plan::{Limits, PASS_ITERATIONS};
use crate::error::{Error, Result};
use crate::runtime::{size_bucket, BufferRange, Kernel, Runtime, Shader};
use crate::shape::window::Windows;

static WINDOW: Shader = Shader {
    proven_bounds: false,
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
    /// Each invocation loops over the window's taps (the adjoint), which then go in passes.
    loops_over_taps: bool,
}

const PATCHES_FORMS: Forms = Forms {
    name: "patches",
    runs: &PATCHES_RUNS,
    elements: &PATCHES,
    loops_over_taps: false,
};
const PATCHES_ADJOINT_FORMS: Forms = Forms {
    name: "patches_adjoint",
    runs: &PATCHES_ADJOINT_RUNS,
    elements: &PATCHES_ADJOINT,
    loops_over_taps: true,
};

/// The loop iterations an invocation of the adjoint runs, at most, for a pass over `rows` rows of `columns`
/// taps: one element's, or a run's (up to RUN sub-runs of channels, whose channels add up to RUN at most).
fn adjoint_iterations(runs: bool, rows: u64, columns: u64) -> u64 {
    if runs {
        81 + rows * (32 + 48 * columns)
    } else {
        1 + rows * (columns + 2)
    }
}

/// Whether the runs form can take a whole row of `kw` taps within one pass.
fn runs_fit(kw: u64) -> bool {
    adjoint_iterations(true, 1, kw) <= PASS_ITERATIONS
}

/// The adjoint's passes over a window of kh × kw taps, as [ky_begin, ky_end, kx_begin, kx_end], in row-major
/// order and each within PASS_ITERATIONS: runs of whole rows, or, for a row longer than a pass, parts of one
/// row.
fn tap_passes(runs: bool, kh: u64, kw: u64) -> Vec<[u32; 4]> {
    let rows = (1..=kh.max(1))
        .rev()
        .find(|&rows| adjoint_iterations(runs, rows, kw) <= PASS_ITERATIONS);
    match rows {
        Some(rows) => (0..kh)
            .step_by(rows as usize)
            .map(|first| [first as u32, (first + rows).min(kh) as u32, 0, kw as u32])
            .collect(),
        None => {
            let columns = (PASS_ITERATIONS - 3).max(1);
            (0..kh)
                .flat_map(|ky| {
                    (0..kw).step_by(columns as usize).map(move |first| {
                        [
                            ky as u32,
                            ky as u32 + 1,
                            first as u32,
                            (first + columns).min(kw) as u32,
                        ]
                    })
                })
                .collect()
        }
    }
}

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
    ky_begin: u32,
    ky_end: u32,
    kx_begin: u32,
    kx_end: u32,
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
    let (kh, kw) = (u64::from(base.kh), u64::from(base.kw));
    let record = |runtime: &mut Runtime, variant: &str, elements: u64| -> Result<()> {
        let runs = variant != ELEMENTS;
        let (kernel, per_invocation) = if runs {
            (forms.runs, RUN)
        } else {
            (forms.elements, 1)
        };
        let taps = if forms.loops_over_taps {
            tap_passes(runs, kh, kw)
        } else {
            vec![[0, kh as u32, 0, kw as u32]]
        };
        for (first, count) in limits.windows(elements) {
            for &[ky_begin, ky_end, kx_begin, kx_end] in &taps {
                let params = Params {
                    count: count as u32,
                    base: first as u32,
                    ky_begin,
                    ky_end,
                    kx_begin,
                    kx_end,
                    ..base
                };
                runtime.dispatch(
                    kernel,
                    bytemuck::bytes_of(&params),
                    &[source, target.elements(first, count)],
                    limits.per_element(count, per_invocation),
                )?;
            }
        }
        Ok(())
    };
    if forms.loops_over_taps && !runs_fit(kw) {
        // A row of taps too long for a run's pass: one element an invocation, in passes of its own.
        return record(runtime, ELEMENTS, elements);
    }
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
        dilation_h, dilation_w, pad_top, pad_left, fill, ky_begin, ky_end, kx_begin, kx_end
    }
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tap_passes_cover_every_tap_once_in_row_major_order_within_the_budget() {
        for runs in [false, true] {
            for (kh, kw) in [
                (1, 1),
                (3, 3),
                (37, 37),
                (200, 200),
                (1, 70_000),
                (3, 20_000),
            ] {
                if runs && !runs_fit(kw) {
                    continue;
                }
                let passes = tap_passes(runs, kh, kw);
                let mut next = (0u64, 0u64);
                for &[ky_begin, ky_end, kx_begin, kx_end] in &passes {
                    let (rows, columns) =
                        (u64::from(ky_end - ky_begin), u64::from(kx_end - kx_begin));
                    assert!(rows >= 1 && columns >= 1, "{kh}×{kw}: an empty pass");
                    assert!(
                        adjoint_iterations(runs, rows, columns) <= PASS_ITERATIONS,
                        "{kh}×{kw}"
                    );
                    // Each pass starts where the last one ended, in row-major order.
                    assert_eq!(
                        (u64::from(ky_begin), u64::from(kx_begin)),
                        next,
                        "{kh}×{kw}"
                    );
                    next = if u64::from(kx_end) == kw {
                        (u64::from(ky_end), 0)
                    } else {
                        (u64::from(ky_begin), u64::from(kx_end))
                    };
                    assert!(
                        columns == kw || rows == 1,
                        "{kh}×{kw}: part rows go one at a time"
                    );
                }
                assert_eq!(next, (kh, 0), "{kh}×{kw}: every tap");
            }
        }
        assert!(runs_fit(37) && !runs_fit(1000));
    }
}
