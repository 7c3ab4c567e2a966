//! Two ways of handing a request over between a client and a ring thread
//! faster while requests flow on a quiet machine: polling from another
//! CPU (`-o spin=auto`, the default, taken only while the CPU latency
//! request is held) and sharing the client's CPU (`-o share=auto`, the
//! default, taken otherwise). `spin=off` and `share=off` turn each off.
//!
//! Polling. A serial stream of FUSE requests (`tar -x`, `rm -rf`, one
//! program creating files) costs two context switches per round trip
//! when the ring thread sleeps between requests on its client's CPU: the
//! client blocks and the thread runs, the thread replies and blocks and
//! the client runs. With the ring thread on another CPU, polling its ring
//! while the client works, a request is picked up without a wake-up and
//! the reply wakes a client that never left its CPU. Measured on the
//! 2-CPU development VM, `tar -x` of /usr/include (8,908 entries): 1.42 s
//! sleeping, 0.93-0.98 s polling (docs/DESIGN.md, "Hand-off polling").
//! But the client's own CPU halts while it waits unless the machine-wide
//! CPU latency request holds idle CPUs polling (`cpulatency.rs`); without
//! it polling made `tar -x` of /usr/include slower, not faster (4.26 s
//! against 3.30 s sleeping, 2026-11-28), so it is only taken with it.
//!
//! Sharing. Without the latency request, the cost of a round trip is the
//! wake-up of a halted CPU: the ring thread's reply wakes the client, and
//! the scheduler puts a woken task on an idle CPU rather than on the busy
//! one that woke it, and the idle one is halted (in a VM, a trip through
//! the hypervisor). A CPU whose only runnable tasks are in the idle
//! scheduling class (SCHED_IDLE, sched(7)) counts as idle to that choice,
//! so while sharing the ring threads run in that class: the reply wakes
//! the client on the ring thread's own CPU, where it preempts the thread
//! at once, and the next request wakes the thread there again (ring
//! threads are pinned to their queue's CPU, and the kernel queues a
//! request on the queue of the CPU it was made on). No CPU halts between
//! the two. Measured: `tar -x` of /usr/include (24,398 entries), 3.30 s
//! sleeping, 2.50-2.59 s sharing; the CPU latency request, a machine-wide
//! setting, gives 1.77 s (2026-11-28, docs/DESIGN.md, "Sharing the
//! client's CPU"). A thread in the idle class gets almost no CPU when
//! anything else wants it (57 s for the same extraction with a CPU hog on
//! each CPU), so sharing is only done on a quiet machine, ends within a
//! window when CPU pressure appears, and the watcher, a normal thread,
//! sets the class of the ring threads from outside (a starved thread could
//! not end its own). Leaving the idle class needs CAP_SYS_NICE or an
//! RLIMIT_NICE that allows the thread's nice value; without either the
//! mount does not share (one log line).
//!
//! A hand-off of either kind is worth it only when a CPU would otherwise be
//! idle. On a busy machine (a CPU hog on each CPU) polling made the
//! extraction 2-5x slower: the poller and the hogs took turns on a CPU
//! the client needed, and a thread on another CPU than its client must be
//! woken across CPUs; with one hog on one of the two CPUs, 1.4-1.5 s
//! became 2.3-2.6 s. So a hand-off starts only when, over a [`WINDOW`]:
//! - requests flow: at least [`MIN_REQUESTS`];
//! - a CPU is free: the machine's CPUs were idle at least half the window
//!   in all (`/proc/stat`, idle and iowait). Measured during `tar -x`
//!   without polling: 0.97 CPUs idle on the quiet VM, 0.007 with one hog;
//!   while sharing, 1.0;
//! - nothing waits: runnable tasks waited for a CPU less than
//!   [`MAX_STALL_PERCENT`] of the window ([`STOP_STALL_PERCENT`] to go on
//!   with it), by the kernel's CPU pressure
//!   figure (`/proc/pressure/cpu`, "some", cumulative µs;
//!   Documentation/accounting/psi.rst). Measured during `tar -x`: 8-16%
//!   quiet, polling or not, 21% sharing (a ring thread waits while the
//!   client it woke runs); 52-65% with a hog on each CPU.
//!
//! It starts after [`START_WINDOWS`] such windows in a row. Polling
//! itself occupies the free CPU, so while it is on the flow and the
//! pressure are checked, and every [`PROBE`] windows one window goes
//! without a hand-off to read the idle figure again. When pressure ends it, it may not
//! start again for a back-off that doubles each time (up to [`MAX_BACKOFF`]
//! windows) and resets after a long stretch of hand-offs, so a machine
//! that is busy now and then does not pay for flapping.
//!
//! Invariants:
//! - [`Handoff::polling`] is true, or the ring threads are in the idle
//!   class, only between a window that met both conditions and the next
//!   window that did not; never both; neither while the watcher sleeps,
//!   when it stops, on a 1-CPU machine, and without the pressure file
//!   (one log line says so).
//! - A ring thread polls for at most [`SPIN`] after each reply, then
//!   sleeps in the kernel as before; it serves queue `q` from the next CPU
//!   after `q` it may run on while polling is on and from CPU `q`
//!   otherwise (each thread moves itself, only when the mode changed, after
//!   sending its reply); a thread that cannot move does not poll.
//! - Only the watcher changes a ring thread's scheduling class; every ring
//!   thread registers itself ([`Handoff::register_ring_thread`]) before it
//!   serves a request.
//! - While the mount is idle the watcher sleeps; the first request rings
//!   it ([`Handoff::touch`] is one relaxed load per request otherwise).
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::doorbell::{FlowThread, RequestBell};
use crate::requests::Requests;
use crate::service::log;

