//! The crash tester: runs small deterministic workloads under each write
//! mode on a device that logs every write and flush
//! ([`ufs_sim::crash::RecordingDevice`]), builds the disk images a power
//! cut could have left (every prefix of the write log, or evenly spaced
//! ones, and random reorderings of the writes since the last flush), and
//! checks each image twice:
//!
//! 1. **Consistency**: `fsck -n` on the image. No finding: *clean*; only
//!    findings the mode may leave ([`within_guarantee`]: with soft updates,
//!    blocks and inodes marked used but unreferenced, link counts too high,
//!    counters, the clean flag; in normal and sync modes, anything preen
//!    repairs, maps that call used resources free included, as FFS without
//!    soft updates): *preen-only*; anything else: *inconsistent*.
//!    The image is then repaired (`-p` for preen-only, `-y` otherwise) and
//!    must check clean afterwards, or the state counts as *repair failed*.
//! 2. **Durability**: the repaired image is mounted read-only, and every
//!    file an `fsync` made durable must be there with exactly the content
//!    it had when `fsync` returned, or the state counts as *fsynced lost*.
//!
//! What a state is held to (the invariants of the bookkeeping):
//! - an fsync record is taken when `Fs::fsync` returns, at the number of
//!   writes logged so far; files already on the image before recording
//!   started (a workload's pre-population, unmounted cleanly) are records
//!   from write 0;
//! - a record is checked in a state only if the state holds every write
//!   logged before the record ([`CrashState::durable`] is at least the
//!   record's position) and none of the writes from the first operation
//!   that changed the file afterwards ([`CrashState::crash_point`] is at
//!   most the record's end); an operation that changes the file's content
//!   or removes or replaces one of its names ends the record;
//! - a rename keeps a record alive with the new name as an alternative
//!   (a crash may leave either name; both must not be lost), at most two
//!   names per record; a second move ends it;
//! - a record is satisfied if any of its names holds a regular file with
//!   exactly the expected bytes; errors and panics while checking, mounting
//!   or reading count against the state, never abort the run.
//!
//! Workloads are deterministic for a seed (the write log is the same from
//! run to run, only timestamps differ), except `threads`, whose clients
//! and syncer interleave as the scheduler lets them; small (a few hundred
//! operations on an 8 MiB file system with 4 KiB blocks and 512-byte
//! fragments, so that indirect and double-indirect blocks come cheaply)
//! and never print.
//! States are checked on all CPUs; results do not depend on the number of
//! threads.
use crate::Progress;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;
use ufs::dev::MemDevice;
use ufs::fsck::{fsck, Finding, FsckMode};
use ufs::newfs::{newfs, NewfsParams};
use ufs::order::{Barrier, WriteMode};
use ufs::{Cred, Error, ErrorKind, FileKind, Fs, Ino, MountOptions, RenameMode, SetAttr};
use ufs_sim::crash::{CrashState, RecordingDevice};

/// Size of every test file system.
pub const IMAGE_BYTES: u64 = 8 << 20;
/// Block and fragment size: small, so that files of a few hundred KB need
/// indirect blocks (12 direct blocks hold 48 KiB; one indirect block 2 MiB).
pub const BSIZE: u64 = 4096;
pub const FSIZE: u64 = 512;
/// Buffer cache of the recorded mount: the engine's minimum, so that the
/// larger workloads evict (and write) dirty blocks between fsyncs.
pub const CACHE_BYTES: u64 = 1 << 20;
/// The engine's smallest cache: what one operation uses at once, little
/// more, so that blocks are evicted (and what they need forced out) in the
/// middle of other clients' operations, as on a busy mount.
pub const SMALL_CACHE_BYTES: u64 = ufs::cache::MIN_LIMIT;

/// The workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// Files of 0 bytes to 300 KB (fragments, direct and indirect blocks),
    /// some fsynced, some appended to.
    Create,
    /// Trees of directories with files, and one directory of many
    /// subdirectories.
    Mkdir,
    /// Renames of files and directories across directories, over an
    /// existing file and an existing empty directory, one exchange, and
    /// files renamed right after their fsync.
    Rename,
    /// Unlinks (files with several hard links among them) and rmdirs.
    Unlink,
    /// Files grown and shrunk across fragment, block, direct/indirect and
    /// indirect/double-indirect boundaries.
    Truncate,
    /// Mail delivery: write into `tmp/`, fsync, rename into `new/`; later
    /// moved to `cur/` and some deleted.
    Maildir,
    /// One directory grown past its 12 direct blocks into its indirect
    /// block, some of its files fsynced on the way; half its names
    /// removed, some renamed in place, some removed names created again,
    /// then all of it removed.
    Bigdir,
    /// Files created one at a time right after a sync (the rhythm of the
    /// mount's syncer) in a directory large enough for inodes in
    /// directory order, so that new inode blocks are claimed while their
    /// cylinder group is clean: the group's `cg_initediblk` must reach the
    /// disk before any name of an inode in those blocks (FreeBSD's fsck
    /// reads no inode beyond it).
    Inodes,
    /// The mount's shape: three clients on threads of their own (file
    /// creation with fsyncs, a maildir, renames and removals) and a syncer
    /// thread flushing everything every few milliseconds, with the
    /// smallest cache. The only workload whose write log differs from run
    /// to run (the threads interleave as the scheduler lets them).
    Threads,
    /// Extended attributes set, replaced, grown past one block of the
    /// attribute area and shrunk, removed, on files and directories, some
    /// fsynced; files carrying attributes unlinked (their area is freed
    /// with them).
    Xattr,
}

impl Workload {
    pub const ALL: [Workload; 10] = [
        Workload::Create,
        Workload::Mkdir,
        Workload::Rename,
        Workload::Unlink,
        Workload::Truncate,
        Workload::Maildir,
        Workload::Bigdir,
        Workload::Inodes,
        Workload::Threads,
        Workload::Xattr,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Workload::Create => "create",
            Workload::Mkdir => "mkdir",
            Workload::Rename => "rename",
            Workload::Unlink => "unlink",
            Workload::Truncate => "truncate",
            Workload::Maildir => "maildir",
            Workload::Bigdir => "bigdir",
            Workload::Inodes => "inodes",
            Workload::Threads => "threads",
            Workload::Xattr => "xattr",
        }
    }

    pub fn parse(s: &str) -> Option<Workload> {
        Workload::ALL.into_iter().find(|w| w.name() == s)
    }

    /// Files and directories present before recording starts.
    fn populate(self, s: &mut Session) -> ufs::Result<()> {
        match self {
            Workload::Create
            | Workload::Mkdir
            | Workload::Bigdir
            | Workload::Inodes
            | Workload::Threads => Ok(()),
            Workload::Rename => populate_rename(s),
            Workload::Unlink => populate_unlink(s),
            Workload::Truncate => populate_truncate(s),
            Workload::Maildir => populate_maildir(s),
            Workload::Xattr => populate_xattr(s),
        }
    }

    /// The buffer cache of its mount.
    fn cache_bytes(self) -> u64 {
        match self {
            Workload::Threads => SMALL_CACHE_BYTES,
            _ => CACHE_BYTES,
        }
    }

    /// The recorded part.
    fn run(self, s: &mut Session) -> ufs::Result<()> {
        match self {
            Workload::Create => run_create(s),
            Workload::Mkdir => run_mkdir(s),
            Workload::Rename => run_rename(s),
            Workload::Unlink => run_unlink(s),
            Workload::Truncate => run_truncate(s),
            Workload::Maildir => run_maildir(s),
            Workload::Bigdir => run_bigdir(s),
            Workload::Inodes => run_inodes(s),
            Workload::Threads => run_threads(s),
            Workload::Xattr => run_xattr(s),
        }
    }
}

/// What to run.
#[derive(Debug, Clone, Serialize)]
pub struct Config {
    pub modes: Vec<WriteMode>,
    pub workloads: Vec<Workload>,
    /// Prefix states per mode and workload (evenly spaced over the log,
    /// the empty and the full log always among them; 0: none).
    pub max_prefix: usize,
    /// Reordered states per mode and workload. With `barrier=write`,
    /// whose order is promised for a killed process and not across a power
    /// cut, this many more prefix states instead (what a kill leaves).
    pub reorders: usize,
    /// What ordered writes wait for (None: each mode's default,
    /// [`Barrier::default_for`]).
    pub barrier: Option<Barrier>,
    pub seed: u64,
    /// Threads checking states (0: one per CPU).
    pub threads: usize,
    /// Failing states kept as examples per mode and workload.
    pub max_examples: usize,
    /// Where to save the image of each example state, as the crash left
    /// it (before any repair): `MODE-WORKLOAD-stateN.img`.
    #[serde(skip)]
    pub keep: Option<std::path::PathBuf>,
    /// The file system the workloads run on (UFS1 or UFS2, either byte
    /// order), as its short name in the report.
    #[serde(serialize_with = "variant_name")]
    pub variant: ufs_format::Variant,
}

fn variant_name<S: serde::Serializer>(v: &ufs_format::Variant, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(v.short_name())
}

