//! Inode numbers as a type of their own.
//!
//! An [`Ino`] names one inode of one file system: 0 is the empty directory
//! entry, 1 FreeBSD's whiteout (`UFS_WINO`), 2 the root (`UFS_ROOTINO`),
//! as `sys/ufs/ufs/dinode.h` has them. The engine's calls take and return
//! `Ino`, so a byte offset, a block address or a count cannot be passed
//! where an inode is meant.
//!
//! Invariants: an `Ino` is only a name; whether the inode exists, or the
//! number is below the file system's `ninodes`, is checked where the inode
//! is read (`FsCore::check_ino`). The number itself is reachable
//! ([`Ino::get`]) for the format's arithmetic (`ino_to_cg`, `ino_to_fsba`),
//! for reports and for the kernel's interface, which speak in numbers.
use serde::Serialize;

/// The number of an inode.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize)]
#[serde(transparent)]
pub struct Ino(u64);

impl Ino {
    /// No inode: an empty directory entry (`d_ino == 0`).
    pub const NONE: Ino = Ino(0);
    /// The whiteout's inode (`UFS_WINO`).
    pub const WHITEOUT: Ino = Ino(ufs_format::UFS_WINO);
    /// The root directory (`UFS_ROOTINO`).
    pub const ROOT: Ino = Ino(ufs_format::UFS_ROOTINO);

    /// The inode numbered `n`.
    pub const fn new(n: u64) -> Ino {
        Ino(n)
    }

    /// The number, for the format's arithmetic, reports and the kernel.
    pub const fn get(self) -> u64 {
        self.0
    }

    /// Whether this is the empty entry's 0.
    pub const fn is_none(self) -> bool {
        self.0 == 0
    }

    /// The number as a directory entry's 32-bit `d_ino` holds it. A
    /// mounted file system's inode numbers are below its `ncg * ipg`,
    /// which the superblock's check keeps within 32 bits
    /// (`ufs_format::sb`, "overflow 32-bit inode numbers"), so nothing is
    /// lost for any inode the engine hands out.
    pub fn d_ino(self) -> u32 {
        ufs_format::bytes::low_u32(self.0)
    }
}

impl From<u32> for Ino {
    /// A directory entry's `d_ino`, as the format decodes it.
    fn from(n: u32) -> Ino {
        Ino(u64::from(n))
    }
}

shown_as_number!(Ino, debug);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_inode_number_prints_and_orders_as_its_number() {
        assert_eq!(format!("{} {:?}", Ino::new(42), Ino::ROOT), "42 2");
        assert!(Ino::WHITEOUT < Ino::ROOT);
        assert_eq!(Ino::from(7u32).get(), 7);
        assert!(Ino::NONE.is_none() && !Ino::ROOT.is_none());
        assert_eq!(serde_json::to_string(&Ino::new(9)).unwrap(), "9");
    }
}
