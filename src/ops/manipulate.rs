//! The Array API's shape manipulation: axes added, removed, moved and broadcast; tensors stacked, unstacked,
//! split, joined whole, tiled, repeated and padded. Each result is a new contiguous tensor, made by the strided
//! copy of the layout kernels (one pass per part, or per tiled axis) or, where elements are picked by position
//! (repeats per element, edge and reflect padding), by a row gather along the axis.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::layout::contiguous_strides;
use crate::shape::{broadcast, element_count};
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
            format!(
                "axis {axis} is out of range for shape {shape:?}, which has {} axes",
                shape.len()
            ),
        ))
    }
}

/// How [`Tensor::split`] cuts an axis (NumPy's `indices_or_sections`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Split {
    /// Into this many parts of equal length (for [`Tensor::split`], which must divide the axis; for
    /// [`Tensor::array_split`] the first `len % sections` parts are one longer).
    Sections(usize),
    /// At these positions: parts `..i0`, `i0..i1`, …, `ik..`, each clamped to the axis (so positions past it, or
    /// out of order, give empty parts), as NumPy slices.
    Indices(Vec<usize>),
}

impl Split {
    /// The (start, len) of each part of an axis of `len`: as [`Tensor::split`] cuts it (`strict`: sections
    /// must divide the axis) or [`Tensor::array_split`].
    ///
    /// ```
    /// use wgcompute::Split;
    /// assert_eq!(Split::Sections(3).bounds(7, false).ok(), Some(vec![(0, 3), (3, 2), (5, 2)]));
    /// assert!(Split::Sections(3).bounds(7, true).is_err());
    /// assert_eq!(Split::Indices(vec![2, 9]).bounds(5, true).ok(), Some(vec![(0, 2), (2, 3), (5, 0)]));
    /// ```
    pub fn bounds(&self, len: usize, strict: bool) -> Result<Vec<(usize, usize)>> {
        split_bounds(
            if strict { "split" } else { "array_split" },
            len,
            self,
            strict,
        )
    }
}

/// How many times [`Tensor::repeat`] repeats each element.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Repeats {
    /// Every element the same number of times.
    Each(usize),
    /// Element i `counts[i]` times (one count per element along the axis; a single count is [`Repeats::Each`]).
    PerElement(Vec<usize>),
}

/// What [`Tensor::pad`] fills the border with (NumPy's `mode`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PadMode {
    /// A value (NumPy's `constant` with `constant_values`).
    Constant(f32),
    /// The edge element repeated (NumPy's `edge`).
    Edge,
    /// The elements mirrored about the edge element, which is not repeated (NumPy's `reflect`); each width at
    /// most the axis length less one.
    Reflect,
}

/// The (start, len) of each part of an axis of `len` cut as `how` says; `strict` refuses sections that do not
/// divide the axis (NumPy's `split`, where `array_split` lets the first parts be one longer).
pub(crate) fn split_bounds(
    op: &'static str,
    len: usize,
    how: &Split,
    strict: bool,
) -> Result<Vec<(usize, usize)>> {
    match how {
        Split::Sections(0) => Err(Error::InvalidArgument {
            what: "split sections",
            given: "0".to_string(),
            expected: "at least one section".to_string(),
        }),
        &Split::Sections(sections) => {
            if strict && !len.is_multiple_of(sections) {
                return Err(shape_error(
                    op,
                    format!(
                        "{sections} sections do not divide an axis of {len} equally; array_split allows \
                         unequal parts"
                    ),
                ));
            }
            let (base, longer) = (len / sections, len % sections);
            let mut start = 0;
            Ok((0..sections)
                .map(|part| {
                    let part_len = base + usize::from(part < longer);
                    start += part_len;
                    (start - part_len, part_len)
                })
                .collect())
        }
        Split::Indices(indices) => {
            let mut bounds = Vec::with_capacity(indices.len() + 1);
            let mut start = 0;
            for &end in indices.iter().chain(std::iter::once(&len)) {
                let (from, to) = (start.min(len), end.min(len));
                bounds.push((from, to.saturating_sub(from)));
                start = end;
            }
            Ok(bounds)
        }
    }
}