impl Default for Config {
    /// Every mode and workload, up to 1,000 prefixes (every prefix of
    /// most logs) and 1,000 reorderings each: about 38,000 states, 30,000
    /// of them in the three safe modes, some 40 s on two CPUs in a release
    /// build.
    fn default() -> Self {
        Config {
            modes: WriteMode::ALL.to_vec(),
            workloads: Workload::ALL.to_vec(),
            max_prefix: 1000,
            reorders: 1000,
            barrier: None,
            seed: 1,
            threads: 0,
            max_examples: 3,
            keep: None,
            variant: ufs_format::Variant::UFS2_LE,
        }
    }
}

/// How fsck found a crash state before repair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// No finding at all.
    Clean,
    /// Only what the crash guarantee allows (preen fixes it).
    PreenOnly,
    /// Anything else, or fsck could not run.
    Inconsistent,
}

/// Whether a finding is damage a crash may leave in `mode`: with soft
/// updates, what preen repairs except resources in use that the maps call
/// free ([`Finding::within_crash_guarantee`]); in normal and sync modes,
/// which leave the maps to fsck as FFS does, anything preen repairs.
pub fn within_guarantee(mode: WriteMode, f: &Finding) -> bool {
    if mode.orders_maps() {
        f.within_crash_guarantee()
    } else {
        f.severity == ufs::fsck::Severity::Preen
    }
}

/// Classifies fsck's findings on a crash image of a file system written
/// in `mode`.
pub fn classify(mode: WriteMode, findings: &[Finding]) -> Class {
    if findings.is_empty() {
        Class::Clean
    } else if findings.iter().all(|f| within_guarantee(mode, f)) {
        Class::PreenOnly
    } else {
        Class::Inconsistent
    }
}

/// One crash state that broke something, for the report.
#[derive(Debug, Clone, Serialize)]
pub struct Example {
    /// Index among the states of its mode and workload.
    pub state: usize,
    /// "prefix" or "reordered".
    pub kind: String,
    /// Writes the image holds.
    pub writes: usize,
    /// Writes issued when the power went.
    pub crash_point: usize,
    /// Writes certainly durable.
    pub durable: usize,
    /// The workload operation that issued the last write before the crash.
    pub during: String,
    /// "inconsistent", "fsynced_lost", "repair_failed".
    pub problems: Vec<String>,
    /// For an inconsistent state: whether `fsck -p` alone repaired it.
    pub preen_alone_repairs: Option<bool>,
    /// Findings of the first check, those outside the crash guarantee
    /// first and marked "[beyond]", as "pass: [inode N:] message".
    pub findings: Vec<String>,
    /// Findings still there after the repair, or why the repair failed.
    pub after_repair: Vec<String>,
    /// Fsynced files not found as promised.
    pub lost: Vec<String>,
    /// The saved image of the state (with `keep`).
    pub image: Option<String>,
}

/// Results of one mode and workload.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    pub mode: WriteMode,
    /// What its ordered writes waited for.
    pub barrier: Barrier,
    pub workload: Workload,
    pub states: usize,
    pub clean: usize,
    pub preen_only: usize,
    pub inconsistent: usize,
    /// Of the inconsistent states, those `fsck -p` alone repaired anyway
    /// (every finding fixed, clean afterwards): the check-only run judged
    /// them worse than preen did. Diagnostic; they still count as
    /// inconsistent.
    pub inconsistent_preen_repairs: usize,
    /// States in which a file `fsync` promised was missing or different.
    pub fsynced_lost: usize,
    /// States whose repair failed or left findings.
    pub repair_failed: usize,
    pub log_writes: usize,
    pub log_flushes: usize,
    /// Fsync records taken (files pre-populated included).
    pub fsync_records: usize,
    /// Record checks made over all states.
    pub record_checks: usize,
    pub seconds: f64,
    pub examples: Vec<Example>,
}

impl RunResult {
    /// Whether the state's guarantees held everywhere.
    pub fn ok(&self) -> bool {
        self.inconsistent == 0 && self.fsynced_lost == 0 && self.repair_failed == 0
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub config: Config,
    pub results: Vec<RunResult>,
    pub total_states: usize,
    pub seconds: f64,
}

impl Report {
    /// One line per mode and workload that broke a guarantee, in the modes
    /// that promise them (async is expected to fail).
    pub fn failures(&self) -> Vec<String> {
        self.results
            .iter()
            .filter(|r| r.mode != WriteMode::Async && !r.ok())
            .map(|r| {
                format!(
                    "{} (barrier={})/{}: {} inconsistent, {} fsynced lost, {} repair failed of {} states",
                    r.mode.name(),
                    r.barrier.name(),
                    r.workload.name(),
                    r.inconsistent,
                    r.fsynced_lost,
                    r.repair_failed,
                    r.states
                )
            })
            .collect()
    }

