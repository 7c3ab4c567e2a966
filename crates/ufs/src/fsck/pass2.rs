//! Pass 2: the root inode, then every entry of every directory: record
//! layout (`dircheck`), `.` and `..`, entries naming unallocated, doomed or
//! out-of-range inodes, extra links to directories, entry types; each
//! entry counts one reference to its target. Then every `..` is checked
//! against the directory that names it.
use super::dirops;
use super::walk;
use super::*;
use ufs_format::bytes::{low_u16, low_u32, to_i32, to_signed};
use ufs_format::dinode::{dt, IFDIR};
use ufs_format::dir::{dirsiz, write_entry};

const P2: &str = "pass2";
/// `sizeof(struct dirtemplate)`: the smallest directory.
const MINDIRSIZE: u64 = 24;

pub(super) fn pass2(ctx: &mut Ctx) -> R<()> {
    check_root(ctx)?;
    ctx.set_state(UFS_ROOTINO, DFOUND);
    if let Some(d) = ctx.dir_mut(UFS_ROOTINO) {
        d.parent = UFS_ROOTINO;
    }
    // Directories in disk order.
    let mut order: Vec<(u64, u64)> = ctx.dirs.iter().map(|d| (d.first_blk, d.ino)).collect();
    order.sort_unstable();
    let order: Vec<u64> = order.into_iter().map(|(_, i)| i).collect();
    for &ino in &order {
        scan_dir(ctx, ino)?;
    }
    // Now that every parent is known, check each `..`.
    for &ino in &order {
        let Some(d) = ctx.dir(ino).cloned() else {
            continue;
        };
        if d.parent == 0 || d.size == 0 || !is_dir_state(ctx.state(ino)) {
            continue;
        }
        if d.dotdot == d.parent || d.dotdot == NO_DOTDOT {
            continue;
        }
        if d.dotdot == 0 {
            // A `..` whose repair was deferred until the parent was known.
            if ctx.can_write() && dirops::makeentry(ctx, ino, d.parent, b"..")? {
                ctx.dec_link(d.parent);
                if let Some(x) = ctx.dir_mut(ino) {
                    x.dotdot = d.parent;
                    x.dotdot_counted = true;
                }
            }
            continue;
        }
        if ctx.ask(
            P2,
            Severity::Preen,
            Some(ino),
            format!("BAD INODE NUMBER FOR '..' IN DIR I={ino}: CURRENTLY POINTS TO I={}, SHOULD POINT TO I={}; FIX", d.dotdot, d.parent),
        )? {
            if d.dotdot_counted {
                ctx.inc_link(d.dotdot);
            }
            ctx.dec_link(d.parent);
            dirops::changeino(ctx, ino, b"..", d.parent)?;
            if let Some(x) = ctx.dir_mut(ino) {
                x.dotdot = d.parent;
                x.dotdot_counted = true;
            }
        }
    }
    // Reachability.
    ctx.children.clear();
    let pairs: Vec<(u64, u64)> = ctx
        .dirs
        .iter()
        .filter(|d| d.parent != 0 && d.ino != UFS_ROOTINO)
        .map(|d| (d.parent, d.ino))
        .collect();
    for (p, c) in pairs {
        ctx.children.entry(p).or_default().push(c);
    }
    propagate(ctx, UFS_ROOTINO);
    Ok(())
}

/// Marks every directory reachable from `from` through parent links as
/// found.
pub(super) fn propagate(ctx: &mut Ctx, from: u64) {
    let mut stack = vec![from];
    let mut seen = HashSet::new();
    while let Some(d) = stack.pop() {
        if !seen.insert(d) {
            continue;
        }
        let kids = ctx.children.get(&d).cloned().unwrap_or_default();
        for k in kids {
            if is_dunfound(ctx.state(k)) {
                ctx.set_state(k, DFOUND);
            }
            if ctx.state(k) == DFOUND {
                stack.push(k);
            }
        }
    }
}

