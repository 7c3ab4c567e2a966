//! newfs end to end: images are re-read with the engine's superblock reader
//! and checked by an independent pass-5 style rebuild of every group's maps
//! and counters from what the file system is known to contain.
use std::collections::BTreeSet;
use std::time::Instant;
use ufs::dev::{BlockDevice, FileDevice, MemDevice};
use ufs::newfs::{newfs, newfs_plan, NewfsParams, NewfsReport};
use ufs::{ErrorKind, Ino};
use ufs_format::dinode::{dt, IFDIR};
use ufs_format::sb::{Csum, CsumTotal};
use ufs_format::*;

const T: i64 = 1_700_000_000;

fn params(size: Option<u64>) -> NewfsParams {
    NewfsParams {
        size,
        time: Some(T),
        seed: Some(7),
        ..Default::default()
    }
}

fn read(dev: &dyn BlockDevice, off: u64, len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len];
    dev.read_at(off, &mut b).unwrap();
    b
}

fn read_inode(dev: &dyn BlockDevice, g: &Geometry, ino: u64) -> Dinode {
    Dinode::decode(g.v, &inode_bytes(dev, g, ino))
}

/// Inode `ino` as stored.
fn inode_bytes(dev: &dyn BlockDevice, g: &Geometry, ino: u64) -> Vec<u8> {
    let ds = g.dinode_size();
    let off = g.ino_to_fsba(ino) * g.fsize + g.ino_to_fsbo(ino) * ds as u64;
    read(dev, off, ds)
}

fn ckhash_ok(dev: &dyn BlockDevice, g: &Geometry, ino: u64) -> bool {
    Dinode::ckhash_mismatch(g.v, &inode_bytes(dev, g, ino)).is_none()
}

struct Checked {
    sb: Superblock,
    g: Geometry,
}

