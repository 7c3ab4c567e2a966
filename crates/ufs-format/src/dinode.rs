//! UFS2 inodes (`struct ufs2_dinode`, 256 bytes).
//!
//! Invariants: a [`Dinode`] holds exactly 256 bytes. Block pointers are
//! returned as read; whether they lie inside the file system is checked by
//! the caller, which knows the geometry. A short symlink's target lives in
//! the 120 bytes of `di_db`/`di_ib` (`fs_maxsymlinklen`).
//! Source: FreeBSD `sys/ufs/ufs/dinode.h`.
use crate::bytes::*;
use crate::{DINODE_SIZE, MAXSYMLINKLEN_UFS2, UFS_NDADDR, UFS_NIADDR};

pub const IFMT: u16 = 0o170000;
pub const IFIFO: u16 = 0o010000;
pub const IFCHR: u16 = 0o020000;
pub const IFDIR: u16 = 0o040000;
pub const IFBLK: u16 = 0o060000;
pub const IFREG: u16 = 0o100000;
pub const IFLNK: u16 = 0o120000;
pub const IFSOCK: u16 = 0o140000;
pub const IFWHT: u16 = 0o160000;

pub const DI_DB_OFF: usize = 112;
pub const DI_IB_OFF: usize = 208;
pub const DI_CKHASH_OFF: usize = 244;

#[derive(Clone, PartialEq, Eq)]
pub struct Dinode {
    raw: [u8; DINODE_SIZE],
}

impl std::fmt::Debug for Dinode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dinode")
            .field("di_mode", &format_args!("{:o}", self.di_mode()))
            .field("di_nlink", &self.di_nlink())
            .field("di_size", &self.di_size())
            .field("di_blocks", &self.di_blocks())
            .finish()
    }
}

impl Default for Dinode {
    fn default() -> Self {
        Dinode {
            raw: [0; DINODE_SIZE],
        }
    }
}

impl Dinode {
    /// Takes a copy of 256 bytes. Never fails: every bit pattern is a
    /// syntactically valid inode; semantic checks belong to the caller.
    pub fn from_bytes(b: &[u8]) -> Dinode {
        let mut raw = [0u8; DINODE_SIZE];
        let n = b.len().min(DINODE_SIZE);
        raw[..n].copy_from_slice(&b[..n]);
        Dinode { raw }
    }
    pub fn as_bytes(&self) -> &[u8; DINODE_SIZE] {
        &self.raw
    }

    crate::fields! {
        di_mode / set_di_mode: u16 @ 0;
        di_nlink / set_di_nlink: i16 @ 2;
        di_uid / set_di_uid: u32 @ 4;
        di_gid / set_di_gid: u32 @ 8;
        di_blksize / set_di_blksize: u32 @ 12;
        di_size / set_di_size: u64 @ 16;
        di_blocks / set_di_blocks: u64 @ 24;
        di_atime / set_di_atime: i64 @ 32;
        di_mtime / set_di_mtime: i64 @ 40;
        di_ctime / set_di_ctime: i64 @ 48;
        di_birthtime / set_di_birthtime: i64 @ 56;
        di_mtimensec / set_di_mtimensec: i32 @ 64;
        di_atimensec / set_di_atimensec: i32 @ 68;
        di_ctimensec / set_di_ctimensec: i32 @ 72;
        di_birthnsec / set_di_birthnsec: i32 @ 76;
        di_gen / set_di_gen: u32 @ 80;
        di_kernflags / set_di_kernflags: u32 @ 84;
        di_flags / set_di_flags: u32 @ 88;
        di_extsize / set_di_extsize: u32 @ 92;
        di_modrev / set_di_modrev: u64 @ 232;
        di_freelink / set_di_freelink: u32 @ 240;
        di_ckhash / set_di_ckhash: u32 @ 244;
    }

