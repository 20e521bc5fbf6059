//! Kernel variants chosen by measurement on the adapter they run on.
//!
//! A kernel family (softmax, matmul, ...) offers variants for a shape class (a bucket of shapes that behave
//! alike); the first candidate is the family's default for that class. At the first use of a (family, class) in
//! a session, the tuner times the candidates on the real operands within a small budget and keeps the winner
//! for the rest of the session; the pick is written to a cache file per adapter (name, backend, driver, crate
//! version) in the user's cache directory, so that the next process starts tuned. Each pick is stored with a
//! checksum of the candidates it won among: a pick made before a variant was added (or retired, or while a
//! session was restricted to fewer) never saw its rivals, so it counts as not cached and is timed again.
//!
//! The cache file is untrusted input (anyone who can write the cache directory controls it): only a regular
//! file of at most `MAX_CACHE_BYTES` is read, and one that is not a whole, well-formed cache of this adapter is
//! ignored and never merged into what is written back.
//!
//! Picks are sticky: the incumbent (the cached pick, else the default) gives way only to a candidate that is
//! clearly faster (under `CLEAR_WIN` of its time), or, in a near tie, faster in each of a few alternated
//! head-to-head runs, so timing noise does not flip a choice from run to run and a steadily faster variant
//! is not kept out by the margin. Every variant is deterministic, so
//! the same pick gives the same bits on every run.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::{Duration, Instant};

use super::Runtime;
use crate::error::{Error, Result};

/// How a session chooses among the variants of a kernel family. The environment variable `WGCOMPUTE_TUNING`
/// (`tune`, `cache`, `defaults` or `retune`) gives it where `SessionOptions::tuning` does not.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Tuning {
    /// The cached pick of this adapter where there is one; elsewhere time the candidates at first use and cache
    /// the winner.
    #[default]
    Tune,
    /// Cached picks where there are, the default variants elsewhere; never time, never write the cache.
    CacheOnly,
    /// The default variants, chosen by shape alone: no timing, no cache. What tests use.
    Defaults,
    /// Time every shape class again at its first use in this session; a cached pick stays unless a new
    /// candidate wins clearly.
    Retune,
}

/// The environment variable that chooses [`Tuning`] when `SessionOptions::tuning` is unset.
pub const TUNING_ENV: &str = "WGCOMPUTE_TUNING";
/// The environment variable that moves the tuning cache (default: the user's cache directory + `wgcompute`).
pub const CACHE_DIR_ENV: &str = "WGCOMPUTE_CACHE_DIR";

impl FromStr for Tuning {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self> {
        match text.trim().to_ascii_lowercase().as_str() {
            "tune" => Ok(Tuning::Tune),
            "cache" | "cache-only" => Ok(Tuning::CacheOnly),
            "defaults" | "default" => Ok(Tuning::Defaults),
            "retune" => Ok(Tuning::Retune),
            _ => Err(Error::InvalidArgument {
                what: "tuning mode",
                given: text.to_string(),
                expected: "one of tune, cache, defaults, retune".to_string(),
            }),
        }
    }
}

impl Tuning {
    /// `WGCOMPUTE_TUNING` if set (an error if it names no mode), else `Tune`.
    pub fn from_env() -> Result<Tuning> {
        match std::env::var(TUNING_ENV) {
            Ok(text) if !text.trim().is_empty() => {
                text.parse().map_err(|_| Error::InvalidArgument {
                    what: "WGCOMPUTE_TUNING",
                    given: text,
                    expected: "one of tune, cache, defaults, retune (or unset it)".to_string(),
                })
            }
            _ => Ok(Tuning::Tune),
        }
    }
}

/// Where a pick came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum PickSource {
    /// The family's default for the shape class (`Tuning::Defaults`, or nothing cached under `CacheOnly`).
    Default,
    /// `SessionOptions::force_variant`.
    Forced,
    /// This adapter's tuning cache.
    Cache,
    /// Timed in this session.
    Timed,
}

