// Softmax, log-softmax and softmax cross-entropy along the last axis, in three variants: one workgroup per row
// (wide rows), ROW_LANES invocations per row (rows per workgroup), one invocation per row. Rows are shifted by
// their maximum before exponentiating, so rows of ±80 (or ±1e30) stay finite.

struct Params {
    rows: u32,
    cols: u32,
    op: u32, // softmax_rows: SOFTMAX or LOG_SOFTMAX
    _pad: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read_write> logits: array<f32>;
@group(0) @binding(2) var<storage, read_write> labels: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<storage, read_write> loss: array<f32>;

const THREADS: u32 = WORKGROUP_SIZE;

var<workgroup> tree_a: array<f32, WORKGROUP_SIZE>;
var<workgroup> tree_b: array<f32, WORKGROUP_SIZE>;
var<workgroup> tree_c: array<f32, WORKGROUP_SIZE>;

fn row_of(wid: vec3<u32>, groups: vec3<u32>) -> u32 {
    return wid.x + wid.y * groups.x;
}

// The row's maximum, in every thread.
fn row_max(base: u32, t: u32) -> f32 {
    var m = -3.40282347e38;
    for (var c = t; c < params.cols; c = c + THREADS) {
        m = max(m, logits[base + c]);
    }
    tree_a[t] = m;
    workgroupBarrier();
    for (var stride = THREADS / 2u; stride > 0u; stride = stride >> 1u) {
        if (t < stride) {
            tree_a[t] = max(tree_a[t], tree_a[t + stride]);
        }
        workgroupBarrier();
    }
    let result = tree_a[0];
    workgroupBarrier();
    return result;
}

// Sums tree_a, tree_b and tree_c in a fixed order; the totals end in element 0 of each.
fn tree_sums(t: u32) {
    workgroupBarrier();
    for (var stride = THREADS / 2u; stride > 0u; stride = stride >> 1u) {
        if (t < stride) {
            tree_a[t] = tree_a[t] + tree_a[t + stride];
            tree_b[t] = tree_b[t] + tree_b[t + stride];
            tree_c[t] = tree_c[t] + tree_c[t + stride];
        }
        workgroupBarrier();
    }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn softmax_rows(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) t: u32,
) {
    let row = row_of(wid, groups);
    if (row >= params.rows) {
        return;
    }
    let base = row * params.cols;
    let m = row_max(base, t);
    var s = 0.0;
    for (var c = t; c < params.cols; c = c + THREADS) {
        s = s + exp(logits[base + c] - m);
    }
    tree_a[t] = s;
    tree_b[t] = 0.0;
    tree_c[t] = 0.0;
    tree_sums(t);
    let total = tree_a[0];
    let log_total = log(total);
    for (var c = t; c < params.cols; c = c + THREADS) {
        let shifted = logits[base + c] - m;
        if (params.op == LOG_SOFTMAX) {
            out[base + c] = shifted - log_total;
        } else {
            out[base + c] = exp(shifted) / total;
        }
    }
}

// TensorFlow's softmax_cross_entropy_with_logits per row: loss = sum_j labels_j * (logsumexp(logits) - logits_j),
// with labels not required to sum to 1; `out` receives the exact gradient of the loss,
// softmax(logits) * sum_j labels_j - labels.
@compute @workgroup_size(WORKGROUP_SIZE)
fn softmax_xent(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) t: u32,
) {
    let row = row_of(wid, groups);
    if (row >= params.rows) {
        return;
    }
    let base = row * params.cols;
    let m = row_max(base, t);
    var s = 0.0;
    var label_total = 0.0;
    var weighted = 0.0;
    for (var c = t; c < params.cols; c = c + THREADS) {
        let shifted = logits[base + c] - m;
        let y = labels[base + c];
        s = s + exp(shifted);
        label_total = label_total + y;
        weighted = weighted + y * shifted;
    }
    tree_a[t] = s;
    tree_b[t] = label_total;
    tree_c[t] = weighted;
    tree_sums(t);
    let total = tree_a[0];
    let labels_sum = tree_b[0];
    if (t == 0u) {
        // With x shifted by m: sum_j y_j (log S - (x_j - m)).
        loss[row] = labels_sum * log(total) - tree_c[0];
    }
    for (var c = t; c < params.cols; c = c + THREADS) {
        let p = exp(logits[base + c] - m) / total;
        out[base + c] = p * labels_sum - labels[base + c];
    }
}

// --- rows per workgroup: ROW_LANES invocations per row, WORKGROUP_SIZE / ROW_LANES rows per workgroup ---
// For rows too short to keep a workgroup busy. Each row's lanes reduce through their own segment of the trees;
// invocations past the last row take part in the barriers only.

const ROW_LANES: u32 = 16u;

// The row of invocation t, and its lane within the row.
fn segment_row(wid: vec3<u32>, groups: vec3<u32>, t: u32) -> u32 {
    return row_of(wid, groups) * (THREADS / ROW_LANES) + t / ROW_LANES;
}

