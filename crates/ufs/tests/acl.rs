//! POSIX.1e ACLs as FreeBSD keeps them: `struct oldacl` (388 bytes) in the
//! system attributes `posix1e.acl_access` and `posix1e.acl_default`; the
//! mode's permission bits follow an access ACL and win over its base
//! entries; new inodes inherit a directory's default ACL limited by their
//! creation mode (with the umask ignored under a default ACL when the
//! caller hands it over, as Linux does); only the owner sets an ACL.
use std::sync::Arc;
use ufs::dev::MemDevice;
use ufs::fsck::{fsck, FsckMode};
use ufs::newfs::{newfs, NewfsParams};
use ufs::{AclKind, Cred, ErrorKind, Fs, Ino, MountOptions, XattrNs, XattrSet};
use ufs_format::acl::{
    decode, AclEntry, ACL_GROUP_OBJ, ACL_MASK, ACL_OTHER, ACL_UNDEFINED_ID, ACL_USER, ACL_USER_OBJ,
    OLDACL_SIZE,
};

fn e(tag: u32, id: u32, perm: u16) -> AclEntry {
    AclEntry { tag, id, perm }
}

fn base(u: u16, g: u16, o: u16) -> Vec<AclEntry> {
    vec![
        e(ACL_USER_OBJ, ACL_UNDEFINED_ID, u),
        e(ACL_GROUP_OBJ, ACL_UNDEFINED_ID, g),
        e(ACL_OTHER, ACL_UNDEFINED_ID, o),
    ]
}

/// user::rwx user:1000:rw- group::r-x mask::rwx other::---
fn extended() -> Vec<AclEntry> {
    vec![
        e(ACL_USER_OBJ, ACL_UNDEFINED_ID, 7),
        e(ACL_USER, 1000, 6),
        e(ACL_GROUP_OBJ, ACL_UNDEFINED_ID, 5),
        e(ACL_MASK, ACL_UNDEFINED_ID, 7),
        e(ACL_OTHER, ACL_UNDEFINED_ID, 0),
    ]
}

fn setup() -> (Arc<MemDevice>, Fs) {
    let dev = Arc::new(MemDevice::new(64 << 20));
    newfs(
        &*dev,
        &NewfsParams {
            seed: Some(1),
            ..Default::default()
        },
    )
    .unwrap();
    let fs = Fs::open(Box::new(dev.clone()), MountOptions::default()).unwrap();
    (dev, fs)
}

fn mode(fs: &Fs, ino: Ino) -> u32 {
    u32::from(fs.getattr(ino).unwrap().perm & 0o7777)
}

#[test]
fn an_access_acl_sets_the_mode_and_is_stored_as_freebsd_does() {
    let (dev, fs) = setup();
    let f = fs
        .mknod(fs.root(), b"f", 0o100644, 0, Cred::ROOT)
        .unwrap()
        .ino;
    fs.set_acl(f, AclKind::Access, Some(&extended()), false, Cred::ROOT)
        .unwrap();
    assert_eq!(mode(&fs, f), 0o770, "group bits from the mask");
    let raw = fs
        .getxattr(f, XattrNs::System, b"posix1e.acl_access", Cred::ROOT)
        .unwrap();
    assert_eq!(raw.len(), OLDACL_SIZE);
    assert_eq!(
        decode(ufs_format::Endian::Little, &raw).unwrap(),
        extended()
    );
    // chmod changes the base entries as read back (FreeBSD's rule).
    fs.setattr(
        f,
        &ufs::SetAttr {
            mode: Some(0o100640),
            ..Default::default()
        },
        Cred::ROOT,
    )
    .unwrap();
    let got = fs.get_acl(f, AclKind::Access).unwrap().unwrap();
    assert_eq!(got.iter().find(|x| x.tag == ACL_MASK).unwrap().perm, 4);
    assert_eq!(got.iter().find(|x| x.tag == ACL_OTHER).unwrap().perm, 0);
    assert_eq!(got.iter().find(|x| x.tag == ACL_USER).unwrap().perm, 6);
    // An ACL no richer than a mode is not stored.
    fs.set_acl(f, AclKind::Access, Some(&base(6, 0, 0)), false, Cred::ROOT)
        .unwrap();
    assert_eq!(mode(&fs, f), 0o600);
    assert_eq!(fs.get_acl(f, AclKind::Access).unwrap(), None);
    assert_eq!(fs.listxattr(f, Cred::ROOT).unwrap(), vec![]);
    // The owner or root only; a valid ACL only; defaults on directories.
    let other = Cred { uid: 7, gid: 7 };
    let err = fs
        .set_acl(f, AclKind::Access, Some(&extended()), false, other)
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Permission);
    let mut no_mask = extended();
    no_mask.retain(|x| x.tag != ACL_MASK);
    let err = fs
        .set_acl(f, AclKind::Access, Some(&no_mask), false, Cred::ROOT)
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Invalid);
    let err = fs
        .set_acl(f, AclKind::Default, Some(&extended()), false, Cred::ROOT)
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Access);
    // Written whole through the system namespace, it must be FreeBSD's form.
    let err = fs
        .setxattr(
            f,
            XattrNs::System,
            b"posix1e.acl_access",
            b"short",
            XattrSet::Either,
            Cred::ROOT,
        )
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Invalid);
    fs.unmount().unwrap();
    let rep = fsck(&*dev, FsckMode::Check).unwrap();
    assert!(rep.findings.is_empty(), "{:?}", rep.findings);
}

