//! Thin FUSE adapter over the ufskit engine: [`serve`] mounts an image and
//! serves it until it is unmounted; [`umount`] unmounts and waits for the
//! daemon to release the image.
//!
//! Invariants:
//! - The mount's type is `fuse.ufskit` and its source (fsname) the
//!   absolute image path, as for a kernel file system on a device: this is
//!   what mount(8), findmnt and df show, how mount(8) finds the helpers for
//!   `-o remount` and umount (`mount.fuse.ufskit`, `umount.fuse.ufskit`),
//!   and how [`umount`] recognises our mounts and finds the image.
//! - The image stays locked (`Fs::open_path`'s flock) from before the mount
//!   until after `Fs::unmount` has flushed and marked it clean; releasing
//!   the lock is the daemon's very last act, so "lock free" means "done".
//! - SIGINT/SIGTERM/SIGHUP never kill the daemon uncleanly: they are
//!   blocked in every serving thread and turned into an unmount by a
//!   dedicated signal thread; the session then ends and `serve` flushes.
//!   (SIGUSR1, handled by the same thread, drops the engine's clean cache.)
mod affinity;
pub mod bare_names;
pub mod confine;
pub mod control;
pub mod cpulatency;
mod devfuse;
mod doorbell;
mod fresh_bind;
pub mod handoff;
mod mountinfo;
pub mod pressure;
mod reaper;
pub mod requests;
pub mod service;
pub mod uring;

pub use devfuse::UfsFuse;
pub use mountinfo::MountEntry;

use fuser::{MountOption, SessionACL};
use nix::sys::signal::{SigSet, SigmaskHow, Signal};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use service::log;

/// The subtype of every ufskit mount: its type is `fuse.ufskit`.
pub const SUBTYPE: &str = "ufskit";

/// The source prefix of mounts made by builds before the source was the
/// image path alone (still recognised, so that they can be unmounted).
const OLD_FSNAME_PREFIX: &str = "ufskit:";

/// How long [`umount`] waits for the daemon to release the image.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(60);

/// The largest WRITE the kernel may send (and so the payload buffers).
pub(crate) const MAX_WRITE: u32 = 1 << 20;

/// How long [`serve`] waits for a new mount to become visible.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone)]
pub struct MountConfig {
    pub image: PathBuf,
    pub mountpoint: PathBuf,
    pub opts: ufs::MountOptions,
    /// Let other users access the mount (needs root or `user_allow_other`).
    pub allow_other: bool,
    /// Request-handling threads (0 is taken as 1).
    pub threads: usize,
    /// Kernel writeback caching of file data (faster; ENOSPC shows at
    /// fsync/close rather than write).
    pub writeback: bool,
    /// Serve extended attributes (`-o xattr=on|off`; on by default).
    pub xattrs: bool,
    /// Serve and have the kernel enforce POSIX ACLs (`-o acl=on|off`; on
    /// by default, needs `xattrs`).
    pub acls: bool,
    /// READDIRPLUS (`-o readdirplus=auto|on|off`; auto by default).
    pub readdirplus: ReaddirPlus,
    /// Zero-message opendir, the kernel caching listings
    /// (`-o dircache=on|off`; on by default).
    pub dircache: bool,
    /// Birth times through statx (`-o btime=on|off`; off by default): on,
    /// the kernel asks the daemon (FUSE_STATX) at the first statx of each
    /// file that wants the birth time, which Rust's `metadata()` always
    /// does; off, FUSE_STATX is refused and the kernel serves statx from
    /// its cache, without a birth time.
    pub btime: bool,
    /// Seconds between background flushes of dirty blocks (0: never). The
    /// kernel does not pass `sync(2)` on to FUSE servers, so this bounds
    /// what a crash can lose, as FreeBSD's syncer does.
    pub sync_interval: u64,
    /// Watch the kernel's memory-pressure figures and give dirhash memory
    /// back when they say memory is short (`-o lowmem=on|off`).
    pub lowmem_watch: bool,
    /// Move each request thread to the CPU its client last ran on
    /// (`-o affinity=follow|off`); see `affinity.rs`.
    pub follow_clients: bool,
    /// Hold idle CPUs polling while requests flow (`-o cpulatency=auto`;
    /// off by default: machine-wide); see `cpulatency.rs`.
    pub cpu_latency: bool,
    /// Ring threads poll between requests while they flow on a quiet
    /// machine (`-o spin=auto|on|off`); see `handoff.rs`.
    pub spin: handoff::SpinMode,
    /// Ring threads share their clients' CPUs in the idle scheduling class
    /// while requests flow on a quiet machine (`-o share=auto|off`); see
    /// `handoff.rs`.
    pub share: bool,
    /// FUSE over io_uring (`-o uring=auto|on|off`).
    pub uring: UringMode,
    /// A modeled spinning disk between the image and the engine
    /// (`-o disk=MODEL`, an experiment), and whether it sleeps its service
    /// times (`-o disk_sleep=on`).
    pub disk: Option<ufs_sim::model::DiskSpec>,
    pub disk_sleep: bool,
    /// Log every device write and flush to this file (`-o record=FILE`;
    /// `ufs_sim::writelog`), for the power-cut tester.
    pub record: Option<PathBuf>,
    /// The nice value the daemon's threads run at (`-o nice=N`, -10 by
    /// default; None: as started). See [`set_nice`].
    pub nice: Option<i32>,
    /// The mount flags the kernel enforces (`dev`, `suid`, `noexec`, ...).
    pub kernel: KernelFlags,
    /// Mount as type `fuse` rather than `fuse.ufskit` (`-o fstype=fuse`),
    /// for test suites that compare the type with `fuse` (xfstests with
    /// FSTYP=fuse). mount(8) then finds no helper by the type: a remount
    /// must name it (`mount -t fuse.ufskit -o remount,ro DIR`).
    pub plain_type: bool,
    /// The user the daemon runs as once the mount answers
    /// (`-o daemon_user=`; `nobody` for a root mount by default); see
    /// `confine.rs`.
    pub daemon_user: confine::DaemonUser,
    /// Landlock and seccomp on the daemon once mounted (`-o sandbox=on|off`,
    /// on by default); see `confine.rs`.
    pub sandbox: bool,
}

