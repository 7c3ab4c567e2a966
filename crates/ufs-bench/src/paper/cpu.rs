//! The CPU side of the modeled machine: what the engine's calls and its
//! directory work would have cost on the paper's Pentium 4 at 1.6 GHz
//! under FreeBSD 4.5 (seed `004_*`, section 4.2), so that an optimisation
//! that saves CPU and not disk time (dirhash above all) shows in the
//! figures as it did in the paper.
//!
//! The model charges:
//! - every call a fixed cost by kind (system call, `namei`, vnode and
//!   buffer-cache work that does not depend on directory size);
//! - every directory search (a lookup answered by a linear scan, by
//!   dirhash's hash chains or its sequential shortcut) a fixed cost, and
//!   every directory entry examined by a linear scan a cost per entry;
//!   entries our engine examines twice in one operation (the lookup, then
//!   the sweep that places or finds the entry) are charged once, as
//!   FreeBSD's `namei` does both in one sweep;
//! - every byte of file data copied between the process and the cache;
//! - whatever a workload declares as its own (user) CPU work, such as a
//!   compiler's time per source byte (see the workloads).
//!
//! Sources of the constants (section 3.2 of the paper, measured on the same
//! machine): a `stat` answered from the name cache costs about 5 µs, with
//! dirhash about 7 µs, so a directory search costs about 2 µs beyond a
//! cached lookup; creating a file with dirhash costs about 50 µs whatever the
//! directory size, removing one about 35 µs. The cost per entry examined,
//! 30 ns (about 50 cycles: the record's length and name compared, one
//! cache line per three entries of a directory larger than the 256 KB
//! second-level cache), and the copy rate of 1 GB/s are our estimates for
//! that processor; they are stated here so a reader can change them. The
//! figures are a model, not a measurement of our engine's CPU time (which
//! is recorded beside them as `wall_ms`).
//!
//! Invariant: the modeled CPU time is a pure function of the counters, so a
//! run's figures are as deterministic as its counters.
use ufs::calls::CallStats;
use ufs::dir::dirhash::DirhashStats;

/// Costs in microseconds (per call or per search) and nanoseconds (per
/// entry, per byte).
#[derive(Debug, Clone, serde::Serialize)]
pub struct CpuModel {
    pub name: &'static str,
    pub lookup_us: f64,
    pub getattr_us: f64,
    pub readdir_us: f64,
    pub create_us: f64,
    pub remove_us: f64,
    pub rename_us: f64,
    pub setattr_us: f64,
    pub read_us: f64,
    pub write_us: f64,
    pub fsync_us: f64,
    pub other_us: f64,
    pub dir_search_us: f64,
    pub entry_ns: f64,
    pub copy_ns_per_byte: f64,
}

impl CpuModel {
    /// The paper's machine: Pentium 4, 1.6 GHz, FreeBSD 4.5.
    pub fn pentium4_2002() -> CpuModel {
        CpuModel {
            name: "pentium4-1.6GHz-freebsd4.5",
            // A stat from the name cache (section 3.2).
            lookup_us: 5.0,
            // A stat of a file already found (fstat): the cached part of
            // a lookup less the name cache probe.
            getattr_us: 3.0,
            readdir_us: 10.0,
            // Creation with dirhash, 50 µs, less its directory search.
            create_us: 48.0,
            // Removal with dirhash, 35 µs, less its directory search.
            remove_us: 33.0,
            // No figure in the paper: one entry added, one removed, no
            // inode allocated; taken as a creation's cost.
            rename_us: 48.0,
            setattr_us: 10.0,
            read_us: 8.0,
            write_us: 10.0,
            fsync_us: 10.0,
            other_us: 2.0,
            // 7 µs with dirhash against 5 µs from the name cache.
            dir_search_us: 2.0,
            entry_ns: 30.0,
            copy_ns_per_byte: 1.0,
        }
    }

    /// Modeled CPU seconds of `calls` and the directory work in `dh`
    /// (both counts over the same interval).
    pub fn seconds(&self, calls: &CallStats, dh: &DirhashStats) -> f64 {
        let us = calls.lookup as f64 * self.lookup_us
            + calls.getattr as f64 * self.getattr_us
            + calls.readdir as f64 * self.readdir_us
            + calls.create as f64 * self.create_us
            + calls.remove as f64 * self.remove_us
            + calls.rename as f64 * self.rename_us
            + calls.setattr as f64 * self.setattr_us
            + calls.read as f64 * self.read_us
            + calls.write as f64 * self.write_us
            + calls.fsync as f64 * self.fsync_us
            + calls.other as f64 * self.other_us
            + (dh.lookups_linear + dh.lookups_hash + dh.lookups_sequential) as f64
                * self.dir_search_us;
        let ns = dh.entries_scanned.saturating_sub(dh.entries_rescanned) as f64 * self.entry_ns
            + (calls.bytes_read + calls.bytes_written) as f64 * self.copy_ns_per_byte;
        us * 1e-6 + ns * 1e-9
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_linear_sweep_costs_by_entry_and_a_rescan_is_free() {
        let m = CpuModel::pentium4_2002();
        let calls = CallStats {
            create: 1,
            ..Default::default()
        };
        let small = DirhashStats {
            lookups_linear: 1,
            entries_scanned: 10,
            ..Default::default()
        };
        let big = DirhashStats {
            lookups_linear: 1,
            entries_scanned: 2 * 100_000,
            entries_rescanned: 100_000,
            ..Default::default()
        };
        let a = m.seconds(&calls, &small);
        let b = m.seconds(&calls, &big);
        assert!((a - 50.3e-6).abs() < 1e-9, "{a}");
        // 100,000 entries once at 30 ns: 3 ms more.
        assert!((b - a - (100_000.0 - 10.0) * 30e-9).abs() < 1e-9, "{b}");
    }
}
