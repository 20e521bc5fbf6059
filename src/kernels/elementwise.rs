//! Elementwise kernels (shaders/elementwise.wgsl): binary arithmetic with broadcasting, unary maths and scalar
//! forms, relu's gradient, fill and in-place scale-and-add, over buffer ranges. Operands the size of the output are bound in
//! windows, so every one of these works on tensors larger than one storage binding.

use bytemuck::{Pod, Zeroable};

use super::plan::Limits;
use super::{dispatch_vec4_windows, vec4s_per_invocation, SCALAR, VEC4, VEC4X4};
use crate::error::Result;
use crate::runtime::{size_bucket, BufferRange, Kernel, Runtime, Shader};
use crate::shape::{broadcast_strides, padded_dims, MAX_RANK};

static ELEMENTWISE: Shader = Shader {
    proven_bounds: false,
    name: "elementwise",
    source: include_str!("../../shaders/elementwise.wgsl"),
    generated,
};

/// Where `Params` holds the op code, which the op kernels are specialised on.
const OP_OFFSET: usize = std::mem::offset_of!(Params, op);

static BINARY: Kernel =
    Kernel::new(&ELEMENTWISE, "binary", &[1, 2, 3]).specialised("OP", OP_OFFSET);
static UNARY: Kernel = Kernel::new(&ELEMENTWISE, "unary", &[1, 3]).specialised("OP", OP_OFFSET);
static RELU_BACKWARD: Kernel = Kernel::new(&ELEMENTWISE, "relu_backward", &[1, 2, 3]);
static FILL: Kernel = Kernel::new(&ELEMENTWISE, "fill", &[3]);
static SCALE_ADD: Kernel = Kernel::new(&ELEMENTWISE, "scale_add", &[3]);
static BINARY_ROWS: Kernel =
    Kernel::new(&ELEMENTWISE, "binary_rows", &[1, 2, 3]).specialised("OP", OP_OFFSET);
static BIAS_ACTIVATION: Kernel =
    Kernel::new(&ELEMENTWISE, "bias_activation", &[1, 2, 3]).specialised("OP", OP_OFFSET);
static BIAS_ACTIVATION_VEC4: Kernel =
    Kernel::new(&ELEMENTWISE, "bias_activation_vec4", &[1, 2, 3]).specialised("OP", OP_OFFSET);
static BINARY_ROWS_VEC4: Kernel =
    Kernel::new(&ELEMENTWISE, "binary_rows_vec4", &[1, 2, 3]).specialised("OP", OP_OFFSET);
static BINARY_VEC4: Kernel =
    Kernel::new(&ELEMENTWISE, "binary_vec4", &[1, 2, 3]).specialised("OP", OP_OFFSET);
static UNARY_VEC4: Kernel =
    Kernel::new(&ELEMENTWISE, "unary_vec4", &[1, 3]).specialised("OP", OP_OFFSET);
static RELU_BACKWARD_VEC4: Kernel = Kernel::new(&ELEMENTWISE, "relu_backward_vec4", &[1, 2, 3]);
static FILL_VEC4: Kernel = Kernel::new(&ELEMENTWISE, "fill_vec4", &[3]);
static SCALE_ADD_VEC4: Kernel = Kernel::new(&ELEMENTWISE, "scale_add_vec4", &[3]);

/// The family's name in tuning records, the cache and `SessionOptions::force_variant`: how many elements one
/// invocation takes, and whether as vec4s. Every variant computes each element the same way, so they all give
/// the same bits.
pub(crate) const FAMILY: &str = "elementwise";
pub(crate) const VARIANTS: &[&str] = &[SCALAR, VEC4, VEC4X4];

/// A kernel in its scalar form (one element per invocation, from `start`) and its vec4 form.
struct Forms {
    name: &'static str,
    scalar: &'static Kernel,
    vec4: &'static Kernel,
    /// Reads what it writes, so it must run once: never timed.
    in_place: bool,
}

const _: () = assert!(MAX_RANK == 8, "Params spells MAX_RANK out as 8");