/// The flags of the mount itself, which the kernel enforces: what
/// mount(8)'s generic options ask for. Without `dev` and `suid` a mount is
/// `nodev,nosuid`, as libfuse's are (an image from elsewhere may hold
/// device nodes and setuid programs); mount(8) run by root passes `dev,suid`
/// through `mount.fuse3` unless told otherwise, as for a kernel file system.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KernelFlags {
    pub dev: bool,
    pub suid: bool,
    pub noexec: bool,
    pub noatime: bool,
    pub dirsync: bool,
}

impl KernelFlags {
    /// The mount(2) flags these ask for (MS_NOSUID without `suid`...).
    fn ms_flags(&self) -> nix::mount::MsFlags {
        use nix::mount::MsFlags;
        let mut f = MsFlags::empty();
        for (on, flag) in [
            (!self.suid, MsFlags::MS_NOSUID),
            (!self.dev, MsFlags::MS_NODEV),
            (self.noexec, MsFlags::MS_NOEXEC),
            (self.noatime, MsFlags::MS_NOATIME),
            (self.dirsync, MsFlags::MS_DIRSYNC),
        ] {
            if on {
                f |= flag;
            }
        }
        f
    }

    fn mount_options(&self) -> Vec<MountOption> {
        let mut v = Vec::new();
        let mut flag = |on: bool, o: MountOption| {
            if on {
                v.push(o);
            }
        };
        flag(self.dev, MountOption::Dev);
        flag(self.suid, MountOption::Suid);
        flag(self.noexec, MountOption::NoExec);
        flag(self.noatime, MountOption::NoAtime);
        flag(self.dirsync, MountOption::DirSync);
        v
    }
}

/// When the kernel reads directories with their entries' attributes
/// (READDIRPLUS) instead of names alone (`-o readdirplus=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReaddirPlus {
    /// The kernel decides per directory (FUSE_READDIRPLUS_AUTO): plus for
    /// a directory's first batch and after lookups in it.
    Auto,
    /// Always: no LOOKUP after a listing, but every entry's inode is read.
    On,
    /// Never: names and types only, a LOOKUP for each name used after.
    Off,
}

/// Whether requests travel through per-CPU io_uring rings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UringMode {
    /// When the kernel offers it (the fuse module's `enable_uring`
    /// parameter is on); the parameter is left as it is.
    Auto,
    /// Always: as root, turns the module's `enable_uring` parameter on if
    /// it is off (a machine-wide setting, asked for by this option), and
    /// the mount fails when the kernel does not grant io_uring.
    On,
    /// Never: `/dev/fuse` only.
    Off,
}

/// The fuse module's switch for FUSE-over-io_uring (Linux 6.14+).
const ENABLE_URING: &str = "/sys/module/fuse/parameters/enable_uring";

/// Whether the kernel will offer io_uring at the next INIT. Only `-o
/// uring=on` turns the module's switch on (root): it is machine-wide
/// state, if a harmless one (it only lets servers ask for io_uring), and a
/// default changes none.
fn kernel_offers_uring(mode: UringMode) -> bool {
    match std::fs::read_to_string(ENABLE_URING) {
        Ok(v) if v.trim() == "Y" || v.trim() == "1" => true,
        Ok(_) if mode == UringMode::On => {
            if std::fs::write(ENABLE_URING, "Y").is_ok() {
                log("turned on FUSE-over-io_uring in the kernel (fuse.enable_uring=Y), as -o uring=on asks");
                true
            } else {
                false
            }
        }
        Ok(_) => {
            log("FUSE over io_uring is off in this kernel (fuse.enable_uring=N): requests go through /dev/fuse, slower; -o uring=on, or Y written to /sys/module/fuse/parameters/enable_uring, turns it on for the whole machine");
            false
        }
        Err(_) => false,
    }
}

/// The kernel's read-ahead for this mount, in KiB: one request's worth
/// ([`MAX_WRITE`]), so a sequential reader's read-ahead travels in 1 MiB
/// requests instead of the 128 KiB the kernel gives a FUSE mount.
const KERNEL_READAHEAD_KB: u64 = MAX_WRITE as u64 >> 10;

/// Raises the read-ahead of the mount's own backing device info (each
/// FUSE mount has one, `/sys/class/bdi/MAJOR:MINOR`, as `blockdev --setra`
/// sets a disk's) to [`KERNEL_READAHEAD_KB`] if it is lower. It concerns
/// this mount alone. Needs root; otherwise nothing changes. Measured: a
/// cold 1 GiB sequential read 760 MB/s with 128 KiB, 950 MB/s with 1 MiB
/// (medians of 3, 2026-11-28).
fn raise_kernel_readahead(dev: u64) {
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let path = format!("/sys/class/bdi/{major}:{minor}/read_ahead_kb");
    let now: u64 = match std::fs::read_to_string(&path) {
        Ok(v) => v.trim().parse().unwrap_or(0),
        Err(_) => return,
    };
    if now < KERNEL_READAHEAD_KB {
        let _ = std::fs::write(&path, KERNEL_READAHEAD_KB.to_string());
    }
}

/// Gives the calling thread, and so every thread it starts afterwards,
/// the nice value `n` (Linux keeps one per thread; `serve` calls this
/// before it starts any). A FUSE daemon does the work the kernel would do
/// in its clients' own time, and each request is a wake-up the client
/// waits for: at nice 0 on a machine whose CPUs are busy, every wake-up
/// queues behind the other programs' time slices. At -10 (the default)
/// `tar -x` of /usr/include on a busy machine took 1.36-1.64 s instead of
/// 1.87-2.26 s (docs/DESIGN.md, "Daemon priority"). Lowering a nice value
/// needs root (CAP_SYS_NICE); without it the mount says so and goes on.
pub fn set_nice(n: i32) {
    let now = rustix::process::getpriority_process(None).unwrap_or(0);
    if n == now {
        return;
    }
    if let Err(e) = rustix::process::setpriority_process(None, n) {
        log(format_args!(
            "nice {n}: {e}; the daemon runs at nice {now} (lowering it needs root)"
        ));
    }
}

