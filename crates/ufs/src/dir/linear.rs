//! FreeBSD's linear directory algorithms (`ufs_lookup.c`, `ufs_direnter`):
//! lookup by scanning every chunk; for an insertion, one sweep that also
//! picks the slot: the first record with enough room of its own, else the
//! first chunk whose scattered room adds up (to be compacted), else a new
//! chunk at the end; and truncation of empty trailing chunks. Used for
//! directories without a dirhash index; the baseline dirhash is measured
//! against, so it stays free of any index logic.
//!
//! Invariants: see [`super`]; these functions only read the directory and
//! compute where an edit goes; the edits themselves are in [`super::chunk`].
use super::Found;
use crate::error::Result;
use crate::fs::FsCore;
use crate::Ino;
use std::ops::ControlFlow;
use ufs_format::*;

/// Where a new entry goes, from one sweep of the directory.
pub(super) struct Slot {
    /// `(chunk offset, span start, span length)`, or `None`: append.
    pub span: Option<(u64, usize, usize)>,
    /// End of the last chunk holding a live entry (FreeBSD's `i_endoff`).
    pub end_useful: u64,
}

impl FsCore {
    /// Linear lookup, starting where the last successful lookup in this
    /// directory ended (FreeBSD's `i_diroff`) and wrapping around: lookups
    /// in directory order cost one chunk each.
    pub(super) fn linear_lookup(
        &mut self,
        ino: Ino,
        di: &Dinode,
        name: &[u8],
    ) -> Result<Option<Found>> {
        self.dirhash.stats.lookups_linear += 1;
        let size = di.di_size();
        let start = self
            .dir_hints
            .get(&ino)
            .copied()
            .filter(|&h| h < size)
            .unwrap_or(0);
        let matcher = |coff: u64, e: ufs_format::dir::EntryRef<'_>| {
            if e.ino != 0 && e.name == name {
                ControlFlow::Break(Found {
                    ino: Ino::from(e.ino),
                    dtype: e.dtype,
                    off: coff + e.off as u64,
                })
            } else {
                ControlFlow::Continue(())
            }
        };
        let mut found = self.dir_scan(ino, di, start, matcher)?;
        if found.is_none() && start > 0 {
            found = self
                .dir_scan(ino, di, 0, |coff, e| {
                    if coff >= start {
                        ControlFlow::Break(None)
                    } else {
                        matcher(coff, e).map_break(Some)
                    }
                })?
                .flatten();
        }
        if let Some(f) = &found {
            self.dir_hints
                .insert(ino, f.off / DIRBLKSIZ as u64 * DIRBLKSIZ as u64);
        }
        Ok(found)
    }

    /// The slot sweep of `ufs_lookup` for an entry of `needed` bytes.
    pub(super) fn linear_slot(&mut self, ino: Ino, di: &Dinode, needed: usize) -> Result<Slot> {
        let mut found: Option<(u64, usize, usize)> = None; // one record with room
        let mut compact: Option<(u64, usize, usize)> = None; // first chunk whose room adds up
        let mut end_useful = 0u64;
        let mut cur_chunk = u64::MAX;
        let mut acc_start: Option<usize> = None;
        let mut acc_free = 0usize;
        self.dir_scan(ino, di, 0, |coff, e| {
            if coff != cur_chunk {
                cur_chunk = coff;
                acc_start = None;
                acc_free = 0;
            }
            if e.ino != 0 {
                end_useful = coff + DIRBLKSIZ as u64;
            }
            if found.is_some() {
                return ControlFlow::<()>::Continue(());
            }
            let slack = e.reclen as usize - e.size();
            if slack == 0 {
                return ControlFlow::Continue(());
            }
            if slack >= needed {
                found = Some((coff, e.off, e.reclen as usize));
                return ControlFlow::Continue(());
            }
            if compact.is_none() {
                let start = *acc_start.get_or_insert(e.off);
                acc_free += slack;
                if acc_free >= needed {
                    compact = Some((coff, start, e.off + e.reclen as usize - start));
                }
            }
            ControlFlow::Continue(())
        })?;
        Ok(Slot {
            span: found.or(compact),
            end_useful,
        })
    }

    /// Finds the live entry `name` for removal.
    pub(super) fn linear_find(
        &mut self,
        ino: Ino,
        di: &Dinode,
        name: &[u8],
    ) -> Result<Option<Found>> {
        self.dir_scan(ino, di, 0, |coff, e| {
            if e.ino != 0 && e.name == name {
                ControlFlow::Break(Found {
                    ino: Ino::from(e.ino),
                    dtype: e.dtype,
                    off: coff + e.off as u64,
                })
            } else {
                ControlFlow::Continue(())
            }
        })
    }

    /// End of the last chunk that holds a live entry, looking back from
    /// the end (never below the first chunk).
    pub(super) fn linear_end_useful(&mut self, ino: Ino, di: &Dinode) -> Result<u64> {
        let mut end = di.di_size();
        while end > DIRBLKSIZ as u64 {
            let chunk = end - DIRBLKSIZ as u64;
            let live = self.dir_scan(ino, di, chunk, |coff, e| {
                if coff != chunk {
                    ControlFlow::Break(false)
                } else if e.ino != 0 {
                    ControlFlow::Break(true)
                } else {
                    ControlFlow::Continue(())
                }
            })?;
            if live == Some(true) {
                break;
            }
            end = chunk;
        }
        Ok(end)
    }
}
