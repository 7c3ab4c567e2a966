//! Power cuts through the real mount (`ufskit crashtest --mount
//! --powercut`): the `ufskit mount` daemon serves an image with every
//! device write and flush logged (`-o record=FILE`, `ufs_sim::writelog`)
//! while real programs run in it; afterwards the images a power cut could
//! have left are built from the image as it was before the mount and the
//! log (every prefix, or an even sample of them, and reorderings and
//! subsets of the writes between flushes: `ufs_sim::crash`), and each is
//! checked.
//!
//! The programs, in order, in one mount:
//! 1. `tar -x` of a tree (no fsync: the structure must survive);
//! 2. a maildir writer: each message written into `tmp/`, fsynced, renamed
//!    into `new/`, the directory fsynced;
//! 3. a git-like object writer: each object written under a temporary
//!    name, fsynced, renamed into its fan-out directory (made on demand),
//!    the directory fsynced;
//! 4. a database-like file: 64 pages of 4 KiB written and fsynced, then
//!    pages rewritten in place, an fsync after each;
//! 5. `rm -rf` of half the tree.
//!
//! After each fsync returns, the tester notes the log's length: every write
//! before the last flush in that much of the log is what the fsync made
//! durable.
//!
//! Each crash state must:
//! - be repaired completely by `fsck -p`, after which `fsck -n` finds
//!   nothing (with `barrier=write`, which promises only what fsync makes
//!   durable, a state preen cannot repair is counted, not failed, and
//!   repaired with `fsck -y`);
//! - hold every fsynced message and object whose fsync's writes are in it,
//!   with its bytes, and every database page as last fsynced or as written
//!   later;
//! - open in the engine and read back.
//!
//! Invariants: a verdict depends only on the base image, the log and the
//! records; failing states are saved (sparse) to the keep directory before
//! anything repairs them.
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use ufs::dev::MemDevice;
use ufs::fsck::{fsck, FsckMode};
use ufs::order::{Barrier, WriteMode};
use ufs::{Fs, MountOptions};
use ufs_sim::crash::{CrashState, RecordingDevice};
use ufs_sim::writelog::ReadLog;

/// What to run.
#[derive(Debug, Clone, Serialize)]
pub struct Config {
    pub ufskit: PathBuf,
    pub work: PathBuf,
    /// Write modes with their barrier.
    pub modes: Vec<(WriteMode, Barrier)>,
    /// Image size in bytes.
    pub image_bytes: u64,
    /// The tree `tar -x` extracts.
    pub tree: PathBuf,
    /// Prefix states per mode (evenly spaced, the empty and full ones
    /// always among them).
    pub prefixes: usize,
    /// Reordered states per mode.
    pub reorders: usize,
    /// Messages, objects and page rewrites of the fsync writers.
    pub fsyncs: usize,
    pub seed: u64,
    pub keep: Option<PathBuf>,
}

/// One mode's results.
#[derive(Debug, Clone, Serialize)]
pub struct ModeResult {
    pub mode: String,
    pub barrier: String,
    pub writes: usize,
    pub flushes: usize,
    pub fsync_records: usize,
    pub states: usize,
    /// States fsck -n found clean before any repair.
    pub clean: usize,
    /// States fsck -p repaired completely.
    pub preen_repaired: usize,
    /// States preen could not repair (a failure unless barrier=write).
    pub preen_failed: usize,
    /// States missing fsynced data (always a failure).
    pub fsync_lost: usize,
    /// What went wrong, first few.
    pub failures: Vec<String>,
    pub kept: Vec<String>,
}

impl ModeResult {
    /// Whether the mode kept its promise.
    pub fn ok(&self) -> bool {
        self.fsync_lost == 0 && (self.preen_failed == 0 || self.barrier == "write")
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub config: Config,
    pub modes: Vec<ModeResult>,
}

impl Report {
    pub fn ok(&self) -> bool {
        self.modes.iter().all(ModeResult::ok)
    }

