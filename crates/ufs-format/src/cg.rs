//! Cylinder group blocks (`struct cg`) and their maps.
//!
//! Invariants: a [`Cg`] holds exactly `fs_cgsize` bytes; [`Cg::parse`] checks
//! the magic, the group index and that every map offset and length lies
//! inside the buffer, so the map accessors cannot index out of range.
//! Map semantics (FreeBSD `sys/ufs/ffs/fs.h`): inode map bit set = inode in
//! use; fragment map bit set = fragment *free*; cluster map bit set = block
//! free; `cg_clustersum[i]` counts free clusters of length i (the last slot
//! counts clusters of at least `fs_contigsumsize` blocks).
//! Counters and offsets are in the file system's byte order (the
//! [`Geometry`]'s variant); maps are bytes. UFS1 groups keep the old
//! rotational tables (`cg_old_btotoff`, `cg_old_boff`) between the header
//! and the inode map and count their inodes in `cg_old_niblk`; all their
//! inodes are initialised by newfs, so `cg_initediblk` is UFS2's alone.
//! A [`Cg`] knows which bytes past its header may have changed since it was
//! parsed ([`Cg::changed`]); every setter of a map records what it touches,
//! and [`Cg::raw_mut`] counts as touching everything.
use crate::bytes::{low_i32, low_u32, to_index, Endian};
use crate::error::FormatError;
use crate::sb::{Csum, Geometry};
use crate::{CG_HEADER_SIZE, CG_MAGIC, MAXFRAG};

pub const CG_CS_OFF: usize = 24;
pub const CG_FRSUM_OFF: usize = 52;
pub const CG_CKHASH_OFF: usize = 132;
/// Byte offset of `cg_initediblk` (inodes whose blocks are initialised).
pub const CG_INITEDIBLK_OFF: usize = 120;

#[derive(Clone)]
pub struct Cg {
    raw: Vec<u8>,
    endian: Endian,
    /// The bytes past the header that may differ from what was parsed:
    /// `[lo, hi)`, empty when `lo >= hi`. The header is small and always
    /// stored; of the maps only what changed (a few bytes per allocation)
    /// has to go back (see [`Cg::changed`]).
    touched: (usize, usize),
    /// A mark its reader may set (not on disk): the engine stores the
    /// number of changes to the group it had seen at the read.
    tag: u64,
}

impl PartialEq for Cg {
    fn eq(&self, other: &Cg) -> bool {
        self.raw == other.raw
    }
}
impl Eq for Cg {}

/// The bits of one block's `frag` fragments (1, 2, 4 or 8) in a byte.
fn frag_mask(frag: u64) -> u8 {
    u8::try_from((1u16 << frag) - 1).unwrap_or(u8::MAX)
}

thread_local! {
    /// The map buffer of the last cylinder group dropped on this thread,
    /// reused by the next [`Cg::parse`]: an allocation of a group's size
    /// (32 KiB) per parse came from fresh pages more often than not under
    /// the daemon's allocator, a page fault per 4 KiB, which was most of
    /// what an allocation cost.
    static SPARE: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

const UNTOUCHED: (usize, usize) = (usize::MAX, 0);

impl Drop for Cg {
    fn drop(&mut self) {
        let raw = std::mem::take(&mut self.raw);
        // A thread being torn down has no spare to keep.
        let _ = SPARE.try_with(|s| s.set(raw));
    }
}

impl std::fmt::Debug for Cg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cg")
            .field("cg_cgx", &self.cg_cgx())
            .field("cg_cs", &self.cg_cs())
            .finish()
    }
}

impl Cg {
    #[inline]
    fn endian(&self) -> Endian {
        self.endian
    }

    crate::fields! {
        cg_firstfield / set_cg_firstfield: i32 @ 0;
        cg_magic / set_cg_magic: u32 @ 4;
        cg_old_time / set_cg_old_time: i32 @ 8;
        cg_cgx / set_cg_cgx: u32 @ 12;
        cg_old_ncyl / set_cg_old_ncyl: i16 @ 16;
        cg_old_niblk / set_cg_old_niblk: i16 @ 18;
        cg_ndblk / set_cg_ndblk: u32 @ 20;
        cg_rotor / set_cg_rotor: u32 @ 40;
        cg_frotor / set_cg_frotor: u32 @ 44;
        cg_irotor / set_cg_irotor: u32 @ 48;
        cg_old_btotoff / set_cg_old_btotoff: i32 @ 84;
        cg_old_boff / set_cg_old_boff: i32 @ 88;
        cg_iusedoff / set_cg_iusedoff: u32 @ 92;
        cg_freeoff / set_cg_freeoff: u32 @ 96;
        cg_nextfreeoff / set_cg_nextfreeoff: u32 @ 100;
        cg_clustersumoff / set_cg_clustersumoff: u32 @ 104;
        cg_clusteroff / set_cg_clusteroff: u32 @ 108;
        cg_nclusterblks / set_cg_nclusterblks: u32 @ 112;
        cg_niblk / set_cg_niblk: u32 @ 116;
        cg_initediblk / set_cg_initediblk: u32 @ 120;
        cg_unrefs / set_cg_unrefs: u32 @ 124;
        cg_ckhash / set_cg_ckhash: u32 @ 132;
        cg_time / set_cg_time: i64 @ 136;
    }

