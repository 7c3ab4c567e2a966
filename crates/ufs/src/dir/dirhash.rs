//! The set of all dirhash indexes of a mounted file system: which
//! directories have one, the memory budget they share, the LRU/LFU order
//! that decides which one to recycle, the low-memory handler of the 2008
//! work (seed `002_*`), and the counters. Rules from FreeBSD's
//! `ufs_dirhash.c` (`ufsdirhash_build`, `ufsdirhash_recycle`,
//! `ufsdirhash_lowmem`); see `docs/DIRHASH.md`.
//!
//! Invariants:
//! - `mem` is the sum of the reserved sizes of the listed indexes and never
//!   exceeds `cfg.maxmem`: memory is reserved before an index is built, and
//!   a reservation that does not fit first recycles from the head of the
//!   list, and fails if the head's score is still above zero.
//! - The list holds every directory with a reservation, least wanted first.
//!   A use moves a directory one place towards the tail (past a neighbour
//!   whose score is not higher) and raises its score by one up to 64.
//! - An index taken out for an operation ([`Dirhash::take`]) is either put
//!   back or dropped before the operation returns; while out, it is never
//!   recycled.
//! - An index is bound to its directory's inode generation; a different
//!   generation means a reused inode, and the index is dropped.
use super::index::DirIndex;
use crate::Ino;
use foldhash::HashMap;
use serde::Serialize;
use std::time::{Duration, Instant};

pub const SCORE_INIT: u32 = 8;
pub const SCORE_MAX: u32 = 64;

/// Dirhash settings (mount options `dirhash=`, `dirhash_maxmem=`,
/// `dirhash_minsize=`, `dirhash_reclaimage=`, `dirhash_check=`).
#[derive(Debug, Clone, Serialize)]
pub struct DirhashConfig {
    pub enabled: bool,
    /// Budget for all indexes together, bytes.
    pub maxmem: u64,
    /// Directories smaller than this many bytes stay linear.
    pub minsize: u64,
    /// A low-memory event frees every index idle longer than this.
    pub reclaimage: Duration,
    /// Self-check: verify every answer against the directory blocks.
    pub check: bool,
    /// Share of dirhash memory a low-memory event frees at least (percent).
    pub reclaim_percent: u64,
}

impl DirhashConfig {
    /// FreeBSD 14's default budget: the larger of 2 MiB and 1/64 of the
    /// buffer cache (`ufsdirhash_init`).
    pub fn default_maxmem(cache_bytes: u64) -> u64 {
        (2u64 << 20).max(cache_bytes / 64)
    }

    /// ufskit's default budget: as large as the buffer cache, given back
    /// under memory pressure (low-memory events; seed 002's memory that
    /// grows while it is free and shrinks when it is not). FreeBSD's fixed
    /// 2 MiB refuses the index of a directory past some 200,000 entries,
    /// and every lookup in it then scans (a thousand times slower); the
    /// cache's 64 MiB index about five million.
    pub fn growing_maxmem(cache_bytes: u64) -> u64 {
        Self::default_maxmem(cache_bytes).max(cache_bytes)
    }
}

impl Default for DirhashConfig {
    fn default() -> Self {
        DirhashConfig {
            enabled: true,
            maxmem: 2 << 20,
            minsize: 2560,
            reclaimage: Duration::from_secs(5),
            check: false,
            reclaim_percent: 10,
        }
    }
}

