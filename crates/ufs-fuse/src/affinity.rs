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
//! every [`RESAMPLE`] the requesting process's affinity is read
//! (`/proc/PID/status`) and, if it is pinned to one allowed CPU, the request
//! thread is pinned there; a client the scheduler moves around is not
//! chased (the request thread is left free). The same idea as
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

/// The placement thread: pins each request thread to the CPU of a client
/// that is itself pinned to one CPU, and leaves it (or sets it) free for a
/// client the scheduler moves around. Chasing a moving client costs more
/// than it saves: `tar -x` of /usr/include, not pinned, took 2.7 s with
/// free request threads and 3.0-3.4 s with followed ones; a pinned
/// client's stat of a missing name takes 13 µs followed, 30 µs not.
fn place(rx: Receiver<(u32, i32)>, allowed: CpuSet) {
    // Where each request thread is pinned (None: free).
    let mut pinned: HashMap<i32, Option<usize>> = HashMap::new();
    while let Ok((client, server)) = rx.recv() {
        let want = match client_pinned_cpu(client) {
            Some(cpu) if allowed.is_set(cpu).unwrap_or(false) => Some(cpu),
            _ => None,
        };
        if pinned.get(&server).copied().unwrap_or(None) == want {
            continue;
        }
        let set = match want {
            Some(cpu) => {
                let mut set = CpuSet::new();
                if set.set(cpu).is_err() {
                    continue;
                }
                set
            }
            None => allowed,
        };
        if sched_setaffinity(Pid::from_raw(server), &set).is_ok() {
            pinned.insert(server, want);
        }
    }
}

/// The one CPU process `pid` may run on (its affinity mask), if just one.
fn client_pinned_cpu(pid: u32) -> Option<usize> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_single_cpu(&status)
}

/// `Cpus_allowed_list` of a `/proc/PID/status` text, when it names one CPU.
fn parse_single_cpu(status: &str) -> Option<usize> {
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?
        .trim();
    list.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_single_cpu_counts_as_pinned() {
        let st =
            |l: &str| format!("Name:\tx\nCpus_allowed:\tf\nCpus_allowed_list:\t{l}\nMems: 0\n");
        assert_eq!(parse_single_cpu(&st("3")), Some(3));
        assert_eq!(parse_single_cpu(&st("0-1")), None);
        assert_eq!(parse_single_cpu(&st("0,2")), None);
        assert_eq!(parse_single_cpu("Name: x\n"), None);
    }

    #[test]
    fn following_pins_the_thread_to_a_pinned_clients_cpu() {
        let Some(f) = Follower::new() else {
            panic!("the test machine must have two CPUs");
        };
        // A client pinned to one CPU (a child process, so the test's own
        // mask stays as it is).
        let mut child = std::process::Command::new("taskset")
            .args(["-c", "0", "sleep", "30"])
            .spawn()
            .expect("taskset");
        std::thread::sleep(Duration::from_millis(100));
        let client = child.id();
        std::thread::spawn(move || {
            let me = client;
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
        let _ = child.kill();
        let _ = child.wait();
    }
}
