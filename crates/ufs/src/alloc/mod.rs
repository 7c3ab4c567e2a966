//! Allocation as FFS does it: cylinder-group choice, blocks, fragments and
//! inodes, and their release.
//!
//! Invariants:
//! - Every change to a cg's maps goes with the matching change to its
//!   counters (`cg_cs`, `cg_frsum`, cluster summary), to the summary array
//!   `cs[cg]` and to `fs_cstotal`, through [`FsCore::commit_cg`].
//! - `cg_frsum[n]` counts maximal free runs of exactly n fragments inside
//!   blocks that are not wholly free; wholly free blocks count in `nbfree`
//!   and in the cluster map and summary.
//! - Freeing something already free is reported as corruption, never a panic.
//!
//! Algorithms (facts from FreeBSD `sys/ufs/ffs/ffs_alloc.c`): `ffs_hashalloc`
//! (preferred group, quadratic rehash, brute force), `ffs_alloccg`,
//! `ffs_alloccgblk`, `ffs_fragextend`, `ffs_mapsearch`, `ffs_nodealloccg`
//! (lazy inode-block initialisation via `cg_initediblk`), `ffs_blkfree`,
//! `ffs_freefile`, `ffs_dirpref` (Orlov) and the 4.4BSD directory policy,
//! `ffs_blkpref_ufs2`; `ffs_clusteracct` and `ffs_fragacct` from ffs_subr.c.
use crate::frag::Frag;
use crate::Ino;
pub mod placement;

use crate::cache::BlockKind;
use crate::error::{Error, ErrorKind, Result};
use crate::fs::{DirPref, FsCore};
use crate::order::Freed;
use rand::Rng;
use ufs_format::bytes::{low_u32, to_i32, to_index, to_signed};
use ufs_format::sb::Csum;
use ufs_format::*;

/// A number of fragments within one block (at most `fs_frag`, which the
/// superblock's validation keeps to 1, 2, 4 or 8) as a change of a
/// group's `cs_nffree`, FreeBSD's `int32_t`.
fn frag_count(n: u64) -> i32 {
    debug_assert!(n <= MAXFRAG as u64, "{n} fragments in one block");
    to_i32(n)
}

/// For every pattern of a block's fragment bits (bit i = fragment i free),
/// the set of maximal free run lengths it contains (bit n = a run of n).
/// The role of FreeBSD's `fragtbl`, computed rather than tabulated.
const fn run_table(frag: u32) -> [u16; 256] {
    let mut t = [0u16; 256];
    let mut bits = 0;
    while bits < (1 << frag) {
        let mut mask = 0u16;
        let mut run = 0;
        let mut i = 0;
        while i <= frag {
            if i < frag && (bits >> i) & 1 == 1 {
                run += 1;
            } else {
                if run > 0 {
                    mask |= 1 << run;
                }
                run = 0;
            }
            i += 1;
        }
        t[bits] = mask;
        bits += 1;
    }
    t
}

static RUNS: [[u16; 256]; 4] = [run_table(1), run_table(2), run_table(4), run_table(8)];

fn runs_of(bits: u8, frag: u64) -> u16 {
    RUNS[frag.trailing_zeros() as usize][usize::from(bits)]
}

/// Start of the first maximal free run of exactly `len` in `bits`.
fn run_start(bits: u8, frag: u64, len: u64) -> Option<u64> {
    let mut i = 0;
    while i < frag {
        if (bits >> i) & 1 == 0 {
            i += 1;
            continue;
        }
        let s = i;
        while i < frag && (bits >> i) & 1 == 1 {
            i += 1;
        }
        if i - s == len {
            return Some(s);
        }
    }
    None
}

/// Free fragment runs inside one block's bits: (start, len) of each maximal run.
fn free_runs(cg: &Cg, bstart: u64, frag: u64) -> impl Iterator<Item = (u64, u64)> + '_ {
    let bits = cg.block_bits(bstart / frag, frag);
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < frag && (bits >> i) & 1 == 0 {
            i += 1;
        }
        if i >= frag {
            return None;
        }
        let s = i;
        while i < frag && (bits >> i) & 1 == 1 {
            i += 1;
        }
        Some((s, i - s))
    })
}

/// `ffs_fragacct`: adds `cnt` to `cg_frsum[len]` for every partial free run
/// of the block starting at cg-relative fragment `bstart`.
fn fragacct(cg: &mut Cg, bstart: u64, frag: u64, cnt: i32) {
    let runs: Vec<(u64, u64)> = free_runs(cg, bstart, frag)
        .filter(|&(_, l)| l < frag)
        .collect();
    for (_, len) in runs {
        let len = to_index(len);
        let v = cg.cg_frsum(len).saturating_add_signed(cnt);
        cg.set_cg_frsum(len, v);
    }
}

/// `ffs_clusteracct`: block `blkno` (cg-relative block index) became free
/// (`cnt = 1`) or allocated (`cnt = -1`); fix the cluster map and summary.
fn clusteracct(g: &Geometry, cg: &mut Cg, blkno: u64, cnt: i32) {
    if g.contigsumsize == 0 {
        return;
    }
    let nblks = u64::from(cg.cg_nclusterblks());
    if blkno >= nblks {
        return;
    }
    cg.set_cluster_free(blkno, cnt > 0);
    let max = g.contigsumsize;
    let mut forw = 0;
    while forw < max && blkno + 1 + forw < nblks && cg.cluster_free(blkno + 1 + forw) {
        forw += 1;
    }
    let mut back = 0;
    while back < max && back < blkno && cg.cluster_free(blkno - 1 - back) {
        back += 1;
    }
    let i = (back + forw + 1).min(max);
    let add = |cg: &mut Cg, idx: u64, d: i32| {
        let v = cg.clustersum(idx) + d;
        cg.set_clustersum(idx, v);
    };
    add(cg, i, cnt);
    if back > 0 {
        add(cg, back, -cnt);
    }
    if forw > 0 {
        add(cg, forw, -cnt);
    }
}

fn sub(a: Csum, b: Csum) -> Csum {
    Csum {
        cs_ndir: a.cs_ndir - b.cs_ndir,
        cs_nbfree: a.cs_nbfree - b.cs_nbfree,
        cs_nifree: a.cs_nifree - b.cs_nifree,
        cs_nffree: a.cs_nffree - b.cs_nffree,
    }
}

/// How an allocation is charged against the minfree reserve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reserve {
    /// Root (or the file system itself): may dip into the minfree reserve.
    Privileged,
    /// Others stop at the reserve.
    Unprivileged,
}

/// Where a block should go: the answer of `blkpref`/`indir_pref`, handed
/// to `alloc_block` as an argument (no hint travels between the two any
/// other way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockPref {
    /// Preferred fragment address ([`Frag::NONE`]: no preference, the
    /// inode's group).
    pub bno: Frag,
    /// Take fragments exactly at `bno` when they are free (a file placed in
    /// a large directory, whose data follows its neighbour's); otherwise
    /// the ordinary search starts there.
    pub exact: bool,
}

