//! Inode placement for large directories (seed `001_*`, Andreas Dilger's
//! proposal of 2012): make inode order follow the order in which programs
//! walk a big directory, so that a cold `cp -a`, `tar` or `rm -rf` reads the
//! inode table forwards instead of at random.
//!
//! Once a directory is larger than `inodeorder_min` bytes, every new
//! non-directory entry gets a *goal inode*:
//! - the directory owns a list of inode ranges, each a run of (mostly) free
//!   inode numbers sized to the directory when the range was opened (twice
//!   the entries it had then);
//! - the entry's key is mapped piecewise into a range, and the first free
//!   inode at or after the goal (then before it, inside the range) is taken;
//! - a range is full when the running mean distance between goal and
//!   allocated inode passes [`FULL_DISTANCE`], when it has no free inode
//!   left, or (key `offset`) when the directory has grown past the offsets
//!   it covers; the next range is opened after the last one, for the new
//!   size.
//!
//! Keys (`-o inodeorder=`):
//! - `offset`: the byte offset of the slot the entry will take (chosen
//!   before the inode). UFS `readdir` returns entries in offset order, so
//!   this is the order `ls -f`, `find`, `tar`, `cp -a` and `rm -rf` walk.
//!   Ranges cover consecutive offset intervals; a slot reused after a
//!   delete maps back into the range that covers it.
//! - `name`: sorted-name order (what `ls -l` and rsync walk): the eight
//!   bytes after the names' common prefix, scaled between the smallest and
//!   largest seen; new entries map into the newest range.
//! - `hash`: the seed's own proposal (a hash of the name, as an htree
//!   directory would be walked); new entries map into the newest range.
//!
//! Invariants: nothing here is on disk (no format change); the state is a
//! hint rebuilt after a remount from the inodes already in the directory
//! ([`FsCore::placement_recover`]); every allocation still goes through
//! the cylinder-group maps, so a wrong hint costs locality, never
//! consistency. Directories themselves keep the `dirpref` policy.
use crate::dir::SlotContext;
use crate::error::Result;
use crate::frag::{BlockPointers, Frag};
use crate::fs::FsCore;
use crate::Ino;
use foldhash::HashMap;
use std::hash::{Hash, Hasher};
use std::ops::ControlFlow;
use ufs_format::bytes::to_index;
use ufs_format::DIRBLKSIZ;
use ufs_format::{Dinode, UFS_ROOTINO};

/// Which order the inodes of a large directory follow (`-o inodeorder=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum InodeOrder {
    /// FFS's own policy: the parent's group, from its inode rotor.
    Off,
    Offset,
    Name,
    Hash,
}

impl InodeOrder {
    pub fn parse(s: &str) -> Option<InodeOrder> {
        Some(match s {
            "off" | "none" => InodeOrder::Off,
            "offset" => InodeOrder::Offset,
            "name" => InodeOrder::Name,
            "hash" => InodeOrder::Hash,
            _ => return None,
        })
    }
    pub fn name(self) -> &'static str {
        match self {
            InodeOrder::Off => "off",
            InodeOrder::Offset => "offset",
            InodeOrder::Name => "name",
            InodeOrder::Hash => "hash",
        }
    }
    pub const ALL: [InodeOrder; 4] = [
        InodeOrder::Off,
        InodeOrder::Offset,
        InodeOrder::Name,
        InodeOrder::Hash,
    ];
}

/// Running mean distance (in inodes) between goal and allocated inode past
/// which a range counts as full. Filling at random, the expected distance
/// to the next free inode is about 1/(1 - fill), so 16 means roughly 94%.
pub const FULL_DISTANCE: f64 = 16.0;
/// Smallest range opened, in inodes.
const MIN_RANGE: u64 = 1024;
/// A range is acceptable when at least this share of it is free.
const MOSTLY_FREE: f64 = 0.9;

