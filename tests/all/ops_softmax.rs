//! The softmax family against a CPU reference computed in f64: softmax and log-softmax along the last axis at
//! awkward shapes (a single element, rows just past one workgroup of 256 threads, many short rows, and 65,537
//! rows, one workgroup each, which needs the 2-D grid), rows of extreme values (±80, ±1e30, all-equal huge),
//! and TensorFlow's softmax cross-entropy with its exact gradient on normalised, unnormalised and one-hot labels,
//! checked against the analytic gradient and a central finite difference of the f64 loss. Every session
//! poisons its outputs with NaN, so an element a kernel fails to write fails the comparison. Also: the shape,
//! dtype and session errors, and that the session still works after them.

use crate::common::{self, count, per_backend, reference, vulkan_only, widen, Backend, Rng};
use wgcompute::{Error, Session, Tensor};

fn cols_of(shape: &[usize]) -> usize {
    *shape.last().expect("rank at least 1")
}

// --- the f64 reference (`common::reference`, shifted by the row maximum) and the scales of its errors ---

fn softmax_reference(data: &[f32], cols: usize) -> Vec<f64> {
    reference::by_rows(data, cols, reference::softmax)
}

fn log_softmax_reference(data: &[f32], cols: usize) -> Vec<f64> {
    reference::by_rows(data, cols, reference::log_softmax)
}

/// The scale of each row's f32 rounding error in the loss: sum_j |y_j| * ((max - x_j) + logsumexp shift + 1).
/// The kernel forms the loss as sum(y)·log(total) - sum(y·(x - max)), and log(total) carries an absolute error
/// of about one f32 epsilon even where the loss itself is tiny (a label on a row's clear winner).
fn loss_magnitude(logits: &[f32], labels: &[f32], cols: usize) -> Vec<f64> {
    logits
        .chunks(cols)
        .zip(labels.chunks(cols))
        .map(|(x, y)| {
            let (x, y) = (widen(x), widen(y));
            let m = reference::row_max(&x);
            let log_total = reference::log_sum_shifted(&x);
            x.iter()
                .zip(&y)
                .map(|(&x, &y)| y.abs() * ((m - x) + log_total + 1.0))
                .sum()
        })
        .collect()
}

/// The analytic gradient of the summed loss, softmax(x) * sum(y) - y, per row, with each element's magnitude
/// |softmax(x) * sum(y)| + |y|: the two terms cancel where a label is close to its share of the row's total, and
/// f32 rounding is proportional to the terms, not to their difference.
fn gradient_reference(logits: &[f32], labels: &[f32], cols: usize) -> (Vec<f64>, Vec<f64>) {
    let mut gradient = Vec::with_capacity(logits.len());
    let mut magnitude = Vec::with_capacity(logits.len());
    for (x, y) in logits.chunks(cols).zip(labels.chunks(cols)) {
        let (x, y) = (widen(x), widen(y));
        gradient.extend(reference::cross_entropy_gradient(&x, &y));
        let label_total: f64 = y.iter().sum();
        for (&p, &y) in reference::softmax(&x).iter().zip(&y) {
            magnitude.push((p * label_total).abs() + y.abs());
        }
    }
    (gradient, magnitude)
}

fn assert_finite(got: &[f32], what: &str) {
    if let Some(index) = got.iter().position(|x| !x.is_finite()) {
        panic!(
            "{what}: element {index} is {} (of {} elements)",
            got[index],
            got.len()
        );
    }
}

fn read(tensor: &Tensor, what: &str) -> Vec<f32> {
    tensor
        .to_vec()
        .unwrap_or_else(|error| panic!("{what}: reading back: {error}"))
}

// --- 1. softmax and log-softmax at awkward shapes ---

const SHAPES: &[&[usize]] = &[
    &[1],
    &[7],
    &[1, 1],
    &[3, 257],
    &[10, 1000],
    &[2, 3, 5, 7],
    &[4, 1025],
    &[1000, 3],
    &[300, 1],
];

