//! Convolutions and pooling over channels-last images (NHWC), with kernels laid out `[kh, kw, in / groups,
//! out]` as TensorFlow lays them out. Each reads the image's patches (im2col, one pass) and multiplies them by
//! the kernel as one matrix product per group, or reduces them; the patches' adjoint (col2im) carries
//! gradients back to the image and makes the transposed convolution.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::matmul::Transpose;
use crate::op::reduce::ReduceOp;
use crate::op::window::{Conv1dOptions, Conv2dOptions, Padding};
use crate::shape::window::Windows;
use crate::tensor::{Op, Tensor};

fn shape_error(op: &'static str, message: String) -> Error {
    Error::Shape { op, message }
}

/// The shape of a rank-4 operand, or an error naming it.
pub(crate) fn rank4(op: &'static str, what: &str, shape: &[usize]) -> Result<[usize; 4]> {
    <[usize; 4]>::try_from(shape).map_err(|_| {
        shape_error(
            op,
            format!(
                "{what} must have 4 axes ({}); got shape {shape:?}",
                rank4_axes(what)
            ),
        )
    })
}

fn rank4_axes(what: &str) -> &'static str {
    if what == "kernel" {
        "[kh, kw, in_channels / groups, out_channels]"
    } else {
        "[batch, height, width, channels]"
    }
}

/// How a convolution runs: its windows over the image and the kernel's sizes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ConvPlan {
    pub windows: Windows,
    pub out_channels: usize,
}

impl ConvPlan {
    /// Checks an image of `image` shape and a kernel of `kernel` shape against each other and `options`.
    pub fn new(
        op: &'static str,
        image: &[usize],
        kernel: &[usize],
        options: &Conv2dOptions,
    ) -> Result<ConvPlan> {
        let image = rank4(op, "the image", image)?;
        let [kh, kw, group_in, out_channels] = rank4(op, "kernel", kernel)?;
        let windows = Windows::new(op, image, [kh, kw], options)?;
        let groups = options.groups;
        if group_in * groups != image[3] || out_channels % groups != 0 {
            return Err(shape_error(
                op,
                format!(
                    "a kernel {kernel:?} with {groups} group(s) takes {} input channels and a multiple of \
                     {groups} output channels; the image has {} channels",
                    group_in * groups,
                    image[3]
                ),
            ));
        }
        Ok(ConvPlan {
            windows,
            out_channels,
        })
    }

    /// The patches as the product reads them: `[positions, taps · channels]` for one group, else
    /// `[groups, positions, taps · group channels]`.
    pub fn patches_shape(&self) -> Vec<usize> {
        let [groups, positions, row] = self.windows.patches_shape();
        if groups == 1 {
            vec![positions, row]
        } else {
            vec![groups, positions, row]
        }
    }

    /// The kernel as the product reads it, before a grouped kernel's axes are swapped: `[taps · group
    /// channels, out]`, or `[taps · group channels, groups, out / groups]`.
    pub fn kernel_matrix_shape(&self) -> Vec<usize> {
        let [groups, _, row] = self.windows.patches_shape();
        if groups == 1 {
            vec![row, self.out_channels]
        } else {
            vec![row, groups, self.out_channels / groups]
        }
    }

    pub fn output_shape(&self) -> [usize; 4] {
        let w = &self.windows;
        [w.batch, w.output[0], w.output[1], self.out_channels]
    }
}

/// The windows of a transposed convolution of an `image` by a `kernel` `[kh, kw, out, in]`: those of the
/// convolution whose input gradient it is.
pub(crate) fn transposed_windows(
    op: &'static str,
    image: &[usize],
    kernel: &[usize],
    options: &Conv2dOptions,
) -> Result<Windows> {
    let [batch, height, width, channels] = rank4(op, "the image", image)?;
    let [kh, kw, out_channels, in_channels] = rank4(op, "kernel", kernel)?;
    if options.groups != 1 {
        return Err(Error::InvalidArgument {
            what: op,
            given: format!("groups = {}", options.groups),
            expected: "one group: a transposed convolution takes no groups".to_string(),
        });
    }
    if in_channels != channels {
        return Err(shape_error(
            op,
            format!(
                "a kernel {kernel:?} ([kh, kw, out_channels, in_channels]) takes {in_channels} input \
                 channels; the image has {channels}"
            ),
        ));
    }
    Windows::transposed(op, [batch, height, width, out_channels], [kh, kw], options)
}

