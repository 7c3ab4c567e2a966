//! A corpus of malformed images: each on-disk field a reader trusts
//! pushed to its edge (inode sizes, counts, block pointers, extended
//! attribute lengths, times, flags; directory entries and loops;
//! cylinder group counters and maps; partition tables pointing outside
//! the disk), each run the way a user would meet it: the partition probe,
//! `fsck -n`, a read-write open with a full walk and writes in every
//! directory, the unmount, then `fsck -y` until it is done and `fsck -n`.
//!
//! What must hold for every case (docs/SECURITY.md):
//! - no panic and no hang (each case has a deadline);
//! - memory stays bounded: the test's allocator counts, and no case may
//!   take more than [`MEMORY_SLACK`] above where it started (the engine's
//!   cache is 4 MiB here);
//! - damage an operation met leaves the image marked for fsck, never
//!   clean;
//! - after `fsck -y` says it repaired everything, `fsck -n` finds nothing
//!   and the engine walks the image without meeting damage; when it
//!   cannot repair, the image is not marked clean.
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use ufs::dev::{BlockDevice, MemDevice};
use ufs::fsck::{fsck, FsckMode};
use ufs::{Cred, ErrorKind, FileKind, Fs, Ino, MountOptions};

/// Counts the bytes this test binary holds, and the most it held.
struct Counting;

static HELD: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

