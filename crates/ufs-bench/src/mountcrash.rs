//! The crash tester through the real mount: the `ufskit mount` daemon under
//! real programs, killed with SIGKILL at a random moment, over and over.
//!
//! One iteration:
//! 1. `ufskit newfs [-U]` makes a fresh sparse image; `ufskit mount -f -o
//!    MODE` serves it (the daemon is this tester's child, so its pid is
//!    known and nothing else is killed); every other iteration with
//!    `syncer=1`, so that kills also land inside background syncs.
//! 2. Load starts inside the mount: `tar -x` of a tree, `cp -a`, `mv`,
//!    `rm -rf` and a second `tar -x` (one shell), with, in turn from one
//!    kill to the next ([`Mix`]): nothing else; a maildir writer with fsync
//!    records (threads of this process: write into `tmp/`, fsync, rename
//!    into `new/`, fsync the directory, later into `cur/`, some removed)
//!    and `stress-ng`'s directory, rename and link stressors; or
//!    `stress-ng`, `fsx` and `fsstress` (when installed). Outside the mount, optionally,
//!    busy loops on every CPU and the kernel's caches dropped every three
//!    seconds.
//! 3. After a random delay the daemon gets SIGKILL; the mount is detached
//!    (`umount -l`); the programs end on ENOTCONN.
//! 4. The image, as the kill left it, is checked:
//!    - `fsck -n` classifies it (clean / preen-only / inconsistent, the
//!      rules of [`crate::crashtest::classify`]: a name on an inode the
//!      maps call free, or past the group's initialised inodes, is
//!      inconsistent);
//!    - it is repaired (`-p` when preen-only, `-y` otherwise) and must
//!      check clean;
//!    - every maildir message whose delivery returned (its fsyncs done)
//!      must be there with its bytes; no directory may hold a name twice;
//!    - the daemon must mount the repaired image again, take a new file
//!      and unmount cleanly, after which `fsck -n` finds nothing.
//!
//! Invariants: an iteration's verdict depends only on the image and the
//! records; a failing image is copied (sparse) to the keep directory before
//! anything repairs it; every child process is reaped before the next
//! iteration starts.
use crate::crashtest::{classify, names_held_twice, read_file, Class};
use crate::Progress;
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use ufs::dev::FileDevice;
use ufs::fsck::{fsck, FsckMode};
use ufs::order::WriteMode;
use ufs::{Fs, MountOptions};

/// What to run.
#[derive(Debug, Clone, Serialize)]
pub struct Config {
    /// The `ufskit` binary whose daemon is tested.
    pub ufskit: PathBuf,
    /// Scratch directory: images, the mountpoint, logs.
    pub work: PathBuf,
    pub modes: Vec<WriteMode>,
    /// `-o barrier=` given to every mount (None: each mode's default).
    pub barrier: Option<ufs::order::Barrier>,
    /// Images made with soft updates on (`newfs -U`), off, or both.
    pub newfs_softupdates: Vec<bool>,
    /// The variant `newfs` makes (UFS1 or UFS2, either byte order).
    #[serde(serialize_with = "variant_name")]
    pub variant: ufs_format::Variant,
    /// Kills per mode and image kind.
    pub iterations: usize,
    /// Size of each image in bytes.
    pub image_bytes: u64,
    /// A tarball of the tree extracted into the mount.
    pub tarball: PathBuf,
    /// The kill comes this many seconds (uniform) after the load starts.
    pub kill_after: (f64, f64),
    /// Busy loops on every CPU and cache drops while the load runs.
    pub busy: bool,
    /// Extra programs run inside the mount when found on PATH.
    pub use_fsx: bool,
    /// The mixes taken in turn, one per kill.
    pub mixes: Vec<Mix>,
    pub seed: u64,
    /// Where failing images are saved, as the kill left them.
    #[serde(skip)]
    pub keep: Option<PathBuf>,
}

fn variant_name<S: serde::Serializer>(v: &ufs_format::Variant, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(v.short_name())
}