/// The permutation NumPy's `moveaxis` makes: each of `source` moves to the matching place of `destination`,
/// the other axes keep their order.
pub(crate) fn moveaxis_order(
    op: &'static str,
    rank: usize,
    source: &[usize],
    destination: &[usize],
) -> Result<Vec<usize>> {
    let distinct = |axes: &[usize]| {
        let mut sorted = axes.to_vec();
        sorted.sort_unstable();
        sorted.windows(2).all(|pair| pair[0] != pair[1]) && sorted.iter().all(|&axis| axis < rank)
    };
    if source.len() != destination.len() || !distinct(source) || !distinct(destination) {
        return Err(shape_error(
            op,
            format!(
                "source {source:?} and destination {destination:?} must be as many distinct axes each, below \
                 the rank {rank}"
            ),
        ));
    }
    let mut order: Vec<usize> = (0..rank).filter(|axis| !source.contains(axis)).collect();
    let mut pairs: Vec<(usize, usize)> = destination
        .iter()
        .copied()
        .zip(source.iter().copied())
        .collect();
    pairs.sort_unstable();
    for (to, from) in pairs {
        order.insert(to, from);
    }
    Ok(order)
}

/// The padded length of each axis, checked against the mode: one width pair per axis, reflect at most the
/// axis less one, edge and reflect only of an axis that holds something to repeat.
pub(crate) fn padded_shape(
    op: &'static str,
    shape: &[usize],
    widths: &[(usize, usize)],
    mode: PadMode,
) -> Result<Vec<usize>> {
    if widths.len() != shape.len() {
        return Err(shape_error(
            op,
            format!(
                "{} (before, after) widths for shape {shape:?}, which has {} axes",
                widths.len(),
                shape.len()
            ),
        ));
    }
    for (axis, (&len, &(before, after))) in shape.iter().zip(widths).enumerate() {
        let widest = before.max(after);
        let refused = match mode {
            PadMode::Constant(_) => None,
            PadMode::Edge if widest > 0 && len == 0 => Some("edge padding of an empty axis"),
            PadMode::Reflect if widest > 0 && widest >= len => {
                Some("reflect padding wider than the axis less one")
            }
            _ => None,
        };
        if let Some(what) = refused {
            return Err(shape_error(
                op,
                format!(
                    "{what}: widths ({before}, {after}) along axis {axis} of length {len} (shape {shape:?})"
                ),
            ));
        }
    }
    let padded: Vec<usize> = shape
        .iter()
        .zip(widths)
        .map(|(&len, &(before, after))| len.saturating_add(before).saturating_add(after))
        .collect();
    element_count(op, &padded)?;
    Ok(padded)
}

/// For each position of an axis of `len` padded by `(before, after)` in `mode` (edge or reflect), the position
/// of the element it copies.
pub(crate) fn pad_sources(len: usize, (before, after): (usize, usize), mode: PadMode) -> Vec<u32> {
    let last = len as i64 - 1;
    (0..(before + len + after) as i64)
        .map(|position| {
            let index = position - before as i64;
            let source = match mode {
                PadMode::Reflect if index < 0 => -index,
                PadMode::Reflect if index > last => 2 * last - index,
                _ => index.clamp(0, last.max(0)),
            };
            source as u32
        })
        .collect()
}

/// For each position of a repeated axis, the element it copies.
pub(crate) fn repeat_sources(counts: &[usize]) -> Vec<u32> {
    counts
        .iter()
        .enumerate()
        .flat_map(|(index, &count)| std::iter::repeat_n(index as u32, count))
        .collect()
}

/// The count of each of `len` elements, checked: one count, or one per element.
pub(crate) fn repeat_counts(op: &'static str, len: usize, repeats: &Repeats) -> Result<Vec<usize>> {
    match repeats {
        Repeats::Each(count) => Ok(vec![*count; len]),
        Repeats::PerElement(counts) if counts.len() == 1 => Ok(vec![counts[0]; len]),
        Repeats::PerElement(counts) if counts.len() == len => Ok(counts.clone()),
        Repeats::PerElement(counts) => Err(shape_error(
            op,
            format!(
                "{} repeat counts for an axis of {len} elements: give one count, or one per element",
                counts.len()
            ),
        )),
    }
}

/// The shape `tile` gives: `reps` and `shape` aligned at the right, the shorter padded with 1s.
pub(crate) fn tiled_shape(shape: &[usize], reps: &[usize]) -> (Vec<usize>, Vec<usize>) {
    let rank = shape.len().max(reps.len());
    let pad = |dims: &[usize]| -> Vec<usize> {
        std::iter::repeat_n(1, rank - dims.len())
            .chain(dims.iter().copied())
            .collect()
    };
    (pad(shape), pad(reps))
}