/// Verifies everything fsck_ffs would look at in a fresh file system.
fn check_image(dev: &dyn BlockDevice, p: &NewfsParams, r: &NewfsReport) -> Checked {
    let (sb, g, loc) = ufs::fs::read_superblock(dev).expect("superblock");
    assert_eq!(loc, SBLOCK_UFS2);
    assert_eq!(sb.fs_magic(), FS_UFS2_MAGIC);
    assert_eq!(sb.fs_sblockactualloc(), SBLOCK_UFS2 as i64);
    assert_eq!(sb.fs_sblockloc(), SBLOCK_UFS2 as i64);
    assert_eq!(
        (sb.fs_clean(), sb.fs_fmod(), sb.fs_ronly(), sb.fs_state()),
        (1, 0, 0, 0)
    );
    assert_eq!(sb.fs_old_flags(), FS_FLAGS_UPDATED as u8);
    assert_eq!(sb.fs_flags() & FS_DOSOFTDEP != 0, p.softupdates);
    assert_eq!(sb.fs_flags() & !(FS_DOSOFTDEP | FS_METACKHASH), 0);
    if p.ckhash {
        assert_eq!(sb.fs_flags() & FS_METACKHASH, FS_METACKHASH);
        assert_eq!(sb.fs_metackhash(), CK_SUPERBLOCK | CK_CYLGRP | CK_INODE);
        assert_eq!(sb.compute_ckhash(), sb.fs_ckhash());
    } else {
        assert_eq!((sb.fs_flags() & FS_METACKHASH, sb.fs_metackhash()), (0, 0));
    }
    assert_eq!(sb.fs_volname(), p.volname);
    assert_eq!(
        (r.ncg, r.fpg, r.ipg, r.size_frags, r.bsize, r.fsize),
        (g.ncg, g.fpg, g.ipg, g.size, g.bsize, g.fsize)
    );
    assert_eq!(sb.fs_old_cgmask(), 0);
    assert_eq!(sb.fs_maxbsize() as u64, g.bsize);
    assert_eq!(sb.fs_avgfilesize(), p.avgfilesize);
    assert_eq!(sb.fs_avgfpdir(), p.avgfpdir);
    assert_eq!(sb.fs_time(), T);
    assert_eq!(sb.fs_id0(), T as i32);
    assert_ne!(sb.fs_id1(), 0);
    assert_eq!(sb.fs_providersize() as u64, dev.size() / g.fsize);
    assert_eq!(sb.fs_maxcontig() as u64, (1_048_576 / g.bsize).max(1));
    assert_eq!(sb.fs_cstotal().cs_numclusters, 0);
    assert_eq!(
        sb.as_bytes()[728..856].iter().filter(|&&b| b != 0).count(),
        0,
        "fs_ocsp/fs_si must be zero"
    );
    // Geometry rules FreeBSD's validate_sblock has that ours may not.
    let csfrags = g.numfrags(g.cssize);
    assert_eq!(g.csaddr, g.dblkno);
    assert!(
        g.dtog(g.csaddr + csfrags) == 0,
        "summary area must end inside group 0"
    );
    assert!(g.metaspace <= g.fpg / 2);
    assert_eq!(g.maxfilesize, {
        let n = g.nindir;
        g.bsize * 12 - 1 + g.bsize * n + g.bsize * n * n + g.bsize * n * n * n
    });

    // Directories.
    let snap = !p.no_snap;
    let root = read_inode(dev, &g, 2);
    assert_eq!(root.di_mode(), IFDIR | 0o755);
    assert_eq!(root.nlink(), if snap { 3 } else { 2 });
    assert_eq!(
        (
            root.di_uid(),
            root.di_gid(),
            root.di_size(),
            root.di_blocks()
        ),
        (0, 0, 512, g.fsize / 512)
    );
    assert_eq!(
        (
            root.di_mtime(),
            root.di_ctime(),
            root.di_atime(),
            root.di_birthtime()
        ),
        (T, T, T, T)
    );
    assert_eq!(root.di_freelink(), 0, "root dirdepth");
    if p.ckhash {
        assert!(ckhash_ok(dev, &g, 2));
    }
    let mut dirfrags = vec![root.di_db(0)];
    let chunk = read(dev, root.di_db(0) * g.fsize, g.fsize as usize);
    let e = ufs_format::dir::parse_chunk(g.v.endian, &chunk[..512], &|| "root".into()).unwrap();
    let names: Vec<(u32, Vec<u8>, u8)> =
        e.iter().map(|e| (e.ino, e.name.clone(), e.dtype)).collect();
    let mut want = vec![
        (2, b".".to_vec(), dt::DT_DIR),
        (2, b"..".to_vec(), dt::DT_DIR),
    ];
    if snap {
        want.push((3, b".snap".to_vec(), dt::DT_DIR));
    }
    assert_eq!(names, want);
    assert_eq!(
        (e[0].reclen, e[1].reclen),
        (12, if snap { 12 } else { 500 })
    );
    assert!(chunk[512..].iter().all(|&b| b == 0));
    if snap {
        let s = read_inode(dev, &g, 3);
        assert_eq!(s.di_mode(), IFDIR | 0o775);
        assert_eq!(
            (
                s.nlink(),
                s.di_uid(),
                s.di_gid(),
                s.di_size(),
                s.di_blocks()
            ),
            (2, 0, 5, 512, g.fsize / 512)
        );
        assert_eq!(s.di_freelink(), 1, ".snap dirdepth");
        if p.ckhash {
            assert!(ckhash_ok(dev, &g, 3));
        }
        let chunk = read(dev, s.di_db(0) * g.fsize, 512);
        let e = ufs_format::dir::parse_chunk(g.v.endian, &chunk, &|| "snap".into()).unwrap();
        let names: Vec<(u32, Vec<u8>, u16)> = e
            .iter()
            .map(|e| (e.ino, e.name.clone(), e.reclen))
            .collect();
        assert_eq!(
            names,
            vec![(3, b".".to_vec(), 12), (2, b"..".to_vec(), 500)]
        );
        dirfrags.push(s.di_db(0));
        assert!(g.dtog(s.di_db(0)) == 0);
    }
    for &f in &dirfrags {
        assert!(
            f >= g.csaddr + csfrags && f < g.fpg,
            "directory fragment {f} in group 0's data area"
        );
    }
    let dirfrags: BTreeSet<u64> = dirfrags.into_iter().collect();

    // Summary area.
    let sum = read(dev, g.csaddr * g.fsize, g.cssize as usize);
    assert!(sum[g.ncg as usize * 16..].iter().all(|&b| b == 0));

    // Every group, rebuilt from scratch.
    let mut tot = CsumTotal::default();
    let inopb = g.inopb;
    let initediblk = g.ipg.min(2 * inopb);
    let mut sample_inodes = 0;
    // Groups 1..ncg-1 are all alike; a sample is rebuilt bit by bit, the
    // others must equal group 1 except for cg_cgx and cg_ckhash.
    let mut reference: Option<Vec<u8>> = None;
    let without_id = |b: &[u8]| {
        let mut v = b.to_vec();
        v[12..16].fill(0);
        v[132..136].fill(0);
        v
    };
    for c in 0..g.ncg {
        let b = read(dev, g.cgtod(c) * g.fsize, g.cgsize as usize);
        let cg = Cg::parse(&b, &g, c).unwrap();
        if p.ckhash {
            assert_eq!(cg.compute_ckhash(), cg.cg_ckhash(), "cg {c} hash");
        } else {
            assert_eq!(cg.cg_ckhash(), 0);
        }
        let sampled = c < 3 || c + 1 == g.ncg || c % 97 == 0;
        if !sampled {
            if let Some(r) = &reference {
                assert!(without_id(&b) == *r, "cg {c} differs from cg 1");
                let cs = cg.cg_cs();
                assert_eq!(
                    Csum::read(g.v.endian, &sum, c as usize * 16),
                    cs,
                    "cg {c} summary entry"
                );
                tot.cs_ndir += cs.cs_ndir as i64;
                tot.cs_nbfree += cs.cs_nbfree as i64;
                tot.cs_nifree += cs.cs_nifree as i64;
                tot.cs_nffree += cs.cs_nffree as i64;
                continue;
            }
        }
        if c == 1 && g.ncg > 2 {
            reference = Some(without_id(&b));
        }
        let base = g.cgbase(c);
        let ndblk = g.cg_nfrags(c);
        assert_eq!(cg.cg_ndblk() as u64, ndblk);
        assert_eq!(
            (cg.cg_niblk() as u64, cg.cg_initediblk() as u64),
            (g.ipg, initediblk)
        );
        assert_eq!(cg.cg_time(), T);
        assert_eq!(
            (
                cg.cg_rotor(),
                cg.cg_frotor(),
                cg.cg_irotor(),
                cg.cg_old_btotoff(),
                cg.cg_old_boff()
            ),
            (0, 0, 0, 0, 0)
        );
        assert_eq!(cg.cg_iusedoff(), 168);
        // The header layout fsck_ffs pass 5 builds.
        let freeoff = 168 + g.ipg.div_ceil(8);
        let mut next = freeoff + g.fpg.div_ceil(8);
        assert_eq!(cg.cg_freeoff() as u64, freeoff);
        if g.contigsumsize > 0 {
            let so = next.div_ceil(4) * 4 - 4;
            assert_eq!(cg.cg_clustersumoff() as u64, so);
            assert_eq!(cg.cg_clusteroff() as u64, so + 4 * (g.contigsumsize + 1));
            next = so + 4 * (g.contigsumsize + 1) + (g.fpg / g.frag).div_ceil(8);
            assert_eq!(cg.cg_nclusterblks() as u64, ndblk / g.frag);
        }
        assert_eq!(cg.cg_nextfreeoff() as u64, next);
        assert!(
            b[next as usize..].iter().all(|&x| x == 0),
            "cg {c}: bytes after the maps"
        );
        // Fragment map and free counts.
        let used = |f: u64| -> bool {
            if c == 0 {
                f < g.dblkno + csfrags || dirfrags.contains(&(base + f))
            } else {
                (g.sblkno..g.dblkno).contains(&f)
            }
        };
        let (mut nbfree, mut nffree) = (0i64, 0i64);
        let mut frsum = [0u32; 8];
        let mut blockfree = Vec::new();
        for blk in 0..ndblk.div_ceil(g.frag) {
            let mut run = 0;
            let mut all = true;
            let mut runs = Vec::new();
            for i in 0..g.frag {
                let f = blk * g.frag + i;
                let free = f < ndblk && !used(f);
                assert_eq!(cg.frag_free(f), free, "cg {c} frag {f}");
                all &= free;
                if free {
                    run += 1;
                } else if run > 0 {
                    runs.push(run);
                    run = 0;
                }
            }
            if run > 0 {
                runs.push(run);
            }
            blockfree.push(all);
            if all {
                nbfree += 1;
            } else {
                for r in runs {
                    nffree += r as i64;
                    frsum[r] += 1;
                }
            }
        }
        for f in ndblk..g.fpg {
            assert!(
                !cg.frag_free(f),
                "cg {c}: frag {f} past cg_ndblk marked free"
            );
        }
        let cs = cg.cg_cs();
        assert_eq!(
            (cs.cs_nbfree as i64, cs.cs_nffree as i64),
            (nbfree, nffree),
            "cg {c} counts"
        );
        for (i, v) in frsum.iter().enumerate() {
            assert_eq!(cg.cg_frsum(i), *v, "cg {c} frsum[{i}]");
        }
        // Cluster map and summary.
        if g.contigsumsize > 0 {
            let ncl = ndblk / g.frag;
            let mut sums = vec![0i32; g.contigsumsize as usize + 1];
            let mut run = 0u64;
            for blk in 0..g.fpg / g.frag {
                let free = blk < ncl && blockfree[blk as usize];
                assert_eq!(cg.cluster_free(blk), free, "cg {c} cluster bit {blk}");
                if free {
                    run += 1;
                } else if run > 0 {
                    sums[run.min(g.contigsumsize) as usize] += 1;
                    run = 0;
                }
            }
            if run > 0 {
                sums[run.min(g.contigsumsize) as usize] += 1;
            }
            for i in 1..=g.contigsumsize {
                assert_eq!(cg.clustersum(i), sums[i as usize], "cg {c} clustersum[{i}]");
            }
        }
        // Inode map.
        let nused: u64 = if c == 0 {
            2 + if snap { 2 } else { 1 }
        } else {
            0
        };
        for i in 0..g.ipg {
            assert_eq!(cg.inode_used(i), i < nused, "cg {c} inode {i}");
        }
        let ndir = if c == 0 { nused as i32 - 2 } else { 0 };
        assert_eq!(
            (cs.cs_nifree, cs.cs_ndir),
            ((g.ipg - nused) as i32, ndir),
            "cg {c} inode counts"
        );
        assert_eq!(
            Csum::read(g.v.endian, &sum, c as usize * 16),
            cs,
            "cg {c} summary entry"
        );
        tot.cs_ndir += cs.cs_ndir as i64;
        tot.cs_nbfree += cs.cs_nbfree as i64;
        tot.cs_nifree += cs.cs_nifree as i64;
        tot.cs_nffree += cs.cs_nffree as i64;

        // Backup superblock and initialised inodes (a sample of groups).
        if c < 3 || c + 1 == g.ncg || c % 97 == 0 {
            let loc = g.cgsblock(c) * g.fsize;
            assert_eq!(r.backups[c as usize], g.cgsblock(c));
            let bsb = Superblock::from_bytes(&read(dev, loc, SBLOCKSIZE)).unwrap();
            let bg = bsb.validate(loc).unwrap();
            assert_eq!(bg, g, "backup {c} geometry");
            assert_eq!(bsb.fs_sblockactualloc() as u64, loc);
            if p.ckhash {
                assert_eq!(bsb.compute_ckhash(), bsb.fs_ckhash(), "backup {c} hash");
            }
            // Backups are written before the root exists.
            let bt = bsb.fs_cstotal();
            assert_eq!(bt.cs_ndir, 0);
            let ndirs = if snap { 2 } else { 1 };
            let ft = sb.fs_cstotal();
            assert_eq!(bt.cs_nifree, ft.cs_nifree + ndirs);
            assert_eq!(bt.cs_nbfree, ft.cs_nbfree + ndirs);
            assert_eq!(bt.cs_nffree, ft.cs_nffree - ndirs * (g.frag as i64 - 1));
            let ib = read(
                dev,
                g.cgimin(c) * g.fsize,
                initediblk as usize * DINODE_SIZE,
            );
            for (i, d) in ib.chunks(DINODE_SIZE).enumerate() {
                let di = Dinode::from_bytes(d);
                if c == 0 && (i as u64) >= 2 && (i as u64) < nused {
                    assert_eq!(di.di_gen(), 0);
                    continue;
                }
                assert_eq!(di.di_mode(), 0);
                assert_eq!(di.di_size(), 0);
                assert_eq!((0..12).map(|k| di.di_db(k)).sum::<u64>(), 0);
                assert_ne!(di.di_gen(), 0, "cg {c} inode {i} gen");
                sample_inodes += 1;
            }
        }
    }
    assert!(sample_inodes > 0);
    let t = sb.fs_cstotal();
    assert_eq!(
        (t.cs_ndir, t.cs_nbfree, t.cs_nifree, t.cs_nffree),
        (tot.cs_ndir, tot.cs_nbfree, tot.cs_nifree, tot.cs_nffree)
    );
    assert_eq!(t.cs_ndir, if snap { 2 } else { 1 });

    // The recovery record before the primary superblock.
    let rec = read(dev, SBLOCK_UFS2 - 20, 20);
    let w = |i: usize| u32::from_le_bytes(rec[i * 4..i * 4 + 4].try_into().unwrap());
    assert_eq!(
        (w(0), w(1), w(2), w(3), w(4)),
        (
            FS_UFS2_MAGIC,
            g.fshift - 9,
            g.sblkno as u32,
            g.fpg as u32,
            g.ncg as u32
        )
    );

    // The summary text lists every backup in sectors.
    let list: Vec<u64> = r
        .summary
        .split("at:\n")
        .nth(1)
        .unwrap()
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    let want: Vec<u64> = (0..g.ncg)
        .map(|c| g.cgsblock(c) * (g.fsize / 512))
        .collect();
    assert_eq!(list, want);
    assert!(r.summary.lines().all(|l| l.len() < 80));
    Checked { sb, g }
}

