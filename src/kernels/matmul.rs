//! Matrix products (shaders/matmul.wgsl): `C = op(A)·op(B)` with transpose flags and an optional leading batch
//! dimension, at any size. GPUs take a shared-memory tiled kernel. CPU adapters (llvmpipe) take register
//! tiles: row-major operands whose sizes are multiples of 4 take a vec4 kernel (one for Aᵀ·B too), anything
//! else the strided kernel.

use bytemuck::{Pod, Zeroable};

use super::plan::Limits;
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

/// The K ranges of a product's passes, each pass after the first adding to C.
fn passes(k: usize) -> Vec<(usize, usize)> {
    (0..k)
        .step_by(K_PER_PASS)
        .map(|begin| (begin, (begin + K_PER_PASS).min(k)))
        .collect()
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
    let limits = Limits::of(runtime.limits());
    for range in [a, b, c] {
        limits.expect_bindable(NAME, range)?;
    }
    let plan = plan(
        runtime.matmul_kernel(),
        (a_layout, b_layout),
        batches,
        (m, k, n),
        limits,
    )?;
    let params = Params {
        wg_rows: plan.wg_rows,
        ..params
    };
    for (begin, end) in passes(k) {
        let pass = Params {
            k_begin: begin as u32,
            k_end: end as u32,
            accumulate: u32::from(begin > 0),
            ..params
        };
        runtime.dispatch(
            plan.kernel,
            bytemuck::bytes_of(&pass),
            &[a, b, c],
            plan.groups,
        )?;
    }
    Ok(())
}

/// Which kernel a product takes and how its workgroups are laid out.
struct Plan {
    kernel: &'static Kernel,
    groups: [u32; 3],
    /// vec4 kernels: 8-row blocks per workgroup.
    wg_rows: u32,
}

/// Chooses the kernel from the family in use and the operands' layouts and sizes: shared-memory tiles on
/// GPUs; on CPU adapters vec4 register tiles where rows are contiguous and sizes are multiples of 4 (Aᵀ·B
/// too), else the strided kernel.
fn plan(
    family: MatmulKernel,
    (a, b): (Layout, Layout),
    batches: usize,
    (m, k, n): (usize, usize, usize),
    limits: Limits,
) -> Result<Plan> {
    let max_groups = limits.max_workgroups_per_dimension as usize;
    if batches > max_groups {
        return Err(Error::Shape {
            op: "matmul",
            message: format!(
                "a batch of {batches} is over this adapter's {max_groups} workgroups per dimension"
            ),
        });
    }
    let vec4 = a.is_row_major() && b.is_row_major() && k % 4 == 0 && n % 4 == 0;
    let vec4_at = !a.is_row_major() && b.is_row_major() && m % 4 == 0 && n % 4 == 0;
    let tiles = [n.div_ceil(64) as u32, m.div_ceil(64) as u32, batches as u32];
    Ok(if family == MatmulKernel::SharedTiles {
        Plan {
            kernel: &MATMUL_TILED,
            groups: tiles,
            wg_rows: 1,
        }
    } else if vec4 || vec4_at {
        // Spend the workgroup's 64 invocations on as many 8-row blocks as there are (up to 8), the rest
        // along N, so short, wide products (a batch of 10 rows) leave no invocation idle.
        let row_blocks = m.div_ceil(8);
        let wg_rows = row_blocks.next_power_of_two().min(8);
        let wg_cols = 64 / wg_rows;
        Plan {
            kernel: if vec4 { &MATMUL_VEC4 } else { &MATMUL_VEC4_AT },
            groups: [
                (n / 4).div_ceil(2).div_ceil(wg_cols) as u32,
                row_blocks.div_ceil(wg_rows) as u32,
                batches as u32,
            ],
            wg_rows: wg_rows as u32,
        }
    } else {
        Plan {
            kernel: &MATMUL_STRIDED,
            groups: tiles,
            wg_rows: 1,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            max_binding_elements: 1 << 25,
            max_workgroups_per_dimension: 65_535,
        }
    }

    fn pick(
        family: MatmulKernel,
        transpose: (bool, bool),
        (m, k, n): (usize, usize, usize),
    ) -> Plan {
        let a = if transpose.0 { (k, m) } else { (m, k) };
        let b = if transpose.1 { (n, k) } else { (k, n) };
        let layouts = (
            Layout::of(a.0, a.1, false, transpose.0),
            Layout::of(b.0, b.1, false, transpose.1),
        );
        plan(family, layouts, 1, (m, k, n), limits()).expect("a plan")
    }

    #[test]
    fn cpu_adapters_take_vec4_tiles_where_sizes_allow_and_gpus_take_shared_tiles() {
        use MatmulKernel::{Registers, SharedTiles};
        assert_eq!(
            pick(Registers, (false, false), (10, 10_000, 1_000))
                .kernel
                .entry,
            "matmul_vec4"
        );
        assert_eq!(
            pick(Registers, (true, false), (12, 10, 8)).kernel.entry,
            "matmul_vec4_at"
        );
        assert_eq!(
            pick(Registers, (false, false), (10, 7, 8)).kernel.entry,
            "matmul_strided"
        );
        assert_eq!(
            pick(Registers, (false, true), (8, 8, 8)).kernel.entry,
            "matmul_strided"
        );
        assert_eq!(
            pick(SharedTiles, (false, false), (10, 10_000, 1_000))
                .kernel
                .entry,
            "matmul_tiled"
        );
    }

    #[test]
    fn workgroups_cover_the_output() {
        for (m, n) in [(1, 1), (10, 1000), (64, 64), (65, 130), (1000, 4)] {
            let tiled = pick(MatmulKernel::SharedTiles, (false, false), (m, 8, n));
            assert!(tiled.groups[0] as usize * 64 >= n && tiled.groups[1] as usize * 64 >= m);
            let vec4 = pick(MatmulKernel::Registers, (false, false), (m, 8, n));
            if vec4.kernel.entry == "matmul_vec4" {
                // Each invocation writes an 8×8 tile (two vec4 columns of 4): 64 invocations per workgroup.
                let cols = 64 / vec4.wg_rows as usize;
                assert!(
                    vec4.groups[0] as usize * cols * 8 >= n,
                    "{m}×{n}: {:?}",
                    vec4.groups
                );
                assert!(
                    vec4.groups[1] as usize * vec4.wg_rows as usize * 8 >= m,
                    "{m}×{n}"
                );
            }
        }
    }

    #[test]
    fn passes_cover_k_within_the_loop_cap() {
        for k in [1, 4095, 4096, 4097, 10_000, 1 << 20] {
            let passes = passes(k);
            assert_eq!(passes.first().map(|p| p.0), Some(0));
            assert_eq!(passes.last().map(|p| p.1), Some(k));
            assert!(passes.windows(2).all(|pair| pair[0].1 == pair[1].0));
            assert!(passes.iter().all(|(begin, end)| end - begin <= K_PER_PASS));
        }
    }

    #[test]
    fn a_batch_over_the_grid_is_a_shape_error() {
        let layout = Layout::of(2, 2, true, false);
        let outcome = plan(
            MatmulKernel::Registers,
            (layout, layout),
            70_000,
            (2, 2, 2),
            limits(),
        );
        assert!(matches!(outcome, Err(Error::Shape { .. })));
    }
}

reflected_layout!(
    kernels: [
        MATMUL_VEC4, MATMUL_VEC4_AT, MATMUL_TILED, MATMUL_STRIDED
    ],
    params: {
        m, n, k, wg_rows, a_batch, a_row, a_col, b_batch, b_row, b_col, c_batch, k_begin, k_end,
        accumulate
    }
);
