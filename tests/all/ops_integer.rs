//! The Array API's integer dtypes through the float ops' names: sum, prod, max, min, argmax, argmin,
//! cumulative_sum and cumulative_prod of int32 and uint32 (and bool where the standard allows it), exact and
//! wrapping as NumPy's fixed-width integers, against references from Rust's wrapping arithmetic; floor, ceil,
//! trunc and round of an integer (itself) and sign. Inputs mix the extremes (INT32_MIN, INT32_MAX, UINT32_MAX,
//! 0, ±1) with ties and random words, at awkward shapes (0 elements, 1, primes, 2^16 + 1 along the reduced or
//! scanned axis, beyond what one invocation may loop over on llvmpipe). Sessions poison their outputs.

use crate::common::{per_backend, Backend, Rng};
use wgcompute::{DType, Error, ReduceOp, Session, Tensor};

const LONG: usize = (1 << 16) + 1;

fn upload(session: &Session, dtype: DType, words: &[u32], shape: &[usize]) -> Tensor {
    match dtype {
        DType::U32 => session.upload_u32(words, shape),
        DType::I32 => {
            let values: Vec<i32> = words.iter().map(|&w| w as i32).collect();
            session.upload_i32(&values, shape)
        }
        DType::Bool => {
            let values: Vec<bool> = words.iter().map(|&w| w != 0).collect();
            session.upload_bool(&values, shape)
        }
        DType::F32 => unreachable!("integer tests"),
    }
    .expect("upload")
}

fn read(tensor: &Tensor) -> Vec<u32> {
    match tensor.dtype() {
        DType::I32 => tensor
            .to_vec_i32()
            .expect("read i32")
            .iter()
            .map(|&v| v as u32)
            .collect(),
        DType::U32 => tensor.to_vec_u32().expect("read u32"),
        other => panic!("an integer result, not {other}"),
    }
}

/// Words for `dtype`: the extremes, ties and random words.
fn words(rng: &mut Rng, dtype: DType, len: usize) -> Vec<u32> {
    let special = [0, 1, u32::MAX, 0x8000_0000, 0x7fff_ffff, 2, 0xffff_fffe, 3];
    (0..len)
        .map(|_| {
            let word = match rng.next_u64() % 4 {
                0 => special[(rng.next_u64() % special.len() as u64) as usize],
                1 => (rng.next_u64() % 5) as u32,
                2 => (rng.next_u64() % 5) as u32 ^ u32::MAX,
                _ => rng.next_u64() as u32,
            };
            if dtype == DType::Bool {
                word & 1
            } else {
                word
            }
        })
        .collect()
}

/// The reference of `op` over two words of `dtype`.
fn combine(op: ReduceOp, signed: bool, a: u32, b: u32) -> u32 {
    match op {
        ReduceOp::Sum => a.wrapping_add(b),
        ReduceOp::Prod => a.wrapping_mul(b),
        ReduceOp::Max if signed => (a as i32).max(b as i32) as u32,
        ReduceOp::Min if signed => (a as i32).min(b as i32) as u32,
        ReduceOp::Max => a.max(b),
        ReduceOp::Min => a.min(b),
        _ => unreachable!("{op:?} takes floats only"),
    }
}

fn identity(op: ReduceOp, signed: bool) -> u32 {
    match op {
        ReduceOp::Sum => 0,
        ReduceOp::Prod => 1,
        ReduceOp::Max if signed => 0x8000_0000,
        ReduceOp::Min if signed => 0x7fff_ffff,
        ReduceOp::Max => 0,
        _ => u32::MAX,
    }
}

/// The shape's row-major strides.
fn strides(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![1; shape.len()];
    for axis in (0..shape.len().saturating_sub(1)).rev() {
        strides[axis] = strides[axis + 1] * shape[axis + 1];
    }
    strides
}

/// The output element each input element of `shape` falls in, reduced over `axes` (kept as 1s).
fn output_index(shape: &[usize], axes: &[usize], element: usize) -> usize {
    let kept: Vec<usize> = (0..shape.len())
        .map(|axis| if axes.contains(&axis) { 1 } else { shape[axis] })
        .collect();
    let (from, to) = (strides(shape), strides(&kept));
    (0..shape.len())
        .filter(|axis| !axes.contains(axis))
        .map(|axis| (element / from[axis]) % shape[axis] * to[axis])
        .sum()
}