impl Tensor {
    /// This tensor with an axis of length 1 inserted at `axis` (from 0 to the rank).
    pub fn expand_dims(&self, axis: usize) -> Result<Tensor> {
        self.reshape(&self.expand_dims_shape(axis)?)
    }

    /// The shape [`Tensor::expand_dims`] gives, checked.
    pub(crate) fn expand_dims_shape(&self, axis: usize) -> Result<Vec<usize>> {
        let shape = self.shape();
        if axis > shape.len() {
            return Err(shape_error(
                "expand_dims",
                format!(
                    "axis {axis} is out of range for inserting into shape {shape:?} (0 to {})",
                    shape.len()
                ),
            ));
        }
        let mut out_shape = shape.to_vec();
        out_shape.insert(axis, 1);
        element_count("expand_dims", &out_shape)?;
        Ok(out_shape)
    }

    /// This tensor without the `axes`, each of length 1 (none named twice).
    pub fn squeeze(&self, axes: &[usize]) -> Result<Tensor> {
        self.reshape(&self.squeezed_shape(axes)?)
    }

    /// The shape [`Tensor::squeeze`] gives, checked.
    pub(crate) fn squeezed_shape(&self, axes: &[usize]) -> Result<Vec<usize>> {
        const NAME: &str = "squeeze";
        let shape = self.shape();
        let sorted = crate::shape::reduced_axes(NAME, shape, Some(axes))?;
        if let Some(&axis) = sorted.iter().find(|&&axis| shape[axis] != 1) {
            return Err(shape_error(
                NAME,
                format!(
                    "axis {axis} of shape {shape:?} has length {}; only axes of length 1 are removed",
                    shape[axis]
                ),
            ));
        }
        Ok(crate::shape::kept_shape(shape, &sorted, false))
    }

    /// The elements in one axis, in row-major order.
    pub fn flatten(&self) -> Result<Tensor> {
        self.reshape(&[self.len()])
    }

    /// The Array API's name for [`Tensor::permute`].
    pub fn permute_dims(&self, axes: &[usize]) -> Result<Tensor> {
        self.permute(axes)
    }

    /// The Array API's name for [`Tensor::transpose`]: axes `first` and `second` swapped.
    pub fn swapaxes(&self, first: usize, second: usize) -> Result<Tensor> {
        self.transpose(first, second)
    }

    /// Axes `source` moved to `destination` (as many, distinct), the others in their order (`numpy.moveaxis`).
    pub fn moveaxis(&self, source: &[usize], destination: &[usize]) -> Result<Tensor> {
        let order = moveaxis_order("moveaxis", self.shape().len(), source, destination)?;
        self.permute(&order)
    }

    /// This tensor broadcast to `shape` (NumPy's rules: aligned at the right, a 1 stretches), in one pass.
    pub fn broadcast_to(&self, shape: &[usize]) -> Result<Tensor> {
        let value = self.broadcast_values(shape)?;
        Tensor::record(&[self], value, |nodes| Op::BroadcastTo { x: nodes[0] })
    }

    fn broadcast_values(&self, shape: &[usize]) -> Result<Tensor> {
        const NAME: &str = "broadcast_to";
        element_count(NAME, shape)?;
        let ours = self.shape();
        if shape.len() < ours.len() || broadcast(NAME, ours, shape)? != shape {
            return Err(shape_error(
                NAME,
                format!("shape {ours:?} does not broadcast to {shape:?}"),
            ));
        }
        let own_strides = contiguous_strides(ours);
        let lead = shape.len() - ours.len();
        let strides: Vec<usize> = (0..shape.len())
            .map(|axis| match axis.checked_sub(lead) {
                Some(own) if ours[own] != 1 => own_strides[own],
                _ => 0,
            })
            .collect();
        let out = self.output(NAME, shape, self.dtype())?;
        self.copy_strided(
            NAME,
            (0, &strides),
            &out,
            (0, &contiguous_strides(shape)),
            shape,
        )?;
        Ok(out)
    }

