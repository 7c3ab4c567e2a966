//! The core of a mounted file system: superblock, cylinder-group summary,
//! buffer cache and inode I/O, owned by one [`FsCore`] behind the lock in
//! [`crate::ops::Fs`].
//!
//! Invariants:
//! - `sb`, `g` and `cs` describe the same file system; `g` was derived from a
//!   validated superblock and is never changed while mounted.
//! - The three copies of every counter (cg header, `cs[cg]`, `fs_cstotal`)
//!   are updated together by the allocator, so they agree at every sync.
//! - Inodes are read from and written to their inode block in the cache;
//!   there is no second copy to keep coherent. Check-hashes are verified on
//!   read and recomputed on write when the superblock enables them.
//! - A read-only core never writes to the device.
//! - Every changing operation runs as one [`Op`]: `op_log` is Some exactly
//!   while an `Op` holds the lock, empty when it begins and consumed when
//!   it ends, so nothing an operation records reaches the next one.
//! - Cylinder groups and the superblock reach the device whole
//!   (`write_untorn`): a kill never leaves one half written.
use crate::cache::{BlockKind, BufferCache};
use crate::dev::BlockDevice;
use crate::error::{Error, ErrorKind, Result};
use crate::frag::BlockPointers;
use crate::order::{ChangeId, Deferred, Freed, WriteMode};
use crate::{Frag, Ino};
use foldhash::HashMap;
use rand::{Rng, SeedableRng};
use ufs_format::bytes::{to_index, to_signed};
use ufs_format::sb::{Csum, CsumTotal};
use ufs_format::*;

/// How many cylinder groups [`FsCore::keep_cg`] keeps parsed.
const CG_KEPT: usize = 4;

/// Directory placement policy (`-o dirpref=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum DirPref {
    /// FreeBSD's `ffs_dirpref` since 2001 (Orlov).
    Orlov,
    /// 4.4BSD: the group with the fewest directories among those with at
    /// least the average number of free inodes.
    Traditional,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct MountOptions {
    pub read_only: bool,
    /// Mount even if the file system is not clean.
    pub force: bool,
    pub dirpref: DirPref,
    /// Buffer cache limit in bytes.
    pub cache_bytes: u64,
    /// Seed for the allocator's random choices (deterministic runs).
    pub seed: Option<u64>,
    /// Bytes read ahead on a cache miss of a small block (0: none).
    pub readahead: u64,
    /// Nanoseconds a request that finds the engine lock held polls for it
    /// before it sleeps (`-o lockspin`, `engine_lock`).
    pub lock_spin_ns: u64,
    /// Directory indexing (dirhash) settings.
    pub dirhash: crate::dir::dirhash::DirhashConfig,
    /// Inode order in large directories (`-o inodeorder=`).
    pub inode_order: crate::alloc::placement::InodeOrder,
    /// Directory size in bytes from which `inode_order` applies.
    pub inode_order_min: u64,
    /// Orlov's limit on directories created in a row in one group
    /// (`fs_contigdirs`); off only for experiments (`-o contigdirs=off`).
    pub contigdirs: bool,
    /// How metadata writes are ordered (`-o normal|sync|async|softdep`);
    /// None: soft updates when the superblock's flag is set, else normal.
    pub write_mode: Option<crate::order::WriteMode>,
    /// What an ordered write waits for (`-o barrier=flush|write`); None:
    /// the mode's own ([`Barrier::default_for`](crate::order::Barrier::default_for)).
    pub barrier: Option<crate::order::Barrier>,
    /// Directory blocks in the main buffer cache (on) or in FreeBSD 4.5's
    /// buffer space, shared with every other block read or written (off)
    /// (`-o vmiodir=on|off`; [`dir_pool_bytes`]).
    pub vmiodir: bool,
    /// When a read updates a file's access time (`-o relatime`, the
    /// default, `strictatime`, `noatime`).
    pub atime: Atime,
}

/// When reading a file updates its access time; Linux's mount options and
/// their rules (`fs/inode.c`, `relatime_need_update`). Directories'
/// access times are not updated by listing them (what `nodiratime` asks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Atime {
    /// When the access time is not after the modification or change time,
    /// or is a day old or more.
    Relatime,
    /// At every read.
    Strict,
    /// Never.
    Never,
}

impl Atime {
    /// Whether a read now (`now`, seconds) updates an access time `at`
    /// of a file last modified at `mt` and changed at `ct`
    /// ((seconds, nanoseconds) each).
    pub fn needs_update(self, at: (i64, i32), mt: (i64, i32), ct: (i64, i32), now: i64) -> bool {
        match self {
            Atime::Never => false,
            Atime::Strict => true,
            Atime::Relatime => at <= mt || at <= ct || now - at.0 >= 24 * 3600,
        }
    }
}

/// The buffer space (`hibufspace`) FreeBSD 4.x gives a machine with
/// `memory_bytes` of memory. `nbuf` as i386's `machdep.c` sizes it (50
/// buffers, then enough BKVASIZE (16 KiB) buffers to cover a quarter of
/// the first 64 MB, then two for every 80 pages beyond), `maxbufspace =
/// nbuf * BKVASIZE`, and `hibufspace` the larger of three quarters of it
/// and it less ten MAXBSIZE (64 KiB) buffers (`vfs_bio.c`, `bufinit`).
/// A 256 MB machine, the paper's: 2,302 buffers, 35.3 MiB.
pub fn freebsd4_hibufspace(memory_bytes: u64) -> u64 {
    const BKVASIZE: u64 = 16384;
    const MAXBSIZE: u64 = 65536;
    let maxbufspace = freebsd4_nbuf(memory_bytes) * BKVASIZE;
    (3 * maxbufspace / 4).max(maxbufspace.saturating_sub(MAXBSIZE * 10))
}

/// The number of buffers (`nbuf`) FreeBSD 4.x gives a machine with
/// `memory_bytes` of memory (i386 `machdep.c`, above).
pub fn freebsd4_nbuf(memory_bytes: u64) -> u64 {
    const PAGE: u64 = 4096;
    const BKVASIZE: u64 = 16384;
    let physmem = memory_bytes / PAGE;
    let factor = 4 * BKVASIZE / PAGE;
    let mut nbuf = 50;
    if physmem > 1024 {
        nbuf += ((physmem - 1024) / factor).min(16384 / factor);
    }
    if physmem > 16384 {
        nbuf += (physmem - 16384) * 2 / (factor * 5);
    }
    nbuf
}

