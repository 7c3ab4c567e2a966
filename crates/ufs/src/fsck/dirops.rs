//! Directory surgery used by the repair paths: lookup, adding and
//! retargeting entries, growing a directory, allocating inodes, fragments
//! and new directories, `lost+found` and reconnection (`linkup`).
//!
//! These run only in repair modes and only on directories pass 2 has
//! already made well-formed; they still parse defensively.
//!
//! Inode numbers written into entries are below `ncg * ipg`, which
//! superblock validation keeps within 32 bits, so they go through
//! `low_u32`; record lengths are within a 512-byte chunk (`low_u16`).
use super::walk::{self, BlockRef, Kind, Release, Step, Visitor};
use super::*;
use ufs_format::bytes::{low_u16, low_u32, to_index};
use ufs_format::dinode::{dt, IFDIR};
use ufs_format::dir::{dirsiz, write_entry};

/// Where an entry lives.
#[derive(Clone, Debug)]
pub(crate) struct EntryLoc {
    /// First fragment of the directory block holding it.
    pub blk: u64,
    /// Length of that block in bytes.
    pub len: usize,
    /// Offset of the entry inside the block.
    pub off: usize,
    pub ino: u32,
}

/// Entries of one 512-byte chunk: (offset in chunk, ino, reclen, type,
/// name). Stops at the first malformed record.
pub(crate) fn chunk_entries(en: Endian, chunk: &[u8]) -> Vec<(usize, u32, usize, u8, Vec<u8>)> {
    let mut out = Vec::new();
    let mut off = 0usize;
    while off + 8 <= chunk.len().min(DIRBLKSIZ) {
        let reclen = (ufs_format::dir::header(en, chunk, off).1) as usize;
        if reclen == 0 || !reclen.is_multiple_of(4) || off + reclen > DIRBLKSIZ.min(chunk.len()) {
            break;
        }
        let namlen = chunk[off + 7] as usize;
        let name = if off + 8 + namlen <= off + reclen {
            chunk[off + 8..off + 8 + namlen].to_vec()
        } else {
            Vec::new()
        };
        out.push((
            off,
            ufs_format::dir::header(en, chunk, off).0,
            reclen,
            chunk[off + 6],
            name,
        ));
        off += reclen;
    }
    out
}

/// Finds the first entry of directory `dir` matching `pred(index, ino,
/// name)`.
pub(crate) fn find_entry(
    ctx: &mut Ctx,
    dir: u64,
    pred: &dyn Fn(u64, u32, &[u8]) -> bool,
) -> R<Option<EntryLoc>> {
    let en = ctx.g.v.endian;
    let di = ctx.read_inode(dir)?;
    if !di.is_dir() {
        return Ok(None);
    }
    let size = di.di_size().min(0x7FFF_FFFF);
    let g = ctx.g;
    let mut index = 0u64;
    for (lbn, blk, nfrags) in walk::data_blocks(ctx, &di, size)? {
        if ctx.chkrange(blk, nfrags) {
            continue;
        }
        let buf = ctx.read_frags(blk, nfrags)?;
        let len = buf.len().min(to_index(size.saturating_sub(lbn * g.bsize)));
        let mut c = 0;
        while c + DIRBLKSIZ <= len {
            for (off, ino, _, _, name) in chunk_entries(en, &buf[c..c + DIRBLKSIZ]) {
                if pred(index, ino, &name) {
                    return Ok(Some(EntryLoc {
                        blk,
                        len: buf.len(),
                        off: c + off,
                        ino,
                    }));
                }
                index += 1;
            }
            c += DIRBLKSIZ;
        }
    }
    Ok(None)
}

pub(crate) fn lookup(ctx: &mut Ctx, dir: u64, name: &[u8]) -> R<Option<u64>> {
    Ok(find_entry(ctx, dir, &|_, ino, n| ino != 0 && n == name)?.map(|e| e.ino as u64))
}

/// Points entry `name` of `dir` at `newino` (`changeino`); returns the
/// inode it named before.
pub(crate) fn changeino(ctx: &mut Ctx, dir: u64, name: &[u8], newino: u64) -> R<Option<u64>> {
    let en = ctx.g.v.endian;
    let Some(e) = find_entry(ctx, dir, &|_, ino, n| ino != 0 && n == name)? else {
        return Ok(None);
    };
    let mut buf = ctx.read_frags(e.blk, (e.len as u64) / ctx.g.fsize)?;
    ufs_format::dir::set_ino(en, &mut buf, e.off, low_u32(newino));
    buf[e.off + 6] = ctx.info(newino).dtype;
    ctx.write_frags(e.blk, &buf)?;
    Ok(Some(e.ino as u64))
}