#[repr(C)]
#[derive(Clone, Copy, Default, Pod, Zeroable)]
struct Params {
    count: u32,
    base: u32,
    op: u32,
    windowed: u32,
    a: f32,
    b: f32,
    start: u32,
    vec4s: u32,
    // MAX_RANK axes, written out: an array length from a constant in a Pod struct trips rustc 1.95 (an ICE)
    dims: [u32; 8],
    lhs_strides: [u32; 8],
    rhs_strides: [u32; 8],
}

/// Whether two of a dispatch's bindings share bytes: then what it writes is what another binding reads.
fn writes_what_it_reads(ranges: &[(BufferRange, bool)]) -> bool {
    ranges
        .iter()
        .enumerate()
        .any(|(index, (a, _))| ranges[index + 1..].iter().any(|(b, _)| a.overlaps(b)))
}

fn groups(runtime: &Runtime, count: u64) -> [u32; 3] {
    Limits::of(runtime.limits()).per_element(count, 1)
}

/// Runs a kernel whose bindings are all windows over the same elements, in the variant the tuner picks.
fn over_windows(
    runtime: &mut Runtime,
    forms: Forms,
    ranges: &[BufferRange],
    elements: u64,
    params: Params,
) -> Result<()> {
    let windowed: Vec<(BufferRange, bool)> = ranges.iter().map(|&range| (range, true)).collect();
    over_windows_with(runtime, forms, &windowed, elements, params)
}

/// As `over_windows`, with some ranges bound whole (those paired with false) rather than windowed.
fn over_windows_with(
    runtime: &mut Runtime,
    forms: Forms,
    ranges: &[(BufferRange, bool)],
    elements: u64,
    params: Params,
) -> Result<()> {
    let record = |runtime: &mut Runtime, variant: &str| {
        let vec4s = vec4s_per_invocation(variant);
        dispatch_vec4_windows(
            runtime,
            (forms.vec4, forms.scalar),
            ranges,
            elements,
            vec4s,
            |first, count| Params {
                count: count as u32,
                base: first as u32,
                vec4s,
                ..params
            },
            // The scalar form's block as the op gave it, with no vec4 count (it reads none).
            |body, start| Params {
                start,
                vec4s: params.vec4s,
                ..body
            },
        )
    };
    // The shape class is formatted only where it is looked up (every op pays for it).
    let class_of = |name: &str| format!("{name} n<={}", size_bucket(elements as usize));
    let variant = if forms.in_place {
        // Timing runs would apply the update again and again: take the pick of a unary op of this size.
        runtime.peek_variant(FAMILY, &class_of(UNARY_FORMS.name), VARIANTS)
    } else if writes_what_it_reads(ranges) {
        // An output over one of its inputs (a bias added to a product in place, say): as above, it must run
        // once, so it is never timed.
        runtime.peek_variant(FAMILY, &class_of(forms.name), VARIANTS)
    } else {
        runtime.choose_variant(FAMILY, class_of(forms.name), VARIANTS, record)
    };
    record(runtime, variant)
}

const UNARY_FORMS: Forms = Forms {
    name: "unary",
    scalar: &UNARY,
    vec4: &UNARY_VEC4,
    in_place: false,
};

/// out = value
pub(crate) fn fill(
    runtime: &mut Runtime,
    range: BufferRange,
    elements: u64,
    value: f32,
) -> Result<()> {
    let params = Params {
        a: value,
        ..Params::default()
    };
    let forms = Forms {
        name: "fill",
        scalar: &FILL,
        vec4: &FILL_VEC4,
        in_place: false,
    };
    over_windows(runtime, forms, &[range], elements, params)
}

/// out = out * scale + shift
pub(crate) fn scale_add(
    runtime: &mut Runtime,
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
    let forms = Forms {
        name: "scale_add",
        scalar: &SCALE_ADD,
        vec4: &SCALE_ADD_VEC4,
        in_place: true,
    };
    over_windows(runtime, forms, &[range], elements, params)
}