/// How long a ring thread polls for the next request after a reply.
pub const SPIN: Duration = Duration::from_micros(50);

/// How often the request rate and the CPU pressure are looked at.
pub const WINDOW: Duration = Duration::from_millis(20);

/// Requests per [`WINDOW`] that count as a flow (2,000 a second; a serial
/// stream of round trips makes 30,000-100,000).
pub const MIN_REQUESTS: u64 = 40;

/// Runnable tasks waiting for a CPU this share of the window or more
/// means the machine is busy: polling does not start.
pub const MAX_STALL_PERCENT: u64 = 25;

/// While polling, the share that stops it. Higher than the one that
/// starts it: short waits of other tasks (kernel workers, a program's
/// helper) beside a poller reached 32-42% of a window on the quiet VM now
/// and then; a task that needs the poller's CPU all the time shares it
/// with the poller and waits about half of the window or more.
pub const STOP_STALL_PERCENT: u64 = 50;

/// The kernel's CPU pressure file.
pub const PRESSURE: &str = "/proc/pressure/cpu";

/// The longest back-off after pressure ended polling, in windows.
pub const MAX_BACKOFF: u32 = 64;

/// Windows of polling that reset the back-off.
const STEADY: u32 = 10;

/// Free windows in a row that start polling.
pub const START_WINDOWS: u32 = 2;

/// Windows of polling after which one window goes without, to see
/// whether a CPU is still free (0.5 s; 1 window in 26 is not polled).
pub const PROBE: u32 = 25;

/// When ring threads poll (`-o spin=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpinMode {
    /// Never.
    Off,
    /// While requests flow on a quiet machine (the default).
    Auto,
    /// Whenever requests flow, busy machine or not (for experiments:
    /// it shows what polling costs where `auto` would not poll).
    On,
}

/// Shared by the watcher and every ring thread.
#[derive(Debug, Default)]
pub struct Handoff {
    /// Wakes the watcher (off: `-o spin=off`, one CPU, no figures).
    flow: RequestBell,
    /// Ring threads poll after a reply (see the invariants).
    polling: AtomicBool,
    /// The thread ids of the ring threads, whose scheduling class the
    /// watcher sets while sharing.
    ring_tids: Mutex<Vec<i32>>,
}

