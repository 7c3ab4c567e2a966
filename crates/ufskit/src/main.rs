//! `ufskit`: the command line. It parses arguments, calls the library and
//! prints results; it holds no file-system logic of its own.
//!
//! Exit status: 0 on success; 1 on a usage or operational error (message on
//! stderr); fsck uses the codes documented in `ufs::fsck`; crashtest exits
//! 2 when a write mode that promises consistency broke it.
#![deny(unsafe_code)]
use clap::{Parser, Subcommand};

/// jemalloc, with a background thread that gives freed memory back to the
/// system after a second: glibc's allocator keeps a mount daemon's peak
/// for good (200 MB after a 100k-file directory whose ordering state was
/// all written and freed), so the cache size would not bound the daemon.
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options (read at its first allocation): purge dirty and
/// muzzy pages one second after they were freed, from its own thread.
/// (Exporting the symbol jemalloc looks for is the one way to set them
/// before the first allocation; nothing else in the program has the name.)
#[allow(unsafe_code)]
#[export_name = "_rjem_malloc_conf"]
pub static MALLOC_CONF: &[u8] = b"background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:1000\0";
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use ufs::dev::BlockDevice;
use ufs::{DirPref, MountOptions};

mod bench;
mod crashtest;
mod daemon;
mod grow;
mod helpers;
mod image;
mod makefs;
mod progress;
mod stats;

#[derive(Parser)]
#[command(
    name = "ufskit",
    version,
    about = "Read, write, check and mount BSD UFS1 and UFS2 file systems (either byte order) from Linux"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Write a manual page for ufskit and each subcommand into DIR
    /// (ufskit.1, ufskit-mount.1, ...); scripts/install.sh uses it.
    #[command(hide = true)]
    Man { dir: PathBuf },
    /// Print a completion script for SHELL (bash, zsh, fish, elvish,
    /// powershell).
    Completions { shell: clap_complete::Shell },
    /// Create a UFS2 or UFS1 file system, either byte order (creates a sparse image if TARGET does not exist).
    Newfs(NewfsArgs),
    /// Mount an image through FUSE (returns once the mount is live).
    Mount(MountArgs),
    /// Unmount; returns after all data is written and the image is unlocked.
    Umount {
        /// The mount point.
        dir: PathBuf,
        /// Detach now; the daemon finishes when the last file open in the
        /// mount is closed (nothing is waited for).
        #[arg(short = 'l', long)]
        lazy: bool,
    },
    /// Check and repair a file system.
    Fsck(FsckArgs),
    /// Print the superblock and cylinder-group summaries.
    Dumpfs {
        /// Print the newfs command that recreates this file system.
        #[arg(short = 'm')]
        newfs_cmd: bool,
        /// Superblock only, no cylinder groups.
        #[arg(short = 's')]
        super_only: bool,
        image: PathBuf,
    },
    /// Change tunable parameters of an unmounted file system.
    Tunefs(TunefsArgs),
    /// List the partitions of a disk or disk image (GPT, MBR, BSD
    /// disklabels) and which hold a UFS file system: the names IMAGE:NAME
    /// takes in every other command.
    Probe {
        /// Print JSON.
        #[arg(long)]
        json: bool,
        image: PathBuf,
    },
    /// Layout measures of a directory in an unmounted image: readdir-order
    /// and name-order inode locality (the large-directory study), data near its inode. Given
    /// a directory instead of an image (a ufskit mount, ext4, any file
    /// system), the two inode localities as seen through the kernel.
    Layout {
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Image file or device (not mounted), or a directory.
        image: PathBuf,
        /// Directory inside the image (default: the root).
        #[arg(default_value = "/")]
        path: PathBuf,
    },
    /// Show the counters of a mounted file system (dirhash, buffer cache)
    /// and what dirhash holds for DIR.
    Stats {
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Check DIR's index against its directory blocks.
        #[arg(long)]
        verify: bool,
        /// Deliver a dirhash low-memory event instead.
        #[arg(long)]
        lowmem: bool,
        /// Instead: write everything dirty and drop the daemon's clean
        /// cache and dirhash indexes, returning when done (SIGUSR1 does the
        /// same without waiting).
        #[arg(long, conflicts_with_all = ["lowmem", "verify"])]
        drop_caches: bool,
        /// A directory inside a ufskit mount.
        dir: PathBuf,
    },
    /// Run a benchmark and write JSON results (and plots when Python's
    /// matplotlib is installed).
    Bench(bench::BenchArgs),
    /// Grow a file system in place to a larger size (FreeBSD's growfs):
    /// the last cylinder group is extended, groups are added, the summary
    /// area moves when it must; an image file given a larger -s is
    /// lengthened, a partition grows to its size. Refuses a mounted or
    /// unclean file system; a power cut leaves the old one or the new one.
    Growfs(grow::GrowfsArgs),
    /// Make an image from a directory tree, without a mount or root
    /// (FreeBSD's and NetBSD's makefs option names): data with holes kept,
    /// hard links, symlinks, nodes, attributes and ACLs; owners and modes
    /// from the tree, -r or an mtree spec (-F); reproducible with -T or
    /// SOURCE_DATE_EPOCH; the smallest size that fits unless -s is given.
    Makefs(makefs::MakefsArgs),
    /// Copy a tree out of an image onto the host, without a mount or root:
    /// data (holes kept), hard links, symlinks, device nodes and fifos (as
    /// root), modes, times, owners (as root), extended attributes and ACLs.
    /// Read-only on the image: a file system that is not clean is read as
    /// it stands, with a warning.
    Extract(image::ExtractArgs),
    /// List a directory inside an image, without a mount.
    Ls(image::LsArgs),
    /// Write files inside an image to standard output, without a mount.
    Cat(image::CatArgs),
    /// Show an inode inside an image (attributes, times, flags, extended
    /// attribute names), without a mount.
    Stat(image::StatArgs),
    /// Crash-test the write modes: run small workloads on a recording
    /// device, check every crash state with fsck and against what fsync
    /// promised (exit 2 when normal, sync or softdep broke a guarantee);
    /// with --mount, kill the real mount daemon with SIGKILL under real
    /// programs, again and again, and check each image it leaves.
    Crashtest(crashtest::CrashtestArgs),
}

