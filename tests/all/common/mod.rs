//! Helpers shared by the integration tests: the backends to run a test on, seeded random data, comparisons with
//! f64 references, and the lock that keeps other tests' buffers out of a memory measurement.

#[cfg(feature = "cli")]
pub mod cli;

use std::any::Any;
use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use wgcompute::{AdapterSelector, Session, SessionOptions, Tuning};

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

/// The backends a test runs on. Vulkan must be present (CI installs lavapipe, and a test never skips silently)
/// and comes first; GL follows where present, unless WGCOMPUTE_TEST_NO_GL is set.
pub fn backends() -> Vec<Backend> {
    let adapters = wgcompute::list_adapters();
    assert!(
        adapters.iter().any(|adapter| adapter.backend == "vulkan"),
        "no Vulkan adapter found; install lavapipe (apt-get install mesa-vulkan-drivers). Found: {adapters:?}"
    );
    let mut backends = vec![Backend::new("vulkan", wgpu::Backend::Vulkan)];
    if adapters.iter().any(|adapter| adapter.backend == "gl")
        && std::env::var_os("WGCOMPUTE_TEST_NO_GL").is_none()
    {
        backends.push(Backend::new("gl", wgpu::Backend::Gl));
    }
    backends
}

/// Runs `body` on each backend of [`backends`] in turn. A failure on one backend does not stop the others; the
/// test then fails with each failing backend's message, prefixed "on vulkan: " or "on gl: " (the original
/// panic, with its location, is printed above it). Holds the memory lock shared, as every test that uses a
/// device must.
pub fn for_each_backend(mut body: impl FnMut(&Backend)) {
    let _shared = memory_lock_shared();
    let failures: Vec<String> = backends()
        .iter()
        .filter_map(|backend| {
            panic::catch_unwind(AssertUnwindSafe(|| body(backend)))
                .err()
                .map(|payload| format!("on {}: {}", backend.name, panic_message(&*payload)))
        })
        .collect();
    if !failures.is_empty() {
        panic!("{}", failures.join("\n"));
    }
}

/// Runs `body` on Vulkan alone (a test too large or slow for llvmpipe's GL, or one whose point does not depend on
/// the backend); a failure is prefixed "on vulkan: ". Holds the memory lock shared.
pub fn on_vulkan(body: impl FnOnce(&Backend)) {
    let _shared = memory_lock_shared();
    let vulkan = backends().swap_remove(0);
    if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| body(&vulkan))) {
        panic!("on {}: {}", vulkan.name, panic_message(&*payload));
    }
}

fn panic_message(payload: &(dyn Any + Send)) -> &str {
    payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("a panic without a message")
}

// --- the memory lock ---

/// Tests that read the process's resident memory hold this exclusively ([`memory_lock`]); every other test that
/// allocates on a device holds it shared ([`for_each_backend`] and [`on_vulkan`] do), so that while a figure is
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

/// Waits until no other test uses a device, and keeps them from starting until dropped. Take it first, before
/// [`for_each_backend`] or [`on_vulkan`], which then run under it.
pub fn memory_lock() -> MemoryLock {
    assert!(
        !HOLDS_MEMORY.get(),
        "memory_lock inside for_each_backend or on_vulkan: take it first"
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

/// For a test that uses a device outside [`for_each_backend`] and [`on_vulkan`]: waits while a memory
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

/// SplitMix64: small, seedable, good enough for test data.
pub struct Rng(u64);

impl Rng {
    /// A fixed seed. Only the binary's tests use one, so without the `cli` feature nothing does.
    #[cfg_attr(not(feature = "cli"), allow(dead_code))]
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
