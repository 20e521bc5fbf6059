//! Random fills against a CPU Philox4x32-10: the exact uniform bits and Box–Muller normals for several seeds
//! (high key word included) and awkward sizes, repeatability, agreement across backends, the statistics of
//! a million draws, and a tensor past one storage binding whose windows must continue the counter.
// Parallel arrays (reference state, inputs, outputs) are indexed together.
#![allow(clippy::needless_range_loop)]

use crate::common::{self, across_backends, per_backend, vulkan_only, Backend, Rng};
use wgcompute::Tensor;

// ---- CPU reference: Philox4x32-10 (Salmon et al. 2011), written from the paper, not from the shader ----

const PHILOX_M0: u32 = 0xD251_1F53;
const PHILOX_M1: u32 = 0xCD9E_8D57;
const PHILOX_W0: u32 = 0x9E37_79B9;
const PHILOX_W1: u32 = 0xBB67_AE85;

fn mul_hi_lo(a: u32, b: u32) -> (u32, u32) {
    let product = u64::from(a) * u64::from(b);
    ((product >> 32) as u32, product as u32)
}

fn philox4x32_10(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let mut c = counter;
    let mut k = key;
    for round in 0..10 {
        // Random123's order: the key is bumped before every round but the first.
        if round > 0 {
            k[0] = k[0].wrapping_add(PHILOX_W0);
            k[1] = k[1].wrapping_add(PHILOX_W1);
        }
        let (hi0, lo0) = mul_hi_lo(PHILOX_M0, c[0]);
        let (hi1, lo1) = mul_hi_lo(PHILOX_M1, c[2]);
        c = [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0];
    }
    c
}

/// The block that holds element `index`: counter (index / 4, 0, 0, 0), key (seed low word, seed high word).
fn block(seed: u64, index: u64) -> [u32; 4] {
    philox4x32_10(
        [(index / 4) as u32, 0, 0, 0],
        [seed as u32, (seed >> 32) as u32],
    )
}

const TWO_POW_MINUS_24: f64 = 1.0 / (1u64 << 24) as f64;

/// The top 24 bits of a word as a number in [0, 1) (exact in f32).
fn unit(word: u32) -> f64 {
    f64::from(word >> 8) * TWO_POW_MINUS_24
}

fn uniform_reference(seed: u64, index: u64) -> f32 {
    unit(block(seed, index)[(index % 4) as usize]) as f32
}

/// Box–Muller in f64 on the words (x, y) for lanes 0 and 1, (z, w) for lanes 2 and 3; u1 in (0, 1].
fn normal_reference(seed: u64, index: u64) -> f64 {
    let words = block(seed, index);
    let lane = (index % 4) as usize;
    let pair = lane / 2 * 2;
    let u1 = unit(words[pair]) + TWO_POW_MINUS_24;
    let u2 = unit(words[pair + 1]);
    let radius = (-2.0 * u1.ln()).sqrt();
    let angle = std::f64::consts::TAU * u2;
    if lane.is_multiple_of(2) {
        radius * angle.cos()
    } else {
        radius * angle.sin()
    }
}

fn uniform_references(seed: u64, len: usize) -> Vec<f32> {
    (0..len as u64)
        .map(|index| uniform_reference(seed, index))
        .collect()
}

/// Seeds for the exact-bits tests: small ones, ones with only the high key word set, all ones, and a fresh one.
fn seeds(rng: &mut Rng) -> Vec<u64> {
    vec![
        0,
        1,
        42,
        1 << 32,
        0xDEAD_BEEF_0000_0000,
        0x0123_4567_89AB_CDEF,
        u64::MAX,
        rng.next_u64(),
    ]
}

const SIZES: [&[usize]; 7] = [
    &[1],
    &[3],
    &[5],
    &[257],
    &[4, 3],
    &[7, 11, 13],
    &[1_000_003],
];

fn expect_bits(label: &str, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{label}: length");
    if let Some(index) = (0..got.len()).find(|&i| got[i].to_bits() != want[i].to_bits()) {
        let wrong = (0..got.len())
            .filter(|&i| got[i].to_bits() != want[i].to_bits())
            .count();
        panic!(
            "{label}: {wrong} of {} elements differ from the CPU Philox reference; first at {index}: got {} ({:#010x}), want {} ({:#010x})",
            got.len(),
            got[index],
            got[index].to_bits(),
            want[index],
            want[index].to_bits()
        );
    }
}

