//! Reductions against an f64 reference: every row of the value-reduction table (`ReduceOp::all()`, so a new
//! row is tested as soon as it has a reference in `common::reference`) and argmax and argmin, over all elements
//! and every axis, at awkward sizes, past the dispatch limit and past one storage binding; bitwise repeatable.

use crate::common::reference::{self, over_lanes};
use crate::common::{lanes_of, per_backend, vulkan_only, Backend, Rng};
use wgcompute::{Error, ReduceOp, Session, Tensor};

fn apply(tensor: &Tensor, op: ReduceOp, axis: Option<usize>) -> Tensor {
    tensor
        .reduce(op, axis)
        .unwrap_or_else(|error| panic!("{op:?} over {axis:?} of {:?}: {error}", tensor.shape()))
}

/// The relative error an op's f32 result may have over a lane of `len`: its reference's.
pub(crate) fn tolerance(op: ReduceOp, len: usize) -> f64 {
    (reference::reduction(op).tolerance)(len)
}

/// Per output, the reference and the scale its error is measured against: the larger of the result and the
/// op over the magnitudes. f32 sums of mixed signs can only promise accuracy against the sum of the
/// magnitudes they add, not against a result that cancels to near zero.
pub(crate) fn reference(
    data: &[f32],
    shape: &[usize],
    axis: Option<usize>,
    op: ReduceOp,
) -> Vec<(f64, f64)> {
    let mut magnitudes = Vec::new();
    over_lanes(data, shape, axis, |lane| {
        magnitudes.clear();
        magnitudes.extend(lane.iter().map(|x| x.abs()));
        let want = reference::reduce(op, lane);
        (
            want,
            want.abs().max(reference::reduce(op, &magnitudes).abs()),
        )
    })
}

/// The largest error of `got` against `want`, each relative to its scale.
pub(crate) fn error_against_scale(got: &[f32], want: &[(f64, f64)]) -> f64 {
    assert_eq!(got.len(), want.len(), "element counts differ");
    got.iter()
        .zip(want)
        .map(|(&g, &(w, scale))| {
            let error = (f64::from(g) - w).abs() / scale.max(f64::MIN_POSITIVE);
            if error.is_nan() {
                f64::INFINITY
            } else {
                error
            }
        })
        .fold(0.0, f64::max)
}

/// Argmax (or argmin with `smallest`): the first index of the largest (smallest) value of each lane.
fn arg_reference(data: &[f32], shape: &[usize], axis: Option<usize>, smallest: bool) -> Vec<u32> {
    over_lanes(data, shape, axis, |lane| {
        reference::arg(lane, smallest) as u32
    })
}

/// `len` values of either sign whose logarithms are uniform in ±w, w shrinking with `len` so that the product
/// of all of them stays finite and well inside f32's range (its logarithm wanders about 10/√3 from 0): a
/// spread from 0.37 to 2.7 for short tensors, values near 1 for long ones, where a product is the hardest.
pub(crate) fn signed_data(rng: &mut Rng, len: usize) -> Vec<f32> {
    let spread = (10.0 / (len as f64).sqrt()).min(1.0) as f32;
    (0..len)
        .map(|_| {
            let magnitude = f64::from(rng.uniform(-spread, spread)).exp() as f32;
            if rng.next_u64().is_multiple_of(2) {
                magnitude
            } else {
                -magnitude
            }
        })
        .collect()
}

fn check(session: &Session, rng: &mut Rng, shape: &[usize], label: &str) {
    let data = signed_data(rng, shape.iter().product());
    let tensor = session.upload(&data, shape).expect("upload");
    let axes: Vec<Option<usize>> = std::iter::once(None)
        .chain((0..shape.len()).map(Some))
        .collect();
    for &axis in &axes {
        let (_, lane, _) = lanes_of(shape, axis);
        for op in ReduceOp::all() {
            let got = apply(&tensor, op, axis).to_vec().expect("read");
            let error = error_against_scale(&got, &reference(&data, shape, axis, op));
            let tolerance = tolerance(op, lane);
            assert!(
                error < tolerance,
                "{label}: {op:?} over {axis:?} of {shape:?}: error {error:e} (tolerance {tolerance:e})"
            );
        }
        for (name, smallest) in [("argmax", false), ("argmin", true)] {
            let indices = if smallest {
                tensor.argmin(axis)
            } else {
                tensor.argmax(axis)
            };
            assert_eq!(
                indices.expect(name).to_vec_u32().expect("read"),
                arg_reference(&data, shape, axis, smallest),
                "{label}: {name} over {axis:?} of {shape:?}"
            );
        }
    }
}