impl BlockPref {
    /// A preference the ordinary search starts from.
    pub fn near(bno: Frag) -> BlockPref {
        BlockPref { bno, exact: false }
    }
}

impl FsCore {
    /// Stores a modified cg and carries its counter change into the
    /// summary array and `fs_cstotal`.
    pub fn commit_cg(&mut self, c: u64, mut cg: Cg, before: Csum) -> Result<()> {
        let now = cg.cg_cs();
        let d = sub(now, before);
        self.cs[to_index(c)] = now;
        let mut t = self.sb.fs_cstotal();
        t.cs_ndir += i64::from(d.cs_ndir);
        t.cs_nbfree += i64::from(d.cs_nbfree);
        t.cs_nifree += i64::from(d.cs_nifree);
        t.cs_nffree += i64::from(d.cs_nffree);
        self.sb.set_fs_cstotal(t);
        self.sb_dirty = true;
        self.write_cg(c, &mut cg)?;
        self.keep_cg(c, cg);
        Ok(())
    }

    /// `freespace(fs, minfree)`: fragments free beyond the reserve.
    pub fn freespace(&self, percent: u64) -> i64 {
        let t = self.sb.fs_cstotal();
        t.cs_nbfree * to_signed(self.g.frag) + t.cs_nffree - to_signed(self.g.dsize * percent / 100)
    }

    fn nospace(&self, what: &str) -> Error {
        Error::new(
            ErrorKind::NoSpace,
            format!("file system full: no {what} available"),
        )
    }

    /// `ffs_hashalloc`: try `start`, then quadratic rehash, then brute force.
    fn hashalloc<T>(
        &mut self,
        start: u64,
        mut f: impl FnMut(&mut FsCore, u64, bool) -> Result<Option<T>>,
    ) -> Result<Option<T>> {
        let ncg = self.g.ncg;
        if let Some(r) = f(self, start, true)? {
            return Ok(Some(r));
        }
        let mut icg = start;
        let mut i = 1;
        while i < ncg {
            icg += i;
            if icg >= ncg {
                icg -= ncg;
            }
            if let Some(r) = f(self, icg, false)? {
                return Ok(Some(r));
            }
            i *= 2;
        }
        let mut icg = (start + 2) % ncg;
        for _ in 2..ncg {
            if let Some(r) = f(self, icg, false)? {
                return Ok(Some(r));
            }
            icg += 1;
            if icg == ncg {
                icg = 0;
            }
        }
        Ok(None)
    }

    /// `ffs_alloc`: allocates `size` bytes (a block or a fragment run) near
    /// `bpref`, for a file whose inode is `ino`. Returns the fragment address.
    /// With soft updates, blocks released but not yet free (their pointers
    /// not durably gone) are waited for before giving up with ENOSPC.
    pub fn alloc_block(
        &mut self,
        ino: Ino,
        bpref: BlockPref,
        size: u64,
        who: Reserve,
    ) -> Result<Frag> {
        match self.alloc_block_once(ino, bpref, size, who) {
            Err(e)
                if e.kind == crate::error::ErrorKind::NoSpace
                    && !self.order.deferred.is_empty() =>
            {
                self.sync()?;
                self.alloc_block_once(ino, bpref, size, who)
            }
            r => r,
        }
    }

    fn alloc_block_once(
        &mut self,
        ino: Ino,
        pref: BlockPref,
        size: u64,
        who: Reserve,
    ) -> Result<Frag> {
        let BlockPref { bno: bpref, exact } = pref;
        self.check_writable()?;
        debug_assert!(size > 0 && size <= self.g.bsize && size.is_multiple_of(self.g.fsize));
        let need = to_signed(self.g.numfrags(size));
        if who == Reserve::Unprivileged && self.freespace(self.g.minfree) - need < 0 {
            return Err(self.nospace("blocks (the rest is reserved for root)"));
        }
        let bpref = if bpref.get() >= self.g.size {
            Frag::NONE
        } else {
            bpref
        };
        let cg = if bpref.is_none() {
            self.g.ino_to_cg(ino.get())
        } else {
            self.g.dtog(bpref.get())
        };
        if !bpref.is_none() && exact && size < self.g.bsize {
            if let Some(b) = self.alloc_frags_at(bpref, size)? {
                return Ok(b);
            }
        }
        match self.hashalloc(cg, |fs, c, _| fs.alloccg(c, bpref, size))? {
            Some(b) => Ok(b),
            None => Err(self.nospace("blocks")),
        }
    }

    /// Fragments exactly at `bno` when they are free and inside one block
    /// (the data of a file placed in a large directory, right after its
    /// neighbour's); None otherwise. FFS's own fragment search takes the
    /// best-fitting run instead.
    fn alloc_frags_at(&mut self, bno: Frag, size: u64) -> Result<Option<Frag>> {
        let g = self.g;
        let frags = g.numfrags(size);
        let c = g.dtog(bno.get());
        let rel = g.dtogd(bno.get());
        let bstart = rel - rel % g.frag;
        if rel % g.frag + frags > g.frag
            || self.cs[to_index(c)].cs_nffree
                + (self.cs[to_index(c)].cs_nbfree * frag_count(g.frag))
                < frag_count(frags)
        {
            return Ok(None);
        }
        let mut cg = self.read_cg(c)?;
        if !(0..frags).all(|i| cg.frag_free(rel + i)) {
            return Ok(None);
        }
        let before = cg.cg_cs();
        let mut cs = cg.cg_cs();
        if (0..g.frag).all(|i| cg.frag_free(bstart + i)) {
            // A whole free block is split.
            cs.cs_nbfree -= 1;
            cs.cs_nffree += frag_count(g.frag - frags);
            clusteracct(&g, &mut cg, bstart / g.frag, -1);
            for i in 0..frags {
                cg.set_frag_free(rel + i, false);
            }
            cg.set_cg_cs(cs);
            fragacct(&mut cg, bstart, g.frag, 1);
        } else {
            fragacct(&mut cg, bstart, g.frag, -1);
            for i in 0..frags {
                cg.set_frag_free(rel + i, false);
            }
            cs.cs_nffree -= frag_count(frags);
            cg.set_cg_cs(cs);
            fragacct(&mut cg, bstart, g.frag, 1);
        }
        self.commit_cg(c, cg, before)?;
        Ok(Some(bno))
    }