fn reduce_reference(
    op: ReduceOp,
    signed: bool,
    words: &[u32],
    shape: &[usize],
    axes: &[usize],
) -> Vec<u32> {
    let outputs: usize = (0..shape.len())
        .filter(|axis| !axes.contains(axis))
        .map(|axis| shape[axis])
        .product();
    let mut out = vec![identity(op, signed); outputs];
    for (element, &word) in words.iter().enumerate() {
        let at = output_index(shape, axes, element);
        out[at] = combine(op, signed, out[at], word);
    }
    out
}

/// The shapes and the axes (single ones and some sets) to reduce them over.
fn cases() -> Vec<(Vec<usize>, Vec<Vec<usize>>)> {
    vec![
        (vec![0], vec![vec![0]]),
        (vec![1], vec![vec![0]]),
        (vec![7], vec![vec![0]]),
        (vec![2, 0, 3], vec![vec![1], vec![0, 1]]),
        (
            vec![3, 5, 2],
            vec![vec![0], vec![1], vec![2], vec![0, 2], vec![0, 1, 2]],
        ),
        (vec![1031, 3], vec![vec![0], vec![1], vec![0, 1]]),
        (vec![LONG], vec![vec![0]]),
        (vec![2, LONG], vec![vec![1], vec![0, 1]]),
        (vec![LONG, 2], vec![vec![0]]),
    ]
}

per_backend!(integer_reductions_are_exact_and_wrap);
fn integer_reductions_are_exact_and_wrap(backend: &Backend) {
    let session = backend.poisoned();
    let mut rng = Rng::fresh("integer_reductions_are_exact_and_wrap");
    let ops = [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min];
    for dtype in [DType::I32, DType::U32, DType::Bool] {
        let signed = dtype == DType::I32;
        for (shape, axes_sets) in cases() {
            let data = words(&mut rng, dtype, shape.iter().product());
            let x = upload(&session, dtype, &data, &shape);
            for op in ops {
                let ordered = matches!(op, ReduceOp::Max | ReduceOp::Min);
                for axes in &axes_sets {
                    let empty = axes.iter().any(|&axis| shape[axis] == 0);
                    for keepdims in [false, true] {
                        let got = x.reduce_axes(op, Some(axes), keepdims);
                        let context =
                            format!("{op:?} {dtype} {shape:?} over {axes:?} keepdims {keepdims}");
                        if dtype == DType::Bool && ordered {
                            assert!(
                                matches!(got, Err(Error::DTypes { .. })),
                                "{context}: {got:?}"
                            );
                            continue;
                        }
                        if ordered && empty {
                            assert!(got.is_err(), "{context}");
                            continue;
                        }
                        let got = got.unwrap_or_else(|error| panic!("{context}: {error}"));
                        let want_dtype = if dtype == DType::Bool {
                            DType::I32
                        } else {
                            dtype
                        };
                        assert_eq!(got.dtype(), want_dtype, "{context}");
                        let want = reduce_reference(op, signed, &data, &shape, axes);
                        let got_words = read(&got);
                        assert_eq!(got_words.len(), want.len(), "{context}");
                        if let Some(at) = (0..want.len()).find(|&at| got_words[at] != want[at]) {
                            panic!(
                                "{context} at {at}: {:#x}, want {:#x}",
                                got_words[at], want[at]
                            );
                        }
                    }
                }
                if axes_sets.len() == 1 && shape.len() == 1 && !(ordered && shape[0] == 0) {
                    // One axis and all: the methods of the table's rows.
                    if dtype == DType::Bool && ordered {
                        continue;
                    }
                    let all = x.reduce(op, None).expect("over all");
                    assert_eq!(
                        read(&all),
                        reduce_reference(op, signed, &data, &shape, &[0]),
                        "{op:?} {dtype} {shape:?} over all"
                    );
                }
            }
        }
    }
    session.close();
}

fn arg_reference(
    largest: bool,
    signed: bool,
    words: &[u32],
    shape: &[usize],
    axis: usize,
) -> Vec<u32> {
    let (outer, len, inner): (usize, usize, usize) = (
        shape[..axis].iter().product(),
        shape[axis],
        shape[axis + 1..].iter().product(),
    );
    let key = |word: u32| {
        if signed {
            i64::from(word as i32)
        } else {
            i64::from(word)
        }
    };
    let mut out = Vec::new();
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| (o * len + k) * inner + i;
            let mut best = 0;
            for k in 1..len {
                let (x, b) = (key(words[at(k)]), key(words[at(best)]));
                if (largest && x > b) || (!largest && x < b) {
                    best = k;
                }
            }
            out.push(best as u32);
        }
    }
    out
}

