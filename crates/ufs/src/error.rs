//! The engine's one public error type: a small set of POSIX-like kinds plus
//! `Corrupt` and `Incompatible`. The FUSE adapter maps kinds to errno in one
//! table ([`Error::errno`]); the CLI prints the message.
//!
//! Invariants: a `Corrupt` error says what is damaged when the engine
//! knows it ([`Damage`]: which inode, block, group, directory entry);
//! an error made from a lower one (the device's `std::io::Error`, the
//! format layer's `FormatError`) keeps it as its [`std::error::Error::source`].
use crate::{Frag, Ino};
use std::fmt;
use std::sync::Arc;
use ufs_format::FormatError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    NotFound,
    Exists,
    NotDir,
    IsDir,
    NotEmpty,
    NoSpace,
    NameTooLong,
    Invalid,
    Permission,
    Access,
    TooManyLinks,
    ReadOnly,
    FileTooBig,
    Busy,
    CrossDevice,
    Io,
    /// On-disk metadata breaks a rule; the message says which.
    Corrupt,
    /// A valid image of a kind we do not handle (UFS1, big-endian).
    Incompatible,
    NotSupported,
    /// No such extended attribute (ENODATA, which Linux calls ENOATTR).
    NoData,
    /// SEEK_DATA or SEEK_HOLE past the end, or no data after the offset
    /// (ENXIO).
    NoSuchOffset,
}

/// What on disk a `Corrupt` error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Damage {
    Superblock,
    /// Cylinder group number.
    Group(u64),
    /// Inode number.
    Inode(Ino),
    /// Fragment address.
    Block(Frag),
    /// Directory inode and byte offset in it.
    DirEntry {
        dir: Ino,
        offset: u64,
    },
    PartitionTable,
}

impl fmt::Display for Damage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Damage::Superblock => write!(f, "superblock"),
            Damage::Group(c) => write!(f, "cylinder group {c}"),
            Damage::Inode(i) => write!(f, "inode {i}"),
            Damage::Block(b) => write!(f, "block {b}"),
            Damage::DirEntry { dir, offset } => write!(f, "directory {dir} at byte {offset}"),
            Damage::PartitionTable => write!(f, "partition table"),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Error {
    pub kind: ErrorKind,
    pub msg: String,
    /// For `Corrupt`: what is damaged, when known.
    pub damage: Option<Damage>,
    source: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn new(kind: ErrorKind, msg: impl Into<String>) -> Self {
        Error {
            kind,
            msg: msg.into(),
            damage: None,
            source: None,
        }
    }
    /// Damage the engine cannot pin to one structure.
    pub fn corrupt(msg: impl Into<String>) -> Self {
        Error::new(ErrorKind::Corrupt, msg)
    }
    /// Damage in `what`.
    pub fn damaged(what: Damage, msg: impl Into<String>) -> Self {
        Error {
            damage: Some(what),
            ..Error::new(ErrorKind::Corrupt, msg)
        }
    }
    /// The same error with `cause` as its source.
    pub fn caused_by(mut self, cause: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Arc::new(cause));
        self
    }
    pub fn errno(&self) -> i32 {
        use ErrorKind::*;
        match self.kind {
            NotFound => libc::ENOENT,
            Exists => libc::EEXIST,
            NotDir => libc::ENOTDIR,
            IsDir => libc::EISDIR,
            NotEmpty => libc::ENOTEMPTY,
            NoSpace => libc::ENOSPC,
            NameTooLong => libc::ENAMETOOLONG,
            Invalid => libc::EINVAL,
            Permission => libc::EPERM,
            Access => libc::EACCES,
            TooManyLinks => libc::EMLINK,
            ReadOnly => libc::EROFS,
            FileTooBig => libc::EFBIG,
            Busy => libc::EBUSY,
            CrossDevice => libc::EXDEV,
            Io => libc::EIO,
            // ext4 and xfs answer damaged metadata with EFSCORRUPTED,
            // which is EUCLEAN ("Structure needs cleaning"): the caller
            // learns fsck is due, not that the device failed.
            Corrupt => libc::EUCLEAN,
            Incompatible => libc::EINVAL,
            NotSupported => libc::EOPNOTSUPP,
            NoData => libc::ENODATA,
            NoSuchOffset => libc::ENXIO,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)
    }
}
// Written out rather than derived with thiserror (as `FormatError` is):
// the source is kept in an `Arc` so that the error stays `Clone`, and the
// lower error itself, not the `Arc`, must be what `source()` answers.
impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl From<FormatError> for Error {
    fn from(e: FormatError) -> Self {
        let kind = match e {
            FormatError::Corrupt { .. } => ErrorKind::Corrupt,
            FormatError::Unsupported(_) => ErrorKind::Incompatible,
        };
        Error::new(kind, e.to_string()).caused_by(e)
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        let kind = match e.raw_os_error() {
            Some(libc::ENOSPC) => ErrorKind::NoSpace,
            Some(libc::EROFS) => ErrorKind::ReadOnly,
            Some(libc::EWOULDBLOCK) => ErrorKind::Busy,
            _ => match e.kind() {
                std::io::ErrorKind::NotFound => ErrorKind::NotFound,
                std::io::ErrorKind::PermissionDenied => ErrorKind::Access,
                _ => ErrorKind::Io,
            },
        };
        Error::new(kind, format!("I/O error: {e}")).caused_by(e)
    }
}

/// Shorthand constructors used across the engine.
#[macro_export]
macro_rules! bail {
    ($kind:ident, $($arg:tt)*) => {
        return Err($crate::error::Error::new($crate::error::ErrorKind::$kind, format!($($arg)*)))
    };
}

impl ErrorKind {
    pub fn from_io(e: &std::io::Error) -> ErrorKind {
        match e.kind() {
            std::io::ErrorKind::NotFound => ErrorKind::NotFound,
            std::io::ErrorKind::PermissionDenied => ErrorKind::Access,
            _ => ErrorKind::Io,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn damage_is_euclean_and_device_failure_eio() {
        assert_eq!(Error::corrupt("bad").errno(), libc::EUCLEAN);
        assert_eq!(Error::new(ErrorKind::Io, "gone").errno(), libc::EIO);
        let e = Error::damaged(Damage::Inode(Ino::new(7)), "bad mode");
        assert_eq!(
            (e.errno(), e.damage),
            (libc::EUCLEAN, Some(Damage::Inode(Ino::new(7))))
        );
    }

    #[test]
    fn lower_errors_are_the_source() {
        use std::error::Error as _;
        let io = std::io::Error::from_raw_os_error(libc::EIO);
        let e: Error = io.into();
        assert_eq!(e.kind, ErrorKind::Io);
        let src = e.source().expect("the device's error is the source");
        assert!(src.downcast_ref::<std::io::Error>().is_some());
        assert!(Error::corrupt("x").source().is_none());
    }
}
