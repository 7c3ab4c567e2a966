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
//!   current operation (eviction happens on insertion).
//! - Counters by block kind count every hit, miss, read and write.
//!
//! Hooks for later layers: writes go through [`BufferCache::write_buf`],
//! the single place a write-ordering policy intercepts (dependencies, undo
//! before write, redo after).
use crate::dev::BlockDevice;
use crate::error::Result;
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
}

impl BlockKind {
    pub const ALL: [BlockKind; 7] = [
        BlockKind::Super,
        BlockKind::Cg,
        BlockKind::Inode,
        BlockKind::Dir,
        BlockKind::Indir,
        BlockKind::Data,
        BlockKind::Summary,
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
        }
    }
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
    pub by_kind: [KindStats; 7],
    pub evictions: u64,
    pub bytes_cached: u64,
    pub limit_bytes: u64,
}

impl CacheStats {
    pub fn kind(&self, k: BlockKind) -> &KindStats {
        &self.by_kind[k.idx()]
    }
}

struct Buf {
    data: Vec<u8>,
    kind: BlockKind,
    dirty: bool,
    stamp: u64,
}

pub struct BufferCache {
    dev: Box<dyn BlockDevice>,
    /// When cylinder-group check-hashes are on: the cg size they cover.
    /// The hash is computed as a cg buffer goes to the device and verified
    /// as one comes from it, never on the hot path in between.
    cg_ckhash: Option<usize>,
    fshift: u32,
    bufs: BTreeMap<u64, Buf>,
    lru: BTreeMap<u64, u64>,
    clock: u64,
    bytes: u64,
    limit: u64,
    stats: CacheStats,
}

impl BufferCache {
    pub fn new(dev: Box<dyn BlockDevice>, fsize: u64, limit_bytes: u64) -> Self {
        BufferCache {
            dev,
            cg_ckhash: None,
            fshift: fsize.trailing_zeros(),
            bufs: BTreeMap::new(),
            lru: BTreeMap::new(),
            clock: 0,
            bytes: 0,
            limit: limit_bytes.max(1 << 20),
            stats: CacheStats::default(),
        }
    }

    /// Turns on cylinder-group check-hashes over the first `cgsize` bytes.
    pub fn set_cg_ckhash(&mut self, cgsize: Option<usize>) {
        self.cg_ckhash = cgsize;
    }

    pub fn device(&self) -> &dyn BlockDevice {
        &*self.dev
    }
    pub fn set_limit(&mut self, limit: u64) {
        self.limit = limit.max(1 << 20);
    }
    pub fn stats(&self) -> CacheStats {
        let mut s = self.stats.clone();
        s.bytes_cached = self.bytes;
        s.limit_bytes = self.limit;
        s
    }

    fn nfrags(&self, len: usize) -> u64 {
        (len as u64).div_ceil(1 << self.fshift)
    }

