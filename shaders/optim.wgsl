// Optimizer updates, each one fused pass over its tensors (in place). Hyperparameters and bias corrections are
// computed on the host in f64 and passed as uniforms.

struct Params {
    count: u32,
    mode: u32,          // adam: MODE_TENSORFLOW, MODE_KINGMA_BA or MODE_ADAMW (decoupled decay); sgd: SGD_NESTEROV or 0;
                        // rule: the row's position in the table of rules
    lr: f32,
    beta1: f32,
    beta2: f32,
    epsilon: f32,
    step_size: f32,     // MODE_TENSORFLOW: lr * sqrt(1 - beta2^t) / (1 - beta1^t); else lr / (1 - beta1^t)
    bias2_sqrt: f32,    // sqrt(1 - beta2^t)
    decay: f32,         // MODE_TENSORFLOW, MODE_ADAMW, sgd: 1 - lr * weight_decay (exactly 1 without decay)
    momentum: f32,      // sgd
    start: u32,         // scalar kernels: the first element (after the vec4 kernel's part)
    vec4s: u32,         // vec4 kernels: vec4s per invocation
    table: u32,         // *_tensors kernels: the vec4 at which the table starts in its binding
    entries: u32,       // *_tensors kernels: the table's entries
    gradient_step: f32, // rules: with beta1 .. momentum, the numbers a row folds, in the order of its `numbers`
    slots: u32,         // rule kernels: SLOT_SECOND | SLOT_THIRD, the state operands the rule reads and writes
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read_write> param: array<f32>;
@group(0) @binding(2) var<storage, read_write> grad: array<f32>;
@group(0) @binding(3) var<storage, read_write> m: array<f32>;
@group(0) @binding(4) var<storage, read_write> v: array<f32>;
@group(0) @binding(6) var<storage, read_write> w: array<f32>;


// The hyperparameters, read once before any store: after a store to a storage buffer the compiler must assume
// uniform memory changed too and reload it (on llvmpipe that alone costs a third of the pass).
struct Hyper {
    mode: u32,
    beta1: f32,
    beta2: f32,
    epsilon: f32,
    step_size: f32,
    bias2_sqrt: f32,
    decay: f32,
}

fn hyper() -> Hyper {
    return Hyper(params.mode, params.beta1, params.beta2, params.epsilon, params.step_size, params.bias2_sqrt, params.decay);
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn adam(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = params.start + linear_index(id, groups);
    if (i >= params.count) {
        return;
    }
    let h = hyper();
    let g = grad[i];
    let m_new = h.beta1 * m[i] + (1.0 - h.beta1) * g;
    let v_new = h.beta2 * v[i] + (1.0 - h.beta2) * g * g;
    var p = param[i];
    if (h.mode == MODE_TENSORFLOW) {
        // Keras's Adam(weight_decay=...) decays first, as AdamW does; a decay of exactly 1 changes no bit.
        p = p * h.decay;
        p = p - h.step_size * m_new / (sqrt(v_new) + h.epsilon);
    } else {
        if (h.mode == MODE_ADAMW) {
            p = p * h.decay;
        }
        p = p - h.step_size * m_new / (sqrt(v_new) / h.bias2_sqrt + h.epsilon);
    }
    m[i] = m_new;
    v[i] = v_new;
    param[i] = p;
}

// SGD with momentum (PyTorch's form): buffer = momentum * buffer + g; param = param * decay - lr * buffer, or
// with Nesterov's momentum param = param * decay - lr * (g + momentum * buffer). `m` is the buffer. A decay of
// exactly 1 leaves the bits of the form without weight decay.
struct Sgd {
    lr: f32,
    momentum: f32,
    decay: f32,
    nesterov: bool,
}

fn sgd_hyper() -> Sgd {
    return Sgd(params.lr, params.momentum, params.decay, params.mode == SGD_NESTEROV);
}

struct Sgd4 {
    param: vec4<f32>,
    buffer: vec4<f32>,
}

fn sgd4(h: Sgd, param_old: vec4<f32>, g: vec4<f32>, buffer_old: vec4<f32>) -> Sgd4 {
    let buffer = h.momentum * buffer_old + g;
    let direction = select(buffer, g + h.momentum * buffer, h.nesterov);
    return Sgd4(param_old * h.decay - h.lr * direction, buffer);
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn sgd(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = params.start + linear_index(id, groups);
    if (i >= params.count) {
        return;
    }
    let step = sgd4(sgd_hyper(), vec4<f32>(param[i]), vec4<f32>(grad[i]), vec4<f32>(m[i]));
    m[i] = step.buffer.x;
    param[i] = step.param.x;
}

// The same updates on vec4s, `vec4s` neighbouring ones per invocation, over the first count / 4 * 4 elements
// (the host runs the scalar kernel over the rest): vec4 loads and stores cut the per-element cost of addressing,
// which dominates these memory-bound passes. Each element is computed as in the scalar kernels.
@group(0) @binding(1) var<storage, read_write> param4: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> grad4: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> m4: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> v4: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read_write> w4: array<vec4<f32>>;

// The vec4s of invocation `id`: [first, end).
fn vec4_span(id: vec3<u32>, groups: vec3<u32>) -> vec2<u32> {
    let first = linear_index(id, groups) * params.vec4s;
    return vec2<u32>(first, min(first + params.vec4s, params.count / 4u));
}

// One Adam step of four elements, each computed as the scalar kernel computes it: the vec4 kernel and the
// one over many tensors share it.
struct Adam4 {
    param: vec4<f32>,
    m: vec4<f32>,
    v: vec4<f32>,
}

fn adam4(h: Hyper, param_old: vec4<f32>, g: vec4<f32>, m_old: vec4<f32>, v_old: vec4<f32>) -> Adam4 {
    let m_new = h.beta1 * m_old + (1.0 - h.beta1) * g;
    let v_new = h.beta2 * v_old + (1.0 - h.beta2) * g * g;
    var p = param_old;
    if (h.mode == MODE_TENSORFLOW) {
        // Keras's Adam(weight_decay=...) decays first, as AdamW does; a decay of exactly 1 changes no bit.
        p = p * h.decay;
        p = p - h.step_size * m_new / (sqrt(v_new) + h.epsilon);
    } else {
        if (h.mode == MODE_ADAMW) {
            p = p * h.decay;
        }
        p = p - h.step_size * m_new / (sqrt(v_new) / h.bias2_sqrt + h.epsilon);
    }
    return Adam4(p, m_new, v_new);
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn adam_vec4(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let span = vec4_span(id, groups);
    let h = hyper();
    for (var i = span.x; i < span.y; i = i + 1u) {
        let step = adam4(h, param4[i], grad4[i], m4[i], v4[i]);
        m4[i] = step.m;
        v4[i] = step.v;
        param4[i] = step.param;
    }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn sgd_vec4(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let span = vec4_span(id, groups);
    let h = sgd_hyper();
    for (var i = span.x; i < span.y; i = i + 1u) {
        let step = sgd4(h, param4[i], grad4[i], m4[i]);
        m4[i] = step.buffer;
        param4[i] = step.param;
    }
}

// The same updates over many tensors in one dispatch. Each operand binding is a whole slab, and a table says where
// each tensor's operands start in them: entry e is two vec4s from `params.table + 2e`, the first holding the
// vec4 offsets of (param, grad, m, v), the second (element count, first workgroup, 0, 0). Workgroups are laid
// out over the tensors in table order, each tensor starting a fresh workgroup, so a workgroup serves one tensor.
// A tensor's last vec4 may hold fewer than four of its elements: it is loaded and stored whole, its other lanes
// storing back the bits just loaded from them. Those lanes are the padding of the tensor's own pool range (ranges
// start 256-byte aligned and own their rounding), so no other tensor's data is there, and in one dispatch no
// other invocation touches them. Each element of a tensor is computed as in the kernels above, so the bits are
// theirs.
@group(0) @binding(5) var<storage, read_write> table: array<vec4<u32>>;

// The entry that workgroup `group` serves: the last whose first workgroup is at or below it (entry 0 starts at 0).
fn entry_of(group: u32) -> u32 {
    var low = 0u;
    var high = params.entries;
    while (high - low > 1u) {
        let middle = (low + high) / 2u;
        if (table[params.table + 2u * middle + 1u].y <= group) {
            low = middle;
        } else {
            high = middle;
        }
    }
    return low;
}

// One tensor's part of a workgroup: its operands' offsets, its element count, and the vec4s [first, end) of it
// that invocation `local` of workgroup `group` updates.
struct Part {
    offsets: vec4<u32>,
    count: u32,
    first: u32,
    end: u32,
    // The vec4 offset of a fifth operand (the rule kernels' third state).
    fifth: u32,
}

fn part_of(workgroup: vec3<u32>, groups: vec3<u32>, local: u32) -> Part {
    let group = workgroup.x + workgroup.y * groups.x;
    let e = entry_of(group);
    let offsets = table[params.table + 2u * e];
    let shape = table[params.table + 2u * e + 1u];
    let first = ((group - shape.y) * WORKGROUP_SIZE + local) * params.vec4s;
    return Part(offsets, shape.x, first, min(first + params.vec4s, (shape.x + 3u) / 4u), shape.z);
}

// Which lanes of vec4 `i` of a tensor of `count` elements are the tensor's: all but in its last vec4 when
// `count` is no multiple of 4.
fn own_lanes(i: u32, count: u32) -> vec4<bool> {
    return vec4<u32>(4u * i) + vec4<u32>(0u, 1u, 2u, 3u) < vec4<u32>(count);
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn adam_tensors(
    @builtin(workgroup_id) workgroup: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) local: u32,
) {
    let h = hyper();
    let part = part_of(workgroup, groups, local);
    let o = part.offsets;
    for (var i = part.first; i < part.end; i = i + 1u) {
        let m_old = m4[o.z + i];
        let v_old = v4[o.w + i];
        let p_old = param4[o.x + i];
        let step = adam4(h, p_old, grad4[o.y + i], m_old, v_old);
        // The lanes past the tensor's end get back the bits loaded from them (see above), with no branch: with
        // the stores under a branch for the last vec4, the pass over 10M elements took 1.6× as long on llvmpipe.
        let own = own_lanes(i, part.count);
        m4[o.z + i] = select(m_old, step.m, own);
        v4[o.w + i] = select(v_old, step.v, own);
        param4[o.x + i] = select(p_old, step.param, own);
    }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn sgd_tensors(
    @builtin(workgroup_id) workgroup: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) local: u32,
) {
    let h = sgd_hyper();
    let part = part_of(workgroup, groups, local);
    let o = part.offsets;
    for (var i = part.first; i < part.end; i = i + 1u) {
        let m_old = m4[o.z + i];
        let p_old = param4[o.x + i];
        let step = sgd4(h, p_old, grad4[o.y + i], m_old);
        let own = own_lanes(i, part.count);
        m4[o.z + i] = select(m_old, step.buffer, own);
        param4[o.x + i] = select(p_old, step.param, own);
    }
}

// Keras's other optimizers, one row each of the table in src/op/optim.rs: each row's update `KIND4` and its
// entry points (`rule`, the scalar form of every row by `mode`; `KIND_vec4`; `KIND_tensors`, through the table
// as adam_tensors) are generated from the row by src/kernels/optim.rs, above this file. Every one first decays
// the parameter (`decay` = 1 - lr * weight_decay, exactly 1 without decay). The state operands are `m`, `v` and
// `w`, the row's slots in order; a rule that keeps fewer than three has the others bound to its gradient and
// neither reads nor writes them, and a slot kept only under some settings is read and written where `slots`
// says so. The vec4 and table kernels are one entry point per rule: with the rule chosen by a branch around
// their loops, llvmpipe ran Adamax and Nadam at 0.85x Adam's throughput, Adagrad and Lion (which move less) at
// 1.0x. The lanes of the table kernels past a tensor's end get back the bits loaded from them, as adam_tensors'.

// One step of a rule on four elements: the parameter, then the row's slots in order.
struct Rule4 {
    param: vec4<f32>,
    m: vec4<f32>,
    v: vec4<f32>,
    w: vec4<f32>,
}

// What a row gives for a slot it does not have.
const ZERO4 = vec4<f32>(0.0);

fn has_slot(slot: u32) -> bool {
    return (params.slots & slot) != 0u;
}
