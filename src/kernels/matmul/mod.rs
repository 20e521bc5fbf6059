//! Matrix products (shaders/matmul.wgsl): `C = op(A)·op(B)` with transpose flags and an optional leading batch
//! dimension, at any size. GPUs take a shared-memory tiled kernel. CPU adapters (llvmpipe) take register
//! tiles: row-major operands whose sizes are multiples of 4 take a vec4 kernel (one for Aᵀ·B too), anything
//! else the strided kernel. Where the device has subgroup operations (lavapipe's Vulkan adapter does), the
//! default vec4 tiles load A once per subgroup and broadcast it (a module of their own, `matmul_subgroup`);
//! short products (up to 32 rows) take tiles that hold all their rows, so that B is read once. A short product
//! over a long K may also be split along K (`split_k_*`): its slices as the batches of one dispatch, then summed.

mod codegen;
mod plan;
#[cfg(test)]
mod tests;
mod tiles;

use bytemuck::{Pod, Zeroable};

use super::plan::Limits;
use crate::error::{Error, Result};
use crate::runtime::{size_bucket, BufferRange, MatmulKernel, Runtime};

use super::{reduce, Scratch};
use crate::op::reduce::{ReduceOp, Reduction};
use crate::shape::Lanes;
use plan::{
    candidates, plan, shared_tiles, split_k, split_k_for, vec4_layout, wide_tiles, Plan,
    VEC4_SHARED_TILES, WIDE_TILES,
};
pub(crate) use plan::{grid, FAMILY, STRIDED, VARIANTS, VEC4_8X8, VEC4_AT, VEC4_BT};
use tiles::SUBGROUP_LANES;
// What `reflected_layout!` lists, for the test that holds every kernel's bindings and parameters to `Params`.
#[cfg(test)]
use crate::runtime::Kernel;
#[cfg(test)]
use plan::{
    MATMUL_STRIDED, MATMUL_VEC4, MATMUL_VEC4_AT, MATMUL_VEC4_BT, REGISTER_TILES,
    SHARED_TILE_SHAPES, SUBGROUP_AT_TILES, SUBGROUP_WIDE_TILES, TRANSPOSED_LEFT_TILES,
};

#[repr(C)]
#[derive(Clone, Copy, Default, Pod, Zeroable)]
struct Params {
    m: u32,
    n: u32,
    k: u32,
    wg_rows: u32,
    a_batch: u32,
    a_row: u32,
    a_col: u32,
    b_batch: u32,
    b_row: u32,
    b_col: u32,
    c_batch: u32,
    k_begin: u32,
    k_end: u32,
    accumulate: u32,
    /// The first row of workgroups a dispatch covers: a product taller than the adapter allows in one grid
    /// runs in turns.
    group_row_offset: u32,
    /// Batches split as (z / batch_inner, z % batch_inner): an operand broadcast along one of two groups of
    /// batch axes steps `*_batch` per inner batch and `*_outer` per outer one.
    batch_inner: u32,
    a_outer: u32,
    b_outer: u32,
    _pad0: u32,
    _pad1: u32,
}

/// K per pass: llvmpipe gives an invocation 65,535 loop iterations over all its loops, inner ones included
/// (see PASS_ITERATIONS in plan.rs); a pass of this many stays far below that on every path (a multiple of 4
/// for the vec4 kernel).
const K_PER_PASS: usize = 4096;

/// The K ranges of a product's passes, each pass after the first adding to C.
fn passes(k: usize) -> Vec<(usize, usize)> {
    (0..k)
        .step_by(K_PER_PASS)
        .map(|begin| (begin, (begin + K_PER_PASS).min(k)))
        .collect()
}

/// How an operand's elements are laid out: element strides between batches (inner and outer, see
/// [`Batches`]), rows and columns of the matrix the product reads (after any transpose).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Layout {
    pub batch_stride: usize,
    pub outer_stride: usize,
    pub row_stride: usize,
    pub col_stride: usize,
}

/// A product's batches: `count` of them, seen as [count / inner, inner] so that each operand can step through
/// its own batches with a stride per group ([`Layout`]), 0 where it is broadcast.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Batches {
    pub count: usize,
    pub inner: usize,
}

