//! Seed `004_*`'s evaluation (section 4), first slice: its benchmarks run
//! under all 16 combinations of the four optimisations it studies, soft
//! updates (SU: `softdep` against `normal` write ordering), dirpref (DP:
//! Orlov against the traditional directory placement), vmiodir (VM:
//! directory blocks in the main buffer cache against a small pool of their
//! own) and dirhash (DH: a 2 MiB budget against none), one "test" per timed
//! phase, as rows for `analysis/paper_stats.py`.
//!
//! Workloads (each on a fresh file system per combination):
//! - `tar`: extract a ports-like tree ([`crate::tree::ports_tree`]; the
//!   paper used the X11 sources) in archive order (`tar-extract`), a
//!   `find`-like traversal that reads every directory and looks up every
//!   entry (`tar-find`), then `rm -rf` of it (`tar-remove`);
//! - `folder`: the paper's MH folder, the messages of a 12-year-old inbox
//!   created in ascending order with their gaps (`folder-create`),
//!   `folder -pack` (`folder-pack`), `rm -rf` (`folder-remove`), with the
//!   generator and code of [`crate::writeorder`];
//! - `postmark`: Postmark 1.13's shape: a pool of files of 500 B to 10 KB
//!   in 10 subdirectories, then transactions each pairing a create or a
//!   delete with a read or an append, then the removal of everything; timed
//!   as one test (`postmark`), as Postmark's total time.
//!
//! Every figure is the modeled disk's busy time (`ide-20g-2001`, the
//! paper's "20GB IDE hard disk") of the phase and a `sync` after it, in
//! seconds; the wall clock and the device requests are recorded beside it.
//!
//! Invariants: each run starts from a fresh file system (the paper's era of
//! FFS: 8 KB blocks, 1 KB fragments, 8 MiB groups, fixed seed and time) on
//! a sparse memory device under the modeled disk, mounted with a 64 MiB
//! buffer cache and no host read-ahead; the cache is dropped once before
//! the first phase (the paper removed the benchmark directory between runs
//! so nothing useful was cached) and kept between phases, each of which
//! ends with its sync (nothing delayed crosses into the next test). All
//! inputs come from seeded generators, so a profile gives the same modeled
//! figures every time: repeated runs would be identical, so there is one,
//! recorded as `run` 0. Each workload checks what it left (entry counts,
//! names 1..N after the pack, nothing left after a removal) and fails
//! otherwise; every image is unmounted and checked with fsck at the end of
//! its run and the result recorded in each of its rows.
use crate::tree::{ports_tree, Kind, Tree};
use crate::writeorder;
use crate::Progress;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;
use std::time::Instant;
use ufs::dev::model::{preset, ModeledDisk};
use ufs::dev::{BlockDevice, SparseDevice};
use ufs::dir::dirhash::DirhashConfig;
use ufs::fs::DirPref;
use ufs::newfs::{newfs, NewfsParams};
use ufs::order::WriteMode;
use ufs::{Cred, Fs, MountOptions};

const MIB: u64 = 1 << 20;

/// The paper's machine had a "20GB IDE hard disk" of 2001.
pub const DISK: &str = "ide-20g-2001";

/// Sizes of a profile.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Profile {
    pub name: String,
    /// Entries of the ports tree to extract (a prefix, still in archive
    /// order); `None`: the whole tree.
    pub tree_entries: Option<usize>,
    /// Messages of the MH folder.
    pub messages: u64,
    /// Postmark's initial pool of files.
    pub postmark_files: u64,
    /// Postmark's transactions.
    pub postmark_transactions: u64,
    pub disk: String,
    pub fs_bytes: u64,
    pub cache_bytes: u64,
    pub seed: u64,
}

impl Profile {
    /// The paper's sizes: the whole tree, 33,164 messages, Postmark with
    /// 10,000 files and 10,000 transactions.
    pub fn full() -> Profile {
        Profile {
            name: "full".into(),
            tree_entries: None,
            messages: 33_164,
            postmark_files: 10_000,
            postmark_transactions: 10_000,
            disk: DISK.into(),
            fs_bytes: 2 << 30,
            cache_bytes: 64 * MIB,
            seed: 1,
        }
    }

