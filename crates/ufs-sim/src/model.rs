//! A modeled spinning disk: a device layer that charges every request the
//! time a real drive of the seeds' era would have taken, and counts it.
//!
//! The model follows Ruemmler and Wilkes, "An introduction to disk drive
//! modeling" (IEEE Computer 27(3), 1994): a request pays controller
//! overhead, a seek whose time grows with the square root of the cylinder
//! distance for short seeks and linearly for long ones, the rotational
//! latency until its first sector comes under the head (the platter's angle
//! follows the modeled clock), and the media transfer at the rate of its
//! zone, plus a head or cylinder switch at each track boundary. Reads leave
//! the drive reading ahead into its track buffer at media speed; a later
//! read inside that segment waits only for the sectors still to come and
//! pays the interface transfer. A request that starts where the previous one
//! of the same direction ended streams on without overhead or latency (the
//! drive merges adjacent requests). Writes go to the media (no write cache):
//! the seeds' "normal" and "sync" modes only mean something then.
//!
//! A write-back cache can be turned on ([`ModeledDisk::set_write_cache`],
//! the paper evaluation's `disk-write-cache` ablation; FreeBSD's ata(4)
//! switch `hw.ata.wc` left it off by default in 2001 and on in 2002): a
//! write is then
//! acknowledged once it is in the drive's buffer (command overhead and the
//! interface transfer), and the drive writes the buffered requests to the
//! media in arrival order while the host computes ([`ModeledDisk::idle`],
//! told by the caller how much host time passed), or, when a write finds
//! the buffer full, before taking it (that write waits). A request that
//! arrives while a background write is under way waits for it to end.
//! Reads go first. A flush does not empty the buffer: FreeBSD 4.5 never
//! sent a cache flush.
//!
//! Writes can also be issued without the host waiting
//! ([`ModeledDisk::set_async_writes`], as the paper's evaluation runs the
//! syncer's and buffer daemon's writes as FreeBSD's `bawrite` issues them,
//! the process going on while the drive works): they cost the host nothing
//! when issued and wait in the driver's queue, sorted as FreeBSD 4.5's
//! ata(4) sorts it (`adstrategy` calls `bioqdisksort`, `kern/subr_disk.c`:
//! a one-way scan in ascending block order from the request last started,
//! a request behind it waiting for the next scan, reads and writes alike).
//! The drive writes them while the host computes ([`ModeledDisk::idle`]),
//! and a request the host waits for takes its place in the scan: it waits
//! for the queued writes the scan reaches before it, not for the rest. A
//! flush the host waits for waits for the whole queue. The data reach the
//! device below when issued, as every write's do.
//!
//! Rotational positions: unskewed by default, every track's first sector
//! at the same angle, so a pair of blocks written one after the other
//! always waits the same part of a revolution between them; a drive's
//! track and cylinder skew can be turned on ([`ModeledDisk::set_skew`];
//! the paper's evaluation does, unless its `disk-unskewed` ablation asks
//! for the unskewed drive). A transfer that crosses a track boundary
//! pays only the switch time either way, as on a skewed drive.
//!
//! Invariants: the modeled clock only moves forward and only by service
//! time, so a sequence of requests gives the same figures on every run
//! (there is no host think time in the model); the data itself is always
//! read from and written to the device below, unchanged; a request beyond
//! the modeled capacity is refused when the layer is built, never during
//! service (the image must fit on the modeled drive).
use std::sync::Mutex;
use std::time::Duration;
use ufs::dev::BlockDevice;
use ufs::{Error, ErrorKind, Result};

const SECTOR: u64 = 512;

/// Seek time in milliseconds for a distance of `d` cylinders (d >= 1):
/// `short_a + short_b * sqrt(d)` up to `boundary`, `long_a + long_b * d`
/// beyond.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct SeekCurve {
    pub boundary: u32,
    pub short_a: f64,
    pub short_b: f64,
    pub long_a: f64,
    pub long_b: f64,
}

impl SeekCurve {
    pub fn ms(&self, d: u64) -> f64 {
        if d == 0 {
            0.0
        } else if d <= self.boundary as u64 {
            self.short_a + self.short_b * (d as f64).sqrt()
        } else {
            self.long_a + self.long_b * d as f64
        }
    }
}

/// A drive as published, plus the values derived from its figures.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DiskSpec {
    pub name: &'static str,
    pub description: &'static str,
    /// Where the figures come from.
    pub source: &'static str,
    pub capacity_sectors: u64,
    pub rpm: u32,
    pub heads: u32,
    /// Sectors per track in the outermost and innermost zone; `zones`
    /// zones of equal cylinder count step linearly between them.
    pub spt_outer: u32,
    pub spt_inner: u32,
    pub zones: u32,
    pub seek: SeekCurve,
    pub head_switch_ms: f64,
    pub cylinder_switch_ms: f64,
    /// Command overhead of a request that is not a continuation.
    pub overhead_ms: f64,
    /// Interface rate for data already in the drive's buffer.
    pub bus_mb_s: f64,
    /// Bytes the drive reads ahead after a read.
    pub readahead_bytes: u64,
}

