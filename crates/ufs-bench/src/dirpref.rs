//! Seed `000_*`'s experiment: extract a ports-like tree and remove it with
//! `rm -rf`, under the traditional and Orlov directory placement, on file
//! systems shaped like the seed's two test systems, timed on a modeled disk
//! with a cold cache.
//!
//! The systems (seed 000): (1) 8 GB, 991 cylinder groups, on an IDE disk
//! of the time, 128 MB of memory with 35% buffer cache; (2) 40 GB, 5,324
//! groups, on an IBM DTLA-307045, 128 MB with 50% buffer cache. Both 8 KB
//! blocks, 1 KB fragments, 8 MB groups. Here the group count is exact (size
//! = groups × 8 MiB), the buffer cache is bounded to 44.8 MB and 64 MB, the
//! host's read-ahead layer is off (the drive's own track buffer is
//! modeled), and dirhash is off (OpenBSD of December 2000 had none).
//!
//! Invariants: each run starts from a fresh file system on a sparse memory
//! device under the modeled disk, so the same configuration gives the same
//! modeled figures every time; the timed phases end with a sync, so delayed
//! writes are paid inside the phase that made them; every image is checked
//! with fsck at the end and the result recorded.
use crate::tree::{Kind, Tree};
use crate::Progress;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;
use ufs::dev::model::{preset, DiskStats, ModeledDisk};
use ufs::dev::{BlockDevice, SparseDevice};
use ufs::fs::DirPref;
use ufs::newfs::{newfs, NewfsParams};
use ufs::{Cred, Fs, MountOptions};

const MIB: u64 = 1 << 20;

/// One of the seed's test systems.
#[derive(Debug, Clone, serde::Serialize)]
pub struct System {
    pub name: String,
    pub disk: String,
    pub groups: u64,
    pub cache_bytes: u64,
    /// The seed's "normal mode" figures: extract old/new, rm old/new (s).
    pub seed_normal: [f64; 4],
}

pub fn systems() -> Vec<System> {
    vec![
        System {
            name: "8 GB, 991 groups, 35% of 128 MB cache".into(),
            disk: "ide-20g-2001".into(),
            groups: 991,
            cache_bytes: 128 * MIB * 35 / 100,
            seed_normal: [667.0, 472.0, 477.0, 331.0],
        },
        System {
            name: "40 GB, 5,324 groups, 50% of 128 MB cache".into(),
            disk: "dtla-307045".into(),
            groups: 5324,
            cache_bytes: 64 * MIB,
            seed_normal: [329.0, 81.0, 263.5, 93.5],
        },
    ]
}

/// One extraction and removal.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Run {
    pub system: String,
    pub policy: String,
    pub tree: String,
    pub groups: u64,
    pub extract_ms: f64,
    pub rm_ms: f64,
    pub extract_disk: DiskStats,
    pub rm_disk: DiskStats,
    /// Cylinder groups holding at least one directory of the tree.
    pub dir_groups: u64,
    pub wall_s: f64,
    pub fsck_clean: bool,
}

pub fn policy_name(p: DirPref) -> &'static str {
    match p {
        DirPref::Orlov => "orlov",
        DirPref::Traditional => "traditional",
    }
}

/// Creates every entry of `tree` under `root`, in archive order; returns
/// the inode of each directory created.
pub fn extract<'t>(fs: &Fs, root: u64, tree: &'t Tree) -> ufs::Result<HashMap<&'t str, u64>> {
    let mut inos: HashMap<&str, u64> = HashMap::new();
    let data = vec![b'x'; 65536];
    for e in &tree.entries {
        let (parent, name) = match e.path.rsplit_once('/') {
            Some((p, n)) => (*inos.get(p).unwrap_or(&root), n),
            None => (root, e.path.as_str()),
        };
        match e.kind {
            Kind::Dir => {
                let a = fs.mkdir(parent, name.as_bytes(), 0o755, Cred::ROOT)?;
                inos.insert(&e.path, a.ino);
            }
            Kind::File(size) => {
                let a = fs.mknod(parent, name.as_bytes(), 0o100644, 0, Cred::ROOT)?;
                let mut off = 0;
                while off < size {
                    let n = (size - off).min(data.len() as u64) as usize;
                    fs.write(a.ino, off, &data[..n], Cred::ROOT)?;
                    off += n as u64;
                }
            }
        }
    }
    Ok(inos)
}

/// `rm -rf parent/name`, as fts does it: depth first in directory order.
pub fn remove(fs: &Fs, parent: u64, name: &[u8]) -> ufs::Result<()> {
    let a = fs.lookup(parent, name)?;
    if a.kind != ufs::FileKind::Dir {
        return fs.unlink(parent, name);
    }
    let entries = fs.readdir(a.ino, 0, usize::MAX)?;
    for e in entries {
        if e.name == b"." || e.name == b".." {
            continue;
        }
        if e.dtype == ufs_format::dinode::dt::DT_DIR {
            remove(fs, a.ino, &e.name)?;
        } else {
            fs.unlink(a.ino, &e.name)?;
        }
    }
    fs.rmdir(parent, name)
}

