//! Matrix products: shape checks, batch broadcasting and the output; the kernel choice is the kernel layer's.

use crate::dtype::DType;
use crate::error::Result;
use crate::kernels::matmul::{self, Batches, Layout};
use crate::op::elementwise::BinaryOp;
use crate::shape::{matmul_dims, MatmulDims};
use crate::tensor::{Op, Tensor};

use crate::op::matmul::Transpose;

/// How one operand steps through the batches of a product: (stride per inner batch, stride per outer batch).
type BatchStrides = (usize, usize);

/// The batches of a product whose result has batch axes `batch`, with each operand's (batch axes, elements per
/// matrix): the axes where both operands, only the left or only the right one vary, merged while neighbours
/// agree, must make at most two groups (always so for two batch axes or fewer); else `None`, and the
/// operands are expanded first.
fn batch_plan(
    batch: &[usize],
    (a_batch, a_matrix): (&[usize], usize),
    (b_batch, b_matrix): (&[usize], usize),
) -> Option<(Batches, BatchStrides, BatchStrides)> {
    let rank = batch.len();
    let size_at = |axes: &[usize], axis: usize| {
        (axis + axes.len())
            .checked_sub(rank)
            .map_or(1, |own| axes[own])
    };
    // (size, whether the left operand varies along it, whether the right one does)
    let mut groups: Vec<(usize, bool, bool)> = Vec::new();
    for (axis, &size) in batch.iter().enumerate() {
        if size == 1 {
            continue;
        }
        let varies = (
            size_at(a_batch, axis) == size,
            size_at(b_batch, axis) == size,
        );
        match groups.last_mut() {
            Some(last) if (last.1, last.2) == varies => last.0 *= size,
            _ => groups.push((size, varies.0, varies.1)),
        }
    }
    let (outer, inner) = match groups[..] {
        [] => (None, None),
        [inner] => (None, Some(inner)),
        [outer, inner] => (Some(outer), Some(inner)),
        _ => return None,
    };
    let inner_size = inner.map_or(1, |group| group.0);
    let strides = |matrix: usize, varies: fn(&(usize, bool, bool)) -> bool| {
        let inner_varies = inner.as_ref().is_some_and(varies);
        let inner_stride = if inner_varies { matrix } else { 0 };
        let outer_stride = match &outer {
            Some(group) if varies(group) => matrix * if inner_varies { inner_size } else { 1 },
            _ => 0,
        };
        (inner_stride, outer_stride)
    };
    let batches = Batches {
        count: batch.iter().product(),
        inner: inner_size,
    };
    Some((
        batches,
        strides(a_matrix, |group| group.1),
        strides(b_matrix, |group| group.2),
    ))
}

/// `tensor` with its batch axes expanded to `batch` (a copy): for the products whose broadcast batch axes
/// make more than two groups.
fn expanded(tensor: &Tensor, batch: &[usize], matrix: (usize, usize)) -> Result<Tensor> {
    let mut shape = batch.to_vec();
    shape.extend([matrix.0, matrix.1]);
    let stored: Vec<usize> = tensor.shape()[..tensor.shape().len().saturating_sub(2)]
        .iter()
        .copied()
        .chain([matrix.0, matrix.1])
        .collect();
    let one = tensor.upload_beside(&[1.0], &[])?;
    // Untraced: a step inside the product, which is recorded whole.
    tensor
        .share()
        .into_shape(&stored)?
        .binary_expanded(BinaryOp::Mul, &one, &shape)
}

/// Matrix products.
impl Tensor {
    /// `self · other`: the Array API's `matmul` (see [`Tensor::matmul_t`]).
    pub fn matmul(&self, other: &Tensor) -> Result<Tensor> {
        self.matmul_t(other, Transpose::Neither)
    }

    /// `op(self) · op(other)`, where `transpose` says which operands are read with their last two axes swapped.
    /// The leading axes of both operands are batch axes and broadcast together, read in place (a `[1, m, k]`
    /// operand is shared by every batch of a `[b, k, n]` one); a 1-D left operand is a row, a 1-D right one a
    /// column, and the result drops that axis. The shapes are checked as
    /// [`matmul_shape`](crate::shape::matmul_shape) checks them, with no device.
    ///
    /// Recorded where a tape traces an operand; a 1-D operand is recorded as a reshape to a row (left) or a
    /// column (right) and the result as a reshape back, so that the product's gradient rule sees matrices only.
    pub fn matmul_t(&self, other: &Tensor, transpose: Transpose) -> Result<Tensor> {
        if !(self.is_traced() || other.is_traced()) {
            return self.product_t(other, transpose);
        }
        let (a_shape, b_shape) = (self.shape(), other.shape());
        if a_shape.len() == 1 || b_shape.len() == 1 {
            let out_shape = crate::shape::matmul_shape(a_shape, b_shape, transpose)?;
            let (transpose_a, transpose_b) = transpose.flags();
            let as_matrix = |tensor: &Tensor, row: bool| -> Result<Option<Tensor>> {
                match *tensor.shape() {
                    [len] if row => tensor.view_as(&[1, len]).map(Some),
                    [len] => tensor.view_as(&[len, 1]).map(Some),
                    _ => Ok(None),
                }
            };
            let a = as_matrix(self, !transpose_a)?;
            let b = as_matrix(other, transpose_b)?;
            let product = a
                .as_ref()
                .unwrap_or(self)
                .matmul_t(b.as_ref().unwrap_or(other), transpose)?;
            return product.into_shape(&out_shape);
        }
        let value = self.product_t(other, transpose)?;
        Tensor::record(&[self, other], value, |nodes| Op::MatMul {
            a: nodes[0],
            b: nodes[1],
            transpose,
        })
    }