/// Clears (sets `d_ino = 0`) the first entry after `.` and `..` of `dir`
/// that names `target`; returns its name.
pub(crate) fn clear_entry(ctx: &mut Ctx, dir: u64, target: u64) -> R<Option<Vec<u8>>> {
    let en = ctx.g.v.endian;
    let Some(e) = find_entry(ctx, dir, &|i, ino, _| i >= 2 && ino as u64 == target)? else {
        return Ok(None);
    };
    let mut buf = ctx.read_frags(e.blk, (e.len as u64) / ctx.g.fsize)?;
    let namlen = buf[e.off + 7] as usize;
    let name = buf
        .get(e.off + 8..e.off + 8 + namlen)
        .map(|s| s.to_vec())
        .unwrap_or_default();
    ufs_format::dir::set_ino(en, &mut buf, e.off, 0);
    ctx.write_frags(e.blk, &buf)?;
    Ok(Some(name))
}

/// Adds the entry `name` → `ino` to directory `parent` (`makeentry`),
/// growing the directory when no chunk has room. The caller accounts for
/// the new reference.
pub(crate) fn makeentry(ctx: &mut Ctx, parent: u64, ino: u64, name: &[u8]) -> R<bool> {
    if parent < UFS_ROOTINO
        || parent >= ctx.maxino()
        || ino < UFS_ROOTINO
        || ino >= ctx.maxino()
        || name.is_empty()
        || name.len() > MAXNAMLEN
    {
        return Ok(false);
    }
    let mut di = ctx.read_inode(parent)?;
    if !di.is_dir() {
        return Ok(false);
    }
    if di.di_size() % DIRBLKSIZ as u64 != 0 {
        di.set_di_size(di.di_size().div_ceil(DIRBLKSIZ as u64) * DIRBLKSIZ as u64);
        ctx.write_inode(parent, &mut di)?;
    }
    for attempt in 0..2 {
        if try_insert(ctx, parent, ino, name)? {
            return Ok(true);
        }
        if attempt == 0 && !expanddir(ctx, parent)? {
            return Ok(false);
        }
    }
    Ok(false)
}

fn try_insert(ctx: &mut Ctx, parent: u64, ino: u64, name: &[u8]) -> R<bool> {
    let en = ctx.g.v.endian;
    let di = ctx.read_inode(parent)?;
    let size = di.di_size().min(0x7FFF_FFFF);
    let g = ctx.g;
    let need = dirsiz(name.len());
    let dtype = ctx.info(ino).dtype;
    let mut blocks = walk::data_blocks(ctx, &di, size)?;
    // Start where the last insertion into this directory succeeded, so
    // that filling lost+found stays linear.
    if let Some(&hint) = ctx.insert_hint.get(&parent) {
        if let Some(p) = blocks.iter().position(|b| b.0 == hint) {
            blocks.rotate_left(p);
        }
    }
    for (lbn, blk, nfrags) in blocks {
        if ctx.chkrange(blk, nfrags) {
            continue;
        }
        let mut buf = ctx.read_frags(blk, nfrags)?;
        let len = buf.len().min(to_index(size.saturating_sub(lbn * g.bsize)));
        let mut c = 0;
        while c + DIRBLKSIZ <= len {
            for (off, eino, reclen, _, ename) in chunk_entries(en, &buf[c..c + DIRBLKSIZ]) {
                let used = if eino != 0 { dirsiz(ename.len()) } else { 0 };
                if reclen >= used + need {
                    let at = c + off;
                    if used > 0 {
                        ufs_format::dir::set_reclen(en, &mut buf, at, low_u16(used));
                    }
                    let nrec = reclen - used;
                    let chunk = &mut buf[c..c + DIRBLKSIZ];
                    write_entry(
                        en,
                        chunk,
                        off + used,
                        low_u32(ino),
                        low_u16(nrec),
                        dtype,
                        name,
                    );
                    ctx.write_frags(blk, &buf)?;
                    ctx.insert_hint.insert(parent, lbn);
                    return Ok(true);
                }
            }
            c += DIRBLKSIZ;
        }
    }
    Ok(false)
}