/// The output of `op` (softmax or log_softmax) of a `shape` input, checked: its shape, finite, and within
/// 1e-5 relative Frobenius error of `want`.
fn check_row_op(
    label: &str,
    op: &str,
    shape: &[usize],
    result: wgcompute::Result<Tensor>,
    want: &[f64],
) -> Vec<f32> {
    let out = result.unwrap_or_else(|error| panic!("{label}: {op} of {shape:?}: {error}"));
    assert_eq!(out.shape(), shape, "{label}: {op} shape");
    let got = read(&out, label);
    assert_finite(&got, &format!("{label}: {op} of {shape:?}"));
    let error = common::relative_error(&got, want);
    assert!(
        error < 1e-5,
        "{label}: {op} of {shape:?}: relative error {error}"
    );
    got
}

/// Softmax and log-softmax of `data` checked against the reference, element by element where the values are
/// extreme (`elementwise`), and by relative Frobenius error (per row) otherwise; softmax rows sum to 1.
fn check_softmax(session: &Session, data: &[f32], shape: &[usize], elementwise: bool, label: &str) {
    let cols = cols_of(shape);
    let input = session.upload(data, shape).expect("upload");

    let want = softmax_reference(data, cols);
    let got = check_row_op(label, "softmax", shape, input.softmax(), &want);
    for (row, values) in got.chunks(cols).enumerate() {
        let total: f64 = values.iter().map(|&p| p as f64).sum();
        assert!(
            (total - 1.0).abs() < 1e-5,
            "{label}: softmax of {shape:?}: row {row} sums to {total}"
        );
        assert!(
            values.iter().all(|&p| (0.0..=1.0).contains(&p)),
            "{label}: softmax of {shape:?}: row {row} has a value outside [0, 1]"
        );
    }

    let want_log = log_softmax_reference(data, cols);
    let got_log = check_row_op(label, "log_softmax", shape, input.log_softmax(), &want_log);
    assert!(
        got_log.iter().all(|&v| v <= 0.0),
        "{label}: log_softmax of {shape:?} has a positive value"
    );

    if elementwise {
        for (index, ((&g, &w), (&gl, &wl))) in got
            .iter()
            .zip(&want)
            .zip(got_log.iter().zip(&want_log))
            .enumerate()
        {
            assert!(
                (g as f64 - w).abs() <= 1e-5 * w.abs().max(1e-3),
                "{label}: softmax of {shape:?}: element {index} (row {}) is {g}, want {w}; input {}",
                index / cols,
                data[index]
            );
            assert!(
                (gl as f64 - wl).abs() <= 1e-5 * wl.abs().max(1.0),
                "{label}: log_softmax of {shape:?}: element {index} (row {}) is {gl}, want {wl}; input {}",
                index / cols,
                data[index]
            );
        }
    }
}

per_backend!(softmax_and_log_softmax_match_the_f64_reference_at_awkward_shapes, "softmax": workgroup_per_row, rows_per_workgroup, row_per_invocation);
fn softmax_and_log_softmax_match_the_f64_reference_at_awkward_shapes(
    backend: &Backend,
    variant: &str,
) {
    let mut rng = Rng::fresh("softmax shapes");
    let session = &backend.poisoned_with("softmax", variant);
    let label = &format!("{variant}: awkward shapes");
    for &shape in SHAPES {
        let data = rng.vec(count(shape), -6.0, 6.0);
        check_softmax(session, &data, shape, false, label);
    }
    // Wider inputs, where exp spreads over many orders of magnitude.
    let data = rng.vec(count(&[5, 333]), -30.0, 30.0);
    check_softmax(session, &data, &[5, 333], false, label);
}

// --- 2. stability on extreme rows ---

