//! POSIX.1e ACLs as FreeBSD stores them: `struct oldacl` in the system
//! extended attributes `posix1e.acl_access` and `posix1e.acl_default`
//! (FreeBSD `sys/sys/acl.h`, read and written by `ufs_getacl_posix1e` and
//! `ufs_setacl_posix1e` in `sys/ufs/ufs/ufs_acl.c`).
//!
//! The value is always 388 bytes: `acl_cnt` (i32) and 32 entries of 12
//! bytes, `ae_tag` (i32), `ae_id` (u32), `ae_perm` (u16) and two bytes of
//! padding; unused entries are zero. The integers are in the file
//! system's byte order (the kernel stores the machine's structure). FreeBSD refuses a value of any other
//! length (EPERM: "the object DAC protections are unsafe").
//!
//! Invariants: [`decode`] accepts only that length, a count from 0 to 32
//! and known tags and permission bits, and never panics; `decode(encode(x))
//! == x` for any list [`encode`] accepts.
use crate::bytes::Endian;
use crate::error::FormatError;

pub const POSIX1E_ACL_ACCESS_EXTATTR_NAME: &[u8] = b"posix1e.acl_access";
pub const POSIX1E_ACL_DEFAULT_EXTATTR_NAME: &[u8] = b"posix1e.acl_default";
pub const NFS4_ACL_EXTATTR_NAME: &[u8] = b"nfs4.acl";
pub const OLDACL_MAX_ENTRIES: usize = 32;
/// `sizeof(struct oldacl)`.
pub const OLDACL_SIZE: usize = 4 + OLDACL_MAX_ENTRIES * 12;

/// Entry tags (the same numbers as Linux's `posix_acl_xattr` entries).
pub const ACL_USER_OBJ: u32 = 0x01;
pub const ACL_USER: u32 = 0x02;
pub const ACL_GROUP_OBJ: u32 = 0x04;
pub const ACL_GROUP: u32 = 0x08;
pub const ACL_MASK: u32 = 0x10;
pub const ACL_OTHER: u32 = 0x20;
/// `ae_id` of the entries that name no user or group.
pub const ACL_UNDEFINED_ID: u32 = u32::MAX;
/// Read, write, execute (`ACL_READ`, `ACL_WRITE`, `ACL_EXECUTE`).
pub const ACL_PERM_BITS: u16 = 0o7;

/// One entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AclEntry {
    pub tag: u32,
    pub id: u32,
    pub perm: u16,
}

fn known_tag(t: u32) -> bool {
    matches!(
        t,
        ACL_USER_OBJ | ACL_USER | ACL_GROUP_OBJ | ACL_GROUP | ACL_MASK | ACL_OTHER
    )
}

/// The entries of a stored ACL.
pub fn decode(en: Endian, v: &[u8]) -> Result<Vec<AclEntry>, FormatError> {
    let bad = |d: String| FormatError::corrupt("POSIX.1e ACL", d);
    if v.len() != OLDACL_SIZE {
        return Err(bad(format!("{} bytes, not {OLDACL_SIZE}", v.len())));
    }
    let raw = en.get_i32(v, 0);
    let Some(cnt) = usize::try_from(raw)
        .ok()
        .filter(|&n| n <= OLDACL_MAX_ENTRIES)
    else {
        return Err(bad(format!("{raw} entries (at most {OLDACL_MAX_ENTRIES})")));
    };
    let mut out = Vec::with_capacity(cnt);
    for i in 0..cnt {
        let e = &v[4 + 12 * i..16 + 12 * i];
        let tag = en.get_u32(e, 0);
        let id = en.get_u32(e, 4);
        let perm = en.get_u16(e, 8);
        if !known_tag(tag) {
            return Err(bad(format!("entry {i}: unknown tag {tag:#x}")));
        }
        if perm & !ACL_PERM_BITS != 0 {
            return Err(bad(format!("entry {i}: permission bits {perm:#o}")));
        }
        out.push(AclEntry { tag, id, perm });
    }
    Ok(out)
}

