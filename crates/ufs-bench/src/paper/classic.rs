//! The paper's testimonial workloads and Postmark:
//! - `tar`: extract a tree ([`super::TarTree`]: by default one shaped like
//!   the X11 sources the paper used) in archive order (`tar-extract`), a
//!   `find -print` that reads every directory and looks up every entry
//!   (`tar-find`), then `rm -rf` of it (`tar-remove`);
//! - `folder`: the MH folder, the messages of a 12-year-old inbox created
//!   in ascending order with their gaps (`folder-create`), `folder -pack`
//!   (`folder-pack`), `rm -rf` (`folder-remove`), with the generator and
//!   code of [`crate::writeorder`];
//! - `postmark`: Postmark 1.13's shape, once per configured size
//!   (`postmark-10k`, `postmark-20k` at the paper's sizes): a pool of files
//!   of 500 B to 10 KB in 10 subdirectories, then transactions each pairing
//!   a create or a delete with a read or an append, then the removal of
//!   everything, timed as one test as Postmark's total time.
//!
//! Invariants: each workload checks what it left (entry counts, names 1..N
//! after the pack, nothing left after a removal) and fails otherwise.
use super::meter::Meter;
use super::{invalid, Profile};
use crate::tree::{Kind, Tree};
use crate::writeorder;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use ufs::{Cred, Fs, Ino};

pub(super) const TAR_TESTS: &[&str] = &["tar-extract", "tar-find", "tar-remove"];
pub(super) const FOLDER_TESTS: &[&str] = &["folder-create", "folder-pack", "folder-remove"];
pub(super) const POSTMARK_TESTS: &[&str] = &["postmark-10k", "postmark-20k"];

/// The tree of the `tar` workload for `p`.
pub fn tar_tree(p: &Profile) -> Tree {
    let mut t = p.tar_tree.tree(p.seed);
    if let Some(n) = p.tree_entries {
        t.entries.truncate(n);
    }
    t
}

/// `find -print`: every directory read, every entry looked up; returns the
/// entries seen below `dir`. In fts(3)'s order, as FreeBSD's find walks:
/// a directory is read and each of its entries looked up (`fts_build`)
/// before the walk goes down into its subdirectories, which it then
/// enters by the names just looked up (the name cache), not by reading
/// the directory's blocks again.
pub(super) fn find(fs: &Fs, dir: Ino) -> ufs::Result<u64> {
    let mut seen = 0;
    let mut subdirs = Vec::new();
    for e in fs.readdir(dir, 0, usize::MAX)? {
        if e.name == b"." || e.name == b".." {
            continue;
        }
        let a = fs.lookup(dir, &e.name)?;
        seen += 1;
        if a.kind == ufs::FileKind::Dir {
            subdirs.push(a.ino);
        }
    }
    for d in subdirs {
        seen += find(fs, d)?;
    }
    Ok(seen)
}

/// The names in the root directory, sorted (what a workload must leave as
/// it found).
pub(super) fn root_names(fs: &Fs) -> ufs::Result<Vec<Vec<u8>>> {
    let mut v: Vec<Vec<u8>> = fs
        .readdir(fs.root(), 0, usize::MAX)?
        .into_iter()
        .map(|e| e.name)
        .collect();
    v.sort();
    Ok(v)
}

/// Fails unless the root lists what it listed `before` the workload.
pub(super) fn root_restored(fs: &Fs, before: &[Vec<u8>], what: &str) -> ufs::Result<()> {
    let after = root_names(fs)?;
    if after != before {
        return Err(super::invalid(format!(
            "{what}: the root lists {} entries after the removals, {} before",
            after.len(),
            before.len()
        )));
    }
    Ok(())
}

pub(super) fn tar_workload(p: &Profile, m: &mut Meter) -> ufs::Result<()> {
    let tree = tar_tree(p);
    let root = m.fs.root();
    let top = match tree.entries.first() {
        Some(e) if e.kind == Kind::Dir => e.path.clone(),
        _ => return Err(invalid("tar: the tree has no top directory".into())),
    };
    m.phase("tar-extract", |fs| crate::dirpref::extract(fs, root, &tree))?;
    let seen = m.phase("tar-find", |fs| {
        let top = fs.lookup(root, top.as_bytes())?;
        Ok(1 + find(fs, top.ino)?)
    })?;
    if seen != tree.entries.len() as u64 {
        return Err(invalid(format!(
            "tar: find saw {seen} entries, {} were extracted",
            tree.entries.len()
        )));
    }
    m.phase("tar-remove", |fs| {
        crate::dirpref::remove(fs, root, top.as_bytes())
    })?;
    match m.fs.lookup(root, top.as_bytes()) {
        Err(e) if e.kind == ufs::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
        Ok(_) => Err(invalid("tar: the tree is still there after rm -rf".into())),
    }
}

