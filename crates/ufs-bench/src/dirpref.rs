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
use ufs::dev::{BlockDevice, SparseDevice};
use ufs::fs::DirPref;
use ufs::newfs::{newfs, NewfsParams};
use ufs::{Cred, Fs, Ino, MountOptions};
use ufs_sim::model::{preset, DiskStats, ModeledDisk};

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

/// Creates file `name` of `size` bytes in `parent`; returns its inode.
fn create_file(fs: &Fs, parent: Ino, name: &str, size: u64) -> ufs::Result<Ino> {
    static DATA: [u8; 65536] = [b'x'; 65536];
    let a = fs.mknod(parent, name.as_bytes(), 0o100644, 0, Cred::ROOT)?;
    let mut off = 0;
    while off < size {
        let n = (size - off).min(DATA.len() as u64) as usize;
        fs.write(a.ino, off, &DATA[..n], Cred::ROOT)?;
        off += n as u64;
    }
    Ok(a.ino)
}

/// Creates every entry of `tree` under `root`, in archive order; returns
/// the inode of each directory created.
pub fn extract<'t>(fs: &Fs, root: Ino, tree: &'t Tree) -> ufs::Result<HashMap<&'t str, Ino>> {
    let mut inos: HashMap<&str, Ino> = HashMap::new();
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
                create_file(fs, parent, name, size)?;
            }
        }
    }
    Ok(inos)
}

/// `rm -rf parent/name`, as fts does it: depth first in directory order.
pub fn remove(fs: &Fs, parent: Ino, name: &[u8]) -> ufs::Result<()> {
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
pub fn make_system(
    sys: &System,
    policy: DirPref,
    seed: u64,
) -> ufs::Result<(Arc<ModeledDisk<SparseDevice>>, Fs, u64)> {
    let spec = preset(&sys.disk).ok_or_else(|| {
        ufs::Error::new(
            ufs::ErrorKind::Invalid,
            format!("no disk model {}", sys.disk),
        )
    })?;
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
    let mut opts = MountOptions {
        dirpref: policy,
        cache_bytes: sys.cache_bytes,
        readahead: 0,
        seed: Some(seed),
        // Measured with every write delayed (the write modes are compared
        // by `bench writeorder`).
        write_mode: Some(ufs::order::WriteMode::Async),
        ..Default::default()
    };
    opts.dirhash.enabled = false;
    let fs = Fs::open(Box::new(dev.clone()), opts)?;
    Ok((dev, fs, report.ncg))
}

/// The removal step and the end of a run: cold cache, `rm -rf` of the
/// tree's top directory, sync, unmount, fsck. Returns what the removal
/// cost the disk and whether the image is clean.
fn remove_and_check(
    dev: &Arc<ModeledDisk<SparseDevice>>,
    fs: Fs,
    tree: &Tree,
) -> ufs::Result<(DiskStats, bool)> {
    fs.drop_caches()?;
    let s0 = ModeledDisk::disk_stats(dev);
    let top = tree
        .entries
        .first()
        .map(|e| e.path.clone())
        .unwrap_or_default();
    remove(&fs, fs.root(), top.as_bytes())?;
    fs.sync()?;
    let rm = ModeledDisk::disk_stats(dev).since(&s0);
    fs.unmount()?;
    drop(fs);
    let clean = ufs::fsck::fsck(&**dev as &dyn BlockDevice, ufs::fsck::FsckMode::Check)?
        .findings
        .is_empty();
    Ok((rm, clean))
}

/// Extraction then `rm -rf` of `tree` on `sys` under `policy`.
pub fn run(
    sys: &System,
    policy: DirPref,
    tree: &Tree,
    tree_name: &str,
    seed: u64,
) -> ufs::Result<Run> {
    let wall = Instant::now();
    let (dev, fs, groups) = make_system(sys, policy, seed)?;
    let root = fs.root();
    fs.drop_caches()?;
    let s0 = ModeledDisk::disk_stats(&dev);
    let dirs = extract(&fs, root, tree)?;
    fs.sync()?;
    let s1 = ModeledDisk::disk_stats(&dev);
    let ipg = fs.geometry().ipg;
    let dir_groups = dirs
        .values()
        .map(|ino| ino.get() / ipg)
        .collect::<std::collections::BTreeSet<_>>()
        .len() as u64;
    let (rm_disk, fsck_clean) = remove_and_check(&dev, fs, tree)?;
    let extract_disk = s1.since(&s0);
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
pub fn run_all(
    systems: &[System],
    tree: &Tree,
    tree_name: &str,
    seed: u64,
    progress: Progress,
) -> ufs::Result<Vec<Run>> {
    let total = systems.len() as u64 * 2;
    let mut out = Vec::new();
    for sys in systems {
        for policy in [DirPref::Traditional, DirPref::Orlov] {
            progress(
                out.len() as u64,
                total,
                &format!("{} / {}", sys.name, policy_name(policy)),
            );
            out.push(run(sys, policy, tree, tree_name, seed)?);
        }
    }
    progress(total, total, "done");
    Ok(out)
}

/// A variant of the directory policy for the tree-first experiment.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Variant {
    pub name: String,
    pub policy: String,
    /// `fs_avgfilesize` and `fs_avgfpdir` (newfs -g / -h, tunefs -f / -s).
    pub avgfilesize: u32,
    pub avgfpdir: u32,
    pub contigdirs: bool,
}

/// The variants the seed's worry calls for: FFS's defaults, the values
/// that describe the ports tree (1 KB files, 2 per directory), and Orlov
/// without its `fs_contigdirs` limit; the traditional policy beside them.
pub fn fill_variants() -> Vec<Variant> {
    let v = |name: &str, policy: &str, f: u32, d: u32, c: bool| Variant {
        name: name.into(),
        policy: policy.into(),
        avgfilesize: f,
        avgfpdir: d,
        contigdirs: c,
    };
    vec![
        v("traditional", "traditional", 16384, 64, true),
        v(
            "orlov, defaults (16 KB files, 64 per dir)",
            "orlov",
            16384,
            64,
            true,
        ),
        v(
            "orlov, tuned to the tree (1 KB, 2 per dir)",
            "orlov",
            1024,
            2,
            true,
        ),
        v("orlov, no contigdirs limit", "orlov", 16384, 64, false),
    ]
}

/// How one variant did on the tree-first extraction.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FillRun {
    pub system: String,
    pub variant: Variant,
    /// `mkdir -p` of every directory, then the files in archive order.
    pub mkdirs_ms: f64,
    pub fill_ms: f64,
    /// The same tree extracted in archive order (directories and files
    /// interleaved), for comparison.
    pub interleaved_ms: f64,
    pub rm_ms: f64,
    pub dir_groups: u64,
    /// Share of files whose inode is in their directory's group.
    pub files_with_dir: f64,
    /// Largest number of directories in one group.
    pub max_dirs_per_group: u64,
    pub fsck_clean: bool,
}