/// One reserved run of inode numbers.
#[derive(Debug, Clone)]
pub struct Range {
    pub lo: u64,
    pub len: u64,
    /// Directory offsets it covers (key `offset`).
    pub off_lo: u64,
    pub off_hi: u64,
    /// Running mean distance between goal and allocated inode.
    pub mean_dist: f64,
    pub full: bool,
}

/// What the placement knows of one directory.
#[derive(Debug, Clone)]
pub struct DirPlacement {
    gen: u32,
    pub ranges: Vec<Range>,
    /// Bytes of directory per entry when the state was built.
    bytes_per_entry: f64,
    /// Common prefix of the names seen, and the extent of the eight bytes
    /// after it (key `name`).
    prefix: Vec<u8>,
    name_lo: u64,
    name_hi: u64,
    /// No mostly free range was found; do not look again before the
    /// directory reaches this size.
    retry_at: u64,
}

/// The goal handed to the allocator for one new entry.
#[derive(Debug, Clone, Copy)]
pub struct Goal {
    /// The inode number wanted, as a number: placement computes with it
    /// inside the directory's ranges, and the allocator hands out an `Ino`.
    pub ino: u64,
    pub range: usize,
    /// Key `offset`, a reused slot: where its inode must come from to
    /// keep readdir order; None for a goal mapped from the key.
    pub between: Option<Between>,
}

/// Windows of inode numbers (`[lo, hi)`) that keep a reused slot's entry in
/// order: the first free inode in `inside` (a gap among its chunk's
/// inodes), else the last free one in `before`, else the first free one in
/// `after`.
#[derive(Debug, Clone, Copy)]
pub struct Between {
    pub inside: Option<(u64, u64)>,
    pub before: (u64, u64),
    pub after: (u64, u64),
}

/// Placement counters for `ufskit stats`.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct PlacementStats {
    pub directories: u64,
    pub ranges: u64,
    pub placed: u64,
    pub on_goal: u64,
    pub fallbacks: u64,
    pub recovered: u64,
}

#[derive(Default)]
pub struct Placement {
    pub dirs: HashMap<Ino, DirPlacement>,
    pub stats: PlacementStats,
    /// Placed inodes that have no data block yet: their first block
    /// follows the data of the inode before them ([`FsCore::data_pref`]).
    pub no_data_yet: foldhash::HashSet<Ino>,
    /// When a placed inode last made its writer wait for the releases
    /// ([`FsCore::hurry_releases`]).
    pub last_release_wait: Option<std::time::Instant>,
}

/// A writer whose placed inode fell out of order waits for the syncer's
/// round at most this often, and at most this long.
pub const RELEASE_WAIT_EVERY: std::time::Duration = std::time::Duration::from_secs(1);
pub const RELEASE_WAIT: std::time::Duration = std::time::Duration::from_millis(250);

/// At most this many placed inodes wait for their first block; beyond it
/// the set is cleared (a file created and never written loses nothing but
/// the hint).
const MAX_WAITING: usize = 1 << 16;

fn key_u64(bytes: &[u8]) -> u64 {
    let mut k = [0u8; 8];
    let n = bytes.len().min(8);
    k[..n].copy_from_slice(&bytes[..n]);
    u64::from_be_bytes(k)
}

/// An estimate (a fraction of a range, entries from a size) as a whole
/// count. Rust's float-to-integer `as` rounds toward zero and saturates
/// (negative and NaN give 0, beyond `u64::MAX` gives `u64::MAX`), which is
/// the clamping these estimates want; floats have no other conversion.
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
fn whole(x: f64) -> u64 {
    x as u64
}

fn hash_fraction(name: &[u8]) -> f64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    name.hash(&mut h);
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

impl DirPlacement {
    fn note_name(&mut self, name: &[u8]) {
        let common = self
            .prefix
            .iter()
            .zip(name)
            .take_while(|(a, b)| a == b)
            .count();
        if common < self.prefix.len() {
            // The prefix shrank: the old extent was measured after a longer
            // prefix; restart it from the bytes now significant.
            self.prefix.truncate(common);
            self.name_lo = u64::MAX;
            self.name_hi = 0;
        }
        let k = key_u64(&name[common.min(name.len())..]);
        self.name_lo = self.name_lo.min(k);
        self.name_hi = self.name_hi.max(k);
    }