impl Handoff {
    /// A request arrived: wakes the watcher if it sleeps.
    #[inline]
    pub fn touch(&self) {
        self.flow.touch();
    }

    /// Whether ring threads poll for the next request now.
    #[inline]
    pub fn polling(&self) -> bool {
        self.polling.load(Ordering::Relaxed)
    }

    /// Called by each ring thread before it serves: the watcher may put
    /// it in the idle scheduling class while sharing.
    pub fn register_ring_thread(&self) {
        let tid = nix::unistd::gettid().as_raw();
        if let Ok(mut t) = self.ring_tids.lock() {
            t.push(tid);
        }
    }

    /// Puts every registered ring thread in the idle scheduling class, or
    /// back in the normal one (keeping its nice value); whether every
    /// change was made. A thread that has ended is skipped.
    fn set_idle_class(&self, idle: bool) -> bool {
        let policy = if idle {
            libc::SCHED_IDLE
        } else {
            libc::SCHED_OTHER
        };
        let param = libc::sched_param { sched_priority: 0 };
        let tids = self.ring_tids.lock().map(|t| t.clone()).unwrap_or_default();
        let mut ok = true;
        for tid in tids {
            if !sched_setscheduler(tid, policy, &param) {
                ok = false;
            }
        }
        ok
    }
}

/// sched_setscheduler(2) on one thread; false on any error but ESRCH (the
/// thread has ended).
#[allow(unsafe_code)]
fn sched_setscheduler(tid: i32, policy: i32, param: &libc::sched_param) -> bool {
    // SAFETY: `param` is a valid sched_param for the duration of the call.
    let r = unsafe { libc::sched_setscheduler(tid, policy, param) };
    r == 0 || nix::errno::Errno::last() == nix::errno::Errno::ESRCH
}

/// Whether this process may take a thread out of the idle scheduling class
/// again: CAP_SYS_NICE in its effective set, or an RLIMIT_NICE that allows
/// its nice value (sched(7), "SCHED_IDLE"). Without it a thread put there
/// would stay there.
pub fn may_leave_idle_class() -> bool {
    const CAP_SYS_NICE: u32 = 23;
    let cap = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|h| u64::from_str_radix(h.trim(), 16).ok())
        })
        .is_some_and(|caps| caps & (1 << CAP_SYS_NICE) != 0);
    if cap {
        return true;
    }
    // RLIMIT_NICE n allows nice values down to 20 - n.
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nice)
        .current
        .unwrap_or(u64::MAX);
    let nice = rustix::process::getpriority_process(None).unwrap_or(0);
    limit >= u64::try_from(20 - i64::from(nice)).unwrap_or(0)
}

/// What the watcher reads of the machine each window, both cumulative
/// since boot: microseconds the CPUs were idle in all, and microseconds
/// in which some runnable task waited for a CPU.
pub trait Machine: Send + 'static {
    fn idle_us(&mut self) -> Option<u64>;
    fn stalled_us(&mut self) -> Option<u64>;
}

/// `/proc/stat` and [`PRESSURE`], read afresh each time.
pub struct Proc {
    /// Microseconds per clock tick of `/proc/stat`.
    us_per_tick: u64,
}

impl Proc {
    pub fn new() -> Proc {
        let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
            .ok()
            .flatten()
            .filter(|&t| t > 0)
            .unwrap_or(100) as u64;
        Proc {
            us_per_tick: 1_000_000 / hz,
        }
    }
}

impl Default for Proc {
    fn default() -> Proc {
        Proc::new()
    }
}

impl Machine for Proc {
    fn idle_us(&mut self) -> Option<u64> {
        let text = std::fs::read_to_string("/proc/stat").ok()?;
        parse_idle_ticks(&text).map(|t| t * self.us_per_tick)
    }

    fn stalled_us(&mut self) -> Option<u64> {
        let text = std::fs::read_to_string(PRESSURE).ok()?;
        parse_some_total(&text)
    }
}

