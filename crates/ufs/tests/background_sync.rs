//! The syncer's flush (`Fs::sync_background`): it writes a round at a
//! time and lets other operations take the engine lock between rounds;
//! when it returns, everything done before it started is on the device
//! (a daemon killed right then loses none of it, and preen makes the image
//! clean), whatever was done meanwhile.
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use ufs::fsck::{fsck, FsckMode};
use ufs::{Cred, Fs, MountOptions};

/// A tree of `dirs` directories of `files` files of 3 KB each.
fn make_tree(fs: &Fs, top: &[u8], dirs: usize, files: usize, fill: u8) {
    let t = fs.mkdir(fs.root(), top, 0o755, Cred::ROOT).unwrap().ino;
    for d in 0..dirs {
        let dir = fs
            .mkdir(t, format!("d{d}").as_bytes(), 0o755, Cred::ROOT)
            .unwrap()
            .ino;
        for f in 0..files {
            let ino = fs
                .mknod(dir, format!("f{f}").as_bytes(), 0o100644, 0, Cred::ROOT)
                .unwrap()
                .ino;
            fs.write(ino, 0, &[fill; 3000], Cred::ROOT).unwrap();
        }
    }
}

fn remove_tree(fs: &Fs, top: &[u8], dirs: usize, files: usize) {
    let t = fs.lookup(fs.root(), top).unwrap().ino;
    for d in 0..dirs {
        let name = format!("d{d}");
        let dir = fs.lookup(t, name.as_bytes()).unwrap().ino;
        for f in 0..files {
            fs.unlink(dir, format!("f{f}").as_bytes()).unwrap();
        }
        fs.rmdir(t, name.as_bytes()).unwrap();
    }
    fs.rmdir(fs.root(), top).unwrap();
}

#[test]
fn a_background_sync_lets_operations_in_and_leaves_what_came_before_on_disk() {
    let dev = testkit::mem_image(256 << 20);
    let fs = Arc::new(Fs::open(Box::new(dev.clone()), MountOptions::default()).unwrap());
    // What makes a sync long: a tree written, removed and written again
    // (its inodes and blocks reused), all of it still in the cache.
    let (dirs, files) = (30, 40);
    make_tree(&fs, b"old", dirs, files, 1);
    fs.sync().unwrap();
    remove_tree(&fs, b"old", dirs, files);
    make_tree(&fs, b"new", dirs, files, 2);
    assert!(fs.dirty_buffers() > 100);

    // Another thread works on beside the sync.
    let stop = Arc::new(AtomicBool::new(false));
    let during = Arc::new(AtomicU64::new(0));
    let syncing = Arc::new(AtomicBool::new(false));
    let worker = {
        let (fs, stop, during, syncing) =
            (fs.clone(), stop.clone(), during.clone(), syncing.clone());
        std::thread::spawn(move || {
            let d = fs
                .mkdir(fs.root(), b"meanwhile", 0o755, Cred::ROOT)
                .unwrap()
                .ino;
            let mut i = 0u64;
            while !stop.load(Ordering::Acquire) {
                let ino = fs
                    .mknod(d, format!("m{i}").as_bytes(), 0o100644, 0, Cred::ROOT)
                    .unwrap()
                    .ino;
                fs.write(ino, 0, b"meanwhile", Cred::ROOT).unwrap();
                if syncing.load(Ordering::Acquire) {
                    during.fetch_add(1, Ordering::Relaxed);
                }
                i += 1;
            }
        })
    };
    // Let the worker start, then sync beside it.
    while fs.lookup(fs.root(), b"meanwhile").is_err() {
        std::thread::yield_now();
    }
    syncing.store(true, Ordering::Release);
    fs.sync_background().unwrap();
    syncing.store(false, Ordering::Release);
    let order = fs.stats(None, false).unwrap().order;
    assert_eq!(order.background_syncs, 1);
    assert!(
        order.longest_background_sync >= 1
            && order.background_rounds == order.longest_background_sync,
        "{order:?}"
    );
    // The device as a daemon killed now would leave it.
    let crashed = dev.snapshot();
    stop.store(true, Ordering::Release);
    worker.join().unwrap();
    let during = during.load(Ordering::Relaxed);
    eprintln!("operations done while the sync ran: {during}");
    assert!(
        during >= 10,
        "{during} operations got in while the sync ran"
    );

    // Everything made before the sync is there after preen, with its data.
    let img = ufs::dev::MemDevice::from_vec(crashed);
    let rep = fsck(&img, FsckMode::Preen).unwrap();
    assert!(rep.clean, "{:?}", rep.findings);
    let fs2 = Fs::open(Box::new(img), MountOptions::default()).unwrap();
    assert!(fs2.lookup(fs2.root(), b"old").is_err());
    let t = fs2.lookup(fs2.root(), b"new").unwrap().ino;
    for d in 0..dirs {
        let dir = fs2.lookup(t, format!("d{d}").as_bytes()).unwrap().ino;
        for f in 0..files {
            let ino = fs2.lookup(dir, format!("f{f}").as_bytes()).unwrap().ino;
            assert_eq!(
                fs2.read(ino, 0, 4000).unwrap(),
                vec![2u8; 3000],
                "new/d{d}/f{f}"
            );
        }
    }
    drop(fs2);

    // And the live file system unmounts clean.
    fs.unmount().unwrap();
    let rep = fsck(&*dev, FsckMode::Check).unwrap();
    assert!(rep.findings.is_empty(), "{:?}", rep.findings);
}
