//! The elementwise ops, each declared once as a row: its name, its scalar argument, its WGSL expression and its
//! doc. The enums, their names and descriptions, the `Tensor` and `Tape` methods and the shader's op switches
//! all follow from these rows.

/// Every elementwise op, declared once. Each row of `for_each_unary_op!` is
/// `visibility Variant method [argument] "WGSL of x (and a)" "doc"`, each of `for_each_binary_op!`
/// `Variant method "WGSL of x and y" "doc"`; the WGSL serves scalars and vec4s alike (`a` is a scalar, `zero` is
/// 0 of x's type). The op codes, the shader's switch, the public `Tensor` methods
/// (src/ops/elementwise.rs) and the `Tape` methods (src/autograd/tape.rs) all follow from these rows; a gradient
/// arm in `unary_gradient` or `binary_gradients` (src/autograd/rules.rs) and a reference in
/// tests/all/common/reference.rs complete a new op.
macro_rules! for_each_unary_op {
    ($callback:ident) => {
        $callback! {
            pub Relu relu [] "nan_keeping_relu(x)" "`max(x, 0)` elementwise; NaN stays NaN, as in NumPy's `maximum`.";
            pub Exp exp [] "exp(x)" "`e^x` elementwise.";
            pub Log log [] "log(x)" "The natural logarithm, elementwise.";
            pub Sqrt sqrt [] "sqrt(x)" "The square root, elementwise.";
            pub Neg neg [] "-x" "`-x` elementwise.";
            pub Tanh tanh [] "stable_tanh(x)" "The hyperbolic tangent, elementwise, accurate near 0 and finite at any size.";
            pub Sigmoid sigmoid [] "stable_sigmoid(x)" "The logistic function `1 / (1 + e^-x)`, elementwise, finite at any size.";
            pub Square square [] "x * x" "`x²` elementwise.";
            pub AddScalar add_scalar [a] "x + a" "`x + value` elementwise.";
            pub SubScalar sub_scalar [a] "x - a" "`x - value` elementwise.";
            pub MulScalar mul_scalar [a] "x * a" "`x * value` elementwise.";
            pub DivScalar div_scalar [a] "x / a" "`x / value` elementwise.";
            pub ScalarSub scalar_sub [a] "a - x" "`value - x` elementwise.";
            pub ScalarDiv scalar_div [a] "a / x" "`value / x` elementwise.";
            internal Copy copy [] "x" "A copy within one buffer.";
        }
    };
}

macro_rules! for_each_binary_op {
    ($callback:ident) => {
        $callback! {
            Add add "x + y" "`self + other`, broadcasting as NumPy does (a bias row over a batch, say).";
            Sub sub "x - y" "`self - other`, broadcasting.";
            Mul mul "x * y" "`self * other` elementwise, broadcasting.";
            Div div "x / y" "`self / other` elementwise, broadcasting.";
        }
    };
}

pub(crate) use {for_each_binary_op, for_each_unary_op};

macro_rules! unary_takes_scalar {
    ([]) => {
        false
    };
    ([$arg:ident]) => {
        true
    };
}

macro_rules! unary_is_internal {
    (pub) => {
        false
    };
    (internal) => {
        true
    };
}

/// What both op tables give their enum: each op's name (its method's) and description (its row's doc).
macro_rules! op_names {
    ($op:ident: $($variant:ident $method:ident $doc:literal;)*) => {
        /// The name of the op, as its method is called.
        pub fn name(self) -> &'static str {
            match self {
                $($op::$variant => stringify!($method),)*
            }
        }

        /// The op whose [`name`](Self::name) this is.
        pub fn from_name(name: &str) -> Option<$op> {
            Self::all().find(|op| op.name() == name)
        }

        /// What the op computes: its row's doc, the method's.
        pub fn description(self) -> &'static str {
            match self {
                $($op::$variant => $doc,)*
            }
        }
    };
}

macro_rules! unary_enum {
    ($($vis:ident $variant:ident $method:ident [$($arg:ident)?] $wgsl:literal $doc:literal;)*) => {
        /// Unary elementwise ops; the discriminant is the shader's op code.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[non_exhaustive]
        pub enum UnaryOp {
            $(#[doc = $doc] $variant,)*
        }

        impl UnaryOp {
            /// Every op with its WGSL expression of `x` (and the scalar `a`).
            pub(crate) const ALL: &'static [(UnaryOp, &'static str)] = &[$((UnaryOp::$variant, $wgsl),)*];

            op_names!(UnaryOp: $($variant $method $doc;)*);

            /// Whether the op takes a scalar (`value` in its description); the others ignore the one given.
            pub fn takes_scalar(self) -> bool {
                match self {
                    $(UnaryOp::$variant => unary_takes_scalar!([$($arg)?]),)*
                }
            }

            /// Whether the op is the library's own, with no `Tensor` or `Tape` method of its name (a command line
            /// built from [`all`](Self::all) leaves it out).
            pub fn is_internal(self) -> bool {
                match self {
                    $(UnaryOp::$variant => unary_is_internal!($vis),)*
                }
            }

            /// Every unary op, in op-code order (tests sweep them all, so a new row is tested too).
            pub fn all() -> impl Iterator<Item = UnaryOp> {
                Self::ALL.iter().map(|&(op, _)| op)
            }
        }
    };
}

macro_rules! binary_enum {
    ($($variant:ident $method:ident $wgsl:literal $doc:literal;)*) => {
        /// Binary elementwise ops (with broadcasting); the discriminant is the shader's op code.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[non_exhaustive]
        pub enum BinaryOp {
            $(#[doc = $doc] $variant,)*
        }

        impl BinaryOp {
            /// Every op with its WGSL expression of `x` and `y`.
            pub(crate) const ALL: &'static [(BinaryOp, &'static str)] = &[$((BinaryOp::$variant, $wgsl),)*];

            op_names!(BinaryOp: $($variant $method $doc;)*);

            /// Every binary op, in op-code order.
            pub fn all() -> impl Iterator<Item = BinaryOp> {
                Self::ALL.iter().map(|&(op, _)| op)
            }
        }
    };
}

for_each_unary_op!(unary_enum);
for_each_binary_op!(binary_enum);
