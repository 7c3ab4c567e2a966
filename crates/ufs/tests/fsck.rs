//! fsck against images made by makefs(8) (`makefs -t ffs -o version=2`),
//! clean and deliberately damaged. Tests that need makefs are skipped with
//! a message when /usr/sbin/makefs is missing.
use std::path::{Path, PathBuf};
use std::process::Command;
use ufs::dev::{BlockDevice, MemDevice};
use ufs::fsck::{fsck, FsckMode, FsckReport, Severity};
use ufs::ErrorKind;
use ufs_format::Endian;

// The images these tests damage are little-endian UFS2: fields at the
// offsets FreeBSD's headers give, read and written in that order.
const L: Endian = Endian::Little;
fn get_u16(b: &[u8], o: usize) -> u16 {
    L.get_u16(b, o)
}
fn get_u32(b: &[u8], o: usize) -> u32 {
    L.get_u32(b, o)
}
fn set_u16(b: &mut [u8], o: usize, v: u16) {
    L.set_u16(b, o, v)
}
fn set_u32(b: &mut [u8], o: usize, v: u32) {
    L.set_u32(b, o, v)
}
use ufs_format::dinode::Dinode;
use ufs_format::sb::{Geometry, Superblock};
use ufs_format::*;

const MAKEFS: &str = "/usr/sbin/makefs";

fn needs_makefs(test: &str) -> bool {
    testkit::prerequisite(
        Path::new(MAKEFS).exists(),
        test,
        "makefs (apt-get install makefs)",
    )
}

/// Runs makefs on `tree` and returns the image.
fn makefs(tree: &Path, opts: &str, extra: &[&str]) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("img");
    let o = if opts.is_empty() {
        "version=2".to_string()
    } else {
        format!("version=2,{opts}")
    };
    let out = Command::new(MAKEFS)
        .args(["-t", "ffs", "-o", &o])
        .args(extra)
        .arg(&img)
        .arg(tree)
        .output()
        .expect("run makefs");
    assert!(
        out.status.success(),
        "makefs failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read(&img).unwrap()
}

/// A tree with every kind of file: hard links, short and long symlinks, a
/// sparse file, a file with indirect blocks, a FIFO, an empty file, nested
/// directories and a directory of 3000 entries.
fn rich_tree() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    std::fs::create_dir_all(r.join("a/b/c")).unwrap();
    std::fs::create_dir_all(r.join("d/e")).unwrap();
    std::fs::write(r.join("a/f"), "hi\n").unwrap();
    std::fs::write(r.join("a/g"), "yo\n").unwrap();
    std::fs::write(r.join("a/b/h"), "deep\n").unwrap();
    std::fs::hard_link(r.join("a/f"), r.join("a/hard")).unwrap();
    std::fs::hard_link(r.join("a/f"), r.join("d/hard2")).unwrap();
    std::os::unix::fs::symlink("f", r.join("a/short")).unwrap();
    std::os::unix::fs::symlink("x".repeat(200), r.join("a/long")).unwrap();
    std::fs::write(r.join("empty"), "").unwrap();
    let big: Vec<u8> = (0..300 * 1024u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    std::fs::write(r.join("big"), &big).unwrap();
    let f = std::fs::File::create(r.join("sparse")).unwrap();
    f.set_len(5 << 20).unwrap();
    drop(f);
    let mut s = std::fs::OpenOptions::new()
        .append(true)
        .open(r.join("sparse"))
        .unwrap();
    std::io::Write::write_all(&mut s, b"tail").unwrap();
    let _ = Command::new("mkfifo").arg(r.join("fifo")).status();
    // Device nodes need privileges; tests using one skip it when absent.
    let _ = Command::new("mknod")
        .arg(r.join("chr"))
        .args(["c", "1", "3"])
        .output();
    std::fs::create_dir(r.join("many")).unwrap();
    for i in 0..3000 {
        std::fs::write(r.join(format!("many/entry_with_a_longish_name_{i}")), "").unwrap();
    }
    t
}

fn include_tree() -> PathBuf {
    for p in [
        "/usr/include/linux",
        "/usr/include/x86_64-linux-gnu",
        "/usr/include",
    ] {
        if Path::new(p).is_dir() {
            return PathBuf::from(p);
        }
    }
    panic!("no /usr/include");
}

/// Read-write view of an image for planting damage.
struct Img {
    data: Vec<u8>,
    g: Geometry,
    sbloc: u64,
}

impl Img {
    fn new(data: Vec<u8>) -> Img {
        for loc in [65536u64, 8192] {
            if let Ok(sb) = Superblock::from_bytes(&data[loc as usize..]) {
                if let Ok(g) = sb.validate(loc) {
                    return Img {
                        data,
                        g,
                        sbloc: loc,
                    };
                }
            }
        }
        panic!("no superblock");
    }
    fn sb(&self) -> Superblock {
        Superblock::from_bytes(&self.data[self.sbloc as usize..]).unwrap()
    }
    fn set_sb(&mut self, sb: &Superblock) {
        let o = self.sbloc as usize;
        let b = sb.as_bytes();
        self.data[o..o + b.len()].copy_from_slice(b);
    }
    fn ino_off(&self, ino: u64) -> usize {
        (self.g.ino_to_fsba(ino) * self.g.fsize + self.g.ino_to_fsbo(ino) * 256) as usize
    }
    fn inode(&self, ino: u64) -> Dinode {
        let o = self.ino_off(ino);
        Dinode::from_bytes(&self.data[o..o + 256])
    }
    fn set_inode(&mut self, ino: u64, di: &Dinode) {
        let o = self.ino_off(ino);
        self.data[o..o + 256].copy_from_slice(di.as_bytes());
    }
    /// Stores an inode with its check-hash computed.
    fn set_inode_hashed(&mut self, ino: u64, di: &Dinode) {
        let o = self.ino_off(ino);
        di.encode_into(
            ufs_format::Variant::UFS2_LE,
            &mut self.data[o..o + 256],
            true,
        );
    }
    fn frag_off(&self, f: u64) -> usize {
        (f * self.g.fsize) as usize
    }
    /// (byte offset of the entry in the image, ino, name) of every entry
    /// of a small directory (direct blocks only).
    fn entries(&self, dir: u64) -> Vec<(usize, u32, Vec<u8>)> {
        let di = self.inode(dir);
        let mut out = Vec::new();
        let size = di.di_size();
        let mut off = 0u64;
        while off < size {
            let lbn = self.g.lblkno(off) as usize;
            let blk = di.di_db(lbn);
            let base = self.frag_off(blk) + self.g.blkoff(off) as usize;
            let chunk = &self.data[base..base + DIRBLKSIZ];
            for e in dir::parse_chunk(L, chunk, &|| "t".into()).unwrap() {
                out.push((base + e.off, e.ino, e.name.clone()));
            }
            off += DIRBLKSIZ as u64;
        }
        out
    }
    fn lookup(&self, path: &str) -> u64 {
        let mut ino = UFS_ROOTINO;
        for comp in path.split('/').filter(|s| !s.is_empty()) {
            ino = self
                .entries(ino)
                .iter()
                .find(|e| e.2 == comp.as_bytes())
                .unwrap_or_else(|| panic!("{path}: no {comp}"))
                .1 as u64;
        }
        ino
    }
    /// An unused inode inside the initialised part of its group.
    fn free_inited_inode(&self) -> u64 {
        for c in 0..self.g.ncg {
            let inited = get_u32(&self.data, self.cg_off(c) + 120) as u64;
            for i in 0..inited {
                let ino = c * self.g.ipg + i;
                if ino > 2 && self.inode(ino).di_mode() == 0 {
                    return ino;
                }
            }
        }
        panic!("no free initialised inode");
    }
    /// Byte offset in the image of cylinder group `c`.
    fn cg_off(&self, c: u64) -> usize {
        self.frag_off(self.g.cgtod(c))
    }
}

