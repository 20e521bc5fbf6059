//! Helpers shared by the integration tests: the backends to run a test on, seeded random data, comparisons with
//! the f64 references (`reference` holds them), and the lock that keeps other tests' buffers out of a memory
//! measurement.

pub mod elementwise;
pub mod reference;

use std::cell::Cell;
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use wgcompute::{AdapterSelector, GradientTape, Session, SessionOptions, Tensor, Tuning};

/// A backend a test runs on: its name, which failures carry ("vulkan", "gl"), and the selector that opens
/// sessions on it.
#[derive(Clone, Debug)]
pub struct Backend {
    pub name: &'static str,
    pub selector: AdapterSelector,
}

impl Backend {
    fn new(name: &'static str, backend: wgpu::Backend) -> Self {
        Self {
            name,
            selector: AdapterSelector::Backend(backend),
        }
    }

    pub fn is_gl(&self) -> bool {
        matches!(self.selector, AdapterSelector::Backend(wgpu::Backend::Gl))
    }

    /// Default options on this backend, to add to: the default kernel variants, untimed and uncached, so that a
    /// test runs the same kernels on every machine.
    pub fn options(&self) -> SessionOptions {
        SessionOptions::default()
            .adapter(self.selector.clone())
            .tuning(Tuning::Defaults)
    }

    pub fn open(&self) -> Session {
        Session::open(self.options())
            .unwrap_or_else(|error| panic!("opening a session on {}: {error}", self.name))
    }

    /// A poisoned session that runs `variant` of kernel `family` wherever the shape allows it.
    pub fn poisoned_with(&self, family: &str, variant: &str) -> Session {
        Session::open(
            self.options()
                .poison_outputs(true)
                .force_variant(family, variant),
        )
        .unwrap_or_else(|error| {
            panic!(
                "opening a poisoned session with {family}/{variant} on {}: {error}",
                self.name
            )
        })
    }

    /// A session whose op outputs start NaN-filled, so that an element a kernel fails to write fails the test.
    pub fn poisoned(&self) -> Session {
        Session::open(self.options().poison_outputs(true))
            .unwrap_or_else(|error| panic!("opening a poisoned session on {}: {error}", self.name))
    }
}

/// The GL backend, or `None` where WGCOMPUTE_TEST_NO_GL is set. A missing GL adapter fails the test: CI installs
/// llvmpipe, and a test that passed without running would claim a backend that nothing checked. The variable
/// exists for machines without GL; each test it turns away says so on the terminal, past libtest's capture (a
/// plain `eprintln!` shows only with a failure), and then passes, as libtest has no way to skip at run time. To
/// leave the GL tests out without any of them passing, filter instead: `cargo test --test all -- --skip ::gl`.
pub fn gl(test: &str) -> Option<Backend> {
    if std::env::var_os("WGCOMPUTE_TEST_NO_GL").is_some() {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "{test}: not run, WGCOMPUTE_TEST_NO_GL is set"
        );
        return None;
    }
    let adapters = wgcompute::list_adapters();
    assert!(
        adapters.iter().any(|adapter| adapter.backend == "gl"),
        "{test} needs a GL adapter and none was found; install Mesa's llvmpipe (on Debian/Ubuntu: apt-get install \
         libegl1 libegl-mesa0 libgl1-mesa-dri), or set WGCOMPUTE_TEST_NO_GL=1, or leave the GL tests out with \
         `--skip ::gl`. Found: {adapters:?}"
    );
    Some(Backend::new("gl", wgpu::Backend::Gl))
}

/// The Vulkan backend, which must be present: CI installs lavapipe, and a test never skips silently.
pub fn vulkan() -> Backend {
    let adapters = wgcompute::list_adapters();
    assert!(
        adapters.iter().any(|adapter| adapter.backend == "vulkan"),
        "no Vulkan adapter found; install lavapipe (apt-get install mesa-vulkan-drivers). Found: {adapters:?}"
    );
    Backend::new("vulkan", wgpu::Backend::Vulkan)
}

/// How a test holds the memory lock while it runs.
#[derive(Clone, Copy)]
pub enum Hold {
    /// It allocates on a device: no measurement may run meanwhile.
    Shared,
    /// It measures the process's resident memory: nothing else may allocate meanwhile.
    Exclusive,
}

