//! Moving data on the device: permute and transpose, narrow, concatenate, row gathers by a u32 index tensor,
//! one-hot, the casts between f32 and u32, and single values read back. Each result is a new contiguous tensor
//! (a copy; kernels take contiguous operands).

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::elementwise;
use crate::kernels::layout::{self, contiguous_strides, Cast, Strided};
use crate::shape::{element_count, MAX_RANK};
use crate::tensor::{Op, Tensor};

fn shape_error(op: &'static str, message: String) -> Error {
    Error::Shape { op, message }
}

fn expect_axis(op: &'static str, shape: &[usize], axis: usize) -> Result<()> {
    if axis < shape.len() {
        Ok(())
    } else {
        Err(shape_error(
            op,
            format!("axis {axis} is out of range for shape {shape:?}"),
        ))
    }
}

impl Tensor {
    /// The axes reordered: axis `i` of the result is axis `axes[i]` of this tensor (NumPy's `transpose(axes)`).
    ///
    /// ```
    /// use wgcompute::{Session, SessionOptions};
    /// # fn main() -> wgcompute::Result<()> {
    /// let session = Session::open(SessionOptions::default())?;
    /// let x = session.upload(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])?;
    /// assert_eq!(x.permute(&[1, 0])?.to_vec()?, vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    /// # Ok(()) }
    /// ```
    pub fn permute(&self, axes: &[usize]) -> Result<Tensor> {
        const NAME: &str = "permute";
        let shape = self.shape();
        let mut seen = [false; MAX_RANK];
        let valid = axes.len() == shape.len()
            && axes
                .iter()
                .all(|&axis| axis < shape.len() && !std::mem::replace(&mut seen[axis], true));
        if !valid {
            return Err(shape_error(
                NAME,
                format!(
                    "axes {axes:?} are not a permutation of the {} axes of shape {shape:?}",
                    shape.len()
                ),
            ));
        }
        let in_strides = contiguous_strides(shape);
        let out_shape: Vec<usize> = axes.iter().map(|&axis| shape[axis]).collect();
        let src_strides: Vec<usize> = axes.iter().map(|&axis| in_strides[axis]).collect();
        let out = self.output(NAME, &out_shape, self.dtype())?;
        let dst_strides = contiguous_strides(&out_shape);
        self.copy_strided(NAME, (0, &src_strides), &out, (0, &dst_strides), &out_shape)?;
        Tensor::record(&[self], out, |nodes| Op::Permute {
            x: nodes[0],
            axes: axes.to_vec(),
        })
    }

    /// Axes `first` and `second` swapped (`x.transpose(0, 1)` of a matrix is its transpose).
    pub fn transpose(&self, first: usize, second: usize) -> Result<Tensor> {
        for axis in [first, second] {
            expect_axis("transpose", self.shape(), axis)?;
        }
        let mut axes: Vec<usize> = (0..self.shape().len()).collect();
        axes.swap(first, second);
        self.permute(&axes)
    }

    /// The `len` entries from `start` along `axis` (PyTorch's `narrow`; `x[start:start+len]` along it).
    pub fn narrow(&self, axis: usize, start: usize, len: usize) -> Result<Tensor> {
        let value = self.narrowed(axis, start, len)?;
        Tensor::record(&[self], value, |nodes| Op::Narrow {
            x: nodes[0],
            axis,
            start,
        })
    }

    fn narrowed(&self, axis: usize, start: usize, len: usize) -> Result<Tensor> {
        const NAME: &str = "narrow";
        let shape = self.shape();
        expect_axis(NAME, shape, axis)?;
        if start.checked_add(len).is_none_or(|end| end > shape[axis]) {
            return Err(shape_error(
                NAME,
                format!(
                    "entries {start}..{} are outside axis {axis} of shape {shape:?}",
                    start.saturating_add(len)
                ),
            ));
        }
        let mut out_shape = shape.to_vec();
        out_shape[axis] = len;
        let out = self.output(NAME, &out_shape, self.dtype())?;
        let in_strides = contiguous_strides(shape);
        let dst_strides = contiguous_strides(&out_shape);
        self.copy_strided(
            NAME,
            (start * in_strides[axis], &in_strides),
            &out,
            (0, &dst_strides),
            &out_shape,
        )?;
        Ok(out)
    }

    /// Writes this tensor into `target` from `start` along `axis` (the other axes equal): the inverse of
    /// [`Tensor::narrow`], used by concatenation and by the gradient of a narrow.
    pub(crate) fn write_into(&self, target: &Tensor, axis: usize, start: usize) -> Result<()> {
        const NAME: &str = "concat";
        let strides = contiguous_strides(target.shape());
        let src_strides = contiguous_strides(self.shape());
        self.copy_strided(
            NAME,
            (0, &src_strides),
            target,
            (start * strides[axis], &strides),
            self.shape(),
        )
    }

