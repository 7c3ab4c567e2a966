//! dirhash against a reference model and the linear code: long random
//! sequences of create, lookup, remove and rename on directories of up to
//! 50,000 entries, with the self-check on (every hashed lookup is compared
//! with a linear scan, every chunk the index picks is checked), the memory
//! budget watched after every operation, the whole index verified against
//! the blocks at the end, and fsck clean after unmount.
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use ufs::dev::MemDevice;
use ufs::dir::dirhash::DirhashConfig;
use ufs::fsck::{fsck, FsckMode};
use ufs::newfs::{newfs, NewfsParams};
use ufs::{Cred, ErrorKind, Fs, Ino, MountOptions, RenameMode};

const R: Cred = Cred::ROOT;

fn mkfs(bytes: u64) -> Arc<MemDevice> {
    let dev = Arc::new(MemDevice::new(bytes));
    // Plenty of inodes: one per 2 KiB.
    newfs(
        &*dev,
        &NewfsParams {
            seed: Some(1),
            time: Some(1_700_000_000),
            density: Some(2048),
            ..Default::default()
        },
    )
    .unwrap();
    dev
}

fn mount(dev: &Arc<MemDevice>, dh: DirhashConfig) -> Fs {
    Fs::open(
        Box::new(dev.clone()),
        MountOptions {
            seed: Some(3),
            dirhash: dh,
            ..Default::default()
        },
    )
    .unwrap()
}

fn fsck_clean(dev: &Arc<MemDevice>) {
    let snap = MemDevice::from_vec(dev.snapshot());
    let r = fsck(&snap, FsckMode::Check).unwrap();
    assert!(
        r.findings.is_empty(),
        "fsck: {:?}",
        r.findings.iter().map(|f| &f.message).collect::<Vec<_>>()
    );
}

/// Name `i` of the pool: lengths from 1 to 255 bytes so records of every
/// size share chunks and compaction happens.
fn name(i: u32) -> Vec<u8> {
    let len = match i % 23 {
        0 => 200 + (i as usize % 56),
        1..=3 => 1 + (i as usize % 4),
        _ => 6 + (i as usize * 7) % 40,
    };
    let mut n = format!("{i}.").into_bytes();
    n.resize(len.max(n.len()), b'a' + (i % 26) as u8);
    n
}

#[derive(Debug, Clone)]
enum Op {
    Create(u8, u32),
    /// Creates this many fresh names in one directory.
    Bulk(u8, u32),
    Lookup(u8, u32),
    Missing(u8, u32),
    Remove(u8, u32),
    /// Removes about this share (percent) of a directory's entries.
    Thin(u8, u8),
    Rename(u8, u32, u8, u32),
    /// Turns the self-check off (fast bulk fills) or on, verifying every
    /// index against the blocks when it goes back on.
    Check(bool),
}

struct Run {
    fs: Fs,
    dirs: [Ino; 2],
    model: [BTreeMap<Vec<u8>, Ino>; 2],
    next_fresh: u32,
    max_entries: usize,
}

impl Run {
    fn new(dev: &Arc<MemDevice>, dh: DirhashConfig, max_entries: usize) -> Run {
        let fs = mount(dev, dh);
        let a = fs.mkdir(fs.root(), b"a", 0o755, R).unwrap().ino;
        let b = fs.mkdir(fs.root(), b"b", 0o755, R).unwrap().ino;
        Run {
            fs,
            dirs: [a, b],
            model: [BTreeMap::new(), BTreeMap::new()],
            next_fresh: 1_000_000,
            max_entries,
        }
    }

    fn create(&mut self, d: usize, n: Vec<u8>) -> Result<(), TestCaseError> {
        let r = self.fs.mknod(self.dirs[d], &n, 0o100644, 0, R);
        match self.model[d].get(&n) {
            Some(_) => prop_assert_eq!(r.unwrap_err().kind, ErrorKind::Exists),
            None => {
                let a = r.map_err(|e| {
                    TestCaseError::fail(format!("create {:?}: {e}", String::from_utf8_lossy(&n)))
                })?;
                self.model[d].insert(n, a.ino);
            }
        }
        Ok(())
    }