/// The windows of a pooling pass, refusing explicit padding that leaves a window on padding alone.
pub(crate) fn pool_windows(
    op: &'static str,
    image: &[usize],
    size: [usize; 2],
    stride: [usize; 2],
    padding: Padding,
) -> Result<Windows> {
    let image = rank4(op, "the image", image)?;
    let options = Conv2dOptions {
        stride,
        padding,
        ..Conv2dOptions::default()
    };
    let windows = Windows::new(op, image, size, &options)?;
    if let Padding::Explicit(pads) = padding {
        if pads[0]
            .iter()
            .chain(&pads[1])
            .zip([size[0], size[0], size[1], size[1]])
            .any(|(p, s)| *p >= s)
        {
            return Err(Error::InvalidArgument {
                what: op,
                given: format!("padding {pads:?} for a {size:?} window"),
                expected: "padding smaller than the window on every side".to_string(),
            });
        }
    }
    Ok(windows)
}

/// How many image elements each output position of `windows` pools, as `[1, out_h, out_w, 1]` values.
pub(crate) fn pooled_counts(windows: &Windows) -> Vec<f32> {
    let mut counts = Vec::with_capacity(windows.output[0] * windows.output[1]);
    for oy in 0..windows.output[0] {
        for ox in 0..windows.output[1] {
            counts.push(windows.inside(oy, ox) as f32);
        }
    }
    counts
}

/// The 1-D convolution as a 2-D one: the image `[batch, width, channels]` and the kernel `[k, in / groups,
/// out]` as `[batch, 1, width, channels]` and `[1, k, in / groups, out]`.
pub(crate) fn conv1d_as_2d(
    op: &'static str,
    image: &[usize],
    kernel: &[usize],
    options: &Conv1dOptions,
) -> Result<([usize; 4], [usize; 4], Conv2dOptions)> {
    let image = <[usize; 3]>::try_from(image).map_err(|_| {
        shape_error(
            op,
            format!("the input must have 3 axes [batch, width, channels]; got shape {image:?}"),
        )
    })?;
    let kernel = <[usize; 3]>::try_from(kernel).map_err(|_| {
        shape_error(
            op,
            format!("kernel must have 3 axes [k, in_channels / groups, out_channels]; got shape {kernel:?}"),
        )
    })?;
    Ok((
        [image[0], 1, image[1], image[2]],
        [1, kernel[0], kernel[1], kernel[2]],
        options.as_2d(kernel[0]),
    ))
}

pub(crate) fn expect_f32_pair(op: &'static str, image: &Tensor, kernel: &Tensor) -> Result<()> {
    image.expect_same_session(op, kernel)?;
    image.expect_dtype(op, DType::F32)?;
    kernel.expect_dtype(op, DType::F32)
}

impl Tensor {
    /// The patches of this NHWC image under `windows` (im2col), `fill` off its edges, in `shape` (any shape
    /// of `[groups, positions, taps · group channels]`'s size).
    pub(crate) fn patches(
        &self,
        op: &'static str,
        windows: &Windows,
        fill: f32,
        shape: &[usize],
    ) -> Result<Tensor> {
        let out = self.output(op, shape, DType::F32)?;
        if !out.is_empty() {
            let (source, target) = (self.range()?, out.range()?);
            self.with_runtime(|runtime| {
                crate::kernels::window::patches(runtime, op, (source, target), windows, fill)
            })?;
        }
        // The convolutions and pools are made of the patches and ops that record themselves, so that their
        // gradients follow from these.
        Tensor::record(&[self], out, |nodes| Op::Patches {
            x: nodes[0],
            windows: *windows,
        })
    }

