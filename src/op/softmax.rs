//! What a softmax row may be.

/// Longest row. A row this long gets one workgroup of 256 threads, each looping over cols / 256 of its elements
/// up to four times (max, sum, output, and the argmax an accuracy count adds), and llvmpipe gives an invocation
/// 65,535 loop iterations over all its loops: 4 × 16,000 of them leave room for the reductions' trees.
pub(crate) const MAX_COLS: usize = 256 * 16_000;