    pub fn table(&self) -> String {
        let mut s = String::from(
            "mode     barrier  writes flushes fsyncs  states  clean  preen-ok  preen-failed  fsync-lost  verdict\n",
        );
        for m in &self.modes {
            s += &format!(
                "{:<8} {:<8} {:>6} {:>7} {:>6} {:>7} {:>6} {:>9} {:>13} {:>11}  {}\n",
                m.mode,
                m.barrier,
                m.writes,
                m.flushes,
                m.fsync_records,
                m.states,
                m.clean,
                m.preen_repaired,
                m.preen_failed,
                m.fsync_lost,
                if m.ok() { "ok" } else { "BROKEN" }
            );
            for f in &m.failures {
                s += &format!("    {f}\n");
            }
        }
        s
    }
}

/// A file an fsync made durable: its path in the image, its bytes, and
/// the writes that fsync made durable.
struct Durable {
    path: String,
    data: Vec<u8>,
    durable: usize,
}

/// A page of the database file as written: page, version, and the writes
/// its fsync made durable.
struct PageVersion {
    page: usize,
    version: u64,
    durable: usize,
}

const PAGE: usize = 4096;
const PAGES: usize = 64;

fn page_bytes(page: usize, version: u64) -> Vec<u8> {
    let mut v = vec![0u8; PAGE];
    for (i, b) in v.iter_mut().enumerate() {
        *b = (page as u64 * 31 + version * 7 + i as u64 / 64) as u8;
    }
    v[..16].copy_from_slice(&(version.to_le_bytes().repeat(2)));
    v
}

fn run_cmd(cmd: &mut Command, what: &str) -> Result<(), String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{what}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{what} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

fn mode_name(m: WriteMode) -> &'static str {
    match m {
        WriteMode::Normal => "normal",
        WriteMode::Sync => "sync",
        WriteMode::Async => "async",
        WriteMode::Softdep => "softdep",
    }
}

/// Runs every mode; `progress` is told (states done, states in all) for
/// each mode's checks.
pub fn run(cfg: &Config, progress: &mut dyn FnMut(&str, u64, u64)) -> Result<Report, String> {
    std::fs::create_dir_all(&cfg.work).map_err(|e| format!("{}: {e}", cfg.work.display()))?;
    let tarball = cfg.work.join("tree.tar");
    let parent = cfg.tree.parent().unwrap_or(Path::new("/"));
    let name = cfg
        .tree
        .file_name()
        .ok_or_else(|| format!("{}: names no directory", cfg.tree.display()))?;
    run_cmd(
        Command::new("tar")
            .arg("-C")
            .arg(parent)
            .arg("-cf")
            .arg(&tarball)
            .arg(name),
        "tar -c of the tree",
    )?;
    let mut modes = Vec::new();
    for &(mode, barrier) in &cfg.modes {
        modes.push(one_mode(cfg, mode, barrier, &tarball, progress)?);
    }
    Ok(Report {
        config: cfg.clone(),
        modes,
    })
}

