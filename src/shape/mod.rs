//! Shape inference and validation, with no device in sight: what shape each operation gives and whether its
//! operands fit, as the operations themselves check it. A caller can check its inputs here before it opens a
//! session (the command line does, and the bindings), and get the same error the operation would return.
//!
//! ```
//! use wgcompute::shape::{binary_shape, matmul_shape, reduce_shape};
//! use wgcompute::{BinaryOp, ReduceOp, Transpose};
//! # fn main() -> wgcompute::Result<()> {
//! assert_eq!(matmul_shape(&[8, 3, 4], &[4, 5], Transpose::Neither)?, vec![8, 3, 5]);
//! assert_eq!(binary_shape(BinaryOp::Add, &[10, 3], &[3])?, vec![10, 3]);
//! assert_eq!(reduce_shape(ReduceOp::Sum, &[2, 3, 4], Some(1))?, vec![2, 4]);
//! assert!(matmul_shape(&[3, 4], &[5, 2], Transpose::Neither).is_err());
//! # Ok(()) }
//! ```
//!
//! The crate-internal helpers below them (strides, lanes) turn those shapes into what the kernels read.

pub(crate) mod window;

use crate::error::{Error, Result};
use crate::op::elementwise::{BinaryOp, UnaryOp};
use crate::op::index::{IndexItem, Slice};
use crate::op::matmul::Transpose;
use crate::op::reduce::{ReduceOp, Reduction};
use crate::op::softmax::MAX_COLS;

/// Highest rank a tensor may have.
pub const MAX_RANK: usize = 8;

fn shape_error(op: &'static str, message: String) -> Error {
    Error::Shape { op, message }
}

/// The element count of a shape, or a shape error if the rank is too high or the count overflows.
pub(crate) fn element_count(op: &'static str, shape: &[usize]) -> Result<usize> {
    if shape.len() > MAX_RANK {
        return Err(shape_error(
            op,
            format!(
                "rank {} of shape {shape:?} is over the maximum of {MAX_RANK}",
                shape.len()
            ),
        ));
    }
    shape
        .iter()
        .try_fold(1usize, |total, &dim| total.checked_mul(dim))
        .ok_or_else(|| {
            shape_error(
                op,
                format!("shape {shape:?} has more elements than memory can hold"),
            )
        })
}

/// The shape a tensor of `shape` takes in `op`, checked: at most [`MAX_RANK`] axes, and an element count
/// that fits in memory.
fn tensor_shape(op: &'static str, shape: &[usize]) -> Result<Vec<usize>> {
    element_count(op, shape)?;
    Ok(shape.to_vec())
}

// --- elementwise ---

/// The shape two shapes broadcast to (NumPy's rules: aligned at the right, 1 stretches), or a shape error in
/// `op` naming both.
pub(crate) fn broadcast(op: &'static str, lhs: &[usize], rhs: &[usize]) -> Result<Vec<usize>> {
    let rank = lhs.len().max(rhs.len());
    let mut shape = vec![0; rank];
    for axis in 0..rank {
        let left = if axis + lhs.len() >= rank {
            lhs[axis + lhs.len() - rank]
        } else {
            1
        };
        let right = if axis + rhs.len() >= rank {
            rhs[axis + rhs.len() - rank]
        } else {
            1
        };
        shape[axis] = match (left, right) {
            (l, r) if l == r => l,
            (1, r) => r,
            (l, 1) => l,
            _ => {
                return Err(shape_error(
                    op,
                    format!(
                    "shapes {lhs:?} and {rhs:?} do not broadcast together: aligned at their last \
                         axes, each pair of sizes must be equal or one of them 1"
                ),
                ))
            }
        };
    }
    Ok(shape)
}

/// The shape two shapes broadcast to, as NumPy broadcasts them: aligned at their last axes, each pair of sizes
/// equal or one of them 1 (which stretches), the shorter shape padded with 1s at the front.
///
/// Errors with [`Error::Shape`] when they do not broadcast. Any rank is accepted; see [`binary_shape`] for a
/// binary op's operands, which are also held to [`MAX_RANK`].
///
/// ```
/// use wgcompute::shape::broadcast_shape;
/// assert_eq!(broadcast_shape(&[3, 1], &[1, 4]).ok(), Some(vec![3, 4]));
/// assert_eq!(broadcast_shape(&[], &[2, 5]).ok(), Some(vec![2, 5]));
/// assert!(broadcast_shape(&[3, 4], &[3]).is_err());
/// ```
pub fn broadcast_shape(lhs: &[usize], rhs: &[usize]) -> Result<Vec<usize>> {
    broadcast("broadcast", lhs, rhs)
}

/// The shape of `lhs (op) rhs` ([`Tensor::binary`](crate::Tensor::binary) and the methods named after the
/// ops): the operands' broadcast shape, each operand within [`MAX_RANK`].
///
/// Errors with [`Error::Shape`] (its `op` the op's name) naming both shapes when they do not broadcast.
///
/// ```
/// use wgcompute::{shape::binary_shape, BinaryOp, Error};
/// assert_eq!(binary_shape(BinaryOp::Mul, &[4, 1, 3], &[5, 1]).ok(), Some(vec![4, 5, 3]));
/// assert!(matches!(
///     binary_shape(BinaryOp::Add, &[3, 4], &[3]),
///     Err(Error::Shape { op: "add", .. })
/// ));
/// ```
pub fn binary_shape(op: BinaryOp, lhs: &[usize], rhs: &[usize]) -> Result<Vec<usize>> {
    let name = op.name();
    element_count(name, lhs)?;
    element_count(name, rhs)?;
    broadcast(name, lhs, rhs)
}

