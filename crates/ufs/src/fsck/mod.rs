//! `fsck` for UFS2 as library code, following the phases and repair rules of
//! FreeBSD 14's `fsck_ffs` (facts from `sbin/fsck_ffs`; this is an
//! independent implementation).
//!
//! Phases:
//! - setup (`setup.rs`): find a usable superblock (standard locations, then
//!   alternates), validate it, verify its check-hash, compare it with the
//!   last cylinder group's backup copy, read the summary area;
//! - pass 1 (`pass1.rs`): check every cylinder-group header and every inode
//!   below `cg_initediblk`, claim every block in a bitmap of `fs_size` bits,
//!   find bad and duplicate claims; pass 1b names every owner of a
//!   duplicate block;
//! - pass 2 (`pass2.rs`): check every directory entry, `.` and `..`, link
//!   references and entry types;
//! - pass 3 (`pass34.rs`): reconnect unreachable directories to `lost+found`
//!   and bring directory depths up to date;
//! - pass 4 (`pass34.rs`): link counts, unreferenced and doomed inodes;
//! - pass 5 (`pass5.rs`): rebuild every cylinder group from the bitmap and the
//!   inode states and compare it with the disk, then the summary totals.
//!
//! Modes: [`FsckMode::Check`] never writes. [`FsckMode::Preen`] repairs only
//! the problems an unclean shutdown produces ([`Severity::Preen`]) and stops
//! at the first other inconsistency, as `fsck_ffs -p` does. [`FsckMode::Yes`]
//! repairs everything it can.
//!
//! Invariants: every value read from disk is range-checked before it is used
//! as an address or index; memory is one bit per fragment plus per-inode
//! state only for the initialised part of each group's inode table (trimmed
//! to the last allocated inode); a cylinder group is held in memory one at a
//! time. Check mode never calls `write_at` (the write path refuses it).
//!
//! Where this differs from `fsck_ffs` (deliberately):
//! - Preen checks a file system even when it is marked clean (`fsck_ffs -p`
//!   skips it unless `-f`); callers wanting the boot-time shortcut test
//!   `fs_clean` themselves.
//! - No journal (SU+J) replay, gjournal, background mode, `-b`/`-c`/`-r`
//!   /`-E`/`-Z`. Snapshots are checked as foreground fsck_ffs checks them:
//!   as files whose block maps may hold `BLK_NOCOPY` and `BLK_SNAP`
//!   (`walk.rs`); no snapshot is taken for a background check. Soft-updates refinements
//!   (stricter preen severities, trimming by the inode map) are not applied.
//! - The superblock is also compared with the last group's backup (as
//!   `fsck_ffs` 13 did); makefs' UFS2 layout with the superblock at 8192 is
//!   accepted.
//! - Directory depths: a check-only run reports wrong `di_dirdepth` values
//!   only when the file system tracks depths (no directory but the root at
//!   depth 0); one that never did (makefs images) is not reported, and a
//!   repairing run starts tracking ("UPDATING FILESYSTEM TO TRACK DIRECTORY
//!   DEPTH"). Depths are fixed after pass 3 from the final tree, so one run
//!   suffices.
//! - Repairs that make `fsck_ffs` ask for a rerun are completed in one run:
//!   a directory with a hole is truncated with its later blocks released; an
//!   inode abandoned after too many bad or duplicate blocks releases exactly
//!   the blocks it claimed; an unreachable directory that is cleared gives
//!   back the references its entries held before link counts are judged.
//! - An inode that cannot be reconnected (no free inode or block for
//!   lost+found) is cleared, and the finding says so.
//! - Pass 5 reports each kind of group problem once, with the number of
//!   groups affected (as `fsck_ffs` fixes the rest silently).
use crate::dev::BlockDevice;
use crate::error::{Error, ErrorKind, Result};
use std::collections::{HashMap, HashSet};
use ufs_format::bytes::{to_index, to_signed};
use ufs_format::sb::Csum;
use ufs_format::*;