per_backend!(integer_argmax_and_argmin_give_the_first_extreme);
fn integer_argmax_and_argmin_give_the_first_extreme(backend: &Backend) {
    let session = backend.poisoned();
    let mut rng = Rng::fresh("integer_argmax_and_argmin_give_the_first_extreme");
    for dtype in [DType::I32, DType::U32] {
        let signed = dtype == DType::I32;
        for (shape, _) in cases() {
            let data = words(&mut rng, dtype, shape.iter().product());
            let x = upload(&session, dtype, &data, &shape);
            for largest in [true, false] {
                let arg = |axis| {
                    if largest {
                        x.argmax(axis)
                    } else {
                        x.argmin(axis)
                    }
                };
                for axis in 0..shape.len() {
                    let context = format!("largest {largest} {dtype} {shape:?} axis {axis}");
                    if shape[axis] == 0 {
                        assert!(arg(Some(axis)).is_err(), "{context}");
                        continue;
                    }
                    let got = arg(Some(axis)).unwrap_or_else(|error| panic!("{context}: {error}"));
                    assert_eq!(got.dtype(), DType::U32, "{context}");
                    assert_eq!(
                        read(&got),
                        arg_reference(largest, signed, &data, &shape, axis),
                        "{context}"
                    );
                }
                if !data.is_empty() {
                    let got = arg(None).expect("over all");
                    let flat = arg_reference(largest, signed, &data, &[data.len()], 0);
                    assert_eq!(
                        read(&got),
                        flat,
                        "largest {largest} {dtype} {shape:?} over all"
                    );
                }
            }
        }
        // Ties: every element equal gives 0; an extreme repeated gives its first place.
        let mut tied = vec![5u32; LONG];
        assert_eq!(
            read(
                &upload(&session, dtype, &tied, &[LONG])
                    .argmax(None)
                    .unwrap()
            ),
            [0]
        );
        tied[40_000] = 0x7fff_ffff;
        tied[LONG - 1] = 0x7fff_ffff;
        tied[70] = 0x8000_0000;
        tied[65_000] = 0x8000_0000;
        let x = upload(&session, dtype, &tied, &[LONG]);
        // Signed, INT32_MAX is largest and INT32_MIN smallest; unsigned, 2^31 is largest and 5 smallest.
        let (max_at, min_at) = if signed { (40_000, 70) } else { (70, 0) };
        assert_eq!(read(&x.argmax(None).unwrap()), [max_at], "{dtype}");
        assert_eq!(read(&x.argmin(None).unwrap()), [min_at], "{dtype}");
    }
    let bools = upload(&session, DType::Bool, &[0, 1], &[2]);
    assert!(matches!(bools.argmax(None), Err(Error::DTypes { .. })));
    session.close();
}

fn scan_reference(
    prod: bool,
    words: &[u32],
    shape: &[usize],
    axis: usize,
    initial: bool,
) -> Vec<u32> {
    let (outer, len, inner): (usize, usize, usize) = (
        shape[..axis].iter().product(),
        shape[axis],
        shape[axis + 1..].iter().product(),
    );
    let out_len = len + usize::from(initial);
    let start = u32::from(prod);
    let mut out = vec![0; outer * out_len * inner];
    for o in 0..outer {
        for i in 0..inner {
            let mut acc = start;
            if initial {
                out[(o * out_len) * inner + i] = acc;
            }
            for k in 0..len {
                let x = words[(o * len + k) * inner + i];
                acc = if prod {
                    acc.wrapping_mul(x)
                } else {
                    acc.wrapping_add(x)
                };
                out[(o * out_len + k + usize::from(initial)) * inner + i] = acc;
            }
        }
    }
    out
}

