//! The logic ops and the dtypes beside float32, against references written here from Rust's own arithmetic
//! (IEEE comparisons, wrapping integers, NumPy's shifts, floor division and remainder): every comparison for
//! every dtype with NaN, infinities, ±0 and the integer extremes; logical and bitwise ops; integer arithmetic
//! through the float ops' names; isnan/isinf/isfinite; every cast; where (and its gradient); all, any and
//! count_nonzero over every set of axes; and the promotion table, every pair of dtypes. Shapes broadcast and are
//! awkward (0 elements, 1, primes, just over a workgroup of 256, over a million). Sessions poison their outputs
//! (NaN bits), and bool results are read as their words, so an element a kernel fails to write fails.

use crate::common::{per_backend, vulkan_only, Backend, Rng};
use wgcompute::{
    DType, Error, GradientTape, LogicBinaryOp, LogicUnaryOp, Session, Tensor, TruthReduction,
};

// --- values and their host copies ---

/// A tensor's contents as words, whatever its dtype, with the dtype.
#[derive(Clone, Debug, PartialEq)]
struct Words {
    dtype: DType,
    shape: Vec<usize>,
    words: Vec<u32>,
}

fn read(tensor: &Tensor) -> Words {
    let words = match tensor.dtype() {
        DType::F32 => tensor
            .to_vec()
            .expect("read f32")
            .iter()
            .map(|v| v.to_bits())
            .collect(),
        // A bool's words read as they are (through a bit-keeping cast), so that a poisoned, unwritten element
        // shows as a word that is neither 0 nor 1.
        DType::Bool => tensor
            .cast(DType::U32)
            .and_then(|words| words.to_vec_u32())
            .expect("read bool words"),
        DType::U32 => tensor.to_vec_u32().expect("read u32"),
        DType::I32 => tensor
            .to_vec_i32()
            .expect("read i32")
            .iter()
            .map(|&v| v as u32)
            .collect(),
    };
    Words {
        dtype: tensor.dtype(),
        shape: tensor.shape().to_vec(),
        words,
    }
}

fn upload(session: &Session, dtype: DType, words: &[u32], shape: &[usize]) -> Tensor {
    match dtype {
        DType::F32 => {
            let values: Vec<f32> = words.iter().map(|&w| f32::from_bits(w)).collect();
            session.upload(&values, shape)
        }
        DType::U32 => session.upload_u32(words, shape),
        DType::I32 => {
            let values: Vec<i32> = words.iter().map(|&w| w as i32).collect();
            session.upload_i32(&values, shape)
        }
        DType::Bool => {
            let values: Vec<bool> = words.iter().map(|&w| w != 0).collect();
            session.upload_bool(&values, shape)
        }
    }
    .expect("upload")
}

/// Random words of `dtype`, often its special values (NaN, ±inf, ±0, the integer extremes) and often equal to
/// one another, so that every comparison meets ties.
fn random_words(rng: &mut Rng, dtype: DType, len: usize) -> Vec<u32> {
    (0..len)
        .map(|_| {
            let pick = rng.next_u64() % 16;
            match dtype {
                DType::F32 => {
                    let specials = [
                        f32::NAN,
                        f32::INFINITY,
                        f32::NEG_INFINITY,
                        0.0,
                        -0.0,
                        f32::MAX,
                        -f32::MIN_POSITIVE,
                    ];
                    let value = match pick as usize {
                        index if index < specials.len() => specials[index],
                        _ => (rng.uniform(-4.0, 4.0) * 2.0).round() / 2.0,
                    };
                    value.to_bits()
                }
                DType::I32 => {
                    let specials = [i32::MIN, i32::MAX, -1, 0, 1, i32::MIN + 1];
                    let value = match pick as usize {
                        index if index < specials.len() => specials[index],
                        _ => (rng.next_u64() % 9) as i32 - 4,
                    };
                    value as u32
                }
                DType::U32 => {
                    let specials = [u32::MAX, 0, 1, 1 << 31, u32::MAX - 1];
                    match pick as usize {
                        index if index < specials.len() => specials[index],
                        _ => (rng.next_u64() % 9) as u32,
                    }
                }
                DType::Bool => (rng.next_u64() % 2) as u32,
            }
        })
        .collect()
}

