//! Write ordering: the four mount modes (normal, sync, async, soft updates)
//! and the bookkeeping that keeps the disk recoverable whatever order
//! delayed blocks reach it in.
//!
//! The model (McKusick and Ganger's soft updates, at the granularity of
//! fixed regions of a buffer: an inode (256 bytes in UFS2, 128 in UFS1), a
//! 512-byte directory chunk, an indirect pointer (8 or 4 bytes)):
//! - every change to a buffer gets a [`ChangeId`]; a change is *durable*
//!   once a write holding it has been followed by a device flush (a drive
//!   may reorder writes between flushes, so completion alone proves
//!   nothing), or, with [`Barrier::Write`], once that write has completed
//!   (FreeBSD's `bwrite`: the order holds for a killed process and on a
//!   disk without a volatile write cache, not across a power cut);
//! - a change may *need* earlier changes (elsewhere) to be durable first: a
//!   directory entry needs the inode it names to be initialised and marked
//!   in its bitmap, a block pointer needs the block's contents and bitmap
//!   bit, a lowered link count needs the removed name to be gone;
//! - while a change's needs are not durable, writing its buffer writes the
//!   region as it was before that change (undo before the write, the memory
//!   copy is never touched, so redo after is free); every later change of
//!   the same region waits with it, so a rolled-back region always holds a
//!   state the region really had;
//! - resources (blocks, inodes) are returned to the bitmaps only after the
//!   pointers to them are durably gone ([`Deferred`]).
//!
//! Where it lives: this file holds the modes, the change ids and the
//! ledger of undurable changes; `buffers.rs` what the buffer cache calls at
//! each event of a buffer's life (the image a write sends, its completion,
//! a buffer dropped, moved or cut); `sync.rs` what a change waits for,
//! forcing, and the plan of each sync round, on the cache's interface. The
//! releases that wait for durability are recorded in [`OrderState`] and
//! made by the file system (`fs.rs`), which owns the maps they free into.
//!
//! Invariants: a change's needs all have smaller ids than the change (needs
//! point at the past), so the oldest undurable change can always be written
//! and forcing terminates; a region's held changes are kept in the order
//! they were made; ids of changes that can never be written (their block
//! was freed) are dropped ("moot") only when nothing on disk can reach the
//! block any more.
use crate::{Frag, Ino};
use foldhash::HashMap;
use serde::Serialize;

pub(crate) mod buffers;
pub mod cleanup;
mod sync;

/// How metadata writes are ordered (`-o normal|sync|async|softdep`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WriteMode {
    /// Traditional FFS: a change that needs another one forces that one to
    /// the disk first (a synchronous write and a flush), and an operation's
    /// directory changes are on disk when it returns (FFS writes directory
    /// blocks with `bwrite`); bitmaps and data are delayed.
    Normal,
    /// Like normal, and every operation ends with all its blocks durable.
    Sync,
    /// Everything delayed, no ordering: fast and unsafe after a crash.
    Async,
    /// Soft updates: everything delayed, dependencies tracked, unsafe
    /// changes rolled back in the blocks written.
    Softdep,
}

impl WriteMode {
    pub const ALL: [WriteMode; 4] = [
        WriteMode::Normal,
        WriteMode::Sync,
        WriteMode::Async,
        WriteMode::Softdep,
    ];

    pub fn parse(s: &str) -> Option<WriteMode> {
        Some(match s {
            "normal" => WriteMode::Normal,
            "sync" => WriteMode::Sync,
            "async" => WriteMode::Async,
            "softdep" => WriteMode::Softdep,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            WriteMode::Normal => "normal",
            WriteMode::Sync => "sync",
            WriteMode::Async => "async",
            WriteMode::Softdep => "softdep",
        }
    }

    /// Whether changes and their needs are recorded at all.
    pub fn tracks(self) -> bool {
        self != WriteMode::Async
    }

    /// Whether a change may wait in memory for its needs (soft updates);
    /// otherwise the needs are forced to disk when the change is made.
    pub fn delays(self) -> bool {
        self == WriteMode::Softdep
    }

    /// Whether the maps and file data are ordered before what points at
    /// them (a map bit before the inode or pointer that uses it, a data
    /// block before its pointer): soft updates do; FFS's synchronous modes
    /// order only the metadata that names metadata (inode before the name,
    /// a new indirect or directory block before its pointer, a removed
    /// name before the lowered link count, a cleared pointer before the
    /// freed map bit) and leave maps that say free to fsck, whose preen
    /// rebuilds them (fsck_ffs pass 5).
    pub fn orders_maps(self) -> bool {
        self == WriteMode::Softdep
    }
}

/// What a change another one waits for must reach before that one may go
/// to disk (`-o barrier=flush|write`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Barrier {
    /// Its write and then a device cache flush: the order holds across a
    /// power cut on a drive that reorders its cache (Linux's ext4
    /// `barrier=1`).
    Flush,
    /// Its write's completion, as FreeBSD's FFS waits in `bwrite` and soft
    /// updates in their completion handlers, neither of which asks the
    /// drive to flush: the order holds when the daemon is killed (the
    /// host's page cache keeps every completed write) and on disks
    /// without a volatile write cache; after a power cut with one, fsck
    /// may have to ask (`fsck -y`) where preen would have done.
    Write,
}

