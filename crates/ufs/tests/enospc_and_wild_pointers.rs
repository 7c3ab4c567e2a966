//! Regressions found in review: ENOSPC in the middle of building an
//! indirect chain, growing a directory past its direct blocks, truncating
//! into a hole on a full disk; wild and aliased block pointers read from
//! disk; an unaligned rotor; and random tree operations (including rename
//! exchange) that must end fsck-clean.
use std::sync::Arc;
use ufs::dev::{BlockDevice, MemDevice};
use ufs::fsck::{fsck, FsckMode, FsckReport};
use ufs::newfs::{newfs, NewfsParams};
use ufs::{Cred, Fs, Ino, MountOptions, RenameMode, SetAttr};

pub fn mkfs(bytes: u64, p: NewfsParams) -> Arc<MemDevice> {
    let dev = Arc::new(MemDevice::new(bytes));
    newfs(
        &*dev,
        &NewfsParams {
            seed: Some(1),
            time: Some(1_700_000_000),
            ..p
        },
    )
    .unwrap();
    dev
}
pub fn mount(dev: &Arc<MemDevice>) -> Fs {
    Fs::open(
        Box::new(dev.clone()),
        MountOptions {
            seed: Some(7),
            ..Default::default()
        },
    )
    .unwrap()
}
pub fn check(dev: &Arc<MemDevice>) -> FsckReport {
    let snap = MemDevice::from_vec(dev.snapshot());
    fsck(&snap, FsckMode::Check).unwrap()
}
pub fn show(r: &FsckReport) -> String {
    r.findings
        .iter()
        .map(|f| format!("  [{}] ino={:?} {}\n", f.pass, f.ino, f.message))
        .collect()
}
const R: Cred = Cred::ROOT;

fn nbfree(fs: &Fs) -> i64 {
    fs.summary().0.cs_nbfree
}

/// Fills the file system with whole blocks, then frees exactly `keep` blocks.
fn fill_leaving(fs: &Fs, keep: i64) -> Ino {
    let r = fs.root();
    let bs = fs.block_size();
    let filler = fs.mknod(r, b"filler", 0o100644, 0, R).unwrap().ino;
    let buf = vec![7u8; bs as usize];
    let mut off = 0;
    loop {
        match fs.write(filler, off, &buf, R) {
            Ok(n) if n == buf.len() => off += n as u64,
            _ => break,
        }
    }
    // also eat fragments so that only whole blocks matter
    let mut i = 0;
    loop {
        let a = match fs.mknod(r, format!("s{i}").as_bytes(), 0o100644, 0, R) {
            Ok(a) => a,
            Err(_) => break,
        };
        if fs.write(a.ino, 0, b"x", R).is_err() {
            break;
        }
        i += 1;
    }
    // free blocks from the filler until `keep` whole blocks are free
    let mut len = fs.getattr(filler).unwrap().size;
    while nbfree(fs) < keep {
        len -= bs;
        fs.setattr(
            filler,
            &SetAttr {
                size: Some(len),
                ..Default::default()
            },
            R,
        )
        .unwrap();
    }
    filler
}

#[test]
fn enospc_after_indirect_allocated() {
    let dev = small_image();
    {
        let fs = mount(&dev);
        let r = fs.root();
        let bs = fs.block_size();
        let f = fs.mknod(r, b"twelve", 0o100644, 0, R).unwrap().ino;
        fs.write(f, 0, &vec![1u8; 12 * bs as usize], R).unwrap();
        fill_leaving(&fs, 1);
        eprintln!("nbfree before = {}", nbfree(&fs));
        let e = fs.write(f, 12 * bs, b"more", R);
        eprintln!("write at block 12: {:?}", e.as_ref().map_err(|e| e.kind));
        let a = fs.getattr(f).unwrap();
        eprintln!("size {} blocks {}", a.size, a.blocks);
        fs.unmount().unwrap();
    }
    let r = check(&dev);
    assert!(r.findings.is_empty(), "findings:\n{}", show(&r));
}

/// A fresh 24 MiB image without snapshots' reserve, as most tests here use.
fn small_image() -> Arc<MemDevice> {
    mkfs(
        24 << 20,
        NewfsParams {
            no_snap: true,
            ..Default::default()
        },
    )
}

