//! The maildir workload of the 2008 "dirhash dynamic memory" work (GSoC
//! 2008, Nick Barkas; seed `002_*`), scaled down to run in-process.
//!
//! The original script untarred 1000 maildirs holding one million tiny
//! messages, then ran 10 threads delivering new mail while a kernel build
//! and an svn checkout/extract/remove ran, then 10 threads doing IMAP
//! operations on every maildir, then removed everything; it compared three
//! dirhash budgets: a fixed 2 MB, a fixed 64 MB, and 64 MB with a
//! low-memory handler that frees idle indexes (reclaim age 1-10 s) when the
//! VM system runs short of pages.
//!
//! Here everything runs on one thread against a memory device, and the
//! concurrent activities are interleaved round-robin, so a run is
//! deterministic for a given seed (the sequence of engine operations does
//! not depend on the dirhash settings; only the time and the counters do):
//!
//! 1. **setup** ("untar"): `maildirs` maildirs `mdN/{cur,new,tmp}` with
//!    `msgs_per_dir` messages each in `cur`, named as real maildirs name
//!    them (`<time>.M<usec>P<pid>Q<n>.<host>,S=<size>:2,<flags>`), with
//!    bodies of a few hundred bytes to a few KB.
//! 2. **deliver**: `deliveries` messages delivered to random maildirs
//!    (check the name is free in `tmp`, create it there, write the body,
//!    rename it into `new`), interleaved with the "other work" that competes
//!    for the dirhash budget: a generated source tree of `other_tree_files`
//!    files is extracted (many directories of a few dozen files, some of a
//!    few hundred, i.e. above the 2560-byte hashing threshold), "built"
//!    (every source file looked up, stat'ed and read, an object file written
//!    next to each `.c`), and removed (`rm -rf`: list, unlink, rmdir).
//! 3. **imap**: [`SESSIONS`] IMAP sessions interleaved round-robin, each
//!    taking the next maildir: list `new` and `cur`, move every new message
//!    to `cur` with a `:2,S` suffix, stat every message (lookup + getattr)
//!    in random order, read about 10% of them, delete about 10%.
//! 4. **poll**: `imap_passes` passes over all maildirs in random order by
//!    the same sessions, as a mail client polling: list `new` and `cur`,
//!    stat every message in random order. This is where the budget
//!    matters: a budget smaller than the indexes of all maildirs evicts
//!    each index before the next pass comes back to it.
//! 5. **remove**: `rm -rf` of every maildir.
//!
//! Memory pressure ([`Pressure`]): the kernel's `vm_lowmem` event is
//! replaced by an event delivered every `every_ops` engine operations,
//! calling the dirhash low-memory handler ([`ufs::dir::dirhash::Dirhash::lowmem`]).
//! Because the in-process run is some hundred times faster than the
//! original on disks, the reclaim age of the growing profile is scaled down
//! from seconds to [`SCALED_RECLAIM_AGE`] (200 ms); in a small run (a
//! fraction of a second per phase) few indexes ever get that old, and an
//! event frees mostly through the second rule (10% of the memory in use,
//! from the head of the LRU list).
//!
//! Scaling: `scale` multiplies the number of maildirs, deliveries and source
//! files; the messages per maildir stay at 400 so every `cur` stays large
//! enough to be hashed. At scale 1.0 the indexes of all maildirs need more
//! than 2 MiB together (about 16 KiB each for 400 maildirs, plus `new` and
//! the source tree), so the fixed 2 MiB budget recycles; at small scales
//! (CI's 0.05) everything fits in 2 MiB and the profiles differ only by the
//! low-memory events.
use crate::{fresh_fs, Progress};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use std::collections::VecDeque;
use std::time::{Duration, Instant};
use ufs::dir::dirhash::{DirhashConfig, DirhashStats};
use ufs::{Cred, Error, ErrorKind, Fs, Ino, MountOptions, RenameMode};

/// Concurrent IMAP sessions (the original's 10 threads), interleaved.
pub const SESSIONS: usize = 10;
/// Reclaim age of the growing profile, scaled down from the original's
/// 1-10 s because the in-process run is much faster.
pub const SCALED_RECLAIM_AGE: Duration = Duration::from_millis(200);
/// Entries asked for per `readdir` call (about a 4 KiB getdents buffer).
const READDIR_BATCH: usize = 64;
const MIB: u64 = 1 << 20;