/// The room directory blocks have with vmiodir off, as FreeBSD 4.5 gave
/// it (seed 004, "vmiodir"; `sys/kern/vfs_bio.c`, `allocbuf`): a
/// directory's buffer is not backed by the VM's pages, so its contents
/// live only as long as the buffer stays in the buffer space
/// (`hibufspace`), which is far smaller than the memory the VM caches
/// file pages in. A small directory's first buffer (half a page or less)
/// was malloc'd while the malloc'd total stayed under a twentieth of the
/// buffer space (`maxbufmallocspace`), and page-backed once it did, or
/// once it grew: the twentieth saved memory, it did not bound how many
/// directories stayed cached. Every other buffer in use passes through
/// the same space, and a directory block goes when more recent buffers
/// fill it (`crate::cache::DirSpace::Shared`). The machine modeled has
/// four times the cache in memory (the paper's: a 64 MiB cache for its
/// 256 MB); blocks
/// are charged their size (the page a page-backed small directory took
/// is not modeled). At least 64 KiB.
pub fn dir_pool_bytes(cache_bytes: u64) -> u64 {
    freebsd4_hibufspace(cache_bytes.saturating_mul(4)).max(64 << 10)
}

/// The buffers of that space (`nbuf`), for the same machine: with 8 KiB
/// file blocks they bound it before its bytes do.
pub fn dir_pool_buffers(cache_bytes: u64) -> u64 {
    freebsd4_nbuf(cache_bytes.saturating_mul(4))
}

impl Default for MountOptions {
    fn default() -> Self {
        MountOptions {
            read_only: false,
            force: false,
            dirpref: DirPref::Orlov,
            cache_bytes: 64 << 20,
            seed: None,
            readahead: 128 << 10,
            lock_spin_ns: 10_000,
            dirhash: crate::dir::dirhash::DirhashConfig {
                maxmem: crate::dir::dirhash::DirhashConfig::growing_maxmem(64 << 20),
                ..Default::default()
            },
            inode_order: crate::alloc::placement::InodeOrder::Offset,
            inode_order_min: 32 << 10,
            contigdirs: true,
            write_mode: None,
            barrier: None,
            vmiodir: true,
            atime: Atime::Relatime,
        }
    }
}

pub struct FsCore {
    pub(crate) sb: Superblock,
    pub(crate) g: Geometry,
    pub(crate) cs: Vec<Csum>,
    pub(crate) cache: BufferCache,
    pub(crate) opts: MountOptions,
    /// `fs_contigdirs`: directories allocated in a row per group (memory only).
    pub(crate) contigdirs: Vec<u8>,
    /// Changes stored per group (memory only): a copy read when the count
    /// was what it is now holds what the block holds.
    pub(crate) cg_changes: Vec<u64>,
    /// The first damage an operation met during this mount (a `Corrupt`
    /// error returned to a caller): the unmount then leaves the file
    /// system marked for fsck (FS_NEEDSFSCK, not clean), whatever else it
    /// writes. Memory only.
    pub(crate) damage: Option<String>,
    /// The last groups stored, kept parsed (see [`FsCore::read_cg`]).
    pub(crate) cg_kept: Vec<(u64, Cg)>,
    pub(crate) read_only: bool,
    /// The device was opened read-only (`-o ro`): no remount can write.
    pub(crate) opened_read_only: bool,
    pub(crate) sb_dirty: bool,
    pub(crate) rng: rand::rngs::StdRng,
    /// Kernel lookup references per inode (FUSE); an unlinked inode is freed
    /// only when its count drops to zero.
    pub(crate) lookups: HashMap<Ino, u64>,
    /// Inodes whose link count reached zero while still referenced.
    pub(crate) orphans: std::collections::BTreeSet<Ino>,
    /// Whether the file system was clean when opened.
    pub(crate) was_clean: bool,
    /// The superblock says soft updates (`FS_DOSOFTDEP`) but this mount
    /// writes in another mode: the flag is off on disk while mounted (fsck
    /// trusts the maps of a soft-updates file system, which the other
    /// modes do not keep in order) and comes back at a clean unmount.
    pub(crate) softdep_flag_lent: bool,
    /// The superblock says journaled soft updates (`FS_SUJ`); this mount
    /// writes no journal, so the flag is off on disk while mounted
    /// read-write: a crash then leaves a file system FreeBSD's fsck checks
    /// in full, never one whose stale journal it would replay over our
    /// changes. It comes back at a clean unmount (FreeBSD starts a new
    /// journal at its next mount).
    pub(crate) suj_flag_lent: bool,
    /// Directory indexes (dirhash) and their memory budget.
    pub(crate) dirhash: crate::dir::dirhash::Dirhash,
    /// Per directory, the chunk where the last linear lookup succeeded
    /// (FreeBSD's `i_diroff`); only a hint for where to start scanning.
    pub(crate) dir_hints: HashMap<Ino, u64>,
    /// Per file being read in order, where its next read would start and
    /// how far ahead the device was asked to read (memory only; see
    /// `FsCore::read_ahead`).
    pub(crate) seq_reads: HashMap<Ino, crate::inode::SeqRead>,
    /// How many times blocks went back to the free maps. A read that
    /// fetched file blocks from the device without the engine lock checks
    /// this did not move meanwhile: a block still the file's when the read
    /// began and not freed since cannot hold another file's data.
    pub(crate) block_frees: u64,
    /// Inode ranges of large directories (memory only).
    pub(crate) placement: crate::alloc::placement::Placement,
    /// Per-inode dependencies, releases that wait, and the rest of the
    /// write ordering's state between operations.
    pub(crate) order: crate::order::OrderState,
    /// The record of the operation in progress, while an [`Op`] holds
    /// the lock (None between operations).
    pub(crate) op_log: Option<OpLog>,
    /// The doorbell to the background syncer (`order::cleanup`).
    pub(crate) syncer_bell: std::sync::Arc<crate::order::cleanup::SyncerBell>,
    /// The operation ending now is to wait for a syncer round once it has
    /// let the lock go, at most this long (the state is past twice its
    /// bound, or a placed inode waits for releases).
    pub(crate) writer_waits: Option<(std::time::Duration, crate::order::cleanup::Ticket)>,
}

/// What one changing operation records as it goes, for its end: the
/// directory changes it made (normal mode writes them when it ends).
#[derive(Debug, Default)]
pub struct OpLog {
    pub dir_changes: Vec<ChangeId>,
    /// A change FreeBSD leaves for the inode's next write (an access
    /// time): not written at the end even in sync mode.
    pub lazy: bool,
}

