//! Keeping the soft-updates state within its bound without a request
//! writing the world: FreeBSD's `softdep_speedup` and `request_cleanup`
//! (sys/ufs/ffs/ffs_softdep.c). A changing operation that ends with the
//! ordering state past its bound ([`crate::cache::BufferCache::ordering_full`])
//! asks the background syncer to run now instead of at its next interval;
//! past twice the bound the writer also waits, without the engine lock,
//! for the syncer to finish a round (so writers are slowed to the pace the
//! disk takes the state away); past four times, or with no syncer at all
//! (the library used without a mount), the writer makes everything
//! durable itself, as before, so memory stays bounded whatever happens.
//!
//! Invariants: the syncer attaches before it waits and detaches when it
//! stops, and a detached bell never makes a writer wait; a writer waits
//! at most [`WRITER_WAIT`] per operation; the syncer wakes for a hurry at
//! once and otherwise once per interval.
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The longest a writer waits for the syncer at the end of one operation.
pub const WRITER_WAIT: Duration = Duration::from_millis(50);

/// How far past the bound the state may go before writers wait for the
/// syncer, and before a writer writes everything itself.
pub const WAIT_FACTOR: u64 = 2;
pub const WRITE_ALL_FACTOR: u64 = 4;

#[derive(Debug, Default)]
struct State {
    attached: bool,
    hurry: bool,
    stop: bool,
    /// Background syncs begun (numbered from 1).
    syncs: u64,
    /// The number of the sync whose round finished last (writers wait for
    /// a round of a sync begun after they asked).
    round_of: u64,
}

/// What a writer that hurried the syncer waits for: a round of a sync
/// numbered above this one (a sync already under way when the writer
/// asked may have planned its writes before the writer's changes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket(u64);

/// The doorbell between writers and the background syncer.
#[derive(Debug, Default)]
pub struct SyncerBell {
    state: Mutex<State>,
    to_syncer: Condvar,
    to_writers: Condvar,
}

/// Why the syncer woke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// Its interval passed.
    Interval,
    /// A writer found the ordering state past its bound.
    Hurry,
    /// The mount is going away.
    Stop,
}

impl SyncerBell {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A background syncer serves this file system from now on.
    pub fn attach(&self) {
        let mut s = self.state();
        s.attached = true;
        s.stop = false;
    }

    /// The syncer is gone: writers no longer wait for it (and those
    /// waiting go on).
    pub fn detach(&self) {
        self.state().attached = false;
        self.to_writers.notify_all();
    }

    /// Whether a syncer serves this file system.
    pub fn attached(&self) -> bool {
        self.state().attached
    }

    /// Tells the syncer to stop; it sees it at its next wait.
    pub fn stop(&self) {
        self.state().stop = true;
        self.to_syncer.notify_all();
    }

    /// The syncer: waits until its interval passed since `last`, a writer
    /// asks it to hurry, or it is told to stop.
    pub fn wait_for_work(&self, last: Instant, interval: Duration) -> Wake {
        let mut s = self.state();
        loop {
            if s.stop {
                return Wake::Stop;
            }
            if std::mem::take(&mut s.hurry) {
                return Wake::Hurry;
            }
            let left = interval.saturating_sub(last.elapsed());
            if left.is_zero() {
                return Wake::Interval;
            }
            s = self
                .to_syncer
                .wait_timeout(s, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// A background sync begins: called under the engine lock, in the
    /// hold that fixes what the sync is to write.
    pub fn sync_begins(&self) {
        self.state().syncs += 1;
    }

    /// The syncer finished a round of the sync begun last: writers waiting
    /// for one go on.
    pub fn round_done(&self) {
        let mut s = self.state();
        s.round_of = s.syncs;
        drop(s);
        self.to_writers.notify_all();
    }

    /// A writer found the state past its bound (or needs releases made):
    /// the syncer runs now. Called under the engine lock; the ticket is
    /// what [`wait_for_round`](Self::wait_for_round) waits past.
    pub(crate) fn hurry(&self) -> Ticket {
        let mut s = self.state();
        s.hurry = true;
        let t = Ticket(s.syncs);
        drop(s);
        self.to_syncer.notify_all();
        t
    }

    /// A writer waits (without the engine lock) until a sync begun after
    /// its `ticket` finishes a round, at most `max`; at once if no syncer
    /// is attached.
    pub(crate) fn wait_for_round(&self, ticket: Ticket, max: Duration) {
        let s = self.state();
        if !s.attached {
            return;
        }
        let _ = self
            .to_writers
            .wait_timeout_while(s, max, |s| s.attached && s.round_of <= ticket.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn the_syncer_wakes_for_a_hurry_at_once_and_for_its_interval_otherwise() {
        let bell = Arc::new(SyncerBell::default());
        bell.attach();
        let start = Instant::now();
        assert_eq!(
            bell.wait_for_work(start, Duration::from_millis(30)),
            Wake::Interval
        );
        assert!(start.elapsed() >= Duration::from_millis(30));
        let b = bell.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            b.hurry();
        });
        let start = Instant::now();
        assert_eq!(
            bell.wait_for_work(start, Duration::from_secs(30)),
            Wake::Hurry
        );
        assert!(start.elapsed() < Duration::from_secs(5));
        t.join().unwrap();
        bell.stop();
        assert_eq!(
            bell.wait_for_work(Instant::now(), Duration::from_secs(30)),
            Wake::Stop
        );
    }

    #[test]
    fn a_writer_waits_for_a_round_only_while_a_syncer_is_attached() {
        let bell = Arc::new(SyncerBell::default());
        // No syncer: no wait.
        let start = Instant::now();
        bell.wait_for_round(bell.hurry(), Duration::from_secs(10));
        assert!(start.elapsed() < Duration::from_secs(1));
        bell.attach();
        // A round of a sync begun after the hurry ends the wait; a round
        // of the sync under way when the writer asked does not.
        bell.sync_begins();
        let ticket = bell.hurry();
        let b = bell.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            b.round_done();
            std::thread::sleep(Duration::from_millis(20));
            b.sync_begins();
            b.round_done();
        });
        let start = Instant::now();
        bell.wait_for_round(ticket, Duration::from_secs(10));
        assert!(start.elapsed() >= Duration::from_millis(35));
        assert!(start.elapsed() < Duration::from_secs(5));
        t.join().unwrap();
        // Without a round, the wait ends at its bound.
        let start = Instant::now();
        bell.wait_for_round(bell.hurry(), Duration::from_millis(30));
        assert!(start.elapsed() >= Duration::from_millis(30));
        // A syncer going away releases a waiting writer.
        let b = bell.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            b.detach();
        });
        let start = Instant::now();
        bell.wait_for_round(bell.hurry(), Duration::from_secs(10));
        assert!(start.elapsed() < Duration::from_secs(5));
        t.join().unwrap();
    }
}