fn check_root(ctx: &mut Ctx) -> R<()> {
    let root = UFS_ROOTINO;
    let state = ctx.state(root);
    let msg = match state {
        DSTATE | DZLINK | DFOUND => return Ok(()),
        USTATE => "ROOT INODE UNALLOCATED; ALLOCATE",
        DCLEAR => "DUPS/BAD IN ROOT INODE; REALLOCATE",
        _ => "ROOT INODE NOT DIRECTORY; REALLOCATE",
    };
    if !ctx.ask(P2, Severity::Inconsistency, Some(root), msg)? {
        return Err(Halt::Stop);
    }
    if state != USTATE {
        walk::clear_inode(ctx, root)?;
    }
    if dirops::allocdir(ctx, root, root, 0o755)? != root {
        ctx.unfix_last();
        ctx.note(
            P2,
            Severity::Inconsistency,
            Some(root),
            "CANNOT ALLOCATE ROOT INODE",
        )?;
        return Err(Halt::Stop);
    }
    Ok(())
}

/// Scan position inside one directory.
struct Scan {
    dir: u64,
    /// Entries seen so far (`id_entryno`).
    entryno: u32,
    /// Bytes of the directory still to scan (`id_filesize`).
    filesize: i64,
    /// Offset in the current block (`id_loc`).
    loc: usize,
    write: bool,
}

fn scan_dir(ctx: &mut Ctx, ino: u64) -> R<()> {
    let g = ctx.g;
    let Some(d) = ctx.dir(ino).cloned() else {
        return Ok(());
    };
    let state = ctx.state(ino);
    if d.size == 0 || !matches!(state, DSTATE | DFOUND | DZLINK) {
        return Ok(());
    }
    let mut isize = d.size;
    if isize < MINDIRSIZE {
        let fix = ctx.ask(
            P2,
            Severity::Inconsistency,
            Some(ino),
            format!("DIRECTORY I={ino} TOO SHORT (SIZE {isize}); FIX"),
        )?;
        isize = DIRBLKSIZ as u64;
        if fix {
            set_size(ctx, ino, isize)?;
        }
    } else if isize % DIRBLKSIZ as u64 != 0 {
        let fix = ctx.ask(
            P2,
            Severity::Preen,
            Some(ino),
            format!("DIRECTORY I={ino}: LENGTH {isize} NOT MULTIPLE OF {DIRBLKSIZ}; ADJUST"),
        )?;
        isize = isize.div_ceil(DIRBLKSIZ as u64) * DIRBLKSIZ as u64;
        if fix {
            set_size(ctx, ino, isize)?;
        }
    }
    if let Some(x) = ctx.dir_mut(ino) {
        x.size = isize;
    }
    let di = ctx.read_inode(ino)?;
    let blocks = walk::data_blocks(ctx, &di, isize)?;
    let mut st = Scan {
        dir: ino,
        entryno: 0,
        filesize: to_signed(isize),
        loc: 0,
        write: false,
    };
    for (i, &(lbn, blk, nfrags)) in blocks.iter().enumerate() {
        if lbn != i as u64 || lbn.saturating_mul(g.bsize) >= isize || st.filesize <= 0 {
            break;
        }
        if ctx.chkrange(blk, nfrags) {
            st.filesize -= to_signed(nfrags * g.fsize);
            continue;
        }
        let mut buf = ctx.read_frags(blk, nfrags)?;
        st.loc = 0;
        st.write = false;
        while let Some(off) = next_entry(ctx, &mut buf, &mut st)? {
            if check_entry(ctx, &mut buf, off, &mut st)? {
                st.write = true;
            }
        }
        if st.write && ctx.can_write() {
            ctx.write_frags(blk, &buf)?;
        }
    }
    Ok(())
}

fn set_size(ctx: &mut Ctx, ino: u64, size: u64) -> R<()> {
    let mut di = ctx.read_inode(ino)?;
    di.set_di_size(size);
    ctx.write_inode(ino, &mut di)
}