fn mem_newfs(bytes: u64, p: &NewfsParams) -> (MemDevice, NewfsReport) {
    let dev = MemDevice::new(bytes);
    let r = newfs(&dev, p)
        .unwrap_or_else(|e| panic!("newfs {bytes} bytes {}/{}: {e}", p.bsize, p.fsize));
    (dev, r)
}

#[test]
fn many_geometries_check_clean() {
    let sizes = [
        (32768, 4096),
        (4096, 512),
        (4096, 4096),
        (8192, 1024),
        (16384, 2048),
        (65536, 8192),
        (65536, 65536),
        (16384, 16384),
        (32768, 8192),
    ];
    for (bsize, fsize) in sizes {
        for mib in [1u64, 2, 5, 17, 64, 130] {
            let bytes = mib << 20;
            let p = NewfsParams {
                bsize,
                fsize,
                ..params(None)
            };
            match newfs_plan(bytes, &p) {
                Ok(_) => {}
                Err(e) => {
                    // Only too-small file systems may be refused.
                    assert!(mib <= 2, "{bsize}/{fsize} {mib} MiB: {e}");
                    assert_eq!(e.kind, ErrorKind::Invalid);
                    continue;
                }
            }
            let (dev, r) = mem_newfs(bytes, &p);
            check_image(&dev, &p, &r);
        }
    }
}

