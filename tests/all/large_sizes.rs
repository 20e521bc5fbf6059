//! Kernels at sizes past the drivers' limits: llvmpipe (lavapipe, and Mesa's GL) ends any single shader loop after
//! 65,535 iterations without a word, so every kernel that loops over a data-sized extent is run here with
//! 2^16 + 1 or more along it (scatters over more picks, a put's gradient, running sums and products along a
//! long lane and their gradients) against exact references, outputs poisoned; and the float remainder, exact for
//! every finite pair, against f64's fmod with NumPy's sign rule.

use std::sync::Arc;

use crate::common::{per_backend, weighted_cost, Backend, Rng};

/// One more than the longest loop llvmpipe runs.
const PAST_LOOP_LIMIT: usize = (1 << 16) + 1;

per_backend!(scatters_take_every_pick_past_the_loop_limit);
fn scatters_take_every_pick_past_the_loop_limit(backend: &Backend) {
    let session = backend.poisoned();
    // The case: 100,000 ones added into one entry.
    let picks = 100_000;
    let base = session.zeros(&[2]).expect("zeros");
    let indices = session
        .upload_u32(&vec![0; picks], &[picks])
        .expect("indices");
    let ones = session.full(&[picks], 1.0).expect("ones");
    let added = base.scatter_add(&indices, &ones, 0).expect("scatter_add");
    assert_eq!(added.to_vec().expect("read"), vec![picks as f32, 0.0]);
    // A put keeps the last pick of each index, and the last ones lie past the limit.
    let picks = PAST_LOOP_LIMIT + 5;
    let cycle: Vec<u32> = (0..picks).map(|i| (i % 3) as u32).collect();
    let values: Vec<f32> = (0..picks).map(|i| i as f32).collect();
    let indices = session.upload_u32(&cycle, &[picks]).expect("indices");
    let values_tensor = session.upload(&values, &[picks]).expect("values");
    let base = session.zeros(&[3]).expect("zeros");
    let put = base
        .index_update(&indices, &values_tensor, 0)
        .expect("index_update");
    let last = |index: usize| (0..picks).rev().find(|i| i % 3 == index).expect("a pick") as f32;
    assert_eq!(put.to_vec().expect("read"), vec![last(0), last(1), last(2)]);
    // The put's gradient: only each index's last pick reaches the output; the check looks past the limit.
    let x = Arc::new(session.zeros(&[3]).expect("x"));
    let values = Arc::new(values_tensor);
    let indices = Arc::new(indices);
    let (_, gradients) = weighted_cost(&session, &[x, values], &[1.0, 2.0, 3.0], |vars| {
        vars[0].index_update(&indices, &vars[1], 0)
    })
    .expect("index_update on the tape");
    let want: Vec<f32> = (0..picks)
        .map(|i| {
            if i + 3 >= picks {
                (i % 3 + 1) as f32
            } else {
                0.0
            }
        })
        .collect();
    assert_eq!(gradients[1], want);
    assert_eq!(gradients[0], vec![0.0; 3]);
    // A take's gradient scatters as many picks into a two-row table.
    let table = Arc::new(session.zeros(&[2, 3]).expect("table"));
    let rows: Vec<u32> = (0..PAST_LOOP_LIMIT)
        .map(|i| u32::from(i % 7 == 0))
        .collect();
    let rows = Arc::new(session.upload_u32(&rows, &[PAST_LOOP_LIMIT]).expect("rows"));
    let weights = vec![1.0; PAST_LOOP_LIMIT * 3];
    let (_, gradients) = weighted_cost(&session, &[table], &weights, |vars| vars[0].take(&rows, 0))
        .expect("take on the tape");
    let sevens = PAST_LOOP_LIMIT.div_ceil(7) as f32;
    let others = PAST_LOOP_LIMIT as f32 - sevens;
    assert_eq!(
        gradients[0],
        vec![others, others, others, sevens, sevens, sevens]
    );
}

