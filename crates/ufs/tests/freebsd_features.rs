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
use ufs::newfs::{newfs, NewfsParams};
use ufs::{Cred, ErrorKind, Fs, MountOptions};
use ufs_format::{FS_DOSOFTDEP, FS_GJOURNAL, FS_SUJ};

fn image(edit: impl FnOnce(&mut ufs_format::sb::Superblock)) -> Arc<MemDevice> {
    let dev = Arc::new(MemDevice::new(128 << 20));
    newfs(
        &*dev,
        &NewfsParams {
            seed: Some(1),
            time: Some(1_700_000_000),
            ..Default::default()
        },
    )
    .unwrap();
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
