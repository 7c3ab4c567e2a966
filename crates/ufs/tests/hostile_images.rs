//! Damaged and hostile images: opening, walking and dumping them returns
//! errors, never panics, and never loops forever.
use rand::{Rng, SeedableRng};
use testkit::*;
use ufs::{Fs, MountOptions};

/// A small image with a bit of everything, made by ufskit itself.
fn base_image(dir: &std::path::Path) -> Vec<u8> {
    let img = dir.join("base.img");
    let f = std::fs::File::create(&img).unwrap();
    f.set_len(8 << 20).unwrap();
    drop(f);
    let dev = ufs::dev::FileDevice::open(&img, true).unwrap();
    let p = ufs::newfs::NewfsParams {
        bsize: 4096,
        fsize: 512,
        seed: Some(7),
        time: Some(1),
        ..Default::default()
    };
    ufs::newfs::newfs(&dev, &p).unwrap();
    drop(dev);
    let src = dir.join("src");
    hostile_tree(&src, 300, false);
    let fs = Fs::open_path(
        &img,
        MountOptions {
            seed: Some(7),
            ..Default::default()
        },
    )
    .unwrap();
    copy_in(&fs, &src, fs.root());
    fs.unmount().unwrap();
    drop(fs);
    std::fs::read(&img).unwrap()
}

/// Opens and walks an image held in memory; returns whether it opened.
fn exercise(bytes: Vec<u8>) -> bool {
    let dev = ufs::dev::MemDevice::from_vec(bytes);
    let _ = ufs::dumpfs::dumpfs(&dev, true);
    let _ = ufs::dumpfs::newfs_command(&dev, "x");
    let fs = match Fs::open(
        Box::new(dev),
        MountOptions {
            read_only: true,
            force: true,
            ..Default::default()
        },
    ) {
        Ok(fs) => fs,
        Err(_) => return false,
    };
    // Walk with a budget so a directory loop cannot hang the test.
    let mut stack = vec![fs.root()];
    let mut budget = 20_000;
    while let Some(d) = stack.pop() {
        let mut cookie = 0;
        loop {
            budget -= 1;
            if budget == 0 {
                return true;
            }
            let Ok(ents) = fs.readdir(d, cookie, 64) else {
                break;
            };
            if ents.is_empty() {
                break;
            }
            cookie = ents.last().map(|e| e.next).unwrap_or(u64::MAX);
            for e in ents {
                if e.name == b"." || e.name == b".." {
                    continue;
                }
                if let Ok(a) = fs.getattr(e.ino) {
                    match a.kind {
                        ufs::FileKind::Dir => stack.push(e.ino),
                        ufs::FileKind::Symlink => {
                            let _ = fs.readlink(e.ino);
                        }
                        _ => {
                            let _ = fs.read(e.ino, 0, 1 << 16);
                            let _ = fs.read(e.ino, a.size.saturating_sub(100), 4096);
                        }
                    }
                }
            }
        }
    }
    true
}

#[test]
fn named_corruptions_fail_cleanly() {
    let t = tempfile::tempdir().unwrap();
    let base = base_image(t.path());
    let sb = 65536usize;
    let set = |img: &mut Vec<u8>, off: usize, v: &[u8]| img[off..off + v.len()].copy_from_slice(v);
    type Corruption = Box<dyn Fn(&mut Vec<u8>)>;
    let cases: Vec<(&str, Corruption)> = vec![
        (
            "bad magic",
            Box::new(move |i| set(i, sb + 1372, &[0, 0, 0, 0])),
        ),
        (
            "UFS1 magic",
            Box::new(move |i| set(i, sb + 1372, &0x011954u32.to_le_bytes())),
        ),
        (
            "big-endian",
            Box::new(move |i| set(i, sb + 1372, &0x19540119u32.to_be_bytes())),
        ),
        (
            "bsize 3000",
            Box::new(move |i| set(i, sb + 48, &3000i32.to_le_bytes())),
        ),
        (
            "fsize > bsize",
            Box::new(move |i| set(i, sb + 52, &65536i32.to_le_bytes())),
        ),
        (
            "ncg 0",
            Box::new(move |i| set(i, sb + 44, &0u32.to_le_bytes())),
        ),
        (
            "ncg huge",
            Box::new(move |i| set(i, sb + 44, &u32::MAX.to_le_bytes())),
        ),
        (
            "ipg 0",
            Box::new(move |i| set(i, sb + 184, &0u32.to_le_bytes())),
        ),
        (
            "fpg 1",
            Box::new(move |i| set(i, sb + 188, &1i32.to_le_bytes())),
        ),
        (
            "size huge",
            Box::new(move |i| set(i, sb + 1080, &i64::MAX.to_le_bytes())),
        ),
        (
            "csaddr outside",
            Box::new(move |i| set(i, sb + 1096, &(1i64 << 40).to_le_bytes())),
        ),
        (
            "cgsize 0",
            Box::new(move |i| set(i, sb + 160, &0i32.to_le_bytes())),
        ),
        (
            "wrong sb check-hash",
            Box::new(move |i| set(i, sb + 1304, &0xdeadbeefu32.to_le_bytes())),
        ),
        (
            "truncated image",
            Box::new(|i: &mut Vec<u8>| i.truncate(200_000)),
        ),
    ];
    for (name, f) in cases {
        let mut img = base.clone();
        f(&mut img);
        let opened = exercise(img);
        assert!(!opened, "{name}: a broken superblock must be refused");
    }
}

#[test]
fn random_metadata_mutations_never_panic() {
    let t = tempfile::tempdir().unwrap();
    let base = base_image(t.path());
    // Metadata regions: superblock, cylinder group 0 header/maps and inode
    // blocks, the first data blocks (directories live there).
    let regions: [(usize, usize); 3] = [
        (65536, 65536 + 1376),
        (65536 + 8192, 65536 + 8192 + 40_000),
        (65536 + 48_000, 65536 + 400_000),
    ];
    let mut rng = rand::rngs::StdRng::seed_from_u64(42);
    let mut opened = 0;
    for _ in 0..300 {
        let mut img = base.clone();
        for _ in 0..rng.gen_range(1..8) {
            let (a, b) = regions[rng.gen_range(0..regions.len())];
            let off = rng.gen_range(a..b.min(img.len()));
            img[off] = rng.gen();
        }
        if exercise(img) {
            opened += 1;
        }
    }
    assert!(opened > 0, "some mutations leave the superblock usable");
}
