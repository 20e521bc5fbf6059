//! The WGSL of the generated matmul kernels, written out from the tile shapes `plan` gives: register tiles,
//! the short-and-wide and subgroup tiles, the transposed ones and the shared-memory tiles, which `plan` appends
//! to shaders/matmul.wgsl as the two shader modules the kernels live in.

use super::tiles::{
    RegisterTile, SharedTile, Vec4SharedTile, BT_INVOCATIONS, BT_TILE, SUBGROUP_LANES,
    VEC4_TILE_DEPTH,
};

/// The entry point of a subgroup tile: as `tile_entry_point`, with the lane's index in its subgroup (`lane`)
/// and an early return for whole workgroups past M only.
fn subgroup_entry_point(
    entry: &str,
    invocations: u32,
    comment: &str,
    setup: &str,
    body: &str,
) -> String {
    format!(
        "
// {comment}
@compute @workgroup_size({invocations})
fn {entry}(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
    @builtin(subgroup_invocation_id) lane: u32,
) {{
    let m = params.m;
{setup}    if (row0 >= m) {{
        return;
    }}
    let batch = wid.z;
    let a_base = a_batch_base(batch) / 4u;
    let b_base = b_batch_base(batch) / 4u;
    let c_base = batch * (params.c_batch / 4u);
{body}}}
"
    )
}

/// The WGSL of the subgroup module's generated kernels: the short-and-wide tiles, then the Aᵀ·B ones.
pub(super) fn subgroup_tile_kernels(
    wide: &[RegisterTile],
    transposed_left: &[RegisterTile],
) -> String {
    wide.iter()
        .map(subgroup_wide_source)
        .chain(
            transposed_left
                .iter()
                .map(|tile| transposed_left_source(tile, true)),
        )
        .collect()
}

/// As `register_tile_source` for a shared-row tile, with A's rows loaded across the subgroup and broadcast. No
/// invocation returns early (a broadcast needs its source lane active, and runs in uniform control flow):
/// lanes past N compute clamped columns and store nothing.
fn subgroup_wide_source(tile: &RegisterTile) -> String {
    let (entry, rows, vec4s, invocations) =
        (tile.kernel.entry, tile.rows, tile.vec4s, tile.invocations);
    let loads = rows.div_ceil(SUBGROUP_LANES);
    let mut body = String::new();
    for g in 0..loads {
        push_line(
            &mut body,
            format!(
                "let r{g} = a_base + min(row0 + lane + {}u, m - 1u) * k4s;",
                g * SUBGROUP_LANES
            ),
        );
    }
    push_columns_and_accumulators(&mut body, rows, vec4s);
    let mut line = |text: String| push_line(&mut body, text);
    line("for (var k4 = k4_begin; k4 < k4_end; k4 = k4 + 1u) {".to_string());
    for g in 0..loads {
        line(format!("    let al{g} = a4[r{g} + k4];"));
    }
    for i in 0..rows {
        line(format!(
            "    let av{i} = subgroupBroadcast(al{}, {}u);",
            i / SUBGROUP_LANES,
            i % SUBGROUP_LANES
        ));
    }
    push_rank_one_updates(&mut body, rows, vec4s);
    push_tile_stores(&mut body, rows, vec4s);
    subgroup_entry_point(
        entry,
        invocations,
        &format!(
            "{rows} rows x {vec4s} vec4 columns of C per invocation, {invocations} invocations sharing their rows along
// N; A's rows loaded across the subgroup and broadcast."
        ),
        &format!(
            "    let k4s = params.k / 4u;
    let n4s = params.n / 4u;
    let k4_begin = params.k_begin / 4u;
    let k4_end = params.k_end / 4u;
    let row0 = (wid.y + params.group_row_offset) * {rows}u;
    let col4 = (wid.x * {invocations}u + lid) * {vec4s}u;
"
        ),
        &body,
    )
}

