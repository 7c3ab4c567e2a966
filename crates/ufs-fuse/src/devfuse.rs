//! The `fuser::Filesystem` implementation: `/dev/fuse` read by `fuser`'s
//! threads, each request decoded by `fuser` and served by
//! [`crate::service::Service`]. This carries everything until the
//! FUSE-over-io_uring rings are ready, and then what the kernel still sends
//! this way (FORGET, INTERRUPT, notifications' replies); without io_uring
//! it carries everything.
//!
//! Invariants: nothing here but conversions between `fuser`'s types and
//! the service's; every reply is sent exactly once.
use crate::requests::Op;
use crate::service::{log, to_fuse, Caller, DirItem, Service, TTL};
use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo,
    KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite,
    Request, TimeOrNow, WriteFlags,
};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use ufs::{Attr, FileKind, SetAttr, Time, TimeSet};

fn caller(req: &Request) -> Caller {
    Caller {
        uid: req.uid(),
        gid: req.gid(),
        pid: req.pid(),
    }
}

fn err(e: crate::service::Errno) -> Errno {
    Errno::from_i32(e)
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
        ino: INodeNo(to_fuse(a.ino)),
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

/// The `fuser` side of one mount.
pub struct UfsFuse {
    pub(crate) svc: Arc<Service>,
    /// Offer FUSE-over-io_uring to the kernel at INIT (`-o transport=`);
    /// whether the kernel took it is in `uring_granted` afterwards.
    offer_uring: bool,
    pub(crate) uring_granted: Arc<std::sync::atomic::AtomicBool>,
}

impl UfsFuse {
    /// The open flags of the reply to OPEN or CREATE with open(2) flags
    /// `flags` ([`crate::service::Service::open_reply_flags`]).
    fn fopen_flags(&self, flags: u32) -> FopenFlags {
        FopenFlags::from_bits_retain(self.svc.open_reply_flags(flags))
    }

    pub fn new(svc: Arc<Service>, offer_uring: bool) -> Self {
        UfsFuse {
            svc,
            offer_uring,
            uring_granted: Arc::new(std::sync::atomic::AtomicBool::new(false)),
        }
    }

    fn serve(&self, req: &Request, op: Op) {
        self.svc.begin(op, req.pid());
    }

    fn entry(r: Result<Attr, crate::service::Errno>, reply: ReplyEntry) {
        match r {
            Ok(a) => reply.entry(&TTL, &file_attr(&a), generation(&a)),
            Err(e) => reply.error(err(e)),
        }
    }

    fn empty(r: Result<(), crate::service::Errno>, reply: ReplyEmpty) {
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(err(e)),
        }
    }

    fn xattr(
        r: Result<crate::service::XattrReply, crate::service::Errno>,
        reply: fuser::ReplyXattr,
    ) {
        match r {
            Ok(crate::service::XattrReply::Size(n)) => reply.size(n),
            Ok(crate::service::XattrReply::Data(v)) => reply.data(&v),
            Err(e) => reply.error(err(e)),
        }
    }

    fn attr(r: Result<Attr, crate::service::Errno>, reply: ReplyAttr) {
        match r {
            Ok(a) => reply.attr(&TTL, &file_attr(&a)),
            Err(e) => reply.error(err(e)),
        }
    }
}

/// The capabilities asked of the kernel at INIT, whichever transport
/// serves the requests afterwards:
/// - killing setuid/setgid on chown, truncate and write is done by the
///   engine, so the kernel does not fetch the mode first (a GETATTR per
///   chown, as tar does for every file it extracts as root). Version 2,
///   where the kernel marks the writes that must kill
///   (FUSE_WRITE_KILL_SUIDGID) and writes a setuid file through its
///   write-back cache at once;
/// - readdirplus hands out attributes with the names, so `ls -l`, `find`
///   and `rm -rf` need no LOOKUP per entry (the kernel picks plain or plus
///   per directory);
/// - lookups and readdirs of one directory may run in parallel (the engine
///   locks per operation);
/// - file handles stay valid when the kernel drops its cached inode and
///   across mounts (node ids are inode numbers, generations the inodes').
pub(crate) fn init_capabilities(plus: crate::ReaddirPlus) -> Vec<fuser::InitFlags> {
    let mut caps = vec![
        fuser::InitFlags::FUSE_PARALLEL_DIROPS,
        fuser::InitFlags::FUSE_HANDLE_KILLPRIV_V2,
        // File handles (NFS export, open_by_handle_at) outlive the kernel's
        // cached inode: it decodes them with a LOOKUP of "." and "..".
        fuser::InitFlags::FUSE_EXPORT_SUPPORT,
    ];
    match plus {
        crate::ReaddirPlus::Auto => caps
            .push(fuser::InitFlags::FUSE_DO_READDIRPLUS | fuser::InitFlags::FUSE_READDIRPLUS_AUTO),
        crate::ReaddirPlus::On => caps.push(fuser::InitFlags::FUSE_DO_READDIRPLUS),
        crate::ReaddirPlus::Off => {}
    }
    caps
}

