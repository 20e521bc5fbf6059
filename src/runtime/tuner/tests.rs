//! The tuner's own tests: the cache's records, their checks, and what is chosen from them.

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
    let dir = std::env::temp_dir().join(format!("wgcompute-tuner-{name}-{}", std::process::id()));
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
    let mut timer = FakeTimer::new(&[("default", &[1000]), ("fast", &[500]), ("faster", &[200])]);
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
    let mut timer = FakeTimer::new(&[("default", &[1000]), ("fast", &[300]), ("faster", &[900])]);
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
    let mut timer = FakeTimer::new(&[("default", &[1000]), ("fast", &[900]), ("faster", &[950])]);
    assert_eq!(
        tuner.choose("family", "steady".into(), CANDIDATES, |v| timer.measure(v)),
        "fast"
    );
    // A clear win (2x) does displace it.
    let mut timer = FakeTimer::new(&[("default", &[1000]), ("fast", &[500]), ("faster", &[950])]);
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
    let mut timer = FakeTimer::new(&[("default", &[1000]), ("fast", &[300]), ("faster", &[900])]);
    assert_eq!(
        first.choose("family", "class".into(), CANDIDATES, |v| timer.measure(v)),
        "fast"
    );

    // A new process: the cached pick, without timing.
    let mut second = tuner_in(&dir, Tuning::Tune);
    let mut never = |_: &'static str| -> Result<Duration> { panic!("a cached pick is not timed") };
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
    let mut timer = FakeTimer::new(&[("default", &[1000]), ("fast", &[300]), ("faster", &[100])]);
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
    let mut timer = FakeTimer::new(&[("default", &[1000]), ("fast", &[300]), ("other", &[200])]);
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
    let mut never = |_: &'static str| -> Result<Duration> { panic!("a cached pick is not timed") };
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
    let mut timer = FakeTimer::new(&[("default", &[1000]), ("fast", &[300]), ("faster", &[100])]);
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
                .get("family")
                .and_then(|classes| classes.get("class"))
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
    let mut timer = FakeTimer::new(&[("default", &[1000]), ("fast", &[100]), ("faster", &[900])]);
    assert_eq!(
        tuner.choose("family", "class".into(), CANDIDATES, |v| timer.measure(v)),
        "fast"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs `work` on a thread and fails the test if it takes longer than a few seconds: reading a cache that
/// blocks (a FIFO) must fail the test, not hang it.
fn within_seconds<T: Send + 'static>(what: &str, work: impl FnOnce() -> T + Send + 'static) -> T {
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
    let mut never = |_: &'static str| -> Result<Duration> { panic!("a cached pick is not timed") };
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
        tuner
            .cached
            .iter()
            .flat_map(|(family, classes)| classes.keys().map(move |class| (family, class)))
            .collect::<Vec<_>>(),
        [(&"family".to_string(), &"class".to_string())]
    );
    let mut timer = FakeTimer::new(&[("default", &[1000]), ("fast", &[900]), ("faster", &[100])]);
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
    let mut never = |_: &'static str| -> Result<Duration> { panic!("a forced pick is not timed") };
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
    let mut timer = FakeTimer::new(&[("default", &[1000]), ("fast", &[100]), ("faster", &[900])]);
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
