//! The four write modes and vmiodir as a user meets them: every workload
//! ends fsck clean with the right contents in every mode; soft updates
//! delays what normal mode writes at once; releases wait for their
//! pointers yet a full disk still takes the space back; the mode follows
//! the superblock's soft-updates flag unless a mount option says
//! otherwise; with vmiodir off directory blocks stay within their pool.
use std::sync::Arc;
use ufs::dev::{CountingDevice, MemDevice};
use ufs::fsck::{fsck, FsckMode};
use ufs::newfs::{newfs, NewfsParams};
use ufs::order::{Barrier, WriteMode};
use ufs::{Cred, ErrorKind, Fs, Ino, MountOptions, RenameMode, SetAttr};

fn image(bytes: u64, softupdates: bool) -> Arc<MemDevice> {
    let dev = Arc::new(MemDevice::new(bytes));
    newfs(
        &*dev,
        &NewfsParams {
            seed: Some(1),
            time: Some(1_700_000_000),
            softupdates,
            ..Default::default()
        },
    )
    .unwrap();
    dev
}

fn opts(mode: Option<WriteMode>) -> MountOptions {
    MountOptions {
        write_mode: mode,
        seed: Some(5),
        ..Default::default()
    }
}

fn data(seed: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| ((i as u64 * 31 + seed * 7) % 251) as u8)
        .collect()
}

fn file(fs: &Fs, dir: Ino, name: &str, bytes: &[u8]) -> Ino {
    let ino = fs
        .mknod(dir, name.as_bytes(), 0o100644, 0, Cred::ROOT)
        .unwrap()
        .ino;
    // In pieces, so fragments grow, move and become blocks.
    for (i, c) in bytes.chunks(3000).enumerate() {
        fs.write(ino, (i * 3000) as u64, c, Cred::ROOT).unwrap();
    }
    ino
}

fn read_all(fs: &Fs, path: &str) -> Vec<u8> {
    let ino = fs.resolve(std::path::Path::new(path)).unwrap();
    let size = fs.getattr(ino).unwrap().size;
    fs.read(ino, 0, size as usize).unwrap()
}

/// Creates, writes, links, renames (files and directories, across
/// directories, over existing targets, exchanges), truncates, unlinks and
/// removes directories.
fn workload(fs: &Fs) {
    let r = fs.root();
    let a = fs.mkdir(r, b"a", 0o755, Cred::ROOT).unwrap().ino;
    let b = fs.mkdir(r, b"b", 0o755, Cred::ROOT).unwrap().ino;
    let deep = fs.mkdir(a, b"deep", 0o755, Cred::ROOT).unwrap().ino;
    fs.mkdir(deep, b"leaf", 0o755, Cred::ROOT).unwrap();
    for i in 0..40u64 {
        file(
            fs,
            a,
            &format!("f{i}"),
            &data(i, ((i * 7919) % 20_000) as usize),
        );
    }
    // A file reaching into the indirect blocks.
    let big = file(fs, b, "big", &data(99, 700_000));
    fs.fsync(big).unwrap();
    let f0 = fs.lookup(a, b"f0").unwrap().ino;
    fs.link(f0, b, b"f0-link").unwrap();
    for i in 0..40u64 {
        let n = format!("f{i}");
        match i % 5 {
            0 => fs
                .rename(a, n.as_bytes(), b, n.as_bytes(), RenameMode::Replace)
                .unwrap(),
            1 => fs.unlink(a, n.as_bytes()).unwrap(),
            2 => {
                let ino = fs.lookup(a, n.as_bytes()).unwrap().ino;
                let s = SetAttr {
                    size: Some(1234),
                    ..Default::default()
                };
                fs.setattr(ino, &s, Cred::ROOT).unwrap();
            }
            _ => {}
        }
    }
    // Over an existing file, and an exchange.
    fs.rename(a, b"f3", a, b"f4", RenameMode::Replace).unwrap();
    // An exchange, in every mode (the ordered ones through a hidden third
    // name that is gone at the end).
    fs.rename(a, b"f8", b, b"f0", RenameMode::Exchange).unwrap();
    // A directory moves to another parent, over an empty directory.
    fs.mkdir(b, b"target", 0o755, Cred::ROOT).unwrap();
    fs.rename(a, b"deep", b, b"target", RenameMode::Replace)
        .unwrap();
    fs.mkdir(b, b"gone", 0o755, Cred::ROOT).unwrap();
    fs.rmdir(b, b"gone").unwrap();
    let s = SetAttr {
        size: Some(40_000),
        ..Default::default()
    };
    fs.setattr(big, &s, Cred::ROOT).unwrap();
}