impl Filesystem for UfsFuse {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        if self.svc.writeback {
            // The kernel keeps written pages and sends them in large
            // writes later: faster, but ENOSPC surfaces at the next write
            // or at fsync/close, and late writes run as root (minfree).
            if let Err(e) = config.add_capabilities(fuser::InitFlags::FUSE_WRITEBACK_CACHE) {
                log(format_args!(
                    "kernel lacks writeback caching ({e:?}); continuing without it"
                ));
            }
        }
        let _ = config.set_max_write(crate::MAX_WRITE);
        for cap in init_capabilities(self.svc.readdirplus) {
            if let Err(e) = config.add_capabilities(cap) {
                log(format_args!("kernel lacks {e:?}; continuing without it"));
            }
        }
        if self.svc.dircache()
            && config
                .add_capabilities(fuser::InitFlags::FUSE_NO_OPENDIR_SUPPORT)
                .is_err()
        {
            // Before Linux 5.1 an OPENDIR answered with ENOSYS fails the
            // opendir(3) itself: serve OPENDIR.
            log("the kernel cannot open directories without OPENDIR (Linux 5.1+); dircache off");
            self.svc.no_dircache();
        }
        if self.svc.acls {
            // The kernel enforces ACLs it fetches from us and leaves the
            // umask to us (a default ACL replaces it). Both or neither: the
            // service applies the umask only when it asked for them.
            if let Err(e) = config.add_capabilities(
                fuser::InitFlags::FUSE_POSIX_ACL | fuser::InitFlags::FUSE_DONT_MASK,
            ) {
                log(format_args!(
                    "kernel lacks {e:?}: ACLs cannot be enforced; mount with -o acl=off"
                ));
                return Err(std::io::Error::from_raw_os_error(libc::ENOSYS));
            }
        }
        if self.offer_uring {
            match config.add_capabilities(fuser::InitFlags::FUSE_OVER_IO_URING) {
                Ok(()) => self
                    .uring_granted
                    .store(true, std::sync::atomic::Ordering::Release),
                Err(_) => log(
                    "the kernel offers no FUSE-over-io_uring (needs Linux 6.14 and the fuse \
                     module's enable_uring=Y); requests go through /dev/fuse",
                ),
            }
        }
        Ok(())
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        self.serve(req, Op::Lookup);
        Self::entry(self.svc.lookup(parent.0, name.as_bytes()), reply);
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        // Forgets come from the kernel's reclaim, not from a waiting client.
        self.svc.requests.count(Op::Forget);
        self.svc.forget(ino.0, nlookup);
    }

    // batch_forget: fuser's default calls `forget` for each node (its
    // `ForgetOne` type is not nameable outside the crate).

    fn getattr(&self, req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        self.serve(req, Op::Getattr);
        Self::attr(self.svc.getattr(ino.0, fh.is_some()), reply);
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
        Self::attr(self.svc.setattr(&caller(req), ino.0, &s), reply);
    }

    fn readlink(&self, req: &Request, ino: INodeNo, reply: ReplyData) {
        self.serve(req, Op::Readlink);
        match self.svc.readlink(ino.0) {
            Ok(t) => reply.data(&t),
            Err(e) => reply.error(err(e)),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        self.serve(req, Op::Mknod);
        Self::entry(
            self.svc
                .mknod(&caller(req), parent.0, name.as_bytes(), mode, rdev, umask),
            reply,
        );
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        self.serve(req, Op::Mkdir);
        Self::entry(
            self.svc
                .mkdir(&caller(req), parent.0, name.as_bytes(), mode, umask),
            reply,
        );
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.serve(req, Op::Unlink);
        Self::empty(self.svc.unlink(parent.0, name.as_bytes()), reply);
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.serve(req, Op::Rmdir);
        Self::empty(self.svc.rmdir(parent.0, name.as_bytes()), reply);
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
        Self::entry(
            self.svc.symlink(
                &caller(req),
                parent.0,
                link_name.as_bytes(),
                target.as_os_str().as_bytes(),
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
        Self::empty(
            self.svc.rename(
                &caller(req),
                parent.0,
                name.as_bytes(),
                newparent.0,
                newname.as_bytes(),
                flags.bits(),
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
        Self::entry(self.svc.link(ino.0, newparent.0, newname.as_bytes()), reply);
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        self.serve(req, Op::Open);
        if let Err(e) = self.svc.open(ino.0, flags.0 as u32) {
            return reply.error(err(e));
        }
        // A real OPEN (not FUSE_NO_OPEN_SUPPORT's zero-message opens): its
        // reply, without FOPEN_KEEP_CACHE, makes the kernel drop the
        // file's cached pages, so the reads after an open reach the engine
        // and update atime (relatime); zero-message opens would keep the
        // cache and serve them without a word to the file system.
        reply.opened(FileHandle(0), self.fopen_flags(flags.0 as u32));
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
        match self.svc.read(ino.0, offset, size) {
            Ok(d) => reply.data(&d),
            Err(e) => reply.error(err(e)),
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
        let kill = write_flags.contains(WriteFlags::FUSE_WRITE_KILL_SUIDGID);
        match self.svc.write(&caller(req), ino.0, offset, data, kill) {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(err(e)),
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
        Self::empty(self.svc.fsync(ino.0), reply);
    }

    fn opendir(&self, req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        self.serve(req, Op::Opendir);
        match self.svc.opendir() {
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
            Err(e) => reply.error(err(e)),
        }
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
        let r = self
            .svc
            .readdir(ino.0, fh.0, offset, false, false, &mut |e: DirItem<'_>| {
                !reply.add(
                    INodeNo(e.ino),
                    e.offset,
                    file_type(e.kind),
                    OsStr::from_bytes(e.name),
                )
            });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(err(e)),
        }
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
        let r = self
            .svc
            .readdir(ino.0, fh.0, offset, true, false, &mut |e: DirItem<'_>| {
                let Some(a) = e.attr else { return true };
                !reply.add(
                    INodeNo(e.ino),
                    e.offset,
                    OsStr::from_bytes(e.name),
                    &TTL,
                    &file_attr(a),
                    generation(a),
                )
            });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(err(e)),
        }
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
        self.svc.releasedir(fh.0);
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
        Self::empty(self.svc.fsync(ino.0), reply);
    }

    fn getxattr(
        &self,
        req: &Request,
        ino: INodeNo,
        name: &OsStr,
        size: u32,
        reply: fuser::ReplyXattr,
    ) {
        self.serve(req, Op::Getxattr);
        Self::xattr(
            self.svc
                .getxattr(&caller(req), ino.0, name.as_bytes(), size),
            reply,
        );
    }

    fn listxattr(&self, req: &Request, ino: INodeNo, size: u32, reply: fuser::ReplyXattr) {
        self.serve(req, Op::Listxattr);
        Self::xattr(self.svc.listxattr(&caller(req), ino.0, size), reply);
    }

    #[allow(clippy::too_many_arguments)]
    fn setxattr(
        &self,
        req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        self.serve(req, Op::Setxattr);
        Self::empty(
            self.svc
                .setxattr(&caller(req), ino.0, name.as_bytes(), value, flags as u32),
            reply,
        );
    }

    fn removexattr(&self, req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.serve(req, Op::Removexattr);
        Self::empty(
            self.svc.removexattr(&caller(req), ino.0, name.as_bytes()),
            reply,
        );
    }

    #[allow(clippy::too_many_arguments)]
    fn ioctl(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _flags: fuser::IoctlFlags,
        cmd: u32,
        in_data: &[u8],
        out_size: u32,
        reply: fuser::ReplyIoctl,
    ) {
        self.serve(req, Op::Ioctl);
        match self.svc.ioctl(&caller(req), ino.0, cmd, in_data) {
            Ok(out) => reply.ioctl(0, &out[..out.len().min(out_size as usize)]),
            Err(e) => reply.error(err(e)),
        }
    }

    fn copy_file_range(
        &self,
        req: &Request,
        ino_in: INodeNo,
        _fh_in: FileHandle,
        offset_in: u64,
        ino_out: INodeNo,
        _fh_out: FileHandle,
        offset_out: u64,
        len: u64,
        _flags: fuser::CopyFileRangeFlags,
        reply: ReplyWrite,
    ) {
        self.serve(req, Op::CopyFileRange);
        match self.svc.copy_file_range(
            &caller(req),
            ino_in.0,
            offset_in,
            ino_out.0,
            offset_out,
            len,
        ) {
            Ok(n) => reply.written(u32::try_from(n).unwrap_or(u32::MAX)),
            Err(e) => reply.error(err(e)),
        }
    }

    fn lseek(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: i64,
        whence: i32,
        reply: fuser::ReplyLseek,
    ) {
        self.serve(req, Op::Lseek);
        match self.svc.lseek(ino.0, offset, whence) {
            Ok(o) => reply.offset(o as i64),
            Err(e) => reply.error(err(e)),
        }
    }

    fn fallocate(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        self.serve(req, Op::Fallocate);
        Self::empty(
            self.svc
                .fallocate(&caller(req), ino.0, offset, length, mode),
            reply,
        );
    }

    fn statfs(&self, req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        self.serve(req, Op::Statfs);
        let s = self.svc.statfs();
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
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        self.serve(req, Op::Create);
        match self
            .svc
            .create(&caller(req), parent.0, name.as_bytes(), mode, umask)
        {
            Ok(a) => reply.created(
                &TTL,
                &file_attr(&a),
                generation(&a),
                FileHandle(0),
                self.fopen_flags(flags as u32),
            ),
            Err(e) => reply.error(err(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
