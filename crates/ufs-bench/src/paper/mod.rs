//! Seed `004_*`'s evaluation (section 4): its benchmarks, and those of
//! seeds `001_*` and `002_*`, under all 16 combinations of the four
//! optimisations it studies, soft updates (SU: `softdep` against `normal`
//! write ordering), dirpref (DP: Orlov against the traditional directory
//! placement), vmiodir (VM: directory blocks in the main buffer cache
//! against FreeBSD 4.5's buffer space for them, `ufs::fs::dir_pool_bytes`)
//! and dirhash (DH: a 2 MiB budget
//! against none), one "test" per timed phase, as rows for
//! `analysis/paper_stats.py` and `analysis/paper_report.py`. Two further
//! factors of this project can join the design ([`Factor`]): IO, inodes of
//! large directories placed in name order (`inodeorder=offset`, seed 001)
//! against FFS's own placement, and GD, a dirhash budget that grows to the
//! cache size and gives memory back under pressure (seed 002) against the
//! fixed 2 MiB (it only matters with DH on). Factors a run does not vary
//! are off, so the paper's 16 combinations run FFS as it was in 2002.
//!
//! Layout: this module holds the profiles, the combinations, the rows and
//! the runner (combinations side by side on `jobs` threads); [`meter`] the
//! modeled clock (disk + CPU + declared user time, with a syncer and a
//! buffer daemon on that clock) and the timing of tests; [`cpu`] the CPU
//! cost model of the paper's Pentium 4; the workloads are in `classic`
//! (tar, MH folder, Postmark), `bonnie`, `andrew`, `netnews`, `build` and
//! `seeds` (maildir of seed 002, large directory of seed 001). See
//! `docs/EVALUATION.md`.
//!
//! Invariants: each run starts from a fresh file system (the paper's era of
//! FFS: 8 KB blocks, 1 KB fragments, 8 MiB groups, fixed seed and time) on
//! a sparse memory device under the modeled disk, mounted with a 64 MiB
//! buffer cache and no host read-ahead; the cache is dropped once before
//! the first test (the paper removed the benchmark directory between runs
//! so nothing useful was cached) and kept between tests, each of which
//! ends with its sync (nothing delayed crosses into the next test). All
//! inputs come from seeded generators and the modeled time is a function
//! of counters, so a profile gives the same figures every time and
//! whatever the number of jobs: repeated runs would be identical, so there
//! is one, recorded as `run` 0. Each workload checks what it left and
//! fails otherwise; every image is unmounted and checked with fsck at the
//! end of its run and the result recorded in each of its rows, with the
//! run's whole configuration ([`RunConfig`]) and the device, buffer-cache
//! and dirhash counters of each test ([`Counters`]).
mod andrew;
mod bonnie;
mod build;
mod classic;
pub mod cpu;
pub mod meter;
mod netnews;
mod seeds;

use crate::Progress;
pub use classic::tar_tree;
pub use meter::Counters;
use meter::Meter;
use std::sync::Arc;
use std::time::Instant;
use ufs::alloc::placement::InodeOrder;
use ufs::dev::{BlockDevice, SparseDevice};
use ufs::dir::dirhash::DirhashConfig;
use ufs::fs::DirPref;
use ufs::newfs::NewfsParams;
use ufs::order::WriteMode;
use ufs::{Fs, MountOptions};
use ufs_sim::model::{preset, ModeledDisk};

const MIB: u64 = 1 << 20;

/// The paper's machine had a "20GB IDE hard disk" of 2001.
pub const DISK: &str = "ide-20g-2001";

/// The tree the tar workload extracts (`--tar-tree`).
#[derive(Debug, Clone)]
pub enum TarTree {
    /// Generated, shaped like the X11 sources the paper extracted
    /// ([`crate::tree::x11_tree`]): the default.
    X11,
    /// Generated, shaped like seed 000's OpenBSD ports collection
    /// ([`crate::tree::ports_tree`]).
    Ports,
    /// The directories and regular files read under `dir` on the host
    /// (names and sizes; contents generated).
    Host {
        dir: std::path::PathBuf,
        tree: Arc<crate::tree::Tree>,
    },
}

impl TarTree {
    /// The generated trees, each known by its [`TarTree::name`].
    pub const GENERATED: [TarTree; 2] = [TarTree::X11, TarTree::Ports];

    /// The whole tree (generators seeded with `seed`).
    pub fn tree(&self, seed: u64) -> crate::tree::Tree {
        match self {
            TarTree::X11 => crate::tree::x11_tree(seed),
            TarTree::Ports => crate::tree::ports_tree(seed),
            TarTree::Host { tree, .. } => (**tree).clone(),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            TarTree::X11 => "x11",
            TarTree::Ports => "ports",
            TarTree::Host { .. } => "host",
        }
    }
}

/// What `paper.json` records of the tar tree: its shape, the host
/// directory when read from one, and its counts.
#[derive(serde::Serialize)]
struct TarTreeRecord {
    shape: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    dir: Option<String>,
    dirs: usize,
    files: usize,
    bytes: u64,
}

