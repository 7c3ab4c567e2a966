//! growfs: a file system made larger keeps every file, passes fsck, and
//! the new space is usable; a power cut at any point of growfs leaves an
//! image `fsck -p` brings back to the old size or the new one, with every
//! file; what growfs must refuse, it refuses. In process on memory images
//! (with the crash recorder), and through the command on an image file and
//! on a GPT partition enlarged with sgdisk.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use testkit::*;
use ufs::dev::{BlockDevice, MemDevice};
use ufs::fsck::{fsck, FsckMode};
use ufs::growfs::{growfs, GrowParams};
use ufs::{Cred, Fs, MountOptions};
use ufs_format::{Endian, Ufs};

mod common;
use common::*;

const R: Cred = Cred::ROOT;

/// A memory device of `device` bytes holding a file system of `fs` bytes
/// (format `f`, byte order `e`, `bsize`/`fsize`), with some files in it;
/// the device and what the tree holds.
fn filled(
    device: u64,
    fs: u64,
    f: Ufs,
    e: Endian,
    bsize: u64,
    fsize: u64,
    group_frags: Option<u64>,
) -> (Arc<MemDevice>, BTreeMap<PathBuf, Node>) {
    let mem = Arc::new(MemDevice::new(device));
    ufs::newfs::newfs(
        &*mem,
        &ufs::newfs::NewfsParams {
            size: Some(fs),
            bsize,
            fsize,
            format: f,
            endian: e,
            maxblkspercg: group_frags,
            seed: Some(3),
            time: Some(1_700_000_000),
            ..Default::default()
        },
    )
    .unwrap();
    let fsys = Fs::open(Box::new(mem.clone()), MountOptions::default()).unwrap();
    let root = fsys.root();
    for d in 0..6u32 {
        let dir = fsys
            .mkdir(root, format!("d{d}").as_bytes(), 0o755, R)
            .unwrap();
        for i in 0..40u32 {
            let n = fsys
                .mknod(dir.ino, format!("f{i}").as_bytes(), 0o100644, 0, R)
                .unwrap();
            let len = (i as usize * 997) % 20_000 + 1;
            let data: Vec<u8> = (0..len).map(|k| (k as u32 ^ i ^ d) as u8).collect();
            fsys.write(n.ino, 0, &data, R).unwrap();
        }
    }
    fsys.symlink(root, b"link", b"d0/f1", R).unwrap();
    let tree = walk_fs(&fsys);
    fsys.unmount().unwrap();
    (mem, tree)
}

/// fsck -n finds nothing.
fn assert_clean(dev: &dyn BlockDevice, what: &str) {
    let r = fsck(dev, FsckMode::Check).unwrap();
    assert!(
        r.findings.is_empty(),
        "{what}: fsck -n found {:#?}",
        r.findings
    );
}

fn fs_bytes(dev: &dyn BlockDevice) -> u64 {
    let (_, g, _) = ufs::fs::read_superblock(dev).unwrap();
    g.size * g.fsize
}

/// After growing: clean, the same tree, and a file larger than the old
/// file system fits.
fn check_grown(mem: &Arc<MemDevice>, tree: &BTreeMap<PathBuf, Node>, old: u64, what: &str) {
    assert_clean(&**mem, what);
    let fsys = Fs::open(Box::new(mem.clone()), MountOptions::default()).unwrap();
    assert_same_tree(tree, &walk_fs(&fsys), what);
    let st = fsys.statfs();
    assert!(
        st.bfree * st.frsize > old,
        "{what}: {} bytes free after growing from {old}",
        st.bfree * st.frsize
    );
    let big = fsys.mknod(fsys.root(), b"big", 0o100644, 0, R).unwrap();
    let chunk = vec![0xa5u8; 1 << 20];
    let mut at = 0;
    while at < old + (old / 2) {
        fsys.write(big.ino, at, &chunk, R).unwrap();
        at += chunk.len() as u64;
    }
    fsys.unmount().unwrap();
    assert_clean(&**mem, &format!("{what}, after filling the new space"));
}

