//! In-process benchmarks on the engine: each workload builds its own file
//! system on a memory device, drives it through the same `ufs::Fs` calls
//! the FUSE adapter makes, and reports wall time together with the
//! engine's counters (dirhash, buffer cache), as serde structures the CLI
//! writes as JSON. Workloads never print; progress goes through a
//! caller-supplied callback.
//!
//! - [`dirhash_ops`]: per-operation cost against directory size, dirhash
//!   against linear (the 2002 paper's Figures 2-6);
//! - [`maildir`]: many maildirs under delivery, scans and deletions with
//!   fixed, large, and growing/shrinking dirhash budgets (seed `002_*`);
//! - [`dirpref`]: extraction and removal of a ports-like tree under the
//!   traditional and Orlov directory placement on the modeled disks of
//!   seed `000_*` (trees from [`tree`]);
//! - [`largedir`]: seed `001_*`'s script (create, ls, tar, find, `cp -a`,
//!   `rm -rf` of one huge directory, cold cache) under each inode order;
//! - [`writeorder`]: the write modes (normal, sync, async, soft updates) on
//!   a modeled disk: many empty files created and removed, and seed
//!   `004_*`'s MH folder (create, `folder -pack`, `rm -rf`);
//! - [`paper`]: seed `004_*`'s evaluation: tar, MH folder, Bonnie++,
//!   Andrew, Postmark, Netnews, build, maildir and large-directory
//!   workloads under all 16 combinations of soft updates, dirpref,
//!   vmiodir and dirhash on a modeled disk and CPU, as rows for
//!   `analysis/paper_stats.py` and `analysis/paper_report.py`;
//! - [`crashtest`]: crash states of small workloads under each write mode,
//!   checked with fsck and against what `fsync` promised.
pub mod crashtest;
pub mod dirhash_ops;
pub mod dirpref;
pub mod largedir;
pub mod maildir;
pub mod mountcrash;
pub mod paper;
pub mod powercut;
pub mod tree;
pub mod writeorder;

use std::sync::Arc;
use ufs::dev::MemDevice;
use ufs::newfs::{newfs, NewfsParams};
use ufs::{Fs, MountOptions};

/// A fresh file system of `bytes` on a memory device, with one inode per
/// `density` bytes, mounted with `opts`.
pub fn fresh_fs(bytes: u64, density: u64, opts: MountOptions) -> ufs::Result<(Arc<MemDevice>, Fs)> {
    let dev = Arc::new(MemDevice::new(bytes));
    newfs(
        &*dev,
        &NewfsParams {
            seed: Some(1),
            time: Some(1_700_000_000),
            density: Some(density),
            ..Default::default()
        },
    )?;
    let fs = Fs::open(
        Box::new(dev.clone()),
        MountOptions {
            seed: opts.seed.or(Some(1)),
            ..opts
        },
    )?;
    Ok((dev, fs))
}

/// A fresh file system made with `params` on a sparse device of `bytes`
/// under the modeled disk `disk` (a preset name), mounted with `opts`.
pub fn modeled_fs(
    disk: &str,
    bytes: u64,
    params: &NewfsParams,
    opts: MountOptions,
) -> ufs::Result<(Arc<ufs_sim::model::ModeledDisk<ufs::dev::SparseDevice>>, Fs)> {
    let spec = ufs_sim::model::preset(disk)
        .ok_or_else(|| ufs::Error::new(ufs::ErrorKind::Invalid, format!("no disk model {disk}")))?;
    let dev = Arc::new(ufs_sim::model::ModeledDisk::new(
        ufs::dev::SparseDevice::new(bytes),
        spec,
        false,
    )?);
    newfs(&*dev, params)?;
    let fs = Fs::open(Box::new(dev.clone()), opts)?;
    Ok((dev, fs))
}

/// Progress callback: `(done, total, message)`.
pub type Progress<'a> = &'a mut dyn FnMut(u64, u64, &str);
