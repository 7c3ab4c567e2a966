//! The buffer cache: every file-system block the engine touches passes
//! through here.
//!
//! Invariants:
//! - Buffers are keyed by their first fragment address and never overlap:
//!   before a buffer is created, any cached buffer overlapping its range is
//!   written back (if dirty) and dropped, so the cache is always coherent
//!   with itself and the device.
//! - A dirty buffer reaches the device before it is evicted or dropped,
//!   except through [`BufferCache::discard`], used for blocks being freed.
//! - Bytes held never exceed the limit by more than the buffers pinned by the
//!   current operation (eviction happens on insertion). A buffer counts its
//!   capacity, the memory it holds; growth reserves exactly what it needs.
//! - Counters by block kind count every hit, miss, read and write.
//!
//! - Writes go through [`BufferCache::write_buf`], the single place the
//!   write-ordering policy ([`crate::order`]) acts: a region whose oldest
//!   held change needs something undurable is written as it was before
//!   that change, and the buffer stays dirty; it is never dropped dirty
//!   (eviction forces out what it waits for first).
//! - With vmiodir off, directory blocks count against a small pool of their
//!   own and are evicted within it; with it on they share the main budget.
//! - The cache knows no on-disk format: check-hashes, which blocks go out
//!   whole and how a region of named entries is written with some of its
//!   changes held back are the file system's [`Formats`], the hooks it
//!   calls in the write path (the role of FreeBSD's `bioops`).
use crate::dev::BlockDevice;
use crate::error::Result;
use crate::order::{BufDeps, ChangeId, EntryOp, Held, Ledger, OrderStats, WriteMode};
use foldhash::HashSet;
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum BlockKind {
    Super,
    Cg,
    Inode,
    Dir,
    Indir,
    Data,
    Summary,
    /// An inode's extended attribute area (`di_extb`).
    ExtAttr,
}

impl BlockKind {
    pub const ALL: [BlockKind; 8] = [
        BlockKind::Super,
        BlockKind::Cg,
        BlockKind::Inode,
        BlockKind::Dir,
        BlockKind::Indir,
        BlockKind::Data,
        BlockKind::Summary,
        BlockKind::ExtAttr,
    ];
    fn idx(self) -> usize {
        self as usize
    }
    pub fn name(self) -> &'static str {
        match self {
            BlockKind::Super => "superblock",
            BlockKind::Cg => "cg",
            BlockKind::Inode => "inode",
            BlockKind::Dir => "directory",
            BlockKind::Indir => "indirect",
            BlockKind::Data => "data",
            BlockKind::Summary => "summary",
            BlockKind::ExtAttr => "extattr",
        }
    }
}

/// What a file system's on-disk formats ask of the blocks the cache moves
/// (check-hashes): the file system supplies it, so the cache itself knows
/// no format.
pub(crate) trait Formats: Send {
    /// A block of `kind` just read from fragment `addr`: an error (a
    /// `Corrupt` one) refuses it.
    fn verify(&self, kind: BlockKind, addr: u64, data: &[u8]) -> Result<()>;
    /// A block of `kind` about to be written: make it whole (compute its
    /// check-hash over the bytes that go).
    fn seal(&self, kind: BlockKind, data: &mut [u8]);
    /// Whether blocks of `kind` must reach the device whole or not at all
    /// ([`BlockDevice::write_untorn`](crate::dev::BlockDevice::write_untorn)).
    fn untorn(&self, kind: BlockKind) -> bool;
    /// A region of a block of `kind` whose held changes all describe named
    /// entries (`Held::entries`), as it may be written now: the image and
    /// the changes it writes. None: the region is rolled back whole to
    /// before its oldest held change.
    fn entry_image(
        &self,
        kind: BlockKind,
        current: &[u8],
        stack: &[Held],
        ledger: &Ledger,
    ) -> Option<(Vec<u8>, Vec<ChangeId>)>;
}

#[derive(Debug, Default, Clone, Copy, Serialize)]
pub struct KindStats {
    pub hits: u64,
    pub misses: u64,
    pub reads: u64,
    pub writes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
}

#[derive(Debug, Default, Clone, Serialize)]
pub struct CacheStats {
    /// By block kind, in [`BlockKind::ALL`]'s order; serialized as an
    /// object keyed by the kinds' names.
    #[serde(serialize_with = "by_kind_named")]
    pub by_kind: [KindStats; BlockKind::ALL.len()],
    /// Buffers evicted to make room, in either pool; of which from the
    /// main cache (with vmiodir off the directory pool evicts on its own
    /// when the main cache has room: a sign of the pool's size, not of
    /// memory running short).
    pub evictions: u64,
    pub evictions_main: u64,
    pub bytes_cached: u64,
    pub limit_bytes: u64,
    /// vmiodir off: bytes of directory blocks held, and their pool's size.
    pub dir_pool_bytes: Option<u64>,
    pub dir_pool_limit: Option<u64>,
    /// New buffers from memory made ahead of need ([`warm`]), process-wide.
    pub warm: warm::WarmStats,
}

/// `by_kind` as `{"superblock": {...}, "cg": {...}, ...}`.
fn by_kind_named<S: serde::Serializer>(
    v: &[KindStats; BlockKind::ALL.len()],
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(Some(v.len()))?;
    for k in BlockKind::ALL {
        m.serialize_entry(k.name(), &v[k.idx()])?;
    }
    m.end()
}

impl CacheStats {
    pub fn kind(&self, k: BlockKind) -> &KindStats {
        &self.by_kind[k.idx()]
    }
}

/// The smallest cache: room for the buffers one operation uses at once
/// with the largest blocks, and little more (tests use it to make blocks
/// evicted in the middle of work).
pub const MIN_LIMIT: u64 = 256 << 10;

struct Buf {
    data: Vec<u8>,
    kind: BlockKind,
    dirty: bool,
    stamp: u64,
    /// Write-ordering state (empty when the mode does not track).
    deps: BufDeps,
}

/// Resizes a buffer's contents, zero-filling what is added, growing its
/// memory by exactly what is needed: a buffer's capacity is what it counts
/// against the cache's limit. Growth takes a warm buffer when one of the
/// new size is in stock ([`warm`]): its pages are faulted in already.
fn resize_exact(stock: &warm::Warm, data: &mut Vec<u8>, len: usize) {
    if stock.grow_into(data, len) {
        return;
    }
    data.reserve_exact(len.saturating_sub(data.len()));
    data.resize(len, 0);
}

