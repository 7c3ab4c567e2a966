//! Forcing and syncing: what a change must wait for, what must go to
//! disk to make changes durable, and what a sync writes in each round,
//! for every write mode, on the buffer cache's own interface (buffers,
//! dirty flags, writes, flushes). With `order::buffers` (the cache's calls
//! into the ordering at each write) this is the whole of the write
//! ordering; the cache itself knows buffers and I/O only.
//!
//! Invariants: a change's needs have smaller ids than the change, so the
//! oldest undurable change can always be written and forcing terminates
//! (an error, never a hang, if it does not: "internal error"); a sync
//! round writes only buffers whose every change can go, unless none can;
//! a plan part never looks at more buffers than it was allowed.
use super::buffers::by_entries;
use super::{BufDeps, ChangeId, EntryOp, Held, OrderStats, WriteMode};
use crate::cache::{BlockKind, BufferCache};
use crate::error::Result;
use crate::frag::Frag;
use foldhash::HashSet;

impl BufferCache {
    /// A change to the region `[roff, roff+rlen)` of a buffer that must not
    /// reach the disk before the changes `needs`. Returns the change's id
    /// and the bytes to change. In normal and sync modes the needs are
    /// forced to disk first; in soft-updates mode the change waits in
    /// memory and writes of the buffer roll the region back until then.
    #[allow(clippy::too_many_arguments)]
    pub fn modify_tracked(
        &mut self,
        addr: Frag,
        len: usize,
        kind: BlockKind,
        roff: usize,
        rlen: usize,
        needs: &[ChangeId],
        entries: Vec<EntryOp>,
    ) -> Result<(ChangeId, &mut [u8])> {
        if !self.order().tracks() {
            return Ok((ChangeId::NONE, self.modify(addr, len, kind)?));
        }
        let mut unmet: Vec<ChangeId> = needs
            .iter()
            .copied()
            .filter(|&n| !self.order().ledger.durable(n))
            .collect();
        unmet.sort_unstable();
        unmet.dedup();
        if !unmet.is_empty() && !self.order().mode.delays() {
            self.force_ids(&unmet)?;
            unmet.retain(|&n| !self.order().ledger.durable(n));
        }
        let (Ok(key), Ok(rlen32)) = (u32::try_from(roff), u32::try_from(rlen)) else {
            return Err(crate::error::Error::corrupt(format!(
                "region {roff}+{rlen} outside any block"
            )));
        };
        if roff + rlen > len {
            return Err(crate::error::Error::corrupt(format!(
                "region {roff}+{rlen} outside a buffer of {len} bytes"
            )));
        }
        self.prepare_change(addr, len, kind)?;
        let (data, deps, order) = self.change_parts(addr);
        let region = deps.held.get(&key);
        // Earlier changes of the same region go to disk in the same write
        // (unless directory entries may go one by one).
        // (A region's held changes are in the order made, so by id: a
        // binary search, as a big directory's inode can hold a change per
        // entry made since its block was last written.)
        if let (Some((_, stack)), true) = (region, entries.is_empty()) {
            unmet.retain(|n| stack.binary_search_by_key(n, |h| h.id).is_err());
        }
        // A change with nothing to wait for, behind held changes of a
        // region written whole or not at all: it goes to disk in the same
        // write as the newest of them, and is durable when that one is, so
        // it is that change (a big directory's inode otherwise stacked a
        // change per entry made, each with its ledger entry, for as long
        // as one of them waited).
        let joins = match region {
            Some((_, stack)) if unmet.is_empty() && entries.is_empty() => {
                stack.last().filter(|h| h.entries.is_empty()).map(|h| h.id)
            }
            _ => None,
        };
        let id = if let Some(last) = joins {
            last
        } else if unmet.is_empty() && region.is_none() {
            order.dirtied(addr, deps)
        } else {
            let id = order.ledger.new_id(addr);
            let before = if unmet.is_empty() {
                None
            } else {
                Some(data[roff..roff + rlen].to_vec().into_boxed_slice())
            };
            if before.is_some() {
                order.ledger.stats.held += 1;
            }
            deps.held
                .entry(key)
                .or_insert_with(|| (rlen32, Vec::new()))
                .1
                .push(Held {
                    id,
                    needs: unmet,
                    before,
                    entries,
                });
            id
        };
        Ok((id, data))
    }

