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
//! - Writes go through [`BufferCache::write_buf`]. The cache knows no
//!   write ordering: it carries each buffer's ordering state (`deps`)
//!   without looking inside and calls the ordering at each event of a
//!   buffer's life (`order::buffers`, the role of FreeBSD's `bioops`): to
//!   choose the image a write sends (regions rolled back), when the write
//!   completed, when a buffer is dropped unwritten, moved or cut. A buffer
//!   the ordering keeps dirty is never dropped dirty: eviction has the
//!   ordering force out what it waits for first (`order::sync`).
//! - With vmiodir off, directory blocks count against a pool of their own
//!   and are evicted within it; with it on they share the main budget. In
//!   the shared form of that pool (FreeBSD 4.5's buffer space,
//!   [`bufspace`]) every other buffer used passes through it too, and a
//!   directory block goes when more recent buffers fill the space.
//! - The cache knows no on-disk format: check-hashes, which blocks go out
//!   whole and how a region of named entries is written with some of its
//!   changes held back are the file system's [`Formats`], the hooks it
//!   calls in the write path.
mod bufspace;
pub use bufspace::DirSpace;

use crate::dev::BlockDevice;
use crate::error::Result;
use crate::frag::Frag;
use crate::order::buffers::Ordering;
use crate::order::{BufDeps, ChangeId, Held, Ledger};
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
    fn verify(&self, kind: BlockKind, addr: Frag, data: &[u8]) -> Result<()>;
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
    /// vmiodir off with the pool shared (FreeBSD 4.5's buffer space):
    /// bytes of the other buffers in it.
    pub dir_pool_shared_bytes: Option<u64>,
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

/// vmiodir off: the pool directory blocks live in.
struct DirPool {
    /// Its size in bytes.
    bytes: u64,
    /// Shared with the other buffers in use (FreeBSD 4.5's buffer space,
    /// [`DirSpace::Shared`]): those that passed through it; `None`: the
    /// pool is the directories' own ([`DirSpace::Own`]).
    passers: Option<bufspace::Passers>,
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
    bufs: BTreeMap<Frag, Buf>,
    /// Least recently used first, per pool: stamp to address.
    lru: [BTreeMap<u64, Frag>; 2],
    clock: u64,
    /// Buffers now dirty (kept with every change of a buffer's flag).
    ndirty: usize,
    bytes: [u64; 2],
    limit: u64,
    /// Directory blocks share the main cache (vmiodir on, FreeBSD's default
    /// since 2000: `None`) or live in a pool of their own size (vmiodir
    /// off).
    dir_pool: Option<DirPool>,
    stats: CacheStats,
    /// The write ordering, called at each event of a buffer's life
    /// (`order::buffers`); it reads and changes the buffers' `deps`.
    order: Ordering,
    /// Why writing stopped: set by the first failed device write or flush,
    /// or by the file system when an operation panicked half-way. Nothing
    /// reaches the device after it (what the ledger says is durable may no
    /// longer be true, and a half-done change must not be completed).
    failed: Option<String>,
}

/// What the write ordering sees of one cached buffer (`order::sync`).
pub(crate) struct BufRef<'a> {
    pub deps: &'a BufDeps,
    pub kind: BlockKind,
    pub dirty: bool,
    /// Bytes of the block.
    pub len: usize,
}

impl BufferCache {
    /// The write ordering's state (for `order::sync`).
    pub(crate) fn order(&self) -> &Ordering {
        &self.order
    }
    pub(crate) fn order_mut(&mut self) -> &mut Ordering {
        &mut self.order
    }