/// One changing operation: the engine's lock, held from the operation's
/// first change to its end, and the operation's record. Created by
/// [`Op::begin`], finished by [`Op::end`]; one dropped without `end` (an
/// early return that skipped it, or a panic) is ended by its drop, and a
/// panic also latches the file system read-only at the next lock. Nothing
/// an operation records outlives it: `begin` starts an empty record, `end`
/// consumes it.
pub(crate) struct Op<'a> {
    core: crate::engine_lock::EngineGuard<'a, FsCore>,
    ended: bool,
}

impl<'a> Op<'a> {
    pub(crate) fn begin(mut core: crate::engine_lock::EngineGuard<'a, FsCore>) -> Op<'a> {
        debug_assert!(core.op_log.is_none(), "an operation began inside another");
        core.op_log = Some(OpLog::default());
        Op { core, ended: false }
    }

    /// An operation whose change FreeBSD writes lazily (an access time,
    /// `IN_ACCESS`): its end writes nothing in sync mode.
    pub(crate) fn begin_lazy(core: crate::engine_lock::EngineGuard<'a, FsCore>) -> Op<'a> {
        let mut op = Op::begin(core);
        if let Some(log) = op.core.op_log.as_mut() {
            log.lazy = true;
        }
        op
    }

    /// Ends the operation (see [`FsCore::end_op`]); a writer that must
    /// wait for the syncer waits after letting the lock go.
    pub(crate) fn end(mut self) -> Result<()> {
        self.ended = true;
        let log = self.core.op_log.take().unwrap_or_default();
        let r = self.core.end_op(log);
        let wait = self
            .core
            .writer_waits
            .take()
            .map(|w| (w, self.core.syncer_bell.clone()));
        drop(self);
        if let Some(((max, ticket), bell)) = wait {
            bell.wait_for_round(ticket, max);
        }
        r
    }
}

impl Drop for Op<'_> {
    fn drop(&mut self) {
        if !self.ended && !std::thread::panicking() {
            let log = self.core.op_log.take().unwrap_or_default();
            if let Err(e) = self.core.end_op(log) {
                self.core.cache.fail(format!("ending an operation: {e}"));
            }
        } else if !self.ended {
            self.core.op_log = None;
        }
    }
}

impl std::ops::Deref for Op<'_> {
    type Target = FsCore;
    fn deref(&self) -> &FsCore {
        &self.core
    }
}

impl std::ops::DerefMut for Op<'_> {
    fn deref_mut(&mut self) -> &mut FsCore {
        &mut self.core
    }
}

/// What UFS2 asks of the blocks the cache moves (the cache's write-path
/// hooks, FreeBSD's `bioops`). Directory chunks may be written entry by
/// entry, with the names whose changes wait as they were. Cylinder-group
/// check-hashes (`fs_metackhash` bit CK_CYLGRP), when the file system has
/// them: verified as a group comes from the device, computed as one goes
/// to it. And groups go out whole: a group written in part (a kill in the
/// middle of the write) fails its check-hash, which FreeBSD's preen does
/// not repair, or without one mixes an old inode map with a new
/// `cg_initediblk`.
struct UfsBlocks {
    cgsize: usize,
    cg_ckhash: bool,
    endian: Endian,
}

impl crate::cache::Formats for UfsBlocks {
    fn verify(&self, kind: BlockKind, addr: Frag, data: &[u8]) -> Result<()> {
        let n = self.cgsize;
        if !self.cg_ckhash || kind != BlockKind::Cg || n > data.len() {
            return Ok(());
        }
        let f = ufs_format::cg::CG_CKHASH_OFF;
        let stored = self.endian.get_u32(data, f);
        let computed = ufs_format::ckhash::ckhash_with_zeroed_field(&data[..n], f);
        if stored != computed {
            return Err(Error::damaged(
                crate::error::Damage::Block(addr),
                format!(
                    "cylinder group at fragment {addr}: check-hash mismatch (stored {stored:#x}, computed {computed:#x})"
                ),
            ));
        }
        Ok(())
    }

    fn seal(&self, kind: BlockKind, data: &mut [u8]) {
        let n = self.cgsize;
        if !self.cg_ckhash || kind != BlockKind::Cg || n > data.len() {
            return;
        }
        let f = ufs_format::cg::CG_CKHASH_OFF;
        let h = ufs_format::ckhash::ckhash_with_zeroed_field(&data[..n], f);
        self.endian.set_u32(data, f, h);
    }

    fn untorn(&self, kind: BlockKind) -> bool {
        matches!(kind, BlockKind::Cg | BlockKind::Super)
    }

    fn entry_image(
        &self,
        kind: BlockKind,
        current: &[u8],
        stack: &[crate::order::Held],
        ledger: &crate::order::Ledger,
    ) -> Option<(Vec<u8>, Vec<ChangeId>)> {
        // Directory chunks: each name as it was before its oldest change
        // still waiting, the other entries as they are.
        (kind == BlockKind::Dir)
            .then(|| crate::order::entry_image(self.endian, current, stack, ledger))?
    }
}

/// Finds and validates the superblock, searching FreeBSD's locations.
pub fn read_superblock(dev: &dyn BlockDevice) -> Result<(Superblock, Geometry, u64)> {
    let mut first_err: Option<Error> = None;
    for loc in SBLOCKSEARCH {
        if loc + SBLOCKSIZE as u64 > dev.size() {
            continue;
        }
        let mut buf = vec![0u8; SBLOCKSIZE];
        dev.read_at(loc, &mut buf)?;
        if Superblock::sniff(&buf).is_none() {
            continue;
        }
        let mut sb = match Superblock::from_bytes(&buf) {
            Ok(sb) => sb,
            Err(e) => {
                if first_err.is_none() {
                    first_err = Some(e.into());
                }
                continue;
            }
        };
        // The check-hash covers the bytes as stored, before FreeBSD's
        // compatibility conversions.
        if sb.ckhash_enabled(CK_SUPERBLOCK) && sb.compute_ckhash() != sb.fs_ckhash() {
            let e = Error::damaged(
                crate::error::Damage::Superblock,
                format!(
                    "superblock check-hash mismatch at byte {loc}: stored {:#x}, computed {:#x}",
                    sb.fs_ckhash(),
                    sb.compute_ckhash()
                ),
            );
            if first_err.is_none() {
                first_err = Some(e);
            }
            continue;
        }
        sb.compat_read(sb.primary_location(loc));
        // A superblock found somewhere it does not claim to live is a stale
        // copy (e.g. a UFS1 leftover under a UFS2 file system); keep
        // looking.
        if (loc == SBLOCK_UFS2 || loc == SBLOCK_UFS1)
            && u64::try_from(sb.fs_sblockloc()).ok() != Some(loc)
        {
            continue;
        }
        match sb.validate(loc) {
            Ok(g) if g.v.is_ufs1() && is_apple_ufs(dev) => {
                return Err(Error::new(ErrorKind::NotSupported, APPLE_UFS));
            }
            Ok(g) => {
                if g.size.checked_mul(g.fsize).is_none_or(|b| b > dev.size()) {
                    return Err(Error::corrupt(format!(
                        "file system of {} bytes is larger than its device ({} bytes)",
                        g.size.saturating_mul(g.fsize),
                        dev.size()
                    )));
                }
                return Ok((sb, g, loc));
            }
            Err(e) => {
                if first_err.is_none() {
                    first_err = Some(e.into());
                }
            }
        }
    }
    Err(first_err.unwrap_or_else(|| {
        Error::new(
            ErrorKind::Invalid,
            "no UFS1 or UFS2 superblock found at bytes 65536, 8192, 0 or 262144 \
             in either byte order (not a UFS file system, or a whole disk: see `ufskit probe`)",
        )
    }))
}