pub(super) fn folder_workload(p: &Profile, m: &mut Meter) -> ufs::Result<()> {
    let root = m.fs.root();
    let mut rng = StdRng::seed_from_u64(p.seed);
    let numbers = writeorder::folder_numbers(&mut rng, p.messages);
    let sizes = writeorder::message_sizes(&mut rng, p.messages);
    let dir = m.phase("folder-create", |fs| {
        writeorder::folder_create(fs, root, b"inbox", &numbers, &sizes)
    })?;
    m.phase("folder-pack", |fs| {
        writeorder::folder_pack(fs, dir, &numbers)
    })?;
    writeorder::folder_check_packed(m.fs, dir, p.messages)?;
    m.phase("folder-remove", |fs| {
        writeorder::folder_remove(fs, root, b"inbox", dir)
    })
}

/// Postmark's bounds (version 1.13 defaults): file sizes 500 B to 10 KB.
const PM_MIN: usize = 500;
const PM_MAX: usize = 10_000;
const PM_DIRS: u64 = 10;

pub(super) fn write_all(fs: &Fs, ino: Ino, off: u64, data: &[u8]) -> ufs::Result<()> {
    let mut done = 0;
    while done < data.len() {
        match fs.write(ino, off + done as u64, &data[done..], Cred::ROOT)? {
            0 => return Err(invalid("postmark: short write".into())),
            n => done += n,
        }
    }
    Ok(())
}

/// Postmark: the pool, the transactions (each a create or a delete, then a
/// read or an append, even odds, files picked at random), the removal of
/// what is left and of the subdirectories.
fn postmark(fs: &Fs, p: &Profile, files: u64, transactions: u64) -> ufs::Result<()> {
    let mut rng = StdRng::seed_from_u64(p.seed ^ 0x706d ^ files);
    let text: Vec<u8> = (0..PM_MAX).map(|i| b'a' + (i % 26) as u8).collect();
    let root = fs.root();
    let top = fs.mkdir(root, b"postmark", 0o755, Cred::ROOT)?.ino;
    let dirs: Vec<Ino> = (0..PM_DIRS)
        .map(|i| {
            Ok(fs
                .mkdir(top, format!("s{i}").as_bytes(), 0o755, Cred::ROOT)?
                .ino)
        })
        .collect::<ufs::Result<_>>()?;
    // Live files: (directory, name, inode).
    let mut live: Vec<(Ino, String, Ino)> = Vec::new();
    let mut next = 0u64;
    let mut create = |live: &mut Vec<(Ino, String, Ino)>, rng: &mut StdRng| {
        let d = dirs[rng.gen_range(0..dirs.len())];
        let name = format!("pm{next}");
        next += 1;
        let a = fs.mknod(d, name.as_bytes(), 0o100644, 0, Cred::ROOT)?;
        write_all(fs, a.ino, 0, &text[..rng.gen_range(PM_MIN..=PM_MAX)])?;
        live.push((d, name, a.ino));
        Ok::<_, ufs::Error>(())
    };
    for _ in 0..files {
        create(&mut live, &mut rng)?;
    }
    for _ in 0..transactions {
        if rng.gen_bool(0.5) || live.is_empty() {
            create(&mut live, &mut rng)?;
        } else {
            let (d, name, _) = live.swap_remove(rng.gen_range(0..live.len()));
            fs.unlink(d, name.as_bytes())?;
        }
        if live.is_empty() {
            continue;
        }
        let (_, _, ino) = live[rng.gen_range(0..live.len())];
        let size = fs.getattr(ino)?.size;
        if rng.gen_bool(0.5) {
            let got = fs.read(ino, 0, size as usize)?;
            if got.len() as u64 != size {
                return Err(invalid(format!(
                    "postmark: read {} of {size} bytes",
                    got.len()
                )));
            }
        } else {
            write_all(fs, ino, size, &text[..rng.gen_range(PM_MIN..=PM_MAX)])?;
        }
    }
    for (d, name, _) in live.drain(..) {
        fs.unlink(d, name.as_bytes())?;
    }
    for i in 0..PM_DIRS {
        fs.rmdir(top, format!("s{i}").as_bytes())?;
    }
    fs.rmdir(root, b"postmark")
}

pub(super) fn postmark_workload(p: &Profile, m: &mut Meter) -> ufs::Result<()> {
    for (i, &(files, transactions)) in p.postmark.iter().enumerate() {
        let name = POSTMARK_TESTS.get(i).copied().ok_or_else(|| {
            invalid(format!(
                "postmark: {} sizes configured, tests are named for {}",
                p.postmark.len(),
                POSTMARK_TESTS.len()
            ))
        })?;
        m.phase(name, |fs| postmark(fs, p, files, transactions))?;
    }
    Ok(())
}
