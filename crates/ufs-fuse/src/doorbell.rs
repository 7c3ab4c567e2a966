//! The bell that wakes a helper thread which sleeps while it has nothing
//! to do: the reaper (forgets no request applied) and the CPU latency
//! holder (requests flowing) both use it.
//!
//! Invariants: `ring` takes the lock and wakes the thread only when the
//! bell was not armed already (once per burst, not once per event; a ring
//! while armed is one atomic swap); the thread disarms the bell itself when
//! it goes back to sleep; once stopped, every wait returns at once.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

#[derive(Debug, Default)]
pub struct Doorbell {
    /// The thread is awake (or about to be).
    armed: AtomicBool,
    /// Whether the thread must stop; the condition variable's lock.
    stop: Mutex<bool>,
    cv: Condvar,
}

impl Doorbell {
    fn lock(&self) -> MutexGuard<'_, bool> {
        self.stop.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wakes the thread unless it is awake already.
    pub fn ring(&self) {
        if !self.armed.swap(true, Ordering::AcqRel) {
            let _g = self.lock();
            self.cv.notify_one();
        }
    }

    /// Whether the thread is awake (or about to be).
    pub fn is_armed(&self) -> bool {
        self.armed.load(Ordering::Acquire)
    }

    /// The thread goes back to sleep (or, with `true`, stays awake).
    pub fn set_armed(&self, armed: bool) {
        self.armed.store(armed, Ordering::Release);
    }

    /// The thread sleeps until the bell rings; `false` once stopped.
    pub fn wait_rung(&self) -> bool {
        let mut stop = self.lock();
        while !self.armed.load(Ordering::Acquire) && !*stop {
            stop = self.cv.wait(stop).unwrap_or_else(|p| p.into_inner());
        }
        !*stop
    }

    /// The thread sleeps for `d`; `false` once stopped (at once).
    pub fn sleep(&self, d: Duration) -> bool {
        let stop = self.lock();
        if *stop {
            return false;
        }
        let (stop, _) = self
            .cv
            .wait_timeout(stop, d)
            .unwrap_or_else(|p| p.into_inner());
        !*stop
    }

    /// Tells the thread to stop, waking it wherever it sleeps.
    pub fn stop(&self) {
        *self.lock() = true;
        self.cv.notify_all();
    }
}