/// Counters, readable while mounted (`ufskit stats`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct DirhashStats {
    /// Indexes built from the directory blocks.
    pub built: u64,
    /// Builds refused because the budget was taken by hotter indexes.
    pub build_refused: u64,
    /// Indexes freed to make room for another one.
    pub recycled: u64,
    /// Indexes dropped because they went stale (table 3/4 full, directory
    /// grew or shrank too much); rebuilt on the next access.
    pub dropped: u64,
    /// Indexes dropped because they disagreed with the directory.
    pub dropped_inconsistent: u64,
    /// Indexes freed with their directory (rmdir, inode reuse).
    pub freed_with_dir: u64,
    pub lowmem_events: u64,
    /// Indexes freed by low-memory events, and their bytes.
    pub lowmem_freed: u64,
    pub lowmem_freed_bytes: u64,
    /// Lookups answered by the index's hash chains.
    pub lookups_hash: u64,
    /// Lookups answered by the sequential shortcut.
    pub lookups_sequential: u64,
    /// Lookups answered by scanning the directory.
    pub lookups_linear: u64,
    /// Free slots found through the free-space summary.
    pub findfree_hash: u64,
    /// Directory entries examined by linear scans.
    pub entries_scanned: u64,
    /// Of those, the entries examined by the linear lookup of an operation
    /// that changes the directory, which then sweeps it again from the
    /// start to place or remove the entry (FreeBSD's `namei` makes only
    /// that second sweep; cost models subtract these).
    pub entries_rescanned: u64,
    /// Self-check disagreements (must stay 0).
    pub check_failures: u64,
    /// Bytes reserved by indexes now, the most ever, and the budget.
    pub mem_in_use: u64,
    pub mem_peak: u64,
    pub maxmem: u64,
    pub hashes: u64,
    /// Directory bytes covered by the present indexes.
    pub dir_bytes_hashed: u64,
}

impl DirhashStats {
    /// What dirhash did since the snapshot `earlier`: the difference for the
    /// counters, this snapshot's value for the gauges (memory in use, peak memory,
    /// budget, number of indexes, directory bytes hashed).
    pub fn since(&self, earlier: &DirhashStats) -> DirhashStats {
        DirhashStats {
            built: self.built - earlier.built,
            build_refused: self.build_refused - earlier.build_refused,
            recycled: self.recycled - earlier.recycled,
            dropped: self.dropped - earlier.dropped,
            dropped_inconsistent: self.dropped_inconsistent - earlier.dropped_inconsistent,
            freed_with_dir: self.freed_with_dir - earlier.freed_with_dir,
            lowmem_events: self.lowmem_events - earlier.lowmem_events,
            lowmem_freed: self.lowmem_freed - earlier.lowmem_freed,
            lowmem_freed_bytes: self.lowmem_freed_bytes - earlier.lowmem_freed_bytes,
            lookups_hash: self.lookups_hash - earlier.lookups_hash,
            lookups_sequential: self.lookups_sequential - earlier.lookups_sequential,
            lookups_linear: self.lookups_linear - earlier.lookups_linear,
            findfree_hash: self.findfree_hash - earlier.findfree_hash,
            entries_scanned: self.entries_scanned - earlier.entries_scanned,
            entries_rescanned: self.entries_rescanned - earlier.entries_rescanned,
            check_failures: self.check_failures - earlier.check_failures,
            mem_in_use: self.mem_in_use,
            mem_peak: self.mem_peak,
            maxmem: self.maxmem,
            hashes: self.hashes,
            dir_bytes_hashed: self.dir_bytes_hashed,
        }
    }
}

struct Slot {
    index: Option<Box<DirIndex>>,
    gen: u32,
    mem: u64,
    dir_bytes: u64,
    score: u32,
    last_used: Instant,
    prev: Option<Ino>,
    next: Option<Ino>,
}

/// What [`Dirhash::take`] found for a directory.
pub enum Take {
    /// The directory's index, out of the set until put back or dropped.
    Index(Box<DirIndex>),
    /// No index; one may be built (the policy allows it).
    Absent,
    /// The directory is not to be hashed (too small, dirhash off).
    NotHashed,
}

pub struct Dirhash {
    pub cfg: DirhashConfig,
    pub stats: DirhashStats,
    map: HashMap<Ino, Slot>,
    head: Option<Ino>,
    tail: Option<Ino>,
    mem: u64,
    /// Last check failure, for the log and the stats command.
    pub last_check_failure: Option<String>,
}

impl Dirhash {
    pub fn new(cfg: DirhashConfig) -> Dirhash {
        let stats = DirhashStats {
            maxmem: cfg.maxmem,
            ..Default::default()
        };
        Dirhash {
            cfg,
            stats,
            map: HashMap::default(),
            head: None,
            tail: None,
            mem: 0,
            last_check_failure: None,
        }
    }

