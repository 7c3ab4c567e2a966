//! Pass 5: every cylinder group is rebuilt from fsck's block map and inode
//! states and compared with the disk, as `fsck_ffs` does: the group's entry
//! in the summary area, the 168-byte header (with `cg_time`, `cg_old_time`,
//! `cg_unrefs` and `cg_ckhash` taken from disk and rotors kept when in
//! range), then the maps from `cg_iusedoff` to `cg_nextfreeoff` (inode map,
//! fragment map, cluster summary and cluster map, padding included); at
//! the end `fs_cstotal` (with `cs_numclusters` and the spares zero).
//!
//! Allocations fsck made itself (lost+found, a new root) are not problems
//! of the disk: the comparison uses the state before them, and the group
//! is rewritten with them.
use super::*;
use ufs_format::bytes::{low_u32, to_i32, to_index};
use ufs_format::CsumTotal;

const P5: &str = "pass5";
/// The pass-5 finding for resources in use that the maps call free.
pub(crate) const USED_MARKED_FREE: &str = "ALLOCATED INODE(S) OR FRAG(S) MARKED FREE IN BIT MAPS";

struct Layout {
    iusedoff: usize,
    freeoff: usize,
    nextfreeoff: usize,
    clusteroff: usize,
}

/// What fsck changed in one group by its own allocations.
#[derive(Default)]
struct Overlay {
    /// Group-relative fragments, sorted.
    frags: Vec<u64>,
    /// Inode numbers.
    inos: HashSet<u64>,
}

