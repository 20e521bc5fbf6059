// Elementwise kernels over one f32 array. Shapes travel in the uniform block; the linear index is rebuilt from
// a two-dimensional grid because one dispatch dimension stops at 65,535 workgroups.

struct Params {
    count: u32,
    _pad0: u32,
    a: f32,
    b: f32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read_write> values: array<f32>;

fn linear_index(id: vec3<u32>, groups: vec3<u32>) -> u32 {
    return id.x + id.y * groups.x * 256u;
}

// values[i] = a
@compute @workgroup_size(256)
fn fill(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = linear_index(id, groups);
    if (i < params.count) {
        values[i] = params.a;
    }
}

// values[i] = values[i] * a + b
@compute @workgroup_size(256)
fn scale_add(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = linear_index(id, groups);
    if (i < params.count) {
        values[i] = values[i] * params.a + params.b;
    }
}