/// Idle plus iowait ticks of all CPUs: the 4th and 5th figures of the
/// `cpu` line of `/proc/stat`.
pub fn parse_idle_ticks(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let mut f = line.split_whitespace().skip(4);
    let idle: u64 = f.next()?.parse().ok()?;
    let iowait: u64 = f.next()?.parse().ok()?;
    Some(idle + iowait)
}

/// The `total=` of the `some` line of a pressure file.
pub fn parse_some_total(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("some "))?;
    line.split_whitespace()
        .find_map(|f| f.strip_prefix("total="))?
        .parse()
        .ok()
}

/// The hand-offs a mount may make (`-o spin=`, `-o share=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allowed {
    pub spin: SpinMode,
    pub share: bool,
}

/// The hand-off in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Style {
    /// Ring threads sleep between requests on their queue's CPU.
    Sleep,
    /// Ring threads poll from the next CPU.
    Poll,
    /// Ring threads sleep on their queue's CPU in the idle class.
    Share,
}

/// The thread that starts and ends hand-offs; [`Watcher::stop`] ends it.
pub struct Watcher {
    handoff: Arc<Handoff>,
    thread: FlowThread,
}

impl Watcher {
    /// Starts watching when the machine has two CPUs or more and the
    /// kernel reports CPU pressure; `None` (with a log line) otherwise.
    /// Sharing is dropped (with a log line) when the process could not
    /// take a thread out of the idle class again.
    pub fn start(
        handoff: Arc<Handoff>,
        requests: Arc<Requests>,
        cpus: usize,
        mut allowed: Allowed,
    ) -> Option<Watcher> {
        if allowed.share && !may_leave_idle_class() {
            log("share: no CAP_SYS_NICE or RLIMIT_NICE to take ring threads out of the idle scheduling class again; they do not share their clients' CPUs");
            allowed.share = false;
        }
        if cpus < 2 || (allowed.spin == SpinMode::Off && !allowed.share) {
            return None;
        }
        let mut p = Proc::new();
        if p.stalled_us().is_none() || p.idle_us().is_none() {
            log(format_args!(
                "spin, share: no CPU pressure figure ({PRESSURE}) or idle time (/proc/stat); ring threads sleep between requests"
            ));
            return None;
        }
        Watcher::start_with(handoff, requests, p, allowed)
    }

    /// As [`Watcher::start`], with the figures read from `machine`.
    pub fn start_with(
        handoff: Arc<Handoff>,
        requests: Arc<Requests>,
        machine: impl Machine,
        allowed: Allowed,
    ) -> Option<Watcher> {
        let h = handoff.clone();
        let thread = FlowThread::start(&handoff.flow, "ufs-handoff", "spin", move || {
            run(machine, &h, &requests, allowed)
        })?;
        Some(Watcher { handoff, thread })
    }

    /// Ends every hand-off and the thread.
    pub fn stop(self) {
        self.thread.stop(&self.handoff.flow);
        self.handoff.polling.store(false, Ordering::Relaxed);
    }
}

/// The choice made at the end of each window of flowing requests.
#[derive(Debug)]
struct Policy {
    /// Windows to wait before polling may start again.
    hold_off: u32,
    /// The hold-off the next stop by pressure sets.
    backoff: u32,
    /// Windows polled in a row without pressure.
    steady: u32,
    /// Windows in a row, not polling, with a CPU free and nothing waiting.
    free_run: u32,
    /// Windows polled since the last look at the idle figure.
    since_probe: u32,
    /// This window paused polling to look at the idle figure again.
    probing: bool,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            hold_off: 0,
            backoff: 1,
            steady: 0,
            free_run: 0,
            since_probe: 0,
            probing: false,
        }
    }
}

/// What the next window does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    Poll,
    /// No polling: not wanted, or a pause to look at the idle figure.
    Sleep,
    /// No polling: pressure stopped it (a back-off starts).
    Stopped,
}