    fn name_fraction(&self, name: &[u8]) -> f64 {
        let p = self.prefix.len().min(name.len());
        let k = key_u64(&name[p..]);
        if self.name_hi <= self.name_lo {
            return 0.5;
        }
        (k.saturating_sub(self.name_lo) as f64 / (self.name_hi - self.name_lo) as f64).min(1.0)
    }
}

impl FsCore {
    /// Whether the inode order applies to directory `ddi`: a key is chosen
    /// and the directory has passed `inodeorder_min` bytes.
    pub fn is_large_dir(&self, ddi: &Dinode) -> bool {
        self.opts.inode_order != InodeOrder::Off
            && ddi.di_size() >= self.opts.inode_order_min.max(DIRBLKSIZ as u64)
    }

    /// The goal inode for a new non-directory entry `name` of directory
    /// `dir`, or None when the policy is off or the directory is small.
    pub fn placement_goal(&mut self, dir: Ino, ddi: &Dinode, name: &[u8]) -> Result<Option<Goal>> {
        let order = self.opts.inode_order;
        if !self.is_large_dir(ddi) {
            return Ok(None);
        }
        if self
            .placement
            .dirs
            .get(&dir)
            .is_none_or(|p| p.gen != ddi.di_gen())
        {
            self.placement_recover(dir, ddi)?;
        }
        let size = ddi.di_size();
        let (slot, chunk) = if order == InodeOrder::Offset {
            self.dir_slot_for(dir, ddi, name.len())?
        } else {
            (0, None)
        };
        let mut p = self.placement.dirs.remove(&dir).expect("recovered above");
        let r = self.goal_in(dir, &mut p, order, size, slot, chunk, name);
        self.placement.dirs.insert(dir, p);
        r
    }

    #[allow(clippy::too_many_arguments)]
    fn goal_in(
        &mut self,
        dir: Ino,
        p: &mut DirPlacement,
        order: InodeOrder,
        size: u64,
        slot: u64,
        chunk: Option<SlotContext>,
        name: &[u8],
    ) -> Result<Option<Goal>> {
        if order == InodeOrder::Name {
            p.note_name(name);
        }
        // A reused slot: any free inode between the last entry of the
        // chunk before and the first of the chunk after keeps readdir
        // order in inode order (the chunk itself is kept sorted); the
        // chunk's own gaps first. Where a neighbour is empty or out of
        // order, a few inode blocks either side stand in for it. The
        // range is the one holding the chunk's entries.
        if let Some(ctx) = chunk.filter(|c| !c.live.is_empty()) {
            let live = &ctx.live;
            let (min, max) = (live[0] as u64, live[live.len() - 1] as u64);
            let near = 4 * self.g.inopb;
            let holds = |r: &Range, x: u64| x >= r.lo && x < r.lo + r.len;
            if let Some(i) = p
                .ranges
                .iter()
                .rposition(|r| holds(r, min) || holds(r, max))
            {
                let r = &p.ranges[i];
                let lo = ctx
                    .prev_max
                    .map(u64::from)
                    .filter(|&q| q < min)
                    .map_or(min.saturating_sub(near).max(r.lo), |q| q + 1);
                let hi = ctx
                    .next_min
                    .map(u64::from)
                    .filter(|&q| q > max)
                    .unwrap_or((max + 1 + near).min(r.lo + r.len));
                let gap = live
                    .windows(2)
                    .find(|w| w[1] > w[0] + 1)
                    .map(|w| w[0] as u64 + 1);
                let between = Between {
                    inside: gap.map(|_| (min + 1, max)),
                    before: (lo, min),
                    after: (max + 1, hi),
                };
                return Ok(Some(Goal {
                    ino: gap.unwrap_or(max + 1),
                    range: i,
                    between: Some(between),
                }));
            }
        }
        let pick = match order {
            InodeOrder::Offset => {
                // The range covering the slot; past the last, a new one.
                match p
                    .ranges
                    .iter()
                    .rposition(|r| slot >= r.off_lo && slot < r.off_hi)
                {
                    Some(i) => Some(i),
                    None if p.ranges.last().is_some_and(|r| slot < r.off_hi) => {
                        // Before every range: entries from before the
                        // directory grew large; the nearest range after it.
                        p.ranges.iter().position(|r| slot < r.off_hi)
                    }
                    None => None,
                }
            }
            _ => p.ranges.iter().rposition(|r| !r.full),
        };
        let i = match pick {
            Some(i) if !(order != InodeOrder::Offset && p.ranges[i].full) => i,
            _ if size < p.retry_at => return Ok(None),
            _ => match self.open_range(dir, p, size, slot)? {
                Some(i) => i,
                None => {
                    p.retry_at = size + size / 4;
                    return Ok(None);
                }
            },
        };
        let r = &p.ranges[i];
        let frac = match order {
            InodeOrder::Offset => {
                (slot.saturating_sub(r.off_lo)) as f64 / (r.off_hi - r.off_lo).max(1) as f64
            }
            InodeOrder::Name => p.name_fraction(name),
            InodeOrder::Hash => hash_fraction(name),
            InodeOrder::Off => unreachable!(),
        };
        let off = whole(frac * r.len as f64).min(r.len - 1);
        Ok(Some(Goal {
            ino: r.lo + off,
            range: i,
            between: None,
        }))
    }

