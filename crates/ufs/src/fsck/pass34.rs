//! Pass 3 (connectivity and directory depths) and pass 4 (link counts,
//! unreferenced and doomed inodes).
use super::dirops;
use super::pass2::propagate;
use super::walk;
use super::*;
use ufs_format::bytes::{to_i32, to_index};

const P3: &str = "pass3";
const P4: &str = "pass4";

pub(super) fn pass3(ctx: &mut Ctx) -> R<()> {
    let mut order: Vec<(u64, u64)> = ctx.dirs.iter().map(|d| (d.first_blk, d.ino)).collect();
    order.sort_unstable();
    let ndirs = order.len();
    let mut tried: HashSet<u64> = HashSet::new();
    for &(_, ino) in order.iter().rev() {
        let s = ctx.state(ino);
        if ino == UFS_ROOTINO || s != DSTATE {
            continue;
        }
        // Climb to the top of the unreachable chain.
        let mut cur = ino;
        let mut count = 0usize;
        let orphan = loop {
            let p = ctx.dir(cur).map_or(0, |d| d.parent);
            if p == 0 || !is_dunfound(ctx.state(p)) || count > ndirs {
                break cur;
            }
            cur = p;
            count += 1;
        };
        if !tried.insert(orphan) {
            continue;
        }
        if count <= ndirs {
            let dotdot = ctx.dir(orphan).map_or(0, |d| d.dotdot);
            let idx = ctx.findings.len();
            if ctx.ask(
                P3,
                Severity::Preen,
                Some(orphan),
                format!("UNREF DIR I={orphan}; RECONNECT"),
            )? {
                if dirops::linkup(ctx, P3, orphan, dotdot, None)? {
                    ctx.set_state(orphan, DFOUND);
                    propagate(ctx, orphan);
                } else {
                    ctx.reconnect_failed(idx);
                }
            }
            continue;
        }
        let idx = ctx.findings.len();
        if !ctx.ask(
            P3,
            Severity::Inconsistency,
            Some(orphan),
            format!("ORPHANED DIRECTORY LOOP DETECTED I={orphan}; RECONNECT"),
        )? {
            continue;
        }
        let parent = ctx.dir(orphan).map_or(0, |d| d.parent);
        let name = dirops::find_entry(ctx, parent, &|i, e, _| i >= 2 && e as u64 == orphan)?;
        let name = match name {
            Some(e) => {
                let buf = ctx.read_frags(e.blk, e.len as u64 / ctx.g.fsize)?;
                let n = buf[e.off + 7] as usize;
                buf.get(e.off + 8..e.off + 8 + n).map(|s| s.to_vec())
            }
            None => None,
        };
        if dirops::linkup(ctx, P3, orphan, parent, name)? {
            if dirops::clear_entry(ctx, parent, orphan)?.is_some() {
                ctx.inc_link(orphan);
            }
            ctx.set_state(orphan, DFOUND);
            propagate(ctx, orphan);
        } else {
            ctx.reconnect_failed(idx);
        }
    }
    fix_depths(ctx)
}

/// Every reachable directory's `di_dirdepth` must be its parent's plus one,
/// the root's 0. A file system whose directories still say 0 has never
/// tracked depths: a check-only run does not report that (fsck_ffs only
/// offers to start tracking), a repairing run starts tracking.
fn fix_depths(ctx: &mut Ctx) -> R<()> {
    let mut want: Vec<(u64, u32)> = Vec::new();
    let mut stack = vec![(UFS_ROOTINO, 0u32)];
    let mut seen = HashSet::new();
    while let Some((d, depth)) = stack.pop() {
        if !seen.insert(d) || ctx.state(d) != DFOUND {
            continue;
        }
        want.push((d, depth));
        for k in ctx.children.get(&d).cloned().unwrap_or_default() {
            stack.push((k, depth.saturating_add(1)));
        }
    }
    want.sort_unstable();
    let untracked = want
        .iter()
        .any(|&(d, _)| d != UFS_ROOTINO && ctx.dir(d).is_some_and(|x| !x.created && x.depth == 0));
    let wrong: Vec<(u64, u32, u32)> = want
        .iter()
        .filter_map(|&(d, w)| ctx.dir(d).map(|x| (d, x.depth, w)))
        .filter(|&(_, have, w)| have != w)
        .collect();
    if wrong.is_empty() {
        return Ok(());
    }
    if untracked {
        if ctx.mode == FsckMode::Check {
            return Ok(());
        }
        let msg = format!(
            "UPDATING FILESYSTEM TO TRACK DIRECTORY DEPTH ({} directories)",
            wrong.len()
        );
        if !ctx.ask(P3, Severity::Preen, None, msg)? {
            return Ok(());
        }
        for &(d, _, w) in &wrong {
            set_depth(ctx, d, w)?;
        }
        return Ok(());
    }
    for (d, have, w) in wrong {
        if ctx.ask(
            P3,
            Severity::Preen,
            Some(d),
            format!("DIRECTORY I={d} DEPTH {have} SHOULD BE {w}; ADJUST"),
        )? {
            set_depth(ctx, d, w)?;
        }
    }
    Ok(())
}

