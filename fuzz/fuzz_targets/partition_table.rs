//! Partition probing (GPT, MBR with BSD slices, BSD disklabels) on
//! arbitrary leading sectors of a disk: must return, never panic, and
//! every partition it names must lie inside the disk.
#![no_main]
use libfuzzer_sys::fuzz_target;
use ufs::dev::{BlockDevice, MemDevice};

fuzz_target!(|data: &[u8]| {
    // The fuzzer's bytes are the disk's first sectors; the rest is zero,
    // so tables may point past them but not past the disk.
    let mut img = vec![0u8; 1 << 20];
    let n = data.len().min(img.len());
    img[..n].copy_from_slice(&data[..n]);
    let dev = MemDevice::from_vec(img);
    if let Ok(parts) = ufs::dev::partition::probe(&dev) {
        for p in parts {
            assert!(p.start.saturating_add(p.size) <= dev.size(), "{p:?}");
        }
    }
});
