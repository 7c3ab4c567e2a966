//! Bonnie++'s small-file tests, as seed `004_*` ran them (section 4.1:
//! "version 1.01-d of Bonnie++"; section 4.4: the "large directory tests",
//! where dirhash showed). With `-n 16` Bonnie++ makes 16 * 1024 empty
//! files in one directory, twice: once in sequential and once in random
//! order, timing creation, `stat` and deletion of each set. The paper
//! dropped Bonnie++'s throughput tests from its summary (figure 10), so only
//! these six tests are modeled, in the order Bonnie++ runs them:
//!
//! - `bonnie-seq-create`: the test directory made, then `p.bonnie_files`
//!   empty files created in name order. A sequential name is the file's
//!   number as 7 zero-padded decimal digits followed by 0 to 12 random
//!   alphanumerics (Bonnie++'s documented shape), so sorting the names
//!   gives the creation order;
//! - `bonnie-seq-stat`: the directory read (`readdir`, in batches) and every
//!   entry it returns `stat`ed by name in the order returned, which for a
//!   UFS directory filled from empty is the creation order;
//! - `bonnie-seq-delete`: every file removed in that same directory order,
//!   then the directory;
//! - `bonnie-rand-create`: the directory made again and as many files
//!   created whose names put the 0 to 12 random alphanumerics first and the
//!   number last, so the order of creation looks random by name;
//! - `bonnie-rand-stat`: as many `stat`s as there are files, each of a
//!   name drawn at random (with replacement, as Bonnie++ draws, so some
//!   files are seen twice and some never);
//! - `bonnie-rand-delete`: every file removed in a random permutation of
//!   the names, then the directory.
//!
//! A `stat` by name is one `lookup` (it returns the attributes); `creat` +
//! `close` of an empty file is one `mknod`. Bonnie++ itself does almost no
//! work between its calls (it makes a name, calls, checks), so no user CPU
//! is declared: every modeled second comes from the disk and the engine's
//! calls ([`super::cpu`]), where dirhash's saving (a hashed search in place
//! of a linear scan of a directory of 16,384 entries, about 400 KB) shows.
//!
//! `readdir` is called for at most [`READDIR_BATCH`] entries at a time: about
//! what one 4 KB `getdirentries` buffer holds for records of these names
//! (8 bytes of header plus a name of 7 to 19 bytes, rounded to 4: 16 to 28
//! bytes, 32 with slack), so a large directory costs many calls as it did.
//!
//! Invariants: names come from `StdRng` seeded with `p.seed`, so runs are
//! identical; the workload checks that `readdir` returned exactly the files
//! created (no more, no fewer, each an empty regular file), that every
//! `stat` found an empty regular file, that every file was removed, that
//! the directory is gone after each delete test, and that the file system
//! has as many free inodes at the end as at the start. It fails otherwise.
use super::meter::Meter;
use super::{invalid, Profile};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::collections::HashSet;
use ufs::{Cred, Fs, Ino};

pub(super) const TESTS: &[&str] = &[
    "bonnie-seq-create",
    "bonnie-seq-stat",
    "bonnie-seq-delete",
    "bonnie-rand-create",
    "bonnie-rand-stat",
    "bonnie-rand-delete",
];

/// The test directory (Bonnie++ names its own after its process).
const DIR: &[u8] = b"Bonnie.1";

/// Digits of a file's number in its name.
const DIGITS: usize = 7;

/// Random alphanumerics in a name: 0 to this many.
const MAX_RANDOM_CHARS: usize = 12;

/// Entries returned by one `readdir` call (one 4 KB buffer's worth).
pub(super) const READDIR_BATCH: usize = 128;

const ALNUM: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

fn random_chars(rng: &mut StdRng) -> String {
    let n = rng.gen_range(0..=MAX_RANDOM_CHARS);
    (0..n)
        .map(|_| ALNUM[rng.gen_range(0..ALNUM.len())] as char)
        .collect()
}