per_backend!(awkward_shapes_along_every_axis);
fn awkward_shapes_along_every_axis(backend: &Backend) {
    let session = backend.poisoned();
    let mut rng = Rng::fresh("reduce shapes");
    for shape in [
        &[1][..],
        &[7],
        &[257],
        &[4097],
        // Just over the chunk stage's 4096 and a multiple of 4: the vec4 chunk loop, each row's own.
        &[4100],
        &[3, 4100],
        &[2, 8196],
        &[65_537],
        &[1, 1],
        &[3, 5],
        &[13, 257],
        &[257, 13],
        &[2, 3, 5, 7],
        &[3, 1, 4099],
        &[5, 300, 3],
    ] {
        check(&session, &mut rng, shape, "awkward shapes");
    }
}

vulkan_only!(large_inputs_past_the_dispatch_limit);
fn large_inputs_past_the_dispatch_limit(backend: &Backend) {
    let session = backend.poisoned();
    let mut rng = Rng::fresh("reduce large");
    // 2^24 + 1 elements: the count at which a grid of one invocation per 256 elements passes 65,535 groups.
    check(&session, &mut rng, &[16_777_217], "16M vector");
    check(&session, &mut rng, &[4096, 4096], "4096 square");
    // A long axis with a few columns, and many short rows.
    check(&session, &mut rng, &[1_000_003, 3], "long axis");
}

vulkan_only!(a_reduction_over_more_than_one_binding_is_windowed_and_repeatable);
fn a_reduction_over_more_than_one_binding_is_windowed_and_repeatable(backend: &Backend) {
    let session = backend.poisoned();
    let mut rng = Rng::fresh("reduce windows");
    let len = 48_000_000usize;
    let data = signed_data(&mut rng, len);
    let tensor = session.upload(&data, &[len]).expect("upload 192 MB");
    for op in ReduceOp::all() {
        let first = apply(&tensor, op, None).to_vec().expect("read");
        let error = error_against_scale(&first, &reference(&data, &[len], None, op));
        let tolerance = tolerance(op, len);
        assert!(
            error < tolerance,
            "{op:?} of {len}: error {error:e} (tolerance {tolerance:e})"
        );
        let again = apply(&tensor, op, None).to_vec().expect("read");
        assert_eq!(
            first[0].to_bits(),
            again[0].to_bits(),
            "{op:?}: the same input gives the same bits"
        );
    }
    let want_index = arg_reference(&data, &[len], None, false);
    assert_eq!(
        tensor
            .argmax(None)
            .expect("argmax")
            .to_vec_u32()
            .expect("read"),
        want_index
    );
}