per_backend!(running_sums_and_products_and_their_gradients_cover_long_lanes);
fn running_sums_and_products_and_their_gradients_cover_long_lanes(backend: &Backend) {
    let session = backend.poisoned();
    // The cases: 100,000 ones along one axis, and shape (2, 70000) along axis 1.
    let ones = session.full(&[100_000], 1.0).expect("ones");
    let sums = ones
        .cumulative_sum(None, false)
        .expect("cumulative_sum")
        .to_vec()
        .expect("read");
    assert_eq!(sums.len(), 100_000);
    for (i, &sum) in sums.iter().enumerate() {
        assert_eq!(sum, (i + 1) as f32, "element {i}");
    }
    let wide = session.full(&[2, 70_000], 1.0).expect("ones");
    let sums = wide
        .cumulative_sum(Some(1), true)
        .expect("cumulative_sum")
        .to_vec()
        .expect("read");
    for (at, &sum) in sums.iter().enumerate() {
        assert_eq!(sum, (at % 70_001) as f32, "element {at}");
    }
    // Products of ±1 keep their exact sign down the whole lane.
    let mut rng = Rng::fresh("long products");
    let signs: Vec<f32> = (0..PAST_LOOP_LIMIT)
        .map(|_| {
            if rng.next_u64().is_multiple_of(2) {
                1.0
            } else {
                -1.0
            }
        })
        .collect();
    let x = session.upload(&signs, &[PAST_LOOP_LIMIT]).expect("signs");
    let products = x
        .cumulative_prod(None, false)
        .expect("cumulative_prod")
        .to_vec()
        .expect("read");
    let mut product = 1.0f32;
    for (i, &sign) in signs.iter().enumerate() {
        product *= sign;
        assert_eq!(products[i], product, "element {i}");
    }
    // The gradients: a running sum's is the count to the lane's end; a running product's, with one zero
    // past the limit, is (zero − j) before it, (len − zero) at it and 0 after (every other element is 1).
    let len = PAST_LOOP_LIMIT + 10;
    let zero = PAST_LOOP_LIMIT - 2;
    let mut data = vec![1.0f32; len];
    data[zero] = 0.0;
    let x = Arc::new(session.upload(&data, &[len]).expect("x"));
    let weights = vec![1.0; len];
    let (_, sum_gradient) = weighted_cost(&session, std::slice::from_ref(&x), &weights, |vars| {
        vars[0].cumulative_sum(None, false)
    })
    .expect("cumulative_sum on the tape");
    let want: Vec<f32> = (0..len).map(|j| (len - j) as f32).collect();
    assert_eq!(sum_gradient[0], want);
    let (_, product_gradient) = weighted_cost(&session, &[x], &weights, |vars| {
        vars[0].cumulative_prod(None, false)
    })
    .expect("cumulative_prod on the tape");
    let want: Vec<f32> = (0..len)
        .map(|j| match j.cmp(&zero) {
            std::cmp::Ordering::Less => (zero - j) as f32,
            std::cmp::Ordering::Equal => (len - zero) as f32,
            std::cmp::Ordering::Greater => 0.0,
        })
        .collect();
    assert_eq!(product_gradient[0], want);
    // The short case: cumulative_prod([2, 0, 3]) has gradient [1, 8, 0].
    let x = Arc::new(session.upload(&[2.0, 0.0, 3.0], &[3]).expect("x"));
    let (_, gradient) = weighted_cost(&session, &[x], &[1.0; 3], |vars| {
        vars[0].cumulative_prod(None, false)
    })
    .expect("cumulative_prod on the tape");
    assert_eq!(gradient[0], vec![1.0, 8.0, 0.0]);
}

/// NumPy's float32 `x % y`: C's fmod (exact, here in f64, which holds every f32 remainder), moved into y's sign
/// by adding y in f32; a zero of y's sign for a zero remainder.
fn numpy_remainder(x: f32, y: f32) -> f32 {
    let r = (f64::from(x) % f64::from(y)) as f32;
    if r.is_nan() {
        return r;
    }
    if r == 0.0 {
        return 0.0f32.copysign(y);
    }
    if (r < 0.0) != (y < 0.0) {
        r + y
    } else {
        r
    }
}