/// Unmounts `fs`, plants `v` as the first block pointer of `ino` on the
/// device (damage as a crash or another writer could leave it) and mounts
/// the image again.
fn set_db0(dev: &Arc<MemDevice>, fs: Fs, ino: Ino, v: u64) -> Fs {
    fs.unmount().unwrap();
    drop(fs);
    testkit::patch_inode(&**dev, ino, |di| di.set_di_db(0, v));
    mount(dev)
}

#[test]
fn wild_dir_pointer_readdir() {
    let dev = small_image();
    let fs = mount(&dev);
    let d = fs.mkdir(fs.root(), b"d", 0o755, R).unwrap().ino;
    let fs = set_db0(&dev, fs, d, u64::MAX);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        fs.readdir(d, 0, 10).map(|v| v.len())
    }));
    eprintln!(
        "readdir: {:?}",
        r.as_ref().map(|x| x.as_ref().map_err(|e| e.to_string()))
    );
    // A wild pointer is damage the engine names, not a panic and not a
    // silent success.
    let e = r
        .expect("readdir panicked")
        .expect_err("readdir through a wild pointer succeeded");
    assert_eq!(e.kind, ufs::ErrorKind::Corrupt, "{e}");
    assert_eq!(e.damage, Some(ufs::Damage::Inode(d)), "{e}");
    assert!(e.to_string().contains("not a valid data block"), "{e}");
}

#[test]
fn wild_file_pointer_unlink() {
    let dev = small_image();
    let fs = mount(&dev);
    let f = fs.mknod(fs.root(), b"f", 0o100644, 0, R).unwrap().ino;
    fs.write(f, 0, b"hello", R).unwrap();
    let fs = set_db0(&dev, fs, f, u64::MAX);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fs.unlink(fs.root(), b"f")));
    eprintln!(
        "unlink: {:?}",
        r.as_ref().map(|x| x.as_ref().map_err(|e| e.to_string()))
    );
    // A wild pointer is damage the engine names, not a panic and not a
    // silent success.
    let e = r
        .expect("unlink panicked")
        .expect_err("unlink through a wild pointer succeeded");
    assert_eq!(e.kind, ufs::ErrorKind::Corrupt, "{e}");
    assert_eq!(e.damage, Some(ufs::Damage::Inode(f)), "{e}");
    assert!(e.to_string().contains("not a valid data block"), "{e}");
}

#[test]
fn wild_file_pointer_write() {
    let dev = small_image();
    let fs = mount(&dev);
    let f = fs.mknod(fs.root(), b"f", 0o100644, 0, R).unwrap().ino;
    fs.write(f, 0, b"hello", R).unwrap();
    let fs = set_db0(&dev, fs, f, u64::MAX);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        fs.write(f, 3, b"xxxxxxx", R)
    }));
    eprintln!(
        "write: {:?}",
        r.as_ref().map(|x| x.as_ref().map_err(|e| e.to_string()))
    );
    // A wild pointer is damage the engine names, not a panic and not a
    // silent success.
    let e = r
        .expect("write panicked")
        .expect_err("write through a wild pointer succeeded");
    assert_eq!(e.kind, ufs::ErrorKind::Corrupt, "{e}");
    assert_eq!(e.damage, Some(ufs::Damage::Inode(f)), "{e}");
    assert!(e.to_string().contains("not a valid data block"), "{e}");
}

#[test]
fn wild_fragment_tail_pointer_write_past_it() {
    // A write past a file's fragment tail first makes the tail a whole
    // block (FreeBSD's ffs_balloc does the same): a wild tail pointer must
    // be refused there, before the allocator looks up its group.
    for wild in [u64::MAX, 1 << 40] {
        let dev = small_image();
        let fs = mount(&dev);
        let f = fs.mknod(fs.root(), b"f", 0o100644, 0, R).unwrap().ino;
        fs.write(f, 0, b"hello", R).unwrap();
        let bsize = fs.geometry().bsize;
        let fs = set_db0(&dev, fs, f, wild);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            fs.write(f, 2 * bsize, b"past the tail", R)
        }));
        let e = r
            .expect("write past a wild tail panicked")
            .expect_err("write past a wild tail succeeded");
        assert_eq!(e.kind, ufs::ErrorKind::Corrupt, "{wild}: {e}");
        assert_eq!(e.damage, Some(ufs::Damage::Inode(f)), "{wild}: {e}");
    }
}

