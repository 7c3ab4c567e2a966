//! The superblock (`struct fs`, 1376 bytes) and the geometry derived from it.
//!
//! Invariants: a [`Superblock`] always holds exactly `SBSIZE_STRUCT` bytes and
//! round-trips them unchanged except for fields explicitly set. A
//! [`Geometry`] exists only for a superblock that passed [`Superblock::validate`],
//! so its arithmetic (addresses of cylinder groups, inodes, maps) cannot
//! overflow or point outside the file system.
//!
//! The structure is the same for UFS1 and UFS2 (UFS1 keeps its sizes,
//! times and totals in the `fs_old_*` fields) and is held in the file
//! system's byte order, as read: every accessor decodes with the
//! superblock's [`Endian`], so a check-hash computed over `raw` is the one
//! stored on disk. A UFS1 superblock is brought up to date when read
//! ([`Superblock::compat_read`], FreeBSD's `ffs_oldfscompat_read`) and its
//! old fields are refreshed when written ([`Superblock::to_disk_bytes`],
//! `ffs_oldfscompat_write`).
//!
//! Field offsets: FreeBSD `sys/ufs/ffs/fs.h` (amd64 layout; `fs_ocsp` is 15
//! pointers). Validity rules: `validate_sblock`, sys/ufs/ffs/ffs_subr.c.
use crate::bytes::{low_i32, to_signed, Endian};
use crate::error::FormatError;
use crate::variant::{Ufs, Variant};
use crate::*;

/// `FS_FLAGS_UPDATED` in the 8-bit `fs_old_flags`.
const OLD_FLAGS_UPDATED: u8 = 0x80;
const _: () = assert!(FS_FLAGS_UPDATED == OLD_FLAGS_UPDATED as i32);

/// `struct csum`: per-cylinder-group counters (also the summary array entry).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Csum {
    pub cs_ndir: i32,
    pub cs_nbfree: i32,
    pub cs_nifree: i32,
    pub cs_nffree: i32,
}

/// `struct csum_total`: file-system-wide counters (`fs_cstotal`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CsumTotal {
    pub cs_ndir: i64,
    pub cs_nbfree: i64,
    pub cs_nifree: i64,
    pub cs_nffree: i64,
    pub cs_numclusters: i64,
}

impl Csum {
    pub const SIZE: usize = 16;
    pub fn read(e: Endian, b: &[u8], off: usize) -> Csum {
        Csum {
            cs_ndir: e.get_i32(b, off),
            cs_nbfree: e.get_i32(b, off + 4),
            cs_nifree: e.get_i32(b, off + 8),
            cs_nffree: e.get_i32(b, off + 12),
        }
    }
    pub fn write(&self, e: Endian, b: &mut [u8], off: usize) {
        e.set_i32(b, off, self.cs_ndir);
        e.set_i32(b, off + 4, self.cs_nbfree);
        e.set_i32(b, off + 8, self.cs_nifree);
        e.set_i32(b, off + 12, self.cs_nffree);
    }
}

pub const FS_CSTOTAL_OFF: usize = 1008;
/// `sizeof(struct csum_total)`: five counters and three spares.
pub const FS_CSTOTAL_SIZE: usize = 64;
pub const FS_OLD_CSTOTAL_OFF: usize = 192;
pub const FS_CKHASH_OFF: usize = 1304;
pub const FS_FSMNT_OFF: usize = 212;
pub const FS_VOLNAME_OFF: usize = 680;
pub const FS_SNAPINUM_OFF: usize = 1116;
pub const FS_MAGIC_OFF: usize = 1372;

/// The superblock as its raw bytes with typed accessors.
#[derive(Clone, PartialEq, Eq)]
pub struct Superblock {
    /// `fs_sbsize` bytes as read (at least `SBSIZE_STRUCT`): a UFS1
    /// superblock of FreeBSD 4 keeps rotational tables past the structure,
    /// which are written back as they were.
    raw: Vec<u8>,
    endian: Endian,
}

impl std::fmt::Debug for Superblock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Superblock")
            .field("fs_magic", &format_args!("{:#x}", self.fs_magic()))
            .field("fs_bsize", &self.fs_bsize())
            .field("fs_fsize", &self.fs_fsize())
            .field("fs_ncg", &self.fs_ncg())
            .field("fs_size", &self.fs_size())
            .finish()
    }
}

impl Superblock {
    /// An all-zero little-endian superblock, to be filled in by newfs.
    pub fn zeroed() -> Self {
        Self::zeroed_in(Endian::Little)
    }

    /// An all-zero superblock in byte order `endian`.
    pub fn zeroed_in(endian: Endian) -> Self {
        Superblock {
            raw: vec![0; SBSIZE_STRUCT],
            endian,
        }
    }

    #[inline]
    fn endian(&self) -> Endian {
        self.endian
    }

    /// The superblock's byte order.
    pub fn byte_order(&self) -> Endian {
        self.endian
    }

    /// The file system's format and byte order (from the magic number).
    pub fn variant(&self) -> Variant {
        Variant {
            ufs: if self.fs_magic() == FS_UFS1_MAGIC {
                Ufs::Ufs1
            } else {
                Ufs::Ufs2
            },
            endian: self.endian,
        }
    }

    /// The byte order a superblock's magic number at offset 1372 of `b`
    /// says, if it is a UFS1, UFS2 or "newfs did not finish" magic in
    /// either order.
    pub fn sniff(b: &[u8]) -> Option<(Endian, u32)> {
        if b.len() < SBSIZE_STRUCT {
            return None;
        }
        let le = Endian::Little.get_u32(b, FS_MAGIC_OFF);
        for m in [FS_UFS2_MAGIC, FS_UFS1_MAGIC, FS_BAD_MAGIC] {
            if le == m {
                return Some((Endian::Little, m));
            }
            if le == m.swap_bytes() {
                return Some((Endian::Big, m));
            }
        }
        None
    }

    /// Takes the superblock at the start of `b` (up to `fs_sbsize` bytes)
    /// without validating it, in the byte order its magic number says.
    pub fn from_bytes(b: &[u8]) -> Result<Self, FormatError> {
        if b.len() < SBSIZE_STRUCT {
            return Err(FormatError::corrupt("superblock", "short read"));
        }
        let Some((endian, magic)) = Self::sniff(b) else {
            let m = Endian::Little.get_u32(b, FS_MAGIC_OFF);
            return Err(FormatError::corrupt(
                "superblock",
                format!("bad magic {m:#x} (not a UFS1 or UFS2 file system in either byte order)"),
            ));
        };
        if magic == FS_BAD_MAGIC {
            return Err(FormatError::corrupt(
                "superblock",
                "newfs did not complete (FS_BAD_MAGIC)",
            ));
        }
        let sbsize = endian.get_i32(b, 104);
        let keep = usize::try_from(sbsize)
            .unwrap_or(0)
            .clamp(SBSIZE_STRUCT, SBLOCKSIZE)
            .min(b.len());
        Ok(Superblock {
            raw: b[..keep].to_vec(),
            endian,
        })
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.raw
    }