/// Induced memory pressure: a low-memory event every `every_ops` engine
/// operations.
#[derive(Debug, Clone, Serialize)]
pub struct Pressure {
    pub every_ops: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct MaildirConfig {
    pub maildirs: usize,
    pub msgs_per_dir: usize,
    pub deliveries: usize,
    pub other_tree_files: usize,
    pub imap_passes: usize,
    pub seed: u64,
    pub dirhash: DirhashConfig,
    pub pressure: Option<Pressure>,
}

impl MaildirConfig {
    /// The workload at `scale` (1.0: 400 maildirs of 400 messages, 40,000
    /// deliveries, a 50,000-file source tree, 3 polling passes), with the
    /// default dirhash settings (2 MiB) and no pressure.
    pub fn scaled(scale: f64) -> MaildirConfig {
        let s = |base: f64, min: usize| ((base * scale).round() as usize).max(min);
        MaildirConfig {
            maildirs: s(400.0, 2),
            msgs_per_dir: 400,
            deliveries: s(40_000.0, 20),
            other_tree_files: s(50_000.0, 100),
            imap_passes: 3,
            seed: 2008,
            dirhash: DirhashConfig {
                maxmem: 2 * MIB,
                ..DirhashConfig::default()
            },
            pressure: None,
        }
    }
}

/// The profile name of a configuration: `fixed-<budget>` (2 MiB or less,
/// no pressure), `large-<budget>`, or `growing-<budget>+lowmem`.
pub fn profile_name(cfg: &MaildirConfig) -> String {
    let m = cfg.dirhash.maxmem;
    let budget = if m & (MIB - 1) == 0 {
        format!("{}MiB", m / MIB)
    } else {
        format!("{}KiB", m / 1024)
    };
    match (&cfg.pressure, m <= 2 * MIB) {
        (Some(_), _) => format!("growing-{budget}+lowmem"),
        (None, true) => format!("fixed-{budget}"),
        (None, false) => format!("large-{budget}"),
    }
}

/// The three budgets of the 2008 comparison, at `scale`: "fixed-2MiB",
/// "large-64MiB", and "growing-64MiB+lowmem" (64 MiB, a low-memory event
/// every `20,000 * scale` operations (at least 200), reclaim age
/// [`SCALED_RECLAIM_AGE`]).
pub fn profiles(scale: f64) -> Vec<(String, MaildirConfig)> {
    let base = MaildirConfig::scaled(scale);
    let fixed = base.clone();
    let large = MaildirConfig {
        dirhash: DirhashConfig {
            maxmem: 64 * MIB,
            ..base.dirhash.clone()
        },
        ..base.clone()
    };
    let growing = MaildirConfig {
        dirhash: DirhashConfig {
            maxmem: 64 * MIB,
            reclaimage: SCALED_RECLAIM_AGE,
            ..base.dirhash.clone()
        },
        pressure: Some(Pressure {
            every_ops: ((20_000.0 * scale).round() as u64).max(200),
        }),
        ..base
    };
    [fixed, large, growing]
        .into_iter()
        .map(|c| (profile_name(&c), c))
        .collect()
}

/// One phase: wall time, engine operations, and what dirhash did meanwhile.
#[derive(Debug, Clone, Serialize)]
pub struct Phase {
    pub name: String,
    pub seconds: f64,
    pub ops: u64,
    /// Operation counter at the start and end of the phase (timeline axis).
    pub ops_start: u64,
    pub ops_end: u64,
    /// Dirhash over the phase, the difference of the snapshots at its start
    /// and end (`DirhashStats::since`): `built`, `recycled`, `lookups_linear`,
    /// `entries_scanned` and the other counters count what happened during
    /// the phase; `mem_in_use`, `mem_peak` (the engine's own peak since
    /// mount) and the other gauges are as at its end. Flattened into the
    /// phase's JSON object; `phase.built` etc. reach it through `Deref`
    /// (the CLI's summary reads it so).
    #[serde(flatten)]
    pub dirhash: DirhashStats,
    /// Highest memory in use seen after any operation of the phase.
    pub mem_peak_phase: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct MaildirReport {
    pub profile: String,
    pub config: MaildirConfig,
    pub phases: Vec<Phase>,
    /// `(operations so far, dirhash bytes in use)`, sampled about every
    /// `sample_every` operations and at phase boundaries.
    pub timeline: Vec<(u64, u64)>,
    pub sample_every: u64,
    pub total_ops: u64,
    pub total_seconds: f64,
    /// Dirhash counters at the end of the run (before unmount).
    pub dirhash_end: DirhashStats,
    pub device_bytes: u64,
    pub fsck_clean: bool,
    /// The first few fsck findings, if any.
    pub fsck_findings: Vec<String>,
}

// ---------------------------------------------------------------------
// Operation accounting

/// Counts engine operations, delivers low-memory events, samples memory,
/// reports progress.
struct Meter<'a> {
    fs: &'a Fs,
    ops: u64,
    pressure_every: Option<u64>,
    next_lowmem: u64,
    sample_every: u64,
    next_sample: u64,
    timeline: Vec<(u64, u64)>,
    phase_peak: u64,
    progress: Progress<'a>,
    total_est: u64,
    progress_every: u64,
    next_progress: u64,
    phase: &'static str,
}

impl<'a> Meter<'a> {
    /// Runs one engine operation and accounts for it.
    fn op<T>(&mut self, f: impl FnOnce(&Fs) -> ufs::Result<T>) -> ufs::Result<T> {
        let r = f(self.fs);
        self.ops += 1;
        let lowmem = match self.pressure_every {
            Some(_) if self.ops >= self.next_lowmem => {
                self.next_lowmem += self.pressure_every.unwrap_or(u64::MAX);
                true
            }
            _ => false,
        };
        if lowmem {
            self.fs.dirhash_lowmem_at(Instant::now());
        }
        let mem = self.fs.dirhash().mem;
        self.phase_peak = self.phase_peak.max(mem);
        if self.ops >= self.next_sample {
            self.next_sample += self.sample_every;
            self.timeline.push((self.ops, mem));
        }
        if self.ops >= self.next_progress {
            self.next_progress += self.progress_every;
            (self.progress)(self.ops.min(self.total_est), self.total_est, self.phase);
        }
        r
    }

