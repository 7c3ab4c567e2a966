//! The superblock (`struct fs`, 1376 bytes) and the geometry derived from it.
//!
//! Invariants: a [`Superblock`] always holds exactly `SBSIZE_STRUCT` bytes and
//! round-trips them unchanged except for fields explicitly set. A
//! [`Geometry`] exists only for a superblock that passed [`Superblock::validate`],
//! so its arithmetic (addresses of cylinder groups, inodes, maps) cannot
//! overflow or point outside the file system.
//!
//! Field offsets: FreeBSD `sys/ufs/ffs/fs.h` (amd64 layout; `fs_ocsp` is 15
//! pointers). Validity rules: `validate_sblock`, sys/ufs/ffs/ffs_subr.c.
use crate::bytes::*;
use crate::error::FormatError;
use crate::*;

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
    pub fn read(b: &[u8], off: usize) -> Csum {
        Csum {
            cs_ndir: get_i32(b, off),
            cs_nbfree: get_i32(b, off + 4),
            cs_nifree: get_i32(b, off + 8),
            cs_nffree: get_i32(b, off + 12),
        }
    }
    pub fn write(&self, b: &mut [u8], off: usize) {
        set_i32(b, off, self.cs_ndir);
        set_i32(b, off + 4, self.cs_nbfree);
        set_i32(b, off + 8, self.cs_nifree);
        set_i32(b, off + 12, self.cs_nffree);
    }
}

pub const FS_CSTOTAL_OFF: usize = 1008;
pub const FS_OLD_CSTOTAL_OFF: usize = 192;
pub const FS_CKHASH_OFF: usize = 1304;
pub const FS_FSMNT_OFF: usize = 212;
pub const FS_VOLNAME_OFF: usize = 680;
pub const FS_SNAPINUM_OFF: usize = 1116;

/// The superblock as its raw bytes with typed accessors.
#[derive(Clone, PartialEq, Eq)]
pub struct Superblock {
    raw: Vec<u8>,
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
    /// An all-zero superblock, to be filled in by newfs.
    pub fn zeroed() -> Self {
        Superblock {
            raw: vec![0; SBSIZE_STRUCT],
        }
    }

    /// Takes the first `SBSIZE_STRUCT` bytes of `b` without validating them.
    /// Refuses UFS1 and byte-swapped images with `Unsupported`.
    pub fn from_bytes(b: &[u8]) -> Result<Self, FormatError> {
        if b.len() < SBSIZE_STRUCT {
            return Err(FormatError::corrupt("superblock", "short read"));
        }
        let sb = Superblock {
            raw: b[..SBSIZE_STRUCT].to_vec(),
        };
        let m = sb.fs_magic();
        if m == FS_UFS2_MAGIC {
            return Ok(sb);
        }
        if m == FS_UFS1_MAGIC {
            return Err(FormatError::Unsupported(
                "UFS1 file system (only UFS2 is supported)".into(),
            ));
        }
        if m == FS_UFS2_MAGIC.swap_bytes() || m == FS_UFS1_MAGIC.swap_bytes() {
            return Err(FormatError::Unsupported(
                "big-endian UFS image (only little-endian UFS2 is supported)".into(),
            ));
        }
        if m == FS_BAD_MAGIC {
            return Err(FormatError::corrupt(
                "superblock",
                "newfs did not complete (FS_BAD_MAGIC)",
            ));
        }
        Err(FormatError::corrupt(
            "superblock",
            format!("bad magic {m:#x}"),
        ))
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.raw
    }

    /// Bytes to write at the superblock location: the structure padded with
    /// zeros to `fs_sbsize`, with the check-hash updated when enabled.
    pub fn to_disk_bytes(&self) -> Vec<u8> {
        let mut s = self.clone();
        s.update_ckhash();
        let mut out = s.raw.clone();
        let sbsize = (self.fs_sbsize().max(SBSIZE_STRUCT as i32) as usize).min(SBLOCKSIZE);
        out.resize(sbsize, 0);
        out
    }