/// Why Mac OS X's UFS is refused.
pub const APPLE_UFS: &str = "Apple UFS (Mac OS X's UFS1, with a volume label at byte 7168): \
    its directories are kept in 1024-byte blocks where every BSD uses 512, which \
    ufskit does not read";

/// Does the device carry Mac OS X's UFS volume label before its UFS1
/// superblock?
pub fn is_apple_ufs(dev: &dyn BlockDevice) -> bool {
    let off = ufs_format::sb::APPLEUFS_LABEL_OFFSET;
    let mut b = [0u8; 4];
    off + 4 <= dev.size()
        && dev.read_at(off, &mut b).is_ok()
        && ufs_format::sb::is_apple_ufs_label(&b)
}

thread_local! {
    /// The time [`now`] answers on this thread, if fixed ([`set_thread_clock`]).
    static FIXED_CLOCK: std::cell::Cell<Option<i64>> = const { std::cell::Cell::new(None) };
}

/// Makes [`now`] answer `t` seconds (and no nanoseconds) on the calling
/// thread, or the system clock again with `None`: every time the engine
/// stamps (inode times, cylinder groups, the superblock) is then `t`, so
/// `makefs -T` (and `SOURCE_DATE_EPOCH`) gives the same bytes every run.
/// Per thread, so engines on other threads keep the real clock.
pub fn set_thread_clock(t: Option<i64>) {
    FIXED_CLOCK.with(|c| c.set(t));
}

/// The time now, (seconds, nanoseconds) since the epoch.
pub fn now() -> (i64, i32) {
    if let Some(t) = FIXED_CLOCK.with(|c| c.get()) {
        return (t, 0);
    }
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    (
        i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        i32::try_from(d.subsec_nanos()).unwrap_or(0),
    )
}

/// Why a read-write mount of this file system is refused, if it is: what
/// ufskit cannot keep consistent, and the FreeBSD command that removes it.
/// A read-only mount is always allowed.
pub fn refuses_writing(sb: &Superblock, was_clean: bool) -> Option<String> {
    let snaps: Vec<u32> = (0..FSMAXSNAP)
        .map(|i| sb.fs_snapinum(i))
        .filter(|&i| i != 0)
        .collect();
    if !snaps.is_empty() {
        return Some(format!(
            "the file system has {} snapshot(s) (inodes {snaps:?}); ufskit does not \
             copy blocks on write for them, so writing would corrupt them. Mount it \
             read-only (-o ro), or remove the snapshots on FreeBSD (rm MOUNTPOINT/.snap/NAME)",
            snaps.len()
        ));
    }
    if sb.fs_flags() & FS_GJOURNAL != 0 {
        return Some(
            "the file system uses gjournal (FS_GJOURNAL); ufskit writes no gjournal. \
             Mount it read-only (-o ro), or turn it off on FreeBSD (tunefs -J disable)"
                .to_string(),
        );
    }
    if let Some(why) = netbsd_log(sb) {
        return Some(why);
    }
    if sb.fs_flags() & FS_SUJ != 0 && !was_clean {
        return Some(
            "the file system uses journaled soft updates and was not unmounted \
             cleanly: its journal may hold changes not yet applied. Run fsck first \
             (FreeBSD's fsck_ffs replays the journal; ufskit fsck checks in full), or \
             mount it read-only (-o ro)"
                .to_string(),
        );
    }
    None
}

/// A NetBSD file system whose WAPBL log is active
/// ([`Superblock::netbsd_log_active`]): its metadata may wait in the log.
fn netbsd_log(sb: &Superblock) -> Option<String> {
    sb.netbsd_log_active().then(|| {
        "the file system has an active NetBSD WAPBL log (FS_DOWAPBL): changes may still \
         wait in the log, which ufskit does not replay. Mount it on NetBSD (or run its \
         fsck_ffs) to replay the log, or mount it read-only here (-o ro) to see it as it \
         was before the logged changes"
            .to_string()
    })
}

