// Optimizer updates, each one fused pass over its tensors (in place). Hyperparameters and bias corrections are
// computed on the host in f64 and passed as uniforms.

struct Params {
    count: u32,
    mode: u32,          // adam: MODE_TENSORFLOW, MODE_KINGMA_BA or MODE_ADAMW (decoupled decay); sgd: SGD_NESTEROV or 0
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
    gradient_step: f32, // rule RULE_NADAM: the step along the gradient itself (see the rule kernels)
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

// Keras's other optimizers, one fused pass each, the rule chosen by `mode`; every one first decays the parameter
// (`decay` = 1 - lr * weight_decay, exactly 1 without decay). The state operands are `m`, `v` and `w`; a rule
// that keeps fewer than three has the others bound to its gradient and neither reads nor writes them (`slots`).
//   RULE_RMSPROP(_CENTERED): m velocity, v momentum (momentum > 0), w average gradient (centered); beta1 is rho.
//   RULE_ADAGRAD: m accumulator.
//   RULE_ADAMAX: m first moment, v exponentially weighted infinity norm; step_size = lr / (1 - beta1^t).
//   RULE_NADAM: m, v moments; with b = sqrt(1 - beta2^t), step_size = b * lr * u_{t+1} / (1 - u_1 ... u_{t+1}),
//   gradient_step (above) times b, and epsilon times b: Keras's (step_size m + gradient_step g) / (sqrt(v) / b + eps)
//   with one division per element rather than two.
//   RULE_LION: m momentum.
struct Rule {
    mode: u32,
    lr: f32,
    beta1: f32,
    beta2: f32,
    epsilon: f32,
    momentum: f32,
    step_size: f32,
    gradient_step: f32,
    bias2_sqrt: f32,
    decay: f32,
}

fn rule_hyper() -> Rule {
    return Rule(params.mode, params.lr, params.beta1, params.beta2, params.epsilon, params.momentum,
        params.step_size, params.gradient_step, params.bias2_sqrt, params.decay);
}

struct Rule4 {
    param: vec4<f32>,
    m: vec4<f32>,
    v: vec4<f32>,
    w: vec4<f32>,
}

fn rmsprop4(h: Rule, p: vec4<f32>, g: vec4<f32>, m_old: vec4<f32>, v_old: vec4<f32>, w_old: vec4<f32>) -> Rule4 {
    let rho = h.beta1;
    let m_new = rho * m_old + (1.0 - rho) * g * g;
    var v_new = v_old;
    var w_new = w_old;
    var denominator = m_new + h.epsilon;
    if (h.mode == RULE_RMSPROP_CENTERED) {
        w_new = rho * w_old + (1.0 - rho) * g;
        denominator = m_new - w_new * w_new + h.epsilon;
    }
    let increment = h.lr * g / sqrt(denominator);
    var p_new = p - increment;
    if (h.momentum > 0.0) {
        v_new = h.momentum * v_old + increment;
        p_new = p - v_new;
    }
    return Rule4(p_new, m_new, v_new, w_new);
}

fn adagrad4(h: Rule, p: vec4<f32>, g: vec4<f32>, m_old: vec4<f32>) -> Rule4 {
    let m_new = m_old + g * g;
    return Rule4(p - h.lr * g / sqrt(m_new + h.epsilon), m_new, vec4<f32>(0.0), vec4<f32>(0.0));
}

fn adamax4(h: Rule, p: vec4<f32>, g: vec4<f32>, m_old: vec4<f32>, v_old: vec4<f32>) -> Rule4 {
    let m_new = m_old + (g - m_old) * (1.0 - h.beta1);
    let v_new = max(h.beta2 * v_old, abs(g));
    return Rule4(p - h.step_size * m_new / (v_new + h.epsilon), m_new, v_new, vec4<f32>(0.0));
}

fn nadam4(h: Rule, p: vec4<f32>, g: vec4<f32>, m_old: vec4<f32>, v_old: vec4<f32>) -> Rule4 {
    let m_new = m_old + (g - m_old) * (1.0 - h.beta1);
    let v_new = v_old + (g * g - v_old) * (1.0 - h.beta2);
    let p_new = p - (h.step_size * m_new + h.gradient_step * g) / (sqrt(v_new) + h.epsilon);
    return Rule4(p_new, m_new, v_new, vec4<f32>(0.0));
}

fn lion4(h: Rule, p: vec4<f32>, g: vec4<f32>, m_old: vec4<f32>) -> Rule4 {
    let p_new = p - h.lr * sign(h.beta1 * m_old + (1.0 - h.beta1) * g);
    return Rule4(p_new, h.beta2 * m_old + (1.0 - h.beta2) * g, vec4<f32>(0.0), vec4<f32>(0.0));
}

// One step of any rule on four elements (the parameter already decayed), for the scalar kernel. The vec4 and
// table kernels are one entry point per rule: with the rule chosen by a branch around their loops, llvmpipe ran
// Adamax and Nadam at 0.85× Adam's throughput, Adagrad and Lion (which move less) at 1.0×.
fn rule4(h: Rule, p: vec4<f32>, g: vec4<f32>, m_old: vec4<f32>, v_old: vec4<f32>, w_old: vec4<f32>) -> Rule4 {
    switch h.mode {
        case RULE_ADAGRAD: {
            return adagrad4(h, p, g, m_old);
        }
        case RULE_ADAMAX: {
            return adamax4(h, p, g, m_old, v_old);
        }
        case RULE_NADAM: {
            return nadam4(h, p, g, m_old, v_old);
        }
        case RULE_LION: {
            return lion4(h, p, g, m_old);
        }
        default: {
            return rmsprop4(h, p, g, m_old, v_old, w_old);
        }
    }
}

fn has_slot(slot: u32) -> bool {
    return (params.slots & slot) != 0u;
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn rule(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = params.start + linear_index(id, groups);
    if (i >= params.count) {
        return;
    }
    let h = rule_hyper();
    let second = has_slot(SLOT_SECOND);
    let third = has_slot(SLOT_THIRD);
    var v_old = 0.0;
    if (second) {
        v_old = v[i];
    }
    var w_old = 0.0;
    if (third) {
        w_old = w[i];
    }
    let step = rule4(h, vec4<f32>(param[i]) * h.decay, vec4<f32>(grad[i]), vec4<f32>(m[i]), vec4<f32>(v_old), vec4<f32>(w_old));
    m[i] = step.m.x;
    if (second) {
        v[i] = step.v.x;
    }
    if (third) {
        w[i] = step.w.x;
    }
    param[i] = step.param.x;
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn adagrad_vec4(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let span = vec4_span(id, groups);
    let h = rule_hyper();
    for (var i = span.x; i < span.y; i = i + 1u) {
        let step = adagrad4(h, param4[i] * h.decay, grad4[i], m4[i]);
        m4[i] = step.m;
        param4[i] = step.param;
    }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn lion_vec4(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let span = vec4_span(id, groups);
    let h = rule_hyper();
    for (var i = span.x; i < span.y; i = i + 1u) {
        let step = lion4(h, param4[i] * h.decay, grad4[i], m4[i]);
        m4[i] = step.m;
        param4[i] = step.param;
    }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn adamax_vec4(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let span = vec4_span(id, groups);
    let h = rule_hyper();
    for (var i = span.x; i < span.y; i = i + 1u) {
        let step = adamax4(h, param4[i] * h.decay, grad4[i], m4[i], v4[i]);
        m4[i] = step.m;
        v4[i] = step.v;
        param4[i] = step.param;
    }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn nadam_vec4(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let span = vec4_span(id, groups);
    let h = rule_hyper();
    for (var i = span.x; i < span.y; i = i + 1u) {
        let step = nadam4(h, param4[i] * h.decay, grad4[i], m4[i], v4[i]);
        m4[i] = step.m;
        v4[i] = step.v;
        param4[i] = step.param;
    }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn rmsprop_vec4(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let span = vec4_span(id, groups);
    let h = rule_hyper();
    let second = has_slot(SLOT_SECOND);
    let third = has_slot(SLOT_THIRD);
    for (var i = span.x; i < span.y; i = i + 1u) {
        var v_old = vec4<f32>(0.0);
        if (second) {
            v_old = v4[i];
        }
        var w_old = vec4<f32>(0.0);
        if (third) {
            w_old = w4[i];
        }
        let step = rmsprop4(h, param4[i] * h.decay, grad4[i], m4[i], v_old, w_old);
        m4[i] = step.m;
        if (second) {
            v4[i] = step.v;
        }
        if (third) {
            w4[i] = step.w;
        }
        param4[i] = step.param;
    }
}

// The rules over many tensors, through the table as adam_tensors; the lanes past a tensor's end get back the
// bits loaded from them, as there.
@compute @workgroup_size(WORKGROUP_SIZE)
fn adagrad_tensors(
    @builtin(workgroup_id) workgroup: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) local: u32,
) {
    let h = rule_hyper();
    let part = part_of(workgroup, groups, local);
    let o = part.offsets;
    for (var i = part.first; i < part.end; i = i + 1u) {
        let p_old = param4[o.x + i];
        let m_old = m4[o.z + i];
        let step = adagrad4(h, p_old * h.decay, grad4[o.y + i], m_old);
        let own = own_lanes(i, part.count);
        m4[o.z + i] = select(m_old, step.m, own);
        param4[o.x + i] = select(p_old, step.param, own);
    }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn lion_tensors(
    @builtin(workgroup_id) workgroup: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) local: u32,
) {
    let h = rule_hyper();
    let part = part_of(workgroup, groups, local);
    let o = part.offsets;
    for (var i = part.first; i < part.end; i = i + 1u) {
        let p_old = param4[o.x + i];
        let m_old = m4[o.z + i];
        let step = lion4(h, p_old * h.decay, grad4[o.y + i], m_old);
        let own = own_lanes(i, part.count);
        m4[o.z + i] = select(m_old, step.m, own);
        param4[o.x + i] = select(p_old, step.param, own);
    }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn adamax_tensors(
    @builtin(workgroup_id) workgroup: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) local: u32,
) {
    let h = rule_hyper();
    let part = part_of(workgroup, groups, local);
    let o = part.offsets;
    for (var i = part.first; i < part.end; i = i + 1u) {
        let p_old = param4[o.x + i];
        let m_old = m4[o.z + i];
        let v_old = v4[o.w + i];
        let step = adamax4(h, p_old * h.decay, grad4[o.y + i], m_old, v_old);
        let own = own_lanes(i, part.count);
        m4[o.z + i] = select(m_old, step.m, own);
        v4[o.w + i] = select(v_old, step.v, own);
        param4[o.x + i] = select(p_old, step.param, own);
    }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn nadam_tensors(
    @builtin(workgroup_id) workgroup: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) local: u32,
) {
    let h = rule_hyper();
    let part = part_of(workgroup, groups, local);
    let o = part.offsets;
    for (var i = part.first; i < part.end; i = i + 1u) {
        let p_old = param4[o.x + i];
        let m_old = m4[o.z + i];
        let v_old = v4[o.w + i];
        let step = nadam4(h, p_old * h.decay, grad4[o.y + i], m_old, v_old);
        let own = own_lanes(i, part.count);
        m4[o.z + i] = select(m_old, step.m, own);
        v4[o.w + i] = select(v_old, step.v, own);
        param4[o.x + i] = select(p_old, step.param, own);
    }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn rmsprop_tensors(
    @builtin(workgroup_id) workgroup: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) local: u32,
) {
    let h = rule_hyper();
    let second = has_slot(SLOT_SECOND);
    let third = has_slot(SLOT_THIRD);
    let part = part_of(workgroup, groups, local);
    let o = part.offsets;
    for (var i = part.first; i < part.end; i = i + 1u) {
        let p_old = param4[o.x + i];
        let m_old = m4[o.z + i];
        var v_old = vec4<f32>(0.0);
        if (second) {
            v_old = v4[o.w + i];
        }
        var w_old = vec4<f32>(0.0);
        if (third) {
            w_old = w4[part.fifth + i];
        }
        let step = rmsprop4(h, p_old * h.decay, grad4[o.y + i], m_old, v_old, w_old);
        let own = own_lanes(i, part.count);
        m4[o.z + i] = select(m_old, step.m, own);
        if (second) {
            v4[o.w + i] = select(v_old, step.v, own);
        }
        if (third) {
            w4[part.fifth + i] = select(w_old, step.w, own);
        }
        param4[o.x + i] = select(p_old, step.param, own);
    }
}
