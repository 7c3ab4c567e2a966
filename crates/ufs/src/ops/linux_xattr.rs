//! Linux's extended attribute names onto FreeBSD's two namespaces, and
//! POSIX ACLs between Linux's `system.posix_acl_*` value form and the
//! entries FreeBSD stores (`posix1e.acl_access`, `posix1e.acl_default`).
//! One mapping for every place a Linux name meets the disk: the mount,
//! `extract` (attributes onto the host's files) and `makefs` (the host's
//! attributes into an image).
//!
//! Invariants: `parse(linux_xattr_name(ns, n)) == Raw(ns, n)` for every
//! attribute but the two ACL names, which parse as `Acl`; a name that maps
//! nowhere is `None`, never a guess.
/// What a Linux attribute name stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinuxXattr<'a> {
    /// A FreeBSD attribute: namespace and name.
    Raw(crate::XattrNs, &'a [u8]),
    /// `system.posix_acl_access` / `_default`: an ACL, converted between
    /// Linux's form and FreeBSD's `posix1e.acl_*` attributes.
    Acl(crate::AclKind),
}

/// Linux attribute names onto FreeBSD's namespaces:
/// - `user.NAME` is the user namespace's NAME;
/// - `system.posix_acl_access` and `system.posix_acl_default` are the ACLs
///   FreeBSD keeps in `posix1e.acl_access` and `posix1e.acl_default`;
/// - `security.NAME` is the system namespace's `security.NAME` (FreeBSD
///   has no security namespace; its MAC labels are system attributes too);
/// - `system.NAME` is the system namespace's NAME (`nfs4.acl`, MAC labels);
/// - `trusted.NAME` (Linux's superuser's: overlayfs keeps its whiteouts
///   and redirects there) is the system namespace's `trusted.NAME`, which
///   FreeBSD's superuser alone reads and writes too.
pub fn parse_name(name: &[u8]) -> Option<LinuxXattr<'_>> {
    use crate::XattrNs::*;
    if let Some(n) = name.strip_prefix(b"user.") {
        Some(LinuxXattr::Raw(User, n))
    } else if name == b"system.posix_acl_access" {
        Some(LinuxXattr::Acl(crate::AclKind::Access))
    } else if name == b"system.posix_acl_default" {
        Some(LinuxXattr::Acl(crate::AclKind::Default))
    } else if name.starts_with(b"security.") || name.starts_with(b"trusted.") {
        Some(LinuxXattr::Raw(System, name))
    } else if let Some(n) = name.strip_prefix(b"system.") {
        // Not a second name for a security.* or trusted.* attribute (the
        // kernel checks CAP_SETFCAP and the security modules for
        // security.*, nothing for system.*).
        if n.starts_with(b"security.") || n.starts_with(b"trusted.") {
            return None;
        }
        Some(LinuxXattr::Raw(System, n))
    } else {
        None
    }
}

/// The Linux name of a FreeBSD attribute, and whether anyone may see it
/// (else only the superuser: the system namespace is FreeBSD's
/// superuser's; Linux shows ACLs and `security.*` to everyone).
pub fn linux_xattr_name(ns: crate::XattrNs, name: &[u8]) -> (Vec<u8>, bool) {
    use ufs_format::acl::{POSIX1E_ACL_ACCESS_EXTATTR_NAME, POSIX1E_ACL_DEFAULT_EXTATTR_NAME};
    match ns {
        crate::XattrNs::User => ([b"user.", name].concat(), true),
        crate::XattrNs::System if name == POSIX1E_ACL_ACCESS_EXTATTR_NAME => {
            (b"system.posix_acl_access".to_vec(), true)
        }
        crate::XattrNs::System if name == POSIX1E_ACL_DEFAULT_EXTATTR_NAME => {
            (b"system.posix_acl_default".to_vec(), true)
        }
        crate::XattrNs::System if name.starts_with(b"security.") => (name.to_vec(), true),
        crate::XattrNs::System if name.starts_with(b"trusted.") => (name.to_vec(), false),
        crate::XattrNs::System => ([b"system.", name].concat(), false),
    }
}

impl<'a> LinuxXattr<'a> {
    /// What the Linux attribute `name` is on disk, if anything.
    pub fn parse(name: &'a [u8]) -> Option<LinuxXattr<'a>> {
        parse_name(name)
    }
}

/// Linux's `posix_acl_xattr` form: version 2, then entries of tag (u16),
/// permissions (u16) and id (u32), little-endian.
pub const POSIX_ACL_XATTR_VERSION: u32 = 2;

pub fn acl_to_linux(entries: &[ufs_format::acl::AclEntry]) -> Vec<u8> {
    let mut v = POSIX_ACL_XATTR_VERSION.to_le_bytes().to_vec();
    for e in entries {
        // Known tags only (acl::decode), all below 0x40; 0 is Linux's
        // ACL_UNDEFINED_TAG, which the kernel refuses.
        v.extend_from_slice(&u16::try_from(e.tag).unwrap_or(0).to_le_bytes());
        v.extend_from_slice(&e.perm.to_le_bytes());
        v.extend_from_slice(&e.id.to_le_bytes());
    }
    v
}

pub fn acl_from_linux(v: &[u8]) -> Option<Vec<ufs_format::acl::AclEntry>> {
    let (head, rest) = v.split_at_checked(4)?;
    if u32::from_le_bytes(head.try_into().ok()?) != POSIX_ACL_XATTR_VERSION || rest.len() % 8 != 0 {
        return None;
    }
    Some(
        rest.chunks_exact(8)
            .map(|c| ufs_format::acl::AclEntry {
                tag: u32::from(u16::from_le_bytes([c[0], c[1]])),
                perm: u16::from_le_bytes([c[2], c[3]]),
                id: u32::from_le_bytes([c[4], c[5], c[6], c[7]]),
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::XattrNs::{System, User};

    #[test]
    fn every_stored_name_comes_back_from_its_linux_name() {
        for (ns, n) in [
            (User, &b"mime_type"[..]),
            (System, b"security.selinux"),
            (System, b"trusted.overlay.opaque"),
            (System, b"nfs4.acl"),
        ] {
            let (linux, _) = linux_xattr_name(ns, n);
            assert_eq!(LinuxXattr::parse(&linux), Some(LinuxXattr::Raw(ns, n)));
        }
        let (linux, public) = linux_xattr_name(System, b"posix1e.acl_access");
        assert!(public);
        assert_eq!(
            LinuxXattr::parse(&linux),
            Some(LinuxXattr::Acl(crate::AclKind::Access))
        );
        assert_eq!(LinuxXattr::parse(b"system.security.x"), None);
        assert_eq!(LinuxXattr::parse(b"os2.x"), None);
    }

    #[test]
    fn acls_round_trip_through_the_linux_form() {
        let entries = vec![
            ufs_format::acl::AclEntry {
                tag: 1,
                perm: 6,
                id: u32::MAX,
            },
            ufs_format::acl::AclEntry {
                tag: 2,
                perm: 4,
                id: 1000,
            },
        ];
        let v = acl_to_linux(&entries);
        assert_eq!(v.len(), 4 + 8 * entries.len());
        assert_eq!(acl_from_linux(&v), Some(entries));
        assert_eq!(acl_from_linux(&v[..v.len() - 1]), None);
    }
}