    fn mem(&self) -> u64 {
        self.fs.dirhash().mem
    }
}

struct PhaseStart {
    name: &'static str,
    t: Instant,
    ops: u64,
    stats: DirhashStats,
}

fn begin(m: &mut Meter, name: &'static str) -> PhaseStart {
    m.phase = name;
    let mem = m.mem();
    m.phase_peak = mem;
    m.timeline.push((m.ops, mem));
    (m.progress)(m.ops.min(m.total_est), m.total_est, name);
    PhaseStart {
        name,
        t: Instant::now(),
        ops: m.ops,
        stats: m.fs.dirhash().stats,
    }
}

fn end(m: &mut Meter, p: PhaseStart) -> Phase {
    let seconds = p.t.elapsed().as_secs_f64();
    let now = m.fs.dirhash().stats;
    m.timeline.push((m.ops, now.mem_in_use));
    Phase {
        name: p.name.to_string(),
        seconds,
        ops: m.ops - p.ops,
        ops_start: p.ops,
        ops_end: m.ops,
        mem_peak_phase: m.phase_peak.max(now.mem_in_use),
        dirhash: now.since(&p.stats),
    }
}

// ---------------------------------------------------------------------
// Content generation

const HOSTS: &[&str] = &[
    "mail.example.org",
    "mx1.example.net",
    "smtp3.example.com",
    "imap.lab.example.edu",
    "relay7.example.org",
];
const FLAGS: &[&str] = &["S", "S", "S", "RS", "FS", "", "S", "RS"];
const WORDS: &[&str] = &[
    "page", "out", "alloc", "vnode", "inode", "lookup", "hash", "dir", "buf", "cache", "sched",
    "proc", "sig", "clock", "mbuf", "sock", "route", "tcp", "udp", "ip", "pci", "bus", "intr",
    "lock", "mutex", "sema", "subr", "init", "syscall", "exec",
];
const PREFIXES: &[&str] = &[
    "vm_", "ufs_", "ffs_", "if_", "nfs_", "kern_", "sys_", "dev_", "usb_", "net_", "vfs_", "uipc_",
];
const EXTS: &[&str] = &[".c", ".c", ".c", ".h", ".h", ".S", ".m", ".txt"];

/// Maildir-style unique names and message bodies.
struct Mail {
    time: u64,
    q: u64,
    filler: Vec<u8>,
}

impl Mail {
    fn new(rng: &mut StdRng) -> Mail {
        let mut filler = Vec::with_capacity(16 << 10);
        while filler.len() < 12 << 10 {
            filler.extend_from_slice(WORDS[rng.gen_range(0..WORDS.len())].as_bytes());
            filler.push(if rng.gen_ratio(1, 12) { b'\n' } else { b' ' });
        }
        Mail {
            time: 1_199_145_600,
            q: 0,
            filler,
        }
    }

    /// A message size: mostly a few hundred bytes to 2.5 KB, some to 6 KB.
    fn size(rng: &mut StdRng) -> usize {
        if rng.gen_ratio(85, 100) {
            rng.gen_range(200..2500)
        } else {
            rng.gen_range(2500..6000)
        }
    }

    /// `<time>.M<usec>P<pid>Q<n>.<host>,S=<size>` (the `new` form).
    fn name(&mut self, rng: &mut StdRng, size: usize) -> Vec<u8> {
        self.time += rng.gen_range(0..20);
        self.q += 1;
        let host = HOSTS[rng.gen_range(0..HOSTS.len())];
        format!(
            "{}.M{}P{}Q{}.{},S={}",
            self.time,
            rng.gen_range(0..1_000_000u32),
            rng.gen_range(1000..99_999u32),
            self.q,
            host,
            size
        )
        .into_bytes()
    }

