//! Extended attributes as UFS2 stores them: a list of records in the
//! inode's extended attribute area, the `di_extsize` bytes held by the
//! blocks `di_extb[0..UFS_NXADDR]` (FreeBSD `sys/ufs/ufs/extattr.h`,
//! `struct extattr`; read and written by `ffs_getextattr`/`ffs_setextattr`
//! in `sys/ufs/ffs/ffs_vnops.c`).
//!
//! A record is
//! - `ea_length` (u32): the whole record, a multiple of 8;
//! - `ea_namespace` (u8): 1 user, 2 system;
//! - `ea_contentpadlen` (u8): zero bytes after the value, up to the next
//!   multiple of 8;
//! - `ea_namelength` (u8) and the name, not NUL-terminated;
//! - zero padding to a multiple of 8 from the record's start, then the value.
//!
//! `ea_length` is in the file system's byte order (FreeBSD writes the
//! record as the machine's `struct extattr`); the other header fields are
//! bytes.
//!
//! Invariants: [`parse_area`] accepts only records that lie inside the area
//! and whose lengths agree with each other, and never panics; [`encode_area`]
//! writes what FreeBSD writes (records back to back, padding zeroed), so
//! `parse_area(encode_area(x)) == x`.
use crate::bytes::Endian;
use crate::error::FormatError;

/// `EXTATTR_NAMESPACE_USER`: readable and writable by whoever may read and
/// write the file.
pub const EXTATTR_NAMESPACE_USER: u8 = 1;
/// `EXTATTR_NAMESPACE_SYSTEM`: the superuser's (ACLs, MAC labels).
pub const EXTATTR_NAMESPACE_SYSTEM: u8 = 2;
/// Longest attribute name (`EXTATTR_MAXNAMELEN`, NAME_MAX).
pub const EXTATTR_MAXNAMELEN: usize = 255;
/// Bytes of a record before its name.
const HEADER: usize = 7;

/// One attribute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtAttr {
    pub namespace: u8,
    pub name: Vec<u8>,
    pub value: Vec<u8>,
}

fn roundup8(n: usize) -> usize {
    n.div_ceil(8) * 8
}

/// Offset of the value in a record whose name is `namelen` bytes
/// (`EXTATTR_BASE_LENGTH`).
pub fn value_offset(namelen: usize) -> usize {
    roundup8(HEADER + namelen)
}

/// Bytes a record takes in the area.
pub fn record_len(namelen: usize, valuelen: usize) -> usize {
    value_offset(namelen) + roundup8(valuelen)
}

impl ExtAttr {
    pub fn record_len(&self) -> usize {
        record_len(self.name.len(), self.value.len())
    }
}

/// The records of an extended attribute area of `area.len()` bytes
/// (`di_extsize`).
pub fn parse_area(e: Endian, area: &[u8]) -> Result<Vec<ExtAttr>, FormatError> {
    let mut out = Vec::new();
    let mut at = 0usize;
    let bad = |at: usize, why: String| {
        FormatError::corrupt(format!("extended attribute at byte {at}"), why)
    };
    while at < area.len() {
        let rest = &area[at..];
        if rest.len() < HEADER {
            return Err(bad(
                at,
                format!("{} bytes left, a record needs {HEADER}", rest.len()),
            ));
        }
        let len = e.get_u32(rest, 0) as usize;
        let namespace = rest[4];
        let padlen = rest[5] as usize;
        let namelen = rest[6] as usize;
        let voff = value_offset(namelen);
        if !len.is_multiple_of(8) || len < voff || len > rest.len() {
            return Err(bad(
                at,
                format!(
                    "length {len} (a multiple of 8 from {voff} to the {} bytes left)",
                    rest.len()
                ),
            ));
        }
        if padlen >= 8 || voff + padlen > len {
            return Err(bad(
                at,
                format!("value padding {padlen} in a record of {len} bytes"),
            ));
        }
        if namelen == 0 {
            return Err(bad(at, "empty name".into()));
        }
        out.push(ExtAttr {
            namespace,
            name: rest[HEADER..HEADER + namelen].to_vec(),
            value: rest[voff..len - padlen].to_vec(),
        });
        at += len;
    }
    Ok(out)
}