    /// `ffs_alloccg`: a block or fragments from group `c`, or None.
    fn alloccg(&mut self, c: u64, bpref: Frag, size: u64) -> Result<Option<Frag>> {
        let g = self.g;
        if self.cs[to_index(c)].cs_nbfree == 0 && size == g.bsize {
            return Ok(None);
        }
        if self.cs[to_index(c)].cs_nbfree == 0
            && self.cs[to_index(c)].cs_nffree < frag_count(g.numfrags(size))
        {
            return Ok(None);
        }
        let mut cg = self.read_cg(c)?;
        let before = cg.cg_cs();
        if before.cs_nbfree == 0 && size == g.bsize {
            return Ok(None);
        }
        if size == g.bsize {
            let b = self.alloccgblk(&mut cg, c, bpref);
            if b.is_some() {
                self.commit_cg(c, cg, before)?;
            }
            return Ok(b);
        }
        let frags = g.numfrags(size);
        let mut allocsiz = frags;
        while allocsiz < g.frag && cg.cg_frsum(to_index(allocsiz)) == 0 {
            allocsiz += 1;
        }
        if allocsiz == g.frag {
            // No suitable run: split a whole block.
            if before.cs_nbfree == 0 {
                return Ok(None);
            }
            let Some(bno) = self.alloccgblk(&mut cg, c, bpref) else {
                return Ok(None);
            };
            let rel = g.dtogd(bno.get());
            for i in frags..g.frag {
                cg.set_frag_free(rel + i, true);
            }
            let left = g.frag - frags;
            let mut cs = cg.cg_cs();
            cs.cs_nffree += frag_count(left);
            cg.set_cg_cs(cs);
            let left = to_index(left);
            cg.set_cg_frsum(left, cg.cg_frsum(left) + 1);
            self.commit_cg(c, cg, before)?;
            return Ok(Some(bno));
        }
        let Some(rel) = mapsearch(&g, &mut cg, c, bpref, allocsiz) else {
            return Err(Error::damaged(
                crate::error::Damage::Group(c),
                format!(
                "cylinder group {c}: cg_frsum promises a free run of {allocsiz} that the map lacks"
            ),
            ));
        };
        for i in 0..frags {
            cg.set_frag_free(rel + i, false);
        }
        let mut cs = cg.cg_cs();
        cs.cs_nffree -= frag_count(frags);
        cg.set_cg_cs(cs);
        let run = to_index(allocsiz);
        cg.set_cg_frsum(run, cg.cg_frsum(run).saturating_sub(1));
        if frags != allocsiz {
            let r = to_index(allocsiz - frags);
            cg.set_cg_frsum(r, cg.cg_frsum(r) + 1);
        }
        self.commit_cg(c, cg, before)?;
        Ok(Some(Frag::new(g.cgbase(c) + rel)))
    }

    /// `ffs_alloccgblk`: a whole block from the loaded group, preferring
    /// `bpref`; updates maps and counters in `cg` (caller commits).
    fn alloccgblk(&mut self, cg: &mut Cg, c: u64, bpref: Frag) -> Option<Frag> {
        let g = self.g;
        let ndblk = g.cg_nfrags(c);
        let rel = if bpref.is_none() || g.dtog(bpref.get()) != c {
            u64::from(cg.cg_rotor())
        } else {
            g.dtogd(bpref.get()) / g.frag * g.frag
        };
        // Whole blocks are block-aligned, whatever the rotor on disk says.
        let rel = rel / g.frag * g.frag;
        let rel = if rel + g.frag > ndblk { 0 } else { rel };
        let bno = if cg.block_free(rel / g.frag, g.frag) {
            rel
        } else {
            let b = find_free_block(&g, cg, c, rel)?;
            // Below the group's fragment count, a 32-bit field.
            cg.set_cg_rotor(low_u32(b));
            b
        };
        let blk = bno / g.frag;
        for i in 0..g.frag {
            cg.set_frag_free(bno + i, false);
        }
        clusteracct(&g, cg, blk, -1);
        let mut cs = cg.cg_cs();
        cs.cs_nbfree -= 1;
        cg.set_cg_cs(cs);
        Some(Frag::new(g.cgbase(c) + bno))
    }

    /// `ffs_fragextend`: grows the fragment run at `bprev` from `osize` to
    /// `nsize` bytes in place, if the following fragments are free.
    pub fn fragextend(&mut self, bprev: Frag, osize: u64, nsize: u64) -> Result<bool> {
        let g = self.g;
        let c = g.dtog(bprev.get());
        let ofrags = g.numfrags(osize);
        let frags = g.numfrags(nsize);
        // A negative count (a damaged summary) is no room, as FreeBSD's
        // signed comparison has it.
        if u64::try_from(self.cs[to_index(c)].cs_nffree).unwrap_or(0) < frags - ofrags {
            return Ok(false);
        }
        let bbase = bprev.get() % g.frag;
        if bbase + frags > g.frag {
            return Ok(false);
        }
        let mut cg = self.read_cg(c)?;
        let before = cg.cg_cs();
        let rel = g.dtogd(bprev.get());
        if rel + frags > g.cg_nfrags(c) {
            return Ok(false);
        }
        for i in ofrags..frags {
            if !cg.frag_free(rel + i) {
                return Ok(false);
            }
        }
        // The free run that starts right after the old fragments.
        let mut end = frags;
        while bbase + end < g.frag && cg.frag_free(rel + end) {
            end += 1;
        }
        let r = to_index(end - ofrags);
        cg.set_cg_frsum(r, cg.cg_frsum(r).saturating_sub(1));
        if end != frags {
            let r2 = to_index(end - frags);
            cg.set_cg_frsum(r2, cg.cg_frsum(r2) + 1);
        }
        for i in ofrags..frags {
            cg.set_frag_free(rel + i, false);
        }
        let mut cs = cg.cg_cs();
        cs.cs_nffree -= frag_count(frags - ofrags);
        cg.set_cg_cs(cs);
        self.commit_cg(c, cg, before)?;
        Ok(true)
    }

    /// Releases `size` bytes at fragment `bno` that inode `ino` pointed at.
    /// Without ordering (async, or `ino` [`Ino::NONE`] for blocks nothing ever pointed
    /// at) they are free at once; otherwise they wait until the inode
    /// write clearing the pointer is durable (the next `write_inode(ino)`
    /// attaches them). Unwritten data in them is abandoned now.
    pub fn free_blocks(&mut self, ino: Ino, bno: Frag, size: u64) -> Result<()> {
        self.release_blocks(ino, crate::order::Freed::Blocks { bno, size })
    }

    /// Like [`free_blocks`](Self::free_blocks), for a fragment run whose
    /// contents moved to a new place (see [`crate::order::Freed::Moved`]).
    pub fn free_moved_blocks(&mut self, ino: Ino, bno: Frag, size: u64) -> Result<()> {
        self.release_blocks(ino, crate::order::Freed::Moved { bno, size })
    }

    fn release_blocks(&mut self, ino: Ino, what: crate::order::Freed) -> Result<()> {
        let (crate::order::Freed::Blocks { bno, size } | crate::order::Freed::Moved { bno, size }) =
            what
        else {
            return Err(Error::new(
                crate::error::ErrorKind::Invalid,
                "internal error: releasing an inode as blocks",
            ));
        };
        if ino.is_none() || !self.cache.mode().tracks() {
            return self.free_blocks_now(bno, size);
        }
        self.cache.discard_data(bno, self.g.numfrags(size));
        self.order.inode_deps(ino).frees.push(what);
        Ok(())
    }

