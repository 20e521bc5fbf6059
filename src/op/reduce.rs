//! The value reductions, each declared once as a row (its identity, its combining WGSL, its value over an empty
//! axis), and what a reduction computes (a value, or an arg position).

/// Every value reduction, declared once. Each row of `for_each_reduce_op!` is
/// `Variant method { identity, combine, combine4, empty, divide_by_count } "doc"`:
/// - `identity`: the WGSL value a lane starts from (`params.infinity` is +inf, which WGSL cannot write);
/// - `combine`: the WGSL merging `a` and `b`, f32s that are elements or partial results, so it must be
///   associative and commutative up to rounding (stages merge partials in trees of their own order);
/// - `combine4`: the same over vec4s, lane by lane (the vec4 chunk loop's; WGSL has no overloading, so
///   helpers have vec4 twins, `max_nan4` beside `max_nan`);
/// - `empty`: the result over an empty axis, NumPy's (`None`: an error, as for the max of nothing);
/// - `divide_by_count`: whether the result is divided by the lane's length (a mean is a sum, scaled).
///
/// The op codes, the shader's `identity`, `combine` and `accumulate4` switches (an unknown code yields NaN, never
/// another op's result), `ReduceOp` and the `Tensor` methods (src/ops/reduce.rs) follow from these rows; an
/// arm in `reduce_gradient_rule` (src/autograd/rules.rs) and a reference in tests/all/common/reference.rs (its value, its
/// tolerance, whether the tape differentiates it) complete a new one.
macro_rules! for_each_reduce_op {
    ($callback:ident) => {
        $callback! {
            Sum sum { identity: "0.0", combine: "a + b", combine4: "a + b", empty: Some(0.0), divide_by_count: false }
                "The sum of the elements (0 over an empty axis).";
            Mean mean { identity: "0.0", combine: "a + b", combine4: "a + b", empty: Some(f32::NAN), divide_by_count: true }
                "The arithmetic mean of the elements (NaN over an empty axis, as NumPy's 0/0).";
            Max max { identity: "-params.infinity", combine: "max_nan(a, b)", combine4: "max_nan4(a, b)", empty: None, divide_by_count: false }
                "The largest element (NaN if any is NaN; an error over an empty axis).";
            Min min { identity: "params.infinity", combine: "min_nan(a, b)", combine4: "min_nan4(a, b)", empty: None, divide_by_count: false }
                "The smallest element (NaN if any is NaN; an error over an empty axis).";
            Prod prod { identity: "1.0", combine: "a * b", combine4: "a * b", empty: Some(1.0), divide_by_count: false }
                "The product of the elements (1 over an empty axis).";
        }
    };
}

pub(crate) use for_each_reduce_op;

/// One row of the value-reduction table.
pub(crate) struct ReduceRow {
    pub op: ReduceOp,
    pub identity: &'static str,
    pub combine: &'static str,
    pub combine4: &'static str,
    pub empty: Option<f32>,
    pub divide_by_count: bool,
}

macro_rules! reduce_enum {
    ($($variant:ident $method:ident {
        identity: $identity:literal,
        combine: $combine:literal,
        combine4: $combine4:literal,
        empty: $empty:expr,
        divide_by_count: $divide:literal
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
