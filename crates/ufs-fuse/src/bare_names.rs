//! Which READDIRPLUS replies send files' names without their attributes
//! (`-o readdirplus=auto`, the default, over io_uring).
//!
//! A READDIRPLUS entry whose node id is 0 is listed by the kernel like a
//! READDIR entry and makes no dentry or inode (fs/fuse/readdir.c,
//! `fuse_direntplus_link`: "zero nodeid ... did not want to return
//! attributes/handle for this entry"). A walk that needs only names and
//! types (`find -type f`, `find -name`) is then spared what a full entry
//! costs: the daemon's lookup of each entry and the kernel's inode and
//! dentry for it. A walk that uses the files (`ls -l`, `du`, `rm -rf`,
//! `cp -a`) pays instead one LOOKUP per name it uses. Measured on
//! /usr/include (8,908 entries, 838 directories), every file bare: a cold
//! `find` 0.083 s against 0.105 s, `rm -rf` 0.496 s against 0.444 s. So
//! the choice follows what the programs did with the last listings:
//!
//! - Full entries (the start, and after evidence): every [`PROBE_EVERY`]
//!   listings at first, one listing sends its files bare and is watched.
//!   A probe whose files were used (a quarter of them looked up, at least
//!   two, or the one file of a one-file listing) ends at once and the
//!   next waits twice as long (up to [`MAX_PROBE_EVERY`]); one whose
//!   files were not used when [`PROBE_SPAN`] more listings have started
//!   turns files bare.
//! - Bare files: the last [`RECENT`] bare listings are watched; once one's
//!   files were used as above, entries are full again and the next probe
//!   waits twice as long as the last.
//!
//! Directories are always sent whole (a walk enters them next), and so are
//! entries of unknown type (old images), whiteouts, and any entry past the
//! first [`BARE_MAX`] of a listing: a program that lists a large directory
//! and then stats it would pay a LOOKUP per name, while bare entries save
//! a walk far less per name than that. The choice is one per mount: a
//! `find` beside a `du` makes it turn now and then, each turn costing at
//! most a few listings' worth of LOOKUPs.
//!
//! Invariants: a bare entry gives the kernel no lookup reference, so none
//! is remembered for it; a bare entry is what a READDIR of the same
//! snapshot lists (name, type, inode number), where a full one is looked up
//! afresh (a name removed since the snapshot is then skipped).
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::requests::Requests;

/// Listings between two probes, at first and after entries turn full.
pub const PROBE_EVERY: u32 = 16;

/// The longest wait between probes, after probes that were used.
pub const MAX_PROBE_EVERY: u32 = 1024;

/// Listings that start after a probe before it is judged.
pub const PROBE_SPAN: u32 = 32;

/// Bare listings watched while files go bare.
pub const RECENT: usize = 8;

/// Only a listing's first entries can go bare.
pub const BARE_MAX: usize = 256;

/// One watched listing: its directory, the files it sent bare, the
/// lookups of non-directories in it since.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Watched {
    dir: u64,
    files: u32,
    looked: u32,
}

impl Watched {
    /// A quarter of its files were used (and at least two).
    fn used(&self) -> bool {
        self.looked >= 2.min(self.files) && self.looked * 4 >= self.files && self.files > 0
    }
}

#[derive(Debug)]
struct State {
    bare: bool,
    /// Full mode: listings started since the last probe ended.
    since_probe: u32,
    /// Full mode: listings between probes now.
    every: u32,
    /// Full mode: the probe under watch and the listings started since.
    probe: Option<(Watched, u32)>,
    /// Bare mode: the last bare listings, newest last.
    recent: Vec<Watched>,
}

/// The choice and what it watches; one per mount.
#[derive(Debug)]
pub struct BareNames {
    state: Mutex<State>,
    /// Something is watched (a probe, or bare mode): lookups must report.
    watching: AtomicBool,
    /// Where the turns are counted (`bare_turns`, `full_turns`).
    requests: Arc<Requests>,
}

impl BareNames {
    pub fn new(requests: Arc<Requests>) -> Self {
        BareNames {
            state: Mutex::new(State {
                bare: false,
                since_probe: 0,
                every: PROBE_EVERY,
                probe: None,
                recent: Vec::new(),
            }),
            watching: AtomicBool::new(false),
            requests,
        }
    }
}

impl BareNames {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A READDIRPLUS of `dir` starts (`first`: at its first entry):
    /// whether its files may go bare.
    pub fn listing(&self, dir: u64, first: bool) -> bool {
        let mut s = self.lock();
        if s.bare {
            return true;
        }
        if !first {
            return s.probe.is_some_and(|(w, _)| w.dir == dir);
        }
        if let Some((w, started)) = s.probe.as_mut() {
            *started += 1;
            if *started < PROBE_SPAN {
                return false;
            }
            let unused = !w.used();
            s.probe = None;
            s.since_probe = 0;
            if unused {
                self.requests.bare_turns.fetch_add(1, Ordering::Relaxed);
                s.bare = true;
                s.recent.clear();
                return true;
            }
            s.every = (s.every * 2).min(MAX_PROBE_EVERY);
            self.watching.store(false, Ordering::Relaxed);
            return false;
        }
        s.since_probe += 1;
        if s.since_probe < s.every {
            return false;
        }
        s.probe = Some((
            Watched {
                dir,
                files: 0,
                looked: 0,
            },
            0,
        ));
        self.watching.store(true, Ordering::Relaxed);
        true
    }

