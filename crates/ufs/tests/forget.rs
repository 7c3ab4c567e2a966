//! Kernel references dropped without the engine lock
//! (`Fs::forget_later`): an unlinked file that the kernel still
//! referenced keeps its inode and blocks until its forget is applied,
//! which the next change, `statfs` or the unmount does; a forget that
//! arrives with a new reference to the same inode outstanding leaves the
//! inode alone.
use ufs::fsck::{fsck, FsckMode};
use ufs::{Cred, ErrorKind, Fs, Ino, MountOptions};

/// A 1 MB file the kernel holds a reference to, unlinked.
fn unlinked_but_referenced(fs: &Fs, name: &[u8]) -> Ino {
    let f = fs
        .mknod(fs.root(), name, 0o100644, 0, Cred::ROOT)
        .unwrap()
        .ino;
    fs.remember(f);
    fs.write(f, 0, &vec![7u8; 1 << 20], Cred::ROOT).unwrap();
    fs.unlink(fs.root(), name).unwrap();
    f
}

#[test]
fn queued_forgets_free_at_the_next_change_at_statfs_and_at_unmount() {
    let dev = testkit::mem_image(64 << 20);
    let fs = Fs::open(Box::new(dev.clone()), MountOptions::default()).unwrap();
    let full = fs.statfs().bfree;
    // Applied by the next change.
    let f = unlinked_but_referenced(&fs, b"a");
    fs.forget_later(f, 1);
    assert!(fs.forgets_pending());
    assert!(fs.getattr(f).is_ok(), "still allocated while queued");
    fs.mkdir(fs.root(), b"d", 0o755, Cred::ROOT).unwrap();
    assert!(!fs.forgets_pending());
    let gone = fs.getattr(f).unwrap_err();
    assert_eq!(gone.kind, ErrorKind::NotFound, "{gone}");
    // Applied by statfs: df right after rm counts the space free.
    let g = unlinked_but_referenced(&fs, b"b");
    let held = fs.statfs().bfree;
    assert!(held + 200 < full, "1 MB in use: {held} of {full}");
    fs.forget_later(g, 1);
    assert!(fs.statfs().bfree >= held + 256, "the 1 MB came back");
    // A forget that crosses a new lookup of the same inode (a second
    // reference) leaves it allocated.
    let h = unlinked_but_referenced(&fs, b"c");
    fs.remember(h);
    fs.forget_later(h, 1);
    assert!(fs.apply_forgets().is_empty());
    assert!(fs.getattr(h).is_ok(), "one reference is left");
    // Applied by the unmount: the image is clean, nothing leaks.
    fs.rmdir(fs.root(), b"d").unwrap();
    fs.forget_later(h, 1);
    assert!(fs.forgets_pending());
    fs.unmount().unwrap();
    drop(fs);
    let rep = fsck(&*dev, FsckMode::Check).unwrap();
    assert!(rep.findings.is_empty(), "{:?}", rep.findings);
    let fs = Fs::open(Box::new(dev.clone()), MountOptions::default()).unwrap();
    assert_eq!(
        fs.statfs().bfree,
        full,
        "every block of the three files is free"
    );
}
