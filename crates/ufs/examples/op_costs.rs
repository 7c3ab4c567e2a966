//! Microseconds per engine call (no FUSE) for the calls `tar -x` makes per
//! file: lookup of a missing name, create, three setattrs, a small write,
//! getattr; then unlink. usage: cargo run --release -p ufs --example
//! op_costs [N] [MODE] [BYTES] [CACHE_MB] (BYTES written per file,
//! default 6000; 0: empty files, as a large-directory benchmark makes;
//! CACHE_MB: the buffer cache limit, default the engine's; a mount's is
//! larger, and the ordering state it allows is too).
use std::time::Instant;
use ufs::{Cred, SetAttr, Time, TimeSet};
fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(20000);
    let mode = std::env::args()
        .nth(2)
        .and_then(|s| ufs::order::WriteMode::parse(&s));
    // An image file in /dev/shm: the device a mount has, without a disk.
    let path = std::path::Path::new("/dev/shm/ufskit-op-costs.img");
    let f = std::fs::File::create(path).unwrap();
    f.set_len(4 << 30).unwrap();
    drop(f);
    let dev = ufs::dev::FileDevice::open(path, true).unwrap();
    ufs::newfs::newfs(
        &dev,
        &ufs::newfs::NewfsParams {
            seed: Some(1),
            ..Default::default()
        },
    )
    .unwrap();
    drop(dev);
    let fs = ufs::Fs::open_path(
        path,
        ufs::MountOptions {
            write_mode: mode,
            cache_bytes: std::env::args()
                .nth(4)
                .and_then(|s| s.parse::<u64>().ok())
                .map_or(ufs::MountOptions::default().cache_bytes, |mb| mb << 20),
            ..Default::default()
        },
    )
    .unwrap();
    let root = fs.root();
    let d = fs.mkdir(root, b"d", 0o755, Cred::ROOT).unwrap().ino;
    let names: Vec<Vec<u8>> = (0..n).map(|i| format!("f{i:08}").into_bytes()).collect();
    let bytes: usize = std::env::args()
        .nth(3)
        .and_then(|s| s.parse().ok())
        .unwrap_or(6000);
    let data = vec![7u8; bytes];
    let mut t = [0f64; 8];
    let mut inos = Vec::with_capacity(n);
    for name in &names {
        let a = Instant::now();
        let _ = fs.lookup(d, name);
        t[0] += a.elapsed().as_secs_f64();
        let a = Instant::now();
        let ino = fs.mknod(d, name, libc_reg(), 0, Cred::ROOT).unwrap().ino;
        fs.remember(ino);
        t[1] += a.elapsed().as_secs_f64();
        let a = Instant::now();
        if bytes > 0 {
            fs.write_killing(ino, 0, &data, Cred::ROOT, false).unwrap();
        }
        t[2] += a.elapsed().as_secs_f64();
        let a = Instant::now();
        fs.setattr(
            ino,
            &SetAttr {
                uid: Some(0),
                gid: Some(0),
                ..Default::default()
            },
            Cred::ROOT,
        )
        .unwrap();
        fs.setattr(
            ino,
            &SetAttr {
                mode: Some(0o644),
                ..Default::default()
            },
            Cred::ROOT,
        )
        .unwrap();
        let tm = TimeSet::At(Time {
            sec: 1_600_000_000,
            nsec: 0,
        });
        fs.setattr(
            ino,
            &SetAttr {
                atime: Some(tm),
                mtime: Some(tm),
                ..Default::default()
            },
            Cred::ROOT,
        )
        .unwrap();
        t[3] += a.elapsed().as_secs_f64();
        let a = Instant::now();
        fs.getattr(d).unwrap();
        t[4] += a.elapsed().as_secs_f64();
        inos.push(ino);
    }
    for (name, ino) in names.iter().zip(&inos) {
        let a = Instant::now();
        fs.unlink(d, name).unwrap();
        fs.forget(*ino, 1).unwrap();
        t[5] += a.elapsed().as_secs_f64();
    }
    let us = |x: f64| x / n as f64 * 1e6;
    let _ = std::fs::remove_file(path);
    println!(
        "mode {:?}: lookup(miss) {:.1} create {:.1} write {bytes} B {:.1} 3 setattrs {:.1} getattr {:.1} unlink+forget {:.1} (us per call)",
        mode, us(t[0]), us(t[1]), us(t[2]), us(t[3]), us(t[4]), us(t[5])
    );
}
fn libc_reg() -> u32 {
    0o100644
}