impl Barrier {
    pub fn parse(s: &str) -> Option<Barrier> {
        match s {
            "flush" => Some(Barrier::Flush),
            "write" => Some(Barrier::Write),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Barrier::Flush => "flush",
            Barrier::Write => "write",
        }
    }

    /// The barrier a mode uses unless told: soft updates flush (their
    /// flushes come once per sync round, a few per second, so the
    /// power-cut order costs next to nothing); normal and sync modes
    /// wait for completion as FFS does (their ordered writes come with
    /// nearly every operation, and a flush each, 0.2-0.4 ms on the
    /// machines measured, made `tar -x` three times slower).
    pub fn default_for(mode: WriteMode) -> Barrier {
        match mode {
            WriteMode::Softdep => Barrier::Flush,
            _ => Barrier::Write,
        }
    }
}

/// Names one change to one buffer. Ids are handed out in increasing
/// order, so comparing two says which change was made first.
/// [`ChangeId::NONE`] (0) means "nothing to wait for": it is older than
/// every change and always durable.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct ChangeId(u64);

impl ChangeId {
    /// No change: nothing to wait for.
    pub const NONE: ChangeId = ChangeId(0);

    /// Whether this names no change.
    pub fn is_none(self) -> bool {
        self.0 == 0
    }

    /// Whether this names a change.
    pub fn is_some(self) -> bool {
        self.0 != 0
    }

    /// The id as a number (reports and tests).
    pub fn get(self) -> u64 {
        self.0
    }

    /// The id handed out after this one.
    fn next(self) -> ChangeId {
        ChangeId(self.0 + 1)
    }

    /// How many ids from `base` to this one.
    fn since(self, base: ChangeId) -> u64 {
        self.0 - base.0
    }
}

shown_as_number!(ChangeId);

/// What a directory change did to one name: its (inode, type) before and
/// after. Lets a held directory chunk be written entry by entry (each name
/// as it was before its oldest waiting change, every other entry as it is)
/// instead of rolling the whole chunk back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryOp {
    pub name: Vec<u8>,
    pub before: Option<(u32, u8)>,
    pub after: Option<(u32, u8)>,
}

/// A change held back in a region of a buffer.
#[derive(Debug)]
pub(crate) struct Held {
    pub id: ChangeId,
    /// Changes that must be durable before this one may be written.
    pub needs: Vec<ChangeId>,
    /// The region as it was before this change; kept only when the change
    /// had needs that were not durable when it was made (otherwise it is
    /// never the first held change of its region).
    pub before: Option<Box<[u8]>>,
    /// For a directory chunk: the names it changed (a rename in place
    /// changes two at once); empty for other regions.
    pub entries: Vec<EntryOp>,
}

/// The ordering state of one cached buffer.
#[derive(Debug, Default)]
pub(crate) struct BufDeps {
    /// Stands for every change since the last write that may go to disk
    /// with the next write (none held back).
    pub epoch: ChangeId,
    /// Largest id of the last write (durable at once with
    /// `barrier=write`, at the next flush with `barrier=flush`).
    pub written: ChangeId,
    /// Regions with changes held back, by offset: length and the changes.
    pub held: std::collections::BTreeMap<u32, (u32, Vec<Held>)>,
}