vulkan_only!(empty_axes_and_whole_tensors_follow_numpy);
/// NumPy's answers over nothing: the empty sum 0, the empty product 1, the mean of nothing NaN (the reference
/// over an empty lane), and an error where that would be ±inf (max and min of nothing have no value). A
/// reduction over all elements is 0-d whatever the op.
fn empty_axes_and_whole_tensors_follow_numpy(backend: &Backend) {
    let session = backend.poisoned();
    let empty = session.zeros(&[3, 0]).expect("empty tensor");
    let values = session
        .upload(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])
        .expect("upload");
    for op in ReduceOp::all() {
        let want = reference::reduce(op, &[]);
        match empty.reduce(op, Some(1)) {
            Ok(got) if want.is_finite() || want.is_nan() => {
                let got = got.to_vec().expect("read");
                assert_eq!(got.len(), 3, "{op:?} of [3, 0] along 1");
                for value in got {
                    assert!(
                        f64::from(value) == want || (value.is_nan() && want.is_nan()),
                        "{op:?} of nothing is {value}, not {want}"
                    );
                }
            }
            Err(Error::Shape { .. }) if want.is_infinite() => {}
            other => panic!(
                "{op:?} of nothing: {:?}, want {want}",
                other.map(|tensor| tensor.to_vec())
            ),
        }
        let whole = apply(&values, op, None);
        assert_eq!(whole.shape(), &[] as &[usize], "{op:?} over None is 0-d");
        let want = reference::reduce(op, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        assert_eq!(f64::from(whole.item().expect("item")), want, "{op:?}");
    }
    assert_eq!(
        values.prod(Some(0)).expect("prod").to_vec().expect("read"),
        vec![4.0, 10.0, 18.0]
    );
    assert_eq!(
        values.prod(Some(1)).expect("prod").to_vec().expect("read"),
        vec![6.0, 120.0]
    );
}

vulkan_only!(bad_axes_are_shape_errors_and_the_session_goes_on);
fn bad_axes_are_shape_errors_and_the_session_goes_on(backend: &Backend) {
    let session = backend.poisoned();
    let tensor = session
        .upload(&[1.0, 2.0, 3.0, 4.0], &[2, 2])
        .expect("upload");
    assert!(matches!(tensor.sum(Some(2)), Err(Error::Shape { .. })));
    let empty = session.zeros(&[3, 0]).expect("empty tensor");
    assert!(matches!(empty.max(Some(1)), Err(Error::Shape { .. })));
    let indices = tensor.argmax(Some(1)).expect("argmax");
    assert!(matches!(indices.mean(None), Err(Error::DTypes { .. })));
    assert!(matches!(indices.to_vec(), Err(Error::DType { .. })));
    assert!(matches!(indices.fill_(1.0), Err(Error::DType { .. })));
    assert!(matches!(
        indices.write(&[1.0, 2.0]),
        Err(Error::DType { .. })
    ));
    assert_eq!(
        tensor.sum(Some(1)).expect("sum").to_vec().expect("read"),
        vec![3.0, 7.0]
    );
}

per_backend!(
    every_chunk_stage_variant_at_awkward_shapes_and_with_nan,
    "reduce_chunk": contiguous_runs, strided_runs, subgroup_runs, long_runs
);
fn every_chunk_stage_variant_at_awkward_shapes_and_with_nan(backend: &Backend, variant: &str) {
    reduction_variant(backend, "reduce_chunk", variant);
}

per_backend!(
    every_axis_stage_variant_at_awkward_shapes_and_with_nan,
    "reduce_axis": invocation_per_output, lanes_per_output, subgroup_per_output
);
fn every_axis_stage_variant_at_awkward_shapes_and_with_nan(backend: &Backend, variant: &str) {
    reduction_variant(backend, "reduce_axis", variant);
}