    /// A reply of `dir`'s listing sent `files` names bare.
    pub fn sent(&self, dir: u64, files: u32) {
        let mut s = self.lock();
        if s.bare {
            if files == 0 {
                return;
            }
            match s.recent.iter_mut().find(|w| w.dir == dir) {
                Some(w) => w.files += files,
                None => {
                    if s.recent.len() == RECENT {
                        s.recent.remove(0);
                    }
                    s.recent.push(Watched {
                        dir,
                        files,
                        looked: 0,
                    });
                }
            }
            return;
        }
        if let Some((w, _)) = s.probe.as_mut() {
            if w.dir == dir {
                w.files += files;
                if w.files == 0 {
                    // Nothing to judge by: the next listing probes.
                    s.probe = None;
                    s.since_probe = s.every;
                    self.watching.store(false, Ordering::Relaxed);
                }
            }
        }
    }

    /// A LOOKUP in `parent` found a non-directory.
    #[inline]
    pub fn looked_up(&self, parent: u64) {
        if !self.watching.load(Ordering::Relaxed) {
            return;
        }
        let mut s = self.lock();
        if s.bare {
            let Some(w) = s.recent.iter_mut().find(|w| w.dir == parent) else {
                return;
            };
            w.looked += 1;
            if w.used() {
                self.requests.full_turns.fetch_add(1, Ordering::Relaxed);
                s.bare = false;
                s.recent.clear();
                s.since_probe = 0;
                // Files were wanted: the next probe waits longer.
                s.every = (s.every * 2).min(MAX_PROBE_EVERY);
                self.watching.store(false, Ordering::Relaxed);
            }
            return;
        }
        if let Some((w, _)) = s.probe.as_mut() {
            if w.dir == parent {
                w.looked += 1;
                if w.used() {
                    // Used: the probe ends at once.
                    s.probe = None;
                    s.since_probe = 0;
                    s.every = (s.every * 2).min(MAX_PROBE_EVERY);
                    self.watching.store(false, Ordering::Relaxed);
                }
            }
        }
    }
}

#[cfg(test)]
impl BareNames {
    /// Whether files go bare now (between probes, the steady choice).
    fn bare(&self) -> bool {
        self.lock().bare
    }

    /// Whether lookups report now.
    fn watching(&self) -> bool {
        self.watching.load(Ordering::Relaxed)
    }
}

/// The listings between probes now.
#[cfg(test)]
fn probe_every(b: &BareNames) -> u32 {
    b.lock().every
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` listings of fresh directories from `start`, each with `files`
    /// bare candidates; returns how many went bare.
    fn walk(b: &BareNames, start: u64, n: u64, files: u32, lookups: bool) -> u64 {
        let mut bare = 0;
        for d in start..start + n {
            if b.listing(d, true) {
                bare += 1;
                b.sent(d, files);
                if lookups {
                    for _ in 0..files {
                        b.looked_up(d);
                    }
                }
            }
        }
        bare
    }

    #[test]
    fn a_walk_that_uses_no_file_gets_bare_listings() {
        let b = BareNames::new(Arc::default());
        // The probe is the 16th listing, judged 32 listings later.
        assert_eq!(walk(&b, 1, 15, 10, false), 0);
        assert!(b.listing(16, true));
        b.sent(16, 10);
        assert!(b.watching());
        assert_eq!(walk(&b, 17, 31, 10, false), 0);
        assert!(!b.bare());
        assert!(b.listing(48, true), "judged unused: bare");
        assert!(b.bare());
        assert_eq!(b.requests.bare_turns.load(Ordering::Relaxed), 1);
        assert_eq!(walk(&b, 49, 100, 10, false), 100);
    }

    #[test]
    fn a_walk_that_stats_its_files_keeps_full_listings() {
        let b = BareNames::new(Arc::default());
        let bare = walk(&b, 1, 2000, 10, true);
        assert!(!b.bare());
        // Each probe was used at once; the wait doubled after each.
        assert_eq!(probe_every(&b), MAX_PROBE_EVERY);
        assert!(bare <= 8, "{bare} probes in 2000 listings");
        assert!(!b.watching(), "no probe open: lookups cost nothing");
    }

    #[test]
    fn lookups_in_a_bare_listing_turn_entries_full_again() {
        let b = BareNames::new(Arc::default());
        walk(&b, 1, 48, 10, false);
        assert!(b.bare());
        assert!(b.listing(100, true));
        b.sent(100, 8);
        b.looked_up(100);
        assert!(b.bare(), "one lookup is not enough");
        b.looked_up(999); // another directory: not watched
        b.looked_up(100);
        assert!(!b.bare(), "two of eight files used");
        assert_eq!(b.requests.full_turns.load(Ordering::Relaxed), 1);
        assert!(!b.listing(101, true));
        assert_eq!(probe_every(&b), 2 * PROBE_EVERY);
    }

    #[test]
    fn a_probe_without_files_hands_over_to_the_next_listing() {
        let b = BareNames::new(Arc::default());
        walk(&b, 1, 15, 0, false);
        assert!(b.listing(16, true));
        b.sent(16, 0);
        assert!(!b.watching());
        assert!(b.listing(17, true), "the next listing probes");
        b.sent(17, 5);
        assert!(b.watching());
    }

    #[test]
    fn a_probe_listing_read_in_pieces_stays_bare() {
        let b = BareNames::new(Arc::default());
        walk(&b, 1, 15, 10, false);
        assert!(b.listing(16, true));
        b.sent(16, 3);
        assert!(b.listing(16, false), "its next reply");
        b.sent(16, 3);
        assert!(!b.listing(17, false), "another directory's next reply");
    }
}