    /// The newest undurable change of the buffer at `addr` (0: none): what
    /// a pointer to the block needs.
    pub fn latest(&self, addr: Frag) -> ChangeId {
        let Some(b) = self.buf_ref(addr) else {
            return ChangeId::NONE;
        };
        let held = b
            .deps
            .held
            .values()
            .filter_map(|(_, s)| s.last().map(|h| h.id))
            .max()
            .unwrap_or(ChangeId::NONE);
        [held, b.deps.epoch, b.deps.written]
            .into_iter()
            .filter(|&i| !self.order().ledger.durable(i))
            .max()
            .unwrap_or(ChangeId::NONE)
    }

    /// The newest undurable change of one region (0: none): what a pointer
    /// to the structure in that region (an inode) needs.
    pub fn region_latest(&self, addr: Frag, roff: usize) -> ChangeId {
        let Some(b) = self.buf_ref(addr) else {
            return ChangeId::NONE;
        };
        let Ok(key) = u32::try_from(roff) else {
            return ChangeId::NONE;
        };
        if let Some((_, s)) = b.deps.held.get(&key) {
            if let Some(h) = s.last() {
                return h.id;
            }
        }
        [b.deps.epoch, b.deps.written]
            .into_iter()
            .filter(|&i| !self.order().ledger.durable(i))
            .max()
            .unwrap_or(ChangeId::NONE)
    }

    /// Counts releases made to wait (statistics).
    pub fn note_deferred(&mut self, n: u64) {
        self.order_mut().ledger.stats.deferred_frees += n;
    }

    pub fn is_durable(&self, id: ChangeId) -> bool {
        self.order().ledger.durable(id)
    }

    /// Changes not yet durable (each holds ledger entries, and a held one
    /// the bytes of its region as they were).
    pub fn pending(&self) -> u64 {
        self.order().ledger.pending()
    }

    /// Whether every change made up to `id` (an id of
    /// [`last_change`](Self::last_change)) is durable, or moot.
    pub fn durable_upto(&self, id: ChangeId) -> bool {
        self.order()
            .ledger
            .oldest_undurable()
            .is_none_or(|o| o > id)
    }

    /// The newest change recorded so far.
    pub fn last_change(&self) -> ChangeId {
        self.order().ledger.last_id()
    }

    /// How many undurable changes the ordering state may hold before the
    /// file system writes everything out: one per KiB of cache (64 Ki
    /// changes for 64 MiB: some 20-30 MiB of state with the regions held
    /// changes keep), so that the daemon stays within `cache=` plus the
    /// dirhash budget plus 64 MiB (FreeBSD bounds its soft-updates
    /// structures the same way, `max_softdeps`, and speeds up the syncer
    /// past it). One per 512 bytes let the state reach 60% of `cache=`;
    /// one per 2 KiB made 100,000 unlinks after 100,000 creates in one
    /// directory write everything out in the middle.
    pub fn max_pending(&self) -> u64 {
        (self.limit() >> 10).max(4096)
    }

    /// Whether the ordering state is past its bound: more undurable
    /// changes than [`max_pending`](Self::max_pending), or ids spanning
    /// four times that from the oldest undurable one (the ledger keeps 8
    /// bytes per id of the span: an old change that stays undurable keeps
    /// every later id's slot).
    pub fn ordering_full(&self) -> bool {
        self.ordering_past(1)
    }

    /// Whether the ordering state is past `factor` times its bound.
    pub fn ordering_past(&self, factor: u64) -> bool {
        let max = self.max_pending() * factor;
        self.order().ledger.pending() > max || self.order().ledger.span() > 4 * max
    }

    /// Counts what a writer did about a state past its bound (see
    /// `order::cleanup`): hurried the syncer, waited for it, or wrote
    /// everything itself.
    pub(crate) fn count_cleanup(&mut self, hurried: bool, waited: bool, wrote_all: bool) {
        let st = &mut self.order_mut().ledger.stats;
        st.syncer_hurried += u64::from(hurried);
        st.writer_waits += u64::from(waited);
        st.writer_syncs += u64::from(wrote_all);
    }

    /// Device flushes so far.
    pub fn flushes(&self) -> u64 {
        self.order().ledger.stats.flushes
    }