    /// An empty cg buffer of `cgsize` bytes with the map offsets laid out as
    /// newfs lays them out (`initcg`, sbin/newfs/mkfs.c).
    pub fn new_layout(g: &Geometry, cgx: u64) -> Cg {
        let mut cg = Cg {
            raw: vec![0; to_index(g.cgsize)],
            endian: g.v.endian,
            touched: (0, to_index(g.cgsize)),
            tag: 0,
        };
        cg.set_cg_magic(CG_MAGIC);
        cg.set_cg_cgx(low_u32(cgx));
        let iused = if g.v.is_ufs1() {
            // The old tables: a 32-bit block count per cylinder, then 16-bit
            // counts per cylinder and rotational position.
            let btot = CG_HEADER_SIZE as u64;
            let boff = btot + 4 * g.old_cpg;
            cg.set_cg_old_ncyl(i16::try_from(g.old_cpg).unwrap_or(i16::MAX));
            cg.set_cg_old_niblk(i16::try_from(g.ipg).unwrap_or(i16::MAX));
            cg.set_cg_old_btotoff(low_u32(btot).cast_signed());
            cg.set_cg_old_boff(low_u32(boff).cast_signed());
            boff + 2 * g.old_cpg * g.old_nrpos
        } else {
            cg.set_cg_niblk(low_u32(g.ipg));
            CG_HEADER_SIZE as u64
        };
        let free = iused + g.ipg.div_ceil(8);
        let mut next = free + g.fpg.div_ceil(8);
        cg.set_cg_iusedoff(low_u32(iused));
        cg.set_cg_freeoff(low_u32(free));
        if g.contigsumsize > 0 {
            // The cluster summary is an int32 array indexed 1..=contigsumsize;
            // its offset is chosen so that slot 1 is 4-byte aligned.
            let sumoff = next.div_ceil(4) * 4 - 4;
            let clusteroff = sumoff + 4 * (g.contigsumsize + 1);
            cg.set_cg_clustersumoff(low_u32(sumoff));
            cg.set_cg_clusteroff(low_u32(clusteroff));
            cg.set_cg_nclusterblks(low_u32(g.cg_nfrags(cgx) / g.frag));
            next = clusteroff + (g.fpg / g.frag).div_ceil(8);
        }
        cg.set_cg_nextfreeoff(low_u32(next));
        cg
    }

