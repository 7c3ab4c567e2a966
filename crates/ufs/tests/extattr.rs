//! Extended attributes in FreeBSD's format: set, get, list and remove by
//! namespace with FreeBSD's rules; the area on disk is what `ffs_setextattr`
//! writes (records in `di_extb`, `di_extsize` bytes, counted in
//! `di_blocks`); it grows to two blocks and shrinks back; it is freed with
//! its inode; a damaged area is refused by the engine and cleared by fsck.
use std::sync::Arc;
use ufs::dev::{BlockDevice, MemDevice};
use ufs::fs::read_superblock;
use ufs::fsck::{fsck, FsckMode};
use ufs::{Cred, ErrorKind, Fs, Ino, MountOptions, XattrNs, XattrSet};
use ufs_format::extattr::{parse_area, ExtAttr, EXTATTR_NAMESPACE_SYSTEM, EXTATTR_NAMESPACE_USER};
use ufs_format::{Dinode, DINODE_SIZE};

const USER: Cred = Cred {
    uid: 1000,
    gid: 1000,
};

fn image() -> Arc<MemDevice> {
    testkit::mem_image(64 << 20)
}

fn mount(dev: &Arc<MemDevice>) -> Fs {
    Fs::open(Box::new(dev.clone()), MountOptions::default()).unwrap()
}

fn unmount(fs: Fs) {
    fs.unmount().unwrap();
}

fn check_clean(dev: &Arc<MemDevice>) {
    let rep = fsck(&**dev, FsckMode::Check).unwrap();
    assert!(rep.findings.is_empty(), "{:?}", rep.findings);
}

/// The inode as it is on the device.
fn disk_inode(dev: &Arc<MemDevice>, ino: Ino) -> Dinode {
    let (_, g, _) = read_superblock(&**dev).unwrap();
    let off = g.ino_to_fsba(ino.get()) * g.fsize + g.ino_to_fsbo(ino.get()) * DINODE_SIZE as u64;
    let mut b = vec![0u8; DINODE_SIZE];
    dev.read_at(off, &mut b).unwrap();
    Dinode::from_bytes(&b)
}

/// The inode's attribute area as it is on the device.
fn disk_area(dev: &Arc<MemDevice>, ino: Ino) -> Vec<u8> {
    let (_, g, _) = read_superblock(&**dev).unwrap();
    let di = disk_inode(dev, ino);
    let size = di.di_extsize() as u64;
    let mut out = Vec::new();
    for j in 0..size.div_ceil(g.bsize) {
        let n = (size - j * g.bsize).min(g.bsize) as usize;
        let mut b = vec![0u8; n];
        dev.read_at(di.di_extb(j as usize) * g.fsize, &mut b)
            .unwrap();
        out.extend_from_slice(&b);
    }
    out
}

fn file(fs: &Fs, name: &str) -> Ino {
    fs.mknod(fs.root(), name.as_bytes(), 0o100666, 0, Cred::ROOT)
        .unwrap()
        .ino
}

/// A new file `f` holding the user attribute `a` = `value`.
fn file_with_attr(fs: &Fs, value: &[u8]) -> Ino {
    let f = file(fs, "f");
    fs.setxattr(f, XattrNs::User, b"a", value, XattrSet::Either, Cred::ROOT)
        .unwrap();
    f
}