/// For each element of `out` (row-major), the flat index of the element of an operand of `shape` it reads,
/// broadcasting as NumPy does.
fn broadcast_sources(shape: &[usize], out: &[usize]) -> Vec<usize> {
    let total: usize = out.iter().product();
    let offset = out.len() - shape.len();
    (0..total)
        .map(|flat| {
            let (mut rest, mut index, mut stride) = (flat, 0, 1);
            for axis in (0..out.len()).rev() {
                let coordinate = rest % out[axis];
                rest /= out[axis];
                if axis >= offset {
                    let dim = shape[axis - offset];
                    if dim != 1 {
                        index += coordinate * stride;
                    }
                    stride *= dim;
                }
            }
            index
        })
        .collect()
}

fn broadcast_shape(shapes: &[&[usize]]) -> Vec<usize> {
    let rank = shapes.iter().map(|shape| shape.len()).max().unwrap_or(0);
    (0..rank)
        .map(|axis| {
            shapes
                .iter()
                .filter_map(|shape| (axis + shape.len()).checked_sub(rank).map(|at| shape[at]))
                .fold(1, |joint, dim| if dim == 1 { joint } else { dim })
        })
        .collect()
}

// --- the references ---

/// NumPy's value of a binary logic op on two words of `dtype`, as a word of the op's output dtype.
fn binary_reference(op: LogicBinaryOp, dtype: DType, x: u32, y: u32) -> u32 {
    use std::cmp::Ordering;
    let order = match dtype {
        DType::F32 => f32::from_bits(x).partial_cmp(&f32::from_bits(y)),
        DType::I32 => Some((x as i32).cmp(&(y as i32))),
        DType::U32 | DType::Bool => Some(x.cmp(&y)),
    };
    let truth = |holds: bool| u32::from(holds);
    let (xi, yi) = (x as i32, y as i32);
    let signed = dtype == DType::I32;
    match op {
        LogicBinaryOp::Equal => truth(order == Some(Ordering::Equal)),
        LogicBinaryOp::NotEqual => truth(order != Some(Ordering::Equal)),
        LogicBinaryOp::Less => truth(order == Some(Ordering::Less)),
        LogicBinaryOp::LessEqual => truth(matches!(order, Some(Ordering::Less | Ordering::Equal))),
        LogicBinaryOp::Greater => truth(order == Some(Ordering::Greater)),
        LogicBinaryOp::GreaterEqual => {
            truth(matches!(order, Some(Ordering::Greater | Ordering::Equal)))
        }
        LogicBinaryOp::LogicalAnd => truth(x != 0 && y != 0),
        LogicBinaryOp::LogicalOr => truth(x != 0 || y != 0),
        LogicBinaryOp::LogicalXor => truth((x != 0) != (y != 0)),
        LogicBinaryOp::BitwiseAnd => x & y,
        LogicBinaryOp::BitwiseOr => x | y,
        LogicBinaryOp::BitwiseXor => x ^ y,
        LogicBinaryOp::BitwiseLeftShift => x.checked_shl(y).unwrap_or(0),
        LogicBinaryOp::BitwiseRightShift if signed => {
            (xi.checked_shr(y).unwrap_or(if xi < 0 { -1 } else { 0 })) as u32
        }
        LogicBinaryOp::BitwiseRightShift => x.checked_shr(y).unwrap_or(0),
        LogicBinaryOp::Add => x.wrapping_add(y),
        LogicBinaryOp::Sub => x.wrapping_sub(y),
        LogicBinaryOp::Mul => x.wrapping_mul(y),
        // NumPy: by zero 0; MIN // -1 wraps to MIN; rounded down; the remainder takes the divisor's sign.
        LogicBinaryOp::FloorDivide if signed => {
            (match yi {
                0 => 0,
                _ => {
                    xi.wrapping_div(yi)
                        - i32::from(xi.wrapping_rem(yi) != 0 && ((xi < 0) != (yi < 0)))
                }
            }) as u32
        }
        LogicBinaryOp::FloorDivide => x.checked_div(y).unwrap_or(0),
        LogicBinaryOp::Remainder if signed => {
            (match yi {
                0 => 0,
                _ => {
                    let r = xi.wrapping_rem(yi);
                    if r != 0 && ((r < 0) != (yi < 0)) {
                        r + yi
                    } else {
                        r
                    }
                }
            }) as u32
        }
        LogicBinaryOp::Remainder => x.checked_rem(y).unwrap_or(0),
        LogicBinaryOp::Maximum if signed => xi.max(yi) as u32,
        LogicBinaryOp::Maximum => x.max(y),
        LogicBinaryOp::Minimum if signed => xi.min(yi) as u32,
        LogicBinaryOp::Minimum => x.min(y),
        other => panic!("no reference for {other:?}"),
    }
}

