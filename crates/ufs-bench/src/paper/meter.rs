//! The modeled clock of a run and the measurement of its tests.
//!
//! The clock is the modeled disk's busy time plus the modeled CPU time of
//! the calls made so far ([`super::cpu`]) plus the user CPU time workloads
//! declare (compiling, grepping): a process that waits for each of its
//! disk requests, as the paper's benchmarks did for every synchronous
//! write. A syncer runs on that clock, from the engine's call hook
//! (between calls), in one of two models ([`SyncerModel`]):
//!
//! - `wheel` (the default), FreeBSD's syncer (`sched_sync` in
//!   `kern/vfs_subr.c`): a wheel of one-second slots; a vnode that becomes
//!   dirty is put `filedelay` (30), `dirdelay` (29) or `metadelay` (28)
//!   slots ahead, and each second the syncer writes the slot it reaches.
//!   Here each modeled second writes the buffers first dirtied that many
//!   seconds before (file data and indirect blocks 30, directory blocks
//!   29, inode, cylinder-group and other metadata 28), data first; a
//!   buffer that stays dirty (written with soft updates' rollbacks) goes
//!   back on the wheel, as FreeBSD's redirtied buffer does. Delayed writes
//!   thus trickle out over the 30 seconds after they were made, into
//!   whatever test runs then, as they did on the paper's machine.
//! - `whole` (the model before 2026-11-28, kept for the ablation): every
//!   `sync_every_s` modeled seconds (30, FreeBSD's `syncdelay`) everything
//!   dirty is written at once.
//!
//! Either way a test that lasts longer than the interval pays for the
//! writes that delayed-write modes (soft updates) would have made in that
//! time.
//!
//! The syncer's and the buffer daemon's writes are issued without
//! waiting, as FreeBSD issues them: the drive writes them while the
//! benchmark computes (`ModeledDisk::set_async_writes`,
//! `ModeledDisk::idle`), and the benchmark's own next request queues
//! behind those still there. Under the `syncer-waits` ablation (the model
//! before 2026-11-29, afternoon) the benchmark waits for each instead.
//!
//! Beside it runs FreeBSD 4's buffer daemon (`buf_daemon` and
//! `flushbufqueues` in `kern/vfs_bio.c`), with the marks `bufinit` sets
//! from `nbuf` ([`hidirtybuffers`]: 595 on the paper's 256 MB machine,
//! `lodirtybuffers` half that). A delayed write wakes it once the dirty
//! buffers reach the midpoint of the two marks (`bdwrite`, `bd_wakeup`),
//! and it wakes by itself once a second; each time it writes the
//! longest-dirty buffers until `lodirtybuffers` are left. A buffer its
//! write leaves dirty (parts rolled back) counts as dirtied then, as the
//! redirtied buffer goes to the dirty queue's tail. (FreeBSD also passes
//! over a buffer with soft-updates dependencies once, `B_DEFERRED`; the
//! model writes it with its parts rolled back.) The `bufdaemon-all`
//! ablation is the model before 2026-11-29: when more than 1,000 buffers
//! are dirty, every dirty buffer is written.
//!
//! Memory pressure, for runs with a growing dirhash budget: when the main
//! buffer cache has evicted blocks since the syncer's previous run (memory
//! is short: the file data no longer fits; the directory pool of vmiodir
//! off evicts by its own size, which is not counted), that run
//! delivers a dirhash
//! low-memory event, the 2008 handler without its age rule (index ages
//! are real time, which means nothing on this clock): 10% of the memory in
//! use is freed from the cold end of the list. FreeBSD's `vm_lowmem` comes
//! from the page daemon when free pages run short; an evicting cache is
//! this model's sign of it. The signal is one-way: dirhash's memory is not
//! charged to the buffer cache, so freeing indexes does not stop the
//! evictions that called for it, and a workload that streams through the
//! cache gets an event at every syncer run.
//!
//! A test (phase) is timed from its start to its end; what it delayed is
//! left pending for the next test of the run, as in the paper's runs, where
//! read-only phases followed writing ones with delayed writes pending
//! (its explanation of why soft updates slowed some of them). With
//! `sync_each_test` (the earlier procedure, kept for the ablation) a sync
//! after each test is inside its time. Its modeled seconds are the clock's
//! advance, split into disk and CPU time in its row.
//!
//! Invariants: the clock only moves forward and is a function of the
//! device's and engine's counters plus declared user time, so identical
//! runs read identical clocks; the hook holds no engine lock while it
//! syncs, and is removed when the meter is dropped.
use super::cpu::CpuModel;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use ufs::cache::BlockKind;
use ufs::calls::CallStats;
use ufs::dev::SparseDevice;
use ufs::dir::dirhash::DirhashStats;
use ufs::{Frag, Fs};
use ufs_sim::model::ModeledDisk;

