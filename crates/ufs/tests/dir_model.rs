//! Randomized directory operations checked against a model: every answer
//! of lookup, create, unlink and rename must match a map of names, under
//! each inode order for large directories and each write mode.
use proptest::prelude::*;
use std::collections::BTreeMap;
use testkit::*;
use ufs::{Cred, ErrorKind, Fs, Ino, MountOptions, RenameMode};

#[derive(Debug, Clone)]
enum Op {
    Create(u16),
    Unlink(u16),
    Lookup(u16),
    Rename(u16, u16),
}

fn name(i: u16) -> Vec<u8> {
    // Names of varied length so records of many sizes share chunks.
    let len = 1 + (i as usize * 37) % 60;
    let mut n = format!("{i}-").into_bytes();
    n.resize(len.max(n.len()), b'a' + (i % 26) as u8);
    n
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u16..600).prop_map(Op::Create),
        3 => (0u16..600).prop_map(Op::Unlink),
        2 => (0u16..600).prop_map(Op::Lookup),
        1 => (0u16..600, 0u16..600).prop_map(|(a, b)| Op::Rename(a, b)),
    ]
}

fn image() -> (tempfile::TempDir, std::path::PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let img = makefs_empty(t.path(), "d.img", "version=2", "64m", &["-f", "5000"]);
    (t, img)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn directory_matches_model(ops in proptest::collection::vec(op(), 1..1500), order in 0usize..4, mode in 0usize..4) {
        if !needs_makefs("directory_matches_model") {
            return Ok(());
        }
        let (_t, img) = image();
        // Every inode order for large directories, from a small size on, so
        // that placed inodes and inode-ordered chunks are exercised too.
        let opts = MountOptions {
            inode_order: ufs::alloc::placement::InodeOrder::ALL[order],
            inode_order_min: 2048,
            // ... and every write mode.
            write_mode: Some(ufs::order::WriteMode::ALL[mode]),
            ..MountOptions::default()
        };
        let fs = Fs::open_path(&img, opts).unwrap();
        let d = fs.mkdir(fs.root(), b"d", 0o755, Cred::ROOT).unwrap().ino;
        let mut model: BTreeMap<Vec<u8>, Ino> = BTreeMap::new();
        for op in ops {
            match op {
                Op::Create(i) => {
                    let r = fs.mknod(d, &name(i), 0o100644, 0, Cred::ROOT);
                    match model.get(&name(i)) {
                        Some(_) => prop_assert_eq!(r.unwrap_err().kind, ErrorKind::Exists),
                        None => { model.insert(name(i), r.unwrap().ino); }
                    }
                }
                Op::Unlink(i) => {
                    let r = fs.unlink(d, &name(i));
                    match model.remove(&name(i)) {
                        Some(_) => r.unwrap(),
                        None => prop_assert_eq!(r.unwrap_err().kind, ErrorKind::NotFound),
                    }
                }
                Op::Lookup(i) => {
                    let r = fs.lookup(d, &name(i));
                    match model.get(&name(i)) {
                        Some(&ino) => prop_assert_eq!(r.unwrap().ino, ino),
                        None => prop_assert_eq!(r.unwrap_err().kind, ErrorKind::NotFound),
                    }
                }
                Op::Rename(a, b) => {
                    let r = fs.rename(d, &name(a), d, &name(b), RenameMode::Replace);
                    match model.get(&name(a)).copied() {
                        None => prop_assert_eq!(r.unwrap_err().kind, ErrorKind::NotFound),
                        Some(ino) => {
                            r.unwrap();
                            if a != b {
                                model.remove(&name(a));
                                model.insert(name(b), ino);
                            }
                        }
                    }
                }
            }
        }
        // readdir returns exactly the model, each name once.
        let mut seen = BTreeMap::new();
        let mut cookie = 0;
        loop {
            let ents = fs.readdir(d, cookie, 97).unwrap();
            if ents.is_empty() { break; }
            cookie = ents.last().unwrap().next;
            for e in ents {
                if e.name != b"." && e.name != b".." {
                    prop_assert!(seen.insert(e.name.clone(), e.ino).is_none());
                }
            }
        }
        prop_assert_eq!(seen, model);
        // The directory's size never keeps empty trailing chunks beyond one.
        fs.unmount().unwrap();
        drop(fs);
        assert_fsck_clean(&img);
    }
}