/// The shape of a unary op's result ([`Tensor::unary`](crate::Tensor::unary) and the methods named after the
/// ops): the input's, which must be within [`MAX_RANK`].
///
/// ```
/// use wgcompute::{shape::unary_shape, UnaryOp, MAX_RANK};
/// assert_eq!(unary_shape(UnaryOp::Exp, &[2, 3]).ok(), Some(vec![2, 3]));
/// assert!(unary_shape(UnaryOp::Exp, &[1; MAX_RANK]).is_ok());
/// assert!(unary_shape(UnaryOp::Exp, &[1; MAX_RANK + 1]).is_err());
/// ```
pub fn unary_shape(op: UnaryOp, shape: &[usize]) -> Result<Vec<usize>> {
    tensor_shape(op.name(), shape)
}

// --- matmul ---

/// A matrix product's operands and result: the sizes it multiplies (`[m, k] · [k, n]`, after the transposes),
/// the batch axes, and each operand as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MatmulDims {
    pub m: usize,
    pub k: usize,
    pub n: usize,
    /// The result's batch axes: the operands' leading axes broadcast together (none for two matrices).
    pub batch: Vec<usize>,
    /// Each operand's (stored rows, stored cols, leading batch axes); a 1-D operand is stored as a matrix of
    /// one row (left) or one column (right), as the standard promotes it.
    pub lhs: (usize, usize, Vec<usize>),
    pub rhs: (usize, usize, Vec<usize>),
    /// Whether the left operand is 1-D (the result has no m axis) and whether the right one is (no n axis).
    pub vectors: (bool, bool),
}

impl MatmulDims {
    pub(crate) fn out_shape(&self) -> Vec<usize> {
        let mut shape = self.batch.clone();
        if !self.vectors.0 {
            shape.push(self.m);
        }
        if !self.vectors.1 {
            shape.push(self.n);
        }
        shape
    }
}

/// An operand as (batch axes, stored rows, stored cols), or a shape error naming it. A 1-D operand is a matrix
/// of one row on the left, of one column on the right (transposed: the other way round).
fn matmul_operand(
    op: &'static str,
    name: &str,
    shape: &[usize],
    (left, transposed): (bool, bool),
) -> Result<(Vec<usize>, usize, usize)> {
    match *shape {
        [] => Err(shape_error(
            op,
            format!("{name} must have at least one axis; got a 0-d shape"),
        )),
        [len] if left != transposed => Ok((Vec::new(), 1, len)),
        [len] => Ok((Vec::new(), len, 1)),
        [ref batch @ .., rows, cols] => Ok((batch.to_vec(), rows, cols)),
    }
}

/// The sizes `op(lhs) · op(rhs)` multiplies, checked: the inner sizes agree and the batch axes broadcast.
pub(crate) fn matmul_dims(
    lhs: &[usize],
    rhs: &[usize],
    transpose: Transpose,
) -> Result<MatmulDims> {
    const NAME: &str = "matmul";
    let (transpose_lhs, transpose_rhs) = transpose.flags();
    element_count(NAME, lhs)?;
    element_count(NAME, rhs)?;
    let (batch_a, stored_a_rows, stored_a_cols) =
        matmul_operand(NAME, "the left operand", lhs, (true, transpose_lhs))?;
    let (batch_b, stored_b_rows, stored_b_cols) =
        matmul_operand(NAME, "the right operand", rhs, (false, transpose_rhs))?;
    let oriented = |rows, cols, transposed| {
        if transposed {
            (cols, rows)
        } else {
            (rows, cols)
        }
    };
    let (a_rows, a_cols) = oriented(stored_a_rows, stored_a_cols, transpose_lhs);
    let (b_rows, b_cols) = oriented(stored_b_rows, stored_b_cols, transpose_rhs);
    if a_cols != b_rows {
        return Err(shape_error(
            NAME,
            format!(
                "inner sizes differ: {lhs:?}{} · {rhs:?}{} multiplies [{a_rows}, {a_cols}] by [{b_rows}, {b_cols}] \
                 ({a_cols} and {b_rows})",
                if transpose_lhs { "ᵀ" } else { "" },
                if transpose_rhs { "ᵀ" } else { "" },
            ),
        ));
    }
    let batch = broadcast(NAME, &batch_a, &batch_b).map_err(|_| {
        shape_error(
            NAME,
            format!(
                "batch axes {batch_a:?} and {batch_b:?} of {lhs:?} and {rhs:?} do not broadcast: aligned at \
                 their last axes, each pair of sizes must be equal or one of them 1"
            ),
        )
    })?;
    let dims = MatmulDims {
        m: a_rows,
        k: a_cols,
        n: b_cols,
        batch,
        lhs: (stored_a_rows, stored_a_cols, batch_a),
        rhs: (stored_b_rows, stored_b_cols, batch_b),
        vectors: (lhs.len() == 1, rhs.len() == 1),
    };
    element_count(NAME, &dims.out_shape())?;
    Ok(dims)
}

