//! What tools, tests and benchmarks may see and do to a mounted engine
//! besides the POSIX operations of [`crate::ops`]:
//! - read-only views: the geometry, the summary counters, a cylinder group
//!   or an inode as the engine holds them, the block behind a file offset,
//!   dirhash's and inode placement's counters;
//! - the dirhash tunables an experiment changes between its phases, and
//!   dirhash's low-memory events;
//! - [`BufferDaemon`]: the engine's own write-back actions (write one
//!   block, evict one, flush), so a test can reproduce the order of writes
//!   a mount produced.
//!
//! Invariants: nothing here hands out the core or a reference into it;
//! every view is a copy taken under the engine lock; no call here changes
//! what the file system holds (the buffer daemon's actions only decide
//! when blocks reach the device, within the write-ordering rules).
use crate::dir::dirhash::{DirhashConfig, DirhashStats};
use crate::error::Result;
use crate::ops::Fs;
use crate::{Frag, Ino};
use std::time::Instant;
use ufs_format::cg::Cg;
use ufs_format::dinode::Dinode;
use ufs_format::sb::{Csum, CsumTotal};
use ufs_format::Geometry;

/// dirhash's state in one look.
#[derive(Debug, Clone)]
pub struct DirhashView {
    pub config: DirhashConfig,
    /// Counters, with the memory figures of this moment.
    pub stats: DirhashStats,
    /// Bytes of index memory in use.
    pub mem: u64,
    /// Directories with an index.
    pub indexes: usize,
    /// The last disagreement the self-check found (`dirhash_check=on`).
    pub last_check_failure: Option<String>,
}

impl Fs {
    /// The file system's geometry (fixed while mounted).
    pub fn geometry(&self) -> Geometry {
        self.lock().g
    }

    /// The summary counters: the superblock's totals and each group's.
    pub fn summary(&self) -> (CsumTotal, Vec<Csum>) {
        let c = self.lock();
        (c.sb.fs_cstotal(), c.cs.clone())
    }

    /// A copy of cylinder group `cgx` as the engine holds it now.
    pub fn cylinder_group(&self, cgx: u64) -> Result<Cg> {
        self.lock().read_cg(cgx)
    }

    /// A copy of inode `ino` as the engine holds it now.
    pub fn inode(&self, ino: Ino) -> Result<Dinode> {
        self.lock().read_inode(ino)
    }

    /// The fragment address of logical block `lbn` of inode `ino`
    /// ([`Frag::NONE`]: a hole).
    pub fn block_of(&self, ino: Ino, lbn: u64) -> Result<Frag> {
        let mut c = self.lock();
        let di = c.read_inode(ino)?;
        c.bmap(ino, &di, lbn)
    }

    /// dirhash's configuration, counters and memory.
    pub fn dirhash(&self) -> DirhashView {
        let c = self.lock();
        DirhashView {
            config: c.dirhash.cfg.clone(),
            stats: c.dirhash.snapshot(),
            mem: c.dirhash.mem(),
            indexes: c.dirhash.hashes(),
            last_check_failure: c.dirhash.last_check_failure.clone(),
        }
    }

    /// dirhash's counters as they run (what `DirhashStats::since`
    /// compares), without the memory figures of [`Fs::dirhash`].
    pub fn dirhash_counters(&self) -> DirhashStats {
        self.lock().dirhash.stats.clone()
    }

    /// The index of directory `ino`, if it has one: (memory, directory
    /// bytes covered, entries).
    pub fn dirhash_index(&self, ino: Ino) -> Option<(u64, u64, u32)> {
        self.lock().dirhash.describe(ino)
    }

    /// Changes dirhash's tunables between phases of an experiment;
    /// indexes that no longer fit the rules are dropped as they are next
    /// used, as after a sysctl change in FreeBSD.
    pub fn tune_dirhash(&self, f: impl FnOnce(&mut DirhashConfig)) {
        f(&mut self.lock().dirhash.cfg);
    }

