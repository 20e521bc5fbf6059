//! Reductions against an f64 reference: all elements and every axis, awkward sizes, past the dispatch limit
//! and past one storage binding; bitwise repeatable.

use crate::common::{self, for_each_backend, on_vulkan, Rng};
use wgcompute::{Error, Session, Tensor};

#[derive(Clone, Copy, Debug)]
enum Op {
    Sum,
    Mean,
    Max,
    Min,
}

fn apply(tensor: &Tensor, op: Op, axis: Option<usize>) -> Tensor {
    match op {
        Op::Sum => tensor.sum(axis),
        Op::Mean => tensor.mean(axis),
        Op::Max => tensor.max(axis),
        Op::Min => tensor.min(axis),
    }
    .unwrap_or_else(|error| panic!("{op:?} over {axis:?} of {:?}: {error}", tensor.shape()))
}

/// (outer, len, inner) around an axis, and the reference reduction in f64.
fn reference(data: &[f32], shape: &[usize], axis: Option<usize>, op: Op) -> Vec<f64> {
    let (outer, len, inner) = match axis {
        None => (1, data.len(), 1),
        Some(axis) => (
            shape[..axis].iter().product(),
            shape[axis],
            shape[axis + 1..].iter().product(),
        ),
    };
    let mut out = Vec::with_capacity(outer * inner);
    for o in 0..outer {
        for i in 0..inner {
            let values = (0..len).map(|k| data[(o * len + k) * inner + i] as f64);
            out.push(match op {
                Op::Sum => values.sum(),
                Op::Mean => values.sum::<f64>() / len as f64,
                Op::Max => values.fold(f64::NEG_INFINITY, f64::max),
                Op::Min => values.fold(f64::INFINITY, f64::min),
            });
        }
    }
    out
}

fn argmax_reference(data: &[f32], shape: &[usize], axis: Option<usize>) -> Vec<u32> {
    let (outer, len, inner) = match axis {
        None => (1, data.len(), 1),
        Some(axis) => (
            shape[..axis].iter().product(),
            shape[axis],
            shape[axis + 1..].iter().product(),
        ),
    };
    let mut out = Vec::new();
    for o in 0..outer {
        for i in 0..inner {
            let mut best = 0;
            for k in 1..len {
                if data[(o * len + k) * inner + i] > data[(o * len + best) * inner + i] {
                    best = k;
                }
            }
            out.push(best as u32);
        }
    }
    out
}

/// Each sum's error as a share of the sum of the magnitudes it adds: f32 summation of mixed signs can only
/// promise accuracy against that scale, not against a result that cancels to near zero.
fn error_against_magnitudes(got: &[f32], want: &[f64], magnitudes: &[f64]) -> f64 {
    got.iter()
        .zip(want)
        .zip(magnitudes)
        .map(|((g, w), m)| (*g as f64 - w).abs() / m.max(f64::MIN_POSITIVE))
        .fold(0.0, f64::max)
}

fn check(session: &Session, rng: &mut Rng, shape: &[usize], label: &str) {
    // Positive data: sums are well conditioned, and the relative error is held to 1e-5.
    let len: usize = shape.iter().product();
    let positive = rng.vec(len, 0.0, 1.0);
    let tensor = session.upload(&positive, shape).expect("upload");
    for axis in std::iter::once(None).chain((0..shape.len()).map(Some)) {
        for op in [Op::Sum, Op::Mean] {
            let got = apply(&tensor, op, axis).to_vec().expect("read");
            let error = common::relative_error(&got, &reference(&positive, shape, axis, op));
            assert!(
                error < 1e-5,
                "{label}: {op:?} over {axis:?} of positive {shape:?}: relative error {error}"
            );
        }
    }
    // Mixed signs: sums are checked against the magnitudes they add; max, min and argmax exactly as before.
    let data = rng.vec(len, -1.0, 1.0);
    let magnitudes: Vec<f32> = data.iter().map(|x| x.abs()).collect();
    let tensor = session.upload(&data, shape).expect("upload");
    let axes: Vec<Option<usize>> = std::iter::once(None)
        .chain((0..shape.len()).map(Some))
        .collect();
    for &axis in &axes {
        for op in [Op::Sum, Op::Mean, Op::Max, Op::Min] {
            let got = apply(&tensor, op, axis).to_vec().expect("read");
            let want = reference(&data, shape, axis, op);
            let error = match op {
                Op::Sum | Op::Mean => {
                    error_against_magnitudes(&got, &want, &reference(&magnitudes, shape, axis, op))
                }
                Op::Max | Op::Min => common::relative_error(&got, &want),
            };
            assert!(
                error < 1e-6,
                "{label}: {op:?} over {axis:?} of {shape:?}: error {error}"
            );
        }
        let got = tensor
            .argmax(axis)
            .expect("argmax")
            .to_vec_u32()
            .expect("read");
        assert_eq!(
            got,
            argmax_reference(&data, shape, axis),
            "{label}: argmax over {axis:?} of {shape:?}"
        );
    }
}

