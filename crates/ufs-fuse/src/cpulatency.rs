//! While requests flow, asks the kernel to keep idle CPUs polling instead
//! of halting, and gives the request back soon after they stop
//! (`-o cpulatency=auto`; `off`, the default, never asks: the request
//! is machine-wide, so a mount takes it only when the administrator asks).
//!
//! Why: every FUSE request is a hand-off between two threads. The client
//! blocks, a ring thread serves the request, and the reply wakes the
//! client. At that moment the ring thread still occupies its CPU, so the
//! scheduler puts the woken client on another CPU if one is idle. On a
//! quiet machine one is, and it is halted: nearly every round trip waits
//! for a halted CPU to wake up (an inter-processor interrupt, and in a
//! virtual machine a trip through the hypervisor). Measured on the 2-CPU
//! development VM, `tar -x` of /usr/include (8,908 entries) through the
//! mount: 1.5-2.8 s as is, 1.26-1.31 s with tar pinned to one CPU, and
//! 1.32-1.53 s unpinned with CPU latency 0 held (docs/DESIGN.md, "Waking
//! the client"). A busy machine has no idle CPU to wake, which is why
//! results flipped between a busy and a quiet machine.
//!
//! The means is the kernel's own: a CPU latency QoS request of 0 µs
//! through `/dev/cpu_dma_latency` (Documentation/power/pm_qos_interface.rst).
//! While it is held, cpuidle governors choose the polling idle state, so a
//! wake-up needs no interrupt. It costs power and, in a VM, host CPU time
//! while held: so it is held only while the mount is busy.
//!
//! Invariants:
//! - The request is held only after a window of [`WINDOW`] saw at least
//!   [`MIN_REQUESTS`] requests, and released after the first window with
//!   fewer; it is released when the thread stops (the device is closed).
//! - While the mount is idle the thread sleeps on a condition variable;
//!   the first request after that rings it ([`Gate::touch`] is otherwise
//!   one relaxed atomic load per request).
//! - Without the device (not root, no such file) nothing is held and the
//!   mount works as before: one log line says so.
use std::fs::File;
use std::io::Write;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::doorbell::{FlowThread, RequestBell};
use crate::requests::Requests;
use crate::service::log;

/// The kernel's CPU latency QoS device.
pub const DEVICE: &str = "/dev/cpu_dma_latency";

/// How often the request rate is looked at while the mount is busy.
pub const WINDOW: Duration = Duration::from_millis(10);

/// Requests per [`WINDOW`] that count as busy (2,000 a second; a serial
/// stream of round trips makes 30,000-60,000).
pub const MIN_REQUESTS: u64 = 20;

/// The value that asks for nothing: the kernel's default CPU latency
/// (2,000 s, in µs), which a write of it restores.
const NO_CONSTRAINT_US: i32 = 2_000_000_000;

/// Rung by the request path; shared by every serving thread.
pub type Gate = RequestBell;

/// The thread that holds and releases the request; [`Holder::stop`] ends
/// it.
pub struct Holder {
    gate: Arc<Gate>,
    thread: FlowThread,
}

/// Where the latency request goes: the device, or (in tests) anything
/// that records the values.
pub trait Sink: Send + 'static {
    fn set(&mut self, us: i32) -> std::io::Result<()>;
}

impl Sink for File {
    fn set(&mut self, us: i32) -> std::io::Result<()> {
        // The device takes a native-endian 32-bit value in µs.
        self.write_all(&us.to_ne_bytes())
    }
}

/// Opens [`DEVICE`] (root only: done before the daemon gives root up,
/// confine.rs); `None` with a log line when it cannot.
pub fn open_device() -> Option<File> {
    match std::fs::OpenOptions::new().write(true).open(DEVICE) {
        Ok(f) => Some(f),
        Err(e) => {
            log(format_args!(
                "cpulatency: cannot open {DEVICE} ({e}); idle CPUs may halt between requests (slower round trips on a quiet machine)"
            ));
            None
        }
    }
}

impl Holder {
    /// As [`Holder::start`], with the requests going to `sink`.
    pub fn start_with(gate: Arc<Gate>, requests: Arc<Requests>, sink: impl Sink) -> Option<Holder> {
        let g = gate.clone();
        let thread = FlowThread::start(&gate, "ufs-cpulatency", "cpulatency", move || {
            run(sink, &g, &requests)
        })?;
        Some(Holder { gate, thread })
    }

    /// Releases the request and ends the thread.
    pub fn stop(self) {
        self.thread.stop(&self.gate);
    }
}

