//! Seed `001_*`'s benchmark as a workload: N files of 4 KB in one directory,
//! then `ls`, `tar`, `find`, `cp -a` and `rm -rf` of it, each from a cold
//! cache, timed on a modeled disk (and on the wall clock), under each inode
//! order for large directories (`-o inodeorder=`); optionally after churn
//! (delete half the files at random, create as many new ones).
//!
//! The steps make the engine calls the tools make through a mount:
//! - `ls`: read the directory (GNU `ls` without `-l` does not stat);
//! - `tar`: read the directory, then for each entry in readdir order stat
//!   it and read its data;
//! - `find -type f`: read the directory (the type is in each entry);
//! - `cp -a`: read the directory; for each entry stat, create the copy,
//!   read the data, write it, set mode, owner and times; then sync;
//! - `rm -rf`: read the directory, unlink each entry in readdir order,
//!   remove the directory; then sync.
//!
//! Invariants: each run starts from a fresh file system on a sparse memory
//! device under the modeled disk, names come from a seeded generator, so
//! the same configuration gives the same modeled figures every time; the
//! cache is dropped before every step (the seed's `echo 3 >
//! /proc/sys/vm/drop_caches`) and writes are synced inside the step that
//! made them; every image is checked with fsck at the end.
use crate::Progress;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::sync::Arc;
use std::time::Instant;
use ufs::alloc::placement::InodeOrder;
use ufs::dev::{BlockDevice, SparseDevice};
use ufs::layout::LayoutReport;
use ufs::newfs::{newfs, NewfsParams};
use ufs::{Cred, Fs, MountOptions, SetAttr, TimeSet};
use ufs_sim::model::{preset, DiskStats, ModeledDisk};

const MIB: u64 = 1 << 20;
const FILE_BYTES: usize = 4096;

/// The machine the workload runs on.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Machine {
    pub disk: String,
    pub cache_bytes: u64,
    pub dirhash_maxmem: u64,
}

impl Default for Machine {
    /// A 2001-era 7,200 rpm disk (the seed's own machine is not described)
    /// with 256 MB of buffer cache and 64 MB for dirhash, so a directory of
    /// a million entries keeps its index.
    fn default() -> Self {
        Machine {
            disk: "dtla-307045".into(),
            cache_bytes: 256 * MIB,
            dirhash_maxmem: 64 * MIB,
        }
    }
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Step {
    pub name: String,
    pub modeled_ms: f64,
    pub wall_ms: f64,
    /// Modeled microseconds per file of the directory.
    pub modeled_us_per_file: f64,
    pub disk: DiskStats,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Run {
    pub files: u64,
    pub order: String,
    pub churned: bool,
    pub steps: Vec<Step>,
    /// Layout of the directory just before `ls` (after churn if any).
    pub layout: LayoutReport,
    /// Layout of the copy `cp -a` made.
    pub copy_layout: LayoutReport,
    pub fsck_clean: bool,
    pub wall_s: f64,
}

impl Run {
    pub fn step(&self, name: &str) -> Option<&Step> {
        self.steps.iter().find(|s| s.name == name)
    }
}

/// File system size for `files` files and their copy: twice the data, with
/// room to spare, in whole 1 GiB steps.
fn image_bytes(files: u64) -> u64 {
    let need = files * 2 * (FILE_BYTES as u64 + 1024) * 3 / 2 + 512 * MIB;
    need.div_ceil(1 << 30) * (1 << 30)
}

/// The seed's `dirtest` names: random, the same for the same seed.
fn names(rng: &mut rand::rngs::StdRng, n: u64) -> Vec<Vec<u8>> {
    (0..n)
        .map(|_| format!("{:016x}", rng.gen::<u64>()).into_bytes())
        .collect()
}

struct Timer<'a> {
    dev: &'a ModeledDisk<SparseDevice>,
    files: u64,
    steps: Vec<Step>,
}

impl Timer<'_> {
    fn step<T>(
        &mut self,
        fs: &Fs,
        name: &str,
        f: impl FnOnce() -> ufs::Result<T>,
    ) -> ufs::Result<T> {
        fs.drop_caches()?;
        let s0 = ModeledDisk::disk_stats(self.dev);
        let t = Instant::now();
        let out = f()?;
        fs.sync()?;
        let wall_ms = t.elapsed().as_secs_f64() * 1e3;
        let disk = ModeledDisk::disk_stats(self.dev).since(&s0);
        self.steps.push(Step {
            name: name.into(),
            modeled_ms: disk.busy_ms,
            wall_ms,
            modeled_us_per_file: disk.busy_ms * 1e3 / self.files.max(1) as f64,
            disk,
        });
        Ok(out)
    }
}

