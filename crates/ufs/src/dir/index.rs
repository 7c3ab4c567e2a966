//! The dirhash index of one directory: an in-memory, open-addressing hash
//! table from names to entry offsets, and a free-space summary of the
//! directory's 512-byte chunks. Pure data structure; no I/O. The rules are
//! those of FreeBSD's `sys/ufs/ufs/ufs_dirhash.c` and of section 3 of the
//! 2002 paper (seed `004_*`); see `docs/DIRHASH.md`.
//!
//! Invariants (checked by [`DirIndex::verify`]):
//! - Every live entry of the directory (`d_ino != 0`) has exactly one slot
//!   holding its offset, reachable from the slot its name hashes to by
//!   linear probing without crossing an `EMPTY` slot.
//! - `hused` counts the slots that are not `EMPTY` (live and `DELETED`);
//!   an insertion that would make it exceed 3/4 of the table fails, and the
//!   caller drops the index (it is rebuilt, larger, on the next access).
//! - `blkfree[b]` is the free space of chunk `b` in 4-byte units: 512 minus
//!   the `DIRSIZ` of each live entry. `firstfree[n]` is the first chunk with
//!   exactly `n` free units, `firstfree[NFSTATS]` the first with at least
//!   `NFSTATS` (room for any entry), `-1` if none.
//! - Only chunks below `dirblks` (the directory's size / 512) are described;
//!   the arrays have room for `nblk` chunks, fixed when the index is built.
use ufs_format::bytes::to_index;
use ufs_format::dir::dirsiz;
use ufs_format::{DIRBLKSIZ, MAXNAMLEN};

/// Entry sizes are multiples of this; free space is kept in these units.
pub const DIRALIGN: usize = 4;
/// Free-space classes: one per possible entry size, plus "any entry fits".
pub const NFSTATS: usize = (dirsiz(MAXNAMLEN) + DIRALIGN) / DIRALIGN;
/// Slots per second-level array (FreeBSD's `DH_NBLKOFF`).
pub const SLOTS_PER_ARRAY: usize = 256;
/// Free 4-byte units of an empty chunk.
const CHUNK_UNITS: u8 = 128;
const _: () = assert!(CHUNK_UNITS as usize * DIRALIGN == DIRBLKSIZ);

/// One of FreeBSD's `int` slots: an entry of the hash table (`dh_hash`,
/// an entry's offset or `EMPTY`/`DELETED`) or of the free-space summary
/// (`dh_firstfree`, a chunk number or `NONE`). A value is a non-negative
/// `i32`, markers are negative; 32 bits as in FreeBSD, so the table takes
/// the memory the paper measures. Values go in and out only through the
/// checked conversions below: one that does not fit 31 bits is refused
/// where it would be stored, and a marker is never read as a value.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(transparent)]
struct Slot(i32);

impl Slot {
    /// A hash slot never used: ends every probe chain.
    const EMPTY: Slot = Slot(-1);
    /// A hash slot whose entry was removed: probing continues past it.
    const DELETED: Slot = Slot(-2);
    /// No chunk of this free-space class (FreeBSD's `-1`).
    const NONE: Slot = Slot(-1);

    /// An entry offset or chunk number as a slot value, if it fits.
    fn of(v: u64) -> Option<Slot> {
        i32::try_from(v).ok().map(Slot)
    }
    /// The value held, or `None` for a marker.
    fn value(self) -> Option<u64> {
        u64::try_from(self.0).ok()
    }
    /// A chunk number as a slot value, if it fits.
    fn chunk(b: usize) -> Option<Slot> {
        i32::try_from(b).ok().map(Slot)
    }
    /// The chunk number held, or `None` for a marker.
    fn index(self) -> Option<usize> {
        usize::try_from(self.0).ok()
    }
    /// Whether the slot holds a value (a live entry), not a marker.
    fn is_live(self) -> bool {
        self.0 >= 0
    }
}

/// Whether an entry is added to its chunk or removed from it.
#[derive(Clone, Copy)]
enum Space {
    Take,
    Give,
}

/// Why an index can no longer be used; the caller drops it. Nothing on
/// disk is wrong in the first three cases.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stale {
    /// The table would be more than 3/4 full.
    Full,
    /// The directory outgrew the free-space array.
    Grew,
    /// The directory shrank below 1/8 of the free-space array.
    Shrank,
    /// The index disagrees with the directory (a bug, or the directory
    /// changed behind the index's back).
    Inconsistent(String),
}

