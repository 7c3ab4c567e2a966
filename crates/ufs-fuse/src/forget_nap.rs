//! `/dev/fuse` threads nap after a read that brought FORGETs, while the
//! io_uring rings carry every other request, so the kernel's forgets come
//! in batches.
//!
//! Why: with io_uring, `/dev/fuse` carries little but FORGETs, one per
//! inode the kernel drops (one per file of an `rm -rf` or an unlink loop).
//! Read as they come, each wakes a thread that then takes a CPU from the
//! program or from its ring thread (20,000 unlinks in one directory:
//! 20,000 wake-ups of these threads, 4,500 ring threads preempted, 33-35
//! µs per unlink). A thread that naps [`NAP`] after a read with forgets
//! lets the next ones gather in the kernel, which hands them over in one
//! read (FUSE_BATCH_FORGET): about 2,000 wake-ups and 24 µs per unlink.
//!
//! Invariants:
//! - A thread naps once per read (reads are told apart by the request's
//!   `unique`), after applying that read's first forget, and only once the
//!   rings have served a request: before that, these threads serve every
//!   request, and none may wait behind a nap.
//! - No client request waits on a forget, but two things wait on what the
//!   forgets free: `statfs` (removed files count as free once forgotten)
//!   and an allocation that found the disk full. Both call
//!   [`ForgetNap::hurry`] when removed files still hold space: every nap
//!   ends at once and none starts for [`HURRY`], so the forgets queued in
//!   the kernel are read without delay.
use std::cell::Cell;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::requests::Requests;

/// How long a thread naps after a read with forgets.
pub const NAP: Duration = Duration::from_millis(4);

/// How long no thread naps after [`ForgetNap::hurry`].
pub const HURRY: Duration = Duration::from_millis(20);

#[derive(Debug, Default)]
struct Napping {
    /// Threads napping now.
    threads: u32,
    /// Until when no nap starts, and napping threads wake.
    hurry_until: Option<Instant>,
}

impl Napping {
    fn hurried(&self) -> bool {
        self.hurry_until.is_some_and(|t| Instant::now() < t)
    }
}

/// The naps of one mount's `/dev/fuse` threads.
#[derive(Debug, Default)]
pub struct ForgetNap {
    napping: Mutex<Napping>,
    wake: Condvar,
}

thread_local! {
    /// The `unique` of the last read whose forgets this thread applied.
    static LAST_READ: Cell<Option<u64>> = const { Cell::new(None) };
}

impl ForgetNap {
    fn lock(&self) -> std::sync::MutexGuard<'_, Napping> {
        self.napping.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A `/dev/fuse` thread applied a forget of the read `unique`; naps if
    /// it is that read's first and `rings_live`. Counts each nap.
    pub fn after_forget(&self, unique: u64, rings_live: bool, requests: &Requests) {
        if !rings_live || LAST_READ.replace(Some(unique)) == Some(unique) {
            return;
        }
        let mut g = self.lock();
        if g.hurried() {
            return;
        }
        g.threads += 1;
        requests
            .forget_naps
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (mut g, _) = self
            .wake
            .wait_timeout_while(g, NAP, |n| !n.hurried())
            .unwrap_or_else(|p| p.into_inner());
        g.threads -= 1;
    }

    /// Ends every nap now and keeps new ones off for [`HURRY`]; whether a
    /// thread was napping (then forgets may still wait in the kernel).
    pub fn hurry(&self) -> bool {
        let mut g = self.lock();
        g.hurry_until = Some(Instant::now() + HURRY);
        let napping = g.threads > 0;
        drop(g);
        self.wake.notify_all();
        napping
    }

    /// Threads napping now (for tests).
    pub fn napping(&self) -> u32 {
        self.lock().threads
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn one_nap_per_read_and_none_before_the_rings_serve() {
        let nap = ForgetNap::default();
        let r = Requests::default();
        nap.after_forget(1, false, &r);
        assert_eq!(r.forget_naps.load(std::sync::atomic::Ordering::Relaxed), 0);
        let t = Instant::now();
        nap.after_forget(2, true, &r);
        assert!(t.elapsed() >= NAP);
        // The rest of the same read's forgets: no nap.
        let t = Instant::now();
        nap.after_forget(2, true, &r);
        nap.after_forget(2, true, &r);
        assert!(t.elapsed() < NAP);
        nap.after_forget(3, true, &r);
        assert_eq!(r.forget_naps.load(std::sync::atomic::Ordering::Relaxed), 2);
    }

    #[test]
    fn hurry_ends_a_nap_at_once_and_keeps_new_ones_off() {
        let nap = Arc::new(ForgetNap::default());
        let r = Arc::new(Requests::default());
        let (n2, r2) = (nap.clone(), r.clone());
        let t = std::thread::spawn(move || {
            // A long nap would show: hurry must end it.
            for unique in 10..20 {
                n2.after_forget(unique, true, &r2);
            }
        });
        while nap.napping() == 0 {
            std::thread::yield_now();
        }
        let start = Instant::now();
        assert!(nap.hurry());
        t.join().unwrap();
        assert!(start.elapsed() < NAP * 5, "{:?}", start.elapsed());
        assert_eq!(nap.napping(), 0);
        // Hurried: nobody napping, and the next read does not nap.
        let start = Instant::now();
        nap.after_forget(99, true, &r);
        assert!(start.elapsed() < NAP);
    }
}