/// The shape of `op(lhs) · op(rhs)` ([`Tensor::matmul_t`](crate::Tensor::matmul_t)), where `transpose` says
/// which operands are read with their last two axes swapped: the Array API's `matmul`. The leading axes of both
/// operands are batch axes and broadcast (`[1, m, k] · [b, k, n]` is `[b, m, n]`); a 1-D left operand is a row
/// and a 1-D right operand a column, whose axis the result then drops.
///
/// Errors with [`Error::Shape`] for a 0-d operand, inner sizes that differ, or batch axes that do not
/// broadcast; the message names both shapes.
///
/// ```
/// use wgcompute::{shape::matmul_shape, Transpose};
/// assert_eq!(matmul_shape(&[3, 4], &[4, 5], Transpose::Neither).ok(), Some(vec![3, 5]));
/// assert_eq!(matmul_shape(&[4, 3], &[2, 4, 5], Transpose::Left).ok(), Some(vec![2, 3, 5]));
/// assert_eq!(matmul_shape(&[2, 1, 3, 4], &[5, 4, 6], Transpose::Neither).ok(), Some(vec![2, 5, 3, 6]));
/// assert_eq!(matmul_shape(&[4], &[2, 4, 5], Transpose::Neither).ok(), Some(vec![2, 5]));
/// assert!(matmul_shape(&[3, 4], &[5, 2], Transpose::Neither).is_err());
/// assert!(matmul_shape(&[2, 3, 4], &[3, 4, 5], Transpose::Neither).is_err());
/// ```
pub fn matmul_shape(lhs: &[usize], rhs: &[usize], transpose: Transpose) -> Result<Vec<usize>> {
    matmul_dims(lhs, rhs, transpose).map(|dims| dims.out_shape())
}

// --- reductions ---

/// A tensor seen as [outer, len, inner] around one axis (`None`: every element in one row).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Lanes {
    pub outer: u64,
    pub len: u64,
    pub inner: u64,
}

/// The lanes of `shape` along `axis`, and the shape left when that axis is reduced away.
pub(crate) fn lanes(
    op: &'static str,
    shape: &[usize],
    axis: Option<usize>,
) -> Result<(Lanes, Vec<usize>)> {
    let count = |dims: &[usize]| dims.iter().product::<usize>() as u64;
    match axis {
        None => Ok((
            Lanes {
                outer: 1,
                len: count(shape),
                inner: 1,
            },
            Vec::new(),
        )),
        Some(axis) if axis < shape.len() => {
            let mut out_shape = shape.to_vec();
            out_shape.remove(axis);
            Ok((
                Lanes {
                    outer: count(&shape[..axis]),
                    len: shape[axis] as u64,
                    inner: count(&shape[axis + 1..]),
                },
                out_shape,
            ))
        }
        Some(axis) => Err(shape_error(
            op,
            format!(
                "axis {axis} is out of range for shape {shape:?}, which has {} axes",
                shape.len()
            ),
        )),
    }
}

/// The name a reduction's errors carry: the table's name, or argmax and argmin.
pub(crate) fn reduction_name(reduction: Reduction) -> &'static str {
    match reduction {
        Reduction::Value(op) => op.name(),
        Reduction::Argmax => "argmax",
        Reduction::Argmin => "argmin",
    }
}

/// The lanes a reduction runs over and its result's shape, checked: the axis is in range, and an empty lane is
/// refused where the reduction has no answer for one (max, min, argmax and argmin of nothing).
pub(crate) fn reduction(
    reduction: Reduction,
    shape: &[usize],
    axis: Option<usize>,
) -> Result<(Lanes, Vec<usize>)> {
    let name = reduction_name(reduction);
    element_count(name, shape)?;
    let (view, out_shape) = lanes(name, shape, axis)?;
    let empty = match reduction {
        Reduction::Value(op) => op.row().empty,
        Reduction::Argmax | Reduction::Argmin => None,
    };
    if view.len == 0 && empty.is_none() {
        // An index of nothing has no answer at all; for a value reduction, say which ones do.
        let which = if reduction.is_arg() {
            "there is no element to point at".to_string()
        } else {
            let defined: Vec<String> = ReduceOp::ALL
                .iter()
                .filter_map(|row| Some(format!("{} ({})", row.op.name(), row.empty?)))
                .collect();
            format!("only {} reduce an empty axis", defined.join(", "))
        };
        let over = match axis {
            Some(axis) => format!("along axis {axis}"),
            None => "over all elements".to_string(),
        };
        return Err(shape_error(
            name,
            format!("{name} of nothing is undefined (shape {shape:?}, {over}); {which}"),
        ));
    }
    Ok((view, out_shape))
}

/// The shape of a value reduction ([`Tensor::reduce`](crate::Tensor::reduce) and the methods named after the
/// ops): `axis: None` reduces every element into a 0-d result (shape `[]`), `Some(axis)` removes that axis.
///
/// Errors with [`Error::Shape`] when the axis is out of range, or the reduced lanes are empty and the op has
/// no value for nothing (max and min; sum, mean and prod have one).
///
/// ```
/// use wgcompute::{shape::reduce_shape, ReduceOp};
/// assert_eq!(reduce_shape(ReduceOp::Sum, &[2, 3, 4], Some(1)).ok(), Some(vec![2, 4]));
/// assert_eq!(reduce_shape(ReduceOp::Max, &[2, 3], None).ok(), Some(vec![]));
/// assert!(reduce_shape(ReduceOp::Sum, &[2, 3], Some(2)).is_err());
/// assert!(reduce_shape(ReduceOp::Max, &[3, 0], Some(1)).is_err());
/// assert_eq!(reduce_shape(ReduceOp::Sum, &[3, 0], Some(1)).ok(), Some(vec![3]));
/// ```
pub fn reduce_shape(op: ReduceOp, shape: &[usize], axis: Option<usize>) -> Result<Vec<usize>> {
    reduction(Reduction::Value(op), shape, axis).map(|(_, shape)| shape)
}

