//! Which FFS a file system is: UFS1 or UFS2, and its byte order.
//!
//! Invariants: a [`Variant`] comes from a superblock's magic number (or
//! from what newfs was asked to make) and never changes while a file
//! system is open. Everything whose size or encoding differs between the
//! variants is answered here or by the decoders it is passed to: the inode
//! size, the block pointer width, the short-symlink limit, and the byte
//! order of every multi-byte field. Block pointers of indirect blocks are
//! read and written only through [`Variant::get_ptr`]/[`Variant::set_ptr`].
//!
//! Sources: FreeBSD `sys/ufs/ffs/fs.h` (`FS_UFS1_MAGIC`, `FS_UFS2_MAGIC`,
//! `NINDIR`, `INOPB`), `sys/ufs/ufs/dinode.h` (`ufs1_daddr_t` is 32-bit,
//! `ufs2_daddr_t` 64-bit; `UFS1_MAXSYMLINKLEN`, `UFS2_MAXSYMLINKLEN`);
//! NetBSD `sys/ufs/ffs/ffs_bswap.c` for byte-swapped file systems.
use crate::bytes::Endian;
use crate::{FS_UFS1_MAGIC, FS_UFS2_MAGIC};

/// The on-disk format generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Ufs {
    /// 4.4BSD's FFS as FreeBSD 5 kept it: 128-byte inodes, 32-bit block
    /// pointers and times (FreeBSD before 5.0, `newfs -O 1`, makefs'
    /// default, NetBSD's FFSv1, OpenBSD's FFS before 6.7).
    Ufs1,
    /// FreeBSD 5's UFS2: 256-byte inodes, 64-bit pointers and times,
    /// extended attributes.
    #[default]
    Ufs2,
}

/// A file system's format and byte order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Variant {
    pub ufs: Ufs,
    pub endian: Endian,
}

impl Variant {
    /// UFS2 as FreeBSD on amd64 writes it.
    pub const UFS2_LE: Variant = Variant {
        ufs: Ufs::Ufs2,
        endian: Endian::Little,
    };
    pub const UFS2_BE: Variant = Variant {
        ufs: Ufs::Ufs2,
        endian: Endian::Big,
    };
    pub const UFS1_LE: Variant = Variant {
        ufs: Ufs::Ufs1,
        endian: Endian::Little,
    };
    pub const UFS1_BE: Variant = Variant {
        ufs: Ufs::Ufs1,
        endian: Endian::Big,
    };

    pub fn new(ufs: Ufs, endian: Endian) -> Variant {
        Variant { ufs, endian }
    }

    /// The variant a superblock's magic number (read little-endian at
    /// offset 1372) names, if any.
    pub fn from_magic_le(m: u32) -> Option<Variant> {
        match m {
            FS_UFS2_MAGIC => Some(Self::UFS2_LE),
            FS_UFS1_MAGIC => Some(Self::UFS1_LE),
            _ if m == FS_UFS2_MAGIC.swap_bytes() => Some(Self::UFS2_BE),
            _ if m == FS_UFS1_MAGIC.swap_bytes() => Some(Self::UFS1_BE),
            _ => None,
        }
    }

    pub fn is_ufs1(self) -> bool {
        self.ufs == Ufs::Ufs1
    }

    /// The superblock magic of this format.
    pub fn magic(self) -> u32 {
        match self.ufs {
            Ufs::Ufs1 => FS_UFS1_MAGIC,
            Ufs::Ufs2 => FS_UFS2_MAGIC,
        }
    }

    /// Bytes of an on-disk inode (`sizeof(struct ufs1_dinode)` 128,
    /// `sizeof(struct ufs2_dinode)` 256).
    #[inline]
    pub fn dinode_size(self) -> usize {
        match self.ufs {
            Ufs::Ufs1 => 128,
            Ufs::Ufs2 => 256,
        }
    }

    /// Bytes of a block pointer (`ufs1_daddr_t`, `ufs2_daddr_t`).
    #[inline]
    pub fn ptr_size(self) -> usize {
        match self.ufs {
            Ufs::Ufs1 => 4,
            Ufs::Ufs2 => 8,
        }
    }

    /// Longest symlink target kept inside the inode's pointer area
    /// (`fs_maxsymlinklen`: the pointer area's size).
    #[inline]
    pub fn maxsymlinklen(self) -> usize {
        (crate::UFS_NDADDR + crate::UFS_NIADDR) * self.ptr_size()
    }

    /// Largest block address the format can hold.
    pub fn max_daddr(self) -> u64 {
        match self.ufs {
            Ufs::Ufs1 => i32::MAX as u64,
            Ufs::Ufs2 => i64::MAX as u64,
        }
    }

    /// Pointer `i` of an indirect block. UFS1 pointers are 32-bit signed
    /// on disk; a negative one reads as a huge address, which every range
    /// check refuses.
    #[inline]
    pub fn get_ptr(self, block: &[u8], i: usize) -> u64 {
        match self.ufs {
            Ufs::Ufs1 => self.endian.get_u32(block, i * 4) as u64,
            Ufs::Ufs2 => self.endian.get_u64(block, i * 8),
        }
    }

