//! Linear-layer products with their neighbouring passes fused in (shaders/linear.wgsl): the forward product
//! with its bias and relu in the store, the weight gradient with the bias gradient summed in the same pass,
//! and the input gradient with the relu mask of the layer below in its store. A layer's step takes a dispatch
//! for each where the separate ops take two.
//!
//! Two variants, which the tuner times against each other: `fused`, and `composed`, the separate kernels the
//! fused one replaces (the matmul family's product, then the elementwise op or the reduction). `fused` is the
//! default for products of up to 2^24 multiply-adds (a layer of a classifier), `composed` for larger ones. Both give the
//! same bits for the products and the elementwise ops (the fused kernels add over K in the matmul kernels'
//! order and apply the same op); a fused column sum adds its rows in order, the reduction in four interleaved
//! runs, so a bias gradient may differ in the last bits between them. Shapes the fused kernels do not take
//! (rows that are no multiple of 4, K past one pass, a grid past the adapter's) always take the composed one.

use bytemuck::{Pod, Zeroable};

use super::elementwise::{self, Operand};
use super::matmul::{self, Layout};
use super::plan::Limits;
use super::reduce;
use crate::error::Result;
use crate::op::elementwise::{BinaryOp, UnaryOp};
use crate::op::reduce::{ReduceOp, Reduction};
use crate::runtime::{size_bucket, BufferRange, Kernel, Runtime, Shader};
use crate::shape::Lanes;

static LINEAR: Shader = Shader {
    proven_bounds: false,
    name: "linear",
    source: include_str!("../../shaders/linear.wgsl"),
    generated,
};

static FORWARD: Kernel = Kernel::new(&LINEAR, "linear_forward", &[1, 2, 3, 4]);
static FORWARD_RELU: Kernel = Kernel::new(&LINEAR, "linear_forward_relu", &[1, 2, 3, 4]);
static WEIGHT_GRADIENT: Kernel = Kernel::new(&LINEAR, "linear_weight_gradient", &[1, 2, 3, 4]);
static INPUT_GRADIENT_RELU: Kernel =
    Kernel::new(&LINEAR, "linear_input_gradient_relu", &[1, 2, 3, 4]);
static FORWARD_STRIDED: Kernel = Kernel::new(&LINEAR, "linear_forward_strided", &[1, 2, 3, 4]);
static FORWARD_RELU_STRIDED: Kernel =
    Kernel::new(&LINEAR, "linear_forward_relu_strided", &[1, 2, 3, 4]);
static WEIGHT_GRADIENT_STRIDED: Kernel =
    Kernel::new(&LINEAR, "linear_weight_gradient_strided", &[1, 2, 3, 4]);
static INPUT_GRADIENT_RELU_STRIDED: Kernel =
    Kernel::new(&LINEAR, "linear_input_gradient_relu_strided", &[1, 2, 3, 4]);

/// The family's name in tuning records, the cache and `SessionOptions::force_variant`.
pub(crate) const FAMILY: &str = "linear";
const FUSED: &str = "fused";
const COMPOSED: &str = "composed";
/// Every variant, by name, the default first.
pub(crate) const VARIANTS: &[&str] = &[FUSED, COMPOSED];

/// The longest K the fused kernels cover in their one pass (the matmul family's pass).
const MAX_K: usize = 4096;
/// Rows of C per invocation of the forward and weight-gradient kernels; rows and columns per invocation of the
/// input-gradient kernel, and its invocations per workgroup along each.
const TILE_ROWS: usize = 8;
const BT_TILE: usize = 4;
const BT_INVOCATIONS: usize = 8;

#[repr(C)]
#[derive(Clone, Copy, Default, Pod, Zeroable)]
struct Params {
    m: u32,
    n: u32,
    k: u32,
    wg_rows: u32,
    /// The strided kernels: element strides between A's rows and columns, and B's.
    a_row: u32,
    a_col: u32,
    b_row: u32,
    b_col: u32,
}

/// The WGSL of the family's kernels, unrolled as the matmul family's hand-written kernels are.
fn generated() -> String {
    [
        forward_source("linear_forward", false),
        forward_source("linear_forward_relu", true),
        weight_gradient_source(),
        input_gradient_source(),
        strided_source("linear_forward_strided", Epilogue::Bias { relu: false }),
        strided_source("linear_forward_relu_strided", Epilogue::Bias { relu: true }),
        strided_source("linear_weight_gradient_strided", Epilogue::ColumnSums),
        strided_source("linear_input_gradient_relu_strided", Epilogue::ReluMask),
    ]
    .concat()
}