/// Rows of `cols` extreme values, one kind per row, in a fixed order: the row index names the kind in a failure.
fn extreme_rows(rng: &mut Rng, cols: usize) -> Vec<f32> {
    let mut data = Vec::new();
    // 0: values in [-80, 80], where a naive exp overflows.
    data.extend(rng.vec(cols, -80.0, 80.0));
    // 1: ±1e30 mixed, at random; at least one of each sign.
    let signs: Vec<bool> = (0..cols)
        .map(|c| c == 0 || (c != 1 && rng.next_u64() & 1 == 1))
        .collect();
    data.extend(signs.iter().map(|&plus| if plus { 1e30 } else { -1e30 }));
    // 2: ±1e30 scaled, so one value wins: the rest underflow to 0 and the winner is 1.
    data.extend((0..cols).map(|_| {
        let scale = rng.uniform(0.5, 1.5);
        if rng.next_u64() & 1 == 1 {
            1e30 * scale
        } else {
            -1e30 * scale
        }
    }));
    // 3: all equal and huge, positive; 4: all equal and huge, negative; 5: all equal to 1e30.
    data.extend(std::iter::repeat_n(3e38f32, cols));
    data.extend(std::iter::repeat_n(-3e38f32, cols));
    data.extend(std::iter::repeat_n(1e30f32, cols));
    // 6: huge and near the top of f32, spread by at most 2e38 so differences stay finite.
    data.extend(rng.vec(cols, 1e38, 3e38));
    // 7: values in [-80, 80] offset by 1e4, where the offset dominates the f32 precision but not the spread.
    data.extend(rng.vec(cols, -80.0, 80.0).iter().map(|v| v + 1e4));
    data
}

const EXTREME_ROWS: usize = 8;

per_backend!(extreme_rows_stay_finite_and_correct, "softmax": workgroup_per_row, rows_per_workgroup, row_per_invocation);
fn extreme_rows_stay_finite_and_correct(backend: &Backend, variant: &str) {
    let mut rng = Rng::fresh("softmax extremes");
    let session = &backend.poisoned_with("softmax", variant);
    for cols in [1usize, 2, 5, 256, 300, 1031] {
        let data = extreme_rows(&mut rng, cols);
        let label = format!("{variant}: {cols} columns");
        check_softmax(session, &data, &[EXTREME_ROWS, cols], true, &label);
        // Each row on its own as well, so that one row's error is not hidden in another's norm.
        for (row, values) in data.chunks(cols).enumerate() {
            check_softmax(
                session,
                values,
                &[cols],
                true,
                &format!("{label}, row {row}"),
            );
        }
        // Cross-entropy on the same rows, with uniform [0, 1) labels; row 6 gets zero labels, since its true
        // loss, sum_j y_j (max - x_j) with gaps of up to 2e38, is past f32's range. Its loss and gradient are 0.
        let mut labels = rng.vec(data.len(), 0.0, 1.0);
        labels[6 * cols..7 * cols].fill(0.0);
        let logits = session
            .upload(&data, &[EXTREME_ROWS, cols])
            .expect("upload");
        let labels_tensor = session
            .upload(&labels, &[EXTREME_ROWS, cols])
            .expect("upload");
        let (loss, gradient) = logits
            .softmax_cross_entropy_with_logits(&labels_tensor)
            .unwrap_or_else(|error| panic!("{label}: cross-entropy: {error}"));
        let got_loss = read(&loss, &label);
        let got_gradient = read(&gradient, &label);
        assert_finite(&got_loss, &format!("{label}: loss"));
        assert_finite(&got_gradient, &format!("{label}: gradient"));
        let want_loss = reference::cross_entropy_rows(&data, &labels, cols);
        let loss_scale = loss_magnitude(&data, &labels, cols);
        let (want_gradient, magnitude) = gradient_reference(&data, &labels, cols);
        for row in 0..EXTREME_ROWS {
            let (g, w) = (got_loss[row] as f64, want_loss[row]);
            assert!(
                (g - w).abs() <= 1e-5 * loss_scale[row].max(1e-3),
                "{label}: loss of extreme row {row} is {g}, want {w}"
            );
            let span = row * cols..(row + 1) * cols;
            let error = common::error_against_magnitude(
                &got_gradient[span.clone()],
                &want_gradient[span.clone()],
                &magnitude[span],
            );
            assert!(
                error < 1e-5,
                "{label}: gradient of extreme row {row}: relative error {error}"
            );
        }
    }
}

