//! Convolutions and pooling on the tape, made of the image's patches (an op of its own, whose gradient is the
//! patches' adjoint) and ops the tape already records (reshape, permute, matmul, sums, take_along_axis), so
//! that the kernel, image and bias gradients follow from theirs.

use crate::error::Result;
use crate::op::elementwise::BinaryOp;
use crate::op::matmul::Transpose;
use crate::op::reduce::ReduceOp;
use crate::op::window::{Conv1dOptions, Conv2dOptions, Padding};
use crate::ops::window::{
    conv1d_as_2d, expect_f32_pair, pool_windows, pooled_counts, rank4, transposed_windows, ConvPlan,
};
use crate::shape::window::Windows;

use super::tape::{Op, Tape, Var};

impl Tape {
    fn patches(
        &mut self,
        op: &'static str,
        x: Var,
        windows: Windows,
        fill: f32,
        shape: &[usize],
    ) -> Result<Var> {
        let value = self.value(x)?.patches(op, &windows, fill, shape)?;
        let wants = self.wants(&[x])?;
        Ok(self.push(
            value,
            Op::Patches {
                x: x.index,
                windows,
            },
            wants,
        ))
    }

    fn patches_adjoint(&mut self, op: &'static str, x: Var, windows: Windows) -> Result<Var> {
        let value = self.value(x)?.patches_adjoint(op, &windows)?;
        let wants = self.wants(&[x])?;
        Ok(self.push(
            value,
            Op::PatchesAdjoint {
                x: x.index,
                windows,
            },
            wants,
        ))
    }

    /// See [`Tensor::conv2d`](crate::Tensor::conv2d); gradients flow to the image and the kernel.
    pub fn conv2d(&mut self, x: Var, kernel: Var, options: &Conv2dOptions) -> Result<Var> {
        const NAME: &str = "conv2d";
        let (image, weights) = (self.value(x)?, self.value(kernel)?);
        expect_f32_pair(NAME, image, weights)?;
        let plan = ConvPlan::new(NAME, image.shape(), weights.shape(), options)?;
        let patches = self.patches(NAME, x, plan.windows, 0.0, &plan.patches_shape())?;
        let matrix = self.reshape(kernel, &plan.kernel_matrix_shape())?;
        let product = if plan.windows.groups == 1 {
            self.matmul(patches, matrix)?
        } else {
            let grouped = self.permute(matrix, &[1, 0, 2])?;
            let product = self.matmul(patches, grouped)?;
            self.permute(product, &[1, 0, 2])?
        };
        self.reshape(product, &plan.output_shape())
    }

    /// See [`Tensor::conv1d`](crate::Tensor::conv1d).
    pub fn conv1d(&mut self, x: Var, kernel: Var, options: &Conv1dOptions) -> Result<Var> {
        const NAME: &str = "conv1d";
        let (image, weights) = (self.value(x)?, self.value(kernel)?);
        expect_f32_pair(NAME, image, weights)?;
        let (image_shape, kernel_shape, options) =
            conv1d_as_2d(NAME, image.shape(), weights.shape(), options)?;
        let image = self.reshape(x, &image_shape)?;
        let kernel = self.reshape(kernel, &kernel_shape)?;
        let out = self.conv2d(image, kernel, &options)?;
        let [batch, _, width, channels] = rank4(NAME, "the output", self.value(out)?.shape())?;
        self.reshape(out, &[batch, width, channels])
    }

    /// See [`Tensor::conv2d_transpose`](crate::Tensor::conv2d_transpose).
    pub fn conv2d_transpose(
        &mut self,
        x: Var,
        kernel: Var,
        options: &Conv2dOptions,
    ) -> Result<Var> {
        const NAME: &str = "conv2d_transpose";
        let (image, weights) = (self.value(x)?, self.value(kernel)?);
        expect_f32_pair(NAME, image, weights)?;
        let windows = transposed_windows(NAME, image.shape(), weights.shape(), options)?;
        let [kh, kw, out_channels, in_channels] = rank4(NAME, "kernel", weights.shape())?;
        let rows = self.reshape(x, &[windows.positions(), in_channels])?;
        let matrix = self.reshape(kernel, &[kh * kw * out_channels, in_channels])?;
        let columns = self.matmul_t(rows, matrix, Transpose::Right)?;
        self.patches_adjoint(NAME, columns, windows)
    }

    /// See [`Tensor::max_pool2d`](crate::Tensor::max_pool2d): the gradient goes to each window's first
    /// maximum.
    pub fn max_pool2d(
        &mut self,
        x: Var,
        size: [usize; 2],
        stride: [usize; 2],
        padding: Padding,
    ) -> Result<Var> {
        const NAME: &str = "max_pool2d";
        let image = self.value(x)?;
        image.expect_dtype(NAME, crate::dtype::DType::F32)?;
        let windows = pool_windows(NAME, image.shape(), size, stride, padding)?;
        let [_, positions, _] = windows.patches_shape();
        let channels = windows.channels;
        let patches = self.patches(
            NAME,
            x,
            windows,
            f32::NEG_INFINITY,
            &[positions, windows.taps(), channels],
        )?;
        let picks = self
            .value(patches)?
            .argmax(Some(1))?
            .into_shape(&[positions, 1, channels])?;
        let picks = self.input(picks);
        let maxima = self.take_along_axis(patches, picks, 1)?;
        self.reshape(
            maxima,
            &[
                windows.batch,
                windows.output[0],
                windows.output[1],
                channels,
            ],
        )
    }

    /// See [`Tensor::avg_pool2d`](crate::Tensor::avg_pool2d).
    pub fn avg_pool2d(
        &mut self,
        x: Var,
        size: [usize; 2],
        stride: [usize; 2],
        padding: Padding,
    ) -> Result<Var> {
        const NAME: &str = "avg_pool2d";
        let image = self.value(x)?;
        image.expect_dtype(NAME, crate::dtype::DType::F32)?;
        let windows = pool_windows(NAME, image.shape(), size, stride, padding)?;
        let counts = image.upload_beside(
            &pooled_counts(&windows),
            &[1, windows.output[0], windows.output[1], 1],
        )?;
        let [_, positions, _] = windows.patches_shape();
        let channels = windows.channels;
        let patches = self.patches(
            NAME,
            x,
            windows,
            0.0,
            &[positions, windows.taps(), channels],
        )?;
        let sums = self.reduce(ReduceOp::Sum, patches, Some(1))?;
        let sums = self.reshape(
            sums,
            &[
                windows.batch,
                windows.output[0],
                windows.output[1],
                channels,
            ],
        )?;
        let counts = self.input(counts);
        self.binary(BinaryOp::Div, sums, counts)
    }

    /// See [`Tensor::global_avg_pool2d`](crate::Tensor::global_avg_pool2d).
    pub fn global_avg_pool2d(&mut self, x: Var) -> Result<Var> {
        const NAME: &str = "global_avg_pool2d";
        let image = self.value(x)?;
        image.expect_dtype(NAME, crate::dtype::DType::F32)?;
        rank4(NAME, "the image", image.shape())?;
        self.reduce_axes(ReduceOp::Mean, x, Some(&[1, 2]), false)
    }
}
