//! What a FreeBSD disk may carry that ufskit does not write: snapshots and
//! gjournal refuse a read-write mount with a message naming the FreeBSD
//! command that removes them (read-only works); journaled soft updates
//! (SU+J, the installer's default) mount read-write with the journal flag
//! off on disk while mounted, so a crash never leaves a stale journal that
//! FreeBSD's fsck would replay over our changes.
use std::sync::Arc;
use ufs::dev::{BlockDevice, MemDevice};
use ufs::fs::read_superblock;
use ufs::fsck::{fsck, FsckMode};
use ufs::{Cred, ErrorKind, Fs, Ino, MountOptions};
use ufs_format::{FS_DOSOFTDEP, FS_GJOURNAL, FS_SUJ};

fn image(edit: impl FnOnce(&mut ufs_format::sb::Superblock)) -> Arc<MemDevice> {
    let dev = testkit::mem_image(128 << 20);
    let (mut sb, _, loc) = read_superblock(&*dev).unwrap();
    edit(&mut sb);
    dev.write_at(loc, &sb.to_disk_bytes()).unwrap();
    dev
}

fn open(dev: &Arc<MemDevice>, read_only: bool, force: bool) -> ufs::Result<Fs> {
    Fs::open(
        Box::new(dev.clone()),
        MountOptions {
            read_only,
            force,
            ..Default::default()
        },
    )
}

fn flags(dev: &Arc<MemDevice>) -> i32 {
    read_superblock(&**dev).unwrap().0.fs_flags()
}

#[test]
fn snapshots_refuse_writing_and_read_only_works() {
    let dev = image(|sb| sb.set_fs_snapinum(0, 5));
    let e = open(&dev, false, false)
        .err()
        .expect("a read-write mount must be refused");
    assert_eq!(e.kind, ErrorKind::NotSupported);
    assert!(
        e.to_string().contains("snapshot") && e.to_string().contains(".snap"),
        "{e}"
    );
    let fs = open(&dev, true, false).unwrap();
    assert!(fs.readdir(fs.root(), 0, 100).unwrap().len() >= 2);
}

#[test]
fn gjournal_refuses_writing_and_read_only_works() {
    let dev = image(|sb| sb.set_fs_flags(sb.fs_flags() | FS_GJOURNAL));
    let e = open(&dev, false, false)
        .err()
        .expect("a read-write mount must be refused");
    assert_eq!(e.kind, ErrorKind::NotSupported);
    assert!(e.to_string().contains("tunefs -J disable"), "{e}");
    assert!(open(&dev, true, false).is_ok());
}

#[test]
fn journaled_soft_updates_lend_the_journal_flag_while_mounted() {
    let dev = image(|sb| sb.set_fs_flags(sb.fs_flags() | FS_SUJ | FS_DOSOFTDEP));
    // A clean unmount gives the flag back.
    let fs = open(&dev, false, false).unwrap();
    assert_eq!(
        flags(&dev) & FS_SUJ,
        0,
        "the journal flag stays on disk while we write"
    );
    assert_ne!(flags(&dev) & FS_DOSOFTDEP, 0);
    fs.mknod(fs.root(), b"a", 0o100644, 0, Cred::ROOT).unwrap();
    fs.unmount().unwrap();
    drop(fs);
    assert_ne!(
        flags(&dev) & FS_SUJ,
        0,
        "a clean unmount restores the journal flag"
    );
    // A crash (no unmount) leaves it off: FreeBSD's fsck then checks in
    // full instead of replaying a journal that knows nothing of our
    // changes; ours repairs what the crash left.
    let fs = open(&dev, false, false).unwrap();
    let d = fs.mkdir(fs.root(), b"d", 0o755, Cred::ROOT).unwrap();
    for i in 0..50 {
        fs.mknod(d.ino, format!("f{i}").as_bytes(), 0o100644, 0, Cred::ROOT)
            .unwrap();
    }
    fs.sync().unwrap();
    drop(fs);
    assert_eq!(flags(&dev) & FS_SUJ, 0);
    let rep = fsck(&*dev, FsckMode::Preen).unwrap();
    assert_eq!(
        rep.exit_code(),
        0,
        "preen after the crash: {:?}",
        rep.findings
    );
    let rep = fsck(&*dev, FsckMode::Check).unwrap();
    assert!(rep.findings.is_empty(), "{:?}", rep.findings);
}

#[test]
fn journaled_soft_updates_not_clean_refuse_even_forced() {
    let dev = image(|sb| {
        sb.set_fs_flags(sb.fs_flags() | FS_SUJ | FS_DOSOFTDEP);
        sb.set_fs_clean(0);
    });
    let e = open(&dev, false, true).err().expect("refused");
    assert!(e.to_string().contains("journal"), "{e}");
    // Without force it mounts read-only, as any unclean file system.
    let fs = open(&dev, false, false).unwrap();
    assert!(fs.is_read_only());
}

