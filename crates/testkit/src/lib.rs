//! Helpers shared by the engine's integration tests: building source trees,
//! making images with Debian's makefs or in memory, and walking a mounted
//! `Fs`.
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use ufs::{FileKind, Fs};

pub fn have_makefs() -> bool {
    Command::new("makefs").arg("-h").output().is_ok() || Path::new("/usr/sbin/makefs").exists()
}

/// Whether a test may run: `ok` says its prerequisite (a program, root,
/// /dev/fuse) is there. A missing one fails the test, as CI installs
/// everything (`scripts/deps.sh`); a developer who cannot have it sets
/// `UFSKIT_ALLOW_SKIPS=1`, and the test is then skipped, said so on
/// stderr, and counted in [`skip_ledger`], which `scripts/test.sh`
/// reports at the end. Never a silent pass.
pub fn prerequisite(ok: bool, test: &str, needs: &str) -> bool {
    if ok {
        return true;
    }
    if std::env::var_os("UFSKIT_ALLOW_SKIPS").is_none() {
        panic!(
            "{test} needs {needs}: install it (scripts/deps.sh), or set UFSKIT_ALLOW_SKIPS=1 to skip such tests and have them counted"
        );
    }
    eprintln!("SKIPPED {test}: needs {needs}");
    use std::io::Write;
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(skip_ledger())
    {
        let _ = writeln!(f, "{test}: needs {needs}");
    }
    false
}

/// Where skipped tests are counted (one line each): `UFSKIT_SKIP_LEDGER`
/// (scripts/test.sh gives each run its own), else a file in the
/// temporary directory.
pub fn skip_ledger() -> PathBuf {
    std::env::var_os("UFSKIT_SKIP_LEDGER")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("ufskit-skipped-tests.txt"))
}

/// [`prerequisite`] for Debian's makefs.
pub fn needs_makefs(test: &str) -> bool {
    prerequisite(have_makefs(), test, "makefs (apt-get install makefs)")
}

/// Root and a usable /dev/fuse (FUSE mounts).
pub fn have_fuse() -> bool {
    let root = std::fs::metadata("/proc/self").is_ok_and(|m| {
        use std::os::unix::fs::MetadataExt;
        m.uid() == 0
    });
    root && std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
        .is_ok()
}

/// Whether the kernel offers FUSE over io_uring to a default mount now
/// (Linux 6.14+ with the fuse module's `enable_uring` on, which a mount
/// leaves alone unless told `-o uring=on`; `scripts/deps.sh` turns it on
/// for the tests).
pub fn uring_offered() -> bool {
    std::fs::read_to_string("/sys/module/fuse/parameters/enable_uring")
        .is_ok_and(|v| v.trim() == "Y" || v.trim() == "1")
}

/// [`prerequisite`] for FUSE mounts.
pub fn needs_fuse(test: &str) -> bool {
    prerequisite(have_fuse(), test, "root and /dev/fuse")
}

pub fn makefs(src: &Path, img: &Path, size: &str) {
    makefs_with(src, img, "version=2", size, &[]);
}