#[test]
fn one_mib_default_works() {
    let p = params(None);
    let (dev, r) = mem_newfs(1 << 20, &p);
    assert_eq!(r.ncg, 1);
    check_image(&dev, &p, &r);
}

#[test]
fn options_no_snap_softdep_no_ckhash_label() {
    for (no_snap, su, ck) in [
        (true, false, true),
        (false, true, false),
        (true, true, false),
    ] {
        let p = NewfsParams {
            no_snap,
            softupdates: su,
            ckhash: ck,
            volname: "My_vol-1".into(),
            minfree: 5,
            maxbpg: Some(1000),
            metaspace: Some(100),
            avgfilesize: 4096,
            avgfpdir: 10,
            ..params(None)
        };
        let (dev, r) = mem_newfs(48 << 20, &p);
        let c = check_image(&dev, &p, &r);
        assert_eq!(
            c.sb.fs_optim(),
            FS_OPTSPACE,
            "minfree < 8 switches to space"
        );
        assert_eq!(c.sb.fs_minfree(), 5);
        assert_eq!(c.sb.fs_maxbpg(), 1000);
        assert_eq!(c.sb.fs_metaspace(), 96);
        assert_eq!(r.summary.contains("with soft updates"), su);
    }
    let p = NewfsParams {
        metaspace: Some(0),
        ..params(None)
    };
    let (dev, _) = mem_newfs(48 << 20, &p);
    assert_eq!(ufs::fs::read_superblock(&dev).unwrap().0.fs_metaspace(), 0);
}