/// One kill and what the image showed.
#[derive(Debug, Clone, Serialize)]
pub struct Iteration {
    pub mode: WriteMode,
    pub newfs_softupdates: bool,
    pub index: usize,
    /// What ran besides tar, cp, mv and rm.
    pub mix: Mix,
    /// The kernel's caches were dropped every three seconds.
    pub cache_drops: bool,
    pub kill_after_s: f64,
    pub class: Class,
    /// Findings of `fsck -n` on the image as the kill left it.
    pub findings: Vec<String>,
    /// Findings left after the repair (must be none).
    pub after_repair: Vec<String>,
    /// Messages whose delivery had returned (durable by promise).
    pub records: usize,
    /// Of those, missing or with other bytes.
    pub lost: Vec<String>,
    /// The remount with the daemon, a write and a clean unmount, then
    /// `fsck -n` with no finding: what failed, if anything.
    pub remount: Option<String>,
    /// Programs that ran inside the mount this time.
    pub programs: Vec<String>,
    /// Where the image was saved (failures only).
    pub image: Option<String>,
}

impl Iteration {
    /// Whether the mode's crash guarantee held.
    pub fn ok(&self) -> bool {
        self.class != Class::Inconsistent
            && self.after_repair.is_empty()
            && self.lost.is_empty()
            && self.remount.is_none()
    }
}

/// Counts for one mode and image kind.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    pub mode: String,
    pub newfs_softupdates: bool,
    pub iterations: usize,
    pub clean: usize,
    pub preen_only: usize,
    pub inconsistent: usize,
    pub repair_failed: usize,
    pub fsynced_lost: usize,
    pub remount_failed: usize,
    pub records_checked: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub config: Config,
    pub summaries: Vec<Summary>,
    pub iterations: Vec<Iteration>,
    /// Programs asked for and not found (counted, never silently dropped).
    pub skipped_programs: Vec<String>,
    pub seconds: f64,
}

impl Report {
    /// Kills after which a mode that promises consistency broke it
    /// (async promises nothing and is never judged).
    pub fn failures(&self) -> Vec<&Iteration> {
        self.iterations
            .iter()
            .filter(|i| i.mode != WriteMode::Async && !i.ok())
            .collect()
    }
}

/// Runs every iteration; `progress(done, total, what)`.
pub fn run(cfg: &Config, progress: Progress) -> Result<Report, String> {
    let t0 = Instant::now();
    std::fs::create_dir_all(&cfg.work).map_err(|e| format!("{}: {e}", cfg.work.display()))?;
    if let Some(k) = &cfg.keep {
        std::fs::create_dir_all(k).map_err(|e| format!("{}: {e}", k.display()))?;
    }
    let (programs, skipped) = find_programs(cfg.use_fsx);
    let mut rng = Rng(cfg.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let total = (cfg.modes.len() * cfg.newfs_softupdates.len() * cfg.iterations) as u64;
    let mut iterations = Vec::new();
    let mut summaries = Vec::new();
    let mut done = 0;
    for &mode in &cfg.modes {
        for &su in &cfg.newfs_softupdates {
            let mut s = Summary {
                mode: mode.name().to_string(),
                newfs_softupdates: su,
                ..Default::default()
            };
            for index in 0..cfg.iterations {
                progress(
                    done,
                    total,
                    &format!("{} {}", mode.name(), if su { "newfs -U" } else { "newfs" }),
                );
                let delay = cfg.kill_after.0 + rng.unit() * (cfg.kill_after.1 - cfg.kill_after.0);
                let it = one(cfg, mode, su, index, delay, &programs, rng.next())?;
                s.iterations += 1;
                match it.class {
                    Class::Clean => s.clean += 1,
                    Class::PreenOnly => s.preen_only += 1,
                    Class::Inconsistent => s.inconsistent += 1,
                }
                s.repair_failed += usize::from(!it.after_repair.is_empty());
                s.fsynced_lost += usize::from(!it.lost.is_empty());
                s.remount_failed += usize::from(it.remount.is_some());
                s.records_checked += it.records;
                iterations.push(it);
                done += 1;
            }
            summaries.push(s);
        }
    }
    progress(done, total, "done");
    Ok(Report {
        config: cfg.clone(),
        summaries,
        iterations,
        skipped_programs: skipped,
        seconds: t0.elapsed().as_secs_f64(),
    })
}

/// Programs run inside the mount besides tar/cp/mv/rm and the maildir
/// writer: stress-ng's file-system stressors (a dependency of the test
/// suite), and xfstests' fsx and fsstress when installed.
fn find_programs(use_fsx: bool) -> (Vec<String>, Vec<String>) {
    let mut found = Vec::new();
    let mut skipped = Vec::new();
    let mut wanted = vec!["stress-ng"];
    if use_fsx {
        wanted.extend(["fsx", "fsstress"]);
    }
    for p in wanted {
        if which(p).is_some() {
            found.push(p.to_string());
        } else {
            skipped.push(p.to_string());
        }
    }
    (found, skipped)
}

fn which(prog: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|d| d.join(prog))
        .find(|p| p.is_file())
}

