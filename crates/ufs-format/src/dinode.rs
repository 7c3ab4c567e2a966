//! Inodes: `struct ufs2_dinode` (256 bytes) and `struct ufs1_dinode` (128
//! bytes), in either byte order.
//!
//! Invariants: a [`Dinode`] holds exactly 256 bytes in one canonical form,
//! the UFS2 layout in little-endian order, whatever the file system's
//! variant; [`Dinode::decode`] and [`Dinode::encode_into`] are the only
//! conversions between it and the bytes of an inode block, so nothing above
//! this crate sees UFS1's layout or a big-endian field. Block pointers are
//! returned as read; whether they lie inside the file system is checked by
//! the caller, which knows the geometry. A short symlink's target lives in
//! the pointer area (`di_db`/`di_ib`: 120 bytes in UFS2, 60 in UFS1,
//! `fs_maxsymlinklen`) and is copied as bytes, never as pointers.
//! Fields UFS1 lacks (birth time, extended attribute area, kernel flags,
//! check-hash) read as zero and are dropped when a UFS1 inode is encoded.
//! Source: FreeBSD `sys/ufs/ufs/dinode.h`; NetBSD `ffs_dinode1_swap`,
//! `ffs_dinode2_swap` (sys/ufs/ffs/ffs_bswap.c) for the swapped forms.
use crate::bytes::Endian;
use crate::variant::{Ufs, Variant};
use crate::{DINODE_SIZE, MAXSYMLINKLEN_UFS2, UFS_NDADDR, UFS_NIADDR};

pub const IFMT: u16 = 0o170000;
pub const IFIFO: u16 = 0o010000;
pub const IFCHR: u16 = 0o020000;
pub const IFDIR: u16 = 0o040000;
pub const IFBLK: u16 = 0o060000;
pub const IFREG: u16 = 0o100000;
pub const IFLNK: u16 = 0o120000;
pub const IFSOCK: u16 = 0o140000;
pub const IFWHT: u16 = 0o160000;

pub const DI_DB_OFF: usize = 112;
pub const DI_IB_OFF: usize = 208;
pub const DI_CKHASH_OFF: usize = 244;

/// Offsets of `struct ufs1_dinode` (sys/ufs/ufs/dinode.h).
mod ufs1 {
    pub const MODE: usize = 0;
    pub const NLINK: usize = 2;
    pub const FREELINK: usize = 4;
    pub const SIZE: usize = 8;
    pub const ATIME: usize = 16;
    pub const ATIMENSEC: usize = 20;
    pub const MTIME: usize = 24;
    pub const MTIMENSEC: usize = 28;
    pub const CTIME: usize = 32;
    pub const CTIMENSEC: usize = 36;
    pub const DB: usize = 40;
    pub const FLAGS: usize = 100;
    pub const BLOCKS: usize = 104;
    pub const GEN: usize = 108;
    pub const UID: usize = 112;
    pub const GID: usize = 116;
    pub const MODREV: usize = 120;
}

/// Copies the scalar fields of a `struct ufs2_dinode` (everything outside
/// the pointer area) from `src` to `dst` with each field's bytes turned
/// around: from one byte order to the other, whichever way. Straight-line
/// code, so a big-endian inode costs a few byte swaps, not a loop.
#[inline]
fn swap_ufs2_scalars(src: &[u8], dst: &mut [u8]) {
    macro_rules! swap {
        ($t:ty, $n:expr; $($o:expr),*) => {
            $(
                let mut a = [0u8; $n];
                a.copy_from_slice(&src[$o..$o + $n]);
                dst[$o..$o + $n].copy_from_slice(&<$t>::from_ne_bytes(a).swap_bytes().to_ne_bytes());
            )*
        };
    }
    // mode, nlink; uid, gid, blksize; size, blocks, the four times;
    // the four nanoseconds, gen, kernflags, flags, extsize; extb[2];
    // modrev; freelink, ckhash, spare[2].
    swap!(u16, 2; 0, 2);
    swap!(u32, 4; 4, 8, 12);
    swap!(u64, 8; 16, 24, 32, 40, 48, 56);
    swap!(u32, 4; 64, 68, 72, 76, 80, 84, 88, 92);
    swap!(u64, 8; 96, 104, 232);
    swap!(u32, 4; 240, 244, 248, 252);
}