mod bitmap;
mod dirops;
mod pass1;
mod pass2;
mod pass34;
mod pass5;
mod setup;
mod walk;

use bitmap::Bitmap;

/// How much fsck may change.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum FsckMode {
    /// `-n`: report only, never write.
    Check,
    /// `-p`: fix only what is safe without asking; stop at anything else.
    Preen,
    /// `-y`: fix everything.
    Yes,
}

/// Class of a finding.
#[derive(Clone, Copy, PartialEq, Eq, Debug, serde::Serialize)]
pub enum Severity {
    /// What an interrupted but otherwise correct system leaves behind and
    /// preen repairs silently: unreferenced blocks and inodes (bitmaps),
    /// link counts too high, summary and counter mismatches, the clean flag,
    /// block counts, check-hashes, directory depths.
    Preen,
    /// Everything else.
    Inconsistency,
}

/// One problem found.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Finding {
    /// Phase that found it: "superblock", "pass1", "pass1b", "pass2",
    /// "pass3", "pass4", "pass5" or "finish".
    pub pass: String,
    pub severity: Severity,
    pub ino: Option<u64>,
    pub message: String,
    /// The problem was repaired on disk.
    pub fixed: bool,
}

impl Finding {
    /// Whether this is damage ordered writes may leave after a crash (the
    /// write-ordering issue's rule, after McKusick and Ganger): what preen
    /// repairs silently, except resources in use that the bitmaps call
    /// free. Blocks and inodes marked used but unreferenced, link counts
    /// too high, counters and the clean flag are within it.
    pub fn within_crash_guarantee(&self) -> bool {
        self.severity == Severity::Preen && !self.message.starts_with(pass5::USED_MARKED_FREE)
    }
}

/// Result of a run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct FsckReport {
    pub findings: Vec<Finding>,
    /// Allocated inodes of every type, directories included (as fsck_ffs
    /// counts "files").
    pub files: u64,
    /// Allocated directories.
    pub dirs: u64,
    /// Fragments in use (data area: `fs_dsize` minus free).
    pub used_frags: u64,
    /// Free fragments (`nbfree * frag + nffree`).
    pub free_frags: u64,
    /// Something was written to repair the file system (marking it clean
    /// alone does not count).
    pub modified: bool,
    /// The file system was left consistent.
    pub clean: bool,
    /// Repairs were made that need another run to complete.
    pub needs_rerun: bool,
}

impl FsckReport {
    /// Exit status with `fsck_ffs` conventions:
    /// - 0: the file system is consistent, either because nothing was found
    ///   or because everything found was repaired (so 0 does not mean "no
    ///   findings");
    /// - 8: a problem was left unrepaired: `Check` found anything, `Preen`
    ///   met an inconsistency it may not repair (it stops there), or `Yes`
    ///   could not repair something;
    /// - 16: everything found was repaired but fsck must be run again to
    ///   finish (`fsck_ffs`' "PLEASE RERUN FSCK").
    ///
    /// (Setup failures are returned as `Err`; `fsck_ffs` exits 8 for them.)
    pub fn exit_code(&self) -> i32 {
        if self.findings.iter().any(|f| !f.fixed) {
            8
        } else if self.needs_rerun {
            16
        } else {
            0
        }
    }
}

/// Checks (and, depending on `mode`, repairs) the file system on `dev`
/// (UFS1 or UFS2, either byte order).
///
/// Returns `Err` with kind `Corrupt` when no usable superblock exists, and `Io` for device errors.
/// Every inconsistency inside the file system is a [`Finding`].
pub fn fsck(dev: &dyn BlockDevice, mode: FsckMode) -> Result<FsckReport> {
    fsck_with_progress(dev, mode, &mut |_| {})
}