/// Runs one test's body under the memory lock: takes the lock, then finds the backends (listing adapters opens
/// drivers, which must not overlap another test's memory measurement), then runs `body` on them; `None` (a GL
/// test turned away by WGCOMPUTE_TEST_NO_GL) runs nothing. What [`per_backend`], [`vulkan_only`] and
/// [`across_backends`] expand to.
pub fn run<T>(hold: Hold, backends: impl FnOnce() -> Option<T>, body: impl FnOnce(&T)) {
    let _lock = match hold {
        Hold::Shared => (Some(memory_lock_shared()), None),
        Hold::Exclusive => (None, Some(memory_lock())),
    };
    if let Some(backends) = backends() {
        body(&backends);
    }
}

/// Runs one test's body with one kernel variant forced: `body` gets the backend and the variant. Before it runs,
/// checks that the variant is still one of the family's, so a renamed variant fails here rather than running the
/// default under the old name.
pub fn run_variant(
    backend: impl FnOnce() -> Option<Backend>,
    family: &str,
    variant: &str,
    body: impl FnOnce(&Backend, &str),
) {
    let known = variants_of(family);
    assert!(
        known.contains(&variant),
        "{family} has no variant {variant}: it has {known:?}"
    );
    run(Hold::Shared, backend, |backend| body(backend, variant));
}

/// Fails unless `here`, the variants a test declares, are the ones the library lists for `family`, in any order.
pub fn expect_variants(family: &str, here: &[&str]) {
    let mut listed = variants_of(family).to_vec();
    let mut here = here.to_vec();
    listed.sort_unstable();
    here.sort_unstable();
    assert_eq!(here, listed, "the variants of {family} tested here");
}

/// The variants the library lists for `family`.
pub fn variants_of(family: &str) -> &'static [&'static str] {
    wgcompute::kernel_variants()
        .into_iter()
        .find(|(name, _)| *name == family)
        .unwrap_or_else(|| panic!("no kernel family {family}"))
        .1
}

/// Declares the tests of `fn $test(backend: &Backend)`, one per backend: `$test::vulkan` and `$test::gl`, so that
/// a failure names its backend and a filter picks one (`cargo test --test all ::vulkan`, `-- ::gl`, or
/// `-- --skip ::gl`). The tests hold the memory lock shared; `per_backend!($test, measures_memory)` holds it
/// exclusively, for a test that reads the process's resident memory.
///
/// `per_backend!($test, $family: $variant, …)` declares one test per backend and variant instead,
/// `$test::vulkan::$variant`, for `fn $test(backend: &Backend, variant: &str)` that forces `variant` of kernel
/// family `$family`; a further test, `$test::lists_every_variant`, fails when the library's list of the family's
/// variants is not the one written here, so a new variant cannot go untested.
macro_rules! per_backend {
    ($test:ident) => {
        $crate::common::per_backend!(@backends $test, Shared);
    };
    ($test:ident, measures_memory) => {
        $crate::common::per_backend!(@backends $test, Exclusive);
    };
    ($test:ident, $family:literal: $($variant:ident),+ $(,)?) => {
        mod $test {
            $crate::common::backend_tests!(@vulkan_variants $test, $family: $($variant),+);
            mod gl {
                $(
                    #[test]
                    fn $variant() {
                        $crate::common::run_variant(
                            || $crate::common::gl(concat!(module_path!(), "::", stringify!($variant))),
                            $family,
                            stringify!($variant),
                            super::super::$test,
                        );
                    }
                )+
            }
            $crate::common::backend_tests!(@lists $family: $($variant),+);
        }
    };
    (@backends $test:ident, $hold:ident) => {
        mod $test {
            $crate::common::backend_tests!(@vulkan $test, $hold);
            #[test]
            fn gl() {
                $crate::common::run(
                    $crate::common::Hold::$hold,
                    || $crate::common::gl(concat!(module_path!(), "::gl")),
                    super::$test,
                );
            }
        }
    };
}
pub(crate) use per_backend;