fn run(data: &[u8], mode: FsckMode) -> (FsckReport, Vec<u8>) {
    let dev = MemDevice::from_vec(data.to_vec());
    let r = fsck(&dev, mode).unwrap_or_else(|e| panic!("fsck {mode:?} failed: {e}"));
    (r, dev.snapshot())
}

fn show(r: &FsckReport) -> String {
    r.findings
        .iter()
        .map(|f| {
            format!(
                "  [{}{}{}] {}\n",
                f.pass,
                if f.severity == Severity::Preen {
                    " preen"
                } else {
                    ""
                },
                if f.fixed { " fixed" } else { "" },
                f.message
            )
        })
        .collect()
}

fn assert_clean(data: &[u8], what: &str) {
    let (r, after) = run(data, FsckMode::Check);
    assert!(
        r.findings.is_empty() && r.clean && r.exit_code() == 0,
        "{what}: expected clean, got:\n{}",
        show(&r)
    );
    assert!(after == data, "{what}: check mode wrote to the image");
}

/// Damage is found by a check, repaired by -y, and a second check is clean.
fn detect_and_repair(data: &[u8], expect: &str, what: &str) -> FsckReport {
    let (r, after) = run(data, FsckMode::Check);
    assert_eq!(r.exit_code(), 8, "{what}: check should fail:\n{}", show(&r));
    assert!(!r.clean);
    assert!(
        r.findings.iter().any(|f| f.message.contains(expect)),
        "{what}: no finding containing {expect:?}:\n{}",
        show(&r)
    );
    assert!(after == data, "{what}: check mode wrote to the image");
    let (y, fixed) = run(data, FsckMode::Yes);
    assert_eq!(y.exit_code(), 0, "{what}: -y left problems:\n{}", show(&y));
    assert!(
        y.clean && y.modified,
        "{what}: -y not clean/modified:\n{}",
        show(&y)
    );
    assert!(y.findings.iter().all(|f| f.fixed));
    let (again, _) = run(&fixed, FsckMode::Check);
    assert!(
        again.findings.is_empty() && again.exit_code() == 0,
        "{what}: second check not clean:\n{}\nafter -y:\n{}",
        show(&again),
        show(&y)
    );
    y
}

fn preen_fixes(data: &[u8], what: &str) {
    let (p, fixed) = run(data, FsckMode::Preen);
    assert_eq!(p.exit_code(), 0, "{what}: preen should fix:\n{}", show(&p));
    assert!(p.clean);
    assert!(p
        .findings
        .iter()
        .all(|f| f.severity == Severity::Preen && f.fixed));
    let (again, _) = run(&fixed, FsckMode::Check);
    assert!(
        again.findings.is_empty(),
        "{what}: check after preen:\n{}",
        show(&again)
    );
}

fn preen_refuses(data: &[u8], what: &str) {
    let (p, after) = run(data, FsckMode::Preen);
    assert_eq!(
        p.exit_code(),
        8,
        "{what}: preen should refuse:\n{}",
        show(&p)
    );
    assert!(!p.clean);
    assert!(p
        .findings
        .iter()
        .any(|f| f.severity == Severity::Inconsistency && !f.fixed));
    // A full -y run still repairs what preen left.
    let (y, fixed) = run(&after, FsckMode::Yes);
    assert_eq!(y.exit_code(), 0, "{what}: -y after preen:\n{}", show(&y));
    let (again, _) = run(&fixed, FsckMode::Check);
    assert!(
        again.findings.is_empty(),
        "{what}: check after preen+yes:\n{}",
        show(&again)
    );
}

fn rich_image() -> Option<Vec<u8>> {
    if !needs_makefs("rich_image") {
        return None;
    }
    let t = rich_tree();
    Some(makefs(t.path(), "", &[]))
}

#[test]
fn clean_images_are_clean() {
    if !needs_makefs("clean_images_are_clean") {
        return;
    }
    let t = rich_tree();
    let sized: &[&str] = &["-s", "48m"];
    for (opts, extra) in [
        ("", &[][..]),
        ("bsize=4096,fsize=512", &[]),
        ("bsize=32768,fsize=4096,density=4096", sized),
        ("bsize=16384,fsize=16384,density=4096", sized),
        ("bsize=65536,fsize=8192,density=4096", sized),
    ] {
        let img = makefs(t.path(), opts, extra);
        assert_clean(&img, &format!("rich tree {opts}"));
        let (r, _) = run(&img, FsckMode::Check);
        assert!(
            r.files > 3000 && r.dirs >= 7,
            "{opts}: counts {} {}",
            r.files,
            r.dirs
        );
        // -y only starts tracking directory depths; afterwards all is clean.
        let (y, fixed) = run(&img, FsckMode::Yes);
        assert!(
            y.clean && y.exit_code() == 0,
            "{opts}: -y on clean image:\n{}",
            show(&y)
        );
        assert!(
            y.findings
                .iter()
                .all(|f| f.message.contains("TRACK DIRECTORY DEPTH")),
            "{opts}:\n{}",
            show(&y)
        );
        assert_clean(&fixed, &format!("rich tree {opts} after -y"));
    }
    let inc = makefs(&include_tree(), "", &[]);
    assert_clean(&inc, "include tree");
    // Several cylinder groups.
    let multi = makefs(
        t.path(),
        "bsize=4096,fsize=512,density=2048",
        &["-s", "64m"],
    );
    assert!(Img::new(multi.clone()).g.ncg > 1);
    assert_clean(&multi, "multi-cg image");
}

#[test]
fn include_tree_is_fast() {
    if !needs_makefs("include_tree_is_fast") {
        return;
    }
    let img = makefs(Path::new("/usr/include"), "", &[]);
    let dev = MemDevice::from_vec(img);
    let t = std::time::Instant::now();
    let r = fsck(&dev, FsckMode::Check).unwrap();
    let el = t.elapsed();
    eprintln!("fsck of /usr/include image: {el:?}, {} files", r.files);
    assert!(r.clean, "{}", show(&r));
    assert!(el.as_secs_f64() < 2.0, "too slow: {el:?}");
}

#[test]
fn bitmap_bit_flip() {
    let Some(data) = rich_image() else { return };
    let mut img = Img::new(data);
    // Mark the root directory's block free in cg 0's fragment map.
    let root_blk = img.inode(UFS_ROOTINO).di_db(0);
    let cg = img.cg_off(0);
    let freeoff = get_u32(&img.data, cg + 96) as usize;
    let rel = img.g.dtogd(root_blk) as usize;
    img.data[cg + freeoff + rel / 8] ^= 1 << (rel % 8);
    let y = detect_and_repair(
        &img.data,
        "BLK(S) MISSING IN BIT MAPS",
        "bitmap flip (used marked free)",
    );
    assert!(y.findings.iter().all(|f| f.severity == Severity::Preen));
    preen_fixes(&img.data, "bitmap flip");
    // A free fragment marked used.
    let mut img2 = Img::new(rich_image().unwrap());
    let cg = img2.cg_off(0);
    let ndblk = get_u32(&img2.data, cg + 20) as usize;
    let rel = (0..ndblk)
        .rev()
        .find(|&r| img2.data[cg + freeoff + r / 8] & (1 << (r % 8)) != 0)
        .unwrap();
    img2.data[cg + freeoff + rel / 8] ^= 1 << (rel % 8);
    detect_and_repair(
        &img2.data,
        "BLK(S) MISSING IN BIT MAPS",
        "bitmap flip (free marked used)",
    );
    preen_fixes(&img2.data, "bitmap flip 2");
}