// --- 3. softmax cross-entropy with its exact gradient ---

#[derive(Clone, Copy, Debug)]
enum Labels {
    /// Uniform [0, 1), each row divided by its sum.
    Normalised,
    /// Uniform [0, 1), like the seed workload: rows do not sum to 1.
    Unnormalised,
    /// One 1 per row at a random column.
    OneHot,
}

fn make_labels(rng: &mut Rng, kind: Labels, shape: &[usize]) -> Vec<f32> {
    let cols = cols_of(shape);
    let len = count(shape);
    match kind {
        Labels::Unnormalised => rng.vec(len, 0.0, 1.0),
        Labels::Normalised => {
            let mut labels = rng.vec(len, 0.0, 1.0);
            for row in labels.chunks_mut(cols) {
                // Keep every row's sum away from 0 so that the division is tame.
                row[0] += 0.25;
                let total: f32 = row.iter().sum();
                row.iter_mut().for_each(|v| *v /= total);
            }
            labels
        }
        Labels::OneHot => {
            let mut labels = vec![0.0; len];
            for row in labels.chunks_mut(cols) {
                row[(rng.next_u64() % cols as u64) as usize] = 1.0;
            }
            labels
        }
    }
}

fn check_cross_entropy(
    session: &Session,
    rng: &mut Rng,
    shape: &[usize],
    kind: Labels,
    label: &str,
) {
    let label = format!("{label}, {kind:?} labels, shape {shape:?}");
    let cols = cols_of(shape);
    let logits_data = rng.vec(count(shape), -5.0, 5.0);
    let labels_data = make_labels(rng, kind, shape);
    let logits = session.upload(&logits_data, shape).expect("upload");
    let labels = session.upload(&labels_data, shape).expect("upload");
    let (loss, gradient) = logits
        .softmax_cross_entropy_with_logits(&labels)
        .unwrap_or_else(|error| panic!("{label}: {error}"));
    assert_eq!(
        loss.shape(),
        &shape[..shape.len() - 1],
        "{label}: loss shape"
    );
    assert_eq!(gradient.shape(), shape, "{label}: gradient shape");
    let got_loss = read(&loss, &label);
    let got_gradient = read(&gradient, &label);
    assert_finite(&got_loss, &format!("{label}: loss"));
    assert_finite(&got_gradient, &format!("{label}: gradient"));

    let want_loss = reference::cross_entropy_rows(&logits_data, &labels_data, cols);
    let loss_scale = loss_magnitude(&logits_data, &labels_data, cols);
    let error = common::error_against_magnitude(&got_loss, &want_loss, &loss_scale);
    assert!(error < 1e-5, "{label}: loss: relative error {error}");

    // (a) the analytic gradient, softmax * sum(labels) - labels.
    let (want_gradient, magnitude) = gradient_reference(&logits_data, &labels_data, cols);
    let error = common::error_against_magnitude(&got_gradient, &want_gradient, &magnitude);
    assert!(error < 1e-5, "{label}: gradient: relative error {error}");

    // (b) a central difference of the f64 loss at sampled positions: the gradient is the true one.
    let rows = count(shape) / cols;
    let positions = 12.min(count(shape));
    for sample in 0..positions {
        let index = if sample == 0 {
            0
        } else if sample == 1 {
            count(shape) - 1
        } else {
            (rng.next_u64() % count(shape) as u64) as usize
        };
        let (row, col) = (index / cols, index % cols);
        assert!(row < rows);
        let x = widen(&logits_data[row * cols..(row + 1) * cols]);
        let y = widen(&labels_data[row * cols..(row + 1) * cols]);
        let loss_at = |value: f64| {
            let mut x = x.clone();
            x[col] = value;
            reference::cross_entropy(&x, &y)
        };
        let difference = reference::central_difference(loss_at, x[col], 1e-4);
        // The reference agrees with its own finite difference (a check of the test itself) ...
        assert!(
            (difference - want_gradient[index]).abs() <= 1e-6 * (1.0 + difference.abs()),
            "{label}: reference gradient {} vs central difference {difference} at ({row}, {col})",
            want_gradient[index]
        );
        // ... and so does the GPU's gradient.
        let got = got_gradient[index] as f64;
        assert!(
            (got - difference).abs() <= 1e-5 * (1.0 + difference.abs()),
            "{label}: gradient {got} vs central difference {difference} at ({row}, {col})"
        );
    }

    // With labels that sum to 1 per row, the gradient is TensorFlow's softmax - labels.
    if matches!(kind, Labels::Normalised | Labels::OneHot) {
        let probabilities = softmax_reference(&logits_data, cols);
        let want: Vec<f64> = probabilities
            .iter()
            .zip(&labels_data)
            .map(|(&p, &y)| p - y as f64)
            .collect();
        // p - y cancels where a label is close to its probability (a one-hot row's clear winner).
        let terms: Vec<f64> = probabilities
            .iter()
            .zip(&labels_data)
            .map(|(&p, &y)| p.abs() + (y as f64).abs())
            .collect();
        let error = common::error_against_magnitude(&got_gradient, &want, &terms);
        assert!(
            error < 1e-5,
            "{label}: gradient vs softmax - labels: relative error {error}"
        );
        let softmax = read(&logits.softmax().expect("softmax"), &label);
        let from_gpu: Vec<f64> = softmax
            .iter()
            .zip(&labels_data)
            .map(|(&p, &y)| p as f64 - y as f64)
            .collect();
        let error = common::error_against_magnitude(&got_gradient, &from_gpu, &terms);
        assert!(
            error < 1e-5,
            "{label}: gradient vs the GPU's softmax - labels: relative error {error}"
        );
    } else {
        // Unnormalised labels: the gradient is not softmax - labels (that would be the wrong gradient here),
        // unless every row happens to sum to 1.
        let probabilities = softmax_reference(&logits_data, cols);
        let far_from_one = labels_data
            .chunks(cols)
            .any(|row| (row.iter().map(|&v| v as f64).sum::<f64>() - 1.0).abs() > 0.1);
        if far_from_one {
            let naive: Vec<f64> = probabilities
                .iter()
                .zip(&labels_data)
                .map(|(&p, &y)| p - y as f64)
                .collect();
            let error = common::relative_error(&got_gradient, &naive);
            assert!(
                error > 1e-3,
                "{label}: the gradient is softmax - labels on unnormalised labels (relative difference {error})"
            );
        }
    }
}