per_backend!(float_remainder_is_exact_for_every_finite_pair);
fn float_remainder_is_exact_for_every_finite_pair(backend: &Backend) {
    let session = backend.poisoned();
    let mut rng = Rng::fresh("remainder");
    // The pairs, the infinities, zeros and subnormals, then random magnitudes from 1e-38 to 1e38.
    let mut pairs: Vec<(f32, f32)> = vec![
        (1e10, 3.0),
        (-1e10, 3.0),
        (1e30, 7.0),
        (1e20, 1e-20),
        (-1e-30, 3.0),
        (-1.0, f32::INFINITY),
        (1.0, f32::NEG_INFINITY),
        (1.0, f32::INFINITY),
        (f32::INFINITY, 3.0),
        (5.0, 0.0),
        (0.0, -3.0),
        (-0.0, 3.0),
        (7.0, -2.0),
        (3e38, 1e-45),
        (f32::MAX, f32::MIN_POSITIVE),
        (1e-40, 3e-41),
        (-1e-40, 3e-41),
        (f32::MAX, -3.0),
    ];
    for _ in 0..4000 {
        let magnitude = |rng: &mut Rng| {
            let exponent = rng.uniform(-38.0, 38.0);
            let sign = if rng.next_u64().is_multiple_of(2) {
                1.0
            } else {
                -1.0
            };
            sign * rng.uniform(1.0, 10.0) * 10f32.powf(exponent)
        };
        pairs.push((magnitude(&mut rng), magnitude(&mut rng)));
    }
    let (xs, ys): (Vec<f32>, Vec<f32>) = pairs.iter().copied().unzip();
    let n = xs.len();
    let x = session.upload(&xs, &[n]).expect("x");
    let y = session.upload(&ys, &[n]).expect("y");
    let got = x.remainder(&y).expect("remainder").to_vec().expect("read");
    for (k, (&(a, b), &r)) in pairs.iter().zip(&got).enumerate() {
        let want = numpy_remainder(a, b);
        let same = (want.is_nan() && r.is_nan()) || want.to_bits() == r.to_bits();
        assert!(
            same,
            "pair {k}: {a:e} % {b:e} gave {r:e}, NumPy gives {want:e}"
        );
        if b.is_finite() && a.is_finite() && b != 0.0 {
            // Within [0, y) or (y, 0], but where adding y rounds to y itself, as in NumPy.
            assert!(
                r.abs() <= b.abs() && (r == 0.0 || (r < 0.0) == (b < 0.0)),
                "pair {k}"
            );
        }
    }
    // The scalar forms use the same rule.
    let scalar = x
        .remainder_scalar(3.0)
        .expect("remainder_scalar")
        .to_vec()
        .expect("read");
    for (k, (&a, &r)) in xs.iter().zip(&scalar).enumerate() {
        let want = numpy_remainder(a, 3.0);
        assert!(
            want.to_bits() == r.to_bits() || (want.is_nan() && r.is_nan()),
            "{k}: {a:e} % 3"
        );
    }
}

per_backend!(softmax_rows_as_long_as_allowed_are_whole);
fn softmax_rows_as_long_as_allowed_are_whole(backend: &Backend) {
    let session = backend.poisoned();
    let mut rng = Rng::fresh("long softmax rows");
    // A row past the loop limit, and the longest row allowed (MAX_COLS in src/op/softmax.rs): one workgroup a
    // row, each thread's loops in one invocation's budget, the accuracy count's included.
    for cols in [PAST_LOOP_LIMIT, 256 * 16_000] {
        let data = rng.vec(cols, -8.0, 8.0);
        let logits = session.upload(&data, &[1, cols]).expect("logits");
        let got = logits.softmax().expect("softmax").to_vec().expect("read");
        let top = data.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let total: f64 = data.iter().map(|&x| f64::from(x - top).exp()).sum();
        let worst = got
            .iter()
            .zip(&data)
            .map(|(&g, &x)| {
                let want = f64::from(x - top).exp() / total;
                (f64::from(g) - want).abs() / want
            })
            .fold(0.0, f64::max);
        assert!(worst < 1e-4, "{cols}: softmax off by {worst:e} relative");
        // The labels' argmax is the logits' own: the count finds the one row.
        let labels = logits.softmax().expect("labels");
        let correct = session.upload_u32(&[0], &[1]).expect("count");
        let (loss, _) = logits
            .softmax_cross_entropy_counting(&labels, &correct)
            .expect("counting cross-entropy");
        assert!(loss.to_vec().expect("loss")[0].is_finite(), "{cols}");
        assert_eq!(correct.item_u32().expect("count"), 1, "{cols}");
    }
    let too_long = session.zeros(&[1, 256 * 16_000 + 1]).expect("zeros");
    assert!(matches!(
        too_long.softmax(),
        Err(wgcompute::Error::Shape { .. })
    ));
}

