//! Counts of the FUSE requests the kernel sends, by opcode: what a round
//! trip costs is the adapter's main expense, so `ufskit stats` shows how
//! many of each a workload needed (LOOKUP, GETATTR, SETATTR per file...).
//!
//! Invariants: each request is counted once, when its handler starts,
//! whatever its outcome; counters only grow.
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The requests counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Lookup,
    Forget,
    Getattr,
    Setattr,
    Readlink,
    Mknod,
    Mkdir,
    Unlink,
    Rmdir,
    Symlink,
    Rename,
    Link,
    Open,
    Read,
    Write,
    Release,
    Fsync,
    Opendir,
    Readdir,
    Readdirplus,
    Releasedir,
    Fsyncdir,
    Statfs,
    Create,
    Ioctl,
    Getxattr,
    Listxattr,
    Setxattr,
    Removexattr,
    Fallocate,
    Lseek,
    CopyFileRange,
}

const N: usize = Op::CopyFileRange as usize + 1;

const NAMES: [&str; N] = [
    "lookup",
    "forget",
    "getattr",
    "setattr",
    "readlink",
    "mknod",
    "mkdir",
    "unlink",
    "rmdir",
    "symlink",
    "rename",
    "link",
    "open",
    "read",
    "write",
    "release",
    "fsync",
    "opendir",
    "readdir",
    "readdirplus",
    "releasedir",
    "fsyncdir",
    "statfs",
    "create",
    "ioctl",
    "getxattr",
    "listxattr",
    "setxattr",
    "removexattr",
    "fallocate",
    "lseek",
    "copy_file_range",
];

#[derive(Debug, Default)]
pub struct Requests {
    counts: [AtomicU64; N],
    /// Of those, served through the io_uring rings.
    via_uring: AtomicU64,
    /// Ring threads running (0: every request through /dev/fuse).
    pub ring_threads: AtomicU64,
    /// Times the CPU latency request was taken while requests flowed, and
    /// milliseconds it was held in all (`cpulatency.rs`).
    pub cpu_latency_holds: AtomicU64,
    pub cpu_latency_held_ms: AtomicU64,
    /// Whether the request is held now.
    pub cpu_latency_held: std::sync::atomic::AtomicBool,
    /// Times ring threads started polling between requests, milliseconds
    /// they polled in all, whether they poll now, and requests a polling
    /// thread picked up without sleeping (`handoff.rs`).
    pub spin_turns: AtomicU64,
    pub spin_polling_ms: AtomicU64,
    pub spin_polling: std::sync::atomic::AtomicBool,
    pub spin_hits: AtomicU64,
    /// Times CPU pressure ended polling or sharing.
    pub spin_pressure_stops: AtomicU64,
    /// Times ring threads started sharing their clients' CPUs in the idle
    /// scheduling class, milliseconds they shared in all, and whether they
    /// share now (`handoff.rs`).
    pub share_turns: AtomicU64,
    pub share_ms: AtomicU64,
    pub sharing: std::sync::atomic::AtomicBool,
    /// READDIRPLUS entries sent with names alone, and the times entries
    /// turned bare or full (`bare_names.rs`).
    pub bare_entries: AtomicU64,
    pub bare_turns: AtomicU64,
    pub full_turns: AtomicU64,
}

/// A snapshot: every opcode with its count, and the total.
#[derive(Debug, Clone, Serialize)]
pub struct RequestCounts {
    pub total: u64,
    /// Served through the io_uring rings (the rest through /dev/fuse).
    pub via_uring: u64,
    pub ring_threads: u64,
    pub cpu_latency_holds: u64,
    pub cpu_latency_held_ms: u64,
    pub cpu_latency_held: bool,
    pub spin_turns: u64,
    pub spin_polling_ms: u64,
    pub spin_polling: bool,
    pub spin_hits: u64,
    pub spin_pressure_stops: u64,
    pub share_turns: u64,
    pub share_ms: u64,
    pub sharing: bool,
    pub bare_entries: u64,
    pub bare_turns: u64,
    pub full_turns: u64,
    pub by_op: std::collections::BTreeMap<&'static str, u64>,
}

impl Requests {
    pub fn count(&self, op: Op) {
        self.counts[op as usize].fetch_add(1, Relaxed);
    }

    /// Counts a request served by a ring thread.
    pub fn count_uring(&self, op: Op) {
        self.count(op);
        self.via_uring.fetch_add(1, Relaxed);
    }

    /// Requests counted so far, all opcodes.
    pub fn total(&self) -> u64 {
        self.counts.iter().map(|c| c.load(Relaxed)).sum()
    }

    pub fn snapshot(&self) -> RequestCounts {
        let by_op: std::collections::BTreeMap<&'static str, u64> = NAMES
            .iter()
            .zip(&self.counts)
            .map(|(n, c)| (*n, c.load(Relaxed)))
            .filter(|(_, c)| *c > 0)
            .collect();
        RequestCounts {
            total: by_op.values().sum(),
            via_uring: self.via_uring.load(Relaxed),
            ring_threads: self.ring_threads.load(Relaxed),
            cpu_latency_holds: self.cpu_latency_holds.load(Relaxed),
            cpu_latency_held_ms: self.cpu_latency_held_ms.load(Relaxed),
            cpu_latency_held: self.cpu_latency_held.load(Relaxed),
            spin_turns: self.spin_turns.load(Relaxed),
            spin_polling_ms: self.spin_polling_ms.load(Relaxed),
            spin_polling: self.spin_polling.load(Relaxed),
            spin_hits: self.spin_hits.load(Relaxed),
            spin_pressure_stops: self.spin_pressure_stops.load(Relaxed),
            share_turns: self.share_turns.load(Relaxed),
            share_ms: self.share_ms.load(Relaxed),
            sharing: self.sharing.load(Relaxed),
            bare_entries: self.bare_entries.load(Relaxed),
            bare_turns: self.bare_turns.load(Relaxed),
            full_turns: self.full_turns.load(Relaxed),
            by_op,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_name() {
        let r = Requests::default();
        r.count(Op::Lookup);
        r.count(Op::Lookup);
        r.count(Op::Create);
        let s = r.snapshot();
        assert_eq!(s.total, 3);
        assert_eq!(s.by_op["lookup"], 2);
        assert_eq!(s.by_op["create"], 1);
        assert!(!s.by_op.contains_key("write"));
    }
}
