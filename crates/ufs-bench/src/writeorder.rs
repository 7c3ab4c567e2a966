//! The four write modes (`normal`, `sync`, `async`, `softdep`) on a modeled
//! disk: what ordering metadata writes costs a metadata-heavy workload, and
//! how much of that soft updates wins back (seed `004_*`, whose folder
//! benchmark put soft updates at ×29, ×13 and ×77 on create, pack and
//! remove).
//!
//! Two workloads, each on a fresh file system per mode:
//! - `files`: create N empty files in one new directory (`create`), then
//!   unlink every one of them in readdir order (`remove`), as `rm` does;
//! - `mh`: seed 004's folder benchmark: an MH inbox kept for 12 years,
//!   rebuilt by creating its messages (numeric names in ascending order
//!   with the gaps deletions left, each a small mail message) (`create`);
//!   then `folder -pack`: read the folder and rename the messages to 1..N
//!   in ascending order (`pack`); then `rm -rf` of the folder (`remove`).
//!
//! Every phase is measured twice: on its own, and with a final `sync` (so
//! writes a mode delays are paid for where they were made); the comparison
//! of modes uses the second figure. The figures are the modeled disk's
//! busy time (`ide-20g-2001`, a 2001 7,200 rpm IDE disk like the seed's
//! 20 GB one), with the wall clock, the device requests and the engine's
//! write-ordering counters beside them.
//!
//! Invariants: each run starts from a fresh 1 GiB file system (FreeBSD 14
//! newfs defaults, fixed seed and time) on a sparse memory device under the
//! modeled disk, mounted with a 64 MB buffer cache, no host read-ahead (the
//! drive's own track buffer is modeled), dirhash at its default budget;
//! the cache is dropped once before the first phase (cold start) and kept
//! between phases (each phase ends with its sync, so nothing delayed
//! crosses into the next one). Names, message numbers and message sizes
//! come from a seeded generator, so a configuration gives the same modeled
//! figures on every run. Each phase checks what it left (entry counts,
//! names 1..N after the pack) and fails otherwise; every image is unmounted
//! and checked with fsck at the end, and the findings are recorded.
use crate::Progress;
use rand::{Rng, SeedableRng};
use std::sync::Arc;
use std::time::Instant;
use ufs::dev::{BlockDevice, SparseDevice};
use ufs::newfs::NewfsParams;
use ufs::order::{OrderStats, WriteMode};
use ufs::{Cred, Fs, Ino, MountOptions, RenameMode};
use ufs_sim::model::{preset, DiskStats, ModeledDisk};

const MIB: u64 = 1 << 20;

/// The modeled disk: seed 004's machine had a "20GB IDE hard disk" of
/// 2001, which this preset describes.
pub const DISK: &str = "ide-20g-2001";

/// What to run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Config {
    pub profile: String,
    /// Empty files of the `files` workload.
    pub files: u64,
    /// Messages of the MH folder.
    pub messages: u64,
    pub disk: String,
    pub fs_bytes: u64,
    pub cache_bytes: u64,
    /// Directory blocks in the main cache (on) or a small pool (off).
    pub vmiodir: bool,
    pub modes: Vec<WriteMode>,
    pub seed: u64,
}

impl Config {
    /// Seed 004's sizes: 10,000 files, the 33,164-message folder.
    pub fn full() -> Config {
        Config {
            profile: "full".into(),
            files: 10_000,
            messages: 33_164,
            disk: DISK.into(),
            fs_bytes: 1 << 30,
            cache_bytes: 64 * MIB,
            vmiodir: true,
            modes: WriteMode::ALL.to_vec(),
            seed: 1,
        }
    }

    /// A small profile for CI: 2,000 files, a 3,000-message folder.
    pub fn quick() -> Config {
        Config {
            profile: "quick".into(),
            files: 2_000,
            messages: 3_000,
            ..Config::full()
        }
    }
}

/// The two workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    Files,
    Mh,
}