#[test]
fn freebsd_vectors_on_disk() {
    // 32 MiB: final counts published for FreeBSD 14 newfs.
    let p = params(None);
    let (dev, r) = mem_newfs(32 << 20, &p);
    let c = check_image(&dev, &p, &r);
    let t = c.sb.fs_cstotal();
    assert_eq!(
        (t.cs_nbfree, t.cs_nffree, t.cs_nifree, t.cs_ndir),
        (974, 21, 4604, 2)
    );
    assert_eq!(c.sb.fs_dsize(), 7815);
    assert!(
        r.summary
            .contains("using 4 cylinder groups of 8.03MB, 257 blks, 1152 inodes."),
        "{}",
        r.summary
    );
    assert!(r
        .summary
        .contains("32.0MB (65536 sectors) block size 32768, fragment size 4096"));

    // 1 GiB on a sparse file.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("img");
    std::fs::File::create(&path)
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    let dev = FileDevice::open(&path, true).unwrap();
    let r = newfs(&dev, &p).unwrap();
    let c = check_image(&dev, &p, &r);
    let t = c.sb.fs_cstotal();
    assert_eq!((t.cs_nbfree, t.cs_nffree, t.cs_nifree), (31726, 21, 131580));
    assert_eq!(c.g.metaspace, 2616);
    assert_eq!(r.backups, vec![24, 65568, 131112, 196656]);
    assert!(r
        .summary
        .contains("using 4 cylinder groups of 256.03MB, 8193 blks, 32896 inodes."));
    assert!(
        r.summary.ends_with(
            "super-block backups (for fsck_ffs -b #) at:\n 192, 524544, 1048896, 1573248\n"
        ),
        "{}",
        r.summary
    );
    // Root at 2104, .snap at 2112, as FreeBSD.
    assert_eq!(read_inode(&dev, &c.g, 2).di_db(0), 2104);
    assert_eq!(read_inode(&dev, &c.g, 3).di_db(0), 2112);
}

#[test]
fn reproducible_with_seed_and_time() {
    let p = params(None);
    let (a, _) = mem_newfs(20 << 20, &p);
    let (b, _) = mem_newfs(20 << 20, &p);
    assert!(a.snapshot() == b.snapshot());
    let (c, _) = mem_newfs(
        20 << 20,
        &NewfsParams {
            seed: Some(8),
            ..p.clone()
        },
    );
    assert!(a.snapshot() != c.snapshot());
}

#[test]
fn works_over_old_contents() {
    // A device full of garbage, with a UFS1 superblock magic at 8192.
    let mut v = vec![0xA5u8; 24 << 20];
    v[8192 + 1372..8192 + 1376].copy_from_slice(&FS_UFS1_MAGIC.to_le_bytes());
    let dev = MemDevice::from_vec(v);
    let p = params(Some(20 << 20));
    let r = newfs(&dev, &p).unwrap();
    check_image(&dev, &p, &r);
    let img = dev.snapshot();
    assert_eq!(&img[8192 + 1372..8192 + 1376], &[0, 0, 0, 0]);
    // Untouched: the boot area before the recovery record, and space past the size.
    assert!(img[..512].iter().all(|&b| b == 0xA5));
    assert!(img[20 << 20..].iter().all(|&b| b == 0xA5));
}