#[test]
fn wrong_link_count() {
    let Some(data) = rich_image() else { return };
    let mut img = Img::new(data.clone());
    let g = img.lookup("a/g");
    let mut di = img.inode(g);
    di.set_nlink(3);
    img.set_inode(g, &di);
    detect_and_repair(&img.data, "LINK COUNT FILE", "nlink too high");
    preen_fixes(&img.data, "nlink too high");
    // Too low: preen must not raise a link count.
    let mut img = Img::new(data);
    let f = img.lookup("a/f");
    let mut di = img.inode(f);
    assert_eq!(di.nlink(), 3);
    di.set_nlink(1);
    img.set_inode(f, &di);
    detect_and_repair(&img.data, "SHOULD BE 3", "nlink too low");
    preen_refuses(&img.data, "nlink too low");
}

#[test]
fn bad_reclen() {
    let Some(data) = rich_image() else { return };
    for bad in [0u16, 3, 600, 508] {
        let mut img = Img::new(data.clone());
        let a = img.lookup("a");
        let e = img.entries(a);
        // The entry after "..": its reclen made impossible.
        let (off, _, _) = e[2];
        set_u16(&mut img.data, off + 4, bad);
        let y = detect_and_repair(&img.data, "CORRUPTED", &format!("d_reclen {bad}"));
        // The names lost with the salvaged chunk come back in lost+found.
        assert!(
            y.findings.iter().any(|f| f.message.contains("UNREF")),
            "{}",
            show(&y)
        );
        preen_refuses(&img.data, "bad reclen");
    }
}

#[test]
fn wrong_cg_counter() {
    let Some(data) = rich_image() else { return };
    let mut img = Img::new(data);
    let cg = img.cg_off(0);
    let nb = get_u32(&img.data, cg + 28);
    set_u32(&mut img.data, cg + 28, nb + 7);
    detect_and_repair(&img.data, "SUMMARY INFORMATION BAD", "cg_cs.cs_nbfree");
    preen_fixes(&img.data, "cg counter");
    // The superblock totals and the summary area.
    let mut img = Img::new(img.data.clone());
    let co = img.cg_off(0);
    set_u32(&mut img.data, co + 28, nb);
    let mut sb = img.sb();
    let mut t = sb.fs_cstotal();
    t.cs_nifree += 5;
    sb.set_fs_cstotal(t);
    img.set_sb(&sb);
    let cs = img.frag_off(img.g.csaddr);
    let v = get_u32(&img.data, cs + 4);
    set_u32(&mut img.data, cs + 4, v + 1);
    let y = detect_and_repair(
        &img.data,
        "SUMMARY BLK COUNT(S) WRONG IN SUPERBLK",
        "fs_cstotal",
    );
    assert!(y
        .findings
        .iter()
        .any(|f| f.message.contains("FREE BLK COUNT(S) WRONG IN SUPERBLK")));
    preen_fixes(&img.data, "totals");
}

#[test]
fn duplicate_block() {
    let Some(data) = rich_image() else { return };
    let mut img = Img::new(data);
    let f = img.lookup("a/f");
    let g = img.lookup("a/g");
    let mut dg = img.inode(g);
    dg.set_di_db(0, img.inode(f).di_db(0));
    img.set_inode(g, &dg);
    let y = detect_and_repair(&img.data, "DUP", "duplicate block");
    assert!(
        y.findings.iter().any(|f| f.pass == "pass1b"),
        "{}",
        show(&y)
    );
    preen_refuses(&img.data, "dup");
}

#[test]
fn out_of_range_pointer() {
    let Some(data) = rich_image() else { return };
    let mut img = Img::new(data.clone());
    let g = img.lookup("a/g");
    let mut di = img.inode(g);
    di.set_di_db(0, img.g.size + 100);
    img.set_inode(g, &di);
    detect_and_repair(&img.data, "BAD I=", "out-of-range pointer");
    preen_refuses(&img.data, "out of range");
    // An indirect pointer into the inode table.
    let mut img = Img::new(data);
    let b = img.lookup("big");
    let mut di = img.inode(b);
    di.set_di_ib(0, img.g.cgimin(0));
    img.set_inode(b, &di);
    detect_and_repair(&img.data, "BAD I=", "indirect pointer into metadata");
}

#[test]
fn unreferenced_inode() {
    let Some(data) = rich_image() else { return };
    let mut img = Img::new(data);
    // Drop the name of a/g by merging its record into the one before.
    let a = img.lookup("a");
    let e = img.entries(a);
    let i = e.iter().position(|x| x.2 == b"g").unwrap();
    assert!(i > 2 && e[i - 1].0 / 512 == e[i].0 / 512);
    let prev = e[i - 1].0;
    let r = get_u16(&img.data, prev + 4) + get_u16(&img.data, e[i].0 + 4);
    set_u16(&mut img.data, prev + 4, r);
    let y = detect_and_repair(&img.data, "UNREF FILE", "unreferenced inode");
    assert!(
        y.findings.iter().any(|f| f.message.contains("lost+found")),
        "{}",
        show(&y)
    );
    preen_fixes(&img.data, "unref file");
    // The file is now in lost+found.
    let (_, fixed) = run(&img.data, FsckMode::Yes);
    let fixed = Img::new(fixed);
    let lf = fixed.lookup("lost+found");
    assert!(fixed
        .entries(lf)
        .iter()
        .any(|x| x.1 as u64 == e[i].1 as u64));
}

#[test]
fn orphan_directory() {
    let Some(data) = rich_image() else { return };
    let mut img = Img::new(data);
    let a = img.lookup("a");
    let b = img.lookup("a/b");
    let e = img.entries(a);
    let (off, _, _) = e.iter().find(|x| x.2 == b"b").unwrap().clone();
    set_u32(&mut img.data, off, 0);
    let y = detect_and_repair(&img.data, "UNREF DIR", "orphan directory");
    assert!(
        y.findings
            .iter()
            .any(|f| f.message.contains("LINK COUNT DIR")),
        "{}",
        show(&y)
    );
    preen_fixes(&img.data, "orphan dir");
    let (_, fixed) = run(&img.data, FsckMode::Yes);
    let fixed = Img::new(fixed);
    let lf = fixed.lookup("lost+found");
    assert!(fixed.entries(lf).iter().any(|x| x.1 as u64 == b));
    // Its '..' now names lost+found.
    assert!(fixed
        .entries(b)
        .iter()
        .any(|x| x.2 == b".." && x.1 as u64 == lf));
}

#[test]
fn orphaned_directory_loop() {
    let Some(data) = rich_image() else { return };
    let mut img = Img::new(data);
    // Unlink "a" from the root and give it a name inside its own
    // grandchild a/b/c: a -> b -> c -> a, unreachable.
    let a = img.lookup("a");
    let c = img.lookup("a/b/c");
    let root_a = img
        .entries(UFS_ROOTINO)
        .iter()
        .find(|e| e.2 == b"a")
        .unwrap()
        .0;
    set_u32(&mut img.data, root_a, 0);
    let dd = img.entries(c)[1].0;
    let r = get_u16(&img.data, dd + 4);
    assert!(r >= 24);
    set_u16(&mut img.data, dd + 4, 12);
    dir::write_entry(
        L,
        &mut img.data[dd + 12..dd + r as usize],
        0,
        a as u32,
        r - 12,
        4,
        b"a",
    );
    let y = detect_and_repair(&img.data, "ORPHANED DIRECTORY LOOP", "directory loop");
    assert!(
        y.findings.iter().any(|f| f.message.contains("lost+found")),
        "{}",
        show(&y)
    );
}

#[test]
fn cylinder_groups_rebuilt() {
    let Some(data) = rich_image() else { return };
    // Bad magic in a group header: the group is rebuilt from scratch.
    let mut img = Img::new(data.clone());
    let co = img.cg_off(0);
    set_u32(&mut img.data, co + 4, 0x1234);
    detect_and_repair(&img.data, "INTEGRITY CHECK FAILED", "cg magic");
    preen_refuses(&img.data, "cg magic");
    // Clustering switched off: every group's layout changes
    // (no cluster summary or map), which a -y run rebuilds.
    let mut img = Img::new(data);
    let mut sb = img.sb();
    sb.set_fs_maxcontig(1);
    sb.set_fs_contigsumsize(0);
    img.set_sb(&sb);
    detect_and_repair(&img.data, "INTEGRITY CHECK FAILED", "no clusters");
}