impl serde::Serialize for TarTree {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // Counts of the whole tree (a profile may extract a prefix of it:
        // `tree_entries`), as generated with seed 1, every profile's: the
        // counts of directories and files do not depend on the seed, the
        // bytes do a little.
        let t = self.tree(1);
        TarTreeRecord {
            shape: self.name(),
            dir: match self {
                TarTree::Host { dir, .. } => Some(dir.display().to_string()),
                _ => None,
            },
            dirs: t.dirs(),
            files: t.files(),
            bytes: t.bytes(),
        }
        .serialize(s)
    }
}

/// Sizes of a profile.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Profile {
    pub name: String,
    /// The tar workload's tree.
    pub tar_tree: TarTree,
    /// Entries of the tar tree to extract (a prefix, still in archive
    /// order); `None`: the whole tree.
    pub tree_entries: Option<usize>,
    /// Messages of the MH folder.
    pub messages: u64,
    /// Postmark runs: (initial files, transactions), one test each.
    pub postmark: Vec<(u64, u64)>,
    /// Bonnie++'s small-file tests: files in the one directory (`-n 16`
    /// is 16 * 1024).
    pub bonnie_files: u64,
    /// Andrew: copies of the source tree.
    pub andrew_copies: u64,
    /// Netnews: articles arriving in the replay.
    pub netnews_articles: u64,
    /// Build-like: source files of the tree checked out and compiled.
    pub build_files: u64,
    /// Maildir (seed 002): maildirs, and messages in each `cur`.
    pub maildirs: u64,
    pub maildir_messages: u64,
    /// Large directory (seed 001): files of 4 KB in the one directory.
    pub largedir_files: u64,
    pub disk: String,
    pub fs_bytes: u64,
    pub cache_bytes: u64,
    /// Modeled seconds between syncer runs (0: no syncer).
    pub sync_every_s: f64,
    /// How the modeled syncer writes delayed writes: FreeBSD's wheel (each
    /// second what was dirtied 28-30 s before) or all of it every
    /// `sync_every_s` (`meter::SyncerModel`).
    pub syncer: meter::SyncerModel,
    /// The modeled buffer daemon: FreeBSD 4's `buf_daemon` with the
    /// modeled machine's marks (the default since 2026-11-29), or the
    /// earlier one that writes everything past a mark (the
    /// `bufdaemon-all` ablation).
    pub buf_daemon: meter::BufDaemon,
    /// The modeled drive's tracks are skewed as drives are formatted
    /// (`ModeledDisk::set_skew`; the default since 2026-11-29), or every
    /// track starts at the same angle (false: the `disk-unskewed`
    /// ablation, the earlier model).
    pub disk_skew: bool,
    /// Each test ends with a sync inside its time (true), or, as the paper
    /// ran its benchmarks (false, the default), a run's tests follow each
    /// other with what the one before delayed still pending (the syncer and
    /// buffer daemon write it on the modeled clock, in whichever test is
    /// running), and only the run ends with a sync, outside any test's
    /// time (the paper's `sync` and `sleep` between runs).
    pub sync_each_test: bool,
    /// Worker threads running combinations side by side (results do not
    /// depend on it).
    pub jobs: usize,
    pub seed: u64,
    /// The on-disk format: UFS2 by default; UFS1 as the paper's FreeBSD
    /// 4.5 machine had it (`--format ufs1`).
    #[serde(serialize_with = "variant_name")]
    pub format: ufs_format::Variant,
    /// The one modeled element this run changes, if it is an ablation
    /// (written once in paper.json, as its top-level `ablation`).
    #[serde(skip)]
    pub ablation: Option<Ablation>,
}

/// One modeled element changed, to show what a claim's verdict depends
/// on (`--ablate`; docs/EVALUATION.md, "Ablations").
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Ablation {
    /// The syncer writes everything every 30 s instead of turning
    /// FreeBSD's wheel once a second.
    SyncerWhole,
    /// The benchmark waits for each of the syncer's and the buffer
    /// daemon's writes (the model before 2026-11-29, afternoon), instead
    /// of FreeBSD's way: issued without waiting (`bawrite` from
    /// `sched_sync`, `vfs_bio_awrite` from `flushbufqueues`), queued at
    /// the drive in disksort's one-way scan (FreeBSD 4.5's ata(4),
    /// `bioqdisksort`) and written while the benchmark computes.
    SyncerWaits,
    /// The buffer daemon writes every dirty buffer when more than 1,000
    /// are dirty (the model before 2026-11-29), instead of running as
    /// FreeBSD 4's (`hidirtybuffers` from `nbuf`, woken at the marks'
    /// midpoint and once a second, the longest-dirty buffers written down
    /// to `lodirtybuffers`; `buf_daemon`, `flushbufqueues`).
    BufdaemonAll,
    /// Each test ends with a sync inside its time instead of leaving its
    /// delayed writes to the next.
    SyncEachTest,
    /// vmiodir off keeps directory blocks in a twentieth of the cache
    /// (FreeBSD's `maxbufmallocspace` alone), a pool of their own, instead
    /// of the buffer space shared with every other buffer.
    VmiodirTwentieth,
    /// vmiodir off keeps directory blocks in a pool of the buffer space's
    /// size that no other buffer uses (the model until 2026-11-28, late),
    /// instead of sharing it with every buffer that passes through.
    VmiodirOwnSpace,
    /// The drive's write-back cache on (2 MB, the buffer of the modeled
    /// drive): writes are acknowledged from the buffer and reach the media
    /// while the host computes. FreeBSD's ata(4) switch `hw.ata.wc` was
    /// off by default in the 2001 driver (`dev/ata/ata-disk.c`,
    /// `TUNABLE_INT_DECL("hw.ata.wc", 0, ...)`) and on in the 2002 one;
    /// which the paper's FreeBSD 4.5 ran, it does not say.
    DiskWriteCache,
    /// Each test starts from cold caches (what is dirty written, the
    /// buffer cache, dirhash and the drive's read-ahead emptied, outside
    /// its time), instead of finding what the test before left cached.
    ColdCache,
    /// A machine with a quarter of the memory (the paper's era had 64 MB
    /// machines beside its 256 MB one): a 16 MiB buffer cache, and with
    /// vmiodir off the buffer space of that machine.
    SmallMemory,
    /// Andrew's compiler five times slower (`andrew::SLOW_CC`): the paper
    /// gives no compile time, and the compile's share of disk time decides
    /// whether dirpref shows in it.
    AndrewSlowCc,
    /// Every track of the modeled drive starts at the same angle (the
    /// model before 2026-11-29), instead of skewed as drives are formatted
    /// (`ModeledDisk::set_skew`: each track's first sector a head-switch
    /// time, each cylinder's a cylinder-switch time, after the one
    /// before). It moves the rotational wait between two blocks written
    /// one after the other.
    DiskUnskewed,
}