#[derive(clap::Args)]
#[command(disable_help_flag = true)]
struct NewfsArgs {
    /// Print help (`-h` is FreeBSD's avgfpdir flag).
    #[arg(long = "help", action = clap::ArgAction::Help)]
    help: Option<bool>,
    /// Block size in bytes (4096..65536, power of two).
    #[arg(short = 'b')]
    bsize: Option<String>,
    /// Fragment size in bytes (block size / 1, 2, 4 or 8).
    #[arg(short = 'f')]
    fsize: Option<String>,
    /// Bytes of data space per inode (density).
    #[arg(short = 'i')]
    density: Option<String>,
    /// Minimum free space percentage reserved for root.
    #[arg(short = 'm')]
    minfree: Option<u64>,
    /// Optimisation preference: time or space.
    #[arg(short = 'o')]
    optim: Option<String>,
    /// Expected average file size.
    #[arg(short = 'g')]
    avgfilesize: Option<u32>,
    /// Expected average number of files per directory.
    #[arg(short = 'h')]
    avgfpdir: Option<u32>,
    /// Maximum blocks a file may take in one cylinder group before moving on.
    #[arg(short = 'e')]
    maxbpg: Option<u64>,
    /// Maximum blocks per cylinder group.
    #[arg(short = 'c')]
    maxblkspercg: Option<u64>,
    /// Enable soft updates (the default, as FreeBSD's newfs does for UFS2;
    /// kept for FreeBSD's command lines).
    #[arg(short = 'U')]
    softupdates: bool,
    /// Leave soft updates off: the mount then uses FFS's synchronous
    /// metadata writes (normal mode) unless `-o softdep` is given
    /// (`tunefs -n enable|disable` changes it later).
    #[arg(long = "no-soft-updates", conflicts_with = "softupdates")]
    no_softupdates: bool,
    /// Space reserved for metadata in each cylinder group, in fragments.
    #[arg(short = 'k')]
    metaspace: Option<u64>,
    /// Volume label.
    #[arg(short = 'L')]
    volname: Option<String>,
    /// Do not create the .snap directory.
    #[arg(short = 'n')]
    no_snap: bool,
    /// File system size, with optional unit: 512M, 40G, 2T (default: the whole target).
    #[arg(short = 's')]
    size: Option<String>,
    /// Do not enable metadata check-hashes (UFS2; UFS1 has none).
    #[arg(long)]
    no_ckhash: bool,
    /// Format: 1 for UFS1 (FreeBSD before 5.0, NetBSD's FFSv1, OpenBSD's
    /// FFS), 2 for UFS2 (the default).
    #[arg(short = 'O', value_parser = ["1", "2"])]
    format: Option<String>,
    /// Byte order: le (little-endian, the default, as amd64 and arm64
    /// write) or be (big-endian, as powerpc, sparc64 and mips write); also
    /// little, big, 1234, 4321, as NetBSD's makefs takes them.
    #[arg(short = 'B')]
    byte_order: Option<String>,
    /// Seed for random values (reproducible images).
    #[arg(long)]
    seed: Option<u64>,
    /// Timestamp (seconds since the epoch) for reproducible images.
    #[arg(long)]
    time: Option<i64>,
    /// Ask on standard input before writing over a file system found on
    /// TARGET (UFS, or any type blkid knows), and refuse unless the answer
    /// is yes, as Linux's mkfs tools do; what `mkfs -t fuse.ufskit` runs
    /// unless given -F. (FreeBSD's newfs, and newfs without this, never ask.)
    #[arg(long)]
    ask: bool,
    /// Image file or block device.
    target: PathBuf,
}

#[derive(clap::Args)]
struct MountArgs {
    /// Comma-separated options, by group (defaults first; docs/LINUX.md
    /// and README.md say more of each):
    ///
    /// mount(8)'s (as for a kernel file system):
    ///   rw | ro             read-write or read-only
    ///   remount             change a live mount (with ro, rw, the flags below)
    ///   force               mount a file system that is not clean
    ///   allow_other         let other users in (root's mount(8) helper adds it)
    ///   nodev,nosuid | dev,suid, exec | noexec, dirsync
    ///   relatime | strictatime | noatime | nodiratime
    ///   fstype=fuse.ufskit | fuse   the type mount(8) shows
    ///
    /// Write ordering and durability:
    ///   softdep | normal | sync | async   (default: the superblock's soft-updates flag)
    ///   barrier=flush | write   what an ordered write waits for (flush with softdep)
    ///   syncer=SECS         background flush of dirty blocks (30; 0 off)
    ///
    /// Caching:
    ///   cache=SIZE          buffer cache (1/32 of memory, 64M to 1G)
    ///   readahead=SIZE      read on a small-block miss (128k; 0 off)
    ///   writeback=off | on  kernel write-back caching of file data
    ///   vmiodir=on | off    directory blocks cached as file data (on) or in FreeBSD 4.5's buffer space (off)
    ///   dircache=on | off   directories opened without a request, listings cached
    ///   readdirplus=auto | on | off   listings with attributes
    ///   lowmem=on | off     give dirhash memory back under memory pressure
    ///
    /// What the mount serves:
    ///   xattr=on | off, acl=on | off, btime=off | on (statx birth time; costs a request)
    ///
    /// Placement and directory policies (the paper's factors):
    ///   dirpref=orlov | traditional, contigdirs=on | off, seed=N
    ///   dirhash=on | off, dirhash_maxmem=SIZE, dirhash_minsize=SIZE,
    ///   dirhash_reclaimage=SECS, dirhash_check=off | on   (docs/DIRHASH.md)
    ///   inodeorder=offset | name | hash | off, inodeorder_min=SIZE   (docs/LAYOUT.md)
    ///
    /// Transport and latency (machine-wide effects noted):
    ///   uring=auto | on | off   FUSE over io_uring (auto: when the kernel offers it,
    ///                       leaving the fuse module alone; on: as root, sets the
    ///                       module's enable_uring, machine-wide, and insists)
    ///   threads=N           /dev/fuse threads (3)
    ///   affinity=follow | off   serve a pinned client's requests on its CPU
    ///   share=auto | off    serve on the client's CPU in the idle class on a quiet machine
    ///   cpulatency=off | auto   hold a 0 µs CPU latency request while busy (machine-wide)
    ///   spin=auto | on | off    poll from another CPU while cpulatency holds
    ///   nice=N | off        the daemon's nice value (-10)
    ///   lockspin=USEC       poll a held engine lock this long before sleeping (10; 0 off)
    ///
    /// The daemon's rights once mounted (docs/SECURITY.md):
    ///   daemon_user=nobody | USER | UID | root   whom it runs as (a root
    ///                       mount gives up root; a user's keeps the user)
    ///   sandbox=on | off    Landlock and a seccomp filter
    ///
    /// Experiments:
    ///   disk=dtla-307045 | ide-20g-2001 | hp97560   modeled disk (docs/LAYOUT.md)
    ///   disk_sleep=on | off   also sleep the modeled time
    ///   record=FILE         log every device write and flush to FILE
    ///                       (the power-cut tester, crashtest --mount --powercut)
    #[arg(
        short = 'o',
        action = clap::ArgAction::Append,
        value_name = "OPTIONS",
        verbatim_doc_comment
    )]
    options: Vec<String>,
    /// Stay in the foreground.
    #[arg(short = 'f')]
    foreground: bool,
    image: PathBuf,
    dir: PathBuf,
}