/// Where a check is: its phase (`"pass 1"` ... `"pass 5"`), and how many
/// of the phase's units (cylinder groups in passes 1 and 5, directories
/// in pass 2, one for the others) are done out of how many.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    pub phase: &'static str,
    pub done: u64,
    pub total: u64,
}

/// [`fsck`], telling `progress` where it is (for a progress bar on large
/// images): at the start of each pass and after each unit of work.
pub fn fsck_with_progress(
    dev: &dyn BlockDevice,
    mode: FsckMode,
    progress: &mut dyn FnMut(Progress),
) -> Result<FsckReport> {
    let mut ctx = setup::setup(dev, mode)?;
    ctx.progress = Some(progress);
    if !ctx.halted {
        match ctx.run_passes() {
            Ok(()) => {}
            Err(Halt::Stop) => ctx.halted = true,
            Err(Halt::Err(e)) => return Err(e),
        }
    }
    if !ctx.snapshots_check_only.is_empty() && !ctx.findings.is_empty() {
        let snaps = ctx.snapshots_check_only.clone();
        ctx.push(
            "superblock",
            Severity::Inconsistency,
            None,
            format!(
                "FILE SYSTEM HAS SNAPSHOTS (INODES {snaps:?}): CHECKED ONLY, NOTHING REPAIRED \
                 (A REPAIR WOULD HAVE TO COPY BLOCKS INTO THE SNAPSHOTS; REMOVE THEM ON FREEBSD \
                 OR USE FREEBSD'S FSCK_FFS)"
            ),
            false,
        );
    }
    match ctx.finish() {
        Ok(r) => Ok(r),
        Err(Halt::Stop) => Err(Error::new(ErrorKind::Io, "fsck stopped while finishing")),
        Err(Halt::Err(e)) => Err(e),
    }
}

/// Why a pass stopped early.
pub(crate) enum Halt {
    /// Preen met an inconsistency, or a check-only run met a problem fsck
    /// cannot go past (the report says which).
    Stop,
    Err(Error),
}

impl From<Error> for Halt {
    fn from(e: Error) -> Self {
        Halt::Err(e)
    }
}

pub(crate) type R<T> = std::result::Result<T, Halt>;

// Inode states (fsck_ffs' USTATE ... DZLINK).
pub(crate) const USTATE: u8 = 0;
pub(crate) const FSTATE: u8 = 1;
pub(crate) const DSTATE: u8 = 2;
pub(crate) const DFOUND: u8 = 3;
pub(crate) const DCLEAR: u8 = 4;
pub(crate) const FCLEAR: u8 = 5;
pub(crate) const FZLINK: u8 = 6;
pub(crate) const DZLINK: u8 = 7;

pub(crate) fn is_dir_state(s: u8) -> bool {
    matches!(s, DSTATE | DFOUND | DCLEAR | DZLINK)
}
pub(crate) fn is_dunfound(s: u8) -> bool {
    matches!(s, DSTATE | DZLINK)
}

/// Per-inode state for an examined inode: 8 bytes.
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct InoInfo {
    pub state: u8,
    /// `IFTODT(mode)`.
    pub dtype: u8,
    /// Link count still unaccounted for: `di_nlink` minus the references
    /// found so far.
    pub linkcnt: i32,
}

/// Per-cylinder-group bookkeeping.
#[derive(Default)]
pub(crate) struct CgInfo {
    /// `cg_initediblk` as found on disk (clamped to `fs_ipg`).
    pub initediblk_disk: u32,
    /// Number of inode slots examined (and allocatable by fsck).
    pub initediblk: u32,
    /// The header failed its integrity check.
    pub corrupt: bool,
    /// Rebuild it from scratch in pass 5 (corrupt and repair accepted).
    pub rebuild: bool,
    /// States of inodes `0..inos.len()` of the group; missing = USTATE.
    pub inos: Vec<InoInfo>,
}

