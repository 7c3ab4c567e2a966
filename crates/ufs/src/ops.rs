//! POSIX operations on a mounted file system, over `&self`.
//!
//! Invariants:
//! - All state lives in one [`FsCore`] behind a mutex; every public method
//!   takes the lock once, so each operation is atomic with respect to the
//!   others (multi-threaded callers such as the FUSE adapter are safe).
//! - An operation either completes or leaves the file system consistent:
//!   resources allocated before a failure are released again, and inodes
//!   are stored even when a write stops short (so no block leaks).
//! - Link counts follow FFS: a directory has 2 + number of subdirectories;
//!   an inode is freed when its link count is 0 and no kernel lookup
//!   reference remains (`remember`/`forget`).
//! - Kernel references dropped with [`Fs::forget_later`] wait in a queue
//!   of their own (never behind the engine lock) and are applied at the
//!   start of the next operation that changes anything, at `statfs`, at
//!   unmount, or by [`Fs::apply_forgets`]; until then their inodes stay
//!   allocated, as an open unlinked file's does.
//! - Directory depth (`di_dirdepth`, FreeBSD 14 fsck checks it) is the
//!   parent's plus one, root 0, kept right across renames.
use crate::{Frag, Ino};
mod acl;
pub mod linux_xattr;
mod xattr;
use crate::alloc::Reserve;
use crate::cache::CacheStats;
use crate::calls::{Call, CallStats};
use crate::dev::BlockDevice;
use crate::dir::ReadDirEntry;
use crate::engine_lock::{EngineGuard, EngineLock, LockStats};
use crate::error::{Error, ErrorKind, Result};
use crate::fs::{now, FsCore, MountOptions, Op};
pub use acl::AclKind;
use std::sync::{Mutex, MutexGuard};
use ufs_format::bytes::{low_u32, to_index, to_signed};
use ufs_format::dinode::{self, dt, iftodt};
use ufs_format::*;
pub use xattr::{XattrNs, XattrSet};

/// The longest symlink target made: Linux's PATH_MAX less its NUL.
pub const SYMLINK_MAX: usize = 4095;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum FileKind {
    File,
    Dir,
    Symlink,
    Fifo,
    Socket,
    CharDev,
    BlockDev,
}

impl FileKind {
    pub fn from_mode(mode: u16) -> Option<FileKind> {
        Some(match mode & dinode::IFMT {
            dinode::IFREG => FileKind::File,
            dinode::IFDIR => FileKind::Dir,
            dinode::IFLNK => FileKind::Symlink,
            dinode::IFIFO => FileKind::Fifo,
            dinode::IFSOCK => FileKind::Socket,
            dinode::IFCHR => FileKind::CharDev,
            dinode::IFBLK => FileKind::BlockDev,
            _ => return None,
        })
    }
    pub fn from_dtype(t: u8) -> Option<FileKind> {
        Some(match t {
            dt::DT_REG => FileKind::File,
            dt::DT_DIR => FileKind::Dir,
            dt::DT_LNK => FileKind::Symlink,
            dt::DT_FIFO => FileKind::Fifo,
            dt::DT_SOCK => FileKind::Socket,
            dt::DT_CHR => FileKind::CharDev,
            dt::DT_BLK => FileKind::BlockDev,
            _ => return None,
        })
    }
}

/// Seconds and nanoseconds since the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Time {
    pub sec: i64,
    pub nsec: u32,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Attr {
    pub ino: Ino,
    pub size: u64,
    /// 512-byte units.
    pub blocks: u64,
    pub atime: Time,
    pub mtime: Time,
    pub ctime: Time,
    pub birthtime: Time,
    pub kind: FileKind,
    /// Permission bits including setuid/setgid/sticky.
    pub perm: u16,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub rdev: u32,
    /// BSD file flags (`chflags`).
    pub flags: u32,
    pub gen: u32,
    pub blksize: u32,
}

/// Who is asking: decides ownership of new files and the minfree reserve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cred {
    pub uid: u32,
    pub gid: u32,
}

