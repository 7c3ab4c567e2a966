//! Directories with FreeBSD's linear algorithms (`ufs_lookup.c`): lookup by
//! scanning every 512-byte chunk, insertion into the first chunk with room
//! (compacting the entries of that chunk when the room is scattered),
//! removal by merging an entry's space into its predecessor, and truncation
//! of empty trailing chunks. This is the baseline the dirhash index
//! accelerates; it must stay a clean, separate piece.
//!
//! Invariants: a directory's size is a multiple of `DIRBLKSIZ`; every chunk
//! parses (see `ufs_format::dir::parse_chunk`) or the operation fails with
//! `Corrupt` naming the directory and offset; entries never cross a chunk;
//! the first entry of a chunk is freed by clearing its inode number.
use crate::alloc::Reserve;
use crate::cache::BlockKind;
use crate::error::{Error, ErrorKind, Result};
use crate::fs::FsCore;
use std::ops::ControlFlow;
use ufs_format::dir::{dirsiz, iter_chunk, parse_chunk, DirEntry, EntryRef};
use ufs_format::*;

/// A name found in a directory.
#[derive(Debug, Clone)]
pub struct Found {
    pub ino: u64,
    pub dtype: u8,
    /// Byte offset of the entry in the directory.
    pub off: u64,
}

/// An entry returned by readdir: `next` is the cookie to resume after it.
#[derive(Debug, Clone)]
pub struct ReadDirEntry {
    pub next: u64,
    pub ino: u64,
    pub dtype: u8,
    pub name: Vec<u8>,
}

impl FsCore {
    fn check_dir_size(&self, ino: u64, di: &Dinode) -> Result<()> {
        if di.di_size() % DIRBLKSIZ as u64 != 0 {
            return Err(Error::corrupt(format!("directory {ino}: size {} is not a multiple of {DIRBLKSIZ}", di.di_size())));
        }
        Ok(())
    }

    /// Runs `f` on the mutable bytes of the chunk at `off`.
    fn dir_chunk_mut<T>(&mut self, ino: u64, di: &Dinode, off: u64, f: impl FnOnce(&mut [u8]) -> T) -> Result<T> {
        let g = self.g;
        let lbn = g.lblkno(off);
        let addr = self.bmap(ino, di, lbn)?;
        if addr == 0 {
            return Err(Error::corrupt(format!("directory {ino}: hole at offset {off}")));
        }
        let bsz = g.blksize(di.di_size(), lbn) as usize;
        let b = self.cache.modify(addr, bsz, BlockKind::Dir)?;
        let o = g.blkoff(off) as usize;
        if o + DIRBLKSIZ > b.len() {
            return Err(Error::corrupt(format!("directory {ino}: offset {off} beyond its block")));
        }
        Ok(f(&mut b[o..o + DIRBLKSIZ]))
    }