fn one_mode(
    cfg: &Config,
    mode: WriteMode,
    barrier: Barrier,
    tarball: &Path,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<ModeResult, String> {
    let img = cfg.work.join("image");
    let log = cfg.work.join("writes.log");
    let mnt = cfg.work.join("mnt");
    let _ = std::fs::remove_file(&img);
    std::fs::create_dir_all(&mnt).map_err(|e| format!("{}: {e}", mnt.display()))?;
    let su = mode == WriteMode::Softdep;
    run_cmd(
        Command::new(&cfg.ufskit)
            .arg("newfs")
            .arg(if su { "-U" } else { "--no-soft-updates" })
            .args(["-s", &cfg.image_bytes.to_string()])
            .arg(&img)
            .stdout(Stdio::null()),
        "ufskit newfs",
    )?;
    let base = std::fs::read(&img).map_err(|e| format!("{}: {e}", img.display()))?;
    let barrier_name = match barrier {
        Barrier::Flush => "flush",
        Barrier::Write => "write",
    };
    let opts = format!(
        "{},barrier={barrier_name},record={}",
        mode_name(mode),
        log.display()
    );
    run_cmd(
        Command::new(&cfg.ufskit)
            .args(["mount", "-o", &opts])
            .arg(&img)
            .arg(&mnt),
        "ufskit mount",
    )?;
    let programs = (|| -> Result<(Vec<Durable>, Vec<PageVersion>), String> {
        run_cmd(
            Command::new("tar")
                .arg("-C")
                .arg(&mnt)
                .arg("-xf")
                .arg(tarball),
            "tar -x",
        )?;
        let r = fsync_writers(cfg, &mnt, &log).map_err(|e| format!("fsync writers: {e}"))?;
        let top = cfg.tree.file_name().map(|n| mnt.join(n));
        if let Some(t) = top.filter(|t| t.is_dir()) {
            // Half the tree: every other entry at its top.
            let mut names: Vec<PathBuf> = std::fs::read_dir(&t)
                .map_err(|e| e.to_string())?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .collect();
            names.sort();
            for p in names.iter().step_by(2) {
                run_cmd(Command::new("rm").arg("-rf").arg(p), "rm -rf")?;
            }
        }
        Ok(r)
    })();
    let um = run_cmd(
        Command::new(&cfg.ufskit).arg("umount").arg(&mnt),
        "ufskit umount",
    );
    let (files, pages) = programs?;
    um?;

    let read = ReadLog::read(&log).map_err(|e| e.to_string())?;
    let writes = read
        .requests
        .iter()
        .filter(|r| matches!(r, ufs_sim::crash::Logged::Write { .. }))
        .count();
    let flushes = read.requests.len() - writes;
    let durable_of = |len: u64| read.durable_at(len);
    let files: Vec<Durable> = files
        .into_iter()
        .map(|mut f| {
            f.durable = durable_of(f.durable as u64);
            f
        })
        .collect();
    let pages: Vec<PageVersion> = pages
        .into_iter()
        .map(|mut p| {
            p.durable = durable_of(p.durable as u64);
            p
        })
        .collect();
    let rec = RecordingDevice::<MemDevice>::replay(base, read.requests);
    let states = rec.states(cfg.prefixes, cfg.reorders, cfg.seed);
    let mut res = ModeResult {
        mode: mode_name(mode).to_string(),
        barrier: barrier_name.to_string(),
        writes,
        flushes,
        fsync_records: files.len() + pages.len(),
        states: states.len(),
        clean: 0,
        preen_repaired: 0,
        preen_failed: 0,
        fsync_lost: 0,
        failures: Vec::new(),
        kept: Vec::new(),
    };
    let label = format!("{} {barrier_name}", mode_name(mode));
    for (i, s) in states.iter().enumerate() {
        progress(&label, i as u64, states.len() as u64);
        let dev = rec.image(s).map_err(|e| e.to_string())?;
        let verdict = check_state(&dev, s, &files, &pages);
        let failed = match &verdict {
            Verdict::Ok { clean } => {
                res.preen_repaired += 1;
                res.clean += usize::from(*clean);
                None
            }
            Verdict::PreenFailed(why) => {
                res.preen_failed += 1;
                (barrier != Barrier::Write).then(|| format!("preen: {why}"))
            }
            Verdict::Lost(why) => {
                res.fsync_lost += 1;
                Some(format!("fsynced data lost: {why}"))
            }
        };
        if let Some(why) = failed {
            let what = format!("{} state at write {}: {why}", s.kind, s.crash_point);
            if res.failures.len() < 5 {
                res.failures.push(what);
            }
            if let Some(dir) = &cfg.keep {
                if res.kept.len() < 5 {
                    if let Ok(p) = keep(dir, &label, s, &rec) {
                        res.kept.push(p);
                    }
                }
            }
        }
    }
    progress(&label, states.len() as u64, states.len() as u64);
    Ok(res)
}

enum Verdict {
    Ok { clean: bool },
    PreenFailed(String),
    Lost(String),
}

fn check_state(
    dev: &MemDevice,
    s: &CrashState,
    files: &[Durable],
    pages: &[PageVersion],
) -> Verdict {
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let before = match fsck(dev, FsckMode::Check) {
            Ok(r) => r,
            Err(e) => return Verdict::PreenFailed(format!("fsck -n could not run: {e}")),
        };
        let clean = before.findings.is_empty();
        let mut preen_ok = true;
        let mut why = String::new();
        if !clean {
            match fsck(dev, FsckMode::Preen) {
                Ok(r) if r.clean && r.findings.iter().all(|f| f.fixed) => {}
                Ok(r) => {
                    preen_ok = false;
                    why = r
                        .findings
                        .iter()
                        .find(|f| !f.fixed)
                        .map(|f| format!("{}: {}", f.pass, f.message))
                        .unwrap_or_else(|| "not left clean".into());
                    // Repaired fully to look at the data anyway.
                    let _ = fsck(dev, FsckMode::Yes);
                }
                Err(e) => return Verdict::PreenFailed(format!("fsck -p could not run: {e}")),
            }
            match fsck(dev, FsckMode::Check) {
                Ok(r) if r.findings.is_empty() => {}
                Ok(r) => {
                    return Verdict::PreenFailed(format!(
                        "still damaged after repair: {}",
                        r.findings[0].message
                    ))
                }
                Err(e) => return Verdict::PreenFailed(e.to_string()),
            }
        }
        if let Err(e) = durable_data(dev, s, files, pages) {
            return Verdict::Lost(e);
        }
        if preen_ok {
            Verdict::Ok { clean }
        } else {
            Verdict::PreenFailed(why)
        }
    }));
    caught.unwrap_or_else(|_| Verdict::PreenFailed("a panic while checking".into()))
}