impl Cred {
    pub const ROOT: Cred = Cred { uid: 0, gid: 0 };
    fn reserve(&self) -> Reserve {
        if self.uid == 0 {
            Reserve::Privileged
        } else {
            Reserve::Unprivileged
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub enum TimeSet {
    Now,
    At(Time),
}

#[derive(Debug, Clone, Default)]
pub struct SetAttr {
    pub mode: Option<u16>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    pub atime: Option<TimeSet>,
    pub mtime: Option<TimeSet>,
    /// An explicit change time: the kernel keeps the times of files it
    /// caches writes for (FUSE write-back caching) and hands them over
    /// here; otherwise the change time is "now".
    pub ctime: Option<Time>,
    pub flags: Option<u32>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct StatFs {
    /// Fragment size: the unit of the block counts.
    pub frsize: u64,
    pub bsize: u64,
    pub blocks: u64,
    pub bfree: u64,
    pub bavail: u64,
    pub files: u64,
    pub ffree: u64,
    pub namelen: u32,
}

/// Rename variants (Linux `renameat2` flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RenameMode {
    Replace,
    NoReplace,
    Exchange,
}

pub struct Fs {
    core: EngineLock<FsCore>,
    calls: crate::calls::Calls,
    /// Kernel references dropped but not yet applied (inode, count).
    forgets: Mutex<Vec<(Ino, u64)>>,
    /// `forgets` may be non-empty (set after a push, cleared before a take).
    forgets_pending: std::sync::atomic::AtomicBool,
    /// Deferred forgets that failed, for the caller to report.
    forget_errors: Mutex<Vec<(Ino, Error)>>,
}

/// A lock around plain data (no invariant a panic could break).
fn lock_plain<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn attr_of(ino: Ino, di: &Dinode, bsize: u64) -> Result<Attr> {
    let kind = FileKind::from_mode(di.di_mode()).ok_or_else(|| {
        Error::damaged(
            crate::error::Damage::Inode(ino),
            format!("inode {ino}: unknown file type in mode {:o}", di.di_mode()),
        )
    })?;
    let t = |s: i64, n: i32| Time {
        sec: s,
        nsec: u32::try_from(n.clamp(0, 999_999_999)).unwrap_or(0),
    };
    Ok(Attr {
        ino,
        size: di.di_size(),
        blocks: di.di_blocks(),
        atime: t(di.di_atime(), di.di_atimensec()),
        mtime: t(di.di_mtime(), di.di_mtimensec()),
        ctime: t(di.di_ctime(), di.di_ctimensec()),
        birthtime: t(di.di_birthtime(), di.di_birthnsec()),
        kind,
        perm: di.di_mode() & 0o7777,
        nlink: di.nlink(),
        uid: di.di_uid(),
        gid: di.di_gid(),
        rdev: if matches!(kind, FileKind::CharDev | FileKind::BlockDev) {
            di.di_rdev()
        } else {
            0
        },
        flags: di.di_flags(),
        gen: di.di_gen(),
        blksize: low_u32(bsize),
    })
}

const DI_DIRDEPTH_OFF: usize = 240;

fn dirdepth(di: &Dinode) -> u32 {
    di.di_freelink()
}
fn set_dirdepth(di: &mut Dinode, d: u32) {
    let _ = DI_DIRDEPTH_OFF;
    di.set_di_freelink(d)
}

fn check_name(name: &[u8]) -> Result<()> {
    if name.len() > MAXNAMLEN {
        return Err(Error::new(
            ErrorKind::NameTooLong,
            format!("name of {} bytes exceeds {MAXNAMLEN}", name.len()),
        ));
    }
    if name.is_empty() || name.contains(&b'/') || name.contains(&0) {
        return Err(Error::new(ErrorKind::Invalid, "invalid file name"));
    }
    Ok(())
}

fn touch(di: &mut Dinode, m: bool, c: bool, a: bool) {
    let (s, n) = now();
    if m {
        di.set_di_mtime(s);
        di.set_di_mtimensec(n);
    }
    if c {
        di.set_di_ctime(s);
        di.set_di_ctimensec(n);
    }
    if a {
        di.set_di_atime(s);
        di.set_di_atimensec(n);
    }
}

impl Fs {
    pub fn open(dev: Box<dyn BlockDevice>, opts: MountOptions) -> Result<Fs> {
        let lock_spin_ns = opts.lock_spin_ns;
        Ok(Fs {
            core: EngineLock::new(FsCore::open(dev, opts)?, lock_spin_ns),
            calls: Default::default(),
            forgets: Mutex::new(Vec::new()),
            forgets_pending: std::sync::atomic::AtomicBool::new(false),
            forget_errors: Mutex::new(Vec::new()),
        })
    }

    /// Opens an image file or device, locking it for the life of the value.
    /// Opens an image or device by name; `disk.img:p2` names a partition,
    /// and a partitioned disk with a single UFS file system opens at it
    /// (see [`crate::dev::partition::open_image`]).
    pub fn open_path(path: &std::path::Path, opts: MountOptions) -> Result<Fs> {
        Fs::open_path_layered(path, opts, Ok)
    }

    /// As [`Fs::open_path`], with `layer` put between the image and the
    /// read-ahead window (a modeled disk under a mount, `ufs-sim`).
    pub fn open_path_layered(
        path: &std::path::Path,
        opts: MountOptions,
        layer: impl FnOnce(Box<dyn BlockDevice>) -> Result<Box<dyn BlockDevice>>,
    ) -> Result<Fs> {
        let (dev, _) = crate::dev::partition::open_image(path, !opts.read_only)?;
        let mut dev = layer(dev)?;
        if opts.readahead > 0 {
            dev = Box::new(crate::dev::ReadAheadDevice::new(dev, opts.readahead));
        }
        Fs::open(dev, opts)
    }

    /// The engine, locked. An operation that panicked while holding it may
    /// have left a change half made: the first lock after that stops all
    /// writing (the file system is never marked clean again in this
    /// mount), while reads go on.
    pub(crate) fn lock(&self) -> EngineGuard<'_, FsCore> {
        let (mut g, poisoned) = self.core.lock();
        if poisoned {
            g.cache.fail("an operation panicked half-way");
        }
        g
    }

    /// Counts a call of kind `k` moving `bytes` of file data, then runs
    /// the hook (the engine lock is not held here).
    /// A `Corrupt` answer is remembered: the unmount then leaves the file
    /// system marked for fsck (`FsCore::unmount`).
    fn counted<T>(&self, k: Call, bytes: u64, r: Result<T>) -> Result<T> {
        self.calls.count(k, bytes);
        if let Err(e) = &r {
            if e.kind == ErrorKind::Corrupt {
                let mut c = self.lock();
                if c.damage.is_none() {
                    c.damage = Some(e.to_string());
                }
            }
        }
        if let Ok(mut hook) = self.calls.hook.try_lock() {
            if let Some(h) = hook.as_mut() {
                h(self);
            }
        }
        r
    }

    /// The calls made so far, by kind.
    pub fn call_stats(&self) -> CallStats {
        self.calls.snapshot()
    }

    /// Sets (or clears) what runs after every counted call: see
    /// [`crate::calls`].
    pub fn set_call_hook(&self, hook: Option<crate::calls::Hook>) {
        *self.calls.hook.lock().unwrap_or_else(|p| p.into_inner()) = hook;
    }

    pub fn root(&self) -> Ino {
        Ino::ROOT
    }
    pub fn is_read_only(&self) -> bool {
        self.lock().read_only
    }
    pub fn was_clean(&self) -> bool {
        self.lock().was_clean
    }
    pub fn block_size(&self) -> u64 {
        self.lock().g.bsize
    }
    /// UFS1 or UFS2, and the byte order.
    pub fn variant(&self) -> ufs_format::Variant {
        self.lock().g.v
    }

    pub fn getattr(&self, ino: Ino) -> Result<Attr> {
        let r = (|| {
            let mut c = self.lock();
            let di = live_inode(&mut c, ino)?;
            attr_of(ino, &di, c.g.bsize)
        })();
        self.counted(Call::Getattr, 0, r)
    }

    pub fn lookup(&self, parent: Ino, name: &[u8]) -> Result<Attr> {
        self.lookup_counting(parent, name, false)
    }

    /// [`lookup`](Self::lookup) and [`remember`](Self::remember) of what
    /// it found, under one hold of the engine's lock (a FUSE LOOKUP, or an
    /// entry of READDIRPLUS).
    pub fn lookup_remembered(&self, parent: Ino, name: &[u8]) -> Result<Attr> {
        self.lookup_counting(parent, name, true)
    }

    fn lookup_counting(&self, parent: Ino, name: &[u8], remember: bool) -> Result<Attr> {
        let r = (|| {
            check_name(name)?;
            let mut c = self.lock();
            let pdi = dir_inode(&mut c, parent)?;
            match c.dir_lookup(parent, &pdi, name)? {
                // A whiteout (FreeBSD's union mounts; fsck_ffs turns an
                // entry naming inode 1 into one) names nothing.
                Some(f) if f.ino == Ino::WHITEOUT => {
                    Err(Error::new(ErrorKind::NotFound, "whiteout"))
                }
                Some(f) => {
                    let di = live_inode(&mut c, f.ino)?;
                    let a = attr_of(f.ino, &di, c.g.bsize)?;
                    if remember {
                        *c.lookups.entry(f.ino).or_insert(0) += 1;
                    }
                    Ok(a)
                }
                None => Err(Error::new(
                    ErrorKind::NotFound,
                    format!("{} not found", String::from_utf8_lossy(name)),
                )),
            }
        })();
        self.counted(Call::Lookup, 0, r)
    }

    /// The inode a file handle names, remembered as a new kernel reference
    /// (FUSE sends a LOOKUP of "." in the node when it decodes an NFS or
    /// `open_by_handle_at` handle whose inode it no longer caches). A
    /// number out of range, an inode not in use and one with no links left
    /// are NotFound, which the kernel answers ESTALE; the generation in the
    /// attributes is what it compares with the handle's, so a reused
    /// number is stale too. Nothing here marks the file system damaged: a
    /// handle is the caller's input, not the image's. The group's inode
    /// map is consulted first (FreeBSD's `ffs_inotovp`).
    pub fn lookup_by_number(&self, ino: Ino) -> Result<Attr> {
        let r = (|| {
            let mut c = self.lock();
            let gone = || Error::new(ErrorKind::NotFound, format!("no inode {ino}"));
            if ino < Ino::ROOT || ino.get() >= c.g.ninodes() {
                return Err(gone());
            }
            // FreeBSD's ffs_inotovp: an inode the group's map calls free,
            // or past its initialised inode blocks (never written), is
            // stale without being read; damage found reading it is the
            // handle's problem too.
            let idx = ino.get() % c.g.ipg;
            let group = c.g.ino_to_cg(ino.get());
            let cg = c.read_cg(group).map_err(|_| gone())?;
            if !cg.inode_used(idx) || (c.g.lazy_inodes() && idx >= u64::from(cg.cg_initediblk())) {
                return Err(gone());
            }
            let di = c.read_inode(ino).map_err(|_| gone())?;
            if di.di_mode() == 0 || di.di_nlink() == 0 {
                return Err(gone());
            }
            let a = attr_of(ino, &di, c.g.bsize)?;
            *c.lookups.entry(ino).or_insert(0) += 1;
            Ok(a)
        })();
        self.counted(Call::Lookup, 0, r)
    }

    /// Records a kernel reference to `ino` (FUSE lookup count).
    pub fn remember(&self, ino: Ino) {
        *self.lock().lookups.entry(ino).or_insert(0) += 1;
    }

    fn forget_op(c: &mut FsCore, ino: Ino, n: u64) -> Result<()> {
        let left = match c.lookups.get_mut(&ino) {
            Some(k) => {
                *k = k.saturating_sub(n);
                *k
            }
            None => 0,
        };
        if left == 0 {
            c.lookups.remove(&ino);
            if c.orphans.remove(&ino) && !c.read_only {
                c.release_inode(ino)?;
            }
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn mknod_op(
        c: &mut FsCore,
        parent: Ino,
        name: &[u8],
        mode: u32,
        rdev: u32,
        umask: Option<u32>,
        cred: Cred,
    ) -> Result<Attr> {
        let fmt = u16::try_from(mode & u32::from(dinode::IFMT)).unwrap_or(0);
        let fmt = if fmt == 0 { dinode::IFREG } else { fmt };
        if !matches!(
            fmt,
            dinode::IFREG | dinode::IFIFO | dinode::IFSOCK | dinode::IFCHR | dinode::IFBLK
        ) {
            return Err(Error::new(
                ErrorKind::Invalid,
                "mknod: unsupported file type",
            ));
        }
        Self::make_node(
            c,
            parent,
            name,
            fmt | perm_bits(mode),
            umask,
            cred,
            |c, ino, di| {
                if matches!(fmt, dinode::IFCHR | dinode::IFBLK) {
                    di.set_di_rdev(rdev);
                }
                let _ = (c, ino);
                Ok(())
            },
        )
    }

    fn tmpfile_op(
        c: &mut FsCore,
        parent: Ino,
        mode: u32,
        umask: Option<u32>,
        cred: Cred,
    ) -> Result<Attr> {
        c.check_writable()?;
        let pdi = dir_inode(c, parent)?;
        may_enter(&pdi)?;
        let mode = dinode::IFREG | perm_bits(mode);
        let (ino, di) = new_inode(
            c,
            parent,
            &pdi,
            mode,
            umask,
            cred,
            0,
            None,
            |_, _, _| Ok(()),
        )?;
        c.orphans.insert(ino);
        attr_of(ino, &di, c.g.bsize)
    }

    fn mkdir_op(
        c: &mut FsCore,
        parent: Ino,
        name: &[u8],
        mode: u32,
        umask: Option<u32>,
        cred: Cred,
    ) -> Result<Attr> {
        check_name(name)?;
        c.check_writable()?;
        let mut pdi = dir_inode(c, parent)?;
        must_be_absent(c, parent, &pdi, name)?;
        may_enter(&pdi)?;
        if pdi.nlink() >= UFS_LINK_MAX {
            return Err(Error::new(
                ErrorKind::TooManyLinks,
                "parent directory has too many links",
            ));
        }
        let (mode, acls) = acl::inherit(c, parent, &pdi, dinode::IFDIR | perm_bits(mode), umask)?;
        let ino = c.alloc_inode(parent, true)?;
        let mut di = fresh_inode(c, ino, mode, cred, &pdi)?;
        di.set_nlink(2);
        set_dirdepth(&mut di, dirdepth(&pdi) + 1);
        // The parent counts the new '..' before anything on disk holds it
        // (a crash leaves the count high, never low), as FFS's mkdir.
        pdi.set_nlink(pdi.nlink() + 1);
        let counted = c.write_inode(parent, &pdi)?;
        if counted != crate::order::ChangeId::NONE {
            c.order.inode_deps(ino).needs.push(counted);
        }
        let r = c
            .dir_init(ino, &mut di, parent, cred.reserve())
            .and_then(|()| {
                if acls.is_empty() {
                    return Ok(());
                }
                let area = ufs_format::extattr::encode_area(c.g.v.endian, &acls);
                c.replace_ext_area(ino, &mut di, &area, cred.reserve())
            });
        c.write_inode(ino, &di)?;
        if let Err(e) = r {
            pdi.set_nlink(pdi.nlink() - 1);
            c.write_inode(parent, &pdi)?;
            undo_create(c, ino)?;
            return Err(e);
        }
        if let Err(e) = c.dir_enter(
            parent,
            &mut pdi,
            name,
            ino,
            dt::DT_DIR,
            cred.reserve(),
            &[counted],
        ) {
            pdi.set_nlink(pdi.nlink() - 1);
            c.write_inode(parent, &pdi)?;
            undo_create(c, ino)?;
            return Err(e);
        }
        touch(&mut pdi, true, true, false);
        c.write_inode(parent, &pdi)?;
        attr_of(ino, &di, c.g.bsize)
    }

    fn symlink_op(
        c: &mut FsCore,
        parent: Ino,
        name: &[u8],
        target: &[u8],
        cred: Cred,
    ) -> Result<Attr> {
        // Linux's limits, which is where the mount serves: an empty target
        // is ENOENT, one of PATH_MAX (4096) bytes or more ENAMETOOLONG.
        // FreeBSD's kernel makes targets of at most MAXPATHLEN - 1 (1023)
        // bytes; a longer one is still a valid symlink on disk (fsck_ffs
        // puts no limit on it) that FreeBSD can readlink but not follow.
        if target.is_empty() {
            return Err(Error::new(ErrorKind::NotFound, "empty symlink target"));
        }
        if target.len() > SYMLINK_MAX {
            return Err(Error::new(
                ErrorKind::NameTooLong,
                format!("symlink target longer than {SYMLINK_MAX} bytes"),
            ));
        }
        Self::make_node(
            c,
            parent,
            name,
            dinode::IFLNK | 0o777,
            None,
            cred,
            |c, ino, di| {
                if target.len() < usize::try_from(c.sb.fs_maxsymlinklen()).unwrap_or(0) {
                    di.set_shortlink(target);
                    di.set_di_size(target.len() as u64);
                    Ok(())
                } else {
                    let n = c.write_data(ino, di, 0, target, cred.reserve())?;
                    if n != target.len() {
                        return Err(Error::new(ErrorKind::NoSpace, "file system full"));
                    }
                    Ok(())
                }
            },
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn make_node(
        c: &mut FsCore,
        parent: Ino,
        name: &[u8],
        mode: u16,
        umask: Option<u32>,
        cred: Cred,
        init: impl FnOnce(&mut FsCore, Ino, &mut Dinode) -> Result<()>,
    ) -> Result<Attr> {
        check_name(name)?;
        c.check_writable()?;
        let mut pdi = dir_inode(c, parent)?;
        must_be_absent(c, parent, &pdi, name)?;
        may_enter(&pdi)?;
        let goal = c.placement_goal(parent, &pdi, name)?;
        let (ino, di) = new_inode(c, parent, &pdi, mode, umask, cred, 1, goal, init)?;
        if let Err(e) = c.dir_enter(
            parent,
            &mut pdi,
            name,
            ino,
            iftodt(di.di_mode()),
            cred.reserve(),
            &[],
        ) {
            c.write_inode(parent, &pdi)?;
            undo_create(c, ino)?;
            return Err(e);
        }
        touch(&mut pdi, true, true, false);
        c.write_inode(parent, &pdi)?;
        attr_of(ino, &di, c.g.bsize)
    }

    /// Runs a changing operation `f` as one [`Op`]: under one hold of the
    /// engine's lock from its first change to its end, which (in sync
    /// mode) makes its blocks durable before it returns, even when it
    /// failed half-way and undid itself.
    fn finish<T>(&self, f: impl FnOnce(&mut FsCore) -> Result<T>) -> Result<T> {
        let mut op = Op::begin(self.lock());
        self.forget_queued(&mut op);
        let r = f(&mut op);
        let e = op.end();
        let v = r?;
        e?;
        Ok(v)
    }

    /// Drops `n` kernel references; frees the inode if it was unlinked.
    pub fn forget(&self, ino: Ino, n: u64) -> Result<()> {
        let r = self.finish(|c| Self::forget_op(c, ino, n));
        self.counted(Call::Other, 0, r)
    }

    /// [`forget`](Self::forget) without the engine lock: queued, and
    /// applied by whichever operation takes the lock next (see the module's
    /// invariants). A FUSE daemon receives forgets on threads of their own;
    /// applied there, each would contend for the lock with the request
    /// that follows it (a cross-CPU sleep and wake-up per `unlink`).
    pub fn forget_later(&self, ino: Ino, n: u64) {
        lock_plain(&self.forgets).push((ino, n));
        self.forgets_pending
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// Whether unlinked inodes are kept for the kernel's references (their
    /// space comes back with the forgets).
    pub fn has_orphans(&self) -> bool {
        !self.lock().orphans.is_empty()
    }

    /// Whether forgets wait in the queue.
    pub fn forgets_pending(&self) -> bool {
        self.forgets_pending
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// Applies the queued forgets now (one operation); returns those that
    /// failed since the last call, here or in another operation.
    pub fn apply_forgets(&self) -> Vec<(Ino, Error)> {
        self.drain_forgets();
        std::mem::take(&mut *lock_plain(&self.forget_errors))
    }

    /// Applies the queued forgets in an operation of their own, if any
    /// (failures are kept for [`apply_forgets`](Self::apply_forgets)).
    fn drain_forgets(&self) {
        if self.forgets_pending() {
            let _ = self.finish(|_| Ok(()));
        }
    }

    /// Applies the queued forgets inside the operation `c` has begun.
    fn forget_queued(&self, c: &mut FsCore) {
        // Looked at before it is swapped: most operations find nothing
        // queued, and a load leaves the flag's cache line shared.
        if !self.forgets_pending()
            || !self
                .forgets_pending
                .swap(false, std::sync::atomic::Ordering::AcqRel)
        {
            return;
        }
        let batch = std::mem::take(&mut *lock_plain(&self.forgets));
        for (ino, n) in batch {
            self.calls.count(Call::Other, 0);
            if let Err(e) = Self::forget_op(c, ino, n) {
                lock_plain(&self.forget_errors).push((ino, e));
            }
        }
    }

    /// Creates a regular file, fifo, socket or device node.
    pub fn mknod(
        &self,
        parent: Ino,
        name: &[u8],
        mode: u32,
        rdev: u32,
        cred: Cred,
    ) -> Result<Attr> {
        let r = self.finish(|c| Self::mknod_op(c, parent, name, mode, rdev, None, cred));
        self.counted(Call::Create, 0, r)
    }

    /// [`mknod`](Self::mknod) with the creator's umask not yet applied to
    /// `mode`, as Linux hands it over with ACLs on: a default ACL of the
    /// directory replaces it, as POSIX says.
    pub fn mknod_umask(
        &self,
        parent: Ino,
        name: &[u8],
        mode: u32,
        rdev: u32,
        umask: u32,
        cred: Cred,
    ) -> Result<Attr> {
        let r = self.finish(|c| Self::mknod_op(c, parent, name, mode, rdev, Some(umask), cred));
        self.counted(Call::Create, 0, r)
    }

    pub fn mkdir(&self, parent: Ino, name: &[u8], mode: u32, cred: Cred) -> Result<Attr> {
        let r = self.finish(|c| Self::mkdir_op(c, parent, name, mode, None, cred));
        self.counted(Call::Create, 0, r)
    }

    /// [`mkdir`](Self::mkdir) with the umask not yet applied (see
    /// [`mknod_umask`](Self::mknod_umask)).
    pub fn mkdir_umask(
        &self,
        parent: Ino,
        name: &[u8],
        mode: u32,
        umask: u32,
        cred: Cred,
    ) -> Result<Attr> {
        let r = self.finish(|c| Self::mkdir_op(c, parent, name, mode, Some(umask), cred));
        self.counted(Call::Create, 0, r)
    }

    pub fn symlink(&self, parent: Ino, name: &[u8], target: &[u8], cred: Cred) -> Result<Attr> {
        let r = self.finish(|c| Self::symlink_op(c, parent, name, target, cred));
        self.counted(Call::Create, 0, r)
    }

    /// Linux's `O_TMPFILE`: a regular file in no directory, placed as a
    /// file of `parent` would be, mode and ACLs from it as a create's. It
    /// has no link: it lives while the kernel holds it (an orphan, as an
    /// open file whose last name went), and [`link`](Self::link) can give
    /// it a name (`linkat` of the descriptor). A crash before that leaves
    /// an unreferenced inode, which fsck's preen frees.
    pub fn tmpfile(&self, parent: Ino, mode: u32, umask: Option<u32>, cred: Cred) -> Result<Attr> {
        let r = self.finish(|c| Self::tmpfile_op(c, parent, mode, umask, cred));
        self.counted(Call::Create, 0, r)
    }

    pub fn link(&self, ino: Ino, newparent: Ino, newname: &[u8]) -> Result<Attr> {
        let r = self.finish(|c| Self::link_op(c, ino, newparent, newname));
        self.counted(Call::Create, 0, r)
    }

    pub fn unlink(&self, parent: Ino, name: &[u8]) -> Result<()> {
        let r = self.finish(|c| Self::unlink_op(c, parent, name));
        self.counted(Call::Remove, 0, r)
    }

    pub fn rmdir(&self, parent: Ino, name: &[u8]) -> Result<()> {
        let r = self.finish(|c| Self::rmdir_op(c, parent, name));
        self.counted(Call::Remove, 0, r)
    }

    pub fn rename(
        &self,
        parent: Ino,
        name: &[u8],
        newparent: Ino,
        newname: &[u8],
        mode: RenameMode,
    ) -> Result<()> {
        let r = self.finish(|c| Self::rename_op(c, parent, name, newparent, newname, mode, None));
        self.counted(Call::Rename, 0, r)
    }

    /// Linux's `RENAME_WHITEOUT` (overlayfs's upper layer): renames as
    /// [`rename`](Self::rename) (`mode` Replace or NoReplace) and leaves
    /// at the old name a whiteout, a character device 0:0 with mode 0
    /// owned by `cred`. The old name is rewritten to point at the whiteout
    /// (one entry changed in place), so no crash state has lost it.
    pub fn rename_whiteout(
        &self,
        parent: Ino,
        name: &[u8],
        newparent: Ino,
        newname: &[u8],
        mode: RenameMode,
        cred: Cred,
    ) -> Result<()> {
        if mode == RenameMode::Exchange {
            return Err(Error::new(
                ErrorKind::Invalid,
                "RENAME_WHITEOUT cannot be combined with RENAME_EXCHANGE",
            ));
        }
        let r =
            self.finish(|c| Self::rename_op(c, parent, name, newparent, newname, mode, Some(cred)));
        self.counted(Call::Rename, 0, r)
    }

    pub fn setattr(&self, ino: Ino, s: &SetAttr, cred: Cred) -> Result<Attr> {
        let r = self.finish(|c| Self::setattr_op(c, ino, s, cred));
        self.counted(Call::Setattr, 0, r)
    }

    /// Writes `data` at `off`; a writer other than root takes setuid (and
    /// setgid with group execute) away, as Linux does.
    pub fn write(&self, ino: Ino, off: u64, data: &[u8], cred: Cred) -> Result<usize> {
        self.write_killing(ino, off, data, cred, cred.uid != 0)
    }

    /// [`write`](Self::write) with the setuid decision made by the caller
    /// (the FUSE kernel knows whether the writer may keep it, and says so
    /// with FUSE_WRITE_KILL_SUIDGID; write-back data arrives as root).
    /// Either way a written file loses Linux's `security.capability`
    /// attribute, as on Linux (the kernel does not ask for it on writes
    /// that bypass its page cache).
    pub fn write_killing(
        &self,
        ino: Ino,
        off: u64,
        data: &[u8],
        cred: Cred,
        kill: bool,
    ) -> Result<usize> {
        let r = self.finish(|c| Self::write_op(c, ino, off, data, cred, kill));
        self.counted(Call::Write, data.len() as u64, r)
    }

    /// lseek(2)'s SEEK_DATA (`data`) and SEEK_HOLE: the first offset at
    /// or after `off` in data (an allocated block) or in a hole (a block
    /// never written, or the end of the file, which counts as a hole).
    /// An offset at or past the end is ENXIO, as is SEEK_DATA with no data
    /// after `off`. A hole is whole blocks; a block written in part is data.
    pub fn seek_data_hole(&self, ino: Ino, off: u64, data: bool) -> Result<u64> {
        // The lock is let go every few thousand blocks, so that a walk
        // over a large file's data does not stall other requests.
        const STEPS: usize = 4096;
        let r = (|| {
            let past_end = || Error::new(ErrorKind::NoSuchOffset, "offset past the data");
            let mut lbn = None;
            loop {
                let mut c = self.lock();
                let di = live_inode(&mut c, ino)?;
                let size = di.di_size();
                if off >= size {
                    return Err(past_end());
                }
                let bsize = c.g.bsize;
                let last = (size - 1) / bsize;
                let mut at = lbn.unwrap_or(off / bsize);
                for _ in 0..STEPS {
                    if at > last {
                        return if data { Err(past_end()) } else { Ok(size) };
                    }
                    match c.hole_run(ino, &di, at)? {
                        None if data => return Ok(off.max(at * bsize)),
                        Some(_) if !data => return Ok(off.max(at * bsize)),
                        None => at += 1,
                        Some(run) => at += run,
                    }
                }
                lbn = Some(at);
            }
        })();
        self.counted(Call::Getattr, 0, r)
    }

    /// fallocate(2): makes `[off, off + len)` allocated, as FreeBSD's
    /// posix_fallocate does on UFS (`vop_stdallocate`: each block that is a
    /// hole is written with zeros; data already there is kept), growing
    /// the file when the range ends past it. With `zero`,
    /// FALLOC_FL_ZERO_RANGE: the range reads as zeros afterwards, written
    /// over what was there. UFS keeps no blocks past the end of a file, so
    /// `keep_size` (FALLOC_FL_KEEP_SIZE) with a range that ends past it is
    /// NotSupported (Linux's EOPNOTSUPP, nothing done); so is anything on
    /// a file that is not regular. The work goes a block per engine operation, so other
    /// requests run between them; ENOSPC part way leaves what was done.
    pub fn allocate(
        &self,
        ino: Ino,
        off: u64,
        len: u64,
        keep_size: bool,
        zero: bool,
        cred: Cred,
    ) -> Result<()> {
        let refused = if zero { IMMUTABLE | APPEND } else { IMMUTABLE };
        let (end, size, bsize) = self.space_range(ino, off, len, refused)?;
        if keep_size && end > size {
            return Err(Error::new(
                ErrorKind::NotSupported,
                "UFS keeps no blocks past the end of a file (FALLOC_FL_KEEP_SIZE)",
            ));
        }
        let zeros = vec![0u8; to_index(bsize)];
        let mut pos = off;
        while pos < end {
            let lbn = pos / bsize;
            let n = ((lbn + 1) * bsize).min(end) - pos;
            let r = self.finish(|c| {
                let di = live_inode(c, ino)?;
                let size = di.di_size();
                // Holes are written (and everything when zeroing); in the
                // allocated last block, the part past the end (which makes
                // the file longer; writing extends its fragments).
                let from = if zero || c.hole_run(ino, &di, lbn)?.is_some() {
                    pos
                } else {
                    size.max(pos)
                };
                if from < pos + n {
                    let zs = &zeros[..to_index(pos + n - from)];
                    Self::write_op(c, ino, from, zs, cred, false)?;
                }
                Ok(())
            });
            self.counted(Call::Write, n, r)?;
            pos += n;
        }
        Ok(())
    }

    /// Linux's loss of setuid and setgid when a process without
    /// CAP_FSETID writes or allocates (`setattr_should_drop_suidgid`):
    /// setuid goes; setgid when the group may execute, or when `outsider`
    /// (the writer is not in the file's group). Read and changed under one
    /// hold of the lock, so a chmod meanwhile is not undone. Ok(true) when
    /// the mode changed.
    pub fn drop_setid(&self, ino: Ino, outsider: bool) -> Result<bool> {
        let r = self.finish(|c| {
            c.check_writable()?;
            let mut di = live_inode(c, ino)?;
            if !di.is_reg() {
                return Ok(false);
            }
            let mode = di.di_mode();
            let mut m = mode & !0o4000;
            if m & 0o2000 != 0 && (m & 0o010 != 0 || outsider) {
                m &= !0o2000;
            }
            if m == mode {
                return Ok(false);
            }
            di.set_di_mode(m);
            touch(&mut di, false, true, false);
            c.write_inode(ino, &di)?;
            Ok(true)
        });
        self.counted(Call::Setattr, 0, r)
    }

    /// The checks of a fallocate on `[off, off + len)` of `ino`: a regular
    /// file, writable, none of the flags `refused`, the end within the
    /// largest file. Returns the end, the file's size and the block size.
    fn space_range(&self, ino: Ino, off: u64, len: u64, refused: u32) -> Result<(u64, u64, u64)> {
        let end = off
            .checked_add(len)
            .ok_or_else(|| Error::new(ErrorKind::FileTooBig, "offset overflow"))?;
        let mut c = self.lock();
        c.check_writable()?;
        let di = live_inode(&mut c, ino)?;
        if !di.is_reg() {
            return Err(Error::new(
                ErrorKind::NotSupported,
                "only regular files have space allocated or freed",
            ));
        }
        if di.di_flags() & refused != 0 {
            return Err(flag_refusal("file is immutable or append-only"));
        }
        if end > c.g.maxfilesize {
            return Err(Error::new(
                ErrorKind::FileTooBig,
                format!("file would exceed the maximum size {}", c.g.maxfilesize),
            ));
        }
        Ok((end, di.di_size(), c.g.bsize))
    }

    /// FALLOC_FL_PUNCH_HOLE (with KEEP_SIZE, as Linux requires; FreeBSD
    /// 14's `fspacectl(SPACECTL_DEALLOC)`): `[off, off + len)` reads as
    /// zeros afterwards and its whole blocks are freed, the size kept.
    /// Parts of blocks are written with zeros where allocated; the file's
    /// last block stays allocated (UFS keeps it so; FreeBSD's truncation
    /// allocates it), zeroed instead. A block per engine operation, as
    /// [`allocate`](Self::allocate).
    pub fn punch_hole(&self, ino: Ino, off: u64, len: u64, cred: Cred) -> Result<()> {
        let (end, size, bsize) = self.space_range(ino, off, len, IMMUTABLE | APPEND)?;
        let end = end.min(size);
        let zeros = vec![0u8; to_index(bsize)];
        let mut pos = off;
        while pos < end {
            let lbn = pos / bsize;
            let n = ((lbn + 1) * bsize).min(end) - pos;
            let r = self.finish(|c| {
                let mut di = live_inode(c, ino)?;
                // From the inode as it is now: the file may have changed
                // between blocks.
                let size = di.di_size();
                if pos >= size {
                    return Ok(());
                }
                let n = n.min(size - pos);
                let whole = n == bsize && lbn < (size - 1) / bsize;
                if whole {
                    if c.punch_block(ino, &mut di, lbn)? {
                        touch(&mut di, true, true, false);
                        c.write_inode(ino, &di)?;
                    }
                } else if c.hole_run(ino, &di, lbn)?.is_none() {
                    Self::write_op(c, ino, pos, &zeros[..to_index(n)], cred, false)?;
                }
                Ok(())
            });
            self.counted(Call::Write, n, r)?;
            pos += n;
        }
        Ok(())
    }

    pub fn readlink(&self, ino: Ino) -> Result<Vec<u8>> {
        let r = (|| {
            let mut c = self.lock();
            let di = live_inode(&mut c, ino)?;
            if !di.is_symlink() {
                return Err(Error::new(ErrorKind::Invalid, "not a symbolic link"));
            }
            let size = to_index(di.di_size());
            if di.holds_short_link(c.g.maxsymlinklen()) {
                return Ok(di.shortlink()[..size].to_vec());
            }
            c.read_data(ino, &di, 0, size.min(65536))
        })();
        self.counted(Call::Other, 0, r)
    }

    fn link_op(c: &mut FsCore, ino: Ino, newparent: Ino, newname: &[u8]) -> Result<Attr> {
        check_name(newname)?;
        c.check_writable()?;
        let mut di = live_inode(c, ino)?;
        if di.is_dir() {
            return Err(Error::new(
                ErrorKind::Permission,
                "hard links to directories are not allowed",
            ));
        }
        if di.nlink() >= UFS_LINK_MAX {
            return Err(Error::new(ErrorKind::TooManyLinks, "too many links"));
        }
        let mut pdi = dir_inode(c, newparent)?;
        must_be_absent(c, newparent, &pdi, newname)?;
        may_enter(&pdi)?;
        may_change(&di)?;
        // Raise the count first so a crash leaves it too high, never too low.
        // An inode with no link (an O_TMPFILE file) stops being an orphan.
        if di.nlink() == 0 {
            c.orphans.remove(&ino);
        }
        di.set_nlink(di.nlink() + 1);
        touch(&mut di, false, true, false);
        c.write_inode(ino, &di)?;
        if let Err(e) = c.dir_enter(
            newparent,
            &mut pdi,
            newname,
            ino,
            iftodt(di.di_mode()),
            Reserve::Privileged,
            &[],
        ) {
            c.write_inode(newparent, &pdi)?;
            di.set_nlink(di.nlink() - 1);
            c.write_inode(ino, &di)?;
            return Err(e);
        }
        touch(&mut pdi, true, true, false);
        c.write_inode(newparent, &pdi)?;
        attr_of(ino, &di, c.g.bsize)
    }

    fn unlink_op(c: &mut FsCore, parent: Ino, name: &[u8]) -> Result<()> {
        check_name(name)?;
        c.check_writable()?;
        let mut pdi = dir_inode(c, parent)?;
        let f = must_find(c, parent, &pdi, name)?;
        let di = live_inode(c, f.ino)?;
        if di.is_dir() {
            return Err(Error::new(ErrorKind::IsDir, "is a directory"));
        }
        may_unlink(&pdi, &di)?;
        c.dir_remove(parent, &mut pdi, name, Reserve::Privileged, &[])?;
        touch(&mut pdi, true, true, false);
        c.write_inode(parent, &pdi)?;
        drop_link(c, f.ino, 1)?;
        Ok(())
    }

    fn rmdir_op(c: &mut FsCore, parent: Ino, name: &[u8]) -> Result<()> {
        check_name(name)?;
        if name == b"." {
            return Err(Error::new(ErrorKind::Invalid, "cannot remove '.'"));
        }
        if name == b".." {
            return Err(Error::new(ErrorKind::NotEmpty, "cannot remove '..'"));
        }
        c.check_writable()?;
        let mut pdi = dir_inode(c, parent)?;
        let f = must_find(c, parent, &pdi, name)?;
        let di = live_inode(c, f.ino)?;
        if !di.is_dir() {
            return Err(Error::new(ErrorKind::NotDir, "not a directory"));
        }
        // Linux's order (may_delete before the file system's rmdir): the
        // flags' EPERM before ENOTEMPTY.
        may_unlink(&pdi, &di)?;
        if !c.dir_is_empty(f.ino, &di)? {
            return Err(Error::new(ErrorKind::NotEmpty, "directory not empty"));
        }
        c.dir_remove(parent, &mut pdi, name, Reserve::Privileged, &[])?;
        touch(&mut pdi, true, true, false);
        c.write_inode(parent, &pdi)?;
        c.placement_forget(f.ino);
        // The parent's count drops once the child (and its '..') is gone.
        let gone = drop_link(c, f.ino, 2)?;
        let mut pdi = dir_inode(c, parent)?;
        pdi.set_nlink(pdi.nlink().saturating_sub(1));
        c.order.inode_deps(parent).needs.push(gone);
        c.write_inode(parent, &pdi)?;
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn rename_op(
        c: &mut FsCore,
        parent: Ino,
        name: &[u8],
        newparent: Ino,
        newname: &[u8],
        mode: RenameMode,
        whiteout: Option<Cred>,
    ) -> Result<()> {
        check_name(name)?;
        check_name(newname)?;
        if name == b"." || name == b".." || newname == b"." || newname == b".." {
            return Err(Error::new(ErrorKind::Invalid, "cannot rename '.' or '..'"));
        }
        c.check_writable()?;
        let pdi = dir_inode(c, parent)?;
        let src = must_find(c, parent, &pdi, name)?;
        let npdi = dir_inode(c, newparent)?;
        let dst = c.dir_lookup(newparent, &npdi, newname)?;
        let sdi = live_inode(c, src.ino)?;
        let src_is_dir = sdi.is_dir();
        may_unlink(&pdi, &sdi)?;
        may_enter(&npdi)?;
        if let Some(d) = &dst {
            if d.ino != src.ino {
                may_unlink(&npdi, &live_inode(c, d.ino)?)?;
            }
        }
        match (mode, &dst) {
            (RenameMode::NoReplace, Some(_)) => {
                return Err(Error::new(ErrorKind::Exists, "target exists"))
            }
            (RenameMode::Exchange, None) => {
                return Err(Error::new(
                    ErrorKind::NotFound,
                    "exchange target does not exist",
                ))
            }
            _ => {}
        }
        if let Some(d) = &dst {
            if d.ino == src.ino {
                return Ok(()); // same file: POSIX says do nothing
            }
        }
        // A directory may not move into its own subtree.
        if src_is_dir && parent != newparent && is_ancestor(c, src.ino, newparent)? {
            return Err(Error::new(
                ErrorKind::Invalid,
                "cannot move a directory into itself",
            ));
        }
        if mode == RenameMode::Exchange {
            let d = dst
                .clone()
                .ok_or_else(|| Error::new(ErrorKind::NotFound, "target vanished"))?;
            let ddi = live_inode(c, d.ino)?;
            if ddi.is_dir() && parent != newparent && is_ancestor(c, d.ino, parent)? {
                return Err(Error::new(
                    ErrorKind::Invalid,
                    "cannot move a directory into itself",
                ));
            }
            let a = Named {
                parent,
                name,
                ino: src.ino,
                di: &sdi,
            };
            let b = Named {
                parent: newparent,
                name: newname,
                ino: d.ino,
                di: &ddi,
            };
            if c.cache.mode().tracks() {
                return exchange_ordered(c, a, b);
            }
            return exchange(c, a, b);
        }
        if let Some(d) = &dst {
            let ddi = live_inode(c, d.ino)?;
            if src_is_dir && !ddi.is_dir() {
                return Err(Error::new(
                    ErrorKind::NotDir,
                    "cannot replace a non-directory with a directory",
                ));
            }
            if !src_is_dir && ddi.is_dir() {
                return Err(Error::new(
                    ErrorKind::IsDir,
                    "cannot replace a directory with a non-directory",
                ));
            }
            if ddi.is_dir() && !c.dir_is_empty(d.ino, &ddi)? {
                return Err(Error::new(
                    ErrorKind::NotEmpty,
                    "target directory not empty",
                ));
            }
        } else if src_is_dir && parent != newparent && npdi.nlink() >= UFS_LINK_MAX {
            return Err(Error::new(
                ErrorKind::TooManyLinks,
                "target directory has too many links",
            ));
        }
        // Within one directory, a new name that fits in the old record is
        // written where the old one stands: a single chunk change replaces
        // one name with the other, so no crash state has both or neither
        // and no other order is needed (nor a link count raised).
        if parent == newparent && dst.is_none() && whiteout.is_none() {
            let mut pdi = dir_inode(c, parent)?;
            if c.dir_rename_in_place(parent, &pdi, name, newname)?
                .is_some()
            {
                touch(&mut pdi, true, true, false);
                c.write_inode(parent, &pdi)?;
                let mut sdi = sdi;
                touch(&mut sdi, false, true, false);
                c.write_inode(src.ino, &sdi)?;
                return Ok(());
            }
        }
        // The order keeps every crash state recoverable (FFS's rename
        // rules): the source's count goes up before the new name points at
        // it; the old name goes only once the new one is durable; counts go
        // down only after the names they counted are gone.
        let moving_dir = src_is_dir && parent != newparent;
        // 0. A whiteout to leave behind: made (and on its way to disk)
        //    before anything changes, so running out of inodes fails the
        //    rename cleanly. Linux makes it as mknod(S_IFCHR | 0, 0) by
        //    the renaming process (vfs_whiteout).
        let whiteout_ino = match whiteout {
            Some(cred) => {
                let pdi = dir_inode(c, parent)?;
                let wino = c.alloc_inode(parent, false)?;
                let mut wdi = fresh_inode(c, wino, dinode::IFCHR, cred, &pdi)?;
                wdi.set_nlink(1);
                wdi.set_di_rdev(0);
                c.write_inode(wino, &wdi)?;
                Some(wino)
            }
            None => None,
        };
        // 1. Bump the source's link count.
        let mut sdi = sdi;
        sdi.set_nlink(sdi.nlink() + 1);
        touch(&mut sdi, false, true, false);
        c.write_inode(src.ino, &sdi)?;
        // 2. A directory moving in: the new parent counts its '..' first.
        let mut npdi = dir_inode(c, newparent)?;
        let mut counted = Vec::new();
        if moving_dir {
            npdi.set_nlink(npdi.nlink() + 1);
            counted.push(c.write_inode(newparent, &npdi)?);
        }
        // 3. Point the new name at the source.
        let dtype = iftodt(sdi.di_mode());
        let new_name = match &dst {
            Some(_) => c.dir_rewrite(newparent, &npdi, newname, src.ino, dtype, &counted)?,
            None => match c.dir_enter(
                newparent,
                &mut npdi,
                newname,
                src.ino,
                dtype,
                Reserve::Privileged,
                &counted,
            ) {
                Ok(seen) => seen,
                Err(e) => {
                    if moving_dir {
                        npdi.set_nlink(npdi.nlink() - 1);
                    }
                    c.write_inode(newparent, &npdi)?;
                    sdi.set_nlink(sdi.nlink() - 1);
                    c.write_inode(src.ino, &sdi)?;
                    if let Some(wino) = whiteout_ino {
                        undo_create(c, wino)?;
                    }
                    return Err(e);
                }
            },
        };
        touch(&mut npdi, true, true, false);
        // The new name is there only once the directory's size covers it
        // (it may have grown a chunk for it).
        let covered = c.write_inode(newparent, &npdi)?;
        // 4. The replaced inode loses the name; a replaced directory's '..'
        //    stops counting for the new parent once it is gone.
        if let Some(d) = &dst {
            let ddi = live_inode(c, d.ino)?;
            let was_dir = ddi.is_dir();
            let gone = drop_link(c, d.ino, if was_dir { 2 } else { 1 })?;
            if was_dir {
                let mut npdi = dir_inode(c, newparent)?;
                npdi.set_nlink(npdi.nlink().saturating_sub(1));
                c.order.inode_deps(newparent).needs.push(gone);
                c.write_inode(newparent, &npdi)?;
            }
        }
        // 5. Remove the old name, once the new one is durable (or point it
        //    at the whiteout: the entry changes in place).
        let mut pdi = dir_inode(c, parent)?;
        let mut new_name_there = new_name;
        new_name_there.push(covered);
        let old_name_gone = match whiteout_ino {
            Some(wino) => c.dir_rewrite(parent, &pdi, name, wino, dt::DT_CHR, &new_name_there)?,
            None => {
                c.dir_remove(parent, &mut pdi, name, Reserve::Privileged, &new_name_there)?
                    .1
            }
        };
        touch(&mut pdi, true, true, false);
        c.write_inode(parent, &pdi)?;
        let mut sdi = live_inode(c, src.ino)?;
        sdi.set_nlink(sdi.nlink() - 1);
        c.write_inode(src.ino, &sdi)?;
        // 6. A moved directory gets a new '..' and depth; the old parent's
        //    count drops once the old '..' is gone.
        if moving_dir {
            // Only once the move itself is on disk (FFS: new entry, old
            // entry removed, then '..').
            c.dir_rewrite(src.ino, &sdi, b"..", newparent, dt::DT_DIR, &old_name_gone)?;
            let mut pdi = dir_inode(c, parent)?;
            pdi.set_nlink(pdi.nlink().saturating_sub(1));
            c.write_inode(parent, &pdi)?;
            let npdi = dir_inode(c, newparent)?;
            set_depths(c, src.ino, dirdepth(&npdi) + 1)?;
        }
        Ok(())
    }

    fn setattr_op(c: &mut FsCore, ino: Ino, s: &SetAttr, cred: Cred) -> Result<Attr> {
        c.check_writable()?;
        let mut di = live_inode(c, ino)?;
        // Linux's notify_change: times set to given values, like the mode,
        // owner and size, are refused on an immutable or append-only
        // file; times set to now (utime(NULL), `touch`) only on an
        // immutable one.
        let given = |t: &Option<TimeSet>| matches!(t, Some(TimeSet::At(_)));
        let other = s.mode.is_some()
            || s.uid.is_some()
            || s.gid.is_some()
            || s.size.is_some()
            || given(&s.atime)
            || given(&s.mtime);
        if other {
            may_change(&di)?;
        } else if (s.atime.is_some() || s.mtime.is_some()) && di.di_flags() & IMMUTABLE != 0 {
            return Err(flag_refusal("file is immutable"));
        }
        if let Some(f) = s.flags {
            // The super-user's flags are the super-user's to change (at
            // FreeBSD's securelevel 0); the owner's only while none of
            // them is set.
            let sys_change = (f ^ di.di_flags()) & SF_SETTABLE != 0;
            if cred.uid != 0 && (sys_change || di.di_flags() & SF_SETTABLE != 0) {
                return Err(flag_refusal("only the super-user may change system flags"));
            }
        }
        if let Some(size) = s.size {
            if di.is_dir() {
                return Err(Error::new(ErrorKind::IsDir, "cannot truncate a directory"));
            }
            if !di.is_reg() {
                return Err(Error::new(
                    ErrorKind::Invalid,
                    "can only truncate regular files",
                ));
            }
            let r = c.truncate_data(ino, &mut di, size, cred.reserve());
            touch(&mut di, true, true, false);
            if cred.uid != 0 {
                kill_suid(&mut di);
            }
            c.write_inode(ino, &di)?;
            r?;
        }
        // Linux's chown: a new owner or group takes setuid (and setgid with
        // group execute) away from anything but a directory, whoever asks
        // (chown(2), notify_change); the FUSE mount hands this to the file
        // system (FUSE_HANDLE_KILLPRIV) instead of asking for the mode first.
        if (s.uid.is_some() || s.gid.is_some()) && s.mode.is_none() && !di.is_dir() {
            kill_suid(&mut di);
        }
        if let Some(m) = s.mode {
            di.set_di_mode((di.di_mode() & dinode::IFMT) | (m & 0o7777));
        }
        if let Some(u) = s.uid {
            di.set_di_uid(u);
        }
        if let Some(g) = s.gid {
            di.set_di_gid(g);
        }
        if let Some(f) = s.flags {
            di.set_di_flags(f);
        }
        // A time the format cannot hold (UFS1: before 1970, after 2106)
        // is stored as the nearest it can, and answered as stored.
        let v = c.g.v;
        let set_t = |t: TimeSet| match t {
            TimeSet::Now => {
                let (s, n) = now();
                (s, n)
            }
            TimeSet::At(t) => (
                ufs_format::dinode::stored_time(v, t.sec),
                i32::try_from(t.nsec).unwrap_or(0),
            ),
        };
        if let Some(t) = s.atime {
            let (a, n) = set_t(t);
            di.set_di_atime(a);
            di.set_di_atimensec(n);
        }
        if let Some(t) = s.mtime {
            let (a, n) = set_t(t);
            di.set_di_mtime(a);
            di.set_di_mtimensec(n);
        }
        touch(&mut di, false, true, false);
        if let Some(t) = s.ctime {
            di.set_di_ctime(ufs_format::dinode::stored_time(v, t.sec));
            di.set_di_ctimensec(i32::try_from(t.nsec).unwrap_or(0));
        }
        c.write_inode(ino, &di)?;
        attr_of(ino, &di, c.g.bsize)
    }

    pub fn read(&self, ino: Ino, off: u64, size: usize) -> Result<Vec<u8>> {
        let r = self.read_op(ino, off, size);
        let n = r.as_ref().map_or(0, |d| d.len() as u64);
        self.counted(Call::Read, n, r)
    }

    /// A read: planned under the engine lock (cached blocks copied, holes
    /// zeroed, atime), the file blocks the cache does not hold then read
    /// from the device without it, so lookups, getattr, readdir and writes
    /// go on beside a read that waits for the disk. If any block was freed
    /// meanwhile (the file truncated, or another one removed) the blocks
    /// read might since belong to another file, so the read is done again
    /// under the lock.
    fn read_op(&self, ino: Ino, off: u64, size: usize) -> Result<Vec<u8>> {
        let (planned, frees, dev) = {
            let mut c = self.lock();
            let (planned, accessed) = Self::read_planned(&mut c, ino, off, size)?;
            let (frees, dev) = (c.block_frees, c.cache.device_handle());
            if let Some(di) = accessed {
                // The access time is a change like any other: made inside
                // an operation, which ends it as the write mode says
                // (lazily: FreeBSD marks IN_ACCESS and writes the inode
                // with its next update, even under `-o sync`).
                let mut op = Op::begin_lazy(c);
                op.write_inode(ino, &di)?;
                op.end()?;
            } else {
                drop(c);
            }
            if !planned.needs_device() {
                return planned.finish(&*dev);
            }
            (planned, frees, dev)
        };
        let data = planned.finish(&*dev);
        let mut c = self.lock();
        if c.block_frees == frees {
            return data;
        }
        let di = live_inode(&mut c, ino)?;
        c.read_data(ino, &di, off, size)
    }

    /// The read planned, and the inode with its access time updated when
    /// the mount's atime policy asks for that.
    fn read_planned(
        c: &mut FsCore,
        ino: Ino,
        off: u64,
        size: usize,
    ) -> Result<(crate::inode::DataRead, Option<dinode::Dinode>)> {
        let mut di = live_inode(c, ino)?;
        if di.is_dir() {
            return Err(Error::new(ErrorKind::IsDir, "is a directory"));
        }
        let data = c.plan_read(ino, &di, off, size)?;
        let at = (di.di_atime(), di.di_atimensec());
        let (now_s, _) = now();
        if !c.read_only
            && c.opts.atime.needs_update(
                at,
                (di.di_mtime(), di.di_mtimensec()),
                (di.di_ctime(), di.di_ctimensec()),
                now_s,
            )
        {
            touch(&mut di, false, false, true);
            return Ok((data, Some(di)));
        }
        Ok((data, None))
    }

    fn write_op(
        c: &mut FsCore,
        ino: Ino,
        off: u64,
        data: &[u8],
        cred: Cred,
        kill: bool,
    ) -> Result<usize> {
        c.check_writable()?;
        let mut di = live_inode(c, ino)?;
        if !di.is_reg() {
            return Err(Error::new(
                ErrorKind::Invalid,
                "can only write regular files",
            ));
        }
        // ffs_write: nothing into an immutable file, and only at the end
        // of an append-only one.
        if di.di_flags() & IMMUTABLE != 0 {
            return Err(flag_refusal("file is immutable"));
        }
        if di.di_flags() & APPEND != 0 && off != di.di_size() {
            return Err(flag_refusal("file is append-only: writes go at its end"));
        }
        let r = c.write_data(ino, &mut di, off, data, cred.reserve());
        touch(&mut di, true, true, false);
        if kill {
            kill_suid(&mut di);
        }
        // The inode is stored whatever happens to the capability (its
        // blocks changed).
        let dropped = match r {
            Ok(_) => xattr::drop_capability(c, ino, &mut di, cred),
            Err(_) => Ok(()),
        };
        c.write_inode(ino, &di)?;
        dropped?;
        r
    }

    pub fn readdir(&self, ino: Ino, cookie: u64, max: usize) -> Result<Vec<ReadDirEntry>> {
        let r = (|| {
            let mut c = self.lock();
            let di = dir_inode(&mut c, ino)?;
            let ents = c.dir_read(ino, &di, cookie, max)?;
            c.prefetch_entries(&ents);
            Ok(ents)
        })();
        self.counted(Call::Readdir, 0, r)
    }

    pub fn statfs(&self) -> StatFs {
        // Files removed a moment ago count as free (their forgets, queued
        // behind the removal, are applied first).
        self.drain_forgets();
        let c = self.lock();
        let t = c.sb.fs_cstotal();
        let g = c.g;
        // Releases still waiting for their pointers to be durably gone
        // count as free, as FreeBSD's statfs adds fs_pendingblocks and
        // fs_pendinginodes: the space is the user's again, an allocation
        // that needs it waits for it (a sync) rather than failing.
        let (pending_frags, pending_inodes) = c.pending_frees();
        let frag = i64::try_from(g.frag).unwrap_or(8);
        let bfree = u64::try_from(t.cs_nbfree * frag + t.cs_nffree).unwrap_or(0) + pending_frags;
        StatFs {
            frsize: g.fsize,
            bsize: g.bsize,
            blocks: g.dsize,
            bfree,
            bavail: u64::try_from(c.freespace(g.minfree) + to_signed(pending_frags)).unwrap_or(0),
            files: g.ninodes() - UFS_ROOTINO,
            ffree: u64::try_from(t.cs_nifree).unwrap_or(0) + pending_inodes,
            namelen: u32::try_from(MAXNAMLEN).unwrap_or(255),
        }
    }

    /// Makes `ino` durable (currently: the whole file system).
    pub fn fsync(&self, _ino: Ino) -> Result<()> {
        let r = self.lock().sync();
        self.counted(Call::Fsync, 0, r)
    }

    /// Stops all writing for good (see `BufferCache::fail`): the file
    /// system is not marked clean at unmount and fsck must run.
    pub fn fail(&self, why: &str) {
        self.lock().cache.fail(why);
    }

    pub fn sync(&self) -> Result<()> {
        self.lock().sync()
    }

    /// The syncer's flush: makes every change made before the call
    /// durable in rounds of writes and a flush, releasing the engine lock
    /// every few milliseconds within each round, so that requests go on
    /// meanwhile. A whole sync under
    /// one hold stalled every request for as long as it took: 0.7 s after
    /// a `tar -x` over a removed tree (240 rounds, a chain of reused
    /// inodes and directory blocks advancing a step a round). Changes
    /// made meanwhile wait for the next sync, so it ends under any load.
    pub fn sync_background(&self) -> Result<()> {
        // Each hold of the lock is kept to a few milliseconds: the plan
        // is made a part at a time, buffers are written until a batch is
        // full or its time is up, and a flush's changes are settled a part
        // at a time (a million-entry directory's sync otherwise held the
        // lock for 0.1-0.2 s at each of these steps).
        const PLAN_PART: usize = 4096;
        const BATCH: usize = 256;
        const BATCH_TIME: std::time::Duration = std::time::Duration::from_millis(4);
        const SETTLE_PART: usize = 8192;
        // Lets a request waiting for the lock take it (the lock is not
        // fair: released and taken again at once, it stays here).
        let pause = || std::thread::sleep(std::time::Duration::from_micros(50));
        /// Rounds before giving up (each writes what can go, so a sync
        /// takes as many rounds as its longest chain of changes: hundreds).
        const MAX_ROUNDS: u32 = 100_000;
        let (upto, bell) = {
            let g = self.lock();
            // Numbered in the hold that fixes `upto`: a writer that hurried
            // before it has its changes in this sync (order::cleanup).
            g.syncer_bell.sync_begins();
            (g.cache.last_change(), g.syncer_bell.clone())
        };
        for round in 0..MAX_ROUNDS {
            let mut g = self.lock();
            if g.background_sync_done(upto)? {
                g.cache.note_background_sync(round as u64);
                drop(g);
                bell.round_done();
                return Ok(());
            }
            drop(g);
            let mut plan = Vec::new();
            let mut from = Some(Frag::new(0));
            while let Some(f) = from {
                pause();
                let (part, next) = self.lock().cache.background_plan_part(f, PLAN_PART, upto);
                plan.extend(part);
                from = next;
            }
            plan.sort_unstable();
            plan.dedup();
            let mut wrote = false;
            let mut rest = &plan[..];
            while !rest.is_empty() {
                pause();
                let mut g = self.lock();
                let start = std::time::Instant::now();
                let mut n = 0;
                while n < rest.len() && n < BATCH && start.elapsed() < BATCH_TIME {
                    // Written as it is now: a buffer changed since the plan
                    // goes with what of it can go.
                    wrote |= g.cache.write_buf(rest[n])?;
                    n += 1;
                }
                rest = &rest[n..];
            }
            pause();
            let mut g = self.lock();
            let flush = if !wrote {
                // Nothing in the plan could go: the full round, which
                // writes everything rolled back if it must, and fails if
                // that makes no progress either.
                g.cache.sync_round()?;
                None
            } else if g.cache.flushes_each_round() {
                Some(g.cache.unlocked_flush_begin()?)
            } else {
                None
            };
            drop(g);
            // The flush (0.1-0.2 s after a tar's worth of data) without the
            // lock.
            if let Some((dev, mut f)) = flush {
                let r = dev.flush();
                self.lock().cache.unlocked_flush_result(r)?;
                while !self.lock().cache.unlocked_flush_settle(&mut f, SETTLE_PART) {
                    pause();
                }
            }
            // Writers slowed by a state past its bound go on (order::cleanup).
            bell.round_done();
            pause();
        }
        Err(Error::new(
            ErrorKind::Io,
            format!("background sync: not done after {MAX_ROUNDS} rounds; the next sync goes on"),
        ))
    }

    /// The doorbell a background syncer waits on and writers ring when
    /// the soft-updates state passes its bound (`order::cleanup`); the
    /// syncer attaches to it.
    pub fn syncer_bell(&self) -> std::sync::Arc<crate::order::cleanup::SyncerBell> {
        self.lock().syncer_bell.clone()
    }

    /// Flushes, frees orphans and marks the file system clean.
    /// The first damage an operation met during this mount, if any: the
    /// unmount leaves the file system marked for fsck.
    pub fn damage_seen(&self) -> Option<String> {
        self.lock().damage.clone()
    }

    pub fn unmount(&self) -> Result<()> {
        let failed = self.apply_forgets();
        if let Some((ino, e)) = failed.into_iter().next() {
            return Err(Error::new(e.kind, format!("releasing inode {ino}: {e}")));
        }
        self.lock().unmount()
    }

    /// `mount -o remount`: read-only or read-write
    /// ([`FsCore::remount`](crate::fs::FsCore::remount)), and the access
    /// time rule from now on.
    pub fn remount(&self, read_only: bool, atime: crate::fs::Atime) -> Result<()> {
        let failed = self.apply_forgets();
        if let Some((ino, e)) = failed.into_iter().next() {
            return Err(Error::new(e.kind, format!("releasing inode {ino}: {e}")));
        }
        let mut c = self.lock();
        c.remount(read_only)?;
        c.opts.atime = atime;
        Ok(())
    }

    /// The dirty buffers, by address and kind, in address order: a
    /// worklist for a syncer that writes each buffer some time after it
    /// was first dirtied (the modeled syncer wheel of `ufs-bench`).
    pub fn dirty_list(&self) -> Vec<(Frag, crate::cache::BlockKind)> {
        let g = self.lock();
        g.cache
            .bufs_from(Frag::new(0))
            .filter(|(_, b)| b.dirty)
            .map(|(a, b)| (a, b.kind))
            .collect()
    }

    /// Writes those of `addrs` still dirty, in the order given, each as
    /// the write ordering lets it go (with soft updates, regions whose
    /// needs are not durable go rolled back and the buffer stays dirty);
    /// then flushes and does the releases that waited for what became
    /// durable. Returns how many buffers were written. One slot of
    /// FreeBSD's syncer wheel (`sched_sync`) is such a pass.
    pub fn write_buffers(&self, addrs: &[Frag]) -> Result<usize> {
        let mut g = self.lock();
        if g.read_only {
            return Ok(0);
        }
        let mut n = 0;
        for &a in addrs {
            if g.cache.write_buf(a)? {
                n += 1;
            }
        }
        if n > 0 {
            g.cache.flush()?;
            g.process_deferred()?;
        }
        Ok(n)
    }

    /// Sets the pool that holds directory blocks with vmiodir off: its
    /// size (by default FreeBSD 4.5's buffer space,
    /// [`crate::fs::dir_pool_bytes`]) and whether the other buffers in use
    /// share it (by default they do); nothing with vmiodir on. For the
    /// evaluation's ablations of that model.
    pub fn set_dir_pool(&self, bytes: u64, space: crate::cache::DirSpace) {
        let mut g = self.lock();
        if !g.opts.vmiodir {
            g.cache.set_dir_pool(Some(bytes), space);
        }
    }

    /// Buffers now dirty in the cache.
    pub fn dirty_buffers(&self) -> usize {
        self.lock().cache.dirty_count()
    }

    pub fn cache_stats(&self) -> CacheStats {
        self.lock().cache.stats()
    }

    /// Counters of the engine, and what dirhash knows about directory
    /// `dir` (checked against its blocks if `verify`).
    pub fn stats(&self, dir: Option<Ino>, verify: bool) -> Result<EngineStats> {
        let mut c = self.lock();
        let dir = match dir {
            None => None,
            Some(ino) => {
                let di = dir_inode(&mut c, ino)?;
                let verified = if verify {
                    Some(c.dir_verify_index(ino, &di)?)
                } else {
                    None
                };
                let described = c.dirhash.describe(ino);
                Some(DirIndexInfo {
                    ino,
                    dir_bytes: di.di_size(),
                    hashed: described.is_some(),
                    index_bytes: described.map(|d| d.0),
                    score: described.map(|d| d.2),
                    verified,
                })
            }
        };
        Ok(EngineStats {
            dirhash: c.dirhash.snapshot(),
            dirhash_config: c.dirhash.cfg.clone(),
            last_check_failure: c.dirhash.last_check_failure.clone(),
            dir,
            cache: c.cache.stats(),
            disk: c.cache.device().disk_stats(),
            inode_order: c.opts.inode_order.name().to_string(),
            placement: crate::alloc::placement::PlacementStats {
                directories: c.placement.dirs.len() as u64,
                ..c.placement.stats
            },
            order: c.cache.order_stats(),
            failure: c.cache.failure().map(str::to_string),
            vmiodir: c.opts.vmiodir,
            calls: self.calls.snapshot(),
            lock: self.core.stats(),
        })
    }

    /// A low-memory event for dirhash; returns the bytes freed.
    pub fn dirhash_lowmem(&self) -> u64 {
        self.lock().dirhash.lowmem(std::time::Instant::now())
    }

    /// Gives clean cached blocks back until the cache holds at most
    /// `target` bytes (an idle mount, or memory pressure); dirty blocks
    /// stay, memory made ahead for new buffers goes. Returns the bytes of
    /// blocks given back.
    pub fn trim_cache(&self, target: u64) -> u64 {
        self.lock().cache.trim_clean(target)
    }

    /// The inode of `path` (components relative to the root).
    pub fn resolve(&self, path: &std::path::Path) -> Result<Ino> {
        use std::os::unix::ffi::OsStrExt;
        let mut ino = self.root();
        for comp in path.components() {
            match comp {
                std::path::Component::Normal(n) => ino = self.lookup(ino, n.as_bytes())?.ino,
                std::path::Component::CurDir | std::path::Component::RootDir => {}
                _ => {
                    return Err(Error::new(
                        ErrorKind::Invalid,
                        format!("path {} is not plain", path.display()),
                    ))
                }
            }
        }
        Ok(ino)
    }

    /// Drops clean cached blocks (cold-cache measurements).
    pub fn drop_caches(&self) -> Result<()> {
        let mut c = self.lock();
        c.sync()?;
        c.cache.drop_clean();
        c.cache.device().drop_caches();
        c.dirhash.clear();
        c.dir_hints.clear();
        Ok(())
    }
}

/// What `ufskit stats` shows.
#[derive(Debug, Clone, serde::Serialize)]
pub struct EngineStats {
    pub dirhash: crate::dir::dirhash::DirhashStats,
    pub dirhash_config: crate::dir::dirhash::DirhashConfig,
    pub last_check_failure: Option<String>,
    pub dir: Option<DirIndexInfo>,
    pub cache: CacheStats,
    /// What a modeled disk under the mount measured (`-o disk=`).
    pub disk: Option<crate::dev::DiskStats>,
    /// Inode order in large directories (`-o inodeorder=`) and its counters.
    pub inode_order: String,
    pub placement: crate::alloc::placement::PlacementStats,
    /// Write ordering: the mode and what it did.
    pub order: crate::order::OrderStats,
    /// Why writing stopped, if it did (a device failure, a panic).
    pub failure: Option<String>,
    pub vmiodir: bool,
    /// Calls made, by kind.
    pub calls: CallStats,
    /// The engine lock: takes, waits, time waited and held.
    pub lock: LockStats,
}

/// One directory as dirhash sees it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DirIndexInfo {
    pub ino: Ino,
    pub dir_bytes: u64,
    pub hashed: bool,
    pub index_bytes: Option<u64>,
    pub score: Option<u32>,
    /// Result of checking the index against the blocks, if asked.
    pub verified: Option<bool>,
}

/// A lookup made by an operation that changes the directory: when it
/// scans linearly, the sweep that then finds the entry to remove or the
/// slot for a new one (from the directory's start, as FreeBSD's `namei`
/// does for DELETE, CREATE and RENAME) examines those entries again, so
/// this lookup's entries are counted as examined twice (see
/// `DirhashStats::entries_rescanned`).
fn modifying_lookup<T>(c: &mut FsCore, f: impl FnOnce(&mut FsCore) -> Result<T>) -> Result<T> {
    let (scanned, linear) = (
        c.dirhash.stats.entries_scanned,
        c.dirhash.stats.lookups_linear,
    );
    let r = f(c);
    let st = &mut c.dirhash.stats;
    if st.lookups_linear > linear {
        st.entries_rescanned += st.entries_scanned - scanned;
    }
    r
}

/// The entry `name` of directory `dir`, or `NotFound`.
fn must_find(c: &mut FsCore, dir: Ino, ddi: &Dinode, name: &[u8]) -> Result<crate::dir::Found> {
    modifying_lookup(c, |c| c.dir_lookup(dir, ddi, name))?.ok_or_else(|| {
        Error::new(
            ErrorKind::NotFound,
            format!("{} not found", String::from_utf8_lossy(name)),
        )
    })
}

/// `Exists` unless directory `dir` lacks `name`.
fn must_be_absent(c: &mut FsCore, dir: Ino, ddi: &Dinode, name: &[u8]) -> Result<()> {
    if modifying_lookup(c, |c| c.dir_lookup(dir, ddi, name))?.is_some() {
        return Err(Error::new(
            ErrorKind::Exists,
            format!("{} exists", String::from_utf8_lossy(name)),
        ));
    }
    Ok(())
}

/// The permission bits of a mode from the caller (setuid, setgid, sticky
/// and rwx), as the inode's 16-bit field holds them.
fn perm_bits(mode: u32) -> u16 {
    u16::try_from(mode & 0o7777).unwrap_or(0)
}

fn live_inode(c: &mut FsCore, ino: Ino) -> Result<Dinode> {
    let di = c.read_inode(ino)?;
    if di.di_mode() == 0 {
        return Err(Error::new(
            ErrorKind::NotFound,
            format!("inode {ino} is not in use"),
        ));
    }
    Ok(di)
}

fn dir_inode(c: &mut FsCore, ino: Ino) -> Result<Dinode> {
    let di = live_inode(c, ino)?;
    if !di.is_dir() {
        return Err(Error::new(
            ErrorKind::NotDir,
            format!("inode {ino} is not a directory"),
        ));
    }
    Ok(di)
}

/// A new inode's initial contents: the generation number the allocator
/// left in the inode block is kept (bumped), everything else set afresh.
fn fresh_inode(c: &mut FsCore, ino: Ino, mode: u16, cred: Cred, parent: &Dinode) -> Result<Dinode> {
    let old = c.read_inode(ino)?;
    if old.di_mode() != 0 {
        return Err(Error::damaged(
            crate::error::Damage::Inode(ino),
            format!("inode {ino} allocated while in use (bitmap disagrees with inode table)"),
        ));
    }
    let mut di = Dinode::default();
    let mut gen = old.di_gen().wrapping_add(1);
    if gen == 0 {
        gen = c.random_gen();
    }
    di.set_di_gen(gen);
    di.set_di_mode(mode);
    di.set_di_uid(cred.uid);
    // Linux semantics: the caller's group, or the parent's under setgid.
    let setgid_parent = parent.di_mode() & 0o2000 != 0;
    di.set_di_gid(if setgid_parent {
        parent.di_gid()
    } else {
        cred.gid
    });
    if setgid_parent && mode & dinode::IFMT == dinode::IFDIR {
        di.set_di_mode(mode | 0o2000);
    }
    let (s, n) = now();
    di.set_di_atime(s);
    di.set_di_atimensec(n);
    di.set_di_mtime(s);
    di.set_di_mtimensec(n);
    di.set_di_ctime(s);
    di.set_di_ctimensec(n);
    // UFS1 inodes keep no birth time (it would read back as 0).
    if !c.g.v.is_ufs1() {
        di.set_di_birthtime(s);
        di.set_di_birthnsec(n);
    }
    Ok(di)
}

/// Takes setuid away, and setgid when group execute is set (setgid without
/// it marks mandatory locking and stays), as Linux does when a file is
/// written, truncated or given away (`should_remove_suid`).
fn kill_suid(di: &mut Dinode) {
    let mut m = di.di_mode() & !0o4000;
    if m & 0o010 != 0 {
        m &= !0o2000;
    }
    di.set_di_mode(m);
}

/// Linux inode flags (`lsattr`; FS_IOC_GETFLAGS) for FreeBSD's `flags`:
/// immutable (FS_IMMUTABLE_FL) for either immutable flag, append-only
/// (FS_APPEND_FL) for either append flag, nodump (FS_NODUMP_FL).
pub fn linux_inode_flags(flags: u32) -> u32 {
    let mut l = 0;
    if flags & IMMUTABLE != 0 {
        l |= LINUX_IMMUTABLE_FL;
    }
    if flags & APPEND != 0 {
        l |= LINUX_APPEND_FL;
    }
    if flags & UF_NODUMP != 0 {
        l |= LINUX_NODUMP_FL;
    }
    l
}

/// FreeBSD's flags after `chattr` asks for Linux flags `linux`
/// (FS_IOC_SETFLAGS) on a file with flags `current`: a new immutable or
/// append-only flag is the system one (Linux asks CAP_LINUX_IMMUTABLE for
/// them, FreeBSD the super-user), one already set stays as it is, a
/// cleared one clears both kinds; nodump is the user's; every other
/// FreeBSD flag (no-unlink, archived...) is kept. None for a Linux flag
/// with no FreeBSD meaning.
pub fn with_linux_inode_flags(current: u32, linux: u32) -> Option<u32> {
    if linux & !(LINUX_IMMUTABLE_FL | LINUX_APPEND_FL | LINUX_NODUMP_FL) != 0 {
        return None;
    }
    let mut f = current & !(IMMUTABLE | APPEND | UF_NODUMP);
    let keep_or = |mask: u32, sys: u32| {
        if current & mask != 0 {
            current & mask
        } else {
            sys
        }
    };
    if linux & LINUX_IMMUTABLE_FL != 0 {
        f |= keep_or(IMMUTABLE, SF_IMMUTABLE);
    }
    if linux & LINUX_APPEND_FL != 0 {
        f |= keep_or(APPEND, SF_APPEND);
    }
    if linux & LINUX_NODUMP_FL != 0 {
        f |= UF_NODUMP;
    }
    Some(f)
}

const LINUX_IMMUTABLE_FL: u32 = 0x10;
const LINUX_APPEND_FL: u32 = 0x20;
const LINUX_NODUMP_FL: u32 = 0x40;

/// FreeBSD's file flags (chflags), as ufs_vnops.c applies them: an
/// immutable or append-only file keeps its attributes and names; an
/// immutable directory takes no new entries; an append-only directory
/// loses none.
fn flag_refusal(what: &str) -> Error {
    Error::new(
        ErrorKind::Permission,
        format!("{what} (file flags; see chflags)"),
    )
}

/// A new entry in `pdi` (create, link, rename into it).
fn may_enter(pdi: &Dinode) -> Result<()> {
    if pdi.di_flags() & IMMUTABLE != 0 {
        return Err(flag_refusal("directory is immutable"));
    }
    Ok(())
}

/// The entry of `di` leaving `pdi` (unlink, rmdir, rename away or over).
fn may_unlink(pdi: &Dinode, di: &Dinode) -> Result<()> {
    if di.di_flags() & (NOUNLINK | IMMUTABLE | APPEND) != 0 {
        return Err(flag_refusal(
            "file is immutable, append-only or not to be unlinked",
        ));
    }
    if pdi.di_flags() & (IMMUTABLE | APPEND) != 0 {
        return Err(flag_refusal("directory is immutable or append-only"));
    }
    Ok(())
}

/// Any change to `di` other than appending data (ufs_setattr, ufs_link).
fn may_change(di: &Dinode) -> Result<()> {
    if di.di_flags() & (IMMUTABLE | APPEND) != 0 {
        return Err(flag_refusal("file is immutable or append-only"));
    }
    Ok(())
}

/// A new inode for a file of directory `parent` (`pdi`), written: placed
/// at `goal` (inode order) or by the usual policy, its mode and ACLs
/// inherited from the directory (`umask` as a create's), `nlink` links,
/// then `init` (a symlink's target, a device number). Freed again if
/// anything fails. Not yet named anywhere.
#[allow(clippy::too_many_arguments)]
fn new_inode(
    c: &mut FsCore,
    parent: Ino,
    pdi: &Dinode,
    mode: u16,
    umask: Option<u32>,
    cred: Cred,
    nlink: u32,
    goal: Option<crate::alloc::placement::Goal>,
    init: impl FnOnce(&mut FsCore, Ino, &mut Dinode) -> Result<()>,
) -> Result<(Ino, Dinode)> {
    let (mode, acls) = acl::inherit(c, parent, pdi, mode, umask)?;
    let ino = match goal {
        Some(goal) => c.alloc_placed(parent, goal)?,
        None => c.alloc_inode(parent, false)?,
    };
    let mut di = fresh_inode(c, ino, mode, cred, pdi)?;
    di.set_nlink(nlink);
    let r = if acls.is_empty() {
        Ok(())
    } else {
        let area = ufs_format::extattr::encode_area(c.g.v.endian, &acls);
        c.replace_ext_area(ino, &mut di, &area, cred.reserve())
    }
    .and_then(|()| init(c, ino, &mut di));
    c.write_inode(ino, &di)?;
    if let Err(e) = r {
        undo_create(c, ino)?;
        return Err(e);
    }
    Ok((ino, di))
}

/// Frees an inode whose creation failed half-way.
fn undo_create(c: &mut FsCore, ino: Ino) -> Result<()> {
    let mut di = c.read_inode(ino)?;
    di.set_nlink(0);
    c.write_inode(ino, &di)?;
    c.release_inode(ino)?;
    Ok(())
}

/// Drops `n` links of `ino`; frees it when no link and no reference remain.
fn drop_link(c: &mut FsCore, ino: Ino, n: u32) -> Result<crate::order::ChangeId> {
    let mut di = c.read_inode(ino)?;
    di.set_nlink(di.nlink().saturating_sub(n));
    touch(&mut di, false, true, false);
    let mut last = c.write_inode(ino, &di)?;
    if di.nlink() == 0 {
        if c.lookups.get(&ino).copied().unwrap_or(0) > 0 {
            c.orphans.insert(ino);
        } else {
            let cleared = c.release_inode(ino)?;
            if cleared != crate::order::ChangeId::NONE {
                last = cleared;
            }
        }
    }
    Ok(last)
}

/// Is directory `anc` an ancestor of (or equal to) directory `dir`?
fn is_ancestor(c: &mut FsCore, anc: Ino, mut dir: Ino) -> Result<bool> {
    let mut steps = 0u64;
    loop {
        if dir == anc {
            return Ok(true);
        }
        if dir == Ino::ROOT {
            return Ok(false);
        }
        let di = dir_inode(c, dir)?;
        let Some(p) = c.dir_lookup(dir, &di, b"..")? else {
            return Err(Error::damaged(
                crate::error::Damage::Inode(dir),
                format!("directory {dir} has no '..'"),
            ));
        };
        dir = p.ino;
        steps += 1;
        if steps > c.g.ninodes() {
            return Err(Error::corrupt("directory loop found while checking rename"));
        }
    }
}

/// Sets `di_dirdepth` of directory `ino` to `depth` and its subdirectories below.
fn set_depths(c: &mut FsCore, ino: Ino, depth: u32) -> Result<()> {
    let mut stack = vec![(ino, depth)];
    while let Some((d, depth)) = stack.pop() {
        let mut di = dir_inode(c, d)?;
        if dirdepth(&di) == depth {
            continue;
        }
        set_dirdepth(&mut di, depth);
        c.write_inode(d, &di)?;
        let mut cookie = 0;
        loop {
            let ents = c.dir_read(d, &di, cookie, 512)?;
            if ents.is_empty() {
                break;
            }
            for e in &ents {
                if e.dtype == dt::DT_DIR && e.name != b"." && e.name != b".." {
                    stack.push((e.ino, depth + 1));
                }
            }
            cookie = ents.last().map(|e| e.next).unwrap_or(u64::MAX);
        }
    }
    Ok(())
}

/// RENAME_EXCHANGE with ordered writes (normal, sync, soft updates). Two
/// entries, perhaps in two directories, each change with a write of its
/// own, and no order of two writes keeps both files named at every crash:
/// so the first file gets a third name first, a hidden entry beside its
/// own, which goes once both entries are swapped. Every crash state names
/// both files (a file may have an extra name, as after an interrupted
/// FFS rename: the swapped entry's old target, or the hidden
/// `.ufskit-exchange-N`); counts go up before the names they count and
/// down after; a directory changing parent is counted by its new parent
/// first and has its `..` rewritten once it is named there alone (FFS's
/// rename rules, applied to each half).
fn exchange_ordered(c: &mut FsCore, a: Named<'_>, b: Named<'_>) -> Result<()> {
    let (p1, n1, i1, d1) = a.parts();
    let (p2, n2, i2, d2) = b.parts();
    let (moving1, moving2) = (d1.is_dir() && p1 != p2, d2.is_dir() && p1 != p2);
    if d1.nlink() >= UFS_LINK_MAX || d2.nlink() >= UFS_LINK_MAX {
        return Err(Error::new(ErrorKind::TooManyLinks, "too many links"));
    }
    // 1. A third name for i1 in p1 (its count first).
    let mut pd1 = dir_inode(c, p1)?;
    let mut tmp = format!(".ufskit-exchange-{i1}").into_bytes();
    while c.dir_lookup(p1, &pd1, &tmp)?.is_some() {
        tmp.push(b'_');
    }
    let mut x = live_inode(c, i1)?;
    x.set_nlink(x.nlink() + 1);
    c.write_inode(i1, &x)?;
    let mut named = match c.dir_enter(
        p1,
        &mut pd1,
        &tmp,
        i1,
        iftodt(d1.di_mode()),
        Reserve::Privileged,
        &[],
    ) {
        Ok(seen) => seen,
        Err(e) => {
            c.write_inode(p1, &pd1)?;
            x.set_nlink(x.nlink() - 1);
            c.write_inode(i1, &x)?;
            return Err(e);
        }
    };
    named.push(c.write_inode(p1, &pd1)?);
    // 2. n1 names i2 (its count first; a directory moving into p1 is
    //    counted by p1 first), once i1's third name is on disk.
    let mut y = live_inode(c, i2)?;
    y.set_nlink(y.nlink() + 1);
    touch(&mut y, false, true, false);
    c.write_inode(i2, &y)?;
    if moving2 {
        let mut pd = dir_inode(c, p1)?;
        pd.set_nlink(pd.nlink() + 1);
        named.push(c.write_inode(p1, &pd)?);
    }
    let pd = dir_inode(c, p1)?;
    let first_done = c.dir_rewrite(p1, &pd, n1, i2, iftodt(d2.di_mode()), &named)?;
    // 3. n2 names i1, once n1 names i2 on disk (i2 keeps a name).
    let mut needs = first_done.clone();
    if moving1 {
        let mut pd = dir_inode(c, p2)?;
        pd.set_nlink(pd.nlink() + 1);
        needs.push(c.write_inode(p2, &pd)?);
    }
    let pd = dir_inode(c, p2)?;
    let second_done = c.dir_rewrite(p2, &pd, n2, i1, iftodt(d1.di_mode()), &needs)?;
    // 4. The third name goes once n2 names i1; the counts come down
    //    after the names they counted (the entries' writes order them).
    let mut pd1 = dir_inode(c, p1)?;
    let (_, tmp_gone) = c.dir_remove(p1, &mut pd1, &tmp, Reserve::Privileged, &second_done)?;
    touch(&mut pd1, true, true, false);
    c.write_inode(p1, &pd1)?;
    let mut x = live_inode(c, i1)?;
    x.set_nlink(x.nlink() - 1);
    touch(&mut x, false, true, false);
    c.write_inode(i1, &x)?;
    let mut y = live_inode(c, i2)?;
    y.set_nlink(y.nlink() - 1);
    c.write_inode(i2, &y)?;
    // 5. A directory that changed parent: its '..' once it is named in
    //    the new parent alone; the old parent's count after that.
    for (moving, child, newp, oldp, gone) in [
        (moving2, i2, p1, p2, &second_done),
        (moving1, i1, p2, p1, &tmp_gone),
    ] {
        if !moving {
            continue;
        }
        let d = dir_inode(c, child)?;
        c.dir_rewrite(child, &d, b"..", newp, dt::DT_DIR, gone)?;
        let mut op = dir_inode(c, oldp)?;
        op.set_nlink(op.nlink().saturating_sub(1));
        c.write_inode(oldp, &op)?;
        let np = dir_inode(c, newp)?;
        set_depths(c, child, dirdepth(&np) + 1)?;
    }
    let mut pd2 = dir_inode(c, p2)?;
    touch(&mut pd2, true, true, false);
    c.write_inode(p2, &pd2)?;
    Ok(())
}

/// One side of a RENAME_EXCHANGE: a name in a directory, and the inode
/// it names.
struct Named<'a> {
    parent: Ino,
    name: &'a [u8],
    ino: Ino,
    di: &'a Dinode,
}

impl<'a> Named<'a> {
    /// (parent, name, inode number, inode), for the exchange routines.
    fn parts(&self) -> (Ino, &'a [u8], Ino, &'a Dinode) {
        (self.parent, self.name, self.ino, self.di)
    }
}

/// Swaps two names with no order between the writes (`-o async`).
fn exchange(c: &mut FsCore, a: Named<'_>, b: Named<'_>) -> Result<()> {
    let (p1, n1, i1, d1) = a.parts();
    let (p2, n2, i2, d2) = b.parts();
    let pd1 = dir_inode(c, p1)?;
    c.dir_rewrite(p1, &pd1, n1, i2, iftodt(d2.di_mode()), &[])?;
    let pd2 = dir_inode(c, p2)?;
    c.dir_rewrite(p2, &pd2, n2, i1, iftodt(d1.di_mode()), &[])?;
    if p1 != p2 {
        // A directory changing parents moves one '..' count with it.
        for (child, child_di, newp, oldp) in [(i1, d1, p2, p1), (i2, d2, p1, p2)] {
            if child_di.is_dir() {
                let d = dir_inode(c, child)?;
                c.dir_rewrite(child, &d, b"..", newp, dt::DT_DIR, &[])?;
                let mut np = dir_inode(c, newp)?;
                np.set_nlink(np.nlink() + 1);
                c.write_inode(newp, &np)?;
                let mut op = dir_inode(c, oldp)?;
                op.set_nlink(op.nlink() - 1);
                c.write_inode(oldp, &op)?;
                set_depths(c, child, dirdepth(&np) + 1)?;
            }
        }
        for p in [p1, p2] {
            let mut pd = dir_inode(c, p)?;
            touch(&mut pd, true, true, false);
            c.write_inode(p, &pd)?;
        }
    }
    for i in [i1, i2] {
        let mut d = c.read_inode(i)?;
        touch(&mut d, false, true, false);
        c.write_inode(i, &d)?;
    }
    Ok(())
}
