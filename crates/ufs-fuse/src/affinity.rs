//! Follow-the-client CPU placement for the request threads.
//!
//! A FUSE request is a synchronous round trip: the client blocks while a
//! request thread serves it, then the thread blocks while the client runs.
//! When the two sit on different CPUs every round trip wakes a sleeping
//! CPU twice; on virtual machines whose idle vCPUs halt (no guest halt
//! polling) each such wake costs tens of microseconds, and a stat of a
//! missing name took 64 µs instead of 13 µs on the two-vCPU test machine.
//! The scheduler does not co-locate the pair by itself because the wake-up
//! is not marked synchronous, so each request thread moves itself: at most
//! every [`RESAMPLE`] it reads the CPU the requesting thread last ran on
//! (`/proc/PID/stat`, field 39) and, if that CPU is allowed and differs
//! from where the thread is pinned, pins itself there. The same idea as
//! receive flow steering in networking: process a request on the CPU of
//! the thread that waits for it.
//!
//! Invariants: a request thread is only ever pinned to a CPU that was in
//! the daemon's affinity mask when the mount started ([`Follower::new`]);
//! failures to read `/proc` or to set the affinity leave the placement
//! unchanged and are not errors (this is a hint, never a correctness
//! matter); requests from the kernel itself (pid 0) are ignored.

use std::cell::Cell;
use std::time::{Duration, Instant};

use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::Pid;

/// How often a request thread looks again at where its client runs.
pub const RESAMPLE: Duration = Duration::from_millis(10);

thread_local! {
    /// When this thread last sampled its client, and the CPU it is pinned
    /// to (-1: not pinned by us).
    static STATE: Cell<(Option<Instant>, i32)> = const { Cell::new((None, -1)) };
}

/// The policy, shared by every request thread of one mount.
#[derive(Debug, Clone)]
pub struct Follower {
    /// CPUs the daemon may use (its mask at mount time).
    allowed: CpuSet,
}

impl Follower {
    /// `None` when the mask cannot be read or allows only one CPU (then
    /// there is nothing to choose).
    pub fn new() -> Option<Follower> {
        let allowed = sched_getaffinity(Pid::from_raw(0)).ok()?;
        let n = (0..CpuSet::count()).filter(|&c| allowed.is_set(c).unwrap_or(false)).count();
        (n > 1).then_some(Follower { allowed })
    }

    /// Called at the start of every request from process `pid`.
    pub fn follow(&self, pid: u32) {
        if pid == 0 {
            return;
        }
        let (last, pinned) = STATE.with(Cell::get);
        let now = Instant::now();
        if last.is_some_and(|t| now.duration_since(t) < RESAMPLE) {
            return;
        }
        STATE.with(|s| s.set((Some(now), pinned)));
        let Some(cpu) = client_cpu(pid) else { return };
        if cpu as i32 == pinned || !self.allowed.is_set(cpu).unwrap_or(false) {
            return;
        }
        let mut set = CpuSet::new();
        if set.set(cpu).is_err() {
            return;
        }
        if sched_setaffinity(Pid::from_raw(0), &set).is_ok() {
            STATE.with(|s| s.set((Some(now), cpu as i32)));
        }
    }
}

/// The CPU thread `pid` last ran on, from `/proc/PID/stat`.
fn client_cpu(pid: u32) -> Option<usize> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_processor(&stat)
}

/// Field 39 ("processor") of a `/proc/PID/stat` line. The command name
/// (field 2) is in parentheses and may itself hold spaces and ')', so
/// counting starts after the last ')'.
fn parse_processor(stat: &str) -> Option<usize> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // Field 3 (state) is the first after the name; 39 - 3 = 36.
    rest.split_ascii_whitespace().nth(36)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn processor_field_is_found_after_an_awkward_name() {
        let fields: Vec<String> = (3..=52).map(|i| if i == 39 { "7".to_string() } else { i.to_string() }).collect();
        let line = format!("1234 (a) b (c) {}\n", fields.join(" "));
        assert_eq!(parse_processor(&line), Some(7));
        assert_eq!(parse_processor("1234 (x) S 1 2"), None);
        assert_eq!(parse_processor("garbage"), None);
    }

    #[test]
    fn own_cpu_is_readable_and_allowed() {
        let me = std::process::id();
        let cpu = client_cpu(me).expect("own /proc stat");
        let allowed = sched_getaffinity(Pid::from_raw(0)).unwrap();
        assert!(allowed.is_set(cpu).unwrap());
    }

    #[test]
    fn following_pins_the_thread_to_the_clients_cpu() {
        let Some(f) = Follower::new() else { return }; // one CPU: nothing to test
        std::thread::spawn(move || {
            let me = std::process::id();
            f.follow(me);
            let cpu = client_cpu(me).unwrap();
            let mask = sched_getaffinity(Pid::from_raw(0)).unwrap();
            let pinned: Vec<usize> = (0..CpuSet::count()).filter(|&c| mask.is_set(c).unwrap()).collect();
            // The process's main thread may have moved since; the thread
            // is pinned to exactly one allowed CPU either way.
            assert_eq!(pinned.len(), 1, "pinned to {pinned:?}, client on {cpu}");
            // A second call within RESAMPLE does not sample again.
            let before = STATE.with(Cell::get);
            f.follow(me);
            assert_eq!(STATE.with(Cell::get), before);
        })
        .join()
        .unwrap();
    }
}
