//! FUSE over io_uring (Linux 6.14 and later): the kernel queues each
//! request on a ring of the CPU its caller runs on, and a thread pinned to
//! that CPU serves it, so a round trip wakes a thread on the caller's own
//! CPU instead of a sleeping one elsewhere (on a VM whose idle vCPUs halt,
//! that wake is what a `/dev/fuse` round trip mostly costs, see
//! docs/DESIGN.md). The request arrives in a buffer this daemon gave the
//! kernel, and one `io_uring_enter` both commits the reply and asks for
//! the next request.
//!
//! How it fits with `fuser`: `fuser` mounts, answers INIT (where
//! [`crate::devfuse`] asks for `FUSE_OVER_IO_URING`) and keeps reading
//! `/dev/fuse`, which carries everything until every CPU's queue has an
//! entry registered, and afterwards what the kernel never sends through
//! the rings (FORGET, INTERRUPT). Each request is decoded here
//! ([`dispatch`]) and served by [`Service`], as the `fuser` side does.
//!
//! Invariants:
//! - One ring entry per thread, [`THREADS_PER_CPU`] threads per CPU queue:
//!   an entry the kernel hands a request to always belongs to an idle
//!   thread, so a slow request (fsync) never holds up one queued behind
//!   it on the same thread.
//! - A thread reads or writes its buffers only between the completion of
//!   its command and the submission of the next; the kernel only while a
//!   command is in flight. A thread that stops with a command possibly in
//!   flight leaks its buffers rather than free memory the kernel may still
//!   write.
//! - Every request gets exactly one reply; a request this transport does
//!   not serve gets ENOSYS, as from `fuser`.
//! - All `unsafe` of the crate is here, in [`Slot`] and [`push`]; each
//!   use says why it is sound.
#![allow(unsafe_code)]

pub mod abi;

use crate::requests::Op;
use crate::service::{log, to_fuse, Caller, DirItem, Errno, Service, XattrReply, TTL};
use abi::*;
use io_uring::{cqueue, opcode, squeue, types, IoUring};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use ufs::{Attr, FileKind, SetAttr, Time, TimeSet};
use zerocopy::{FromBytes, IntoBytes};

/// Ring threads (each with one entry) per CPU queue.
pub const THREADS_PER_CPU: usize = 2;

/// What a request produced: the reply's payload, or an errno.
pub type Outcome = Result<Vec<u8>, Errno>;

fn mode_bits(kind: FileKind) -> u32 {
    match kind {
        FileKind::File => libc::S_IFREG,
        FileKind::Dir => libc::S_IFDIR,
        FileKind::Symlink => libc::S_IFLNK,
        FileKind::Fifo => libc::S_IFIFO,
        FileKind::Socket => libc::S_IFSOCK,
        FileKind::CharDev => libc::S_IFCHR,
        FileKind::BlockDev => libc::S_IFBLK,
    }
}

fn fuse_attr(a: &Attr) -> FuseAttr {
    FuseAttr {
        ino: to_fuse(a.ino),
        size: a.size,
        blocks: a.blocks,
        atime: a.atime.sec as u64,
        mtime: a.mtime.sec as u64,
        ctime: a.ctime.sec as u64,
        atimensec: a.atime.nsec,
        mtimensec: a.mtime.nsec,
        ctimensec: a.ctime.nsec,
        mode: mode_bits(a.kind) | u32::from(a.perm),
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: a.rdev,
        blksize: a.blksize,
        // fuse_attr.flags are FUSE's own (FUSE_ATTR_SUBMOUNT...), not the
        // file's BSD flags.
        flags: 0,
    }
}

fn entry_out(a: &Attr) -> EntryOut {
    EntryOut {
        nodeid: to_fuse(a.ino),
        generation: u64::from(a.gen),
        entry_valid: TTL.as_secs(),
        attr_valid: TTL.as_secs(),
        entry_valid_nsec: TTL.subsec_nanos(),
        attr_valid_nsec: TTL.subsec_nanos(),
        attr: fuse_attr(a),
    }
}

/// statx's mask bits answered: the basic ones and the birth time (UFS2's
/// `di_birthtime`; UFS1 has none, so its files answer without it).
const STATX_BASIC_STATS: u32 = 0x7ff;
const STATX_BTIME: u32 = 0x800;
/// statx attribute bits for the BSD flags Linux knows (`linux/stat.h`).
const STATX_ATTR_IMMUTABLE: u64 = 0x10;
const STATX_ATTR_APPEND: u64 = 0x20;
const STATX_ATTR_NODUMP: u64 = 0x40;

/// FUSE_STATX's answer: what GETATTR gives plus the birth time, and the
/// immutable, append-only and nodump flags as statx attributes (Linux
/// 6.18 passes on the birth time; its FUSE side drops the attributes).
fn statx_out(a: &Attr, has_birthtime: bool) -> Vec<u8> {
    let t = |t: ufs::Time| SxTime {
        tv_sec: t.sec,
        tv_nsec: t.nsec,
        reserved: 0,
    };
    // statx's bits for these three are Linux's inode flags' own
    // (FS_IMMUTABLE_FL 0x10, FS_APPEND_FL 0x20, FS_NODUMP_FL 0x40).
    let mask = STATX_ATTR_IMMUTABLE | STATX_ATTR_APPEND | STATX_ATTR_NODUMP;
    let attributes = u64::from(ufs::linux_inode_flags(a.flags)) & mask;
    // fuse_attr's rdev is Linux's new_encode_dev; statx's is split.
    let major = (a.rdev & 0xfff00) >> 8;
    let minor = (a.rdev & 0xff) | ((a.rdev >> 12) & 0xfff00);
    StatxOut {
        attr_valid: TTL.as_secs(),
        attr_valid_nsec: TTL.subsec_nanos(),
        flags: 0,
        spare: [0; 2],
        stat: FuseStatx {
            mask: STATX_BASIC_STATS | if has_birthtime { STATX_BTIME } else { 0 },
            blksize: a.blksize,
            attributes,
            nlink: a.nlink,
            uid: a.uid,
            gid: a.gid,
            mode: (mode_bits(a.kind) | u32::from(a.perm)) as u16,
            spare0: 0,
            ino: to_fuse(a.ino),
            size: a.size,
            blocks: a.blocks,
            attributes_mask: mask,
            atime: t(a.atime),
            btime: if has_birthtime {
                t(a.birthtime)
            } else {
                SxTime::default()
            },
            ctime: t(a.ctime),
            mtime: t(a.mtime),
            rdev_major: major,
            rdev_minor: minor,
            dev_major: 0,
            dev_minor: 0,
            spare2: [0; 14],
        },
    }
    .as_bytes()
    .to_vec()
}

/// CREATE's and TMPFILE's answer: the entry, then the open.
fn created_out(svc: &Service, a: &Attr, open_flags: u32) -> Vec<u8> {
    let mut out = entry_out(a).as_bytes().to_vec();
    out.extend_from_slice(
        OpenOut {
            fh: 0,
            open_flags: svc.open_reply_flags(open_flags),
            backing_id: 0,
        }
        .as_bytes(),
    );
    out
}

fn attr_out(a: &Attr) -> Vec<u8> {
    AttrOut {
        attr_valid: TTL.as_secs(),
        attr_valid_nsec: TTL.subsec_nanos(),
        dummy: 0,
        attr: fuse_attr(a),
    }
    .as_bytes()
    .to_vec()
}

/// The fixed argument of a request, or EIO when the kernel sent less.
fn xattr_out(r: Result<XattrReply, Errno>) -> Result<Vec<u8>, Errno> {
    r.map(|x| match x {
        XattrReply::Size(size) => GetxattrOut { size, padding: 0 }.as_bytes().to_vec(),
        XattrReply::Data(v) => v,
    })
}

