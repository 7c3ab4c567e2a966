//! newfs as library code: lays down an empty UFS2 or UFS1 file system, in
//! either byte order, the way FreeBSD 14's `newfs(8)`/`mkfs` does (`-O 1`
//! for UFS1; the byte order of a big-endian machine as NetBSD's newfs and
//! makefs offer it with `-B be`).
//!
//! What is produced (facts from FreeBSD's newfs/mkfs, re-implemented here):
//! - the geometry FreeBSD computes: fixed offsets of the backup superblock,
//!   cg block and inode area inside every group; a fragments-per-group /
//!   inodes-per-group search that keeps `CGSIZE` at most `bsize - 8` (so
//!   readers with the older, 8-byte-larger `struct cg` still accept it),
//!   grows groups until fewer than four would remain, and shrinks them until
//!   the last group can hold its own metadata;
//! - one backup superblock per group (written once, before the root
//!   directory exists, exactly as FreeBSD leaves them), the primary (byte
//!   65536 for UFS2, 8192 for UFS1) written first with `FS_BAD_MAGIC` and
//!   last with the real magic;
//! - every cylinder group initialised as `initcg` does: counters, fragment,
//!   cluster and inode maps, free-run and cluster summaries; in UFS2 the
//!   first `min(ipg, 2 * INOPB)` inodes written with random non-zero
//!   `di_gen`, in UFS1 every inode (UFS1 has no lazy initialisation);
//! - for UFS1, the values FreeBSD's `mkfs` gives the old fields (one
//!   cylinder per group, one rotational position, no stagger, `fs_old_*`
//!   copies of the size, data size, summary address, time and totals), no
//!   check-hashes (UFS2 only), groups whose old tables sit before the
//!   inode map and at most 32767 inodes per group (`cg_old_niblk` is
//!   16-bit); see docs/research/ufs1.md;
//! - `/` (inode 2) and, unless disabled, `/.snap` (inode 3, group operator,
//!   mode 0775, depth 1), each with one fragment holding one 512-byte chunk;
//! - the summary area at `fs_csaddr` and the recovery record in the 20 bytes
//!   before the primary superblock.
//!
//! Invariants:
//! - Nothing is written before the whole layout has been computed and the
//!   superblock has passed [`Superblock::validate`]; a parameter or geometry
//!   FreeBSD would refuse is reported as `ErrorKind::Invalid`, never a panic.
//! - The three copies of every counter (cg header, summary array, and
//!   `fs_cstotal` of the final primary superblock) agree, and every counter
//!   is derived from the maps it summarises (the same rebuild fsck's pass 5
//!   does), so the result checks clean.
//! - Only metadata is written: for each group its superblock copy, its cg
//!   block and its first inode blocks (all of them in UFS1); plus the two
//!   directory fragments, the summary area and the primary superblock. Data
//!   areas are never touched, so huge sparse images stay sparse.
//!
//! Deliberate differences from FreeBSD (all invisible to fsck and kernels):
//! - FreeBSD fixes some impossible size requests silently (raising the block
//!   size to the fragment size, the fragment size to `bsize / 8`); here they
//!   are errors. A zero `bsize`/`fsize` asks for FreeBSD's defaults.
//! - When taking blocks for the two directories FreeBSD does not update the
//!   cluster summary; here it is recounted (identical for all realistic
//!   sizes, correct when the free run of group 0 is short).
//! - Bytes 512.. of the directory fragments are zero (FreeBSD leaves stale
//!   buffer contents there); only `cg_initediblk` inodes are written (FreeBSD
//!   always writes two blocks, which spills past the inode area when a group
//!   has a single inode block); the last sector of the file system is not
//!   probed by a write.
use crate::dev::BlockDevice;
use crate::error::{Error, ErrorKind, Result};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::fmt::Write as _;
use ufs_format::bytes::{low_i32, low_u16, low_u32, to_i32, to_index, to_signed};
use ufs_format::dinode::{dt, IFDIR};
use ufs_format::sb::{Csum, CsumTotal};
use ufs_format::*;

/// Default block size (`DFL_BLKSIZE`).
pub const DFL_BLKSIZE: u64 = 32768;
/// Default fragment size (`DFL_FRAGSIZE`).
pub const DFL_FRAGSIZE: u64 = 4096;
/// Default minimum free space in percent (`MINFREE`).
pub const MINFREE: u64 = 8;
/// Largest I/O the default `maxcontig` is sized for (`MAXPHYS` on 64-bit
/// FreeBSD 14).
pub const MAXPHYS: u64 = 1 << 20;
/// Default fragments per inode (`NFPI`).
pub const NFPI: i64 = 2;
/// newfs keeps at least this many groups when it can (`MINCYLGRPS`).
pub const MINCYLGRPS: i64 = 4;
/// Bytes of a cg block kept free for readers with the older, larger
/// `struct cg` (`CGSIZEFUDGE`).
pub const CGSIZEFUDGE: i64 = 8;
/// "No limit" for fragments per group (`MAXBLKSPERCG`).
pub const MAXBLKSPERCG: u64 = 0x7fff_ffff;
/// Largest `fs_maxbsize` relative to the block size (`FS_MAXCONTIG`).
pub const FS_MAXCONTIG: i64 = 16;
/// Group id of "operator" on FreeBSD, the group of `/.snap`.
pub const OPERATOR_GID: u32 = 5;
/// The device sector size newfs works in (`DEV_BSIZE`; image files).
const SECTOR: i64 = 512;
/// Size of `struct fsrecovery`, stored just before the primary superblock.
const FSRECOVERY_SIZE: usize = ufs_format::sb::FsRecovery::SIZE;
/// `FS_FLAGS_UPDATED` as the 8-bit `fs_old_flags` holds it.
const OLD_FLAGS_UPDATED: u8 = 0x80;
const _: () = assert!(FS_FLAGS_UPDATED == OLD_FLAGS_UPDATED as i32);

/// Parameters of [`newfs`], named after the newfs(8) options. `Default` gives
/// FreeBSD 14's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewfsParams {
    /// Bytes of the file system (`-s`, here in bytes); `None` = whole device.
    /// A trailing partial fragment is not used.
    pub size: Option<u64>,
    /// Block size (`-b`), a power of two in [4096, 65536]. 0 = FreeBSD's
    /// default (`min(32768, 8 * fsize)`).
    pub bsize: u64,
    /// Fragment size (`-f`), a power of two in [512, bsize] with
    /// `bsize / fsize <= 8`. 0 = FreeBSD's default (`max(4096, bsize / 8)`).
    pub fsize: u64,
    /// Bytes of data space per inode (`-i`); `None` = 2 fragments per inode
    /// (more if the inode count would overflow 32 bits). FreeBSD may lower it
    /// so a cylinder group fits in one block (the summary says so).
    pub density: Option<u64>,
    /// Minimum free space in percent (`-m`), 0..=99.
    pub minfree: u64,
    /// `FS_OPTTIME` (0) or `FS_OPTSPACE` (1) (`-o`). As in newfs(8), time is
    /// changed to space when `minfree` is below 8.
    pub optim: i32,
    /// Expected average file size (`-g`).
    pub avgfilesize: u32,
    /// Expected files per directory (`-h`).
    pub avgfpdir: u32,
    /// Maximum blocks of one file per group (`-e`); `None` = `bsize / 8`.
    pub maxbpg: Option<u64>,
    /// Upper bound on the group size (`-c`). newfs(8) documents it as blocks
    /// per group, but FreeBSD compares it with the *fragment* count `fs_fpg`;
    /// this follows the code.
    pub maxblkspercg: Option<u64>,
    /// Soft updates (`-U`, sets `FS_DOSOFTDEP`).
    pub softupdates: bool,
    /// Fragments per group reserved for metadata (`-k`): `Some(0)` forces 0;
    /// values at least `fpg / 2`, and `None`, give the default (half of the
    /// minfree share of a group); others are rounded down to a block.
    pub metaspace: Option<u64>,
    /// Volume label (`-L`): letters, digits, `_` and `-`, at most 31 bytes.
    pub volname: String,
    /// Do not create `/.snap` (`-n`).
    pub no_snap: bool,
    /// Metadata check-hashes (superblock, cylinder groups, inodes); FreeBSD 14
    /// always enables them for UFS2.
    pub ckhash: bool,
    /// Creation time (seconds since the epoch) for reproducible images;
    /// `None` = now.
    pub time: Option<i64>,
    /// Seed for `fs_id[1]` and the inode generation numbers; `None` = entropy.
    pub seed: Option<u64>,
    /// UFS1 (`-O 1`) or UFS2 (`-O 2`, the default).
    pub format: Ufs,
    /// Byte order of every multi-byte field (`-B le|be`); little-endian by
    /// default, as on amd64.
    pub endian: Endian,
}

