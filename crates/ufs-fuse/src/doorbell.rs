//! The bell that wakes a helper thread which sleeps while it has nothing
//! to do: the reaper (forgets no request applied), and the threads that
//! watch the request flow (the CPU latency holder, the hand-off polling
//! watcher) through a [`RequestBell`] and a [`FlowThread`].
//!
//! Invariants: `ring` takes the lock and wakes the thread only when the
//! bell was not armed already (once per burst, not once per event; a ring
//! while armed is one atomic swap); the thread disarms the bell itself when
//! it goes back to sleep; once stopped, every wait returns at once. A
//! request bell rings only while enabled: from its thread's start to its
//! stop (or until the thread disables it for good).
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::service::log;

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

/// A [`Doorbell`] that every request touches while enabled: a thread that
/// watches the request flow sleeps on it while the mount is idle, and
/// the first request after that wakes it. A touch while the thread is
/// awake is one relaxed load and one acquire load.
#[derive(Debug, Default)]
pub struct RequestBell {
    pub(crate) bell: Doorbell,
    enabled: AtomicBool,
}

impl RequestBell {
    /// A request arrived: wakes the thread if it sleeps.
    #[inline]
    pub fn touch(&self) {
        if self.enabled.load(Ordering::Relaxed) && !self.bell.is_armed() {
            self.bell.ring();
        }
    }

    /// Requests no longer ring (the thread gave up, or is stopping).
    pub fn disable(&self) {
        self.enabled.store(false, Ordering::Release);
    }
}

/// The thread that watches a [`RequestBell`]; [`FlowThread::stop`] ends it.
pub struct FlowThread {
    thread: Option<JoinHandle<()>>,
}

impl FlowThread {
    /// Runs `run` on a thread named `name`, then lets requests ring `rb`;
    /// None, with a log line starting with `what`, when no thread can be
    /// made.
    pub fn start(
        rb: &RequestBell,
        name: &str,
        what: &str,
        run: impl FnOnce() + Send + 'static,
    ) -> Option<FlowThread> {
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(run)
            .map_err(|e| log(format_args!("{what}: no thread ({e})")))
            .ok()?;
        rb.enabled.store(true, Ordering::Release);
        Some(FlowThread {
            thread: Some(thread),
        })
    }

    /// Stops the thread and waits for it; the bell is left disabled and
    /// disarmed.
    pub fn stop(mut self, rb: &RequestBell) {
        rb.disable();
        rb.bell.stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        rb.bell.set_armed(false);
    }
}

/// Tests: polls `what` every millisecond for up to 5 s; whether it came
/// true (for the flow threads' tests).
#[cfg(test)]
pub(crate) fn wait_for(what: impl Fn() -> bool) -> bool {
    let start = std::time::Instant::now();
    while start.elapsed() < Duration::from_secs(5) {
        if what() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    false
}
