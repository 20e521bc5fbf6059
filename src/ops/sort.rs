//! Sorting and searching: sort and argsort along any axis (stable), top-k, searchsorted, nonzero and
//! unique_values; and the gradient of a sort or top-k, for the tape.
//!
//! The order is NumPy's and the Array API's: −0.0 and 0.0 compare equal (and keep their order, the sort being
//! stable), NaN sorts after +inf ascending and before everything descending, and equal elements keep their
//! order in both directions. Indices are u32 tensors.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::elementwise;
use crate::kernels::sort::{self, Keys, Marks, SortInput, TopKPlan, Work};
use crate::op::sort::Side;
use crate::shape::{element_count, lanes, Lanes};
use crate::tensor::{Op, Tensor};

fn expect_sortable(tensor: &Tensor, op: &'static str) -> Result<Keys> {
    element_count(op, tensor.shape())?;
    Ok(Keys::of(tensor.dtype()))
}

fn lanes_along(tensor: &Tensor, op: &'static str, axis: usize) -> Result<Lanes> {
    if tensor.shape().is_empty() {
        return Err(Error::Shape {
            op,
            message: "a 0-d tensor has no axis to sort along; reshape it to [1]".to_string(),
        });
    }
    lanes(op, tensor.shape(), Some(axis)).map(|(view, _)| view)
}

fn work(tensor: &Tensor, op: &'static str, entries: u64) -> Result<(Tensor, Tensor)> {
    let entries = [entries as usize];
    Ok((
        tensor.output(op, &entries, DType::U32)?,
        tensor.output(op, &entries, DType::U32)?,
    ))
}

fn work_ranges(pair: &(Tensor, Tensor)) -> Result<Work> {
    Ok(Work {
        keys: pair.0.range()?,
        indices: pair.1.range()?,
    })
}

/// Sorting and searching.
impl Tensor {
    /// The elements sorted along `axis`, ascending or `descending`, stably, with the indices along the axis
    /// that sort them (u32): `values[.., i, ..] = self[.., indices[.., i, ..], ..]`. f32 or u32.
    ///
    /// ```
    /// use wgcompute::{Session, SessionOptions};
    /// # fn main() -> wgcompute::Result<()> {
    /// let session = Session::open(SessionOptions::default())?;
    /// let x = session.upload(&[3.0, f32::NAN, -1.0, 3.0], &[4])?;
    /// let (values, indices) = x.sort_with_indices(0, false)?;
    /// assert_eq!(indices.to_vec_u32()?, vec![2, 0, 3, 1]);
    /// assert!(values.to_vec()?[3].is_nan());
    /// # Ok(()) }
    /// ```
    pub fn sort_with_indices(&self, axis: usize, descending: bool) -> Result<(Tensor, Tensor)> {
        let (values, indices) = self.sorted_with_indices(axis, descending)?;
        let values = Tensor::record_picks(self, values, &indices, axis)?;
        Ok((values, indices))
    }

    fn sorted_with_indices(&self, axis: usize, descending: bool) -> Result<(Tensor, Tensor)> {
        const NAME: &str = "sort";
        let keys = expect_sortable(self, NAME)?;
        let view = lanes_along(self, NAME, axis)?;
        let values = self.output(NAME, self.shape(), self.dtype())?;
        let indices = self.output(NAME, self.shape(), DType::U32)?;
        if self.is_empty() {
            return Ok((values, indices));
        }
        let entries =
            self.with_runtime(|runtime| sort::sort_work_entries(NAME, runtime.limits(), view))?;
        let buffers = work(self, NAME, entries)?;
        let input = SortInput {
            range: self.range()?,
            lanes: view,
            keys,
        };
        let (work, out) = (work_ranges(&buffers)?, (values.range()?, indices.range()?));
        self.with_runtime(|runtime| sort::sort(runtime, input, descending, work, out))?;
        Ok((values, indices))
    }

    /// The elements sorted along `axis` (see [`Tensor::sort_with_indices`]).
    pub fn sort(&self, axis: usize, descending: bool) -> Result<Tensor> {
        self.sort_with_indices(axis, descending)
            .map(|(values, _)| values)
    }

    /// The indices along `axis` that sort the elements, stably (see [`Tensor::sort_with_indices`]), as u32.
    pub fn argsort(&self, axis: usize, descending: bool) -> Result<Tensor> {
        // Integer indices carry no gradient: nothing is recorded, even of a traced tensor.
        self.share()
            .sort_with_indices(axis, descending)
            .map(|(_, indices)| indices)
    }

