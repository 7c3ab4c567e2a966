//! Reading a file's data on a real device (one that takes read-ahead
//! hints): data the cache does not hold is read straight into the reply,
//! a run of contiguous blocks per device read, and a reader that goes on
//! in order has the device asked for the blocks that come next. What is
//! read must be the file as written, whatever mix of cached, dirty,
//! uncached blocks and holes it crosses.
use std::sync::{Arc, Mutex};
use ufs::dev::MemDevice;
use ufs::{Cred, Fs, Ino, MountOptions};

const R: Cred = Cred::ROOT;

use testkit::Recorded;

type Log = Arc<Mutex<Vec<(u64, usize)>>>;

fn open(mem: &Arc<MemDevice>, takes_hints: bool) -> (Fs, Log, Log) {
    let dev = Recorded::new(mem, takes_hints);
    let (hints, reads) = (dev.hints.clone(), dev.reads.clone());
    (
        Fs::open(Box::new(dev), MountOptions::default()).unwrap(),
        hints,
        reads,
    )
}

/// The byte at `i` of the test file's pattern.
fn pattern(i: u64) -> u8 {
    (i.wrapping_mul(2_654_435_761) >> 13) as u8
}

/// A 3 MiB + 5,000-byte file (its last block a fragment run) with a
/// 200 KiB hole from 1 MiB, on a fresh image; its inode number and the
/// bytes it holds.
fn image() -> (Arc<MemDevice>, Ino, Vec<u8>) {
    let mem = testkit::mem_image(128 << 20);
    let (fs, _, _) = open(&mem, false);
    let f = fs.mknod(fs.root(), b"f", 0o100644, 0, R).unwrap();
    let size = (3 << 20) + 5_000u64;
    let hole = (1u64 << 20)..(1 << 20) + (200 << 10);
    let mut want: Vec<u8> = (0..size).map(pattern).collect();
    want[hole.start as usize..hole.end as usize].fill(0);
    let mut at = 0;
    while at < size {
        let end = (at + (96 << 10)).min(size);
        let (a, b) = (at.max(hole.start), end.min(hole.end));
        if a < b {
            // Write around the hole.
            if at < a {
                fs.write(f.ino, at, &want[at as usize..a as usize], R)
                    .unwrap();
            }
            if b < end {
                fs.write(f.ino, b, &want[b as usize..end as usize], R)
                    .unwrap();
            }
        } else {
            fs.write(f.ino, at, &want[at as usize..end as usize], R)
                .unwrap();
        }
        at = end;
    }
    fs.unmount().unwrap();
    (mem, f.ino, want)
}

#[test]
fn a_sequential_read_returns_the_file_through_cached_dirty_and_uncached_blocks() {
    let (mem, ino, mut want) = image();
    let (fs, hints, reads) = open(&mem, true);
    // Some blocks in the cache (one read alone), one changed and not yet
    // written (dirty in the cache).
    let bsize = fs.geometry().bsize;
    fs.read(ino, 5 * bsize, 10).unwrap();
    let changed = 20 * bsize + 100;
    fs.write(ino, changed, b"changed in memory", R).unwrap();
    want[changed as usize..changed as usize + 17].copy_from_slice(b"changed in memory");
    reads.lock().unwrap().clear();
    hints.lock().unwrap().clear();
    let mut got = Vec::new();
    let step = 128 << 10;
    loop {
        let part = fs.read(ino, got.len() as u64, step).unwrap();
        if part.is_empty() {
            break;
        }
        got.extend_from_slice(&part);
    }
    assert_eq!(got.len(), want.len());
    let first_diff = got.iter().zip(&want).position(|(a, b)| a != b);
    assert_eq!(first_diff, None, "the read differs from the file");
    // Uncached runs went as reads of several blocks at once.
    let reads = reads.lock().unwrap().clone();
    assert!(
        reads.iter().any(|&(_, len)| len as u64 >= 2 * bsize),
        "no read of a run of blocks: {reads:?}"
    );
    // And the device was asked ahead of the reader, past the first read.
    let hints = hints.lock().unwrap().clone();
    let fsize = fs.geometry().fsize;
    let first = fs.inode(ino).unwrap().di_db(0) * fsize;
    assert!(
        hints.iter().any(|&(off, _)| off >= first + step as u64),
        "no read-ahead hint beyond the first read: {hints:?}"
    );
    fs.unmount().unwrap();
}

#[test]
fn reads_out_of_order_ask_for_nothing_ahead_and_still_read_right() {
    let (mem, ino, want) = image();
    let (fs, hints, _) = open(&mem, true);
    for &off in &[2_000_000u64, 100_000, 3_000_000, 40_000, 1_100_000] {
        let got = fs.read(ino, off, 30_000).unwrap();
        let end = (off as usize + 30_000).min(want.len());
        assert_eq!(got, want[off as usize..end], "read at {off}");
    }
    assert!(
        hints.lock().unwrap().is_empty(),
        "hints for reads out of order"
    );
    fs.unmount().unwrap();
}

#[test]
fn a_device_that_takes_no_hints_sees_block_reads_through_the_cache() {
    let (mem, ino, want) = image();
    let (fs, hints, reads) = open(&mem, false);
    let bsize = fs.geometry().bsize as usize;
    reads.lock().unwrap().clear();
    let got = fs.read(ino, 0, 1 << 20).unwrap();
    assert_eq!(got, want[..1 << 20]);
    assert!(hints.lock().unwrap().is_empty());
    // The modeled disks of the experiments see FFS's block reads.
    assert!(
        reads.lock().unwrap().iter().all(|&(_, len)| len <= bsize),
        "a read larger than a block on a device that takes no hints"
    );
    fs.unmount().unwrap();
}
