//! An inode's extended attribute area: `di_extsize` bytes in up to
//! `UFS_NXADDR` blocks at `di_extb`, the last one a fragment run sized as
//! a small file's last block is (FreeBSD `ffs_balloc_ufs2` with `IO_EXT`,
//! `ffs_extread`, `ffs_extwrite`). The records it holds are parsed by
//! `ufs_format::extattr`.
//!
//! Invariants:
//! - The area is replaced whole, never changed in place: a new area goes to
//!   newly allocated blocks; the inode points at them only once they are on
//!   disk (in every mode, as for an indirect block); the old blocks are
//!   released only once the inode without them is on disk. A crash leaves
//!   the old area or the new one, never a mix of the two.
//! - `di_blocks` counts the area's fragments, as FreeBSD's does.
//! - The area is at most `UFS_NXADDR * fs_bsize` bytes (`ffs_setextattr`
//!   answers ENOSPC past it).
//! - UFS1 inodes have no area (FreeBSD keeps UFS1 attributes in backing
//!   files of `ufs_extattr.c`, which only a mount configured for them
//!   uses): they list none, and a change is refused (EOPNOTSUPP).
use crate::alloc::{BlockPref, Reserve};
use crate::cache::BlockKind;
use crate::error::{Damage, Error, ErrorKind, Result};
use crate::frag::{BlockPointers, Frag};
use crate::fs::FsCore;
use crate::Ino;
use ufs_format::bytes::{low_u32, to_index};
use ufs_format::extattr::{self, ExtAttr};
use ufs_format::*;

impl FsCore {
    /// Largest area an inode may have.
    pub fn max_ext_area(&self) -> u64 {
        UFS_NXADDR as u64 * self.g.bsize
    }

    /// Refuses a change of extended attributes where inodes have no area
    /// for them (UFS1).
    pub fn check_ext_area(&self) -> Result<()> {
        if self.g.v.is_ufs1() {
            return Err(Error::new(
                ErrorKind::NotSupported,
                "UFS1 inodes have no extended attribute area (FreeBSD keeps UFS1 \
                 attributes in backing files, which ufskit does not write)",
            ));
        }
        Ok(())
    }

    /// The raw extended attribute area of `di`.
    pub fn read_ext_area(&mut self, ino: Ino, di: &Dinode) -> Result<Vec<u8>> {
        let g = self.g;
        let size = di.di_extsize() as u64;
        if size > self.max_ext_area() {
            return Err(Error::damaged(
                Damage::Inode(ino),
                format!(
                    "inode {ino}: extended attribute area of {size} bytes (at most {})",
                    self.max_ext_area()
                ),
            ));
        }
        let mut out = Vec::with_capacity(to_index(size));
        for j in 0..UFS_NXADDR as u64 {
            let start = j * g.bsize;
            if start >= size {
                break;
            }
            let n = to_index((size - start).min(g.bsize));
            let addr = di.extb(to_index(j));
            if addr.is_none() {
                return Err(Error::damaged(
                    Damage::Inode(ino),
                    format!("inode {ino}: extended attribute block {j} missing"),
                ));
            }
            let bsz = g.blksize(size, j);
            self.check_ptr(ino, addr, g.numfrags(bsz))?;
            let b = self.cache.read(addr, to_index(bsz), BlockKind::ExtAttr)?;
            out.extend_from_slice(&b[..n]);
        }
        Ok(out)
    }

    /// The attributes of `di`, in the order the area holds them.
    pub fn ext_attrs(&mut self, ino: Ino, di: &Dinode) -> Result<Vec<ExtAttr>> {
        if di.di_extsize() == 0 {
            return Ok(Vec::new());
        }
        let area = self.read_ext_area(ino, di)?;
        extattr::parse_area(self.g.v.endian, &area).map_err(|e| {
            Error::damaged(
                Damage::Inode(ino),
                format!("inode {ino}: extended attribute area: {e}"),
            )
            .caused_by(e)
        })
    }

