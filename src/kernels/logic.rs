//! Logic kernels (shaders/logic.wgsl): comparisons, logical and bitwise ops and integer arithmetic with
//! broadcasting, the elementwise tests of floats, where, and the reductions all, any and count_nonzero, over
//! 4-byte words of any dtype. Operands the size of the output are bound in windows; a broadcast operand (and a
//! reduction's output) is bound whole.

use bytemuck::{Pod, Zeroable};

use super::plan::Limits;
use crate::dtype::{DType, Kind};
use crate::error::Result;
use crate::op::logic::{LogicBinaryOp, LogicUnaryOp, TruthReduction};
use crate::runtime::{BufferRange, Kernel, Runtime, Shader};
use crate::shape::MAX_RANK;

static LOGIC: Shader = Shader {
    proven_bounds: false,
    name: "logic",
    source: include_str!("../../shaders/logic.wgsl"),
    generated,
};

/// Where `Params` holds the op code, which `binary` and `unary` are specialised on.
const OP_OFFSET: usize = std::mem::offset_of!(Params, op);

static BINARY: Kernel = Kernel::new(&LOGIC, "binary", &[1, 2, 4]).specialised("OP", OP_OFFSET);
static UNARY: Kernel = Kernel::new(&LOGIC, "unary", &[1, 4]).specialised("OP", OP_OFFSET);
static WHERE_SELECT: Kernel = Kernel::new(&LOGIC, "where_select", &[1, 2, 3, 4]);
static FILL_WORDS: Kernel = Kernel::new(&LOGIC, "fill_words", &[4]);
static REDUCE_TRUTH: Kernel = Kernel::new(&LOGIC, "reduce_truth", &[1, 4]);

/// The shader's rank: every shape is padded at the front to it.
const RANK: usize = 8;
const _: () = assert!(MAX_RANK <= RANK, "logic.wgsl holds shapes up to rank 8");

#[repr(C)]
#[derive(Clone, Copy, Default, Pod, Zeroable)]
struct Params {
    count: u32,
    base: u32,
    op: u32,
    dtype: u32,
    windowed: u32,
    pad: [u32; 3],
    dims: [u32; RANK],
    strides: [[u32; RANK]; 3],
}

/// The shader's code for a dtype.
fn dtype_code(dtype: DType) -> u32 {
    match dtype {
        DType::F32 => 0,
        DType::I32 => 1,
        DType::U32 => 2,
        DType::Bool => 3,
    }
}

/// `values` padded at the front with `fill` to the shader's rank.
fn padded(values: &[usize], fill: u32) -> [u32; RANK] {
    let mut out = [fill; RANK];
    for (slot, &value) in out[RANK - values.len()..].iter_mut().zip(values) {
        *slot = value as u32;
    }
    out
}

/// Element strides of an operand of `shape` read over `out_shape` (to which it broadcasts): 0 along an axis
/// it is broadcast over, and along the axes it lacks.
fn broadcast_strides(shape: &[usize], out_shape: &[usize]) -> [u32; RANK] {
    let mut strides = vec![0usize; out_shape.len()];
    let mut step = 1;
    for (axis, &dim) in shape.iter().enumerate().rev() {
        let out_axis = out_shape.len() - shape.len() + axis;
        strides[out_axis] = if dim == 1 { 0 } else { step };
        step *= dim;
    }
    padded(&strides, 0)
}

/// A broadcasting operand: its range and shape.
pub(crate) struct Operand<'a> {
    pub range: BufferRange,
    pub shape: &'a [usize],
}

fn count(shape: &[usize]) -> u64 {
    shape.iter().map(|&dim| dim as u64).product()
}

