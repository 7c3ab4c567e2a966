//! Reading images written by another implementation (Debian's makefs).
mod common;
use common::*;
use ufs::{Fs, MountOptions};

#[test]
fn reads_makefs_image_of_usr_include() {
    if !have_makefs() {
        eprintln!("makefs not installed; skipping");
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let img = t.path().join("inc.img");
    let src = std::path::Path::new("/usr/include");
    makefs(src, &img, "400m");
    let fs = Fs::open_path(&img, MountOptions { read_only: true, ..Default::default() }).unwrap();
    let want = walk_host(src);
    let got = walk_fs(&fs);
    assert_eq!(want.len(), got.len());
    for (k, v) in &want {
        assert_eq!(Some(v), got.get(k), "{}", k.display());
    }
}