per_backend!(cross_entropy_loss_and_gradient_match_the_reference, "softmax": workgroup_per_row, rows_per_workgroup, row_per_invocation);
fn cross_entropy_loss_and_gradient_match_the_reference(backend: &Backend, variant: &str) {
    let mut rng = Rng::fresh("softmax cross-entropy");
    let session = &backend.poisoned_with("softmax", variant);
    let label = &format!("{variant}: cross-entropy");
    for shape in [
        &[10, 1000][..],
        &[1, 1],
        &[7, 3],
        &[3, 4099],
        &[5],
        &[17, 4],
        &[2, 3, 257],
        &[2, 2, 3, 5],
    ] {
        for kind in [Labels::Normalised, Labels::Unnormalised, Labels::OneHot] {
            check_cross_entropy(session, &mut rng, shape, kind, label);
        }
    }
}

vulkan_only!(
    many_rows_use_the_two_dimensional_grid,
    "softmax": workgroup_per_row, rows_per_workgroup, row_per_invocation
);
/// One workgroup per row: 65,537 rows pass the 65,535 workgroups one grid dimension allows, so the kernels must
/// use the 2-D grid (the other variants: many workgroups, and a last one only partly used). Vulkan only: on
/// llvmpipe's GL this alone takes most of a minute.
fn many_rows_use_the_two_dimensional_grid(backend: &Backend, variant: &str) {
    let mut rng = Rng::fresh("softmax many rows");
    let session = &backend.poisoned_with("softmax", variant);
    let label = &format!("{variant}: 65,537 rows");
    let shape = [65_537, 2];
    let data = rng.vec(count(&shape), -6.0, 6.0);
    check_softmax(session, &data, &shape, false, label);
    check_cross_entropy(session, &mut rng, &[65_537, 3], Labels::Unnormalised, label);
}