#[test]
fn engine_mounts_the_result() {
    let p = params(None);
    let (dev, _) = mem_newfs(40 << 20, &p);
    let opts = ufs::MountOptions {
        read_only: true,
        ..Default::default()
    };
    let fs = ufs::Fs::open(Box::new(dev), opts).unwrap();
    let names: Vec<Vec<u8>> = fs
        .readdir(Ino::new(2), 0, 100)
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(
        names,
        vec![b".".to_vec(), b"..".to_vec(), b".snap".to_vec()]
    );
    let names: Vec<(Vec<u8>, Ino)> = fs
        .readdir(Ino::new(3), 0, 100)
        .unwrap()
        .into_iter()
        .map(|e| (e.name, e.ino))
        .collect();
    assert_eq!(
        names,
        vec![(b".".to_vec(), Ino::new(3)), (b"..".to_vec(), Ino::new(2))]
    );
    for c in 0..fs.geometry().ncg {
        fs.cylinder_group(c).unwrap();
    }
}

#[test]
fn bad_parameters_are_invalid() {
    let dev = MemDevice::new(8 << 20);
    let bad = |p: NewfsParams| {
        let e = newfs(&dev, &p).expect_err("must fail");
        assert_eq!(e.kind, ErrorKind::Invalid, "{e}");
        e.msg
    };
    let d = params(None);
    bad(NewfsParams {
        bsize: 3000,
        ..d.clone()
    });
    bad(NewfsParams {
        bsize: 2048,
        fsize: 512,
        ..d.clone()
    });
    bad(NewfsParams {
        bsize: 131072,
        fsize: 16384,
        ..d.clone()
    });
    bad(NewfsParams {
        fsize: 3000,
        ..d.clone()
    });
    bad(NewfsParams {
        fsize: 256,
        bsize: 4096,
        ..d.clone()
    });
    bad(NewfsParams {
        bsize: 8192,
        fsize: 16384,
        ..d.clone()
    });
    assert!(bad(NewfsParams {
        bsize: 65536,
        fsize: 4096,
        ..d.clone()
    })
    .contains("fragments"));
    assert!(bad(NewfsParams {
        size: Some(9 << 20),
        ..d.clone()
    })
    .contains("larger than the device"));
    bad(NewfsParams {
        size: Some(100 << 10),
        ..d.clone()
    });
    bad(NewfsParams {
        size: Some(0),
        ..d.clone()
    });
    bad(NewfsParams {
        size: Some(511),
        ..d.clone()
    });
    bad(NewfsParams {
        minfree: 100,
        ..d.clone()
    });
    bad(NewfsParams {
        optim: 2,
        ..d.clone()
    });
    bad(NewfsParams {
        density: Some(0),
        ..d.clone()
    });
    bad(NewfsParams {
        density: Some(1 << 40),
        ..d.clone()
    });
    bad(NewfsParams {
        maxbpg: Some(0),
        ..d.clone()
    });
    bad(NewfsParams {
        maxblkspercg: Some(0),
        ..d.clone()
    });
    bad(NewfsParams {
        avgfilesize: 0,
        ..d.clone()
    });
    bad(NewfsParams {
        avgfpdir: 0,
        ..d.clone()
    });
    bad(NewfsParams {
        volname: "bad label".into(),
        ..d.clone()
    });
    bad(NewfsParams {
        volname: "x".repeat(32),
        ..d.clone()
    });
    // Nothing was written by any of them.
    assert!(dev.snapshot().iter().all(|&b| b == 0));
    // The smallest sizes around the limit never panic.
    for kib in (64..2048).step_by(4) {
        let dev = MemDevice::new(kib << 10);
        for (b, f) in [(32768, 4096), (4096, 512), (65536, 65536), (65536, 8192)] {
            let p = NewfsParams {
                bsize: b,
                fsize: f,
                ..params(None)
            };
            if let Ok(r) = newfs(&dev, &p) {
                check_image(&dev, &p, &r);
            }
        }
    }
}

#[test]
fn density_and_group_size_options() {
    // A large -i lowers the inode count; a small -c gives many small groups.
    let p = NewfsParams {
        density: Some(1 << 20),
        ..params(None)
    };
    let (dev, r) = mem_newfs(64 << 20, &p);
    check_image(&dev, &p, &r);
    assert_eq!(r.ipg, 128);
    let p = NewfsParams {
        maxblkspercg: Some(4096),
        ..params(None)
    };
    let (dev, r) = mem_newfs(256 << 20, &p);
    check_image(&dev, &p, &r);
    assert!(r.fpg <= 4096 + 8, "{}", r.fpg);
    assert!(r.ncg >= 16, "{}", r.ncg);
    assert_eq!(newfs_plan(256 << 20, &params(None)).unwrap().ncg, 4);
}

fn sparse_device(dir: &tempfile::TempDir, bytes: u64) -> FileDevice {
    let path = dir.path().join("img");
    std::fs::File::create(&path)
        .unwrap()
        .set_len(bytes)
        .unwrap();
    FileDevice::open(&path, true).unwrap()
}

/// A sparse image file whose `flush` is a no-op: the big tests write a few
/// hundred MB of metadata, and making that durable (fdatasync) on a busy
/// disk would dominate the run time without testing anything of newfs.
struct NoSync(FileDevice);