/// `dircheck`: is the record at `off` well formed?
fn dircheck(en: Endian, buf: &[u8], off: usize, filesize: i64) -> bool {
    if off + 8 > buf.len() {
        return false;
    }
    let spaceleft = DIRBLKSIZ - off % DIRBLKSIZ;
    let ino = ufs_format::dir::header(en, buf, off).0;
    let reclen = (ufs_format::dir::header(en, buf, off).1) as usize;
    let dtype = buf[off + 6];
    let namlen = buf[off + 7] as usize;
    let size = dirsiz(namlen);
    if reclen == 0
        || reclen > spaceleft
        || reclen < size
        || filesize < to_signed(size as u64)
        || !reclen.is_multiple_of(4)
    {
        return false;
    }
    if off + reclen > buf.len() {
        return false;
    }
    if ino == 0 {
        return true;
    }
    if namlen == 0 || dtype > 15 {
        return false;
    }
    let name = &buf[off + 8..off + 8 + namlen];
    if name.iter().any(|&c| c == 0 || c == b'/') {
        return false;
    }
    buf[off + 8 + namlen] == 0
}

/// `fsck_readdir`: the next entry, salvaging a malformed record by turning
/// it (or it and the rest of its chunk) into free space.
fn next_entry(ctx: &mut Ctx, buf: &mut [u8], st: &mut Scan) -> R<Option<usize>> {
    let en = ctx.g.v.endian;
    let blksiz = buf.len();
    if st.filesize <= 0 || st.loc >= blksiz {
        return Ok(None);
    }
    let off = st.loc;
    let mut subsume = false;
    if !off.is_multiple_of(DIRBLKSIZ) || dircheck(en, buf, off, st.filesize) {
        let reclen = (ufs_format::dir::header(en, buf, off).1) as usize;
        st.loc += reclen;
        st.filesize -= to_signed(reclen as u64);
        if st.filesize <= 0 || st.loc >= blksiz || st.loc.is_multiple_of(DIRBLKSIZ) {
            return Ok(Some(off));
        }
        if dircheck(en, buf, st.loc, st.filesize) {
            return Ok(Some(off));
        }
        subsume = true;
    }
    let at = st.loc;
    let size = DIRBLKSIZ - at % DIRBLKSIZ;
    st.loc += size;
    st.filesize -= to_signed(size as u64);
    if subsume {
        buf[at..at + size].fill(0);
        // The record at `off` passed dircheck, so it and the rest of its
        // chunk are within the chunk's 512 bytes.
        let r = (ufs_format::dir::header(en, buf, off).1) as usize + size;
        ufs_format::dir::set_reclen(en, buf, off, low_u16(r));
    } else {
        buf[off..off + size].fill(0);
        ufs_format::dir::set_reclen(en, buf, off, low_u16(size));
    }
    if ctx.ask(
        P2,
        Severity::Inconsistency,
        Some(st.dir),
        format!(
            "DIRECTORY I={} CORRUPTED (bad entry at block offset {at}); SALVAGE",
            st.dir
        ),
    )? {
        st.write = true;
    }
    Ok(Some(off))
}

fn e_ino(en: Endian, b: &[u8], o: usize) -> u64 {
    ufs_format::dir::header(en, b, o).0 as u64
}
fn e_reclen(en: Endian, b: &[u8], o: usize) -> usize {
    (ufs_format::dir::header(en, b, o).1) as usize
}
fn e_name(b: &[u8], o: usize) -> &[u8] {
    let n = b[o + 7] as usize;
    let end = (o + 8 + n).min(b.len());
    &b[(o + 8).min(end)..end]
}
fn e_size(b: &[u8], o: usize) -> usize {
    dirsiz(b[o + 7] as usize)
}