    /// Opens the next range for directory `dir` of `size` bytes: twice its
    /// entries, after the last range (or at the directory's own group),
    /// mostly free and clear of other directories' open ranges.
    fn open_range(
        &mut self,
        dir: Ino,
        p: &mut DirPlacement,
        size: u64,
        slot: u64,
    ) -> Result<Option<usize>> {
        let g = self.g;
        let entries = whole(size as f64 / p.bytes_per_entry.max(8.0));
        let len = (2 * entries)
            .max(MIN_RANGE)
            .min(g.ninodes() / 2)
            .max(g.inopb);
        let start = p
            .ranges
            .iter()
            .map(|r| r.lo + r.len)
            .max()
            .unwrap_or(g.ino_to_cg(dir.get()) * g.ipg);
        let taken: Vec<(u64, u64)> = self
            .placement
            .dirs
            .iter()
            .filter(|(&d, _)| d != dir)
            .flat_map(|(_, q)| {
                q.ranges
                    .iter()
                    .filter(|r| !r.full)
                    .map(|r| (r.lo, r.lo + r.len))
            })
            .collect();
        let step = (len / 4).max(g.inopb);
        let n = g.ninodes();
        let mut best: Option<(u64, u64)> = None;
        let mut lo = start;
        let mut tried = 0u64;
        while tried < n + step {
            if lo + len > n {
                lo = 0;
            }
            let hi = lo + len;
            let clear = !taken.iter().any(|&(a, b)| a < hi && lo < b);
            // The groups' counters bound the window's free inodes: skip
            // without reading maps when even the bound is too small.
            if clear && self.free_bound(lo, hi) > best.map_or(0, |b| b.1) {
                let free = self.free_inodes_in(lo, hi)?;
                if best.is_none_or(|(_, f)| free > f) {
                    best = Some((lo, free));
                }
                if free as f64 >= MOSTLY_FREE * len as f64 {
                    break;
                }
            }
            lo += step;
            tried += step;
        }
        // Less than half free: the inodes are too fragmented (or nearly
        // gone) for a range to help; the ordinary policy takes over.
        let Some((lo, _)) = best.filter(|&(_, f)| 2 * f >= len) else {
            return Ok(None);
        };
        let off_lo = p
            .ranges
            .iter()
            .map(|r| r.off_hi)
            .max()
            .unwrap_or(0)
            .min(slot);
        let off_hi = off_lo + whole(len as f64 * p.bytes_per_entry);
        p.ranges.push(Range {
            lo,
            len,
            off_lo,
            off_hi: off_hi.max(off_lo + DIRBLKSIZ as u64),
            mean_dist: 0.0,
            full: false,
        });
        self.placement.stats.ranges += 1;
        Ok(Some(p.ranges.len() - 1))
    }