impl Policy {
    /// What to do in the next window, given whether this one polled, had
    /// a free CPU and had no pressure.
    fn next(&mut self, polling: bool, free: bool, calm: bool) -> Next {
        if polling {
            if !calm {
                self.steady = 0;
                self.free_run = 0;
                self.hold_off = self.backoff;
                self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
                return Next::Stopped;
            }
            self.steady = self.steady.saturating_add(1);
            if self.steady >= STEADY {
                self.backoff = 1;
            }
            self.since_probe += 1;
            if self.since_probe >= PROBE {
                // The poller takes the idle time the figure shows: a
                // window without it tells whether a CPU is still free.
                self.since_probe = 0;
                self.probing = true;
                return Next::Sleep;
            }
            return Next::Poll;
        }
        if self.hold_off > 0 {
            self.hold_off -= 1;
            self.free_run = 0;
            return Next::Sleep;
        }
        if free && calm {
            self.free_run += 1;
        } else {
            self.free_run = 0;
            self.probing = false;
        }
        // One free window resumes after a pause to look; a start takes
        // START_WINDOWS in a row (the idle figure counts whole clock
        // ticks: one window alone reads "free" now and then by chance).
        let need = if self.probing { 1 } else { START_WINDOWS };
        if self.free_run >= need {
            self.free_run = 0;
            self.probing = false;
            self.since_probe = 0;
            return Next::Poll;
        }
        Next::Sleep
    }
}

/// Difference of two cumulative figures, when both were read.
fn delta(before: Option<u64>, after: Option<u64>) -> Option<u64> {
    Some(after?.saturating_sub(before?))
}

/// Switches between hand-offs and keeps their counters.
struct Active<'a> {
    h: &'a Handoff,
    requests: &'a Requests,
    style: Style,
    /// When the current style started, or was last counted in the
    /// milliseconds of `ufskit stats`.
    since: Option<Instant>,
}

impl Active<'_> {
    fn set(&mut self, want: Style) {
        // The time so far counts now, so `ufskit stats` shows it during a
        // long stretch too.
        if let Some(s) = self.since {
            let ms = s.elapsed().as_millis() as u64;
            let counter = match self.style {
                Style::Poll => Some(&self.requests.spin_polling_ms),
                Style::Share => Some(&self.requests.share_ms),
                Style::Sleep => None,
            };
            if let Some(c) = counter {
                c.fetch_add(ms, Ordering::Relaxed);
            }
            self.since = Some(s + Duration::from_millis(ms));
        }
        if want == self.style {
            return;
        }
        let mut got = want;
        if self.style == Style::Share && !self.h.set_idle_class(false) {
            log("share: a ring thread could not leave the idle scheduling class");
        }
        if want == Style::Share && !self.h.set_idle_class(true) {
            // Some thread may be in the idle class: take them all back.
            self.h.set_idle_class(false);
            got = Style::Sleep;
        }
        self.h.polling.store(got == Style::Poll, Ordering::Relaxed);
        self.requests
            .spin_polling
            .store(got == Style::Poll, Ordering::Relaxed);
        self.requests
            .sharing
            .store(got == Style::Share, Ordering::Relaxed);
        match got {
            Style::Poll => self.requests.spin_turns.fetch_add(1, Ordering::Relaxed),
            Style::Share => self.requests.share_turns.fetch_add(1, Ordering::Relaxed),
            Style::Sleep => 0,
        };
        self.style = got;
        self.since = (got != Style::Sleep).then(Instant::now);
    }
}