/// FreeBSD's `syncdelay`: dirty data is written within 30 s.
pub const SYNC_EVERY_S: f64 = 30.0;

/// The earlier model's buffer-daemon mark (the `bufdaemon-all` ablation):
/// an estimate of `hidirtybuffers` from an `nbuf` of some 4,000.
pub const EARLIER_DIRTY_HIGH: usize = 1000;

/// FreeBSD 4's `hidirtybuffers` for a machine whose buffer cache (the
/// modeled cache, a quarter of its memory, as [`ufs::fs::dir_pool_bytes`]
/// takes it) is `cache_bytes`: `nbuf / 4 + 20`, halved while that many
/// 16 KiB buffers would pass three quarters of `hibufspace`
/// (`kern/vfs_bio.c`, `bufinit`). The paper's 256 MB machine: 595, so
/// `lodirtybuffers` 297.
pub fn hidirtybuffers(cache_bytes: u64) -> usize {
    const BKVASIZE: u64 = 16384;
    let memory = cache_bytes.saturating_mul(4);
    let mut hi = ufs::fs::freebsd4_nbuf(memory) / 4 + 20;
    while hi > 1 && hi * BKVASIZE > 3 * ufs::fs::freebsd4_hibufspace(memory) / 4 {
        hi >>= 1;
    }
    usize::try_from(hi).unwrap_or(usize::MAX)
}

/// The modeled buffer daemon (`buf_daemon`, `kern/vfs_bio.c`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum BufDaemon {
    /// No daemon.
    Off,
    /// FreeBSD 4's, with `hidirtybuffers` = `high` and `lodirtybuffers`
    /// half of it: woken by a delayed write at the marks' midpoint and by
    /// its own timer each second with more than the low mark dirty, it
    /// writes the longest-dirty buffers until the low mark is left
    /// (`bd_wakeup`, `flushbufqueues`). The evaluation's default since
    /// 2026-11-29.
    FreeBsd4 { high: usize },
    /// The earlier model (the `bufdaemon-all` ablation): with more than
    /// `high` buffers dirty, every dirty buffer is written.
    WriteAll { high: usize },
}

impl BufDaemon {
    /// FreeBSD 4's daemon for a machine whose buffer cache is
    /// `cache_bytes` ([`hidirtybuffers`]).
    pub fn freebsd4(cache_bytes: u64) -> BufDaemon {
        BufDaemon::FreeBsd4 {
            high: hidirtybuffers(cache_bytes),
        }
    }

    /// What a run's first line says of it.
    pub fn describe(self) -> String {
        match self {
            BufDaemon::Off => "no buffer daemon".into(),
            BufDaemon::FreeBsd4 { high } => format!(
                "buffer daemon with hidirtybuffers {high} writing the oldest down to half of it, woken at three quarters and each second"
            ),
            BufDaemon::WriteAll { high } => {
                format!("buffer daemon writing everything past {high} dirty")
            }
        }
    }

    /// Whether the daemon runs at modeled second `now` with `dirty`
    /// buffers dirty, and if so the count it writes down to (`None`:
    /// everything). `next_timer_s` is when its own timer next fires,
    /// moved on here when it does.
    fn wakes(self, dirty: usize, now: f64, next_timer_s: &mut f64) -> Option<Option<usize>> {
        match self {
            BufDaemon::Off => None,
            BufDaemon::FreeBsd4 { high } => {
                let lo = high / 2;
                let timer = now >= *next_timer_s;
                if timer {
                    *next_timer_s = now.floor() + 1.0;
                }
                (dirty >= (lo + high) / 2 || (timer && dirty > lo)).then_some(Some(lo))
            }
            BufDaemon::WriteAll { high } => (dirty > high).then_some(None),
        }
    }
}

/// How the modeled syncer writes delayed writes (see the module's notes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SyncerModel {
    /// FreeBSD's wheel: each modeled second, what was dirtied 28-30 s
    /// before.
    Wheel,
    /// Everything dirty every 30 modeled seconds.
    Whole,
}

