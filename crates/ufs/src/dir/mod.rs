//! Directories: the operations the rest of the engine calls (lookup, enter,
//! remove, rewrite, read), each served by the directory's dirhash index
//! when it has one and by FreeBSD's linear algorithms otherwise.
//!
//! - [`linear`]: the linear scans of `ufs_lookup.c` (the baseline);
//! - [`chunk`]: edits inside one 512-byte chunk, reporting moved entries;
//! - [`index`]: one directory's hash table and free-space summary;
//! - [`dirhash`]: all indexes, the memory budget, recycling, low memory.
//!
//! Invariants: a directory's size is a multiple of `DIRBLKSIZ`; every chunk
//! parses (see `ufs_format::dir::parse_chunk`) or the operation fails with
//! `Corrupt` naming the directory and offset; entries never cross a chunk.
//! An index is only a cache: every edit of a hashed directory is applied to
//! the disk first and then to the index; if the index cannot follow
//! (table full, directory grew or shrank too much, disagreement) it is
//! dropped, never trusted, and the answer comes from the blocks. On-disk
//! results are valid either way; the two paths may choose different slots
//! for a new entry, as FreeBSD's do.
use crate::Ino;
pub mod chunk;
pub mod dirhash;
pub mod index;
mod linear;

use crate::alloc::Reserve;
use crate::cache::BlockKind;
use crate::error::{Error, ErrorKind, Result};
use crate::frag::{BlockPointers, Frag};
use crate::fs::FsCore;
use crate::order::{ChangeId, EntryOp, Seen};
use dirhash::Take;
use index::{DirIndex, Stale};
use rand::Rng;
use std::ops::ControlFlow;
use std::time::Instant;
use ufs_format::bytes::{low_u16, to_index};
use ufs_format::dir::{dirsiz, iter_chunk, EntryRef};
use ufs_format::*;

/// A name found in a directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub ino: Ino,
    pub dtype: u8,
    /// Byte offset of the entry in the directory.
    pub off: u64,
}

/// An entry returned by readdir: `next` is the cookie to resume after it.
#[derive(Debug, Clone)]
pub struct ReadDirEntry {
    pub next: u64,
    pub ino: Ino,
    pub dtype: u8,
    pub name: Vec<u8>,
}

/// The chunk a new entry will go to, as the inode placement of large
/// directories sees it: its live inodes (sorted, without `.` and `..`),
/// the largest of the chunk before and the smallest of the chunk after.
#[derive(Debug, Clone)]
pub struct SlotContext {
    pub live: Vec<u32>,
    pub prev_max: Option<u32>,
    pub next_min: Option<u32>,
}

/// The entry at a byte offset, as read for a hash candidate.
struct AtOffset {
    ino: u32,
    dtype: u8,
    reclen: u16,
    matches: bool,
}

/// How a hashed insertion ended.
enum Entered {
    /// The entry is in (what makes it seen on disk); the index followed,
    /// or must be dropped.
    Done(Seen, Option<Stale>),
    /// The index disagreed with the chunk it chose; nothing was written.
    NotWritten(String),
}

/// Inode blocks a directory read asks the device for, at most.
pub const PREFETCH_INODE_BLOCKS: usize = 64;
/// Subdirectories whose first block a directory read asks for, at most.
pub const PREFETCH_SUBDIRS: usize = 256;

/// A new entry on its way into a directory: the name, what it points at,
/// and what the chunk change that adds it waits for.
#[derive(Clone, Copy)]
struct NewEntry<'a> {
    name: &'a [u8],
    child: Ino,
    dtype: u8,
    who: Reserve,
    needs: &'a [ChangeId],
}

impl NewEntry<'_> {
    /// The name change it makes.
    fn op(&self) -> EntryOp {
        EntryOp {
            name: self.name.to_vec(),
            before: None,
            after: Some((self.child.d_ino(), self.dtype)),
        }
    }
}

/// The name change of removing entry `f` called `name`.
fn removal(name: &[u8], f: &Found) -> EntryOp {
    EntryOp {
        name: name.to_vec(),
        before: Some((f.ino.d_ino(), f.dtype)),
        after: None,
    }
}

/// A name a directory entry can hold: 1 to `MAXNAMLEN` bytes.
fn check_entry_name(name: &[u8]) -> Result<()> {
    if name.is_empty() || name.len() > MAXNAMLEN {
        return Err(Error::new(
            ErrorKind::NameTooLong,
            format!("name of {} bytes", name.len()),
        ));
    }
    Ok(())
}

fn chunk_of(off: u64) -> u64 {
    off / DIRBLKSIZ as u64 * DIRBLKSIZ as u64
}

impl FsCore {
    fn check_dir_size(&self, ino: Ino, di: &Dinode) -> Result<()> {
        if !di.di_size().is_multiple_of(DIRBLKSIZ as u64) {
            return Err(Error::damaged(
                crate::error::Damage::Inode(ino),
                format!(
                    "directory {ino}: size {} is not a multiple of {DIRBLKSIZ}",
                    di.di_size()
                ),
            ));
        }
        Ok(())
    }