    fn body(&self, rng: &mut StdRng, size: usize) -> Vec<u8> {
        let mut b = format!(
            "Return-Path: <user{}@{}>\nDelivered-To: box@example.org\nSubject: message {}\nDate: {}\n\n",
            rng.gen_range(0..5000),
            HOSTS[rng.gen_range(0..HOSTS.len())],
            self.q,
            self.time
        )
        .into_bytes();
        let start = rng.gen_range(0..self.filler.len() / 2);
        while b.len() < size {
            let take = (size - b.len()).min(self.filler.len() - start);
            b.extend_from_slice(&self.filler[start..start + take]);
        }
        b.truncate(size);
        b
    }
}

fn write_all(m: &mut Meter, ino: Ino, data: &[u8]) -> ufs::Result<()> {
    let n = m.op(|fs| fs.write(ino, 0, data, Cred::ROOT))?;
    if n != data.len() {
        return Err(Error::new(
            ErrorKind::NoSpace,
            format!("short write: {n} of {} bytes", data.len()),
        ));
    }
    Ok(())
}

/// Every name in a directory but `.` and `..`, read as `readdir(3)` does.
fn list(m: &mut Meter, ino: Ino) -> ufs::Result<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    let mut cookie = 0;
    loop {
        let batch = m.op(|fs| fs.readdir(ino, cookie, READDIR_BATCH))?;
        let Some(last) = batch.last() else { break };
        cookie = last.next;
        out.extend(
            batch
                .into_iter()
                .filter(|e| e.name != b"." && e.name != b"..")
                .map(|e| e.name),
        );
    }
    Ok(out)
}

// ---------------------------------------------------------------------
// The other work: a source tree extracted, built and removed

struct TDir {
    parent: Option<usize>,
    name: String,
    files: Vec<(String, usize)>,
}

#[derive(Clone, Copy)]
enum OtherStep {
    Mkdir(usize),
    Create(usize, usize),
    Stat(usize, usize),
    Build(usize, usize),
    /// `rm -rf` of one directory's files (its subdirectories are gone).
    Clear(usize),
    Rmdir(usize),
}

struct Other {
    dirs: Vec<TDir>,
    inos: Vec<Ino>,
    steps: Vec<OtherStep>,
    next: usize,
}

impl Other {
    fn generate(rng: &mut StdRng, files: usize) -> Other {
        let mut dirs: Vec<TDir> = Vec::new();
        let mut total = 0;
        while total < files {
            let i = dirs.len();
            let parent = if i == 0 {
                None
            } else {
                Some(rng.gen_range(i.saturating_sub(24)..i))
            };
            let name = if i == 0 {
                "src".to_string()
            } else {
                format!("{}{}", WORDS[rng.gen_range(0..WORDS.len())], i)
            };
            // Most directories hold a few dozen files; some a few hundred
            // (above the hashing threshold, as sys/kern or sys/dev/* do).
            let n = if rng.gen_ratio(15, 100) {
                rng.gen_range(120..600)
            } else {
                rng.gen_range(4..60)
            };
            let n = n.min(files - total).max(1);
            let files = (0..n)
                .map(|k| {
                    let name = format!(
                        "{}{}{}{}",
                        PREFIXES[rng.gen_range(0..PREFIXES.len())],
                        WORDS[rng.gen_range(0..WORDS.len())],
                        k,
                        EXTS[rng.gen_range(0..EXTS.len())]
                    );
                    (name, rng.gen_range(100..4000))
                })
                .collect();
            total += n;
            dirs.push(TDir {
                parent,
                name,
                files,
            });
        }
        let mut steps = Vec::new();
        for (d, dir) in dirs.iter().enumerate() {
            steps.push(OtherStep::Mkdir(d));
            steps.extend((0..dir.files.len()).map(|f| OtherStep::Create(d, f)));
        }
        for (d, dir) in dirs.iter().enumerate() {
            for (f, (name, _)) in dir.files.iter().enumerate() {
                steps.push(if name.ends_with(".c") {
                    OtherStep::Build(d, f)
                } else {
                    OtherStep::Stat(d, f)
                });
            }
        }
        // Children have higher indexes than their parents.
        for d in (0..dirs.len()).rev() {
            steps.push(OtherStep::Clear(d));
            steps.push(OtherStep::Rmdir(d));
        }
        let n = dirs.len();
        Other {
            dirs,
            inos: vec![Ino::NONE; n],
            steps,
            next: 0,
        }
    }

    /// Engine operations of the whole plan, roughly.
    fn ops_estimate(&self) -> u64 {
        let files: usize = self.dirs.iter().map(|d| d.files.len()).sum();
        (files * 8 + self.dirs.len() * 4) as u64
    }

    fn parent_ino(&self, d: usize, root: Ino) -> Ino {
        self.dirs[d].parent.map_or(root, |p| self.inos[p])
    }

