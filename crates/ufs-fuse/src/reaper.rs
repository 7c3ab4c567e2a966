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
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::doorbell::Doorbell;
use crate::service::log;

/// How long queued forgets wait for a request to apply them.
pub const REAP_DELAY: Duration = Duration::from_millis(20);

/// Rung by the service when it queues a forget.
pub type Bell = Doorbell;

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
        self.bell.stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn report(failed: Vec<(ufs::Ino, ufs::Error)>) {
    for (ino, e) in failed {
        log(format_args!("forget of inode {ino}: {e}"));
    }
}

fn run(fs: &ufs::Fs, bell: &Bell) {
    while bell.wait_rung() {
        // Awake: give the requests REAP_DELAY to apply the queue, then
        // apply what they left, until a period passes with nothing queued.
        loop {
            if !bell.sleep(REAP_DELAY) {
                return;
            }
            let pending = fs.forgets_pending();
            report(fs.apply_forgets());
            if !pending {
                break;
            }
        }
        bell.set_armed(false);
        // A forget queued after the last look rang a bell that was still
        // armed: look again before sleeping.
        if fs.forgets_pending() {
            bell.set_armed(true);
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
