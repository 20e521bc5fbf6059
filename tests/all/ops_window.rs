//! Convolutions and pooling (`Tensor::conv2d`, `conv1d`, `conv2d_transpose`, `max_pool2d`, `avg_pool2d` and
//! their tape forms) against f64 references built from this file's own window geometry (TensorFlow's rules):
//! forward values, image and kernel gradients, at stride 2 over odd sizes, dilation 2, groups and depthwise,
//! "same" padding with even kernels, explicit padding, batch 1 and 1×1 kernels. Outputs start NaN-filled.

use std::sync::Arc;

use crate::common::{
    error_against_magnitude, per_backend, vulkan_only, weighted_cost, Backend, Rng,
};
use wgcompute::{
    Conv1dOptions, Conv2dOptions, Error, GradientTape, Padding, Padding1d, Session, Tensor,
};

const TOLERANCE: f64 = 1e-5;

fn upload(session: &Session, data: &[f32], shape: &[usize]) -> Arc<Tensor> {
    Arc::new(session.upload(data, shape).expect("upload"))
}

/// (output size, padding before) along one axis, as TensorFlow computes them.
fn axis_geometry(
    size: usize,
    window: usize,
    stride: usize,
    dilation: usize,
    padding: Padding,
    axis: usize,
) -> (usize, usize) {
    let reach = (window - 1) * dilation + 1;
    match padding {
        Padding::Valid => ((size - reach) / stride + 1, 0),
        Padding::Same => {
            let out = size.div_ceil(stride);
            let total = ((out - 1) * stride + reach).saturating_sub(size);
            (out, total / 2)
        }
        Padding::Explicit(pads) => {
            let [before, after] = pads[axis];
            ((size + before + after - reach) / stride + 1, before)
        }
    }
}

/// One convolution's shapes.
#[derive(Clone, Copy, Debug)]
struct Case {
    image: [usize; 4],
    window: [usize; 2],
    out_channels: usize,
    options: Conv2dOptions,
}

impl Case {
    fn new(
        image: [usize; 4],
        window: [usize; 2],
        out_channels: usize,
        stride: [usize; 2],
        dilation: [usize; 2],
        padding: Padding,
        groups: usize,
    ) -> Case {
        Case {
            image,
            window,
            out_channels,
            options: Conv2dOptions {
                stride,
                padding,
                dilation,
                groups,
            },
        }
    }

    fn kernel_shape(&self) -> [usize; 4] {
        let [kh, kw] = self.window;
        [
            kh,
            kw,
            self.image[3] / self.options.groups,
            self.out_channels,
        ]
    }

    fn output_hw(&self) -> ([usize; 2], [usize; 2]) {
        let o = &self.options;
        let (oh, top) = axis_geometry(
            self.image[1],
            self.window[0],
            o.stride[0],
            o.dilation[0],
            o.padding,
            0,
        );
        let (ow, left) = axis_geometry(
            self.image[2],
            self.window[1],
            o.stride[1],
            o.dilation[1],
            o.padding,
            1,
        );
        ([oh, ow], [top, left])
    }

    fn output_shape(&self) -> [usize; 4] {
        let ([oh, ow], _) = self.output_hw();
        [self.image[0], oh, ow, self.out_channels]
    }

    /// Every product of the convolution: (output element, image element, kernel element).
    fn terms(&self) -> Vec<(usize, usize, usize)> {
        let [n, h, w, c] = self.image;
        let [kh, kw] = self.window;
        let ([oh, ow], [top, left]) = self.output_hw();
        let o = &self.options;
        let cg = c / o.groups;
        let og = self.out_channels / o.groups;
        let mut terms = Vec::new();
        for b in 0..n {
            for oy in 0..oh {
                for ox in 0..ow {
                    for out in 0..self.out_channels {
                        let g = out / og;
                        let out_index = ((b * oh + oy) * ow + ox) * self.out_channels + out;
                        for ky in 0..kh {
                            let iy = (oy * o.stride[0] + ky * o.dilation[0]) as i64 - top as i64;
                            for kx in 0..kw {
                                let ix =
                                    (ox * o.stride[1] + kx * o.dilation[1]) as i64 - left as i64;
                                if iy < 0 || ix < 0 || iy >= h as i64 || ix >= w as i64 {
                                    continue;
                                }
                                for ci in 0..cg {
                                    let image_index =
                                        ((b * h + iy as usize) * w + ix as usize) * c + g * cg + ci;
                                    let kernel_index =
                                        ((ky * kw + kx) * cg + ci) * self.out_channels + out;
                                    terms.push((out_index, image_index, kernel_index));
                                }
                            }
                        }
                    }
                }
            }
        }
        terms
    }
}