/// What an idle mount keeps of its buffer cache: a mount nobody used for a
/// whole syncer interval gives the rest of its clean blocks back (the
/// cache limit is what a busy mount may hold, not what an idle one
/// should).
const IDLE_CACHE_BYTES: u64 = 64 << 20;

/// Flushes the engine's dirty blocks every `interval` seconds, a round of
/// writes per hold of the engine lock (`Fs::sync_background`: requests go
/// on between rounds); after an interval without a request, trims the
/// clean cache to [`IDLE_CACHE_BYTES`].
struct Syncer {
    bell: Arc<ufs::order::cleanup::SyncerBell>,
    thread: Option<JoinHandle<()>>,
}

impl Syncer {
    /// Every `interval` seconds, and at once when a writer finds the
    /// soft-updates state past its bound (`ufs::order::cleanup`: the
    /// writer rings the file system's syncer bell instead of writing
    /// everything itself).
    fn start(fs: Arc<ufs::Fs>, interval: u64, requests: Arc<requests::Requests>) -> Syncer {
        let bell = fs.syncer_bell();
        // A read-only mount may be remounted read-write: the syncer runs,
        // and skips its rounds while the engine is read-only.
        if interval == 0 {
            return Syncer { bell, thread: None };
        }
        bell.attach();
        let b = bell.clone();
        let thread = std::thread::Builder::new()
            .name("ufs-syncer".into())
            .spawn(move || {
                let mut seen = requests.snapshot().total;
                let mut last = Instant::now();
                let every = Duration::from_secs(interval);
                loop {
                    let wake = b.wait_for_work(last, every);
                    if wake == ufs::order::cleanup::Wake::Stop {
                        return;
                    }
                    if fs.is_read_only() {
                        last = Instant::now();
                        continue;
                    }
                    if let Err(e) = fs.sync_background() {
                        log(format_args!("background sync: {e}"));
                    }
                    if wake == ufs::order::cleanup::Wake::Hurry {
                        continue;
                    }
                    last = Instant::now();
                    let now = requests.snapshot().total;
                    if now == seen {
                        let freed = fs.trim_cache(IDLE_CACHE_BYTES);
                        if freed > 0 {
                            log(format_args!(
                                "idle for {interval} s: gave {} MiB of cached blocks back",
                                freed >> 20
                            ));
                        }
                    }
                    seen = now;
                }
            })
            .ok();
        if thread.is_none() {
            bell.detach();
        }
        Syncer { bell, thread }
    }

    fn stop(mut self) {
        self.bell.stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.bell.detach();
    }
}

/// Mounts and serves until the file system is unmounted (by `umount`,
/// `fusermount3 -u`, or SIGINT/SIGTERM/SIGHUP, which unmount cleanly), then
/// flushes with `Fs::unmount` (sets `fs_clean`) and returns.
///
/// Opens the image with `ufs::Fs::open_path`, which holds an exclusive
/// flock for the life of the `Fs`. `on_ready` is called once the mount is
/// live (the kernel accepted it and a stat of the mountpoint shows the new
/// file system).
///
/// Signals: SIGINT, SIGTERM, SIGHUP (unmount) and SIGUSR1 (drop clean
/// cached blocks) are blocked in the calling thread (and so in every
/// thread `serve` starts) and received by a signal thread.
/// Call `serve` from the main thread before starting other threads, so
/// that no thread with the default disposition can receive them; the
/// previous signal mask is restored before returning.
pub fn serve(cfg: &MountConfig, on_ready: impl FnOnce()) -> Result<(), String> {
    // A wrong daemon_user is an error before anything is opened.
    let ids = cfg.daemon_user.resolve()?;
    if let Some(n) = cfg.nice {
        set_nice(n);
    }
    // `disk.img:p2` names a partition: the file is what is canonicalized
    // (and locked); the name keeps its partition.
    let (file, partition) = ufs::dev::partition::split_spec(&cfg.image);
    let file = std::fs::canonicalize(&file).map_err(|e| format!("{}: {e}", file.display()))?;
    let image = match &partition {
        Some(p) => PathBuf::from(format!("{}:{p}", file.display())),
        None => file,
    };
    let mountpoint = std::fs::canonicalize(&cfg.mountpoint)
        .map_err(|e| format!("mount point {}: {e}", cfg.mountpoint.display()))?;
    let before = std::fs::metadata(&mountpoint)
        .map_err(|e| format!("mount point {}: {e}", mountpoint.display()))?;
    if !before.is_dir() {
        return Err(format!(
            "mount point {} is not a directory",
            mountpoint.display()
        ));
    }
    // A second mount on a mount point would hide the first, and one
    // umount would then take both away: refuse, as mount(8) users expect.
    if let Some(e) = mountinfo::read_self()?
        .iter()
        .rev()
        .find(|e| e.mount_point == mountpoint)
    {
        return Err(format!(
            "{} is already a mount point (of {}, {}); unmount it first",
            mountpoint.display(),
            e.source,
            e.fstype
        ));
    }
    let image_str = image
        .to_str()
        .ok_or_else(|| format!("image path {} is not valid UTF-8", image.display()))?
        .to_string();
    await_finishing_daemon(&image);
    let fs = ufs::Fs::open_path_layered(&image, cfg.opts.clone(), |dev| {
        let dev: Box<dyn ufs::dev::BlockDevice> = match &cfg.record {
            Some(path) => Box::new(ufs_sim::writelog::WriteLogDevice::new(dev, path)?),
            None => dev,
        };
        Ok(match &cfg.disk {
            Some(spec) => Box::new(ufs_sim::model::ModeledDisk::new(
                dev,
                spec.clone(),
                cfg.disk_sleep,
            )?),
            None => dev,
        })
    })
    .map_err(|e| {
        // Engine messages about the image usually name it already.
        if e.msg.contains(image_str.as_str()) {
            e.msg
        } else {
            format!("{}: {e}", image.display())
        }
    })?;
    let read_only = cfg.opts.read_only || fs.is_read_only();
    if fs.is_read_only() && !cfg.opts.read_only {
        log(format_args!(
            "{}: file system was not cleanly unmounted; mounted read-only (run fsck, or mount with force)",
            image.display()
        ));
    }
    let fs = Arc::new(fs);

    let served = serve_fs(
        &fs,
        cfg,
        ids,
        &image_str,
        &mountpoint,
        read_only,
        &before,
        on_ready,
    );

    // The session is over: no kernel request can reach the engine any more.
    // A session that panicked may have left an operation half done: write
    // nothing more, leave the image marked unclean.
    if let Err(e) = &served {
        if e.contains("panicked") {
            fs.fail("the FUSE session panicked");
        }
    }
    let flushed = fs
        .unmount()
        .map_err(|e| format!("{}: flushing at unmount: {e}", image.display()));
    if let Some(d) = fs.damage_seen() {
        log(format_args!(
            "{}: damage met during this mount ({d}); left marked for fsck",
            image.display()
        ));
    }
    match Arc::try_unwrap(fs) {
        Ok(fs) => drop(fs), // releases the image lock
        Err(_) => log("internal: file system still referenced after the session ended"),
    }
    served.and(flushed)
}