impl Ablation {
    pub const ALL: [Ablation; 11] = [
        Ablation::SyncerWhole,
        Ablation::SyncerWaits,
        Ablation::BufdaemonAll,
        Ablation::SyncEachTest,
        Ablation::VmiodirTwentieth,
        Ablation::VmiodirOwnSpace,
        Ablation::DiskWriteCache,
        Ablation::ColdCache,
        Ablation::SmallMemory,
        Ablation::AndrewSlowCc,
        Ablation::DiskUnskewed,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Ablation::SyncerWhole => "syncer-whole",
            Ablation::SyncerWaits => "syncer-waits",
            Ablation::BufdaemonAll => "bufdaemon-all",
            Ablation::SyncEachTest => "sync-each-test",
            Ablation::VmiodirTwentieth => "vmiodir-twentieth",
            Ablation::VmiodirOwnSpace => "vmiodir-own-space",
            Ablation::DiskWriteCache => "disk-write-cache",
            Ablation::ColdCache => "cold-cache",
            Ablation::SmallMemory => "small-memory",
            Ablation::AndrewSlowCc => "andrew-slow-cc",
            Ablation::DiskUnskewed => "disk-unskewed",
        }
    }

    pub fn parse(s: &str) -> Option<Ablation> {
        Ablation::ALL.into_iter().find(|a| a.name() == s)
    }

    /// What it changes, in a sentence (the report's table).
    pub fn describe(self) -> &'static str {
        match self {
            Ablation::SyncerWhole => "the syncer writes everything dirty every 30 modeled seconds, instead of FreeBSD's wheel (each second, what was dirtied 28-30 s before)",
            Ablation::SyncerWaits => "the benchmark waits for each of the syncer's and buffer daemon's writes (the model before 2026-11-29, afternoon), instead of FreeBSD's way: issued without waiting (bawrite), queued at the drive in disksort's one-way scan (FreeBSD 4.5's ata(4)) and written while the benchmark computes, which waits only for those the scan reaches before its own request",
            Ablation::BufdaemonAll => "the buffer daemon, woken when more than 1,000 buffers are dirty, writes every dirty buffer (the model before 2026-11-29), instead of FreeBSD 4's buf_daemon: with hidirtybuffers nbuf/4+20 (595 on the paper's machine), woken at the midpoint of it and lodirtybuffers (half of it) and once a second, writing the longest-dirty buffers until lodirtybuffers are left",
            Ablation::SyncEachTest => "each test ends with a sync inside its time, instead of leaving what it delayed to the tests after it",
            Ablation::VmiodirTwentieth => "with vmiodir off, directory blocks live in a twentieth of the cache of their own (FreeBSD's maxbufmallocspace alone), instead of FreeBSD 4.5's buffer space shared with every buffer in use",
            Ablation::VmiodirOwnSpace => "with vmiodir off, directory blocks live in a pool of the buffer space's size that no other buffer uses, instead of sharing FreeBSD 4.5's buffer space with every buffer that passes through it",
            Ablation::DiskWriteCache => "the drive's 2 MB write-back cache is on (FreeBSD's ata(4) hw.ata.wc: off in the 2001 driver, on by default in the 2002 one): a write is acknowledged from the buffer and reaches the media while the host computes, instead of every write waiting for the media",
            Ablation::ColdCache => "each test starts from cold caches (what is dirty written, the buffer cache, dirhash and the drive's read-ahead emptied, outside its time), instead of finding what the test before left cached",
            Ablation::SmallMemory => "a machine with a quarter of the memory: a 16 MiB buffer cache (and, with vmiodir off, that machine's buffer space for directories), instead of 64 MiB",
            Ablation::DiskUnskewed => "every track of the modeled drive starts at the same angle (the model before 2026-11-29), instead of skewed as drives are formatted (each track's first sector a head-switch time, each cylinder's a cylinder-switch time, after the one before): the rotational wait between two blocks written one after the other moves",
            Ablation::AndrewSlowCc => "Andrew's modeled compiler five times slower (gcc 2.95 at 2,000 lines a second instead of 10,000): the paper gives no compile time, and the compile's share of disk time decides how much dirpref shows in it",
        }
    }

    /// The profile with this element changed.
    pub fn apply(self, p: &Profile) -> Profile {
        let mut q = p.clone();
        q.ablation = Some(self);
        match self {
            Ablation::SyncerWhole => q.syncer = meter::SyncerModel::Whole,
            Ablation::SyncEachTest => q.sync_each_test = true,
            Ablation::SmallMemory => {
                q.cache_bytes /= 4;
                if let meter::BufDaemon::FreeBsd4 { .. } = q.buf_daemon {
                    q.buf_daemon = meter::BufDaemon::freebsd4(q.cache_bytes);
                }
            }
            Ablation::BufdaemonAll => {
                q.buf_daemon = meter::BufDaemon::WriteAll {
                    high: meter::EARLIER_DIRTY_HIGH,
                };
            }
            Ablation::DiskUnskewed => q.disk_skew = false,
            Ablation::SyncerWaits
            | Ablation::VmiodirTwentieth
            | Ablation::VmiodirOwnSpace
            | Ablation::DiskWriteCache
            | Ablation::ColdCache
            | Ablation::AndrewSlowCc => {}
        }
        q
    }
}