#[derive(clap::Args)]
struct FsckArgs {
    /// Check only; change nothing.
    #[arg(short = 'n', group = "mode")]
    no: bool,
    /// Preen: fix only what is safe without asking.
    #[arg(short = 'p', group = "mode")]
    preen: bool,
    /// Fix everything.
    #[arg(short = 'y', group = "mode")]
    yes: bool,
    /// Print findings as JSON.
    #[arg(long)]
    json: bool,
    /// Exit status convention: `ffs` (FreeBSD fsck_ffs's: 0 clean or
    /// fixed, 8 errors left, 16 run again) or `fsck8` (Linux fsck(8)'s:
    /// 0 clean, 1 errors corrected, 4 errors left, 8 operational error;
    /// what `fsck.fuse.ufskit` uses).
    #[arg(long, value_parser = ["ffs", "fsck8"], default_value = "ffs")]
    exit_codes: String,
    image: PathBuf,
}

#[derive(clap::Args)]
struct TunefsArgs {
    /// Expected average file size.
    #[arg(short = 'f')]
    avgfilesize: Option<u32>,
    /// Expected number of files per directory.
    #[arg(short = 's')]
    avgfpdir: Option<u32>,
    /// Minimum free space percentage.
    #[arg(short = 'm')]
    minfree: Option<u32>,
    /// Optimisation preference: time or space.
    #[arg(short = 'o')]
    optim: Option<String>,
    /// Soft updates: enable or disable.
    #[arg(short = 'n')]
    softupdates: Option<String>,
    /// POSIX.1e ACLs enforced by FreeBSD (FS_ACLS): enable or disable.
    /// Through the mount, ACLs work either way (`-o acl`).
    #[arg(short = 'a')]
    acls: Option<String>,
    /// NFSv4 ACLs (FS_NFS4ACLS): enable or disable.
    #[arg(short = 'N')]
    nfs4acls: Option<String>,
    /// Volume label.
    #[arg(short = 'L')]
    volname: Option<String>,
    /// Write the change to every backup superblock too.
    #[arg(short = 'A')]
    all: bool,
    /// Print the current values.
    #[arg(short = 'p')]
    print: bool,
    image: PathBuf,
}

/// Parses `512M`, `40G`, `2T`, `64k` or a plain byte count.
pub(crate) fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, mult) = match s.chars().last() {
        Some(c) if c.is_ascii_alphabetic() && s[..s.len() - 1].parse::<u64>().is_ok() => {
            let m: u64 = match c.to_ascii_lowercase() {
                'b' => 1,
                'k' => 1 << 10,
                'm' => 1 << 20,
                'g' => 1 << 30,
                't' => 1 << 40,
                'p' => 1 << 50,
                _ => {
                    return Err(format!(
                        "bad size '{s}': unknown unit '{c}' (use k, M, G, T)"
                    ))
                }
            };
            (&s[..s.len() - 1], m)
        }
        _ => (s, 1),
    };
    let n: u64 = num.parse().map_err(|_| {
        format!("bad size '{s}': give a number of bytes with an optional unit (k, M, G, T), for example 64M")
    })?;
    n.checked_mul(mult)
        .ok_or_else(|| format!("size '{s}' is too large"))
}

/// The file system `target` holds, if any: UFS as ufskit reads it, else
/// what blkid's low-level probe (`blkid -p`, util-linux) names.
fn existing_file_system(target: &Path) -> Option<String> {
    if let Ok(dev) = ufs::dev::FileDevice::open(target, false) {
        if let Ok((_, g, _)) = ufs::fs::read_superblock(&dev) {
            return Some(format!("UFS ({})", g.v.describe()));
        }
    }
    let out = std::process::Command::new("blkid")
        .args(["-p", "-o", "value", "-s", "TYPE"])
        .arg(target)
        .output()
        .ok()?;
    let kind = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !kind.is_empty()).then_some(kind)
}

/// Asks whether to write over the `kind` file system on `target`,
/// reading the answer from stdin (`yes | mkfs ...` answers). The question
/// is shown on a terminal only, so a piped yes leaves no trace on stderr.
fn confirm_overwrite(target: &Path, kind: &str) -> Result<(), String> {
    use std::io::{IsTerminal, Write};
    let terminal = std::io::stdin().is_terminal();
    if terminal {
        eprint!(
            "{} holds a {kind} file system; make a new one over it? [y/N] ",
            target.display()
        );
        let _ = std::io::stderr().flush();
    }
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    let answer = line.trim().to_ascii_lowercase();
    if answer == "y" || answer == "yes" {
        return Ok(());
    }
    if terminal && line.is_empty() {
        eprintln!();
    }
    Err(format!(
        "{} holds a {kind} file system and was left as it is: answer y, or give -F to mkfs",
        target.display()
    ))
}

fn parse_optim(s: &str) -> Result<i32, String> {
    match s {
        "time" => Ok(ufs_format::FS_OPTTIME),
        "space" => Ok(ufs_format::FS_OPTSPACE),
        _ => Err(format!(
            "bad optimisation preference '{s}': use time or space"
        )),
    }
}

/// An image, a device, or one partition of either (`disk.img:p2`); a disk
/// with a single UFS partition opens at it, said on stderr.
pub(crate) fn open_dev(path: &Path, writable: bool) -> Result<Box<dyn BlockDevice>, String> {
    ufs_fuse::await_finishing_daemon(path);
    let (dev, part) = ufs::dev::partition::open_image(path, writable).map_err(|e| e.to_string())?;
    if let (Some(p), (_, None)) = (&part, ufs::dev::partition::split_spec(path)) {
        eprintln!(
            "ufskit: {}: using partition {} ({}, {} bytes at byte {}); name it as {}:{}",
            path.display(),
            p.name,
            p.kind,
            p.size,
            p.start,
            path.display(),
            p.name
        );
    }
    Ok(dev)
}

/// A byte order as newfs -B and makefs -B take it.
pub(crate) fn parse_byte_order(s: &str) -> Result<ufs_format::Endian, String> {
    match s.to_ascii_lowercase().as_str() {
        "le" | "little" | "1234" => Ok(ufs_format::Endian::Little),
        "be" | "big" | "4321" => Ok(ufs_format::Endian::Big),
        _ => Err(format!(
            "unknown byte order {s:?}: use le (little-endian) or be (big-endian)"
        )),
    }
}