/// Runs Debian's makefs with `-o OPTS -s SIZE` plus `extra` flags.
pub fn makefs_with(src: &Path, img: &Path, opts: &str, size: &str, extra: &[&str]) {
    let out = Command::new("/usr/sbin/makefs")
        .args(["-t", "ffs", "-o", opts, "-s", size])
        .args(extra)
        .arg(img)
        .arg(src)
        .output()
        .expect("run makefs");
    assert!(
        out.status.success(),
        "makefs failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// An image of an empty tree, `name` in `dir`.
pub fn makefs_empty(dir: &Path, name: &str, opts: &str, size: &str, extra: &[&str]) -> PathBuf {
    let src = dir.join(format!("{name}.src"));
    std::fs::create_dir_all(&src).unwrap();
    let img = dir.join(name);
    makefs_with(&src, &img, opts, size, extra);
    img
}

/// What a tree holds, keyed by relative path.
#[derive(Debug, PartialEq, Eq)]
pub enum Node {
    File { size: u64, data_hash: u64 },
    Dir,
    Symlink(Vec<u8>),
    Other(FileKind),
}

/// Asserts two trees hold the same paths with the same contents; `what`
/// names the comparison in the failure message.
pub fn assert_same_tree(want: &BTreeMap<PathBuf, Node>, got: &BTreeMap<PathBuf, Node>, what: &str) {
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
        "{what}: missing {missing:?}, extra {extra:?}"
    );
    for (k, v) in want {
        assert_eq!(Some(v), got.get(k), "{what}: {}", k.display());
    }
}

/// A memory device that records the reads it serves and the read-ahead
/// hints it is given, and takes hints or not (a device that takes none is
/// what the modeled disks are): for tests of what the engine asks of a
/// device.
pub struct Recorded {
    pub mem: std::sync::Arc<ufs::dev::MemDevice>,
    pub takes_hints: bool,
    /// (byte offset, length) of each hint, in order.
    pub hints: std::sync::Arc<std::sync::Mutex<Vec<(u64, usize)>>>,
    /// (byte offset, length) of each read, in order.
    pub reads: std::sync::Arc<std::sync::Mutex<Vec<(u64, usize)>>>,
}

impl Recorded {
    pub fn new(mem: &std::sync::Arc<ufs::dev::MemDevice>, takes_hints: bool) -> Recorded {
        Recorded {
            mem: mem.clone(),
            takes_hints,
            hints: Default::default(),
            reads: Default::default(),
        }
    }
}

impl ufs::dev::BlockDevice for Recorded {
    fn read_at(&self, off: u64, buf: &mut [u8]) -> ufs::Result<()> {
        self.reads.lock().unwrap().push((off, buf.len()));
        self.mem.read_at(off, buf)
    }
    fn write_at(&self, off: u64, buf: &[u8]) -> ufs::Result<()> {
        self.mem.write_at(off, buf)
    }
    fn flush(&self) -> ufs::Result<()> {
        self.mem.flush()
    }
    fn size(&self) -> u64 {
        self.mem.size()
    }
    fn prefetches(&self) -> bool {
        self.takes_hints
    }
    fn prefetch(&self, off: u64, len: usize) {
        self.hints.lock().unwrap().push((off, len));
    }
}

/// A fresh file system of `bytes` in memory, made the same way every time
/// (seeded allocator, fixed time).
pub fn mem_image(bytes: u64) -> std::sync::Arc<ufs::dev::MemDevice> {
    let dev = std::sync::Arc::new(ufs::dev::MemDevice::new(bytes));
    ufs::newfs::newfs(
        &*dev,
        &ufs::newfs::NewfsParams {
            seed: Some(1),
            time: Some(1_700_000_000),
            ..Default::default()
        },
    )
    .unwrap();
    dev
}

pub fn hash(data: &[u8]) -> u64 {
    // FNV-1a: enough to compare contents in tests.
    let mut h: u64 = 0xcbf29ce484222325;
    for &b in data {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

/// Walks a host directory.
pub fn walk_host(root: &Path) -> BTreeMap<PathBuf, Node> {
    use std::os::unix::fs::FileTypeExt;
    let mut out = BTreeMap::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let full = root.join(&rel);
        for e in std::fs::read_dir(&full).unwrap() {
            let e = e.unwrap();
            let r = rel.join(e.file_name());
            let ft = e.file_type().unwrap();
            let n = if ft.is_dir() {
                stack.push(r.clone());
                Node::Dir
            } else if ft.is_symlink() {
                use std::os::unix::ffi::OsStrExt;
                Node::Symlink(
                    std::fs::read_link(e.path())
                        .unwrap()
                        .as_os_str()
                        .as_bytes()
                        .to_vec(),
                )
            } else if ft.is_file() {
                let len = e.metadata().unwrap().len();
                if len > (64 << 20) {
                    // Huge (sparse) files: compare size and the last MiB.
                    use std::os::unix::fs::FileExt;
                    let mut tail = vec![0u8; 1 << 20];
                    std::fs::File::open(e.path())
                        .unwrap()
                        .read_exact_at(&mut tail, len - (1 << 20))
                        .unwrap();
                    Node::File {
                        size: len,
                        data_hash: hash(&tail),
                    }
                } else {
                    let d = std::fs::read(e.path()).unwrap();
                    Node::File {
                        size: d.len() as u64,
                        data_hash: hash(&d),
                    }
                }
            } else if ft.is_fifo() {
                Node::Other(FileKind::Fifo)
            } else {
                Node::Other(FileKind::CharDev)
            };
            out.insert(r, n);
        }
    }
    out
}

/// Walks a file system through the engine.
pub fn walk_fs(fs: &Fs) -> BTreeMap<PathBuf, Node> {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let mut out = BTreeMap::new();
    let mut stack = vec![(PathBuf::new(), fs.root())];
    while let Some((rel, dino)) = stack.pop() {
        let mut cookie = 0;
        loop {
            let ents = fs.readdir(dino, cookie, 1000).unwrap();
            if ents.is_empty() {
                break;
            }
            cookie = ents.last().unwrap().next;
            for e in ents {
                if e.name == b"." || e.name == b".." {
                    continue;
                }
                let r = rel.join(OsStr::from_bytes(&e.name));
                let a = fs.getattr(e.ino).unwrap();
                let n = match a.kind {
                    FileKind::Dir => {
                        stack.push((r.clone(), e.ino));
                        Node::Dir
                    }
                    FileKind::Symlink => Node::Symlink(fs.readlink(e.ino).unwrap()),
                    FileKind::File if a.size > (64 << 20) => {
                        // Huge (sparse) files: compare size and the last MiB.
                        let tail = fs.read(e.ino, a.size - (1 << 20), 1 << 20).unwrap();
                        Node::File {
                            size: a.size,
                            data_hash: hash(&tail),
                        }
                    }
                    FileKind::File => {
                        let mut d = Vec::new();
                        while (d.len() as u64) < a.size {
                            let chunk = fs.read(e.ino, d.len() as u64, 1 << 20).unwrap();
                            assert!(!chunk.is_empty());
                            d.extend_from_slice(&chunk);
                        }
                        Node::File {
                            size: a.size,
                            data_hash: hash(&d),
                        }
                    }
                    k => Node::Other(k),
                };
                out.insert(r, n);
            }
        }
    }
    out
}

/// A tree that exercises every corner readers get wrong: names of 255
/// bytes, nesting 100 deep, a directory of `big` entries, hard links,
/// short and long symlinks, a sparse file, a file over 4 GiB (sparse on
/// the host; `huge` false skips it), fifos.
pub fn hostile_tree(root: &Path, big: usize, huge: bool) {
    use std::os::unix::fs::symlink;
    std::fs::create_dir_all(root).unwrap();
    let long_name = "L".repeat(255);
    std::fs::write(root.join(&long_name), b"long name").unwrap();
    let mut d = root.join("deep");
    for i in 0..100 {
        d = d.join(format!("d{i}"));
    }
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("bottom"), b"bottom of the well").unwrap();
    let bigdir = root.join("big");
    std::fs::create_dir_all(&bigdir).unwrap();
    for i in 0..big {
        std::fs::write(bigdir.join(format!("f{i:06}")), []).unwrap();
    }
    std::fs::write(
        root.join("data"),
        (0..200_000u32).map(|i| (i * 7) as u8).collect::<Vec<_>>(),
    )
    .unwrap();
    std::fs::hard_link(root.join("data"), root.join("data-link")).unwrap();
    symlink("data", root.join("short-link")).unwrap();
    symlink("x".repeat(200), root.join("long-link")).unwrap();
    let f = std::fs::File::create(root.join("sparse")).unwrap();
    f.set_len(10 << 20).unwrap();
    use std::os::unix::fs::FileExt;
    f.write_all_at(b"middle", 5 << 20).unwrap();
    f.write_all_at(b"end", (10 << 20) - 3).unwrap();
    if huge {
        let f = std::fs::File::create(root.join("huge")).unwrap();
        f.set_len((4 << 30) + 4096).unwrap();
        f.write_all_at(b"past four gigabytes", 4 << 30).unwrap();
    }
    let fifo = root.join("fifo");
    let st = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(st.success());
}

/// Copies a host tree into `fs` under directory `dst` (files, dirs,
/// symlinks, fifos, hard links by host inode), keeping mode and mtime.
pub fn copy_in(fs: &Fs, src: &Path, dst: ufs::Ino) {
    use std::collections::HashMap;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let root = ufs::Cred::ROOT;
    let mut links: HashMap<(u64, u64), ufs::Ino> = HashMap::new();
    let mut stack = vec![(src.to_path_buf(), dst)];
    while let Some((dir, dino)) = stack.pop() {
        let mut ents: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap())
            .collect();
        ents.sort_by_key(|e| e.file_name());
        for e in ents {
            let name = e.file_name();
            let name = name.as_bytes();
            let md = std::fs::symlink_metadata(e.path()).unwrap();
            let ft = md.file_type();
            let mode = (md.mode() & 0o7777) as u16;
            let ino = if ft.is_dir() {
                let a = fs.mkdir(dino, name, mode as u32, root).unwrap();
                stack.push((e.path(), a.ino));
                a.ino
            } else if ft.is_symlink() {
                let t = std::fs::read_link(e.path()).unwrap();
                fs.symlink(dino, name, t.as_os_str().as_bytes(), root)
                    .unwrap()
                    .ino
            } else if ft.is_file() && md.nlink() > 1 && links.contains_key(&(md.dev(), md.ino())) {
                let target = links[&(md.dev(), md.ino())];
                fs.link(target, dino, name).unwrap();
                continue;
            } else if ft.is_file() {
                let a = fs
                    .mknod(dino, name, 0o100000 | mode as u32, 0, root)
                    .unwrap();
                let data = std::fs::read(e.path()).unwrap();
                // Write in 128 KiB pieces, skipping all-zero pieces (holes).
                for (i, piece) in data.chunks(128 << 10).enumerate() {
                    if piece.iter().any(|&b| b != 0) {
                        fs.write(a.ino, (i as u64) << 17, piece, root).unwrap();
                    }
                }
                fs.setattr(
                    a.ino,
                    &ufs::SetAttr {
                        size: Some(data.len() as u64),
                        ..Default::default()
                    },
                    root,
                )
                .unwrap();
                if md.nlink() > 1 {
                    links.insert((md.dev(), md.ino()), a.ino);
                }
                a.ino
            } else if ft.is_fifo() {
                fs.mknod(dino, name, 0o010000 | mode as u32, 0, root)
                    .unwrap()
                    .ino
            } else {
                continue;
            };
            let t = ufs::TimeSet::At(ufs::Time {
                sec: md.mtime(),
                nsec: md.mtime_nsec() as u32,
            });
            fs.setattr(
                ino,
                &ufs::SetAttr {
                    mtime: Some(t),
                    ..Default::default()
                },
                root,
            )
            .unwrap();
        }
    }
}