/// The gradient of Σ w·avg_pool2d(x) for a one-channel image of h × w, a window of kh × kw, stride 1, valid
/// padding: each pixel gets w / (kh·kw) of every window holding it.
fn average_pool_gradient(
    (h, w): (usize, usize),
    (kh, kw): (usize, usize),
    weights: &[f32],
) -> Vec<f64> {
    let (out_h, out_w) = (h - kh + 1, w - kw + 1);
    let area = (kh * kw) as f64;
    let mut gradient = vec![0.0; h * w];
    for oy in 0..out_h {
        for ox in 0..out_w {
            let share = f64::from(weights[oy * out_w + ox]) / area;
            for y in oy..oy + kh {
                for x in ox..ox + kw {
                    gradient[y * w + x] += share;
                }
            }
        }
    }
    gradient
}

per_backend!(window_gradients_take_every_tap_of_large_windows, "window": runs, elements);
fn window_gradients_take_every_tap_of_large_windows(backend: &Backend, variant: &str) {
    let session = backend.poisoned_with("window", variant);
    let mut rng = Rng::fresh("large windows");
    // A 37 × 37 window at stride 1, whose every tap lands on the middle pixels (a run of 16 of them loops
    // over more than 65,535 taps in all), and a window wider than a pass.
    for ((h, w), (kh, kw)) in [
        ((80, 80), (37, 37)),
        ((1, PAST_LOOP_LIMIT + 4), (1, PAST_LOOP_LIMIT)),
    ] {
        let image = Arc::new(
            session
                .upload(&rng.vec(h * w, -1.0, 1.0), &[1, h, w, 1])
                .expect("x"),
        );
        let outputs = (h - kh + 1) * (w - kw + 1);
        let weights = rng.vec(outputs, -1.0, 1.0);
        let (_, gradients) = weighted_cost(&session, &[image], &weights, |vars| {
            vars[0].avg_pool2d([kh, kw], [1, 1], wgcompute::Padding::Valid)
        })
        .expect("avg_pool2d on the tape");
        let want = average_pool_gradient((h, w), (kh, kw), &weights);
        let error = crate::common::relative_error(&gradients[0], &want);
        assert!(
            error < 1e-5,
            "{variant}: {kh}×{kw} window: relative error {error:e}"
        );
    }
}

per_backend!(a_long_running_sum_stays_within_a_rounding_or_two);
fn a_long_running_sum_stays_within_a_rounding_or_two(backend: &Backend) {
    let session = backend.poisoned();
    let mut rng = Rng::fresh("compensated scan");
    // Values whose plain f32 running sum drifts by about 1e-5 over 2^16 + 1 of them; the compensated one
    // stays within a few roundings of the exact sum at every element.
    let data: Vec<f32> = (0..PAST_LOOP_LIMIT)
        .map(|_| rng.uniform(0.5, 1.5))
        .collect();
    let x = session.upload(&data, &[PAST_LOOP_LIMIT]).expect("x");
    let got = x
        .cumulative_sum(None, false)
        .expect("cumulative_sum")
        .to_vec()
        .expect("read");
    let mut exact = 0.0f64;
    for (i, (&value, &sum)) in data.iter().zip(&got).enumerate() {
        exact += f64::from(value);
        let error = (f64::from(sum) - exact).abs() / exact;
        assert!(
            error < 2.0 * f64::from(f32::EPSILON),
            "element {i}: {sum} against {exact}"
        );
    }
}
