//! The FUSE operations over the engine, whatever carries them: the
//! `/dev/fuse` reader threads of `fuser` ([`crate::devfuse`]) and the
//! per-CPU FUSE-over-io_uring rings ([`crate::uring`]) both decode a
//! request, call one method here and encode what it returns.
//!
//! Invariants:
//! - Inode numbers cross the boundary only through [`to_ufs`] / [`to_fuse`]
//!   (FUSE root 1 <-> UFS root 2; FUSE 2 <-> UFS 1, which UFS never uses).
//! - Every method that hands the kernel a new reference to an inode (an
//!   entry reply: lookup, mknod, create, mkdir, symlink, link, each
//!   readdirplus entry) calls `Fs::remember` *before* returning, so a
//!   `forget` for it can never overtake the matching `remember`; a caller
//!   that then fails to deliver the reply gives it back with [`Service::forget`].
//! - Every engine error leaves here as an errno through [`errno`]; nothing
//!   panics on an engine result.
//! - File handles of regular files are stateless (always 0): open files are
//!   kept alive by the kernel's lookup references, which the engine tracks.
//! - A directory handle holds a snapshot of the directory's entries, taken
//!   when reading starts at offset 0 (opendir or rewinddir); offsets are
//!   indices into it. Changes made while a reader is part-way through (the
//!   engine may move a record inside its 512-byte chunk when the chunk's
//!   first entry is removed) can therefore never make it skip or repeat an
//!   entry; POSIX leaves it open whether entries added or removed after
//!   opendir appear.
use crate::affinity::Follower;
use crate::requests::{Op, Requests};
use std::collections::{HashMap, HashSet, VecDeque};
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use ufs::ops::linux_xattr::{acl_from_linux, acl_to_linux, linux_xattr_name, LinuxXattr};
use ufs::{Attr, Cred, FileKind, Fs, Ino, RenameMode, SetAttr};

/// How long the kernel may cache attributes and entries. The image is
/// locked by this daemon and every change reaches the engine through this
/// kernel, which updates or invalidates what it caches on each reply
/// (including atime after reads), so nothing goes stale behind its back; a
/// long validity saves a round trip per stat of a name looked up before,
/// as a local file system's dentry cache does. A day, not a minute: a run
/// that creates a million files takes longer than a minute, and names that
/// expired in the meantime each cost a LOOKUP on their next stat (what the
/// kernel keeps is bounded by its own reclaim, not by this).
pub const TTL: Duration = Duration::from_secs(24 * 3600);

/// An errno, as the kernel wants it (positive).
pub type Errno = i32;

/// The one place where inode numbers are translated: FUSE's root is 1,
/// UFS's root is 2, and UFS never uses inode 1, so the two are swapped.
pub const fn swap_root(ino: u64) -> u64 {
    match ino {
        1 => 2,
        2 => 1,
        n => n,
    }
}

/// FUSE node id -> UFS inode number.
pub const fn to_ufs(nodeid: u64) -> Ino {
    Ino::new(swap_root(nodeid))
}

/// UFS inode number -> FUSE node id.
pub const fn to_fuse(ino: Ino) -> u64 {
    swap_root(ino.get())
}

/// Writes a diagnostic to stderr without ever panicking (stderr may be a
/// closed pipe once the daemon is detached).
pub(crate) fn log(msg: impl std::fmt::Display) {
    let _ = writeln!(std::io::stderr(), "ufskit: {msg}");
}

/// The errno of an engine error. Ordinary outcomes (ENOENT, EEXIST,
/// ENOSPC...) are the caller's business; damage and I/O failures are also
/// the administrator's, so they are logged.
pub fn errno(e: &ufs::Error) -> Errno {
    if matches!(e.kind, ufs::ErrorKind::Corrupt | ufs::ErrorKind::Io) {
        log(format_args!("error: {e}"));
    }
    e.errno()
}

/// Who made a request.
#[derive(Debug, Clone, Copy)]
pub struct Caller {
    pub uid: u32,
    pub gid: u32,
    pub pid: u32,
}

impl Caller {
    fn cred(&self) -> Cred {
        Cred {
            uid: self.uid,
            gid: self.gid,
        }
    }

    /// Linux's `in_group_or_capable`: is the calling process in group
    /// `gid` (its file-system group or a supplementary one), or does it
    /// hold CAP_FSETID? The request carries only the first; the rest is
    /// read from `/proc/PID/status`. A process that is gone counts as
    /// neither (the careful answer: setgid is dropped).
    fn in_group_or_capable(&self, gid: u32) -> bool {
        if self.gid == gid {
            return true;
        }
        let Ok(status) = std::fs::read_to_string(format!("/proc/{}/status", self.pid)) else {
            return false;
        };
        Self::fsetid_in(&status)
            || Self::status_field(&status, "Groups:")
                .split_whitespace()
                .any(|g| g.parse::<u32>() == Ok(gid))
    }

    /// Whether the calling process holds CAP_FSETID (a process that is
    /// gone counts as not holding it).
    fn may_keep_setid(&self) -> bool {
        std::fs::read_to_string(format!("/proc/{}/status", self.pid))
            .is_ok_and(|status| Self::fsetid_in(&status))
    }

    fn status_field<'s>(status: &'s str, name: &str) -> &'s str {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
            .unwrap_or("")
    }

    fn fsetid_in(status: &str) -> bool {
        const CAP_FSETID: u32 = 4;
        let caps = u64::from_str_radix(Self::status_field(status, "CapEff:"), 16).unwrap_or(0);
        caps & (1 << CAP_FSETID) != 0
    }
}

/// `RENAME_*` flags of a RENAME2 request (Linux's values).
/// The bytes COPY_FILE_RANGE moves per read and write inside the daemon.
pub const COPY_CHUNK: usize = 1 << 20;

pub const RENAME_NOREPLACE: u32 = 1;
pub const RENAME_EXCHANGE: u32 = 2;
pub const RENAME_WHITEOUT: u32 = 4;

/// One entry of a directory snapshot.
struct Snap {
    ino: Ino,
    dtype: u8,
    name: Vec<u8>,
}

/// Listings in progress. A READDIR cookie is `index << 32 | handle`: the
/// handle names the snapshot the listing reads (the OPENDIR file handle,
/// or, without OPENDIR, one given when the listing starts at offset 0),
/// the index the entry after the one it came with. The index is the high
/// half so that cookies grow with the position: any offset below the last
/// cookie a listing returned names an entry (seekdir to a made-up offset,
/// xfstests generic/676), read from a new snapshot when its handle is not
/// a live one. A later batch reads
/// the same snapshot, so a change made between batches never makes a
/// listing skip or repeat an entry it did not touch (POSIX readdir).
#[derive(Default)]
struct Listings {
    /// Per handle: the directory, its snapshot, and the bytes counted for
    /// it in `unopened_bytes` (0 for a listing opened with OPENDIR).
    by_handle: HashMap<u32, (Ino, Arc<Vec<Snap>>, usize)>,
    /// Handles with no RELEASEDIR to end them, least recently read first:
    /// each ends when too many are kept (see [`MAX_UNOPENED_LISTINGS`]).
    unopened: VecDeque<u32>,
    /// Memory held by the unopened listings' snapshots.
    unopened_bytes: usize,
}