    /// Where the chunk at `off` lives: block address, block length, and the
    /// chunk's offset inside the block.
    fn chunk_place(&mut self, ino: Ino, di: &Dinode, off: u64) -> Result<(Frag, usize, usize)> {
        let g = self.g;
        let lbn = g.lblkno(off);
        let addr = self.bmap(ino, di, lbn)?;
        if addr.is_none() {
            return Err(Error::damaged(
                crate::error::Damage::Inode(ino),
                format!("directory {ino}: hole at offset {off}"),
            ));
        }
        let bsz = to_index(g.blksize(di.di_size(), lbn));
        let o = to_index(g.blkoff(off));
        if o + DIRBLKSIZ > bsz {
            return Err(Error::damaged(
                crate::error::Damage::Inode(ino),
                format!("directory {ino}: offset {off} beyond its block"),
            ));
        }
        Ok((addr, bsz, o))
    }

    /// Runs `f` on the mutable bytes of the chunk at `off`.
    /// The change is one region of the write ordering: it waits for
    /// `needs` (the inode a new entry names, a rename's new name) and
    /// changes the names `ops` describes (so the chunk may be written entry
    /// by entry). Returns `f`'s result and what makes the change seen on
    /// disk.
    fn dir_chunk_mut<T>(
        &mut self,
        ino: Ino,
        di: &Dinode,
        off: u64,
        needs: &[ChangeId],
        ops: Vec<EntryOp>,
        f: impl FnOnce(&mut [u8]) -> T,
    ) -> Result<(T, Seen)> {
        let (addr, bsz, o) = self.chunk_place(ino, di, off)?;
        let (id, b) =
            self.cache
                .modify_tracked(addr, bsz, BlockKind::Dir, o, DIRBLKSIZ, needs, ops)?;
        let r = f(&mut b[o..o + DIRBLKSIZ]);
        let mut seen = vec![id];
        if id != ChangeId::NONE {
            seen.extend(self.reach_needs(addr));
        }
        if self.cache.mode() == crate::order::WriteMode::Normal && id != ChangeId::NONE {
            match self.op_log.as_mut() {
                Some(log) => log.dir_changes.push(id),
                // Only an operation changes directories; should anything
                // else, its change goes out now, as the mode promises.
                None => self.cache.write_ids(&[id])?,
            }
        }
        Ok((r, seen))
    }

    /// The newest change of the chunk at `off` (what a directory size
    /// covering it needs).
    fn chunk_change(&mut self, ino: Ino, di: &Dinode, off: u64) -> Result<crate::order::ChangeId> {
        let (addr, _, o) = self.chunk_place(ino, di, off)?;
        Ok(self.cache.region_latest(addr, o))
    }

    /// Notes that the next write of inode `ino` (its lowered link count)
    /// waits until the directory change `seen` (the name that pointed at it
    /// going away) is seen on disk.
    fn after_dir_change(&mut self, ino: Ino, seen: &[ChangeId]) {
        self.order
            .inode_deps(ino)
            .needs
            .extend(seen.iter().filter(|&&i| i != ChangeId::NONE));
    }

    /// Records that `name` left directory `dino` with change `id`.
    fn note_name_gone(&mut self, dino: Ino, name: &[u8], seen: &[ChangeId]) {
        if !self.cache.mode().tracks() || seen.iter().all(|&i| i == ChangeId::NONE) {
            return;
        }
        let o = &mut self.order;
        o.gone_names.insert((dino, name.to_vec()), seen.to_vec());
        if o.gone_names.len() >= o.gone_names_prune_at.max(1024) {
            let cache = &self.cache;
            o.gone_names
                .retain(|_, ids| ids.iter().any(|&i| !cache.is_durable(i)));
            o.gone_names_prune_at = 2 * o.gone_names.len();
        }
    }

    /// What a new entry `name` in directory `dino` needs: the removal of
    /// an earlier entry of that name, if it may not be on disk yet.
    fn name_reuse_need(&mut self, dino: Ino, name: &[u8]) -> Vec<ChangeId> {
        let key = (dino, name.to_vec());
        let Some(ids) = self.order.gone_names.get(&key) else {
            return Vec::new();
        };
        let open: Vec<ChangeId> = ids
            .iter()
            .copied()
            .filter(|&i| !self.cache.is_durable(i))
            .collect();
        if open.is_empty() {
            self.order.gone_names.remove(&key);
        }
        open
    }

    /// Runs `f` on the bytes of the chunk at `off`.
    fn dir_chunk<T>(
        &mut self,
        ino: Ino,
        di: &Dinode,
        off: u64,
        f: impl FnOnce(&[u8]) -> T,
    ) -> Result<T> {
        let (addr, bsz, o) = self.chunk_place(ino, di, off)?;
        let b = self.cache.read(addr, bsz, BlockKind::Dir)?;
        Ok(f(&b[o..o + DIRBLKSIZ]))
    }