    /// Replaces the area of `di` by `area` (updates `di`; the caller
    /// stores it). Allocates before anything is released, so ENOSPC
    /// changes nothing.
    pub fn replace_ext_area(
        &mut self,
        ino: Ino,
        di: &mut Dinode,
        area: &[u8],
        who: Reserve,
    ) -> Result<()> {
        self.check_ext_area()?;
        let g = self.g;
        let size = area.len() as u64;
        if size > self.max_ext_area() {
            return Err(Error::new(
                ErrorKind::NoSpace,
                format!(
                    "extended attributes would take {size} bytes; an inode holds at most {}",
                    self.max_ext_area()
                ),
            ));
        }
        // The old area must be sound before anything is allocated.
        self.ext_blocks(ino, di)?;
        let mut made: Vec<(Frag, u64)> = Vec::new();
        let mut pref = BlockPref::near(Frag::new(g.cgdmin(g.ino_to_cg(ino.get()))));
        for j in 0..UFS_NXADDR as u64 {
            let start = j * g.bsize;
            if start >= size {
                break;
            }
            let bsz = g.blksize(size, j);
            let bno = match self.alloc_block(ino, pref, bsz, who) {
                Ok(b) => b,
                Err(e) => {
                    // Never pointed at: their buffers dropped unwritten,
                    // the blocks given back at once.
                    for (b, s) in made {
                        self.cache.discard(b, g.numfrags(s));
                        self.free_blocks(Ino::NONE, b, s)?;
                    }
                    return Err(e);
                }
            };
            made.push((bno, bsz));
            let n = to_index((size - start).min(g.bsize));
            let start = to_index(start);
            let filled = self
                .cache
                .create(bno, to_index(bsz), BlockKind::ExtAttr)
                .map(|b| {
                    b[..n].copy_from_slice(&area[start..start + n]);
                    b[n..].fill(0);
                });
            if let Err(e) = filled {
                for (b, s) in made {
                    self.cache.discard(b, g.numfrags(s));
                    self.free_blocks(Ino::NONE, b, s)?;
                }
                return Err(e);
            }
            self.note_new_block(ino, bno);
            pref = BlockPref::near(bno.offset(g.numfrags(bsz)));
        }
        self.release_ext_blocks(ino, di)?;
        for (j, &(bno, bsz)) in made.iter().enumerate() {
            di.set_extb(j, bno);
            di.set_di_blocks(di.di_blocks() + bsz / 512);
        }
        // At most max_ext_area (two blocks), checked above.
        di.set_di_extsize(low_u32(size));
        Ok(())
    }

    /// The area's blocks as `(slot, address, bytes)`, every pointer checked
    /// first: nothing is released unless all of them are sound, so a
    /// damaged area never leaves a half-released one behind.
    fn ext_blocks(&self, ino: Ino, di: &Dinode) -> Result<Vec<(usize, Frag, u64)>> {
        let g = self.g;
        let size = di.di_extsize() as u64;
        if size > self.max_ext_area() {
            return Err(Error::damaged(
                Damage::Inode(ino),
                format!("inode {ino}: extended attribute area of {size} bytes"),
            ));
        }
        let mut out = Vec::new();
        for j in 0..UFS_NXADDR {
            let addr = di.extb(j);
            if addr.is_none() {
                continue;
            }
            if (j as u64) * g.bsize >= size {
                return Err(Error::damaged(
                    Damage::Inode(ino),
                    format!(
                        "inode {ino}: extended attribute block {j} past the area's {size} bytes"
                    ),
                ));
            }
            let bsz = g.blksize(size, j as u64);
            self.check_ptr(ino, addr, g.numfrags(bsz))?;
            out.push((j, addr, bsz));
        }
        Ok(out)
    }

    /// Releases the area of `di` (when the inode is freed: FreeBSD's
    /// `ffs_truncate` with `IO_EXT`); updates `di`.
    pub fn release_ext_blocks(&mut self, ino: Ino, di: &mut Dinode) -> Result<()> {
        for (j, addr, bsz) in self.ext_blocks(ino, di)? {
            self.free_blocks(ino, addr, bsz)?;
            di.set_extb(j, Frag::NONE);
            di.set_di_blocks(di.di_blocks().saturating_sub(bsz / 512));
        }
        di.set_di_extsize(0);
        Ok(())
    }
}
