//! Edits inside one 512-byte directory chunk, shared by the linear and the
//! hashed paths. Each edit reports every entry it moves, so an index can
//! follow.
//!
//! Invariants: an edit leaves the chunk valid (records tile the chunk,
//! each at least as long as its entry) or fails without writing; live
//! entries only move within their chunk; the free space of a chunk is 512
//! minus the `DIRSIZ` of its live entries, whatever the edit. Every
//! function takes the file system's byte order (`d_ino`, `d_reclen`).
use crate::error::{Error, Result};
use ufs_format::bytes::low_u16;
use ufs_format::dir::{dirsiz, iter_chunk, parse_chunk, write_entry, DirEntry};
use ufs_format::{Endian, DIRBLKSIZ};

/// A live entry an edit moved, offsets within the chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moved {
    pub name: Vec<u8>,
    pub from: usize,
    pub to: usize,
}

/// Free bytes of a chunk: what a new entry could use after compaction.
pub fn free_bytes(e: Endian, c: &[u8]) -> Result<usize> {
    let mut used = 0;
    for r in iter_chunk(e, c) {
        let e = r.map_err(|(o, why)| Error::corrupt(format!("chunk offset {o}: {why}")))?;
        used += e.size();
    }
    Ok(DIRBLKSIZ - used)
}

/// Where a new entry of `needed` bytes goes in a chunk known to have that
/// much free space, the way `ufsdirhash_findfree` chooses: from the first
/// record with slack (or unused), as many records as it takes for their
/// slack to add up. Returns `(start, len)` of the span.
pub fn find_span(e: Endian, c: &[u8], needed: usize) -> Result<Option<(usize, usize)>> {
    let mut start = None;
    let mut acc = 0usize;
    for r in iter_chunk(e, c) {
        let e = r.map_err(|(o, why)| Error::corrupt(format!("chunk offset {o}: {why}")))?;
        let slack = e.reclen as usize - e.size();
        if start.is_none() {
            if slack == 0 {
                continue;
            }
            start = Some(e.off);
        }
        acc += slack;
        if acc >= needed {
            let s = start.unwrap_or(0);
            return Ok(Some((s, e.off + e.reclen as usize - s)));
        }
    }
    Ok(None)
}

/// The inode numbers of a chunk's live entries other than `.` and `..`,
/// sorted: what the inode placement of large directories needs to know of
/// the chunk a new entry will go to.
pub fn live_inodes(e: Endian, c: &[u8]) -> Result<Vec<u32>> {
    let mut v = Vec::new();
    for r in iter_chunk(e, c) {
        let e = r.map_err(|(o, why)| Error::corrupt(format!("chunk offset {o}: {why}")))?;
        if e.ino != 0 && e.name != b"." && e.name != b".." {
            v.push(e.ino);
        }
    }
    v.sort_unstable();
    Ok(v)
}

/// Inserts into a chunk with at least `dirsiz(name)` free bytes and packs
/// all its entries in inode order (`.` and `..` first), the last record
/// taking the room left: used for large directories under
/// `inodeorder=offset`, so that readdir order inside a chunk is inode
/// order. Valid UFS either way (the format puts no order on a chunk's
/// entries). Returns the new entry's offset and the entries moved.
pub fn insert_sorted(
    en: Endian,
    c: &mut [u8],
    ino: u32,
    dtype: u8,
    name: &[u8],
) -> Result<(usize, Vec<Moved>)> {
    let entries = parse_chunk(en, c, &|| "directory chunk".to_string())?;
    let mut live: Vec<(bool, DirEntry)> = entries
        .into_iter()
        .filter(|e| e.ino != 0)
        .map(|e| (false, e))
        .collect();
    let needed = dirsiz(name.len());
    let packed: usize = live.iter().map(|e| e.1.size()).sum();
    if packed + needed > DIRBLKSIZ {
        return Err(Error::corrupt(
            "directory chunk has less room than computed",
        ));
    }
    live.push((
        true,
        DirEntry {
            off: usize::MAX,
            ino,
            reclen: low_u16(needed),
            dtype,
            name: name.to_vec(),
        },
    ));
    let dot = |e: &DirEntry| {
        if e.name == b"." {
            0
        } else if e.name == b".." {
            1
        } else {
            2
        }
    };
    live.sort_by_key(|(_, e)| (dot(e), e.ino));
    let mut moved = Vec::new();
    let mut w = 0;
    let mut at = 0;
    let n = live.len();
    for (i, (new, e)) in live.iter().enumerate() {
        let sz = if i + 1 == n { DIRBLKSIZ - w } else { e.size() };
        write_entry(en, c, w, e.ino, low_u16(sz), e.dtype, &e.name);
        if *new {
            at = w;
        } else if w != e.off {
            moved.push(Moved {
                name: e.name.clone(),
                from: e.off,
                to: w,
            });
        }
        w += e.size();
    }
    Ok((at, moved))
}