pub type IndexResult<T> = std::result::Result<T, Stale>;

pub struct DirIndex {
    /// Two levels, as in FreeBSD: no single large allocation per table.
    #[allow(clippy::vec_box)]
    arrays: Vec<Box<[Slot; SLOTS_PER_ARRAY]>>,
    hlen: usize,
    hused: usize,
    live: usize,
    blkfree: Vec<u8>,
    dirblks: usize,
    firstfree: [Slot; NFSTATS + 1],
    /// Mixed into every hash after the name: the table's identity.
    salt: u64,
    /// Offset just after the last successful lookup, or -1.
    seqoff: i64,
    /// Whether the last lookup hit `seqoff`, i.e. lookups are sequential.
    seqopt: bool,
}

/// FNV-1, 32 bits, continuing from `h`.
fn fnv1_32(mut h: u32, bytes: &[u8]) -> u32 {
    for &b in bytes {
        h = h.wrapping_mul(0x0100_0193);
        h ^= u32::from(b);
    }
    h
}
const FNV1_32_INIT: u32 = 0x811c_9dc5;

impl DirIndex {
    /// Table slots and chunk capacity for a directory of `dir_size` bytes:
    /// 1.5 times the most entries it could hold (smallest entry 12 bytes),
    /// rounded up to whole arrays; 1.5 times its chunks.
    fn shape(dir_size: u64) -> (usize, usize) {
        let max_entries = to_index(dir_size / dirsiz(1) as u64);
        let nslots = max_entries.saturating_mul(3).div_ceil(2).max(1);
        let narrays = nslots.div_ceil(SLOTS_PER_ARRAY);
        let chunks = to_index(dir_size.div_ceil(DIRBLKSIZ as u64));
        let nblk = chunks.saturating_mul(3).div_ceil(2).max(1);
        (narrays, nblk)
    }

    /// Bytes an index for a directory of `dir_size` bytes occupies: the
    /// structure, one pointer per array, the slots, the chunk summary.
    pub fn memory_for(dir_size: u64) -> usize {
        let (narrays, nblk) = Self::shape(dir_size);
        std::mem::size_of::<DirIndex>()
            + narrays * std::mem::size_of::<Box<[Slot; SLOTS_PER_ARRAY]>>()
            + narrays * SLOTS_PER_ARRAY * std::mem::size_of::<Slot>()
            + nblk
    }

    /// An empty index sized for a directory of `dir_size` bytes, describing
    /// no chunks yet: the builder calls [`DirIndex::new_chunk`] and
    /// [`DirIndex::add`] for what it reads.
    pub fn with_capacity(dir_size: u64, salt: u64) -> DirIndex {
        let (narrays, nblk) = Self::shape(dir_size);
        DirIndex {
            arrays: (0..narrays)
                .map(|_| Box::new([Slot::EMPTY; SLOTS_PER_ARRAY]))
                .collect(),
            hlen: narrays * SLOTS_PER_ARRAY,
            hused: 0,
            live: 0,
            blkfree: vec![0; nblk],
            dirblks: 0,
            firstfree: [Slot::NONE; NFSTATS + 1],
            salt,
            seqoff: -1,
            seqopt: false,
        }
    }

    pub fn memory(&self) -> usize {
        std::mem::size_of::<DirIndex>()
            + self.arrays.len() * std::mem::size_of::<Box<[Slot; SLOTS_PER_ARRAY]>>()
            + self.hlen * std::mem::size_of::<Slot>()
            + self.blkfree.len()
    }
    /// Directory size the index describes.
    pub fn dir_size(&self) -> u64 {
        (self.dirblks * DIRBLKSIZ) as u64
    }
    pub fn live_entries(&self) -> usize {
        self.live
    }
    pub fn slots(&self) -> usize {
        self.hlen
    }
    pub fn slots_used(&self) -> usize {
        self.hused
    }

    fn get(&self, slot: usize) -> Slot {
        self.arrays[slot / SLOTS_PER_ARRAY][slot % SLOTS_PER_ARRAY]
    }
    fn set(&mut self, slot: usize, v: Slot) {
        self.arrays[slot / SLOTS_PER_ARRAY][slot % SLOTS_PER_ARRAY] = v;
    }
    fn next(&self, slot: usize) -> usize {
        if slot + 1 == self.hlen {
            0
        } else {
            slot + 1
        }
    }
    fn prev(&self, slot: usize) -> usize {
        if slot == 0 {
            self.hlen - 1
        } else {
            slot - 1
        }
    }