fn arg<T: FromBytes>(op_in: &[u8]) -> Result<T, Errno> {
    T::read_from_prefix(op_in)
        .map(|(v, _)| v)
        .map_err(|_| libc::EIO)
}

/// The NUL-terminated strings of a payload, in order.
fn names(payload: &[u8], n: usize) -> Result<Vec<&[u8]>, Errno> {
    let mut out = Vec::with_capacity(n);
    let mut rest = payload;
    for _ in 0..n {
        let end = rest.iter().position(|&b| b == 0).ok_or(libc::EIO)?;
        out.push(&rest[..end]);
        rest = &rest[end + 1..];
    }
    Ok(out)
}

fn request_time(sec: u64, nsec: u32) -> Time {
    Time {
        sec: sec as i64,
        nsec: nsec.min(999_999_999),
    }
}

fn setattr_of(s: &SetattrIn) -> SetAttr {
    let has = |bit: u32| s.valid & bit != 0;
    let time = |set: u32, now: u32, sec: u64, nsec: u32| {
        if has(now) {
            Some(TimeSet::Now)
        } else if has(set) {
            Some(TimeSet::At(request_time(sec, nsec)))
        } else {
            None
        }
    };
    SetAttr {
        mode: has(fattr::MODE).then_some((s.mode & 0o7777) as u16),
        uid: has(fattr::UID).then_some(s.uid),
        gid: has(fattr::GID).then_some(s.gid),
        size: has(fattr::SIZE).then_some(s.size),
        atime: time(fattr::ATIME, fattr::ATIME_NOW, s.atime, s.atimensec),
        mtime: time(fattr::MTIME, fattr::MTIME_NOW, s.mtime, s.mtimensec),
        // With write-back caching the kernel keeps the times of the files
        // it caches and sends them here; they are what it showed, so they
        // are what the disk keeps.
        ctime: has(fattr::CTIME).then_some(request_time(s.ctime, s.ctimensec)),
        flags: None,
    }
}

/// Appends one READDIR(PLUS) record to `out` unless it would pass `max`.
fn push_dirent(out: &mut Vec<u8>, max: usize, plus: bool, e: &DirItem<'_>) -> bool {
    let head = if plus { size_of::<EntryOut>() } else { 0 };
    let len = head + size_of::<Dirent>() + e.name.len();
    let padded = len.div_ceil(8) * 8;
    if out.len() + padded > max {
        return false;
    }
    if plus {
        match e.attr {
            Some(a) => out.extend_from_slice(entry_out(a).as_bytes()),
            // Node 0: the kernel lists the name and makes no dentry
            // (fuse_direntplus_link).
            None => out.resize(out.len() + size_of::<EntryOut>(), 0),
        }
    }
    let d = Dirent {
        ino: e.ino,
        off: e.offset,
        namelen: e.name.len() as u32,
        typ: mode_bits(e.kind) >> 12,
    };
    out.extend_from_slice(d.as_bytes());
    out.extend_from_slice(e.name);
    out.resize(out.len() + (padded - len), 0);
    true
}

/// Serves one request: `op_in` is its fixed argument, `payload` the rest
/// (names, data). Pure decoding and encoding around [`Service`], so it is
/// tested without a kernel.
pub fn dispatch(svc: &Service, h: &InHeader, op_in: &[u8], payload: &[u8]) -> Outcome {
    let c = Caller {
        uid: h.uid,
        gid: h.gid,
        pid: h.pid,
    };
    let node = h.nodeid;
    let entry = |r: Result<Attr, Errno>| r.map(|a| entry_out(&a).as_bytes().to_vec());
    let empty = |r: Result<(), Errno>| r.map(|()| Vec::new());
    let count = |op: Op| svc.begin_uring(op);
    match h.opcode {
        op::LOOKUP => {
            count(Op::Lookup);
            entry(svc.lookup(node, names(payload, 1)?[0]))
        }
        op::GETATTR => {
            count(Op::Getattr);
            let g: GetattrIn = arg(op_in)?;
            svc.getattr(node, g.getattr_flags & GETATTR_FH != 0)
                .map(|a| attr_out(&a))
        }
        op::STATX => {
            // stat(1), ls --time=birth: GETATTR with the birth time, with
            // `-o btime=on`; refused otherwise (the kernel stops asking).
            if !svc.serves_statx() {
                return Err(libc::ENOSYS);
            }
            count(Op::Getattr);
            let g: StatxIn = arg(op_in)?;
            svc.getattr(node, g.getattr_flags & GETATTR_FH != 0)
                .map(|a| statx_out(&a, svc.has_birthtime()))
        }
        op::SETATTR => {
            count(Op::Setattr);
            let s: SetattrIn = arg(op_in)?;
            svc.setattr(&c, node, &setattr_of(&s)).map(|a| attr_out(&a))
        }
        op::READLINK => {
            count(Op::Readlink);
            svc.readlink(node)
        }
        op::SYMLINK => {
            count(Op::Symlink);
            let n = names(payload, 2)?;
            entry(svc.symlink(&c, node, n[0], n[1]))
        }
        op::MKNOD => {
            count(Op::Mknod);
            let m: MknodIn = arg(op_in)?;
            entry(svc.mknod(&c, node, names(payload, 1)?[0], m.mode, m.rdev, m.umask))
        }
        op::MKDIR => {
            count(Op::Mkdir);
            let m: MkdirIn = arg(op_in)?;
            entry(svc.mkdir(&c, node, names(payload, 1)?[0], m.mode, m.umask))
        }
        op::UNLINK => {
            count(Op::Unlink);
            empty(svc.unlink(node, names(payload, 1)?[0]))
        }
        op::RMDIR => {
            count(Op::Rmdir);
            empty(svc.rmdir(node, names(payload, 1)?[0]))
        }
        op::RENAME | op::RENAME2 => {
            count(Op::Rename);
            let (newdir, flags) = if h.opcode == op::RENAME {
                (arg::<RenameIn>(op_in)?.newdir, 0)
            } else {
                let r: Rename2In = arg(op_in)?;
                (r.newdir, r.flags)
            };
            let n = names(payload, 2)?;
            empty(svc.rename(&c, node, n[0], newdir, n[1], flags))
        }
        op::LINK => {
            count(Op::Link);
            let l: LinkIn = arg(op_in)?;
            entry(svc.link(l.oldnodeid, node, names(payload, 1)?[0]))
        }
        op::OPEN => {
            count(Op::Open);
            let o: OpenIn = arg(op_in)?;
            svc.open(node, o.flags)?;
            // A real OPEN (see the `fuser` side): no FOPEN_KEEP_CACHE, so
            // reads after an open reach the engine and update atime.
            Ok(OpenOut {
                fh: 0,
                open_flags: svc.open_reply_flags(o.flags),
                backing_id: 0,
            }
            .as_bytes()
            .to_vec())
        }
        op::OPENDIR => {
            count(Op::Opendir);
            Ok(OpenOut {
                fh: svc.opendir()?,
                open_flags: 0,
                backing_id: 0,
            }
            .as_bytes()
            .to_vec())
        }
        op::READ => {
            count(Op::Read);
            let r: ReadIn = arg(op_in)?;
            svc.read(node, r.offset, r.size)
        }
        op::WRITE => {
            count(Op::Write);
            let w: WriteIn = arg(op_in)?;
            let data = payload.get(..w.size as usize).ok_or(libc::EIO)?;
            let kill = w.write_flags & WRITE_KILL_SUIDGID != 0;
            svc.write(&c, node, w.offset, data, kill).map(|n| {
                WriteOut {
                    size: n,
                    padding: 0,
                }
                .as_bytes()
                .to_vec()
            })
        }
        op::STATFS => {
            count(Op::Statfs);
            let s = svc.statfs();
            Ok(StatfsOut {
                blocks: s.blocks,
                bfree: s.bfree,
                bavail: s.bavail,
                files: s.files,
                ffree: s.ffree,
                bsize: u32::try_from(s.bsize).unwrap_or(u32::MAX),
                namelen: s.namelen,
                frsize: u32::try_from(s.frsize).unwrap_or(u32::MAX),
                padding: 0,
                spare: [0; 6],
            }
            .as_bytes()
            .to_vec())
        }
        op::IOCTL => {
            count(Op::Ioctl);
            let i: IoctlIn = arg(op_in)?;
            let data = payload.get(..i.in_size as usize).ok_or(libc::EIO)?;
            svc.ioctl(&c, node, i.cmd, data).map(|out| {
                let mut v = IoctlOut {
                    result: 0,
                    flags: 0,
                    in_iovs: 0,
                    out_iovs: 0,
                }
                .as_bytes()
                .to_vec();
                v.extend_from_slice(&out[..out.len().min(i.out_size as usize)]);
                v
            })
        }
        op::GETXATTR => {
            count(Op::Getxattr);
            let g: GetxattrIn = arg(op_in)?;
            xattr_out(svc.getxattr(&c, node, names(payload, 1)?[0], g.size))
        }
        op::LISTXATTR => {
            count(Op::Listxattr);
            let g: GetxattrIn = arg(op_in)?;
            xattr_out(svc.listxattr(&c, node, g.size))
        }
        op::SETXATTR => {
            count(Op::Setxattr);
            let s: SetxattrIn = arg(op_in)?;
            let name = names(payload, 1)?[0];
            let value = payload
                .get(name.len() + 1..name.len() + 1 + s.size as usize)
                .ok_or(libc::EIO)?;
            empty(svc.setxattr(&c, node, name, value, s.flags))
        }
        op::REMOVEXATTR => {
            count(Op::Removexattr);
            empty(svc.removexattr(&c, node, names(payload, 1)?[0]))
        }
        op::RELEASE => {
            count(Op::Release);
            Ok(Vec::new())
        }
        op::RELEASEDIR => {
            count(Op::Releasedir);
            let r: ReleaseIn = arg(op_in)?;
            svc.releasedir(r.fh);
            Ok(Vec::new())
        }
        op::FSYNC => {
            count(Op::Fsync);
            empty(svc.fsync(node))
        }
        op::FSYNCDIR => {
            count(Op::Fsyncdir);
            empty(svc.fsync(node))
        }
        op::READDIR | op::READDIRPLUS => {
            let plus = h.opcode == op::READDIRPLUS;
            count(if plus { Op::Readdirplus } else { Op::Readdir });
            let r: ReadIn = arg(op_in)?;
            let max = r.size as usize;
            let mut out = Vec::with_capacity(max.min(1 << 16));
            svc.readdir(node, r.fh, r.offset, plus, true, &mut |e| {
                push_dirent(&mut out, max, plus, &e)
            })?;
            Ok(out)
        }
        op::CREATE => {
            count(Op::Create);
            let ci: CreateIn = arg(op_in)?;
            let a = svc.create(&c, node, names(payload, 1)?[0], ci.mode, ci.umask)?;
            Ok(created_out(svc, &a, ci.flags))
        }
        op::TMPFILE => {
            // As CREATE's, with a name ("/") that names nothing.
            count(Op::Create);
            let ci: CreateIn = arg(op_in)?;
            let a = svc.tmpfile(&c, node, ci.mode, ci.umask)?;
            Ok(created_out(svc, &a, ci.flags))
        }
        op::FALLOCATE => {
            count(Op::Fallocate);
            let f: FallocateIn = arg(op_in)?;
            empty(svc.fallocate(&c, node, f.offset, f.length, f.mode as i32))
        }
        op::COPY_FILE_RANGE => {
            count(Op::CopyFileRange);
            let r: CopyFileRangeIn = arg(op_in)?;
            svc.copy_file_range(&c, node, r.off_in, r.nodeid_out, r.off_out, r.len)
                .map(|n| {
                    WriteOut {
                        size: u32::try_from(n).unwrap_or(u32::MAX),
                        padding: 0,
                    }
                    .as_bytes()
                    .to_vec()
                })
        }
        op::LSEEK => {
            count(Op::Lseek);
            let l: LseekIn = arg(op_in)?;
            svc.lseek(node, l.offset as i64, l.whence as i32)
                .map(|offset| LseekOut { offset }.as_bytes().to_vec())
        }
        // FLUSH: nothing is buffered per open file (ENOSYS makes the
        // kernel stop sending it); anything else is not served.
        _ => Err(libc::ENOSYS),
    }
}