/// `ufs_direnter`'s compaction: packs the live entries of the span
/// `[start, start+len)` to its front and writes the new entry in the room
/// left at its end. Returns the new entry's offset and the entries moved.
pub fn insert(
    en: Endian,
    c: &mut [u8],
    start: usize,
    len: usize,
    ino: u32,
    dtype: u8,
    name: &[u8],
) -> Result<(usize, Vec<Moved>)> {
    let entries = parse_chunk(en, c, &|| "directory chunk".to_string())?;
    let live: Vec<DirEntry> = entries
        .into_iter()
        .filter(|e| e.off >= start && e.off < start + len && e.ino != 0)
        .collect();
    let needed = dirsiz(name.len());
    let packed: usize = live.iter().map(|e| e.size()).sum();
    if start + packed + needed > start + len {
        return Err(Error::corrupt("directory slot smaller than computed"));
    }
    let mut moved = Vec::new();
    let mut w = start;
    for e in &live {
        let sz = e.size();
        write_entry(en, c, w, e.ino, low_u16(sz), e.dtype, &e.name);
        if w != e.off {
            moved.push(Moved {
                name: e.name.clone(),
                from: e.off,
                to: w,
            });
        }
        w += sz;
    }
    write_entry(en, c, w, ino, low_u16(start + len - w), dtype, name);
    Ok((w, moved))
}

/// What [`remove`] took out.
#[derive(Debug)]
pub struct Removed {
    pub ino: u32,
    pub dtype: u8,
    /// The record that moved to the chunk's front, if the first one went.
    pub moved: Option<Moved>,
}