/// The file system of `sys` on its modeled disk, freshly made.
pub fn make_system(sys: &System, policy: DirPref, seed: u64) -> ufs::Result<(Arc<ModeledDisk<SparseDevice>>, Fs, u64)> {
    let spec = preset(&sys.disk).ok_or_else(|| ufs::Error::new(ufs::ErrorKind::Invalid, format!("no disk model {}", sys.disk)))?;
    let size = sys.groups * 8 * MIB;
    let dev = Arc::new(ModeledDisk::new(SparseDevice::new(size), spec, false)?);
    let params = NewfsParams {
        bsize: 8192,
        fsize: 1024,
        density: Some(4096),
        maxblkspercg: Some(8192),
        seed: Some(1),
        time: Some(1_000_000_000),
        ..Default::default()
    };
    let report = newfs(&*dev, &params)?;
    let mut opts = MountOptions { dirpref: policy, cache_bytes: sys.cache_bytes, readahead: 0, seed: Some(seed), ..Default::default() };
    opts.dirhash.enabled = false;
    let fs = Fs::open(Box::new(dev.clone()), opts)?;
    Ok((dev, fs, report.ncg))
}

/// Extraction then `rm -rf` of `tree` on `sys` under `policy`.
pub fn run(sys: &System, policy: DirPref, tree: &Tree, tree_name: &str, seed: u64) -> ufs::Result<Run> {
    let wall = Instant::now();
    let (dev, fs, groups) = make_system(sys, policy, seed)?;
    let root = fs.root();
    fs.drop_caches()?;
    let s0 = ModeledDisk::disk_stats(&dev);
    let dirs = extract(&fs, root, tree)?;
    fs.sync()?;
    let s1 = ModeledDisk::disk_stats(&dev);
    let ipg = fs.with_core(|c| c.g.ipg);
    let dir_groups = dirs.values().map(|ino| ino / ipg).collect::<std::collections::BTreeSet<_>>().len() as u64;
    fs.drop_caches()?;
    let s2 = ModeledDisk::disk_stats(&dev);
    let top = tree.entries.first().map(|e| e.path.clone()).unwrap_or_default();
    remove(&fs, root, top.as_bytes())?;
    fs.sync()?;
    let s3 = ModeledDisk::disk_stats(&dev);
    fs.unmount()?;
    drop(fs);
    let fsck_clean = ufs::fsck::fsck(&*dev as &dyn BlockDevice, ufs::fsck::FsckMode::Check)?.findings.is_empty();
    let (extract_disk, rm_disk) = (s1.since(&s0), s3.since(&s2));
    Ok(Run {
        system: sys.name.clone(),
        policy: policy_name(policy).into(),
        tree: tree_name.into(),
        groups,
        extract_ms: extract_disk.busy_ms,
        rm_ms: rm_disk.busy_ms,
        extract_disk,
        rm_disk,
        dir_groups,
        wall_s: wall.elapsed().as_secs_f64(),
        fsck_clean,
    })
}

/// Every system × both policies.
pub fn run_all(systems: &[System], tree: &Tree, tree_name: &str, seed: u64, progress: Progress) -> ufs::Result<Vec<Run>> {
    let total = systems.len() as u64 * 2;
    let mut out = Vec::new();
    for sys in systems {
        for policy in [DirPref::Traditional, DirPref::Orlov] {
            progress(out.len() as u64, total, &format!("{} / {}", sys.name, policy_name(policy)));
            out.push(run(sys, policy, tree, tree_name, seed)?);
        }
    }
    progress(total, total, "done");
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::ports_tree;

    /// A small system and a prefix of the ports tree (still in archive
    /// order): the direction of the seed's result, quickly.
    fn small() -> (System, Tree) {
        let sys = System { name: "small".into(), disk: "ide-20g-2001".into(), groups: 200, cache_bytes: 4 * MIB, seed_normal: [0.0; 4] };
        let mut t = ports_tree(3);
        t.entries.truncate(3000);
        (sys, t)
    }

    #[test]
    fn orlov_beats_traditional_and_runs_repeat_exactly() {
        let (sys, t) = small();
        let old = run(&sys, DirPref::Traditional, &t, "ports-prefix", 1).unwrap();
        let new = run(&sys, DirPref::Orlov, &t, "ports-prefix", 1).unwrap();
        assert!(old.fsck_clean && new.fsck_clean);
        assert!(new.extract_ms < old.extract_ms, "extract: orlov {} ms, traditional {} ms", new.extract_ms, old.extract_ms);
        assert!(new.rm_ms < old.rm_ms, "rm: orlov {} ms, traditional {} ms", new.rm_ms, old.rm_ms);
        assert!(new.dir_groups < old.dir_groups, "orlov spreads over {} groups, traditional {}", new.dir_groups, old.dir_groups);
        let again = run(&sys, DirPref::Orlov, &t, "ports-prefix", 1).unwrap();
        assert_eq!(again.extract_ms.to_bits(), new.extract_ms.to_bits());
        assert_eq!(again.rm_ms.to_bits(), new.rm_ms.to_bits());
    }
}