#[test]
fn snapshot_list() {
    let Some(data) = rich_image() else { return };
    // A listed inode that is not a snapshot is dropped from the list.
    let mut img = Img::new(data.clone());
    let g = img.lookup("a/g");
    let o = img.sbloc as usize + 1116;
    set_u32(&mut img.data, o, g as u32);
    detect_and_repair(&img.data, "NON-SNAPSHOT", "snapshot list");
    preen_fixes(&img.data, "snapshot list");
    // A real snapshot is checked as a file (its special block values are
    // tested in freebsd_features.rs): nothing to find, nothing written.
    let mut di = img.inode(g);
    di.set_di_flags(di.di_flags() | 0x0020_0000);
    img.set_inode(g, &di);
    // Repairs are not made beside a snapshot (they would have to copy
    // blocks into it first): every mode only checks and writes nothing.
    for mode in [FsckMode::Check, FsckMode::Preen, FsckMode::Yes] {
        let (r, after) = run(&img.data, mode);
        assert_eq!(r.exit_code(), 0, "{}", show(&r));
        assert!(r.findings.iter().all(|f| f.ino != Some(g)), "{}", show(&r));
        assert!(after == img.data, "{mode:?} wrote beside a snapshot");
    }
    // A real problem beside it is reported, not repaired, and says why.
    let f = img.lookup("a/f");
    let mut di = img.inode(f);
    di.set_nlink(di.nlink() + 3);
    img.set_inode(f, &di);
    let (r, after) = run(&img.data, FsckMode::Yes);
    assert_eq!(r.exit_code(), 8, "{}", show(&r));
    assert!(
        r.findings
            .iter()
            .any(|x| x.message.contains("CHECKED ONLY")),
        "{}",
        show(&r)
    );
    assert!(
        r.findings
            .iter()
            .all(|x| !x.fixed || x.message.contains("DIRECTORY DEPTH")),
        "{}",
        show(&r)
    );
    assert!(after == img.data, "nothing written");
}

#[test]
fn interrupted_newfs_is_refused() {
    let Some(data) = rich_image() else { return };
    let mut img = Img::new(data);
    let o = img.sbloc as usize + 1372;
    img.data[o..o + 4].copy_from_slice(&FS_BAD_MAGIC.to_le_bytes());
    let e = fsck(&MemDevice::from_vec(img.data), FsckMode::Yes).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Corrupt);
    assert!(e.msg.contains("newfs"), "{e}");
}

#[test]
fn bad_superblock_magic() {
    let Some(data) = rich_image() else { return };
    let mut img = Img::new(data.clone());
    let o = img.sbloc as usize + 1372;
    img.data[o..o + 4].copy_from_slice(&0xdeadbeefu32.to_le_bytes());
    detect_and_repair(&img.data, "USING ALTERNATE", "bad primary magic");
    let (p, after) = run(&img.data, FsckMode::Preen);
    assert_eq!(p.exit_code(), 8);
    assert!(
        after == img.data,
        "preen must not install an alternate superblock"
    );
    // No usable superblock anywhere: a Corrupt error, never a panic.
    let mut z = data.clone();
    for b in z.iter_mut().take(1 << 20) {
        *b = 0;
    }
    let e = fsck(&MemDevice::from_vec(z), FsckMode::Check).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Corrupt, "{e}");
    let e = fsck(&MemDevice::from_vec(vec![0u8; 4096]), FsckMode::Check).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Corrupt);
}

#[test]
fn superblock_differs_from_backup() {
    let Some(data) = rich_image() else { return };
    let mut img = Img::new(data);
    let alt = img.frag_off(img.g.cgsblock(img.g.ncg - 1));
    let v = get_u32(&img.data, alt + 184);
    set_u32(&mut img.data, alt + 184, v * 2);
    detect_and_repair(&img.data, "LAST ALTERNATE", "backup superblock");
}

#[test]
fn ufs1_and_big_endian_images_of_makefs_check_clean() {
    if !needs_makefs("ufs1_and_big_endian_images_of_makefs_check_clean") {
        return;
    }
    let t = rich_tree();
    let dir = tempfile::tempdir().unwrap();
    for (name, args) in [
        ("u1", vec!["-t", "ffs", "-o", "version=1"]),
        ("be", vec!["-B", "be", "-t", "ffs", "-o", "version=2"]),
        ("u1be", vec!["-B", "be", "-t", "ffs", "-o", "version=1"]),
    ] {
        let img = dir.path().join(name);
        let ok = Command::new(MAKEFS)
            .args(&args)
            .arg(&img)
            .arg(t.path())
            .output()
            .unwrap();
        assert!(ok.status.success());
        let rep = fsck(
            &MemDevice::from_vec(std::fs::read(&img).unwrap()),
            FsckMode::Check,
        )
        .unwrap();
        assert!(rep.findings.is_empty(), "{name}: {:?}", rep.findings);
        assert!(rep.files > 3, "{name}: {} files", rep.files);
    }
}