    /// Sets pointer `i` of an indirect block. The caller keeps addresses
    /// within the file system, which fit the format.
    #[inline]
    pub fn set_ptr(self, block: &mut [u8], i: usize, v: u64) {
        match self.ufs {
            Ufs::Ufs1 => self.endian.set_u32(block, i * 4, crate::bytes::low_u32(v)),
            Ufs::Ufs2 => self.endian.set_u64(block, i * 8, v),
        }
    }

    /// Every pointer of an indirect block, in order.
    pub fn ptrs(self, block: &[u8]) -> impl Iterator<Item = u64> + '_ {
        (0..block.len() / self.ptr_size()).map(move |i| self.get_ptr(block, i))
    }

    /// The short name commands take and print: `ufs2`, `ufs1`, `ufs2-be`,
    /// `ufs1-be` (little-endian is the default and goes unsaid).
    pub fn short_name(self) -> &'static str {
        match (self.ufs, self.endian) {
            (Ufs::Ufs2, Endian::Little) => "ufs2",
            (Ufs::Ufs1, Endian::Little) => "ufs1",
            (Ufs::Ufs2, Endian::Big) => "ufs2-be",
            (Ufs::Ufs1, Endian::Big) => "ufs1-be",
        }
    }

    /// The variant a short name names (also `ufs2-le`, `ufs1-le`).
    pub fn parse(s: &str) -> Option<Variant> {
        match s.trim().to_ascii_lowercase().as_str() {
            "ufs2" | "ufs2-le" => Some(Self::UFS2_LE),
            "ufs1" | "ufs1-le" => Some(Self::UFS1_LE),
            "ufs2-be" => Some(Self::UFS2_BE),
            "ufs1-be" => Some(Self::UFS1_BE),
            _ => None,
        }
    }

    /// The options of `ufskit newfs` that make this variant.
    pub fn newfs_args(self) -> Vec<&'static str> {
        let mut v = Vec::new();
        if self.is_ufs1() {
            v.extend(["-O", "1"]);
        }
        if self.endian == Endian::Big {
            v.extend(["-B", "be"]);
        }
        v
    }

    /// "UFS2, little-endian" and the like, for messages.
    pub fn describe(self) -> String {
        format!(
            "{}, {}",
            match self.ufs {
                Ufs::Ufs1 => "UFS1",
                Ufs::Ufs2 => "UFS2",
            },
            self.endian.name()
        )
    }
}

impl std::fmt::Display for Variant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn magics_name_their_variants_in_both_orders() {
        assert_eq!(
            Variant::from_magic_le(FS_UFS2_MAGIC),
            Some(Variant::UFS2_LE)
        );
        assert_eq!(
            Variant::from_magic_le(FS_UFS2_MAGIC.swap_bytes()),
            Some(Variant::UFS2_BE)
        );
        assert_eq!(
            Variant::from_magic_le(FS_UFS1_MAGIC),
            Some(Variant::UFS1_LE)
        );
        assert_eq!(
            Variant::from_magic_le(FS_UFS1_MAGIC.swap_bytes()),
            Some(Variant::UFS1_BE)
        );
        assert_eq!(Variant::from_magic_le(0x1234), None);
    }

    #[test]
    fn short_names_round_trip() {
        for v in [
            Variant::UFS1_LE,
            Variant::UFS1_BE,
            Variant::UFS2_LE,
            Variant::UFS2_BE,
        ] {
            assert_eq!(Variant::parse(v.short_name()), Some(v));
        }
        assert_eq!(Variant::parse("UFS1-LE"), Some(Variant::UFS1_LE));
        assert_eq!(Variant::parse("ufs3"), None);
        assert_eq!(Variant::UFS1_BE.newfs_args(), vec!["-O", "1", "-B", "be"]);
    }

    #[test]
    fn pointer_widths_and_orders() {
        let mut b = [0u8; 16];
        Variant::UFS1_BE.set_ptr(&mut b, 1, 0x0102_0304);
        assert_eq!(&b[4..8], &[1, 2, 3, 4]);
        assert_eq!(Variant::UFS1_BE.get_ptr(&b, 1), 0x0102_0304);
        let mut b = [0u8; 16];
        Variant::UFS2_LE.set_ptr(&mut b, 1, 0x0506);
        assert_eq!(&b[8..10], &[6, 5]);
        Variant::UFS2_LE.set_ptr(&mut b, 0, 7);
        assert_eq!(
            Variant::UFS2_LE.ptrs(&b).collect::<Vec<_>>(),
            vec![7, 0x0506]
        );
        assert_eq!(Variant::UFS1_LE.maxsymlinklen(), 60);
        assert_eq!(Variant::UFS2_BE.maxsymlinklen(), 120);
    }
}
