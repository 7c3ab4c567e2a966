//! The `fuser::Filesystem` implementation: a thin, stateless translation of
//! FUSE requests into [`ufs::Fs`] calls.
//!
//! Invariants:
//! - Inode numbers cross the boundary only through [`to_ufs`] / [`to_fuse`]
//!   (FUSE root 1 <-> UFS root 2; FUSE 2 <-> UFS 1, which UFS never uses).
//! - Every entry reply (lookup, mknod, create, mkdir, symlink, link) calls
//!   `Fs::remember` *before* the reply is sent, so a `forget` for it can
//!   never overtake the matching `remember`.
//! - Every engine error is mapped through `ufs::Error::errno`; nothing here
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
use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo,
    KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite,
    Request, TimeOrNow, WriteFlags,
};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use ufs::{Attr, Cred, FileKind, Fs, RenameMode, SetAttr, Time, TimeSet};

/// How long the kernel may cache attributes and entries. The image is
/// locked by this daemon and every change reaches the engine through this
/// kernel, which updates or invalidates what it caches on each reply
/// (including atime after reads), so nothing goes stale behind its back; a
/// long validity saves a round trip per stat of a name looked up before,
/// as a local file system's dentry cache does. A day, not a minute: a run
/// that creates a million files takes longer than a minute, and names that
/// expired in the meantime each cost a LOOKUP on their next stat (what the
/// kernel keeps is bounded by its own reclaim, not by this).
const TTL: Duration = Duration::from_secs(24 * 3600);

/// The one place where inode numbers are translated: FUSE's root is 1,
/// UFS's root is 2, and UFS never uses inode 1, so the two are swapped.
const fn swap_root(ino: u64) -> u64 {
    match ino {
        1 => 2,
        2 => 1,
        n => n,
    }
}

/// FUSE inode number -> UFS inode number.
pub(crate) fn to_ufs(ino: INodeNo) -> u64 {
    swap_root(ino.0)
}

/// UFS inode number -> FUSE inode number.
pub(crate) fn to_fuse(ino: u64) -> INodeNo {
    INodeNo(swap_root(ino))
}

/// Writes a diagnostic to stderr without ever panicking (stderr may be a
/// closed pipe once the daemon is detached).
pub(crate) fn log(msg: impl std::fmt::Display) {
    let _ = writeln!(std::io::stderr(), "ufskit: {msg}");
}

fn errno(e: &ufs::Error) -> Errno {
    // Ordinary outcomes (ENOENT, EEXIST, ENOSPC...) are the caller's
    // business; damage and I/O failures are also the administrator's.
    if matches!(e.kind, ufs::ErrorKind::Corrupt | ufs::ErrorKind::Io) {
        log(format_args!("error: {e}"));
    }
    Errno::from_i32(e.errno())
}

fn cred(req: &Request) -> Cred {
    Cred {
        uid: req.uid(),
        gid: req.gid(),
    }
}

fn system_time(t: Time) -> SystemTime {
    let nsec = Duration::from_nanos(u64::from(t.nsec.min(999_999_999)));
    let base = if t.sec >= 0 {
        UNIX_EPOCH.checked_add(Duration::from_secs(t.sec as u64))
    } else {
        UNIX_EPOCH.checked_sub(Duration::from_secs(t.sec.unsigned_abs()))
    };
    base.and_then(|b| b.checked_add(nsec)).unwrap_or(UNIX_EPOCH)
}

fn ufs_time(t: SystemTime) -> Time {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => Time {
            sec: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            nsec: d.subsec_nanos(),
        },
        Err(e) => {
            // Before the epoch: floor to whole seconds, nanoseconds positive.
            let d = e.duration();
            let mut sec = -i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
            let mut nsec = d.subsec_nanos();
            if nsec > 0 {
                sec -= 1;
                nsec = 1_000_000_000 - nsec;
            }
            Time { sec, nsec }
        }
    }
}

/// A time from a setattr request. fuser 0.18.0 builds a pre-1970
/// `SystemTime` from the kernel's `(sec < 0, nsec)` as
/// `EPOCH - (|sec| s + nsec ns)` instead of `EPOCH - |sec| s + nsec ns`
/// (`system_time_from_time`, marked TODO there); this inverts exactly that,
/// so pre-1970 times with nanoseconds survive a `touch -d`. Re-check when
/// upgrading fuser.
fn request_time(t: SystemTime) -> Time {
    match t.duration_since(UNIX_EPOCH) {
        Ok(_) => ufs_time(t),
        Err(e) => {
            let d = e.duration();
            Time {
                sec: -i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
                nsec: d.subsec_nanos(),
            }
        }
    }
}