/// The pointer area (`di_db`, `di_ib`: 15 64-bit pointers) with each
/// pointer's bytes turned around.
#[inline]
fn swap_ufs2_pointers(src: &[u8], dst: &mut [u8]) {
    for i in 0..UFS_NDADDR + UFS_NIADDR {
        let o = DI_DB_OFF + 8 * i;
        let mut a = [0u8; 8];
        a.copy_from_slice(&src[o..o + 8]);
        dst[o..o + 8].copy_from_slice(&u64::from_ne_bytes(a).swap_bytes().to_ne_bytes());
    }
}

/// A UFS1 time in seconds as FreeBSD reads it: the 32-bit field is
/// unsigned, so times run from 1970 to 2106 (FreeBSD 15's reading; older
/// releases took it as signed, which agrees up to 2038).
pub fn ufs1_time_from_disk(raw: u32) -> i64 {
    raw as i64
}

/// The time an inode of variant `v` keeps when `t` is set: `t` itself in
/// UFS2, the nearest time its 32-bit field holds in UFS1.
pub fn stored_time(v: Variant, t: i64) -> i64 {
    match v.ufs {
        Ufs::Ufs1 => ufs1_time_from_disk(ufs1_time_to_disk(t)),
        Ufs::Ufs2 => t,
    }
}

/// The 32-bit field that stores `t` in a UFS1 inode: times before 1970
/// are stored as 1970 and times after 2106 as 2106 (the field's range).
pub fn ufs1_time_to_disk(t: i64) -> u32 {
    u32::try_from(t.max(0)).unwrap_or(u32::MAX)
}

#[derive(Clone, PartialEq, Eq)]
pub struct Dinode {
    raw: [u8; DINODE_SIZE],
}

impl std::fmt::Debug for Dinode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dinode")
            .field("di_mode", &format_args!("{:o}", self.di_mode()))
            .field("di_nlink", &self.di_nlink())
            .field("di_size", &self.di_size())
            .field("di_blocks", &self.di_blocks())
            .finish()
    }
}

impl Default for Dinode {
    fn default() -> Self {
        Dinode {
            raw: [0; DINODE_SIZE],
        }
    }
}

impl Dinode {
    /// Takes a copy of 256 bytes. Never fails: every bit pattern is a
    /// syntactically valid inode; semantic checks belong to the caller.
    pub fn from_bytes(b: &[u8]) -> Dinode {
        let mut raw = [0u8; DINODE_SIZE];
        let n = b.len().min(DINODE_SIZE);
        raw[..n].copy_from_slice(&b[..n]);
        Dinode { raw }
    }
    /// The canonical bytes (UFS2 layout, little-endian): not what a UFS1
    /// or big-endian file system stores; use [`Dinode::encode_into`].
    pub fn as_bytes(&self) -> &[u8; DINODE_SIZE] {
        &self.raw
    }

    /// Byte order of the canonical form.
    #[inline]
    fn endian(&self) -> Endian {
        Endian::Little
    }

    /// Is this inode a symlink whose target is kept in its pointer area?
    /// FreeBSD's rule, by size alone (`ufs_readlink`, fsck's
    /// `checkinode`): shorter than `fs_maxsymlinklen`, whatever
    /// `di_blocks` says (a wrong block count is fsck's to correct, not a
    /// reason to read text as pointers).
    pub fn holds_short_link(&self, maxsymlinklen: usize) -> bool {
        self.is_symlink() && self.di_size() < maxsymlinklen as u64
    }

    /// Decodes the on-disk inode at the start of `b` (at least
    /// `v.dinode_size()` bytes). Never fails: every bit pattern is a
    /// syntactically valid inode; semantic checks belong to the caller.
    #[inline]
    pub fn decode(v: Variant, b: &[u8]) -> Dinode {
        match (v.ufs, v.endian) {
            (Ufs::Ufs2, Endian::Little) => Dinode::from_bytes(b),
            (Ufs::Ufs2, Endian::Big) => decode_ufs2_swapped(b),
            (Ufs::Ufs1, e) => decode_ufs1(e, b),
        }
    }