/// The Box–Muller radius sqrt(−2 ln u1) of element `index`, in f64.
fn radius(seed: u64, index: u64) -> f64 {
    let words = block(seed, index);
    let u1 = unit(words[(index % 4) as usize / 2 * 2]) + TWO_POW_MINUS_24;
    (-2.0 * u1.ln()).sqrt()
}

/// Radii below this come from u1 within 5e-5 of 1 (about 1 draw in 20,000), where an f32 logarithm's absolute
/// error, divided by the small radius, dominates; `randn_is_accurate_where_u1_is_near_one` covers them.
const SMALL_RADIUS: f64 = 0.01;

/// Checks normals against the f64 reference: within `tolerance` (scaled by |std|) where the radius is at least
/// SMALL_RADIUS, and within 2e-4 (scaled) below it.
fn expect_normals(label: &str, got: &[f32], seed: u64, mean: f64, std: f64, tolerance: f64) {
    let mut worst = (0.0f64, 0usize);
    for (index, &value) in got.iter().enumerate() {
        let want = mean + std * normal_reference(seed, index as u64);
        let allowed = if radius(seed, index as u64) >= SMALL_RADIUS {
            tolerance
        } else {
            2e-4 * std.abs().max(1.0)
        };
        // As a share of what is allowed; NaN counts as the worst.
        let error = (value as f64 - want).abs() / allowed;
        if error.is_nan() || error > worst.0 {
            worst = (if error.is_nan() { f64::INFINITY } else { error }, index);
        }
    }
    assert!(
        worst.0 <= 1.0,
        "{label}: element {} is {}, the f64 Box–Muller reference {} (error {} of the allowed)",
        worst.1,
        got[worst.1],
        mean + std * normal_reference(seed, worst.1 as u64),
        worst.0
    );
}