/// A zeroed buffer of `len` bytes for the cache: a warm one ([`warm`])
/// when one is in stock.
fn new_buffer(stock: &warm::Warm, len: usize) -> Vec<u8> {
    stock.take(len).unwrap_or_else(|| vec![0u8; len])
}

/// Which byte budget a buffer counts against: the main cache, or (with
/// vmiodir off) the small fixed pool of directory blocks.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pool {
    Main = 0,
    Dir = 1,
}

pub struct BufferCache {
    /// Where new buffers come from when memory was made ahead for them
    /// (the process's [`warm::WARM`]; tests give their own).
    warm: &'static warm::Warm,
    /// Shared so that a flush can run without the engine lock
    /// ([`BufferCache::unlocked_flush_begin`]).
    dev: std::sync::Arc<dyn BlockDevice>,
    /// What the on-disk formats ask of each transfer (check-hashes):
    /// verified as a block comes from the device, sealed as one goes to
    /// it, never on the hot path in between. The cache knows no format.
    formats: Option<Box<dyn Formats>>,
    fshift: u32,
    bufs: BTreeMap<u64, Buf>,
    /// Least recently used first, per pool: stamp to address.
    lru: [BTreeMap<u64, u64>; 2],
    clock: u64,
    /// Buffers now dirty (kept with every change of a buffer's flag).
    ndirty: usize,
    bytes: [u64; 2],
    limit: u64,
    /// Directory blocks share the main cache (vmiodir on, FreeBSD's default
    /// since 2000) or live in a pool of this many bytes (vmiodir off).
    dir_pool: Option<u64>,
    stats: CacheStats,
    mode: WriteMode,
    ledger: Ledger,
    /// Why writing stopped: set by the first failed device write or flush,
    /// or by the file system when an operation panicked half-way. Nothing
    /// reaches the device after it (what the ledger says is durable may no
    /// longer be true, and a half-done change must not be completed).
    failed: Option<String>,
}

impl BufferCache {
    pub fn new(dev: Box<dyn BlockDevice>, fsize: u64, limit_bytes: u64) -> Self {
        BufferCache {
            warm: &warm::WARM,
            dev: std::sync::Arc::from(dev),
            formats: None,
            fshift: fsize.trailing_zeros(),
            bufs: BTreeMap::new(),
            lru: [BTreeMap::new(), BTreeMap::new()],
            clock: 0,
            ndirty: 0,
            bytes: [0, 0],
            limit: limit_bytes.max(MIN_LIMIT),
            dir_pool: None,
            stats: CacheStats::default(),
            mode: WriteMode::Async,
            ledger: Ledger::default(),
            failed: None,
        }
    }

    /// Stops all writing for good, giving the reason (kept: the first).
    pub fn fail(&mut self, why: impl Into<String>) {
        if self.failed.is_none() {
            self.failed = Some(why.into());
        }
    }

    /// Why writing stopped, if it did.
    pub fn failure(&self) -> Option<&str> {
        self.failed.as_deref()
    }

    /// An error if writing has stopped.
    fn healthy(&self) -> Result<()> {
        match &self.failed {
            None => Ok(()),
            Some(why) => Err(crate::error::Error::new(
                crate::error::ErrorKind::Io,
                format!("writing stopped after a failure ({why}); unmount and run fsck"),
            )),
        }
    }

    /// The outcome of a device write or flush, its failure latched.
    fn latched<T>(&mut self, r: Result<T>) -> Result<T> {
        if let Err(e) = &r {
            self.fail(format!("device: {}", e.msg));
        }
        r
    }

    /// Turns on cylinder-group check-hashes over the first `cgsize` bytes.
    pub(crate) fn set_formats(&mut self, f: Option<Box<dyn Formats>>) {
        self.formats = f;
    }

    /// Chooses the write-ordering mode; only before the first change.
    pub fn set_mode(&mut self, mode: WriteMode) {
        self.mode = mode;
        self.ledger.stats.mode = mode.name().to_string();
    }
    pub fn mode(&self) -> WriteMode {
        self.mode
    }

    /// Chooses what ordered writes wait for; only before the first change.
    pub fn set_barrier(&mut self, b: crate::order::Barrier) {
        self.ledger.set_barrier(b);
    }
    pub fn barrier(&self) -> crate::order::Barrier {
        self.ledger.barrier()
    }

    /// Writes and flushes that made changes durable so far: releases that
    /// wait for durability are looked at again when this moved.
    pub fn settled_changes(&self) -> u64 {
        self.ledger.settled()
    }

    /// vmiodir off: directory blocks get a pool of their own of `bytes`.
    pub fn set_dir_pool(&mut self, bytes: Option<u64>) {
        self.dir_pool = bytes.map(|b| b.max(64 << 10));
    }

    pub fn device(&self) -> &dyn BlockDevice {
        &*self.dev
    }
    /// Gives back the memory made ahead for new buffers ([`warm`]).
    pub fn drain_warm(&self) {
        self.warm.drain();
    }
    /// Takes new buffers from `stock` instead of the process's.
    pub fn set_warm_stock(&mut self, stock: &'static warm::Warm) {
        self.warm = stock;
    }
    pub fn set_limit(&mut self, limit: u64) {
        self.limit = limit.max(MIN_LIMIT);
    }
    pub fn stats(&self) -> CacheStats {
        let mut s = self.stats.clone();
        s.bytes_cached = self.bytes[0] + self.bytes[1];
        s.limit_bytes = self.limit;
        s.dir_pool_bytes = self.dir_pool.map(|_| self.bytes[Pool::Dir as usize]);
        s.dir_pool_limit = self.dir_pool;
        s.warm = self.warm.stats();
        s
    }
    pub fn order_stats(&self) -> OrderStats {
        let mut s = self.ledger.stats.clone();
        s.pending_now = self.ledger.pending();
        s
    }

    /// Counts a finished background sync of `rounds` rounds.
    pub fn note_background_sync(&mut self, rounds: u64) {
        let st = &mut self.ledger.stats;
        st.background_syncs += 1;
        st.background_rounds += rounds;
        st.longest_background_sync = st.longest_background_sync.max(rounds);
    }

