//! Crash bugs found through the real mount, reproduced step by step on
//! the engine: each test drives the buffer cache into the order of writes
//! the mount produced (the buffer daemon writing a group, an eviction
//! forcing a directory block out), then takes the image a `kill -9` of the
//! daemon leaves at that moment (every write issued so far) and checks it
//! as FreeBSD's `fsck_ffs -p` would.
use std::sync::Arc;
use ufs::dev::MemDevice;
use ufs::fsck::{fsck, FsckMode};
use ufs::newfs::{newfs, NewfsParams};
use ufs::order::WriteMode;
use ufs::{Cred, Fs, Ino, MountOptions};

/// A soft-updates file system with 4 KiB blocks: 16 inodes per inode block,
/// so a few dozen files cross several of them.
fn softdep_fs() -> (Arc<MemDevice>, Fs) {
    let dev = Arc::new(MemDevice::new(16 << 20));
    newfs(
        &*dev,
        &NewfsParams {
            seed: Some(1),
            time: Some(1_700_000_000),
            bsize: 4096,
            fsize: 512,
            softupdates: true,
            ..Default::default()
        },
    )
    .unwrap();
    let fs = Fs::open(
        Box::new(dev.clone()),
        MountOptions {
            write_mode: Some(WriteMode::Softdep),
            seed: Some(3),
            ..Default::default()
        },
    )
    .unwrap();
    (dev, fs)
}

/// What `fsck -n` finds on the image a `kill -9` would leave now (every
/// write issued) that the soft-updates guarantee does not allow.
fn damage_after_kill(dev: &MemDevice) -> Vec<String> {
    let img = MemDevice::from_vec(dev.snapshot());
    let rep = fsck(&img, FsckMode::Check).unwrap();
    let beyond = rep
        .findings
        .iter()
        .filter(|f| !f.within_crash_guarantee())
        .map(|f| format!("{}: {}", f.pass, f.message))
        .collect();
    if rep.findings.iter().all(|f| f.within_crash_guarantee()) {
        assert!(
            fsck(&img, FsckMode::Preen).unwrap().clean,
            "preen repairs the crash image"
        );
    }
    beyond
}

/// `cg_initediblk` of the group holding `ino`, as it is in memory.
fn initediblk(fs: &Fs, ino: Ino) -> u64 {
    let cg = fs.geometry().ino_to_cg(ino.get());
    fs.cylinder_group(cg).unwrap().cg_initediblk() as u64
}

/// Issue "crash safety through the real mount": FreeBSD's fsck reads no
/// inode of a group past its `cg_initediblk`, so a name of an inode in a
/// freshly initialised inode block must not reach the disk before the
/// group that counts the block. The engine held the group's counter back
/// (rolled back) until the block was written, but a name needed only the
/// group's newest change, which can be younger than the held counter: once
/// the group went out with the counter rolled back, the name could follow
/// it, and preen stopped at "UNALLOCATED I=... MODE=100644".
#[test]
fn a_name_never_reaches_the_disk_before_the_group_counts_its_inode_block() {
    let (dev, fs) = softdep_fs();
    let root = fs.root();
    let ipg = fs.geometry().ipg;
    let mut i = 0;
    let mut create = |fs: &Fs| {
        i += 1;
        fs.mknod(root, format!("f{i:03}").as_bytes(), 0o100644, 0, Cred::ROOT)
            .unwrap()
            .ino
    };
    // X: a file whose allocation initialises the next inode block B,
    // made while the group is clean (as right after the syncer ran).
    let (x, b_first) = loop {
        fs.sync().unwrap();
        let before = initediblk(&fs, root);
        let ino = create(&fs);
        let after = initediblk(&fs, ino);
        if after > before {
            break (ino, before);
        }
    };
    let group = x.get() / ipg;
    let cg_addr = fs.buffer_daemon().cg_block(group);
    // Files up to the last inode before B.
    let mut last = x;
    while last.get() % ipg + 1 < b_first {
        last = create(&fs);
        assert_eq!(
            last.get() / ipg,
            group,
            "files stay in their directory's group"
        );
    }
    // The buffer daemon writes the group before B (B is young): the
    // counter covering B is rolled back in that write.
    fs.buffer_daemon().write(cg_addr).unwrap();
    // Y: the next file, the first inode of B.
    let y = create(&fs);
    assert_eq!(y.get() % ipg, b_first, "inodes are handed out in order");
    // An eviction of the root's directory block forces out everything the
    // new name needs, then the name.
    let addr = fs.block_of(root, 0).unwrap();
    let bd = fs.buffer_daemon();
    let newest = bd.evict(addr).unwrap();
    assert!(bd.is_durable(newest));
    // kill -9 now: the image holds every write issued.
    let beyond = damage_after_kill(&dev);
    assert!(
        beyond.is_empty(),
        "inode {y} (in the block initialised with inode {x}): {beyond:?}"
    );
    drop(fs);
}