fn unary_reference(op: LogicUnaryOp, dtype: DType, x: u32) -> u32 {
    let float = f32::from_bits(x);
    let is_float = dtype == DType::F32;
    match op {
        LogicUnaryOp::IsNan => u32::from(is_float && float.is_nan()),
        LogicUnaryOp::IsInf => u32::from(is_float && float.is_infinite()),
        LogicUnaryOp::IsFinite => u32::from(!is_float || float.is_finite()),
        LogicUnaryOp::LogicalNot => u32::from(x == 0),
        LogicUnaryOp::BitwiseInvert if dtype == DType::Bool => x ^ 1,
        LogicUnaryOp::BitwiseInvert => !x,
        LogicUnaryOp::Negative => x.wrapping_neg(),
        LogicUnaryOp::Abs if dtype == DType::I32 => (x as i32).wrapping_abs() as u32,
        LogicUnaryOp::Abs => x,
        other => panic!("no reference for {other:?}"),
    }
}

/// The dtypes an op takes, from what the standard (and NumPy) give each.
fn takes(op: LogicBinaryOp, dtype: DType) -> bool {
    use LogicBinaryOp as B;
    match op {
        B::Equal | B::NotEqual | B::Less | B::LessEqual | B::Greater | B::GreaterEqual => true,
        B::LogicalAnd | B::LogicalOr | B::LogicalXor => dtype == DType::Bool,
        B::BitwiseAnd | B::BitwiseOr | B::BitwiseXor => dtype != DType::F32,
        _ => dtype.is_integer(),
    }
}

const SHAPES: &[(&[usize], &[usize])] = &[
    (&[7, 1, 3], &[5, 3]),
    (&[257], &[]),
    (&[1], &[263]),
    (&[263], &[263]),
    (&[0, 3], &[1, 3]),
    (&[2, 1, 4, 1], &[3, 1, 5]),
];

per_backend!(every_binary_logic_op_of_every_dtype_matches_its_reference);
fn every_binary_logic_op_of_every_dtype_matches_its_reference(backend: &Backend) {
    let session = backend.poisoned();
    let mut rng = Rng::fresh("every_binary_logic_op_of_every_dtype_matches_its_reference");
    for dtype in DType::ALL {
        for &(lhs_shape, rhs_shape) in SHAPES {
            let lhs_words = random_words(&mut rng, dtype, lhs_shape.iter().product());
            let rhs_words = random_words(&mut rng, dtype, rhs_shape.iter().product());
            let lhs = upload(&session, dtype, &lhs_words, lhs_shape);
            let rhs = upload(&session, dtype, &rhs_words, rhs_shape);
            let out = broadcast_shape(&[lhs_shape, rhs_shape]);
            let (left, right) = (
                broadcast_sources(lhs_shape, &out),
                broadcast_sources(rhs_shape, &out),
            );
            for op in LogicBinaryOp::all() {
                let got = lhs.logic_binary(op, &rhs);
                if !takes(op, dtype) {
                    match got {
                        Err(Error::DTypes {
                            op: name, found, ..
                        }) => {
                            assert_eq!((name, found), (op.name(), dtype))
                        }
                        other => panic!("{op:?} of {dtype}: {other:?}"),
                    }
                    continue;
                }
                let got = read(&got.unwrap_or_else(|error| panic!("{op:?} of {dtype}: {error}")));
                let want: Vec<u32> = left
                    .iter()
                    .zip(&right)
                    .map(|(&l, &r)| binary_reference(op, dtype, lhs_words[l], rhs_words[r]))
                    .collect();
                let want_dtype = if op.gives_bool() { DType::Bool } else { dtype };
                assert_eq!(
                    (got.dtype, &got.shape[..]),
                    (want_dtype, &out[..]),
                    "{op:?} {dtype} {lhs_shape:?} {rhs_shape:?}"
                );
                if let Some(at) = (0..want.len()).find(|&at| got.words[at] != want[at]) {
                    panic!(
                        "{op:?} of {dtype} {lhs_shape:?} with {rhs_shape:?} at {at}: {:#x} {:#x} gives {:#x}, \
                         want {:#x}",
                        lhs_words[left[at]], rhs_words[right[at]], got.words[at], want[at]
                    );
                }
            }
        }
    }
    session.close();
}

