//! A crash-recording device: passes every request to the device below and
//! keeps a log of every write (with its bytes) and every flush, so that the
//! disk images a power cut could have left can be built afterwards.
//!
//! The model of a crash (the write-ordering issue's crash tester uses it):
//! - writes before the last completed flush are on the media;
//! - of the writes issued since, any subset may have reached the media (a
//!   drive's write cache reorders freely between flushes), each whole or
//!   not at all (a sector-sized torn write is out of scope);
//! - a "prefix" state applies the first k writes of the log in order (a
//!   disk without a write cache that stops at write k).
//!
//! Invariants: the log holds writes in issue order with the bytes as
//! issued; [`RecordingDevice::image`] never changes the device or the log;
//! the base image is the device's content when recording started.
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::sync::Mutex;
use ufs::dev::{BlockDevice, MemDevice};
use ufs::{Error, ErrorKind, Result};

/// One logged request.
#[derive(Debug, Clone)]
pub enum Logged {
    Write { off: u64, data: Vec<u8> },
    Flush,
}

/// Which logged writes a crash image holds, by their index among the
/// writes of the log (flushes are not counted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrashState {
    pub writes: Vec<usize>,
    /// How the state was chosen: "prefix" or "reordered".
    pub kind: &'static str,
    /// Writes issued when the power went: the state holds none of the
    /// writes from this index on (a prefix's length; one past the crash
    /// write of a reordering).
    pub crash_point: usize,
    /// Writes certainly on the media: every write below this index is in
    /// the state (a prefix's length; for a reordering, the writes before
    /// the last flush issued before the crash point). What an `fsync` that
    /// returned after `durable` writes were logged promised is in the state.
    pub durable: usize,
}

pub struct RecordingDevice<D: BlockDevice> {
    inner: D,
    base: Vec<u8>,
    log: Mutex<Vec<Logged>>,
}

impl<D: BlockDevice> RecordingDevice<D> {
    /// Starts recording over `inner`, whose current content is the base.
    /// Holds a copy of the whole device: meant for test images.
    pub fn new(inner: D) -> Result<Self> {
        let size = inner.size();
        if size > 1 << 30 {
            return Err(Error::new(ErrorKind::Invalid, format!("crash recording keeps a copy of the device: {size} bytes is too large (1 GiB at most)")));
        }
        let mut base = vec![0u8; size as usize];
        inner.read_at(0, &mut base)?;
        Ok(RecordingDevice {
            inner,
            base,
            log: Mutex::new(Vec::new()),
        })
    }

    /// A recorder as it would stand after `log` over a device holding
    /// `base`: for building the crash states of a log recorded elsewhere
    /// (`writelog`, under a real mount).
    pub fn replay(base: Vec<u8>, log: Vec<Logged>) -> RecordingDevice<MemDevice> {
        RecordingDevice {
            inner: MemDevice::new(0),
            base,
            log: Mutex::new(log),
        }
    }

    pub fn inner(&self) -> &D {
        &self.inner
    }