    /// Small enough for CI (seconds): the whole tree (small already, and
    /// large enough that its directories overflow the pool vmiodir off
    /// leaves them), 3,000 messages, Postmark with 2,000 files and 2,000
    /// transactions.
    pub fn quick() -> Profile {
        Profile {
            name: "quick".into(),
            tree_entries: None,
            messages: 3_000,
            postmark_files: 2_000,
            postmark_transactions: 2_000,
            ..Profile::full()
        }
    }
}

/// One combination of the four optimisations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Combo {
    pub su: bool,
    pub dp: bool,
    pub vm: bool,
    pub dh: bool,
}

impl Combo {
    /// All 16, from everything off to everything on.
    pub fn all() -> Vec<Combo> {
        (0..16u8)
            .map(|i| Combo {
                su: i & 8 != 0,
                dp: i & 4 != 0,
                vm: i & 2 != 0,
                dh: i & 1 != 0,
            })
            .collect()
    }

    /// `SU DP VM DH` with `-` for the factors off.
    pub fn label(&self) -> String {
        let f = |on: bool, s: &'static str| if on { s } else { "-" };
        format!(
            "{} {} {} {}",
            f(self.su, "SU"),
            f(self.dp, "DP"),
            f(self.vm, "VM"),
            f(self.dh, "DH")
        )
    }

    fn mount_options(&self, p: &Profile) -> MountOptions {
        MountOptions {
            dirpref: if self.dp {
                DirPref::Orlov
            } else {
                DirPref::Traditional
            },
            cache_bytes: p.cache_bytes,
            readahead: 0,
            seed: Some(p.seed),
            write_mode: Some(if self.su {
                WriteMode::Softdep
            } else {
                WriteMode::Normal
            }),
            vmiodir: self.vm,
            dirhash: DirhashConfig {
                enabled: self.dh,
                maxmem: if self.dh { 2 * MIB } else { 0 },
                ..DirhashConfig::default()
            },
            ..Default::default()
        }
    }
}

/// The workloads of this slice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    Tar,
    Folder,
    Postmark,
}

impl Workload {
    pub const ALL: [Workload; 3] = [Workload::Tar, Workload::Folder, Workload::Postmark];

    pub fn name(self) -> &'static str {
        match self {
            Workload::Tar => "tar",
            Workload::Folder => "folder",
            Workload::Postmark => "postmark",
        }
    }

    /// The tests (timed phases), in the order they run.
    pub fn tests(self) -> &'static [&'static str] {
        match self {
            Workload::Tar => &["tar-extract", "tar-find", "tar-remove"],
            Workload::Folder => &["folder-create", "folder-pack", "folder-remove"],
            Workload::Postmark => &["postmark"],
        }
    }
}

/// Every test, in the order they run.
pub fn all_tests() -> Vec<&'static str> {
    Workload::ALL
        .iter()
        .flat_map(|w| w.tests().iter().copied())
        .collect()
}

/// One test under one combination: the input format of
/// `analysis/paper_stats.py`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Row {
    pub test: String,
    pub su: u8,
    pub dp: u8,
    pub vm: u8,
    pub dh: u8,
    pub run: u32,
    /// Modeled disk time of the phase and its sync.
    pub seconds: f64,
    pub wall_ms: f64,
    /// Device requests of the phase and its sync.
    pub reads: u64,
    pub writes: u64,
    /// The image was fsck clean at the end of the run that held this test.
    pub fsck_clean: bool,
}

impl Row {
    pub fn combo(&self) -> Combo {
        Combo {
            su: self.su == 1,
            dp: self.dp == 1,
            vm: self.vm == 1,
            dh: self.dh == 1,
        }
    }
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Report {
    pub profile: Profile,
    pub disk: String,
    pub disk_description: String,
    pub runs: Vec<Row>,
    pub wall_s: f64,
}

impl Report {
    pub fn row(&self, test: &str, c: Combo) -> Option<&Row> {
        self.runs.iter().find(|r| r.test == test && r.combo() == c)
    }

