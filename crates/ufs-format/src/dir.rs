//! Directory entries (`struct direct`) inside 512-byte directory chunks.
//!
//! Invariants enforced by [`parse_chunk`] (the rules of FreeBSD's `ufs_dirbadentry`
//! and fsck's pass 2): every `d_reclen` is a nonzero multiple of 4, at least
//! the entry's own size, and the entries of a chunk tile it exactly without
//! crossing its end; `d_namlen` is at most 255, the name holds no NUL or '/',
//! and is followed by a NUL. `d_ino` and `d_reclen` are in the file
//! system's byte order, passed to every function here; `d_type` and
//! `d_namlen` are bytes. This is the 4.4BSD format (`FS_44INODEFMT`),
//! UFS2's and that of every UFS1 file system made since 4.4BSD; the older
//! one (16-bit `d_namlen`, no `d_type`) is refused when the superblock is
//! read. Source: `sys/ufs/ufs/dir.h`, `ufs_lookup.c`.
use crate::bytes::Endian;
use crate::error::FormatError;
use crate::{DIRBLKSIZ, MAXNAMLEN};

/// Size an entry with a name of `namlen` bytes needs (`DIRECTSIZ`).
pub const fn dirsiz(namlen: usize) -> usize {
    (8 + namlen + 1 + 3) & !3
}

/// One parsed entry: where it is in the chunk, and what it says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// Byte offset of the entry within the chunk.
    pub off: usize,
    pub ino: u32,
    pub reclen: u16,
    pub dtype: u8,
    pub name: Vec<u8>,
}

impl DirEntry {
    /// Bytes this entry actually needs (0 for an empty slot).
    pub fn size(&self) -> usize {
        if self.ino == 0 {
            0
        } else {
            dirsiz(self.name.len())
        }
    }
}

/// A borrowed view of one entry, as found in a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryRef<'a> {
    pub off: usize,
    pub ino: u32,
    pub reclen: u16,
    pub dtype: u8,
    pub name: &'a [u8],
}

impl EntryRef<'_> {
    /// Bytes this entry actually needs (0 for an empty slot).
    pub fn size(&self) -> usize {
        if self.ino == 0 {
            0
        } else {
            dirsiz(self.name.len())
        }
    }
    pub fn to_owned(&self) -> DirEntry {
        DirEntry {
            off: self.off,
            ino: self.ino,
            reclen: self.reclen,
            dtype: self.dtype,
            name: self.name.to_vec(),
        }
    }
}

/// Iterates the records of one 512-byte chunk without allocating. An
/// invalid record yields `Err((offset, reason))` and ends the iteration.
pub fn iter_chunk(
    e: Endian,
    chunk: &[u8],
) -> impl Iterator<Item = Result<EntryRef<'_>, (usize, String)>> {
    let mut off = 0usize;
    let mut done = chunk.len() != DIRBLKSIZ;
    let mut first = true;
    std::iter::from_fn(move || {
        if first && done {
            first = false;
            return Some(Err((0, "directory chunk is not 512 bytes".to_string())));
        }
        first = false;
        if done || off >= DIRBLKSIZ {
            return None;
        }
        match parse_entry(e, chunk, off) {
            Ok(e) => {
                off += e.reclen as usize;
                Some(Ok(e))
            }
            Err(d) => {
                done = true;
                Some(Err((off, d)))
            }
        }
    })
}

/// Parses one 512-byte directory chunk, returning every record, including
/// a leading empty record (`d_ino == 0`). `where_` names the chunk in errors.
pub fn parse_chunk(
    e: Endian,
    chunk: &[u8],
    where_: &dyn Fn() -> String,
) -> Result<Vec<DirEntry>, FormatError> {
    let mut out = Vec::new();
    for r in iter_chunk(e, chunk) {
        match r {
            Ok(e) => out.push(e.to_owned()),
            Err((off, d)) => {
                return Err(FormatError::corrupt(
                    where_(),
                    format!("entry at offset {off}: {d}"),
                ))
            }
        }
    }
    Ok(out)
}

