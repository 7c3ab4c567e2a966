//! Setup: finding and validating the superblock (`setup.c`, `readsuper`,
//! `sbsearch`, `validate_sblock`).
//!
//! Search order: the standard locations (65536, 8192, 0, 262144); the first
//! UFS1 or UFS2 superblock, in either byte order, that validates is used, a
//! bad check-hash being reported and repaired. A UFS1 superblock read at
//! 65536 is the backup of a group with 64 KiB blocks and is skipped, as
//! FreeBSD's `readsuper` skips it. If none validates, alternates are tried:
//! every group's backup (`cgsblock`) of a prototype taken from a damaged
//! standard copy or from the fsrecovery record below byte 65536, and
//! finally the first group's backup for every plausible block/fragment
//! size. A UFS1 file system in the pre-4.4BSD format is refused as
//! `Incompatible`, as FreeBSD's fsck refuses it.
use super::*;
use ufs_format::bytes::{to_i32, to_index};

const SB_MASK_FLAGS: i32 = 0x00FF_FFFF;

/// A superblock field as a number, for comparisons with a backup.
type SbField = fn(&Superblock) -> i64;

struct Candidate {
    sb: Superblock,
    g: Geometry,
    loc: u64,
    hash_ok: bool,
}

/// Applies the in-memory masks FreeBSD applies before hashing.
fn mask(sb: &mut Superblock) {
    let flags = sb.fs_flags();
    let mut ck = sb.fs_metackhash();
    if flags & FS_METACKHASH == 0 {
        ck = 0;
    }
    sb.set_fs_metackhash(ck & CK_SUPPORTED);
    sb.set_fs_flags(flags & SB_MASK_FLAGS);
}

fn pow2_in(v: i64, lo: i64, hi: i64) -> bool {
    v >= lo && v <= hi && u64::try_from(v).is_ok_and(u64::is_power_of_two)
}

/// Checks beyond `Superblock::validate` that fsck relies on.
fn extra_checks(sb: &Superblock, g: &Geometry, devsize: u64) -> std::result::Result<(), String> {
    // The summary area lies in one group's data area and does not end on
    // the group boundary (validate_sblock's rule).
    let csfrags = g.cssize.div_ceil(g.fsize);
    let c = g.dtog(g.csaddr);
    if g.csaddr < g.cgdmin(c) {
        return Err(format!(
            "fs_csaddr {} lies inside the metadata of cylinder group {c}",
            g.csaddr
        ));
    }
    if g.dtog(g.csaddr + csfrags) > c {
        return Err(format!(
            "summary area at {} ({csfrags} fragments) crosses a cylinder group",
            g.csaddr
        ));
    }
    // The last group must hold its own metadata.
    if g.cgdmin(g.ncg - 1) > g.size {
        return Err(format!(
            "last cylinder group ({} fragments) is smaller than its metadata",
            g.size - g.cgbase(g.ncg - 1)
        ));
    }
    if g.size < 8 * g.frag {
        return Err(format!("fs_size {} is below the minimum", g.size));
    }
    if g.fpg < 3 * g.frag {
        return Err(format!("fs_fpg {} is below 3 blocks", g.fpg));
    }
    let bytes = g.size.checked_mul(g.fsize);
    if bytes.is_none_or(|b| b > devsize) {
        return Err(format!(
            "file system of {} fragments of {} bytes is larger than the device ({devsize} bytes)",
            g.size, g.fsize
        ));
    }
    if sb.fs_sbsize() % 512 != 0 {
        return Err(format!(
            "fs_sbsize {} is not a multiple of 512",
            sb.fs_sbsize()
        ));
    }
    Ok(())
}

