//! A second mount of a mounted image that behaves as a fresh mount of a
//! kernel file system: a clone of the first mount's tree, made private
//! while still detached, then attached at the new place. A plain bind
//! (MS_BIND) would put the new mount in the first one's peer group when
//! that is shared, so mounts under either would propagate to the other
//! (xfstests generic/409-411); a mount made fresh joins no group, and gets
//! a new one of its own when its parent is shared (the kernel's
//! `attach_recursive_mnt`). Linux 5.12+ (open_tree, mount_setattr,
//! move_mount); older kernels get the plain bind.
//!
//! Invariant: the clone is either attached at `dir` or dropped with its
//! descriptor (a detached tree dissolves when its last descriptor closes).
#![allow(unsafe_code)]
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

const OPEN_TREE_CLONE: libc::c_uint = 1;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;

/// `struct mount_attr` (linux/mount.h).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

fn c_path(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path has a NUL byte"))
}

fn check(r: libc::c_long) -> io::Result<libc::c_long> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Mounts the tree at `src` again at `dir`, private (in no peer group)
/// before it is attached. Err(Unsupported) when the kernel lacks the
/// calls, for the caller to fall back on a plain bind.
pub fn mount_clone_private(src: &Path, dir: &Path) -> io::Result<()> {
    let (src, dir) = (c_path(src)?, c_path(dir)?);
    let empty = CString::default();
    // SAFETY: plain system calls with NUL-terminated paths that outlive
    // them and a `mount_attr` of the size passed; the descriptor returned
    // is owned once, here.
    let tree = unsafe {
        let fd = check(libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            src.as_ptr(),
            OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint,
        ))
        .map_err(unsupported_if_enosys)?;
        OwnedFd::from_raw_fd(fd as i32)
    };
    let attr = MountAttr {
        attr_set: 0,
        attr_clr: 0,
        propagation: libc::MS_PRIVATE,
        userns_fd: 0,
    };
    unsafe {
        check(libc::syscall(
            libc::SYS_mount_setattr,
            tree.as_raw_fd(),
            empty.as_ptr(),
            libc::AT_EMPTY_PATH,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        ))
        .map_err(unsupported_if_enosys)?;
        check(libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            empty.as_ptr(),
            libc::AT_FDCWD,
            dir.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        ))?;
    }
    Ok(())
}

fn unsupported_if_enosys(e: io::Error) -> io::Error {
    if e.raw_os_error() == Some(libc::ENOSYS) {
        io::Error::new(io::ErrorKind::Unsupported, e)
    } else {
        e
    }
}