    fn touch(&mut self, addr: u64) {
        self.clock += 1;
        let c = self.clock;
        if let Some(b) = self.bufs.get_mut(&addr) {
            self.lru.remove(&b.stamp);
            b.stamp = c;
            self.lru.insert(c, addr);
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

    fn evict(&mut self, addr: u64, write: bool) -> Result<()> {
        if write {
            self.write_buf(addr)?;
        }
        if let Some(b) = self.bufs.remove(&addr) {
            self.lru.remove(&b.stamp);
            self.bytes -= b.data.len() as u64;
        }
        Ok(())
    }

    fn make_room(&mut self, need: u64) -> Result<()> {
        while self.bytes + need > self.limit {
            let Some((_, &addr)) = self.lru.iter().next() else {
                break;
            };
            if self.bufs.get(&addr).is_some_and(|b| b.dirty) {
                self.write_behind()?;
            }
            self.stats.evictions += 1;
            self.evict(addr, true)?;
        }
        Ok(())
    }

    /// The least recently used dirty buffer must go: write back every dirty
    /// buffer in the older half of the cache, in address order, as
    /// FreeBSD's buffer daemon flushes and clusters them, instead of one
    /// buffer per eviction between the reads that caused it.
    fn write_behind(&mut self) -> Result<()> {
        let half = self.lru.len().div_ceil(2);
        let mut old: Vec<u64> = self
            .lru
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
        self.make_room(data.len() as u64)?;
        self.clock += 1;
        self.bytes += data.len() as u64;
        self.lru.insert(self.clock, addr);
        self.bufs.insert(
            addr,
            Buf {
                data,
                kind,
                dirty,
                stamp: self.clock,
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
        let mut data = vec![0u8; len];
        let off = addr.checked_mul(1 << self.fshift).ok_or_else(|| {
            crate::error::Error::corrupt(format!("block address {addr} overflows"))
        })?;
        self.dev.read_at(off, &mut data)?;
        if let (BlockKind::Cg, Some(n)) = (kind, self.cg_ckhash) {
            if n <= data.len() {
                let stored = u32::from_le_bytes(
                    data[ufs_format::cg::CG_CKHASH_OFF..ufs_format::cg::CG_CKHASH_OFF + 4]
                        .try_into()
                        .unwrap_or([0; 4]),
                );
                let computed = ufs_format::ckhash::ckhash_with_zeroed_field(
                    &data[..n],
                    ufs_format::cg::CG_CKHASH_OFF,
                );
                if stored != computed {
                    return Err(crate::error::Error::corrupt(format!(
                        "cylinder group at fragment {addr}: check-hash mismatch (stored {stored:#x}, computed {computed:#x})"
                    )));
                }
            }
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

    /// Like [`read`](Self::read), for changing the bytes; marks the buffer dirty.
    pub fn modify(&mut self, addr: u64, len: usize, kind: BlockKind) -> Result<&mut [u8]> {
        self.ensure(addr, len, kind)?;
        let b = self.bufs.get_mut(&addr).expect("buffer just ensured");
        b.dirty = true;
        b.kind = kind;
        Ok(&mut b.data[..])
    }

    /// A zero-filled dirty buffer for a freshly allocated block, without
    /// reading what the device holds there.
    pub fn create(&mut self, addr: u64, len: usize, kind: BlockKind) -> Result<&mut [u8]> {
        let n = self.nfrags(len);
        self.clear_overlaps(addr, n, Some(len))?;
        if let Some(b) = self.bufs.get_mut(&addr) {
            b.data.fill(0);
            b.dirty = true;
            b.kind = kind;
        } else {
            self.insert(addr, vec![0u8; len], kind, true)?;
        }
        self.touch(addr);
        Ok(&mut self.bufs.get_mut(&addr).expect("buffer just created").data[..])
    }

    /// Moves a cached buffer's contents to a new, larger location (a
    /// fragment run that was reallocated elsewhere), zero-extending it.
    pub fn relocate(
        &mut self,
        from: u64,
        from_len: usize,
        to: u64,
        to_len: usize,
        kind: BlockKind,
    ) -> Result<()> {
        let old = self.read(from, from_len, kind)?.to_vec();
        self.discard(from, self.nfrags(from_len));
        let b = self.create(to, to_len, kind)?;
        b[..old.len()].copy_from_slice(&old);
        Ok(())
    }

    /// Resizes the buffer at `addr` in place (fragment run grown or shrunk
    /// without moving), keeping its contents.
    pub fn resize(
        &mut self,
        addr: u64,
        old_len: usize,
        new_len: usize,
        kind: BlockKind,
    ) -> Result<()> {
        let mut old = self.read(addr, old_len, kind)?.to_vec();
        self.discard(addr, self.nfrags(old_len));
        old.resize(new_len, 0);
        let b = self.create(addr, new_len, kind)?;
        b.copy_from_slice(&old);
        Ok(())
    }

    /// Drops buffers overlapping `[addr, addr+nfrags)` without writing them:
    /// the blocks are being freed and their contents no longer matter.
    pub fn discard(&mut self, addr: u64, nfrags: u64) {
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
        for a in victims {
            let _ = self.evict(a, false);
        }
    }

    /// Writes one buffer to the device if dirty. The single write path.
    pub fn write_buf(&mut self, addr: u64) -> Result<()> {
        let fshift = self.fshift;
        let Some(b) = self.bufs.get_mut(&addr) else {
            return Ok(());
        };
        if !b.dirty {
            return Ok(());
        }
        if let (BlockKind::Cg, Some(n)) = (b.kind, self.cg_ckhash) {
            if n <= b.data.len() {
                let h = ufs_format::ckhash::ckhash_with_zeroed_field(
                    &b.data[..n],
                    ufs_format::cg::CG_CKHASH_OFF,
                );
                b.data[ufs_format::cg::CG_CKHASH_OFF..ufs_format::cg::CG_CKHASH_OFF + 4]
                    .copy_from_slice(&h.to_le_bytes());
            }
        }
        let off = addr.checked_mul(1 << fshift).ok_or_else(|| {
            crate::error::Error::corrupt(format!("block address {addr} overflows"))
        })?;
        self.dev.write_at(off, &b.data)?;
        b.dirty = false;
        let st = &mut self.stats.by_kind[b.kind.idx()];
        st.writes += 1;
        st.write_bytes += b.data.len() as u64;
        Ok(())
    }

    /// Writes every dirty buffer in address order.
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

    /// Writes everything and asks the device to make it durable.
    pub fn sync(&mut self) -> Result<()> {
        self.write_all()?;
        self.dev.flush()
    }

    /// Bytes written directly (superblock, summary area), counted by kind.
    pub fn write_raw(&mut self, byte_off: u64, data: &[u8], kind: BlockKind) -> Result<()> {
        let n = self.nfrags(data.len()).max(1);
        self.clear_overlaps(byte_off >> self.fshift, n, None)?;
        self.dev.write_at(byte_off, data)?;
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

    /// Drops every clean buffer (a cold cache for measurements).
    pub fn drop_clean(&mut self) {
        let clean: Vec<u64> = self
            .bufs
            .iter()
            .filter(|(_, b)| !b.dirty)
            .map(|(&a, _)| a)
            .collect();
        for a in clean {
            let _ = self.evict(a, false);
        }
    }

    pub fn dirty_count(&self) -> usize {
        self.bufs.values().filter(|b| b.dirty).count()
    }
}