    /// Link count as an unsigned number (the field is a signed 16-bit value
    /// on disk; FreeBSD caps it at `UFS_LINK_MAX`).
    pub fn nlink(&self) -> u32 {
        self.di_nlink() as u16 as u32
    }
    pub fn set_nlink(&mut self, n: u32) {
        self.set_di_nlink(n as u16 as i16)
    }
    pub fn di_db(&self, i: usize) -> u64 {
        get_u64(&self.raw, DI_DB_OFF + 8 * i)
    }
    pub fn set_di_db(&mut self, i: usize, v: u64) {
        debug_assert!(i < UFS_NDADDR);
        set_u64(&mut self.raw, DI_DB_OFF + 8 * i, v)
    }
    pub fn di_ib(&self, i: usize) -> u64 {
        get_u64(&self.raw, DI_IB_OFF + 8 * i)
    }
    pub fn set_di_ib(&mut self, i: usize, v: u64) {
        debug_assert!(i < UFS_NIADDR);
        set_u64(&mut self.raw, DI_IB_OFF + 8 * i, v)
    }
    pub fn di_extb(&self, i: usize) -> u64 {
        get_u64(&self.raw, 96 + 8 * i)
    }
    pub fn set_di_extb(&mut self, i: usize, v: u64) {
        debug_assert!(i < crate::UFS_NXADDR);
        set_u64(&mut self.raw, 96 + 8 * i, v)
    }
    pub fn file_type(&self) -> u16 {
        self.di_mode() & IFMT
    }
    pub fn is_dir(&self) -> bool {
        self.file_type() == IFDIR
    }
    pub fn is_reg(&self) -> bool {
        self.file_type() == IFREG
    }
    pub fn is_symlink(&self) -> bool {
        self.file_type() == IFLNK
    }
    /// A device node keeps its `dev_t` in `di_db[0]` (low 32 bits, `di_rdev`).
    pub fn di_rdev(&self) -> u32 {
        get_u32(&self.raw, DI_DB_OFF)
    }
    pub fn set_di_rdev(&mut self, dev: u32) {
        set_u32(&mut self.raw, DI_DB_OFF, dev)
    }
    /// The in-inode symlink area (`di_shortlink`).
    pub fn shortlink(&self) -> &[u8] {
        &self.raw[DI_DB_OFF..DI_DB_OFF + MAXSYMLINKLEN_UFS2]
    }
    pub fn set_shortlink(&mut self, target: &[u8]) {
        let a = &mut self.raw[DI_DB_OFF..DI_DB_OFF + MAXSYMLINKLEN_UFS2];
        a.fill(0);
        let n = target.len().min(MAXSYMLINKLEN_UFS2);
        a[..n].copy_from_slice(&target[..n]);
    }
    /// Clears the block pointer area (data pointers or short symlink).
    pub fn clear_pointers(&mut self) {
        self.raw[DI_DB_OFF..DI_IB_OFF + 8 * UFS_NIADDR].fill(0);
    }
    pub fn compute_ckhash(&self) -> u32 {
        crate::ckhash::ckhash_with_zeroed_field(&self.raw, DI_CKHASH_OFF)
    }
    pub fn update_ckhash(&mut self) {
        let h = self.compute_ckhash();
        self.set_di_ckhash(h);
    }
    pub fn ckhash_ok(&self) -> bool {
        self.compute_ckhash() == self.di_ckhash()
    }
    /// True when every byte is zero (a never-used inode).
    pub fn is_zero(&self) -> bool {
        self.raw.iter().all(|&b| b == 0)
    }
}

/// `DT_*` directory entry types (sys/sys/dirent.h).
pub mod dt {
    pub const DT_UNKNOWN: u8 = 0;
    pub const DT_FIFO: u8 = 1;
    pub const DT_CHR: u8 = 2;
    pub const DT_DIR: u8 = 4;
    pub const DT_BLK: u8 = 6;
    pub const DT_REG: u8 = 8;
    pub const DT_LNK: u8 = 10;
    pub const DT_SOCK: u8 = 12;
    pub const DT_WHT: u8 = 14;
}

/// The `d_type` that matches a mode (`IFTODT`).
pub fn iftodt(mode: u16) -> u8 {
    ((mode & IFMT) >> 12) as u8
}