    /// `ffs_blkfree`: returns `size` bytes at fragment `bno` to the free maps.
    pub fn free_blocks_now(&mut self, bno: Frag, size: u64) -> Result<()> {
        self.free_now(vec![Freed::Blocks { bno, size }])
    }

    /// Does the releases `frees` now, each cylinder group read and stored
    /// once for all of its releases (a group is 32 KiB, copied in and out:
    /// a sync after 100,000 files removed releases 100,000 inodes).
    /// Releases of addresses or inodes outside the file system are refused
    /// and the others done; one the maps call free already (damage) stops
    /// the rest, those before it in its group stored. The first refusal is
    /// the error.
    pub fn free_now(&mut self, frees: Vec<Freed>) -> Result<()> {
        let g = self.g;
        let mut refused = None;
        let mut frees: Vec<Freed> = frees
            .into_iter()
            .filter(|f| {
                let ok = match *f {
                    Freed::Blocks { bno, size } | Freed::Moved { bno, size } => {
                        self.check_freed_blocks(bno, size)
                    }
                    Freed::Inode { ino, .. } => self.check_ino(ino),
                };
                ok.map_err(|e| refused.get_or_insert(e)).is_ok()
            })
            .collect();
        let group = |f: &Freed| match *f {
            Freed::Blocks { bno, .. } | Freed::Moved { bno, .. } => g.dtog(bno.get()),
            Freed::Inode { ino, .. } => g.ino_to_cg(ino.get()),
        };
        frees.sort_by_key(group);
        let mut rest = &frees[..];
        while let Some(first) = rest.first() {
            let c = group(first);
            let n = rest.iter().take_while(|f| group(f) == c).count();
            let (these, after) = rest.split_at(n);
            rest = after;
            let mut cg = self.read_cg(c)?;
            let before = cg.cg_cs();
            let mut failed = None;
            for f in these {
                let r = match *f {
                    Freed::Blocks { bno, size } | Freed::Moved { bno, size } => {
                        self.block_frees += 1;
                        self.cache.discard(bno, g.numfrags(size));
                        free_blocks_in(&g, &mut cg, bno, size)
                    }
                    Freed::Inode { ino, was_dir } => free_inode_in(&g, &mut cg, ino, was_dir),
                };
                if let Err(e) = r {
                    failed = Some(e);
                    break;
                }
            }
            self.commit_cg(c, cg, before)?;
            if let Some(e) = failed {
                return Err(e);
            }
        }
        refused.map_or(Ok(()), Err)
    }

    /// A released run's address and size make sense (within the file
    /// system, past the superblock, inside one block).
    fn check_freed_blocks(&self, bno: Frag, size: u64) -> Result<()> {
        let g = self.g;
        let nfr = g.numfrags(size);
        if bno.get() < g.sblkno
            || bno.checked_offset(nfr).is_none_or(|e| e.get() > g.size)
            || nfr == 0
            || nfr > g.frag
            || (bno.get() % g.frag) + nfr > g.frag
        {
            return Err(Error::damaged(
                crate::error::Damage::Block(bno),
                format!("freeing bad block {bno} ({size} bytes)"),
            ));
        }
        Ok(())
    }

    /// `ffs_valloc`: a new inode for a child of `parent`.
    /// Waits for released inodes like [`alloc_block`](Self::alloc_block).
    pub fn alloc_inode(&mut self, parent: Ino, is_dir: bool) -> Result<Ino> {
        match self.alloc_inode_once(parent, is_dir) {
            Err(e)
                if e.kind == crate::error::ErrorKind::NoSpace
                    && !self.order.deferred.is_empty() =>
            {
                self.sync()?;
                self.alloc_inode_once(parent, is_dir)
            }
            r => r,
        }
    }

    fn alloc_inode_once(&mut self, parent: Ino, is_dir: bool) -> Result<Ino> {
        self.check_writable()?;
        if self.sb.fs_cstotal().cs_nifree <= 0 {
            return Err(self.nospace("inodes"));
        }
        let ipref = if is_dir {
            self.dirpref(parent)
        } else {
            parent.get()
        };
        let ipref = if ipref >= self.g.ninodes() { 0 } else { ipref };
        let cg = self.g.ino_to_cg(ipref);
        match self.hashalloc(cg, |fs, c, _| fs.nodealloccg(c, ipref, is_dir))? {
            Some(ino) => Ok(Ino::new(ino)),
            None => Err(self.nospace("inodes")),
        }
    }

    /// `ffs_nodealloccg`: an inode from group `c`.
    fn nodealloccg(&mut self, c: u64, ipref: u64, is_dir: bool) -> Result<Option<u64>> {
        let g = self.g;
        if self.cs[to_index(c)].cs_nifree == 0 {
            return Ok(None);
        }
        let cg = self.read_cg(c)?;
        let before = cg.cg_cs();
        if before.cs_nifree == 0 {
            return Ok(None);
        }
        let mut rel = if ipref != 0 && g.ino_to_cg(ipref) == c {
            ipref % g.ipg
        } else {
            u64::from(cg.cg_irotor()) % g.ipg
        };
        if cg.inode_used(rel) {
            let start = u64::from(cg.cg_irotor()) % g.ipg;
            let found = (start..g.ipg).chain(0..start).find(|&i| !cg.inode_used(i));
            match found {
                Some(i) => rel = i,
                None => {
                    return Err(Error::damaged(
                        crate::error::Damage::Group(c),
                        format!(
                            "cylinder group {c}: counts {} free inodes but its map has none",
                            before.cs_nifree
                        ),
                    ))
                }
            }
        }
        self.claim_inode(c, cg, before, rel, is_dir).map(Some)
    }