impl Default for NewfsParams {
    fn default() -> Self {
        NewfsParams {
            size: None,
            bsize: DFL_BLKSIZE,
            fsize: DFL_FRAGSIZE,
            density: None,
            minfree: MINFREE,
            optim: FS_OPTTIME,
            avgfilesize: AVFILESIZ,
            avgfpdir: AFPDIR,
            maxbpg: None,
            maxblkspercg: None,
            softupdates: false,
            metaspace: None,
            volname: String::new(),
            no_snap: false,
            ckhash: true,
            time: None,
            seed: None,
            format: Ufs::Ufs2,
            endian: Endian::Little,
        }
    }
}

impl NewfsParams {
    /// The format and byte order asked for.
    pub fn variant(&self) -> Variant {
        Variant::new(self.format, self.endian)
    }
}

/// What [`newfs`] made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewfsReport {
    /// Number of cylinder groups.
    pub ncg: u64,
    /// Fragments per group.
    pub fpg: u64,
    /// Inodes per group.
    pub ipg: u64,
    /// File system size in fragments (`fs_size`).
    pub size_frags: u64,
    pub bsize: u64,
    pub fsize: u64,
    /// Fragment addresses of the backup superblocks (`cgsblock(c)`), one per
    /// group. (The summary lists them in 512-byte sectors, as newfs does.)
    pub backups: Vec<u64>,
    /// newfs(8)'s report: adjustments made, the size line (without the
    /// device-name prefix newfs puts in front), the group line and the list
    /// of backup superblocks in sectors for `fsck_ffs -b`.
    pub summary: String,
}

fn invalid(msg: impl Into<String>) -> Error {
    Error::new(ErrorKind::Invalid, msg)
}

/// `v` for the superblock field `name` (a value of the computed layout, or
/// of a grown one in growfs), refused, never wrapped, when the field's
/// type cannot hold it. [`compute_layout`] and [`check_layout`] keep
/// newfs's values in range.
pub(crate) fn sb_field<T: TryFrom<V>, V: Copy + std::fmt::Display>(name: &str, v: V) -> Result<T> {
    T::try_from(v).map_err(|_| {
        invalid(format!(
            "{name} would be {v}, more than its superblock field holds"
        ))
    })
}

fn howmany(a: i64, b: i64) -> i64 {
    (a + b - 1) / b
}

fn roundup(a: i64, b: i64) -> i64 {
    howmany(a, b) * b
}

fn ilog2(v: i64) -> u32 {
    v.trailing_zeros()
}

/// `CGSIZE`: an upper bound of the bytes a cg block needs for its header
/// (168 bytes, plus the 4 bytes that keep the cluster summary aligned),
/// UFS1's old tables (a 32-bit and a 16-bit count for its one cylinder)
/// and maps, for a group of `fpg` fragments and `ipg` inodes.
fn cgsize_bound(ufs1: bool, fpg: i64, ipg: i64, fragshift: u32, contigsumsize: i64) -> i64 {
    let old_tables = if ufs1 { 4 + 2 } else { 0 };
    let mut n = to_signed(CG_HEADER_SIZE) + old_tables + 4 + howmany(ipg, 8) + howmany(fpg, 8);
    if contigsumsize > 0 {
        n += contigsumsize * 4 + howmany(fpg >> fragshift, 8);
    }
    n
}

/// The result of FreeBSD's geometry computation.
#[derive(Debug, Clone)]
struct Layout {
    v: Variant,
    bsize: i64,
    fsize: i64,
    frag: i64,
    bshift: u32,
    fshift: u32,
    fragshift: u32,
    fsbtodb: u32,
    size: i64,
    maxbsize: i64,
    maxcontig: i64,
    contigsumsize: i64,
    sblkno: i64,
    cblkno: i64,
    iblkno: i64,
    dblkno: i64,
    fpg: i64,
    ipg: i64,
    ncg: i64,
    cgsize: i64,
    cssize: i64,
    sbsize: i64,
    maxfilesize: u64,
    metaspace: i64,
    maxbpg: i64,
    minfree: i64,
    optim: i32,
    /// Messages newfs prints about adjustments, in order.
    notes: Vec<String>,
}

/// Checks the options that do not depend on the size and resolves the
/// default block and fragment sizes.
fn check_params(p: &NewfsParams) -> Result<(i64, i64)> {
    // Defaults as newfs(8) derives them: fragment 4096 (the sector size if
    // larger), block min(32768, 8 * fragment); a block size given alone
    // gets a fragment of at least bsize / 8.
    let fsize = if p.fsize != 0 {
        p.fsize
    } else {
        DFL_FRAGSIZE.max(p.bsize / MAXFRAG as u64)
    };
    let bsize = if p.bsize != 0 {
        p.bsize
    } else {
        DFL_BLKSIZE.min(8 * fsize).max(fsize)
    };
    if !bsize.is_power_of_two() || !(MINBSIZE as u64..=MAXBSIZE as u64).contains(&bsize) {
        return Err(invalid(format!(
            "block size {bsize} is not a power of two between {MINBSIZE} and {MAXBSIZE}"
        )));
    }
    if !fsize.is_power_of_two() || fsize < SECTOR as u64 {
        return Err(invalid(format!(
            "fragment size {fsize} is not a power of two of at least {SECTOR}"
        )));
    }
    if fsize > bsize {
        return Err(invalid(format!(
            "fragment size {fsize} is larger than the block size {bsize}"
        )));
    }
    if bsize / fsize > MAXFRAG as u64 {
        return Err(invalid(format!(
            "block size {bsize} is more than {MAXFRAG} fragments of {fsize} bytes (use a fragment size of at least {})",
            bsize / MAXFRAG as u64
        )));
    }
    if p.minfree > 99 {
        return Err(invalid(format!(
            "minimum free space {}% is not in 0..=99",
            p.minfree
        )));
    }
    if p.optim != FS_OPTTIME && p.optim != FS_OPTSPACE {
        return Err(invalid(format!(
            "optimization preference {} is neither time (0) nor space (1)",
            p.optim
        )));
    }
    let int_max = i32::MAX as u64;
    if p.avgfilesize == 0 || p.avgfilesize as u64 > int_max {
        return Err(invalid(format!("bad average file size {}", p.avgfilesize)));
    }
    if p.avgfpdir == 0 || p.avgfpdir as u64 > int_max {
        return Err(invalid(format!(
            "bad average files per directory {}",
            p.avgfpdir
        )));
    }
    if let Some(d) = p.density {
        if d == 0 || d > int_max {
            return Err(invalid(format!("bad bytes per inode {d}")));
        }
    }
    if let Some(m) = p.maxbpg {
        if m == 0 || m > int_max {
            return Err(invalid(format!(
                "bad blocks per file in a cylinder group {m}"
            )));
        }
    }
    if let Some(c) = p.maxblkspercg {
        if c == 0 || c > int_max {
            return Err(invalid(format!("bad blocks per cylinder group {c}")));
        }
    }
    if p.volname.len() >= MAXVOLLEN {
        return Err(invalid(format!(
            "volume label is longer than {} bytes",
            MAXVOLLEN - 1
        )));
    }
    if !p
        .volname
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
    {
        return Err(invalid(
            "bad volume label: valid characters are letters, digits, '-' and '_'",
        ));
    }
    // Both are at most MAXBSIZE now.
    Ok((to_signed(bsize), to_signed(fsize)))
}