per_backend!(cross_entropy_of_a_single_column_is_zero, "softmax": workgroup_per_row, rows_per_workgroup, row_per_invocation);
fn cross_entropy_of_a_single_column_is_zero(backend: &Backend, variant: &str) {
    // One class: softmax is 1, so the loss is y * 0 and the gradient 1 * y - y, both exactly 0.
    let mut rng = Rng::fresh("softmax one column");
    let session = &backend.poisoned_with("softmax", variant);
    let logits_data = rng.vec(9, -50.0, 50.0);
    let labels_data = rng.vec(9, 0.0, 3.0);
    let logits = session.upload(&logits_data, &[9, 1]).expect("upload");
    let labels = session.upload(&labels_data, &[9, 1]).expect("upload");
    let (loss, gradient) = logits
        .softmax_cross_entropy_with_logits(&labels)
        .expect("cross-entropy");
    assert_eq!(read(&loss, "loss"), vec![0.0; 9], "{variant}: loss");
    assert_eq!(
        read(&gradient, "gradient"),
        vec![0.0; 9],
        "{variant}: gradient"
    );
}

// --- 3b. the counting cross-entropy: accuracy inside the pass ---

/// Argmax as `Tensor::argmax` defines it: the first NaN if any, else the first of the largest.
fn host_argmax(row: &[f32]) -> usize {
    if let Some(first_nan) = row.iter().position(|x| x.is_nan()) {
        return first_nan;
    }
    let mut best = 0;
    for (index, &x) in row.iter().enumerate() {
        if x > row[best] {
            best = index;
        }
    }
    best
}

/// Rows built for argmax's edge cases: small integers (ties everywhere), rows all equal, rows holding a NaN or
/// two, rows of -inf, ±0; labels one-hot, soft with ties, or put on the logits' own argmax (so that both
/// answers occur).
fn tie_heavy_rows(rng: &mut Rng, rows: usize, cols: usize) -> (Vec<f32>, Vec<f32>) {
    let mut logits = Vec::with_capacity(rows * cols);
    let mut labels = Vec::with_capacity(rows * cols);
    for _ in 0..rows {
        let mut x: Vec<f32> = (0..cols)
            .map(|_| (rng.next_u64() % 3) as f32 - 1.0)
            .collect();
        match rng.next_u64() % 8 {
            0 => x.iter_mut().for_each(|v| *v = 2.5),
            1 => {
                for _ in 0..2 {
                    let at = (rng.next_u64() % cols as u64) as usize;
                    x[at] = f32::NAN;
                }
            }
            2 => x.iter_mut().for_each(|v| *v = f32::NEG_INFINITY),
            3 => x.iter_mut().for_each(|v| {
                *v = if rng.next_u64().is_multiple_of(2) {
                    0.0
                } else {
                    -0.0
                }
            }),
            _ => {}
        }
        let mut y = vec![0.0f32; cols];
        match rng.next_u64() % 3 {
            0 => y[(rng.next_u64() % cols as u64) as usize] = 1.0,
            1 => y
                .iter_mut()
                .for_each(|v| *v = 0.5 * (rng.next_u64() % 2) as f32),
            _ => y[host_argmax(&x)] = 1.0,
        }
        logits.extend(x);
        labels.extend(y);
    }
    (logits, labels)
}