fn variant_name<S: serde::Serializer>(v: &ufs_format::Variant, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(v.short_name())
}

impl Profile {
    /// The paper's sizes where it gives them: the whole tree, 33,164
    /// messages, Postmark with 10,000 and 20,000 files, Bonnie++ `-n 16`,
    /// Andrew with 100 copies.
    pub fn full() -> Profile {
        Profile {
            name: "full".into(),
            tar_tree: TarTree::X11,
            tree_entries: None,
            messages: 33_164,
            postmark: vec![(10_000, 10_000), (20_000, 20_000)],
            bonnie_files: 16 * 1024,
            andrew_copies: 100,
            netnews_articles: 30_000,
            build_files: 12_000,
            maildirs: 300,
            maildir_messages: 400,
            largedir_files: 20_000,
            disk: DISK.into(),
            fs_bytes: 4 << 30,
            cache_bytes: 64 * MIB,
            sync_every_s: meter::SYNC_EVERY_S,
            syncer: meter::SyncerModel::Wheel,
            buf_daemon: meter::BufDaemon::freebsd4(64 * MIB),
            disk_skew: true,
            sync_each_test: false,
            jobs: 2,
            seed: 1,
            format: ufs_format::Variant::UFS2_LE,
            ablation: None,
        }
    }

    /// Small enough for CI (a few minutes): the whole tree (small
    /// already), the other workloads at about a tenth.
    pub fn quick() -> Profile {
        Profile {
            name: "quick".into(),
            tree_entries: None,
            messages: 3_000,
            postmark: vec![(1_000, 1_000), (2_000, 2_000)],
            bonnie_files: 2048,
            andrew_copies: 10,
            netnews_articles: 3_000,
            build_files: 1_200,
            maildirs: 10,
            maildir_messages: 400,
            largedir_files: 3_000,
            ..Profile::full()
        }
    }
}

/// A factor of the design: the paper's four, and two this project adds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Factor {
    /// Soft updates (`softdep`) against synchronous metadata writes.
    Su,
    /// Orlov's directory placement against the traditional one.
    Dp,
    /// Directory blocks in the main buffer cache against a small pool.
    Vm,
    /// Dirhash with a 2 MiB budget against none.
    Dh,
    /// Inodes of large directories placed in name order (`inodeorder=offset`)
    /// against FFS's own choice (`off`), from the layout work of seed 001.
    Io,
    /// With dirhash on: a budget that grows to the cache size and gives
    /// memory back on low-memory events (seed 002) against the fixed 2 MiB.
    Gd,
}

impl Factor {
    /// In column order.
    pub const ALL: [Factor; 6] = [
        Factor::Su,
        Factor::Dp,
        Factor::Vm,
        Factor::Dh,
        Factor::Io,
        Factor::Gd,
    ];
    /// The paper's four.
    pub const PAPER: [Factor; 4] = [Factor::Su, Factor::Dp, Factor::Vm, Factor::Dh];

    /// The CSV column (`su`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Factor::Su => "su",
            Factor::Dp => "dp",
            Factor::Vm => "vm",
            Factor::Dh => "dh",
            Factor::Io => "io",
            Factor::Gd => "gd",
        }
    }

    pub fn by_name(name: &str) -> Option<Factor> {
        Factor::ALL.into_iter().find(|f| f.name() == name)
    }

    /// `su,dp,...` to factors in column order (`paper`: the paper's four,
    /// `all`: all six); an unknown or repeated name is an error that names
    /// the known ones.
    pub fn parse_list(list: &str) -> Result<Vec<Factor>, String> {
        match list.trim() {
            "paper" => return Ok(Factor::PAPER.to_vec()),
            "all" => return Ok(Factor::ALL.to_vec()),
            _ => {}
        }
        let mut out = Vec::new();
        for n in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let f = Factor::by_name(n).ok_or_else(|| {
                format!(
                    "no factor {n:?} (known: {}; or paper, all)",
                    Factor::ALL.map(|f| f.name()).join(", ")
                )
            })?;
            if out.contains(&f) {
                return Err(format!("factor {n:?} named twice"));
            }
            out.push(f);
        }
        if out.is_empty() {
            return Err("no factors named".into());
        }
        out.sort();
        Ok(out)
    }
}

