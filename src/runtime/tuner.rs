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

/// Picks as the cache file holds them: (family, class) → pick.
type Picks = HashMap<(String, String), CachedPick>;

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
            picks.insert(
                (family.to_string(), class.to_string()),
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
        .map(|((family, class), pick)| {
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
    decided: HashMap<(&'static str, String), Vec<&'static str>>,
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
        let pick = self.cached.get(&(family.to_string(), class.to_string()))?;
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
        let first_of_class = !self.decided.contains_key(&(family, class.clone()));
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
            .entry((family, class.clone()))
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
            .get(&(family, class.to_string()))?
            .iter()
            .copied()
            .find(|pick| candidates.contains(pick))
    }

    /// Writes a timed pick to the cache file. A cache that cannot be written only means the next process
    /// times again, so failures are not errors here; `write_cache` reports them to a caller that cares.
    fn remember(&mut self, family: &str, class: &str, variant: &str, candidates: u64) {
        self.cached.insert(
            (family.to_string(), class.to_string()),
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
            for (entry, pick) in on_disk {
                self.cached.entry(entry).or_insert(pick);
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
mod tests {
    use super::*;

    const CANDIDATES: &[&str] = &["default", "fast", "faster"];
    /// `candidate_checksum(CANDIDATES)`: FNV-1a of `default\0fast\0faster\0`, worked out apart from this code.
    const STABLE_CHECKSUM: &str = "82a863a026d4a91b";

    /// A fake timer: each variant's runs take the given microseconds, in turn (the last repeats); counts runs.
    struct FakeTimer {
        times: HashMap<&'static str, Vec<u64>>,
        runs: HashMap<&'static str, usize>,
    }

    impl FakeTimer {
        fn new(times: &[(&'static str, &[u64])]) -> Self {
            Self {
                times: times.iter().map(|&(v, t)| (v, t.to_vec())).collect(),
                runs: HashMap::new(),
            }
        }

        fn measure(&mut self, variant: &'static str) -> Result<Duration> {
            let run = self.runs.entry(variant).or_default();
            let times = &self.times[variant];
            let micros = times[(*run).min(times.len() - 1)];
            *run += 1;
            Ok(Duration::from_micros(micros))
        }

        fn total_runs(&self) -> usize {
            self.runs.values().sum()
        }
    }

    fn scratch_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("wgcompute-tuner-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    /// The families the tests' tuners know.
    fn known() -> KnownVariants {
        vec![("family", CANDIDATES)]
    }

    /// A cache line for `family` as `format_cache` writes it, chosen among `CANDIDATES`.
    fn line(class: &str, variant: &str) -> String {
        format!(
            "family\t{class}\t{variant}\t{:016x}\n",
            candidate_checksum(CANDIDATES)
        )
    }

    /// A whole cache file of the tests' adapter holding `lines`.
    fn cache_text(lines: &str) -> String {
        format!("{CACHE_HEADER}\nadapter\ttest adapter\n{lines}")
    }

    fn tuner_in(dir: &Path, mode: Tuning) -> Tuner {
        Tuner::new(
            mode,
            Vec::new(),
            Some((cache_file(dir, "test adapter"), "test adapter".to_string())),
            known(),
        )
    }

    #[test]
    fn it_picks_the_fastest_and_keeps_the_pick_for_the_session() {
        let dir = scratch_dir("fastest");
        let mut tuner = tuner_in(&dir, Tuning::Tune);
        let mut timer =
            FakeTimer::new(&[("default", &[1000]), ("fast", &[500]), ("faster", &[200])]);
        let pick = tuner.choose("family", "class".into(), CANDIDATES, |v| timer.measure(v));
        assert_eq!(pick, "faster");
        let runs = timer.total_runs();
        assert!(runs >= 3, "each candidate ran: {runs}");
        // The same class again: decided, no more timing, even if the times change.
        timer.times.insert("default", vec![1]);
        let again = tuner.choose("family", "class".into(), CANDIDATES, |v| timer.measure(v));
        assert_eq!(again, "faster");
        assert_eq!(
            timer.total_runs(),
            runs,
            "a decided class is not timed again"
        );
        // Another class is timed on its own.
        let other = tuner.choose("family", "other".into(), CANDIDATES, |v| timer.measure(v));
        assert_eq!(other, "default");
        let records = tuner.records();
        assert_eq!(records.len(), 2);
        assert_eq!(records[0].source, PickSource::Timed);
        assert_eq!(records[0].times.len(), 3);
        assert_eq!(records[0].times[2].micros, Some(200.0));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn would_time_agrees_with_whether_choose_times() {
        let dir = scratch_dir("would-time");
        let mut timer =
            FakeTimer::new(&[("default", &[1000]), ("fast", &[300]), ("faster", &[900])]);
        let mut tune = tuner_in(&dir, Tuning::Tune);
        assert!(tune.would_time("family", "class", CANDIDATES));
        assert!(!tune.would_time("family", "class", &["default"]));
        tune.choose("family", "class".into(), CANDIDATES, |v| timer.measure(v));
        assert!(!tune.would_time("family", "class", CANDIDATES), "decided");
        // The next process finds the pick cached: Tune takes it, Retune times again.
        assert!(!tuner_in(&dir, Tuning::Tune).would_time("family", "class", CANDIDATES));
        assert!(tuner_in(&dir, Tuning::Retune).would_time("family", "class", CANDIDATES));
        assert!(!tuner_in(&dir, Tuning::Defaults).would_time("family", "other", CANDIDATES));
        assert!(!tuner_in(&dir, Tuning::CacheOnly).would_time("family", "other", CANDIDATES));
        let forced = Tuner::new(
            Tuning::Retune,
            vec![("family".to_string(), "fast".to_string())],
            None,
            Vec::new(),
        );
        assert!(!forced.would_time("family", "class", CANDIDATES));
        assert!(forced.would_time("another", "class", CANDIDATES));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_noisy_near_tie_keeps_the_incumbent_and_a_steady_one_displaces_it() {
        let dir = scratch_dir("near-tie");
        let mut tuner = tuner_in(&dir, Tuning::Tune);
        // "fast" looks 10% faster than the default, but the head-to-head runs that follow go either way: noise,
        // so the default stays.
        let mut timer = FakeTimer::new(&[
            ("default", &[1000]),
            ("fast", &[900, 900, 900, 900, 900, 900, 900, 900, 1100]),
            ("faster", &[950]),
        ]);
        assert_eq!(
            tuner.choose("family", "class".into(), CANDIDATES, |v| timer.measure(v)),
            "default"
        );
        // 10% faster in every run: a steady win, which the margin a single timing needs must not keep out.
        let mut timer =
            FakeTimer::new(&[("default", &[1000]), ("fast", &[900]), ("faster", &[950])]);
        assert_eq!(
            tuner.choose("family", "steady".into(), CANDIDATES, |v| timer.measure(v)),
            "fast"
        );
        // A clear win (2x) does displace it.
        let mut timer =
            FakeTimer::new(&[("default", &[1000]), ("fast", &[500]), ("faster", &[950])]);
        assert_eq!(
            tuner.choose("family", "clear".into(), CANDIDATES, |v| timer.measure(v)),
            "fast"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn picks_persist_for_the_next_process_and_retune_keeps_them_unless_beaten_clearly() {
        let dir = scratch_dir("persist");
        let mut first = tuner_in(&dir, Tuning::Tune);
        let mut timer =
            FakeTimer::new(&[("default", &[1000]), ("fast", &[300]), ("faster", &[900])]);
        assert_eq!(
            first.choose("family", "class".into(), CANDIDATES, |v| timer.measure(v)),
            "fast"
        );

        // A new process: the cached pick, without timing.
        let mut second = tuner_in(&dir, Tuning::Tune);
        let mut never =
            |_: &'static str| -> Result<Duration> { panic!("a cached pick is not timed") };
        assert_eq!(
            second.choose("family", "class".into(), CANDIDATES, &mut never),
            "fast"
        );
        assert_eq!(second.records()[0].source, PickSource::Cache);
        // Cache-only uses it too, and its default where nothing is cached.
        let mut cache_only = tuner_in(&dir, Tuning::CacheOnly);
        assert_eq!(
            cache_only.choose("family", "class".into(), CANDIDATES, &mut never),
            "fast"
        );
        assert_eq!(
            cache_only.choose("family", "new".into(), CANDIDATES, &mut never),
            "default"
        );
        // Defaults ignore the cache.
        let mut defaults = tuner_in(&dir, Tuning::Defaults);
        assert_eq!(
            defaults.choose("family", "class".into(), CANDIDATES, &mut never),
            "default"
        );

        // Retune with "faster" slightly ahead, but not in every head-to-head run: the cached pick stays.
        let mut retune = tuner_in(&dir, Tuning::Retune);
        let mut timer = FakeTimer::new(&[
            ("default", &[1000]),
            ("fast", &[300]),
            ("faster", &[280, 280, 280, 280, 280, 320]),
        ]);
        assert_eq!(
            retune.choose("family", "class".into(), CANDIDATES, |v| timer.measure(v)),
            "fast"
        );
        // Retune with "faster" clearly ahead: it takes over, and is cached.
        let mut retune = tuner_in(&dir, Tuning::Retune);
        let mut timer =
            FakeTimer::new(&[("default", &[1000]), ("fast", &[300]), ("faster", &[100])]);
        assert_eq!(
            retune.choose("family", "class".into(), CANDIDATES, |v| timer.measure(v)),
            "faster"
        );
        let mut third = tuner_in(&dir, Tuning::Tune);
        assert_eq!(
            third.choose("family", "class".into(), CANDIDATES, &mut never),
            "faster"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A class decided among candidates of which a later shape of the same class has fewer (a variant that
    /// cannot cover it dropped out) is decided again among those, never answered with a variant not offered.
    #[test]
    fn a_decided_pick_no_longer_offered_is_decided_again() {
        let mut tuner = Tuner::new(Tuning::Tune, Vec::new(), None, Vec::new());
        let mut timer =
            FakeTimer::new(&[("default", &[1000]), ("fast", &[300]), ("other", &[200])]);
        assert_eq!(
            tuner.choose("family", "class".into(), &["default", "fast"], |v| timer
                .measure(v)),
            "fast"
        );
        let narrower: &[&'static str] = &["default", "other"];
        assert!(tuner.would_time("family", "class", narrower));
        assert_eq!(
            tuner.choose("family", "class".into(), narrower, |v| timer.measure(v)),
            "other"
        );
        // The class's first pick stands for the shapes that can run it, and the narrower set keeps its own.
        let mut never =
            |_: &'static str| -> Result<Duration> { panic!("a decided class is not timed") };
        assert_eq!(
            tuner.choose("family", "class".into(), &["default", "fast"], &mut never),
            "fast"
        );
        assert_eq!(
            tuner.choose("family", "class".into(), narrower, &mut never),
            "other"
        );
    }

    /// A pick counts only for the candidate set it was chosen among: a variant added since never raced it, so a
    /// later process with one more candidate times the class again (or takes the default where it may not time)
    /// and caches the new pick under the new set's checksum, while the same set keeps using the cached pick.
    #[test]
    fn a_cached_pick_is_not_used_once_its_candidate_set_has_changed() {
        const OLD: &[&str] = &["default", "fast"];
        let dir = scratch_dir("candidate-set");
        let path = cache_file(&dir, "test adapter");
        let mut first = tuner_in(&dir, Tuning::Tune);
        let mut timer = FakeTimer::new(&[("default", &[1000]), ("fast", &[300])]);
        assert_eq!(
            first.choose("family", "class".into(), OLD, |v| timer.measure(v)),
            "fast"
        );
        let old_checksum = format!("{:016x}", candidate_checksum(OLD));
        assert_eq!(
            std::fs::read_to_string(&path).expect("the cache"),
            cache_text(&format!("family\tclass\tfast\t{old_checksum}\n"))
        );

        // The same set, even in another order: the cached pick, untimed.
        let mut never =
            |_: &'static str| -> Result<Duration> { panic!("a cached pick is not timed") };
        let reordered: &[&'static str] = &["fast", "default"];
        let mut same = tuner_in(&dir, Tuning::Tune);
        assert!(!same.would_time("family", "class", reordered));
        assert_eq!(same.peek("family", "class", reordered), "fast");
        assert_eq!(
            same.choose("family", "class".into(), reordered, &mut never),
            "fast"
        );
        assert_eq!(same.records()[0].source, PickSource::Cache);

        // One candidate more ("faster", added since): the cached pick does not count. Cache-only takes the
        // default; Tune times all three.
        let mut cache_only = tuner_in(&dir, Tuning::CacheOnly);
        assert_eq!(cache_only.peek("family", "class", CANDIDATES), "default");
        assert_eq!(
            cache_only.choose("family", "class".into(), CANDIDATES, &mut never),
            "default"
        );
        assert_eq!(cache_only.records()[0].source, PickSource::Default);
        let mut grown = tuner_in(&dir, Tuning::Tune);
        assert!(grown.would_time("family", "class", CANDIDATES));
        assert_eq!(grown.peek("family", "class", CANDIDATES), "default");
        let mut timer =
            FakeTimer::new(&[("default", &[1000]), ("fast", &[300]), ("faster", &[100])]);
        assert_eq!(
            grown.choose("family", "class".into(), CANDIDATES, |v| timer.measure(v)),
            "faster"
        );
        assert_eq!(grown.records()[0].source, PickSource::Timed);
        assert!(timer.runs.get("faster").is_some_and(|&runs| runs > 0));
        // The rewritten cache holds the new pick under the new set's checksum, and nothing of the old one.
        let rewritten = std::fs::read_to_string(&path).expect("the cache");
        assert_eq!(rewritten, cache_text(&line("class", "faster")));
        assert!(!rewritten.contains(&old_checksum), "{rewritten}");

        // The next process with the new set takes it from the cache; one with the old set times again.
        let mut next = tuner_in(&dir, Tuning::Tune);
        assert_eq!(
            next.choose("family", "class".into(), CANDIDATES, &mut never),
            "faster"
        );
        assert_eq!(next.records()[0].source, PickSource::Cache);
        let mut shrunk = tuner_in(&dir, Tuning::Tune);
        let mut timer = FakeTimer::new(&[("default", &[1000]), ("fast", &[300])]);
        assert_eq!(
            shrunk.choose("family", "class".into(), OLD, |v| timer.measure(v)),
            "fast"
        );
        assert_eq!(shrunk.records()[0].source, PickSource::Timed);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The checksum is written to files that outlive the process, so it must not change between builds; it is
    /// of the set of names, and tells apart sets whose names run together.
    #[test]
    fn the_candidate_checksum_is_stable_and_of_the_set() {
        assert_eq!(
            format!("{:016x}", candidate_checksum(CANDIDATES)),
            STABLE_CHECKSUM
        );
        assert_eq!(
            candidate_checksum(&["faster", "default", "fast", "fast"]),
            candidate_checksum(CANDIDATES)
        );
        assert_ne!(
            candidate_checksum(&["ab", "c"]),
            candidate_checksum(&["a", "bc"])
        );
        assert_ne!(
            candidate_checksum(&["default", "fast"]),
            candidate_checksum(CANDIDATES)
        );
    }

    #[test]
    fn a_corrupt_or_foreign_cache_file_is_ignored_and_replaced() {
        let dir = scratch_dir("corrupt");
        let path = cache_file(&dir, "test adapter");
        std::fs::create_dir_all(&dir).expect("scratch dir");
        let valid = cache_text(&line("class", "fast"));
        let foreign = valid.replace("test adapter", "another adapter");
        let checksum = format!("{:016x}", candidate_checksum(CANDIDATES));
        for text in [
            "\u{0}\u{1}garbage".to_string(),
            String::new(),
            valid.replace(&format!("{checksum}\n"), &format!("{checksum}\textra\n")),
            valid.replace("\tfast", "\t"),
            // Cut inside the checksum, which must be whole.
            valid[..valid.len() - 9].to_string(),
            valid.replace(&checksum, &format!("+{}", &checksum[1..])),
            valid.replace(&format!("\t{checksum}"), ""),
            foreign,
            // A file of the format before candidate checksums: ignored whole, whatever its picks.
            valid
                .replace(CACHE_HEADER, "wgcompute tuning cache 1")
                .replace(&format!("\t{checksum}"), ""),
            // A variant this build does not have: the default, then timing.
            valid.replace("fast", "gone"),
        ] {
            std::fs::write(&path, &text).expect("write the cache");
            let mut tuner = tuner_in(&dir, Tuning::Tune);
            let mut timer =
                FakeTimer::new(&[("default", &[1000]), ("fast", &[900]), ("faster", &[100])]);
            let pick = tuner.choose("family", "class".into(), CANDIDATES, |v| timer.measure(v));
            assert_eq!(pick, "faster", "{text:?}: timed afresh");
            assert_eq!(tuner.records()[0].source, PickSource::Timed, "{text:?}");
            let rewritten = std::fs::read_to_string(&path).expect("the cache is rewritten");
            assert_eq!(
                parse_cache(&rewritten, "test adapter", &known()).and_then(|picks| picks
                    .get(&("family".to_string(), "class".to_string()))
                    .cloned()),
                Some(CachedPick {
                    variant: "faster".to_string(),
                    candidates: candidate_checksum(CANDIDATES)
                }),
                "{text:?}"
            );
        }
        // A cache directory that cannot be made (a file is in the way): tuning still works.
        let blocked = dir.join("blocked");
        std::fs::write(&blocked, "a file").expect("write");
        let mut tuner = Tuner::new(
            Tuning::Tune,
            Vec::new(),
            Some((cache_file(&blocked, "k"), "k".to_string())),
            known(),
        );
        let mut timer =
            FakeTimer::new(&[("default", &[1000]), ("fast", &[100]), ("faster", &[900])]);
        assert_eq!(
            tuner.choose("family", "class".into(), CANDIDATES, |v| timer.measure(v)),
            "fast"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Runs `work` on a thread and fails the test if it takes longer than a few seconds: reading a cache that
    /// blocks (a FIFO) must fail the test, not hang it.
    fn within_seconds<T: Send + 'static>(
        what: &str,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> T {
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            // The receiver is gone only once the test has failed already.
            let _ = sender.send(work());
        });
        match receiver.recv_timeout(Duration::from_secs(5)) {
            Ok(outcome) => outcome,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                panic!("{what}: still at the cache after 5 s")
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => panic!("{what}: panicked"),
        }
    }

    /// A fresh tuner on whatever sits at the cache path times a class (and so rewrites the cache), quickly;
    /// returns the source of its pick and what the cache file holds afterwards, if it is a file.
    fn tune_once_over(dir: &Path, what: &str) -> (PickSource, Option<String>) {
        let dir = dir.to_path_buf();
        within_seconds(what, move || {
            let mut tuner = tuner_in(&dir, Tuning::Tune);
            let mut timer =
                FakeTimer::new(&[("default", &[1000]), ("fast", &[900]), ("faster", &[100])]);
            let pick = tuner.choose("family", "class".into(), CANDIDATES, |v| timer.measure(v));
            assert_eq!(pick, "faster");
            let path = cache_file(&dir, "test adapter");
            let rewritten = std::fs::metadata(&path)
                .is_ok_and(|metadata| metadata.is_file())
                .then(|| std::fs::read_to_string(&path).expect("read the cache"));
            (tuner.records()[0].source, rewritten)
        })
    }

    #[cfg(unix)]
    use crate::files::tests::make_fifo;

    #[cfg(unix)]
    #[test]
    fn a_fifo_at_the_cache_path_is_never_opened() {
        let dir = scratch_dir("fifo");
        std::fs::create_dir_all(&dir).expect("scratch dir");
        let path = cache_file(&dir, "test adapter");
        make_fifo(&path);
        let cache_only = dir.clone();
        within_seconds("a cache-only tuner over a FIFO", move || {
            tuner_in(&cache_only, Tuning::CacheOnly);
        });
        let (source, rewritten) = tune_once_over(&dir, "a tuner over a FIFO");
        assert_eq!(source, PickSource::Timed);
        // The FIFO is left as it was: neither written into (that would block without a reader) nor replaced.
        assert_eq!(rewritten, None);
        assert!(std::fs::symlink_metadata(&path)
            .is_ok_and(|metadata| std::os::unix::fs::FileTypeExt::is_fifo(&metadata.file_type())));
        let message = tuner_in(&dir, Tuning::Tune)
            .write_cache()
            .expect_err("a FIFO is no cache file")
            .to_string();
        assert!(message.contains("a FIFO"), "{message}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[cfg(unix)]
    #[test]
    fn a_device_or_directory_at_the_cache_path_is_not_read() {
        let dir = scratch_dir("device");
        std::fs::create_dir_all(&dir).expect("scratch dir");
        let path = cache_file(&dir, "test adapter");
        for device in ["/dev/zero", "/dev/urandom"] {
            let _ = std::fs::remove_file(&path);
            std::os::unix::fs::symlink(device, &path).expect("symlink");
            let (source, rewritten) = tune_once_over(&dir, device);
            assert_eq!(source, PickSource::Timed, "{device}");
            // The link is followed to the device, which is refused: the link and the device stay as they were.
            assert_eq!(rewritten, None, "{device}");
            assert_eq!(
                std::fs::read_link(&path).expect("still a link"),
                Path::new(device)
            );
        }
        std::fs::remove_file(&path).expect("remove the cache");
        std::fs::create_dir(&path).expect("a directory where the cache goes");
        let (source, rewritten) = tune_once_over(&dir, "a directory");
        assert_eq!((source, rewritten), (PickSource::Timed, None));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_cache_path_that_is_a_file_is_named_as_no_directory() {
        let dir = scratch_dir("not-a-directory");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::write(&dir, b"a file where the cache directory goes").expect("a file");
        let message = tuner_in(&dir, Tuning::Tune)
            .write_cache()
            .expect_err("no directory to write into")
            .to_string();
        assert!(message.contains("is a file, not a directory"), "{message}");
        assert!(!message.contains("os error 17"), "{message}");
        assert_eq!(
            std::fs::read(&dir).expect("the file"),
            b"a file where the cache directory goes"
        );
        let _ = std::fs::remove_file(&dir);
    }

    #[test]
    fn an_oversized_or_non_utf8_cache_is_discarded_whole_and_not_written_back() {
        let dir = scratch_dir("oversized");
        std::fs::create_dir_all(&dir).expect("scratch dir");
        let path = cache_file(&dir, "test adapter");
        let valid = cache_text(&line("class", "fast"));
        let padding = |bytes: usize| {
            let length = line("padding class 0000000", "default").len();
            (0..bytes.div_ceil(length))
                .map(|index| line(&format!("padding class {index:07}"), "default"))
                .collect::<String>()
        };
        let over = format!("{valid}{}", padding(MAX_CACHE_BYTES as usize));
        assert!(over.len() as u64 > MAX_CACHE_BYTES);
        let mut non_utf8 = valid.clone().into_bytes();
        non_utf8.extend_from_slice(b"family\tclass \xff\xfe\tfast\t0000000000000000\n");
        for (name, bytes) in [
            ("over the limit", over.into_bytes()),
            ("not UTF-8", non_utf8),
        ] {
            std::fs::write(&path, &bytes).expect("write the cache");
            let (source, rewritten) = tune_once_over(&dir, name);
            assert_eq!(
                source,
                PickSource::Timed,
                "{name}: the cached pick is not taken"
            );
            let rewritten = rewritten.expect("the cache is rewritten");
            assert_eq!(
                rewritten,
                cache_text(&line("class", "faster")),
                "{name}: nothing of the discarded file is written back"
            );
        }
        // A file of exactly the limit is a cache like any other.
        let mut at_limit = format!("{valid}{}", padding(MAX_CACHE_BYTES as usize - 2048));
        while at_limit.len() < MAX_CACHE_BYTES as usize {
            at_limit.push('\n');
        }
        assert_eq!(at_limit.len() as u64, MAX_CACHE_BYTES);
        std::fs::write(&path, &at_limit).expect("write the cache");
        let mut cached = tuner_in(&dir, Tuning::Tune);
        let mut never =
            |_: &'static str| -> Result<Duration> { panic!("a cached pick is not timed") };
        assert_eq!(
            cached.choose("family", "class".into(), CANDIDATES, &mut never),
            "fast"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn picks_of_unknown_families_or_variants_are_dropped_and_the_rest_kept() {
        let dir = scratch_dir("unknown-family");
        std::fs::create_dir_all(&dir).expect("scratch dir");
        let path = cache_file(&dir, "test adapter");
        std::fs::write(
            &path,
            cache_text(&format!(
                "{}{}{}",
                line("class", "fast"),
                line("class", "fast").replace("family", "retired"),
                line("gone", "no_such_variant")
            )),
        )
        .expect("write the cache");
        let mut tuner = tuner_in(&dir, Tuning::Tune);
        assert_eq!(
            tuner.cached.keys().collect::<Vec<_>>(),
            [&("family".to_string(), "class".to_string())]
        );
        let mut timer =
            FakeTimer::new(&[("default", &[1000]), ("fast", &[900]), ("faster", &[100])]);
        tuner.choose("family", "new".into(), CANDIDATES, |v| timer.measure(v));
        assert_eq!(
            std::fs::read_to_string(&path).expect("the cache"),
            cache_text(&format!(
                "{}{}",
                line("class", "fast"),
                line("new", "faster")
            ))
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn writing_the_cache_explicitly_reports_where_it_went_or_why_not() {
        let dir = scratch_dir("explicit");
        let mut tuner = tuner_in(&dir, Tuning::Retune);
        let path = cache_file(&dir, "test adapter");
        assert_eq!(tuner.write_cache().ok().flatten(), Some(path.clone()));
        assert!(path.is_file());
        for mode in [Tuning::CacheOnly, Tuning::Defaults] {
            assert_eq!(
                tuner_in(&dir, mode).write_cache().ok().flatten(),
                None,
                "{mode:?}"
            );
        }
        std::fs::remove_file(&path).expect("remove the cache");
        std::fs::create_dir(&path).expect("a directory where the cache goes");
        let error = match tuner.write_cache() {
            Err(error) => error,
            other => panic!("expected a TuningCache error, got {other:?}"),
        };
        match &error {
            Error::TuningCache {
                path: named,
                message,
                ..
            } => {
                assert_eq!(named, &path);
                assert!(message.contains("is a directory"), "{message}");
                // Refused by the output rules, not by the system: there is no io::Error to report.
                assert!(std::error::Error::source(&error).is_none());
            }
            other => panic!("expected a TuningCache error, got {other:?}"),
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_failing_candidate_is_skipped_and_forced_variants_win_where_eligible() {
        let mut tuner = Tuner::new(Tuning::Tune, Vec::new(), None, Vec::new());
        let pick = tuner.choose("family", "class".into(), CANDIDATES, |variant| {
            if variant == "faster" {
                Err(Error::driver("test", "refused"))
            } else {
                Ok(Duration::from_micros(if variant == "fast" {
                    10
                } else {
                    1000
                }))
            }
        });
        assert_eq!(pick, "fast");
        assert_eq!(tuner.records()[0].times[2].micros, None);

        // When no candidate runs at all, the default stands for this session and nothing is cached.
        let dir = scratch_dir("all-fail");
        let mut failing = tuner_in(&dir, Tuning::Tune);
        let pick = failing.choose("family", "class".into(), CANDIDATES, |_| {
            Err(Error::device_lost("test"))
        });
        assert_eq!(pick, "default");
        assert!(
            !cache_file(&dir, "test adapter").exists(),
            "nothing learnt, nothing cached"
        );
        let _ = std::fs::remove_dir_all(&dir);

        let mut forced = Tuner::new(
            Tuning::Tune,
            vec![("family".to_string(), "faster".to_string())],
            None,
            Vec::new(),
        );
        let mut never =
            |_: &'static str| -> Result<Duration> { panic!("a forced pick is not timed") };
        assert_eq!(
            forced.choose("family", "a".into(), CANDIDATES, &mut never),
            "faster"
        );
        assert_eq!(forced.records()[0].source, PickSource::Forced);
        // Where the forced variant is no candidate, the class is decided as if nothing were forced.
        let mut timer = FakeTimer::new(&[("default", &[1000]), ("fast", &[100])]);
        assert_eq!(
            forced.choose("family", "b".into(), &["default", "fast"], |v| timer
                .measure(v)),
            "fast"
        );
        assert_eq!(
            forced.choose("other", "a".into(), &["only"], &mut never),
            "only"
        );
    }

    #[test]
    fn an_untimed_choice_borrows_a_decided_or_cached_pick_and_never_measures() {
        let dir = scratch_dir("peek");
        let mut tuner = tuner_in(&dir, Tuning::Tune);
        assert_eq!(tuner.peek("family", "class", CANDIDATES), "default");
        let mut timer =
            FakeTimer::new(&[("default", &[1000]), ("fast", &[100]), ("faster", &[900])]);
        tuner.choose("family", "class".into(), CANDIDATES, |v| timer.measure(v));
        assert_eq!(tuner.peek("family", "class", CANDIDATES), "fast");
        assert_eq!(tuner.peek("family", "other", CANDIDATES), "default");
        assert_eq!(tuner.records().len(), 1, "peeking records nothing");
        let next = tuner_in(&dir, Tuning::Tune);
        assert_eq!(
            next.peek("family", "class", CANDIDATES),
            "fast",
            "from the cache"
        );
        let defaults = tuner_in(&dir, Tuning::Defaults);
        assert_eq!(defaults.peek("family", "class", CANDIDATES), "default");
        let forced = Tuner::new(
            Tuning::Defaults,
            vec![("family".to_string(), "faster".to_string())],
            None,
            Vec::new(),
        );
        assert_eq!(forced.peek("family", "class", CANDIDATES), "faster");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn modes_parse_and_buckets_round_up_to_powers_of_four() {
        assert_eq!("tune".parse::<Tuning>().ok(), Some(Tuning::Tune));
        assert_eq!("Cache".parse::<Tuning>().ok(), Some(Tuning::CacheOnly));
        assert_eq!("defaults".parse::<Tuning>().ok(), Some(Tuning::Defaults));
        assert_eq!("retune".parse::<Tuning>().ok(), Some(Tuning::Retune));
        assert!("fast".parse::<Tuning>().is_err());
        let buckets: Vec<usize> = [0, 1, 2, 4, 5, 16, 17, 1000, 1024, 1025]
            .iter()
            .map(|&size| size_bucket(size))
            .collect();
        assert_eq!(buckets, [1, 1, 4, 4, 16, 16, 64, 1024, 1024, 4096]);
    }
}