fn cmd_newfs(a: NewfsArgs) -> Result<(), String> {
    let mut p = ufs::newfs::NewfsParams::default();
    if let Some(b) = &a.bsize {
        p.bsize = parse_size(b)?;
        p.fsize = 0; // FreeBSD's default for this block size
    }
    if let Some(f) = &a.fsize {
        p.fsize = parse_size(f)?;
    }
    if let Some(i) = &a.density {
        p.density = Some(parse_size(i)?);
    }
    if let Some(m) = a.minfree {
        p.minfree = m;
    }
    if let Some(o) = &a.optim {
        p.optim = parse_optim(o)?;
    }
    if let Some(g) = a.avgfilesize {
        p.avgfilesize = g;
    }
    if let Some(h) = a.avgfpdir {
        p.avgfpdir = h;
    }
    p.maxbpg = a.maxbpg;
    p.maxblkspercg = a.maxblkspercg;
    p.softupdates = !a.no_softupdates;
    p.metaspace = a.metaspace;
    if let Some(l) = a.volname {
        p.volname = l;
    }
    p.no_snap = a.no_snap;
    p.ckhash = !a.no_ckhash;
    if a.format.as_deref() == Some("1") {
        p.format = ufs_format::Ufs::Ufs1;
    }
    if let Some(b) = &a.byte_order {
        p.endian = parse_byte_order(b)?;
    }
    p.seed = a.seed;
    p.time = a.time;
    let size = a.size.as_deref().map(parse_size).transpose()?;
    p.size = size;
    let (_, partition) = ufs::dev::partition::split_spec(&a.target);
    let created = partition.is_none() && !a.target.exists();
    if created {
        let Some(sz) = size else {
            return Err(format!(
                "{} does not exist; give its size with -s (for example -s 512M)",
                a.target.display()
            ));
        };
        let f = std::fs::File::create(&a.target)
            .map_err(|e| format!("cannot create {}: {e}", a.target.display()))?;
        f.set_len(sz)
            .map_err(|e| format!("cannot size {}: {e}", a.target.display()))?;
    } else if let (Some(sz), None) = (size, &partition) {
        let meta = std::fs::metadata(&a.target).map_err(|e| e.to_string())?;
        if meta.is_file() && meta.len() < sz {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(&a.target)
                .map_err(|e| e.to_string())?;
            f.set_len(sz)
                .map_err(|e| format!("cannot grow {}: {e}", a.target.display()))?;
        }
    }
    if a.ask && !created && partition.is_none() {
        if let Some(kind) = existing_file_system(&a.target) {
            confirm_overwrite(&a.target, &kind)?;
        }
    }
    let bar = progress::bar(0, "cylinder groups");
    let made = open_dev(&a.target, true).and_then(|dev| {
        ufs::newfs::newfs_with_progress(&dev, &p, &mut |done, total| {
            bar.set_length(total);
            bar.set_position(done);
        })
        .map_err(|e| format!("newfs: {e}"))
    });
    bar.finish_and_clear();
    match made {
        Ok(r) => {
            print!("{}", r.summary);
            Ok(())
        }
        Err(e) => {
            // An image this command created for a file system it could not
            // make is not left behind.
            if created {
                let _ = std::fs::remove_file(&a.target);
            }
            Err(e)
        }
    }
}

struct FuseOpts {
    sync_interval: u64,
    lowmem_watch: bool,
    allow_other: bool,
    threads: usize,
    writeback: bool,
    xattrs: bool,
    acls: bool,
    readdirplus: ufs_fuse::ReaddirPlus,
    dircache: bool,
    btime: bool,
    follow_clients: bool,
    cpu_latency: bool,
    spin: ufs_fuse::handoff::SpinMode,
    share: bool,
    uring: ufs_fuse::UringMode,
    disk: Option<ufs_sim::model::DiskSpec>,
    disk_sleep: bool,
    record: Option<PathBuf>,
    nice: Option<i32>,
    kernel: ufs_fuse::KernelFlags,
    /// `-o remount`: change the options of the mount at DIR.
    remount: bool,
    /// `-o fstype=fuse`: the kernel's type is `fuse`, not `fuse.ufskit`.
    plain_type: bool,
    /// `-o daemon_user=`, `-o sandbox=` (ufs-fuse's confine.rs).
    daemon_user: ufs_fuse::confine::DaemonUser,
    sandbox: bool,
}

/// The mount's default buffer cache: a thirty-second of the machine's
/// memory, at least 64 MiB and at most 1 GiB. FreeBSD sizes its buffer
/// cache from physical memory too (and keeps file data in the VM page
/// cache besides); a fixed 64 MiB made every random unlink in a
/// million-entry directory read and write back an inode block (the
/// directory's inodes alone are 256 MB), 4.5x ext4's time.
fn default_mount_cache() -> u64 {
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map_or(0, |kib| kib * 1024);
    (total / 32).clamp(64 << 20, 1 << 30)
}