    /// The slot `name` hashes to: FNV-1 of the name, then of the table's
    /// identity, so names that differ only in their last byte do not land
    /// next to each other (the paper's "improved hash function").
    pub fn home(&self, name: &[u8]) -> usize {
        let h = fnv1_32(fnv1_32(FNV1_32_INIT, name), &self.salt.to_le_bytes());
        h as usize % self.hlen
    }

    /// The offsets on `name`'s probe chain, in probe order: candidates the
    /// caller checks against the directory. Ends at the first `EMPTY` slot.
    pub fn candidates(&self, name: &[u8]) -> Chain<'_> {
        Chain {
            idx: self,
            slot: self.home(name),
            left: self.hlen,
        }
    }

    /// Whether `off` is on `name`'s probe chain (the sequential shortcut
    /// looks for the expected offset before trusting it).
    pub fn chain_holds(&self, name: &[u8], off: u64) -> bool {
        self.candidates(name).any(|o| o == off)
    }

    /// The offset to try first, if lookups have been walking the directory
    /// in order.
    pub fn sequential_guess(&self) -> Option<u64> {
        if self.seqopt {
            u64::try_from(self.seqoff).ok()
        } else {
            None
        }
    }

    /// Whether `off` is where the last successful lookup ended.
    fn at_seqoff(&self, off: u64) -> bool {
        i64::try_from(off).is_ok_and(|o| o == self.seqoff)
    }

    /// Records a successful lookup of the entry at `off` with `reclen`:
    /// the shortcut turns on when the hit was where the previous lookup
    /// ended.
    pub fn note_hit(&mut self, off: u64, reclen: u16) {
        self.seqopt = self.at_seqoff(off);
        self.seqoff = i64::try_from(off + u64::from(reclen)).unwrap_or(-1);
    }

    fn find_slot(&self, name: &[u8], off: u64) -> IndexResult<usize> {
        let mut slot = self.home(name);
        for _ in 0..self.hlen {
            match self.get(slot) {
                Slot::EMPTY => break,
                v if v.value() == Some(off) => return Ok(slot),
                _ => slot = self.next(slot),
            }
        }
        Err(Stale::Inconsistent(format!(
            "offset {off} of {:?} not in its hash chain",
            String::from_utf8_lossy(name)
        )))
    }

    /// Adds `name` at `off` and takes its size from its chunk's free space.
    pub fn add(&mut self, name: &[u8], off: u64) -> IndexResult<()> {
        if self.hused >= self.hlen * 3 / 4 {
            return Err(Stale::Full);
        }
        let entry = Slot::of(off).filter(|_| off < self.dir_size());
        let Some(entry) = entry else {
            return Err(Stale::Inconsistent(format!(
                "entry offset {off} beyond the directory"
            )));
        };
        let mut slot = self.home(name);
        while self.get(slot).is_live() {
            slot = self.next(slot);
        }
        if self.get(slot) == Slot::EMPTY {
            self.hused += 1;
        }
        self.set(slot, entry);
        self.live += 1;
        self.adjust_free(off, dirsiz(name.len()), Space::Take)
    }

    /// Removes `name` at `off`; gives its size back to its chunk. Trailing
    /// `DELETED` slots of the chain become `EMPTY` again.
    pub fn remove(&mut self, name: &[u8], off: u64) -> IndexResult<()> {
        let slot = self.find_slot(name, off)?;
        self.set(slot, Slot::DELETED);
        if self.get(self.next(slot)) == Slot::EMPTY {
            let mut s = slot;
            while self.get(s) == Slot::DELETED {
                self.set(s, Slot::EMPTY);
                self.hused -= 1;
                s = self.prev(s);
            }
        }
        self.live -= 1;
        self.adjust_free(off, dirsiz(name.len()), Space::Give)
    }

    /// Records that the entry `name` moved from `old` to `new` within its
    /// chunk (compaction); free space is unchanged.
    pub fn relocate(&mut self, name: &[u8], old: u64, new: u64) -> IndexResult<()> {
        if old / DIRBLKSIZ as u64 != new / DIRBLKSIZ as u64 {
            return Err(Stale::Inconsistent(format!(
                "entry moved across chunks ({old} -> {new})"
            )));
        }
        // `old` is in the table, so below 2^31 (a multiple of the chunk
        // size), and `new` is in its chunk: it fits too. Checked all the
        // same, as every value stored.
        let Some(entry) = Slot::of(new) else {
            return Err(Stale::Inconsistent(format!(
                "entry moved to offset {new}, beyond the table's range"
            )));
        };
        let slot = self.find_slot(name, old)?;
        self.set(slot, entry);
        if self.at_seqoff(old) {
            self.seqoff = -1;
        }
        Ok(())
    }

    /// A chunk was appended at `off` (the directory's old size).
    pub fn new_chunk(&mut self, off: u64) -> IndexResult<()> {
        let block = to_index(off / DIRBLKSIZ as u64);
        // A chunk number past FreeBSD's int cannot be described either.
        let here = Slot::chunk(block).filter(|_| block < self.blkfree.len());
        let Some(here) = here else {
            return Err(Stale::Grew);
        };
        if block != self.dirblks || !off.is_multiple_of(DIRBLKSIZ as u64) {
            return Err(Stale::Inconsistent(format!(
                "new chunk at {off}, index ends at {}",
                self.dir_size()
            )));
        }
        self.dirblks += 1;
        self.blkfree[block] = CHUNK_UNITS;
        if self.firstfree[NFSTATS] == Slot::NONE {
            self.firstfree[NFSTATS] = here;
        }
        Ok(())
    }

    /// The directory was truncated to `new_size` bytes; the chunks cut off
    /// must have been empty.
    pub fn truncate(&mut self, new_size: u64) -> IndexResult<()> {
        let block = to_index(new_size / DIRBLKSIZ as u64);
        if block > self.dirblks {
            return Err(Stale::Inconsistent(format!(
                "truncated to {new_size}, index ends at {}",
                self.dir_size()
            )));
        }
        if block < self.blkfree.len() / 8 && self.arrays.len() > 1 {
            return Err(Stale::Shrank);
        }
        if let Some(b) = (block..self.dirblks).find(|&b| self.blkfree[b] != CHUNK_UNITS) {
            return Err(Stale::Inconsistent(format!(
                "chunk {b} cut off while it holds entries"
            )));
        }
        self.dirblks = block;
        for f in self.firstfree.iter_mut() {
            if f.index().is_some_and(|b| b >= block) {
                *f = Slot::NONE;
            }
        }
        Ok(())
    }

    /// The first chunk (in the order of `firstfree`: the tightest class that
    /// fits first) with room for an entry of `needed` bytes. FreeBSD's
    /// choice: keeps chunks full rather than avoiding compaction.
    pub fn find_free(&self, needed: usize) -> Option<u64> {
        let from = needed.div_ceil(DIRALIGN);
        (from..=NFSTATS)
            .find_map(|i| self.firstfree[i].value())
            .map(|b| b * DIRBLKSIZ as u64)
    }

    /// Free bytes of the chunk at `off` as the index believes.
    pub fn chunk_free(&self, off: u64) -> usize {
        usize::from(self.blkfree[to_index(off / DIRBLKSIZ as u64)]) * DIRALIGN
    }

    /// End of the last chunk that holds an entry: where the directory can
    /// be truncated.
    pub fn end_useful(&self) -> u64 {
        let mut b = self.dirblks;
        while b > 1 && self.blkfree[b - 1] == CHUNK_UNITS {
            b -= 1;
        }
        (b * DIRBLKSIZ) as u64
    }

    fn class(units: u8) -> usize {
        usize::from(units).min(NFSTATS)
    }

    /// Takes `size` bytes (an entry's `DIRSIZ`) from the free space of the
    /// chunk at `off`, or gives them back.
    fn adjust_free(&mut self, off: u64, size: usize, change: Space) -> IndexResult<()> {
        let block = to_index(off / DIRBLKSIZ as u64);
        // Chunks below `dirblks` have numbers that fit a slot (`new_chunk`).
        let here = Slot::chunk(block).filter(|_| block < self.dirblks);
        let Some(here) = here else {
            return Err(Stale::Inconsistent(format!(
                "offset {off} beyond the indexed chunks"
            )));
        };
        let old = self.blkfree[block];
        let units = u8::try_from(size / DIRALIGN).ok();
        let new = match change {
            Space::Take => units.and_then(|u| old.checked_sub(u)),
            Space::Give => units.and_then(|u| old.checked_add(u)),
        };
        let Some(new) = new.filter(|&n| n <= CHUNK_UNITS) else {
            let sign = match change {
                Space::Take => '-',
                Space::Give => '+',
            };
            return Err(Stale::Inconsistent(format!(
                "chunk {block} free space would become {} {sign} {size} bytes",
                usize::from(old) * DIRALIGN
            )));
        };
        self.blkfree[block] = new;
        let (oc, nc) = (Self::class(old), Self::class(new));
        if oc != nc {
            if self.firstfree[oc] == here {
                let next = (block + 1..self.dirblks)
                    .find(|&b| Self::class(self.blkfree[b]) == oc)
                    .and_then(Slot::chunk);
                self.firstfree[oc] = next.unwrap_or(Slot::NONE);
            }
            if self.firstfree[nc].index().is_none_or(|f| f > block) {
                self.firstfree[nc] = here;
            }
        }
        Ok(())
    }

    /// Checks every invariant against the directory's live entries
    /// `(name, offset)`, listed in directory order; returns what is wrong.
    pub fn verify<'a>(
        &self,
        dir_size: u64,
        entries: impl IntoIterator<Item = (&'a [u8], u64)>,
    ) -> std::result::Result<(), String> {
        if self.dir_size() != dir_size {
            return Err(format!(
                "index describes {} bytes, directory has {dir_size}",
                self.dir_size()
            ));
        }
        let mut free = vec![DIRBLKSIZ; self.dirblks];
        let mut n = 0usize;
        for (name, off) in entries {
            n += 1;
            let b = to_index(off / DIRBLKSIZ as u64);
            if b >= free.len() {
                return Err(format!("entry at {off} beyond the index"));
            }
            free[b] -= dirsiz(name.len());
            if self.find_slot(name, off).is_err() {
                return Err(format!(
                    "{:?} at offset {off} is not in the hash",
                    String::from_utf8_lossy(name)
                ));
            }
        }
        if n != self.live {
            return Err(format!("index holds {} entries, directory {n}", self.live));
        }
        let used = (0..self.hlen)
            .filter(|&s| self.get(s) != Slot::EMPTY)
            .count();
        if used != self.hused {
            return Err(format!("hused {} but {used} slots in use", self.hused));
        }
        let live_slots = (0..self.hlen).filter(|&s| self.get(s).is_live()).count();
        if live_slots != n {
            return Err(format!("{live_slots} live slots for {n} entries"));
        }
        for (b, &f) in free.iter().enumerate() {
            let indexed = usize::from(self.blkfree[b]) * DIRALIGN;
            if indexed != f {
                return Err(format!(
                    "chunk {b}: index says {indexed} free bytes, directory {f}"
                ));
            }
        }
        for c in 0..=NFSTATS {
            let want = (0..self.dirblks).find(|&b| Self::class(self.blkfree[b]) == c);
            let want = want.and_then(Slot::chunk).unwrap_or(Slot::NONE);
            if self.firstfree[c] != want {
                return Err(format!(
                    "firstfree[{c}] = {}, should be {}",
                    self.firstfree[c].0, want.0
                ));
            }
        }
        Ok(())
    }
}