pub(super) fn pass5(ctx: &mut Ctx) -> R<()> {
    let g = ctx.g;
    let proto = Cg::new_layout(&g, 0);
    let lay = Layout {
        iusedoff: proto.cg_iusedoff() as usize,
        freeoff: proto.cg_freeoff() as usize,
        nextfreeoff: proto.cg_nextfreeoff() as usize,
        clusteroff: proto.cg_clusteroff() as usize,
    };
    let mapsize = lay.nextfreeoff - lay.iusedoff;
    let mut overlays: HashMap<u64, Overlay> = HashMap::new();
    for &f in &ctx.toggled_frags {
        overlays
            .entry(g.dtog(f))
            .or_default()
            .frags
            .push(g.dtogd(f));
    }
    for &i in &ctx.toggled_inos {
        overlays.entry(g.ino_to_cg(i)).or_default().inos.insert(i);
    }
    for ov in overlays.values_mut() {
        ov.frags.sort_unstable();
    }
    let mut total = CsumTotal::default();
    let mut base_total = CsumTotal::default();
    let mut any_overlay = false;
    for c in 0..g.ncg {
        if c > 0 {
            ctx.report("pass 5", c, g.ncg);
        }
        let ci = &ctx.cgs[to_index(c)];
        let overlay = overlays.get(&c);
        let changed_here = overlay.is_some() || ci.initediblk != ci.initediblk_disk;
        any_overlay |= changed_here;
        let nf = g.cgsize.div_ceil(g.fsize);
        let mut old = ctx.read_frags(g.cgtod(c), nf)?;
        old.truncate(to_index(g.cgsize));
        let new = build(ctx, c, &old, &lay, None);
        let base = if changed_here {
            build(
                ctx,
                c,
                &old,
                &lay,
                Some(overlay.unwrap_or(&Overlay::default())),
            )
        } else {
            new.clone()
        };
        let cgsize = to_index(g.cgsize);
        let new_cs = Cg::view(&new, g.v.endian, cgsize).cg_cs();
        let base_cs = Cg::view(&base, g.v.endian, cgsize).cg_cs();
        let (corrupt, rebuild) = (ctx.cgs[to_index(c)].corrupt, ctx.cgs[to_index(c)].rebuild);
        // 1. The group's entry in the summary area.
        if ctx.csum(c) != base_cs {
            let fix = kind(ctx, 0, c, "FREE BLK COUNT(S) WRONG IN SUPERBLK")?;
            if fix {
                ctx.set_csum(c, new_cs);
            }
        } else if changed_here && ctx.can_write() && ctx.csum(c) != new_cs {
            ctx.set_csum(c, new_cs);
        }
        if corrupt {
            // Reported in pass 1; rewritten from scratch if accepted.
            if rebuild && ctx.can_write() {
                write_cg(ctx, c, new)?;
            }
        } else {
            let mut out = old.clone();
            let mut write = false;
            // 2. The header.
            if old[..CG_HEADER_SIZE] != base[..CG_HEADER_SIZE] {
                let fix = kind(ctx, 1, c, "SUMMARY INFORMATION BAD")?;
                if fix {
                    out[..CG_HEADER_SIZE].copy_from_slice(&new[..CG_HEADER_SIZE]);
                    write = true;
                }
            }
            // 3. The maps.
            let r = lay.iusedoff..lay.iusedoff + mapsize;
            if old[r.clone()] != base[r.clone()] {
                // Worse than a leak: something in use that the disk's maps
                // call free (a crash that wrote a pointer before the bit)
                // would be handed out twice. Preen still repairs it, as
                // fsck_ffs does, but it is outside what ordered writes
                // promise (`Finding::within_crash_guarantee`).
                let imap = lay.iusedoff..lay.freeoff;
                let fmap =
                    lay.freeoff..(lay.freeoff + to_index(g.fpg.div_ceil(8))).min(lay.nextfreeoff);
                let bits = |r: std::ops::Range<usize>, f: &dyn Fn(usize) -> u8| -> Vec<u64> {
                    r.flat_map(|i| {
                        let m = f(i);
                        (0..8)
                            .filter(move |b| m & (1 << b) != 0)
                            .map(move |b| ((i - lay.iusedoff) * 8 + b) as u64)
                    })
                    .collect()
                };
                let lost_inodes: Vec<u64> = bits(imap.clone(), &|i| base[i] & !old[i])
                    .into_iter()
                    .map(|b| c * g.ipg + b)
                    .collect();
                let lost_frags: Vec<u64> = bits(fmap.clone(), &|i| old[i] & !base[i])
                    .into_iter()
                    .map(|b| g.cgbase(c) + b - ((lay.freeoff - lay.iusedoff) * 8) as u64)
                    .collect();
                if !lost_inodes.is_empty() || !lost_frags.is_empty() {
                    let show = |v: &[u64]| {
                        v.iter()
                            .take(8)
                            .map(|x| x.to_string())
                            .collect::<Vec<_>>()
                            .join(" ")
                    };
                    let msg = format!(
                        "{USED_MARKED_FREE} (inodes: {}; fragments: {})",
                        show(&lost_inodes),
                        show(&lost_frags)
                    );
                    kind(ctx, 3, c, &msg)?;
                }
                let fix = kind(ctx, 2, c, "BLK(S) MISSING IN BIT MAPS")?;
                if fix {
                    out[r.clone()].copy_from_slice(&new[r.clone()]);
                    write = true;
                }
            }
            if changed_here && ctx.can_write() {
                out[..CG_HEADER_SIZE].copy_from_slice(&new[..CG_HEADER_SIZE]);
                out[r.clone()].copy_from_slice(&new[r]);
                write = out != old;
            }
            if write {
                write_cg(ctx, c, out)?;
            }
        }
        add(&mut total, new_cs);
        add(&mut base_total, base_cs);
    }
    finish_kinds(ctx);
    // 4. The totals in the superblock.
    let with = |t: &CsumTotal| {
        let mut sb = ctx.sb.clone();
        sb.set_fs_cstotal_exact(*t);
        sb.cstotal_bytes().to_vec()
    };
    let disk = ctx.sb.cstotal_bytes().to_vec();
    if disk != with(&base_total) {
        if ctx.ask(
            P5,
            Severity::Preen,
            None,
            "SUMMARY BLK COUNT(S) WRONG IN SUPERBLK; SALVAGE",
        )? {
            set_cstotal(ctx, &total)?;
        }
    } else if any_overlay && ctx.can_write() && disk != with(&total) {
        set_cstotal(ctx, &total)?;
    }
    ctx.totals = Some(total);
    Ok(())
}

fn add(t: &mut CsumTotal, c: Csum) {
    t.cs_ndir += c.cs_ndir as i64;
    t.cs_nbfree += c.cs_nbfree as i64;
    t.cs_nifree += c.cs_nifree as i64;
    t.cs_nffree += c.cs_nffree as i64;
}

fn set_cstotal(ctx: &mut Ctx, t: &CsumTotal) -> R<()> {
    ctx.sb.set_fs_cstotal_exact(*t);
    ctx.sb.set_fs_ronly(0);
    ctx.sb.set_fs_fmod(0);
    ctx.sb_dirty = true;
    Ok(())
}