#[test]
fn growing_keeps_every_file_and_the_new_space_is_usable() {
    // UFS2 little-endian, large groups: the summary area stays.
    // UFS1 big-endian and UFS2 with 4 KiB blocks and small fragments:
    // many groups, so the summary area must move to the first new one.
    for (f, e, bsize, fsize, old, new) in [
        (Ufs::Ufs2, Endian::Little, 32768, 4096, 64 << 20, 640 << 20),
        (Ufs::Ufs1, Endian::Big, 4096, 512, 16 << 20, 300 << 20),
        (Ufs::Ufs2, Endian::Little, 4096, 512, 16 << 20, 300 << 20),
    ] {
        let what = format!("{f:?} {e:?} {bsize}/{fsize}, {old} to {new}");
        let (mem, tree) = filled(new, old, f, e, bsize, fsize, None);
        let rep = growfs(&*mem, &GrowParams::default()).unwrap();
        assert_eq!(fs_bytes(&*mem), rep.new_bytes);
        assert!(
            rep.new_bytes > new - (64 << 20),
            "{what}: {}",
            rep.summary()
        );
        if bsize == 4096 {
            assert!(rep.summary_moved_to.is_some(), "{what}: {}", rep.summary());
        }
        check_grown(&mem, &tree, old, &what);
    }
}

#[test]
fn a_power_cut_during_growfs_leaves_the_old_or_the_new_file_system() {
    for (f, e) in [(Ufs::Ufs2, Endian::Little), (Ufs::Ufs1, Endian::Big)] {
        // Groups of 1,024 fragments: 16 in the old file system, 80 after,
        // so the summary area moves.
        let (old, new) = (8u64 << 20, 40u64 << 20);
        let (mem, tree) = filled(new, old, f, e, 4096, 512, Some(1024));
        let rec = ufs_sim::crash::RecordingDevice::new(mem.clone()).unwrap();
        let rep = growfs(&rec, &GrowParams::default()).unwrap();
        assert!(rep.summary_moved_to.is_some());
        let states = rec.states(usize::MAX, 60, 7);
        let (mut at_old, mut at_new) = (0, 0);
        for s in &states {
            let what = format!("{f:?} {e:?}, {} state at write {}", s.kind, s.crash_point);
            let img = rec.image(s).unwrap();
            let r = fsck(&img, FsckMode::Preen)
                .unwrap_or_else(|err| panic!("{what}: fsck -p could not run: {err}"));
            assert!(
                r.findings.iter().all(|x| x.fixed) && r.clean,
                "{what}: preen left {r:#?}"
            );
            assert_clean(&img, &what);
            let size = fs_bytes(&img);
            if size == old {
                at_old += 1;
            } else {
                assert_eq!(size, rep.new_bytes, "{what}: a size that is neither");
                at_new += 1;
            }
            let img = Arc::new(img);
            let fsys = Fs::open(Box::new(img.clone()), MountOptions::default()).unwrap();
            assert_same_tree(&tree, &walk_fs(&fsys), &what);
        }
        assert!(at_old > 0 && at_new > 0, "{at_old} old, {at_new} new");
        eprintln!(
            "{f:?} {e:?}: {} crash states, {at_old} the old file system, {at_new} the new",
            states.len()
        );
    }
}

