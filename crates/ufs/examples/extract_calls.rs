//! Times the engine alone making the calls `tar -x` makes through the
//! mount (docs/DESIGN.md, "Round trips per file"): per file a LOOKUP of
//! the new name, CREATE, a WRITE per 10 KiB record, the parent's GETATTR,
//! the `security.capability` question, and SETATTRs for owner, mode and
//! times. The tree is read into memory first, so only the engine is
//! timed; the result is its share of an extraction's time per entry.
//! usage: cargo run --release -p ufs --example extract_calls [TREE] [ROUNDS] [FORMAT...]
//! FORMAT: ufs2 (the default), ufs2-be, ufs1, ufs1-be; with several, the
//! rounds alternate between them and each gets its own median (the cost
//! of byte order and of UFS1's conversions on the same tree).
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The daemon's allocator and its options (crates/ufskit/src/main.rs), so
/// that the engine's memory costs are those of the mount.
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
#[allow(unsafe_code)]
#[export_name = "_rjem_malloc_conf"]
pub static MALLOC_CONF: &[u8] = b"background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:1000\0";

enum Entry {
    Dir(Vec<u8>, u32, Vec<Entry>),
    File(Vec<u8>, u32, Vec<u8>),
    Link(Vec<u8>, Vec<u8>),
}

fn load(dir: &Path) -> Vec<Entry> {
    let mut ents: Vec<_> = std::fs::read_dir(dir)
        .expect("read tree")
        .map(|e| e.expect("entry"))
        .collect();
    ents.sort_by_key(|e| e.file_name());
    ents.into_iter()
        .filter_map(|e| {
            let name = e.file_name().as_bytes().to_vec();
            let md = std::fs::symlink_metadata(e.path()).expect("stat");
            let mode = md.mode() & 0o7777;
            let ft = md.file_type();
            if ft.is_dir() {
                Some(Entry::Dir(name, mode, load(&e.path())))
            } else if ft.is_symlink() {
                let t = std::fs::read_link(e.path()).expect("readlink");
                Some(Entry::Link(name, t.as_os_str().as_bytes().to_vec()))
            } else if ft.is_file() {
                Some(Entry::File(
                    name,
                    mode,
                    std::fs::read(e.path()).expect("read"),
                ))
            } else {
                None
            }
        })
        .collect()
}

fn count(es: &[Entry]) -> usize {
    es.iter()
        .map(|e| match e {
            Entry::Dir(_, _, c) => 1 + count(c),
            _ => 1,
        })
        .sum()
}

fn extract(fs: &ufs::Fs, parent: ufs::Ino, es: &[Entry]) {
    let root = ufs::Cred::ROOT;
    let times = ufs::SetAttr {
        atime: Some(ufs::TimeSet::At(ufs::Time { sec: 1, nsec: 0 })),
        mtime: Some(ufs::TimeSet::At(ufs::Time { sec: 1, nsec: 0 })),
        ..Default::default()
    };
    for e in es {
        let name = match e {
            Entry::Dir(n, ..) | Entry::File(n, ..) | Entry::Link(n, _) => n,
        };
        assert!(fs.lookup(parent, name).is_err(), "the name is new");
        let ino = match e {
            Entry::Dir(n, mode, kids) => {
                let a = fs.mkdir(parent, n, *mode, root).expect("mkdir");
                extract(fs, a.ino, kids);
                a.ino
            }
            Entry::Link(n, t) => fs.symlink(parent, n, t, root).expect("symlink").ino,
            Entry::File(n, mode, data) => {
                let a = fs
                    .mknod(parent, n, 0o100000 | *mode, 0, root)
                    .expect("create");
                for (i, rec) in data.chunks(10240).enumerate() {
                    fs.write(a.ino, i as u64 * 10240, rec, root).expect("write");
                }
                let _ = fs.getxattr(a.ino, ufs::XattrNs::System, b"capability", root);
                let own = ufs::SetAttr {
                    uid: Some(0),
                    gid: Some(0),
                    ..Default::default()
                };
                fs.setattr(a.ino, &own, root).expect("chown");
                let m = ufs::SetAttr {
                    mode: Some(*mode as u16),
                    ..Default::default()
                };
                fs.setattr(a.ino, &m, root).expect("chmod");
                a.ino
            }
        };
        fs.getattr(parent).expect("parent getattr");
        fs.setattr(ino, &times, root).ok();
    }
}

fn main() {
    let tree = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "/usr/include".into());
    let rounds: usize = std::env::args()
        .nth(2)
        .map(|r| r.parse().expect("ROUNDS is a number"))
        .unwrap_or(5);
    let t = std::time::Instant::now();
    let top = load(Path::new(&tree));
    let n = count(&top);
    eprintln!(
        "{tree}: {n} entries read in {:.2} s",
        t.elapsed().as_secs_f64()
    );
    let formats: Vec<ufs_format::Variant> = {
        let v: Vec<_> = std::env::args()
            .skip(3)
            .map(|f| ufs_format::Variant::parse(&f).expect("format: ufs2, ufs2-be, ufs1, ufs1-be"))
            .collect();
        if v.is_empty() {
            vec![ufs_format::Variant::UFS2_LE]
        } else {
            v
        }
    };
    let mut by_format: Vec<Vec<f64>> = vec![Vec::new(); formats.len()];
    for round in 0..rounds * formats.len() {
        let v = formats[round % formats.len()];
        let dev = ufs::dev::MemDevice::new(4 << 30);
        ufs::newfs::newfs(
            &dev,
            &ufs::newfs::NewfsParams {
                seed: Some(1),
                // As `ufskit newfs` makes it by default.
                softupdates: true,
                format: v.ufs,
                endian: v.endian,
                ..Default::default()
            },
        )
        .expect("newfs");
        // A cache the size of the daemon's default here, so that nothing
        // is written back during the extraction (as in the mount).
        let opts = ufs::MountOptions {
            cache_bytes: 768 << 20,
            ..Default::default()
        };
        let fs = ufs::Fs::open(Box::new(dev), opts).expect("open");
        let t = std::time::Instant::now();
        extract(&fs, fs.root(), &top);
        let s = t.elapsed().as_secs_f64();
        by_format[round % formats.len()].push(s);
        println!(
            "{}: extract {:.3} s, {:.1} µs per entry",
            v.short_name(),
            s,
            s * 1e6 / n as f64
        );
        fs.unmount().expect("unmount");
    }
    for (v, mut t) in formats.iter().zip(by_format) {
        t.sort_by(f64::total_cmp);
        println!(
            "{}: median {:.3} s, {:.1} µs per entry",
            v.short_name(),
            t[t.len() / 2],
            t[t.len() / 2] * 1e6 / n as f64
        );
    }
}