/// Fills `buf[from..]` with empty directory chunks.
fn empty_chunks(en: Endian, buf: &mut [u8], from: usize) {
    buf[from..].fill(0);
    let mut c = from;
    while c + DIRBLKSIZ <= buf.len() {
        ufs_format::dir::set_reclen(en, buf, c, low_u16(DIRBLKSIZ));
        c += DIRBLKSIZ;
    }
}

/// Grows a directory by at least one chunk (`expanddir`). Only the direct
/// blocks are used.
fn expanddir(ctx: &mut Ctx, dir: u64) -> R<bool> {
    let en = ctx.g.v.endian;
    let g = ctx.g;
    let mut di = ctx.read_inode(dir)?;
    let size = di.di_size();
    if !di.is_dir() || size == 0 {
        return Ok(false);
    }
    let lbn = to_index(g.lblkno(size));
    let off = to_index(g.blkoff(size));
    let bsize = to_index(g.bsize);
    if off != 0 {
        // The last block is not full: make it a whole block.
        if lbn >= UFS_NDADDR {
            // An indirect-mapped block is always whole: use its tail.
            return Ok(false);
        }
        let old = di.di_db(lbn);
        let oldlen = g.fragroundup(off as u64);
        if old == 0 || ctx.chkrange(old, oldlen / g.fsize) {
            return Ok(false);
        }
        let data = ctx.read_frags(old, oldlen / g.fsize)?;
        if oldlen == g.bsize {
            let mut buf = data;
            empty_chunks(en, &mut buf, off);
            ctx.write_frags(old, &buf)?;
        } else {
            let Some(newblk) = alloc_frags(ctx, g.frag) else {
                return Ok(false);
            };
            let mut buf = vec![0u8; bsize];
            buf[..off].copy_from_slice(&data[..off]);
            empty_chunks(en, &mut buf, off);
            ctx.write_frags(newblk, &buf)?;
            free_frags(ctx, old, oldlen / g.fsize);
            di.set_di_db(lbn, newblk);
            di.set_di_blocks(di.di_blocks().saturating_add((g.bsize - oldlen) / 512));
        }
        di.set_di_size((lbn as u64 + 1) * g.bsize);
        ctx.write_inode(dir, &mut di)?;
        ctx.add_dir_size(dir, (lbn as u64 + 1) * g.bsize);
        return Ok(true);
    }
    if lbn >= UFS_NDADDR {
        return Ok(false);
    }
    let Some(newblk) = alloc_frags(ctx, g.frag) else {
        return Ok(false);
    };
    let mut buf = vec![0u8; bsize];
    empty_chunks(en, &mut buf, 0);
    ctx.write_frags(newblk, &buf)?;
    di.set_di_db(lbn, newblk);
    di.set_di_size(size.saturating_add(g.bsize));
    di.set_di_blocks(di.di_blocks().saturating_add(g.bsize / 512));
    ctx.write_inode(dir, &mut di)?;
    ctx.add_dir_size(dir, size.saturating_add(g.bsize));
    Ok(true)
}

impl Ctx<'_> {
    fn add_dir_size(&mut self, dir: u64, size: u64) {
        if let Some(d) = self.dir_mut(dir) {
            d.size = size;
        }
    }
}

/// Allocates `n` fragments inside one block (`allocblk`).
pub(crate) fn alloc_frags(ctx: &mut Ctx, n: u64) -> Option<u64> {
    let g = ctx.g;
    let mut from = 0;
    loop {
        let f = ctx.used.find_free_run(from, n, g.frag)?;
        if f + n <= g.size && !ctx.chkrange(f, n) {
            for x in f..f + n {
                ctx.used.set(x);
            }
            ctx.toggle_frags(f, n);
            return Some(f);
        }
        from = (f / g.frag + 1) * g.frag;
    }
}

pub(crate) fn free_frags(ctx: &mut Ctx, blk: u64, n: u64) {
    for x in blk..blk + n {
        ctx.used.clear(x);
    }
    ctx.toggle_frags(blk, n);
}