/// One line of a generated body.
fn line(body: &mut String, text: &str) {
    body.push_str("    ");
    body.push_str(text);
    body.push('\n');
}

/// The 16 accumulators of an 8-row, two-vec4 tile, acc{2i} and acc{2i+1} being row i's two vec4s.
fn accumulators(body: &mut String) {
    for j in 0..2 * TILE_ROWS {
        line(body, &format!("var acc{j} = vec4<f32>(0.0);"));
    }
}

/// C = act(A·B + bias): matmul_vec4's tile and loop (A [M, K] with K % 4 == 0, B [K, N] with N % 4 == 0), the
/// bias a vec4 row.
fn forward_source(entry: &str, relu: bool) -> String {
    let mut body = String::new();
    for i in 0..TILE_ROWS {
        line(
            &mut body,
            &format!("let r{i} = min(row0 + {i}u, m - 1u) * k4s;"),
        );
    }
    line(&mut body, "let col_b = min(col4 + 1u, n4s - 1u);");
    accumulators(&mut body);
    line(&mut body, "for (var k4 = 0u; k4 < k4s; k4 = k4 + 1u) {");
    for i in 0..TILE_ROWS {
        line(&mut body, &format!("    let av{i} = a4[r{i} + k4];"));
    }
    line(&mut body, "    var brow = k4 * 4u * n4s;");
    for (step, lane) in ["x", "y", "z", "w"].iter().enumerate() {
        if step > 0 {
            line(&mut body, "    brow = brow + n4s;");
        }
        line(
            &mut body,
            "    let b0_{lane} = b4[brow + col4];"
                .replace("{lane}", lane)
                .as_str(),
        );
        line(
            &mut body,
            "    let b1_{lane} = b4[brow + col_b];"
                .replace("{lane}", lane)
                .as_str(),
        );
        for i in 0..TILE_ROWS {
            line(
                &mut body,
                &format!(
                    "    acc{a} = acc{a} + av{i}.{lane} * b0_{lane}; acc{b} = acc{b} + av{i}.{lane} * b1_{lane};",
                    a = 2 * i,
                    b = 2 * i + 1
                ),
            );
        }
    }
    line(&mut body, "}");
    line(&mut body, "let bias0 = extra4[col4];");
    line(&mut body, "let bias1 = extra4[col_b];");
    let act = |value: String| {
        if relu {
            format!("relu4({value})")
        } else {
            value
        }
    };
    for i in 0..TILE_ROWS {
        line(&mut body, &format!("if (row0 + {i}u < m) {{"));
        line(
            &mut body,
            &format!("    let at = (row0 + {i}u) * n4s + col4;"),
        );
        line(
            &mut body,
            &format!("    c4[at] = {};", act(format!("acc{} + bias0", 2 * i))),
        );
        line(
            &mut body,
            &format!(
                "    if (col4 + 1u < n4s) {{ c4[at + 1u] = {}; }}",
                act(format!("acc{} + bias1", 2 * i + 1))
            ),
        );
        line(&mut body, "}");
    }
    format!(
        "
// C = {what}(A·B + bias), A [M, K] (K % 4 == 0), B [K, N] (N % 4 == 0), bias [N]: 8 rows x two vec4 columns of C
// per invocation, as matmul_vec4.
@compute @workgroup_size(64)
fn {entry}(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{
    let m = params.m;
    let k4s = params.k / 4u;
    let n4s = params.n / 4u;
    let origin = tile_origin(wid, lid, m, n4s);
    let row0 = origin.x;
    let col4 = origin.y;
    if (row0 >= m) {{
        return;
    }}
{body}}}
",
        what = if relu { "relu" } else { "" }
    )
}