/// The drives of the seeds, and a classic published model.
pub fn presets() -> Vec<DiskSpec> {
    vec![
        DiskSpec {
            name: "dtla-307045",
            description: "IBM Deskstar 75GXP DTLA-307045, 45 GB, 7200 rpm ATA-100 (seed 000's second system)",
            source: "IBM Deskstar 40GV & 75GXP specification: 90,069,840 sectors, 7200 rpm, full-stroke read 14.7 ms, \
                     average read seek 8.5 ms, track-to-track 1.2 ms, head switch 1.2 ms, 1.9 MB buffer, ATA-100; \
                     6 heads; zones 640..320 sectors/track derived from the 37 MB/s outer sustained rate; \
                     seek curve fitted to the three seek figures (docs/LAYOUT.md)",
            capacity_sectors: 90_069_840,
            rpm: 7200,
            heads: 6,
            spt_outer: 640,
            spt_inner: 320,
            zones: 16,
            seek: SeekCurve { boundary: 7737, short_a: 1.1165, short_b: 0.08352, long_a: 6.3835, long_b: 0.000_268_7 },
            head_switch_ms: 1.2,
            cylinder_switch_ms: 1.2,
            overhead_ms: 0.3,
            bus_mb_s: 100.0,
            readahead_bytes: 256 << 10,
        },
        DiskSpec {
            name: "ide-20g-2001",
            description: "2001 desktop IDE disk, 20 GB, 7200 rpm (IBM Deskstar 60GXP IC35L020AVER07), like the paper's",
            source: "IBM Deskstar 60GXP specification: 40,188,960 sectors, 7200 rpm, full-stroke read 14.7 ms, \
                     average read seek 8.5 ms, head switch 1.4 ms, cylinder switch 1.8 ms, 2 MB buffer, ATA-100; \
                     one platter, 2 heads; zones 720..360 sectors/track derived from its media rate; \
                     seek curve fitted to the seek figures (docs/LAYOUT.md)",
            capacity_sectors: 40_188_960,
            rpm: 7200,
            heads: 2,
            spt_outer: 720,
            spt_inner: 360,
            zones: 16,
            seek: SeekCurve { boundary: 9217, short_a: 1.1236, short_b: 0.07643, long_a: 6.3815, long_b: 0.000_225_6 },
            head_switch_ms: 1.4,
            cylinder_switch_ms: 1.8,
            overhead_ms: 0.3,
            bus_mb_s: 100.0,
            readahead_bytes: 256 << 10,
        },
        DiskSpec {
            name: "hp97560",
            description: "HP 97560, 1.3 GB, 4002 rpm SCSI-2 (the model of Ruemmler and Wilkes 1994)",
            source: "Ruemmler & Wilkes 1994; Kotz, Toh & Radhakrishnan, \"A detailed simulation model of the HP 97560 \
                     disk drive\" (Dartmouth PCS-TR94-220): 1962 cylinders, 19 heads, 72 sectors/track, 4002 rpm, \
                     seek 3.24 + 0.400 sqrt(d) ms below 383 cylinders, 8.00 + 0.008 d ms above, head switch 1.6 ms, \
                     controller overhead 2.2 ms, 128 KB cache, 10 MB/s SCSI-2 bus",
            capacity_sectors: 1962 * 19 * 72,
            rpm: 4002,
            heads: 19,
            spt_outer: 72,
            spt_inner: 72,
            zones: 1,
            seek: SeekCurve { boundary: 383, short_a: 3.24, short_b: 0.400, long_a: 8.00, long_b: 0.008 },
            head_switch_ms: 1.6,
            cylinder_switch_ms: 3.24 + 0.400,
            overhead_ms: 2.2,
            bus_mb_s: 10.0,
            readahead_bytes: 64 << 10,
        },
    ]
}

/// Looks a preset up by name.
pub fn preset(name: &str) -> Option<DiskSpec> {
    presets().into_iter().find(|s| s.name == name)
}

/// Where a sector lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Chs {
    cyl: u64,
    head: u64,
    sector: u64,
    spt: u64,
}

/// Zoned layout: cylinder-major, outer zone first.
#[derive(Debug, Clone)]
struct Geometry {
    heads: u64,
    /// Per zone: first sector, first cylinder, cylinders, sectors per track.
    zones: Vec<(u64, u64, u64, u64)>,
}

impl Geometry {
    fn new(s: &DiskSpec) -> Geometry {
        let nz = s.zones.max(1) as u64;
        let spts: Vec<u64> = (0..nz)
            .map(|z| {
                let (o, i) = (s.spt_outer as f64, s.spt_inner as f64);
                let f = if nz == 1 {
                    0.0
                } else {
                    z as f64 / (nz - 1) as f64
                };
                (o + (i - o) * f).round() as u64
            })
            .collect();
        let heads = s.heads.max(1) as u64;
        let per_cyl_sum: u64 = spts.iter().map(|&t| t * heads).sum();
        let cyls_per_zone = s.capacity_sectors.div_ceil(per_cyl_sum).max(1);
        let mut zones = Vec::new();
        let (mut lba, mut cyl) = (0, 0);
        for &spt in &spts {
            zones.push((lba, cyl, cyls_per_zone, spt));
            lba += cyls_per_zone * heads * spt;
            cyl += cyls_per_zone;
        }
        Geometry { heads, zones }
    }