    /// Writes the buffers holding the changes `ids` (rolled back where
    /// they must be), without a flush.
    pub fn write_ids(&mut self, ids: &[ChangeId]) -> Result<()> {
        let mut addrs: Vec<Frag> = ids
            .iter()
            .filter_map(|&i| self.order().ledger.owner(i))
            .collect();
        addrs.sort_unstable();
        addrs.dedup();
        for a in addrs {
            self.write_buf(a)?;
        }
        Ok(())
    }

    /// The address of the buffer holding the undurable change `id`.
    pub fn owner(&self, id: ChangeId) -> Option<Frag> {
        self.order().ledger.owner(id)
    }

    /// Drops the buffers of a directory's released blocks (`[addr,
    /// addr+nfrags)`, buffers wholly inside) unwritten, if that is safe:
    /// once the change `by` (the inode write that cut them off: the
    /// directory zeroed, or shrunk) is durable, nothing on disk reaches
    /// them, so what they
    /// hold (removed names that link counts wait for) is settled by `by`
    /// instead of by writing blocks that are about to be freed. Not done
    /// when `by` itself waits, however indirectly, for one of their
    /// changes. Returns whether they were dropped.
    pub fn abandon_dir_blocks(&mut self, addr: Frag, nfrags: u64, by: ChangeId) -> bool {
        if !self.order().mode.tracks() || by == ChangeId::NONE || self.order().ledger.durable(by) {
            return false;
        }
        let victims = self.overlapping(addr, nfrags);
        let mut ids: Vec<ChangeId> = Vec::new();
        for a in &victims {
            match self.buf_ref(*a) {
                Some(b)
                    if b.kind == BlockKind::Dir
                        && *a >= addr
                        && a.offset(self.nfrags(b.len)) <= addr.offset(nfrags) =>
                {
                    ids.extend(b.deps.ids())
                }
                _ => return false,
            }
        }
        ids.retain(|&i| !self.order().ledger.durable(i));
        ids.sort_unstable();
        ids.dedup();
        if !ids.is_empty() && self.needs_any(by, &ids, 4096) != Some(false) {
            return false;
        }
        for a in victims {
            self.forget_unwritten(a);
        }
        self.order_mut().ledger.ride_on(&ids, by);
        self.order_mut().ledger.stats.abandoned += ids.len() as u64;
        true
    }

    /// Whether change `id` waits, directly or not, for one of `targets`:
    /// through its needs, those of the earlier held changes of its region
    /// (it goes to disk only with them), and the changes that carry riders
    /// (a rider is durable only with its carrier: waiting for a rider is
    /// waiting for the carrier and what it waits for). None if that takes
    /// more than `cap` undurable changes to tell.
    ///
    /// A change needs only changes made before it (smaller ids: needs are
    /// named when a change is made, and a region's earlier held changes
    /// are older), so the search never follows a change older than the
    /// oldest target: nothing behind it can lead to one. Riders break that
    /// order (an older change carried by a newer one), so while there are
    /// any the search follows older changes too, within `cap`.
    /// `targets` is sorted.
    fn needs_any(&self, id: ChangeId, targets: &[ChangeId], cap: usize) -> Option<bool> {
        let Some(&oldest) = targets.first() else {
            return Some(false);
        };
        let mut seen = HashSet::default();
        let mut todo = vec![id];
        let riders = self.order().ledger.has_riders();
        while let Some(id) = todo.pop() {
            // A rider (a dead directory's change dropped unwritten) is
            // durable only with the change it stands on: follow that.
            if let Some(by) = self.order().ledger.carrier(id) {
                if !self.order().ledger.durable(by) && seen.insert(by) {
                    todo.push(by);
                }
            }
            let Some(a) = self.order().ledger.owner(id) else {
                continue;
            };
            let Some(b) = self.buf_ref(a) else {
                continue;
            };
            for (_, stack) in b.deps.held.values() {
                let Some(pos) = stack.iter().position(|h| h.id == id) else {
                    continue;
                };
                for h in &stack[..=pos] {
                    for &n in &h.needs {
                        // Older changes lead to no target, unless a rider
                        // (older, carried by a newer change) is on the way.
                        if (n < oldest && !riders)
                            || self.order().ledger.durable(n)
                            || !seen.insert(n)
                        {
                            continue;
                        }
                        if targets.binary_search(&n).is_ok() {
                            return Some(true);
                        }
                        if seen.len() > cap {
                            return None;
                        }
                        todo.push(n);
                    }
                }
            }
        }
        Some(false)
    }