    fn remove(&mut self, d: usize, n: &[u8]) -> Result<(), TestCaseError> {
        let r = self.fs.unlink(self.dirs[d], n);
        match self.model[d].remove(n) {
            Some(_) => r.map_err(|e| TestCaseError::fail(format!("unlink: {e}")))?,
            None => prop_assert_eq!(r.unwrap_err().kind, ErrorKind::NotFound),
        }
        Ok(())
    }

    fn apply(&mut self, op: &Op) -> Result<(), TestCaseError> {
        let total = self.model[0].len() + self.model[1].len();
        match *op {
            Op::Check(on) => {
                self.fs.tune_dirhash(|c| c.check = on);
                if on {
                    for dir in self.dirs {
                        self.fs
                            .verify_dirhash(dir)
                            .map_err(|e| TestCaseError::fail(e.to_string()))?;
                    }
                }
            }
            Op::Create(d, i) => {
                if total < self.max_entries {
                    self.create(d as usize % 2, name(i))?;
                }
            }
            Op::Bulk(d, k) => {
                let k = (k as usize).min(self.max_entries.saturating_sub(total));
                for _ in 0..k {
                    self.next_fresh += 1;
                    let n = name(self.next_fresh);
                    self.create(d as usize % 2, n)?;
                }
            }
            Op::Lookup(d, i) => {
                let d = d as usize % 2;
                // Look up a name that exists when there is one.
                let n = match self.model[d]
                    .keys()
                    .nth(i as usize % self.model[d].len().max(1))
                {
                    Some(n) => n.clone(),
                    None => name(i),
                };
                let r = self.fs.lookup(self.dirs[d], &n);
                match self.model[d].get(&n) {
                    Some(&ino) => {
                        prop_assert_eq!(r.map_err(|e| TestCaseError::fail(e.to_string()))?.ino, ino)
                    }
                    None => prop_assert_eq!(r.unwrap_err().kind, ErrorKind::NotFound),
                }
            }
            Op::Missing(d, i) => {
                let d = d as usize % 2;
                let r = self
                    .fs
                    .lookup(self.dirs[d], format!("missing-{i}").as_bytes());
                prop_assert_eq!(r.unwrap_err().kind, ErrorKind::NotFound);
            }
            Op::Remove(d, i) => {
                let d = d as usize % 2;
                let n = match self.model[d]
                    .keys()
                    .nth(i as usize % self.model[d].len().max(1))
                {
                    Some(n) if i % 5 != 0 => n.clone(),
                    _ => name(i),
                };
                self.remove(d, &n)?;
            }
            Op::Thin(d, pct) => {
                let d = d as usize % 2;
                let victims: Vec<Vec<u8>> = self.model[d]
                    .keys()
                    .enumerate()
                    .filter(|(k, _)| (k * 37 + 11) % 100 < pct as usize)
                    .map(|(_, n)| n.clone())
                    .collect();
                for n in victims {
                    self.remove(d, &n)?;
                }
            }
            Op::Rename(sd, si, dd, di) => {
                let (sd, dd) = (sd as usize % 2, dd as usize % 2);
                let src = match self.model[sd]
                    .keys()
                    .nth(si as usize % self.model[sd].len().max(1))
                {
                    Some(n) => n.clone(),
                    None => name(si),
                };
                let dst = if di % 3 == 0 {
                    // Over an existing name.
                    self.model[dd]
                        .keys()
                        .nth(di as usize % self.model[dd].len().max(1))
                        .cloned()
                        .unwrap_or_else(|| name(di))
                } else {
                    name(di)
                };
                let r = self.fs.rename(
                    self.dirs[sd],
                    &src,
                    self.dirs[dd],
                    &dst,
                    RenameMode::Replace,
                );
                match self.model[sd].get(&src).copied() {
                    None => prop_assert_eq!(r.unwrap_err().kind, ErrorKind::NotFound),
                    Some(ino) => {
                        r.map_err(|e| TestCaseError::fail(format!("rename: {e}")))?;
                        if !(sd == dd && src == dst) {
                            self.model[sd].remove(&src);
                            self.model[dd].insert(dst, ino);
                        }
                    }
                }
            }
        }
        let v = self.fs.dirhash();
        let (mem, max) = (v.mem, v.config.maxmem);
        prop_assert!(mem <= max, "dirhash memory {mem} over the budget {max}");
        Ok(())
    }

