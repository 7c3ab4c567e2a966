//! Forgets no request applied.
//!
//! The kernel's FORGETs arrive on `/dev/fuse` threads of their own. The
//! service queues them in the engine ([`ufs::Fs::forget_later`]), and the
//! next request that changes anything applies them under the lock it takes
//! anyway; applied by the FORGET's own thread, each would contend for the
//! engine lock with the request that follows it (in `rm` of a large
//! directory, a sleep and a cross-CPU wake-up on every other `unlink`).
//! When no such request comes (the last `rm` of a burst), this thread
//! applies them after [`REAP_DELAY`], so an unlinked file's space is free
//! soon whether or not anything else happens.
//!
//! Invariants: the thread sleeps on a condition variable while nothing is
//! queued, and is rung only on the first forget after it went back to
//! sleep (not once per forget); every queued forget is applied at most
//! [`REAP_DELAY`] after the bell rang, or by the unmount after
//! [`Reaper::stop`]; failures are logged, never fatal here.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::service::log;

/// How long queued forgets wait for a request to apply them.
pub const REAP_DELAY: Duration = Duration::from_millis(20);

/// Rung by the service when it queues a forget.
#[derive(Debug, Default)]
pub struct Bell {
    /// The thread is awake (or about to be) and will look at the queue.
    armed: AtomicBool,
    /// Whether the thread must stop; the condition variable's lock.
    stop: Mutex<bool>,
    cv: Condvar,
}

fn lock(m: &Mutex<bool>) -> MutexGuard<'_, bool> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Bell {
    /// A forget was queued: wakes the thread unless it is awake already.
    pub fn ring(&self) {
        if !self.armed.swap(true, Ordering::AcqRel) {
            let _g = lock(&self.stop);
            self.cv.notify_one();
        }
    }
}

/// The thread; [`Reaper::stop`] ends it.
pub struct Reaper {
    bell: Arc<Bell>,
    thread: Option<JoinHandle<()>>,
}

impl Reaper {
    pub fn start(fs: Arc<ufs::Fs>, bell: Arc<Bell>) -> Reaper {
        let b = bell.clone();
        let thread = std::thread::Builder::new()
            .name("ufs-reaper".into())
            .spawn(move || run(&fs, &b))
            .map_err(|e| {
                log(format_args!(
                    "no reaper thread ({e}); forgets wait for the next request"
                ))
            })
            .ok();
        Reaper { bell, thread }
    }

    /// Ends the thread; what is still queued is for the unmount to apply.
    pub fn stop(mut self) {
        *lock(&self.bell.stop) = true;
        self.bell.cv.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn report(failed: Vec<(u64, ufs::Error)>) {
    for (ino, e) in failed {
        log(format_args!("forget of inode {ino}: {e}"));
    }
}

fn run(fs: &ufs::Fs, bell: &Bell) {
    loop {
        {
            let mut stop = lock(&bell.stop);
            while !bell.armed.load(Ordering::Acquire) && !*stop {
                stop = bell.cv.wait(stop).unwrap_or_else(|p| p.into_inner());
            }
            if *stop {
                return;
            }
        }
        // Awake: give the requests REAP_DELAY to apply the queue, then
        // apply what they left, until a period passes with nothing queued.
        loop {
            {
                let stop = lock(&bell.stop);
                let (stop, _) = bell
                    .cv
                    .wait_timeout(stop, REAP_DELAY)
                    .unwrap_or_else(|p| p.into_inner());
                if *stop {
                    return;
                }
            }
            let pending = fs.forgets_pending();
            report(fs.apply_forgets());
            if !pending {
                break;
            }
        }
        bell.armed.store(false, Ordering::Release);
        // A forget queued after the last look rang a bell that was still
        // armed: look again before sleeping.
        if fs.forgets_pending() {
            bell.armed.store(true, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forgets_no_request_applies_are_applied_after_the_delay() {
        let dev = ufs::dev::MemDevice::new(32 << 20);
        ufs::newfs::newfs(&dev, &ufs::newfs::NewfsParams::default()).unwrap();
        let fs = Arc::new(ufs::Fs::open(Box::new(dev), ufs::MountOptions::default()).unwrap());
        let bell = Arc::new(Bell::default());
        let reaper = Reaper::start(fs.clone(), bell.clone());
        for round in 0..3 {
            let name = format!("f{round}");
            let f = fs
                .mknod(fs.root(), name.as_bytes(), 0o100644, 0, ufs::Cred::ROOT)
                .unwrap()
                .ino;
            fs.remember(f);
            fs.unlink(fs.root(), name.as_bytes()).unwrap();
            fs.forget_later(f, 1);
            bell.ring();
            let t = std::time::Instant::now();
            while fs.forgets_pending() && t.elapsed() < Duration::from_secs(5) {
                std::thread::sleep(Duration::from_millis(2));
            }
            assert!(!fs.forgets_pending(), "round {round}: still queued");
            assert!(t.elapsed() >= REAP_DELAY / 2, "applied before the delay");
            assert!(fs.getattr(f).is_err(), "round {round}: inode {f} not freed");
            // The thread goes back to sleep between bursts.
            std::thread::sleep(REAP_DELAY * 3);
        }
        reaper.stop();
    }
}