impl SyncerModel {
    pub fn parse(s: &str) -> Option<SyncerModel> {
        match s {
            "wheel" => Some(SyncerModel::Wheel),
            "whole" => Some(SyncerModel::Whole),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SyncerModel::Wheel => "wheel",
            SyncerModel::Whole => "whole",
        }
    }
}

/// The modeled syncer and buffer daemon of a run.
#[derive(Debug, Clone, Copy)]
pub struct SyncerConfig {
    pub model: SyncerModel,
    /// Seconds between the syncer's runs over the mount (the whole
    /// model's writes, the low-memory signal); 0: no syncer.
    pub every_s: f64,
    /// The buffer daemon.
    pub buf_daemon: BufDaemon,
    /// The syncer's and buffer daemon's writes are issued without
    /// waiting, as FreeBSD issues them (`bawrite`, `vfs_bio_awrite`):
    /// queued at the drive and written while the benchmark computes
    /// (`ModeledDisk::set_async_writes`). Off (the `syncer-waits`
    /// ablation): the benchmark waits for each.
    pub asynchronous: bool,
}

/// Seconds a buffer of `kind` waits on FreeBSD's syncer wheel before its
/// slot comes up (`filedelay`, `dirdelay`, `metadelay` in
/// `kern/vfs_subr.c`: indirect blocks hang off the file's vnode, inode and
/// cylinder-group blocks off the device's), and the order of kinds within
/// one slot's pass (data before the metadata that points at it).
fn wheel_delay(kind: BlockKind) -> (f64, u8) {
    match kind {
        BlockKind::Data | BlockKind::ExtAttr => (30.0, 0),
        BlockKind::Indir => (30.0, 1),
        BlockKind::Dir => (29.0, 2),
        BlockKind::Inode | BlockKind::Cg | BlockKind::Summary | BlockKind::Super => (28.0, 3),
    }
}

/// The syncer wheel's worklist: when each dirty buffer went on it.
#[derive(Default)]
struct Wheel {
    /// Buffer address -> the modeled second it was first seen dirty (or
    /// put back after a write left it dirty).
    since: std::collections::HashMap<Frag, f64>,
    /// The next second the syncer turns the wheel.
    next_tick_s: f64,
}

impl Wheel {
    /// The buffer daemon's pass (`flushbufqueues`) at modeled second
    /// `now`: writes the buffers dirty longest (by the wheel's record; ones
    /// it has not seen yet are the newest) until `keep` dirty ones would be
    /// left. A buffer its write leaves dirty (parts rolled back) counts as
    /// dirtied now, as FreeBSD's redirtied buffer goes to the tail of the
    /// dirty queue, so the next pass takes older ones first. Returns how
    /// many were written.
    fn write_oldest(&mut self, fs: &Fs, keep: usize, now: f64) -> ufs::Result<usize> {
        let mut dirty: Vec<(f64, Frag)> = fs
            .dirty_list()
            .into_iter()
            .map(|(a, _)| (self.since.get(&a).copied().unwrap_or(f64::INFINITY), a))
            .collect();
        if dirty.len() <= keep {
            return Ok(0);
        }
        // Oldest first; equal ages by address, as the list came.
        dirty.sort_by(|x, y| x.0.total_cmp(&y.0));
        let n = dirty.len() - keep;
        let addrs: Vec<Frag> = dirty[..n].iter().map(|&(_, a)| a).collect();
        let written = fs.write_buffers(&addrs)?;
        // Clean ones leave the record at the wheel's next turn.
        for a in addrs {
            self.since.insert(a, now);
        }
        Ok(written)
    }

    /// One turn at modeled second `now`: notes newly dirty buffers, forgets
    /// clean ones, writes those whose delay has passed. Returns how many
    /// buffers were written.
    fn turn(&mut self, fs: &Fs, now: f64) -> ufs::Result<usize> {
        let dirty = fs.dirty_list();
        let mut seen = std::collections::HashMap::with_capacity(dirty.len());
        let mut due = Vec::new();
        for (a, kind) in dirty {
            let t = self.since.get(&a).copied().unwrap_or(now);
            seen.insert(a, t);
            let (delay, rank) = wheel_delay(kind);
            if now - t >= delay {
                due.push((rank, a));
            }
        }
        self.since = seen;
        if due.is_empty() {
            return Ok(0);
        }
        due.sort_unstable();
        let addrs: Vec<Frag> = due.iter().map(|&(_, a)| a).collect();
        let n = fs.write_buffers(&addrs)?;
        // Still dirty after its write (parts rolled back): back on the
        // wheel from now, as FreeBSD's redirtied buffer is.
        for a in addrs {
            if let Some(t) = self.since.get_mut(&a) {
                *t = now;
            }
        }
        Ok(n)
    }
}