#[test]
fn growfs_refuses_what_it_must() {
    let (mem, _) = filled(
        64 << 20,
        32 << 20,
        Ufs::Ufs2,
        Endian::Little,
        32768,
        4096,
        None,
    );
    let err = |p: GrowParams| growfs(&*mem, &p).unwrap_err().to_string();
    assert!(err(GrowParams {
        size: Some(16 << 20),
        ..Default::default()
    })
    .contains("does not shrink"));
    assert!(err(GrowParams {
        size: Some(32 << 20),
        ..Default::default()
    })
    .contains("already"));
    assert!(err(GrowParams {
        size: Some(128 << 20),
        ..Default::default()
    })
    .contains("larger than the device"));
    // A dry run writes nothing.
    let before = {
        let mut b = vec![0u8; 64 << 20];
        mem.read_at(0, &mut b).unwrap();
        b
    };
    let rep = growfs(
        &*mem,
        &GrowParams {
            dry_run: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(!rep.written && rep.new_bytes > 32 << 20);
    let mut after = vec![0u8; 64 << 20];
    mem.read_at(0, &mut after).unwrap();
    assert!(before == after, "a dry run wrote");
    // Not clean: changed and never unmounted.
    let fsys = Fs::open(Box::new(mem.clone()), MountOptions::default()).unwrap();
    fsys.mkdir(fsys.root(), b"late", 0o755, R).unwrap();
    fsys.sync().unwrap();
    drop(fsys);
    assert!(err(GrowParams::default()).contains("not clean"));
}

#[test]
fn the_command_grows_an_image_file_and_a_partition_enlarged_with_sgdisk() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir_all(src.join("a/b")).unwrap();
    for i in 0..200 {
        std::fs::write(src.join(format!("a/b/f{i}")), vec![i as u8; i * 300]).unwrap();
    }
    // An image file, 1 GiB to 10 GiB.
    let img = tmp.path().join("grow.img");
    run(ufskit()
        .args(["makefs", "-q", "-s", "1G"])
        .arg(&img)
        .arg(&src));
    run(ufskit().args(["growfs", "-s", "10G"]).arg(&img));
    assert_eq!(std::fs::metadata(&img).unwrap().len(), 10 << 30);
    assert_fsck_clean(&img);
    let out = tmp.path().join("out");
    run(ufskit().arg("extract").arg("-q").arg(&img).arg(&out));
    assert_same_tree(&walk_host(&src), &walk_host(&out), "grown image");
    // A mounted (in use) image is refused.
    let held = ufs::Fs::open_path(&img, Default::default()).unwrap();
    let busy = ufskit()
        .args(["growfs", "-s", "11G"])
        .arg(&img)
        .output()
        .unwrap();
    assert!(!busy.status.success());
    assert!(String::from_utf8_lossy(&busy.stderr).contains("in use"));
    held.unmount().unwrap();
    drop(held);
    assert_eq!(
        std::fs::metadata(&img).unwrap().len(),
        10 << 30,
        "a refused growfs left the image lengthened"
    );

    // A GPT disk whose UFS partition is enlarged with sgdisk.
    if !prerequisite(
        Path::new("/usr/sbin/sgdisk").exists() || Path::new("/sbin/sgdisk").exists(),
        "the_command_grows_an_image_file_and_a_partition_enlarged_with_sgdisk",
        "sgdisk (gdisk)",
    ) {
        return;
    }
    let disk = tmp.path().join("disk.img");
    std::fs::File::create(&disk)
        .unwrap()
        .set_len(2 << 30)
        .unwrap();
    let sg = |args: &[&str]| {
        run(std::process::Command::new("sgdisk").args(args).arg(&disk));
    };
    sg(&["-n", "1:2048:+256M", "-t", "1:a503"]);
    let part = PathBuf::from(format!("{}:p1", disk.display()));
    run(ufskit().args(["newfs", "-n", "-s", "256M"]).arg(&part));
    // Fill it through the engine on the partition.
    {
        let fsys = ufs::Fs::open_path(&part, Default::default()).unwrap();
        copy_in(&fsys, &src, fsys.root());
        fsys.unmount().unwrap();
    }
    sg(&["-d", "1"]);
    sg(&["-n", "1:2048:+1536M", "-t", "1:a503"]);
    let grown = run(ufskit().arg("growfs").arg(&part));
    assert!(
        String::from_utf8_lossy(&grown.stdout).contains("cylinder groups"),
        "{}",
        String::from_utf8_lossy(&grown.stdout)
    );
    let r = run(ufskit().args(["fsck", "-n"]).arg(&part));
    assert!(String::from_utf8_lossy(&r.stdout).contains("CLEAN"));
    let out = tmp.path().join("out-part");
    run(ufskit().arg("extract").arg("-q").arg(&part).arg(&out));
    assert_same_tree(&walk_host(&src), &walk_host(&out), "grown partition");
    let (dev, _) = ufs::dev::partition::open_image(&part, false).unwrap();
    let size = fs_bytes(&*dev);
    assert!(
        size > 1500 << 20 && size <= 1536 << 20,
        "the partition's file system is {size} bytes"
    );
}
