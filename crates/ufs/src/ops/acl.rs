//! POSIX.1e ACLs: stored as FreeBSD stores them (system attributes
//! `posix1e.acl_access` and `posix1e.acl_default` holding a `struct
//! oldacl`, `ufs_format::acl`), read, set and inherited with FreeBSD's and
//! POSIX's rules (`ufs_getacl_posix1e`, `ufs_setacl_posix1e`,
//! `ufs_do_posix1e_acl_inheritance_dir`/`_file` in `sys/ufs/ufs/ufs_acl.c`).
//!
//! Invariants:
//! - The mode is authoritative for an access ACL's base entries: a read
//!   takes owner, mask (or owning group) and other from the mode; setting
//!   an access ACL sets the mode's permission bits from it. An access ACL
//!   that says no more than a mode is not stored.
//! - Only the owner or the superuser sets an ACL; a default ACL goes on
//!   directories only.
//! - A new inode in a directory with a default ACL gets the default ACL
//!   limited by its creation mode as its access ACL (a directory also gets
//!   the default ACL itself), in the same operation as its creation, so
//!   its name never reaches the disk before them.
use super::{flag_refusal, live_inode, touch, Cred, Fs};
use crate::error::{Error, ErrorKind, Result};
use crate::fs::FsCore;
use crate::Ino;
use ufs_format::acl::{self, AclEntry};
use ufs_format::extattr::{ExtAttr, EXTATTR_NAMESPACE_SYSTEM};
use ufs_format::{dinode, Dinode, Endian, APPEND, IMMUTABLE};

/// Which of an inode's two ACLs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AclKind {
    /// Decides access to the inode.
    Access,
    /// A directory's: what new inodes in it inherit.
    Default,
}

impl AclKind {
    fn attr_name(self) -> &'static [u8] {
        match self {
            AclKind::Access => acl::POSIX1E_ACL_ACCESS_EXTATTR_NAME,
            AclKind::Default => acl::POSIX1E_ACL_DEFAULT_EXTATTR_NAME,
        }
    }
}

/// Is `(namespace, name)` one of the attributes holding an ACL?
pub(crate) fn is_acl_attr(namespace: u8, name: &[u8]) -> bool {
    namespace == EXTATTR_NAMESPACE_SYSTEM
        && (name == acl::POSIX1E_ACL_ACCESS_EXTATTR_NAME
            || name == acl::POSIX1E_ACL_DEFAULT_EXTATTR_NAME)
}

/// The stored form of an ACL attribute's value, checked.
pub(crate) fn check_acl_value(en: Endian, value: &[u8]) -> Result<Vec<AclEntry>> {
    let entries = acl::decode(en, value)
        .map_err(|e| Error::new(ErrorKind::Invalid, format!("not a POSIX.1e ACL: {e}")))?;
    if !acl::valid(&entries) {
        return Err(Error::new(
            ErrorKind::Invalid,
            "not a valid POSIX.1e ACL (one owner, owning group and other entry; a mask with named entries)",
        ));
    }
    Ok(entries)
}

fn stored(en: Endian, attrs: &[ExtAttr], kind: AclKind, ino: Ino) -> Result<Option<Vec<AclEntry>>> {
    let Some(a) = attrs
        .iter()
        .find(|a| a.namespace == EXTATTR_NAMESPACE_SYSTEM && a.name == kind.attr_name())
    else {
        return Ok(None);
    };
    acl::decode(en, &a.value).map(Some).map_err(|e| {
        Error::damaged(
            crate::error::Damage::Inode(ino),
            format!("inode {ino}: ACL: {e}"),
        )
    })
}

fn put(
    en: Endian,
    attrs: &mut Vec<ExtAttr>,
    kind: AclKind,
    acl: Option<&[AclEntry]>,
) -> Result<()> {
    attrs.retain(|a| !(a.namespace == EXTATTR_NAMESPACE_SYSTEM && a.name == kind.attr_name()));
    if let Some(entries) = acl {
        let value = acl::encode(en, entries).ok_or_else(|| {
            Error::new(
                ErrorKind::NoSpace,
                format!("an ACL holds at most {} entries", acl::OLDACL_MAX_ENTRIES),
            )
        })?;
        attrs.push(ExtAttr {
            namespace: EXTATTR_NAMESPACE_SYSTEM,
            name: kind.attr_name().to_vec(),
            value,
        });
    }
    Ok(())
}