/// Every fsynced file and page the state must hold.
fn durable_data(
    dev: &MemDevice,
    s: &CrashState,
    files: &[Durable],
    pages: &[PageVersion],
) -> Result<(), String> {
    let copy = MemDevice::from_vec(dev.snapshot());
    let fs = Fs::open(
        Box::new(copy),
        MountOptions {
            read_only: true,
            ..Default::default()
        },
    )
    .map_err(|e| format!("the repaired image does not open: {e}"))?;
    let read = |path: &str| -> Result<Vec<u8>, String> {
        let ino = fs
            .resolve(Path::new(path))
            .map_err(|e| format!("{path}: {e}"))?;
        let size = fs.getattr(ino).map_err(|e| e.to_string())?.size;
        let mut out = Vec::new();
        while (out.len() as u64) < size {
            let b = fs
                .read(ino, out.len() as u64, 1 << 20)
                .map_err(|e| format!("{path}: {e}"))?;
            if b.is_empty() {
                break;
            }
            out.extend_from_slice(&b);
        }
        Ok(out)
    };
    for f in files.iter().filter(|f| f.durable <= s.durable) {
        let got = read(&f.path)?;
        if got != f.data {
            return Err(format!(
                "{}: {} bytes, not the {} fsynced",
                f.path,
                got.len(),
                f.data.len()
            ));
        }
    }
    // The database: each page as last fsynced in this state, or as written
    // after that.
    if pages.iter().any(|p| p.durable <= s.durable) {
        let db = read("db")?;
        for page in 0..PAGES {
            let versions: Vec<&PageVersion> = pages.iter().filter(|p| p.page == page).collect();
            let Some(last) = versions.iter().rposition(|p| p.durable <= s.durable) else {
                continue;
            };
            let got = db
                .get(page * PAGE..(page + 1) * PAGE)
                .ok_or_else(|| format!("db: {} bytes, page {page} missing", db.len()))?;
            if !versions[last..]
                .iter()
                .any(|v| got == page_bytes(page, v.version).as_slice())
            {
                return Err(format!(
                    "db page {page}: not version {} (fsynced) nor a later one",
                    versions[last].version
                ));
            }
        }
    }
    Ok(())
}