/// Reports the first group with a problem of kind `k` and answers whether
/// to repair; later groups follow the first answer silently (`dofix`).
fn kind(ctx: &mut Ctx, k: usize, c: u64, msg: &str) -> R<bool> {
    let (slot, n) = match k {
        0 => (&mut ctx.p5.csum, &mut ctx.p5.csum_n),
        1 => (&mut ctx.p5.header, &mut ctx.p5.header_n),
        3 => (&mut ctx.p5.lost, &mut ctx.p5.lost_n),
        _ => (&mut ctx.p5.maps, &mut ctx.p5.maps_n),
    };
    *n += 1;
    if let Some(i) = *slot {
        return Ok(ctx.findings.get(i).is_some_and(|f| f.fixed));
    }
    let i = ctx.findings.len();
    let fix = ctx.ask(
        P5,
        Severity::Preen,
        None,
        format!("{msg} (CYLINDER GROUP {c}); SALVAGE"),
    )?;
    match k {
        0 => ctx.p5.csum = Some(i),
        1 => ctx.p5.header = Some(i),
        3 => ctx.p5.lost = Some(i),
        _ => ctx.p5.maps = Some(i),
    }
    Ok(fix)
}

/// Says in each pass-5 finding how many groups it covered.
fn finish_kinds(ctx: &mut Ctx) {
    for (slot, n) in [
        (ctx.p5.csum, ctx.p5.csum_n),
        (ctx.p5.header, ctx.p5.header_n),
        (ctx.p5.maps, ctx.p5.maps_n),
        (ctx.p5.lost, ctx.p5.lost_n),
    ] {
        if let (Some(i), true) = (slot, n > 1) {
            if let Some(f) = ctx.findings.get_mut(i) {
                f.message = format!("{} [{n} cylinder groups affected]", f.message);
            }
        }
    }
}

fn write_cg(ctx: &mut Ctx, c: u64, b: Vec<u8>) -> R<()> {
    let g = ctx.g;
    let mut cg = Cg::view(&b, g.v.endian, to_index(g.cgsize));
    cg.update_ckhash(ctx.ck_cg);
    let off = g.cgtod(c) * g.fsize;
    ctx.write_bytes(off, cg.as_bytes())
}