    /// Bytes to write at the superblock location: `fs_sbsize` bytes (the
    /// structure, and what followed it when read, or zeros), the old UFS1
    /// fields refreshed, the check-hash updated when enabled.
    pub fn to_disk_bytes(&self) -> Vec<u8> {
        let mut s = self.clone();
        s.compat_write();
        s.update_ckhash();
        let mut out = s.raw;
        out.resize(self.disk_len(), 0);
        out
    }

    /// Bytes the superblock takes on disk (`fs_sbsize`, within reason).
    fn disk_len(&self) -> usize {
        usize::try_from(self.fs_sbsize())
            .unwrap_or(0)
            .clamp(SBSIZE_STRUCT, SBLOCKSIZE)
    }

    /// Computes the superblock check-hash over `fs_sbsize` bytes.
    pub fn compute_ckhash(&self) -> u32 {
        let mut buf = self.raw.clone();
        buf.resize(self.disk_len(), 0);
        crate::ckhash::ckhash_with_zeroed_field(&buf, FS_CKHASH_OFF)
    }

    /// What FreeBSD does to a superblock it reads (`ffs_oldfscompat_read`,
    /// sys/ufs/ffs/ffs_vfsops.c): one not yet updated by a FreeBSD 5 or
    /// later kernel (no `FS_FLAGS_UPDATED` in `fs_old_flags`) gets its
    /// flags and location in the new fields; a UFS1 one gets the wide
    /// copies of its size, data size, summary address, time and totals
    /// when `fs_maxbsize` does not yet say so; zero tuning fields get their
    /// defaults. (FreeBSD also caps a UFS1 `fs_maxfilesize` in memory and
    /// restores it when writing; here the cap is the [`Geometry`]'s, and
    /// the field keeps what newfs wrote.) `loc` is where the primary
    /// superblock lives: where this one was read, or for a backup the
    /// standard place of its format ([`Superblock::primary_location`]).
    pub fn compat_read(&mut self, loc: u64) {
        if self.fs_old_flags() as i32 & FS_FLAGS_UPDATED == 0 {
            self.set_fs_flags(self.fs_old_flags() as i32);
            self.set_fs_old_flags(self.fs_old_flags() | OLD_FLAGS_UPDATED);
            self.set_fs_sblockloc(to_signed(loc));
        }
        if self.fs_magic() == FS_UFS1_MAGIC && self.fs_maxbsize() != self.fs_bsize() {
            self.set_fs_maxbsize(self.fs_bsize());
            self.set_fs_time(i64::from(self.fs_old_time().cast_unsigned()));
            self.set_fs_size(self.fs_old_size() as i64);
            self.set_fs_dsize(self.fs_old_dsize() as i64);
            self.set_fs_csaddr(self.fs_old_csaddr() as i64);
            let o = self.fs_old_cstotal();
            let mut t = self.fs_cstotal();
            t.cs_ndir = o.cs_ndir as i64;
            t.cs_nbfree = o.cs_nbfree as i64;
            t.cs_nifree = o.cs_nifree as i64;
            t.cs_nffree = o.cs_nffree as i64;
            self.set_fs_cstotal(t);
        }
        if self.fs_avgfilesize().cast_signed() <= 0 {
            self.set_fs_avgfilesize(AVFILESIZ);
        }
        if self.fs_avgfpdir().cast_signed() <= 0 {
            self.set_fs_avgfpdir(AFPDIR);
        }
    }

    /// The standard place of the primary superblock when one was read at
    /// `loc`: `loc` itself at 8192 or 65536, else (a backup, or the floppy
    /// and piggy places) 8192 for UFS1 and 65536 for UFS2.
    pub fn primary_location(&self, loc: u64) -> u64 {
        if loc == SBLOCK_UFS1 || loc == SBLOCK_UFS2 {
            loc
        } else if self.fs_magic() == FS_UFS1_MAGIC {
            SBLOCK_UFS1
        } else {
            SBLOCK_UFS2
        }
    }

    /// What FreeBSD does before writing a UFS1 superblock
    /// (`ffs_oldfscompat_write`): the old time and totals follow the new
    /// ones, so an older system reading the file system sees them.
    pub fn compat_write(&mut self) {
        if self.fs_magic() != FS_UFS1_MAGIC {
            return;
        }
        self.set_fs_old_time(low_i32(self.fs_time()));
        let t = self.fs_cstotal();
        self.set_fs_old_cstotal(Csum {
            cs_ndir: low_i32(t.cs_ndir),
            cs_nbfree: low_i32(t.cs_nbfree),
            cs_nifree: low_i32(t.cs_nifree),
            cs_nffree: low_i32(t.cs_nffree),
        });
    }

    pub fn ckhash_enabled(&self, which: u32) -> bool {
        (self.fs_flags() & FS_METACKHASH) != 0 && (self.fs_metackhash() & which) != 0
    }

    pub fn update_ckhash(&mut self) {
        if self.ckhash_enabled(CK_SUPERBLOCK) {
            let h = self.compute_ckhash();
            self.set_fs_ckhash(h);
        }
    }