/// What fsck knows about a directory (`struct inoinfo`).
#[derive(Clone, Debug)]
pub(crate) struct DirInfo {
    pub ino: u64,
    /// Directory holding the name that reaches it (0 = none found yet).
    pub parent: u64,
    /// What its `..` entry says (0 = not seen yet, `NO_DOTDOT` = missing).
    pub dotdot: u64,
    /// The `..` entry was counted as a reference to `dotdot`.
    pub dotdot_counted: bool,
    pub size: u64,
    /// `di_dirdepth` as on disk.
    pub depth: u32,
    pub first_blk: u64,
    /// Created by this run (lost+found, new root).
    pub created: bool,
}

pub(crate) const NO_DOTDOT: u64 = u64::MAX;

/// Counters of pass-5 message kinds (fsck_ffs reports each kind once and
/// then repairs the rest silently).
#[derive(Default)]
pub(crate) struct Pass5Kinds {
    pub csum: Option<usize>,
    pub header: Option<usize>,
    pub maps: Option<usize>,
    pub csum_n: u64,
    pub header_n: u64,
    pub maps_n: u64,
    pub lost: Option<usize>,
    pub lost_n: u64,
}

pub(crate) struct Ctx<'a> {
    pub dev: &'a dyn BlockDevice,
    /// Told where the check is ([`fsck_with_progress`]).
    pub progress: Option<&'a mut dyn FnMut(Progress)>,
    /// Repairs were asked for but the file system has snapshots (these
    /// inodes): it is only checked, since a repair would have to copy
    /// blocks into them first (fsck_ffs's `copyonwrite`, `snapblkfree`).
    pub snapshots_check_only: Vec<u32>,
    pub mode: FsckMode,
    /// The superblock as read (its `fs_sbsize` bytes), masked and brought
    /// up to date as FreeBSD's fsck does.
    pub sb: Superblock,
    pub g: Geometry,
    /// Byte offset the superblock was read from.
    pub sb_loc: u64,
    /// Write the superblock at the end.
    pub sb_dirty: bool,
    /// Write a copy of the superblock over the last group's backup.
    pub fix_alt_sb: Option<u64>,
    /// The summary area as read (`fs_cssize` bytes).
    pub cs_raw: Vec<u8>,
    pub cs_dirty: bool,
    pub ck_inode: bool,
    pub ck_cg: bool,
    /// `fs_maxfilesize` as the formula gives it.
    pub maxfilesize: u64,
    /// The largest size an inode may have (`chkfilesize`, fsutil.c): the
    /// formula's, and for UFS1 at most 2^30 blocks less a byte.
    pub file_size_limit: u64,
    pub findings: Vec<Finding>,
    pub modified: bool,
    pub needs_rerun: bool,
    pub halted: bool,
    /// Leave the device untouched at the end (the superblock in memory is
    /// not one fsck may write: an alternate nobody agreed to install, or a
    /// file system fsck does not understand).
    pub hands_off: bool,
    /// Index of the "not marked clean" finding, fixed only if the run ends
    /// with the file system marked clean.
    pub dirty_finding: Option<usize>,
    pub was_clean: bool,
    /// One bit per fragment: in use.
    pub used: Bitmap,
    /// Extra claims of fragments claimed more than once.
    pub dups: HashMap<u64, u32>,
    /// Inodes pass 1 gave up on part way: (runs claimed, fragments claimed
    /// of the next run), so that clearing releases exactly those.
    pub claim_limit: HashMap<u64, (u64, u64)>,
    pub cgs: Vec<CgInfo>,
    pub dirs: Vec<DirInfo>,
    pub dir_index: HashMap<u64, usize>,
    /// Directory → directories whose parent it is.
    pub children: HashMap<u64, Vec<u64>>,
    pub lfdir: u64,
    /// Fragments and inodes whose allocation state fsck itself changed
    /// (lost+found, new root): pass 5 compares the disk with the state
    /// before these changes.
    pub toggled_frags: HashSet<u64>,
    pub toggled_inos: HashSet<u64>,
    pub p5: Pass5Kinds,
    /// Inodes whose link count must be re-examined at the end of pass 4.
    pub recheck: Vec<u64>,
    /// Directory → logical block of its last successful insertion.
    pub insert_hint: HashMap<u64, u64>,
    /// Why the last reconnection to lost+found failed.
    pub linkup_error: Option<String>,
    /// Totals computed by pass 5.
    pub totals: Option<ufs_format::CsumTotal>,
}