impl FsCore {
    pub fn open(dev: Box<dyn BlockDevice>, opts: MountOptions) -> Result<FsCore> {
        let (sb, g, _loc) = read_superblock(&*dev)?;
        let mut cache = BufferCache::new(dev, g.fsize, opts.cache_bytes);
        let mode = opts
            .write_mode
            .unwrap_or(if sb.fs_flags() & FS_DOSOFTDEP != 0 {
                WriteMode::Softdep
            } else {
                WriteMode::Normal
            });
        cache.set_mode(mode);
        let barrier = opts
            .barrier
            .unwrap_or(crate::order::Barrier::default_for(mode));
        cache.set_barrier(barrier);
        if !opts.vmiodir {
            cache.set_dir_pool(
                Some(dir_pool_bytes(opts.cache_bytes)),
                crate::cache::DirSpace::Shared {
                    buffers: dir_pool_buffers(opts.cache_bytes),
                },
            );
        }
        let opts = MountOptions {
            write_mode: Some(mode),
            barrier: Some(barrier),
            ..opts
        };
        cache.set_formats(Some(Box::new(UfsBlocks {
            cgsize: to_index(g.cgsize),
            cg_ckhash: sb.ckhash_enabled(CK_CYLGRP),
            endian: g.v.endian,
        })));
        // The summary area: ncg entries of struct csum at fs_csaddr.
        let mut raw = vec![0u8; to_index(g.cssize)];
        let at = Frag::new(g.csaddr).byte_offset(g.fshift)?;
        cache.read_raw(at, &mut raw, BlockKind::Summary)?;
        let cs: Vec<Csum> = (0..to_index(g.ncg))
            .map(|i| Csum::read(g.v.endian, &raw, i * Csum::SIZE))
            .collect();
        let rng = match opts.seed {
            Some(s) => rand::rngs::StdRng::seed_from_u64(s),
            None => rand::rngs::StdRng::from_entropy(),
        };
        // Clean is 1: NetBSD marks a file system it has mounted with 2
        // (FS_WASCLEAN) until it unmounts it.
        let was_clean = sb.fs_clean() == 1 && (sb.fs_flags() & (FS_UNCLEAN | FS_NEEDSFSCK)) == 0;
        let opts_read_only = opts.read_only;
        let mut read_only = opts.read_only;
        if !was_clean && !opts.force {
            read_only = true;
        }
        if !read_only {
            if let Some(why) = refuses_writing(&sb, was_clean) {
                return Err(Error::new(ErrorKind::NotSupported, why));
            }
        }
        let ncg = to_index(g.ncg);
        let dirhash = crate::dir::dirhash::Dirhash::new(opts.dirhash.clone());
        let mut core = FsCore {
            sb,
            g,
            cs,
            cache,
            opts,
            contigdirs: vec![0; ncg],
            cg_changes: vec![0; ncg],
            damage: None,
            cg_kept: Vec::new(),
            dirhash,
            dir_hints: HashMap::default(),
            seq_reads: HashMap::default(),
            block_frees: 0,
            placement: Default::default(),
            order: Default::default(),
            syncer_bell: Default::default(),
            writer_waits: None,
            op_log: None,
            read_only,
            opened_read_only: opts_read_only,
            sb_dirty: false,
            rng,
            lookups: HashMap::default(),
            orphans: Default::default(),
            was_clean,
            softdep_flag_lent: false,
            suj_flag_lent: false,
        };
        if !core.read_only {
            core.begin_writing()?;
        }
        Ok(core)
    }

    /// Marks the file system in use on disk before anything is changed
    /// (at a read-write mount, and at a remount from read-only to
    /// read-write): not clean, and the soft-updates and journal flags lent
    /// out while this engine writes without them.
    fn begin_writing(&mut self) -> Result<()> {
        self.sb.set_fs_clean(0);
        let mode = self.opts.write_mode.unwrap_or(WriteMode::Normal);
        if mode != WriteMode::Softdep && self.sb.fs_flags() & FS_DOSOFTDEP != 0 {
            self.sb.set_fs_flags(self.sb.fs_flags() & !FS_DOSOFTDEP);
            self.softdep_flag_lent = true;
        }
        if self.sb.fs_flags() & FS_SUJ != 0 {
            self.sb.set_fs_flags(self.sb.fs_flags() & !FS_SUJ);
            self.suj_flag_lent = true;
        }
        let (t, _) = now();
        self.sb.set_fs_mtime(t);
        self.write_superblock()?;
        self.cache.flush()?;
        Ok(())
    }

    /// `mount -o remount,ro|rw`. To read-only: everything written and the
    /// file system marked clean, as at unmount, then no more writes; files
    /// removed while open must be closed first (their inodes are freed at
    /// the last close, which a read-only file system cannot do). To
    /// read-write: marked in use again; only a mount whose image was
    /// opened for writing (not `-o ro` from the start) and that was clean
    /// (or mounted with `force`) can.
    pub fn remount(&mut self, read_only: bool) -> Result<()> {
        if read_only == self.read_only {
            return Ok(());
        }
        if read_only {
            if !self.orphans.is_empty() {
                return Err(Error::new(
                    ErrorKind::Busy,
                    format!(
                        "{} removed file(s) are still open; close them before remounting read-only",
                        self.orphans.len()
                    ),
                ));
            }
            self.unmount()?;
            self.read_only = true;
            return Ok(());
        }
        if self.opened_read_only {
            return Err(Error::new(
                ErrorKind::ReadOnly,
                "the image was opened read-only (mounted with -o ro); unmount it and mount it read-write",
            ));
        }
        if !self.was_clean && !self.opts.force {
            return Err(Error::new(
                ErrorKind::ReadOnly,
                "the file system was not cleanly unmounted; run fsck, or mount with force",
            ));
        }
        if let Some(why) = refuses_writing(&self.sb, self.was_clean) {
            return Err(Error::new(ErrorKind::NotSupported, why));
        }
        self.read_only = false;
        if let Err(e) = self.begin_writing() {
            self.read_only = true;
            return Err(e);
        }
        Ok(())
    }

    pub fn check_writable(&self) -> Result<()> {
        if self.read_only {
            return Err(Error::new(
                ErrorKind::ReadOnly,
                "file system is mounted read-only",
            ));
        }
        if let Some(why) = self.cache.failure() {
            return Err(Error::new(
                ErrorKind::Io,
                format!("writing stopped after a failure ({why}); unmount and run fsck"),
            ));
        }
        Ok(())
    }

    pub fn check_ino(&self, ino: Ino) -> Result<()> {
        if ino < Ino::ROOT || ino.get() >= self.g.ninodes() {
            return Err(Error::damaged(
                crate::error::Damage::Inode(ino),
                format!("inode number {ino} out of range"),
            ));
        }
        Ok(())
    }

    /// The block holding inode `ino` (`ino_to_fsba`).
    pub fn inode_block(&self, ino: Ino) -> Frag {
        Frag::new(self.g.ino_to_fsba(ino.get()))
    }

    /// The block of cylinder group `c` (`cgtod`).
    pub fn cg_block(&self, c: u64) -> Frag {
        Frag::new(self.g.cgtod(c))
    }

    /// Byte offset of inode `ino` in its inode block.
    #[inline]
    pub fn inode_offset(&self, ino: Ino) -> usize {
        to_index(self.g.ino_to_fsbo(ino.get())) * self.g.dinode_size()
    }

    pub fn read_inode(&mut self, ino: Ino) -> Result<Dinode> {
        self.check_ino(ino)?;
        let addr = self.inode_block(ino);
        let off = self.inode_offset(ino);
        let bsize = to_index(self.g.bsize);
        let verify = self.sb.ckhash_enabled(CK_INODE);
        let v = self.g.v;
        let b = self.cache.read(addr, bsize, BlockKind::Inode)?;
        let disk = &b[off..off + v.dinode_size()];
        let di = Dinode::decode(v, disk);
        if verify && di.di_mode() != 0 {
            if let Some((stored, computed)) = Dinode::ckhash_mismatch(v, disk) {
                return Err(Error::damaged(
                    crate::error::Damage::Inode(ino),
                    format!(
                        "inode {ino} check-hash mismatch (stored {stored:#x}, computed {computed:#x})"
                    ),
                ));
            }
        }
        Ok(di)
    }