    /// The tensors broadcast to their common shape (`numpy.broadcast_arrays`).
    pub fn broadcast_arrays(tensors: &[&Tensor]) -> Result<Vec<Tensor>> {
        let shape = broadcast_all("broadcast_arrays", tensors)?;
        tensors
            .iter()
            .map(|tensor| tensor.broadcast_to(&shape))
            .collect()
    }

    /// The tensors, all of one shape, joined along a new axis at `axis` (from 0 to their rank): one pass each.
    pub fn stack(parts: &[&Tensor], axis: usize) -> Result<Tensor> {
        let out_shape = Tensor::stack_shape(parts, axis)?;
        // Each part given its new axis (a view), joined: one pass each.
        let mut part_shape = out_shape;
        part_shape[axis] = 1;
        let expanded = parts
            .iter()
            .map(|part| part.view_as(&part_shape))
            .collect::<Result<Vec<_>>>()?;
        Tensor::concat(&expanded.iter().collect::<Vec<_>>(), axis)
    }

    /// The shape [`Tensor::stack`] gives, checked: at least one part, all of one session, dtype and shape.
    pub(crate) fn stack_shape(parts: &[&Tensor], axis: usize) -> Result<Vec<usize>> {
        const NAME: &str = "stack";
        let Some(first) = parts.first() else {
            return Err(shape_error(NAME, "needs at least one tensor".to_string()));
        };
        let shape = first.shape();
        if axis > shape.len() {
            return Err(shape_error(
                NAME,
                format!(
                    "axis {axis} is out of range for stacking tensors of shape {shape:?} (0 to {})",
                    shape.len()
                ),
            ));
        }
        for part in parts {
            first.expect_same_session(NAME, part)?;
            part.expect_dtype(NAME, first.dtype())?;
            if part.shape() != shape {
                return Err(shape_error(
                    NAME,
                    format!(
                        "stacks tensors of one shape; got {:?} beside {shape:?}",
                        part.shape()
                    ),
                ));
            }
        }
        let mut out_shape = shape.to_vec();
        out_shape.insert(axis, parts.len());
        element_count(NAME, &out_shape)?;
        Ok(out_shape)
    }

    /// The slices along `axis`, each without it (the inverse of [`Tensor::stack`]): one pass each.
    pub fn unstack(&self, axis: usize) -> Result<Vec<Tensor>> {
        const NAME: &str = "unstack";
        let shape = self.shape();
        expect_axis(NAME, shape, axis)?;
        // A narrow per slice (one pass each), its axis dropped.
        let mut part_shape = shape.to_vec();
        part_shape.remove(axis);
        (0..shape[axis])
            .map(|index| self.narrow(axis, index, 1)?.into_shape(&part_shape))
            .collect()
    }

    /// The parts of `axis` cut as `how` says (NumPy's `split`: sections must divide the axis).
    pub fn split(&self, how: &Split, axis: usize) -> Result<Vec<Tensor>> {
        self.split_parts("split", how, axis, true)
    }

    /// The parts of `axis` cut as `how` says, sections allowed not to divide it (NumPy's `array_split`).
    pub fn array_split(&self, how: &Split, axis: usize) -> Result<Vec<Tensor>> {
        self.split_parts("array_split", how, axis, false)
    }

    fn split_parts(
        &self,
        name: &'static str,
        how: &Split,
        axis: usize,
        strict: bool,
    ) -> Result<Vec<Tensor>> {
        expect_axis(name, self.shape(), axis)?;
        split_bounds(name, self.shape()[axis], how, strict)?
            .into_iter()
            .map(|(start, len)| self.narrow(axis, start, len))
            .collect()
    }

    /// The tensors' elements joined in one axis, each flattened (the Array API's `concat` with `axis=None`).
    pub fn concat_flat(parts: &[&Tensor]) -> Result<Tensor> {
        // Each part flattened (a view), joined: one pass each; `concat` checks the parts (at least one).
        let flat = parts
            .iter()
            .map(|part| part.view_as(&[part.len()]))
            .collect::<Result<Vec<_>>>()?;
        Tensor::concat(&flat.iter().collect::<Vec<_>>(), 0)
    }

