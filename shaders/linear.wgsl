// Linear-layer products with their neighbouring passes fused in (kernel family `linear`), one dispatch each
// where the separate ops take two:
//
// - `linear_forward` / `linear_forward_relu`: act(A·B + bias), the bias (and relu) applied in the store;
// - `linear_weight_gradient`: Aᵀ·B, and the column sums of B (a bias's gradient) summed while B is read;
// - `linear_input_gradient_relu`: A·Bᵀ, masked in the store to where the layer input below was positive (the
//   gradient through that layer's relu).
//
// Each adds its products over K in the order of the matmul family's kernels of the same layout (matmul_vec4,
// matmul_vec4_at, matmul_vec4_bt), so a fused product has the bits of the product and the elementwise op it
// replaces; a column sum adds its rows in order, which may differ in the last bits from a reduction's tree.
// The vec4 kernels take row-major operands with vec4 rows (sizes a multiple of 4 along them, as those kernels
// need); the `_strided` ones take any widths with matmul_strided's tile and loop. K is covered in one pass (the host falls back to the separate ops past K_PER_PASS: llvmpipe gives an
// invocation 65,535 loop iterations over all its loops). The unrolled tile bodies are generated in src/kernels/linear.rs and built with this file.

struct Params {
    m: u32,
    n: u32,
    k: u32,
    // how many 8-row blocks one workgroup of 64 covers (1, 2, 4 or 8); the rest of the 64 go along N
    wg_rows: u32,
    // the strided kernels: element strides between A's rows and columns, and B's
    a_row: u32,
    a_col: u32,
    b_row: u32,
    b_col: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read_write> a: array<f32>;
@group(0) @binding(1) var<storage, read_write> a4: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> b4: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> c: array<f32>;
@group(0) @binding(3) var<storage, read_write> c4: array<vec4<f32>>;
// The fourth operand: the bias (forward), the column sums written (weight gradient), or the layer input whose
// sign masks the result (input gradient).
@group(0) @binding(4) var<storage, read_write> extra: array<f32>;
@group(0) @binding(4) var<storage, read_write> extra4: array<vec4<f32>>;

// The 8-row block and the pair of vec4 columns of C that invocation `lid` of workgroup `wid` computes, as
// matmul_vec4 and matmul_vec4_at lay them out: (row0, col4), or row0 = m when it has none.
fn tile_origin(wid: vec3<u32>, lid: u32, m: u32, n4s: u32) -> vec2<u32> {
    let wg_cols = 64u / params.wg_rows;
    let row0 = ((wid.y * params.wg_rows) + lid / wg_cols) * 8u;
    let col4 = ((wid.x * wg_cols) + lid % wg_cols) * 2u;
    if (row0 >= m || col4 >= n4s) {
        return vec2<u32>(m, 0u);
    }
    return vec2<u32>(row0, col4);
}

// relu as the elementwise op computes it (nan_keeping_relu): NaN stays NaN, tested on the bits.
fn relu4(x: vec4<f32>) -> vec4<f32> {
    return select(max(x, vec4<f32>(0.0)), x, (bitcast<vec4<u32>>(x) & vec4<u32>(0x7fffffffu)) > vec4<u32>(0x7f800000u));
}

fn relu1(x: f32) -> f32 {
    return select(max(x, 0.0), x, (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u);
}

// The relu gradient's mask, as relu_backward applies it: `value` where the layer input is positive, else 0.
fn masked(value: f32, at: u32) -> f32 {
    return select(0.0, value, extra[at] > 0.0);
}