#[test]
fn aliased_dir_pointer_overwrites_other_file() {
    let dev = small_image();
    let fs = mount(&dev);
    let f = fs.mknod(fs.root(), b"victim", 0o100644, 0, R).unwrap().ino;
    fs.write(f, 0, &vec![0x55u8; 4096], R).unwrap();
    let victim_blk = fs.inode(f).unwrap().di_db(0);
    let d = fs.mkdir(fs.root(), b"d", 0o755, R).unwrap().ino;
    // copy d's first chunk over the victim so it parses, then alias d's pointer
    let dblk = fs.inode(d).unwrap().di_db(0);
    let fsz = fs.geometry().fsize;
    fs.unmount().unwrap();
    drop(fs);
    let mut data = vec![0u8; fsz as usize];
    dev.read_at(dblk * fsz, &mut data).unwrap();
    dev.write_at(victim_blk * fsz, &data).unwrap();
    let fs = mount(&dev);
    let fs = set_db0(&dev, fs, d, (1u64 << 52) + victim_blk);
    let r = fs.mknod(d, b"newname", 0o100644, 0, R);
    eprintln!(
        "mknod in aliased dir: {:?}",
        r.as_ref().map(|a| a.ino).map_err(|e| e.to_string())
    );
    let got = fs.lookup(d, b"newname").is_ok();
    eprintln!("entry visible through aliased pointer: {got}");
    fs.buffer_daemon().write_all().unwrap();
    let raw = dev.snapshot();
    let fsz = 4096usize;
    let blk = &raw[victim_blk as usize * fsz..victim_blk as usize * fsz + 512];
    let found = blk.windows(7).any(|w| w == b"newname");
    eprintln!("victim block now contains 'newname': {found}");
    assert!(!found);
}

#[test]
fn random_tree_ops_fsck_clean() {
    use rand::{Rng, SeedableRng};
    for seed in 0..40u64 {
        let dev = mkfs(
            32 << 20,
            NewfsParams {
                no_snap: true,
                bsize: 4096,
                fsize: 512,
                ..Default::default()
            },
        );
        let mut log = Vec::new();
        {
            let fs = mount(&dev);
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let mut dirs: Vec<Ino> = vec![fs.root()];
            let names = ["a", "b", "c", "d", "e"];
            for _ in 0..400 {
                let p = dirs[rng.gen_range(0..dirs.len())];
                let q = dirs[rng.gen_range(0..dirs.len())];
                let n1 = names[rng.gen_range(0..names.len())].as_bytes();
                let n2 = names[rng.gen_range(0..names.len())].as_bytes();
                let op = rng.gen_range(0..9);
                let r: Result<(), ufs::Error> = match op {
                    0 => fs.mkdir(p, n1, 0o755, R).map(|a| dirs.push(a.ino)),
                    1 => fs.mknod(p, n1, 0o100644, 0, R).map(|_| ()),
                    2 => fs.rmdir(p, n1),
                    3 => fs.unlink(p, n1),
                    4 => fs.rename(p, n1, q, n2, RenameMode::Replace),
                    5 => fs.rename(p, n1, q, n2, RenameMode::Exchange),
                    6 => fs
                        .lookup(p, n1)
                        .and_then(|a| fs.link(a.ino, q, n2))
                        .map(|_| ()),
                    7 => fs.lookup(p, n1).and_then(|a| {
                        let off = rng.gen_range(0..200_000u64);
                        fs.write(a.ino, off, &vec![9u8; rng.gen_range(1..70_000)], R)
                            .map(|_| ())
                    }),
                    _ => fs.lookup(p, n1).and_then(|a| {
                        fs.setattr(
                            a.ino,
                            &SetAttr {
                                size: Some(rng.gen_range(0..300_000u64)),
                                ..Default::default()
                            },
                            R,
                        )
                        .map(|_| ())
                    }),
                };
                log.push(format!(
                    "op{op} p{p} {} q{q} {} -> {:?}",
                    String::from_utf8_lossy(n1),
                    String::from_utf8_lossy(n2),
                    r.as_ref().map_err(|e| e.kind)
                ));
                // drop dirs that vanished
                dirs.retain(|&d| fs.getattr(d).is_ok());
            }
            fs.unmount().unwrap();
        }
        let r = check(&dev);
        assert!(
            r.findings.is_empty(),
            "seed {seed} findings:\n{}\nlast ops:\n{}",
            show(&r),
            log[log.len().saturating_sub(15)..].join("\n")
        );
    }
}

