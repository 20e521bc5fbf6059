//! What a softmax row may be.

/// Longest row: each of a row's 256 threads loops over cols / 256 elements, and llvmpipe ends any loop after
/// 65,535 iterations.
pub(crate) const MAX_COLS: usize = 256 * 65_535;
