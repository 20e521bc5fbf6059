//! Tensors: a shape and a range of a session's pool, linked to the session weakly so that holding one never
//! keeps GPU memory alive.

use std::sync::{Arc, Weak};

pub use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::elementwise;
use crate::pool::Allocation;
use crate::runtime::{BufferRange, Runtime, SharedRuntime};
use crate::shape::element_count;
pub use crate::shape::MAX_RANK;

pub(crate) mod record;

pub(crate) use record::{lock, Node, Op, Recording, SharedTape, Tape, Trace, Var};

/// A row-major tensor (f32 unless made by an op that says otherwise) living in a session's pool.
///
/// Dropping it returns its range to the pool (the last handle's drop, where a tape shares the value: see
/// [`GradientTape`](crate::GradientTape)). Once its session is closed, every use answers
/// [`Error::SessionClosed`] and dropping it does nothing.
///
/// ```
/// use wgcompute::{Error, Session, SessionOptions};
/// # fn main() -> wgcompute::Result<()> {
/// let session = Session::open(SessionOptions::default())?;
/// let batch = session.upload(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])?;
/// let bias = session.upload(&[10.0, 20.0, 30.0], &[3])?;
/// let shifted = batch.add(&bias)?; // the bias row broadcasts over the batch
/// assert_eq!(shifted.sum(Some(0))?.to_vec()?, vec![25.0, 47.0, 69.0]);
/// session.close();
/// assert!(matches!(shifted.to_vec(), Err(Error::SessionClosed)));
/// # Ok(()) }
/// ```
pub struct Tensor {
    session: Weak<SharedRuntime>,
    session_id: u64,
    /// The pool range, shared by the handles of one value (a tape keeps the values it recorded this way): it
    /// goes back to the pool when the last handle is dropped.
    allocation: Option<Arc<Allocation>>,
    /// The node this tensor is on a tape that records the ops on it, if any (see [`record`]).
    trace: Option<Trace>,
    // Inline, so that making a tensor allocates nothing on the host beyond its pool range.
    dims: [usize; MAX_RANK],
    rank: u8,
    dtype: DType,
}

impl Tensor {
    /// A new tensor of this shape in the session behind `inner`; its contents are unspecified, or NaN when the
    /// session poisons outputs.
    pub(crate) fn allocate_in(
        inner: &Arc<SharedRuntime>,
        op: &'static str,
        shape: &[usize],
        dtype: DType,
        poison: bool,
    ) -> Result<Tensor> {
        let elements = element_count(op, shape)?;
        let bytes = (elements as u64)
            .checked_mul(4)
            .ok_or_else(|| Error::Shape {
                op,
                message: format!("shape {shape:?} is too large"),
            })?;
        let mut dims = [0; MAX_RANK];
        dims[..shape.len()].copy_from_slice(shape);
        let allocation = inner.with_runtime_or_undo(
            |runtime| {
                let allocation = runtime.allocate(bytes)?;
                if poison && runtime.poison_outputs() {
                    let range = BufferRange {
                        slab: allocation.slab,
                        offset: allocation.offset,
                        bytes,
                    };
                    if let Err(error) = elementwise::fill(runtime, range, elements as u64, f32::NAN)
                    {
                        runtime.release(allocation);
                        return Err(error);
                    }
                }
                Ok(allocation)
            },
            |runtime, allocation| runtime.release(allocation),
        )?;
        Ok(Tensor {
            session: Arc::downgrade(inner),
            session_id: inner.id(),
            allocation: Some(Arc::new(allocation)),
            trace: None,
            dims,
            rank: shape.len() as u8,
            dtype,
        })
    }

    fn allocate(
        session: &Arc<SharedRuntime>,
        op: &'static str,
        shape: &[usize],
    ) -> Result<(Tensor, BufferRange)> {
        Self::allocate_typed(session, op, shape, DType::F32)
    }

    fn allocate_typed(
        session: &Arc<SharedRuntime>,
        op: &'static str,
        shape: &[usize],
        dtype: DType,
    ) -> Result<(Tensor, BufferRange)> {
        // Not poisoned: an upload may be written by the queue ahead of recorded commands, so a recorded poison
        // fill would land on top of it.
        let tensor = Self::allocate_in(session, op, shape, dtype, false)?;
        let range = tensor.range()?;
        Ok((tensor, range))
    }