/// The device, buffer-cache and dirhash counters of a test, as recorded
/// in its row.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Counters {
    /// Requests to the modeled disk, and those that moved the arm.
    pub reads: u64,
    pub writes: u64,
    pub seeks: u64,
    /// Buffer-cache lookups found and missed, all kinds of block.
    pub cache_hits: u64,
    pub cache_misses: u64,
    /// Of which directory blocks.
    pub dir_hits: u64,
    pub dir_misses: u64,
    /// Buffers evicted to make room.
    pub evictions: u64,
    /// Lookups answered by dirhash (hash chains or the sequential
    /// shortcut) and by a linear scan, and the entries scans examined.
    pub dh_lookups_hash: u64,
    pub dh_lookups_linear: u64,
    pub dh_entries_scanned: u64,
    /// Indexes built, builds refused for lack of budget, indexes recycled
    /// for room, and indexes freed by low-memory events.
    pub dh_built: u64,
    pub dh_build_refused: u64,
    pub dh_recycled: u64,
    pub dh_lowmem_freed: u64,
    /// Dirhash memory in use at the end of the test (a gauge).
    pub dh_mem_bytes: u64,
}

impl Counters {
    /// CSV column names, in [`Counters::values`] order.
    pub const COLUMNS: [&'static str; 16] = [
        "reads",
        "writes",
        "seeks",
        "cache_hits",
        "cache_misses",
        "dir_hits",
        "dir_misses",
        "evictions",
        "dh_lookups_hash",
        "dh_lookups_linear",
        "dh_entries_scanned",
        "dh_built",
        "dh_build_refused",
        "dh_recycled",
        "dh_lowmem_freed",
        "dh_mem_bytes",
    ];

    pub fn values(&self) -> [u64; 16] {
        [
            self.reads,
            self.writes,
            self.seeks,
            self.cache_hits,
            self.cache_misses,
            self.dir_hits,
            self.dir_misses,
            self.evictions,
            self.dh_lookups_hash,
            self.dh_lookups_linear,
            self.dh_entries_scanned,
            self.dh_built,
            self.dh_build_refused,
            self.dh_recycled,
            self.dh_lowmem_freed,
            self.dh_mem_bytes,
        ]
    }

    fn read(fs: &Fs, dev: &ModeledDisk<SparseDevice>) -> Counters {
        let d = dev.disk_stats();
        let c = fs.cache_stats();
        let all = |f: fn(&ufs::cache::KindStats) -> u64| c.by_kind.iter().map(f).sum::<u64>();
        let dir = c.kind(BlockKind::Dir);
        let h = fs.dirhash().stats;
        Counters {
            reads: d.reads,
            writes: d.writes,
            seeks: d.seeks,
            cache_hits: all(|k| k.hits),
            cache_misses: all(|k| k.misses),
            dir_hits: dir.hits,
            dir_misses: dir.misses,
            evictions: c.evictions,
            dh_lookups_hash: h.lookups_hash + h.lookups_sequential,
            dh_lookups_linear: h.lookups_linear,
            dh_entries_scanned: h.entries_scanned,
            dh_built: h.built,
            dh_build_refused: h.build_refused,
            dh_recycled: h.recycled,
            dh_lowmem_freed: h.lowmem_freed,
            dh_mem_bytes: h.mem_in_use,
        }
    }