/// The shape of [`Tensor::argmax`](crate::Tensor::argmax): as [`reduce_shape`]'s, with an empty lane always
/// an error (there is no element to point at).
///
/// ```
/// use wgcompute::shape::argmax_shape;
/// assert_eq!(argmax_shape(&[2, 3], Some(0)).ok(), Some(vec![3]));
/// assert!(argmax_shape(&[0], None).is_err());
/// ```
pub fn argmax_shape(shape: &[usize], axis: Option<usize>) -> Result<Vec<usize>> {
    reduction(Reduction::Argmax, shape, axis).map(|(_, shape)| shape)
}

/// The shape of [`Tensor::argmin`](crate::Tensor::argmin): as [`argmax_shape`]'s.
///
/// ```
/// use wgcompute::shape::argmin_shape;
/// assert_eq!(argmin_shape(&[2, 3], None).ok(), Some(vec![]));
/// assert!(argmin_shape(&[2, 3], Some(2)).is_err());
/// ```
pub fn argmin_shape(shape: &[usize], axis: Option<usize>) -> Result<Vec<usize>> {
    reduction(Reduction::Argmin, shape, axis).map(|(_, shape)| shape)
}

/// The axes a reduction over `axes` of `shape` reduces (`None`: every axis), checked and sorted: each in range
/// and none named twice. An empty list reduces no axis (each element is its own lane).
pub(crate) fn reduced_axes(
    op: &'static str,
    shape: &[usize],
    axes: Option<&[usize]>,
) -> Result<Vec<usize>> {
    let Some(axes) = axes else {
        return Ok((0..shape.len()).collect());
    };
    let mut sorted = axes.to_vec();
    sorted.sort_unstable();
    if let Some(&axis) = sorted.iter().find(|&&axis| axis >= shape.len()) {
        return Err(shape_error(
            op,
            format!(
                "axis {axis} of {axes:?} is out of range for shape {shape:?}, which has {} axes",
                shape.len()
            ),
        ));
    }
    if let Some(pair) = sorted.windows(2).find(|pair| pair[0] == pair[1]) {
        return Err(shape_error(
            op,
            format!("axis {} is named twice in {axes:?}", pair[0]),
        ));
    }
    Ok(sorted)
}