type TensorMethod = fn(&Tensor, &Tensor) -> wgcompute::Result<Tensor>;

per_backend!(integer_arithmetic_runs_through_the_float_ops_names_and_wraps);
fn integer_arithmetic_runs_through_the_float_ops_names_and_wraps(backend: &Backend) {
    let session = backend.poisoned();
    let mut rng = Rng::fresh("integer_arithmetic_runs_through_the_float_ops_names_and_wraps");
    for dtype in [DType::I32, DType::U32] {
        let (shape, row) = ([3usize, 1, 259], [4usize, 1]);
        let x = random_words(&mut rng, dtype, 3 * 259);
        let y = random_words(&mut rng, dtype, 4);
        let (a, b) = (
            upload(&session, dtype, &x, &shape),
            upload(&session, dtype, &y, &row),
        );
        let out = broadcast_shape(&[&shape, &row]);
        let (left, right) = (
            broadcast_sources(&shape, &out),
            broadcast_sources(&row, &out),
        );
        let methods = [
            (LogicBinaryOp::Add, Tensor::add as TensorMethod),
            (LogicBinaryOp::Sub, Tensor::sub),
            (LogicBinaryOp::Mul, Tensor::mul),
        ];
        for (op, method) in methods {
            let got = read(&method(&a, &b).expect("integer arithmetic"));
            let want: Vec<u32> = left
                .iter()
                .zip(&right)
                .map(|(&l, &r)| binary_reference(op, dtype, x[l], y[r]))
                .collect();
            assert_eq!((got.dtype, got.words), (dtype, want), "{op:?} of {dtype}");
        }
        let negated = read(&a.neg().expect("neg"));
        let want: Vec<u32> = x
            .iter()
            .map(|&v| unary_reference(LogicUnaryOp::Negative, dtype, v))
            .collect();
        assert_eq!(negated.words, want, "neg of {dtype}");
        // A float op without an integer form names the dtypes it takes.
        assert!(matches!(a.div(&b), Err(Error::DType { op: "div", found, .. }) if found == dtype));
        assert!(matches!(a.exp(), Err(Error::DType { op: "exp", found, .. }) if found == dtype));
        assert!(matches!(
            a.add_scalar(1.0),
            Err(Error::DType {
                op: "add_scalar",
                ..
            })
        ));
    }
    // i32::MIN wraps as NumPy's int32 does.
    let extremes = session
        .upload_i32(&[i32::MIN, i32::MAX, i32::MIN], &[3])
        .expect("upload");
    let ones = session.upload_i32(&[-1, 1, 1], &[3]).expect("upload");
    assert_eq!(
        extremes.sub(&ones).and_then(|t| t.to_vec_i32()).ok(),
        Some(vec![i32::MIN + 1, i32::MAX - 1, i32::MAX])
    );
    assert_eq!(
        extremes.neg().and_then(|t| t.to_vec_i32()).ok(),
        Some(vec![i32::MIN, -i32::MAX, i32::MIN])
    );
    assert_eq!(
        extremes
            .logic_binary(LogicBinaryOp::FloorDivide, &ones)
            .and_then(|t| t.to_vec_i32())
            .ok(),
        Some(vec![i32::MIN, i32::MAX, i32::MIN])
    );
    session.close();
}