impl BufDeps {
    /// The ids of changes this buffer holds that were never written (what
    /// is moot when the buffer is dropped unwritten). Written but unflushed
    /// changes are not among them: they become durable at the next flush,
    /// not before.
    pub fn ids(&self) -> Vec<ChangeId> {
        let mut v: Vec<ChangeId> = self
            .held
            .values()
            .flat_map(|(_, s)| s.iter().map(|h| h.id))
            .collect();
        if self.epoch != ChangeId::NONE {
            v.push(self.epoch);
        }
        v
    }
}

/// Counters of the ordering machinery (`ufskit stats`).
#[derive(Debug, Default, Clone, Serialize)]
pub struct OrderStats {
    pub mode: String,
    /// What ordered writes wait for: "flush" or "write" (completion).
    pub barrier: String,
    /// Changes recorded.
    pub changes: u64,
    /// Changes recorded that had to wait for others.
    pub held: u64,
    /// Buffer writes with at least one region rolled back.
    pub rollbacks: u64,
    /// Directory chunks written entry by entry (names whose changes wait
    /// kept as they were, the rest as they are).
    pub entry_rollbacks: u64,
    /// Changes settled without a write: those held in the blocks of a
    /// removed directory, dropped once its zeroed inode cuts them off.
    pub abandoned: u64,
    /// Writes forced out of order to satisfy a need (normal mode's
    /// synchronous writes, soft updates' evictions).
    pub forced_writes: u64,
    /// Operations that ended with the state past its bound and hurried the
    /// background syncer, those of them that then waited for a syncer
    /// round (past twice the bound), and operations that wrote everything
    /// themselves (past four times, or no syncer: `order::cleanup`).
    pub syncer_hurried: u64,
    pub writer_waits: u64,
    pub writer_syncs: u64,
    pub flushes: u64,
    /// Block runs and inodes whose release waited for their pointers.
    pub deferred_frees: u64,
    /// Changes still waiting now.
    pub pending_now: u64,
    /// Background syncs (the mount's syncer) finished, the rounds they
    /// took in all, and the most one took (a sync takes as many rounds as
    /// its longest chain of changes).
    pub background_syncs: u64,
    pub background_rounds: u64,
    pub longest_background_sync: u64,
}

/// A device flush made without the engine lock: the changes written
/// before it began ([`Ledger::unflushed_snapshot`]), settled a part at a
/// time once the device confirmed it ([`Ledger::settle_flushed`]). They
/// stay on the unflushed list meanwhile, so a flush in between (an fsync)
/// makes them durable too.
#[derive(Debug)]
pub struct FlushWithoutLock {
    gen: u64,
    ids: Vec<ChangeId>,
    done: usize,
}

/// Marks a change of [`Ledger::slots`] durable (no buffer has this
/// address: fragment numbers stay far below it).
const SETTLED: Frag = Frag::new(u64::MAX);

/// The set of undurable changes and where they live.
///
/// Ids are handed out in order, and every change older than the oldest
/// undurable one is durable, so the ledger keeps one slot per id from the
/// oldest undurable change (`base`) to the newest: the address of the
/// buffer holding it, or [`SETTLED`]. Whether a change is durable, and
/// where it lives, is then an index, not a search (a sync asks it for
/// every held change of every dirty buffer, each round). Durable changes
/// in between keep their 8-byte slot until the oldest one before them is
/// durable; a sync makes every change up to its start durable, so the
/// window spans about two syncs' worth of changes.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    next: ChangeId,
    /// The id of `slots[0]`: every id below it is durable.
    base: ChangeId,
    slots: std::collections::VecDeque<Frag>,
    /// Undurable changes.
    undurable: u64,
    unflushed: Vec<ChangeId>,
    /// Changes that become durable with another one (the key): those of a
    /// dead directory's blocks, dropped unwritten, stand on the change that
    /// cut the directory off.
    riders: HashMap<ChangeId, Vec<ChangeId>>,
    /// The other way: the change each rider stands on (what makes it
    /// durable), so that a search of what a change waits for can follow a
    /// rider to the change that carries it.
    carried_by: HashMap<ChangeId, ChangeId>,
    /// [`Barrier::Write`]: a change is durable once its write completed.
    settle_on_write: bool,
    /// Bumped whenever `unflushed` loses its head (a flush took it all,
    /// or a flush made without the engine lock dropped the part it
    /// settled): a snapshot of the head is still the head only if this
    /// did not move.
    unflushed_gen: u64,
    /// Changes settled so far (durable or moot): what waits for
    /// durability looks again when this moved.
    settled: u64,
    pub stats: OrderStats,
}