fn parse_mount_options(list: &[String]) -> Result<(MountOptions, FuseOpts), String> {
    let mut o = MountOptions {
        cache_bytes: default_mount_cache(),
        ..MountOptions::default()
    };
    let mut allow_other = false;
    // Measured through the mount beside ext4 (docs/DESIGN.md, "FUSE over
    // io_uring, and the defaults"): over the io_uring rings, kernel
    // write-back caching no longer pays for itself on metadata work. Each
    // close of a written file then costs a SETATTR (the kernel's times),
    // each unlink a SETATTR at eviction, and each stat of a file closed
    // since a GETATTR (the kernel stops trusting its block count), for
    // fewer WRITEs only where a program writes a file in many small
    // pieces. Three request threads serve /dev/fuse when the rings are
    // not there.
    let mut writeback = false;
    let mut xattrs = true;
    let mut acls = true;
    let mut readdirplus = ufs_fuse::ReaddirPlus::Auto;
    let mut dircache = true;
    let mut btime = false;
    let mut sync_interval = 30;
    let mut threads = 3;
    let mut lowmem_watch = true;
    let mut follow_clients = true;
    // Idle CPUs poll while requests flow (see ufs-fuse's cpulatency.rs): a
    // machine-wide setting, so only when asked for.
    let mut cpu_latency = false;
    // Ring threads poll between requests on a quiet machine while the CPU
    // latency request holds, and share their clients' CPUs otherwise
    // (handoff.rs).
    let mut spin = ufs_fuse::handoff::SpinMode::Auto;
    let mut share = true;
    let mut uring = ufs_fuse::UringMode::Auto;
    let mut disk = None;
    let mut disk_sleep = false;
    let mut record = None;
    // The daemon's threads outrank ordinary programs (ufs-fuse's set_nice).
    let mut nice = Some(-10);
    let mut maxmem: Option<u64> = None;
    let mut kernel = ufs_fuse::KernelFlags::default();
    let mut remount = false;
    let mut plain_type = false;
    // Once mounted the daemon gives up root and confines itself.
    let mut daemon_user = ufs_fuse::confine::DaemonUser::Auto;
    let mut sandbox = true;
    let on_off = |k: &str, v: &str| match v {
        "on" | "1" | "yes" => Ok(true),
        "off" | "0" | "no" => Ok(false),
        _ => Err(format!("option {k} takes on or off, not '{v}'")),
    };
    for item in list
        .iter()
        .flat_map(|s| s.split(','))
        .filter(|s| !s.is_empty())
    {
        let (k, v) = match item.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (item, None),
        };
        match (k, v) {
            // Generic options mount(8) and mount.fuse3 pass along (fstab).
            // The kernel enforces these on the mount itself:
            ("dev", None) => kernel.dev = true,
            ("nodev", None) => kernel.dev = false,
            ("suid", None) => kernel.suid = true,
            ("nosuid", None) => kernel.suid = false,
            ("exec", None) => kernel.noexec = false,
            ("noexec", None) => kernel.noexec = true,
            ("dirsync", None) => kernel.dirsync = true,
            // Access times are the daemon's (Linux's rules: ufs::Atime);
            // directories' are not updated by listing them (nodiratime).
            ("noatime", None) => {
                o.atime = ufs::Atime::Never;
                kernel.noatime = true;
            }
            ("strictatime" | "norelatime", None) => {
                o.atime = ufs::Atime::Strict;
                kernel.noatime = false;
            }
            ("relatime" | "atime", None) => {
                o.atime = ufs::Atime::Relatime;
                kernel.noatime = false;
            }
            ("diratime" | "nodiratime" | "lazytime" | "nolazytime", None) => {}
            // These concern mount(8) alone, or are what a remount through
            // mount.fuse3 repeats of the mount's own (user_id, group_id,
            // default_permissions: the daemon sets them itself).
            ("defaults" | "auto" | "noauto" | "user" | "nouser" | "users" | "_netdev"
            | "nofail" | "default_permissions", None) => {}
            ("user_id" | "group_id" | "fsname" | "subtype", Some(_)) => {}
            ("remount", None) => remount = true,
            ("daemon_user", Some(v)) => daemon_user = ufs_fuse::confine::DaemonUser::parse(v)?,
            ("sandbox", Some(v)) => sandbox = on_off(k, v)?,
            ("fstype", Some("fuse")) => plain_type = true,
            ("fstype", Some("fuse.ufskit")) => plain_type = false,
            (k, _) if k.starts_with("x-") || k == "comment" => {}
            ("ro", None) => o.read_only = true,
            ("rw", None) => o.read_only = false,
            ("force", None) => o.force = true,
            ("allow_other", None) => allow_other = true,
            ("writeback", None) => writeback = true,
            ("writeback", Some(v)) => writeback = on_off(k, v)?,
            ("xattr", Some(v)) => xattrs = on_off(k, v)?,
            ("noxattr", None) => xattrs = false,
            ("acl", None) => acls = true,
            ("acl", Some(v)) => acls = on_off(k, v)?,
            ("noacl", None) => acls = false,
            ("readdirplus", Some("auto")) => readdirplus = ufs_fuse::ReaddirPlus::Auto,
            ("readdirplus", Some("on")) => readdirplus = ufs_fuse::ReaddirPlus::On,
            ("readdirplus", Some("off")) => readdirplus = ufs_fuse::ReaddirPlus::Off,
            ("dircache", Some(v)) => dircache = on_off(k, v)?,
            ("btime", Some(v)) => btime = on_off(k, v)?,
            ("syncer", Some(v)) => sync_interval = v.parse().map_err(|_| format!("bad syncer interval '{v}' (seconds)"))?,
            ("dirpref", Some("orlov")) => o.dirpref = DirPref::Orlov,
            ("dirpref", Some("traditional")) => o.dirpref = DirPref::Traditional,
            ("cache", Some(v)) => o.cache_bytes = parse_size(v)?,
            ("readahead", Some(v)) => o.readahead = parse_size(v)?,
            ("lockspin", Some(v)) => {
                let us: u64 = v.parse().map_err(|_| format!("bad lockspin '{v}' (microseconds)"))?;
                if us > 1000 {
                    return Err(format!("lockspin={us}: at most 1000 microseconds"));
                }
                o.lock_spin_ns = us * 1000;
            }
            ("seed", Some(v)) => o.seed = Some(v.parse().map_err(|_| format!("bad seed '{v}'"))?),
            ("threads", Some(v)) => threads = v.parse().map_err(|_| format!("bad thread count '{v}'"))?,
            ("dirhash", Some(v)) => o.dirhash.enabled = on_off(k, v)?,
            ("dirhash_maxmem", Some(v)) => maxmem = Some(parse_size(v)?),
            ("dirhash_minsize", Some(v)) => o.dirhash.minsize = parse_size(v)?,
            ("dirhash_reclaimage", Some(v)) => {
                let secs: f64 = v.parse().ok().filter(|s: &f64| s.is_finite() && *s >= 0.0).ok_or_else(|| format!("bad reclaim age '{v}' (seconds)"))?;
                o.dirhash.reclaimage = std::time::Duration::from_secs_f64(secs);
            }
            ("dirhash_check", Some(v)) => o.dirhash.check = on_off(k, v)?,
            ("lowmem", Some(v)) => lowmem_watch = on_off(k, v)?,
            ("disk", Some(v)) => {
                disk = Some(ufs_sim::model::preset(v).ok_or_else(|| {
                    let names: Vec<&str> = ufs_sim::model::presets().iter().map(|p| p.name).collect();
                    format!("unknown disk model '{v}' (known: {})", names.join(", "))
                })?)
            }
            ("disk_sleep", Some(v)) => disk_sleep = on_off(k, v)?,
            ("record", Some(v)) if !v.is_empty() => record = Some(PathBuf::from(v)),
            ("inodeorder", Some(v)) => {
                o.inode_order = ufs::alloc::placement::InodeOrder::parse(v).ok_or_else(|| format!("unknown inode order '{v}' (known: offset, name, hash, off)"))?
            }
            ("inodeorder_min", Some(v)) => o.inode_order_min = parse_size(v)?,
            ("contigdirs", Some(v)) => o.contigdirs = on_off(k, v)?,
            ("normal" | "sync" | "async" | "softdep", None) => o.write_mode = ufs::order::WriteMode::parse(k),
            ("barrier", Some(v)) => {
                o.barrier = Some(ufs::order::Barrier::parse(v).ok_or_else(|| format!("option barrier takes flush or write, not '{v}'"))?)
            }
            // ext4's and XFS's spellings.
            ("barrier", None) => o.barrier = Some(ufs::order::Barrier::Flush),
            ("nobarrier", None) => o.barrier = Some(ufs::order::Barrier::Write),
            ("vmiodir", Some(v)) => o.vmiodir = on_off(k, v)?,
            ("affinity", Some("follow")) => follow_clients = true,
            ("affinity", Some("off")) => follow_clients = false,
            ("cpulatency", Some("auto")) => cpu_latency = true,
            ("cpulatency", Some("off")) => cpu_latency = false,
            ("spin", Some("auto")) => spin = ufs_fuse::handoff::SpinMode::Auto,
            ("spin", Some("on")) => spin = ufs_fuse::handoff::SpinMode::On,
            ("spin", Some("off")) => spin = ufs_fuse::handoff::SpinMode::Off,
            ("share", Some("auto")) => share = true,
            ("share", Some("off")) => share = false,
            ("uring", Some("auto")) => uring = ufs_fuse::UringMode::Auto,
            ("uring", Some("on")) => uring = ufs_fuse::UringMode::On,
            ("uring", Some("off")) => uring = ufs_fuse::UringMode::Off,
            ("nice", Some("off")) => nice = None,
            ("nice", Some(v)) => {
                nice = Some(v.parse().ok().filter(|n: &i32| (-20..=19).contains(n)).ok_or_else(|| format!("option nice takes a number from -20 to 19, or off, not '{v}'"))?)
            }
            _ => {
                return Err(format!(
                    "unknown mount option '{item}' (known: ro, rw, force, allow_other, remount, dev, nodev, suid, nosuid, exec, noexec, dirsync, relatime, strictatime, noatime, nodiratime, fstype=fuse|fuse.ufskit, writeback=on|off, xattr=on|off, acl=on|off, readdirplus=auto|on|off, dircache=on|off, btime=on|off, syncer=SECS, dirpref=orlov|traditional, cache=SIZE, readahead=SIZE, lockspin=USEC, seed=N, threads=N, dirhash=on|off, dirhash_maxmem=SIZE, dirhash_minsize=SIZE, dirhash_reclaimage=SECS, dirhash_check=on|off, lowmem=on|off, affinity=follow|off, cpulatency=off|auto, spin=auto|on|off, share=auto|off, uring=auto|on|off, nice=N|off, daemon_user=USER|root, sandbox=on|off, disk=MODEL, disk_sleep=on|off, record=FILE, inodeorder=offset|name|hash|off, inodeorder_min=SIZE, contigdirs=on|off, normal|sync|async|softdep, barrier=flush|write, vmiodir=on|off)"
                ))
            }
        }
    }
    // FreeBSD's default budget follows the buffer cache unless set.
    o.dirhash.maxmem =
        maxmem.unwrap_or_else(|| ufs::dir::dirhash::DirhashConfig::growing_maxmem(o.cache_bytes));
    Ok((
        o,
        FuseOpts {
            sync_interval,
            lowmem_watch,
            allow_other,
            threads,
            writeback,
            xattrs,
            acls,
            readdirplus,
            dircache,
            btime,
            follow_clients,
            cpu_latency,
            spin,
            share,
            uring,
            disk,
            disk_sleep,
            record,
            nice,
            kernel,
            remount,
            plain_type,
            daemon_user,
            sandbox,
        },
    ))
}