#[test]
fn enospc_truncate_down_into_hole() {
    let dev = small_image();
    {
        let fs = mount(&dev);
        let r = fs.root();
        let bs = fs.block_size();
        let f = fs.mknod(r, b"sparse", 0o100644, 0, R).unwrap().ino;
        fs.write(f, 10 * bs, b"x", R).unwrap();
        fill_leaving(&fs, 0);
        eprintln!("nbfree {} nffree {}", nbfree(&fs), fs.summary().0.cs_nffree);
        let e = fs.setattr(
            f,
            &SetAttr {
                size: Some(6 * bs - 1),
                ..Default::default()
            },
            R,
        );
        eprintln!(
            "truncate: {:?}",
            e.as_ref().map(|a| a.size).map_err(|e| e.kind)
        );
        let a = fs.getattr(f).unwrap();
        eprintln!("size {} blocks {}", a.size, a.blocks);
        fs.unmount().unwrap();
    }
    let r = check(&dev);
    assert!(r.findings.is_empty(), "findings:\n{}", show(&r));
}

#[test]
fn enospc_growing_directory_past_12_blocks() {
    let dev = mkfs(
        24 << 20,
        NewfsParams {
            no_snap: true,
            bsize: 4096,
            fsize: 512,
            ..Default::default()
        },
    );
    {
        let fs = mount(&dev);
        let r = fs.root();
        let d = fs.mkdir(r, b"big", 0o755, R).unwrap().ino;
        let mut i = 0;
        while fs.getattr(d).unwrap().size < 12 * 4096 {
            let name = format!("{i:0>200}");
            fs.mknod(d, name.as_bytes(), 0o100644, 0, R).unwrap();
            i += 1;
        }
        fs.mknod(d, format!("{:0>200}", "y").as_bytes(), 0o100644, 0, R)
            .unwrap();
        eprintln!(
            "dir size {} after {} entries",
            fs.getattr(d).unwrap().size,
            i
        );
        fill_leaving(&fs, 1);
        eprintln!("nbfree {} nffree {}", nbfree(&fs), fs.summary().0.cs_nffree);
        let e = fs.mknod(d, format!("{:0>200}", "z").as_bytes(), 0o100644, 0, R);
        eprintln!("mknod: {:?}", e.as_ref().map(|a| a.ino).map_err(|e| e.kind));
        let di = fs.inode(d).unwrap();
        eprintln!(
            "dir after: size {} blocks {} ib0 {} nbfree {}",
            di.di_size(),
            di.di_blocks(),
            di.di_ib(0),
            nbfree(&fs)
        );
        fs.unmount().unwrap();
    }
    let r = check(&dev);
    assert!(r.findings.is_empty(), "findings:\n{}", show(&r));
}

#[test]
fn unaligned_rotor_from_disk() {
    let dev = mkfs(
        64 << 20,
        NewfsParams {
            no_snap: true,
            ..Default::default()
        },
    );
    // A rotor below cg_ndblk, as FreeBSD's fsck keeps it, planted on disk.
    testkit::patch_cg(&*dev, 1, |cg| cg.set_cg_rotor(3));
    let fs = mount(&dev);
    let g = fs.geometry();
    // A file whose inode is in group 1 (directories spread over the
    // groups), and a whole block for it: allocated from group 1's rotor.
    let mut i = 0;
    let dir = loop {
        let d = fs
            .mkdir(fs.root(), format!("d{i}").as_bytes(), 0o755, R)
            .unwrap()
            .ino;
        if d.get() / g.ipg == 1 {
            break d;
        }
        i += 1;
        assert!(i < 200, "no directory landed in group 1");
    };
    let f = fs.mknod(dir, b"f", 0o100644, 0, R).unwrap().ino;
    assert_eq!(f.get() / g.ipg, 1, "a file goes to its directory's group");
    fs.write(f, 0, &vec![1u8; g.bsize as usize], R).unwrap();
    let (b, frag) = (fs.block_of(f, 0).unwrap().get(), g.frag);
    assert_eq!(b / g.fpg, 1, "the block comes from group 1");
    eprintln!(
        "block allocated at {b} (frag {frag}, aligned: {})",
        b % frag == 0
    );
    assert_eq!(b % frag, 0);
}
