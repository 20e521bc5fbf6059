// Softmax, log-softmax and softmax cross-entropy along the last axis, in three variants: one workgroup per row
// (wide rows), ROW_LANES invocations per row (rows per workgroup), one invocation per row. Rows are shifted by
// their maximum before exponentiating, so rows of ±80 (or ±1e30) stay finite.
// The cross-entropy kernels can also count, per row, whether the logits' argmax is the labels' argmax (an
// epoch's accuracy, with no pass of its own): `count_correct` turns it on, and the count is added into
// `correct[0]` with an integer atomic, which is exact in any order. The loss and gradient never depend on it.

struct Params {
    rows: u32,
    cols: u32,
    op: u32, // softmax_rows: SOFTMAX or LOG_SOFTMAX
    count_correct: u32, // softmax_xent*: 1 to add the rows whose argmaxes agree into correct[0]
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read_write> logits: array<f32>;
@group(0) @binding(2) var<storage, read_write> labels: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<storage, read_write> loss: array<f32>;
// Bound to the loss when not counting, and then never touched.
@group(0) @binding(5) var<storage, read_write> correct: array<atomic<u32>>;

const THREADS: u32 = WORKGROUP_SIZE;

var<workgroup> tree_a: array<f32, WORKGROUP_SIZE>;
var<workgroup> tree_b: array<f32, WORKGROUP_SIZE>;
var<workgroup> tree_c: array<f32, WORKGROUP_SIZE>;

// --- argmax as src/kernels/reduce.rs computes it: a NaN beats any number and the first NaN wins; else the
// largest wins, the first on ties. NaN is tested by its bits, since a compiler may assume comparisons never see
// one. A pair (value, index) with index NO_INDEX holds nothing yet. ---

const NO_INDEX: u32 = 0xffffffffu;

fn is_nan(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

// Whether x, met after `best` in a scan in index order, displaces it.
fn arg_beats(x: f32, best: f32) -> bool {
    if (is_nan(best)) {
        return false;
    }
    return is_nan(x) || x > best;
}

// Whether the pair (x, at) wins over (best, best_at), in any order of meeting: on ties the smaller index wins.
fn pair_wins(x: f32, at: u32, best: f32, best_at: u32) -> bool {
    if (at == NO_INDEX) {
        return false;
    }
    if (best_at == NO_INDEX || arg_beats(x, best)) {
        return true;
    }
    let tied = x == best || (is_nan(x) && is_nan(best));
    return tied && at < best_at;
}

var<workgroup> index_a: array<u32, WORKGROUP_SIZE>;
var<workgroup> index_b: array<u32, WORKGROUP_SIZE>;

// The argmaxes of logits and labels over the row elements first, first + step, ... below `cols` of row `base`,
// as pairs in tree_a/index_a (logits) and tree_b/index_b (labels) at slot t.
fn scan_argmaxes(t: u32, base: u32, first: u32, step: u32, cols: u32) {
    var best_x = 0.0;
    var at_x = NO_INDEX;
    var best_y = 0.0;
    var at_y = NO_INDEX;
    for (var c = first; c < cols; c = c + step) {
        let x = logits[base + c];
        let y = labels[base + c];
        if (at_x == NO_INDEX || arg_beats(x, best_x)) {
            best_x = x;
            at_x = c;
        }
        if (at_y == NO_INDEX || arg_beats(y, best_y)) {
            best_y = y;
            at_y = c;
        }
    }
    tree_a[t] = best_x;
    index_a[t] = at_x;
    tree_b[t] = best_y;
    index_b[t] = at_y;
}

// Merges the pairs of slot t + stride into slot t.
fn merge_argmaxes(t: u32, stride: u32) {
    let o = t + stride;
    if (pair_wins(tree_a[o], index_a[o], tree_a[t], index_a[t])) {
        tree_a[t] = tree_a[o];
        index_a[t] = index_a[o];
    }
    if (pair_wins(tree_b[o], index_b[o], tree_b[t], index_b[t])) {
        tree_b[t] = tree_b[o];
        index_b[t] = index_b[o];
    }
}

// Whether the argmaxes in slot t agree: one row answered right.
fn count_if_agreeing(t: u32) {
    if (index_a[t] == index_b[t]) {
        atomicAdd(&correct[0], 1u);
    }
}

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
    if (params.count_correct == 1u) {
        // Every thread has read the sums' totals: the trees are free again.
        workgroupBarrier();
        scan_argmaxes(t, base, t, THREADS, params.cols);
        workgroupBarrier();
        for (var stride = THREADS / 2u; stride > 0u; stride = stride >> 1u) {
            if (t < stride) {
                merge_argmaxes(t, stride);
            }
            workgroupBarrier();
        }
        if (t == 0u) {
            count_if_agreeing(0u);
        }
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
    if (params.count_correct == 1u) {
        // Every lane has read its segment's totals: the trees are free again.
        workgroupBarrier();
        scan_argmaxes(t, base, lane, ROW_LANES, cols);
        workgroupBarrier();
        for (var stride = ROW_LANES / 2u; stride > 0u; stride = stride >> 1u) {
            if (lane < stride) {
                merge_argmaxes(t, stride);
            }
            workgroupBarrier();
        }
        if (lane == 0u && row < params.rows) {
            count_if_agreeing(t);
        }
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
    if (params.count_correct == 1u) {
        var best_x = logits[base];
        var at_x = 0u;
        var best_y = labels[base];
        var at_y = 0u;
        for (var c = 1u; c < cols; c = c + 1u) {
            let x = logits[base + c];
            let y = labels[base + c];
            if (arg_beats(x, best_x)) {
                best_x = x;
                at_x = c;
            }
            if (arg_beats(y, best_y)) {
                best_y = y;
                at_y = c;
            }
        }
        if (at_x == at_y) {
            atomicAdd(&correct[0], 1u);
        }
    }
}