    /// Takes free inode `rel` of group `c` (whose copy is `cg`, counters
    /// `before`): initialises its inode block if needed, marks it and moves
    /// the counters.
    fn claim_inode(
        &mut self,
        c: u64,
        mut cg: Cg,
        before: Csum,
        rel: u64,
        is_dir: bool,
    ) -> Result<u64> {
        let g = self.g;
        // Below fs_ipg, which the superblock keeps within 32 bits.
        cg.set_cg_irotor(low_u32(rel));
        let ino = c * g.ipg + rel;
        if ino < UFS_ROOTINO {
            // Inodes 0 and 1 are never handed out; mark and retry elsewhere.
            return Err(Error::damaged(
                crate::error::Damage::Group(c),
                format!("cylinder group {c}: reserved inode {ino} is marked free"),
            ));
        }
        // Lazy initialisation: make sure the inode's block has been written
        // (UFS2; newfs initialised every UFS1 inode).
        let mut made = Vec::new();
        while g.lazy_inodes()
            && rel + g.inopb > u64::from(cg.cg_initediblk())
            && u64::from(cg.cg_initediblk()) < g.ipg
        {
            let first = c * g.ipg + u64::from(cg.cg_initediblk());
            let addr = self.inode_block(Ino::new(first));
            let gens: Vec<u32> = (0..g.inopb).map(|_| self.random_gen()).collect();
            let b = self
                .cache
                .create(addr, to_index(g.bsize), BlockKind::Inode)?;
            let ds = g.dinode_size();
            for (i, gen) in gens.into_iter().enumerate() {
                let mut fresh = Dinode::default();
                fresh.set_di_gen(gen);
                fresh.encode_into(g.v, &mut b[i * ds..(i + 1) * ds], false);
            }
            // At most fs_ipg (the loop's condition), a 32-bit count.
            cg.set_cg_initediblk(cg.cg_initediblk() + low_u32(g.inopb));
            made.push(self.cache.latest(addr));
        }
        if !made.is_empty() && self.cache.mode().tracks() {
            // fsck reads inodes up to cg_initediblk: the group may count the
            // new blocks only once they are on disk (FreeBSD's
            // ffs_nodealloccg uses a barrier write; here the field waits,
            // rolled back, while the rest of the group goes out).
            let len = to_index(g.fragroundup(g.cgsize));
            self.cache.modify_tracked(
                self.cg_block(c),
                len,
                BlockKind::Cg,
                ufs_format::cg::CG_INITEDIBLK_OFF,
                4,
                &made,
                Vec::new(),
            )?;
        }
        cg.set_inode_used(rel, true);
        let mut cs = cg.cg_cs();
        cs.cs_nifree -= 1;
        if is_dir {
            cs.cs_ndir += 1;
            let cd = &mut self.contigdirs[to_index(c)];
            *cd = cd.saturating_add(1);
        } else {
            let cd = &mut self.contigdirs[to_index(c)];
            if *cd > 0 {
                *cd -= 1;
            }
        }
        cg.set_cg_cs(cs);
        self.commit_cg(c, cg, before)?;
        if self.cache.mode().orders_maps() {
            // The initialised inode goes to disk only after its bit (as
            // soft updates' inode-map dependency): an inode on disk is
            // never in use while its map calls it free.
            let bit = self.cache.region_latest(self.cg_block(c), 0);
            if bit != crate::order::ChangeId::NONE {
                self.order.inode_deps(Ino::new(ino)).needs.push(bit);
            }
        } else if !made.is_empty() && self.cache.mode().tracks() {
            // Names do not wait for the group in normal and sync modes, but
            // fsck reads no inode past `cg_initediblk`: the group goes out
            // now that it counts new blocks (one write in 128 files, with
            // 32 KiB blocks).
            let id = self.cache.latest(self.cg_block(c));
            self.cache.force_ids(&[id])?;
        }
        Ok(ino)
    }

    /// The first free inode in `[from, to)` (global numbers), searching
    /// forwards group by group; takes it. For the large-directory placement,
    /// which hands out goals inside a reserved range.
    pub fn alloc_inode_in(&mut self, from: u64, to: u64) -> Result<Option<Ino>> {
        self.check_writable()?;
        let g = self.g;
        let to = to.min(g.ninodes());
        let mut at = from.max(UFS_ROOTINO + 1);
        while at < to {
            let c = g.ino_to_cg(at);
            let end = to.min((c + 1) * g.ipg);
            if self.cs[to_index(c)].cs_nifree > 0 {
                let cg = self.read_cg(c)?;
                let before = cg.cg_cs();
                if let Some(rel) = (at % g.ipg..end - c * g.ipg).find(|&i| !cg.inode_used(i)) {
                    return self
                        .claim_inode(c, cg, before, rel, false)
                        .map(|n| Some(Ino::new(n)));
                }
            }
            at = end;
        }
        Ok(None)
    }

    /// The last free inode in `[from, to)` (global numbers), searching
    /// backwards group by group; takes it.
    pub fn alloc_inode_last_in(&mut self, from: u64, to: u64) -> Result<Option<Ino>> {
        self.check_writable()?;
        let g = self.g;
        let from = from.max(UFS_ROOTINO + 1);
        let mut end = to.min(g.ninodes());
        while end > from {
            let c = g.ino_to_cg(end - 1);
            let start = from.max(c * g.ipg);
            if self.cs[to_index(c)].cs_nifree > 0 {
                let cg = self.read_cg(c)?;
                let before = cg.cg_cs();
                if let Some(rel) = (start - c * g.ipg..end - c * g.ipg)
                    .rev()
                    .find(|&i| !cg.inode_used(i))
                {
                    return self
                        .claim_inode(c, cg, before, rel, false)
                        .map(|n| Some(Ino::new(n)));
                }
            }
            end = start;
        }
        Ok(None)
    }

    /// Free inodes among `[from, to)` (global numbers).
    pub fn free_inodes_in(&mut self, from: u64, to: u64) -> Result<u64> {
        let g = self.g;
        let to = to.min(g.ninodes());
        let mut at = from;
        let mut n = 0;
        while at < to {
            let c = g.ino_to_cg(at);
            let end = to.min((c + 1) * g.ipg);
            let free = u64::try_from(self.cs[to_index(c)].cs_nifree).unwrap_or(0);
            if at == c * g.ipg && end == (c + 1) * g.ipg {
                n += free;
            } else if free > 0 {
                let cg = self.read_cg(c)?;
                n += (at % g.ipg..end - c * g.ipg)
                    .filter(|&i| !cg.inode_used(i))
                    .count() as u64;
            }
            at = end;
        }
        Ok(n)
    }

    /// `ffs_freefile`: returns inode `ino` to its group's map.
    pub fn free_inode_now(&mut self, ino: Ino, was_dir: bool) -> Result<()> {
        self.free_now(vec![Freed::Inode { ino, was_dir }])
    }

    /// Preferred inode for a new directory under `parent`.
    pub fn dirpref(&mut self, parent: Ino) -> u64 {
        match self.opts.dirpref {
            DirPref::Orlov => self.dirpref_orlov(parent),
            DirPref::Traditional => self.dirpref_traditional(),
        }
    }

    /// 4.4BSD: among groups with at least the average number of free
    /// inodes, the one with the fewest directories.
    fn dirpref_traditional(&self) -> u64 {
        let avgifree = self.sb.fs_cstotal().cs_nifree / to_signed(self.g.ncg);
        let mut minndir = to_signed(self.g.ipg);
        let mut mincg = 0;
        for (c, cs) in (0u64..).zip(&self.cs) {
            if i64::from(cs.cs_nifree) >= avgifree && i64::from(cs.cs_ndir) < minndir {
                mincg = c;
                minndir = i64::from(cs.cs_ndir);
            }
        }
        mincg * self.g.ipg
    }