/// One combination of the optimisations; a factor not varied by a run is
/// off (FFS as the paper's baseline had it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Combo {
    pub su: bool,
    pub dp: bool,
    pub vm: bool,
    pub dh: bool,
    pub io: bool,
    pub gd: bool,
}

/// Dirhash budget of the paper's DH (FreeBSD 4.5's `dirhash_maxmem`).
pub const DIRHASH_PAPER_BUDGET: u64 = 2 * MIB;

impl Combo {
    /// Every optimisation off (the paper's 100%).
    pub const NONE: Combo = Combo {
        su: false,
        dp: false,
        vm: false,
        dh: false,
        io: false,
        gd: false,
    };
    /// The paper's four optimisations on, this project's off.
    pub const EVERY: Combo = Combo {
        su: true,
        dp: true,
        vm: true,
        dh: true,
        io: false,
        gd: false,
    };

    pub fn get(&self, f: Factor) -> bool {
        match f {
            Factor::Su => self.su,
            Factor::Dp => self.dp,
            Factor::Vm => self.vm,
            Factor::Dh => self.dh,
            Factor::Io => self.io,
            Factor::Gd => self.gd,
        }
    }

    pub fn with(mut self, f: Factor, on: bool) -> Combo {
        match f {
            Factor::Su => self.su = on,
            Factor::Dp => self.dp = on,
            Factor::Vm => self.vm = on,
            Factor::Dh => self.dh = on,
            Factor::Io => self.io = on,
            Factor::Gd => self.gd = on,
        }
        self
    }

    /// The paper's 16, from everything off to everything on.
    pub fn all() -> Vec<Combo> {
        Combo::over(&Factor::PAPER)
    }

    /// All 2^k combinations of `factors` (the others off), from everything
    /// off to everything on, the first factor as the highest bit.
    pub fn over(factors: &[Factor]) -> Vec<Combo> {
        let k = factors.len();
        (0..1u32 << k)
            .map(|i| {
                factors.iter().enumerate().fold(Combo::NONE, |c, (j, &f)| {
                    c.with(f, i & (1 << (k - 1 - j)) != 0)
                })
            })
            .collect()
    }

    /// Every factor of `factors` on.
    pub fn every(factors: &[Factor]) -> Combo {
        factors.iter().fold(Combo::NONE, |c, &f| c.with(f, true))
    }

    /// `SU DP VM DH` with `-` for the factors off, then ` IO` and ` GD`
    /// when on.
    pub fn label(&self) -> String {
        let mut s = Factor::PAPER
            .iter()
            .map(|&f| {
                if self.get(f) {
                    f.name().to_uppercase()
                } else {
                    "-".into()
                }
            })
            .collect::<Vec<_>>()
            .join(" ");
        for f in [Factor::Io, Factor::Gd] {
            if self.get(f) {
                s.push(' ');
                s.push_str(&f.name().to_uppercase());
            }
        }
        s
    }

    /// Dirhash's budget under this combination (0: no dirhash): the paper's
    /// 2 MiB, or with GD the cache size (the budget may grow as far as the
    /// memory the buffer cache has).
    fn dirhash_budget(&self, p: &Profile) -> u64 {
        match (self.dh, self.gd) {
            (false, _) => 0,
            (true, false) => DIRHASH_PAPER_BUDGET,
            (true, true) => p.cache_bytes,
        }
    }

    /// Whether the run delivers dirhash low-memory events (with GD).
    pub fn lowmem_events(&self) -> bool {
        self.dh && self.gd
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
                maxmem: self.dirhash_budget(p),
                ..DirhashConfig::default()
            },
            inode_order: if self.io {
                InodeOrder::Offset
            } else {
                InodeOrder::Off
            },
            ..Default::default()
        }
    }

    /// The configuration this combination runs, as recorded with its rows.
    pub fn config(&self, p: &Profile) -> RunConfig {
        let o = self.mount_options(p);
        let n = newfs_params(p);
        RunConfig {
            write_mode: if self.su { "softdep" } else { "normal" }.into(),
            dirpref: if self.dp { "orlov" } else { "traditional" }.into(),
            vmiodir: o.vmiodir,
            dir_pool_bytes: if o.vmiodir {
                None
            } else {
                Some(dir_pool_bytes(p, o.cache_bytes))
            },
            dir_pool_shared_buffers: match dir_space(p, o.cache_bytes) {
                ufs::cache::DirSpace::Shared { buffers } if !o.vmiodir => Some(buffers),
                _ => None,
            },
            dirhash: o.dirhash.enabled,
            dirhash_maxmem: o.dirhash.maxmem,
            dirhash_minsize: o.dirhash.minsize,
            dirhash_lowmem_every_s: if self.lowmem_events() {
                Some(p.sync_every_s)
            } else {
                None
            },
            inode_order: o.inode_order.name().into(),
            inode_order_min: o.inode_order_min,
            cache_bytes: o.cache_bytes,
            readahead: o.readahead,
            bsize: n.bsize,
            fsize: n.fsize,
            density: n.density.unwrap_or_default(),
            maxblkspercg: n.maxblkspercg.unwrap_or_default(),
            fs_bytes: p.fs_bytes,
            disk: p.disk.clone(),
            syncer: p.syncer,
        }
    }
}