per_backend!(counting_cross_entropy_counts_agreeing_argmaxes_and_keeps_the_bits, "softmax": workgroup_per_row, rows_per_workgroup, row_per_invocation);
/// The counting pass adds, into its count, the rows whose logits' argmax is their labels' argmax (ties, NaN,
/// -inf and signed zeros as argmax sees them), adds rather than overwrites, and leaves the loss and gradient
/// bit for bit those of the plain pass.
fn counting_cross_entropy_counts_agreeing_argmaxes_and_keeps_the_bits(
    backend: &Backend,
    variant: &str,
) {
    let mut rng = Rng::fresh("counting cross-entropy");
    let session = &backend.poisoned_with("softmax", variant);
    for shape in [
        &[1, 1][..],
        &[7, 3],
        &[17, 4],
        &[257, 10],
        &[33, 513],
        &[3, 4099],
        &[2, 3, 5],
        &[5],
    ] {
        let cols = cols_of(shape);
        let rows = count(shape) / cols;
        let label = format!("{variant}, shape {shape:?}");
        let (logits_data, labels_data) = tie_heavy_rows(&mut rng, rows, cols);
        let expected = logits_data
            .chunks(cols)
            .zip(labels_data.chunks(cols))
            .filter(|(x, y)| host_argmax(x) == host_argmax(y))
            .count() as u32;
        let logits = session.upload(&logits_data, shape).expect("upload");
        let labels = session.upload(&labels_data, shape).expect("upload");
        let correct = session.upload_u32(&[0], &[1]).expect("count");
        let (loss, gradient) = logits
            .softmax_cross_entropy_counting(&labels, &correct)
            .expect("counting cross-entropy");
        assert_eq!(
            correct.item_u32().expect("count"),
            expected,
            "{label}: rows counted"
        );
        let (plain_loss, plain_gradient) = logits
            .softmax_cross_entropy_with_logits(&labels)
            .expect("cross-entropy");
        let bits = |tensor: &Tensor| -> Vec<u32> {
            read(tensor, "output").iter().map(|x| x.to_bits()).collect()
        };
        assert_eq!(bits(&loss), bits(&plain_loss), "{label}: loss bits");
        assert_eq!(
            bits(&gradient),
            bits(&plain_gradient),
            "{label}: gradient bits"
        );
        logits
            .softmax_cross_entropy_counting(&labels, &correct)
            .expect("counting again");
        assert_eq!(
            correct.item_u32().expect("count"),
            2 * expected,
            "{label}: a second pass adds to the count"
        );
    }
}

per_backend!(a_count_that_is_not_one_u32_of_the_session_is_an_error);
fn a_count_that_is_not_one_u32_of_the_session_is_an_error(backend: &Backend) {
    let session = backend.poisoned();
    let other = backend.poisoned();
    let logits = session.upload(&[0.5; 12], &[3, 4]).expect("upload");
    let labels = session.upload(&[0.25; 12], &[3, 4]).expect("upload");
    let as_f32 = session.upload(&[0.0], &[1]).expect("f32 count");
    assert!(matches!(
        logits.softmax_cross_entropy_counting(&labels, &as_f32),
        Err(Error::DType { .. })
    ));
    let two = session.upload_u32(&[0, 0], &[2]).expect("two counts");
    assert!(matches!(
        logits.softmax_cross_entropy_counting(&labels, &two),
        Err(Error::Shape { .. })
    ));
    let foreign = other.upload_u32(&[0], &[1]).expect("foreign count");
    assert!(matches!(
        logits.softmax_cross_entropy_counting(&labels, &foreign),
        Err(Error::SessionMismatch { .. })
    ));
    // Nothing was counted, and the session goes on.
    let correct = session.upload_u32(&[0], &[1]).expect("count");
    logits
        .softmax_cross_entropy_counting(&labels, &correct)
        .expect("a good count");
    assert_eq!(two.to_vec_u32().expect("read"), vec![0, 0]);
    assert_eq!(
        correct.item_u32().expect("read"),
        3,
        "all-equal rows: index 0 both"
    );
}