    /// This tensor repeated `reps[i]` times along axis i (`numpy.tile`; `reps` and the shape aligned at the
    /// right, the shorter padded with 1s): one pass per axis repeated more than once.
    pub fn tile(&self, reps: &[usize]) -> Result<Tensor> {
        const NAME: &str = "tile";
        let (shape, reps) = tiled_shape(self.shape(), reps);
        let out_shape: Vec<usize> = shape.iter().zip(&reps).map(|(a, b)| a * b).collect();
        element_count(NAME, &out_shape)?;
        // A broadcast per tiled axis, [outer, 1, block] to [outer, reps, block]: one pass each, whose gradient
        // sums the copies.
        let mut shape = shape;
        let mut current: Option<Tensor> = None;
        for axis in 0..shape.len() {
            if reps[axis] == 1 {
                continue;
            }
            let source = current.as_ref().unwrap_or(self);
            let outer: usize = shape[..axis].iter().product();
            let block: usize = shape[axis..].iter().product();
            let copies = source
                .view_as(&[outer, 1, block])?
                .broadcast_to(&[outer, reps[axis], block])?;
            shape[axis] *= reps[axis];
            current = Some(copies.into_shape(&shape)?);
        }
        match current {
            Some(tiled) => tiled.into_shape(&out_shape),
            None => self.reshape(&out_shape),
        }
    }

    /// Each element repeated along `axis` (`None`: of the flattened tensor) as `repeats` says
    /// (`numpy.repeat`): a count for all in one pass, counts per element by a gather.
    pub fn repeat(&self, repeats: &Repeats, axis: Option<usize>) -> Result<Tensor> {
        const NAME: &str = "repeat";
        let (shape, axis) = match axis {
            Some(axis) => {
                expect_axis(NAME, self.shape(), axis)?;
                (self.shape().to_vec(), axis)
            }
            None => (vec![self.len()], 0),
        };
        let counts = repeat_counts(NAME, shape[axis], repeats)?;
        let mut out_shape = shape.clone();
        out_shape[axis] = counts
            .iter()
            .try_fold(0usize, |total, &count| total.checked_add(count))
            .ok_or_else(|| shape_error(NAME, format!("repeats {repeats:?} overflow")))?;
        element_count(NAME, &out_shape)?;
        let outer: usize = shape[..axis].iter().product();
        let inner: usize = shape[axis + 1..].iter().product();
        let uniform = counts
            .first()
            .copied()
            .filter(|&first| counts.iter().all(|&count| count == first));
        if let Some(count) = uniform {
            // [outer, len, 1, inner] broadcast to [outer, len, count, inner]: every copy of an element reads it,
            // in one pass, whose gradient sums the copies.
            let len = shape[axis];
            let copies = self
                .view_as(&[outer, len, 1, inner])?
                .broadcast_to(&[outer, len, count, inner])?;
            return copies.into_shape(&out_shape);
        }
        let picked = self.gather_along(&shape, axis, &repeat_sources(&counts))?;
        picked.into_shape(&out_shape)
    }

    /// This tensor padded by `widths` (before, after) along each axis, the border filled as `mode` says
    /// (`numpy.pad`): a constant in two passes, edge and reflect by a gather along each padded axis.
    pub fn pad(&self, widths: &[(usize, usize)], mode: PadMode) -> Result<Tensor> {
        const NAME: &str = "pad";
        let out_shape = padded_shape(NAME, self.shape(), widths, mode)?;
        match mode {
            PadMode::Constant(value) => {
                let out = self.output(NAME, &out_shape, self.dtype())?;
                if !out.is_empty() {
                    self.write_padded(&out, value, widths)?;
                }
                Tensor::record(&[self], out, |nodes| Op::PadConstant {
                    x: nodes[0],
                    widths: widths.to_vec(),
                })
            }
            PadMode::Edge | PadMode::Reflect => {
                let mut current: Option<Tensor> = None;
                let mut shape = self.shape().to_vec();
                for (axis, &width) in widths.iter().enumerate() {
                    if width == (0, 0) {
                        continue;
                    }
                    let sources = pad_sources(shape[axis], width, mode);
                    let source = current.as_ref().unwrap_or(self);
                    let picked = source.gather_along(&shape, axis, &sources)?;
                    shape[axis] = sources.len();
                    current = Some(picked);
                }
                match current {
                    Some(padded) => padded.into_shape(&out_shape),
                    None => self.reshape(&out_shape),
                }
            }
        }
    }