impl Layout {
    /// Row-major storage of [rows, cols] (per batch when `batched`), read transposed or not.
    pub fn of(rows: usize, cols: usize, batched: bool, transpose: bool) -> Layout {
        let batch_stride = if batched { rows * cols } else { 0 };
        if transpose {
            Layout {
                batch_stride,
                outer_stride: 0,
                row_stride: 1,
                col_stride: cols,
            }
        } else {
            Layout {
                batch_stride,
                outer_stride: 0,
                row_stride: cols,
                col_stride: 1,
            }
        }
    }

    fn is_row_major(&self) -> bool {
        self.col_stride == 1
    }
}

/// Multiply-adds a timing run may take at most: a large product is timed on its first rows only, so that tuning
/// stays short even on a CPU adapter.
const TIMING_MULTIPLY_ADDS: usize = 1 << 27;

/// C[batch, m, n] = A[batch, m, k] · B[batch, k, n], for k ≥ 1 and a non-empty C; C is row-major.
pub(crate) fn matmul(
    runtime: &mut Runtime,
    a: (BufferRange, Layout),
    b: (BufferRange, Layout),
    c: BufferRange,
    batches: usize,
    sizes: (usize, usize, usize),
) -> Result<()> {
    let batches = Batches {
        count: batches,
        inner: batches.max(1),
    };
    matmul_batched(runtime, a, b, c, batches, sizes)
}

/// [`matmul`] over batches in two groups, each operand stepping through them as its layout says: the batch
/// axes of a broadcast product, `[b1, 1] · [1, b2]` say, read in place.
pub(crate) fn matmul_batched(
    runtime: &mut Runtime,
    (a, a_layout): (BufferRange, Layout),
    (b, b_layout): (BufferRange, Layout),
    c: BufferRange,
    batches: Batches,
    (m, k, n): (usize, usize, usize),
) -> Result<()> {
    const NAME: &str = "matmul";
    let Batches {
        count: batches,
        inner: batch_inner,
    } = batches;
    let params = Params {
        m: m as u32,
        n: n as u32,
        k: k as u32,
        wg_rows: 1,
        a_batch: a_layout.batch_stride as u32,
        a_row: a_layout.row_stride as u32,
        a_col: a_layout.col_stride as u32,
        b_batch: b_layout.batch_stride as u32,
        b_row: b_layout.row_stride as u32,
        b_col: b_layout.col_stride as u32,
        c_batch: (m * n) as u32,
        batch_inner: batch_inner.max(1) as u32,
        a_outer: a_layout.outer_stride as u32,
        b_outer: b_layout.outer_stride as u32,
        ..Params::default()
    };
    let limits = Limits::of(runtime.limits());
    for range in [a, b, c] {
        limits.expect_bindable(NAME, range)?;
    }
    let max_groups = limits.max_workgroups_per_dimension as usize;
    if batches > max_groups {
        return Err(Error::Shape {
            op: "matmul",
            message: format!(
                "a batch of {batches} is over this adapter's {max_groups} workgroups per dimension"
            ),
        });
    }
    let cpu = runtime.adapter().get_info().device_type == wgpu::DeviceType::Cpu;
    // Subgroups of at least `SUBGROUP_LANES` lanes: every lane past them still takes part, so any larger size
    // works too.
    let subgroups =
        runtime.has_subgroups() && runtime.adapter().get_info().subgroup_min_size >= SUBGROUP_LANES;
    let mut eligible = candidates(
        runtime.matmul_kernel(),
        (cpu, subgroups),
        (a_layout, b_layout),
        (m, k, n),
    );
    // A CPU adapter times only the hand-written shared tile (the others lose there too, and would only make
    // tuning slower); a forced one still runs, so that every variant can be checked on every adapter.
    if runtime.matmul_kernel() != MatmulKernel::Registers {
        let forced: Vec<&'static str> = runtime
            .forced_variants(FAMILY)
            .filter_map(|forced| shared_tiles().find(|&variant| variant == forced))
            .collect();
        for variant in forced {
            if !eligible.contains(&variant) {
                eligible.push(variant);
            }
        }
    }
    // A forced short-and-wide tile runs at any M its layout allows (by default they are offered for short
    // products only), and a forced vec4 shared tile on CPU adapters too, so that every one can be checked at
    // every size.
    if vec4_layout((a_layout, b_layout), (k, n)) {
        let forced: Vec<&'static str> = runtime
            .forced_variants(FAMILY)
            .filter_map(|forced| {
                WIDE_TILES
                    .iter()
                    .chain(wide_tiles(subgroups))
                    .map(|tile| tile.variant)
                    .chain(VEC4_SHARED_TILES.iter().map(|tile| tile.variant))
                    .find(|&variant| variant == forced)
            })
            .collect();
        for variant in forced {
            if !eligible.contains(&variant) {
                eligible.push(variant);
            }
        }
    }
    // A grid past the adapter's workgroups per dimension would not run. Along M the rows of workgroups are
    // dispatched in turns; along N a variant whose tiles are too narrow drops out, and a product that no
    // variant covers is a shape error.
    eligible.retain(|&variant| plan(variant, batches, (m, n)).groups[0] as usize <= max_groups);
    if eligible.is_empty() {
        return Err(Error::Shape {
            op: "matmul",
            message: format!(
                "a product {n} columns wide needs more than this adapter's {max_groups} workgroups per \
                 dimension"
            ),
        });
    }
    // The split-K variants, for a short product over a long K: first on a GPU, which the unsplit kernels leave
    // mostly idle there; after the others on a CPU adapter, whose few cores the unsplit ones fill.
    let splits: Vec<&'static str> = split_k_for(batches, (m, k, n), max_groups).collect();
    if !splits.is_empty() {
        if cpu {
            eligible.extend(splits);
        } else {
            eligible.splice(0..0, splits);
        }
    }
    // The kernel a split product runs its slices with: the first unsplit variant.
    let unsplit = eligible
        .iter()
        .copied()
        .find(|&variant| split_k(variant).is_none())
        .unwrap_or(STRIDED);
    let product = Product {
        params,
        batches,
        k,
        n,
        max_groups,
        a: (a, a_layout),
        b: (b, b_layout),
        c,
    };
    // `rows` of C, the first ones (timing runs take fewer).
    let record = |runtime: &mut Runtime, variant: &str, rows: usize| match split_k(variant) {
        Some(split) => product.record_split(runtime, split, unsplit, rows),
        None => product.record(runtime, variant, rows),
    };
    let timed_rows = m.min((TIMING_MULTIPLY_ADDS / (k * n * batches).max(1)).max(64));
    let path = if eligible.contains(&VEC4_8X8) {
        "row-major"
    } else if eligible.contains(&VEC4_AT) {
        "at-b"
    } else if eligible.contains(&VEC4_BT) {
        "a-bt"
    } else {
        "strided"
    };
    let class = format!(
        "{path} m<={} k<={} n<={}",
        size_bucket(m),
        size_bucket(k),
        size_bucket(n)
    );
    let variant = runtime.choose_variant(FAMILY, class, &eligible, |runtime, variant| {
        record(runtime, variant, timed_rows)
    });
    record(runtime, variant, m)
}