#[allow(unsafe_code)]
// SAFETY: defers to the system allocator; only counts what passes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = System.alloc(l);
        if !p.is_null() {
            let now = HELD.fetch_add(l.size(), Ordering::Relaxed) + l.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        HELD.fetch_sub(l.size(), Ordering::Relaxed);
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let q = System.realloc(p, l, new);
        if !q.is_null() {
            if new >= l.size() {
                let now = HELD.fetch_add(new - l.size(), Ordering::Relaxed) + new - l.size();
                PEAK.fetch_max(now, Ordering::Relaxed);
            } else {
                HELD.fetch_sub(l.size() - new, Ordering::Relaxed);
            }
        }
        q
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// The most a case may allocate beyond what was held when it began (the
/// image itself is made before): the engine's cache bound (4 MiB) and as
/// much again for fsck's maps and the walk's buffers. A length or count
/// taken from the image and trusted would show here (an extended
/// attribute area of 4 GiB, a directory of 1 TiB).
const MEMORY_SLACK: usize = 8 << 20;

/// The most any case allocated so far (reported).
static MOST: AtomicUsize = AtomicUsize::new(0);

/// Cases run one at a time (the allocator's figures are process-wide).
static SERIAL: Mutex<()> = Mutex::new(());

const IMAGE_BYTES: u64 = 8 << 20;
const FSIZE: u64 = 512;
const BSIZE: u64 = 4096;

/// Where things are in the base image.
struct Base {
    bytes: Vec<u8>,
    g: ufs_format::sb::Geometry,
    /// Inode numbers by name: small, big, dir, sub, sym, longsym, xattr.
    ino: std::collections::HashMap<&'static str, Ino>,
}

fn opts() -> MountOptions {
    MountOptions {
        cache_bytes: 4 << 20,
        seed: Some(3),
        ..Default::default()
    }
}

/// A small UFS2 image with a bit of every kind of inode.
fn base(ckhash: bool) -> Base {
    let dev = Arc::new(MemDevice::new(IMAGE_BYTES));
    ufs::newfs::newfs(
        &*dev,
        &ufs::newfs::NewfsParams {
            bsize: BSIZE,
            fsize: FSIZE,
            seed: Some(3),
            time: Some(1_700_000_000),
            ckhash,
            ..Default::default()
        },
    )
    .unwrap();
    let fs = Fs::open(Box::new(dev.clone()), opts()).unwrap();
    let r = Cred::ROOT;
    let root = fs.root();
    let mut ino = std::collections::HashMap::new();
    let file = |parent: Ino, name: &str, len: usize| {
        let a = fs.mknod(parent, name.as_bytes(), 0o100644, 0, r).unwrap();
        let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        fs.write(a.ino, 0, &data, r).unwrap();
        a.ino
    };
    ino.insert("small", file(root, "small", 100));
    // More than the 12 direct blocks: an indirect block too.
    ino.insert("big", file(root, "big", 30 * BSIZE as usize + 77));
    let dir = fs.mkdir(root, b"dir", 0o755, r).unwrap().ino;
    for i in 0..60 {
        file(dir, &format!("entry-with-a-longer-name-{i}"), i * 10);
    }
    ino.insert("dir", dir);
    let sub = fs.mkdir(dir, b"sub", 0o755, r).unwrap().ino;
    file(sub, "inner", 10);
    ino.insert("sub", sub);
    ino.insert("sym", fs.symlink(root, b"sym", b"small", r).unwrap().ino);
    let long = "t/".repeat(150);
    ino.insert(
        "longsym",
        fs.symlink(root, b"longsym", long.as_bytes(), r)
            .unwrap()
            .ino,
    );
    let x = file(root, "xattr", 10);
    fs.setxattr(
        x,
        ufs::XattrNs::User,
        b"k",
        &[7u8; 300],
        ufs::XattrSet::Either,
        r,
    )
    .unwrap();
    ino.insert("xattr", x);
    fs.link(x, dir, b"hardlink").unwrap();
    fs.unmount().unwrap();
    drop(fs);
    let mut bytes = vec![0u8; IMAGE_BYTES as usize];
    dev.read_at(0, &mut bytes).unwrap();
    let (_, g, _) = ufs::fs::read_superblock(&*dev).unwrap();
    Base { bytes, g, ino }
}

impl Base {
    /// Byte offset of inode `ino`'s 256 bytes (UFS2).
    fn inode(&self, ino: Ino) -> usize {
        (self.g.ino_to_fsba(ino.get()) * self.g.fsize + self.g.ino_to_fsbo(ino.get()) * 256)
            as usize
    }
    fn u64_at(&self, off: usize) -> u64 {
        u64::from_le_bytes(self.bytes[off..off + 8].try_into().unwrap())
    }
    /// Byte offset of the first data block of inode `ino`.
    fn first_block(&self, ino: Ino) -> usize {
        (self.u64_at(self.inode(ino) + DI_DB) * self.g.fsize) as usize
    }
}

// UFS2 inode fields (FreeBSD sys/ufs/ufs/dinode.h, struct ufs2_dinode).
const DI_MODE: usize = 0;
const DI_NLINK: usize = 2;
const DI_BLKSIZE: usize = 12;
const DI_SIZE: usize = 16;
const DI_BLOCKS: usize = 24;
const DI_ATIME: usize = 32;
const DI_MTIMENSEC: usize = 64;
const DI_GEN: usize = 80;
const DI_FLAGS: usize = 88;
const DI_EXTSIZE: usize = 92;
const DI_EXTB: usize = 96;
const DI_DB: usize = 112;
const DI_IB: usize = 208;

// struct cg (FreeBSD sys/ufs/ffs/fs.h).
const CG_MAGIC: usize = 4;
const CG_CGX: usize = 12;
const CG_NDBLK: usize = 20;
const CG_CS_NIFREE: usize = 32;
const CG_CS_NBFREE: usize = 28;
const CG_IROTOR: usize = 48;
const CG_IUSEDOFF: usize = 92;
const CG_FREEOFF: usize = 96;
const CG_NIBLK: usize = 116;
const CG_INITEDIBLK: usize = 120;

type Mutation = Box<dyn Fn(&mut Vec<u8>) + Send>;

fn put(img: &mut [u8], off: usize, v: &[u8]) {
    img[off..off + v.len()].copy_from_slice(v);
}

/// Every case: a name and what it does to the base image.
fn cases(b: &Base) -> Vec<(String, Mutation)> {
    let mut out: Vec<(String, Mutation)> = Vec::new();
    let size_frags = b.g.size;
    let patch = |name: String, off: usize, v: Vec<u8>| -> (String, Mutation) {
        (name, Box::new(move |img: &mut Vec<u8>| put(img, off, &v)))
    };
    let other_block = b.u64_at(b.inode(b.ino["small"]) + DI_DB);
    let inode_table = b.g.ino_to_fsba(b.ino["big"].get());
    for who in ["small", "big", "dir", "sub", "longsym", "xattr"] {
        let i = b.inode(b.ino[who]);
        let u16s: &[(&str, usize, u16)] = &[
            ("mode 0", DI_MODE, 0),
            ("mode all ones", DI_MODE, 0xffff),
            ("mode type 0o110000", DI_MODE, 0o110644),
            ("mode a directory", DI_MODE, 0o40755),
            ("mode a file", DI_MODE, 0o100644),
            ("mode a symlink", DI_MODE, 0o120777),
            ("mode a device", DI_MODE, 0o20644),
            ("nlink 0", DI_NLINK, 0),
            ("nlink -1", DI_NLINK, 0xffff),
            ("nlink 32767", DI_NLINK, 0x7fff),
        ];
        for &(what, off, v) in u16s {
            out.push(patch(
                format!("{who}: {what}"),
                i + off,
                v.to_le_bytes().to_vec(),
            ));
        }
        let u32s: &[(&str, usize, u32)] = &[
            ("blksize 0", DI_BLKSIZE, 0),
            ("mtime nsec 2e9", DI_MTIMENSEC, 2_000_000_000),
            ("gen 0", DI_GEN, 0),
            ("flags all", DI_FLAGS, u32::MAX),
            ("extsize u32::MAX", DI_EXTSIZE, u32::MAX),
            ("extsize 1 MiB", DI_EXTSIZE, 1 << 20),
            ("extsize 1", DI_EXTSIZE, 1),
        ];
        for &(what, off, v) in u32s {
            out.push(patch(
                format!("{who}: {what}"),
                i + off,
                v.to_le_bytes().to_vec(),
            ));
        }
        let u64s: Vec<(&str, usize, u64)> = vec![
            ("size 0", DI_SIZE, 0),
            ("size u64::MAX", DI_SIZE, u64::MAX),
            ("size i64::MAX", DI_SIZE, i64::MAX as u64),
            ("size 1 TiB", DI_SIZE, 1 << 40),
            ("size 513", DI_SIZE, 513),
            ("blocks 0", DI_BLOCKS, 0),
            ("blocks u64::MAX", DI_BLOCKS, u64::MAX),
            ("atime i64::MIN", DI_ATIME, i64::MIN as u64),
            ("extb[0] u64::MAX", DI_EXTB, u64::MAX),
            ("extb[0] past the end", DI_EXTB, size_frags + 5),
            ("extb[0] the superblock", DI_EXTB, 65536 / FSIZE),
            ("db[0] -1", DI_DB, u64::MAX),
            ("db[0] past the end", DI_DB, size_frags + 1),
            ("db[0] 0 (a hole)", DI_DB, 0),
            ("db[0] another file's block", DI_DB, other_block),
            ("db[0] the superblock", DI_DB, 65536 / FSIZE),
            ("db[0] the inode table", DI_DB, inode_table),
            ("db[0] unaligned", DI_DB, other_block + 1),
            ("db[11] -1", DI_DB + 88, u64::MAX),
            ("ib[0] -1", DI_IB, u64::MAX),
            ("ib[0] past the end", DI_IB, size_frags + 10),
            ("ib[0] the inode table", DI_IB, inode_table),
            ("ib[0] another file's block", DI_IB, other_block),
            ("ib[2] a triple indirect at 1", DI_IB + 16, 1),
        ];
        for (what, off, v) in u64s {
            out.push(patch(
                format!("{who}: {what}"),
                i + off,
                v.to_le_bytes().to_vec(),
            ));
        }
    }
    // Directory entries (struct direct: ino u32, reclen u16, type u8,
    // namlen u8, name), in the first block of "dir".
    let d = b.first_block(b.ino["dir"]);
    let entries: Vec<(&str, usize, Vec<u8>)> = vec![
        ("'.' reclen 0", d + 4, 0u16.to_le_bytes().to_vec()),
        ("'.' reclen 513", d + 4, 513u16.to_le_bytes().to_vec()),
        ("'.' reclen 4096", d + 4, 4096u16.to_le_bytes().to_vec()),
        (
            "'.' reclen 3 (unaligned)",
            d + 4,
            3u16.to_le_bytes().to_vec(),
        ),
        ("'.' namlen 255", d + 7, vec![255]),
        ("'.' ino 0", d, 0u32.to_le_bytes().to_vec()),
        (
            "'..' is itself",
            d + 12,
            b.ino["dir"].d_ino().to_le_bytes().to_vec(),
        ),
        ("'..' ino u32::MAX", d + 12, u32::MAX.to_le_bytes().to_vec()),
        ("'..' reclen 0", d + 16, 0u16.to_le_bytes().to_vec()),
        (
            "third entry ino past the last",
            d + 24,
            1_000_000u32.to_le_bytes().to_vec(),
        ),
        ("third entry ino 1", d + 24, 1u32.to_le_bytes().to_vec()),
        ("third entry type dir", d + 30, vec![4]),
        ("third entry namlen 0", d + 31, vec![0]),
        ("third entry name with '/'", d + 32, b"/".to_vec()),
        ("block all ones", d, vec![0xff; 512]),
        ("block all zeros", d, vec![0; 512]),
    ];
    for (what, off, v) in entries {
        out.push(patch(format!("dir: {what}"), off, v));
    }
    // A loop: "sub"'s entry for "inner" names the root, as a directory.
    let s = b.first_block(b.ino["sub"]);
    out.push(patch(
        "sub: inner is the root".into(),
        s + 24,
        2u32.to_le_bytes().to_vec(),
    ));
    out.push(patch(
        "sub: inner is the root, typed dir".into(),
        s + 30,
        vec![4],
    ));
    out.push((
        "sub: inner is the root, as a directory entry".into(),
        Box::new(move |img: &mut Vec<u8>| {
            put(img, s + 24, &2u32.to_le_bytes());
            put(img, s + 30, &[4]);
        }),
    ));
    // A loop: "dir"'s entry "sub" is "dir" itself.
    let dir_ino = b.ino["dir"].d_ino();
    let sub_ino = b.ino["sub"].d_ino();
    out.push((
        "dir: an entry names the directory itself".into(),
        Box::new(move |img: &mut Vec<u8>| {
            for off in (d..d + 4096).step_by(4) {
                if img[off..off + 4] == sub_ino.to_le_bytes() {
                    put(img, off, &dir_ino.to_le_bytes());
                    return;
                }
            }
        }),
    ));
    // Cylinder group 0.
    let c = (b.g.cgtod(0) * b.g.fsize) as usize;
    let cgs: Vec<(&str, usize, Vec<u8>)> = vec![
        ("magic", c + CG_MAGIC, 0u32.to_le_bytes().to_vec()),
        ("cgx 5", c + CG_CGX, 5u32.to_le_bytes().to_vec()),
        (
            "ndblk u32::MAX",
            c + CG_NDBLK,
            u32::MAX.to_le_bytes().to_vec(),
        ),
        ("ndblk 0", c + CG_NDBLK, 0u32.to_le_bytes().to_vec()),
        (
            "nifree -1",
            c + CG_CS_NIFREE,
            (-1i32).to_le_bytes().to_vec(),
        ),
        (
            "nbfree huge",
            c + CG_CS_NBFREE,
            i32::MAX.to_le_bytes().to_vec(),
        ),
        (
            "irotor past the group",
            c + CG_IROTOR,
            u32::MAX.to_le_bytes().to_vec(),
        ),
        (
            "iusedoff past the block",
            c + CG_IUSEDOFF,
            1_000_000u32.to_le_bytes().to_vec(),
        ),
        (
            "freeoff past the block",
            c + CG_FREEOFF,
            u32::MAX.to_le_bytes().to_vec(),
        ),
        ("niblk huge", c + CG_NIBLK, u32::MAX.to_le_bytes().to_vec()),
        (
            "initediblk 0",
            c + CG_INITEDIBLK,
            0u32.to_le_bytes().to_vec(),
        ),
        (
            "initediblk huge",
            c + CG_INITEDIBLK,
            u32::MAX.to_le_bytes().to_vec(),
        ),
    ];
    for (what, off, v) in cgs {
        out.push(patch(format!("cg 0: {what}"), off, v));
    }
    // The maps: every inode and fragment of group 0 marked free (used
    // ones too), and every one marked used.
    let iused = c + u32::from_le_bytes(
        b.bytes[c + CG_IUSEDOFF..c + CG_IUSEDOFF + 4]
            .try_into()
            .unwrap(),
    ) as usize;
    let free = c + u32::from_le_bytes(
        b.bytes[c + CG_FREEOFF..c + CG_FREEOFF + 4]
            .try_into()
            .unwrap(),
    ) as usize;
    let ipg = b.g.ipg as usize;
    let fpg = (b.g.fpg as usize).min(b.g.size as usize);
    out.push(patch(
        "cg 0: inode map all free".into(),
        iused,
        vec![0; ipg / 8],
    ));
    out.push(patch(
        "cg 0: inode map all used".into(),
        iused,
        vec![0xff; ipg / 8],
    ));
    out.push(patch(
        "cg 0: fragment map all free".into(),
        free,
        vec![0xff; fpg / 8],
    ));
    out.push(patch(
        "cg 0: fragment map all used".into(),
        free,
        vec![0; fpg / 8],
    ));
    out
}

/// What one case did, for the failure message.
struct Outcome {
    damage_seen: Option<String>,
}

/// Walks every directory from the root (each once), reads every file
/// and link and their attributes, then writes a file and a directory in
/// each directory. Returns the first damage met, if any.
fn walk_and_write(fs: &Fs) -> Option<String> {
    let r = Cred::ROOT;
    let mut first: Option<String> = None;
    let mut note = |e: ufs::Error| {
        if e.kind == ErrorKind::Corrupt && first.is_none() {
            first = Some(e.to_string());
        }
    };
    let mut seen = std::collections::HashSet::new();
    let mut stack = vec![fs.root()];
    let mut dirs = Vec::new();
    let mut budget = 20_000;
    while let Some(d) = stack.pop() {
        if !seen.insert(d) {
            continue;
        }
        dirs.push(d);
        let mut cookie = 0;
        loop {
            budget -= 1;
            if budget == 0 {
                break;
            }
            let ents = match fs.readdir(d, cookie, 64) {
                Ok(e) => e,
                Err(e) => {
                    note(e);
                    break;
                }
            };
            let Some(last) = ents.last() else { break };
            if last.next <= cookie {
                break;
            }
            cookie = last.next;
            for e in ents {
                if e.name == b"." || e.name == b".." {
                    continue;
                }
                let a = match fs.lookup(d, &e.name) {
                    Ok(a) => a,
                    Err(err) => {
                        note(err);
                        continue;
                    }
                };
                if let Err(err) = fs.listxattr(a.ino, r) {
                    note(err);
                }
                if let Err(err) = fs.getxattr(a.ino, ufs::XattrNs::User, b"k", r) {
                    note(err);
                }
                match a.kind {
                    FileKind::Dir => stack.push(a.ino),
                    FileKind::Symlink => {
                        if let Err(err) = fs.readlink(a.ino) {
                            note(err);
                        }
                    }
                    _ => {
                        for (off, len) in [
                            (0, 1 << 16),
                            (a.size.saturating_sub(4096), 4096),
                            (1 << 30, 4096),
                        ] {
                            if let Err(err) = fs.read(a.ino, off, len) {
                                note(err);
                            }
                        }
                    }
                }
            }
        }
    }
    for d in dirs.into_iter().take(16) {
        match fs.mknod(d, b"new-file", 0o100644, 0, r) {
            Ok(a) => {
                if let Err(e) = fs.write(a.ino, 0, &[1u8; 9000], r) {
                    note(e);
                }
                if let Err(e) = fs.unlink(d, b"new-file") {
                    note(e);
                }
            }
            Err(e) => note(e),
        }
        if let Err(e) = fs.mkdir(d, b"new-dir", 0o755, r) {
            note(e);
        }
    }
    first
}

/// The superblock's clean flag and FS_NEEDSFSCK, read from the image.
fn marks(dev: &MemDevice) -> Option<(i8, bool)> {
    let (sb, _, _) = ufs::fs::read_superblock(dev).ok()?;
    Some((sb.fs_clean(), sb.fs_flags() & ufs_format::FS_NEEDSFSCK != 0))
}

/// `fsck -n` finds nothing on `dev`; otherwise `what` and the first
/// findings.
fn expect_consistent(dev: &MemDevice, what: &str) -> Result<(), String> {
    let check = fsck(dev, FsckMode::Check).map_err(|e| format!("{what}: fsck -n: {e}"))?;
    if check.findings.is_empty() {
        return Ok(());
    }
    let first: Vec<&String> = check.findings.iter().map(|f| &f.message).take(5).collect();
    Err(format!("{what}: {first:?}"))
}

/// Runs one case; Err says which promise broke.
fn run_case(img: Vec<u8>) -> Result<Outcome, String> {
    let dev = Arc::new(MemDevice::from_vec(img));
    let _ = ufs::dev::partition::probe(&*dev);
    let _ = fsck(&*dev, FsckMode::Check);
    let mut damage_seen = None;
    if let Ok(fs) = Fs::open(Box::new(dev.clone()), opts()) {
        let met = walk_and_write(&fs);
        damage_seen = fs.damage_seen();
        if met.is_some() && damage_seen.is_none() {
            return Err(format!(
                "the walk met damage the engine did not remember: {met:?}"
            ));
        }
        let writable = !fs.is_read_only();
        let unmounted = fs.unmount();
        drop(fs);
        if writable && unmounted.is_ok() && damage_seen.is_some() {
            match marks(&dev) {
                Some((0, true)) => {}
                other => {
                    return Err(format!(
                        "damage was met ({damage_seen:?}) but the image came out marked {other:?} (clean, needs-fsck)"
                    ))
                }
            }
        }
    }
    // fsck -y until it says it is done (fsck_ffs's "rerun" at most twice
    // more), then fsck -n must agree and the engine must meet no damage.
    let mut last = None;
    for _ in 0..3 {
        match fsck(&*dev, FsckMode::Yes) {
            Ok(r) => {
                let code = r.exit_code();
                last = Some(code);
                if code != 16 {
                    break;
                }
            }
            Err(_) => {
                last = None;
                break;
            }
        }
    }
    match last {
        Some(0) => {
            expect_consistent(
                &dev,
                "fsck -y said everything was repaired, fsck -n then found",
            )?;
            let fs = Fs::open(Box::new(dev.clone()), opts())
                .map_err(|e| format!("open after fsck: {e}"))?;
            if let Some(d) = walk_and_write(&fs) {
                return Err(format!("after a clean fsck the engine met damage: {d}"));
            }
            fs.unmount()
                .map_err(|e| format!("unmount after fsck: {e}"))?;
            drop(fs);
            expect_consistent(&dev, "writing to the repaired image left")?;
        }
        Some(_) => {
            if let Some((clean, _)) = marks(&dev) {
                if clean != 0 {
                    return Err("fsck -y could not repair it, yet the image is marked clean".into());
                }
            }
        }
        None => {}
    }
    Ok(Outcome { damage_seen })
}

/// Runs `img` as a case with a deadline and the memory bound.
fn checked(name: &str, img: Vec<u8>) -> Result<Outcome, String> {
    let start = HELD.load(Ordering::Relaxed);
    PEAK.store(start, Ordering::Relaxed);
    let (tx, rx) = mpsc::channel();
    let t = std::thread::spawn(move || {
        let r = std::panic::catch_unwind(move || run_case(img));
        let _ = tx.send(r);
    });
    let r = match rx.recv_timeout(Duration::from_secs(120)) {
        Ok(Ok(r)) => r,
        Ok(Err(p)) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Err(format!("panicked: {msg}"))
        }
        Err(_) => return Err("did not finish in 120 s (a hang)".into()),
    };
    let _ = t.join();
    let used = PEAK.load(Ordering::Relaxed).saturating_sub(start);
    MOST.fetch_max(used, Ordering::Relaxed);
    if used > MEMORY_SLACK {
        return Err(format!("allocated {} MiB at its peak", used >> 20));
    }
    r.map_err(|e| format!("{name}: {e}"))
}

