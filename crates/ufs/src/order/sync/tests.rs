//! The write-ordering rules, on a bare device under a buffer cache (no
//! file system): what a held region writes, and what a background sync
//! plans.
use super::*;
use crate::dev::{BlockDevice, MemDevice};
use crate::order::WriteMode;
use std::sync::Arc;

const FSIZE: u64 = 4096;
const LEN: usize = 4096;
/// A buffer other changes wait for, and the buffer holding them.
const NEEDED: Frag = Frag::new(10);
const HOLDER: Frag = Frag::new(20);

fn softdep_cache() -> (Arc<MemDevice>, BufferCache) {
    let dev = Arc::new(MemDevice::new(1 << 20));
    let mut c = BufferCache::new(Box::new(dev.clone()), FSIZE, 16 << 20);
    c.set_mode(WriteMode::Softdep);
    (dev, c)
}

/// A change to the region `[roff, roff+256)` of HOLDER, filling it with
/// `fill`, that waits for `needs`.
fn change(c: &mut BufferCache, roff: usize, needs: &[ChangeId], fill: u8) -> ChangeId {
    let (id, b) = c
        .modify_tracked(HOLDER, LEN, BlockKind::Inode, roff, 256, needs, Vec::new())
        .unwrap();
    b[roff..roff + 256].fill(fill);
    id
}

/// A change to NEEDED (unheld: it may go with the buffer's next write).
fn needed_change(c: &mut BufferCache, fill: u8) -> ChangeId {
    let (id, b) = c
        .modify_tracked(NEEDED, LEN, BlockKind::Data, 0, 8, &[], Vec::new())
        .unwrap();
    b[..8].fill(fill);
    id
}

fn on_disk(dev: &MemDevice, addr: Frag, roff: usize) -> u8 {
    let mut b = [0u8; 256];
    dev.read_at(addr.get() * FSIZE + roff as u64, &mut b)
        .unwrap();
    assert!(b.iter().all(|&x| x == b[0]), "a region is written whole");
    b[0]
}

#[test]
fn a_change_with_nothing_to_wait_for_behind_a_held_one_is_that_one() {
    let (dev, mut c) = softdep_cache();
    let n = needed_change(&mut c, 9);
    let held = change(&mut c, 0, &[n], 1);
    assert!(held.is_some());
    let pending = c.pending();
    // A second change to the region, needing nothing: it cannot go before
    // the first, and goes with it, so it is the same change and costs the
    // ordering state nothing.
    let next = change(&mut c, 0, &[], 2);
    assert_eq!(next, held, "the later change is the held one");
    assert_eq!(c.pending(), pending, "no new change is recorded");
    // Written while the need is not durable: the region as it was before
    // both.
    c.write_buf(HOLDER).unwrap();
    assert_eq!(on_disk(&dev, HOLDER, 0), 0);
    assert!(!c.is_durable(held));
    // Once the need is durable both go, in the state the second left.
    c.write_buf(NEEDED).unwrap();
    c.flush().unwrap();
    assert!(c.is_durable(n));
    c.write_buf(HOLDER).unwrap();
    c.flush().unwrap();
    assert_eq!(on_disk(&dev, HOLDER, 0), 2);
    assert!(c.is_durable(held));
    assert_eq!(c.pending(), 0);
}

#[test]
fn a_change_that_waits_for_something_new_is_its_own() {
    let (_dev, mut c) = softdep_cache();
    let n = needed_change(&mut c, 9);
    let first = change(&mut c, 0, &[n], 1);
    c.write_buf(NEEDED).unwrap();
    c.flush().unwrap();
    // NEEDED changes again after its write: a new need, so a new change
    // that waits for it behind the first.
    let m = needed_change(&mut c, 8);
    assert_ne!(m, n);
    let second = change(&mut c, 0, &[m], 2);
    assert!(second > first);
    c.write_buf(HOLDER).unwrap();
    c.flush().unwrap();
    assert!(c.is_durable(first) && !c.is_durable(second));
}

#[test]
fn a_background_sync_plans_an_old_change_that_can_go_beside_a_new_one_that_waits() {
    let (_dev, mut c) = softdep_cache();
    let n = needed_change(&mut c, 9);
    let old = change(&mut c, 0, &[n], 1);
    assert!(old <= c.last_change());
    c.write_buf(NEEDED).unwrap();
    c.flush().unwrap();
    // The sync starts here: it must make `old` durable.
    let upto = c.last_change();
    // Meanwhile another region of the same buffer gets a change that
    // waits for a new one.
    let m = needed_change(&mut c, 8);
    let new = change(&mut c, 256, &[m], 2);
    assert!(new > upto);
    let (plan, more) = c.background_plan_part(Frag::new(0), 1000, upto);
    assert!(more.is_none());
    assert!(
        plan.contains(&HOLDER),
        "the buffer holding the old change that can go is planned: {plan:?}"
    );
    for a in plan {
        c.write_buf(a).unwrap();
    }
    c.flush().unwrap();
    assert!(
        c.durable_upto(upto),
        "one round makes the old change durable"
    );
    assert!(!c.is_durable(new) || c.is_durable(m));
    // A sync that began before the old change does not plan it for it.
    let (_dev, mut c) = softdep_cache();
    let n = needed_change(&mut c, 9);
    let before = c.last_change();
    change(&mut c, 0, &[n], 1);
    c.write_buf(NEEDED).unwrap();
    c.flush().unwrap();
    let m = needed_change(&mut c, 8);
    change(&mut c, 256, &[m], 2);
    let (plan, _) = c.background_plan_part(Frag::new(0), 1000, before);
    assert!(!plan.contains(&HOLDER), "{plan:?}");
}