/// One ring entry's buffers: the 288-byte header and the payload.
struct Slot {
    header: Box<[u8]>,
    payload: Box<[u8]>,
    iov: Box<[libc::iovec; 2]>,
}

// SAFETY: the raw pointers in `iov` point into the boxes the slot owns;
// the slot moves between threads only whole, before any command is
// submitted with it.
unsafe impl Send for Slot {}

impl Slot {
    fn new(payload_len: usize) -> Slot {
        let mut header = vec![0u8; RING_HEADER_SIZE].into_boxed_slice();
        let mut payload = vec![0u8; payload_len].into_boxed_slice();
        let iov = Box::new([
            libc::iovec {
                iov_base: header.as_mut_ptr().cast(),
                iov_len: header.len(),
            },
            libc::iovec {
                iov_base: payload.as_mut_ptr().cast(),
                iov_len: payload.len(),
            },
        ]);
        Slot {
            header,
            payload,
            iov,
        }
    }

    fn ent_in_out(&self) -> Option<RingEntInOut> {
        RingEntInOut::read_from_prefix(&self.header[RING_ENT_IN_OUT..])
            .ok()
            .map(|(v, _)| v)
    }

    /// Serves the request the kernel put in the buffers and writes the
    /// reply in their place. Returns the commit id to hand back.
    fn serve(&mut self, svc: &Service) -> Option<u64> {
        let (h, _) = InHeader::read_from_prefix(&self.header[RING_IN_OUT..]).ok()?;
        let ent = self.ent_in_out()?;
        // Extensions (security contexts, supplementary groups), which this
        // daemon never asks for, would follow the arguments.
        let ext = usize::from(h.total_extlen) * 8;
        let len = (ent.payload_sz as usize)
            .min(self.payload.len())
            .saturating_sub(ext);
        let op_in = &self.header[RING_OP_IN..RING_ENT_IN_OUT];
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            dispatch(svc, &h, op_in, &self.payload[..len])
        }))
        .unwrap_or_else(|_| {
            // An operation that panicked may have left the engine half
            // way: no more writes, the image stays marked unclean.
            svc.fs
                .fail("an operation panicked in an io_uring request thread");
            Err(libc::EIO)
        });
        let (error, body) = match outcome {
            Ok(b) if b.len() <= self.payload.len() => (0, b),
            Ok(_) => (-libc::EIO, Vec::new()),
            Err(e) => (-e, Vec::new()),
        };
        self.payload[..body.len()].copy_from_slice(&body);
        let out = OutHeader {
            len: (size_of::<OutHeader>() + body.len()) as u32,
            error,
            unique: h.unique,
        };
        self.header[RING_IN_OUT..RING_IN_OUT + size_of::<OutHeader>()]
            .copy_from_slice(out.as_bytes());
        let reply = RingEntInOut {
            payload_sz: body.len() as u32,
            ..ent
        };
        self.header[RING_ENT_IN_OUT..].copy_from_slice(reply.as_bytes());
        Some(ent.commit_id)
    }
}

type Ring = IoUring<squeue::Entry128, cqueue::Entry>;

fn command(fd: i32, cmd_op: u32, qid: u16, commit_id: u64) -> opcode::UringCmd80 {
    let req = RingCmdReq {
        flags: 0,
        commit_id,
        qid,
        padding: [0; 6],
    };
    let mut cmd = [0u8; 80];
    cmd[..size_of::<RingCmdReq>()].copy_from_slice(req.as_bytes());
    opcode::UringCmd80::new(types::Fd(fd), cmd_op).cmd(cmd)
}