fn set_flags(fs: &Fs, ino: Ino, flags: u32, cred: Cred) -> ufs::Result<ufs::Attr> {
    fs.setattr(
        ino,
        &ufs::SetAttr {
            flags: Some(flags),
            ..Default::default()
        },
        cred,
    )
}

#[test]
fn file_flags_are_honoured_as_freebsd_does() {
    use ufs_format::{SF_APPEND, SF_IMMUTABLE, SF_NOUNLINK, UF_APPEND, UF_IMMUTABLE};
    let dev = image(|_| {});
    let fs = open(&dev, false, false).unwrap();
    let r = fs.root();
    let root = Cred::ROOT;
    let eperm = |res: ufs::Result<()>, what: &str| {
        let e = res
            .err()
            .unwrap_or_else(|| panic!("{what} must be refused"));
        assert_eq!(e.kind, ErrorKind::Permission, "{what}: {e}");
    };
    for flag in [SF_IMMUTABLE, UF_IMMUTABLE] {
        let f = fs.mknod(r, b"imm", 0o100644, 0, root).unwrap();
        fs.write(f.ino, 0, b"data", root).unwrap();
        set_flags(&fs, f.ino, flag, root).unwrap();
        eperm(fs.unlink(r, b"imm"), "unlink of an immutable file");
        eperm(
            fs.rename(r, b"imm", r, b"other", ufs::RenameMode::Replace),
            "rename",
        );
        eperm(fs.write(f.ino, 0, b"x", root).map(|_| ()), "write");
        eperm(fs.write(f.ino, 4, b"x", root).map(|_| ()), "append");
        eperm(fs.link(f.ino, r, b"second").map(|_| ()), "link");
        let chmod = ufs::SetAttr {
            mode: Some(0o600),
            ..Default::default()
        };
        eperm(fs.setattr(f.ino, &chmod, root).map(|_| ()), "chmod");
        let trunc = ufs::SetAttr {
            size: Some(0),
            ..Default::default()
        };
        eperm(fs.setattr(f.ino, &trunc, root).map(|_| ()), "truncate");
        assert_eq!(fs.read(f.ino, 0, 10).unwrap(), b"data");
        // Clearing the flag makes it an ordinary file again.
        set_flags(&fs, f.ino, 0, root).unwrap();
        fs.unlink(r, b"imm").unwrap();
    }
    // Append-only: writes at the end only, no other change.
    for flag in [SF_APPEND, UF_APPEND] {
        let f = fs.mknod(r, b"log", 0o100644, 0, root).unwrap();
        fs.write(f.ino, 0, b"one", root).unwrap();
        set_flags(&fs, f.ino, flag, root).unwrap();
        fs.write(f.ino, 3, b"two", root).unwrap();
        eperm(fs.write(f.ino, 0, b"X", root).map(|_| ()), "overwrite");
        eperm(fs.unlink(r, b"log"), "unlink");
        assert_eq!(fs.read(f.ino, 0, 10).unwrap(), b"onetwo");
        set_flags(&fs, f.ino, 0, root).unwrap();
        fs.unlink(r, b"log").unwrap();
    }
    // No-unlink: everything but removing the name.
    let f = fs.mknod(r, b"keep", 0o100644, 0, root).unwrap();
    set_flags(&fs, f.ino, SF_NOUNLINK, root).unwrap();
    fs.write(f.ino, 0, b"ok", root).unwrap();
    eperm(fs.unlink(r, b"keep"), "unlink of a no-unlink file");
    // Directories: immutable takes no entry, append-only loses none.
    let d = fs.mkdir(r, b"d", 0o755, root).unwrap();
    fs.mknod(d.ino, b"in", 0o100644, 0, root).unwrap();
    set_flags(&fs, d.ino, SF_IMMUTABLE, root).unwrap();
    eperm(
        fs.mknod(d.ino, b"new", 0o100644, 0, root).map(|_| ()),
        "create in an immutable directory",
    );
    eperm(
        fs.unlink(d.ino, b"in"),
        "unlink from an immutable directory",
    );
    set_flags(&fs, d.ino, SF_APPEND, root).unwrap();
    fs.mknod(d.ino, b"new", 0o100644, 0, root).unwrap();
    eperm(
        fs.unlink(d.ino, b"in"),
        "unlink from an append-only directory",
    );
    // Only root changes system flags.
    let user = Cred {
        uid: 1000,
        gid: 1000,
    };
    let g = fs.mknod(r, b"mine", 0o100644, 0, root).unwrap();
    eperm(
        set_flags(&fs, g.ino, SF_IMMUTABLE, user).map(|_| ()),
        "a user setting a system flag",
    );
    set_flags(&fs, g.ino, UF_IMMUTABLE, user).unwrap();
    // The flags survive a remount.
    fs.unmount().unwrap();
    drop(fs);
    let fs = open(&dev, false, false).unwrap();
    eperm(fs.unlink(r, b"mine"), "unlink after remount");
    let rep = {
        fs.unmount().unwrap();
        drop(fs);
        fsck(&*dev, FsckMode::Check).unwrap()
    };
    assert!(rep.findings.is_empty(), "{:?}", rep.findings);
}

