// Window kernels: the patches of an NHWC image that convolutions and pooling read (im2col), and their adjoint
// (col2im), which sums each patch entry back onto the input element it came from. Patches are laid out
// [groups, batch, out_h, out_w, kh, kw, group_channels]; the adjoint gathers rather than scatters, each input
// element summing its taps in a fixed order, so it needs no atomics and gives the same bits every run.
// The output is written in windows of `count` elements from element `base`; the input is bound whole.
// Two variants of each: an element per invocation (`patches`, `patches_adjoint`), and RUN consecutive elements
// per invocation (`*_runs`), which works out a position once per run of channels rather than once per element:
// the integer divisions dominate on a CPU adapter. Both give the same bits.

const RUN: u32 = 16u;

struct Params {
    count: u32,      // elements in this window of the output
    base: u32,       // the window's first element
    batch: u32,
    in_h: u32,
    in_w: u32,
    channels: u32,   // input channels, all groups
    group_channels: u32,
    out_h: u32,
    out_w: u32,
    kh: u32,
    kw: u32,
    stride_h: u32,
    stride_w: u32,
    dilation_h: u32,
    dilation_w: u32,
    pad_top: u32,
    pad_left: u32,
    fill: f32,       // patches: the value read off the input's edge (0, or -inf for max pooling)
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read_write> input: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

// out[i] = the image element patch entry i reads, or `fill` off its edge.
@compute @workgroup_size(WORKGROUP_SIZE)
fn patches(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let j = linear_index(id, groups);
    if (j >= params.count) {
        return;
    }
    var rest = params.base + j;
    let c = rest % params.group_channels;
    rest = rest / params.group_channels;
    let kx = rest % params.kw;
    rest = rest / params.kw;
    let ky = rest % params.kh;
    rest = rest / params.kh;
    let ox = rest % params.out_w;
    rest = rest / params.out_w;
    let oy = rest % params.out_h;
    rest = rest / params.out_h;
    let n = rest % params.batch;
    let g = rest / params.batch;
    // Signed: a tap on the top or left padding lands before row or column 0.
    let y = i32(oy * params.stride_h + ky * params.dilation_h) - i32(params.pad_top);
    let x = i32(ox * params.stride_w + kx * params.dilation_w) - i32(params.pad_left);
    var value = params.fill;
    if (y >= 0 && y < i32(params.in_h) && x >= 0 && x < i32(params.in_w)) {
        let pixel = (n * params.in_h + u32(y)) * params.in_w + u32(x);
        value = input[pixel * params.channels + g * params.group_channels + c];
    }
    out[j] = value;
}

// out[i] = the sum of the patch entries (bound as `input`) read from image element i, taps in row-major order.
@compute @workgroup_size(WORKGROUP_SIZE)
fn patches_adjoint(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let j = linear_index(id, groups);
    if (j >= params.count) {
        return;
    }
    var rest = params.base + j;
    let channel = rest % params.channels;
    rest = rest / params.channels;
    let x = rest % params.in_w;
    rest = rest / params.in_w;
    let y = rest % params.in_h;
    let n = rest / params.in_h;
    let g = channel / params.group_channels;
    let c = channel % params.group_channels;
    var total = 0.0;
    for (var ky = 0u; ky < params.kh; ky++) {
        // The output row whose tap ky reads row y: oy·stride = y + pad_top − ky·dilation, if whole.
        let from_top = i32(y + params.pad_top) - i32(ky * params.dilation_h);
        if (from_top < 0 || u32(from_top) % params.stride_h != 0u) {
            continue;
        }
        let oy = u32(from_top) / params.stride_h;
        if (oy >= params.out_h) {
            continue;
        }
        for (var kx = 0u; kx < params.kw; kx++) {
            let from_left = i32(x + params.pad_left) - i32(kx * params.dilation_w);
            if (from_left < 0 || u32(from_left) % params.stride_w != 0u) {
                continue;
            }
            let ox = u32(from_left) / params.stride_w;
            if (ox >= params.out_w) {
                continue;
            }
            let position = ((g * params.batch + n) * params.out_h + oy) * params.out_w + ox;
            let tap = ky * params.kw + kx;
            total += input[(position * params.kh * params.kw + tap) * params.group_channels + c];
        }
    }
    out[j] = total;
}

// `patches` for output elements [RUN·i, RUN·i + RUN): a run of channels shares its tap and so its source pixel.
@compute @workgroup_size(WORKGROUP_SIZE)
fn patches_runs(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let first = linear_index(id, groups) * RUN;
    if (first >= params.count) {
        return;
    }
    let last = min(first + RUN, params.count);
    var j = first;
    while (j < last) {
        var rest = params.base + j;
        let c = rest % params.group_channels;
        rest = rest / params.group_channels;
        let kx = rest % params.kw;
        rest = rest / params.kw;
        let ky = rest % params.kh;
        rest = rest / params.kh;
        let ox = rest % params.out_w;
        rest = rest / params.out_w;
        let oy = rest % params.out_h;
        rest = rest / params.out_h;
        let n = rest % params.batch;
        let g = rest / params.batch;
        let end = min(last, j + params.group_channels - c);
        let y = i32(oy * params.stride_h + ky * params.dilation_h) - i32(params.pad_top);
        let x = i32(ox * params.stride_w + kx * params.dilation_w) - i32(params.pad_left);
        if (y >= 0 && y < i32(params.in_h) && x >= 0 && x < i32(params.in_w)) {
            let pixel = (n * params.in_h + u32(y)) * params.in_w + u32(x);
            let source_at = pixel * params.channels + g * params.group_channels + c;
            for (var k = j; k < end; k++) {
                out[k] = input[source_at + (k - j)];
            }
        } else {
            for (var k = j; k < end; k++) {
                out[k] = params.fill;
            }
        }
        j = end;
    }
}

// `patches_adjoint` for image elements [RUN·i, RUN·i + RUN): a run of channels of one pixel and group shares its
// taps, each summed into the run's outputs in the same order as the element variant sums them.
@compute @workgroup_size(WORKGROUP_SIZE)
fn patches_adjoint_runs(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let first = linear_index(id, groups) * RUN;
    if (first >= params.count) {
        return;
    }
    let last = min(first + RUN, params.count);
    var j = first;
    while (j < last) {
        var rest = params.base + j;
        let channel = rest % params.channels;
        rest = rest / params.channels;
        let x = rest % params.in_w;
        rest = rest / params.in_w;
        let y = rest % params.in_h;
        let n = rest / params.in_h;
        let g = channel / params.group_channels;
        let c = channel % params.group_channels;
        let end = min(last, j + params.group_channels - c);
        for (var k = j; k < end; k++) {
            out[k] = 0.0;
        }
        for (var ky = 0u; ky < params.kh; ky++) {
            let from_top = i32(y + params.pad_top) - i32(ky * params.dilation_h);
            if (from_top < 0 || u32(from_top) % params.stride_h != 0u) {
                continue;
            }
            let oy = u32(from_top) / params.stride_h;
            if (oy >= params.out_h) {
                continue;
            }
            for (var kx = 0u; kx < params.kw; kx++) {
                let from_left = i32(x + params.pad_left) - i32(kx * params.dilation_w);
                if (from_left < 0 || u32(from_left) % params.stride_w != 0u) {
                    continue;
                }
                let ox = u32(from_left) / params.stride_w;
                if (ox >= params.out_w) {
                    continue;
                }
                let position = ((g * params.batch + n) * params.out_h + oy) * params.out_w + ox;
                let tap = ky * params.kw + kx;
                let source_at = (position * params.kh * params.kw + tap) * params.group_channels + c;
                for (var k = j; k < end; k++) {
                    out[k] += input[source_at + (k - j)];
                }
            }
        }
        j = end;
    }
}