fn make_variant(
    sys: &System,
    v: &Variant,
    seed: u64,
) -> ufs::Result<(Arc<ModeledDisk<SparseDevice>>, Fs)> {
    let spec = preset(&sys.disk).ok_or_else(|| {
        ufs::Error::new(
            ufs::ErrorKind::Invalid,
            format!("no disk model {}", sys.disk),
        )
    })?;
    let dev = Arc::new(ModeledDisk::new(
        SparseDevice::new(sys.groups * 8 * MIB),
        spec,
        false,
    )?);
    let params = NewfsParams {
        bsize: 8192,
        fsize: 1024,
        density: Some(4096),
        maxblkspercg: Some(8192),
        avgfilesize: v.avgfilesize,
        avgfpdir: v.avgfpdir,
        seed: Some(1),
        time: Some(1_000_000_000),
        ..Default::default()
    };
    newfs(&*dev, &params)?;
    let policy = if v.policy == "traditional" {
        DirPref::Traditional
    } else {
        DirPref::Orlov
    };
    let mut opts = MountOptions {
        dirpref: policy,
        cache_bytes: sys.cache_bytes,
        readahead: 0,
        seed: Some(seed),
        // Measured with every write delayed (the write modes are compared
        // by `bench writeorder`).
        write_mode: Some(ufs::order::WriteMode::Async),
        contigdirs: v.contigdirs,
        ..Default::default()
    };
    opts.dirhash.enabled = false;
    let fs = Fs::open(Box::new(dev.clone()), opts)?;
    Ok((dev, fs))
}

