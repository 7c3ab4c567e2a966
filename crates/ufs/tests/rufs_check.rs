//! Images ufskit writes read back identically with an independent UFS2
//! reader (the `rufs` crate), after copying trees in and then renaming,
//! deleting, truncating and appending.
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use testkit::*;
use ufs::{Cred, Fs, MountOptions, RenameMode, SetAttr};

#[test]
fn rufs_reads_what_ufskit_wrote() {
    let t = tempfile::tempdir().unwrap();
    let host = t.path().join("host");
    hostile_tree(&host.join("hostile"), 3000, false);
    // A slice of a real tree.
    let inc = Path::new("/usr/include/linux");
    if inc.exists() {
        let st = std::process::Command::new("cp")
            .arg("-a")
            .arg(inc)
            .arg(host.join("linux"))
            .status()
            .unwrap();
        assert!(st.success());
    }
    let img = t.path().join("u.img");
    let f = std::fs::File::create(&img).unwrap();
    f.set_len(1 << 30).unwrap();
    drop(f);
    let dev = ufs::dev::FileDevice::open(&img, true).unwrap();
    ufs::newfs::newfs(
        &dev,
        &ufs::newfs::NewfsParams {
            seed: Some(1),
            ..Default::default()
        },
    )
    .unwrap();
    drop(dev);
    let fs = Fs::open_path(
        &img,
        MountOptions {
            seed: Some(1),
            ..Default::default()
        },
    )
    .unwrap();
    copy_in(&fs, &host, fs.root());
    // Now change things, on both sides.
    let root = fs.root();
    let hostile = fs.lookup(root, b"hostile").unwrap().ino;
    // rename across directories
    let linux = fs.lookup(root, b"linux").ok().map(|a| a.ino);
    fs.rename(hostile, b"data", root, b"data-moved", RenameMode::Replace)
        .unwrap();
    std::fs::rename(host.join("hostile/data"), host.join("data-moved")).unwrap();
    // delete some entries of the big directory
    let big = fs.lookup(hostile, b"big").unwrap().ino;
    for i in (0..3000).step_by(3) {
        let n = format!("f{i:06}");
        fs.unlink(big, n.as_bytes()).unwrap();
        std::fs::remove_file(host.join("hostile/big").join(&n)).unwrap();
    }
    // truncate and append
    let dm = fs.lookup(root, b"data-moved").unwrap().ino;
    fs.setattr(
        dm,
        &SetAttr {
            size: Some(70_001),
            ..Default::default()
        },
        Cred::ROOT,
    )
    .unwrap();
    let sz = fs.getattr(dm).unwrap().size;
    fs.write(dm, sz, b"appended bytes", Cred::ROOT).unwrap();
    let mut d = std::fs::read(host.join("data-moved")).unwrap();
    d.truncate(70_001);
    d.extend_from_slice(b"appended bytes");
    std::fs::write(host.join("data-moved"), &d).unwrap();
    // a file over 4 GiB, sparse
    let huge = fs
        .mknod(root, b"huge", 0o100644, 0, Cred::ROOT)
        .unwrap()
        .ino;
    fs.write(huge, (4 << 30) + 100, b"beyond 4 GiB", Cred::ROOT)
        .unwrap();
    let hf = std::fs::File::create(host.join("huge")).unwrap();
    use std::os::unix::fs::FileExt;
    hf.write_all_at(b"beyond 4 GiB", (4 << 30) + 100).unwrap();
    if let Some(l) = linux {
        // remove a whole subtree
        fn rm_rf(fs: &Fs, dir: u64) {
            loop {
                let ents = fs.readdir(dir, 0, 1000).unwrap();
                let ents: Vec<_> = ents
                    .into_iter()
                    .filter(|e| e.name != b"." && e.name != b"..")
                    .collect();
                if ents.is_empty() {
                    break;
                }
                for e in ents {
                    if fs.getattr(e.ino).unwrap().kind == ufs::FileKind::Dir {
                        rm_rf(fs, e.ino);
                        fs.rmdir(dir, &e.name).unwrap();
                    } else {
                        fs.unlink(dir, &e.name).unwrap();
                    }
                }
            }
        }
        if fs.lookup(l, b"netfilter").is_ok() {
            let nf = fs.lookup(l, b"netfilter").unwrap().ino;
            rm_rf(&fs, nf);
            fs.rmdir(l, b"netfilter").unwrap();
            std::fs::remove_dir_all(host.join("linux/netfilter")).unwrap();
        }
    }
    fs.unmount().unwrap();
    drop(fs);
    assert_fsck_clean(&img);
    let want = walk_host(&host);
    let got = walk_rufs(&img);
    let missing: Vec<_> = want
        .keys()
        .filter(|k| !got.contains_key(*k))
        .take(5)
        .collect();
    let extra: Vec<_> = got
        .keys()
        .filter(|k| !want.contains_key(*k))
        .take(5)
        .collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "missing {missing:?} extra {extra:?}"
    );
    for (k, v) in &want {
        assert_eq!(Some(v), got.get(k), "{}", k.display());
    }
    let _ = OsStr::from_bytes(b"");
}