    /// An upper bound on the free inodes of `[lo, hi)` from group counters.
    fn free_bound(&self, lo: u64, hi: u64) -> u64 {
        let ipg = self.g.ipg;
        (lo / ipg..hi.div_ceil(ipg))
            .map(|c| {
                let overlap = hi.min((c + 1) * ipg) - lo.max(c * ipg);
                u64::try_from(self.cs[to_index(c)].cs_nifree)
                    .unwrap_or(0)
                    .min(overlap)
            })
            .sum()
    }

    /// Where the first data block of placed inode `ino` should go: right
    /// after the data of the nearest inode below it (up to eight back, with
    /// room left for the ones skipped), wherever that data is (a group's
    /// data area can be full and its files' data elsewhere), so that
    /// reading files in inode order reads their data forwards too, after
    /// churn as when fresh. None for other inodes.
    pub fn data_pref(&mut self, ino: Ino) -> Option<Frag> {
        if !self.placement.no_data_yet.remove(&ino) {
            return None;
        }
        let g = self.g;
        for back in 1..=8u64 {
            let prev = Ino::new(ino.get().checked_sub(back).filter(|&p| p > UFS_ROOTINO)?);
            let Ok(di) = self.read_inode(prev) else {
                continue;
            };
            if !di.is_reg() || di.db(0).is_none() || di.nlink() == 0 {
                continue;
            }
            // Inodes skipped on the way (freed, not yet reused) are taken
            // to have had files of the same size: leave their room.
            let frags = g
                .numfrags(di.di_size().min(g.bsize).next_multiple_of(g.fsize))
                .max(1);
            // A neighbour's pointer is only a hint: one past the file
            // system (or past any address) gives none.
            return di
                .db(0)
                .checked_offset(back * frags)
                .filter(|p| p.get() < g.size);
        }
        None
    }

    /// Allocates the inode for a new entry: the first free one at or after
    /// the goal inside its range, then before it, then the ordinary policy.
    pub fn alloc_placed(&mut self, dir: Ino, goal: Goal) -> Result<Ino> {
        let ino = self.alloc_placed_at(dir, goal)?;
        if self.placement.no_data_yet.len() >= MAX_WAITING {
            self.placement.no_data_yet.clear();
        }
        self.placement.no_data_yet.insert(ino);
        Ok(ino)
    }

