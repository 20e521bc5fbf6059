//! Matrix products (shaders/matmul.wgsl): `C = op(A)·op(B)` with transpose flags and an optional leading batch
//! dimension, at any size. GPUs take a shared-memory tiled kernel. CPU adapters (llvmpipe) take register
//! tiles: row-major operands whose sizes are multiples of 4 take a vec4 kernel (one for Aᵀ·B too), anything
//! else the strided kernel.

use bytemuck::{Pod, Zeroable};

use super::{dispatch, expect_bindable, Family, Kernel};
use crate::error::{Error, Result};
use crate::session::{BufferRange, Gpu, MatmulKernel};
use crate::tensor::{DType, Tensor};

static MATMUL: Family = Family {
    name: "matmul",
    source: include_str!("../../shaders/matmul.wgsl"),
};

static MATMUL_VEC4: Kernel = Kernel {
    family: &MATMUL,
    entry: "matmul_vec4",
    bindings: &[1, 2, 3],
};
static MATMUL_VEC4_AT: Kernel = Kernel {
    family: &MATMUL,
    entry: "matmul_vec4_at",
    bindings: &[1, 2, 3],
};
static MATMUL_TILED: Kernel = Kernel {
    family: &MATMUL,
    entry: "matmul_tiled",
    bindings: &[1, 2, 3],
};
static MATMUL_STRIDED: Kernel = Kernel {
    family: &MATMUL,
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

/// An operand as (batch, rows, cols) after its transpose flag, with element strides into its storage.
struct Operand {
    batch: Option<usize>,
    rows: usize,
    cols: usize,
    batch_stride: usize,
    row_stride: usize,
    col_stride: usize,
}

fn operand(op: &'static str, name: &str, tensor: &Tensor, transpose: bool) -> Result<Operand> {
    let (batch, stored_rows, stored_cols) = match *tensor.shape() {
        [rows, cols] => (None, rows, cols),
        [batch, rows, cols] => (Some(batch), rows, cols),
        ref other => {
            return Err(Error::Shape {
                op,
                message: format!(
                    "{name} must be [rows, cols] or [batch, rows, cols]; got {other:?}"
                ),
            })
        }
    };
    let batch_stride = if batch.is_some() {
        stored_rows * stored_cols
    } else {
        0
    };
    Ok(if transpose {
        Operand {
            batch,
            rows: stored_cols,
            cols: stored_rows,
            batch_stride,
            row_stride: 1,
            col_stride: stored_cols,
        }
    } else {
        Operand {
            batch,
            rows: stored_rows,
            cols: stored_cols,
            batch_stride,
            row_stride: stored_cols,
            col_stride: 1,
        }
    })
}

/// Dispatches `kernel` once per slice of K, each pass after the first adding to C.
fn in_passes(
    gpu: &mut Gpu,
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
        dispatch(gpu, kernel, bytemuck::bytes_of(&pass), ranges, groups)?;
    }
    Ok(())
}

/// Matrix products.
impl Tensor {
    /// `self · other`.
    pub fn matmul(&self, other: &Tensor) -> Result<Tensor> {
        self.matmul_t(other, false, false)
    }

    /// `op(self) · op(other)`, where op transposes the last two axes when its flag is set. Either operand may
    /// carry a leading batch dimension; a 2-D operand is shared by every batch.
    pub fn matmul_t(
        &self,
        other: &Tensor,
        transpose_self: bool,
        transpose_other: bool,
    ) -> Result<Tensor> {
        const NAME: &str = "matmul";
        self.expect_same_session(NAME, other)?;
        self.expect_dtype(NAME, DType::F32)?;
        other.expect_dtype(NAME, DType::F32)?;
        let a = operand(NAME, "the left operand", self, transpose_self)?;
        let b = operand(NAME, "the right operand", other, transpose_other)?;
        if a.cols != b.rows {
            return Err(Error::Shape {
                op: NAME,
                message: format!(
                    "inner sizes differ: {:?}{} · {:?}{} multiplies [{}, {}] by [{}, {}]",
                    self.shape(),
                    if transpose_self { "ᵀ" } else { "" },
                    other.shape(),
                    if transpose_other { "ᵀ" } else { "" },
                    a.rows,
                    a.cols,
                    b.rows,
                    b.cols
                ),
            });
        }
        let batch = match (a.batch, b.batch) {
            (Some(x), Some(y)) if x != y => {
                return Err(Error::Shape {
                    op: NAME,
                    message: format!(
                        "batch sizes differ: {:?} and {:?}",
                        self.shape(),
                        other.shape()
                    ),
                })
            }
            (x, y) => x.or(y),
        };
        let (m, k, n) = (a.rows, a.cols, b.cols);
        let out_shape: Vec<usize> = match batch {
            Some(batch) => vec![batch, m, n],
            None => vec![m, n],
        };
        let out = self.output(NAME, &out_shape, DType::F32)?;
        if out.is_empty() {
            return Ok(out);
        }
        if k == 0 {
            out.fill_(0.0)?;
            return Ok(out);
        }
        let batches = batch.unwrap_or(1);
        let params = Params {
            m: m as u32,
            n: n as u32,
            k: k as u32,
            wg_rows: 1,
            a_batch: a.batch_stride as u32,
            a_row: a.row_stride as u32,
            a_col: a.col_stride as u32,
            b_batch: b.batch_stride as u32,
            b_row: b.row_stride as u32,
            b_col: b.col_stride as u32,
            c_batch: (m * n) as u32,
            ..Params::default()
        };
        let vec4 = !transpose_self && !transpose_other && k % 4 == 0 && n % 4 == 0;
        let vec4_at = transpose_self && !transpose_other && m % 4 == 0 && n % 4 == 0;
        let ranges = [self.range()?, other.range()?, out.range()?];
        self.with_gpu(|gpu| {
            for range in ranges {
                expect_bindable(gpu, NAME, range)?;
            }
            let max_groups = gpu.limits.max_compute_workgroups_per_dimension as usize;
            if batches > max_groups {
                return Err(Error::Shape {
                    op: NAME,
                    message: format!("a batch of {batches} is over this adapter's {max_groups} workgroups per dimension"),
                });
            }
            if gpu.matmul_kernel == MatmulKernel::SharedTiles {
                let groups = [n.div_ceil(64) as u32, m.div_ceil(64) as u32, batches as u32];
                in_passes(gpu, &MATMUL_TILED, params, k, &ranges, groups)
            } else if vec4 || vec4_at {
                // Spend the workgroup's 64 invocations on as many 8-row blocks as there are (up to 8), the rest
                // along N, so short, wide products (a batch of 10 rows) leave no invocation idle.
                let row_blocks = m.div_ceil(8);
                let wg_rows = row_blocks.next_power_of_two().min(8);
                let wg_cols = 64 / wg_rows;
                let params = Params { wg_rows: wg_rows as u32, ..params };
                let groups = [
                    (n / 4).div_ceil(2).div_ceil(wg_cols) as u32,
                    row_blocks.div_ceil(wg_rows) as u32,
                    batches as u32,
                ];
                let kernel = if vec4 { &MATMUL_VEC4 } else { &MATMUL_VEC4_AT };
                in_passes(gpu, kernel, params, k, &ranges, groups)
            } else {
                let groups = [n.div_ceil(64) as u32, m.div_ceil(64) as u32, batches as u32];
                in_passes(gpu, &MATMUL_STRIDED, params, k, &ranges, groups)
            }
        })?;
        Ok(out)
    }
}