    /// The `k` largest elements along `axis` (the `k` smallest unless `largest`), in order, with their indices
    /// (u32): `torch.topk(x, k, dim=axis, largest, sorted=True)`. Ties go to the lower index, NaN counts as
    /// larger than every number (as in a descending sort); `k` may be 0 and at most the axis' length.
    /// Cheaper than a sort where k is small against the axis: blocks of 2,048 are cut to k's next power of
    /// two in workgroup memory, and again, until one group per lane is left.
    pub fn top_k(&self, k: usize, axis: usize, largest: bool) -> Result<(Tensor, Tensor)> {
        let (values, indices) = self.top_k_values(k, axis, largest)?;
        let values = Tensor::record_picks(self, values, &indices, axis)?;
        Ok((values, indices))
    }

    /// Records values picked from `x` along `axis` at `indices` (a sort's permutation, a top-k's picks): the
    /// gradient goes back to where they came from.
    fn record_picks(x: &Tensor, values: Tensor, indices: &Tensor, axis: usize) -> Result<Tensor> {
        if !x.is_traced() {
            return Ok(values);
        }
        let indices = indices.share();
        Tensor::record(&[x], values, |nodes| Op::Sort {
            x: nodes[0],
            axis,
            indices,
        })
    }

    fn top_k_values(&self, k: usize, axis: usize, largest: bool) -> Result<(Tensor, Tensor)> {
        const NAME: &str = "top_k";
        let keys = expect_sortable(self, NAME)?;
        let view = lanes_along(self, NAME, axis)?;
        if k as u64 > view.len {
            return Err(Error::Shape {
                op: NAME,
                message: format!(
                    "k = {k} is more than the {} elements along axis {axis} of shape {:?}",
                    view.len,
                    self.shape()
                ),
            });
        }
        let mut out_shape = self.shape().to_vec();
        out_shape[axis] = k;
        let values = self.output(NAME, &out_shape, self.dtype())?;
        let indices = self.output(NAME, &out_shape, DType::U32)?;
        if values.is_empty() {
            return Ok((values, indices));
        }
        let (plan, first) =
            self.with_runtime(|runtime| sort::top_k_plan(NAME, runtime.limits(), view, k as u64))?;
        let second = match plan {
            TopKPlan::Select { second, .. } => second,
            TopKPlan::Sort => 1,
        };
        let (a, b) = (work(self, NAME, first)?, work(self, NAME, second)?);
        let input = SortInput {
            range: self.range()?,
            lanes: view,
            keys,
        };
        let works = (work_ranges(&a)?, work_ranges(&b)?);
        let out = (values.range()?, indices.range()?);
        self.with_runtime(|runtime| {
            sort::top_k(runtime, input, (k as u64, largest), plan, works, out)
        })?;
        Ok((values, indices))
    }

    /// The gradient of a sort or top-k along `axis` with respect to its input of `len` elements along it:
    /// this upstream gradient (f32, the indices' shape) placed where `indices` point, zero elsewhere.
    pub(crate) fn scatter_along(
        &self,
        indices: &Tensor,
        axis: usize,
        len: usize,
    ) -> Result<Tensor> {
        const NAME: &str = "sort backward";
        self.expect_same_session(NAME, indices)?;
        self.expect_dtype(NAME, DType::F32)?;
        indices.expect_dtype(NAME, DType::U32)?;
        if indices.shape() != self.shape() {
            return Err(Error::Shape {
                op: NAME,
                message: format!(
                    "the gradient's shape {:?} is not its indices' {:?}",
                    self.shape(),
                    indices.shape()
                ),
            });
        }
        let kept = lanes_along(self, NAME, axis)?;
        let mut shape = self.shape().to_vec();
        shape[axis] = len;
        let target = self.output(NAME, &shape, DType::F32)?;
        if kept.len < len as u64 {
            target.fill_(0.0)?;
        }
        if self.is_empty() {
            return Ok(target);
        }
        let view = Lanes {
            len: len as u64,
            ..kept
        };
        let ranges = (self.range()?, indices.range()?);
        let target_range = target.range()?;
        self.with_runtime(|runtime| {
            sort::scatter_back(runtime, view, kept.len, ranges, target_range)
        })?;
        Ok(target)
    }

