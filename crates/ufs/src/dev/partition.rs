//! Whole disks: finding the file systems on a partitioned disk or disk
//! image, and a device window over one of them.
//!
//! What FreeBSD's installer and release images hold, and how each is named
//! (the names FreeBSD gives the device nodes, without the disk's own name):
//! - GPT: partitions `p1`, `p2`... (freebsd-boot, efi, freebsd-swap,
//!   freebsd-ufs, freebsd-zfs); read with the `gpt` crate;
//! - MBR: slices `s1`..`s4` (read with the `mbrman` crate); a FreeBSD slice
//!   (type 0xA5) holds a BSD disklabel with partitions `s1a`..`s1h`;
//! - a BSD disklabel on the whole disk ("dangerously dedicated"): `a`..`h`.
//!
//! Invariants: every partition reported lies inside the device (entries
//! that do not are dropped with a note); nothing here writes; a hostile
//! table gives an error or fewer partitions, never a panic (the crates'
//! parsers run under `catch_unwind` as a second line of defence).
use super::BlockDevice;
use crate::error::{Error, ErrorKind, Result};
use std::io::{Read, Seek, SeekFrom, Write};
use ufs_format::bytes::to_index;
use ufs_format::Endian;

/// One partition of a disk.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Partition {
    /// `p2`, `s1a`, `a`: what `IMAGE:NAME` chooses.
    pub name: String,
    /// Byte offset and length on the disk.
    pub start: u64,
    pub size: u64,
    /// `freebsd-ufs`, `efi`, `freebsd-swap`, ... or the type code.
    pub kind: String,
    /// A UFS1 or UFS2 superblock (either byte order) was found in it.
    pub ufs: bool,
    /// Which: "UFS2, little-endian", "UFS1, big-endian", ...
    pub format: Option<String>,
}

/// The bytes `[start, start + size)` of a device, as a device.
pub struct Window<D: BlockDevice> {
    inner: D,
    start: u64,
    size: u64,
}

impl<D: BlockDevice> Window<D> {
    pub fn new(inner: D, start: u64, size: u64) -> Result<Self> {
        if start.checked_add(size).is_none_or(|e| e > inner.size()) {
            return Err(Error::new(
                ErrorKind::Invalid,
                format!(
                    "partition of {size} bytes at byte {start} runs past the end of the disk ({} bytes)",
                    inner.size()
                ),
            ));
        }
        Ok(Window { inner, start, size })
    }
}

impl<D: BlockDevice> BlockDevice for Window<D> {
    fn read_at(&self, off: u64, buf: &mut [u8]) -> Result<()> {
        super::check_range(off, buf.len(), self.size)?;
        self.inner.read_at(self.start + off, buf)
    }
    fn write_at(&self, off: u64, buf: &[u8]) -> Result<()> {
        super::check_range(off, buf.len(), self.size)?;
        self.inner.write_at(self.start + off, buf)
    }
    fn write_untorn(&self, off: u64, buf: &[u8]) -> Result<()> {
        super::check_range(off, buf.len(), self.size)?;
        self.inner.write_untorn(self.start + off, buf)
    }
    fn prefetch(&self, off: u64, len: usize) {
        if super::check_range(off, len, self.size).is_ok() {
            self.inner.prefetch(self.start + off, len)
        }
    }
    fn prefetch_single(&self, off: u64, len: usize) {
        if super::check_range(off, len, self.size).is_ok() {
            self.inner.prefetch_single(self.start + off, len)
        }
    }
    fn prefetches(&self) -> bool {
        self.inner.prefetches()
    }
    fn flush(&self) -> Result<()> {
        self.inner.flush()
    }
    fn size(&self) -> u64 {
        self.size
    }
    fn disk_stats(&self) -> Option<super::DiskStats> {
        self.inner.disk_stats()
    }
    fn drop_caches(&self) {
        self.inner.drop_caches()
    }
}

/// Read-only `Read + Seek` over a device, for the table parsers (the GPT
/// parser also wants `Write`, which it never uses when not writable).
#[derive(Debug)]
struct Reader<'a> {
    dev: DevRef<'a>,
    pos: u64,
}

struct DevRef<'a>(&'a dyn BlockDevice);

impl std::fmt::Debug for DevRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "device of {} bytes", self.0.size())
    }
}

