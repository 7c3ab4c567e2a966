//! Extended attributes as a file system call: get, list, set and remove by
//! FreeBSD namespace and name, under FreeBSD's rules (`ffs_getextattr`,
//! `ffs_listextattr`, `ffs_setextattr`, `ffs_deleteextattr` in
//! `sys/ufs/ffs/ffs_vnops.c`; `extattr_check_cred` in `ufs_extattr.c`).
//!
//! Invariants:
//! - The system namespace is the superuser's alone, for reading as for
//!   writing; a listing for anyone else leaves it out. Access to the user
//!   namespace follows the file's permission bits, which the caller (the
//!   FUSE kernel with `default_permissions`) checks, as for read and write.
//! - A change rewrites the whole area ([`FsCore::replace_ext_area`]) and
//!   the inode's ctime; a failure changes nothing.
//! - Records of namespaces ufskit does not know are kept as they are.
//! - New attributes go on regular files and directories only; any inode's
//!   existing attributes can be read and removed.
use super::{flag_refusal, live_inode, touch, Call, Cred, Fs};
use crate::error::{Error, ErrorKind, Result};
use crate::fs::FsCore;
use crate::Ino;
use ufs_format::extattr::{
    self, ExtAttr, EXTATTR_MAXNAMELEN, EXTATTR_NAMESPACE_SYSTEM, EXTATTR_NAMESPACE_USER,
};
use ufs_format::{APPEND, IMMUTABLE};

/// A FreeBSD attribute namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum XattrNs {
    User,
    System,
}

impl XattrNs {
    fn code(self) -> u8 {
        match self {
            XattrNs::User => EXTATTR_NAMESPACE_USER,
            XattrNs::System => EXTATTR_NAMESPACE_SYSTEM,
        }
    }
    fn from_code(c: u8) -> Option<XattrNs> {
        match c {
            EXTATTR_NAMESPACE_USER => Some(XattrNs::User),
            EXTATTR_NAMESPACE_SYSTEM => Some(XattrNs::System),
            _ => None,
        }
    }
}

/// What `setxattr` may find (Linux `XATTR_CREATE`, `XATTR_REPLACE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XattrSet {
    /// Create or replace.
    Either,
    /// Fail with `Exists` if the attribute is there.
    Create,
    /// Fail with `NoData` if it is not.
    Replace,
}

fn check_cred(ns: XattrNs, cred: Cred) -> Result<()> {
    if ns == XattrNs::System && cred.uid != 0 {
        return Err(Error::new(
            ErrorKind::Permission,
            "the system attribute namespace is the superuser's",
        ));
    }
    Ok(())
}

fn check_attr_name(name: &[u8]) -> Result<()> {
    if name.is_empty() {
        return Err(Error::new(ErrorKind::Invalid, "empty attribute name"));
    }
    if name.len() > EXTATTR_MAXNAMELEN {
        return Err(Error::new(
            ErrorKind::NameTooLong,
            format!(
                "attribute name of {} bytes (at most {EXTATTR_MAXNAMELEN})",
                name.len()
            ),
        ));
    }
    Ok(())
}

fn no_attr(name: &[u8]) -> Error {
    Error::new(
        ErrorKind::NoData,
        format!("no attribute {}", String::from_utf8_lossy(name)),
    )
}

impl Fs {
    /// The value of attribute `name` in `ns`.
    pub fn getxattr(&self, ino: Ino, ns: XattrNs, name: &[u8], cred: Cred) -> Result<Vec<u8>> {
        let r = (|| {
            check_cred(ns, cred)?;
            check_attr_name(name)?;
            let mut c = self.lock();
            let di = live_inode(&mut c, ino)?;
            let attrs = c.ext_attrs(ino, &di)?;
            attrs
                .into_iter()
                .find(|a| a.namespace == ns.code() && a.name == name)
                .map(|a| a.value)
                .ok_or_else(|| no_attr(name))
        })();
        self.counted(Call::Other, 0, r)
    }

    /// The attributes `cred` may see, in the order the inode holds them.
    pub fn listxattr(&self, ino: Ino, cred: Cred) -> Result<Vec<(XattrNs, Vec<u8>)>> {
        let r = (|| {
            let mut c = self.lock();
            let di = live_inode(&mut c, ino)?;
            let attrs = c.ext_attrs(ino, &di)?;
            Ok(attrs
                .into_iter()
                .filter_map(|a| Some((XattrNs::from_code(a.namespace)?, a.name)))
                .filter(|(ns, _)| check_cred(*ns, cred).is_ok())
                .collect())
        })();
        self.counted(Call::Other, 0, r)
    }