// The maximum over the segment of invocation t (lane `lane`), in every lane.
fn segment_max(t: u32, lane: u32, value: f32) -> f32 {
    tree_a[t] = value;
    workgroupBarrier();
    for (var stride = ROW_LANES / 2u; stride > 0u; stride = stride >> 1u) {
        if (lane < stride) {
            tree_a[t] = max(tree_a[t], tree_a[t + stride]);
        }
        workgroupBarrier();
    }
    let result = tree_a[t - lane];
    workgroupBarrier();
    return result;
}

// Sums tree_a, tree_b and tree_c over each segment in a fixed order; the totals end in each segment's lane 0.
fn segment_sums(t: u32, lane: u32) {
    workgroupBarrier();
    for (var stride = ROW_LANES / 2u; stride > 0u; stride = stride >> 1u) {
        if (lane < stride) {
            tree_a[t] = tree_a[t] + tree_a[t + stride];
            tree_b[t] = tree_b[t] + tree_b[t + stride];
            tree_c[t] = tree_c[t] + tree_c[t + stride];
        }
        workgroupBarrier();
    }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn softmax_rows_segmented(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) t: u32,
) {
    let row = segment_row(wid, groups, t);
    let lane = t % ROW_LANES;
    let cols = select(0u, params.cols, row < params.rows);
    let base = row * params.cols;
    var m = -3.40282347e38;
    for (var c = lane; c < cols; c = c + ROW_LANES) {
        m = max(m, logits[base + c]);
    }
    m = segment_max(t, lane, m);
    var s = 0.0;
    for (var c = lane; c < cols; c = c + ROW_LANES) {
        s = s + exp(logits[base + c] - m);
    }
    tree_a[t] = s;
    tree_b[t] = 0.0;
    tree_c[t] = 0.0;
    segment_sums(t, lane);
    let total = tree_a[t - lane];
    let log_total = log(total);
    for (var c = lane; c < cols; c = c + ROW_LANES) {
        let shifted = logits[base + c] - m;
        if (params.op == LOG_SOFTMAX) {
            out[base + c] = shifted - log_total;
        } else {
            out[base + c] = exp(shifted) / total;
        }
    }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn softmax_xent_segmented(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) t: u32,
) {
    let row = segment_row(wid, groups, t);
    let lane = t % ROW_LANES;
    let cols = select(0u, params.cols, row < params.rows);
    let base = row * params.cols;
    var m = -3.40282347e38;
    for (var c = lane; c < cols; c = c + ROW_LANES) {
        m = max(m, logits[base + c]);
    }
    m = segment_max(t, lane, m);
    var s = 0.0;
    var label_total = 0.0;
    var weighted = 0.0;
    for (var c = lane; c < cols; c = c + ROW_LANES) {
        let shifted = logits[base + c] - m;
        let y = labels[base + c];
        s = s + exp(shifted);
        label_total = label_total + y;
        weighted = weighted + y * shifted;
    }
    tree_a[t] = s;
    tree_b[t] = label_total;
    tree_c[t] = weighted;
    segment_sums(t, lane);
    let total = tree_a[t - lane];
    let labels_sum = tree_b[t - lane];
    if (lane == 0u && row < params.rows) {
        loss[row] = labels_sum * log(total) - tree_c[t];
    }
    for (var c = lane; c < cols; c = c + ROW_LANES) {
        let p = exp(logits[base + c] - m) / total;
        out[base + c] = p * labels_sum - labels[base + c];
    }
}

// --- one row per invocation: for short rows, with no barriers at all; sums run left to right ---

@compute @workgroup_size(WORKGROUP_SIZE)
fn softmax_rows_per_invocation(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let row = linear_index(id, groups);
    if (row >= params.rows) {
        return;
    }
    let cols = params.cols;
    let base = row * cols;
    var m = -3.40282347e38;
    for (var c = 0u; c < cols; c = c + 1u) {
        m = max(m, logits[base + c]);
    }
    var total = 0.0;
    for (var c = 0u; c < cols; c = c + 1u) {
        total = total + exp(logits[base + c] - m);
    }
    let log_total = log(total);
    for (var c = 0u; c < cols; c = c + 1u) {
        let shifted = logits[base + c] - m;
        if (params.op == LOG_SOFTMAX) {
            out[base + c] = shifted - log_total;
        } else {
            out[base + c] = exp(shifted) / total;
        }
    }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn softmax_xent_per_invocation(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let row = linear_index(id, groups);
    if (row >= params.rows) {
        return;
    }
    let cols = params.cols;
    let base = row * cols;
    var m = -3.40282347e38;
    for (var c = 0u; c < cols; c = c + 1u) {
        m = max(m, logits[base + c]);
    }
    var total = 0.0;
    var labels_sum = 0.0;
    var weighted = 0.0;
    for (var c = 0u; c < cols; c = c + 1u) {
        let shifted = logits[base + c] - m;
        let y = labels[base + c];
        total = total + exp(shifted);
        labels_sum = labels_sum + y;
        weighted = weighted + y * shifted;
    }
    loss[row] = labels_sum * log(total) - weighted;
    for (var c = 0u; c < cols; c = c + 1u) {
        let p = exp(logits[base + c] - m) / total;
        out[base + c] = p * labels_sum - labels[base + c];
    }
}
