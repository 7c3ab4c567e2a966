//! Layout measures of one directory: how well the order in which programs
//! walk it matches the order of its inodes on disk (seed `001_*`), and how
//! close each file's data lies to its inode.
//!
//! - readdir locality: over the entries in directory (readdir) order, the
//!   fraction of adjacent pairs whose inode numbers increase, as
//!   `shared/tools/corr.py` defines it (0.5 random, 1.0 inode order);
//! - name locality: the same in sorted-name order (what `ls -l` and rsync
//!   walk);
//! - data locality: over the files in inode order, the fraction of adjacent
//!   pairs whose first data blocks increase (reading inodes in order then
//!   reads data forwards), and the share of files whose first data block is
//!   in the same cylinder group as the inode.
//!
//! Invariants: measuring only reads (the file system may be read-only);
//! `.` and `..` are not counted; fewer than two entries give 1.0.
use crate::error::Result;
use crate::ops::Fs;
use crate::{Frag, Ino};

#[derive(Debug, Clone, serde::Serialize)]
pub struct LayoutReport {
    pub dir_ino: Ino,
    pub entries: u64,
    pub readdir_locality: f64,
    pub name_locality: f64,
    /// Entries with at least one data block.
    pub files_with_data: u64,
    pub data_locality: f64,
    pub same_group_data: f64,
    /// Cylinder groups holding the entries' inodes.
    pub inode_groups: u64,
}

/// Fraction of adjacent pairs that increase.
pub fn ascending(v: &[u64]) -> f64 {
    if v.len() < 2 {
        return 1.0;
    }
    v.windows(2).filter(|w| w[1] > w[0]).count() as f64 / (v.len() - 1) as f64
}

/// Measures directory `dir`.
pub fn measure(fs: &Fs, dir: Ino) -> Result<LayoutReport> {
    let mut ents: Vec<(Vec<u8>, Ino)> = fs
        .readdir(dir, 0, usize::MAX)?
        .into_iter()
        .filter(|e| e.name != b"." && e.name != b"..")
        .map(|e| (e.name, e.ino))
        .collect();
    let readdir: Vec<u64> = ents.iter().map(|e| e.1.get()).collect();
    ents.sort();
    let by_name: Vec<u64> = ents.iter().map(|e| e.1.get()).collect();
    let mut inos = readdir.clone();
    inos.sort_unstable();
    let g = fs.geometry();
    let (ipg, fpg) = (g.ipg, g.fpg);
    let mut firsts = Vec::new();
    let mut same = 0u64;
    for &ino in &inos {
        let first = (|| -> Result<Frag> {
            let di = fs.inode(Ino::new(ino))?;
            // Device nodes keep their number in the first pointer, and short
            // symlinks their target: only blocks that hold data count.
            if !(di.is_reg() || di.is_dir() || (di.is_symlink() && di.di_blocks() > 0)) {
                return Ok(Frag::NONE);
            }
            fs.block_of(Ino::new(ino), 0)
        })()?;
        if !first.is_none() {
            firsts.push(first.get());
            if first.get() / fpg == ino / ipg {
                same += 1;
            }
        }
    }
    let mut groups: Vec<u64> = inos.iter().map(|i| i / ipg).collect();
    groups.dedup();
    Ok(LayoutReport {
        dir_ino: dir,
        entries: readdir.len() as u64,
        readdir_locality: ascending(&readdir),
        name_locality: ascending(&by_name),
        files_with_data: firsts.len() as u64,
        data_locality: ascending(&firsts),
        same_group_data: if firsts.is_empty() {
            1.0
        } else {
            same as f64 / firsts.len() as f64
        },
        inode_groups: groups.len() as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dev::MemDevice;
    use crate::newfs::{newfs, NewfsParams};
    use crate::{Cred, MountOptions};
    use std::sync::Arc;

    #[test]
    fn fresh_directory_follows_inode_order_and_reverse_names_do_not() {
        let dev = Arc::new(MemDevice::new(64 << 20));
        newfs(
            &*dev,
            &NewfsParams {
                seed: Some(1),
                time: Some(1),
                ..Default::default()
            },
        )
        .unwrap();
        let fs = Fs::open(
            Box::new(dev.clone()),
            MountOptions {
                seed: Some(1),
                ..Default::default()
            },
        )
        .unwrap();
        let d = fs.mkdir(fs.root(), b"d", 0o755, Cred::ROOT).unwrap().ino;
        // Created in reverse name order: directory order follows inodes,
        // sorted-name order runs against them.
        for i in (0..200).rev() {
            let a = fs
                .mknod(d, format!("f{i:04}").as_bytes(), 0o100644, 0, Cred::ROOT)
                .unwrap();
            fs.write(a.ino, 0, &[1u8; 100], Cred::ROOT).unwrap();
        }
        fs.mknod(d, b"fifo", 0o010644, 0, Cred::ROOT).unwrap();
        let r = measure(&fs, d).unwrap();
        assert_eq!(r.entries, 201);
        assert_eq!(r.readdir_locality, 1.0);
        assert!(r.name_locality < 0.01, "{}", r.name_locality);
        assert_eq!(r.files_with_data, 200, "the fifo has no data block");
        assert!(r.data_locality > 0.9 && r.same_group_data == 1.0, "{r:?}");
        assert_eq!(r.inode_groups, 1);
    }

    #[test]
    fn ascending_counts_increasing_pairs() {
        assert_eq!(ascending(&[]), 1.0);
        assert_eq!(ascending(&[5]), 1.0);
        assert_eq!(ascending(&[1, 2, 3, 4]), 1.0);
        assert_eq!(ascending(&[4, 3, 2, 1]), 0.0);
        assert_eq!(ascending(&[1, 3, 2, 4, 5]), 0.75);
    }
}