/// (y, |terms| per element) of Σ a[from]·b[by] into `to`.
fn products(
    terms: impl Iterator<Item = (usize, usize, usize)>,
    a: &[f32],
    b: &[f32],
    len: usize,
) -> (Vec<f64>, Vec<f64>) {
    let (mut value, mut magnitude) = (vec![0.0; len], vec![0.0; len]);
    for (to, from, by) in terms {
        let term = f64::from(a[from]) * f64::from(b[by]);
        value[to] += term;
        magnitude[to] += term.abs();
    }
    (value, magnitude)
}

fn expect_close(label: &str, got: &[f32], (want, magnitude): &(Vec<f64>, Vec<f64>)) {
    let error = error_against_magnitude(got, want, magnitude);
    assert!(
        error < TOLERANCE,
        "{label}: error {error:e} (first got {:?}, want {:?})",
        &got[..got.len().min(4)],
        &want[..want.len().min(4)]
    );
}

fn cases() -> Vec<Case> {
    vec![
        Case::new([1, 1, 1, 1], [1, 1], 1, [1, 1], [1, 1], Padding::Valid, 1),
        Case::new([2, 7, 5, 3], [3, 3], 4, [2, 2], [1, 1], Padding::Same, 1),
        Case::new([1, 9, 8, 2], [2, 2], 3, [1, 1], [1, 1], Padding::Same, 1),
        Case::new([3, 8, 9, 4], [3, 2], 6, [1, 2], [2, 1], Padding::Valid, 2),
        Case::new(
            [2, 6, 6, 4],
            [3, 3],
            8,
            [1, 1],
            [1, 1],
            Padding::Explicit([[1, 0], [2, 1]]),
            4,
        ),
        Case::new([1, 5, 5, 3], [1, 1], 5, [2, 2], [1, 1], Padding::Valid, 1),
        Case::new([2, 11, 13, 5], [4, 4], 7, [3, 2], [2, 2], Padding::Same, 1),
        Case::new([4, 17, 17, 8], [3, 3], 17, [1, 1], [1, 1], Padding::Same, 1),
        // More channels than a run of the `runs` variants (16), whole and in groups that split runs.
        Case::new([2, 5, 6, 37], [3, 3], 5, [2, 1], [1, 1], Padding::Same, 1),
        Case::new([1, 6, 5, 40], [2, 3], 6, [1, 1], [1, 2], Padding::Valid, 2),
    ]
}

per_backend!(conv2d_forward_and_gradients_match_f64, "window": runs, elements);
fn conv2d_forward_and_gradients_match_f64(backend: &Backend, variant: &str) {
    let mut rng = Rng::fresh("conv2d");
    let session = backend.poisoned_with("window", variant);
    for case in cases() {
        let label = format!("{case:?}");
        let (image_len, kernel_len) = (
            case.image.iter().product(),
            case.kernel_shape().iter().product(),
        );
        let out_len: usize = case.output_shape().iter().product();
        let x = rng.vec(image_len, -1.0, 1.0);
        let k = rng.vec(kernel_len, -1.0, 1.0);
        let weights = rng.vec(out_len, -1.0, 1.0);
        let (xt, kt) = (
            upload(&session, &x, &case.image),
            upload(&session, &k, &case.kernel_shape()),
        );
        let terms = case.terms();

        let eager = xt.conv2d(&kt, &case.options).expect("conv2d");
        assert_eq!(eager.shape(), &case.output_shape(), "{label}");
        let got = eager.to_vec().expect("read");
        let want = products(terms.iter().map(|&(o, i, k)| (o, i, k)), &x, &k, out_len);
        expect_close(&format!("{label} forward"), &got, &want);

        let (taped, gradients) =
            weighted_cost(&session, &[xt.clone(), kt.clone()], &weights, |vars| {
                vars[0].conv2d(&vars[1], &case.options)
            })
            .expect("conv2d on the tape");
        assert_eq!(
            bits(&taped),
            bits(&got),
            "{label}: the tape's forward is the eager one"
        );
        let dx = products(
            terms.iter().map(|&(o, i, k)| (i, o, k)),
            &weights,
            &k,
            image_len,
        );
        expect_close(&format!("{label} image gradient"), &gradients[0], &dx);
        let dk = products(
            terms.iter().map(|&(o, i, k)| (k, o, i)),
            &weights,
            &x,
            kernel_len,
        );
        expect_close(&format!("{label} kernel gradient"), &gradients[1], &dk);
    }
}

