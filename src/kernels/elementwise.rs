//! Elementwise kernels (shaders/elementwise.wgsl): binary arithmetic with broadcasting, unary maths and scalar
//! forms, relu's gradient, fill and in-place scale-and-add. Operands the size of the output are bound in
//! windows, so every one of these works on tensors larger than one storage binding.

use bytemuck::{Pod, Zeroable};

use super::{dispatch, dispatch_windows, expect_bindable, per_element, windows, Family, Kernel};
use crate::error::{Error, Result};
use crate::session::{BufferRange, Gpu};
use crate::tensor::{DType, Tensor, MAX_RANK};

static ELEMENTWISE: Family = Family {
    name: "elementwise",
    source: include_str!("../../shaders/elementwise.wgsl"),
};

static BINARY: Kernel = Kernel {
    family: &ELEMENTWISE,
    entry: "binary",
    bindings: &[1, 2, 3],
};
static UNARY: Kernel = Kernel {
    family: &ELEMENTWISE,
    entry: "unary",
    bindings: &[1, 3],
};
static RELU_BACKWARD: Kernel = Kernel {
    family: &ELEMENTWISE,
    entry: "relu_backward",
    bindings: &[1, 2, 3],
};
static FILL: Kernel = Kernel {
    family: &ELEMENTWISE,
    entry: "fill",
    bindings: &[3],
};
static SCALE_ADD: Kernel = Kernel {
    family: &ELEMENTWISE,
    entry: "scale_add",
    bindings: &[3],
};

#[repr(C)]
#[derive(Clone, Copy, Default, Pod, Zeroable)]
struct Params {
    count: u32,
    base: u32,
    op: u32,
    windowed: u32,
    a: f32,
    b: f32,
    _pad: [u32; 2],
    dims: [u32; 4],
    lhs_strides: [u32; 4],
    rhs_strides: [u32; 4],
}

fn groups(gpu: &Gpu, count: u64) -> [u32; 3] {
    per_element(gpu, count, 1)
}

/// Runs a kernel whose bindings are all windows over the same elements.
fn over_windows(
    gpu: &mut Gpu,
    kernel: &'static Kernel,
    ranges: &[BufferRange],
    elements: u64,
    params: Params,
) -> Result<()> {
    dispatch_windows(gpu, kernel, ranges, elements, 1, |first, count| Params {
        count: count as u32,
        base: first as u32,
        ..params
    })
}

/// out = value
pub(crate) fn fill(gpu: &mut Gpu, range: BufferRange, elements: u64, value: f32) -> Result<()> {
    let params = Params {
        a: value,
        ..Params::default()
    };
    over_windows(gpu, &FILL, &[range], elements, params)
}

/// out = out * scale + shift
pub(crate) fn scale_add(
    gpu: &mut Gpu,
    range: BufferRange,
    elements: u64,
    scale: f32,
    shift: f32,
) -> Result<()> {
    let params = Params {
        a: scale,
        b: shift,
        ..Params::default()
    };
    over_windows(gpu, &SCALE_ADD, &[range], elements, params)
}

/// Copies `elements` values between ranges: by the copy engine across buffers, by a kernel within one buffer
/// (WebGPU forbids a buffer copy onto its own buffer, and tensors share slabs).
pub(crate) fn copy(gpu: &mut Gpu, from: BufferRange, to: BufferRange, elements: u64) -> Result<()> {
    if from.slab != to.slab {
        return gpu.copy(from, to);
    }
    let params = Params {
        op: UnaryOp::Copy as u32,
        ..Params::default()
    };
    over_windows(gpu, &UNARY, &[from, to], elements, params)
}

#[derive(Clone, Copy)]
pub(crate) enum BinaryOp {
    Add = 0,
    Sub = 1,
    Mul = 2,
    Div = 3,
}

