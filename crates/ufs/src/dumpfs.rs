//! `dumpfs`: prints the superblock and per-group summaries of an image, or
//! (`-m`) the newfs command that would recreate its geometry. Read-only.
//!
//! Invariants: never writes; reads each cylinder group once; every value
//! printed comes from the image (nothing is assumed). Field meanings follow
//! FreeBSD's `sbin/dumpfs/dumpfs.c`.
use crate::dev::BlockDevice;
use crate::error::Result;
use crate::fs::read_superblock;
use std::fmt::Write;
use ufs_format::bytes::to_index;
use ufs_format::*;

fn flags_str(f: i32) -> String {
    let names = [
        (FS_UNCLEAN, "unclean"),
        (FS_DOSOFTDEP, "soft-updates"),
        (FS_NEEDSFSCK, "needs-fsck"),
        (FS_SUJ, "soft-updates+journal"),
        (FS_ACLS, "acls"),
        (FS_MULTILABEL, "multilabel"),
        (FS_GJOURNAL, "gjournal"),
        (FS_NFS4ACLS, "nfsv4acls"),
        (FS_METACKHASH, "metadata-check-hashes"),
        (FS_TRIM, "trim"),
    ];
    let v: Vec<&str> = names
        .iter()
        .filter(|(b, _)| f & b != 0)
        .map(|(_, n)| *n)
        .collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(" ")
    }
}

fn ckhash_str(h: u32) -> String {
    let mut v = Vec::new();
    if h & CK_SUPERBLOCK != 0 {
        v.push("superblock");
    }
    if h & CK_CYLGRP != 0 {
        v.push("cylinder-groups");
    }
    if h & CK_INODE != 0 {
        v.push("inodes");
    }
    if v.is_empty() {
        "none".into()
    } else {
        v.join(" ")
    }
}