vulkan_only!(both_window_variants_give_the_same_bits);
/// The runs of the `runs` variants add each element's taps in the element variant's order.
fn both_window_variants_give_the_same_bits(backend: &Backend) {
    let mut rng = Rng::fresh("window variants");
    let sessions = ["runs", "elements"].map(|variant| backend.poisoned_with("window", variant));
    for case in cases() {
        let label = format!("{case:?}");
        let x = rng.vec(case.image.iter().product(), -1.0, 1.0);
        let k = rng.vec(case.kernel_shape().iter().product(), -1.0, 1.0);
        let weights = rng.vec(case.output_shape().iter().product(), -1.0, 1.0);
        let [runs, elements] = sessions.each_ref().map(|session| {
            let inputs = [
                upload(session, &x, &case.image),
                upload(session, &k, &case.kernel_shape()),
            ];
            let (forward, gradients) = weighted_cost(session, &inputs, &weights, |vars| {
                vars[0].conv2d(&vars[1], &case.options)
            })
            .expect("conv2d on the tape");
            (bits(&forward), bits(&gradients[0]), bits(&gradients[1]))
        });
        assert_eq!(runs, elements, "{label}");
    }
}

fn bits(values: &[f32]) -> Vec<u32> {
    values.iter().map(|value| value.to_bits()).collect()
}

per_backend!(conv2d_transpose_is_the_adjoint_of_conv2d, "window": runs, elements);
fn conv2d_transpose_is_the_adjoint_of_conv2d(backend: &Backend, variant: &str) {
    let mut rng = Rng::fresh("conv2d_transpose");
    let session = backend.poisoned_with("window", variant);
    // (transpose input [n, h, w, in], window, out channels, stride, dilation, padding)
    let transposes = [
        ([1, 1, 1, 1], [1, 1], 1, 1, 1, Padding::Valid),
        ([2, 3, 4, 5], [3, 3], 2, 2, 1, Padding::Valid),
        ([1, 5, 3, 2], [4, 4], 3, 2, 1, Padding::Same),
        ([2, 4, 4, 3], [3, 2], 4, 3, 2, Padding::Valid),
        ([3, 6, 7, 4], [2, 3], 5, 1, 2, Padding::Same),
    ];
    for (input, window, out_channels, stride, dilation, padding) in transposes {
        let label =
            format!("{input:?} {window:?} → {out_channels} s{stride} d{dilation} {padding:?}");
        let options = Conv2dOptions {
            stride: [stride; 2],
            padding,
            dilation: [dilation; 2],
            groups: 1,
        };
        // The transpose's output size, as Keras gives it.
        let size = |length: usize, k: usize| {
            let reach = (k - 1) * dilation + 1;
            match padding {
                Padding::Same => length * stride,
                _ => length * stride + reach.saturating_sub(stride),
            }
        };
        let [n, h, w, c] = input;
        let out_shape = [n, size(h, window[0]), size(w, window[1]), out_channels];
        // The convolution whose input gradient it is: image = the transpose's output, kernel [kh, kw, out, in].
        let forward = Case {
            image: out_shape,
            window,
            out_channels: c,
            options,
        };
        assert_eq!(
            forward.output_shape(),
            input,
            "{label}: the test's geometry"
        );
        let kernel_shape = [window[0], window[1], out_channels, c];
        let out_len: usize = out_shape.iter().product();
        let x = rng.vec(input.iter().product(), -1.0, 1.0);
        let k = rng.vec(kernel_shape.iter().product(), -1.0, 1.0);
        let weights = rng.vec(out_len, -1.0, 1.0);
        let (xt, kt) = (
            upload(&session, &x, &input),
            upload(&session, &k, &kernel_shape),
        );
        let terms = forward.terms();
        let got = xt
            .conv2d_transpose(&kt, &options)
            .expect("conv2d_transpose");
        assert_eq!(got.shape(), &out_shape, "{label}");
        let got = got.to_vec().expect("read");
        let want = products(terms.iter().map(|&(o, i, k)| (i, o, k)), &x, &k, out_len);
        expect_close(&format!("{label} forward"), &got, &want);

        let (_, gradients) = weighted_cost(&session, &[xt.clone(), kt.clone()], &weights, |vars| {
            vars[0].conv2d_transpose(&vars[1], &options)
        })
        .expect("conv2d_transpose on the tape");
        let dx = products(
            terms.iter().map(|&(o, i, k)| (o, i, k)),
            &weights,
            &k,
            x.len(),
        );
        expect_close(&format!("{label} input gradient"), &gradients[0], &dx);
        let dk = products(
            terms.iter().map(|&(o, i, k)| (k, i, o)),
            &weights,
            &x,
            k.len(),
        );
        expect_close(&format!("{label} kernel gradient"), &gradients[1], &dk);
    }
}