fn time_set(t: TimeOrNow) -> TimeSet {
    match t {
        TimeOrNow::Now => TimeSet::Now,
        TimeOrNow::SpecificTime(s) => TimeSet::At(request_time(s)),
    }
}

fn file_type(k: FileKind) -> FileType {
    match k {
        FileKind::File => FileType::RegularFile,
        FileKind::Dir => FileType::Directory,
        FileKind::Symlink => FileType::Symlink,
        FileKind::Fifo => FileType::NamedPipe,
        FileKind::Socket => FileType::Socket,
        FileKind::CharDev => FileType::CharDevice,
        FileKind::BlockDev => FileType::BlockDevice,
    }
}

fn file_attr(a: &Attr) -> FileAttr {
    FileAttr {
        ino: to_fuse(a.ino),
        size: a.size,
        blocks: a.blocks,
        atime: system_time(a.atime),
        mtime: system_time(a.mtime),
        ctime: system_time(a.ctime),
        crtime: system_time(a.birthtime),
        kind: file_type(a.kind),
        perm: a.perm,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: a.rdev,
        blksize: a.blksize,
        flags: a.flags,
    }
}

fn generation(a: &Attr) -> Generation {
    Generation(u64::from(a.gen))
}

/// The FUSE adapter over one mounted engine instance.
pub struct UfsFuse {
    pub(crate) fs: Arc<Fs>,
    /// Snapshots of open directories, by file handle.
    dirs: Mutex<HashMap<u64, Arc<Vec<Snap>>>>,
    next_fh: AtomicU64,
    /// Let the kernel cache writes (`-o writeback`).
    writeback: bool,
    /// Move request threads to their clients' CPUs (`-o affinity=follow`).
    follower: Option<Follower>,
    /// Requests received, by opcode (`ufskit stats`).
    pub(crate) requests: Arc<Requests>,
    /// Write-back caching: the channel for telling the kernel its cached
    /// attributes of an inode are stale (set once the session exists).
    pub(crate) notifier: Arc<Mutex<Option<fuser::Notifier>>>,
    /// Write-back caching: files whose cached data the engine refused for
    /// lack of space. The writer learns it at its next write(): the
    /// kernel's attributes of the file are invalidated, so that write asks
    /// for them first, and that one question is answered ENOSPC.
    out_of_space: Mutex<std::collections::HashSet<u64>>,
}

/// One directory entry as captured by a snapshot.
struct Snap {
    ino: u64,
    dtype: u8,
    name: Vec<u8>,
}

impl UfsFuse {
    pub fn new(fs: Arc<Fs>, writeback: bool, follow_clients: bool) -> Self {
        let follower = if follow_clients {
            Follower::new()
        } else {
            None
        };
        UfsFuse {
            fs,
            dirs: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            writeback,
            follower,
            requests: Arc::new(Requests::default()),
            notifier: Arc::new(Mutex::new(None)),
            out_of_space: Mutex::new(std::collections::HashSet::new()),
        }
    }