    /// Parses a cg block read from group `cgx`, checking every offset.
    pub fn parse(b: &[u8], g: &Geometry, cgx: u64) -> Result<Cg, FormatError> {
        let what = || format!("cylinder group {cgx}");
        if b.len() < to_index(g.cgsize) {
            return Err(FormatError::corrupt(what(), "short read"));
        }
        let mut raw = SPARE.try_with(|s| s.take()).unwrap_or_default();
        raw.clear();
        raw.extend_from_slice(&b[..to_index(g.cgsize)]);
        let cg = Cg {
            raw,
            endian: g.v.endian,
            touched: UNTOUCHED,
            tag: 0,
        };
        if cg.cg_magic() != CG_MAGIC {
            return Err(FormatError::corrupt(
                what(),
                format!("bad magic {:#x}", cg.cg_magic()),
            ));
        }
        if cg.cg_cgx() as u64 != cgx {
            return Err(FormatError::corrupt(
                what(),
                format!("cg_cgx is {}", cg.cg_cgx()),
            ));
        }
        let len = cg.raw.len() as u64;
        let inrange =
            |off: u32, n: u64| (off as u64) >= CG_HEADER_SIZE as u64 && off as u64 + n <= len;
        if !inrange(cg.cg_iusedoff(), g.ipg.div_ceil(8)) {
            return Err(FormatError::corrupt(
                what(),
                format!("inode map offset {} out of range", cg.cg_iusedoff()),
            ));
        }
        if !inrange(cg.cg_freeoff(), g.fpg.div_ceil(8)) {
            return Err(FormatError::corrupt(
                what(),
                format!("fragment map offset {} out of range", cg.cg_freeoff()),
            ));
        }
        if g.contigsumsize > 0 {
            if !inrange(cg.cg_clustersumoff(), 4 * (g.contigsumsize + 1))
                || !cg.cg_clustersumoff().is_multiple_of(4)
            {
                return Err(FormatError::corrupt(
                    what(),
                    format!(
                        "cluster summary offset {} out of range",
                        cg.cg_clustersumoff()
                    ),
                ));
            }
            if !inrange(cg.cg_clusteroff(), (g.fpg / g.frag).div_ceil(8)) {
                return Err(FormatError::corrupt(
                    what(),
                    format!("cluster map offset {} out of range", cg.cg_clusteroff()),
                ));
            }
        }
        if cg.cg_ndblk() as u64 > g.fpg {
            return Err(FormatError::corrupt(
                what(),
                format!("cg_ndblk {} exceeds fs_fpg", cg.cg_ndblk()),
            ));
        }
        if cg.cg_initediblk() as u64 > g.ipg || cg.cg_niblk() as u64 > g.ipg {
            return Err(FormatError::corrupt(
                what(),
                format!("cg_initediblk {} exceeds fs_ipg", cg.cg_initediblk()),
            ));
        }
        // Inode blocks are initialised whole (ffs_nodealloccg): a count
        // inside a block would make the next one zero inodes in use.
        if !(cg.cg_initediblk() as u64).is_multiple_of(g.inopb) {
            return Err(FormatError::corrupt(
                what(),
                format!(
                    "cg_initediblk {} is not a multiple of {} inodes per block",
                    cg.cg_initediblk(),
                    g.inopb
                ),
            ));
        }
        Ok(cg)
    }

    /// The first `cgsize` bytes of `b` (all of `b` if shorter) as a group
    /// in byte order `endian`, unchecked: for tools that examine a group
    /// whatever it holds (fsck, dumpfs). Only header fields may be read
    /// from it; its map accessors trust offsets nothing checked.
    pub fn view(b: &[u8], endian: Endian, cgsize: usize) -> Cg {
        let n = b.len().min(cgsize);
        let mut raw = b[..n].to_vec();
        if raw.len() < CG_HEADER_SIZE {
            raw.resize(CG_HEADER_SIZE, 0);
        }
        Cg {
            raw,
            endian,
            touched: UNTOUCHED,
            tag: 0,
        }
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.raw
    }

    /// What must be stored for the block to hold this group: the header,
    /// and the range of the maps changed since it was parsed, as (offset,
    /// bytes) pieces.
    pub fn changed(&self) -> impl Iterator<Item = (usize, &[u8])> {
        let (lo, hi) = self.touched;
        let hi = hi.min(self.raw.len());
        let head = (0, &self.raw[..CG_HEADER_SIZE.min(self.raw.len())]);
        let maps = (lo < hi).then(|| (lo, &self.raw[lo..hi]));
        std::iter::once(head).chain(maps)
    }

    /// After the changes were stored: the block and this copy agree again.
    pub fn mark_stored(&mut self) {
        self.touched = UNTOUCHED;
    }

    /// The reader's mark (see `tag`).
    pub fn tag(&self) -> u64 {
        self.tag
    }
    pub fn set_tag(&mut self, tag: u64) {
        self.tag = tag;
    }

    /// Notes that `[at, at+n)` may have changed.
    #[inline]
    fn touch(&mut self, at: usize, n: usize) {
        self.touched.0 = self.touched.0.min(at);
        self.touched.1 = self.touched.1.max(at + n);
    }

    pub fn compute_ckhash(&self) -> u32 {
        crate::ckhash::ckhash_with_zeroed_field(&self.raw, CG_CKHASH_OFF)
    }

    pub fn cg_cs(&self) -> Csum {
        Csum::read(self.endian, &self.raw, CG_CS_OFF)
    }
    pub fn set_cg_cs(&mut self, c: Csum) {
        c.write(self.endian, &mut self.raw, CG_CS_OFF)
    }
    pub fn cg_frsum(&self, i: usize) -> u32 {
        self.endian.get_u32(&self.raw, CG_FRSUM_OFF + 4 * i)
    }
    pub fn set_cg_frsum(&mut self, i: usize, v: u32) {
        debug_assert!(i < MAXFRAG);
        self.endian.set_u32(&mut self.raw, CG_FRSUM_OFF + 4 * i, v)
    }
    /// The group's time: `cg_time`, or for UFS1 `cg_old_time` (FreeBSD
    /// keeps both; newfs leaves `cg_time` zero in UFS1 groups).
    pub fn time(&self, ufs1: bool) -> i64 {
        if ufs1 {
            i64::from(self.cg_old_time().cast_unsigned())
        } else {
            self.cg_time()
        }
    }
    /// Sets the group's time as FreeBSD's allocator does: both fields
    /// (`cgp->cg_old_time = cgp->cg_time = time_second`, ffs_alloc.c) in
    /// UFS1, `cg_time` alone in UFS2.
    pub fn set_time(&mut self, ufs1: bool, t: i64) {
        if ufs1 {
            self.set_cg_old_time(low_i32(t));
        }
        self.set_cg_time(t);
    }

