//! Every FFS variant, end to end through the engine and the tools: UFS1
//! and UFS2, little- and big-endian. Images made by another implementation
//! (Debian's makefs, NetBSD's code) read exactly as their source tree, take
//! writes and check clean; images ufskit makes do the same and, where an
//! independent reader knows the variant (the `rufs` crate: UFS2 in either
//! order), read the same through it; fsck finds and repairs damage in each;
//! bad variants are refused with a message that says what they are.
use std::path::{Path, PathBuf};
use testkit::*;
use ufs::newfs::NewfsParams;
use ufs::{Cred, Fs, MountOptions, SetAttr, Time, TimeSet};
use ufs_format::{Endian, Ufs, Variant};

const VARIANTS: [Variant; 4] = [
    Variant::UFS2_LE,
    Variant::UFS2_BE,
    Variant::UFS1_LE,
    Variant::UFS1_BE,
];

/// makefs's options for a variant.
fn makefs_opts(v: Variant) -> (&'static str, &'static str) {
    (
        if v.is_ufs1() {
            "version=1"
        } else {
            "version=2"
        },
        if v.endian == Endian::Big { "be" } else { "le" },
    )
}

/// newfs of variant `v` on `dev`, seeded.
fn make(dev: &dyn ufs::dev::BlockDevice, v: Variant, seed: u64) {
    ufs::newfs::newfs(
        dev,
        &NewfsParams {
            seed: Some(seed),
            format: v.ufs,
            endian: v.endian,
            ..Default::default()
        },
    )
    .unwrap();
}