    /// After a successful flush begun with
    /// [`unlocked_flush_begin`](Self::unlocked_flush_begin): makes up to
    /// `max` more of its changes durable; whether all are (hundreds of
    /// thousands after a big directory's worth of creates, so a part per
    /// hold of the lock).
    pub fn unlocked_flush_settle(
        &mut self,
        f: &mut crate::order::FlushWithoutLock,
        max: usize,
    ) -> bool {
        self.order_mut().ledger.settle_flushed(f, max)
    }

    /// Whether writing a buffer with `deps` now would write every change
    /// it holds.
    fn writes_whole(&self, deps: &BufDeps) -> bool {
        deps.held
            .values()
            .all(|(_, s)| s.iter().all(|h| self.order().ledger.all_durable(&h.needs)))
    }

    /// Whether writing a buffer with `deps` now would write a change made up to `upto`
    /// (one the sync under way waits for): its unheld changes, or a held
    /// change whose needs are all durable. A buffer with such a change and
    /// others that must wait is not [`writes_whole`](Self::writes_whole);
    /// left out of the plan, its old change would wait for the new ones
    /// beside it, and the sync would go round until they cleared.
    fn has_ready_upto(&self, deps: &BufDeps, upto: ChangeId) -> bool {
        if deps.epoch != ChangeId::NONE && deps.epoch <= upto {
            return true;
        }
        let ready = |h: &Held| h.id <= upto && self.order().ledger.all_durable(&h.needs);
        deps.held.values().any(|(_, s)| {
            if by_entries(s) {
                // Named entries go one by one (`entry_image`).
                s.iter().take_while(|h| h.id <= upto).any(ready)
            } else {
                // A region goes up to its first change that must wait.
                s.first().is_some_and(ready)
            }
        })
    }

    /// The undurable needs of the oldest held change of each region of the
    /// buffer at `addr`.
    fn blocking_needs(&self, addr: Frag) -> Vec<ChangeId> {
        let Some(b) = self.buf_ref(addr) else {
            return Vec::new();
        };
        b.deps
            .held
            .values()
            .filter_map(|(_, s)| s.first())
            .flat_map(|h| h.needs.iter().copied())
            .filter(|&n| !self.order().ledger.durable(n))
            .collect()
    }

    /// Makes the changes `ids` durable now: writes their buffers and every
    /// buffer they wait for, flushes (with [`Barrier::Flush`]; with
    /// [`Barrier::Write`] a completed write is what counts), and repeats
    /// until done.
    ///
    /// [`Barrier::Flush`]: crate::order::Barrier::Flush
    /// [`Barrier::Write`]: crate::order::Barrier::Write
    pub fn force_ids(&mut self, ids: &[ChangeId]) -> Result<()> {
        let flush_each_round = self.order().ledger.barrier() == crate::order::Barrier::Flush;
        for _round in 0..100_000 {
            let pending: Vec<ChangeId> = ids
                .iter()
                .copied()
                .filter(|&i| !self.order().ledger.durable(i))
                .collect();
            if pending.is_empty() {
                return Ok(());
            }
            let before = self.order().ledger.pending();
            let mut set = std::collections::BTreeSet::new();
            let mut todo: Vec<ChangeId> = pending;
            while let Some(id) = todo.pop() {
                let Some(a) = self.order().ledger.owner(id) else {
                    continue;
                };
                if set.insert(a) {
                    todo.extend(self.blocking_needs(a));
                }
            }
            let mut wrote = false;
            for a in set {
                if self.write_buf(a)? {
                    self.order_mut().ledger.stats.forced_writes += 1;
                    wrote = true;
                }
            }
            if flush_each_round {
                self.flush()?;
            }
            if !wrote && self.order().ledger.pending() == before {
                return Err(crate::error::Error::new(
                    crate::error::ErrorKind::Io,
                    "write ordering: changes wait for each other (internal error)",
                ));
            }
        }
        Err(crate::error::Error::new(
            crate::error::ErrorKind::Io,
            "write ordering: forcing did not finish (internal error)",
        ))
    }