/// One product's operands, sizes and parameters, as [`matmul_batched`] records it.
struct Product {
    params: Params,
    batches: usize,
    k: usize,
    n: usize,
    max_groups: usize,
    a: (BufferRange, Layout),
    b: (BufferRange, Layout),
    c: BufferRange,
}

impl Product {
    /// Records the first `rows` of C with `variant`'s kernel: K in passes, rows of workgroups in turns.
    fn record(&self, runtime: &mut Runtime, variant: &str, rows: usize) -> Result<()> {
        let plan = plan(variant, self.batches, (rows, self.n));
        let params = Params {
            m: rows as u32,
            wg_rows: plan.wg_rows,
            ..self.params
        };
        for (begin, end) in passes(self.k) {
            let pass = Params {
                k_begin: begin as u32,
                k_end: end as u32,
                accumulate: u32::from(begin > 0),
                ..params
            };
            self.dispatch(runtime, &plan, pass, self.c)?;
        }
        Ok(())
    }

    /// One dispatch of `plan` into `c`, its rows of workgroups in turns of the adapter's limit.
    fn dispatch(
        &self,
        runtime: &mut Runtime,
        plan: &Plan,
        params: Params,
        c: BufferRange,
    ) -> Result<()> {
        let [x, rows_of_groups, z] = plan.groups;
        for first in (0..rows_of_groups).step_by(self.max_groups) {
            let turn = Params {
                group_row_offset: first,
                ..params
            };
            let groups = [x, (rows_of_groups - first).min(self.max_groups as u32), z];
            runtime.dispatch(
                plan.kernel,
                bytemuck::bytes_of(&turn),
                &[self.a.0, self.b.0, c],
                groups,
            )?;
        }
        Ok(())
    }

