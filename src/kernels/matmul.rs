//! Matrix products (shaders/matmul.wgsl): `C = op(A)·op(B)` with transpose flags and an optional leading batch
//! dimension, at any size. GPUs take a shared-memory tiled kernel. CPU adapters (llvmpipe) take register
//! tiles: row-major operands whose sizes are multiples of 4 take a vec4 kernel (one for Aᵀ·B too), anything
//! else the strided kernel.

use bytemuck::{Pod, Zeroable};

use crate::error::{Error, Result};
use crate::runtime::{nothing_generated, BufferRange, Kernel, MatmulKernel, Runtime, Shader};

static MATMUL: Shader = Shader {
    name: "matmul",
    source: include_str!("../../shaders/matmul.wgsl"),
    generated: nothing_generated,
};

static MATMUL_VEC4: Kernel = Kernel {
    shader: &MATMUL,
    entry: "matmul_vec4",
    bindings: &[1, 2, 3],
};
static MATMUL_VEC4_AT: Kernel = Kernel {
    shader: &MATMUL,
    entry: "matmul_vec4_at",
    bindings: &[1, 2, 3],
};
static MATMUL_TILED: Kernel = Kernel {
    shader: &MATMUL,
    entry: "matmul_tiled",
    bindings: &[1, 2, 3],
};
static MATMUL_STRIDED: Kernel = Kernel {
    shader: &MATMUL,
    entry: "matmul_strided",
    bindings: &[1, 2, 3],
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
    _pad: [u32; 2],
}

/// K per pass: llvmpipe ends any shader loop after 65,535 iterations, inner loops included; a pass of this
/// many stays far below that on every path (a multiple of 4 for the vec4 kernel).
const K_PER_PASS: usize = 4096;

/// Dispatches `kernel` once per slice of K, each pass after the first adding to C.
fn in_passes(
    runtime: &mut Runtime,
    kernel: &'static Kernel,
    params: Params,
    k: usize,
    ranges: &[BufferRange],
    groups: [u32; 3],
) -> Result<()> {
    for begin in (0..k).step_by(K_PER_PASS) {
        let pass = Params {
            k_begin: begin as u32,
            k_end: (begin + K_PER_PASS).min(k) as u32,
            accumulate: u32::from(begin > 0),
            ..params
        };
        runtime.dispatch(kernel, bytemuck::bytes_of(&pass), ranges, groups)?;
    }
    Ok(())
}

/// How an operand's elements are laid out: element strides between batches, rows and columns of the matrix
/// the product reads (after any transpose).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Layout {
    pub batch_stride: usize,
    pub row_stride: usize,
    pub col_stride: usize,
}

impl Layout {
    /// Row-major storage of [rows, cols] (per batch when `batched`), read transposed or not.
    pub fn of(rows: usize, cols: usize, batched: bool, transpose: bool) -> Layout {
        let batch_stride = if batched { rows * cols } else { 0 };
        if transpose {
            Layout {
                batch_stride,
                row_stride: 1,
                col_stride: cols,
            }
        } else {
            Layout {
                batch_stride,
                row_stride: cols,
                col_stride: 1,
            }
        }
    }

    fn is_row_major(&self) -> bool {
        self.col_stride == 1
    }
}

/// C[batch, m, n] = A[batch, m, k] · B[batch, k, n], for k ≥ 1 and a non-empty C; C is row-major.
#[allow(clippy::too_many_arguments)] // a product is fully described by these; a struct would only rename them
pub(crate) fn matmul(
    runtime: &mut Runtime,
    (a, a_layout): (BufferRange, Layout),
    (b, b_layout): (BufferRange, Layout),
    c: BufferRange,
    batches: usize,
    (m, k, n): (usize, usize, usize),
) -> Result<()> {
    const NAME: &str = "matmul";
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
        ..Params::default()
    };
    let vec4 = a_layout.is_row_major() && b_layout.is_row_major() && k % 4 == 0 && n % 4 == 0;
    let vec4_at = !a_layout.is_row_major() && b_layout.is_row_major() && m % 4 == 0 && n % 4 == 0;
    let ranges = [a, b, c];
    for range in ranges {
        runtime.expect_bindable(NAME, range)?;
    }
    let max_groups = runtime.limits().max_compute_workgroups_per_dimension as usize;
    if batches > max_groups {
        return Err(Error::Shape {
            op: NAME,
            message: format!(
                "a batch of {batches} is over this adapter's {max_groups} workgroups per dimension"
            ),
        });
    }
    if runtime.matmul_kernel() == MatmulKernel::SharedTiles {
        let groups = [n.div_ceil(64) as u32, m.div_ceil(64) as u32, batches as u32];
        in_passes(runtime, &MATMUL_TILED, params, k, &ranges, groups)
    } else if vec4 || vec4_at {
        // Spend the workgroup's 64 invocations on as many 8-row blocks as there are (up to 8), the rest
        // along N, so short, wide products (a batch of 10 rows) leave no invocation idle.
        let row_blocks = m.div_ceil(8);
        let wg_rows = row_blocks.next_power_of_two().min(8);
        let wg_cols = 64 / wg_rows;
        let params = Params {
            wg_rows: wg_rows as u32,
            ..params
        };
        let groups = [
            (n / 4).div_ceil(2).div_ceil(wg_cols) as u32,
            row_blocks.div_ceil(wg_rows) as u32,
            batches as u32,
        ];
        let kernel = if vec4 { &MATMUL_VEC4 } else { &MATMUL_VEC4_AT };
        in_passes(runtime, kernel, params, k, &ranges, groups)
    } else {
        let groups = [n.div_ceil(64) as u32, m.div_ceil(64) as u32, batches as u32];
        in_passes(runtime, &MATMUL_STRIDED, params, k, &ranges, groups)
    }
}

#[cfg(test)]
pub(crate) mod layout {
    use super::*;

    /// Every kernel of this family, and its `Params` as (size, [(field, offset)]), for the reflection test.
    pub(crate) fn kernels() -> Vec<&'static Kernel> {
        vec![
            &MATMUL_VEC4,
            &MATMUL_VEC4_AT,
            &MATMUL_TILED,
            &MATMUL_STRIDED,
        ]
    }

    pub(crate) fn params() -> (usize, Vec<(&'static str, usize)>) {
        (
            std::mem::size_of::<Params>(),
            vec![
                ("m", std::mem::offset_of!(Params, m)),
                ("n", std::mem::offset_of!(Params, n)),
                ("k", std::mem::offset_of!(Params, k)),
                ("wg_rows", std::mem::offset_of!(Params, wg_rows)),
                ("a_batch", std::mem::offset_of!(Params, a_batch)),
                ("a_row", std::mem::offset_of!(Params, a_row)),
                ("a_col", std::mem::offset_of!(Params, a_col)),
                ("b_batch", std::mem::offset_of!(Params, b_batch)),
                ("b_row", std::mem::offset_of!(Params, b_row)),
                ("b_col", std::mem::offset_of!(Params, b_col)),
                ("c_batch", std::mem::offset_of!(Params, c_batch)),
                ("k_begin", std::mem::offset_of!(Params, k_begin)),
                ("k_end", std::mem::offset_of!(Params, k_end)),
                ("accumulate", std::mem::offset_of!(Params, accumulate)),
            ],
        )
    }
}