    /// Writes `out` (this tensor's shape padded by `widths`, at least one element): `value` everywhere, then this
    /// tensor inside the border, in two passes.
    fn write_padded(&self, out: &Tensor, value: f32, widths: &[(usize, usize)]) -> Result<()> {
        const NAME: &str = "pad";
        out.fill_(value)?;
        let strides = contiguous_strides(out.shape());
        let offset = widths
            .iter()
            .zip(&strides)
            .map(|(&(before, _), stride)| before * stride)
            .sum();
        self.copy_strided(
            NAME,
            (0, &contiguous_strides(self.shape())),
            out,
            (offset, &strides),
            self.shape(),
        )
    }

    /// The entries at `sources` along `axis` of this tensor seen as `shape`, in that order, in row-major order
    /// (the caller gives the result its shape): the axis moved first where it is not, then a row gather.
    fn gather_along(&self, shape: &[usize], axis: usize, sources: &[u32]) -> Result<Tensor> {
        let outer: usize = shape[..axis].iter().product();
        let len = shape[axis];
        let inner: usize = shape[axis + 1..].iter().product();
        let indices = self.upload_u32_beside(sources)?;
        if outer == 1 {
            return self.view_as(&[len, inner])?.gather_rows(&indices);
        }
        let moved = self.view_as(&[outer, len, inner])?.permute(&[1, 0, 2])?;
        let picked = moved.gather_rows(&indices)?;
        picked.permute(&[1, 0, 2])
    }

    /// The lower triangle of each matrix of the last two axes: the elements on and below diagonal `k` (0 the
    /// main one, positive above it), the others 0 (the Array API's `tril`).
    pub fn tril(&self, k: i64) -> Result<Tensor> {
        let value = self.triangle("tril", k, true)?;
        Tensor::record(&[self], value, |nodes| Op::Triangle {
            x: nodes[0],
            k,
            lower: true,
        })
    }

    /// The upper triangle of each matrix of the last two axes: the elements on and above diagonal `k`, the
    /// others 0 (the Array API's `triu`).
    pub fn triu(&self, k: i64) -> Result<Tensor> {
        let value = self.triangle("triu", k, false)?;
        Tensor::record(&[self], value, |nodes| Op::Triangle {
            x: nodes[0],
            k,
            lower: false,
        })
    }

    pub(crate) fn triangle(&self, name: &'static str, k: i64, lower: bool) -> Result<Tensor> {
        self.expect_dtype(name, DType::F32)?;
        let shape = self.shape();
        if shape.len() < 2 {
            return Err(shape_error(
                name,
                format!("needs a matrix or a stack of them (2 axes or more); got shape {shape:?}"),
            ));
        }
        let out = self.output(name, shape, DType::F32)?;
        if out.is_empty() {
            return Ok(out);
        }
        let (rows, cols) = (shape[shape.len() - 2], shape[shape.len() - 1]);
        let (source, target, elements) = (self.range()?, out.range()?, self.len() as u64);
        self.with_runtime(|runtime| {
            crate::kernels::creation::triangle(
                runtime,
                name,
                (source, target, elements),
                (rows, cols),
                k,
                lower,
            )
        })?;
        Ok(out)
    }

    /// The parts of a padded tensor of `padded` shape that this one was padded from by `widths`: the interior,
    /// in one pass (a constant pad's gradient).
    pub(crate) fn pad_interior(
        &self,
        widths: &[(usize, usize)],
        interior: &[usize],
    ) -> Result<Tensor> {
        const NAME: &str = "pad backward";
        let strides = contiguous_strides(self.shape());
        let offset = widths
            .iter()
            .zip(&strides)
            .map(|(&(before, _), stride)| before * stride)
            .sum();
        let out = self.output(NAME, interior, self.dtype())?;
        self.copy_strided(
            NAME,
            (offset, &strides),
            &out,
            (0, &contiguous_strides(interior)),
            interior,
        )?;
        Ok(out)
    }
}

/// The shape the tensors broadcast to together, checked.
pub(crate) fn broadcast_all(op: &'static str, tensors: &[&Tensor]) -> Result<Vec<usize>> {
    let mut shape: Vec<usize> = Vec::new();
    for tensor in tensors {
        if let Some(first) = tensors.first() {
            first.expect_same_session(op, tensor)?;
        }
        shape = broadcast(op, &shape, tensor.shape())?;
    }
    element_count(op, &shape)?;
    Ok(shape)
}