    pub fn fsck_clean(&self) -> bool {
        self.runs.iter().all(|r| r.fsck_clean)
    }
}

/// The rows as CSV, header `test,su,dp,vm,dh,run,seconds,wall_ms,reads,writes,fsck_clean`.
pub fn to_csv(r: &Report) -> String {
    let mut s = String::from("test,su,dp,vm,dh,run,seconds,wall_ms,reads,writes,fsck_clean\n");
    for x in &r.runs {
        s.push_str(&format!(
            "{},{},{},{},{},{},{},{:.3},{},{},{}\n",
            x.test,
            x.su,
            x.dp,
            x.vm,
            x.dh,
            x.run,
            x.seconds,
            x.wall_ms,
            x.reads,
            x.writes,
            x.fsck_clean
        ));
    }
    s
}

fn invalid(msg: String) -> ufs::Error {
    ufs::Error::new(ufs::ErrorKind::Invalid, msg)
}

/// A phase measured: modeled seconds, wall ms, reads, writes.
struct Measured {
    test: &'static str,
    seconds: f64,
    wall_ms: f64,
    reads: u64,
    writes: u64,
}

struct Meter<'a> {
    dev: &'a ModeledDisk<SparseDevice>,
    fs: &'a Fs,
    out: Vec<Measured>,
    progress: &'a mut dyn FnMut(&str),
}

impl Meter<'_> {
    /// Runs test `name` and a sync after it; records the pair.
    fn phase<T>(
        &mut self,
        name: &'static str,
        f: impl FnOnce(&Fs) -> ufs::Result<T>,
    ) -> ufs::Result<T> {
        (self.progress)(name);
        let d0 = ModeledDisk::disk_stats(self.dev);
        let t = Instant::now();
        let out = f(self.fs)?;
        self.fs.sync()?;
        let wall_ms = t.elapsed().as_secs_f64() * 1e3;
        let d = ModeledDisk::disk_stats(self.dev).since(&d0);
        self.out.push(Measured {
            test: name,
            seconds: d.busy_ms / 1e3,
            wall_ms,
            reads: d.reads,
            writes: d.writes,
        });
        Ok(out)
    }
}

/// A fresh file system for `combo` on the modeled disk.
fn make_fs(p: &Profile, combo: Combo) -> ufs::Result<(Arc<ModeledDisk<SparseDevice>>, Fs)> {
    let spec = preset(&p.disk).ok_or_else(|| invalid(format!("no disk model {}", p.disk)))?;
    let dev = Arc::new(ModeledDisk::new(
        SparseDevice::new(p.fs_bytes),
        spec,
        false,
    )?);
    newfs(
        &*dev,
        &NewfsParams {
            bsize: 8192,
            fsize: 1024,
            density: Some(4096),
            maxblkspercg: Some(8192),
            seed: Some(1),
            time: Some(1_020_000_000),
            ..Default::default()
        },
    )?;
    let fs = Fs::open(Box::new(dev.clone()), combo.mount_options(p))?;
    Ok((dev, fs))
}

/// The tree of the `tar` workload for `p`.
pub fn tar_tree(p: &Profile) -> Tree {
    let mut t = ports_tree(p.seed);
    if let Some(n) = p.tree_entries {
        t.entries.truncate(n);
    }
    t
}

/// `find -print`: every directory read, every entry looked up; returns the
/// entries seen below `dir`.
fn find(fs: &Fs, dir: u64) -> ufs::Result<u64> {
    let mut seen = 0;
    for e in fs.readdir(dir, 0, usize::MAX)? {
        if e.name == b"." || e.name == b".." {
            continue;
        }
        let a = fs.lookup(dir, &e.name)?;
        seen += 1;
        if a.kind == ufs::FileKind::Dir {
            seen += find(fs, a.ino)?;
        }
    }
    Ok(seen)
}

