//! Softmax family (shaders/softmax.wgsl): softmax and log-softmax along the last axis, and TensorFlow's
//! softmax cross-entropy fused with its exact gradient.
//!
//! Three variants, each for both kernels: a workgroup per row (256 invocations share a row: wide rows), rows
//! per workgroup (16 invocations per row, 16 rows per workgroup) and a row per invocation (short rows: no
//! barriers, no workgroup memory). They sum in different orders, so their results can differ in the last bits;
//! each is deterministic. The tuner picks among those that suit the shape.
//!
//! The cross-entropy kernels can also count the rows whose logits' argmax is their labels' argmax (an epoch's
//! running accuracy, in the pass that computes the loss rather than in passes of its own). The count is an
//! integer added atomically, so it is exact in any order; the loss and gradient are the same bits either way.

use bytemuck::{Pod, Zeroable};

use super::plan::Limits;
use crate::error::Result;
use crate::runtime::{
    size_bucket, wgsl_constants, BufferRange, Kernel, Runtime, Shader, WORKGROUP_SIZE,
};

static SOFTMAX: Shader = Shader {
    proven_bounds: false,
    name: "softmax",
    source: include_str!("../../shaders/softmax.wgsl"),
    generated: || wgsl_constants(&[("SOFTMAX", SOFTMAX_OP), ("LOG_SOFTMAX", LOG_SOFTMAX_OP)]),
};

/// The shader's codes for `softmax_rows`.
const SOFTMAX_OP: u32 = 0;
const LOG_SOFTMAX_OP: u32 = 1;

static SOFTMAX_ROWS: Kernel = Kernel::new(&SOFTMAX, "softmax_rows", &[1, 3]);
static SOFTMAX_XENT: Kernel = Kernel::new(&SOFTMAX, "softmax_xent", &[1, 2, 3, 4, 5]);
static SOFTMAX_ROWS_SEGMENTED: Kernel = Kernel::new(&SOFTMAX, "softmax_rows_segmented", &[1, 3]);
static SOFTMAX_XENT_SEGMENTED: Kernel =
    Kernel::new(&SOFTMAX, "softmax_xent_segmented", &[1, 2, 3, 4, 5]);
static SOFTMAX_ROWS_PER_INVOCATION: Kernel =
    Kernel::new(&SOFTMAX, "softmax_rows_per_invocation", &[1, 3]);
static SOFTMAX_XENT_PER_INVOCATION: Kernel =
    Kernel::new(&SOFTMAX, "softmax_xent_per_invocation", &[1, 2, 3, 4, 5]);

/// The family's name in tuning records, the cache and `SessionOptions::force_variant`.
pub(crate) const FAMILY: &str = "softmax";
const WORKGROUP_PER_ROW: &str = "workgroup_per_row";
const ROWS_PER_WORKGROUP: &str = "rows_per_workgroup";
const ROW_PER_INVOCATION: &str = "row_per_invocation";
/// Every variant, by name.
pub(crate) const VARIANTS: &[&str] = &[WORKGROUP_PER_ROW, ROWS_PER_WORKGROUP, ROW_PER_INVOCATION];

/// Invocations per row of the rows-per-workgroup variant (the shader's ROW_LANES).
const ROW_LANES: usize = 16;
/// Longest row one invocation takes alone: its loops stay short, and its left-to-right sums accurate.
const MAX_COLS_PER_INVOCATION: usize = 1024;
/// Longest row the rows-per-workgroup variant takes: past this a whole workgroup per row is never slower.
const MAX_COLS_SEGMENTED: usize = 16 * 4096;

/// The variants that suit rows of `cols`, the default first: a row per invocation up to 32 columns, 16
/// invocations per row up to 512, a workgroup per row beyond.
fn candidates(cols: usize) -> Vec<&'static str> {
    let mut eligible = vec![WORKGROUP_PER_ROW];
    if cols <= MAX_COLS_SEGMENTED {
        eligible.push(ROWS_PER_WORKGROUP);
    }
    if cols <= MAX_COLS_PER_INVOCATION {
        eligible.push(ROW_PER_INVOCATION);
    }
    let default = if cols <= 32 {
        ROW_PER_INVOCATION
    } else if cols <= 512 {
        ROWS_PER_WORKGROUP
    } else {
        WORKGROUP_PER_ROW
    };
    eligible.retain(|&variant| variant != default);
    eligible.insert(0, default);
    eligible
}