    /// Writes this inode in `v`'s form into the first `v.dinode_size()`
    /// bytes of `out`. With `ckhash` (UFS2 file systems whose superblock
    /// enables inode check-hashes) the hash is computed over the bytes as
    /// stored, as FreeBSD's `ffs_update_dinode_ckhash` does.
    #[inline]
    pub fn encode_into(&self, v: Variant, out: &mut [u8], ckhash: bool) {
        match (v.ufs, v.endian) {
            (Ufs::Ufs2, Endian::Little) => out[..DINODE_SIZE].copy_from_slice(&self.raw),
            (Ufs::Ufs2, Endian::Big) => self.encode_ufs2_swapped(out),
            (Ufs::Ufs1, e) => self.encode_ufs1(e, out),
        }
        if ckhash && v.ufs == Ufs::Ufs2 {
            let h = crate::ckhash::ckhash_with_zeroed_field(&out[..DINODE_SIZE], DI_CKHASH_OFF);
            v.endian.set_u32(out, DI_CKHASH_OFF, h);
        }
    }

    /// The inode in `v`'s on-disk form.
    pub fn encode(&self, v: Variant, ckhash: bool) -> Vec<u8> {
        let mut out = vec![0u8; v.dinode_size()];
        self.encode_into(v, &mut out, ckhash);
        out
    }

    /// Checks the check-hash of an on-disk UFS2 inode: None when it
    /// matches, else (stored, computed). UFS1 inodes carry none.
    pub fn ckhash_mismatch(v: Variant, disk: &[u8]) -> Option<(u32, u32)> {
        if v.ufs != Ufs::Ufs2 {
            return None;
        }
        let stored = v.endian.get_u32(disk, DI_CKHASH_OFF);
        let computed = crate::ckhash::ckhash_with_zeroed_field(&disk[..DINODE_SIZE], DI_CKHASH_OFF);
        (stored != computed).then_some((stored, computed))
    }

    fn encode_ufs2_swapped(&self, out: &mut [u8]) {
        swap_ufs2_scalars(&self.raw, out);
        if self.holds_short_link(MAXSYMLINKLEN_UFS2) {
            out[DI_DB_OFF..DI_DB_OFF + MAXSYMLINKLEN_UFS2]
                .copy_from_slice(&self.raw[DI_DB_OFF..DI_DB_OFF + MAXSYMLINKLEN_UFS2]);
        } else {
            swap_ufs2_pointers(&self.raw, out);
        }
    }

    fn encode_ufs1(&self, e: Endian, out: &mut [u8]) {
        let out = &mut out[..128];
        e.set_u16(out, ufs1::MODE, self.di_mode());
        e.set_i16(out, ufs1::NLINK, self.di_nlink());
        e.set_u32(out, ufs1::FREELINK, self.di_freelink());
        e.set_u64(out, ufs1::SIZE, self.di_size());
        e.set_u32(out, ufs1::ATIME, ufs1_time_to_disk(self.di_atime()));
        e.set_i32(out, ufs1::ATIMENSEC, self.di_atimensec());
        e.set_u32(out, ufs1::MTIME, ufs1_time_to_disk(self.di_mtime()));
        e.set_i32(out, ufs1::MTIMENSEC, self.di_mtimensec());
        e.set_u32(out, ufs1::CTIME, ufs1_time_to_disk(self.di_ctime()));
        e.set_i32(out, ufs1::CTIMENSEC, self.di_ctimensec());
        let short = 4 * (UFS_NDADDR + UFS_NIADDR);
        if self.holds_short_link(short) {
            out[ufs1::DB..ufs1::DB + short]
                .copy_from_slice(&self.raw[DI_DB_OFF..DI_DB_OFF + short]);
        } else {
            for i in 0..UFS_NDADDR + UFS_NIADDR {
                let p = Endian::Little.get_u64(&self.raw, DI_DB_OFF + 8 * i);
                // Widened from these 32 bits when read.
                e.set_u32(out, ufs1::DB + 4 * i, crate::bytes::low_u32(p));
            }
        }
        e.set_u32(out, ufs1::FLAGS, self.di_flags());
        e.set_u32(
            out,
            ufs1::BLOCKS,
            u32::try_from(self.di_blocks()).unwrap_or(u32::MAX),
        );
        e.set_u32(out, ufs1::GEN, self.di_gen());
        e.set_u32(out, ufs1::UID, self.di_uid());
        e.set_u32(out, ufs1::GID, self.di_gid());
        e.set_u64(out, ufs1::MODREV, self.di_modrev());
    }