impl Workload {
    pub const ALL: [Workload; 2] = [Workload::Files, Workload::Mh];

    pub fn name(self) -> &'static str {
        match self {
            Workload::Files => "files",
            Workload::Mh => "mh",
        }
    }

    pub fn phases(self) -> &'static [&'static str] {
        match self {
            Workload::Files => &["create", "remove"],
            Workload::Mh => &["create", "pack", "remove"],
        }
    }
}

/// Every (workload, phase) in the order they run.
pub fn all_phases() -> Vec<(&'static str, &'static str)> {
    Workload::ALL
        .iter()
        .flat_map(|w| w.phases().iter().map(move |p| (w.name(), *p)))
        .collect()
}

/// What the write-ordering engine did over an interval.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct OrderDelta {
    pub changes: u64,
    pub held: u64,
    pub rollbacks: u64,
    pub forced_writes: u64,
    pub flushes: u64,
    pub deferred_frees: u64,
    /// Changes still waiting at the end of the interval.
    pub pending_at_end: u64,
}

impl OrderDelta {
    fn between(a: &OrderStats, b: &OrderStats) -> OrderDelta {
        OrderDelta {
            changes: b.changes - a.changes,
            held: b.held - a.held,
            rollbacks: b.rollbacks - a.rollbacks,
            forced_writes: b.forced_writes - a.forced_writes,
            flushes: b.flushes - a.flushes,
            deferred_frees: b.deferred_frees - a.deferred_frees,
            pending_at_end: b.pending_now,
        }
    }
}

/// One measured phase.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Phase {
    pub workload: String,
    pub name: String,
    /// Modeled disk time of the phase itself.
    pub modeled_ms: f64,
    /// Modeled disk time of the phase and the `sync` after it.
    pub modeled_sync_ms: f64,
    pub wall_ms: f64,
    pub wall_sync_ms: f64,
    /// Device requests of the phase and its sync.
    pub reads: u64,
    pub writes: u64,
    /// The disk model's figures: the phase alone, the phase and its sync.
    pub disk: DiskStats,
    pub disk_sync: DiskStats,
    /// Write-ordering counters: the phase alone, the phase and its sync.
    pub order: OrderDelta,
    pub order_sync: OrderDelta,
    /// Buffers evicted from the cache during the phase and its sync.
    pub evictions: u64,
}

/// One workload under one mode.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Run {
    pub workload: String,
    pub mode: WriteMode,
    /// vmiodir as the engine reports it.
    pub vmiodir: bool,
    pub phases: Vec<Phase>,
    /// Entries the workload made (files or messages).
    pub entries: u64,
    /// Bytes of message bodies written (the `mh` workload).
    pub data_bytes: u64,
    pub fsck_clean: bool,
    /// fsck's findings (first 20), when not clean.
    pub fsck_findings: Vec<String>,
    /// The engine's counters at the end (before unmount).
    pub order_total: OrderStats,
    pub wall_s: f64,
}

impl Run {
    pub fn phase(&self, name: &str) -> Option<&Phase> {
        self.phases.iter().find(|p| p.name == name)
    }
}

/// The modes compared on one phase (phase + sync, modeled ms).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Ratio {
    pub workload: String,
    pub phase: String,
    pub normal_ms: Option<f64>,
    pub sync_ms: Option<f64>,
    pub async_ms: Option<f64>,
    pub softdep_ms: Option<f64>,
    /// normal / softdep: how many times faster soft updates is.
    pub softdep_speedup_vs_normal: Option<f64>,
    /// softdep / async: what soft updates costs over no ordering at all.
    pub softdep_vs_async: Option<f64>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Report {
    pub config: Config,
    pub disk_description: String,
    pub runs: Vec<Run>,
    pub ratios: Vec<Ratio>,
    pub wall_s: f64,
}

impl Report {
    pub fn run(&self, workload: &str, mode: WriteMode) -> Option<&Run> {
        self.runs
            .iter()
            .find(|r| r.workload == workload && r.mode == mode)
    }