    /// The log so far.
    pub fn log(&self) -> Vec<Logged> {
        self.log.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// For each write, how many writes precede the last flush issued before
    /// it (the writes that are certainly on the media when it is issued).
    fn durable_before(&self) -> Vec<usize> {
        let mut out = Vec::new();
        let (mut n, mut durable) = (0usize, 0usize);
        let log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        for l in log.iter() {
            match l {
                Logged::Write { .. } => {
                    out.push(durable);
                    n += 1;
                }
                Logged::Flush => durable = n,
            }
        }
        out
    }

    /// Crash states to try: every prefix of the write log (or `max_prefix`
    /// of them, evenly spaced, always with the empty and the full one), and
    /// for `reorders` crash points chosen at random, a random subset of the
    /// writes issued since the last flush before that point on top of
    /// everything flushed. Deterministic for a given `seed`.
    pub fn states(&self, max_prefix: usize, reorders: usize, seed: u64) -> Vec<CrashState> {
        let n = self.counts().0;
        let durable = self.durable_before();
        let mut out = Vec::new();
        let step = if max_prefix == 0 {
            usize::MAX
        } else {
            n.div_ceil(max_prefix.max(1)).max(1)
        };
        let mut k = 0;
        while k <= n && max_prefix > 0 {
            out.push(CrashState {
                writes: (0..k).collect(),
                kind: "prefix",
                crash_point: k,
                durable: k,
            });
            if k == n {
                break;
            }
            k = (k + step).min(n);
        }
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        for _ in 0..if n == 0 { 0 } else { reorders } {
            // Crash just after write `at` was issued.
            let at = rng.gen_range(0..n);
            let safe = durable[at];
            let mut pending: Vec<usize> = (safe..=at).collect();
            pending.shuffle(&mut rng);
            pending.truncate(rng.gen_range(0..=pending.len()));
            let mut writes: Vec<usize> = (0..safe).chain(pending).collect();
            writes.sort_unstable();
            out.push(CrashState {
                writes,
                kind: "reordered",
                crash_point: at + 1,
                durable: safe,
            });
        }
        out
    }

    /// The image a crash in `state` leaves: the base with the state's
    /// writes applied in issue order.
    pub fn image(&self, state: &CrashState) -> Result<MemDevice> {
        // Walk the log under its lock rather than copying every write's
        // bytes for each image (a crash test builds thousands of them).
        let log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        let writes: Vec<(u64, &[u8])> = log
            .iter()
            .filter_map(|l| match l {
                Logged::Write { off, data } => Some((*off, data.as_slice())),
                Logged::Flush => None,
            })
            .collect();
        let mut img = self.base.clone();
        for &i in &state.writes {
            let (off, data) = writes.get(i).ok_or_else(|| {
                Error::new(
                    ErrorKind::Invalid,
                    format!("crash state names write {i} of {}", writes.len()),
                )
            })?;
            img[*off as usize..*off as usize + data.len()].copy_from_slice(data);
        }
        Ok(MemDevice::from_vec(img))
    }

    /// Writes and flushes logged so far.
    pub fn counts(&self) -> (usize, usize) {
        let log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        let w = log
            .iter()
            .filter(|l| matches!(l, Logged::Write { .. }))
            .count();
        (w, log.len() - w)
    }
}

impl<D: BlockDevice> BlockDevice for RecordingDevice<D> {
    fn read_at(&self, off: u64, buf: &mut [u8]) -> Result<()> {
        self.inner.read_at(off, buf)
    }
    fn write_at(&self, off: u64, buf: &[u8]) -> Result<()> {
        self.inner.write_at(off, buf)?;
        self.log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Logged::Write {
                off,
                data: buf.to_vec(),
            });
        Ok(())
    }
    fn flush(&self) -> Result<()> {
        self.inner.flush()?;
        self.log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Logged::Flush);
        Ok(())
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn disk_stats(&self) -> Option<ufs::dev::DiskStats> {
        self.inner.disk_stats()
    }
    fn drop_caches(&self) {
        self.inner.drop_caches()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(d: &MemDevice, off: u64, n: usize) -> Vec<u8> {
        let mut b = vec![0; n];
        d.read_at(off, &mut b).unwrap();
        b
    }

    #[test]
    fn prefixes_and_reorderings_respect_flushes() {
        let base = MemDevice::new(4096);
        base.write_at(0, &[9; 8]).unwrap();
        let r = RecordingDevice::new(base).unwrap();
        r.write_at(0, &[1; 4]).unwrap(); // write 0
        r.write_at(100, &[2; 4]).unwrap(); // write 1
        r.flush().unwrap();
        r.write_at(200, &[3; 4]).unwrap(); // write 2
        r.write_at(0, &[4; 2]).unwrap(); // write 3, over write 0
        assert_eq!(r.counts(), (4, 1));
        // The device below saw everything.
        assert_eq!(bytes(r.inner(), 0, 8), vec![4, 4, 1, 1, 9, 9, 9, 9]);

        let states = r.states(usize::MAX, 0, 1);
        assert_eq!(states.len(), 5, "prefixes 0..=4");
        let empty = r.image(&states[0]).unwrap();
        assert_eq!(bytes(&empty, 0, 8), vec![9; 8], "the base");
        let two = r.image(&states[2]).unwrap();
        assert_eq!(bytes(&two, 0, 4), vec![1; 4]);
        assert_eq!(bytes(&two, 100, 4), vec![2; 4]);
        assert_eq!(bytes(&two, 200, 4), vec![0; 4]);
        let all = r.image(&states[4]).unwrap();
        assert_eq!(bytes(&all, 0, 4), vec![4, 4, 1, 1]);

        // Every reordering keeps the flushed writes 0 and 1 once a write
        // after the flush is issued; repeatable for a seed.
        let re = r.states(0, 200, 7);
        assert_eq!(re.len(), 200);
        for s in &re {
            if s.writes.iter().any(|&w| w >= 2) {
                assert!(s.writes.starts_with(&[0, 1]), "{s:?}");
            }
            // Crash at write 0 or 1: nothing flushed yet; at 2 or 3: the
            // two writes before the flush are durable.
            assert!(s.crash_point >= 1 && s.crash_point <= 4, "{s:?}");
            let want = if s.crash_point <= 2 { 0 } else { 2 };
            assert_eq!(s.durable, want, "{s:?}");
            assert!(s.writes.iter().all(|&w| w < s.crash_point), "{s:?}");
            assert!((0..s.durable).all(|w| s.writes.contains(&w)), "{s:?}");
        }
        for s in &states {
            assert_eq!((s.crash_point, s.durable), (s.writes.len(), s.writes.len()));
        }
        assert!(
            re.iter().any(|s| s.writes == vec![0, 1, 3]),
            "a later write without an earlier unflushed one"
        );
        assert_eq!(re, r.states(0, 200, 7));
        assert!(r
            .image(&CrashState {
                writes: vec![9],
                kind: "prefix",
                crash_point: 10,
                durable: 10,
            })
            .is_err());
    }

    #[test]
    fn spaced_prefixes_keep_both_ends() {
        let r = RecordingDevice::new(MemDevice::new(1 << 16)).unwrap();
        for i in 0..100u64 {
            r.write_at(i * 512, &[i as u8; 512]).unwrap();
        }
        let s = r.states(10, 0, 1);
        assert_eq!(s.first().unwrap().writes.len(), 0);
        assert_eq!(s.last().unwrap().writes.len(), 100);
        assert!(s.len() <= 12, "{}", s.len());
        assert!(RecordingDevice::new(SparseBig).is_err());
    }

    struct SparseBig;
    impl BlockDevice for SparseBig {
        fn read_at(&self, _: u64, _: &mut [u8]) -> Result<()> {
            Ok(())
        }
        fn write_at(&self, _: u64, _: &[u8]) -> Result<()> {
            Ok(())
        }
        fn flush(&self) -> Result<()> {
            Ok(())
        }
        fn size(&self) -> u64 {
            2 << 30
        }
    }
}