    /// Computes the superblock check-hash over `fs_sbsize` bytes.
    pub fn compute_ckhash(&self) -> u32 {
        let sbsize = (self.fs_sbsize().max(SBSIZE_STRUCT as i32) as usize).min(SBLOCKSIZE);
        let mut buf = self.raw.clone();
        buf.resize(sbsize, 0);
        crate::ckhash::ckhash_with_zeroed_field(&buf, FS_CKHASH_OFF)
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
        let b = &self.raw;
        let o = FS_CSTOTAL_OFF;
        CsumTotal {
            cs_ndir: get_i64(b, o),
            cs_nbfree: get_i64(b, o + 8),
            cs_nifree: get_i64(b, o + 16),
            cs_nffree: get_i64(b, o + 24),
            cs_numclusters: get_i64(b, o + 32),
        }
    }
    pub fn set_fs_cstotal(&mut self, t: CsumTotal) {
        let o = FS_CSTOTAL_OFF;
        let b = &mut self.raw;
        set_i64(b, o, t.cs_ndir);
        set_i64(b, o + 8, t.cs_nbfree);
        set_i64(b, o + 16, t.cs_nifree);
        set_i64(b, o + 24, t.cs_nffree);
        set_i64(b, o + 32, t.cs_numclusters);
    }
    pub fn fs_old_cstotal(&self) -> Csum {
        Csum::read(&self.raw, FS_OLD_CSTOTAL_OFF)
    }
    pub fn set_fs_old_cstotal(&mut self, c: Csum) {
        c.write(&mut self.raw, FS_OLD_CSTOTAL_OFF)
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
        get_u32(&self.raw, FS_SNAPINUM_OFF + 4 * i)
    }
    pub fn set_fs_snapinum(&mut self, i: usize, ino: u32) {
        let o = FS_SNAPINUM_OFF + 4 * i;
        self.raw[o..o + 4].copy_from_slice(&ino.to_le_bytes());
    }