/// dW = Aᵀ·B and, from the invocations of the first row block, the column sums of B: matmul_vec4_at's tile
/// and loop (A stored [K, M] with M % 4 == 0, B stored [K, N] with N % 4 == 0).
fn weight_gradient_source() -> String {
    let mut body = String::new();
    line(&mut body, "let row4_a = row0 / 4u;");
    line(&mut body, "let row4_b = min(row4_a + 1u, m4s - 1u);");
    line(&mut body, "let col_b = min(col4 + 1u, n4s - 1u);");
    accumulators(&mut body);
    line(&mut body, "var s0 = vec4<f32>(0.0);");
    line(&mut body, "var s1 = vec4<f32>(0.0);");
    line(&mut body, "for (var k = 0u; k < params.k; k = k + 1u) {");
    line(&mut body, "    let a_lo = a4[k * m4s + row4_a];");
    line(&mut body, "    let a_hi = a4[k * m4s + row4_b];");
    line(&mut body, "    let b0 = b4[k * n4s + col4];");
    line(&mut body, "    let b1 = b4[k * n4s + col_b];");
    // matmul_vec4_at's order: for each lane of A, the low 4 rows' and then the high 4 rows' products.
    for (lane_index, lane) in ["x", "y", "z", "w"].iter().enumerate() {
        for (half, row) in [("lo", lane_index), ("hi", lane_index + 4)] {
            line(
                &mut body,
                &format!(
                    "    acc{a} = acc{a} + a_{half}.{lane} * b0; acc{b} = acc{b} + a_{half}.{lane} * b1;",
                    a = 2 * row,
                    b = 2 * row + 1
                ),
            );
        }
    }
    line(&mut body, "    s0 = s0 + b0;");
    line(&mut body, "    s1 = s1 + b1;");
    line(&mut body, "}");
    for i in 0..TILE_ROWS {
        line(&mut body, &format!("if (row0 + {i}u < m) {{"));
        line(
            &mut body,
            &format!("    let at = (row0 + {i}u) * n4s + col4;"),
        );
        line(&mut body, &format!("    c4[at] = acc{};", 2 * i));
        line(
            &mut body,
            &format!(
                "    if (col4 + 1u < n4s) {{ c4[at + 1u] = acc{}; }}",
                2 * i + 1
            ),
        );
        line(&mut body, "}");
    }
    line(&mut body, "if (row0 == 0u) {");
    line(&mut body, "    extra4[col4] = s0;");
    line(
        &mut body,
        "    if (col4 + 1u < n4s) { extra4[col4 + 1u] = s1; }",
    );
    line(&mut body, "}");
    format!(
        "
// dW = Aᵀ·B with A stored [K, M] (M % 4 == 0) and B stored [K, N] (N % 4 == 0), and the column sums of B (the
// bias gradient, [N]) from the first row block's invocations, as they read B: 8 rows x two vec4 columns of C
// per invocation, as matmul_vec4_at.
@compute @workgroup_size(64)
fn linear_weight_gradient(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{
    let m = params.m;
    let m4s = params.m / 4u;
    let n4s = params.n / 4u;
    let origin = tile_origin(wid, lid, m, n4s);
    let row0 = origin.x;
    let col4 = origin.y;
    if (row0 >= m) {{
        return;
    }}
{body}}}
"
    )
}

/// dX = A·Bᵀ masked to where the layer input (the fourth operand, [M, N]) is positive: matmul_vec4_bt's tile
/// and loop (A [M, K] and B [N, K], K % 4 == 0), then relu_backward's select.
fn input_gradient_source() -> String {
    let tile = BT_TILE;
    let mut body = String::new();
    for i in 0..tile {
        line(
            &mut body,
            &format!("let a{i} = min(row0 + {i}u, m - 1u) * k4s;"),
        );
        line(
            &mut body,
            &format!("let b{i} = min(col0 + {i}u, n - 1u) * k4s;"),
        );
    }
    for i in 0..tile {
        for j in 0..tile {
            line(&mut body, &format!("var c{i}_{j} = vec4<f32>(0.0);"));
        }
    }
    line(&mut body, "for (var k4 = 0u; k4 < k4s; k4 = k4 + 1u) {");
    for i in 0..tile {
        line(&mut body, &format!("    let x{i} = a4[a{i} + k4];"));
        line(&mut body, &format!("    let y{i} = b4[b{i} + k4];"));
    }
    for i in 0..tile {
        for j in 0..tile {
            line(
                &mut body,
                &format!("    c{i}_{j} = c{i}_{j} + x{i} * y{j};"),
            );
        }
    }
    line(&mut body, "}");
    for i in 0..tile {
        line(&mut body, &format!("if (row0 + {i}u < m) {{"));
        for j in 0..tile {
            line(
                &mut body,
                &format!(
                    "    if (col0 + {j}u < n) {{ let at = (row0 + {i}u) * n + col0 + {j}u; c[at] = \
                     masked((c{i}_{j}.x + c{i}_{j}.y) + (c{i}_{j}.z + c{i}_{j}.w), at); }}"
                ),
            );
        }
        line(&mut body, "}");
    }
    format!(
        "
// dX = A·Bᵀ, A stored [M, K] and B stored [N, K] (K % 4 == 0), where the layer input [M, N] is positive, else 0:
// {tile}x{tile} of C per invocation, {inv}x{inv} invocations per workgroup, as matmul_vec4_bt.
@compute @workgroup_size(64)
fn linear_input_gradient_relu(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{
    let m = params.m;
    let n = params.n;
    let k4s = params.k / 4u;
    let row0 = (wid.y * {inv}u + lid / {inv}u) * {tile}u;
    let col0 = (wid.x * {inv}u + lid % {inv}u) * {tile}u;
    if (row0 >= m || col0 >= n) {{
        return;
    }}
{body}}}
",
        inv = BT_INVOCATIONS
    )
}