fn cmd_probe(image: &std::path::Path, json: bool) -> Result<(), String> {
    let dev = ufs::dev::FileDevice::open(image, false).map_err(|e| e.to_string())?;
    let parts =
        ufs::dev::partition::probe(&dev).map_err(|e| format!("{}: {e}", image.display()))?;
    let whole_fs = ufs::fs::read_superblock(&dev).ok().map(|(_, g, _)| g.v);
    let whole = whole_fs.is_some();
    if json {
        let v = serde_json::json!({
            "whole_disk_ufs": whole,
            "whole_disk_format": whole_fs.map(|v| v.describe()),
            "partitions": parts,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?
        );
        return Ok(());
    }
    if parts.is_empty() {
        println!(
            "{}: no partition table; {}",
            image.display(),
            match whole_fs {
                Some(v) => format!("the whole image is a UFS file system ({v})"),
                None => "no UFS file system at its start either".to_string(),
            }
        );
        return Ok(());
    }
    println!(
        "{:<6} {:<16} {:>14} {:>14}  file system",
        "name", "type", "start (bytes)", "size (bytes)"
    );
    for p in &parts {
        println!(
            "{:<6} {:<16} {:>14} {:>14}  {}",
            p.name,
            p.kind,
            p.start,
            p.size,
            p.format.as_deref().unwrap_or("-")
        );
    }
    let ufs: Vec<&str> = parts
        .iter()
        .filter(|p| p.ufs)
        .map(|p| p.name.as_str())
        .collect();
    match ufs.as_slice() {
        [] => println!("no partition holds a UFS file system"),
        [one] => println!(
            "commands given {} use {one} (or name it: {}:{one})",
            image.display(),
            image.display()
        ),
        many => println!(
            "several hold UFS file systems: name one, e.g. {}:{}",
            image.display(),
            many[0]
        ),
    }
    Ok(())
}

fn cmd_mount(a: MountArgs) -> Result<(), String> {
    let (opts, f) = parse_mount_options(&a.options)?;
    if f.remount {
        // `mount -o remount,ro DIR` (mount.fuse3 or mount.fuse.ufskit run
        // `ufskit IMAGE DIR -o remount,...` with the mount's options).
        let (ro, kernel, atime) = remount_flags(&a.options, &ufs_fuse::mount_entry(&a.dir)?);
        return ufs_fuse::remount(&a.dir, ro, kernel, atime);
    }
    // `disk.img:p2`: the file is canonicalized, the partition kept.
    let (file, partition) = ufs::dev::partition::split_spec(&a.image);
    let file = std::fs::canonicalize(&file).map_err(|e| format!("{}: {e}", file.display()))?;
    let image = match partition {
        Some(p) => std::path::PathBuf::from(format!("{}:{p}", file.display())),
        None => file,
    };
    let dir = std::fs::canonicalize(&a.dir).map_err(|e| format!("{}: {e}", a.dir.display()))?;
    if !dir.is_dir() {
        return Err(format!("{} is not a directory", dir.display()));
    }
    if !a.foreground && ufs_fuse::mount_again(&image, &dir, opts.read_only, f.kernel)? {
        return Ok(());
    }
    let cfg = ufs_fuse::MountConfig {
        image,
        mountpoint: dir,
        opts,
        allow_other: f.allow_other,
        threads: f.threads,
        writeback: f.writeback,
        xattrs: f.xattrs,
        acls: f.acls,
        readdirplus: f.readdirplus,
        dircache: f.dircache,
        btime: f.btime,
        sync_interval: f.sync_interval,
        lowmem_watch: f.lowmem_watch,
        follow_clients: f.follow_clients,
        cpu_latency: f.cpu_latency,
        spin: f.spin,
        share: f.share,
        uring: f.uring,
        disk: f.disk,
        disk_sleep: f.disk_sleep,
        record: f.record,
        nice: f.nice,
        kernel: f.kernel,
        plain_type: f.plain_type,
        daemon_user: f.daemon_user,
        sandbox: f.sandbox,
    };
    if a.foreground {
        daemon::serve_foreground(&cfg)
    } else {
        daemon::spawn_background(&a.options, &cfg)
    }
}

/// What a remount asks for: the mount's flags as they are now, changed
/// only by the options named (so `-o remount,noatime` leaves a read-only
/// mount read-only and a `nosuid` one `nosuid`), in their order.
fn remount_flags(
    options: &[String],
    now: &ufs_fuse::MountEntry,
) -> (bool, ufs_fuse::KernelFlags, ufs::Atime) {
    let mut ro = now.has("ro");
    let mut k = ufs_fuse::KernelFlags {
        dev: !now.has("nodev"),
        suid: !now.has("nosuid"),
        noexec: now.has("noexec"),
        noatime: now.has("noatime"),
        dirsync: now.super_options.split(',').any(|o| o == "dirsync"),
    };
    // Linux shows relatime or noatime; neither is strictatime.
    let mut atime = if k.noatime {
        ufs::Atime::Never
    } else if now.has("relatime") {
        ufs::Atime::Relatime
    } else {
        ufs::Atime::Strict
    };
    for o in options.iter().flat_map(|s| s.split(',')) {
        match o {
            "ro" => ro = true,
            "rw" => ro = false,
            "dev" => k.dev = true,
            "nodev" => k.dev = false,
            "suid" => k.suid = true,
            "nosuid" => k.suid = false,
            "exec" => k.noexec = false,
            "noexec" => k.noexec = true,
            "dirsync" => k.dirsync = true,
            "noatime" => {
                k.noatime = true;
                atime = ufs::Atime::Never;
            }
            "relatime" | "atime" => {
                k.noatime = false;
                atime = ufs::Atime::Relatime;
            }
            "strictatime" | "norelatime" => {
                k.noatime = false;
                atime = ufs::Atime::Strict;
            }
            _ => {}
        }
    }
    (ro, k, atime)
}

fn cmd_fsck(a: FsckArgs) -> Result<ExitCode, String> {
    use ufs::fsck::FsckMode;
    let mode = if a.yes {
        FsckMode::Yes
    } else if a.preen {
        FsckMode::Preen
    } else {
        FsckMode::Check
    };
    let _ = a.no;
    let fsck8 = a.exit_codes == "fsck8";
    let dev = match open_dev(&a.image, mode != FsckMode::Check) {
        Ok(d) => d,
        Err(e) if fsck8 => {
            eprintln!("ufskit: {e}");
            return Ok(ExitCode::from(8));
        }
        Err(e) => return Err(e),
    };
    let bar = progress::bar(0, "");
    let rep = ufs::fsck::fsck_with_progress(&*dev, mode, &mut |p| {
        bar.set_message(p.phase);
        bar.set_length(p.total);
        bar.set_position(p.done);
    });
    bar.finish_and_clear();
    let rep = match rep {
        Ok(r) => r,
        Err(e) if fsck8 => {
            eprintln!("ufskit: fsck: {}: {e}", a.image.display());
            return Ok(ExitCode::from(8));
        }
        Err(e) => return Err(format!("fsck: {}: {e}", a.image.display())),
    };
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&rep).map_err(|e| e.to_string())?
        );
    } else {
        for f in &rep.findings {
            let fixed = if f.fixed { " (FIXED)" } else { "" };
            println!("** {}: {}{}", f.pass, f.message, fixed);
        }
        println!(
            "{} files, {} directories, {} used, {} free (fragments)",
            rep.files, rep.dirs, rep.used_frags, rep.free_frags
        );
        if rep.modified {
            println!("***** FILE SYSTEM WAS MODIFIED *****");
        }
        println!(
            "{}",
            if rep.clean {
                "FILE SYSTEM IS CLEAN"
            } else {
                "FILE SYSTEM HAS ERRORS"
            }
        );
    }
    if fsck8 {
        // fsck(8)'s bits: 1 corrected, 4 left uncorrected. A check that
        // must run again has not finished its repairs.
        let code = match rep.exit_code() {
            0 if rep.modified => 1,
            0 => 0,
            _ => 4 | u8::from(rep.modified),
        };
        return Ok(ExitCode::from(code));
    }
    Ok(ExitCode::from(rep.exit_code() as u8))
}

