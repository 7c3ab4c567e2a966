//! Per-operation cost against directory size, dirhash against linear: the
//! 2002 paper's Figures 2-6 (create, sequential remove, sequential stat,
//! random stat, stat of missing names), in-process on a memory device.
//!
//! Method: one directory grows through the sizes of a range; at each size
//! both modes are measured on the same directory: a batch of each
//! operation, with the directory restored after creates and removes so
//! every operation sees `n` entries. "stat" is the engine's lookup plus
//! inode read (what `stat(2)` costs below the kernel's name cache).
//! "remove" removes entries in directory order from the front and puts
//! them back untimed, as the paper's sequential removal does. The index
//! is built before the dirhash batch (its build cost is reported apart);
//! linear mode starts with no lookup hint. Besides wall time, each point
//! reports the directory entries examined per operation, a deterministic
//! measure of the work.
use crate::{fresh_fs, Progress};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use std::time::Instant;
use ufs::dir::dirhash::DirhashConfig;
use ufs::{Cred, Fs, Ino, MountOptions};

#[derive(Debug, Clone, Serialize)]
pub struct OpsConfig {
    /// Entry counts for the large range.
    pub large_sizes: Vec<u64>,
    /// Directory sizes in bytes for the small range (0 to 8 KB).
    pub small_bytes: Vec<u64>,
    /// Operations per batch.
    pub batch: u64,
    /// Dirhash budget (large enough for the largest directory).
    pub maxmem: u64,
    pub seed: u64,
}