    /// Stores inode `ino`. The change waits for the inode's dependencies
    /// (`order.inode_deps`: what its in-memory state already holds);
    /// releases of blocks whose pointers this write clears are attached to
    /// it. Returns the change.
    pub fn write_inode(&mut self, ino: Ino, di: &Dinode) -> Result<ChangeId> {
        self.check_writable()?;
        self.check_ino(ino)?;
        let ckhash = self.sb.ckhash_enabled(CK_INODE);
        let v = self.g.v;
        let dsize = v.dinode_size();
        let addr = self.inode_block(ino);
        let off = self.inode_offset(ino);
        let bsize = to_index(self.g.bsize);
        let deps = self.order.inode_deps.remove(&ino).unwrap_or_default();
        let mut needs = deps.needs.clone();
        // Pointers a truncation cleared in indirect blocks it keeps go to
        // disk before the smaller size: the other way round a crash leaves
        // pointers past the end of the file (PARTIALLY TRUNCATED INODE,
        // which preen will not repair), this way only a size past the last
        // block (which it shortens).
        needs.extend(deps.cleared.iter().copied());
        let made = self.cache.modify_tracked(
            addr,
            bsize,
            BlockKind::Inode,
            off,
            dsize,
            &needs,
            Vec::new(),
        );
        let (id, b) = match made {
            Ok(m) => m,
            Err(e) => {
                // Not written: the inode still owes what it carried.
                self.order.inode_deps.insert(ino, deps);
                return Err(e);
            }
        };
        let old = Dinode::decode(v, &b[off..off + dsize]);
        di.encode_into(v, &mut b[off..off + dsize], ckhash);
        if id != ChangeId::NONE && !di.holds_short_link(self.g.maxsymlinklen()) {
            let new_ptrs = (0..UFS_NDADDR)
                .map(|i| (old.db(i), di.db(i)))
                .chain((0..UFS_NIADDR).map(|i| (old.ib(i), di.ib(i))));
            for (was, now) in new_ptrs {
                if now != was && !now.is_none() {
                    self.note_reach(now, id);
                }
            }
        }
        if !deps.frees.is_empty() {
            // Directory blocks this write cuts off (a removed directory, or
            // empty chunks past a shrunk one's end) hold only removed names:
            // they need not reach the disk once this change does.
            for f in &deps.frees {
                if let Freed::Blocks { bno, size } = *f {
                    self.cache
                        .abandon_dir_blocks(bno, self.g.numfrags(size), id);
                }
            }
            let mut needs = deps.cleared;
            needs.push(id);
            self.defer(deps.frees, needs)?;
        }
        Ok(id)
    }

    /// What a pointer to inode `ino` (a directory entry) needs: the inode's
    /// newest change, its bitmap bit, and the group's count of initialised
    /// inode blocks (`cg_initediblk`: fsck reads no inode past it). The
    /// count is a region of the group held back until the blocks it adds
    /// are on disk, while the rest of the group goes out: the group's
    /// newest change can be younger than the held count and be written
    /// without it, so the count is needed on its own.
    ///
    /// Without map ordering (normal and sync modes) only the inode: the
    /// group is forced out whenever its count of initialised inode blocks
    /// grows (see `claim_inode`).
    pub fn inode_pointer_needs(&self, ino: Ino) -> [ChangeId; 3] {
        let addr = self.inode_block(ino);
        let off = self.inode_offset(ino);
        let inode = self.cache.region_latest(addr, off);
        if !self.cache.mode().orders_maps() {
            return [inode, ChangeId::NONE, ChangeId::NONE];
        }
        let cg = self.cg_block(self.g.ino_to_cg(ino.get()));
        [
            inode,
            self.cache.region_latest(cg, 0),
            self.cache
                .region_latest(cg, ufs_format::cg::CG_INITEDIBLK_OFF),
        ]
    }

    /// Notes that `id` stored a pointer to the block at `bno`.
    pub fn note_reach(&mut self, bno: Frag, id: ChangeId) {
        let o = &mut self.order;
        o.reach.insert(bno, id);
        if o.reach.len() >= o.reach_prune_at.max(1024) {
            let cache = &self.cache;
            o.reach.retain(|_, id| !cache.is_durable(*id));
            o.reach_prune_at = 2 * o.reach.len();
        }
    }

    /// The undurable pointer changes on the way from an inode to the block
    /// at `bno` (the pointer to it, and to the indirect block holding that
    /// pointer, and so on): what is written in the block is seen on disk
    /// only once they are durable.
    pub fn reach_needs(&self, bno: Frag) -> Vec<ChangeId> {
        let mut out = Vec::new();
        let mut at = bno;
        // An inode's block map is at most four levels deep.
        for _ in 0..5 {
            let Some(&id) = self.order.reach.get(&at) else {
                break;
            };
            let Some(holder) = self.cache.owner(id) else {
                break;
            };
            out.push(id);
            at = holder;
        }
        out
    }

    /// What a pointer to the block at `bno` needs: its contents and its
    /// bitmap bits. Without map ordering (normal and sync modes) only the
    /// contents of a new indirect, directory or extended attribute block
    /// (FFS writes those synchronously before pointing at them; data and
    /// maps are delayed).
    pub fn block_pointer_needs(&self, bno: Frag) -> [ChangeId; 2] {
        if !self.cache.mode().orders_maps() {
            let meta = matches!(
                self.cache.kind(bno),
                Some(BlockKind::Indir | BlockKind::Dir | BlockKind::ExtAttr)
            );
            return [
                if meta {
                    self.cache.latest(bno)
                } else {
                    ChangeId::NONE
                },
                ChangeId::NONE,
            ];
        }
        [
            self.cache.latest(bno),
            self.cache
                .region_latest(self.cg_block(self.g.dtog(bno.get())), 0),
        ]
    }

    /// Notes that inode `ino` will point at the new block `bno`.
    pub fn note_new_block(&mut self, ino: Ino, bno: Frag) {
        if self.cache.mode().tracks() {
            let n = self.block_pointer_needs(bno);
            self.order
                .inode_deps(ino)
                .needs
                .extend(n.into_iter().filter(|&i| i != ChangeId::NONE));
        }
    }