    /// Orlov's policy as in FreeBSD's `ffs_dirpref`.
    fn dirpref_orlov(&mut self, parent: Ino) -> u64 {
        let g = self.g;
        let ncg = g.ncg;
        let t = self.sb.fs_cstotal();
        let avgifree = t.cs_nifree / to_signed(ncg);
        let avgbfree = t.cs_nbfree / to_signed(ncg);
        let avgndir = t.cs_ndir / to_signed(ncg);
        if parent == Ino::ROOT {
            // Top-level directories spread out: random start, then the
            // group with fewest directories and enough room.
            let prefcg = self.rng.gen_range(0..ncg);
            let mut mincg = prefcg;
            let mut minndir = to_signed(g.ipg);
            for c in (prefcg..ncg).chain(0..prefcg) {
                let cs = self.cs[to_index(c)];
                if i64::from(cs.cs_ndir) < minndir
                    && i64::from(cs.cs_nifree) >= avgifree
                    && i64::from(cs.cs_nbfree) >= avgbfree
                {
                    mincg = c;
                    minndir = i64::from(cs.cs_ndir);
                }
            }
            return g.ipg * mincg;
        }
        let maxndir = (avgndir + to_signed(g.ipg) / 16).min(to_signed(g.ipg));
        let minifree = (avgifree - avgifree / 4).max(1);
        let minbfree = (avgbfree - avgbfree / 4).max(1);
        let cgsize = to_signed(g.fsize * g.fpg);
        let mut dirsize = i64::from(self.sb.fs_avgfilesize()) * i64::from(self.sb.fs_avgfpdir());
        let curdirsize = if avgndir != 0 {
            (cgsize - avgbfree * to_signed(g.bsize)) / avgndir
        } else {
            0
        };
        if dirsize < curdirsize {
            dirsize = curdirsize;
        }
        let mut maxcontigdirs = if dirsize <= 0 {
            0
        } else {
            ((avgbfree * to_signed(g.bsize)) / dirsize).min(255)
        };
        if self.sb.fs_avgfpdir() > 0 {
            maxcontigdirs = maxcontigdirs.min(to_signed(g.ipg) / i64::from(self.sb.fs_avgfpdir()));
        }
        if maxcontigdirs == 0 {
            maxcontigdirs = 1;
        }
        let prefcg = g.ino_to_cg(parent.get());
        for c in (prefcg..ncg).chain(0..prefcg) {
            let cs = self.cs[to_index(c)];
            if i64::from(cs.cs_ndir) < maxndir
                && i64::from(cs.cs_nifree) >= minifree
                && i64::from(cs.cs_nbfree) >= minbfree
                && (!self.opts.contigdirs
                    || i64::from(self.contigdirs[to_index(c)]) < maxcontigdirs)
            {
                return g.ipg * c;
            }
        }
        // Backstop when space is short: any group with average free inodes.
        for c in (prefcg..ncg).chain(0..prefcg) {
            if i64::from(self.cs[to_index(c)].cs_nifree) >= avgifree {
                return g.ipg * c;
            }
        }
        g.ipg * prefcg
    }

    /// `ffs_blkpref_ufs2` for data blocks: where logical block `lbn` of
    /// inode `ino` should go; `indx` is its slot in the pointer array, `prev`
    /// the pointer of the slot before it (0 if none) and `ib0` the inode's
    /// first indirect pointer.
    pub fn blkpref(
        &mut self,
        ino: Ino,
        is_dir: bool,
        lbn: u64,
        indx: u64,
        prev: Frag,
        ib0: Frag,
    ) -> BlockPref {
        let g = self.g;
        // A file placed in a large directory: its data follows the data of
        // the inode before it (placement.rs).
        if lbn == 0 && !is_dir && prev.is_none() {
            if let Some(p) = self.data_pref(ino) {
                return BlockPref {
                    bno: p,
                    exact: true,
                };
            }
        }
        let inocg = g.ino_to_cg(ino.get());
        // The first block under the first indirect follows that indirect
        // block when it sits in the data zone of the inode's group.
        if lbn == UFS_NDADDR as u64
            && !ib0.is_none()
            && ib0.get() >= g.cgdmin(inocg) + g.metaspace
            && ib0.get() < g.cgbase(inocg + 1)
        {
            return BlockPref::near(ib0.offset(g.frag));
        }
        let prev = if prev.get() >= g.size {
            Frag::NONE
        } else {
            prev
        };
        if indx.is_multiple_of(g.maxbpg) || prev.is_none() {
            // Directories start next to the inodes (the metadata zone).
            if is_dir {
                return BlockPref::near(Frag::new(g.cgdmin(inocg)));
            }
            // Small files stay in their inode's group, after the metadata zone.
            if lbn < UFS_NDADDR as u64 + g.nindir {
                return BlockPref::near(Frag::new(g.cgdmin(inocg) + g.metaspace));
            }
            // Start a new section in a group with more than average free blocks.
            let startcg = if indx == 0 || prev.is_none() {
                inocg + lbn / g.maxbpg
            } else {
                g.dtog(prev.get()) + 1
            } % g.ncg;
            let avgbfree = self.sb.fs_cstotal().cs_nbfree / to_signed(g.ncg);
            for c in (startcg..g.ncg).chain(0..=startcg) {
                if i64::from(self.cs[to_index(c)].cs_nbfree) >= avgbfree {
                    // Below fs_ncg, at most 2^31 by the superblock's checks.
                    self.sb.set_fs_cgrotor(i32::try_from(c).unwrap_or(0));
                    return BlockPref::near(Frag::new(g.cgdmin(c) + g.metaspace));
                }
            }
            return BlockPref::near(Frag::NONE);
        }
        BlockPref::near(prev.offset(g.frag))
    }

    /// `ffs_blkpref_ufs2` for indirect blocks: the metadata zone of the
    /// inode's group, except that a file's first single-indirect block goes
    /// right after its last direct block.
    pub fn indir_pref(&self, ino: Ino, level: usize, lbn: u64, db11: Frag) -> BlockPref {
        let g = self.g;
        if level == 1
            && lbn < UFS_NDADDR as u64 + g.nindir
            && !db11.is_none()
            && db11.get() < g.size
        {
            return BlockPref::near(db11.offset(g.frag));
        }
        BlockPref::near(Frag::new(g.cgdmin(g.ino_to_cg(ino.get()))))
    }
}

/// Finds a wholly free block in the group, scanning from cg-relative
/// fragment `from` and wrapping. Returns its cg-relative first fragment.
fn find_free_block(g: &Geometry, cg: &Cg, c: u64, from: u64) -> Option<u64> {
    let nblk = g.cg_nfrags(c) / g.frag;
    if nblk == 0 {
        return None;
    }
    let start = (from / g.frag).min(nblk - 1);
    // All `frag` bits (at most 8) set.
    let full = u8::MAX >> (8 - g.frag);
    if g.frag == 8 {
        // One map byte per block: a plain byte search.
        let map = cg.frag_map(nblk * 8);
        let hit = map[to_index(start)..]
            .iter()
            .position(|&b| b == 0xff)
            .map(|i| start + i as u64);
        let hit = hit.or_else(|| {
            map[..to_index(start)]
                .iter()
                .position(|&b| b == 0xff)
                .map(|i| i as u64)
        });
        return hit.map(|b| b * g.frag);
    }
    (start..nblk)
        .chain(0..start)
        .find(|&b| cg.block_bits(b, g.frag) == full)
        .map(|b| b * g.frag)
}