#[test]
fn every_mode_ends_fsck_clean_with_the_right_contents() {
    let modes = WriteMode::ALL
        .iter()
        .flat_map(|&m| [(m, Barrier::Flush), (m, Barrier::Write)]);
    for (mode, barrier) in modes {
        let dev = image(32 << 20, false);
        let o = MountOptions {
            barrier: Some(barrier),
            ..opts(Some(mode))
        };
        let fs = Fs::open(Box::new(dev.clone()), o).unwrap();
        workload(&fs);
        fs.unmount().unwrap();
        drop(fs);
        let rep = fsck(&*dev, FsckMode::Check).unwrap();
        assert!(rep.findings.is_empty(), "{mode:?}: {:?}", rep.findings);
        let fs = Fs::open(Box::new(dev.clone()), opts(Some(mode))).unwrap();
        assert_eq!(read_all(&fs, "b/big"), data(99, 40_000), "{mode:?}");
        assert_eq!(
            read_all(&fs, "a/f2"),
            data(2, 15_838)[..1234].to_vec(),
            "{mode:?}"
        );
        assert_eq!(
            read_all(&fs, "a/f4"),
            data(3, 23_757 % 20_000),
            "{mode:?}: f3 renamed over f4"
        );
        let (f0, f8) = (data(0, 0), data(8, (8 * 7919) % 20_000));
        assert_eq!(read_all(&fs, "b/f0"), f8, "{mode:?}: exchange");
        assert_eq!(read_all(&fs, "a/f8"), f0, "{mode:?}: exchange");
        assert_eq!(
            fs.lookup(fs.root(), b"a").unwrap().nlink,
            2,
            "{mode:?}: deep moved out"
        );
        let t = fs.resolve(std::path::Path::new("b/target")).unwrap();
        assert!(fs.lookup(t, b"leaf").is_ok(), "{mode:?}");
        assert_eq!(fs.lookup(fs.root(), b"b").unwrap().nlink, 3, "{mode:?}");
        assert_eq!(
            fs.lookup(fs.resolve(std::path::Path::new("b")).unwrap(), b"f0-link")
                .unwrap()
                .nlink,
            2,
            "{mode:?}"
        );
    }
}

/// Writes reaching the device while creating files, without any sync.
fn writes_for_creates(mode: WriteMode) -> (u64, u64) {
    writes_for_creates_with(mode, None)
}

fn writes_for_creates_with(mode: WriteMode, barrier: Option<Barrier>) -> (u64, u64) {
    let dev = image(32 << 20, false);
    let counted = Arc::new(CountingDevice::new(dev.clone()));
    let o = MountOptions {
        barrier,
        ..opts(Some(mode))
    };
    let fs = Fs::open(Box::new(counted.clone()), o).unwrap();
    let before = counted.stats();
    let d = fs.mkdir(fs.root(), b"d", 0o755, Cred::ROOT).unwrap().ino;
    for i in 0..200 {
        fs.mknod(d, format!("n{i}").as_bytes(), 0o100644, 0, Cred::ROOT)
            .unwrap();
    }
    let after = counted.stats();
    let order = fs.stats(None, false).unwrap().order;
    assert_eq!(order.mode, mode.name());
    fs.unmount().unwrap();
    assert!(
        fsck(&*dev, FsckMode::Check).unwrap().findings.is_empty(),
        "{mode:?}"
    );
    (after.writes - before.writes, after.flushes - before.flushes)
}