per_backend!(unary_logic_ops_and_float_tests_match_their_references);
fn unary_logic_ops_and_float_tests_match_their_references(backend: &Backend) {
    let session = backend.poisoned();
    let mut rng = Rng::fresh("unary_logic_ops_and_float_tests_match_their_references");
    for dtype in DType::ALL {
        for len in [0usize, 1, 257, 1_000_003] {
            let words = random_words(&mut rng, dtype, len);
            let x = upload(&session, dtype, &words, &[len]);
            for op in LogicUnaryOp::all() {
                let taken = match op {
                    LogicUnaryOp::IsNan | LogicUnaryOp::IsInf | LogicUnaryOp::IsFinite => true,
                    LogicUnaryOp::LogicalNot => dtype == DType::Bool,
                    LogicUnaryOp::BitwiseInvert => dtype != DType::F32,
                    _ => dtype.is_integer(),
                };
                let got = x.logic_unary(op);
                if !taken {
                    assert!(
                        matches!(got, Err(Error::DTypes { found, .. }) if found == dtype),
                        "{op:?} of {dtype}"
                    );
                    continue;
                }
                let got = read(&got.expect("unary logic op"));
                let want: Vec<u32> = words
                    .iter()
                    .map(|&w| unary_reference(op, dtype, w))
                    .collect();
                if let Some(at) = (0..len).find(|&at| got.words[at] != want[at]) {
                    panic!(
                        "{op:?} of {dtype} {:#x}: {:#x}, want {:#x}",
                        words[at], got.words[at], want[at]
                    );
                }
            }
        }
    }
    session.close();
}

/// Rust's `as` (which the casts follow) from a word of one dtype to another, as a word.
fn cast_reference(from: DType, to: DType, word: u32) -> u32 {
    let float = f32::from_bits(word);
    match (from, to) {
        (a, b) if a == b => word,
        (DType::F32, DType::I32) => (float as i32) as u32,
        (DType::F32, DType::U32) => float as u32,
        (DType::F32, DType::Bool) => u32::from(float != 0.0 || float.is_nan()),
        (DType::I32, DType::F32) => ((word as i32) as f32).to_bits(),
        (DType::U32 | DType::Bool, DType::F32) => (word as f32).to_bits(),
        (_, DType::Bool) => u32::from(word != 0),
        _ => word,
    }
}

per_backend!(every_cast_between_the_four_dtypes_matches_rust_as);
fn every_cast_between_the_four_dtypes_matches_rust_as(backend: &Backend) {
    let session = backend.poisoned();
    let mut rng = Rng::fresh("every_cast_between_the_four_dtypes_matches_rust_as");
    for from in DType::ALL {
        let mut words = random_words(&mut rng, from, 263);
        if from == DType::F32 {
            // Past each integer's range, and just inside it.
            for value in [
                3e9f32,
                -3e9,
                2147483520.0,
                -2147483648.0,
                4294967040.0,
                2.7,
                -2.7,
                1e-30,
            ] {
                words.push(value.to_bits());
            }
        }
        let x = upload(&session, from, &words, &[words.len()]);
        for to in DType::ALL {
            let got = read(&x.cast(to).expect("cast"));
            let want: Vec<u32> = words.iter().map(|&w| cast_reference(from, to, w)).collect();
            assert_eq!(got.dtype, to);
            if let Some(at) = (0..want.len()).find(|&at| got.words[at] != want[at]) {
                panic!(
                    "{from} → {to} of {:#x}: {:#x}, want {:#x}",
                    words[at], got.words[at], want[at]
                );
            }
        }
    }
    session.close();
}