    fn alloc_placed_at(&mut self, dir: Ino, goal: Goal) -> Result<Ino> {
        let (lo, hi) = match self
            .placement
            .dirs
            .get(&dir)
            .and_then(|p| p.ranges.get(goal.range))
        {
            Some(r) => (r.lo, r.lo + r.len),
            None => return self.alloc_inode(dir, false),
        };
        let mut got = None;
        if let Some(w) = goal.between {
            if let Some((a, b)) = w.inside {
                got = self.alloc_inode_in(a, b)?;
            }
            if got.is_none() {
                got = self.alloc_inode_last_in(w.before.0, w.before.1)?;
            }
            if got.is_none() {
                got = self.alloc_inode_in(w.after.0, w.after.1)?;
            }
        }
        if got.is_none() && goal.between.is_some() {
            // No free inode fits between the neighbouring chunks: taking
            // one from the range would take another chunk's hole (and that
            // chunk would then take the next one's); one entry out of
            // order costs less. Past the range, as an append would go.
            self.placement.stats.fallbacks += 1;
            self.hurry_releases();
            return match self.alloc_inode_in(hi, self.g.ninodes())? {
                Some(ino) => Ok(ino),
                None => self.alloc_inode(dir, false),
            };
        }
        if got.is_none() {
            got = self.alloc_inode_in(goal.ino.max(lo), hi)?;
        }
        if got.is_none() {
            got = self.alloc_inode_in(lo, goal.ino)?;
        }
        self.placement.stats.placed += 1;
        let Some(r) = self
            .placement
            .dirs
            .get_mut(&dir)
            .and_then(|p| p.ranges.get_mut(goal.range))
        else {
            return self.alloc_inode(dir, false);
        };
        match got {
            Some(ino) => {
                r.mean_dist += (ino.get().abs_diff(goal.ino) as f64 - r.mean_dist) / 32.0;
                if r.mean_dist > FULL_DISTANCE {
                    r.full = true;
                }
                if ino.get() == goal.ino {
                    self.placement.stats.on_goal += 1;
                }
                Ok(ino)
            }
            None => {
                r.full = true;
                self.placement.stats.fallbacks += 1;
                self.hurry_releases();
                // Still keep to the order: the first free inode past the
                // goal anywhere, before the ordinary policy.
                match self.alloc_inode_in(goal.ino, self.g.ninodes())? {
                    Some(ino) => Ok(ino),
                    None => self.alloc_inode(dir, false),
                }
            }
        }
    }

    /// A placed inode fell back out of order: if inodes removed earlier
    /// wait to be released (soft updates free an inode only once the
    /// removal of its name is on disk), the background syncer runs now, so
    /// that the entries made next find them free in their windows. After
    /// half of a 20,000-file directory was removed and as many files made
    /// through the mount, readdir-order locality was 0.944 with the
    /// releases left to the syncer's 30 s interval, 0.993 when they had
    /// been made first (2026-11-28).
    ///
    /// The writer also waits, once it has let the lock go, for a round of
    /// a sync begun after it asked (one already under way may have planned
    /// its writes before the removals it needs): at most [`RELEASE_WAIT`],
    /// and at most once every [`RELEASE_WAIT_EVERY`], as FreeBSD's
    /// `request_cleanup` slows a writer until the releases it needs are
    /// made. Otherwise how many entries fall out of order depends on how
    /// soon the syncer gets a CPU: 0.956-0.961 beside a second test run on
    /// the 2 CPUs when any round ended the wait, 0.990-0.991 beside one
    /// (or `stress-ng --cpu 4 --hdd 2 --fork 2`) with the sync numbered,
    /// 0.99 alone (2026-11-28).
    fn hurry_releases(&mut self) {
        if !self.order.deferred.is_empty() {
            let ticket = self.syncer_bell.hurry();
            let now = std::time::Instant::now();
            if self
                .placement
                .last_release_wait
                .is_none_or(|t| now.duration_since(t) >= RELEASE_WAIT_EVERY)
            {
                self.placement.last_release_wait = Some(now);
                self.writer_waits = Some((RELEASE_WAIT, ticket));
            }
        }
    }

