//! The syncer's flush (`Fs::sync_background`): it writes a round at a
//! time and lets other operations take the engine lock between rounds;
//! when it returns, everything done before it started is on the device
//! (a daemon killed right then loses none of it, and preen makes the image
//! clean), whatever was done meanwhile.
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use ufs::dev::{BlockDevice, MemDevice};
use ufs::fsck::{fsck, FsckMode};
use ufs::{Cred, Fs, MountOptions};

/// A device whose flush, once armed, waits until the worker beside the
/// sync has done `OPS_DURING` operations (at most `GATE_MAX`): a sync that
/// held the engine lock through its flush would keep the worker out and
/// meet the bound. Without the gate the count depended on how the
/// scheduler of a busy machine ran the two threads. Only the syncing
/// thread's flushes wait: one the worker's own operation makes (an
/// ordered write it forces) would otherwise wait for the worker itself,
/// under the engine lock, until the bound (seen on a loaded machine).
struct GatedFlush {
    inner: Arc<MemDevice>,
    armed: Arc<AtomicBool>,
    /// The thread that syncs.
    syncer: std::thread::ThreadId,
    during: Arc<AtomicU64>,
    /// Flushes made while armed.
    gated: Arc<AtomicU64>,
}

const OPS_DURING: u64 = 10;
const GATE_MAX: std::time::Duration = std::time::Duration::from_secs(20);

impl BlockDevice for GatedFlush {
    fn read_at(&self, off: u64, buf: &mut [u8]) -> ufs::Result<()> {
        self.inner.read_at(off, buf)
    }
    fn write_at(&self, off: u64, buf: &[u8]) -> ufs::Result<()> {
        self.inner.write_at(off, buf)
    }
    fn flush(&self) -> ufs::Result<()> {
        let syncing_thread = self.syncer == std::thread::current().id();
        if self.armed.load(Ordering::Acquire) && syncing_thread {
            self.gated.fetch_add(1, Ordering::Relaxed);
            let start = std::time::Instant::now();
            while self.during.load(Ordering::Acquire) < OPS_DURING && start.elapsed() < GATE_MAX {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
        self.inner.flush()
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
}

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
    let armed = Arc::new(AtomicBool::new(false));
    let during = Arc::new(AtomicU64::new(0));
    let gated_flushes = Arc::new(AtomicU64::new(0));
    let gated = GatedFlush {
        inner: dev.clone(),
        armed: armed.clone(),
        syncer: std::thread::current().id(),
        during: during.clone(),
        gated: gated_flushes.clone(),
    };
    let fs = Arc::new(Fs::open(Box::new(gated), MountOptions::default()).unwrap());
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
    armed.store(true, Ordering::Release);
    let started = std::time::Instant::now();
    fs.sync_background().unwrap();
    armed.store(false, Ordering::Release);
    syncing.store(false, Ordering::Release);
    assert!(
        gated_flushes.load(Ordering::Relaxed) >= 1,
        "the sync made no flush"
    );
    assert!(
        started.elapsed() < GATE_MAX,
        "the worker could not get in while the sync flushed"
    );
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
        during >= OPS_DURING,
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

/// Past the soft-updates state's bound (one change per KiB of cache, at
/// least 4,096), a writer rings the background syncer instead of writing
/// everything itself, and past twice the bound waits for a syncer round
/// (FreeBSD's `request_cleanup`): no operation writes the world, the state
/// stays within four times its bound, and the image is consistent. With
/// no syncer (the library alone) a writer still writes everything, so the
/// bound holds either way.
#[test]
fn past_its_bound_the_state_is_taken_away_by_the_syncer_not_by_a_writer() {
    use ufs::order::cleanup::Wake;
    use ufs::order::WriteMode;
    let opts = || MountOptions {
        cache_bytes: 4 << 20,
        write_mode: Some(WriteMode::Softdep),
        ..Default::default()
    };
    let dev = testkit::mem_image(256 << 20);
    let fs = Arc::new(Fs::open(Box::new(dev.clone()), opts()).unwrap());
    let bell = fs.syncer_bell();
    bell.attach();
    let syncer = {
        let (fs, bell) = (fs.clone(), bell.clone());
        std::thread::spawn(move || {
            let mut last = std::time::Instant::now();
            loop {
                match bell.wait_for_work(last, std::time::Duration::from_secs(30)) {
                    Wake::Stop => return,
                    Wake::Interval => last = std::time::Instant::now(),
                    Wake::Hurry => {}
                }
                fs.sync_background().unwrap();
            }
        })
    };
    // Some 100,000 changes: many times the bound of 4,096.
    let peak = Arc::new(AtomicU64::new(0));
    let t = fs.mkdir(fs.root(), b"t", 0o755, Cred::ROOT).unwrap().ino;
    for d in 0..20 {
        let dir = fs
            .mkdir(t, format!("d{d}").as_bytes(), 0o755, Cred::ROOT)
            .unwrap()
            .ino;
        for f in 0..1000 {
            let ino = fs
                .mknod(dir, format!("f{f}").as_bytes(), 0o100644, 0, Cred::ROOT)
                .unwrap()
                .ino;
            fs.write(ino, 0, &[3; 3000], Cred::ROOT).unwrap();
        }
        let now = fs.stats(None, false).unwrap().order.pending_now;
        peak.fetch_max(now, Ordering::Relaxed);
    }
    let order = fs.stats(None, false).unwrap().order;
    eprintln!(
        "changes {}, hurried {}, writer waits {}, syncs {}, peak {}",
        order.changes,
        order.syncer_hurried,
        order.writer_waits,
        order.background_syncs,
        peak.load(Ordering::Relaxed)
    );
    bell.stop();
    syncer.join().unwrap();
    assert!(order.changes > 50_000, "{order:?}");
    assert_eq!(
        order.writer_syncs, 0,
        "a writer wrote everything: {order:?}"
    );
    assert!(order.syncer_hurried > 0, "{order:?}");
    assert!(order.background_syncs > 0, "{order:?}");
    let peak = peak.load(Ordering::Relaxed);
    assert!(peak <= 4 * 4096, "the state reached {peak} changes");
    fs.unmount().unwrap();
    let rep = fsck(&*dev, FsckMode::Check).unwrap();
    assert!(rep.clean, "{:?}", rep.findings);

    // No syncer: the writer keeps the bound itself.
    let dev = testkit::mem_image(256 << 20);
    let fs = Fs::open(Box::new(dev.clone()), opts()).unwrap();
    make_tree(&fs, b"t", 10, 1000, 4);
    let order = fs.stats(None, false).unwrap().order;
    assert!(order.writer_syncs > 0, "{order:?}");
    assert_eq!(order.syncer_hurried, 0, "{order:?}");
    fs.unmount().unwrap();
}
