//! A read that waits for the device does not hold the engine: file data
//! the cache does not hold is read without the engine lock, so other
//! requests (getattr, lookup, readdir, a create and a write elsewhere) are
//! served while it waits. And a block freed while such a read waits is
//! never returned as the file's data: the read is done again.
//!
//! The device here parks large reads until the test lets them go, so the
//! tests do not depend on timing: if the read held the engine, the other
//! requests could not finish before it is let go, and the test says so
//! after ten seconds instead of hanging.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;
use ufs::dev::{BlockDevice, MemDevice};
use ufs::{Cred, Fs, Ino, MountOptions, SetAttr};

const R: Cred = Cred::ROOT;
const WAIT: Duration = Duration::from_secs(10);

/// A memory device that takes read-ahead hints (so file data is read
/// around the cache) and, while armed, parks each read of 64 KiB or more
/// until opened, saying on `parked` that one arrived.
struct Gate {
    mem: Arc<MemDevice>,
    armed: AtomicBool,
    open: Mutex<bool>,
    opened: Condvar,
    parked: Mutex<Option<mpsc::Sender<()>>>,
}

impl Gate {
    fn let_go(&self) {
        *self.open.lock().unwrap() = true;
        self.opened.notify_all();
    }
}

struct GateDev(Arc<Gate>);

impl BlockDevice for GateDev {
    fn read_at(&self, off: u64, buf: &mut [u8]) -> ufs::Result<()> {
        let g = &self.0;
        if buf.len() >= 64 << 10 && g.armed.load(Ordering::SeqCst) {
            if let Some(tx) = g.parked.lock().unwrap().take() {
                let _ = tx.send(());
            }
            let mut open = g.open.lock().unwrap();
            while !*open {
                open = g.opened.wait(open).unwrap();
            }
        }
        g.mem.read_at(off, buf)
    }
    fn write_at(&self, off: u64, buf: &[u8]) -> ufs::Result<()> {
        self.0.mem.write_at(off, buf)
    }
    fn flush(&self) -> ufs::Result<()> {
        self.0.mem.flush()
    }
    fn size(&self) -> u64 {
        self.0.mem.size()
    }
    fn prefetches(&self) -> bool {
        true
    }
}

/// A file system with `/big`, 1 MiB of `fill`, written out and dropped
/// from the cache; the engine, the gate, and the file's inode number.
fn setup(fill: u8) -> (Arc<Fs>, Arc<Gate>, Ino) {
    let gate = Arc::new(Gate {
        mem: testkit::mem_image(64 << 20),
        armed: AtomicBool::new(false),
        open: Mutex::new(false),
        opened: Condvar::new(),
        parked: Mutex::new(None),
    });
    let fs = Arc::new(Fs::open(Box::new(GateDev(gate.clone())), MountOptions::default()).unwrap());
    let f = fs.mknod(fs.root(), b"big", 0o100644, 0, R).unwrap();
    fs.write(f.ino, 0, &vec![fill; 1 << 20], R).unwrap();
    fs.sync().unwrap();
    fs.drop_caches().unwrap();
    (fs, gate, f.ino)
}

/// Starts a read of the whole of `/big` on a thread of its own and waits
/// until the device has parked it.
fn parked_read(fs: &Arc<Fs>, gate: &Arc<Gate>, ino: Ino) -> std::thread::JoinHandle<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    *gate.parked.lock().unwrap() = Some(tx);
    gate.armed.store(true, Ordering::SeqCst);
    let reader = {
        let fs = fs.clone();
        std::thread::spawn(move || fs.read(ino, 0, 1 << 20).unwrap())
    };
    rx.recv_timeout(WAIT)
        .expect("the read never reached the device");
    reader
}

/// Runs `f` on a thread of its own; fails if it does not end within
/// [`WAIT`] (it would be waiting for the parked read's lock).
fn finishes<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(WAIT)
        .unwrap_or_else(|_| panic!("{what} waited for a read parked on the device"))
}

#[test]
fn requests_are_served_while_a_read_waits_for_the_device() {
    let (fs, gate, ino) = setup(0x5a);
    let reader = parked_read(&fs, &gate, ino);
    let f2 = fs.clone();
    let root = fs.root();
    let (size, found, names, written) = finishes("getattr, lookup, readdir, create", move || {
        let size = f2.getattr(ino).unwrap().size;
        let found = f2.lookup(root, b"big").unwrap().ino;
        let names: Vec<Vec<u8>> = f2
            .readdir(root, 0, 100)
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        let n = f2.mknod(root, b"new", 0o100644, 0, R).unwrap();
        let written = f2.write(n.ino, 0, b"written beside a read", R).unwrap();
        (size, found, names, written)
    });
    assert_eq!(size, 1 << 20);
    assert_eq!(found, ino);
    assert!(names.iter().any(|n| n == b"big"));
    assert_eq!(written, 21);
    gate.let_go();
    let data = reader.join().unwrap();
    assert_eq!(data.len(), 1 << 20);
    assert!(
        data.iter().all(|&b| b == 0x5a),
        "the read returned other bytes"
    );
    fs.unmount().unwrap();
}

#[test]
fn a_block_freed_while_a_read_waits_is_not_returned_as_the_files_data() {
    let (fs, gate, ino) = setup(0x11);
    let reader = parked_read(&fs, &gate, ino);
    let f2 = fs.clone();
    let root = fs.root();
    finishes("truncate, reuse and sync", move || {
        // The file loses its blocks; another file takes them, and its
        // bytes reach the device before the parked read does.
        let cut = SetAttr {
            size: Some(0),
            ..Default::default()
        };
        f2.setattr(ino, &cut, R).unwrap();
        f2.sync().unwrap();
        let other = f2.mknod(root, b"other", 0o100644, 0, R).unwrap();
        f2.write(other.ino, 0, &vec![0xee; 1 << 20], R).unwrap();
        f2.sync().unwrap();
    });
    gate.let_go();
    let data = reader.join().unwrap();
    assert!(
        !data.contains(&0xee),
        "a read returned bytes of a file written after its blocks were freed"
    );
    // The read began before the truncation: it may see the old bytes or
    // the file as it is now (empty), nothing else.
    assert!(data.is_empty() || data.iter().all(|&b| b == 0x11));
    fs.unmount().unwrap();
}
