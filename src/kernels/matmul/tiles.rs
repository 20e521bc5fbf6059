//! The shapes of the generated matmul kernels, as both the plan (which kernel a product takes) and the WGSL
//! generation read them.

use crate::runtime::Kernel;

/// A register-tiled vec4 kernel generated from Rust: each invocation keeps `rows` × `vec4s`·4 of C in
/// registers. Every tile shape (and the hand-written 8×8 `matmul_vec4`) adds up each element of C over K in the
/// same order.
pub(super) struct RegisterTile {
    pub(super) variant: &'static str,
    pub(super) rows: u32,
    pub(super) vec4s: u32,
    /// All invocations of a workgroup share their rows (of A and C) and spread along N: A's addresses then
    /// depend on the workgroup alone, which a compiler can load once for many invocations (llvmpipe does), so
    /// tall tiles pay off: each invocation's loads of B (its own addresses) feed `rows` multiply-adds each.
    pub(super) shared_rows: bool,
    /// Invocations per workgroup (along N where rows are shared).
    pub(super) invocations: u32,
    pub(super) kernel: Kernel,
}

/// A shared-memory tile for GPUs, generated from Rust: a workgroup of `threads_x`·`threads_y` invocations
/// computes `block_rows` × `block_cols` of C, staging `block_rows` × `depth` of A and `depth` × `block_cols` of
/// B in workgroup memory per step along K. Any strides (so any transpose) and any sizes: out-of-range elements
/// load as 0 and are not stored. GPUs differ in which shape fills them best (registers per invocation,
/// workgroup memory, occupancy), so the tuner measures them. Each element of C adds its products over K in
/// the same order in every shape.
pub(super) struct SharedTile {
    pub(super) variant: &'static str,
    pub(super) block_rows: u32,
    pub(super) block_cols: u32,
    pub(super) depth: u32,
    pub(super) threads_x: u32,
    pub(super) threads_y: u32,
    pub(super) kernel: Kernel,
}

impl SharedTile {
    /// Rows and columns of C per invocation.
    pub(super) fn per_invocation(&self) -> (u32, u32) {
        (
            self.block_rows / self.threads_y,
            self.block_cols / self.threads_x,
        )
    }
}

/// A shared-memory tile for GPUs over row-major operands whose K and N are multiples of 4, in the register-
/// blocked recipe of fast SGEMM kernels: a workgroup of `threads_x`·`threads_y` invocations computes
/// `block_rows` × `block_cols` of C, `VEC4_TILE_DEPTH` deep along K per step; A and B are read from memory as
/// vec4s (neighbouring invocations, neighbouring vec4s), A is staged transposed so that each invocation reads
/// its rows of a step as vec4s too, and the next step's operands are loaded into registers while this step's
/// are multiplied (one buffer of workgroup memory, two barriers a step). An invocation keeps
/// (`block_rows` / `threads_y`) × (`block_cols` / `threads_x`) of C: its rows in groups of 4 spaced
/// 4·`threads_y` apart and its columns in vec4s spaced `threads_x` vec4s apart, so that a subgroup's reads of
/// workgroup memory are contiguous. Each element of C adds its products over K in order, as the other tiles do.
pub(super) struct Vec4SharedTile {
    pub(super) variant: &'static str,
    pub(super) block_rows: u32,
    pub(super) block_cols: u32,
    pub(super) threads_x: u32,
    pub(super) threads_y: u32,
    pub(super) kernel: Kernel,
}

/// K per step of a [`Vec4SharedTile`]: 4 vec4s of each row of A.
pub(super) const VEC4_TILE_DEPTH: u32 = 16;

/// The lanes a subgroup needs at least for `SUBGROUP_WIDE_TILES`: each of A's rows is loaded by one of the
/// first `SUBGROUP_LANES` lanes and broadcast from there.
pub(super) const SUBGROUP_LANES: u32 = 8;

/// Rows (and columns) of C per invocation of `matmul_vec4_bt`, and invocations per workgroup along each.
pub(super) const BT_TILE: usize = 4;
pub(super) const BT_INVOCATIONS: usize = 8;