    /// Visits the entries of directory `ino` from chunk offset `from` on,
    /// in place (no copies), until `f` breaks. `f` gets the chunk's byte
    /// offset and the entry. Invalid chunks fail with `Corrupt`.
    pub fn dir_scan<T>(
        &mut self,
        ino: u64,
        di: &Dinode,
        from: u64,
        mut f: impl FnMut(u64, EntryRef<'_>) -> ControlFlow<T>,
    ) -> Result<Option<T>> {
        self.check_dir_size(ino, di)?;
        let g = self.g;
        let size = di.di_size();
        let mut off = from / DIRBLKSIZ as u64 * DIRBLKSIZ as u64;
        while off < size {
            let lbn = g.lblkno(off);
            let addr = self.bmap(ino, di, lbn)?;
            if addr == 0 {
                return Err(Error::corrupt(format!("directory {ino}: hole at offset {off}")));
            }
            let bsz = g.blksize(size, lbn) as usize;
            let block_start = lbn * g.bsize;
            let b = self.cache.read(addr, bsz, BlockKind::Dir)?;
            let mut o = (off - block_start) as usize;
            while o + DIRBLKSIZ <= b.len() && block_start + (o as u64) < size {
                let coff = block_start + o as u64;
                for e in iter_chunk(&b[o..o + DIRBLKSIZ]) {
                    match e {
                        Ok(e) => {
                            if let ControlFlow::Break(t) = f(coff, e) {
                                return Ok(Some(t));
                            }
                        }
                        Err((eo, why)) => {
                            return Err(Error::corrupt(format!("directory {ino} at offset {}: {why}", coff + eo as u64)));
                        }
                    }
                }
                o += DIRBLKSIZ;
            }
            if (o as u64) < g.bsize && block_start + (o as u64) < size {
                return Err(Error::corrupt(format!("directory {ino}: block {lbn} shorter than the directory size implies")));
            }
            off = block_start + g.bsize;
        }
        Ok(None)
    }

    /// Linear lookup of `name` in directory `ino`.
    pub fn dir_lookup(&mut self, ino: u64, di: &Dinode, name: &[u8]) -> Result<Option<Found>> {
        self.dir_scan(ino, di, 0, |coff, e| {
            if e.ino != 0 && e.name == name {
                ControlFlow::Break(Found { ino: e.ino as u64, dtype: e.dtype, off: coff + e.off as u64 })
            } else {
                ControlFlow::Continue(())
            }
        })
    }

    /// Adds `name -> child` to directory `dino`. The caller has checked that
    /// the name is absent. Updates `ddi` (size, blocks) without storing it.
    pub fn dir_enter(&mut self, dino: u64, ddi: &mut Dinode, name: &[u8], child: u64, dtype: u8, who: Reserve) -> Result<()> {
        self.check_dir_size(dino, ddi)?;
        if name.is_empty() || name.len() > MAXNAMLEN {
            return Err(Error::new(ErrorKind::NameTooLong, format!("name of {} bytes", name.len())));
        }
        let needed = dirsiz(name.len());
        let size = ddi.di_size();
        // Find a slot: one entry with enough spare room, or a run of entries
        // within one chunk whose spare room adds up (to be compacted).
        let mut slot: Option<(u64, usize, usize)> = None; // (chunk offset, region start, region len)
        let mut enduseful = 0u64;
        let mut cur_chunk = u64::MAX;
        let mut acc_start = 0usize;
        let mut acc_free = 0usize;
        self.dir_scan(dino, ddi, 0, |coff, e| {
            if coff != cur_chunk {
                cur_chunk = coff;
                acc_free = 0;
            }
            if e.ino != 0 {
                enduseful = coff + e.off as u64 + e.size() as u64;
            }
            if slot.is_some() {
                return ControlFlow::<()>::Continue(());
            }
            let free = e.reclen as usize - e.size();
            if free == 0 {
                return ControlFlow::Continue(());
            }
            if free >= needed {
                slot = Some((coff, e.off, e.reclen as usize));
                return ControlFlow::Continue(());
            }
            if acc_free == 0 {
                acc_start = e.off;
            }
            acc_free += free;
            if acc_free >= needed {
                slot = Some((coff, acc_start, e.off + e.reclen as usize - acc_start));
            }
            ControlFlow::Continue(())
        })?;
        match slot {
            Some((coff, start, len)) => {
                self.dir_chunk_mut(dino, ddi, coff, |c| compact_and_insert(c, start, len, child as u32, dtype, name))??;
                // Drop empty chunks at the end (FreeBSD's i_endoff).
                let endoff = enduseful.max(coff + start as u64 + 1).div_ceil(DIRBLKSIZ as u64) * DIRBLKSIZ as u64;
                if endoff < size {
                    self.truncate_data(dino, ddi, endoff, who)?;
                }
            }
            None => {
                // Append a new chunk.
                let mut chunk = ufs_format::dir::empty_chunk();
                ufs_format::dir::write_entry(&mut chunk, 0, child as u32, DIRBLKSIZ as u16, dtype, name);
                let n = self.write_data(dino, ddi, size, &chunk, who)?;
                if n != chunk.len() {
                    // Could not grow the directory by a whole chunk: undo.
                    self.truncate_data(dino, ddi, size, who)?;
                    return Err(Error::new(ErrorKind::NoSpace, "file system full: cannot grow directory"));
                }
            }
        }
        Ok(())
    }

    /// Removes `name` from directory `dino`; returns what it pointed to.
    pub fn dir_remove(&mut self, dino: u64, ddi: &mut Dinode, name: &[u8], who: Reserve) -> Result<Found> {
        let size = ddi.di_size();
        let mut prev: Option<(u64, usize, u16)> = None; // (chunk, off, reclen) of the previous record
        let hit = self.dir_scan(dino, ddi, 0, |coff, e| {
            let p = match prev {
                Some((pc, po, pr)) if pc == coff => Some((po, pr)),
                _ => None,
            };
            if e.ino != 0 && e.name == name {
                return ControlFlow::Break((coff, e.off, e.reclen, e.ino, e.dtype, p));
            }
            prev = Some((coff, e.off, e.reclen));
            ControlFlow::Continue(())
        })?;
        let Some((coff, eoff, reclen, ino, dtype, p)) = hit else {
            return Err(Error::new(ErrorKind::NotFound, format!("{} not found", String::from_utf8_lossy(name))));
        };
        self.dir_chunk_mut(dino, ddi, coff, |c| match p {
            Some((poff, preclen)) => ufs_format::dir::set_reclen(c, poff, preclen + reclen),
            None => remove_first(c, reclen as usize),
        })?;
        // If the last chunk is now empty, give back trailing empty chunks.
        if coff + DIRBLKSIZ as u64 == size {
            self.dir_trim_tail(dino, ddi, who)?;
        }
        Ok(Found { ino: ino as u64, dtype, off: coff + eoff as u64 })
    }

    fn dir_trim_tail(&mut self, dino: u64, ddi: &mut Dinode, who: Reserve) -> Result<()> {
        let mut end = ddi.di_size();
        while end > DIRBLKSIZ as u64 {
            let chunk = end - DIRBLKSIZ as u64;
            let live = self.dir_scan(dino, ddi, chunk, |coff, e| {
                if coff == chunk && e.ino != 0 {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            })?;
            if live.is_some() {
                break;
            }
            end = chunk;
        }
        if end < ddi.di_size() {
            self.truncate_data(dino, ddi, end, who)?;
        }
        Ok(())
    }

    /// Points the existing entry `name` at `ino` (rename over an entry, or
    /// fixing `..`).
    pub fn dir_rewrite(&mut self, dino: u64, ddi: &Dinode, name: &[u8], ino: u64, dtype: u8) -> Result<()> {
        let Some(f) = self.dir_lookup(dino, ddi, name)? else {
            return Err(Error::new(ErrorKind::NotFound, format!("{} not found", String::from_utf8_lossy(name))));
        };
        let coff = f.off / DIRBLKSIZ as u64 * DIRBLKSIZ as u64;
        let eoff = (f.off - coff) as usize;
        self.dir_chunk_mut(dino, ddi, coff, |c| {
            ufs_format::dir::set_ino(c, eoff, ino as u32);
            ufs_format::dir::set_type(c, eoff, dtype);
        })
    }

    /// True if the directory holds only `.` and `..`.
    pub fn dir_is_empty(&mut self, dino: u64, ddi: &Dinode) -> Result<bool> {
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
    pub fn dir_read(&mut self, dino: u64, ddi: &Dinode, cookie: u64, max: usize) -> Result<Vec<ReadDirEntry>> {
        let mut out = Vec::new();
        self.dir_scan(dino, ddi, cookie, |coff, e| {
            let abs = coff + e.off as u64;
            if abs >= cookie && e.ino != 0 {
                out.push(ReadDirEntry { next: abs + e.reclen as u64, ino: e.ino as u64, dtype: e.dtype, name: e.name.to_vec() });
                if out.len() >= max {
                    return ControlFlow::Break(());
                }
            }
            ControlFlow::Continue(())
        })?;
        Ok(out)
    }

    /// Writes the first chunk of a new directory (`.` and `..`).
    pub fn dir_init(&mut self, ino: u64, di: &mut Dinode, parent: u64, who: Reserve) -> Result<()> {
        let mut chunk = ufs_format::dir::empty_chunk();
        ufs_format::dir::write_entry(&mut chunk, 0, ino as u32, 12, ufs_format::dinode::dt::DT_DIR, b".");
        ufs_format::dir::write_entry(&mut chunk, 12, parent as u32, (DIRBLKSIZ - 12) as u16, ufs_format::dinode::dt::DT_DIR, b"..");
        let n = self.write_data(ino, di, 0, &chunk, who)?;
        if n != chunk.len() {
            return Err(Error::new(ErrorKind::NoSpace, "file system full: cannot create directory block"));
        }
        Ok(())
    }
}

/// Frees the first record of a chunk. FreeBSD clears its `d_ino`; when a
/// record follows, ufskit instead moves that record to the front and gives
/// it the freed space, so no chunk starts with an unused record while it
/// still holds entries. Both layouts are valid; this one is also read
/// correctly by readers that stop at the first unused record (the `rufs`
/// crate does). Readdir through the mount works on a snapshot taken at
/// opendir, so moving a record cannot make a reader skip it.
fn remove_first(c: &mut [u8], reclen: usize) {
    if reclen >= DIRBLKSIZ {
        ufs_format::dir::set_ino(c, 0, 0);
        return;
    }
    let next = iter_chunk(&c[..]).nth(1).and_then(|e| e.ok()).map(|e| (e.ino, e.reclen, e.dtype, e.name.to_vec()));
    match next {
        Some((ino, nrec, dtype, name)) if ino != 0 => {
            ufs_format::dir::write_entry(c, 0, ino, (reclen + nrec as usize) as u16, dtype, &name);
        }
        _ => ufs_format::dir::set_ino(c, 0, 0),
    }
}

/// `ufs_direnter`'s compaction: packs the live entries of the region
/// `[start, start+len)` of a chunk to its front and puts the new entry in
/// the space left at the end of the region.
fn compact_and_insert(c: &mut [u8], start: usize, len: usize, ino: u32, dtype: u8, name: &[u8]) -> Result<()> {
    let entries = parse_chunk(c, &|| "directory chunk".to_string())?;
    let region: Vec<&DirEntry> = entries.iter().filter(|e| e.off >= start && e.off < start + len).collect();
    let mut w = start;
    let mut last: Option<(usize, usize)> = None; // (offset, size) of last packed live entry
    let live: Vec<DirEntry> = region.iter().filter(|e| e.ino != 0).map(|e| (*e).clone()).collect();
    let needed = dirsiz(name.len());
    for e in &live {
        let sz = e.size();
        ufs_format::dir::write_entry(c, w, e.ino, sz as u16, e.dtype, &e.name);
        last = Some((w, sz));
        w += sz;
    }
    let spare = start + len - w;
    if spare < needed {
        return Err(Error::corrupt("directory slot smaller than computed"));
    }
    let _ = last;
    ufs_format::dir::write_entry(c, w, ino, spare as u16, dtype, name);
    Ok(())
}
