//! Fragment addresses as a type of their own.
//!
//! A [`Frag`] is where something lies on the file system's device, counted
//! in fragments from the start of the file system (FreeBSD's
//! `ufs2_daddr_t`): a block pointer of an inode or an indirect block, what
//! the allocator hands out, the key of a cached buffer. Counts of
//! fragments, lengths and offsets inside a block are plain numbers; only
//! an address is a `Frag`, so one cannot be passed where the other is
//! meant.
//!
//! Invariants: a `Frag` is only a place. Whether it lies inside the file
//! system and outside a group's metadata is checked where a pointer is
//! read from disk (`FsCore::check_ptr`). In a block pointer, 0
//! ([`Frag::NONE`]) means no block (a hole, or nothing allocated yet); the
//! boot area at fragment 0 is never a file's block. The byte offset on the
//! device is computed in one place, [`Frag::byte_offset`]. The number
//! itself is reachable ([`Frag::get`]) for the format's arithmetic (the
//! group of an address, its bit in a group's map) and for reports.
use crate::error::{Damage, Error, Result};
use serde::Serialize;

/// The address of a fragment: fragments from the start of the file system.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize)]
#[serde(transparent)]
pub struct Frag(u64);

impl Frag {
    /// No block: a block pointer's 0.
    pub const NONE: Frag = Frag(0);

    /// The fragment at address `n`.
    pub const fn new(n: u64) -> Frag {
        Frag(n)
    }

    /// The number, for the format's arithmetic and for reports.
    pub const fn get(self) -> u64 {
        self.0
    }

    /// Whether this is a block pointer's 0 (no block).
    pub const fn is_none(self) -> bool {
        self.0 == 0
    }

    /// The fragment `n` fragments further on.
    pub const fn offset(self, n: u64) -> Frag {
        Frag(self.0 + n)
    }

    /// The fragment `n` fragments further on, or None past the last
    /// address a number holds (a damaged pointer).
    pub fn checked_offset(self, n: u64) -> Option<Frag> {
        self.0.checked_add(n).map(Frag)
    }

    /// The fragment `n` fragments further on, the last address if that
    /// is past it (the end of a range to search).
    pub const fn saturating_offset(self, n: u64) -> Frag {
        Frag(self.0.saturating_add(n))
    }

    /// The byte offset of this fragment on the device, with fragments of
    /// `1 << fshift` bytes; an error naming the block if it does not fit
    /// in 64 bits (a damaged pointer).
    pub fn byte_offset(self, fshift: u32) -> Result<u64> {
        self.0.checked_mul(1u64 << fshift).ok_or_else(|| {
            Error::damaged(
                Damage::Block(self),
                format!("block address {self} overflows"),
            )
        })
    }

    /// The fragment holding byte `byte_off` of the device, with fragments
    /// of `1 << fshift` bytes.
    pub const fn holding_byte(byte_off: u64, fshift: u32) -> Frag {
        Frag(byte_off >> fshift)
    }
}

shown_as_number!(Frag, debug);

/// An inode's block pointers as the engine reads and stores them:
/// addresses (the format crate decodes them as plain numbers).
pub(crate) trait BlockPointers {
    /// Direct pointer `i` (`di_db`).
    fn db(&self, i: usize) -> Frag;
    /// The indirect block of level `i + 1` (`di_ib`).
    fn ib(&self, i: usize) -> Frag;
    /// Extended attribute block `i` (`di_extb`).
    fn extb(&self, i: usize) -> Frag;
    fn set_db(&mut self, i: usize, a: Frag);
    fn set_ib(&mut self, i: usize, a: Frag);
    fn set_extb(&mut self, i: usize, a: Frag);
}

impl BlockPointers for ufs_format::Dinode {
    fn db(&self, i: usize) -> Frag {
        Frag(self.di_db(i))
    }
    fn ib(&self, i: usize) -> Frag {
        Frag(self.di_ib(i))
    }
    fn extb(&self, i: usize) -> Frag {
        Frag(self.di_extb(i))
    }
    fn set_db(&mut self, i: usize, a: Frag) {
        self.set_di_db(i, a.0);
    }
    fn set_ib(&mut self, i: usize, a: Frag) {
        self.set_di_ib(i, a.0);
    }
    fn set_extb(&mut self, i: usize, a: Frag) {
        self.set_di_extb(i, a.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fragment_address_prints_orders_and_steps_as_its_number() {
        let a = Frag::new(96);
        assert_eq!(format!("{a} {:?}", Frag::NONE), "96 0");
        assert!(Frag::NONE < a && Frag::NONE.is_none() && !a.is_none());
        assert_eq!(a.offset(8), Frag::new(104));
        assert_eq!(Frag::new(u64::MAX).checked_offset(1), None);
        assert_eq!(Frag::new(u64::MAX).saturating_offset(1).get(), u64::MAX);
        assert_eq!(a.byte_offset(11).unwrap(), 96 << 11);
        assert!(Frag::new(u64::MAX).byte_offset(11).is_err());
        assert_eq!(Frag::holding_byte((96 << 11) + 5, 11), a);
        assert_eq!(serde_json::to_string(&a).unwrap(), "96");
    }
}