#[test]
fn cpu_philox_matches_random123_known_answers() {
    // Random123's kat_vectors, the three "philox4x32 10" lines: counter, key, result.
    let vectors: [([u32; 4], [u32; 2], [u32; 4]); 3] = [
        (
            [0, 0, 0, 0],
            [0, 0],
            [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8],
        ),
        (
            [u32::MAX; 4],
            [u32::MAX; 2],
            [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd],
        ),
        (
            [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
            [0xa409_3822, 0x299f_31d0],
            [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1],
        ),
    ];
    for (counter, key, want) in vectors {
        assert_eq!(
            philox4x32_10(counter, key),
            want,
            "counter {counter:x?} key {key:x?}"
        );
    }
}

per_backend!(rand_gives_the_reference_bits_for_every_seed_and_size);
fn rand_gives_the_reference_bits_for_every_seed_and_size(backend: &Backend) {
    let mut rng = Rng::fresh("rand bits");
    let seeds = seeds(&mut rng);
    let session = backend.poisoned();
    for &seed in &seeds {
        for &shape in &SIZES {
            let len: usize = shape.iter().product();
            let tensor = session.rand(shape, seed).expect("rand");
            assert_eq!(tensor.shape(), shape);
            let got = tensor.to_vec().expect("read");
            expect_bits(
                &format!("rand({shape:?}, seed {seed:#x})"),
                &got,
                &uniform_references(seed, len),
            );
        }
    }
    // Into a NaN-filled tensor, so that an element the kernel skips cannot pass by holding stale numbers.
    for &shape in &SIZES {
        let seed = rng.next_u64();
        let tensor = session.full(shape, f32::NAN).expect("full");
        tensor.fill_uniform_(seed, 0.0, 1.0).expect("fill_uniform_");
        let len: usize = shape.iter().product();
        expect_bits(
            &format!("fill_uniform_ of {shape:?}, seed {seed:#x}"),
            &tensor.to_vec().expect("read"),
            &uniform_references(seed, len),
        );
    }
}

per_backend!(randn_matches_box_muller_on_the_same_words);
fn randn_matches_box_muller_on_the_same_words(backend: &Backend) {
    let mut rng = Rng::fresh("randn");
    let seeds = seeds(&mut rng);
    let session = backend.poisoned();
    for &seed in &seeds {
        for &shape in &SIZES {
            let tensor = session.randn(shape, seed).expect("randn");
            assert_eq!(tensor.shape(), shape);
            expect_normals(
                &format!("randn({shape:?}, seed {seed:#x})"),
                &tensor.to_vec().expect("read"),
                seed,
                0.0,
                1.0,
                1e-5,
            );
        }
    }
    // A shifted and scaled normal, written over NaN.
    for &shape in &[&[1][..], &[257], &[1_000_003]] {
        let seed = rng.next_u64();
        let (mean, std) = (rng.uniform(-5.0, 5.0), rng.uniform(0.1, 3.0));
        let tensor = session.full(shape, f32::NAN).expect("full");
        tensor.fill_normal_(seed, mean, std).expect("fill_normal_");
        expect_normals(
            &format!("fill_normal_({mean}, {std}) of {shape:?}, seed {seed:#x}"),
            &tensor.to_vec().expect("read"),
            seed,
            mean as f64,
            std as f64,
            1e-5 * (std as f64).max(1.0) + 2.0 * f32::EPSILON as f64 * mean.abs() as f64,
        );
    }
}

per_backend!(fill_uniform_scales_to_its_range);
fn fill_uniform_scales_to_its_range(backend: &Backend) {
    let mut rng = Rng::fresh("fill_uniform range");
    let session = backend.poisoned();
    for &(low, high) in &[(-2.0f32, 3.0f32), (0.25, 0.75), (-1e-3, 0.0)] {
        let seed = rng.next_u64();
        let len = 1_000_003;
        let tensor = session.full(&[len], f32::NAN).expect("full");
        tensor
            .fill_uniform_(seed, low, high)
            .expect("fill_uniform_");
        let got = tensor.to_vec().expect("read");
        let span = high as f64 - low as f64;
        for (index, &value) in got.iter().enumerate() {
            assert!(
                value >= low && value < high,
                "fill_uniform_({low}, {high}), seed {seed:#x}: element {index} is {value}"
            );
            let want = low as f64 + span * unit(block(seed, index as u64)[index % 4]);
            let tolerance = 2.0 * f32::EPSILON as f64 * (low.abs().max(high.abs()) as f64);
            assert!(
                (value as f64 - want).abs() <= tolerance,
                "fill_uniform_({low}, {high}), seed {seed:#x}: element {index} is {value}, want {want}"
            );
        }
        let mean = got.iter().map(|&x| x as f64).sum::<f64>() / len as f64;
        let want_mean = (low as f64 + high as f64) / 2.0;
        assert!(
            (mean - want_mean).abs() < 0.01 * span,
            "fill_uniform_({low}, {high}) has mean {mean}, want about {want_mean}"
        );
    }
}

per_backend!(seeds_repeat_and_differ);
fn seeds_repeat_and_differ(backend: &Backend) {
    let mut rng = Rng::fresh("seeds");
    let seed = rng.next_u64();
    let shape = [1_000_003];
    let session = backend.poisoned();
    // All kept alive, so no tensor reuses another's memory.
    let first = session.rand(&shape, seed).expect("rand");
    let again = session.rand(&shape, seed).expect("rand");
    let next_seed = session.rand(&shape, seed.wrapping_add(1)).expect("rand");
    let high_word = session.rand(&shape, seed ^ (1 << 32)).expect("rand");
    let first = first.to_vec().expect("read");
    let again = again.to_vec().expect("read");
    expect_bits("the same seed twice", &again, &first);
    for (other, name) in [
        (&next_seed, "seed + 1"),
        (&high_word, "seed with the high word changed"),
    ] {
        let other = other.to_vec().expect("read");
        let equal = first
            .iter()
            .zip(&other)
            .filter(|(a, b)| a.to_bits() == b.to_bits())
            .count();
        // Two independent 24-bit draws agree with probability 2^-24: about 0.06 of a million.
        assert!(
            equal < 20,
            "{name} repeats {equal} of {} elements of seed {seed:#x}",
            first.len()
        );
    }
    let normal_a = session.randn(&shape, seed).expect("randn");
    let normal_b = session.randn(&shape, seed).expect("randn");
    expect_bits(
        "randn with the same seed twice",
        &normal_b.to_vec().expect("read"),
        &normal_a.to_vec().expect("read"),
    );
}

across_backends!(seeds_agree_across_backends);
fn seeds_agree_across_backends(vulkan: &Backend, gl: &Backend) {
    let mut rng = Rng::fresh("seeds across backends");
    let seed = rng.next_u64();
    let shape = [1_000_003];
    let draws = |backend: &Backend| {
        let session = backend.poisoned();
        let uniform: Vec<u32> = session
            .rand(&shape, seed)
            .expect("rand")
            .to_vec()
            .expect("read")
            .iter()
            .map(|x| x.to_bits())
            .collect();
        let normal = session
            .randn(&shape, seed)
            .expect("randn")
            .to_vec()
            .expect("read");
        (uniform, normal)
    };
    let (reference, reference_normal) = draws(vulkan);
    let (bits, normal) = draws(gl);
    let differ = reference.iter().zip(&bits).filter(|(a, b)| a != b).count();
    assert_eq!(
        differ, 0,
        "uniform bits for seed {seed:#x}: gl differs from vulkan in {differ} elements"
    );
    let worst = reference_normal
        .iter()
        .zip(&normal)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(
        worst <= 2e-5,
        "normals for seed {seed:#x}: gl differs from vulkan by up to {worst}"
    );
}

fn moments(values: &[f32]) -> (f64, f64) {
    let n = values.len() as f64;
    let mean = values.iter().map(|&x| x as f64).sum::<f64>() / n;
    let variance = values
        .iter()
        .map(|&x| (x as f64 - mean).powi(2))
        .sum::<f64>()
        / (n - 1.0);
    (mean, variance)
}

per_backend!(a_million_draws_have_the_right_statistics);
fn a_million_draws_have_the_right_statistics(backend: &Backend) {
    let mut rng = Rng::fresh("statistics");
    let len = 1 << 20;
    let session = backend.poisoned();
    let seed = rng.next_u64();
    let uniform = session
        .rand(&[len], seed)
        .expect("rand")
        .to_vec()
        .expect("read");
    if let Some(bad) = uniform.iter().find(|x| !(**x >= 0.0 && **x < 1.0)) {
        panic!("rand, seed {seed:#x}: a value {bad} outside [0, 1)");
    }
    let (mean, variance) = moments(&uniform);
    assert!(
        (mean - 0.5).abs() < 0.005,
        "rand, seed {seed:#x}: mean {mean}"
    );
    assert!(
        (variance - 1.0 / 12.0).abs() < 0.001,
        "rand, seed {seed:#x}: variance {variance}, want 1/12"
    );
    // Each tenth of [0, 1) holds about a tenth (σ ≈ 0.0003).
    let mut deciles = [0usize; 10];
    for &x in &uniform {
        deciles[(x * 10.0) as usize] += 1;
    }
    for (decile, &count) in deciles.iter().enumerate() {
        let share = count as f64 / len as f64;
        assert!(
            (share - 0.1).abs() < 0.003,
            "rand, seed {seed:#x}: decile {decile} holds {share}"
        );
    }

    let seed = rng.next_u64();
    let normal = session
        .randn(&[len], seed)
        .expect("randn")
        .to_vec()
        .expect("read");
    if let Some(bad) = normal.iter().find(|x| !x.is_finite()) {
        panic!("randn, seed {seed:#x}: a value {bad}");
    }
    let (mean, variance) = moments(&normal);
    let std = variance.sqrt();
    assert!(mean.abs() < 0.005, "randn, seed {seed:#x}: mean {mean}");
    assert!(
        (std - 1.0).abs() < 0.005,
        "randn, seed {seed:#x}: standard deviation {std}"
    );
    // Tails: P(|z| > 2) = 0.0455, P(|z| > 3) = 0.0027.
    let beyond = |limit: f32| normal.iter().filter(|x| x.abs() > limit).count() as f64 / len as f64;
    let (two, three) = (beyond(2.0), beyond(3.0));
    assert!(
        (two - 0.0455).abs() < 0.002 && (three - 0.0027).abs() < 0.0005,
        "randn, seed {seed:#x}: P(|z| > 2) = {two}, P(|z| > 3) = {three}"
    );
}

vulkan_only!(a_fill_past_one_binding_continues_the_counter_across_windows);
fn a_fill_past_one_binding_continues_the_counter_across_windows(backend: &Backend) {
    let session = backend.poisoned();
    let mut rng = Rng::fresh("random windows");
    let len = 40_000_003usize;
    let seed = rng.next_u64() | (1 << 40);
    let tensor: Tensor = session.full(&[len], f32::NAN).expect("full, 160 MB");
    tensor.fill_uniform_(seed, 0.0, 1.0).expect("fill_uniform_");
    let got = tensor.to_vec().expect("read");
    // Every element written (NaN fails), and in range.
    if let Some(index) = got.iter().position(|x| !(*x >= 0.0 && *x < 1.0)) {
        panic!(
            "element {index} of {len} is {} after fill_uniform_",
            got[index]
        );
    }
    let indices = common::sample_indices(&mut rng, len, 400);
    for &index in &indices {
        let want = uniform_reference(seed, index as u64);
        assert_eq!(
            got[index].to_bits(),
            want.to_bits(),
            "element {index} of {len}, seed {seed:#x}: got {}, want {want}",
            got[index]
        );
    }
    drop(got);

    let normal = session.randn(&[len], seed).expect("randn");
    let got = normal.to_vec().expect("read");
    for &index in &indices {
        let want = normal_reference(seed, index as u64);
        assert!(
            (got[index] as f64 - want).abs() <= 1e-5,
            "randn element {index} of {len}, seed {seed:#x}: got {}, want {want}",
            got[index]
        );
    }
}

per_backend!(fill_uniform_stays_below_high_where_rounding_would_reach_it);
fn fill_uniform_stays_below_high_where_rounding_would_reach_it(backend: &Backend) {
    // [10, 10.5): 10 + 0.5·u rounds up to 10.5 in f32 for the 15 largest 24-bit draws (u > 1 − 2^-20), since the
    // spacing of floats near 10.5 is 2^-20. Find such a draw for a fixed seed and fill a tensor that holds it.
    let (low, high) = (10.0f32, 10.5f32);
    let seed = 7u64;
    let index = (0..1u64 << 28)
        .find(|&index| block(seed, index)[(index % 4) as usize] >> 8 > (1 << 24) - 16)
        .expect("a draw near 1") as usize;
    let session = backend.poisoned();
    let tensor = session.full(&[index + 1], f32::NAN).expect("full");
    tensor
        .fill_uniform_(seed, low, high)
        .expect("fill_uniform_");
    let value = tensor.read_range(index..index + 1).expect("read")[0];
    assert!(
        value >= low && value < high,
        "fill_uniform_(seed {seed}, {low}, {high}): element {index} (24-bit draw {:#x}) is {value}, \
         outside [{low}, {high})",
        block(seed, index as u64)[index % 4] >> 8
    );
}

per_backend!(randn_is_accurate_where_u1_is_near_one);
fn randn_is_accurate_where_u1_is_near_one(backend: &Backend) {
    // u1 = 1 − k·2^-24 for small k gives a radius sqrt(2k)·2^-12. An f32 log(u1) with an absolute error near
    // 2^-24 then moves the radius by about 2^-24 / radius: up to 1e-4 for k = 1. This checks, for seed 0, the
    // first pair with k ≤ 8 (at index 6,608,470) to 1e-5, like every other normal.
    let seed = 0u64;
    let index = (0..1u64 << 26)
        .step_by(2)
        .find(|&index| {
            let top = block(seed, index)[(index % 4) as usize] >> 8;
            (1u32 << 24) - 1 - top <= 8
        })
        .expect("a draw of u1 near 1") as usize;
    let session = backend.poisoned();
    let tensor = session.randn(&[index + 2], seed).expect("randn");
    let got = tensor.read_range(index..index + 2).expect("read");
    for lane in 0..2 {
        let want = normal_reference(seed, (index + lane) as u64);
        assert!(
            (got[lane] as f64 - want).abs() <= 1e-5,
            "randn(seed {seed}) element {} is {}, the f64 Box–Muller reference {want} \
             (u1 = 1 − {}·2^-24, radius {})",
            index + lane,
            got[lane],
            (1u32 << 24) - 1 - (block(seed, index as u64)[index % 4] >> 8),
            radius(seed, index as u64)
        );
    }
}