    // Inode map: bit set = in use.
    pub fn inode_used(&self, i: u64) -> bool {
        isset(&self.raw, self.cg_iusedoff() as usize, i)
    }
    pub fn set_inode_used(&mut self, i: u64, used: bool) {
        let o = self.cg_iusedoff() as usize;
        self.touch(o + (i / 8) as usize, 1);
        setbit(&mut self.raw, o, i, used)
    }
    // Fragment map: bit set = free.
    pub fn frag_free(&self, f: u64) -> bool {
        isset(&self.raw, self.cg_freeoff() as usize, f)
    }
    pub fn set_frag_free(&mut self, f: u64, free: bool) {
        let o = self.cg_freeoff() as usize;
        self.touch(o + (f / 8) as usize, 1);
        setbit(&mut self.raw, o, f, free)
    }
    /// Are all `frag` fragments of block `b` (block index in the group) free?
    pub fn block_free(&self, b: u64, frag: u64) -> bool {
        self.block_bits(b, frag) == frag_mask(frag)
    }
    /// The free bits of block `b`'s fragments (bit i = fragment i free).
    /// Blocks never straddle a byte: `frag` is 1, 2, 4 or 8.
    #[inline]
    pub fn block_bits(&self, b: u64, frag: u64) -> u8 {
        let o = self.cg_freeoff() as usize;
        let per = 8 / frag;
        let byte = self.raw[o + to_index(b / per)];
        let shift = (b % per) * frag;
        (byte >> shift) & frag_mask(frag)
    }
    // Cluster map: bit set = block free.
    pub fn cluster_free(&self, b: u64) -> bool {
        isset(&self.raw, self.cg_clusteroff() as usize, b)
    }
    pub fn set_cluster_free(&mut self, b: u64, free: bool) {
        let o = self.cg_clusteroff() as usize;
        self.touch(o + (b / 8) as usize, 1);
        setbit(&mut self.raw, o, b, free)
    }
    pub fn clustersum(&self, i: u64) -> i32 {
        self.endian.get_i32(
            &self.raw,
            self.cg_clustersumoff() as usize + 4 * to_index(i),
        )
    }
    pub fn set_clustersum(&mut self, i: u64, v: i32) {
        let o = self.cg_clustersumoff() as usize + 4 * to_index(i);
        self.touch(o, 4);
        self.endian.set_i32(&mut self.raw, o, v)
    }
    /// Raw access for whole-map operations (fsck comparisons).
    pub fn raw_mut(&mut self) -> &mut [u8] {
        self.touched = (0, self.raw.len());
        &mut self.raw
    }
    /// Byte slice of the fragment map covering `nfrags` fragments.
    pub fn frag_map(&self, nfrags: u64) -> &[u8] {
        let o = self.cg_freeoff() as usize;
        &self.raw[o..o + to_index(nfrags.div_ceil(8))]
    }
    pub fn inode_map(&self, ninodes: u64) -> &[u8] {
        let o = self.cg_iusedoff() as usize;
        &self.raw[o..o + to_index(ninodes.div_ceil(8))]
    }
    /// The header's byte order.
    pub fn byte_order(&self) -> Endian {
        self.endian
    }
    /// Finalise before writing: store the check-hash if requested.
    pub fn update_ckhash(&mut self, enabled: bool) {
        if enabled {
            let h = self.compute_ckhash();
            self.set_cg_ckhash(h);
        }
    }
}

#[inline]
fn isset(b: &[u8], base: usize, i: u64) -> bool {
    b[base + (i / 8) as usize] & (1 << (i % 8)) != 0
}
#[inline]
fn setbit(b: &mut [u8], base: usize, i: u64, on: bool) {
    let byte = &mut b[base + (i / 8) as usize];
    if on {
        *byte |= 1 << (i % 8);
    } else {
        *byte &= !(1 << (i % 8));
    }
}