/// Allocates an inode (`allocino`): `request`, or the first free one
/// after the root. Grows a group's initialised inode table if needed.
pub(crate) fn alloc_ino(ctx: &mut Ctx, request: u64) -> R<Option<u64>> {
    let g = ctx.g;
    if request != 0 {
        if ctx.state(request) != USTATE || ctx.info_mut(request).is_none() {
            return Ok(None);
        }
        ctx.toggled_inos.insert(request);
        return Ok(Some(request));
    }
    for c in 0..g.ncg {
        let n = u64::from(ctx.cgs[to_index(c)].initediblk);
        for i in 0..n {
            let ino = c * g.ipg + i;
            if ino <= UFS_ROOTINO {
                continue;
            }
            if ctx.state(ino) == USTATE {
                ctx.toggled_inos.insert(ino);
                return Ok(Some(ino));
            }
        }
    }
    // Initialise one more block of inodes somewhere.
    for c in 0..g.ncg {
        let n = u64::from(ctx.cgs[to_index(c)].initediblk);
        if n + g.inopb <= g.ipg {
            let first = c * g.ipg + n;
            let zero = vec![0u8; to_index(g.inopb) * g.dinode_size()];
            let off = ctx.ino_offset(first);
            ctx.write_bytes(off, &zero)?;
            // At most ipg, which validation keeps within 2^31.
            ctx.cgs[to_index(c)].initediblk = low_u32(n + g.inopb);
            let ino = if first <= UFS_ROOTINO {
                UFS_ROOTINO + 1
            } else {
                first
            };
            ctx.toggled_inos.insert(ino);
            return Ok(Some(ino));
        }
    }
    Ok(None)
}

/// Creates a directory holding `.` and `..` (`allocdir`). For the root
/// (`request == parent == ROOTINO`) the entries are counted by pass 2; any
/// other directory is entered as reachable with its references counted.
pub(crate) fn allocdir(ctx: &mut Ctx, parent: u64, request: u64, perm: u16) -> R<u64> {
    let en = ctx.g.v.endian;
    let g = ctx.g;
    let Some(ino) = alloc_ino(ctx, request)? else {
        return Ok(0);
    };
    let is_root = ino == parent;
    if !is_root && ctx.state(parent) != DFOUND {
        ctx.toggled_inos.remove(&ino);
        return Ok(0);
    }
    let Some(blk) = alloc_frags(ctx, 1) else {
        ctx.toggled_inos.remove(&ino);
        return Ok(0);
    };
    let mut buf = vec![0u8; to_index(g.fsize)];
    empty_chunks(en, &mut buf, 0);
    write_entry(
        en,
        &mut buf[..DIRBLKSIZ],
        0,
        low_u32(ino),
        12,
        dt::DT_DIR,
        b".",
    );
    write_entry(
        en,
        &mut buf[..DIRBLKSIZ],
        12,
        low_u32(parent),
        low_u16(DIRBLKSIZ - 12),
        dt::DT_DIR,
        b"..",
    );
    ctx.write_frags(blk, &buf)?;
    let depth = if is_root {
        0
    } else {
        ctx.dir(parent).map_or(0, |d| d.depth).saturating_add(1)
    };
    let (t, ns) = crate::fs::now();
    let mut di = Dinode::default();
    di.set_di_mode(IFDIR | perm);
    di.set_nlink(2);
    di.set_di_size(g.fsize);
    di.set_di_blocks(g.fsize / 512);
    di.set_di_db(0, blk);
    di.set_di_freelink(depth);
    di.set_di_atime(t);
    di.set_di_mtime(t);
    di.set_di_ctime(t);
    di.set_di_birthtime(t);
    di.set_di_atimensec(ns);
    di.set_di_mtimensec(ns);
    di.set_di_ctimensec(ns);
    di.set_di_birthnsec(ns);
    ctx.write_inode(ino, &mut di)?;
    if let Some(x) = ctx.info_mut(ino) {
        *x = InoInfo {
            state: if is_root { DSTATE } else { DFOUND },
            dtype: dt::DT_DIR,
            linkcnt: if is_root { 2 } else { 1 },
        };
    }
    ctx.add_dir(DirInfo {
        ino,
        parent: if is_root { ino } else { parent },
        dotdot: if is_root { 0 } else { parent },
        dotdot_counted: !is_root,
        size: g.fsize,
        depth,
        first_blk: blk,
        created: true,
    });
    if !is_root {
        let mut p = ctx.read_inode(parent)?;
        p.set_nlink((p.nlink() + 1).min(u16::MAX as u32));
        ctx.write_inode(parent, &mut p)?;
        ctx.children.entry(parent).or_default().push(ino);
    }
    Ok(ino)
}