    /// States checked in `mode`.
    pub fn states_in(&self, mode: WriteMode) -> usize {
        self.results
            .iter()
            .filter(|r| r.mode == mode)
            .map(|r| r.states)
            .sum()
    }
}

/// Runs every (mode, workload) of `cfg`. `progress` gets (states checked,
/// states expected, what runs now).
pub fn run(cfg: &Config, progress: Progress) -> ufs::Result<Report> {
    let t0 = Instant::now();
    // UFS1 inodes keep no extended attributes: that workload has nothing
    // to do there.
    let combos: Vec<(WriteMode, Workload)> = cfg
        .modes
        .iter()
        .flat_map(|&m| cfg.workloads.iter().map(move |&w| (m, w)))
        .filter(|&(_, w)| !(cfg.variant.is_ufs1() && w == Workload::Xattr))
        .collect();
    let estimate = cfg.max_prefix.saturating_add(1).min(1 << 20) + cfg.reorders;
    let mut done = 0u64;
    let mut results = Vec::new();
    for (i, &(mode, w)) in combos.iter().enumerate() {
        let later = (combos.len() - i - 1) * estimate;
        let r = run_one(cfg, mode, w, &mut |d, n| {
            let msg = format!("{}/{}", mode.name(), w.name());
            progress(done + d as u64, done + (n + later) as u64, &msg);
        })?;
        done += r.states as u64;
        results.push(r);
    }
    let total_states = results.iter().map(|r| r.states).sum();
    Ok(Report {
        config: cfg.clone(),
        results,
        total_states,
        seconds: t0.elapsed().as_secs_f64(),
    })
}

fn newfs_params(v: ufs_format::Variant) -> NewfsParams {
    NewfsParams {
        format: v.ufs,
        endian: v.endian,
        seed: Some(1),
        time: Some(1_700_000_000),
        bsize: BSIZE,
        fsize: FSIZE,
        density: Some(4096),
        // Four cylinder groups of 2 MiB: placement crosses groups.
        maxblkspercg: Some((2 << 20) / FSIZE),
        ..Default::default()
    }
}

fn mount_opts(mode: WriteMode, seed: u64, w: Workload) -> MountOptions {
    MountOptions {
        write_mode: Some(mode),
        barrier: None,
        seed: Some(seed),
        cache_bytes: w.cache_bytes(),
        ..Default::default()
    }
}

type Recorder = RecordingDevice<Arc<MemDevice>>;

/// Runs one workload in one mode and checks its crash states.
pub fn run_one(
    cfg: &Config,
    mode: WriteMode,
    w: Workload,
    progress: &mut dyn FnMut(usize, usize),
) -> ufs::Result<RunResult> {
    let t0 = Instant::now();
    let dev = Arc::new(MemDevice::new(IMAGE_BYTES));
    newfs(&*dev, &newfs_params(cfg.variant))?;
    let seed = cfg.seed;
    let ctx = |e: Error, what: &str| {
        Error::new(e.kind, format!("{}/{}: {what}: {e}", mode.name(), w.name()))
    };
    let barrier = cfg.barrier.unwrap_or(Barrier::default_for(mode));
    let opts = MountOptions {
        barrier: Some(barrier),
        ..mount_opts(mode, seed, w)
    };
    let mut s = Session::new(
        Arc::new(Fs::open(Box::new(dev.clone()), opts.clone()).map_err(|e| ctx(e, "mount"))?),
        None,
        seed,
    );
    w.populate(&mut s).map_err(|e| ctx(e, "populate"))?;
    s.fs.unmount().map_err(|e| ctx(e, "unmount"))?;
    s.record_all_files();
    s.ops.clear();

    let rec = Arc::new(RecordingDevice::new(dev.clone())?);
    s.fs = Arc::new(Fs::open(Box::new(rec.clone()), opts).map_err(|e| ctx(e, "mount"))?);
    s.rec = Some(rec.clone());
    w.run(&mut s).map_err(|e| ctx(e, "workload"))?;
    s.begin("unmount".to_string());
    s.fs.unmount().map_err(|e| ctx(e, "unmount"))?;
    let (log_writes, log_flushes) = rec.counts();

    let state_seed = seed
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .wrapping_add((mode as u64) << 8 | w as u64);
    // A write barrier orders by completion: a crash of the daemon leaves
    // a prefix of its writes, and that is all it promises (a drive that
    // reorders its cache across a power cut is outside it), so the
    // reordering budget goes to more prefixes.
    let states = match barrier {
        Barrier::Flush => rec.states(cfg.max_prefix, cfg.reorders, state_seed),
        Barrier::Write => rec.states(cfg.max_prefix.saturating_add(cfg.reorders), 0, state_seed),
    };
    let outcomes = check_states(mode, &rec, &states, &s.records, cfg.threads, progress);

    let mut r = RunResult {
        mode,
        barrier,
        workload: w,
        states: states.len(),
        clean: 0,
        preen_only: 0,
        inconsistent: 0,
        inconsistent_preen_repairs: 0,
        fsynced_lost: 0,
        repair_failed: 0,
        log_writes,
        log_flushes,
        fsync_records: s.records.len(),
        record_checks: 0,
        seconds: 0.0,
        examples: Vec::new(),
    };
    for (i, (st, o)) in states.iter().zip(outcomes).enumerate() {
        match o.class {
            Class::Clean => r.clean += 1,
            Class::PreenOnly => r.preen_only += 1,
            Class::Inconsistent => r.inconsistent += 1,
        }
        r.record_checks += o.checked;
        r.inconsistent_preen_repairs += (o.preen_alone == Some(true)) as usize;
        let lost = !o.lost.is_empty();
        let repair_failed = !o.after_repair.is_empty();
        r.fsynced_lost += lost as usize;
        r.repair_failed += repair_failed as usize;
        if (o.class == Class::Inconsistent || lost || repair_failed)
            && r.examples.len() < cfg.max_examples
        {
            let mut problems = Vec::new();
            if o.class == Class::Inconsistent {
                problems.push("inconsistent".to_string());
            }
            if lost {
                problems.push("fsynced_lost".to_string());
            }
            if repair_failed {
                problems.push("repair_failed".to_string());
            }
            let image = match &cfg.keep {
                Some(dir) => {
                    let path = dir.join(format!("{}-{}-state{i}.img", mode.name(), w.name()));
                    rec.image(st)
                        .and_then(|img| {
                            std::fs::create_dir_all(dir)
                                .and_then(|_| std::fs::write(&path, img.snapshot()))
                                .map_err(|e| Error::new(ErrorKind::Io, e.to_string()))
                        })
                        .map_err(|e| ctx(e, &format!("saving {}", path.display())))?;
                    Some(path.display().to_string())
                }
                None => None,
            };
            r.examples.push(Example {
                image,
                state: i,
                kind: st.kind.to_string(),
                writes: st.writes.len(),
                crash_point: st.crash_point,
                durable: st.durable,
                during: s.op_at(st.crash_point),
                problems,
                preen_alone_repairs: o.preen_alone,
                findings: o.findings,
                after_repair: o.after_repair,
                lost: o.lost,
            });
        }
    }
    r.seconds = t0.elapsed().as_secs_f64();
    Ok(r)
}

/// What a run with an injected device failure showed.
#[derive(Debug, Clone, Serialize)]
pub struct FaultOutcome {
    pub mode: WriteMode,
    pub workload: Workload,
    pub fault: String,
    /// The fault happened (the workload issued that many requests).
    pub fired: bool,
    /// The error the workload or the unmount met, if any.
    pub error: Option<String>,
    /// Writes and flushes the engine still asked for after the failure.
    pub requests_after_fault: usize,
    /// Writes and flushes asked for in all (the failing one included).
    pub writes: usize,
    pub flushes: usize,
    /// The unmount after the failure refused to mark the image clean.
    pub unmount_refused: bool,
    /// `fs_clean` on the image as the failure left it.
    pub marked_clean: bool,
    /// Findings of `fsck -y`, then of `fsck -n` after it (must be none).
    pub repaired: usize,
    pub after_repair: Vec<String>,
    /// A panic anywhere (must not happen).
    pub panic: Option<String>,
}

impl FaultOutcome {
    /// What a failing device must leave: no panic, no write after the
    /// failure, no clean flag on a damaged image, and an image fsck -y
    /// repairs.
    pub fn ok(&self) -> bool {
        self.panic.is_none()
            && self.after_repair.is_empty()
            && (!self.fired
                || (self.requests_after_fault == 0 && self.unmount_refused && !self.marked_clean))
    }
}

/// Runs `w` in `mode` on a device that fails as `fault` says, then
/// unmounts, and checks what the failure left (see [`FaultOutcome`]).
pub fn fault_run(mode: WriteMode, w: Workload, fault: ufs_sim::fault::Fault) -> FaultOutcome {
    use ufs_sim::fault::FaultDevice;
    let mut out = FaultOutcome {
        mode,
        workload: w,
        fault: format!("{fault:?}"),
        fired: false,
        error: None,
        requests_after_fault: 0,
        writes: 0,
        flushes: 0,
        unmount_refused: false,
        marked_clean: true,
        repaired: 0,
        after_repair: Vec::new(),
        panic: None,
    };
    let dev = Arc::new(MemDevice::new(IMAGE_BYTES));
    let prepared = catch_unwind(AssertUnwindSafe(|| -> ufs::Result<Session> {
        newfs(&*dev, &newfs_params(ufs_format::Variant::UFS2_LE))?;
        let mut s = Session::new(
            Arc::new(Fs::open(Box::new(dev.clone()), mount_opts(mode, 1, w))?),
            None,
            1,
        );
        w.populate(&mut s)?;
        s.fs.unmount()?;
        Ok(s)
    }));
    let mut s = match prepared {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            out.panic = Some(format!("preparing the image: {e}"));
            return out;
        }
        Err(p) => {
            out.panic = Some(format!("preparing the image: {}", panic_text(p)));
            return out;
        }
    };
    let faulty = Arc::new(FaultDevice::new(dev.clone(), fault));
    let ran = catch_unwind(AssertUnwindSafe(|| {
        s.fs = match Fs::open(Box::new(faulty.clone()), mount_opts(mode, 1, w)) {
            Ok(fs) => Arc::new(fs),
            Err(e) => return (Some(format!("mount: {e}")), true),
        };
        let r = w.run(&mut s);
        let u = s.fs.unmount();
        let refused = u.is_err();
        let err = r.err().or(u.err()).map(|e| e.to_string());
        (err, refused)
    }));
    match ran {
        Ok((err, refused)) => {
            out.error = err;
            out.unmount_refused = refused;
        }
        Err(p) => {
            out.panic = Some(panic_text(p));
            return out;
        }
    }
    out.fired = faulty.fired();
    out.requests_after_fault = faulty.requests_after_fault();
    (out.writes, out.flushes) = faulty.counts();
    out.marked_clean = ufs::fs::read_superblock(&*dev).is_ok_and(|(sb, _, _)| sb.fs_clean() != 0);
    let repair = catch_unwind(AssertUnwindSafe(
        || -> Result<(usize, Vec<String>), String> {
            let y = fsck(&*dev, FsckMode::Yes).map_err(|e| format!("fsck -y: {e}"))?;
            let n = fsck(&*dev, FsckMode::Check).map_err(|e| format!("fsck -n: {e}"))?;
            Ok((
                y.findings.len(),
                n.findings
                    .iter()
                    .map(|f| format!("{}: {}", f.pass, f.message))
                    .collect(),
            ))
        },
    ));
    match repair {
        Ok(Ok((n, after))) => {
            out.repaired = n;
            out.after_repair = after;
        }
        Ok(Err(e)) => out.after_repair.push(e),
        Err(p) => out.panic = Some(format!("fsck: {}", panic_text(p))),
    }
    out
}

/// What one crash state showed.
struct Checked {
    class: Class,
    findings: Vec<String>,
    after_repair: Vec<String>,
    lost: Vec<String>,
    checked: usize,
    /// For an inconsistent state: whether `fsck -p` alone repaired it.
    preen_alone: Option<bool>,
}

impl Checked {
    /// Before any check: inconsistent until fsck says otherwise.
    fn new() -> Checked {
        Checked {
            class: Class::Inconsistent,
            findings: Vec::new(),
            after_repair: Vec::new(),
            lost: Vec::new(),
            checked: 0,
            preen_alone: None,
        }
    }

    /// A state that could not be checked at all.
    fn broken(why: String) -> Checked {
        Checked {
            findings: vec![why.clone()],
            after_repair: vec![why],
            ..Checked::new()
        }
    }
}

/// Checks every state, on `threads` threads (0: one per CPU); the
/// outcomes come back in the order of `states`.
fn check_states(
    mode: WriteMode,
    rec: &Recorder,
    states: &[CrashState],
    records: &[Record],
    threads: usize,
    progress: &mut dyn FnMut(usize, usize),
) -> Vec<Checked> {
    let threads = if threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        threads
    }
    .clamp(1, states.len().max(1));
    let next = AtomicUsize::new(0);
    let mut out: Vec<Option<Checked>> = (0..states.len()).map(|_| None).collect();
    std::thread::scope(|sc| {
        let (tx, rx) = std::sync::mpsc::channel();
        for _ in 0..threads {
            let tx = tx.clone();
            let next = &next;
            sc.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= states.len() {
                    break;
                }
                let o = check_state(mode, rec, &states[i], records);
                if tx.send((i, o)).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        let mut n = 0;
        for (i, o) in rx {
            out[i] = Some(o);
            n += 1;
            progress(n, states.len());
        }
    });
    out.into_iter()
        .map(|o| {
            // A worker that died without an answer (it cannot: every check
            // catches panics) would leave a gap; count it as a failure.
            o.unwrap_or_else(|| Checked::broken("checker: no result for this state".to_string()))
        })
        .collect()
}