    crate::fields! {
        fs_firstfield / set_fs_firstfield: i32 @ 0;
        fs_sblkno / set_fs_sblkno: i32 @ 8;
        fs_cblkno / set_fs_cblkno: i32 @ 12;
        fs_iblkno / set_fs_iblkno: i32 @ 16;
        fs_dblkno / set_fs_dblkno: i32 @ 20;
        fs_old_cgoffset / set_fs_old_cgoffset: i32 @ 24;
        fs_old_cgmask / set_fs_old_cgmask: i32 @ 28;
        fs_old_time / set_fs_old_time: i32 @ 32;
        fs_old_size / set_fs_old_size: i32 @ 36;
        fs_old_dsize / set_fs_old_dsize: i32 @ 40;
        fs_ncg / set_fs_ncg: u32 @ 44;
        fs_bsize / set_fs_bsize: i32 @ 48;
        fs_fsize / set_fs_fsize: i32 @ 52;
        fs_frag / set_fs_frag: i32 @ 56;
        fs_minfree / set_fs_minfree: i32 @ 60;
        fs_old_rotdelay / set_fs_old_rotdelay: i32 @ 64;
        fs_old_rps / set_fs_old_rps: i32 @ 68;
        fs_bmask / set_fs_bmask: i32 @ 72;
        fs_fmask / set_fs_fmask: i32 @ 76;
        fs_bshift / set_fs_bshift: i32 @ 80;
        fs_fshift / set_fs_fshift: i32 @ 84;
        fs_maxcontig / set_fs_maxcontig: i32 @ 88;
        fs_maxbpg / set_fs_maxbpg: i32 @ 92;
        fs_fragshift / set_fs_fragshift: i32 @ 96;
        fs_fsbtodb / set_fs_fsbtodb: i32 @ 100;
        fs_sbsize / set_fs_sbsize: i32 @ 104;
        fs_nindir / set_fs_nindir: i32 @ 116;
        fs_inopb / set_fs_inopb: u32 @ 120;
        fs_old_nspf / set_fs_old_nspf: i32 @ 124;
        fs_optim / set_fs_optim: i32 @ 128;
        fs_old_npsect / set_fs_old_npsect: i32 @ 132;
        fs_old_interleave / set_fs_old_interleave: i32 @ 136;
        fs_old_trackskew / set_fs_old_trackskew: i32 @ 140;
        fs_id0 / set_fs_id0: i32 @ 144;
        fs_id1 / set_fs_id1: i32 @ 148;
        fs_old_csaddr / set_fs_old_csaddr: i32 @ 152;
        fs_cssize / set_fs_cssize: i32 @ 156;
        fs_cgsize / set_fs_cgsize: i32 @ 160;
        fs_spare2 / set_fs_spare2: i32 @ 164;
        fs_old_nsect / set_fs_old_nsect: i32 @ 168;
        fs_old_spc / set_fs_old_spc: i32 @ 172;
        fs_old_ncyl / set_fs_old_ncyl: i32 @ 176;
        fs_old_cpg / set_fs_old_cpg: i32 @ 180;
        fs_ipg / set_fs_ipg: u32 @ 184;
        fs_fpg / set_fs_fpg: i32 @ 188;
        fs_fmod / set_fs_fmod: i8 @ 208;
        fs_clean / set_fs_clean: i8 @ 209;
        fs_ronly / set_fs_ronly: i8 @ 210;
        fs_old_flags / set_fs_old_flags: u8 @ 211;
        fs_swuid / set_fs_swuid: u64 @ 712;
        fs_pad / set_fs_pad: i32 @ 720;
        fs_cgrotor / set_fs_cgrotor: i32 @ 724;
        fs_old_cpc / set_fs_old_cpc: i32 @ 856;
        fs_maxbsize / set_fs_maxbsize: i32 @ 860;
        fs_unrefs / set_fs_unrefs: i64 @ 864;
        fs_providersize / set_fs_providersize: i64 @ 872;
        fs_metaspace / set_fs_metaspace: i64 @ 880;
        fs_sblockactualloc / set_fs_sblockactualloc: i64 @ 992;
        fs_sblockloc / set_fs_sblockloc: i64 @ 1000;
        fs_time / set_fs_time: i64 @ 1072;
        fs_size / set_fs_size: i64 @ 1080;
        fs_dsize / set_fs_dsize: i64 @ 1088;
        fs_csaddr / set_fs_csaddr: i64 @ 1096;
        fs_pendingblocks / set_fs_pendingblocks: i64 @ 1104;
        fs_pendinginodes / set_fs_pendinginodes: u32 @ 1112;
        fs_avgfilesize / set_fs_avgfilesize: u32 @ 1196;
        fs_avgfpdir / set_fs_avgfpdir: u32 @ 1200;
        fs_save_cgsize / set_fs_save_cgsize: i32 @ 1204;
        fs_mtime / set_fs_mtime: i64 @ 1208;
        fs_sujfree / set_fs_sujfree: i32 @ 1216;
        fs_ckhash / set_fs_ckhash: u32 @ 1304;
        fs_metackhash / set_fs_metackhash: u32 @ 1308;
        fs_flags / set_fs_flags: i32 @ 1312;
        fs_contigsumsize / set_fs_contigsumsize: i32 @ 1316;
        fs_maxsymlinklen / set_fs_maxsymlinklen: i32 @ 1320;
        fs_old_inodefmt / set_fs_old_inodefmt: i32 @ 1324;
        fs_maxfilesize / set_fs_maxfilesize: u64 @ 1328;
        fs_qbmask / set_fs_qbmask: i64 @ 1336;
        fs_qfmask / set_fs_qfmask: i64 @ 1344;
        fs_state / set_fs_state: i32 @ 1352;
        fs_old_postblformat / set_fs_old_postblformat: i32 @ 1356;
        fs_old_nrpos / set_fs_old_nrpos: i32 @ 1360;
        fs_magic / set_fs_magic: u32 @ 1372;
    }

    pub fn fs_cstotal(&self) -> CsumTotal {
        let (e, b) = (self.endian, &self.raw);
        let o = FS_CSTOTAL_OFF;
        CsumTotal {
            cs_ndir: e.get_i64(b, o),
            cs_nbfree: e.get_i64(b, o + 8),
            cs_nifree: e.get_i64(b, o + 16),
            cs_nffree: e.get_i64(b, o + 24),
            cs_numclusters: e.get_i64(b, o + 32),
        }
    }
    pub fn set_fs_cstotal(&mut self, t: CsumTotal) {
        let o = FS_CSTOTAL_OFF;
        let (e, b) = (self.endian, &mut self.raw);
        e.set_i64(b, o, t.cs_ndir);
        e.set_i64(b, o + 8, t.cs_nbfree);
        e.set_i64(b, o + 16, t.cs_nifree);
        e.set_i64(b, o + 24, t.cs_nffree);
        e.set_i64(b, o + 32, t.cs_numclusters);
    }
    /// Is this a NetBSD file system with an active WAPBL log? NetBSD sets
    /// `FS_DOWAPBL` (0x100 in `fs_flags`) while a logging mount is live or
    /// after it crashed, with the log's version (1) at byte 864 and its
    /// location (1 end of partition, 2 in the file system) at 865
    /// (NetBSD `sys/ufs/ffs/fs.h`, `ffs_wapbl.c`). FreeBSD's
    /// `FS_NFS4ACLS` is the same bit, hence the log fields too.
    pub fn netbsd_log_active(&self) -> bool {
        const FS_DOWAPBL: i32 = 0x100;
        let (version, location) = (self.raw[864], self.raw[865]);
        // The log's block size (`fs_journallocs[2]`, at 888): a sector
        // size. FreeBSD keeps spares there (zero), so this tells the two
        // apart where the flag bit and the low bytes of its `fs_unrefs`
        // might agree by chance.
        let blksize = self.endian.get_u64(&self.raw, 888);
        self.fs_flags() & FS_DOWAPBL != 0
            && version == 1
            && matches!(location, 1 | 2)
            && blksize.is_power_of_two()
            && (512..=65536).contains(&blksize)
    }