/// What reading the superblock at `loc` gives: None when there is none
/// (no magic, or a copy that is not a primary), Err with what is wrong.
fn try_candidate(
    dev: &dyn BlockDevice,
    loc: u64,
) -> std::result::Result<Option<Candidate>, FormatError> {
    let at = |e: String| FormatError::corrupt(format!("superblock at byte {loc}"), e);
    if loc
        .checked_add(SBLOCKSIZE as u64)
        .is_none_or(|e| e > dev.size())
    {
        return Ok(None);
    }
    let mut buf = vec![0u8; SBLOCKSIZE];
    dev.read_at(loc, &mut buf).map_err(|e| at(e.to_string()))?;
    match Superblock::sniff(&buf) {
        Some((_, FS_UFS2_MAGIC | FS_UFS1_MAGIC)) => {}
        _ => return Ok(None),
    }
    let mut sb = Superblock::from_bytes(&buf)?;
    if sb.variant().is_ufs1() && loc == SBLOCK_UFS2 {
        return Ok(None);
    }
    if sb.variant().is_ufs1() && crate::fs::is_apple_ufs(dev) {
        return Err(FormatError::Unsupported(crate::fs::APPLE_UFS.into()));
    }
    mask(&mut sb);
    let hash_ok = !sb.ckhash_enabled(CK_SUPERBLOCK) || sb.compute_ckhash() == sb.fs_ckhash();
    sb.compat_read(sb.primary_location(loc));
    let g = match sb.validate(loc) {
        Ok(g) => g,
        Err(FormatError::Corrupt { what, detail }) => {
            return Err(at(format!("{what}: {detail}")));
        }
        Err(e) => return Err(e),
    };
    extra_checks(&sb, &g, dev.size()).map_err(at)?;
    Ok(Some(Candidate {
        sb,
        g,
        loc,
        hash_ok,
    }))
}

/// Offsets of backup superblocks worth trying when no standard copy works.
fn alternate_locations(dev: &dyn BlockDevice, protos: &[Superblock]) -> Vec<u64> {
    let mut out: Vec<u64> = Vec::new();
    let push = |v: u64, out: &mut Vec<u64>| {
        if !out.contains(&v)
            && v.checked_add(SBLOCKSIZE as u64)
                .is_some_and(|e| e <= dev.size())
        {
            out.push(v);
        }
    };
    let add_proto = |fsize: u64, sblkno: u64, fpg: u64, ncg: u64, out: &mut Vec<u64>| {
        if !(512..=65536).contains(&fsize)
            || !fsize.is_power_of_two()
            || fpg == 0
            || sblkno >= fpg
            || ncg == 0
        {
            return;
        }
        for c in 0..ncg.min(1 << 20) {
            let Some(off) = c
                .checked_mul(fpg)
                .and_then(|f| f.checked_add(sblkno))
                .and_then(|f| f.checked_mul(fsize))
            else {
                break;
            };
            if off >= dev.size() {
                break;
            }
            push(off, out);
        }
    };
    // Prototypes from damaged standard copies (fsck_ffs' UFS_FSRONLY read).
    let positive = |v: i32| u64::try_from(v).ok().filter(|&v| v > 0);
    for p in protos {
        if let (Some(fsize), Some(sblkno), Some(fpg)) = (
            positive(p.fs_fsize()),
            positive(p.fs_sblkno()),
            positive(p.fs_fpg()),
        ) {
            add_proto(fsize, sblkno, fpg, u64::from(p.fs_ncg()), &mut out);
        }
    }
    // The fsrecovery record in the last 20 bytes before 65536.
    if dev.size() >= 65536 {
        let mut r = [0u8; 20];
        if dev.read_at(65536 - 20, &mut r).is_ok() {
            if let Some(rec) = ufs_format::sb::FsRecovery::parse(&r) {
                if let (true, Some(sblkno), Some(fpg)) = (
                    (0..8).contains(&rec.fsbtodb),
                    positive(rec.sblkno),
                    positive(rec.fpg),
                ) {
                    add_proto(
                        512u64 << rec.fsbtodb,
                        sblkno,
                        fpg,
                        u64::from(rec.ncg),
                        &mut out,
                    );
                }
            }
        }
    }
    // The first group's backup for every plausible geometry.
    for sblockloc in [SBLOCK_UFS2, SBLOCK_UFS1] {
        let mut fsize = 512u64;
        while fsize <= 65536 {
            for frag in [8u64, 4, 2, 1] {
                if fsize * frag < MINBSIZE as u64 || fsize * frag > MAXBSIZE as u64 {
                    continue;
                }
                let sblkno = (sblockloc + SBLOCKSIZE as u64)
                    .div_ceil(fsize)
                    .div_ceil(frag)
                    * frag;
                push(sblkno * fsize, &mut out);
            }
            fsize *= 2;
        }
    }
    out
}