impl Read for Reader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let size = self.dev.0.size();
        if self.pos >= size {
            return Ok(0);
        }
        let n = to_index((buf.len() as u64).min(size - self.pos));
        self.dev
            .0
            .read_at(self.pos, &mut buf[..n])
            .map_err(|e| std::io::Error::other(e.msg))?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl Seek for Reader<'_> {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        let size = self.dev.0.size() as i128;
        let p = match to {
            SeekFrom::Start(n) => n as i128,
            SeekFrom::End(d) => size + d as i128,
            SeekFrom::Current(d) => self.pos as i128 + d as i128,
        };
        if p < 0 {
            return Err(std::io::Error::other("seek before the start of the disk"));
        }
        self.pos = u64::try_from(p).unwrap_or(u64::MAX);
        Ok(self.pos)
    }
}

impl Write for Reader<'_> {
    fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
        Err(std::io::Error::other("partition tables are only read"))
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

const SECTOR_BYTES: usize = 512;
const SECTOR: u64 = SECTOR_BYTES as u64;
const SECTOR_U32: u32 = 512;
const _: () = assert!(SECTOR_U32 as usize == SECTOR_BYTES);

/// The partitions of `dev` (empty when it has no table ufskit reads),
/// each checked for a UFS1 or UFS2 superblock.
pub fn probe(dev: &dyn BlockDevice) -> Result<Vec<Partition>> {
    let mut parts = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| tables(dev)))
        .map_err(|_| {
            Error::damaged(
                crate::error::Damage::PartitionTable,
                "partition table: its parser failed on it",
            )
        })??;
    parts.retain(|p| p.size > 0 && p.start.checked_add(p.size).is_some_and(|e| e <= dev.size()));
    for p in &mut parts {
        if let Ok(w) = Window::new(DevRef(dev), p.start, p.size) {
            let found = crate::fs::read_superblock(&w).ok();
            p.ufs = found.is_some();
            p.format = found.map(|(_, g, _)| g.v.describe());
        }
    }
    Ok(parts)
}

impl BlockDevice for DevRef<'_> {
    fn read_at(&self, off: u64, buf: &mut [u8]) -> Result<()> {
        self.0.read_at(off, buf)
    }
    fn write_at(&self, _: u64, _: &[u8]) -> Result<()> {
        Err(Error::new(ErrorKind::ReadOnly, "probing never writes"))
    }
    fn flush(&self) -> Result<()> {
        Ok(())
    }
    fn size(&self) -> u64 {
        self.0.size()
    }
}

fn tables(dev: &dyn BlockDevice) -> Result<Vec<Partition>> {
    if dev.size() < 2 * SECTOR {
        return Ok(Vec::new());
    }
    let mut first = vec![0u8; 2 * SECTOR_BYTES];
    dev.read_at(0, &mut first)?;
    let mbr_sig = first[510] == 0x55 && first[511] == 0xAA;
    let protective = mbr_sig && (0..4).any(|i| first[446 + 16 * i + 4] == 0xEE);
    if protective || &first[512..520] == b"EFI PART" {
        return gpt(dev);
    }
    if mbr_sig {
        let parts = mbr(dev)?;
        if !parts.is_empty() {
            return Ok(parts);
        }
    }
    // A disklabel on the whole disk (FreeBSD's "dangerously dedicated").
    Ok(disklabel(dev, 0, dev.size(), "")?.unwrap_or_default())
}

fn gpt(dev: &dyn BlockDevice) -> Result<Vec<Partition>> {
    let reader = Reader {
        dev: DevRef(dev),
        pos: 0,
    };
    let disk = gpt::GptConfig::new()
        .writable(false)
        .logical_block_size(gpt::disk::LogicalBlockSize::Lb512)
        .open_from_device(reader)
        .map_err(|e| {
            Error::damaged(
                crate::error::Damage::PartitionTable,
                format!("GPT partition table: {e}"),
            )
        })?;
    let mut out = Vec::new();
    for (&n, p) in disk.partitions() {
        if p.part_type_guid == gpt::partition_types::UNUSED {
            continue;
        }
        let known = [
            (gpt::partition_types::FREEBSD_UFS, "freebsd-ufs"),
            (gpt::partition_types::FREEBSD_BOOT, "freebsd-boot"),
            (gpt::partition_types::FREEBSD_SWAP, "freebsd-swap"),
            (gpt::partition_types::FREEBSD_ZFS, "freebsd-zfs"),
            (gpt::partition_types::EFI, "efi"),
        ];
        let kind = known
            .iter()
            .find(|(t, _)| *t == p.part_type_guid)
            .map(|(_, n)| n.to_string())
            .unwrap_or_else(|| p.part_type_guid.guid.to_string().to_lowercase());
        let (Some(start), Some(end)) = (
            p.first_lba.checked_mul(SECTOR),
            p.last_lba
                .checked_add(1)
                .and_then(|l| l.checked_mul(SECTOR)),
        ) else {
            continue;
        };
        if end <= start {
            continue;
        }
        out.push(Partition {
            name: format!("p{n}"),
            start,
            size: end - start,
            kind,
            ufs: false,
            format: None,
        });
    }
    Ok(out)
}

