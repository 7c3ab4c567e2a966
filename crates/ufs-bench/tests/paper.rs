//! The factorial runner of seed 004's evaluation on a tiny profile: every
//! test under all 16 combinations, every image fsck clean, modeled figures
//! that repeat exactly whatever the number of jobs, the CSV
//! `analysis/paper_stats.py` reads, and two of the paper's findings on the
//! modeled machine: soft updates is the most significant factor in every
//! benchmark that writes, and dirhash's gain on the MH folder shows with
//! soft updates.
use ufs_bench::paper::{all_tests, run_all, to_csv, Combo, Factor, Profile, Report, Workload};

const WORKLOADS: [Workload; 3] = [Workload::Tar, Workload::Folder, Workload::Postmark];

fn tiny(jobs: usize) -> Profile {
    Profile {
        name: "tiny".into(),
        tree_entries: Some(600),
        messages: 2_000,
        postmark: vec![(150, 150), (300, 300)],
        fs_bytes: 512 << 20,
        jobs,
        ..Profile::quick()
    }
}

fn run(jobs: usize) -> Report {
    run_all(&tiny(jobs), &WORKLOADS, &Factor::PAPER, &mut |_, _, _| {}).unwrap()
}

#[test]
fn sixteen_combinations_clean_deterministic_and_soft_updates_wins() {
    let a = run(2);
    let combos = Combo::all();
    assert_eq!(combos.len(), 16);
    let tests = all_tests(&WORKLOADS);
    assert_eq!(a.runs.len(), tests.len() * 16);
    for t in &tests {
        for &c in &combos {
            let r = a.row(t, c).unwrap_or_else(|| panic!("{t} {c:?} missing"));
            assert!(r.seconds.is_finite() && r.seconds > 0.0, "{r:?}");
            assert!(
                (r.seconds - r.disk_s - r.cpu_s).abs() < 1e-9 && r.cpu_s > 0.0,
                "{r:?}"
            );
            assert_eq!(r.run, 0);
        }
    }
    assert!(a.fsck_clean(), "an image was not fsck clean");

    let b = run(1);
    for (x, y) in a.runs.iter().zip(&b.runs) {
        assert_eq!((&x.test, x.combo()), (&y.test, y.combo()));
        assert_eq!(x.seconds.to_bits(), y.seconds.to_bits(), "{x:?} / {y:?}");
        assert_eq!(x.counters, y.counters);
    }

    let csv = to_csv(&a);
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some(
            "test,su,dp,vm,dh,io,gd,run,seconds,disk_s,cpu_s,syncs,wall_ms,reads,writes,seeks,\
             cache_hits,cache_misses,dir_hits,dir_misses,evictions,dh_lookups_hash,\
             dh_lookups_linear,dh_entries_scanned,dh_built,dh_build_refused,dh_recycled,dh_lowmem_freed,\
             dh_mem_bytes,fsck_clean"
        )
    );
    assert_eq!(lines.count(), a.runs.len());

    // Soft updates against normal ordering, in each of the 8 pairings of
    // the other three factors.
    for t in [
        "folder-create",
        "tar-remove",
        "tar-extract",
        "folder-remove",
    ] {
        for &off in combos.iter().filter(|c| !c.su) {
            let on = Combo { su: true, ..off };
            let (x, y) = (a.row(t, off).unwrap(), a.row(t, on).unwrap());
            assert!(
                y.seconds < x.seconds,
                "{t} [{}]: soft updates {} s, normal {} s",
                off.label(),
                y.seconds,
                x.seconds
            );
        }
    }
}

#[test]
fn dirhash_gains_on_the_folder_show_with_soft_updates() {
    let p = Profile {
        messages: 3_000,
        ..tiny(2)
    };
    let r = run_all(&p, &[Workload::Folder], &Factor::PAPER, &mut |_, _, _| {}).unwrap();
    assert!(r.fsck_clean());
    for t in ["folder-create", "folder-pack"] {
        let su = Combo {
            su: true,
            vm: true,
            ..Combo::NONE
        };
        let off = r.row(t, su).unwrap();
        let on = r.row(t, Combo { dh: true, ..su }).unwrap();
        // The linear scans of a 3,000-entry directory cost CPU that the
        // index saves; with soft updates little else is left.
        assert!(
            on.cpu_s * 1.5 < off.cpu_s && on.seconds < off.seconds,
            "{t}: dirhash {on:?} / linear {off:?}"
        );
    }
}

