//! The factorial runner of seed 004's evaluation on a tiny profile: every
//! test under all 16 combinations, every image fsck clean, modeled figures
//! that repeat exactly, the CSV `analysis/paper_stats.py` reads, and the
//! paper's first finding (soft updates is the most significant factor in
//! every benchmark that writes) holding on the modeled disk.
use ufs_bench::paper::{all_tests, run_all, to_csv, Combo, Profile, Report};

fn tiny() -> Profile {
    Profile {
        name: "tiny".into(),
        tree_entries: Some(600),
        messages: 400,
        postmark_files: 150,
        postmark_transactions: 150,
        fs_bytes: 512 << 20,
        ..Profile::quick()
    }
}

fn run() -> Report {
    run_all(&tiny(), &mut |_, _, _| {}).unwrap()
}

#[test]
fn sixteen_combinations_clean_deterministic_and_soft_updates_wins() {
    let a = run();
    let combos = Combo::all();
    assert_eq!(combos.len(), 16);
    let tests = all_tests();
    assert_eq!(a.runs.len(), tests.len() * 16);
    for t in &tests {
        for &c in &combos {
            let r = a.row(t, c).unwrap_or_else(|| panic!("{t} {c:?} missing"));
            assert!(r.seconds.is_finite() && r.seconds > 0.0, "{r:?}");
            assert_eq!(r.run, 0);
        }
    }
    assert!(a.fsck_clean(), "an image was not fsck clean");

    let b = run();
    for (x, y) in a.runs.iter().zip(&b.runs) {
        assert_eq!((&x.test, x.combo()), (&y.test, y.combo()));
        assert_eq!(x.seconds.to_bits(), y.seconds.to_bits(), "{x:?} / {y:?}");
        assert_eq!((x.reads, x.writes), (y.reads, y.writes));
    }

    let csv = to_csv(&a);
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("test,su,dp,vm,dh,run,seconds,wall_ms,reads,writes,fsck_clean")
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