    pub fn phase(&self, workload: &str, phase: &str, mode: WriteMode) -> Option<&Phase> {
        self.run(workload, mode).and_then(|r| r.phase(phase))
    }

    pub fn ratio(&self, workload: &str, phase: &str) -> Option<&Ratio> {
        self.ratios
            .iter()
            .find(|r| r.workload == workload && r.phase == phase)
    }

    pub fn fsck_clean(&self) -> bool {
        self.runs.iter().all(|r| r.fsck_clean)
    }
}

/// Phase + sync modeled times of each mode on each phase, and the ratios.
pub fn ratios(runs: &[Run]) -> Vec<Ratio> {
    let get = |w: &str, p: &str, m: WriteMode| {
        runs.iter()
            .find(|r| r.workload == w && r.mode == m)
            .and_then(|r| r.phase(p))
            .map(|x| x.modeled_sync_ms)
    };
    let div = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    all_phases()
        .into_iter()
        .map(|(w, p)| {
            let normal = get(w, p, WriteMode::Normal);
            let asy = get(w, p, WriteMode::Async);
            let soft = get(w, p, WriteMode::Softdep);
            Ratio {
                workload: w.into(),
                phase: p.into(),
                normal_ms: normal,
                sync_ms: get(w, p, WriteMode::Sync),
                async_ms: asy,
                softdep_ms: soft,
                softdep_speedup_vs_normal: div(normal, soft),
                softdep_vs_async: div(soft, asy),
            }
        })
        .collect()
}

/// Message numbers of an MH inbox used for 12 years: ascending, mostly
/// consecutive, with the gaps that deleted messages left (short runs
/// usually, now and then a long one where a batch was thrown away).
pub fn folder_numbers(rng: &mut rand::rngs::StdRng, n: u64) -> Vec<u64> {
    let mut out = Vec::with_capacity(n as usize);
    let mut next = 1u64;
    for _ in 0..n {
        if rng.gen_bool(0.3) {
            let widest = if rng.gen_bool(0.1) { 200 } else { 5 };
            next += rng.gen_range(1..=widest);
        }
        out.push(next);
        next += 1;
    }
    out
}

/// Sizes of the messages' files: between 1 KiB and 8 KiB, log-uniform
/// (small messages are the common ones).
pub fn message_sizes(rng: &mut rand::rngs::StdRng, n: u64) -> Vec<usize> {
    (0..n)
        .map(|_| (1024.0 * 8f64.powf(rng.gen::<f64>())).round() as usize)
        .map(|s| s.clamp(1024, 8192))
        .collect()
}

/// A mail message of exactly `size` bytes: headers, then text lines.
fn message(num: u64, size: usize) -> Vec<u8> {
    let mut m = format!(
        "Received: from mx{}.example.org by mail.example.org\n\
         From: Correspondent {} <c{}@example.org>\n\
         To: reader@example.org\n\
         Subject: message {num}\n\
         Message-Id: <{num}.{}@example.org>\n\n",
        num % 7,
        num % 97,
        num % 97,
        num * 7919
    )
    .into_bytes();
    let mut line = 0u64;
    while m.len() < size {
        m.extend_from_slice(
            format!("{line:>4}: the quick brown fox jumps over the lazy dog, again.\n").as_bytes(),
        );
        line += 1;
    }
    m.truncate(size);
    if let Some(last) = m.last_mut() {
        *last = b'\n';
    }
    m
}

fn invalid(msg: String) -> ufs::Error {
    ufs::Error::new(ufs::ErrorKind::Invalid, msg)
}

/// The entries of `dir` other than `.` and `..`, in readdir order.
fn listing(fs: &Fs, dir: Ino) -> ufs::Result<Vec<ufs::dir::ReadDirEntry>> {
    let mut v = fs.readdir(dir, 0, usize::MAX)?;
    v.retain(|e| e.name != b"." && e.name != b"..");
    Ok(v)
}