    /// Runs the next step; false when the plan is done.
    fn step(
        &mut self,
        m: &mut Meter,
        root: Ino,
        mail: &Mail,
        rng: &mut StdRng,
    ) -> ufs::Result<bool> {
        let Some(&s) = self.steps.get(self.next) else {
            return Ok(false);
        };
        self.next += 1;
        match s {
            OtherStep::Mkdir(d) => {
                let p = self.parent_ino(d, root);
                let name = self.dirs[d].name.clone();
                self.inos[d] = m
                    .op(|fs| fs.mkdir(p, name.as_bytes(), 0o755, Cred::ROOT))?
                    .ino;
            }
            OtherStep::Create(d, f) => {
                let (name, size) = &self.dirs[d].files[f];
                let ino = m
                    .op(|fs| fs.mknod(self.inos[d], name.as_bytes(), 0o100644, 0, Cred::ROOT))?
                    .ino;
                write_all(m, ino, &mail.body(rng, *size))?;
            }
            OtherStep::Stat(d, f) => {
                let name = &self.dirs[d].files[f].0;
                let a = m.op(|fs| fs.lookup(self.inos[d], name.as_bytes()))?;
                m.op(|fs| fs.getattr(a.ino))?;
            }
            OtherStep::Build(d, f) => {
                let name = &self.dirs[d].files[f].0;
                let dir = self.inos[d];
                let a = m.op(|fs| fs.lookup(dir, name.as_bytes()))?;
                m.op(|fs| fs.getattr(a.ino))?;
                m.op(|fs| fs.read(a.ino, 0, a.size as usize))?;
                let obj = format!("{}.o", &name[..name.len() - 2]);
                let o = m
                    .op(|fs| fs.mknod(dir, obj.as_bytes(), 0o100644, 0, Cred::ROOT))?
                    .ino;
                let size = (a.size as usize * 3 / 2).max(64);
                write_all(m, o, &mail.body(rng, size))?;
            }
            OtherStep::Clear(d) => {
                let dir = self.inos[d];
                for name in list(m, dir)? {
                    m.op(|fs| fs.unlink(dir, &name))?;
                }
            }
            OtherStep::Rmdir(d) => {
                let p = self.parent_ino(d, root);
                let name = self.dirs[d].name.clone();
                m.op(|fs| fs.rmdir(p, name.as_bytes()))?;
            }
        }
        Ok(true)
    }
}

// ---------------------------------------------------------------------
// Maildirs and sessions

struct Maildir {
    cur: Ino,
    new: Ino,
    tmp: Ino,
    cur_names: Vec<Vec<u8>>,
    new_names: Vec<Vec<u8>>,
}

#[derive(Clone, Copy)]
enum Sub {
    Cur,
    New,
}

enum Step {
    /// List a subdirectory; the count must match what was put there.
    List {
        md: usize,
        sub: Sub,
        expect: usize,
    },
    Move {
        md: usize,
        from: Vec<u8>,
        to: Vec<u8>,
    },
    Stat {
        md: usize,
        name: Vec<u8>,
    },
    Read {
        md: usize,
        name: Vec<u8>,
    },
    Delete {
        md: usize,
        name: Vec<u8>,
    },
}

fn exec(m: &mut Meter, mds: &[Maildir], step: Step) -> ufs::Result<()> {
    match step {
        Step::List { md, sub, expect } => {
            let ino = match sub {
                Sub::Cur => mds[md].cur,
                Sub::New => mds[md].new,
            };
            let got = list(m, ino)?.len();
            if got != expect {
                return Err(Error::corrupt(format!(
                    "maildir md{md}: listed {got} entries, expected {expect}"
                )));
            }
        }
        Step::Move { md, from, to } => {
            let (n, c) = (mds[md].new, mds[md].cur);
            m.op(|fs| fs.rename(n, &from, c, &to, RenameMode::Replace))?;
        }
        Step::Stat { md, name } => {
            let a = m.op(|fs| fs.lookup(mds[md].cur, &name))?;
            m.op(|fs| fs.getattr(a.ino))?;
        }
        Step::Read { md, name } => {
            let a = m.op(|fs| fs.lookup(mds[md].cur, &name))?;
            let data = m.op(|fs| fs.read(a.ino, 0, a.size as usize))?;
            if data.len() as u64 != a.size {
                return Err(Error::corrupt(format!(
                    "maildir md{md}: short read of {}",
                    String::from_utf8_lossy(&name)
                )));
            }
        }
        Step::Delete { md, name } => {
            m.op(|fs| fs.unlink(mds[md].cur, &name))?;
        }
    }
    Ok(())
}

/// [`SESSIONS`] sessions, each taking the next maildir of `jobs` and
/// running its plan; one step of each session in turn.
fn sessions(
    m: &mut Meter,
    mds: &mut [Maildir],
    rng: &mut StdRng,
    jobs: Vec<usize>,
    plan: fn(usize, &mut Maildir, &mut StdRng) -> Vec<Step>,
) -> ufs::Result<()> {
    let mut queue = jobs.into_iter();
    let mut running: Vec<VecDeque<Step>> = (0..SESSIONS).map(|_| VecDeque::new()).collect();
    loop {
        let mut any = false;
        for s in running.iter_mut() {
            if s.is_empty() {
                if let Some(md) = queue.next() {
                    *s = plan(md, &mut mds[md], rng).into();
                }
            }
            if let Some(step) = s.pop_front() {
                exec(m, mds, step)?;
                any = true;
            }
        }
        if !any {
            return Ok(());
        }
    }
}