per_backend!(where_picks_broadcast_operands_and_its_gradient_goes_to_both);
fn where_picks_broadcast_operands_and_its_gradient_goes_to_both(backend: &Backend) {
    let session = backend.poisoned();
    let mut rng = Rng::fresh("where_picks_broadcast_operands_and_its_gradient_goes_to_both");
    let cases: &[(&[usize], &[usize], &[usize])] = &[
        (&[5, 1], &[1, 259], &[5, 259]),
        (&[263], &[263], &[]),
        (&[2, 3, 1], &[3, 4], &[1]),
        (&[0, 2], &[2], &[1, 2]),
    ];
    for &(condition_shape, x1_shape, x2_shape) in cases {
        for dtype in [DType::F32, DType::I32] {
            let mask = random_words(&mut rng, DType::Bool, condition_shape.iter().product());
            let first = random_words(&mut rng, dtype, x1_shape.iter().product());
            let second = random_words(&mut rng, dtype, x2_shape.iter().product());
            let condition = upload(&session, DType::Bool, &mask, condition_shape);
            let x1 = upload(&session, dtype, &first, x1_shape);
            let x2 = upload(&session, dtype, &second, x2_shape);
            let got = read(&condition.where_(&x1, &x2).expect("where"));
            let out = broadcast_shape(&[condition_shape, x1_shape, x2_shape]);
            let sources =
                [condition_shape, x1_shape, x2_shape].map(|shape| broadcast_sources(shape, &out));
            let want: Vec<u32> = (0..sources[0].len())
                .map(|at| {
                    if mask[sources[0][at]] != 0 {
                        first[sources[1][at]]
                    } else {
                        second[sources[2][at]]
                    }
                })
                .collect();
            assert_eq!((got.dtype, &got.shape, &got.words), (dtype, &out, &want));
        }
        // The gradient of sum(where(c, x1, x2) * w): w where c picks x1, summed over x1's broadcast axes, and
        // likewise for x2.
        let mask = random_words(&mut rng, DType::Bool, condition_shape.iter().product());
        let out = broadcast_shape(&[condition_shape, x1_shape, x2_shape]);
        let weights = rng.vec(out.iter().product(), -2.0, 2.0);
        let tape = GradientTape::new();
        let condition = upload(&session, DType::Bool, &mask, condition_shape);
        let x1 = std::sync::Arc::new(
            session
                .upload(&rng.vec(x1_shape.iter().product(), -1.0, 1.0), x1_shape)
                .expect("x1"),
        );
        let x2 = std::sync::Arc::new(
            session
                .upload(&rng.vec(x2_shape.iter().product(), -1.0, 1.0), x2_shape)
                .expect("x2"),
        );
        let (v1, v2) = (
            tape.watch_parameter(&x1).expect("watch"),
            tape.watch_parameter(&x2).expect("watch"),
        );
        let picked = condition.where_(&v1, &v2).expect("where on the tape");
        let w = session.upload(&weights, &out).expect("weights");
        let product = picked.mul(&w).expect("mul");
        let loss = product.sum(None).expect("sum");
        let gradients = tape.backward(&loss).expect("backward");
        let sources =
            [condition_shape, x1_shape, x2_shape].map(|shape| broadcast_sources(shape, &out));
        for (which, (tensor, shape)) in [(&x1, x1_shape), (&x2, x2_shape)].into_iter().enumerate() {
            let mut want = vec![0f64; shape.iter().product()];
            for at in 0..weights.len() {
                let takes_first = mask[sources[0][at]] != 0;
                if takes_first == (which == 0) {
                    want[sources[which + 1][at]] += f64::from(weights[at]);
                }
            }
            let got = gradients
                .of(tensor)
                .expect("a gradient")
                .to_vec()
                .expect("read");
            for (g, w) in got.iter().zip(&want) {
                assert!(
                    (f64::from(*g) - w).abs() <= 1e-5 * (1.0 + w.abs()),
                    "{got:?} vs {want:?}"
                );
            }
        }
    }
    let floats = session.upload(&[1.0, 2.0], &[2]).expect("upload");
    let ints = session.upload_i32(&[1, 2], &[2]).expect("upload");
    assert!(matches!(
        floats.where_(&floats, &floats),
        Err(Error::DType { op: "where", .. })
    ));
    let mask = session.upload_bool(&[true, false], &[2]).expect("upload");
    assert!(matches!(
        mask.where_(&floats, &ints),
        Err(Error::Promotion {
            op: "where",
            lhs: DType::F32,
            rhs: DType::I32
        })
    ));
    session.close();
}