#[derive(Clone, Copy)]
pub(crate) enum UnaryOp {
    Relu = 0,
    Exp = 1,
    Log = 2,
    Sqrt = 3,
    Neg = 4,
    AddScalar = 5,
    MulScalar = 6,
    DivScalar = 7,
    ScalarSub = 8,
    ScalarDiv = 9,
    SubScalar = 10,
    Copy = 11,
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
fn dims4(shape: &[usize]) -> [u32; 4] {
    let mut dims = [1u32; MAX_RANK];
    dims[MAX_RANK - shape.len()..]
        .iter_mut()
        .zip(shape)
        .for_each(|(dim, &size)| *dim = size as u32);
    dims
}

/// Strides that read an operand of `shape` at an output's coordinates (0 along broadcast axes).
fn broadcast_strides(shape: &[usize]) -> [u32; 4] {
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

fn binary(lhs: &Tensor, rhs: &Tensor, op: BinaryOp, name: &'static str) -> Result<Tensor> {
    lhs.expect_same_session(name, rhs)?;
    lhs.expect_dtype(name, DType::F32)?;
    rhs.expect_dtype(name, DType::F32)?;
    let shape = broadcast_shape(name, lhs.shape(), rhs.shape())?;
    let out = lhs.output(name, &shape, DType::F32)?;
    let elements = out.len() as u64;
    let (left, right, target) = (lhs.range()?, rhs.range()?, out.range()?);
    let dims = dims4(&shape);
    let left_windowed = lhs.len() == out.len();
    let right_windowed = rhs.len() == out.len();
    let params = Params {
        op: op as u32,
        windowed: u32::from(left_windowed) | (u32::from(right_windowed) << 1),
        dims,
        lhs_strides: broadcast_strides(lhs.shape()),
        rhs_strides: broadcast_strides(rhs.shape()),
        ..Params::default()
    };
    lhs.with_gpu(|gpu| {
        for (range, windowed) in [(left, left_windowed), (right, right_windowed)] {
            if !windowed {
                expect_bindable(gpu, name, range)?;
            }
        }
        for (first, count) in windows(gpu, elements) {
            let pick = |range: BufferRange, windowed: bool| {
                if windowed {
                    range.elements(first, count)
                } else {
                    range
                }
            };
            let ranges = [
                pick(left, left_windowed),
                pick(right, right_windowed),
                target.elements(first, count),
            ];
            let params = Params {
                count: count as u32,
                base: first as u32,
                ..params
            };
            dispatch(
                gpu,
                &BINARY,
                bytemuck::bytes_of(&params),
                &ranges,
                groups(gpu, count),
            )?;
        }
        Ok(())
    })?;
    Ok(out)
}

fn unary(input: &Tensor, op: UnaryOp, scalar: f32, name: &'static str) -> Result<Tensor> {
    input.expect_dtype(name, DType::F32)?;
    let out = input.output(name, input.shape(), DType::F32)?;
    let ranges = [input.range()?, out.range()?];
    let params = Params {
        op: op as u32,
        a: scalar,
        ..Params::default()
    };
    let elements = input.len() as u64;
    input.with_gpu(|gpu| over_windows(gpu, &UNARY, &ranges, elements, params))?;
    Ok(out)
}

/// Elementwise arithmetic, maths and their scalar forms.
impl Tensor {
    /// `self + other`, broadcasting as NumPy does (a bias row over a batch, say).
    pub fn add(&self, other: &Tensor) -> Result<Tensor> {
        binary(self, other, BinaryOp::Add, "add")
    }

    /// `self - other`, broadcasting.
    pub fn sub(&self, other: &Tensor) -> Result<Tensor> {
        binary(self, other, BinaryOp::Sub, "sub")
    }

    /// `self * other` elementwise, broadcasting.
    pub fn mul(&self, other: &Tensor) -> Result<Tensor> {
        binary(self, other, BinaryOp::Mul, "mul")
    }

    /// `self / other` elementwise, broadcasting.
    pub fn div(&self, other: &Tensor) -> Result<Tensor> {
        binary(self, other, BinaryOp::Div, "div")
    }

    pub fn add_scalar(&self, value: f32) -> Result<Tensor> {
        unary(self, UnaryOp::AddScalar, value, "add_scalar")
    }

    pub fn sub_scalar(&self, value: f32) -> Result<Tensor> {
        unary(self, UnaryOp::SubScalar, value, "sub_scalar")
    }

    pub fn mul_scalar(&self, value: f32) -> Result<Tensor> {
        unary(self, UnaryOp::MulScalar, value, "mul_scalar")
    }

    pub fn div_scalar(&self, value: f32) -> Result<Tensor> {
        unary(self, UnaryOp::DivScalar, value, "div_scalar")
    }

    /// `value - self`.
    pub fn scalar_sub(&self, value: f32) -> Result<Tensor> {
        unary(self, UnaryOp::ScalarSub, value, "scalar_sub")
    }

    /// `value / self`.
    pub fn scalar_div(&self, value: f32) -> Result<Tensor> {
        unary(self, UnaryOp::ScalarDiv, value, "scalar_div")
    }

    pub fn relu(&self) -> Result<Tensor> {
        unary(self, UnaryOp::Relu, 0.0, "relu")
    }

    pub fn exp(&self) -> Result<Tensor> {
        unary(self, UnaryOp::Exp, 0.0, "exp")
    }

    pub fn log(&self) -> Result<Tensor> {
        unary(self, UnaryOp::Log, 0.0, "log")
    }

    pub fn sqrt(&self) -> Result<Tensor> {
        unary(self, UnaryOp::Sqrt, 0.0, "sqrt")
    }

    pub fn neg(&self) -> Result<Tensor> {
        unary(self, UnaryOp::Neg, 0.0, "neg")
    }

    /// The gradient through relu: `gradient` where `self` (relu's input) is positive, else 0.
    pub fn relu_backward(&self, gradient: &Tensor) -> Result<Tensor> {
        self.expect_same_session("relu_backward", gradient)?;
        self.expect_dtype("relu_backward", DType::F32)?;
        gradient.expect_dtype("relu_backward", DType::F32)?;
        if self.shape() != gradient.shape() {
            return Err(Error::Shape {
                op: "relu_backward",
                message: format!(
                    "input {:?} and gradient {:?} differ",
                    self.shape(),
                    gradient.shape()
                ),
            });
        }
        let out = self.output("relu_backward", self.shape(), DType::F32)?;
        let ranges = [self.range()?, gradient.range()?, out.range()?];
        let elements = self.len() as u64;
        self.with_gpu(|gpu| {
            over_windows(gpu, &RELU_BACKWARD, &ranges, elements, Params::default())
        })?;
        Ok(out)
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
    fn broadcast_strides_are_zero_along_stretched_axes() {
        assert_eq!(broadcast_strides(&[4]), [0, 0, 0, 1]);
        assert_eq!(broadcast_strides(&[2, 1, 4]), [0, 4, 0, 1]);
        assert_eq!(broadcast_strides(&[2, 3, 4]), [0, 12, 4, 1]);
    }
}
