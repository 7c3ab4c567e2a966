//! Counts of the calls made to a mounted file system, by kind, and a hook
//! run after each of them: what a CPU cost model needs (the benchmarks
//! charge each kind of call its cost on the paper's machine) and a place for
//! a modeled-time syncer to run between calls.
//!
//! Invariants: every public [`crate::Fs`] operation that a system call maps
//! to counts exactly once, whether it succeeds or fails, before its hook
//! runs; `sync`, `unmount`, `stats` and the other tool calls are not
//! counted. The hook runs with no engine lock held and never re-enters
//! itself (a hook that calls into the file system does not trigger itself).
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

/// Kinds of call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    Lookup,
    Getattr,
    Readdir,
    /// mknod, mkdir, symlink, link.
    Create,
    /// unlink, rmdir.
    Remove,
    Rename,
    Setattr,
    Read,
    Write,
    Fsync,
    /// readlink, forget and the like.
    Other,
}

/// A snapshot of the counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CallStats {
    pub lookup: u64,
    pub getattr: u64,
    pub readdir: u64,
    pub create: u64,
    pub remove: u64,
    pub rename: u64,
    pub setattr: u64,
    pub read: u64,
    pub write: u64,
    pub fsync: u64,
    pub other: u64,
    /// Bytes returned by reads and passed to writes.
    pub bytes_read: u64,
    pub bytes_written: u64,
}

impl CallStats {
    /// Counts since `earlier`.
    pub fn since(&self, earlier: &CallStats) -> CallStats {
        CallStats {
            lookup: self.lookup - earlier.lookup,
            getattr: self.getattr - earlier.getattr,
            readdir: self.readdir - earlier.readdir,
            create: self.create - earlier.create,
            remove: self.remove - earlier.remove,
            rename: self.rename - earlier.rename,
            setattr: self.setattr - earlier.setattr,
            read: self.read - earlier.read,
            write: self.write - earlier.write,
            fsync: self.fsync - earlier.fsync,
            other: self.other - earlier.other,
            bytes_read: self.bytes_read - earlier.bytes_read,
            bytes_written: self.bytes_written - earlier.bytes_written,
        }
    }

    pub fn total(&self) -> u64 {
        self.lookup
            + self.getattr
            + self.readdir
            + self.create
            + self.remove
            + self.rename
            + self.setattr
            + self.read
            + self.write
            + self.fsync
            + self.other
    }
}

/// What runs after each counted call.
pub type Hook = Box<dyn FnMut(&crate::Fs) + Send>;

#[derive(Default)]
pub(crate) struct Calls {
    counts: [AtomicU64; 11],
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
    pub(crate) hook: Mutex<Option<Hook>>,
}

impl Calls {
    pub(crate) fn count(&self, call: Call, bytes: u64) {
        self.counts[call as usize].fetch_add(1, Relaxed);
        match call {
            Call::Read => self.bytes_read.fetch_add(bytes, Relaxed),
            Call::Write => self.bytes_written.fetch_add(bytes, Relaxed),
            _ => 0,
        };
    }

    pub(crate) fn snapshot(&self) -> CallStats {
        let c = |k: Call| self.counts[k as usize].load(Relaxed);
        CallStats {
            lookup: c(Call::Lookup),
            getattr: c(Call::Getattr),
            readdir: c(Call::Readdir),
            create: c(Call::Create),
            remove: c(Call::Remove),
            rename: c(Call::Rename),
            setattr: c(Call::Setattr),
            read: c(Call::Read),
            write: c(Call::Write),
            fsync: c(Call::Fsync),
            other: c(Call::Other),
            bytes_read: self.bytes_read.load(Relaxed),
            bytes_written: self.bytes_written.load(Relaxed),
        }
    }
}