/// FreeBSD's mkfs geometry for a file system of `fs_bytes` bytes.
fn compute_layout(p: &NewfsParams, fs_bytes: u64) -> Result<Layout> {
    let (mut bsize, mut fsize) = check_params(p)?;
    let v = p.variant();
    let ufs1 = v.is_ufs1();
    // UFS1 counts a group's inodes in a 16-bit field (cg_old_niblk).
    let max_ipg: i64 = if ufs1 { 0x7fff } else { i64::MAX };
    let mut notes = Vec::new();
    let mut optim = p.optim;
    if p.minfree < MINFREE && optim != FS_OPTSPACE {
        notes.push(format!(
            "Warning: changing optimization to space because minfree is less than {MINFREE}%"
        ));
        optim = FS_OPTSPACE;
    }
    let sectors = to_signed(fs_bytes / SECTOR as u64);
    if sectors <= 0 {
        return Err(invalid(format!("preposterous size {fs_bytes} bytes")));
    }
    // Defaults fixed from the block size first asked for, as newfs keeps
    // them when it has to restart with larger blocks.
    let maxbsize_req = bsize;
    let maxcontig_req = (to_signed(MAXPHYS) / bsize).max(1);
    let mut maxblkspercg = to_signed(p.maxblkspercg.unwrap_or(MAXBLKSPERCG));
    let mut density = to_signed(p.density.unwrap_or(0));
    let mut internal_retries = 0;

    'restart: loop {
        let Some(bsize_u) = u64::try_from(bsize)
            .ok()
            .filter(|&b| b <= u64::from(MAXBSIZE))
        else {
            return Err(invalid(format!(
                "file system of {fs_bytes} bytes needs blocks larger than {MAXBSIZE} bytes"
            )));
        };
        let frag = bsize / fsize;
        let maxbsize = if maxbsize_req < bsize
            || !u64::try_from(maxbsize_req).is_ok_and(u64::is_power_of_two)
        {
            bsize
        } else if maxbsize_req > FS_MAXCONTIG * bsize {
            FS_MAXCONTIG * bsize
        } else {
            maxbsize_req
        };
        let maxcontig = maxcontig_req.max(maxbsize / bsize);
        let contigsumsize = if maxcontig > 1 {
            maxcontig.min(FS_MAXCONTIG)
        } else {
            0
        };
        let bshift = ilog2(bsize);
        let fshift = ilog2(fsize);
        let fragshift = ilog2(frag);
        let fsbtodb = ilog2(fsize / SECTOR);
        let size = sectors >> fsbtodb;
        let sblockloc = to_signed(if ufs1 { SBLOCK_UFS1 } else { SBLOCK_UFS2 });
        let sblkno = roundup(howmany(sblockloc + to_signed(SBLOCKSIZE), fsize), frag);
        let cblkno = sblkno + roundup(howmany(to_signed(SBLOCKSIZE), fsize), frag);
        let iblkno = cblkno + frag;
        let nindir = bsize_u / v.ptr_size() as u64;
        let mut maxfilesize = bsize_u * UFS_NDADDR as u64 - 1;
        let mut sizepb = bsize_u;
        for _ in 0..UFS_NIADDR {
            sizepb = sizepb.saturating_mul(nindir);
            maxfilesize = maxfilesize.saturating_add(sizepb);
        }
        let inopb = bsize / to_signed(v.dinode_size());
        let inopf = inopb >> fragshift;
        let cgsize_of = |fpg: i64, ipg: i64| cgsize_bound(ufs1, fpg, ipg, fragshift, contigsumsize);
        let fits = |fpg: i64, ipg: i64| cgsize_of(fpg, ipg) < bsize - CGSIZEFUDGE && ipg <= max_ipg;
        let inodes_for = |fpg: i64, fpi: i64| roundup(howmany(fpg, fpi), inopb);

        'retry: loop {
            // Fragments per inode must keep the inode count within 32 bits.
            let maxinum = (1i64 << 32) - inopb;
            let minfpi = 1 + size / maxinum;
            if density == 0 {
                density = NFPI.max(minfpi) * fsize;
            } else if density < minfpi * fsize {
                notes.push(format!(
                    "density increased from {density} to {}",
                    minfpi * fsize
                ));
                density = minfpi * fsize;
            }
            let origdensity = density;

            // The smallest group that honours the density; if even that
            // does not fit in a block, lower the density.
            let (fpi, mut fpg, mut ipg);
            loop {
                let f = (density >> fshift).max(1);
                if f < minfpi {
                    bsize <<= 1;
                    fsize <<= 1;
                    notes.push(format!(
                        "Block size too small for a file system of this size. Increasing blocksize to {bsize}"
                    ));
                    continue 'restart;
                }
                let minfpg = (f * inopb).min(size);
                let mut g_fpg = roundup(iblkno + inopb / inopf, frag).max(minfpg);
                let mut g_ipg = inodes_for(g_fpg, f);
                g_fpg = roundup(iblkno + g_ipg / inopf, frag).max(minfpg);
                g_ipg = inodes_for(g_fpg, f);
                if fits(g_fpg, g_ipg) {
                    fpi = f;
                    fpg = g_fpg;
                    ipg = g_ipg;
                    break;
                }
                density -= fsize;
            }
            if density != origdensity {
                notes.push(format!("density reduced from {origdensity} to {density}"));
            }

            // Grow the group while its maps fit, at least MINCYLGRPS groups
            // remain, and the -c bound allows. (As in FreeBSD, stopping on
            // the bound keeps the inode count of the previous step.)
            while fpg < maxblkspercg {
                ipg = inodes_for(fpg, fpi);
                if size / fpg < MINCYLGRPS {
                    break;
                }
                let need = cgsize_of(fpg, ipg);
                if need < bsize - CGSIZEFUDGE && ipg <= max_ipg {
                    fpg += frag;
                    continue;
                }
                if need == bsize - CGSIZEFUDGE && ipg <= max_ipg {
                    break;
                }
                fpg -= frag;
                ipg = inodes_for(fpg, fpi);
                break;
            }

            // Make the last group big enough for its own metadata by moving
            // fragments into it from the others.
            let optimalfpg = fpg;
            let mut ncg;
            loop {
                ncg = howmany(size, fpg);
                let lastminfpg = roundup(iblkno + ipg / inopf, frag);
                if size < lastminfpg {
                    return Err(invalid(format!(
                        "file system size {size} fragments ({} bytes) is below the minimum of {lastminfpg} fragments ({} bytes)",
                        size * fsize,
                        lastminfpg * fsize
                    )));
                }
                // FreeBSD would go on shrinking groups below the size of
                // their own metadata here and produce an unusable layout.
                if fpg < lastminfpg {
                    return Err(invalid(format!(
                        "no cylinder group size gives a {size}-fragment file system a last group that holds its own metadata; use a different size"
                    )));
                }
                let rest = size % fpg;
                if rest == 0 || rest >= lastminfpg {
                    break;
                }
                fpg -= frag;
                ipg = inodes_for(fpg, fpi);
            }
            if optimalfpg != fpg {
                notes.push(format!(
                    "Reduced frags per cylinder group from {optimalfpg} to {fpg} to enlarge last cyl group"
                ));
            }

            // FreeBSD's "can't happen" fallback: a cg block that does not fit
            // makes it start over with smaller groups.
            if cgsize_of(fpg, ipg) > bsize {
                internal_retries += 1;
                if internal_retries > 4 {
                    return Err(invalid(format!(
                        "no cylinder group size fits in a {bsize}-byte block"
                    )));
                }
                notes.push(format!("cylinder group of {fpg} fragments does not fit in a block; retrying with smaller groups"));
                maxblkspercg = (fpg >> fragshift) - 1;
                density = 0;
                continue 'retry;
            }

            let cgsize = roundup(cgsize_of(fpg, ipg), fsize);
            let dblkno = iblkno + ipg / inopf;
            let cssize = roundup(ncg * to_signed(Csum::SIZE), fsize);
            if ufs1 && size > i32::MAX as i64 {
                return Err(invalid(format!(
                    "a UFS1 file system addresses at most {} fragments with its 32-bit block \
                     pointers; {size} fragments of {fsize} bytes do not fit (use UFS2, or a \
                     larger fragment size)",
                    i32::MAX
                )));
            }
            let sbsize = roundup(to_signed(SBSIZE_STRUCT), fsize)
                .min(to_signed(SBLOCKSIZE))
                .max(SECTOR);
            let minfree = to_signed(p.minfree);
            // -k is not range-checked: a value past i64::MAX gets the
            // default, as any of at least fpg / 2 does.
            let metaspace = match p.metaspace.map(i64::try_from) {
                Some(Ok(0)) => 0,
                Some(Ok(m)) if m > 0 && m < fpg / 2 => m & !(frag - 1),
                _ => ((fpg * minfree) / 200) & !(frag - 1),
            };
            let maxbpg = p.maxbpg.map(to_signed).unwrap_or(bsize / 8);
            if u64::try_from(size).is_ok_and(|s| maxfilesize < s) {
                notes.push(
                    "WARNING: You will be unable to create snapshots on this file system.  Correct by using a larger blocksize."
                        .into(),
                );
            }
            return Ok(Layout {
                v,
                bsize,
                fsize,
                frag,
                bshift,
                fshift,
                fragshift,
                fsbtodb,
                size,
                maxbsize,
                maxcontig,
                contigsumsize,
                sblkno,
                cblkno,
                iblkno,
                dblkno,
                fpg,
                ipg,
                ncg,
                cgsize,
                cssize,
                sbsize,
                maxfilesize,
                metaspace,
                maxbpg,
                minfree,
                optim,
                notes,
            });
        }
    }
}