/// One variant's measured time.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct VariantTime {
    pub variant: &'static str,
    /// The best of its timed runs, in microseconds; None if it failed to run.
    pub micros: Option<f64>,
}

/// How a session decided one (family, shape class).
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct TuningRecord {
    pub family: &'static str,
    pub class: String,
    pub pick: &'static str,
    pub source: PickSource,
    /// Each candidate's time, in the order timed; empty unless `source` is `Timed`.
    pub times: Vec<VariantTime>,
}

/// The directory of the tuning cache: `$WGCOMPUTE_CACHE_DIR` if set (and not empty), else `wgcompute` in the
/// user's cache directory as [`dirs::cache_dir`] finds it (an absolute `$XDG_CACHE_HOME`, else `~/.cache` on
/// Linux and the other Unixes, `~/Library/Caches` on macOS, the local application data folder
/// (`%LOCALAPPDATA%`) on Windows). None where there is no such directory.
pub fn tuning_cache_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os(CACHE_DIR_ENV).filter(|value| !value.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    dirs::cache_dir().map(|dir| dir.join("wgcompute"))
}

/// What identifies an adapter's picks: they hold for this adapter, driver and crate version only (and each for
/// the candidate set it was chosen among: [`candidate_checksum`]).
pub(crate) fn adapter_key(info: &wgpu::AdapterInfo) -> String {
    key_of(
        &info.name,
        crate::device::backend_name(info.backend),
        &info.driver,
        &info.driver_info,
    )
}

fn key_of(name: &str, backend: &str, driver: &str, driver_info: &str) -> String {
    format!(
        "{name} | {backend} | {driver} {driver_info} | wgcompute {}",
        env!("CARGO_PKG_VERSION")
    )
}

/// The file that holds an adapter's tuned picks under [`tuning_cache_dir`] (the file exists once something was
/// tuned there).
pub fn tuning_cache_file(adapter: &crate::device::AdapterDescription) -> Option<PathBuf> {
    let key = key_of(
        &adapter.name,
        adapter.backend,
        &adapter.driver,
        &adapter.driver_info,
    );
    tuning_cache_dir().map(|dir| cache_file(&dir, &key))
}