#[test]
fn soft_updates_delay_what_normal_mode_writes_at_once() {
    let (soft, soft_flushes) = writes_for_creates(WriteMode::Softdep);
    let (async_w, _) = writes_for_creates(WriteMode::Async);
    let (normal, normal_flushes) = writes_for_creates(WriteMode::Normal);
    let (sync, _) = writes_for_creates(WriteMode::Sync);
    // Normal forces each new inode out before its name: at least one
    // synchronous write per create. By default it waits for the write's
    // completion (FreeBSD's bwrite), asking the device for no flush.
    assert!(
        normal >= 200 && normal_flushes <= 2,
        "normal: {normal} writes, {normal_flushes} flushes"
    );
    // With flush barriers each of those writes is followed by a flush.
    let (normal_fb, normal_fb_flushes) =
        writes_for_creates_with(WriteMode::Normal, Some(Barrier::Flush));
    assert!(
        normal_fb >= 200 && normal_fb_flushes >= 200,
        "normal, barrier=flush: {normal_fb} writes, {normal_fb_flushes} flushes"
    );
    // Sync mode writes every changed block of every operation.
    assert!(sync > normal, "sync {sync} vs normal {normal}");
    // Soft updates and async write only new inode blocks (a barrier write
    // each in soft updates) until the next sync.
    assert!(
        soft <= 10 && soft_flushes <= 10,
        "softdep: {soft} writes, {soft_flushes} flushes"
    );
    assert!(async_w <= 2, "async: {async_w} writes");
}

#[test]
fn mode_follows_the_superblock_unless_an_option_says_otherwise() {
    for (softupdates, option, want) in [
        (true, None, WriteMode::Softdep),
        (false, None, WriteMode::Normal),
        (true, Some(WriteMode::Async), WriteMode::Async),
        (false, Some(WriteMode::Sync), WriteMode::Sync),
    ] {
        let dev = image(16 << 20, softupdates);
        let fs = Fs::open(Box::new(dev), opts(option)).unwrap();
        assert_eq!(fs.stats(None, false).unwrap().order.mode, want.name());
    }
}

/// fsck_ffs trusts the maps of a file system flagged for soft updates
/// (preen reads no inode past the last one the map marks used); the other
/// modes do not keep the maps in that order, so while such a mount is
/// live the flag is off on disk, and a clean unmount puts it back. A
/// crash in between leaves an image fsck checks in full, and preen
/// repairs.
#[test]
fn another_mode_on_a_soft_updates_file_system_lends_its_flag() {
    use ufs_format::FS_DOSOFTDEP;
    let flag = |dev: &MemDevice| {
        let (sb, _, _) = ufs::fs::read_superblock(dev).unwrap();
        sb.fs_flags() & FS_DOSOFTDEP != 0
    };
    for mode in [WriteMode::Normal, WriteMode::Sync, WriteMode::Async] {
        let dev = image(16 << 20, true);
        assert!(flag(&dev));
        let fs = Fs::open(Box::new(dev.clone()), opts(Some(mode))).unwrap();
        assert!(!flag(&dev), "{}: flag left on while mounted", mode.name());
        let d = fs.mkdir(fs.root(), b"d", 0o755, Cred::ROOT).unwrap().ino;
        for i in 0..40 {
            file(&fs, d, &format!("f{i}"), &data(i, 3000));
        }
        // A crash now (nothing synced): preen repairs what the mode left.
        let crashed = MemDevice::from_vec(dev.snapshot());
        assert!(!flag(&crashed));
        if mode != WriteMode::Async {
            let rep = fsck(&crashed, FsckMode::Preen).unwrap();
            assert!(
                rep.clean,
                "{}: preen after a crash: {:?}",
                mode.name(),
                rep.findings
            );
        }
        fs.unmount().unwrap();
        drop(fs);
        assert!(flag(&dev), "{}: flag not restored at unmount", mode.name());
        assert!(fsck(&*dev, FsckMode::Check).unwrap().findings.is_empty());
    }
    // Soft updates keep it.
    let dev = image(16 << 20, true);
    let fs = Fs::open(Box::new(dev.clone()), opts(None)).unwrap();
    assert!(flag(&dev));
    fs.unmount().unwrap();
}

#[test]
fn a_full_disk_takes_back_released_blocks_before_failing() {
    let dev = image(16 << 20, true);
    let fs = Fs::open(Box::new(dev.clone()), opts(None)).unwrap();
    let r = fs.root();
    let chunk = vec![7u8; 1 << 20];
    let fill = |name: &[u8]| -> u64 {
        let ino = fs.mknod(r, name, 0o100644, 0, Cred::ROOT).unwrap().ino;
        let mut off = 0;
        loop {
            match fs.write(ino, off, &chunk, Cred::ROOT) {
                Ok(n) if n == chunk.len() => off += n as u64,
                Ok(n) => return off + n as u64,
                Err(e) => {
                    assert_eq!(e.kind, ErrorKind::NoSpace);
                    return off;
                }
            }
        }
    };
    let first = fill(b"one");
    assert!(first > 8 << 20, "filled {first} bytes");
    fs.unlink(r, b"one").unwrap();
    // The blocks wait for the cleared inode to reach the disk; the second
    // fill must get them anyway.
    let second = fill(b"two");
    assert!(
        second + (1 << 20) >= first,
        "second fill {second} after first {first}"
    );
    fs.unmount().unwrap();
    assert!(fsck(&*dev, FsckMode::Check).unwrap().findings.is_empty());
}