fn run(mut machine: impl Machine, h: &Handoff, requests: &Requests, allowed: Allowed) {
    let always = allowed.spin == SpinMode::On;
    let mut active = Active {
        h,
        requests,
        style: Style::Sleep,
        since: None,
    };
    let mut policy = Policy::default();
    while h.flow.bell.wait_rung() {
        let mut last = requests.total();
        let (mut idle, mut stalled) = (machine.idle_us(), machine.stalled_us());
        let mut at = Instant::now();
        loop {
            if !h.flow.bell.sleep(WINDOW) {
                active.set(Style::Sleep);
                return;
            }
            let now = requests.total();
            let seen = now.saturating_sub(last);
            last = now;
            // The window as it was, not as asked for (a busy machine
            // wakes the watcher late).
            let window_us = at.elapsed().as_micros().max(1) as u64;
            at = Instant::now();
            let (idle_now, stalled_now) = (machine.idle_us(), machine.stalled_us());
            let free = delta(idle, idle_now).is_some_and(|i| i * 2 >= window_us);
            let handing = active.style != Style::Sleep;
            let limit = if handing {
                STOP_STALL_PERCENT
            } else {
                MAX_STALL_PERCENT
            };
            let calm = delta(stalled, stalled_now).is_some_and(|s| s * 100 < window_us * limit);
            (idle, stalled) = (idle_now, stalled_now);
            if seen < MIN_REQUESTS {
                active.set(Style::Sleep);
                policy.steady = 0;
                policy.free_run = 0;
                // A request between the count and this store rings no
                // bell; the next one does.
                h.flow.bell.set_armed(false);
                break;
            }
            let next = if always {
                Next::Poll
            } else {
                policy.next(handing, free, calm)
            };
            if next == Next::Stopped {
                requests.spin_pressure_stops.fetch_add(1, Ordering::Relaxed);
            }
            // Polling pays only while idle CPUs poll too (the CPU latency
            // request); sharing otherwise.
            let want = if next != Next::Poll {
                Style::Sleep
            } else if always
                || (allowed.spin == SpinMode::Auto
                    && requests.cpu_latency_held.load(Ordering::Relaxed))
            {
                Style::Poll
            } else if allowed.share {
                Style::Share
            } else {
                Style::Sleep
            };
            active.set(want);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doorbell::wait_for;
    use crate::requests::Op;
    use std::sync::Mutex;

    /// Idle and pressure figures the test moves by hand.
    #[derive(Clone, Default)]
    struct Fake(Arc<Mutex<(u64, u64)>>);

    impl Machine for Fake {
        fn idle_us(&mut self) -> Option<u64> {
            Some(self.0.lock().unwrap().0)
        }
        fn stalled_us(&mut self) -> Option<u64> {
            Some(self.0.lock().unwrap().1)
        }
    }

    /// Makes requests for `d` while the machine's CPUs are idle
    /// `idle_pct` percent of the time in all and tasks wait for a CPU
    /// `stall_pct` percent of it.
    fn stream(h: &Handoff, r: &Requests, m: &Fake, d: Duration, idle_pct: u64, stall_pct: u64) {
        let end = Instant::now() + d;
        let mut last = Instant::now();
        while Instant::now() < end {
            // A window's worth at each turn: a loaded machine may run this
            // thread only once a window.
            for _ in 0..64 {
                r.count(Op::Lookup);
            }
            h.touch();
            std::thread::sleep(Duration::from_micros(100));
            let el = last.elapsed().as_micros() as u64;
            last = Instant::now();
            let mut f = m.0.lock().unwrap();
            f.0 += el * idle_pct / 100;
            f.1 += el * stall_pct / 100;
        }
    }

    const POLL: Allowed = Allowed {
        spin: SpinMode::Auto,
        share: false,
    };

    #[test]
    fn polls_while_requests_flow_with_a_cpu_free_and_nothing_waiting() {
        let h = Arc::new(Handoff::default());
        let r = Arc::new(Requests::default());
        let m = Fake::default();
        // Polling is for a machine whose idle CPUs poll too.
        r.cpu_latency_held.store(true, Ordering::Relaxed);
        let w = Watcher::start_with(h.clone(), r.clone(), m.clone(), POLL).unwrap();
        // A trickle: no polling.
        for _ in 0..3 {
            r.count(Op::Getattr);
            h.touch();
            std::thread::sleep(WINDOW * 2);
            assert!(!h.polling(), "a trickle turned polling on");
        }
        // A stream, a CPU idle, nothing waiting: polling.
        stream(&h, &r, &m, WINDOW * 5, 100, 5);
        assert!(h.polling(), "a quiet stream did not poll");
        assert!(r.snapshot().spin_polling);
        // Tasks start waiting for CPUs: off...
        stream(&h, &r, &m, WINDOW * 4, 0, 60);
        assert!(!h.polling(), "a busy machine kept polling");
        // ...and not on again while no CPU is free, pressure or not.
        stream(&h, &r, &m, WINDOW * 5, 2, 5);
        assert!(!h.polling(), "polling without a free CPU");
        // A CPU frees up: on again (after a back-off of one window).
        stream(&h, &r, &m, WINDOW * 6, 100, 0);
        assert!(h.polling());
        // The stream stops: off, and the watcher sleeps.
        assert!(wait_for(|| !h.polling() && !h.flow.bell.is_armed()));
        let s = r.snapshot();
        // Two turns on; a loaded machine that starves this thread for a
        // window may add more.
        assert!(s.spin_turns >= 2, "{s:?}");
        assert!(!s.spin_polling);
        assert!(s.spin_polling_ms >= WINDOW.as_millis() as u64, "{s:?}");
        w.stop();
        assert!(!h.polling());
        h.touch();
        assert!(!h.flow.bell.is_armed(), "a stopped watcher was woken");
    }

    /// The scheduling policy of thread `tid` of this process (the 41st
    /// field of its stat file).
    fn policy_of(tid: i32) -> i32 {
        let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap();
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        // Fields from the third on; the policy is the 41st.
        after.split_whitespace().nth(38).unwrap().parse().unwrap()
    }

    #[test]
    fn without_the_latency_request_ring_threads_share_their_clients_cpus_while_quiet() {
        let h = Arc::new(Handoff::default());
        let r = Arc::new(Requests::default());
        if !may_leave_idle_class() {
            // Then the mount declines to share rather than strand a thread
            // in the idle class.
            let allowed = Allowed {
                spin: SpinMode::Off,
                share: true,
            };
            assert!(Watcher::start(h, r, 2, allowed).is_none());
            return;
        }
        // A stand-in ring thread, registered as ring threads are.
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let hh = h.clone();
        let ring = std::thread::spawn(move || {
            hh.register_ring_thread();
            tx.send(nix::unistd::gettid().as_raw()).unwrap();
            let _ = stop_rx.recv();
        });
        let tid = rx.recv().unwrap();
        assert_eq!(policy_of(tid), libc::SCHED_OTHER);
        let m = Fake::default();
        let allowed = Allowed {
            spin: SpinMode::Auto,
            share: true,
        };
        let w = Watcher::start_with(h.clone(), r.clone(), m.clone(), allowed).unwrap();
        // A stream on a quiet machine, no latency request: sharing, not
        // polling.
        stream(&h, &r, &m, WINDOW * 5, 100, 5);
        assert!(!h.polling(), "polled without the latency request");
        assert!(r.snapshot().sharing);
        assert_eq!(policy_of(tid), libc::SCHED_IDLE);
        // Tasks wait for CPUs: back to the normal class at once.
        stream(&h, &r, &m, WINDOW * 3, 0, 60);
        assert!(!r.snapshot().sharing);
        assert_eq!(policy_of(tid), libc::SCHED_OTHER);
        assert!(r.snapshot().spin_pressure_stops >= 1);
        // Quiet again: sharing again; with the latency request held,
        // polling replaces it.
        stream(&h, &r, &m, WINDOW * 6, 100, 0);
        assert_eq!(policy_of(tid), libc::SCHED_IDLE);
        r.cpu_latency_held.store(true, Ordering::Relaxed);
        stream(&h, &r, &m, WINDOW * 3, 100, 0);
        assert!(h.polling());
        assert_eq!(policy_of(tid), libc::SCHED_OTHER);
        r.cpu_latency_held.store(false, Ordering::Relaxed);
        stream(&h, &r, &m, WINDOW * 3, 100, 0);
        assert_eq!(policy_of(tid), libc::SCHED_IDLE);
        // The stream stops: the normal class, and the watcher sleeps.
        assert!(wait_for(|| policy_of(tid) == libc::SCHED_OTHER));
        let s = r.snapshot();
        // A loaded machine that starves this thread for a window may add
        // turns.
        assert!(s.share_turns >= 3, "{s:?}");
        assert!(s.share_ms >= WINDOW.as_millis() as u64, "{s:?}");
        w.stop();
        stop_tx.send(()).unwrap();
        ring.join().unwrap();
    }

    #[test]
    fn pressure_that_keeps_ending_polling_backs_it_off_longer_each_time() {
        let mut p = Policy::default();
        let wait = |p: &mut Policy| {
            let mut n = 0;
            while p.next(false, true, true) != Next::Poll {
                n += 1;
            }
            n
        };
        let mut waits = Vec::new();
        for _ in 0..9 {
            waits.push(wait(&mut p));
            // One window polled, then tasks wait for CPUs: stopped.
            assert_eq!(p.next(true, true, false), Next::Stopped);
        }
        // The back-off, plus the free windows a start takes.
        let start = START_WINDOWS - 1;
        let want: Vec<u32> = [0, 1, 2, 4, 8, 16, 32, 64, 64]
            .iter()
            .map(|b| b + start)
            .collect();
        assert_eq!(waits, want);
        // A long calm stretch of polling resets the back-off.
        assert_eq!(wait(&mut p), 64 + start);
        for _ in 0..STEADY {
            assert_eq!(p.next(true, true, true), Next::Poll);
        }
        assert_eq!(p.next(true, true, false), Next::Stopped);
        assert_eq!(wait(&mut p), 1 + start, "back-off not reset: {p:?}");
        // No free CPU, or pressure: never starts.
        let mut q = Policy::default();
        for _ in 0..10 {
            assert_eq!(q.next(false, false, true), Next::Sleep);
            assert_eq!(q.next(false, true, false), Next::Sleep);
        }
        // One free window alone does not start it.
        assert_eq!(q.next(false, true, true), Next::Sleep);
        assert_eq!(q.next(false, false, true), Next::Sleep);
        assert_eq!(q.next(false, true, true), Next::Sleep);
    }

    #[test]
    fn polling_pauses_now_and_then_to_see_whether_a_cpu_is_still_free() {
        let mut p = Policy::default();
        while p.next(false, true, true) != Next::Poll {}
        for _ in 1..PROBE {
            assert_eq!(p.next(true, true, true), Next::Poll);
        }
        // The pause: one window without polling...
        assert_eq!(p.next(true, true, true), Next::Sleep);
        // ...and a CPU still free: polling again at once.
        assert_eq!(p.next(false, true, true), Next::Poll);
        for _ in 1..PROBE {
            assert_eq!(p.next(true, true, true), Next::Poll);
        }
        assert_eq!(p.next(true, true, true), Next::Sleep);
        // No CPU free any more (another program took it): off, and a
        // start again takes whole free windows in a row.
        assert_eq!(p.next(false, false, true), Next::Sleep);
        assert_eq!(p.next(false, false, true), Next::Sleep);
        let mut n = 0;
        while p.next(false, true, true) != Next::Poll {
            n += 1;
        }
        assert_eq!(n, START_WINDOWS - 1);
    }

    #[test]
    fn reads_the_idle_ticks_and_pressure_totals() {
        let stat = "cpu  5606678 55350 2170410 3401125 1648534 0 59137 16909 0 0\n\
                    cpu0 2672830 25961 1214097 1884303 672827 0 4674 8077 0 0\n";
        assert_eq!(parse_idle_ticks(stat), Some(3_401_125 + 1_648_534));
        assert_eq!(parse_idle_ticks("cpu0 1 2 3 4 5\n"), None);
        let text = "some avg10=0.47 avg60=17.38 avg300=12.68 total=11173559185\n\
                    full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
        assert_eq!(parse_some_total(text), Some(11_173_559_185));
        assert_eq!(parse_some_total("full total=3\n"), None);
        assert_eq!(parse_some_total("some avg10=1 total=x\n"), None);
    }
}