/// The stored form of `entries` (None past 32 entries).
pub fn encode(en: Endian, entries: &[AclEntry]) -> Option<Vec<u8>> {
    if entries.len() > OLDACL_MAX_ENTRIES {
        return None;
    }
    let mut v = vec![0u8; OLDACL_SIZE];
    en.set_i32(&mut v, 0, i32::try_from(entries.len()).ok()?);
    for (i, e) in entries.iter().enumerate() {
        let at = 4 + 12 * i;
        en.set_u32(&mut v, at, e.tag);
        en.set_u32(&mut v, at + 4, e.id);
        en.set_u16(&mut v, at + 8, e.perm);
    }
    Some(v)
}

/// Is `entries` a valid access or default ACL (`acl_posix1e_check`): one
/// owner, owning group and other entry, named users and groups unique, a
/// mask exactly when there are named entries?
pub fn valid(entries: &[AclEntry]) -> bool {
    let count = |t| entries.iter().filter(|e| e.tag == t).count();
    let named = count(ACL_USER) + count(ACL_GROUP);
    let unique = |t| {
        let mut ids: Vec<u32> = entries
            .iter()
            .filter(|e| e.tag == t)
            .map(|e| e.id)
            .collect();
        let n = ids.len();
        ids.sort_unstable();
        ids.dedup();
        ids.len() == n
    };
    entries
        .iter()
        .all(|e| known_tag(e.tag) && e.perm & !ACL_PERM_BITS == 0)
        && count(ACL_USER_OBJ) == 1
        && count(ACL_GROUP_OBJ) == 1
        && count(ACL_OTHER) == 1
        && count(ACL_MASK) <= 1
        && (named == 0 || count(ACL_MASK) == 1)
        && unique(ACL_USER)
        && unique(ACL_GROUP)
}

/// Does `entries` say no more than a mode does (only the three base
/// entries)?
pub fn is_trivial(entries: &[AclEntry]) -> bool {
    entries.len() == 3
        && entries
            .iter()
            .all(|e| matches!(e.tag, ACL_USER_OBJ | ACL_GROUP_OBJ | ACL_OTHER))
}

/// The permission bits of a mode an access ACL implies: owner from the
/// owner entry, group from the mask (or the owning group without one),
/// other from the other entry (`acl_posix1e_acl_to_mode`).
pub fn mode_bits(entries: &[AclEntry]) -> u16 {
    let perm = |t| entries.iter().find(|e| e.tag == t).map(|e| e.perm);
    let group = perm(ACL_MASK).or(perm(ACL_GROUP_OBJ)).unwrap_or(0);
    (perm(ACL_USER_OBJ).unwrap_or(0) << 6) | (group << 3) | perm(ACL_OTHER).unwrap_or(0)
}

/// Sets the base entries of an access ACL from the permission bits of a
/// mode (the mode is authoritative for them: `ufs_sync_acl_from_inode`).
pub fn sync_from_mode(entries: &mut [AclEntry], mode: u16) {
    let has_mask = entries.iter().any(|e| e.tag == ACL_MASK);
    for e in entries.iter_mut() {
        match e.tag {
            ACL_USER_OBJ => e.perm = (mode >> 6) & 7,
            ACL_MASK => e.perm = (mode >> 3) & 7,
            ACL_GROUP_OBJ if !has_mask => e.perm = (mode >> 3) & 7,
            ACL_OTHER => e.perm = mode & 7,
            _ => {}
        }
    }
}