/// xorshift64*: the delays and the maildir writer's bytes.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// What runs in the mount besides tar, cp, mv and rm, in turn from one
/// kill to the next: fsyncs make the daemon write everything, so the
/// orders of writes a full cache leaves are reached only by the bulk mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mix {
    /// Nothing else: the cache fills and the buffer daemon's order rules.
    Bulk,
    /// The maildir writer (its fsynced messages checked) and stress-ng.
    Mail,
    /// stress-ng, fsx and fsstress (whichever are installed).
    Stress,
}

impl Mix {
    pub const ALL: [Mix; 3] = [Mix::Bulk, Mix::Mail, Mix::Stress];

    pub fn parse(s: &str) -> Option<Mix> {
        Mix::ALL.into_iter().find(|m| m.name() == s)
    }

    pub fn name(self) -> &'static str {
        match self {
            Mix::Bulk => "bulk",
            Mix::Mail => "mail",
            Mix::Stress => "stress",
        }
    }
}

/// The bytes of message `n` of a run seeded `seed`.
fn message(seed: u64, n: u64) -> Vec<u8> {
    let mut r = Rng((seed ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1);
    let len = 200 + (r.next() % 12_000) as usize;
    let mut v = format!("From: tester\nMessage: {n}\n\n").into_bytes();
    while v.len() < len {
        v.extend_from_slice(&r.next().to_le_bytes());
    }
    v.truncate(len);
    v
}

/// A message whose delivery returned: it must be under one of `names`.
#[derive(Debug, Clone)]
struct MailRecord {
    n: u64,
    names: Vec<String>,
}

/// Runs a command, failing with its output when it fails.
fn run_cmd(cmd: &mut Command, what: &str) -> Result<(), String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{what}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{what}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

fn dev_of(p: &Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(p).ok().map(|m| m.dev())
}

/// The `-o` list of the daemon for `mode`. Every other iteration (odd
/// `index`) flushes every second (`syncer=1`), so that kills land inside
/// the syncer's rounds too: with the default 30 s the load never lives to
/// see a background sync.
fn mount_opts(cfg: &Config, mode: WriteMode, index: usize) -> String {
    let mut o = match cfg.barrier {
        Some(b) => format!("{},barrier={}", mode.name(), b.name()),
        None => mode.name().to_string(),
    };
    if index % 2 == 1 {
        o.push_str(",syncer=1");
    }
    o
}

/// Starts `ufskit mount -f` and waits until the mountpoint is a new file
/// system.
fn start_daemon(
    cfg: &Config,
    opts: &str,
    img: &Path,
    mnt: &Path,
    log: &Path,
) -> Result<Child, String> {
    let parent = dev_of(mnt.parent().unwrap_or(Path::new("/")));
    let logf = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let mut child = Command::new(&cfg.ufskit)
        .args(["mount", "-f", "-o", opts])
        .arg(img)
        .arg(mnt)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(logf)
        .spawn()
        .map_err(|e| format!("{}: {e}", cfg.ufskit.display()))?;
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(30) {
        if let Ok(Some(st)) = child.try_wait() {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            return Err(format!("ufskit mount exited ({st}): {}", text.trim()));
        }
        if dev_of(mnt).is_some_and(|d| Some(d) != parent) {
            return Ok(child);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    Err("ufskit mount: the mount did not appear within 30 s".to_string())
}

/// Detaches the mount at `mnt` (the daemon is gone or going).
fn detach(mnt: &Path) {
    let _ = nix::mount::umount2(mnt, nix::mount::MntFlags::MNT_DETACH);
}

/// The maildir writer: delivers until `stop` or its first error (the
/// daemon's death shows as ENOTCONN).
fn mail_writer(
    root: PathBuf,
    seed: u64,
    first: u64,
    records: Arc<Mutex<Vec<MailRecord>>>,
    stop: Arc<AtomicBool>,
) {
    let fsync_dir = |d: &Path| std::fs::File::open(d).and_then(|f| f.sync_all());
    let tmp = root.join("tmp");
    let new = root.join("new");
    let cur = root.join("cur");
    let mut n = first;
    let r: std::io::Result<()> = (|| {
        while !stop.load(Ordering::Relaxed) {
            let name = format!("{n}.M{n}.tester");
            let body = message(seed, n);
            let t = tmp.join(&name);
            let mut f = std::fs::File::create(&t)?;
            f.write_all(&body)?;
            f.sync_all()?;
            drop(f);
            let nn = new.join(&name);
            std::fs::rename(&t, &nn)?;
            fsync_dir(&new)?;
            records
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(MailRecord {
                    n,
                    names: vec![format!("new/{name}")],
                });
            // Every third message, the one delivered three before is
            // read: moved into cur with a flag; one in five of those is
            // then deleted.
            let k = n - first;
            if k >= 3 && k.is_multiple_of(3) {
                let old = n - 3;
                let oname = format!("{old}.M{old}.tester");
                let to = format!("cur/{oname}:2,S");
                let set_names = |names: Vec<String>| {
                    let mut recs = records.lock().unwrap_or_else(|p| p.into_inner());
                    if let Some(r) = recs.iter_mut().find(|r| r.n == old) {
                        r.names = names;
                    }
                };
                set_names(vec![format!("new/{oname}"), to.clone()]);
                std::fs::rename(new.join(&oname), root.join(&to))?;
                fsync_dir(&cur)?;
                set_names(vec![to.clone()]);
                if old.is_multiple_of(5) {
                    records
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .retain(|r| r.n != old);
                    std::fs::remove_file(root.join(&to))?;
                }
            }
            n += 1;
            // A delivery every 20 ms a writer: fsyncs often enough to
            // matter, not so often that nothing ever waits in memory.
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    })();
    let _ = r;
}

/// Programs inside the mount, each a child process of its own.
fn start_load(
    cfg: &Config,
    mnt: &Path,
    programs: &[String],
    seed: u64,
) -> Result<Vec<(String, Child)>, String> {
    let mut out = Vec::new();
    let sh = format!(
        "mkdir -p '{m}/t' && tar -xf '{t}' -C '{m}/t' && cp -a '{m}/t' '{m}/c' && mv '{m}/c' '{m}/moved' \
         && rm -rf '{m}/t' && mkdir '{m}/t2' && tar -xf '{t}' -C '{m}/t2' && rm -rf '{m}/moved'",
        m = mnt.display(),
        t = cfg.tarball.display()
    );
    // Each program in a process group of its own, so that reaping it
    // reaches the processes it forked too (stress-ng's and fsstress's
    // workers, tar under sh).
    let spawn = |name: &str, cmd: &mut Command| -> Result<(String, Child), String> {
        use std::os::unix::process::CommandExt;
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .map(|c| (name.to_string(), c))
            .map_err(|e| format!("{name}: {e}"))
    };
    out.push(spawn("tar/cp/mv/rm", Command::new("sh").args(["-c", &sh]))?);
    for p in programs {
        match p.as_str() {
            "stress-ng" => {
                let d = mnt.join("sng");
                std::fs::create_dir_all(&d).map_err(|e| format!("{}: {e}", d.display()))?;
                out.push(spawn(
                    "stress-ng",
                    Command::new("stress-ng")
                        .args([
                            "--dir",
                            "1",
                            "--rename",
                            "1",
                            "--link",
                            "1",
                            "--timeout",
                            "60s",
                            "--temp-path",
                        ])
                        .arg(&d),
                )?);
            }
            "fsx" => {
                out.push(spawn(
                    "fsx",
                    Command::new("fsx")
                        .args(["-q", "-N", "1000000", "-S"])
                        .arg(seed.to_string())
                        .arg(mnt.join("fsx.file")),
                )?);
            }
            "fsstress" => {
                let d = mnt.join("fss");
                std::fs::create_dir_all(&d).map_err(|e| format!("{}: {e}", d.display()))?;
                out.push(spawn(
                    "fsstress",
                    Command::new("fsstress")
                        .args(["-n", "1000000", "-p", "2", "-s"])
                        .arg(seed.to_string())
                        .arg("-d")
                        .arg(&d),
                )?);
            }
            _ => {}
        }
    }
    Ok(out)
}

/// Busy loops on every CPU, and (with `drops`) the kernel's caches dropped
/// every three seconds (the image's pages and the mount's), until `stop`.
/// (The daemon's own cache is left alone: dropping it writes everything
/// first, a sync the daemon would not otherwise do.)
fn start_busy(stop: Arc<AtomicBool>, drops: bool) -> Vec<std::thread::JoinHandle<()>> {
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut v = Vec::new();
    for _ in 0..n {
        let stop = stop.clone();
        v.push(std::thread::spawn(move || {
            let mut x = 0u64;
            while !stop.load(Ordering::Relaxed) {
                for i in 0..100_000u64 {
                    x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
                }
            }
        }));
    }
    if !drops {
        return v;
    }
    v.push(std::thread::spawn(move || {
        let mut last = Instant::now();
        while !stop.load(Ordering::Relaxed) {
            if last.elapsed() >= Duration::from_secs(3) {
                let _ = std::fs::write("/proc/sys/vm/drop_caches", "3");
                last = Instant::now();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }));
    v
}

/// Ends the load: every process of every program's group gets SIGKILL
/// (after the kill of the daemon they fail with ENOTCONN, but a worker
/// that starts over from a path after the next mount appears at the same
/// place would otherwise work in that mount and keep it busy), and is
/// waited for. Returns the groups that still had processes after 30 s.
fn reap(children: Vec<(String, Child)>) -> Vec<String> {
    use nix::sys::signal::{killpg, Signal};
    use nix::unistd::Pid;
    let mut left = Vec::new();
    for (name, mut c) in children {
        let pgid = Pid::from_raw(c.id() as i32);
        let _ = killpg(pgid, Signal::SIGKILL);
        let _ = c.wait();
        // Orphaned members of the group are children of init now: wait
        // until none is left (signal 0 finds the group while it has any).
        let t0 = Instant::now();
        while killpg(pgid, None).is_ok() {
            if t0.elapsed() > Duration::from_secs(30) {
                left.push(name.clone());
                break;
            }
            let _ = killpg(pgid, Signal::SIGKILL);
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    left
}

/// One kill: see the module comment.
fn one(
    cfg: &Config,
    mode: WriteMode,
    su: bool,
    index: usize,
    delay: f64,
    programs: &[String],
    seed: u64,
) -> Result<Iteration, String> {
    let img = cfg.work.join("image");
    let mnt = cfg.work.join("mnt");
    let log = cfg.work.join("daemon.log");
    let _ = std::fs::remove_file(&img);
    std::fs::create_dir_all(&mnt).map_err(|e| format!("{}: {e}", mnt.display()))?;
    let mut newfs = Command::new(&cfg.ufskit);
    newfs.arg("newfs");
    newfs.arg(if su { "-U" } else { "--no-soft-updates" });
    newfs.args(cfg.variant.newfs_args());
    newfs.args(["-s", &cfg.image_bytes.to_string()]).arg(&img);
    run_cmd(newfs.stdout(Stdio::null()), "ufskit newfs")?;
    let mut daemon = start_daemon(cfg, &mount_opts(cfg, mode, index), &img, &mnt, &log)?;
    let mix = cfg.mixes[index % cfg.mixes.len().max(1)];
    let records = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    if mix == Mix::Mail {
        let maildir = mnt.join("Maildir");
        for d in ["tmp", "new", "cur"] {
            std::fs::create_dir_all(maildir.join(d)).map_err(|e| format!("maildir: {e}"))?;
        }
        for w in 0..2u64 {
            let (root, recs, stop) = (maildir.clone(), records.clone(), stop.clone());
            writers.push(std::thread::spawn(move || {
                mail_writer(root, seed, w * 1_000_000, recs, stop)
            }));
        }
    }
    let extra: Vec<String> = match mix {
        Mix::Bulk => Vec::new(),
        Mix::Mail => programs
            .iter()
            .filter(|p| *p == "stress-ng")
            .cloned()
            .collect(),
        Mix::Stress => programs.to_vec(),
    };
    let load = start_load(cfg, &mnt, &extra, seed)?;
    // Cache drops slow the daemon's reads and writes a lot (the image's
    // pages go too), so that a full cache is rarely reached before the
    // kill: every other four kills have them.
    let drops = cfg.busy && (index / 4) % 2 == 1;
    let busy = if cfg.busy {
        start_busy(stop.clone(), drops)
    } else {
        Vec::new()
    };
    std::thread::sleep(Duration::from_secs_f64(delay));
    let _ = daemon.kill();
    let _ = daemon.wait();
    detach(&mnt);
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        let _ = w.join();
    }
    for b in busy {
        let _ = b.join();
    }
    let mut ran: Vec<String> = vec!["tar/cp/mv/rm".into()];
    if mix == Mix::Mail {
        ran.push("maildir writer".into());
    }
    ran.extend(extra);
    let stuck = reap(load);
    if !stuck.is_empty() {
        return Err(format!(
            "processes of {} did not end 30 s after SIGKILL (stuck in the dead mount?)",
            stuck.join(", ")
        ));
    }
    let records = std::mem::take(&mut *records.lock().unwrap_or_else(|p| p.into_inner()));
    let mut it = check(
        cfg, mode, su, index, delay, &img, &mnt, &log, records, seed, ran,
    )?;
    it.mix = mix;
    it.cache_drops = drops;
    Ok(it)
}

/// Step 4 of the module comment.
#[allow(clippy::too_many_arguments)]
fn check(
    cfg: &Config,
    mode: WriteMode,
    su: bool,
    index: usize,
    delay: f64,
    img: &Path,
    mnt: &Path,
    log: &Path,
    records: Vec<MailRecord>,
    seed: u64,
    programs: Vec<String>,
) -> Result<Iteration, String> {
    let mut it = Iteration {
        mode,
        newfs_softupdates: su,
        index,
        mix: Mix::Bulk,
        cache_drops: false,
        kill_after_s: delay,
        class: Class::Inconsistent,
        findings: Vec::new(),
        after_repair: Vec::new(),
        records: records.len(),
        lost: Vec::new(),
        remount: None,
        programs,
        image: None,
    };
    let open = |writable: bool| {
        FileDevice::open(img, writable).map_err(|e| format!("{}: {e}", img.display()))
    };
    match fsck(&open(false)?, FsckMode::Check) {
        Ok(rep) => {
            it.class = classify(mode, &rep.findings);
            it.findings = rep
                .findings
                .iter()
                .map(|f| format!("{}: {}", f.pass, f.message))
                .collect();
        }
        Err(e) => it.findings.push(format!("fsck -n: {e}")),
    }
    if it.class == Class::Inconsistent {
        it.image = keep(cfg, img, mode, su, index);
    }
    if it.class != Class::Clean {
        let how = if it.class == Class::PreenOnly {
            FsckMode::Preen
        } else {
            FsckMode::Yes
        };
        if let Err(e) = fsck(&open(true)?, how) {
            it.after_repair.push(format!("fsck {how:?}: {e}"));
        }
        match fsck(&open(false)?, FsckMode::Check) {
            Ok(r) => it.after_repair.extend(
                r.findings
                    .iter()
                    .map(|f| format!("{}: {}", f.pass, f.message)),
            ),
            Err(e) => it.after_repair.push(format!("fsck -n after repair: {e}")),
        }
    }
    // The promises, on the repaired image, read-only.
    match Fs::open(
        Box::new(open(false)?),
        MountOptions {
            read_only: true,
            force: true,
            ..Default::default()
        },
    ) {
        Ok(fs) => {
            for r in &records {
                let want = message(seed, r.n);
                let ok = r
                    .names
                    .iter()
                    .any(|n| read_file(&fs, &format!("Maildir/{n}")).is_ok_and(|d| d == want));
                if !ok {
                    it.lost
                        .push(format!("message {} (as {})", r.n, r.names.join(" or ")));
                }
            }
            it.lost.extend(names_held_twice(&fs));
        }
        Err(e) => it.lost.push(format!("read-only open after repair: {e}")),
    }
    if !it.ok() && it.image.is_none() {
        it.image = keep(cfg, img, mode, su, index);
    }
    it.remount = remount(cfg, mode, img, mnt, log).err();
    Ok(it)
}

/// The repaired image through the daemon again: a new file, a listing,
/// a clean unmount, then `fsck -n` must find nothing.
fn remount(
    cfg: &Config,
    mode: WriteMode,
    img: &Path,
    mnt: &Path,
    log: &Path,
) -> Result<(), String> {
    let mut d = start_daemon(cfg, &mount_opts(cfg, mode, 0), img, mnt, log)?;
    let r = (|| -> Result<(), String> {
        let f = mnt.join("after-crash");
        std::fs::write(&f, b"written after the crash\n").map_err(|e| format!("write: {e}"))?;
        let n = count_entries(mnt).map_err(|e| format!("listing: {e}"))?;
        if n == 0 {
            return Err("listing: nothing found".to_string());
        }
        Ok(())
    })();
    let um = umount_and_wait(cfg, mnt, &mut d);
    r?;
    um?;
    let dev = FileDevice::open(img, false).map_err(|e| e.to_string())?;
    let rep = fsck(&dev, FsckMode::Check).map_err(|e| format!("fsck -n after remount: {e}"))?;
    if let Some(f) = rep.findings.first() {
        return Err(format!("fsck -n after remount: {}: {}", f.pass, f.message));
    }
    Ok(())
}

/// `ufskit umount` of a daemon's mount, then the daemon's exit. A mount
/// still busy is retried for 30 s; after that (or a daemon that does not
/// exit within 60 s of its unmount) the mount is detached and the daemon
/// killed, and the failure reported: the tester never waits forever.
fn umount_and_wait(cfg: &Config, mnt: &Path, d: &mut Child) -> Result<(), String> {
    let t0 = Instant::now();
    let mut um = run_cmd(
        Command::new(&cfg.ufskit).arg("umount").arg(mnt),
        "ufskit umount",
    );
    while um.is_err() && t0.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(500));
        um = run_cmd(
            Command::new(&cfg.ufskit).arg("umount").arg(mnt),
            "ufskit umount",
        );
    }
    if um.is_err() {
        detach(mnt);
    }
    let t1 = Instant::now();
    loop {
        match d.try_wait() {
            Ok(Some(_)) | Err(_) => break,
            Ok(None) if t1.elapsed() > Duration::from_secs(60) => {
                let _ = d.kill();
                let _ = d.wait();
                detach(mnt);
                um = um.and(Err(
                    "the daemon did not exit within 60 s of its unmount".to_string()
                ));
                break;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
    um
}

fn count_entries(dir: &Path) -> std::io::Result<u64> {
    let mut n = 0;
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d)? {
            let e = e?;
            n += 1;
            if e.file_type()?.is_dir() {
                todo.push(e.path());
            }
        }
    }
    Ok(n)
}

/// Saves the image (sparse) as the kill left it.
fn keep(cfg: &Config, img: &Path, mode: WriteMode, su: bool, index: usize) -> Option<String> {
    let dir = cfg.keep.as_ref()?;
    let dst = dir.join(format!(
        "{}-{}-{index}.img",
        mode.name(),
        if su { "U" } else { "noU" }
    ));
    let ok = Command::new("cp")
        .arg("--sparse=always")
        .arg(img)
        .arg(&dst)
        .status()
        .is_ok_and(|s| s.success());
    ok.then(|| dst.display().to_string())
}
