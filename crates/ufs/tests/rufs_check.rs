//! Images ufskit writes read back identically with an independent UFS2
//! reader (the `rufs` crate), after copying trees in and then renaming,
//! deleting, truncating and appending.
use testkit::*;
use ufs::{Fs, Ino, MountOptions};

#[test]
fn rufs_reads_what_ufskit_wrote() {
    let t = tempfile::tempdir().unwrap();
    let host = hostile_and_real_tree(t.path(), 3000);
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
    // rename across directories, removals in the big directory, a
    // truncation and an append, a sparse file over 4 GiB
    let linux = fs.lookup(root, b"linux").ok().map(|a| a.ino);
    rename_remove_truncate(&fs, &host, 3000);
    if let Some(l) = linux {
        // remove a whole subtree
        fn rm_rf(fs: &Fs, dir: Ino) {
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
    assert_same_tree(&want, &got, "rufs read of our image");
}