/// Range checks on a layout before it is turned into a superblock: things
/// FreeBSD's superblock validation or its allocator would refuse.
fn check_layout(l: &Layout) -> Result<()> {
    if l.fpg > i32::MAX as i64 || l.ncg > u32::MAX as i64 || l.ncg < 1 {
        return Err(invalid(format!(
            "{} cylinder groups of {} fragments cannot be represented",
            l.ncg, l.fpg
        )));
    }
    let inopb = l.bsize / to_signed(l.v.dinode_size());
    if l.ipg
        .checked_mul(l.ncg)
        .is_none_or(|n| n > (1i64 << 32) - inopb)
    {
        return Err(invalid(format!(
            "{} cylinder groups of {} inodes exceed the 32-bit inode number space (use a larger -i)",
            l.ncg, l.ipg
        )));
    }
    if l.ipg * l.ncg < to_signed(UFS_ROOTINO) + 2 {
        return Err(invalid("too few inodes"));
    }
    if l.dblkno >= l.fpg.min(l.size) {
        return Err(invalid(format!(
            "a cylinder group of {} fragments has no room for data after {} fragments of metadata",
            l.fpg.min(l.size),
            l.dblkno
        )));
    }
    // The summary area must lie in group 0's data area and end before the
    // group does (FreeBSD's rule compares the group of its end address).
    let csfrags = howmany(l.cssize, l.fsize);
    if l.dblkno + csfrags >= l.fpg.min(l.size) {
        return Err(invalid(format!(
            "the summary of {} cylinder groups ({csfrags} fragments) does not fit in cylinder group 0",
            l.ncg
        )));
    }
    let dsize = l.size - l.sblkno - l.ncg * (l.dblkno - l.sblkno) - csfrags;
    if dsize <= 0 {
        return Err(invalid(format!(
            "file system of {} fragments has no data space",
            l.size
        )));
    }
    Ok(())
}

/// The superblock for a layout, with `fs_magic` already set and the counter
/// totals still zero (filled in once the groups are built). A layout value
/// that does not fit its field (none does after [`check_layout`]) is an
/// error.
fn build_superblock(
    l: &Layout,
    p: &NewfsParams,
    utime: i64,
    media_bytes: u64,
    id1: u32,
) -> Result<Superblock> {
    let v = l.v;
    let ufs1 = v.is_ufs1();
    let mut sb = Superblock::zeroed_in(v.endian);
    sb.set_fs_old_flags(OLD_FLAGS_UPDATED);
    let mut flags = 0;
    if p.softupdates {
        flags |= FS_DOSOFTDEP;
    }
    sb.set_fs_volname(&p.volname);
    let bsize: i32 = sb_field("fs_bsize", l.bsize)?;
    let fsize: i32 = sb_field("fs_fsize", l.fsize)?;
    sb.set_fs_bsize(bsize);
    sb.set_fs_fsize(fsize);
    sb.set_fs_frag(sb_field("fs_frag", l.frag)?);
    sb.set_fs_maxbsize(sb_field("fs_maxbsize", l.maxbsize)?);
    sb.set_fs_maxcontig(sb_field("fs_maxcontig", l.maxcontig)?);
    sb.set_fs_contigsumsize(sb_field("fs_contigsumsize", l.contigsumsize)?);
    let bmask = !(bsize - 1);
    let fmask = !(fsize - 1);
    sb.set_fs_bmask(bmask);
    sb.set_fs_fmask(fmask);
    // The quad masks are the 32-bit complements widened (positive values).
    sb.set_fs_qbmask(i64::from(!bmask));
    sb.set_fs_qfmask(i64::from(!fmask));
    sb.set_fs_bshift(sb_field("fs_bshift", l.bshift)?);
    sb.set_fs_fshift(sb_field("fs_fshift", l.fshift)?);
    sb.set_fs_fragshift(sb_field("fs_fragshift", l.fragshift)?);
    sb.set_fs_fsbtodb(sb_field("fs_fsbtodb", l.fsbtodb)?);
    sb.set_fs_size(l.size);
    // fs_fsize is at least 512 (check_params), so it is its own absolute
    // value, and a u64 divided by it fits an i64.
    let fsize_u = u64::from(fsize.unsigned_abs());
    sb.set_fs_providersize(to_signed(media_bytes / fsize_u));
    let sblockloc = to_signed(if ufs1 { SBLOCK_UFS1 } else { SBLOCK_UFS2 });
    sb.set_fs_sblockloc(sblockloc);
    sb.set_fs_sblockactualloc(sblockloc);
    sb.set_fs_nindir(sb_field("fs_nindir", l.bsize / to_signed(v.ptr_size()))?);
    sb.set_fs_inopb(sb_field("fs_inopb", l.bsize / to_signed(v.dinode_size()))?);
    sb.set_fs_maxsymlinklen(sb_field("fs_maxsymlinklen", to_signed(v.maxsymlinklen()))?);
    sb.set_fs_sblkno(sb_field("fs_sblkno", l.sblkno)?);
    sb.set_fs_cblkno(sb_field("fs_cblkno", l.cblkno)?);
    sb.set_fs_iblkno(sb_field("fs_iblkno", l.iblkno)?);
    sb.set_fs_dblkno(sb_field("fs_dblkno", l.dblkno)?);
    sb.set_fs_maxfilesize(l.maxfilesize);
    sb.set_fs_ipg(sb_field("fs_ipg", l.ipg)?);
    sb.set_fs_fpg(sb_field("fs_fpg", l.fpg)?);
    sb.set_fs_ncg(sb_field("fs_ncg", l.ncg)?);
    sb.set_fs_cgsize(sb_field("fs_cgsize", l.cgsize)?);
    sb.set_fs_csaddr(l.dblkno);
    sb.set_fs_cssize(sb_field("fs_cssize", l.cssize)?);
    sb.set_fs_sbsize(sb_field("fs_sbsize", l.sbsize)?);
    sb.set_fs_minfree(sb_field("fs_minfree", l.minfree)?);
    sb.set_fs_metaspace(l.metaspace);
    sb.set_fs_maxbpg(sb_field("fs_maxbpg", l.maxbpg)?);
    sb.set_fs_optim(l.optim);
    sb.set_fs_avgfilesize(p.avgfilesize);
    sb.set_fs_avgfpdir(p.avgfpdir);
    sb.set_fs_clean(1);
    sb.set_fs_state(0);
    // fs_id: creation time (truncated to 32 bits, as mkfs's assignment to
    // the int32_t does) and a random number, stored bit for bit in the
    // signed field.
    sb.set_fs_id0(low_i32(utime));
    sb.set_fs_id1(id1.cast_signed());
    let csfrags = howmany(l.cssize, l.fsize);
    let dsize = l.size - l.sblkno - l.ncg * (l.dblkno - l.sblkno) - csfrags;
    sb.set_fs_dsize(dsize);
    sb.set_fs_time(utime);
    // Check-hashes are UFS2's ("not supported in the UFS version 1
    // filesystem", mkfs.c).
    if p.ckhash && !ufs1 {
        flags |= FS_METACKHASH;
        sb.set_fs_metackhash(CK_SUPERBLOCK | CK_CYLGRP | CK_INODE);
    }
    sb.set_fs_flags(flags);
    if ufs1 {
        // What FreeBSD's mkfs writes in the old fields (ufs1.md §5.2): one
        // cylinder per group, one rotational position, no stagger, and
        // 32-bit copies of the wide fields (the time and totals are kept
        // up to date by every superblock write, `compat_write`).
        // All fit: a UFS1 file system is at most i32::MAX fragments
        // (compute_layout) and a group's sectors are below 2^26 (its map
        // fits a block).
        let nspf: i32 = sb_field("fs_old_nspf", l.fsize / SECTOR)?;
        let spc: i32 = sb_field("fs_old_spc", l.fpg * (l.fsize / SECTOR))?;
        sb.set_fs_old_inodefmt(FS_44INODEFMT);
        sb.set_fs_old_cgoffset(0);
        sb.set_fs_old_cgmask(-1);
        sb.set_fs_old_size(sb_field("fs_old_size", l.size)?);
        sb.set_fs_old_dsize(sb_field("fs_old_dsize", dsize)?);
        sb.set_fs_old_csaddr(sb_field("fs_old_csaddr", l.dblkno)?);
        sb.set_fs_old_rotdelay(0);
        sb.set_fs_old_rps(60);
        sb.set_fs_old_nspf(nspf);
        sb.set_fs_old_cpg(1);
        sb.set_fs_old_interleave(1);
        sb.set_fs_old_trackskew(0);
        sb.set_fs_old_cpc(0);
        sb.set_fs_old_postblformat(1);
        sb.set_fs_old_nrpos(1);
        sb.set_fs_old_spc(spc);
        sb.set_fs_old_nsect(spc);
        sb.set_fs_old_npsect(spc);
        sb.set_fs_old_ncyl(sb_field("fs_old_ncyl", l.ncg)?);
    }
    sb.set_fs_magic(v.magic());
    Ok(sb)
}