    /// Records the first `rows` of C split along K (see [`plan::SplitK`]): the whole slices as one batched
    /// dispatch of `unsplit`'s kernel, slice s into partial s; the last part-slice added onto partial 0; then
    /// the partials summed in order into C. Where the pool has no room for the partials, the product runs
    /// unsplit instead.
    fn record_split(
        &self,
        runtime: &mut Runtime,
        split: plan::SplitK,
        unsplit: &'static str,
        rows: usize,
    ) -> Result<()> {
        let (k, n) = (self.k, self.n);
        let slices = k / split.slice;
        let partial = rows * n;
        let mut scratch = Scratch::default();
        let partials = match scratch.take(runtime, (slices * partial) as u64) {
            Ok(range) => range,
            Err(Error::OutOfMemory { .. }) => {
                scratch.release(runtime);
                return self.record(runtime, unsplit, rows);
            }
            Err(error) => {
                scratch.release(runtime);
                return Err(error);
            }
        };
        let outcome = (|| {
            let whole = plan(unsplit, slices, (rows, n));
            let (a_layout, b_layout) = (self.a.1, self.b.1);
            let sliced = Params {
                m: rows as u32,
                wg_rows: whole.wg_rows,
                // Slice s reads A's columns and B's rows from s·slice, and writes partial s.
                a_batch: (split.slice * a_layout.col_stride) as u32,
                b_batch: (split.slice * b_layout.row_stride) as u32,
                c_batch: partial as u32,
                batch_inner: slices as u32,
                a_outer: 0,
                b_outer: 0,
                k_begin: 0,
                k_end: split.slice as u32,
                accumulate: 0,
                ..self.params
            };
            self.dispatch(runtime, &whole, sliced, partials)?;
            let done = slices * split.slice;
            if done < k {
                let rest = plan(unsplit, 1, (rows, n));
                let rest_params = Params {
                    wg_rows: rest.wg_rows,
                    k_begin: done as u32,
                    k_end: k as u32,
                    accumulate: 1,
                    ..sliced
                };
                self.dispatch(runtime, &rest, rest_params, partials)?;
            }
            reduce::reduce(
                runtime,
                "matmul",
                Reduction::Value(ReduceOp::Sum),
                partials,
                Lanes {
                    outer: 1,
                    len: slices as u64,
                    inner: partial as u64,
                },
                1.0,
                self.c,
            )
        })();
        scratch.release(runtime);
        outcome
    }
}

reflected_layout!(
    kernels: [
        MATMUL_VEC4, MATMUL_VEC4_AT, MATMUL_VEC4_BT, MATMUL_STRIDED, REGISTER_TILES[0].kernel,
        REGISTER_TILES[1].kernel, REGISTER_TILES[2].kernel, REGISTER_TILES[3].kernel,
        REGISTER_TILES[4].kernel, WIDE_TILES[0].kernel, WIDE_TILES[1].kernel, WIDE_TILES[2].kernel, WIDE_TILES[3].kernel, WIDE_TILES[4].kernel, WIDE_TILES[5].kernel, SUBGROUP_WIDE_TILES[0].kernel, SUBGROUP_WIDE_TILES[1].kernel, SUBGROUP_WIDE_TILES[2].kernel, SUBGROUP_WIDE_TILES[3].kernel, SUBGROUP_WIDE_TILES[4].kernel, SUBGROUP_WIDE_TILES[5].kernel, TRANSPOSED_LEFT_TILES[0].kernel, TRANSPOSED_LEFT_TILES[1].kernel,
        TRANSPOSED_LEFT_TILES[2].kernel, SUBGROUP_AT_TILES[0].kernel, SUBGROUP_AT_TILES[1].kernel,
        SHARED_TILE_SHAPES[0].kernel, SHARED_TILE_SHAPES[1].kernel, SHARED_TILE_SHAPES[2].kernel,
        SHARED_TILE_SHAPES[3].kernel, SHARED_TILE_SHAPES[4].kernel, VEC4_SHARED_TILES[0].kernel,
        VEC4_SHARED_TILES[1].kernel, VEC4_SHARED_TILES[2].kernel
    ],
    params: {
        m, n, k, wg_rows, a_batch, a_row, a_col, b_batch, b_row, b_col, c_batch, k_begin, k_end,
        accumulate, group_row_offset, batch_inner, a_outer, b_outer
    }
);
