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
    for chunk in data.chunks(DIRBLKSIZ) {
        let _ = dir::parse_chunk(chunk, &|| String::new());
    }
    // An extended attribute area: whatever parses encodes back to itself.
    if let Ok(attrs) = extattr::parse_area(data) {
        assert_eq!(extattr::parse_area(&extattr::encode_area(&attrs)).ok(), Some(attrs));
    }
    // A stored POSIX.1e ACL: whatever decodes encodes back to itself.
    if let Ok(entries) = acl::decode(data) {
        let again = acl::encode(&entries).expect("at most 32 entries");
        assert_eq!(acl::decode(&again).ok(), Some(entries.clone()));
        let _ = acl::valid(&entries);
    }
    if data.len() >= DINODE_SIZE {
        let d = Dinode::from_bytes(data);
        let _ = d.ckhash_ok();
    }
});
