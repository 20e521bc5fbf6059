//! The Array API's creation functions computed on the device (arange, linspace, eye) and the triangles (tril,
//! triu) against f64 references: lengths by the standard's rule, values to a rounding, diagonals on both sides
//! and past the matrix, stacks of matrices, empty shapes; tril and triu on the tape; bad arguments refused.

use crate::common::{per_backend, vulkan_only, widen, Backend, Rng};
use crate::ops_manipulate::{check_gradient, data, unravel};
use wgcompute::{Error, Tensor};

fn close(label: &str, got: &Tensor, want: &[f64]) {
    close_to_scale(label, got, want, 0.0);
}

/// As `close`, the roundings measured against `scale` where that is larger than the value: start + i·step
/// rounds on the scale of its terms, and cancels to a smaller value (5 - 14·0.3), as NumPy's float32 arange does.
fn close_to_scale(label: &str, got: &Tensor, want: &[f64], scale: f64) {
    let got = got.to_vec().expect("read");
    assert_eq!(got.len(), want.len(), "{label}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        // One f32 rounding of the exact value, and one of the step it was made from.
        let tolerance = 2.0 * f64::from(f32::EPSILON) * w.abs().max(scale).max(1e-30);
        assert!(
            (f64::from(g) - w).abs() <= tolerance,
            "{label}: element {i} is {g}, want {w}"
        );
    }
}

per_backend!(ramps_and_identities_match_numpy);
fn ramps_and_identities_match_numpy(backend: &Backend) {
    let session = backend.poisoned();
    for (start, stop, step) in [
        (0.0, 10.0, 1.0),
        (1.0, 2.0, 0.1),
        (-3.5, 7.25, 0.75),
        (5.0, -5.0, -0.3),
        (0.0, 1.0, -1.0),
        (2.0, 2.0, 1.0),
        (0.0, 70_001.0, 1.0),
        (1e4, 1e4 + 3.0, 1e-3),
    ] {
        let len = f64::ceil((stop - start) / step).max(0.0) as usize;
        let want: Vec<f64> = (0..len).map(|i| start + i as f64 * step).collect();
        let got = session.arange(start, stop, step).expect("arange");
        assert_eq!(got.shape(), &[len], "arange({start}, {stop}, {step})");
        let scale = want
            .iter()
            .fold(f64::abs(start), |scale, w| scale.max(w.abs()));
        close_to_scale(
            &format!("arange({start}, {stop}, {step})"),
            &got,
            &want,
            scale,
        );
    }
    for (start, stop, num, endpoint) in [
        (0.0, 1.0, 5, true),
        (0.0, 1.0, 5, false),
        (-2.0, 3.0, 1, true),
        (-2.0, 3.0, 0, true),
        (1.0, -1.0, 257, true),
        (0.0, 1e3, 100_003, false),
    ] {
        let parts = if endpoint { num.max(1) - 1 } else { num };
        let step = if parts == 0 {
            0.0
        } else {
            (stop - start) / parts as f64
        };
        let mut want: Vec<f64> = (0..num).map(|i| start + i as f64 * step).collect();
        if endpoint && num > 1 {
            want[num - 1] = stop;
        }
        let got = session
            .linspace(start, stop, num, endpoint)
            .expect("linspace");
        close(
            &format!("linspace({start}, {stop}, {num}, {endpoint})"),
            &got,
            &want,
        );
        if endpoint && num > 1 {
            assert_eq!(
                got.to_vec().expect("read")[num - 1],
                stop as f32,
                "the endpoint exactly"
            );
        }
    }
    for (rows, cols, k) in [
        (1, 1, 0),
        (3, 3, 0),
        (3, 5, 1),
        (5, 3, -2),
        (4, 4, 9),
        (4, 4, -9),
        (0, 3, 0),
        (257, 13, 3),
    ] {
        let want: Vec<f64> = (0..rows * cols)
            .map(|i| f64::from(u8::from((i % cols) as i64 - (i / cols) as i64 == k)))
            .collect();
        let got = session.eye(rows, Some(cols), k).expect("eye");
        assert_eq!(got.shape(), &[rows, cols]);
        close(&format!("eye({rows}, {cols}, {k})"), &got, &want);
    }
    assert_eq!(session.eye(3, None, 0).expect("eye").shape(), &[3, 3]);
}

per_backend!(triangles_keep_their_side_of_the_diagonal);
fn triangles_keep_their_side_of_the_diagonal(backend: &Backend) {
    let session = backend.poisoned();
    let mut rng = Rng::fresh("triangles");
    for shape in [
        &[1, 1][..],
        &[3, 5],
        &[5, 3],
        &[2, 3, 7, 4],
        &[0, 4],
        &[257, 3],
    ] {
        let mut host = data(&mut rng, shape);
        if let Some(first) = host.first_mut() {
            // An infinity outside the triangle is zeroed, not NaN.
            *first = f32::INFINITY;
        }
        let x = session.upload(&host, shape).expect("upload");
        let wide = widen(&host);
        let rank = shape.len();
        for k in [-9, -2, -1, 0, 1, 3, 9] {
            for lower in [true, false] {
                let want: Vec<f64> = wide
                    .iter()
                    .enumerate()
                    .map(|(i, &v)| {
                        let index = unravel(i, shape);
                        let d = index[rank - 1] as i64 - index[rank - 2] as i64;
                        let keep = if lower { d <= k } else { d >= k };
                        if keep {
                            v
                        } else {
                            0.0
                        }
                    })
                    .collect();
                let got = if lower { x.tril(k) } else { x.triu(k) }.expect("triangle");
                let got = got.to_vec().expect("read");
                let got: Vec<f64> = widen(&got);
                assert_eq!(got, want, "{shape:?} k={k} lower={lower}");
            }
        }
    }
    for lower in [true, false] {
        let input = vec![(vec![2, 4, 3], data(&mut rng, &[2, 4, 3]))];
        check_gradient(
            &session,
            &mut rng,
            if lower { "tril" } else { "triu" },
            &input,
            |v| {
                if lower {
                    v[0].tril(1)
                } else {
                    v[0].triu(-1)
                }
            },
            &|x| {
                x[0].iter()
                    .enumerate()
                    .map(|(i, &v)| {
                        let d = (i % 3) as i64 - ((i / 3) % 4) as i64;
                        let keep = if lower { d <= 1 } else { d >= -1 };
                        if keep {
                            v
                        } else {
                            0.0
                        }
                    })
                    .collect()
            },
            1e-6,
        );
    }
}

vulkan_only!(bad_creation_arguments_are_errors);
fn bad_creation_arguments_are_errors(backend: &Backend) {
    let session = backend.poisoned();
    assert!(matches!(
        session.arange(0.0, 1.0, 0.0),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(matches!(
        session.arange(0.0, f64::INFINITY, 1.0),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(matches!(
        session.arange(0.0, 1e12, 1.0),
        Err(Error::Shape { .. })
    ));
    assert!(matches!(
        session.linspace(f64::NAN, 1.0, 3, true),
        Err(Error::InvalidArgument { .. })
    ));
    let vector = session.upload(&[1.0, 2.0], &[2]).expect("vector");
    assert!(
        matches!(vector.tril(0), Err(Error::Shape { .. })),
        "a vector has no triangle"
    );
    // The session still works.
    assert_eq!(
        session
            .arange(0.0, 3.0, 1.0)
            .expect("arange")
            .to_vec()
            .expect("read"),
        vec![0.0, 1.0, 2.0]
    );
}
