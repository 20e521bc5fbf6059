//! Logic operations: comparisons, logical and bitwise ops, the integer forms of arithmetic, the tests of
//! floats, `where`, and the reductions `all`, `any` and `count_nonzero`. Operands of two dtypes are promoted
//! by the Array API standard's table ([`DType::promoted`]), which joins none of these four: they must agree.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::logic::{self, Operand};
use crate::op::logic::{
    for_each_logic_binary_op, for_each_logic_unary_op, LogicBinaryOp, LogicUnaryOp, TruthReduction,
};
use crate::shape::broadcast;
use crate::tensor::{Op, Tensor};

/// The dtype two operands of `op` promote to, or the error naming both.
pub(crate) fn promoted(op: &'static str, lhs: DType, rhs: DType) -> Result<DType> {
    lhs.promoted(rhs).ok_or(Error::Promotion { op, lhs, rhs })
}

/// `shape`, or `expand_to` where given (which `shape` must broadcast to).
fn expanded(
    op: &'static str,
    shape: Vec<usize>,
    expand_to: Option<&[usize]>,
) -> Result<Vec<usize>> {
    match expand_to {
        Some(wanted) if broadcast(op, &shape, wanted)? != wanted => Err(Error::Shape {
            op,
            message: format!("operands of joint shape {shape:?} do not broadcast to {wanted:?}"),
        }),
        Some(wanted) => Ok(wanted.to_vec()),
        None => Ok(shape),
    }
}

fn logic_binary(
    lhs: &Tensor,
    rhs: &Tensor,
    op: LogicBinaryOp,
    expand_to: Option<&[usize]>,
) -> Result<Tensor> {
    let name = op.name();
    lhs.expect_same_session(name, rhs)?;
    let dtype = promoted(name, lhs.dtype(), rhs.dtype())?;
    if !op.takes(dtype) {
        return Err(Error::DTypes {
            op: name,
            expected: op.taken(),
            found: dtype,
        });
    }
    let shape = expanded(name, broadcast(name, lhs.shape(), rhs.shape())?, expand_to)?;
    let out = lhs.output(name, &shape, op.output(dtype))?;
    if out.is_empty() {
        return Ok(out);
    }
    let (left, right, target) = (lhs.range()?, rhs.range()?, out.range()?);
    let operands = (
        Operand {
            range: left,
            shape: lhs.shape(),
        },
        Operand {
            range: right,
            shape: rhs.shape(),
        },
    );
    lhs.with_runtime(|runtime| logic::binary(runtime, op, dtype, operands, target, &shape))?;
    Ok(out)
}

fn logic_unary(input: &Tensor, op: LogicUnaryOp) -> Result<Tensor> {
    let name = op.name();
    let dtype = input.dtype();
    if !op.takes(dtype) {
        return Err(Error::DTypes {
            op: name,
            expected: op.taken(),
            found: dtype,
        });
    }
    let out = input.output(name, input.shape(), op.output(dtype))?;
    if out.is_empty() {
        return Ok(out);
    }
    let (source, target) = (input.range()?, out.range()?);
    let elements = input.len() as u64;
    input.with_runtime(|runtime| logic::unary(runtime, op, dtype, source, target, elements))?;
    Ok(out)
}

/// The elementwise op `name` (a row of the float table) of operands not both float32: its integer form where
/// the logic table routes one (src/op/logic.rs), else the error naming the dtypes it takes.
pub(crate) fn routed_binary(
    lhs: &Tensor,
    rhs: &Tensor,
    name: &'static str,
    expand_to: Option<&[usize]>,
) -> Result<Tensor> {
    lhs.expect_same_session(name, rhs)?;
    let dtype = promoted(name, lhs.dtype(), rhs.dtype())?;
    match LogicBinaryOp::from_name(name).filter(|op| op.is_routed()) {
        Some(op) if op.takes(dtype) => logic_binary(lhs, rhs, op, expand_to),
        Some(_) => Err(Error::DTypes {
            op: name,
            expected: "float32, int32 or uint32",
            found: dtype,
        }),
        None => Err(Error::DType {
            op: name,
            expected: DType::F32,
            found: dtype,
        }),
    }
}