    /// Releases that wait for `needs`. With soft updates they are done by
    /// [`process_deferred`](Self::process_deferred) once durable (at the
    /// end of an operation after a flush, at a sync, or by an allocation
    /// that finds the disk full and syncs); in normal and sync modes the
    /// needs are forced out and the releases done now, as FFS writes the
    /// inode synchronously before `ffs_blkfree` (ffs_truncate), except for
    /// runs whose contents moved ([`Freed::Moved`]), which wait.
    pub fn defer(&mut self, frees: Vec<Freed>, needs: Vec<ChangeId>) -> Result<()> {
        self.cache.note_deferred(frees.len() as u64);
        let force =
            !self.cache.mode().delays() && frees.iter().any(|f| !matches!(f, Freed::Moved { .. }));
        for what in frees {
            self.order.deferred.push(Deferred {
                needs: needs.clone(),
                what,
            });
        }
        if force {
            self.cache.force_ids(&needs)?;
            self.process_deferred()?;
        }
        Ok(())
    }

    /// Fragments and inodes whose release waits (FreeBSD's
    /// `fs_pendingblocks`, `fs_pendinginodes`).
    pub fn pending_frees(&self) -> (u64, u64) {
        let mut frags = 0;
        let mut inodes = 0;
        for d in &self.order.deferred {
            match d.what {
                Freed::Blocks { size, .. } | Freed::Moved { size, .. } => {
                    frags += self.g.numfrags(size)
                }
                Freed::Inode { .. } => inodes += 1,
            }
        }
        (frags, inodes)
    }

    /// Does every release whose needs are durable.
    pub fn process_deferred(&mut self) -> Result<()> {
        if self.order.deferred.is_empty() {
            return Ok(());
        }
        let all = std::mem::take(&mut self.order.deferred);
        let (ready, wait): (Vec<Deferred>, Vec<Deferred>) = all
            .into_iter()
            .partition(|d| d.needs.iter().all(|&n| self.cache.is_durable(n)));
        self.order.deferred = wait;
        self.free_now(ready.into_iter().map(|d| d.what).collect())
    }

    /// Reads cylinder group `c` (through the cache, which verifies its
    /// check-hash when it comes from the device).
    ///
    /// A group stored by the last few allocations is handed back as it was
    /// kept, without parsing its 32 KiB again, if no change to it was
    /// stored since (every change to a group's block goes through
    /// [`FsCore::write_cg`]; the block differs at most in the check-hash,
    /// sealed as it goes out).
    pub fn read_cg(&mut self, c: u64) -> Result<Cg> {
        let changes = self.cg_changes.get(to_index(c)).copied().unwrap_or(0);
        if let Some(i) = self.cg_kept.iter().position(|(k, _)| *k == c) {
            let (_, cg) = self.cg_kept.swap_remove(i);
            if cg.tag() == changes {
                return Ok(cg);
            }
        }
        let addr = self.cg_block(c);
        let len = to_index(self.g.fragroundup(self.g.cgsize));
        let g = self.g;
        let b = self.cache.read(addr, len, BlockKind::Cg)?;
        let mut cg = Cg::parse(b, &g, c)?;
        cg.set_tag(changes);
        Ok(cg)
    }

    /// Stores a changed cylinder group; its check-hash is computed when the
    /// cache writes it out.
    pub fn write_cg(&mut self, c: u64, cg: &mut Cg) -> Result<()> {
        self.check_writable()?;
        let (t, _) = now();
        cg.set_time(self.g.v.is_ufs1(), t);
        let addr = self.cg_block(c);
        let len = to_index(self.g.fragroundup(self.g.cgsize));
        let b = self.cache.modify(addr, len, BlockKind::Cg)?;
        // The header and the changed part of the maps: the block held the
        // rest as it was parsed (a group is read, changed and stored within
        // one hold of the engine lock).
        for (at, bytes) in cg.changed() {
            b[at..at + bytes.len()].copy_from_slice(bytes);
        }
        cg.mark_stored();
        Ok(())
    }

    /// After [`FsCore::write_cg`]: counts the change, and keeps the group
    /// parsed for the next [`FsCore::read_cg`] if it was read after the
    /// last change stored before this one (so it holds all of them); a few
    /// groups are kept, 32 KiB each.
    pub(crate) fn keep_cg(&mut self, c: u64, mut cg: Cg) {
        let Some(n) = self.cg_changes.get_mut(to_index(c)) else {
            return;
        };
        let current = cg.tag() == *n;
        *n += 1;
        self.cg_kept.retain(|(k, _)| *k != c);
        if current {
            cg.set_tag(*n);
            if self.cg_kept.len() >= CG_KEPT {
                self.cg_kept.remove(0);
            }
            self.cg_kept.push((c, cg));
        }
    }

    /// Writes the superblock and the summary area (not the backups).
    pub fn write_superblock(&mut self) -> Result<()> {
        self.check_writable()?;
        let mut raw = vec![0u8; to_index(self.g.cssize)];
        for (i, c) in self.cs.iter().enumerate() {
            c.write(self.g.v.endian, &mut raw, i * Csum::SIZE);
        }
        let at = Frag::new(self.g.csaddr).byte_offset(self.g.fshift)?;
        self.cache.write_raw(at, &raw, BlockKind::Summary)?;
        let (t, _) = now();
        self.sb.set_fs_time(t);
        self.sb.set_fs_fmod(0);
        self.sb.set_fs_sblockactualloc(to_signed(self.g.sblockloc));
        let bytes = self.sb.to_disk_bytes();
        self.cache
            .write_raw(self.g.sblockloc, &bytes, BlockKind::Super)?;
        self.sb_dirty = false;
        Ok(())
    }

    pub fn cstotal(&self) -> CsumTotal {
        self.sb.fs_cstotal()
    }

    /// Writes everything dirty and makes it durable, with the releases
    /// that waited for it.
    pub fn sync(&mut self) -> Result<()> {
        if self.read_only {
            return Ok(());
        }
        self.sync_blocks()?;
        self.write_superblock()?;
        self.cache.flush()
    }

    /// Whether the background sync that settles every change made up to
    /// `upto` ([`BufferCache::last_change`] when it started; changes need
    /// only older ones, so later changes never hold it up) is done; if so,
    /// does the releases that waited, writes the superblock and flushes.
    /// What changed after `upto` may stay dirty for the next sync.
    pub fn background_sync_done(&mut self, upto: crate::order::ChangeId) -> Result<bool> {
        if self.read_only {
            return Ok(true);
        }
        let done = self.cache.dirty_count() == 0
            || (self.cache.mode().tracks() && self.cache.durable_upto(upto));
        if done {
            self.process_deferred()?;
            self.write_superblock()?;
            self.cache.flush()?;
        }
        Ok(done)
    }