/// Submits `sqe`.
///
/// SAFETY (of the `unsafe` inside): what the entry points to, the slot's
/// iovec array and buffers, lives until the thread stops, and the thread
/// stops only after the command's completion or by leaking the slot.
/// The entry is submitted by the next `submit_and_wait`, which also waits
/// for the next request: one system call per request.
fn push(ring: &mut Ring, sqe: &squeue::Entry128) -> std::io::Result<()> {
    // SAFETY: see above.
    unsafe { ring.submission().push(sqe) }
        .map_err(|_| std::io::Error::other("io_uring submission queue full"))
}

/// The REGISTER command of a slot: its two iovecs and the queue.
fn register_sqe(fd: i32, slot: &Slot, qid: u16) -> squeue::Entry128 {
    let mut sqe = command(fd, URING_CMD_REGISTER, qid, 0)
        .addr(Some(slot.iov.as_ptr() as u64))
        .build();
    // The kernel wants the iovec count in the SQE's `len` (byte 24 of
    // `struct io_uring_sqe`), which the io-uring crate has no setter for
    // on this opcode.
    const _: () = assert!(size_of::<squeue::Entry128>() == 128);
    // SAFETY: Entry128 is the kernel's 128-byte SQE (asserted above);
    // bytes 24..28 are `__u32 len`, in bounds and suitably aligned (the
    // entry is 8-byte aligned).
    unsafe {
        (&mut sqe as *mut squeue::Entry128)
            .cast::<u8>()
            .add(24)
            .cast::<u32>()
            .write(URING_IOV_SEGS);
    }
    sqe
}

/// The CPUs the kernel makes queues for (`num_possible_cpus()`): one
/// queue each, numbered from 0.
pub(crate) fn possible_cpus() -> usize {
    let Ok(s) = std::fs::read_to_string("/sys/devices/system/cpu/possible") else {
        return std::thread::available_parallelism().map_or(1, |n| n.get());
    };
    let mut n = 0;
    for part in s.trim().split(',') {
        n += match part.split_once('-') {
            Some((a, b)) => match (a.parse::<usize>(), b.parse::<usize>()) {
                (Ok(a), Ok(b)) if b >= a => b - a + 1,
                _ => 0,
            },
            None => usize::from(part.parse::<usize>().is_ok()),
        };
    }
    n.max(1)
}

/// Moves the calling thread to `cpu`; whether it could. Best effort: a
/// daemon kept off that CPU (taskset, a cpuset) keeps its own placement.
fn pin_to(cpu: usize) -> bool {
    let mut set = nix::sched::CpuSet::new();
    set.set(cpu).is_ok()
        && nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set).is_ok()
}

/// Where a ring thread of queue `qid` serves from, and moves to while
/// polling (see `handoff.rs`).
struct Placement {
    /// The CPUs this thread may run on when it started.
    allowed: Option<nix::sched::CpuSet>,
    qid: usize,
    /// Whether it sits on its queue's CPU.
    home: bool,
    /// The next CPU after the queue's it may run on: where it polls
    /// from. None: it never polls (one usable CPU).
    away: Option<usize>,
}

impl Placement {
    fn new(qid: usize, cpus: usize) -> Placement {
        let me = nix::unistd::Pid::from_raw(0);
        let allowed = nix::sched::sched_getaffinity(me).ok();
        let may = |c: usize| {
            allowed
                .as_ref()
                .is_none_or(|a| a.is_set(c).unwrap_or(false))
        };
        let away = (1..cpus).map(|k| (qid + k) % cpus).find(|&c| may(c));
        Placement {
            allowed,
            qid,
            home: pin_to(qid),
            away,
        }
    }

    /// Whether this thread may poll at all (a CPU to poll from, which it
    /// could move to when it last tried).
    fn can_poll(&self) -> bool {
        self.away.is_some()
    }

    /// Moves to the polling CPU; false (and stays) when it cannot, and
    /// then never tries again (no failed system call per request).
    fn go_away(&mut self) -> bool {
        let moved = self.away.is_some_and(pin_to);
        if !moved {
            self.away = None;
        }
        moved
    }

    /// Back to the queue's CPU, or to the placement it started with.
    fn go_home(&mut self) {
        if !(self.home && pin_to(self.qid)) {
            if let Some(a) = &self.allowed {
                let _ = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), a);
            }
        }
    }
}

/// The ring threads of one mount.
pub struct Rings {
    threads: Vec<JoinHandle<()>>,
}

impl Rings {
    /// Registers [`THREADS_PER_CPU`] entries on every CPU's queue of the
    /// connection `fd` (the kernel must have granted FUSE_OVER_IO_URING at
    /// INIT). Requests move to the rings once every queue has one.
    pub fn start(fd: OwnedFd, svc: Arc<Service>, payload_len: usize) -> std::io::Result<Rings> {
        let fd = Arc::new(fd);
        let mut threads = Vec::new();
        let running = svc.requests.clone();
        for qid in 0..possible_cpus() {
            for t in 0..THREADS_PER_CPU {
                let (fd, svc, running) = (fd.clone(), svc.clone(), running.clone());
                threads.push(
                    std::thread::Builder::new()
                        .name(format!("ufs-ring-{qid}.{t}"))
                        .spawn(move || {
                            running.ring_threads.fetch_add(1, Ordering::Relaxed);
                            ring_thread(&fd, qid, &svc, payload_len);
                            running.ring_threads.fetch_sub(1, Ordering::Relaxed);
                        })?,
                );
            }
        }
        Ok(Rings { threads })
    }

    /// Waits for every ring thread; they end when the connection does.
    pub fn join(self) {
        for t in self.threads {
            let _ = t.join();
        }
    }
}

/// In polling mode (see `handoff.rs`): submits what is queued (the
/// reply) without waiting, then polls the ring for the next request for
/// up to [`crate::handoff::SPIN`]. A request arrives as task work, which
/// the kernel flags in the submission ring (`IORING_SQ_TASKRUN`) and an
/// enter runs. Returns whether a completion is ready; otherwise the
/// caller sleeps in the kernel as usual.
///
/// Between looks at the ring, the poller makes warm buffers for the cache
/// (`ufs::cache::warm`): a page at a time, so that an arriving request
/// waits at most for one page's zeroing (a fault, 2-3 µs, where the page
/// is fresh), and the request that needs a new buffer finds one faulted in
/// already instead of faulting on its client's time.
fn poll_for_request(ring: &mut Ring, maker: &mut ufs::cache::warm::Maker) -> std::io::Result<bool> {
    ring.submit()?;
    let start = std::time::Instant::now();
    let mut turns = 0u32;
    loop {
        if !ring.completion().is_empty() {
            return Ok(true);
        }
        let mut worked = false;
        if ring.submission().taskrun() {
            // With the flag set, `submit` enters with GETEVENTS (io-uring
            // 0.7.16 and later), which runs the task work.
            ring.submit()?;
        } else if maker.step() {
            worked = true;
        } else {
            std::hint::spin_loop();
        }
        // The clock costs more than a look at the ring: read it now and
        // then (after each page made, whose time is not a look's).
        turns = turns.wrapping_add(1);
        if (worked || turns.is_multiple_of(32)) && start.elapsed() >= crate::handoff::SPIN {
            return Ok(!ring.completion().is_empty());
        }
    }
}