/// The full configuration of a run (JSON only; the CSV has the factors).
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunConfig {
    pub write_mode: String,
    pub dirpref: String,
    pub vmiodir: bool,
    /// With vmiodir off, the directory pool's size.
    pub dir_pool_bytes: Option<u64>,
    /// With vmiodir off and the pool shared with the other buffers in use
    /// (FreeBSD 4.5's buffer space), its buffers (`nbuf`).
    pub dir_pool_shared_buffers: Option<u64>,
    pub dirhash: bool,
    pub dirhash_maxmem: u64,
    pub dirhash_minsize: u64,
    /// Modeled seconds between dirhash low-memory events, when delivered.
    pub dirhash_lowmem_every_s: Option<f64>,
    pub inode_order: String,
    pub inode_order_min: u64,
    pub cache_bytes: u64,
    pub readahead: u64,
    pub bsize: u64,
    pub fsize: u64,
    pub density: u64,
    pub maxblkspercg: u64,
    pub fs_bytes: u64,
    pub disk: String,
    /// The modeled syncer: `wheel` or `whole`.
    pub syncer: meter::SyncerModel,
}

/// The workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    Tar,
    Folder,
    Bonnie,
    Andrew,
    Postmark,
    Netnews,
    Build,
    Maildir,
    Largedir,
}

impl Workload {
    pub const ALL: [Workload; 9] = [
        Workload::Tar,
        Workload::Folder,
        Workload::Bonnie,
        Workload::Andrew,
        Workload::Postmark,
        Workload::Netnews,
        Workload::Build,
        Workload::Maildir,
        Workload::Largedir,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Workload::Tar => "tar",
            Workload::Folder => "folder",
            Workload::Bonnie => "bonnie",
            Workload::Andrew => "andrew",
            Workload::Postmark => "postmark",
            Workload::Netnews => "netnews",
            Workload::Build => "build",
            Workload::Maildir => "maildir",
            Workload::Largedir => "largedir",
        }
    }

    pub fn by_name(name: &str) -> Option<Workload> {
        Workload::ALL.into_iter().find(|w| w.name() == name)
    }

    /// The tests (timed phases), in the order they run.
    pub fn tests(self) -> &'static [&'static str] {
        match self {
            Workload::Tar => classic::TAR_TESTS,
            Workload::Folder => classic::FOLDER_TESTS,
            Workload::Bonnie => bonnie::TESTS,
            Workload::Andrew => andrew::TESTS,
            Workload::Postmark => classic::POSTMARK_TESTS,
            Workload::Netnews => netnews::TESTS,
            Workload::Build => build::TESTS,
            Workload::Maildir => seeds::MAILDIR_TESTS,
            Workload::Largedir => seeds::LARGEDIR_TESTS,
        }
    }

    fn run(self, p: &Profile, m: &mut Meter) -> ufs::Result<()> {
        match self {
            Workload::Tar => classic::tar_workload(p, m),
            Workload::Folder => classic::folder_workload(p, m),
            Workload::Bonnie => bonnie::workload(p, m),
            Workload::Andrew => andrew::workload(p, m),
            Workload::Postmark => classic::postmark_workload(p, m),
            Workload::Netnews => netnews::workload(p, m),
            Workload::Build => build::workload(p, m),
            Workload::Maildir => seeds::maildir_workload(p, m),
            Workload::Largedir => seeds::largedir_workload(p, m),
        }
    }
}

/// Every test of `workloads`, in the order they run.
pub fn all_tests(workloads: &[Workload]) -> Vec<&'static str> {
    workloads
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
    pub io: u8,
    pub gd: u8,
    pub run: u32,
    /// Modeled time of the phase and its sync: disk plus CPU.
    pub seconds: f64,
    /// Of which the disk's busy time, and the modeled CPU time.
    pub disk_s: f64,
    pub cpu_s: f64,
    /// Runs of the modeled syncer during the phase.
    pub syncs: u64,
    pub wall_ms: f64,
    /// Device, buffer-cache and dirhash counters of the phase and its sync.
    #[serde(flatten)]
    pub counters: Counters,
    /// The image was fsck clean at the end of the run that held this test.
    pub fsck_clean: bool,
    /// Everything the run was configured with (JSON only).
    pub config: RunConfig,
}