/// vmiodir off gives directory blocks FreeBSD 4.x's buffer space of a
/// machine with four times the cache in memory (35.3 MiB for a 64 MiB
/// cache, the paper's 256 MB machine): a working set of directories
/// larger than that, which the cache holds whole with vmiodir on, is read
/// again on every walk with it off.
#[test]
fn vmiodir_off_keeps_directory_blocks_in_the_buffer_space() {
    assert_eq!(ufs::fs::freebsd4_hibufspace(256 << 20), 37_060_608);
    assert_eq!(ufs::fs::dir_pool_bytes(64 << 20), 37_060_608);
    // Up to 64 MB of memory the buffer space covers a quarter of it, the
    // cache this model gives such a machine: no smaller room.
    assert!(ufs::fs::dir_pool_bytes(16 << 20) >= 15 << 20);
    let dirs = 11_000;
    let walk = |vmiodir: bool| {
        let dev = image(256 << 20, false);
        let o = MountOptions {
            vmiodir,
            cache_bytes: 64 << 20,
            write_mode: Some(WriteMode::Async),
            ..opts(None)
        };
        let fs = Fs::open(Box::new(dev.clone()), o).unwrap();
        let r = fs.root();
        let mut inos = Vec::new();
        for i in 0..dirs {
            let d = fs
                .mkdir(r, format!("d{i}").as_bytes(), 0o755, Cred::ROOT)
                .unwrap()
                .ino;
            inos.push(d);
        }
        fs.drop_caches().unwrap();
        let before = fs.cache_stats().kind(ufs::cache::BlockKind::Dir).reads;
        for _round in 0..3 {
            for &d in &inos {
                assert_eq!(fs.readdir(d, 0, 10).unwrap().len(), 2);
            }
        }
        let st = fs.cache_stats();
        if !vmiodir {
            let lim = st.dir_pool_limit.expect("a pool with vmiodir off");
            assert_eq!(lim, ufs::fs::dir_pool_bytes(64 << 20));
            assert!(st.dir_pool_bytes.unwrap() <= lim, "{st:?}");
            assert!(st.evictions > 0, "{st:?}");
        } else {
            assert!(st.dir_pool_limit.is_none());
        }
        fs.unmount().unwrap();
        st.kind(ufs::cache::BlockKind::Dir).reads - before
    };
    let on = walk(true);
    let off = walk(false);
    // 11,000 directory blocks of 4 KiB (43 MiB) fit the 64 MiB cache but
    // not the 35 MiB buffer space.
    assert!(
        on <= dirs as u64 + 1,
        "vmiodir on: {on} directory reads (each block once, root included)"
    );
    assert!(
        off >= 3 * dirs as u64 - 100,
        "vmiodir off: {off} directory reads"
    );
}