fn enable_disable(flag: &str, v: Option<&str>) -> Result<Option<bool>, String> {
    match v {
        None => Ok(None),
        Some("enable") => Ok(Some(true)),
        Some("disable") => Ok(Some(false)),
        Some(s) => Err(format!("{flag} takes enable or disable, not '{s}'")),
    }
}

fn cmd_tunefs(a: TunefsArgs) -> Result<(), String> {
    let writable = !a.print
        || a.avgfilesize.is_some()
        || a.avgfpdir.is_some()
        || a.minfree.is_some()
        || a.optim.is_some()
        || a.softupdates.is_some()
        || a.acls.is_some()
        || a.nfs4acls.is_some()
        || a.volname.is_some();
    let dev = open_dev(&a.image, writable)?;
    if a.print {
        print!("{}", ufs::tunefs::print(&*dev).map_err(|e| e.to_string())?);
    }
    let p = ufs::tunefs::TuneParams {
        avgfilesize: a.avgfilesize,
        avgfpdir: a.avgfpdir,
        minfree: a.minfree,
        optim: a.optim.as_deref().map(parse_optim).transpose()?,
        softupdates: enable_disable("-n", a.softupdates.as_deref())?,
        acls: enable_disable("-a", a.acls.as_deref())?,
        nfs4acls: enable_disable("-N", a.nfs4acls.as_deref())?,
        volname: a.volname,
        all_backups: a.all,
    };
    for line in ufs::tunefs::tunefs(&dev, &p).map_err(|e| format!("tunefs: {e}"))? {
        println!("tunefs: {line}");
    }
    Ok(())
}

/// The command line, with the mount helper's convention folded in:
/// `mount -t fuse.ufskit IMAGE DIR` (and an `/etc/fstab` line of type
/// `fuse.ufskit`) has `mount.fuse3` run `ufskit IMAGE DIR -o OPTIONS`,
/// which is `ufskit mount IMAGE DIR -o OPTIONS`.
fn args() -> Vec<std::ffi::OsString> {
    let mut a: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Some(h) = a.first().and_then(helpers::helper_of) {
        // None: mount -f (fake), record the mount without doing it; there
        // is no mtab to record it in.
        return helpers::translate(h, &a, crashtest::nix_is_root())
            .unwrap_or_else(|| std::process::exit(0));
    }
    let first = a.get(1).map(|s| s.to_string_lossy().into_owned());
    let is_command = first.as_deref().is_some_and(|f| {
        f.starts_with('-')
            || <Cli as clap::CommandFactory>::command()
                .find_subcommand(f)
                .is_some()
    });
    let positional = a
        .iter()
        .skip(1)
        .filter(|s| !s.to_string_lossy().starts_with('-'))
        .count();
    if first.is_some() && !is_command && positional >= 2 {
        a.insert(1, "mount".into());
    }
    a
}

