//! The geometry of sliding windows over channels-last images (NHWC): where each output position of a
//! convolution or a pooling reads, by TensorFlow's and Keras's rules for padding, strides and dilations. Pure
//! arithmetic, no device.

use crate::error::{Error, Result};
use crate::op::window::{Conv2dOptions, Padding};

/// The geometry of one windowed pass over an NHWC input: where every window of every output position reads.
/// Output position `(oy, ox)` reads input row `oy·stride[0] − pads[0][0] + ky·dilation[0]` for tap `ky`
/// (columns alike); reads outside the input take the padding value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Windows {
    pub batch: usize,
    /// The input's [height, width].
    pub input: [usize; 2],
    pub channels: usize,
    /// The window's [height, width] in taps.
    pub window: [usize; 2],
    pub stride: [usize; 2],
    pub dilation: [usize; 2],
    /// [[top, bottom], [left, right]].
    pub pads: [[usize; 2]; 2],
    /// The output's [height, width].
    pub output: [usize; 2],
    /// Channel groups; the patches of group g read channels `g·channels/groups ..`.
    pub groups: usize,
}

fn window_error(op: &'static str, message: String) -> Error {
    Error::Shape { op, message }
}

/// Errors unless every entry of `values` is at least 1.
fn expect_positive(op: &'static str, what: &str, values: &[usize]) -> Result<()> {
    if values.contains(&0) {
        return Err(Error::InvalidArgument {
            what: op,
            given: format!("{what} {values:?}"),
            expected: format!("a {what} of at least 1 on every axis"),
        });
    }
    Ok(())
}

impl Windows {
    /// The windows of `window` taps over an NHWC input `[batch, height, width, channels]`.
    pub fn new(
        op: &'static str,
        input: [usize; 4],
        window: [usize; 2],
        options: &Conv2dOptions,
    ) -> Result<Windows> {
        expect_positive(op, "window", &window)?;
        expect_positive(op, "stride", &options.stride)?;
        expect_positive(op, "dilation", &options.dilation)?;
        expect_positive(op, "groups", &[options.groups])?;
        let [batch, height, width, channels] = input;
        if channels % options.groups != 0 {
            return Err(window_error(
                op,
                format!(
                    "{channels} input channels do not split into {} groups",
                    options.groups
                ),
            ));
        }
        let mut pads = [[0; 2]; 2];
        let mut output = [0; 2];
        for axis in 0..2 {
            let size = [height, width][axis];
            let (stride, dilation) = (options.stride[axis], options.dilation[axis]);
            let reach = (window[axis] - 1)
                .checked_mul(dilation)
                .and_then(|span| span.checked_add(1))
                .ok_or_else(|| window_error(op, "the dilated window overflows".to_string()))?;
            pads[axis] = match options.padding {
                Padding::Valid => [0, 0],
                Padding::Same => {
                    let out = size.div_ceil(stride);
                    let total = ((out.max(1) - 1).saturating_mul(stride))
                        .saturating_add(reach)
                        .saturating_sub(size);
                    [total / 2, total - total / 2]
                }
                Padding::Explicit(sides) => sides[axis],
            };
            let padded = size
                .checked_add(pads[axis][0])
                .and_then(|padded| padded.checked_add(pads[axis][1]))
                .ok_or_else(|| window_error(op, "the padded input overflows".to_string()))?;
            output[axis] = if size == 0 && options.padding == Padding::Same {
                0
            } else if padded < reach {
                let side = ["height", "width"][axis];
                return Err(window_error(
                    op,
                    format!(
                        "a window reaching {reach} along the {side} does not fit the input's {size} \
                         (padded to {padded})"
                    ),
                ));
            } else {
                (padded - reach) / stride + 1
            };
        }
        Ok(Windows {
            batch,
            input: [height, width],
            channels,
            window,
            stride: options.stride,
            dilation: options.dilation,
            pads,
            output,
            groups: options.groups,
        })
    }

    /// The windows of the convolution whose input gradient a transposed convolution computes: a transposed
    /// convolution maps `[batch, height, width, _]` to the input size returned here (Keras's
    /// `deconv_output_length` without output padding), `channels` channels.
    pub fn transposed(
        op: &'static str,
        input: [usize; 4],
        window: [usize; 2],
        options: &Conv2dOptions,
    ) -> Result<Windows> {
        expect_positive(op, "window", &window)?;
        expect_positive(op, "stride", &options.stride)?;
        expect_positive(op, "dilation", &options.dilation)?;
        let [batch, height, width, channels] = input;
        let mut size = [0; 2];
        for axis in 0..2 {
            let length = [height, width][axis];
            let stride = options.stride[axis];
            let reach = (window[axis] - 1) * options.dilation[axis] + 1;
            size[axis] = match options.padding {
                Padding::Valid => length * stride + reach.saturating_sub(stride),
                Padding::Same => length * stride,
                Padding::Explicit(sides) => {
                    let full = (length.max(1) - 1) * stride + reach;
                    full.checked_sub(sides[axis][0] + sides[axis][1])
                        .filter(|_| length > 0)
                        .ok_or_else(|| {
                            window_error(
                                op,
                                format!(
                                    "padding {:?} removes more than the {full} outputs along axis {}",
                                    sides[axis],
                                    axis + 1
                                ),
                            )
                        })?
                }
            };
        }
        let windows = Windows::new(op, [batch, size[0], size[1], channels], window, options)?;
        if windows.output != [height, width] {
            return Err(window_error(
                op,
                format!(
                    "no input size gives a {height}×{width} output with these strides and padding"
                ),
            ));
        }
        Ok(windows)
    }