    /// Copies the elements of `shape`, read from this tensor at (offset, strides) `from`, into `target` at
    /// (offset, strides) `to`: the one kernel behind permute, narrow, concatenation and the shape ops of
    /// `manipulate` (tile, pad, stack).
    pub(super) fn copy_strided(
        &self,
        name: &'static str,
        (from_offset, from_strides): (usize, &[usize]),
        target: &Tensor,
        (to_offset, to_strides): (usize, &[usize]),
        shape: &[usize],
    ) -> Result<()> {
        let (source, range) = (self.range()?, target.range()?);
        self.with_runtime(|runtime| {
            layout::strided_copy(
                runtime,
                name,
                Strided {
                    range: source,
                    offset: from_offset,
                    strides: from_strides,
                },
                Strided {
                    range,
                    offset: to_offset,
                    strides: to_strides,
                },
                shape,
            )
        })
    }

    /// The tensors joined along `axis`; all have the same dtype, rank and sizes along the other axes
    /// (`numpy.concatenate`).
    pub fn concat(parts: &[&Tensor], axis: usize) -> Result<Tensor> {
        let value = Tensor::joined(parts, axis)?;
        Tensor::record(parts, value, |nodes| Op::Concat {
            parts: nodes.to_vec(),
            axis,
        })
    }

    fn joined(parts: &[&Tensor], axis: usize) -> Result<Tensor> {
        const NAME: &str = "concat";
        let Some(first) = parts.first() else {
            return Err(shape_error(NAME, "needs at least one tensor".to_string()));
        };
        expect_axis(NAME, first.shape(), axis)?;
        let mut out_shape = first.shape().to_vec();
        out_shape[axis] = 0;
        for part in parts {
            first.expect_same_session(NAME, part)?;
            part.expect_dtype(NAME, first.dtype())?;
            let fits = part.shape().len() == first.shape().len()
                && part
                    .shape()
                    .iter()
                    .zip(first.shape())
                    .enumerate()
                    .all(|(index, (a, b))| index == axis || a == b);
            if !fits {
                return Err(shape_error(
                    NAME,
                    format!(
                        "shape {:?} does not join shape {:?} along axis {axis}: the other axes must agree",
                        part.shape(),
                        first.shape()
                    ),
                ));
            }
            out_shape[axis] += part.shape()[axis];
        }
        let out = first.output(NAME, &out_shape, first.dtype())?;
        let mut start = 0;
        for part in parts {
            part.write_into(&out, axis, start)?;
            start += part.shape()[axis];
        }
        Ok(out)
    }

    /// Rows of this tensor picked by a u32 index tensor: the result has the indices' shape followed by this
    /// tensor's shape after its first axis (an embedding lookup, or a minibatch drawn from a dataset). An index
    /// past the last row gives a row of NaN. The table may be larger than one storage binding; the indices and
    /// the result may not.
    ///
    /// ```
    /// use wgcompute::{Session, SessionOptions};
    /// # fn main() -> wgcompute::Result<()> {
    /// let session = Session::open(SessionOptions::default())?;
    /// let table = session.upload(&[0.0, 0.5, 1.0, 1.5, 2.0, 2.5], &[3, 2])?;
    /// let picked = table.gather_rows(&session.upload_u32(&[2, 0, 2], &[3])?)?;
    /// assert_eq!(picked.to_vec()?, vec![2.0, 2.5, 0.0, 0.5, 2.0, 2.5]);
    /// # Ok(()) }
    /// ```
    pub fn gather_rows(&self, indices: &Tensor) -> Result<Tensor> {
        let value = self.gathered_rows(indices)?;
        Tensor::record(&[self, indices], value, |nodes| Op::GatherRows {
            table: nodes[0],
            indices: nodes[1],
        })
    }

    fn gathered_rows(&self, indices: &Tensor) -> Result<Tensor> {
        const NAME: &str = "gather_rows";
        self.expect_same_session(NAME, indices)?;
        indices.expect_dtype(NAME, DType::U32)?;
        let Some((&rows, row_shape)) = self.shape().split_first() else {
            return Err(shape_error(
                NAME,
                "gathers rows of a tensor of rank 1 or more; got a 0-d tensor".to_string(),
            ));
        };
        let out_shape: Vec<usize> = indices.shape().iter().chain(row_shape).copied().collect();
        element_count(NAME, &out_shape)?;
        let out = self.output(NAME, &out_shape, self.dtype())?;
        if out.is_empty() {
            return Ok(out);
        }
        let (table, index_range, target) = (self.range()?, indices.range()?, out.range()?);
        if self.is_empty() {
            // Every index is past the end of an empty table. (A dispatch over an empty binding runs nothing.)
            let words = out.len() as u64;
            return self
                .with_runtime(|runtime| elementwise::fill(runtime, target, words, f32::NAN))
                .map(|()| out);
        }
        let row_words = row_shape.iter().product();
        self.with_runtime(|runtime| {
            layout::gather_rows(runtime, NAME, table, (rows, row_words), index_range, target)
        })?;
        Ok(out)
    }