    crate::fields! {
        di_mode / set_di_mode: u16 @ 0;
        di_nlink / set_di_nlink: i16 @ 2;
        di_uid / set_di_uid: u32 @ 4;
        di_gid / set_di_gid: u32 @ 8;
        di_blksize / set_di_blksize: u32 @ 12;
        di_size / set_di_size: u64 @ 16;
        di_blocks / set_di_blocks: u64 @ 24;
        di_atime / set_di_atime: i64 @ 32;
        di_mtime / set_di_mtime: i64 @ 40;
        di_ctime / set_di_ctime: i64 @ 48;
        di_birthtime / set_di_birthtime: i64 @ 56;
        di_mtimensec / set_di_mtimensec: i32 @ 64;
        di_atimensec / set_di_atimensec: i32 @ 68;
        di_ctimensec / set_di_ctimensec: i32 @ 72;
        di_birthnsec / set_di_birthnsec: i32 @ 76;
        di_gen / set_di_gen: u32 @ 80;
        di_kernflags / set_di_kernflags: u32 @ 84;
        di_flags / set_di_flags: u32 @ 88;
        di_extsize / set_di_extsize: u32 @ 92;
        di_modrev / set_di_modrev: u64 @ 232;
        di_freelink / set_di_freelink: u32 @ 240;
        di_ckhash / set_di_ckhash: u32 @ 244;
    }

    /// Link count as an unsigned number (the field is a signed 16-bit value
    /// on disk; FreeBSD caps it at `UFS_LINK_MAX`).
    pub fn nlink(&self) -> u32 {
        u32::from(self.di_nlink().cast_unsigned())
    }
    /// Counts past the field's 16 bits stay at its largest (the engine
    /// stops at `UFS_LINK_MAX`, 32767, long before).
    pub fn set_nlink(&mut self, n: u32) {
        self.set_di_nlink(u16::try_from(n).unwrap_or(u16::MAX).cast_signed())
    }
    pub fn di_db(&self, i: usize) -> u64 {
        Endian::Little.get_u64(&self.raw, DI_DB_OFF + 8 * i)
    }
    pub fn set_di_db(&mut self, i: usize, v: u64) {
        debug_assert!(i < UFS_NDADDR);
        Endian::Little.set_u64(&mut self.raw, DI_DB_OFF + 8 * i, v)
    }
    pub fn di_ib(&self, i: usize) -> u64 {
        Endian::Little.get_u64(&self.raw, DI_IB_OFF + 8 * i)
    }
    pub fn set_di_ib(&mut self, i: usize, v: u64) {
        debug_assert!(i < UFS_NIADDR);
        Endian::Little.set_u64(&mut self.raw, DI_IB_OFF + 8 * i, v)
    }
    pub fn di_extb(&self, i: usize) -> u64 {
        Endian::Little.get_u64(&self.raw, 96 + 8 * i)
    }
    pub fn set_di_extb(&mut self, i: usize, v: u64) {
        debug_assert!(i < crate::UFS_NXADDR);
        Endian::Little.set_u64(&mut self.raw, 96 + 8 * i, v)
    }
    pub fn file_type(&self) -> u16 {
        self.di_mode() & IFMT
    }
    pub fn is_dir(&self) -> bool {
        self.file_type() == IFDIR
    }
    pub fn is_reg(&self) -> bool {
        self.file_type() == IFREG
    }
    pub fn is_symlink(&self) -> bool {
        self.file_type() == IFLNK
    }
    /// A device node keeps its `dev_t` in `di_db[0]` (low 32 bits, `di_rdev`).
    pub fn di_rdev(&self) -> u32 {
        Endian::Little.get_u32(&self.raw, DI_DB_OFF)
    }
    pub fn set_di_rdev(&mut self, dev: u32) {
        Endian::Little.set_u32(&mut self.raw, DI_DB_OFF, dev)
    }
    /// The in-inode symlink area (`di_shortlink`).
    pub fn shortlink(&self) -> &[u8] {
        &self.raw[DI_DB_OFF..DI_DB_OFF + MAXSYMLINKLEN_UFS2]
    }
    pub fn set_shortlink(&mut self, target: &[u8]) {
        let a = &mut self.raw[DI_DB_OFF..DI_DB_OFF + MAXSYMLINKLEN_UFS2];
        a.fill(0);
        let n = target.len().min(MAXSYMLINKLEN_UFS2);
        a[..n].copy_from_slice(&target[..n]);
    }
    /// Clears the block pointer area (data pointers or short symlink).
    pub fn clear_pointers(&mut self) {
        self.raw[DI_DB_OFF..DI_IB_OFF + 8 * UFS_NIADDR].fill(0);
    }
    /// True when every byte is zero (a never-used inode).
    pub fn is_zero(&self) -> bool {
        self.raw.iter().all(|&b| b == 0)
    }
}

