//! Block devices: where bytes finally go.
//!
//! Invariants: every implementation is `Send + Sync` and takes `&self`
//! (internal locking), transfers whole requests or fails, and never reads or
//! writes past `size()`. `flush` returns only when earlier writes are
//! durable. Layers stack: a counting device, read-ahead, a partition's
//! window, and the simulated devices of the `ufs-sim` crate (a modeled
//! disk, a crash recorder, a fault injector) wrap any device behind the
//! same trait; `drop_caches` and `disk_stats` pass down through every
//! layer. `write_untorn` is a write that a SIGKILL of this process cannot
//! leave half done (the kernel's buffered write copies page by page and
//! stops at a fatal signal): blocks with a check-hash over more than one
//! page go that way.
use crate::error::{Error, ErrorKind, Result};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use ufs_format::bytes::{to_index, to_signed};

pub trait BlockDevice: Send + Sync {
    fn read_at(&self, off: u64, buf: &mut [u8]) -> Result<()>;
    /// Reads `buf` at `off` for a block whose neighbours the reader will
    /// not want next (a directory block reached by a walk): a read-ahead
    /// layer reads just it, keeping its window. By default a plain read.
    fn read_single(&self, off: u64, buf: &mut [u8]) -> Result<()> {
        self.read_at(off, buf)
    }
    fn write_at(&self, off: u64, buf: &[u8]) -> Result<()>;
    /// Writes `buf` at `off` so that a kill of this process cannot leave
    /// part of it written and part not (the device may still tear it on
    /// power loss, as any disk can). By default a plain write.
    fn write_untorn(&self, off: u64, buf: &[u8]) -> Result<()> {
        self.write_at(off, buf)
    }
    fn flush(&self) -> Result<()>;
    fn size(&self) -> u64;
    /// A hint that `len` bytes at `off` will be read soon: a device that
    /// can start reading them in the background does (an image file asks
    /// the kernel's page cache for them). Never an error, never a change.
    /// By default nothing (memory devices; the modeled disk, whose figures
    /// must not depend on the host).
    fn prefetch(&self, _off: u64, _len: usize) {}
    /// [`prefetch`](Self::prefetch) for a block that will be read with
    /// [`read_single`](Self::read_single): a read-ahead layer hints just
    /// these bytes instead of its whole window. By default `prefetch`.
    fn prefetch_single(&self, off: u64, len: usize) {
        self.prefetch(off, len)
    }
    /// Whether [`prefetch`](Self::prefetch) does anything here.
    fn prefetches(&self) -> bool {
        false
    }
    /// The modeled disk's figures, if the stack has one.
    fn disk_stats(&self) -> Option<DiskStats> {
        None
    }
    /// Forgets every cached byte below the file system (cold-cache runs).
    fn drop_caches(&self) {}
}

pub mod partition;

fn check_range(off: u64, len: usize, size: u64) -> Result<()> {
    match off.checked_add(len as u64) {
        Some(end) if end <= size => Ok(()),
        _ => Err(Error::new(
            ErrorKind::Io,
            format!("request at byte {off} of {len} bytes is past the device end ({size})"),
        )),
    }
}

/// An image file or block device node, with an exclusive advisory lock held
/// for the life of the value (so fsck refuses a mounted image).
pub struct FileDevice {
    file: File,
    size: u64,
    read_only: bool,
    /// The same file opened with O_DIRECT, for untorn writes: a direct
    /// write is submitted to the device whole and waited for
    /// uninterruptibly, where a buffered one copies page by page and stops
    /// at a fatal signal. None when the file system below refuses
    /// O_DIRECT (tmpfs); cleared if a direct write is refused.
    direct: Mutex<Option<File>>,
}

/// Alignment of O_DIRECT transfers (memory, offset and length): a page,
/// which satisfies every logical block size up to it.
const DIRECT_ALIGN: usize = 4096;

