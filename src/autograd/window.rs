//! Convolutions and pooling on the tape: each the `Tensor` op of its name run on the variables' values, made of
//! the image's patches (an op of its own, whose gradient is the patches' adjoint) and ops that record
//! themselves (reshape, permute, matmul, sums, take_along_axis), so that the kernel and image gradients
//! follow from theirs.

use crate::error::Result;
use crate::op::window::{Conv1dOptions, Conv2dOptions, Padding};
use crate::tensor::{Tape, Var};

impl Tape {
    /// See [`Tensor::conv2d`](crate::Tensor::conv2d); gradients flow to the image and the kernel.
    pub fn conv2d(&mut self, x: Var, kernel: Var, options: &Conv2dOptions) -> Result<Var> {
        self.record_one(&[x, kernel], |v| v[0].conv2d(&v[1], options))
    }

    /// See [`Tensor::conv1d`](crate::Tensor::conv1d).
    pub fn conv1d(&mut self, x: Var, kernel: Var, options: &Conv1dOptions) -> Result<Var> {
        self.record_one(&[x, kernel], |v| v[0].conv1d(&v[1], options))
    }

    /// See [`Tensor::conv2d_transpose`](crate::Tensor::conv2d_transpose).
    pub fn conv2d_transpose(
        &mut self,
        x: Var,
        kernel: Var,
        options: &Conv2dOptions,
    ) -> Result<Var> {
        self.record_one(&[x, kernel], |v| v[0].conv2d_transpose(&v[1], options))
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
        self.record_one(&[x], |v| v[0].max_pool2d(size, stride, padding))
    }

    /// See [`Tensor::avg_pool2d`](crate::Tensor::avg_pool2d).
    pub fn avg_pool2d(
        &mut self,
        x: Var,
        size: [usize; 2],
        stride: [usize; 2],
        padding: Padding,
    ) -> Result<Var> {
        self.record_one(&[x], |v| v[0].avg_pool2d(size, stride, padding))
    }

    /// See [`Tensor::global_avg_pool2d`](crate::Tensor::global_avg_pool2d).
    pub fn global_avg_pool2d(&mut self, x: Var) -> Result<Var> {
        self.record_one(&[x], |v| v[0].global_avg_pool2d())
    }
}