per_backend!(conv1d_is_conv2d_over_one_row_causal_padding_included, "window": runs, elements);
fn conv1d_is_conv2d_over_one_row_causal_padding_included(backend: &Backend, variant: &str) {
    let mut rng = Rng::fresh("conv1d");
    let session = backend.poisoned_with("window", variant);
    // (batch, width, channels, k, out, stride, dilation, padding, groups)
    let shapes = [
        (1, 1, 1, 1, 1, 1, 1, Padding1d::Valid, 1),
        (2, 13, 4, 3, 6, 2, 1, Padding1d::Same, 2),
        (3, 10, 3, 2, 5, 1, 2, Padding1d::Causal, 1),
        (1, 7, 2, 4, 3, 1, 1, Padding1d::Explicit([2, 1]), 1),
    ];
    for (n, width, c, k, out, stride, dilation, padding, groups) in shapes {
        let label = format!(
            "{:?}",
            (n, width, c, k, out, stride, dilation, padding, groups)
        );
        let options = Conv1dOptions {
            stride,
            padding,
            dilation,
            groups,
        };
        let reach = (k - 1) * dilation;
        let pads = match padding {
            Padding1d::Causal => Padding::Explicit([[0, 0], [reach, 0]]),
            Padding1d::Explicit(sides) => Padding::Explicit([[0, 0], sides]),
            Padding1d::Same => Padding::Same,
            Padding1d::Valid => Padding::Valid,
        };
        let case = Case::new(
            [n, 1, width, c],
            [1, k],
            out,
            [1, stride],
            [1, dilation],
            pads,
            groups,
        );
        let x = rng.vec(n * width * c, -1.0, 1.0);
        let kernel = rng.vec(k * c / groups * out, -1.0, 1.0);
        let xt = upload(&session, &x, &[n, width, c]);
        let kt = upload(&session, &kernel, &[k, c / groups, out]);
        let got = xt.conv1d(&kt, &options).expect("conv1d");
        let [_, _, ow, _] = case.output_shape();
        assert_eq!(got.shape(), &[n, ow, out], "{label}");
        if padding == Padding1d::Causal {
            assert_eq!(ow, width, "{label}: causal keeps the length");
        }
        let got = got.to_vec().expect("read");
        let want = products(case.terms().into_iter(), &x, &kernel, got.len());
        expect_close(&label, &got, &want);
        let tape = GradientTape::new();
        let (xv, kv) = (
            tape.watch_parameter(&xt).expect("watch"),
            tape.watch_parameter(&kt).expect("watch"),
        );
        let y = xv.conv1d(&kv, &options).expect("conv1d on the tape");
        assert!(y.is_traced(), "{label}: conv1d records on the tape");
        assert_eq!(bits(&y.to_vec().expect("read")), bits(&got), "{label}");
    }
}

/// The image elements each output of a pooling window reads, in tap order (row-major).
fn pool_reads(
    image: [usize; 4],
    size: [usize; 2],
    stride: [usize; 2],
    padding: Padding,
) -> (Vec<usize>, Vec<Vec<usize>>) {
    let case = Case::new(
        [image[0], image[1], image[2], 1],
        size,
        1,
        stride,
        [1, 1],
        padding,
        1,
    );
    let [n, oh, ow, _] = case.output_shape();
    let c = image[3];
    let mut reads = vec![Vec::new(); n * oh * ow * c];
    for (out, pixel, _) in case.terms() {
        for channel in 0..c {
            reads[out * c + channel].push(pixel * c + channel);
        }
    }
    (vec![n, oh, ow, c], reads)
}