    /// Rebuilds directory `dir`'s placement from the inodes it holds: runs
    /// of its entries' inode numbers with small gaps become its ranges (in
    /// offset order for key `offset`), so a remount goes on where the last
    /// mount stopped.
    pub fn placement_recover(&mut self, dir: Ino, ddi: &Dinode) -> Result<()> {
        let mut ents: Vec<(u64, u64)> = Vec::new(); // (ino, offset)
        let mut p = DirPlacement {
            gen: ddi.di_gen(),
            ranges: Vec::new(),
            bytes_per_entry: 32.0,
            prefix: Vec::new(),
            name_lo: u64::MAX,
            name_hi: 0,
            retry_at: 0,
        };
        let mut first = true;
        self.dir_scan(dir, ddi, 0, |coff, e| {
            if e.ino != 0 && e.name != b"." && e.name != b".." {
                ents.push((u64::from(e.ino), coff + e.off as u64));
                if first {
                    p.prefix = e.name.to_vec();
                    first = false;
                }
                p.note_name(e.name);
            }
            ControlFlow::<()>::Continue(())
        })?;
        if !ents.is_empty() {
            p.bytes_per_entry = ddi.di_size() as f64 / ents.len() as f64;
        }
        ents.sort_unstable();
        // A run: consecutive inode numbers (of this directory) with gaps of
        // less than a few inode blocks between them.
        let gap = 4 * self.g.inopb;
        let mut runs: Vec<&[(u64, u64)]> = Vec::new();
        let mut s = 0;
        for i in 1..=ents.len() {
            if i == ents.len() || ents[i].0 - ents[i - 1].0 > gap {
                runs.push(&ents[s..i]);
                s = i;
            }
        }
        for run in runs.into_iter().filter(|r| r.len() as u64 >= MIN_RANGE / 4) {
            let lo = run[0].0;
            let len = run[run.len() - 1].0 - lo + 1;
            let off_lo = run.iter().map(|e| e.1).min().unwrap_or(0);
            let off_hi = run.iter().map(|e| e.1).max().unwrap_or(0) + 1;
            let fill = run.len() as f64 / len as f64;
            p.ranges.push(Range {
                lo,
                len,
                off_lo,
                off_hi,
                mean_dist: 0.0,
                full: fill > 0.95,
            });
        }
        p.ranges.sort_by_key(|r| (r.off_lo, r.lo));
        self.placement.stats.recovered += 1;
        self.placement.dirs.insert(dir, p);
        Ok(())
    }