fn tar_workload(p: &Profile, m: &mut Meter) -> ufs::Result<()> {
    let tree = tar_tree(p);
    let root = m.fs.root();
    let top = match tree.entries.first() {
        Some(e) if e.kind == Kind::Dir => e.path.clone(),
        _ => return Err(invalid("tar: the tree has no top directory".into())),
    };
    m.phase("tar-extract", |fs| crate::dirpref::extract(fs, root, &tree))?;
    let seen = m.phase("tar-find", |fs| {
        let top = fs.lookup(root, top.as_bytes())?;
        Ok(1 + find(fs, top.ino)?)
    })?;
    if seen != tree.entries.len() as u64 {
        return Err(invalid(format!(
            "tar: find saw {seen} entries, {} were extracted",
            tree.entries.len()
        )));
    }
    m.phase("tar-remove", |fs| {
        crate::dirpref::remove(fs, root, top.as_bytes())
    })?;
    match m.fs.lookup(root, top.as_bytes()) {
        Err(e) if e.kind == ufs::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
        Ok(_) => Err(invalid("tar: the tree is still there after rm -rf".into())),
    }
}

fn folder_workload(p: &Profile, m: &mut Meter) -> ufs::Result<()> {
    let root = m.fs.root();
    let mut rng = StdRng::seed_from_u64(p.seed);
    let numbers = writeorder::folder_numbers(&mut rng, p.messages);
    let sizes = writeorder::message_sizes(&mut rng, p.messages);
    let dir = m.phase("folder-create", |fs| {
        writeorder::folder_create(fs, root, b"inbox", &numbers, &sizes)
    })?;
    m.phase("folder-pack", |fs| {
        writeorder::folder_pack(fs, dir, &numbers)
    })?;
    writeorder::folder_check_packed(m.fs, dir, p.messages)?;
    m.phase("folder-remove", |fs| {
        writeorder::folder_remove(fs, root, b"inbox", dir)
    })
}

/// Postmark's bounds (version 1.13 defaults): file sizes 500 B to 10 KB.
const PM_MIN: usize = 500;
const PM_MAX: usize = 10_000;
const PM_DIRS: u64 = 10;

fn write_all(fs: &Fs, ino: u64, off: u64, data: &[u8]) -> ufs::Result<()> {
    let mut done = 0;
    while done < data.len() {
        match fs.write(ino, off + done as u64, &data[done..], Cred::ROOT)? {
            0 => return Err(invalid("postmark: short write".into())),
            n => done += n,
        }
    }
    Ok(())
}

/// Postmark: the pool, the transactions (each a create or a delete, then a
/// read or an append, even odds, files picked at random), the removal of
/// what is left and of the subdirectories.
fn postmark(fs: &Fs, p: &Profile) -> ufs::Result<()> {
    let mut rng = StdRng::seed_from_u64(p.seed ^ 0x706d);
    let text: Vec<u8> = (0..PM_MAX).map(|i| b'a' + (i % 26) as u8).collect();
    let root = fs.root();
    let top = fs.mkdir(root, b"postmark", 0o755, Cred::ROOT)?.ino;
    let dirs: Vec<u64> = (0..PM_DIRS)
        .map(|i| {
            Ok(fs
                .mkdir(top, format!("s{i}").as_bytes(), 0o755, Cred::ROOT)?
                .ino)
        })
        .collect::<ufs::Result<_>>()?;
    // Live files: (directory, name, inode).
    let mut live: Vec<(u64, String, u64)> = Vec::new();
    let mut next = 0u64;
    let mut create = |live: &mut Vec<(u64, String, u64)>, rng: &mut StdRng| {
        let d = dirs[rng.gen_range(0..dirs.len())];
        let name = format!("pm{next}");
        next += 1;
        let a = fs.mknod(d, name.as_bytes(), 0o100644, 0, Cred::ROOT)?;
        write_all(fs, a.ino, 0, &text[..rng.gen_range(PM_MIN..=PM_MAX)])?;
        live.push((d, name, a.ino));
        Ok::<_, ufs::Error>(())
    };
    for _ in 0..p.postmark_files {
        create(&mut live, &mut rng)?;
    }
    for _ in 0..p.postmark_transactions {
        if rng.gen_bool(0.5) || live.is_empty() {
            create(&mut live, &mut rng)?;
        } else {
            let (d, name, _) = live.swap_remove(rng.gen_range(0..live.len()));
            fs.unlink(d, name.as_bytes())?;
        }
        if live.is_empty() {
            continue;
        }
        let (_, _, ino) = live[rng.gen_range(0..live.len())];
        let size = fs.getattr(ino)?.size;
        if rng.gen_bool(0.5) {
            let got = fs.read(ino, 0, size as usize)?;
            if got.len() as u64 != size {
                return Err(invalid(format!(
                    "postmark: read {} of {size} bytes",
                    got.len()
                )));
            }
        } else {
            write_all(fs, ino, size, &text[..rng.gen_range(PM_MIN..=PM_MAX)])?;
        }
    }
    for (d, name, _) in live.drain(..) {
        fs.unlink(d, name.as_bytes())?;
    }
    for i in 0..PM_DIRS {
        fs.rmdir(top, format!("s{i}").as_bytes())?;
    }
    fs.rmdir(root, b"postmark")
}