    /// Checks the rules FreeBSD's `validate_sblock` enforces (plus the ones
    /// our arithmetic relies on) and returns the derived geometry.
    /// `loc` is the byte offset the superblock was read from.
    pub fn validate(&self, loc: u64) -> Result<Geometry, FormatError> {
        let bad = |field: &str, detail: String| {
            Err(FormatError::corrupt(format!("superblock {field}"), detail))
        };
        if self.fs_magic() != FS_UFS2_MAGIC {
            return bad(
                "fs_magic",
                format!("{:#x} is not the UFS2 magic", self.fs_magic()),
            );
        }
        let sblockloc = self.fs_sblockloc();
        if loc == SBLOCK_UFS2 || loc == SBLOCK_UFS1 {
            if sblockloc as u64 != loc {
                return bad(
                    "fs_sblockloc",
                    format!("{sblockloc} but superblock found at {loc}"),
                );
            }
        } else if sblockloc as u64 != SBLOCK_UFS2 && sblockloc as u64 != SBLOCK_UFS1 {
            return bad(
                "fs_sblockloc",
                format!("{sblockloc} is not a standard location"),
            );
        }
        let bsize = self.fs_bsize();
        let fsize = self.fs_fsize();
        if !(MINBSIZE as i32..=MAXBSIZE as i32).contains(&bsize)
            || !(bsize as u32).is_power_of_two()
        {
            return bad(
                "fs_bsize",
                format!("{bsize} is not a power of two in [4096, 65536]"),
            );
        }
        if fsize < 512
            || fsize > bsize
            || !(fsize as u32).is_power_of_two()
            || bsize / fsize > MAXFRAG as i32
        {
            return bad("fs_fsize", format!("{fsize} with block size {bsize}"));
        }
        let frag = bsize / fsize;
        if self.fs_frag() != frag {
            return bad(
                "fs_frag",
                format!("{} but bsize/fsize is {frag}", self.fs_frag()),
            );
        }
        let bshift = bsize.trailing_zeros() as i32;
        let fshift = fsize.trailing_zeros() as i32;
        let fragshift = frag.trailing_zeros() as i32;
        let checks: [(&str, i64, i64); 11] = [
            ("fs_bshift", self.fs_bshift() as i64, bshift as i64),
            ("fs_fshift", self.fs_fshift() as i64, fshift as i64),
            ("fs_fragshift", self.fs_fragshift() as i64, fragshift as i64),
            ("fs_bmask", self.fs_bmask() as i64, !(bsize - 1) as i64),
            ("fs_fmask", self.fs_fmask() as i64, !(fsize - 1) as i64),
            ("fs_qbmask", self.fs_qbmask(), bsize as i64 - 1),
            ("fs_qfmask", self.fs_qfmask(), fsize as i64 - 1),
            ("fs_nindir", self.fs_nindir() as i64, (bsize / 8) as i64),
            (
                "fs_inopb",
                self.fs_inopb() as i64,
                (bsize / DINODE_SIZE as i32) as i64,
            ),
            (
                "fs_fsbtodb",
                self.fs_fsbtodb() as i64,
                (fsize / 512).trailing_zeros() as i64,
            ),
            (
                "fs_maxsymlinklen",
                self.fs_maxsymlinklen() as i64,
                MAXSYMLINKLEN_UFS2 as i64,
            ),
        ];
        for (name, have, want) in checks {
            if have != want {
                return bad(name, format!("{have}, expected {want}"));
            }
        }
        let ncg = self.fs_ncg() as u64;
        let ipg = self.fs_ipg() as u64;
        let fpg = self.fs_fpg();
        if !(1..=(1 << 31)).contains(&ncg) {
            return bad("fs_ncg", format!("{ncg}"));
        }
        let inopb = (bsize / DINODE_SIZE as i32) as u64;
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
        if fpg < 3 * frag || (fpg % frag != 0 && ncg != 1) {
            return bad(
                "fs_fpg",
                format!("{fpg} is not a multiple of {frag} (and at least 3 blocks)"),
            );
        }
        let fpg = fpg as u64;
        let frag_u = frag as u64;
        // Fixed parts of every cylinder group, in fragments.
        let sblkno = self.fs_sblkno() as i64;
        let cblkno = self.fs_cblkno() as i64;
        let iblkno = self.fs_iblkno() as i64;
        let dblkno = self.fs_dblkno() as i64;
        let want_sblkno = (((sblockloc as u64 + SBLOCKSIZE as u64).div_ceil(fsize as u64))
            .div_ceil(frag_u)
            * frag_u) as i64;
        if sblkno != want_sblkno {
            return bad("fs_sblkno", format!("{sblkno}, expected {want_sblkno}"));
        }
        let sbsize = self.fs_sbsize();
        if sbsize < SBSIZE_STRUCT as i32
            || sbsize > SBLOCKSIZE as i32
            || sbsize % fsize.min(SBLOCKSIZE as i32) != 0 && sbsize % 512 != 0
        {
            return bad("fs_sbsize", format!("{sbsize}"));
        }
        let want_cblkno =
            sblkno + ((SBLOCKSIZE as u64).div_ceil(fsize as u64).div_ceil(frag_u) * frag_u) as i64;
        if cblkno != want_cblkno {
            return bad("fs_cblkno", format!("{cblkno}, expected {want_cblkno}"));
        }
        let cgsize = self.fs_cgsize();
        if cgsize < CG_HEADER_SIZE as i32 || cgsize > bsize {
            return bad("fs_cgsize", format!("{cgsize} is not within [168, bsize]"));
        }
        let want_iblkno = cblkno
            + ((cgsize.max(0) as u64)
                .div_ceil(fsize as u64)
                .div_ceil(frag_u)
                * frag_u) as i64;
        if iblkno != want_iblkno {
            return bad("fs_iblkno", format!("{iblkno}, expected {want_iblkno}"));
        }
        let want_dblkno = iblkno + (ipg / inopb) as i64 * frag as i64;
        if dblkno != want_dblkno {
            return bad("fs_dblkno", format!("{dblkno}, expected {want_dblkno}"));
        }
        if (dblkno as u64) >= fpg {
            return bad(
                "fs_dblkno",
                format!("{dblkno} leaves no data in a group of {fpg} fragments"),
            );
        }
        let size = self.fs_size();
        if size <= 0 || (size as u64) <= (ncg - 1) * fpg || (size as u64) > ncg * fpg {
            return bad(
                "fs_size",
                format!("{size} does not fit {ncg} groups of {fpg} fragments"),
            );
        }
        let dsize = self.fs_dsize();
        if dsize <= 0 || dsize > size {
            return bad("fs_dsize", format!("{dsize} with fs_size {size}"));
        }
        let cssize = self.fs_cssize() as i64;
        let want_cssize = ((ncg * Csum::SIZE as u64).div_ceil(fsize as u64) * fsize as u64) as i64;
        if cssize != want_cssize {
            return bad("fs_cssize", format!("{cssize}, expected {want_cssize}"));
        }
        let csaddr = self.fs_csaddr();
        let csfrags = (cssize as u64).div_ceil(fsize as u64);
        if csaddr < 0 || (csaddr as u64) + csfrags > size as u64 {
            return bad(
                "fs_csaddr",
                format!("{csaddr} with {csfrags} fragments is outside the file system"),
            );
        }
        // The summary area lies in one group's data area.
        let cgc = csaddr as u64 / fpg;
        if (csaddr as u64) < cgc * fpg + dblkno as u64 || (csaddr as u64 + csfrags) / fpg > cgc {
            return bad(
                "fs_csaddr",
                format!("{csaddr} is not in one group's data area"),
            );
        }
        let maxcontig = self.fs_maxcontig();
        if maxcontig < 1 || maxcontig > 256.max(1048576 / bsize) {
            return bad("fs_maxcontig", format!("{maxcontig}"));
        }
        let contigsumsize = self.fs_contigsumsize();
        if contigsumsize != maxcontig.min(16) && !(contigsumsize == 0 && maxcontig == 1) {
            return bad(
                "fs_contigsumsize",
                format!("{contigsumsize} with maxcontig {maxcontig}"),
            );
        }
        if self.fs_minfree() < 0 || self.fs_minfree() > 99 {
            return bad("fs_minfree", format!("{}", self.fs_minfree()));
        }
        if self.fs_maxbpg() < 1 {
            return bad("fs_maxbpg", format!("{}", self.fs_maxbpg()));
        }
        let metaspace = self.fs_metaspace();
        if metaspace < 0 || metaspace as u64 >= fpg {
            return bad("fs_metaspace", format!("{metaspace}"));
        }
        let g = Geometry {
            bsize: bsize as u64,
            fsize: fsize as u64,
            frag: frag_u,
            bshift: bshift as u32,
            fshift: fshift as u32,
            fragshift: fragshift as u32,
            ncg,
            ipg,
            fpg,
            inopb,
            nindir: (bsize / 8) as u64,
            sblkno: sblkno as u64,
            cblkno: cblkno as u64,
            iblkno: iblkno as u64,
            dblkno: dblkno as u64,
            size: size as u64,
            dsize: dsize as u64,
            cssize: cssize as u64,
            csaddr: csaddr as u64,
            cgsize: cgsize as u64,
            contigsumsize: contigsumsize.max(0) as u64,
            maxcontig: maxcontig as u64,
            maxbpg: self.fs_maxbpg() as u64,
            minfree: self.fs_minfree() as u64,
            sblockloc: sblockloc as u64,
            metaspace: metaspace as u64,
            maxfilesize: self.fs_maxfilesize(),
        };
        // The cg block must hold the header and the maps it describes.
        let need = g.cg_map_bytes();
        if need > cgsize as u64 {
            return bad(
                "fs_cgsize",
                format!("{cgsize} is smaller than the {need} bytes its maps need"),
            );
        }
        Ok(g)
    }
}