/// The elementwise op `name` of a tensor that is not float32: its integer form where the logic table routes
/// one, else the error naming the dtypes it takes.
pub(crate) fn routed_unary(input: &Tensor, name: &'static str) -> Result<Tensor> {
    let dtype = input.dtype();
    match LogicUnaryOp::from_name(name).filter(|op| op.is_routed()) {
        Some(op) if op.takes(dtype) => logic_unary(input, op),
        Some(_) => Err(Error::DTypes {
            op: name,
            expected: "float32, int32 or uint32",
            found: dtype,
        }),
        None => Err(Error::DType {
            op: name,
            expected: DType::F32,
            found: dtype,
        }),
    }
}

macro_rules! logic_binary_methods {
    ($($vis:ident $variant:ident $method:ident $out:ident $float:literal $integer:literal $bool:literal $doc:literal;)*) => {
        /// Comparisons, logical and bitwise ops, one method per `pub` row of the logic table.
        impl Tensor {
            $(logic_binary_method!($vis $variant $method $doc);)*
        }
    };
}

macro_rules! logic_binary_method {
    (pub $variant:ident $method:ident $doc:literal) => {
        #[doc = $doc]
        pub fn $method(&self, other: &Tensor) -> Result<Tensor> {
            logic_binary(self, other, LogicBinaryOp::$variant, None)
        }
    };
    (routed $($rest:tt)*) => {};
}

macro_rules! logic_unary_methods {
    ($($vis:ident $variant:ident $method:ident $out:ident $float:literal $integer:literal $bool:literal $doc:literal;)*) => {
        /// Tests of floats, logical and bitwise not, one method per `pub` row of the logic table.
        impl Tensor {
            $(logic_unary_method!($vis $variant $method $doc);)*
        }
    };
}

macro_rules! logic_unary_method {
    (pub $variant:ident $method:ident $doc:literal) => {
        #[doc = $doc]
        pub fn $method(&self) -> Result<Tensor> {
            logic_unary(self, LogicUnaryOp::$variant)
        }
    };
    (routed $($rest:tt)*) => {};
}

for_each_logic_binary_op!(logic_binary_methods);
for_each_logic_unary_op!(logic_unary_methods);

/// The logic tables' rows by value, `where`, and the reductions of truth values.
impl Tensor {
    /// `self (op) other`, broadcasting; the method named after a `pub` row does the same, and a routed row is
    /// what the float op of its name does for integer operands.
    pub fn logic_binary(&self, op: LogicBinaryOp, other: &Tensor) -> Result<Tensor> {
        logic_binary(self, other, op, None)
    }

    /// `op` of every element.
    pub fn logic_unary(&self, op: LogicUnaryOp) -> Result<Tensor> {
        logic_unary(self, op)
    }

    /// The standard's `where(condition, x1, x2)`, this tensor (bool) the condition: `x1` where it is true, else
    /// `x2`, the three broadcast together; `x1` and `x2` of one dtype, which the result has.
    ///
    /// ```
    /// use wgcompute::{Session, SessionOptions};
    /// # fn main() -> wgcompute::Result<()> {
    /// let session = Session::open(SessionOptions::default())?;
    /// let condition = session.upload_bool(&[true, false, true], &[3])?;
    /// let x1 = session.upload(&[1.0, 2.0, 3.0], &[3])?;
    /// let x2 = session.upload(&[-1.0], &[1])?;
    /// assert_eq!(condition.where_(&x1, &x2)?.to_vec()?, vec![1.0, -1.0, 3.0]);
    /// # Ok(()) }
    /// ```
    ///
    /// Recorded where a tape traces `x1` or `x2`: the gradient goes to `x1` where the condition holds and to
    /// `x2` elsewhere, summed over the axes each was broadcast along; the condition gets none.
    pub fn where_(&self, x1: &Tensor, x2: &Tensor) -> Result<Tensor> {
        let value = self.select_where(x1, x2)?;
        Tensor::record(&[self, x1, x2], value, |nodes| Op::Where {
            condition: nodes[0],
            x1: nodes[1],
            x2: nodes[2],
        })
    }