/// Unmounts `mountpoint` (umount2 as root, else `fusermount3 -u`), then
/// waits (at most 60 s) until the daemon has flushed and released the
/// image lock, so fsck can run right after.
pub fn umount(mountpoint: &Path) -> Result<(), String> {
    umount_with(mountpoint, false)
}

/// As [`umount`]; `lazy` detaches the mount at once (`umount -l`): the
/// daemon writes everything and releases the image when the last open
/// file in it is closed, so nothing is waited for.
pub fn umount_with(mountpoint: &Path, lazy: bool) -> Result<(), String> {
    let mp = mountinfo::resolve_mountpoint(mountpoint)?;
    let entries = mountinfo::read_self()?;
    let Some(entry) = entries.iter().rev().find(|e| e.mount_point == mp) else {
        return Err(format!("{} is not a mount point", mp.display()));
    };
    let Some(image) = ufskit_image(entry) else {
        return Err(format!(
            "{} is not a ufskit mount (it is a {} mount of {})",
            mp.display(),
            entry.fstype,
            entry.source
        ));
    };
    if lazy {
        return detach(&mp);
    }
    unmount_path(&mp, false)?;
    // Mounted elsewhere too (`mount_again`): the daemon goes on serving.
    if image_is_mounted(&image) {
        return Ok(());
    }
    wait_for_release(&ufs::dev::partition::split_spec(&image).0, RELEASE_TIMEOUT)
}

/// `mount -o remount,...` of the ufskit mount at `mountpoint`: the kernel's
/// flags of the mount (read-only, `nosuid`, `nodev`, `noexec`, access
/// times) change with mount(2)'s MS_REMOUNT, the engine's state through
/// the daemon's control socket. Going read-only, the kernel goes first
/// (it refuses while a file is open for writing, and writes back what it
/// caches), then the engine writes everything and marks the file system
/// clean; going read-write, the engine first marks it in use. A step that
/// fails undoes the one before. Root only: mount(2) is.
pub fn remount(
    mountpoint: &Path,
    read_only: bool,
    kernel: KernelFlags,
    atime: ufs::Atime,
) -> Result<(), String> {
    use nix::mount::MsFlags;
    let mp = mountinfo::resolve_mountpoint(mountpoint)?;
    let entries = mountinfo::read_self()?;
    let Some(entry) = entries.iter().rev().find(|e| e.mount_point == mp) else {
        return Err(format!("{} is not a mount point", mp.display()));
    };
    if ufskit_image(entry).is_none() {
        return Err(format!(
            "{} is not a ufskit mount (it is a {} mount of {})",
            mp.display(),
            entry.fstype,
            entry.source
        ));
    }
    if !is_root() {
        return Err("remounting needs root (mount(2) changes the mount's flags)".into());
    }
    let mut flags = MsFlags::MS_REMOUNT | kernel.ms_flags();
    flags |= match atime {
        ufs::Atime::Never => MsFlags::MS_NOATIME,
        ufs::Atime::Strict => MsFlags::MS_STRICTATIME,
        ufs::Atime::Relatime => MsFlags::MS_RELATIME,
    };
    let kernel_remount = |ro: bool| {
        let f = if ro {
            flags | MsFlags::MS_RDONLY
        } else {
            flags
        };
        nix::mount::mount(None::<&str>, &mp, None::<&str>, f, None::<&str>).map_err(|e| {
            if e == nix::errno::Errno::EBUSY {
                format!(
                    "cannot remount {} read-only: a file in it is open for writing",
                    mp.display()
                )
            } else {
                format!("cannot remount {}: {}", mp.display(), e.desc())
            }
        })
    };
    // The daemon listens at the mount point it mounted; a second mount of
    // the same image (`mount_again`) reaches it through the first's.
    let control_at = if control::socket_path(0, &mp).exists() {
        mp.clone()
    } else {
        let image = ufskit_image(entry);
        entries
            .iter()
            .find(|e| ufskit_image(e) == image && control::socket_path(0, &e.mount_point).exists())
            .map(|e| e.mount_point.clone())
            .unwrap_or_else(|| mp.clone())
    };
    let engine = |ro: bool| {
        let atime = match atime {
            ufs::Atime::Never => "never",
            ufs::Atime::Strict => "strict",
            ufs::Atime::Relatime => "relatime",
        };
        control::query(
            &control_at,
            &control::Request::Remount {
                read_only: ro,
                atime: atime.into(),
            },
        )
        .map(|_| ())
        .map_err(|e| format!("cannot remount {}: {e}", mp.display()))
    };
    if read_only {
        kernel_remount(true)?;
        if let Err(e) = engine(true) {
            let _ = kernel_remount(false);
            return Err(e);
        }
    } else {
        engine(false)?;
        if let Err(e) = kernel_remount(false) {
            let _ = engine(true);
            return Err(e);
        }
    }
    Ok(())
}