/// The programs that fsync, inside the mount; each record's `durable`
/// holds the log's length when its fsync returned (turned into a write
/// count by the caller).
fn fsync_writers(
    cfg: &Config,
    mnt: &Path,
    log: &Path,
) -> std::io::Result<(Vec<Durable>, Vec<PageVersion>)> {
    let loglen = || std::fs::metadata(log).map(|m| m.len() as usize);
    let fsync_dir = |d: &Path| std::fs::File::open(d).and_then(|f| f.sync_all());
    let mut files = Vec::new();
    let mut pages = Vec::new();
    let maildir = mnt.join("Maildir");
    for d in ["tmp", "new", "cur"] {
        std::fs::create_dir_all(maildir.join(d))?;
    }
    fsync_dir(&maildir)?;
    let objects = mnt.join("objects");
    std::fs::create_dir_all(&objects)?;
    fsync_dir(mnt)?;
    // The database file, whole, then fsynced.
    let db_path = mnt.join("db");
    let db = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(&db_path)?;
    use std::os::unix::fs::FileExt;
    for p in 0..PAGES {
        db.write_all_at(&page_bytes(p, 0), (p * PAGE) as u64)?;
    }
    db.sync_all()?;
    fsync_dir(mnt)?;
    let len = loglen()?;
    for p in 0..PAGES {
        pages.push(PageVersion {
            page: p,
            version: 0,
            durable: len,
        });
    }
    let mut x = cfg.seed | 1;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for n in 0..cfg.fsyncs {
        // A delivery.
        let name = format!("{n}.M{n}.powercut");
        let body: Vec<u8> = (0..(200 + next() % 9000))
            .map(|i| (i ^ n as u64 ^ cfg.seed) as u8)
            .collect();
        let t = maildir.join("tmp").join(&name);
        let mut f = std::fs::File::create(&t)?;
        f.write_all(&body)?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&t, maildir.join("new").join(&name))?;
        fsync_dir(&maildir.join("new"))?;
        files.push(Durable {
            path: format!("Maildir/new/{name}"),
            data: body,
            durable: loglen()?,
        });
        // An object: temporary name, fsync, rename into its fan-out
        // directory, fsync that.
        let id = format!("{:016x}", next());
        let data: Vec<u8> = (0..(100 + next() % 3000))
            .map(|i| ((i * 13) ^ next()) as u8)
            .collect();
        let tmp = objects.join(format!("tmp_{id}"));
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&data)?;
        f.sync_all()?;
        drop(f);
        let fan = objects.join(&id[..2]);
        if !fan.exists() {
            std::fs::create_dir(&fan)?;
            fsync_dir(&objects)?;
        }
        std::fs::rename(&tmp, fan.join(&id[2..]))?;
        fsync_dir(&fan)?;
        files.push(Durable {
            path: format!("objects/{}/{}", &id[..2], &id[2..]),
            data,
            durable: loglen()?,
        });
        // A page of the database rewritten in place, fsynced.
        let page = (next() % PAGES as u64) as usize;
        let version = n as u64 + 1;
        db.write_all_at(&page_bytes(page, version), (page * PAGE) as u64)?;
        db.sync_all()?;
        pages.push(PageVersion {
            page,
            version,
            durable: loglen()?,
        });
    }
    Ok((files, pages))
}

/// Saves a failing state's image (sparse) under `dir`.
fn keep(
    dir: &Path,
    label: &str,
    s: &CrashState,
    rec: &RecordingDevice<MemDevice>,
) -> Result<String, String> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let p = dir.join(format!(
        "powercut-{}-{}-{}.img",
        label.replace(' ', "-"),
        s.kind,
        s.crash_point
    ));
    let img = rec.image(s).map_err(|e| e.to_string())?;
    let bytes = img.snapshot();
    let f = std::fs::File::create(&p).map_err(|e| e.to_string())?;
    f.set_len(bytes.len() as u64).map_err(|e| e.to_string())?;
    use std::os::unix::fs::FileExt;
    for (i, chunk) in bytes.chunks(1 << 16).enumerate() {
        if chunk.iter().any(|&b| b != 0) {
            f.write_all_at(chunk, (i << 16) as u64)
                .map_err(|e| e.to_string())?;
        }
    }
    Ok(p.display().to_string())
}