    /// Where each element of `needles` would go in this sorted 1-D tensor to keep it sorted
    /// (`searchsorted(x1, x2, side=, sorter=)`): on `side` of equal elements, in the sort's order (NaN last).
    /// With `sorter` (u32 indices that sort this tensor, as argsort gives), the tensor need not be sorted
    /// itself; a sorter entry out of range is read as the last position. One binary search per needle on the
    /// device; the result (u32) has the needles' shape.
    pub fn searchsorted(
        &self,
        needles: &Tensor,
        side: Side,
        sorter: Option<&Tensor>,
    ) -> Result<Tensor> {
        const NAME: &str = "searchsorted";
        self.expect_same_session(NAME, needles)?;
        let keys = expect_sortable(self, NAME)?;
        needles.expect_dtype(NAME, self.dtype())?;
        if self.shape().len() != 1 {
            return Err(Error::Shape {
                op: NAME,
                message: format!("searches a 1-D sorted tensor; got shape {:?}", self.shape()),
            });
        }
        if let Some(sorter) = sorter {
            self.expect_same_session(NAME, sorter)?;
            sorter.expect_dtype(NAME, DType::U32)?;
            if sorter.shape() != self.shape() {
                return Err(Error::Shape {
                    op: NAME,
                    message: format!(
                        "a sorter has the sorted tensor's shape {:?}; got {:?}",
                        self.shape(),
                        sorter.shape()
                    ),
                });
            }
        }
        let out = self.output(NAME, needles.shape(), DType::U32)?;
        if out.is_empty() {
            return Ok(out);
        }
        if self.is_empty() {
            // Every needle goes at 0; zero bits are u32 zeros.
            let (target, elements) = (out.range()?, out.len() as u64);
            self.with_runtime(|runtime| elementwise::fill(runtime, target, elements, 0.0))?;
            return Ok(out);
        }
        let sorted = (self.range()?, self.len() as u64);
        let sorter = sorter.map(Tensor::range).transpose()?;
        let needles_range = (needles.range()?, needles.len() as u64);
        let target = out.range()?;
        self.with_runtime(|runtime| {
            sort::search(runtime, sorted, sorter, needles_range, keys, side, target)
        })?;
        Ok(out)
    }

    /// The indices of the nonzero elements (NaN is nonzero, −0.0 is not), one u32 tensor per axis, in
    /// row-major order (`nonzero(x)`); a 0-d tensor is refused, as the standard asks. The number of them is
    /// read back once, to size the outputs.
    pub fn nonzero(&self) -> Result<Vec<Tensor>> {
        const NAME: &str = "nonzero";
        let keys = expect_sortable(self, NAME)?;
        if self.shape().is_empty() {
            return Err(Error::Shape {
                op: NAME,
                message: "nonzero of a 0-d tensor is undefined; reshape it to [1]".to_string(),
            });
        }
        let shape = self.shape().to_vec();
        let coordinates = self.compacted(NAME, keys, Marks::Nonzero(&shape), shape.len())?;
        let kept = coordinates.len() / shape.len();
        (0..shape.len())
            .map(|axis| {
                coordinates
                    .share()
                    .into_shape(&[shape.len(), kept])?
                    .narrow(0, axis, 1)?
                    .into_shape(&[kept])
            })
            .collect()
    }

    /// The distinct elements, sorted ascending (`unique_values(x)`), flattened: every NaN is distinct and kept,
    /// −0.0 and 0.0 are one (the first in the input). Sorts, then keeps the first of each run; the number of
    /// distinct elements is read back once, to size the output.
    pub fn unique_values(&self) -> Result<Tensor> {
        const NAME: &str = "unique_values";
        let keys = expect_sortable(self, NAME)?;
        // Distinct values carry no gradient: nothing is recorded, even of a traced tensor.
        let sorted = self.share().into_shape(&[self.len()])?.sort(0, false)?;
        let distinct = sorted.compacted(NAME, keys, Marks::Distinct, 1)?;
        Ok(distinct)
    }

    /// The kept elements as `marks` says, `per_kept` u32 (or this tensor's dtype for distinct values) words
    /// each: counted, the count read back, then written.
    fn compacted(
        &self,
        op: &'static str,
        keys: Keys,
        marks: Marks<'_>,
        per_kept: usize,
    ) -> Result<Tensor> {
        let count = self.len() as u64;
        let dtype = match marks {
            Marks::Nonzero(_) => DType::U32,
            Marks::Distinct => self.dtype(),
        };
        if count == 0 {
            return self.output(op, &[0], dtype);
        }
        let blocks = sort::compaction_blocks(count);
        let counts = self.output(op, &[blocks as usize + 1], DType::U32)?;
        let (input, counts_range) = ((self.range()?, count), counts.range()?);
        let kept = self.with_runtime(|runtime| {
            sort::count_kept(runtime, input, keys, marks, counts_range)?;
            let bytes = runtime.read(counts_range.elements(blocks, 1))?;
            let total: Vec<u32> = bytemuck::pod_collect_to_vec(&bytes);
            Ok(u64::from(total.first().copied().unwrap_or(0)))
        })?;
        let out = self.output(op, &[kept as usize * per_kept], dtype)?;
        if kept == 0 {
            return Ok(out);
        }
        let target = out.range()?;
        self.with_runtime(|runtime| {
            sort::compact(runtime, input, keys, marks, (counts_range, kept), target)
        })?;
        Ok(out)
    }
}
