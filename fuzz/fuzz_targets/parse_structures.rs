//! Every parser of ufs-format on arbitrary bytes: must return, never panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use ufs_format::*;

fuzz_target!(|data: &[u8]| {
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
            let _ = dir::parse_chunk(e, chunk, &|| String::new());
        }
        // An extended attribute area: whatever parses encodes back to itself.
        if let Ok(attrs) = extattr::parse_area(e, data) {
            assert_eq!(extattr::parse_area(e, &extattr::encode_area(e, &attrs)).ok(), Some(attrs));
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
    for v in [Variant::UFS1_LE, Variant::UFS1_BE, Variant::UFS2_LE, Variant::UFS2_BE] {
        if data.len() >= v.dinode_size() {
            let d = Dinode::decode(v, data);
            let again = Dinode::decode(v, &d.encode(v, false));
            assert_eq!(again, d);
            let _ = Dinode::ckhash_mismatch(v, data);
        }
    }
});