/// One variant of a reduction stage forced (the chunk stage's contiguous, strided, subgroup or long runs,
/// the axis stage's invocation, lanes or subgroup per output; argmax and argmin keep their own kernels): awkward
/// shapes through each kind of stage for every row of the table, and a NaN in one row. The subgroup variants run where the
/// adapter has subgroup operations (lavapipe's Vulkan adapter does, GL does not); elsewhere the same checks run on
/// the variant the library takes instead, and the subgroup kernel must not have run.
fn reduction_variant(backend: &Backend, family: &str, variant: &str) {
    let mut rng = Rng::fresh("reduce variants");
    let subgroups = wgcompute::list_adapters()
        .iter()
        .any(|adapter| adapter.backend == backend.name && adapter.subgroups);
    let session = backend.poisoned_with(family, variant);
    let label = format!("{family}/{variant}");
    // Without subgroup operations the forced pick cannot be honoured: the checks below then run on the
    // variant the library falls back to, and the report must show that the subgroup kernel never ran.
    let unavailable = variant.starts_with("subgroup") && !subgroups;
    for shape in [
        &[1][..],
        &[17],
        &[4097],
        &[4100],
        &[3, 4100],
        &[70_001],
        &[4096, 16],
        &[13, 257],
        &[3, 8_195],
        &[5, 300, 3],
    ] {
        check(&session, &mut rng, shape, &label);
    }
    // A NaN in one row makes that row's every value reduction NaN, as NumPy's.
    let (rows, cols) = (5, 9_001);
    let mut data = signed_data(&mut rng, rows * cols);
    data[2 * cols + 4_321] = f32::NAN;
    let tensor = session.upload(&data, &[rows, cols]).expect("upload");
    for op in ReduceOp::all() {
        let got = apply(&tensor, op, Some(1)).to_vec().expect("read");
        let want = reference(&data, &[rows, cols], Some(1), op);
        for (row, (&g, &w)) in got.iter().zip(&want).enumerate() {
            if row == 2 {
                assert!(g.is_nan(), "{label}: {op:?} of the row with a NaN is {g}");
            } else {
                let error = error_against_scale(&[g], &[w]);
                assert!(
                    error < tolerance(op, cols),
                    "{label}: {op:?} of row {row}: {g} vs {}",
                    w.0
                );
            }
        }
    }
    // The same pick, the same bits, run to run.
    let rows = session
        .upload(&rng.vec(37 * 1_000, -1.0, 1.0), &[37, 1_000])
        .expect("upload");
    let first = rows.sum(Some(1)).expect("sum").to_vec().expect("read");
    let again = rows.sum(Some(1)).expect("sum").to_vec().expect("read");
    assert!(
        first
            .iter()
            .zip(&again)
            .all(|(a, b)| a.to_bits() == b.to_bits()),
        "{label}: two sums of the same rows differ"
    );
    let report = session.tuning_report().expect("report");
    if unavailable {
        assert!(
            !report.is_empty() && report.iter().all(|record| record.pick != variant),
            "{label} ran on {} without subgroup operations: {report:?}",
            backend.name
        );
    } else {
        assert!(
            report.iter().any(|record| record.pick == variant),
            "{label} never ran: {report:?}"
        );
    }
}

// --- the Array API's reductions over several axes, statistics and scans ---

mod array_api {
    use crate::common::reference;
    use crate::common::{per_backend, vulkan_only, widen, Backend, Rng};
    use crate::ops_manipulate::{check_gradient, ravel, unravel};
    use wgcompute::{Error, ReduceOp, Tensor};

    /// Each kept position's lane (the elements that differ only along `axes`), in row-major order, as f64.
    fn lanes_over(x: &[f64], shape: &[usize], axes: &[usize]) -> Vec<Vec<f64>> {
        let kept: Vec<usize> = (0..shape.len())
            .map(|a| if axes.contains(&a) { 1 } else { shape[a] })
            .collect();
        let mut lanes = vec![Vec::new(); kept.iter().product()];
        for (i, &value) in x.iter().enumerate() {
            let mut index = unravel(i, shape);
            for &axis in axes {
                index[axis] = 0;
            }
            lanes[ravel(&index, &kept)].push(value);
        }
        lanes
    }

    fn kept_shape(shape: &[usize], axes: &[usize], keepdims: bool) -> Vec<usize> {
        (0..shape.len())
            .filter_map(|a| match (axes.contains(&a), keepdims) {
                (false, _) => Some(shape[a]),
                (true, true) => Some(1),
                (true, false) => None,
            })
            .collect()
    }

    fn variance(lane: &[f64], correction: f64) -> f64 {
        let n = lane.len() as f64;
        let mean = lane.iter().sum::<f64>() / n;
        let divisor = n - correction;
        if divisor <= 0.0 {
            return f64::NAN;
        }
        lane.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / divisor
    }

    fn logsumexp(lane: &[f64]) -> f64 {
        let max = lane.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        max + lane.iter().map(|x| (x - max).exp()).sum::<f64>().ln()
    }