impl Ledger {
    pub fn new_id(&mut self, addr: Frag) -> ChangeId {
        debug_assert_ne!(addr, SETTLED);
        self.next = self.next.next();
        let id = self.next;
        if self.slots.is_empty() {
            self.base = id;
        }
        self.slots.push_back(addr);
        self.undurable += 1;
        self.stats.changes += 1;
        id
    }
    /// The slot of `id` while it may be undurable.
    fn slot(&self, id: ChangeId) -> Option<usize> {
        if id < self.base {
            return None;
        }
        let i = usize::try_from(id.since(self.base)).ok()?;
        (i < self.slots.len()).then_some(i)
    }
    pub fn durable(&self, id: ChangeId) -> bool {
        self.slot(id).is_none_or(|i| self.slots[i] == SETTLED)
    }
    /// Whether every change of `ids` is durable (what a held change waits
    /// for all met).
    pub fn all_durable(&self, ids: &[ChangeId]) -> bool {
        ids.iter().all(|&n| self.durable(n))
    }
    /// A write holding `id` completed: durable now with
    /// [`Barrier::Write`], at the next flush with [`Barrier::Flush`].
    pub fn written(&mut self, id: ChangeId) {
        if id == ChangeId::NONE {
            return;
        }
        if self.settle_on_write {
            self.settled += 1;
            self.settle(id);
        } else {
            self.unflushed.push(id);
        }
    }
    pub fn set_barrier(&mut self, b: Barrier) {
        self.settle_on_write = b == Barrier::Write;
        self.stats.barrier = b.name().to_string();
    }
    pub fn barrier(&self) -> Barrier {
        if self.settle_on_write {
            Barrier::Write
        } else {
            Barrier::Flush
        }
    }
    /// Writes and flushes that made changes durable so far.
    pub fn settled(&self) -> u64 {
        self.settled
    }
    /// The device confirmed a flush: every written change is durable.
    pub fn flushed(&mut self) {
        self.stats.flushes += 1;
        self.settled += 1;
        self.unflushed_gen += 1;
        for id in std::mem::take(&mut self.unflushed) {
            self.settle(id);
        }
    }
    /// The changes written and waiting for a flush, as a flush that starts
    /// now will make durable (see [`FlushWithoutLock`]).
    pub fn unflushed_snapshot(&self) -> FlushWithoutLock {
        FlushWithoutLock {
            gen: self.unflushed_gen,
            ids: self.unflushed.clone(),
            done: 0,
        }
    }
    /// Settles up to `max` more of the changes of a confirmed flush;
    /// returns whether all are. Settling a change twice (a flush in
    /// between took it too) changes nothing.
    pub fn settle_flushed(&mut self, f: &mut FlushWithoutLock, max: usize) -> bool {
        let end = (f.done + max).min(f.ids.len());
        for i in f.done..end {
            self.settle(f.ids[i]);
        }
        f.done = end;
        self.settled += 1;
        if f.done < f.ids.len() {
            return false;
        }
        self.stats.flushes += 1;
        if f.gen == self.unflushed_gen {
            // Nothing took the list since the snapshot: its head is still
            // the snapshot.
            self.unflushed.drain(..f.ids.len());
            self.unflushed_gen += 1;
        }
        true
    }
    /// Changes written and waiting for a flush.
    #[cfg(test)]
    fn unflushed(&self) -> &[ChangeId] {
        &self.unflushed
    }
    /// Changes that will never be written (their block is gone).
    pub fn moot(&mut self, ids: &[ChangeId]) {
        for &id in ids {
            self.settle(id);
        }
    }
    /// `id` is durable (or moot), and so is every change riding on it.
    fn settle(&mut self, id: ChangeId) {
        let mut todo = vec![id];
        while let Some(id) = todo.pop() {
            if let Some(i) = self.slot(id) {
                if self.slots[i] != SETTLED {
                    self.slots[i] = SETTLED;
                    self.undurable -= 1;
                }
            }
            if !self.carried_by.is_empty() {
                self.carried_by.remove(&id);
            }
            if !self.riders.is_empty() {
                if let Some(r) = self.riders.remove(&id) {
                    todo.extend(r);
                }
            }
        }
        while self.slots.front() == Some(&SETTLED) {
            self.slots.pop_front();
            self.base = self.base.next();
        }
    }
    /// The undurable changes `ids`, whose buffer is dropped unwritten,
    /// become durable when `by` does (forcing them forces `by`). The caller
    /// makes sure `by` does not itself wait for any of them.
    pub fn ride_on(&mut self, ids: &[ChangeId], by: ChangeId) {
        let by_owner = self.owner(by);
        for &id in ids {
            if self.durable(id) {
                continue;
            }
            match by_owner {
                Some(o) => {
                    if let Some(i) = self.slot(id) {
                        self.slots[i] = o;
                    }
                    self.riders.entry(by).or_default().push(id);
                    self.carried_by.insert(id, by);
                }
                None => self.settle(id),
            }
        }
    }
    /// Whether any undurable change rides on another.
    pub fn has_riders(&self) -> bool {
        !self.carried_by.is_empty()
    }
    /// The change an undurable rider becomes durable with, if `id` is one
    /// ([`Ledger::ride_on`]).
    pub fn carrier(&self, id: ChangeId) -> Option<ChangeId> {
        if self.carried_by.is_empty() {
            return None;
        }
        self.carried_by.get(&id).copied()
    }
    pub fn owner(&self, id: ChangeId) -> Option<Frag> {
        self.slot(id)
            .map(|i| self.slots[i])
            .filter(|&o| o != SETTLED)
    }
    pub fn moved(&mut self, ids: &[ChangeId], to: Frag) {
        for &id in ids {
            if let Some(i) = self.slot(id) {
                if self.slots[i] != SETTLED {
                    self.slots[i] = to;
                }
            }
        }
    }
    pub fn pending(&self) -> u64 {
        self.undurable
    }
    /// Ids from the oldest undurable change to the newest (the slots
    /// held, durable ones between included).
    pub fn span(&self) -> u64 {
        self.slots.len() as u64
    }
    /// The newest change id handed out (0 before the first).
    pub fn last_id(&self) -> ChangeId {
        self.next
    }
    /// The oldest change not yet durable.
    pub fn oldest_undurable(&self) -> Option<ChangeId> {
        (!self.slots.is_empty()).then_some(self.base)
    }
}