    pub fn mem(&self) -> u64 {
        self.mem
    }
    pub fn hashes(&self) -> usize {
        self.map.len()
    }
    pub fn has_index(&self, ino: Ino) -> bool {
        self.map.contains_key(&ino)
    }
    /// `(memory, directory bytes, score)` of a directory's index.
    pub fn describe(&self, ino: Ino) -> Option<(u64, u64, u32)> {
        self.map.get(&ino).map(|s| (s.mem, s.dir_bytes, s.score))
    }

    /// Counters with the memory figures filled in.
    pub fn snapshot(&self) -> DirhashStats {
        let mut s = self.stats.clone();
        s.mem_in_use = self.mem;
        s.hashes = self.map.len() as u64;
        s.maxmem = self.cfg.maxmem;
        s.dir_bytes_hashed = self.map.values().map(|v| v.dir_bytes).sum();
        s
    }

    fn unlink(&mut self, ino: Ino) {
        let (prev, next) = {
            let s = &self.map[&ino];
            (s.prev, s.next)
        };
        match prev {
            Some(p) => self.map.get_mut(&p).expect("list").next = next,
            None => self.head = next,
        }
        match next {
            Some(n) => self.map.get_mut(&n).expect("list").prev = prev,
            None => self.tail = prev,
        }
    }

    fn link_after(&mut self, ino: Ino, after: Option<Ino>) {
        let next = match after {
            Some(a) => self.map[&a].next,
            None => self.head,
        };
        {
            let s = self.map.get_mut(&ino).expect("list");
            s.prev = after;
            s.next = next;
        }
        match after {
            Some(a) => self.map.get_mut(&a).expect("list").next = Some(ino),
            None => self.head = Some(ino),
        }
        match next {
            Some(n) => self.map.get_mut(&n).expect("list").prev = Some(ino),
            None => self.tail = Some(ino),
        }
    }

    /// Takes the index of directory `ino` (generation `gen`, `size` bytes)
    /// out of the set for one operation, promoting it in the list.
    pub fn take(&mut self, ino: Ino, gen: u32, size: u64, now: Instant) -> Take {
        let hashable = self.cfg.enabled
            && size >= self.cfg.minsize
            && size <= i32::MAX as u64
            && self.cfg.maxmem > 0;
        let Some(slot) = self.map.get(&ino) else {
            return if hashable {
                Take::Absent
            } else {
                Take::NotHashed
            };
        };
        if slot.gen != gen || !hashable {
            let bad_gen = slot.gen != gen;
            self.free(ino);
            if bad_gen {
                self.stats.freed_with_dir += 1;
                return if hashable {
                    Take::Absent
                } else {
                    Take::NotHashed
                };
            }
            self.stats.dropped += 1;
            return Take::NotHashed;
        }
        if slot.index.is_none() {
            // Reserved but not built (a build failed half-way): start over.
            self.free(ino);
            return Take::Absent;
        }
        // Promote: one place towards the tail, past a neighbour whose score
        // is not higher; then raise the score.
        if let Some(next) = slot.next {
            if self.map[&next].score >= slot.score {
                self.unlink(ino);
                self.link_after(ino, Some(next));
            }
        }
        let s = self.map.get_mut(&ino).expect("present");
        s.score = (s.score + 1).min(SCORE_MAX);
        s.last_used = now;
        Take::Index(s.index.take().expect("checked"))
    }

    /// Puts back an index taken with [`Dirhash::take`] or built after a
    /// [`Dirhash::reserve`].
    pub fn put(&mut self, ino: Ino, index: Box<DirIndex>) {
        match self.map.get_mut(&ino) {
            Some(s) => {
                s.dir_bytes = index.dir_size();
                s.index = Some(index);
            }
            None => {
                // Reservation vanished (cannot happen under the fs lock);
                // dropping the index keeps the accounting exact.
            }
        }
    }