/// Removes the live entry at `off` of a chunk: its record merges into the
/// previous one. The first record of a chunk has no predecessor: FreeBSD
/// clears its `d_ino`; ufskit moves the following record to the front and
/// gives it the freed room, so a chunk with entries never starts with an
/// unused record (valid either way; readers that stop at the first unused
/// record, like the `rufs` crate, need it). Readdir through the mount works
/// on a snapshot taken at opendir, so the move cannot make it skip a name.
pub fn remove(en: Endian, c: &mut [u8], off: usize) -> Result<Removed> {
    let mut prev: Option<(usize, u16)> = None;
    let mut hit = None;
    let mut next = None;
    for r in iter_chunk(en, c) {
        let e = r.map_err(|(o, why)| Error::corrupt(format!("chunk offset {o}: {why}")))?;
        if hit.is_some() {
            next = Some((e.off, e.ino, e.reclen, e.dtype, e.name.to_vec()));
            break;
        }
        if e.off == off {
            if e.ino == 0 {
                return Err(Error::corrupt(format!("no entry at chunk offset {off}")));
            }
            hit = Some((e.ino, e.dtype, e.reclen, prev));
        } else if e.off > off {
            break;
        }
        prev = Some((e.off, e.reclen));
    }
    let Some((ino, dtype, reclen, prev)) = hit else {
        return Err(Error::corrupt(format!("no entry at chunk offset {off}")));
    };
    let mut moved = None;
    match prev {
        Some((poff, preclen)) => ufs_format::dir::set_reclen(en, c, poff, preclen + reclen),
        None => match next {
            Some((noff, nino, nrec, ndtype, nname)) if nino != 0 => {
                write_entry(en, c, 0, nino, reclen + nrec, ndtype, &nname);
                moved = Some(Moved {
                    name: nname,
                    from: noff,
                    to: 0,
                });
            }
            _ => ufs_format::dir::set_ino(en, c, 0, 0),
        },
    }
    Ok(Removed { ino, dtype, moved })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ufs_format::dir::empty_chunk;
    const L: Endian = Endian::Little;

    fn chunk_with(names: &[&str]) -> [u8; DIRBLKSIZ] {
        let mut c = empty_chunk(L);
        let mut off = 0;
        for (i, n) in names.iter().enumerate() {
            let sz = dirsiz(n.len());
            let rec = if i + 1 == names.len() {
                DIRBLKSIZ - off
            } else {
                sz
            };
            write_entry(
                L,
                &mut c,
                off,
                10 + u32::try_from(i).unwrap(),
                low_u16(rec),
                8,
                n.as_bytes(),
            );
            off += sz;
        }
        c
    }

    #[test]
    fn remove_then_insert_reports_moves() {
        let mut c = chunk_with(&["aaaa", "bbbb", "cccc", "dddd"]);
        assert_eq!(free_bytes(L, &c).unwrap(), 512 - 4 * 16);
        remove(L, &mut c, 16).unwrap(); // bbbb: merged into aaaa
        let r = remove(L, &mut c, 0).unwrap(); // aaaa: cccc moves to front
        assert_eq!(
            r.moved,
            Some(Moved {
                name: b"cccc".to_vec(),
                from: 32,
                to: 0
            })
        );
        assert_eq!(free_bytes(L, &c).unwrap(), 512 - 2 * 16);
        // A name that needs the slack of cccc (now at 0, record 48) fits
        // there without compaction.
        let (start, len) = find_span(L, &c, dirsiz(20)).unwrap().unwrap();
        assert_eq!((start, len), (0, 48));
        let (at, moved) = insert(L, &mut c, start, len, 99, 8, &[b'x'; 20]).unwrap();
        assert_eq!(at, 16);
        assert!(moved.is_empty());
        assert_eq!(free_bytes(L, &c).unwrap(), 512 - 2 * 16 - dirsiz(20));
    }

    #[test]
    fn compaction_moves_entries_down() {
        let mut c = chunk_with(&["a1", "b2", "c3", "d4"]);
        remove(L, &mut c, 12).unwrap(); // b2
                                        // Ask for more than any single record's slack so the span covers
                                        // several records and c3 must move.
        let need = 400;
        let (start, len) = find_span(L, &c, need).unwrap().unwrap();
        let (_, moved) =
            insert(L, &mut c, start, len, 5, 8, &[b'z'; 200]).unwrap_or_else(|e| panic!("{e}"));
        assert!(moved.iter().any(|m| m.name == b"c3" && m.to < m.from));
        assert!(parse_chunk(L, &c, &|| String::new()).is_ok());
    }

    #[test]
    fn sorted_insert_keeps_dots_first_and_inodes_in_order() {
        // ".", "..", then inodes 12 and 13 after deleting 11: room for one.
        let mut c = chunk_with(&[".", "..", "aaaa", "bbbb", "cccc"]);
        let dot_ino = |c: &[u8]| {
            iter_chunk(L, c)
                .map(|e| e.unwrap())
                .map(|e| (e.name.to_vec(), e.ino))
                .collect::<Vec<_>>()
        };
        remove(L, &mut c, 24).unwrap(); // aaaa (inode 12)
        let free = free_bytes(L, &c).unwrap();
        assert_eq!(live_inodes(L, &c).unwrap(), vec![13, 14]);
        // Inode 5 is smaller than "." and ".." (10, 11) but goes after them.
        let (at, moved) = insert_sorted(L, &mut c, 5, 8, b"new").unwrap();
        let got = dot_ino(&c);
        assert_eq!(got[0], (b".".to_vec(), 10));
        assert_eq!(got[1], (b"..".to_vec(), 11));
        assert_eq!(got[2], (b"new".to_vec(), 5));
        assert_eq!(at, 24);
        assert_eq!(
            moved.len(),
            2,
            "bbbb and cccc move down one slot: {moved:?}"
        );
        assert_eq!(free_bytes(L, &c).unwrap(), free - dirsiz(3));
        assert_eq!(live_inodes(L, &c).unwrap(), vec![5, 13, 14]);
        // A larger inode lands between the others; the last record keeps
        // the chunk's remaining room.
        insert_sorted(L, &mut c, 12, 8, b"mid").unwrap();
        let order: Vec<u32> = dot_ino(&c).into_iter().map(|e| e.1).collect();
        assert_eq!(order, vec![10, 11, 5, 12, 13, 14]);
        let total: usize = iter_chunk(L, &c).map(|e| e.unwrap().reclen as usize).sum();
        assert_eq!(total, DIRBLKSIZ);
        // No room: an error, the chunk unchanged.
        insert_sorted(L, &mut c, 98, 8, &[b'y'; 255]).unwrap();
        let before = c;
        assert!(insert_sorted(L, &mut c, 99, 8, &[b'z'; 255]).is_err());
        assert_eq!(c, before);
    }
}