pub(super) fn setup<'a>(dev: &'a dyn BlockDevice, mode: FsckMode) -> Result<Ctx<'a>> {
    if dev.size() < SBLOCK_UFS1 + SBLOCKSIZE as u64 {
        return Err(Error::corrupt(format!(
            "device of {} bytes is too small to hold a UFS file system",
            dev.size()
        )));
    }
    let mut first_err: Option<String> = None;
    let mut protos: Vec<Superblock> = Vec::new();
    let mut chosen: Option<Candidate> = None;
    for loc in SBLOCKSEARCH {
        if loc + SBLOCKSIZE as u64 > dev.size() {
            continue;
        }
        let mut buf = vec![0u8; SBLOCKSIZE];
        dev.read_at(loc, &mut buf)?;
        if let Some((_, FS_BAD_MAGIC)) = Superblock::sniff(&buf) {
            // FreeBSD stops the search here: a newfs was interrupted, and
            // backups found further on may belong to an older file system.
            return Err(Error::corrupt(format!(
                "superblock at byte {loc} has FS_BAD_MAGIC: a previous newfs did not complete"
            )));
        }
        match try_candidate(dev, loc) {
            Ok(Some(c)) => {
                chosen = Some(c);
                break;
            }
            Ok(None) => {}
            Err(FormatError::Unsupported(why)) => {
                return Err(Error::new(ErrorKind::Incompatible, why));
            }
            Err(e) => {
                if let Ok(p) = Superblock::from_bytes(&buf) {
                    protos.push(p);
                }
                first_err.get_or_insert(e.to_string());
            }
        }
    }
    let mut from_alternate = false;
    if chosen.is_none() {
        for loc in alternate_locations(dev, &protos) {
            if let Ok(Some(c)) = try_candidate(dev, loc) {
                if c.hash_ok {
                    chosen = Some(c);
                    from_alternate = true;
                    break;
                }
            }
        }
    }
    let Some(cand) = chosen else {
        let why = first_err.unwrap_or_else(|| {
            "no UFS1 or UFS2 superblock magic, in either byte order, at any standard location"
                .into()
        });
        return Err(Error::corrupt(format!(
            "no usable superblock ({why}); search for an alternate superblock failed"
        )));
    };
    let g = cand.g;
    let sb = cand.sb;
    let ck = |w: u32| (sb.fs_flags() & FS_METACKHASH) != 0 && (sb.fs_metackhash() & w) != 0;
    let (ck_cg, ck_inode) = (ck(CK_CYLGRP), ck(CK_INODE));
    let nbits = g.size.div_ceil(g.frag) * g.frag;
    let mut cs_raw = vec![0u8; to_index(g.cssize)];
    dev.read_at(g.csaddr * g.fsize, &mut cs_raw)?;
    let maxfilesize = {
        let b = g.bsize as u128;
        let n = g.nindir as u128;
        let v = b * 12 - 1 + b * n + b * n * n + b * n * n * n;
        u64::try_from(v).unwrap_or(u64::MAX)
    };
    let was_clean = sb.fs_clean() == 1 && sb.fs_flags() & (FS_UNCLEAN | FS_NEEDSFSCK) == 0;
    let mut ctx = Ctx {
        progress: None,
        snapshots_check_only: Vec::new(),
        dev,
        mode,
        sb,
        g,
        sb_loc: cand.loc,
        sb_dirty: false,
        fix_alt_sb: None,
        cs_raw,
        cs_dirty: false,
        ck_inode,
        ck_cg,
        maxfilesize,
        file_size_limit: if g.v.is_ufs1() {
            maxfilesize.min((1u64 << 30) * g.bsize - 1)
        } else {
            maxfilesize
        },
        findings: Vec::new(),
        modified: false,
        needs_rerun: false,
        halted: false,
        hands_off: false,
        dirty_finding: None,
        was_clean,
        used: Bitmap::new(nbits),
        dups: HashMap::new(),
        claim_limit: HashMap::new(),
        cgs: Vec::new(),
        dirs: Vec::new(),
        dir_index: HashMap::new(),
        children: HashMap::new(),
        lfdir: 0,
        toggled_frags: HashSet::new(),
        toggled_inos: HashSet::new(),
        p5: Pass5Kinds::default(),
        recheck: Vec::new(),
        insert_hint: HashMap::new(),
        linkup_error: None,
        totals: None,
    };
    match ctx.check_superblock(from_alternate, first_err, cand.hash_ok) {
        Ok(()) => {}
        Err(Halt::Stop) => ctx.halted = true,
        Err(Halt::Err(e)) => return Err(e),
    }
    Ok(ctx)
}

