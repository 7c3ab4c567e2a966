//! Images without a mount, as an image builder or examiner runs them:
//! `makefs` from a host tree, `extract` back out, `ls`, `cat`, `stat`.
//! No FUSE anywhere here.
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use testkit::*;

mod common;
use common::*;

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// The hostile tree (255-byte names, deep nesting, a large directory, hard
/// links, symlinks, sparse files, a 5 GiB sparse file, fifos), with modes,
/// times, an extended attribute and, as root, a device node and owners.
fn source_tree(dir: &Path) -> PathBuf {
    let src = dir.join("src");
    hostile_tree(&src, 3000, true);
    std::fs::write(src.join("plain"), b"plain text\n").unwrap();
    std::fs::set_permissions(src.join("plain"), std::fs::Permissions::from_mode(0o640)).unwrap();
    xattr::set(src.join("plain"), "user.origin", b"host").unwrap();
    let when = nix::sys::time::TimeSpec::new(1_234_567_890, 123_456_789);
    nix::sys::stat::utimensat(
        nix::fcntl::AT_FDCWD,
        &src.join("plain"),
        &when,
        &when,
        nix::sys::stat::UtimensatFlags::NoFollowSymlink,
    )
    .unwrap();
    if is_root() {
        nix::sys::stat::mknod(
            &src.join("null"),
            nix::sys::stat::SFlag::S_IFCHR,
            nix::sys::stat::Mode::from_bits_truncate(0o666),
            nix::sys::stat::makedev(1, 3),
        )
        .unwrap();
        std::os::unix::fs::lchown(src.join("plain"), Some(1234), Some(5678)).unwrap();
    }
    src
}

#[test]
fn makefs_then_extract_gives_the_tree_back_and_the_same_bytes_twice() {
    let tmp = tempfile::tempdir().unwrap();
    let src = source_tree(tmp.path());
    let a = tmp.path().join("a.img");
    let b = tmp.path().join("b.img");
    for img in [&a, &b] {
        run(ufskit()
            .args(["makefs", "-q", "-T", "1700000000"])
            .arg(img)
            .arg(&src));
    }
    assert_fsck_clean(&a);
    assert!(
        std::fs::read(&a).unwrap() == std::fs::read(&b).unwrap(),
        "two makefs runs with -T gave different images"
    );
    // Smaller than the 5 GiB file it holds: holes stay holes.
    let img_len = std::fs::metadata(&a).unwrap().len();
    assert!(
        img_len < 1 << 30,
        "image of {img_len} bytes: holes were written"
    );

    // What the engine sees in the image is the tree.
    {
        let fs = ufs::Fs::open_path(
            &a,
            ufs::MountOptions {
                read_only: true,
                ..Default::default()
            },
        )
        .unwrap();
        assert_same_tree(&walk_host(&src), &walk_fs(&fs), "makefs image");
    }

    // Out again.
    let out = tmp.path().join("out");
    let res = run(ufskit().arg("extract").arg(&a).arg(&out));
    let said = String::from_utf8_lossy(&res.stderr);
    assert!(said.contains("extracted"), "no summary: {said}");
    assert_same_tree(&walk_host(&src), &walk_host(&out), "extracted tree");
    let plain = std::fs::metadata(out.join("plain")).unwrap();
    assert_eq!(plain.mode() & 0o7777, 0o640);
    // -T stamps every time.
    assert_eq!(plain.mtime(), 1_700_000_000);
    assert_eq!(
        xattr::get(out.join("plain"), "user.origin").unwrap(),
        Some(b"host".to_vec())
    );
    if is_root() {
        assert_eq!((plain.uid(), plain.gid()), (1234, 5678));
        let null = std::fs::metadata(out.join("null")).unwrap();
        assert_eq!(null.rdev(), nix::sys::stat::makedev(1, 3));
    }
    // Sparse on the way out too, and hard links are links.
    let walk = walk_host(&src);
    for (rel, _) in walk
        .iter()
        .filter(|(_, n)| matches!(n, Node::File { size, .. } if *size > 1 << 30))
    {
        let m = std::fs::metadata(out.join(rel)).unwrap();
        assert!(
            m.blocks() * 512 < 64 << 20,
            "{}: holes filled on extract",
            rel.display()
        );
    }
    let linked: Vec<_> = walk
        .keys()
        .filter(|rel| {
            let m = std::fs::symlink_metadata(src.join(rel)).unwrap();
            m.is_file() && m.nlink() > 1
        })
        .collect();
    assert!(!linked.is_empty(), "the tree has hard links");
    for rel in linked {
        assert_eq!(
            std::fs::metadata(out.join(rel)).unwrap().nlink(),
            std::fs::metadata(src.join(rel)).unwrap().nlink(),
            "{}",
            rel.display()
        );
    }
}

