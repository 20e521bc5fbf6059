//! The CPU references the rows measure the device against in the same run: one sgemm (matrixmultiply's), one
//! Adam, and one dense classifier's forward, backward and Adam step. The seed workload's step is that
//! classifier with a single layer and no bias; the `mlp_step` and `mlp_fit_epoch` rows train deeper ones.

use crate::{Error, Result};

/// Threads the CPU sgemm uses: matrixmultiply reads `MATMUL_NUM_THREADS` once, at its first product.
pub fn sgemm_threads() -> usize {
    std::env::var("MATMUL_NUM_THREADS")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(1)
}

/// Endless values in [-0.5, 0.5) from a fixed linear congruential generator: the same on every machine, so
/// the CPU side of a row works on the same numbers every run.
pub fn host_stream(seed: u64) -> impl Iterator<Item = f32> {
    let mut state = seed;
    std::iter::repeat_with(move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 40) as f32 / (1u64 << 24) as f32) - 0.5
    })
}

/// The first `len` values of [`host_stream`].
pub fn host_data(len: usize, seed: u64) -> Vec<f32> {
    host_stream(seed).take(len).collect()
}

/// A sum with sixteen independent accumulators, so the loop vectorises (a plain `iter().sum()` must keep its
/// order and does not).
pub fn cpu_sum(data: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 16];
    let chunks = data.chunks_exact(16);
    let tail: f32 = chunks.remainder().iter().sum();
    for chunk in chunks {
        for (lane, value) in lanes.iter_mut().zip(chunk) {
            *lane += value;
        }
    }
    lanes.iter().sum::<f32>() + tail
}

fn reference_error(reference: &str, message: String) -> Error {
    Error::Bench {
        row: reference.to_string(),
        message,
    }
}

/// The strides in the signed form matrixmultiply takes, once every element of a `rows`×`cols` operand they
/// reach is known to lie within its `len` elements.
fn checked_strides(
    operand: &str,
    len: usize,
    (rows, cols): (usize, usize),
    (row_stride, col_stride): (usize, usize),
) -> Result<(isize, isize)> {
    let signed = (isize::try_from(row_stride), isize::try_from(col_stride));
    let farthest = (rows.checked_sub(1), cols.checked_sub(1));
    let reach = match farthest {
        // An empty operand is never read.
        (None, _) | (_, None) => Some(0),
        (Some(row), Some(col)) => row
            .checked_mul(row_stride)
            .zip(col.checked_mul(col_stride))
            .and_then(|(down, across)| down.checked_add(across))
            .filter(|&last| last < len && isize::try_from(last).is_ok()),
    };
    match (signed, reach) {
        ((Ok(row_stride), Ok(col_stride)), Some(_)) => Ok((row_stride, col_stride)),
        _ => Err(reference_error(
            "cpu sgemm",
            format!(
                "{operand} is {rows}x{cols} read through strides ({row_stride}, {col_stride}), which reach \
                 past its {len} elements"
            ),
        )),
    }
}

/// C[m×n] = A·B, or C += A·B when `accumulate`, with A and B read through (row, column) strides in elements
/// and C dense and row-major. Every operand is checked against its slice before the product, in every build:
/// matrixmultiply reads and writes through raw pointers and checks nothing itself.
#[allow(clippy::too_many_arguments)] // the BLAS shape: sizes, then each operand with its strides
pub fn sgemm(
    (m, k, n): (usize, usize, usize),
    a: &[f32],
    a_strides: (usize, usize),
    b: &[f32],
    b_strides: (usize, usize),
    c: &mut [f32],
    accumulate: bool,
) -> Result<()> {
    let (a_row, a_col) = checked_strides("A", a.len(), (m, k), a_strides)?;
    let (b_row, b_col) = checked_strides("B", b.len(), (k, n), b_strides)?;
    let (c_row, c_col) = checked_strides("C", c.len(), (m, n), (n, 1))?;
    // SAFETY: checked_strides found every element of A (m×k), B (k×n) and C (m×n) that these strides reach
    // within its slice, and each offset within isize; C is borrowed mutably, so it overlaps neither input.
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            1.0,
            a.as_ptr(),
            a_row,
            a_col,
            b.as_ptr(),
            b_row,
            b_col,
            if accumulate { 1.0 } else { 0.0 },
            c.as_mut_ptr(),
            c_row,
            c_col,
        );
    }
    Ok(())
}