    /// The adjoint of [`Tensor::patches`]: this tensor (patches of `windows`, in any shape of their size)
    /// summed back onto the NHWC image they were read from.
    pub(crate) fn patches_adjoint(&self, op: &'static str, windows: &Windows) -> Result<Tensor> {
        let out = self.output(op, &windows.input_shape(), DType::F32)?;
        if self.is_empty() {
            out.fill_(0.0)?;
        } else if !out.is_empty() {
            let (source, target) = (self.range()?, out.range()?);
            self.with_runtime(|runtime| {
                crate::kernels::window::patches_adjoint(runtime, op, (source, target), windows)
            })?;
        }
        Tensor::record(&[self], out, |nodes| Op::PatchesAdjoint {
            x: nodes[0],
            windows: *windows,
        })
    }

    /// The 2-D convolution (TensorFlow's `conv2d`, a cross-correlation) of this NHWC image `[batch, height,
    /// width, in_channels]` with `kernel` `[kh, kw, in_channels / groups, out_channels]`: `[batch, out_h,
    /// out_w, out_channels]`. Depthwise where `groups == in_channels`.
    ///
    /// ```
    /// use wgcompute::{Conv2dOptions, Padding, Session, SessionOptions};
    /// # fn main() -> wgcompute::Result<()> {
    /// let session = Session::open(SessionOptions::default())?;
    /// let image = session.upload(&[1.0, 2.0, 3.0, 4.0], &[1, 2, 2, 1])?;
    /// let kernel = session.upload(&[1.0, 1.0, 1.0, 1.0], &[2, 2, 1, 1])?;
    /// let same = Conv2dOptions { padding: Padding::Same, ..Conv2dOptions::default() };
    /// // Same padding puts the odd row and column after: each output sums the 2×2 block from it.
    /// assert_eq!(image.conv2d(&kernel, &same)?.to_vec()?, vec![10.0, 6.0, 7.0, 4.0]);
    /// # Ok(()) }
    /// ```
    pub fn conv2d(&self, kernel: &Tensor, options: &Conv2dOptions) -> Result<Tensor> {
        const NAME: &str = "conv2d";
        expect_f32_pair(NAME, self, kernel)?;
        let plan = ConvPlan::new(NAME, self.shape(), kernel.shape(), options)?;
        let patches = self.patches(NAME, &plan.windows, 0.0, &plan.patches_shape())?;
        let product = if plan.windows.groups == 1 {
            patches.matmul(&kernel.view_as(&plan.kernel_matrix_shape())?)?
        } else {
            let grouped = kernel
                .view_as(&plan.kernel_matrix_shape())?
                .permute(&[1, 0, 2])?;
            patches.matmul(&grouped)?.permute(&[1, 0, 2])?
        };
        product.into_shape(&plan.output_shape())
    }

    /// The 1-D convolution of `[batch, width, in_channels]` with `kernel` `[k, in_channels / groups,
    /// out_channels]`: `[batch, out_width, out_channels]` (Keras's `Conv1D`, "causal" padding included).
    pub fn conv1d(&self, kernel: &Tensor, options: &Conv1dOptions) -> Result<Tensor> {
        const NAME: &str = "conv1d";
        expect_f32_pair(NAME, self, kernel)?;
        let (image, kernel_shape, options) =
            conv1d_as_2d(NAME, self.shape(), kernel.shape(), options)?;
        let out = self
            .view_as(&image)?
            .conv2d(&kernel.view_as(&kernel_shape)?, &options)?;
        let [batch, _, width, channels] = rank4(NAME, "the output", out.shape())?;
        out.into_shape(&[batch, width, channels])
    }