/// Shape classes: rows and columns each rounded up to a power of 4; `xent` and softmax are tuned apart.
fn class(kind: &str, rows: usize, cols: usize) -> String {
    format!(
        "{kind} rows<={} cols<={}",
        size_bucket(rows),
        size_bucket(cols)
    )
}

/// The kernel and workgroups of `variant` for `rows` rows.
fn plan(
    limits: Limits,
    variant: &str,
    rows: usize,
    (per_row, segmented, per_invocation): (&'static Kernel, &'static Kernel, &'static Kernel),
) -> (&'static Kernel, [u32; 3]) {
    match variant {
        ROW_PER_INVOCATION => (per_invocation, limits.per_element(rows as u64, 1)),
        ROWS_PER_WORKGROUP => (
            segmented,
            limits.grid(rows.div_ceil(WORKGROUP_SIZE as usize / ROW_LANES) as u32),
        ),
        _ => (per_row, limits.grid(rows as u32)),
    }
}

#[repr(C)]
#[derive(Clone, Copy, Default, Pod, Zeroable)]
struct Params {
    rows: u32,
    cols: u32,
    op: u32,
    /// 1: the cross-entropy kernels add the rows whose argmaxes agree into the last binding.
    count_correct: u32,
}

/// One kernel with op code `op` over `ranges` (rows read from the first, which must fit one binding), in the
/// variant the tuner picks for the shape, classed as `kind`. With `correct`, the cross-entropy kernels count
/// into it, bound in place of the last range (which the kernel then leaves alone).
fn run(
    runtime: &mut Runtime,
    (name, kind): (&'static str, &str),
    (kernels, op): ((&'static Kernel, &'static Kernel, &'static Kernel), u32),
    ranges: &[BufferRange],
    correct: Option<BufferRange>,
    (rows, cols): (usize, usize),
) -> Result<()> {
    let limits = Limits::of(runtime.limits());
    limits.expect_bindable(name, ranges[0])?;
    let params = Params {
        rows: rows as u32,
        cols: cols as u32,
        op,
        count_correct: 0,
    };
    let record = |runtime: &mut Runtime, variant: &str, params: &Params, ranges: &[BufferRange]| {
        let (kernel, workgroups) = plan(limits, variant, rows, kernels);
        runtime.dispatch(kernel, bytemuck::bytes_of(params), ranges, workgroups)
    };
    // The tuner's timed runs never count: a count must be added once, not once per run timed.
    let variant = runtime.choose_variant(
        FAMILY,
        class(kind, rows, cols),
        &candidates(cols),
        |runtime, variant| record(runtime, variant, &params, ranges),
    );
    match correct {
        None => record(runtime, variant, &params, ranges),
        Some(correct) => {
            let mut counting = ranges.to_vec();
            if let Some(last) = counting.last_mut() {
                *last = correct;
            }
            let params = Params {
                count_correct: 1,
                ..params
            };
            record(runtime, variant, &params, &counting)
        }
    }
}

/// Softmax (or log-softmax) of each of `rows` rows of `cols` elements.
pub(crate) fn softmax_rows(
    runtime: &mut Runtime,
    name: &'static str,
    log: bool,
    input: BufferRange,
    out: BufferRange,
    (rows, cols): (usize, usize),
) -> Result<()> {
    let kernels = (
        &SOFTMAX_ROWS,
        &SOFTMAX_ROWS_SEGMENTED,
        &SOFTMAX_ROWS_PER_INVOCATION,
    );
    let op = if log { LOG_SOFTMAX_OP } else { SOFTMAX_OP };
    run(
        runtime,
        (name, "softmax"),
        (kernels, op),
        &[input, out],
        None,
        (rows, cols),
    )
}

/// Per row: the loss into `loss`, and the exact gradient of the summed loss into `gradient`. With `correct` (a
/// u32), also adds to it the number of rows whose logits' argmax is their labels' argmax (argmax's own answer:
/// the first index on ties, the first NaN if any), in the same pass.
pub(crate) fn softmax_xent(
    runtime: &mut Runtime,
    name: &'static str,
    (logits, labels): (BufferRange, BufferRange),
    (gradient, loss): (BufferRange, BufferRange),
    correct: Option<BufferRange>,
    (rows, cols): (usize, usize),
) -> Result<()> {
    let kernels = (
        &SOFTMAX_XENT,
        &SOFTMAX_XENT_SEGMENTED,
        &SOFTMAX_XENT_PER_INVOCATION,
    );
    run(
        runtime,
        (name, "xent"),
        (kernels, 0),
        // Binding 5 is the count's; a pass that does not count binds the loss there and never touches it.
        &[logits, labels, gradient, loss, loss],
        correct,
        (rows, cols),
    )
}

reflected_layout!(
    kernels: [
        SOFTMAX_ROWS, SOFTMAX_XENT, SOFTMAX_ROWS_SEGMENTED, SOFTMAX_XENT_SEGMENTED,
        SOFTMAX_ROWS_PER_INVOCATION, SOFTMAX_XENT_PER_INVOCATION
    ],
    params: {
        rows, cols, op, count_correct
    }
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::softmax::MAX_COLS;

    #[test]
    fn every_width_has_its_default_first_and_only_variants_that_can_take_it() {
        for cols in [
            1,
            4,
            32,
            33,
            512,
            513,
            1024,
            1025,
            MAX_COLS_SEGMENTED,
            MAX_COLS_SEGMENTED + 1,
            MAX_COLS,
        ] {
            let eligible = candidates(cols);
            assert!(eligible.contains(&WORKGROUP_PER_ROW), "{cols}");
            assert_eq!(
                eligible.contains(&ROW_PER_INVOCATION),
                cols <= MAX_COLS_PER_INVOCATION,
                "{cols}"
            );
            assert_eq!(
                eligible.contains(&ROWS_PER_WORKGROUP),
                cols <= MAX_COLS_SEGMENTED,
                "{cols}"
            );
            let mut unique = eligible.clone();
            unique.dedup();
            assert_eq!(unique.len(), eligible.len(), "{cols}: {eligible:?}");
            assert!(eligible.iter().all(|variant| VARIANTS.contains(variant)));
        }
        assert_eq!(candidates(4)[0], ROW_PER_INVOCATION);
        assert_eq!(candidates(100)[0], ROWS_PER_WORKGROUP);
        assert_eq!(candidates(1000)[0], WORKGROUP_PER_ROW);
    }

    #[test]
    fn every_variant_covers_every_row() {
        let limits = Limits {
            max_binding_elements: 1 << 25,
            max_workgroups_per_dimension: 65_535,
        };
        let kernels = (
            &SOFTMAX_ROWS,
            &SOFTMAX_ROWS_SEGMENTED,
            &SOFTMAX_ROWS_PER_INVOCATION,
        );
        for rows in [
            1usize,
            15,
            16,
            17,
            255,
            256,
            257,
            65_535,
            65_536 * 16 + 1,
            20_000_000,
        ] {
            for &variant in VARIANTS {
                let (_, [x, y, z]) = plan(limits, variant, rows, kernels);
                let rows_per_group = match variant {
                    ROW_PER_INVOCATION => WORKGROUP_SIZE as usize,
                    ROWS_PER_WORKGROUP => WORKGROUP_SIZE as usize / ROW_LANES,
                    _ => 1,
                };
                assert!(
                    (x as usize) * (y as usize) * (z as usize) * rows_per_group >= rows,
                    "{variant}: {rows} rows in {x}x{y}x{z}"
                );
                assert!(x <= 65_535 && y <= 65_535, "{variant}: {rows}");
            }
        }
    }
}