impl<'a> Ctx<'a> {
    fn run_passes(&mut self) -> R<()> {
        let ncg = self.g.ncg;
        self.report("pass 1", 0, ncg);
        pass1::pass1(self)?;
        pass1::pass1b(self)?;
        self.report("pass 2", 0, 1);
        pass2::pass2(self)?;
        self.report("pass 3", 0, 1);
        pass34::pass3(self)?;
        self.report("pass 4", 0, 1);
        pass34::pass4(self)?;
        self.report("pass 5", 0, ncg);
        pass5::pass5(self)?;
        self.report("pass 5", ncg, ncg);
        Ok(())
    }

    /// Tells the caller's progress hook where the check is.
    pub(crate) fn report(&mut self, phase: &'static str, done: u64, total: u64) {
        if let Some(p) = self.progress.as_mut() {
            p(Progress { phase, done, total });
        }
    }

    // ----- findings --------------------------------------------------

    fn push(
        &mut self,
        pass: &str,
        sev: Severity,
        ino: Option<u64>,
        msg: String,
        fixed: bool,
    ) -> usize {
        self.findings.push(Finding {
            pass: pass.to_string(),
            severity: sev,
            ino,
            message: msg,
            fixed,
        });
        self.findings.len() - 1
    }

    /// Reports a problem and answers whether to repair it (`reply`).
    /// Under preen an inconsistency stops the run.
    pub(crate) fn ask(
        &mut self,
        pass: &str,
        sev: Severity,
        ino: Option<u64>,
        msg: impl Into<String>,
    ) -> R<bool> {
        let msg = msg.into();
        match self.mode {
            FsckMode::Check => {
                self.push(pass, sev, ino, msg, false);
                Ok(false)
            }
            FsckMode::Yes => {
                self.push(pass, sev, ino, msg, true);
                Ok(true)
            }
            FsckMode::Preen => {
                if sev == Severity::Preen {
                    self.push(pass, sev, ino, msg, true);
                    Ok(true)
                } else {
                    self.push(pass, sev, ino, msg, false);
                    Err(Halt::Stop)
                }
            }
        }
    }

    /// Reports a problem fsck cannot repair.
    pub(crate) fn note(
        &mut self,
        pass: &str,
        sev: Severity,
        ino: Option<u64>,
        msg: impl Into<String>,
    ) -> R<()> {
        self.push(pass, sev, ino, msg.into(), false);
        if self.mode == FsckMode::Preen && sev == Severity::Inconsistency {
            return Err(Halt::Stop);
        }
        Ok(())
    }

    /// A reconnection to lost+found failed. Under preen this stops the
    /// run; otherwise the reason is kept for the finding that asked for the
    /// reconnection (the inode may still be cleared later).
    pub(crate) fn linkup_fail(&mut self, pass: &str, ino: Option<u64>, msg: &str) -> R<()> {
        if self.mode == FsckMode::Preen {
            return self.note(pass, Severity::Inconsistency, ino, msg);
        }
        self.linkup_error = Some(msg.to_string());
        Ok(())
    }

    /// Finding `i` asked for a reconnection that failed.
    pub(crate) fn reconnect_failed(&mut self, i: usize) {
        let why = self
            .linkup_error
            .take()
            .unwrap_or_else(|| "RECONNECT FAILED".into());
        if let Some(f) = self.findings.get_mut(i) {
            f.fixed = false;
            f.message = format!("{} -- {why}", f.message);
        }
    }