    /// The cached buffer at `addr`, as the write ordering sees it.
    pub(crate) fn buf_ref(&self, addr: Frag) -> Option<BufRef<'_>> {
        self.bufs.get(&addr).map(|b| BufRef {
            deps: &b.deps,
            kind: b.kind,
            dirty: b.dirty,
            len: b.data.len(),
        })
    }

    /// The cached buffers from fragment `from` on, in address order.
    pub(crate) fn bufs_from(&self, from: Frag) -> impl Iterator<Item = (Frag, BufRef<'_>)> {
        self.bufs.range(from..).map(|(&a, b)| {
            (
                a,
                BufRef {
                    deps: &b.deps,
                    kind: b.kind,
                    dirty: b.dirty,
                    len: b.data.len(),
                },
            )
        })
    }

    /// Makes the buffer of `len` bytes at `addr` present (read on a miss),
    /// of `kind`, and dirty: a change is about to be made to it.
    pub(crate) fn prepare_change(&mut self, addr: Frag, len: usize, kind: BlockKind) -> Result<()> {
        self.ensure(addr, len, kind)?;
        self.set_kind(addr, kind);
        let b = self.bufs.get_mut(&addr).expect("buffer just ensured");
        if !b.dirty {
            self.ndirty += 1;
        }
        b.dirty = true;
        Ok(())
    }

    /// The bytes and ordering state of the buffer at `addr` (present), and
    /// the cache's ordering: what a change being recorded needs at once.
    pub(crate) fn change_parts(&mut self, addr: Frag) -> (&mut [u8], &mut BufDeps, &mut Ordering) {
        let b = self.bufs.get_mut(&addr).expect("buffer present");
        (&mut b.data[..], &mut b.deps, &mut self.order)
    }

    /// Drops the buffer at `addr` without writing it and without telling
    /// the write ordering (which has settled its changes another way).
    pub(crate) fn forget_unwritten(&mut self, addr: Frag) {
        self.remove_buf(addr);
    }

    /// The cache's byte limit.
    pub(crate) fn limit(&self) -> u64 {
        self.limit
    }

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
            order: Ordering::default(),
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

    /// vmiodir off: directory blocks get a pool of `bytes`, shared with
    /// the other buffers in use or their own ([`DirSpace`]); `None`:
    /// vmiodir on.
    pub fn set_dir_pool(&mut self, bytes: Option<u64>, space: DirSpace) {
        self.dir_pool = bytes.map(|b| {
            let bytes = b.max(64 << 10);
            let passers = match space {
                DirSpace::Shared { buffers } => {
                    Some(bufspace::Passers::new(bytes, buffers.max(16)))
                }
                DirSpace::Own => None,
            };
            DirPool { bytes, passers }
        });
    }

    /// Directory blocks share their pool with the other buffers in use.
    fn shared_space(&self) -> bool {
        self.dir_pool.as_ref().is_some_and(|d| d.passers.is_some())
    }

    /// The other buffers that passed through a shared directory pool.
    fn passers(&mut self) -> Option<&mut bufspace::Passers> {
        self.dir_pool.as_mut().and_then(|d| d.passers.as_mut())
    }

    /// Buffers other than directory blocks, `bufs` of them of `bytes`
    /// bytes in all, known as `key`, pass through the shared pool now.
    fn pass(&mut self, key: Frag, bytes: u64, bufs: u64) {
        let clock = self.clock;
        if let Some(p) = self.passers() {
            p.pass(key, bytes, bufs, clock);
        }
    }

    pub fn device(&self) -> &dyn BlockDevice {
        &*self.dev
    }
    /// The device, to read from without holding the cache (file data the
    /// cache does not hold; see `Fs::read`).
    pub fn device_handle(&self) -> std::sync::Arc<dyn BlockDevice> {
        self.dev.clone()
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
        s.dir_pool_bytes = self
            .dir_pool
            .as_ref()
            .map(|_| self.bytes[Pool::Dir as usize]);
        s.dir_pool_limit = self.dir_pool.as_ref().map(|d| d.bytes);
        s.dir_pool_shared_bytes = self
            .dir_pool
            .as_ref()
            .and_then(|d| d.passers.as_ref())
            .map(|p| p.held().0);
        s.warm = self.warm.stats();
        s
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
            Pool::Dir => self.dir_pool.as_ref().map_or(self.limit, |d| d.bytes),
        }
    }

    pub(crate) fn nfrags(&self, len: usize) -> u64 {
        (len as u64).div_ceil(1 << self.fshift)
    }

    /// Marks the buffer at `addr` used now. A buffer used within the last
    /// eighth of its pool's turnover is left where it stands in the LRU
    /// order (already among the youngest): two tree updates saved on most
    /// hits, at the price of an order that is exact only to that eighth.
    fn touch(&mut self, addr: Frag) {
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
        };
        if p == Pool::Main {
            if let Some(passers) = self.dir_pool.as_mut().and_then(|d| d.passers.as_mut()) {
                passers.pass(addr, b.data.capacity() as u64, 1, c);
            }
        }
        let lru = &mut self.lru[p as usize];
        if c - b.stamp <= (lru.len() as u64 / 8).max(1) {
            return;
        }
        lru.remove(&b.stamp);
        b.stamp = c;
        lru.insert(c, addr);
    }

    /// Changes the kind of a cached buffer, moving it between pools.
    fn set_kind(&mut self, addr: Frag, kind: BlockKind) {
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
            if to == Pool::Dir as usize {
                if let Some(p) = self.dir_pool.as_mut().and_then(|d| d.passers.as_mut()) {
                    p.forget(addr);
                }
            }
            let len = b.data.capacity() as u64;
            self.lru[from].remove(&b.stamp);
            self.lru[to].insert(b.stamp, addr);
            self.bytes[from] -= len;
            self.bytes[to] += len;
        }
    }

    /// Writes back and drops every buffer overlapping `[addr, addr+n)` except
    /// one starting exactly at `addr` with length `len` (which is kept).
    fn clear_overlaps(&mut self, addr: Frag, n: u64, keep_len: Option<usize>) -> Result<()> {
        let mut victims = Vec::new();
        if let Some((&a, b)) = self.bufs.range(..addr).next_back() {
            if a.offset(self.nfrags(b.data.len())) > addr {
                victims.push(a);
            }
        }
        for (&a, b) in self.bufs.range(addr..addr.saturating_offset(n)) {
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
    fn evict(&mut self, addr: Frag, write: bool) -> Result<()> {
        if write {
            self.write_buf(addr)?;
            if self.bufs.get(&addr).is_some_and(|b| b.dirty) {
                self.force_buf(addr)?;
            }
        }
        if let Some(b) = self.remove_buf(addr) {
            if !write {
                self.order.abandon(&b.deps);
            }
        }
        Ok(())
    }

    /// Takes a buffer out of the cache and its pool's accounting.
    fn remove_buf(&mut self, addr: Frag) -> Option<Buf> {
        let b = self.bufs.remove(&addr)?;
        if b.dirty {
            self.ndirty -= 1;
        }
        let p = self.pool(b.kind) as usize;
        self.lru[p].remove(&b.stamp);
        self.bytes[p] -= b.data.capacity() as u64;
        if p == Pool::Main as usize {
            if let Some(p) = self.passers() {
                p.forget(addr);
            }
        }
        Some(b)
    }

    fn make_room(&mut self, need: u64, p: Pool) -> Result<()> {
        let pi = p as usize;
        let shared = p == Pool::Dir && self.shared_space();
        loop {
            let oldest = self.lru[pi].iter().next().map(|(&s, &a)| (s, a));
            if shared {
                // The shared pool: directory blocks and the buffers that
                // passed after them, the oldest of either going first.
                let bufs = self.lru[pi].len() as u64 + u64::from(need > 0);
                let held = self.bytes[pi] + need;
                let passers = self.passers().expect("a shared pool has passers");
                let fits = passers.fits_with(held, bufs);
                let dir_first = match (oldest, passers.oldest()) {
                    (Some((s, _)), _) if s < passers.fell_out() => true,
                    _ if fits => break,
                    (Some((s, _)), Some(o)) => s < o,
                    (Some(_), None) => true,
                    (None, Some(_)) => false,
                    (None, None) => break,
                };
                if !dir_first {
                    passers.drop_oldest();
                    continue;
                }
            } else if self.bytes[pi] + need <= self.pool_limit(p) {
                break;
            }
            let Some((_, addr)) = oldest else {
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
        let mut old: Vec<Frag> = lru
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

    fn insert(&mut self, addr: Frag, data: Vec<u8>, kind: BlockKind, dirty: bool) -> Result<()> {
        let p = self.pool(kind);
        self.make_room(data.capacity() as u64, p)?;
        self.clock += 1;
        let len = data.capacity() as u64;
        self.bytes[p as usize] += len;
        self.lru[p as usize].insert(self.clock, addr);
        if p == Pool::Main {
            self.pass(addr, len, 1);
        }
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

    fn ensure(&mut self, addr: Frag, len: usize, kind: BlockKind) -> Result<()> {
        if kind == BlockKind::Dir && self.shared_space() {
            // What passed since the block was last used may have pushed
            // it out of the shared pool.
            self.make_room(0, Pool::Dir)?;
        }
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
        let off = addr.byte_offset(self.fshift)?;
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
    pub fn read(&mut self, addr: Frag, len: usize, kind: BlockKind) -> Result<&[u8]> {
        self.ensure(addr, len, kind)?;
        Ok(&self
            .bufs
            .get(&addr)
            .map(|b| &b.data)
            .expect("buffer just ensured")[..])
    }

    /// The bytes of the buffer at fragment `addr`, if the cache holds it
    /// (no read, no counters, no LRU change).
    pub fn peek(&self, addr: Frag) -> Option<&[u8]> {
        self.bufs.get(&addr).map(|b| &b.data[..])
    }

    /// Asks the device to start reading `len` bytes at fragment `addr`
    /// unless the cache holds that buffer (see
    /// [`BlockDevice::prefetch`](crate::dev::BlockDevice::prefetch)).
    /// Whether the device below takes prefetch hints.
    pub fn prefetches(&self) -> bool {
        self.dev.prefetches()
    }

    pub fn prefetch(&self, addr: Frag, len: usize) {
        if !self.bufs.contains_key(&addr) {
            if let Ok(off) = addr.byte_offset(self.fshift) {
                self.dev.prefetch(off, len);
            }
        }
    }

    /// [`prefetch`](Self::prefetch) for a block read alone (a directory
    /// block): just `len` bytes, not a read-ahead window around them.
    pub fn prefetch_single(&self, addr: Frag, len: usize) {
        if !self.bufs.contains_key(&addr) {
            if let Ok(off) = addr.byte_offset(self.fshift) {
                self.dev.prefetch_single(off, len);
            }
        }
    }

    /// The buffer's changes since its last write join its epoch (they may
    /// go to disk with the next write).
    pub(crate) fn join_epoch(&mut self, addr: Frag) -> ChangeId {
        let b = self.bufs.get_mut(&addr).expect("buffer present");
        self.order.dirtied(addr, &mut b.deps)
    }

    /// Like [`read`](Self::read), for changing the bytes; marks the buffer
    /// dirty. The change may reach the disk with the next write of the
    /// buffer: for blocks whose regions hold changes that wait (inodes,
    /// directories, indirect blocks) use [`modify_tracked`](Self::modify_tracked).
    pub fn modify(&mut self, addr: Frag, len: usize, kind: BlockKind) -> Result<&mut [u8]> {
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

    /// The kind of the cached buffer at `addr`.
    pub fn kind(&self, addr: Frag) -> Option<BlockKind> {
        self.bufs.get(&addr).map(|b| b.kind)
    }

    /// A zero-filled dirty buffer for a freshly allocated block, without
    /// reading what the device holds there. Whatever an earlier owner of
    /// the block left waiting is abandoned.
    pub fn create(&mut self, addr: Frag, len: usize, kind: BlockKind) -> Result<&mut [u8]> {
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
            self.order.abandon(&old);
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
        from: Frag,
        from_len: usize,
        to: Frag,
        to_len: usize,
        kind: BlockKind,
    ) -> Result<()> {
        self.read(from, from_len, kind)?;
        let mut deps = BufDeps::default();
        if self.order.tracks() {
            if kind != BlockKind::Data && self.latest(from) != ChangeId::NONE {
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
        self.order.abandon(&moved.deps);
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
            self.order.moved(&deps, to);
            let b = self.bufs.get_mut(&to).expect("buffer just created");
            b.deps.held = deps.held;
        }
        Ok(())
    }

    /// Resizes the buffer at `addr` in place (fragment run grown or shrunk
    /// without moving), keeping its contents and waiting changes.
    pub fn resize(
        &mut self,
        addr: Frag,
        old_len: usize,
        new_len: usize,
        kind: BlockKind,
    ) -> Result<()> {
        self.ensure(addr, old_len, kind)?;
        self.set_kind(addr, kind);
        if new_len < old_len && self.order.tracks() && self.latest(addr) != ChangeId::NONE {
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
        self.order.abandon_ids(&cut);
        self.bytes[p] = self.bytes[p] + new_cap as u64 - cap as u64;
        // Cached copies of the fragments just added are stale.
        let (n_old, n_new) = (self.nfrags(old_len), self.nfrags(new_len));
        if n_new > n_old {
            for a in self.overlapping(addr.offset(n_old), n_new - n_old) {
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
    pub fn discard(&mut self, addr: Frag, nfrags: u64) {
        for a in self.overlapping(addr, nfrags) {
            let _ = self.evict(a, false);
        }
    }

    /// Like [`discard`](Self::discard) for data blocks only: used when a
    /// block is released while a pointer to it may still be on disk (its
    /// unwritten contents are abandoned; metadata blocks stay until the
    /// release is final).
    pub fn discard_data(&mut self, addr: Frag, nfrags: u64) {
        for a in self.overlapping(addr, nfrags) {
            if self.bufs.get(&a).is_some_and(|b| b.kind == BlockKind::Data) {
                let _ = self.evict(a, false);
            }
        }
    }

    pub(crate) fn overlapping(&self, addr: Frag, nfrags: u64) -> Vec<Frag> {
        let mut victims = Vec::new();
        if let Some((&a, b)) = self.bufs.range(..addr).next_back() {
            if a.offset(self.nfrags(b.data.len())) > addr {
                victims.push(a);
            }
        }
        victims.extend(
            self.bufs
                .range(addr..addr.saturating_offset(nfrags))
                .map(|(&a, _)| a),
        );
        victims
    }

    /// Whether any cached buffer overlaps `[addr, addr+nfrags)`: if none,
    /// the device holds those fragments as the file system last wrote them.
    pub fn holds_any(&self, addr: Frag, nfrags: u64) -> bool {
        if let Some((&a, b)) = self.bufs.range(..addr).next_back() {
            if a.offset(self.nfrags(b.data.len())) > addr {
                return true;
            }
        }
        self.bufs
            .range(addr..addr.saturating_offset(nfrags))
            .next()
            .is_some()
    }

    /// Writes one buffer to the device if dirty: the single write path.
    /// The write ordering chooses the image ([`Ordering::initiate`]:
    /// regions whose oldest held change still needs an undurable change go
    /// as they were before it) and hears of the write's completion; the
    /// buffer stays dirty until every held change has gone out. Returns
    /// whether anything was written.
    pub fn write_buf(&mut self, addr: Frag) -> Result<bool> {
        let fshift = self.fshift;
        let Some(b) = self.bufs.get_mut(&addr) else {
            return Ok(false);
        };
        if !b.dirty {
            return Ok(false);
        }
        let formats = self.formats.as_deref();
        let Some(img) = self.order.initiate(&mut b.deps, b.kind, &b.data, formats) else {
            return Ok(false);
        };
        let rolled = !img.rollbacks.is_empty();
        let off = addr.byte_offset(fshift)?;
        if let Some(why) = &self.failed {
            return Err(crate::error::Error::new(
                crate::error::ErrorKind::Io,
                format!("writing stopped after a failure ({why}); unmount and run fsck"),
            ));
        }
        // The image to write: the rolled-back regions swapped in (what
        // they held kept aside), its check-hash; then the buffer as it is.
        // (Swapped in place instead of writing a copy of the whole block:
        // 32 KiB per rolled-back write.)
        let mut kept: Vec<(usize, Vec<u8>)> = Vec::with_capacity(img.rollbacks.len());
        for (at, image) in &img.rollbacks {
            let r = *at..*at + image.len();
            kept.push((*at, b.data[r.clone()].to_vec()));
            b.data[r].copy_from_slice(image);
        }
        let untorn = match formats {
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
        if let (true, Some(f)) = (rolled, formats) {
            f.seal(b.kind, &mut b.data);
        }
        if let Err(e) = w {
            self.failed = Some(format!("device: {}", e.msg));
            return Err(e);
        }
        let still = self.order.complete(&mut b.deps, img);
        if b.dirty && !still {
            self.ndirty -= 1;
        }
        b.dirty = still;
        let st = &mut self.stats.by_kind[b.kind.idx()];
        st.writes += 1;
        st.write_bytes += b.data.len() as u64;
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
        Ok((self.dev.clone(), self.order.unflushed_snapshot()))
    }

    /// The device's answer to a flush begun with
    /// [`unlocked_flush_begin`](Self::unlocked_flush_begin): a failure
    /// stops all writing, as any device error does.
    pub fn unlocked_flush_result(&mut self, r: Result<()>) -> Result<()> {
        self.latched(r)
    }

    pub fn flush(&mut self) -> Result<()> {
        self.healthy()?;
        let r = self.dev.flush();
        self.latched(r)?;
        self.order.flushed();
        Ok(())
    }

    /// Writes every dirty buffer in address order (held regions rolled back).
    pub fn write_all(&mut self) -> Result<()> {
        let dirty: Vec<Frag> = self
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
    pub fn write_matching(&mut self, pred: impl Fn(Frag, BlockKind) -> bool) -> Result<()> {
        let dirty: Vec<Frag> = self
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

    /// Bytes written directly (superblock, summary area), counted by kind.
    /// Kinds the formats want whole go with an untorn write.
    pub fn write_raw(&mut self, byte_off: u64, data: &[u8], kind: BlockKind) -> Result<()> {
        let n = self.nfrags(data.len()).max(1);
        self.clear_overlaps(Frag::holding_byte(byte_off, self.fshift), n, None)?;
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
        self.count_raw_read(byte_off, buf.len(), 1, kind);
        Ok(())
    }

    /// Counts a read of `len` bytes at byte `byte_off`, `bufs` blocks,
    /// made around the cache (by the caller, on
    /// [`device_handle`](Self::device_handle)). In FreeBSD they passed
    /// through the buffer space all the same.
    pub fn count_raw_read(&mut self, byte_off: u64, len: usize, bufs: u64, kind: BlockKind) {
        let st = &mut self.stats.by_kind[kind.idx()];
        st.reads += 1;
        st.read_bytes += len as u64;
        self.clock += 1;
        self.pass(Frag::holding_byte(byte_off, self.fshift), len as u64, bufs);
    }

    /// Drops every clean buffer (a cold cache for measurements), and the
    /// memory made ahead for new buffers.
    pub fn drop_clean(&mut self) {
        self.drain_warm();
        let clean: Vec<Frag> = self
            .bufs
            .iter()
            .filter(|(_, b)| !b.dirty)
            .map(|(&a, _)| a)
            .collect();
        for a in clean {
            self.remove_buf(a);
        }
        if let Some(p) = self.passers() {
            p.clear();
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
            let order: Vec<Frag> = self.lru[p].values().copied().collect();
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

pub mod warm;