    /// Visits the entries of directory `ino` from chunk offset `from` on,
    /// in place (no copies), until `f` breaks. `f` gets the chunk's byte
    /// offset and the entry. Invalid chunks fail with `Corrupt`.
    pub fn dir_scan<T>(
        &mut self,
        ino: Ino,
        di: &Dinode,
        from: u64,
        mut f: impl FnMut(u64, EntryRef<'_>) -> ControlFlow<T>,
    ) -> Result<Option<T>> {
        self.check_dir_size(ino, di)?;
        let g = self.g;
        let size = di.di_size();
        let mut off = chunk_of(from);
        let mut seen = 0u64;
        let mut out = None;
        'blocks: while off < size {
            let lbn = g.lblkno(off);
            let addr = self.bmap(ino, di, lbn)?;
            if addr.is_none() {
                return Err(Error::damaged(
                    crate::error::Damage::Inode(ino),
                    format!("directory {ino}: hole at offset {off}"),
                ));
            }
            let bsz = to_index(g.blksize(size, lbn));
            let block_start = lbn * g.bsize;
            let b = self.cache.read(addr, bsz, BlockKind::Dir)?;
            let mut o = to_index(off - block_start);
            while o + DIRBLKSIZ <= b.len() && block_start + (o as u64) < size {
                let coff = block_start + o as u64;
                for e in iter_chunk(g.v.endian, &b[o..o + DIRBLKSIZ]) {
                    seen += 1;
                    match e {
                        Ok(e) => {
                            if let ControlFlow::Break(t) = f(coff, e) {
                                out = Some(t);
                                break 'blocks;
                            }
                        }
                        Err((eo, why)) => {
                            return Err(Error::damaged(
                                crate::error::Damage::DirEntry {
                                    dir: ino,
                                    offset: coff + eo as u64,
                                },
                                format!("directory {ino} at offset {}: {why}", coff + eo as u64),
                            ));
                        }
                    }
                }
                o += DIRBLKSIZ;
            }
            if (o as u64) < g.bsize && block_start + (o as u64) < size {
                return Err(Error::damaged(
                    crate::error::Damage::Inode(ino),
                    format!("directory {ino}: block {lbn} shorter than the directory size implies"),
                ));
            }
            off = block_start + g.bsize;
        }
        self.dirhash.stats.entries_scanned += seen;
        Ok(out)
    }

    /// Reads the entry at byte `off` (a hash candidate) and compares its
    /// name. An offset that does not hold a live, well-formed entry means
    /// the index is wrong: `Corrupt`.
    fn dir_entry_at(&mut self, ino: Ino, di: &Dinode, off: u64, name: &[u8]) -> Result<AtOffset> {
        if off >= di.di_size() || !off.is_multiple_of(4) {
            return Err(Error::damaged(
                crate::error::Damage::Inode(ino),
                format!("directory {ino}: index points at offset {off}"),
            ));
        }
        let o = to_index(off - chunk_of(off));
        let en = self.g.v.endian;
        self.dir_chunk(ino, di, chunk_of(off), |c| {
            let (dino, reclen) = ufs_format::dir::header(en, c, o);
            let (dtype, namlen) = ufs_format::dir::type_and_namlen(c, o);
            if dino == 0
                || reclen < 8
                || o + reclen as usize > DIRBLKSIZ
                || dirsiz(namlen) > reclen as usize
            {
                return Err(Error::damaged(
                    crate::error::Damage::Inode(ino),
                    format!("directory {ino}: index points at offset {off}, which holds no entry"),
                ));
            }
            Ok(AtOffset {
                ino: dino,
                dtype,
                reclen,
                matches: &c[o + 8..o + 8 + namlen] == name,
            })
        })?
    }

    // ----- the index: take, build, give back -----

    /// The directory's index, built from its blocks if the policy allows
    /// and the budget has room; `None`: use the linear algorithms. The
    /// index is out of the set until [`FsCore::dh_give_back`].
    fn dh_take(&mut self, ino: Ino, di: &Dinode) -> Result<Option<Box<DirIndex>>> {
        if !self.dirhash.cfg.enabled {
            return Ok(None);
        }
        let now = Instant::now();
        match self.dirhash.take(ino, di.di_gen(), di.di_size(), now) {
            Take::NotHashed => Ok(None),
            Take::Index(ix) if ix.dir_size() == di.di_size() => Ok(Some(ix)),
            Take::Index(_) => {
                // The directory changed size behind the index's back.
                self.dirhash.drop_stale(ino, true);
                self.dh_build(ino, di, now)
            }
            Take::Absent => self.dh_build(ino, di, now),
        }
    }

    fn dh_build(&mut self, ino: Ino, di: &Dinode, now: Instant) -> Result<Option<Box<DirIndex>>> {
        self.check_dir_size(ino, di)?;
        let size = di.di_size();
        if !self
            .dirhash
            .reserve(ino, di.di_gen(), DirIndex::memory_for(size) as u64, now)
        {
            return Ok(None);
        }
        let salt: u64 = self.rng.gen();
        let mut ix = Box::new(DirIndex::with_capacity(size, salt));
        let mut stale: Option<Stale> = None;
        let r = self.dir_scan(ino, di, 0, |coff, e| {
            while ix.dir_size() <= coff {
                if let Err(s) = ix.new_chunk(ix.dir_size()) {
                    stale = Some(s);
                    return ControlFlow::Break(());
                }
            }
            if e.ino != 0 {
                if let Err(s) = ix.add(e.name, coff + e.off as u64) {
                    stale = Some(s);
                    return ControlFlow::Break(());
                }
            }
            ControlFlow::Continue(())
        });
        if let Err(e) = r {
            self.dirhash.free(ino);
            return Err(e);
        }
        if stale.is_some() || ix.dir_size() != size {
            self.dirhash.free(ino);
            return Ok(None);
        }
        self.dirhash.stats.built += 1;
        Ok(Some(ix))
    }