/// The names of a set of `n` files in creation order: number first for the
/// sequential set, random characters first for the random one. Unique, as
/// each carries its own number.
fn names(rng: &mut StdRng, n: u64, sequential: bool) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let r = random_chars(rng);
            let s = if sequential {
                format!("{i:0DIGITS$}{r}")
            } else {
                format!("{r}{i:0DIGITS$}")
            };
            s.into_bytes()
        })
        .collect()
}

/// `mkdir` of the test directory and `creat` of every name in order.
fn create(fs: &Fs, names: &[Vec<u8>]) -> ufs::Result<Ino> {
    let dir = fs.mkdir(fs.root(), DIR, 0o755, Cred::ROOT)?.ino;
    for n in names {
        fs.mknod(dir, n, 0o100644, 0, Cred::ROOT)?;
    }
    Ok(dir)
}

/// The directory's entries other than `.` and `..`, in its order, read a
/// batch at a time as a program's `readdir` does.
fn read_dir(fs: &Fs, dir: Ino) -> ufs::Result<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    let mut cookie = 0;
    loop {
        let batch = fs.readdir(dir, cookie, READDIR_BATCH)?;
        let Some(last) = batch.last() else { break };
        cookie = last.next;
        let short = batch.len() < READDIR_BATCH;
        out.extend(
            batch
                .into_iter()
                .filter(|e| e.name != b"." && e.name != b"..")
                .map(|e| e.name),
        );
        if short {
            break;
        }
    }
    Ok(out)
}

/// `stat` of `name`: it must be an empty regular file.
fn stat(fs: &Fs, dir: Ino, name: &[u8]) -> ufs::Result<()> {
    let a = fs.lookup(dir, name)?;
    if a.kind != ufs::FileKind::File || a.size != 0 {
        return Err(invalid(format!(
            "bonnie: {} is a {:?} of {} bytes, not an empty file",
            String::from_utf8_lossy(name),
            a.kind,
            a.size
        )));
    }
    Ok(())
}

/// The entries read back must be exactly the files created.
fn check_listing(test: &str, listed: &[Vec<u8>], created: &[Vec<u8>]) -> ufs::Result<()> {
    let want: HashSet<&[u8]> = created.iter().map(|n| n.as_slice()).collect();
    let got: HashSet<&[u8]> = listed.iter().map(|n| n.as_slice()).collect();
    if listed.len() != created.len() || got != want {
        return Err(invalid(format!(
            "bonnie: {test} read {} entries ({} distinct), {} files were created",
            listed.len(),
            got.len(),
            created.len()
        )));
    }
    Ok(())
}

/// Removes `order` from the test directory, then the directory; checks
/// that it is gone.
fn delete(fs: &Fs, dir: Ino, order: &[Vec<u8>]) -> ufs::Result<()> {
    for n in order {
        fs.unlink(dir, n)?;
    }
    // rmdir fails unless the directory is empty: nothing was left.
    fs.rmdir(fs.root(), DIR)?;
    match fs.lookup(fs.root(), DIR) {
        Err(e) if e.kind == ufs::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
        Ok(_) => Err(invalid("bonnie: the test directory outlived rmdir".into())),
    }
}