    fn check_close(label: &str, got: &Tensor, want_shape: &[usize], want: &[f64], tolerance: f64) {
        let scales: Vec<f64> = want.iter().map(|w| w.abs().max(1.0)).collect();
        check_close_scaled(label, got, want_shape, want, &scales, tolerance);
    }

    /// [`check_close`] with each element's error measured against its own scale (a sum's, the sum of its
    /// terms' magnitudes: what float32 rounding is proportional to when the terms cancel).
    fn check_close_scaled(
        label: &str,
        got: &Tensor,
        want_shape: &[usize],
        want: &[f64],
        scales: &[f64],
        tolerance: f64,
    ) {
        assert_eq!(got.shape(), want_shape, "{label}: shape");
        let got = got.to_vec().expect("read");
        assert_eq!(got.len(), want.len(), "{label}: length");
        for (k, ((&g, &w), &scale)) in got.iter().zip(want).zip(scales).enumerate() {
            let error = (f64::from(g) - w).abs() / scale;
            assert!(
                error <= tolerance || (g.is_nan() && w.is_nan()),
                "{label}: element {k} is {g}, want {w} (error {error:e})"
            );
        }
    }

    /// Every subset of the axes of `rank` (each in the order given, some reversed: order does not matter).
    fn axis_sets(rank: usize) -> Vec<Vec<usize>> {
        (0..1usize << rank)
            .map(|mask| {
                let mut axes: Vec<usize> = (0..rank).filter(|a| mask & (1 << a) != 0).collect();
                if mask % 3 == 0 {
                    axes.reverse();
                }
                axes
            })
            .collect()
    }

    per_backend!(reductions_over_axis_tuples_with_keepdims);
    fn reductions_over_axis_tuples_with_keepdims(backend: &Backend) {
        let session = backend.poisoned();
        let mut rng = Rng::fresh("reduce axes");
        for shape in [&[7][..], &[3, 1, 5], &[2, 3, 5, 7], &[4, 0, 3], &[1, 257]] {
            let host = super::signed_data(&mut rng, shape.iter().product());
            let x = session.upload(&host, shape).expect("upload");
            let wide = widen(&host);
            for axes in axis_sets(shape.len()) {
                let mut sorted = axes.clone();
                sorted.sort_unstable();
                let lanes = lanes_over(&wide, shape, &sorted);
                for keepdims in [false, true] {
                    let out_shape = kept_shape(shape, &sorted, keepdims);
                    for op in ReduceOp::all() {
                        let empty = lanes.first().is_some_and(|lane| lane.is_empty());
                        let result = x.reduce_axes(op, Some(&axes), keepdims);
                        if empty && matches!(op, ReduceOp::Max | ReduceOp::Min) {
                            assert!(
                                matches!(result, Err(Error::Shape { .. })),
                                "{op:?} of nothing"
                            );
                            continue;
                        }
                        let want: Vec<f64> = lanes
                            .iter()
                            .map(|lane| reference::reduce(op, lane))
                            .collect();
                        let len = lanes.first().map_or(1, Vec::len);
                        let got = result.expect("reduce_axes");
                        check_close(
                            &format!("{op:?} over {axes:?} of {shape:?} keepdims={keepdims}"),
                            &got,
                            &out_shape,
                            &want,
                            super::tolerance(op, len.max(1)) * 4.0,
                        );
                    }
                    if lanes.first().is_some_and(|lane| !lane.is_empty()) {
                        let label = format!("over {axes:?} of {shape:?} keepdims={keepdims}");
                        for correction in [0.0, 1.0] {
                            let want: Vec<f64> = lanes
                                .iter()
                                .map(|lane| variance(lane, correction))
                                .collect();
                            check_close(
                                &format!("var {label}"),
                                &x.var(Some(&axes), correction, keepdims).expect("var"),
                                &out_shape,
                                &want,
                                1e-5,
                            );
                            let want: Vec<f64> = want.iter().map(|v| v.sqrt()).collect();
                            check_close(
                                &format!("std {label}"),
                                &x.std(Some(&axes), correction, keepdims).expect("std"),
                                &out_shape,
                                &want,
                                1e-5,
                            );
                        }
                        let want: Vec<f64> = lanes.iter().map(|lane| logsumexp(lane)).collect();
                        check_close(
                            &format!("logsumexp {label}"),
                            &x.logsumexp(Some(&axes), keepdims).expect("logsumexp"),
                            &out_shape,
                            &want,
                            1e-5,
                        );
                    }
                }
            }
            // argmax and argmin with the axis kept.
            for axis in (0..shape.len()).map(Some).chain([None]) {
                if x.is_empty() {
                    continue;
                }
                let kept = x.argmax_keepdims(axis).expect("argmax_keepdims");
                let plain = x.argmax(axis).expect("argmax");
                assert_eq!(
                    kept.to_vec_u32().expect("read"),
                    plain.to_vec_u32().expect("read")
                );
                let axes: Vec<usize> = axis.map_or((0..shape.len()).collect(), |a| vec![a]);
                assert_eq!(
                    kept.shape(),
                    kept_shape(shape, &axes, true),
                    "argmax keepdims over {axis:?}"
                );
                assert_eq!(
                    x.argmin_keepdims(axis).expect("argmin").shape(),
                    kept.shape()
                );
            }
        }
    }