/// Builds group `c` from scratch. With an overlay, the fragments and
/// inodes fsck allocated itself are taken as they were before.
fn build(ctx: &Ctx, c: u64, old: &[u8], lay: &Layout, overlay: Option<&Overlay>) -> Vec<u8> {
    let g = &ctx.g;
    let ci = &ctx.cgs[to_index(c)];
    let mut cg = Cg::new_layout(g, c);
    let ndblk = g.fpg.min(g.size - g.cgbase(c));
    // At most fs_fpg, a positive int32 by validation.
    cg.set_cg_ndblk(low_u32(ndblk));
    if g.v.is_ufs1() && g.old_cpg > 0 {
        // The last group of a UFS1 file system counts the cylinders it has
        // (pass5.c: howmany(ndblk, fpg / cpg)).
        let per_cyl = (g.fpg / g.old_cpg).max(1);
        // The field is 16 bits; a larger count stays at its largest, as
        // Cg::new_layout stores fs_old_cpg.
        let ncyl = ndblk.div_ceil(per_cyl).min(g.old_cpg);
        cg.set_cg_old_ncyl(i16::try_from(ncyl).unwrap_or(i16::MAX));
    }
    let old = Cg::view(old, g.v.endian, to_index(g.cgsize));
    if !ci.corrupt {
        // Fields fsck keeps from the disk.
        cg.set_cg_old_time(old.cg_old_time());
        cg.set_cg_unrefs(old.cg_unrefs());
        cg.set_cg_ckhash(old.cg_ckhash());
        cg.set_cg_time(old.cg_time());
        let within = |r: u32, n: u64| if u64::from(r) < n { r } else { 0 };
        cg.set_cg_rotor(within(old.cg_rotor(), ndblk));
        cg.set_cg_frotor(within(old.cg_frotor(), ndblk));
        cg.set_cg_irotor(within(old.cg_irotor(), g.ipg));
    } else {
        cg.set_time(g.v.is_ufs1(), crate::fs::now().0);
    }
    if g.lazy_inodes() {
        let inited = match overlay {
            Some(_) => ci.initediblk_disk,
            None => ci.initediblk,
        };
        // fs_ipg is at most 2^31 by validation.
        cg.set_cg_initediblk(inited.min(low_u32(g.ipg)));
    }
    let b = cg.raw_mut();
    // Inode map.
    let mut nused = 0u64;
    let mut ndir = 0i32;
    for (i, x) in ci.inos.iter().enumerate() {
        let ino = c * g.ipg + i as u64;
        if x.state == USTATE || ino < UFS_ROOTINO || overlay.is_some_and(|o| o.inos.contains(&ino))
        {
            continue;
        }
        b[lay.iusedoff + i / 8] |= 1 << (i % 8);
        nused += 1;
        if is_dir_state(x.state) {
            ndir += 1;
        }
    }
    if c == 0 {
        b[lay.iusedoff] |= 0b11;
        nused += 2;
    }
    let nifree = to_i32(g.ipg.saturating_sub(nused));
    // Fragment map, cluster map and counters.
    let frag = g.frag;
    let fmask: u64 = (1u64 << frag) - 1;
    let base = g.cgbase(c);
    let nfr = ndblk.div_ceil(frag) * frag;
    let ncl = if g.contigsumsize > 0 { ndblk / frag } else { 0 };
    let css = g.contigsumsize;
    let mut nbfree = 0i32;
    let mut nffree = 0i32;
    let mut frsum = [0u32; MAXFRAG];
    let mut clsum = vec![0i32; to_index(css) + 1];
    let mut run = 0u64;
    let close = |run: &mut u64, clsum: &mut Vec<i32>| {
        if *run > 0 {
            let k = to_index((*run).min(css));
            if let Some(s) = clsum.get_mut(k) {
                *s += 1;
            }
            *run = 0;
        }
    };
    let togs: &[u64] = overlay.map_or(&[], |o| &o.frags);
    let mut ti = 0usize;
    let mut bit = 0u64;
    while bit < nfr {
        let n = (nfr - bit).min(64);
        let mut w = ctx.used.get64(base + bit);
        while ti < togs.len() && togs[ti] < bit + 64 {
            if togs[ti] >= bit {
                w ^= 1 << (togs[ti] - bit);
            }
            ti += 1;
        }
        if n < 64 {
            w |= u64::MAX << n;
        }
        let first_blk = bit / frag;
        let nblk = n / frag;
        if w == 0 && (ncl == 0 || first_blk + nblk <= ncl) {
            // 64 free fragments: whole free blocks.
            let o = lay.freeoff + to_index(bit / 8);
            b[o..o + 8].fill(0xFF);
            nbfree += nblk as i32;
            if css > 0 {
                for k in 0..nblk {
                    let bi = to_index(first_blk + k);
                    b[lay.clusteroff + bi / 8] |= 1 << (bi % 8);
                }
                run += nblk;
            }
        } else if w == u64::MAX {
            if css > 0 {
                close(&mut run, &mut clsum);
            }
        } else {
            for k in 0..nblk {
                let bits = (w >> (k * frag)) & fmask;
                let free = !bits & fmask;
                let rel = bit + k * frag;
                let bi = first_blk + k;
                if free == fmask {
                    for j in 0..frag {
                        let r = to_index(rel + j);
                        b[lay.freeoff + r / 8] |= 1 << (r % 8);
                    }
                    nbfree += 1;
                    if css > 0 && bi < ncl {
                        let bi = to_index(bi);
                        b[lay.clusteroff + bi / 8] |= 1 << (bi % 8);
                        run += 1;
                    }
                    continue;
                }
                if css > 0 {
                    close(&mut run, &mut clsum);
                }
                if free == 0 {
                    continue;
                }
                let mut len = 0usize;
                for j in 0..frag {
                    if free & (1 << j) != 0 {
                        let r = to_index(rel + j);
                        b[lay.freeoff + r / 8] |= 1 << (r % 8);
                        nffree += 1;
                        len += 1;
                    } else if len > 0 {
                        frsum[len] += 1;
                        len = 0;
                    }
                }
                if len > 0 {
                    frsum[len] += 1;
                }
            }
        }
        bit += 64;
    }
    if css > 0 {
        close(&mut run, &mut clsum);
        for (k, v) in clsum.iter().enumerate().skip(1) {
            cg.set_clustersum(k as u64, *v);
        }
    }
    for (i, v) in frsum.iter().enumerate().take(to_index(frag)).skip(1) {
        cg.set_cg_frsum(i, *v);
    }
    cg.set_cg_cs(Csum {
        cs_ndir: ndir,
        cs_nbfree: nbfree,
        cs_nifree: nifree,
        cs_nffree: nffree,
    });
    cg.as_bytes().to_vec()
}
