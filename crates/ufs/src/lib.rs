//! ufskit engine: a userspace implementation of FreeBSD's UFS2.
//!
//! Layers, bottom up (each module's header states its invariants):
//! - [`ino`]: the inode number as a type ([`Ino`]), in every engine call
//!   that names an inode (fsck and the tools keep plain numbers);
//! - [`frag`]: the fragment address as a type ([`Frag`]): block pointers as
//!   the engine handles them, the allocator's results, the cache's key;
//! - [`dev`]: block devices (file, memory, counting);
//! - [`cache`]: the buffer cache, the single path of every block;
//! - [`fs`]: the mounted-file-system core: superblock, summary, inode I/O;
//! - [`alloc`]: cylinder-group choice, block/fragment/inode allocation;
//! - [`inode`]: block maps, file reads, writes and truncation;
//! - [`dir`]: directory blocks with FreeBSD's linear algorithms;
//! - [`order`]: write ordering (normal, sync, async, soft updates);
//! - [`ops`]: POSIX operations over `&self` with internal locking;
//! - [`engine_lock`]: the one lock over the engine, with what it measured;
//! - [`calls`]: counts of those operations by kind, and a hook after each;
//! - tools as library code: [`newfs`], [`fsck`], [`dumpfs`], [`tunefs`].
#![deny(unsafe_code)]
// Lossy casts are written out (`ufs_format::bytes::to_index`, `low_u32`,
// `try_from`), as in the format crate, in every module (docs/FORMAT.md).
#![warn(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap
)]

/// `Display` (and with `debug`, `Debug`) for a newtype over a number, shown
/// as the bare number: an inode number, a fragment address or a change id
/// reads in messages and test output as the plain number it is on disk.
macro_rules! shown_as_number {
    ($t:ty) => {
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.0.fmt(f)
            }
        }
    };
    ($t:ty, debug) => {
        shown_as_number!($t);
        impl std::fmt::Debug for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.0.fmt(f)
            }
        }
    };
}

pub mod alloc;
pub mod cache;
pub mod calls;
pub mod dev;
pub mod dir;
pub mod dumpfs;
pub mod engine_lock;
pub mod error;
pub mod frag;
pub mod fs;
pub mod fsck;
pub mod fuzz;
pub mod growfs;
pub mod ino;
pub mod inode;
pub mod layout;
pub mod newfs;
pub mod observe;
pub mod ops;
pub mod order;
pub mod text;
pub mod tunefs;

pub use error::{Damage, Error, ErrorKind, Result};
pub use frag::Frag;
pub use fs::{Atime, DirPref, MountOptions};
pub use ino::Ino;
pub use ops::{
    linux_inode_flags, with_linux_inode_flags, AclKind, Attr, Cred, FileKind, Fs, RenameMode,
    SetAttr, StatFs, Time, TimeSet, XattrNs, XattrSet,
};