/// The pieces [`per_backend`] and [`vulkan_only`] share, expanded inside the module named after the test: its
/// Vulkan test, its Vulkan test per variant, and the check that those variants are the family's.
macro_rules! backend_tests {
    (@vulkan $test:ident, $hold:ident) => {
        #[test]
        fn vulkan() {
            $crate::common::run(
                $crate::common::Hold::$hold,
                || Some($crate::common::vulkan()),
                super::$test,
            );
        }
    };
    (@vulkan_variants $test:ident, $family:literal: $($variant:ident),+) => {
        mod vulkan {
            $(
                #[test]
                fn $variant() {
                    $crate::common::run_variant(
                        || Some($crate::common::vulkan()),
                        $family,
                        stringify!($variant),
                        super::super::$test,
                    );
                }
            )+
        }
    };
    (@lists $family:literal: $($variant:ident),+) => {
        #[test]
        fn lists_every_variant() {
            $crate::common::expect_variants($family, &[$(stringify!($variant)),+]);
        }
    };
}
pub(crate) use backend_tests;

/// Declares the one test of `fn $test(backend: &Backend)` that runs on Vulkan alone (a test too large or slow for
/// llvmpipe's GL, or one whose point does not depend on the backend): `$test::vulkan`, so that its name says
/// where it ran. `vulkan_only!($test, measures_memory)` holds the memory lock exclusively, and
/// `vulkan_only!($test, $family: $variant, …)` declares a test per variant, both as in [`per_backend`].
macro_rules! vulkan_only {
    ($test:ident) => {
        $crate::common::vulkan_only!(@hold $test, Shared);
    };
    ($test:ident, measures_memory) => {
        $crate::common::vulkan_only!(@hold $test, Exclusive);
    };
    ($test:ident, $family:literal: $($variant:ident),+ $(,)?) => {
        mod $test {
            $crate::common::backend_tests!(@vulkan_variants $test, $family: $($variant),+);
            $crate::common::backend_tests!(@lists $family: $($variant),+);
        }
    };
    (@hold $test:ident, $hold:ident) => {
        mod $test {
            $crate::common::backend_tests!(@vulkan $test, $hold);
        }
    };
}
pub(crate) use vulkan_only;

/// Declares the one test of `fn $test(vulkan: &Backend, gl: &Backend)`, whose point is two backends at once (a
/// job moved between them, results that must agree): `$test::gl_with_vulkan`, named so that the filters of the
/// GL tests (`::gl`, `--skip ::gl`) take it and `::vulkan` does not. Where WGCOMPUTE_TEST_NO_GL is set it does not
/// run, and says so, as [`gl`] describes. `across_backends!($test, measures_memory)` holds the memory
/// lock exclusively, as in [`per_backend`].
macro_rules! across_backends {
    ($test:ident) => {
        $crate::common::across_backends!(@hold $test, Shared);
    };
    ($test:ident, measures_memory) => {
        $crate::common::across_backends!(@hold $test, Exclusive);
    };
    (@hold $test:ident, $hold:ident) => {
        mod $test {
            #[test]
            fn gl_with_vulkan() {
                $crate::common::run(
                    $crate::common::Hold::$hold,
                    || {
                        let vulkan = $crate::common::vulkan();
                        $crate::common::gl(concat!(module_path!(), "::gl_with_vulkan")).map(|gl| (vulkan, gl))
                    },
                    |(vulkan, gl)| super::$test(vulkan, gl),
                );
            }
        }
    };
}
pub(crate) use across_backends;

// --- the memory lock ---

/// Tests that read the process's resident memory hold this exclusively ([`memory_lock`]); every other test that
/// allocates on a device holds it shared (the tests [`per_backend`] and [`vulkan_only`] declare do), so that while a figure is
/// read no other test's buffers come or go. All tests share one process.
static MEMORY: RwLock<()> = RwLock::new(());

thread_local! {
    /// Whether this thread already holds MEMORY, shared or exclusive (a second acquisition could deadlock).
    static HOLDS_MEMORY: Cell<bool> = const { Cell::new(false) };
}

/// The exclusive hold of a test that measures the process's resident memory.
pub struct MemoryLock {
    _guard: RwLockWriteGuard<'static, ()>,
}

impl Drop for MemoryLock {
    fn drop(&mut self) {
        HOLDS_MEMORY.set(false);
    }
}