fn open(img: &Path, read_only: bool) -> Fs {
    let dev = open_image(img, !read_only);
    Fs::open(
        Box::new(dev),
        MountOptions {
            read_only,
            seed: Some(7),
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("open {}: {e}", img.display()))
}

fn variant_of(img: &Path) -> Variant {
    let dev = open_image(img, false);
    ufs::fs::read_superblock(&dev).unwrap().1.v
}

fn assert_same(want: &std::collections::BTreeMap<PathBuf, Node>, fs: &Fs, what: &str) {
    assert_same_tree(want, &walk_fs(fs), what);
}

/// The same changes made to `fs` and to the host tree `host`: a tree
/// copied in, then [`rename_remove_truncate`] (a rename across
/// directories, removals in a large directory, a truncation and an append,
/// a sparse file past 4 GiB).
fn change_both(fs: &Fs, host: &Path) {
    let root = fs.root();
    let extra = host.join("added");
    std::fs::create_dir_all(extra.join("sub")).unwrap();
    for i in 0..300 {
        std::fs::write(
            extra.join(format!("n{i}")),
            format!("new file {i}\n").repeat(i),
        )
        .unwrap();
    }
    std::os::unix::fs::symlink("../data", extra.join("sub/up")).unwrap();
    let added = fs.mkdir(root, b"added", 0o755, Cred::ROOT).unwrap().ino;
    copy_in(fs, &extra, added);
    rename_remove_truncate(fs, host, 2000);
}

fn host_tree(dir: &Path) -> PathBuf {
    hostile_and_real_tree(dir, 2000)
}

#[test]
fn makefs_images_of_every_variant_read_exactly_take_writes_and_check_clean() {
    if !needs_makefs("makefs_images_of_every_variant_read_exactly_take_writes_and_check_clean") {
        return;
    }
    for v in VARIANTS {
        let t = tempfile::tempdir().unwrap();
        let host = host_tree(t.path());
        let img = t.path().join("m.img");
        let (version, order) = makefs_opts(v);
        makefs_with(&host, &img, version, "300m", &["-B", order]);
        assert_eq!(variant_of(&img), v, "makefs -o {version} -B {order}");
        // As another implementation wrote it: fsck clean, every file exact.
        assert_fsck_clean(&img);
        let want = walk_host(&host);
        let fs = open(&img, true);
        assert_same(&want, &fs, &format!("{v} from makefs"));
        drop(fs);
        // Written by ufskit, then checked and read again.
        let fs = open(&img, false);
        let root = fs.root();
        // makefs put the tree at the root; keep the same shape as the host
        // by moving it under hostile/ on both sides.
        let hostile = fs.lookup(root, b"hostile").unwrap().ino;
        assert!(fs.getattr(hostile).unwrap().kind == ufs::FileKind::Dir);
        change_both(&fs, &host);
        fs.unmount().unwrap();
        drop(fs);
        assert_fsck_clean(&img);
        assert_eq!(variant_of(&img), v, "the variant stays what it was");
        let fs = open(&img, true);
        assert_same(&walk_host(&host), &fs, &format!("{v} after writes"));
    }
}

#[test]
fn newfs_of_every_variant_takes_a_tree_and_reads_it_back() {
    for v in VARIANTS {
        let t = tempfile::tempdir().unwrap();
        let host = host_tree(t.path());
        let img = t.path().join("n.img");
        std::fs::File::create(&img)
            .unwrap()
            .set_len(1 << 30)
            .unwrap();
        let dev = open_image(&img, true);
        let rep = ufs::newfs::newfs(
            &dev,
            &NewfsParams {
                seed: Some(3),
                no_snap: true,
                format: v.ufs,
                endian: v.endian,
                ..Default::default()
            },
        )
        .unwrap();
        drop(dev);
        assert!(rep.ncg >= 1);
        assert_eq!(variant_of(&img), v);
        assert_fsck_clean(&img);
        let fs = open(&img, false);
        let hostile_dst = fs.root();
        let h = fs
            .mkdir(hostile_dst, b"hostile", 0o755, Cred::ROOT)
            .unwrap()
            .ino;
        copy_in(&fs, &host.join("hostile"), h);
        if host.join("linux").exists() {
            let l = fs
                .mkdir(fs.root(), b"linux", 0o755, Cred::ROOT)
                .unwrap()
                .ino;
            copy_in(&fs, &host.join("linux"), l);
        }
        change_both(&fs, &host);
        fs.unmount().unwrap();
        drop(fs);
        assert_fsck_clean(&img);
        let want = walk_host(&host);
        let fs = open(&img, true);
        assert_same(&want, &fs, &format!("{v} from newfs"));
        drop(fs);
        if !v.is_ufs1() {
            // The independent reader knows UFS2 in both byte orders.
            let got = walk_rufs(&img);
            for (k, w) in &want {
                assert_eq!(Some(w), got.get(k), "rufs on {v}: {}", k.display());
            }
            assert_eq!(got.len(), want.len(), "rufs on {v}");
        }
    }
}

/// The bytes of the superblock as stored: big-endian fields really are
/// big-endian, UFS1's sit at 8192, and the old fields carry what FreeBSD's
/// newfs puts there.
#[test]
fn newfs_writes_the_variant_asked_for_byte_for_byte() {
    for v in VARIANTS {
        let dev = ufs::dev::MemDevice::new(64 << 20);
        ufs::newfs::newfs(
            &dev,
            &NewfsParams {
                seed: Some(1),
                time: Some(1_700_000_000),
                format: v.ufs,
                endian: v.endian,
                ..Default::default()
            },
        )
        .unwrap();
        let loc = if v.is_ufs1() { 8192 } else { 65536 };
        let mut m = [0u8; 4];
        use ufs::dev::BlockDevice;
        dev.read_at(loc + 1372, &mut m).unwrap();
        let want = match v.endian {
            Endian::Little => v.magic().to_le_bytes(),
            Endian::Big => v.magic().to_be_bytes(),
        };
        assert_eq!(m, want, "{v}: magic at {loc}");
        let (sb, g, at) = ufs::fs::read_superblock(&dev).unwrap();
        assert_eq!((g.v, at), (v, loc));
        if v.is_ufs1() {
            // FreeBSD's validate_sblock wants exactly these (ufs1.md §3.3).
            assert_eq!(
                (
                    sb.fs_old_cpg(),
                    sb.fs_old_nrpos(),
                    sb.fs_old_rps(),
                    sb.fs_old_interleave(),
                    sb.fs_old_postblformat(),
                    sb.fs_old_inodefmt(),
                    sb.fs_maxsymlinklen(),
                ),
                (1, 1, 60, 1, 1, 2, 60)
            );
            assert_eq!(sb.fs_old_ncyl() as u64, g.ncg);
            assert_eq!(sb.fs_old_nspf() as u64, g.fsize / 512);
            assert_eq!(sb.fs_old_spc() as u64, g.fpg * (g.fsize / 512));
            assert_eq!(sb.fs_old_size() as u64, g.size);
            assert_eq!(sb.fs_old_dsize() as u64, g.dsize);
            assert_eq!(sb.fs_old_csaddr() as u64, g.csaddr);
            assert_eq!(sb.fs_maxbsize() as u64, g.bsize);
            let t = sb.fs_cstotal();
            let o = sb.fs_old_cstotal();
            assert_eq!(
                (o.cs_ndir, o.cs_nbfree, o.cs_nifree, o.cs_nffree),
                (
                    t.cs_ndir as i32,
                    t.cs_nbfree as i32,
                    t.cs_nifree as i32,
                    t.cs_nffree as i32
                )
            );
            assert_eq!(sb.fs_metackhash(), 0, "UFS1 has no check-hashes");
            assert!(g.ipg <= 0x7fff, "cg_old_niblk is 16-bit");
            assert_eq!(g.nindir, g.bsize / 4);
            assert_eq!(g.inopb, g.bsize / 128);
        } else {
            assert_eq!(g.nindir, g.bsize / 8);
        }
    }
}

#[test]
fn fsck_repairs_damage_in_every_variant() {
    for v in VARIANTS {
        let t = tempfile::tempdir().unwrap();
        let img = t.path().join("d.img");
        std::fs::File::create(&img)
            .unwrap()
            .set_len(256 << 20)
            .unwrap();
        let dev = open_image(&img, true);
        make(&dev, v, 5);
        drop(dev);
        let fs = open(&img, false);
        let root = fs.root();
        let d = fs.mkdir(root, b"dir", 0o755, Cred::ROOT).unwrap().ino;
        let f = fs.mknod(d, b"file", 0o100644, 0, Cred::ROOT).unwrap().ino;
        fs.write(f, 0, &[7u8; 100_000], Cred::ROOT).unwrap();
        let target = b"a/short/target/of/twenty-nine";
        let l = fs.symlink(d, b"link", target, Cred::ROOT).unwrap().ino;
        fs.unmount().unwrap();
        drop(fs);
        assert_fsck_clean(&img);
        // A wrong link count, a group's free-block count off, and the
        // summary totals off: pass 4 and pass 5 find and fix each.
        let dev = open_image(&img, true);
        patch_inode(&dev, f, |di| di.set_nlink(3));
        // A short symlink with a wrong block count: its text stays text
        // (FreeBSD decides by size alone), fsck corrects the count.
        patch_inode(&dev, l, |di| di.set_di_blocks(8));
        patch_cg(&dev, 0, |cg| {
            let mut cs = cg.cg_cs();
            cs.cs_nbfree += 5;
            cg.set_cg_cs(cs);
        });
        drop(dev);
        let dev = open_image(&img, true);
        let found = ufs::fsck::fsck(&dev, ufs::fsck::FsckMode::Check).unwrap();
        let msgs: Vec<&str> = found.findings.iter().map(|f| f.message.as_str()).collect();
        assert!(
            msgs.iter().any(|m| m.contains("LINK COUNT")),
            "{v}: {msgs:?}"
        );
        assert!(
            msgs.iter().any(|m| m.contains("INCORRECT BLOCK COUNT")),
            "{v}: {msgs:?}"
        );
        assert!(
            msgs.iter()
                .any(|m| m.contains("FREE BLK COUNT") || m.contains("SUMMARY")),
            "{v}: {msgs:?}"
        );
        let fixed = ufs::fsck::fsck(&dev, ufs::fsck::FsckMode::Yes).unwrap();
        assert!(fixed.modified, "{v}");
        drop(dev);
        assert_fsck_clean(&img);
        assert_eq!(variant_of(&img), v);
        let fs = open(&img, true);
        assert_eq!(fs.getattr(f).unwrap().nlink, 1, "{v}");
        assert_eq!(fs.readlink(l).unwrap(), target, "{v}");
        assert_eq!(fs.getattr(l).unwrap().blocks, 0, "{v}");
        assert_eq!(fs.read(f, 0, 200_000).unwrap(), vec![7u8; 100_000], "{v}");
    }
}

#[test]
fn ufs1_times_run_to_2106_and_attributes_are_refused() {
    for v in [Variant::UFS1_LE, Variant::UFS1_BE] {
        let dev = std::sync::Arc::new(ufs::dev::MemDevice::new(64 << 20));
        make(&*dev, v, 1);
        let fs = Fs::open(Box::new(dev.clone()), MountOptions::default()).unwrap();
        let root = fs.root();
        let f = fs.mknod(root, b"f", 0o100644, 0, Cred::ROOT).unwrap().ino;
        // Past 2038 (a signed 32-bit field's end), before 2106 (an
        // unsigned one's): kept exactly, as FreeBSD 15 reads UFS1 times.
        let t2100 = 4_102_444_800i64;
        let set = |sec: i64| {
            fs.setattr(
                f,
                &SetAttr {
                    mtime: Some(TimeSet::At(Time { sec, nsec: 5 })),
                    ..Default::default()
                },
                Cred::ROOT,
            )
            .unwrap();
            let t = fs.getattr(f).unwrap().mtime;
            (t.sec, t.nsec)
        };
        assert_eq!(set(t2100), (t2100, 5), "{v}");
        // Outside the field's range: the nearest time it holds.
        assert_eq!(set(-100), (0, 5), "{v}");
        assert_eq!(set(1 << 40), (u32::MAX as i64, 5), "{v}");
        // No extended attribute area in a UFS1 inode.
        let e = fs
            .setxattr(
                f,
                ufs::XattrNs::User,
                b"a",
                b"b",
                ufs::XattrSet::Either,
                Cred::ROOT,
            )
            .unwrap_err();
        assert_eq!(e.kind, ufs::ErrorKind::NotSupported, "{v}: {e}");
        assert!(e.to_string().contains("UFS1"), "{e}");
        assert!(fs.listxattr(f, Cred::ROOT).unwrap().is_empty());
        // Short symlinks hold up to 59 bytes in the inode, longer ones a
        // block; both read back.
        for n in [1usize, 59, 60, 61, 200] {
            let target = "t".repeat(n);
            let name = format!("l{n}");
            let l = fs
                .symlink(root, name.as_bytes(), target.as_bytes(), Cred::ROOT)
                .unwrap();
            assert_eq!(fs.readlink(l.ino).unwrap(), target.as_bytes(), "{v} {n}");
            assert_eq!(l.blocks == 0, n < 60, "{v}: symlink of {n} bytes");
        }
        fs.unmount().unwrap();
        drop(fs);
        let rep = ufs::fsck::fsck(&*dev, ufs::fsck::FsckMode::Check).unwrap();
        assert!(rep.findings.is_empty(), "{v}: {:?}", rep.findings);
        let fs = Fs::open(Box::new(dev.clone()), MountOptions::default()).unwrap();
        let f = fs.lookup(fs.root(), b"f").unwrap();
        assert_eq!((f.mtime.sec, f.mtime.nsec), (u32::MAX as i64, 5));
        for n in [1usize, 59, 60, 61, 200] {
            let l = fs.lookup(fs.root(), format!("l{n}").as_bytes()).unwrap();
            assert_eq!(fs.readlink(l.ino).unwrap(), "t".repeat(n).as_bytes());
        }
    }
}

/// What a user sees for images that are not a file system ufskit reads.
#[test]
fn bad_variants_get_a_clear_message() {
    use ufs::dev::BlockDevice;
    let make = |v: Variant| {
        let dev = std::sync::Arc::new(ufs::dev::MemDevice::new(32 << 20));
        make(&*dev, v, 1);
        dev
    };
    let msg_of = |dev: &dyn BlockDevice| {
        let a = ufs::fs::read_superblock(dev).err().map(|e| e.to_string());
        let b = ufs::fsck::fsck(dev, ufs::fsck::FsckMode::Check)
            .err()
            .map(|e| e.to_string());
        (a.unwrap_or_default(), b.unwrap_or_default())
    };
    // A UFS1 file system in the format before 4.4BSD.
    for v in [Variant::UFS1_LE, Variant::UFS1_BE] {
        let dev = make(v);
        let mut b = vec![0u8; 8192];
        dev.read_at(8192, &mut b).unwrap();
        v.endian.set_i32(&mut b, 1324, -1); // fs_old_inodefmt: FS_42INODEFMT
        v.endian.set_i32(&mut b, 1320, 0); // fs_maxsymlinklen
        dev.write_at(8192, &b).unwrap();
        let (m, f) = msg_of(&*dev);
        assert!(m.contains("pre-4.4BSD format"), "{m}");
        assert!(f.contains("pre-4.4BSD format"), "{f}");
    }
    // An unknown magic: no UFS in either byte order.
    let dev = ufs::dev::MemDevice::new(1 << 20);
    let (m, f) = msg_of(&dev);
    assert!(m.contains("no UFS1 or UFS2 superblock"), "{m}");
    assert!(f.contains("no usable superblock"), "{f}");
    // A truncated image: the superblock promises more than the device.
    for v in VARIANTS {
        let full = make(v);
        let short = ufs::dev::MemDevice::new(4 << 20);
        let mut b = vec![0u8; 4 << 20];
        full.read_at(0, &mut b).unwrap();
        short.write_at(0, &b).unwrap();
        let (m, f) = msg_of(&short);
        assert!(m.contains("larger than its device"), "{v}: {m}");
        assert!(f.contains("larger than the device"), "{v}: {f}");
    }
    // Mac OS X's UFS (1024-byte directory blocks).
    let dev = make(Variant::UFS1_BE);
    dev.write_at(7168, b"LABL").unwrap();
    let (m, f) = msg_of(&*dev);
    assert!(m.contains("Apple UFS"), "{m}");
    assert!(f.contains("Apple UFS"), "{f}");
}

/// The tools on every variant: tunefs changes what it is asked and the
/// file system stays clean and of its variant; dumpfs -m gives back the
/// newfs command of the variant; a big-endian machine's BSD disklabel is
/// found and its UFS partition named with its variant.
#[test]
fn tunefs_dumpfs_and_disklabels_on_every_variant() {
    use ufs::dev::BlockDevice;
    for v in VARIANTS {
        let dev = ufs::dev::MemDevice::new(64 << 20);
        make(&dev, v, 2);
        let changed = ufs::tunefs::tunefs(
            &dev,
            &ufs::tunefs::TuneParams {
                minfree: Some(5),
                avgfilesize: Some(4096),
                volname: Some("vol_1".into()),
                softupdates: Some(false),
                all_backups: true,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(changed.len(), 5, "{v}: {changed:?}");
        let (sb, g, _) = ufs::fs::read_superblock(&dev).unwrap();
        assert_eq!(g.v, v);
        assert_eq!(
            (sb.fs_minfree(), sb.fs_avgfilesize(), sb.fs_volname()),
            (5, 4096, "vol_1".to_string()),
            "{v}"
        );
        assert_eq!(sb.fs_flags() & ufs_format::FS_DOSOFTDEP, 0, "{v}");
        let rep = ufs::fsck::fsck(&dev, ufs::fsck::FsckMode::Check).unwrap();
        assert!(rep.findings.is_empty(), "{v}: {:?}", rep.findings);
        let cmd = ufs::dumpfs::newfs_command(&dev, "x.img").unwrap();
        assert_eq!(cmd.contains("-O 1"), v.is_ufs1(), "{v}: {cmd}");
        assert_eq!(cmd.contains("-B be"), v.endian == Endian::Big, "{v}: {cmd}");
        let text = ufs::dumpfs::dumpfs(&dev, true).unwrap();
        assert!(text.contains(&v.describe()), "{v}: {}", &text[..200]);
    }
    // A disk labelled by a big-endian machine, its partition a made there.
    for e in [Endian::Big, Endian::Little] {
        let disk = std::sync::Arc::new(ufs::dev::MemDevice::new(96 << 20));
        let sectors = (80u64 << 20) / 512;
        ufs::dev::partition::write_disklabel_in(e, &*disk, 0, 96 << 20, &[(0, 64, sectors, 7)])
            .unwrap();
        {
            let w =
                ufs::dev::partition::Window::new(disk.clone(), 64 * 512, sectors * 512).unwrap();
            make(&w, Variant::new(Ufs::Ufs1, e), 2);
        }
        let parts = ufs::dev::partition::probe(&*disk).unwrap();
        let a = parts.iter().find(|p| p.name == "a").expect("partition a");
        assert_eq!(
            a.format.as_deref(),
            Some(Variant::new(Ufs::Ufs1, e).describe().as_str()),
            "{parts:?}"
        );
        assert!(disk.size() > a.start + a.size - 1);
        // The same label where sparc and sparc64 keep it: sector 0, byte 128.
        let mut label = vec![0u8; 512];
        disk.read_at(512, &mut label).unwrap();
        disk.write_at(512, &[0u8; 512]).unwrap();
        disk.write_at(128, &label[..384]).unwrap();
        let parts = ufs::dev::partition::probe(&*disk).unwrap();
        let a2 = parts
            .iter()
            .find(|p| p.name == "a")
            .expect("label at byte 128");
        assert_eq!((a2.start, a2.format.clone()), (a.start, a.format.clone()));
    }
}