    per_backend!(variance_keeps_its_accuracy_around_a_large_mean);
    fn variance_keeps_its_accuracy_around_a_large_mean(backend: &Backend) {
        let session = backend.poisoned();
        let mut rng = Rng::fresh("var large mean");
        // Several draws at 1e6, where a float32 mean is off by up to half its ulp (0.03): without the
        // corrected two-pass form that error's square alone is ~3e-3 of the variance.
        for (mean, len) in [
            (1e4f32, 10_007usize),
            (3e5, 4099),
            (-1e6, 65_537),
            (1e6, 4099),
            (1e6, 1031),
            (-1e6, 7),
        ] {
            let host: Vec<f32> = (0..len).map(|_| mean + rng.uniform(-1.0, 1.0)).collect();
            let x = session.upload(&host, &[len]).expect("upload");
            let want = variance(&widen(&host), 1.0);
            let got = f64::from(x.var(None, 1.0, false).expect("var").item().expect("item"));
            // A one-pass E[x²] − E[x]² would lose every digit here (mean² / var ≈ 1e9 and more).
            assert!(
                (got - want).abs() / want < 1e-3,
                "var around {mean}: {got}, want {want}"
            );
        }
        let one = session.upload(&[3.0], &[1]).expect("one");
        assert!(
            one.var(None, 1.0, false)
                .expect("var")
                .item()
                .expect("item")
                .is_nan(),
            "N − correction = 0 is NaN"
        );
    }

