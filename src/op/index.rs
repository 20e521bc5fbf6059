//! The indexing vocabulary: what one entry of an index (NumPy's `x[...]`) may be. Shape inference reads it
//! (`shape::index_view`); the index ops and the tape take it with their own kind of array (`A`: a tensor, or a
//! tape's variable).

/// A Python slice `start:stop:step`: a bound left out is `None`, negative bounds count from the end, and bounds
/// past either end are clamped, as Python clamps them. The step may be negative, never 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slice {
    pub start: Option<i64>,
    pub stop: Option<i64>,
    pub step: i64,
}

impl Slice {
    /// `:`, the whole axis.
    pub const ALL: Slice = Slice {
        start: None,
        stop: None,
        step: 1,
    };

    /// `start:stop:step` with every part given.
    pub fn new(start: i64, stop: i64, step: i64) -> Self {
        Slice {
            start: Some(start),
            stop: Some(stop),
            step,
        }
    }
}

/// An integer array given on the host, row-major, with its shape: NumPy int arrays and lists of ints, whose
/// negative entries count from the end of their axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostArray<'a, T> {
    pub values: &'a [T],
    pub shape: &'a [usize],
}

/// One entry of an index, NumPy's semantics: basic entries (integers, slices, `...`, new axes) select a strided
/// view; integer arrays (on the device, `Array`, or the host, `HostArray`) pick entries along their axis,
/// broadcast together when there are several (their broadcast dims go where the first stands if they are
/// adjacent, else first); a mask (0/1 on the device, or booleans on the host) over as many axes as it has picks
/// the positions where it is set, as `mask.nonzero()` would.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum IndexItem<'a, A> {
    Int(i64),
    Slice(Slice),
    Ellipsis,
    NewAxis,
    Array(A),
    HostArray(HostArray<'a, i64>),
    Mask(A),
    HostMask(HostArray<'a, bool>),
}

impl<A> IndexItem<'_, A> {
    /// Whether the entry picks by an integer array (on either side).
    pub fn is_array(&self) -> bool {
        matches!(self, IndexItem::Array(_) | IndexItem::HostArray(_))
    }
}