/// What a new inode of `mode` made in directory `parent` inherits: its
/// mode, and the attributes holding its ACLs. `umask`: the creator's, when
/// the caller has not applied it (Linux, through the mount: POSIX ignores
/// the umask under a default ACL); `None` when the mode already went
/// through it (FreeBSD's kernel applies the umask first, then the default
/// ACL). Symbolic links inherit nothing.
pub(crate) fn inherit(
    c: &mut FsCore,
    parent: Ino,
    pdi: &Dinode,
    mode: u16,
    umask: Option<u32>,
) -> Result<(u16, Vec<ExtAttr>)> {
    let fmt = mode & dinode::IFMT;
    if fmt == dinode::IFLNK {
        return Ok((mode, Vec::new()));
    }
    let default = if pdi.di_extsize() == 0 {
        None
    } else {
        let attrs = c.ext_attrs(parent, pdi)?;
        stored(c.g.v.endian, &attrs, AclKind::Default, parent)?
    };
    let Some(default) = default else {
        let masked = match umask {
            Some(u) => mode & !(u16::try_from(u & 0o777).unwrap_or(0o777)),
            None => mode,
        };
        return Ok((masked, Vec::new()));
    };
    let (bits, access) = acl::inherit(&default, mode & 0o777);
    let mut attrs = Vec::new();
    let en = c.g.v.endian;
    put(en, &mut attrs, AclKind::Access, access.as_deref())?;
    if fmt == dinode::IFDIR {
        put(en, &mut attrs, AclKind::Default, Some(&default))?;
    }
    Ok(((mode & !0o777) | bits, attrs))
}

impl Fs {
    /// The inode's ACL of `kind`, if it has one (an access ACL's base
    /// entries as the mode says).
    pub fn get_acl(&self, ino: Ino, kind: AclKind) -> Result<Option<Vec<AclEntry>>> {
        let r = (|| {
            let mut c = self.lock();
            let di = live_inode(&mut c, ino)?;
            if di.di_extsize() == 0 {
                return Ok(None);
            }
            let attrs = c.ext_attrs(ino, &di)?;
            let mut got = stored(c.g.v.endian, &attrs, kind, ino)?;
            if kind == AclKind::Access {
                if let Some(a) = got.as_mut() {
                    acl::sync_from_mode(a, di.di_mode());
                }
            }
            Ok(got)
        })();
        self.counted(super::Call::Other, 0, r)
    }

    /// Sets (or with `None` removes) the inode's ACL of `kind`.
    /// `kill_sgid`: setting an access ACL also clears the setgid bit (the
    /// caller is neither in the file's group nor allowed to keep it,
    /// Linux's `posix_acl_update_mode`).
    pub fn set_acl(
        &self,
        ino: Ino,
        kind: AclKind,
        entries: Option<&[AclEntry]>,
        kill_sgid: bool,
        cred: Cred,
    ) -> Result<()> {
        let r = self.finish(|c| {
            c.check_writable()?;
            let mut di = live_inode(c, ino)?;
            if cred.uid != 0 && cred.uid != di.di_uid() {
                return Err(Error::new(
                    ErrorKind::Permission,
                    "only the owner sets a file's ACL",
                ));
            }
            if di.di_flags() & (IMMUTABLE | APPEND) != 0 {
                return Err(flag_refusal("file is immutable or append-only"));
            }
            if kind == AclKind::Default && !di.is_dir() {
                return Err(Error::new(
                    ErrorKind::Access,
                    "only directories have a default ACL",
                ));
            }
            if let Some(e) = entries {
                if !acl::valid(e) {
                    return Err(Error::new(ErrorKind::Invalid, "not a valid POSIX.1e ACL"));
                }
            }
            let mut attrs = c.ext_attrs(ino, &di)?;
            let before = attrs.clone();
            let keep = match (kind, entries) {
                (AclKind::Access, Some(e)) => {
                    let bits = acl::mode_bits(e);
                    let keep = if kill_sgid { !0o2777 } else { !0o777 };
                    di.set_di_mode((di.di_mode() & keep) | bits);
                    (!acl::is_trivial(e)).then_some(e)
                }
                (_, e) => e.filter(|e| !e.is_empty()),
            };
            put(c.g.v.endian, &mut attrs, kind, keep)?;
            if attrs == before {
                // Only the mode changed (or nothing): the area stays.
                touch(&mut di, false, true, false);
                c.write_inode(ino, &di)?;
                return Ok(());
            }
            let adds = attrs.len() > before.len();
            super::xattr::store_xattrs(c, ino, di, &attrs, adds, cred)
        });
        self.counted(super::Call::Setattr, 0, r)
    }
}