    fn select_where(&self, x1: &Tensor, x2: &Tensor) -> Result<Tensor> {
        const NAME: &str = "where";
        self.expect_same_session(NAME, x1)?;
        self.expect_same_session(NAME, x2)?;
        self.expect_dtype(NAME, DType::Bool)?;
        let dtype = promoted(NAME, x1.dtype(), x2.dtype())?;
        let shape = broadcast(
            NAME,
            &broadcast(NAME, self.shape(), x1.shape())?,
            x2.shape(),
        )?;
        let out = self.output(NAME, &shape, dtype)?;
        if out.is_empty() {
            return Ok(out);
        }
        let operand = |tensor: &Tensor| -> Result<(crate::runtime::BufferRange, Vec<usize>)> {
            Ok((tensor.range()?, tensor.shape().to_vec()))
        };
        let (condition, first, second) = (operand(self)?, operand(x1)?, operand(x2)?);
        let target = out.range()?;
        self.with_runtime(|runtime| {
            logic::where_select(
                runtime,
                (
                    Operand {
                        range: condition.0,
                        shape: &condition.1,
                    },
                    Operand {
                        range: first.0,
                        shape: &first.1,
                    },
                    Operand {
                        range: second.0,
                        shape: &second.1,
                    },
                ),
                target,
                &shape,
            )
        })?;
        Ok(out)
    }

    /// Whether any element is nonzero (true), over `axes` (all of them for None), as a bool tensor; the reduced
    /// axes are kept with length 1 where `keepdims`. Over no elements, false.
    pub fn any(&self, axes: Option<&[usize]>, keepdims: bool) -> Result<Tensor> {
        self.reduce_truth(TruthReduction::Any, axes, keepdims)
    }

    /// Whether every element is nonzero (true), as [`any`](Self::any) reduces. Over no elements, true.
    pub fn all(&self, axes: Option<&[usize]>, keepdims: bool) -> Result<Tensor> {
        self.reduce_truth(TruthReduction::All, axes, keepdims)
    }

    /// How many elements are nonzero (NaN counts; -0.0 does not), as an int32 tensor, reduced as
    /// [`any`](Self::any) reduces.
    pub fn count_nonzero(&self, axes: Option<&[usize]>, keepdims: bool) -> Result<Tensor> {
        self.reduce_truth(TruthReduction::CountNonzero, axes, keepdims)
    }

    fn reduce_truth(
        &self,
        reduction: TruthReduction,
        axes: Option<&[usize]>,
        keepdims: bool,
    ) -> Result<Tensor> {
        let name = reduction.name();
        let rank = self.shape().len();
        let mut reduced = vec![axes.is_none(); rank];
        for &axis in axes.unwrap_or(&[]) {
            if axis >= rank || reduced[axis] {
                return Err(Error::Shape {
                    op: name,
                    message: format!(
                        "axes {:?} are not distinct axes of a tensor of shape {:?}",
                        axes.unwrap_or(&[]),
                        self.shape()
                    ),
                });
            }
            reduced[axis] = true;
        }
        let shape: Vec<usize> = self
            .shape()
            .iter()
            .zip(&reduced)
            .filter_map(|(&dim, &gone)| match (gone, keepdims) {
                (false, _) => Some(dim),
                (true, true) => Some(1),
                (true, false) => None,
            })
            .collect();
        let out = self.output(name, &shape, reduction.output())?;
        if out.is_empty() {
            return Ok(out);
        }
        let (source, target) = (self.range()?, out.range()?);
        let dtype = self.dtype();
        self.with_runtime(|runtime| {
            logic::reduce_truth(
                runtime,
                reduction,
                dtype,
                (source, self.shape()),
                &reduced,
                target,
            )
        })?;
        Ok(out)
    }
}
