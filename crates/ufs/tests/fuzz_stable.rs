//! The fuzz targets (`ufs::fuzz`) on stable Rust, in every test run: a
//! corpus of real structures (superblocks, cylinder groups, directory
//! blocks and inodes of every variant, partition tables of each kind, the
//! fsck image's metadata regions), each replayed, then mutated with a
//! seeded generator (bit flips, bytes set to edge values, 16/32/64-bit
//! fields set to their limits, splices of two inputs, truncation) for a
//! bounded time per target. A panic fails the test with the input saved
//! under the target directory's `fuzz-failures/` and its bytes in hex, so
//! it can be replayed (and added to `fuzz/`'s corpus for libFuzzer).
//!
//! UFSKIT_FUZZ_SECS sets the seconds per target (default 4; the docs give
//! the counts a run reaches); UFSKIT_FUZZ_SEED the generator's seed.
use rand::{Rng, SeedableRng};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};
use ufs::dev::{BlockDevice, MemDevice};
use ufs_format::{Endian, Ufs, Variant};

fn budget() -> Duration {
    let secs = std::env::var("UFSKIT_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(4.0);
    Duration::from_secs_f64(secs)
}

fn seed() -> u64 {
    std::env::var("UFSKIT_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed)
}

/// A fresh image of each variant (4 KiB blocks, 512-byte fragments), as
/// bytes.
fn images() -> Vec<(Variant, Vec<u8>)> {
    let mut out = Vec::new();
    for (f, e) in [
        (Ufs::Ufs2, Endian::Little),
        (Ufs::Ufs2, Endian::Big),
        (Ufs::Ufs1, Endian::Little),
        (Ufs::Ufs1, Endian::Big),
    ] {
        let dev = MemDevice::new(4 << 20);
        let p = ufs::newfs::NewfsParams {
            bsize: 4096,
            fsize: 512,
            format: f,
            endian: e,
            seed: Some(1),
            time: Some(1),
            ..Default::default()
        };
        ufs::newfs::newfs(&dev, &p).unwrap();
        out.push((Variant::new(f, e), dev.snapshot()));
    }
    out
}

/// Superblocks, the first cylinder group, the root directory block and
/// the first inode block of every variant.
fn structure_corpus() -> Vec<Vec<u8>> {
    let mut c = Vec::new();
    for (_, img) in images() {
        let dev = MemDevice::from_vec(img.clone());
        let (_, g, loc) = ufs::fs::read_superblock(&dev).unwrap();
        let at = |off: u64, n: u64| img[off as usize..(off + n) as usize].to_vec();
        c.push(at(loc, 8192));
        c.push(at(g.cgtod(0) * g.fsize, g.cgsize));
        c.push(at(g.cgimin(0) * g.fsize, g.bsize));
        // The root directory's block: the first data fragment after the
        // summary area.
        c.push(at((g.csaddr + g.cssize.div_ceil(g.fsize)) * g.fsize, 512));
    }
    c
}

/// Patches for the fsck image: each metadata region of the base image
/// (superblock, group block, inode block, root directory), with its own
/// bytes as the patch, so a mutation lands on live structure.
fn fsck_corpus() -> Vec<Vec<u8>> {
    let base = ufs::fuzz::fsck_base();
    let dev = MemDevice::from_vec(base.clone());
    let (_, g, loc) = ufs::fs::read_superblock(&dev).unwrap();
    let mut c = Vec::new();
    for (off, n) in [
        (loc, 1536),
        (g.cgtod(0) * g.fsize, g.cgsize),
        (g.cgimin(0) * g.fsize, 1024),
        ((g.csaddr + g.cssize.div_ceil(g.fsize)) * g.fsize, 512),
        (g.cgtod(g.ncg - 1) * g.fsize, g.cgsize),
    ] {
        let mut v = (off as u32).to_le_bytes().to_vec();
        v.extend_from_slice(&base[off as usize..(off + n) as usize]);
        c.push(v);
    }
    c
}

/// The first 64 KiB of disks with each kind of table: a BSD disklabel in
/// either byte order, an MBR with a FreeBSD slice holding a disklabel.
fn partition_corpus() -> Vec<Vec<u8>> {
    let mut c = Vec::new();
    for e in [Endian::Little, Endian::Big] {
        let dev = MemDevice::new(1 << 20);
        ufs::dev::partition::write_disklabel_in(e, &dev, 0, 1 << 20, &[(0, 64, 1024, 7)]).unwrap();
        c.push(dev.snapshot()[..64 << 10].to_vec());
    }
    // An MBR: one FreeBSD slice (type 0xa5) from sector 63, with a label in
    // its second sector.
    let dev = MemDevice::new(1 << 20);
    let mut mbr = vec![0u8; 512];
    let e = 446;
    mbr[e + 4] = 0xa5;
    mbr[e + 8..e + 12].copy_from_slice(&63u32.to_le_bytes());
    mbr[e + 12..e + 16].copy_from_slice(&1900u32.to_le_bytes());
    mbr[510] = 0x55;
    mbr[511] = 0xaa;
    dev.write_at(0, &mbr).unwrap();
    ufs::dev::partition::write_disklabel_in(
        Endian::Little,
        &dev,
        63 * 512,
        1900 * 512,
        &[(0, 16, 1800, 7)],
    )
    .unwrap();
    c.push(dev.snapshot()[..64 << 10].to_vec());
    c
}

/// One mutation of `v` (another corpus input for splices).
fn mutate(rng: &mut rand::rngs::StdRng, v: &mut Vec<u8>, other: &[u8]) {
    if v.is_empty() {
        v.push(rng.gen());
        return;
    }
    let n = rng.gen_range(1..=8);
    for _ in 0..n {
        let i = rng.gen_range(0..v.len());
        match rng.gen_range(0..7) {
            0 => v[i] ^= 1 << rng.gen_range(0..8),
            1 => v[i] = [0, 1, 0x7f, 0x80, 0xff][rng.gen_range(0..5)],
            2 => {
                // A 16, 32 or 64-bit field to an edge value.
                let w = [2usize, 4, 8][rng.gen_range(0..3)];
                if i + w <= v.len() {
                    let edge: u64 =
                        [0, 1, u64::MAX, i64::MAX as u64, 1 << 31, 0x8000][rng.gen_range(0..6)];
                    let bytes = if rng.gen() {
                        edge.to_le_bytes()
                    } else {
                        edge.to_be_bytes()
                    };
                    v[i..i + w].copy_from_slice(&bytes[..w]);
                }
            }
            3 => v[i] = rng.gen(),
            4 if !other.is_empty() => {
                // Splice a run of another input in.
                let j = rng.gen_range(0..other.len());
                let len = rng.gen_range(1..=64).min(other.len() - j).min(v.len() - i);
                v[i..i + len].copy_from_slice(&other[j..j + len]);
            }
            5 if rng.gen_ratio(1, 8) => v.truncate(i.max(1)),
            _ => {
                let len = rng.gen_range(1..=32).min(v.len() - i);
                v[i..i + len].fill(rng.gen());
            }
        }
    }
}

/// Replays `corpus` through `target`, then mutates for the budget. Returns
/// how many inputs ran; panics (after saving the input) on a failure.
fn run(name: &str, corpus: &[Vec<u8>], target: fn(&[u8])) -> u64 {
    let save = |input: &[u8], why: String| -> ! {
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz-failures");
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join(format!("{name}-{:016x}", testkit::hash(input)));
        let _ = std::fs::write(&path, input);
        let hex: String = input.iter().take(256).map(|b| format!("{b:02x}")).collect();
        let msg = format!(
            "fuzz target {name} failed: {why}\ninput saved at {} ({} bytes; first 256 in hex: {hex})",
            path.display(),
            input.len()
        );
        // Said here: the panic hook is quiet (below).
        eprintln!("{msg}");
        panic!("{msg}");
    };
    let once = |input: &[u8]| {
        if let Err(p) = catch_unwind(AssertUnwindSafe(|| target(input))) {
            let why = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            save(input, why);
        }
    };
    // Panics caught on purpose (ours, and those the partition probe
    // catches from the MBR crate it uses) would each print a backtrace:
    // the hook stays quiet, and a failure is said by `save`.
    static QUIET: std::sync::Once = std::sync::Once::new();
    QUIET.call_once(|| std::panic::set_hook(Box::new(|_| {})));
    let mut n = 0u64;
    for c in corpus {
        once(c);
        n += 1;
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed() ^ testkit::hash(name.as_bytes()));
    let start = Instant::now();
    while start.elapsed() < budget() {
        let mut v = corpus[rng.gen_range(0..corpus.len())].clone();
        let other = &corpus[rng.gen_range(0..corpus.len())];
        // A few rounds of mutation on the same input, each tried.
        for _ in 0..rng.gen_range(1..4) {
            mutate(&mut rng, &mut v, other);
            once(&v);
            n += 1;
        }
    }
    eprintln!(
        "fuzz {name}: {n} inputs in {:.1} s, no failure",
        start.elapsed().as_secs_f64()
    );
    n
}

#[test]
fn parse_structures_survives_its_corpus_and_mutations() {
    let n = run(
        "parse_structures",
        &structure_corpus(),
        ufs::fuzz::parse_structures,
    );
    assert!(n > 16);
}

#[test]
fn fsck_image_survives_its_corpus_and_mutations() {
    let n = run("fsck_image", &fsck_corpus(), ufs::fuzz::fsck_image);
    assert!(n > 5);
}

#[test]
fn partition_table_survives_its_corpus_and_mutations() {
    let n = run(
        "partition_table",
        &partition_corpus(),
        ufs::fuzz::partition_table,
    );
    assert!(n > 3);
}