    /// Readdir equals the model; the index agrees with the blocks; the
    /// self-check never fired; fsck is clean after unmount.
    fn finish(
        self,
        dev: &Arc<MemDevice>,
    ) -> Result<ufs::dir::dirhash::DirhashStats, TestCaseError> {
        for d in 0..2 {
            let mut seen = BTreeMap::new();
            let mut cookie = 0;
            loop {
                let ents = self.fs.readdir(self.dirs[d], cookie, 1000).unwrap();
                if ents.is_empty() {
                    break;
                }
                for e in &ents {
                    if e.name != b"." && e.name != b".." {
                        seen.insert(e.name.clone(), e.ino);
                    }
                }
                cookie = ents.last().unwrap().next;
            }
            prop_assert!(
                seen == self.model[d],
                "readdir of dir {} differs from the model ({} vs {} names)",
                d,
                seen.len(),
                self.model[d].len()
            );
            let dir = self.dirs[d];
            self.fs
                .verify_dirhash(dir)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
        }
        let stats = self.fs.dirhash().stats;
        prop_assert_eq!(
            stats.check_failures,
            0,
            "self-check fired: {:?}",
            self.fs.dirhash().last_check_failure
        );
        prop_assert_eq!(stats.dropped_inconsistent, 0);
        self.fs.unmount().unwrap();
        fsck_clean(dev);
        Ok(stats)
    }
}

fn op(pool: u32) -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0u8..2, 0..pool).prop_map(|(d, i)| Op::Create(d, i)),
        1 => (0u8..2, 1u32..400).prop_map(|(d, k)| Op::Bulk(d, k)),
        5 => (0u8..2, 0..pool).prop_map(|(d, i)| Op::Lookup(d, i)),
        2 => (0u8..2, 0..pool).prop_map(|(d, i)| Op::Missing(d, i)),
        5 => (0u8..2, 0..pool).prop_map(|(d, i)| Op::Remove(d, i)),
        1 => (0u8..2, 10u8..95).prop_map(|(d, p)| Op::Thin(d, p)),
        2 => (0u8..2, 0..pool, 0u8..2, 0..pool).prop_map(|(a, b, c, d)| Op::Rename(a, b, c, d)),
    ]
}

fn small_config() -> impl Strategy<Value = DirhashConfig> {
    // Tiny budgets force recycling between the two directories; minsize 0
    // hashes even one-chunk directories (the paper's small-range setting).
    (
        prop_oneof![Just(0u64), Just(2560)],
        prop_oneof![Just(3u64 << 10), Just(16u64 << 10), Just(2u64 << 20)],
    )
        .prop_map(|(minsize, maxmem)| DirhashConfig {
            minsize,
            maxmem,
            check: true,
            ..Default::default()
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    /// Directories of up to 3,000 entries, every knob exercised.
    #[test]
    fn random_operations_match_model_and_linear_code(cfg in small_config(), ops in proptest::collection::vec(op(4000), 1..1200)) {
        let dev = mkfs(96 << 20);
        let mut run = Run::new(&dev, cfg, 3000);
        for o in &ops {
            run.apply(o)?;
        }
        run.finish(&dev)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2, ..ProptestConfig::default() })]
    /// Long sequences on directories that grow to 50,000 entries and shrink
    /// again: index rebuilt as it grows, dropped when it shrinks below 1/8.
    #[test]
    fn large_directories_match_model(seed in any::<u64>()) {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let dev = mkfs(512 << 20);
        let cfg = DirhashConfig { maxmem: 8 << 20, check: true, ..Default::default() };
        let mut run = Run::new(&dev, cfg, 50_000);
        // Fill with the self-check off (a linear scan per create would make
        // the fill quadratic), verifying the whole index every 10,000.
        let mut ops: Vec<Op> = vec![Op::Check(false)];
        for k in 0..25 {
            ops.push(Op::Bulk(0, 2000));
            if k % 5 == 4 {
                ops.push(Op::Check(true));
                ops.push(Op::Check(false));
            }
        }
        ops.push(Op::Check(true));
        for _ in 0..3000 {
            let i = rng.gen_range(0..200_000u32);
            ops.push(match rng.gen_range(0..10) {
                0..=2 => Op::Create(rng.gen_range(0..2), i),
                3..=5 => Op::Lookup(rng.gen_range(0..2), i),
                6 => Op::Missing(rng.gen_range(0..2), i),
                7..=8 => Op::Remove(rng.gen_range(0..2), i),
                _ => Op::Rename(rng.gen_range(0..2), i, rng.gen_range(0..2), rng.gen()),
            });
        }
        ops.push(Op::Thin(0, 90));
        ops.push(Op::Thin(0, 90));
        for _ in 0..500 {
            ops.push(Op::Lookup(0, rng.gen()));
            ops.push(Op::Create(0, rng.gen_range(0..200_000)));
        }
        for o in &ops {
            run.apply(o)?;
        }
        let s = run.finish(&dev)?;
        prop_assert!(s.built >= 2, "index built {} times", s.built);
        prop_assert!(s.lookups_hash > 1000);
    }
}

