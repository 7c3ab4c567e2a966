//! growfs: a file system made larger, in place, as FreeBSD's growfs(8)
//! does (`sbin/growfs/growfs.c`): the last cylinder group is extended to
//! full size (or to the new end), groups are added after it, and the
//! summary area moves to the first new group's data area when it needs more
//! fragments than it has. Facts from FreeBSD's growfs and fs.h; the code is
//! this project's (the group building is newfs's, `newfs::build_cg`).
//!
//! Invariants:
//! - Nothing is written until every new structure has been computed and
//!   checked (`Superblock::validate` on the new superblock, the counted
//!   totals equal to the sum of the group summaries).
//! - A power cut at any point leaves the old file system, clean and
//!   untouched inside its old size, or the new one, either clean or marked
//!   not clean with only differences `fsck -p` repairs (the formerly last
//!   group's map and count, the summary area). The order: new groups,
//!   their inodes and superblock copies, and a moved summary area (all
//!   outside the old file system or in its free space), flush; the primary
//!   superblock, new and marked not clean, flush; the groups changed in
//!   place and the summary area, flush; the primary marked clean, every
//!   group's superblock copy, the recovery record, flush. (FreeBSD's growfs
//!   changes groups in place before the superblock and marks nothing; a cut
//!   there leaves an old superblock over changed groups, which fsck must
//!   find by itself since the superblock says clean.)
//! - A file system that is not clean, or has snapshots, is refused, as
//!   FreeBSD refuses them.
use crate::dev::BlockDevice;
use crate::error::{Error, ErrorKind, Result};
use crate::fs::read_superblock;
use crate::newfs::{build_cg, recount_space, sb_field, write_recovery_record};
use rand::{Rng, SeedableRng};
use ufs_format::bytes::{low_i32, low_u32, to_index, to_signed};
use ufs_format::*;

/// What to grow to.
#[derive(Debug, Clone, Default)]
pub struct GrowParams {
    /// New size in bytes (rounded down to a fragment); `None`: the device.
    pub size: Option<u64>,
    /// Time stamped in new groups and the superblock; `None`: now.
    pub time: Option<i64>,
    /// Seed for new inodes' generation numbers; `None`: entropy.
    pub seed: Option<u64>,
    /// Compute and report, write nothing (growfs -N).
    pub dry_run: bool,
}

/// What growfs did (or, dry, would do).
#[derive(Debug, Clone, serde::Serialize)]
pub struct GrowReport {
    pub old_bytes: u64,
    pub new_bytes: u64,
    pub old_groups: u64,
    pub new_groups: u64,
    /// The summary area's new fragment address, when it moved.
    pub summary_moved_to: Option<u64>,
    /// Bytes past the new end left unused (a last group too small to hold
    /// data is not made, as FreeBSD leaves it).
    pub unused_bytes: u64,
    pub written: bool,
}

impl GrowReport {
    pub fn summary(&self) -> String {
        let mut s = format!(
            "{} {} to {} bytes: {} to {} cylinder groups",
            if self.written { "grew" } else { "would grow" },
            self.old_bytes,
            self.new_bytes,
            self.old_groups,
            self.new_groups
        );
        if let Some(a) = self.summary_moved_to {
            s += &format!(", summary area moved to fragment {a}");
        }
        if self.unused_bytes > 0 {
            s += &format!(
                "; the last {} bytes are left unused (too few for a cylinder group)",
                self.unused_bytes
            );
        }
        s
    }
}

fn refuse(msg: impl Into<String>) -> Error {
    Error::new(ErrorKind::Invalid, msg.into())
}

/// Sets (`free`) or clears fragment map bits `[start, end)` of `cg`.
fn mark(cg: &mut Cg, start: u64, end: u64, free: bool) {
    let off = cg.cg_freeoff() as usize;
    let map = &mut cg.raw_mut()[off..];
    for i in start..end {
        let (byte, bit) = (to_index(i / 8), 1u8 << (i % 8));
        if free {
            map[byte] |= bit;
        } else {
            map[byte] &= !bit;
        }
    }
}