    /// Inode `ino` was cleared: a failed reconnection of it is resolved.
    pub(crate) fn resolved_by_clearing(&mut self, ino: u64) {
        for f in self.findings.iter_mut() {
            if f.ino == Some(ino) && !f.fixed && f.message.contains("; RECONNECT --") {
                f.fixed = true;
                f.message.push_str(" (CLEARED INSTEAD)");
            }
        }
    }

    /// Marks finding `i` as not repaired after all.
    pub(crate) fn unfix(&mut self, i: usize) {
        if let Some(f) = self.findings.get_mut(i) {
            f.fixed = false;
        }
    }

    /// Marks the most recent finding as not repaired after all.
    pub(crate) fn unfix_last(&mut self) {
        if let Some(f) = self.findings.last_mut() {
            f.fixed = false;
        }
    }

    pub(crate) fn can_write(&self) -> bool {
        self.mode != FsckMode::Check
    }

    // ----- device I/O ------------------------------------------------

    pub(crate) fn read_bytes(&self, off: u64, len: usize) -> R<Vec<u8>> {
        // Checked before the buffer is made: a length from a damaged
        // image is refused, not allocated.
        match off.checked_add(len as u64) {
            Some(end) if end <= self.dev.size() => {}
            _ => {
                return Err(Halt::Err(Error::corrupt(format!(
                    "read of {len} bytes at byte {off} is past the end of the device"
                ))))
            }
        }
        let mut buf = vec![0u8; len];
        self.dev.read_at(off, &mut buf)?;
        Ok(buf)
    }

    pub(crate) fn read_frags(&self, frag: u64, nfrags: u64) -> R<Vec<u8>> {
        let off = frag
            .checked_mul(self.g.fsize)
            .ok_or_else(|| Error::corrupt("fragment address overflows"))?;
        let len = nfrags
            .checked_mul(self.g.fsize)
            .ok_or_else(|| Error::corrupt("fragment run overflows"))?;
        self.read_bytes(off, to_index(len))
    }

    /// Writes repair data. Never called in check mode (guarded here too).
    pub(crate) fn write_bytes(&mut self, off: u64, buf: &[u8]) -> R<()> {
        self.write_raw(off, buf)?;
        self.modified = true;
        Ok(())
    }

    fn write_raw(&mut self, off: u64, buf: &[u8]) -> R<()> {
        if self.mode == FsckMode::Check {
            return Err(Halt::Err(Error::new(
                ErrorKind::ReadOnly,
                "internal error: fsck tried to write in check mode",
            )));
        }
        self.dev.write_at(off, buf)?;
        Ok(())
    }

    pub(crate) fn write_frags(&mut self, frag: u64, buf: &[u8]) -> R<()> {
        self.write_bytes(frag * self.g.fsize, buf)
    }

    pub(crate) fn ino_offset(&self, ino: u64) -> u64 {
        self.g.ino_to_fsba(ino) * self.g.fsize
            + self.g.ino_to_fsbo(ino) * self.g.dinode_size() as u64
    }

    pub(crate) fn read_inode(&self, ino: u64) -> R<Dinode> {
        let b = self.read_bytes(self.ino_offset(ino), self.g.dinode_size())?;
        Ok(Dinode::decode(self.g.v, &b))
    }

    /// Writes an inode, refreshing its check-hash when the file system
    /// keeps them.
    pub(crate) fn write_inode(&mut self, ino: u64, di: &mut Dinode) -> R<()> {
        let off = self.ino_offset(ino);
        let bytes = di.encode(self.g.v, self.ck_inode);
        self.write_bytes(off, &bytes)
    }

    // ----- inode states ----------------------------------------------

    pub(crate) fn maxino(&self) -> u64 {
        self.g.ninodes()
    }

