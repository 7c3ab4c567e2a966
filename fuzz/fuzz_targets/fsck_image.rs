//! fsck and a read-only mount on a small arbitrary image (the fuzzer's
//! bytes overlaid on a valid image), must return, never panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;
use ufs::dev::MemDevice;

fn base() -> &'static Vec<u8> {
    static B: OnceLock<Vec<u8>> = OnceLock::new();
    B.get_or_init(|| {
        let dev = MemDevice::new(4 << 20);
        let p = ufs::newfs::NewfsParams { bsize: 4096, fsize: 512, seed: Some(1), time: Some(1), ..Default::default() };
        ufs::newfs::newfs(&dev, &p).expect("newfs");
        dev.snapshot()
    })
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 8 {
        return;
    }
    let mut img = base().clone();
    // First 4 bytes choose where the rest lands.
    let at = u32::from_le_bytes([data[0], data[1], data[2], data[3]]) as usize % img.len();
    let patch = &data[4..];
    let n = patch.len().min(img.len() - at);
    img[at..at + n].copy_from_slice(&patch[..n]);
    let dev = MemDevice::from_vec(img.clone());
    let _ = ufs::fsck::fsck(&dev, ufs::fsck::FsckMode::Check);
    let dev = MemDevice::from_vec(img);
    if let Ok(fs) = ufs::Fs::open(Box::new(dev), ufs::MountOptions { read_only: true, force: true, ..Default::default() }) {
        if let Ok(ents) = fs.readdir(fs.root(), 0, 100) {
            for e in ents {
                let _ = fs.getattr(e.ino);
                let _ = fs.read(e.ino, 0, 4096);
                let _ = fs.listxattr(e.ino, ufs::Cred::ROOT);
                let _ = fs.get_acl(e.ino, ufs::AclKind::Access);
            }
        }
    }
});
