//! The logic ops, each declared once as a row: comparisons, logical and bitwise ops, the elementwise tests of
//! floats, and the integer forms of arithmetic that the float table names. A row gives its WGSL for each kind
//! of dtype it takes (an empty string: the op does not take that kind), so the shader's switches and the dtype
//! checks of the ops layer follow from the same rows.

/// Every logic op of two operands, declared once. Each row is
/// `visibility Variant name output "float32" "integer" "bool" "doc"`: `output` is `bool` (a comparison) or
/// `same` (the operands' dtype); each WGSL expression is of `x` and `y` (f32, i32 or u32; a bool is its word, 0
/// or 1), and `_T` in it names the i32 or u32 form of a helper. A `pub` row is a `Tensor` method of its name; a
/// `routed` row is the integer form of the float op of the same name (src/op/elementwise.rs), reached through
/// that op when its operands are integers.
macro_rules! for_each_logic_binary_op {
    ($callback:ident) => {
        $callback! {
            pub Equal equal bool "ordered(x, y) && x == y" "x == y" "x == y" "`self == other` elementwise, broadcasting; NaN equals nothing.";
            pub NotEqual not_equal bool "!(ordered(x, y) && x == y)" "x != y" "x != y" "`self != other` elementwise, broadcasting; NaN differs from everything, itself too.";
            pub Less less bool "ordered(x, y) && x < y" "x < y" "x < y" "`self < other` elementwise, broadcasting; false where either is NaN.";
            pub LessEqual less_equal bool "ordered(x, y) && x <= y" "x <= y" "x <= y" "`self <= other` elementwise, broadcasting; false where either is NaN.";
            pub Greater greater bool "ordered(x, y) && x > y" "x > y" "x > y" "`self > other` elementwise, broadcasting; false where either is NaN.";
            pub GreaterEqual greater_equal bool "ordered(x, y) && x >= y" "x >= y" "x >= y" "`self >= other` elementwise, broadcasting; false where either is NaN.";
            pub LogicalAnd logical_and bool "" "" "(x & y) != 0u" "Logical and of two bool tensors, broadcasting.";
            pub LogicalOr logical_or bool "" "" "(x | y) != 0u" "Logical or of two bool tensors, broadcasting.";
            pub LogicalXor logical_xor bool "" "" "(x ^ y) != 0u" "Logical exclusive or of two bool tensors, broadcasting.";
            pub BitwiseAnd bitwise_and same "" "x & y" "x & y" "Bitwise and of two integer (or bool) tensors, broadcasting.";
            pub BitwiseOr bitwise_or same "" "x | y" "x | y" "Bitwise or of two integer (or bool) tensors, broadcasting.";
            pub BitwiseXor bitwise_xor same "" "x ^ y" "x ^ y" "Bitwise exclusive or of two integer (or bool) tensors, broadcasting.";
            pub BitwiseLeftShift bitwise_left_shift same "" "left_shift_T(x, y)" "" "`self << other` of integer tensors, broadcasting; a shift by the width or more (or a negative one) gives 0, as NumPy's.";
            pub BitwiseRightShift bitwise_right_shift same "" "right_shift_T(x, y)" "" "`self >> other` of integer tensors, broadcasting (arithmetic for int32); a shift by the width or more gives 0, or -1 for a negative int32, as NumPy's.";
            routed Add add same "" "x + y" "" "Integer `self + other`, wrapping on overflow as NumPy's int32 and uint32 do.";
            routed Sub sub same "" "x - y" "" "Integer `self - other`, wrapping on overflow.";
            routed Mul mul same "" "x * y" "" "Integer `self * other`, wrapping on overflow.";
            routed FloorDivide floor_divide same "" "floor_divide_T(x, y)" "" "Integer division rounded down; by zero gives 0 and int32's MIN // -1 wraps to MIN, as NumPy's.";
            routed Remainder remainder same "" "remainder_T(x, y)" "" "The remainder of floor division, with the divisor's sign; by zero gives 0, as NumPy's.";
            routed Maximum maximum same "" "max(x, y)" "" "The larger of two integers, elementwise.";
            routed Minimum minimum same "" "min(x, y)" "" "The smaller of two integers, elementwise.";
        }
    };
}

/// Every logic op of one operand, as `for_each_logic_binary_op!`'s rows of `x`.
macro_rules! for_each_logic_unary_op {
    ($callback:ident) => {
        $callback! {
            pub IsNan isnan bool "is_nan(x)" "false" "false" "Whether each element is NaN (never, for integers and bools).";
            pub IsInf isinf bool "is_inf(x)" "false" "false" "Whether each element is +inf or -inf (never, for integers and bools).";
            pub IsFinite isfinite bool "is_finite(x)" "true" "true" "Whether each element is neither NaN nor infinite (always, for integers and bools).";
            pub LogicalNot logical_not bool "" "" "x == 0u" "Logical not of a bool tensor.";
            pub BitwiseInvert bitwise_invert same "" "~x" "x ^ 1u" "Bitwise not of an integer tensor; of a bool one, logical not (as NumPy's `~`).";
            routed Negative neg same "" "0 - x" "" "Integer `-x`, wrapping (int32's MIN stays MIN; uint32 wraps modulo 2^32), as NumPy's.";
            routed Abs abs same "" "abs_T(x)" "" "Integer `|x|` (int32's MIN stays MIN, as NumPy's).";
        }
    };
}