    fn pool(&self, kind: BlockKind) -> Pool {
        if self.dir_pool.is_some() && kind == BlockKind::Dir {
            Pool::Dir
        } else {
            Pool::Main
        }
    }
    fn pool_limit(&self, p: Pool) -> u64 {
        match p {
            Pool::Main => self.limit,
            Pool::Dir => self.dir_pool.unwrap_or(self.limit),
        }
    }

    fn nfrags(&self, len: usize) -> u64 {
        (len as u64).div_ceil(1 << self.fshift)
    }

    /// Marks the buffer at `addr` used now. A buffer used within the last
    /// eighth of its pool's turnover is left where it stands in the LRU
    /// order (already among the youngest): two tree updates saved on most
    /// hits, at the price of an order that is exact only to that eighth.
    fn touch(&mut self, addr: u64) {
        self.clock += 1;
        let c = self.clock;
        let dir_pool = self.dir_pool.is_some();
        let Some(b) = self.bufs.get_mut(&addr) else {
            return;
        };
        let p = if dir_pool && b.kind == BlockKind::Dir {
            Pool::Dir
        } else {
            Pool::Main
        } as usize;
        let lru = &mut self.lru[p];
        if c - b.stamp <= (lru.len() as u64 / 8).max(1) {
            return;
        }
        lru.remove(&b.stamp);
        b.stamp = c;
        lru.insert(c, addr);
    }

    /// Changes the kind of a cached buffer, moving it between pools.
    fn set_kind(&mut self, addr: u64, kind: BlockKind) {
        let Some(old) = self.bufs.get(&addr).map(|b| b.kind) else {
            return;
        };
        if old == kind {
            return;
        }
        let (from, to) = (self.pool(old) as usize, self.pool(kind) as usize);
        let b = self.bufs.get_mut(&addr).expect("buffer present");
        b.kind = kind;
        if from != to {
            let len = b.data.capacity() as u64;
            self.lru[from].remove(&b.stamp);
            self.lru[to].insert(b.stamp, addr);
            self.bytes[from] -= len;
            self.bytes[to] += len;
        }
    }

    /// Writes back and drops every buffer overlapping `[addr, addr+n)` except
    /// one starting exactly at `addr` with length `len` (which is kept).
    fn clear_overlaps(&mut self, addr: u64, n: u64, keep_len: Option<usize>) -> Result<()> {
        let mut victims = Vec::new();
        if let Some((&a, b)) = self.bufs.range(..addr).next_back() {
            if a + self.nfrags(b.data.len()) > addr {
                victims.push(a);
            }
        }
        for (&a, b) in self.bufs.range(addr..addr.saturating_add(n)) {
            if a == addr && Some(b.data.len()) == keep_len {
                continue;
            }
            victims.push(a);
        }
        for a in victims {
            self.evict(a, true)?;
        }
        Ok(())
    }

    /// Drops a buffer: written back first (with everything it waits for)
    /// if `write`, else its changes are abandoned as moot.
    fn evict(&mut self, addr: u64, write: bool) -> Result<()> {
        if write {
            self.write_buf(addr)?;
            if self.bufs.get(&addr).is_some_and(|b| b.dirty) {
                self.force_buf(addr)?;
            }
        }
        if let Some(b) = self.remove_buf(addr) {
            if !write {
                self.ledger.moot(&b.deps.ids());
            }
        }
        Ok(())
    }

    /// Takes a buffer out of the cache and its pool's accounting.
    fn remove_buf(&mut self, addr: u64) -> Option<Buf> {
        let b = self.bufs.remove(&addr)?;
        if b.dirty {
            self.ndirty -= 1;
        }
        let p = self.pool(b.kind) as usize;
        self.lru[p].remove(&b.stamp);
        self.bytes[p] -= b.data.capacity() as u64;
        Some(b)
    }

    fn make_room(&mut self, need: u64, p: Pool) -> Result<()> {
        let pi = p as usize;
        while self.bytes[pi] + need > self.pool_limit(p) {
            let Some((_, &addr)) = self.lru[pi].iter().next() else {
                break;
            };
            if self.bufs.get(&addr).is_some_and(|b| b.dirty) {
                self.write_behind(p)?;
            }
            self.stats.evictions += 1;
            if p == Pool::Main {
                self.stats.evictions_main += 1;
            }
            self.evict(addr, true)?;
        }
        Ok(())
    }

    /// The least recently used dirty buffer must go: write back every dirty
    /// buffer in the older half of its pool, in address order, as
    /// FreeBSD's buffer daemon flushes and clusters them, instead of one
    /// buffer per eviction between the reads that caused it.
    fn write_behind(&mut self, p: Pool) -> Result<()> {
        let lru = &self.lru[p as usize];
        let half = lru.len().div_ceil(2);
        let mut old: Vec<u64> = lru
            .values()
            .take(half)
            .copied()
            .filter(|a| self.bufs.get(a).is_some_and(|b| b.dirty))
            .collect();
        old.sort_unstable();
        for a in old {
            self.write_buf(a)?;
        }
        Ok(())
    }

    fn insert(&mut self, addr: u64, data: Vec<u8>, kind: BlockKind, dirty: bool) -> Result<()> {
        let p = self.pool(kind);
        self.make_room(data.capacity() as u64, p)?;
        self.clock += 1;
        self.bytes[p as usize] += data.capacity() as u64;
        self.lru[p as usize].insert(self.clock, addr);
        if dirty {
            self.ndirty += 1;
        }
        self.bufs.insert(
            addr,
            Buf {
                data,
                kind,
                dirty,
                stamp: self.clock,
                deps: BufDeps::default(),
            },
        );
        Ok(())
    }

    fn ensure(&mut self, addr: u64, len: usize, kind: BlockKind) -> Result<()> {
        let st = &mut self.stats.by_kind[kind.idx()];
        if let Some(b) = self.bufs.get(&addr) {
            if b.data.len() == len {
                st.hits += 1;
                self.touch(addr);
                return Ok(());
            }
        }
        st.misses += 1;
        let n = self.nfrags(len);
        self.clear_overlaps(addr, n, None)?;
        let mut data = new_buffer(self.warm, len);
        let off = addr.checked_mul(1 << self.fshift).ok_or_else(|| {
            crate::error::Error::damaged(
                crate::error::Damage::Block(addr),
                format!("block address {addr} overflows"),
            )
        })?;
        // A directory block is read alone: a walk goes from one directory
        // to another elsewhere, so a read-ahead window around it would be
        // copied for nothing (a cold `find` of /usr/include: 0.12-0.15 s
        // with windows, see DESIGN.md "Walk prefetch").
        if kind == BlockKind::Dir {
            self.dev.read_single(off, &mut data)?;
        } else {
            self.dev.read_at(off, &mut data)?;
        }
        if let Some(f) = &self.formats {
            f.verify(kind, addr, &data)?;
        }
        let st = &mut self.stats.by_kind[kind.idx()];
        st.reads += 1;
        st.read_bytes += len as u64;
        self.insert(addr, data, kind, false)
    }