/// The first IMAP visit: list, move new to cur, stat all, read 10%,
/// delete 10%. Updates the expected contents.
fn plan_imap(md: usize, d: &mut Maildir, rng: &mut StdRng) -> Vec<Step> {
    let mut steps = vec![
        Step::List {
            md,
            sub: Sub::New,
            expect: d.new_names.len(),
        },
        Step::List {
            md,
            sub: Sub::Cur,
            expect: d.cur_names.len(),
        },
    ];
    for from in d.new_names.drain(..) {
        let mut to = from.clone();
        to.extend_from_slice(b":2,S");
        d.cur_names.push(to.clone());
        steps.push(Step::Move { md, from, to });
    }
    let mut order: Vec<usize> = (0..d.cur_names.len()).collect();
    order.shuffle(rng);
    steps.extend(order.iter().map(|&i| Step::Stat {
        md,
        name: d.cur_names[i].clone(),
    }));
    let tenth = d.cur_names.len().div_ceil(10);
    order.shuffle(rng);
    steps.extend(order[..tenth].iter().map(|&i| Step::Read {
        md,
        name: d.cur_names[i].clone(),
    }));
    order.shuffle(rng);
    let mut gone = order[..tenth].to_vec();
    steps.extend(gone.iter().map(|&i| Step::Delete {
        md,
        name: d.cur_names[i].clone(),
    }));
    gone.sort_unstable_by(|a, b| b.cmp(a));
    for i in gone {
        d.cur_names.swap_remove(i);
    }
    steps
}

/// A polling visit: list both, stat every message in random order.
fn plan_poll(md: usize, d: &mut Maildir, rng: &mut StdRng) -> Vec<Step> {
    let mut steps = vec![
        Step::List {
            md,
            sub: Sub::New,
            expect: d.new_names.len(),
        },
        Step::List {
            md,
            sub: Sub::Cur,
            expect: d.cur_names.len(),
        },
    ];
    let mut order: Vec<usize> = (0..d.cur_names.len()).collect();
    order.shuffle(rng);
    steps.extend(order.iter().map(|&i| Step::Stat {
        md,
        name: d.cur_names[i].clone(),
    }));
    steps
}

// ---------------------------------------------------------------------
// The run