    fn out_of_space(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<u64>> {
        self.out_of_space.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Write-back caching: a write of cached data failed for lack of space.
    /// Marks the file and has the kernel drop its attributes (from a
    /// thread of its own: the notification must not wait inside the
    /// request that caused it).
    fn note_out_of_space(&self, ino: u64) {
        self.out_of_space().insert(ino);
        let notifier = self
            .notifier
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some(n) = notifier {
            let _ = std::thread::Builder::new()
                .name("ufs-notify".into())
                .spawn(move || {
                    if let Err(e) = n.inval_inode(to_fuse(ino), -1, 0) {
                        log(format_args!("telling the kernel inode {ino} is full: {e}"));
                    }
                });
        }
    }

    /// Every request starts here: counts it and keeps the thread near its
    /// client.
    fn serve(&self, req: &Request, op: Op) {
        self.requests.count(op);
        if let Some(f) = &self.follower {
            f.follow(req.pid());
        }
    }

    fn dirs(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Vec<Snap>>>> {
        self.dirs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every entry of directory `dir`, in on-disk order, read in one engine
    /// call: reading in batches would release the engine lock in between,
    /// and an unlink on another request thread could then move a record
    /// behind the batch cookie.
    fn snapshot(&self, dir: u64) -> ufs::Result<Vec<Snap>> {
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

    /// The snapshot a READDIR or READDIRPLUS at `offset` reads: taken anew
    /// at offset 0 (opendir or rewinddir), else the handle's.
    fn dir_snapshot(&self, dir: u64, fh: FileHandle, offset: u64) -> ufs::Result<Arc<Vec<Snap>>> {
        if offset != 0 {
            if let Some(s) = self.dirs().get(&fh.0).cloned() {
                return Ok(s);
            }
        }
        let v = Arc::new(self.snapshot(dir)?);
        self.dirs().insert(fh.0, v.clone());
        Ok(v)
    }

    /// Replies with a new kernel reference to `attr`'s inode.
    fn entry(&self, r: ufs::Result<Attr>, reply: ReplyEntry) {
        match r {
            Ok(a) => {
                self.fs.remember(a.ino);
                reply.entry(&TTL, &file_attr(&a), generation(&a));
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn empty(r: ufs::Result<()>, reply: ReplyEmpty) {
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn attr(r: ufs::Result<Attr>, reply: ReplyAttr) {
        match r {
            Ok(a) => reply.attr(&TTL, &file_attr(&a)),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn forget_one(&self, ino: INodeNo, n: u64) {
        if let Err(e) = self.fs.forget(to_ufs(ino), n) {
            log(format_args!("forget of inode {}: {e}", to_ufs(ino)));
        }
    }
}

impl Filesystem for UfsFuse {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        if self.writeback {
            // The kernel keeps written pages and sends them in large
            // writes later: faster, but ENOSPC surfaces at fsync/close
            // instead of write, and late writes run as root (minfree).
            if let Err(e) = config.add_capabilities(fuser::InitFlags::FUSE_WRITEBACK_CACHE) {
                log(format_args!(
                    "kernel lacks writeback caching ({e:?}); continuing without it"
                ));
            }
        }
        let _ = config.set_max_write(1 << 20);
        // Fewer round trips, each where the kernel has it:
        // - killing setuid/setgid on chown, truncate and write is done
        //   here (the engine's setattr and write), so the kernel does not
        //   fetch the mode first (a GETATTR per chown, as tar does for
        //   every file it extracts as root). Version 2, where the kernel
        //   marks the writes that must kill (FUSE_WRITE_KILL_SUIDGID) and
        //   writes a setuid file through its write-back cache at once;
        // - readdirplus hands out attributes with the names, so `ls -l`,
        //   `find` and `rm -rf` need no LOOKUP per entry (the kernel picks
        //   plain or plus per directory);
        // - lookups and readdirs of one directory may run in parallel on
        //   the request threads (the engine locks per operation).
        let caps = [
            fuser::InitFlags::FUSE_DO_READDIRPLUS | fuser::InitFlags::FUSE_READDIRPLUS_AUTO,
            fuser::InitFlags::FUSE_PARALLEL_DIROPS,
            fuser::InitFlags::FUSE_HANDLE_KILLPRIV_V2,
        ];
        for cap in caps {
            if let Err(e) = config.add_capabilities(cap) {
                log(format_args!("kernel lacks {e:?}; continuing without it"));
            }
        }
        Ok(())
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        self.serve(req, Op::Lookup);
        self.entry(self.fs.lookup(to_ufs(parent), name.as_bytes()), reply);
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        // Forgets come from the kernel's reclaim, not from a waiting client.
        self.requests.count(Op::Forget);
        self.forget_one(ino, nlookup);
    }

    // batch_forget: fuser's default calls `forget` for each node (its
    // `ForgetOne` type is not nameable outside the crate).

    fn getattr(&self, req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        self.serve(req, Op::Getattr);
        // The question a write() asks after its file ran out of space
        // (write-back caching, see `out_of_space`): answered once with the
        // error, which the write returns.
        if self.writeback && fh.is_some() && self.out_of_space().remove(&to_ufs(ino)) {
            reply.error(Errno::from_i32(libc::ENOSPC));
            return;
        }
        Self::attr(self.fs.getattr(to_ufs(ino)), reply);
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        self.serve(req, Op::Setattr);
        let s = SetAttr {
            mode: mode.map(|m| (m & 0o7777) as u16),
            uid,
            gid,
            size,
            atime: atime.map(time_set),
            mtime: mtime.map(time_set),
            // With write-back caching the kernel keeps the times of the
            // files it caches and sends them here; they are what it
            // showed, so they are what the disk keeps.
            ctime: ctime.map(request_time),
            flags: None,
        };
        Self::attr(self.fs.setattr(to_ufs(ino), &s, cred(req)), reply);
    }

    fn readlink(&self, req: &Request, ino: INodeNo, reply: ReplyData) {
        self.serve(req, Op::Readlink);
        match self.fs.readlink(to_ufs(ino)) {
            Ok(t) => reply.data(&t),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        self.serve(req, Op::Mknod);
        // The kernel has already applied the umask (no FUSE_DONT_MASK).
        self.entry(
            self.fs
                .mknod(to_ufs(parent), name.as_bytes(), mode, rdev, cred(req)),
            reply,
        );
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        self.serve(req, Op::Mkdir);
        self.entry(
            self.fs
                .mkdir(to_ufs(parent), name.as_bytes(), mode, cred(req)),
            reply,
        );
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.serve(req, Op::Unlink);
        Self::empty(self.fs.unlink(to_ufs(parent), name.as_bytes()), reply);
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.serve(req, Op::Rmdir);
        Self::empty(self.fs.rmdir(to_ufs(parent), name.as_bytes()), reply);
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        self.serve(req, Op::Symlink);
        self.entry(
            self.fs.symlink(
                to_ufs(parent),
                link_name.as_bytes(),
                target.as_os_str().as_bytes(),
                cred(req),
            ),
            reply,
        );
    }

    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        self.serve(req, Op::Rename);
        let noreplace = flags.contains(RenameFlags::RENAME_NOREPLACE);
        let exchange = flags.contains(RenameFlags::RENAME_EXCHANGE);
        let known = RenameFlags::RENAME_NOREPLACE | RenameFlags::RENAME_EXCHANGE;
        let mode = match (noreplace, exchange) {
            _ if !(flags - known).is_empty() => {
                // RENAME_WHITEOUT (overlayfs) and anything newer.
                reply.error(Errno::from_i32(libc::EINVAL));
                return;
            }
            (false, false) => RenameMode::Replace,
            (true, false) => RenameMode::NoReplace,
            (false, true) => RenameMode::Exchange,
            (true, true) => {
                reply.error(Errno::from_i32(libc::EINVAL));
                return;
            }
        };
        Self::empty(
            self.fs.rename(
                to_ufs(parent),
                name.as_bytes(),
                to_ufs(newparent),
                newname.as_bytes(),
                mode,
            ),
            reply,
        );
    }

    fn link(
        &self,
        req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        self.serve(req, Op::Link);
        self.entry(
            self.fs
                .link(to_ufs(ino), to_ufs(newparent), newname.as_bytes()),
            reply,
        );
    }

    fn open(&self, req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        self.serve(req, Op::Open);
        // A real OPEN (not FUSE_NO_OPEN_SUPPORT's zero-message opens): its
        // reply, without FOPEN_KEEP_CACHE, makes the kernel drop the
        // file's cached pages, so the reads after an open reach the engine
        // and update atime (relatime); zero-message opens would keep the
        // cache and serve them without a word to the file system.
        reply.opened(FileHandle(0), FopenFlags::empty());
    }

    fn read(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        self.serve(req, Op::Read);
        match self.fs.read(to_ufs(ino), offset, size as usize) {
            Ok(d) => reply.data(&d),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn write(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        self.serve(req, Op::Write);
        let ufs_ino = to_ufs(ino);
        let kill = write_flags.contains(WriteFlags::FUSE_WRITE_KILL_SUIDGID);
        match self
            .fs
            .write_killing(ufs_ino, offset, data, cred(req), kill)
        {
            Ok(n) => reply.written(u32::try_from(n).unwrap_or(u32::MAX)),
            Err(e) => {
                if self.writeback && e.kind == ufs::ErrorKind::NoSpace {
                    self.note_out_of_space(ufs_ino);
                }
                reply.error(errno(&e))
            }
        }
    }

    // flush is left to fuser's default (ENOSYS): the kernel then stops
    // sending it, saving a round trip per close. Nothing is buffered per
    // open file here, so there is nothing to flush.

    fn release(
        &self,
        req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.serve(req, Op::Release);
        reply.ok();
    }

    fn fsync(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.serve(req, Op::Fsync);
        Self::empty(self.fs.fsync(to_ufs(ino)), reply);
    }

    fn opendir(&self, req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        self.serve(req, Op::Opendir);
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        self.dirs().insert(fh, Arc::new(Vec::new()));
        reply.opened(FileHandle(fh), FopenFlags::empty());
    }

    fn readdir(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        self.serve(req, Op::Readdir);
        let snap = match self.dir_snapshot(to_ufs(ino), fh, offset) {
            Ok(s) => s,
            Err(e) => {
                reply.error(errno(&e));
                return;
            }
        };
        for (i, e) in snap.iter().enumerate().skip(offset as usize) {
            let kind = match FileKind::from_dtype(e.dtype) {
                Some(k) => k,
                // DT_UNKNOWN (old images): ask the inode.
                None => self
                    .fs
                    .getattr(e.ino)
                    .map(|a| a.kind)
                    .unwrap_or(FileKind::File),
            };
            if reply.add(
                to_fuse(e.ino),
                i as u64 + 1,
                file_type(kind),
                OsStr::from_bytes(&e.name),
            ) {
                break;
            }
        }
        reply.ok();
    }

    fn readdirplus(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        self.serve(req, Op::Readdirplus);
        let snap = match self.dir_snapshot(to_ufs(ino), fh, offset) {
            Ok(s) => s,
            Err(e) => {
                reply.error(errno(&e));
                return;
            }
        };
        let dir = to_ufs(ino);
        for (i, e) in snap.iter().enumerate().skip(offset as usize) {
            // Each entry but `.` and `..` becomes a lookup reference in the
            // kernel (fuse_direntplus_link), remembered before the reply
            // as for LOOKUP. The name is looked up again: the kernel makes
            // a dentry of it, which must name what the directory holds now
            // (a name removed since the snapshot is skipped; its inode may
            // already be another file's).
            let dot = e.name == b"." || e.name == b"..";
            let now = if dot {
                self.fs.getattr(e.ino)
            } else {
                self.fs.lookup(dir, &e.name)
            };
            let Ok(a) = now else {
                continue;
            };
            if !dot {
                self.fs.remember(a.ino);
            }
            if reply.add(
                to_fuse(a.ino),
                i as u64 + 1,
                OsStr::from_bytes(&e.name),
                &TTL,
                &file_attr(&a),
                generation(&a),
            ) {
                // Not sent: the kernel will not take this reference.
                if !dot {
                    self.forget_one(to_fuse(a.ino), 1);
                }
                break;
            }
        }
        reply.ok();
    }

    fn releasedir(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.serve(req, Op::Releasedir);
        self.dirs().remove(&fh.0);
        reply.ok();
    }

    fn fsyncdir(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.serve(req, Op::Fsyncdir);
        Self::empty(self.fs.fsync(to_ufs(ino)), reply);
    }

    fn statfs(&self, req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        self.serve(req, Op::Statfs);
        let s = self.fs.statfs();
        reply.statfs(
            s.blocks,
            s.bfree,
            s.bavail,
            s.files,
            s.ffree,
            u32::try_from(s.bsize).unwrap_or(u32::MAX),
            s.namelen,
            u32::try_from(s.frsize).unwrap_or(u32::MAX),
        );
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        self.serve(req, Op::Create);
        let mode = (mode & 0o7777) | libc::S_IFREG;
        match self
            .fs
            .mknod(to_ufs(parent), name.as_bytes(), mode, 0, cred(req))
        {
            Ok(a) => {
                self.fs.remember(a.ino);
                reply.created(
                    &TTL,
                    &file_attr(&a),
                    generation(&a),
                    FileHandle(0),
                    FopenFlags::empty(),
                );
            }
            Err(e) => reply.error(errno(&e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_mapping_is_a_swap() {
        assert_eq!(to_ufs(INodeNo(1)), 2);
        assert_eq!(to_ufs(INodeNo(2)), 1);
        assert_eq!(to_fuse(2), INodeNo(1));
        assert_eq!(to_fuse(1), INodeNo(2));
        for n in [0u64, 3, 4, 1000, u64::MAX] {
            assert_eq!(to_ufs(to_fuse(n)), n);
            assert_eq!(to_ufs(INodeNo(n)), n);
        }
    }

    #[test]
    fn request_times_undo_fusers_pre_epoch_encoding() {
        // fuser 0.18.0: (sec, nsec) with sec < 0 becomes EPOCH - Duration::new(-sec, nsec).
        let fuser = |sec: i64, nsec: u32| UNIX_EPOCH - Duration::new(sec.unsigned_abs(), nsec);
        let t = request_time(fuser(-302_486_400, 500_000_000));
        assert_eq!((t.sec, t.nsec), (-302_486_400, 500_000_000));
        let t = request_time(fuser(-5, 0));
        assert_eq!((t.sec, t.nsec), (-5, 0));
        let t = request_time(UNIX_EPOCH + Duration::new(7, 8));
        assert_eq!((t.sec, t.nsec), (7, 8));
    }

    #[test]
    fn times_round_trip() {
        for (sec, nsec) in [
            (0i64, 0u32),
            (1_700_000_000, 123_456_789),
            (-1, 500_000_000),
            (-86_400, 0),
        ] {
            let t = Time { sec, nsec };
            let back = ufs_time(system_time(t));
            assert_eq!((back.sec, back.nsec), (sec, nsec));
        }
    }
}