fn postmark_workload(p: &Profile, m: &mut Meter) -> ufs::Result<()> {
    m.phase("postmark", |fs| postmark(fs, p))
}

/// One workload under one combination, on a fresh file system; `progress`
/// gets each test's name as it starts.
pub fn run(
    p: &Profile,
    workload: Workload,
    combo: Combo,
    progress: &mut dyn FnMut(&str),
) -> ufs::Result<Vec<Row>> {
    let (dev, fs) = make_fs(p, combo)?;
    fs.drop_caches()?;
    let mut m = Meter {
        dev: &dev,
        fs: &fs,
        out: Vec::new(),
        progress,
    };
    match workload {
        Workload::Tar => tar_workload(p, &mut m)?,
        Workload::Folder => folder_workload(p, &mut m)?,
        Workload::Postmark => postmark_workload(p, &mut m)?,
    }
    let measured = m.out;
    let end = fs.stats(None, false)?;
    let want = if combo.su { "softdep" } else { "normal" };
    if end.order.mode != want || end.vmiodir != combo.vm {
        return Err(invalid(format!(
            "mounted for {} but the engine runs {} with vmiodir {}",
            combo.label(),
            end.order.mode,
            end.vmiodir
        )));
    }
    fs.unmount()?;
    drop(fs);
    let clean = ufs::fsck::fsck(&*dev as &dyn BlockDevice, ufs::fsck::FsckMode::Check)?
        .findings
        .is_empty();
    Ok(measured
        .into_iter()
        .map(|x| Row {
            test: x.test.into(),
            su: combo.su as u8,
            dp: combo.dp as u8,
            vm: combo.vm as u8,
            dh: combo.dh as u8,
            run: 0,
            seconds: x.seconds,
            wall_ms: x.wall_ms,
            reads: x.reads,
            writes: x.writes,
            fsck_clean: clean,
        })
        .collect())
}

/// Every workload under every combination.
pub fn run_all(p: &Profile, progress: Progress) -> ufs::Result<Report> {
    let wall = Instant::now();
    let spec = preset(&p.disk).ok_or_else(|| invalid(format!("no disk model {}", p.disk)))?;
    let combos = Combo::all();
    let total = all_tests().len() as u64 * combos.len() as u64;
    let mut done = 0u64;
    let mut runs = Vec::new();
    for w in Workload::ALL {
        for &c in &combos {
            let rows = run(p, w, c, &mut |test| {
                progress(done, total, &format!("{test} [{}]", c.label()));
                done += 1;
            })?;
            runs.extend(rows);
        }
    }
    progress(total, total, "done");
    Ok(Report {
        profile: p.clone(),
        disk: p.disk.clone(),
        disk_description: spec.description.into(),
        runs,
        wall_s: wall.elapsed().as_secs_f64(),
    })
}