impl Ctx<'_> {
    fn check_superblock(
        &mut self,
        from_alternate: bool,
        why: Option<String>,
        hash_ok: bool,
    ) -> R<()> {
        const P: &str = "superblock";
        if !self.was_clean {
            let i = self.push(
                P,
                Severity::Preen,
                None,
                format!(
                    "FILE SYSTEM NOT MARKED CLEAN (fs_clean={}, fs_flags={:#x})",
                    self.sb.fs_clean(),
                    self.sb.fs_flags()
                ),
                false,
            );
            self.dirty_finding = Some(i);
        }
        if from_alternate {
            let why = why.unwrap_or_else(|| "no valid superblock at the standard locations".into());
            // Until the repair is accepted the alternate must not be
            // written over the standard location.
            self.hands_off = true;
            if self.ask(
                P,
                Severity::Inconsistency,
                None,
                format!("STANDARD SUPERBLOCK UNUSABLE ({why}); USING ALTERNATE AT BYTE {}; UPDATE STANDARD SUPERBLOCK", self.sb_loc),
            )? {
                self.sb_dirty = true;
                self.hands_off = false;
            }
        } else {
            if !hash_ok
                && self.ask(
                    P,
                    Severity::Preen,
                    None,
                    "SUPERBLOCK CHECK HASH FAILED; CORRECT CHECK HASH",
                )?
            {
                self.sb_dirty = true;
            }
        }
        if self.sb.fs_optim() != FS_OPTTIME
            && self.sb.fs_optim() != FS_OPTSPACE
            && self.ask(
                P,
                Severity::Inconsistency,
                None,
                format!(
                    "UNDEFINED OPTIMIZATION {} IN SUPERBLOCK; SET TO DEFAULT",
                    self.sb.fs_optim()
                ),
            )?
        {
            self.sb.set_fs_optim(FS_OPTTIME);
            self.sb_dirty = true;
        }
        if self.sb.fs_maxfilesize() != self.maxfilesize
            && self.ask(
                P,
                Severity::Inconsistency,
                None,
                format!(
                    "fs_maxfilesize {} SHOULD BE {}; FIX",
                    self.sb.fs_maxfilesize(),
                    self.maxfilesize
                ),
            )?
        {
            self.sb.set_fs_maxfilesize(self.maxfilesize);
            self.sb_dirty = true;
        }
        let mb = self.sb.fs_maxbsize() as i64;
        // fs_bsize is at most 64 KiB by validation.
        let bs32 = to_i32(self.g.bsize);
        let bs = i64::from(bs32);
        if mb != 0
            && !pow2_in(mb, bs, 16 * bs)
            && self.ask(
                P,
                Severity::Inconsistency,
                None,
                format!("fs_maxbsize {mb} SHOULD BE {bs}; FIX"),
            )?
        {
            self.sb.set_fs_maxbsize(bs32);
            self.sb_dirty = true;
        }
        let ms = self.sb.fs_metaspace();
        if !u64::try_from(ms).is_ok_and(|m| m <= self.g.fpg / 2)
            && self.ask(
                P,
                Severity::Inconsistency,
                None,
                format!("fs_metaspace {ms} OUT OF RANGE; SET TO 0"),
            )?
        {
            self.sb.set_fs_metaspace(0);
            self.sb_dirty = true;
        }
        self.check_snapshots()?;
        if !from_alternate {
            self.compare_last_alternate()?;
        }
        Ok(())
    }

    /// The snapshot list: entries that are not snapshot files are removed
    /// (as fsck_ffs does). Real snapshots are checked as files whose block
    /// maps may hold `BLK_NOCOPY` and `BLK_SNAP` (`walk.rs`); with any, the
    /// run only checks: FreeBSD's fsck copies a block into the snapshots
    /// before it frees or rewrites it (`snapblkfree`, `copyonwrite`), which
    /// ufskit's does not.
    fn check_snapshots(&mut self) -> R<()> {
        use ufs_format::SF_SNAPSHOT;
        let list: Vec<u32> = (0..FSMAXSNAP).map(|i| self.sb.fs_snapinum(i)).collect();
        if list.iter().all(|&s| s == 0) {
            return Ok(());
        }
        let mut keep = Vec::new();
        let mut bad = Vec::new();
        for &s in list.iter().filter(|&&s| s != 0) {
            let ino = s as u64;
            let real = ino >= UFS_ROOTINO && ino < self.maxino() && {
                let di = self.read_inode(ino)?;
                di.is_reg() && di.di_flags() & SF_SNAPSHOT != 0
            };
            if real {
                keep.push(s);
            } else {
                bad.push(s);
            }
        }
        if !keep.is_empty() && self.mode != FsckMode::Check {
            // Checked in full, repaired not at all: ufskit's fsck does not
            // copy blocks into snapshots before changing them.
            self.mode = FsckMode::Check;
            self.snapshots_check_only = keep.clone();
        }
        if !bad.is_empty()
            && self.ask(
                "superblock",
                Severity::Preen,
                None,
                format!("REMOVING NON-SNAPSHOT INODES {bad:?} FROM SNAPSHOT LIST"),
            )?
        {
            for i in 0..FSMAXSNAP {
                let v = keep.get(i).copied().unwrap_or(0);
                self.sb.set_fs_snapinum(i, v);
            }
            self.sb_dirty = true;
        }
        Ok(())
    }

    /// fsck_ffs 13's comparison of the superblock with the backup in the
    /// last cylinder group.
    fn compare_last_alternate(&mut self) -> R<()> {
        let g = self.g;
        let off = g.cgsblock(g.ncg - 1) * g.fsize;
        if off == self.sb_loc || off + SBLOCKSIZE as u64 > self.dev.size() {
            return Ok(());
        }
        let raw = self.read_bytes(off, SBLOCKSIZE)?;
        let me = &self.sb;
        let diff: Vec<&str> = match Superblock::from_bytes(&raw) {
            Ok(alt) if alt.byte_order() == me.byte_order() => {
                // The fields fsck_ffs 13 compares, all 32-bit.
                let fields: [(&str, SbField); 21] = [
                    ("fs_sblkno", |s| s.fs_sblkno() as i64),
                    ("fs_cblkno", |s| s.fs_cblkno() as i64),
                    ("fs_iblkno", |s| s.fs_iblkno() as i64),
                    ("fs_dblkno", |s| s.fs_dblkno() as i64),
                    ("fs_ncg", |s| s.fs_ncg() as i64),
                    ("fs_bsize", |s| s.fs_bsize() as i64),
                    ("fs_fsize", |s| s.fs_fsize() as i64),
                    ("fs_frag", |s| s.fs_frag() as i64),
                    ("fs_bmask", |s| s.fs_bmask() as i64),
                    ("fs_fmask", |s| s.fs_fmask() as i64),
                    ("fs_bshift", |s| s.fs_bshift() as i64),
                    ("fs_fshift", |s| s.fs_fshift() as i64),
                    ("fs_fragshift", |s| s.fs_fragshift() as i64),
                    ("fs_fsbtodb", |s| s.fs_fsbtodb() as i64),
                    ("fs_sbsize", |s| s.fs_sbsize() as i64),
                    ("fs_nindir", |s| s.fs_nindir() as i64),
                    ("fs_inopb", |s| s.fs_inopb() as i64),
                    ("fs_cssize", |s| s.fs_cssize() as i64),
                    ("fs_ipg", |s| s.fs_ipg() as i64),
                    ("fs_fpg", |s| s.fs_fpg() as i64),
                    ("fs_magic", |s| s.fs_magic() as i64),
                ];
                fields
                    .iter()
                    .filter(|(_, f)| f(&alt) != f(me))
                    .map(|(n, _)| *n)
                    .collect()
            }
            _ => vec!["fs_magic"],
        };
        if !diff.is_empty()
            && self.ask(
                "superblock",
                Severity::Inconsistency,
                None,
                format!(
                    "VALUES IN SUPER BLOCK DISAGREE WITH THOSE IN LAST ALTERNATE AT BYTE {off} ({}); REWRITE ALTERNATE",
                    diff.join(", ")
                ),
            )?
        {
            self.fix_alt_sb = Some(off);
        }
        Ok(())
    }
}
