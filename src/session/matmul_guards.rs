//! The product kernels run without wgpu's runtime checks (`Shader::proven_bounds`): this test holds each of
//! them to its operands. It lives above the session, which it opens, and reaches into the kernels below.

use super::*;
use crate::kernels::matmul::{matmul, Layout, FAMILY, VARIANTS};
use crate::runtime::BufferRange;

fn layouts(transpose: (bool, bool), (m, k, n): (usize, usize, usize)) -> (Layout, Layout) {
    let a = if transpose.0 { (k, m) } else { (m, k) };
    let b = if transpose.1 { (n, k) } else { (k, n) };
    (
        Layout::of(a.0, a.1, false, transpose.0),
        Layout::of(b.0, b.1, false, transpose.1),
    )
}

/// What the guard regions hold: a NaN with a payload no kernel writes.
const GUARD: u32 = 0x7fc0_dead;
/// Words of guard before, between and after the operands (a multiple of 64, so each operand starts on the
/// 256-byte binding alignment).
const GUARD_WORDS: usize = 64;

/// One product whose operands and output lie in a single range of guard words, each operand with guards on
/// both sides, computed by `variant` forced in `session`: fails if a word outside C changed or C is off the
/// f64 reference. The kernels built without wgpu's runtime checks (`Shader::proven_bounds`) must keep within
/// their operands on their own.
fn guarded_product(
    session: &Session,
    variant: &str,
    transpose: (bool, bool),
    (m, k, n): (usize, usize, usize),
) {
    let backend = session.adapter().backend;
    let place = |words: usize| words.div_ceil(GUARD_WORDS) * GUARD_WORDS + GUARD_WORDS;
    let (a_at, b_at) = (GUARD_WORDS, GUARD_WORDS + place(m * k));
    let c_at = b_at + place(k * n);
    let total = c_at + place(m * n);
    let guard = f32::from_bits(GUARD);
    let mut host = vec![guard; total];
    let mut state = (m * 131 + k * 31 + n) as u32 | 1;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        (state >> 8) as f32 / (1u32 << 24) as f32 * 2.0 - 1.0
    };
    for value in &mut host[a_at..a_at + m * k] {
        *value = next();
    }
    for value in &mut host[b_at..b_at + k * n] {
        *value = next();
    }
    let arena = session.upload(&host, &[total]).expect("upload");
    let whole = arena.range().expect("range");
    // Each binding runs from its operand to the end of the range: llvmpipe (GL and Vulkan alike) drops any
    // access past a binding, so only an access inside one would show; here a stray access past an operand is
    // one, and lands on a guard word (a load of one makes C NaN) or on another operand (which must not change).
    let from = |word: usize| BufferRange {
        slab: whole.slab,
        offset: whole.offset + (word * 4) as u64,
        bytes: ((total - word) * 4) as u64,
    };
    let (a_shape, b_shape) = layouts(transpose, (m, k, n));
    arena
        .with_runtime(|runtime| {
            matmul(
                runtime,
                (from(a_at), a_shape),
                (from(b_at), b_shape),
                from(c_at),
                1,
                (m, k, n),
            )
        })
        .expect("product");
    let after = arena.to_vec().expect("read");
    let report = session.tuning_report().expect("report");
    let label = format!("{variant} on {backend}, {transpose:?} {m}x{k}x{n} (ran {report:?})");
    for (word, (&before, &now)) in host.iter().zip(&after).enumerate() {
        let inside = |begin: usize, len: usize| (begin..begin + len).contains(&word);
        if !(inside(c_at, m * n)) {
            assert_eq!(
                before.to_bits(),
                now.to_bits(),
                "{label}: word {word} changed"
            );
        }
    }
    // A[i, kk] and B[kk, j] as stored, transposed or not.
    let a_value = |i: usize, kk: usize| {
        f64::from(host[a_at + if transpose.0 { kk * m + i } else { i * k + kk }])
    };
    let b_value = |kk: usize, j: usize| {
        f64::from(host[b_at + if transpose.1 { j * k + kk } else { kk * n + j }])
    };
    for i in 0..m {
        for j in 0..n {
            let want: f64 = (0..k).map(|kk| a_value(i, kk) * b_value(kk, j)).sum();
            let size: f64 = (0..k)
                .map(|kk| (a_value(i, kk) * b_value(kk, j)).abs())
                .sum();
            let got = f64::from(after[c_at + i * n + j]);
            assert!(
                (got - want).abs() <= 1e-5 * size.max(1e-30),
                "{label}: C[{i}, {j}] is {got}, want {want}"
            );
        }
    }
}

/// Every matmul variant, forced, at shapes that leave partial tiles, a short side, a long K (split-K's slices
/// and part-slice) and each transpose, with guard words around every operand, on Vulkan and (unless
/// WGCOMPUTE_TEST_NO_GL is set) GL.
#[test]
fn every_matmul_variant_leaves_the_memory_around_its_bindings_untouched() {
    let mut backends = vec![wgpu::Backend::Vulkan];
    if std::env::var_os("WGCOMPUTE_TEST_NO_GL").is_none() {
        backends.push(wgpu::Backend::Gl);
    } else {
        eprintln!("the guard tests on GL: not run, WGCOMPUTE_TEST_NO_GL is set");
    }
    for backend in backends {
        for &variant in VARIANTS {
            let session = Session::open(
                SessionOptions::default()
                    .adapter(AdapterSelector::Backend(backend))
                    .tuning(Tuning::Defaults)
                    .force_variant(FAMILY, variant),
            )
            .expect("open");
            let session = &session;
            for shape in [
                (1, 4, 4),
                (7, 8, 12),
                (10, 12, 300),
                (65, 20, 132),
                (9, 4104, 8),
            ] {
                guarded_product(session, variant, (false, false), shape);
            }
            for (transpose, shape) in [
                ((true, false), (12, 8, 16)),
                ((true, false), (37, 20, 12)),
                ((false, true), (66, 12, 70)),
                ((true, true), (7, 9, 5)),
                ((false, false), (7, 9, 5)),
            ] {
                guarded_product(session, variant, transpose, shape);
            }
        }
    }
}