per_backend!(integer_cumulative_sums_and_products_are_exact_and_wrap);
fn integer_cumulative_sums_and_products_are_exact_and_wrap(backend: &Backend) {
    let session = backend.poisoned();
    let mut rng = Rng::fresh("integer_cumulative_sums_and_products_are_exact_and_wrap");
    for dtype in [DType::I32, DType::U32, DType::Bool] {
        for (shape, _) in cases() {
            let mut data = words(&mut rng, dtype, shape.iter().product());
            if dtype != DType::Bool {
                // Mostly ±1 and small factors, so that products do not all wrap to 0 at once.
                for word in data.iter_mut().skip(1).step_by(2) {
                    *word = if *word & 2 == 0 { 1 } else { u32::MAX };
                }
            }
            let x = upload(&session, dtype, &data, &shape);
            for axis in 0..shape.len() {
                for (prod, initial) in [(false, false), (false, true), (true, false), (true, true)]
                {
                    let context =
                        format!("prod {prod} {dtype} {shape:?} axis {axis} initial {initial}");
                    let got = if prod {
                        x.cumulative_prod(Some(axis), initial)
                    } else {
                        x.cumulative_sum(Some(axis), initial)
                    }
                    .unwrap_or_else(|error| panic!("{context}: {error}"));
                    let want_dtype = if dtype == DType::Bool {
                        DType::I32
                    } else {
                        dtype
                    };
                    assert_eq!(got.dtype(), want_dtype, "{context}");
                    let want = scan_reference(prod, &data, &shape, axis, initial);
                    let got_words = read(&got);
                    assert_eq!(got_words.len(), want.len(), "{context}");
                    if let Some(at) = (0..want.len()).find(|&at| got_words[at] != want[at]) {
                        panic!(
                            "{context} at {at}: {:#x}, want {:#x}",
                            got_words[at], want[at]
                        );
                    }
                }
            }
        }
    }
    session.close();
}

per_backend!(rounding_an_integer_gives_itself_and_sign_gives_its_sign);
fn rounding_an_integer_gives_itself_and_sign_gives_its_sign(backend: &Backend) {
    let session = backend.poisoned();
    let mut rng = Rng::fresh("rounding_an_integer_gives_itself_and_sign_gives_its_sign");
    for dtype in [DType::I32, DType::U32] {
        for shape in [vec![0], vec![1], vec![13], vec![3, 0], vec![LONG]] {
            let data = words(&mut rng, dtype, shape.iter().product());
            let x = upload(&session, dtype, &data, &shape);
            for (name, op) in [
                (
                    "floor",
                    Tensor::floor as fn(&Tensor) -> wgcompute::Result<Tensor>,
                ),
                ("ceil", Tensor::ceil),
                ("trunc", Tensor::trunc),
                ("round", Tensor::round),
            ] {
                let got =
                    op(&x).unwrap_or_else(|error| panic!("{name} {dtype} {shape:?}: {error}"));
                assert_eq!((got.dtype(), got.shape()), (dtype, &shape[..]), "{name}");
                assert_eq!(read(&got), data, "{name} {dtype} {shape:?}");
            }
            let sign = x
                .sign()
                .unwrap_or_else(|error| panic!("sign {dtype} {shape:?}: {error}"));
            assert_eq!((sign.dtype(), sign.shape()), (dtype, &shape[..]), "sign");
            let want: Vec<u32> = data
                .iter()
                .map(|&w| {
                    if dtype == DType::I32 {
                        (w as i32).signum() as u32
                    } else {
                        u32::from(w != 0)
                    }
                })
                .collect();
            assert_eq!(read(&sign), want, "sign {dtype} {shape:?}");
        }
    }
    let bools = upload(&session, DType::Bool, &[0, 1], &[2]);
    assert!(bools.floor().is_err() && bools.sign().is_err());
    session.close();
}

per_backend!(the_mean_of_integers_is_refused_naming_the_standard_and_astype);
fn the_mean_of_integers_is_refused_naming_the_standard_and_astype(backend: &Backend) {
    let session = backend.poisoned();
    for dtype in [DType::I32, DType::U32, DType::Bool] {
        let x = upload(&session, dtype, &[1, 0, 1], &[3]);
        let error = x.mean(None).expect_err("mean of integers");
        let message = error.to_string();
        assert!(matches!(error, Error::DTypes { .. }), "{message}");
        assert!(
            message.contains("floating-point") && message.contains("astype"),
            "{message}"
        );
        assert!(x.reduce_axes(ReduceOp::Mean, None, true).is_err());
    }
    session.close();
}