/// A new inode's access ACL from its directory's default ACL and the
/// creation mode (`acl_posix1e_newfilemode` and POSIX's rule, as Linux's
/// `posix_acl_create_masq`): the owner, other and mask (or owning group)
/// entries are limited by the mode's bits, and the mode's bits become
/// theirs. Returns the new permission bits, and the ACL unless it says no
/// more than the mode.
pub fn inherit(default: &[AclEntry], mode: u16) -> (u16, Option<Vec<AclEntry>>) {
    let mut acl = default.to_vec();
    let has_mask = acl.iter().any(|e| e.tag == ACL_MASK);
    for e in acl.iter_mut() {
        match e.tag {
            ACL_USER_OBJ => e.perm &= (mode >> 6) & 7,
            ACL_MASK => e.perm &= (mode >> 3) & 7,
            ACL_GROUP_OBJ if !has_mask => e.perm &= (mode >> 3) & 7,
            ACL_OTHER => e.perm &= mode & 7,
            _ => {}
        }
    }
    let bits = mode_bits(&acl);
    (bits, (!is_trivial(&acl)).then_some(acl))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(tag: u32, id: u32, perm: u16) -> AclEntry {
        AclEntry { tag, id, perm }
    }

    fn sample() -> Vec<AclEntry> {
        vec![
            e(ACL_USER_OBJ, ACL_UNDEFINED_ID, 7),
            e(ACL_USER, 1001, 6),
            e(ACL_GROUP_OBJ, ACL_UNDEFINED_ID, 5),
            e(ACL_GROUP, 20, 4),
            e(ACL_MASK, ACL_UNDEFINED_ID, 6),
            e(ACL_OTHER, ACL_UNDEFINED_ID, 0),
        ]
    }

    #[test]
    fn stored_form_is_struct_oldacl() {
        let v = encode(Endian::Little, &sample()).unwrap();
        assert_eq!(v.len(), 388);
        assert_eq!(&v[0..4], &6i32.to_le_bytes());
        // Second entry: ACL_USER 1001 rw-.
        assert_eq!(&v[16..20], &2u32.to_le_bytes());
        assert_eq!(&v[20..24], &1001u32.to_le_bytes());
        assert_eq!(&v[24..26], &6u16.to_le_bytes());
        assert!(v[4 + 12 * 6..].iter().all(|&b| b == 0));
        assert_eq!(decode(Endian::Little, &v).unwrap(), sample());
        assert!(decode(Endian::Little, &v[..387]).is_err());
        let mut w = v.clone();
        w[0] = 33;
        assert!(decode(Endian::Little, &w).is_err());
        let mut w = v;
        w[4] = 0x40;
        assert!(decode(Endian::Little, &w).is_err());
        assert!(encode(Endian::Little, &vec![e(ACL_USER, 1, 1); 33]).is_none());
    }

    #[test]
    fn big_endian_acls_hold_the_same_entries() {
        let v = encode(Endian::Big, &sample()).unwrap();
        assert_eq!(&v[0..4], &6i32.to_be_bytes());
        assert_eq!(&v[20..24], &1001u32.to_be_bytes());
        assert_eq!(decode(Endian::Big, &v).unwrap(), sample());
        assert!(decode(Endian::Little, &v).is_err(), "a count of 0x06000000");
    }

    #[test]
    fn validity_mode_bits_and_inheritance() {
        let a = sample();
        assert!(valid(&a));
        assert!(!valid(&a[1..]), "no owner entry");
        let mut b = a.clone();
        b.retain(|x| x.tag != ACL_MASK);
        assert!(!valid(&b), "named entries need a mask");
        assert_eq!(mode_bits(&a), 0o760);
        assert!(!is_trivial(&a));
        // A default ACL applied to a file created with mode 0644: the mask
        // keeps r-- of its rw-, the owner rw-, other nothing.
        let (bits, acl) = inherit(&a, 0o644);
        assert_eq!(bits, 0o640);
        let acl = acl.unwrap();
        assert_eq!(acl.iter().find(|x| x.tag == ACL_MASK).unwrap().perm, 4);
        assert_eq!(acl.iter().find(|x| x.tag == ACL_USER).unwrap().perm, 6);
        // A trivial default ACL gives just a mode.
        let t = vec![
            e(ACL_USER_OBJ, ACL_UNDEFINED_ID, 7),
            e(ACL_GROUP_OBJ, ACL_UNDEFINED_ID, 5),
            e(ACL_OTHER, ACL_UNDEFINED_ID, 5),
        ];
        assert_eq!(inherit(&t, 0o666), (0o644, None));
        let mut s = a;
        sync_from_mode(&mut s, 0o705);
        assert_eq!(mode_bits(&s), 0o705);
    }
}