fn panic_text(p: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic".to_string()
    }
}

/// "pass: [inode N:] message", marked "[beyond]" when the finding is not
/// damage a crash may leave under ordered writes.
fn finding_text(mode: WriteMode, f: &Finding) -> String {
    let mark = if within_guarantee(mode, f) {
        ""
    } else {
        "[beyond] "
    };
    match f.ino {
        Some(ino) => format!("{mark}{}: inode {ino}: {}", f.pass, f.message),
        None => format!("{mark}{}: {}", f.pass, f.message),
    }
}

/// Builds the image of `state`, checks, repairs, rechecks, mounts and
/// verifies the fsync records that apply to it.
fn check_state(mode: WriteMode, rec: &Recorder, state: &CrashState, records: &[Record]) -> Checked {
    let img = match rec.image(state) {
        Ok(i) => Arc::new(i),
        Err(e) => return Checked::broken(format!("image: {e}")),
    };
    let mut o = Checked::new();
    consistency(mode, &img, &mut o);
    if o.class == Class::Inconsistent {
        o.preen_alone = Some(rec.image(state).is_ok_and(|copy| preen_repairs(&copy)));
    }
    durability(&img, state, records, &mut o);
    o
}

/// Whether `fsck -p` repairs `img` completely (every finding fixed, a
/// clean check afterwards): tells a check-only verdict that preen would
/// not share from damage preen really stops at.
fn preen_repairs(img: &MemDevice) -> bool {
    catch_unwind(AssertUnwindSafe(|| {
        let Ok(rep) = fsck(img, FsckMode::Preen) else {
            return false;
        };
        rep.clean
            && rep.findings.iter().all(|f| f.fixed)
            && fsck(img, FsckMode::Check).is_ok_and(|r| r.findings.is_empty())
    }))
    .unwrap_or(false)
}

/// Check, repair, check again.
fn consistency(mode: WriteMode, img: &Arc<MemDevice>, o: &mut Checked) {
    let first = catch_unwind(AssertUnwindSafe(|| fsck(&**img, FsckMode::Check)));
    let class = match first {
        Ok(Ok(rep)) => {
            let class = classify(mode, &rep.findings);
            let mut f: Vec<&Finding> = rep.findings.iter().collect();
            f.sort_by_key(|f| within_guarantee(mode, f));
            o.findings = f.into_iter().map(|f| finding_text(mode, f)).collect();
            class
        }
        Ok(Err(e)) => {
            o.findings.push(format!("fsck -n: {e}"));
            Class::Inconsistent
        }
        Err(p) => {
            o.findings
                .push(format!("fsck -n panicked: {}", panic_text(p)));
            Class::Inconsistent
        }
    };
    o.class = class;
    if class == Class::Clean {
        return;
    }
    let how = if class == Class::PreenOnly {
        FsckMode::Preen
    } else {
        FsckMode::Yes
    };
    match catch_unwind(AssertUnwindSafe(|| fsck(&**img, how))) {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => o.after_repair.push(format!("fsck {how:?}: {e}")),
        Err(p) => o
            .after_repair
            .push(format!("fsck {how:?} panicked: {}", panic_text(p))),
    }
    match catch_unwind(AssertUnwindSafe(|| fsck(&**img, FsckMode::Check))) {
        Ok(Ok(rep)) => o
            .after_repair
            .extend(rep.findings.iter().map(|f| finding_text(mode, f))),
        Ok(Err(e)) => o.after_repair.push(format!("fsck -n after repair: {e}")),
        Err(p) => o
            .after_repair
            .push(format!("fsck -n after repair panicked: {}", panic_text(p))),
    }
}

/// Mounts the repaired image and looks for every file `fsync` promised.
fn durability(img: &Arc<MemDevice>, state: &CrashState, records: &[Record], o: &mut Checked) {
    let due: Vec<&Record> = records.iter().filter(|r| r.due(state)).collect();
    let res = catch_unwind(AssertUnwindSafe(
        || -> Result<(Vec<String>, Vec<String>), String> {
            let fs = Fs::open(
                Box::new(img.clone()),
                MountOptions {
                    read_only: true,
                    force: true,
                    write_mode: Some(WriteMode::Async),
                    ..Default::default()
                },
            )
            .map_err(|e| format!("mount after repair: {e}"))?;
            let mut lost = Vec::new();
            for r in &due {
                if let Err(why) = verify(&fs, r) {
                    lost.push(why);
                }
            }
            Ok((lost, names_held_twice(&fs)))
        },
    ));
    o.checked = due.len();
    match res {
        Ok(Ok((lost, twice))) => {
            o.lost = lost;
            // fsck (FreeBSD's too) does not look for a name held twice in
            // one directory; the tester does, and counts it as damage.
            if !twice.is_empty() {
                o.class = Class::Inconsistent;
                o.preen_alone = Some(false);
                o.findings
                    .extend(twice.into_iter().map(|t| format!("[beyond] tester: {t}")));
            }
        }
        Ok(Err(e)) => o.lost.push(e),
        Err(p) => o
            .lost
            .push(format!("mount or read panicked: {}", panic_text(p))),
    }
}

/// Every directory of the mounted image that holds one name twice.
pub(crate) fn names_held_twice(fs: &Fs) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![(fs.root(), String::new())];
    let mut seen_dirs = std::collections::HashSet::new();
    while let Some((dir, path)) = todo.pop() {
        if !seen_dirs.insert(dir) {
            continue;
        }
        let Ok(entries) = fs.readdir(dir, 0, usize::MAX) else {
            continue;
        };
        let mut names = std::collections::HashSet::new();
        for e in entries {
            if e.name == b"." || e.name == b".." {
                continue;
            }
            let name = String::from_utf8_lossy(&e.name).into_owned();
            if !names.insert(e.name.clone()) {
                out.push(format!("directory /{path} holds the name {name} twice"));
            }
            if e.dtype == ufs_format::dinode::dt::DT_DIR {
                todo.push((e.ino, format!("{path}{name}/")));
            }
        }
    }
    out
}

/// Whether one of the record's names holds exactly its content.
fn verify(fs: &Fs, r: &Record) -> Result<(), String> {
    let mut why = Vec::new();
    for p in &r.paths {
        match read_file(fs, p) {
            Ok(data) if data == *r.content => return Ok(()),
            Ok(data) => {
                let first = data
                    .iter()
                    .zip(r.content.iter())
                    .position(|(a, b)| a != b)
                    .unwrap_or(data.len().min(r.content.len()));
                why.push(format!(
                    "{p}: {} bytes, expected {}, first difference at {first}",
                    data.len(),
                    r.content.len()
                ));
            }
            Err(e) => why.push(format!("{p}: {e}")),
        }
    }
    Err(format!(
        "fsync record of inode {} (fsync after write {}): {}",
        r.ino,
        r.at,
        why.join("; ")
    ))
}