/// Adam over one parameter in TensorFlow's form with its defaults (β1 0.9, β2 0.999, ε 1e-8 added to √v):
/// what `AdamConfig` with only `lr` changed does on the device.
pub struct CpuAdam {
    lr: f32,
    m: Vec<f32>,
    v: Vec<f32>,
}

impl CpuAdam {
    pub fn new(len: usize, lr: f32) -> Self {
        Self {
            lr,
            m: vec![0.0; len],
            v: vec![0.0; len],
        }
    }

    /// One update; `step` counts from 1.
    pub fn update(&mut self, parameter: &mut [f32], gradient: &[f32], step: u64) {
        let (beta1, beta2, epsilon) = (0.9f32, 0.999f32, 1e-8f32);
        // Past i32::MAX steps both powers are 0 anyway.
        let t = i32::try_from(step).unwrap_or(i32::MAX);
        let lr_t = self.lr * (1.0 - beta2.powi(t)).sqrt() / (1.0 - beta1.powi(t));
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

/// One dense layer's parameters, their gradients and Adam state.
struct CpuLayer {
    inputs: usize,
    outputs: usize,
    weight: Vec<f32>,
    bias: Option<Vec<f32>>,
    grad_weight: Vec<f32>,
    grad_bias: Vec<f32>,
    adam_weight: CpuAdam,
    adam_bias: CpuAdam,
}

impl CpuLayer {
    fn new(inputs: usize, outputs: usize, weight: Vec<f32>, bias: bool, lr: f32) -> Self {
        let bias_len = if bias { outputs } else { 0 };
        Self {
            inputs,
            outputs,
            weight,
            bias: bias.then(|| vec![0.0; outputs]),
            grad_weight: vec![0.0; inputs * outputs],
            grad_bias: vec![0.0; bias_len],
            adam_weight: CpuAdam::new(inputs * outputs, lr),
            adam_bias: CpuAdam::new(bias_len, lr),
        }
    }

    /// out[rows×outputs] = input·W + b, with relu when `relu`.
    fn forward(&self, input: &[f32], rows: usize, out: &mut [f32], relu: bool) -> Result<()> {
        if let Some(bias) = &self.bias {
            for row in out.chunks_mut(self.outputs) {
                row.copy_from_slice(bias);
            }
        }
        sgemm(
            (rows, self.inputs, self.outputs),
            input,
            (self.inputs, 1),
            &self.weight,
            (self.outputs, 1),
            out,
            self.bias.is_some(),
        )?;
        if relu {
            out.iter_mut().for_each(|value| *value = value.max(0.0));
        }
        Ok(())
    }

    /// The gradients of W (xᵀ·dout) and b (dout summed over rows) and, where asked, of the input (dout·Wᵀ).
    fn backward(
        &mut self,
        input: &[f32],
        grad_out: &[f32],
        rows: usize,
        grad_input: Option<&mut [f32]>,
    ) -> Result<()> {
        let (i, o) = (self.inputs, self.outputs);
        sgemm(
            (i, rows, o),
            input,
            (1, i),
            grad_out,
            (o, 1),
            &mut self.grad_weight,
            false,
        )?;
        if self.bias.is_some() {
            self.grad_bias.fill(0.0);
            for row in grad_out.chunks(o) {
                for (total, value) in self.grad_bias.iter_mut().zip(row) {
                    *total += value;
                }
            }
        }
        if let Some(grad_input) = grad_input {
            sgemm(
                (rows, o, i),
                grad_out,
                (o, 1),
                &self.weight,
                (1, o),
                grad_input,
                false,
            )?;
        }
        Ok(())
    }

    fn adam(&mut self, step: u64) {
        self.adam_weight
            .update(&mut self.weight, &self.grad_weight, step);
        if let Some(bias) = &mut self.bias {
            self.adam_bias.update(bias, &self.grad_bias, step);
        }
    }
}

/// Mean softmax cross-entropy of `rows` rows of logits against soft labels (each row's labels need not sum to
/// 1), and its gradient by the logits into `grad`.
fn softmax_cross_entropy(
    logits: &[f32],
    labels: &[f32],
    classes: usize,
    rows: usize,
    grad: &mut [f32],
) -> f32 {
    let scale = rows as f32;
    let mut cost = 0.0f32;
    for ((row, labels), grad) in logits
        .chunks(classes)
        .zip(labels.chunks(classes))
        .zip(grad.chunks_mut(classes))
        .take(rows)
    {
        let max = row.iter().copied().fold(f32::MIN, f32::max);
        let total: f32 = row.iter().map(|x| (x - max).exp()).sum();
        let label_sum: f32 = labels.iter().sum();
        let weighted: f32 = labels.iter().zip(row).map(|(y, x)| y * (x - max)).sum();
        cost += (label_sum * total.ln() - weighted) / scale;
        for ((g, x), y) in grad.iter_mut().zip(row).zip(labels) {
            *g = ((x - max).exp() / total * label_sum - y) / scale;
        }
    }
    cost
}

/// A dense classifier on the host: relu after every layer but the last, softmax cross-entropy over the last,
/// Adam on every parameter. Its buffers hold the largest batch it was made for; a step may take fewer rows.
pub struct CpuMlp {
    layers: Vec<CpuLayer>,
    /// Each layer's output, and the gradient of the cost by it.
    outputs: Vec<Vec<f32>>,
    grads: Vec<Vec<f32>>,
    batch: usize,
    step: u64,
}

impl CpuMlp {
    /// `widths`: the inputs, each hidden layer's width, the classes. `weight(layer, fan_in, fan_out)` gives
    /// each layer's initial weight, row-major [fan_in, fan_out]; biases start at zero, or are left out when
    /// `bias` is false. Adam runs with learning rate `lr`.
    pub fn new(
        widths: &[usize],
        batch: usize,
        bias: bool,
        lr: f32,
        mut weight: impl FnMut(usize, usize, usize) -> Vec<f32>,
    ) -> Result<Self> {
        if widths.len() < 2 {
            return Err(reference_error(
                "cpu mlp",
                format!(
                    "widths {widths:?} name no layer: give the inputs and the classes at least"
                ),
            ));
        }
        let mut layers = Vec::with_capacity(widths.len() - 1);
        for (index, pair) in widths.windows(2).enumerate() {
            let (inputs, outputs) = (pair[0], pair[1]);
            let initial = weight(index, inputs, outputs);
            if initial.len() != inputs * outputs {
                return Err(reference_error(
                    "cpu mlp",
                    format!(
                        "layer {index}'s initial weight has {} values instead of {inputs}x{outputs}",
                        initial.len()
                    ),
                ));
            }
            layers.push(CpuLayer::new(inputs, outputs, initial, bias, lr));
        }
        let buffers = || widths[1..].iter().map(|&width| vec![0.0; batch * width]);
        Ok(Self {
            outputs: buffers().collect(),
            grads: buffers().collect(),
            layers,
            batch,
            step: 0,
        })
    }

    /// Forward, backward and an Adam update over the first `rows` rows of `x` [rows, inputs] against soft
    /// labels `y` [rows, classes]; returns the mean cost before the update.
    pub fn step(&mut self, x: &[f32], y: &[f32], rows: usize) -> Result<f32> {
        let count = self.layers.len();
        let (inputs, classes) = (self.layers[0].inputs, self.layers[count - 1].outputs);
        if rows > self.batch || x.len() < rows * inputs || y.len() < rows * classes {
            return Err(reference_error(
                "cpu mlp",
                format!(
                    "a step of {rows} rows takes x of {} and y of {} values within a batch of {}; given {} \
                     and {}",
                    rows * inputs,
                    rows * classes,
                    self.batch,
                    x.len(),
                    y.len()
                ),
            ));
        }
        let x = &x[..rows * inputs];
        for index in 0..count {
            let (before, after) = self.outputs.split_at_mut(index);
            let layer = &self.layers[index];
            let input = before
                .last()
                .map_or(x, |previous| &previous[..rows * layer.inputs]);
            let out = &mut after[0][..rows * layer.outputs];
            layer.forward(input, rows, out, index + 1 < count)?;
        }
        let cost = softmax_cross_entropy(
            &self.outputs[count - 1],
            y,
            classes,
            rows,
            &mut self.grads[count - 1],
        );
        for index in (0..count).rev() {
            let (inputs, outputs) = (self.layers[index].inputs, self.layers[index].outputs);
            let input = match index {
                0 => x,
                _ => &self.outputs[index - 1][..rows * inputs],
            };
            let (before, after) = self.grads.split_at_mut(index);
            let grad_input = before.last_mut().map(|grad| &mut grad[..rows * inputs]);
            self.layers[index].backward(input, &after[0][..rows * outputs], rows, grad_input)?;
            if let Some(grad) = before.last_mut() {
                // relu passes the gradient only where its output was positive.
                for (g, a) in grad.iter_mut().zip(input) {
                    if *a <= 0.0 {
                        *g = 0.0;
                    }
                }
            }
        }
        self.step += 1;
        for layer in &mut self.layers {
            layer.adam(self.step);
        }
        Ok(cost)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sgemm_multiplies_through_strides() {
        // A = [[1, 2], [3, 4]] stored transposed; B = [[5], [6]].
        let a_transposed = [1.0, 3.0, 2.0, 4.0];
        let mut c = [0.0; 2];
        sgemm(
            (2, 2, 1),
            &a_transposed,
            (1, 2),
            &[5.0, 6.0],
            (1, 1),
            &mut c,
            false,
        )
        .expect("operands that fit");
        assert_eq!(c, [17.0, 39.0]);
        let a = [1.0, 2.0, 3.0, 4.0];
        sgemm((2, 2, 1), &a, (2, 1), &[1.0; 2], (1, 1), &mut c, true).expect("operands that fit");
        assert_eq!(c, [20.0, 46.0]);
    }

    /// The checks hold in release builds too, before anything is read or written.
    #[test]
    fn sgemm_refuses_operands_its_strides_reach_past() {
        let mut c = [7.0; 4];
        let two_by_two = |a: &[f32], a_strides, b_strides, c: &mut [f32]| {
            sgemm((2, 2, 2), a, a_strides, &[1.0; 4], b_strides, c, false)
        };
        let short = two_by_two(&[1.0; 3], (2, 1), (2, 1), &mut c);
        assert!(
            matches!(&short, Err(Error::Bench { message, .. }) if message.starts_with("A is 2x2")),
            "{short:?}"
        );
        let strided = two_by_two(&[1.0; 4], (2, 1), (1, 3), &mut c);
        assert!(strided.is_err(), "B read past its end: {strided:?}");
        let small_c = two_by_two(&[1.0; 4], (2, 1), (2, 1), &mut c[..3]);
        assert!(small_c.is_err(), "C too small: {small_c:?}");
        let huge = two_by_two(&[1.0; 4], (usize::MAX, 1), (2, 1), &mut c);
        assert!(huge.is_err(), "a stride past isize: {huge:?}");
        assert_eq!(c, [7.0; 4], "a refused product writes nothing");
        sgemm((0, 5, 0), &[], (5, 1), &[], (0, 1), &mut [], false).expect("an empty product");
    }

    #[test]
    fn a_cpu_mlp_step_lowers_the_cost_of_its_batch() {
        let (batch, inputs, classes) = (8, 4, 3);
        let x = host_data(batch * inputs, 1);
        let y: Vec<f32> = (0..batch * classes)
            .map(|index| f32::from(index / classes % classes == index % classes))
            .collect();
        let mut mlp = CpuMlp::new(&[inputs, 5, classes], batch, true, 0.05, |layer, i, o| {
            host_data(i * o, 10 + layer as u64)
        })
        .expect("a model");
        let first = mlp.step(&x, &y, batch).expect("a step");
        let later = (0..50)
            .map(|_| mlp.step(&x, &y, batch))
            .last()
            .and_then(|cost| cost.ok())
            .expect("steps");
        assert!(later < first * 0.5, "cost {first}, then {later}");
        assert!(mlp.step(&x, &y, batch + 1).is_err());
    }
}