    fn product_t(&self, other: &Tensor, transpose: Transpose) -> Result<Tensor> {
        const NAME: &str = "matmul";
        self.expect_same_session(NAME, other)?;
        self.expect_dtype(NAME, DType::F32)?;
        other.expect_dtype(NAME, DType::F32)?;
        let dims = matmul_dims(self.shape(), other.shape(), transpose)?;
        let out = self.output(NAME, &dims.out_shape(), DType::F32)?;
        if out.is_empty() {
            return Ok(out);
        }
        if dims.k == 0 {
            out.fill_(0.0)?;
            return Ok(out);
        }
        let a_matrix = (dims.lhs.0, dims.lhs.1);
        let b_matrix = (dims.rhs.0, dims.rhs.1);
        let plan = batch_plan(
            &dims.batch,
            (&dims.lhs.2, a_matrix.0 * a_matrix.1),
            (&dims.rhs.2, b_matrix.0 * b_matrix.1),
        );
        match plan {
            Some(plan) => product(self, other, &dims, transpose, plan, &out)?,
            None => {
                let (a, b) = (
                    expanded(self, &dims.batch, a_matrix)?,
                    expanded(other, &dims.batch, b_matrix)?,
                );
                let batch = dims.batch.clone();
                let full =
                    |matrix: (usize, usize)| (batch.iter().product::<usize>(), matrix.0 * matrix.1);
                let batches = Batches {
                    count: full(a_matrix).0,
                    inner: full(a_matrix).0,
                };
                let plan = (batches, (full(a_matrix).1, 0), (full(b_matrix).1, 0));
                product(&a, &b, &dims, transpose, plan, &out)?;
            }
        }
        Ok(out)
    }
}

fn product(
    a: &Tensor,
    b: &Tensor,
    dims: &MatmulDims,
    transpose: Transpose,
    (batches, a_strides, b_strides): (Batches, BatchStrides, BatchStrides),
    out: &Tensor,
) -> Result<()> {
    let (transpose_a, transpose_b) = transpose.flags();
    let layout =
        |(rows, cols, _): &(usize, usize, Vec<usize>), transposed, strides: BatchStrides| Layout {
            batch_stride: strides.0,
            outer_stride: strides.1,
            ..Layout::of(*rows, *cols, false, transposed)
        };
    let a_layout = layout(&dims.lhs, transpose_a, a_strides);
    let b_layout = layout(&dims.rhs, transpose_b, b_strides);
    let ranges = [a.range()?, b.range()?, out.range()?];
    let sizes = (dims.m, dims.k, dims.n);
    a.with_runtime(|runtime| {
        matmul::matmul_batched(
            runtime,
            (ranges[0], a_layout),
            (ranges[1], b_layout),
            ranges[2],
            batches,
            sizes,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcast_batches_step_each_operand_through_its_own_matrices() {
        // Both batched alike: one group.
        let (batches, a, b) = batch_plan(&[3], (&[3], 6), (&[3], 10)).unwrap();
        assert_eq!(
            (batches.count, batches.inner, a, b),
            (3, 3, (6, 0), (10, 0))
        );
        // A shared left operand ([1, m, k] or [m, k]).
        let (_, a, b) = batch_plan(&[4], (&[1], 6), (&[4], 10)).unwrap();
        assert_eq!((a, b), ((0, 0), (10, 0)));
        // [2, 1] · [1, 5]: the outer group is the left operand's, the inner one the right one's.
        let (batches, a, b) = batch_plan(&[2, 5], (&[2, 1], 6), (&[5], 10)).unwrap();
        assert_eq!((batches.count, batches.inner), (10, 5));
        assert_eq!((a, b), ((0, 6), (10, 0)));
        // [2, 3] · [3]: the outer group is the left operand's alone, the inner one both.
        let (batches, a, b) = batch_plan(&[2, 3], (&[2, 3], 6), (&[3], 10)).unwrap();
        assert_eq!((batches.inner, a, b), (3, (6, 18), (10, 0)));
        // No batch at all.
        let (batches, a, b) = batch_plan(&[], (&[], 6), (&[], 10)).unwrap();
        assert_eq!((batches.count, batches.inner, a, b), (1, 1, (0, 0), (0, 0)));
        // Three groups cannot be read in place.
        assert!(batch_plan(&[2, 3, 4], (&[2, 1, 4], 6), (&[3, 1], 10)).is_none());
    }
}