/// A host tree `dir/host` of the hostile corners (`hostile/`, a large
/// directory of `big` entries) and a slice of a real tree (`linux/`, a copy
/// of /usr/include/linux where the machine has it). Returns its path.
pub fn hostile_and_real_tree(dir: &Path, big: usize) -> PathBuf {
    let host = dir.join("host");
    hostile_tree(&host.join("hostile"), big, false);
    let inc = Path::new("/usr/include/linux");
    if inc.exists() {
        let st = Command::new("cp")
            .arg("-a")
            .arg(inc)
            .arg(host.join("linux"))
            .status()
            .unwrap();
        assert!(st.success());
    }
    host
}

/// The same changes made through the engine to `fs` and to the host tree
/// `host`, both holding `hostile/` (a [`hostile_tree`] of `big` entries in
/// `big/`) at their root: `hostile/data` renamed across directories to
/// `data-moved`, every third name of the large directory removed,
/// `data-moved` truncated to 70,001 bytes and appended to, and a sparse
/// file written past 4 GiB.
pub fn rename_remove_truncate(fs: &Fs, host: &Path, big: usize) {
    use ufs::{Cred, RenameMode, SetAttr};
    let root = fs.root();
    let hostile = fs.lookup(root, b"hostile").unwrap().ino;
    fs.rename(hostile, b"data", root, b"data-moved", RenameMode::Replace)
        .unwrap();
    std::fs::rename(host.join("hostile/data"), host.join("data-moved")).unwrap();
    let bigdir = fs.lookup(hostile, b"big").unwrap().ino;
    for i in (0..big).step_by(3) {
        let n = format!("f{i:06}");
        fs.unlink(bigdir, n.as_bytes()).unwrap();
        std::fs::remove_file(host.join("hostile/big").join(&n)).unwrap();
    }
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
    fs.write(dm, 70_001, b"appended bytes", Cred::ROOT).unwrap();
    let mut d = std::fs::read(host.join("data-moved")).unwrap();
    d.truncate(70_001);
    d.extend_from_slice(b"appended bytes");
    std::fs::write(host.join("data-moved"), &d).unwrap();
    let far = fs.mknod(root, b"far", 0o100644, 0, Cred::ROOT).unwrap().ino;
    fs.write(far, (4 << 30) + 100, b"beyond 4 GiB", Cred::ROOT)
        .unwrap();
    let hf = std::fs::File::create(host.join("far")).unwrap();
    use std::os::unix::fs::FileExt;
    hf.write_all_at(b"beyond 4 GiB", (4 << 30) + 100).unwrap();
}

