//! `tunefs`: changes the tunable superblock fields of an unmounted image.
//!
//! Invariants: only fields that do not change the layout are touched
//! (avgfilesize, avgfpdir, minfree, optim, the soft-updates flag, the ACL
//! flags, volume name); the check-hash is recomputed; nothing is written when no change
//! is requested. The caller holds the image lock (a mounted image is
//! refused). Source of the semantics: FreeBSD `sbin/tunefs/tunefs.c`.
use crate::dev::BlockDevice;
use crate::error::{Error, ErrorKind, Result};
use crate::fs::read_superblock;
use ufs_format::bytes::to_signed;
use ufs_format::*;

#[derive(Debug, Default, Clone)]
pub struct TuneParams {
    pub avgfilesize: Option<u32>,
    pub avgfpdir: Option<u32>,
    pub minfree: Option<u32>,
    /// FS_OPTTIME or FS_OPTSPACE.
    pub optim: Option<i32>,
    pub softupdates: Option<bool>,
    /// POSIX.1e ACLs enforced by FreeBSD's kernel (`FS_ACLS`, `-a`).
    pub acls: Option<bool>,
    /// NFSv4 ACLs (`FS_NFS4ACLS`, `-N`); exclusive with POSIX.1e ACLs.
    pub nfs4acls: Option<bool>,
    pub volname: Option<String>,
    /// Also update the backup superblocks in every cylinder group.
    pub all_backups: bool,
}

/// Applies `p`; returns a line per change made.
pub fn tunefs(dev: &dyn BlockDevice, p: &TuneParams) -> Result<Vec<String>> {
    let (mut sb, g, loc) = read_superblock(dev)?;
    let mut changes = Vec::new();
    if let Some(v) = p.avgfilesize {
        if v == 0 {
            return Err(Error::new(
                ErrorKind::Invalid,
                "average file size must be positive",
            ));
        }
        changes.push(format!(
            "average file size changes from {} to {v}",
            sb.fs_avgfilesize()
        ));
        sb.set_fs_avgfilesize(v);
    }
    if let Some(v) = p.avgfpdir {
        if v == 0 {
            return Err(Error::new(
                ErrorKind::Invalid,
                "expected files per directory must be positive",
            ));
        }
        changes.push(format!(
            "expected number of files per directory changes from {} to {v}",
            sb.fs_avgfpdir()
        ));
        sb.set_fs_avgfpdir(v);
    }
    if let Some(v) = p.minfree {
        if v > 99 {
            return Err(Error::new(
                ErrorKind::Invalid,
                "minimum free space must be 0..99 percent",
            ));
        }
        changes.push(format!(
            "minimum percentage of free space changes from {}% to {v}%",
            sb.fs_minfree()
        ));
        sb.set_fs_minfree(i32::try_from(v).unwrap_or(99));
        if v >= 8 && sb.fs_optim() == FS_OPTSPACE {
            changes.push("should optimize for time with minfree >= 8%".into());
        }
        if v < 8 && sb.fs_optim() == FS_OPTTIME {
            changes.push("should optimize for space with minfree < 8%".into());
        }
    }
    if let Some(o) = p.optim {
        let name = |o: i32| if o == FS_OPTSPACE { "space" } else { "time" };
        changes.push(format!(
            "optimization preference changes from {} to {}",
            name(sb.fs_optim()),
            name(o)
        ));
        sb.set_fs_optim(o);
    }
    if let Some(on) = p.softupdates {
        let f = sb.fs_flags();
        sb.set_fs_flags(if on {
            f | FS_DOSOFTDEP
        } else {
            f & !(FS_DOSOFTDEP | FS_SUJ)
        });
        changes.push(format!(
            "soft updates {}",
            if on { "set" } else { "cleared" }
        ));
    }
    for (want, flag, name) in [
        (p.acls, FS_ACLS, "POSIX.1e ACLs"),
        (p.nfs4acls, FS_NFS4ACLS, "NFSv4 ACLs"),
    ] {
        let Some(on) = want else { continue };
        let f = sb.fs_flags();
        let other = if flag == FS_ACLS {
            FS_NFS4ACLS
        } else {
            FS_ACLS
        };
        if on && f & other != 0 {
            // tunefs.c: "ACLs and NFSv4 ACLs are mutually exclusive".
            return Err(Error::new(
                ErrorKind::Invalid,
                "POSIX.1e ACLs and NFSv4 ACLs are mutually exclusive: disable the other first",
            ));
        }
        sb.set_fs_flags(if on { f | flag } else { f & !flag });
        changes.push(format!("{name} {}", if on { "set" } else { "cleared" }));
    }
    if let Some(n) = &p.volname {
        if n.len() >= MAXVOLLEN {
            return Err(Error::new(
                ErrorKind::NameTooLong,
                format!("volume name longer than {} bytes", MAXVOLLEN - 1),
            ));
        }
        changes.push(format!(
            "volume label changes from '{}' to '{n}'",
            sb.fs_volname()
        ));
        sb.set_fs_volname(n);
    }
    if changes.is_empty() {
        return Ok(changes);
    }
    let bytes = sb.to_disk_bytes();
    dev.write_at(loc, &bytes)?;
    if p.all_backups {
        for c in 0..g.ncg {
            let mut b = sb.clone();
            b.set_fs_sblockactualloc(to_signed(g.cgsblock(c) * g.fsize));
            dev.write_at(g.cgsblock(c) * g.fsize, &b.to_disk_bytes())?;
        }
    }
    dev.flush()?;
    Ok(changes)
}

/// The current tunables, as `tunefs -p` prints them.
pub fn print(dev: &dyn BlockDevice) -> Result<String> {
    let (sb, _, _) = read_superblock(dev)?;
    let f = sb.fs_flags();
    let onoff = |b: bool| if b { "enabled" } else { "disabled" };
    Ok(format!(
        "tunefs: soft updates: (-n)                          {}\n\
         tunefs: soft update journaling: (-j)                {}\n\
         tunefs: POSIX.1e ACLs: (-a)                         {}\n\
         tunefs: NFSv4 ACLs: (-N)                            {}\n\
         tunefs: maximum blocks per file in a cylinder group: (-e) {}\n\
         tunefs: average file size: (-f)                          {}\n\
         tunefs: average number of files in a directory: (-s)    {}\n\
         tunefs: minimum percentage of free space: (-m)          {}%\n\
         tunefs: optimization preference: (-o)                   {}\n\
         tunefs: volume label: (-L)                              {}\n\
         tunefs: metadata check-hashes                           {}\n",
        onoff(f & FS_DOSOFTDEP != 0),
        onoff(f & FS_SUJ != 0),
        onoff(f & FS_ACLS != 0),
        onoff(f & FS_NFS4ACLS != 0),
        sb.fs_maxbpg(),
        sb.fs_avgfilesize(),
        sb.fs_avgfpdir(),
        sb.fs_minfree(),
        if sb.fs_optim() == FS_OPTSPACE {
            "space"
        } else {
            "time"
        },
        sb.fs_volname(),
        onoff(f & FS_METACKHASH != 0),
    ))
}