#[test]
fn awkward_shapes_along_every_axis() {
    for_each_backend(|backend| {
        let session = backend.poisoned();
        let mut rng = Rng::fresh("reduce shapes");
        for shape in [
            &[1][..],
            &[7],
            &[257],
            &[4097],
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
    });
}

#[test]
fn large_inputs_past_the_dispatch_limit() {
    on_vulkan(|backend| {
        let session = backend.poisoned();
        let mut rng = Rng::fresh("reduce large");
        // 2^24 + 1 elements: the count at which a grid of one invocation per 256 elements passes 65,535 groups.
        check(&session, &mut rng, &[16_777_217], "16M vector");
        check(&session, &mut rng, &[4096, 4096], "4096 square");
        // A long axis with a few columns, and many short rows.
        check(&session, &mut rng, &[1_000_003, 3], "long axis");
    });
}

#[test]
fn a_sum_over_more_than_one_binding_is_windowed_and_repeatable() {
    on_vulkan(|backend| {
        let session = backend.poisoned();
        let mut rng = Rng::fresh("reduce windows");
        let len = 48_000_000usize;
        let data = rng.vec(len, 0.0, 1.0);
        let tensor = session.upload(&data, &[len]).expect("upload 192 MB");
        let want: f64 = data.iter().map(|&x| x as f64).sum();
        let first = tensor.sum(None).expect("sum").to_vec().expect("read")[0];
        assert!(
            ((first as f64 - want) / want).abs() < 1e-5,
            "sum {first} vs {want}"
        );
        let again = tensor.sum(None).expect("sum").to_vec().expect("read")[0];
        assert_eq!(
            first.to_bits(),
            again.to_bits(),
            "the same input gives the same bits"
        );
        let want_max = data.iter().copied().fold(f32::MIN, f32::max);
        assert_eq!(
            tensor.max(None).expect("max").to_vec().expect("read")[0],
            want_max
        );
        let want_index = argmax_reference(&data, &[len], None);
        assert_eq!(
            tensor
                .argmax(None)
                .expect("argmax")
                .to_vec_u32()
                .expect("read"),
            want_index
        );
    });
}

#[test]
fn bad_axes_are_shape_errors_and_the_session_goes_on() {
    on_vulkan(|backend| {
        let session = backend.poisoned();
        let tensor = session
            .upload(&[1.0, 2.0, 3.0, 4.0], &[2, 2])
            .expect("upload");
        assert!(matches!(tensor.sum(Some(2)), Err(Error::Shape { .. })));
        let empty = session.zeros(&[3, 0]).expect("empty tensor");
        assert!(matches!(empty.max(Some(1)), Err(Error::Shape { .. })));
        let indices = tensor.argmax(Some(1)).expect("argmax");
        assert!(matches!(indices.sum(None), Err(Error::DType { .. })));
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
    });
}

/// Every variant of the reduction stages forced in turn (the chunk stage's contiguous, strided or subgroup runs,
/// the axis stage's invocation, lanes or subgroup per output; argmax and argmin keep their own kernels): awkward
/// shapes through each kind of stage, and a NaN in one row of max and min. The subgroup variants run where the
/// adapter has subgroup operations (lavapipe's Vulkan adapter does, GL does not) and are skipped, saying so,
/// elsewhere.
#[test]
fn every_reduction_variant_at_awkward_shapes_and_with_nan() {
    let families = wgcompute::kernel_variants();
    for_each_backend(|backend| {
        let mut rng = Rng::fresh("reduce variants");
        let subgroups = wgcompute::list_adapters()
            .iter()
            .any(|adapter| adapter.backend == backend.name && adapter.subgroups);
        for family in ["reduce_chunk", "reduce_axis"] {
            let (_, variants) = families
                .iter()
                .find(|(name, _)| *name == family)
                .expect("the family has variants");
            assert!(variants.len() >= 2, "{family}: {variants:?}");
            for variant in variants.iter() {
                let session = backend.poisoned_with(family, variant);
                let label = format!("{family}/{variant}");
                if variant.starts_with("subgroup") && !subgroups {
                    eprintln!(
                        "{label} skipped on {}: no subgroup operations",
                        backend.name
                    );
                    continue;
                }
                for shape in [
                    &[1][..],
                    &[17],
                    &[4097],
                    &[70_001],
                    &[4096, 16],
                    &[13, 257],
                    &[3, 8_195],
                    &[5, 300, 3],
                ] {
                    check(&session, &mut rng, shape, &label);
                }
                let (rows, cols) = (5, 9_001);
                let mut data = rng.vec(rows * cols, -1.0, 1.0);
                data[2 * cols + 4_321] = f32::NAN;
                let tensor = session.upload(&data, &[rows, cols]).expect("upload");
                for op in [Op::Max, Op::Min] {
                    let got = apply(&tensor, op, Some(1)).to_vec().expect("read");
                    let want = reference(&data, &[rows, cols], Some(1), op);
                    for (row, (&g, &w)) in got.iter().zip(&want).enumerate() {
                        if row == 2 {
                            assert!(g.is_nan(), "{label}: {op:?} of the row with a NaN is {g}");
                        } else {
                            assert_eq!(g as f64, w, "{label}: {op:?} of row {row}");
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
                assert!(
                    report.iter().any(|record| record.pick == *variant),
                    "{label} never ran: {report:?}"
                );
            }
        }
    });
}