/// Copies `elements` values between ranges: by the copy engine across buffers, by a kernel within one buffer
/// (WebGPU forbids a buffer copy onto its own buffer, and tensors share slabs).
pub(crate) fn copy(
    runtime: &mut Runtime,
    from: BufferRange,
    to: BufferRange,
    elements: u64,
) -> Result<()> {
    if from.slab != to.slab {
        return runtime.copy(from, to);
    }
    let params = Params {
        op: UnaryOp::Copy as u32,
        ..Params::default()
    };
    over_windows(runtime, UNARY_FORMS, &[from, to], elements, params)
}

use crate::op::elementwise::{BinaryOp, UnaryOp};

/// Helpers of shaders/elementwise.wgsl that table rows call and whose vec4 twins the shader writes out.
const VEC4_TWINS: [(&str, &str); 4] = [
    ("stable_tanh(", "stable_tanh4("),
    ("stable_sigmoid(", "stable_sigmoid4("),
    ("nan_keeping_relu(", "nan_keeping_relu4("),
    ("splat(", "splat4("),
];

/// Helpers of shaders/elementwise.wgsl that table rows call, written for one f32, with how many f32 operands
/// they take: their vec4 twins are generated, lane by lane, so both forms give the same bits.
const LANEWISE_HELPERS: [(&str, usize); 28] = [
    ("nan_keeping_sign", 1),
    ("accurate_sin", 1),
    ("accurate_cos", 1),
    ("accurate_tan", 1),
    ("accurate_expm1", 1),
    ("accurate_log1p", 1),
    ("accurate_sinh", 1),
    ("wide_cosh", 1),
    ("accurate_asinh", 1),
    ("accurate_acosh", 1),
    ("accurate_atanh", 1),
    ("accurate_atan", 1),
    ("accurate_asin", 1),
    ("accurate_acos", 1),
    ("accurate_erf", 1),
    ("gelu_erf", 1),
    ("gelu_tanh_form", 1),
    ("silu_of", 1),
    ("stable_softplus", 1),
    ("ieee_pow", 2),
    ("nan_keeping_maximum", 2),
    ("nan_keeping_minimum", 2),
    ("full_atan2", 2),
    ("safe_hypot", 2),
    ("copy_sign", 2),
    ("python_remainder", 2),
    ("floor_quotient", 2),
    ("stable_logaddexp", 2),
];

/// `name4`, the vec4 twin of the lane-wise helper `name` of `operands` f32 operands.
fn lanewise_twin(name: &str, operands: usize) -> String {
    let parameters: Vec<String> = (0..operands)
        .map(|operand| format!("p{operand}: vec4<f32>"))
        .collect();
    let lanes: Vec<String> = ["x", "y", "z", "w"]
        .iter()
        .map(|lane| {
            let arguments: Vec<String> = (0..operands)
                .map(|operand| format!("p{operand}.{lane}"))
                .collect();
            format!("{name}({})", arguments.join(", "))
        })
        .collect();
    format!(
        "fn {name}4({}) -> vec4<f32> {{\n    return vec4<f32>({});\n}}\n\n",
        parameters.join(", "),
        lanes.join(", ")
    )
}

/// The vec4 form of a row's expression: each helper call turned into its twin's.
fn vec4_form(cases: &str) -> String {
    let twins = VEC4_TWINS
        .iter()
        .map(|&(scalar, vector)| (scalar.to_string(), vector.to_string()));
    let lanewise = LANEWISE_HELPERS
        .iter()
        .map(|&(name, _)| (format!("{name}("), format!("{name}4(")));
    twins
        .chain(lanewise)
        .fold(cases.to_string(), |cases, (scalar, vector)| {
            cases.replace(&scalar, &vector)
        })
}