impl FileDevice {
    /// Opens `path`; takes an exclusive lock (shared for read-only opens
    /// unless `exclusive`). Fails with `Busy` if another process holds it.
    pub fn open(path: &Path, writable: bool) -> Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(writable)
            .open(path)
            .map_err(|e| {
                Error::new(
                    ErrorKind::from_io(&e),
                    format!("cannot open {}: {e}", path.display()),
                )
            })?;
        let op = if writable {
            libc::LOCK_EX
        } else {
            libc::LOCK_SH
        };
        if !lock_file(&file, op | libc::LOCK_NB) {
            return Err(Error::new(
                ErrorKind::Busy,
                format!(
                    "{} is in use (mounted or being checked by another ufskit process)",
                    path.display()
                ),
            ));
        }
        let size = device_size(&file)?;
        let direct = if writable {
            use std::os::unix::fs::OpenOptionsExt;
            OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_DIRECT)
                .open(path)
                .ok()
        } else {
            None
        };
        Ok(FileDevice {
            file,
            size,
            read_only: !writable,
            direct: Mutex::new(direct),
        })
    }

    /// A direct write of `buf` at `off`, if the file takes one: Ok(false)
    /// when it does not (unaligned request, or O_DIRECT refused).
    fn write_direct(&self, off: u64, buf: &[u8]) -> Result<bool> {
        if !off.is_multiple_of(DIRECT_ALIGN as u64)
            || !buf.len().is_multiple_of(DIRECT_ALIGN)
            || buf.is_empty()
        {
            return Ok(false);
        }
        let mut g = self.direct.lock().unwrap_or_else(|p| p.into_inner());
        let Some(f) = g.as_ref() else {
            return Ok(false);
        };
        // An aligned copy, found inside a slightly larger allocation.
        let mut space = vec![0u8; buf.len() + DIRECT_ALIGN];
        let a = space.as_ptr().align_offset(DIRECT_ALIGN);
        let aligned = &mut space[a..a + buf.len()];
        aligned.copy_from_slice(buf);
        match f.write_at(aligned, off) {
            Ok(n) if n == buf.len() => Ok(true),
            Ok(n) => {
                // A short direct write: the rest goes the plain way.
                self.file.write_all_at(&buf[n..], off + n as u64)?;
                Ok(true)
            }
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                *g = None;
                Ok(false)
            }
            Err(e) => Err(e.into()),
        }
    }
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }
}

fn lock_file(file: &File, op: i32) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY-free: flock through the libc crate is a plain syscall wrapper.
    flock(file.as_raw_fd(), op)
}

#[allow(unsafe_code)]
fn flock(fd: i32, op: i32) -> bool {
    // SAFETY: flock has no memory-safety preconditions; fd is owned by File.
    unsafe { libc::flock(fd, op) == 0 }
}

#[allow(unsafe_code)]
fn fadvise_willneed(fd: i32, off: u64, len: usize) {
    // SAFETY: posix_fadvise only reads its integer arguments; fd is owned
    // by a live File. A failure is only a lost hint.
    unsafe {
        libc::posix_fadvise(
            fd,
            to_signed(off),
            to_signed(len),
            libc::POSIX_FADV_WILLNEED,
        );
    }
}

fn device_size(file: &File) -> Result<u64> {
    use std::io::{Seek, SeekFrom};
    let meta = file.metadata()?;
    if meta.is_file() {
        return Ok(meta.len());
    }
    // Block devices report 0 in metadata; seek to the end instead.
    let mut f = file.try_clone()?;
    let n = f.seek(SeekFrom::End(0))?;
    Ok(n)
}

impl BlockDevice for FileDevice {
    fn read_at(&self, off: u64, buf: &mut [u8]) -> Result<()> {
        check_range(off, buf.len(), self.size)?;
        self.file.read_exact_at(buf, off)?;
        Ok(())
    }
    fn write_at(&self, off: u64, buf: &[u8]) -> Result<()> {
        if self.read_only {
            return Err(Error::new(ErrorKind::ReadOnly, "device opened read-only"));
        }
        check_range(off, buf.len(), self.size)?;
        self.file.write_all_at(buf, off)?;
        Ok(())
    }
    fn prefetches(&self) -> bool {
        true
    }
    fn prefetch(&self, off: u64, len: usize) {
        use std::os::fd::AsRawFd;
        if check_range(off, len, self.size).is_ok() {
            fadvise_willneed(self.file.as_raw_fd(), off, len);
        }
    }
    fn write_untorn(&self, off: u64, buf: &[u8]) -> Result<()> {
        if self.read_only {
            return Err(Error::new(ErrorKind::ReadOnly, "device opened read-only"));
        }
        check_range(off, buf.len(), self.size)?;
        if !self.write_direct(off, buf)? {
            self.file.write_all_at(buf, off)?;
        }
        Ok(())
    }
    fn flush(&self) -> Result<()> {
        if !self.read_only {
            self.file.sync_data()?;
        }
        Ok(())
    }
    fn size(&self) -> u64 {
        self.size
    }
}