fn decode_ufs2_swapped(b: &[u8]) -> Dinode {
    let mut d = Dinode::default();
    swap_ufs2_scalars(b, &mut d.raw);
    if d.holds_short_link(MAXSYMLINKLEN_UFS2) {
        d.raw[DI_DB_OFF..DI_DB_OFF + MAXSYMLINKLEN_UFS2]
            .copy_from_slice(&b[DI_DB_OFF..DI_DB_OFF + MAXSYMLINKLEN_UFS2]);
    } else {
        swap_ufs2_pointers(b, &mut d.raw);
    }
    d
}

fn decode_ufs1(e: Endian, b: &[u8]) -> Dinode {
    let mut d = Dinode::default();
    d.set_di_mode(e.get_u16(b, ufs1::MODE));
    d.set_di_nlink(e.get_i16(b, ufs1::NLINK));
    d.set_di_freelink(e.get_u32(b, ufs1::FREELINK));
    d.set_di_size(e.get_u64(b, ufs1::SIZE));
    d.set_di_atime(ufs1_time_from_disk(e.get_u32(b, ufs1::ATIME)));
    d.set_di_atimensec(e.get_i32(b, ufs1::ATIMENSEC));
    d.set_di_mtime(ufs1_time_from_disk(e.get_u32(b, ufs1::MTIME)));
    d.set_di_mtimensec(e.get_i32(b, ufs1::MTIMENSEC));
    d.set_di_ctime(ufs1_time_from_disk(e.get_u32(b, ufs1::CTIME)));
    d.set_di_ctimensec(e.get_i32(b, ufs1::CTIMENSEC));
    d.set_di_flags(e.get_u32(b, ufs1::FLAGS));
    d.set_di_blocks(e.get_u32(b, ufs1::BLOCKS) as u64);
    d.set_di_gen(e.get_u32(b, ufs1::GEN));
    d.set_di_uid(e.get_u32(b, ufs1::UID));
    d.set_di_gid(e.get_u32(b, ufs1::GID));
    d.set_di_modrev(e.get_u64(b, ufs1::MODREV));
    let short = 4 * (UFS_NDADDR + UFS_NIADDR);
    if d.holds_short_link(short) {
        d.raw[DI_DB_OFF..DI_DB_OFF + short].copy_from_slice(&b[ufs1::DB..ufs1::DB + short]);
    } else {
        for i in 0..UFS_NDADDR + UFS_NIADDR {
            let p = e.get_u32(b, ufs1::DB + 4 * i) as u64;
            Endian::Little.set_u64(&mut d.raw, DI_DB_OFF + 8 * i, p);
        }
    }
    d
}

/// `DT_*` directory entry types (sys/sys/dirent.h).
pub mod dt {
    pub const DT_UNKNOWN: u8 = 0;
    pub const DT_FIFO: u8 = 1;
    pub const DT_CHR: u8 = 2;
    pub const DT_DIR: u8 = 4;
    pub const DT_BLK: u8 = 6;
    pub const DT_REG: u8 = 8;
    pub const DT_LNK: u8 = 10;
    pub const DT_SOCK: u8 = 12;
    pub const DT_WHT: u8 = 14;
}