per_backend!(pooling_forward_and_gradients_match_f64, "window": runs, elements);
fn pooling_forward_and_gradients_match_f64(backend: &Backend, variant: &str) {
    let mut rng = Rng::fresh("pooling");
    let session = backend.poisoned_with("window", variant);
    let shapes = [
        ([1, 1, 1, 1], [1, 1], [1, 1], Padding::Valid),
        ([2, 7, 5, 3], [2, 2], [2, 2], Padding::Valid),
        ([2, 7, 5, 3], [3, 3], [2, 2], Padding::Same),
        ([1, 6, 8, 4], [2, 2], [2, 2], Padding::Same),
        ([3, 9, 9, 2], [3, 2], [1, 3], Padding::Same),
        (
            [1, 5, 6, 3],
            [3, 3],
            [2, 2],
            Padding::Explicit([[1, 2], [0, 1]]),
        ),
    ];
    for (image, size, stride, padding) in shapes {
        let label = format!("{image:?} {size:?} s{stride:?} {padding:?}");
        let (out_shape, reads) = pool_reads(image, size, stride, padding);
        let x = rng.vec(image.iter().product(), -2.0, 2.0);
        let weights = rng.vec(reads.len(), -1.0, 1.0);
        let xt = upload(&session, &x, &image);

        // Max: the first maximum in tap order takes the gradient.
        let got = xt.max_pool2d(size, stride, padding).expect("max_pool2d");
        assert_eq!(got.shape(), &out_shape[..], "{label}");
        let got = got.to_vec().expect("read");
        let winners: Vec<usize> = reads
            .iter()
            .map(|read| {
                *read
                    .iter()
                    .fold(&read[0], |best, i| if x[*i] > x[*best] { i } else { best })
            })
            .collect();
        let want: Vec<f32> = winners.iter().map(|&i| x[i]).collect();
        assert_eq!(bits(&got), bits(&want), "{label}: max pooling");
        let (taped, gradients) =
            weighted_cost(&session, std::slice::from_ref(&xt), &weights, |vars| {
                vars[0].max_pool2d(size, stride, padding)
            })
            .expect("max_pool2d on the tape");
        assert_eq!(
            bits(&taped),
            bits(&want),
            "{label}: max pooling on the tape"
        );
        let mut dx = vec![0.0f64; x.len()];
        let mut magnitude = vec![0.0f64; x.len()];
        for (out, &i) in winners.iter().enumerate() {
            dx[i] += f64::from(weights[out]);
            magnitude[i] += f64::from(weights[out]).abs();
        }
        expect_close(
            &format!("{label} max gradient"),
            &gradients[0],
            &(dx, magnitude),
        );

        // Average: padding not counted.
        let got = xt
            .avg_pool2d(size, stride, padding)
            .expect("avg_pool2d")
            .to_vec()
            .expect("read");
        let mean = |read: &Vec<usize>, value: &dyn Fn(usize) -> f64| {
            read.iter().map(|&i| value(i)).sum::<f64>() / read.len() as f64
        };
        let want: Vec<f64> = reads
            .iter()
            .map(|read| mean(read, &|i| f64::from(x[i])))
            .collect();
        let magnitude: Vec<f64> = reads
            .iter()
            .map(|read| mean(read, &|i| f64::from(x[i].abs())))
            .collect();
        expect_close(&format!("{label} average"), &got, &(want, magnitude));
        let (_, gradients) = weighted_cost(&session, std::slice::from_ref(&xt), &weights, |vars| {
            vars[0].avg_pool2d(size, stride, padding)
        })
        .expect("avg_pool2d on the tape");
        let mut dx = vec![0.0f64; x.len()];
        let mut magnitude = vec![0.0f64; x.len()];
        for (out, read) in reads.iter().enumerate() {
            for &i in read {
                dx[i] += f64::from(weights[out]) / read.len() as f64;
                magnitude[i] += f64::from(weights[out]).abs() / read.len() as f64;
            }
        }
        expect_close(
            &format!("{label} average gradient"),
            &gradients[0],
            &(dx, magnitude),
        );
    }
    // A NaN in a window is its maximum.
    let mut x = vec![1.0f32; 16];
    x[5] = f32::NAN;
    let xt = upload(&session, &x, &[1, 4, 4, 1]);
    let got = xt
        .max_pool2d([2, 2], [2, 2], Padding::Valid)
        .expect("max_pool2d")
        .to_vec()
        .expect("read");
    assert!(
        got[0].is_nan() && got[1..].iter().all(|&v| v == 1.0),
        "{got:?}"
    );
}