impl Row {
    pub fn combo(&self) -> Combo {
        Combo {
            su: self.su == 1,
            dp: self.dp == 1,
            vm: self.vm == 1,
            dh: self.dh == 1,
            io: self.io == 1,
            gd: self.gd == 1,
        }
    }
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Report {
    pub profile: Profile,
    pub disk: String,
    pub disk_description: String,
    pub cpu_model: cpu::CpuModel,
    pub workloads: Vec<String>,
    /// The factors varied (the others off in every run).
    pub factors: Vec<Factor>,
    pub runs: Vec<Row>,
    pub wall_s: f64,
    /// The modeled element this run changes, if it is an ablation: its
    /// name and what it changes (the report's table of ablations).
    pub ablation: Option<AblationInfo>,
}

/// An ablation as the report names and describes it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct AblationInfo {
    pub name: &'static str,
    pub change: &'static str,
}

impl Report {
    pub fn row(&self, test: &str, c: Combo) -> Option<&Row> {
        self.runs.iter().find(|r| r.test == test && r.combo() == c)
    }

    pub fn fsck_clean(&self) -> bool {
        self.runs.iter().all(|r| r.fsck_clean)
    }
}

/// The CSV header: `test`, the six factors, `run`, the times, the
/// counters of [`Counters::COLUMNS`], `fsck_clean`.
pub fn csv_header() -> String {
    let mut cols = vec!["test"];
    cols.extend(Factor::ALL.map(|f| f.name()));
    cols.extend(["run", "seconds", "disk_s", "cpu_s", "syncs", "wall_ms"]);
    cols.extend(Counters::COLUMNS);
    cols.push("fsck_clean");
    cols.join(",")
}

/// The rows as CSV under [`csv_header`].
pub fn to_csv(r: &Report) -> String {
    let mut s = csv_header();
    s.push('\n');
    for x in &r.runs {
        let mut f: Vec<String> = vec![x.test.clone()];
        f.extend(Factor::ALL.map(|k| (x.combo().get(k) as u8).to_string()));
        f.push(x.run.to_string());
        f.extend([x.seconds, x.disk_s, x.cpu_s].map(|v| v.to_string()));
        f.push(x.syncs.to_string());
        f.push(format!("{:.3}", x.wall_ms));
        f.extend(x.counters.values().map(|v| v.to_string()));
        f.push(x.fsck_clean.to_string());
        s.push_str(&f.join(","));
        s.push('\n');
    }
    s
}

pub(crate) fn invalid(msg: String) -> ufs::Error {
    ufs::Error::new(ufs::ErrorKind::Invalid, msg)
}

/// The paper's era of FFS: 8 KB blocks, 1 KB fragments, an inode per
/// 4 KB, 8 MiB groups; fixed seed and time; the profile's format.
fn newfs_params(p: &Profile) -> NewfsParams {
    NewfsParams {
        format: p.format.ufs,
        endian: p.format.endian,
        bsize: 8192,
        fsize: 1024,
        density: Some(4096),
        maxblkspercg: Some(8192),
        seed: Some(1),
        time: Some(1_020_000_000),
        ..Default::default()
    }
}

/// The modeled drive's buffer (the Deskstar 60GXP's 2 MB), all of it for
/// writes under the `disk-write-cache` ablation.
const WRITE_CACHE_BYTES: u64 = 2 << 20;

/// The directory pool of vmiodir off: FreeBSD 4.5's buffer space for the
/// machine, or its malloc'd twentieth of the cache alone under that
/// ablation.
fn dir_pool_bytes(p: &Profile, cache_bytes: u64) -> u64 {
    if p.ablation == Some(Ablation::VmiodirTwentieth) {
        (cache_bytes / 20).max(64 << 10)
    } else {
        ufs::fs::dir_pool_bytes(cache_bytes)
    }
}

/// Whether the directory pool of vmiodir off is shared with the other
/// buffers (FreeBSD 4.5's buffer space) or theirs alone (two ablations).
fn dir_space(p: &Profile, cache_bytes: u64) -> ufs::cache::DirSpace {
    match p.ablation {
        Some(Ablation::VmiodirTwentieth | Ablation::VmiodirOwnSpace) => ufs::cache::DirSpace::Own,
        _ => ufs::cache::DirSpace::Shared {
            buffers: ufs::fs::dir_pool_buffers(cache_bytes),
        },
    }
}