    /// Sets `fs_cstotal` to `t` with its spare fields zero, as fsck's pass 5
    /// writes it.
    pub fn set_fs_cstotal_exact(&mut self, t: CsumTotal) {
        self.raw[FS_CSTOTAL_OFF..FS_CSTOTAL_OFF + FS_CSTOTAL_SIZE].fill(0);
        self.set_fs_cstotal(t);
    }
    /// The bytes of `fs_cstotal`, spares included (fsck compares them
    /// whole).
    pub fn cstotal_bytes(&self) -> &[u8] {
        &self.raw[FS_CSTOTAL_OFF..FS_CSTOTAL_OFF + FS_CSTOTAL_SIZE]
    }
    pub fn fs_old_cstotal(&self) -> Csum {
        Csum::read(self.endian, &self.raw, FS_OLD_CSTOTAL_OFF)
    }
    pub fn set_fs_old_cstotal(&mut self, c: Csum) {
        c.write(self.endian, &mut self.raw, FS_OLD_CSTOTAL_OFF)
    }
    pub fn fs_volname(&self) -> String {
        cstr(&self.raw[FS_VOLNAME_OFF..FS_VOLNAME_OFF + MAXVOLLEN])
    }
    pub fn set_fs_volname(&mut self, name: &str) {
        let f = &mut self.raw[FS_VOLNAME_OFF..FS_VOLNAME_OFF + MAXVOLLEN];
        f.fill(0);
        let n = name.len().min(MAXVOLLEN - 1);
        f[..n].copy_from_slice(&name.as_bytes()[..n]);
    }
    pub fn fs_fsmnt(&self) -> String {
        cstr(&self.raw[FS_FSMNT_OFF..FS_FSMNT_OFF + MAXMNTLEN])
    }
    pub fn set_fs_fsmnt(&mut self, name: &str) {
        let f = &mut self.raw[FS_FSMNT_OFF..FS_FSMNT_OFF + MAXMNTLEN];
        f.fill(0);
        let n = name.len().min(MAXMNTLEN - 1);
        f[..n].copy_from_slice(&name.as_bytes()[..n]);
    }
    pub fn fs_snapinum(&self, i: usize) -> u32 {
        self.endian.get_u32(&self.raw, FS_SNAPINUM_OFF + 4 * i)
    }
    pub fn set_fs_snapinum(&mut self, i: usize, ino: u32) {
        self.endian
            .set_u32(&mut self.raw, FS_SNAPINUM_OFF + 4 * i, ino)
    }

