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
    // The adjoint's taps this pass sums, [ky_begin, ky_end) × [kx_begin, kx_end), in row-major order: a pass
    // after the first goes on from the sums the earlier ones left in `out` (see PASS_ITERATIONS in
    // src/kernels/plan.rs), so the bits are those of one pass over every tap.
    ky_begin: u32,
    ky_end: u32,
    kx_begin: u32,
    kx_end: u32,
}

fn first_taps() -> bool {
    return params.ky_begin == 0u && params.kx_begin == 0u;
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read_write> input: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

// Where patch entry `entry` reads from: its channel within its group, and the input element, or -1 off the
// input's edge.
struct PatchSource {
    c: u32,
    at: i32,
}

fn patch_source(entry: u32) -> PatchSource {
    var rest = entry;
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
    if (y >= 0 && y < i32(params.in_h) && x >= 0 && x < i32(params.in_w)) {
        let pixel = (n * params.in_h + u32(y)) * params.in_w + u32(x);
        return PatchSource(c, i32(pixel * params.channels + g * params.group_channels + c));
    }
    return PatchSource(c, -1);
}

// An image element's coordinates, its channel split into group and channel within the group.
struct ImageElement {
    n: u32,
    y: u32,
    x: u32,
    g: u32,
    c: u32,
}

fn image_element(element: u32) -> ImageElement {
    var rest = element;
    let channel = rest % params.channels;
    rest = rest / params.channels;
    let x = rest % params.in_w;
    rest = rest / params.in_w;
    let y = rest % params.in_h;
    let n = rest / params.in_h;
    return ImageElement(n, y, x, channel / params.group_channels, channel % params.group_channels);
}

// Along one axis, the output position whose tap k reads input coordinate `at` (position·stride = at + pad −
// k·dilation, if whole and in range), or -1 where none does.
fn tap_output(at: u32, pad: u32, k: u32, dilation: u32, stride: u32, size: u32) -> i32 {
    let from_start = i32(at + pad) - i32(k * dilation);
    if (from_start < 0 || u32(from_start) % stride != 0u) {
        return -1;
    }
    let position = u32(from_start) / stride;
    if (position >= size) {
        return -1;
    }
    return i32(position);
}

// The patch entry that tap (ky, kx) of output position (oy, ox) reads from image element `e`.
fn tap_entry(e: ImageElement, oy: u32, ox: u32, ky: u32, kx: u32) -> u32 {
    let position = ((e.g * params.batch + e.n) * params.out_h + oy) * params.out_w + ox;
    return (position * params.kh * params.kw + ky * params.kw + kx) * params.group_channels + e.c;
}

// out[i] = the image element patch entry i reads, or `fill` off its edge.
@compute @workgroup_size(WORKGROUP_SIZE)
fn patches(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let j = linear_index(id, groups);
    if (j >= params.count) {
        return;
    }
    let source = patch_source(params.base + j);
    var value = params.fill;
    if (source.at >= 0) {
        value = input[source.at];
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
    let e = image_element(params.base + j);
    var total = 0.0;
    if (!first_taps()) {
        total = out[j];
    }
    for (var ky = params.ky_begin; ky < params.ky_end; ky++) {
        let oy = tap_output(e.y, params.pad_top, ky, params.dilation_h, params.stride_h, params.out_h);
        if (oy < 0) {
            continue;
        }
        for (var kx = params.kx_begin; kx < params.kx_end; kx++) {
            let ox = tap_output(e.x, params.pad_left, kx, params.dilation_w, params.stride_w, params.out_w);
            if (ox < 0) {
                continue;
            }
            total += input[tap_entry(e, u32(oy), u32(ox), ky, kx)];
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
        let source = patch_source(params.base + j);
        let end = min(last, j + params.group_channels - source.c);
        if (source.at >= 0) {
            for (var k = j; k < end; k++) {
                out[k] = input[u32(source.at) + (k - j)];
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
        let e = image_element(params.base + j);
        let end = min(last, j + params.group_channels - e.c);
        if (first_taps()) {
            for (var k = j; k < end; k++) {
                out[k] = 0.0;
            }
        }
        for (var ky = params.ky_begin; ky < params.ky_end; ky++) {
            let oy = tap_output(e.y, params.pad_top, ky, params.dilation_h, params.stride_h, params.out_h);
            if (oy < 0) {
                continue;
            }
            for (var kx = params.kx_begin; kx < params.kx_end; kx++) {
                let ox = tap_output(e.x, params.pad_left, kx, params.dilation_w, params.stride_w, params.out_w);
                if (ox < 0) {
                    continue;
                }
                let entry = tap_entry(e, u32(oy), u32(ox), ky, kx);
                for (var k = j; k < end; k++) {
                    out[k] += input[entry + (k - j)];
                }
            }
        }
        j = end;
    }
}
