//! Metadata check-hashes (FreeBSD 12+): CRC-32C seeded with 0xFFFFFFFF and
//! *without* the final inversion, computed over a structure whose hash field
//! reads as zero. Source: `calculate_crc32c` use in `ffs_calc_sbhash`,
//! `cgckhash` and `ffs_update_dinode_ckhash` (sys/ufs/ffs/ffs_subr.c,
//! ffs_alloc.c, ffs_inode.c).

/// Hash of `data` with the 4 bytes at `field_off` taken as zero.
pub fn ckhash_with_zeroed_field(data: &[u8], field_off: usize) -> u32 {
    let crc = crc32c::crc32c(&data[..field_off]);
    let crc = crc32c::crc32c_append(crc, &[0u8; 4]);
    let crc = crc32c::crc32c_append(crc, &data[field_off + 4..]);
    // The crate returns the standard (inverted) CRC; FreeBSD keeps it raw.
    !crc
}

/// Plain FreeBSD-style CRC-32C of a buffer (no final inversion).
pub fn ckhash(data: &[u8]) -> u32 {
    !crc32c::crc32c(data)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn known_vector() {
        assert_eq!(ckhash(b"123456789"), 0x1CF9_6D7C);
    }
    #[test]
    fn zeroed_field_equals_hash_of_zeroed_copy() {
        let mut d: Vec<u8> = (0..64u8).collect();
        let h = ckhash_with_zeroed_field(&d, 8);
        d[8..12].fill(0);
        assert_eq!(h, ckhash(&d));
    }
}