#[test]
fn makefs_keeps_times_without_t_and_makes_ufs1_big_endian() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir_all(src.join("d/e")).unwrap();
    std::fs::write(src.join("d/e/f"), vec![7u8; 300_000]).unwrap();
    std::fs::write(src.join("small"), b"x").unwrap();
    let when = nix::sys::time::TimeSpec::new(1_000_000_000, 5);
    nix::sys::stat::utimensat(
        nix::fcntl::AT_FDCWD,
        &src.join("small"),
        &when,
        &when,
        nix::sys::stat::UtimensatFlags::NoFollowSymlink,
    )
    .unwrap();
    let img = tmp.path().join("be1.img");
    run(ufskit()
        .args(["makefs", "-q", "-B", "be", "-o", "version=1"])
        .arg(&img)
        .arg(&src));
    assert_fsck_clean(&img);
    let dump = run(ufskit().args(["dumpfs", "-s"]).arg(&img));
    let dump = String::from_utf8_lossy(&dump.stdout).to_lowercase();
    assert!(
        dump.contains("ufs1") && dump.contains("big"),
        "not UFS1 big-endian:\n{dump}"
    );
    let st = run(ufskit().args(["stat", "--json"]).arg(&img).arg("/small"));
    let v: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap();
    assert_eq!(v[0]["mtime"]["sec"], 1_000_000_000);
    assert_eq!(v[0]["mtime"]["nsec"], 5);
    let cat = run(ufskit().arg("cat").arg(&img).arg("/d/e/f"));
    assert_eq!(cat.stdout, vec![7u8; 300_000]);
}

#[test]
fn makefs_with_a_size_too_small_says_so_and_leaves_no_image() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("big"), vec![1u8; 20 << 20]).unwrap();
    let img = tmp.path().join("small.img");
    let out = ufskit()
        .args(["makefs", "-s", "8M"])
        .arg(&img)
        .arg(&src)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("does not fit"), "{err}");
    assert!(!img.exists(), "a failed makefs left its image");
    // Without -s the size is found, and -M bounds it.
    let out = ufskit()
        .args(["makefs", "-M", "10M"])
        .arg(&img)
        .arg(&src)
        .output()
        .unwrap();
    assert!(!out.status.success());
    run(ufskit().args(["makefs", "-q"]).arg(&img).arg(&src));
    assert_fsck_clean(&img);
    let len = std::fs::metadata(&img).unwrap().len();
    assert!(
        len < 40 << 20,
        "{len} bytes for a 20 MiB tree is not the smallest that fits"
    );
}

#[test]
fn makefs_owners_come_from_the_tree_from_r_or_from_a_spec() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir_all(src.join("etc")).unwrap();
    std::fs::write(src.join("etc/passwd"), b"root:*:0:0::/root:/bin/sh\n").unwrap();
    std::fs::write(src.join("mine"), b"m").unwrap();
    let spec = tmp.path().join("spec");
    std::fs::write(
        &spec,
        "#mtree\n/set type=file uid=0 gid=0\n./etc/passwd mode=0600 uid=0\n./mine uid=77 gid=88 mode=0700\n./var/empty type=dir mode=0555\n",
    )
    .unwrap();
    let uid_of = |img: &Path, p: &str| -> (u64, u64, u64) {
        let st = run(ufskit().args(["stat", "--json"]).arg(img).arg(p));
        let v: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap();
        (
            v[0]["uid"].as_u64().unwrap(),
            v[0]["gid"].as_u64().unwrap(),
            v[0]["perm"].as_u64().unwrap(),
        )
    };
    let me = (
        u64::from(nix::unistd::geteuid().as_raw()),
        u64::from(nix::unistd::getegid().as_raw()),
    );
    let img = tmp.path().join("plain.img");
    run(ufskit().args(["makefs", "-q"]).arg(&img).arg(&src));
    let (u, g, _) = uid_of(&img, "/mine");
    assert_eq!((u, g), me);
    let img = tmp.path().join("spec.img");
    run(ufskit()
        .args(["makefs", "-q", "-r", "-F"])
        .arg(&spec)
        .arg(&img)
        .arg(&src));
    assert_fsck_clean(&img);
    assert_eq!(uid_of(&img, "/mine"), (77, 88, 0o700));
    assert_eq!(uid_of(&img, "/etc/passwd"), (0, 0, 0o600));
    assert_eq!(uid_of(&img, "/var/empty").2, 0o555);
    // -r: root's, for what the spec does not name.
    assert_eq!(uid_of(&img, "/etc").0, 0);
}