#[test]
fn attributes_follow_freebsd_rules_and_survive_remount() {
    let dev = image();
    let fs = mount(&dev);
    let f = file(&fs, "f");
    let set =
        |ns, name: &str, v: &[u8], how, cred| fs.setxattr(f, ns, name.as_bytes(), v, how, cred);
    set(XattrNs::User, "comment", b"hello", XattrSet::Either, USER).unwrap();
    set(
        XattrNs::System,
        "mac_biba",
        &[7; 60],
        XattrSet::Either,
        Cred::ROOT,
    )
    .unwrap();
    // XATTR_CREATE and XATTR_REPLACE.
    let e = set(XattrNs::User, "comment", b"x", XattrSet::Create, USER).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Exists);
    let e = set(XattrNs::User, "absent", b"x", XattrSet::Replace, USER).unwrap_err();
    assert_eq!(e.kind, ErrorKind::NoData);
    assert_eq!(e.errno(), libc::ENODATA);
    set(
        XattrNs::User,
        "comment",
        b"hello, world",
        XattrSet::Replace,
        USER,
    )
    .unwrap();
    // The system namespace is the superuser's.
    let e = set(XattrNs::System, "x", b"1", XattrSet::Either, USER).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Permission);
    let e = fs
        .getxattr(f, XattrNs::System, b"mac_biba", USER)
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Permission);
    assert_eq!(
        fs.listxattr(f, USER).unwrap(),
        vec![(XattrNs::User, b"comment".to_vec())]
    );
    assert_eq!(fs.listxattr(f, Cred::ROOT).unwrap().len(), 2);
    let e = fs.getxattr(f, XattrNs::User, b"absent", USER).unwrap_err();
    assert_eq!(e.kind, ErrorKind::NoData);
    let e = fs
        .removexattr(f, XattrNs::User, b"absent", USER)
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::NoData);
    let e = set(XattrNs::User, &"n".repeat(256), b"", XattrSet::Either, USER).unwrap_err();
    assert_eq!(e.kind, ErrorKind::NameTooLong);
    // A change is a change of the inode: its ctime moves.
    let before = fs.getattr(f).unwrap().ctime;
    std::thread::sleep(std::time::Duration::from_millis(20));
    set(XattrNs::User, "t", b"", XattrSet::Either, USER).unwrap();
    let after = fs.getattr(f).unwrap().ctime;
    assert!((after.sec, after.nsec) > (before.sec, before.nsec));
    // New attributes go on files and directories only.
    let l = fs.symlink(fs.root(), b"l", b"f", Cred::ROOT).unwrap().ino;
    let e = fs
        .setxattr(l, XattrNs::User, b"a", b"1", XattrSet::Either, Cred::ROOT)
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotSupported);
    let d = fs.mkdir(fs.root(), b"d", 0o755, Cred::ROOT).unwrap().ino;
    fs.setxattr(
        d,
        XattrNs::User,
        b"dir",
        b"yes",
        XattrSet::Either,
        Cred::ROOT,
    )
    .unwrap();
    unmount(fs);
    check_clean(&dev);

    // On disk: FreeBSD's records, in the order ffs_setextattr leaves them
    // (a replaced attribute goes to the end).
    let area = disk_area(&dev, f);
    let di = disk_inode(&dev, f);
    assert_eq!(di.di_extsize() as usize, area.len());
    assert_eq!(
        parse_area(ufs_format::Endian::Little, &area).unwrap(),
        vec![
            ExtAttr {
                namespace: EXTATTR_NAMESPACE_SYSTEM,
                name: b"mac_biba".to_vec(),
                value: vec![7; 60]
            },
            ExtAttr {
                namespace: EXTATTR_NAMESPACE_USER,
                name: b"comment".to_vec(),
                value: b"hello, world".to_vec()
            },
            ExtAttr {
                namespace: EXTATTR_NAMESPACE_USER,
                name: b"t".to_vec(),
                value: vec![]
            },
        ]
    );
    let fs = mount(&dev);
    assert_eq!(
        fs.getxattr(f, XattrNs::User, b"comment", USER).unwrap(),
        b"hello, world"
    );
    assert_eq!(fs.getxattr(d, XattrNs::User, b"dir", USER).unwrap(), b"yes");
    // The whole area in fragments: di_blocks counts them with the data's.
    let (_, g, _) = read_superblock(&*dev).unwrap();
    let data = g.fragroundup(0);
    assert_eq!(
        fs.getattr(f).unwrap().blocks,
        (data + g.fragroundup(area.len() as u64)) / 512
    );
    unmount(fs);
}