fn set_depth(ctx: &mut Ctx, ino: u64, depth: u32) -> R<()> {
    let mut di = ctx.read_inode(ino)?;
    di.set_di_freelink(depth);
    ctx.write_inode(ino, &mut di)?;
    if let Some(x) = ctx.dir_mut(ino) {
        x.depth = depth;
    }
    Ok(())
}

pub(super) fn pass4(ctx: &mut Ctx) -> R<()> {
    let g = ctx.g;
    let all: Vec<u64> = (0..g.ncg)
        .flat_map(|c| {
            let n = ctx.cgs[to_index(c)].inos.len() as u64;
            (0..n).map(move |i| c * g.ipg + i)
        })
        .filter(|&ino| ino >= UFS_ROOTINO)
        .collect();
    // Doomed inodes first, so the references they hold are released before
    // any link count is judged.
    for &ino in &all {
        let info = ctx.info(ino);
        match info.state {
            FZLINK if info.linkcnt == 0 => clri(ctx, ino, "UNREF", Severity::Preen)?,
            DSTATE | DZLINK => clri(ctx, ino, "UNREF", Severity::Preen)?,
            DCLEAR => {
                let di = ctx.read_inode(ino)?;
                if di.di_size() == 0 {
                    clri(ctx, ino, "ZERO LENGTH", Severity::Preen)?
                } else {
                    clri(ctx, ino, "BAD/DUP", Severity::Inconsistency)?
                }
            }
            FCLEAR => clri(ctx, ino, "BAD/DUP", Severity::Inconsistency)?,
            _ => {}
        }
    }
    for &ino in &all {
        let info = ctx.info(ino);
        if matches!(info.state, FSTATE | DFOUND | FZLINK) && info.linkcnt != 0 {
            adjust(ctx, ino, info.linkcnt)?;
        }
    }
    let mut guard = 0;
    while let Some(ino) = ctx.recheck.pop() {
        guard += 1;
        if guard > 1000 {
            ctx.needs_rerun = true;
            break;
        }
        let info = ctx.info(ino);
        if matches!(info.state, FSTATE | DFOUND | FZLINK) && info.linkcnt != 0 {
            adjust(ctx, ino, info.linkcnt)?;
        }
    }
    Ok(())
}

fn kind_of(ctx: &Ctx, ino: u64) -> &'static str {
    if is_dir_state(ctx.state(ino)) {
        "DIR"
    } else {
        "FILE"
    }
}

/// Clears an inode (`clri`), first releasing the references a scanned
/// directory's entries hold.
fn clri(ctx: &mut Ctx, ino: u64, why: &str, sev: Severity) -> R<()> {
    let kind = kind_of(ctx, ino);
    if !ctx.ask(P4, sev, Some(ino), format!("{why} {kind} I={ino}; CLEAR"))? {
        return Ok(());
    }
    clear_now(ctx, ino)
}