/// Seed 000's worry: a program that creates its whole directory tree first
/// and fills it later. Orlov keeps a child directory near its parent only
/// while the group has room for the files it expects (`fs_avgfilesize` ×
/// `fs_avgfpdir`) and at most `maxcontigdirs` directories in a row
/// (`fs_contigdirs`); with no files in between, the limits decide.
pub fn fill_run(sys: &System, v: &Variant, tree: &Tree, seed: u64) -> ufs::Result<FillRun> {
    // Interleaved extraction on a fresh file system, for comparison.
    let interleaved_ms = {
        let (dev, fs) = make_variant(sys, v, seed)?;
        fs.drop_caches()?;
        let s0 = ModeledDisk::disk_stats(&dev);
        extract(&fs, fs.root(), tree)?;
        fs.sync()?;
        ModeledDisk::disk_stats(&dev).since(&s0).busy_ms
    };
    let (dev, fs) = make_variant(sys, v, seed)?;
    let root = fs.root();
    let dirs_only = Tree {
        entries: tree
            .entries
            .iter()
            .filter(|e| e.kind == Kind::Dir)
            .cloned()
            .collect(),
    };
    fs.drop_caches()?;
    let s0 = ModeledDisk::disk_stats(&dev);
    let dirs = extract(&fs, root, &dirs_only)?;
    fs.sync()?;
    let s1 = ModeledDisk::disk_stats(&dev);
    fs.drop_caches()?;
    let s2 = ModeledDisk::disk_stats(&dev);
    let ipg = fs.geometry().ipg;
    let (mut with_dir, mut files) = (0u64, 0u64);
    for e in &tree.entries {
        let Kind::File(size) = e.kind else { continue };
        let (parent, name) = match e.path.rsplit_once('/') {
            Some((p, n)) => (*dirs.get(p).unwrap_or(&root), n),
            None => (root, e.path.as_str()),
        };
        let ino = create_file(&fs, parent, name, size)?;
        files += 1;
        if ino.get() / ipg == parent.get() / ipg {
            with_dir += 1;
        }
    }
    fs.sync()?;
    let s3 = ModeledDisk::disk_stats(&dev);
    let mut per_group: HashMap<u64, u64> = HashMap::new();
    for ino in dirs.values() {
        *per_group.entry(ino.get() / ipg).or_default() += 1;
    }
    let (rm, fsck_clean) = remove_and_check(&dev, fs, tree)?;
    Ok(FillRun {
        system: sys.name.clone(),
        variant: v.clone(),
        mkdirs_ms: s1.since(&s0).busy_ms,
        fill_ms: s3.since(&s2).busy_ms,
        interleaved_ms,
        rm_ms: rm.busy_ms,
        dir_groups: per_group.len() as u64,
        files_with_dir: if files == 0 {
            1.0
        } else {
            with_dir as f64 / files as f64
        },
        max_dirs_per_group: per_group.values().copied().max().unwrap_or(0),
        fsck_clean,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::ports_tree;

    /// A small system and a prefix of the ports tree (still in archive
    /// order): the direction of the seed's result, quickly.
    fn small() -> (System, Tree) {
        let sys = System {
            name: "small".into(),
            disk: "ide-20g-2001".into(),
            groups: 200,
            cache_bytes: 4 * MIB,
            seed_normal: [0.0; 4],
        };
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
        assert!(
            new.extract_ms < old.extract_ms,
            "extract: orlov {} ms, traditional {} ms",
            new.extract_ms,
            old.extract_ms
        );
        assert!(
            new.rm_ms < old.rm_ms,
            "rm: orlov {} ms, traditional {} ms",
            new.rm_ms,
            old.rm_ms
        );
        assert!(
            new.dir_groups < old.dir_groups,
            "orlov spreads over {} groups, traditional {}",
            new.dir_groups,
            old.dir_groups
        );
        let again = run(&sys, DirPref::Orlov, &t, "ports-prefix", 1).unwrap();
        assert_eq!(again.extract_ms.to_bits(), new.extract_ms.to_bits());
        assert_eq!(again.rm_ms.to_bits(), new.rm_ms.to_bits());
    }

    #[test]
    fn tree_first_limits_keep_files_near_their_directories() {
        let (sys, t) = small();
        let vs = fill_variants();
        let runs: Vec<FillRun> = vs
            .iter()
            .map(|v| fill_run(&sys, v, &t, 1).unwrap())
            .collect();
        assert!(runs.iter().all(|r| r.fsck_clean));
        let by = |p: &str| runs.iter().find(|r| r.variant.name.starts_with(p)).unwrap();
        let (trad, dflt, nolimit) = (
            by("traditional"),
            by("orlov, defaults"),
            by("orlov, no contigdirs"),
        );
        // Without the limit, Orlov packs the directories made in a row into
        // few groups; with it, they spread.
        assert!(
            nolimit.max_dirs_per_group > dflt.max_dirs_per_group,
            "{nolimit:?} {dflt:?}"
        );
        assert!(dflt.dir_groups > nolimit.dir_groups);
        // Orlov still fills faster than the traditional spread.
        assert!(dflt.fill_ms < trad.fill_ms, "{dflt:?} {trad:?}");
    }
}
