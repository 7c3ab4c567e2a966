//! File trees to extract and remove: deterministic generators shaped like
//! the OpenBSD 2.8 ports collection of seed `000_*` (6,596 directories,
//! 13,868 files) and like the X11 sources of seed `004_*`'s tar test (930
//! directories, 11,585 files, [`x11_tree`]), and real trees read from the
//! host.
//!
//! Invariants: entries are in archive order (a directory before anything
//! inside it, depth first, as `tar` writes them); every path is relative,
//! `/`-separated, and its parent appears earlier; the generator gives the
//! same tree for the same seed.
//!
//! The ports shape (documented in docs/LAYOUT.md): a root with a Makefile,
//! 40 categories (Zipf-like share of ports, each with a Makefile), 1,800
//! ports. Every port has a Makefile, `pkg/` with COMMENT, DESCR and PLIST,
//! and `files/md5` (the 2.8 layout); 1,155 of them also have `patches/`
//! holding the remaining 4,827 patch files (at least one each). That gives
//! 1 + 40 + 1,800 × 3 + 1,155 = 6,596 directories and 41 + 1,800 × 5 +
//! 4,827 = 13,868 files. Sizes are log-normal around what such files hold:
//! Makefile median 1.2 KB, COMMENT 60 B, DESCR 600 B, PLIST 400 B with a
//! long tail, md5 150 B, patches 1.1 KB, each capped at 64 KB; about 14 MB
//! in all, mostly fragments rather than full blocks, as in the real tree.
use rand::distributions::{Distribution, WeightedIndex};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::path::Path;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    Dir,
    File(u64),
}

#[derive(Debug, Clone)]
pub struct Entry {
    pub path: String,
    pub kind: Kind,
}

#[derive(Debug, Clone, Default)]
pub struct Tree {
    pub entries: Vec<Entry>,
}

impl Tree {
    pub fn dirs(&self) -> usize {
        self.entries.iter().filter(|e| e.kind == Kind::Dir).count()
    }
    pub fn files(&self) -> usize {
        self.entries.len() - self.dirs()
    }
    pub fn bytes(&self) -> u64 {
        self.entries
            .iter()
            .map(|e| if let Kind::File(n) = e.kind { n } else { 0 })
            .sum()
    }
}

/// A log-normal draw around `median` with spread `sigma`, by Box-Muller
/// from two uniforms: deterministic with a seeded generator.
pub fn lognormal(rng: &mut StdRng, median: f64, sigma: f64) -> f64 {
    let (u1, u2): (f64, f64) = (rng.gen_range(f64::EPSILON..1.0), rng.gen());
    let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
    median * (sigma * z).exp()
}

/// Log-normal size with the given median and spread, in [1, 64 KiB].
fn size(rng: &mut StdRng, median: f64, sigma: f64) -> u64 {
    lognormal(rng, median, sigma).round().clamp(1.0, 65536.0) as u64
}

pub const PORTS_DIRS: usize = 6_596;
pub const PORTS_FILES: usize = 13_868;

/// The ports-like tree, rooted at `ports/`.
pub fn ports_tree(seed: u64) -> Tree {
    const CATEGORIES: usize = 40;
    const PORTS: usize = 1_800;
    const WITH_PATCHES: usize = 1_155;
    const PATCHES: usize = 4_827;
    let mut rng = StdRng::seed_from_u64(seed);
    // Ports per category: Zipf-like weights, rounded, remainder to the first.
    let w: Vec<f64> = (0..CATEGORIES)
        .map(|i| 1.0 / ((i + 1) as f64).powf(0.8))
        .collect();
    let total: f64 = w.iter().sum();
    let mut per_cat: Vec<usize> = w
        .iter()
        .map(|x| ((x / total) * PORTS as f64).floor().max(1.0) as usize)
        .collect();
    let given: usize = per_cat.iter().sum();
    per_cat[0] += PORTS - given;
    // Which ports have patches, and how many: one each, the rest spread
    // with a geometric-like tail.
    let mut has_patches = vec![false; PORTS];
    let mut order: Vec<usize> = (0..PORTS).collect();
    for i in (1..PORTS).rev() {
        order.swap(i, rng.gen_range(0..=i));
    }
    for &p in &order[..WITH_PATCHES] {
        has_patches[p] = true;
    }
    let mut npatch = vec![0usize; PORTS];
    for &p in &order[..WITH_PATCHES] {
        npatch[p] = 1;
    }
    let mut left = PATCHES - WITH_PATCHES;
    while left > 0 {
        let p = order[(rng.gen::<f64>().powi(2) * WITH_PATCHES as f64) as usize % WITH_PATCHES];
        npatch[p] += 1;
        left -= 1;
    }
    let mut t = Tree::default();
    let mut push = |path: String, kind: Kind| t.entries.push(Entry { path, kind });
    push("ports".into(), Kind::Dir);
    push(
        "ports/Makefile".into(),
        Kind::File(size(&mut rng, 1200.0, 0.4)),
    );
    let mut port = 0;
    for (c, &n) in per_cat.iter().enumerate() {
        let cat = format!("ports/cat{c:02}");
        push(cat.clone(), Kind::Dir);
        push(
            format!("{cat}/Makefile"),
            Kind::File(size(&mut rng, 2000.0, 0.6)),
        );
        for _ in 0..n {
            let p = format!("{cat}/port{port:04}");
            push(p.clone(), Kind::Dir);
            push(
                format!("{p}/Makefile"),
                Kind::File(size(&mut rng, 1200.0, 0.5)),
            );
            push(format!("{p}/files"), Kind::Dir);
            push(
                format!("{p}/files/md5"),
                Kind::File(size(&mut rng, 150.0, 0.3)),
            );
            if has_patches[port] {
                push(format!("{p}/patches"), Kind::Dir);
                for k in 0..npatch[port] {
                    push(
                        format!("{p}/patches/patch-{k:03}"),
                        Kind::File(size(&mut rng, 1100.0, 1.0)),
                    );
                }
            }
            push(format!("{p}/pkg"), Kind::Dir);
            push(
                format!("{p}/pkg/COMMENT"),
                Kind::File(size(&mut rng, 60.0, 0.3)),
            );
            push(
                format!("{p}/pkg/DESCR"),
                Kind::File(size(&mut rng, 600.0, 0.5)),
            );
            push(
                format!("{p}/pkg/PLIST"),
                Kind::File(size(&mut rng, 400.0, 1.2)),
            );
            port += 1;
        }
    }
    t
}