// --- 4. errors ---

per_backend!(bad_shapes_dtypes_and_sessions_are_errors_and_the_session_goes_on);
fn bad_shapes_dtypes_and_sessions_are_errors_and_the_session_goes_on(backend: &Backend) {
    let session = backend.poisoned();
    let other = backend.poisoned();
    let logits = session
        .upload(&(0..12).map(|v| v as f32).collect::<Vec<_>>(), &[3, 4])
        .expect("upload");

    // Logits and labels of different shapes, even with the same element count.
    for labels_shape in [&[3, 5][..], &[12], &[4, 3], &[1, 3, 4]] {
        let labels = session
            .upload(&vec![0.25; count(labels_shape)], labels_shape)
            .expect("upload");
        match logits.softmax_cross_entropy_with_logits(&labels) {
            Err(error @ Error::Shape { .. }) => {
                let message = error.to_string();
                assert!(
                    message.contains("[3, 4]") && message.contains(&format!("{labels_shape:?}")),
                    "the message names both shapes: {message}"
                );
            }
            result => panic!(
                "logits [3, 4] with labels {labels_shape:?} gave {:?}",
                result.map(|(loss, _)| loss.shape().to_vec())
            ),
        }
    }

    // A zero-length last axis.
    let empty = session.zeros(&[3, 0]).expect("empty tensor");
    assert!(
        matches!(empty.softmax(), Err(Error::Shape { .. })),
        "softmax of [3, 0]"
    );
    assert!(
        matches!(empty.log_softmax(), Err(Error::Shape { .. })),
        "log_softmax of [3, 0]"
    );
    let empty_labels = session.zeros(&[3, 0]).expect("empty tensor");
    assert!(
        matches!(
            empty.softmax_cross_entropy_with_logits(&empty_labels),
            Err(Error::Shape { .. })
        ),
        "cross-entropy of [3, 0]"
    );
    // No last axis at all: a scalar.
    let scalar = session.upload(&[1.5], &[]).expect("scalar");
    assert!(
        matches!(scalar.softmax(), Err(Error::Shape { .. })),
        "softmax of a scalar"
    );

    // Integer tensors.
    let indices = logits.argmax(Some(1)).expect("argmax");
    assert!(
        matches!(indices.softmax(), Err(Error::DType { .. })),
        "softmax of u32"
    );

    // Tensors of two sessions, both ways round.
    let foreign = other.upload(&[0.25; 12], &[3, 4]).expect("upload");
    assert!(
        matches!(
            logits.softmax_cross_entropy_with_logits(&foreign),
            Err(Error::SessionMismatch { .. })
        ),
        "labels of another session"
    );
    assert!(
        matches!(
            foreign.softmax_cross_entropy_with_logits(&logits),
            Err(Error::SessionMismatch { .. })
        ),
        "logits of another session"
    );

    // Both sessions still work.
    let labels = session.upload(&[0.25; 12], &[3, 4]).expect("upload");
    let (loss, _) = logits
        .softmax_cross_entropy_with_logits(&labels)
        .expect("cross-entropy after errors");
    let logits_data: Vec<f32> = (0..12).map(|v| v as f32).collect();
    let error = common::relative_error(
        &read(&loss, "loss"),
        &reference::cross_entropy_rows(&logits_data, &[0.25; 12], 4),
    );
    assert!(error < 1e-5, "loss after errors: relative error {error}");
    let error = common::relative_error(
        &read(&logits.softmax().expect("softmax after errors"), "softmax"),
        &softmax_reference(&logits_data, 4),
    );
    assert!(error < 1e-5, "softmax after errors: relative error {error}");
    let probabilities = read(
        &foreign.softmax().expect("softmax in the other session"),
        "softmax",
    );
    assert_eq!(probabilities, vec![0.25; 12], "the other session");
}