/// The shape left when the sorted `axes` of `shape` are reduced: without them, or with each kept as a 1.
pub(crate) fn kept_shape(shape: &[usize], axes: &[usize], keepdims: bool) -> Vec<usize> {
    shape
        .iter()
        .enumerate()
        .filter_map(|(axis, &dim)| match (axes.contains(&axis), keepdims) {
            (false, _) => Some(dim),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect()
}

/// The shape of a value reduction over several axes ([`Tensor::reduce_axes`](crate::Tensor::reduce_axes)):
/// `axes: None` reduces every axis; `keepdims` keeps each reduced axis as a 1.
///
/// Errors with [`Error::Shape`] when an axis is out of range or named twice, or the reduced lanes are empty
/// and the op has no value for nothing (max and min).
///
/// ```
/// use wgcompute::{shape::reduce_axes_shape, ReduceOp};
/// assert_eq!(reduce_axes_shape(ReduceOp::Sum, &[2, 3, 4], Some(&[0, 2]), false).ok(), Some(vec![3]));
/// assert_eq!(reduce_axes_shape(ReduceOp::Sum, &[2, 3, 4], Some(&[2, 0]), true).ok(), Some(vec![1, 3, 1]));
/// assert_eq!(reduce_axes_shape(ReduceOp::Max, &[2, 3], None, true).ok(), Some(vec![1, 1]));
/// assert!(reduce_axes_shape(ReduceOp::Sum, &[2, 3], Some(&[1, 1]), false).is_err());
/// assert!(reduce_axes_shape(ReduceOp::Max, &[2, 0], Some(&[1]), false).is_err());
/// ```
pub fn reduce_axes_shape(
    op: ReduceOp,
    shape: &[usize],
    axes: Option<&[usize]>,
    keepdims: bool,
) -> Result<Vec<usize>> {
    reduction_over_axes(Reduction::Value(op), shape, axes, keepdims).map(|(_, shape)| shape)
}

/// The sorted axes a reduction over `axes` reduces and its result's shape, checked as [`reduce_axes_shape`]
/// says.
pub(crate) fn reduction_over_axes(
    reduction: Reduction,
    shape: &[usize],
    axes: Option<&[usize]>,
    keepdims: bool,
) -> Result<(Vec<usize>, Vec<usize>)> {
    let name = reduction_name(reduction);
    element_count(name, shape)?;
    let axes = reduced_axes(name, shape, axes)?;
    let len: usize = axes.iter().map(|&axis| shape[axis]).product();
    let empty = match reduction {
        Reduction::Value(op) => op.row().empty,
        Reduction::Argmax | Reduction::Argmin => None,
    };
    if len == 0 && empty.is_none() {
        return Err(shape_error(
            name,
            format!(
                "{name} of nothing is undefined (shape {shape:?}, over axes {axes:?}, which hold no element)"
            ),
        ));
    }
    Ok((axes.clone(), kept_shape(shape, &axes, keepdims)))
}

// --- softmax ---

/// (rows, cols) of a tensor read as rows along its last axis, checked: at least one axis, whose length is
/// from 1 to what the kernels take.
pub(crate) fn softmax_rows(op: &'static str, shape: &[usize]) -> Result<(usize, usize)> {
    element_count(op, shape)?;
    match shape.split_last() {
        Some((&cols, _)) if cols > MAX_COLS => Err(shape_error(
            op,
            format!(
                "a last axis of {cols} is longer than the {MAX_COLS} supported; reshape into rows"
            ),
        )),
        Some((&cols, rest)) if cols > 0 => Ok((rest.iter().product(), cols)),
        Some(_) => Err(shape_error(
            op,
            format!("needs a last axis of at least one element; got shape {shape:?}"),
        )),
        None => Err(shape_error(
            op,
            "needs a last axis of at least one element; got a 0-d shape, which has no axes"
                .to_string(),
        )),
    }
}

/// The shape of [`Tensor::softmax`](crate::Tensor::softmax), which works along the last axis: the input's.
///
/// Errors with [`Error::Shape`] for a 0-d shape, an empty last axis, or one longer than the kernels take.
///
/// ```
/// use wgcompute::shape::softmax_shape;
/// assert_eq!(softmax_shape(&[4, 10]).ok(), Some(vec![4, 10]));
/// assert!(softmax_shape(&[]).is_err());
/// assert!(softmax_shape(&[4, 0]).is_err());
/// ```
pub fn softmax_shape(shape: &[usize]) -> Result<Vec<usize>> {
    softmax_rows("softmax", shape).map(|_| shape.to_vec())
}

/// The shape of [`Tensor::log_softmax`](crate::Tensor::log_softmax): as [`softmax_shape`]'s.
///
/// ```
/// use wgcompute::shape::log_softmax_shape;
/// assert_eq!(log_softmax_shape(&[7]).ok(), Some(vec![7]));
/// assert!(log_softmax_shape(&[]).is_err());
/// ```
pub fn log_softmax_shape(shape: &[usize]) -> Result<Vec<usize>> {
    softmax_rows("log_softmax", shape).map(|_| shape.to_vec())
}

/// The op name of [`Tensor::softmax_cross_entropy_with_logits`](crate::Tensor::softmax_cross_entropy_with_logits).
pub(crate) const SOFTMAX_XENT: &str = "softmax_cross_entropy_with_logits";

/// The rows and columns softmax cross-entropy runs over, checked as
/// [`softmax_cross_entropy_shapes`] says.
pub(crate) fn softmax_xent_rows(logits: &[usize], labels: &[usize]) -> Result<(usize, usize)> {
    if logits != labels {
        return Err(shape_error(
            SOFTMAX_XENT,
            format!("logits {logits:?} and labels {labels:?} must have the same shape"),
        ));
    }
    softmax_rows(SOFTMAX_XENT, logits)
}

/// The shapes of [`Tensor::softmax_cross_entropy_with_logits`](crate::Tensor::softmax_cross_entropy_with_logits):
/// `(loss, gradient)`, the loss of each row (the logits' shape without the last axis, where the classes lie)
/// and the gradient (the logits' shape).
///
/// Errors with [`Error::Shape`] unless the logits and labels have the same shape, with a last axis as
/// [`softmax_shape`] takes.
///
/// ```
/// use wgcompute::shape::softmax_cross_entropy_shapes;
/// assert_eq!(
///     softmax_cross_entropy_shapes(&[32, 10], &[32, 10]).ok(),
///     Some((vec![32], vec![32, 10]))
/// );
/// assert!(softmax_cross_entropy_shapes(&[32, 10], &[10, 32]).is_err());
/// assert!(softmax_cross_entropy_shapes(&[], &[]).is_err());
/// ```
pub fn softmax_cross_entropy_shapes(
    logits: &[usize],
    labels: &[usize],
) -> Result<(Vec<usize>, Vec<usize>)> {
    softmax_xent_rows(logits, labels)?;
    Ok((logits[..logits.len() - 1].to_vec(), logits.to_vec()))
}

// --- optimizers ---

/// Errors unless an optimizer's operand (`what`: its name in the message) has the parameter's shape.
pub(crate) fn same_as_param(
    op: &'static str,
    what: &str,
    param: &[usize],
    shape: &[usize],
) -> Result<()> {
    if shape == param {
        Ok(())
    } else {
        Err(shape_error(
            op,
            format!("{what} has shape {shape:?}, the parameter {param:?}"),
        ))
    }
}

/// Errors unless an operand of an Adam step ([`Tensor::adam_update_`](crate::Tensor::adam_update_): the
/// gradient, `m` or `v`; `what` names it in the message) has the parameter's shape, as the step requires.
///
/// ```
/// use wgcompute::shape::adam_operand_shape;
/// assert!(adam_operand_shape("m", &[3, 4], &[3, 4]).is_ok());
/// assert!(adam_operand_shape("v", &[3, 4], &[4, 3]).is_err());
/// ```
pub fn adam_operand_shape(what: &str, param: &[usize], shape: &[usize]) -> Result<()> {
    same_as_param("adam", what, param, shape)
}

/// How many Adam updates a stack of gradients holds for a parameter of shape `param`: 1 when `grads` has the
/// parameter's shape, `T` when it is `[T, ...param]` (one update per leading slice, in order). The parameter
/// must be within [`MAX_RANK`]; the stack may have one axis more.
///
/// Errors with [`Error::Shape`] naming both shapes otherwise.
///
/// ```
/// use wgcompute::shape::adam_update_count;
/// assert_eq!(adam_update_count(&[3, 4], &[3, 4]).ok(), Some(1));
/// assert_eq!(adam_update_count(&[3, 4], &[5, 3, 4]).ok(), Some(5));
/// assert!(adam_update_count(&[3, 4], &[5]).is_err());
/// ```
pub fn adam_update_count(param: &[usize], grads: &[usize]) -> Result<usize> {
    const NAME: &str = "adam";
    element_count(NAME, param)?;
    if grads == param {
        return Ok(1);
    }
    match grads.split_first() {
        Some((&updates, slice)) if slice == param => Ok(updates),
        _ => Err(shape_error(
            NAME,
            format!(
                "the gradients {grads:?} must have the shape of the parameter {param:?}, or that shape after a \
                 leading axis of updates"
            ),
        )),
    }
}

// --- indexing ---

fn index_error(op: &'static str, message: String) -> Error {
    Error::Index { op, message }
}

/// The strided view the basic entries of an index select: `shape` and signed element `strides` from `offset`
/// in the source. The axes integer arrays index are kept whole, grouped at `advanced_at` in the order of their
/// entries (the source axis of each in `advanced`), where their broadcast dims will go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct IndexView {
    pub offset: usize,
    pub shape: Vec<usize>,
    pub strides: Vec<isize>,
    pub advanced: Vec<usize>,
    pub advanced_at: usize,
}

impl IndexView {
    /// Whether the view is the source itself, element for element.
    pub(crate) fn is_whole(&self, source: &[usize]) -> bool {
        let contiguous = contiguous_strides_signed(source);
        self.offset == 0 && self.shape == source && self.strides == contiguous
    }
}

/// Signed element strides of a contiguous row-major tensor of `shape`.
pub(crate) fn contiguous_strides_signed(shape: &[usize]) -> Vec<isize> {
    let mut strides = vec![1isize; shape.len()];
    for axis in (0..shape.len().saturating_sub(1)).rev() {
        strides[axis] = strides[axis + 1] * shape[axis + 1] as isize;
    }
    strides
}

/// The first index, element count and step a Python slice takes of an axis of `len`, as `slice.indices` does.
pub(crate) fn slice_span(slice: Slice, len: usize) -> (i64, usize, i64) {
    let (len, step) = (len as i64, slice.step);
    let (lower, upper) = if step < 0 { (-1, len - 1) } else { (0, len) };
    let bound = |value: Option<i64>, default: i64| match value {
        None => default,
        Some(value) => {
            let value = if value < 0 {
                value.saturating_add(len)
            } else {
                value
            };
            value.clamp(lower, upper)
        }
    };
    let start = bound(slice.start, if step < 0 { upper } else { lower });
    let stop = bound(slice.stop, if step < 0 { lower } else { upper });
    let count = if step < 0 && stop < start {
        (start - stop - 1) / -step + 1
    } else if step > 0 && start < stop {
        (stop - start - 1) / step + 1
    } else {
        0
    };
    (start, count as usize, step)
}

/// An integer index into an axis of `len`, negative counting from the end, or an index error naming the axis.
pub(crate) fn wrap_index(op: &'static str, value: i64, axis: usize, len: usize) -> Result<usize> {
    let wrapped = if value < 0 {
        value.checked_add(len as i64)
    } else {
        Some(value)
    };
    match wrapped {
        Some(index) if (0..len as i64).contains(&index) => Ok(index as usize),
        _ => Err(index_error(
            op,
            format!("index {value} is out of bounds for axis {axis} with size {len}"),
        )),
    }
}

/// The view the basic entries of `items` take of a tensor of `shape` (masks already turned into the integer
/// arrays of their set positions), with NumPy's rules: one `...` at most, standing for as many whole axes as
/// the other entries leave (at the end if none is given); integers drop their axis (and, beside an integer
/// array, count as one for where the arrays' dims go).
pub(crate) fn index_view<A>(
    op: &'static str,
    shape: &[usize],
    items: &[IndexItem<'_, A>],
) -> Result<IndexView> {
    let consumed = items
        .iter()
        .filter(|item| !matches!(item, IndexItem::Ellipsis | IndexItem::NewAxis))
        .count();
    let ellipses = items
        .iter()
        .filter(|item| matches!(item, IndexItem::Ellipsis))
        .count();
    if ellipses > 1 {
        return Err(index_error(
            op,
            "an index can only have a single ellipsis ('...')".to_string(),
        ));
    }
    if consumed > shape.len() {
        return Err(index_error(
            op,
            format!(
                "too many indices: {consumed} given for a tensor of shape {shape:?} ({} axes)",
                shape.len()
            ),
        ));
    }
    let source_strides = contiguous_strides_signed(shape);
    let any_array = items.iter().any(IndexItem::is_array);
    // Each basic dim of the view (its size and stride), and `None` where an array's axis stands.
    let mut dims: Vec<Option<(usize, isize)>> = Vec::new();
    let mut advanced = Vec::new();
    let mut advanced_positions = Vec::new();
    let mut offset = 0i64;
    let mut axis = 0;
    let whole = IndexItem::<A>::Slice(Slice::ALL);
    let spread = shape.len() - consumed;
    let expanded = items.iter().flat_map(|item| match item {
        IndexItem::Ellipsis => std::iter::repeat_n(&whole, spread).collect::<Vec<_>>(),
        item => vec![item],
    });
    let trailing = std::iter::repeat_n(&whole, if ellipses == 0 { spread } else { 0 });
    for (position, item) in expanded.chain(trailing).enumerate() {
        match item {
            IndexItem::Int(value) => {
                let index = wrap_index(op, *value, axis, shape[axis])?;
                offset += index as i64 * source_strides[axis] as i64;
                if any_array {
                    advanced_positions.push(position);
                }
                axis += 1;
            }
            IndexItem::Slice(slice) => {
                if slice.step == 0 {
                    return Err(index_error(op, format!("slice step cannot be zero (axis {axis})")));
                }
                let (start, count, step) = slice_span(*slice, shape[axis]);
                if count > 0 {
                    offset += start * source_strides[axis] as i64;
                }
                dims.push(Some((count, step as isize * source_strides[axis])));
                axis += 1;
            }
            IndexItem::NewAxis => dims.push(Some((1, 0))),
            IndexItem::Array(_) | IndexItem::HostArray(_) => {
                advanced.push(axis);
                advanced_positions.push(position);
                dims.push(None);
                axis += 1;
            }
            IndexItem::Mask(_) | IndexItem::HostMask(_) | IndexItem::Ellipsis => {
                return Err(index_error(
                    op,
                    "a mask stands for the integer arrays of its set positions before the view is taken"
                        .to_string(),
                ))
            }
        }
    }
    let adjacent = advanced_positions
        .windows(2)
        .all(|pair| pair[1] == pair[0] + 1);
    let advanced_at = if adjacent {
        dims.iter().position(Option::is_none).map_or(0, |first| {
            dims[..first].iter().filter(|dim| dim.is_some()).count()
        })
    } else {
        0
    };
    let mut basic: Vec<(usize, isize)> = dims.into_iter().flatten().collect();
    let grouped = advanced
        .iter()
        .map(|&axis| (shape[axis], source_strides[axis]));
    basic.splice(advanced_at..advanced_at, grouped);
    let (view_shape, strides) = basic.into_iter().unzip();
    Ok(IndexView {
        offset: offset as usize,
        shape: view_shape,
        strides,
        advanced,
        advanced_at,
    })
}

// --- what the kernels read ---

/// A shape padded at the front to [`MAX_RANK`] axes, as the kernels' `dims` read it.
pub(crate) fn padded_dims(shape: &[usize]) -> [u32; MAX_RANK] {
    padded_front(shape, 1)
}

/// `values` at the back of a [`MAX_RANK`]-long array whose front holds `fill` (1 for sizes, 0 for strides).
pub(crate) fn padded_front(values: &[usize], fill: u32) -> [u32; MAX_RANK] {
    let mut padded = [fill; MAX_RANK];
    padded[MAX_RANK - values.len()..]
        .iter_mut()
        .zip(values)
        .for_each(|(slot, &value)| *slot = value as u32);
    padded
}

/// Strides that read an operand of `shape` at an output's coordinates (0 along broadcast axes).
pub(crate) fn broadcast_strides(shape: &[usize]) -> [u32; MAX_RANK] {
    let dims = padded_dims(shape);
    let mut strides = [0u32; MAX_RANK];
    let mut stride = 1u32;
    for axis in (0..MAX_RANK).rev() {
        // A size-1 axis is read at coordinate 0 whatever the output's coordinate.
        strides[axis] = if dims[axis] == 1 { 0 } else { stride };
        stride *= dims[axis];
    }
    strides
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_broadcast_like_numpy() {
        assert_eq!(
            broadcast_shape(&[10, 1000], &[1000]).ok(),
            Some(vec![10, 1000])
        );
        assert_eq!(broadcast_shape(&[3, 1], &[1, 4]).ok(), Some(vec![3, 4]));
        assert_eq!(broadcast_shape(&[], &[2, 2]).ok(), Some(vec![2, 2]));
        assert_eq!(broadcast_shape(&[0, 5], &[5]).ok(), Some(vec![0, 5]));
        assert!(broadcast_shape(&[3], &[4]).is_err());
        assert!(broadcast_shape(&[2, 3, 5, 7], &[4, 1, 1, 1]).is_err());
    }

    #[test]
    fn binary_shapes_name_the_op_and_both_operands() {
        match binary_shape(BinaryOp::Sub, &[3, 4], &[3]) {
            Err(Error::Shape { op, message }) => {
                assert_eq!(op, "sub");
                assert!(
                    message.contains("[3, 4]") && message.contains("[3]"),
                    "{message}"
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(binary_shape(BinaryOp::Add, &[1; MAX_RANK + 1], &[1]).is_err());
        assert!(binary_shape(BinaryOp::Add, &[1; MAX_RANK], &[1]).is_ok());
    }

    #[test]
    fn matmul_shapes_follow_the_transposes_and_the_batch() {
        let shape =
            |lhs: &[usize], rhs: &[usize], transpose| matmul_shape(lhs, rhs, transpose).ok();
        assert_eq!(
            shape(&[3, 4], &[4, 5], Transpose::Neither),
            Some(vec![3, 5])
        );
        assert_eq!(shape(&[4, 3], &[4, 5], Transpose::Left), Some(vec![3, 5]));
        assert_eq!(shape(&[3, 4], &[5, 4], Transpose::Right), Some(vec![3, 5]));
        assert_eq!(shape(&[4, 3], &[5, 4], Transpose::Both), Some(vec![3, 5]));
        assert_eq!(
            shape(&[2, 3, 4], &[4, 5], Transpose::Neither),
            Some(vec![2, 3, 5])
        );
        assert_eq!(
            shape(&[3, 4], &[2, 4, 5], Transpose::Neither),
            Some(vec![2, 3, 5])
        );
        assert_eq!(shape(&[3, 4], &[5, 2], Transpose::Neither), None);
        assert_eq!(shape(&[2, 3, 4], &[3, 4, 5], Transpose::Neither), None);
        assert_eq!(shape(&[4], &[4, 5], Transpose::Neither), Some(vec![5]));
        assert_eq!(shape(&[3, 4], &[4], Transpose::Neither), Some(vec![3]));
        assert_eq!(shape(&[4], &[4], Transpose::Neither), Some(vec![]));
        assert_eq!(shape(&[4], &[5], Transpose::Neither), None);
        assert_eq!(shape(&[], &[4], Transpose::Neither), None);
        assert_eq!(
            shape(&[1, 2, 3, 4], &[4, 5], Transpose::Neither),
            Some(vec![1, 2, 3, 5])
        );
        assert_eq!(
            shape(&[3, 1, 2, 4], &[5, 4, 6], Transpose::Neither),
            Some(vec![3, 5, 2, 6])
        );
        assert_eq!(
            shape(&[3, 2, 4], &[2, 1, 4, 6], Transpose::Neither),
            Some(vec![2, 3, 2, 6])
        );
        let dims = matmul_dims(&[4, 3], &[2, 4, 5], Transpose::Left).unwrap();
        assert_eq!(
            (dims.m, dims.k, dims.n, dims.batch.clone()),
            (3, 4, 5, vec![2])
        );
        assert_eq!((dims.lhs, dims.rhs), ((4, 3, vec![]), (4, 5, vec![2])));
    }

    #[test]
    fn lanes_surround_the_axis() {
        let (lanes_1, rest) = lanes("t", &[2, 3, 4], Some(1)).unwrap();
        assert_eq!((lanes_1.outer, lanes_1.len, lanes_1.inner), (2, 3, 4));
        assert_eq!(rest, vec![2, 4]);
        let (all, rest) = lanes("t", &[2, 3, 4], None).unwrap();
        assert_eq!((all.outer, all.len, all.inner, rest.len()), (1, 24, 1, 0));
        assert!(lanes("t", &[2], Some(1)).is_err());
    }

    #[test]
    fn reductions_refuse_bad_axes_and_lanes_of_nothing_without_an_answer() {
        assert_eq!(
            reduce_shape(ReduceOp::Prod, &[2, 3], Some(0)).ok(),
            Some(vec![3])
        );
        assert!(reduce_shape(ReduceOp::Prod, &[2, 3], Some(2)).is_err());
        assert!(reduce_shape(ReduceOp::Sum, &[], Some(0)).is_err());
        assert_eq!(reduce_shape(ReduceOp::Mean, &[0], None).ok(), Some(vec![]));
        assert!(reduce_shape(ReduceOp::Min, &[0], None).is_err());
        // Along a non-empty axis of an empty tensor there is nothing to compute and nothing undefined.
        assert_eq!(
            reduce_shape(ReduceOp::Max, &[0, 3], Some(1)).ok(),
            Some(vec![0])
        );
        assert!(argmax_shape(&[3, 0], Some(1)).is_err());
        assert!(matches!(
            argmin_shape(&[2], Some(1)),
            Err(Error::Shape { op: "argmin", .. })
        ));
    }

    #[test]
    fn softmax_needs_a_last_axis_of_something() {
        assert_eq!(softmax_rows("t", &[2, 3, 4]).ok(), Some((6, 4)));
        assert!(softmax_shape(&[]).is_err());
        assert!(softmax_shape(&[3, 0]).is_err());
        assert!(softmax_shape(&[MAX_COLS + 1]).is_err());
        assert_eq!(
            softmax_cross_entropy_shapes(&[2, 3, 4], &[2, 3, 4]).ok(),
            Some((vec![2, 3], vec![2, 3, 4]))
        );
        assert!(softmax_cross_entropy_shapes(&[3, 4], &[12]).is_err());
        assert!(softmax_cross_entropy_shapes(&[], &[]).is_err());
    }

    #[test]
    fn adam_gradients_are_one_update_or_a_stack_of_them() {
        assert_eq!(adam_update_count(&[], &[]).ok(), Some(1));
        assert_eq!(adam_update_count(&[], &[7]).ok(), Some(7));
        assert_eq!(adam_update_count(&[2, 3], &[0, 2, 3]).ok(), Some(0));
        assert_eq!(
            adam_update_count(&[1, 1, 1, 1], &[2, 1, 1, 1, 1]).ok(),
            Some(2)
        );
        assert!(adam_update_count(&[2, 3], &[3, 2]).is_err());
        assert!(adam_update_count(&[2, 3], &[2, 3, 1]).is_err());
        assert!(adam_update_count(&[1; MAX_RANK + 1], &[1; MAX_RANK + 1]).is_err());
        assert!(adam_operand_shape("m", &[2, 3], &[6]).is_err());
    }

    #[test]
    fn element_counts_refuse_overflow_and_high_ranks() {
        assert_eq!(element_count("t", &[]).ok(), Some(1));
        assert_eq!(element_count("t", &[3, 0, 5]).ok(), Some(0));
        assert!(element_count("t", &[usize::MAX, 2]).is_err());
        assert_eq!(element_count("t", &[1; MAX_RANK]).ok(), Some(1));
        assert!(element_count("t", &[1; MAX_RANK + 1]).is_err());
    }

    #[test]
    fn broadcast_strides_are_zero_along_stretched_axes() {
        assert_eq!(broadcast_strides(&[4]), [0, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(broadcast_strides(&[2, 1, 4]), [0, 0, 0, 0, 0, 4, 0, 1]);
        assert_eq!(broadcast_strides(&[2, 3, 4]), [0, 0, 0, 0, 0, 12, 4, 1]);
        assert_eq!(
            broadcast_strides(&[2, 1, 3, 1, 5, 1, 7, 2]),
            [210, 0, 70, 0, 14, 0, 2, 1]
        );
    }
}