    /// Ends an operation on a hashed directory: the index goes back, or is
    /// dropped if it went stale.
    fn dh_give_back(&mut self, ino: Ino, ix: Box<DirIndex>, stale: Option<Stale>) {
        match stale {
            None => self.dirhash.put(ino, ix),
            Some(Stale::Inconsistent(why)) => {
                log::warn!("dirhash: directory {ino}: index dropped: {why}");
                self.dirhash.stats.check_failures += 1;
                self.dirhash.last_check_failure = Some(format!("directory {ino}: {why}"));
                self.dirhash.drop_stale(ino, true);
            }
            Some(_) => self.dirhash.drop_stale(ino, false),
        }
    }

    /// Records a self-check disagreement and drops the index.
    fn dh_check_failed(&mut self, ino: Ino, why: String) {
        log::error!("dirhash self-check: directory {ino}: {why}");
        self.dirhash.stats.check_failures += 1;
        self.dirhash.last_check_failure = Some(format!("directory {ino}: {why}"));
        self.dirhash.drop_stale(ino, true);
    }

    fn hashed_lookup(
        &mut self,
        ino: Ino,
        di: &Dinode,
        ix: &mut DirIndex,
        name: &[u8],
    ) -> Result<Option<Found>> {
        if let Some(guess) = ix.sequential_guess() {
            if guess < di.di_size() && ix.chain_holds(name, guess) {
                let at = self.dir_entry_at(ino, di, guess, name)?;
                if at.matches {
                    ix.note_hit(guess, at.reclen);
                    self.dirhash.stats.lookups_sequential += 1;
                    return Ok(Some(Found {
                        ino: Ino::from(at.ino),
                        dtype: at.dtype,
                        off: guess,
                    }));
                }
            }
        }
        self.dirhash.stats.lookups_hash += 1;
        let mut hit = None;
        for off in ix.candidates(name) {
            let at = self.dir_entry_at(ino, di, off, name)?;
            if at.matches {
                hit = Some((off, at));
                break;
            }
        }
        Ok(hit.map(|(off, at)| {
            ix.note_hit(off, at.reclen);
            Found {
                ino: Ino::from(at.ino),
                dtype: at.dtype,
                off,
            }
        }))
    }

    // ----- the operations -----

    /// Looks `name` up in directory `ino`.
    pub fn dir_lookup(&mut self, ino: Ino, di: &Dinode, name: &[u8]) -> Result<Option<Found>> {
        if let Some(mut ix) = self.dh_take(ino, di)? {
            match self.hashed_lookup(ino, di, &mut ix, name) {
                Ok(found) => {
                    if self.dirhash.cfg.check {
                        let truth = self.linear_find(ino, di, name)?;
                        if truth != found {
                            self.dh_check_failed(
                                ino,
                                format!(
                                    "lookup of {:?}: index {found:?}, blocks {truth:?}",
                                    String::from_utf8_lossy(name)
                                ),
                            );
                            return Ok(truth);
                        }
                    }
                    self.dirhash.put(ino, ix);
                    return Ok(found);
                }
                Err(e) if e.kind == ErrorKind::Corrupt => {
                    self.dh_give_back(ino, ix, Some(Stale::Inconsistent(e.to_string())));
                }
                Err(e) => {
                    self.dirhash.drop_stale(ino, false);
                    return Err(e);
                }
            }
        }
        self.linear_lookup(ino, di, name)
    }

    /// Adds `name -> child` to directory `dino`. The caller has checked that
    /// the name is absent. Updates `ddi` (size, blocks) without storing it.
    /// The new entry waits (soft updates) or forces out (normal) the
    /// child's inode and bitmap bit, and `needs` (a rename's raised count).
    /// Returns what makes the new entry seen on disk.
    #[allow(clippy::too_many_arguments)]
    pub fn dir_enter(
        &mut self,
        dino: Ino,
        ddi: &mut Dinode,
        name: &[u8],
        child: Ino,
        dtype: u8,
        who: Reserve,
        needs: &[ChangeId],
    ) -> Result<Seen> {
        self.check_dir_size(dino, ddi)?;
        check_entry_name(name)?;
        let mut needs = needs.to_vec();
        needs.extend(
            self.inode_pointer_needs(child)
                .into_iter()
                .filter(|&n| n != ChangeId::NONE),
        );
        needs.extend(self.name_reuse_need(dino, name));
        let e = NewEntry {
            name,
            child,
            dtype,
            who,
            needs: &needs,
        };
        if let Some(mut ix) = self.dh_take(dino, ddi)? {
            match self.hashed_enter(dino, ddi, &mut ix, &e) {
                Ok(Entered::Done(seen, stale)) => {
                    self.dh_give_back(dino, ix, stale);
                    return Ok(seen);
                }
                Ok(Entered::NotWritten(why)) => {
                    self.dh_check_failed(dino, why);
                }
                Err(e) => {
                    self.dirhash.drop_stale(dino, false);
                    return Err(e);
                }
            }
        }
        self.linear_enter(dino, ddi, &e)
    }