#[test]
fn an_unprivileged_user_makes_and_extracts_an_image() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    // The whole source tree: a 5 GiB sparse file, hard links, fifos, an
    // attribute, and (made by root beforehand) a device node, all readable.
    let src = source_tree(tmp.path());
    std::fs::set_permissions(src.join("plain"), std::fs::Permissions::from_mode(0o644)).unwrap();
    std::os::unix::fs::symlink("plain", src.join("l")).unwrap();
    // As root, the commands run as nobody; otherwise as the user we are.
    let user = if is_root() {
        65534
    } else {
        nix::unistd::geteuid().as_raw()
    };
    let as_nobody = |args: &[&std::ffi::OsStr]| {
        let mut c = if is_root() {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                .arg(env!("CARGO_BIN_EXE_ufskit"));
            c
        } else {
            ufskit()
        };
        run(c.args(args))
    };
    let img = tmp.path().join("user.img");
    let again = tmp.path().join("again.img");
    let out = tmp.path().join("out");
    for i in [&img, &again] {
        as_nobody(&[
            "makefs".as_ref(),
            "-q".as_ref(),
            "-r".as_ref(),
            "-T".as_ref(),
            "1700000000".as_ref(),
            i.as_os_str(),
            src.as_os_str(),
        ]);
    }
    assert_eq!(std::fs::metadata(&img).unwrap().uid(), user);
    assert_fsck_clean(&img);
    assert!(
        std::fs::read(&img).unwrap() == std::fs::read(&again).unwrap(),
        "two unprivileged makefs runs with -T differ"
    );
    // -r: root's inside, whoever made it.
    let st = run(ufskit().args(["stat", "--json"]).arg(&img).arg("/plain"));
    let v: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap();
    assert_eq!(
        (v[0]["uid"].as_u64(), v[0]["gid"].as_u64()),
        (Some(0), Some(0))
    );
    if is_root() {
        let st = run(ufskit().args(["stat", "--json"]).arg(&img).arg("/null"));
        let v: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap();
        assert_eq!(v[0]["kind"], "CharDev");
    }
    as_nobody(&[
        "extract".as_ref(),
        "-q".as_ref(),
        img.as_os_str(),
        out.as_os_str(),
    ]);
    let mut want = walk_host(&src);
    // Not root: no device node on the way out (a warning says so).
    want.retain(|p, _| p != Path::new("null"));
    let mut got = walk_host(&out);
    got.retain(|p, _| p != Path::new("null"));
    assert_same_tree(&want, &got, "extracted by an unprivileged user");
    assert_eq!(
        std::fs::read_link(out.join("l")).unwrap(),
        Path::new("plain")
    );
    // Not root: the files are the user's, whatever the image says.
    assert_eq!(std::fs::metadata(out.join("plain")).unwrap().uid(), user);
}

#[test]
fn ls_cat_and_stat_read_without_a_mount_and_an_unclean_image_is_read_with_a_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir_all(src.join("dir")).unwrap();
    std::fs::write(src.join("dir/hello"), b"hello, world\n").unwrap();
    std::os::unix::fs::symlink("dir/hello", src.join("link")).unwrap();
    let img = tmp.path().join("t.img");
    run(ufskit().args(["makefs", "-q"]).arg(&img).arg(&src));
    let ls = run(ufskit().args(["ls", "-l"]).arg(&img));
    let ls = String::from_utf8_lossy(&ls.stdout);
    assert!(
        ls.lines()
            .any(|l| l.starts_with("drwx") && l.ends_with(" dir")),
        "{ls}"
    );
    assert!(
        ls.lines()
            .any(|l| l.starts_with("lrwx") && l.ends_with(" link -> dir/hello")),
        "{ls}"
    );
    let ls = run(ufskit().args(["ls", "-R"]).arg(&img));
    assert!(String::from_utf8_lossy(&ls.stdout).contains("hello"));
    let cat = run(ufskit().arg("cat").arg(&img).arg("/dir/hello"));
    assert_eq!(cat.stdout, b"hello, world\n");
    let st = run(ufskit().arg("stat").arg(&img).arg("/dir/hello"));
    assert!(String::from_utf8_lossy(&st.stdout).contains("Size: 13"));
    let missing = ufskit().arg("cat").arg(&img).arg("/nope").output().unwrap();
    assert!(!missing.status.success());
    let dir = ufskit().arg("cat").arg(&img).arg("/dir").output().unwrap();
    assert!(String::from_utf8_lossy(&dir.stderr).contains("is a directory"));

    // Left as a crashed writer leaves it: changed, synced, and let go
    // without unmounting (the engine writes nothing when dropped).
    {
        let fs = ufs::Fs::open_path(&img, Default::default()).unwrap();
        let root = fs.root();
        let f = fs
            .mknod(root, b"late", 0o100644, 0, ufs::Cred::ROOT)
            .unwrap();
        fs.write(f.ino, 0, b"written, not unmounted", ufs::Cred::ROOT)
            .unwrap();
        fs.sync().unwrap();
        drop(fs);
    }
    let before = std::fs::read(&img).unwrap();
    let out = tmp.path().join("out");
    let res = run(ufskit().arg("extract").arg(&img).arg(&out));
    assert!(
        String::from_utf8_lossy(&res.stderr).contains("not cleanly unmounted"),
        "no warning: {}",
        String::from_utf8_lossy(&res.stderr)
    );
    assert_eq!(
        std::fs::read(out.join("late")).unwrap(),
        b"written, not unmounted"
    );
    assert!(
        std::fs::read(&img).unwrap() == before,
        "extract wrote to the image"
    );
}

