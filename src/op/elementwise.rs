//! The elementwise ops, each declared once as a row: its name, its scalar argument, its WGSL expression and its
//! doc. The enums, their names and descriptions, the `Tensor` methods (which record themselves on a tape) and
//! the shader's op switches all follow from these rows.

/// Every elementwise op, declared once. Each row of `for_each_unary_op!` is
/// `visibility Variant method [argument] "WGSL of x (and a)" "doc"`, each of `for_each_binary_op!`
/// `Variant method "WGSL of x and y" "doc"`; the WGSL serves scalars and vec4s alike (`a` is a scalar, `zero` is
/// 0 of x's type). The op codes, the shader's switch, the public `Tensor` methods
/// (src/ops/elementwise.rs), which record themselves on a tape, all follow from these rows; a gradient
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
            pub Abs abs [] "abs(x)" "`|x|` elementwise.";
            pub Sign sign [] "nan_keeping_sign(x)" "-1, 0 or 1 as x is negative, zero or positive; NaN stays NaN.";
            pub Positive positive [] "x" "`+x` elementwise (a copy).";
            pub Floor floor [] "floor(x)" "The largest integer not above x, elementwise.";
            pub Ceil ceil [] "ceil(x)" "The smallest integer not below x, elementwise.";
            pub Round round [] "round(x)" "The nearest integer, elementwise; halves go to the even neighbour (2.5 to 2), as the Array API standard says.";
            pub Trunc trunc [] "trunc(x)" "x rounded toward 0 to an integer, elementwise.";
            pub Reciprocal reciprocal [] "1.0 / x" "`1 / x` elementwise.";
            pub Rsqrt rsqrt [] "1.0 / sqrt(x)" "`1 / sqrt(x)` elementwise.";
            pub Exp2 exp2 [] "exp2(x)" "`2^x` elementwise.";
            pub Expm1 expm1 [] "accurate_expm1(x)" "`e^x - 1` elementwise, accurate near 0.";
            pub Log2 log2 [] "log2(x)" "The base-2 logarithm, elementwise.";
            pub Log10 log10 [] "log2(x) * 0.30102999566398120" "The base-10 logarithm, elementwise.";
            pub Log1p log1p [] "accurate_log1p(x)" "`log(1 + x)` elementwise, accurate near 0.";
            pub Sin sin [] "accurate_sin(x)" "The sine (x in radians), elementwise; to f32 rounding for |x| < 8192.";
            pub Cos cos [] "accurate_cos(x)" "The cosine (x in radians), elementwise; to f32 rounding for |x| < 8192.";
            pub Tan tan [] "accurate_tan(x)" "The tangent (x in radians), elementwise; to f32 rounding for |x| < 8192.";
            pub Sinh sinh [] "accurate_sinh(x)" "The hyperbolic sine, elementwise, accurate near 0 and finite as far as f32 reaches.";
            pub Cosh cosh [] "wide_cosh(x)" "The hyperbolic cosine, elementwise, finite as far as f32 reaches.";
            pub Asin asin [] "accurate_asin(x)" "The inverse sine, in radians, elementwise; NaN outside [-1, 1].";
            pub Acos acos [] "accurate_acos(x)" "The inverse cosine, in radians, elementwise; NaN outside [-1, 1].";
            pub Atan atan [] "accurate_atan(x)" "The inverse tangent, in radians, elementwise.";
            pub Asinh asinh [] "accurate_asinh(x)" "The inverse hyperbolic sine, elementwise.";
            pub Acosh acosh [] "accurate_acosh(x)" "The inverse hyperbolic cosine, elementwise; NaN below 1.";
            pub Atanh atanh [] "accurate_atanh(x)" "The inverse hyperbolic tangent, elementwise; ±inf at ±1, NaN beyond.";
            pub Erf erf [] "accurate_erf(x)" "The error function, elementwise (relative error about 1e-7).";
            pub Gelu gelu [] "gelu_erf(x)" "GELU, `x Φ(x)` with Φ the normal distribution function (the exact, erf-based form), elementwise.";
            pub GeluTanh gelu_tanh [] "gelu_tanh_form(x)" "GELU's tanh approximation, `x (1 + tanh(√(2/π) (x + 0.044715 x³))) / 2`, elementwise.";
            pub Silu silu [] "silu_of(x)" "SiLU (swish), `x σ(x)`, elementwise.";
            pub Softplus softplus [] "stable_softplus(x)" "`log(1 + e^x)` elementwise, finite and accurate at any size.";
            pub PowScalar pow_scalar [a] "ieee_pow(x, splat(a))" "`x ** value` elementwise, as `pow`.";
            pub ScalarPow scalar_pow [a] "ieee_pow(splat(a), x)" "`value ** x` elementwise, as `pow`.";
            pub MaximumScalar maximum_scalar [a] "nan_keeping_maximum(x, splat(a))" "`maximum(x, value)` elementwise, as `maximum`.";
            pub MinimumScalar minimum_scalar [a] "nan_keeping_minimum(x, splat(a))" "`minimum(x, value)` elementwise, as `minimum`.";
            pub RemainderScalar remainder_scalar [a] "python_remainder(x, splat(a))" "`x % value` elementwise, as `remainder`.";
            pub ScalarRemainder scalar_remainder [a] "python_remainder(splat(a), x)" "`value % x` elementwise, as `remainder`.";
            pub FloorDivideScalar floor_divide_scalar [a] "floor_quotient(x, splat(a))" "`x // value` elementwise, as `floor_divide`.";
            pub ScalarFloorDivide scalar_floor_divide [a] "floor_quotient(splat(a), x)" "`value // x` elementwise, as `floor_divide`.";
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
            Pow pow "ieee_pow(x, y)" "`self ** other` elementwise, broadcasting, with C99's special cases (a negative base takes integral exponents; `pow(x, 0)` is 1).";
            Maximum maximum "nan_keeping_maximum(x, y)" "The larger of the two, elementwise, broadcasting; NaN if either is NaN (NumPy's `maximum`).";
            Minimum minimum "nan_keeping_minimum(x, y)" "The smaller of the two, elementwise, broadcasting; NaN if either is NaN (NumPy's `minimum`).";
            Atan2 atan2 "full_atan2(x, y)" "The angle of the point (other, self): `atan(self / other)` in the right quadrant, in radians, broadcasting.";
            Hypot hypot "safe_hypot(x, y)" "`sqrt(self² + other²)` without overflow or underflow in the squares, broadcasting.";
            Copysign copysign "copy_sign(x, y)" "`|self|` with the sign of `other`, elementwise, broadcasting.";
            Remainder remainder "python_remainder(x, y)" "`self % other` as NumPy's: the sign of the divisor, broadcasting; exact for every finite pair, however large the quotient.";
            FloorDivide floor_divide "floor_quotient(x, y)" "`floor(self / other)`, broadcasting, consistent with `remainder` (exact while the quotient is below 2^24).";
            Logaddexp logaddexp "stable_logaddexp(x, y)" "`log(e^self + e^other)` elementwise, broadcasting, without overflow.";
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

            /// Whether the op is the library's own, with no `Tensor` method of its name (a command line
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