/// What a strided kernel does besides its product.
#[derive(Clone, Copy)]
enum Epilogue {
    /// Adds the bias row (binding 4) to each row, then the relu if asked.
    Bias { relu: bool },
    /// Writes the column sums of B (binding 4) from the first row block's invocations.
    ColumnSums,
    /// Keeps each result where the layer input (binding 4, [M, N]) is positive, else 0.
    ReluMask,
}

/// C = A·B over any strides, matmul_strided's tile and loop (4×4 of C per invocation, 16×16 invocations per
/// workgroup, one pass over K), with `epilogue`: for the widths the vec4 kernels do not take (a last layer of
/// 10 classes, say).
fn strided_source(entry: &str, epilogue: Epilogue) -> String {
    let (sums, sum_step, sum_store) = match epilogue {
        Epilogue::ColumnSums => (
            "    var sums = vec4<f32>(0.0);\n",
            "        sums = sums + bv;\n",
            "    if (row0 == 0u) {
        for (var j = 0u; j < 4u; j = j + 1u) {
            if (col0 + j < n) {
                extra[col0 + j] = sums[j];
            }
        }
    }\n",
        ),
        _ => ("", "", ""),
    };
    let value = match epilogue {
        Epilogue::Bias { relu: false } => "acc[i][j] + extra[col0 + j]",
        Epilogue::Bias { relu: true } => "relu1(acc[i][j] + extra[col0 + j])",
        Epilogue::ColumnSums => "acc[i][j]",
        Epilogue::ReluMask => "masked(acc[i][j], row * n + col0 + j)",
    };
    format!(
        "
@compute @workgroup_size(16, 16)
fn {entry}(@builtin(global_invocation_id) id: vec3<u32>) {{
    let m = params.m;
    let n = params.n;
    let row0 = id.y * 4u;
    let col0 = id.x * 4u;
    if (row0 >= m || col0 >= n) {{
        return;
    }}
    var a_rows: array<u32, 4>;
    var b_cols: array<u32, 4>;
    for (var i = 0u; i < 4u; i = i + 1u) {{
        a_rows[i] = min(row0 + i, m - 1u) * params.a_row;
        b_cols[i] = min(col0 + i, n - 1u) * params.b_col;
    }}
    var acc: array<vec4<f32>, 4>;
{sums}    for (var kk = 0u; kk < params.k; kk = kk + 1u) {{
        let ak = kk * params.a_col;
        let bk = kk * params.b_row;
        let bv = vec4<f32>(b[b_cols[0] + bk], b[b_cols[1] + bk], b[b_cols[2] + bk], b[b_cols[3] + bk]);
        for (var i = 0u; i < 4u; i = i + 1u) {{
            acc[i] = acc[i] + a[a_rows[i] + ak] * bv;
        }}
{sum_step}    }}
    for (var i = 0u; i < 4u; i = i + 1u) {{
        let row = row0 + i;
        if (row < m) {{
            for (var j = 0u; j < 4u; j = j + 1u) {{
                if (col0 + j < n) {{
                    c[row * n + col0 + j] = {value};
                }}
            }}
        }}
    }}
{sum_store}}}
"
    )
}