/// The counter totals FreeBSD's mkfs computes arithmetically before building
/// the groups (used to cross-check the ones counted from the maps).
fn expected_totals(g: &Geometry) -> CsumTotal {
    // A validated geometry's numbers all fit an i64 (sizes are fs_size's,
    // an int64_t; group counts and inode numbers are 32-bit).
    let csfrags = to_signed(g.numfrags(g.cssize));
    let frag = to_signed(g.frag);
    let size = to_signed(g.size);
    let sblkno = to_signed(g.sblkno);
    let dsize = size - sblkno - to_signed(g.ncg) * (to_signed(g.dblkno) - sblkno);
    let tail = csfrags % frag;
    CsumTotal {
        cs_ndir: 0,
        cs_nbfree: (dsize >> g.fragshift) - howmany(csfrags, frag),
        cs_nifree: to_signed(g.ncg * g.ipg) - to_signed(UFS_ROOTINO),
        cs_nffree: size % frag + if tail > 0 { frag - tail } else { 0 },
        cs_numclusters: 0,
    }
}

/// Sets bits `[start, end)` of a bitmap, whole bytes at a time where it can.
fn set_bit_range(map: &mut [u8], start: u64, end: u64) {
    let mut i = start;
    while i < end && i & 7 != 0 {
        map[to_index(i / 8)] |= 1 << (i % 8);
        i += 1;
    }
    if i + 8 <= end {
        let full = (end - i) / 8;
        map[to_index(i / 8)..to_index(i / 8 + full)].fill(0xff);
        i += full * 8;
    }
    while i < end {
        map[to_index(i / 8)] |= 1 << (i % 8);
        i += 1;
    }
}

/// Recomputes everything a cg derives from its fragment map: `cs_nbfree`,
/// `cs_nffree`, `cg_frsum`, the cluster map and the cluster summary (slot 0
/// of the summary is never written; it may alias the fragment map). The
/// inode counters are left as they are.
pub(crate) fn recount_space(cg: &mut Cg, g: &Geometry) {
    let frag = g.frag;
    let ndblk = u64::from(cg.cg_ndblk());
    let freeoff = cg.cg_freeoff() as usize;
    let clusters = g.contigsumsize > 0;
    let nclusterblks = u64::from(cg.cg_nclusterblks());
    let clusteroff = cg.cg_clusteroff() as usize;
    if clusters {
        let n = to_index((g.fpg / frag).div_ceil(8));
        cg.raw_mut()[clusteroff..clusteroff + n].fill(0);
    }
    let mask: u8 = if frag == 8 { 0xff } else { (1u8 << frag) - 1 };
    let (mut nbfree, mut nffree) = (0u64, 0u64);
    let mut frsum = [0u32; MAXFRAG];
    let raw = cg.raw_mut();
    for b in 0..ndblk.div_ceil(frag) {
        let lo = b * frag;
        let have = (ndblk - lo).min(frag);
        // A block never straddles a byte: frag divides 8 and lo is aligned.
        let mut bits = (raw[freeoff + to_index(lo / 8)] >> (lo % 8)) & mask;
        if have < frag {
            bits &= (1u8 << have) - 1;
        }
        if bits == mask && have == frag {
            nbfree += 1;
            if clusters && b < nclusterblks {
                raw[clusteroff + to_index(b / 8)] |= 1 << (b % 8);
            }
            continue;
        }
        // Lengths of free runs inside one block: below MAXFRAG.
        let mut run = 0usize;
        for i in 0..frag {
            if bits & (1 << i) != 0 {
                run += 1;
            } else if run > 0 {
                frsum[run] += 1;
                nffree += run as u64;
                run = 0;
            }
        }
        if run > 0 {
            frsum[run] += 1;
            nffree += run as u64;
        }
    }
    // Both count fragments of one group, at most fs_fpg, an int32_t.
    let mut cs = cg.cg_cs();
    cs.cs_nbfree = to_i32(nbfree);
    cs.cs_nffree = to_i32(nffree);
    cg.set_cg_cs(cs);
    for (i, v) in frsum.iter().enumerate() {
        cg.set_cg_frsum(i, *v);
    }
    if clusters {
        let max = g.contigsumsize;
        for i in 1..=max {
            cg.set_clustersum(i, 0);
        }
        let mut sums = vec![0i32; to_index(max + 1)];
        let mut run = 0u64;
        for b in 0..nclusterblks {
            if cg.cluster_free(b) {
                run += 1;
            } else if run > 0 {
                sums[to_index(run.min(max))] += 1;
                run = 0;
            }
        }
        if run > 0 {
            sums[to_index(run.min(max))] += 1;
        }
        for (i, v) in sums.iter().enumerate().skip(1) {
            cg.set_clustersum(i as u64, *v);
        }
    }
}

/// A freshly initialised cylinder group `c` (`initcg`), without check-hash.
pub(crate) fn build_cg(g: &Geometry, c: u64, utime: i64) -> Cg {
    let mut cg = Cg::new_layout(g, c);
    let ndblk = g.cg_nfrags(c);
    if g.v.is_ufs1() {
        // mkfs moves the time to the old field (its low 32 bits) and
        // leaves cg_time zero.
        cg.set_cg_old_time(low_i32(utime));
    } else {
        cg.set_cg_time(utime);
        // At most fs_ipg, a validated 32-bit field.
        cg.set_cg_initediblk(low_u32(g.ipg.min(2 * g.inopb)));
    }
    // At most fs_fpg, an int32_t.
    cg.set_cg_ndblk(low_u32(ndblk));
    let mut cs = Csum {
        // A validated fs_ipg is below 2^19 (its inode map fits the cg
        // block).
        cs_nifree: to_i32(g.ipg),
        ..Csum::default()
    };
    if c == 0 {
        // Inodes 0 and 1 are never handed out.
        for i in 0..UFS_ROOTINO {
            cg.set_inode_used(i, true);
            cs.cs_nifree -= 1;
        }
    }
    cg.set_cg_cs(cs);
    // Free space: in groups after the first, the fragments before the
    // backup superblock; in every group, everything after the inodes (and
    // in group 0 after the summary area).
    let mut dupper = g.dblkno;
    if c == 0 {
        dupper += g.numfrags(g.cssize);
    }
    let freeoff = cg.cg_freeoff() as usize;
    let map = &mut cg.raw_mut()[freeoff..];
    if c > 0 {
        set_bit_range(map, 0, g.sblkno.min(ndblk));
    }
    if dupper < ndblk {
        set_bit_range(map, dupper, ndblk);
    }
    recount_space(&mut cg, g);
    cg
}