/// FNV-1a: stable across Rust versions and processes, unlike the standard library's hasher, which matters for
/// anything written to the cache.
fn fnv1a(hash: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(hash, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// The cache file of an adapter within `dir`: named by a hash of its key, which the file also holds.
pub(crate) fn cache_file(dir: &Path, adapter_key: &str) -> PathBuf {
    let hash = fnv1a(FNV_OFFSET, adapter_key.as_bytes());
    dir.join(format!("tuning-{hash:016x}.txt"))
}

/// The checksum of a candidate set that a cached pick carries. It is of the set, sorted: the order only says
/// which candidate is the default, and a pick that was timed against the same rivals is as good in any order.
/// Each name is closed by a NUL, which no name holds, so that `["ab", "c"]` and `["a", "bc"]` differ.
fn candidate_checksum(candidates: &[&str]) -> u64 {
    let mut names = candidates.to_vec();
    names.sort_unstable();
    names.dedup();
    names.iter().fold(FNV_OFFSET, |hash, name| {
        fnv1a(fnv1a(hash, name.as_bytes()), &[0])
    })
}

/// Version 2 added each pick's candidate checksum. A file of another version is not read (its picks cannot say
/// what they were chosen among), and is replaced by the next write.
const CACHE_HEADER: &str = "wgcompute tuning cache 2";

/// A pick as the cache file holds it: the variant, and the [`candidate_checksum`] of the set it won among.
#[derive(Clone, Debug, PartialEq, Eq)]
struct CachedPick {
    variant: String,
    candidates: u64,
}

/// Picks as the cache file holds them: family → class → pick. Nested, so that a lookup by `&str` allocates
/// nothing: every op looks its class up.
type Picks = HashMap<String, HashMap<String, CachedPick>>;

/// The kernel families a tuner can be asked about, each with every variant it has (`crate::kernel_variants`).
pub(crate) type KnownVariants = Vec<(&'static str, &'static [&'static str])>;

/// The most a cache file may hold. The real one is a few KiB (a line per shape class tuned); anything larger is
/// not one this crate wrote, and reading it whole would cost memory and time in every process that opens a
/// session.
const MAX_CACHE_BYTES: u64 = 64 << 10;

/// The picks in the cache file at `path`, or None where it is not a whole, well-formed cache of this adapter.
/// The file is untrusted input: whatever sits at the path (a FIFO, a device, a huge or binary file) must neither
/// block, nor cost more than `MAX_CACHE_BYTES` to read, nor be written back.
fn read_cache(path: &Path, adapter_key: &str, known: &KnownVariants) -> Option<Picks> {
    let mut file = crate::files::RegularFile::open(path).ok()?;
    if file.size() > MAX_CACHE_BYTES {
        return None;
    }
    // A file growing after it was opened is cut off here; one byte more than the limit tells that it happened.
    let mut bytes = Vec::new();
    file.read_at_most(MAX_CACHE_BYTES + 1, &mut bytes).ok()?;
    if bytes.len() as u64 > MAX_CACHE_BYTES {
        return None;
    }
    parse_cache(&String::from_utf8(bytes).ok()?, adapter_key, known)
}

/// The picks in `text`, or None if it is not a whole, well-formed cache of this adapter (a corrupt or foreign
/// file is ignored, then overwritten). Picks of a family or variant not in `known` are dropped: no lookup could
/// ever use them, and they would otherwise be carried into every rewrite of the file.
fn parse_cache(text: &str, adapter_key: &str, known: &KnownVariants) -> Option<Picks> {
    let mut lines = text.lines();
    if lines.next()? != CACHE_HEADER || lines.next()?.strip_prefix("adapter\t")? != adapter_key {
        return None;
    }
    let is_known = |family: &str, variant: &str| {
        known
            .iter()
            .any(|(name, variants)| *name == family && variants.contains(&variant))
    };
    let mut picks = Picks::new();
    for line in lines.filter(|line| !line.is_empty()) {
        let fields: Vec<&str> = line.split('\t').collect();
        let [family, class, variant, checksum] = fields[..] else {
            return None;
        };
        if [family, class, variant]
            .iter()
            .any(|field| field.is_empty())
        {
            return None;
        }
        // Exactly what `format_cache` writes: `from_str_radix` alone would also take a sign or fewer digits.
        if checksum.len() != 16 || !checksum.bytes().all(|byte| byte.is_ascii_hexdigit()) {
            return None;
        }
        let candidates = u64::from_str_radix(checksum, 16).ok()?;
        if is_known(family, variant) {
            picks.entry(family.to_string()).or_default().insert(
                class.to_string(),
                CachedPick {
                    variant: variant.to_string(),
                    candidates,
                },
            );
        }
    }
    Some(picks)
}

fn format_cache(picks: &Picks, adapter_key: &str) -> String {
    let mut lines: Vec<String> = picks
        .iter()
        .flat_map(|(family, classes)| {
            classes
                .iter()
                .map(move |(class, pick)| (family, class, pick))
        })
        .map(|(family, class, pick)| {
            format!(
                "{family}\t{class}\t{}\t{:016x}",
                pick.variant, pick.candidates
            )
        })
        .collect();
    lines.sort();
    format!(
        "{CACHE_HEADER}\nadapter\t{adapter_key}\n{}\n",
        lines.join("\n")
    )
}

/// A candidate displaces the incumbent only when it takes less than this fraction of the incumbent's time.
const CLEAR_WIN: f64 = 0.8;
/// Timed runs per candidate at most, after one untimed warm-up (which also builds its pipelines).
const MAX_SAMPLES: usize = 5;
/// A candidate stops collecting samples once its runs have taken this long.
const SAMPLE_BUDGET: Duration = Duration::from_millis(15);

/// Chooses variants for one runtime and remembers its choices; reads and writes the adapter's cache file.
#[derive(Default)]
pub(crate) struct Tuner {
    mode: Tuning,
    /// (family, variant) pairs from `SessionOptions::force_variant`.
    forced: Vec<(String, String)>,
    /// The cache file and the key it must hold; None: no cache.
    cache: Option<(PathBuf, String)>,
    /// What a cached pick may name; others are dropped as the cache is read.
    known: KnownVariants,
    cached: Picks,
    /// Per (family, shape class), the picks decided in this session, in order. A class's candidates can narrow
    /// with the shape (a matmul variant whose grid would exceed the adapter's workgroups per dimension drops
    /// out), so a class may hold a second pick for shapes that cannot run its first.
    /// Nested, so that a lookup by `&str` allocates nothing.
    decided: HashMap<&'static str, HashMap<String, Vec<&'static str>>>,
    records: Vec<TuningRecord>,
}

impl Tuner {
    /// A tuner in `mode` whose cache is `cache` (file, adapter key), loaded now unless the mode ignores it; picks
    /// are kept only of the families and variants in `known`.
    pub fn new(
        mode: Tuning,
        forced: Vec<(String, String)>,
        cache: Option<(PathBuf, String)>,
        known: KnownVariants,
    ) -> Tuner {
        let cache = cache.filter(|_| mode != Tuning::Defaults);
        let cached = cache
            .as_ref()
            .and_then(|(path, key)| read_cache(path, key, &known))
            .unwrap_or_default();
        Tuner {
            mode,
            forced,
            cache,
            known,
            cached,
            decided: HashMap::new(),
            records: Vec::new(),
        }
    }

    pub fn records(&self) -> &[TuningRecord] {
        &self.records
    }

    pub fn cache_path(&self) -> Option<&Path> {
        self.cache.as_ref().map(|(path, _)| path.as_path())
    }

    /// The cached pick of `family` for `class`, if it was chosen among exactly `candidates` (else it never
    /// raced some of them, or raced ones that are gone, and does not count).
    fn cached_pick(
        &self,
        family: &str,
        class: &str,
        candidates: &[&'static str],
    ) -> Option<&'static str> {
        let pick = self.cached.get(family)?.get(class)?;
        if pick.candidates != candidate_checksum(candidates) {
            return None;
        }
        // Returned from `candidates`, not the file: the caller needs a `'static` name, and a checksum
        // collision must still never yield a variant that is not a candidate here.
        candidates
            .iter()
            .copied()
            .find(|&variant| variant == pick.variant)
    }

    /// The variant of `family` for `class` among `candidates` (non-empty; the first is the default), timing
    /// them with `measure` (one run's time) when the mode calls for it. Decided once per session.
    pub fn choose(
        &mut self,
        family: &'static str,
        class: String,
        candidates: &[&'static str],
        mut measure: impl FnMut(&'static str) -> Result<Duration>,
    ) -> &'static str {
        let default = candidates[0];
        if let Some(pick) = self.decided_pick(family, &class, candidates) {
            return pick;
        }
        // Only a class's first decision is cached: the one its common shapes take.
        let first_of_class = !self
            .decided
            .get(family)
            .is_some_and(|classes| classes.contains_key(&class));
        let named = |name: &str| candidates.iter().copied().find(|&variant| variant == name);
        let forced = self
            .forced
            .iter()
            .filter(|(forced_family, _)| forced_family == family)
            .find_map(|(_, variant)| named(variant));
        let cached = self.cached_pick(family, &class, candidates);
        let (pick, source, times) = match (forced, cached, self.mode) {
            (Some(variant), _, _) => (variant, PickSource::Forced, Vec::new()),
            _ if candidates.len() == 1 || self.mode == Tuning::Defaults => {
                (default, PickSource::Default, Vec::new())
            }
            (None, Some(variant), Tuning::Tune | Tuning::CacheOnly) => {
                (variant, PickSource::Cache, Vec::new())
            }
            (None, None, Tuning::CacheOnly) => (default, PickSource::Default, Vec::new()),
            (None, incumbent, _) => {
                let times = time_candidates(candidates, &mut measure);
                let incumbent = incumbent.unwrap_or(default);
                let pick = match near_tie(&times, incumbent) {
                    Some(challenger) => rematch(challenger, incumbent, &mut measure),
                    None => decide(&times, incumbent),
                };
                // Nothing ran (a lost device, say): nothing was learnt worth keeping for the next process.
                if first_of_class && times.iter().any(|time| time.micros.is_some()) {
                    self.remember(family, &class, pick, candidate_checksum(candidates));
                }
                (pick, PickSource::Timed, times)
            }
        };
        self.decided
            .entry(family)
            .or_default()
            .entry(class.clone())
            .or_default()
            .push(pick);
        self.records.push(TuningRecord {
            family,
            class,
            pick,
            source,
            times,
        });
        pick
    }

    /// The variants of `family` that are forced.
    pub fn forced<'a>(&'a self, family: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.forced
            .iter()
            .filter(move |(forced_family, _)| forced_family == family)
            .map(|(_, variant)| variant.as_str())
    }

    /// Whether `choose` would time the candidates of `family` for `class` now, so that a caller timing on
    /// scratch operands allocates them only then.
    pub fn would_time(
        &self,
        family: &'static str,
        class: &str,
        candidates: &[&'static str],
    ) -> bool {
        let named = |name: &str| candidates.contains(&name);
        let decided = self.decided_pick(family, class, candidates).is_some();
        let forced = self
            .forced
            .iter()
            .any(|(forced_family, variant)| forced_family == family && named(variant));
        let cached = || self.cached_pick(family, class, candidates).is_some();
        !decided
            && !forced
            && candidates.len() > 1
            && match self.mode {
                Tuning::Defaults | Tuning::CacheOnly => false,
                Tuning::Tune => !cached(),
                Tuning::Retune => true,
            }
    }

    /// The variant of `family` for `class` without timing anything, for kernels that must not run more than once
    /// (in-place updates): the forced variant, else this session's or the cache's pick for `class` (which a
    /// kernel can name after a timed kernel of the same shapes), else the default. Decides nothing.
    pub fn peek(
        &self,
        family: &'static str,
        class: &str,
        candidates: &[&'static str],
    ) -> &'static str {
        let named = |name: &str| candidates.iter().copied().find(|&variant| variant == name);
        self.forced
            .iter()
            .filter(|(forced_family, _)| forced_family == family)
            .find_map(|(_, variant)| named(variant))
            .or_else(|| self.decided_pick(family, class, candidates))
            .or_else(|| {
                self.cached_pick(family, class, candidates)
                    .filter(|_| matches!(self.mode, Tuning::Tune | Tuning::CacheOnly))
            })
            .unwrap_or(candidates[0])
    }

    /// The first pick this session decided for the class that is among `candidates`: the same shape always
    /// gets the same variant, and shapes that can run the class's first pick all do.
    fn decided_pick(
        &self,
        family: &'static str,
        class: &str,
        candidates: &[&'static str],
    ) -> Option<&'static str> {
        self.decided
            .get(family)?
            .get(class)?
            .iter()
            .copied()
            .find(|pick| candidates.contains(pick))
    }

    /// Writes a timed pick to the cache file. A cache that cannot be written only means the next process
    /// times again, so failures are not errors here; `write_cache` reports them to a caller that cares.
    fn remember(&mut self, family: &str, class: &str, variant: &str, candidates: u64) {
        self.cached.entry(family.to_string()).or_default().insert(
            class.to_string(),
            CachedPick {
                variant: variant.to_string(),
                candidates,
            },
        );
        let _ = self.write_cache();
    }

    /// Writes the picks this tuner holds to the cache file, keeping the ones another process wrote meanwhile
    /// (this tuner's own win where both have one). Returns the file, or None where there is no cache to write:
    /// no cache directory, `Tuning::Defaults`, or `Tuning::CacheOnly` (which never writes).
    pub fn write_cache(&mut self) -> Result<Option<PathBuf>> {
        let Some((path, key)) = &self.cache else {
            return Ok(None);
        };
        if self.mode == Tuning::CacheOnly {
            return Ok(None);
        }
        if let Some(on_disk) = read_cache(path, key, &self.known) {
            for (family, classes) in on_disk {
                let known = self.cached.entry(family).or_default();
                for (class, pick) in classes {
                    known.entry(class).or_insert(pick);
                }
            }
        }
        let text = format_cache(&self.cached, key);
        let refused =
            |message: String, source: Option<Box<dyn std::error::Error + Send + Sync>>| {
                Error::TuningCache {
                    path: path.clone(),
                    message,
                    source,
                }
            };
        if let Some(dir) = path.parent() {
            if let Ok(metadata) = std::fs::metadata(dir) {
                if !metadata.is_dir() {
                    return Err(refused(
                        format!(
                            "the cache path {} is {}, not a directory",
                            dir.display(),
                            if metadata.is_file() {
                                "a file"
                            } else {
                                crate::files::kind_of(&metadata.file_type())
                            }
                        ),
                        None,
                    ));
                }
            }
            std::fs::create_dir_all(dir).map_err(|error| {
                refused(
                    format!("cannot make the cache directory {}: {error}", dir.display()),
                    Some(Box::new(error)),
                )
            })?;
        }
        crate::outputs::write_whole(path, text.as_bytes()).map_err(|error| {
            let (message, cause) = error.into_parts();
            refused(message, cause.map(|cause| Box::new(cause) as _))
        })?;
        Ok(Some(path.clone()))
    }
}

/// Each candidate's best time: an untimed warm-up run (which also builds its pipelines), then up to
/// `MAX_SAMPLES` runs within `SAMPLE_BUDGET`. A candidate whose first timed run is over four times the best so
/// far gets no more runs: it cannot win.
fn time_candidates(
    candidates: &[&'static str],
    measure: &mut impl FnMut(&'static str) -> Result<Duration>,
) -> Vec<VariantTime> {
    let mut best_so_far = f64::INFINITY;
    candidates
        .iter()
        .map(|&variant| {
            let micros = (|| -> Result<f64> {
                measure(variant)?;
                let mut best = f64::INFINITY;
                let mut spent = Duration::ZERO;
                for _ in 0..MAX_SAMPLES {
                    let time = measure(variant)?;
                    spent += time;
                    best = best.min(time.as_secs_f64() * 1e6);
                    if spent >= SAMPLE_BUDGET || best > 4.0 * best_so_far {
                        break;
                    }
                }
                Ok(best)
            })()
            .ok();
            if let Some(micros) = micros {
                best_so_far = best_so_far.min(micros);
            }
            VariantTime { variant, micros }
        })
        .collect()
}

/// The fastest candidate when it is ahead of `incumbent`, but not clearly: a near tie, which noise alone can
/// make.
fn near_tie(times: &[VariantTime], incumbent: &'static str) -> Option<&'static str> {
    let time_of = |variant: &str| {
        times
            .iter()
            .find(|time| time.variant == variant)
            .and_then(|time| time.micros)
    };
    let (fastest, micros) = times
        .iter()
        .filter_map(|time| Some((time.variant, time.micros?)))
        .min_by(|a, b| a.1.total_cmp(&b.1))?;
    let incumbent_micros = time_of(incumbent)?;
    (fastest != incumbent && micros < incumbent_micros && micros >= CLEAR_WIN * incumbent_micros)
        .then_some(fastest)
}

/// Head-to-head runs, alternated, that decide a near tie: the challenger must be faster in every one (noise
/// alone gives that one time in 2^REMATCH_ROUNDS), so a consistently faster variant is not kept out by the
/// margin a clear win needs, and a pick is still not flipped by noise.
const REMATCH_ROUNDS: usize = 5;

/// The challenger if it beats `incumbent` in each of `REMATCH_ROUNDS` alternated runs, else the incumbent (also
/// when a run fails).
fn rematch(
    challenger: &'static str,
    incumbent: &'static str,
    measure: &mut impl FnMut(&'static str) -> Result<Duration>,
) -> &'static str {
    let mut won_every_round = || -> Result<bool> {
        for _ in 0..REMATCH_ROUNDS {
            let incumbent_time = measure(incumbent)?;
            if measure(challenger)? >= incumbent_time {
                return Ok(false);
            }
        }
        Ok(true)
    };
    match won_every_round() {
        Ok(true) => challenger,
        _ => incumbent,
    }
}

/// The fastest candidate if it beats `incumbent` clearly (or the incumbent failed), else the incumbent.
fn decide(times: &[VariantTime], incumbent: &'static str) -> &'static str {
    let fastest = times
        .iter()
        .filter_map(|time| Some((time.variant, time.micros?)))
        .min_by(|a, b| a.1.total_cmp(&b.1));
    let incumbent_time = times
        .iter()
        .find(|time| time.variant == incumbent)
        .and_then(|time| time.micros);
    match (fastest, incumbent_time) {
        (Some((variant, micros)), Some(incumbent_micros))
            if micros < CLEAR_WIN * incumbent_micros =>
        {
            variant
        }
        (Some((variant, _)), None) => variant,
        _ => incumbent,
    }
}

impl Runtime {
    /// The variant of `family` to run for `class`: the tuner's pick, timed here on the real operands by running
    /// `run` (which records one variant's work) when the pick is not yet known. Work recorded before is
    /// finished first, so that it is not timed.
    pub fn choose_variant(
        &mut self,
        family: &'static str,
        class: String,
        candidates: &[&'static str],
        mut run: impl FnMut(&mut Runtime, &'static str) -> Result<()>,
    ) -> &'static str {
        let mut tuner = std::mem::take(&mut self.tuner);
        // A failure while timing (a device lost, say) drops that candidate; the real dispatch that follows
        // reports it.
        let pick = tuner.choose(family, class, candidates, |variant| {
            self.sync()?;
            let start = Instant::now();
            run(self, variant)?;
            self.sync()?;
            Ok(start.elapsed())
        });
        self.tuner = tuner;
        pick
    }

    /// The variants of `family` that `SessionOptions::force_variant` names.
    pub fn forced_variants<'a>(&'a self, family: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.tuner.forced(family)
    }

    /// Whether the device was opened with subgroup operations (kernels using them are candidates only then).
    pub fn has_subgroups(&self) -> bool {
        self.device.features().contains(wgpu::Features::SUBGROUP)
    }

    /// Whether [`Runtime::choose_variant`] would time `family`'s candidates for `class` now.
    pub fn would_time_variants(
        &self,
        family: &'static str,
        class: &str,
        candidates: &[&'static str],
    ) -> bool {
        self.tuner.would_time(family, class, candidates)
    }

    /// The variant of `family` for `class`, never timed here: see [`Tuner::peek`].
    pub fn peek_variant(
        &self,
        family: &'static str,
        class: &str,
        candidates: &[&'static str],
    ) -> &'static str {
        self.tuner.peek(family, class, candidates)
    }

    pub fn tuning_cache_file(&self) -> Option<PathBuf> {
        self.tuner.cache_path().map(Path::to_path_buf)
    }

    /// See [`Tuner::write_cache`].
    pub fn write_tuning_cache(&mut self) -> Result<Option<PathBuf>> {
        self.tuner.write_cache()
    }

    /// How this runtime has decided each (family, shape class) so far.
    pub fn tuning_records(&self) -> Vec<TuningRecord> {
        self.tuner.records().to_vec()
    }
}

/// A shape class from sizes: each size rounded up to a power of 4, so that shapes within a factor of 4 share
/// their pick.
pub(crate) fn size_bucket(size: usize) -> usize {
    let mut bucket = 1usize;
    while bucket < size {
        bucket = bucket.saturating_mul(4);
    }
    bucket
}

#[cfg(test)]
mod tests;
