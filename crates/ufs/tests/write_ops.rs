//! Engine-level POSIX behaviour on a writable image, checked against a
//! model and after reopening.
use testkit::*;
use ufs::{Cred, ErrorKind, FileKind, Fs, MountOptions, RenameMode, SetAttr};

fn empty_image(dir: &std::path::Path, size: &str) -> std::path::PathBuf {
    makefs_empty(
        dir,
        "w.img",
        "version=2",
        size,
        &["-f", "20000", "-b", "20%"],
    )
}

#[test]
fn files_dirs_links_renames_survive_reopen() {
    if !needs_makefs("files_dirs_links_renames_survive_reopen") {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let img = empty_image(t.path(), "128m");
    let root = Cred::ROOT;
    {
        let fs = Fs::open_path(&img, MountOptions::default()).unwrap();
        let r = fs.root();
        let d = fs.mkdir(r, b"dir", 0o755, root).unwrap();
        let f = fs.mknod(d.ino, b"file", 0o100644, 0, root).unwrap();
        // Small, then growing through fragments, direct, indirect blocks.
        let mut model = Vec::new();
        for step in 0..40u32 {
            let chunk: Vec<u8> = (0..(step * 7919) % 70000)
                .map(|i| (i ^ step) as u8)
                .collect();
            let off = model.len() as u64;
            assert_eq!(fs.write(f.ino, off, &chunk, root).unwrap(), chunk.len());
            model.extend_from_slice(&chunk);
        }
        let a = fs.getattr(f.ino).unwrap();
        assert_eq!(a.size, model.len() as u64);
        assert_eq!(fs.read(f.ino, 0, model.len()).unwrap(), model);
        // A sparse file over 4 GiB.
        let s = fs.mknod(r, b"sparse", 0o100600, 0, root).unwrap();
        fs.write(s.ino, 5 << 30, b"tail", root).unwrap();
        assert_eq!(fs.getattr(s.ino).unwrap().size, (5 << 30) + 4);
        assert_eq!(fs.read(s.ino, 1 << 30, 8).unwrap(), vec![0u8; 8]);
        // Truncate down into the direct area and back up.
        fs.setattr(
            f.ino,
            &SetAttr {
                size: Some(5000),
                ..Default::default()
            },
            root,
        )
        .unwrap();
        model.truncate(5000);
        fs.setattr(
            f.ino,
            &SetAttr {
                size: Some(9000),
                ..Default::default()
            },
            root,
        )
        .unwrap();
        model.resize(9000, 0);
        assert_eq!(fs.read(f.ino, 0, 20000).unwrap(), model);
        // Links, symlinks, fifo.
        fs.link(f.ino, r, b"hard").unwrap();
        assert_eq!(fs.getattr(f.ino).unwrap().nlink, 2);
        fs.symlink(r, b"short", b"dir/file", root).unwrap();
        let long = vec![b'x'; 300];
        fs.symlink(r, b"long", &long, root).unwrap();
        fs.mknod(r, b"fifo", 0o010644, 0, root).unwrap();
        // Renames.
        fs.mkdir(r, b"other", 0o755, root).unwrap();
        fs.rename(r, b"dir", r, b"moved", RenameMode::Replace)
            .unwrap();
        let moved = fs.lookup(r, b"moved").unwrap();
        let other = fs.lookup(r, b"other").unwrap();
        fs.rename(r, b"moved", other.ino, b"inner", RenameMode::Replace)
            .unwrap();
        let err = fs
            .rename(r, b"other", other.ino, b"x", RenameMode::Replace)
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::Invalid);
        assert_eq!(fs.getattr(other.ino).unwrap().nlink, 3);
        assert_eq!(fs.getattr(r).unwrap().nlink, 3); // 2 + the subdirectory 'other'
        let _ = moved;
        // Replace an empty directory, refuse a non-empty one.
        fs.mkdir(r, b"e1", 0o755, root).unwrap();
        fs.mkdir(r, b"e2", 0o755, root).unwrap();
        fs.rename(r, b"e1", r, b"e2", RenameMode::Replace).unwrap();
        assert_eq!(
            fs.rename(r, b"e2", r, b"other", RenameMode::Replace)
                .unwrap_err()
                .kind,
            ErrorKind::NotEmpty
        );
        // Many entries in one directory, then remove half.
        let big = fs.mkdir(r, b"big", 0o755, root).unwrap();
        for i in 0..3000 {
            fs.mknod(
                big.ino,
                format!("entry-{i:05}").as_bytes(),
                0o100644,
                0,
                root,
            )
            .unwrap();
        }
        for i in (0..3000).step_by(2) {
            fs.unlink(big.ino, format!("entry-{i:05}").as_bytes())
                .unwrap();
        }
        assert_eq!(
            fs.lookup(big.ino, b"entry-00002").unwrap_err().kind,
            ErrorKind::NotFound
        );
        assert_eq!(
            fs.lookup(big.ino, b"entry-00003").unwrap().kind,
            FileKind::File
        );
        let name256 = vec![b'n'; 256];
        assert_eq!(
            fs.mknod(r, &name256, 0o100644, 0, root).unwrap_err().kind,
            ErrorKind::NameTooLong
        );
        fs.unmount().unwrap();
    }
    let fs = Fs::open_path(&img, MountOptions::default()).unwrap();
    assert!(fs.was_clean());
    let tree = walk_fs(&fs);
    assert!(tree.contains_key(std::path::Path::new("other/inner/file")));
    assert_eq!(
        tree[std::path::Path::new("short")],
        Node::Symlink(b"dir/file".to_vec())
    );
    assert_eq!(
        tree[std::path::Path::new("long")],
        Node::Symlink(vec![b'x'; 300])
    );
    let n = tree
        .keys()
        .filter(|k| k.parent() == Some(std::path::Path::new("big")))
        .count();
    assert_eq!(n, 1500);
    // Counters: the three copies agree with each other.
    {
        let (t, groups) = fs.summary();
        let mut sum = ufs_format::Csum::default();
        for cg in 0..fs.geometry().ncg {
            let cs = fs.cylinder_group(cg).unwrap().cg_cs();
            assert_eq!(cs, groups[cg as usize]);
            sum.cs_ndir += cs.cs_ndir;
            sum.cs_nbfree += cs.cs_nbfree;
            sum.cs_nifree += cs.cs_nifree;
            sum.cs_nffree += cs.cs_nffree;
        }
        assert_eq!(
            (t.cs_ndir, t.cs_nbfree, t.cs_nifree, t.cs_nffree),
            (
                sum.cs_ndir as i64,
                sum.cs_nbfree as i64,
                sum.cs_nifree as i64,
                sum.cs_nffree as i64
            )
        );
    }
    fs.unmount().unwrap();
    drop(fs);
    assert_fsck_clean(&img);
}
