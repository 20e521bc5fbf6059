
// --- subgroup kernels, appended to reduce.wgsl in a module of their own: only devices with subgroup operations
// build it ---

// As axis_reduce for contiguous runs (inner = 1), one subgroup per output: lane l reduces elements l, l + size,
// ... of its run, then the lanes combine by a butterfly of shuffles. For a given subgroup size the order is
// fixed, so results repeat bitwise. The host dispatches a subgroup per output at the adapter's largest subgroup
// size; the loop over outputs only covers the case where the subgroups are fewer than that promised.
@compute @workgroup_size(WORKGROUP_SIZE)
fn axis_reduce_subgroup(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(subgroup_id) subgroup: u32,
    @builtin(num_subgroups) subgroups: u32,
    @builtin(subgroup_invocation_id) lane: u32,
    @builtin(subgroup_size) size: u32,
) {
    let total = params.outer * params.chunks;
    let stride = groups.x * groups.y * subgroups;
    let op = params.op;
    for (var j = (wid.x + wid.y * groups.x) * subgroups + subgroup; j < total; j = j + stride) {
        let c = j % params.chunks;
        let row = (j / params.chunks) * params.len;
        let first = c * params.chunk;
        let last = min(first + params.chunk, params.len);
        var acc = identity(op);
        for (var k = first + lane; k < last; k = k + size) {
            acc = combine(op, acc, input[row + k]);
        }
        for (var mask = size / 2u; mask > 0u; mask = mask >> 1u) {
            acc = combine(op, acc, subgroupShuffleXor(acc, mask));
        }
        if (lane == 0u) {
            out[params.out_base + j] = acc * params.scale;
        }
    }
}