    /// Forgets a directory that is gone.
    pub fn placement_forget(&mut self, dir: Ino) {
        self.placement.dirs.remove(&dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dev::SparseDevice;
    use crate::layout::measure;
    use crate::newfs::{newfs, NewfsParams};
    use crate::ops::Fs;
    use crate::{Cred, MountOptions};
    use rand::seq::SliceRandom;
    use rand::SeedableRng;
    use std::sync::Arc;

    fn opts(order: InodeOrder) -> MountOptions {
        MountOptions {
            seed: Some(7),
            inode_order: order,
            inode_order_min: 8 << 10,
            ..Default::default()
        }
    }

    fn name(i: u64) -> Vec<u8> {
        // Random-looking names, as seed 001's dirtest makes them.
        format!("f{:016x}", i.wrapping_mul(0x9E37_79B9_7F4A_7C15)).into_bytes()
    }

    /// Creates `n` files in a new directory, then deletes half at random and
    /// creates as many new ones; returns the readdir locality fresh and
    /// after churn.
    fn fresh_and_churned(dev: &Arc<SparseDevice>, order: InodeOrder, n: u64) -> (f64, f64, u64) {
        let fs = Fs::open(Box::new(dev.clone()), opts(order)).unwrap();
        let d = fs
            .mkdir(fs.root(), order.name().as_bytes(), 0o755, Cred::ROOT)
            .unwrap()
            .ino;
        for i in 0..n {
            fs.mknod(d, &name(i), 0o100644, 0, Cred::ROOT).unwrap();
        }
        let fresh = measure(&fs, d).unwrap().readdir_locality;
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let mut all: Vec<u64> = (0..n).collect();
        all.shuffle(&mut rng);
        for &i in &all[..to_index(n) / 2] {
            fs.unlink(d, &name(i)).unwrap();
        }
        for i in n..n + n / 2 {
            fs.mknod(d, &name(i), 0o100644, 0, Cred::ROOT).unwrap();
        }
        let churned = measure(&fs, d).unwrap().readdir_locality;
        let placed = fs.placement_stats().placed;
        fs.unmount().unwrap();
        (fresh, churned, placed)
    }

    #[test]
    fn offset_order_keeps_readdir_order_in_inode_order_through_churn() {
        let dev = Arc::new(SparseDevice::new(1 << 30));
        newfs(
            &*dev,
            &NewfsParams {
                seed: Some(1),
                time: Some(1),
                ..Default::default()
            },
        )
        .unwrap();
        let mut got = Vec::new();
        for order in InodeOrder::ALL {
            got.push((order, fresh_and_churned(&dev, order, 6000)));
        }
        eprintln!("{got:?}");
        let of = |o: InodeOrder| got.iter().find(|g| g.0 == o).unwrap().1;
        let (off_fresh, off_churn, off_placed) = of(InodeOrder::Off);
        let (o_fresh, o_churn, o_placed) = of(InodeOrder::Offset);
        assert_eq!(off_placed, 0);
        assert!(o_placed > 0);
        assert!(o_fresh >= 0.99 && off_fresh >= 0.99, "{got:?}");
        assert!(o_churn >= 0.99, "offset after churn: {o_churn}");
        assert!(off_churn < 0.9, "FFS's own policy after churn: {off_churn}");
        let (_, h_churn, _) = of(InodeOrder::Hash);
        assert!(h_churn < o_churn);
        let report = crate::fsck::fsck(&*dev, crate::fsck::FsckMode::Check).unwrap();
        assert!(
            report.clean && report.findings.is_empty(),
            "{:?}",
            report.findings
        );
    }

    #[test]
    fn a_remount_recovers_the_ranges_and_churn_keeps_the_order() {
        let dev = Arc::new(SparseDevice::new(1 << 30));
        newfs(
            &*dev,
            &NewfsParams {
                seed: Some(2),
                time: Some(1),
                ..Default::default()
            },
        )
        .unwrap();
        let n = 5000u64;
        let d = {
            let fs = Fs::open(Box::new(dev.clone()), opts(InodeOrder::Offset)).unwrap();
            let d = fs.mkdir(fs.root(), b"big", 0o755, Cred::ROOT).unwrap().ino;
            for i in 0..n {
                fs.mknod(d, &name(i), 0o100644, 0, Cred::ROOT).unwrap();
            }
            fs.unmount().unwrap();
            d
        };
        let fs = Fs::open(Box::new(dev.clone()), opts(InodeOrder::Offset)).unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(9);
        let mut all: Vec<u64> = (0..n).collect();
        all.shuffle(&mut rng);
        for &i in &all[..to_index(n) / 2] {
            fs.unlink(d, &name(i)).unwrap();
        }
        for i in n..n + n / 2 + 500 {
            fs.mknod(d, &name(i), 0o100644, 0, Cred::ROOT).unwrap();
        }
        let st = fs.placement_stats();
        assert_eq!(st.recovered, 1, "{st:?}");
        let r = measure(&fs, d).unwrap();
        assert_eq!(r.entries, n + 500);
        assert!(
            r.readdir_locality >= 0.99,
            "after remount and churn: {r:?} {st:?}"
        );
        fs.unmount().unwrap();
        let report = crate::fsck::fsck(&*dev, crate::fsck::FsckMode::Check).unwrap();
        assert!(
            report.clean && report.findings.is_empty(),
            "{:?}",
            report.findings
        );
    }

    #[test]
    fn small_directories_and_directories_keep_the_ordinary_policy() {
        let dev = Arc::new(SparseDevice::new(256 << 20));
        newfs(
            &*dev,
            &NewfsParams {
                seed: Some(3),
                time: Some(1),
                ..Default::default()
            },
        )
        .unwrap();
        let fs = Fs::open(Box::new(dev.clone()), opts(InodeOrder::Offset)).unwrap();
        let d = fs
            .mkdir(fs.root(), b"small", 0o755, Cred::ROOT)
            .unwrap()
            .ino;
        for i in 0..100 {
            fs.mknod(d, &name(i), 0o100644, 0, Cred::ROOT).unwrap();
            fs.mkdir(d, format!("sub{i}").as_bytes(), 0o755, Cred::ROOT)
                .unwrap();
        }
        assert_eq!(
            fs.placement_stats().placed,
            0,
            "below inodeorder_min nothing is placed"
        );
    }
}