fn mbr(dev: &dyn BlockDevice) -> Result<Vec<Partition>> {
    let mut reader = Reader {
        dev: DevRef(dev),
        pos: 0,
    };
    let table = mbrman::MBR::read_from(&mut reader, SECTOR_U32).map_err(|e| {
        Error::damaged(
            crate::error::Damage::PartitionTable,
            format!("MBR partition table: {e}"),
        )
    })?;
    let mut out = Vec::new();
    for (i, p) in table.iter() {
        if p.is_unused() {
            continue;
        }
        let start = p.starting_lba as u64 * SECTOR;
        let size = p.sectors as u64 * SECTOR;
        let name = format!("s{i}");
        let kind = match p.sys {
            0xA5 => "freebsd".to_string(),
            0xEF => "efi".to_string(),
            0x82 => "linux-swap".to_string(),
            0x83 => "linux".to_string(),
            t => format!("mbr-{t:#04x}"),
        };
        if p.sys == 0xA5 {
            if let Some(inner) = disklabel(dev, start, size, &name)? {
                out.extend(inner);
                continue;
            }
        }
        out.push(Partition {
            name,
            start,
            size,
            kind,
            ufs: false,
            format: None,
        });
    }
    Ok(out)
}

/// BSD disklabel magic (`DISKMAGIC`, sys/sys/disklabel.h).
const DISKMAGIC: u32 = 0x8256_4557;
/// Byte offsets in `struct disklabel`.
const D_MAGIC: usize = 0;
const D_MAGIC2: usize = 132;
const D_NPARTITIONS: usize = 138;
const D_PARTITIONS: usize = 148;
/// `struct partition`: p_size, p_offset (sectors), p_fsize, p_fstype...
const PART_SIZE: usize = 16;
/// The raw partition `c`, whose offset the others are counted from.
const RAW_PART: usize = 2;

/// The partitions of the BSD disklabel in the second sector of
/// `[start, start+size)`, named `{prefix}a`...; None when there is no label.
/// (Layout from FreeBSD's sys/sys/disklabel.h; offsets in the label are
/// absolute sectors, made relative by the raw partition's, as geom_bsd.)
fn disklabel(
    dev: &dyn BlockDevice,
    start: u64,
    size: u64,
    prefix: &str,
) -> Result<Option<Vec<Partition>>> {
    if size < 2 * SECTOR || start.checked_add(2 * SECTOR).is_none_or(|e| e > dev.size()) {
        return Ok(None);
    }
    // The first two sectors hold the label wherever its port puts it:
    // sector 1 (FreeBSD, NetBSD and OpenBSD on i386, amd64, macppc), or
    // sector 0 at byte 64 (alpha, pmax) or 128 (sparc, sparc64)
    // (`LABELSECTOR`/`LABELOFFSET` of each port's disklabel.h).
    let mut both = vec![0u8; 2 * SECTOR_BYTES];
    dev.read_at(start, &mut both)?;
    // A label is in the byte order of the machine that wrote it, as the
    // file systems are: its magic says which.
    let found = [SECTOR_BYTES, 64, 128].into_iter().find_map(|at| {
        let l = &both[at..];
        [Endian::Little, Endian::Big]
            .into_iter()
            .find(|e| e.get_u32(l, D_MAGIC) == DISKMAGIC && e.get_u32(l, D_MAGIC2) == DISKMAGIC)
            .map(|e| (l.to_vec(), e))
    });
    let Some((l, e)) = found else {
        return Ok(None);
    };
    // Up to 16 partitions (NetBSD's MAXPARTITIONS on some ports), as
    // many as the label says and the sectors hold.
    let n = (e.get_u16(&l, D_NPARTITIONS) as usize)
        .min(l.len().saturating_sub(D_PARTITIONS) / PART_SIZE)
        .min(16);
    let part = |i: usize| {
        let o = D_PARTITIONS + i * PART_SIZE;
        let size = e.get_u32(&l, o) as u64;
        let off = e.get_u32(&l, o + 4) as u64;
        (size, off, l[o + 12])
    };
    let raw = if n > RAW_PART { part(RAW_PART).1 } else { 0 };
    let mut out = Vec::new();
    for i in 0..n {
        let (psize, poff, fstype) = part(i);
        if i == RAW_PART || psize == 0 || poff < raw {
            continue;
        }
        let rel = (poff - raw) * SECTOR;
        out.push(Partition {
            name: format!("{prefix}{}", char::from(b"abcdefghijklmnop"[i])),
            start: start + rel,
            size: psize * SECTOR,
            kind: match fstype {
                7 => "freebsd-ufs".to_string(),
                1 => "freebsd-swap".to_string(),
                t => format!("bsd-fstype-{t}"),
            },
            ufs: false,
            format: None,
        });
    }
    Ok(Some(out))
}