fn ring_thread(fd: &OwnedFd, qid: usize, svc: &Service, payload_len: usize) {
    svc.handoff.register_ring_thread();
    let mut place = Placement::new(qid, possible_cpus());
    // Whether this thread sits on the next CPU, polling (handoff.rs).
    let mut polling = false;
    let Ok(q) = u16::try_from(qid) else {
        return;
    };
    let mut ring: Ring = match IoUring::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        // Pending task work (an arriving request) shows in the ring's
        // flags, so a polling thread sees it without a system call.
        .setup_taskrun_flag()
        .build(4)
    {
        Ok(r) => r,
        Err(e) => {
            log(format_args!("io_uring for queue {qid}: {e}"));
            return;
        }
    };
    let raw = fd.as_raw_fd();
    let mut slot = Slot::new(payload_len);
    if let Err(e) = push(&mut ring, &register_sqe(raw, &slot, q)) {
        log(format_args!("registering a ring entry of queue {qid}: {e}"));
        return;
    }
    let mut replied = false;
    let mut maker = ufs::cache::warm::Maker::new(&ufs::cache::warm::WARM);
    loop {
        let mut poll = replied && place.can_poll() && svc.handoff.polling();
        if poll != polling {
            // The reply goes first; then the move (a migration). An
            // interrupted submit leaves it for the next one.
            match ring.submit() {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(e) => {
                    log(format_args!("ring of queue {qid}: {e}"));
                    std::mem::forget(slot);
                    return;
                }
            }
            if poll {
                // A thread that cannot leave its client's CPU must not
                // poll there.
                poll = place.go_away();
            } else {
                place.go_home();
            }
            polling = poll;
        }
        let waited = if poll {
            match poll_for_request(&mut ring, &mut maker) {
                Ok(true) => {
                    svc.requests.spin_hits.fetch_add(1, Ordering::Relaxed);
                    Ok(0)
                }
                Ok(false) => ring.submit_and_wait(1),
                Err(e) => Err(e),
            }
        } else {
            ring.submit_and_wait(1)
        };
        match waited {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
            Err(e) => {
                log(format_args!("ring of queue {qid}: {e}"));
                // A command may still be in flight: never free its buffers.
                std::mem::forget(slot);
                return;
            }
        }
        let Some(cqe) = ring.completion().next() else {
            continue;
        };
        let res = cqe.result();
        if res < 0 {
            // The connection ended (unmount, abort): ENOTCONN, ECANCELED,
            // ENODEV. Anything else is worth a line in the log.
            if ![libc::ENOTCONN, libc::ECANCELED, libc::ENODEV].contains(&-res) {
                log(format_args!(
                    "ring of queue {qid}: {}",
                    std::io::Error::from_raw_os_error(-res)
                ));
            }
            return;
        }
        let Some(commit_id) = slot.serve(svc) else {
            log(format_args!(
                "ring of queue {qid}: unreadable request header"
            ));
            return;
        };
        let sqe = command(raw, URING_CMD_COMMIT_AND_FETCH, q, commit_id).build();
        if let Err(e) = push(&mut ring, &sqe) {
            log(format_args!("committing a reply on queue {qid}: {e}"));
            std::mem::forget(slot);
            return;
        }
        replied = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bare_names::{PROBE_EVERY, PROBE_SPAN};
    use ufs::dev::MemDevice;

    fn service() -> Service {
        let dev = Arc::new(MemDevice::new(64 << 20));
        ufs::newfs::newfs(&*dev, &ufs::newfs::NewfsParams::default()).unwrap();
        let fs = ufs::Fs::open(Box::new(dev), ufs::MountOptions::default()).unwrap();
        Service::new(Arc::new(fs), false, false)
    }

    fn header(opcode: u32, nodeid: u64) -> InHeader {
        InHeader {
            len: 0,
            opcode,
            unique: 7,
            nodeid,
            uid: 0,
            gid: 0,
            pid: 1,
            total_extlen: 0,
            padding: 0,
        }
    }

    /// The argument of a CREATE with `mode`.
    fn create_in(mode: u32) -> CreateIn {
        CreateIn {
            flags: 0,
            mode,
            umask: 0,
            open_flags: 0,
        }
    }

    /// CREATE of "f" in the root with `mode`: the reply's bytes.
    fn create(svc: &Service, mode: u32) -> Vec<u8> {
        let ci = create_in(mode);
        dispatch(svc, &header(op::CREATE, 1), ci.as_bytes(), b"f\0").unwrap()
    }

    fn entry_of(b: &[u8]) -> EntryOut {
        EntryOut::read_from_prefix(b).unwrap().0
    }

    #[test]
    fn create_write_read_lookup_readdirplus_unlink() {
        let svc = service();
        let out = create(&svc, 0o640);
        assert_eq!(out.len(), size_of::<EntryOut>() + size_of::<OpenOut>());
        let e = entry_of(&out);
        assert_eq!(e.attr.mode, libc::S_IFREG | 0o640);
        assert_eq!(e.entry_valid, TTL.as_secs());
        let node = e.nodeid;
        let w = WriteIn {
            fh: 0,
            offset: 3,
            size: 5,
            write_flags: 0,
            lock_owner: 0,
            flags: 0,
            padding: 0,
        };
        let out = dispatch(&svc, &header(op::WRITE, node), w.as_bytes(), b"hello").unwrap();
        assert_eq!(WriteOut::read_from_prefix(&out).unwrap().0.size, 5);
        let r = ReadIn {
            fh: 0,
            offset: 0,
            size: 100,
            read_flags: 0,
            lock_owner: 0,
            flags: 0,
            padding: 0,
        };
        let out = dispatch(&svc, &header(op::READ, node), r.as_bytes(), &[]).unwrap();
        assert_eq!(out, b"\0\0\0hello");
        let out = dispatch(&svc, &header(op::LOOKUP, 1), &[], b"f\0").unwrap();
        assert_eq!(entry_of(&out).nodeid, node);
        assert_eq!(entry_of(&out).attr.size, 8);
        assert_eq!(
            dispatch(&svc, &header(op::LOOKUP, 1), &[], b"nope\0"),
            Err(libc::ENOENT)
        );
        // OPENDIR answers ENOSYS by default (the kernel then opens
        // directories without asking, and caches their listings).
        assert_eq!(
            dispatch(&svc, &header(op::OPENDIR, 1), &[], &[]),
            Err(libc::ENOSYS)
        );
        // READDIRPLUS of the root: ".", "..", ".snap", "f", each record an
        // entry_out, a dirent and the name padded to 8 bytes.
        let fh = 0;
        let r = ReadIn {
            fh,
            size: 4096,
            ..r
        };
        let out = dispatch(&svc, &header(op::READDIRPLUS, 1), r.as_bytes(), &[]).unwrap();
        let seen = plus_records(&out);
        let f = seen.iter().find(|r| r.0 == "f").expect("f listed");
        assert_eq!(f.1, node);
        assert_eq!(f.2, libc::S_IFREG >> 12);
        // A small buffer holds fewer records, and reading on from the last
        // cookie gives the rest.
        let small = ReadIn { size: 200, ..r };
        let out = dispatch(&svc, &header(op::READDIR, 1), small.as_bytes(), &[]).unwrap();
        assert!(!out.is_empty() && out.len() <= 200);
        let out = dispatch(&svc, &header(op::UNLINK, 1), &[], b"f\0").unwrap();
        assert!(out.is_empty());
        assert_eq!(
            dispatch(&svc, &header(op::LOOKUP, 1), &[], b"f\0"),
            Err(libc::ENOENT)
        );
    }

    /// The records of a READDIRPLUS reply: name, node id, type.
    fn plus_records(out: &[u8]) -> Vec<(String, u64, u32, u64)> {
        let mut at = 0;
        let mut seen = Vec::new();
        while at < out.len() {
            let e = entry_of(&out[at..]);
            let d = Dirent::read_from_prefix(&out[at + 128..]).unwrap().0;
            let name = &out[at + 152..at + 152 + d.namelen as usize];
            seen.push((
                String::from_utf8_lossy(name).to_string(),
                e.nodeid,
                d.typ,
                d.ino,
            ));
            at += (152 + d.namelen as usize).div_ceil(8) * 8;
        }
        assert_eq!(at, out.len());
        seen
    }

    #[test]
    fn listings_whose_files_go_unused_send_names_alone_until_files_are_used() {
        let svc = service();
        let ci = create_in(0o644);
        let mkdir = |parent: u64, name: &str| {
            let m = MkdirIn {
                mode: 0o755,
                umask: 0,
            };
            let n = format!("{name}\0");
            entry_of(
                &dispatch(&svc, &header(op::MKDIR, parent), m.as_bytes(), n.as_bytes()).unwrap(),
            )
            .nodeid
        };
        let mut dirs = Vec::new();
        let mut files = std::collections::HashMap::new();
        for i in 0..80 {
            let d = mkdir(1, &format!("d{i}"));
            mkdir(d, "sub");
            for j in 0..4 {
                let n = format!("f{j}\0");
                let e = entry_of(
                    &dispatch(&svc, &header(op::CREATE, d), ci.as_bytes(), n.as_bytes()).unwrap(),
                );
                files.insert((d, format!("f{j}")), e.nodeid);
            }
            dirs.push(d);
        }
        let list = |d: u64| {
            let r = ReadIn {
                fh: 0,
                offset: 0,
                size: 4096,
                read_flags: 0,
                lock_owner: 0,
                flags: 0,
                padding: 0,
            };
            plus_records(&dispatch(&svc, &header(op::READDIRPLUS, d), r.as_bytes(), &[]).unwrap())
        };
        let bare = |recs: &[(String, u64, u32, u64)]| {
            recs.iter()
                .filter(|r| r.0.starts_with('f'))
                .all(|r| r.1 == 0)
        };
        // A walk that uses no file: after a probe and its span, files go
        // bare; directories stay whole; names, types and inode numbers are
        // what a full listing gives.
        let mut first_bare = None;
        for (k, &d) in dirs.iter().enumerate() {
            let recs = list(d);
            let names: Vec<&str> = recs.iter().map(|r| r.0.as_str()).collect();
            assert_eq!(names, [".", "..", "sub", "f0", "f1", "f2", "f3"], "{k}");
            for (name, node, typ, ino) in &recs {
                if name.starts_with('f') {
                    assert_eq!(*typ, libc::S_IFREG >> 12);
                    assert_eq!(*ino, files[&(d, name.clone())], "{name}");
                    if *node != 0 {
                        assert_eq!(*node, *ino);
                    }
                } else {
                    assert_ne!(*node, 0, "{name} is always whole");
                }
            }
            if bare(&recs) && first_bare.is_none() && k > 16 {
                first_bare = Some(k);
            }
        }
        let first = first_bare.expect("files went bare");
        assert_eq!(first, (PROBE_EVERY + PROBE_SPAN - 1) as usize);
        assert!(bare(&list(dirs[70])));
        let fr = svc.requests.snapshot();
        assert_eq!(fr.bare_turns, 1);
        assert!(fr.bare_entries >= 4 * (80 - first as u64), "{fr:?}");
        // A program that uses the files it listed: full entries again.
        let d = dirs[71];
        assert!(bare(&list(d)));
        for j in 0..2 {
            let n = format!("f{j}\0");
            dispatch(&svc, &header(op::LOOKUP, d), &[], n.as_bytes()).unwrap();
        }
        assert_eq!(svc.requests.snapshot().full_turns, 1);
        // A full listing gives the kernel a reference per file, a bare one
        // none: after the creation's reference is forgotten, a removed
        // file's inode is free at once only if it was listed bare.
        let free = || svc.statfs().ffree;
        let unlink_f0 = |d: u64, f0: u64| {
            svc.forget(f0, 1);
            let before = free();
            dispatch(&svc, &header(op::UNLINK, d), &[], b"f0\0").unwrap();
            free() - before
        };
        let full = dirs[72];
        let recs = list(full);
        assert!(recs.iter().all(|r| r.1 != 0), "{recs:?}");
        let f0 = files[&(full, "f0".to_string())];
        assert_eq!(unlink_f0(full, f0), 0, "held by the listing's reference");
        svc.forget(f0, 1);
        svc.statfs();
        assert!(!svc.fs.has_orphans());
        // Bare again (a walk of unused files), then the same with a bare
        // listing: nothing holds the inode.
        for &d in &dirs[73..] {
            list(d);
        }
        let mut more = Vec::new();
        for i in 80..140 {
            more.push(mkdir(1, &format!("d{i}")));
        }
        for &d in &more {
            list(d);
        }
        let d = more[59];
        let mut f0 = 0;
        for j in 0..4 {
            let n = format!("f{j}\0");
            let e = entry_of(
                &dispatch(&svc, &header(op::CREATE, d), ci.as_bytes(), n.as_bytes()).unwrap(),
            );
            if j == 0 {
                f0 = e.nodeid;
            }
        }
        let recs = list(d);
        assert!(bare(&recs), "{recs:?}");
        assert_eq!(unlink_f0(d, f0), 1, "a bare entry holds nothing");
    }

    /// The names a READDIR reply holds, with the cookie after each.
    fn dirents(out: &[u8]) -> Vec<(Vec<u8>, u64)> {
        let mut at = 0;
        let mut v = Vec::new();
        while at < out.len() {
            let d = Dirent::read_from_prefix(&out[at..]).unwrap().0;
            v.push((out[at + 24..at + 24 + d.namelen as usize].to_vec(), d.off));
            at += (24 + d.namelen as usize).div_ceil(8) * 8;
        }
        v
    }

    /// A listing read in small batches sees every entry nobody touched
    /// exactly once, although names are removed and added between the
    /// batches (POSIX readdir): each batch reads the snapshot its cookie
    /// names, with or without OPENDIR.
    #[test]
    fn listings_in_batches_see_untouched_entries_once_across_changes() {
        for dircache in [true, false] {
            let svc = service().with_dircache(dircache);
            let ci = create_in(0o644);
            for i in 0..60 {
                let name = format!("name-{i:03}\0");
                dispatch(&svc, &header(op::CREATE, 1), ci.as_bytes(), name.as_bytes()).unwrap();
            }
            let fh = match dispatch(&svc, &header(op::OPENDIR, 1), &[], &[]) {
                Ok(out) => OpenOut::read_from_prefix(&out).unwrap().0.fh,
                Err(e) => {
                    assert!(dircache && e == libc::ENOSYS);
                    0
                }
            };
            let mut offset = 0;
            let mut seen: Vec<Vec<u8>> = Vec::new();
            let mut batch = 0;
            loop {
                let r = ReadIn {
                    fh,
                    offset,
                    size: 160,
                    read_flags: 0,
                    lock_owner: 0,
                    flags: 0,
                    padding: 0,
                };
                let out = dispatch(&svc, &header(op::READDIR, 1), r.as_bytes(), &[]).unwrap();
                let ents = dirents(&out);
                if ents.is_empty() {
                    break;
                }
                offset = ents.last().unwrap().1;
                seen.extend(ents.into_iter().map(|(n, _)| n));
                // Between batches: remove two names already listed and one
                // not yet listed, add a new one (any of which the listing
                // may or may not show).
                for gone in [batch * 2, batch * 2 + 1, 59 - batch] {
                    let gone = format!("name-{gone:03}\0");
                    let _ = dispatch(&svc, &header(op::UNLINK, 1), &[], gone.as_bytes());
                }
                let new = format!("new-{batch}\0");
                dispatch(&svc, &header(op::CREATE, 1), ci.as_bytes(), new.as_bytes()).unwrap();
                batch += 1;
                assert!(batch < 100, "the listing never ended");
            }
            assert!(batch > 3, "{batch} batches");
            let touched = |n: &[u8]| {
                let s = String::from_utf8_lossy(n);
                s.starts_with("new-")
                    || (0..batch).any(|b| {
                        [b * 2, b * 2 + 1, 59 - b]
                            .iter()
                            .any(|g| s == format!("name-{g:03}"))
                    })
            };
            for i in 0..60 {
                let n = format!("name-{i:03}").into_bytes();
                if touched(&n) {
                    continue;
                }
                let k = seen.iter().filter(|s| **s == n).count();
                assert_eq!(
                    k,
                    1,
                    "dircache={dircache}: {} listed {k} times",
                    String::from_utf8_lossy(&n)
                );
            }
        }
    }

    /// A listing without OPENDIR read to its end keeps its snapshot: when
    /// the kernel's cache of that listing loses a page in the middle of a
    /// later reader's walk (memory pressure, drop_caches), it asks again
    /// from that reader's cookie, and a reader that removed the entries it
    /// had seen (`rm -r`) still gets every entry after the cookie.
    #[test]
    fn a_listing_read_to_its_end_resumes_from_its_cookies_after_removals() {
        let svc = service().with_dircache(true);
        let ci = create_in(0o644);
        for i in 0..60 {
            let name = format!("name-{i:03}\0");
            dispatch(&svc, &header(op::CREATE, 1), ci.as_bytes(), name.as_bytes()).unwrap();
        }
        let read = |offset: u64, size: u32| {
            let r = ReadIn {
                fh: 0,
                offset,
                size,
                read_flags: 0,
                lock_owner: 0,
                flags: 0,
                padding: 0,
            };
            dirents(&dispatch(&svc, &header(op::READDIR, 1), r.as_bytes(), &[]).unwrap())
        };
        // The first reader (the kernel filling its cache): to the end.
        let mut all = Vec::new();
        let mut offset = 0;
        loop {
            let ents = read(offset, 4096);
            if ents.is_empty() {
                break;
            }
            offset = ents.last().unwrap().1;
            all.extend(ents);
        }
        let names: Vec<Vec<u8>> = all.iter().map(|(n, _)| n.clone()).collect();
        // A later reader walked the cached listing to its 20th entry and
        // removed what it saw; then the kernel asks from that cookie.
        let (seen, rest) = all.split_at(20);
        for (n, _) in seen {
            if n.starts_with(b"name-") {
                let mut z = n.clone();
                z.push(0);
                dispatch(&svc, &header(op::UNLINK, 1), &[], &z).unwrap();
            }
        }
        let mut got = Vec::new();
        let mut offset = seen.last().unwrap().1;
        loop {
            let ents = read(offset, 4096);
            if ents.is_empty() {
                break;
            }
            offset = ents.last().unwrap().1;
            got.extend(ents.into_iter().map(|(n, _)| n));
        }
        let want: Vec<Vec<u8>> = rest.iter().map(|(n, _)| n.clone()).collect();
        assert_eq!(got, want, "after {} of {} names", seen.len(), names.len());
        assert!(svc.listings_kept() <= crate::service::MAX_UNOPENED_LISTINGS);
    }

    /// Listings without OPENDIR that programs abandon half-way push out
    /// the least recently read ones only: a listing read on in between
    /// keeps its snapshot however many others were abandoned.
    #[test]
    fn a_listing_read_on_outlives_abandoned_ones() {
        let svc = service();
        let ci = create_in(0o644);
        let d = entry_of(
            &dispatch(
                &svc,
                &header(op::MKDIR, 1),
                MkdirIn {
                    mode: 0o755,
                    umask: 0,
                }
                .as_bytes(),
                b"d\0",
            )
            .unwrap(),
        )
        .nodeid;
        for i in 0..40 {
            let name = format!("name-{i:03}\0");
            dispatch(&svc, &header(op::CREATE, d), ci.as_bytes(), name.as_bytes()).unwrap();
        }
        let read = |node: u64, offset: u64| {
            let r = ReadIn {
                fh: 0,
                offset,
                size: 120,
                read_flags: 0,
                lock_owner: 0,
                flags: 0,
                padding: 0,
            };
            dirents(&dispatch(&svc, &header(op::READDIR, node), r.as_bytes(), &[]).unwrap())
        };
        let mut seen = Vec::new();
        let mut offset = 0;
        let mut batch = 0;
        loop {
            let ents = read(d, offset);
            if ents.is_empty() {
                break;
            }
            offset = ents.last().unwrap().1;
            seen.extend(ents.into_iter().map(|(n, _)| n));
            // Between two batches: 40 listings of the root abandoned after
            // their first batch, and a name already listed removed.
            for _ in 0..40 {
                assert!(!read(1, 0).is_empty());
            }
            let gone = format!("name-{batch:03}\0");
            let _ = dispatch(&svc, &header(op::UNLINK, d), &[], gone.as_bytes());
            batch += 1;
        }
        assert!(
            batch * 40 > crate::service::MAX_UNOPENED_LISTINGS,
            "{batch} batches"
        );
        for i in batch..40 {
            let n = format!("name-{i:03}").into_bytes();
            let k = seen.iter().filter(|s| **s == n).count();
            assert_eq!(k, 1, "name-{i:03} listed {k} times");
        }
        assert!(svc.listings_kept() <= crate::service::MAX_UNOPENED_LISTINGS);
    }

    #[test]
    fn xattr_requests_size_first_then_data() {
        let svc = service();
        let node = entry_of(&create(&svc, 0o644)).nodeid;
        let set = |name: &str, value: &[u8], flags: u32| {
            let i = SetxattrIn {
                size: value.len() as u32,
                flags,
            };
            let mut payload = name.as_bytes().to_vec();
            payload.push(0);
            payload.extend_from_slice(value);
            dispatch(&svc, &header(op::SETXATTR, node), i.as_bytes(), &payload)
        };
        let get = |name: &str, size: u32| {
            let i = GetxattrIn { size, padding: 0 };
            dispatch(
                &svc,
                &header(op::GETXATTR, node),
                i.as_bytes(),
                format!("{name}\0").as_bytes(),
            )
        };
        let list = |size: u32| {
            let i = GetxattrIn { size, padding: 0 };
            dispatch(&svc, &header(op::LISTXATTR, node), i.as_bytes(), &[])
        };
        set("user.color", b"blue", 0).unwrap();
        set("system.mac_test", &[1, 2, 3], 0).unwrap();
        // The kernel asks for the size first (size 0), then for the value.
        let sized = get("user.color", 0).unwrap();
        assert_eq!(GetxattrOut::read_from_bytes(&sized).unwrap().size, 4);
        assert_eq!(get("user.color", 4).unwrap(), b"blue");
        assert_eq!(get("user.color", 3).err(), Some(libc::ERANGE));
        assert_eq!(list(100).unwrap(), b"user.color\0system.mac_test\0");
        let sized = list(0).unwrap();
        assert_eq!(GetxattrOut::read_from_bytes(&sized).unwrap().size, 27);
        // XATTR_CREATE on an existing name, XATTR_REPLACE on a missing one.
        assert_eq!(set("user.color", b"red", 1).err(), Some(libc::EEXIST));
        assert_eq!(set("user.size", b"1", 2).err(), Some(libc::ENODATA));
        // Nothing there; trusted.* (overlayfs's) lives in the system
        // namespace under its own name.
        assert_eq!(get("security.capability", 0).err(), Some(libc::ENODATA));
        set("trusted.x", b"1", 0).unwrap();
        assert_eq!(get("trusted.x", 1).unwrap(), b"1");
        assert_eq!(set("other.x", b"1", 0).err(), Some(libc::EOPNOTSUPP));
        // security.* lives in the system namespace under its own name.
        set("security.selinux", b"label", 0).unwrap();
        assert_eq!(get("security.selinux", 5).unwrap(), b"label");
        // An ACL in Linux's form (version 2; user::rw- user:1000:r--
        // group::r-- mask::r-- other::---) is stored as FreeBSD's and sets
        // the mode's permission bits.
        let mut acl = 2u32.to_le_bytes().to_vec();
        for (tag, perm, id) in [
            (1u16, 6u16, u32::MAX),
            (2, 4, 1000),
            (4, 4, u32::MAX),
            (0x10, 4, u32::MAX),
            (0x20, 0, u32::MAX),
        ] {
            acl.extend_from_slice(&tag.to_le_bytes());
            acl.extend_from_slice(&perm.to_le_bytes());
            acl.extend_from_slice(&id.to_le_bytes());
        }
        set("system.posix_acl_access", &acl, 0).unwrap();
        assert_eq!(get("system.posix_acl_access", 100).unwrap(), acl);
        let a = dispatch(
            &svc,
            &header(op::GETATTR, node),
            GetattrIn {
                getattr_flags: 0,
                dummy: 0,
                fh: 0,
            }
            .as_bytes(),
            &[],
        )
        .unwrap();
        assert_eq!(
            AttrOut::read_from_prefix(&a).unwrap().0.attr.mode & 0o777,
            0o640
        );
        assert_eq!(
            set("system.posix_acl_access", &acl[..10], 0).err(),
            Some(libc::EINVAL)
        );
        // A raw ACL attribute must be one FreeBSD can read.
        assert_eq!(
            set("system.posix1e.acl_access", b"junk", 0).err(),
            Some(libc::EINVAL)
        );
        let rm = |name: &str| {
            dispatch(
                &svc,
                &header(op::REMOVEXATTR, node),
                &[],
                format!("{name}\0").as_bytes(),
            )
        };
        rm("user.color").unwrap();
        assert_eq!(rm("user.color").err(), Some(libc::ENODATA));
        assert_eq!(get("user.color", 0).err(), Some(libc::ENODATA));
    }

    #[test]
    fn ioctl_inode_flags_round_trip_and_guard_the_file() {
        let svc = service();
        let node = entry_of(&create(&svc, 0o644)).nodeid;
        let io = |cmd: u32, data: &[u8], out_size: u32| {
            let i = IoctlIn {
                fh: 0,
                flags: 0,
                cmd,
                arg: 0,
                in_size: data.len() as u32,
                out_size,
            };
            dispatch(&svc, &header(op::IOCTL, node), i.as_bytes(), data)
        };
        // chattr +i: the kernel reads the xflags, then sets the flags.
        let x = io(0x801c_581f, &[], 28).unwrap();
        assert_eq!(x.len(), size_of::<IoctlOut>() + 28);
        io(0x4008_6602, &0x10u32.to_ne_bytes(), 0).unwrap();
        let g = io(0x8008_6601, &[], 4).unwrap();
        let flags = u32::from_ne_bytes(g[size_of::<IoctlOut>()..][..4].try_into().unwrap());
        assert_eq!(flags, 0x10, "lsattr shows i");
        assert_eq!(
            dispatch(&svc, &header(op::UNLINK, 1), &[], b"f\0").err(),
            Some(libc::EPERM)
        );
        // A flag FreeBSD has no counterpart for, and an unknown ioctl.
        assert_eq!(
            io(0x4008_6602, &0x80u32.to_ne_bytes(), 0).err(),
            Some(libc::EOPNOTSUPP)
        );
        assert_eq!(io(0x1234, &[], 0).err(), Some(libc::ENOTTY));
        io(0x4008_6602, &0u32.to_ne_bytes(), 0).unwrap();
        dispatch(&svc, &header(op::UNLINK, 1), &[], b"f\0").unwrap();
    }

    #[test]
    fn setattr_times_rename_symlink_and_unknown_opcodes() {
        let svc = service();
        let m = MkdirIn {
            mode: 0o755,
            umask: 0,
        };
        let d = entry_of(&dispatch(&svc, &header(op::MKDIR, 1), m.as_bytes(), b"d\0").unwrap());
        assert_eq!(d.attr.mode, libc::S_IFDIR | 0o755);
        let s = entry_of(
            &dispatch(&svc, &header(op::SYMLINK, d.nodeid), &[], b"l\0/target\0").unwrap(),
        );
        let out = dispatch(&svc, &header(op::READLINK, s.nodeid), &[], &[]).unwrap();
        assert_eq!(out, b"/target");
        let sa = SetattrIn {
            valid: fattr::MTIME | fattr::MODE,
            padding: 0,
            fh: 0,
            size: 0,
            lock_owner: 0,
            atime: 0,
            mtime: 1_000_000_000,
            ctime: 0,
            atimensec: 0,
            mtimensec: 42,
            ctimensec: 0,
            mode: 0o700,
            unused4: 0,
            uid: 0,
            gid: 0,
            unused5: 0,
        };
        let out = dispatch(&svc, &header(op::SETATTR, d.nodeid), sa.as_bytes(), &[]).unwrap();
        let a = AttrOut::read_from_prefix(&out).unwrap().0.attr;
        assert_eq!(
            (a.mtime, a.mtimensec, a.mode),
            (1_000_000_000, 42, libc::S_IFDIR | 0o700)
        );
        let r2 = Rename2In {
            newdir: 1,
            flags: crate::service::RENAME_NOREPLACE,
            padding: 0,
        };
        dispatch(
            &svc,
            &header(op::RENAME2, d.nodeid),
            r2.as_bytes(),
            b"l\0moved\0",
        )
        .unwrap();
        assert!(dispatch(&svc, &header(op::LOOKUP, 1), &[], b"moved\0").is_ok());
        let bad = Rename2In { flags: 8, ..r2 };
        assert_eq!(
            dispatch(&svc, &header(op::RENAME2, 1), bad.as_bytes(), b"moved\0x\0"),
            Err(libc::EINVAL)
        );
        // RENAME_WHITEOUT: a character device 0:0 takes the old name.
        let wh = Rename2In { flags: 4, ..r2 };
        dispatch(&svc, &header(op::RENAME2, 1), wh.as_bytes(), b"moved\0x\0").unwrap();
        let w = entry_of(&dispatch(&svc, &header(op::LOOKUP, 1), &[], b"moved\0").unwrap());
        assert_eq!((w.attr.mode, w.attr.rdev), (libc::S_IFCHR, 0));
        // STATX: refused by default (`btime=off`); with `btime=on` the
        // attributes with the birth time (UFS2).
        let sx = StatxIn {
            getattr_flags: 0,
            reserved: 0,
            fh: 0,
            sx_flags: 0,
            sx_mask: 0xfff,
        };
        assert_eq!(
            dispatch(&svc, &header(op::STATX, 1), sx.as_bytes(), &[]),
            Err(libc::ENOSYS)
        );
        let svc = svc.with_btime(true);
        let out = dispatch(&svc, &header(op::STATX, 1), sx.as_bytes(), &[]).unwrap();
        let st = StatxOut::read_from_prefix(&out).unwrap().0.stat;
        assert_eq!(st.mask, 0xfff);
        assert_eq!(u32::from(st.mode) & libc::S_IFMT, libc::S_IFDIR);
        assert!(st.btime.tv_sec > 0);
        // TMPFILE: an entry with no link.
        let ci = CreateIn {
            flags: libc::O_RDWR as u32,
            mode: 0o600,
            umask: 0,
            open_flags: 0,
        };
        let out = dispatch(&svc, &header(op::TMPFILE, 1), ci.as_bytes(), b"/\0").unwrap();
        assert_eq!(entry_of(&out).attr.nlink, 0);
        // Truncated arguments are EIO, not a panic; unserved opcodes ENOSYS.
        assert_eq!(
            dispatch(&svc, &header(op::SETATTR, 1), &[0; 8], &[]),
            Err(libc::EIO)
        );
        assert_eq!(
            dispatch(&svc, &header(op::LOOKUP, 1), &[], b"no-nul"),
            Err(libc::EIO)
        );
        assert_eq!(
            dispatch(&svc, &header(op::FLUSH, 1), &[], &[]),
            Err(libc::ENOSYS)
        );
        assert_eq!(
            dispatch(&svc, &header(9999, 1), &[], &[]),
            Err(libc::ENOSYS)
        );
    }
}