    /// Drops every dirhash index and every linear-scan hint (`i_diroff`):
    /// the next lookups start from nothing, as after a remount.
    pub fn drop_directory_indexes(&self) {
        let mut c = self.lock();
        c.dirhash.clear();
        c.dir_hints.clear();
    }

    /// A low-memory event at `now` (FreeBSD's handler: indexes idle longer
    /// than the reclaim age, then more until a tenth is freed). Returns the
    /// bytes freed.
    pub fn dirhash_lowmem_at(&self, now: Instant) -> u64 {
        self.lock().dirhash.lowmem(now)
    }

    /// A low-memory event without the age rule (a tenth of dirhash memory
    /// from the cold end; for modeled clocks, on which idle ages mean
    /// nothing). Returns the bytes freed.
    pub fn dirhash_lowmem_share(&self) -> u64 {
        self.lock().dirhash.lowmem_share()
    }

    /// Checks directory `ino`'s index against its blocks (`ufskit stats
    /// --verify`); false when it has no index.
    pub fn verify_dirhash(&self, ino: Ino) -> Result<bool> {
        let mut c = self.lock();
        let di = c.read_inode(ino)?;
        c.dir_verify_index(ino, &di)
    }

    /// Marks the index of directory `ino` as used at `now`, as a lookup
    /// then would: low-memory events judge idleness from it (tests of the
    /// reclaim age run the clock forward this way).
    pub fn dirhash_touch_at(&self, ino: Ino, now: Instant) -> Result<()> {
        let mut c = self.lock();
        let di = c.read_inode(ino)?;
        if let crate::dir::dirhash::Take::Index(ix) =
            c.dirhash.take(ino, di.di_gen(), di.di_size(), now)
        {
            c.dirhash.put(ino, ix);
        }
        Ok(())
    }

    /// Counters of inode placement in large directories.
    pub fn placement_stats(&self) -> crate::alloc::placement::PlacementStats {
        self.lock().placement.stats
    }

    /// The engine's write-back actions, for tests that reproduce an order
    /// of writes.
    pub fn buffer_daemon(&self) -> BufferDaemon<'_> {
        BufferDaemon { fs: self }
    }
}

/// What the engine's buffer daemon and evictions do, one step at a time.
pub struct BufferDaemon<'a> {
    fs: &'a Fs,
}

impl BufferDaemon<'_> {
    /// The block holding inode `ino` (to name it in [`Self::write`] or
    /// [`Self::evict`]).
    pub fn inode_block(&self, ino: Ino) -> Frag {
        self.fs.lock().inode_block(ino)
    }

    /// The block of cylinder group `c`.
    pub fn cg_block(&self, c: u64) -> Frag {
        self.fs.lock().cg_block(c)
    }

    /// Writes the cached block at fragment `addr` as the buffer daemon
    /// would: regions whose changes wait for others go out rolled back.
    /// Returns whether the whole block could go as it is.
    pub fn write(&self, addr: Frag) -> Result<bool> {
        self.fs.lock().cache.write_buf(addr)
    }

    /// Flushes the device: everything written so far becomes durable.
    pub fn flush(&self) -> Result<()> {
        self.fs.lock().cache.flush()
    }

    /// What the eviction of the block at `addr` does: its newest change is
    /// made durable, with everything that change needs, written (and
    /// flushed) first. Returns that change (0: the block had none).
    pub fn evict(&self, addr: Frag) -> Result<crate::order::ChangeId> {
        let mut c = self.fs.lock();
        let newest = c.cache.latest(addr);
        c.cache.force_ids(&[newest])?;
        Ok(newest)
    }

    /// Whether change `id` is durable (written and flushed).
    pub fn is_durable(&self, id: crate::order::ChangeId) -> bool {
        self.fs.lock().cache.is_durable(id)
    }

    /// Writes every dirty block, each as it may go.
    pub fn write_all(&self) -> Result<()> {
        self.fs.lock().cache.write_all()
    }
}