/// The shader's `unary_op` and `binary_op` functions and their vec4 forms, one case per table row; an unknown
/// code yields NaN.
fn generated() -> String {
    let cases = |rows: Vec<(u32, &str)>| -> String {
        rows.iter()
            .map(|(code, expression)| format!("        case {code}u: {{ return {expression}; }}\n"))
            .collect()
    };
    let unary = cases(
        UnaryOp::ALL
            .iter()
            .map(|&(op, wgsl)| (op as u32, wgsl))
            .collect(),
    );
    // WGSL has no overloading: a helper a row calls has a vec4 twin named with a 4, which the vec4 form calls.
    let unary4 = vec4_form(&unary);
    let binary = cases(
        BinaryOp::ALL
            .iter()
            .map(|&(op, wgsl)| (op as u32, wgsl))
            .collect(),
    );
    let binary4 = vec4_form(&binary);
    let twins: String = LANEWISE_HELPERS
        .iter()
        .map(|&(name, operands)| lanewise_twin(name, operands))
        .collect();
    super::strided_wgsl()
        + &format!(
        "{twins}fn unary_op(op: u32, x: f32, a: f32) -> f32 {{\n    let zero = 0.0;\n    switch op {{\n{unary}        default: {{ return nan(); }}\n    }}\n}}\n\n\
         fn binary_op(op: u32, x: f32, y: f32) -> f32 {{\n    switch op {{\n{binary}        default: {{ return nan(); }}\n    }}\n}}\n\n\
         fn unary_op4(op: u32, x: vec4<f32>, a: f32) -> vec4<f32> {{\n    let zero = vec4<f32>(0.0);\n    switch op {{\n{unary4}        default: {{ return vec4<f32>(nan()); }}\n    }}\n}}\n\n\
         fn binary_op4(op: u32, x: vec4<f32>, y: vec4<f32>) -> vec4<f32> {{\n    switch op {{\n{binary4}        default: {{ return vec4<f32>(nan()); }}\n    }}\n}}\n",
    )
}

/// An operand of a broadcasting op: its range and shape.
pub(crate) struct Operand<'a> {
    pub range: BufferRange,
    pub shape: &'a [usize],
}

/// out = lhs (op) rhs, broadcasting both to `out_shape`. Operands as large as the output are bound in windows
/// with it; a broadcast operand is bound whole.
/// The `rhs_strides` of a row kernel: only the first word counts, the row's length (the period of its index).
fn row_period(period: u64) -> [u32; MAX_RANK] {
    let mut strides = [0; MAX_RANK];
    strides[0] = period as u32;
    strides
}

pub(crate) fn binary(
    runtime: &mut Runtime,
    name: &'static str,
    op: BinaryOp,
    lhs: Operand,
    rhs: Operand,
    out: BufferRange,
    out_shape: &[usize],
) -> Result<()> {
    let elements: u64 = out_shape.iter().map(|&dim| dim as u64).product();
    let count = |shape: &[usize]| shape.iter().map(|&dim| dim as u64).product::<u64>();
    let left_windowed = count(lhs.shape) == elements;
    let right_windowed = count(rhs.shape) == elements;
    let params = Params {
        op: op as u32,
        windowed: u32::from(left_windowed) | (u32::from(right_windowed) << 1),
        dims: padded_dims(out_shape),
        lhs_strides: broadcast_strides(lhs.shape),
        rhs_strides: broadcast_strides(rhs.shape),
        ..Params::default()
    };
    if left_windowed && right_windowed {
        let forms = Forms {
            name: "binary",
            scalar: &BINARY,
            vec4: &BINARY_VEC4,
            in_place: false,
        };
        return over_windows(
            runtime,
            forms,
            &[lhs.range, rhs.range, out],
            elements,
            params,
        );
    }
    for (range, windowed) in [(lhs.range, left_windowed), (rhs.range, right_windowed)] {
        if !windowed {
            Limits::of(runtime.limits()).expect_bindable(name, range)?;
        }
    }
    // A row repeated along the leading axes (a bias over a batch) whose length is a multiple of 4: its index is
    // the output's modulo that length.
    let rhs_dims: Vec<usize> = rhs
        .shape
        .iter()
        .copied()
        .skip_while(|&dim| dim == 1)
        .collect();
    let period = count(&rhs_dims);
    if left_windowed && !rhs_dims.is_empty() && out_shape.ends_with(&rhs_dims) && period % 4 == 0 {
        let forms = Forms {
            name: "binary_rows",
            scalar: &BINARY_ROWS,
            vec4: &BINARY_ROWS_VEC4,
            in_place: false,
        };
        let params = Params {
            rhs_strides: row_period(period),
            ..params
        };
        return over_windows_with(
            runtime,
            forms,
            &[(lhs.range, true), (rhs.range, false), (out, true)],
            elements,
            params,
        );
    }
    for (first, count) in Limits::of(runtime.limits()).windows(elements) {
        let pick = |range: BufferRange, windowed: bool| {
            if windowed {
                range.elements(first, count)
            } else {
                range
            }
        };
        let ranges = [
            pick(lhs.range, left_windowed),
            pick(rhs.range, right_windowed),
            out.elements(first, count),
        ];
        let params = Params {
            count: count as u32,
            base: first as u32,
            ..params
        };
        let workgroups = groups(runtime, count);
        runtime.dispatch(&BINARY, bytemuck::bytes_of(&params), &ranges, workgroups)?;
    }
    Ok(())
}