/// A device in memory, for tests and experiments.
pub struct MemDevice {
    data: Mutex<Vec<u8>>,
}

impl MemDevice {
    pub fn new(size: u64) -> Self {
        MemDevice {
            data: Mutex::new(vec![0; to_index(size)]),
        }
    }
    pub fn from_vec(v: Vec<u8>) -> Self {
        MemDevice {
            data: Mutex::new(v),
        }
    }
    pub fn snapshot(&self) -> Vec<u8> {
        self.data.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl BlockDevice for MemDevice {
    fn read_at(&self, off: u64, buf: &mut [u8]) -> Result<()> {
        let d = self.data.lock().unwrap_or_else(|p| p.into_inner());
        check_range(off, buf.len(), d.len() as u64)?;
        let o = to_index(off);
        buf.copy_from_slice(&d[o..o + buf.len()]);
        Ok(())
    }
    fn write_at(&self, off: u64, buf: &[u8]) -> Result<()> {
        let mut d = self.data.lock().unwrap_or_else(|p| p.into_inner());
        check_range(off, buf.len(), d.len() as u64)?;
        let o = to_index(off);
        d[o..o + buf.len()].copy_from_slice(buf);
        Ok(())
    }
    fn flush(&self) -> Result<()> {
        Ok(())
    }
    fn size(&self) -> u64 {
        self.data.lock().unwrap_or_else(|p| p.into_inner()).len() as u64
    }
}

/// A sparse device in memory: only pages ever written take memory, so a
/// 40 GB file system whose metadata is a few hundred MB fits (benchmarks
/// on the modeled disk). Unwritten bytes read as zero, and pages of zeros
/// are not kept (a benchmark may write gigabytes of zeroed file data).
pub struct SparseDevice {
    size: u64,
    pages: Mutex<std::collections::HashMap<u64, Box<[u8; SPARSE_PAGE]>>>,
}

const SPARSE_PAGE: usize = 4096;

impl SparseDevice {
    pub fn new(size: u64) -> Self {
        SparseDevice {
            size,
            pages: Mutex::new(std::collections::HashMap::new()),
        }
    }
    /// Bytes of memory held by written pages.
    pub fn resident(&self) -> u64 {
        self.pages.lock().unwrap_or_else(|p| p.into_inner()).len() as u64 * SPARSE_PAGE as u64
    }
}

impl SparseDevice {
    /// Calls `f(page, offset in page, range of the buffer)` for each page
    /// piece of the request `[off, off + len)`.
    fn pieces(off: u64, len: usize, mut f: impl FnMut(u64, usize, std::ops::Range<usize>)) {
        let mut done = 0;
        while done < len {
            let pos = off + done as u64;
            let (page, o) = (pos / SPARSE_PAGE as u64, to_index(pos % SPARSE_PAGE as u64));
            let n = (SPARSE_PAGE - o).min(len - done);
            f(page, o, done..done + n);
            done += n;
        }
    }
}

impl BlockDevice for SparseDevice {
    fn read_at(&self, off: u64, buf: &mut [u8]) -> Result<()> {
        check_range(off, buf.len(), self.size)?;
        let pages = self.pages.lock().unwrap_or_else(|p| p.into_inner());
        Self::pieces(off, buf.len(), |page, o, r| match pages.get(&page) {
            Some(p) => buf[r.clone()].copy_from_slice(&p[o..o + r.len()]),
            None => buf[r].fill(0),
        });
        Ok(())
    }
    fn write_at(&self, off: u64, buf: &[u8]) -> Result<()> {
        check_range(off, buf.len(), self.size)?;
        let mut pages = self.pages.lock().unwrap_or_else(|p| p.into_inner());
        Self::pieces(off, buf.len(), |page, o, r| {
            let zero = buf[r.clone()].iter().all(|&b| b == 0);
            match pages.get_mut(&page) {
                None if zero => {}
                Some(p)
                    if zero
                        && (o == 0 && r.len() == SPARSE_PAGE
                            || p.iter()
                                .enumerate()
                                .all(|(i, &b)| b == 0 || (i >= o && i < o + r.len()))) =>
                {
                    // A page that becomes all zeros takes no memory again.
                    pages.remove(&page);
                }
                _ => pages
                    .entry(page)
                    .or_insert_with(|| Box::new([0u8; SPARSE_PAGE]))[o..o + r.len()]
                    .copy_from_slice(&buf[r]),
            }
        });
        Ok(())
    }
    fn flush(&self) -> Result<()> {
        Ok(())
    }
    fn size(&self) -> u64 {
        self.size
    }
}

/// Request counters of a device stack.
#[derive(Debug, Default, Clone, Copy, serde::Serialize)]
pub struct DevStats {
    pub reads: u64,
    pub writes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub flushes: u64,
    /// Sum of |start - end of previous request| in bytes.
    pub seek_bytes: u64,
}

/// Counts requests, bytes and seek distance of the device below.
pub struct CountingDevice<D: BlockDevice> {
    inner: D,
    reads: AtomicU64,
    writes: AtomicU64,
    read_bytes: AtomicU64,
    write_bytes: AtomicU64,
    flushes: AtomicU64,
    seek_bytes: AtomicU64,
    head: AtomicU64,
}

impl<D: BlockDevice> CountingDevice<D> {
    pub fn new(inner: D) -> Self {
        CountingDevice {
            inner,
            reads: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            read_bytes: AtomicU64::new(0),
            write_bytes: AtomicU64::new(0),
            flushes: AtomicU64::new(0),
            seek_bytes: AtomicU64::new(0),
            head: AtomicU64::new(0),
        }
    }
    pub fn stats(&self) -> DevStats {
        DevStats {
            reads: self.reads.load(Ordering::Relaxed),
            writes: self.writes.load(Ordering::Relaxed),
            read_bytes: self.read_bytes.load(Ordering::Relaxed),
            write_bytes: self.write_bytes.load(Ordering::Relaxed),
            flushes: self.flushes.load(Ordering::Relaxed),
            seek_bytes: self.seek_bytes.load(Ordering::Relaxed),
        }
    }
    pub fn inner(&self) -> &D {
        &self.inner
    }
    fn seek(&self, off: u64, len: usize) {
        let prev = self.head.swap(off + len as u64, Ordering::Relaxed);
        self.seek_bytes
            .fetch_add(prev.abs_diff(off), Ordering::Relaxed);
    }
}

impl<D: BlockDevice> BlockDevice for CountingDevice<D> {
    fn read_at(&self, off: u64, buf: &mut [u8]) -> Result<()> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.read_bytes
            .fetch_add(buf.len() as u64, Ordering::Relaxed);
        self.seek(off, buf.len());
        self.inner.read_at(off, buf)
    }
    fn write_at(&self, off: u64, buf: &[u8]) -> Result<()> {
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.write_bytes
            .fetch_add(buf.len() as u64, Ordering::Relaxed);
        self.seek(off, buf.len());
        self.inner.write_at(off, buf)
    }
    fn write_untorn(&self, off: u64, buf: &[u8]) -> Result<()> {
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.write_bytes
            .fetch_add(buf.len() as u64, Ordering::Relaxed);
        self.seek(off, buf.len());
        self.inner.write_untorn(off, buf)
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
    fn flush(&self) -> Result<()> {
        self.flushes.fetch_add(1, Ordering::Relaxed);
        self.inner.flush()
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn disk_stats(&self) -> Option<DiskStats> {
        self.inner.disk_stats()
    }
    fn drop_caches(&self) {
        self.inner.drop_caches()
    }
}

impl BlockDevice for Box<dyn BlockDevice> {
    fn read_at(&self, off: u64, buf: &mut [u8]) -> Result<()> {
        (**self).read_at(off, buf)
    }
    fn read_single(&self, off: u64, buf: &mut [u8]) -> Result<()> {
        (**self).read_single(off, buf)
    }
    fn write_at(&self, off: u64, buf: &[u8]) -> Result<()> {
        (**self).write_at(off, buf)
    }
    fn write_untorn(&self, off: u64, buf: &[u8]) -> Result<()> {
        (**self).write_untorn(off, buf)
    }
    fn prefetch(&self, off: u64, len: usize) {
        (**self).prefetch(off, len)
    }
    fn prefetch_single(&self, off: u64, len: usize) {
        (**self).prefetch_single(off, len)
    }
    fn prefetches(&self) -> bool {
        (**self).prefetches()
    }
    fn flush(&self) -> Result<()> {
        (**self).flush()
    }
    fn size(&self) -> u64 {
        (**self).size()
    }
    fn disk_stats(&self) -> Option<DiskStats> {
        (**self).disk_stats()
    }
    fn drop_caches(&self) {
        (**self).drop_caches()
    }
}

impl<D: BlockDevice + ?Sized> BlockDevice for std::sync::Arc<D> {
    fn read_at(&self, off: u64, buf: &mut [u8]) -> Result<()> {
        (**self).read_at(off, buf)
    }
    fn read_single(&self, off: u64, buf: &mut [u8]) -> Result<()> {
        (**self).read_single(off, buf)
    }
    fn write_at(&self, off: u64, buf: &[u8]) -> Result<()> {
        (**self).write_at(off, buf)
    }
    fn write_untorn(&self, off: u64, buf: &[u8]) -> Result<()> {
        (**self).write_untorn(off, buf)
    }
    fn prefetch(&self, off: u64, len: usize) {
        (**self).prefetch(off, len)
    }
    fn prefetch_single(&self, off: u64, len: usize) {
        (**self).prefetch_single(off, len)
    }
    fn prefetches(&self) -> bool {
        (**self).prefetches()
    }
    fn flush(&self) -> Result<()> {
        (**self).flush()
    }
    fn size(&self) -> u64 {
        (**self).size()
    }
    fn disk_stats(&self) -> Option<DiskStats> {
        (**self).disk_stats()
    }
    fn drop_caches(&self) {
        (**self).drop_caches()
    }
}

/// Read-ahead: a miss reads a whole aligned window (like a drive's track
/// buffer or the kernel's read-ahead) and later reads inside it are served
/// from memory. Writes update the window, so it never holds stale bytes.
pub struct ReadAheadDevice<D: BlockDevice> {
    inner: D,
    window: u64,
    buf: Mutex<Option<(u64, Vec<u8>)>>,
}

impl<D: BlockDevice> ReadAheadDevice<D> {
    /// Fills `out` from the window `w` if it holds all of `off..off+len`.
    fn from_window(w: &Option<(u64, Vec<u8>)>, off: u64, out: &mut [u8]) -> bool {
        let Some((start, data)) = w else {
            return false;
        };
        if off < *start || off + out.len() as u64 > start + data.len() as u64 {
            return false;
        }
        let o = to_index(off - start);
        out.copy_from_slice(&data[o..o + out.len()]);
        true
    }

    /// `window` bytes per read-ahead (a power of two).
    pub fn new(inner: D, window: u64) -> Self {
        ReadAheadDevice {
            inner,
            window: window.next_power_of_two(),
            buf: Mutex::new(None),
        }
    }
}

impl<D: BlockDevice> BlockDevice for ReadAheadDevice<D> {
    fn read_at(&self, off: u64, out: &mut [u8]) -> Result<()> {
        let len = out.len() as u64;
        if len >= self.window {
            return self.inner.read_at(off, out);
        }
        let mut g = self.buf.lock().unwrap_or_else(|p| p.into_inner());
        if Self::from_window(&g, off, out) {
            return Ok(());
        }
        let start = off & !(self.window - 1);
        let end = (start + self.window).min(self.inner.size()).max(off + len);
        let mut data = vec![0u8; to_index(end - start)];
        self.inner.read_at(start, &mut data)?;
        let o = to_index(off - start);
        out.copy_from_slice(&data[o..o + out.len()]);
        *g = Some((start, data));
        Ok(())
    }
    fn read_single(&self, off: u64, out: &mut [u8]) -> Result<()> {
        let g = self.buf.lock().unwrap_or_else(|p| p.into_inner());
        if Self::from_window(&g, off, out) {
            return Ok(());
        }
        drop(g);
        self.inner.read_at(off, out)
    }
    fn write_at(&self, off: u64, data: &[u8]) -> Result<()> {
        self.inner.write_at(off, data)?;
        self.written(off, data);
        Ok(())
    }
    fn write_untorn(&self, off: u64, data: &[u8]) -> Result<()> {
        self.inner.write_untorn(off, data)?;
        self.written(off, data);
        Ok(())
    }
    fn prefetch(&self, off: u64, len: usize) {
        // A read here reads the whole aligned window: ask for all of it.
        if (len as u64) < self.window {
            let start = off & !(self.window - 1);
            let end = (start + self.window)
                .min(self.inner.size())
                .max(off + len as u64);
            self.inner.prefetch(start, to_index(end - start))
        } else {
            self.inner.prefetch(off, len)
        }
    }
    fn prefetch_single(&self, off: u64, len: usize) {
        // read_single reads just the block (or serves it from the window).
        self.inner.prefetch_single(off, len)
    }
    fn prefetches(&self) -> bool {
        self.inner.prefetches()
    }
    fn flush(&self) -> Result<()> {
        self.inner.flush()
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn disk_stats(&self) -> Option<DiskStats> {
        self.inner.disk_stats()
    }
    fn drop_caches(&self) {
        *self.buf.lock().unwrap_or_else(|p| p.into_inner()) = None;
        self.inner.drop_caches()
    }
}

impl<D: BlockDevice> ReadAheadDevice<D> {
    /// Keeps the window in step with bytes just written.
    fn written(&self, off: u64, data: &[u8]) {
        let mut g = self.buf.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((start, buf)) = g.as_mut() {
            let (s, e) = (*start, *start + buf.len() as u64);
            let (ws, we) = (off, off + data.len() as u64);
            if ws < e && we > s {
                let a = ws.max(s);
                let b = we.min(e);
                buf[to_index(a - s)..to_index(b - s)]
                    .copy_from_slice(&data[to_index(a - ws)..to_index(b - ws)]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparse_device_reads_zeros_and_what_was_written_across_pages() {
        let d = SparseDevice::new(1 << 40);
        let mut b = vec![1u8; 10_000];
        d.read_at(12_345, &mut b).unwrap();
        assert!(b.iter().all(|&x| x == 0));
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        d.write_at((1 << 39) + 4000, &data).unwrap();
        d.read_at((1 << 39) + 4000, &mut b).unwrap();
        assert_eq!(b, data);
        assert_eq!(d.resident(), 4 * 4096);
        assert!(d.write_at((1 << 40) - 1, &[0, 0]).is_err());
        // Zeros written over a page give its memory back; zeros in part of
        // a page that keeps data do not lose the data.
        d.write_at(1 << 39, &vec![0u8; 8192]).unwrap();
        assert_eq!(d.resident(), 2 * 4096);
        d.write_at((1 << 39) + 8192, &[0u8; 100]).unwrap();
        d.read_at((1 << 39) + 8192, &mut b[..200]).unwrap();
        assert_eq!(&b[..100], &[0u8; 100]);
        assert_eq!(&b[100..200], &data[8192 - 4000 + 100..8192 - 4000 + 200]);
        d.write_at(1 << 30, &[0u8; 4096]).unwrap();
        assert_eq!(d.resident(), 2 * 4096);
    }
}

/// What a modeled disk under the file system measured (the simulated
/// devices of the `ufs-sim` crate report it; real devices have none).
#[derive(Debug, Default, Clone, Copy, serde::Serialize)]
pub struct DiskStats {
    pub requests: u64,
    pub reads: u64,
    pub writes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// Reads served (wholly) from the drive's read-ahead buffer.
    pub buffer_hits: u64,
    /// Requests that continued the previous one (no overhead or latency).
    pub merged: u64,
    /// Requests that moved the arm, and the cylinders travelled.
    pub seeks: u64,
    pub seek_cylinders: u64,
    pub seek_ms: f64,
    pub rotation_ms: f64,
    pub transfer_ms: f64,
    pub overhead_ms: f64,
    /// Total modeled service time.
    pub busy_ms: f64,
}

impl DiskStats {
    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &DiskStats) -> DiskStats {
        DiskStats {
            requests: self.requests - earlier.requests,
            reads: self.reads - earlier.reads,
            writes: self.writes - earlier.writes,
            read_bytes: self.read_bytes - earlier.read_bytes,
            write_bytes: self.write_bytes - earlier.write_bytes,
            buffer_hits: self.buffer_hits - earlier.buffer_hits,
            merged: self.merged - earlier.merged,
            seeks: self.seeks - earlier.seeks,
            seek_cylinders: self.seek_cylinders - earlier.seek_cylinders,
            seek_ms: self.seek_ms - earlier.seek_ms,
            rotation_ms: self.rotation_ms - earlier.rotation_ms,
            transfer_ms: self.transfer_ms - earlier.transfer_ms,
            overhead_ms: self.overhead_ms - earlier.overhead_ms,
            busy_ms: self.busy_ms - earlier.busy_ms,
        }
    }
}