fn run(mut sink: impl Sink, gate: &Gate, requests: &Requests) {
    let mut held: Option<Instant> = None;
    let release = |sink: &mut dyn Sink, held: &mut Option<Instant>| {
        if let Some(since) = held.take() {
            requests.cpu_latency_held.store(false, Ordering::Relaxed);
            if let Err(e) = sink.set(NO_CONSTRAINT_US) {
                log(format_args!("cpulatency: cannot release the request: {e}"));
            }
            requests
                .cpu_latency_held_ms
                .fetch_add(since.elapsed().as_millis() as u64, Ordering::Relaxed);
        }
    };
    while gate.bell.wait_rung() {
        let mut last = requests.total();
        loop {
            if !gate.bell.sleep(WINDOW) {
                release(&mut sink, &mut held);
                return;
            }
            let now = requests.total();
            let seen = now.saturating_sub(last);
            last = now;
            if seen >= MIN_REQUESTS {
                if held.is_none() {
                    match sink.set(0) {
                        Ok(()) => {
                            held = Some(Instant::now());
                            requests.cpu_latency_held.store(true, Ordering::Relaxed);
                            requests.cpu_latency_holds.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => {
                            log(format_args!(
                                "cpulatency: {DEVICE} refused the request ({e}); not asking again"
                            ));
                            gate.disable();
                            gate.bell.set_armed(false);
                            return;
                        }
                    }
                }
            } else {
                release(&mut sink, &mut held);
                // A request between the count and this store rings no bell;
                // the next one does.
                gate.bell.set_armed(false);
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doorbell::wait_for;
    use crate::requests::Op;
    use std::sync::Mutex;

    #[derive(Clone, Default)]
    struct Record(Arc<Mutex<Vec<i32>>>);

    impl Sink for Record {
        fn set(&mut self, us: i32) -> std::io::Result<()> {
            self.0.lock().unwrap().push(us);
            Ok(())
        }
    }

    #[test]
    fn held_while_requests_flow_and_released_after() {
        let gate = Arc::new(Gate::default());
        let requests = Arc::new(Requests::default());
        let rec = Record::default();
        let h = Holder::start_with(gate.clone(), requests.clone(), rec.clone()).unwrap();
        // A trickle below the rate takes nothing.
        for _ in 0..3 {
            requests.count(Op::Getattr);
            gate.touch();
            std::thread::sleep(WINDOW * 3);
        }
        assert!(
            rec.0.lock().unwrap().is_empty(),
            "a trickle held the request"
        );
        // A stream takes it...
        let stream_end = Instant::now() + WINDOW * 6;
        while Instant::now() < stream_end {
            // A window's worth at each turn: a loaded machine may run this
            // thread only once a window.
            for _ in 0..MIN_REQUESTS {
                requests.count(Op::Lookup);
            }
            gate.touch();
            std::thread::sleep(Duration::from_micros(100));
        }
        // (On a loaded machine this thread may miss a whole window, which
        // then ends the hold early and the next window takes it again: so
        // holds are counted as pairs, not as one.)
        assert_eq!(rec.0.lock().unwrap().first(), Some(&0));
        // ...and quiet gives it back.
        assert!(wait_for(
            || !requests.snapshot().cpu_latency_held && rec.0.lock().unwrap().len() % 2 == 0
        ));
        let first_holds = requests.snapshot().cpu_latency_holds;
        assert!(first_holds >= 1);
        assert_eq!(rec.0.lock().unwrap().len() as u64, 2 * first_holds);
        // The thread sleeps again and a later stream takes it again.
        assert!(wait_for(|| !gate.bell.is_armed()));
        let stream_end = Instant::now() + WINDOW * 4;
        while Instant::now() < stream_end {
            // A window's worth at each turn: a loaded machine may run this
            // thread only once a window.
            for _ in 0..MIN_REQUESTS {
                requests.count(Op::Lookup);
            }
            gate.touch();
            std::thread::sleep(Duration::from_micros(100));
        }
        h.stop();
        let v = rec.0.lock().unwrap().clone();
        let holds = requests.snapshot().cpu_latency_holds;
        assert!(holds > first_holds, "the second stream took nothing");
        assert_eq!(v.len() as u64, 2 * holds, "{v:?}");
        for pair in v.chunks(2) {
            assert_eq!(pair, [0, NO_CONSTRAINT_US], "{v:?}");
        }
        assert!(requests.snapshot().cpu_latency_held_ms >= 2 * WINDOW.as_millis() as u64);
        // Stopped: touching does nothing.
        gate.touch();
        assert!(!gate.bell.is_armed());
    }
}