    /// Whether the session this tensor lives in is still open (a suspended one is): after its close the
    /// tensor holds no GPU memory and every use of it is [`Error::SessionClosed`].
    pub fn session_is_open(&self) -> bool {
        self.session.strong_count() > 0
    }

    /// A new output tensor in this tensor's session.
    pub(crate) fn output(&self, op: &'static str, shape: &[usize], dtype: DType) -> Result<Tensor> {
        let inner = self.session.upgrade().ok_or(Error::SessionClosed)?;
        Self::allocate_in(&inner, op, shape, dtype, true)
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Errors unless this tensor holds `dtype`.
    pub(crate) fn expect_dtype(&self, op: &'static str, dtype: DType) -> Result<()> {
        if self.dtype == dtype {
            Ok(())
        } else {
            Err(Error::DType {
                op,
                expected: dtype,
                found: self.dtype,
            })
        }
    }

    /// Errors unless `other` lives in the same session as this tensor.
    pub(crate) fn expect_same_session(&self, op: &'static str, other: &Tensor) -> Result<()> {
        if self.session_id == other.session_id {
            Ok(())
        } else {
            Err(Error::SessionMismatch { op })
        }
    }

    /// Uploads `data`, which must hold exactly as many values as `shape` has elements.
    pub(crate) fn from_slice(
        session: &Arc<SharedRuntime>,
        data: &[f32],
        shape: &[usize],
    ) -> Result<Tensor> {
        Self::from_words(
            session,
            "upload",
            bytemuck::cast_slice(data),
            shape,
            DType::F32,
        )
    }

    /// Uploads u32 `data` (class ids, row indices), exactly as many values as `shape` has elements.
    pub(crate) fn from_u32_slice(
        session: &Arc<SharedRuntime>,
        data: &[u32],
        shape: &[usize],
    ) -> Result<Tensor> {
        Self::from_words(
            session,
            "upload_u32",
            bytemuck::cast_slice(data),
            shape,
            DType::U32,
        )
    }

    /// Uploads int32 `data`, exactly as many values as `shape` has elements.
    pub(crate) fn from_i32_slice(
        session: &Arc<SharedRuntime>,
        data: &[i32],
        shape: &[usize],
    ) -> Result<Tensor> {
        Self::from_words(
            session,
            "upload_i32",
            bytemuck::cast_slice(data),
            shape,
            DType::I32,
        )
    }

    /// Uploads bools, each as the word 0 or 1.
    pub(crate) fn from_bool_slice(
        session: &Arc<SharedRuntime>,
        data: &[bool],
        shape: &[usize],
    ) -> Result<Tensor> {
        let words: Vec<u32> = data.iter().map(|&value| u32::from(value)).collect();
        Self::from_words(
            session,
            "upload_bool",
            bytemuck::cast_slice(&words),
            shape,
            DType::Bool,
        )
    }

    /// Uploads `data` as a tensor of `shape` in this tensor's session: written by the queue, so it records no
    /// dispatch (what a small constant, such as a gradient's seed, should cost).
    pub(crate) fn upload_beside(&self, data: &[f32], shape: &[usize]) -> Result<Tensor> {
        let inner = self.session.upgrade().ok_or(Error::SessionClosed)?;
        Self::from_slice(&inner, data, shape)
    }

    /// Uploads bools as a tensor of `shape` in this tensor's session (a mask, say), recording no dispatch.
    pub(crate) fn upload_bool_beside(&self, data: &[bool], shape: &[usize]) -> Result<Tensor> {
        let inner = self.session.upgrade().ok_or(Error::SessionClosed)?;
        Self::from_bool_slice(&inner, data, shape)
    }

    /// Uploads u32 `data` as a 1-D tensor in this tensor's session.
    pub(crate) fn upload_u32_beside(&self, data: &[u32]) -> Result<Tensor> {
        let inner = self.session.upgrade().ok_or(Error::SessionClosed)?;
        Self::from_u32_slice(&inner, data, &[data.len()])
    }

    fn from_words(
        session: &Arc<SharedRuntime>,
        op: &'static str,
        bytes: &[u8],
        shape: &[usize],
        dtype: DType,
    ) -> Result<Tensor> {
        let elements = element_count(op, shape)?;
        if elements != bytes.len() / 4 {
            return Err(Error::Shape {
                op,
                message: format!(
                    "{} values given for shape {shape:?}, which holds {elements}",
                    bytes.len() / 4
                ),
            });
        }
        let (tensor, range) = Self::allocate_typed(session, op, shape, dtype)?;
        tensor.with_runtime(|runtime| runtime.write_fresh(range, bytes))?;
        Ok(tensor)
    }

    /// A tensor whose contents are whatever its range last held (like `torch.empty`): for outputs that a
    /// kernel overwrites anyway.
    pub(crate) fn empty(session: &Arc<SharedRuntime>, shape: &[usize]) -> Result<Tensor> {
        Ok(Self::allocate(session, "empty", shape)?.0)
    }

    pub(crate) fn zeros(session: &Arc<SharedRuntime>, shape: &[usize]) -> Result<Tensor> {
        let (tensor, range) = Self::allocate(session, "zeros", shape)?;
        tensor.with_runtime(|runtime| runtime.clear(range))?;
        Ok(tensor)
    }

    pub(crate) fn full(
        session: &Arc<SharedRuntime>,
        shape: &[usize],
        value: f32,
    ) -> Result<Tensor> {
        let (tensor, range) = Self::allocate(session, "full", shape)?;
        let elements = tensor.len() as u64;
        tensor.with_runtime(|runtime| elementwise::fill(runtime, range, elements, value))?;
        Ok(tensor)
    }

    pub fn shape(&self) -> &[usize] {
        &self.dims[..usize::from(self.rank)]
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape().iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(crate) fn range(&self) -> Result<BufferRange> {
        let allocation = self.allocation.as_ref().ok_or(Error::SessionClosed)?;
        Ok(BufferRange {
            slab: allocation.slab,
            offset: allocation.offset,
            bytes: self.len() as u64 * 4,
        })
    }

    /// Runs `work` on this tensor's open session.
    pub(crate) fn with_runtime<T>(
        &self,
        work: impl FnOnce(&mut Runtime) -> Result<T>,
    ) -> Result<T> {
        let inner = self.session.upgrade().ok_or(Error::SessionClosed)?;
        inner.with_runtime(work)
    }

    /// Downloads every element.
    pub fn to_vec(&self) -> Result<Vec<f32>> {
        self.expect_dtype("to_vec", DType::F32)?;
        self.read_range(0..self.len())
    }

    /// Downloads every element of a u32 tensor (argmax results).
    pub fn to_vec_u32(&self) -> Result<Vec<u32>> {
        self.expect_dtype("to_vec_u32", DType::U32)?;
        let range = self.range()?;
        let bytes = self.with_runtime(|runtime| runtime.read(range))?;
        Ok(bytemuck::pod_collect_to_vec(&bytes))
    }

    /// Downloads every element of an int32 tensor.
    pub fn to_vec_i32(&self) -> Result<Vec<i32>> {
        self.expect_dtype("to_vec_i32", DType::I32)?;
        Ok(self.words()?.into_iter().map(|word| word as i32).collect())
    }

    /// Downloads every element of a bool tensor.
    pub fn to_vec_bool(&self) -> Result<Vec<bool>> {
        self.expect_dtype("to_vec_bool", DType::Bool)?;
        Ok(self.words()?.into_iter().map(|word| word != 0).collect())
    }

    fn words(&self) -> Result<Vec<u32>> {
        let range = self.range()?;
        let bytes = self.with_runtime(|runtime| runtime.read(range))?;
        Ok(bytemuck::pod_collect_to_vec(&bytes))
    }

    /// A copy of every word as a tensor of `dtype`: a cast that keeps the bits (int32 ↔ uint32, bool → an
    /// integer).
    pub(crate) fn copy_words_as(&self, dtype: DType) -> Result<Tensor> {
        let out = self.output("astype", self.shape(), dtype)?;
        let (from, to) = (self.range()?, out.range()?);
        let elements = self.len() as u64;
        self.with_runtime(|runtime| elementwise::copy(runtime, from, to, elements))?;
        Ok(out)
    }

    /// A tensor with the same data and another shape of the same element count (a copy-free view is not
    /// kept: the data is copied on the device).
    pub fn reshape(&self, shape: &[usize]) -> Result<Tensor> {
        self.expect_reshape(shape)?;
        let value = self.copy_as("reshape", shape)?;
        Tensor::record(&[self], value, |nodes| Op::Reshape { x: nodes[0] })
    }

    /// Errors unless `shape` holds as many elements as this tensor (and is a shape at all).
    fn expect_reshape(&self, shape: &[usize]) -> Result<()> {
        let elements = element_count("reshape", shape)?;
        if elements != self.len() {
            return Err(Error::Shape {
                op: "reshape",
                message: format!(
                    "cannot reshape {:?} ({} elements) to {shape:?} ({elements} elements)",
                    self.shape(),
                    self.len()
                ),
            });
        }
        Ok(())
    }

    /// This tensor under another shape of the same element count, its data left where it is: the reshape of a
    /// tensor no one else needs, which costs no pass (unlike [`Tensor::reshape`], which copies).
    ///
    /// ```
    /// use wgcompute::{Session, SessionOptions};
    /// # fn main() -> wgcompute::Result<()> {
    /// let session = Session::open(SessionOptions::default())?;
    /// let row = session.upload(&[1.0, 2.0, 3.0, 4.0], &[4])?;
    /// let before = session.counters();
    /// let grid = row.into_shape(&[2, 2])?;
    /// assert_eq!(session.counters().since(before).dispatches, 0);
    /// assert_eq!((grid.shape(), grid.to_vec()?), (&[2, 2][..], vec![1.0, 2.0, 3.0, 4.0]));
    /// assert!(grid.into_shape(&[3]).is_err());
    /// # Ok(()) }
    /// ```
    pub fn into_shape(mut self, shape: &[usize]) -> Result<Tensor> {
        self.expect_reshape(shape)?;
        // A traced tensor's new shape is recorded as a reshape of its node.
        let traced = self.trace.take().map(|trace| self.share().traced(trace));
        self.dims = [0; MAX_RANK];
        self.dims[..shape.len()].copy_from_slice(shape);
        self.rank = shape.len() as u8;
        match traced {
            Some(original) => {
                Tensor::record(&[&original], self, |nodes| Op::Reshape { x: nodes[0] })
            }
            None => Ok(self),
        }
    }

    /// Another handle of this tensor's data, untraced: what a tape keeps of the values it records. The data is
    /// shared, not copied, and goes back to the pool when the last handle is dropped.
    pub(crate) fn share(&self) -> Tensor {
        Tensor {
            session: Weak::clone(&self.session),
            session_id: self.session_id,
            allocation: self.allocation.clone(),
            trace: None,
            dims: self.dims,
            rank: self.rank,
            dtype: self.dtype,
        }
    }

    /// The node this tensor is on a tape, if one was recorded for it.
    pub(crate) fn trace(&self) -> Option<&Trace> {
        self.trace.as_ref()
    }

    /// This tensor under another shape of the same element count, its data shared, not copied (recorded as a
    /// reshape where a tape traces it): a step inside an op, whose result must not be handed out while this
    /// tensor may be written in place (return [`Tensor::reshape`]'s copy instead).
    pub(crate) fn view_as(&self, shape: &[usize]) -> Result<Tensor> {
        self.handle().into_shape(shape)
    }

    /// Another handle of this tensor, its data shared and its trace kept: the same value on a tape.
    pub(crate) fn handle(&self) -> Tensor {
        let mut handle = self.share();
        handle.trace = self.trace.clone();
        handle
    }

    /// This tensor as the node `trace` names.
    pub(crate) fn traced(mut self, trace: Trace) -> Tensor {
        self.trace = Some(trace);
        self
    }

    /// A copy of this tensor, in the same session. Not `Clone`: a copy takes pool memory, and may fail.
    ///
    /// Recorded where a tape traces this tensor: the copy's gradient is the copy's.
    pub fn try_clone(&self) -> Result<Tensor> {
        let value = self.copy_as("try_clone", self.shape())?;
        Tensor::record(&[self], value, |nodes| Op::Unary {
            op: crate::op::elementwise::UnaryOp::Copy,
            x: nodes[0],
            scalar: 0.0,
        })
    }

    fn copy_as(&self, op: &'static str, shape: &[usize]) -> Result<Tensor> {
        let out = self.output(op, shape, self.dtype)?;
        let (from, to) = (self.range()?, out.range()?);
        let elements = self.len() as u64;
        self.with_runtime(|runtime| elementwise::copy(runtime, from, to, elements))?;
        Ok(out)
    }

    /// Downloads the elements in `elements` (flat, row-major indices).
    pub fn read_range(&self, elements: std::ops::Range<usize>) -> Result<Vec<f32>> {
        self.expect_dtype("read_range", DType::F32)?;
        if elements.start > elements.end || elements.end > self.len() {
            return Err(Error::Shape {
                op: "read_range",
                message: format!(
                    "range {elements:?} is outside a tensor of {} elements (shape {:?})",
                    self.len(),
                    self.shape()
                ),
            });
        }
        let whole = self.range()?;
        let range = BufferRange {
            slab: whole.slab,
            offset: whole.offset + elements.start as u64 * 4,
            bytes: (elements.end - elements.start) as u64 * 4,
        };
        let bytes = self.with_runtime(|runtime| runtime.read(range))?;
        Ok(bytemuck::pod_collect_to_vec(&bytes))
    }

    /// Overwrites every element with `data`.
    pub fn write(&self, data: &[f32]) -> Result<()> {
        self.write_words("write", DType::F32, data.len(), bytemuck::cast_slice(data))
    }

    /// Overwrites every element of a u32 tensor with `data`.
    pub fn write_u32(&self, data: &[u32]) -> Result<()> {
        self.write_words(
            "write_u32",
            DType::U32,
            data.len(),
            bytemuck::cast_slice(data),
        )
    }

    /// Overwrites every element with `count` values of `dtype`, given as their bytes.
    fn write_words(
        &self,
        op: &'static str,
        dtype: DType,
        count: usize,
        bytes: &[u8],
    ) -> Result<()> {
        self.expect_dtype(op, dtype)?;
        if count != self.len() {
            return Err(Error::Shape {
                op,
                message: format!(
                    "{count} values given for a tensor of shape {:?}",
                    self.shape()
                ),
            });
        }
        let range = self.range()?;
        self.with_runtime(|runtime| runtime.write(range, bytes))
    }

    /// Copies `source` (same element count and dtype) into this tensor through the command stream.
    pub fn copy_from(&self, source: &Tensor) -> Result<()> {
        self.expect_same_session("copy_from", source)?;
        if source.len() != self.len() || source.dtype != self.dtype {
            return Err(Error::Shape {
                op: "copy_from",
                message: format!(
                    "source {:?} ({}) does not fit target {:?} ({})",
                    source.shape(),
                    source.dtype,
                    self.shape(),
                    self.dtype
                ),
            });
        }
        let (from, to) = (source.range()?, self.range()?);
        let elements = self.len() as u64;
        self.with_runtime(|runtime| elementwise::copy(runtime, from, to, elements))
    }

    /// Sets every element to `value`, in place.
    pub fn fill_(&self, value: f32) -> Result<()> {
        self.expect_dtype("fill_", DType::F32)?;
        let range = self.range()?;
        let elements = self.len() as u64;
        self.with_runtime(|runtime| elementwise::fill(runtime, range, elements, value))
    }

    /// `self = self * scale + shift`, in place.
    pub fn scale_add_(&self, scale: f32, shift: f32) -> Result<()> {
        self.expect_dtype("scale_add_", DType::F32)?;
        let range = self.range()?;
        let elements = self.len() as u64;
        self.with_runtime(|runtime| elementwise::scale_add(runtime, range, elements, scale, shift))
    }
}

impl Drop for Tensor {
    fn drop(&mut self) {
        // Only the last handle of a shared range gives it back.
        if let (Some(allocation), Some(inner)) = (
            self.allocation.take().and_then(Arc::into_inner),
            self.session.upgrade(),
        ) {
            inner.release(allocation);
        }
    }
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tensor")
            .field("shape", &self.shape())
            .field("session", &self.session_id)
            .finish()
    }
}