    pub(crate) fn info(&self, ino: u64) -> InoInfo {
        if ino >= self.maxino() {
            return InoInfo::default();
        }
        let c = to_index(ino / self.g.ipg);
        let i = to_index(ino % self.g.ipg);
        self.cgs
            .get(c)
            .and_then(|cg| cg.inos.get(i))
            .copied()
            .unwrap_or_default()
    }

    pub(crate) fn state(&self, ino: u64) -> u8 {
        self.info(ino).state
    }

    /// Mutable state of an examined inode, growing the group's table when
    /// needed. `None` for inodes outside the examined range.
    pub(crate) fn info_mut(&mut self, ino: u64) -> Option<&mut InoInfo> {
        if ino >= self.maxino() {
            return None;
        }
        let c = to_index(ino / self.g.ipg);
        let i = to_index(ino % self.g.ipg);
        let cg = self.cgs.get_mut(c)?;
        if i >= cg.initediblk as usize {
            return None;
        }
        if i >= cg.inos.len() {
            cg.inos.resize(i + 1, InoInfo::default());
        }
        cg.inos.get_mut(i)
    }

    pub(crate) fn set_state(&mut self, ino: u64, s: u8) {
        if let Some(x) = self.info_mut(ino) {
            x.state = s;
        }
    }

    /// One more reference to `ino` found.
    pub(crate) fn dec_link(&mut self, ino: u64) {
        if ino < UFS_ROOTINO {
            return;
        }
        if let Some(x) = self.info_mut(ino) {
            x.linkcnt = x.linkcnt.saturating_sub(1);
        }
    }

    /// A reference to `ino` went away.
    pub(crate) fn inc_link(&mut self, ino: u64) {
        if ino < UFS_ROOTINO {
            return;
        }
        if let Some(x) = self.info_mut(ino) {
            x.linkcnt = x.linkcnt.saturating_add(1);
        }
    }

    pub(crate) fn dir(&self, ino: u64) -> Option<&DirInfo> {
        self.dir_index.get(&ino).and_then(|&i| self.dirs.get(i))
    }
    pub(crate) fn dir_mut(&mut self, ino: u64) -> Option<&mut DirInfo> {
        match self.dir_index.get(&ino) {
            Some(&i) => self.dirs.get_mut(i),
            None => None,
        }
    }
    pub(crate) fn add_dir(&mut self, d: DirInfo) {
        if let Some(&i) = self.dir_index.get(&d.ino) {
            self.dirs[i] = d;
        } else {
            self.dir_index.insert(d.ino, self.dirs.len());
            self.dirs.push(d);
        }
    }

    /// fsck_ffs' `chkrange`: is the run of `cnt` fragments at `blk` outside
    /// the file system or across a block or metadata boundary?
    pub(crate) fn chkrange(&self, blk: u64, cnt: u64) -> bool {
        let g = &self.g;
        if cnt == 0 || blk == 0 || blk >= g.size || cnt > g.size - blk {
            return true;
        }
        if cnt > g.frag || blk % g.frag + cnt > g.frag {
            return true;
        }
        let c = g.dtog(blk);
        if blk < g.cgdmin(c) {
            blk + cnt > g.cgsblock(c)
        } else {
            blk + cnt > g.cgbase(c + 1)
        }
    }

    /// Sets the used bit of every fragment in the run (fsck's own
    /// allocations), remembering them for pass 5.
    pub(crate) fn toggle_frags(&mut self, blk: u64, n: u64) {
        for f in blk..blk + n {
            if !self.toggled_frags.remove(&f) {
                self.toggled_frags.insert(f);
            }
        }
    }

    // ----- summary area ----------------------------------------------