/// Writes a BSD disklabel into the second sector of `[start, start+size)`
/// of `dev` with the given partitions (`(letter index, start sector
/// relative to the slice, sectors, fstype)`), for tests and for building
/// FreeBSD-like disk images. The raw partition `c` covers the slice.
pub fn write_disklabel(
    dev: &dyn BlockDevice,
    start: u64,
    size: u64,
    parts: &[(usize, u64, u64, u8)],
) -> Result<()> {
    write_disklabel_in(Endian::Little, dev, start, size, parts)
}

/// [`write_disklabel`] in byte order `e` (a big-endian machine's label).
pub fn write_disklabel_in(
    e: Endian,
    dev: &dyn BlockDevice,
    start: u64,
    size: u64,
    parts: &[(usize, u64, u64, u8)],
) -> Result<()> {
    let mut l = vec![0u8; SECTOR_BYTES];
    let put32 = |l: &mut [u8], o: usize, v: u32| e.set_u32(l, o, v);
    put32(&mut l, D_MAGIC, DISKMAGIC);
    put32(&mut l, D_MAGIC2, DISKMAGIC);
    put32(&mut l, 40, SECTOR_U32); // d_secsize
    e.set_u16(&mut l, D_NPARTITIONS, 8);
    let sectors32 = |v: u64| {
        u32::try_from(v).map_err(|_| {
            Error::new(
                ErrorKind::Invalid,
                format!("sector {v} is past what a disklabel's 32-bit fields hold"),
            )
        })
    };
    let base = sectors32(start / SECTOR)?;
    let mut entries = vec![(RAW_PART, 0u64, size / SECTOR, 0u8)];
    entries.extend_from_slice(parts);
    for (i, off, sectors, fstype) in entries {
        if i >= 8 {
            return Err(Error::new(
                ErrorKind::Invalid,
                "a disklabel has partitions a to h",
            ));
        }
        let o = D_PARTITIONS + i * PART_SIZE;
        put32(&mut l, o, sectors32(sectors)?);
        put32(&mut l, o + 4, sectors32(u64::from(base) + off)?);
        l[o + 12] = fstype;
    }
    // d_checksum: the XOR of the label's 16-bit words up to the end of the
    // partition table, with the field itself zero.
    let end = D_PARTITIONS + 8 * PART_SIZE;
    let mut sum = 0u16;
    for w in l[..end].chunks(2) {
        sum ^= e.get_u16(w, 0);
    }
    e.set_u16(&mut l, 136, sum);
    dev.write_at(start + SECTOR, &l)
}

/// Opens what a user names: an image or device (`disk.img`), or one
/// partition of it (`disk.img:p2`, `disk.img:s1a`). Without a partition, a
/// disk whose first bytes hold no UFS file system but whose partition
/// table lists exactly one is opened at that one (`chosen` says which);
/// several give an error naming them. The file is locked as
/// [`super::FileDevice::open`] locks it.
pub fn open_image(
    spec: &std::path::Path,
    writable: bool,
) -> Result<(Box<dyn BlockDevice>, Option<Partition>)> {
    let (path, part) = split_spec(spec);
    let file = super::FileDevice::open(&path, writable)?;
    let parts_of = |f: &super::FileDevice| probe(f);
    match part {
        Some(name) => {
            let parts = parts_of(&file)?;
            let Some(p) = parts.iter().find(|p| p.name == name).cloned() else {
                return Err(Error::new(
                    ErrorKind::NotFound,
                    format!(
                        "{} has no partition {name} (it has: {})",
                        path.display(),
                        describe(&parts)
                    ),
                ));
            };
            Ok((Box::new(Window::new(file, p.start, p.size)?), Some(p)))
        }
        None => {
            if crate::fs::read_superblock(&file).is_ok() {
                return Ok((Box::new(file), None));
            }
            let parts = parts_of(&file).unwrap_or_default();
            let ufs: Vec<&Partition> = parts.iter().filter(|p| p.ufs).collect();
            match ufs.as_slice() {
                [p] => {
                    let p = (*p).clone();
                    Ok((Box::new(Window::new(file, p.start, p.size)?), Some(p)))
                }
                [] => Ok((Box::new(file), None)),
                many => Err(Error::new(
                    ErrorKind::Invalid,
                    format!(
                        "{} holds {} UFS file systems ({}); name one, as {}:{}",
                        path.display(),
                        many.len(),
                        many.iter()
                            .map(|p| p.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", "),
                        path.display(),
                        many[0].name
                    ),
                )),
            }
        }
    }
}

