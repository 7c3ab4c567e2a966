//! Memory pressure watcher: Linux's counterpart of FreeBSD's `vm_lowmem`
//! event, which the 2008 dirhash work (seed `002_*`) hooks to give memory
//! back. Once a second it reads the kernel's pressure stall information
//! (`/proc/pressure/memory`, "some avg10": share of the last 10 s in which
//! some task waited for memory) and the available-memory figure of
//! `/proc/meminfo`; when either says memory is short it delivers a
//! low-memory event to dirhash and has the buffer cache give back half of
//! its clean blocks (at most one event per second).
//!
//! Invariants: the watcher only reads `/proc`; a missing or unreadable
//! file disables that signal, never the mount.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Thresholds: pressure above `psi_some_avg10` percent, or available
/// memory below `min_available_percent` of the total.
#[derive(Debug, Clone, Copy)]
pub struct Thresholds {
    pub psi_some_avg10: f64,
    pub min_available_percent: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            psi_some_avg10: 10.0,
            min_available_percent: 5.0,
        }
    }
}

/// "some avg10" from the text of `/proc/pressure/memory`.
pub fn parse_psi_some_avg10(text: &str) -> Option<f64> {
    let line = text.lines().find(|l| l.starts_with("some "))?;
    line.split_whitespace()
        .find_map(|f| f.strip_prefix("avg10="))
        .and_then(|v| v.parse().ok())
}

/// `(MemAvailable, MemTotal)` in KiB from the text of `/proc/meminfo`.
pub fn parse_meminfo(text: &str) -> Option<(u64, u64)> {
    let field = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
    };
    Some((field("MemAvailable:")?, field("MemTotal:")?))
}

/// Whether the readings call for a low-memory event.
pub fn under_pressure(t: &Thresholds, psi: Option<f64>, mem: Option<(u64, u64)>) -> bool {
    psi.is_some_and(|p| p >= t.psi_some_avg10)
        || mem.is_some_and(|(avail, total)| {
            total > 0 && (avail as f64) * 100.0 < t.min_available_percent * total as f64
        })
}

pub struct Watcher {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watcher {
    pub fn start(fs: Arc<ufs::Fs>, t: Thresholds) -> Watcher {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("ufs-lowmem".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    let psi = std::fs::read_to_string("/proc/pressure/memory")
                        .ok()
                        .and_then(|s| parse_psi_some_avg10(&s));
                    let mem = std::fs::read_to_string("/proc/meminfo")
                        .ok()
                        .and_then(|s| parse_meminfo(&s));
                    if under_pressure(&t, psi, mem) {
                        let freed = fs.dirhash_lowmem();
                        // The buffer cache gives back half of its clean
                        // blocks, least recently used first, each event.
                        let cached = fs.cache_stats().bytes_cached;
                        let trimmed = fs.trim_cache(cached / 2);
                        if freed > 0 || trimmed > 0 {
                            crate::service::log(format_args!(
                                "memory pressure: dirhash freed {freed} bytes, the cache {trimmed}"
                            ));
                        }
                    }
                    for _ in 0..10 {
                        if flag.load(Ordering::Relaxed) {
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(100));
                    }
                }
            })
            .ok();
        Watcher { stop, thread }
    }

    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_kernels_formats() {
        let psi = "some avg10=12.50 avg60=3.00 avg300=0.50 total=123456\nfull avg10=1.00 avg60=0.00 avg300=0.00 total=100\n";
        assert_eq!(parse_psi_some_avg10(psi), Some(12.5));
        let mi = "MemTotal:       24000000 kB\nMemFree:          100000 kB\nMemAvailable:     900000 kB\n";
        assert_eq!(parse_meminfo(mi), Some((900_000, 24_000_000)));
        let t = Thresholds::default();
        assert!(under_pressure(&t, Some(12.5), None));
        assert!(under_pressure(&t, None, Some((900_000, 24_000_000))));
        assert!(!under_pressure(
            &t,
            Some(0.1),
            Some((12_000_000, 24_000_000))
        ));
        assert!(!under_pressure(&t, None, None));
    }

    #[test]
    fn this_machines_proc_files_parse() {
        if let Ok(s) = std::fs::read_to_string("/proc/meminfo") {
            let (avail, total) = parse_meminfo(&s).expect("meminfo parses");
            assert!(avail <= total && total > 0);
        }
        if let Ok(s) = std::fs::read_to_string("/proc/pressure/memory") {
            assert!(parse_psi_some_avg10(&s).is_some(), "{s}");
        }
    }
}