/// `reduction` of `words` (of `shape` and `dtype`) over `axes`, by the definition.
fn truth_reference(
    reduction: TruthReduction,
    dtype: DType,
    words: &[u32],
    shape: &[usize],
    axes: &[usize],
) -> Vec<u32> {
    let kept: Vec<usize> = (0..shape.len())
        .filter(|axis| !axes.contains(axis))
        .collect();
    let out_len: usize = kept.iter().map(|&axis| shape[axis]).product();
    let mut tallies = vec![(0u32, 0u32); out_len];
    for (flat, &word) in words.iter().enumerate() {
        let (mut rest, mut coordinates) = (flat, vec![0; shape.len()]);
        for axis in (0..shape.len()).rev() {
            coordinates[axis] = rest % shape[axis];
            rest /= shape[axis];
        }
        let target = kept
            .iter()
            .fold(0, |index, &axis| index * shape[axis] + coordinates[axis]);
        let nonzero = if dtype == DType::F32 {
            word & 0x7fff_ffff != 0
        } else {
            word != 0
        };
        tallies[target].0 += u32::from(nonzero);
        tallies[target].1 += 1;
    }
    tallies
        .into_iter()
        .map(|(nonzero, all)| match reduction {
            TruthReduction::Any => u32::from(nonzero > 0),
            TruthReduction::All => u32::from(nonzero == all),
            TruthReduction::CountNonzero => nonzero,
        })
        .collect()
}

per_backend!(all_any_and_count_nonzero_over_every_set_of_axes_match_the_definition);
fn all_any_and_count_nonzero_over_every_set_of_axes_match_the_definition(backend: &Backend) {
    let session = backend.poisoned();
    let mut rng =
        Rng::fresh("all_any_and_count_nonzero_over_every_set_of_axes_match_the_definition");
    let reductions = [
        TruthReduction::Any,
        TruthReduction::All,
        TruthReduction::CountNonzero,
    ];
    for shape in [&[3usize, 0, 2][..], &[5, 7, 3], &[263], &[2, 1, 3, 2], &[]] {
        for dtype in DType::ALL {
            let words = random_words(&mut rng, dtype, shape.iter().product());
            let x = upload(&session, dtype, &words, shape);
            for subset in 0..(1usize << shape.len()) {
                let axes: Vec<usize> = (0..shape.len())
                    .filter(|axis| subset & (1 << axis) != 0)
                    .collect();
                for reduction in reductions {
                    for keepdims in [false, true] {
                        let got = match reduction {
                            TruthReduction::Any => x.any(Some(&axes), keepdims),
                            TruthReduction::All => x.all(Some(&axes), keepdims),
                            _ => x.count_nonzero(Some(&axes), keepdims),
                        };
                        let got = read(&got.expect("reduction"));
                        let want = truth_reference(reduction, dtype, &words, shape, &axes);
                        let want_shape: Vec<usize> = (0..shape.len())
                            .filter_map(|axis| match (axes.contains(&axis), keepdims) {
                                (false, _) => Some(shape[axis]),
                                (true, true) => Some(1),
                                (true, false) => None,
                            })
                            .collect();
                        assert_eq!(
                            (got.dtype, got.shape, got.words),
                            (reduction.output(), want_shape, want),
                            "{reduction:?} of {dtype} {shape:?} over {axes:?} keepdims {keepdims}"
                        );
                    }
                }
            }
        }
    }
    // Over everything of a large tensor (one word shared by a million invocations), and over nothing.
    let len = 1_000_003;
    let mut words = vec![1u32; len];
    words[len - 2] = 0;
    let x = upload(&session, DType::Bool, &words, &[len]);
    assert_eq!(read(&x.all(None, false).expect("all")).words, vec![0]);
    assert_eq!(read(&x.any(None, true).expect("any")).words, vec![1]);
    assert_eq!(
        read(&x.count_nonzero(None, false).expect("count")).words,
        vec![len as u32 - 1]
    );
    assert!(matches!(
        x.all(Some(&[1]), false),
        Err(Error::Shape { op: "all", .. })
    ));
    assert!(matches!(
        x.any(Some(&[0, 0]), false),
        Err(Error::Shape { op: "any", .. })
    ));
    session.close();
}