/// Whether the fused kernels take these operands: vec4 rows, one pass over K, ranges that bind whole and a
/// grid within the adapter's workgroups per dimension.
fn fits(
    runtime: &Runtime,
    vec4_sizes: &[usize],
    k: usize,
    ranges: &[BufferRange],
    grid: [u32; 3],
) -> bool {
    let limits = Limits::of(runtime.limits());
    vec4_sizes.iter().all(|size| size.is_multiple_of(4))
        && (1..=MAX_K).contains(&k)
        && ranges
            .iter()
            .all(|range| range.bytes / 4 <= limits.max_binding_elements)
        && grid
            .iter()
            .all(|&groups| groups <= limits.max_workgroups_per_dimension)
}

/// Multiply-adds up to which the fused kernel is the default: a product this small costs about what a pass
/// does, so the pass it saves pays; past it the matmul family's own tiles (shared-memory tiles on a GPU, the
/// wide subgroup tiles for a few rows on llvmpipe) can outrun the fused kernel by more than a pass, and the
/// separate ops go first (the tuner still times both).
const FUSED_FIRST_MULTIPLY_ADDS: usize = 1 << 24;

/// The variant to record: the tuner's pick between the fused kernel and the composed ops where the fused one
/// fits, else the composed ones.
fn pick(
    runtime: &mut Runtime,
    fused: bool,
    (m, k, n): (usize, usize, usize),
    what: &str,
    record: impl FnMut(&mut Runtime, &'static str) -> Result<()>,
) -> &'static str {
    if !fused {
        return COMPOSED;
    }
    let candidates: &[&'static str] =
        if m.saturating_mul(k).saturating_mul(n) <= FUSED_FIRST_MULTIPLY_ADDS {
            &[FUSED, COMPOSED]
        } else {
            &[COMPOSED, FUSED]
        };
    runtime.choose_variant(FAMILY, bucket(what, (m, k, n)), candidates, record)
}

fn bucket(what: &str, (m, k, n): (usize, usize, usize)) -> String {
    format!(
        "{what} m<={} k<={} n<={}",
        size_bucket(m),
        size_bucket(k),
        size_bucket(n)
    )
}

/// The fused kernel for a product [m, k]·[k, n], its grid and its parameters: the vec4 one, laid out as
/// matmul's `vec4_variant`, where `vec4_sizes` are multiples of 4; else the strided one, laid out as
/// matmul_strided, with `strides` (A's rows and columns, B's); or none where neither fits.
fn fused_kernel(
    runtime: &Runtime,
    (vec4, strided): (&'static Kernel, &'static Kernel),
    (vec4_variant, vec4_sizes): (&str, &[usize]),
    (m, k, n): (usize, usize, usize),
    strides: [usize; 4],
    ranges: &[BufferRange],
) -> Option<(&'static Kernel, [u32; 3], Params)> {
    let (vec4_grid, wg_rows) = matmul::grid(vec4_variant, (m, n));
    let params = Params {
        m: m as u32,
        n: n as u32,
        k: k as u32,
        wg_rows,
        a_row: strides[0] as u32,
        a_col: strides[1] as u32,
        b_row: strides[2] as u32,
        b_col: strides[3] as u32,
    };
    if fits(runtime, vec4_sizes, k, ranges, vec4_grid) {
        return Some((vec4, vec4_grid, params));
    }
    let (grid, _) = matmul::grid(matmul::STRIDED, (m, n));
    fits(runtime, &[], k, ranges, grid).then_some((strided, grid, params))
}

/// Records one of a layer's passes, the product [m, k]·[k, n] with what follows it: the fused kernel (see
/// `fused_kernel`) over `ranges`, or the separate ops that `composed` records, as the tuner picks where the
/// fused one fits (see `pick`).
fn run(
    runtime: &mut Runtime,
    kernels: (&'static Kernel, &'static Kernel),
    vec4: (&str, &[usize]),
    (what, sizes): (&str, (usize, usize, usize)),
    (strides, ranges): ([usize; 4], [BufferRange; 4]),
    mut composed: impl FnMut(&mut Runtime) -> Result<()>,
) -> Result<()> {
    let fused = fused_kernel(runtime, kernels, vec4, sizes, strides, &ranges);
    let mut record = |runtime: &mut Runtime, variant: &str| match (variant, fused) {
        (FUSED, Some((kernel, grid, params))) => {
            runtime.dispatch(kernel, bytemuck::bytes_of(&params), &ranges, grid)
        }
        _ => composed(runtime),
    };
    let variant = pick(runtime, fused.is_some(), sizes, what, &mut record);
    record(runtime, variant)
}

/// out = act(x·w + bias) for x [m, k], w [k, n], bias [n]; act is relu or none.
pub(crate) fn forward(
    runtime: &mut Runtime,
    (x, w, bias): (BufferRange, BufferRange, BufferRange),
    out: BufferRange,
    (m, k, n): (usize, usize, usize),
    relu: bool,
) -> Result<()> {
    let kernels = if relu {
        (&FORWARD_RELU, &FORWARD_RELU_STRIDED)
    } else {
        (&FORWARD, &FORWARD_STRIDED)
    };
    let layouts = (
        Layout::of(m, k, false, false),
        Layout::of(k, n, false, false),
    );
    run(
        runtime,
        kernels,
        (matmul::VEC4_8X8, &[k, n]),
        ("forward", (m, k, n)),
        ([k, 1, n, 1], [x, w, out, bias]),
        |runtime| {
            matmul::matmul(runtime, (x, layouts.0), (w, layouts.1), out, 1, (m, k, n))?;
            if relu {
                let elements = (m * n) as u64;
                elementwise::bias_activation(
                    runtime,
                    UnaryOp::Relu,
                    (out, bias),
                    n as u64,
                    out,
                    elements,
                )
            } else {
                let shape = [m, n];
                let (rows, row) = (
                    Operand {
                        range: out,
                        shape: &shape,
                    },
                    Operand {
                        range: bias,
                        shape: &[n],
                    },
                );
                elementwise::binary(runtime, "add", BinaryOp::Add, rows, row, out, &shape)
            }
        },
    )
}

/// dw = xᵀ·dz and db = the column sums of dz, for x [rows, inputs] and dz [rows, outputs].
pub(crate) fn weight_gradient(
    runtime: &mut Runtime,
    (x, dz): (BufferRange, BufferRange),
    (dw, db): (BufferRange, BufferRange),
    (rows, inputs, outputs): (usize, usize, usize),
) -> Result<()> {
    let layouts = (
        Layout::of(rows, inputs, false, true),
        Layout::of(rows, outputs, false, false),
    );
    let sizes = (inputs, rows, outputs);
    run(
        runtime,
        (&WEIGHT_GRADIENT, &WEIGHT_GRADIENT_STRIDED),
        (matmul::VEC4_AT, &[inputs, outputs]),
        ("weight gradient", sizes),
        ([1, inputs, outputs, 1], [x, dz, dw, db]),
        |runtime| {
            matmul::matmul(runtime, (x, layouts.0), (dz, layouts.1), dw, 1, sizes)?;
            let lanes = Lanes {
                outer: 1,
                len: rows as u64,
                inner: outputs as u64,
            };
            reduce::reduce(
                runtime,
                "sum",
                Reduction::Value(ReduceOp::Sum),
                dz,
                lanes,
                1.0,
                db,
            )
        },
    )
}

/// dx = dz·wᵀ where `below` (the layer input, [rows, inputs]) is positive, else 0: the gradient through the
/// relu of the layer below, for dz [rows, outputs] and w [inputs, outputs].
pub(crate) fn input_gradient_relu(
    runtime: &mut Runtime,
    (dz, w, below): (BufferRange, BufferRange, BufferRange),
    dx: BufferRange,
    (rows, inputs, outputs): (usize, usize, usize),
) -> Result<()> {
    let layouts = (
        Layout::of(rows, outputs, false, false),
        Layout::of(inputs, outputs, false, true),
    );
    let sizes = (rows, outputs, inputs);
    run(
        runtime,
        (&INPUT_GRADIENT_RELU, &INPUT_GRADIENT_RELU_STRIDED),
        (matmul::VEC4_BT, &[outputs]),
        ("input gradient", sizes),
        ([outputs, 1, 1, outputs], [dz, w, dx, below]),
        |runtime| {
            matmul::matmul(runtime, (dz, layouts.0), (w, layouts.1), dx, 1, sizes)?;
            elementwise::relu_backward(runtime, below, dx, dx, (rows * inputs) as u64)
        },
    )
}

reflected_layout!(
    kernels: [
        FORWARD,
        FORWARD_RELU,
        WEIGHT_GRADIENT,
        INPUT_GRADIENT_RELU,
        FORWARD_STRIDED,
        FORWARD_RELU_STRIDED,
        WEIGHT_GRADIENT_STRIDED,
        INPUT_GRADIENT_RELU_STRIDED
    ],
    params: { m, n, k, wg_rows, a_row, a_col, b_row, b_col }
);
