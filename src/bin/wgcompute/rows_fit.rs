//! The `mlp_fit_epoch` bench row: one epoch of `fit`'s training (an MLP classifier, Adam, shuffled minibatches
//! gathered on the device) beside the same epoch on the CPU in the same run: matrixmultiply for the products,
//! plain loops for the rest.

use anyhow::Result;
use wgcompute::data::{shuffled_order, Dataset, Labels};
use wgcompute::{Adam, AdamConfig, Mlp, Session};

use crate::rows::{median_time, sgemm_threads, BenchRow};

/// The case: 10,000 samples of 64 features, 10 classes, one hidden layer of 128, batches of 100.
const SAMPLES: usize = 10_000;
const FEATURES: usize = 64;
const CLASSES: usize = 10;
const HIDDEN: usize = 128;
const BATCH: usize = 100;
const LR: f32 = 0.001;

/// A separable-enough dataset: class centres plus uniform noise, from a fixed seed.
fn dataset() -> (Vec<f32>, Vec<u32>) {
    let mut state = 0x5EED_u64;
    let mut next = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    };
    let centres: Vec<f32> = (0..CLASSES * FEATURES).map(|_| next() * 4.0).collect();
    let mut x = Vec::with_capacity(SAMPLES * FEATURES);
    let mut y = Vec::with_capacity(SAMPLES);
    for sample in 0..SAMPLES {
        let class = sample % CLASSES;
        x.extend((0..FEATURES).map(|feature| centres[class * FEATURES + feature] + next() * 2.0));
        y.push(class as u32);
    }
    (x, y)
}

/// Seconds per epoch on the device beside the CPU epoch.
pub fn mlp_fit_epoch(session: &Session, runs: usize) -> Result<BenchRow> {
    let (x, y) = dataset();
    let data = Dataset::upload(session, &x, FEATURES, Labels::Classes(&y), CLASSES)?;
    let model = Mlp::new(session, FEATURES, &[HIDDEN], CLASSES, 1)?;
    let mut optimizer = Adam::new(AdamConfig {
        lr: LR,
        ..AdamConfig::default()
    });
    let mut epoch = 0;
    let gpu = median_time(runs, || {
        epoch += 1;
        // The figures are read back at the end of the epoch, so the clock stops after the device is done.
        data.train_epoch(&model, &mut optimizer, BATCH, 1, epoch, |_| {})?;
        Ok(())
    })?;
    let mut cpu_model = CpuMlp::new();
    let mut cpu_epoch = 0;
    let cpu = median_time(runs, || {
        cpu_epoch += 1;
        cpu_model.epoch(&x, &y, cpu_epoch);
        Ok(())
    })?;
    Ok(BenchRow::timed(
        "mlp_fit_epoch",
        format!("{SAMPLES}x{FEATURES}, {CLASSES} classes, hidden {HIDDEN}, batch {BATCH}"),
        "s",
        gpu.as_secs_f64(),
        format!(
            "cpu epoch (matrixmultiply, {} threads, plain loops)",
            sgemm_threads()
        ),
        cpu.as_secs_f64(),
    ))
}

/// C[m×n] = A·B with A read through (row, column) strides `a` and B through `b`, both in elements.
#[allow(clippy::too_many_arguments)] // the BLAS shape: sizes, operands with strides, output
fn sgemm(
    (m, k, n): (usize, usize, usize),
    a: &[f32],
    a_strides: (isize, isize),
    b: &[f32],
    b_strides: (isize, isize),
    c: &mut [f32],
) {
    debug_assert!(a.len() >= m * k && b.len() >= k * n && c.len() >= m * n);
    // SAFETY: a holds m·k and b k·n elements reachable through their strides, c m·n row-major ones, as asserted.
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            1.0,
            a.as_ptr(),
            a_strides.0,
            a_strides.1,
            b.as_ptr(),
            b_strides.0,
            b_strides.1,
            0.0,
            c.as_mut_ptr(),
            n as isize,
            1,
        );
    }
}

/// Adam (TensorFlow's form, as the device's default) over one parameter.
struct AdamState {
    m: Vec<f32>,
    v: Vec<f32>,
}

impl AdamState {
    fn new(len: usize) -> Self {
        Self {
            m: vec![0.0; len],
            v: vec![0.0; len],
        }
    }

    fn update(&mut self, parameter: &mut [f32], gradient: &[f32], step: u64) {
        let (beta1, beta2, epsilon) = (0.9f32, 0.999f32, 1e-8f32);
        let t = step as i32;
        let lr_t = LR * (1.0 - beta2.powi(t)).sqrt() / (1.0 - beta1.powi(t));
        for (((p, g), m), v) in parameter
            .iter_mut()
            .zip(gradient)
            .zip(&mut self.m)
            .zip(&mut self.v)
        {
            *m = beta1 * *m + (1.0 - beta1) * g;
            *v = beta2 * *v + (1.0 - beta2) * g * g;
            *p -= lr_t * *m / (v.sqrt() + epsilon);
        }
    }
}

/// The same MLP and training on the host.
struct CpuMlp {
    w1: Vec<f32>,
    b1: Vec<f32>,
    w2: Vec<f32>,
    b2: Vec<f32>,
    state: [AdamState; 4],
    step: u64,
}