/// `ffs_mapsearch` for fragments: the first block (from `bpref`, or the
/// group's fragment rotor) holding a maximal free run of exactly `allocsiz`
/// fragments. Returns the run's cg-relative start and advances the rotor.
fn mapsearch(g: &Geometry, cg: &mut Cg, c: u64, bpref: Frag, allocsiz: u64) -> Option<u64> {
    let nblk = g.cg_nfrags(c).div_ceil(g.frag);
    if nblk == 0 {
        return None;
    }
    let start = if !bpref.is_none() && g.dtog(bpref.get()) == c {
        g.dtogd(bpref.get())
    } else {
        u64::from(cg.cg_frotor())
    } / g.frag;
    let start = start.min(nblk - 1);
    let want = 1u16 << allocsiz;
    if g.frag == 8 {
        // One map byte per block: skip full and empty blocks a byte at a time.
        let map = cg.frag_map(nblk * 8);
        let table = &RUNS[3];
        let fits = |x: u8| table[usize::from(x)] & want != 0;
        let start_i = to_index(start);
        let hit = first_partial_fit(&map[start_i..], fits).map(|i| start + i as u64);
        let hit = hit.or_else(|| first_partial_fit(&map[..start_i], fits).map(|i| i as u64));
        let b = hit?;
        let s = run_start(map[to_index(b)], 8, allocsiz)?;
        // Rotors are below the group's fragment count, a 32-bit field.
        cg.set_cg_frotor(low_u32(b * 8));
        return Some(b * 8 + s);
    }
    for b in (start..nblk).chain(0..start) {
        let bits = cg.block_bits(b, g.frag);
        if bits == 0 || runs_of(bits, g.frag) & want == 0 {
            continue;
        }
        if let Some(s) = run_start(bits, g.frag, allocsiz) {
            let bstart = b * g.frag;
            cg.set_cg_frotor(low_u32(bstart));
            return Some(bstart + s);
        }
    }
    None
}

/// The first byte of a fragment map (one byte per block of eight
/// fragments) that `fits`, among those neither full (0) nor wholly free
/// (0xff): a free run of a given length is only ever looked for in a
/// partly used block. Eight bytes at a time are passed over while each is
/// 0 or 0xff (all of a byte's bits equal), which is most of a group: after
/// an extraction the partly used blocks are few and far apart.
fn first_partial_fit(map: &[u8], fits: impl Fn(u8) -> bool) -> Option<usize> {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    let mut i = 0;
    for chunk in map.chunks_exact(8) {
        let w = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
        // Each byte's bit k against its bit k+1 (bit 7 against the next
        // byte's bit 0 is masked off): all zero iff every byte is uniform.
        if (w ^ (w >> 1)) & LOW7 != 0 {
            if let Some(j) = chunk.iter().position(|&x| x != 0 && x != 0xff && fits(x)) {
                return Some(i + j);
            }
        }
        i += 8;
    }
    map[i..]
        .iter()
        .position(|&x| x != 0 && x != 0xff && fits(x))
        .map(|j| i + j)
}

/// `ffs_blkfree`'s work on the group `cg` (checked by
/// `check_freed_blocks`): `size` bytes at fragment `bno` marked free, with
/// the counts and cluster summaries.
fn free_blocks_in(g: &Geometry, cg: &mut Cg, bno: Frag, size: u64) -> Result<()> {
    let nfr = g.numfrags(size);
    let rel = g.dtogd(bno.get());
    // Checked before anything changes: a refused release leaves the group
    // as it was.
    if let Some(i) = (0..nfr).find(|&i| cg.frag_free(rel + i)) {
        let what = if nfr == g.frag {
            format!("freeing free block {bno}")
        } else {
            format!("freeing free fragment {}", bno.offset(i))
        };
        let at = if nfr == g.frag { bno } else { bno.offset(i) };
        return Err(Error::damaged(crate::error::Damage::Block(at), what));
    }
    let mut cs = cg.cg_cs();
    if nfr == g.frag {
        for i in 0..g.frag {
            cg.set_frag_free(rel + i, true);
        }
        clusteracct(g, cg, rel / g.frag, 1);
        cs.cs_nbfree += 1;
    } else {
        let bbase = rel - rel % g.frag;
        fragacct(cg, bbase, g.frag, -1);
        for i in 0..nfr {
            cg.set_frag_free(rel + i, true);
        }
        cs.cs_nffree += frag_count(nfr);
        fragacct(cg, bbase, g.frag, 1);
        if cg.block_free(bbase / g.frag, g.frag) {
            cs.cs_nffree -= frag_count(g.frag);
            cs.cs_nbfree += 1;
            clusteracct(g, cg, bbase / g.frag, 1);
        }
    }
    cg.set_cg_cs(cs);
    Ok(())
}