/// The `d_type` that matches a mode (`IFTODT`).
pub fn iftodt(mode: u16) -> u8 {
    ((mode & IFMT) >> 12) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Dinode {
        let mut d = Dinode::default();
        d.set_di_mode(IFREG | 0o644);
        d.set_nlink(2);
        d.set_di_uid(1001);
        d.set_di_gid(20);
        d.set_di_size(123_456_789);
        d.set_di_blocks(4242);
        d.set_di_atime(1_700_000_001);
        d.set_di_mtime(4_102_444_800);
        d.set_di_ctime(1_700_000_003);
        d.set_di_atimensec(11);
        d.set_di_mtimensec(22);
        d.set_di_ctimensec(33);
        d.set_di_gen(0xdead_beef);
        d.set_di_flags(crate::UF_NODUMP);
        d.set_di_modrev(99);
        d.set_di_freelink(7);
        for i in 0..UFS_NDADDR {
            d.set_di_db(i, 1000 + i as u64);
        }
        for i in 0..UFS_NIADDR {
            d.set_di_ib(i, 2000 + i as u64);
        }
        d
    }

    #[test]
    fn every_variant_stores_and_gives_back_the_same_inode() {
        let d = sample();
        for v in [
            Variant::UFS1_LE,
            Variant::UFS1_BE,
            Variant::UFS2_LE,
            Variant::UFS2_BE,
        ] {
            let disk = d.encode(v, false);
            assert_eq!(disk.len(), v.dinode_size());
            assert_eq!(Dinode::decode(v, &disk), d, "{v}");
        }
        // UFS2 little-endian is the canonical form itself.
        assert_eq!(&d.encode(Variant::UFS2_LE, false)[..], &d.as_bytes()[..]);
    }

    #[test]
    fn ufs1_fields_sit_where_freebsds_struct_puts_them() {
        let d = sample();
        let le = d.encode(Variant::UFS1_LE, false);
        let be = d.encode(Variant::UFS1_BE, false);
        let e = Endian::Little;
        assert_eq!(e.get_u16(&le, 0), IFREG | 0o644);
        assert_eq!(e.get_u64(&le, 8), 123_456_789);
        assert_eq!(
            e.get_u32(&le, 24),
            4_102_444_800u32,
            "mtime past 2038, unsigned"
        );
        assert_eq!(e.get_u32(&le, 40), 1000, "di_db[0]");
        assert_eq!(e.get_u32(&le, 88), 2000, "di_ib[0]");
        assert_eq!(e.get_u32(&le, 104), 4242, "di_blocks");
        assert_eq!(e.get_u32(&le, 108), 0xdead_beef, "di_gen");
        assert_eq!((e.get_u32(&le, 112), e.get_u32(&le, 116)), (1001, 20));
        assert_eq!(Endian::Big.get_u32(&be, 112), 1001);
        assert_eq!(&be[40..44], &1000u32.to_be_bytes());
        // Fields UFS1 lacks are gone.
        let mut x = d.clone();
        x.set_di_birthtime(5);
        x.set_di_extsize(100);
        assert_eq!(
            Dinode::decode(Variant::UFS1_LE, &x.encode(Variant::UFS1_LE, false)),
            d
        );
    }

    #[test]
    fn short_symlinks_are_bytes_in_every_order() {
        for (v, n) in [
            (Variant::UFS1_BE, 59),
            (Variant::UFS2_BE, 119),
            (Variant::UFS1_LE, 59),
        ] {
            let mut d = Dinode::default();
            d.set_di_mode(IFLNK | 0o777);
            let target: Vec<u8> = (0..n)
                .map(|i| b"abcdefghijklmnopqrstuvwxyz"[i % 26])
                .collect();
            d.set_shortlink(&target);
            d.set_di_size(n as u64);
            let disk = d.encode(v, false);
            let at = if v.is_ufs1() { 40 } else { DI_DB_OFF };
            assert_eq!(&disk[at..at + n], &target[..], "{v}: the text as written");
            let back = Dinode::decode(v, &disk);
            assert_eq!(&back.shortlink()[..n], &target[..], "{v}");
        }
    }

    #[test]
    fn ufs1_times_outside_the_field_take_its_nearest_value() {
        assert_eq!(ufs1_time_to_disk(-5), 0);
        assert_eq!(ufs1_time_to_disk(1 << 40), u32::MAX);
        assert_eq!(ufs1_time_from_disk(0xffff_ffff), 4_294_967_295);
        assert_eq!(
            ufs1_time_from_disk(0x8000_0000),
            2_147_483_648,
            "after 2038, not 1901"
        );
    }

    #[test]
    fn big_endian_ufs2_hashes_are_over_the_bytes_as_stored() {
        let d = sample();
        let disk = d.encode(Variant::UFS2_BE, true);
        assert_eq!(Dinode::ckhash_mismatch(Variant::UFS2_BE, &disk), None);
        let mut bad = disk.clone();
        bad[20] ^= 1;
        assert!(Dinode::ckhash_mismatch(Variant::UFS2_BE, &bad).is_some());
        let stored = Endian::Big.get_u32(&disk, DI_CKHASH_OFF);
        let computed = crate::ckhash::ckhash_with_zeroed_field(&disk, DI_CKHASH_OFF);
        assert_eq!(stored, computed);
        assert_eq!(Dinode::ckhash_mismatch(Variant::UFS1_LE, &[0u8; 128]), None);
    }
}