/// The budget holds with many directories competing, and a low-memory
/// event frees what the 2008 work says: every index idle longer than the
/// reclaim age, then more from the head until 10% of the memory is freed.
#[test]
fn budget_and_lowmem_across_many_directories() {
    let dev = mkfs(256 << 20);
    let maxmem = 64 << 10;
    let fs = mount(
        &dev,
        DirhashConfig {
            maxmem,
            reclaimage: Duration::from_secs(5),
            check: true,
            ..Default::default()
        },
    );
    let mut dirs = Vec::new();
    for d in 0..40 {
        let ino = fs
            .mkdir(fs.root(), format!("d{d}").as_bytes(), 0o755, R)
            .unwrap()
            .ino;
        for f in 0..300 {
            fs.mknod(
                ino,
                format!("file-number-{f:05}").as_bytes(),
                0o100644,
                0,
                R,
            )
            .unwrap();
        }
        dirs.push(ino);
    }
    // Every directory is about 9 KB; 40 of them want far more than 64 KiB.
    for round in 0..3 {
        for &d in &dirs {
            for f in (0..300).step_by(7) {
                fs.lookup(d, format!("file-number-{f:05}").as_bytes())
                    .unwrap();
                let v = fs.dirhash();
                let (mem, hashes) = (v.mem, v.indexes);
                assert!(
                    mem <= maxmem,
                    "round {round}: {mem} > {maxmem} with {hashes} hashes"
                );
            }
        }
    }
    let s = fs.dirhash().stats;
    assert!(s.recycled > 0 && s.build_refused > 0, "{s:?}");
    assert_eq!(s.check_failures, 0);
    // Low memory: nothing idle yet, so 10% goes from the head.
    let before = fs.dirhash().mem;
    assert!(before > 0);
    let freed = fs.dirhash_lowmem_at(Instant::now());
    assert!(freed * 10 >= before, "freed {freed} of {before}");
    // Ten seconds later everything is idle past the reclaim age: all goes.
    let freed = fs.dirhash_lowmem_at(Instant::now() + Duration::from_secs(10));
    assert!(freed > 0);
    assert_eq!(fs.dirhash().mem, 0);
    // Lookups still answer (linear, then rebuilt).
    fs.lookup(dirs[0], b"file-number-00007").unwrap();
    fs.unmount().unwrap();
    fsck_clean(&dev);
}