    /// Counts since `earlier`; the gauge is this reading's.
    fn since(&self, e: &Counters) -> Counters {
        Counters {
            reads: self.reads - e.reads,
            writes: self.writes - e.writes,
            seeks: self.seeks - e.seeks,
            cache_hits: self.cache_hits - e.cache_hits,
            cache_misses: self.cache_misses - e.cache_misses,
            dir_hits: self.dir_hits - e.dir_hits,
            dir_misses: self.dir_misses - e.dir_misses,
            evictions: self.evictions - e.evictions,
            dh_lookups_hash: self.dh_lookups_hash - e.dh_lookups_hash,
            dh_lookups_linear: self.dh_lookups_linear - e.dh_lookups_linear,
            dh_entries_scanned: self.dh_entries_scanned - e.dh_entries_scanned,
            dh_built: self.dh_built - e.dh_built,
            dh_build_refused: self.dh_build_refused - e.dh_build_refused,
            dh_recycled: self.dh_recycled - e.dh_recycled,
            dh_lowmem_freed: self.dh_lowmem_freed - e.dh_lowmem_freed,
            dh_mem_bytes: self.dh_mem_bytes,
        }
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Reading {
    disk_s: f64,
    cpu_s: f64,
    user_s: f64,
}

impl Reading {
    fn total(&self) -> f64 {
        self.disk_s + self.cpu_s + self.user_s
    }
}

struct Clock {
    cpu: CpuModel,
    dev: Arc<ModeledDisk<SparseDevice>>,
    /// Counters when the meter started.
    calls0: CallStats,
    dir0: DirhashStats,
    user_s: f64,
    sync_every_s: f64,
    syncer: SyncerModel,
    /// The syncer's and buffer daemon's writes are issued without waiting.
    syncer_async: bool,
    daemon: BufDaemon,
    /// The next modeled second the buffer daemon wakes by itself.
    next_daemon_s: f64,
    wheel: Wheel,
    /// Deliver a dirhash low-memory event with a run of the syncer when
    /// the buffer cache evicted since the previous run.
    lowmem: bool,
    evictions: u64,
    next_sync_s: f64,
    /// Host (CPU and user) seconds the drive has been told of
    /// (`ModeledDisk::idle`: a write-back cache writes meanwhile).
    host_seen_s: f64,
    syncs: u64,
    sync_error: Option<String>,
}

impl Clock {
    fn read(&self, fs: &Fs) -> Reading {
        let d = ModeledDisk::disk_stats(&self.dev);
        let calls = fs.call_stats().since(&self.calls0);
        let dir = fs.dirhash_counters().since(&self.dir0);
        Reading {
            disk_s: d.busy_ms / 1e3,
            cpu_s: self.cpu.seconds(&calls, &dir),
            user_s: self.user_s,
        }
    }
}

/// Runs `f` (a syncer or buffer-daemon pass) with the drive taking its
/// writes without the benchmark waiting when `on` (the model; off under
/// the `syncer-waits` ablation), and as writes it waits for otherwise.
fn background_writes<T>(dev: &ModeledDisk<SparseDevice>, on: bool, f: impl FnOnce() -> T) -> T {
    dev.set_async_writes(on);
    let r = f();
    dev.set_async_writes(false);
    r
}

/// A handle for a workload to declare CPU time of its own (a compiler's,
/// `grep`'s) on the modeled clock.
#[derive(Clone)]
pub(crate) struct UserCpu(Arc<Mutex<Clock>>);

impl UserCpu {
    pub(crate) fn charge(&self, seconds: f64) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).user_s += seconds.max(0.0);
    }
}

/// One test measured.
pub(crate) struct Measured {
    pub test: &'static str,
    pub seconds: f64,
    pub disk_s: f64,
    pub cpu_s: f64,
    pub wall_ms: f64,
    pub syncs: u64,
    pub counters: Counters,
}

/// Runs a workload's tests on `fs` and measures each.
pub(crate) struct Meter<'a> {
    pub fs: &'a Fs,
    clock: Arc<Mutex<Clock>>,
    pub(crate) out: Vec<Measured>,
    progress: &'a mut dyn FnMut(&str),
    /// A sync after each test, inside its time (see the module's notes).
    pub(crate) sync_each_test: bool,
    /// Each test starts from cold caches: what is dirty written, the
    /// buffer cache, dirhash and the drive's read-ahead emptied, outside
    /// its time (the `cold-cache` ablation).
    pub(crate) cold_each_test: bool,
}