    per_backend!(running_sums_and_products_match_their_references);
    fn running_sums_and_products_match_their_references(backend: &Backend) {
        let session = backend.poisoned();
        let mut rng = Rng::fresh("scans");
        for shape in [
            &[1][..],
            &[7],
            &[3, 0, 2],
            &[2, 3, 5, 7],
            &[4097],
            &[3, 300],
        ] {
            let host = super::signed_data(&mut rng, shape.iter().product());
            let x = session.upload(&host, shape).expect("upload");
            let wide = widen(&host);
            for axis in 0..shape.len() {
                for (prod, initial) in [(false, false), (false, true), (true, false), (true, true)]
                {
                    let mut out_shape = shape.to_vec();
                    out_shape[axis] += usize::from(initial);
                    let (want, scales): (Vec<f64>, Vec<f64>) = (0..out_shape.iter().product())
                        .map(|linear| {
                            let index = unravel(linear, &out_shape);
                            let end = index[axis] + 1 - usize::from(initial);
                            let mut source = index.clone();
                            let terms: Vec<f64> = (0..end)
                                .map(|i| {
                                    source[axis] = i;
                                    wide[ravel(&source, shape)]
                                })
                                .collect();
                            if prod {
                                let product: f64 = terms.iter().product();
                                (product, product.abs().max(1.0))
                            } else {
                                let magnitude: f64 = terms.iter().map(|t| t.abs()).sum();
                                (terms.iter().sum(), magnitude.max(1.0))
                            }
                        })
                        .unzip();
                    let got = if prod {
                        x.cumulative_prod(Some(axis), initial)
                    } else {
                        x.cumulative_sum(Some(axis), initial)
                    }
                    .expect("scan");
                    let label = format!(
                        "{} along {axis} of {shape:?} initial={initial}",
                        if prod { "cumprod" } else { "cumsum" }
                    );
                    // A sum against the running sum of its terms' magnitudes (a block scan's error grows
                    // with the depth of its tree, log2 of the length); a product, whose terms do not cancel,
                    // against itself, with one rounding per term.
                    let len = shape[axis].max(1) as f64;
                    let tolerance = if prod {
                        4.0 * len * 6e-8
                    } else {
                        4.0 * (len.log2() + 1.0) * 6e-8
                    };
                    check_close_scaled(&label, &got, &out_shape, &want, &scales, tolerance);
                }
            }
        }
        let matrix = session.upload(&[1.0; 6], &[2, 3]).expect("matrix");
        assert!(
            matches!(matrix.cumulative_sum(None, false), Err(Error::Shape { .. })),
            "a matrix needs an axis"
        );
        assert!(matches!(
            matrix.cumulative_sum(Some(2), false),
            Err(Error::Shape { .. })
        ));
        assert_eq!(
            session
                .upload(&[1.0, 2.0, 3.0], &[3])
                .expect("v")
                .cumulative_sum(None, true)
                .expect("cumsum")
                .to_vec()
                .expect("read"),
            vec![0.0, 1.0, 3.0, 6.0]
        );
    }

    per_backend!(statistics_and_scans_differentiate_on_the_tape);
    fn statistics_and_scans_differentiate_on_the_tape(backend: &Backend) {
        let session = backend.poisoned();
        let mut rng = Rng::fresh("statistics gradients");
        let shape = vec![3, 4, 5];
        let tolerance = 1e-5;
        for axes in [vec![0, 2], vec![1], vec![2, 1, 0]] {
            let mut sorted = axes.clone();
            sorted.sort_unstable();
            for keepdims in [false, true] {
                // Centred off zero: a float32 sum's error is relative to Σ|x|, and a sum of 60 draws from
                // [-2, 2] lands near 0 often enough (a few in a hundred) to fail a tolerance relative to itself.
                let input = vec![(shape.clone(), rng.vec(shape.iter().product(), -1.0, 3.0))];
                for op in [ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Prod] {
                    check_gradient(
                        &session,
                        &mut rng,
                        &format!("{op:?} over {axes:?}"),
                        &input,
                        |v| v[0].reduce_axes(op, Some(&axes), keepdims),
                        &|x| {
                            lanes_over(&x[0], &shape, &sorted)
                                .iter()
                                .map(|lane| reference::reduce(op, lane))
                                .collect()
                        },
                        tolerance,
                    );
                }
                check_gradient(
                    &session,
                    &mut rng,
                    &format!("var over {axes:?}"),
                    &input,
                    |v| v[0].var(Some(&axes), 1.0, keepdims),
                    &|x| {
                        lanes_over(&x[0], &shape, &sorted)
                            .iter()
                            .map(|lane| variance(lane, 1.0))
                            .collect()
                    },
                    tolerance,
                );
                check_gradient(
                    &session,
                    &mut rng,
                    &format!("std over {axes:?}"),
                    &input,
                    |v| v[0].std(Some(&axes), 0.0, keepdims),
                    &|x| {
                        lanes_over(&x[0], &shape, &sorted)
                            .iter()
                            .map(|lane| variance(lane, 0.0).sqrt())
                            .collect()
                    },
                    tolerance,
                );
                check_gradient(
                    &session,
                    &mut rng,
                    &format!("logsumexp over {axes:?}"),
                    &input,
                    |v| v[0].logsumexp(Some(&axes), keepdims),
                    &|x| {
                        lanes_over(&x[0], &shape, &sorted)
                            .iter()
                            .map(|lane| logsumexp(lane))
                            .collect()
                    },
                    tolerance,
                );
            }
        }
        for axis in 0..3 {
            for initial in [false, true] {
                // Products of values away from zero, then with zeros (lanes with one and with several),
                // where the gradient must be exact too: the issue's [2, 0, 3] has gradient [1, 8, 0].
                let positive: Vec<f32> = (0..60).map(|_| rng.uniform(0.5, 1.5)).collect();
                let with_zeros: Vec<f32> = positive
                    .iter()
                    .map(|&x| {
                        if rng.next_u64().is_multiple_of(5) {
                            0.0
                        } else {
                            x
                        }
                    })
                    .collect();
                for (prod, data) in [(false, &positive), (true, &positive), (true, &with_zeros)] {
                    let input = vec![(shape.clone(), data.clone())];
                    check_gradient(
                        &session,
                        &mut rng,
                        &format!("scan prod={prod} along {axis}"),
                        &input,
                        |v| {
                            if prod {
                                v[0].cumulative_prod(Some(axis), initial)
                            } else {
                                v[0].cumulative_sum(Some(axis), initial)
                            }
                        },
                        &|x| {
                            let mut out_shape = shape.clone();
                            out_shape[axis] += usize::from(initial);
                            (0..out_shape.iter().product())
                                .map(|linear| {
                                    let index = unravel(linear, &out_shape);
                                    let end = index[axis] + 1 - usize::from(initial);
                                    let mut source = index.clone();
                                    let terms = (0..end).map(|i| {
                                        source[axis] = i;
                                        x[0][ravel(&source, &shape)]
                                    });
                                    if prod {
                                        terms.product()
                                    } else {
                                        terms.sum()
                                    }
                                })
                                .collect()
                        },
                        tolerance,
                    );
                }
            }
        }
    }