/// `pass2check`: one entry. Returns whether the block was changed by an
/// accepted repair.
fn check_entry(ctx: &mut Ctx, buf: &mut [u8], off: usize, st: &mut Scan) -> R<bool> {
    let en = ctx.g.v.endian;
    let dir = st.dir;
    let mut altered = false;
    let mut dp = off;
    let end = off + e_reclen(en, buf, off);
    // Entry 0 must be ".".
    if st.entryno == 0 {
        if e_ino(en, buf, dp) != 0 && e_name(buf, dp) == b"." {
            if e_ino(en, buf, dp) != dir
                && ctx.ask(
                    P2,
                    Severity::Inconsistency,
                    Some(dir),
                    format!("BAD INODE NUMBER FOR '.' IN DIR I={dir}; FIX"),
                )?
            {
                ufs_format::dir::set_ino(en, buf, dp, low_u32(dir));
                altered = true;
            }
            if buf[dp + 6] != dt::DT_DIR
                && ctx.ask(
                    P2,
                    Severity::Inconsistency,
                    Some(dir),
                    format!("BAD TYPE VALUE FOR '.' IN DIR I={dir}; FIX"),
                )?
            {
                buf[dp + 6] = dt::DT_DIR;
                altered = true;
            }
        } else {
            let reclen = e_reclen(en, buf, dp);
            if reclen < 12 + e_size(buf, dp) {
                let what = if e_ino(en, buf, dp) != 0 {
                    format!(
                        "FIRST ENTRY CONTAINS {}; REPLACE WITH '.'",
                        String::from_utf8_lossy(e_name(buf, dp))
                    )
                } else {
                    "ADD '.' ENTRY".to_string()
                };
                if ctx.ask(
                    P2,
                    Severity::Inconsistency,
                    Some(dir),
                    format!("MISSING '.' IN DIR I={dir}; {what}"),
                )? {
                    write_entry(
                        en,
                        &mut buf[dp..end],
                        0,
                        low_u32(dir),
                        low_u16(reclen),
                        dt::DT_DIR,
                        b".",
                    );
                    altered = true;
                }
            } else if ctx.ask(
                P2,
                Severity::Inconsistency,
                Some(dir),
                format!("MISSING '.' IN DIR I={dir}; ADD '.' ENTRY"),
            )? {
                let r = reclen - 12;
                ufs_format::dir::set_reclen(en, buf, dp, low_u16(r));
                buf.copy_within(dp..dp + r, dp + 12);
                write_entry(en, &mut buf[dp..end], 0, low_u32(dir), 12, dt::DT_DIR, b".");
                st.entryno += 1;
                ctx.dec_link(dir);
                dp += 12;
                altered = true;
            }
        }
    }
    // Entry 1 must be "..".
    'chk1: {
        if st.entryno > 1 {
            break 'chk1;
        }
        let parent = ctx.dir(dir).map_or(0, |d| d.parent);
        if st.entryno == 0 {
            let n = e_size(buf, dp);
            let reclen = e_reclen(en, buf, dp);
            if reclen < n + 12 {
                break 'chk1;
            }
            let rest = reclen - n;
            ufs_format::dir::set_reclen(en, buf, dp, low_u16(n));
            st.entryno += 1;
            let t = e_ino(en, buf, dp);
            ctx.dec_link(t);
            dp += n;
            buf[dp..dp + rest].fill(0);
            ufs_format::dir::set_reclen(en, buf, dp, low_u16(rest));
        }
        if e_ino(en, buf, dp) != 0 && e_name(buf, dp) == b".." {
            if e_ino(en, buf, dp) >= ctx.maxino() {
                let fix = ctx.ask(
                    P2,
                    Severity::Inconsistency,
                    Some(dir),
                    format!("BAD INODE NUMBER FOR '..' IN DIR I={dir}; FIX"),
                )?;
                ufs_format::dir::set_ino(
                    en,
                    buf,
                    dp,
                    low_u32(if parent != 0 { parent } else { UFS_ROOTINO }),
                );
                altered |= fix;
            }
            let dd = e_ino(en, buf, dp);
            if let Some(x) = ctx.dir_mut(dir) {
                x.dotdot = dd;
            }
            if buf[dp + 6] != dt::DT_DIR {
                let fix = ctx.ask(
                    P2,
                    Severity::Inconsistency,
                    Some(dir),
                    format!("BAD TYPE VALUE FOR '..' IN DIR I={dir}; FIX"),
                )?;
                buf[dp + 6] = dt::DT_DIR;
                altered |= fix;
            }
            break 'chk1;
        }
        let reclen = e_reclen(en, buf, dp);
        let occupied = e_ino(en, buf, dp) != 0;
        let replace = reclen < 12 + e_size(buf, dp);
        let what = if replace && occupied {
            format!(
                "SECOND ENTRY CONTAINS {}; REPLACE WITH '..'",
                String::from_utf8_lossy(e_name(buf, dp))
            )
        } else {
            "ADD '..' ENTRY".to_string()
        };
        if !ctx.ask(
            P2,
            Severity::Inconsistency,
            Some(dir),
            format!("MISSING '..' IN DIR I={dir}; {what}"),
        )? {
            if let Some(x) = ctx.dir_mut(dir) {
                x.dotdot = NO_DOTDOT;
            }
            break 'chk1;
        }
        if parent == 0 {
            // Written for real once the parent is known.
            st.entryno += 1;
        }
        if let Some(x) = ctx.dir_mut(dir) {
            x.dotdot = parent;
        }
        if replace || !occupied {
            write_entry(
                en,
                &mut buf[dp..end],
                0,
                low_u32(parent),
                low_u16(reclen),
                dt::DT_DIR,
                b"..",
            );
        } else {
            let r = reclen - 12;
            ufs_format::dir::set_reclen(en, buf, dp, low_u16(r));
            buf.copy_within(dp..dp + r, dp + 12);
            write_entry(
                en,
                &mut buf[dp..end],
                0,
                low_u32(parent),
                12,
                dt::DT_DIR,
                b"..",
            );
            if parent != 0 {
                st.entryno += 1;
                ctx.dec_link(parent);
                if let Some(x) = ctx.dir_mut(dir) {
                    x.dotdot_counted = true;
                }
            }
            dp += 12;
        }
        altered = true;
    }
    // Any entry.
    let target = e_ino(en, buf, dp);
    if target == 0 {
        return Ok(altered);
    }
    let name = e_name(buf, dp).to_vec();
    if st.entryno >= 2 && (name == b"." || name == b"..") {
        let fix = ctx.ask(
            P2,
            Severity::Inconsistency,
            Some(dir),
            format!(
                "EXTRA '{}' ENTRY IN DIR I={dir}; FIX",
                String::from_utf8_lossy(&name)
            ),
        )?;
        ufs_format::dir::set_ino(en, buf, dp, 0);
        return Ok(altered | fix);
    }
    st.entryno += 1;
    let entryno = st.entryno;
    let dtype = buf[dp + 6];
    let shown = String::from_utf8_lossy(&name).into_owned();
    let mut remove = false;
    if target >= ctx.maxino() {
        remove = ctx.ask(
            P2,
            Severity::Inconsistency,
            Some(dir),
            format!("I OUT OF RANGE I={target} NAME={shown} IN DIR I={dir}; REMOVE"),
        )?;
    } else if (target == UFS_WINO) != (dtype == dt::DT_WHT) {
        let fix = ctx.ask(
            P2,
            Severity::Inconsistency,
            Some(dir),
            format!("BAD WHITEOUT ENTRY I={target} NAME={shown} IN DIR I={dir}; FIX"),
        )?;
        ufs_format::dir::set_ino(en, buf, dp, low_u32(UFS_WINO));
        buf[dp + 6] = dt::DT_WHT;
        altered |= fix;
    } else if target != UFS_WINO {
        let mut tries = 0;
        loop {
            tries += 1;
            let s = ctx.state(target);
            match s {
                USTATE => {
                    if entryno > 2 {
                        remove = ctx.ask(
                            P2,
                            Severity::Inconsistency,
                            Some(target),
                            format!("UNALLOCATED I={target} NAME={shown} IN DIR I={dir}; REMOVE"),
                        )?;
                    }
                    break;
                }
                DCLEAR | FCLEAR => {
                    if entryno <= 2 {
                        break;
                    }
                    remove = if s == FCLEAR {
                        ctx.ask(
                            P2,
                            Severity::Inconsistency,
                            Some(target),
                            format!("DUP/BAD I={target} NAME={shown} IN DIR I={dir}; REMOVE"),
                        )?
                    } else {
                        ctx.ask(
                            P2,
                            Severity::Preen,
                            Some(target),
                            format!("ZERO LENGTH DIRECTORY I={target} NAME={shown} IN DIR I={dir}; REMOVE"),
                        )?
                    };
                    if remove || tries > 1 {
                        break;
                    }
                    // Kept: treat it as an ordinary inode from now on.
                    let di = ctx.read_inode(target)?;
                    let ns = if di.file_type() == IFDIR {
                        DSTATE
                    } else {
                        FSTATE
                    };
                    if let Some(x) = ctx.info_mut(target) {
                        x.state = ns;
                        x.linkcnt = to_i32(di.nlink());
                    }
                    continue;
                }
                DSTATE | DZLINK | DFOUND => {
                    // Reachability is settled afterwards from the parent
                    // links (`propagate`).
                    if entryno > 2 {
                        let p = ctx.dir(target).map_or(0, |d| d.parent);
                        if p == 0 {
                            if let Some(x) = ctx.dir_mut(target) {
                                x.parent = dir;
                            }
                        } else if fix_extraneous(ctx, target, dir, &shown)? {
                            remove = true;
                            break;
                        }
                    }
                    check_type(ctx, buf, dp, dir, target, &shown, &mut altered)?;
                    count_ref(ctx, dir, target, entryno);
                    break;
                }
                _ => {
                    check_type(ctx, buf, dp, dir, target, &shown, &mut altered)?;
                    count_ref(ctx, dir, target, entryno);
                    break;
                }
            }
        }
    }
    if remove {
        ufs_format::dir::set_ino(en, buf, dp, 0);
        altered = true;
    }
    Ok(altered)
}