    /// Checks the rules FreeBSD's `validate_sblock` enforces (plus the ones
    /// our arithmetic relies on) and returns the derived geometry.
    /// `loc` is the byte offset the superblock was read from.
    pub fn validate(&self, loc: u64) -> Result<Geometry, FormatError> {
        let bad = |field: &str, detail: String| {
            Err(FormatError::corrupt(format!("superblock {field}"), detail))
        };
        let magic = self.fs_magic();
        if magic != FS_UFS2_MAGIC && magic != FS_UFS1_MAGIC {
            return bad(
                "fs_magic",
                format!("{magic:#x} is neither the UFS1 nor the UFS2 magic"),
            );
        }
        let v = self.variant();
        let ufs1 = v.is_ufs1();
        if ufs1 && self.fs_old_inodefmt() < FS_44INODEFMT {
            return Err(FormatError::Unsupported(format!(
                "UFS1 file system in the pre-4.4BSD format (fs_old_inodefmt {}, {} expected): \
                 its inodes keep 16-bit owners and its directories 16-bit name lengths \
                 without file types, which ufskit does not read; FreeBSD's fsck_ffs -c 2 \
                 on a 4.4BSD-derived system converts it",
                self.fs_old_inodefmt(),
                FS_44INODEFMT
            )));
        }
        // Each signed field is checked, then used as the unsigned number it
        // is: nothing below wraps a negative value.
        let sblockloc = self.fs_sblockloc();
        let sbloc = u64::try_from(sblockloc).ok();
        if loc == SBLOCK_UFS2 || loc == SBLOCK_UFS1 {
            if sbloc != Some(loc) {
                return bad(
                    "fs_sblockloc",
                    format!("{sblockloc} but superblock found at {loc}"),
                );
            }
        } else if !matches!(sbloc, Some(SBLOCK_UFS2 | SBLOCK_UFS1)) {
            return bad(
                "fs_sblockloc",
                format!("{sblockloc} is not a standard location"),
            );
        }
        let sbloc = sbloc.unwrap_or(loc);
        let bsize = self.fs_bsize();
        let fsize = self.fs_fsize();
        let Some(bsize_u) = u64::try_from(bsize).ok().filter(|b| {
            (u64::from(MINBSIZE)..=u64::from(MAXBSIZE)).contains(b) && b.is_power_of_two()
        }) else {
            return bad(
                "fs_bsize",
                format!("{bsize} is not a power of two in [4096, 65536]"),
            );
        };
        let Some(fsize_u) = u64::try_from(fsize).ok().filter(|&f| {
            f >= 512 && f <= bsize_u && f.is_power_of_two() && bsize_u / f <= MAXFRAG as u64
        }) else {
            return bad("fs_fsize", format!("{fsize} with block size {bsize}"));
        };
        let frag_u = bsize_u / fsize_u;
        let frag = bsize / fsize;
        if self.fs_frag() != frag {
            return bad(
                "fs_frag",
                format!("{} but bsize/fsize is {frag}", self.fs_frag()),
            );
        }
        let bshift = bsize_u.trailing_zeros();
        let fshift = fsize_u.trailing_zeros();
        let fragshift = frag_u.trailing_zeros();
        let bsize_i = i64::from(bsize);
        let fsize_i = i64::from(fsize);
        let ptr_size = v.ptr_size() as u64;
        let dinode_size = v.dinode_size() as u64;
        let nindir = bsize_u / ptr_size;
        let inopb = bsize_u / dinode_size;
        let checks: [(&str, i64, u64); 11] = [
            ("fs_bshift", self.fs_bshift().into(), bshift.into()),
            ("fs_fshift", self.fs_fshift().into(), fshift.into()),
            ("fs_fragshift", self.fs_fragshift().into(), fragshift.into()),
            ("fs_qbmask", self.fs_qbmask(), bsize_u - 1),
            ("fs_qfmask", self.fs_qfmask(), fsize_u - 1),
            ("fs_nindir", self.fs_nindir().into(), nindir),
            ("fs_inopb", self.fs_inopb().into(), inopb),
            (
                "fs_fsbtodb",
                self.fs_fsbtodb().into(),
                (fsize_u / 512).trailing_zeros().into(),
            ),
            (
                "fs_maxsymlinklen",
                self.fs_maxsymlinklen().into(),
                v.maxsymlinklen() as u64,
            ),
            // The masks are the negated sizes less one, as signed fields.
            (
                "fs_bmask",
                self.fs_bmask().into(),
                (!(bsize_i - 1)).cast_unsigned(),
            ),
            (
                "fs_fmask",
                self.fs_fmask().into(),
                (!(fsize_i - 1)).cast_unsigned(),
            ),
        ];
        for (name, have, want) in checks {
            let want_i = want.cast_signed();
            if have != want_i {
                return bad(name, format!("{have}, expected {want_i}"));
            }
        }
        let ncg = u64::from(self.fs_ncg());
        let ipg = u64::from(self.fs_ipg());
        let fpg = self.fs_fpg();
        if !(1..=(1 << 31)).contains(&ncg) {
            return bad("fs_ncg", format!("{ncg}"));
        }
        if ipg < inopb || !ipg.is_multiple_of(inopb) || ipg > (1 << 31) {
            return bad(
                "fs_ipg",
                format!("{ipg} is not a positive multiple of {inopb}"),
            );
        }
        if ncg
            .checked_mul(ipg)
            .is_none_or(|n| n > (1u64 << 32) - inopb)
        {
            return bad(
                "fs_ipg",
                format!("{ncg} groups of {ipg} inodes overflow 32-bit inode numbers"),
            );
        }
        // FreeBSD asks for at least 3 blocks per group, a whole number of
        // blocks unless the file system is a single small group.
        let Some(fpg) = u64::try_from(fpg)
            .ok()
            .filter(|&f| f >= 3 * frag_u && (f % frag_u == 0 || ncg == 1))
        else {
            return bad(
                "fs_fpg",
                format!("{fpg} is not a multiple of {frag} (and at least 3 blocks)"),
            );
        };
        // Fixed parts of every cylinder group, in fragments.
        let sblkno = i64::from(self.fs_sblkno());
        let cblkno = i64::from(self.fs_cblkno());
        let iblkno = i64::from(self.fs_iblkno());
        let dblkno = i64::from(self.fs_dblkno());
        // Whole blocks of `bytes`, in fragments.
        let frags_of = |bytes: u64| bytes.div_ceil(fsize_u).div_ceil(frag_u) * frag_u;
        let want_sblkno = frags_of(sbloc + SBLOCKSIZE as u64);
        if u64::try_from(sblkno).ok() != Some(want_sblkno) {
            return bad("fs_sblkno", format!("{sblkno}, expected {want_sblkno}"));
        }
        let sbsize = self.fs_sbsize();
        let sbsize_ok = usize::try_from(sbsize).is_ok_and(|n| {
            (SBSIZE_STRUCT..=SBLOCKSIZE).contains(&n)
                && ((n as u64).is_multiple_of(fsize_u.min(SBLOCKSIZE as u64)) || n % 512 == 0)
        });
        if !sbsize_ok {
            return bad("fs_sbsize", format!("{sbsize}"));
        }
        let want_cblkno = want_sblkno + frags_of(SBLOCKSIZE as u64);
        if u64::try_from(cblkno).ok() != Some(want_cblkno) {
            return bad("fs_cblkno", format!("{cblkno}, expected {want_cblkno}"));
        }
        let cgsize = self.fs_cgsize();
        let Some(cgsize_u) = u64::try_from(cgsize)
            .ok()
            .filter(|&c| c >= CG_HEADER_SIZE as u64 && c <= bsize_u)
        else {
            return bad("fs_cgsize", format!("{cgsize} is not within [168, bsize]"));
        };
        let want_iblkno = want_cblkno + frags_of(cgsize_u);
        if u64::try_from(iblkno).ok() != Some(want_iblkno) {
            return bad("fs_iblkno", format!("{iblkno}, expected {want_iblkno}"));
        }
        let want_dblkno = want_iblkno + ipg / inopb * frag_u;
        if u64::try_from(dblkno).ok() != Some(want_dblkno) {
            return bad("fs_dblkno", format!("{dblkno}, expected {want_dblkno}"));
        }
        let (sblkno, cblkno, iblkno, dblkno) = (want_sblkno, want_cblkno, want_iblkno, want_dblkno);
        // UFS1 groups made for old disks start their metadata further in,
        // cylinder by cylinder (`cgstart`: fs_old_cgoffset fragments per
        // step of the group number outside fs_old_cgmask); UFS2 has no
        // stagger.
        let (cgoffset, cgmask) = if ufs1 {
            (self.fs_old_cgoffset(), self.fs_old_cgmask().cast_unsigned())
        } else {
            (0, u32::MAX)
        };
        let Some(cgoffset) = u64::try_from(cgoffset).ok().filter(|&c| c <= 1 << 20) else {
            return bad("fs_old_cgoffset", format!("{cgoffset}"));
        };
        let max_stagger = cgoffset * max_masked(ncg, !cgmask);
        if dblkno.saturating_add(max_stagger) >= fpg {
            return bad(
                "fs_dblkno",
                format!(
                    "{dblkno} (staggered by up to {max_stagger}) leaves no data in a group of {fpg} fragments"
                ),
            );
        }
        let size = self.fs_size();
        if ufs1 && size > i64::from(i32::MAX) {
            return bad(
                "fs_size",
                format!(
                    "{size} fragments: UFS1's 32-bit block pointers address at most {}",
                    i32::MAX
                ),
            );
        }
        let Some(size) = u64::try_from(size)
            .ok()
            .filter(|&n| n > (ncg - 1) * fpg && n <= ncg * fpg)
        else {
            return bad(
                "fs_size",
                format!("{size} does not fit {ncg} groups of {fpg} fragments"),
            );
        };
        let dsize = self.fs_dsize();
        let Some(dsize) = u64::try_from(dsize).ok().filter(|&n| n > 0 && n <= size) else {
            return bad("fs_dsize", format!("{dsize} with fs_size {size}"));
        };
        let cssize = self.fs_cssize();
        let want_cssize = (ncg * Csum::SIZE as u64).div_ceil(fsize_u) * fsize_u;
        if u64::try_from(cssize).ok() != Some(want_cssize) {
            return bad("fs_cssize", format!("{cssize}, expected {want_cssize}"));
        }
        let cssize = want_cssize;
        let csaddr = self.fs_csaddr();
        let csfrags = cssize.div_ceil(fsize_u);
        let Some(csaddr) = u64::try_from(csaddr)
            .ok()
            .filter(|&a| a.saturating_add(csfrags) <= size)
        else {
            return bad(
                "fs_csaddr",
                format!("{csaddr} with {csfrags} fragments is outside the file system"),
            );
        };
        // The summary area lies in one group's data area.
        let cgc = csaddr / fpg;
        let stagger = if ufs1 {
            cgoffset * (cgc & u64::from(!cgmask))
        } else {
            0
        };
        if csaddr < cgc * fpg + stagger + dblkno || (csaddr + csfrags) / fpg > cgc {
            return bad(
                "fs_csaddr",
                format!("{csaddr} is not in one group's data area"),
            );
        }
        let maxcontig = self.fs_maxcontig();
        let Some(maxcontig_u) = u64::try_from(maxcontig)
            .ok()
            .filter(|&m| m >= 1 && m <= 256.max(1_048_576 / bsize_u))
        else {
            return bad("fs_maxcontig", format!("{maxcontig}"));
        };
        let contigsumsize = self.fs_contigsumsize();
        // UFS1 file systems older than FreeBSD's clustering (4.4BSD-Lite)
        // have no cluster maps whatever their maxcontig.
        if contigsumsize != maxcontig.min(16) && !(contigsumsize == 0 && (maxcontig == 1 || ufs1)) {
            return bad(
                "fs_contigsumsize",
                format!("{contigsumsize} with maxcontig {maxcontig}"),
            );
        }
        let Some(minfree) = u64::try_from(self.fs_minfree()).ok().filter(|&m| m <= 99) else {
            return bad("fs_minfree", format!("{}", self.fs_minfree()));
        };
        let Some(maxbpg) = u64::try_from(self.fs_maxbpg()).ok().filter(|&m| m >= 1) else {
            return bad("fs_maxbpg", format!("{}", self.fs_maxbpg()));
        };
        let metaspace = self.fs_metaspace();
        let Some(metaspace) = u64::try_from(metaspace).ok().filter(|&m| m < fpg) else {
            return bad("fs_metaspace", format!("{metaspace}"));
        };
        let (old_cpg, old_nrpos) = if ufs1 {
            (self.fs_old_cpg(), self.fs_old_nrpos())
        } else {
            (0, 0)
        };
        let old = (u64::try_from(old_cpg), u64::try_from(old_nrpos));
        let (Ok(old_cpg_u), Ok(old_nrpos_u)) = old else {
            return bad(
                "fs_old_cpg",
                format!("{old_cpg} cylinders per group, {old_nrpos} rotational positions"),
            );
        };
        if ufs1 && (!(1..=(1 << 16)).contains(&old_cpg_u) || old_nrpos_u > 64) {
            return bad(
                "fs_old_cpg",
                format!("{old_cpg} cylinders per group, {old_nrpos} rotational positions"),
            );
        }
        let g = Geometry {
            v,
            old_cgoffset: cgoffset,
            old_cgmask: cgmask,
            old_cpg: old_cpg_u,
            old_nrpos: old_nrpos_u,
            bsize: bsize_u,
            fsize: fsize_u,
            frag: frag_u,
            bshift,
            fshift,
            fragshift,
            ncg,
            ipg,
            fpg,
            inopb,
            nindir,
            sblkno,
            cblkno,
            iblkno,
            dblkno,
            size,
            dsize,
            cssize,
            csaddr,
            cgsize: cgsize_u,
            contigsumsize: u64::try_from(contigsumsize).unwrap_or(0),
            maxcontig: maxcontig_u,
            maxbpg,
            minfree,
            sblockloc: sbloc,
            metaspace,
            maxfilesize: if ufs1 {
                // 32-bit block addresses: FreeBSD's kernel caps UFS1 files
                // at 2^31 blocks less a byte (ffs_oldfscompat_read), its
                // fsck at 2^30 (chkfilesize); the lower one holds for both.
                let cap = (1u64 << 30) * bsize_u - 1;
                match self.fs_maxfilesize() {
                    0 => cap,
                    m => m.min(cap),
                }
            } else {
                self.fs_maxfilesize()
            },
        };
        // The cg block must hold the header and the maps it describes.
        let need = g.cg_map_bytes();
        if need > cgsize_u {
            return bad(
                "fs_cgsize",
                format!("{cgsize} is smaller than the {need} bytes its maps need"),
            );
        }
        // The last group must hold its own metadata.
        if g.cgdmin(ncg - 1) > g.size {
            return bad(
                "fs_size",
                format!(
                    "{} leaves the last group no room for its inodes (they end at {})",
                    g.size,
                    g.cgdmin(ncg - 1)
                ),
            );
        }
        Ok(g)
    }
}

