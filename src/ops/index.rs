//! Indexing, NumPy's `x[...]` and the Array API's take, take_along_axis, flip and roll, and the writes that
//! leave their operand alone (scatter_add, put) or write a tensor in place through a basic index
//! (`index_assign`). Basic entries select one strided copy (signed strides: a negative step walks backwards);
//! integer arrays and masks then pick along the axes they index in one take. Every index is checked: host
//! arrays on the host, device index tensors by the kernel, which leaves the first bad position in a one-word
//! fault buffer read back after the pass (the error then names the axis, its size and the bad value).

use std::ops::Range;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::layout::{self, AxisPicks, ScatterMode, Strided, TakeMode};
use crate::op::elementwise::UnaryOp;
use crate::op::index::{HostArray, IndexItem, Slice};
use crate::shape::{broadcast, element_count, index_view, wrap_index, IndexView};
use crate::tensor::{Op, Tensor};

fn index_error(op: &'static str, message: String) -> Error {
    Error::Index { op, message }
}

fn shape_error(op: &'static str, message: String) -> Error {
    Error::Shape { op, message }
}

/// Whether a device index tensor holds signed words; the one place a new index dtype is admitted.
fn index_words_signed(op: &'static str, indices: &Tensor) -> Result<bool> {
    match indices.dtype() {
        DType::U32 => Ok(false),
        DType::I32 => Ok(true),
        found => Err(Error::DType {
            op,
            expected: DType::U32,
            found,
        }),
    }
}

/// The set flags of a device mask, read back: a bool tensor's words, nonzero where set; the one place a new mask dtype is
/// admitted.
fn mask_flags(op: &'static str, mask: &Tensor) -> Result<Vec<bool>> {
    mask.expect_dtype(op, DType::Bool)?;
    mask.to_vec_bool()
}

/// The index words of a device index tensor, read back, as signed values.
fn host_indices(op: &'static str, indices: &Tensor) -> Result<Vec<i64>> {
    let signed = index_words_signed(op, indices)?;
    let words = match indices.dtype() {
        DType::I32 => indices
            .to_vec_i32()?
            .into_iter()
            .map(|value| value as u32)
            .collect(),
        _ => indices.to_vec_u32()?,
    };
    Ok(words
        .into_iter()
        .map(|word| {
            if signed {
                i64::from(word as i32)
            } else {
                i64::from(word)
            }
        })
        .collect())
}

fn product(dims: &[usize]) -> usize {
    dims.iter().product()
}

/// The axes `axes` of `shape` merged into one: (outer, merged, inner) element counts.
fn lanes_around(shape: &[usize], axes: &Range<usize>) -> (usize, usize, usize) {
    (
        product(&shape[..axes.start]),
        product(&shape[axes.clone()]),
        product(&shape[axes.end..]),
    )
}

/// The indices of a take: a device tensor the caller gave (checked by the pass), or host values already
/// checked, wrapped and uploaded.
pub(crate) enum Picks<'t> {
    Device(&'t Tensor),
    Checked(Tensor),
}

/// What `x[items]` does: a strided view of the basic entries (`None` where it is `x` itself), then a take of
/// the picks along the view's `axes`, merged into one (the axes the integer arrays index, grouped where their
/// broadcast dims go).
pub(crate) struct IndexPlan<'t> {
    pub view: Option<IndexView>,
    pub take: Option<(Range<usize>, Picks<'t>)>,
}

