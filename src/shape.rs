//! Shape algebra, with no device in sight: element counts, NumPy broadcasting, the strides that read an
//! operand at an output's coordinates, and a tensor seen around one axis.

use crate::error::{Error, Result};

/// Highest rank a tensor may have.
pub const MAX_RANK: usize = 4;

/// The element count of a shape, or a shape error if the rank is too high or the count overflows.
pub(crate) fn element_count(op: &'static str, shape: &[usize]) -> Result<usize> {
    if shape.len() > MAX_RANK {
        return Err(Error::Shape {
            op,
            message: format!(
                "rank {} of shape {shape:?} is over the maximum of {MAX_RANK}",
                shape.len()
            ),
        });
    }
    shape
        .iter()
        .try_fold(1usize, |total, &dim| total.checked_mul(dim))
        .ok_or_else(|| Error::Shape {
            op,
            message: format!("shape {shape:?} has more elements than memory can hold"),
        })
}

/// The shape two shapes broadcast to (NumPy's rules: aligned at the right, 1 stretches).
pub(crate) fn broadcast_shape(
    op: &'static str,
    lhs: &[usize],
    rhs: &[usize],
) -> Result<Vec<usize>> {
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
                return Err(Error::Shape {
                    op,
                    message: format!("shapes {lhs:?} and {rhs:?} do not broadcast together"),
                })
            }
        };
    }
    Ok(shape)
}

/// Pads a shape at the front to rank 4.
pub(crate) fn dims4(shape: &[usize]) -> [u32; 4] {
    let mut dims = [1u32; MAX_RANK];
    dims[MAX_RANK - shape.len()..]
        .iter_mut()
        .zip(shape)
        .for_each(|(dim, &size)| *dim = size as u32);
    dims
}

/// Strides that read an operand of `shape` at an output's coordinates (0 along broadcast axes).
pub(crate) fn broadcast_strides(shape: &[usize]) -> [u32; 4] {
    let dims = dims4(shape);
    let mut strides = [0u32; 4];
    let mut stride = 1u32;
    for axis in (0..MAX_RANK).rev() {
        // A size-1 axis is read at coordinate 0 whatever the output's coordinate.
        strides[axis] = if dims[axis] == 1 { 0 } else { stride };
        stride *= dims[axis];
    }
    strides
}

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
        Some(axis) => Err(Error::Shape {
            op,
            message: format!("axis {axis} is out of range for shape {shape:?}"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_broadcast_like_numpy() {
        assert_eq!(
            broadcast_shape("t", &[10, 1000], &[1000]).ok(),
            Some(vec![10, 1000])
        );
        assert_eq!(
            broadcast_shape("t", &[3, 1], &[1, 4]).ok(),
            Some(vec![3, 4])
        );
        assert_eq!(broadcast_shape("t", &[], &[2, 2]).ok(), Some(vec![2, 2]));
        assert!(broadcast_shape("t", &[3], &[4]).is_err());
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
    fn element_counts_refuse_overflow_and_high_ranks() {
        assert_eq!(element_count("t", &[]).ok(), Some(1));
        assert_eq!(element_count("t", &[3, 0, 5]).ok(), Some(0));
        assert!(element_count("t", &[usize::MAX, 2]).is_err());
        assert!(element_count("t", &[1, 1, 1, 1, 1]).is_err());
    }

    #[test]
    fn broadcast_strides_are_zero_along_stretched_axes() {
        assert_eq!(broadcast_strides(&[4]), [0, 0, 0, 1]);
        assert_eq!(broadcast_strides(&[2, 1, 4]), [0, 4, 0, 1]);
        assert_eq!(broadcast_strides(&[2, 3, 4]), [0, 12, 4, 1]);
    }
}