/// umount(8) returns as soon as the kernel lets go of the mount point
/// (the kernel waits for a FUSE daemon only for block-device mounts, and
/// umount(8) looks for a helper by the type statfs gives, `fuse`, not
/// `fuse.ufskit`), while the daemon still writes and holds the image. A
/// mount, fsck or tunefs right after it waits for that daemon to finish,
/// at most a minute, as it would for a kernel file system's unmount: when
/// no mount visible here shows `image` and something holds its lock.
/// (A process that holds it for longer, another fsck, is then reported
/// busy by the open that follows.)
pub fn await_finishing_daemon(image: &Path) {
    if image_is_mounted(image) {
        return;
    }
    let _ = wait_for_release(&ufs::dev::partition::split_spec(image).0, RELEASE_TIMEOUT);
}

/// A second mount of an image a ufskit daemon already serves, as Linux
/// makes a second mount of a device: the same file system seen at a second
/// place (a bind mount of the first; xfstests generic/732). Only a mount
/// of the same image and partition served by root's daemon is taken (a
/// user's FUSE mount may name any source); the second place gets the
/// flags asked for and every restriction the first has (`nosuid`,
/// `nodev`, `noexec`, `ro`). Ok(false) when no mount serves the image.
/// Root only (mount(2)); the daemon, its control socket, `ufskit stats`
/// and remounts stay with the first mount point.
pub fn mount_again(
    image: &Path,
    dir: &Path,
    read_only: bool,
    kernel: KernelFlags,
) -> Result<bool, String> {
    use nix::mount::{mount, MsFlags};
    let file = ufs::dev::partition::split_spec(image).0;
    let entries = mountinfo::read_self()?;
    let same_file: Vec<&MountEntry> = entries
        .iter()
        .filter(|e| ufskit_image(e).is_some_and(|i| ufs::dev::partition::split_spec(&i).0 == file))
        .collect();
    let Some(first) = same_file.first() else {
        return Ok(false);
    };
    let busy = |why: &str| {
        Err(format!(
            "{} is in use: {} is mounted on {} ({why})",
            image.display(),
            first.source,
            first.mount_point.display()
        ))
    };
    let Some(first) = same_file
        .iter()
        .find(|e| ufskit_image(e).is_some_and(|i| i == image))
    else {
        return busy("another partition of the same file");
    };
    if first.fuse_user() != Some(0) || !control::socket_path(0, &first.mount_point).exists() {
        return busy("not by root's ufskit daemon");
    }
    if entries.iter().any(|e| e.mount_point == dir) {
        return Err(format!(
            "{} is already a mount point; unmount it first",
            dir.display()
        ));
    }
    if !is_root() {
        return Err(format!(
            "{} is already mounted on {}; a second mount of it needs root (a bind mount)",
            image.display(),
            first.mount_point.display()
        ));
    }
    let none = None::<&str>;
    // As a fresh mount: in no peer group of the first mount's.
    match fresh_bind::mount_clone_private(&first.mount_point, dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::Unsupported => {
            mount(Some(&first.mount_point), dir, none, MsFlags::MS_BIND, none).map_err(|e| {
                format!(
                    "cannot mount {} on {}: {}",
                    image.display(),
                    dir.display(),
                    e.desc()
                )
            })?
        }
        Err(e) => {
            return Err(format!(
                "cannot mount {} on {}: {e}",
                image.display(),
                dir.display()
            ))
        }
    }
    // The flags of this mount (a bind takes none of its own): as asked,
    // and never fewer restrictions than the first mount has.
    let here = KernelFlags {
        suid: kernel.suid && !first.has("nosuid"),
        dev: kernel.dev && !first.has("nodev"),
        noexec: kernel.noexec || first.has("noexec"),
        dirsync: false,
        ..kernel
    };
    let mut f = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | here.ms_flags();
    if read_only || first.has("ro") {
        f |= MsFlags::MS_RDONLY;
    }
    if let Err(e) = mount(none, dir, none, f, none) {
        let _ = nix::mount::umount2(dir, nix::mount::MntFlags::MNT_DETACH);
        return Err(format!(
            "cannot set the flags of {}: {}",
            dir.display(),
            e.desc()
        ));
    }
    Ok(true)
}

/// The ufskit mount at `mountpoint`, as /proc/self/mountinfo shows it.
pub fn mount_entry(mountpoint: &Path) -> Result<MountEntry, String> {
    let mp = mountinfo::resolve_mountpoint(mountpoint)?;
    let entries = mountinfo::read_self()?;
    let Some(e) = entries.into_iter().rev().find(|e| e.mount_point == mp) else {
        return Err(format!("{} is not a mount point", mp.display()));
    };
    if ufskit_image(&e).is_none() {
        return Err(format!(
            "{} is not a ufskit mount (it is a {} mount of {})",
            mp.display(),
            e.fstype,
            e.source
        ));
    }
    Ok(e)
}

/// Whether a ufskit mount visible here serves `image`.
fn image_is_mounted(image: &Path) -> bool {
    let file = ufs::dev::partition::split_spec(image).0;
    list_mounts().is_ok_and(|v| {
        v.iter()
            .any(|(_, i)| ufs::dev::partition::split_spec(i).0 == file)
    })
}

/// The image of a ufskit mount, or `None` for any other mount.
pub fn ufskit_image(e: &MountEntry) -> Option<PathBuf> {
    if e.fstype == format!("fuse.{SUBTYPE}") {
        return Some(PathBuf::from(&e.source));
    }
    // `-o fstype=fuse`: a plain FUSE mount of an image whose daemon
    // listens on the mount point's control socket.
    if e.fstype == "fuse" && e.source.starts_with('/') {
        let me = nix::unistd::geteuid().as_raw();
        if [me, 0]
            .iter()
            .any(|&uid| control::socket_path(uid, &e.mount_point).exists())
        {
            return Some(PathBuf::from(&e.source));
        }
    }
    if e.fstype != "fuse" && !e.fstype.starts_with("fuse.") {
        return None;
    }
    e.source.strip_prefix(OLD_FSNAME_PREFIX).map(PathBuf::from)
}