/// Where Mac OS X's UFS keeps its volume label (`APPLEUFS_LABEL_OFFSET`,
/// NetBSD `sys/ufs/ufs/ufs_bswap.h`/`dir.h`), 1024 bytes before the UFS1
/// superblock, and the label's magic "LABL" (big-endian).
pub const APPLEUFS_LABEL_OFFSET: u64 = 7168;
pub const APPLEUFS_LABEL_MAGIC: u32 = 0x4c41_424c;

/// Does `b` (the bytes at [`APPLEUFS_LABEL_OFFSET`]) hold an Apple UFS
/// volume label? Such a file system keeps its directories in 1024-byte
/// blocks (`APPLEUFS_DIRBLKSIZ`), not the 512 of every BSD.
pub fn is_apple_ufs_label(b: &[u8]) -> bool {
    b.len() >= 4 && Endian::Big.get_u32(b, 0) == APPLEUFS_LABEL_MAGIC
}

/// The recovery record FreeBSD's newfs leaves in the 20 bytes before the
/// UFS2 superblock (`struct fsrecovery`, sys/ufs/ffs/fs.h): enough geometry
/// to find the backup superblocks when every standard copy is lost. Its
/// fields are in the file system's byte order, which its magic tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsRecovery {
    pub fsbtodb: i32,
    pub sblkno: i32,
    pub fpg: i32,
    pub ncg: u32,
}

impl FsRecovery {
    /// Bytes of the record; it ends where the UFS2 superblock begins.
    pub const SIZE: usize = 20;

    /// The record in `b` (20 bytes), if it carries the UFS2 magic in
    /// either byte order.
    pub fn parse(b: &[u8]) -> Option<FsRecovery> {
        if b.len() < Self::SIZE {
            return None;
        }
        let e = [Endian::Little, Endian::Big]
            .into_iter()
            .find(|e| e.get_u32(b, 0) == FS_UFS2_MAGIC)?;
        Some(FsRecovery {
            fsbtodb: e.get_i32(b, 4),
            sblkno: e.get_i32(b, 8),
            fpg: e.get_i32(b, 12),
            ncg: e.get_u32(b, 16),
        })
    }

    /// The record's bytes in byte order `e`.
    pub fn encode(&self, e: Endian) -> [u8; Self::SIZE] {
        let mut r = [0u8; Self::SIZE];
        e.set_u32(&mut r, 0, FS_UFS2_MAGIC);
        e.set_i32(&mut r, 4, self.fsbtodb);
        e.set_i32(&mut r, 8, self.sblkno);
        e.set_i32(&mut r, 12, self.fpg);
        e.set_u32(&mut r, 16, self.ncg);
        r
    }
}

/// The largest `c & m` for `c` in `0..n` (the furthest a group's metadata
/// is staggered).
fn max_masked(n: u64, m: u32) -> u64 {
    let m = m as u64;
    if n > m {
        // Some c below n has every bit of m (m itself).
        return m;
    }
    (0..n).map(|c| c & m).max().unwrap_or(0)
}

fn cstr(b: &[u8]) -> String {
    let n = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..n]).into_owned()
}