impl CpuMlp {
    fn new() -> Self {
        let limit = |fan_in: usize, fan_out: usize| (6.0 / (fan_in + fan_out) as f32).sqrt();
        let mut seed = 7u64;
        let mut uniform = |len: usize, limit: f32| -> Vec<f32> {
            (0..len)
                .map(|_| {
                    seed = seed
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    ((seed >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * limit
                })
                .collect()
        };
        Self {
            w1: uniform(FEATURES * HIDDEN, limit(FEATURES, HIDDEN)),
            b1: vec![0.0; HIDDEN],
            w2: uniform(HIDDEN * CLASSES, limit(HIDDEN, CLASSES)),
            b2: vec![0.0; CLASSES],
            state: [
                AdamState::new(FEATURES * HIDDEN),
                AdamState::new(HIDDEN),
                AdamState::new(HIDDEN * CLASSES),
                AdamState::new(CLASSES),
            ],
            step: 0,
        }
    }

    /// One epoch in the seeded order; returns the mean loss.
    fn epoch(&mut self, x: &[f32], y: &[u32], epoch: u64) -> f32 {
        let order = shuffled_order(SAMPLES, 1, epoch);
        let mut xb = vec![0.0; BATCH * FEATURES];
        let mut hidden = vec![0.0; BATCH * HIDDEN];
        let mut logits = vec![0.0; BATCH * CLASSES];
        let mut d_logits = vec![0.0; BATCH * CLASSES];
        let mut d_hidden = vec![0.0; BATCH * HIDDEN];
        let mut d_w1 = vec![0.0; FEATURES * HIDDEN];
        let mut d_w2 = vec![0.0; HIDDEN * CLASSES];
        let mut total = 0.0;
        for picks in order.chunks(BATCH) {
            let rows = picks.len();
            for (row, &sample) in picks.iter().enumerate() {
                let sample = sample as usize;
                xb[row * FEATURES..(row + 1) * FEATURES]
                    .copy_from_slice(&x[sample * FEATURES..(sample + 1) * FEATURES]);
            }
            let f = FEATURES as isize;
            let h = HIDDEN as isize;
            let c = CLASSES as isize;
            sgemm(
                (rows, FEATURES, HIDDEN),
                &xb,
                (f, 1),
                &self.w1,
                (h, 1),
                &mut hidden,
            );
            for row in hidden[..rows * HIDDEN].chunks_mut(HIDDEN) {
                for (value, bias) in row.iter_mut().zip(&self.b1) {
                    *value = (*value + bias).max(0.0);
                }
            }
            sgemm(
                (rows, HIDDEN, CLASSES),
                &hidden,
                (h, 1),
                &self.w2,
                (c, 1),
                &mut logits,
            );
            for (row, &sample) in picks.iter().enumerate() {
                let label = y[sample as usize] as usize;
                let z = &mut logits[row * CLASSES..(row + 1) * CLASSES];
                for (value, bias) in z.iter_mut().zip(&self.b2) {
                    *value += bias;
                }
                let max = z.iter().copied().fold(f32::MIN, f32::max);
                let sum: f32 = z.iter().map(|value| (value - max).exp()).sum();
                total += max + sum.ln() - z[label];
                for (class, grad) in d_logits[row * CLASSES..(row + 1) * CLASSES]
                    .iter_mut()
                    .enumerate()
                {
                    let p = (z[class] - max).exp() / sum;
                    *grad = (p - f32::from(class == label)) / rows as f32;
                }
            }
            // Gradients: dW2 = hᵀ·dz, db2 = Σ dz, dh = dz·W2ᵀ masked by relu, dW1 = xᵀ·dh, db1 = Σ dh.
            sgemm(
                (HIDDEN, rows, CLASSES),
                &hidden,
                (1, h),
                &d_logits,
                (c, 1),
                &mut d_w2,
            );
            let d_b2 = column_sums(&d_logits[..rows * CLASSES], CLASSES);
            sgemm(
                (rows, CLASSES, HIDDEN),
                &d_logits,
                (c, 1),
                &self.w2,
                (1, c),
                &mut d_hidden,
            );
            for (grad, value) in d_hidden[..rows * HIDDEN].iter_mut().zip(&hidden) {
                if *value <= 0.0 {
                    *grad = 0.0;
                }
            }
            sgemm(
                (FEATURES, rows, HIDDEN),
                &xb,
                (1, f),
                &d_hidden,
                (h, 1),
                &mut d_w1,
            );
            let d_b1 = column_sums(&d_hidden[..rows * HIDDEN], HIDDEN);
            self.step += 1;
            let [s1, s2, s3, s4] = &mut self.state;
            s1.update(&mut self.w1, &d_w1, self.step);
            s2.update(&mut self.b1, &d_b1, self.step);
            s3.update(&mut self.w2, &d_w2, self.step);
            s4.update(&mut self.b2, &d_b2, self.step);
        }
        total / SAMPLES as f32
    }
}

fn column_sums(rows: &[f32], width: usize) -> Vec<f32> {
    let mut sums = vec![0.0; width];
    for row in rows.chunks(width) {
        for (sum, value) in sums.iter_mut().zip(row) {
            *sum += value;
        }
    }
    sums
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_baseline_learns_the_benchmark_dataset() {
        let (x, y) = dataset();
        let mut model = CpuMlp::new();
        let first = model.epoch(&x, &y, 1);
        let second = model.epoch(&x, &y, 2);
        assert!(
            first.is_finite() && second < first * 0.7,
            "losses {first} then {second}"
        );
    }
}