/// A release that waits until the pointers to the resource are durably
/// gone.
#[derive(Debug, Clone)]
pub enum Freed {
    /// `size` bytes of blocks at fragment `bno`.
    Blocks { bno: Frag, size: u64 },
    /// `size` bytes at fragment `bno` whose contents moved elsewhere (a
    /// fragment run reallocated to a bigger place). Released, like any
    /// block, once the pointer to the new place is durable, but normal and
    /// sync modes do not force that pointer out for it: FFS frees the old
    /// run at once in `ffs_realloccg`; here it waits until the pointer is
    /// durable (its write with `barrier=write`, the flush after it with
    /// `barrier=flush`), so a crash never leaves two files pointing at it.
    Moved { bno: Frag, size: u64 },
    /// An inode (its bitmap bit).
    Inode { ino: Ino, was_dir: bool },
}

#[derive(Debug, Clone)]
pub struct Deferred {
    pub needs: Vec<ChangeId>,
    pub what: Freed,
}

/// What makes a change seen on disk: the change itself and the undurable
/// pointers on the way to its block (a block just allocated or moved is
/// reached only once they are durable). What comes after a change waits
/// for all of it. Zeros (untracked changes) may appear and mean nothing.
pub type Seen = Vec<ChangeId>;

/// What the next write of one inode must carry, FreeBSD's `inodedep`: the
/// in-memory inode already holds the pointers, sizes and counts these
/// describe, so whichever operation writes the inode next writes them,
/// and its change waits for `needs` and `cleared`. It is state of the
/// inode, not of an operation: it lives until that write, and no
/// operation hands anything to another through it.
#[derive(Debug, Default)]
pub struct InodeDeps {
    /// Changes the inode's next write waits for: a new block before its
    /// pointer, an initialised inode block and bitmap bit before the
    /// inode, a removed name before a lowered link count, an empty chunk
    /// before a directory size that covers it.
    pub needs: Vec<ChangeId>,
    /// Indirect-block changes that cleared pointers of a truncation: they
    /// go to disk before the smaller size.
    pub cleared: Vec<ChangeId>,
    /// Blocks released by a truncation whose pointer-clearing inode write
    /// is not made yet: they wait for it (and for `cleared`).
    pub frees: Vec<Freed>,
}