pub(crate) use {for_each_logic_binary_op, for_each_logic_unary_op};

use crate::dtype::{DType, Kind};

/// An op's WGSL for each kind of dtype, where it takes that kind.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Forms {
    pub float: &'static str,
    pub integer: &'static str,
    pub bool: &'static str,
}

impl Forms {
    pub(crate) fn of(&self, kind: Kind) -> &'static str {
        match kind {
            Kind::Float => self.float,
            Kind::Integer => self.integer,
            Kind::Bool => self.bool,
        }
    }
}

macro_rules! logic_output {
    (bool) => {
        true
    };
    (same) => {
        false
    };
}

macro_rules! logic_routed {
    (pub) => {
        false
    };
    (routed) => {
        true
    };
}

macro_rules! logic_enum {
    ($enum:ident, $what:literal, $($vis:ident $variant:ident $method:ident $out:ident $float:literal $integer:literal $bool:literal $doc:literal;)*) => {
        #[doc = $what]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[non_exhaustive]
        pub enum $enum {
            $(#[doc = $doc] $variant,)*
        }

        impl $enum {
            /// Every op with whether it gives bool, whether it is routed, and its WGSL forms; the index is
            /// the op code.
            pub(crate) const ALL: &'static [($enum, bool, bool, Forms)] = &[$((
                $enum::$variant,
                logic_output!($out),
                logic_routed!($vis),
                Forms { float: $float, integer: $integer, bool: $bool },
            ),)*];

            /// The op's name: its `Tensor` method's, or for a routed op the float op's it serves.
            pub fn name(self) -> &'static str {
                match self {
                    $($enum::$variant => stringify!($method),)*
                }
            }

            pub fn description(self) -> &'static str {
                match self {
                    $($enum::$variant => $doc,)*
                }
            }

            pub fn all() -> impl Iterator<Item = $enum> {
                Self::ALL.iter().map(|row| row.0)
            }

            /// The op of that name.
            pub fn from_name(name: &str) -> Option<$enum> {
                Self::all().find(|op| op.name() == name)
            }

            fn row(self) -> &'static ($enum, bool, bool, Forms) {
                &Self::ALL[self as usize]
            }

            /// Whether it gives bool (a comparison or test) rather than its operands' dtype.
            pub fn gives_bool(self) -> bool {
                self.row().1
            }

            /// Whether it is the integer form of a float op of its name rather than a method of its own.
            pub fn is_routed(self) -> bool {
                self.row().2
            }

            /// Whether it takes operands of `dtype`.
            pub fn takes(self, dtype: DType) -> bool {
                !self.row().3.of(dtype.kind()).is_empty()
            }

            /// The dtype of its result for operands of `dtype`.
            pub fn output(self, dtype: DType) -> DType {
                if self.gives_bool() {
                    DType::Bool
                } else {
                    dtype
                }
            }

            /// The dtypes it takes, named, for an error message.
            pub fn taken(self) -> &'static str {
                let forms = self.row().3;
                match (!forms.float.is_empty(), !forms.integer.is_empty(), !forms.bool.is_empty()) {
                    (true, true, true) => "float32, int32, uint32 or bool",
                    (false, true, true) => "int32, uint32 or bool",
                    (false, true, false) => "int32 or uint32",
                    (false, false, true) => "bool",
                    (true, false, false) => "float32",
                    (true, true, false) => "float32, int32 or uint32",
                    (true, false, true) => "float32 or bool",
                    (false, false, false) => "no",
                }
            }
        }
    };
}

macro_rules! logic_binary_enum {
    ($($row:tt)*) => {
        logic_enum!(LogicBinaryOp, "Logic ops of two operands, broadcasting; the discriminant is the shader's op code.", $($row)*);
    };
}

macro_rules! logic_unary_enum {
    ($($row:tt)*) => {
        logic_enum!(LogicUnaryOp, "Logic ops of one operand; the discriminant is the shader's op code.", $($row)*);
    };
}

for_each_logic_binary_op!(logic_binary_enum);
for_each_logic_unary_op!(logic_unary_enum);

/// The reductions of truth values: the discriminant is the shader's op code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TruthReduction {
    /// Whether any element is nonzero (true); false over no elements.
    Any,
    /// Whether every element is nonzero; true over no elements.
    All,
    /// How many elements are nonzero, as int32.
    CountNonzero,
}

impl TruthReduction {
    pub fn name(self) -> &'static str {
        match self {
            TruthReduction::Any => "any",
            TruthReduction::All => "all",
            TruthReduction::CountNonzero => "count_nonzero",
        }
    }

    /// The dtype of its result.
    pub fn output(self) -> DType {
        match self {
            TruthReduction::CountNonzero => DType::I32,
            _ => DType::Bool,
        }
    }

    /// The result over no elements, the word every output element starts from.
    pub(crate) fn start(self) -> u32 {
        u32::from(self == TruthReduction::All)
    }
}