fn check_type(
    ctx: &mut Ctx,
    buf: &mut [u8],
    dp: usize,
    dir: u64,
    target: u64,
    shown: &str,
    altered: &mut bool,
) -> R<()> {
    let want = ctx.info(target).dtype;
    if buf[dp + 6] != want {
        let fix = ctx.ask(
            P2,
            Severity::Inconsistency,
            Some(target),
            format!("BAD TYPE VALUE {} FOR I={target} NAME={shown} IN DIR I={dir} (SHOULD BE {want}); FIX", buf[dp + 6]),
        )?;
        buf[dp + 6] = want;
        *altered |= fix;
    }
    Ok(())
}

fn count_ref(ctx: &mut Ctx, dir: u64, target: u64, entryno: u32) {
    ctx.dec_link(target);
    if entryno == 2 {
        if let Some(x) = ctx.dir_mut(dir) {
            if x.dotdot == target {
                x.dotdot_counted = true;
            }
        }
    }
}

/// A second name for directory `child` found in `dir` (`fix_extraneous`).
/// Returns true to remove the new name.
fn fix_extraneous(ctx: &mut Ctx, child: u64, dir: u64, name: &str) -> R<bool> {
    let Some(cd) = ctx.dir(child).cloned() else {
        return Ok(false);
    };
    let mut dotdot = cd.dotdot;
    if dotdot == 0 {
        // Ask the directory itself who its parent is.
        if let Some(e) =
            dirops::find_entry(ctx, child, &|i, ino, n| i == 1 && ino != 0 && n == b"..")?
        {
            dotdot = e.ino as u64;
            if let Some(x) = ctx.dir_mut(child) {
                x.dotdot = dotdot;
            }
        }
    }
    if dotdot == 0
        || dotdot == NO_DOTDOT
        || dir == cd.parent
        || dotdot != dir
        || dotdot == cd.parent
    {
        return ctx.ask(
            P2,
            Severity::Preen,
            Some(child),
            format!("DIR I={dir} ENTRY {name} IS AN EXTRANEOUS HARD LINK TO DIRECTORY I={child}; REMOVE"),
        );
    }
    // `..` names the new parent: the old name is the extra one.
    if ctx.ask(
        P2,
        Severity::Preen,
        Some(child),
        format!(
            "NAME OF DIRECTORY I={child} IN DIR I={} IS AN EXTRANEOUS HARD LINK; REMOVE",
            cd.parent
        ),
    )? {
        if dirops::clear_entry(ctx, cd.parent, child)?.is_some() {
            ctx.inc_link(child);
        }
        if let Some(x) = ctx.dir_mut(child) {
            x.parent = dir;
        }
    }
    Ok(false)
}