pub(super) fn workload(p: &Profile, m: &mut Meter) -> ufs::Result<()> {
    let n = p.bonnie_files;
    if n == 0 {
        return Err(invalid("bonnie: no files configured".into()));
    }
    let mut rng = StdRng::seed_from_u64(p.seed ^ 0x626f_6e6e_6965);
    let inodes0 = m.fs.statfs().ffree;

    // Sequential: create, stat and delete in directory order.
    let seq = names(&mut rng, n, true);
    let dir = m.phase("bonnie-seq-create", |fs| create(fs, &seq))?;
    let listed = m.phase("bonnie-seq-stat", |fs| {
        let listed = read_dir(fs, dir)?;
        for name in &listed {
            stat(fs, dir, name)?;
        }
        Ok(listed)
    })?;
    check_listing("bonnie-seq-stat", &listed, &seq)?;
    m.phase("bonnie-seq-delete", |fs| {
        let order = read_dir(fs, dir)?;
        check_listing("bonnie-seq-delete", &order, &seq)?;
        delete(fs, dir, &order)
    })?;

    // Random: names that look random in creation order, stats of random
    // names, deletion in a random order.
    let rand_names = names(&mut rng, n, false);
    let picks: Vec<usize> = (0..n).map(|_| rng.gen_range(0..rand_names.len())).collect();
    let mut removal = rand_names.clone();
    removal.shuffle(&mut rng);
    let dir = m.phase("bonnie-rand-create", |fs| create(fs, &rand_names))?;
    let stats = m.phase("bonnie-rand-stat", |fs| {
        for &i in &picks {
            stat(fs, dir, &rand_names[i])?;
        }
        Ok(picks.len() as u64)
    })?;
    if stats != n {
        return Err(invalid(format!("bonnie: {stats} random stats of {n}")));
    }
    m.phase("bonnie-rand-delete", |fs| delete(fs, dir, &removal))?;

    let inodes1 = m.fs.statfs().ffree;
    if inodes1 != inodes0 {
        return Err(invalid(format!(
            "bonnie: {inodes0} free inodes before, {inodes1} after"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::testing::{checked_rows, row as find};
    use super::super::{Combo, Profile, Row, Workload};
    use super::*;

    fn profile() -> Profile {
        Profile {
            bonnie_files: 1024,
            ..Profile::quick()
        }
    }

    fn rows(p: &Profile, c: Combo) -> Vec<Row> {
        checked_rows(p, Workload::Bonnie, c)
    }

    #[test]
    fn names_sort_as_documented() {
        let mut rng = StdRng::seed_from_u64(7);
        let seq = names(&mut rng, 300, true);
        let mut sorted = seq.clone();
        sorted.sort();
        assert_eq!(sorted, seq, "sequential names sort in creation order");
        let rnd = names(&mut rng, 300, false);
        let mut sorted = rnd.clone();
        sorted.sort();
        assert_ne!(sorted, rnd, "random names do not");
        for set in [&seq, &rnd] {
            let distinct: HashSet<&Vec<u8>> = set.iter().collect();
            assert_eq!(distinct.len(), set.len(), "names of a set are unique");
        }
        for n in seq.iter().chain(rnd.iter()) {
            assert!(n.len() >= DIGITS && n.len() <= DIGITS + MAX_RANDOM_CHARS);
            assert!(n.iter().all(|b| b.is_ascii_alphanumeric()));
        }
    }

    #[test]
    fn every_test_runs_once_in_order_and_dirhash_saves_cpu() {
        let p = profile();
        let off = Combo {
            su: true,
            dp: false,
            vm: true,
            dh: false,
            ..Combo::NONE
        };
        let on = Combo { dh: true, ..off };
        let plain = Combo { su: false, ..off };
        let (a, b, c) = (rows(&p, off), rows(&p, on), rows(&p, plain));
        // Dirhash replaces linear scans of a 1024-entry directory.
        for t in ["bonnie-rand-stat", "bonnie-rand-delete"] {
            let (x, y) = (find(&a, t).cpu_s, find(&b, t).cpu_s);
            assert!(y < x, "{t}: cpu {y} with dirhash, {x} without");
        }
        // Soft updates keep creation from waiting on the disk per file.
        let sync_create = find(&c, "bonnie-seq-create").seconds;
        let su_create = find(&a, "bonnie-seq-create").seconds;
        assert!(
            su_create < sync_create,
            "seq-create {su_create} s with soft updates, {sync_create} s without"
        );
    }

    #[test]
    fn runs_are_deterministic() {
        let p = Profile {
            bonnie_files: 256,
            ..Profile::quick()
        };
        let c = Combo {
            su: false,
            dp: false,
            vm: false,
            dh: true,
            ..Combo::NONE
        };
        let (a, b) = (rows(&p, c), rows(&p, c));
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(x.test, y.test);
            assert_eq!(x.seconds, y.seconds, "{}", x.test);
            assert_eq!(x.counters, y.counters, "{}", x.test);
        }
    }
}