    /// The `len` bytes at fragment `addr`, read from the device on a miss.
    pub fn read(&mut self, addr: u64, len: usize, kind: BlockKind) -> Result<&[u8]> {
        self.ensure(addr, len, kind)?;
        Ok(&self
            .bufs
            .get(&addr)
            .map(|b| &b.data)
            .expect("buffer just ensured")[..])
    }

    /// The bytes of the buffer at fragment `addr`, if the cache holds it
    /// (no read, no counters, no LRU change).
    pub fn peek(&self, addr: u64) -> Option<&[u8]> {
        self.bufs.get(&addr).map(|b| &b.data[..])
    }

    /// Asks the device to start reading `len` bytes at fragment `addr`
    /// unless the cache holds that buffer (see
    /// [`BlockDevice::prefetch`](crate::dev::BlockDevice::prefetch)).
    /// Whether the device below takes prefetch hints.
    pub fn prefetches(&self) -> bool {
        self.dev.prefetches()
    }

    pub fn prefetch(&self, addr: u64, len: usize) {
        if !self.bufs.contains_key(&addr) {
            self.dev.prefetch(addr << self.fshift, len);
        }
    }

    /// [`prefetch`](Self::prefetch) for a block read alone (a directory
    /// block): just `len` bytes, not a read-ahead window around them.
    pub fn prefetch_single(&self, addr: u64, len: usize) {
        if !self.bufs.contains_key(&addr) {
            self.dev.prefetch_single(addr << self.fshift, len);
        }
    }

    /// The buffer's changes since its last write join its epoch (they may
    /// go to disk with the next write).
    fn join_epoch(&mut self, addr: u64) -> ChangeId {
        if !self.mode.tracks() {
            return 0;
        }
        let b = self.bufs.get_mut(&addr).expect("buffer present");
        if b.deps.epoch == 0 {
            b.deps.epoch = self.ledger.new_id(addr);
        }
        b.deps.epoch
    }

    /// Like [`read`](Self::read), for changing the bytes; marks the buffer
    /// dirty. The change may reach the disk with the next write of the
    /// buffer: for blocks whose regions hold changes that wait (inodes,
    /// directories, indirect blocks) use [`modify_tracked`](Self::modify_tracked).
    pub fn modify(&mut self, addr: u64, len: usize, kind: BlockKind) -> Result<&mut [u8]> {
        self.ensure(addr, len, kind)?;
        self.set_kind(addr, kind);
        self.join_epoch(addr);
        let b = self.bufs.get_mut(&addr).expect("buffer just ensured");
        if !b.dirty {
            self.ndirty += 1;
        }
        b.dirty = true;
        Ok(&mut b.data[..])
    }

