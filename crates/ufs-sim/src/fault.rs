//! A fault-injecting device: passes requests to the device below until a
//! chosen write or flush, which fails (optionally after writing part of its
//! bytes, a short write), and fails every write and flush after it, as a
//! disk that has gone away does. Reads keep working.
//!
//! Invariants: writes and flushes are numbered from 0 in issue order,
//! separately; once a fault has fired the device below receives no
//! further write or flush; a short write puts exactly the first half of the
//! request (rounded down to 512 bytes) on the device below.
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use ufs::dev::BlockDevice;
use ufs::{Error, ErrorKind, Result};

/// Which request fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Write number N fails, writing nothing.
    Write(usize),
    /// Write number N writes half its bytes, then fails.
    ShortWrite(usize),
    /// Flush number N fails.
    Flush(usize),
}

pub struct FaultDevice<D: BlockDevice> {
    inner: D,
    fault: Fault,
    writes: AtomicUsize,
    flushes: AtomicUsize,
    fired: AtomicBool,
    after: AtomicUsize,
}

impl<D: BlockDevice> FaultDevice<D> {
    pub fn new(inner: D, fault: Fault) -> Self {
        FaultDevice {
            inner,
            fault,
            writes: AtomicUsize::new(0),
            flushes: AtomicUsize::new(0),
            fired: AtomicBool::new(false),
            after: AtomicUsize::new(0),
        }
    }

    /// Whether the fault has happened.
    pub fn fired(&self) -> bool {
        self.fired.load(Ordering::SeqCst)
    }

    /// Writes and flushes issued so far (the failing ones included).
    pub fn counts(&self) -> (usize, usize) {
        (
            self.writes.load(Ordering::SeqCst),
            self.flushes.load(Ordering::SeqCst),
        )
    }

    /// Writes and flushes asked for after the fault fired (a file system
    /// that stops at its first failure asks for none).
    pub fn requests_after_fault(&self) -> usize {
        self.after.load(Ordering::SeqCst)
    }

    pub fn inner(&self) -> &D {
        &self.inner
    }

    fn dead(&self, what: &str) -> Error {
        Error::new(
            ErrorKind::Io,
            format!("injected fault: {what} failed (the device is gone)"),
        )
    }
}

impl<D: BlockDevice> BlockDevice for FaultDevice<D> {
    fn read_at(&self, off: u64, buf: &mut [u8]) -> Result<()> {
        self.inner.read_at(off, buf)
    }

    fn write_at(&self, off: u64, buf: &[u8]) -> Result<()> {
        let n = self.writes.fetch_add(1, Ordering::SeqCst);
        if self.fired() {
            self.after.fetch_add(1, Ordering::SeqCst);
            return Err(self.dead("write"));
        }
        match self.fault {
            Fault::Write(k) if k == n => {
                self.fired.store(true, Ordering::SeqCst);
                Err(self.dead("write"))
            }
            Fault::ShortWrite(k) if k == n => {
                self.fired.store(true, Ordering::SeqCst);
                let half = buf.len() / 2 / 512 * 512;
                if half > 0 {
                    self.inner.write_at(off, &buf[..half])?;
                }
                Err(Error::new(
                    ErrorKind::Io,
                    format!(
                        "injected fault: short write ({half} of {} bytes)",
                        buf.len()
                    ),
                ))
            }
            _ => self.inner.write_at(off, buf),
        }
    }

    fn flush(&self) -> Result<()> {
        let n = self.flushes.fetch_add(1, Ordering::SeqCst);
        if self.fired() {
            self.after.fetch_add(1, Ordering::SeqCst);
            return Err(self.dead("flush"));
        }
        if self.fault == Fault::Flush(n) {
            self.fired.store(true, Ordering::SeqCst);
            return Err(self.dead("flush"));
        }
        self.inner.flush()
    }

    fn size(&self) -> u64 {
        self.inner.size()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ufs::dev::MemDevice;

    #[test]
    fn fails_from_the_chosen_request_on() {
        let d = FaultDevice::new(MemDevice::new(1 << 20), Fault::Write(2));
        d.write_at(0, &[1; 512]).unwrap();
        d.flush().unwrap();
        d.write_at(512, &[2; 512]).unwrap();
        assert!(!d.fired());
        assert_eq!(d.write_at(1024, &[3; 512]).unwrap_err().kind, ErrorKind::Io);
        assert!(d.fired());
        assert!(d.write_at(2048, &[4; 512]).is_err() && d.flush().is_err());
        assert_eq!(d.requests_after_fault(), 2);
        let mut b = [0u8; 1536];
        d.read_at(0, &mut b).unwrap();
        assert_eq!((b[0], b[512], b[1024]), (1, 2, 0));
        assert_eq!(d.counts(), (4, 2));
    }

    #[test]
    fn a_short_write_leaves_half() {
        let d = FaultDevice::new(MemDevice::new(1 << 20), Fault::ShortWrite(0));
        assert!(d.write_at(0, &[9; 4096]).is_err());
        let mut b = [0u8; 4096];
        d.read_at(0, &mut b).unwrap();
        assert!(b[..2048].iter().all(|&x| x == 9) && b[2048..].iter().all(|&x| x == 0));
    }

    #[test]
    fn a_failed_flush_stops_writes() {
        let d = FaultDevice::new(MemDevice::new(1 << 20), Fault::Flush(0));
        d.write_at(0, &[1; 512]).unwrap();
        assert!(d.flush().is_err());
        assert!(d.write_at(0, &[2; 512]).is_err());
    }
}
