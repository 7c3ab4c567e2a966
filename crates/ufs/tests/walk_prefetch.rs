//! A directory read asks the device for what a tree walk reads next (the
//! entries' inode blocks, each subdirectory's first block), so a cold
//! `find` waits for the disk far less often; a device that takes no hints
//! (the modeled disk) is left exactly as it was.
use std::sync::Arc;
use ufs::dev::{BlockDevice, MemDevice};
use ufs::{Cred, Fs, MountOptions};

// A memory device that takes hints (or not) and records them, and the
// reads it serves.
use testkit::Recorded as Hinted;

const R: Cred = Cred::ROOT;

/// An image with /top holding `n` subdirectories and as many files; the
/// byte address of each subdirectory's first block.
fn image(n: usize) -> (Arc<MemDevice>, Vec<u64>) {
    let mem = testkit::mem_image(256 << 20);
    let fs = Fs::open(Box::new(mem.clone()), MountOptions::default()).unwrap();
    let top = fs.mkdir(fs.root(), b"top", 0o755, R).unwrap();
    let mut firsts = Vec::new();
    for i in 0..n {
        let d = fs
            .mkdir(top.ino, format!("d{i}").as_bytes(), 0o755, R)
            .unwrap();
        fs.mknod(top.ino, format!("f{i}").as_bytes(), 0o100644, 0, R)
            .unwrap();
        firsts.push(d.ino);
    }
    let fsize = fs.geometry().fsize;
    let firsts = firsts
        .into_iter()
        .map(|ino| fs.inode(ino).unwrap().di_db(0) * fsize)
        .collect();
    fs.unmount().unwrap();
    (mem, firsts)
}

/// Lists /top through a device that takes hints (or not), under a
/// read-ahead layer of `window` bytes if given: the hints the listing
/// gave, and the block size.
fn walk_top(
    mem: &Arc<MemDevice>,
    takes_hints: bool,
    window: Option<u64>,
) -> (Vec<(u64, usize)>, usize) {
    let dev = Hinted::new(mem, takes_hints);
    let hints = dev.hints.clone();
    let dev: Box<dyn BlockDevice> = match window {
        Some(w) => Box::new(ufs::dev::ReadAheadDevice::new(dev, w)),
        None => Box::new(dev),
    };
    let fs = Fs::open(dev, MountOptions::default()).unwrap();
    let top = fs.lookup(fs.root(), b"top").unwrap();
    hints.lock().unwrap().clear();
    fs.readdir(top.ino, 0, usize::MAX).unwrap();
    let h = hints.lock().unwrap().clone();
    (h, fs.geometry().bsize as usize)
}

#[test]
fn a_directory_read_asks_for_what_a_walk_reads_next() {
    let (mem, firsts) = image(40);
    let (hints, _) = walk_top(&mem, true, None);
    for a in &firsts {
        assert!(
            hints
                .iter()
                .any(|&(off, len)| off <= *a && *a < off + len as u64),
            "no hint covers the first block of a subdirectory (byte {a}): {hints:?}"
        );
    }
    // Each address is asked for once per read, within the bound.
    let mut seen = hints.clone();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), hints.len(), "a block was asked for twice");
    assert!(hints.len() <= ufs::dir::PREFETCH_INODE_BLOCKS + ufs::dir::PREFETCH_SUBDIRS);
}

#[test]
fn a_device_that_takes_no_hints_gets_none() {
    let (mem, _) = image(10);
    assert!(walk_top(&mem, false, None).0.is_empty());
}

/// Under the mount's read-ahead window, a walk reads each directory
/// block alone (its neighbours are other files' data, not what the walk
/// wants next), while inode blocks still come a window at a time.
#[test]
fn directory_blocks_are_read_alone_under_the_read_ahead_window() {
    let (mem, firsts) = image(40);
    let window = 128u64 << 10;
    let below = Hinted::new(&mem, false);
    let log = below.reads.clone();
    let dev = ufs::dev::ReadAheadDevice::new(below, window);
    let fs = Fs::open(Box::new(dev), MountOptions::default()).unwrap();
    let top = fs.lookup(fs.root(), b"top").unwrap();
    for e in fs.readdir(top.ino, 0, usize::MAX).unwrap() {
        if e.name.starts_with(b"d") {
            fs.readdir(e.ino, 0, usize::MAX).unwrap();
        }
    }
    let log = log.lock().unwrap().clone();
    for a in &firsts {
        let r: Vec<_> = log.iter().filter(|&&(off, _)| off == *a).collect();
        assert!(
            r.iter().any(|&&(_, len)| (len as u64) < window),
            "subdirectory block at byte {a} not read alone: {r:?}"
        );
    }
    assert!(
        log.iter().any(|&(_, len)| len as u64 == window),
        "inode blocks no longer read a window at a time: {log:?}"
    );
}

/// Under the read-ahead window, the hint for a subdirectory's first block
/// asks for that block alone (it is read alone), not for the window
/// around it (inode-block hints keep the window: their reads take it).
#[test]
fn subdirectory_hints_are_exact_under_the_read_ahead_window() {
    let (mem, firsts) = image(40);
    let (h, bsize) = walk_top(&mem, true, Some(128 << 10));
    for a in &firsts {
        let hint = h
            .iter()
            .find(|&&(off, _)| off == *a)
            .unwrap_or_else(|| panic!("no hint starts at subdirectory block {a}: {h:?}"));
        assert!(
            hint.1 <= bsize,
            "subdirectory hint {hint:?} wider than a block"
        );
    }
}