impl Tensor {
    /// NumPy's `x[items]`: integers (negative from the end), slices with any step, `...`, new axes, integer
    /// arrays (u32 tensors, or host arrays, negative from the end) and masks (u32 0/1 tensors or host
    /// booleans), with NumPy's rules for several arrays (broadcast together; their dims where the first stands
    /// if they are adjacent, else first). Basic entries cost one strided copy, arrays and masks one take (a
    /// mask reads back its flags, several arrays their values; a device array is checked by the kernel, one
    /// word read back). An index out of bounds is [`Error::Index`], naming the axis and its size.
    ///
    /// ```
    /// use wgcompute::{IndexItem, Session, SessionOptions, Slice};
    /// # fn main() -> wgcompute::Result<()> {
    /// let session = Session::open(SessionOptions::default())?;
    /// let x = session.upload(&[0.0, 1.0, 2.0, 3.0, 4.0, 5.0], &[2, 3])?;
    /// let reversed = x.index(&[IndexItem::Int(-1), IndexItem::Slice(Slice { start: None, stop: None, step: -2 })])?;
    /// assert_eq!(reversed.to_vec()?, vec![5.0, 3.0]);
    /// assert!(x.index(&[IndexItem::Int(2)]).is_err());
    /// # Ok(()) }
    /// ```
    ///
    /// Recorded where a tape traces this tensor, each step as an op of its own: the gradient of the view is a
    /// strided write into zeros, that of a take a scatter-add in which repeated indices add up.
    pub fn index(&self, items: &[IndexItem<'_, &Tensor>]) -> Result<Tensor> {
        let plan = self.index_plan(items)?;
        let viewed = match plan.view {
            Some(view) => {
                let value = self.view(&view)?;
                Some(Tensor::record(&[self], value, |nodes| Op::View {
                    x: nodes[0],
                    view,
                })?)
            }
            None => None,
        };
        let source = viewed.as_ref().unwrap_or(self);
        let (axes, indices, check) = match plan.take {
            Some((axes, Picks::Device(indices))) => (axes, indices, true),
            Some((axes, Picks::Checked(ref indices))) => (axes, indices, false),
            None => {
                return match viewed {
                    Some(viewed) => Ok(viewed),
                    None if self.is_traced() => self.unary(UnaryOp::Copy, 0.0),
                    None => self.try_clone(),
                }
            }
        };
        let value = source.take_axes(axes.clone(), indices, check)?;
        Tensor::record(&[source, indices], value, |nodes| Op::Take {
            x: nodes[0],
            indices: nodes[1],
            axes,
        })
    }

    /// The plan of `self[items]`: masks read back and turned into the integer arrays of their set positions,
    /// several arrays read back, broadcast, checked and merged into one of flat positions over their axes.
    pub(crate) fn index_plan<'t>(
        &self,
        items: &[IndexItem<'_, &'t Tensor>],
    ) -> Result<IndexPlan<'t>> {
        const NAME: &str = "index";
        let shape = self.shape();
        for item in items {
            if let IndexItem::Array(tensor) | IndexItem::Mask(tensor) = item {
                self.expect_same_session(NAME, tensor)?;
            }
        }
        let consumed: Vec<usize> = items
            .iter()
            .map(|item| match item {
                IndexItem::Mask(mask) => mask.shape().len(),
                IndexItem::HostMask(mask) => mask.shape.len(),
                IndexItem::Ellipsis | IndexItem::NewAxis => 0,
                _ => 1,
            })
            .collect();
        // Masks become one host array per axis they cover.
        let mut coordinates: Vec<(Vec<i64>, [usize; 1])> = Vec::new();
        let mut expanded_at: Vec<Option<(usize, usize)>> = Vec::new();
        for (position, item) in items.iter().enumerate() {
            let flags = match item {
                IndexItem::Mask(mask) => Some((mask_flags(NAME, mask)?, mask.shape().to_vec())),
                IndexItem::HostMask(mask) => Some((mask.values.to_vec(), mask.shape.to_vec())),
                _ => None,
            };
            let Some((flags, mask_shape)) = flags else {
                expanded_at.push(None);
                continue;
            };
            mask_axis(NAME, shape, (items, &consumed), position, &mask_shape)?;
            if flags.len() != product(&mask_shape) {
                return Err(index_error(
                    NAME,
                    format!(
                        "a mask of shape {mask_shape:?} needs {} flags",
                        product(&mask_shape)
                    ),
                ));
            }
            let start = coordinates.len();
            let set: Vec<usize> = (0..flags.len()).filter(|&at| flags[at]).collect();
            let strides = crate::kernels::layout::contiguous_strides(&mask_shape);
            for (axis, &stride) in strides.iter().enumerate() {
                let values = set
                    .iter()
                    .map(|&at| ((at / stride) % mask_shape[axis]) as i64)
                    .collect();
                coordinates.push((values, [set.len()]));
            }
            expanded_at.push(Some((start, coordinates.len())));
        }
        let mut expanded: Vec<IndexItem<'_, &'t Tensor>> = Vec::with_capacity(items.len());
        for (item, at) in items.iter().zip(&expanded_at) {
            match at {
                Some((start, end)) => {
                    expanded.extend(coordinates[*start..*end].iter().map(|(values, shape)| {
                        IndexItem::HostArray(HostArray {
                            values,
                            shape: &shape[..],
                        })
                    }))
                }
                None => expanded.push(*item),
            }
        }
        let view = index_view(NAME, shape, &expanded)?;
        let arrays: Vec<&IndexItem<'_, &'t Tensor>> =
            expanded.iter().filter(|item| item.is_array()).collect();
        let take = match arrays.as_slice() {
            [] => None,
            [IndexItem::Array(tensor)] => {
                index_words_signed(NAME, tensor)?;
                Some(Picks::Device(tensor))
            }
            _ => Some(Picks::Checked(self.merged_picks(
                NAME,
                &arrays,
                &view.advanced,
            )?)),
        };
        let axes = view.advanced_at..view.advanced_at + view.advanced.len();
        let view = (!view.is_whole(shape)).then_some(view);
        Ok(IndexPlan {
            view,
            take: take.map(|picks| (axes, picks)),
        })
    }

    /// Several integer arrays indexing the source axes `axes`, read to the host, broadcast together, checked
    /// and merged into one u32 tensor of flat positions over those axes (row-major), of the broadcast shape.
    fn merged_picks(
        &self,
        op: &'static str,
        arrays: &[&IndexItem<'_, &Tensor>],
        axes: &[usize],
    ) -> Result<Tensor> {
        let mut host: Vec<(Vec<i64>, Vec<usize>)> = Vec::with_capacity(arrays.len());
        for array in arrays {
            host.push(match array {
                IndexItem::Array(tensor) => (host_indices(op, tensor)?, tensor.shape().to_vec()),
                IndexItem::HostArray(array) => {
                    if array.values.len() != product(array.shape) {
                        return Err(index_error(
                            op,
                            format!(
                                "an index array of shape {:?} needs {} values; {} given",
                                array.shape,
                                product(array.shape),
                                array.values.len()
                            ),
                        ));
                    }
                    (array.values.to_vec(), array.shape.to_vec())
                }
                _ => unreachable!("only arrays are merged"),
            });
        }
        let mut shape: Vec<usize> = Vec::new();
        for (_, array_shape) in &host {
            shape = broadcast(op, &shape, array_shape).map_err(|_| {
                index_error(
                    op,
                    format!(
                        "shape mismatch: indexing arrays could not be broadcast together with shapes {:?}",
                        host.iter().map(|(_, shape)| shape).collect::<Vec<_>>()
                    ),
                )
            })?;
        }
        let count = element_count(op, &shape)?;
        let sizes: Vec<usize> = axes.iter().map(|&axis| self.shape()[axis]).collect();
        if u32::try_from(product(&sizes)).is_err() {
            return Err(shape_error(
                op,
                format!("the indexed axes {axes:?} hold 2^32 positions or more"),
            ));
        }
        let out_strides = crate::kernels::layout::contiguous_strides(&shape);
        let mut flat = vec![0u32; count];
        for (((values, array_shape), &axis), &size) in host.iter().zip(axes).zip(&sizes) {
            // The array read at each broadcast position: stride 0 along its stretched and missing axes.
            let own = crate::kernels::layout::contiguous_strides(array_shape);
            let pad = shape.len() - array_shape.len();
            for (at, slot) in flat.iter_mut().enumerate() {
                let source: usize = (0..array_shape.len())
                    .filter(|&dim| array_shape[dim] != 1)
                    .map(|dim| (at / out_strides[pad + dim]) % shape[pad + dim] * own[dim])
                    .sum();
                let index = wrap_index(op, values[source], axis, size)?;
                *slot = *slot * size as u32 + index as u32;
            }
        }
        let picks = self.upload_u32_beside(&flat)?;
        picks.into_shape(&shape)
    }

    /// The strided view `view` of this tensor, copied out in one pass.
    pub(crate) fn view(&self, view: &IndexView) -> Result<Tensor> {
        let out = self.output("index", &view.shape, self.dtype())?;
        let contiguous = layout::contiguous_strides(&view.shape);
        self.copy_signed(
            "index",
            (view.offset, &view.strides),
            &out,
            (0, &contiguous_signed(&contiguous)),
            &view.shape,
        )?;
        Ok(out)
    }

    /// Writes `source` (broadcast to the view's shape) into this tensor's elements that `view` selects, in one
    /// pass: a variable's indexed assign, and the gradient of a view (into zeros).
    pub(crate) fn write_view(&self, view: &IndexView, source: &Tensor) -> Result<()> {
        const NAME: &str = "index_assign";
        self.expect_same_session(NAME, source)?;
        source.expect_dtype(NAME, self.dtype())?;
        let strides = broadcast_into(NAME, source.shape(), &view.shape)?;
        source.copy_signed(
            NAME,
            (0, &strides),
            self,
            (view.offset, &view.strides),
            &view.shape,
        )
    }

    /// Copies the block `shape` from this tensor at (offset, signed strides) into `target` at its own. The
    /// kernel's u32 index arithmetic wraps, so a negative stride passed as its two's complement walks backwards
    /// and every index it reaches is the true, non-negative one.
    fn copy_signed(
        &self,
        op: &'static str,
        (from_offset, from_strides): (usize, &[isize]),
        target: &Tensor,
        (to_offset, to_strides): (usize, &[isize]),
        shape: &[usize],
    ) -> Result<()> {
        let wrapped = |strides: &[isize]| -> Vec<usize> {
            strides.iter().map(|&stride| stride as usize).collect()
        };
        let (from_strides, to_strides) = (wrapped(from_strides), wrapped(to_strides));
        let (source, range) = (self.range()?, target.range()?);
        self.with_runtime(|runtime| {
            layout::strided_copy(
                runtime,
                op,
                Strided {
                    range: source,
                    offset: from_offset,
                    strides: &from_strides,
                },
                Strided {
                    range,
                    offset: to_offset,
                    strides: &to_strides,
                },
                shape,
            )
        })
    }

    /// `self[basic items] = value` in place (value broadcast to the selected shape), in one pass: integers,
    /// slices, `...` and new axes only.
    pub fn index_assign(&self, items: &[IndexItem<'_, &Tensor>], value: &Tensor) -> Result<()> {
        let view = self.basic_view("index_assign", items)?;
        self.write_view(&view, value)
    }

    /// `self[basic items] += value` (or `-=` where `subtract`) in place: the selection read, added to and
    /// written back.
    pub fn index_assign_add(
        &self,
        items: &[IndexItem<'_, &Tensor>],
        value: &Tensor,
        subtract: bool,
    ) -> Result<()> {
        let view = self.basic_view("index_assign", items)?;
        let current = self.view(&view)?;
        let updated = if subtract {
            current.sub(value)?
        } else {
            current.add(value)?
        };
        self.write_view(&view, &updated)
    }

    fn basic_view(&self, op: &'static str, items: &[IndexItem<'_, &Tensor>]) -> Result<IndexView> {
        if items.iter().any(|item| {
            !matches!(
                item,
                IndexItem::Int(_) | IndexItem::Slice(_) | IndexItem::Ellipsis | IndexItem::NewAxis
            )
        }) {
            return Err(index_error(
                op,
                "an in-place write takes integers, slices, '...' and new axes only; for integer arrays or masks \
                 compute a new tensor with put or where"
                    .to_string(),
            ));
        }
        index_view(op, self.shape(), items)
    }

    /// `numpy.take(x, indices, axis)`: the entries at `indices` (u32, any shape) along `axis`; the result has
    /// this tensor's shape with `axis` replaced by the indices' shape. Checked on the device: an index out of
    /// bounds is [`Error::Index`].
    pub fn take(&self, indices: &Tensor, axis: usize) -> Result<Tensor> {
        let value = self.taken(indices, axis)?;
        Tensor::record(&[self, indices], value, |nodes| Op::Take {
            x: nodes[0],
            indices: nodes[1],
            axes: axis..axis + 1,
        })
    }

    fn taken(&self, indices: &Tensor, axis: usize) -> Result<Tensor> {
        const NAME: &str = "take";
        self.expect_same_session(NAME, indices)?;
        expect_axis(NAME, self.shape(), axis)?;
        index_words_signed(NAME, indices)?;
        self.take_axes(axis..axis + 1, indices, true)
    }

    /// The entries at `indices` along the axes `axes`, merged into one; checked on the device where `check`.
    pub(crate) fn take_axes(
        &self,
        axes: Range<usize>,
        indices: &Tensor,
        check: bool,
    ) -> Result<Tensor> {
        const NAME: &str = "take";
        let shape = self.shape();
        let out_shape: Vec<usize> = shape[..axes.start]
            .iter()
            .chain(indices.shape())
            .chain(&shape[axes.end..])
            .copied()
            .collect();
        let picks_info = axes_picks(shape, axes.clone(), indices)?;
        self.run_take(
            NAME,
            indices,
            picks_info,
            &out_shape,
            TakeMode::Every,
            check,
            axes.start,
        )
    }

    /// `numpy.take_along_axis(x, indices, axis)`: indices of this tensor's rank, of its sizes but along
    /// `axis`, each picking the entry of its own lane; the result has the indices' shape.
    pub fn take_along_axis(&self, indices: &Tensor, axis: usize) -> Result<Tensor> {
        let value = self.taken_along_axis(indices, axis)?;
        Tensor::record(&[self, indices], value, |nodes| Op::TakeAlong {
            x: nodes[0],
            indices: nodes[1],
            axis,
        })
    }

    fn taken_along_axis(&self, indices: &Tensor, axis: usize) -> Result<Tensor> {
        const NAME: &str = "take_along_axis";
        self.expect_same_session(NAME, indices)?;
        let picks = along_axis_picks(NAME, self.shape(), indices, axis)?;
        self.run_take(
            NAME,
            indices,
            picks,
            indices.shape(),
            TakeMode::Every,
            true,
            axis,
        )
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn run_take(
        &self,
        op: &'static str,
        indices: &Tensor,
        picks: AxisPicks,
        out_shape: &[usize],
        mode: TakeMode,
        check: bool,
        axis: usize,
    ) -> Result<Tensor> {
        let out = self.output(op, out_shape, self.dtype())?;
        if indices.is_empty() {
            return Ok(out);
        }
        if picks.axis_len == 0 || out.is_empty() {
            // No pass runs; the indices are still checked.
            if check {
                check_on_host(op, indices, axis, picks.axis_len)?;
            }
            return Ok(out);
        }
        let fault = self.upload_u32_beside(&[u32::MAX])?;
        let ranges = (self.range()?, indices.range()?, out.range()?);
        let fault_range = fault.range()?;
        self.with_runtime(|runtime| {
            layout::take_axis(runtime, op, ranges, fault_range, &picks, mode)
        })?;
        if check {
            report_fault(op, &fault, indices, axis, picks.axis_len)?;
        }
        Ok(out)
    }

    /// The scatter of `values` (of the picks' shape) at `indices` onto `base` (or zeros, where `base` is None),
    /// combined by `mode`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn run_scatter(
        op: &'static str,
        base: Option<&Tensor>,
        out_shape: &[usize],
        (indices, values): (&Tensor, &Tensor),
        picks: AxisPicks,
        mode: ScatterMode,
        check: bool,
        axis: usize,
    ) -> Result<Tensor> {
        let out = values.output(op, out_shape, DType::F32)?;
        if picks.axis_len == 0 && !indices.is_empty() && check {
            check_on_host(op, indices, axis, 0)?;
        }
        if out.is_empty() {
            return Ok(out);
        }
        if values.is_empty() {
            match base {
                Some(base) => out.copy_from(base)?,
                None => out.fill_(0.0)?,
            }
            return Ok(out);
        }
        let fault = values.upload_u32_beside(&[u32::MAX])?;
        let base_range = match base {
            Some(base) => base.range()?,
            // Not read: the output is bound in its place.
            None => out.range()?,
        };
        let ranges = (base_range, indices.range()?, values.range()?, out.range()?);
        let fault_range = fault.range()?;
        values.with_runtime(|runtime| {
            layout::scatter_axis(runtime, op, ranges, fault_range, &picks, mode)
        })?;
        if check {
            report_fault(op, &fault, indices, axis, picks.axis_len)?;
        }
        Ok(out)
    }

    /// A new tensor: this one with `values` added at `indices` along `axis` (`numpy.add.at(x, (:,)*axis +
    /// (indices,), values)`): repeated indices add up, in order. `values` has the shape `take(indices, axis)`
    /// would give.
    pub fn scatter_add(&self, indices: &Tensor, values: &Tensor, axis: usize) -> Result<Tensor> {
        let value = self.scatter_at("scatter_add", indices, values, axis, ScatterMode::Add)?;
        Tensor::record_scatter(value, (self, indices, values), axis, false)
    }

    /// A new tensor: this one with the entries at `indices` along `axis` set to `values` (of the shape
    /// `take(indices, axis)` would give); of repeated indices the last one's value is kept.
    pub fn index_update(&self, indices: &Tensor, values: &Tensor, axis: usize) -> Result<Tensor> {
        let value = self.scatter_at("index_update", indices, values, axis, ScatterMode::Put)?;
        Tensor::record_scatter(value, (self, indices, values), axis, true)
    }

    /// Records a scatter's result: gradients flow to the target (but where `put` overwrites it) and to the
    /// values.
    fn record_scatter(
        value: Tensor,
        (x, indices, values): (&Tensor, &Tensor, &Tensor),
        axis: usize,
        put: bool,
    ) -> Result<Tensor> {
        Tensor::record(&[x, indices, values], value, |nodes| Op::Scatter {
            x: nodes[0],
            indices: nodes[1],
            values: nodes[2],
            axis,
            put,
        })
    }

    fn scatter_at(
        &self,
        op: &'static str,
        indices: &Tensor,
        values: &Tensor,
        axis: usize,
        mode: ScatterMode,
    ) -> Result<Tensor> {
        self.expect_same_session(op, indices)?;
        self.expect_same_session(op, values)?;
        self.expect_dtype(op, DType::F32)?;
        values.expect_dtype(op, DType::F32)?;
        expect_axis(op, self.shape(), axis)?;
        let picks = take_picks(self.shape(), axis, indices)?;
        let expected = taken_shape(self.shape(), axis, indices.shape());
        if values.shape() != expected {
            return Err(shape_error(
                op,
                format!(
                    "values of shape {:?} do not fit indices of shape {:?} along axis {axis} of shape {:?}: they \
                     need shape {expected:?}",
                    values.shape(),
                    indices.shape(),
                    self.shape()
                ),
            ));
        }
        Tensor::run_scatter(
            op,
            Some(self),
            self.shape(),
            (indices, values),
            picks,
            mode,
            true,
            axis,
        )
    }

    /// The entries along each of `axes` (every axis where None) in reverse order (`numpy.flip`), in one pass.
    pub fn flip(&self, axes: Option<&[usize]>) -> Result<Tensor> {
        self.index(&flip_items(self.shape(), axes)?)
    }

    /// The entries along `axis` shifted by `shift` places, those past the end coming round to the start
    /// (`numpy.roll`); with no axis, over the flattened tensor, in its shape. Two passes (one where the shift
    /// is a whole turn).
    pub fn roll(&self, shift: i64, axis: Option<usize>) -> Result<Tensor> {
        let Some(axis) = axis else {
            // Recorded as its three ops where traced.
            return self
                .view_as(&[self.len()])?
                .roll(shift, Some(0))?
                .into_shape(self.shape());
        };
        let value = self.rolled(shift, axis)?;
        Tensor::record(&[self], value, |nodes| Op::Roll {
            x: nodes[0],
            shift,
            axis,
        })
    }

    fn rolled(&self, shift: i64, axis: usize) -> Result<Tensor> {
        const NAME: &str = "roll";
        expect_axis(NAME, self.shape(), axis)?;
        let len = self.shape()[axis];
        let shift = if len == 0 {
            0
        } else {
            shift.rem_euclid(len as i64) as usize
        };
        if shift == 0 {
            return self.try_clone();
        }
        let out = self.output(NAME, self.shape(), self.dtype())?;
        let strides = contiguous_signed(&layout::contiguous_strides(self.shape()));
        // out[shift..] = x[..len - shift], out[..shift] = x[len - shift..]
        for (from, to, count) in [(0, shift, len - shift), (len - shift, 0, shift)] {
            let mut block = self.shape().to_vec();
            block[axis] = count;
            let step = strides[axis] as usize;
            self.copy_signed(
                NAME,
                (from * step, &strides),
                &out,
                (to * step, &strides),
                &block,
            )?;
        }
        Ok(out)
    }
}

fn contiguous_signed(strides: &[usize]) -> Vec<isize> {
    strides.iter().map(|&stride| stride as isize).collect()
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

/// The basic index that reverses `axes` (all where None).
pub(crate) fn flip_items(
    shape: &[usize],
    axes: Option<&[usize]>,
) -> Result<Vec<IndexItem<'static, &'static Tensor>>> {
    let reverse = IndexItem::Slice(Slice {
        start: None,
        stop: None,
        step: -1,
    });
    let mut items = vec![IndexItem::Slice(Slice::ALL); shape.len()];
    match axes {
        None => items.fill(reverse),
        Some(axes) => {
            for &axis in axes {
                expect_axis("flip", shape, axis)?;
                items[axis] = reverse;
            }
        }
    }
    Ok(items)
}

/// `shape` with `axis` replaced by `indices`.
pub(crate) fn taken_shape(shape: &[usize], axis: usize, indices: &[usize]) -> Vec<usize> {
    shape[..axis]
        .iter()
        .chain(indices)
        .chain(&shape[axis + 1..])
        .copied()
        .collect()
}

/// The picks of a take of `indices` (any shape, one index per pick) along `axis` of `shape`.
pub(crate) fn take_picks(shape: &[usize], axis: usize, indices: &Tensor) -> Result<AxisPicks> {
    axes_picks(shape, axis..axis + 1, indices)
}

/// The picks of a take of `indices` along the axes `axes` of `shape`, merged into one.
pub(crate) fn axes_picks(
    shape: &[usize],
    axes: Range<usize>,
    indices: &Tensor,
) -> Result<AxisPicks> {
    let (_, axis_len, inner) = lanes_around(shape, &axes);
    Ok(AxisPicks {
        axis_len,
        inner,
        picked: indices.len(),
        index_strides: [0, 1, 0],
        signed: index_words_signed("take", indices)?,
    })
}

/// The picks of `take_along_axis`: `indices` of the rank of `shape`, of its sizes but along `axis`.
pub(crate) fn along_axis_picks(
    op: &'static str,
    shape: &[usize],
    indices: &Tensor,
    axis: usize,
) -> Result<AxisPicks> {
    expect_axis(op, shape, axis)?;
    let fits = indices.shape().len() == shape.len()
        && (0..shape.len()).all(|dim| dim == axis || indices.shape()[dim] == shape[dim]);
    if !fits {
        return Err(shape_error(
            op,
            format!(
                "indices of shape {:?} do not fit a tensor of shape {shape:?} along axis {axis}: they need its \
                 rank and its sizes on the other axes",
                indices.shape()
            ),
        ));
    }
    let (_, axis_len, inner) = lanes_around(shape, &(axis..axis + 1));
    let picked = indices.shape()[axis];
    Ok(AxisPicks {
        axis_len,
        inner,
        picked,
        index_strides: [picked * inner, inner, 1],
        signed: index_words_signed(op, indices)?,
    })
}

/// Signed strides that read `source` at the coordinates of `target` (NumPy broadcasting: 0 along stretched and
/// missing axes).
fn broadcast_into(op: &'static str, source: &[usize], target: &[usize]) -> Result<Vec<isize>> {
    let fits = source.len() <= target.len()
        && source
            .iter()
            .rev()
            .zip(target.iter().rev())
            .all(|(&from, &to)| from == to || from == 1);
    if !fits {
        return Err(shape_error(
            op,
            format!("a value of shape {source:?} does not broadcast to the selection's shape {target:?}"),
        ));
    }
    let own = layout::contiguous_strides(source);
    let pad = target.len() - source.len();
    Ok((0..target.len())
        .map(|dim| {
            if dim < pad || source[dim - pad] == 1 {
                0
            } else {
                own[dim - pad] as isize
            }
        })
        .collect())
}

/// Which axis of `shape` the mask at `position` of `items` starts at, checking that its shape is that of the
/// axes it covers; `consumed` holds how many axes each entry takes.
fn mask_axis<A>(
    op: &'static str,
    shape: &[usize],
    (items, consumed): (&[IndexItem<'_, A>], &[usize]),
    position: usize,
    mask_shape: &[usize],
) -> Result<usize> {
    if mask_shape.is_empty() {
        return Err(index_error(
            op,
            "a 0-d mask is not supported; index with a mask of 1 or more axes".to_string(),
        ));
    }
    let ellipsis_before = items[..position]
        .iter()
        .any(|item| matches!(item, IndexItem::Ellipsis));
    let start = if ellipsis_before {
        shape.len().checked_sub(consumed[position..].iter().sum())
    } else {
        Some(consumed[..position].iter().sum())
    };
    let covered = start.and_then(|start| shape.get(start..start + mask_shape.len()));
    match (start, covered) {
        (Some(start), Some(covered)) if covered == mask_shape => Ok(start),
        (Some(start), Some(covered)) => Err(index_error(
            op,
            format!(
                "a mask of shape {mask_shape:?} does not match axes {start}..{} of shape {shape:?} (sizes \
                 {covered:?})",
                start + mask_shape.len()
            ),
        )),
        _ => Err(index_error(
            op,
            format!(
                "too many indices: a mask of shape {mask_shape:?} does not fit a tensor of shape {shape:?}"
            ),
        )),
    }
}

/// Reads back the fault word a take or scatter left; if it names a position, the error names its index.
fn report_fault(
    op: &'static str,
    fault: &Tensor,
    indices: &Tensor,
    axis: usize,
    len: usize,
) -> Result<()> {
    let position = fault.to_vec_u32()?[0];
    if position == u32::MAX {
        return Ok(());
    }
    let values = host_indices(op, indices)?;
    let value = values
        .get(position as usize)
        .copied()
        .unwrap_or(i64::from(position));
    Err(index_error(
        op,
        format!("index {value} is out of bounds for axis {axis} with size {len}"),
    ))
}

/// Checks device indices on the host, where no pass runs to check them.
fn check_on_host(op: &'static str, indices: &Tensor, axis: usize, len: usize) -> Result<()> {
    for value in host_indices(op, indices)? {
        wrap_index(op, value, axis, len)?;
    }
    Ok(())
}