/// Runs the workload on a fresh memory device and checks it with fsck at
/// the end. The report's `profile` is [`profile_name`] of `cfg`.
pub fn run(cfg: &MaildirConfig, progress: Progress) -> ufs::Result<MaildirReport> {
    let t0 = Instant::now();
    let mut rng = StdRng::seed_from_u64(cfg.seed);
    let mut mail = Mail::new(&mut rng);
    let mut other = Other::generate(&mut rng, cfg.other_tree_files);

    let msgs = (cfg.maildirs * cfg.msgs_per_dir + cfg.deliveries) as u64;
    let tree_files = (cfg.other_tree_files * 3 / 2) as u64;
    let dirs = (cfg.maildirs * 4 + other.dirs.len()) as u64;
    let device_bytes = ((msgs + tree_files) * 6144 + dirs * 8192 + 64 * MIB).div_ceil(MIB) * MIB;
    let opts = MountOptions {
        dirhash: cfg.dirhash.clone(),
        seed: Some(cfg.seed),
        // Measured with every write delayed (the write modes are compared
        // by `bench writeorder`).
        write_mode: Some(ufs::order::WriteMode::Async),
        ..MountOptions::default()
    };
    let (dev, fs) = fresh_fs(device_bytes, 4096, opts)?;
    let root = fs.root();

    let cur_total = msgs as f64 * 0.9;
    let total_est = (cfg.maildirs * 6) as u64
        + (cfg.maildirs * cfg.msgs_per_dir * 2) as u64
        + cfg.deliveries as u64 * 4
        + other.ops_estimate()
        + (cur_total * 2.4) as u64
        + cfg.deliveries as u64
        + (cur_total * 2.0) as u64 * cfg.imap_passes as u64
        + cur_total as u64
        + (msgs / READDIR_BATCH as u64) * (cfg.imap_passes as u64 + 2);
    let sample_every = (total_est / 2000).max(1);
    let mut m = Meter {
        fs: &fs,
        ops: 0,
        pressure_every: cfg.pressure.as_ref().map(|p| p.every_ops.max(1)),
        next_lowmem: cfg
            .pressure
            .as_ref()
            .map_or(u64::MAX, |p| p.every_ops.max(1)),
        sample_every,
        next_sample: sample_every,
        timeline: Vec::new(),
        phase_peak: 0,
        progress,
        total_est,
        progress_every: (total_est / 200).max(1),
        next_progress: (total_est / 200).max(1),
        phase: "setup",
    };
    let mut phases = Vec::new();

    // 1. Setup: untar the maildirs.
    let p = begin(&mut m, "setup");
    let mut mds = Vec::with_capacity(cfg.maildirs);
    for i in 0..cfg.maildirs {
        let top = m
            .op(|fs| fs.mkdir(root, format!("md{i}").as_bytes(), 0o700, Cred::ROOT))?
            .ino;
        let cur = m.op(|fs| fs.mkdir(top, b"cur", 0o700, Cred::ROOT))?.ino;
        let new = m.op(|fs| fs.mkdir(top, b"new", 0o700, Cred::ROOT))?.ino;
        let tmp = m.op(|fs| fs.mkdir(top, b"tmp", 0o700, Cred::ROOT))?.ino;
        let mut cur_names = Vec::with_capacity(cfg.msgs_per_dir);
        for _ in 0..cfg.msgs_per_dir {
            let size = Mail::size(&mut rng);
            let mut name = mail.name(&mut rng, size);
            name.extend_from_slice(b":2,");
            name.extend_from_slice(FLAGS[rng.gen_range(0..FLAGS.len())].as_bytes());
            let body = mail.body(&mut rng, size);
            let ino = m
                .op(|fs| fs.mknod(cur, &name, 0o100600, 0, Cred::ROOT))?
                .ino;
            write_all(&mut m, ino, &body)?;
            cur_names.push(name);
        }
        mds.push(Maildir {
            cur,
            new,
            tmp,
            cur_names,
            new_names: Vec::new(),
        });
    }
    phases.push(end(&mut m, p));

    // 2. Delivery, interleaved with extracting, building and removing a
    // source tree.
    let p = begin(&mut m, "deliver");
    let other_steps = other.steps.len();
    let mut acc = 0usize;
    for _ in 0..cfg.deliveries {
        let md = rng.gen_range(0..mds.len());
        let size = Mail::size(&mut rng);
        let name = mail.name(&mut rng, size);
        let body = mail.body(&mut rng, size);
        let (tmp, new) = (mds[md].tmp, mds[md].new);
        match m.op(|fs| fs.lookup(tmp, &name)) {
            Err(e) if e.kind == ErrorKind::NotFound => {}
            Err(e) => return Err(e),
            Ok(_) => {
                return Err(Error::corrupt(format!(
                    "delivery: {} exists in tmp",
                    String::from_utf8_lossy(&name)
                )))
            }
        }
        let ino = m
            .op(|fs| fs.mknod(tmp, &name, 0o100600, 0, Cred::ROOT))?
            .ino;
        write_all(&mut m, ino, &body)?;
        m.op(|fs| fs.rename(tmp, &name, new, &name, RenameMode::NoReplace))?;
        mds[md].new_names.push(name);
        acc += other_steps;
        while acc >= cfg.deliveries {
            acc -= cfg.deliveries;
            other.step(&mut m, root, &mail, &mut rng)?;
        }
    }
    while other.step(&mut m, root, &mail, &mut rng)? {}
    phases.push(end(&mut m, p));

    // 3. IMAP: every maildir once, in order, by concurrent sessions.
    let p = begin(&mut m, "imap");
    sessions(
        &mut m,
        &mut mds,
        &mut rng,
        (0..cfg.maildirs).collect(),
        plan_imap,
    )?;
    phases.push(end(&mut m, p));

    // 4. Polling passes over all maildirs in random order.
    let p = begin(&mut m, "poll");
    for _ in 0..cfg.imap_passes {
        let mut order: Vec<usize> = (0..cfg.maildirs).collect();
        order.shuffle(&mut rng);
        sessions(&mut m, &mut mds, &mut rng, order, plan_poll)?;
    }
    phases.push(end(&mut m, p));

    // 5. Remove everything.
    let p = begin(&mut m, "remove");
    for (i, d) in mds.iter().enumerate() {
        let expect = d.cur_names.len() + d.new_names.len();
        let mut removed = 0;
        for dir in [d.tmp, d.new, d.cur] {
            for name in list(&mut m, dir)? {
                m.op(|fs| fs.unlink(dir, &name))?;
                removed += 1;
            }
        }
        if removed != expect {
            return Err(Error::corrupt(format!(
                "maildir md{i}: removed {removed} messages, expected {expect}"
            )));
        }
        let top = format!("md{i}");
        let top_ino = m.op(|fs| fs.lookup(root, top.as_bytes()))?.ino;
        for sub in [&b"cur"[..], b"new", b"tmp"] {
            m.op(|fs| fs.rmdir(top_ino, sub))?;
        }
        m.op(|fs| fs.rmdir(root, top.as_bytes()))?;
    }
    phases.push(end(&mut m, p));
    (m.progress)(m.total_est, m.total_est, "fsck");

    let total_ops = m.ops;
    let timeline = std::mem::take(&mut m.timeline);
    drop(m);
    let dirhash_end = fs.dirhash().stats;
    let total_seconds = t0.elapsed().as_secs_f64();
    fs.unmount()?;
    drop(fs);
    // Check mode never writes, so fsck can read the device itself (no copy
    // of a device of a gigabyte or more).
    let report = ufs::fsck::fsck(&*dev, ufs::fsck::FsckMode::Check)?;
    let fsck_findings: Vec<String> = report
        .findings
        .iter()
        .take(10)
        .map(|f| format!("{}: {}", f.pass, f.message))
        .collect();
    Ok(MaildirReport {
        profile: profile_name(cfg),
        config: cfg.clone(),
        phases,
        timeline,
        sample_every,
        total_ops,
        total_seconds,
        dirhash_end,
        device_bytes,
        fsck_clean: report.findings.is_empty(),
        fsck_findings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny(name: &str) -> MaildirConfig {
        let (_, mut cfg) = profiles(0.01)
            .into_iter()
            .find(|(n, _)| n == name)
            .expect("profile");
        cfg.maildirs = 6;
        cfg.msgs_per_dir = 150;
        cfg.deliveries = 300;
        cfg.other_tree_files = 600;
        cfg.imap_passes = 2;
        cfg
    }

    fn run_quiet(cfg: &MaildirConfig) -> MaildirReport {
        let mut calls = 0u64;
        let r = run(cfg, &mut |done, total, _| {
            assert!(done <= total);
            calls += 1;
        })
        .expect("maildir run");
        assert!(calls > 0);
        r
    }

    #[test]
    fn maildir_profiles_are_named() {
        let names: Vec<String> = profiles(1.0).into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["fixed-2MiB", "large-64MiB", "growing-64MiB+lowmem"]);
    }

    #[test]
    fn maildir_fixed_2mib_stays_in_budget() {
        let cfg = tiny("fixed-2MiB");
        let r = run_quiet(&cfg);
        assert!(r.fsck_clean, "{:?}", r.fsck_findings);
        assert_eq!(r.profile, "fixed-2MiB");
        assert_eq!(r.phases.len(), 5);
        assert!(r.dirhash_end.mem_peak <= 2 * MIB);
        assert!(r
            .phases
            .iter()
            .all(|p| p.dirhash.mem_peak <= 2 * MIB && p.mem_peak_phase <= 2 * MIB));
        assert!(r.timeline.iter().all(|&(_, mem)| mem <= 2 * MIB));
        assert!(
            r.dirhash_end.built > 0,
            "maildirs of 150 messages are hashed"
        );
        assert_eq!(r.dirhash_end.lowmem_events, 0);
        assert_eq!(r.dirhash_end.check_failures, 0);
    }

    #[test]
    fn maildir_tight_budget_recycles() {
        // A budget far below the maildirs' indexes: recycling, refusals and
        // linear scans, and still a clean file system.
        let mut cfg = tiny("fixed-2MiB");
        cfg.dirhash.maxmem = 16 << 10;
        let r = run_quiet(&cfg);
        assert!(r.fsck_clean, "{:?}", r.fsck_findings);
        assert!(r.dirhash_end.mem_peak <= 16 << 10);
        assert!(r.dirhash_end.recycled + r.dirhash_end.build_refused > 0);
        assert!(r.dirhash_end.lookups_linear > 0);
    }

    #[test]
    fn maildir_large_64mib_is_clean() {
        let r = run_quiet(&tiny("large-64MiB"));
        assert!(r.fsck_clean, "{:?}", r.fsck_findings);
        assert_eq!(r.dirhash_end.lowmem_freed, 0);
        assert_eq!(r.dirhash_end.recycled, 0);
    }

    #[test]
    fn maildir_growing_lowmem_frees() {
        let cfg = tiny("growing-64MiB+lowmem");
        assert!(cfg.pressure.is_some());
        let r = run_quiet(&cfg);
        assert!(r.fsck_clean, "{:?}", r.fsck_findings);
        assert!(r.dirhash_end.lowmem_events > 0);
        assert!(r.dirhash_end.lowmem_freed > 0);
        assert!(r.phases.iter().map(|p| p.dirhash.lowmem_freed).sum::<u64>() > 0);
    }

    #[test]
    fn maildir_is_deterministic_in_operations() {
        let a = run_quiet(&tiny("fixed-2MiB"));
        let b = run_quiet(&tiny("growing-64MiB+lowmem"));
        let ops = |r: &MaildirReport| r.phases.iter().map(|p| p.ops).collect::<Vec<_>>();
        assert_eq!(ops(&a), ops(&b));
    }
}