/// The superblock and every cylinder group's summary, as text.
pub fn dumpfs(dev: &dyn BlockDevice, with_cgs: bool) -> Result<String> {
    let (sb, g, loc) = read_superblock(dev)?;
    let mut o = String::new();
    let t = sb.fs_cstotal();
    let v = g.v;
    let _ = writeln!(
        o,
        "magic\t{:x} ({})\tlocation {loc}\ttime\t{}",
        sb.fs_magic(),
        v,
        sb.fs_time()
    );
    let _ = writeln!(
        o,
        "id\t[ {:x} {:x} ]\tncg\t{}\tsize\t{}\tblocks\t{}",
        sb.fs_id0().cast_unsigned(),
        sb.fs_id1().cast_unsigned(),
        g.ncg,
        g.size,
        g.dsize
    );
    let _ = writeln!(
        o,
        "bsize\t{}\tshift\t{}\tmask\t{:#010x}",
        g.bsize,
        g.bshift,
        sb.fs_bmask().cast_unsigned()
    );
    let _ = writeln!(
        o,
        "fsize\t{}\tshift\t{}\tmask\t{:#010x}",
        g.fsize,
        g.fshift,
        sb.fs_fmask().cast_unsigned()
    );
    let _ = writeln!(
        o,
        "frag\t{}\tshift\t{}\tfsbtodb\t{}",
        g.frag,
        g.fragshift,
        sb.fs_fsbtodb()
    );
    let _ = writeln!(
        o,
        "minfree\t{}%\toptim\t{}\tsymlinklen {}",
        g.minfree,
        if sb.fs_optim() == FS_OPTSPACE {
            "space"
        } else {
            "time"
        },
        sb.fs_maxsymlinklen()
    );
    let _ = writeln!(
        o,
        "maxbsize {}\tmaxbpg\t{}\tmaxcontig {}\tcontigsumsize {}",
        sb.fs_maxbsize(),
        g.maxbpg,
        g.maxcontig,
        g.contigsumsize
    );
    let _ = writeln!(
        o,
        "nbfree\t{}\tndir\t{}\tnifree\t{}\tnffree\t{}",
        t.cs_nbfree, t.cs_ndir, t.cs_nifree, t.cs_nffree
    );
    let _ = writeln!(
        o,
        "bpg\t{}\tfpg\t{}\tipg\t{}\tunrefs\t{}",
        g.fpg / g.frag,
        g.fpg,
        g.ipg,
        sb.fs_unrefs()
    );
    let _ = writeln!(
        o,
        "nindir\t{}\tinopb\t{}\tmaxfilesize\t{}",
        g.nindir, g.inopb, g.maxfilesize
    );
    let _ = writeln!(
        o,
        "sbsize\t{}\tcgsize\t{}\tcsaddr\t{}\tcssize\t{}",
        sb.fs_sbsize(),
        g.cgsize,
        g.csaddr,
        g.cssize
    );
    let _ = writeln!(
        o,
        "sblkno\t{}\tcblkno\t{}\tiblkno\t{}\tdblkno\t{}",
        g.sblkno, g.cblkno, g.iblkno, g.dblkno
    );
    let _ = writeln!(
        o,
        "cgrotor\t{}\tfmod\t{}\tronly\t{}\tclean\t{}",
        sb.fs_cgrotor(),
        sb.fs_fmod(),
        sb.fs_ronly(),
        sb.fs_clean()
    );
    let _ = writeln!(
        o,
        "metaspace {}\tavgfpdir {}\tavgfilesize {}",
        g.metaspace,
        sb.fs_avgfpdir(),
        sb.fs_avgfilesize()
    );
    if v.is_ufs1() {
        // The fields only UFS1 keeps (FreeBSD's dumpfs prints them too).
        let _ = writeln!(
            o,
            "cpg\t{}\tnrpos\t{}\tcgoffset\t{}\tcgmask\t{:#010x}\tinodefmt\t{}",
            sb.fs_old_cpg(),
            sb.fs_old_nrpos(),
            sb.fs_old_cgoffset(),
            sb.fs_old_cgmask().cast_unsigned(),
            sb.fs_old_inodefmt()
        );
        let _ = writeln!(
            o,
            "nsect\t{}\tnpsect\t{}\tspc\t{}\tncyl\t{}\tpostblformat\t{}",
            sb.fs_old_nsect(),
            sb.fs_old_npsect(),
            sb.fs_old_spc(),
            sb.fs_old_ncyl(),
            sb.fs_old_postblformat()
        );
    }
    let _ = writeln!(o, "flags\t{}", flags_str(sb.fs_flags()));
    let _ = writeln!(
        o,
        "check hashes\t{}",
        ckhash_str(if sb.fs_flags() & FS_METACKHASH != 0 {
            sb.fs_metackhash()
        } else {
            0
        })
    );
    let _ = writeln!(o, "fsmnt\t{}", sb.fs_fsmnt());
    let _ = writeln!(
        o,
        "volname\t{}\tswuid\t{}\tprovidersize\t{}",
        sb.fs_volname(),
        sb.fs_swuid(),
        sb.fs_providersize()
    );
    if !with_cgs {
        return Ok(o);
    }
    let _ = writeln!(o, "\ncs[].cs_(nbfree,ndir,nifree,nffree):");
    let mut raw = vec![0u8; to_index(g.cssize)];
    dev.read_at(g.csaddr * g.fsize, &mut raw)?;
    for i in 0..to_index(g.ncg) {
        let c = ufs_format::sb::Csum::read(v.endian, &raw, i * 16);
        let _ = write!(
            o,
            "\t({},{},{},{})",
            c.cs_nbfree, c.cs_ndir, c.cs_nifree, c.cs_nffree
        );
        if i % 4 == 3 {
            o.push('\n');
        }
    }
    o.push('\n');
    let cglen = to_index(g.fragroundup(g.cgsize));
    let mut buf = vec![0u8; cglen];
    for c in 0..g.ncg {
        let _ = writeln!(o);
        dev.read_at(g.cgtod(c) * g.fsize, &mut buf)?;
        match Cg::parse(&buf, &g, c) {
            Ok(cg) => {
                let cs = cg.cg_cs();
                let _ = writeln!(
                    o,
                    "cg {c}:\tmagic\t{:x}\ttell\t{:x}\ttime\t{}",
                    cg.cg_magic(),
                    g.cgtod(c) * g.fsize,
                    cg.time(v.is_ufs1())
                );
                let _ = writeln!(
                    o,
                    "cgx\t{}\tndblk\t{}\tniblk\t{}\tinitiblk {}\tunrefs\t{}",
                    cg.cg_cgx(),
                    cg.cg_ndblk(),
                    if v.is_ufs1() {
                        u32::from(cg.cg_old_niblk().cast_unsigned())
                    } else {
                        cg.cg_niblk()
                    },
                    cg.cg_initediblk(),
                    cg.cg_unrefs()
                );
                let _ = writeln!(
                    o,
                    "nbfree\t{}\tndir\t{}\tnifree\t{}\tnffree\t{}",
                    cs.cs_nbfree, cs.cs_ndir, cs.cs_nifree, cs.cs_nffree
                );
                let _ = writeln!(
                    o,
                    "rotor\t{}\tirotor\t{}\tfrotor\t{}",
                    cg.cg_rotor(),
                    cg.cg_irotor(),
                    cg.cg_frotor()
                );
                let frsum: Vec<String> = (1..MAXFRAG).map(|i| cg.cg_frsum(i).to_string()).collect();
                let _ = writeln!(o, "frsum\t{}", frsum.join("\t"));
                if g.contigsumsize > 0 {
                    let sums: Vec<String> = (1..=g.contigsumsize)
                        .map(|i| cg.clustersum(i).to_string())
                        .collect();
                    let _ = writeln!(o, "clusters 1-{}:\t{}", g.contigsumsize, sums.join("\t"));
                }
                let _ = writeln!(o, "check-hash\t{:#010x}", cg.cg_ckhash());
            }
            Err(e) => {
                let _ = writeln!(o, "cg {c}: {e}");
            }
        }
    }
    Ok(o)
}

/// The `ufskit newfs` command that recreates this file system's geometry.
pub fn newfs_command(dev: &dyn BlockDevice, target: &str) -> Result<String> {
    let (sb, g, _) = read_superblock(dev)?;
    let density = ((g.fpg / g.frag) * g.bsize / g.ipg).div_ceil(g.fsize) * g.fsize;
    let mut cmd = format!(
        "ufskit newfs -b {} -f {} -i {} -m {} -o {} -g {} -h {} -e {} -k {}",
        g.bsize,
        g.fsize,
        density,
        g.minfree,
        if sb.fs_optim() == FS_OPTSPACE {
            "space"
        } else {
            "time"
        },
        sb.fs_avgfilesize(),
        sb.fs_avgfpdir(),
        g.maxbpg,
        g.metaspace,
    );
    if g.v.is_ufs1() {
        cmd.push_str(" -O 1");
    }
    if g.v.endian == Endian::Big {
        cmd.push_str(" -B be");
    }
    // ufskit's newfs turns soft updates on unless told otherwise (as
    // FreeBSD's does for UFS2).
    if sb.fs_flags() & FS_DOSOFTDEP != 0 {
        cmd.push_str(" -U");
    } else {
        cmd.push_str(" --no-soft-updates");
    }
    if !sb.fs_volname().is_empty() {
        cmd.push_str(&format!(" -L {}", sb.fs_volname()));
    }
    cmd.push_str(&format!(" -s {} {target}", g.size * g.fsize));
    Ok(format!("# newfs command for {target}\n{cmd}\n"))
}