/// A fresh file system for `combo` on the modeled disk.
fn make_fs(p: &Profile, combo: Combo) -> ufs::Result<(Arc<ModeledDisk<SparseDevice>>, Fs)> {
    let (dev, fs) = crate::modeled_fs(
        &p.disk,
        p.fs_bytes,
        &newfs_params(p),
        combo.mount_options(p),
    )?;
    if p.ablation == Some(Ablation::DiskWriteCache) {
        dev.set_write_cache(Some(WRITE_CACHE_BYTES));
    }
    dev.set_skew(p.disk_skew);
    if !combo.vm {
        let cache = combo.mount_options(p).cache_bytes;
        fs.set_dir_pool(dir_pool_bytes(p, cache), dir_space(p, cache));
    }
    Ok((dev, fs))
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
    let mut m = Meter::new(
        &fs,
        dev.clone(),
        cpu::CpuModel::pentium4_2002(),
        meter::SyncerConfig {
            model: p.syncer,
            every_s: p.sync_every_s,
            buf_daemon: p.buf_daemon,
            asynchronous: p.ablation != Some(Ablation::SyncerWaits),
        },
        combo.lowmem_events(),
        progress,
    );
    m.sync_each_test = p.sync_each_test;
    m.cold_each_test = p.ablation == Some(Ablation::ColdCache);
    workload.run(p, &mut m)?;
    let measured = std::mem::take(&mut m.out);
    drop(m);
    // Between runs: the paper's `sync`, outside every test's time.
    fs.sync()?;
    let end = fs.stats(None, false)?;
    let want = if combo.su { "softdep" } else { "normal" };
    let config = combo.config(p);
    if end.order.mode != want
        || end.vmiodir != combo.vm
        || end.inode_order != config.inode_order
        || end.dirhash_config.maxmem != config.dirhash_maxmem
    {
        return Err(invalid(format!(
            "mounted for {} but the engine runs {} with vmiodir {}, inode order {} and a dirhash budget of {} bytes",
            combo.label(),
            end.order.mode,
            end.vmiodir,
            end.inode_order,
            end.dirhash_config.maxmem
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
            io: combo.io as u8,
            gd: combo.gd as u8,
            run: 0,
            seconds: x.seconds,
            disk_s: x.disk_s,
            cpu_s: x.cpu_s,
            syncs: x.syncs,
            wall_ms: x.wall_ms,
            counters: x.counters,
            fsck_clean: clean,
            config: config.clone(),
        })
        .collect())
}

/// `workloads` under every combination of `factors` (the others off),
/// `p.jobs` runs side by side; rows in workload, then combination order
/// whatever the jobs.
pub fn run_all(
    p: &Profile,
    workloads: &[Workload],
    factors: &[Factor],
    progress: Progress,
) -> ufs::Result<Report> {
    let wall = Instant::now();
    let spec = preset(&p.disk).ok_or_else(|| invalid(format!("no disk model {}", p.disk)))?;
    let mut factors = factors.to_vec();
    factors.sort();
    factors.dedup();
    let combos = Combo::over(&factors);
    let jobs: Vec<(Workload, Combo)> = workloads
        .iter()
        .flat_map(|&w| combos.iter().map(move |&c| (w, c)))
        .collect();
    let total = all_tests(workloads).len() as u64 * combos.len() as u64;
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<std::sync::Mutex<Option<ufs::Result<Vec<Row>>>>> =
        jobs.iter().map(|_| std::sync::Mutex::new(None)).collect();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::scope(|s| {
        for _ in 0..p.jobs.max(1) {
            let tx = tx.clone();
            let (next, jobs, results) = (&next, &jobs, &results);
            s.spawn(move || loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(&(w, c)) = jobs.get(i) else { return };
                let r = run(p, w, c, &mut |test| {
                    let _ = tx.send(format!("{test} [{}]", c.label()));
                });
                let failed = r.is_err();
                *results[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
                if failed {
                    // Stop handing out work; the error is reported below.
                    next.store(jobs.len(), std::sync::atomic::Ordering::Relaxed);
                }
            });
        }
        drop(tx);
        // Progress on this thread, as the workers start each test.
        for (done, msg) in rx.iter().enumerate() {
            progress(done as u64, total, &msg);
        }
    });
    let mut runs = Vec::new();
    for (i, r) in results.into_iter().enumerate() {
        match r.into_inner().unwrap_or_else(|e| e.into_inner()) {
            Some(Ok(rows)) => runs.extend(rows),
            Some(Err(e)) => {
                let (w, c) = jobs[i];
                return Err(ufs::Error::new(
                    e.kind,
                    format!("{} under {}: {}", w.name(), c.label(), e.msg),
                ));
            }
            None => {}
        }
    }
    progress(total, total, "done");
    Ok(Report {
        profile: p.clone(),
        disk: p.disk.clone(),
        disk_description: spec.description.into(),
        cpu_model: cpu::CpuModel::pentium4_2002(),
        workloads: workloads.iter().map(|w| w.name().to_string()).collect(),
        factors,
        runs,
        wall_s: wall.elapsed().as_secs_f64(),
        ablation: p.ablation.map(|a| AblationInfo {
            name: a.name(),
            change: a.describe(),
        }),
    })
}

/// What the workloads' tests share: a run whose rows are checked for what
/// every run must give, and a row by test name.
#[cfg(test)]
pub(crate) mod testing {
    use super::{run, Combo, Profile, Row, Workload};

    /// The rows of `w` under `c`: each of its tests once, in order, with
    /// time on the clock and an fsck-clean image.
    pub(crate) fn checked_rows(p: &Profile, w: Workload, c: Combo) -> Vec<Row> {
        let rows = run(p, w, c, &mut |_| {}).expect("the workload runs");
        let names: Vec<&str> = rows.iter().map(|r| r.test.as_str()).collect();
        assert_eq!(names, w.tests(), "{}", c.label());
        for r in &rows {
            assert!(r.seconds > 0.0, "{} under {}: {r:?}", r.test, c.label());
            assert!(r.fsck_clean, "{} under {}", r.test, c.label());
        }
        rows
    }

    /// The row of `test`.
    pub(crate) fn row<'a>(rows: &'a [Row], test: &str) -> &'a Row {
        rows.iter().find(|r| r.test == test).expect(test)
    }
}