    /// Reserves `bytes` for a new index of directory `ino`, recycling
    /// others if the budget requires and their scores allow.
    pub fn reserve(&mut self, ino: Ino, gen: u32, bytes: u64, now: Instant) -> bool {
        if self.map.contains_key(&ino) {
            self.free(ino);
        }
        if bytes > self.cfg.maxmem {
            self.stats.build_refused += 1;
            return false;
        }
        // Recycling: the head loses a point of score on every attempt and is
        // freed only when it reaches zero (FreeBSD's LRU/LFU mix).
        let mut cur = self.head;
        while self.mem + bytes > self.cfg.maxmem {
            let Some(h) = cur else {
                self.stats.build_refused += 1;
                return false;
            };
            let s = self.map.get_mut(&h).expect("list");
            if s.index.is_none() {
                // In use by the current operation: skip it.
                cur = s.next;
                continue;
            }
            s.score = s.score.saturating_sub(1);
            if s.score > 0 {
                self.stats.build_refused += 1;
                return false;
            }
            let next = s.next;
            self.free(h);
            self.stats.recycled += 1;
            cur = next;
        }
        self.map.insert(
            ino,
            Slot {
                index: None,
                gen,
                mem: bytes,
                dir_bytes: 0,
                score: SCORE_INIT,
                last_used: now,
                prev: None,
                next: None,
            },
        );
        let tail = self.tail;
        self.link_after(ino, tail);
        self.mem += bytes;
        self.stats.mem_peak = self.stats.mem_peak.max(self.mem);
        true
    }

    /// Frees the index of `ino` (if any); returns the bytes released.
    pub fn free(&mut self, ino: Ino) -> u64 {
        if !self.map.contains_key(&ino) {
            return 0;
        }
        self.unlink(ino);
        let s = self.map.remove(&ino).expect("present");
        self.mem -= s.mem;
        s.mem
    }

    /// Drops an index that went stale during an operation.
    pub fn drop_stale(&mut self, ino: Ino, inconsistent: bool) {
        if self.free(ino) > 0 {
            if inconsistent {
                self.stats.dropped_inconsistent += 1;
            } else {
                self.stats.dropped += 1;
            }
        }
    }

    /// Frees the index of a directory being removed.
    pub fn forget_dir(&mut self, ino: Ino) {
        if self.free(ino) > 0 {
            self.stats.freed_with_dir += 1;
        }
    }

    /// The low-memory handler of the 2008 work: frees every index idle for
    /// longer than the reclaim age, then more from the head of the list
    /// until at least `reclaim_percent` of the memory in use when the event
    /// arrived has been freed. Returns the bytes freed.
    pub fn lowmem(&mut self, now: Instant) -> u64 {
        self.lowmem_event(Some(now))
    }

    /// A low-memory event without the age rule: frees from the head of the
    /// list until `reclaim_percent` of the memory in use is freed. For
    /// callers whose clock is not real time (modeled runs), where the
    /// indexes' real idle times mean nothing. Returns the bytes freed.
    pub fn lowmem_share(&mut self) -> u64 {
        self.lowmem_event(None)
    }

    fn lowmem_event(&mut self, now: Option<Instant>) -> u64 {
        self.stats.lowmem_events += 1;
        let wanted = self.mem * self.cfg.reclaim_percent / 100;
        let mut freed = 0u64;
        if let Some(now) = now {
            let mut cur = self.head;
            while let Some(ino) = cur {
                let s = &self.map[&ino];
                cur = s.next;
                if s.index.is_some()
                    && now.saturating_duration_since(s.last_used) > self.cfg.reclaimage
                {
                    freed += self.free(ino);
                    self.stats.lowmem_freed += 1;
                }
            }
        }
        let mut cur = self.head;
        while freed < wanted {
            let Some(ino) = cur else { break };
            let s = &self.map[&ino];
            cur = s.next;
            if s.index.is_some() {
                freed += self.free(ino);
                self.stats.lowmem_freed += 1;
            }
        }
        self.stats.lowmem_freed_bytes += freed;
        freed
    }

    /// Frees every index (cache drop).
    pub fn clear(&mut self) {
        let all: Vec<Ino> = self.map.keys().copied().collect();
        for ino in all {
            self.free(ino);
        }
    }

