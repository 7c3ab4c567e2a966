//! The write modes on the modeled disk, quick profile (2,000 empty files;
//! a 3,000-message MH folder): what the project promises of soft updates.
//! For every phase (files create and remove; MH create, pack and remove),
//! counted with the sync that pays its delayed writes: soft updates is at
//! least 10x faster than normal mode and within 1.5x of async (also at the
//! issue's full sizes, without sync mode); every image
//! is fsck clean; a second run gives bit-identical modeled figures.
use std::sync::OnceLock;
use ufs::order::WriteMode;
use ufs_bench::writeorder::{all_phases, run_all, Config, Report};

const SPEEDUP_OVER_NORMAL: f64 = 10.0;
const SLOWDOWN_OVER_ASYNC: f64 = 1.5;

fn quick_run() -> Result<Report, String> {
    run_all(&Config::quick(), &mut |_, _, _| {}).map_err(|e| format!("quick profile: {e}"))
}

/// The quick profile, run once for the tests that read it.
fn report() -> &'static Report {
    static R: OnceLock<Result<Report, String>> = OnceLock::new();
    match R.get_or_init(quick_run) {
        Ok(r) => r,
        Err(e) => panic!("{e}"),
    }
}

/// What the engine did in a phase under a mode, for failure messages.
fn describe(r: &Report, w: &str, p: &str, m: WriteMode) -> String {
    match r.phase(w, p, m) {
        Some(x) => format!(
            "{}: {:.1} ms alone, {:.1} ms with sync, {} reads, {} writes, forced {}, rollbacks {}, flushes {}, held {}/{} changes",
            m.name(),
            x.modeled_ms,
            x.modeled_sync_ms,
            x.reads,
            x.writes,
            x.order_sync.forced_writes,
            x.order_sync.rollbacks,
            x.order_sync.flushes,
            x.order_sync.held,
            x.order_sync.changes
        ),
        None => format!("{}: no such phase", m.name()),
    }
}

#[test]
fn every_run_has_its_phases_and_is_fsck_clean() {
    let r = report();
    assert_eq!(r.runs.len(), 2 * WriteMode::ALL.len());
    for (w, p) in all_phases() {
        for m in WriteMode::ALL {
            let x = r
                .phase(w, p, m)
                .unwrap_or_else(|| panic!("{w} {p} under {} is missing", m.name()));
            assert!(
                x.modeled_sync_ms > 0.0 && x.writes > 0,
                "{w} {p} under {} wrote nothing: {x:?}",
                m.name()
            );
        }
    }
    let dirty: Vec<String> = r
        .runs
        .iter()
        .filter(|x| !x.fsck_clean)
        .map(|x| {
            format!(
                "{} under {}: {}",
                x.workload,
                x.mode.name(),
                x.fsck_findings.join("; ")
            )
        })
        .collect();
    assert!(dirty.is_empty(), "not fsck clean:\n{}", dirty.join("\n"));
}

/// The bounds on one report: soft updates at least 10x faster than normal
/// mode and at most 1.5x slower than async on every phase (the figures are
/// deterministic; the small margin only absorbs float rounding).
fn check_bounds(r: &Report, profile: &str) {
    let mut bad = Vec::new();
    for (w, p) in all_phases() {
        let x = r.ratio(w, p);
        let speedup = x.and_then(|x| x.softdep_speedup_vs_normal);
        let slowdown = x.and_then(|x| x.softdep_vs_async);
        if !speedup.is_some_and(|x| x >= SPEEDUP_OVER_NORMAL)
            || !slowdown.is_some_and(|x| x <= SLOWDOWN_OVER_ASYNC + 1e-6)
        {
            bad.push(format!(
                "{w} {p}: normal/softdep = {speedup:?}, softdep/async = {slowdown:?}\n    {}\n    {}\n    {}",
                describe(r, w, p, WriteMode::Normal),
                describe(r, w, p, WriteMode::Async),
                describe(r, w, p, WriteMode::Softdep)
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "{profile} profile: soft updates is not {SPEEDUP_OVER_NORMAL}x faster than normal and within {SLOWDOWN_OVER_ASYNC}x of async on:\n{}",
        bad.join("\n")
    );
}

#[test]
fn softdep_is_ten_times_faster_than_normal_and_close_to_async() {
    check_bounds(report(), "quick");
}

/// The sizes (10,000 files; the 33,164-message folder), without
/// sync mode (the slowest to simulate, and not part of the bounds).
#[test]
fn full_profile_meets_the_bounds() {
    let cfg = Config {
        modes: vec![WriteMode::Normal, WriteMode::Async, WriteMode::Softdep],
        ..Config::full()
    };
    let r = run_all(&cfg, &mut |_, _, _| {}).unwrap_or_else(|e| panic!("full profile: {e}"));
    assert!(r.fsck_clean());
    check_bounds(&r, "full");
}

#[test]
fn runs_repeat_bit_identically() {
    let first = report();
    let second = quick_run().unwrap_or_else(|e| panic!("{e}"));
    for (w, p) in all_phases() {
        for m in WriteMode::ALL {
            let (a, b) = (
                first.phase(w, p, m).unwrap(),
                second.phase(w, p, m).unwrap(),
            );
            let what = format!("{w} {p} under {}", m.name());
            assert_eq!(
                a.modeled_ms.to_bits(),
                b.modeled_ms.to_bits(),
                "{what}: {} ms then {} ms",
                a.modeled_ms,
                b.modeled_ms
            );
            assert_eq!(
                a.modeled_sync_ms.to_bits(),
                b.modeled_sync_ms.to_bits(),
                "{what} with sync: {} ms then {} ms",
                a.modeled_sync_ms,
                b.modeled_sync_ms
            );
            assert_eq!((a.reads, a.writes), (b.reads, b.writes), "{what}: requests");
            assert_eq!(
                (a.order_sync.changes, a.order_sync.forced_writes),
                (b.order_sync.changes, b.order_sync.forced_writes),
                "{what}: ordering"
            );
        }
    }
}