/// Makes a 3-fragment run at 40 filled with 7s, grows it in place to 5
/// and moves it to an 8-fragment run at 80 (`ffs_realloccg`'s two ways to
/// grow a file's last block); returns the moved run's bytes.
fn grow_and_move(c: &mut BufferCache) -> Vec<u8> {
    let b = c.create(Frag::new(40), 3 * LEN, BlockKind::Data).unwrap();
    assert!(b.iter().all(|&x| x == 0), "a new buffer is zeroed");
    b.fill(7);
    c.resize(Frag::new(40), 3 * LEN, 5 * LEN, BlockKind::Data)
        .unwrap();
    assert_eq!(c.stats().bytes_cached, 5 * LEN as u64);
    c.relocate(
        Frag::new(40),
        5 * LEN,
        Frag::new(80),
        8 * LEN,
        BlockKind::Data,
    )
    .unwrap();
    let moved = c
        .read(Frag::new(80), 8 * LEN, BlockKind::Data)
        .unwrap()
        .to_vec();
    assert!(
        moved[..3 * LEN].iter().all(|&x| x == 7),
        "the written bytes"
    );
    assert!(moved[3 * LEN..].iter().all(|&x| x == 0), "zero past them");
    moved
}

/// A file's fragment tail grown in place and then moved to a new run (what
/// `ffs_realloccg` does as a file grows): the bytes move with it,
/// zero-extended, the old place is no longer cached, and the cache counts
/// exactly the memory its buffers hold, so `cache=` bounds it.
#[test]
fn new_and_grown_buffers_from_warm_memory_hold_what_fresh_ones_would() {
    static STOCK: crate::cache::warm::Warm = crate::cache::warm::Warm::new();
    let (dev, mut c) = softdep_cache();
    c.set_warm_stock(&STOCK);
    let mut maker = crate::cache::warm::Maker::new(&STOCK);
    maker.step();
    for _ in 0..4 {
        for n in [3, 5, 8] {
            STOCK.take(n * LEN);
        }
    }
    while maker.step() {}
    let before = STOCK.stats().hits;
    let moved = grow_and_move(&mut c);
    assert_eq!(
        STOCK.stats().hits - before,
        3,
        "create, growth and move from the stock"
    );
    assert_eq!(
        c.stats().bytes_cached,
        8 * LEN as u64,
        "capacity counted exactly"
    );
    c.sync().unwrap();
    let mut disk = vec![0u8; 8 * LEN];
    dev.read_at(80 * FSIZE, &mut disk).unwrap();
    assert_eq!(disk, moved);
    // Trimmed or dropped, the cache gives the stock back.
    c.drain_warm();
    assert_eq!(STOCK.stocked_bytes(), 0);
}

#[test]
fn a_grown_and_moved_fragment_run_keeps_its_bytes_and_its_count() {
    let (dev, mut c) = softdep_cache();
    let moved = grow_and_move(&mut c);
    assert_eq!(c.stats().bytes_cached, 8 * LEN as u64, "only the new run");
    c.sync().unwrap();
    let mut disk = vec![0u8; 8 * LEN];
    dev.read_at(80 * FSIZE, &mut disk).unwrap();
    assert_eq!(disk, moved, "written where it moved");
    let mut old = vec![0u8; LEN];
    dev.read_at(40 * FSIZE, &mut old).unwrap();
    assert!(
        old.iter().all(|&x| x == 0),
        "nothing written at the old run"
    );
    c.discard(Frag::new(80), 8);
    assert_eq!(c.stats().bytes_cached, 0);
}

/// Two dead directories whose blocks' changes each inode change waits for
/// crosswise: A's inode holds a change waiting for B's block, B's inode
/// one waiting for A's block (a directory moved out of the other, each
/// time the old parent's link count waits for the moved one's `..`).
/// A's blocks may ride on A's zeroing; B's may not then ride on B's: B's
/// waits for A's block, which rides on A's zeroing, which waits for B's
/// block. Found by pjdfstest through the mount: the unmount's sync made no
/// progress and the file system stayed unclean.
#[test]
fn a_dead_directory_never_rides_on_a_change_its_riders_wait_for() {
    const DIR_A: Frag = Frag::new(30);
    const DIR_B: Frag = Frag::new(31);
    let (_dev, mut c) = softdep_cache();
    let dir_change = |c: &mut BufferCache, addr: Frag| {
        let (id, b) = c
            .modify_tracked(addr, LEN, BlockKind::Dir, 0, 512, &[], Vec::new())
            .unwrap();
        b[..12].fill(addr.get().to_le_bytes()[0]);
        id
    };
    let xa = dir_change(&mut c, DIR_A);
    let xb = dir_change(&mut c, DIR_B);
    // The inodes of A (region 0) and B (region 256), each waiting for the
    // other's block; their zeroing, needing nothing more, joins them.
    let a1 = change(&mut c, 0, &[xb], 1);
    let b1 = change(&mut c, 256, &[xa], 2);
    let a2 = change(&mut c, 0, &[], 0);
    let b2 = change(&mut c, 256, &[], 0);
    assert_eq!((a2, b2), (a1, b1));
    // A removed: its block's change rides on A's zeroing (nothing there
    // waits for it).
    assert!(c.abandon_dir_blocks(DIR_A, 1, a2));
    // B removed: its block's change may not ride on B's zeroing, which
    // waits for A's block, carried by A's zeroing, which waits for B's.
    assert!(
        !c.abandon_dir_blocks(DIR_B, 1, b2),
        "a cycle: B's zeroing would wait for itself"
    );
    // So B's block is written as any other, and the sync finishes.
    c.sync().expect("a sync makes progress");
    assert_eq!(c.pending(), 0);
}