/// Found by the crash tester's threaded workload: a directory that grows
/// past its fragment is moved to a new place; the pointer to the new
/// place is a change of the directory's inode. A name removed afterwards
/// is removed at the new place, but until that pointer is on disk the
/// disk still reaches the old place, which holds the name. The link count
/// (and the freed inode) waited only for the removal, so the disk could
/// show the name on a zeroed inode (UNALLOCATED).
#[test]
fn a_removal_in_a_moved_directory_block_waits_for_the_pointer_to_it() {
    let (dev, fs) = softdep_fs();
    let root = fs.root();
    let mk = |dir: Ino, name: &str, len: usize| {
        let ino = fs
            .mknod(dir, name.as_bytes(), 0o100644, 0, Cred::ROOT)
            .unwrap()
            .ino;
        if len > 0 {
            fs.write(ino, 0, &vec![7u8; len], Cred::ROOT).unwrap();
        }
        ino
    };
    let d = fs.mkdir(root, b"d", 0o755, Cred::ROOT).unwrap().ino;
    // Fill the inode block the directory's inode is in, so that the
    // victim's inode lives in another block.
    for i in 0..20 {
        mk(d, &format!("p{i:02}"), 0);
    }
    let victim = mk(d, "victim", 100);
    // A file whose fragment follows the directory's: the directory cannot
    // grow in place.
    mk(root, "neighbour", 512);
    fs.sync().unwrap();
    let block_of = |fs: &Fs| (fs.block_of(d, 0).unwrap(), fs.inode(d).unwrap().di_size());
    let (before, size) = block_of(&fs);
    // Names until the directory outgrows its fragment run and moves.
    let mut i = 0;
    while block_of(&fs).0 == before {
        mk(d, &format!("a-longer-name-to-fill-the-block-{i:03}"), 0);
        i += 1;
        assert!(i < 200, "directory of {size} bytes never moved");
    }
    let (moved_to, _) = block_of(&fs);
    // The buffer daemon writes the moved block (not the inode block that
    // points at it), and something else's flush follows.
    fs.buffer_daemon().write(moved_to).unwrap();
    fs.buffer_daemon().flush().unwrap();
    // The victim's name goes at the new place; its inode is zeroed.
    fs.unlink(d, b"victim").unwrap();
    // Its inode block is forced out (an eviction), with what it waits for.
    fs.buffer_daemon()
        .evict(fs.buffer_daemon().inode_block(victim))
        .unwrap();
    let beyond = damage_after_kill(&dev);
    assert!(
        beyond.is_empty(),
        "directory moved from {before} to {moved_to}: {beyond:?}"
    );
    drop(fs);
}

/// Directories moved out of each other (each move makes the old parent's
/// link count wait for the moved one's `..`) and then removed, between
/// syncs: the sync finishes, the unmount marks the file system clean, and
/// it checks clean. (The cycle pjdfstest found through the mount, dead
/// directories' blocks riding on each other's zeroing, is reproduced at
/// the cache in `cache::tests`.)
#[test]
fn removed_directories_never_leave_a_sync_waiting_in_a_cycle() {
    let (dev, fs) = softdep_fs();
    let root = fs.root();
    let mode = ufs::RenameMode::Replace;
    let a = fs.mkdir(root, b"a", 0o755, Cred::ROOT).unwrap().ino;
    fs.mkdir(a, b"b", 0o755, Cred::ROOT).unwrap();
    // Both made and on disk (the mount's syncer ran here).
    fs.sync().unwrap();
    // b moves out of a: a's link count waits for b's "..".
    fs.rename(a, b"b", root, b"b", mode).unwrap();
    let b = fs.lookup(root, b"b").unwrap().ino;
    // a moves into b and out again: b's link count waits for a's "..".
    fs.rename(root, b"a", b, b"a", mode).unwrap();
    fs.rename(b, b"a", root, b"a", mode).unwrap();
    fs.rmdir(root, b"a").unwrap();
    fs.rmdir(root, b"b").unwrap();
    fs.sync().expect("sync after removing both directories");
    fs.unmount().expect("unmount");
    drop(fs);
    let rep = fsck(&*dev, FsckMode::Check).unwrap();
    assert!(rep.findings.is_empty(), "{:?}", rep.findings);
}