/// With vmiodir off the buffer space is shared, as in FreeBSD 4.5: every
/// block read passes through the same `nbuf` buffers (2,302 on the
/// paper's 256 MB machine), so reading 40 MiB of files pushes the
/// directories walked before out of it, and the next walk reads them
/// again. With a pool of their own (an ablation of the evaluation) or with
/// vmiodir on (the 64 MiB cache holds both) they stay.
#[test]
fn vmiodir_off_directories_compete_with_the_files_read() {
    assert_eq!(ufs::fs::dir_pool_buffers(64 << 20), 2_302);
    let dirs = 300u64;
    let walk_read_walk = |vmiodir: bool, own: bool| {
        let dev = image(256 << 20, false);
        let o = MountOptions {
            vmiodir,
            cache_bytes: 64 << 20,
            readahead: 0,
            write_mode: Some(WriteMode::Async),
            ..opts(None)
        };
        let fs = Fs::open(Box::new(dev.clone()), o).unwrap();
        if own {
            fs.set_dir_pool(ufs::fs::dir_pool_bytes(64 << 20), ufs::cache::DirSpace::Own);
        }
        let r = fs.root();
        let (mut inos, mut files) = (Vec::new(), Vec::new());
        for i in 0..dirs {
            let d = fs
                .mkdir(r, format!("d{i}").as_bytes(), 0o755, Cred::ROOT)
                .unwrap()
                .ino;
            files.push(file(&fs, d, "f", &data(i, 140 << 10)));
            inos.push(d);
        }
        fs.sync().unwrap();
        fs.drop_caches().unwrap();
        let walk = || {
            for &d in &inos {
                assert_eq!(fs.readdir(d, 0, 10).unwrap().len(), 3);
            }
        };
        walk();
        let before = fs.cache_stats().kind(ufs::cache::BlockKind::Dir).reads;
        for (i, &f) in files.iter().enumerate() {
            assert_eq!(fs.read(f, 0, 140 << 10).unwrap(), data(i as u64, 140 << 10));
        }
        walk();
        let st = fs.cache_stats();
        if !vmiodir && !own {
            assert!(st.dir_pool_shared_bytes.is_some(), "{st:?}");
        }
        fs.unmount().unwrap();
        drop(fs);
        assert!(fsck(&*dev, FsckMode::Check).unwrap().findings.is_empty());
        st.kind(ufs::cache::BlockKind::Dir).reads - before
    };
    let shared = walk_read_walk(false, false);
    let own = walk_read_walk(false, true);
    let on = walk_read_walk(true, false);
    assert!(
        shared >= dirs - 10,
        "shared space: {shared} directory reads"
    );
    assert_eq!(own, 0, "a pool of their own");
    assert_eq!(on, 0, "vmiodir on");
}

/// Normal mode is FFS without soft updates: about one device flush per
/// created file (the inode before its name), not the five it took when
/// maps and data were ordered too (issue "fast by default": 48,000
/// fdatasyncs for one extract of 8,800 entries).
#[test]
fn normal_mode_flushes_about_once_per_created_file() {
    let dev = image(64 << 20, false);
    let o = MountOptions {
        barrier: Some(Barrier::Flush),
        ..opts(Some(WriteMode::Normal))
    };
    let fs = Fs::open(Box::new(dev.clone()), o).unwrap();
    let d = fs.mkdir(fs.root(), b"d", 0o755, Cred::ROOT).unwrap().ino;
    let before = fs.stats(None, false).unwrap().order.flushes;
    let n = 400u64;
    for i in 0..n {
        let ino = file(&fs, d, &format!("f{i}"), &data(i, 5000));
        let s = SetAttr {
            mode: Some(0o644),
            uid: Some(1),
            gid: Some(1),
            ..Default::default()
        };
        fs.setattr(ino, &s, Cred::ROOT).unwrap();
    }
    let flushes = fs.stats(None, false).unwrap().order.flushes - before;
    assert!(
        flushes <= n * 3 / 2,
        "{flushes} flushes for {n} files (create, write, chown)"
    );
    fs.unmount().unwrap();
    drop(fs);
    assert!(fsck(&*dev, FsckMode::Check).unwrap().findings.is_empty());
}

/// By default normal mode orders by completion, as FFS does: the same
/// work asks the device for no flush at all, until an fsync, which still
/// flushes (what fsync promised survives a power cut in every mode).
#[test]
fn normal_mode_by_default_flushes_only_when_asked() {
    let dev = image(64 << 20, false);
    let counted = Arc::new(CountingDevice::new(dev.clone()));
    let fs = Fs::open(Box::new(counted.clone()), opts(Some(WriteMode::Normal))).unwrap();
    let st = fs.stats(None, false).unwrap().order;
    assert_eq!((st.mode.as_str(), st.barrier.as_str()), ("normal", "write"));
    let d = fs.mkdir(fs.root(), b"d", 0o755, Cred::ROOT).unwrap().ino;
    let before = counted.stats();
    let mut last = Ino::NONE;
    for i in 0..400u64 {
        last = file(&fs, d, &format!("f{i}"), &data(i, 5000));
    }
    let mid = counted.stats();
    assert!(
        mid.writes - before.writes >= 400,
        "{} writes",
        mid.writes - before.writes
    );
    assert_eq!(mid.flushes, before.flushes, "no flush without fsync");
    fs.fsync(last).unwrap();
    assert!(counted.stats().flushes > mid.flushes, "fsync flushes");
    fs.unmount().unwrap();
    drop(fs);
    assert!(fsck(&*dev, FsckMode::Check).unwrap().findings.is_empty());
}

