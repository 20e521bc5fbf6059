//! The `conv2d` row: a 3×3 convolution's training step (forward, input and kernel gradients) beside the same
//! three products as plain matrix products, the ceiling of a convolution made of patches and one product each
//! way, with the CPU doing those products in the same run for context.

use std::sync::Arc;

use super::cpu::{host_data, sgemm, sgemm_threads};
use super::report::{BenchRow, Better};
use super::rows::{device_time, median_time};
use crate::{Conv2dOptions, GradientTape, Padding, Result, Session, Transpose};

/// A ResNet-style layer: [batch, size, size, channels] by a 3×3 kernel, `channels` out, "same" padding.
#[derive(Clone, Copy, Debug)]
pub struct ConvCase {
    pub batch: usize,
    pub size: usize,
    pub channels: usize,
}

impl ConvCase {
    pub const FULL: ConvCase = ConvCase {
        batch: 32,
        size: 32,
        channels: 64,
    };
    pub const QUICK: ConvCase = ConvCase {
        batch: 8,
        size: 32,
        channels: 64,
    };

    /// (positions, patch length, out channels): the forward product's m, k and n.
    fn product(&self) -> (usize, usize, usize) {
        (
            self.batch * self.size * self.size,
            9 * self.channels,
            self.channels,
        )
    }
}

/// GFLOP/s of the convolution's forward and backward passes on the tape beside the same three products as
/// matrix products on the device (forward `P·K`, input gradient `G·Kᵀ`, kernel gradient `Pᵀ·G`).
pub fn conv2d(session: &Session, case: ConvCase, runs: usize) -> Result<BenchRow> {
    let ConvCase {
        batch,
        size,
        channels,
    } = case;
    let (m, k, n) = case.product();
    let image = Arc::new(session.upload(
        &host_data(batch * size * size * channels, 31),
        &[batch, size, size, channels],
    )?);
    let kernel = Arc::new(session.upload(&host_data(k * n, 32), &[3, 3, channels, channels])?);
    let upstream = session.upload(&host_data(m * n, 33), &[batch, size, size, channels])?;
    let options = Conv2dOptions {
        padding: Padding::Same,
        ..Conv2dOptions::default()
    };
    let (conv, dispatches) = device_time(session, runs, || {
        let tape = GradientTape::new();
        let (x, w) = (tape.watch(&image)?, tape.watch(&kernel)?);
        let y = x.conv2d(&w, &options)?;
        tape.take_gradient(&y, Some(&upstream), &[&x, &w]).map(drop)
    })?;

    let patches = session.upload(&host_data(m * k, 34), &[m, k])?;
    let kernel_matrix = kernel.reshape(&[k, n])?;
    let gradient = upstream.reshape(&[m, n])?;
    let (products, _) = device_time(session, runs, || {
        patches.matmul(&kernel_matrix)?;
        gradient.matmul_t(&kernel_matrix, Transpose::Right)?;
        patches.matmul_t(&gradient, Transpose::Left).map(drop)
    })?;

    let (p_host, k_host, g_host) = (
        host_data(m * k, 34),
        host_data(k * n, 32),
        host_data(m * n, 33),
    );
    let (mut out, mut d_patches, mut d_kernel) =
        (vec![0.0; m * n], vec![0.0; m * k], vec![0.0; k * n]);
    let cpu = median_time(runs, || {
        sgemm((m, k, n), &p_host, (k, 1), &k_host, (n, 1), &mut out, false)?;
        sgemm(
            (m, n, k),
            &g_host,
            (n, 1),
            &k_host,
            (1, n),
            &mut d_patches,
            false,
        )?;
        sgemm(
            (k, m, n),
            &p_host,
            (1, k),
            &g_host,
            (n, 1),
            &mut d_kernel,
            false,
        )
    })?;

    let flops = 3.0 * 2.0 * (m * k * n) as f64;
    let rate = |time: std::time::Duration| flops / time.as_secs_f64() / 1e9;
    Ok(BenchRow::new(
        Better::Higher,
        "conv2d",
        format!("{batch}x{size}x{size}x{channels}, 3x3 same, forward+backward"),
        "GFLOP/s",
        rate(conv),
        "the same 3 products as matmuls".to_string(),
        rate(products),
    )
    .with_context(
        format!("cpu sgemm of the 3 products ({} threads)", sgemm_threads()),
        rate(cpu),
    )
    .with_dispatches(dispatches))
}