/// out = op(input, scalar) over `elements` elements.
pub(crate) fn unary(
    runtime: &mut Runtime,
    op: UnaryOp,
    scalar: f32,
    input: BufferRange,
    out: BufferRange,
    elements: u64,
) -> Result<()> {
    let params = Params {
        op: op as u32,
        a: scalar,
        ..Params::default()
    };
    over_windows(runtime, UNARY_FORMS, &[input, out], elements, params)
}

/// out = activation(input + bias), `bias` a row of `period` elements repeated over `input`'s `elements`: a
/// layer's bias and activation in one pass, the bits of the add and then the unary op. Rows of a multiple of 4
/// take the variant the tuner picks; others the scalar kernel.
pub(crate) fn bias_activation(
    runtime: &mut Runtime,
    activation: UnaryOp,
    (input, bias): (BufferRange, BufferRange),
    period: u64,
    out: BufferRange,
    elements: u64,
) -> Result<()> {
    Limits::of(runtime.limits()).expect_bindable("bias_activation", bias)?;
    let forms = Forms {
        name: "bias_activation",
        scalar: &BIAS_ACTIVATION,
        vec4: &BIAS_ACTIVATION_VEC4,
        in_place: false,
    };
    let params = Params {
        op: activation as u32,
        rhs_strides: row_period(period),
        ..Params::default()
    };
    if !period.is_multiple_of(4) {
        for (first, count) in Limits::of(runtime.limits()).windows(elements) {
            let params = Params {
                count: count as u32,
                base: first as u32,
                ..params
            };
            let ranges = [
                input.elements(first, count),
                bias,
                out.elements(first, count),
            ];
            let workgroups = groups(runtime, count);
            runtime.dispatch(
                &BIAS_ACTIVATION,
                bytemuck::bytes_of(&params),
                &ranges,
                workgroups,
            )?;
        }
        return Ok(());
    }
    over_windows_with(
        runtime,
        forms,
        &[(input, true), (bias, false), (out, true)],
        elements,
        params,
    )
}

/// out = gradient where input > 0, else 0.
pub(crate) fn relu_backward(
    runtime: &mut Runtime,
    input: BufferRange,
    gradient: BufferRange,
    out: BufferRange,
    elements: u64,
) -> Result<()> {
    let forms = Forms {
        name: "relu_backward",
        scalar: &RELU_BACKWARD,
        vec4: &RELU_BACKWARD_VEC4,
        in_place: false,
    };
    over_windows(
        runtime,
        forms,
        &[input, gradient, out],
        elements,
        Params::default(),
    )
}

reflected_layout!(
    kernels: [
        BINARY, UNARY, RELU_BACKWARD, FILL, SCALE_ADD, BINARY_ROWS, BINARY_ROWS_VEC4, BIAS_ACTIVATION, BIAS_ACTIVATION_VEC4, BINARY_VEC4, UNARY_VEC4, RELU_BACKWARD_VEC4,
        FILL_VEC4, SCALE_ADD_VEC4
    ],
    params: {
        count, base, op, windowed, a, b, start, vec4s, dims, lhs_strides, rhs_strides
    }
);