/// Oldest idle first: a low-memory event keeps the indexes used within the
/// reclaim age when freeing the idle ones is enough.
#[test]
fn lowmem_frees_oldest_idle_first() {
    let dev = mkfs(128 << 20);
    let fs = mount(
        &dev,
        DirhashConfig {
            maxmem: 64 << 20,
            reclaimage: Duration::from_secs(5),
            ..Default::default()
        },
    );
    let mut dirs = Vec::new();
    for d in 0..10 {
        let ino = fs
            .mkdir(fs.root(), format!("d{d}").as_bytes(), 0o755, R)
            .unwrap()
            .ino;
        for f in 0..400 {
            fs.mknod(ino, format!("m{f:06}").as_bytes(), 0o100644, 0, R)
                .unwrap();
        }
        dirs.push(ino);
    }
    for &d in &dirs {
        fs.lookup(d, b"m000001").unwrap();
    }
    assert_eq!(fs.dirhash().indexes, 10);
    // Pretend time passes: the first five were used 8 s ago, the rest now.
    let now = Instant::now() + Duration::from_secs(8);
    for &d in &dirs[5..] {
        fs.dirhash_touch_at(d, now).unwrap();
    }
    let before = fs.dirhash().mem;
    fs.dirhash_lowmem_at(now + Duration::from_millis(100));
    let after = fs.dirhash().mem;
    assert!((before - after) * 10 >= before);
    for (k, &d) in dirs.iter().enumerate() {
        assert_eq!(fs.dirhash_index(d).is_some(), k >= 5, "directory {k}");
    }
}

/// The paper's memory figure: about 0.51 bytes per byte of directory.
#[test]
fn memory_per_directory_byte() {
    let dev = mkfs(256 << 20);
    let fs = mount(
        &dev,
        DirhashConfig {
            maxmem: 64 << 20,
            ..Default::default()
        },
    );
    let d = fs.mkdir(fs.root(), b"big", 0o755, R).unwrap().ino;
    for f in 0..20_000 {
        fs.mknod(d, format!("f{f:08}").as_bytes(), 0o100644, 0, R)
            .unwrap();
    }
    // Built afresh at its final size (the figure of section 3.4).
    fs.drop_caches().unwrap();
    fs.lookup(d, b"f00000001").unwrap();
    let (mem, bytes, _) = fs.dirhash_index(d).expect("hashed");
    let ratio = mem as f64 / bytes as f64;
    assert!(
        (0.49..0.53).contains(&ratio),
        "{ratio} bytes of index per directory byte ({mem} for {bytes})"
    );
}

/// dirhash=off, below the threshold, and the sequential shortcut.
#[test]
fn switches_and_counters() {
    let dev = mkfs(128 << 20);
    let fs = mount(
        &dev,
        DirhashConfig {
            enabled: false,
            ..Default::default()
        },
    );
    let d = fs.mkdir(fs.root(), b"d", 0o755, R).unwrap().ino;
    for f in 0..2000 {
        fs.mknod(d, format!("f{f:06}").as_bytes(), 0o100644, 0, R)
            .unwrap();
    }
    let s = fs.dirhash().stats;
    assert_eq!(s.built, 0);
    assert!(s.lookups_linear >= 2000 && s.lookups_hash == 0);
    fs.unmount().unwrap();

    let fs = mount(
        &dev,
        DirhashConfig {
            maxmem: 8 << 20,
            ..Default::default()
        },
    );
    let root = fs.root();
    let d = fs.lookup(root, b"d").unwrap().ino;
    // The root is one chunk: below 2,560 bytes, it stays linear.
    fs.lookup(root, b"nope").unwrap_err();
    assert!(fs.dirhash_index(root).is_none());
    // Lookups in directory order hit the sequential shortcut.
    let before = fs.dirhash().stats;
    for f in 0..2000 {
        fs.lookup(d, format!("f{f:06}").as_bytes()).unwrap();
    }
    let s = fs.dirhash().stats;
    assert_eq!(s.built, before.built + 1);
    assert!(
        s.lookups_sequential - before.lookups_sequential > 1900,
        "{s:?}"
    );
    // Random order: answered by the hash chains.
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    for _ in 0..500 {
        let f = rng.gen_range(0..2000);
        fs.lookup(d, format!("f{f:06}").as_bytes()).unwrap();
    }
    let t = fs.dirhash().stats;
    assert!(t.lookups_hash - s.lookups_hash > 400);
    fs.unmount().unwrap();
    fsck_clean(&dev);
}