vulkan_only!(the_promotion_table_is_the_standards_for_every_pair_of_dtypes);
fn the_promotion_table_is_the_standards_for_every_pair_of_dtypes(backend: &Backend) {
    let session = backend.poisoned();
    // The Array API standard's table restricted to these four dtypes: within a kind the join (int32 with
    // uint32 would be int64, which tensors cannot hold), across kinds undefined.
    let standard = |a: DType, b: DType| -> Option<DType> { (a == b).then_some(a) };
    for a in DType::ALL {
        for b in DType::ALL {
            assert_eq!(a.promoted(b), standard(a, b), "{a} with {b}");
            assert_eq!(a.can_cast(b), a == b, "can_cast {a} to {b}");
            let lhs = upload(&session, a, &[1, 0, 1], &[3]);
            let rhs = upload(&session, b, &[1], &[1]);
            for (op, outcome) in [
                ("equal", lhs.equal(&rhs)),
                ("add", lhs.add(&rhs)),
                ("bitwise_xor", lhs.bitwise_xor(&rhs)),
            ] {
                match (standard(a, b), outcome) {
                    (Some(_), Ok(_)) => {}
                    // The op exists for the dtype, or it does not; either way a promoted pair is not refused
                    // for promotion.
                    (
                        Some(dtype),
                        Err(Error::DType { found, .. } | Error::DTypes { found, .. }),
                    ) => {
                        assert_eq!(found, dtype, "{op} of {a}")
                    }
                    (None, Err(error @ Error::Promotion { .. })) => {
                        let text = error.to_string();
                        assert!(
                            text.contains(op) && text.contains(a.name()) && text.contains(b.name()),
                            "{text}"
                        );
                    }
                    (want, got) => panic!("{op} of {a} with {b}: want {want:?}, got {got:?}"),
                }
            }
        }
    }
    assert!(session.upload(&[1.0], &[1]).and_then(|t| t.add(&t)).is_ok());
    session.close();
}

vulkan_only!(float_only_ops_refuse_the_other_dtypes_by_name_and_the_session_goes_on);
fn float_only_ops_refuse_the_other_dtypes_by_name_and_the_session_goes_on(backend: &Backend) {
    let session = backend.poisoned();
    for dtype in [DType::I32, DType::Bool] {
        let x = upload(&session, dtype, &[1, 0, 1, 1], &[2, 2]);
        let outcomes: Vec<(&str, wgcompute::Result<Tensor>)> = vec![
            ("exp", x.exp()),
            ("mean", x.mean(None)),
            ("matmul", x.matmul(&x)),
            ("softmax", x.softmax()),
            ("relu", x.relu()),
        ];
        for (op, outcome) in outcomes {
            let text = outcome.expect_err(op).to_string();
            assert!(text.contains(op) && text.contains(dtype.name()), "{text}");
        }
        assert!(x.to_vec().is_err() && x.item().is_err());
    }
    let ints = session
        .upload_i32(&[i32::MIN, -1, 0, i32::MAX], &[4])
        .expect("upload");
    assert_eq!(
        ints.to_vec_i32().ok(),
        Some(vec![i32::MIN, -1, 0, i32::MAX])
    );
    let bools = session
        .upload_bool(&[true, false, true], &[3])
        .expect("upload");
    assert_eq!(bools.to_vec_bool().ok(), Some(vec![true, false, true]));
    assert!(bools.to_vec_i32().is_err() && ints.to_vec_bool().is_err());
    assert!(session.upload_i32(&[1, 2], &[3]).is_err());
    assert_eq!(
        ints.greater(&ints.neg().expect("neg"))
            .and_then(|t| t.to_vec_bool())
            .ok(),
        Some(vec![false, false, false, true])
    );
    session.close();
}