    /// Where `dir_enter` would put a new entry with a name of `namelen`
    /// bytes: the byte offset of the chunk it would go to, with what the
    /// placement needs of it and its neighbours, or the directory's size
    /// and None when it would append. Reads only; the large-directory
    /// placement chooses the slot before the inode (`inodeorder=offset`).
    pub fn dir_slot_for(
        &mut self,
        dino: Ino,
        ddi: &Dinode,
        namelen: usize,
    ) -> Result<(u64, Option<SlotContext>)> {
        let needed = dirsiz(namelen);
        let coff = if let Some(ix) = self.dh_take(dino, ddi)? {
            let coff = ix.find_free(needed);
            self.dirhash.put(dino, ix);
            coff
        } else {
            self.linear_slot(dino, ddi, needed)?
                .span
                .map(|(coff, _, _)| coff)
        };
        let Some(coff) = coff else {
            return Ok((ddi.di_size(), None));
        };
        let en = self.g.v.endian;
        let live = self.dir_chunk(dino, ddi, coff, |c| chunk::live_inodes(en, c))??;
        let step = DIRBLKSIZ as u64;
        let prev_max = if coff >= step {
            self.dir_chunk(dino, ddi, coff - step, |c| chunk::live_inodes(en, c))??
                .last()
                .copied()
        } else {
            None
        };
        let next_min = if coff + step < ddi.di_size() {
            self.dir_chunk(dino, ddi, coff + step, |c| chunk::live_inodes(en, c))??
                .first()
                .copied()
        } else {
            None
        };
        Ok((
            coff,
            Some(SlotContext {
                live,
                prev_max,
                next_min,
            }),
        ))
    }

    /// Whether a new entry in `ddi` is packed into its chunk in inode
    /// order (large directories under `inodeorder=offset`).
    fn sorted_insert(&self, ddi: &Dinode) -> bool {
        self.opts.inode_order == crate::alloc::placement::InodeOrder::Offset
            && self.is_large_dir(ddi)
    }

    /// The hashed insertion: the free-space summary picks the chunk.
    fn hashed_enter(
        &mut self,
        dino: Ino,
        ddi: &mut Dinode,
        ix: &mut DirIndex,
        e: &NewEntry,
    ) -> Result<Entered> {
        let NewEntry {
            name,
            child,
            dtype,
            who,
            ..
        } = *e;
        let needed = dirsiz(name.len());
        let size = ddi.di_size();
        let Some(coff) = ix.find_free(needed) else {
            let seen = self.dir_append(dino, ddi, e)?;
            if let Err(s) = ix.new_chunk(size).and_then(|_| ix.add(name, size)) {
                return Ok(Entered::Done(seen, Some(s)));
            }
            return Ok(Entered::Done(seen, None));
        };
        self.dirhash.stats.findfree_hash += 1;
        let believed = ix.chunk_free(coff);
        let sorted = self.sorted_insert(ddi);
        let en = self.g.v.endian;
        let (r, seen) = self.dir_chunk_mut(
            dino,
            ddi,
            coff,
            e.needs,
            vec![e.op()],
            |c| -> Result<std::result::Result<(usize, Vec<chunk::Moved>), String>> {
                let actual = chunk::free_bytes(en, c)?;
                if actual != believed {
                    return Ok(Err(format!(
                        "chunk at {coff} has {actual} free bytes, index says {believed}"
                    )));
                }
                if sorted {
                    return Ok(Ok(chunk::insert_sorted(en, c, child.d_ino(), dtype, name)?));
                }
                let Some((start, len)) = chunk::find_span(en, c, needed)? else {
                    return Ok(Err(format!(
                        "chunk at {coff} has no span of {needed} bytes"
                    )));
                };
                Ok(Ok(chunk::insert(
                    en,
                    c,
                    start,
                    len,
                    child.d_ino(),
                    dtype,
                    name,
                )?))
            },
        )?;
        let (at, moved) = match r? {
            Ok(x) => x,
            Err(why) => return Ok(Entered::NotWritten(why)),
        };
        for m in &moved {
            if let Err(s) = ix.relocate(&m.name, coff + m.from as u64, coff + m.to as u64) {
                return Ok(Entered::Done(seen, Some(s)));
            }
        }
        if let Err(s) = ix.add(name, coff + at as u64) {
            return Ok(Entered::Done(seen, Some(s)));
        }
        // Drop empty chunks at the end (FreeBSD's i_endoff, from the index).
        let end = ix.end_useful();
        if end < size {
            self.truncate_data(dino, ddi, end, who)?;
            if let Err(s) = ix.truncate(end) {
                return Ok(Entered::Done(seen, Some(s)));
            }
        }
        if self.dirhash.cfg.check {
            let actual = self.dir_chunk(dino, ddi, coff, |c| chunk::free_bytes(en, c))??;
            if actual != ix.chunk_free(coff) {
                let why = format!(
                    "after insert: chunk at {coff} has {actual} free bytes, index says {}",
                    ix.chunk_free(coff)
                );
                return Ok(Entered::Done(seen, Some(Stale::Inconsistent(why))));
            }
        }
        Ok(Entered::Done(seen, None))
    }

    fn linear_enter(&mut self, dino: Ino, ddi: &mut Dinode, e: &NewEntry) -> Result<Seen> {
        let NewEntry {
            name,
            child,
            dtype,
            who,
            ..
        } = *e;
        let size = ddi.di_size();
        let slot = self.linear_slot(dino, ddi, dirsiz(name.len()))?;
        match slot.span {
            Some((coff, start, len)) => {
                let sorted = self.sorted_insert(ddi);
                let en = self.g.v.endian;
                let (r, seen) =
                    self.dir_chunk_mut(dino, ddi, coff, e.needs, vec![e.op()], |c| {
                        if sorted {
                            chunk::insert_sorted(en, c, child.d_ino(), dtype, name)
                        } else {
                            chunk::insert(en, c, start, len, child.d_ino(), dtype, name)
                        }
                    })?;
                r?;
                let end = slot.end_useful.max(coff + DIRBLKSIZ as u64);
                if end < size {
                    self.truncate_data(dino, ddi, end, who)?;
                }
                Ok(seen)
            }
            None => self.dir_append(dino, ddi, e),
        }
    }