/// Opens an image, waiting out a lock that another test's child process
/// holds for an instant: a process forked by a test running beside this
/// one (makefs, cp) shares our open files until it execs, and with them
/// their locks.
pub fn open_image(img: &Path, writable: bool) -> ufs::dev::FileDevice {
    let t0 = std::time::Instant::now();
    loop {
        match ufs::dev::FileDevice::open(img, writable) {
            Ok(d) => return d,
            Err(e)
                if e.kind == ufs::ErrorKind::Busy
                    && t0.elapsed() < std::time::Duration::from_secs(5) =>
            {
                std::thread::sleep(std::time::Duration::from_millis(20))
            }
            Err(e) => panic!("open {}: {e}", img.display()),
        }
    }
}

/// Runs ufskit's fsck in check mode and fails the test on any finding.
pub fn assert_fsck_clean(img: &Path) {
    let dev = open_image(img, false);
    let rep = ufs::fsck::fsck(&dev, ufs::fsck::FsckMode::Check).unwrap();
    let msgs: Vec<String> = rep
        .findings
        .iter()
        .map(|f| format!("{}: {}", f.pass, f.message))
        .collect();
    assert!(
        rep.findings.is_empty() && rep.exit_code() == 0,
        "fsck findings on {}:\n{}",
        img.display(),
        msgs.join("\n")
    );
}