per_backend!(global_avg_pool2d_is_the_mean_over_height_and_width);
fn global_avg_pool2d_is_the_mean_over_height_and_width(backend: &Backend) {
    let mut rng = Rng::fresh("global_avg_pool2d");
    let session = backend.poisoned();
    let (n, h, w, c) = (3, 5, 7, 4);
    let x = rng.vec(n * h * w * c, -1.0, 1.0);
    let got = upload(&session, &x, &[n, h, w, c])
        .global_avg_pool2d()
        .expect("pool");
    assert_eq!(got.shape(), &[n, c]);
    let got = got.to_vec().expect("read");
    let mut want = vec![0.0f64; n * c];
    let mut magnitude = vec![0.0f64; n * c];
    for (i, &value) in x.iter().enumerate() {
        let (b, channel) = (i / (h * w * c), i % c);
        want[b * c + channel] += f64::from(value) / (h * w) as f64;
        magnitude[b * c + channel] += f64::from(value.abs()) / (h * w) as f64;
    }
    expect_close("global average", &got, &(want, magnitude));
}

per_backend!(bad_shapes_options_and_dtypes_are_errors_and_the_session_goes_on);
fn bad_shapes_options_and_dtypes_are_errors_and_the_session_goes_on(backend: &Backend) {
    let session = backend.poisoned();
    let image = session.rand(&[1, 4, 4, 2], 1).expect("image");
    let kernel = session.rand(&[3, 3, 2, 4], 2).expect("kernel");
    let shape_error = |result: wgcompute::Result<Tensor>, what: &str| match result {
        Err(Error::Shape { .. }) => {}
        other => panic!(
            "{what}: expected a shape error, got {:?}",
            other.map(|t| t.shape().to_vec())
        ),
    };
    let argument_error = |result: wgcompute::Result<Tensor>, what: &str| match result {
        Err(Error::InvalidArgument { .. }) => {}
        other => panic!(
            "{what}: expected an argument error, got {:?}",
            other.map(|t| t.shape().to_vec())
        ),
    };
    let default = Conv2dOptions::default();
    let flat = session.rand(&[4, 4, 2], 3).expect("flat");
    shape_error(flat.conv2d(&kernel, &default), "a rank-3 image");
    let wrong_in = session.rand(&[3, 3, 3, 4], 4).expect("kernel");
    shape_error(image.conv2d(&wrong_in, &default), "kernel channels");
    let huge = session.rand(&[5, 5, 2, 4], 5).expect("kernel");
    shape_error(image.conv2d(&huge, &default), "a window past the image");
    let zero_stride = Conv2dOptions {
        stride: [0, 1],
        ..default
    };
    argument_error(image.conv2d(&kernel, &zero_stride), "stride 0");
    let three_groups = Conv2dOptions {
        groups: 3,
        ..default
    };
    shape_error(
        image.conv2d(&kernel, &three_groups),
        "channels that do not split into groups",
    );
    let grouped = Conv2dOptions {
        groups: 2,
        ..default
    };
    let transpose_kernel = session.rand(&[3, 3, 4, 2], 6).expect("kernel");
    argument_error(
        image.conv2d_transpose(&transpose_kernel, &grouped),
        "a grouped transpose",
    );
    let ids = session.upload_u32(&[1; 32], &[1, 4, 4, 2]).expect("ids");
    assert!(matches!(
        ids.conv2d(&kernel, &default),
        Err(Error::DType { .. })
    ));
    assert!(matches!(
        ids.max_pool2d([2, 2], [2, 2], Padding::Valid),
        Err(Error::DType { .. })
    ));
    argument_error(
        image.avg_pool2d([2, 2], [1, 1], Padding::Explicit([[2, 0], [0, 0]])),
        "padding as large as the window",
    );
    shape_error(
        image.max_pool2d([5, 5], [1, 1], Padding::Valid),
        "a pool window past the image",
    );
    // The session still works.
    let out = image
        .conv2d(
            &kernel,
            &Conv2dOptions {
                padding: Padding::Same,
                ..default
            },
        )
        .expect("conv2d");
    assert_eq!(out.shape(), &[1, 4, 4, 4]);
    assert!(out.to_vec().expect("read").iter().all(|v| v.is_finite()));
}
