//! The engine lock, measured: a mutex that counts how often it was taken,
//! how often a taker found it held and had to wait, how long those waits
//! lasted, and how long it was held in all. `ufskit stats` shows the
//! figures; they say whether requests serialise on the engine (waits) and
//! how much of a run's wall time the engine was busy (held time).
//!
//! Invariants: every hold is counted once, when its guard drops; a wait is
//! counted only when the uncontended attempt (`try_lock`) failed, so an
//! uncontended take costs one atomic add and two clock reads; a taker that
//! finds it held polls for it up to `spin_ns` before it sleeps (a hold is
//! a few microseconds; a futex sleep and wake-up cost more than that on
//! the two sides); the counters
//! are monotonic (relaxed atomics: a snapshot taken during a run may mix
//! counts a few holds apart, never lose one).
use serde::Serialize;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard, TryLockError};
use std::time::Instant;

pub struct EngineLock<T> {
    inner: Mutex<T>,
    /// How long a taker that finds the lock held polls for it before it
    /// sleeps (`-o lockspin`; 0: sleep at once, after std's own short spin).
    spin_ns: u64,
    takes: AtomicU64,
    waits: AtomicU64,
    wait_ns: AtomicU64,
    held_ns: AtomicU64,
}

/// What the lock measured since the mount.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct LockStats {
    /// Times the lock was taken.
    pub takes: u64,
    /// Takes that found it held and waited.
    pub waits: u64,
    /// Nanoseconds spent in those waits, all takers together.
    pub wait_ns: u64,
    /// Nanoseconds it was held, all holds together.
    pub held_ns: u64,
}

/// The engine, held; the hold's time is counted when this drops.
pub struct EngineGuard<'a, T> {
    guard: MutexGuard<'a, T>,
    since: Instant,
    held_ns: &'a AtomicU64,
}

fn nanos_since(t: Instant) -> u64 {
    u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

impl<T> EngineLock<T> {
    pub fn new(value: T, spin_ns: u64) -> EngineLock<T> {
        EngineLock {
            inner: Mutex::new(value),
            spin_ns,
            takes: AtomicU64::new(0),
            waits: AtomicU64::new(0),
            wait_ns: AtomicU64::new(0),
            held_ns: AtomicU64::new(0),
        }
    }

    /// Takes the lock, waiting if another holds it. The flag is true when
    /// an earlier holder panicked (the value may be half changed; the
    /// caller decides what that means).
    pub fn lock(&self) -> (EngineGuard<'_, T>, bool) {
        self.takes.fetch_add(1, Relaxed);
        let (guard, poisoned) = match self.inner.try_lock() {
            Ok(g) => (g, false),
            Err(TryLockError::Poisoned(p)) => (p.into_inner(), true),
            Err(TryLockError::WouldBlock) => {
                let start = Instant::now();
                let r = match self.spin_for_it(start) {
                    Some(r) => r,
                    None => match self.inner.lock() {
                        Ok(g) => (g, false),
                        Err(p) => (p.into_inner(), true),
                    },
                };
                self.waits.fetch_add(1, Relaxed);
                self.wait_ns.fetch_add(nanos_since(start), Relaxed);
                r
            }
        };
        let g = EngineGuard {
            guard,
            since: Instant::now(),
            held_ns: &self.held_ns,
        };
        (g, poisoned)
    }

    /// Polls for the lock for up to `spin_ns` from `start`; None if it
    /// stayed held (the caller then sleeps for it).
    fn spin_for_it(&self, start: Instant) -> Option<(MutexGuard<'_, T>, bool)> {
        if self.spin_ns == 0 {
            return None;
        }
        loop {
            for _ in 0..16 {
                std::hint::spin_loop();
            }
            match self.inner.try_lock() {
                Ok(g) => return Some((g, false)),
                Err(TryLockError::Poisoned(p)) => return Some((p.into_inner(), true)),
                Err(TryLockError::WouldBlock) => {}
            }
            if nanos_since(start) >= self.spin_ns {
                return None;
            }
        }
    }

    pub fn stats(&self) -> LockStats {
        LockStats {
            takes: self.takes.load(Relaxed),
            waits: self.waits.load(Relaxed),
            wait_ns: self.wait_ns.load(Relaxed),
            held_ns: self.held_ns.load(Relaxed),
        }
    }
}

impl<T> Deref for EngineGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T> DerefMut for EngineGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}

impl<T> Drop for EngineGuard<'_, T> {
    fn drop(&mut self) {
        self.held_ns.fetch_add(nanos_since(self.since), Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn a_taker_that_finds_it_held_counts_its_wait() {
        let l = Arc::new(EngineLock::new(0u32, 0));
        let (mut g, poisoned) = l.lock();
        assert!(!poisoned);
        let l2 = Arc::clone(&l);
        let t = std::thread::spawn(move || {
            let (mut g, _) = l2.lock();
            *g += 1;
        });
        // Once the other thread has counted its take it has found the
        // lock held (this thread holds it): it waits from then on.
        while l.stats().takes < 2 {
            std::thread::yield_now();
        }
        std::thread::sleep(Duration::from_millis(50));
        *g += 1;
        drop(g);
        t.join().unwrap();
        let s = l.stats();
        assert_eq!(s.takes, 2);
        assert_eq!(s.waits, 1);
        assert!(s.wait_ns > 0, "waited {} ns", s.wait_ns);
        assert!(s.held_ns >= 50_000_000, "held {} ns", s.held_ns);
        assert_eq!(*l.lock().0, 2);
    }

    #[test]
    fn uncontended_takes_do_not_wait() {
        let l = EngineLock::new((), 10_000);
        for _ in 0..10 {
            drop(l.lock());
        }
        let s = l.stats();
        assert_eq!((s.takes, s.waits, s.wait_ns), (10, 0, 0));
    }

    #[test]
    fn a_panicked_holder_leaves_it_flagged() {
        let l = Arc::new(EngineLock::new(0u32, 0));
        let l2 = Arc::clone(&l);
        let _ = std::thread::spawn(move || {
            let _g = l2.lock();
            panic!("half-way");
        })
        .join();
        assert!(l.lock().1);
    }
}
