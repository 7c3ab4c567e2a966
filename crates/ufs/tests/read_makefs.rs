//! Reading images written by another implementation (Debian's makefs).
use testkit::*;
use ufs::{Fs, MountOptions};

#[test]
fn reads_makefs_image_of_usr_include() {
    if !needs_makefs("reads_makefs_image_of_usr_include") {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let img = t.path().join("inc.img");
    let src = std::path::Path::new("/usr/include");
    makefs(src, &img, "400m");
    let fs = Fs::open_path(
        &img,
        MountOptions {
            read_only: true,
            ..Default::default()
        },
    )
    .unwrap();
    let want = walk_host(src);
    let got = walk_fs(&fs);
    assert_eq!(want.len(), got.len());
    for (k, v) in &want {
        assert_eq!(Some(v), got.get(k), "{}", k.display());
    }
}

#[test]
fn reads_makefs_image_of_hostile_tree() {
    if !needs_makefs("reads_makefs_image_of_hostile_tree") {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    hostile_tree(&src, 20_000, false);
    let img = t.path().join("h.img");
    makefs(&src, &img, "200m");
    let fs = Fs::open_path(
        &img,
        MountOptions {
            read_only: true,
            ..Default::default()
        },
    )
    .unwrap();
    let want = walk_host(&src);
    let got = walk_fs(&fs);
    assert_eq!(want.len(), got.len());
    for (k, v) in &want {
        assert_eq!(Some(v), got.get(k), "{}", k.display());
    }
    let root = fs.root();
    let data = fs.lookup(root, b"data").unwrap();
    assert_eq!(data.nlink, 2);
    let l = fs.lookup(root, "L".repeat(255).as_bytes()).unwrap();
    assert_eq!(l.size, 9);
}

// Files over 4 GiB cannot come from Debian's makefs (its block reader
// overflows a 32-bit offset: "bread: lseek ... Invalid argument"); they are
// covered by images ufskit writes, read back by ufskit and by rufs.