fn parse_entry(e: Endian, chunk: &[u8], off: usize) -> Result<EntryRef<'_>, String> {
    if off + 8 > DIRBLKSIZ {
        return Err("header crosses the chunk end".into());
    }
    let (ino, reclen) = header(e, chunk, off);
    let dtype = chunk[off + 6];
    let namlen = chunk[off + 7] as usize;
    let r = reclen as usize;
    if r == 0 || !r.is_multiple_of(4) {
        return Err(format!("d_reclen {reclen} is not a positive multiple of 4"));
    }
    if off + r > DIRBLKSIZ {
        return Err(format!("d_reclen {reclen} crosses the chunk end"));
    }
    if ino == 0 {
        // An unused slot: its name is not interpreted.
        return Ok(EntryRef {
            off,
            ino,
            reclen,
            dtype,
            name: &[],
        });
    }
    if namlen > MAXNAMLEN || namlen == 0 {
        return Err(format!("d_namlen {namlen}"));
    }
    if dirsiz(namlen) > r {
        return Err(format!("d_reclen {reclen} shorter than the name needs"));
    }
    let name = &chunk[off + 8..off + 8 + namlen];
    if chunk[off + 8 + namlen] != 0 {
        return Err("name not NUL-terminated".into());
    }
    if name.iter().any(|&c| c == 0 || c == b'/') {
        return Err("name contains NUL or '/'".into());
    }
    Ok(EntryRef {
        off,
        ino,
        reclen,
        dtype,
        name,
    })
}

/// Writes an entry at `off` of `chunk`, padding its name with zeros to the
/// 4-byte boundary. The caller guarantees `off + reclen <= chunk.len()` and
/// `reclen >= dirsiz(name.len())`.
pub fn write_entry(
    e: Endian,
    chunk: &mut [u8],
    off: usize,
    ino: u32,
    reclen: u16,
    dtype: u8,
    name: &[u8],
) {
    e.set_u32(chunk, off, ino);
    e.set_u16(chunk, off + 4, reclen);
    chunk[off + 6] = dtype;
    chunk[off + 7] = crate::bytes::low_u8(name.len());
    let end = off + dirsiz(name.len());
    chunk[off + 8..off + 8 + name.len()].copy_from_slice(name);
    chunk[off + 8 + name.len()..end].fill(0);
}

/// `d_ino` and `d_reclen` of the record at `off` (the caller checked that
/// its 8-byte header lies inside `chunk`), unchecked.
#[inline]
pub fn header(e: Endian, chunk: &[u8], off: usize) -> (u32, u16) {
    (e.get_u32(chunk, off), e.get_u16(chunk, off + 4))
}
/// `d_type` and `d_namlen` of the record at `off`, unchecked.
#[inline]
pub fn type_and_namlen(chunk: &[u8], off: usize) -> (u8, usize) {
    (chunk[off + 6], chunk[off + 7] as usize)
}
/// Sets only `d_reclen` of the entry at `off`.
pub fn set_reclen(e: Endian, chunk: &mut [u8], off: usize, reclen: u16) {
    e.set_u16(chunk, off + 4, reclen)
}
/// Sets only `d_ino` of the entry at `off`.
pub fn set_ino(e: Endian, chunk: &mut [u8], off: usize, ino: u32) {
    e.set_u32(chunk, off, ino)
}
/// Sets only `d_type` of the entry at `off`.
pub fn set_type(chunk: &mut [u8], off: usize, t: u8) {
    chunk[off + 6] = t
}