/// Runs `kernel` over the output's elements in windows; each operand as large as the output is a window with
/// it, the others are bound whole (and must fit one binding).
fn broadcasting(
    runtime: &mut Runtime,
    name: &'static str,
    kernel: &'static Kernel,
    (op, dtype): (u32, DType),
    operands: &[Operand],
    out: BufferRange,
    out_shape: &[usize],
) -> Result<()> {
    let elements = count(out_shape);
    let limits = Limits::of(runtime.limits());
    let mut params = Params {
        op,
        dtype: dtype_code(dtype),
        dims: padded(out_shape, 1),
        ..Params::default()
    };
    for (index, operand) in operands.iter().enumerate() {
        if count(operand.shape) == elements {
            params.windowed |= 1 << index;
        } else {
            limits.expect_bindable(name, operand.range)?;
        }
        params.strides[index] = broadcast_strides(operand.shape, out_shape);
    }
    for (first, window) in limits.windows(elements) {
        let mut ranges: Vec<BufferRange> = operands
            .iter()
            .enumerate()
            .map(|(index, operand)| {
                if params.windowed & (1 << index) != 0 {
                    operand.range.elements(first, window)
                } else {
                    operand.range
                }
            })
            .collect();
        ranges.push(out.elements(first, window));
        let params = Params {
            count: window as u32,
            base: first as u32,
            ..params
        };
        let workgroups = limits.per_element(window, 1);
        runtime.dispatch(kernel, bytemuck::bytes_of(&params), &ranges, workgroups)?;
    }
    Ok(())
}

/// out = lhs (op) rhs, both of `dtype`, broadcast to `out_shape`.
pub(crate) fn binary(
    runtime: &mut Runtime,
    op: LogicBinaryOp,
    dtype: DType,
    (lhs, rhs): (Operand, Operand),
    out: BufferRange,
    out_shape: &[usize],
) -> Result<()> {
    let code = (op as u32, dtype);
    broadcasting(
        runtime,
        op.name(),
        &BINARY,
        code,
        &[lhs, rhs],
        out,
        out_shape,
    )
}

/// out = op(input) over `elements` elements of `dtype`.
pub(crate) fn unary(
    runtime: &mut Runtime,
    op: LogicUnaryOp,
    dtype: DType,
    input: BufferRange,
    out: BufferRange,
    elements: u64,
) -> Result<()> {
    let shape = [elements as usize];
    let operand = Operand {
        range: input,
        shape: &shape,
    };
    let code = (op as u32, dtype);
    broadcasting(runtime, op.name(), &UNARY, code, &[operand], out, &shape)
}

/// out = x1 where condition, else x2, the three broadcast to `out_shape`.
pub(crate) fn where_select(
    runtime: &mut Runtime,
    (condition, x1, x2): (Operand, Operand, Operand),
    out: BufferRange,
    out_shape: &[usize],
) -> Result<()> {
    let operands = [condition, x1, x2];
    let code = (0, DType::Bool);
    broadcasting(
        runtime,
        "where",
        &WHERE_SELECT,
        code,
        &operands,
        out,
        out_shape,
    )
}

/// `reduction` of `input` (of `dtype` and `shape`) over the axes flagged in `reduced`, into `out` (the kept
/// axes' elements, in order). The output starts at the reduction's value over nothing; then each input element
/// that changes it writes to its output element.
pub(crate) fn reduce_truth(
    runtime: &mut Runtime,
    reduction: TruthReduction,
    dtype: DType,
    (input, shape): (BufferRange, &[usize]),
    reduced: &[bool],
    out: BufferRange,
) -> Result<()> {
    let limits = Limits::of(runtime.limits());
    limits.expect_bindable(reduction.name(), out)?;
    let out_elements = out.bytes / 4;
    let fill = Params {
        count: out_elements as u32,
        op: reduction.start(),
        ..Params::default()
    };
    runtime.dispatch(
        &FILL_WORDS,
        bytemuck::bytes_of(&fill),
        &[out],
        limits.per_element(out_elements, 1),
    )?;
    // The output's strides over the input's axes: 0 along a reduced one.
    let mut strides = vec![0usize; shape.len()];
    let mut step = 1;
    for axis in (0..shape.len()).rev() {
        if !reduced[axis] {
            strides[axis] = step;
            step *= shape[axis];
        }
    }
    let mut params = Params {
        op: reduction as u32,
        dtype: dtype_code(dtype),
        dims: padded(shape, 1),
        ..Params::default()
    };
    params.strides[0] = padded(&strides, 0);
    for (first, window) in limits.windows(count(shape)) {
        let params = Params {
            count: window as u32,
            base: first as u32,
            ..params
        };
        runtime.dispatch(
            &REDUCE_TRUTH,
            bytemuck::bytes_of(&params),
            &[input.elements(first, window), out],
            limits.per_element(window, 1),
        )?;
    }
    Ok(())
}