/// Waits until no other test uses a device, and keeps them from starting until dropped. A test declared with
/// `measures_memory` takes it before its body runs.
pub fn memory_lock() -> MemoryLock {
    assert!(
        !HOLDS_MEMORY.get(),
        "memory_lock under a shared hold: declare the test with `measures_memory` instead"
    );
    let guard = MEMORY.write().unwrap_or_else(PoisonError::into_inner);
    HOLDS_MEMORY.set(true);
    MemoryLock { _guard: guard }
}

/// A shared hold; nothing when this thread already holds the lock.
pub struct MemoryLockShared {
    guard: Option<RwLockReadGuard<'static, ()>>,
}

impl Drop for MemoryLockShared {
    fn drop(&mut self) {
        if self.guard.take().is_some() {
            HOLDS_MEMORY.set(false);
        }
    }
}

/// For a test that uses a device and is not declared with [`per_backend`] or [`vulkan_only`]: waits while a memory
/// measurement runs, and holds it off until dropped.
pub fn memory_lock_shared() -> MemoryLockShared {
    if HOLDS_MEMORY.get() {
        return MemoryLockShared { guard: None };
    }
    let guard = MEMORY.read().unwrap_or_else(PoisonError::into_inner);
    HOLDS_MEMORY.set(true);
    MemoryLockShared { guard: Some(guard) }
}

pub fn resident() -> u64 {
    wgcompute::device::process_resident_bytes().expect("resident memory is readable on Linux")
}

pub const MIB: u64 = 1 << 20;

// --- comparisons and data ---

/// The number of elements of a shape.
pub fn count(shape: &[usize]) -> usize {
    shape.iter().product()
}

pub fn widen(data: &[f32]) -> Vec<f64> {
    data.iter().map(|&value| value as f64).collect()
}

/// ‖got − want‖ / ‖want‖ (the absolute error where want is zero); any non-finite element is an infinite error.
pub fn relative_error<T: Copy + Into<f64>>(got: &[T], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len(), "element counts differ");
    if got.iter().any(|&x| !x.into().is_finite()) {
        return f64::INFINITY;
    }
    let diff: f64 = got
        .iter()
        .zip(want)
        .map(|(&g, &w)| (g.into() - w).powi(2))
        .sum();
    let norm: f64 = want.iter().map(|w| w * w).sum();
    if norm == 0.0 {
        diff.sqrt()
    } else {
        (diff / norm).sqrt()
    }
}

/// Relative Frobenius error of `got` against `want`, measured against `magnitude`: for each element, the sum of
/// the absolute values of the terms that formed it. Where no cancellation happened that is the value itself; where
/// terms cancelled (a moment that crossed zero, a gradient `p·Σy − y` whose two terms nearly agree) it is the
/// scale that f32 rounding errors are proportional to, so the measure does not flake on a fresh seed.
pub fn error_against_magnitude(got: &[f32], want: &[f64], magnitude: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len(), "element counts differ");
    assert_eq!(got.len(), magnitude.len(), "element counts differ");
    if got.iter().any(|x| !x.is_finite()) {
        return f64::INFINITY;
    }
    let diff: f64 = got
        .iter()
        .zip(want)
        .map(|(&g, w)| (g as f64 - w).powi(2))
        .sum();
    let norm: f64 = magnitude.iter().map(|m| m * m).sum();
    if norm == 0.0 {
        // Nothing to be relative to: the absolute error, as `relative_error` gives.
        diff.sqrt()
    } else {
        (diff / norm).sqrt()
    }
}

