//! A write log on file under a real mount (`ufskit mount -o record=FILE`):
//! every write the engine sends the device, with its bytes, and every
//! completed flush, appended to FILE in order, so that the images a power
//! cut could have left can be built afterwards from the image as it was
//! before the mount and the log (`crash::RecordingDevice::replay`).
//!
//! Format: the 8-byte magic `UFSKWL01`, then records: `W`, offset (u64
//! little-endian), length (u32 little-endian), the bytes; or `F` (a flush
//! that completed). Each record goes out in one `write(2)` while the log's
//! lock is held, so a reader who notes the log's length after an `fsync`
//! returned (the powercut tester does) has every write and flush that
//! fsync waited for before that length.
//!
//! Invariants: a record is logged only after the device below completed
//! the request; the log is append-only; the bytes passed through are not
//! changed.
use crate::crash::Logged;
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;
use ufs::dev::BlockDevice;
use ufs::{Error, ErrorKind, Result};

pub const MAGIC: &[u8; 8] = b"UFSKWL01";

pub struct WriteLogDevice<D: BlockDevice> {
    inner: D,
    log: Mutex<std::fs::File>,
}

impl<D: BlockDevice> WriteLogDevice<D> {
    /// Starts logging the writes to `inner` into `path` (made or emptied).
    pub fn new(inner: D, path: &Path) -> Result<Self> {
        let mut f = std::fs::File::create(path)
            .map_err(|e| Error::new(ErrorKind::Io, format!("write log {}: {e}", path.display())))?;
        f.write_all(MAGIC)
            .map_err(|e| Error::new(ErrorKind::Io, format!("write log: {e}")))?;
        Ok(WriteLogDevice {
            inner,
            log: Mutex::new(f),
        })
    }

    /// Logs a completed write of `buf` at `off`.
    fn append_write(&self, off: u64, buf: &[u8]) -> Result<()> {
        let mut rec = Vec::with_capacity(13 + buf.len());
        rec.push(b'W');
        rec.extend_from_slice(&off.to_le_bytes());
        rec.extend_from_slice(&(buf.len() as u32).to_le_bytes());
        rec.extend_from_slice(buf);
        self.append(&rec)
    }

    fn append(&self, rec: &[u8]) -> Result<()> {
        let mut f = self.log.lock().unwrap_or_else(|p| p.into_inner());
        f.write_all(rec)
            .map_err(|e| Error::new(ErrorKind::Io, format!("write log: {e}")))
    }
}