fn cstr(b: &[u8]) -> String {
    let n = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..n]).into_owned()
}

/// Validated geometry of a UFS2 file system. All addresses are in
/// fragments from the start of the file system unless named otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
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
    /// First fragment of cylinder group `c` (`cgbase`; UFS2 has no stagger).
    pub fn cgbase(&self, c: u64) -> u64 {
        self.fpg * c
    }
    /// Backup superblock of group `c` (`cgsblock`).
    pub fn cgsblock(&self, c: u64) -> u64 {
        self.cgbase(c) + self.sblkno
    }
    /// Cylinder group block of group `c` (`cgtod`).
    pub fn cgtod(&self, c: u64) -> u64 {
        self.cgbase(c) + self.cblkno
    }
    /// First inode block of group `c` (`cgimin`).
    pub fn cgimin(&self, c: u64) -> u64 {
        self.cgbase(c) + self.iblkno
    }
    /// First data fragment of group `c` (`cgdmin`).
    pub fn cgdmin(&self, c: u64) -> u64 {
        self.cgbase(c) + self.dblkno
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
        let mut n = CG_HEADER_SIZE as u64 + self.ipg.div_ceil(8) + self.fpg.div_ceil(8);
        if self.contigsumsize > 0 {
            n = n.div_ceil(4) * 4 + self.contigsumsize * 4 + (self.fpg / self.frag).div_ceil(8);
        }
        n
    }
    /// Largest file size representable with this block size (UFS2).
    pub fn max_file_size(&self) -> u64 {
        self.maxfilesize
    }
}