    vulkan_only!(bad_axes_are_errors_and_max_is_refused_on_the_tape);
    fn bad_axes_are_errors_and_max_is_refused_on_the_tape(backend: &Backend) {
        let session = backend.poisoned();
        let x = session.upload(&[1.0; 6], &[2, 3]).expect("x");
        for axes in [&[0, 0][..], &[2], &[1, 0, 1]] {
            assert!(
                matches!(
                    x.reduce_axes(ReduceOp::Sum, Some(axes), false),
                    Err(Error::Shape { .. })
                ),
                "{axes:?}"
            );
            assert!(
                matches!(x.var(Some(axes), 0.0, false), Err(Error::Shape { .. })),
                "var {axes:?}"
            );
        }
        // Lanes of no element have a log-sum-exp of -inf (the log of an empty sum), as NumPy's and SciPy's.
        let empty = session.zeros(&[2, 0]).expect("empty");
        let nothing = empty
            .logsumexp(Some(&[1]), false)
            .expect("logsumexp of nothing");
        assert_eq!(nothing.to_vec().expect("read"), vec![f32::NEG_INFINITY; 2]);
        let tape = wgcompute::GradientTape::new();
        let param = std::sync::Arc::new(session.upload(&[1.0; 6], &[2, 3]).expect("param"));
        let var = tape.watch_parameter(&param).expect("watch");
        assert!(matches!(
            var.reduce_axes(ReduceOp::Max, Some(&[0, 1]), true),
            Err(Error::InvalidArgument { .. })
        ));
        // Axes reduced as given: none is the identity, every one is all.
        assert_eq!(
            x.reduce_axes(ReduceOp::Sum, Some(&[]), false)
                .expect("no axes")
                .to_vec()
                .expect("read"),
            vec![1.0; 6]
        );
        assert_eq!(
            x.reduce_axes(ReduceOp::Sum, None, true)
                .expect("all")
                .shape(),
            &[1, 1]
        );
    }
}