    /// Sets attribute `name` in `ns` to `value`.
    pub fn setxattr(
        &self,
        ino: Ino,
        ns: XattrNs,
        name: &[u8],
        value: &[u8],
        how: XattrSet,
        cred: Cred,
    ) -> Result<()> {
        let r = self.finish(|c| {
            // An ACL written whole must be one FreeBSD can read: it
            // refuses a malformed one with EPERM on every access.
            if super::acl::is_acl_attr(ns.code(), name) {
                super::acl::check_acl_value(c.g.v.endian, value)?;
            }
            Self::change_xattrs(c, ino, ns, name, cred, |attrs, found| {
                match (found, how) {
                    (Some(_), XattrSet::Create) => {
                        return Err(Error::new(
                            ErrorKind::Exists,
                            format!("attribute {} exists", String::from_utf8_lossy(name)),
                        ))
                    }
                    (None, XattrSet::Replace) => return Err(no_attr(name)),
                    _ => {}
                }
                let new = ExtAttr {
                    namespace: ns.code(),
                    name: name.to_vec(),
                    value: value.to_vec(),
                };
                // ffs_setextattr: a replaced attribute is removed and the
                // new one appended.
                if let Some(i) = found {
                    attrs.remove(i);
                }
                attrs.push(new);
                Ok(())
            })
        });
        self.counted(Call::Setattr, value.len() as u64, r)
    }

    /// Removes attribute `name` from `ns`.
    pub fn removexattr(&self, ino: Ino, ns: XattrNs, name: &[u8], cred: Cred) -> Result<()> {
        let r = self.finish(|c| {
            Self::change_xattrs(c, ino, ns, name, cred, |attrs, found| {
                let i = found.ok_or_else(|| no_attr(name))?;
                attrs.remove(i);
                Ok(())
            })
        });
        self.counted(Call::Setattr, 0, r)
    }

    /// Reads the attributes of `ino`, lets `edit` change the list (given
    /// the index of `name` in `ns` if present) and stores the result.
    fn change_xattrs(
        c: &mut FsCore,
        ino: Ino,
        ns: XattrNs,
        name: &[u8],
        cred: Cred,
        edit: impl FnOnce(&mut Vec<ExtAttr>, Option<usize>) -> Result<()>,
    ) -> Result<()> {
        check_cred(ns, cred)?;
        check_attr_name(name)?;
        c.check_writable()?;
        c.check_ext_area()?;
        let di = live_inode(c, ino)?;
        if di.di_flags() & (IMMUTABLE | APPEND) != 0 {
            return Err(flag_refusal(
                "file is immutable or append-only: its attributes cannot change",
            ));
        }
        let mut attrs = c.ext_attrs(ino, &di)?;
        let found = attrs
            .iter()
            .position(|a| a.namespace == ns.code() && a.name == name);
        let before = attrs.len();
        edit(&mut attrs, found)?;
        let adds = attrs.len() >= before;
        store_xattrs(c, ino, di, &attrs, adds, cred)
    }
}

/// The system-namespace name under which Linux's `security.capability`
/// (a file's capability set) is kept.
pub const CAPABILITY_ATTR: &[u8] = b"security.capability";

/// Linux's rule for a file written to (`cap_inode_killpriv`, applied by
/// its kernel through `file_remove_privs`): the file loses its capability
/// set. `di` is changed in memory; the caller writes the inode. A file
/// without an attribute area costs nothing here.
pub(super) fn drop_capability(
    c: &mut FsCore,
    ino: Ino,
    di: &mut ufs_format::Dinode,
    cred: Cred,
) -> Result<()> {
    if di.di_extsize() == 0 {
        return Ok(());
    }
    let mut attrs = c.ext_attrs(ino, di)?;
    let Some(i) = attrs
        .iter()
        .position(|a| a.namespace == EXTATTR_NAMESPACE_SYSTEM && a.name == CAPABILITY_ATTR)
    else {
        return Ok(());
    };
    attrs.remove(i);
    let area = extattr::encode_area(c.g.v.endian, &attrs);
    c.replace_ext_area(ino, di, &area, cred.reserve())
}

/// Stores `attrs` as the attribute area of `ino` (whose inode is `di`)
/// and the inode with a new ctime. `adds`: the change puts an attribute
/// on the inode, which only regular files and directories take.
pub(super) fn store_xattrs(
    c: &mut FsCore,
    ino: Ino,
    mut di: ufs_format::Dinode,
    attrs: &[ExtAttr],
    adds: bool,
    cred: Cred,
) -> Result<()> {
    if adds && !(di.is_reg() || di.is_dir()) {
        return Err(Error::new(
            ErrorKind::NotSupported,
            "extended attributes go on regular files and directories only",
        ));
    }
    let area = extattr::encode_area(c.g.v.endian, attrs);
    c.replace_ext_area(ino, &mut di, &area, cred.reserve())?;
    touch(&mut di, false, true, false);
    c.write_inode(ino, &di)?;
    Ok(())
}