    fn locate(&self, lba: u64) -> Chs {
        let z = self
            .zones
            .partition_point(|&(first, ..)| first <= lba)
            .saturating_sub(1);
        let (first, cyl0, _, spt) = self.zones[z];
        let rel = lba - first;
        let per_cyl = spt * self.heads;
        Chs {
            cyl: cyl0 + rel / per_cyl,
            head: (rel % per_cyl) / spt,
            sector: rel % spt,
            spt,
        }
    }
}

pub use ufs::dev::DiskStats;

#[derive(Debug, Clone)]
struct State {
    /// Modeled clock, ms since the layer was built.
    now: f64,
    cyl: u64,
    head: u64,
    /// End sector and direction (true: write) of the last request.
    last_end: Option<(u64, bool)>,
    ra: Option<ReadAhead>,
    stats: DiskStats,
    /// The write-back cache, when on.
    wc: Option<WriteCache>,
    /// Writes issued without waiting, when that is on.
    queue: HostQueue,
    /// The tracks are skewed ([`ModeledDisk::set_skew`]).
    skewed: bool,
}

/// Writes the host issued without waiting for them, and whether writes
/// are issued that way now: the driver's queue, which the drive takes in
/// disksort's one-way scan ([`ModeledDisk::next_in_scan`]).
#[derive(Debug, Clone, Default)]
struct HostQueue {
    on: bool,
    /// End sector of each queued write, by (start sector, arrival): the
    /// scan's order, equal starts in arrival order.
    queued: std::collections::BTreeMap<(u64, u64), u64>,
    arrivals: u64,
    /// Start sector of the request the drive took last (disksort's
    /// `last_offset`): where the scan stands.
    scan_at: u64,
    /// Time the next request waits for one under way.
    owed_ms: f64,
}

/// The drive's write-back buffer: requests (sector ranges) acknowledged
/// and not yet on the media, oldest first.
#[derive(Debug, Clone, Default)]
struct WriteCache {
    capacity: u64,
    queued: std::collections::VecDeque<(u64, u64)>,
    bytes: u64,
    /// Time the next request waits for a background write under way.
    owed_ms: f64,
}

/// The drive's read-ahead segment: sectors `[start, end)`; a sector
/// `s >= from` is in the buffer at time `at + (s - from) * per_sector`.
#[derive(Debug, Clone, Copy)]
struct ReadAhead {
    start: u64,
    end: u64,
    from: u64,
    at: f64,
    per_sector: f64,
}

/// Lets the drive work through background requests while the host
/// computes for `ms`: `step` writes one (returning its time, 0 when none is
/// left). Returns how far the last one ran past `ms`, which the host's
/// next request waits for.
fn work_while_host_computes(ms: f64, mut step: impl FnMut() -> f64) -> f64 {
    let mut left = ms;
    while left > 0.0 {
        let t = step();
        if t == 0.0 {
            break;
        }
        left -= t;
    }
    (-left).max(0.0)
}

/// The modeled drive over a device that holds the bytes.
pub struct ModeledDisk<D: BlockDevice> {
    inner: D,
    spec: DiskSpec,
    geom: Geometry,
    rev_ms: f64,
    /// Sleep the modeled time of each request (real tools feel the disk).
    sleep: bool,
    state: Mutex<State>,
}

impl<D: BlockDevice> ModeledDisk<D> {
    /// Fails when the device is larger than the modeled drive.
    pub fn new(inner: D, spec: DiskSpec, sleep: bool) -> Result<Self> {
        let cap = spec.capacity_sectors * SECTOR;
        if inner.size() > cap {
            return Err(Error::new(
                ErrorKind::Invalid,
                format!(
                    "the image ({} bytes) does not fit on the modeled disk {} ({} bytes)",
                    inner.size(),
                    spec.name,
                    cap
                ),
            ));
        }
        let geom = Geometry::new(&spec);
        let rev_ms = 60_000.0 / spec.rpm as f64;
        let state = State {
            now: 0.0,
            cyl: 0,
            head: 0,
            last_end: None,
            ra: None,
            stats: DiskStats::default(),
            wc: None,
            queue: HostQueue::default(),
            skewed: false,
        };
        Ok(ModeledDisk {
            inner,
            spec,
            geom,
            rev_ms,
            sleep,
            state: Mutex::new(state),
        })
    }

    pub fn spec(&self) -> &DiskSpec {
        &self.spec
    }

    pub fn inner(&self) -> &D {
        &self.inner
    }