fn run() -> Result<ExitCode, String> {
    let cli = Cli::parse_from(args());
    if !matches!(cli.cmd, Cmd::Mount(_)) {
        // A report piped into `head` ends quietly, as C tools do. Not for
        // the mount daemon, whose sockets must survive a vanished peer.
        default_sigpipe();
    }
    match cli.cmd {
        Cmd::Newfs(a) => cmd_newfs(a)?,
        Cmd::Mount(a) => cmd_mount(a)?,
        Cmd::Umount { dir, lazy } => ufs_fuse::umount_with(&dir, lazy)?,
        Cmd::Fsck(a) => return cmd_fsck(a),
        Cmd::Dumpfs {
            newfs_cmd,
            super_only,
            image,
        } => {
            let dev = open_dev(&image, false)?;
            let out = if newfs_cmd {
                ufs::dumpfs::newfs_command(&*dev, &image.display().to_string())
            } else {
                ufs::dumpfs::dumpfs(&*dev, !super_only)
            }
            .map_err(|e| format!("dumpfs: {}: {e}", image.display()))?;
            print!("{out}");
            let _ = dev.size();
        }
        Cmd::Tunefs(a) => cmd_tunefs(a)?,
        Cmd::Probe { json, image } => cmd_probe(&image, json)?,
        Cmd::Layout { json, image, path } => cmd_layout(&image, &path, json)?,
        Cmd::Stats {
            json,
            verify,
            lowmem,
            drop_caches,
            dir,
        } => stats::cmd_stats(&dir, json, verify, lowmem, drop_caches)?,
        Cmd::Bench(a) => bench::cmd_bench(a)?,
        Cmd::Growfs(a) => grow::cmd_growfs(a)?,
        Cmd::Makefs(a) => makefs::cmd_makefs(a)?,
        Cmd::Extract(a) => image::cmd_extract(a)?,
        Cmd::Ls(a) => image::cmd_ls(a)?,
        Cmd::Cat(a) => image::cmd_cat(a)?,
        Cmd::Stat(a) => image::cmd_stat(a)?,
        Cmd::Crashtest(a) => return crashtest::cmd_crashtest(a),
        Cmd::Man { dir } => write_man_pages(&dir)?,
        Cmd::Completions { shell } => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut cmd, "ufskit", &mut std::io::stdout());
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[allow(unsafe_code)]
fn default_sigpipe() {
    // SAFETY: restoring the default disposition of SIGPIPE before any other
    // thread exists; no handler code is involved.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn main() -> ExitCode {
    // The mount daemon's unmount helper is this binary (ufs-fuse's confine.rs).
    ufs_fuse::confine::helper_main_if_asked();
    match run() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ufskit: {e}");
            ExitCode::from(1)
        }
    }
}

/// The SYNOPSIS line of a manual page: every visible option with its value
/// name (`[-o OPTIONS]`, `[-f]`, `[--json]`), then the operands
/// (`IMAGE`, `[PATH]`). clap_mangen's own drops the value name of an option
/// that has only a short name ("[-o ]").
fn man_synopsis(name: &str, cmd: &clap::Command) -> String {
    // Built, so each argument knows how many values it takes.
    let mut cmd = cmd.clone();
    cmd.build();
    let value_name = |a: &clap::Arg| {
        a.get_value_names()
            .and_then(|v| v.first())
            .map_or_else(|| a.get_id().as_str().to_uppercase(), |v| v.to_string())
    };
    let bracket = |a: &clap::Arg, item: String| {
        if a.is_required_set() {
            item
        } else {
            format!("[{item}]")
        }
    };
    let mut options = Vec::new();
    let mut operands = Vec::new();
    for a in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
        if a.is_positional() {
            let dots = if matches!(a.get_action(), clap::ArgAction::Append) {
                " ..."
            } else {
                ""
            };
            operands.push(bracket(a, format!("{}{dots}", value_name(a))));
            continue;
        }
        let flag = match (a.get_short(), a.get_long()) {
            (_, Some("help")) => continue,
            (Some(s), _) => format!("-{s}"),
            (None, Some(l)) => format!("--{l}"),
            (None, None) => continue,
        };
        let takes_value = a.get_num_args().is_some_and(|n| n.takes_values());
        let item = if takes_value {
            format!("{flag} {}", value_name(a))
        } else {
            flag
        };
        options.push(bracket(a, item));
    }
    std::iter::once(name.to_string())
        .chain(options)
        .chain(operands)
        .collect::<Vec<_>>()
        .join(" ")
}

/// ufskit.1 and one page per visible subcommand (ufskit-mount.1, ...),
/// generated from the command-line definition.
fn write_man_pages(dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let cmd = <Cli as clap::CommandFactory>::command();
    let write = |name: &str, c: clap::Command| -> Result<(), String> {
        let mut buf = Vec::new();
        clap_mangen::Man::new(c)
            .render(&mut buf)
            .map_err(|e| e.to_string())?;
        let path = dir.join(format!("{name}.1"));
        std::fs::write(&path, buf).map_err(|e| format!("{}: {e}", path.display()))
    };
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("ufskit-{}", sub.get_name());
        let synopsis = man_synopsis(&name, sub);
        write(
            &name,
            sub.clone().name(name.clone()).override_usage(synopsis),
        )?;
    }
    write("ufskit", cmd)?;
    println!("wrote manual pages in {}", dir.display());
    Ok(())
}

/// Readdir- and name-order locality of a directory through the kernel.
fn layout_of_dir(dir: &Path, json: bool) -> Result<(), String> {
    use std::os::unix::fs::DirEntryExt;
    let mut ents: Vec<(std::ffi::OsString, u64)> = Vec::new();
    for e in std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))? {
        let e = e.map_err(|e| format!("{}: {e}", dir.display()))?;
        ents.push((e.file_name(), e.ino()));
    }
    let readdir: Vec<u64> = ents.iter().map(|e| e.1).collect();
    ents.sort();
    let by_name: Vec<u64> = ents.iter().map(|e| e.1).collect();
    let (r, n) = (
        ufs::layout::ascending(&readdir),
        ufs::layout::ascending(&by_name),
    );
    if json {
        println!(
            "{}",
            serde_json::json!({ "dir": dir.display().to_string(), "entries": readdir.len(), "readdir_locality": r, "name_locality": n })
        );
    } else {
        println!("{}: {} entries", dir.display(), readdir.len());
        println!("  readdir-order locality:  {r:.4}  (adjacent entries with increasing inode numbers; 0.5 random, 1.0 inode order)");
        println!("  sorted-name locality:    {n:.4}");
    }
    Ok(())
}

fn cmd_layout(image: &Path, path: &Path, json: bool) -> Result<(), String> {
    if image.is_dir() {
        if path != Path::new("/") {
            return Err(format!(
                "{} is a directory: give no PATH after it",
                image.display()
            ));
        }
        return layout_of_dir(image, json);
    }
    let opts = MountOptions {
        read_only: true,
        force: true,
        ..Default::default()
    };
    let fs = ufs::Fs::open_path(image, opts).map_err(|e| format!("{}: {e}", image.display()))?;
    let ino = fs
        .resolve(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let r = ufs::layout::measure(&fs, ino).map_err(|e| format!("{}: {e}", path.display()))?;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&r).map_err(|e| e.to_string())?
        );
    } else {
        println!(
            "{} (inode {}): {} entries, inodes in {} cylinder groups",
            path.display(),
            r.dir_ino,
            r.entries,
            r.inode_groups
        );
        println!("  readdir-order locality:  {:.4}  (adjacent entries with increasing inode numbers; 0.5 random, 1.0 inode order)", r.readdir_locality);
        println!("  sorted-name locality:    {:.4}", r.name_locality);
        println!("  data locality:           {:.4}  (files in inode order whose first data blocks increase; {} with data)", r.data_locality, r.files_with_data);
        println!(
            "  data in the inode's group: {:.1}%",
            r.same_group_data * 100.0
        );
    }
    Ok(())
}