/// All ufskit mounts visible to this process: (mount point, image).
pub fn list_mounts() -> Result<Vec<(PathBuf, PathBuf)>, String> {
    Ok(mountinfo::read_self()?
        .iter()
        .filter_map(|e| ufskit_image(e).map(|i| (e.mount_point.clone(), i)))
        .collect())
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

#[allow(clippy::too_many_arguments)]
fn serve_fs(
    fs: &Arc<ufs::Fs>,
    cfg: &MountConfig,
    ids: Option<confine::Ids>,
    image: &str,
    mountpoint: &Path,
    read_only: bool,
    before: &std::fs::Metadata,
    on_ready: impl FnOnce(),
) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let root = is_root();
    let mut opts = vec![MountOption::DefaultPermissions];
    if root {
        // Direct mount(2): the source is the fsname, the subtype a kernel option.
        opts.push(MountOption::FSName(image.to_string()));
        if !cfg.plain_type {
            opts.push(MountOption::CUSTOM(format!("subtype={SUBTYPE}")));
        }
    } else {
        // fusermount3 splits its option string at unescaped commas.
        opts.push(MountOption::FSName(image.replace(',', "\\,")));
        if !cfg.plain_type {
            opts.push(MountOption::Subtype(SUBTYPE.into()));
        }
    }
    opts.push(if read_only {
        MountOption::RO
    } else {
        MountOption::RW
    });
    opts.extend(cfg.kernel.mount_options());
    let mut config = fuser::Config::default();
    config.mount_options = opts;
    config.acl = if cfg.allow_other {
        SessionACL::All
    } else {
        SessionACL::Owner
    };
    let threads = cfg.threads.max(1);
    config.n_threads = Some(threads);
    config.clone_fd = threads > 1;

    let signals = SignalThread::start(mountpoint.to_path_buf(), fs.clone())?;
    let svc = Arc::new(
        service::Service::new(fs.clone(), cfg.writeback, cfg.follow_clients)
            .with_xattrs(cfg.xattrs)
            .with_acls(cfg.acls)
            .with_readdirplus(cfg.readdirplus)
            .with_dircache(cfg.dircache)
            .with_btime(cfg.btime),
    );
    let offer_uring = cfg.uring != UringMode::Off && kernel_offers_uring(cfg.uring);
    if cfg.uring == UringMode::On && !offer_uring {
        signals.stop();
        return Err(format!(
            "uring=on: this kernel offers no FUSE-over-io_uring ({ENABLE_URING} missing or not writable; Linux 6.14 or later, as root)"
        ));
    }
    let adapter = UfsFuse::new(svc.clone(), offer_uring);
    let granted = adapter.uring_granted.clone();
    let requests = svc.requests.clone();
    let notifier_slot = svc.notifier.clone();
    let session = match fuser::Session::new(adapter, mountpoint, &config) {
        Ok(s) => s,
        Err(e) => {
            signals.stop();
            return Err(format!(
                "cannot mount {} on {}: {e}",
                image,
                mountpoint.display()
            ));
        }
    };
    *notifier_slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(session.notifier());
    if let Ok(fd) = session.as_fd().try_clone_to_owned() {
        let _ = svc.kernel_queue.set(fd);
    }
    // Confinement, first part (confine.rs): what needs root's rights or
    // opens files is taken now (the control socket, the CPU latency
    // device, the helper that will unmount for the daemon), then Landlock
    // goes on this thread before it starts any serving thread.
    let confining = ids.is_some() || cfg.sandbox;
    let listener = match control::Control::bind(mountpoint) {
        Ok(l) => Some(l),
        Err(e) => {
            log(format_args!(
                "no control channel ({e}); `ufskit stats` will not reach this mount"
            ));
            None
        }
    };
    let latency_device = if cfg.cpu_latency {
        cpulatency::open_device()
    } else {
        None
    };
    let helper = signals.helper();
    let mut confine_failed: Option<String> = None;
    if confining {
        match confine::UnmountHelper::spawn(mountpoint, listener.as_ref().map(|l| l.path())) {
            Ok(h) => *helper.lock().unwrap_or_else(|p| p.into_inner()) = Some(h),
            Err(e) => confine_failed = Some(e),
        }
        if confine_failed.is_none() && cfg.sandbox {
            if let Err(e) = confine::landlock() {
                confine_failed = Some(e);
            }
        }
    }
    // A daemon that gives root up keeps `share` only if RLIMIT_NICE lets
    // it take ring threads out of the idle class again.
    let share_survives_drop = ids.is_none() || !cfg.share || confine::keep_nice();
    if !share_survives_drop {
        log("share: RLIMIT_NICE cannot be raised (no CAP_SYS_RESOURCE) and the daemon gives up root once mounted (daemon_user); ring threads do not share their clients' CPUs");
    }
    let unmount_now = |lazy_if_busy| confine::unmount(&helper, mountpoint, lazy_if_busy);
    // INIT is answered inside Session::new: if the kernel granted io_uring,
    // give every CPU's queue its entries now; requests use /dev/fuse until
    // all are registered.
    let rings = if granted.load(Ordering::Acquire) {
        match session
            .as_fd()
            .try_clone_to_owned()
            .and_then(|fd| uring::Rings::start(fd, svc.clone(), MAX_WRITE as usize))
        {
            Ok(r) => Some(r),
            Err(e) => {
                log(format_args!(
                    "no io_uring rings ({e}); requests go through /dev/fuse"
                ));
                None
            }
        }
    } else {
        None
    };
    let refused = cfg.uring == UringMode::On && rings.is_none();
    let session = match std::thread::Builder::new()
        .name("ufs-fuse".into())
        .spawn(move || session.run())
    {
        Ok(h) => h,
        Err(e) => {
            signals.stop();
            return Err(format!("cannot start the session thread: {e}"));
        }
    };
    signals.mounted();
    let reaper = reaper::Reaper::start(fs.clone(), svc.bell.clone());
    let latency = latency_device.and_then(|dev| {
        cpulatency::Holder::start_with(svc.cpu_latency.clone(), requests.clone(), dev)
    });
    let handoff = if rings.is_some() {
        handoff::Watcher::start(
            svc.handoff.clone(),
            requests.clone(),
            // CPUs this daemon may use (taskset, cpusets), not all the
            // kernel could bring online.
            std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .min(uring::possible_cpus()),
            handoff::Allowed {
                spin: cfg.spin,
                share: cfg.share && share_survives_drop,
            },
        )
    } else {
        None
    };
    let syncer = Syncer::start(fs.clone(), cfg.sync_interval, requests.clone());
    let disk_model = cfg.disk.as_ref().map(|d| d.name.to_string());
    let control =
        match listener.map(|l| control::Control::start(l, fs.clone(), requests, disk_model)) {
            None => None,
            Some(Ok(c)) => Some(c),
            Some(Err(e)) => {
                log(format_args!(
                    "no control channel ({e}); `ufskit stats` will not reach this mount"
                ));
                None
            }
        };
    let watcher = cfg
        .lowmem_watch
        .then(|| pressure::Watcher::start(fs.clone(), pressure::Thresholds::default()));

    // Ready once a stat through the mount point reaches the new file system.
    let start = Instant::now();
    let mut ready = false;
    while !session.is_finished() && start.elapsed() < READY_TIMEOUT {
        if let Ok(m) = std::fs::metadata(mountpoint) {
            if m.dev() != before.dev() || m.ino() != before.ino() {
                ready = true;
                raise_kernel_readahead(m.dev());
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    // Confinement, second part: once the mount answers, the daemon's ids
    // and the seccomp filter, on every thread.
    if ready && confine_failed.is_none() && !refused {
        let confined = match ids {
            Some(ids) => confine::drop_identity(ids),
            None => Ok(()),
        }
        .and_then(|()| {
            if cfg.sandbox {
                confine::seccomp()
            } else {
                Ok(())
            }
        });
        if let Err(e) = confined {
            confine_failed = Some(e);
        }
    }
    if refused {
        log("uring=on: the kernel did not grant FUSE-over-io_uring; unmounting");
        if let Err(e) = unmount_now(true) {
            log(e);
        }
    } else if let Some(e) = &confine_failed {
        log(format_args!(
            "cannot confine the daemon ({e}); unmounting (daemon_user=root,sandbox=off mounts without confinement)"
        ));
        if let Err(e) = unmount_now(true) {
            log(e);
        }
    } else if ready {
        on_ready();
    } else if !session.is_finished() {
        log(format_args!(
            "{} did not become ready; unmounting",
            mountpoint.display()
        ));
        if let Err(e) = unmount_now(true) {
            log(e);
        }
    }

    let result = match session.join() {
        Ok(Ok(())) => Ok(()),
        // fuser ends quietly only on ENODEV; the kernel answers a read on a
        // connection it has aborted (a lazily detached mount going away, or
        // an abort through /sys/fs/fuse/connections) with ECONNABORTED.
        // Either way the file system is gone and every reply was sent.
        Ok(Err(e)) if e.raw_os_error() == Some(libc::ECONNABORTED) => Ok(()),
        Ok(Err(e)) => Err(format!(
            "FUSE session on {} failed: {e}",
            mountpoint.display()
        )),
        Err(_) => Err(format!("FUSE session on {} panicked", mountpoint.display())),
    };
    // The connection is gone, so are the rings' commands: the ring threads
    // end (they must, before the engine is flushed and closed).
    if let Some(r) = rings {
        r.join();
    }
    signals.stop();
    reaper.stop();
    if let Some(l) = latency {
        l.stop();
    }
    if let Some(h) = handoff {
        h.stop();
    }
    syncer.stop();
    if let Some(c) = control {
        c.stop();
    }
    if let Some(w) = watcher {
        w.stop();
    }
    // The helper removes the control socket the daemon may no longer
    // unlink, and exits.
    drop(helper.lock().unwrap_or_else(|p| p.into_inner()).take());
    if let Some(e) = confine_failed {
        return Err(format!("cannot confine the daemon: {e}"));
    }
    if refused {
        return Err("uring=on: the kernel did not grant FUSE-over-io_uring".to_string());
    }
    if !ready && result.is_ok() {
        return Err(format!(
            "mount on {} ended before it became ready",
            mountpoint.display()
        ));
    }
    result
}

/// Unmounts the file system at `mp`. With `lazy_if_busy`, a busy mount is
/// detached (it then ends when its last user goes away).
pub(crate) fn unmount_path(mp: &Path, lazy_if_busy: bool) -> Result<(), String> {
    use nix::errno::Errno;
    use nix::mount::{umount2, MntFlags};
    if is_root() {
        match umount2(mp, MntFlags::empty()) {
            Ok(()) => Ok(()),
            Err(Errno::EBUSY) if lazy_if_busy => {
                log(format_args!(
                    "{} is busy; detaching it, it ends when no longer in use",
                    mp.display()
                ));
                umount2(mp, MntFlags::MNT_DETACH)
                    .map_err(|e| format!("cannot unmount {}: {}", mp.display(), e.desc()))
            }
            Err(Errno::EBUSY) => Err(format!("cannot unmount {}: target is busy", mp.display())),
            Err(Errno::EINVAL) => Err(format!("{} is not a mount point", mp.display())),
            Err(e) => Err(format!("cannot unmount {}: {}", mp.display(), e.desc())),
        }
    } else {
        match fusermount(mp, false) {
            Ok(()) => Ok(()),
            Err(e) if lazy_if_busy => {
                log(format_args!("{e}; detaching it lazily"));
                fusermount(mp, true)
            }
            Err(e) => Err(e),
        }
    }
}

fn detach(mp: &Path) -> Result<(), String> {
    if is_root() {
        nix::mount::umount2(mp, nix::mount::MntFlags::MNT_DETACH)
            .map_err(|e| format!("cannot unmount {}: {}", mp.display(), e.desc()))
    } else {
        fusermount(mp, true)
    }
}

fn fusermount(mp: &Path, lazy: bool) -> Result<(), String> {
    let mut last = String::new();
    for bin in ["fusermount3", "fusermount"] {
        let mut cmd = std::process::Command::new(bin);
        cmd.arg("-u");
        if lazy {
            cmd.arg("-z");
        }
        cmd.arg("--").arg(mp);
        match cmd.output() {
            Ok(o) if o.status.success() => return Ok(()),
            Ok(o) => {
                let msg = String::from_utf8_lossy(&o.stderr).trim().to_string();
                return Err(format!("cannot unmount {}: {msg}", mp.display()));
            }
            Err(e) => last = format!("cannot run {bin}: {e}"),
        }
    }
    Err(last)
}

/// Waits until nobody holds a lock on `image` (the daemon released it).
fn wait_for_release(image: &Path, timeout: Duration) -> Result<(), String> {
    use nix::fcntl::{Flock, FlockArg};
    let start = Instant::now();
    loop {
        let f = match std::fs::File::open(image) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()), // nothing left to wait for
            Err(e) => return Err(format!("{}: {e}", image.display())),
        };
        match Flock::lock(f, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => {
                drop(lock);
                return Ok(());
            }
            Err((_, nix::errno::Errno::EWOULDBLOCK)) | Err((_, nix::errno::Errno::EINTR)) => {}
            Err((_, e)) => {
                return Err(format!(
                    "{}: cannot check its lock: {}",
                    image.display(),
                    e.desc()
                ))
            }
        }
        if start.elapsed() >= timeout {
            return Err(format!(
                "unmounted, but the ufskit daemon has not released {} after {} s",
                image.display(),
                timeout.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Turns SIGINT/SIGTERM/SIGHUP into an unmount of the mount point.
struct SignalThread {
    old_mask: SigSet,
    shared: Arc<SignalShared>,
    thread: Option<(JoinHandle<()>, nix::sys::pthread::Pthread)>,
    done: bool,
}

struct SignalShared {
    mountpoint: PathBuf,
    /// SIGUSR1 drops the engine's clean cached blocks (cold-cache benchmarks).
    fs: Arc<ufs::Fs>,
    stop: AtomicBool,
    /// (mounted, unmount requested), changed together.
    state: Mutex<(bool, bool)>,
    /// Unmounts for a confined daemon (confine.rs); None: it does so itself.
    helper: Arc<Mutex<Option<confine::UnmountHelper>>>,
}

impl SignalShared {
    fn unmount(&self) {
        if let Err(e) = confine::unmount(&self.helper, &self.mountpoint, true) {
            log(e);
        }
    }
}

fn signal_set() -> SigSet {
    let mut s = SigSet::empty();
    for sig in [
        Signal::SIGINT,
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGUSR1,
    ] {
        s.add(sig);
    }
    s
}

impl SignalThread {
    fn start(mountpoint: PathBuf, fs: Arc<ufs::Fs>) -> Result<SignalThread, String> {
        let set = signal_set();
        let old_mask = set
            .thread_swap_mask(SigmaskHow::SIG_BLOCK)
            .map_err(|e| format!("cannot block signals: {e}"))?;
        let shared = Arc::new(SignalShared {
            mountpoint,
            fs,
            stop: AtomicBool::new(false),
            state: Mutex::new((false, false)),
            helper: Arc::new(Mutex::new(None)),
        });
        let sh = shared.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("ufs-signals".into())
            .spawn(move || {
                let _ = tx.send(nix::sys::pthread::pthread_self());
                loop {
                    let sig = match set.wait() {
                        Ok(s) => s,
                        Err(_) => continue,
                    };
                    if sh.stop.load(Ordering::SeqCst) {
                        return;
                    }
                    if sig == Signal::SIGUSR1 {
                        if let Err(e) = sh.fs.drop_caches() {
                            log(format_args!("dropping caches: {e}"));
                        }
                        continue;
                    }
                    let mut st = sh.state.lock().unwrap_or_else(|p| p.into_inner());
                    st.1 = true;
                    if st.0 {
                        log(format_args!(
                            "{sig}: unmounting {}",
                            sh.mountpoint.display()
                        ));
                        sh.unmount();
                    }
                }
            });
        let thread = match spawned {
            Ok(h) => match rx.recv() {
                Ok(id) => Some((h, id)),
                Err(_) => None,
            },
            Err(e) => {
                let _ = old_mask.thread_set_mask();
                return Err(format!("cannot start the signal thread: {e}"));
            }
        };
        Ok(SignalThread {
            old_mask,
            shared,
            thread,
            done: false,
        })
    }

    /// The mount exists: a signal from now on unmounts it, and one that
    /// came before does so now.
    fn mounted(&self) {
        let mut st = self.shared.state.lock().unwrap_or_else(|p| p.into_inner());
        st.0 = true;
        if st.1 {
            log(format_args!(
                "signal received while mounting: unmounting {}",
                self.shared.mountpoint.display()
            ));
            self.shared.unmount();
        }
    }

    fn stop(mut self) {
        self.shutdown();
    }

    /// Where a confined daemon's unmount helper goes.
    fn helper(&self) -> Arc<Mutex<Option<confine::UnmountHelper>>> {
        self.shared.helper.clone()
    }

    fn shutdown(&mut self) {
        if self.done {
            return;
        }
        self.done = true;
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some((h, id)) = self.thread.take() {
            // Wake the thread from sigwait with a signal aimed at it alone.
            let _ = nix::sys::pthread::pthread_kill(id, Signal::SIGTERM);
            let _ = h.join();
        }
        let _ = self.old_mask.thread_set_mask();
    }
}

impl Drop for SignalThread {
    fn drop(&mut self) {
        self.shutdown();
    }
}
