//! The buffer space directory blocks share with every other buffer when
//! vmiodir is off ([`DirSpace::Shared`]), as in FreeBSD 4.5.
//!
//! In FreeBSD 4.5 (`sys/kern/vfs_bio.c`: `getnewbuf`, `allocbuf`) every
//! block the file system reads or writes passes through a buffer, and the
//! buffers together hold at most `hibufspace` bytes in at most `nbuf`
//! buffers; a new buffer reuses the least recently used clean one,
//! whatever it holds ("we no longer distinguish between VMIO and non-VMIO
//! buffers", `getnewbuf`). A file read releases its buffer to the tail of
//! the clean queue (`bqrelse` in `ufs_readwrite.c`; only the pager's reads,
//! `IO_VMIO`, give the buffer up at once). A file's buffer is backed by the VM's
//! pages, so when it is reused the file's data stay in memory. A directory
//! buffer with vmiodir off is not: its contents live only in the buffer,
//! and reusing it loses them. So directory blocks compete for the buffer
//! space with every file block that passes through it, while file pages
//! do not compete with directories for the rest of memory.
//!
//! This module keeps the other half of that competition: the file and
//! metadata buffers that passed through the space (the "passers"), by
//! recency, with their sizes. The directory blocks themselves stay in the
//! cache's directory pool, stamped on the same clock; the cache evicts
//! whichever of the two is older until both fit
//! (`BufferCache::make_room`).
//!
//! Invariants:
//! - A key is in `by_key` exactly when it is in `by_stamp`, with the same
//!   stamp; `bytes` and `bufs` are the sums of the sizes and buffer counts
//!   in `by_stamp`.
//! - The passers alone never hold more than the space's limits: the
//!   oldest ones fall out as new ones pass. `fell_out` is then the newest stamp
//!   that fell out, so that a directory block older than it, which would
//!   have fallen out before it, is evicted at the next reckoning.
use crate::frag::Frag;
use std::collections::{BTreeMap, HashMap};

/// Where directory blocks live with vmiodir off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirSpace {
    /// In FreeBSD 4.5's buffer space, shared with every other buffer that
    /// passes through it (the model of FreeBSD 4.5, the default), of at
    /// most this many buffers (`nbuf`) besides its size in bytes.
    Shared { buffers: u64 },
    /// In a pool of their own that nothing else uses (two ablations of
    /// the evaluation: the model until 2026-11-28, late, and
    /// `maxbufmallocspace` alone).
    Own,
}

/// The buffers other than directory blocks that passed through the buffer
/// space, least recently used first.
#[derive(Debug, Default)]
pub(crate) struct Passers {
    /// Stamp to (key, bytes, buffers).
    by_stamp: BTreeMap<u64, (Frag, u64, u64)>,
    by_key: HashMap<Frag, u64>,
    bytes: u64,
    bufs: u64,
    fell_out: u64,
    /// The space's size: bytes, and buffers.
    limit: (u64, u64),
}

impl Passers {
    /// Passers through a space of `bytes` bytes in `buffers` buffers.
    pub(crate) fn new(bytes: u64, buffers: u64) -> Passers {
        Passers {
            limit: (bytes, buffers),
            ..Passers::default()
        }
    }

    /// Bytes and buffers of the passers.
    pub(crate) fn held(&self) -> (u64, u64) {
        (self.bytes, self.bufs)
    }

    /// Whether the passers and `bytes` more in `bufs` more buffers fit.
    pub(crate) fn fits_with(&self, bytes: u64, bufs: u64) -> bool {
        self.bytes + bytes <= self.limit.0 && self.bufs + bufs <= self.limit.1
    }

    /// A directory block last used before this stamp has fallen out of
    /// the space.
    pub(crate) fn fell_out(&self) -> u64 {
        self.fell_out
    }

    /// The stamp of the least recently used passer.
    pub(crate) fn oldest(&self) -> Option<u64> {
        self.by_stamp.keys().next().copied()
    }

    /// `bufs` buffers of `bytes` bytes in all, known as `key`, pass
    /// through the space now, at `stamp` (later than every stamp before);
    /// the oldest passers fall out while the passers overfill the space.
    pub(crate) fn pass(&mut self, key: Frag, bytes: u64, bufs: u64, stamp: u64) {
        self.forget(key);
        self.by_stamp.insert(stamp, (key, bytes, bufs));
        self.by_key.insert(key, stamp);
        self.bytes += bytes;
        self.bufs += bufs;
        while !self.fits_with(0, 0) {
            let Some(s) = self.oldest() else { break };
            self.fell_out = self.fell_out.max(s + 1);
            self.drop_oldest();
        }
    }

    /// The buffer `key` is gone from memory (evicted from the cache).
    pub(crate) fn forget(&mut self, key: Frag) {
        if let Some(s) = self.by_key.remove(&key) {
            if let Some((_, b, n)) = self.by_stamp.remove(&s) {
                self.bytes -= b;
                self.bufs -= n;
            }
        }
    }

    /// The least recently used passer's buffer is reused.
    pub(crate) fn drop_oldest(&mut self) {
        if let Some((_, (key, b, n))) = self.by_stamp.pop_first() {
            self.by_key.remove(&key);
            self.bytes -= b;
            self.bufs -= n;
        }
    }

    /// Empty (a cold cache).
    pub(crate) fn clear(&mut self) {
        *self = Passers {
            fell_out: self.fell_out,
            ..Passers::new(self.limit.0, self.limit.1)
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oldest_fall_out_beyond_the_limit_and_are_remembered() {
        let mut p = Passers::new(250, 100);
        p.pass(Frag::new(1), 100, 1, 1);
        p.pass(Frag::new(2), 100, 1, 2);
        assert_eq!(p.held(), (200, 2));
        assert_eq!(p.fell_out(), 0);
        p.pass(Frag::new(3), 100, 1, 3);
        assert_eq!(p.held(), (200, 2));
        assert_eq!(p.oldest(), Some(2));
        // Anything used before stamp 2 would have gone with passer 1.
        assert_eq!(p.fell_out(), 2);
    }

    #[test]
    fn passing_again_refreshes_and_forget_frees() {
        let mut p = Passers::new(1000, 100);
        p.pass(Frag::new(1), 100, 1, 1);
        p.pass(Frag::new(2), 100, 1, 2);
        p.pass(Frag::new(1), 100, 1, 3);
        assert_eq!(p.held(), (200, 2));
        assert_eq!(p.oldest(), Some(2));
        p.forget(Frag::new(2));
        assert_eq!(p.oldest(), Some(3));
        assert_eq!(p.held(), (100, 1));
        p.drop_oldest();
        assert_eq!(p.held(), (0, 0));
        assert_eq!(p.oldest(), None);
    }

    #[test]
    fn the_buffer_count_bounds_too() {
        // nbuf bounds a space of small buffers before its bytes do.
        let mut p = Passers::new(1 << 20, 3);
        for k in 0..5 {
            p.pass(Frag::new(k), 1024, 1, k + 1);
        }
        assert_eq!(p.held(), (3072, 3));
        assert_eq!(p.oldest(), Some(3));
        assert_eq!(p.fell_out(), 3);
        // A run of 4 blocks overfills it alone: it stays, the rest go.
        p.pass(Frag::new(9), 4096, 4, 10);
        assert_eq!(p.held(), (0, 0));
        assert!(p.fits_with(1024, 1));
    }
}