    pub fn disk_stats(&self) -> DiskStats {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).stats
    }

    /// Service of one request; returns its modeled time in ms.
    fn service(&self, off: u64, len: usize, write: bool) -> f64 {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let start = off / SECTOR;
        let end = (off + len as u64).div_ceil(SECTOR).max(start + 1);
        st.stats.requests += 1;
        if write {
            st.stats.writes += 1;
            st.stats.write_bytes += len as u64;
            // A write overlapping the read-ahead segment invalidates it.
            if let Some(ra) = st.ra {
                if start < ra.end && end > ra.start {
                    st.ra = None;
                }
            }
            if st.queue.on {
                // Issued without waiting: written later.
                let q = &mut st.queue;
                q.arrivals += 1;
                q.queued.insert((start, q.arrivals), end);
                return 0.0;
            }
        } else {
            st.stats.reads += 1;
            st.stats.read_bytes += len as u64;
        }
        let t0 = st.now;
        // A background write under way ends first.
        if let Some(wc) = st.wc.as_mut() {
            let owed = std::mem::take(&mut wc.owed_ms);
            st.now += owed;
        }
        // So does a write issued without waiting, and then those the
        // scan reaches before this request.
        let owed = std::mem::take(&mut st.queue.owed_ms);
        st.now += owed;
        while self.write_queued(&mut st, Some(start)) > 0.0 {}
        st.queue.scan_at = start;
        let bus = len as f64 / (self.spec.bus_mb_s * 1000.0);
        if write && st.wc.is_some() {
            let bytes = (end - start) * SECTOR;
            // Room first: the oldest buffered writes go to the media
            // while this one waits.
            loop {
                let wc = st.wc.as_ref().expect("write cache");
                if wc.queued.is_empty() || wc.bytes + bytes <= wc.capacity {
                    break;
                }
                self.destage_one(&mut st);
            }
            st.stats.overhead_ms += self.spec.overhead_ms;
            st.stats.transfer_ms += bus;
            st.now += self.spec.overhead_ms + bus;
            let wc = st.wc.as_mut().expect("write cache");
            wc.queued.push_back((start, end));
            wc.bytes += bytes;
            return self.finish(st, t0);
        }
        if !write {
            // Data still in the write buffer comes from it.
            let cached = st
                .wc
                .as_ref()
                .is_some_and(|wc| wc.queued.iter().any(|&(s, e)| s <= start && end <= e));
            if cached {
                st.stats.buffer_hits += 1;
                st.stats.transfer_ms += bus;
                st.now += bus;
                return self.finish(st, t0);
            }
            if let Some(ra) = st.ra {
                if start >= ra.start && end <= ra.end {
                    // In the buffer once the drive has read its last sector.
                    let ready = if end > ra.from {
                        ra.at + (end - ra.from) as f64 * ra.per_sector
                    } else {
                        st.now
                    };
                    let wait = (ready - st.now).max(0.0);
                    st.stats.buffer_hits += 1;
                    st.stats.transfer_ms += wait + bus;
                    st.now += wait + bus;
                    st.last_end = Some((end, false));
                    return self.finish(st, t0);
                }
            }
        }
        // The drive stopped reading ahead when this request arrived.
        let now = st.now;
        if let Some(ra) = st.ra.as_mut() {
            let done = ra.from + ((now - ra.at) / ra.per_sector).max(0.0) as u64;
            ra.end = ra.end.min(done.max(ra.from));
        }
        self.media(&mut st, start, end, write);
        if !write {
            let last = self.geom.locate(end - 1);
            let ra_end = (end + self.spec.readahead_bytes / SECTOR).min(self.spec.capacity_sectors);
            let per = self.rev_ms / last.spt as f64;
            st.ra = Some(ReadAhead {
                start,
                end: ra_end,
                from: end,
                at: st.now,
                per_sector: per,
            });
        }
        self.finish(st, t0)
    }

    /// Positions the head and moves sectors `[start, end)` to or from the
    /// media, advancing the modeled clock and the counters.
    fn media(&self, st: &mut State, start: u64, end: u64, write: bool) {
        let first = self.geom.locate(start);
        if st.last_end == Some((start, write)) {
            st.stats.merged += 1;
        } else {
            st.stats.overhead_ms += self.spec.overhead_ms;
            st.now += self.spec.overhead_ms;
            let d = st.cyl.abs_diff(first.cyl);
            let move_ms = if d > 0 {
                st.stats.seeks += 1;
                st.stats.seek_cylinders += d;
                self.spec.seek.ms(d)
            } else if st.head != first.head {
                self.spec.head_switch_ms
            } else {
                0.0
            };
            st.stats.seek_ms += move_ms;
            st.now += move_ms;
            // Wait for the first sector to come round.
            let angle = (st.now / self.rev_ms).fract();
            let target = self.angle_of(first, st.skewed);
            let wait = (target - angle).rem_euclid(1.0) * self.rev_ms;
            st.stats.rotation_ms += wait;
            st.now += wait;
        }
        // Media transfer, track by track.
        let mut pos = first;
        let mut lba = start;
        let mut xfer = 0.0;
        loop {
            let on_track = (pos.spt - pos.sector).min(end - lba);
            xfer += on_track as f64 / pos.spt as f64 * self.rev_ms;
            lba += on_track;
            if lba >= end {
                break;
            }
            let next = self.geom.locate(lba);
            xfer += if next.cyl != pos.cyl {
                self.spec.cylinder_switch_ms
            } else {
                self.spec.head_switch_ms
            };
            pos = next;
        }
        st.stats.transfer_ms += xfer;
        st.now += xfer;
        let last = self.geom.locate(end - 1);
        st.cyl = last.cyl;
        st.head = last.head;
        st.last_end = Some((end, write));
    }

    /// Writes the oldest buffered request to the media; returns its time.
    fn destage_one(&self, st: &mut State) -> f64 {
        let Some((start, end)) = st.wc.as_mut().and_then(|wc| wc.queued.pop_front()) else {
            return 0.0;
        };
        if let Some(wc) = st.wc.as_mut() {
            wc.bytes -= (end - start) * SECTOR;
        }
        let t0 = st.now;
        // The drive stops reading ahead to write.
        st.ra = None;
        self.media(st, start, end, true);
        st.now - t0
    }

    /// Where on the platter (a fraction of a revolution) sector `c` passes
    /// under the head. Unskewed, every track's sector 0 is at angle 0.
    /// Skewed, as drives are formatted so that a transfer crossing a track
    /// or cylinder boundary does not lose a revolution, each track starts
    /// the head-switch time later than the one before it, and each
    /// cylinder the cylinder-switch time later again (Ruemmler and Wilkes,
    /// "track skew", "cylinder skew").
    fn angle_of(&self, c: Chs, skewed: bool) -> f64 {
        let spt = c.spt as f64;
        if !skewed {
            return c.sector as f64 / spt;
        }
        let sectors = |ms: f64| (ms / self.rev_ms * spt).ceil() as u64;
        let (head_skew, cyl_skew) = (
            sectors(self.spec.head_switch_ms),
            sectors(self.spec.cylinder_switch_ms),
        );
        let head_switches = c.cyl * (self.geom.heads - 1) + c.head;
        let off = (head_switches * head_skew + c.cyl * cyl_skew) % c.spt;
        ((c.sector + off) % c.spt) as f64 / spt
    }

    /// Formats the tracks skewed (`on`: see [`Self::angle_of`]) or with
    /// every track's first sector at the same angle (the default here; the
    /// paper's evaluation skews its drive unless its `disk-unskewed`
    /// ablation says otherwise).
    pub fn set_skew(&self, on: bool) {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).skewed = on;
    }

    /// The queued write the drive takes next: the first at or after where
    /// the scan stands, else (the scan starts again) the lowest; with
    /// `before`, only one the scan reaches before sector `before`.
    fn next_in_scan(q: &HostQueue, before: Option<u64>) -> Option<(u64, u64)> {
        let ahead = q.queued.range((q.scan_at, 0)..).next();
        let (&key, _) = ahead.or_else(|| q.queued.iter().next())?;
        let Some(b) = before else {
            return Some(key);
        };
        // Distance along the scan from where it stands: a sector behind
        // it comes after every sector ahead.
        let along = |s: u64| (s < q.scan_at, s);
        (along(key.0) < along(b)).then_some(key)
    }

    /// Writes the queued request the scan takes next (with `before`, only
    /// one it reaches before sector `before`); returns its time (0 when
    /// there is none).
    fn write_queued(&self, st: &mut State, before: Option<u64>) -> f64 {
        let Some(key) = Self::next_in_scan(&st.queue, before) else {
            return 0.0;
        };
        let end = st.queue.queued.remove(&key).expect("queued write");
        let start = key.0;
        st.queue.scan_at = start;
        let t0 = st.now;
        st.ra = None;
        self.media(st, start, end, true);
        (st.now - t0).max(f64::MIN_POSITIVE)
    }

    /// Issues writes without waiting for them (`on`), or as requests the
    /// host waits for (what is queued stays queued).
    pub fn set_async_writes(&self, on: bool) {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .queue
            .on = on;
    }

    /// Writes issued without waiting and not yet on the media.
    pub fn queued_writes(&self) -> usize {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .queue
            .queued
            .len()
    }

    /// Turns the write-back cache on with `bytes` of buffer, or off
    /// (`None`: what is buffered is written first).
    pub fn set_write_cache(&self, bytes: Option<u64>) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if bytes.is_none() {
            while st.wc.as_ref().is_some_and(|wc| !wc.queued.is_empty()) {
                self.destage_one(&mut st);
            }
        }
        st.wc = bytes.map(|capacity| WriteCache {
            capacity,
            ..WriteCache::default()
        });
    }

    /// The host computed for `ms` without waiting for the drive: the drive
    /// writes meanwhile the writes issued without waiting, in the scan's
    /// order, and with the write-back cache on its buffered requests,
    /// oldest first. One it starts and cannot finish in that time is
    /// finished before the next request (which waits for the rest). The
    /// time is not the drive's busy time as the host sees it.
    pub fn idle(&self, ms: f64) {
        let mut guard = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let st = &mut *guard;
        // Writes issued without waiting go on meanwhile, in the scan's
        // order, then the write-back cache's.
        let over = work_while_host_computes(ms, || self.write_queued(st, None));
        st.queue.owed_ms += over;
        if st.wc.is_some() {
            let over = work_while_host_computes(ms, || self.destage_one(st));
            if let Some(wc) = st.wc.as_mut() {
                wc.owed_ms += over;
            }
        }
    }

    /// Bytes acknowledged and not yet on the media.
    pub fn write_cache_bytes(&self) -> u64 {
        let st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.wc.as_ref().map_or(0, |wc| wc.bytes)
    }

    fn finish(&self, mut st: std::sync::MutexGuard<'_, State>, t0: f64) -> f64 {
        let ms = st.now - t0;
        st.stats.busy_ms += ms;
        if self.sleep && ms > 0.0 {
            // Held under the lock: one request at a time, like the drive.
            std::thread::sleep(Duration::from_secs_f64(ms / 1000.0));
        }
        ms
    }
}