    /// Writes the buffer at `addr` completely, forcing out what it waits for.
    pub(crate) fn force_buf(&mut self, addr: Frag) -> Result<()> {
        for _ in 0..100_000 {
            self.write_buf(addr)?;
            if !self.buf_ref(addr).is_some_and(|b| b.dirty) {
                return Ok(());
            }
            let needs = self.blocking_needs(addr);
            self.force_ids(&needs)?;
        }
        Err(crate::error::Error::new(
            crate::error::ErrorKind::Io,
            "write ordering: a buffer could not be written (internal error)",
        ))
    }

    /// The buffers holding an undurable change that a held change of
    /// another buffer waits for and that would be written now (its own
    /// needs durable, or not held at all), in address order.
    fn unblocking_buffers(&self) -> Vec<Frag> {
        let mut out = std::collections::BTreeSet::new();
        for (a, b) in self.bufs_from(Frag::new(0)) {
            if b.dirty {
                self.add_unblocking(a, &mut out);
            }
        }
        out.into_iter().collect()
    }

    /// Adds to `out` the buffers holding a change that the dirty buffer
    /// at `a` waits for and that would be written now.
    fn add_unblocking(&self, a: Frag, out: &mut std::collections::BTreeSet<Frag>) {
        for n in self.blocking_needs(a) {
            let Some(o) = self.order().ledger.owner(n) else {
                continue;
            };
            if o == a || out.contains(&o) {
                continue;
            }
            let Some(ob) = self.buf_ref(o) else {
                continue;
            };
            let held = ob
                .deps
                .held
                .values()
                .flat_map(|(_, st)| st.iter())
                .find(|h| h.id == n);
            let goes = match held {
                Some(h) => self.order().ledger.all_durable(&h.needs),
                None => ob.dirty,
            };
            if goes {
                out.insert(o);
            }
        }
    }

    /// What holds a sync up: up to `max` held changes, each with the
    /// buffer holding it and what it waits for (the change, whether it is
    /// durable, the buffer holding it and whether that one is dirty).
    fn describe_stall(&self, max: usize) -> String {
        let mut out = Vec::new();
        for (a, b) in self.bufs_from(Frag::new(0)) {
            for (&off, (len, stack)) in &b.deps.held {
                for h in stack {
                    if out.len() >= max {
                        break;
                    }
                    let needs: Vec<String> = h
                        .needs
                        .iter()
                        .filter(|&&n| !self.order().ledger.durable(n))
                        .map(|&n| match self.order().ledger.owner(n) {
                            Some(o) => format!(
                                "{n} in {o} ({})",
                                match self.buf_ref(o) {
                                    Some(ob) if ob.dirty => format!("{:?}, dirty", ob.kind),
                                    Some(ob) => format!("{:?}, clean", ob.kind),
                                    None => "not cached".to_string(),
                                }
                            ),
                            None => format!("{n} (no owner)"),
                        })
                        .collect();
                    out.push(format!(
                        "change {} in {a} ({:?}{}) at {off}+{len} waits for [{}]",
                        h.id,
                        b.kind,
                        if b.dirty { ", dirty" } else { "" },
                        needs.join(", ")
                    ));
                }
            }
        }
        format!(
            "{} pending; {}",
            self.order().ledger.pending(),
            if out.is_empty() {
                "no held change".to_string()
            } else {
                out.join("; ")
            }
        )
    }

    /// Makes everything durable: rounds of writing every dirty buffer and
    /// flushing, until no change waits (one round without ordering).
    /// Each round writes only the buffers that can go out whole (nothing
    /// they hold waits for an undurable change), so a buffer is normally
    /// written once per sync; only when every dirty buffer waits is one
    /// round written rolled back.
    pub fn sync(&mut self) -> Result<()> {
        while !self.sync_round()? {}
        Ok(())
    }

    /// Whether each sync round ends with a device flush (the barrier is a
    /// flush); otherwise a completed write is durable and one flush at the
    /// end of a sync is enough.
    pub fn flushes_each_round(&self) -> bool {
        self.order().ledger.barrier() == crate::order::Barrier::Flush
    }