    /// Rounds of [`BufferCache::sync`] and waiting releases until nothing
    /// is dirty and nothing that can be released waits.
    fn sync_blocks(&mut self) -> Result<()> {
        loop {
            self.cache.sync()?;
            self.process_deferred()?;
            if self.cache.dirty_count() == 0 {
                return Ok(());
            }
        }
    }

    /// The end of a changing operation: in sync mode everything it changed
    /// is made durable before it returns, in normal mode its directory
    /// changes (as FFS writes directory blocks synchronously in
    /// `ufs_direnter`, `ufs_dirremove` and `ufs_dirrewrite`).
    ///
    /// In normal mode the directory blocks are written, not flushed: as
    /// FFS's `bwrite`, which waits for the write, not for the drive's
    /// cache. The next change that needs them flushes first, so the order
    /// holds; a daemon killed after the operation returned has them on
    /// disk. Releases whose pointers are durably gone are done here too.
    fn end_op(&mut self, log: OpLog) -> Result<()> {
        let dir_changes = log.dir_changes;
        if self.read_only {
            return Ok(());
        }
        match self.cache.mode() {
            WriteMode::Sync if !log.lazy => self.sync_blocks()?,
            WriteMode::Normal if !dir_changes.is_empty() => self.cache.write_ids(&dir_changes)?,
            WriteMode::Softdep if self.cache.ordering_full() => {
                // The ordering state is bounded by the cache size: past
                // it the syncer runs now, past twice it this writer waits
                // for a round of it, and past four times (or with no
                // syncer) everything goes out now (`order::cleanup`).
                use crate::order::cleanup::{WAIT_FACTOR, WRITE_ALL_FACTOR};
                if self.syncer_bell.attached() && !self.cache.ordering_past(WRITE_ALL_FACTOR) {
                    let ticket = self.syncer_bell.hurry();
                    let wait = self.cache.ordering_past(WAIT_FACTOR);
                    if wait {
                        let w = crate::order::cleanup::WRITER_WAIT;
                        let max = self.writer_waits.map_or(w, |(x, _)| x.max(w));
                        self.writer_waits = Some((max, ticket));
                    }
                    self.cache.count_cleanup(true, wait, false);
                } else {
                    self.cache.count_cleanup(false, false, true);
                    self.sync_blocks()?
                }
            }
            _ => {}
        }
        let settled = self.cache.settled_changes();
        if settled != self.order.deferred_seen_settled {
            self.order.deferred_seen_settled = settled;
            self.process_deferred()?;
        }
        Ok(())
    }

    /// Frees orphans, flushes everything and marks the file system clean
    /// (or, when an operation met damage, marked for fsck).
    /// After a failure (see [`BufferCache::fail`]) nothing is written and
    /// the file system stays marked unclean: the error says why.
    pub fn unmount(&mut self) -> Result<()> {
        if self.read_only {
            return Ok(());
        }
        self.check_writable()?;
        self.free_orphans()?;
        self.sync_blocks()?;
        if self.damage.is_some() {
            // Damage was met: never a clean flag over it. fsck clears
            // FS_NEEDSFSCK once it has checked (FreeBSD's flag for "run
            // fsck before mounting read-write").
            self.sb.set_fs_clean(0);
            self.sb.set_fs_flags(self.sb.fs_flags() | FS_NEEDSFSCK);
        } else {
            self.sb.set_fs_clean(1);
            self.sb.set_fs_flags(self.sb.fs_flags() & !FS_UNCLEAN);
        }
        if std::mem::take(&mut self.softdep_flag_lent) {
            self.sb.set_fs_flags(self.sb.fs_flags() | FS_DOSOFTDEP);
        }
        if std::mem::take(&mut self.suj_flag_lent) {
            self.sb.set_fs_flags(self.sb.fs_flags() | FS_SUJ);
        }
        self.write_superblock()?;
        self.cache.flush()?;
        Ok(())
    }

    /// Frees every inode whose last link went while it was still in use.
    pub fn free_orphans(&mut self) -> Result<()> {
        let orphans: Vec<Ino> = std::mem::take(&mut self.orphans).into_iter().collect();
        for ino in orphans {
            self.release_inode(ino)?;
        }
        Ok(())
    }

    /// Frees an inode with no links: its blocks, then the inode itself.
    /// Returns the change that zeroed the inode (0 if nothing was done).
    pub fn release_inode(&mut self, ino: Ino) -> Result<ChangeId> {
        let mut di = self.read_inode(ino)?;
        if di.di_mode() == 0 || di.nlink() != 0 {
            return Ok(ChangeId::NONE);
        }
        let was_dir = di.is_dir();
        if was_dir {
            self.dirhash.forget_dir(ino);
            self.dir_hints.remove(&ino);
        }
        let has_blocks = !di.holds_short_link(self.g.maxsymlinklen())
            && !matches!(
                di.file_type(),
                ufs_format::dinode::IFCHR
                    | ufs_format::dinode::IFBLK
                    | ufs_format::dinode::IFIFO
                    | ufs_format::dinode::IFSOCK
            );
        if has_blocks {
            self.truncate_data(ino, &mut di, 0, crate::alloc::Reserve::Privileged)?;
        }
        if di.di_extsize() != 0 || (0..UFS_NXADDR).any(|j| !di.extb(j).is_none()) {
            self.release_ext_blocks(ino, &mut di)?;
        }
        let gen = di.di_gen();
        let mut fresh = Dinode::default();
        fresh.set_di_gen(gen.wrapping_add(1).max(1));
        let cleared = self.write_inode(ino, &fresh)?;
        if self.cache.mode().orders_maps() {
            // The bit is cleared only once the zeroed inode is on disk.
            self.defer(vec![Freed::Inode { ino, was_dir }], vec![cleared])?;
        } else {
            // FFS's ffs_vfree without soft updates: the map goes first, the
            // zeroed inode follows when written (a crash leaves an inode in
            // use that the map calls free, which preen repairs; the name is
            // already durably gone).
            self.free_inode_now(ino, was_dir)?;
        }
        Ok(cleared)
    }

    pub fn random_gen(&mut self) -> u32 {
        // FreeBSD draws generation numbers from arc4random and never uses 0.
        self.rng.gen_range(1..=u32::MAX / 2)
    }
}