impl OpsConfig {
    /// The full profile: 1,000 to 200,000 entries, 0 to 8 KB.
    pub fn full() -> OpsConfig {
        OpsConfig {
            large_sizes: vec![
                1000, 2000, 5000, 10_000, 20_000, 50_000, 100_000, 150_000, 200_000,
            ],
            small_bytes: (1..=16).map(|k| k * 512).collect(),
            batch: 400,
            maxmem: 32 << 20,
            seed: 1,
        }
    }
    /// A quick profile for CI and the demo.
    pub fn quick() -> OpsConfig {
        OpsConfig {
            large_sizes: vec![1000, 5000, 20_000, 50_000],
            small_bytes: vec![512, 1024, 2048, 4096, 8192],
            batch: 100,
            maxmem: 32 << 20,
            seed: 1,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Point {
    pub mode: &'static str,
    pub range: &'static str,
    pub entries: u64,
    pub dir_bytes: u64,
    pub op: &'static str,
    pub ops: u64,
    pub us_per_op: f64,
    pub entries_scanned_per_op: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct MemPoint {
    pub entries: u64,
    pub dir_bytes: u64,
    pub hash_bytes: u64,
    pub bytes_per_dir_byte: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct BuildPoint {
    pub entries: u64,
    pub dir_bytes: u64,
    pub us: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct OpsReport {
    pub config: OpsConfig,
    pub points: Vec<Point>,
    pub memory: Vec<MemPoint>,
    pub build: Vec<BuildPoint>,
    /// Every image was fsck clean at the end.
    pub fsck_clean: bool,
}

impl OpsReport {
    /// Microseconds per op for one point, if measured.
    pub fn cost(&self, mode: &str, range: &str, entries: u64, op: &str) -> Option<f64> {
        self.points
            .iter()
            .find(|p| p.mode == mode && p.range == range && p.entries == entries && p.op == op)
            .map(|p| p.us_per_op)
    }
}

const R: Cred = Cred::ROOT;
pub const OPS: [&str; 5] = [
    "create",
    "remove",
    "stat_seq",
    "stat_random",
    "stat_missing",
];

fn fname(i: u64) -> Vec<u8> {
    format!("f{i:08}").into_bytes()
}

struct Dir<'a> {
    fs: &'a Fs,
    ino: Ino,
    /// Names in directory order.
    names: Vec<Vec<u8>>,
    next: u64,
}

impl Dir<'_> {
    fn grow_to(&mut self, n: u64) -> ufs::Result<()> {
        while (self.names.len() as u64) < n {
            let name = fname(self.next);
            self.next += 1;
            self.fs.mknod(self.ino, &name, 0o100644, 0, R)?;
            self.names.push(name);
        }
        Ok(())
    }
    fn bytes(&self) -> u64 {
        self.fs.getattr(self.ino).map(|a| a.size).unwrap_or(0)
    }
}

fn scanned(fs: &Fs) -> u64 {
    fs.dirhash().stats.entries_scanned
}

/// Sets the mode: dirhash on (index built now, build time returned) or
/// linear (indexes and lookup hints dropped).
fn set_mode(fs: &Fs, dir: Ino, hashed: bool, minsize: u64) -> ufs::Result<Option<f64>> {
    fs.drop_directory_indexes();
    fs.tune_dirhash(|c| {
        c.enabled = hashed;
        c.minsize = minsize;
    });
    if !hashed {
        return Ok(None);
    }
    let t = Instant::now();
    let _ = fs.lookup(dir, b"no such name, builds the index");
    Ok(Some(t.elapsed().as_secs_f64() * 1e6))
}

/// Runs `op` on every item of `batch` under one timer: `(microseconds per
/// operation, directory entries scanned per operation, operations)`, all 0
/// for an empty batch.
fn timed<T, R>(
    fs: &Fs,
    batch: &[T],
    mut op: impl FnMut(&T) -> ufs::Result<R>,
) -> ufs::Result<(f64, f64, u64)> {
    let before = scanned(fs);
    let t = Instant::now();
    for item in batch {
        op(item)?;
    }
    let secs = t.elapsed().as_secs_f64();
    let ops = batch.len() as u64;
    if ops == 0 {
        return Ok((0.0, 0.0, 0));
    }
    Ok((
        secs * 1e6 / ops as f64,
        (scanned(fs) - before) as f64 / ops as f64,
        ops,
    ))
}

/// One timed batch of `op` on `d`; creates and removes are undone after
/// the batch, untimed, so the directory keeps its `n` entries.
fn measure(
    d: &mut Dir<'_>,
    op: &'static str,
    batch: u64,
    rng: &mut rand::rngs::StdRng,
) -> ufs::Result<(f64, f64, u64)> {
    let (fs, ino) = (d.fs, d.ino);
    let n = d.names.len() as u64;
    match op {
        "create" => {
            let names: Vec<Vec<u8>> = (0..batch)
                .map(|k| format!("c{k:08}").into_bytes())
                .collect();
            let r = timed(fs, &names, |name| fs.mknod(ino, name, 0o100644, 0, R))?;
            for name in &names {
                fs.unlink(ino, name)?;
            }
            Ok(r)
        }
        "remove" => {
            let victims: Vec<Vec<u8>> = d.names[..batch.min(n) as usize].to_vec();
            let r = timed(fs, &victims, |name| fs.unlink(ino, name))?;
            for name in &victims {
                fs.mknod(ino, name, 0o100644, 0, R)?;
            }
            Ok(r)
        }
        "stat_seq" => {
            let k = batch.min(n);
            let start = if n > 0 {
                rng.gen_range(0..=n - k) as usize
            } else {
                0
            };
            timed(fs, &d.names[start..start + k as usize], |name| {
                fs.lookup(ino, name)
            })
        }
        "stat_random" => {
            let names: Vec<&Vec<u8>> = if n > 0 {
                (0..batch)
                    .map(|_| d.names.choose(rng).expect("nonempty"))
                    .collect()
            } else {
                Vec::new()
            };
            timed(fs, &names, |name| fs.lookup(ino, name))
        }
        "stat_missing" => {
            let names: Vec<Vec<u8>> = (0..batch)
                .map(|k| format!("m{k:08}").into_bytes())
                .collect();
            timed(fs, &names, |name| match fs.lookup(ino, name) {
                Ok(_) => Err(ufs::Error::new(
                    ufs::ErrorKind::Invalid,
                    "missing name found",
                )),
                Err(_) => Ok(()),
            })
        }
        _ => unreachable!("unknown op {op}"),
    }
}

fn fsck_clean(dev: &std::sync::Arc<ufs::dev::MemDevice>, fs: Fs) -> ufs::Result<bool> {
    fs.unmount()?;
    let snap = ufs::dev::MemDevice::from_vec(dev.snapshot());
    Ok(ufs::fsck::fsck(&snap, ufs::fsck::FsckMode::Check)?
        .findings
        .is_empty())
}

/// Runs both ranges; `progress` hears about every size point.
pub fn run(cfg: &OpsConfig, progress: Progress) -> ufs::Result<OpsReport> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(cfg.seed);
    let mut points = Vec::new();
    let mut memory = Vec::new();
    let mut build = Vec::new();
    let total = (cfg.large_sizes.len() + cfg.small_bytes.len()) as u64;
    let mut done = 0;
    let mut clean = true;
    let dh = DirhashConfig {
        maxmem: cfg.maxmem,
        ..Default::default()
    };
    let opts = MountOptions {
        dirhash: dh,
        cache_bytes: 256 << 20,
        // Measured with every write delayed (the write modes are compared
        // by `bench writeorder`).
        write_mode: Some(ufs::order::WriteMode::Async),
        ..Default::default()
    };

    // Large range: default threshold (every size is above it).
    {
        let largest = cfg.large_sizes.iter().copied().max().unwrap_or(0);
        // Two inodes per entry, with room to spare.
        let bytes = (largest * 4096 + (64 << 20)).max(128 << 20);
        let (dev, fs) = fresh_fs(bytes, 2048, opts.clone())?;
        let ino = fs.mkdir(fs.root(), b"big", 0o755, R)?.ino;
        let mut d = Dir {
            fs: &fs,
            ino,
            names: Vec::new(),
            next: 0,
        };
        let mut sizes = cfg.large_sizes.clone();
        sizes.sort_unstable();
        for &n in &sizes {
            progress(done, total, &format!("large directory: {n} entries"));
            fs.tune_dirhash(|c| c.enabled = true);
            d.grow_to(n)?;
            for hashed in [true, false] {
                let b = set_mode(&fs, ino, hashed, 2560)?;
                let dir_bytes = d.bytes();
                if let Some(us) = b {
                    build.push(BuildPoint {
                        entries: n,
                        dir_bytes,
                        us,
                    });
                    if let Some((mem, dbytes, _)) = fs.dirhash_index(ino) {
                        memory.push(MemPoint {
                            entries: n,
                            dir_bytes: dbytes,
                            hash_bytes: mem,
                            bytes_per_dir_byte: mem as f64 / dbytes as f64,
                        });
                    }
                }
                for op in OPS {
                    let (us, sc, ops) = measure(&mut d, op, cfg.batch, &mut rng)?;
                    points.push(Point {
                        mode: if hashed { "dirhash" } else { "linear" },
                        range: "large",
                        entries: n,
                        dir_bytes,
                        op,
                        ops,
                        us_per_op: us,
                        entries_scanned_per_op: sc,
                    });
                }
            }
            done += 1;
        }
        fs.tune_dirhash(|c| c.enabled = true);
        clean &= fsck_clean(&dev, fs)?;
    }

    // Small range: every directory hashed, as in the paper's test.
    {
        let (dev, fs) = fresh_fs(64 << 20, 4096, opts)?;
        let ino = fs.mkdir(fs.root(), b"small", 0o755, R)?.ino;
        let mut d = Dir {
            fs: &fs,
            ino,
            names: Vec::new(),
            next: 0,
        };
        // "f%08d" entries take 20 bytes: 25 per chunk, the first chunk
        // holds "." and "..".
        let per_chunk = 512 / ufs_format::dir::dirsiz(9) as u64;
        let mut sizes = cfg.small_bytes.clone();
        sizes.sort_unstable();
        for &bytes in &sizes {
            let n = (bytes / 512 * per_chunk).saturating_sub(2);
            progress(done, total, &format!("small directory: {bytes} bytes"));
            fs.tune_dirhash(|c| c.enabled = true);
            d.grow_to(n)?;
            for hashed in [true, false] {
                set_mode(&fs, ino, hashed, 0)?;
                let dir_bytes = d.bytes();
                for op in OPS {
                    let (us, sc, ops) = measure(&mut d, op, cfg.batch.min(n.max(1) * 4), &mut rng)?;
                    points.push(Point {
                        mode: if hashed { "dirhash" } else { "linear" },
                        range: "small",
                        entries: n,
                        dir_bytes,
                        op,
                        ops,
                        us_per_op: us,
                        entries_scanned_per_op: sc,
                    });
                }
            }
            done += 1;
        }
        clean &= fsck_clean(&dev, fs)?;
    }
    progress(total, total, "done");
    Ok(OpsReport {
        config: cfg.clone(),
        points,
        memory,
        build,
        fsck_clean: clean,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The work per operation is deterministic: linear lookups examine
    /// entries in proportion to the directory, hashed ones a constant few.
    #[test]
    fn linear_grows_and_dirhash_stays_flat() {
        let cfg = OpsConfig {
            large_sizes: vec![2000, 20_000],
            small_bytes: vec![1024, 4096],
            batch: 50,
            maxmem: 32 << 20,
            seed: 3,
        };
        let r = run(&cfg, &mut |_, _, _| {}).unwrap();
        assert!(r.fsck_clean);
        let scan = |mode: &str, n: u64, op: &str| {
            r.points
                .iter()
                .find(|p| p.mode == mode && p.range == "large" && p.entries == n && p.op == op)
                .unwrap()
                .entries_scanned_per_op
        };
        for op in ["create", "stat_random", "stat_missing"] {
            assert!(
                scan("linear", 20_000, op) > 5.0 * scan("linear", 2000, op),
                "{op}"
            );
            assert!(
                scan("dirhash", 20_000, op) < 1.0,
                "{op}: {}",
                scan("dirhash", 20_000, op)
            );
        }
        // About 0.51 bytes per directory byte; the fixed part and whole
        // 256-slot arrays weigh more in small directories.
        assert!(
            r.memory
                .iter()
                .all(|m| m.dir_bytes < 100_000 || (0.49..0.53).contains(&m.bytes_per_dir_byte)),
            "{:?}",
            r.memory
        );
        assert!(
            r.memory
                .iter()
                .all(|m| (0.49..0.6).contains(&m.bytes_per_dir_byte)),
            "{:?}",
            r.memory
        );
        assert_eq!(r.points.len(), 2 * 2 * 2 * OPS.len());
    }
}