/// Validated geometry of a UFS1 or UFS2 file system. All addresses are in
/// fragments from the start of the file system unless named otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    /// Format and byte order.
    pub v: Variant,
    /// UFS1's stagger of group metadata (`fs_old_cgoffset`, `fs_old_cgmask`);
    /// 0 and all ones (no stagger) for UFS2.
    pub old_cgoffset: u64,
    pub old_cgmask: u32,
    /// UFS1's cylinders per group and rotational positions, which size the
    /// old tables of its groups (0 for UFS2).
    pub old_cpg: u64,
    pub old_nrpos: u64,
    pub bsize: u64,
    pub fsize: u64,
    pub frag: u64,
    pub bshift: u32,
    pub fshift: u32,
    pub fragshift: u32,
    pub ncg: u64,
    pub ipg: u64,
    pub fpg: u64,
    pub inopb: u64,
    pub nindir: u64,
    pub sblkno: u64,
    pub cblkno: u64,
    pub iblkno: u64,
    pub dblkno: u64,
    pub size: u64,
    pub dsize: u64,
    pub cssize: u64,
    pub csaddr: u64,
    pub cgsize: u64,
    pub contigsumsize: u64,
    pub maxcontig: u64,
    pub maxbpg: u64,
    pub minfree: u64,
    pub sblockloc: u64,
    pub metaspace: u64,
    pub maxfilesize: u64,
}