/// One run of the workload: `files` files under `order`, churned or not.
pub fn run(
    machine: &Machine,
    files: u64,
    order: InodeOrder,
    churn: bool,
    seed: u64,
) -> ufs::Result<Run> {
    let wall = Instant::now();
    let spec = preset(&machine.disk).ok_or_else(|| {
        ufs::Error::new(
            ufs::ErrorKind::Invalid,
            format!("no disk model {}", machine.disk),
        )
    })?;
    let dev = Arc::new(ModeledDisk::new(
        SparseDevice::new(image_bytes(files)),
        spec,
        false,
    )?);
    newfs(
        &*dev,
        &NewfsParams {
            density: Some(4096),
            seed: Some(1),
            time: Some(1_330_000_000),
            ..Default::default()
        },
    )?;
    let mut opts = MountOptions {
        cache_bytes: machine.cache_bytes,
        readahead: 0,
        seed: Some(seed),
        inode_order: order,
        // Measured with every write delayed (the write modes are compared
        // by `bench writeorder`).
        write_mode: Some(ufs::order::WriteMode::Async),
        ..Default::default()
    };
    opts.dirhash.maxmem = machine.dirhash_maxmem;
    let fs = Fs::open(Box::new(dev.clone()), opts)?;
    let root = fs.root();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut live = names(&mut rng, files);
    let data = vec![0u8; FILE_BYTES];
    let mut t = Timer {
        dev: &dev,
        files,
        steps: Vec::new(),
    };
    let dir = fs.mkdir(root, b"test", 0o755, Cred::ROOT)?.ino;
    let create = |fs: &Fs, names: &[Vec<u8>]| -> ufs::Result<()> {
        for n in names {
            let a = fs.mknod(dir, n, 0o100644, 0, Cred::ROOT)?;
            fs.write(a.ino, 0, &data, Cred::ROOT)?;
        }
        Ok(())
    };
    t.step(&fs, "create", || create(&fs, &live))?;
    if churn {
        live.shuffle(&mut rng);
        let gone: Vec<Vec<u8>> = live.drain(..files as usize / 2).collect();
        let fresh = names(&mut rng, gone.len() as u64);
        t.step(&fs, "churn", || {
            for n in &gone {
                fs.unlink(dir, n)?;
            }
            create(&fs, &fresh)
        })?;
    }
    fs.drop_caches()?;
    let layout = ufs::layout::measure(&fs, dir)?;
    let listing = |fs: &Fs| -> ufs::Result<Vec<ufs::dir::ReadDirEntry>> {
        let mut v = fs.readdir(dir, 0, usize::MAX)?;
        v.retain(|e| e.name != b"." && e.name != b"..");
        Ok(v)
    };
    t.step(&fs, "ls", || {
        let mut v = listing(&fs)?;
        v.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(())
    })?;
    t.step(&fs, "tar", || {
        for e in listing(&fs)? {
            let a = fs.getattr(e.ino)?;
            fs.read(e.ino, 0, a.size as usize)?;
        }
        Ok(())
    })?;
    t.step(&fs, "find", || listing(&fs).map(|_| ()))?;
    let copy = t.step(&fs, "cp -a", || {
        let copy = fs.mkdir(root, b"copy", 0o755, Cred::ROOT)?.ino;
        for e in listing(&fs)? {
            let a = fs.getattr(e.ino)?;
            let c = fs.mknod(copy, &e.name, 0o100600, 0, Cred::ROOT)?;
            let bytes = fs.read(e.ino, 0, a.size as usize)?;
            fs.write(c.ino, 0, &bytes, Cred::ROOT)?;
            let set = SetAttr {
                mode: Some(a.perm),
                uid: Some(a.uid),
                gid: Some(a.gid),
                atime: Some(TimeSet::At(a.atime)),
                mtime: Some(TimeSet::At(a.mtime)),
                ..Default::default()
            };
            fs.setattr(c.ino, &set, Cred::ROOT)?;
        }
        Ok(copy)
    })?;
    fs.drop_caches()?;
    let copy_layout = ufs::layout::measure(&fs, copy)?;
    t.step(&fs, "rm -rf", || {
        for e in listing(&fs)? {
            fs.unlink(dir, &e.name)?;
        }
        fs.rmdir(root, b"test")
    })?;
    let steps = t.steps;
    fs.unmount()?;
    drop(fs);
    let fsck_clean = ufs::fsck::fsck(&*dev as &dyn BlockDevice, ufs::fsck::FsckMode::Check)?
        .findings
        .is_empty();
    Ok(Run {
        files,
        order: order.name().into(),
        churned: churn,
        steps,
        layout,
        copy_layout,
        fsck_clean,
        wall_s: wall.elapsed().as_secs_f64(),
    })
}