#[test]
fn the_area_grows_to_two_blocks_shrinks_and_is_freed_with_its_inode() {
    let dev = image();
    let fs = mount(&dev);
    let (_, g, _) = read_superblock(&*dev).unwrap();
    let f = file(&fs, "f");
    fs.write(f, 0, &[1; 3000], Cred::ROOT).unwrap();
    fs.sync().unwrap();
    let free0 = fs.statfs().bfree;
    let big = vec![9u8; g.bsize as usize + 100];
    fs.setxattr(f, XattrNs::User, b"big", &big, XattrSet::Either, Cred::ROOT)
        .unwrap();
    let len = ufs_format::extattr::record_len(3, big.len()) as u64;
    let frags = g.frag + g.numfrags(g.fragroundup(len - g.bsize));
    assert_eq!(fs.statfs().bfree, free0 - frags);
    // Past what two blocks hold: ENOSPC, and nothing changes.
    let e = fs
        .setxattr(
            f,
            XattrNs::User,
            b"more",
            &vec![0; g.bsize as usize],
            XattrSet::Either,
            Cred::ROOT,
        )
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::NoSpace);
    assert_eq!(
        fs.getxattr(f, XattrNs::User, b"big", Cred::ROOT).unwrap(),
        big
    );
    fs.sync().unwrap();
    assert_eq!(fs.statfs().bfree, free0 - frags);
    unmount(fs);
    check_clean(&dev);
    assert_eq!(disk_inode(&dev, f).di_extsize() as u64, len);

    let fs = mount(&dev);
    fs.setxattr(
        f,
        XattrNs::User,
        b"big",
        b"small",
        XattrSet::Either,
        Cred::ROOT,
    )
    .unwrap();
    fs.sync().unwrap();
    assert_eq!(fs.statfs().bfree, free0 - 1, "one fragment left");
    assert_eq!(
        fs.read(f, 0, 4000).unwrap(),
        vec![1; 3000],
        "data untouched"
    );
    fs.removexattr(f, XattrNs::User, b"big", Cred::ROOT)
        .unwrap();
    fs.sync().unwrap();
    assert_eq!(fs.statfs().bfree, free0);
    assert_eq!(fs.listxattr(f, Cred::ROOT).unwrap(), vec![]);
    // Freed with the inode.
    fs.setxattr(f, XattrNs::User, b"big", &big, XattrSet::Either, Cred::ROOT)
        .unwrap();
    let d = fs.mkdir(fs.root(), b"d", 0o755, Cred::ROOT).unwrap().ino;
    fs.setxattr(
        d,
        XattrNs::User,
        b"a",
        &[3; 500],
        XattrSet::Either,
        Cred::ROOT,
    )
    .unwrap();
    fs.sync().unwrap();
    let free1 = fs.statfs().bfree;
    fs.unlink(fs.root(), b"f").unwrap();
    fs.forget(f, 1).unwrap();
    fs.rmdir(fs.root(), b"d").unwrap();
    fs.sync().unwrap();
    assert!(fs.statfs().bfree > free1 + frags, "the areas were freed");
    unmount(fs);
    check_clean(&dev);
}

#[test]
fn immutable_and_append_only_files_keep_their_attributes() {
    let dev = image();
    let fs = mount(&dev);
    let f = file_with_attr(&fs, b"1");
    for flag in [ufs_format::SF_IMMUTABLE, ufs_format::SF_APPEND] {
        fs.setattr(
            f,
            &ufs::SetAttr {
                flags: Some(flag),
                ..Default::default()
            },
            Cred::ROOT,
        )
        .unwrap();
        let e = fs
            .setxattr(f, XattrNs::User, b"b", b"2", XattrSet::Either, Cred::ROOT)
            .unwrap_err();
        assert_eq!(e.kind, ErrorKind::Permission);
        let e = fs
            .removexattr(f, XattrNs::User, b"a", Cred::ROOT)
            .unwrap_err();
        assert_eq!(e.kind, ErrorKind::Permission);
        assert_eq!(
            fs.getxattr(f, XattrNs::User, b"a", Cred::ROOT).unwrap(),
            b"1"
        );
    }
    unmount(fs);
}

#[test]
fn a_damaged_area_is_refused_and_fsck_clears_it() {
    let dev = image();
    let fs = mount(&dev);
    let f = file_with_attr(&fs, b"value");
    unmount(fs);
    let (_, g, _) = read_superblock(&*dev).unwrap();
    // A record length that is not a multiple of 8.
    let at = disk_inode(&dev, f).di_extb(0) * g.fsize;
    dev.write_at(at, &13u32.to_le_bytes()).unwrap();

    let fs = mount(&dev);
    let e = fs.getxattr(f, XattrNs::User, b"a", Cred::ROOT).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Corrupt);
    assert_eq!(e.errno(), libc::EUCLEAN);
    let e = fs
        .setxattr(f, XattrNs::User, b"b", b"1", XattrSet::Either, Cred::ROOT)
        .unwrap_err();
    assert_eq!(
        e.kind,
        ErrorKind::Corrupt,
        "a damaged area is not rewritten"
    );
    assert_eq!(fs.read(f, 0, 10).unwrap(), b"", "the file itself reads");
    unmount(fs);

    let rep = fsck(&*dev, FsckMode::Check).unwrap();
    assert!(
        rep.findings
            .iter()
            .any(|x| x.message.contains("CORRUPT EXTENDED ATTRIBUTES")),
        "{:?}",
        rep.findings
    );
    let rep = fsck(&*dev, FsckMode::Yes).unwrap();
    assert_eq!(rep.exit_code(), 0, "{:?}", rep.findings);
    check_clean(&dev);
    let fs = mount(&dev);
    assert_eq!(fs.listxattr(f, Cred::ROOT).unwrap(), vec![]);
    fs.setxattr(f, XattrNs::User, b"b", b"1", XattrSet::Either, Cred::ROOT)
        .unwrap();
    unmount(fs);
    check_clean(&dev);
}