    /// One-hot f32 rows from u32 class ids: the ids' shape followed by `classes`, 1 at each id and 0 elsewhere
    /// (an id of `classes` or more gives a row of zeros).
    pub fn one_hot(&self, classes: usize) -> Result<Tensor> {
        const NAME: &str = "one_hot";
        self.expect_dtype(NAME, DType::U32)?;
        if classes == 0 || u32::try_from(classes).is_err() {
            return Err(Error::InvalidArgument {
                what: "one_hot classes",
                given: classes.to_string(),
                expected: "at least 1 and below 2^32".to_string(),
            });
        }
        let out_shape: Vec<usize> = self.shape().iter().copied().chain([classes]).collect();
        let out = self.output(NAME, &out_shape, DType::F32)?;
        if out.is_empty() {
            return Ok(out);
        }
        let (ids, target) = (self.range()?, out.range()?);
        self.with_runtime(|runtime| layout::one_hot(runtime, NAME, ids, classes, target))?;
        Ok(out)
    }

    /// One-hot f32 rows of the u32 class ids at `indices` (rows of this 1-D tensor of ids): what
    /// `self.gather_rows(indices)?.one_hot(classes)` gives, in one pass. An index past the ids or an id of
    /// `classes` or more gives a row of zeros.
    pub(crate) fn one_hot_gathered(&self, indices: &Tensor, classes: usize) -> Result<Tensor> {
        const NAME: &str = "one_hot";
        self.expect_same_session(NAME, indices)?;
        self.expect_dtype(NAME, DType::U32)?;
        indices.expect_dtype(NAME, DType::U32)?;
        if self.shape().len() != 1 || indices.shape().len() != 1 {
            return Err(Error::Shape {
                op: NAME,
                message: format!(
                    "gathered one-hot rows take 1-D ids and indices, not {:?} and {:?}",
                    self.shape(),
                    indices.shape()
                ),
            });
        }
        if classes == 0 || u32::try_from(classes).is_err() || u32::try_from(self.len()).is_err() {
            return Err(Error::InvalidArgument {
                what: "one_hot classes",
                given: format!("{classes} classes of {} ids", self.len()),
                expected: "at least 1 class, and classes and ids below 2^32".to_string(),
            });
        }
        let out = self.output(NAME, &[indices.len(), classes], DType::F32)?;
        if out.is_empty() || self.is_empty() {
            if !out.is_empty() {
                out.fill_(0.0)?;
            }
            return Ok(out);
        }
        let (ids, picks, target) = (self.range()?, indices.range()?, out.range()?);
        self.with_runtime(|runtime| {
            layout::one_hot_gathered(runtime, NAME, (ids, self.len()), picks, classes, target)
        })?;
        Ok(out)
    }

    /// This tensor as `dtype` (the standard's `astype`): float32 → an integer as Rust's `as` does (toward
    /// zero, saturating at the integer's range, NaN to 0); an integer → float32 to the nearest f32 (exact within
    /// ±2^24); int32 ↔ uint32 keeps the bits (wraps, as NumPy's astype); anything → bool is `!= 0` (NaN is
    /// true, -0.0 false); bool → a number is 0 or 1. The same dtype gives a copy.
    pub fn cast(&self, dtype: DType) -> Result<Tensor> {
        let direction = match (self.dtype(), dtype) {
            (DType::F32, DType::F32) | (DType::Bool, DType::Bool) => return self.try_clone(),
            (DType::F32, DType::U32) => Cast::F32ToU32,
            (DType::U32 | DType::Bool, DType::F32) => Cast::U32ToF32,
            (DType::F32, DType::I32) => Cast::F32ToI32,
            (DType::I32, DType::F32) => Cast::I32ToF32,
            (DType::F32, DType::Bool) => Cast::F32ToBool,
            (DType::I32 | DType::U32, DType::Bool) => Cast::WordToBool,
            (from, to @ (DType::I32 | DType::U32)) if from == to => return self.try_clone(),
            (DType::I32 | DType::U32 | DType::Bool, DType::I32 | DType::U32) => {
                return self.copy_words_as(dtype)
            }
        };
        let out = self.output("cast", self.shape(), dtype)?;
        let (source, target) = (self.range()?, out.range()?);
        self.with_runtime(|runtime| layout::cast(runtime, direction, source, target))?;
        Ok(out)
    }

    /// The one value of a 0-d or one-element f32 tensor (a loss, say), read back.
    pub fn item(&self) -> Result<f32> {
        self.expect_dtype("item", DType::F32)?;
        self.expect_single("item")?;
        Ok(self.read_range(0..1)?[0])
    }

    /// The one value of a 0-d or one-element u32 tensor (an argmax over all elements, say), read back.
    pub fn item_u32(&self) -> Result<u32> {
        self.expect_dtype("item_u32", DType::U32)?;
        self.expect_single("item_u32")?;
        Ok(self.to_vec_u32()?[0])
    }

    fn expect_single(&self, op: &'static str) -> Result<()> {
        if self.len() == 1 {
            Ok(())
        } else {
            Err(shape_error(
                op,
                format!(
                    "needs a tensor of exactly one element; got shape {:?} ({} elements): reduce it first or \
                     read it with to_vec",
                    self.shape(),
                    self.len()
                ),
            ))
        }
    }
}
