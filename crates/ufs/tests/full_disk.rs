//! Writing until the disk is full: ENOSPC, the minfree reserve kept for
//! root, and a consistent file system afterwards.
use testkit::*;
use ufs::{Cred, ErrorKind, Fs, MountOptions};

#[test]
fn enospc_respects_minfree_and_leaves_counters_consistent() {
    if !needs_makefs("enospc_respects_minfree_and_leaves_counters_consistent") {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let img = makefs_empty(
        t.path(),
        "full.img",
        "version=2,minfree=10",
        "32m",
        &["-f", "2000"],
    );
    let fs = Fs::open_path(&img, MountOptions::default()).unwrap();
    let user = Cred {
        uid: 1000,
        gid: 1000,
    };
    let root = fs.root();
    fs.setattr(
        root,
        &ufs::SetAttr {
            mode: Some(0o777),
            ..Default::default()
        },
        Cred::ROOT,
    )
    .unwrap();
    let buf = vec![0xabu8; 1 << 20];
    let f = fs.mknod(root, b"user-file", 0o100644, 0, user).unwrap();
    let mut off = 0u64;
    let err = loop {
        match fs.write(f.ino, off, &buf, user) {
            Ok(n) if n == buf.len() => off += n as u64,
            Ok(n) => off += n as u64,
            Err(e) => break e,
        }
    };
    assert_eq!(err.kind, ErrorKind::NoSpace);
    let st = fs.statfs();
    assert_eq!(st.bavail, 0, "user stopped at the reserve");
    assert!(st.bfree > 0, "the reserve is still free for root");
    let user_bytes = off;
    // Root may use the reserve.
    let r = fs
        .mknod(root, b"root-file", 0o100644, 0, Cred::ROOT)
        .unwrap();
    let mut roff = 0u64;
    let err = loop {
        match fs.write(r.ino, roff, &buf, Cred::ROOT) {
            Ok(n) => roff += n as u64,
            Err(e) => break e,
        }
    };
    assert_eq!(err.kind, ErrorKind::NoSpace);
    assert!(roff > 0, "root wrote into the reserve");
    assert!(fs.statfs().bfree < st.bfree);
    // Small files fill the remaining fragments; then creation fails cleanly.
    let mut i = 0;
    loop {
        let name = format!("small{i}");
        match fs.mknod(root, name.as_bytes(), 0o100644, 0, Cred::ROOT) {
            Ok(a) => match fs.write(a.ino, 0, b"x", Cred::ROOT) {
                Ok(_) => {}
                Err(e) => {
                    assert_eq!(e.kind, ErrorKind::NoSpace);
                    break;
                }
            },
            Err(e) => {
                assert_eq!(e.kind, ErrorKind::NoSpace);
                break;
            }
        }
        i += 1;
    }
    // Data written before ENOSPC reads back.
    assert_eq!(fs.read(f.ino, user_bytes - 10, 10).unwrap(), vec![0xab; 10]);
    // Delete everything: all space comes back.
    fs.unlink(root, b"user-file").unwrap();
    fs.unlink(root, b"root-file").unwrap();
    for j in 0..i {
        let _ = fs.unlink(root, format!("small{j}").as_bytes());
    }
    let _ = fs.unlink(root, format!("small{i}").as_bytes());
    let after = fs.statfs();
    fs.unmount().unwrap();
    drop(fs);
    let fs = Fs::open_path(&img, MountOptions::default()).unwrap();
    assert_eq!(fs.statfs().bfree, after.bfree);
    let t = fs.summary().0;
    let mut nb = 0i64;
    for cg in 0..fs.geometry().ncg {
        nb += fs.cylinder_group(cg).unwrap().cg_cs().cs_nbfree as i64;
    }
    assert_eq!(nb, t.cs_nbfree);
    fs.unmount().unwrap();
    drop(fs);
    assert_fsck_clean(&img);
}