/// Takes one fragment for a new directory from the first wholly free block
/// of group 0 (FreeBSD's `alloc`): the rest of the block stays free.
fn alloc_dir_frag(cg: &mut Cg, g: &Geometry) -> Result<u64> {
    let ndblk = cg.cg_ndblk() as u64;
    let mut d = 0;
    while d + g.frag <= ndblk {
        if cg.block_free(d / g.frag, g.frag) {
            cg.set_frag_free(d, false);
            let mut cs = cg.cg_cs();
            cs.cs_ndir += 1;
            cg.set_cg_cs(cs);
            return Ok(d);
        }
        d += g.frag;
    }
    Err(invalid(
        "the first cylinder group has no free block for the root directory (file system too small)",
    ))
}

/// What differs between the directories newfs makes.
struct DirSpec {
    mode: u16,
    nlink: u32,
    gid: u32,
    /// Fragment holding its one chunk.
    frag: u64,
    /// Distance from the root (`di_dirdepth`).
    depth: u32,
}

/// A directory inode as newfs makes them.
fn dir_inode(g: &Geometry, utime: i64, d: &DirSpec) -> Dinode {
    let mut di = Dinode::default();
    di.set_di_mode(d.mode);
    di.set_nlink(d.nlink);
    di.set_di_uid(0);
    di.set_di_gid(d.gid);
    di.set_di_size(DIRBLKSIZ as u64);
    di.set_di_db(0, d.frag);
    di.set_di_blocks(g.fragroundup(DIRBLKSIZ as u64) / SECTOR as u64);
    di.set_di_atime(utime);
    di.set_di_mtime(utime);
    di.set_di_ctime(utime);
    di.set_di_birthtime(utime);
    // di_dirdepth shares its place with di_freelink (directories only).
    di.set_di_freelink(d.depth);
    di
}

/// One fragment holding a 512-byte directory chunk with `entries`
/// (inode, name); the last entry takes the rest of the chunk.
fn dir_block(e: Endian, fsize: u64, entries: &[(u32, &[u8])]) -> Vec<u8> {
    let mut b = vec![0u8; to_index(fsize)];
    let mut off = 0usize;
    for (i, (ino, name)) in entries.iter().enumerate() {
        let sz = ufs_format::dir::dirsiz(name.len());
        let reclen = if i + 1 == entries.len() {
            DIRBLKSIZ - off
        } else {
            sz
        };
        // Within the 512-byte chunk.
        let reclen16 = low_u16(reclen);
        ufs_format::dir::write_entry(e, &mut b, off, *ino, reclen16, dt::DT_DIR, name);
        off += reclen;
    }
    b
}

fn nonzero_u32(rng: &mut StdRng) -> u32 {
    loop {
        let v: u32 = rng.gen();
        if v != 0 {
            return v;
        }
    }
}

fn add_csum(t: &mut CsumTotal, c: Csum, times: i64) {
    t.cs_ndir += c.cs_ndir as i64 * times;
    t.cs_nbfree += c.cs_nbfree as i64 * times;
    t.cs_nifree += c.cs_nifree as i64 * times;
    t.cs_nffree += c.cs_nffree as i64 * times;
}

/// newfs(8)'s printed report.
fn summary_text(
    l: &Layout,
    softupdates: bool,
    backups_sectors: impl Iterator<Item = u64>,
) -> String {
    let mut s = String::new();
    for n in &l.notes {
        let _ = writeln!(s, "{n}");
    }
    // FreeBSD computes these products in single precision.
    let mb = |frags: i64| ((frags as f32) * (l.fsize as f32)) as f64 * (1.0 / (1024.0 * 1024.0));
    let _ = writeln!(
        s,
        "{:.1}MB ({} sectors) block size {}, fragment size {}",
        mb(l.size),
        l.size << l.fsbtodb,
        l.bsize,
        l.fsize
    );
    let _ = writeln!(
        s,
        "\tusing {} cylinder groups of {:.2}MB, {} blks, {} inodes.",
        l.ncg,
        mb(l.fpg),
        l.fpg / l.frag,
        l.ipg
    );
    if softupdates {
        let _ = writeln!(s, "\twith soft updates");
    }
    let _ = writeln!(s, "super-block backups (for fsck_ffs -b #) at:");
    let width = 80;
    let mut col = 0;
    let mut backups_sectors = backups_sectors.peekable();
    while let Some(sec) = backups_sectors.next() {
        let more = backups_sectors.peek().is_some();
        let item = format!(" {sec}{}", if more { "," } else { "" });
        if col + item.len() >= width {
            s.push('\n');
            col = 0;
        }
        col += item.len();
        s.push_str(&item);
    }
    s.push('\n');
    s
}

/// The report of layout `l`, whose superblock validated as `g`: the
/// numbers are taken from `g`, where they are the unsigned values they are.
fn report(l: &Layout, g: &Geometry, softupdates: bool) -> NewfsReport {
    let backups: Vec<u64> = (0..g.ncg).map(|c| g.cgsblock(c)).collect();
    let summary = summary_text(l, softupdates, backups.iter().map(|f| f << l.fsbtodb));
    NewfsReport {
        ncg: g.ncg,
        fpg: g.fpg,
        ipg: g.ipg,
        size_frags: g.size,
        bsize: g.bsize,
        fsize: g.fsize,
        backups,
        summary,
    }
}

/// Runs the superblock validator every reader uses on the new superblock.
fn validate_new(sb: &Superblock, l: &Layout) -> Result<Geometry> {
    let loc = if l.v.is_ufs1() {
        SBLOCK_UFS1
    } else {
        SBLOCK_UFS2
    };
    sb.validate(loc).map_err(|e| {
        let mut msg = format!("computed superblock is not valid: {e}");
        if l.fpg % l.frag != 0 {
            // FreeBSD makes one group of exactly fs_size fragments when the
            // file system is smaller than the density asks for in one group;
            // FreeBSD accepts it, ufs-format's validator wants whole blocks.
            let _ = write!(
                msg,
                " (FreeBSD would make one cylinder group of {} fragments here, which ufskit cannot read yet; \
                 use a size that is a multiple of the block size, {} bytes)",
                l.fpg, l.bsize
            );
        }
        invalid(msg)
    })
}

fn file_system_bytes(device_size: u64, p: &NewfsParams) -> Result<u64> {
    match p.size {
        Some(s) if s > device_size => Err(invalid(format!(
            "file system size {s} bytes is larger than the device ({device_size} bytes)"
        ))),
        Some(s) => Ok(s),
        None => Ok(device_size),
    }
}

/// Computes what [`newfs`] would make on a device of `device_size` bytes
/// without writing anything (newfs -N).
pub fn newfs_plan(device_size: u64, p: &NewfsParams) -> Result<NewfsReport> {
    let fs_bytes = file_system_bytes(device_size, p)?;
    let l = compute_layout(p, fs_bytes)?;
    check_layout(&l)?;
    let sb = build_superblock(&l, p, p.time.unwrap_or(0), device_size, 1)?;
    let g = validate_new(&sb, &l)?;
    Ok(report(&l, &g, p.softupdates))
}

/// Creates a UFS2 file system on `dev` as FreeBSD 14's newfs does (see the
/// module documentation for what is written and in which order).
pub fn newfs(dev: &dyn BlockDevice, p: &NewfsParams) -> Result<NewfsReport> {
    newfs_with_progress(dev, p, &mut |_, _| {})
}