/// What the file-system core keeps between operations for the write
/// ordering: per-inode dependencies, names gone but maybe not durably, the
/// releases still waiting, and what reaches blocks not yet durably
/// pointed at. Nothing here is handed from one change to the next of an
/// operation: those pass as arguments and results (`needs`, [`Seen`]).
#[derive(Debug, Default)]
pub struct OrderState {
    /// Per inode: what its next write carries.
    pub inode_deps: HashMap<Ino, InodeDeps>,
    /// Per directory and name: what makes the name's removal seen on
    /// disk, while it may not be durable. A new entry of that name
    /// elsewhere in the directory waits for it, so the disk never holds one
    /// name twice.
    pub gone_names: HashMap<(Ino, Vec<u8>), Vec<ChangeId>>,
    /// Size of `gone_names` at which its durable members are dropped.
    pub gone_names_prune_at: usize,
    /// Releases waiting for their needs.
    pub deferred: Vec<Deferred>,
    /// The ledger's count of durability events (flushes, or completed
    /// writes with `barrier=write`) when `deferred` was last looked at: it
    /// is looked at again only after another (nothing can have become
    /// durable without one).
    pub deferred_seen_settled: u64,
    /// Per block address: the change that stored the pointer to the block
    /// at that address (in an inode or an indirect block), while it may
    /// not be durable. Until it is, the disk does not reach what is
    /// written there: a directory block moved to a bigger fragment run is
    /// still read at its old place, names removed since included.
    pub reach: HashMap<Frag, ChangeId>,
    /// Size of `reach` at which its durable members are dropped.
    pub reach_prune_at: usize,
}

impl OrderState {
    /// The dependencies the next write of inode `ino` carries.
    pub fn inode_deps(&mut self, ino: Ino) -> &mut InodeDeps {
        self.inode_deps.entry(ino).or_default()
    }
}