/// An image whose directory names one of its ancestors (a loop FreeBSD's
/// fsck would cut): extract and ls -R end, with a warning, and copy each
/// directory once.
#[test]
fn a_directory_loop_in_a_damaged_image_ends_with_a_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir_all(src.join("a/b")).unwrap();
    std::fs::write(src.join("a/b/loop_entry_xyz"), b"x").unwrap();
    let img = tmp.path().join("loop.img");
    run(ufskit().args(["makefs", "-q"]).arg(&img).arg(&src));
    let a_ino = {
        let st = run(ufskit().args(["stat", "--json"]).arg(&img).arg("/a"));
        let v: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap();
        v[0]["ino"].as_u64().unwrap() as u32
    };
    // The entry "loop_entry_xyz" now names directory /a (d_ino and d_type
    // in the 8-byte header before the name).
    let mut bytes = std::fs::read(&img).unwrap();
    let at = bytes
        .windows(14)
        .position(|w| w == b"loop_entry_xyz")
        .expect("the entry's name on disk");
    bytes[at - 8..at - 4].copy_from_slice(&a_ino.to_le_bytes());
    bytes[at - 2] = 4; // DT_DIR
    std::fs::write(&img, &bytes).unwrap();
    let out = tmp.path().join("out");
    let res = run(ufskit().arg("extract").arg(&img).arg(&out));
    let err = String::from_utf8_lossy(&res.stderr);
    assert!(err.contains("already copied"), "{err}");
    assert!(out.join("a/b").is_dir());
    let ls = run(ufskit().args(["ls", "-R"]).arg(&img));
    assert!(String::from_utf8_lossy(&ls.stdout).contains("/a/b:"));
}

/// Damaged images (metadata bytes overwritten at random, 24 seeds):
/// extract and ls end with success or a clear error, never a panic, and
/// extract copies what it can read.
#[test]
fn extract_and_ls_of_randomly_damaged_images_end_without_a_panic() {
    use rand::{Rng, SeedableRng};
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    hostile_tree(&src, 200, false);
    let img = tmp.path().join("base.img");
    run(ufskit()
        .args(["makefs", "-q", "-o", "bsize=4096,fsize=512"])
        .arg(&img)
        .arg(&src));
    let base = std::fs::read(&img).unwrap();
    let meta_end = base.len().min(2 << 20);
    let (mut ok, mut refused) = (0, 0);
    for seed in 0..24u64 {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut bytes = base.clone();
        // Past the primary superblock (a damaged one is refused whole):
        // groups, inodes, directories, data.
        for _ in 0..40 {
            let i = rng.gen_range(65536 + 8192..meta_end);
            bytes[i] = rng.gen();
        }
        let bad = tmp.path().join(format!("bad{seed}.img"));
        std::fs::write(&bad, &bytes).unwrap();
        let out = tmp.path().join(format!("out{seed}"));
        for args in [vec!["extract", "-q"], vec!["ls", "-lR"]] {
            let mut c = Command::new("timeout");
            c.arg("120")
                .arg(env!("CARGO_BIN_EXE_ufskit"))
                .args(&args)
                .arg(&bad);
            if args[0] == "extract" {
                c.arg(&out);
            }
            let r = c.output().unwrap();
            match r.status.code() {
                Some(0) => ok += 1,
                Some(1) => {
                    assert!(
                        String::from_utf8_lossy(&r.stderr).starts_with("ufskit"),
                        "seed {seed}, {args:?}: an error without a message: {r:?}"
                    );
                    refused += 1
                }
                _ => panic!("seed {seed}, {args:?}: {r:?}"),
            }
        }
        let _ = std::fs::remove_dir_all(&out);
    }
    eprintln!("damaged images: {ok} read through, {refused} refused with a message");
}
