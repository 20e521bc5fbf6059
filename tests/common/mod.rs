//! Helpers shared by the integration tests: the backends to run on, seeded random data, and a lock for tests
//! that measure process memory.
#![allow(dead_code)]

pub mod cli;

use std::sync::{Mutex, MutexGuard};

use wgcompute::{AdapterSelector, Session, SessionOptions};

/// Vulkan must be present (CI installs lavapipe, and a test never skips silently); GL runs too where present.
pub fn backends() -> Vec<AdapterSelector> {
    let adapters = wgcompute::list_adapters();
    assert!(
        adapters.iter().any(|adapter| adapter.backend == "vulkan"),
        "no Vulkan adapter found; install lavapipe (apt-get install mesa-vulkan-drivers). Found: {adapters:?}"
    );
    let mut selectors = vec![AdapterSelector::Backend(wgpu_backend("vulkan"))];
    if adapters.iter().any(|adapter| adapter.backend == "gl")
        && std::env::var_os("WGCOMPUTE_TEST_NO_GL").is_none()
    {
        selectors.push(AdapterSelector::Backend(wgpu_backend("gl")));
    }
    selectors
}

fn wgpu_backend(name: &str) -> wgpu::Backend {
    match name {
        "gl" => wgpu::Backend::Gl,
        _ => wgpu::Backend::Vulkan,
    }
}

pub fn open(selector: &AdapterSelector) -> Session {
    Session::open(SessionOptions::default().adapter(selector.clone()))
        .unwrap_or_else(|error| panic!("opening a session on {selector:?}: {error}"))
}

/// A session whose op outputs start NaN-filled, so that an element a kernel fails to write fails the test.
pub fn poisoned(selector: &AdapterSelector) -> Session {
    Session::open(
        SessionOptions::default()
            .adapter(selector.clone())
            .poison_outputs(true),
    )
    .unwrap_or_else(|error| panic!("opening a poisoned session on {selector:?}: {error}"))
}

/// ‖got − want‖ / ‖want‖ (the absolute error where want is zero); any non-finite element is an infinite error.
pub fn relative_error(got: &[f32], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len(), "element counts differ");
    if got.iter().any(|x| !x.is_finite()) {
        return f64::INFINITY;
    }
    let diff: f64 = got
        .iter()
        .zip(want)
        .map(|(&g, &w)| (g as f64 - w).powi(2))
        .sum();
    let norm: f64 = want.iter().map(|w| w * w).sum();
    if norm == 0.0 {
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

static MEMORY_LOCK: Mutex<()> = Mutex::new(());

/// Serialises tests that read the process's resident memory, so other tests' buffers do not blur the figure.
pub fn memory_lock() -> MutexGuard<'static, ()> {
    MEMORY_LOCK
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

pub fn resident() -> u64 {
    wgcompute::device::process_resident_bytes().expect("resident memory is readable on Linux")
}

/// SplitMix64: small, seedable, good enough for test data.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// A seed that differs per run, printed so that a failure can be replayed.
    pub fn fresh(test: &str) -> Self {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|elapsed| elapsed.as_nanos() as u64)
            .unwrap_or(1);
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

pub const MIB: u64 = 1 << 20;