/// The WGSL of every generated register tile: written out in full (no arrays of accumulators), since llvmpipe
/// keeps named accumulators in registers but may spill an indexed array to memory.
pub(super) fn register_tile_kernels(
    register: &[RegisterTile],
    wide: &[RegisterTile],
    transposed_left: &[RegisterTile],
    shared: &[SharedTile],
    vec4_shared: &[Vec4SharedTile],
) -> String {
    register
        .iter()
        .chain(wide)
        .map(register_tile_source)
        .chain([transposed_right_source()])
        .chain(
            transposed_left
                .iter()
                .map(|tile| transposed_left_source(tile, false)),
        )
        .chain(shared.iter().map(shared_tile_source))
        .chain(vec4_shared.iter().map(vec4_shared_tile_source))
        .collect()
}

/// The WGSL of a [`Vec4SharedTile`].
fn vec4_shared_tile_source(tile: &Vec4SharedTile) -> String {
    let entry = tile.kernel.entry;
    let (bm, bn, bk) = (tile.block_rows, tile.block_cols, VEC4_TILE_DEPTH);
    let (tx, ty) = (tile.threads_x, tile.threads_y);
    let threads = tx * ty;
    // Groups of 4 rows and vec4 columns per invocation; vec4s of A's tile (along K) and of B's (along N) that
    // each invocation loads per step.
    let (row_groups, col_vec4s) = (bm / ty / 4, bn / tx / 4);
    let (a_loads, b_loads) = (bm * (bk / 4) / threads, bk * (bn / 4) / threads);
    let (bm4, bn4) = (bm / 4, bn / 4);
    let mut body = String::new();
    let mut line = |indent: usize, text: String| {
        body.push_str(&" ".repeat(4 * indent));
        body.push_str(&text);
        body.push('\n');
    };
    // The loads of one step into registers: A's row (clamped) and vec4 along K (0 past k_end), B's row along K
    // (0 past k_end) and vec4 column (clamped).
    let load = |line: &mut dyn FnMut(usize, String), indent: usize, k0: &str| {
        for l in 0..a_loads {
            line(indent, format!("let aq{l} = t + {}u;", l * threads));
            line(
                indent,
                format!("let ak{l} = {k0} + (aq{l} % {}u) * 4u;", bk / 4),
            );
            line(
                indent,
                format!(
                    "pa{l} = select(vec4<f32>(0.0), a4[a_base4 + min(row_base + aq{l} / {}u, m - 1u) * a_row4 \
                     + min(ak{l}, k_end - 4u) / 4u], ak{l} < k_end);",
                    bk / 4
                ),
            );
        }
        for l in 0..b_loads {
            line(indent, format!("let bq{l} = t + {}u;", l * threads));
            line(indent, format!("let bk{l} = {k0} + bq{l} / {bn4}u;"));
            line(
                indent,
                format!(
                    "pb{l} = select(vec4<f32>(0.0), b4[b_base4 + min(bk{l}, k_end - 1u) * b_row4 \
                     + min(col_base4 + bq{l} % {bn4}u, n4s - 1u)], bk{l} < k_end);"
                ),
            );
        }
    };
    for l in 0..a_loads {
        line(1, format!("var pa{l} = vec4<f32>(0.0);"));
    }
    for l in 0..b_loads {
        line(1, format!("var pb{l} = vec4<f32>(0.0);"));
    }
    for g in 0..row_groups {
        for r in 0..4 {
            for j in 0..col_vec4s {
                line(1, format!("var c{g}_{r}_{j} = vec4<f32>(0.0);"));
            }
        }
    }
    load(&mut line, 1, "k_begin");
    line(
        1,
        format!("for (var k0 = k_begin; k0 < k_end; k0 = k0 + {bk}u) {{"),
    );
    line(2, "workgroupBarrier();".to_string());
    // A's tile goes in transposed: component (row % 4) of vec4 (k, row / 4).
    for l in 0..a_loads {
        // Row (t + l·threads) / (bk / 4) of the tile, K from 4·((t + l·threads) % (bk / 4)).
        line(
            2,
            format!(
                "let at{l} = ((t + {q}u) % {kv}u) * {}u + (t + {q}u) / {kv}u / 4u;",
                4 * bm4,
                q = l * threads,
                kv = bk / 4
            ),
        );
        line(
            2,
            format!("let ac{l} = ((t + {}u) / {}u) % 4u;", l * threads, bk / 4),
        );
        for (c, component) in ["x", "y", "z", "w"].iter().enumerate() {
            line(
                2,
                format!(
                    "{entry}_a[at{l} + {}u][ac{l}] = pa{l}.{component};",
                    c as u32 * bm4
                ),
            );
        }
    }
    for l in 0..b_loads {
        line(2, format!("{entry}_b[t + {}u] = pb{l};", l * threads));
    }
    line(2, "workgroupBarrier();".to_string());
    line(2, format!("if (k0 + {bk}u < k_end) {{"));
    load(&mut line, 3, &format!("(k0 + {bk}u)"));
    line(2, "}".to_string());
    line(2, format!("for (var kk = 0u; kk < {bk}u; kk = kk + 1u) {{"));
    for g in 0..row_groups {
        line(
            3,
            format!("let av{g} = {entry}_a[kk * {bm4}u + lid.y + {}u];", g * ty),
        );
    }
    for j in 0..col_vec4s {
        line(
            3,
            format!("let bv{j} = {entry}_b[kk * {bn4}u + lid.x + {}u];", j * tx),
        );
    }
    for g in 0..row_groups {
        for (r, component) in ["x", "y", "z", "w"].iter().enumerate() {
            for j in 0..col_vec4s {
                line(
                    3,
                    format!("c{g}_{r}_{j} = c{g}_{r}_{j} + av{g}.{component} * bv{j};"),
                );
            }
        }
    }
    line(2, "}".to_string());
    line(1, "}".to_string());
    for g in 0..row_groups {
        for r in 0..4 {
            line(
                1,
                format!(
                    "let row{g}_{r} = row_base + (lid.y + {}u) * 4u + {r}u;",
                    g * ty
                ),
            );
            line(1, format!("if (row{g}_{r} < m) {{"));
            for j in 0..col_vec4s {
                line(
                    2,
                    format!(
                        "if (col_base4 + lid.x + {jt}u < n4s) {{ store4(c_base4 + row{g}_{r} * n4s + col_base4 + lid.x \
                         + {jt}u, c{g}_{r}_{j}, accumulate); }}",
                        jt = j * tx
                    ),
                );
            }
            line(1, "}".to_string());
        }
    }
    format!(
        "
// {bm}×{bn} of C per {tx}×{ty} workgroup, {rows}×{cols} per invocation, {bk} deep along K per step, operands
// read as vec4s, A staged transposed, the next step loaded into registers during this one.
var<workgroup> {entry}_a: array<vec4<f32>, {a_len}>;
var<workgroup> {entry}_b: array<vec4<f32>, {b_len}>;

@compute @workgroup_size({tx}, {ty})
fn {entry}(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {{
    let m = params.m;
    let n4s = params.n / 4u;
    let k_begin = params.k_begin;
    let k_end = params.k_end;
    let a_row4 = params.a_row / 4u;
    let b_row4 = params.b_row / 4u;
    let accumulate = params.accumulate == 1u;
    let a_base4 = a_batch_base(wid.z) / 4u;
    let b_base4 = b_batch_base(wid.z) / 4u;
    let c_base4 = wid.z * params.c_batch / 4u;
    let row_base = (wid.y + params.group_row_offset) * {bm}u;
    let col_base4 = wid.x * {bn4}u;
    let t = lid.y * {tx}u + lid.x;
{body}}}
",
        rows = bm / ty,
        cols = bn / tx,
        a_len = bk * bm4,
        b_len = bk * bn4,
    )
}

fn shared_tile_source(tile: &SharedTile) -> String {
    let entry = tile.kernel.entry;
    let (bm, bn, bk) = (tile.block_rows, tile.block_cols, tile.depth);
    let (tx, ty) = (tile.threads_x, tile.threads_y);
    let threads = tx * ty;
    let (rows, cols) = tile.per_invocation();
    let vec4s = cols / 4;
    let mut body = String::new();
    let mut line = |indent: usize, text: String| {
        body.push_str(&" ".repeat(4 * indent));
        body.push_str(&text);
        body.push('\n');
    };
    for i in 0..rows {
        for j in 0..vec4s {
            line(1, format!("var c{i}_{j} = vec4<f32>(0.0);"));
        }
    }
    line(
        1,
        format!("for (var k0 = k_begin; k0 < k_end; k0 = k0 + {bk}u) {{"),
    );
    for l in 0..bm * bk / threads {
        line(2, format!("let a_index{l} = t + {}u;", l * threads));
        line(2, format!("let ar{l} = row_base + a_index{l} / {bk}u;"));
        line(2, format!("let ak{l} = k0 + a_index{l} % {bk}u;"));
        line(
            2,
            format!(
                "{entry}_a[a_index{l}] = select(0.0, a[a_base + min(ar{l}, m - 1u) * a_row + min(ak{l}, k_end - 1u) \
                 * a_col], ar{l} < m && ak{l} < k_end);"
            ),
        );
    }
    for l in 0..bn * bk / threads {
        line(2, format!("let b_index{l} = t + {}u;", l * threads));
        line(2, format!("let bk{l} = k0 + b_index{l} / {bn}u;"));
        line(2, format!("let bc{l} = col_base + b_index{l} % {bn}u;"));
        line(
            2,
            format!(
                "{entry}_b[b_index{l}] = select(0.0, b[b_base + min(bk{l}, k_end - 1u) * b_row + min(bc{l}, n - 1u) \
                 * b_col], bk{l} < k_end && bc{l} < n);"
            ),
        );
    }
    line(2, "workgroupBarrier();".to_string());
    line(2, format!("for (var kk = 0u; kk < {bk}u; kk = kk + 1u) {{"));
    for j in 0..vec4s {
        line(
            3,
            format!("let bb{j} = kk * {bn}u + lid.x * {cols}u + {}u;", 4 * j),
        );
        line(
            3,
            format!(
                "let bv{j} = vec4<f32>({entry}_b[bb{j}], {entry}_b[bb{j} + 1u], {entry}_b[bb{j} + 2u], \
                 {entry}_b[bb{j} + 3u]);"
            ),
        );
    }
    for i in 0..rows {
        line(
            3,
            format!("let av{i} = {entry}_a[(lid.y * {rows}u + {i}u) * {bk}u + kk];"),
        );
        for j in 0..vec4s {
            line(3, format!("c{i}_{j} = c{i}_{j} + av{i} * bv{j};"));
        }
    }
    line(2, "}".to_string());
    line(2, "workgroupBarrier();".to_string());
    line(1, "}".to_string());
    line(1, format!("let col0 = col_base + lid.x * {cols}u;"));
    for i in 0..rows {
        line(
            1,
            format!("let row{i} = row_base + lid.y * {rows}u + {i}u;"),
        );
        line(1, format!("if (row{i} < m) {{"));
        for j in 0..vec4s {
            for (lane, component) in ["x", "y", "z", "w"].iter().enumerate() {
                let col = 4 * j + lane as u32;
                line(
                    2,
                    format!(
                        "if (col0 + {col}u < n) {{ store1(c_base + row{i} * n + col0 + {col}u, c{i}_{j}.{component}, \
                         accumulate); }}"
                    ),
                );
            }
        }
        line(1, "}".to_string());
    }
    format!(
        "
// {bm}×{bn} of C per {tx}×{ty} workgroup, {rows}×{cols} per invocation, {bk} deep along K per step.
var<workgroup> {entry}_a: array<f32, {a_len}>;
var<workgroup> {entry}_b: array<f32, {b_len}>;

@compute @workgroup_size({tx}, {ty})
fn {entry}(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {{
    let m = params.m;
    let n = params.n;
    let k_begin = params.k_begin;
    let k_end = params.k_end;
    let a_row = params.a_row;
    let a_col = params.a_col;
    let b_row = params.b_row;
    let b_col = params.b_col;
    let accumulate = params.accumulate == 1u;
    let a_base = a_batch_base(wid.z);
    let b_base = b_batch_base(wid.z);
    let c_base = wid.z * params.c_batch;
    let row_base = (wid.y + params.group_row_offset) * {bm}u;
    let col_base = wid.x * {bn}u;
    let t = lid.y * {tx}u + lid.x;
{body}}}
",
        a_len = bm * bk,
        b_len = bk * bn,
    )
}

fn transposed_right_source() -> String {
    let tile = BT_TILE;
    let mut body = String::new();
    let mut line = |text: String| {
        body.push_str("    ");
        body.push_str(&text);
        body.push('\n');
    };
    for i in 0..tile {
        line(format!(
            "let a{i} = a_base + min(row0 + {i}u, m - 1u) * k4s;"
        ));
        line(format!(
            "let b{i} = b_base + min(col0 + {i}u, n - 1u) * k4s;"
        ));
    }
    for i in 0..tile {
        for j in 0..tile {
            line(format!("var c{i}_{j} = vec4<f32>(0.0);"));
        }
    }
    line("for (var k4 = k4_begin; k4 < k4_end; k4 = k4 + 1u) {".to_string());
    for i in 0..tile {
        line(format!("    let x{i} = a4[a{i} + k4];"));
        line(format!("    let y{i} = b4[b{i} + k4];"));
    }
    for i in 0..tile {
        for j in 0..tile {
            line(format!("    c{i}_{j} = c{i}_{j} + x{i} * y{j};"));
        }
    }
    line("}".to_string());
    line("let accumulate = params.accumulate == 1u;".to_string());
    for i in 0..tile {
        line(format!("if (row0 + {i}u < m) {{"));
        for j in 0..tile {
            line(format!(
                "    if (col0 + {j}u < n) {{ store1(c_base + (row0 + {i}u) * n + col0 + {j}u, \
                 (c{i}_{j}.x + c{i}_{j}.y) + (c{i}_{j}.z + c{i}_{j}.w), accumulate); }}"
            ));
        }
        line("}".to_string());
    }
    format!(
        "
fn store1(at: u32, value: f32, accumulate: bool) {{
    if (accumulate) {{
        c[at] = c[at] + value;
    }} else {{
        c[at] = value;
    }}
}}

// C = A·Bᵀ, A stored [M, K] and B stored [N, K], K % 4 == 0: {tile}×{tile} of C per invocation, {inv}×{inv}
// invocations per workgroup.
@compute @workgroup_size(64)
fn matmul_vec4_bt(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{
    let m = params.m;
    let n = params.n;
    let k4s = params.k / 4u;
    let k4_begin = params.k_begin / 4u;
    let k4_end = params.k_end / 4u;
    let row0 = ((wid.y + params.group_row_offset) * {inv}u + lid / {inv}u) * {tile}u;
    let col0 = (wid.x * {inv}u + lid % {inv}u) * {tile}u;
    if (row0 >= m || col0 >= n) {{
        return;
    }}
    let a_base = a_batch_base(wid.z) / 4u;
    let b_base = b_batch_base(wid.z) / 4u;
    let c_base = wid.z * params.c_batch;
{body}}}
",
        inv = BT_INVOCATIONS
    )
}

/// One line of a generated kernel's body.
fn push_line(body: &mut String, text: String) {
    body.push_str("    ");
    body.push_str(&text);
    body.push('\n');
}

/// A register tile's clamped columns of B (`b_col0`, ...) and its zeroed accumulators (`c{row}_{vec4}`).
fn push_columns_and_accumulators(body: &mut String, rows: u32, vec4s: u32) {
    for j in 0..vec4s {
        push_line(body, format!("let b_col{j} = min(col4 + {j}u, n4s - 1u);"));
    }
    for i in 0..rows {
        for j in 0..vec4s {
            push_line(body, format!("var c{i}_{j} = vec4<f32>(0.0);"));
        }
    }
}

/// A register tile's stores: each accumulator written (or added, in a later pass over K) where its row and
/// vec4 column are inside C.
/// The rest of a register tile's k4 loop once each row's `av{i}` (A's four k values) is loaded: for each of
/// the four k, B's row of vec4s and the rank-one update of every accumulator, then the loop's end.
fn push_rank_one_updates(body: &mut String, rows: u32, vec4s: u32) {
    let mut line = |text: String| push_line(body, text);
    line("    var brow = b_base + k4 * 4u * n4s;".to_string());
    for component in ["x", "y", "z", "w"] {
        for j in 0..vec4s {
            line(format!("    let b{component}{j} = b4[brow + b_col{j}];"));
        }
        for i in 0..rows {
            for j in 0..vec4s {
                line(format!(
                    "    c{i}_{j} = c{i}_{j} + av{i}.{component} * b{component}{j};"
                ));
            }
        }
        line("    brow = brow + n4s;".to_string());
    }
    line("}".to_string());
}

fn push_tile_stores(body: &mut String, rows: u32, vec4s: u32) {
    push_line(
        body,
        "let accumulate = params.accumulate == 1u;".to_string(),
    );
    for i in 0..rows {
        push_line(body, format!("if (row0 + {i}u < m) {{"));
        push_line(
            body,
            format!("    let at = c_base + (row0 + {i}u) * n4s + col4;"),
        );
        for j in 0..vec4s {
            push_line(
                body,
                format!(
                    "    if (col4 + {j}u < n4s) {{ store4(at + {j}u, c{i}_{j}, accumulate); }}"
                ),
            );
        }
        push_line(body, "}".to_string());
    }
}

/// The WGSL of a shared-row Aᵀ·B tile (`rows` a multiple of 4): as `register_tile_source`, with A read along
/// its rows of K. With `subgroup`, lanes 0, 1, ... load the tile's vec4s of A and broadcast them, and no
/// invocation returns early (see `subgroup_wide_source`); the sums are the same, in the same order.
fn transposed_left_source(tile: &RegisterTile, subgroup: bool) -> String {
    let (entry, rows, vec4s, invocations) =
        (tile.kernel.entry, tile.rows, tile.vec4s, tile.invocations);
    let mut body = String::new();
    if subgroup {
        assert!(rows % 4 == 0 && rows / 4 <= SUBGROUP_LANES);
        push_line(
            &mut body,
            "let a_lane = min(row0 / 4u + lane, m4s - 1u);".to_string(),
        );
    } else {
        for group in 0..rows / 4 {
            push_line(
                &mut body,
                format!("let a_row4_{group} = min(row0 / 4u + {group}u, m4s - 1u);"),
            );
        }
    }
    push_columns_and_accumulators(&mut body, rows, vec4s);
    let mut line = |text: String| push_line(&mut body, text);
    line("for (var k = params.k_begin; k < params.k_end; k = k + 1u) {".to_string());
    if subgroup {
        line("    let a_mine = a4[a_base + k * m4s + a_lane];".to_string());
        for group in 0..rows / 4 {
            line(format!(
                "    let a_vec{group} = subgroupBroadcast(a_mine, {group}u);"
            ));
        }
    } else {
        line("    let a_row = a_base + k * m4s;".to_string());
        for group in 0..rows / 4 {
            line(format!(
                "    let a_vec{group} = a4[a_row + a_row4_{group}];"
            ));
        }
    }
    line("    let b_row = b_base + k * n4s;".to_string());
    for j in 0..vec4s {
        line(format!("    let b_vec{j} = b4[b_row + b_col{j}];"));
    }
    for i in 0..rows {
        let component = ["x", "y", "z", "w"][(i % 4) as usize];
        for j in 0..vec4s {
            line(format!(
                "    c{i}_{j} = c{i}_{j} + a_vec{group}.{component} * b_vec{j};",
                group = i / 4
            ));
        }
    }
    line("}".to_string());
    push_tile_stores(&mut body, rows, vec4s);
    let setup = format!(
        "    let m4s = params.m / 4u;
    let n4s = params.n / 4u;
    let row0 = (wid.y + params.group_row_offset) * {rows}u;
    let col4 = (wid.x * {invocations}u + lid) * {vec4s}u;
"
    );
    let comment = format!(
        "C = Aᵀ·B with A stored [K, M] (M % 4 == 0) and B stored [K, N] (N % 4 == 0): {rows} rows x {vec4s} vec4
// columns of C per invocation"
    );
    if subgroup {
        let comment = format!(
            "{comment}, {invocations} invocations sharing their rows along N; A's vec4s loaded across the
// subgroup and broadcast."
        );
        subgroup_entry_point(entry, invocations, &comment, &setup, &body)
    } else {
        let comment = format!(
            "{comment}; the workgroup's 64 invocations share their rows and spread along N."
        );
        tile_entry_point(entry, invocations, &comment, &setup, &body)
    }
}

/// A register tile's entry point: `setup` defines `row0` and `col4` (the tile's first row and vec4 column of
/// C) and whatever `body` needs besides `m`, the batch's bases and the bindings.
fn tile_entry_point(
    entry: &str,
    invocations: u32,
    comment: &str,
    setup: &str,
    body: &str,
) -> String {
    format!(
        "
// {comment}
@compute @workgroup_size({invocations})
fn {entry}(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{
    let m = params.m;
{setup}    if (row0 >= m || col4 >= n4s) {{
        return;
    }}
    let batch = wid.z;
    let a_base = a_batch_base(batch) / 4u;
    let b_base = b_batch_base(batch) / 4u;
    let c_base = batch * (params.c_batch / 4u);
{body}}}
"
    )
}

fn register_tile_source(tile: &RegisterTile) -> String {
    let (entry, rows, vec4s) = (tile.kernel.entry, tile.rows, tile.vec4s);
    let invocations = tile.invocations;
    let (first_row, first_col4, layout) = if tile.shared_rows {
        (
            format!("(wid.y + params.group_row_offset) * {rows}u"),
            format!("(wid.x * {invocations}u + lid) * {vec4s}u"),
            format!(
                "the workgroup's {invocations} invocations share their rows and spread along N"
            ),
        )
    } else {
        (
            format!(
                "(((wid.y + params.group_row_offset) * params.wg_rows) + lid / wg_cols) * {rows}u"
            ),
            format!("((wid.x * wg_cols) + lid % wg_cols) * {vec4s}u"),
            "workgroups as in matmul_vec4".to_string(),
        )
    };
    let mut body = String::new();
    for i in 0..rows {
        push_line(
            &mut body,
            format!("let r{i} = a_base + min(row0 + {i}u, m - 1u) * k4s;"),
        );
    }
    push_columns_and_accumulators(&mut body, rows, vec4s);
    let mut line = |text: String| push_line(&mut body, text);
    line("for (var k4 = k4_begin; k4 < k4_end; k4 = k4 + 1u) {".to_string());
    for i in 0..rows {
        line(format!("    let av{i} = a4[r{i} + k4];"));
    }
    push_rank_one_updates(&mut body, rows, vec4s);
    push_tile_stores(&mut body, rows, vec4s);
    tile_entry_point(
        entry,
        tile.invocations,
        &format!("{rows} rows x {vec4s} vec4 columns of C per invocation; {layout}."),
        &format!(
            "    let k4s = params.k / 4u;
    let n4s = params.n / 4u;
    let k4_begin = params.k_begin / 4u;
    let k4_end = params.k_end / 4u;
    let wg_cols = 64u / params.wg_rows;
    let row0 = {first_row};
    let col4 = {first_col4};
"
        ),
        &body,
    )
}