/// Undoes `allocdir` of a directory that could not be entered anywhere.
pub(crate) fn freedir(ctx: &mut Ctx, ino: u64, parent: u64) -> R<()> {
    if ino != parent {
        let mut p = ctx.read_inode(parent)?;
        p.set_nlink(p.nlink().saturating_sub(1));
        ctx.write_inode(parent, &mut p)?;
        if let Some(v) = ctx.children.get_mut(&parent) {
            v.retain(|&x| x != ino);
        }
    }
    let di = ctx.read_inode(ino)?;
    let blk = di.di_db(0);
    if blk != 0 && !ctx.chkrange(blk, 1) {
        free_frags(ctx, blk, 1);
    }
    let mut z = Dinode::default();
    ctx.write_inode(ino, &mut z)?;
    ctx.set_state(ino, USTATE);
    ctx.toggled_inos.remove(&ino);
    Ok(())
}

/// `#` followed by the inode number zero-padded to the width of the
/// largest inode number (`lftempname`).
fn lftempname(ctx: &Ctx, ino: u64) -> Vec<u8> {
    let width = ctx.maxino().to_string().len();
    format!("#{ino:0width$}").into_bytes()
}

/// Finds or creates lost+found; 0 if there is none to use.
fn lost_and_found(ctx: &mut Ctx, pass: &str) -> R<u64> {
    if ctx.lfdir == 0 {
        if let Some(ino) = lookup(ctx, UFS_ROOTINO, b"lost+found")? {
            ctx.lfdir = ino;
        } else {
            let lf = allocdir(ctx, UFS_ROOTINO, 0, 0o700)?;
            if lf != 0 {
                if makeentry(ctx, UFS_ROOTINO, lf, b"lost+found")? {
                    ctx.dec_link(lf);
                    ctx.lfdir = lf;
                    ctx.ask(
                        pass,
                        Severity::Preen,
                        Some(lf),
                        format!("NO lost+found DIRECTORY; CREATED (I={lf})"),
                    )?;
                } else {
                    freedir(ctx, lf, UFS_ROOTINO)?;
                }
            }
            if ctx.lfdir == 0 {
                ctx.linkup_fail(
                    pass,
                    None,
                    "NO lost+found DIRECTORY AND NONE CAN BE CREATED (no free inode or block)",
                )?;
                return Ok(0);
            }
        }
    }
    let lf = ctx.lfdir;
    if !is_dir_state(ctx.state(lf)) {
        let idx = ctx.findings.len();
        if !ctx.ask(
            pass,
            Severity::Inconsistency,
            Some(lf),
            format!("lost+found (I={lf}) IS NOT A DIRECTORY; REALLOCATE"),
        )? {
            ctx.lfdir = 0;
            ctx.linkup_fail(pass, Some(lf), "lost+found IS NOT A DIRECTORY")?;
            return Ok(0);
        }
        let new = allocdir(ctx, UFS_ROOTINO, 0, 0o700)?;
        if new == 0 || changeino(ctx, UFS_ROOTINO, b"lost+found", new)?.is_none() {
            if new != 0 {
                freedir(ctx, new, UFS_ROOTINO)?;
            }
            ctx.unfix(idx);
            ctx.lfdir = 0;
            ctx.linkup_fail(pass, None, "CANNOT CREATE A NEW lost+found DIRECTORY")?;
            return Ok(0);
        }
        // The old name now names the new directory.
        ctx.inc_link(lf);
        ctx.dec_link(new);
        ctx.recheck.push(lf);
        ctx.lfdir = new;
    }
    let lf = ctx.lfdir;
    if ctx.state(lf) != DFOUND {
        ctx.lfdir = 0;
        ctx.linkup_fail(pass, Some(lf), "lost+found IS NOT REACHABLE FROM THE ROOT")?;
        return Ok(0);
    }
    Ok(lf)
}