    /// Appends a chunk holding only the new entry.
    /// The chunk is first written empty (a valid state to roll back to),
    /// then the entry goes in as a change of its own: the directory's new
    /// size waits only for the empty chunk, the entry for its inode.
    fn dir_append(&mut self, dino: Ino, ddi: &mut Dinode, e: &NewEntry) -> Result<Seen> {
        let NewEntry {
            name,
            child,
            dtype,
            who,
            ..
        } = *e;
        let size = ddi.di_size();
        let en = self.g.v.endian;
        let c = ufs_format::dir::empty_chunk(en);
        let n = self.write_data(dino, ddi, size, &c, who)?;
        if n != c.len() {
            // Could not grow the directory by a whole chunk: undo.
            self.truncate_data(dino, ddi, size, who)?;
            return Err(Error::new(
                ErrorKind::NoSpace,
                "file system full: cannot grow directory",
            ));
        }
        let formatted = self.chunk_change(dino, ddi, size)?;
        if formatted != ChangeId::NONE {
            self.order.inode_deps(dino).needs.push(formatted);
        }
        let ((), seen) = self.dir_chunk_mut(dino, ddi, size, e.needs, vec![e.op()], |c| {
            ufs_format::dir::write_entry(en, c, 0, child.d_ino(), low_u16(DIRBLKSIZ), dtype, name)
        })?;
        Ok(seen)
    }

    /// Removes `name` from directory `dino`; returns what it pointed to and
    /// what makes the removal seen on disk. The next write of that inode
    /// (its link count) waits for the removal; the removal itself waits for
    /// `needs` (a rename's new name).
    pub fn dir_remove(
        &mut self,
        dino: Ino,
        ddi: &mut Dinode,
        name: &[u8],
        who: Reserve,
        needs: &[ChangeId],
    ) -> Result<(Found, Seen)> {
        let (f, seen) = self.dir_remove_entry(dino, ddi, name, who, needs)?;
        self.note_name_gone(dino, name, &seen);
        self.after_dir_change(f.ino, &seen);
        Ok((f, seen))
    }

    fn dir_remove_entry(
        &mut self,
        dino: Ino,
        ddi: &mut Dinode,
        name: &[u8],
        who: Reserve,
        needs: &[ChangeId],
    ) -> Result<(Found, Seen)> {
        self.check_dir_size(dino, ddi)?;
        let not_found = || {
            Error::new(
                ErrorKind::NotFound,
                format!("{} not found", String::from_utf8_lossy(name)),
            )
        };
        if let Some(mut ix) = self.dh_take(dino, ddi)? {
            match self.hashed_lookup(dino, ddi, &mut ix, name) {
                Ok(Some(f)) => {
                    return match self.hashed_remove(dino, ddi, &mut ix, name, &f, who, needs) {
                        Ok((seen, stale)) => {
                            self.dh_give_back(dino, ix, stale);
                            Ok((f, seen))
                        }
                        Err(e) => {
                            self.dirhash.drop_stale(dino, false);
                            Err(e)
                        }
                    };
                }
                Ok(None) => {
                    self.dirhash.put(dino, ix);
                    return Err(not_found());
                }
                Err(e) if e.kind == ErrorKind::Corrupt => {
                    self.dh_give_back(dino, ix, Some(Stale::Inconsistent(e.to_string())));
                }
                Err(e) => {
                    self.dirhash.drop_stale(dino, false);
                    return Err(e);
                }
            }
        }
        let f = self.linear_find(dino, ddi, name)?.ok_or_else(not_found)?;
        let coff = chunk_of(f.off);
        let en = self.g.v.endian;
        let (r, seen) =
            self.dir_chunk_mut(dino, ddi, coff, needs, vec![removal(name, &f)], |c| {
                chunk::remove(en, c, to_index(f.off - coff))
            })?;
        r?;
        if coff + DIRBLKSIZ as u64 == ddi.di_size() {
            let end = self.linear_end_useful(dino, ddi)?;
            if end < ddi.di_size() {
                self.truncate_data(dino, ddi, end, who)?;
            }
        }
        Ok((f, seen))
    }