    pub(crate) fn csum(&self, c: u64) -> Csum {
        let o = to_index(c) * Csum::SIZE;
        if o + Csum::SIZE <= self.cs_raw.len() {
            Csum::read(self.g.v.endian, &self.cs_raw, o)
        } else {
            Csum::default()
        }
    }
    pub(crate) fn set_csum(&mut self, c: u64, v: Csum) {
        let o = to_index(c) * Csum::SIZE;
        if o + Csum::SIZE <= self.cs_raw.len() {
            v.write(self.g.v.endian, &mut self.cs_raw, o);
            self.cs_dirty = true;
        }
    }

    // ----- the end (`ckfini`) ----------------------------------------

    fn finish(mut self) -> R<FsckReport> {
        let dirty_idx = self.dirty_finding;
        let unfixed = self
            .findings
            .iter()
            .enumerate()
            .any(|(i, f)| !f.fixed && Some(i) != dirty_idx);
        let clean = !self.halted && !unfixed && !self.needs_rerun;
        if self.can_write() && !self.hands_off {
            if !self.halted {
                if self.cs_dirty {
                    let (off, raw) = (self.g.csaddr * self.g.fsize, self.cs_raw.clone());
                    self.write_bytes(off, &raw)?;
                }
                if let Some(off) = self.fix_alt_sb {
                    let mut alt = self.sb.clone();
                    alt.set_fs_sblockactualloc(0);
                    self.write_bytes(off, &alt.to_disk_bytes())?;
                }
            }
            let want_clean: i8 = if clean { 1 } else { 0 };
            let flags_bad = self.sb.fs_flags() & (FS_UNCLEAN | FS_NEEDSFSCK) != 0;
            let pending = self.sb.fs_pendingblocks() != 0 || self.sb.fs_pendinginodes() != 0;
            let mark = self.sb.fs_clean() != want_clean || (clean && (flags_bad || pending));
            if self.sb_dirty || self.modified || mark {
                if self.modified || self.sb_dirty {
                    let (t, _) = crate::fs::now();
                    self.sb.set_fs_time(t);
                }
                self.sb.set_fs_clean(want_clean);
                if clean {
                    self.sb
                        .set_fs_flags(self.sb.fs_flags() & !(FS_UNCLEAN | FS_NEEDSFSCK));
                    self.sb.set_fs_pendingblocks(0);
                    self.sb.set_fs_pendinginodes(0);
                }
                let counts = self.sb_dirty;
                self.write_superblock(counts)?;
            }
            self.dev.flush()?;
        }
        if let Some(i) = self.dirty_finding {
            let fixed = clean && self.can_write();
            if let Some(f) = self.findings.get_mut(i) {
                f.fixed = fixed;
            }
        }
        let unfixed = self.findings.iter().any(|f| !f.fixed);
        let (mut files, mut dirs) = (0u64, 0u64);
        for cg in &self.cgs {
            for x in &cg.inos {
                if x.state != USTATE {
                    files += 1;
                    if is_dir_state(x.state) {
                        dirs += 1;
                    }
                }
            }
        }
        let t = self.totals.unwrap_or_else(|| self.sb.fs_cstotal());
        let free = u64::try_from(t.cs_nbfree)
            .unwrap_or(0)
            .saturating_mul(self.g.frag)
            .saturating_add(u64::try_from(t.cs_nffree).unwrap_or(0));
        Ok(FsckReport {
            findings: self.findings,
            files,
            dirs,
            used_frags: self.g.dsize.saturating_sub(free),
            free_frags: free,
            modified: self.modified,
            clean: !self.halted && !unfixed && !self.needs_rerun,
            needs_rerun: self.needs_rerun,
        })
    }

    fn write_superblock(&mut self, counts: bool) -> R<()> {
        self.sb.set_fs_fmod(0);
        self.sb.set_fs_sblockactualloc(to_signed(self.g.sblockloc));
        let b = self.sb.to_disk_bytes();
        let off = self.g.sblockloc;
        if counts {
            self.write_bytes(off, &b)
        } else {
            self.write_raw(off, &b)
        }
    }
}