/// Iterator over the live offsets of one probe chain.
pub struct Chain<'a> {
    idx: &'a DirIndex,
    slot: usize,
    left: usize,
}

impl Iterator for Chain<'_> {
    type Item = u64;
    fn next(&mut self) -> Option<u64> {
        while self.left > 0 {
            self.left -= 1;
            let v = self.idx.get(self.slot);
            self.slot = self.idx.next(self.slot);
            match v {
                Slot::EMPTY => {
                    self.left = 0;
                    return None;
                }
                Slot::DELETED => continue,
                off => return off.value(),
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(i: usize) -> Vec<u8> {
        format!("f{i:08}").into_bytes()
    }

    #[test]
    fn sizes_match_the_papers_memory_figure() {
        // 0.505 bytes per directory byte plus a fixed part (section 3.4).
        let size = 4 << 20;
        let per_byte = DirIndex::memory_for(size) as f64 / size as f64;
        assert!((0.50..0.52).contains(&per_byte), "{per_byte}");
        assert_eq!(NFSTATS, 67);
    }

    #[test]
    fn add_lookup_remove_keep_invariants() {
        let size = 64 * DIRBLKSIZ as u64;
        let mut ix = DirIndex::with_capacity(size, 7);
        let mut entries: Vec<(Vec<u8>, u64)> = Vec::new();
        for c in 0..64u64 {
            ix.new_chunk(c * DIRBLKSIZ as u64).unwrap();
            for k in 0..20u64 {
                let n = name(to_index(c * 20 + k));
                let off = c * DIRBLKSIZ as u64 + k * 24;
                ix.add(&n, off).unwrap();
                entries.push((n, off));
            }
        }
        ix.verify(size, entries.iter().map(|(n, o)| (n.as_slice(), *o)))
            .unwrap();
        for (n, o) in &entries {
            assert!(ix.candidates(n).any(|x| x == *o));
        }
        // Remove every other entry; the chains stay intact.
        let (gone, kept): (Vec<_>, Vec<_>) =
            entries.iter().enumerate().partition(|(i, _)| i % 2 == 0);
        for (_, (n, o)) in &gone {
            ix.remove(n, *o).unwrap();
        }
        ix.verify(size, kept.iter().map(|(_, (n, o))| (n.as_slice(), *o)))
            .unwrap();
        for (_, (n, o)) in &kept {
            assert!(ix.candidates(n).any(|x| x == *o));
        }
        // Each chunk now has 10 entries of 20 bytes gone: 200 + 32 bytes free.
        assert_eq!(ix.chunk_free(0), 512 - 10 * 20);
        assert_eq!(ix.find_free(20), Some(0));
    }

    #[test]
    fn table_refuses_to_pass_three_quarters() {
        let size = DIRBLKSIZ as u64;
        let mut ix = DirIndex::with_capacity(size, 1);
        ix.new_chunk(0).unwrap();
        let cap = ix.slots() * 3 / 4;
        let mut r = Ok(());
        for i in 0..=cap {
            r = ix.add(b"x", (i % 42) as u64 * 12);
            if r.is_err() {
                break;
            }
        }
        // 42 entries of 12 bytes fit a chunk's free-space count first; the
        // point is that it never exceeds 3/4 of the slots.
        assert!(ix.slots_used() <= cap);
        let _ = r;
    }

    #[test]
    fn growth_and_shrink_limits() {
        let mut ix = DirIndex::with_capacity(8 * DIRBLKSIZ as u64, 1);
        for c in 0..12 {
            ix.new_chunk(c * DIRBLKSIZ as u64).unwrap();
        }
        assert_eq!(ix.new_chunk(12 * DIRBLKSIZ as u64), Err(Stale::Grew));
        assert_eq!(ix.end_useful(), DIRBLKSIZ as u64);
        ix.truncate(4 * DIRBLKSIZ as u64).unwrap();
        assert_eq!(ix.dir_size(), 4 * DIRBLKSIZ as u64);
        let mut big = DirIndex::with_capacity(1 << 20, 1);
        for c in 0..2048 {
            big.new_chunk(c * DIRBLKSIZ as u64).unwrap();
        }
        assert_eq!(big.truncate(100 * DIRBLKSIZ as u64), Err(Stale::Shrank));
    }

    #[test]
    fn trailing_deleted_slots_become_empty() {
        let mut ix = DirIndex::with_capacity(4 * DIRBLKSIZ as u64, 3);
        ix.new_chunk(0).unwrap();
        ix.add(b"a", 0).unwrap();
        ix.add(b"b", 12).unwrap();
        let before = ix.slots_used();
        ix.remove(b"a", 0).unwrap();
        ix.remove(b"b", 12).unwrap();
        assert!(ix.slots_used() < before);
        assert_eq!(ix.slots_used(), 0);
    }

    #[test]
    fn sequential_shortcut_turns_on_for_ordered_hits() {
        let mut ix = DirIndex::with_capacity(DIRBLKSIZ as u64, 3);
        ix.note_hit(0, 12);
        assert_eq!(ix.sequential_guess(), None);
        ix.note_hit(12, 12);
        assert_eq!(ix.sequential_guess(), Some(24));
        ix.note_hit(100, 12);
        assert_eq!(ix.sequential_guess(), None);
    }
}