/// Enters `orphan` in lost+found (`linkup`); the caller has already asked
/// to reconnect. `dotdot` is what the orphan directory's `..` says.
pub(crate) fn linkup(
    ctx: &mut Ctx,
    pass: &str,
    orphan: u64,
    dotdot: u64,
    name: Option<Vec<u8>>,
) -> R<bool> {
    let lostdir = is_dir_state(ctx.state(orphan));
    let lf = lost_and_found(ctx, pass)?;
    if lf == 0 {
        return Ok(false);
    }
    let name = name.unwrap_or_else(|| lftempname(ctx, orphan));
    if !makeentry(ctx, lf, orphan, &name)? {
        ctx.linkup_fail(pass, Some(orphan), "NO SPACE LEFT IN lost+found DIRECTORY")?;
        return Ok(false);
    }
    ctx.dec_link(orphan);
    if lostdir {
        match changeino(ctx, orphan, b"..", lf)? {
            Some(old) => {
                if ctx.dir(orphan).is_some_and(|d| d.dotdot_counted) {
                    ctx.inc_link(old);
                }
            }
            None => {
                if dotdot != NO_DOTDOT {
                    makeentry(ctx, orphan, lf, b"..")?;
                }
            }
        }
        // The orphan's `..` is one more link to lost+found.
        let mut ld = ctx.read_inode(lf)?;
        ld.set_nlink((ld.nlink() + 1).min(u16::MAX as u32));
        ctx.write_inode(lf, &mut ld)?;
        let old_parent = ctx.dir(orphan).map_or(0, |d| d.parent);
        if let Some(v) = ctx.children.get_mut(&old_parent) {
            v.retain(|&x| x != orphan);
        }
        if let Some(d) = ctx.dir_mut(orphan) {
            d.parent = lf;
            d.dotdot = lf;
            d.dotdot_counted = true;
        }
        ctx.children.entry(lf).or_default().push(orphan);
    }
    Ok(true)
}

/// Truncates a directory to `newsize` (a multiple of the block size),
/// releasing the blocks past it. Used for directories with holes.
pub(crate) fn truncate_dir(ctx: &mut Ctx, ino: u64, newsize: u64) -> R<()> {
    let g = ctx.g;
    let mut di = ctx.read_inode(ino)?;
    let keep = newsize / g.bsize;
    let mut v = TruncFree { keep, freed: 0 };
    walk::walk(ctx, &di, di.di_size(), &mut v)?;
    for i in to_index(keep).min(UFS_NDADDR)..UFS_NDADDR {
        di.set_di_db(i, 0);
    }
    let mut base = UFS_NDADDR as u64;
    let mut span = 1u64;
    for l in 0..UFS_NIADDR {
        span = span.saturating_mul(g.nindir);
        let ib = di.di_ib(l);
        if ib != 0 {
            if keep <= base {
                di.set_di_ib(l, 0);
            } else if keep < base.saturating_add(span) && !ctx.chkrange(ib, g.frag) {
                zero_from(ctx, ib, l + 1, base, keep)?;
            }
        }
        base = base.saturating_add(span);
    }
    di.set_di_size(newsize);
    di.set_di_blocks(di.di_blocks().saturating_sub(v.freed * (g.fsize / 512)));
    ctx.write_inode(ino, &mut di)?;
    if let Some(d) = ctx.dir_mut(ino) {
        d.size = newsize;
    }
    Ok(())
}

fn zero_from(ctx: &mut Ctx, blk: u64, level: usize, base: u64, keep: u64) -> R<()> {
    let g = ctx.g;
    let mut buf = ctx.read_frags(blk, g.frag)?;
    let mut cspan = 1u64;
    for _ in 1..level {
        cspan = cspan.saturating_mul(g.nindir);
    }
    let mut changed = false;
    for i in 0..to_index(g.nindir) {
        let p = g.v.get_ptr(&buf, i);
        if p == 0 {
            continue;
        }
        let cb = base.saturating_add((i as u64).saturating_mul(cspan));
        if cb >= keep {
            g.v.set_ptr(&mut buf, i, 0);
            changed = true;
        } else if level > 1 && keep < cb.saturating_add(cspan) && !ctx.chkrange(p, g.frag) {
            zero_from(ctx, p, level - 1, cb, keep)?;
        }
    }
    if changed {
        ctx.write_frags(blk, &buf)?;
    }
    Ok(())
}

struct TruncFree {
    keep: u64,
    freed: u64,
}

impl Visitor for TruncFree {
    fn visit(&mut self, ctx: &mut Ctx, r: &BlockRef) -> R<Step> {
        let first = match r.kind {
            Kind::Data { lbn } => lbn,
            Kind::Indir { lbn } => lbn,
            Kind::Ext => return Ok(Step::Continue),
        };
        if first >= self.keep {
            Release::all().visit(ctx, r)?;
            self.freed += r.nfrags;
        }
        Ok(if ctx.chkrange(r.blk, r.nfrags) {
            Step::Skip
        } else {
            Step::Continue
        })
    }
}
