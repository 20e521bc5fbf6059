//! The options of convolutions and pooling over channels-last images (NHWC): padding, strides, dilations and
//! groups, as TensorFlow and Keras name them. The windows they give are `shape::window`'s.

/// How far a windowed op pads its input.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Padding {
    /// No padding: only windows wholly inside the input.
    #[default]
    Valid,
    /// TensorFlow's "same": `ceil(size / stride)` outputs per axis, the padding split with the odd element after.
    Same,
    /// `[[top, bottom], [left, right]]` elements of padding.
    Explicit([[usize; 2]; 2]),
}

impl Padding {
    /// From Keras's spelling, "valid" or "same".
    pub fn from_name(name: &str) -> Option<Padding> {
        match name {
            "valid" => Some(Padding::Valid),
            "same" => Some(Padding::Same),
            _ => None,
        }
    }
}

/// The options of a 2-D convolution (and of its transpose, which takes one group only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv2dOptions {
    /// [vertical, horizontal] steps between windows.
    pub stride: [usize; 2],
    pub padding: Padding,
    /// [vertical, horizontal] steps between a window's taps (1: adjacent).
    pub dilation: [usize; 2],
    /// Channel groups: input and output channels split into `groups` independent convolutions
    /// (`groups == in_channels`: depthwise).
    pub groups: usize,
}

impl Default for Conv2dOptions {
    fn default() -> Self {
        Conv2dOptions {
            stride: [1, 1],
            padding: Padding::Valid,
            dilation: [1, 1],
            groups: 1,
        }
    }
}

/// The padding of a 1-D convolution.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Padding1d {
    #[default]
    Valid,
    Same,
    /// Keras's "causal": all padding before, so output `t` sees inputs up to `t` only.
    Causal,
    /// `[before, after]` elements of padding.
    Explicit([usize; 2]),
}

impl Padding1d {
    /// From Keras's spelling, "valid", "same" or "causal".
    pub fn from_name(name: &str) -> Option<Padding1d> {
        match name {
            "valid" => Some(Padding1d::Valid),
            "same" => Some(Padding1d::Same),
            "causal" => Some(Padding1d::Causal),
            _ => None,
        }
    }
}

/// The options of a 1-D convolution over [batch, width, channels].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv1dOptions {
    pub stride: usize,
    pub padding: Padding1d,
    pub dilation: usize,
    pub groups: usize,
}

impl Default for Conv1dOptions {
    fn default() -> Self {
        Conv1dOptions {
            stride: 1,
            padding: Padding1d::Valid,
            dilation: 1,
            groups: 1,
        }
    }
}

impl Conv1dOptions {
    /// The same convolution over a [batch, 1, width, channels] image.
    pub fn as_2d(&self, window: usize) -> Conv2dOptions {
        let reach = (window.max(1) - 1) * self.dilation.max(1);
        let padding = match self.padding {
            Padding1d::Valid => Padding::Valid,
            Padding1d::Same => Padding::Same,
            Padding1d::Causal => Padding::Explicit([[0, 0], [reach, 0]]),
            Padding1d::Explicit(sides) => Padding::Explicit([[0, 0], sides]),
        };
        Conv2dOptions {
            stride: [1, self.stride],
            padding,
            dilation: [1, self.dilation],
            groups: self.groups,
        }
    }
}