    /// Directories in list order, head (first to go) first, with their
    /// score and idle time: for tests and the stats command.
    pub fn order(&self, now: Instant) -> Vec<(Ino, u32, Duration)> {
        let mut out = Vec::new();
        let mut cur = self.head;
        while let Some(ino) = cur {
            let s = &self.map[&ino];
            out.push((ino, s.score, now.saturating_duration_since(s.last_used)));
            cur = s.next;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(maxmem: u64) -> DirhashConfig {
        DirhashConfig {
            maxmem,
            minsize: 0,
            ..Default::default()
        }
    }

    fn build(d: &mut Dirhash, ino: Ino, bytes: u64, now: Instant) -> bool {
        if !d.reserve(ino, 1, bytes, now) {
            return false;
        }
        d.put(ino, Box::new(DirIndex::with_capacity(4096, 0)));
        true
    }

    #[test]
    fn budget_is_never_exceeded_and_scores_protect_hot_hashes() {
        let now = Instant::now();
        let mut d = Dirhash::new(cfg(1000));
        assert!(build(&mut d, Ino::new(10), 600, now));
        // No room for a second: the head's score (8) must wear down first.
        let mut tries = 0;
        while !build(&mut d, Ino::new(11), 600, now) {
            tries += 1;
            assert!(d.mem() <= 1000);
        }
        assert_eq!(tries, SCORE_INIT as usize - 1);
        assert!(!d.has_index(Ino::new(10)));
        assert_eq!(d.stats.recycled, 1);
        assert_eq!(d.stats.build_refused, tries as u64);
    }

    #[test]
    fn use_promotes_towards_the_tail() {
        let now = Instant::now();
        let mut d = Dirhash::new(cfg(1 << 20));
        for ino in 1..=3 {
            assert!(build(&mut d, Ino::new(ino), 100, now));
        }
        assert_eq!(
            d.order(now).iter().map(|o| o.0.get()).collect::<Vec<_>>(),
            vec![1, 2, 3]
        );
        let Take::Index(ix) = d.take(Ino::new(1), 1, 4096, now) else {
            panic!()
        };
        d.put(Ino::new(1), ix);
        assert_eq!(
            d.order(now).iter().map(|o| o.0.get()).collect::<Vec<_>>(),
            vec![2, 1, 3]
        );
        assert_eq!(d.describe(Ino::new(1)).unwrap().2, SCORE_INIT + 1);
    }

    #[test]
    fn lowmem_frees_idle_first_then_ten_percent() {
        let t0 = Instant::now();
        let mut d = Dirhash::new(cfg(1 << 30));
        for ino in 1..=20 {
            assert!(build(&mut d, Ino::new(ino), 1000, t0));
        }
        let later = t0 + Duration::from_secs(3);
        // Use 11..=20 at t0+3s; 1..=10 stay idle since t0.
        for ino in 11..=20 {
            let Take::Index(ix) = d.take(Ino::new(ino), 1, 4096, later) else {
                panic!()
            };
            d.put(Ino::new(ino), ix);
        }
        let at = t0 + Duration::from_secs(6);
        let freed = d.lowmem(at);
        assert_eq!(freed, 10_000);
        assert!((1..=10).all(|i| !d.has_index(Ino::new(i))));
        // Nothing idle remains: the next event frees 10% from the head.
        let before = d.mem();
        let freed = d.lowmem(at);
        assert!(freed * 10 >= before && freed > 0);
        assert!(d.mem() < before);
    }

    #[test]
    fn lowmem_share_ignores_age_and_frees_ten_percent_from_the_head() {
        let t0 = Instant::now();
        let mut d = Dirhash::new(cfg(1 << 30));
        for ino in 1..=20 {
            assert!(build(&mut d, Ino::new(ino), 1000, t0));
        }
        let before = d.mem();
        // Every index is older than the reclaim age, yet only the head goes.
        let freed = d.lowmem_share();
        assert!(
            freed * 10 >= before && freed * 5 < before,
            "{freed} of {before}"
        );
        assert!(!d.has_index(Ino::new(1)) && d.has_index(Ino::new(20)));
        assert_eq!(d.stats.lowmem_events, 1);
        assert_eq!(d.mem(), before - freed);
    }

    #[test]
    fn generation_change_drops_the_index() {
        let now = Instant::now();
        let mut d = Dirhash::new(cfg(1 << 20));
        assert!(build(&mut d, Ino::new(5), 100, now));
        assert!(matches!(d.take(Ino::new(5), 2, 4096, now), Take::Absent));
        assert_eq!(d.mem(), 0);
    }
}