#[test]
fn inode_shape_problems() {
    let Some(data) = rich_image() else { return };
    // A file whose size runs past its last block (preen class past 12
    // blocks).
    let mut img = Img::new(data.clone());
    let big = img.lookup("big");
    let mut di = img.inode(big);
    di.set_di_size(2 * di.di_size());
    img.set_inode(big, &di);
    detect_and_repair(&img.data, "BEYOND END OF ALLOCATED FILE", "size past end");
    preen_fixes(&img.data, "size past end");
    let g = img.lookup("a/g");
    // di_blocks wrong: preen class.
    let mut img = Img::new(data.clone());
    let mut di = img.inode(g);
    di.set_di_blocks(di.di_blocks() + 8);
    img.set_inode(g, &di);
    detect_and_repair(&img.data, "INCORRECT BLOCK COUNT", "di_blocks");
    preen_fixes(&img.data, "di_blocks");
    // Garbage after a short symlink's target.
    let mut img = Img::new(data.clone());
    let s = img.lookup("a/short");
    let mut di = img.inode(s);
    di.set_di_db(5, 0x4141);
    img.set_inode(s, &di);
    detect_and_repair(&img.data, "INVALID DIRECT BLOCK", "short symlink");
    // A device-like size on a FIFO, an unknown type.
    let mut img = Img::new(data.clone());
    let f = img.lookup("fifo");
    let mut di = img.inode(f);
    di.set_di_size(10);
    img.set_inode(f, &di);
    detect_and_repair(&img.data, "BAD SPECIAL-FILE SIZE", "fifo size");
    let mut img = Img::new(data.clone());
    let mut di = img.inode(g);
    di.set_di_mode(0o170644);
    img.set_inode(g, &di);
    detect_and_repair(&img.data, "UNKNOWN FILE TYPE", "bad type");
    // An unallocated inode that is not empty.
    let mut img = Img::new(data.clone());
    let free = img.free_inited_inode();
    let mut di = img.inode(free);
    di.set_di_size(1234);
    img.set_inode(free, &di);
    detect_and_repair(
        &img.data,
        "PARTIALLY ALLOCATED INODE",
        "partially allocated",
    );
    // A directory whose size is not a multiple of 512 (preen class).
    let mut img = Img::new(data.clone());
    let d = img.lookup("d/e");
    let mut di = img.inode(d);
    di.set_di_size(500);
    img.set_inode(d, &di);
    detect_and_repair(&img.data, "NOT MULTIPLE OF 512", "dir size");
    // Wrong d_type.
    let mut img = Img::new(data.clone());
    let a = img.lookup("a");
    let off = img.entries(a).iter().find(|x| x.2 == b"short").unwrap().0;
    img.data[off + 6] = 8;
    detect_and_repair(&img.data, "BAD TYPE VALUE", "d_type");
    // An entry naming an unallocated inode.
    let mut img = Img::new(data.clone());
    set_u32(&mut img.data, off, free as u32);
    detect_and_repair(&img.data, "UNALLOCATED", "entry to unallocated inode");
    // An entry naming an out-of-range inode.
    let mut img = Img::new(data.clone());
    set_u32(&mut img.data, off, (img.g.ncg * img.g.ipg + 5) as u32);
    detect_and_repair(&img.data, "I OUT OF RANGE", "entry out of range");
    // A second name for a directory.
    let mut img = Img::new(data.clone());
    let c = img.lookup("a/b/c");
    set_u32(&mut img.data, off, c as u32);
    img.data[off + 6] = 4;
    detect_and_repair(&img.data, "EXTRANEOUS HARD LINK", "directory hard link");
    // A wrong '..'.
    let mut img = Img::new(data.clone());
    let e = img.lookup("d/e");
    let dd = img.entries(e)[1].0;
    set_u32(&mut img.data, dd, a as u32);
    detect_and_repair(&img.data, "BAD INODE NUMBER FOR '..'", "dotdot");
    // A wrong directory depth on a file system that tracks depths.
    let (_, tracked) = run(&data, FsckMode::Yes);
    let mut img = Img::new(tracked);
    let mut di = img.inode(c);
    assert_eq!(di.di_freelink(), 3);
    di.set_di_freelink(7);
    img.set_inode(c, &di);
    detect_and_repair(&img.data, "DEPTH 7 SHOULD BE 3", "depth");
    preen_fixes(&img.data, "depth");
    // A directory with a hole.
    let mut img = Img::new(data.clone());
    let m = img.lookup("many");
    let mut di = img.inode(m);
    assert!(di.di_size() > 3 * img.g.bsize);
    di.set_di_db(1, 0);
    img.set_inode(m, &di);
    detect_and_repair(&img.data, "CONTAINS EMPTY BLOCKS", "directory hole");
    // Missing '.'.
    let mut img = Img::new(data.clone());
    let dot = img.entries(e)[0].0;
    set_u32(&mut img.data, dot, 0);
    detect_and_repair(&img.data, "MISSING '.'", "missing dot");
    // Device nodes.
    let probe = Img::new(data.clone());
    if probe.entries(UFS_ROOTINO).iter().any(|e| e.2 == b"chr") {
        let mut img = Img::new(data.clone());
        let d = img.lookup("chr");
        let mut di = img.inode(d);
        assert_eq!(di.file_type(), ufs_format::dinode::IFCHR);
        di.set_di_db(0, u64::MAX);
        img.set_inode(d, &di);
        detect_and_repair(&img.data, "BAD SPECIAL-FILE RDEV", "rdev");
        let mut img = Img::new(data.clone());
        let mut di = img.inode(d);
        di.set_di_db(1, 77);
        img.set_inode(d, &di);
        detect_and_repair(&img.data, "INVALID DIRECT BLOCK", "device pointer");
        let mut img = Img::new(data.clone());
        let mut di = img.inode(d);
        di.set_di_blocks(2);
        img.set_inode(d, &di);
        detect_and_repair(&img.data, "INCORRECT BLOCK COUNT", "device blocks");
    } else {
        // makefs copies device nodes only when they could be made: root.
        let _ = testkit::prerequisite(
            false,
            "inode_shape_problems (device checks)",
            "root (mknod)",
        );
    }
    // Root is not a directory.
    let mut img = Img::new(data);
    let mut di = img.inode(UFS_ROOTINO);
    di.set_di_mode(0o100644);
    img.set_inode(UFS_ROOTINO, &di);
    detect_and_repair(&img.data, "ROOT INODE NOT DIRECTORY", "root not dir");
}

/// Turns on all check-hashes of an image and computes them.
fn add_ckhashes(img: &mut Img) {
    let g = img.g;
    for c in 0..g.ncg {
        let co = img.cg_off(c);
        let inited = get_u32(&img.data, co + 120) as u64;
        for i in 0..inited {
            let ino = c * g.ipg + i;
            let di = img.inode(ino);
            if di.di_mode() != 0 {
                img.set_inode_hashed(ino, &di);
            }
        }
        let cgb = &img.data[co..co + g.cgsize as usize];
        let h = ckhash::ckhash_with_zeroed_field(cgb, 132);
        set_u32(&mut img.data, co + 132, h);
    }
    let mut sb = img.sb();
    sb.set_fs_flags(sb.fs_flags() | FS_METACKHASH);
    sb.set_fs_metackhash(CK_SUPPORTED);
    img.set_sb(&sb);
    let o = img.sbloc as usize;
    let sbsize = sb.fs_sbsize() as usize;
    let h = ckhash::ckhash_with_zeroed_field(&img.data[o..o + sbsize], 1304);
    set_u32(&mut img.data, o + 1304, h);
}

#[test]
fn check_hashes() {
    let Some(data) = rich_image() else { return };
    let mut img = Img::new(data);
    add_ckhashes(&mut img);
    assert_clean(&img.data, "image with check-hashes");
    let good = img.data.clone();
    // Inode hash: preen class.
    let g = img.lookup("a/g");
    let o = img.ino_off(g) + 244;
    img.data[o] ^= 1;
    detect_and_repair(&img.data, "CHECK-HASH FAILED", "inode hash");
    preen_fixes(&img.data, "inode hash");
    // Superblock hash: preen class.
    let mut img = Img::new(good.clone());
    let o = img.sbloc as usize + 1304;
    img.data[o] ^= 1;
    detect_and_repair(&img.data, "SUPERBLOCK CHECK HASH FAILED", "sb hash");
    preen_fixes(&img.data, "sb hash");
    // Cylinder-group hash: the group is rebuilt.
    let mut img = Img::new(good.clone());
    let o = img.cg_off(0) + 132;
    img.data[o] ^= 1;
    detect_and_repair(&img.data, "INTEGRITY CHECK FAILED", "cg hash");
    // Repairs keep hashes right: damage something and check after -y.
    let mut img = Img::new(good);
    let mut di = img.inode(g);
    di.set_nlink(5);
    img.set_inode_hashed(g, &di);
    detect_and_repair(&img.data, "LINK COUNT", "nlink with hashes");
}

/// Tiny deterministic generator for the damage test.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