    /// Taps per window.
    pub fn taps(&self) -> usize {
        self.window[0] * self.window[1]
    }

    /// Output positions: batch × output height × output width.
    pub fn positions(&self) -> usize {
        self.batch * self.output[0] * self.output[1]
    }

    /// Channels per group.
    pub fn group_channels(&self) -> usize {
        self.channels / self.groups
    }

    /// The shape of the patches: `[groups, positions, taps · group channels]`.
    pub fn patches_shape(&self) -> [usize; 3] {
        [
            self.groups,
            self.positions(),
            self.taps() * self.group_channels(),
        ]
    }

    /// The input's NHWC shape.
    pub fn input_shape(&self) -> [usize; 4] {
        [self.batch, self.input[0], self.input[1], self.channels]
    }

    /// How many taps of window `(oy, ox)` land inside the input (not on padding).
    pub fn inside(&self, oy: usize, ox: usize) -> usize {
        let along = |axis: usize, o: usize| {
            (0..self.window[axis])
                .filter(|&k| {
                    let at = (o * self.stride[axis] + k * self.dilation[axis]) as i64
                        - self.pads[axis][0] as i64;
                    (0..self.input[axis] as i64).contains(&at)
                })
                .count()
        };
        along(0, oy) * along(1, ox)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::window::{Conv1dOptions, Padding1d};

    fn options(stride: usize, padding: Padding, dilation: usize) -> Conv2dOptions {
        Conv2dOptions {
            stride: [stride, stride],
            padding,
            dilation: [dilation, dilation],
            groups: 1,
        }
    }

    #[test]
    fn same_padding_gives_ceil_of_size_over_stride_with_the_odd_pad_after() {
        // TensorFlow: in 7, k 4, s 2 → out 4, pad total (4-1)·2+4-7 = 3: 1 before, 2 after.
        let w = Windows::new("t", [1, 7, 7, 1], [4, 4], &options(2, Padding::Same, 1)).unwrap();
        assert_eq!(w.output, [4, 4]);
        assert_eq!(w.pads, [[1, 2], [1, 2]]);
        // Dilation widens the reach: k 3, d 2 → reach 5; in 5, s 1 → pad 4, 2 each side.
        let w = Windows::new("t", [1, 5, 5, 1], [3, 3], &options(1, Padding::Same, 2)).unwrap();
        assert_eq!((w.output, w.pads), ([5, 5], [[2, 2], [2, 2]]));
    }

    #[test]
    fn valid_and_explicit_padding_floor_the_last_partial_window() {
        let w = Windows::new("t", [2, 8, 9, 3], [3, 2], &options(2, Padding::Valid, 1)).unwrap();
        assert_eq!(w.output, [3, 4]);
        let pads = Padding::Explicit([[1, 0], [2, 3]]);
        let w = Windows::new("t", [1, 5, 5, 1], [3, 3], &options(1, pads, 1)).unwrap();
        assert_eq!(w.output, [4, 8]);
    }

    #[test]
    fn a_window_larger_than_the_padded_input_and_zero_sizes_are_errors() {
        let too_big = Windows::new("t", [1, 2, 2, 1], [3, 3], &options(1, Padding::Valid, 1));
        assert!(matches!(too_big, Err(Error::Shape { .. })));
        let zero_stride = Windows::new("t", [1, 4, 4, 1], [1, 1], &options(0, Padding::Valid, 1));
        assert!(matches!(zero_stride, Err(Error::InvalidArgument { .. })));
        let groups = Conv2dOptions {
            groups: 2,
            ..Conv2dOptions::default()
        };
        let odd = Windows::new("t", [1, 4, 4, 3], [1, 1], &groups);
        assert!(matches!(odd, Err(Error::Shape { .. })));
    }

    #[test]
    fn transposed_windows_map_back_to_the_transposes_input() {
        for (size, k, s, d) in [(3, 3, 2, 1), (4, 1, 3, 1), (5, 2, 2, 2), (1, 4, 1, 1)] {
            for padding in [Padding::Valid, Padding::Same] {
                let o = options(s, padding, d);
                let w = Windows::transposed("t", [2, size, size + 1, 3], [k, k], &o).unwrap();
                assert_eq!(w.output, [size, size + 1], "{size} {k} {s} {d} {padding:?}");
                let reach = (k - 1) * d + 1;
                let expected = match padding {
                    Padding::Valid => size * s + reach.saturating_sub(s),
                    _ => size * s,
                };
                assert_eq!(w.input[0], expected);
            }
        }
    }

    #[test]
    fn inside_counts_taps_off_the_padding() {
        let w = Windows::new("t", [1, 3, 3, 1], [3, 3], &options(1, Padding::Same, 1)).unwrap();
        assert_eq!(w.inside(0, 0), 4);
        assert_eq!(w.inside(1, 1), 9);
        assert_eq!(w.inside(2, 1), 6);
    }

    #[test]
    fn conv1d_causal_pads_all_before() {
        let o = Conv1dOptions {
            padding: Padding1d::Causal,
            dilation: 2,
            ..Conv1dOptions::default()
        };
        assert_eq!(o.as_2d(3).padding, Padding::Explicit([[0, 0], [4, 0]]));
    }
}