    /// The buffers a sync round writes, in address order: those whose
    /// every change can go now. If there is none: the cylinder groups
    /// (their held part is a few bytes, and their maps are what most
    /// changes wait for); with none dirty, only the buffers holding a
    /// change that another one waits for and that can go now (a chain of
    /// renames advances one link a round without rewriting every block of
    /// the directory each time). Empty only if everything waits for
    /// something not dirty here; the round then writes everything, rolled
    /// back.
    pub fn round_plan(&self) -> Vec<Frag> {
        let whole: Vec<Frag> = self
            .bufs_from(Frag::new(0))
            .filter(|(_, b)| b.dirty && self.writes_whole(b.deps))
            .map(|(a, _)| a)
            .collect();
        if !whole.is_empty() {
            return whole;
        }
        let cgs: Vec<Frag> = self
            .bufs_from(Frag::new(0))
            .filter(|(_, b)| b.dirty && b.kind == BlockKind::Cg)
            .map(|(a, _)| a)
            .collect();
        if !cgs.is_empty() {
            return cgs;
        }
        self.unblocking_buffers()
    }

    /// Part of the plan of a sync round that requests interleave with,
    /// from the buffers at fragment `from` on, at most `max` of them
    /// looked at (a part per hold of the lock: a million-entry directory's
    /// cache holds a hundred thousand buffers): the dirty ones that can be
    /// written whole, those holding a change made up to `upto` (the last
    /// change when the sync began) that can go now, and, always, the
    /// buffers holding a change one of them waits for that can go now.
    /// Without the last two, buffers that new
    /// requests keep making writable whole would fill every round, and a
    /// chain of old changes would never advance. Returns the part and
    /// where the next one starts (`None`: this was the last).
    pub fn background_plan_part(
        &self,
        from: Frag,
        max: usize,
        upto: ChangeId,
    ) -> (Vec<Frag>, Option<Frag>) {
        let mut out = std::collections::BTreeSet::new();
        for (i, (a, b)) in self.bufs_from(from).enumerate() {
            if i == max {
                return (out.into_iter().collect(), Some(a));
            }
            if b.dirty {
                if self.writes_whole(b.deps) || self.has_ready_upto(b.deps, upto) {
                    out.insert(a);
                }
                self.add_unblocking(a, &mut out);
            }
        }
        (out.into_iter().collect(), None)
    }

    /// One round of [`sync`](Self::sync): returns whether nothing is dirty
    /// any more (and the device flushed); an error if the round made no
    /// progress.
    pub fn sync_round(&mut self) -> Result<bool> {
        // With completion as the barrier, a round's writes are durable as
        // they complete: one flush at the end makes it all survive a power
        // cut too (what sync and fsync promise in every mode).
        let flush_each_round = self.flushes_each_round();
        {
            let before = self.order().ledger.pending();
            let whole = self.round_plan();
            let mut wrote = false;
            for a in whole {
                wrote |= self.write_buf(a)?;
            }
            if !wrote {
                self.write_all()?;
            }
            if flush_each_round || self.dirty_count() == 0 {
                self.flush()?;
            }
            if self.dirty_count() == 0 {
                return Ok(true);
            }
            if self.order().ledger.pending() == before {
                return Err(crate::error::Error::new(
                    crate::error::ErrorKind::Io,
                    format!(
                        "write ordering: sync made no progress (internal error): {}",
                        self.describe_stall(40)
                    ),
                ));
            }
        }
        Ok(false)
    }

    /// Chooses the write-ordering mode; only before the first change.
    pub fn set_mode(&mut self, mode: WriteMode) {
        let o = self.order_mut();
        o.mode = mode;
        o.ledger.stats.mode = mode.name().to_string();
    }

    pub fn mode(&self) -> WriteMode {
        self.order().mode
    }

    /// Chooses what ordered writes wait for; only before the first change.
    pub fn set_barrier(&mut self, b: crate::order::Barrier) {
        self.order_mut().ledger.set_barrier(b);
    }

    pub fn barrier(&self) -> crate::order::Barrier {
        self.order().ledger.barrier()
    }

    /// Writes and flushes that made changes durable so far: releases that
    /// wait for durability are looked at again when this moved.
    pub fn settled_changes(&self) -> u64 {
        self.order().ledger.settled()
    }

    pub fn order_stats(&self) -> OrderStats {
        self.order().stats()
    }

    /// Counts a finished background sync of `rounds` rounds.
    pub fn note_background_sync(&mut self, rounds: u64) {
        let st = &mut self.order_mut().ledger.stats;
        st.background_syncs += 1;
        st.background_rounds += rounds;
        st.longest_background_sync = st.longest_background_sync.max(rounds);
    }
}

#[cfg(test)]
mod tests;