impl<D: BlockDevice> BlockDevice for WriteLogDevice<D> {
    fn read_at(&self, off: u64, buf: &mut [u8]) -> Result<()> {
        self.inner.read_at(off, buf)
    }
    fn read_single(&self, off: u64, buf: &mut [u8]) -> Result<()> {
        self.inner.read_single(off, buf)
    }
    fn write_at(&self, off: u64, buf: &[u8]) -> Result<()> {
        self.inner.write_at(off, buf)?;
        self.append_write(off, buf)
    }
    fn write_untorn(&self, off: u64, buf: &[u8]) -> Result<()> {
        self.inner.write_untorn(off, buf)?;
        self.append_write(off, buf)
    }
    fn flush(&self) -> Result<()> {
        self.inner.flush()?;
        self.append(b"F")
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn prefetch(&self, off: u64, len: usize) {
        self.inner.prefetch(off, len)
    }
    fn prefetch_single(&self, off: u64, len: usize) {
        self.inner.prefetch_single(off, len)
    }
    fn prefetches(&self) -> bool {
        self.inner.prefetches()
    }
    fn disk_stats(&self) -> Option<ufs::dev::DiskStats> {
        self.inner.disk_stats()
    }
    fn drop_caches(&self) {
        self.inner.drop_caches()
    }
}

/// A log read back: its requests in order, and for each record the log's
/// length once it was written (so a length noted by a reader can be turned
/// into a position in the requests).
pub struct ReadLog {
    pub requests: Vec<Logged>,
    /// `ends[i]`: the log's length in bytes after request `i`.
    pub ends: Vec<u64>,
    /// `durable[i]`: the writes before the last flush among requests
    /// `0..=i`.
    durable: Vec<usize>,
}

impl ReadLog {
    /// Reads `path`; a record cut short at the end (a log copied while
    /// written) is left out.
    pub fn read(path: &Path) -> Result<ReadLog> {
        let b = std::fs::read(path)
            .map_err(|e| Error::new(ErrorKind::Io, format!("{}: {e}", path.display())))?;
        if b.len() < 8 || &b[..8] != MAGIC {
            return Err(Error::new(
                ErrorKind::Invalid,
                format!("{} is not a ufskit write log", path.display()),
            ));
        }
        let mut at = 8;
        let (mut requests, mut ends) = (Vec::new(), Vec::new());
        while at < b.len() {
            match b[at] {
                b'F' => {
                    at += 1;
                    requests.push(Logged::Flush);
                }
                b'W' if at + 13 <= b.len() => {
                    let off = u64::from_le_bytes(b[at + 1..at + 9].try_into().unwrap_or_default());
                    let len = u32::from_le_bytes(b[at + 9..at + 13].try_into().unwrap_or_default())
                        as usize;
                    if at + 13 + len > b.len() {
                        break;
                    }
                    requests.push(Logged::Write {
                        off,
                        data: b[at + 13..at + 13 + len].to_vec(),
                    });
                    at += 13 + len;
                }
                b'W' => break,
                other => {
                    return Err(Error::new(
                        ErrorKind::Invalid,
                        format!(
                            "{}: bad record type {other:#x} at byte {at}",
                            path.display()
                        ),
                    ))
                }
            }
            ends.push(at as u64);
        }
        let (mut writes, mut last) = (0, 0);
        let durable = requests
            .iter()
            .map(|r| {
                match r {
                    Logged::Write { .. } => writes += 1,
                    Logged::Flush => last = writes,
                }
                last
            })
            .collect();
        Ok(ReadLog {
            requests,
            ends,
            durable,
        })
    }

    /// The writes an `fsync` that returned when the log was `len` bytes
    /// long made durable: those before the last flush in the first `len`
    /// bytes.
    pub fn durable_at(&self, len: u64) -> usize {
        match self.ends.partition_point(|&end| end <= len) {
            0 => 0,
            n => self.durable[n - 1],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ufs::dev::MemDevice;

    #[test]
    fn the_log_reads_back_in_order_and_a_length_names_what_was_durable() {
        let dir = std::env::temp_dir().join(format!("ufskit-writelog-{}", std::process::id()));
        let path = dir.with_extension("log");
        let dev = WriteLogDevice::new(MemDevice::new(1 << 16), &path).unwrap();
        dev.write_at(0, &[1; 512]).unwrap();
        dev.write_at(4096, &[2; 1024]).unwrap();
        dev.flush().unwrap();
        let after_flush = std::fs::metadata(&path).unwrap().len();
        dev.write_untorn(8192, &[3; 512]).unwrap();
        let mut back = vec![0u8; 512];
        dev.read_at(8192, &mut back).unwrap();
        assert_eq!(back, vec![3; 512], "the bytes pass through");
        let log = ReadLog::read(&path).unwrap();
        assert_eq!(log.requests.len(), 4);
        assert!(
            matches!(&log.requests[1], Logged::Write { off: 4096, data } if data.len() == 1024)
        );
        assert!(matches!(log.requests[2], Logged::Flush));
        assert_eq!(log.durable_at(after_flush), 2);
        assert_eq!(log.durable_at(*log.ends.last().unwrap()), 2);
        assert_eq!(log.durable_at(log.ends[1]), 0);
        // A record cut short at the end is left out.
        let b = std::fs::read(&path).unwrap();
        std::fs::write(&path, &b[..b.len() - 10]).unwrap();
        assert_eq!(ReadLog::read(&path).unwrap().requests.len(), 3);
        std::fs::write(&path, b"not a log").unwrap();
        assert!(ReadLog::read(&path).is_err());
        let _ = std::fs::remove_file(&path);
    }
}