impl BlockDevice for NoSync {
    fn read_at(&self, off: u64, buf: &mut [u8]) -> ufs::Result<()> {
        self.0.read_at(off, buf)
    }
    fn write_at(&self, off: u64, buf: &[u8]) -> ufs::Result<()> {
        self.0.write_at(off, buf)
    }
    fn flush(&self) -> ufs::Result<()> {
        Ok(())
    }
    fn size(&self) -> u64 {
        self.0.size()
    }
}

fn allocated_bytes(dir: &tempfile::TempDir) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(dir.path().join("img")).unwrap().blocks() * 512
}

#[test]
fn two_tib_sparse_image() {
    let dir = tempfile::tempdir().unwrap();
    let dev = NoSync(sparse_device(&dir, 2 << 40));
    let p = params(None);
    let t0 = Instant::now();
    let r = newfs(&dev, &p).unwrap();
    let made = t0.elapsed();
    assert_eq!((r.ncg, r.fpg, r.ipg), (3355, 160056, 80128));
    assert!(r
        .summary
        .contains("using 3355 cylinder groups of 625.22MB, 20007 blks, 80128 inodes."));
    let c = check_image(&dev, &p, &r);
    assert!(c.g.cssize > c.g.bsize, "multi-block summary area");
    // Only metadata was written: per group a superblock, a cg block and two
    // inode blocks.
    let per_cg = 4096 + c.g.cgsize + 2 * c.g.bsize;
    assert!(
        allocated_bytes(&dir) < r.ncg * per_cg + (8 << 20),
        "{} bytes allocated",
        allocated_bytes(&dir)
    );
    eprintln!("2 TiB newfs took {made:?}, check {:?}", t0.elapsed() - made);
}

#[test]
fn more_than_20000_groups() {
    let dir = tempfile::tempdir().unwrap();
    let dev = NoSync(sparse_device(&dir, 200 << 30));
    let p = NewfsParams {
        bsize: 4096,
        fsize: 512,
        ..params(None)
    };
    let t0 = Instant::now();
    let r = newfs(&dev, &p).unwrap();
    let made = t0.elapsed();
    assert!(r.ncg > 20000, "{}", r.ncg);
    assert!(r.summary.contains("Reduced frags per cylinder group"));
    let c = check_image(&dev, &p, &r);
    assert!(
        c.g.cssize / c.g.bsize >= 80,
        "summary area spans many blocks"
    );
    eprintln!(
        "{} groups: newfs took {made:?}, check {:?}",
        r.ncg,
        t0.elapsed() - made
    );
}

/// Pass-5 style consistency of any image: every group's counters and
/// summaries agree with its own maps, and the summary array and
/// `fs_cstotal` agree with the groups.
fn check_counters(dev: &dyn BlockDevice) {
    let (sb, g, _) = ufs::fs::read_superblock(dev).unwrap();
    let sum = read(dev, g.csaddr * g.fsize, g.cssize as usize);
    let mut tot = CsumTotal::default();
    for c in 0..g.ncg {
        let cg = Cg::parse(&read(dev, g.cgtod(c) * g.fsize, g.cgsize as usize), &g, c).unwrap();
        if sb.ckhash_enabled(CK_CYLGRP) {
            assert_eq!(cg.compute_ckhash(), cg.cg_ckhash(), "cg {c} hash");
        }
        let ndblk = cg.cg_ndblk() as u64;
        let (mut nb, mut nf) = (0, 0);
        let mut frsum = [0u32; 8];
        let mut run_sums = vec![0i32; g.contigsumsize as usize + 1];
        let mut crun = 0u64;
        for blk in 0..ndblk.div_ceil(g.frag) {
            let free: Vec<bool> = (0..g.frag)
                .map(|i| blk * g.frag + i < ndblk && cg.frag_free(blk * g.frag + i))
                .collect();
            let all = free.iter().all(|&x| x);
            if g.contigsumsize > 0 && blk < cg.cg_nclusterblks() as u64 {
                assert_eq!(cg.cluster_free(blk), all, "cg {c} cluster {blk}");
                if all {
                    crun += 1;
                } else if crun > 0 {
                    run_sums[crun.min(g.contigsumsize) as usize] += 1;
                    crun = 0;
                }
            }
            if all {
                nb += 1;
                continue;
            }
            for r in free.split(|&x| !x).map(|s| s.len()).filter(|&l| l > 0) {
                nf += r as i32;
                frsum[r] += 1;
            }
        }
        if crun > 0 {
            run_sums[crun.min(g.contigsumsize) as usize] += 1;
        }
        let cs = cg.cg_cs();
        assert_eq!((cs.cs_nbfree, cs.cs_nffree), (nb, nf), "cg {c}");
        for (i, v) in frsum.iter().enumerate() {
            assert_eq!(cg.cg_frsum(i), *v, "cg {c} frsum[{i}]");
        }
        for i in 1..=g.contigsumsize {
            assert_eq!(
                cg.clustersum(i),
                run_sums[i as usize],
                "cg {c} clustersum[{i}]"
            );
        }
        let used = (0..g.ipg).filter(|&i| cg.inode_used(i)).count() as i32;
        assert_eq!(cs.cs_nifree, g.ipg as i32 - used, "cg {c} nifree");
        assert_eq!(
            Csum::read(g.v.endian, &sum, c as usize * 16),
            cs,
            "cg {c} summary"
        );
        tot.cs_ndir += cs.cs_ndir as i64;
        tot.cs_nbfree += cs.cs_nbfree as i64;
        tot.cs_nifree += cs.cs_nifree as i64;
        tot.cs_nffree += cs.cs_nffree as i64;
    }
    let t = sb.fs_cstotal();
    assert_eq!(
        (t.cs_ndir, t.cs_nbfree, t.cs_nifree, t.cs_nffree),
        (tot.cs_ndir, tot.cs_nbfree, tot.cs_nifree, tot.cs_nffree)
    );
}