/// Walks an image with the independent `rufs` reader (its `.snap` at the
/// root is left out, as host trees have none).
pub fn walk_rufs(img: &Path) -> BTreeMap<PathBuf, Node> {
    let mut u = rufs::Ufs::open(img, false).expect("rufs opens the image");
    let mut out = BTreeMap::new();
    let mut stack = vec![(PathBuf::new(), rufs::InodeNum::ROOT)];
    while let Some((rel, dino)) = stack.pop() {
        let mut ents = Vec::new();
        u.dir_iter(dino, |name, inr, kind| {
            ents.push((name.to_os_string(), inr, kind));
            None::<()>
        })
        .unwrap();
        for (name, inr, kind) in ents {
            if name == OsStr::new(".")
                || name == OsStr::new("..")
                || (rel.as_os_str().is_empty() && name == OsStr::new(".snap"))
            {
                continue;
            }
            let r = rel.join(&name);
            let a = u.inode_attr(inr).unwrap();
            let n = match kind {
                rufs::InodeType::Directory => {
                    stack.push((r.clone(), inr));
                    Node::Dir
                }
                rufs::InodeType::Symlink => Node::Symlink(u.symlink_read(inr).unwrap()),
                rufs::InodeType::RegularFile => {
                    if a.size > (64 << 20) {
                        let mut tail = vec![0u8; 1 << 20];
                        let n = u.inode_read(inr, a.size - (1 << 20), &mut tail).unwrap();
                        assert_eq!(n, tail.len());
                        Node::File {
                            size: a.size,
                            data_hash: hash(&tail),
                        }
                    } else {
                        let mut d = vec![0u8; a.size as usize];
                        let n = u.inode_read(inr, 0, &mut d).unwrap();
                        assert_eq!(n, d.len());
                        Node::File {
                            size: a.size,
                            data_hash: hash(&d),
                        }
                    }
                }
                rufs::InodeType::NamedPipe => Node::Other(ufs::FileKind::Fifo),
                rufs::InodeType::CharDevice => Node::Other(ufs::FileKind::CharDev),
                other => panic!("unexpected kind {other:?}"),
            };
            out.insert(r, n);
        }
    }
    out
}

