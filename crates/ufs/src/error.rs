//! The engine's one public error type: a small set of POSIX-like kinds plus
//! `Corrupt` and `Incompatible`. The FUSE adapter maps kinds to errno in one
//! table ([`Error::errno`]); the CLI prints the message.
use std::fmt;
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
}

#[derive(Debug, Clone)]
pub struct Error {
    pub kind: ErrorKind,
    pub msg: String,
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn new(kind: ErrorKind, msg: impl Into<String>) -> Self {
        Error {
            kind,
            msg: msg.into(),
        }
    }
    pub fn corrupt(msg: impl Into<String>) -> Self {
        Error::new(ErrorKind::Corrupt, msg)
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
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)
    }
}
impl std::error::Error for Error {}

impl From<FormatError> for Error {
    fn from(e: FormatError) -> Self {
        match e {
            FormatError::Corrupt { .. } => Error::new(ErrorKind::Corrupt, e.to_string()),
            FormatError::Unsupported(_) => Error::new(ErrorKind::Incompatible, e.to_string()),
        }
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
        Error::new(kind, format!("I/O error: {e}"))
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
    }
}