struct Meter<'a> {
    dev: &'a ModeledDisk<SparseDevice>,
    fs: &'a Fs,
    workload: Workload,
    phases: Vec<Phase>,
}

impl Meter<'_> {
    fn order(&self) -> ufs::Result<OrderStats> {
        Ok(self.fs.stats(None, false)?.order)
    }

    /// Runs phase `name`, then a sync; records both figures.
    fn phase<T>(&mut self, name: &str, f: impl FnOnce() -> ufs::Result<T>) -> ufs::Result<T> {
        let o0 = self.order()?;
        let e0 = self.fs.cache_stats().evictions;
        let d0 = ModeledDisk::disk_stats(self.dev);
        let t = Instant::now();
        let out = f()?;
        let wall_ms = t.elapsed().as_secs_f64() * 1e3;
        let d1 = ModeledDisk::disk_stats(self.dev);
        let o1 = self.order()?;
        self.fs.sync()?;
        let wall_sync_ms = t.elapsed().as_secs_f64() * 1e3;
        let d2 = ModeledDisk::disk_stats(self.dev);
        let o2 = self.order()?;
        let disk = d1.since(&d0);
        let disk_sync = d2.since(&d0);
        self.phases.push(Phase {
            workload: self.workload.name().into(),
            name: name.into(),
            modeled_ms: disk.busy_ms,
            modeled_sync_ms: disk_sync.busy_ms,
            wall_ms,
            wall_sync_ms,
            reads: disk_sync.reads,
            writes: disk_sync.writes,
            disk,
            disk_sync,
            order: OrderDelta::between(&o0, &o1),
            order_sync: OrderDelta::between(&o0, &o2),
            evictions: self.fs.cache_stats().evictions - e0,
        });
        Ok(out)
    }
}

/// A fresh file system on the modeled disk, mounted under `mode`.
fn make_fs(cfg: &Config, mode: WriteMode) -> ufs::Result<(Arc<ModeledDisk<SparseDevice>>, Fs)> {
    let params = NewfsParams {
        seed: Some(1),
        time: Some(1_020_000_000),
        ..Default::default()
    };
    let opts = MountOptions {
        cache_bytes: cfg.cache_bytes,
        readahead: 0,
        seed: Some(cfg.seed),
        write_mode: Some(mode),
        vmiodir: cfg.vmiodir,
        ..Default::default()
    };
    crate::modeled_fs(&cfg.disk, cfg.fs_bytes, &params, opts)
}

/// `files`: N empty files in one directory, then unlink them all.
fn files_workload(cfg: &Config, m: &mut Meter, progress: &mut dyn FnMut(&str)) -> ufs::Result<()> {
    let fs = m.fs;
    let root = fs.root();
    let n = cfg.files;
    progress("create");
    let dir = m.phase("create", || {
        let dir = fs.mkdir(root, b"files", 0o755, Cred::ROOT)?.ino;
        for i in 0..n {
            fs.mknod(dir, format!("f{i:07}").as_bytes(), 0o100644, 0, Cred::ROOT)?;
        }
        Ok(dir)
    })?;
    progress("remove");
    let found = m.phase("remove", || {
        let entries = listing(fs, dir)?;
        for e in &entries {
            fs.unlink(dir, &e.name)?;
        }
        Ok(entries.len() as u64)
    })?;
    if found != n {
        return Err(invalid(format!(
            "files: remove found {found} entries, {n} were created"
        )));
    }
    let left = listing(fs, dir)?.len();
    if left != 0 {
        return Err(invalid(format!("files: {left} entries left after remove")));
    }
    Ok(())
}