/// The shader's op functions, one per kind of dtype, one case per table row that takes that kind; a row's
/// bool result becomes the word 0 or 1, a same-dtype result its bits.
fn generated() -> String {
    fn function(
        name: &str,
        parameters: &str,
        rows: impl Iterator<Item = (u32, bool, &'static str)>,
        suffix: &str,
    ) -> String {
        let mut text = format!("fn {name}(op: u32, {parameters}) -> u32 {{\n    switch op {{\n");
        for (code, gives_bool, expression) in rows {
            if expression.is_empty() {
                continue;
            }
            let expression = expression.replace("_T(", &format!("_{suffix}("));
            let word = if gives_bool {
                format!("select(0u, 1u, {expression})")
            } else {
                format!("bitcast<u32>({expression})")
            };
            text.push_str(&format!("        case {code}u: {{ return {word}; }}\n"));
        }
        text.push_str("        default: { return 0xffffffffu; }\n    }\n}\n\n");
        text
    }
    let kinds = [
        ("f32", "f32", Kind::Float),
        ("i32", "i32", Kind::Integer),
        ("u32", "u32", Kind::Integer),
        ("bool", "u32", Kind::Bool),
    ];
    let mut text = String::new();
    for (suffix, ty, kind) in kinds {
        text += &function(
            &format!("logic_binary_{suffix}"),
            &format!("x: {ty}, y: {ty}"),
            LogicBinaryOp::ALL
                .iter()
                .map(|(op, gives_bool, _, forms)| (*op as u32, *gives_bool, forms.of(kind))),
            suffix,
        );
        text += &function(
            &format!("logic_unary_{suffix}"),
            &format!("x: {ty}"),
            LogicUnaryOp::ALL
                .iter()
                .map(|(op, gives_bool, _, forms)| (*op as u32, *gives_bool, forms.of(kind))),
            suffix,
        );
    }
    text
}

reflected_layout!(
    kernels: [BINARY, UNARY, WHERE_SELECT, FILL_WORDS, REDUCE_TRUTH],
    params: { count, base, op, dtype, windowed, dims, strides }
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcast_strides_skip_broadcast_and_missing_axes() {
        assert_eq!(
            broadcast_strides(&[3, 1], &[2, 3, 4]),
            [0, 0, 0, 0, 0, 0, 1, 0]
        );
        assert_eq!(
            broadcast_strides(&[2, 3, 4], &[2, 3, 4]),
            [0, 0, 0, 0, 0, 12, 4, 1]
        );
        assert_eq!(broadcast_strides(&[], &[5]), [0; RANK]);
    }

    #[test]
    fn every_row_has_a_case_for_each_kind_it_takes() {
        let text = generated();
        for (op, _, _, forms) in LogicBinaryOp::ALL {
            let case = format!("case {}u:", *op as u32);
            let function = &text[text.find("fn logic_binary_u32").expect("u32 form")..];
            let function = &function[..function.find("\n}\n").expect("ends")];
            assert_eq!(
                function.contains(&case),
                !forms.integer.is_empty(),
                "{op:?}"
            );
        }
    }
}