/// `disk.img:p2` into the path and the partition name, unless a file of
/// that whole name exists.
pub fn split_spec(spec: &std::path::Path) -> (std::path::PathBuf, Option<String>) {
    if spec.exists() {
        return (spec.to_path_buf(), None);
    }
    let s = spec.to_string_lossy();
    if let Some((p, n)) = s.rsplit_once(':') {
        let ok = !n.is_empty()
            && n.len() <= 4
            && n.chars().all(|c| c.is_ascii_alphanumeric())
            && std::path::Path::new(p).exists();
        if ok {
            return (std::path::PathBuf::from(p), Some(n.to_string()));
        }
    }
    (spec.to_path_buf(), None)
}

/// `p1 (freebsd-boot), p2 (freebsd-ufs, UFS2, little-endian)...`
pub fn describe(parts: &[Partition]) -> String {
    if parts.is_empty() {
        return "no partition table ufskit reads".to_string();
    }
    parts
        .iter()
        .map(|p| {
            format!(
                "{} ({}{})",
                p.name,
                p.kind,
                p.format
                    .as_deref()
                    .map(|f| format!(", {f}"))
                    .unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dev::MemDevice;

    #[test]
    fn a_window_keeps_to_its_range() {
        let d = std::sync::Arc::new(MemDevice::new(1 << 20));
        let w = Window::new(d.clone(), 4096, 8192).unwrap();
        w.write_at(0, &[7; 512]).unwrap();
        assert!(w.write_at(8192 - 256, &[1; 512]).is_err());
        let mut b = [0u8; 512];
        d.read_at(4096, &mut b).unwrap();
        assert_eq!(b, [7; 512]);
        assert!(Window::new(d.clone(), 1 << 20, 1).is_err());
    }

    #[test]
    fn a_disklabel_round_trips_and_hostile_labels_do_not_panic() {
        let d = MemDevice::new(4 << 20);
        let slice = (1u64 << 20, 3u64 << 20);
        write_disklabel(
            &d,
            slice.0,
            slice.1,
            &[(0, 16, 2048, 7), (1, 2064, 1024, 1)],
        )
        .unwrap();
        let parts = disklabel(&d, slice.0, slice.1, "s1").unwrap().unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].name, "s1a");
        assert_eq!(parts[0].start, slice.0 + 16 * 512);
        assert_eq!(parts[0].size, 2048 * 512);
        assert_eq!(parts[0].kind, "freebsd-ufs");
        assert_eq!(parts[1].kind, "freebsd-swap");
        // Hostile, on the whole disk: a partition count of 65535, an offset
        // and a size past the disk. Probing keeps only what fits.
        let mut l = vec![0u8; 512];
        d.read_at(slice.0 + 512, &mut l).unwrap();
        l[D_NPARTITIONS..D_NPARTITIONS + 2].copy_from_slice(&u16::MAX.to_le_bytes());
        l[D_PARTITIONS + 4..D_PARTITIONS + 8].copy_from_slice(&u32::MAX.to_le_bytes());
        l[D_PARTITIONS + 16..D_PARTITIONS + 20].copy_from_slice(&u32::MAX.to_le_bytes());
        d.write_at(512, &l).unwrap();
        let found = probe(&d).unwrap();
        assert!(
            found.iter().all(|p| p.start + p.size <= d.size()),
            "{found:?}"
        );
        assert!(found.iter().all(|p| p.name != "a"), "{found:?}");
    }

    #[test]
    fn garbage_is_no_table() {
        let d = MemDevice::new(1 << 20);
        let mut junk = vec![0u8; 4096];
        for (i, b) in junk.iter_mut().enumerate() {
            *b = u8::try_from(i * 37 % 251).unwrap();
        }
        junk[510] = 0x55;
        junk[511] = 0xAA;
        d.write_at(0, &junk).unwrap();
        // An MBR signature over garbage entries: no panic, only entries
        // inside the disk.
        let parts = probe(&d).unwrap_or_default();
        assert!(parts.iter().all(|p| p.start + p.size <= d.size()));
    }
}