    /// The transposed convolution (TensorFlow's `conv2d_transpose`, the input gradient of a convolution) of
    /// this NHWC image `[batch, height, width, in_channels]` with `kernel` `[kh, kw, out_channels,
    /// in_channels]`: `[batch, out_h, out_w, out_channels]`, sized as Keras's `Conv2DTranspose` sizes it
    /// ("valid": `size · stride + max(reach − stride, 0)`, "same": `size · stride`).
    pub fn conv2d_transpose(&self, kernel: &Tensor, options: &Conv2dOptions) -> Result<Tensor> {
        const NAME: &str = "conv2d_transpose";
        expect_f32_pair(NAME, self, kernel)?;
        let windows = transposed_windows(NAME, self.shape(), kernel.shape(), options)?;
        let [kh, kw, out_channels, in_channels] = rank4(NAME, "kernel", kernel.shape())?;
        let rows = windows.positions();
        let columns = self.view_as(&[rows, in_channels])?.matmul_t(
            &kernel.view_as(&[kh * kw * out_channels, in_channels])?,
            Transpose::Right,
        )?;
        columns.patches_adjoint(NAME, &windows)
    }

    /// Max pooling over `size` windows `stride` apart (TensorFlow's `max_pool2d`): padding never wins, and a
    /// NaN in a window is its maximum.
    pub fn max_pool2d(
        &self,
        size: [usize; 2],
        stride: [usize; 2],
        padding: Padding,
    ) -> Result<Tensor> {
        const NAME: &str = "max_pool2d";
        self.expect_dtype(NAME, DType::F32)?;
        let windows = pool_windows(NAME, self.shape(), size, stride, padding)?;
        let [_, positions, _] = windows.patches_shape();
        let patches = self.patches(
            NAME,
            &windows,
            f32::NEG_INFINITY,
            &[positions, windows.taps(), windows.channels],
        )?;
        let [batch, _, _, channels] = windows.input_shape();
        let pooled = [batch, windows.output[0], windows.output[1], channels];
        if !patches.is_traced() {
            return patches.reduce(ReduceOp::Max, Some(1))?.into_shape(&pooled);
        }
        // Where traced, the maxima are taken at each window's first maximum, so that the gradient goes there.
        let picks =
            patches
                .share()
                .argmax(Some(1))?
                .into_shape(&[positions, 1, windows.channels])?;
        patches.take_along_axis(&picks, 1)?.into_shape(&pooled)
    }

    /// Average pooling over `size` windows `stride` apart: each output the mean of the image elements its
    /// window covers, padding not counted (Keras's `AveragePooling2D`).
    pub fn avg_pool2d(
        &self,
        size: [usize; 2],
        stride: [usize; 2],
        padding: Padding,
    ) -> Result<Tensor> {
        const NAME: &str = "avg_pool2d";
        self.expect_dtype(NAME, DType::F32)?;
        let windows = pool_windows(NAME, self.shape(), size, stride, padding)?;
        let [_, positions, _] = windows.patches_shape();
        let patches = self.patches(
            NAME,
            &windows,
            0.0,
            &[positions, windows.taps(), windows.channels],
        )?;
        let [batch, _, _, channels] = windows.input_shape();
        let sums = patches.reduce(ReduceOp::Sum, Some(1))?.into_shape(&[
            batch,
            windows.output[0],
            windows.output[1],
            channels,
        ])?;
        let counts = self.upload_beside(
            &pooled_counts(&windows),
            &[1, windows.output[0], windows.output[1], 1],
        )?;
        sums.div(&counts)
    }

    /// The mean over height and width of each image and channel: `[batch, channels]`.
    pub fn global_avg_pool2d(&self) -> Result<Tensor> {
        const NAME: &str = "global_avg_pool2d";
        self.expect_dtype(NAME, DType::F32)?;
        rank4(NAME, "the image", self.shape())?;
        self.reduce_axes(ReduceOp::Mean, Some(&[1, 2]), false)
    }
}