/// Bounds of the listings kept without OPENDIR (a program that stops
/// reading a directory half-way never says so, and one read to its end
/// may be read again from the kernel's cache of it). The least recently
/// read goes first; a listing pushed out that is read again goes on from a new
/// snapshot at its index, which may then skip or repeat entries if the
/// directory changed meanwhile. 256 listings and 64 MiB: `rm -rf` reads
/// one per directory level at a time.
pub(crate) const MAX_UNOPENED_LISTINGS: usize = 256;
const MAX_UNOPENED_BYTES: usize = 64 << 20;

fn snapshot_bytes(s: &[Snap]) -> usize {
    s.iter()
        .map(|e| std::mem::size_of::<Snap>() + e.name.capacity())
        .sum()
}

impl Listings {
    fn forget_unopened(&mut self, h: u32) {
        if let Some(i) = self.unopened.iter().position(|&x| x == h) {
            self.unopened.remove(i);
            if let Some((_, _, bytes)) = self.by_handle.remove(&h) {
                self.unopened_bytes = self.unopened_bytes.saturating_sub(bytes);
            }
        }
    }

    /// A batch of the unopened listing `h` was read: it is now the most
    /// recently read.
    fn touch_unopened(&mut self, h: u32) {
        if self.unopened.back() == Some(&h) {
            return;
        }
        if let Some(i) = self.unopened.iter().position(|&x| x == h) {
            self.unopened.remove(i);
            self.unopened.push_back(h);
        }
    }

    fn keep(&mut self, h: u32, opened: bool, dir: Ino, snap: Arc<Vec<Snap>>) {
        if opened {
            self.by_handle.insert(h, (dir, snap, 0));
            return;
        }
        self.forget_unopened(h);
        let bytes = snapshot_bytes(&snap);
        self.unopened_bytes += bytes;
        self.by_handle.insert(h, (dir, snap, bytes));
        self.unopened.push_back(h);
        while self.unopened.len() > MAX_UNOPENED_LISTINGS
            || (self.unopened_bytes > MAX_UNOPENED_BYTES && self.unopened.len() > 1)
        {
            let Some(old) = self.unopened.front().copied() else {
                break;
            };
            self.forget_unopened(old);
        }
    }
}

/// One entry handed to a READDIR(PLUS) reply: `offset` is the cookie of
/// the entry after it; `attr` is there for READDIRPLUS only.
pub struct DirItem<'a> {
    /// The kernel's node id (already through [`to_fuse`]); `attr.ino` is
    /// the engine's inode number.
    pub ino: u64,
    pub offset: u64,
    pub kind: FileKind,
    pub name: &'a [u8],
    pub attr: Option<&'a Attr>,
}

/// The state of one mount's FUSE service over its engine.
pub struct Service {
    pub(crate) fs: Arc<Fs>,
    /// UFS2 (its inodes keep a birth time; UFS1's do not).
    has_birthtime: bool,
    /// FUSE_STATX served (`-o btime=on`); refused otherwise, which turns
    /// the kernel's statx requests off for the connection.
    btime: bool,
    /// Snapshots of directories being listed, by the handle in the upper
    /// half of their cookies (see [`Service::readdir`]).
    dirs: Mutex<Listings>,
    next_fh: AtomicU64,
    /// Zero-message opendir (`-o dircache=on`): OPENDIR answers ENOSYS, so
    /// the kernel sends no OPENDIR and no RELEASEDIR again and caches
    /// listings itself (FOPEN_CACHE_DIR, emptied by every change it makes
    /// to the directory). Turned off at INIT by a kernel that cannot open
    /// directories without asking (before Linux 5.1).
    dircache: AtomicBool,
    /// The kernel caches writes (`-o writeback`).
    pub(crate) writeback: bool,
    /// Move `/dev/fuse` request threads to their clients' CPUs
    /// (`-o affinity=follow`); the io_uring rings are per CPU already.
    follower: Option<Follower>,
    /// Requests received, by opcode (`ufskit stats`).
    pub(crate) requests: Arc<Requests>,
    /// Write-back caching: the channel for telling the kernel its cached
    /// attributes of an inode are stale (set once the session exists).
    pub(crate) notifier: Arc<Mutex<Option<fuser::Notifier>>>,
    /// Wakes the thread that applies forgets no request applied.
    pub(crate) bell: Arc<crate::reaper::Bell>,
    /// Wakes the thread that holds idle CPUs polling while requests flow
    /// (`-o cpulatency=auto`).
    pub(crate) cpu_latency: Arc<crate::cpulatency::Gate>,
    /// Ring threads poll between requests on a quiet machine
    /// (`-o spin=auto`).
    pub(crate) handoff: Arc<crate::handoff::Handoff>,
    /// Write-back caching: files whose cached data the engine refused for
    /// lack of space. The writer learns it at its next write(): the
    /// kernel's attributes of the file are invalidated, so that write asks
    /// for them first, and that one question is answered ENOSPC.
    out_of_space: Mutex<HashSet<Ino>>,
    /// Extended attributes are served (`-o noxattr` turns them off: every
    /// attribute request is answered ENOSYS, which the kernel remembers and
    /// answers EOPNOTSUPP itself from then on).
    xattrs: bool,
    /// POSIX ACLs through `system.posix_acl_*` (`-o acl=on|off`): the
    /// kernel enforces them (FUSE_POSIX_ACL) and sends creation modes
    /// without the umask applied (FUSE_DONT_MASK), which is then applied
    /// here unless a default ACL takes its place.
    pub(crate) acls: bool,
    /// What INIT asks about READDIRPLUS (`-o readdirplus=`).
    pub(crate) readdirplus: crate::ReaddirPlus,
    /// Whether READDIRPLUS replies send files' names alone (`auto`).
    pub(crate) bare_names: crate::bare_names::BareNames,
    /// When a name was last removed (unlink, rmdir, rename), in ms since
    /// `epoch`: the forgets that free its file follow within moments.
    removed_ms: AtomicU64,
    epoch: std::time::Instant,
    /// A duplicate of the session's `/dev/fuse` descriptor: it polls
    /// readable while the kernel has requests queued for this daemon
    /// (FORGETs among them), see [`Service::statfs`].
    pub(crate) kernel_queue: std::sync::OnceLock<std::os::fd::OwnedFd>,
}

/// A GETXATTR or LISTXATTR answer: the kernel asks with a buffer size of 0
/// to learn how big the value is, then with room for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum XattrReply {
    Size(u32),
    Data(Vec<u8>),
}

fn fit(size: u32, bytes: Vec<u8>) -> Result<XattrReply, Errno> {
    let len = u32::try_from(bytes.len()).map_err(|_| libc::E2BIG)?;
    if size == 0 {
        Ok(XattrReply::Size(len))
    } else if len > size {
        Err(libc::ERANGE)
    } else {
        Ok(XattrReply::Data(bytes))
    }
}

/// How long after a removal `statfs` waits for the removed files' forgets
/// ([`Service::statfs`]), and for how long at most.
pub const RECENT_REMOVAL: Duration = Duration::from_millis(100);
/// (25 ms: on a machine busy with other programs the kernel's FORGET of
/// a just-removed file took more than 4 ms to arrive; the wait ends as
/// soon as it does.)
pub const FORGET_WAIT: Duration = Duration::from_millis(25);

/// How long a wait for forgets goes on while the kernel has requests
/// queued on `/dev/fuse` ([`Service::with_forgets`]): on a machine whose
/// CPUs are all busy, the thread that reads them can wait that long to
/// run.
pub const QUEUED_WAIT: Duration = Duration::from_millis(500);