impl<'a> Meter<'a> {
    pub(crate) fn new(
        fs: &'a Fs,
        dev: Arc<ModeledDisk<SparseDevice>>,
        cpu: CpuModel,
        syncer: SyncerConfig,
        lowmem: bool,
        progress: &'a mut dyn FnMut(&str),
    ) -> Meter<'a> {
        let SyncerConfig {
            model: syncer,
            every_s: sync_every_s,
            buf_daemon: daemon,
            asynchronous: syncer_async,
        } = syncer;
        let clock = Arc::new(Mutex::new(Clock {
            cpu,
            dev,
            calls0: fs.call_stats(),
            dir0: fs.dirhash_counters(),
            user_s: 0.0,
            sync_every_s,
            syncer,
            syncer_async,
            daemon,
            next_daemon_s: 1.0,
            wheel: Wheel {
                next_tick_s: 1.0,
                ..Wheel::default()
            },
            lowmem,
            evictions: fs.cache_stats().evictions_main,
            next_sync_s: sync_every_s,
            host_seen_s: 0.0,
            syncs: 0,
            sync_error: None,
        }));
        if sync_every_s > 0.0 || daemon != BufDaemon::Off {
            let c = clock.clone();
            fs.set_call_hook(Some(Box::new(move |fs: &Fs| {
                let mut c = c.lock().unwrap_or_else(|p| p.into_inner());
                let c = &mut *c;
                let r = c.read(fs);
                // The host computed since the last call: a drive with a
                // write-back cache writes meanwhile (nothing otherwise).
                let host = r.cpu_s + r.user_s;
                c.dev.idle((host - c.host_seen_s) * 1e3);
                c.host_seen_s = host;
                let mut now = r.total();
                // The wheel turns once a modeled second (the clock may have
                // passed several since the last call: each turn comes).
                if c.syncer == SyncerModel::Wheel && c.sync_every_s > 0.0 {
                    while now >= c.wheel.next_tick_s {
                        let tick = c.wheel.next_tick_s;
                        c.wheel.next_tick_s += 1.0;
                        let (dev, bg) = (c.dev.clone(), c.syncer_async);
                        match background_writes(&dev, bg, || c.wheel.turn(fs, tick)) {
                            Ok(0) => {}
                            Ok(_) => c.syncs += 1,
                            Err(e) => {
                                c.sync_error.get_or_insert(e.to_string());
                            }
                        }
                        now = c.read(fs).total();
                    }
                }
                let timed = c.sync_every_s > 0.0 && now >= c.next_sync_s;
                let whole = timed && c.syncer == SyncerModel::Whole;
                let daemon = c
                    .daemon
                    .wakes(fs.dirty_buffers(), now, &mut c.next_daemon_s);
                if whole || daemon.is_some() {
                    // The buffer daemon's writes are asynchronous in
                    // FreeBSD too (`flushbufqueues`, `vfs_bio_awrite`).
                    // A whole sync writes everything, as a daemon that
                    // writes all does; FreeBSD's writes the oldest.
                    let down_to = if whole { None } else { daemon.flatten() };
                    let (dev, bg) = (c.dev.clone(), c.syncer_async);
                    let r = background_writes(&dev, bg, || match down_to {
                        Some(keep) => c.wheel.write_oldest(fs, keep, now).map(drop),
                        None => fs.sync(),
                    });
                    if let Err(e) = r {
                        c.sync_error.get_or_insert(e.to_string());
                    }
                    if down_to.is_none() && c.syncer == SyncerModel::Whole {
                        // Nothing is dirty after a whole sync; the wheel's
                        // record (the daemon's only, in this model) starts
                        // again.
                        c.wheel.since.clear();
                    }
                    c.syncs += 1;
                }
                if timed {
                    // The next run is an interval after this one ends; the
                    // low-memory signal goes with the syncer's run over the
                    // mount, every interval in either model.
                    c.next_sync_s = c.read(fs).total() + c.sync_every_s;
                    if c.lowmem {
                        let evictions = fs.cache_stats().evictions_main;
                        if evictions > c.evictions {
                            fs.dirhash_lowmem_share();
                        }
                        c.evictions = evictions;
                    }
                }
            })));
        }
        Meter {
            fs,
            clock,
            out: Vec::new(),
            progress,
            sync_each_test: false,
            cold_each_test: false,
        }
    }

    pub(crate) fn user(&self) -> UserCpu {
        UserCpu(self.clock.clone())
    }

    fn read(&self) -> (Reading, u64, Counters) {
        let c = self.clock.lock().unwrap_or_else(|p| p.into_inner());
        (c.read(self.fs), c.syncs, Counters::read(self.fs, &c.dev))
    }

    /// Runs test `name` (and with `sync_each_test` a sync after it);
    /// records it.
    pub(crate) fn phase<T>(
        &mut self,
        name: &'static str,
        f: impl FnOnce(&Fs) -> ufs::Result<T>,
    ) -> ufs::Result<T> {
        (self.progress)(name);
        if self.cold_each_test {
            self.fs.drop_caches()?;
        }
        let (r0, s0, n0) = self.read();
        let t = Instant::now();
        let out = f(self.fs)?;
        if self.sync_each_test {
            self.fs.sync()?;
        }
        let wall_ms = t.elapsed().as_secs_f64() * 1e3;
        let (r1, s1, n1) = self.read();
        if let Some(e) = self
            .clock
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .sync_error
            .take()
        {
            return Err(ufs::Error::new(
                ufs::ErrorKind::Io,
                format!("the modeled syncer failed during {name}: {e}"),
            ));
        }
        self.out.push(Measured {
            test: name,
            seconds: r1.total() - r0.total(),
            disk_s: r1.disk_s - r0.disk_s,
            cpu_s: (r1.cpu_s + r1.user_s) - (r0.cpu_s + r0.user_s),
            wall_ms,
            syncs: s1 - s0,
            counters: n1.since(&n0),
        });
        Ok(out)
    }
}