pub(crate) fn read_file(fs: &Fs, path: &str) -> ufs::Result<Vec<u8>> {
    let ino = fs.resolve(Path::new(path))?;
    let a = fs.getattr(ino)?;
    if a.kind != FileKind::File {
        return Err(Error::new(
            ErrorKind::Invalid,
            format!("is a {:?}, not a file", a.kind),
        ));
    }
    let mut out = Vec::with_capacity(a.size as usize);
    while (out.len() as u64) < a.size {
        let chunk = fs.read(ino, out.len() as u64, 1 << 16)?;
        if chunk.is_empty() {
            return Err(Error::new(
                ErrorKind::Io,
                format!("short read at {} of {}", out.len(), a.size),
            ));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// A file `fsync` (or a clean unmount before recording) made durable.
#[derive(Debug, Clone)]
struct Record {
    /// Names under which it may be found (the second after a rename).
    paths: Vec<String>,
    ino: Ino,
    content: Arc<Vec<u8>>,
    /// Writes logged when the promise was made.
    at: usize,
    /// Writes logged when an operation first changed the file or one of
    /// its names afterwards (`usize::MAX`: never).
    end: usize,
}

impl Record {
    /// Whether `state` must hold the promise: every write before it is
    /// durable there, and no write of a later change of the file was
    /// issued before the crash.
    fn due(&self, state: &CrashState) -> bool {
        self.at <= state.durable && self.end >= state.crash_point
    }
}

/// `p` is `dir` or below it.
fn under(p: &str, dir: &str) -> bool {
    p == dir || (p.len() > dir.len() && p.starts_with(dir) && p.as_bytes()[dir.len()] == b'/')
}

/// `p` with its prefix `from` replaced by `to` (`p` under `from`).
fn moved(p: &str, from: &str, to: &str) -> String {
    format!("{to}{}", &p[from.len()..])
}

fn split(path: &str) -> (&str, &str) {
    match path.rfind('/') {
        Some(i) => (&path[..i], &path[i + 1..]),
        None => ("", path),
    }
}

/// A workload's view of the file system: the operations it makes, a model
/// of the tree and of every file's bytes, and the fsync records.
struct Session {
    fs: Arc<Fs>,
    rec: Option<Arc<Recorder>>,
    /// Path (relative to the root, no leading slash) to inode.
    nodes: BTreeMap<String, Ino>,
    dirs: BTreeSet<String>,
    content: HashMap<Ino, Vec<u8>>,
    records: Vec<Record>,
    /// Operations of the recorded part: writes logged when each began.
    ops: Vec<(usize, String)>,
    rng: u64,
}

const ROOT: Cred = Cred::ROOT;

impl Session {
    fn new(fs: Arc<Fs>, rec: Option<Arc<Recorder>>, seed: u64) -> Session {
        Session {
            fs,
            rec,
            nodes: BTreeMap::new(),
            dirs: BTreeSet::new(),
            content: HashMap::new(),
            records: Vec::new(),
            ops: Vec::new(),
            rng: seed ^ 0x2545_f491_4f6c_dd1d,
        }
    }

    /// Writes logged so far (0 before recording).
    fn now(&self) -> usize {
        self.rec.as_ref().map_or(0, |r| r.counts().0)
    }

    fn begin(&mut self, what: String) {
        let n = self.now();
        self.ops.push((n, what));
    }

    /// The operation during which write `crash_point - 1` was issued.
    fn op_at(&self, crash_point: usize) -> String {
        if crash_point == 0 {
            return "before the first write".to_string();
        }
        match self.ops.iter().rposition(|(n, _)| *n < crash_point) {
            Some(i) => format!("op {i}: {}", self.ops[i].1),
            None => "before the first operation".to_string(),
        }
    }

    /// Every file of the model is durable (a clean unmount just ended).
    fn record_all_files(&mut self) {
        for (p, &ino) in &self.nodes {
            if let Some(c) = self.content.get(&ino) {
                self.records.push(Record {
                    paths: vec![p.clone()],
                    ino,
                    content: Arc::new(c.clone()),
                    at: 0,
                    end: usize::MAX,
                });
            }
        }
    }

    /// Ends the open records matching `f`.
    fn end_where(&mut self, f: impl Fn(&Record) -> bool) {
        let now = self.now();
        for r in &mut self.records {
            if r.end == usize::MAX && f(r) {
                r.end = now;
            }
        }
    }

    /// A name is about to be created or replaced at `path`.
    fn claim(&mut self, path: &str) {
        self.end_where(|r| r.paths.iter().any(|p| under(p, path)));
    }

    fn ino(&self, path: &str) -> ufs::Result<Ino> {
        if path.is_empty() {
            return Ok(self.fs.root());
        }
        self.nodes.get(path).copied().ok_or_else(|| {
            Error::new(
                ErrorKind::NotFound,
                format!("workload: {path} is not in the model"),
            )
        })
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(len);
        while v.len() < len {
            // xorshift64*
            self.rng ^= self.rng >> 12;
            self.rng ^= self.rng << 25;
            self.rng ^= self.rng >> 27;
            let x = self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d);
            v.extend_from_slice(&x.to_le_bytes()[..8.min(len - v.len())]);
        }
        v
    }

    /// A number in `0..n`.
    fn below(&mut self, n: usize) -> usize {
        let b = self.bytes(8);
        (u64::from_le_bytes(b.try_into().unwrap_or([0; 8])) % n.max(1) as u64) as usize
    }

    fn mkdir(&mut self, path: &str) -> ufs::Result<()> {
        self.begin(format!("mkdir {path}"));
        self.claim(path);
        let (dir, name) = split(path);
        let parent = self.ino(dir)?;
        let a = self.fs.mkdir(parent, name.as_bytes(), 0o755, ROOT)?;
        self.nodes.insert(path.to_string(), a.ino);
        self.dirs.insert(path.to_string());
        Ok(())
    }

    /// Creates `path` with `len` generated bytes, written in 64 KiB calls.
    fn create(&mut self, path: &str, len: usize) -> ufs::Result<()> {
        self.begin(format!("create {path} ({len} bytes)"));
        self.claim(path);
        let (dir, name) = split(path);
        let parent = self.ino(dir)?;
        let a = self.fs.mknod(parent, name.as_bytes(), 0o100644, 0, ROOT)?;
        self.nodes.insert(path.to_string(), a.ino);
        self.content.insert(a.ino, Vec::new());
        if len > 0 {
            self.write_raw(a.ino, 0, len)?;
        }
        Ok(())
    }

    fn write_raw(&mut self, ino: Ino, off: usize, len: usize) -> ufs::Result<()> {
        let data = self.bytes(len);
        for (i, chunk) in data.chunks(1 << 16).enumerate() {
            let at = off + (i << 16);
            let n = self.fs.write(ino, at as u64, chunk, ROOT)?;
            if n != chunk.len() {
                return Err(Error::new(
                    ErrorKind::Io,
                    format!("short write: {n} of {}", chunk.len()),
                ));
            }
        }
        let c = self.content.entry(ino).or_default();
        if c.len() < off + len {
            c.resize(off + len, 0);
        }
        c[off..off + len].copy_from_slice(&data);
        Ok(())
    }

    /// Writes `len` generated bytes at `off` (a hole is left if `off` is
    /// past the end).
    fn write(&mut self, path: &str, off: usize, len: usize) -> ufs::Result<()> {
        self.begin(format!("write {path} at {off} ({len} bytes)"));
        let ino = self.ino(path)?;
        self.end_where(|r| r.ino == ino);
        self.write_raw(ino, off, len)
    }

    fn truncate(&mut self, path: &str, size: usize) -> ufs::Result<()> {
        self.begin(format!("truncate {path} to {size}"));
        let ino = self.ino(path)?;
        self.end_where(|r| r.ino == ino);
        self.fs.setattr(
            ino,
            &SetAttr {
                size: Some(size as u64),
                ..Default::default()
            },
            ROOT,
        )?;
        self.content.entry(ino).or_default().resize(size, 0);
        Ok(())
    }

    /// Sets user attribute `name` of `path` to `len` bytes.
    fn setxattr(&mut self, path: &str, name: &str, len: usize) -> ufs::Result<()> {
        self.begin(format!("setxattr {path} user.{name} ({len} bytes)"));
        let ino = self.ino(path)?;
        let v = self.bytes(len);
        self.fs.setxattr(
            ino,
            ufs::XattrNs::User,
            name.as_bytes(),
            &v,
            ufs::XattrSet::Either,
            ROOT,
        )
    }

    fn removexattr(&mut self, path: &str, name: &str) -> ufs::Result<()> {
        self.begin(format!("removexattr {path} user.{name}"));
        let ino = self.ino(path)?;
        self.fs
            .removexattr(ino, ufs::XattrNs::User, name.as_bytes(), ROOT)
    }

    /// `fsync(path)`: from now on the file must survive with this content.
    fn fsync(&mut self, path: &str) -> ufs::Result<()> {
        self.begin(format!("fsync {path}"));
        let ino = self.ino(path)?;
        self.fs.fsync(ino)?;
        let content = Arc::new(self.content.get(&ino).cloned().unwrap_or_default());
        let at = self.now();
        self.records.push(Record {
            paths: vec![path.to_string()],
            ino,
            content,
            at,
            end: usize::MAX,
        });
        Ok(())
    }

    fn sync(&mut self) -> ufs::Result<()> {
        self.begin("sync".to_string());
        self.fs.sync()
    }

    /// Moves the model's names under `from` to under `to`.
    fn move_nodes(&mut self, from: &str, to: &str) {
        let keys: Vec<String> = self
            .nodes
            .keys()
            .filter(|p| under(p, from))
            .cloned()
            .collect();
        let mut moved_nodes = Vec::new();
        for k in keys {
            let ino = self.nodes.remove(&k).unwrap_or(Ino::NONE);
            let was_dir = self.dirs.remove(&k);
            moved_nodes.push((moved(&k, from, to), ino, was_dir));
        }
        for (k, ino, d) in moved_nodes {
            self.nodes.insert(k.clone(), ino);
            if d {
                self.dirs.insert(k);
            }
        }
    }

    /// Records reaching a name under `from` get the moved name as an
    /// alternative; those that already have two names end.
    fn extend_records(&mut self, from: &str, to: &str, now: usize) {
        for r in &mut self.records {
            if r.end != usize::MAX {
                continue;
            }
            let hit: Vec<String> = r
                .paths
                .iter()
                .filter(|p| under(p, from))
                .map(|p| moved(p, from, to))
                .collect();
            if hit.is_empty() {
                continue;
            }
            if r.paths.len() + hit.len() > 2 {
                r.end = now;
            } else {
                r.paths.extend(hit);
            }
        }
    }

    /// `rename(from, to)`, replacing a file or empty directory at `to`.
    fn rename(&mut self, from: &str, to: &str) -> ufs::Result<()> {
        self.rename_with(from, to, false)
    }

    /// `renameat2(RENAME_WHITEOUT)`: `rename(from, to)`, and a whiteout
    /// (a character device 0:0) at `from`, as overlayfs asks.
    fn rename_whiteout(&mut self, from: &str, to: &str) -> ufs::Result<()> {
        self.rename_with(from, to, true)
    }

    fn rename_with(&mut self, from: &str, to: &str, whiteout: bool) -> ufs::Result<()> {
        let kind = if whiteout {
            "rename (whiteout)"
        } else {
            "rename"
        };
        self.begin(format!("{kind} {from} -> {to}"));
        let now = self.now();
        // The replaced target's records end; the moved ones gain a name.
        self.claim(to);
        self.extend_records(from, to, now);
        let (fd, fname) = split(from);
        let (td, tname) = split(to);
        let (fp, tp) = (self.ino(fd)?, self.ino(td)?);
        let replaced = self.nodes.get(to).copied();
        let (fname, tname) = (fname.as_bytes(), tname.as_bytes());
        if whiteout {
            self.fs
                .rename_whiteout(fp, fname, tp, tname, RenameMode::Replace, ROOT)?;
        } else {
            self.fs.rename(fp, fname, tp, tname, RenameMode::Replace)?;
        }
        if let Some(old) = replaced {
            self.nodes.remove(to);
            self.dirs.remove(to);
            if !self.nodes.values().any(|&i| i == old) {
                self.content.remove(&old);
            }
        }
        self.move_nodes(from, to);
        if whiteout {
            let w = self.fs.lookup(fp, fname)?;
            self.nodes.insert(from.to_string(), w.ino);
        }
        Ok(())
    }

    /// `renameat2(RENAME_EXCHANGE)` of two names.
    fn exchange(&mut self, a: &str, b: &str) -> ufs::Result<()> {
        self.begin(format!("exchange {a} <-> {b}"));
        let now = self.now();
        // Compute both sides before changing either.
        let tmp = "\u{0}exchange";
        self.extend_records(a, tmp, now);
        self.extend_records(b, a, now);
        for r in &mut self.records {
            for p in &mut r.paths {
                if under(p, tmp) {
                    *p = moved(p, tmp, b);
                }
            }
        }
        let (ad, an) = split(a);
        let (bd, bn) = split(b);
        // With ordered writes the first file holds a third, hidden name
        // beside its own while the two entries change (ufs's
        // `exchange_ordered`): a crash may leave it there alone.
        let hidden_name = format!(".ufskit-exchange-{}", self.ino(a)?);
        let hidden = if ad.is_empty() {
            hidden_name
        } else {
            format!("{ad}/{hidden_name}")
        };
        for r in &mut self.records {
            if r.end != usize::MAX {
                continue;
            }
            let extra: Vec<String> = r
                .paths
                .iter()
                .filter(|p| under(p, a))
                .map(|p| moved(p, a, &hidden))
                .collect();
            r.paths.extend(extra);
        }
        let (ap, bp) = (self.ino(ad)?, self.ino(bd)?);
        self.fs
            .rename(ap, an.as_bytes(), bp, bn.as_bytes(), RenameMode::Exchange)?;
        self.move_nodes(a, tmp);
        self.move_nodes(b, a);
        self.move_nodes(tmp, b);
        Ok(())
    }

    fn unlink(&mut self, path: &str) -> ufs::Result<()> {
        self.begin(format!("unlink {path}"));
        let ino = self.ino(path)?;
        self.claim(path);
        let (dir, name) = split(path);
        let parent = self.ino(dir)?;
        self.fs.unlink(parent, name.as_bytes())?;
        self.nodes.remove(path);
        if !self.nodes.values().any(|&i| i == ino) {
            self.content.remove(&ino);
        }
        Ok(())
    }

    fn rmdir(&mut self, path: &str) -> ufs::Result<()> {
        self.begin(format!("rmdir {path}"));
        self.claim(path);
        let (dir, name) = split(path);
        let parent = self.ino(dir)?;
        self.fs.rmdir(parent, name.as_bytes())?;
        self.nodes.remove(path);
        self.dirs.remove(path);
        Ok(())
    }

    fn link(&mut self, existing: &str, new: &str) -> ufs::Result<()> {
        self.begin(format!("link {existing} -> {new}"));
        self.claim(new);
        let ino = self.ino(existing)?;
        let (dir, name) = split(new);
        let parent = self.ino(dir)?;
        self.fs.link(ino, parent, name.as_bytes())?;
        self.nodes.insert(new.to_string(), ino);
        Ok(())
    }

    /// `rm -rf path`: files first, then directories deepest first.
    fn remove_tree(&mut self, path: &str) -> ufs::Result<()> {
        let below: Vec<String> = self
            .nodes
            .keys()
            .filter(|p| under(p, path))
            .cloned()
            .collect();
        let (mut dirs, files): (Vec<String>, Vec<String>) =
            below.into_iter().partition(|p| self.dirs.contains(p));
        for p in &files {
            self.unlink(p)?;
        }
        dirs.sort_by_key(|p| std::cmp::Reverse(p.matches('/').count()));
        for d in &dirs {
            self.rmdir(d)?;
        }
        Ok(())
    }

    /// Names directly in `dir` (files only).
    fn files_in(&self, dir: &str) -> Vec<String> {
        self.nodes
            .keys()
            .filter(|p| split(p).0 == dir && !self.dirs.contains(*p))
            .cloned()
            .collect()
    }
}

// ---------------------------------------------------------------- workloads

fn run_create(s: &mut Session) -> ufs::Result<()> {
    s.mkdir("d0")?;
    s.mkdir("d1")?;
    // Fragments, one block, the last direct block, the first indirect
    // one, and files well into the indirect range.
    let sizes = [
        0, 1, 100, 511, 512, 513, 1500, 4095, 4096, 4097, 8192, 12_000, 49_151, 49_152, 49_153,
        65_536, 100_000, 150_000, 200_000, 300_000, 7_000, 33_000,
    ];
    for (i, &len) in sizes.iter().enumerate() {
        let p = format!("d{}/f{i:02}", i % 2);
        s.create(&p, len)?;
        if i % 3 == 2 {
            s.fsync(&p)?;
        }
    }
    // Appends to fsynced files, across the fragment and the indirect
    // boundaries.
    s.write("d0/f02", 100, 3000)?;
    s.fsync("d0/f02")?;
    s.write("d0/f14", 49_153, 20_000)?;
    s.fsync("d0/f14")?;
    // Files never fsynced, then one that is.
    for i in 0..10 {
        s.create(&format!("r{i}"), 300 * i)?;
    }
    s.create("last", 70_000)?;
    s.fsync("last")?;
    for i in 0..5 {
        s.create(&format!("d1/late{i}"), 2000 + 9000 * i)?;
    }
    Ok(())
}

fn run_mkdir(s: &mut Session) -> ufs::Result<()> {
    for t in 0..3 {
        let top = format!("t{t}");
        s.mkdir(&top)?;
        for j in 0..4 {
            let a = format!("{top}/a{j}");
            s.mkdir(&a)?;
            for k in 0..2 {
                let b = format!("{a}/b{k}");
                s.mkdir(&b)?;
                s.create(&format!("{b}/file"), 700 + 300 * k)?;
            }
            s.fsync(&format!("{a}/b1/file"))?;
        }
    }
    // One directory of many subdirectories: its blocks fill up and its
    // link count climbs with every one.
    s.mkdir("big")?;
    for i in 0..120 {
        let d = format!("big/sub{i:03}");
        s.mkdir(&d)?;
        if i % 30 == 29 {
            let f = format!("{d}/x");
            s.create(&f, 1200)?;
            s.fsync(&f)?;
        }
    }
    Ok(())
}

/// Names of 30 bytes take 40-byte entries: 1,300 of them fill the 12
/// direct blocks (48 KiB) of a directory, so the last 200 go through its
/// indirect block.
fn run_bigdir(s: &mut Session) -> ufs::Result<()> {
    s.mkdir("big")?;
    for i in 0..1500 {
        let p = format!("big/a-rather-long-file-name-{i:04}");
        if i % 150 == 149 {
            s.create(&p, 100 + i)?;
            s.fsync(&p)?;
        } else {
            s.create(&p, 0)?;
        }
    }
    for i in (0..1500).step_by(2) {
        s.unlink(&format!("big/a-rather-long-file-name-{i:04}"))?;
    }
    // Renamed in place (a shorter name fits the old record), then the
    // rest removed back to front (the directory shrinks as its last
    // chunks empty) and the directory itself.
    for i in (1..1500).step_by(2).take(300) {
        s.rename(
            &format!("big/a-rather-long-file-name-{i:04}"),
            &format!("big/r{i}"),
        )?;
    }
    // Names removed above come back (new files, wherever there is room):
    // the disk must never hold one twice.
    for i in (0..600).step_by(40) {
        s.create(&format!("big/a-rather-long-file-name-{i:04}"), 10 + i)?;
    }
    s.sync()?;
    for i in (0..600).step_by(40) {
        s.unlink(&format!("big/a-rather-long-file-name-{i:04}"))?;
    }
    let mut rest: Vec<String> = (1..1500)
        .step_by(2)
        .map(|i| {
            if i < 600 {
                format!("big/r{i}")
            } else {
                format!("big/a-rather-long-file-name-{i:04}")
            }
        })
        .collect();
    rest.reverse();
    for p in rest {
        s.unlink(&p)?;
    }
    s.rmdir("big")?;
    Ok(())
}

/// A tar-like extraction with the smallest cache: directories made
/// depth first, each filled with files of 1-12 KiB before the next, so
/// that blocks are evicted (and cylinder groups forced out for the names
/// that need them) while the inode blocks they initialise are not yet on
/// disk; one file in 40 fsynced.
fn run_inodes(s: &mut Session) -> ufs::Result<()> {
    let mut n = 0;
    for t in 0..4 {
        let top = format!("x{t}");
        s.mkdir(&top)?;
        for d in 0..5 {
            let dir = format!("{top}/d{d}");
            s.mkdir(&dir)?;
            for f in 0..(20 + (t * 5 + d) % 13) {
                let p = format!("{dir}/f{f:02}");
                let len = 512 + s.below(4096);
                s.create(&p, len)?;
                n += 1;
                if n % 100 == 99 {
                    s.fsync(&p)?;
                }
            }
        }
    }
    Ok(())
}

fn populate_rename(s: &mut Session) -> ufs::Result<()> {
    for d in [
        "src",
        "dst",
        "src/sub1",
        "src/sub1/deep",
        "src/sub2",
        "dst/empty",
    ] {
        s.mkdir(d)?;
    }
    for i in 0..8 {
        s.create(&format!("src/f{i}"), 1000 + 3000 * i)?;
    }
    s.create("dst/f5", 2000)?;
    s.create("dst/g2", 3000)?;
    s.create("src/sub1/x", 5000)?;
    s.create("src/sub1/deep/y", 70_000)?;
    s.create("src/sub2/z", 600)?;
    s.unlink("src/sub2/z")?;
    Ok(())
}

fn run_rename(s: &mut Session) -> ufs::Result<()> {
    s.rename("src/f0", "dst/f0")?;
    s.rename("src/f1", "src/f1b")?;
    s.rename("src/f5", "dst/f5")?; // over an existing file
    s.rename("src/sub1", "dst/sub1")?; // a directory across directories
    s.rename("src/sub2", "dst/empty")?; // over an existing empty directory
                                        // RENAME_EXCHANGE: two files in two directories, then a directory
                                        // and a file in two directories (the directory changes parent).
    s.exchange("src/f2", "dst/g2")?;
    s.mkdir("src/xd")?;
    s.create("src/xd/in", 3000)?;
    s.fsync("src/xd/in")?;
    s.exchange("src/xd", "dst/f5")?;
    for i in 0..6 {
        let p = format!("src/n{i}");
        s.create(&p, 500 + 4000 * i)?;
        s.fsync(&p)?;
        let q = format!("dst/n{i}");
        s.rename(&p, &q)?;
        if i % 2 == 0 {
            s.fsync(&q)?;
        }
    }
    s.rename("dst/sub1/deep", "src/deep")?; // a directory up a level
    s.rename("dst/f0", "src/f0")?;
    s.rename("src/f3", "dst/sub1/f3")?;
    s.mkdir("dst/e2")?;
    s.rename("dst/sub1", "dst/e2")?; // a full directory over an empty one
    s.create("src/new", 9000)?;
    s.fsync("src/new")?;
    s.rename("src/new", "dst/n0")?; // over a file that was fsynced
    s.fsync("dst/n0")?;
    s.rename("src/deep", "dst/e2/deep")?;
    s.sync()?;
    s.rename("src/f4", "dst/f4")?;
    s.rename("dst/n1", "src/n1")?;
    // overlayfs's rename: a whiteout stays at the old name.
    s.rename_whiteout("src/f6", "dst/w6")?;
    s.rename_whiteout("src/f7", "dst/f4")?; // over an existing file
    s.mkdir("src/wd")?;
    s.create("src/wd/f", 7000)?;
    s.fsync("src/wd/f")?;
    s.rename_whiteout("src/wd", "dst/wd")?; // a directory across directories
    Ok(())
}

fn populate_unlink(s: &mut Session) -> ufs::Result<()> {
    for d in ["a", "b", "c", "a/t", "a/t/u"] {
        s.mkdir(d)?;
    }
    for i in 0..10 {
        let len = if i % 4 == 1 {
            60_000 + 20_000 * i
        } else {
            800 * i
        };
        s.create(&format!("a/f{i}"), len)?;
    }
    s.create("a/h", 3000)?;
    s.link("a/h", "b/h1")?;
    s.link("a/h", "b/h2")?;
    s.link("a/h", "c/h3")?;
    s.create("b/big", 250_000)?;
    s.link("b/big", "c/big2")?;
    for i in 0..3 {
        s.create(&format!("a/t/u/z{i}"), 1500 * (i + 1))?;
    }
    s.create("a/t/w", 100)?;
    Ok(())
}

fn run_unlink(s: &mut Session) -> ufs::Result<()> {
    s.unlink("a/f0")?;
    s.unlink("a/f1")?; // indirect blocks
    s.unlink("b/h1")?; // one of four links
    s.create("a/n0", 4000)?;
    s.fsync("a/n0")?;
    s.unlink("a/f2")?;
    s.unlink("b/big")?; // the other link stays
    s.remove_tree("a/t")?;
    s.unlink("a/h")?;
    s.unlink("b/h2")?;
    s.fsync("c/h3")?;
    s.unlink("c/h3")?; // the last link
    s.link("a/f3", "c/l3")?;
    s.unlink("a/f3")?;
    s.create("b/tmp", 30_000)?;
    s.fsync("b/tmp")?;
    s.unlink("b/tmp")?;
    s.unlink("c/big2")?; // last link of a file with indirect blocks
    s.sync()?;
    s.unlink("c/l3")?;
    s.rmdir("c")?;
    for i in 4..10 {
        s.unlink(&format!("a/f{i}"))?;
    }
    s.create("b/after", 12_000)?;
    s.fsync("b/after")?;
    s.unlink("a/n0")?;
    s.rmdir("a")?;
    Ok(())
}

fn populate_xattr(s: &mut Session) -> ufs::Result<()> {
    s.mkdir("d")?;
    for i in 0..6 {
        s.create(&format!("d/f{i}"), 700 * i)?;
        s.setxattr(&format!("d/f{i}"), "tag", 20 + 300 * i)?;
    }
    s.setxattr("d", "dir", 100)?;
    Ok(())
}

fn run_xattr(s: &mut Session) -> ufs::Result<()> {
    s.setxattr("d/f0", "tag", 40)?; // replaced in place of the same size class
    s.setxattr("d/f0", "more", 2000)?; // the area grows to fragments more
    s.fsync("d/f0")?;
    s.setxattr("d/f1", "big", 5000)?; // past one 4 KiB block: two blocks
    s.create("d/n0", 3000)?;
    s.setxattr("d/n0", "new", 10)?;
    s.fsync("d/n0")?;
    s.removexattr("d/f2", "tag")?; // the area goes away
    s.unlink("d/f3")?; // its area is freed with it
    s.setxattr("d/f1", "big", 100)?; // two blocks back to fragments
    s.setxattr("d", "dir", 3000)?;
    s.sync()?;
    s.setxattr("d/f4", "x", 5000)?;
    s.unlink("d/f4")?;
    s.removexattr("d/f1", "big")?;
    s.unlink("d/f1")?;
    s.create("d/n1", 9000)?;
    s.setxattr("d/n1", "a", 3500)?;
    s.setxattr("d/n1", "b", 3500)?;
    s.fsync("d/n1")?;
    s.unlink("d/f5")?;
    Ok(())
}

fn populate_truncate(s: &mut Session) -> ufs::Result<()> {
    s.create("t0", 300)?;
    s.create("t1", 100_000)?;
    s.create("t2", 49_152)?;
    Ok(())
}

fn run_truncate(s: &mut Session) -> ufs::Result<()> {
    s.create("g", 0)?;
    s.fsync("g")?;
    s.write("g", 300, 400)?; // past a fragment
    s.fsync("g")?;
    s.write("g", 700, 2300)?;
    s.write("g", 3000, 2000)?; // past a block
    s.fsync("g")?;
    s.truncate("g", 1000)?;
    s.fsync("g")?;
    s.truncate("g", 0)?;
    s.fsync("g")?;
    s.truncate("g", 60_000)?; // a hole up to the indirect range
    s.write("g", 60_000, 1000)?;
    s.fsync("g")?;
    s.truncate("g", 49_000)?; // the indirect block goes
    s.fsync("g")?;
    s.write("g", 2_200_000, 5000)?; // double indirect
    s.fsync("g")?;
    s.truncate("g", 100_000)?;
    s.fsync("g")?;
    s.truncate("t1", 40_000)?; // frees its indirect block
    s.fsync("t1")?;
    s.write("t1", 40_000, 30_000)?; // and grows back into it
    s.truncate("t2", 49_153)?; // one byte into the indirect range
    s.fsync("t2")?;
    s.write("t0", 300, 200)?;
    s.truncate("t0", 10)?;
    s.write("t2", 0, 100)?;
    s.truncate("g", 5)?;
    Ok(())
}

fn populate_maildir(s: &mut Session) -> ufs::Result<()> {
    for d in ["Maildir", "Maildir/tmp", "Maildir/new", "Maildir/cur"] {
        s.mkdir(d)?;
    }
    for i in 0..10 {
        let len = 400 + s.below(5000);
        s.create(&format!("Maildir/cur/1699999{i:03}.M1P1.host:2,S"), len)?;
    }
    Ok(())
}

fn run_maildir(s: &mut Session) -> ufs::Result<()> {
    for round in 0..3 {
        // Delivery: tmp, fsync, rename into new (and for some, the
        // directory synced after the rename, as qmail does).
        for i in 0..8 {
            let name = format!("17000{round}{i:02}.M{i}P{round}.host");
            let t = format!("Maildir/tmp/{name}");
            let len = 300 + s.below(6000);
            s.create(&t, len)?;
            s.fsync(&t)?;
            let n = format!("Maildir/new/{name}");
            s.rename(&t, &n)?;
            if i % 2 == 0 {
                s.fsync(&n)?;
            }
        }
        // The client sees the new mail: into cur with a flag.
        for n in s.files_in("Maildir/new") {
            let (_, name) = split(&n);
            let c = format!("Maildir/cur/{name}:2,S");
            s.rename(&n, &c)?;
        }
        // And deletes about a quarter of what is in cur.
        for c in s.files_in("Maildir/cur") {
            if s.below(4) == 0 {
                s.unlink(&c)?;
            }
        }
    }
    Ok(())
}

impl Session {
    /// A session of another client of the same mount: its own model and
    /// records, to be merged back with [`join`](Self::join). Clients work
    /// in directories of their own.
    fn client(&self, n: u64) -> Session {
        let mut c = Session::new(self.fs.clone(), self.rec.clone(), self.rng ^ (n + 1) << 32);
        c.dirs = self.dirs.clone();
        c.nodes = self
            .nodes
            .iter()
            .filter(|(p, _)| self.dirs.contains(*p))
            .map(|(p, &i)| (p.clone(), i))
            .collect();
        c
    }

    /// Takes back what a client did: its names, files, records and
    /// operations (in the order of the log).
    fn join(&mut self, c: Session) {
        self.nodes.extend(c.nodes);
        self.dirs.extend(c.dirs);
        self.content.extend(c.content);
        self.records.extend(c.records);
        self.ops.extend(c.ops);
        self.ops.sort_by_key(|(n, _)| *n);
    }
}

/// Three clients on threads and a syncer, as on a mount (see
/// [`Workload::Threads`]). A client's error ends the workload with it.
fn run_threads(s: &mut Session) -> ufs::Result<()> {
    for d in [
        "c0",
        "c1",
        "c2",
        "c2/Maildir",
        "c2/Maildir/tmp",
        "c2/Maildir/new",
    ] {
        s.mkdir(d)?;
    }
    let clients: Vec<Session> = (0..3).map(|n| s.client(n)).collect();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let fs = s.fs.clone();
    let done = std::thread::scope(|sc| {
        let syncer = sc.spawn(|| -> ufs::Result<()> {
            while !stop.load(Ordering::Relaxed) {
                // The mount's syncer: a round per hold of the lock, the
                // clients' operations in between.
                fs.sync_background()?;
                std::thread::sleep(std::time::Duration::from_millis(3));
            }
            Ok(())
        });
        let work: Vec<_> = clients
            .into_iter()
            .enumerate()
            .map(|(n, mut c)| {
                sc.spawn(move || {
                    let r = match n {
                        0 => client_files(&mut c),
                        1 => client_churn(&mut c),
                        _ => client_mail(&mut c),
                    };
                    (c, r)
                })
            })
            .collect();
        let mut out = Vec::new();
        for h in work {
            out.push(h.join());
        }
        stop.store(true, Ordering::Relaxed);
        let synced = syncer.join();
        (out, synced)
    });
    let (clients, synced) = done;
    for c in clients {
        let (c, r) = c.map_err(|p| Error::new(ErrorKind::Io, panic_text(p)))?;
        s.join(c);
        r?;
    }
    synced.map_err(|p| Error::new(ErrorKind::Io, panic_text(p)))?
}

/// Files of every size class, some fsynced, some appended to.
fn client_files(s: &mut Session) -> ufs::Result<()> {
    for i in 0..60 {
        let p = format!("c0/f{i:02}");
        s.create(
            &p,
            200 * (i % 7) + 4096 * (i % 3) + 60_000 * usize::from(i % 20 == 0),
        )?;
        if i % 6 == 5 {
            s.fsync(&p)?;
        }
        if i % 10 == 9 {
            s.write(&format!("c0/f{:02}", i - 4), 10_000, 3000)?;
        }
    }
    Ok(())
}

/// Directories filled, files renamed across them, truncated and removed.
fn client_churn(s: &mut Session) -> ufs::Result<()> {
    for d in 0..4 {
        let dir = format!("c1/d{d}");
        s.mkdir(&dir)?;
        for i in 0..15 {
            s.create(&format!("{dir}/g{i:02}"), 700 * (i % 5))?;
        }
    }
    for i in 0..15 {
        s.rename(&format!("c1/d0/g{i:02}"), &format!("c1/d1/m{i:02}"))?;
        if i % 4 == 0 {
            s.truncate(&format!("c1/d2/g{i:02}"), 100)?;
        }
        if i % 3 == 0 {
            s.unlink(&format!("c1/d3/g{i:02}"))?;
        }
        if i % 5 == 4 {
            s.fsync(&format!("c1/d1/m{i:02}"))?;
        }
    }
    s.remove_tree("c1/d2")?;
    Ok(())
}

/// Mail delivery: tmp, fsync, rename into new; some removed.
fn client_mail(s: &mut Session) -> ufs::Result<()> {
    for i in 0..40 {
        let name = format!("1700{i:03}.M{i}.host");
        let t = format!("c2/Maildir/tmp/{name}");
        let len = 300 + s.below(5000);
        s.create(&t, len)?;
        s.fsync(&t)?;
        let n = format!("c2/Maildir/new/{name}");
        s.rename(&t, &n)?;
        if i % 3 == 0 {
            s.fsync(&n)?;
        }
        if i % 7 == 6 {
            s.unlink(&format!("c2/Maildir/new/1700{:03}.M{}.host", i - 5, i - 5))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ufs::fsck::Severity;

    fn finding(severity: Severity, message: &str) -> Finding {
        Finding {
            pass: "pass5".to_string(),
            severity,
            ino: None,
            message: message.to_string(),
            fixed: false,
        }
    }

    #[test]
    fn classification() {
        let m = WriteMode::Softdep;
        assert_eq!(classify(m, &[]), Class::Clean);
        let preen = finding(Severity::Preen, "FREE BLK COUNT(S) WRONG IN SUPERBLK");
        let bad = finding(Severity::Inconsistency, "DUP/BAD inode 5");
        assert_eq!(classify(m, std::slice::from_ref(&preen)), Class::PreenOnly);
        assert_eq!(
            classify(m, &[preen.clone(), bad.clone()]),
            Class::Inconsistent
        );
        assert_eq!(classify(m, &[bad]), Class::Inconsistent);
        // Preen severity but outside the guarantee: resources in use that
        // the bitmaps call free.
        let used_free = finding(
            Severity::Preen,
            "ALLOCATED INODE(S) OR FRAG(S) MARKED FREE IN BIT MAPS",
        );
        assert!(!used_free.within_crash_guarantee());
        assert_eq!(
            classify(m, &[preen.clone(), used_free.clone()]),
            Class::Inconsistent
        );
        // FFS's synchronous modes leave maps to preen.
        assert_eq!(
            classify(WriteMode::Normal, &[preen, used_free]),
            Class::PreenOnly
        );
    }

    #[test]
    fn paths_under_and_moved() {
        assert!(under("a/b", "a") && under("a", "a") && !under("ab", "a"));
        assert!(!under("a", "a/b"));
        assert_eq!(moved("a/b/c", "a/b", "x"), "x/c");
        assert_eq!(split("a/b/c"), ("a/b", "c"));
        assert_eq!(split("c"), ("", "c"));
    }

    /// A record is checked exactly while it is durable and unchanged.
    #[test]
    fn records_apply_between_fsync_and_next_change() {
        let r = Record {
            paths: vec!["f".into()],
            ino: Ino::new(3),
            content: Arc::new(vec![1]),
            at: 10,
            end: 20,
        };
        let st = |crash_point, durable| CrashState {
            writes: vec![],
            kind: "reordered",
            crash_point,
            durable,
        };
        let due = |s: &CrashState| r.due(s);
        assert!(!due(&st(12, 9)), "not yet flushed");
        assert!(due(&st(12, 10)));
        assert!(due(&st(20, 15)), "the change issued no write yet");
        assert!(!due(&st(21, 15)), "the change may be on disk");
    }
}