/// A chunk holding exactly `entries` (inode, type, name) in that order,
/// each record as short as its name allows and the last one spanning the
/// rest; None if they do not fit in 512 bytes. No entries: an empty chunk.
pub fn build_chunk(e: Endian, entries: &[(u32, u8, &[u8])]) -> Option<[u8; DIRBLKSIZ]> {
    let total: usize = entries.iter().map(|e| dirsiz(e.2.len())).sum();
    if total > DIRBLKSIZ
        || entries
            .iter()
            .any(|e| e.2.is_empty() || e.2.len() > crate::MAXNAMLEN || e.0 == 0)
    {
        return None;
    }
    let mut c = empty_chunk(e);
    let mut off = 0;
    for (i, &(ino, dtype, name)) in entries.iter().enumerate() {
        let reclen = if i + 1 == entries.len() {
            DIRBLKSIZ - off
        } else {
            dirsiz(name.len())
        };
        write_entry(
            e,
            &mut c,
            off,
            ino,
            crate::bytes::low_u16(reclen),
            dtype,
            name,
        );
        off += reclen;
    }
    Some(c)
}

/// A fresh empty chunk: one unused record spanning all 512 bytes.
pub fn empty_chunk(e: Endian) -> [u8; DIRBLKSIZ] {
    let mut c = [0u8; DIRBLKSIZ];
    e.set_u16(&mut c, 4, crate::bytes::low_u16(DIRBLKSIZ));
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    const L: Endian = Endian::Little;

    #[test]
    fn built_chunks_parse_back() {
        let c = build_chunk(L, &[(2, 4, b"."), (2, 4, b".."), (7, 8, b"file")]).unwrap();
        let got: Vec<(u32, Vec<u8>)> = iter_chunk(L, &c)
            .map(|e| e.unwrap())
            .map(|e| (e.ino, e.name.to_vec()))
            .collect();
        assert_eq!(
            got,
            vec![
                (2, b".".to_vec()),
                (2, b"..".to_vec()),
                (7, b"file".to_vec())
            ]
        );
        let empty = build_chunk(L, &[]).unwrap();
        assert_eq!(
            iter_chunk(L, &empty)
                .map(|e| e.unwrap().ino)
                .collect::<Vec<_>>(),
            vec![0]
        );
        let long = vec![b'x'; 255];
        assert!(
            build_chunk(L, &[(3, 8, &long), (4, 8, &long)]).is_none(),
            "two 264-byte records do not fit"
        );
    }
    #[test]
    fn dirsiz_matches_freebsd() {
        assert_eq!(dirsiz(1), 12);
        assert_eq!(dirsiz(2), 12);
        assert_eq!(dirsiz(3), 12);
        assert_eq!(dirsiz(4), 16);
        assert_eq!(dirsiz(255), 264);
    }
    #[test]
    fn roundtrip_and_reject() {
        let mut c = empty_chunk(L);
        write_entry(L, &mut c, 0, 2, 12, 4, b".");
        write_entry(L, &mut c, 12, 2, 500, 4, b"..");
        let e = parse_chunk(L, &c, &|| "t".into()).unwrap();
        assert_eq!(e.len(), 2);
        assert_eq!(e[1].name, b"..");
        set_reclen(L, &mut c, 12, 504);
        assert!(parse_chunk(L, &c, &|| "t".into()).is_err());
        set_reclen(L, &mut c, 12, 0);
        assert!(parse_chunk(L, &c, &|| "t".into()).is_err());
    }

    #[test]
    fn big_endian_chunks_hold_the_same_entries_in_the_other_order() {
        let entries: [(u32, u8, &[u8]); 3] =
            [(2, 4, b"."), (2, 4, b".."), (0x0102_0304, 8, b"file")];
        let le = build_chunk(L, &entries).unwrap();
        let be = build_chunk(Endian::Big, &entries).unwrap();
        assert_eq!(
            &be[24..28],
            &[1, 2, 3, 4],
            "d_ino most significant byte first"
        );
        assert_eq!(&be[28..30], &488u16.to_be_bytes());
        assert_eq!(&le[24..28], &[4, 3, 2, 1]);
        let names = |e, c: &[u8]| {
            iter_chunk(e, c)
                .map(|r| r.map(|x| (x.ino, x.name.to_vec())))
                .collect::<Result<Vec<_>, _>>()
        };
        assert_eq!(names(Endian::Big, &be), names(L, &le));
        // Read in the wrong order the record lengths make no sense.
        assert!(names(L, &be).is_err());
    }
}