/// The directory chunk `current` as it may be written while the changes
/// in `stack` (all of them name changes) wait: each name as it was before
/// its oldest change that still needs something undurable, every other
/// entry as it is now. Returns the image and the changes it writes; None
/// when the chunk is not valid or the image does not fit in 512 bytes
/// (then the whole chunk is rolled back instead). A change that needs an
/// earlier change of the same chunk may go with it in the same write.
pub(crate) fn entry_image(
    en: ufs_format::Endian,
    current: &[u8],
    stack: &[Held],
    ledger: &Ledger,
) -> Option<(Vec<u8>, Vec<ChangeId>)> {
    let mut done: Vec<ChangeId> = Vec::new();
    // A name whose change waits, and its (inode, type) as the image has it.
    type HeldName<'a> = (&'a [u8], Option<(u32, u8)>);
    let mut held_names: Vec<HeldName> = Vec::new();
    for h in stack {
        if h.entries.is_empty() {
            return None;
        }
        let is_held = |n: &[u8], held: &[HeldName]| held.iter().any(|(m, _)| *m == n);
        let blocked = h.entries.iter().any(|e| is_held(&e.name, &held_names));
        let ready = h
            .needs
            .iter()
            .all(|&n| ledger.durable(n) || done.contains(&n));
        if !blocked && ready {
            done.push(h.id);
        } else {
            // Every name it changes stays as it was before its oldest
            // waiting change (this one, for names not yet held).
            for e in &h.entries {
                if !is_held(&e.name, &held_names) {
                    held_names.push((&e.name, e.before));
                }
            }
        }
    }
    if held_names.is_empty() {
        return Some((current.to_vec(), done));
    }
    let mut entries: Vec<(u32, u8, &[u8])> = Vec::new();
    let mut seen = vec![false; held_names.len()];
    for e in ufs_format::dir::iter_chunk(en, current) {
        let e = e.ok()?;
        if e.ino == 0 {
            continue;
        }
        match held_names.iter().position(|(n, _)| *n == e.name) {
            Some(i) => {
                seen[i] = true;
                if let Some((ino, t)) = held_names[i].1 {
                    entries.push((ino, t, e.name));
                }
            }
            None => entries.push((e.ino, e.dtype, e.name)),
        }
    }
    for (i, (name, st)) in held_names.iter().enumerate() {
        if let (false, Some((ino, t))) = (seen[i], st) {
            entries.push((*ino, *t, name));
        }
    }
    let image = ufs_format::dir::build_chunk(en, &entries)?;
    Some((image.to_vec(), done))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_and_name() {
        for m in WriteMode::ALL {
            assert_eq!(WriteMode::parse(m.name()), Some(m));
        }
        assert_eq!(WriteMode::parse("journal"), None);
        assert!(!WriteMode::Async.tracks() && WriteMode::Normal.tracks());
        assert!(WriteMode::Softdep.delays() && !WriteMode::Sync.delays());
    }

    #[test]
    fn flush_makes_written_changes_durable() {
        let mut l = Ledger::default();
        let a = l.new_id(Frag::new(10));
        let b = l.new_id(Frag::new(20));
        assert!(!l.durable(a) && l.durable(ChangeId::NONE));
        l.written(a);
        assert!(!l.durable(a), "written is not durable before a flush");
        assert_eq!(l.owner(b), Some(Frag::new(20)));
        l.flushed();
        assert!(l.durable(a) && !l.durable(b));
        l.moot(&[b]);
        assert!(l.durable(b) && l.owner(b).is_none());
    }

    #[test]
    fn durability_and_owners_follow_settling_in_any_order() {
        let mut l = Ledger::default();
        let ids: Vec<ChangeId> = (0..6).map(|i| l.new_id(Frag::new(100 + i))).collect();
        assert_eq!((l.pending(), l.span()), (6, 6));
        // Settled out of order: the window keeps its oldest undurable id.
        l.moot(&[ids[1], ids[3]]);
        assert!(l.durable(ids[1]) && l.durable(ids[3]) && !l.durable(ids[0]));
        assert_eq!(l.owner(ids[1]), None);
        assert_eq!(l.owner(ids[2]), Some(Frag::new(102)));
        assert_eq!(
            (l.pending(), l.span(), l.oldest_undurable()),
            (4, 6, Some(ids[0]))
        );
        // The oldest goes: the window starts at the next undurable one.
        l.moot(&[ids[0]]);
        assert_eq!((l.span(), l.oldest_undurable()), (4, Some(ids[2])));
        // Moved and riding changes keep their new owner.
        l.moved(&[ids[2], ids[3]], Frag::new(7));
        assert_eq!(l.owner(ids[2]), Some(Frag::new(7)));
        assert_eq!(l.owner(ids[3]), None, "a durable change has no owner");
        l.ride_on(&[ids[4]], ids[5]);
        assert_eq!(l.owner(ids[4]), Some(Frag::new(105)));
        l.moot(&[ids[5]]);
        assert!(l.durable(ids[4]), "a rider is durable with its change");
        assert!(!l.durable(ids[2]));
        l.moot(&[ids[2]]);
        assert_eq!((l.pending(), l.span(), l.oldest_undurable()), (0, 0, None));
        // Ids go on from where they were; old ones stay durable.
        let n = l.new_id(Frag::new(9));
        assert!(n > ids[5] && !l.durable(n) && l.durable(ids[0]));
        assert_eq!(l.oldest_undurable(), Some(n));
    }

    #[test]
    fn a_flush_without_the_lock_settles_only_what_was_written_before_it() {
        let mut l = Ledger::default();
        let ids: Vec<ChangeId> = (0..5).map(|i| l.new_id(Frag::new(i))).collect();
        for &i in &ids[..3] {
            l.written(i);
        }
        let mut f = l.unflushed_snapshot();
        // Written after the snapshot: the flush under way does not cover it.
        l.written(ids[3]);
        assert!(!l.settle_flushed(&mut f, 2), "a part at a time");
        assert!(l.durable(ids[0]) && l.durable(ids[1]) && !l.durable(ids[2]));
        assert!(l.settle_flushed(&mut f, 2));
        assert!(l.durable(ids[2]) && !l.durable(ids[3]));
        assert_eq!(
            l.unflushed(),
            &[ids[3]],
            "the snapshot's head is gone, the rest waits"
        );
        // A full flush in between takes everything; the late settle then
        // changes nothing it should not.
        let mut g = l.unflushed_snapshot();
        l.written(ids[4]);
        l.flushed();
        assert!(l.durable(ids[3]) && l.durable(ids[4]));
        let c = l.new_id(Frag::new(9));
        l.written(c);
        assert!(l.settle_flushed(&mut g, 100));
        assert!(!l.durable(c), "written after both flushes began");
        assert_eq!(l.unflushed(), &[c]);
    }
}