impl Drop for Meter<'_> {
    fn drop(&mut self) {
        self.fs.set_call_hook(None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ufs::Cred;

    /// A 256 MiB soft-updates file system on the quick profile's modeled
    /// disk, synced.
    fn softdep_fs() -> (Arc<ModeledDisk<SparseDevice>>, Fs) {
        let p = super::super::Profile::quick();
        let (dev, fs) = crate::modeled_fs(
            &p.disk,
            256 << 20,
            &ufs::newfs::NewfsParams {
                bsize: 8192,
                fsize: 1024,
                ..Default::default()
            },
            ufs::MountOptions {
                write_mode: Some(ufs::order::WriteMode::Softdep),
                ..Default::default()
            },
        )
        .unwrap();
        fs.sync().unwrap();
        (dev, fs)
    }

    /// The syncer and buffer daemon of a run, waited for.
    fn config(model: SyncerModel, freebsd_daemon: bool) -> SyncerConfig {
        SyncerConfig {
            model,
            every_s: SYNC_EVERY_S,
            buf_daemon: if freebsd_daemon {
                BufDaemon::freebsd4(64 << 20)
            } else {
                BufDaemon::WriteAll {
                    high: EARLIER_DIRTY_HIGH,
                }
            },
            asynchronous: false,
        }
    }

    /// A file written at the start, then the clock advanced a second at a
    /// time (user CPU, with a cheap call each second to run the hook):
    /// the modeled second from which the device has seen writes, and the
    /// second from which nothing is dirty.
    fn when_written(syncer: SyncerModel) -> (f64, f64) {
        let (dev, fs) = softdep_fs();
        let mut quiet = |_: &str| {};
        let m = Meter::new(
            &fs,
            dev.clone(),
            CpuModel::pentium4_2002(),
            config(syncer, false),
            false,
            &mut quiet,
        );
        let a = fs.mknod(fs.root(), b"f", 0o100644, 0, Cred::ROOT).unwrap();
        assert_eq!(
            fs.write(a.ino, 0, &[7u8; 20_000], Cred::ROOT).unwrap(),
            20_000
        );
        let writes0 = dev.disk_stats().writes;
        assert!(fs.dirty_buffers() > 0);
        let (mut first, mut clean) = (None, None);
        for s in 1..=70 {
            m.user().charge(1.0);
            fs.getattr(fs.root()).unwrap();
            let t = f64::from(s);
            if first.is_none() && dev.disk_stats().writes > writes0 {
                first = Some(t);
            }
            if clean.is_none() && fs.dirty_buffers() == 0 {
                clean = Some(t);
            }
        }
        (first.expect("never written"), clean.expect("never clean"))
    }

    /// A file written 8 KiB at a time, 1,100 blocks, a hundredth of a
    /// modeled second of CPU after each: the dirty buffers left at the end
    /// and whether the file's first and last blocks are among them.
    fn daemon_leaves(to_half: bool) -> (usize, bool, bool) {
        let (dev, fs) = softdep_fs();
        let mut quiet = |_: &str| {};
        let m = Meter::new(
            &fs,
            dev,
            CpuModel::pentium4_2002(),
            config(SyncerModel::Wheel, to_half),
            false,
            &mut quiet,
        );
        let f = fs
            .mknod(fs.root(), b"f", 0o100644, 0, Cred::ROOT)
            .unwrap()
            .ino;
        for i in 0..1100u64 {
            fs.write(f, i * 8192, &[1u8; 8192], Cred::ROOT).unwrap();
            m.user().charge(0.01);
        }
        fs.getattr(fs.root()).unwrap();
        let dirty: Vec<Frag> = fs.dirty_list().into_iter().map(|(a, _)| a).collect();
        let first = fs.block_of(f, 0).unwrap();
        let last = fs.block_of(f, 1099).unwrap();
        (dirty.len(), dirty.contains(&first), dirty.contains(&last))
    }

    #[test]
    fn freebsd_4s_dirty_buffer_marks_for_the_papers_machine() {
        // 256 MB: nbuf 2,302, so hidirtybuffers 2302/4 + 20.
        assert_eq!(hidirtybuffers(64 << 20), 595);
        // 64 MB (the small-memory ablation's machine): nbuf 1,010.
        assert_eq!(hidirtybuffers(16 << 20), 272);
    }

    #[test]
    fn the_buffer_daemon_writes_all_or_the_oldest_down_to_its_low_mark() {
        // The earlier model: every dirty buffer when 1,000 are dirty,
        // leaving only what was dirtied after the last pass.
        let (all, first, last) = daemon_leaves(false);
        assert!(all < EARLIER_DIRTY_HIGH / 4, "{all} dirty");
        assert!(!first && last);
        // FreeBSD's: once a second (a hundred blocks here) and at the
        // marks' midpoint, the oldest down to the low mark; the file's
        // first blocks are written, its last ones wait.
        let hi = hidirtybuffers(64 << 20);
        let lo = hi / 2;
        let (half, first, last) = daemon_leaves(true);
        assert!((lo..=(lo + hi) / 2).contains(&half), "{half} dirty");
        assert!(!first && last);
    }

    #[test]
    fn a_buffer_the_daemon_leaves_dirty_counts_as_dirtied_at_its_pass() {
        // Files created in one directory: each entry waits for its inode
        // (soft updates), so a directory block written before the inode
        // blocks goes out with entries rolled back and stays dirty.
        let (_dev, fs) = softdep_fs();
        let d = fs.mkdir(fs.root(), b"d", 0o755, Cred::ROOT).unwrap().ino;
        for i in 0..300 {
            fs.mknod(d, format!("f{i}").as_bytes(), 0o100644, 0, Cred::ROOT)
                .unwrap();
        }
        let mut wheel = Wheel::default();
        // Every buffer first dirtied at second 1, the directory's blocks
        // oldest (second 0), so the pass writes them first.
        let dirty = fs.dirty_list();
        for &(a, kind) in &dirty {
            let t = if kind == BlockKind::Dir { 0.0 } else { 1.0 };
            wheel.since.insert(a, t);
        }
        let dirs: Vec<Frag> = dirty
            .iter()
            .filter(|&&(_, k)| k == BlockKind::Dir)
            .map(|&(a, _)| a)
            .collect();
        assert!(!dirs.is_empty());
        let written = wheel
            .write_oldest(&fs, dirty.len() - dirs.len(), 5.0)
            .unwrap();
        // A block with nothing writable yet (the new directory's first,
        // whose inode is unwritten) is skipped, and stays as dirty.
        assert!((1..=dirs.len()).contains(&written), "{written} written");
        let still: Vec<Frag> = fs
            .dirty_list()
            .into_iter()
            .filter(|(a, _)| dirs.contains(a))
            .map(|(a, _)| a)
            .collect();
        assert!(!still.is_empty(), "no directory block was rolled back");
        for a in &still {
            assert_eq!(wheel.since[a], 5.0, "{a:?} kept its old place");
        }
        // The next pass takes the older inode blocks before them.
        let n = fs.dirty_buffers();
        wheel.write_oldest(&fs, n - 1, 6.0).unwrap();
        for a in &still {
            assert!(fs.dirty_list().iter().any(|(b, _)| b == a));
        }
    }

    #[test]
    fn the_wheel_writes_a_buffer_28_to_30_seconds_after_it_was_dirtied() {
        let (first, clean) = when_written(SyncerModel::Wheel);
        // Metadata goes 28 s after, data 30 s after; blocks redirtied by
        // the writes' completions (soft updates) go around once more.
        assert!((28.0..=30.0).contains(&first), "first write at {first} s");
        assert!(clean > first && clean <= 62.0, "clean at {clean} s");
    }

    #[test]
    fn the_whole_syncer_writes_everything_at_its_thirtieth_second() {
        let (first, clean) = when_written(SyncerModel::Whole);
        assert!((30.0..=31.0).contains(&first), "first write at {first} s");
        assert_eq!(clean, first);
    }
}