impl Geometry {
    /// First fragment of cylinder group `c` (`cgbase`).
    #[inline]
    pub fn cgbase(&self, c: u64) -> u64 {
        self.fpg * c
    }
    /// Where group `c`'s metadata area begins (`cgstart`): its base, moved
    /// in UFS1 by the stagger of old disks (`fs_old_cgoffset` per step of
    /// `c & ~fs_old_cgmask`). Fragments of a group before its backup
    /// superblock are data (group 0's hold the boot area).
    #[inline]
    pub fn cgstart(&self, c: u64) -> u64 {
        self.cgbase(c) + self.old_cgoffset * (c & !(self.old_cgmask as u64))
    }
    /// Backup superblock of group `c` (`cgsblock`).
    #[inline]
    pub fn cgsblock(&self, c: u64) -> u64 {
        self.cgstart(c) + self.sblkno
    }
    /// Cylinder group block of group `c` (`cgtod`).
    #[inline]
    pub fn cgtod(&self, c: u64) -> u64 {
        self.cgstart(c) + self.cblkno
    }
    /// First inode block of group `c` (`cgimin`).
    #[inline]
    pub fn cgimin(&self, c: u64) -> u64 {
        self.cgstart(c) + self.iblkno
    }
    /// First data fragment after group `c`'s metadata (`cgdmin`).
    #[inline]
    pub fn cgdmin(&self, c: u64) -> u64 {
        self.cgstart(c) + self.dblkno
    }
    /// The fragments of group `c` that are never data, relative to the
    /// file system: the boot area, superblock copy, group block and inode
    /// blocks (`[cgbase, cgdmin)` in group 0, `[cgsblock, cgdmin)` in the
    /// others; fsck's pass 1 reserves the same).
    pub fn cg_meta_range(&self, c: u64) -> std::ops::Range<u64> {
        let start = if c == 0 {
            self.cgbase(0)
        } else {
            self.cgsblock(c)
        };
        start..self.cgdmin(c)
    }
    /// Bytes of an on-disk inode.
    #[inline]
    pub fn dinode_size(&self) -> usize {
        self.v.dinode_size()
    }
    /// Longest symlink kept in the inode.
    #[inline]
    pub fn maxsymlinklen(&self) -> usize {
        self.v.maxsymlinklen()
    }
    /// Are inode blocks initialised lazily (`cg_initediblk`, UFS2), or all
    /// by newfs (UFS1)?
    #[inline]
    pub fn lazy_inodes(&self) -> bool {
        !self.v.is_ufs1()
    }
    /// Number of fragments in group `c` (the last may be short).
    pub fn cg_nfrags(&self, c: u64) -> u64 {
        if c + 1 == self.ncg {
            self.size - self.cgbase(c)
        } else {
            self.fpg
        }
    }
    /// Group holding fragment `d` (`dtog`).
    pub fn dtog(&self, d: u64) -> u64 {
        d / self.fpg
    }
    /// Offset of fragment `d` inside its group (`dtogd`).
    pub fn dtogd(&self, d: u64) -> u64 {
        d % self.fpg
    }
    /// Group holding inode `ino` (`ino_to_cg`).
    pub fn ino_to_cg(&self, ino: u64) -> u64 {
        ino / self.ipg
    }
    /// Fragment address of the block holding inode `ino` (`ino_to_fsba`).
    pub fn ino_to_fsba(&self, ino: u64) -> u64 {
        self.cgimin(self.ino_to_cg(ino)) + ((ino % self.ipg) / self.inopb) * self.frag
    }
    /// Index of inode `ino` inside its block (`ino_to_fsbo`).
    pub fn ino_to_fsbo(&self, ino: u64) -> u64 {
        ino % self.inopb
    }
    /// Total number of inodes.
    pub fn ninodes(&self) -> u64 {
        self.ncg * self.ipg
    }
    /// Byte offset of fragment `f`.
    pub fn frag_to_bytes(&self, f: u64) -> u64 {
        f << self.fshift
    }
    /// Logical block of byte offset `off` (`lblkno`).
    pub fn lblkno(&self, off: u64) -> u64 {
        off >> self.bshift
    }
    /// Offset within its block (`blkoff`).
    pub fn blkoff(&self, off: u64) -> u64 {
        off & (self.bsize - 1)
    }
    /// Bytes rounded up to fragments (`fragroundup`).
    pub fn fragroundup(&self, n: u64) -> u64 {
        n.div_ceil(self.fsize) * self.fsize
    }
    /// Bytes rounded up to blocks (`blkroundup`).
    pub fn blkroundup(&self, n: u64) -> u64 {
        n.div_ceil(self.bsize) * self.bsize
    }
    /// Number of fragments covering `n` bytes (`numfrags` of a rounded size).
    pub fn numfrags(&self, n: u64) -> u64 {
        n.div_ceil(self.fsize)
    }
    /// Size of the piece of logical block `lbn` of a file of `size` bytes
    /// (`sblksize`): a whole block, or fragments for the tail of a small file.
    pub fn blksize(&self, size: u64, lbn: u64) -> u64 {
        if lbn >= crate::UFS_NDADDR as u64 || size >= (lbn + 1) << self.bshift {
            self.bsize
        } else {
            self.fragroundup(self.blkoff(size))
        }
    }
    /// Is fragment `f` aligned to a block?
    pub fn is_block_aligned(&self, f: u64) -> bool {
        f.is_multiple_of(self.frag)
    }
    /// Bytes the cg header and maps take; must fit in `cgsize`.
    pub fn cg_map_bytes(&self) -> u64 {
        let old_tables = if self.v.is_ufs1() {
            4 * self.old_cpg + 2 * self.old_cpg * self.old_nrpos
        } else {
            0
        };
        let mut n =
            CG_HEADER_SIZE as u64 + old_tables + self.ipg.div_ceil(8) + self.fpg.div_ceil(8);
        if self.contigsumsize > 0 {
            n = n.div_ceil(4) * 4 + self.contigsumsize * 4 + (self.fpg / self.frag).div_ceil(8);
        }
        n
    }
    /// Largest file size the file system allows (`fs_maxfilesize`, capped
    /// for UFS1 as FreeBSD caps it when it reads the superblock).
    pub fn max_file_size(&self) -> u64 {
        self.maxfilesize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A UFS1 superblock as FreeBSD 4 wrote it: the wide fields unset
    /// (`fs_maxbsize` holding old rotational data), flags in byte 211.
    fn freebsd4_ufs1(e: Endian) -> Superblock {
        let mut sb = Superblock::zeroed_in(e);
        sb.set_fs_magic(FS_UFS1_MAGIC);
        sb.set_fs_bsize(16384);
        sb.set_fs_old_flags(u8::try_from(FS_DOSOFTDEP).unwrap());
        sb.set_fs_maxbsize(-1);
        sb.set_fs_old_time(1_000_000_000);
        sb.set_fs_old_size(4096);
        sb.set_fs_old_dsize(4000);
        sb.set_fs_old_csaddr(40);
        sb.set_fs_old_cstotal(Csum {
            cs_ndir: 3,
            cs_nbfree: 400,
            cs_nifree: 500,
            cs_nffree: 7,
        });
        sb
    }

    #[test]
    fn a_freebsd4_ufs1_superblock_gets_its_wide_fields_as_freebsd_gives_them() {
        for e in [Endian::Little, Endian::Big] {
            let mut sb = freebsd4_ufs1(e);
            sb.compat_read(SBLOCK_UFS1);
            assert_eq!(
                sb.fs_flags(),
                FS_DOSOFTDEP,
                "{e:?}: flags moved out of byte 211"
            );
            assert_ne!(sb.fs_old_flags() as i32 & FS_FLAGS_UPDATED, 0);
            assert_eq!(sb.fs_sblockloc(), i64::try_from(SBLOCK_UFS1).unwrap());
            assert_eq!(sb.fs_maxbsize(), 16384);
            assert_eq!(
                (sb.fs_time(), sb.fs_size(), sb.fs_dsize(), sb.fs_csaddr()),
                (1_000_000_000, 4096, 4000, 40)
            );
            let t = sb.fs_cstotal();
            assert_eq!(
                (t.cs_ndir, t.cs_nbfree, t.cs_nifree, t.cs_nffree),
                (3, 400, 500, 7)
            );
            assert_eq!((sb.fs_avgfilesize(), sb.fs_avgfpdir()), (AVFILESIZ, AFPDIR));
            // Written back, the old fields follow the wide ones.
            sb.set_fs_time(1_700_000_000);
            let mut t = sb.fs_cstotal();
            t.cs_nbfree = 399;
            sb.set_fs_cstotal(t);
            let back = Superblock::from_bytes(&sb.to_disk_bytes()).unwrap();
            assert_eq!(back.byte_order(), e);
            assert_eq!(back.fs_old_time(), 1_700_000_000);
            assert_eq!(back.fs_old_cstotal().cs_nbfree, 399);
            // Read again, nothing is converted a second time.
            let mut again = back.clone();
            again.compat_read(SBLOCK_UFS1);
            assert_eq!(again.fs_time(), 1_700_000_000);
        }
    }

    #[test]
    fn superblocks_in_either_order_are_recognised_and_bad_ones_named() {
        for (m, want) in [
            (FS_UFS2_MAGIC, Some((Endian::Little, FS_UFS2_MAGIC))),
            (
                FS_UFS1_MAGIC.swap_bytes(),
                Some((Endian::Big, FS_UFS1_MAGIC)),
            ),
            (FS_BAD_MAGIC.swap_bytes(), Some((Endian::Big, FS_BAD_MAGIC))),
            (0x1234_5678, None),
        ] {
            let mut b = vec![0u8; SBLOCKSIZE];
            Endian::Little.set_u32(&mut b, FS_MAGIC_OFF, m);
            assert_eq!(Superblock::sniff(&b), want, "{m:#x}");
        }
        let mut b = vec![0u8; SBLOCKSIZE];
        Endian::Big.set_u32(&mut b, FS_MAGIC_OFF, FS_BAD_MAGIC);
        let e = Superblock::from_bytes(&b).unwrap_err().to_string();
        assert!(e.contains("newfs did not complete"), "{e}");
        assert!(Superblock::from_bytes(&[0u8; 100]).is_err());
    }

    #[test]
    fn staggered_ufs1_groups_place_their_metadata_as_cgstart_says() {
        let g = Geometry {
            v: Variant::UFS1_LE,
            old_cgoffset: 32,
            old_cgmask: 0xffff_fff0,
            old_cpg: 16,
            old_nrpos: 8,
            bsize: 8192,
            fsize: 1024,
            frag: 8,
            bshift: 13,
            fshift: 10,
            fragshift: 3,
            ncg: 20,
            ipg: 1024,
            fpg: 16384,
            inopb: 64,
            nindir: 2048,
            sblkno: 16,
            cblkno: 24,
            iblkno: 32,
            dblkno: 160,
            size: 20 * 16384,
            dsize: 0,
            cssize: 1024,
            csaddr: 160,
            cgsize: 4096,
            contigsumsize: 0,
            maxcontig: 1,
            maxbpg: 2048,
            minfree: 8,
            sblockloc: 8192,
            metaspace: 0,
            maxfilesize: 1 << 40,
        };
        // Group 0 starts at its base; group 3 is three steps in, group 17
        // one (17 & 15), group 16 none.
        assert_eq!(g.cgstart(0), 0);
        assert_eq!(g.cgstart(3), 3 * 16384 + 3 * 32);
        assert_eq!(g.cgstart(16), 16 * 16384);
        assert_eq!(g.cgstart(17), 17 * 16384 + 32);
        assert_eq!(g.cgsblock(3), g.cgstart(3) + 16);
        assert_eq!(g.cgdmin(3), g.cgstart(3) + 160);
        assert_eq!(g.ino_to_fsba(3 * 1024), g.cgstart(3) + 32);
        // Before a group's backup superblock lies data, except in group 0.
        assert_eq!(g.cg_meta_range(0), 0..160);
        assert_eq!(g.cg_meta_range(3), g.cgsblock(3)..g.cgdmin(3));
        // The old tables: 4 bytes per cylinder and 2 per cylinder and
        // rotational position, before the inode map.
        assert_eq!(g.cg_map_bytes(), 168 + 16 * 4 + 16 * 8 * 2 + 128 + 2048);
        assert!(!g.lazy_inodes());
        assert_eq!(g.maxsymlinklen(), 60);
    }
}