fn run_corpus(base: &Base, cases: Vec<(String, Mutation)>) -> (usize, usize) {
    let mut failures = Vec::new();
    let mut damaged = 0;
    let n = cases.len();
    for (name, f) in cases {
        let mut img = base.bytes.clone();
        f(&mut img);
        match checked(&name, img) {
            Ok(o) => {
                if o.damage_seen.is_some() {
                    damaged += 1;
                }
            }
            Err(e) => failures.push(format!("{name}: {e}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {n} cases broke a promise:\n{}",
        failures.len(),
        failures.join("\n")
    );
    (n, damaged)
}

#[test]
fn every_field_at_its_edge_is_refused_or_repaired_never_trusted() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let b = base(false);
    let cases = cases(&b);
    let (n, damaged) = run_corpus(&b, cases);
    eprintln!(
        "{n} malformed images, {damaged} met as damage by the engine; the most a case allocated: {} KiB",
        MOST.load(Ordering::Relaxed) >> 10
    );
    assert!(n > 250, "the corpus shrank to {n}");
    assert!(
        damaged > n / 4,
        "only {damaged} of {n} cases were met as damage"
    );
}

#[test]
fn with_check_hashes_a_changed_inode_or_group_is_caught() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let b = base(true);
    // The same edges, without fixing the check-hash: the engine must meet
    // each as damage (or the change must be one it never reads).
    let cases: Vec<(String, Mutation)> = cases(&b)
        .into_iter()
        .filter(|(n, _)| n.starts_with("small") || n.starts_with("dir:") || n.starts_with("cg 0"))
        .collect();
    let (n, damaged) = run_corpus(&b, cases);
    eprintln!("{n} malformed images with check-hashes, {damaged} met as damage");
    assert!(
        damaged > n / 3,
        "only {damaged} of {n} cases were met as damage"
    );
}

/// Partition tables that point outside the disk or overflow.
#[test]
fn partition_tables_pointing_anywhere_are_refused_cleanly() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let b = base(false);
    let disk_len = IMAGE_BYTES as usize + (1 << 20);
    // An MBR with one FreeBSD slice at 1 MiB holding the file system.
    let mut disk = vec![0u8; disk_len];
    disk[1 << 20..].copy_from_slice(&b.bytes);
    let entry = |img: &mut Vec<u8>, i: usize, typ: u8, start: u32, len: u32| {
        let e = 446 + 16 * i;
        img[e + 4] = typ;
        put(img, e + 8, &start.to_le_bytes());
        put(img, e + 12, &len.to_le_bytes());
    };
    disk[510] = 0x55;
    disk[511] = 0xaa;
    entry(&mut disk, 0, 0x83, 2048, (IMAGE_BYTES / 512) as u32);
    let mut cases: Vec<(String, Mutation)> = Vec::new();
    let sectors = (disk_len / 512) as u32;
    for (what, typ, start, len) in [
        ("past the end", 0x83u8, sectors + 10, 100u32),
        ("overflowing", 0x83, u32::MAX - 5, u32::MAX),
        ("zero length", 0x83, 2048, 0),
        ("over the table", 0x83, 0, sectors),
        ("a FreeBSD slice past the end", 0xa5, sectors, u32::MAX),
        (
            "a FreeBSD slice over the file system",
            0xa5,
            2048,
            (IMAGE_BYTES / 512) as u32,
        ),
        ("a FreeBSD slice at sector 1", 0xa5, 1, 16),
    ] {
        cases.push((
            format!("MBR: {what}"),
            Box::new(move |img: &mut Vec<u8>| entry(img, 1, typ, start, len)),
        ));
    }
    // A BSD disklabel whose partitions point anywhere, in a slice.
    for (what, off, size) in [
        ("past the slice", u32::MAX - 1, 100u32),
        ("overflowing", u32::MAX, u32::MAX),
        ("over the label", 0, 1 << 20),
    ] {
        cases.push((
            format!("disklabel: {what}"),
            Box::new(move |img: &mut Vec<u8>| {
                entry(img, 0, 0xa5, 2048, (IMAGE_BYTES / 512) as u32);
                let l = (1 << 20) + 512;
                put(img, l, &0x8256_4557u32.to_le_bytes());
                put(img, l + 132, &0x8256_4557u32.to_le_bytes());
                put(img, l + 138, &8u16.to_le_bytes()); // d_npartitions
                put(img, l + 140, &8192u32.to_le_bytes()); // d_bbsize
                for p in 0..8 {
                    let e = l + 148 + 16 * p;
                    put(img, e, &size.to_le_bytes());
                    put(img, e + 4, &off.to_le_bytes());
                    img[e + 12] = 7; // FS_BSDFFS
                }
            }),
        ));
    }
    let mut failures = Vec::new();
    for (name, f) in &cases {
        let mut img = disk.clone();
        f(&mut img);
        let start = HELD.load(Ordering::Relaxed);
        PEAK.store(start, Ordering::Relaxed);
        let dev = Arc::new(MemDevice::from_vec(img));
        let r = std::panic::catch_unwind(|| {
            if let Ok(parts) = ufs::dev::partition::probe(&*dev) {
                for p in parts {
                    assert!(
                        p.start
                            .checked_add(p.size)
                            .is_some_and(|e| e <= disk_len as u64),
                        "partition {} ({}+{}) reaches outside the disk",
                        p.name,
                        p.start,
                        p.size
                    );
                    if let Ok(w) = ufs::dev::partition::Window::new(dev.clone(), p.start, p.size) {
                        let _ = fsck(&w, FsckMode::Check);
                        if let Ok(fs) = Fs::open(
                            Box::new(w),
                            MountOptions {
                                read_only: true,
                                ..opts()
                            },
                        ) {
                            let _ = walk_and_write(&fs);
                        }
                    }
                }
            }
        });
        if let Err(p) = r {
            failures.push(format!("{name}: {:?}", p.downcast_ref::<String>()));
        }
        let used = PEAK.load(Ordering::Relaxed).saturating_sub(start);
        if used > MEMORY_SLACK {
            failures.push(format!("{name}: allocated {} MiB", used >> 20));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