/// Soft updates' ordering state is bounded by the cache: past one
/// undurable change per 512 bytes of cache, an operation's end writes
/// everything out (it held 300,000 changes, 200 MB, for a 100k-file
/// directory between two syncer runs).
#[test]
fn softdep_ordering_state_stays_within_the_cache_bound() {
    let dev = image(256 << 20, true);
    let o = MountOptions {
        cache_bytes: 1 << 20,
        ..opts(None)
    };
    let fs = Fs::open(Box::new(dev.clone()), o).unwrap();
    let d = fs.mkdir(fs.root(), b"d", 0o755, Cred::ROOT).unwrap().ino;
    // One per 512 bytes of cache, at least 4,096.
    let bound = 4096;
    let mut most = 0;
    for i in 0..12_000u64 {
        fs.mknod(
            d,
            format!("entry-{i:05}").as_bytes(),
            0o100644,
            0,
            Cred::ROOT,
        )
        .unwrap();
        let pending = fs.stats(None, false).unwrap().order.pending_now;
        most = most.max(pending);
        assert!(
            pending <= bound,
            "{pending} changes pending after {i} creates"
        );
    }
    assert!(most > bound / 2, "the bound was never approached ({most})");
    fs.unmount().unwrap();
    drop(fs);
    assert!(fsck(&*dev, FsckMode::Check).unwrap().findings.is_empty());
}

/// Space whose release waits for its pointers to be durably gone counts
/// as free in statfs (FreeBSD adds fs_pendingblocks and
/// fs_pendinginodes): after `rm` of a big file under soft updates, `df`
/// shows the space at once, not after the next sync.
#[test]
fn statfs_counts_releases_that_wait() {
    let dev = image(64 << 20, true);
    let fs = Fs::open(Box::new(dev.clone()), opts(None)).unwrap();
    let r = fs.root();
    let before = fs.statfs();
    let ino = file(&fs, r, "big", &data(1, 8 << 20));
    fs.sync().unwrap();
    let full = fs.statfs();
    assert!(full.bfree + (8 << 20) / full.frsize <= before.bfree + 16);
    let _ = ino;
    fs.unlink(r, b"big").unwrap();
    let after = fs.statfs();
    assert!(
        after.bfree + 16 >= before.bfree && after.ffree == before.ffree,
        "bfree {} before, {} with the file, {} right after rm; ffree {} / {}",
        before.bfree,
        full.bfree,
        after.bfree,
        before.ffree,
        after.ffree
    );
    fs.unmount().unwrap();
}

/// A read that updates the access time changes the inode inside an
/// operation, as lazily as FreeBSD's IN_ACCESS: even a sync mount writes
/// nothing for it at the read, yet the new time is what getattr shows and
/// what the image holds after the unmount, fsck clean.
#[test]
fn an_access_time_is_a_lazy_change_even_in_sync_mode() {
    let dev = image(64 << 20, false);
    let counted = Arc::new(CountingDevice::new(dev.clone()));
    let o = MountOptions {
        atime: ufs::Atime::Strict,
        ..opts(Some(WriteMode::Sync))
    };
    let fs = Fs::open(Box::new(counted.clone()), o.clone()).unwrap();
    let ino = file(&fs, fs.root(), "f", &data(3, 20_000));
    fs.fsync(ino).unwrap();
    let old = ufs::SetAttr {
        atime: Some(ufs::TimeSet::At(ufs::Time {
            sec: 1_000,
            nsec: 0,
        })),
        ..Default::default()
    };
    fs.setattr(ino, &old, Cred::ROOT).unwrap();
    assert_eq!(fs.getattr(ino).unwrap().atime.sec, 1_000);
    let before = counted.stats();
    assert_eq!(fs.read(ino, 0, 100).unwrap(), data(3, 20_000)[..100]);
    assert_eq!(counted.stats().writes, before.writes, "the read wrote");
    let read_at = fs.getattr(ino).unwrap().atime.sec;
    assert!(read_at > 1_000, "atime not updated: {read_at}");
    fs.unmount().unwrap();
    drop(fs);
    assert!(fsck(&*dev, FsckMode::Check).unwrap().findings.is_empty());
    let fs = Fs::open(Box::new(dev.clone()), o).unwrap();
    assert_eq!(fs.getattr(ino).unwrap().atime.sec, read_at);
}