#[test]
fn random_metadata_damage_never_panics() {
    if !needs_makefs("random_metadata_damage_never_panics") {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    std::fs::create_dir_all(r.join("x/y/z")).unwrap();
    for i in 0..40 {
        std::fs::write(r.join(format!("x/f{i}")), vec![b'a'; (i * 977) % 20000]).unwrap();
    }
    std::fs::write(r.join("x/y/big"), vec![7u8; 200_000]).unwrap();
    std::os::unix::fs::symlink("x".repeat(150), r.join("x/l")).unwrap();
    std::os::unix::fs::symlink("s", r.join("x/y/s")).unwrap();
    std::fs::hard_link(r.join("x/f1"), r.join("x/y/h")).unwrap();
    let _ = Command::new("mkfifo").arg(r.join("x/y/z/p")).status();
    let iters = std::env::var("FSCK_FUZZ_ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    let one = makefs(r, "bsize=4096,fsize=512", &["-s", "2m"]);
    let multi = makefs(
        r,
        "bsize=4096,fsize=512,maxbpcg=1024,density=4096",
        &["-s", "4m"],
    );
    assert!(Img::new(multi.clone()).g.ncg > 1);
    fuzz(&one, iters, 0x9E3779B97F4A7C15);
    fuzz(&multi, iters, 0xD1B54A32D192ED03);
    // The larger tree: 8 KiB blocks, a directory of several blocks, hard
    // links to files and symlinks of both kinds.
    let rich = rich_tree();
    let big = makefs(rich.path(), "", &[]);
    fuzz(&big, iters / 3, 0xA0761D6478BD642F);
    // ufskit's newfs with check-hashes, filled through the engine.
    fuzz(&engine_image(), iters, 0xE7037ED1A0B428DB);
}

/// A small newfs image (check-hashes on, several groups) with files,
/// directories and links written by the engine.
fn engine_image() -> Vec<u8> {
    use std::sync::Arc;
    use ufs::newfs::{newfs, NewfsParams};
    use ufs::{Cred, Fs, MountOptions};
    let dev = Arc::new(MemDevice::new(6 << 20));
    let p = NewfsParams {
        bsize: 4096,
        fsize: 512,
        maxblkspercg: Some(2048),
        seed: Some(9),
        time: Some(1_700_000_000),
        ..Default::default()
    };
    newfs(&*dev, &p).unwrap();
    let fs = Fs::open(
        Box::new(dev.clone()),
        MountOptions {
            seed: Some(9),
            ..Default::default()
        },
    )
    .unwrap();
    let root = Cred::ROOT;
    let a = fs.mkdir(fs.root(), b"a", 0o755, root).unwrap().ino;
    let b = fs.mkdir(a, b"b", 0o755, root).unwrap().ino;
    for i in 0..30usize {
        let f = fs
            .mknod(
                if i % 3 == 0 { b } else { a },
                format!("file{i}").as_bytes(),
                0o100644,
                0,
                root,
            )
            .unwrap()
            .ino;
        fs.write(f, 0, &vec![i as u8; (i * 3331) % 70_000], root)
            .unwrap();
    }
    let f = fs.lookup(a, b"file1").unwrap().ino;
    fs.link(f, b, b"again").unwrap();
    fs.symlink(b, b"ln", &[b'y'; 130], root).unwrap();
    fs.unmount().unwrap();
    drop(fs);
    dev.snapshot()
}

fn fuzz(base: &[u8], iters: usize, seed: u64) {
    if let Ok(p) = std::env::var("FSCK_FUZZ_DUMP") {
        std::fs::write(p, base).unwrap();
    }
    let img = Img::new(base.to_vec());
    let g = img.g;
    // Metadata regions: superblock, cg blocks, initialised inode blocks,
    // directory and indirect blocks.
    let mut regions: Vec<(usize, usize)> = vec![(img.sbloc as usize, SBSIZE_STRUCT)];
    for c in 0..g.ncg {
        regions.push((img.cg_off(c), g.cgsize as usize));
        let inited = get_u32(&img.data, img.cg_off(c) + 120) as u64;
        regions.push((img.frag_off(g.cgimin(c)), (inited * 256) as usize));
        for i in 0..inited {
            let di = img.inode(c * g.ipg + i);
            if di.is_dir() {
                for k in 0..12 {
                    if di.di_db(k) != 0 {
                        let len = g.blksize(di.di_size(), k as u64) as usize;
                        regions.push((img.frag_off(di.di_db(k)), len));
                    }
                }
            }
            if di.di_ib(0) != 0 {
                regions.push((img.frag_off(di.di_ib(0)), g.bsize as usize));
            }
        }
    }
    regions.retain(|&(o, l)| l > 0 && o + l <= base.len());
    let mut rng = Rng(seed);
    let (mut repaired_clean, mut setup_errors, mut yes_ok) = (0, 0, 0);
    for it in 0..iters {
        let mut d = base.to_vec();
        let nflips = 1 + rng.below(8);
        for _ in 0..nflips {
            let (o, len) = regions[rng.below(regions.len() as u64) as usize];
            let at = o + rng.below(len as u64) as usize;
            match rng.below(4) {
                0 => d[at] ^= 1 << rng.below(8),
                1 => d[at] = rng.next() as u8,
                2 => d[at] = [0u8, 0xff][rng.below(2) as usize],
                _ => {
                    // A plausible-looking 32-bit value (block or inode number).
                    let at = at & !3;
                    if at + 4 <= d.len() {
                        let v = rng.below(g.size + 64) as u32;
                        d[at..at + 4].copy_from_slice(&v.to_le_bytes());
                    }
                }
            }
        }
        let dev = MemDevice::from_vec(d.clone());
        if fsck(&dev, FsckMode::Check).is_err() {
            setup_errors += 1;
        }
        assert!(dev.snapshot() == d, "iteration {it}: check mode wrote");
        let _ = fsck(&MemDevice::from_vec(d.clone()), FsckMode::Preen);
        let dev = MemDevice::from_vec(d);
        if let Ok(y) = fsck(&dev, FsckMode::Yes) {
            yes_ok += 1;
            let again = fsck(&dev, FsckMode::Check).expect("check after -y");
            if y.clean && again.findings.is_empty() {
                repaired_clean += 1;
            } else if std::env::var("FSCK_FUZZ_VERBOSE").is_ok() {
                eprintln!(
                    "iteration {it}: after -y:\n{}second check:\n{}",
                    show(&y),
                    show(&again)
                );
            }
        }
    }
    eprintln!("{iters} damaged images ({} groups): {setup_errors} refused at setup, {repaired_clean} clean after one -y", g.ncg);
    // One -y run should almost always leave a consistent file system.
    assert!(
        repaired_clean * 100 >= yes_ok * 95,
        "only {repaired_clean} of {yes_ok} repaired in one run"
    );
}

/// A sparse 2 TiB file system with more than 20,000 cylinder groups, laid
/// out by hand: fsck -y builds its maps, then a check must be clean, fast
/// and small.
#[test]
fn huge_sparse_image() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.img");
    let g = make_huge(&path);
    assert!(g.ncg > 20_000);
    let dev = ufs::dev::FileDevice::open(&path, true).unwrap();
    let t = std::time::Instant::now();
    let y = fsck(&dev, FsckMode::Yes).unwrap();
    eprintln!("2 TiB -y: {:?}", t.elapsed());
    assert!(y.clean, "{}", show(&y));
    let t = std::time::Instant::now();
    let r = fsck(&dev, FsckMode::Check).unwrap();
    let el = t.elapsed();
    eprintln!(
        "2 TiB check: {el:?}, {} groups, free {}",
        g.ncg, r.free_frags
    );
    assert!(r.findings.is_empty() && r.clean, "{}", show(&r));
    assert!(r.free_frags > g.size / 2);
    if let Ok(st) = std::fs::read_to_string("/proc/self/status") {
        // Peak memory of the whole test process (other tests included).
        if let Some(l) = st.lines().find(|l| l.starts_with("VmHWM")) {
            eprintln!("2 TiB check: peak {l}");
        }
    }
    assert!(el.as_secs() < 60, "2 TiB check took {el:?}");
}

/// Writes the superblock, cylinder-group headers (maps left for fsck to
/// build) and the root directory of a 2 TiB UFS2 file system into a sparse
/// file.
fn make_huge(path: &Path) -> Geometry {
    use std::os::unix::fs::FileExt;
    let (bsize, fsize, frag) = (32768i32, 4096i32, 8i32);
    let size: i64 = (2i64 << 40) / fsize as i64;
    let fpg: i32 = 23552;
    let ipg: u32 = 1024;
    let ncg = (size as u64).div_ceil(fpg as u64) as u32;
    let mut sb = Superblock::zeroed();
    sb.set_fs_magic(FS_UFS2_MAGIC);
    sb.set_fs_sblockloc(65536);
    sb.set_fs_bsize(bsize);
    sb.set_fs_fsize(fsize);
    sb.set_fs_frag(frag);
    sb.set_fs_bshift(15);
    sb.set_fs_fshift(12);
    sb.set_fs_fragshift(3);
    sb.set_fs_bmask(!(bsize - 1));
    sb.set_fs_fmask(!(fsize - 1));
    sb.set_fs_qbmask((bsize - 1) as i64);
    sb.set_fs_qfmask((fsize - 1) as i64);
    sb.set_fs_fsbtodb(3);
    sb.set_fs_nindir(bsize / 8);
    sb.set_fs_inopb((bsize / 256) as u32);
    sb.set_fs_maxsymlinklen(120);
    sb.set_fs_sbsize(4096);
    sb.set_fs_ncg(ncg);
    sb.set_fs_ipg(ipg);
    sb.set_fs_fpg(fpg);
    sb.set_fs_sblkno(24);
    sb.set_fs_cblkno(32);
    sb.set_fs_iblkno(40);
    sb.set_fs_dblkno(40 + (ipg / 16) as i32);
    sb.set_fs_cgsize(4096);
    sb.set_fs_size(size);
    let cssize = ((ncg as i64 * 16 + fsize as i64 - 1) / fsize as i64) * fsize as i64;
    sb.set_fs_cssize(cssize as i32);
    let dblkno = 40 + (ipg / 16) as i64;
    sb.set_fs_csaddr(dblkno);
    sb.set_fs_dsize(size - ncg as i64 * dblkno - cssize / fsize as i64);
    sb.set_fs_maxcontig(32);
    sb.set_fs_contigsumsize(16);
    sb.set_fs_maxbpg(4096);
    sb.set_fs_minfree(8);
    sb.set_fs_maxbsize(bsize);
    sb.set_fs_avgfilesize(16384);
    sb.set_fs_avgfpdir(64);
    sb.set_fs_old_inodefmt(2);
    let (b, n) = (bsize as u64, (bsize / 8) as u64);
    sb.set_fs_maxfilesize(b * 12 - 1 + b * n + b * n * n + b * n * n * n);
    sb.set_fs_clean(1);
    let g = sb.validate(65536).expect("valid geometry");
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .unwrap();
    f.set_len(g.size * g.fsize).unwrap();
    // Root directory in the first free fragment after the summary area.
    let rootblk = g.csaddr + g.cssize / g.fsize;
    let mut chunk = dir::empty_chunk(L);
    dir::write_entry(L, &mut chunk, 0, 2, 12, 4, b".");
    dir::write_entry(L, &mut chunk, 12, 2, 500, 4, b"..");
    f.write_all_at(&chunk, rootblk * g.fsize).unwrap();
    let mut root = Dinode::default();
    root.set_di_mode(0o40755);
    root.set_nlink(2);
    root.set_di_size(512);
    root.set_di_blocks(g.fsize / 512);
    root.set_di_db(0, rootblk);
    f.write_all_at(root.as_bytes(), g.cgimin(0) * g.fsize + 2 * 256)
        .unwrap();
    for c in 0..g.ncg {
        let mut cg = Cg::new_layout(&g, c);
        cg.set_cg_ndblk(g.cg_nfrags(c) as u32);
        cg.set_cg_initediblk((2 * g.inopb).min(g.ipg) as u32);
        f.write_all_at(cg.as_bytes(), g.cgtod(c) * g.fsize).unwrap();
    }
    let bytes = sb.to_disk_bytes();
    f.write_all_at(&bytes, 65536).unwrap();
    f.write_all_at(&bytes, g.cgsblock(g.ncg - 1) * g.fsize)
        .unwrap();
    g
}

#[test]
fn block_device_trait_is_object_safe() {
    // fsck takes any device through the trait object.
    let dev: Box<dyn BlockDevice> = Box::new(MemDevice::new(1 << 20));
    assert!(fsck(&*dev, FsckMode::Check).is_err());
}

/// Images from ufskit's own newfs (superblock at 65536, check-hashes,
/// `/.snap`), before and after a workload through the engine, check clean.
#[test]
fn newfs_and_engine_images_check_clean() {
    use std::sync::Arc;
    use ufs::newfs::{newfs, NewfsParams};
    use ufs::{Cred, Fs, MountOptions, RenameMode, SetAttr};
    let configs = [
        NewfsParams {
            seed: Some(1),
            time: Some(1_700_000_000),
            ..Default::default()
        },
        NewfsParams {
            bsize: 4096,
            fsize: 512,
            seed: Some(2),
            time: Some(1_700_000_000),
            ..Default::default()
        },
        NewfsParams {
            bsize: 65536,
            fsize: 8192,
            no_snap: true,
            ckhash: false,
            seed: Some(3),
            time: Some(1_700_000_000),
            ..Default::default()
        },
        NewfsParams {
            softupdates: true,
            maxblkspercg: Some(4096),
            seed: Some(4),
            time: Some(1_700_000_000),
            ..Default::default()
        },
    ];
    for (k, p) in configs.iter().enumerate() {
        let dev = Arc::new(MemDevice::new(96 << 20));
        newfs(&*dev, p).unwrap();
        let fresh = dev.snapshot();
        assert_clean(&fresh, &format!("newfs config {k}"));
        let (r, _) = run(&fresh, FsckMode::Yes);
        assert!(
            r.findings.is_empty() && !r.modified,
            "newfs config {k}: -y changed a fresh image:\n{}",
            show(&r)
        );
        // A workload through the engine.
        {
            let fs = Fs::open(
                Box::new(dev.clone()),
                MountOptions {
                    seed: Some(7),
                    ..Default::default()
                },
            )
            .unwrap();
            let root = Cred::ROOT;
            let r = fs.root();
            let a = fs.mkdir(r, b"a", 0o755, root).unwrap().ino;
            let b = fs.mkdir(a, b"b", 0o755, root).unwrap().ino;
            let c = fs.mkdir(b, b"c", 0o755, root).unwrap().ino;
            let d = fs.mkdir(r, b"d", 0o755, root).unwrap().ino;
            for (i, len) in [0usize, 3, 700, 5000, 40_000, 200_000, 1_500_000]
                .iter()
                .enumerate()
            {
                let f = fs
                    .mknod(
                        if i % 2 == 0 { a } else { c },
                        format!("f{i}").as_bytes(),
                        0o100644,
                        0,
                        root,
                    )
                    .unwrap()
                    .ino;
                let data: Vec<u8> = (0..*len).map(|x| (x * 31 + i) as u8).collect();
                fs.write(f, 0, &data, root).unwrap();
            }
            let f = fs.lookup(a, b"f2").unwrap().ino;
            fs.link(f, d, b"hard").unwrap();
            fs.symlink(d, b"short", b"../a/f2", root).unwrap();
            fs.symlink(d, b"long", &[b'x'; 300], root).unwrap();
            fs.mknod(d, b"fifo", 0o010644, 0, root).unwrap();
            let s = fs.mknod(r, b"sparse", 0o100600, 0, root).unwrap().ino;
            fs.write(s, 3 << 20, b"tail", root).unwrap();
            let t = fs.lookup(c, b"f5").unwrap().ino;
            fs.setattr(
                t,
                &SetAttr {
                    size: Some(10_000),
                    ..Default::default()
                },
                root,
            )
            .unwrap();
            for i in 0..600 {
                fs.mknod(
                    d,
                    format!("entry_{i:04}_padding_name").as_bytes(),
                    0o100644,
                    0,
                    root,
                )
                .unwrap();
            }
            for i in (0..600).step_by(3) {
                fs.unlink(d, format!("entry_{i:04}_padding_name").as_bytes())
                    .unwrap();
            }
            // Move a subtree up a level (depths change below it).
            fs.rename(a, b"b", d, b"b2", RenameMode::NoReplace).unwrap();
            let e = fs.mkdir(c, b"e", 0o700, root).unwrap().ino;
            fs.rmdir(c, b"e").unwrap();
            let _ = e;
            fs.unlink(a, b"f0").unwrap();
            fs.unmount().unwrap();
        }
        let used = dev.snapshot();
        assert_clean(&used, &format!("newfs config {k} after engine workload"));
    }
}

/// A directory grown past its direct blocks whose size runs past its last
/// allocated block (a crash between the new size and the new block's
/// pointer) is shortened by preen, as FreeBSD's pass 1 does for any inode
/// with indirect blocks; within the direct blocks the same hole is pass 2's
/// "CONTAINS EMPTY BLOCKS", which preen leaves alone.
#[test]
fn big_directory_size_past_end_is_preen_adjusted() {
    use std::sync::Arc;
    use ufs::newfs::{newfs, NewfsParams};
    use ufs::{Cred, Fs, MountOptions};
    let dev = Arc::new(MemDevice::new(8 << 20));
    let p = NewfsParams {
        bsize: 4096,
        fsize: 512,
        seed: Some(3),
        time: Some(1_700_000_000),
        ..Default::default()
    };
    newfs(&*dev, &p).unwrap();
    let fs = Fs::open(Box::new(dev.clone()), MountOptions::default()).unwrap();
    let root = Cred::ROOT;
    let big = fs.mkdir(fs.root(), b"big", 0o755, root).unwrap().ino;
    let small = fs.mkdir(fs.root(), b"small", 0o755, root).unwrap().ino;
    // Past 12 blocks of 4 KiB the directory reaches its first indirect
    // block; stop where its last block is full, as it is when a crash
    // catches the next block's pointer behind the new size.
    let mut i = 0usize;
    loop {
        fs.mknod(big, format!("n{i:05}").as_bytes(), 0o100644, 0, root)
            .unwrap();
        i += 1;
        let size = fs.getattr(big).unwrap().size;
        if size > 13 * 4096 && size.is_multiple_of(4096) {
            break;
        }
        assert!(i < 20_000);
    }
    fs.mknod(small, b"x", 0o100644, 0, root).unwrap();
    fs.unmount().unwrap();
    drop(fs);
    let data = dev.snapshot();
    assert_clean(&data, "engine-built big directory");
    let mut img = Img::new(data);
    let mut di = img.inode(big.get());
    assert!(
        di.di_ib(0) != 0,
        "directory should reach its indirect block"
    );
    di.set_di_size(di.di_size() + 512);
    img.set_inode_hashed(big.get(), &di);
    detect_and_repair(
        &img.data,
        "BEYOND END OF ALLOCATED FILE",
        "big dir size past end",
    );
    preen_fixes(&img.data, "big dir size past end");
    let mut di = img.inode(small.get());
    di.set_di_size(di.di_size() + 4096);
    img.set_inode_hashed(small.get(), &di);
    preen_refuses(&img.data, "small dir size past end");
}

/// A fresh image of our newfs with 4 KiB blocks (16 inodes a block).
fn small_engine_image(bytes: u64, softupdates: bool) -> std::sync::Arc<MemDevice> {
    let dev = std::sync::Arc::new(MemDevice::new(bytes));
    ufs::newfs::newfs(
        &*dev,
        &ufs::newfs::NewfsParams {
            bsize: 4096,
            fsize: 512,
            seed: Some(4),
            time: Some(1_700_000_000),
            softupdates,
            ..Default::default()
        },
    )
    .unwrap();
    dev
}

/// fsck_ffs pass1: on a soft-updates file system, preen trusts the inode
/// map and reads no inode past the last one it marks used. A name of an
/// inode beyond it (its bit never written) is then a name of an
/// unallocated inode, which preen must refuse (FreeBSD's preen stops at
/// UNALLOCATED); a full check reads the inode and repairs the map.
#[test]
fn softdep_preen_reads_no_inode_past_the_inode_map() {
    use ufs::{Cred, Fs, Ino, MountOptions};
    for softupdates in [true, false] {
        let dev = small_engine_image(8 << 20, softupdates);
        let fs = Fs::open(Box::new(dev.clone()), MountOptions::default()).unwrap();
        let d = fs.mkdir(fs.root(), b"d", 0o755, Cred::ROOT).unwrap().ino;
        let mut last = Ino::NONE;
        for i in 0..5 {
            last = fs
                .mknod(d, format!("f{i}").as_bytes(), 0o100644, 0, Cred::ROOT)
                .unwrap()
                .ino;
        }
        fs.unmount().unwrap();
        drop(fs);
        // The newest file's bit never reached its group's map.
        let mut img = Img::new(dev.snapshot());
        let g = img.g;
        let (c, rel) = (last.get() / g.ipg, last.get() % g.ipg);
        let co = img.cg_off(c);
        let iused = get_u32(&img.data, co + 92) as usize;
        img.data[co + iused + (rel / 8) as usize] &= !(1 << (rel % 8));
        let mut sb = img.sb();
        sb.set_fs_clean(0);
        img.set_sb(&sb);
        add_ckhashes(&mut img);
        let what = format!("name of an inode past the map (soft updates {softupdates})");
        if softupdates {
            let (p, _) = run(&img.data, FsckMode::Preen);
            assert!(
                p.findings
                    .iter()
                    .any(|f| f.message.starts_with("UNALLOCATED") && !f.fixed),
                "{what}:\n{}",
                show(&p)
            );
            preen_refuses(&img.data, &what);
        } else {
            let (p, _) = run(&img.data, FsckMode::Preen);
            assert!(
                !p.findings
                    .iter()
                    .any(|f| f.message.starts_with("UNALLOCATED")),
                "{what}: the inode is read without soft updates:\n{}",
                show(&p)
            );
        }
        let (y, fixed) = run(&img.data, FsckMode::Yes);
        assert_eq!(y.exit_code(), 0, "{what}: -y:\n{}", show(&y));
        assert_clean(&fixed, &what);
    }
}

/// Preen on a soft-updates file system reads fewer inodes (up to the last
/// one the map marks used) but must not count fewer as initialised: it
/// once wrote that short count into `cg_initediblk` (4 instead of 256),
/// and the next inode the engine handed out made it initialise the block
/// again, zeroing `.snap`. A count inside an inode block is a damaged
/// group: fsck rebuilds it, the engine refuses it.
#[test]
fn softdep_preen_keeps_the_initialised_inode_count() {
    use std::sync::Arc;
    use ufs::{Cred, Fs, MountOptions};
    let dev = small_engine_image(32 << 20, true);
    let mut img = Img::new(dev.snapshot());
    let inited = get_u32(&img.data, img.cg_off(0) + 120);
    assert!(
        inited as u64 >= 2 * img.g.inopb,
        "newfs initialised {inited}"
    );
    let mut sb = img.sb();
    sb.set_fs_clean(0);
    img.set_sb(&sb);
    add_ckhashes(&mut img);
    let (p, preened) = run(&img.data, FsckMode::Preen);
    assert_eq!(p.exit_code(), 0, "{}", show(&p));
    let after = Img::new(preened.clone());
    assert_eq!(get_u32(&after.data, after.cg_off(0) + 120), inited);
    // The engine on the preened image: new files, then a clean check.
    let dev = Arc::new(MemDevice::from_vec(preened));
    let fs = Fs::open(Box::new(dev.clone()), MountOptions::default()).unwrap();
    for i in 0..5 {
        fs.mknod(
            fs.root(),
            format!("f{i}").as_bytes(),
            0o100644,
            0,
            Cred::ROOT,
        )
        .unwrap();
    }
    fs.unmount().unwrap();
    drop(fs);
    assert_clean(&dev.snapshot(), "engine after preen");

    // A count that is not a multiple of the inodes per block.
    let mut img = Img::new(dev.snapshot());
    let co = img.cg_off(0);
    set_u32(&mut img.data, co + 120, 4);
    add_ckhashes(&mut img);
    detect_and_repair(
        &img.data,
        "INTEGRITY CHECK FAILED",
        "unaligned cg_initediblk",
    );
    let dev = Arc::new(MemDevice::from_vec(img.data.clone()));
    let fs = Fs::open(
        Box::new(dev),
        MountOptions {
            force: true,
            ..Default::default()
        },
    )
    .unwrap();
    let e = fs
        .mknod(fs.root(), b"new", 0o100644, 0, Cred::ROOT)
        .unwrap_err();
    assert_eq!(e.kind, ufs::ErrorKind::Corrupt, "{e}");
    assert!(e.to_string().contains("cg_initediblk"), "{e}");
}