fn clear_now(ctx: &mut Ctx, ino: u64) -> R<()> {
    let s = ctx.state(ino);
    if matches!(s, DSTATE | DZLINK | DFOUND) {
        release_dir_refs(ctx, ino)?;
    }
    walk::clear_inode(ctx, ino)?;
    ctx.resolved_by_clearing(ino);
    Ok(())
}

/// The entries of a directory about to be cleared stop being references.
fn release_dir_refs(ctx: &mut Ctx, dir: u64) -> R<()> {
    let en = ctx.g.v.endian;
    let Some(d) = ctx.dir(dir).cloned() else {
        return Ok(());
    };
    if d.size == 0 {
        return Ok(());
    }
    if d.dotdot_counted && d.dotdot != dir {
        ctx.inc_link(d.dotdot);
    }
    // Collect the names after `.` and `..`.
    let mut targets = Vec::new();
    let di = ctx.read_inode(dir)?;
    let g = ctx.g;
    let mut index = 0u64;
    for (lbn, blk, nfrags) in walk::data_blocks(ctx, &di, d.size)? {
        if ctx.chkrange(blk, nfrags) {
            continue;
        }
        let buf = ctx.read_frags(blk, nfrags)?;
        let len = buf
            .len()
            .min(to_index(d.size.saturating_sub(lbn * g.bsize)));
        let mut c = 0;
        while c + DIRBLKSIZ <= len {
            for (_, ino, _, _, _) in dirops::chunk_entries(en, &buf[c..c + DIRBLKSIZ]) {
                if index >= 2 && ino != 0 && (ino as u64) != dir {
                    targets.push(ino as u64);
                }
                index += 1;
            }
            c += DIRBLKSIZ;
        }
    }
    for t in targets {
        if t >= UFS_ROOTINO && t < ctx.maxino() && !matches!(ctx.state(t), USTATE | FCLEAR | DCLEAR)
        {
            ctx.inc_link(t);
            if ctx.dir(t).is_some_and(|x| x.parent == dir) {
                if let Some(x) = ctx.dir_mut(t) {
                    x.parent = 0;
                }
            }
        }
    }
    Ok(())
}

/// Fixes the link count of `ino`, whose `lcnt` links were not found
/// (`adjust`); an inode nothing names is reconnected or cleared.
fn adjust(ctx: &mut Ctx, ino: u64, mut lcnt: i32) -> R<()> {
    let mut di = ctx.read_inode(ino)?;
    let nlink = to_i32(di.nlink());
    let kind = kind_of(ctx, ino);
    if nlink == lcnt {
        if ctx.mode == FsckMode::Preen && di.di_size() == 0 {
            return clri(ctx, ino, "UNREF", Severity::Preen);
        }
        let idx = ctx.findings.len();
        if !ctx.ask(
            P4,
            Severity::Preen,
            Some(ino),
            format!("UNREF {kind} I={ino}; RECONNECT"),
        )? {
            return Ok(());
        }
        let dotdot = ctx.dir(ino).map_or(0, |d| d.dotdot);
        if !dirops::linkup(ctx, P4, ino, dotdot, None)? {
            ctx.reconnect_failed(idx);
            return clri(ctx, ino, "UNREF", Severity::Preen);
        }
        lcnt -= 1;
        di = ctx.read_inode(ino)?;
    }
    if lcnt != 0 {
        let name = if ino == ctx.lfdir { "lost+found" } else { kind };
        // Clamped to the field's 16 bits, so the conversion cannot fail.
        let want =
            u32::try_from((i64::from(nlink) - i64::from(lcnt)).clamp(0, i64::from(u16::MAX)))
                .unwrap_or(0);
        let sev = if lcnt < 0 {
            Severity::Inconsistency
        } else {
            Severity::Preen
        };
        if ctx.ask(
            P4,
            sev,
            Some(ino),
            format!("LINK COUNT {name} I={ino} COUNT {nlink} SHOULD BE {want}; ADJUST"),
        )? {
            di.set_nlink(want);
            ctx.write_inode(ino, &mut di)?;
            if let Some(x) = ctx.info_mut(ino) {
                x.linkcnt = 0;
            }
        }
    } else if let Some(x) = ctx.info_mut(ino) {
        x.linkcnt = 0;
    }
    Ok(())
}
