//! The fuzz targets' bodies: what each must survive, as library functions
//! so that the libFuzzer targets (`fuzz/`, nightly, `cargo fuzz`) and the
//! stable corpus-and-mutation runner the tests run in CI
//! (`tests/fuzz_stable.rs`) check the same thing.
//!
//! Invariants of every target: it returns for any input (an error is
//! fine), never panics, and asserts only round trips and bounds a
//! correct parser keeps.
use crate::dev::{BlockDevice, MemDevice};
use std::sync::OnceLock;
use ufs_format::*;

/// Every parser of ufs-format on arbitrary bytes; round trips hold.
pub fn parse_structures(data: &[u8]) {
    if let Ok(sb) = Superblock::from_bytes(data) {
        for loc in SBLOCKSEARCH {
            if let Ok(g) = sb.validate(loc) {
                let _ = Cg::parse(data, &g, 0);
                let _ = g.cg_map_bytes();
            }
        }
        let _ = sb.compute_ckhash();
    }
    for e in [Endian::Little, Endian::Big] {
        for chunk in data.chunks(DIRBLKSIZ) {
            let _ = dir::parse_chunk(e, chunk, &String::new);
        }
        // An extended attribute area: whatever parses encodes back to itself.
        if let Ok(attrs) = extattr::parse_area(e, data) {
            assert_eq!(
                extattr::parse_area(e, &extattr::encode_area(e, &attrs)).ok(),
                Some(attrs)
            );
        }
        // A stored POSIX.1e ACL: whatever decodes encodes back to itself.
        if let Ok(entries) = acl::decode(e, data) {
            let again = acl::encode(e, &entries).expect("at most 32 entries");
            assert_eq!(acl::decode(e, &again).ok(), Some(entries.clone()));
            let _ = acl::valid(&entries);
        }
    }
    // An inode of any variant: decoding, encoding and decoding again gives
    // the same inode.
    for v in [
        Variant::UFS1_LE,
        Variant::UFS1_BE,
        Variant::UFS2_LE,
        Variant::UFS2_BE,
    ] {
        if data.len() >= v.dinode_size() {
            let d = Dinode::decode(v, data);
            let again = Dinode::decode(v, &d.encode(v, false));
            assert_eq!(again, d);
            let _ = Dinode::ckhash_mismatch(v, data);
        }
    }
}

/// The 4 MiB image [`fsck_image`] patches: 4 KiB blocks, 512-byte
/// fragments, made the same way every time.
pub fn fsck_base() -> &'static Vec<u8> {
    static B: OnceLock<Vec<u8>> = OnceLock::new();
    B.get_or_init(|| {
        let dev = MemDevice::new(4 << 20);
        let p = crate::newfs::NewfsParams {
            bsize: 4096,
            fsize: 512,
            seed: Some(1),
            time: Some(1),
            ..Default::default()
        };
        crate::newfs::newfs(&dev, &p).expect("newfs of the fuzz base image");
        dev.snapshot()
    })
}

/// fsck and a read-only mount (list, stat, read, attributes) on the base
/// image with the input overlaid: the first 4 bytes say where, the rest is
/// what. Must return.
pub fn fsck_image(data: &[u8]) {
    if data.len() < 8 {
        return;
    }
    let mut img = fsck_base().clone();
    let at = u32::from_le_bytes([data[0], data[1], data[2], data[3]]) as usize % img.len();
    let patch = &data[4..];
    let n = patch.len().min(img.len() - at);
    img[at..at + n].copy_from_slice(&patch[..n]);
    let dev = MemDevice::from_vec(img.clone());
    let _ = crate::fsck::fsck(&dev, crate::fsck::FsckMode::Check);
    let dev = MemDevice::from_vec(img);
    let opts = crate::MountOptions {
        read_only: true,
        force: true,
        ..Default::default()
    };
    if let Ok(fs) = crate::Fs::open(Box::new(dev), opts) {
        if let Ok(ents) = fs.readdir(fs.root(), 0, 100) {
            for e in ents {
                let _ = fs.getattr(e.ino);
                let _ = fs.read(e.ino, 0, 4096);
                let _ = fs.readlink(e.ino);
                let _ = fs.seek_data_hole(e.ino, 0, true);
                let _ = fs.listxattr(e.ino, crate::Cred::ROOT);
                let _ = fs.get_acl(e.ino, crate::AclKind::Access);
            }
        }
    }
}

/// Partition probing on a 1 MiB disk whose first bytes are the input: must
/// return, and every partition named lies inside the disk.
pub fn partition_table(data: &[u8]) {
    let mut img = vec![0u8; 1 << 20];
    let n = data.len().min(img.len());
    img[..n].copy_from_slice(&data[..n]);
    let dev = MemDevice::from_vec(img);
    if let Ok(parts) = crate::dev::partition::probe(&dev) {
        for p in parts {
            assert!(p.start.saturating_add(p.size) <= dev.size(), "{p:?}");
        }
    }
}