/// The tape's side of a gradient check: runs `forward` on `params` watched by a tape (each through
/// `GradientTape::watch_parameter`, in order), then cost = Σ w·y with `weights` laid out in y's shape, so that
/// every element has its own upstream gradient, and gives y's value and each parameter's gradient. An error of
/// `forward` (an op the tape refuses) comes back as it is; anything failing after it fails the test.
pub fn weighted_cost(
    session: &Session,
    params: &[Arc<Tensor>],
    weights: &[f32],
    forward: impl FnOnce(&[Tensor]) -> wgcompute::Result<Tensor>,
) -> wgcompute::Result<(Vec<f32>, Vec<Vec<f32>>)> {
    let tape = GradientTape::new();
    let handles: Vec<Tensor> = params
        .iter()
        .map(|param| tape.watch_parameter(param).expect("watch a parameter"))
        .collect();
    let y = forward(&handles)?;
    let w = session
        .upload(weights, y.shape())
        .expect("weights in y's shape");
    let value = y.to_vec().expect("read y");
    let cost = y.mul(&w).expect("weighting").sum(None).expect("sum");
    let gradients = tape.backward(&cost).expect("backward");
    let gradients = params
        .iter()
        .enumerate()
        .map(|(which, param)| {
            gradients
                .of(param)
                .unwrap_or_else(|| panic!("parameter {which} took no part"))
                .to_vec()
                .expect("read a gradient")
        })
        .collect();
    Ok((value, gradients))
}

/// The largest difference from `want`, against the larger of 1 and `want`'s largest magnitude.
pub fn scaled_error(got: &[f32], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len(), "element counts differ");
    let scale = want.iter().fold(1.0f64, |top, w| top.max(w.abs()));
    got.iter()
        .zip(want)
        .map(|(&g, w)| {
            if g.is_finite() {
                (g as f64 - w).abs()
            } else {
                f64::INFINITY
            }
        })
        .fold(0.0, f64::max)
        / scale
}

/// Fails, naming `what` and both vectors, where [`scaled_error`] is over `tolerance`.
pub fn expect_close(what: &str, got: &[f32], want: &[f64], tolerance: f64) {
    let error = scaled_error(got, want);
    assert!(
        error <= tolerance,
        "{what}: error {error:e} over {tolerance:e}\n got {got:?}\nwant {want:?}"
    );
}

/// Indices to check in a long tensor: both ends, both sides of every multiple of 2^25 (lavapipe's 128 MiB
/// binding holds 2^25 values) and `random` random ones.
pub fn sample_indices(rng: &mut Rng, len: usize, random: usize) -> Vec<usize> {
    let mut indices: Vec<usize> = (0..8).chain(len - 8..len).collect();
    let mut boundary = 1usize << 25;
    while boundary < len {
        indices.extend(boundary - 8..(boundary + 8).min(len));
        boundary += 1 << 25;
    }
    indices.extend((0..random).map(|_| (rng.next_u64() % len as u64) as usize));
    indices
}

/// (outer, len, inner) of a shape around an axis (`None`: every element in one row), as the reductions see it.
pub fn lanes_of(shape: &[usize], axis: Option<usize>) -> (usize, usize, usize) {
    match axis {
        None => (1, shape.iter().product(), 1),
        Some(axis) => (
            shape[..axis].iter().product(),
            shape[axis],
            shape[axis + 1..].iter().product(),
        ),
    }
}

/// The shape of a reduction's result: `shape` without `axis` (`None`: 0-d).
pub fn reduced_shape(shape: &[usize], axis: Option<usize>) -> Vec<usize> {
    match axis {
        None => Vec::new(),
        Some(axis) => [&shape[..axis], &shape[axis + 1..]].concat(),
    }
}

/// SplitMix64: small, seedable, good enough for test data.
pub struct Rng(u64);

impl Rng {
    /// A fixed seed.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// A seed that differs per run, printed so that a failure can be replayed: `WGCOMPUTE_TEST_SEED=<seed>`
    /// gives every fresh generator that seed (run the one failing test with it).
    pub fn fresh(test: &str) -> Self {
        let replayed = std::env::var("WGCOMPUTE_TEST_SEED").ok().map(|text| {
            text.trim().parse::<u64>().unwrap_or_else(|_| {
                panic!("WGCOMPUTE_TEST_SEED is '{text}', not a seed printed by a test")
            })
        });
        let seed = replayed.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|elapsed| elapsed.as_nanos() as u64)
                .unwrap_or(1)
        });
        eprintln!("{test}: seed {seed}");
        Self(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [low, high).
    pub fn uniform(&mut self, low: f32, high: f32) -> f32 {
        let unit = (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
        low + (high - low) * unit
    }

    pub fn vec(&mut self, len: usize, low: f32, high: f32) -> Vec<f32> {
        (0..len).map(|_| self.uniform(low, high)).collect()
    }
}