    /// The hashed removal; returns what makes it seen on disk, and the
    /// index's trouble if it must be dropped.
    #[allow(clippy::too_many_arguments)]
    fn hashed_remove(
        &mut self,
        dino: Ino,
        ddi: &mut Dinode,
        ix: &mut DirIndex,
        name: &[u8],
        f: &Found,
        who: Reserve,
        needs: &[ChangeId],
    ) -> Result<(Seen, Option<Stale>)> {
        let size = ddi.di_size();
        let coff = chunk_of(f.off);
        let en = self.g.v.endian;
        let (removed, seen) =
            self.dir_chunk_mut(dino, ddi, coff, needs, vec![removal(name, f)], |c| {
                chunk::remove(en, c, to_index(f.off - coff))
            })?;
        let removed = removed?;
        // The index follows, or says why it must be dropped.
        let stale = 'index: {
            if let Err(s) = ix.remove(name, f.off) {
                break 'index Some(s);
            }
            if let Some(m) = &removed.moved {
                if let Err(s) = ix.relocate(&m.name, coff + m.from as u64, coff + m.to as u64) {
                    break 'index Some(s);
                }
            }
            // Give back empty trailing chunks (the paper's section 3.5
            // notes the index makes this cheap on removal).
            let end = ix.end_useful();
            if end < size {
                self.truncate_data(dino, ddi, end, who)?;
                if let Err(s) = ix.truncate(end) {
                    break 'index Some(s);
                }
            }
            if self.dirhash.cfg.check && ddi.di_size() > coff {
                let actual = self.dir_chunk(dino, ddi, coff, |c| chunk::free_bytes(en, c))??;
                if actual != ix.chunk_free(coff) {
                    break 'index Some(Stale::Inconsistent(format!(
                        "after remove: chunk at {coff} has {actual} free bytes, index says {}",
                        ix.chunk_free(coff)
                    )));
                }
            }
            None
        };
        Ok((seen, stale))
    }

    /// Points the existing entry `name` at `ino` (rename over an entry, or
    /// fixing `..`). The entry waits for `ino`'s inode and `needs` (a moved
    /// directory's `..` waits for the move); the next write of the inode it
    /// pointed at before waits for the entry. Returns what makes the
    /// change seen on disk.
    pub fn dir_rewrite(
        &mut self,
        dino: Ino,
        ddi: &Dinode,
        name: &[u8],
        ino: Ino,
        dtype: u8,
        needs: &[ChangeId],
    ) -> Result<Seen> {
        let Some(f) = self.dir_lookup(dino, ddi, name)? else {
            return Err(Error::new(
                ErrorKind::NotFound,
                format!("{} not found", String::from_utf8_lossy(name)),
            ));
        };
        let coff = chunk_of(f.off);
        let eoff = to_index(f.off - coff);
        let mut needs = needs.to_vec();
        needs.extend(
            self.inode_pointer_needs(ino)
                .into_iter()
                .filter(|&n| n != ChangeId::NONE),
        );
        let op = EntryOp {
            name: name.to_vec(),
            before: Some((f.ino.d_ino(), f.dtype)),
            after: Some((ino.d_ino(), dtype)),
        };
        let en = self.g.v.endian;
        let ((), seen) = self.dir_chunk_mut(dino, ddi, coff, &needs, vec![op], |c| {
            ufs_format::dir::set_ino(en, c, eoff, ino.d_ino());
            ufs_format::dir::set_type(c, eoff, dtype);
        })?;
        self.after_dir_change(f.ino, &seen);
        Ok(seen)
    }

    /// Renames entry `old` of directory `dino` to `new` (absent, checked by
    /// the caller) where the entry stands, if the new name fits in the old
    /// entry's record. That is one change of one chunk, written whole or
    /// not at all (a chunk is the unit a disk writes atomically), so the
    /// disk holds the old name or the new one, never both or neither.
    /// Returns None, having changed nothing, when the name does not fit.
    pub fn dir_rename_in_place(
        &mut self,
        dino: Ino,
        ddi: &Dinode,
        old: &[u8],
        new: &[u8],
    ) -> Result<Option<Found>> {
        self.check_dir_size(dino, ddi)?;
        check_entry_name(new)?;
        let Some(f) = self.dir_lookup(dino, ddi, old)? else {
            return Err(Error::new(
                ErrorKind::NotFound,
                format!("{} not found", String::from_utf8_lossy(old)),
            ));
        };
        let at = self.dir_entry_at(dino, ddi, f.off, old)?;
        if !at.matches {
            return Err(Error::damaged(
                crate::error::Damage::Inode(dino),
                format!(
                    "directory {dino}: entry at {} is not the one looked up",
                    f.off
                ),
            ));
        }
        if dirsiz(new.len()) > at.reclen as usize {
            return Ok(None);
        }
        let coff = chunk_of(f.off);
        let eoff = to_index(f.off - coff);
        // The index is taken before the chunk changes: one built now
        // would already hold the new name.
        let ix = self.dh_take(dino, ddi)?;
        let reuse = self.name_reuse_need(dino, new);
        let ops = vec![
            removal(old, &f),
            EntryOp {
                name: new.to_vec(),
                before: None,
                after: Some((f.ino.d_ino(), f.dtype)),
            },
        ];
        let en = self.g.v.endian;
        let r = self.dir_chunk_mut(dino, ddi, coff, &reuse, ops, |c| {
            ufs_format::dir::write_entry(en, c, eoff, f.ino.d_ino(), at.reclen, f.dtype, new)
        });
        if let Some(mut ix) = ix {
            if r.is_err() {
                self.dirhash.drop_stale(dino, false);
            } else {
                let stale = ix.remove(old, f.off).and_then(|_| ix.add(new, f.off)).err();
                self.dh_give_back(dino, ix, stale);
            }
        }
        let ((), seen) = r?;
        self.note_name_gone(dino, old, &seen);
        Ok(Some(f))
    }

    /// True if the directory holds only `.` and `..`.
    pub fn dir_is_empty(&mut self, dino: Ino, ddi: &Dinode) -> Result<bool> {
        let other = self.dir_scan(dino, ddi, 0, |_, e| {
            if e.ino != 0 && e.name != b"." && e.name != b".." {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })?;
        Ok(other.is_none())
    }

    /// Entries starting at byte `cookie`, up to `max` of them.
    pub fn dir_read(
        &mut self,
        dino: Ino,
        ddi: &Dinode,
        cookie: u64,
        max: usize,
    ) -> Result<Vec<ReadDirEntry>> {
        let mut out = Vec::new();
        self.dir_scan(dino, ddi, cookie, |coff, e| {
            let abs = coff + e.off as u64;
            // Whiteouts (inode 1, DT_WHT) are FreeBSD union mounts' and
            // name nothing here.
            if abs >= cookie && e.ino != 0 && Ino::from(e.ino) != Ino::WHITEOUT {
                out.push(ReadDirEntry {
                    next: abs + e.reclen as u64,
                    ino: Ino::from(e.ino),
                    dtype: e.dtype,
                    name: e.name.to_vec(),
                });
                if out.len() >= max {
                    return ControlFlow::Break(());
                }
            }
            ControlFlow::Continue(())
        })?;
        Ok(out)
    }

    /// Asks the device to start reading what a walk of these entries reads
    /// next: the inode blocks of the entries, then the first block of each
    /// subdirectory. A tree walk (find, du, ls -R, rm -r) then finds them
    /// in the host's page cache instead of waiting for the disk once per
    /// directory. The inode blocks of subdirectories are read (the walk
    /// reads them next anyway), all asked for before the first is waited
    /// on; everything else is a hint.
    ///
    /// Bounded: at most [`PREFETCH_INODE_BLOCKS`] inode blocks and
    /// [`PREFETCH_SUBDIRS`] subdirectories per call, so a huge directory
    /// costs no more than a small one. Nothing at all on a device that
    /// takes no hints (the modeled disk: its figures must not change).
    pub fn prefetch_entries(&mut self, ents: &[ReadDirEntry]) {
        if !self.cache.prefetches() {
            return;
        }
        let g = self.g;
        let bsize = to_index(g.bsize);
        let live =
            |e: &&ReadDirEntry| e.name != b"." && e.name != b".." && e.ino.get() < g.ninodes();
        let mut asked = std::collections::HashSet::new();
        for e in ents.iter().filter(live) {
            let iaddr = self.inode_block(e.ino);
            if asked.len() >= PREFETCH_INODE_BLOCKS {
                break;
            }
            if asked.insert(iaddr) {
                self.cache.prefetch(iaddr, bsize);
            }
        }
        let dt_dir = ufs_format::dinode::dt::DT_DIR;
        let subdirs = ents.iter().filter(live).filter(|e| e.dtype == dt_dir);
        for e in subdirs.take(PREFETCH_SUBDIRS) {
            let Ok(di) = self.read_inode(e.ino) else {
                continue;
            };
            let db0 = di.db(0);
            if di.is_dir() && !db0.is_none() && db0.get() < g.size {
                let len = to_index(g.blksize(di.di_size(), 0));
                self.cache.prefetch_single(db0, len.clamp(1, bsize));
            }
        }
    }

    /// Writes the first chunk of a new directory (`.` and `..`).
    pub fn dir_init(&mut self, ino: Ino, di: &mut Dinode, parent: Ino, who: Reserve) -> Result<()> {
        self.dirhash.forget_dir(ino);
        let en = self.g.v.endian;
        let mut chunk = ufs_format::dir::empty_chunk(en);
        ufs_format::dir::write_entry(
            en,
            &mut chunk,
            0,
            ino.d_ino(),
            12,
            ufs_format::dinode::dt::DT_DIR,
            b".",
        );
        ufs_format::dir::write_entry(
            en,
            &mut chunk,
            12,
            parent.d_ino(),
            low_u16(DIRBLKSIZ - 12),
            ufs_format::dinode::dt::DT_DIR,
            b"..",
        );
        let n = self.write_data(ino, di, 0, &chunk, who)?;
        if n != chunk.len() {
            return Err(Error::new(
                ErrorKind::NoSpace,
                "file system full: cannot create directory block",
            ));
        }
        Ok(())
    }

    /// Checks a directory's index (if it has one) against its blocks: every
    /// entry, every chunk's free space, the free-space classes. `Ok(false)`
    /// if the directory has no index. For tests and `ufskit stats --verify`.
    pub fn dir_verify_index(&mut self, ino: Ino, di: &Dinode) -> Result<bool> {
        let Some(ix) = (match self
            .dirhash
            .take(ino, di.di_gen(), di.di_size(), Instant::now())
        {
            Take::Index(ix) => Some(ix),
            _ => None,
        }) else {
            return Ok(false);
        };
        let mut entries: Vec<(Vec<u8>, u64)> = Vec::new();
        let r = self.dir_scan(ino, di, 0, |coff, e| {
            if e.ino != 0 {
                entries.push((e.name.to_vec(), coff + e.off as u64));
            }
            ControlFlow::<()>::Continue(())
        });
        if let Err(e) = r {
            self.dirhash.put(ino, ix);
            return Err(e);
        }
        let verdict = ix.verify(
            di.di_size(),
            entries.iter().map(|(n, o)| (n.as_slice(), *o)),
        );
        self.dirhash.put(ino, ix);
        match verdict {
            Ok(()) => Ok(true),
            Err(why) => {
                self.dh_check_failed(ino, why.clone());
                Err(Error::damaged(
                    crate::error::Damage::Inode(ino),
                    format!("directory {ino}: dirhash index wrong: {why}"),
                ))
            }
        }
    }
}