/// Every size × order × (fresh, churned).
pub fn run_all(
    machine: &Machine,
    sizes: &[u64],
    orders: &[InodeOrder],
    churn: &[bool],
    seed: u64,
    progress: Progress,
) -> ufs::Result<Vec<Run>> {
    let total = (sizes.len() * orders.len() * churn.len()) as u64;
    let mut out = Vec::new();
    for &n in sizes {
        for &c in churn {
            for &o in orders {
                progress(
                    out.len() as u64,
                    total,
                    &format!(
                        "{n} files, {}, {}",
                        o.name(),
                        if c { "churned" } else { "fresh" }
                    ),
                );
                out.push(run(machine, n, o, c, seed)?);
            }
        }
    }
    progress(total, total, "done");
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_order_keeps_locality_through_churn_and_copies_cost_less() {
        let m = Machine::default();
        let off = run(&m, 6000, InodeOrder::Off, true, 1).unwrap();
        let offset = run(&m, 6000, InodeOrder::Offset, true, 1).unwrap();
        assert!(off.fsck_clean && offset.fsck_clean);
        assert!(
            offset.layout.readdir_locality >= 0.99,
            "{:?}",
            offset.layout
        );
        assert!(off.layout.readdir_locality < 0.9, "{:?}", off.layout);
        let cp = |r: &Run| r.step("cp -a").unwrap().modeled_ms;
        let rm = |r: &Run| r.step("rm -rf").unwrap().modeled_ms;
        assert!(
            offset.layout.data_locality > off.layout.data_locality + 0.1,
            "data follows inodes: {:?}",
            offset.layout
        );
        assert!(
            cp(&offset) < cp(&off),
            "cp -a: offset {} ms, off {} ms",
            cp(&offset),
            cp(&off)
        );
        assert!(
            rm(&offset) < rm(&off),
            "rm -rf: offset {} ms, off {} ms",
            rm(&offset),
            rm(&off)
        );
        let again = run(&m, 6000, InodeOrder::Offset, true, 1).unwrap();
        for (a, b) in again.steps.iter().zip(&offset.steps) {
            assert_eq!(
                a.modeled_ms.to_bits(),
                b.modeled_ms.to_bits(),
                "{} repeats exactly",
                a.name
            );
        }
    }
}
