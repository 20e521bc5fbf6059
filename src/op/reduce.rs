//! The value reductions, each declared once as a row (its identity, its combining WGSL, its value over an empty
//! axis), and what a reduction computes (a value, or an arg position).

/// Every value reduction, declared once. Each row of `for_each_reduce_op!` is
/// `Variant method { identity, combine, combine4, empty, divide_by_count, word_identity, word_combine, word_order }
/// "doc"`:
/// - `identity`: the WGSL value a lane starts from (`params.infinity` is +inf, which WGSL cannot write);
/// - `combine`: the WGSL merging `a` and `b`, f32s that are elements or partial results, so it must be
///   associative and commutative up to rounding (stages merge partials in trees of their own order);
/// - `combine4`: the same over vec4s, lane by lane (the vec4 chunk loop's; WGSL has no overloading, so
///   helpers have vec4 twins, `max_nan4` beside `max_nan`);
/// - `empty`: the result over an empty axis, NumPy's (`None`: an error, as for the max of nothing);
/// - `divide_by_count`: whether the result is divided by the lane's length (a mean is a sum, scaled);
/// - `word_identity`, `word_combine`: the same over the u32 words of an int32, uint32 or bool tensor, exactly
///   (wrapping on overflow, as NumPy's fixed-width integers do), or `""` where the op takes floats only (a mean:
///   the Array API standard defines it for floating-point dtypes);
/// - `word_order`: whether `word_combine` compares words, so that int32 words go through it with their sign bit
///   flipped (unsigned order is then signed order) and bools are refused (the standard's max and min take
///   numbers); a sum or product of words is the same bits for int32 as for uint32 (two's complement).
///
/// The op codes, the shader's `identity`, `combine` and `accumulate4` switches (an unknown code yields NaN, never
/// another op's result), `ReduceOp` and the `Tensor` methods (src/ops/reduce.rs) follow from these rows; an
/// arm in `reduce_gradient_rule` (src/autograd/rules.rs) and a reference in tests/all/common/reference.rs (its value, its
/// tolerance, whether the tape differentiates it) complete a new one.
macro_rules! for_each_reduce_op {
    ($callback:ident) => {
        $callback! {
            Sum sum { identity: "0.0", combine: "a + b", combine4: "a + b", empty: Some(0.0), divide_by_count: false,
                word_identity: "0u", word_combine: "a + b", word_order: false }
                "The sum of the elements (0 over an empty axis).";
            Mean mean { identity: "0.0", combine: "a + b", combine4: "a + b", empty: Some(f32::NAN), divide_by_count: true,
                word_identity: "", word_combine: "", word_order: false }
                "The arithmetic mean of the elements (NaN over an empty axis, as NumPy's 0/0).";
            Max max { identity: "-params.infinity", combine: "max_nan(a, b)", combine4: "max_nan4(a, b)", empty: None, divide_by_count: false,
                word_identity: "0u", word_combine: "max(a, b)", word_order: true }
                "The largest element (NaN if any is NaN; an error over an empty axis).";
            Min min { identity: "params.infinity", combine: "min_nan(a, b)", combine4: "min_nan4(a, b)", empty: None, divide_by_count: false,
                word_identity: "0xffffffffu", word_combine: "min(a, b)", word_order: true }
                "The smallest element (NaN if any is NaN; an error over an empty axis).";
            Prod prod { identity: "1.0", combine: "a * b", combine4: "a * b", empty: Some(1.0), divide_by_count: false,
                word_identity: "1u", word_combine: "a * b", word_order: false }
                "The product of the elements (1 over an empty axis).";
        }
    };
}

pub(crate) use for_each_reduce_op;

use crate::dtype::{DType, Kind};

/// One row of the value-reduction table.
pub(crate) struct ReduceRow {
    pub op: ReduceOp,
    pub identity: &'static str,
    pub combine: &'static str,
    pub combine4: &'static str,
    pub empty: Option<f32>,
    pub divide_by_count: bool,
    pub word_identity: &'static str,
    pub word_combine: &'static str,
    pub word_order: bool,
}

macro_rules! reduce_enum {
    ($($variant:ident $method:ident {
        identity: $identity:literal,
        combine: $combine:literal,
        combine4: $combine4:literal,
        empty: $empty:expr,
        divide_by_count: $divide:literal,
        word_identity: $word_identity:literal,
        word_combine: $word_combine:literal,
        word_order: $word_order:literal
    } $doc:literal;)*) => {
        /// Value reductions over all elements or along an axis; the discriminant is the shader's op code.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[non_exhaustive]
        pub enum ReduceOp {
            $(#[doc = $doc] $variant,)*
        }

        impl ReduceOp {
            /// Every row, in op-code order.
            pub(crate) const ALL: &'static [ReduceRow] = &[$(ReduceRow {
                op: ReduceOp::$variant,
                identity: $identity,
                combine: $combine,
                combine4: $combine4,
                empty: $empty,
                divide_by_count: $divide,
                word_identity: $word_identity,
                word_combine: $word_combine,
                word_order: $word_order,
            },)*];

            /// The name of the op, as its method is called.
            pub fn name(self) -> &'static str {
                match self {
                    $(ReduceOp::$variant => stringify!($method),)*
                }
            }

            /// What the op computes, as its row says (for help texts and bindings).
            pub fn description(self) -> &'static str {
                match self {
                    $(ReduceOp::$variant => $doc,)*
                }
            }

            /// Every value reduction, in op-code order (tests sweep them all, so a new row is tested too).
            pub fn all() -> impl Iterator<Item = ReduceOp> {
                Self::ALL.iter().map(|row| row.op)
            }

            /// The dtype of the op's result over a tensor of `dtype`, or None where it does not take that dtype:
            /// float32 gives float32; int32 and uint32 give themselves (the sum and product wrap); a bool tensor's
            /// sum and product give int32, the default integer dtype (NumPy's int64 is no dtype here), and its
            /// max and min are refused, as the standard's are.
            pub fn output(self, dtype: DType) -> Option<DType> {
                let row = self.row();
                match dtype.kind() {
                    Kind::Float => Some(DType::F32),
                    _ if row.word_combine.is_empty() => None,
                    Kind::Integer => Some(dtype),
                    Kind::Bool if row.word_order => None,
                    Kind::Bool => Some(DType::I32),
                }
            }

            pub(crate) fn row(self) -> &'static ReduceRow {
                // The rows are listed in the enum's order, so the discriminant is the row's position.
                &Self::ALL[self as usize]
            }
        }
    };
}

for_each_reduce_op!(reduce_enum);

/// What a reduction computes: a value of the table, or the position of the largest or smallest element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reduction {
    Value(ReduceOp),
    Argmax,
    Argmin,
}