/// Creates the MH folder `parent/name` holding messages `numbers` of
/// `sizes` bytes, in that order; returns the folder's inode.
pub(crate) fn folder_create(
    fs: &Fs,
    parent: Ino,
    name: &[u8],
    numbers: &[u64],
    sizes: &[usize],
) -> ufs::Result<Ino> {
    let dir = fs.mkdir(parent, name, 0o700, Cred::ROOT)?.ino;
    for (&num, &size) in numbers.iter().zip(sizes) {
        let a = fs.mknod(dir, num.to_string().as_bytes(), 0o100600, 0, Cred::ROOT)?;
        let body = message(num, size);
        let mut off = 0;
        while off < body.len() {
            match fs.write(a.ino, off as u64, &body[off..], Cred::ROOT)? {
                0 => return Err(invalid(format!("mh: message {num}: short write"))),
                n => off += n,
            }
        }
    }
    Ok(dir)
}

/// `folder -pack` of folder `dir`, which must hold exactly `numbers`.
pub(crate) fn folder_pack(fs: &Fs, dir: Ino, numbers: &[u64]) -> ufs::Result<()> {
    // MH reads the folder, sorts the message numbers and renames each
    // to its position; a target is never a message still to be moved
    // (sources ascend and each is at least its position), so nothing
    // is replaced, which NoReplace enforces.
    let mut msgs: Vec<u64> = listing(fs, dir)?
        .iter()
        .filter_map(|e| std::str::from_utf8(&e.name).ok()?.parse().ok())
        .collect();
    msgs.sort_unstable();
    if msgs != numbers {
        return Err(invalid(format!(
            "mh: the folder holds {} messages, not the {} created",
            msgs.len(),
            numbers.len()
        )));
    }
    for (i, &num) in msgs.iter().enumerate() {
        let to = i as u64 + 1;
        if num != to {
            fs.rename(
                dir,
                num.to_string().as_bytes(),
                dir,
                to.to_string().as_bytes(),
                RenameMode::NoReplace,
            )?;
        }
    }
    Ok(())
}

/// Fails unless folder `dir` holds exactly the messages 1..=`n`.
pub(crate) fn folder_check_packed(fs: &Fs, dir: Ino, n: u64) -> ufs::Result<()> {
    let mut names: Vec<u64> = listing(fs, dir)?
        .iter()
        .filter_map(|e| std::str::from_utf8(&e.name).ok()?.parse().ok())
        .collect();
    names.sort_unstable();
    if !names.iter().copied().eq(1..=n) {
        return Err(invalid(format!(
            "mh: after the pack the folder holds {} messages that are not 1..{n}",
            names.len(),
        )));
    }
    Ok(())
}

/// `rm -rf parent/name` of a folder (messages in readdir order, then the
/// directory); fails if it is still there afterwards.
pub(crate) fn folder_remove(fs: &Fs, parent: Ino, name: &[u8], dir: Ino) -> ufs::Result<()> {
    for e in listing(fs, dir)? {
        fs.unlink(dir, &e.name)?;
    }
    fs.rmdir(parent, name)?;
    match fs.lookup(parent, name) {
        Err(e) if e.kind == ufs::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
        Ok(_) => Err(invalid("mh: the folder is still there after rm -rf".into())),
    }
}

/// `mh`: create the folder's messages, `folder -pack`, `rm -rf`. Returns
/// the bytes of message bodies written.
fn mh_workload(cfg: &Config, m: &mut Meter, progress: &mut dyn FnMut(&str)) -> ufs::Result<u64> {
    let fs = m.fs;
    let root = fs.root();
    let mut rng = rand::rngs::StdRng::seed_from_u64(cfg.seed);
    let numbers = folder_numbers(&mut rng, cfg.messages);
    let sizes = message_sizes(&mut rng, cfg.messages);
    let data_bytes: u64 = sizes.iter().map(|&s| s as u64).sum();
    progress("create");
    let dir = m.phase("create", || {
        folder_create(fs, root, b"inbox", &numbers, &sizes)
    })?;
    progress("pack");
    m.phase("pack", || folder_pack(fs, dir, &numbers))?;
    folder_check_packed(fs, dir, cfg.messages)?;
    progress("remove");
    m.phase("remove", || {
        for e in listing(fs, dir)? {
            fs.unlink(dir, &e.name)?;
        }
        fs.rmdir(root, b"inbox")
    })?;
    match fs.lookup(root, b"inbox") {
        Err(e) if e.kind == ufs::ErrorKind::NotFound => Ok(data_bytes),
        Err(e) => Err(e),
        Ok(_) => Err(invalid("mh: the folder is still there after rm -rf".into())),
    }
}