/// `ffs_freefile`'s work on the group `cg` of inode `ino`: its bit
/// cleared, the rotor and counts.
fn free_inode_in(g: &Geometry, cg: &mut Cg, ino: Ino, was_dir: bool) -> Result<()> {
    let rel = ino.get() % g.ipg;
    if !cg.inode_used(rel) {
        return Err(Error::damaged(
            crate::error::Damage::Inode(ino),
            format!("freeing free inode {ino}"),
        ));
    }
    cg.set_inode_used(rel, false);
    if rel < u64::from(cg.cg_irotor()) {
        // Below the rotor, a 32-bit field.
        cg.set_cg_irotor(low_u32(rel));
    }
    let mut cs = cg.cg_cs();
    cs.cs_nifree += 1;
    if was_dir {
        cs.cs_ndir -= 1;
    }
    cg.set_cg_cs(cs);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{first_partial_fit, RUNS};
    use crate::dev::MemDevice;
    use crate::Ino;
    use proptest::prelude::*;

    proptest! {
        /// The word-at-a-time scan of a fragment map finds the same block
        /// as looking at every byte, for maps of mostly full and free
        /// blocks with partly used ones scattered among them.
        #[test]
        fn the_fast_fragment_map_scan_finds_what_a_byte_scan_finds(
            map in proptest::collection::vec(
                prop_oneof![4 => Just(0u8), 4 => Just(0xffu8), 1 => any::<u8>()], 0..200),
            allocsiz in 1u32..8,
        ) {
            let want = 1u16 << allocsiz;
            let fits = |x: u8| RUNS[3][x as usize] & want != 0;
            let slow = map.iter().position(|&x| x != 0 && fits(x));
            prop_assert_eq!(first_partial_fit(&map, fits), slow);
        }
    }

    use crate::newfs::{newfs, NewfsParams};
    use crate::ops::Fs;
    use crate::order::Freed;
    use crate::{Cred, MountOptions};
    use ufs_format::bytes::to_index;

    /// A group parsed, changed and stored hands back its header and the
    /// bytes of the maps it changed, and those applied to the block it
    /// was parsed from give the whole group as changed.
    #[test]
    fn a_stored_group_is_its_header_and_the_map_bytes_that_changed() {
        let dev = MemDevice::new(64 << 20);
        newfs(&dev, &NewfsParams::default()).unwrap();
        let fs = Fs::open(Box::new(dev), MountOptions::default()).unwrap();
        let mut c = fs.lock();
        let g = c.g;
        let before = c.read_cg(0).unwrap();
        let mut cg = before.clone();
        let f = g.fpg / 2;
        let was = cg.frag_free(f);
        cg.set_frag_free(f, !was);
        cg.set_inode_used(g.ipg - 1, true);
        cg.set_cg_rotor(7);
        let pieces: Vec<(usize, Vec<u8>)> = cg.changed().map(|(at, b)| (at, b.to_vec())).collect();
        assert_eq!(pieces[0].0, 0, "the header first");
        let map_bytes: usize = pieces[1..].iter().map(|(_, b)| b.len()).sum();
        let (lo, hi) = (
            cg.cg_iusedoff() as usize,
            cg.cg_freeoff() as usize + (f / 8) as usize + 1,
        );
        assert_eq!(
            map_bytes,
            hi - (lo + ((g.ipg - 1) / 8) as usize),
            "only the span of the changes"
        );
        let mut block = before.as_bytes().to_vec();
        for (at, b) in &pieces {
            block[*at..*at + b.len()].copy_from_slice(b);
        }
        assert_eq!(block, cg.as_bytes());
        drop(before);
        // A parse after a drop reuses the map buffer and starts untouched.
        let again = c.read_cg(0).unwrap();
        assert_eq!(again.changed().count(), 1, "the header alone");
    }

    /// The block of group `c` as the cache holds it, parsed afresh, with
    /// the check-hash field (sealed at each write-out) left out.
    fn block_of(c: &mut crate::fs::FsCore, cgx: u64) -> Vec<u8> {
        let g = c.g;
        let len = to_index(g.fragroundup(g.cgsize));
        let b = c
            .cache
            .read(c.cg_block(cgx), len, crate::cache::BlockKind::Cg)
            .unwrap();
        without_ckhash(&b[..to_index(g.cgsize)])
    }

    fn bytes_of(cg: &ufs_format::cg::Cg) -> Vec<u8> {
        without_ckhash(cg.as_bytes())
    }

    fn without_ckhash(group: &[u8]) -> Vec<u8> {
        let mut v = group.to_vec();
        v[ufs_format::cg::CG_CKHASH_OFF..ufs_format::cg::CG_CKHASH_OFF + 4].fill(0);
        v
    }

    /// A group kept parsed after an allocation is what its block holds,
    /// through creates, writes that grow fragment tails, truncations and
    /// unlinks; and two copies of one group stored one after the other
    /// leave none kept, so the next read sees both changes.
    #[test]
    fn a_kept_group_is_what_its_block_holds() {
        let dev = MemDevice::new(64 << 20);
        newfs(
            &dev,
            &NewfsParams {
                softupdates: true,
                ..Default::default()
            },
        )
        .unwrap();
        let fs = Fs::open(Box::new(dev), MountOptions::default()).unwrap();
        for i in 0..300u32 {
            let name = format!("f{i}");
            let a = fs
                .mknod(fs.root(), name.as_bytes(), 0o100644, 0, Cred::ROOT)
                .unwrap();
            let rec = vec![i.to_le_bytes()[0]; 10240];
            for k in 0..(i % 5) as u64 {
                fs.write(a.ino, k * 10240, &rec, Cred::ROOT).unwrap();
            }
            if i % 7 == 0 {
                fs.unlink(fs.root(), name.as_bytes()).unwrap();
            }
        }
        let mut c = fs.lock();
        let g = c.g;
        for cgx in 0..g.ncg {
            let fresh = block_of(&mut c, cgx);
            let got = c.read_cg(cgx).unwrap();
            assert_eq!(bytes_of(&got), fresh, "group {cgx}");
        }
        // Two copies of group 0, each changed and stored.
        let (a, b) = (c.read_cg(0).unwrap(), c.read_cg(0).unwrap());
        let f = (0..g.fpg).rev().find(|&f| a.frag_free(f)).unwrap();
        let i = (0..g.ipg).rev().find(|&i| !a.inode_used(i)).unwrap();
        let (mut a, mut b) = (a, b);
        let before = a.cg_cs();
        a.set_frag_free(f, false);
        b.set_inode_used(i, true);
        c.commit_cg(0, a, before).unwrap();
        c.commit_cg(0, b, before).unwrap();
        let now = c.read_cg(0).unwrap();
        assert!(!now.frag_free(f) && now.inode_used(i), "both changes seen");
        assert_eq!(bytes_of(&now), block_of(&mut c, 0));
        // Undo, so the file system stays consistent for the unmount.
        let mut now = now;
        let before = now.cg_cs();
        now.set_frag_free(f, true);
        now.set_inode_used(i, false);
        c.commit_cg(0, now, before).unwrap();
    }

    #[test]
    fn releases_go_a_group_at_a_time_and_a_refused_one_loses_no_other() {
        let dev = MemDevice::new(64 << 20);
        newfs(
            &dev,
            &NewfsParams {
                seed: Some(1),
                time: Some(1),
                ..Default::default()
            },
        )
        .unwrap();
        let fs = Fs::open(Box::new(dev), MountOptions::default()).unwrap();
        let ino = |n: &[u8]| fs.mknod(fs.root(), n, 0o100644, 0, Cred::ROOT).unwrap().ino;
        let (a, b) = (ino(b"a"), ino(b"b"));
        let mut c = fs.lock();
        let g = c.g;
        let used = |c: &mut crate::fs::FsCore, i: Ino| {
            c.read_cg(g.ino_to_cg(i.get()))
                .unwrap()
                .inode_used(i.get() % g.ipg)
        };
        assert!(used(&mut c, a) && used(&mut c, b));
        let free_before = c.read_cg(g.ino_to_cg(a.get())).unwrap().cg_cs().cs_nifree;
        // A block in the boot area (group 0, with the inodes) and an inode
        // number outside the file system are refused; the two good
        // releases between them are still done.
        let inode = |ino| Freed::Inode {
            ino,
            was_dir: false,
        };
        let r = c.free_now(vec![
            inode(a),
            Freed::Blocks {
                bno: crate::Frag::new(1),
                size: g.fsize,
            },
            inode(b),
            inode(Ino::new(g.ninodes() + 5)),
        ]);
        assert!(r.unwrap_err().msg.contains("freeing bad block"));
        assert!(!used(&mut c, a) && !used(&mut c, b));
        let cs = c.read_cg(g.ino_to_cg(a.get())).unwrap().cg_cs();
        assert_eq!(cs.cs_nifree, free_before + 2);
        // Freeing a free inode is damage: refused, and the group's counts
        // stay as they were.
        let r = c.free_now(vec![inode(a)]);
        assert!(r.unwrap_err().msg.contains("freeing free inode"));
        assert_eq!(
            c.read_cg(g.ino_to_cg(a.get())).unwrap().cg_cs().cs_nifree,
            free_before + 2
        );
    }
}