/// Changes inode `ino` on an unmounted device, as damage or an old
/// writer would leave it: `f` edits the on-disk inode, whose check-hash is
/// then made right again when the file system keeps them (so what the
/// engine meets is a well-formed inode holding the planted values).
pub fn patch_inode(
    dev: &dyn ufs::dev::BlockDevice,
    ino: ufs::Ino,
    f: impl FnOnce(&mut ufs_format::dinode::Dinode),
) {
    let (sb, g, _) = ufs::fs::read_superblock(dev).expect("superblock");
    let ds = g.dinode_size();
    let n = ino.get();
    let off = g.ino_to_fsba(n) * g.fsize + g.ino_to_fsbo(n) * ds as u64;
    let mut b = vec![0u8; ds];
    dev.read_at(off, &mut b).expect("read inode");
    let mut di = ufs_format::dinode::Dinode::decode(g.v, &b);
    f(&mut di);
    let out = di.encode(g.v, sb.ckhash_enabled(ufs_format::CK_INODE));
    dev.write_at(off, &out).expect("write inode");
}

/// Changes cylinder group `cgx` on an unmounted device (check-hash made
/// right again when the file system keeps them).
pub fn patch_cg(
    dev: &dyn ufs::dev::BlockDevice,
    cgx: u64,
    f: impl FnOnce(&mut ufs_format::cg::Cg),
) {
    let (sb, g, _) = ufs::fs::read_superblock(dev).expect("superblock");
    let addr = g.cgtod(cgx) * g.fsize;
    let len = g.fragroundup(g.cgsize) as usize;
    let mut b = vec![0u8; len];
    dev.read_at(addr, &mut b).expect("read cg");
    let mut cg = ufs_format::cg::Cg::parse(&b, &g, cgx).expect("cg");
    f(&mut cg);
    cg.update_ckhash(sb.ckhash_enabled(ufs_format::CK_CYLGRP));
    dev.write_at(addr, cg.as_bytes()).expect("write cg");
}

/// The environment variable that marks a test run inside its own mount
/// namespace (see [`rerun_in_private_mount_namespace`]).
const PRIVATE_NS_MARK: &str = "UFSKIT_TEST_IN_PRIVATE_NS";

