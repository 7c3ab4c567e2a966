//! What the write ordering does at each event of a cached buffer's life,
//! called by the buffer cache: the role of FreeBSD's `bioops`
//! (`io_start`, `io_complete`, `io_deallocate`) between its buffer cache
//! and soft updates. The cache carries each buffer's [`BufDeps`] without
//! looking inside, and an [`Ordering`] for the whole cache; it asks here
//! which image of a buffer to write, reports the write done, and hands
//! over the state of a buffer it drops, moves or cuts.
//!
//! Invariants: only this module and `order::sync` read or change a
//! `BufDeps` or the ledger; a buffer's image for a write is computed from
//! its held changes alone (the bytes in memory are never rolled back: the
//! image swaps regions in and out around the device write); a change is
//! reported written only after its write completed.
use super::{BufDeps, ChangeId, Held, Ledger, OrderStats, WriteMode};
use crate::cache::{BlockKind, Formats};
use crate::frag::Frag;

/// The ordering state of one buffer cache: the write mode and the ledger
/// of undurable changes.
#[derive(Debug)]
pub(crate) struct Ordering {
    pub(super) mode: WriteMode,
    pub(super) ledger: Ledger,
}

impl Default for Ordering {
    fn default() -> Ordering {
        Ordering {
            mode: WriteMode::Async,
            ledger: Ledger::default(),
        }
    }
}

/// How one buffer goes to the device this time: the regions written as
/// they were before their oldest waiting change (offset, image), and the
/// changes the write carries.
#[derive(Debug, Default)]
pub(crate) struct WriteImage {
    pub rollbacks: Vec<(usize, Vec<u8>)>,
    written: Vec<ChangeId>,
}

/// Whether a region's held changes go to disk name by name (all of them
/// directory entry changes: `Formats::entry_image`) rather than the region
/// whole or not at all.
pub(super) fn by_entries(stack: &[Held]) -> bool {
    stack.iter().all(|h| !h.entries.is_empty())
}

impl Ordering {
    /// Whether changes are recorded at all (every mode but async).
    pub fn tracks(&self) -> bool {
        self.mode.tracks()
    }

    /// A buffer was changed: its changes since its last write join its
    /// epoch (they may go to disk with the next write). The epoch's id.
    pub fn dirtied(&mut self, addr: Frag, deps: &mut BufDeps) -> ChangeId {
        if !self.mode.tracks() {
            return ChangeId::NONE;
        }
        if deps.epoch == ChangeId::NONE {
            deps.epoch = self.ledger.new_id(addr);
        }
        deps.epoch
    }

    /// A write of a dirty buffer is about to start (`io_start`): which
    /// regions go rolled back, and which changes the write carries. The
    /// held changes it carries leave `deps`. None: the write would carry
    /// no change (every region waits), so it is not made.
    pub fn initiate(
        &mut self,
        deps: &mut BufDeps,
        kind: BlockKind,
        data: &[u8],
        formats: Option<&dyn Formats>,
    ) -> Option<WriteImage> {
        let mut progress = deps.epoch != ChangeId::NONE || !self.mode.tracks();
        let mut img = WriteImage::default();
        if !deps.held.is_empty() {
            for (&off, (len, stack)) in deps.held.iter_mut() {
                let range = off as usize..(off + *len) as usize;
                if by_entries(stack) {
                    let entry_image = formats.and_then(|f| {
                        f.entry_image(kind, &data[range.clone()], stack, &self.ledger)
                    });
                    if let Some((image, done)) = entry_image {
                        progress |= !done.is_empty();
                        img.written.extend(done.iter().copied());
                        stack.retain(|h| !done.contains(&h.id));
                        if !stack.is_empty() {
                            img.rollbacks.push((range.start, image));
                            self.ledger.stats.entry_rollbacks += 1;
                        }
                        continue;
                    }
                }
                let first_unmet = stack
                    .iter()
                    .position(|h| !self.ledger.all_durable(&h.needs));
                let k = first_unmet.unwrap_or(stack.len());
                img.written.extend(stack.drain(..k).map(|h| h.id));
                progress |= k > 0;
                if let Some(h) = stack.first() {
                    let before = h
                        .before
                        .as_ref()
                        .expect("a held change with needs keeps its region");
                    img.rollbacks.push((off as usize, before.to_vec()));
                }
            }
            deps.held.retain(|_, (_, s)| !s.is_empty());
        }
        progress.then_some(img)
    }

    /// The write begun with [`initiate`](Self::initiate) completed
    /// (`io_complete`): its changes are written (durable now or at the next
    /// flush, by the barrier). Returns whether the buffer still holds
    /// changes that wait (it stays dirty).
    pub fn complete(&mut self, deps: &mut BufDeps, img: WriteImage) -> bool {
        let mut written = img.written;
        written.push(std::mem::take(&mut deps.epoch));
        let top = written.iter().copied().max().unwrap_or(ChangeId::NONE);
        if top != ChangeId::NONE {
            deps.written = top;
        }
        if !img.rollbacks.is_empty() {
            self.ledger.stats.rollbacks += 1;
        }
        for id in written {
            self.ledger.written(id);
        }
        !deps.held.is_empty()
    }

    /// A buffer is dropped unwritten, its block free or about to be
    /// overwritten (`io_deallocate`): whatever it held will never be
    /// written.
    pub fn abandon(&mut self, deps: &BufDeps) {
        self.ledger.moot(&deps.ids());
    }

    /// Changes that will never be written (a buffer's tail cut off).
    pub fn abandon_ids(&mut self, ids: &[ChangeId]) {
        self.ledger.moot(ids);
    }

    /// A buffer's held changes moved with its contents to fragment `to`.
    pub fn moved(&mut self, deps: &BufDeps, to: Frag) {
        self.ledger.moved(&deps.ids(), to);
    }

    /// A device flush completed: every written change is durable.
    pub fn flushed(&mut self) {
        self.ledger.flushed();
    }

    /// The changes written so far, which a flush starting now makes
    /// durable (a flush made without the engine lock).
    pub fn unflushed_snapshot(&self) -> super::FlushWithoutLock {
        self.ledger.unflushed_snapshot()
    }

    /// Counters of the ordering machinery (`ufskit stats`).
    pub fn stats(&self) -> OrderStats {
        let mut s = self.ledger.stats.clone();
        s.pending_now = self.ledger.pending();
        s
    }
}