pub const X11_DIRS: usize = 930;
pub const X11_FILES: usize = 11_585;

/// Directories at each depth of the X11-shaped tree, the root first.
const X11_DEPTHS: [usize; 10] = [1, 7, 177, 178, 174, 157, 152, 69, 11, 4];

/// A tree shaped like the X11 sources the paper's tar test extracted
/// (XFree86's `xc`, the first source archive: `fonts` and `doc` left
/// out), rooted at `xc/`: 930 directories nine deep at most, 11,585 files
/// of about 133 MB (the listing: 140 MB). The counts, the directories per
/// depth and the distributions are those of XFree86 4.3.0's `xc` listing
/// (docs/EVALUATION.md, "The tar tree"); names and sizes are generated.
/// - Each directory of depth d hangs under one of depth d-1, chosen with
///   Zipf-like weights (1/rank^1.3 over a shuffled order): most are leaves
///   (about 710 of 930, as in `xc`), a few hold dozens (`lib`, `programs`).
/// - Files per directory are log-normal around 4.5 (spread 1.3: 90% of
///   directories hold at most about 25, a few hundreds), adjusted at
///   random to the exact total.
/// - File sizes are log-normal around 3,850 bytes (spread 1.5: a tenth
///   under 560 bytes, a tenth over 26 KB, a hundredth over 120 KB), at
///   most 2.4 MB; names are 10 characters, directories' 6, as the
///   listing's medians.
pub fn x11_tree(seed: u64) -> Tree {
    let mut rng = StdRng::seed_from_u64(seed);
    // children[i]: the subdirectories of directory i (0 is the root), in
    // creation order.
    let mut children: Vec<Vec<usize>> = vec![Vec::new()];
    let mut level = vec![0usize];
    for &n in &X11_DEPTHS[1..] {
        let mut parents = level.clone();
        for i in (1..parents.len()).rev() {
            parents.swap(i, rng.gen_range(0..=i));
        }
        let zipf = WeightedIndex::new((0..parents.len()).map(|r| 1.0 / ((r + 1) as f64).powf(1.3)))
            .expect("every level above the last has directories");
        let mut next = Vec::with_capacity(n);
        for _ in 0..n {
            let k = zipf.sample(&mut rng);
            let id = children.len();
            children.push(Vec::new());
            children[parents[k]].push(id);
            next.push(id);
        }
        level = next;
    }
    debug_assert_eq!(children.len(), X11_DIRS);
    let mut files: Vec<usize> = (0..X11_DIRS)
        .map(|_| lognormal(&mut rng, 4.5, 1.3).round().clamp(0.0, 1000.0) as usize)
        .collect();
    let mut given: usize = files.iter().sum();
    while given != X11_FILES {
        let d = rng.gen_range(0..X11_DIRS);
        if given < X11_FILES {
            files[d] += 1;
            given += 1;
        } else if files[d] > 0 {
            files[d] -= 1;
            given -= 1;
        }
    }
    let mut t = Tree::default();
    let mut file_no = 0usize;
    // Depth first, a directory's files before its subdirectories.
    let mut stack = vec![(0usize, "xc".to_string())];
    while let Some((d, path)) = stack.pop() {
        t.entries.push(Entry {
            path: path.clone(),
            kind: Kind::Dir,
        });
        for _ in 0..files[d] {
            let n = lognormal(&mut rng, 3850.0, 1.5).round().clamp(1.0, 2.4e6) as u64;
            t.entries.push(Entry {
                path: format!("{path}/src{file_no:05}.c"),
                kind: Kind::File(n),
            });
            file_no += 1;
        }
        for &c in children[d].iter().rev() {
            stack.push((c, format!("{path}/dir{c:03}")));
        }
    }
    t
}