fn read_cg(dev: &dyn BlockDevice, g: &Geometry, c: u64) -> Result<Cg> {
    let mut buf = vec![0u8; to_index(g.cgsize)];
    dev.read_at(g.cgtod(c) * g.fsize, &mut buf)?;
    Ok(Cg::parse(&buf, g, c)?)
}

/// Grows the file system on `dev` (see the module comment).
pub fn growfs(dev: &dyn BlockDevice, p: &GrowParams) -> Result<GrowReport> {
    let (sb, g, loc) = read_superblock(dev)?;
    let v = g.v;
    if sb.fs_clean() != 1 || sb.fs_flags() & (FS_UNCLEAN | FS_NEEDSFSCK) != 0 {
        return Err(refuse(
            "the file system is not clean: run ufskit fsck on it first",
        ));
    }
    if (0..FSMAXSNAP).any(|i| sb.fs_snapinum(i) != 0) {
        return Err(refuse(
            "the file system has snapshots, which growfs does not move: remove them on FreeBSD first",
        ));
    }
    let fsize = g.fsize;
    let fpg = g.fpg;
    let device = dev.size();
    let want = p.size.unwrap_or(device);
    if want > device {
        return Err(refuse(format!(
            "the new size, {want} bytes, is larger than the device ({device} bytes)"
        )));
    }
    let mut nsize = want / fsize;
    let old_bytes = g.size * fsize;
    if nsize < g.size {
        return Err(refuse(format!(
            "the new size, {} bytes, is smaller than the file system ({old_bytes} bytes): growfs does not shrink",
            nsize * fsize
        )));
    }
    if nsize == g.size {
        return Err(refuse(format!(
            "the file system is already {old_bytes} bytes: nothing to grow"
        )));
    }
    if v.is_ufs1() && nsize > i32::MAX as u64 {
        return Err(refuse(format!(
            "UFS1 counts fragments in 32 bits: at most {} bytes with {fsize}-byte fragments",
            i32::MAX as u64 * fsize
        )));
    }
    let mut ncg = nsize.div_ceil(fpg);
    // A last group that would hold no data (its end at or before its
    // first data fragment) is not made (growfs.c, main()).
    if !nsize.is_multiple_of(fpg) && nsize <= g.cgdmin(ncg - 1) {
        ncg -= 1;
        nsize = ncg * fpg;
    }
    let unused_bytes = want / fsize * fsize - nsize * fsize;
    if nsize <= g.size {
        return Err(refuse(format!(
            "{} more bytes are too few to add a cylinder group's data here (groups are {} bytes)",
            want - old_bytes,
            fpg * fsize
        )));
    }
    let old_ncg = g.ncg;
    let new_cssize = (ncg * Csum::SIZE as u64).div_ceil(fsize) * fsize;
    let old_csfrags = g.cssize.div_ceil(fsize);
    let new_csfrags = new_cssize.div_ceil(fsize);
    let moved = new_csfrags > old_csfrags;
    let new_csaddr = if moved {
        // The first new group's data area (growfs.c, updcsloc()).
        if ncg == old_ncg {
            return Err(refuse(
                "the summary area must grow and there is no new cylinder group to hold it: grow by at least one group more",
            ));
        }
        let first = old_ncg;
        let room = if first + 1 == ncg {
            nsize
        } else {
            g.cgbase(first) + fpg
        };
        if g.cgdmin(first) + new_csfrags > room {
            return Err(refuse(
                "the summary area must move to the first new cylinder group, which is too small to hold it: grow more",
            ));
        }
        g.cgdmin(first)
    } else {
        g.csaddr
    };

    // The new superblock and its geometry.
    let mut nsb = sb.clone();
    nsb.set_fs_size(sb_field("fs_size", nsize)?);
    nsb.set_fs_ncg(sb_field("fs_ncg", ncg)?);
    nsb.set_fs_cssize(sb_field("fs_cssize", new_cssize)?);
    nsb.set_fs_csaddr(sb_field("fs_csaddr", new_csaddr)?);
    nsb.set_fs_providersize(sb_field("fs_providersize", device / fsize)?);
    let t = p.time.unwrap_or_else(|| crate::fs::now().0);
    nsb.set_fs_time(t);
    // fs_dsize: what the added fragments add, less each new group's
    // metadata and the summary area's growth (growfs.c's updjcg(),
    // initcg(), updcsloc()).
    let last = old_ncg - 1;
    let old_last_frags = g.cg_nfrags(last);
    let new_last_frags = if last + 1 == ncg {
        nsize - g.cgbase(last)
    } else {
        fpg
    };
    let mut dsize = g.dsize + (new_last_frags - old_last_frags);
    for c in old_ncg..ncg {
        let n = if c + 1 == ncg {
            nsize - g.cgbase(c)
        } else {
            fpg
        };
        let meta = g.cgdmin(c) - g.cgsblock(c);
        dsize += n - meta;
    }
    dsize -= new_csfrags - old_csfrags;
    nsb.set_fs_dsize(sb_field("fs_dsize", dsize)?);
    if v.is_ufs1() {
        nsb.set_fs_old_size(sb_field("fs_old_size", nsize)?);
        nsb.set_fs_old_dsize(sb_field("fs_old_dsize", dsize)?);
        nsb.set_fs_old_csaddr(sb_field("fs_old_csaddr", new_csaddr)?);
        nsb.set_fs_old_ncyl(sb_field("fs_old_ncyl", ncg * g.old_cpg.max(1))?);
    }
    let ng = nsb
        .validate(loc)
        .map_err(|e| refuse(format!("the grown superblock would not be valid: {e}")))?;

    // The groups: the formerly last extended, the one holding the old
    // summary area (if it moves) given it back, the new ones built.
    let mut summary_raw = vec![0u8; to_index(g.cssize)];
    dev.read_at(g.csaddr * fsize, &mut summary_raw)?;
    let mut csums: Vec<Csum> = (0..to_index(old_ncg))
        .map(|i| Csum::read(v.endian, &summary_raw, i * Csum::SIZE))
        .collect();
    let ckhash_cg = sb.ckhash_enabled(CK_CYLGRP);
    let mut changed: Vec<Cg> = Vec::new();
    let mut lastcg = read_cg(dev, &g, last)?;
    let old_ndblk = lastcg.cg_ndblk() as u64;
    if old_ndblk != old_last_frags {
        return Err(Error::damaged(
            crate::error::Damage::Superblock,
            format!(
                "cylinder group {last} holds {old_ndblk} fragments where the superblock implies {old_last_frags}: run ufskit fsck first"
            ),
        ));
    }
    // At most fs_fpg, a positive int32 by validation.
    lastcg.set_cg_ndblk(low_u32(new_last_frags));
    if g.contigsumsize > 0 {
        lastcg.set_cg_nclusterblks(low_u32(new_last_frags / g.frag));
    }
    if v.is_ufs1() {
        lastcg.set_cg_old_time(low_i32(t));
    } else {
        lastcg.set_cg_time(t);
    }
    mark(&mut lastcg, old_ndblk, new_last_frags, true);
    changed.push(lastcg);
    if moved {
        let c = g.dtog(g.csaddr);
        let from = g.csaddr - g.cgbase(c);
        if c != last {
            changed.push(read_cg(dev, &g, c)?);
        }
        let cg = changed
            .iter_mut()
            .find(|x| x.cg_cgx() as u64 == c)
            .expect("the group was just read");
        mark(cg, from, from + old_csfrags, true);
    }
    for cg in &mut changed {
        recount_space(cg, &ng);
        csums[cg.cg_cgx() as usize] = cg.cg_cs();
        cg.update_ckhash(ckhash_cg);
    }
    let mut fresh: Vec<Cg> = Vec::new();
    for c in old_ncg..ncg {
        let mut cg = build_cg(&ng, c, t);
        if moved && c == old_ncg {
            let from = new_csaddr - g.cgbase(c);
            mark(&mut cg, from, from + new_csfrags, false);
            recount_space(&mut cg, &ng);
        }
        csums.push(cg.cg_cs());
        cg.update_ckhash(ckhash_cg);
        fresh.push(cg);
    }
    let mut total = CsumTotal::default();
    for s in &csums {
        total.cs_ndir += s.cs_ndir as i64;
        total.cs_nbfree += s.cs_nbfree as i64;
        total.cs_nifree += s.cs_nifree as i64;
        total.cs_nffree += s.cs_nffree as i64;
    }
    let before = sb.fs_cstotal();
    if total.cs_ndir != before.cs_ndir
        // Within ncg * ipg, which the grown superblock's validation keeps
        // within 32 bits.
        || total.cs_nifree != before.cs_nifree + i64::from(low_u32((ncg - old_ncg) * g.ipg))
    {
        return Err(Error::damaged(
            crate::error::Damage::Superblock,
            "the summary area disagrees with the superblock's totals: run ufskit fsck first",
        ));
    }
    total.cs_numclusters = before.cs_numclusters;
    nsb.set_fs_cstotal(total);
    let mut summary = vec![0u8; to_index(new_cssize)];
    for (i, s) in csums.iter().enumerate() {
        s.write(v.endian, &mut summary, i * Csum::SIZE);
    }
    let report = GrowReport {
        old_bytes,
        new_bytes: nsize * fsize,
        old_groups: old_ncg,
        new_groups: ncg,
        summary_moved_to: moved.then_some(new_csaddr),
        unused_bytes,
        written: !p.dry_run,
    };
    if p.dry_run {
        return Ok(report);
    }

    // The device reaches the new end.
    let mut probe = vec![0u8; to_index(fsize)];
    dev.read_at((nsize - 1) * fsize, &mut probe)?;

    // 1. What lies outside the old file system (or in its free space).
    let mut rng = match p.seed {
        Some(s) => rand::rngs::StdRng::seed_from_u64(s),
        None => rand::rngs::StdRng::from_entropy(),
    };
    let ds = v.dinode_size();
    let backup = |c: u64| {
        let mut b = nsb.clone();
        b.set_fs_sblockactualloc(to_signed(ng.cgsblock(c) * fsize));
        b.to_disk_bytes()
    };
    for cg in &fresh {
        let c = cg.cg_cgx() as u64;
        let inodes = if v.is_ufs1() {
            ng.ipg
        } else {
            cg.cg_initediblk() as u64
        };
        let mut raw = vec![0u8; to_index(inodes) * ds];
        for out in raw.chunks_exact_mut(ds) {
            let mut di = Dinode::default();
            di.set_di_gen(rng.gen_range(1..=u32::MAX));
            di.encode_into(v, out, false);
        }
        dev.write_at(ng.cgimin(c) * fsize, &raw)?;
        dev.write_at(ng.cgtod(c) * fsize, cg.as_bytes())?;
        dev.write_at(ng.cgsblock(c) * fsize, &backup(c))?;
    }
    if moved {
        dev.write_at(new_csaddr * fsize, &summary)?;
    }
    dev.flush()?;

    // 2. The switch: the new primary, marked not clean until step 3 is done.
    let mut switching = nsb.clone();
    switching.set_fs_clean(0);
    switching.set_fs_sblockactualloc(to_signed(ng.sblockloc));
    dev.write_at(ng.sblockloc, &switching.to_disk_bytes())?;
    dev.flush()?;

    // 3. In place: the changed groups, and the summary where it stays.
    for cg in &changed {
        dev.write_at(ng.cgtod(cg.cg_cgx() as u64) * fsize, cg.as_bytes())?;
    }
    if !moved {
        dev.write_at(new_csaddr * fsize, &summary)?;
    }
    dev.flush()?;

    // 4. Clean, and every copy of the superblock new.
    let mut primary = nsb.clone();
    primary.set_fs_sblockactualloc(to_signed(ng.sblockloc));
    dev.write_at(ng.sblockloc, &primary.to_disk_bytes())?;
    for c in 0..old_ncg {
        dev.write_at(ng.cgsblock(c) * fsize, &backup(c))?;
    }
    if !v.is_ufs1() {
        write_recovery_record(dev, &ng)?;
    }
    dev.flush()?;
    Ok(report)
}