    /// A change to the region `[roff, roff+rlen)` of a buffer that must not
    /// reach the disk before the changes `needs`. Returns the change's id
    /// and the bytes to change. In normal and sync modes the needs are
    /// forced to disk first; in soft-updates mode the change waits in
    /// memory and writes of the buffer roll the region back until then.
    #[allow(clippy::too_many_arguments)]
    pub fn modify_tracked(
        &mut self,
        addr: u64,
        len: usize,
        kind: BlockKind,
        roff: usize,
        rlen: usize,
        needs: &[ChangeId],
        entries: Vec<EntryOp>,
    ) -> Result<(ChangeId, &mut [u8])> {
        if !self.mode.tracks() {
            return Ok((0, self.modify(addr, len, kind)?));
        }
        let mut unmet: Vec<ChangeId> = needs
            .iter()
            .copied()
            .filter(|&n| !self.ledger.durable(n))
            .collect();
        unmet.sort_unstable();
        unmet.dedup();
        if !unmet.is_empty() && !self.mode.delays() {
            self.force_ids(&unmet)?;
            unmet.retain(|&n| !self.ledger.durable(n));
        }
        self.ensure(addr, len, kind)?;
        self.set_kind(addr, kind);
        if roff + rlen > len {
            return Err(crate::error::Error::corrupt(format!(
                "region {roff}+{rlen} outside a buffer of {len} bytes"
            )));
        }
        let b = self.bufs.get_mut(&addr).expect("buffer just ensured");
        if !b.dirty {
            self.ndirty += 1;
        }
        b.dirty = true;
        let region = b.deps.held.get(&(roff as u32));
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
            self.join_epoch(addr)
        } else {
            let id = self.ledger.new_id(addr);
            let b = self.bufs.get_mut(&addr).expect("buffer present");
            let before = if unmet.is_empty() {
                None
            } else {
                Some(b.data[roff..roff + rlen].to_vec().into_boxed_slice())
            };
            if before.is_some() {
                self.ledger.stats.held += 1;
            }
            b.deps
                .held
                .entry(roff as u32)
                .or_insert_with(|| (rlen as u32, Vec::new()))
                .1
                .push(Held {
                    id,
                    needs: unmet,
                    before,
                    entries,
                });
            id
        };
        let b = self.bufs.get_mut(&addr).expect("buffer present");
        Ok((id, &mut b.data[..]))
    }

    /// The newest undurable change of the buffer at `addr` (0: none): what
    /// a pointer to the block needs.
    pub fn latest(&self, addr: u64) -> ChangeId {
        let Some(b) = self.bufs.get(&addr) else {
            return 0;
        };
        let held = b
            .deps
            .held
            .values()
            .filter_map(|(_, s)| s.last().map(|h| h.id))
            .max()
            .unwrap_or(0);
        [held, b.deps.epoch, b.deps.written]
            .into_iter()
            .filter(|&i| !self.ledger.durable(i))
            .max()
            .unwrap_or(0)
    }

    /// The newest undurable change of one region (0: none): what a pointer
    /// to the structure in that region (an inode) needs.
    pub fn region_latest(&self, addr: u64, roff: usize) -> ChangeId {
        let Some(b) = self.bufs.get(&addr) else {
            return 0;
        };
        if let Some((_, s)) = b.deps.held.get(&(roff as u32)) {
            if let Some(h) = s.last() {
                return h.id;
            }
        }
        [b.deps.epoch, b.deps.written]
            .into_iter()
            .filter(|&i| !self.ledger.durable(i))
            .max()
            .unwrap_or(0)
    }

    /// Counts releases made to wait (statistics).
    pub fn note_deferred(&mut self, n: u64) {
        self.ledger.stats.deferred_frees += n;
    }

    pub fn is_durable(&self, id: ChangeId) -> bool {
        self.ledger.durable(id)
    }

    /// The kind of the cached buffer at `addr`.
    pub fn kind(&self, addr: u64) -> Option<BlockKind> {
        self.bufs.get(&addr).map(|b| b.kind)
    }

    /// Changes not yet durable (each holds ledger entries, and a held one
    /// the bytes of its region as they were).
    pub fn pending(&self) -> u64 {
        self.ledger.pending()
    }

    /// Whether every change made up to `id` (an id of
    /// [`last_change`](Self::last_change)) is durable, or moot.
    pub fn durable_upto(&self, id: ChangeId) -> bool {
        self.ledger.oldest_undurable().is_none_or(|o| o > id)
    }

    /// The newest change recorded so far.
    pub fn last_change(&self) -> ChangeId {
        self.ledger.last_id()
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
        (self.limit >> 10).max(4096)
    }

    /// Whether the ordering state is past its bound: more undurable
    /// changes than [`max_pending`](Self::max_pending), or ids spanning
    /// four times that from the oldest undurable one (the ledger keeps 8
    /// bytes per id of the span: an old change that stays undurable keeps
    /// every later id's slot).
    pub fn ordering_full(&self) -> bool {
        let max = self.max_pending();
        self.ledger.pending() > max || self.ledger.span() > 4 * max
    }

    /// Device flushes so far.
    pub fn flushes(&self) -> u64 {
        self.ledger.stats.flushes
    }

    /// Writes the buffers holding the changes `ids` (rolled back where
    /// they must be), without a flush.
    pub fn write_ids(&mut self, ids: &[ChangeId]) -> Result<()> {
        let mut addrs: Vec<u64> = ids.iter().filter_map(|&i| self.ledger.owner(i)).collect();
        addrs.sort_unstable();
        addrs.dedup();
        for a in addrs {
            self.write_buf(a)?;
        }
        Ok(())
    }

    /// The address of the buffer holding the undurable change `id`.
    pub fn owner(&self, id: ChangeId) -> Option<u64> {
        self.ledger.owner(id)
    }

    /// A zero-filled dirty buffer for a freshly allocated block, without
    /// reading what the device holds there. Whatever an earlier owner of
    /// the block left waiting is abandoned.
    pub fn create(&mut self, addr: u64, len: usize, kind: BlockKind) -> Result<&mut [u8]> {
        let n = self.nfrags(len);
        self.clear_overlaps(addr, n, Some(len))?;
        if self.bufs.contains_key(&addr) {
            self.set_kind(addr, kind);
            let b = self.bufs.get_mut(&addr).expect("buffer present");
            b.data.fill(0);
            if !b.dirty {
                self.ndirty += 1;
            }
            b.dirty = true;
            let old = std::mem::take(&mut b.deps);
            self.ledger.moot(&old.ids());
        } else {
            self.insert(addr, new_buffer(self.warm, len), kind, true)?;
        }
        self.join_epoch(addr);
        self.touch(addr);
        Ok(&mut self.bufs.get_mut(&addr).expect("buffer just created").data[..])
    }

    /// Moves a cached buffer's contents to a new, larger location (a
    /// fragment run that was reallocated elsewhere), zero-extending it.
    /// Changes waiting in it move along; directory and indirect blocks
    /// with undurable changes are first written where they were, so that
    /// an older pointer to the old place never reaches unwritten bytes.
    pub fn relocate(
        &mut self,
        from: u64,
        from_len: usize,
        to: u64,
        to_len: usize,
        kind: BlockKind,
    ) -> Result<()> {
        self.read(from, from_len, kind)?;
        let mut deps = BufDeps::default();
        if self.mode.tracks() {
            if kind != BlockKind::Data && self.latest(from) != 0 {
                self.write_buf(from)?;
            }
            if let Some(b) = self.bufs.get_mut(&from) {
                deps.held = std::mem::take(&mut b.deps.held);
            }
        }
        // The contents move with their memory (grown in place where the
        // allocator can); what else waited in the old buffer is moot, as
        // for the rest of the old run.
        let mut moved = self
            .remove_buf(from)
            .expect("buffer just read stays until discarded");
        self.ledger.moot(&moved.deps.ids());
        self.discard(from, self.nfrags(from_len));
        resize_exact(self.warm, &mut moved.data, to_len);
        self.clear_overlaps(to, self.nfrags(to_len), Some(to_len))?;
        // A buffer left at the new place by the block's former owner: its
        // contents and waiting changes are moot, as `create` treats it.
        self.evict(to, false)?;
        self.insert(to, moved.data, kind, true)?;
        self.join_epoch(to);
        self.touch(to);
        if !deps.held.is_empty() {
            let ids: Vec<ChangeId> = deps.ids();
            self.ledger.moved(&ids, to);
            let b = self.bufs.get_mut(&to).expect("buffer just created");
            b.deps.held = deps.held;
        }
        Ok(())
    }

    /// Resizes the buffer at `addr` in place (fragment run grown or shrunk
    /// without moving), keeping its contents and waiting changes.
    pub fn resize(
        &mut self,
        addr: u64,
        old_len: usize,
        new_len: usize,
        kind: BlockKind,
    ) -> Result<()> {
        self.ensure(addr, old_len, kind)?;
        self.set_kind(addr, kind);
        if new_len < old_len && self.mode.tracks() && self.latest(addr) != 0 {
            // What is cut off must not be lost to a pointer that still
            // covers it: write the buffer (rolled back where it must be)
            // before the tail's changes become moot.
            self.write_buf(addr)?;
        }
        let p = self.pool(kind) as usize;
        let warm = self.warm;
        let b = self.bufs.get_mut(&addr).expect("buffer just ensured");
        let cap = b.data.capacity();
        resize_exact(warm, &mut b.data, new_len);
        let new_cap = b.data.capacity();
        if !b.dirty {
            self.ndirty += 1;
        }
        b.dirty = true;
        let mut cut = Vec::new();
        b.deps.held.retain(|&off, (len, s)| {
            let keep = (off + *len) as usize <= new_len;
            if !keep {
                cut.extend(s.iter().map(|h| h.id));
            }
            keep
        });
        self.ledger.moot(&cut);
        self.bytes[p] = self.bytes[p] + new_cap as u64 - cap as u64;
        // Cached copies of the fragments just added are stale.
        let (n_old, n_new) = (self.nfrags(old_len), self.nfrags(new_len));
        if n_new > n_old {
            for a in self.overlapping(addr + n_old, n_new - n_old) {
                if a != addr {
                    self.evict(a, true)?;
                }
            }
        }
        self.join_epoch(addr);
        Ok(())
    }

    /// Drops buffers overlapping `[addr, addr+nfrags)` without writing them:
    /// the blocks are free and nothing on disk points at them any more, so
    /// whatever waits in them is moot.
    pub fn discard(&mut self, addr: u64, nfrags: u64) {
        for a in self.overlapping(addr, nfrags) {
            let _ = self.evict(a, false);
        }
    }

    /// Like [`discard`](Self::discard) for data blocks only: used when a
    /// block is released while a pointer to it may still be on disk (its
    /// unwritten contents are abandoned; metadata blocks stay until the
    /// release is final).
    pub fn discard_data(&mut self, addr: u64, nfrags: u64) {
        for a in self.overlapping(addr, nfrags) {
            if self.bufs.get(&a).is_some_and(|b| b.kind == BlockKind::Data) {
                let _ = self.evict(a, false);
            }
        }
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
    pub fn abandon_dir_blocks(&mut self, addr: u64, nfrags: u64, by: ChangeId) -> bool {
        if !self.mode.tracks() || by == 0 || self.ledger.durable(by) {
            return false;
        }
        let victims = self.overlapping(addr, nfrags);
        let mut ids: Vec<ChangeId> = Vec::new();
        for a in &victims {
            match self.bufs.get(a) {
                Some(b)
                    if b.kind == BlockKind::Dir
                        && *a >= addr
                        && a + self.nfrags(b.data.len()) <= addr + nfrags =>
                {
                    ids.extend(b.deps.ids())
                }
                _ => return false,
            }
        }
        ids.retain(|&i| !self.ledger.durable(i));
        ids.sort_unstable();
        ids.dedup();
        if !ids.is_empty() && self.needs_any(by, &ids, 4096) != Some(false) {
            return false;
        }
        for a in victims {
            self.remove_buf(a);
        }
        self.ledger.ride_on(&ids, by);
        self.ledger.stats.abandoned += ids.len() as u64;
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
        let riders = self.ledger.has_riders();
        while let Some(id) = todo.pop() {
            // A rider (a dead directory's change dropped unwritten) is
            // durable only with the change it stands on: follow that.
            if let Some(by) = self.ledger.carrier(id) {
                if !self.ledger.durable(by) && seen.insert(by) {
                    todo.push(by);
                }
            }
            let Some(a) = self.ledger.owner(id) else {
                continue;
            };
            let Some(b) = self.bufs.get(&a) else {
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
                        if (n < oldest && !riders) || self.ledger.durable(n) || !seen.insert(n) {
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

    fn overlapping(&self, addr: u64, nfrags: u64) -> Vec<u64> {
        let mut victims = Vec::new();
        if let Some((&a, b)) = self.bufs.range(..addr).next_back() {
            if a + self.nfrags(b.data.len()) > addr {
                victims.push(a);
            }
        }
        victims.extend(
            self.bufs
                .range(addr..addr.saturating_add(nfrags))
                .map(|(&a, _)| a),
        );
        victims
    }

    /// Whether any cached buffer overlaps `[addr, addr+nfrags)`: if none,
    /// the device holds those fragments as the file system last wrote them.
    pub fn holds_any(&self, addr: u64, nfrags: u64) -> bool {
        if let Some((&a, b)) = self.bufs.range(..addr).next_back() {
            if a + self.nfrags(b.data.len()) > addr {
                return true;
            }
        }
        self.bufs
            .range(addr..addr.saturating_add(nfrags))
            .next()
            .is_some()
    }

    /// Writes one buffer to the device if dirty: the single write path.
    /// Regions whose oldest held change still needs an undurable change
    /// are written as they were before it; the buffer stays dirty until
    /// every held change has gone out. Returns whether anything was written.
    pub fn write_buf(&mut self, addr: u64) -> Result<bool> {
        let fshift = self.fshift;
        let Some(b) = self.bufs.get_mut(&addr) else {
            return Ok(false);
        };
        if !b.dirty {
            return Ok(false);
        }
        let mut progress = b.deps.epoch != 0 || !self.mode.tracks();
        // Regions written as they were before their oldest waiting change:
        // (offset, the image to write). They are swapped into the buffer
        // for the write and back after it, instead of writing a copy of
        // the whole block (32 KiB per rolled-back write).
        let mut rollbacks: Vec<(usize, Vec<u8>)> = Vec::new();
        let mut written: Vec<ChangeId> = Vec::new();
        if !b.deps.held.is_empty() {
            for (&off, (len, stack)) in b.deps.held.iter_mut() {
                let range = off as usize..(off + *len) as usize;
                if by_entries(stack) {
                    let entry_image = self.formats.as_ref().and_then(|f| {
                        f.entry_image(b.kind, &b.data[range.clone()], stack, &self.ledger)
                    });
                    if let Some((image, done)) = entry_image {
                        progress |= !done.is_empty();
                        written.extend(done.iter().copied());
                        stack.retain(|h| !done.contains(&h.id));
                        if !stack.is_empty() {
                            rollbacks.push((range.start, image));
                            self.ledger.stats.entry_rollbacks += 1;
                        }
                        continue;
                    }
                }
                let first_unmet = stack
                    .iter()
                    .position(|h| !self.ledger.all_durable(&h.needs));
                let k = first_unmet.unwrap_or(stack.len());
                written.extend(stack.drain(..k).map(|h| h.id));
                progress |= k > 0;
                if let Some(h) = stack.first() {
                    let before = h
                        .before
                        .as_ref()
                        .expect("a held change with needs keeps its region");
                    rollbacks.push((off as usize, before.to_vec()));
                }
            }
            b.deps.held.retain(|_, (_, s)| !s.is_empty());
        }
        if !progress {
            return Ok(false);
        }
        let rolled = !rollbacks.is_empty();
        let off = addr.checked_mul(1 << fshift).ok_or_else(|| {
            crate::error::Error::damaged(
                crate::error::Damage::Block(addr),
                format!("block address {addr} overflows"),
            )
        })?;
        if let Some(why) = &self.failed {
            return Err(crate::error::Error::new(
                crate::error::ErrorKind::Io,
                format!("writing stopped after a failure ({why}); unmount and run fsck"),
            ));
        }
        // The image to write: the rolled-back regions swapped in (what
        // they held kept aside), its check-hash; then the buffer as it is.
        let mut kept: Vec<(usize, Vec<u8>)> = Vec::with_capacity(rollbacks.len());
        for (at, image) in &rollbacks {
            let r = *at..*at + image.len();
            kept.push((*at, b.data[r.clone()].to_vec()));
            b.data[r].copy_from_slice(image);
        }
        let untorn = match &self.formats {
            Some(f) => {
                f.seal(b.kind, &mut b.data);
                f.untorn(b.kind)
            }
            None => false,
        };
        let w = if untorn {
            self.dev.write_untorn(off, &b.data)
        } else {
            self.dev.write_at(off, &b.data)
        };
        for (at, bytes) in kept.iter().rev() {
            b.data[*at..*at + bytes.len()].copy_from_slice(bytes);
        }
        if let (true, Some(f)) = (rolled, &self.formats) {
            f.seal(b.kind, &mut b.data);
        }
        if let Err(e) = w {
            self.failed = Some(format!("device: {}", e.msg));
            return Err(e);
        }
        written.push(std::mem::take(&mut b.deps.epoch));
        let top = written.iter().copied().max().unwrap_or(0);
        if top != 0 {
            b.deps.written = top;
        }
        let still = !b.deps.held.is_empty();
        if b.dirty && !still {
            self.ndirty -= 1;
        }
        b.dirty = still;
        let st = &mut self.stats.by_kind[b.kind.idx()];
        st.writes += 1;
        st.write_bytes += b.data.len() as u64;
        if rolled {
            self.ledger.stats.rollbacks += 1;
        }
        for id in written {
            self.ledger.written(id);
        }
        Ok(true)
    }

    /// Asks the device to make every write so far durable.
    /// The start of a device flush made without the engine lock: the
    /// device, and the changes written so far, which the flush will make
    /// durable (see [`crate::order::FlushWithoutLock`]).
    pub fn unlocked_flush_begin(
        &self,
    ) -> Result<(
        std::sync::Arc<dyn BlockDevice>,
        crate::order::FlushWithoutLock,
    )> {
        self.healthy()?;
        Ok((self.dev.clone(), self.ledger.unflushed_snapshot()))
    }

    /// The device's answer to a flush begun with
    /// [`unlocked_flush_begin`](Self::unlocked_flush_begin): a failure
    /// stops all writing, as any device error does.
    pub fn unlocked_flush_result(&mut self, r: Result<()>) -> Result<()> {
        self.latched(r)
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
        self.ledger.settle_flushed(f, max)
    }

    pub fn flush(&mut self) -> Result<()> {
        self.healthy()?;
        let r = self.dev.flush();
        self.latched(r)?;
        self.ledger.flushed();
        Ok(())
    }

    /// Whether writing `b` now would write every change it holds.
    fn writes_whole(&self, b: &Buf) -> bool {
        b.deps
            .held
            .values()
            .all(|(_, s)| s.iter().all(|h| self.ledger.all_durable(&h.needs)))
    }

    /// Whether writing `b` now would write a change made up to `upto`
    /// (one the sync under way waits for): its unheld changes, or a held
    /// change whose needs are all durable. A buffer with such a change and
    /// others that must wait is not [`writes_whole`](Self::writes_whole);
    /// left out of the plan, its old change would wait for the new ones
    /// beside it, and the sync would go round until they cleared.
    fn has_ready_upto(&self, b: &Buf, upto: ChangeId) -> bool {
        if b.deps.epoch != 0 && b.deps.epoch <= upto {
            return true;
        }
        let ready = |h: &Held| h.id <= upto && self.ledger.all_durable(&h.needs);
        b.deps.held.values().any(|(_, s)| {
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
    fn blocking_needs(&self, addr: u64) -> Vec<ChangeId> {
        let Some(b) = self.bufs.get(&addr) else {
            return Vec::new();
        };
        b.deps
            .held
            .values()
            .filter_map(|(_, s)| s.first())
            .flat_map(|h| h.needs.iter().copied())
            .filter(|&n| !self.ledger.durable(n))
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
        let flush_each_round = self.ledger.barrier() == crate::order::Barrier::Flush;
        for _round in 0..100_000 {
            let pending: Vec<ChangeId> = ids
                .iter()
                .copied()
                .filter(|&i| !self.ledger.durable(i))
                .collect();
            if pending.is_empty() {
                return Ok(());
            }
            let before = self.ledger.pending();
            let mut set = std::collections::BTreeSet::new();
            let mut todo: Vec<ChangeId> = pending;
            while let Some(id) = todo.pop() {
                let Some(a) = self.ledger.owner(id) else {
                    continue;
                };
                if set.insert(a) {
                    todo.extend(self.blocking_needs(a));
                }
            }
            let mut wrote = false;
            for a in set {
                if self.write_buf(a)? {
                    self.ledger.stats.forced_writes += 1;
                    wrote = true;
                }
            }
            if flush_each_round {
                self.flush()?;
            }
            if !wrote && self.ledger.pending() == before {
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
    fn force_buf(&mut self, addr: u64) -> Result<()> {
        for _ in 0..100_000 {
            self.write_buf(addr)?;
            if !self.bufs.get(&addr).is_some_and(|b| b.dirty) {
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
    fn unblocking_buffers(&self) -> Vec<u64> {
        let mut out = std::collections::BTreeSet::new();
        for (&a, b) in &self.bufs {
            if b.dirty {
                self.add_unblocking(a, &mut out);
            }
        }
        out.into_iter().collect()
    }

    /// Adds to `out` the buffers holding a change that the dirty buffer
    /// at `a` waits for and that would be written now.
    fn add_unblocking(&self, a: u64, out: &mut std::collections::BTreeSet<u64>) {
        for n in self.blocking_needs(a) {
            let Some(o) = self.ledger.owner(n) else {
                continue;
            };
            if o == a || out.contains(&o) {
                continue;
            }
            let Some(ob) = self.bufs.get(&o) else {
                continue;
            };
            let held = ob
                .deps
                .held
                .values()
                .flat_map(|(_, st)| st.iter())
                .find(|h| h.id == n);
            let goes = match held {
                Some(h) => self.ledger.all_durable(&h.needs),
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
        for (&a, b) in &self.bufs {
            for (&off, (len, stack)) in &b.deps.held {
                for h in stack {
                    if out.len() >= max {
                        break;
                    }
                    let needs: Vec<String> = h
                        .needs
                        .iter()
                        .filter(|&&n| !self.ledger.durable(n))
                        .map(|&n| match self.ledger.owner(n) {
                            Some(o) => format!(
                                "{n} in {o} ({})",
                                match self.bufs.get(&o) {
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
            self.ledger.pending(),
            if out.is_empty() {
                "no held change".to_string()
            } else {
                out.join("; ")
            }
        )
    }

    /// Writes every dirty buffer in address order (held regions rolled back).
    pub fn write_all(&mut self) -> Result<()> {
        let dirty: Vec<u64> = self
            .bufs
            .iter()
            .filter(|(_, b)| b.dirty)
            .map(|(&a, _)| a)
            .collect();
        for a in dirty {
            self.write_buf(a)?;
        }
        Ok(())
    }

    /// Writes every dirty buffer of one kind selection in address order.
    pub fn write_matching(&mut self, pred: impl Fn(u64, BlockKind) -> bool) -> Result<()> {
        let dirty: Vec<u64> = self
            .bufs
            .iter()
            .filter(|(&a, b)| b.dirty && pred(a, b.kind))
            .map(|(&a, _)| a)
            .collect();
        for a in dirty {
            self.write_buf(a)?;
        }
        Ok(())
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
        self.ledger.barrier() == crate::order::Barrier::Flush
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
    pub fn round_plan(&self) -> Vec<u64> {
        let whole: Vec<u64> = self
            .bufs
            .iter()
            .filter(|(_, b)| b.dirty && self.writes_whole(b))
            .map(|(&a, _)| a)
            .collect();
        if !whole.is_empty() {
            return whole;
        }
        let cgs: Vec<u64> = self
            .bufs
            .iter()
            .filter(|(_, b)| b.dirty && b.kind == BlockKind::Cg)
            .map(|(&a, _)| a)
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
        from: u64,
        max: usize,
        upto: ChangeId,
    ) -> (Vec<u64>, Option<u64>) {
        let mut out = std::collections::BTreeSet::new();
        for (i, (&a, b)) in self.bufs.range(from..).enumerate() {
            if i == max {
                return (out.into_iter().collect(), Some(a));
            }
            if b.dirty {
                if self.writes_whole(b) || self.has_ready_upto(b, upto) {
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
            let before = self.ledger.pending();
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
            if self.ledger.pending() == before {
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

    /// Bytes written directly (superblock, summary area), counted by kind.
    /// Kinds the formats want whole go with an untorn write.
    pub fn write_raw(&mut self, byte_off: u64, data: &[u8], kind: BlockKind) -> Result<()> {
        let n = self.nfrags(data.len()).max(1);
        self.clear_overlaps(byte_off >> self.fshift, n, None)?;
        self.healthy()?;
        let untorn = self.formats.as_ref().is_some_and(|f| f.untorn(kind));
        let r = if untorn {
            self.dev.write_untorn(byte_off, data)
        } else {
            self.dev.write_at(byte_off, data)
        };
        self.latched(r)?;
        let st = &mut self.stats.by_kind[kind.idx()];
        st.writes += 1;
        st.write_bytes += data.len() as u64;
        Ok(())
    }

    /// Bytes read directly, bypassing the cache, counted by kind.
    pub fn read_raw(&mut self, byte_off: u64, buf: &mut [u8], kind: BlockKind) -> Result<()> {
        self.dev.read_at(byte_off, buf)?;
        let st = &mut self.stats.by_kind[kind.idx()];
        st.reads += 1;
        st.read_bytes += buf.len() as u64;
        Ok(())
    }

    /// Drops every clean buffer (a cold cache for measurements), and the
    /// memory made ahead for new buffers.
    pub fn drop_clean(&mut self) {
        self.drain_warm();
        let clean: Vec<u64> = self
            .bufs
            .iter()
            .filter(|(_, b)| !b.dirty)
            .map(|(&a, _)| a)
            .collect();
        for a in clean {
            self.remove_buf(a);
        }
    }

    /// Drops clean buffers, least recently used first, until the cache
    /// holds at most `target` bytes (or only dirty buffers are left), and
    /// gives back the memory made ahead for new buffers. Returns the bytes
    /// of blocks given back.
    pub fn trim_clean(&mut self, target: u64) -> u64 {
        self.drain_warm();
        let mut freed = 0;
        for p in 0..2 {
            let order: Vec<u64> = self.lru[p].values().copied().collect();
            for a in order {
                if self.bytes[0] + self.bytes[1] <= target {
                    return freed;
                }
                if self.bufs.get(&a).is_some_and(|b| !b.dirty) {
                    if let Some(b) = self.remove_buf(a) {
                        freed += b.data.capacity() as u64;
                    }
                }
            }
        }
        freed
    }

    /// Bytes of blocks held.
    pub fn held_bytes(&self) -> u64 {
        self.bytes[0] + self.bytes[1]
    }

    pub fn dirty_count(&self) -> usize {
        debug_assert_eq!(self.ndirty, self.bufs.values().filter(|b| b.dirty).count());
        self.ndirty
    }
}

/// Whether a region's held changes go to disk name by name (all of them
/// directory entry changes: `Formats::entry_image`) rather than the region
/// whole or not at all.
fn by_entries(stack: &[Held]) -> bool {
    stack.iter().all(|h| !h.entries.is_empty())
}

#[cfg(test)]
mod tests;
pub mod warm;