/// How often a wait for forgets looks again ([`Service::with_forgets`]).
const FORGET_POLL: Duration = Duration::from_micros(200);

/// How long an operation that found the disk full waits for the forgets
/// of removed files ([`Service::retry_when_full`]).
pub const FULL_WAIT: Duration = Duration::from_millis(50);

/// The credentials a `security.*` request runs with: the kernel has
/// decided already (its capability and LSM hooks gate a process's own
/// `setxattr`/`removexattr` of these names, CAP_SETFCAP or CAP_SYS_ADMIN),
/// and it sends some on behalf of an unprivileged writer (removing
/// `security.capability` when that writer changes the file), which must
/// not fail for want of root. Other system attributes are the superuser's.
fn security_cred(name: &[u8], c: &Caller) -> ufs::Cred {
    if name.starts_with(b"security.") {
        ufs::Cred::ROOT
    } else {
        c.cred()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Service {
    pub fn new(fs: Arc<Fs>, writeback: bool, follow_clients: bool) -> Self {
        let requests = Arc::new(Requests::default());
        Service {
            has_birthtime: !fs.variant().is_ufs1(),
            btime: false,
            fs,
            dirs: Mutex::new(Listings::default()),
            next_fh: AtomicU64::new(1),
            dircache: AtomicBool::new(true),
            writeback,
            follower: if follow_clients {
                Follower::new()
            } else {
                None
            },
            bare_names: crate::bare_names::BareNames::new(requests.clone()),
            removed_ms: AtomicU64::new(0),
            epoch: std::time::Instant::now(),
            kernel_queue: std::sync::OnceLock::new(),
            requests,
            notifier: Arc::new(Mutex::new(None)),
            bell: Arc::default(),
            cpu_latency: Arc::default(),
            handoff: Arc::default(),
            out_of_space: Mutex::new(HashSet::new()),
            xattrs: true,
            acls: true,
            readdirplus: crate::ReaddirPlus::Auto,
        }
    }

    /// Zero-message opendir and the kernel's listing cache (on), or a
    /// real OPENDIR and RELEASEDIR per listing (off).
    pub fn with_dircache(self, on: bool) -> Self {
        self.dircache.store(on, Ordering::Relaxed);
        self
    }

    /// Whether OPENDIR answers ENOSYS (see `dircache`).
    pub fn dircache(&self) -> bool {
        self.dircache.load(Ordering::Relaxed)
    }

    /// The kernel cannot open directories without OPENDIR: serve it.
    pub fn no_dircache(&self) {
        self.dircache.store(false, Ordering::Relaxed);
    }

    /// READDIRPLUS always, never, or as the kernel decides.
    pub fn with_readdirplus(mut self, plus: crate::ReaddirPlus) -> Self {
        self.readdirplus = plus;
        self
    }

    /// Serve POSIX ACLs or not (`-o acl=on|off`; needs attributes).
    pub fn with_acls(mut self, on: bool) -> Self {
        self.acls = on && self.xattrs;
        self
    }

    /// Serve extended attributes or not (`-o xattr=on|off`).
    pub fn with_xattrs(mut self, on: bool) -> Self {
        self.xattrs = on;
        self.acls &= on;
        self
    }

    /// Every request from `/dev/fuse` starts here: counts it and keeps
    /// the serving thread near its client.
    pub fn begin(&self, op: Op, pid: u32) {
        self.requests.count(op);
        self.cpu_latency.touch();
        if let Some(f) = &self.follower {
            f.follow(pid);
        }
    }

    /// Every request from an io_uring ring starts here (the ring's thread
    /// is on the client's CPU already).
    pub fn begin_uring(&self, op: Op) {
        self.requests.count_uring(op);
        self.cpu_latency.touch();
        self.handoff.touch();
    }

    /// A directory moved to another parent: its `..` changed, which the
    /// kernel does not know (it marks only the two parents' cached
    /// listings stale), so its cached listing is dropped (a thread of its
    /// own, as for [`note_out_of_space`](Self::note_out_of_space)).
    fn drop_cached_listing(&self, ino: Ino) {
        if self.dircache() {
            self.inval_inode_later(ino, 0, "dropping the cached listing of");
        }
    }

    /// Has the kernel drop what it caches of `ino` (its attributes; with
    /// `offset` 0 also its pages) from a thread of its own: the
    /// notification must not wait inside the request that caused it.
    /// `what` starts the log line if it fails.
    fn inval_inode_later(&self, ino: Ino, offset: i64, what: &'static str) {
        let notifier = lock(&self.notifier).clone();
        if let Some(n) = notifier {
            let _ = std::thread::Builder::new()
                .name("ufs-notify".into())
                .spawn(move || {
                    if let Err(e) = n.inval_inode(fuser::INodeNo(to_fuse(ino)), offset, 0) {
                        log(format_args!("{what} inode {ino}: {e}"));
                    }
                });
        }
    }

    /// Linux's rule for a write or an allocation (`file_remove_privs`,
    /// `setattr_should_drop_suidgid`), applied here because the kernel
    /// leaves part of it to the server: by a writer without CAP_FSETID,
    /// setuid goes, and setgid when the group may execute or the writer is
    /// not in the file's group. The kernel marks only the writes through
    /// its page cache (`kernel_kill`, FUSE_WRITE_KILL_SUIDGID); an O_DIRECT
    /// write on a file opened without FOPEN_DIRECT_IO and fallocate come
    /// unmarked (xfstests generic/355, 683). The kernel is told to drop
    /// the mode it cached.
    fn drop_setid(&self, c: &Caller, ino: Ino, kernel_kill: bool) {
        if !kernel_kill && c.uid == 0 {
            return;
        }
        let Ok(a) = self.fs.getattr(ino) else {
            return;
        };
        if a.kind != FileKind::File || a.perm & 0o6000 == 0 {
            return;
        }
        // Write-back data arrives from the kernel's flusher: the mark is
        // all there is to go by.
        if !kernel_kill && c.may_keep_setid() {
            return;
        }
        let outsider = c.uid != 0 && !c.in_group_or_capable(a.gid);
        if self.fs.drop_setid(ino, outsider).unwrap_or(false) {
            self.inval_attrs_now(ino);
        }
    }

    /// Has the kernel drop the attributes it caches of `ino` before the
    /// request that changed them behind its back is answered (a stat right
    /// after it must see the change). Attributes only: the kernel takes no
    /// lock a request in flight may hold for that, so it cannot wait on
    /// the request that sends it.
    fn inval_attrs_now(&self, ino: Ino) {
        let notifier = lock(&self.notifier).clone();
        if let Some(n) = notifier {
            if let Err(e) = n.inval_inode(fuser::INodeNo(to_fuse(ino)), -1, 0) {
                log(format_args!(
                    "dropping the cached attributes of inode {ino}: {e}"
                ));
            }
        }
    }

    /// Write-back caching: a write of cached data failed for lack of space.
    /// Marks the file and has the kernel drop its attributes (from a
    /// thread of its own: the notification must not wait inside the
    /// request that caused it).
    fn note_out_of_space(&self, ino: Ino) {
        lock(&self.out_of_space).insert(ino);
        self.inval_inode_later(ino, -1, "telling the kernel it is full:");
    }

    /// Runs `op` (an engine call that changes nothing when it fails), and
    /// again when it failed for want of space while removed files still
    /// held theirs: `rm big; cp new .` on a full disk could otherwise see
    /// ENOSPC for space that is free a moment later. Waits at most
    /// [`FULL_WAIT`] for forgets to arrive; a file held open keeps its
    /// space, and the error stands.
    fn retry_when_full<T>(&self, op: impl Fn() -> ufs::Result<T>) -> ufs::Result<T> {
        self.with_forgets(
            FULL_WAIT,
            op,
            |r| matches!(r, Err(e) if e.kind == ufs::ErrorKind::NoSpace),
        )
    }

    /// Runs `op`, and again each time forgets have come in, while
    /// `unsettled` says its answer may change with them and removed files
    /// still hold their space. The kernel queues a removed file's FORGET
    /// during the removal (or when its last RELEASE is answered), but on
    /// `/dev/fuse`, unordered with the requests on the io_uring rings, so a
    /// request right after a removal can arrive before it.
    ///
    /// Waits at most `wait`, or [`QUEUED_WAIT`] while the kernel still has
    /// requests queued on `/dev/fuse` (forgets on their way to a thread
    /// the machine has not run yet). An answer is returned only if it was
    /// computed after the last forget this wait saw applied: the reaper
    /// (or another request) may apply them between two looks.
    fn with_forgets<T>(
        &self,
        wait: Duration,
        op: impl Fn() -> T,
        unsettled: impl Fn(&T) -> bool,
    ) -> T {
        let start = std::time::Instant::now();
        loop {
            let orphans = self.fs.has_orphans();
            // The engine applies queued forgets at the start of each call.
            let r = op();
            if !orphans || !unsettled(&r) || start.elapsed() >= wait.max(QUEUED_WAIT) {
                return r;
            }
            loop {
                if !self.fs.has_orphans() || self.fs.forgets_pending() {
                    break;
                }
                let bound = if self.kernel_queue_readable() {
                    QUEUED_WAIT
                } else {
                    wait
                };
                if start.elapsed() >= bound {
                    return r;
                }
                std::thread::sleep(FORGET_POLL);
            }
        }
    }

    /// A new kernel reference to what `r` found or made.
    fn entry(&self, r: ufs::Result<Attr>) -> Result<Attr, Errno> {
        match r {
            Ok(a) => {
                self.fs.remember(a.ino);
                Ok(a)
            }
            Err(e) => Err(errno(&e)),
        }
    }

    /// LOOKUP. "." in any node is how the kernel decodes a file handle
    /// (NFS, `open_by_handle_at`) whose inode it dropped: the node itself,
    /// by number (`Fs::lookup_by_number`). ".." in a directory, its parent
    /// for the same decoding, is the directory's own entry.
    pub fn lookup(&self, parent: u64, name: &[u8]) -> Result<Attr, Errno> {
        if name == b"." {
            return self
                .fs
                .lookup_by_number(to_ufs(parent))
                .map_err(|e| errno(&e));
        }
        let a = self
            .fs
            .lookup_remembered(to_ufs(parent), name)
            .map_err(|e| errno(&e))?;
        if a.kind != FileKind::Dir {
            self.bare_names.looked_up(parent);
        }
        Ok(a)
    }

    /// The kernel dropped `n` references to `nodeid`.
    /// FORGET: queued for the next request, or the reaper, to apply
    /// (see [`crate::reaper`]).
    pub fn forget(&self, nodeid: u64, n: u64) {
        self.fs.forget_later(to_ufs(nodeid), n);
        self.bell.ring();
    }

    /// `with_handle`: the kernel asks on behalf of an open file (a write
    /// with write-back caching asks this way after its file ran out of
    /// space, see [`Service::write`]).
    /// Whether files have a birth time to report (statx's btime).
    pub fn has_birthtime(&self) -> bool {
        self.has_birthtime
    }

    /// Serve FUSE_STATX (birth times) or refuse it (see `btime`).
    pub fn with_btime(mut self, on: bool) -> Self {
        self.btime = on;
        self
    }

    /// Whether FUSE_STATX is served.
    pub fn serves_statx(&self) -> bool {
        self.btime
    }

    pub fn getattr(&self, nodeid: u64, with_handle: bool) -> Result<Attr, Errno> {
        let ino = to_ufs(nodeid);
        if self.writeback && with_handle && lock(&self.out_of_space).remove(&ino) {
            return Err(libc::ENOSPC);
        }
        self.fs.getattr(ino).map_err(|e| errno(&e))
    }

    pub fn setattr(&self, c: &Caller, nodeid: u64, s: &SetAttr) -> Result<Attr, Errno> {
        self.fs
            .setattr(to_ufs(nodeid), s, c.cred())
            .map_err(|e| errno(&e))
    }

    /// IOCTL: the Linux inode flags (`lsattr`, `chattr`; the kernel's
    /// fileattr calls send FS_IOC_GETFLAGS and FS_IOC_SETFLAGS here),
    /// mapped onto FreeBSD's file flags: immutable and append-only to the
    /// system flags (Linux asks CAP_LINUX_IMMUTABLE for them, FreeBSD the
    /// super-user), nodump to the user's. Other FreeBSD flags (no-unlink,
    /// the user's immutable and append-only) are kept as they are and shown
    /// as the Linux flag they behave like. Anything else is ENOTTY.
    pub fn ioctl(
        &self,
        c: &Caller,
        nodeid: u64,
        cmd: u32,
        in_data: &[u8],
    ) -> Result<Vec<u8>, Errno> {
        const GETFLAGS: u32 = 0x8008_6601; // _IOR('f', 1, long)
        const SETFLAGS: u32 = 0x4008_6602; // _IOW('f', 2, long)
        const FSGETXATTR: u32 = 0x801c_581f; // _IOR('X', 31, struct fsxattr)
        const FSSETXATTR: u32 = 0x401c_5820; // _IOW('X', 32, struct fsxattr)
        let ino = to_ufs(nodeid);
        let current = self.fs.getattr(ino).map_err(|e| errno(&e))?.flags;
        match cmd {
            GETFLAGS => Ok(ufs::linux_inode_flags(current).to_ne_bytes().to_vec()),
            // struct fsxattr (28 bytes): the kernel reads the flags this
            // way before it changes them (vfs_fileattr_set), and xfs_io
            // uses it; only fsx_xflags means anything here.
            FSGETXATTR => {
                let mut out = vec![0u8; 28];
                let x = xflags_of(ufs::linux_inode_flags(current));
                out[..4].copy_from_slice(&x.to_ne_bytes());
                Ok(out)
            }
            SETFLAGS | FSSETXATTR => {
                let raw: [u8; 4] = in_data
                    .get(..4)
                    .and_then(|b| b.try_into().ok())
                    .ok_or(libc::EINVAL)?;
                let v = u32::from_ne_bytes(raw);
                let linux = if cmd == SETFLAGS {
                    Some(v)
                } else {
                    flags_of_xflags(v)
                };
                let f = linux
                    .and_then(|l| ufs::with_linux_inode_flags(current, l))
                    .ok_or(libc::EOPNOTSUPP)?;
                let s = SetAttr {
                    flags: Some(f),
                    ..Default::default()
                };
                self.fs.setattr(ino, &s, c.cred()).map_err(|e| errno(&e))?;
                Ok(Vec::new())
            }
            _ => Err(libc::ENOTTY),
        }
    }

    /// GETXATTR. Anyone may read ACLs and `security.*` (the kernel asks
    /// for `security.capability` on behalf of any writer); a name FreeBSD
    /// cannot hold has no value.
    pub fn getxattr(
        &self,
        c: &Caller,
        nodeid: u64,
        name: &[u8],
        size: u32,
    ) -> Result<XattrReply, Errno> {
        if !self.xattrs {
            return Err(libc::ENOSYS);
        }
        let ino = to_ufs(nodeid);
        // Linux's xattr_permission: others read no trusted.* attribute.
        if name.starts_with(b"trusted.") && c.uid != 0 {
            return Err(libc::ENODATA);
        }
        let v = match LinuxXattr::parse(name).ok_or(libc::ENODATA)? {
            LinuxXattr::Acl(_) if !self.acls => return Err(libc::EOPNOTSUPP),
            LinuxXattr::Acl(kind) => match self.fs.get_acl(ino, kind).map_err(|e| errno(&e))? {
                Some(entries) => acl_to_linux(&entries),
                None => return Err(libc::ENODATA),
            },
            LinuxXattr::Raw(ns, n) => self
                .fs
                .getxattr(ino, ns, n, security_cred(n, c))
                .map_err(|e| errno(&e))?,
        };
        fit(size, v)
    }

    /// LISTXATTR: the names the caller may read, each ending in NUL.
    pub fn listxattr(&self, c: &Caller, nodeid: u64, size: u32) -> Result<XattrReply, Errno> {
        if !self.xattrs {
            return Err(libc::ENOSYS);
        }
        let names = self
            .fs
            .listxattr(to_ufs(nodeid), ufs::Cred::ROOT)
            .map_err(|e| errno(&e))?;
        let mut out = Vec::new();
        for (ns, n) in names {
            let (linux, public) = linux_xattr_name(ns, &n);
            if (public || c.uid == 0) && (self.acls || !linux.starts_with(b"system.posix_acl_")) {
                out.extend_from_slice(&linux);
                out.push(0);
            }
        }
        fit(size, out)
    }

    /// SETXATTR with Linux's `XATTR_CREATE` (1) and `XATTR_REPLACE` (2).
    pub fn setxattr(
        &self,
        c: &Caller,
        nodeid: u64,
        name: &[u8],
        value: &[u8],
        flags: u32,
    ) -> Result<(), Errno> {
        if !self.xattrs {
            return Err(libc::ENOSYS);
        }
        let ino = to_ufs(nodeid);
        match LinuxXattr::parse(name).ok_or(libc::EOPNOTSUPP)? {
            LinuxXattr::Acl(_) if !self.acls => Err(libc::EOPNOTSUPP),
            LinuxXattr::Acl(kind) => {
                let entries = acl_from_linux(value).ok_or(libc::EINVAL)?;
                // posix_acl_update_mode: an access ACL that sets the mode
                // drops setgid unless the caller may keep it (the kernel
                // leaves this to the server without FUSE_SETXATTR_EXT).
                let kill_sgid = kind == ufs::AclKind::Access && {
                    let gid = self.fs.getattr(ino).map_err(|e| errno(&e))?.gid;
                    !c.in_group_or_capable(gid)
                };
                self.fs
                    .set_acl(ino, kind, Some(&entries), kill_sgid, c.cred())
                    .map_err(|e| errno(&e))
            }
            LinuxXattr::Raw(ns, n) => {
                let how = match flags & 3 {
                    0 => ufs::XattrSet::Either,
                    1 => ufs::XattrSet::Create,
                    2 => ufs::XattrSet::Replace,
                    _ => return Err(libc::EINVAL),
                };
                self.fs
                    .setxattr(ino, ns, n, value, how, security_cred(n, c))
                    .map_err(|e| errno(&e))
            }
        }
    }

    pub fn removexattr(&self, c: &Caller, nodeid: u64, name: &[u8]) -> Result<(), Errno> {
        if !self.xattrs {
            return Err(libc::ENOSYS);
        }
        let ino = to_ufs(nodeid);
        match LinuxXattr::parse(name).ok_or(libc::ENODATA)? {
            LinuxXattr::Acl(_) if !self.acls => Err(libc::EOPNOTSUPP),
            LinuxXattr::Acl(kind) => self
                .fs
                .set_acl(ino, kind, None, false, c.cred())
                .map_err(|e| errno(&e)),
            LinuxXattr::Raw(ns, n) => self
                .fs
                .removexattr(ino, ns, n, security_cred(n, c))
                .map_err(|e| errno(&e)),
        }
    }

    pub fn readlink(&self, nodeid: u64) -> Result<Vec<u8>, Errno> {
        self.fs.readlink(to_ufs(nodeid)).map_err(|e| errno(&e))
    }

    /// `mode` with its file type; the kernel has already applied the umask
    /// (no FUSE_DONT_MASK).
    /// `umask`: the creator's, which the kernel leaves to us with ACLs on
    /// (FUSE_DONT_MASK); without them it has applied it to `mode` already.
    pub fn mknod(
        &self,
        c: &Caller,
        parent: u64,
        name: &[u8],
        mode: u32,
        rdev: u32,
        umask: u32,
    ) -> Result<Attr, Errno> {
        let parent = to_ufs(parent);
        self.entry(self.retry_when_full(|| {
            if self.acls {
                self.fs
                    .mknod_umask(parent, name, mode, rdev, umask, c.cred())
            } else {
                self.fs.mknod(parent, name, mode, rdev, c.cred())
            }
        }))
    }

    /// FUSE_TMPFILE (`open(O_TMPFILE)`): an unnamed regular file in
    /// `parent`'s place; `mode` and `umask` as a create's.
    pub fn tmpfile(&self, c: &Caller, parent: u64, mode: u32, umask: u32) -> Result<Attr, Errno> {
        let parent = to_ufs(parent);
        let umask = self.acls.then_some(umask);
        self.entry(self.retry_when_full(|| self.fs.tmpfile(parent, mode, umask, c.cred())))
    }

    pub fn mkdir(
        &self,
        c: &Caller,
        parent: u64,
        name: &[u8],
        mode: u32,
        umask: u32,
    ) -> Result<Attr, Errno> {
        let parent = to_ufs(parent);
        self.entry(self.retry_when_full(|| {
            if self.acls {
                self.fs.mkdir_umask(parent, name, mode, umask, c.cred())
            } else {
                self.fs.mkdir(parent, name, mode, c.cred())
            }
        }))
    }

    pub fn unlink(&self, parent: u64, name: &[u8]) -> Result<(), Errno> {
        self.fs
            .unlink(to_ufs(parent), name)
            .map_err(|e| errno(&e))?;
        self.removed();
        Ok(())
    }

    pub fn rmdir(&self, parent: u64, name: &[u8]) -> Result<(), Errno> {
        self.fs.rmdir(to_ufs(parent), name).map_err(|e| errno(&e))?;
        self.removed();
        Ok(())
    }

    pub fn symlink(
        &self,
        c: &Caller,
        parent: u64,
        name: &[u8],
        target: &[u8],
    ) -> Result<Attr, Errno> {
        self.entry(self.retry_when_full(|| self.fs.symlink(to_ufs(parent), name, target, c.cred())))
    }

    /// `flags`: `RENAME_NOREPLACE`, `RENAME_EXCHANGE`, `RENAME_WHITEOUT`
    /// (overlayfs's upper layer; the whiteout is the caller's), with or
    /// without `RENAME_NOREPLACE`; anything else (newer flags) is EINVAL.
    pub fn rename(
        &self,
        c: &Caller,
        parent: u64,
        name: &[u8],
        newparent: u64,
        newname: &[u8],
        flags: u32,
    ) -> Result<(), Errno> {
        let whiteout = flags & RENAME_WHITEOUT != 0;
        let mode = match flags & !RENAME_WHITEOUT {
            0 => RenameMode::Replace,
            RENAME_NOREPLACE => RenameMode::NoReplace,
            RENAME_EXCHANGE if !whiteout => RenameMode::Exchange,
            _ => return Err(libc::EINVAL),
        };
        let (from, to) = (to_ufs(parent), to_ufs(newparent));
        // The directories that change parent (and so their `..`).
        let moving = |dir: Ino, n: &[u8]| {
            self.fs
                .lookup(dir, n)
                .ok()
                .filter(|a| a.kind == FileKind::Dir)
                .map(|a| a.ino)
        };
        let mut moved = Vec::new();
        if from != to {
            moved.extend(moving(from, name));
            if mode == RenameMode::Exchange {
                moved.extend(moving(to, newname));
            }
        }
        if whiteout {
            self.retry_when_full(|| {
                self.fs
                    .rename_whiteout(from, name, to, newname, mode, c.cred())
            })
        } else {
            self.fs.rename(from, name, to, newname, mode)
        }
        .map_err(|e| errno(&e))?;
        for ino in moved {
            self.drop_cached_listing(ino);
        }
        if mode == RenameMode::Replace {
            // A replaced target is removed.
            self.removed();
        }
        Ok(())
    }

    pub fn link(&self, nodeid: u64, newparent: u64, newname: &[u8]) -> Result<Attr, Errno> {
        self.entry(
            self.retry_when_full(|| self.fs.link(to_ufs(nodeid), to_ufs(newparent), newname)),
        )
    }

    pub fn read(&self, nodeid: u64, offset: u64, size: u32) -> Result<Vec<u8>, Errno> {
        self.fs
            .read(to_ufs(nodeid), offset, size as usize)
            .map_err(|e| errno(&e))
    }

    /// `kill`: the kernel marks the writer as one that must clear setuid
    /// and setgid (FUSE_WRITE_KILL_SUIDGID).
    pub fn write(
        &self,
        c: &Caller,
        nodeid: u64,
        offset: u64,
        data: &[u8],
        kill: bool,
    ) -> Result<u32, Errno> {
        let ino = to_ufs(nodeid);
        self.drop_setid(c, ino, kill);
        let r = self.retry_when_full(|| self.fs.write_killing(ino, offset, data, c.cred(), kill));
        match r {
            Ok(n) => Ok(u32::try_from(n).unwrap_or(u32::MAX)),
            Err(e) => {
                if self.writeback && e.kind == ufs::ErrorKind::NoSpace {
                    self.note_out_of_space(ino);
                }
                Err(errno(&e))
            }
        }
    }

    /// COPY_FILE_RANGE (`copy_file_range(2)`): the daemon copies from one
    /// file to the other itself, so the data crosses neither the kernel nor
    /// the FUSE channel. At most [`COPY_CHUNK`] times 64 per request (the
    /// caller asks again for the rest, as with any short copy). Zeros that
    /// end a piece past the end of the destination are not written: the
    /// destination grows by a hole there, as the source has one. The kernel has written back
    /// its cached pages of both ranges before asking, and drops the
    /// destination's after (fs/fuse/file.c).
    pub fn copy_file_range(
        &self,
        c: &Caller,
        node_in: u64,
        off_in: u64,
        node_out: u64,
        off_out: u64,
        len: u64,
    ) -> Result<u64, Errno> {
        let (src, dst) = (to_ufs(node_in), to_ufs(node_out));
        let len = len.min(64 * COPY_CHUNK as u64);
        let mut dst_size = self.fs.getattr(dst).map_err(|e| errno(&e))?.size;
        let mut done = 0u64;
        let mut pending_end = 0u64;
        while done < len {
            let want = (len - done).min(COPY_CHUNK as u64) as usize;
            let data = self
                .fs
                .read(src, off_in + done, want)
                .map_err(|e| errno(&e))?;
            if data.is_empty() {
                break;
            }
            let at = off_out + done;
            // Past the destination's end, trailing zeros are left a hole.
            let end = at + data.len() as u64;
            let keep = if end > dst_size {
                let past = (dst_size.saturating_sub(at)) as usize;
                let last = data.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
                last.max(past).min(data.len())
            } else {
                data.len()
            };
            if keep < data.len() {
                pending_end = pending_end.max(end);
            }
            if keep > 0 {
                let n = self.write(c, node_out, at, &data[..keep], false)?;
                dst_size = dst_size.max(at + u64::from(n));
                if (n as usize) < keep {
                    done += u64::from(n);
                    break;
                }
            }
            done += data.len() as u64;
        }
        if pending_end > dst_size {
            let s = SetAttr {
                size: Some(pending_end),
                ..SetAttr::default()
            };
            self.retry_when_full(|| self.fs.setattr(dst, &s, c.cred()))
                .map_err(|e| errno(&e))?;
        }
        Ok(done)
    }

    /// LSEEK: the kernel asks only for SEEK_DATA and SEEK_HOLE (it does
    /// SEEK_SET, SEEK_CUR and SEEK_END itself).
    /// With `writeback`, the kernel holds written pages the daemon has not
    /// seen and does not write them back before asking: ENOSYS, and the
    /// kernel answers from its own size from then on (all data, one hole
    /// at the end).
    pub fn lseek(&self, nodeid: u64, offset: i64, whence: i32) -> Result<u64, Errno> {
        if self.writeback {
            return Err(libc::ENOSYS);
        }
        let data = match whence {
            libc::SEEK_DATA => true,
            libc::SEEK_HOLE => false,
            _ => return Err(libc::EINVAL),
        };
        let off = u64::try_from(offset).map_err(|_| libc::ENXIO)?;
        self.fs
            .seek_data_hole(to_ufs(nodeid), off, data)
            .map_err(|e| errno(&e))
    }

    /// FALLOCATE: mode 0 and FALLOC_FL_KEEP_SIZE allocate (`Fs::allocate`),
    /// FALLOC_FL_ZERO_RANGE zeroes, FALLOC_FL_PUNCH_HOLE (with KEEP_SIZE)
    /// frees (`Fs::punch_hole`); collapsing and inserting ranges are
    /// EOPNOTSUPP (no UFS counterpart).
    pub fn fallocate(
        &self,
        c: &Caller,
        nodeid: u64,
        offset: u64,
        length: u64,
        mode: i32,
    ) -> Result<(), Errno> {
        let keep = mode & libc::FALLOC_FL_KEEP_SIZE != 0;
        let zero = mode & libc::FALLOC_FL_ZERO_RANGE != 0;
        let punch = mode & libc::FALLOC_FL_PUNCH_HOLE != 0;
        if mode
            & !(libc::FALLOC_FL_KEEP_SIZE | libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_PUNCH_HOLE)
            != 0
            || (punch && (!keep || zero))
        {
            return Err(libc::EOPNOTSUPP);
        }
        if length == 0 {
            return Err(libc::EINVAL);
        }
        let ino = to_ufs(nodeid);
        if punch {
            self.fs.punch_hole(ino, offset, length, c.cred())
        } else {
            // Space that removed files still hold comes back with their
            // forgets (see `retry_when_full`); an allocation fills holes
            // only, so trying again after a partial one is harmless.
            self.retry_when_full(|| self.fs.allocate(ino, offset, length, keep, zero, c.cred()))
        }
        .map_err(|e| errno(&e))?;
        // Once the request proved valid (Linux kills after its checks).
        self.drop_setid(c, ino, false);
        Ok(())
    }

    /// fsync and fsyncdir: everything is made durable (the engine's fsync
    /// is file-system wide).
    pub fn fsync(&self, nodeid: u64) -> Result<(), Errno> {
        self.fs.fsync(to_ufs(nodeid)).map_err(|e| errno(&e))
    }

    /// A directory handle; its snapshot is taken at the first read.
    /// OPEN of a regular file: the kernel does not know FreeBSD's file
    /// flags, so an open for writing is refused here, as `ufs_access` and
    /// `ufs_open` refuse it: never for an immutable file, and for an
    /// append-only one only with O_APPEND (EPERM).
    pub fn open(&self, nodeid: u64, flags: u32) -> Result<(), Errno> {
        let writes = flags & libc::O_ACCMODE as u32 != libc::O_RDONLY as u32
            || flags & libc::O_TRUNC as u32 != 0;
        if !writes {
            return Ok(());
        }
        let f = self
            .fs
            .getattr(to_ufs(nodeid))
            .map_err(|e| errno(&e))?
            .flags;
        if f & ufs_format::IMMUTABLE != 0
            || (f & ufs_format::APPEND != 0 && flags & libc::O_APPEND as u32 == 0)
        {
            return Err(libc::EPERM);
        }
        Ok(())
    }

    /// `fuse_open_out.open_flags` for an OPEN or CREATE with open(2) flags
    /// `flags`, for both transports. FOPEN_DIRECT_IO (the file bypasses the
    /// kernel's page cache) for a
    /// write-only open without `-o writeback`. Such a file descriptor can
    /// neither read nor be mapped, so it loses no caching, while its
    /// writes arrive one request per write(2): through the page cache a
    /// write that starts inside a page not cached is cut at that page's
    /// end (two requests for each of tar's 10 KiB records), and the first
    /// write to each file asks for `security.capability` (one more). The
    /// kernel drops cached pages the write covers, so other open files see
    /// the new data; setuid/setgid are killed here (FUSE_WRITE_KILL_SUIDGID)
    /// and the capability attribute by the engine ([`ufs::Fs::write_killing`]).
    pub fn open_reply_flags(&self, flags: u32) -> u32 {
        if !self.writeback && flags & libc::O_ACCMODE as u32 == libc::O_WRONLY as u32 {
            crate::uring::abi::FOPEN_DIRECT_IO
        } else {
            0
        }
    }

    /// OPENDIR: a handle for the listing, or ENOSYS with `dircache`
    /// (the kernel then opens directories without asking, and without
    /// RELEASEDIR). Access was checked by the kernel (default_permissions).
    pub fn opendir(&self) -> Result<u64, Errno> {
        if self.dircache() {
            return Err(libc::ENOSYS);
        }
        Ok(u64::from(self.new_handle()))
    }

    /// A listing handle: never 0 (which stands for "no OPENDIR"), below
    /// 2^31 so that every cookie is a positive `loff_t` (a negative one
    /// would make `seekdir` fail).
    fn new_handle(&self) -> u32 {
        loop {
            let h = (self.next_fh.fetch_add(1, Ordering::Relaxed) & 0x7fff_ffff) as u32;
            if h != 0 {
                return h;
            }
        }
    }

    /// Listings whose snapshots are held now.
    #[cfg(test)]
    pub(crate) fn listings_kept(&self) -> usize {
        lock(&self.dirs).by_handle.len()
    }

    pub fn releasedir(&self, fh: u64) {
        lock(&self.dirs).by_handle.remove(&(fh as u32));
    }

    /// Every entry of directory `dir`, in on-disk order, read in one engine
    /// call: reading in batches would release the engine lock in between,
    /// and an unlink on another request thread could then move a record
    /// behind the batch cookie.
    fn snapshot(&self, dir: Ino) -> ufs::Result<Vec<Snap>> {
        let ents = self.fs.readdir(dir, 0, usize::MAX)?;
        Ok(ents
            .into_iter()
            .map(|e| Snap {
                ino: e.ino,
                dtype: e.dtype,
                name: e.name,
            })
            .collect())
    }

    /// The handle and snapshot a READDIR or READDIRPLUS at `offset`
    /// reads (`fh` 0: no OPENDIR): a new snapshot at offset 0 (opendir or
    /// rewinddir), else the one the cookie names, or, if that one is gone
    /// (pushed out, or a cookie of another listing), a new one read from
    /// the cookie's index.
    fn dir_snapshot(&self, dir: Ino, fh: u64, offset: u64) -> ufs::Result<(u32, Arc<Vec<Snap>>)> {
        // An opened listing's snapshot is its file handle's, whatever the
        // cookie says.
        let h = if fh != 0 { fh as u32 } else { offset as u32 };
        let idx = offset >> 32;
        if offset != 0 {
            let mut l = lock(&self.dirs);
            if let Some((d, s, _)) = l.by_handle.get(&h) {
                if *d == dir {
                    let s = s.clone();
                    if fh == 0 {
                        l.touch_unopened(h);
                    }
                    return Ok((h, s));
                }
            }
        }
        let v = Arc::new(self.snapshot(dir)?);
        let opened = fh != 0;
        let h = if opened { fh as u32 } else { self.new_handle() };
        if (idx as usize) < v.len() || opened {
            lock(&self.dirs).keep(h, opened, dir, v.clone());
        }
        Ok((h, v))
    }

    /// READDIR (`plus` false) or READDIRPLUS from `offset`: hands entries
    /// to `add` until it returns false (the reply is full). With `plus`,
    /// each entry but `.` and `..` becomes a lookup reference in the kernel
    /// (fuse_direntplus_link), remembered before `add` as for LOOKUP; an
    /// entry `add` refused is not sent and its reference is given back.
    /// `bare_ok` (a transport that can send an entry with node id 0):
    /// with `readdirplus=auto`, non-directories may go without attributes
    /// (`attr: None`, no reference), as [`crate::bare_names`] decides.
    /// The name is looked up again: the kernel makes a dentry of it, which
    /// must name what the directory holds now (a name removed since the
    /// snapshot is skipped; its inode may already be another file's).
    pub fn readdir(
        &self,
        nodeid: u64,
        fh: u64,
        offset: u64,
        plus: bool,
        bare_ok: bool,
        add: &mut dyn FnMut(DirItem<'_>) -> bool,
    ) -> Result<(), Errno> {
        use ufs_format::dinode::dt::{DT_DIR, DT_UNKNOWN, DT_WHT};
        let dir = to_ufs(nodeid);
        let (h, snap) = self.dir_snapshot(dir, fh, offset).map_err(|e| errno(&e))?;
        let start = (offset >> 32) as usize;
        let bare = plus
            && bare_ok
            && self.readdirplus == crate::ReaddirPlus::Auto
            && self.bare_names.listing(nodeid, start == 0);
        let mut sent_bare = 0u32;
        // A listing without OPENDIR keeps its snapshot past its
        // end-of-directory request, until the bounds push it out: the
        // kernel caches what it read (FOPEN_CACHE_DIR) for every later
        // open of the directory, and when memory pressure (or a
        // drop_caches) takes a page of that cache in the middle of a later
        // reader's walk, it asks again from that reader's cookie. A new
        // snapshot from the cookie's index would then skip as many entries
        // as the reader had removed (`rm -r` met ENOTEMPTY that way).
        for (i, e) in snap.iter().enumerate().skip(start) {
            let next = ((i as u64 + 1) << 32) | u64::from(h);
            let dt = e.dtype;
            // Whiteouts too go whole (a full entry drops them).
            let alone = bare
                && i < crate::bare_names::BARE_MAX
                && dt != DT_DIR
                && dt != DT_UNKNOWN
                && dt != DT_WHT;
            if !plus || alone {
                let kind = match FileKind::from_dtype(e.dtype) {
                    Some(k) => k,
                    // DT_UNKNOWN (old images): ask the inode.
                    None => self
                        .fs
                        .getattr(e.ino)
                        .map(|a| a.kind)
                        .unwrap_or(FileKind::File),
                };
                let item = DirItem {
                    ino: to_fuse(e.ino),
                    offset: next,
                    kind,
                    name: &e.name,
                    attr: None,
                };
                if !add(item) {
                    break;
                }
                sent_bare += u32::from(alone);
                continue;
            }
            let dot = e.name == b"." || e.name == b"..";
            let now = if dot {
                self.fs.getattr(e.ino)
            } else {
                self.fs.lookup_remembered(dir, &e.name)
            };
            let Ok(a) = now else {
                continue;
            };
            let item = DirItem {
                ino: to_fuse(a.ino),
                offset: next,
                kind: a.kind,
                name: &e.name,
                attr: Some(&a),
            };
            if !add(item) {
                if !dot {
                    self.forget(to_fuse(a.ino), 1);
                }
                break;
            }
        }
        if bare {
            self.bare_names.sent(nodeid, sent_bare);
            self.requests
                .bare_entries
                .fetch_add(u64::from(sent_bare), Ordering::Relaxed);
        }
        Ok(())
    }

    /// Removed files count as free once their forgets are in: within
    /// [`RECENT_REMOVAL`] of a removal, the forgets on their way are
    /// waited for (at most [`FORGET_WAIT`]; a file held open keeps its
    /// space, and the wait ends at the bound).
    pub fn statfs(&self) -> ufs::StatFs {
        let removed = self.removed_ms.load(Ordering::Relaxed);
        if removed > 0 && self.ms_now().saturating_sub(removed) <= RECENT_REMOVAL.as_millis() as u64
        {
            return self.with_forgets(FORGET_WAIT, || self.fs.statfs(), |_| true);
        }
        self.fs.statfs()
    }

    /// Whether the kernel has requests queued on `/dev/fuse` that no
    /// thread has read yet (over io_uring, that queue carries only FORGETs
    /// and INTERRUPTs).
    fn kernel_queue_readable(&self) -> bool {
        use rustix::event::{poll, PollFd, PollFlags, Timespec};
        let Some(fd) = self.kernel_queue.get() else {
            return false;
        };
        let mut fds = [PollFd::new(fd, PollFlags::IN)];
        let now = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        poll(&mut fds, Some(&now)).is_ok_and(|n| n > 0) && fds[0].revents().contains(PollFlags::IN)
    }

    /// Milliseconds since `epoch`, plus one (0 in `removed_ms` is "never").
    fn ms_now(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64 + 1
    }

    fn removed(&self) {
        self.removed_ms.store(self.ms_now(), Ordering::Relaxed);
    }

    /// CREATE: a regular file with `mode`'s permission bits, opened.
    pub fn create(
        &self,
        c: &Caller,
        parent: u64,
        name: &[u8],
        mode: u32,
        umask: u32,
    ) -> Result<Attr, Errno> {
        self.mknod(c, parent, name, (mode & 0o7777) | libc::S_IFREG, 0, umask)
    }
}

/// Linux inode flags (FS_*_FL) as extended-attribute flags
/// (FS_XFLAG_*): immutable, append, nodump.
const FL_XFLAG: [(u32, u32); 3] = [(0x10, 0x8), (0x20, 0x10), (0x40, 0x80)];

fn xflags_of(flags: u32) -> u32 {
    FL_XFLAG
        .iter()
        .filter(|(fl, _)| flags & fl != 0)
        .fold(0, |x, (_, xf)| x | xf)
}

/// None when an xflag has no inode-flag counterpart here.
fn flags_of_xflags(x: u32) -> Option<u32> {
    let known = FL_XFLAG.iter().fold(0, |m, (_, xf)| m | xf);
    (x & !known == 0).then(|| {
        FL_XFLAG
            .iter()
            .filter(|(_, xf)| x & xf != 0)
            .fold(0, |f, (fl, _)| f | fl)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_mapping_is_a_swap() {
        assert_eq!(to_ufs(1), Ino::ROOT);
        assert_eq!(to_ufs(2), Ino::new(1));
        assert_eq!(to_fuse(Ino::ROOT), 1);
        assert_eq!(to_fuse(Ino::new(1)), 2);
        for n in [0u64, 3, 4, 1000, u64::MAX] {
            assert_eq!(to_ufs(to_fuse(Ino::new(n))), Ino::new(n));
        }
    }

    /// A file removed while the kernel still referenced it holds its space
    /// until the FORGET; a write that finds the disk full meanwhile waits
    /// for it (it arrives 10 ms late here) instead of failing, and fails
    /// after [`FULL_WAIT`] when the space stays held.
    #[test]
    fn a_write_on_a_full_disk_waits_for_the_forget_that_frees_space() {
        let dev = ufs::dev::MemDevice::new(32 << 20);
        ufs::newfs::newfs(&dev, &ufs::newfs::NewfsParams::default()).unwrap();
        let fs = Arc::new(ufs::Fs::open(Box::new(dev), ufs::MountOptions::default()).unwrap());
        let svc = Arc::new(Service::new(fs.clone(), false, false));
        let root = Caller {
            uid: 0,
            gid: 0,
            pid: 1,
        };
        let mk = |name: &[u8]| svc.mknod(&root, 1, name, 0o100644, 0, 0).unwrap().ino;
        let fill = |ino: Ino| {
            let chunk = vec![1u8; 1 << 20];
            let mut off = 0;
            while let Ok(n) = svc.write(&root, to_fuse(ino), off, &chunk, false) {
                if n == 0 {
                    break;
                }
                off += u64::from(n);
            }
        };
        let filler = mk(b"filler");
        fill(filler);
        let other = mk(b"other");
        assert_eq!(
            svc.write(&root, to_fuse(other), 0, &[2u8; 65536], false),
            Err(libc::ENOSPC)
        );
        // Removed, still referenced by the kernel (mknod gave it one).
        svc.unlink(1, b"filler").unwrap();
        let late = {
            let svc = svc.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(10));
                svc.forget(to_fuse(filler), 1);
            })
        };
        assert_eq!(
            svc.write(&root, to_fuse(other), 0, &[2u8; 65536], false),
            Ok(65536)
        );
        late.join().unwrap();
        // Space held by a file still open: the error comes after the wait.
        let held = mk(b"held");
        fill(held);
        svc.unlink(1, b"held").unwrap();
        let last = mk(b"last");
        fill(last);
        let t = std::time::Instant::now();
        let r = svc.write(&root, to_fuse(last), 100 << 20, &[3u8; 4096], false);
        assert_eq!(r, Err(libc::ENOSPC));
        assert!(t.elapsed() >= FULL_WAIT, "gave up after {:?}", t.elapsed());
    }
}