/// For tests that must put programs where other programs look for them
/// (mount(8)'s, mkfs(8)'s and fsck(8)'s helpers in /sbin, `ufskit` in
/// /usr/local/bin): runs the test `test` of this test binary again, alone,
/// inside a private mount namespace (`unshare --mount`), where
/// [`Shadow`] can lay the build under test over those directories without
/// the machine seeing it, whatever is installed there. Returns true in the
/// outer call, after the inner run passed (it fails the test otherwise);
/// false inside, where the test goes on.
pub fn rerun_in_private_mount_namespace(test: &str) -> bool {
    if std::env::var_os(PRIVATE_NS_MARK).is_some() {
        return false;
    }
    let exe = std::env::current_exe().unwrap();
    let out = Command::new("unshare")
        .args(["--mount", "--propagation", "private"])
        .arg(&exe)
        .args(["--exact", test, "--nocapture", "--test-threads", "1"])
        .env(PRIVATE_NS_MARK, "1")
        .output()
        .unwrap_or_else(|e| panic!("unshare (util-linux): {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "{test} in its own mount namespace failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    true
}

/// A directory seen through an overlay inside the test's private mount
/// namespace: names can be added (links to the build under test) or
/// hidden, and nothing changes outside the namespace. Only inside
/// [`rerun_in_private_mount_namespace`]; keep the value for as long as the
/// names are needed (its upper layer goes with it).
pub struct Shadow {
    dir: PathBuf,
    _upper: tempfile::TempDir,
}

impl Shadow {
    pub fn over(dir: &Path) -> Shadow {
        assert!(
            std::env::var_os(PRIVATE_NS_MARK).is_some(),
            "Shadow outside a private mount namespace would change the machine"
        );
        let dir = dir.canonicalize().unwrap();
        let upper = tempfile::tempdir().unwrap();
        let run = |c: &mut Command| {
            let o = c.output().unwrap();
            assert!(
                o.status.success(),
                "{c:?}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        };
        // The upper layer on a tmpfs of its own (an overlay's upper layer
        // cannot be on another overlay, which the root often is).
        run(Command::new("mount")
            .args(["-t", "tmpfs", "tmpfs"])
            .arg(upper.path()));
        std::fs::create_dir(upper.path().join("u")).unwrap();
        std::fs::create_dir(upper.path().join("w")).unwrap();
        let opts = format!(
            "lowerdir={},upperdir={},workdir={}",
            dir.display(),
            upper.path().join("u").display(),
            upper.path().join("w").display()
        );
        run(Command::new("mount")
            .args(["-t", "overlay", "overlay", "-o", &opts])
            .arg(&dir));
        Shadow { dir, _upper: upper }
    }

    /// `name` in the directory becomes a link to `target`.
    pub fn link(&self, name: &str, target: &Path) -> &Self {
        self.hide(name);
        std::os::unix::fs::symlink(target, self.dir.join(name)).unwrap();
        self
    }

    /// `name` is no longer seen in the directory.
    pub fn hide(&self, name: &str) -> &Self {
        let _ = std::fs::remove_file(self.dir.join(name));
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A missing prerequisite fails the test unless skips are allowed.
    #[test]
    #[should_panic(expected = "needs a thing nobody has")]
    fn a_missing_prerequisite_fails() {
        if std::env::var_os("UFSKIT_ALLOW_SKIPS").is_some() {
            // The developer's mode: skipped and counted instead.
            assert!(!prerequisite(false, "a_missing_prerequisite_fails", "x"));
            let ledger = std::fs::read_to_string(skip_ledger()).unwrap_or_default();
            assert!(ledger.contains("a_missing_prerequisite_fails: needs x"));
            panic!("needs a thing nobody has (skipped and counted)");
        }
        prerequisite(false, "a_missing_prerequisite_fails", "a thing nobody has");
    }

    #[test]
    fn a_present_prerequisite_runs() {
        assert!(prerequisite(true, "a_present_prerequisite_runs", "nothing"));
    }
}