/// The area holding `attrs`, in order (its length is the new `di_extsize`).
pub fn encode_area(e: Endian, attrs: &[ExtAttr]) -> Vec<u8> {
    let mut out = Vec::with_capacity(attrs.iter().map(ExtAttr::record_len).sum());
    for a in attrs {
        let len = a.record_len();
        let start = out.len();
        out.extend_from_slice(&[0; 4]);
        // Names of at most EXTATTR_MAXNAMELEN bytes and values that fit
        // the inode's 32-bit di_extsize: the engine checks both.
        e.set_u32(&mut out, start, crate::bytes::low_u32(len as u64));
        out.push(a.namespace);
        out.push(crate::bytes::low_u8(
            roundup8(a.value.len()) - a.value.len(),
        ));
        out.push(crate::bytes::low_u8(a.name.len()));
        out.extend_from_slice(&a.name);
        out.resize(start + value_offset(a.name.len()), 0);
        out.extend_from_slice(&a.value);
        out.resize(start + len, 0);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    const L: Endian = Endian::Little;

    fn attr(ns: u8, name: &str, value: &[u8]) -> ExtAttr {
        ExtAttr {
            namespace: ns,
            name: name.as_bytes().to_vec(),
            value: value.to_vec(),
        }
    }

    #[test]
    fn records_are_laid_out_as_freebsd_writes_them() {
        let a = attr(EXTATTR_NAMESPACE_USER, "comment", b"hello");
        let area = encode_area(L, std::slice::from_ref(&a));
        // 7 + 7 name bytes round to 16; the 5-byte value to 8.
        assert_eq!(area.len(), 24);
        assert_eq!(&area[0..4], &24u32.to_le_bytes());
        assert_eq!(area[4], EXTATTR_NAMESPACE_USER);
        assert_eq!(area[5], 3, "content padding");
        assert_eq!(area[6], 7);
        assert_eq!(&area[7..14], b"comment");
        assert_eq!(&area[14..16], &[0, 0]);
        assert_eq!(&area[16..21], b"hello");
        assert_eq!(&area[21..24], &[0, 0, 0]);
        assert_eq!(parse_area(L, &area).unwrap(), vec![a]);
    }

    #[test]
    fn empty_values_and_many_records_round_trip() {
        let v = vec![
            attr(EXTATTR_NAMESPACE_SYSTEM, "posix1e.acl_access", &[1; 100]),
            attr(EXTATTR_NAMESPACE_USER, "x", b""),
            attr(EXTATTR_NAMESPACE_USER, &"n".repeat(255), &[7; 8]),
        ];
        let area = encode_area(L, &v);
        assert_eq!(area.len(), v.iter().map(ExtAttr::record_len).sum::<usize>());
        assert_eq!(parse_area(L, &area).unwrap(), v);
        assert_eq!(parse_area(L, &[]).unwrap(), vec![]);
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_parse_or_are_refused(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..300)) {
            if let Ok(v) = parse_area(L, &bytes) {
                proptest::prop_assert_eq!(parse_area(L, &encode_area(L, &v)).unwrap(), v);
            }
        }

        #[test]
        fn any_attributes_round_trip(v in proptest::collection::vec(
            (1u8..=2, proptest::collection::vec(1u8..=255, 1..=255), proptest::collection::vec(proptest::num::u8::ANY, 0..100)),
            0..6,
        )) {
            let v: Vec<ExtAttr> = v.into_iter().map(|(namespace, name, value)| ExtAttr { namespace, name, value }).collect();
            let area = encode_area(L, &v);
            proptest::prop_assert_eq!(area.len() % 8, 0);
            proptest::prop_assert_eq!(parse_area(L, &area).unwrap(), v);
        }
    }

    #[test]
    fn big_endian_records_differ_only_in_the_length() {
        let a = attr(EXTATTR_NAMESPACE_USER, "comment", b"hello");
        let le = encode_area(L, std::slice::from_ref(&a));
        let be = encode_area(Endian::Big, std::slice::from_ref(&a));
        assert_eq!(&be[0..4], &24u32.to_be_bytes());
        assert_eq!(&be[4..], &le[4..]);
        assert_eq!(parse_area(Endian::Big, &be).unwrap(), vec![a]);
        assert!(parse_area(L, &be).is_err());
    }

    #[test]
    fn broken_records_are_refused() {
        let area = encode_area(L, &[attr(EXTATTR_NAMESPACE_USER, "a", b"bc")]);
        // Length past the area.
        let mut b = area.clone();
        b[0] = 64;
        assert!(parse_area(L, &b).is_err());
        // Length not a multiple of 8.
        let mut b = area.clone();
        b[0] = 12;
        assert!(parse_area(L, &b).is_err());
        // Length shorter than the name.
        let mut b = area.clone();
        b[6] = 40;
        assert!(parse_area(L, &b).is_err());
        // Padding of 8 or more.
        let mut b = area.clone();
        b[5] = 9;
        assert!(parse_area(L, &b).is_err());
        // A zero length (would loop forever).
        let mut b = area.clone();
        b[0] = 0;
        assert!(parse_area(L, &b).is_err());
        // A tail too short for a header.
        let mut b = area.clone();
        b.extend_from_slice(&[8, 0, 0]);
        assert!(parse_area(L, &b).is_err());
    }
}