/// One workload under one mode, on a fresh file system; `progress` gets
/// the name of each phase as it starts.
pub fn run(
    cfg: &Config,
    workload: Workload,
    mode: WriteMode,
    progress: &mut dyn FnMut(&str),
) -> ufs::Result<Run> {
    let wall = Instant::now();
    let (dev, fs) = make_fs(cfg, mode)?;
    fs.drop_caches()?;
    let mut m = Meter {
        dev: &dev,
        fs: &fs,
        workload,
        phases: Vec::new(),
    };
    let (entries, data_bytes) = match workload {
        Workload::Files => {
            files_workload(cfg, &mut m, progress)?;
            (cfg.files, 0)
        }
        Workload::Mh => (cfg.messages, mh_workload(cfg, &mut m, progress)?),
    };
    let phases = m.phases;
    let end = fs.stats(None, false)?;
    if end.order.mode != mode.name() {
        return Err(invalid(format!(
            "mounted for {} but the engine runs {}",
            mode.name(),
            end.order.mode
        )));
    }
    fs.unmount()?;
    drop(fs);
    let report = ufs::fsck::fsck(&*dev as &dyn BlockDevice, ufs::fsck::FsckMode::Check)?;
    Ok(Run {
        workload: workload.name().into(),
        mode,
        vmiodir: end.vmiodir,
        phases,
        entries,
        data_bytes,
        fsck_clean: report.findings.is_empty(),
        fsck_findings: report
            .findings
            .iter()
            .take(20)
            .map(|f| format!("{}: {:?}: {}", f.pass, f.ino, f.message))
            .collect(),
        order_total: end.order,
        wall_s: wall.elapsed().as_secs_f64(),
    })
}

/// Every workload under every mode of `cfg`, and the ratios.
pub fn run_all(cfg: &Config, progress: Progress) -> ufs::Result<Report> {
    let wall = Instant::now();
    let spec = preset(&cfg.disk).ok_or_else(|| invalid(format!("no disk model {}", cfg.disk)))?;
    let total: u64 = Workload::ALL
        .iter()
        .map(|w| w.phases().len() as u64 * cfg.modes.len() as u64)
        .sum();
    let mut done = 0u64;
    let mut runs = Vec::new();
    for w in Workload::ALL {
        for &mode in &cfg.modes {
            let r = run(cfg, w, mode, &mut |phase| {
                progress(
                    done,
                    total,
                    &format!("{} {phase}, {}", w.name(), mode.name()),
                );
                done += 1;
            })?;
            runs.push(r);
        }
    }
    progress(total, total, "done");
    Ok(Report {
        config: cfg.clone(),
        disk_description: spec.description.into(),
        ratios: ratios(&runs),
        runs,
        wall_s: wall.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folder_numbers_ascend_with_gaps_and_repeat() {
        let mut a = rand::rngs::StdRng::seed_from_u64(7);
        let mut b = rand::rngs::StdRng::seed_from_u64(7);
        let x = folder_numbers(&mut a, 5000);
        assert_eq!(x, folder_numbers(&mut b, 5000));
        assert!(x.windows(2).all(|w| w[0] < w[1]));
        assert!(x[0] >= 1 && *x.last().unwrap() > 5000, "there are gaps");
        let sizes = message_sizes(&mut a, 5000);
        assert!(sizes.iter().all(|&s| (1024..=8192).contains(&s)));
        let m = message(42, 1500);
        assert_eq!(m.len(), 1500);
        assert!(m.starts_with(b"Received: ") && m.ends_with(b"\n"));
    }
}
