//! On-disk structures of the BSD Fast File System (FreeBSD's UFS1 and
//! UFS2, in either byte order), and nothing else.
//!
//! Invariants of this crate:
//! - It performs no I/O and makes no policy decision; it parses, validates
//!   and serializes bytes.
//! - Every byte handed to a parser is untrusted. Parsers never panic on any
//!   input: they return a [`FormatError`] naming what is wrong and where.
//! - Structures keep FreeBSD's field names (`fs_bsize`, `di_size`, ...) and are
//!   stored as their exact on-disk bytes, so a read-modify-write round trip
//!   preserves every field this crate does not interpret.
//! - Multi-byte integers are in the file system's byte order, a property of
//!   the file system ([`variant::Variant`], from the superblock's magic):
//!   the superblock and cylinder groups are held as their disk bytes and
//!   decode each field in that order; inodes are converted to one
//!   canonical form ([`Dinode`]) and back; directory entries, indirect
//!   blocks, extended attribute records and ACLs are read and written by
//!   functions given the order. No crate above this one reads a raw offset.
//!
//! Sources for layouts and constants: FreeBSD `sys/ufs/ffs/fs.h`,
//! `sys/ufs/ufs/dinode.h`, `sys/ufs/ufs/dir.h`; NetBSD
//! `sys/ufs/ffs/ffs_bswap.c` for byte order (see docs/FORMAT.md).
#![forbid(unsafe_code)]
// Every narrowing or sign change is written out (bytes::low_u8, to_index,
// try_from, cast_signed): the crate decodes what hostile images hold.
#![deny(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap
)]

pub mod acl;
pub mod bytes;
pub mod cg;
pub mod ckhash;
pub mod dinode;
pub mod dir;
pub mod error;
pub mod extattr;
pub mod sb;
pub mod variant;

pub use bytes::Endian;
pub use cg::Cg;
pub use dinode::Dinode;
pub use error::FormatError;
pub use sb::{Csum, CsumTotal, Geometry, Superblock};
pub use variant::{Ufs, Variant};

/// Byte offset of the standard UFS2 superblock.
pub const SBLOCK_UFS2: u64 = 65536;
/// Byte offset of the UFS1 superblock (also used by older makefs for UFS2).
pub const SBLOCK_UFS1: u64 = 8192;
/// Byte offset of a superblock written on a floppy-sized medium.
pub const SBLOCK_FLOPPY: u64 = 0;
/// Byte offset of a superblock placed after a large boot area.
pub const SBLOCK_PIGGY: u64 = 262144;
/// The places FreeBSD searches for a superblock, in order (`SBLOCKSEARCH`).
pub const SBLOCKSEARCH: [u64; 4] = [SBLOCK_UFS2, SBLOCK_UFS1, SBLOCK_FLOPPY, SBLOCK_PIGGY];
/// Space reserved for the superblock.
pub const SBLOCKSIZE: usize = 8192;
/// `sizeof(struct fs)`.
pub const SBSIZE_STRUCT: usize = 1376;
/// `sizeof(struct ufs2_dinode)`.
pub const DINODE_SIZE: usize = 256;
/// `sizeof(struct cg)` up to the start of the maps.
pub const CG_HEADER_SIZE: usize = 168;

pub const FS_UFS1_MAGIC: u32 = 0x0001_1954;
pub const FS_UFS2_MAGIC: u32 = 0x1954_0119;
pub const FS_BAD_MAGIC: u32 = 0x1996_0408;
pub const CG_MAGIC: u32 = 0x0009_0255;
pub const FS_44INODEFMT: i32 = 2;

pub const FS_OPTTIME: i32 = 0;
pub const FS_OPTSPACE: i32 = 1;

pub const FS_UNCLEAN: i32 = 0x01;
pub const FS_DOSOFTDEP: i32 = 0x02;
pub const FS_NEEDSFSCK: i32 = 0x04;
pub const FS_SUJ: i32 = 0x08;
pub const FS_ACLS: i32 = 0x10;
pub const FS_MULTILABEL: i32 = 0x20;
pub const FS_GJOURNAL: i32 = 0x40;
pub const FS_FLAGS_UPDATED: i32 = 0x80;
pub const FS_NFS4ACLS: i32 = 0x100;
pub const FS_METACKHASH: i32 = 0x200;
pub const FS_TRIM: i32 = 0x400;

// File flags (`di_flags`, chflags(2); FreeBSD's sys/stat.h). UF_* may be
// set by the owner, SF_* only by the super-user.
pub const UF_NODUMP: u32 = 0x0000_0001;
pub const UF_IMMUTABLE: u32 = 0x0000_0002;
pub const UF_APPEND: u32 = 0x0000_0004;
pub const UF_NOUNLINK: u32 = 0x0000_0010;
pub const SF_ARCHIVED: u32 = 0x0001_0000;
pub const SF_IMMUTABLE: u32 = 0x0002_0000;
pub const SF_APPEND: u32 = 0x0004_0000;
pub const SF_NOUNLINK: u32 = 0x0010_0000;
pub const SF_SNAPSHOT: u32 = 0x0020_0000;
/// The flags that stop any change (ufs_vnops.c's IMMUTABLE, APPEND and
/// NOUNLINK masks).
pub const IMMUTABLE: u32 = UF_IMMUTABLE | SF_IMMUTABLE;
pub const APPEND: u32 = UF_APPEND | SF_APPEND;
pub const NOUNLINK: u32 = UF_NOUNLINK | SF_NOUNLINK;
/// Flags only the super-user may change.
pub const SF_SETTABLE: u32 = 0xffff_0000;

pub const CK_SUPERBLOCK: u32 = 0x1;
pub const CK_CYLGRP: u32 = 0x2;
pub const CK_INODE: u32 = 0x4;
pub const CK_SUPPORTED: u32 = 0x7;

/// Maximum fragments per block.
pub const MAXFRAG: usize = 8;
pub const MINBSIZE: u32 = 4096;
pub const MAXBSIZE: u32 = 65536;
/// Maximum length of a symlink kept inside the inode (UFS2).
pub const MAXSYMLINKLEN_UFS2: usize = 120;
/// Maximum length of a symlink kept inside the inode (UFS1).
pub const MAXSYMLINKLEN_UFS1: usize = 60;
/// `sizeof(struct ufs1_dinode)`.
pub const DINODE1_SIZE: usize = 128;
pub const UFS_NDADDR: usize = 12;
pub const UFS_NIADDR: usize = 3;
pub const UFS_NXADDR: usize = 2;
pub const UFS_ROOTINO: u64 = 2;
pub const UFS_WINO: u64 = 1;
/// `DIRBLKSIZ`: directories are arrays of these chunks.
pub const DIRBLKSIZ: usize = 512;
pub const MAXNAMLEN: usize = 255;
pub const MAXMNTLEN: usize = 468;
pub const MAXVOLLEN: usize = 32;
pub const FSMAXSNAP: usize = 20;
/// Default expected average file size (`AVFILESIZ`).
pub const AVFILESIZ: u32 = 16384;
/// Default expected files per directory (`AFPDIR`).
pub const AFPDIR: u32 = 64;
/// Largest link count (`UFS_LINK_MAX`).
pub const UFS_LINK_MAX: u32 = 65500;