#[test]
fn engine_writes_into_the_result() {
    let dir = tempfile::tempdir().unwrap();
    let dev = sparse_device(&dir, 256 << 20);
    let p = params(None);
    newfs(&dev, &p).unwrap();
    drop(dev);
    let img = dir.path().join("img");
    let root = ufs::Cred::ROOT;
    {
        let fs = ufs::Fs::open_path(&img, ufs::MountOptions::default()).unwrap();
        let r = fs.root();
        let names: Vec<Vec<u8>> = fs
            .readdir(r, 0, 100)
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(
            names,
            vec![b".".to_vec(), b"..".to_vec(), b".snap".to_vec()]
        );
        for d in 0..20u32 {
            let dd = fs
                .mkdir(r, format!("d{d}").as_bytes(), 0o755, root)
                .unwrap();
            let f = fs.mknod(dd.ino, b"f", 0o100644, 0, root).unwrap();
            let data: Vec<u8> = (0..(d * 37_000)).map(|i| i as u8).collect();
            fs.write(f.ino, 0, &data, root).unwrap();
        }
        fs.unmount().unwrap();
    }
    let dev = FileDevice::open(&img, false).unwrap();
    check_counters(&dev);
    let (sb, _, _) = ufs::fs::read_superblock(&dev).unwrap();
    assert_eq!(sb.fs_cstotal().cs_ndir, 22);
    assert_eq!(sb.fs_clean(), 1);
    drop(dev);
    let fs = ufs::Fs::open_path(
        &img,
        ufs::MountOptions {
            read_only: true,
            ..Default::default()
        },
    )
    .unwrap();
    let d7 = fs.lookup(fs.root(), b"d7").unwrap();
    let f = fs.lookup(d7.ino, b"f").unwrap();
    assert_eq!(
        fs.read(f.ino, 0, 7 * 37_000).unwrap(),
        (0..7 * 37_000u32).map(|i| i as u8).collect::<Vec<u8>>()
    );
}

#[test]
fn fresh_images_pass_the_generic_counter_check() {
    for (b, f) in [(32768, 4096), (4096, 512), (65536, 65536)] {
        let p = NewfsParams {
            bsize: b,
            fsize: f,
            ..params(None)
        };
        let (dev, _) = mem_newfs(64 << 20, &p);
        check_counters(&dev);
    }
}

/// The progress hooks behind the CLI's bars: newfs counts every group it
/// writes, fsck goes through its passes in order, counting groups in
/// passes 1 and 5, and ends at the last group of pass 5.
#[test]
fn newfs_and_fsck_report_progress() {
    let dev = ufs::dev::MemDevice::new(256 << 20);
    let mut seen = Vec::new();
    let r = ufs::newfs::newfs_with_progress(
        &dev,
        &ufs::newfs::NewfsParams {
            bsize: 4096,
            fsize: 512,
            seed: Some(1),
            ..Default::default()
        },
        &mut |done, total| seen.push((done, total)),
    )
    .unwrap();
    assert!(r.ncg > 4, "{} groups", r.ncg);
    let want: Vec<(u64, u64)> = (1..=r.ncg).map(|c| (c, r.ncg)).collect();
    assert_eq!(seen, want);
    let mut phases: Vec<ufs::fsck::Progress> = Vec::new();
    let rep =
        ufs::fsck::fsck_with_progress(&dev, ufs::fsck::FsckMode::Check, &mut |p| phases.push(p))
            .unwrap();
    assert!(rep.findings.is_empty(), "{:?}", rep.findings);
    let mut order: Vec<&str> = phases.iter().map(|p| p.phase).collect();
    order.dedup();
    assert_eq!(order, ["pass 1", "pass 2", "pass 3", "pass 4", "pass 5"]);
    let pass1: Vec<u64> = phases
        .iter()
        .filter(|p| p.phase == "pass 1")
        .map(|p| p.done)
        .collect();
    assert_eq!(pass1, (0..=r.ncg).collect::<Vec<_>>());
    let last = phases.last().unwrap();
    assert_eq!((last.done, last.total), (r.ncg, r.ncg));
}