impl<D: BlockDevice> BlockDevice for ModeledDisk<D> {
    fn read_at(&self, off: u64, buf: &mut [u8]) -> Result<()> {
        self.inner.read_at(off, buf)?;
        self.service(off, buf.len(), false);
        Ok(())
    }
    fn write_at(&self, off: u64, buf: &[u8]) -> Result<()> {
        self.inner.write_at(off, buf)?;
        self.service(off, buf.len(), true);
        Ok(())
    }
    fn write_untorn(&self, off: u64, buf: &[u8]) -> Result<()> {
        self.inner.write_untorn(off, buf)?;
        self.service(off, buf.len(), true);
        Ok(())
    }
    fn flush(&self) -> Result<()> {
        // A flush the host waits for waits for the writes issued without
        // waiting; one issued without waiting (the syncer's pass ends
        // with one) does not.
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if !st.queue.on && (!st.queue.queued.is_empty() || st.queue.owed_ms > 0.0) {
            let t0 = st.now;
            let owed = std::mem::take(&mut st.queue.owed_ms);
            st.now += owed;
            while self.write_queued(&mut st, None) > 0.0 {}
            self.finish(st, t0);
        } else {
            drop(st);
        }
        self.inner.flush()
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn disk_stats(&self) -> Option<DiskStats> {
        Some(ModeledDisk::disk_stats(self))
    }
    fn drop_caches(&self) {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).ra = None;
        self.inner.drop_caches();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ufs::dev::MemDevice;

    fn disk(name: &str, size: u64) -> ModeledDisk<MemDevice> {
        ModeledDisk::new(MemDevice::new(size), preset(name).unwrap(), false).unwrap()
    }

    #[test]
    fn presets_fit_their_published_figures() {
        for s in presets() {
            let g = Geometry::new(&s);
            let (first, cyl0, n, spt) = *g.zones.last().unwrap();
            assert!(
                first + n * g.heads * spt >= s.capacity_sectors,
                "{} too small",
                s.name
            );
            assert!(cyl0 + n > 0);
            // Continuity of the seek curve at its boundary (within 3%).
            let b = s.seek.boundary as u64;
            let (x, y) = (s.seek.ms(b), s.seek.ms(b + 1));
            assert!((x - y).abs() / x < 0.03, "{}: {x} vs {y}", s.name);
        }
        let hp = preset("hp97560").unwrap();
        assert_eq!(Geometry::new(&hp).zones[0].2, 1962);
        assert!((hp.seek.ms(1) - 3.64).abs() < 1e-9);
        assert!((hp.seek.ms(1000) - 16.0).abs() < 1e-9);
    }

    #[test]
    fn the_same_requests_take_the_same_time() {
        let run = || {
            let d = disk("dtla-307045", 64 << 20);
            let mut buf = vec![0u8; 8192];
            for i in 0..200u64 {
                let off = (i * 7919 % 8000) * 8192;
                if i % 3 == 0 {
                    d.write_at(off, &buf).unwrap();
                } else {
                    d.read_at(off, &mut buf).unwrap();
                }
            }
            d.disk_stats()
        };
        let (a, b) = (run(), run());
        assert_eq!(a.busy_ms.to_bits(), b.busy_ms.to_bits());
        assert_eq!(a.seeks, b.seeks);
    }

    #[test]
    fn sequential_is_far_cheaper_than_random_and_far_seeks_cost_more() {
        let d = disk("ide-20g-2001", 1 << 30);
        let mut buf = vec![0u8; 8192];
        for i in 0..256 {
            d.write_at(i * 8192, &buf).unwrap();
        }
        let seq = d.disk_stats().busy_ms;
        assert_eq!(d.disk_stats().merged, 255);
        let d2 = disk("ide-20g-2001", 1 << 30);
        for i in 0..256u64 {
            d2.write_at((i * 104_729 % 131_072) * 8192, &buf).unwrap();
        }
        let rnd = d2.disk_stats().busy_ms;
        assert!(rnd > 20.0 * seq, "random {rnd} ms vs sequential {seq} ms");
        // Near versus far seeks of the same count.
        let near = disk("hp97560", 1 << 30);
        let far = disk("hp97560", 1 << 30);
        for i in 0..100u64 {
            near.read_at((i % 2) * (4 << 20), &mut buf).unwrap();
            far.read_at((i % 2) * (1000 << 20), &mut buf).unwrap();
        }
        let (n, f) = (near.disk_stats(), far.disk_stats());
        assert!(
            f.seek_ms > 2.0 * n.seek_ms,
            "far {} near {}",
            f.seek_ms,
            n.seek_ms
        );
        assert_eq!(n.seeks, 99);
    }

    #[test]
    fn read_ahead_serves_the_next_blocks_and_writes_invalidate_it() {
        let d = disk("dtla-307045", 64 << 20);
        let mut buf = vec![0u8; 8192];
        d.read_at(1 << 20, &mut buf).unwrap();
        d.read_at((1 << 20) + 16384, &mut buf).unwrap();
        assert_eq!(d.disk_stats().buffer_hits, 1);
        d.write_at((1 << 20) + 32768, &buf).unwrap();
        d.read_at((1 << 20) + 65536, &mut buf).unwrap();
        assert_eq!(d.disk_stats().buffer_hits, 1);
        d.drop_caches();
        d.read_at((1 << 20) + 65536 + 8192, &mut buf).unwrap();
        assert_eq!(
            d.disk_stats().buffer_hits,
            1,
            "a dropped buffer serves nothing"
        );
    }

    #[test]
    fn data_passes_through_and_too_large_images_are_refused() {
        let d = disk("hp97560", 1 << 20);
        d.write_at(4096, b"hello").unwrap();
        let mut b = [0u8; 5];
        d.read_at(4096, &mut b).unwrap();
        assert_eq!(&b, b"hello");
        let e = ModeledDisk::new(MemDevice::new(2 << 30), preset("hp97560").unwrap(), false)
            .err()
            .unwrap();
        assert!(e.to_string().contains("does not fit"), "{e}");
    }

    #[test]
    fn a_skewed_drive_starts_each_track_a_switch_time_later() {
        let d = disk("ide-20g-2001", 1 << 30);
        let spt = d.geom.locate(0).spt;
        let heads = d.geom.heads;
        // Sector 0 of track 0, of the next track (a head switch) and of
        // the next cylinder (a head and a cylinder switch).
        let t0 = d.geom.locate(0);
        let t1 = d.geom.locate(spt);
        let c1 = d.geom.locate(spt * heads);
        assert_eq!((t1.head, c1.cyl), (1, 1));
        for c in [t0, t1, c1] {
            assert_eq!(d.angle_of(c, false), 0.0);
        }
        // Skewed, the next track's first sector comes the head-switch time
        // after the last one's, and the next cylinder's the cylinder-switch
        // time after its last track's (rounded up to whole sectors).
        let rev = d.rev_ms;
        let per_sector = rev / spt as f64;
        let later =
            |a: Chs, b: Chs| (d.angle_of(b, true) - d.angle_of(a, true)).rem_euclid(1.0) * rev;
        let last = d.geom.locate(spt * (heads - 1));
        let (hs, cs) = (d.spec.head_switch_ms, d.spec.cylinder_switch_ms);
        let head_skew = later(t0, t1);
        let cyl_skew = later(last, c1);
        assert!(
            head_skew >= hs && head_skew < hs + per_sector,
            "{head_skew} ms"
        );
        assert!(
            cyl_skew >= cs && cyl_skew < cs + per_sector,
            "{cyl_skew} ms"
        );
        // The same pair of writes, repeated: the wait between them is set
        // by where the two blocks sit, so skew changes it.
        let pair = |skewed: bool| {
            let d = disk("ide-20g-2001", 1 << 30);
            d.set_skew(skewed);
            for _ in 0..50 {
                d.write_at(200 * 2048, &[0u8; 2048]).unwrap();
                d.write_at(601 * 2048, &[0u8; 2048]).unwrap();
            }
            d.disk_stats().rotation_ms
        };
        assert_ne!(pair(false), pair(true));
    }

    #[test]
    fn writes_issued_without_waiting_go_on_while_the_host_computes() {
        let size = 1u64 << 30;
        let step = (size / 1000) & !4095;
        let slot = |i: u64| i * 7919 % 1000;
        let burst = |d: &ModeledDisk<MemDevice>, n: u64| {
            for i in 0..n {
                d.write_at(slot(i) * step, &[i as u8; 8192]).unwrap();
            }
        };
        // The same 100 scattered writes, waited for and issued without
        // waiting: the second costs the host nothing when issued, and the
        // counts are the same.
        let plain = disk("ide-20g-2001", size);
        burst(&plain, 100);
        let waited = plain.disk_stats().busy_ms;
        let queued = disk("ide-20g-2001", size);
        queued.set_async_writes(true);
        burst(&queued, 100);
        queued.set_async_writes(false);
        assert!(waited > 500.0, "{waited} ms");
        assert_eq!(queued.disk_stats().busy_ms, 0.0);
        assert_eq!(queued.queued_writes(), 100);
        assert_eq!(queued.disk_stats().writes, plain.disk_stats().writes);
        // The bytes are the device's at once.
        let mut b = [0u8; 8192];
        queued.inner().read_at(slot(1) * step, &mut b).unwrap();
        assert_eq!(b, [1u8; 8192]);
        // A request the host waits for takes its place in the scan, which
        // stands at sector 0: a read there waits for none of them, one in
        // the middle for those below it, and one at 0 again (now behind
        // the scan) for all the rest.
        queued.read_at(0, &mut b).unwrap();
        assert_eq!(queued.queued_writes(), 100);
        queued.read_at(500 * step, &mut b).unwrap();
        let above = (0..100).filter(|&i| slot(i) >= 500).count();
        assert_eq!(queued.queued_writes(), above);
        queued.read_at(0, &mut b).unwrap();
        assert_eq!(queued.queued_writes(), 0);
        // Taken in the scan's order, the drive writes them in much less
        // time than in arrival order: a flush the host waits for pays for
        // them all.
        let flushed = disk("ide-20g-2001", size);
        flushed.set_async_writes(true);
        burst(&flushed, 100);
        flushed.set_async_writes(false);
        flushed.flush().unwrap();
        assert_eq!(flushed.queued_writes(), 0);
        let sorted = flushed.disk_stats().busy_ms;
        assert!(
            sorted < waited * 0.8,
            "{sorted} ms sorted, {waited} ms in arrival order"
        );
        // Host time covering half of their drive time leaves about half
        // of them queued.
        let half = disk("ide-20g-2001", size);
        half.set_async_writes(true);
        burst(&half, 100);
        half.set_async_writes(false);
        half.idle(sorted / 2.0);
        let left = half.queued_writes();
        assert!((35..=65).contains(&left), "{left} left");
        // Enough host time hides them all; a flush issued without waiting
        // (the syncer's pass ends with one) does not wait for them.
        let hidden = disk("ide-20g-2001", size);
        hidden.set_async_writes(true);
        burst(&hidden, 100);
        hidden.flush().unwrap();
        assert_eq!(hidden.queued_writes(), 100);
        hidden.set_async_writes(false);
        hidden.idle(sorted * 2.0);
        assert_eq!(hidden.queued_writes(), 0);
        assert_eq!(hidden.disk_stats().busy_ms, 0.0);
    }

    #[test]
    fn a_write_cache_acknowledges_writes_and_writes_them_while_the_host_computes() {
        let size = 1u64 << 30;
        let step = (size / 1000) & !4095;
        let scattered = |d: &ModeledDisk<MemDevice>, n: u64| -> f64 {
            (0..n)
                .map(|i| {
                    let off = (i * 7919 % 1000) * step;
                    d.write_at(off, &[i as u8; 8192]).unwrap();
                    0.0
                })
                .sum::<f64>()
                + d.disk_stats().busy_ms
        };
        // Without the cache 100 scattered 8 KiB writes each seek and wait
        // for the platter; with it they cost command and bus time.
        let plain = disk("ide-20g-2001", size);
        let slow = scattered(&plain, 100);
        let cached = disk("ide-20g-2001", size);
        cached.set_write_cache(Some(2 << 20));
        let fast = scattered(&cached, 100);
        assert!(slow > 500.0, "{slow} ms");
        assert!(fast < slow / 20.0, "{fast} ms against {slow} ms");
        assert_eq!(cached.write_cache_bytes(), 100 * 8192);
        // Buffered data reads back from the buffer, and the bytes are the
        // device's.
        let before = cached.disk_stats().buffer_hits;
        let mut b = [0u8; 8192];
        cached.read_at(7919 % 1000 * step, &mut b).unwrap();
        assert_eq!(b, [1u8; 8192]);
        assert_eq!(cached.disk_stats().buffer_hits, before + 1);
        // Host time lets the drive write them; then the buffer is empty
        // and nothing it did counts as the host's wait.
        let busy = cached.disk_stats().busy_ms;
        cached.idle(10_000.0);
        assert_eq!(cached.write_cache_bytes(), 0);
        assert_eq!(cached.disk_stats().busy_ms, busy);
        // A buffer too small for the burst makes writes wait for the media.
        let small = disk("ide-20g-2001", size);
        small.set_write_cache(Some(64 << 10));
        let waited = scattered(&small, 100);
        assert!(waited > slow * 0.8, "{waited} ms against {slow} ms");
        // A short idle time starts one write (a seek and a rotation are
        // longer than it), which the next request waits to end.
        let part = disk("ide-20g-2001", size);
        part.set_write_cache(Some(2 << 20));
        scattered(&part, 10);
        part.idle(0.5);
        assert_eq!(part.write_cache_bytes(), 9 * 8192);
        let b0 = part.disk_stats().busy_ms;
        part.write_at(0, &[0u8; 512]).unwrap();
        let acked = part.disk_stats().busy_ms - b0;
        let fresh = disk("ide-20g-2001", size);
        fresh.set_write_cache(Some(2 << 20));
        fresh.write_at(0, &[0u8; 512]).unwrap();
        assert!(acked > fresh.disk_stats().busy_ms + 0.5, "{acked} ms");
    }
}
