//! Follow-the-client CPU placement for the request threads.
//!
//! A FUSE request is a synchronous round trip: the client blocks while a
//! request thread serves it, then the thread blocks while the client runs.
//! When the two sit on different CPUs every round trip wakes a sleeping
//! CPU twice; on virtual machines whose idle vCPUs halt (no guest halt
//! polling) each such wake costs tens of microseconds, and a stat of a
//! missing name took 64 µs instead of 13 µs on the two-vCPU test machine.
//! The scheduler does not co-locate the pair by itself because the wake-up
//! is not marked synchronous, so each request thread is moved: at most
//! every [`RESAMPLE`] the CPU the requesting thread last ran on is read
//! (`/proc/PID/stat`, field 39) and, if that CPU is allowed and differs
//! from where the request thread is pinned, it is pinned there. The same idea as
//! receive flow steering in networking: process a request on the CPU of
//! the thread that waits for it.
//!
//! Reading another process's `/proc/PID/stat` can block: the kernel takes
//! that process's exec lock, and a process in the middle of `execve` holds
//! it while it closes its files, which can wait for this very daemon to
//! write back pages. A request thread must therefore never read it. Request
//! threads only post a hint (client pid, own thread id) to a placement
//! thread, without blocking; the placement thread reads the client's CPU
//! and pins the request thread from outside (`sched_setaffinity` on its
//! thread id). If it blocks, placement pauses; requests go on.
//!
//! Invariants: a request thread never blocks here (a full hint queue drops
//! the hint); a request thread is only ever pinned to a CPU that was in the
//! daemon's affinity mask when the mount started ([`Follower::new`]);
//! failures to read `/proc` or to set the affinity leave the placement
//! unchanged and are not errors (this is a hint, never a correctness
//! matter); requests from the kernel itself (pid 0) are ignored.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::time::{Duration, Instant};

use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::{gettid, Pid};

/// How often a request thread asks again where its client runs.
pub const RESAMPLE: Duration = Duration::from_millis(10);

thread_local! {
    /// When this request thread last posted a hint.
    static LAST: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// The policy, shared by every request thread of one mount; dropping the
/// last copy ends the placement thread.
#[derive(Debug, Clone)]
pub struct Follower {
    hints: SyncSender<(u32, i32)>,
}

impl Follower {
    /// `None` when the mask cannot be read, allows only one CPU (nothing to
    /// choose), or the placement thread cannot start.
    pub fn new() -> Option<Follower> {
        let allowed = sched_getaffinity(Pid::from_raw(0)).ok()?;
        let n = (0..CpuSet::count())
            .filter(|&c| allowed.is_set(c).unwrap_or(false))
            .count();
        if n < 2 {
            return None;
        }
        let (hints, rx) = sync_channel(64);
        std::thread::Builder::new()
            .name("ufs-placement".into())
            .spawn(move || place(rx, allowed))
            .ok()?;
        Some(Follower { hints })
    }

    /// Called at the start of every request from process `pid`; never blocks.
    pub fn follow(&self, pid: u32) {
        if pid == 0 {
            return;
        }
        let now = Instant::now();
        if LAST
            .with(Cell::get)
            .is_some_and(|t| now.duration_since(t) < RESAMPLE)
        {
            return;
        }
        LAST.with(|l| l.set(Some(now)));
        let _ = self.hints.try_send((pid, gettid().as_raw()));
    }
}

/// The placement thread: pins each request thread to its client's CPU.
fn place(rx: Receiver<(u32, i32)>, allowed: CpuSet) {
    let mut pinned: HashMap<i32, usize> = HashMap::new();
    while let Ok((client, server)) = rx.recv() {
        let Some(cpu) = client_cpu(client) else {
            continue;
        };
        if pinned.get(&server) == Some(&cpu) || !allowed.is_set(cpu).unwrap_or(false) {
            continue;
        }
        let mut set = CpuSet::new();
        if set.set(cpu).is_ok() && sched_setaffinity(Pid::from_raw(server), &set).is_ok() {
            pinned.insert(server, cpu);
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
        let fields: Vec<String> = (3..=52)
            .map(|i| {
                if i == 39 {
                    "7".to_string()
                } else {
                    i.to_string()
                }
            })
            .collect();
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
            // The placement thread acts asynchronously.
            let deadline = Instant::now() + Duration::from_secs(5);
            loop {
                let mask = sched_getaffinity(Pid::from_raw(0)).unwrap();
                let pinned = (0..CpuSet::count())
                    .filter(|&c| mask.is_set(c).unwrap())
                    .count();
                if pinned == 1 {
                    break;
                }
                assert!(Instant::now() < deadline, "request thread was never pinned");
                std::thread::sleep(Duration::from_millis(5));
            }
            // A second call within RESAMPLE posts nothing new.
            let before = LAST.with(Cell::get);
            f.follow(me);
            assert_eq!(LAST.with(Cell::get), before);
        })
        .join()
        .unwrap();
    }
}