/// [`newfs`], telling `progress` how many cylinder groups of how many are
/// written (for a progress bar on large devices).
pub fn newfs_with_progress(
    dev: &dyn BlockDevice,
    p: &NewfsParams,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<NewfsReport> {
    let device_size = dev.size();
    let fs_bytes = file_system_bytes(device_size, p)?;
    let utime = p.time.unwrap_or_else(|| crate::fs::now().0);
    let mut rng = match p.seed {
        Some(s) => StdRng::seed_from_u64(s),
        None => StdRng::from_entropy(),
    };
    let l = compute_layout(p, fs_bytes)?;
    check_layout(&l)?;
    let id1 = nonzero_u32(&mut rng);
    let mut sb = build_superblock(&l, p, utime, device_size, id1)?;
    let g = validate_new(&sb, &l)?;
    let ckhash_cg = sb.ckhash_enabled(CK_CYLGRP);
    let ckhash_ino = sb.ckhash_enabled(CK_INODE);
    let fsize = g.fsize;
    let ncg = g.ncg;

    // Build the distinct groups: the first, one standing for all the middle
    // ones (they differ only in cg_cgx), and the last.
    let mut cg0 = build_cg(&g, 0, utime);
    let middle = (ncg > 2).then(|| build_cg(&g, 1, utime));
    let last = (ncg > 1).then(|| build_cg(&g, ncg - 1, utime));
    let mut totals = CsumTotal::default();
    add_csum(&mut totals, cg0.cg_cs(), 1);
    if let Some(m) = &middle {
        add_csum(&mut totals, m.cg_cs(), to_signed(ncg) - 2);
    }
    if let Some(lc) = &last {
        add_csum(&mut totals, lc.cg_cs(), 1);
    }
    if totals != expected_totals(&g) {
        return Err(Error::new(
            ErrorKind::Invalid,
            format!(
                "internal error: counted free space {totals:?} differs from the expected {:?}",
                expected_totals(&g)
            ),
        ));
    }
    // Backups carry the totals of the file system before the root exists.
    sb.set_fs_cstotal(totals);

    // The root directory and .snap, allocated in group 0 in memory.
    let csum0_before = cg0.cg_cs();
    let root_frag = alloc_dir_frag(&mut cg0, &g)?;
    let snap_frag = if p.no_snap {
        None
    } else {
        Some(alloc_dir_frag(&mut cg0, &g)?)
    };
    recount_space(&mut cg0, &g);
    let mut cs0 = cg0.cg_cs();
    let ndirs = if p.no_snap { 1 } else { 2 };
    for ino in UFS_ROOTINO..UFS_ROOTINO + ndirs {
        cg0.set_inode_used(ino, true);
        cs0.cs_nifree -= 1;
    }
    cg0.set_cg_cs(cs0);
    let root_spec = DirSpec {
        mode: IFDIR | 0o755,
        nlink: if p.no_snap { 2 } else { 3 },
        gid: 0,
        frag: root_frag,
        depth: 0,
    };
    let en = g.v.endian;
    let root_di = dir_inode(&g, utime, &root_spec);
    let root_blk = if p.no_snap {
        dir_block(en, fsize, &[(2, b"."), (2, b"..")])
    } else {
        dir_block(en, fsize, &[(2, b"."), (2, b".."), (3, b".snap")])
    };
    let snap = snap_frag.map(|f| {
        let spec = DirSpec {
            mode: IFDIR | 0o775,
            nlink: 2,
            gid: OPERATOR_GID,
            frag: f,
            depth: 1,
        };
        let di = dir_inode(&g, utime, &spec);
        (f, di, dir_block(en, fsize, &[(3, b"."), (2, b"..")]))
    });
    let mut final_totals = totals;
    add_csum(&mut final_totals, cs0, 1);
    add_csum(&mut final_totals, csum0_before, -1);

    // Nothing has been written so far. From here on: a stale UFS1 magic at
    // 8192 is cleared, the primary goes out marked incomplete, then the
    // groups, the directories, the summary and the final primary.
    if !g.v.is_ufs1() {
        wipe_old_ufs1(dev)?;
    }
    let mut incomplete = sb.clone();
    incomplete.set_fs_magic(FS_BAD_MAGIC);
    dev.write_at(g.sblockloc, &incomplete.to_disk_bytes())?;

    // The inodes written in every group: UFS2's first blocks, all of UFS1's.
    let initediblk = if g.lazy_inodes() {
        cg0.cg_initediblk() as usize
    } else {
        to_index(g.ipg)
    };
    let ds = g.dinode_size();
    let mut inodes = vec![0u8; initediblk * ds];
    let mut cgbuf: Cg;
    for c in 0..ncg {
        let sbloc = g.cgsblock(c) * fsize;
        sb.set_fs_sblockactualloc(to_signed(sbloc));
        dev.write_at(sbloc, &sb.to_disk_bytes())?;

        let cg: &mut Cg = if c == 0 {
            &mut cg0
        } else if c + 1 == ncg {
            cgbuf = last.clone().unwrap_or_else(|| build_cg(&g, c, utime));
            &mut cgbuf
        } else {
            cgbuf = middle.clone().unwrap_or_else(|| build_cg(&g, c, utime));
            // Below fs_ncg, a 32-bit field.
            cgbuf.set_cg_cgx(low_u32(c));
            &mut cgbuf
        };
        cg.update_ckhash(ckhash_cg);
        dev.write_at(g.cgtod(c) * fsize, cg.as_bytes())?;

        for (i, out) in inodes.chunks_exact_mut(ds).enumerate() {
            let di = match (c, i, &snap) {
                (0, 2, _) => root_di.clone(),
                (0, 3, Some((_, sdi, _))) => sdi.clone(),
                _ => {
                    let mut fresh = Dinode::default();
                    fresh.set_di_gen(nonzero_u32(&mut rng));
                    fresh
                }
            };
            // Inodes in use carry their check-hash (UFS2 with CK_INODE).
            di.encode_into(g.v, out, ckhash_ino && di.di_mode() != 0);
        }
        dev.write_at(g.cgimin(c) * fsize, &inodes)?;
        progress(c + 1, ncg);
    }
    sb.set_fs_sblockactualloc(to_signed(g.sblockloc));

    dev.write_at(root_frag * fsize, &root_blk)?;
    if let Some((f, _, blk)) = &snap {
        dev.write_at(f * fsize, blk)?;
    }

    // Summary area: one csum per group, then zeros to the fragment end.
    let mut summary = vec![0u8; to_index(g.cssize)];
    for c in 0..ncg {
        let cs = if c == 0 {
            cs0
        } else if c + 1 == ncg {
            last.as_ref().map(|x| x.cg_cs()).unwrap_or_default()
        } else {
            middle.as_ref().map(|x| x.cg_cs()).unwrap_or_default()
        };
        cs.write(en, &mut summary, to_index(c * Csum::SIZE as u64));
    }
    dev.write_at(g.csaddr * fsize, &summary)?;

    sb.set_fs_cstotal(final_totals);
    sb.set_fs_time(utime);
    sb.set_fs_fmod(0);
    dev.write_at(g.sblockloc, &sb.to_disk_bytes())?;
    if !g.v.is_ufs1() {
        write_recovery_record(dev, &g)?;
    }
    dev.flush()?;
    Ok(report(&l, &g, p.softupdates))
}

/// Clears the magic of a UFS1 superblock left at byte 8192 by an earlier
/// file system, so nothing finds it instead of the new one. (Its backups
/// lie inside the new file system's free space and are never searched.)
fn wipe_old_ufs1(dev: &dyn BlockDevice) -> Result<()> {
    let loc = SBLOCK_UFS1;
    if loc + SBLOCKSIZE as u64 > dev.size() {
        return Ok(());
    }
    let mut buf = vec![0u8; SBLOCKSIZE];
    dev.read_at(loc, &mut buf)?;
    if let Some((_, FS_UFS1_MAGIC)) = Superblock::sniff(&buf) {
        let m = ufs_format::sb::FS_MAGIC_OFF;
        buf[m..m + 4].fill(0);
        dev.write_at(loc, &buf)?;
    }
    Ok(())
}

/// Stores `struct fsrecovery` (magic, fsbtodb, sblkno, fpg, ncg) in the last
/// 20 bytes of the sector before the primary superblock, where FreeBSD looks
/// for the layout when every superblock copy it knows of is damaged.
pub(crate) fn write_recovery_record(dev: &dyn BlockDevice, g: &Geometry) -> Result<()> {
    let start = SBLOCK_UFS2 - SECTOR as u64;
    let mut sector = vec![0u8; to_index(SECTOR as u64)];
    dev.read_at(start, &mut sector)?;
    let rec = ufs_format::sb::FsRecovery {
        fsbtodb: sb_field("fsr_fsbtodb", i64::from(g.fshift) - 9)?,
        sblkno: sb_field("fsr_sblkno", to_signed(g.sblkno))?,
        fpg: sb_field("fsr_fpg", to_signed(g.fpg))?,
        ncg: sb_field("fsr_ncg", to_signed(g.ncg))?,
    };
    let rec_off = sector.len() - FSRECOVERY_SIZE;
    sector[rec_off..].copy_from_slice(&rec.encode(g.v.endian));
    dev.write_at(start, &sector)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(bytes: u64, p: &NewfsParams) -> Layout {
        compute_layout(p, bytes).unwrap()
    }

    /// Published FreeBSD results (see research/format-newfs.md §17).
    #[test]
    fn freebsd_test_vectors() {
        let p = NewfsParams::default();
        // (bytes, size, ncg, fpg, ipg, dblkno, cgsize, metaspace)
        type Vector = (u64, i64, i64, i64, i64, i64, i64, i64);
        let cases: [Vector; 3] = [
            (32 << 20, 8192, 4, 2056, 1152, 112, 4096, 80),
            (1 << 30, 262144, 4, 65544, 32896, 2096, 16384, 2616),
            (10 << 30, 2621440, 17, 160056, 80128, 5048, 32768, 6400),
        ];
        for (bytes, size, ncg, fpg, ipg, dblkno, cgsize, metaspace) in cases {
            let l = plan(bytes, &p);
            assert_eq!(
                (l.size, l.ncg, l.fpg, l.ipg, l.dblkno, l.cgsize, l.metaspace),
                (size, ncg, fpg, ipg, dblkno, cgsize, metaspace),
                "{bytes}"
            );
            assert_eq!(
                (l.sblkno, l.cblkno, l.iblkno, l.sbsize, l.maxbpg),
                (24, 32, 40, 4096, 4096)
            );
            assert_eq!(l.maxfilesize, 2252349704110079);
            assert_eq!((l.maxcontig, l.contigsumsize), (32, 16));
            let sb = build_superblock(&l, &p, 0, bytes, 1).unwrap();
            let g = sb.validate(SBLOCK_UFS2).unwrap();
            assert_eq!(g.cssize, 4096);
        }
        // CGSIZE of the three vectors.
        assert_eq!(cgsize_bound(false, 2056, 1152, 3, 16), 670);
        assert_eq!(cgsize_bound(false, 65544, 32896, 3, 16), 13566);
        assert_eq!(cgsize_bound(false, 160056, 80128, 3, 16), 32760);
    }

    #[test]
    fn one_gib_counters_match_freebsd() {
        let p = NewfsParams::default();
        let l = plan(1 << 30, &p);
        let sb = build_superblock(&l, &p, 0, 1 << 30, 1).unwrap();
        let g = sb.validate(SBLOCK_UFS2).unwrap();
        assert_eq!(sb.fs_dsize(), 253831);
        let cg0 = build_cg(&g, 0, 0);
        assert_eq!(
            (
                cg0.cg_cs().cs_nbfree,
                cg0.cg_cs().cs_nffree,
                cg0.cg_frsum(7)
            ),
            (7930, 7, 1)
        );
        assert_eq!(cg0.cg_iusedoff(), 168);
        assert_eq!(
            (
                cg0.cg_freeoff(),
                cg0.cg_clustersumoff(),
                cg0.cg_clusteroff(),
                cg0.cg_nextfreeoff()
            ),
            (4280, 12472, 12540, 13565)
        );
        let cg1 = build_cg(&g, 1, 0);
        assert_eq!((cg1.cg_cs().cs_nbfree, cg1.cg_cs().cs_nffree), (7934, 0));
        let cg3 = build_cg(&g, 3, 0);
        assert_eq!((cg3.cg_ndblk(), cg3.cg_cs().cs_nbfree), (65512, 7930));
        let t = expected_totals(&g);
        assert_eq!((t.cs_nbfree, t.cs_nffree), (31728, 7));
        let mut c = cg0.clone();
        assert_eq!(alloc_dir_frag(&mut c, &g).unwrap(), 2104);
        assert_eq!(alloc_dir_frag(&mut c, &g).unwrap(), 2112);
        recount_space(&mut c, &g);
        assert_eq!(
            (
                c.cg_cs().cs_nbfree,
                c.cg_cs().cs_nffree,
                c.cg_frsum(7),
                c.cg_cs().cs_ndir
            ),
            (7928, 21, 3, 2)
        );
    }

    #[test]
    fn counted_totals_equal_freebsd_formula() {
        for (bsize, fsize) in [
            (4096, 512),
            (4096, 4096),
            (8192, 1024),
            (16384, 2048),
            (32768, 4096),
            (65536, 8192),
            (65536, 65536),
            (32768, 8192),
        ] {
            for mib in [1u64, 2, 3, 5, 17, 64, 100, 333, 1024, 4099] {
                let bytes = mib << 20;
                let p = NewfsParams {
                    bsize,
                    fsize,
                    ..Default::default()
                };
                let Ok(l) = compute_layout(&p, bytes) else {
                    continue;
                };
                if check_layout(&l).is_err() {
                    continue;
                }
                let sb = build_superblock(&l, &p, 0, bytes, 1).unwrap();
                let Ok(g) = sb.validate(SBLOCK_UFS2) else {
                    continue;
                };
                let mut t = CsumTotal::default();
                for c in 0..g.ncg {
                    add_csum(&mut t, build_cg(&g, c, 0).cg_cs(), 1);
                }
                assert_eq!(t, expected_totals(&g), "{bsize}/{fsize} {mib} MiB");
            }
        }
    }

    #[test]
    fn bit_range() {
        for s in 0..20 {
            for e in s..40 {
                let mut m = [0u8; 5];
                set_bit_range(&mut m, s, e);
                for i in 0..40u64 {
                    assert_eq!(
                        m[(i / 8) as usize] & (1 << (i % 8)) != 0,
                        (s..e).contains(&i)
                    );
                }
            }
        }
    }

    #[test]
    fn extreme_sizes_do_not_panic() {
        for bytes in [1u64 << 40, 1 << 46, 1 << 50, 1 << 56, 1 << 60, u64::MAX] {
            for (bsize, fsize) in [(32768, 4096), (4096, 512), (65536, 65536)] {
                for density in [None, Some(4096), Some(i32::MAX as u64)] {
                    let p = NewfsParams {
                        bsize,
                        fsize,
                        density,
                        ..Default::default()
                    };
                    match newfs_plan(bytes, &p) {
                        Ok(r) => assert!(r.ncg * r.ipg <= 1 << 32, "{bytes} {bsize}/{fsize}"),
                        Err(e) => assert_eq!(e.kind, ErrorKind::Invalid),
                    }
                }
            }
        }
        // At 1 PiB FreeBSD's minimum fragments-per-inode ignores the round-up
        // of ipg and overshoots 2^32 inodes; that is refused with advice,
        // and a larger density works.
        let e = newfs_plan(1 << 50, &NewfsParams::default()).unwrap_err();
        assert!(e.msg.contains("-i"), "{e}");
        let r = newfs_plan(
            1 << 50,
            &NewfsParams {
                density: Some(1 << 20),
                ..Default::default()
            },
        )
        .unwrap();
        assert!(r.ncg * r.ipg <= (1 << 32) - 128);
    }

    #[test]
    fn defaults_follow_newfs() {
        let d = |b, f| {
            check_params(&NewfsParams {
                bsize: b,
                fsize: f,
                ..Default::default()
            })
            .unwrap()
        };
        assert_eq!(d(0, 0), (32768, 4096));
        assert_eq!(d(65536, 0), (65536, 8192));
        assert_eq!(d(4096, 0), (4096, 4096));
        assert_eq!(d(0, 512), (4096, 512));
        assert_eq!(d(0, 65536), (65536, 65536));
    }
}