#[test]
fn further_factors_inode_order_and_growing_dirhash_do_what_they_name() {
    // A small cache so the maildirs overflow it and the syncer, run every
    // modeled second, sees memory pressure.
    let p = Profile {
        largedir_files: 3_000,
        maildirs: 6,
        cache_bytes: 2 << 20,
        sync_every_s: 1.0,
        ..tiny(2)
    };
    let factors = Factor::parse_list("gd,io,dh").unwrap();
    assert_eq!(factors, [Factor::Dh, Factor::Io, Factor::Gd]);
    let r = run_all(
        &p,
        &[Workload::Largedir, Workload::Maildir],
        &factors,
        &mut |_, _, _| {},
    )
    .unwrap();
    assert!(r.fsck_clean());
    assert_eq!(r.factors, factors);
    let tests = all_tests(&[Workload::Largedir, Workload::Maildir]);
    assert_eq!(r.runs.len(), tests.len() * 8);
    for x in &r.runs {
        let c = x.combo();
        assert!(!c.su && !c.dp && !c.vm, "a factor not varied is off: {x:?}");
        let want = if c.io { "offset" } else { "off" };
        assert_eq!(x.config.inode_order, want);
        let budget = match (c.dh, c.gd) {
            (false, _) => 0,
            (true, false) => 2 << 20,
            (true, true) => p.cache_bytes,
        };
        assert_eq!(x.config.dirhash_maxmem, budget, "{x:?}");
        if !(c.dh && c.gd) {
            assert_eq!(x.counters.dh_lowmem_freed, 0, "{x:?}");
        }
    }
    // Inodes in name order: listing the large directory with its inodes
    // (ls -l) seeks less and takes less time, with or without dirhash.
    for dh in [false, true] {
        let off = Combo { dh, ..Combo::NONE };
        let on = Combo { io: true, ..off };
        let (a, b) = (
            r.row("largedir-ls", off).unwrap(),
            r.row("largedir-ls", on).unwrap(),
        );
        assert!(
            b.seconds < a.seconds && b.counters.seeks < a.counters.seeks,
            "ls: name order {b:?}, FFS order {a:?}"
        );
    }
    // The growing budget gives memory back when the cache is under
    // pressure; without dirhash it changes nothing.
    let freed: u64 = r
        .runs
        .iter()
        .filter(|x| x.dh == 1 && x.gd == 1)
        .map(|x| x.counters.dh_lowmem_freed)
        .sum();
    assert!(freed > 0, "no index freed by a low-memory event");
    for t in &tests {
        let (a, b) = (
            r.row(t, Combo::NONE).unwrap(),
            r.row(
                t,
                Combo {
                    gd: true,
                    ..Combo::NONE
                },
            )
            .unwrap(),
        );
        assert_eq!(a.seconds.to_bits(), b.seconds.to_bits(), "{t}");
        assert_eq!(a.counters, b.counters, "{t}");
    }
    let csv = to_csv(&r);
    let io_on = csv
        .lines()
        .skip(1)
        .filter(|l| l.split(',').nth(5) == Some("1"))
        .count();
    assert_eq!(io_on, r.runs.len() / 2, "the io column");
}

/// Every ablation changes the modeled element it names: run on a small
/// machine (a 4 MiB cache, so directories leave the buffer space and the
/// buffer daemon runs), each moves the modeled time of at least one test
/// against the same run without it, and every image stays fsck clean.
/// CI runs two ablations end to end (`scripts/test.sh`); this is what
/// stands for the others there.
#[test]
fn every_ablation_changes_the_run() {
    use ufs_bench::paper::{meter, Ablation};
    let cache = 4 << 20;
    let base = Profile {
        andrew_copies: 2,
        cache_bytes: cache,
        buf_daemon: meter::BufDaemon::freebsd4(cache),
        ..tiny(2)
    };
    let ws = [Workload::Tar, Workload::Andrew];
    let factors = [Factor::Su, Factor::Vm];
    let times = |p: &Profile| {
        let r = run_all(p, &ws, &factors, &mut |_, _, _| {}).unwrap();
        assert!(
            r.fsck_clean(),
            "{:?}: an image was not fsck clean",
            p.ablation
        );
        r.runs
            .iter()
            .map(|x| (x.test.clone(), x.combo(), x.seconds.to_bits()))
            .collect::<Vec<_>>()
    };
    let before = times(&base);
    for a in Ablation::ALL {
        assert_eq!(Ablation::parse(a.name()), Some(a));
        assert!(!a.describe().is_empty());
        let after = times(&a.apply(&base));
        assert_eq!(after.len(), before.len(), "{}", a.name());
        let moved = before.iter().zip(&after).filter(|(x, y)| x != y).count();
        assert!(moved > 0, "{}: no test's modeled time moved", a.name());
    }
}