/// A snapshot file as FreeBSD's `ffs_snapshot` leaves it: its block map
/// holds real copies, `BLK_NOCOPY` (1: free when the snapshot was taken)
/// and `BLK_SNAP` (2: a snapshot's own block). fsck checks such a file
/// system in full, counting neither value as a block, and finds it clean;
/// a real problem beside the snapshot is still found.
#[test]
fn fsck_checks_snapshot_block_maps() {
    let dev = image(|_| {});
    let fs = open(&dev, false, false).unwrap();
    let (_, g, _) = read_superblock(&*dev).unwrap();
    let snap = fs
        .mknod(fs.root(), b"snap", 0o100400, 0, Cred::ROOT)
        .unwrap()
        .ino;
    // Blocks 0 and 4 copied, 1 to 3 holes the patch below fills with the
    // special values (ffs_snapshot allocates the last block itself).
    fs.write(snap, 0, &vec![7u8; g.bsize as usize], Cred::ROOT)
        .unwrap();
    fs.write(snap, 4 * g.bsize, &vec![7u8; g.bsize as usize], Cred::ROOT)
        .unwrap();
    let other = fs
        .mknod(fs.root(), b"other", 0o100644, 0, Cred::ROOT)
        .unwrap()
        .ino;
    fs.write(other, 0, b"x", Cred::ROOT).unwrap();
    fs.unmount().unwrap();
    drop(fs);
    testkit::patch_inode(&*dev, snap, |di| {
        di.set_di_flags(di.di_flags() | ufs_format::SF_SNAPSHOT);
        di.set_di_db(1, 1); // BLK_NOCOPY
        di.set_di_db(2, 2); // BLK_SNAP
        di.set_di_db(3, 1);
    });
    let (mut sb, _, loc) = read_superblock(&*dev).unwrap();
    sb.set_fs_snapinum(0, snap.get() as u32);
    dev.write_at(loc, &sb.to_disk_bytes()).unwrap();
    let rep = fsck(&*dev, FsckMode::Check).unwrap();
    assert!(rep.findings.is_empty(), "{:?}", rep.findings);
    // Outside a snapshot the same values are bad block numbers.
    testkit::patch_inode(&*dev, other, |di| di.set_di_db(1, 2));
    testkit::patch_inode(&*dev, other, |di| di.set_di_size(2 * g.bsize));
    let rep = fsck(&*dev, FsckMode::Check).unwrap();
    assert!(
        rep.findings.iter().any(|f| f.ino == Some(other.get())),
        "{:?}",
        rep.findings
    );
    assert!(
        rep.findings.iter().all(|f| f.ino != Some(snap.get())),
        "{:?}",
        rep.findings
    );
}

/// `tunefs -a` / `-N`: FreeBSD's kernel enforces the ACLs ufskit stores only
/// when the superblock says so (FS_ACLS, FS_NFS4ACLS); the two are
/// exclusive, as FreeBSD's tunefs makes them.
#[test]
fn tunefs_sets_the_acl_flags_freebsd_enforces() {
    use ufs::tunefs::{print, tunefs, TuneParams};
    use ufs_format::{FS_ACLS, FS_NFS4ACLS};
    let dev = image(|_| {});
    tunefs(
        &*dev,
        &TuneParams {
            acls: Some(true),
            ..Default::default()
        },
    )
    .unwrap();
    assert_ne!(flags(&dev) & FS_ACLS, 0);
    assert!(print(&*dev)
        .unwrap()
        .contains("POSIX.1e ACLs: (-a)                         enabled"));
    let e = tunefs(
        &*dev,
        &TuneParams {
            nfs4acls: Some(true),
            ..Default::default()
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("mutually exclusive"), "{e}");
    assert_eq!(flags(&dev) & FS_NFS4ACLS, 0);
    tunefs(
        &*dev,
        &TuneParams {
            acls: Some(false),
            nfs4acls: Some(true),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(flags(&dev) & (FS_ACLS | FS_NFS4ACLS), FS_NFS4ACLS);
    let rep = fsck(&*dev, FsckMode::Check).unwrap();
    assert!(rep.findings.is_empty(), "{:?}", rep.findings);
}