#[test]
fn new_inodes_inherit_the_default_acl() {
    let (dev, fs) = setup();
    let d = fs.mkdir(fs.root(), b"d", 0o755, Cred::ROOT).unwrap().ino;
    let mut def = extended();
    def.iter_mut()
        .filter(|x| x.tag == ACL_OTHER)
        .for_each(|x| x.perm = 5);
    fs.set_acl(d, AclKind::Default, Some(&def), false, Cred::ROOT)
        .unwrap();
    // Linux's way: the umask (022) is ignored under a default ACL.
    let f = fs
        .mknod_umask(d, b"f", 0o100666, 0, 0o022, Cred::ROOT)
        .unwrap()
        .ino;
    assert_eq!(mode(&fs, f), 0o664, "mask rwx and other r-x limited by 666");
    let acl = fs.get_acl(f, AclKind::Access).unwrap().unwrap();
    assert_eq!(acl.iter().find(|x| x.tag == ACL_USER).unwrap().perm, 6);
    assert_eq!(fs.get_acl(f, AclKind::Default).unwrap(), None);
    // A directory also takes the default ACL as its own default.
    let s = fs
        .mkdir_umask(d, b"sub", 0o777, 0o077, Cred::ROOT)
        .unwrap()
        .ino;
    assert_eq!(mode(&fs, s), 0o775);
    assert_eq!(fs.get_acl(s, AclKind::Default).unwrap(), Some(def.clone()));
    // Without a default ACL the umask applies.
    let g = fs
        .mknod_umask(fs.root(), b"g", 0o100666, 0, 0o027, Cred::ROOT)
        .unwrap()
        .ino;
    assert_eq!(mode(&fs, g), 0o640);
    assert_eq!(fs.get_acl(g, AclKind::Access).unwrap(), None);
    // FreeBSD's way (the mode already through the umask): the default ACL
    // still limits it.
    let h = fs.mknod(d, b"h", 0o100600, 0, Cred::ROOT).unwrap().ino;
    assert_eq!(mode(&fs, h), 0o600);
    // Symbolic links inherit nothing.
    let l = fs.symlink(d, b"l", b"f", Cred::ROOT).unwrap().ino;
    assert_eq!(fs.get_acl(l, AclKind::Access).unwrap(), None);
    // Removing the default ACL stops inheritance.
    fs.set_acl(d, AclKind::Default, None, false, Cred::ROOT)
        .unwrap();
    let k = fs
        .mknod_umask(d, b"k", 0o100666, 0, 0o022, Cred::ROOT)
        .unwrap()
        .ino;
    assert_eq!(mode(&fs, k), 0o644);
    fs.unmount().unwrap();
    let rep = fsck(&*dev, FsckMode::Check).unwrap();
    assert!(rep.findings.is_empty(), "{:?}", rep.findings);
    let fs = Fs::open(Box::new(dev.clone()), MountOptions::default()).unwrap();
    assert_eq!(fs.get_acl(s, AclKind::Default).unwrap(), Some(def));
    assert!(fs.get_acl(f, AclKind::Access).unwrap().is_some());
}