/// A real tree from the host (directories and regular files; other kinds
/// are skipped), rooted at the last component of `root`, in `tar` order
/// (readdir order sorted by name, so runs are repeatable).
pub fn host_tree(root: &Path) -> std::io::Result<Tree> {
    let base = root
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("tree")
        .to_string();
    let mut t = Tree::default();
    t.entries.push(Entry {
        path: base.clone(),
        kind: Kind::Dir,
    });
    walk(root, &base, &mut t)?;
    Ok(t)
}

fn walk(dir: &Path, rel: &str, t: &mut Tree) -> std::io::Result<()> {
    let mut names: Vec<_> = std::fs::read_dir(dir)?.filter_map(|e| e.ok()).collect();
    names.sort_by_key(|e| e.file_name());
    for e in names {
        let Some(name) = e.file_name().to_str().map(str::to_string) else {
            continue;
        };
        let ft = e.file_type()?;
        let path = format!("{rel}/{name}");
        if ft.is_dir() {
            t.entries.push(Entry {
                path: path.clone(),
                kind: Kind::Dir,
            });
            walk(&e.path(), &path, t)?;
        } else if ft.is_file() {
            t.entries.push(Entry {
                path,
                kind: Kind::File(e.metadata()?.len()),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks what every generated tree promises: `dirs` and `files`
    /// entries, `mb` megabytes in all, the same tree from `again` (the
    /// same seed), and archive order (every parent before what it holds).
    /// Returns the directories' depths and subdirectory counts.
    fn generated(
        t: &Tree,
        again: &Tree,
        (dirs, files): (usize, usize),
        mb: std::ops::Range<f64>,
    ) -> (Vec<usize>, std::collections::HashMap<String, usize>) {
        assert_eq!((t.dirs(), t.files()), (dirs, files));
        let got = t.bytes() as f64 / 1e6;
        assert!(mb.contains(&got), "{got} MB");
        assert!(t
            .entries
            .iter()
            .zip(&again.entries)
            .all(|(a, b)| a.path == b.path && a.kind == b.kind));
        let mut seen = std::collections::HashSet::new();
        let mut depths = Vec::new();
        let mut subdirs = std::collections::HashMap::new();
        for e in &t.entries {
            if let Some((parent, _)) = e.path.rsplit_once('/') {
                assert!(seen.contains(parent), "{} before its parent", e.path);
                if e.kind == Kind::Dir {
                    *subdirs.entry(parent.to_string()).or_default() += 1;
                }
            }
            if e.kind == Kind::Dir {
                seen.insert(e.path.clone());
                let d = e.path.matches('/').count();
                if depths.len() <= d {
                    depths.resize(d + 1, 0);
                }
                depths[d] += 1;
            }
        }
        (depths, subdirs)
    }

    #[test]
    fn ports_tree_has_the_seeds_counts_and_is_deterministic() {
        let counts = (PORTS_DIRS, PORTS_FILES);
        generated(&ports_tree(7), &ports_tree(7), counts, 10.0..60.0);
    }

    #[test]
    fn x11_tree_has_the_listings_shape_and_is_deterministic() {
        let counts = (X11_DIRS, X11_FILES);
        let (depths, subdirs) = generated(&x11_tree(1), &x11_tree(1), counts, 100.0..200.0);
        assert_eq!(depths, X11_DEPTHS);
        // Mostly leaves, a few wide directories, as in `xc` (708 of 930
        // leaves, the widest with 94 subdirectories).
        let leaves = X11_DIRS - subdirs.len();
        assert!((600..800).contains(&leaves), "{leaves} leaves");
        let widest = subdirs.values().copied().max().unwrap();
        assert!((40..200).contains(&widest), "widest {widest}");
    }

    #[test]
    fn host_tree_reads_a_real_directory() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("a")).unwrap();
        std::fs::write(d.path().join("a/x"), b"hello").unwrap();
        std::fs::write(d.path().join("b"), b"").unwrap();
        let t = host_tree(d.path()).unwrap();
        assert_eq!(t.dirs(), 2);
        assert_eq!(t.files(), 2);
        assert_eq!(t.bytes(), 5);
    }
}