/// A damaged area is refused whole: nothing of it is released and nothing
/// newly allocated is left behind, so later changes to the inode cannot
/// free blocks it still points at (found in review: a stray second
/// pointer used to make the release stop half-way).
#[test]
fn a_stray_pointer_releases_nothing() {
    let dev = image();
    let fs = mount(&dev);
    let f = file_with_attr(&fs, b"0123456789");
    let other = file(&fs, "other");
    fs.write(other, 0, b"x", Cred::ROOT).unwrap();
    unmount(fs);
    let stray = disk_inode(&dev, other).di_db(0);
    testkit::patch_inode(&*dev, f, |di| di.set_di_extb(1, stray));
    let fs = mount(&dev);
    let free = fs.statfs().bfree;
    let e = fs
        .setxattr(f, XattrNs::User, b"b", b"1", XattrSet::Either, Cred::ROOT)
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Corrupt);
    fs.setattr(
        f,
        &ufs::SetAttr {
            mode: Some(0o100600),
            ..Default::default()
        },
        Cred::ROOT,
    )
    .unwrap();
    fs.sync().unwrap();
    assert_eq!(fs.statfs().bfree, free, "nothing allocated or freed");
    unmount(fs);
    let rep = fsck(&*dev, FsckMode::Check).unwrap();
    assert!(
        rep.findings.iter().all(|x| x.ino == Some(f.get())
                || x.message.contains("DUP")
                || x.message.contains("dup")
                // The damage met leaves the file system marked for fsck.
                || x.message.starts_with("FILE SYSTEM NOT MARKED CLEAN")),
        "{:?}",
        rep.findings
    );
    assert!(
        rep.findings
            .iter()
            .any(|x| x.message.contains("CORRUPT EXTENDED ATTRIBUTES")),
        "{:?}",
        rep.findings
    );
    assert!(
        !rep.findings
            .iter()
            .any(|x| x.message.contains("MARKED FREE") || x.message.contains("MISSING")),
        "{:?}",
        rep.findings
    );
    fsck(&*dev, FsckMode::Yes).unwrap();
    let rep = fsck(&*dev, FsckMode::Check).unwrap();
    assert!(rep.findings.is_empty(), "{:?}", rep.findings);
    let fs = mount(&dev);
    assert_eq!(
        fs.read(other, 0, 10).unwrap(),
        b"x",
        "the other file keeps its block"
    );
    unmount(fs);
}

/// A write takes Linux's capability attribute (`security.capability`,
/// kept in the system namespace) off the file, whoever writes, as Linux's
/// kernel does; other attributes stay, and the area shrinks on disk.
#[test]
fn a_write_drops_the_capability_attribute_only() {
    let dev = image();
    let fs = mount(&dev);
    let f = file_with_attr(&fs, b"kept");
    let cap = b"security.capability";
    fs.setxattr(
        f,
        XattrNs::System,
        cap,
        &[1, 0, 0, 2, 0x20, 0, 0, 0],
        XattrSet::Either,
        Cred::ROOT,
    )
    .unwrap();
    let g = file(&fs, "g");
    fs.write(g, 0, b"no attributes at all", Cred::ROOT).unwrap();
    fs.write_killing(f, 0, b"data", Cred::ROOT, false).unwrap();
    let err = fs
        .getxattr(f, XattrNs::System, cap, Cred::ROOT)
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::NoData, "{err}");
    assert_eq!(
        fs.getxattr(f, XattrNs::User, b"a", Cred::ROOT).unwrap(),
        b"kept"
    );
    assert_eq!(fs.read(f, 0, 4).unwrap(), b"data");
    unmount(fs);
    let names: Vec<_> = parse_area(ufs_format::Endian::Little, &disk_area(&dev, f))
        .unwrap()
        .into_iter()
        .map(|a: ExtAttr| (a.namespace, a.name))
        .collect();
    assert_eq!(names, vec![(EXTATTR_NAMESPACE_USER, b"a".to_vec())]);
    check_clean(&dev);
}
